"""How much of the fp32-level significance can a row-strip checksum see? A NumPy emulation of the tf32x3
threadblock ABFT check (pass-1 sums per row and 32-column strip against a reference A (B e)), with single bit flips
of an accumulator's partial sum, judged by the fp32-level rule of ftgen/tolerance.py.

    python3 experiments/scripts/tf32x3_detection_model.py [--trials 2000] [--m 512 --n 512 --k 1024]

fp32 stands in for tf32x3 (both deliver fp32-level products and fp32 sums); the pass-1 sums, the encodings and the
reference product are fp32 like the kernel's. Variants of the check, each over the same faults:

* unit:    the kernel's check: sum_j c_ij - r_i per strip, tau = 2 u (sqrt(k) + sqrt(32) + 1) scale;
* colscale: the same with every column j weighted by d_j = 2^-e_j, e_j the exponent of max_k |B_kj| (exact scaling):
           sum_j d_j c_ij - A_i (B d)_strip, tau from the scaled row;
* lambda:  either of them with the threshold lowered to `--lam` (a first stage whose flagged rows a second stage would
           decide exactly).

Prints per distribution: significant faults, detected, coverage; and the largest clean score (the margin).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

U = 2.0**-24


def rand(rng, shape, dist):
    u = rng.random(shape)
    if dist == "uniform":
        return 2 * u - 1
    if dist == "loguniform":
        return np.where(rng.random(shape) < 0.5, -1, 1) * 10.0 ** (-3 + 6 * u)
    return rng.standard_normal(shape)


def flip(x: np.float32, bit: int) -> np.float32:
    b = np.array([x], dtype=np.float32).view(np.uint32)
    b ^= np.uint32(1 << bit)
    return b.view(np.float32)[0]


def strip_scores(C, A, B, d, cols, lam, k):
    """Scores |sum - r| / tau of every (row, strip) for weights d (n,), and the pieces to re-score a faulty strip."""
    m, n = C.shape
    strips = n // cols
    Cd = (C * d).astype(np.float32)
    Bd = (B * d).astype(np.float32)
    be = Bd.reshape(k, strips, cols).sum(axis=2, dtype=np.float32)          # encodings, fp32
    r = (A @ be).astype(np.float32)                                          # reference product, fp32
    blocks = Cd.reshape(m, strips, cols)
    s = blocks.sum(axis=2, dtype=np.float32)                                 # pass-1 sums, fp32
    sq = blocks.astype(np.float64) ** 2
    robust = np.sqrt(np.maximum(sq.sum(axis=2) - sq.max(axis=2), 0))
    b2 = (Bd.astype(np.float64) ** 2).reshape(k, strips, cols).sum(axis=2)
    r2 = (A.astype(np.float64) ** 2) @ b2
    scale = np.maximum(np.maximum(np.sqrt(r2), np.abs(r.astype(np.float64))), robust)
    tau = lam * U * (math.sqrt(k) + math.sqrt(cols) + 1) * scale
    return s, r, tau


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=2000, help="faults per distribution")
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--lam", type=float, nargs="*", default=[2.0, 0.5])
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    k, kt = a.k, 32
    tol = U * ((7 * math.sqrt(2) / 3) * math.sqrt(k) + 16)
    print(f"fp32-level tolerance at k={k}: {tol:.3g}; strips of {a.cols} columns")
    for dist in ("normal", "uniform", "loguniform"):
        res: dict[str, list[int]] = {}
        max_clean: dict[str, float] = {}
        faults_per_matrix = 200
        for _ in range(max(1, a.trials // faults_per_matrix)):
            A = rand(rng, (a.m, k), dist).astype(np.float32)
            B = rand(rng, (k, a.n), dist).astype(np.float32)
            C = (A @ B).astype(np.float32)
            S = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
            colmax = np.abs(B).max(axis=0)
            weights = {"unit": np.ones(a.n, np.float32),
                       "colscale": np.float32(2.0) ** (-np.floor(np.log2(colmax))).astype(np.float32)}
            pre = {}
            for wn, d in weights.items():
                for lam in a.lam:
                    s, r, tau = strip_scores(C, A, B, d, a.cols, lam, k)
                    key = f"{wn} lam {lam:g}"
                    pre[key] = (s, r, tau, d)
                    max_clean[key] = max(max_clean.get(key, 0.0), float(np.max(np.abs(s.astype(np.float64) - r) / tau)))
            for _ in range(faults_per_matrix):
                i, j = int(rng.integers(a.m)), int(rng.integers(a.n))
                step = int(rng.integers(1, k // kt + 1)) * kt
                partial = np.float32(np.dot(A[i, :step], B[:step, j]))
                bit = int(rng.integers(32))
                delta = float(flip(partial, bit)) - float(partial)
                if not math.isfinite(delta):
                    continue
                significant = abs(delta) / S[i, j] > tol
                for key, (s, r, tau, d) in pre.items():
                    st = j // a.cols
                    resid = float(s[i, st]) + float(d[j]) * delta - float(r[i, st])
                    det = not (abs(resid) <= tau[i, st])
                    got = res.setdefault(key, [0, 0])
                    if significant:
                        got[0] += 1
                        got[1] += det
        for key, (sig, det) in res.items():
            print(f"{dist:10s} {key:18s} significant {sig:5d} detected {det:5d} coverage {det / max(sig, 1):8.4%}   max clean score {max_clean[key]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
