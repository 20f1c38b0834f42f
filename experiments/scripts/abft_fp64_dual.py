"""Would a column check beside the row check close the fp64 check's misses? On the NumPy model
(ftgen.families.gemm.abft_model), the fp64 check of C = A B by rows of `cols`-column strips and, independently, the
same check of C^T = B^T A^T (the column check: strips of `rcols` rows), with the same single bit flips (64-bit) of a
partial sum; a fault counts as caught when either check detects it and ends within the fp64 rule's tolerance.

    python experiments/scripts/abft_fp64_dual.py [faults per distribution] [lambda] [cols] [rcols]
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ftgen import tolerance
from ftgen.families.gemm import abft_model as g

from abft_fp64_strips import draw  # (this folder: the script's directory is on sys.path)

M, K, N, KT = 128, 1024, 128, 16


def within(C, exact, S, tol) -> bool:
    return float(np.max(np.abs(C.astype(np.longdouble) - exact) / S)) <= tol


def main() -> int:
    faults = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    lam = float(sys.argv[2]) if len(sys.argv) > 2 else 2.5
    cols = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    rcols = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    tol = tolerance.tolerance("fp64", K)
    kw = dict(kt=KT, interval=K // KT, precision="fp64", recompute="row", fault_at="start", lam=lam, fix="dot")
    sig = by_rows = by_cols = either = 0
    with np.errstate(all="ignore"):  # flips of the exponent's top bits make infinities, as on the GPU
        for dist, seed in (("normal", 11), ("uniform", 12), ("loguniform", 13)):
            rng = np.random.default_rng(seed)
            A, B = draw(rng, (M, K), dist), draw(rng, (K, N), dist)
            exact = A.astype(np.longdouble) @ B.astype(np.longdouble)
            S = np.abs(A) @ np.abs(B)
            for _ in range(faults):
                i, j, step, bit = int(rng.integers(M)), int(rng.integers(N)), int(rng.integers(K // KT)), int(rng.integers(64))
                Cu, _ = g.abft_gemm_model(A, B, faults=[(step, i, j, "bitflip", bit)], no_correct=True, cols=cols, **kw)
                err = float(np.max(np.abs(Cu.astype(np.longdouble) - exact) / S))
                if not (err > tol) and math.isfinite(err):
                    continue
                sig += 1
                Cr, cr = g.abft_gemm_model(A, B, faults=[(step, i, j, "bitflip", bit)], cols=cols, **kw)
                Ct, ct = g.abft_gemm_model(B.T.copy(), A.T.copy(), faults=[(step, j, i, "bitflip", bit)], cols=rcols, **kw)
                r_ok = cr["detected"] >= 1 and within(Cr, exact, S, tol)
                c_ok = ct["detected"] >= 1 and within(Ct.T, exact, S, tol)
                by_rows += r_ok
                by_cols += c_ok
                either += r_ok or c_ok
    print(f"fp64, lambda {lam}: row strips of {cols}, column strips of {rcols}: of {sig} significant faults the row check "
          f"catches {by_rows}, the column check {by_cols}, either {either} ({either / max(sig, 1):.2%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
