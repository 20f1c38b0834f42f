"""The tf32 threadblock ABFT of the cutlass90 backend on the model: which faults does a check of a whole tile's columns
(the 16-bit check's design: fp32 accumulator sums in the epilogue, kw = 8 for the TF32 wgmma, lambda 0.5) see, judged by
the fp32-level rule of the rounded operands and by tf32's delivered rule (its input rounding counted: tolerance.for_row)?

The model is abft_model's (abft16_check's steps): TF32-rounded operands, the wgmma's fp32 accumulators (exact products
summed in fp32, 8 k at a time), one 32-bit flip of a random final accumulator, the strip sums, the references from the
split encodings, the verdict. Prints per distribution the detected / significant faults under both rules and the
largest clean score.

    python experiments/scripts/abft_tf32_model.py [faults per distribution, default 600] [k, 1024] [strip columns, 128]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ftgen import tolerance
from ftgen.families.gemm import abft_model as g

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from conftest import draw  # noqa: E402  (the benches' distributions)


def main(faults: int, K: int, cols: int) -> None:
    M, N, prec = 32, 256, "tf32"
    for dist in ("normal", "uniform", "loguniform"):
        rng = np.random.default_rng(7)
        tol_r = tolerance.tolerance(prec, K)
        tol_u = tolerance.tolerance(prec, K, rounded_reference=False)
        sig_r = sig_u = det_r = det_u = 0
        clean = 0.0
        for _ in range(max(1, faults // 20)):
            A = g.to16(draw(rng, (M, K), dist, decades=1.5), prec)
            B = g.to16(draw(rng, (K, N), dist, decades=1.5), prec)
            exact, scale, acc0, r, rw, unit = g.abft16_problem(A, B, cols, prec, 8)
            for s in range(N // cols):
                P1, PW, PA = g.strip_sums(acc0, s * cols, (s + 1) * cols)
                for i in range(M):
                    _, sc = g.abft16_verdict(float(P1[i]), float(PW[i]), float(PA[i]), r[i, s], rw[i, s], unit, cols)
                    clean = max(clean, sc)
            for _ in range(20):
                i, j, bit = int(rng.integers(M)), int(rng.integers(N)), int(rng.integers(0, 32))
                acc = acc0.copy()
                acc[i, j] = g.flip32(acc[i, j], bit)
                with np.errstate(all="ignore"):
                    err = np.abs(acc[i, j] - exact[i, j]) / scale[i, j]
                    s = j // cols
                    P1, PW, PA = g.strip_sums(acc, s * cols, (s + 1) * cols)
                v, _ = g.abft16_verdict(float(P1[i]), float(PW[i]), float(PA[i]), r[i, s], rw[i, s], unit, cols)
                bad = not np.isfinite(err)
                if bad or err > tol_r:
                    sig_r += 1
                    det_r += v != -1
                if bad or err > tol_u:
                    sig_u += 1
                    det_u += v != -1
        print(f"{dist}: fp32-level rule {det_r}/{sig_r}; tf32's delivered rule {det_u}/{sig_u}; largest clean score {clean:.3f}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]) if a else 600, int(a[1]) if len(a) > 1 else 1024, int(a[2]) if len(a) > 2 else 128)
