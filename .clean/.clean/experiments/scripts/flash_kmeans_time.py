"""Time one Lloyd iteration of flash-kmeans (its Triton assign + sorted centroid update + shift, as its
`batch_kmeans_Euclid` loop runs it) at the k-means shapes, with CUDA events: warm-up, median of reps.

    python3 experiments/scripts/flash_kmeans_time.py OUT.jsonl 1048576x128x1024 1048576x8x128 ...

Shapes are samples x dims x clusters (ftgen's kmeans order). Inputs: N(0, 1) fp32 points, initial centroids
drawn from the points with a fixed seed. One JSON line per shape, after a provenance line.
"""

from __future__ import annotations

import json
import statistics
import sys


def _dist_version(name: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def main(out: str, shapes: list[str], reps: int = 20, warmup: int = 5) -> int:
    import torch
    import flash_kmeans
    from flash_kmeans import kmeans_triton_impl as impl

    from ftgen.report.provenance import provenance

    dev = torch.device("cuda")
    gpu = {"name": torch.cuda.get_device_name(), "driver": None}
    libs = {"torch": torch.__version__, "triton": __import__("triton").__version__,
            "flash_kmeans": getattr(flash_kmeans, "__version__", None) or _dist_version("flash-kmeans")}
    rows = [{"provenance": provenance(gpu, sys.argv, python_libraries=libs)}]
    for text in shapes:
        n, d, k = (int(v) for v in text.split("x"))
        g = torch.Generator(device=dev).manual_seed(7)
        x = torch.randn((1, n, d), device=dev, dtype=torch.float32, generator=g)
        x_sq = (x * x).sum(dim=-1)
        idx = torch.randperm(n, device=dev, generator=g)[:k]
        c0 = x[:, idx, :].clone()
        step = impl._euclid_iter_compiled
        for _ in range(warmup):
            c_new, shift, ids = step(x, x_sq, c0, True)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            c_new, shift, ids = step(x, x_sq, c0, True)
            _ = shift < 0.0  # the loop's convergence test reads the shift on the host
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        # the iteration's result against torch (labels of a sample of points)
        sample = torch.arange(0, n, max(1, n // 4096), device=dev)
        dist = torch.cdist(x[0, sample].double(), c0[0].double())
        ref = dist.argmin(dim=1)
        agree = float((ids.view(-1)[sample] == ref).float().mean())
        rows.append({"shape": {"samples": n, "dims": d, "clusters": k}, "lib": "flash-kmeans",
                     "ms": {"median": statistics.median(times), "min": min(times), "max": max(times), "reps": reps},
                     "label_agreement_fp64": agree})
        print(f"flash-kmeans {text}: {statistics.median(times):.4f} ms per iteration (labels agree with fp64 on {agree:.4%})")
        del x, x_sq, c0, c_new, ids
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
