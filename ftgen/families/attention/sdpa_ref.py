"""torch's scaled_dot_product_attention beside an attention variant: references timed alternately with the kernel, in
one process, on the benchmark executable's own data.

`ftgen bench` runs an attention variant's executable (it times the kernel and its unprotected twin alternately) and
then, on the same GPU, this module as a driver process (:mod:`ftgen.bench.refs`), once per reference::

    python -m ftgen.families.attention.sdpa_ref PROJECT KERNEL --shapes 4x32x4096,2x16x1000x2000,... \\
        [--refs sdpa-flash,sdpa-cudnn] [--reps N] [--warmup N] [--seed S] [--dist normal|uniform|loguniform|outliers]

The references (``--refs``, both by default):

* ``sdpa-flash``: ``torch.nn.functional.scaled_dot_product_attention`` under
  ``torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` (FlashAttention-2 as torch ships it);
* ``sdpa-cudnn``: the same call under ``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)`` (cuDNN's fused attention).

The driver compiles the variant's library source (what its executable links) with a small C shim around the
attention bench adapter (``templates/attention/ftgen_attention_bench.h``) into a shared object under
``PROJECT/build/refs/`` (:mod:`ftgen.bench.ctypes_driver`: the flags and architectures of the executable's build) and
loads it with ctypes. Per shape it sets the adapter up and fills its input sets as the executable does (the same
seed and ``--dist``, 16-bit values converted from the harness's random fp32 ones, rotation of sets over 3x L2). The
adapter keeps its buffers private, so the shim hands the adapter a launcher that, while asked to, records the problem
the adapter passes (the Q, K, V and O pointers of a set) instead of launching; otherwise it calls the variant.

Layout: the adapter stores Q, K, V and O contiguous as ``[batch, heads, seq, head_dim]`` (K and V with ``seq_k``
rows), which is SDPA's ``(N, H, L, E)``: torch sees each buffer through ``__cuda_array_interface__`` (no copy, no
ownership) as int16 and views it as float16 or bfloat16, the variant's type; no permute. The scale is SDPA's default,
``1 / sqrt(head_dim)``, the kernel's; ``is_causal`` is the variant's (top-left alignment, the kernel's; the adapter
skips causal shapes with ``seq_k != seq``).

Per shape, untimed first: the kernel once on set 0, then each reference once on set 0 (a backend that refuses the
shape or the type is ``unavailable`` with torch's reason) and its output compared with the kernel's: an element agrees
when ``|O_sdpa - O_kernel| <= TOLERANCE[type] * max |V|`` (the output is a convex combination of V's rows), and at
least ``AGREEMENT_FLOOR`` of the elements must (else the reference is ``unavailable``: its time would be of another
computation). Then, alternately with CUDA events on the default stream (warm-up; per repetition each once, in turn;
medians): the kernel (the adapter's ``launch(set)``, the executable's timed unit) and every reference that passed,
each on input set ``i mod sets``. A pad kernel (``torch.cuda._sleep``) runs before each timed segment, so that
launches are queued before its start event fires.

The driver prints one JSON line per shape and reference: ``{"ref": "sdpa-flash", "shape": ..., "ms": ...,
"kernel_ms": ...}`` with min, max, reps and detail (the agreement, versions), or ``unavailable`` with the reason
instead of a time (torch missing, no GPU, a backend that refuses the shape, a build failure, outputs that disagree).
Exit code 0 when it printed its lines, 2 on bad input (a message, no traceback), 1 on anything else.
"""

from __future__ import annotations

import ctypes
import json
import sys
import warnings
from pathlib import Path

from ...bench import ctypes_driver as drv
from ...bench.ctypes_driver import importable as _importable
from ...errors import SpecError

FLASH = "sdpa-flash"
CUDNN = "sdpa-cudnn"
NAMES = (FLASH, CUDNN)
BACKENDS = {FLASH: "FLASH_ATTENTION", CUDNN: "CUDNN_ATTENTION"}  # members of torch.nn.attention.SDPBackend
DRIVER = "ftgen.families.attention.sdpa_ref"  # this module, run with python -m
PRECISIONS = ("fp16", "bf16")
# An output element agrees with the kernel's when they differ by at most this share of max |V| (loose: a few units
# of the type's rounding of an O element, far below what a wrong mask, scale or layout gives).
TOLERANCE = {"fp16": 1e-2, "bf16": 4e-2}
# The share of output elements that must agree (a near-tie of very different scores may round either way).
AGREEMENT_FLOOR = 0.999
CALL = "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)"
LAYOUT = "[batch, heads, seq, head_dim], contiguous (SDPA's (N, H, L, E); no permute)"


