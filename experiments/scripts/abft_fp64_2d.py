"""Would column checksums beside the row checksums lift the fp64 check's coverage? The NumPy model of the fp64
check (ftgen.families.gemm.abft_model, as experiments/scripts/abft_fp64_strips.py runs it), on the same inputs and
single bit flips of a partial sum: a significant fault counts as caught by the rows when its row of the strip is
flagged, by the columns when its column of a strip of rows is flagged (the same rule on C^T = B^T A^T, a reference
(e^T A) B per strip of ``rows``), and by both together when either is.

    python experiments/scripts/abft_fp64_2d.py [faults per distribution] [lambda] [strip columns] [strip rows]
"""
from __future__ import annotations

import math
import sys

import numpy as np

from abft_fp64_strips import K, KT, N, draw
from ftgen import tolerance
from ftgen.families.gemm import abft_model as g

M = 128  # rows: a whole strip of 128 rows for the column checksums


def flagged(C, A, B, cols: int, lam: float) -> set[int]:
    """The rows of C (= A B) that a strip of ``cols`` columns flags under the fp64 rule."""
    be, bw, b2 = g.abft_encode(B, cols)
    r, rw, r2 = A @ be, A @ bw, (A * A) @ b2
    out = set()
    for t in range(be.shape[1]):
        found, _ = g.abft_verify_rows(C[:, t * cols:(t + 1) * cols], r[:, t], rw[:, t], r2[:, t], K, "fp64", lam)
        out |= {i for (i, _, _) in found}
    return out


def main() -> int:
    faults = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    lam = float(sys.argv[2]) if len(sys.argv) > 2 else g.ABFT64_LAMBDA
    cols = int(sys.argv[3]) if len(sys.argv) > 3 else g.ABFT64_STRIP_COLS
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    tol = tolerance.tolerance("fp64", K)
    kw = dict(cols=cols, kt=KT, interval=K // KT, precision="fp64", recompute="row", fault_at="start", lam=lam, fix="dot")
    sig = by_rows = by_cols = by_either = clean = 0
    for dist, seed in (("normal", 11), ("uniform", 12), ("loguniform", 13)):
        rng = np.random.default_rng(seed)
        A, B = draw(rng, (M, K), dist), draw(rng, (K, N), dist)
        exact = A.astype(np.longdouble) @ B.astype(np.longdouble)
        S = np.abs(A) @ np.abs(B)
        C0, _ = g.abft_gemm_model(A, B, no_correct=True, **kw)
        clean += len(flagged(C0, A, B, cols, lam)) + len(flagged(C0.T.copy(), B.T.copy(), A.T.copy(), rows, lam))
        for _ in range(faults):
            i, j, step, bit = int(rng.integers(M)), int(rng.integers(N)), int(rng.integers(K // KT)), int(rng.integers(64))
            Cu, _ = g.abft_gemm_model(A, B, faults=[(step, i, j, "bitflip", bit)], no_correct=True, **kw)
            with np.errstate(all="ignore"):
                err = float(np.max(np.abs(Cu.astype(np.longdouble) - exact) / S))
            if not (err > tol) and math.isfinite(err):
                continue
            sig += 1
            with np.errstate(all="ignore"):
                r = i in flagged(Cu, A, B, cols, lam)
                c = j in flagged(Cu.T.copy(), B.T.copy(), A.T.copy(), rows, lam)
            by_rows, by_cols, by_either = by_rows + r, by_cols + c, by_either + (r or c)
    print(f"fp64, strips of {cols} columns and of {rows} rows, lambda {lam}: of {sig} significant faults the rows flag "
          f"{by_rows} ({by_rows / sig:.2%}), the columns {by_cols} ({by_cols / sig:.2%}), either {by_either} "
          f"({by_either / sig:.2%}); clean flags {clean}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
