"""ftgen::fft (a protected FFT library through ftgen.torch) against torch.fft.fft (cuFFT) on the same inputs, alternated,
CUDA events, median of REPS, also with the largest detection score recorded (ftgen.torch.record_scores); a provenance
line, one JSON line per shape and type, a short table.

    python experiments/scripts/torch_fft_time.py LIB OUT.jsonl [BATCHxN ...] [--reps N]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import ftgen.torch as ftt
from ftgen.report.provenance import provenance
from torch_timing import alternate  # (this folder)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("out")
    ap.add_argument("shapes", nargs="*", default=["16384x4096", "64x1048576", "262144x256"])
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    lib = ftt.load(a.lib)
    gpu = {"name": torch.cuda.get_device_name(), "driver": None}
    with open(a.out, "w") as out:
        out.write(json.dumps({"provenance": provenance(gpu, sys.argv, python_libraries={"torch": torch.__version__})}) + "\n")
        for token in a.shapes:
            batch, n = (int(x) for x in token.split("x"))
            for dtype in (torch.complex64, torch.complex128):
                x = torch.randn(batch, n, dtype=dtype, device="cuda")
                def scored():  # the same call with the largest detection score recorded (ftgen.torch.record_scores)
                    ftt.record_scores(lib, True)
                    y = torch.ops.ftgen.fft(x, lib)
                    ftt.record_scores(lib, False)
                    return y

                runs = {"ftgen": lambda: torch.ops.ftgen.fft(x, lib), "torch.fft": lambda: torch.fft.fft(x), "ftgen-scores": scored}
                ftt.reset()
                ref = runs["torch.fft"]()
                err = ((runs["ftgen"]() - ref).abs().max() / ref.abs().max()).item()
                med = alternate(runs, a.reps)
                rep = ftt.report(emit=False)[f"{lib}:fft"]
                row = {"shape": {"batch": batch, "n": n}, "dtype": str(dtype).replace("torch.", ""), "ms": med,
                       "err_vs_torch": err, "x_torch": med["torch.fft"] / med["ftgen"],
                       "x_torch_scores": med["torch.fft"] / med["ftgen-scores"], "counters": rep}
                out.write(json.dumps(row) + "\n")
                print(f"{token:14s} {row['dtype']:10s} ftgen {med['ftgen']:.4f} ms  torch.fft {med['torch.fft']:.4f}  "
                      f"x torch {row['x_torch']:.3f}  (scores recorded {row['x_torch_scores']:.3f})  err {err:.1e}  "
                      f"detected {rep['detected']}")


if __name__ == "__main__":
    main()
