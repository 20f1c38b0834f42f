"""The timing loop of the ftgen.torch comparisons (torch_attention_time.py, torch_fft_time.py): every run warmed up,
then REPS rounds in which each run is timed in turn with CUDA events; the median milliseconds per run."""

from __future__ import annotations

import statistics
from typing import Callable

import torch


def alternate(runs: dict[str, Callable[[], object]], reps: int, warmup: int = 3) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(warmup):
        for f in runs.values():
            f()
    for _ in range(reps):
        for name, f in runs.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e))
    return {name: statistics.median(t) for name, t in times.items()}
