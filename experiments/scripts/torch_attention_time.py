"""ftgen::attention (a protected attention library through ftgen.torch) against torch SDPA's FLASH and cuDNN backends
on the same inputs, alternated, CUDA events, median of REPS; a provenance line, one JSON line per shape, a short table.

    python experiments/scripts/torch_attention_time.py LIB OUT.jsonl [BxHxLxD ...] [--causal] [--reps N]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import ftgen.torch as ftt
from ftgen.report.provenance import provenance
from torch_timing import alternate  # (this folder)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("shapes", nargs="*", default=["4x32x4096x128", "4x16x4096x64"])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    lib = ftt.load(a.lib)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    gpu = {"name": torch.cuda.get_device_name(), "driver": None}
    with open(a.out, "w") as out:
        out.write(json.dumps({"provenance": provenance(gpu, sys.argv, python_libraries={
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()})}) + "\n")
        for token in a.shapes:
            b, h, n, d = (int(x) for x in token.split("x"))
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
            runs = {"ftgen": lambda: torch.ops.ftgen.attention(q, k, v, lib, a.causal)}
            for name, backend in (("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)):
                def run(backend=backend):
                    with sdpa_kernel(backend):
                        return sdpa(q, k, v, is_causal=a.causal)
                runs[name] = run
            ref = runs["sdpa-flash"]().float()
            err = ((runs["ftgen"]().float() - ref).abs().max() / ref.abs().max()).item()
            med = alternate(runs, a.reps)
            row = {"shape": token, "causal": a.causal, "ms": med, "err_vs_flash": err,
                   "x_flash": med["sdpa-flash"] / med["ftgen"], "x_cudnn": med["sdpa-cudnn"] / med["ftgen"],
                   "counters": ftt.report(emit=False)}
            out.write(json.dumps(row) + "\n")
            print(f"{token:16s} causal={a.causal!s:5s} ftgen {med['ftgen']:.3f} ms  flash {med['sdpa-flash']:.3f}  "
                  f"cudnn {med['sdpa-cudnn']:.3f}  x flash {row['x_flash']:.3f}  x cudnn {row['x_cudnn']:.3f}  err {err:.2e}")


if __name__ == "__main__":
    main()
