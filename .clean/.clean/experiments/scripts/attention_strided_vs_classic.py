"""Coverage of the QK^T check, strided (stride 8, the n8 block of the accumulator layout) against a classic checksum
(stride 1: one checksum per row of the tile), on the NumPy model of the kernel (ftgen.families.attention.model), with
the same inputs and the same single bit flips of an S accumulator: per distribution, significant faults (the
uncorrected output beyond the tolerance) and those detected and ending within the tolerance.

    python experiments/scripts/attention_strided_vs_classic.py [trials] [seq] [head_dim]
"""
from __future__ import annotations

import sys

import numpy as np

from ftgen.families.attention import model as M


def main() -> int:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seq = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    d = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    bc = 64
    tot = {s: [0, 0] for s in (8, 1)}
    for dist in ("normal", "uniform", "outlier"):
        rng = np.random.default_rng({"normal": 1, "uniform": 2, "outlier": 3}[dist])
        res = {s: [0, 0] for s in (8, 1)}
        for t in range(trials):
            q, k, v = M.inputs(dist, seq, seq, d, seed=int(rng.integers(1 << 31)))
            f = M.Fault("qk", row=int(rng.integers(seq)), tile=int(rng.integers(seq // bc)), col=int(rng.integers(bc)),
                        kind="bitflip", bit=int(rng.integers(32)))
            for stride in (8, 1):
                ou, _ = M.flash_forward(q, k, v, level="strided", faults=[f], correct=False, stride=stride, bc=bc)
                if not M.max_error(ou, q, k, v, "fp16", False) > 1.0:
                    continue
                oc, c = M.flash_forward(q, k, v, level="strided", faults=[f], stride=stride, bc=bc)
                res[stride][1] += 1
                res[stride][0] += c.detected >= 1 and M.max_error(oc, q, k, v, "fp16", False) <= 1.0
        for s in (8, 1):
            tot[s][0] += res[s][0]
            tot[s][1] += res[s][1]
        print(f"{dist}: strided {res[8][0]}/{res[8][1]}, classic {res[1][0]}/{res[1][1]}", flush=True)
    print(f"all ({trials} faults per distribution, seq {seq}, head dim {d}, fp16): strided {tot[8][0]}/{tot[8][1]} = "
          f"{tot[8][0] / max(tot[8][1], 1):.4f}, classic {tot[1][0]}/{tot[1][1]} = {tot[1][0] / max(tot[1][1], 1):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