# --------------------------------------------------------------------------------------------
# The bench hook (ftgen.bench.refs): cheap checks and the driver's command line; no torch here.
# --------------------------------------------------------------------------------------------


class SdpaRef(drv.DriverReference):
    """One SDPA backend (``sdpa-flash`` or ``sdpa-cudnn``) as a reference of `ftgen bench` (:mod:`ftgen.bench.refs`).
    Its driver runs for this backend only, so each row's ratio is of one alternated pairing."""

    driver = DRIVER
    precisions = PRECISIONS
    modules = {"torch": "torch is not installed (scaled_dot_product_attention is torch's)"}

    def __init__(self, name: str):
        if name not in NAMES:
            raise ValueError(f"no SDPA reference {name!r} (known: {', '.join(NAMES)})")
        self.name = name
        self.extra_args = ("--refs", name)

    def has_module(self, module: str) -> bool:
        return _importable(module)  # the driver's own lookup (one place to stand in for in tests)

    def precision_refused(self, variant: dict) -> str:
        return f"SDPA is timed for fp16 and bf16; {variant.get('kernel')} stores {variant.get('precision')}"


# --------------------------------------------------------------------------------------------
# The shared object: the variant's library source and a C shim around the bench adapter
# --------------------------------------------------------------------------------------------

SHIM = r"""// {{ name }}: the attention bench adapter of this variant behind a C interface, for a timing driver beside the
// benchmark executable (ftgen/families/attention/sdpa_ref.py). Generated by ftgen; do not edit.
#include <cstring>
#include <string>
#include <vector>

#include "ftgen_attention_bench.h"
#include "{{ name }}.h"

#define FTGEN_REF_API extern "C" __attribute__((visibility("default")))

namespace {
using Problem = ftattn_bench::AttentionProblem<{{ T }}, {{ head_dim }}>;

// The adapter passes its buffers only to the launcher: while g_capture is set, this launcher records the problem it
// is given (the Q, K, V and O of a set) and launches nothing; otherwise it is the variant's.
bool g_capture = false;
ftgen_attention_problem g_seen{};
cudaError_t launch_or_capture(const ftgen_attention_problem* p, cudaStream_t stream) {
  if (g_capture) {
    g_seen = *p;
    return cudaSuccess;
  }
  return {{ sym }}(p, stream);
}

// the variant as its benchmark executable describes it (bench.cu.j2), without the unprotected twin
ftattn_bench::AttnVariant variant() {
  ftattn_bench::AttnVariant v{};
  v.name = "{{ name }}";
  v.meta = R"FTJSON({{ meta_json }})FTJSON";
  v.default_shapes = "";
  v.is_protected = {{ protected | cbool }};
  v.inject = {{ inject | cbool }};
  v.causal = {{ causal | cbool }};
  v.decoupled = {{ decoupled | cbool }};
  v.head_dim = {{ head_dim }};
  v.block_m = {{ block_m }};
  v.block_n = {{ block_n }};
  v.sites = {{ site_mask }};
  v.tol = ftattn_ref::RowTolerance{{ "{" }}{{ t.u_in }}, {{ t.u_acc }}, {{ t.u32 }}, {{ t.u_mufu }}, {{ t.c_sqrt }}, {{ t.c_const }}, {{ t.eta }}, {{ decoupled | cbool }}{{ "}" }};
  v.workspace = {{ sym }}_workspace;
  v.geometry = {{ sym }}_geometry;
  v.launch = launch_or_capture;
  v.launch_twin = nullptr;
  return v;
}

struct Handle {
  Problem problem{variant()};
  std::string skip;
};
Handle* handle(void* h) { return static_cast<Handle*>(h); }
}  // namespace

FTGEN_REF_API void* ftgen_ref_open(void) { return new Handle(); }
FTGEN_REF_API void ftgen_ref_close(void* h) { delete handle(h); }
// Set a shape up and fill its input sets as the benchmark executable does (its rotation of sets over 3x L2, its
// seed and distribution): the number of sets, or 0 where the adapter skips the shape (ftgen_ref_skip says why).
FTGEN_REF_API int ftgen_ref_setup(void* h, long long batch, long long heads, long long seq, long long seq_k,
                                  long long kv_heads, unsigned long long seed, int dist) {
  const std::vector<long long> shape{batch, heads, seq, seq_k, kv_heads};
  Problem& p = handle(h)->problem;
  const int sets = ftgen::rotation_count(ftgen::require_device(), p.set_bytes(shape));
  handle(h)->skip.clear();
  if (!p.setup(shape, sets, handle(h)->skip)) return 0;
  p.fill(seed, dist);
  FT_CUDA(cudaDeviceSynchronize());
  return sets;
}
FTGEN_REF_API const char* ftgen_ref_skip(void* h) { return handle(h)->skip.c_str(); }
// The device buffer `what` (0: Q, 1: K, 2: V, 3: O) of input set `set`, as the adapter passes it to the launcher:
// [batch, heads, seq, head_dim] (K, V: [batch, kv_heads, seq_k, head_dim]), contiguous.
FTGEN_REF_API void* ftgen_ref_buffer(void* h, int set, int what) {
  g_capture = true;
  handle(h)->problem.launch(set);
  g_capture = false;
  const void* b[4] = {g_seen.q, g_seen.k, g_seen.v, g_seen.o};
  return what >= 0 && what < 4 ? const_cast<void*>(b[what]) : nullptr;
}
// The executable's timed unit: the kernel on input set `set`, on the default stream.
FTGEN_REF_API void ftgen_ref_launch(void* h, int set) { handle(h)->problem.launch(set); }
FTGEN_REF_API int ftgen_ref_is_bf16(void) { return {{ 1 if is_bf16 else 0 }}; }
FTGEN_REF_API int ftgen_ref_head_dim(void) { return {{ head_dim }}; }
FTGEN_REF_API int ftgen_ref_causal(void) { return {{ 1 if causal else 0 }}; }
{{ shim_common }}
"""


