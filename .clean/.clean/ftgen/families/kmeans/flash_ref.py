"""flash-kmeans beside a kmeans variant: a reference timed alternately with the kernel, in one process, on the
benchmark executable's own data.

`ftgen bench` runs a kmeans variant's executable (it times the kernel, its unprotected twin and the cuBLAS Lloyd
iteration alternately) and then, on the same GPU, this module as a driver process (:mod:`ftgen.bench.refs`)::

    python -m ftgen.families.kmeans.flash_ref PROJECT KERNEL --shapes 1048576x128x1024,... \\
        [--reps N] [--warmup N] [--seed S] [--dist normal|uniform|loguniform|outliers]

The driver compiles the variant's library source (what its executable links) with a small C shim around the kmeans
bench adapter (``templates/kmeans/ftgen_kmeans_bench.h``) into a shared object under ``PROJECT/build/refs/``, with
the flags and architectures of the executable's build, and loads it with ctypes. Per shape it sets the adapter up and
fills its input sets as the executable does (the same seed, ``--dist`` or ``FTGEN_KMEANS_DATA=blobs``, and rotation
of sets over 3x L2), then times, alternately with CUDA events on the default stream (warm-up; per repetition each
once, in turn; medians):

* the kernel: the adapter's ``launch(set)``, the executable's timed unit (one Lloyd iteration, ``max_iters = 1``,
  the sample norms included);
* flash-kmeans: ``batch_kmeans_Euclid(x, clusters, max_iters=1, init_centroids=c)`` of its Triton implementation,
  one Lloyd iteration as a call runs it (the sample norms, assign, sorted update, shift, and the convergence test
  that reads the shift on the host).

Both read the same X (the adapter's buffers, seen by torch without a copy) and start from the same C0; each then
moves its own centroids. A pad kernel (``torch.cuda._sleep``) runs before each timed segment, so that launches are
queued before its start event fires, as the executable's queue keeps them. flash-kmeans computes in TF32 (Triton's
``tl.dot`` on fp32), so it is timed for the fp32-stored precisions (tf32, tf32x3) only.

``ftgen build --lib`` is not used: its entry point ``kmeans_<precision>`` chooses among the project's variants of a
precision by shape (protected ones first), so it cannot time a named variant, and it does not give the executable's
inputs.

The driver prints one JSON line per shape: ``{"ref": "flash-kmeans", "shape": ..., "ms": ..., "kernel_ms": ...}``
with min, max, reps and detail, or ``unavailable`` with the reason instead of a time (torch or flash-kmeans missing,
flash-kmeans without its Triton implementation, no GPU, a build failure, labels that disagree with fp64). Exit code 0
when it printed its lines, 2 on bad input (a message, no traceback), 1 on anything else.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from pathlib import Path

from ...bench import ctypes_driver as drv
from ...bench.ctypes_driver import DeviceArray as _DeviceArray
from ...bench.ctypes_driver import importable as _importable
from ...bench.ctypes_driver import version as _version
from ...errors import SpecError

NAME = "flash-kmeans"
DRIVER = "ftgen.families.kmeans.flash_ref"  # this module, run with python -m
PRECISIONS = ("tf32", "tf32x3")  # stored as fp32: what flash-kmeans takes
# Labels of flash-kmeans must agree with fp64 nearest centroids on at least this share of the sampled points (TF32
# near-ties make it a little less than 1); below it the result is wrong and its time is no reference.
AGREEMENT_FLOOR = 0.99
AGREEMENT_POINTS = 4096
CALL = "batch_kmeans_Euclid(x, clusters, max_iters=1, init_centroids=c)"


# --------------------------------------------------------------------------------------------
# The bench hook (ftgen.bench.refs): cheap checks and the driver's command line; no torch here.
# --------------------------------------------------------------------------------------------


class FlashKmeansRef(drv.DriverReference):
    """flash-kmeans as a reference of `ftgen bench` (:mod:`ftgen.bench.refs`)."""

    name = NAME
    driver = DRIVER
    precisions = PRECISIONS
    modules = {"torch": "torch is not installed (flash-kmeans runs on it)",
               "flash_kmeans": "flash-kmeans is not installed (pip install flash-kmeans)"}

    def has_module(self, module: str) -> bool:
        return _importable(module)  # the driver's own lookup (one place to stand in for in tests)

    def precision_refused(self, variant: dict) -> str:
        return (f"flash-kmeans takes fp32 data (it computes in TF32); {variant.get('kernel')} stores "
                f"{variant.get('precision')}")


# --------------------------------------------------------------------------------------------
# The shared object: the variant's library source and a C shim around the bench adapter
# --------------------------------------------------------------------------------------------

SHIM = r"""// {{ name }}: the kmeans bench adapter of this variant behind a C interface, for a timing driver beside the
// benchmark executable (ftgen/families/kmeans/flash_ref.py). Generated by ftgen; do not edit.
#include <cstring>
#include <string>
#include <vector>

#include "ftgen_kmeans_bench.h"
#include "{{ name }}.h"

