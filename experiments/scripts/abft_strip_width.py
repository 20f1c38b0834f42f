"""Coverage of the tf32x3 concurrent check per strip width, lambda and pass-1 rule, on the host-compiled rules
(tests/test_abft_strips.py's Block and shim): strips of 32 / 64 / 128 columns, lambda on fp32's 2^-24, pass 1 on
(d, d_w) as built or on d alone; with the largest clean scores (pass 1 and the full rule), which set the margin
against false alarms.

    python experiments/scripts/abft_strip_width.py [mats] [lambdas, e.g. 1.5,1.0,0.75] [widths, e.g. 32,64,128]
"""
from __future__ import annotations

import ctypes
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import test_abft_strips as t  # noqa: E402
from ftgen import tolerance  # noqa: E402

TB_N, KT = 128, 32
U = 2.0**-24


def _d_score(lib, b, i, s):
    (s1, sw, sq, mx), _, _, _, _ = b.sums(lib, i)
    scale = max(math.sqrt(max(float(sq[s]) - float(mx[s]) ** 2, 0.0)), abs(float(b.r32[i, s])))
    tau = float(b.unit) * scale
    d = float(s1[s]) - float(b.r32[i, s])
    return abs(d) / tau if tau > 0 else (0.0 if d == 0 else math.inf)


def run(lib, dist, seed, cols, lam, mats, per=450, m=128, k=1024):
    rng = np.random.default_rng(seed)
    tol = tolerance.tolerance("tf32x3", k)
    res = {"sig": 0, "det_full": 0, "det_d": 0, "clean_units": 0, "clean_flagged": 0, "clean_rare": 0, "worst1": 0.0, "worst_full": 0.0}
    for _ in range(mats):
        b = t.Block(rng, m, k, TB_N, dist, cols=cols, lam_u=lam * U)
        for i in range(m):
            for s, clean1, v, sc1, sc2 in b.check_row(lib, i):
                res["clean_units"] += 1
                res["clean_flagged"] += v not in (None, -1)
                res["clean_rare"] += not clean1  # (left to the rare path by pass 1)
                res["worst1"] = max(res["worst1"], sc1)
                res["worst_full"] = max(res["worst_full"], sc2)
        for _ in range(per):
            i, j = int(rng.integers(m)), int(rng.integers(TB_N))
            step = int(rng.integers(1, k // KT + 1)) * KT
            part = np.float32(np.dot(b.A[i, :step], b.B[:step, j]))
            delta = float(t.g.flip32(part, int(rng.integers(32)))) - float(part)
            if not math.isfinite(delta):
                continue
            b.C[i, j] = np.float32(float(b.clean[i, j]) + delta)
            if abs(float(b.C[i, j]) - b.exact[i, j]) / b.S[i, j] > tol:
                s = j // cols
                _, clean1, v, _, _ = b.check_row(lib, i)[s]
                sc = ctypes.c_float()
                (s1, sw, sq, mx), (d1, dw), (csq, cmx), nb, bc = b.sums(lib, i)
                vv = lib.verdict(csq[s], cmx[s], int(nb[s]), int(bc[s]), d1[s], dw[s], b.r[i, s], b.rw[i, s], b.r2[i, s],
                                 b.unit, b.rms_w, cols, ctypes.byref(sc))
                ds = _d_score(lib, b, i, s)
                res["sig"] += 1
                res["det_full"] += v is not None and v != -1
                res["det_d"] += (ds > 1.0 or not math.isfinite(ds)) and vv != -1
            b.C[i, j] = b.clean[i, j]
    return res


if __name__ == "__main__":
    mats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    lams = [float(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1.5").split(",")]
    widths = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "32,64,128").split(",")]
    lib = t.build(t.RULES.parent, Path(tempfile.mkdtemp()))
    for cols in widths:
        for lam in lams:
            tot: dict = {}
            for dist, seed in (("normal", 101), ("uniform", 102), ("loguniform", 103)):
                r = run(lib, dist, seed, cols, lam, mats)
                for kk, vv in r.items():
                    tot[kk] = max(tot.get(kk, 0), vv) if kk.startswith("worst") else tot.get(kk, 0) + vv
            print(f"cols {cols:3d} lambda {lam:4.2f}: significant {tot['sig']}, detected {tot['det_full'] / tot['sig']:.4%} "
                  f"(pass 1 on d alone {tot['det_d'] / tot['sig']:.4%}); clean: {tot['clean_flagged']}/{tot['clean_units']} "
                  f"units flagged ({tot['clean_rare']} left to the rare path by pass 1), largest score pass 1 {tot['worst1']:.3f}, full rule {tot['worst_full']:.3f}", flush=True)