def render_shim(entry: dict) -> str:
    """The C shim of a variant (a manifest entry), rendered with its backend's template context."""
    return drv.render_shim("attention", SHIM, entry)


def build_shared_object(project: Path, manifest: dict, entry: dict) -> Path:
    """``PROJECT/build/refs/<kernel>/lib<kernel>_ref.so``: the variant's library source and its shim
    (:func:`ftgen.bench.ctypes_driver.build_shared_object`)."""
    return drv.build_shared_object(project, manifest, entry, family="attention", shim=render_shim(entry))


class Shim(drv.Shim):
    """The C functions of a variant's shared object (see SHIM)."""

    Q, K, V, O = range(4)  # ftgen_ref_buffer's `what`
    _SIGS = {
        "setup": ([ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_longlong,
                   ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_int], ctypes.c_int),
        "skip": ([ctypes.c_void_p], ctypes.c_char_p),
        "buffer": ([ctypes.c_void_p, ctypes.c_int, ctypes.c_int], ctypes.c_void_p),
        "is_bf16": ([], ctypes.c_int),
        "head_dim": ([], ctypes.c_int),
        "causal": ([], ctypes.c_int),
    }

    def skip_reason(self, h: int) -> str:
        """Why the adapter skipped the shape its last setup was given."""
        return (self.skip(h) or b"").decode(errors="replace") or "no reason given"


# --------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------


def _reference():
    """(torch, versions), or (None, reason)."""
    try:
        import torch
        import torch.nn.attention  # sdpa_kernel and SDPBackend (torch >= 2.3)
        import torch.nn.functional
    except Exception as e:  # noqa: BLE001 - any import failure means: no reference here
        return None, f"torch (with torch.nn.attention) cannot be imported ({type(e).__name__}: {str(e)[:200]})"
    if not hasattr(torch.nn.attention, "sdpa_kernel"):
        return None, f"torch {torch.__version__} has no torch.nn.attention.sdpa_kernel (torch >= 2.3 has)"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA GPU"
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - a version is detail, not a condition
        cudnn = None
    return torch, {"torch": torch.__version__, "cudnn": cudnn}


def torch_or_reason(reason: str | None) -> tuple:
    """(torch, versions, None) where a driver may time on this machine, else (None, None, why): ``reason`` (the
    reference's own checks), torch or its GPU missing, or a current stream other than the default one the adapters
    launch on."""
    if reason is not None:
        return None, None, reason
    torch, versions = _reference()
    if torch is None:
        return None, None, versions
    if torch.cuda.current_stream().cuda_stream != 0:
        return None, None, "torch's current stream is not the default stream the adapter launches on"
    return torch, versions, None