#define FTGEN_REF_API extern "C" __attribute__((visibility("default")))

namespace {
using Problem = ftkmeans_bench::KmeansProblem<{{ T }}>;
// the variant as its benchmark executable describes it (bench.cu.j2), without the unprotected twin
const ftkmeans_bench::Variant kVariant{"{{ name }}", R"FTJSON({{ meta_json }})FTJSON", "", "{{ precision }}",
                                       {{ prot.enabled | cbool }}, {{ inject | cbool }}, {{ unit_roundoff }}, {{ lam }},
                                       {{ sym }}_workspace, {{ sym }}_geometry, {{ sym }}, nullptr, nullptr};
Problem* problem(void* h) { return static_cast<Problem*>(h); }
}  // namespace

FTGEN_REF_API void* ftgen_ref_open(void) { return new Problem(kVariant); }
FTGEN_REF_API void ftgen_ref_close(void* h) { delete problem(h); }
// Set a shape up and fill its input sets as the benchmark executable does (its rotation of sets over 3x L2, its
// seed and distribution): the number of sets, or 0 where the adapter skips the shape.
FTGEN_REF_API int ftgen_ref_setup(void* h, long long samples, long long dims, long long clusters, unsigned long long seed,
                                  int dist) {
  const std::vector<long long> shape{samples, dims, clusters};
  const int sets = ftgen::rotation_count(ftgen::require_device(), problem(h)->set_bytes(shape));
  std::string skip;
  if (!problem(h)->setup(shape, sets, skip)) return 0;
  problem(h)->fill(seed, dist);
  FT_CUDA(cudaDeviceSynchronize());
  return problem(h)->sets();
}
FTGEN_REF_API const void* ftgen_ref_samples(void* h, int set) { return problem(h)->samples_of(set); }
FTGEN_REF_API void* ftgen_ref_centroids(void* h, int set) { return problem(h)->centroids_of(set); }
// The executable's timed unit: one Lloyd iteration of input set `set`, on the default stream.
FTGEN_REF_API void ftgen_ref_launch(void* h, int set) { problem(h)->launch(set); }
{{ shim_common }}
"""


def render_shim(entry: dict) -> str:
    """The C shim of a variant (a manifest entry), rendered with its backend's template context."""
    return drv.render_shim("kmeans", SHIM, entry)


_built_archs = drv.built_archs


def build_shared_object(project: Path, manifest: dict, entry: dict) -> Path:
    """``PROJECT/build/refs/<kernel>/lib<kernel>_ref.so``: the variant's library source and its shim, compiled as the
    project's CMake compiles the variant's kernel library (:func:`ftgen.bench.ctypes_driver.build_shared_object`),
    linked with cuBLAS (the adapter's Lloyd reference)."""
    return drv.build_shared_object(project, manifest, entry, family="kmeans", shim=render_shim(entry), libs=("-lcublas",))


class Shim(drv.Shim):
    """The C functions of a variant's shared object (see SHIM)."""

    _SIGS = {
        "setup": ([ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_int],
                  ctypes.c_int),
        "samples": ([ctypes.c_void_p, ctypes.c_int], ctypes.c_void_p),
        "centroids": ([ctypes.c_void_p, ctypes.c_int], ctypes.c_void_p),
    }


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------


