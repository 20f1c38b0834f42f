"""Time torch's scaled_dot_product_attention backends (FLASH = FlashAttention-2, CUDNN) at attention shapes, with
CUDA events: warm-up, median of reps, the two backends alternated rep by rep. The vendor references of the attention
family, run in the same device call as `ftgen bench` (a Python process beside the C++ executables).

    python3 experiments/scripts/sdpa_time.py OUT.jsonl [--dtype fp16|bf16] [--causal] 4x32x4096x128 1x16x16384x64 ...

Shapes are batch x heads x seq x head_dim. One JSON line per shape and backend after a provenance line; a backend
that refuses a shape is recorded with its error. FLOP count: 4 b h L^2 d (half of it causal).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from ftgen.report.provenance import provenance

    dt = torch.float16 if a.dtype == "fp16" else torch.bfloat16
    backends = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION}
    gpu = {"name": torch.cuda.get_device_name(), "driver": None}
    rows = [{"provenance": provenance(gpu, sys.argv, python_libraries={"torch": torch.__version__,
                                                                       "cudnn": torch.backends.cudnn.version()})}]
    for text in a.shapes:
        b, h, L, d = (int(v) for v in text.split("x"))
        g = torch.Generator(device="cuda").manual_seed(7)
        q, k, v = (torch.randn((b, h, L, d), device="cuda", dtype=dt, generator=g) for _ in range(3))
        flop = 4.0 * b * h * L * L * d * (0.5 if a.causal else 1.0)
        ref = None
        fns, errs = {}, {}
        for name, be in backends.items():
            def run(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
            try:
                out = run()
                torch.cuda.synchronize()
            except RuntimeError as e:  # the backend does not take this shape / type
                errs[name] = str(e).splitlines()[0][:300]
                continue
            if ref is None:
                ref = out.float()
            fns[name] = (run, float((out.float() - ref).abs().max()))
        times: dict[str, list[float]] = {n: [] for n in fns}
        for _ in range(a.warmup):
            for run, _ in fns.values():
                run()
        torch.cuda.synchronize()
        for _ in range(a.reps):  # alternated: one rep of each backend in turn
            for n, (run, _) in fns.items():
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                run()
                e.record()
                torch.cuda.synchronize()
                times[n].append(s.elapsed_time(e))
        shape = {"batch": b, "heads": h, "seq": L, "head_dim": d, "causal": a.causal, "dtype": a.dtype}
        for n, ts in times.items():
            med = statistics.median(ts)
            rows.append({"shape": shape, "lib": n, "ms": {"median": med, "min": min(ts), "max": max(ts), "reps": a.reps},
                         "tflops": flop / med / 1e9, "max_abs_diff_vs_first": fns[n][1], "alternated": True})
            print(f"{n} {text}{' causal' if a.causal else ''}: {med:.4f} ms, {flop / med / 1e9:.0f} TFLOP/s")
        for n, msg in errs.items():
            rows.append({"shape": shape, "lib": n, "error": msg})
            print(f"{n} {text}: refused ({msg})")
        del q, k, v, ref
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