def refusal(error: BaseException, caught) -> str:
    """Why a backend refused a call: torch's error, and the warnings it gave on the way (where the forced backend
    says what it does not take)."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    said = []
    for w in caught:
        text = " ".join(str(w.message).split())[:300]
        if text and text not in said:
            said.append(text)
    return first + (" (" + "; ".join(said[:3]) + ")" if said else "")


def agreement(torch, got, want, v, tolerance: float) -> dict:
    """How ``got`` (SDPA's output) agrees with ``want`` (the kernel's), both ``[batch, heads, seq, head_dim]``: the
    share of elements with ``|got - want| <= tolerance * max |v|``, and the largest difference (one batch at a time,
    in fp32)."""
    vmax = float(v.abs().max().float())
    bound = tolerance * vmax
    within = 0
    worst = 0.0
    for b in range(got.shape[0]):
        d = (got[b].float() - want[b].float()).abs()
        within += int((d <= bound).sum())  # NaN is never within
        m = float(torch.nan_to_num(d, nan=float("inf")).max())
        worst = max(worst, m)
    total = got.numel()
    return {"agreement": within / total if total else 1.0, "max_abs_diff": worst, "v_max": vmax, "bound": bound,
            "checked_elements": total}


def time_shape(torch, shim: Shim, h: int, shape: dict, names: list[str], *, reps: int, warmup: int, seed: int,
               dist: int, dtype, causal: bool, head_dim: int, tolerance: float) -> dict[str, dict]:
    """One shape: the adapter's inputs, each reference's output checked against the kernel's, the kernel and the
    references that passed alternately. ``{name: its line's fields}``. The tensors here are views of the adapter's
    buffers: they must not outlive the call (the next setup frees them)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, heads, seq, seq_k = shape["batch"], shape["heads"], shape["seq"], shape["seq_k"]
    kv_heads = shape.get("kv_heads", heads)
    sets = shim.setup(h, b, heads, seq, seq_k, kv_heads, seed, dist)
    if sets <= 0:
        return {n: {"unavailable": f"the attention bench adapter skips this shape: {shim.skip_reason(h)}"} for n in names}

    def view(set_: int, what: int, hs: int, rows: int):
        arr = drv.DeviceArray(shim.buffer(h, set_, what), (b, hs, rows, head_dim), "<i2")
        return torch.as_tensor(arr, device="cuda").view(dtype)

    qs = [view(s, Shim.Q, heads, seq) for s in range(sets)]
    ks = [view(s, Shim.K, kv_heads, seq_k) for s in range(sets)]
    vs = [view(s, Shim.V, kv_heads, seq_k) for s in range(sets)]
    o_kernel = view(0, Shim.O, heads, seq)
    gqa = {"enable_gqa": True} if kv_heads != heads else {}  # grouped query heads (torch >= 2.5)
    shim.launch(h, 0)
    torch.cuda.synchronize()

    def call(backend, s: int):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qs[s], ks[s], vs[s], is_causal=causal, **gqa)

    out: dict[str, dict] = {}
    checks: dict[str, dict] = {}
    runs = {}
    oom = getattr(torch.cuda, "OutOfMemoryError", MemoryError)
    for name in names:
        backend = getattr(SDPBackend, BACKENDS[name])
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = call(backend, 0)
                torch.cuda.synchronize()
        except oom as e:
            out[name] = {"unavailable": f"out of GPU memory in SDPA: {str(e).splitlines()[0][:300]}"}
            continue
        except (RuntimeError, TypeError) as e:  # the forced backend does not take this shape, type or GPU (TypeError:
            # a torch without enable_gqa)
            out[name] = {"unavailable": f"SDPA's {BACKENDS[name]} backend refuses this shape: {refusal(e, caught)}"}
            continue
        check = agreement(torch, got, o_kernel, vs[0], tolerance)
        del got
        checks[name] = check
        if not check["agreement"] >= AGREEMENT_FLOOR:
            out[name] = {**check, "unavailable": (
                f"SDPA's output ({BACKENDS[name]}) agrees with the kernel's on {check['agreement']:.4f} of "
                f"{check['checked_elements']} elements (at least {AGREEMENT_FLOOR} within {tolerance:g} max|V| "
                f"expected; largest difference {check['max_abs_diff']:.4g}): no valid reference")}
            continue
        runs[name] = backend
    if not runs:
        return out

    def kernel(i: int) -> None:
        shim.launch(h, i)

    seqs = [kernel] + [(lambda i, be=be: call(be, i % sets)) for be in runs.values()]
    pad, cycles = drv.pad_kernel(torch)
    tk, *tr = drv.alternate(torch, seqs, warmup, reps, pad)
    for name, t in zip(runs, tr):
        out[name] = {"ms": t["median"], "min": t["min"], "max": t["max"], "reps": t["reps"], "kernel_ms": tk["median"],
                     "kernel_min": tk["min"], "kernel_max": tk["max"], "alternated": True,
                     "alternated_with": ["kernel", *runs], "sets": sets, "call": CALL,
                     "backend": f"SDPBackend.{BACKENDS[name]}", "causal": causal, "layout": LAYOUT,
                     "pad_cycles": cycles, **checks[name]}
    return out


