"""The concurrent threadblock check in fp64 on the NumPy model (ftgen.families.gemm.abft_model): what an fp64 ABFT on
the DMMA kernels would deliver per checksum strip width, before any kernel is written. Per strip width and lambda (on
fp64's 2^-53): clean GEMMs of three distributions (the largest clean score), and single bit flips (64-bit) of a
partial sum at a random k-tile, counted when significant under ftgen.tolerance's fp64 rule, and whether they end
detected and within the tolerance (located and corrected, or their row of the strip recomputed).

    python experiments/scripts/abft_fp64_strips.py [faults per distribution] [lambdas] [widths] [fix] [colscale]
    BANDS=0,0.25,0.33 python experiments/scripts/abft_fp64_strips.py ...   (suspect bands' floors; 0: none)

BANDS: each floor's run rechecks the units that pass the checksum scoring over it (abft_model.abft_gemm_model's band,
the element tolerance abft_model.ABFT_ELEMENT_FRACTION of the rule); it reports the clean units rechecked per unit.
colscale (the fifth argument): B's columns divided by a power of two near their norms first -- the same run as a check
whose weights scale each column of C by 1 / that power (exact in fp64; the significance of a fault does not change).
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from ftgen import tolerance
from ftgen.families.gemm import abft_model as g

M, K, N, KT = 64, 1024, 128, 16
FIX = sys.argv[4] if len(sys.argv) > 4 else "dot"
COLSCALE = len(sys.argv) > 5 and sys.argv[5] == "colscale"  # a located element recomputed from A and B (the kernel's); "checksum": r - the rest of the row


def draw(rng, shape, dist):
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "uniform":
        return rng.uniform(-1, 1, shape)
    return rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-3, 3, shape)  # log-uniform


def main() -> int:
    faults = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    lams = [float(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1.5").split(",")]
    widths = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "32,64,128").split(",")]
    tol = tolerance.tolerance("fp64", K)
    bands = [float(x) for x in os.environ.get("BANDS", "0").split(",")]
    elem_tol = g.abft_element_tol("fp64", K)
    for cols, lam, band in ((c, l, b) for c in widths for l in lams for b in bands):
        kw = dict(cols=cols, kt=KT, interval=K // KT, precision="fp64", recompute="row", fault_at="start", lam=lam, fix=FIX,
                  band=band, elem_tol=elem_tol)
        sig = ok = clean_flags = rechecks = 0
        miss_scores = []
        worst = 0.0
        for dist, seed in (("normal", 11), ("uniform", 12), ("loguniform", 13)):
            rng = np.random.default_rng(seed)
            A, B = draw(rng, (M, K), dist), draw(rng, (K, N), dist)
            if COLSCALE:
                B = B / 2.0 ** np.round(np.log2(np.sqrt((B * B).sum(axis=0))))
            exact = A.astype(np.longdouble) @ B.astype(np.longdouble)
            S = np.abs(A) @ np.abs(B)
            _, c = g.abft_gemm_model(A, B, **kw)
            clean_flags += c["detected"]
            rechecks += c["rechecked"]
            worst = max(worst, c["max_score"])
            for _ in range(faults):
                i, j, step, bit = int(rng.integers(M)), int(rng.integers(N)), int(rng.integers(K // KT)), int(rng.integers(64))
                f = [(step, i, j, "bitflip", bit)]
                Cu, _ = g.abft_gemm_model(A, B, faults=f, no_correct=True, **kw)
                err = float(np.max(np.abs(Cu.astype(np.longdouble) - exact) / S))
                if not (err > tol) and math.isfinite(err):
                    continue
                sig += 1
                Cc, cc = g.abft_gemm_model(A, B, faults=f, **kw)
                errc = float(np.max(np.abs(Cc.astype(np.longdouble) - exact) / S))
                good = cc["detected"] >= 1 and errc <= tol
                ok += good
                if not good:
                    miss_scores.append(round(cc["max_score"], 3))
        units = 3 * M * -(-N // cols)
        print(f"fp64 strips of {cols:3d}, lambda {lam:4.2f}, band {band:.3f}: {ok}/{sig} significant faults detected and "
              f"within tolerance ({ok / max(sig, 1):.4%}); clean: {clean_flags} detections, largest score {worst:.3f}, "
              f"{rechecks}/{units} units rechecked; misses' scores {sorted(miss_scores)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