def _reference():
    """(torch, batch_kmeans_Euclid of the Triton implementation, versions), or (None, None, reason)."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means: no reference here
        return None, None, f"torch cannot be imported ({type(e).__name__}: {str(e)[:200]})"
    if not torch.cuda.is_available():
        return None, None, "torch sees no CUDA GPU"
    try:
        # the Triton implementation itself: the package's top level falls back to a torch one without Triton
        from flash_kmeans import kmeans_triton_impl
    except Exception as e:  # noqa: BLE001
        return None, None, (f"flash-kmeans's Triton implementation cannot be imported ({type(e).__name__}: "
                            f"{str(e)[:200]})")
    versions = {"flash_kmeans": _version("flash-kmeans"), "torch": torch.__version__, "triton": _version("triton")}
    return torch, kmeans_triton_impl.batch_kmeans_Euclid, versions


def label_agreement(torch, flash, x, c0, clusters: int) -> tuple[float, int]:
    """(share, count) of about ``AGREEMENT_POINTS`` evenly spaced samples whose flash-kmeans label (one iteration from
    ``c0``) is the fp64 nearest centroid."""
    n = x.shape[1]
    ids, _, _ = flash(x, clusters, max_iters=1, init_centroids=c0.clone())
    idx = torch.arange(0, n, max(1, n // AGREEMENT_POINTS), device=x.device)
    ref = torch.cdist(x[0, idx].double(), c0[0].double()).argmin(dim=1)
    return float((ids.view(-1)[idx].long() == ref).double().mean()), int(idx.numel())


def time_shape(torch, flash, shim: Shim, h: int, shape: dict, *, reps: int, warmup: int, seed: int, dist: int) -> dict:
    """One shape: the adapter's inputs, flash-kmeans's labels checked, the kernel and flash-kmeans alternately. The
    tensors here are views of the adapter's buffers: they must not outlive the call (the next setup frees them)."""
    n, d, k = shape["samples"], shape["dims"], shape["clusters"]
    sets = shim.setup(h, n, d, k, seed, dist)
    if sets <= 0:
        return {"unavailable": "the kmeans bench adapter skips this shape"}
    xs = [torch.as_tensor(_DeviceArray(shim.samples(h, s), (1, n, d), "<f4"), device="cuda") for s in range(sets)]
    own = [torch.as_tensor(_DeviceArray(shim.centroids(h, s), (1, k, d), "<f4"), device="cuda").clone() for s in range(sets)]
    c0 = own[0].clone()

    def kernel(i: int) -> None:
        shim.launch(h, i)

    def reference(i: int) -> None:
        s = i % sets
        _, own[s], _ = flash(xs[s], k, max_iters=1, init_centroids=own[s])

    # first (untimed) the check of flash-kmeans's labels, which also compiles its Triton kernels for this shape
    agree, points = label_agreement(torch, flash, xs[0], c0, k)
    pad, cycles = drv.pad_kernel(torch)
    tk, tf = drv.alternate(torch, [kernel, reference], warmup, reps, pad)
    out = {"ms": tf["median"], "min": tf["min"], "max": tf["max"], "reps": tf["reps"], "kernel_ms": tk["median"],
           "kernel_min": tk["min"], "kernel_max": tk["max"], "alternated": True, "sets": sets, "call": CALL,
           "label_agreement_fp64": agree, "label_points": points, "pad_cycles": cycles}
    if not agree >= AGREEMENT_FLOOR:
        out["unavailable"] = (f"flash-kmeans's labels agree with the fp64 nearest centroids on {agree:.4f} of "
                              f"{points} sampled points (at least {AGREEMENT_FLOOR} expected): no valid reference")
    return out


def _emit(line: dict) -> None:
    print(json.dumps({"ref": NAME, **line}), flush=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ftgen.families.kmeans.flash_ref",
                                description="Time flash-kmeans alternately with a kmeans variant on its benchmark's data "
                                            "(one JSON line per shape).")
    p.add_argument("project", help="the generated kmeans project (ftgen generate; ftgen build)")
    p.add_argument("kernel", help="the variant's name")
    p.add_argument("--shapes", required=True, help="comma-separated samples x dims x clusters, e.g. 1048576x128x1024")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions [default: the executable's]")
    p.add_argument("--warmup", type=int, default=None, help="untimed rounds [default: the executable's]")
    p.add_argument("--seed", type=int, default=None, help="the executable's --seed [default: its default]")
    p.add_argument("--dist", default=None, choices=("normal", "uniform", "loguniform", "outliers"),
                   help="the executable's --dist [default: normal]")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # bad flags: usage and exit 2
    return drv.driver_main(args, "kmeans", NAME, lambda *a: _run(*a, args), lambda why: _emit({"unavailable": why}))


def _run(project: Path, manifest: dict, entry: dict, shapes: list[dict], args) -> int:
    reason = FlashKmeansRef().unavailable(entry)
    torch = flash = None
    if reason is None:
        torch, flash, versions = _reference()
        if torch is None:
            reason = versions
    if reason is not None:
        _emit({"unavailable": reason})
        return 0
    if torch.cuda.current_stream().cuda_stream != 0:
        _emit({"unavailable": "torch's current stream is not the default stream the adapter launches on"})
        return 0
    shim = Shim(build_shared_object(project, manifest, entry))
    if shim.elem_bytes() != 4:
        _emit({"unavailable": f"{entry['kernel']} stores {shim.elem_bytes()}-byte elements; flash-kmeans takes fp32"})
        return 0
    dist_name = args.dist or "normal"
    dist = shim.dist(dist_name.encode())
    if dist < 0:
        raise SpecError(f"--dist: the executable knows no distribution {dist_name!r}")
    seed = args.seed if args.seed is not None else shim.default_seed()
    reps = args.reps if args.reps is not None else shim.default_reps()
    warmup = args.warmup if args.warmup is not None else shim.default_warmup()
    data = "blobs" if os.environ.get("FTGEN_KMEANS_DATA") == "blobs" else "dist"
    detail = {"seed": seed, "dist": dist_name, "data": data, "versions": versions,
              "archs": _built_archs(project, manifest, entry), "gpu": torch.cuda.get_device_name()}
    oom = getattr(torch.cuda, "OutOfMemoryError", MemoryError)
    h = shim.open()
    try:
        for shape in shapes:
            try:
                got = time_shape(torch, flash, shim, h, shape, reps=reps, warmup=warmup, seed=seed, dist=dist)
            except oom as e:
                got = {"unavailable": f"out of GPU memory in flash-kmeans: {str(e).splitlines()[0][:300]}"}
            _emit({"shape": shape, **got, **({} if "ms" not in got else detail)})
            torch.cuda.empty_cache()
    finally:
        shim.close(h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