def _emit(name: str, line: dict) -> None:
    print(json.dumps({"ref": name, **line}), flush=True)


def _parser():
    p = drv.driver_parser(DRIVER, "Time torch's scaled_dot_product_attention (FLASH and cuDNN backends) alternately with "
                                  "an attention variant on its benchmark's data (one JSON line per shape and reference).",
                          "attention", "comma-separated batch x heads x seq (x seq_k), e.g. 4x32x4096 or 2x16x1000x2000")
    p.add_argument("--refs", default=",".join(NAMES), help=f"the references to time, comma-separated [default: "
                                                           f"{','.join(NAMES)}]")
    return p


def parse_refs(text: str) -> list[str]:
    """--refs: known names, in the order given, each once; SpecError otherwise."""
    names = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    if not names:
        raise SpecError(f"--refs: name at least one of {', '.join(NAMES)}")
    bad = [n for n in names if n not in NAMES]
    if bad:
        raise SpecError(f"--refs: no reference {bad[0][:60]!r} (known: {', '.join(NAMES)})")
    return names


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # bad flags: usage and exit 2
    names = list(NAMES)

    def prepare() -> None:
        names[:] = parse_refs(args.refs)

    def unavailable(why: str) -> None:
        for n in names:
            _emit(n, {"unavailable": why})

    return drv.driver_main(args, "attention", "SDPA", lambda *a: _run(*a, names, args), unavailable, prepare)


def _run(project: Path, manifest: dict, entry: dict, shapes: list[dict], names: list[str], args) -> int:
    torch, versions, reason = torch_or_reason(SdpaRef(names[0]).unavailable(entry))
    if reason is not None:
        for n in names:
            _emit(n, {"unavailable": reason})
        return 0
    shim = Shim(build_shared_object(project, manifest, entry))
    bf16 = bool(shim.is_bf16())
    precision = "bf16" if bf16 else "fp16"
    causal = bool(shim.causal())
    head_dim = shim.head_dim()
    params = entry.get("params", {})
    if (shim.elem_bytes() != 2 or precision != entry.get("precision") or causal != bool(params.get("causal"))
            or head_dim != params.get("head_dim")):
        raise SpecError(f"{entry['kernel']}: the shared object ({precision}, head_dim {head_dim}, causal {causal}) is not "
                        f"the manifest's variant; re-generate the project")
    run = drv.run_settings(args, shim)
    seed, reps, warmup, dist = run["seed"], run["reps"], run["warmup"], run["dist_code"]
    dtype = torch.bfloat16 if bf16 else torch.float16
    detail = {"seed": seed, "dist": run["dist"], "dtype": precision, "versions": versions,
              "archs": drv.built_archs(project, manifest, entry), "gpu": torch.cuda.get_device_name()}
    oom = getattr(torch.cuda, "OutOfMemoryError", MemoryError)
    h = shim.open()
    try:
        for shape in shapes:
            try:
                got = time_shape(torch, shim, h, shape, names, reps=reps, warmup=warmup, seed=seed, dist=dist,
                                 dtype=dtype, causal=causal, head_dim=head_dim, tolerance=TOLERANCE[precision])
            except oom as e:
                got = {n: {"unavailable": f"out of GPU memory in SDPA: {str(e).splitlines()[0][:300]}"} for n in names}
            for n in names:
                line = got.get(n, {"unavailable": "the driver gave no result for this shape"})
                _emit(n, {"shape": shape, **line, **({} if "ms" not in line else detail)})
            torch.cuda.empty_cache()
    finally:
        shim.close(h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
