"""Does the bf16 / fp16 check's weighted residual detect anything the unweighted one misses? The question behind
`abft_locate: recompute` (the cutlass90 backend's 16-bit ABFT without the weighted sums: a flagged unit's row of the
strip is recomputed instead of one located element corrected).

The model is abft_model's (abft16_check's steps): 16-bit operands, the wgmma's fp32 accumulators (exact products summed
in fp32, 16 k at a time), one 32-bit flip of a random final accumulator (the epilogue leaf's fault), the epilogue's strip
sums, the references from the split encodings, the verdict (abft16_verdict) with the weighted residual as it is and set
to zero. A fault counts where it is significant under ftgen.tolerance's rule for the precision delivered.

    python experiments/scripts/abft16_locate.py [faults per precision and distribution, default 400]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ftgen import tolerance
from ftgen.families.gemm import abft_model as g

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from conftest import draw  # noqa: E402  (the benches' distributions)

M, K, N, COLS = 32, 1024, 256, 128


def main(faults: int) -> None:
    for prec in ("bf16", "fp16"):
        for dist in ("normal", "uniform", "loguniform"):
            rng = np.random.default_rng(7)
            tol = tolerance.tolerance(prec, K)
            sig = full = unweighted = 0
            for _ in range(max(1, faults // 20)):
                A = g.to16(draw(rng, (M, K), dist, decades=1.5), prec)
                B = g.to16(draw(rng, (K, N), dist, decades=1.5), prec)
                exact, scale, acc0, r, rw, unit = g.abft16_problem(A, B, COLS, prec, 16)
                for _ in range(20):
                    i, j, bit = int(rng.integers(M)), int(rng.integers(N)), int(rng.integers(0, 32))
                    acc = acc0.copy()
                    acc[i, j] = g.flip32(acc[i, j], bit)
                    with np.errstate(all="ignore"):
                        err = np.abs(g.to16(acc[i:i + 1, j:j + 1], prec)[0, 0] - exact[i, j]) / scale[i, j]
                        s = j // COLS
                        j0, j1 = s * COLS, min(N, (s + 1) * COLS)
                        P1, PW, PA = g.strip_sums(acc, j0, j1)
                    if np.isfinite(err) and err <= tol:
                        continue
                    sig += 1
                    v, _ = g.abft16_verdict(float(P1[i]), float(PW[i]), float(PA[i]), r[i, s], rw[i, s], unit, j1 - j0)
                    v0, _ = g.abft16_verdict(float(P1[i]), float(rw[i, s]), float(PA[i]), r[i, s], rw[i, s], unit, j1 - j0)
                    full += v != -1
                    unweighted += v0 != -1
            print(f"{prec} {dist}: significant {sig}, detected with the weighted residual {full}, without it {unweighted}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
