"""A design study for bf16 / fp16 ABFT on the sm90 kernels, before any kernel is written: can the check read the 16-bit
output C (as the cutlass90 tf32x3 check reads C after the GEMM), or must it sum the fp32 accumulators in the epilogue?

The model: A and B rounded to the 16-bit type; the GEMM accumulates exact products in fp32, k-tile by k-tile (64 k per
tile, each tile's partial summed in fp32); C rounded once to the 16-bit type. A fault is a bit flip (32-bit) of one
accumulator's partial sum at a random k-tile. It is significant where the faulty output is beyond ftgen.tolerance's
rule for the precision delivered (fp32 sums plus one rounding of a 16-bit C, relative to |A||B|). The check works on the
rounded C per row of a strip of `cols` columns: d = sum_j c_j - r, dw = sum_j w_j c_j - r' (r, r' in double from the
rounded operands), against

    tau = lam * (u_out * ||c|| + u_acc * (sqrt(k) + sqrt(cols) + 1) * max(|r|, ||c||))

(u_out: the output rounding, whose error on each element is at most u_out |c_j|; u_acc = 2^-24: the fp32 sums),
tau_w = max(tau * rms(w), ...) as abft_model's; a row over it is located as abft_model.abft_classify does (the element
then recomputed from the rounded operands) or its row of the strip recomputed. Per precision, strip width and lambda:
the share of significant faults detected and corrected (per distribution), and the largest clean score (residual /
threshold) -- for the check on the rounded output (`out`) and, for comparison, on the fp32 accumulators before the
rounding (`acc`: what an epilogue that sums them would see; u_out = 0 in its threshold).

    python experiments/scripts/abft_16bit_output_check.py [faults per distribution] [lambdas] [widths] [out,acc]
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ftgen import tolerance
from ftgen.families.gemm import abft_model as g

M, K, N, KT = 64, 1024, 128, 64
U_OUT = {"bf16": 2.0**-9, "fp16": 2.0**-11}  # round to nearest: half the spacing (the rule's u_out is the spacing)
U_ACC = 2.0**-24


to16 = g.to16  # bf16 / fp16 rounding (to nearest even), as float32


def draw(rng, shape, dist, prec):
    if dist == "normal":
        x = rng.standard_normal(shape)
    elif dist == "uniform":
        x = rng.uniform(-1, 1, shape)
    else:  # log-uniform over 10^-1.5 .. 10^1.5 (sums of 1024 products stay within fp16's 65504)
        x = rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-1.5, 1.5, shape)
    return to16(x, prec)


def gemm_tiles(A, B):
    """The fp32 partial sums after each k-tile (steps x M x N) and the final fp32 accumulator."""
    parts = [(A[:, s:s + KT] @ B[s:s + KT]).astype(np.float32) for s in range(0, A.shape[1], KT)]
    acc, out = np.zeros((A.shape[0], B.shape[1]), np.float32), []
    for p in parts:
        acc = (acc + p).astype(np.float32)
        out.append(acc.copy())
    return out


def check_strip(c, r, rw, cols, lam, u_out):
    """(kind, col, score) of one row c (float64) of a strip: abft_model's classification at this threshold."""
    w = np.arange(1, cols + 1, dtype=np.float64)
    norm = float(np.linalg.norm(c))
    tau = lam * (u_out * norm + U_ACC * (math.sqrt(K) + math.sqrt(cols) + 1) * max(abs(r), norm))
    tau_w = g.abft_weighted_threshold(tau, rw, 0.0, cols)  # tau * rms(w): the weighted residual's noise
    d, dw = float(c.sum()) - r, float((w * c).sum()) - rw
    kind, col = g.abft_classify(d, dw, tau, tau_w, cols)
    return kind, col, max(abs(d) / tau, abs(dw) / tau_w)


def main() -> int:
    faults = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    lams = [float(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "3,4,6").split(",")]
    widths = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "32,64,128").split(",")]
    sources = (sys.argv[4] if len(sys.argv) > 4 else "out,acc").split(",")
    for prec, src in ((p, x) for p in ("bf16", "fp16") for x in sources):
        tol = tolerance.tolerance(prec, K)
        u_out = U_OUT[prec] if src == "out" else 0.0
        for cols in widths:
            for lam in lams:
                sig = ok = flags = 0
                worst = 0.0
                per = {}
                for dist, seed in (("normal", 21), ("uniform", 22), ("loguniform", 23)):
                    rng = np.random.default_rng(seed)
                    A, B = draw(rng, (M, K), dist, prec), draw(rng, (K, N), dist, prec)
                    A64, B64 = A.astype(np.float64), B.astype(np.float64)
                    exact, S = A64 @ B64, np.abs(A64) @ np.abs(B64)
                    tiles = gemm_tiles(A, B)
                    C = to16(tiles[-1], prec).astype(np.float64)
                    seen = C if src == "out" else tiles[-1].astype(np.float64)  # what the check reads
                    be, bw, _ = g.abft_encode(B64, cols)
                    R, RW = A64 @ be, A64 @ bw
                    for i in range(M):  # clean rows
                        for t in range(N // cols):
                            kind, _, score = check_strip(seen[i, t * cols:(t + 1) * cols], R[i, t], RW[i, t], cols, lam, u_out)
                            flags += kind != 0
                            worst = max(worst, score)
                    for _ in range(faults):
                        i, j, s, bit = int(rng.integers(M)), int(rng.integers(N)), int(rng.integers(K // KT)), int(rng.integers(32))
                        err = float(g.flip32(tiles[s][i, j], bit)) - float(tiles[s][i, j])
                        final = np.float32(tiles[-1][i, j] + np.float32(err)) if math.isfinite(err) else np.float32(np.inf)
                        row = C[i].copy()
                        with np.errstate(over="ignore", invalid="ignore"):
                            row[j] = float(to16(final, prec))
                        e = abs(row[j] - exact[i, j]) / S[i, j]
                        if not (e > tol):
                            continue
                        sig += 1
                        per.setdefault(dist, [0, 0])[1] += 1
                        t = j // cols
                        if src == "acc":
                            row = seen[i].copy()
                            row[j] = float(final)
                        strip = row[t * cols:(t + 1) * cols]
                        if not np.all(np.isfinite(strip)):
                            hit = int(np.sum(~np.isfinite(strip)) == 1)  # one non-finite element: located, recomputed
                        else:
                            hit = int(check_strip(strip, R[i, t], RW[i, t], cols, lam, u_out)[0] != 0)
                        ok += hit  # located (recomputed from the operands) or the row of the strip recomputed
                        per[dist][0] += hit
                by = ", ".join(f"{d} {a}/{b}" for d, (a, b) in per.items())
                print(f"{prec} {src} strips of {cols:3d}, lambda {lam:4.1f}: {ok}/{sig} significant faults detected "
                      f"({ok / max(sig, 1):.4%}: {by}); clean: {flags} flags, largest score {worst:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
