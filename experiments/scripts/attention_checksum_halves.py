"""Would the efta checks keep their coverage with half the checksum columns? The strided checksums of V (the O check)
are fp32 sums split into two 16-bit halves (hi, lo), so that the product P Vc sees them to u_in^2; dropping the lo
halves would save 8 of V's 32 checksum columns, but the checksum then carries its own 16-bit rounding, so the O
threshold must grow by u_in times the row's P-weighted group magnitude. K's checksum (the S check) is built with one
16-bit row a group (model.k_checksums: its rounding is in s_threshold), so its site reports the kernels' scheme both
ways. This runs the NumPy model of the kernel (ftgen.families.attention.model) both ways on the same inputs and the
same single bit flips of an S or O accumulator: per distribution and site, the significant faults (the uncorrected
output beyond the tolerance) and those detected and ending within the tolerance, and the clean runs' detections and
largest score.

    python experiments/scripts/attention_checksum_halves.py [trials] [seq] [head_dim] [fp16|bf16]
"""
from __future__ import annotations

import sys

import numpy as np

from ftgen.families.attention import model as M

_split16, _o_threshold = M.split16, M.o_threshold


def hi_only(on: bool) -> None:
    """Switch the model between V's two halves (as built) and the hi half alone with the grown O threshold."""
    if not on:
        M.split16, M.o_threshold = _split16, _o_threshold
        return
    M.split16 = lambda c, precision: (M.round_to(c, precision), np.zeros_like(np.asarray(c, dtype=np.float32)))
    M.o_threshold = lambda mag, n_keys, n_tiles, nl, precision: (_o_threshold(mag, n_keys, n_tiles, nl, precision)
                                                                + M.U_IN[precision] * mag)


def main() -> int:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    seq = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    d = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    precision = sys.argv[4] if len(sys.argv) > 4 else "fp16"
    bc = 128
    schemes = ("hi+lo", "hi")
    total = {(s, site): [0, 0] for s in schemes for site in ("qk", "o")}
    clean = {s: 0 for s in schemes}
    worst = {s: 0.0 for s in schemes}
    for dist in ("normal", "uniform", "outlier"):
        rng = np.random.default_rng({"normal": 11, "uniform": 12, "outlier": 13}[dist])
        q, k, v = M.inputs(dist, seq, seq, d, seed=int(rng.integers(1 << 31)))
        for s in schemes:
            hi_only(s == "hi")
            c = M.flash_forward(q, k, v, precision=precision, level="efta", bc=bc)[1]
            clean[s] += c.detected
            worst[s] = max(worst[s], c.max_score)
        res = {(s, site): [0, 0] for s in schemes for site in ("qk", "o")}
        for site in ("qk", "o"):
            for _ in range(trials):
                q, k, v = M.inputs(dist, seq, seq, d, seed=int(rng.integers(1 << 31)))
                col = int(rng.integers(bc if site == "qk" else d))
                f = M.Fault(site, row=int(rng.integers(seq)), tile=int(rng.integers(seq // bc)), col=col, kind="bitflip",
                            bit=int(rng.integers(32)))
                hi_only(False)
                ou, _ = M.flash_forward(q, k, v, precision=precision, level="efta", faults=[f], correct=False, bc=bc)
                if not M.max_error(ou, q, k, v, precision, False) > 1.0:
                    continue
                for s in schemes:
                    hi_only(s == "hi")
                    oc, c = M.flash_forward(q, k, v, precision=precision, level="efta", faults=[f], bc=bc)
                    res[(s, site)][1] += 1
                    res[(s, site)][0] += c.detected >= 1 and M.max_error(oc, q, k, v, precision, False) <= 1.0
        hi_only(False)
        for key, (a, b) in res.items():
            total[key][0] += a
            total[key][1] += b
        print(f"{dist}: " + ", ".join(f"{s} {site} {res[(s, site)][0]}/{res[(s, site)][1]}" for s in schemes for site in ("qk", "o")),
              flush=True)
    print(f"all ({trials} flips per distribution and site, seq {seq}, head dim {d}, {precision}, efta, block_n {bc}):")
    for s in schemes:
        print(f"  {s}: " + ", ".join(f"{site} {total[(s, site)][0]}/{total[(s, site)][1]} = "
                                     f"{total[(s, site)][0] / max(total[(s, site)][1], 1):.4f}" for site in ("qk", "o"))
              + f"; clean detections {clean[s]}, largest clean score {worst[s]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
