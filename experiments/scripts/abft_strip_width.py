"""Coverage of the tf32x3 concurrent check per strip width and pass-1 rule, on the host-compiled rules
(tests/test_abft_strips.py's Block and shim): strips of 32 / 64 / 128 columns, pass 1 on (d, d_w) or on d alone.

    python experiments/scripts/abft_strip_width.py [mats]
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


def run(lib, dist, seed, cols, mats, per=450, m=128, k=1024):
    rng = np.random.default_rng(seed)
    tol = tolerance.tolerance("tf32x3", k)
    res = {"sig": 0, "det_full": 0, "det_d": 0, "clean_flag_d": 0, "clean_units": 0, "worst_d": 0.0}
    for _ in range(mats):
        b = t.Block(rng, m, k, TB_N, dist, cols=cols)
        # clean pass-1 scores of d alone (the rare-path rate)
        for i in range(m):
            for s, clean1, v, sc1, sc2 in b.check_row(lib, i):
                d = _d_score(lib, b, i, s)
                res["worst_d"] = max(res["worst_d"], d)
                res["clean_flag_d"] += d > 1.0
                res["clean_units"] += 1
        for _ in range(per):
            i, j = int(rng.integers(m)), int(rng.integers(TB_N))
            step = int(rng.integers(1, k // KT + 1)) * KT
            part = np.float32(np.dot(b.A[i, :step], b.B[:step, j]))
            delta = float(t.flip(part, int(rng.integers(32)))) - float(part)
            if not math.isfinite(delta):
                continue
            b.C[i, j] = np.float32(float(b.clean[i, j]) + delta)
            if abs(float(b.C[i, j]) - b.exact[i, j]) / b.S[i, j] > tol:
                s = j // cols
                _, clean1, v, _, _ = b.check_row(lib, i)[s]
                # the verdict regardless of pass 1 (what the rare path decides when it sees the unit)
                sc = ctypes.c_float()
                (s1, sw, sq, mx), (d1, dw), (csq, cmx), nb, bc = b.sums(lib, i)
                vv = lib.verdict(csq[s], cmx[s], int(nb[s]), int(bc[s]), d1[s], dw[s], b.r[i, s], b.rw[i, s], b.r2[i, s],
                                 b.unit, b.rms_w, cols, ctypes.byref(sc))
                res["sig"] += 1
                res["det_full"] += v is not None and v != -1
                res["det_d"] += (_d_score(lib, b, i, s) > 1.0 or not math.isfinite(_d_score(lib, b, i, s))) and vv != -1
            b.C[i, j] = b.clean[i, j]
    return res


def _d_score(lib, b, i, s):
    (s1, sw, sq, mx), _, _, _, _ = b.sums(lib, i)
    scale = max(math.sqrt(max(float(sq[s]) - float(mx[s]) ** 2, 0.0)), abs(float(b.r32[i, s])))
    tau = float(b.unit) * scale
    d = float(s1[s]) - float(b.r32[i, s])
    return abs(d) / tau if tau > 0 else (0.0 if d == 0 else math.inf)


if __name__ == "__main__":
    mats = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    lib = t.build(t.RULES.parent, Path(tempfile.mkdtemp()))
    for cols in (32, 64, 128):
        tot = {}
        for dist, seed in (("normal", 101), ("uniform", 102), ("loguniform", 103)):
            r = run(lib, dist, seed, cols, mats)
            print(cols, dist, r, flush=True)
            for kk, vv in r.items():
                tot[kk] = max(tot.get(kk, 0), vv) if kk == "worst_d" else tot.get(kk, 0) + vv
        print(f"cols {cols}: sig {tot['sig']} full {tot['det_full'] / tot['sig']:.4%} d-only {tot['det_d'] / tot['sig']:.4%} "
              f"clean d flagged {tot['clean_flag_d']}/{tot['clean_units']} worst {tot['worst_d']:.3f}", flush=True)
