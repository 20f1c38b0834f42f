"""The exp check's floor on the NumPy model (ftgen.families.attention.model): fp16 efta at each floor (log2; -14 is
fp16's smallest normal value, -15 the floor the kernels take with its band relief, rules.P_FLOOR / exp_band_relief),
single bit flips of P after its conversion (p16) or of the exp before it (exp) at random places, outlier inputs
(N(0,1) with one element in 1000 from N(0,100)); significant faults detected and corrected, and the clean runs' largest
score.

    python experiments/scripts/attention_exp_floor.py [faults per site] [floors] [seq] [head_dim]
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from ftgen.families.attention import model as M


def main() -> int:
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # exponent flips make infinities, as on the GPU
    faults = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    floors = [float(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "-14,-15").split(",")]
    seq = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    d = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    bc = 128
    for floor in floors:
        M.P_FLOOR["fp16"] = floor
        clean = 0.0
        for seed in range(3):
            q, k, v = M.inputs("outlier", seq, seq, d, seed=seed)
            _, c = M.flash_forward(q, k, v, precision="fp16", level="efta", bc=bc)
            assert c.detected == 0, (floor, seed)
            clean = max(clean, c.max_score)
        for site in ("p16", "exp"):
            rng = np.random.default_rng(7)
            sig = ok = 0
            for t in range(faults):
                q, k, v = M.inputs("outlier", seq, seq, d, seed=100 + t % 5)
                f = M.Fault(site, int(rng.integers(seq)), int(rng.integers(seq // bc)), int(rng.integers(bc)), "bitflip",
                            int(rng.integers(16 if site == "p16" else 32)))
                o0, _ = M.flash_forward(q, k, v, precision="fp16", level="efta", bc=bc, faults=[f], correct=False)
                if not M.max_error(o0, q, k, v, "fp16", False) > 1.0:
                    continue
                sig += 1
                o, c = M.flash_forward(q, k, v, precision="fp16", level="efta", bc=bc, faults=[f])
                ok += c.detected >= 1 and M.max_error(o, q, k, v, "fp16", False) <= 1.0
            print(f"floor 2^{floor:g}, {site}: {ok}/{sig} significant faults corrected", flush=True)
        print(f"floor 2^{floor:g}: clean outlier runs: 0 detections, largest score {clean:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
