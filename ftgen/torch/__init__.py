"""Protected kernels as PyTorch ops: load a library built by ``ftgen build --lib`` and call its GEMM on torch tensors.

    import ftgen.torch as ftt
    lib = ftt.load("install/lib/libftgen_torch_gemm.so")       # registers the library under its name
    y = torch.ops.ftgen.mm(a, b, lib, "tf32x3")                  # a @ b on the tensor cores, fp32-accurate, ABFT
    y = torch.ops.ftgen.addmm(bias, a, b, lib, "tf32x3")         # a @ b + bias, rounded once (FTLinear's op)
    o = torch.ops.ftgen.attention(q, k, v, attn_lib, True)       # flash attention of an attention library (forward)
    c, labels, inertia, iters = torch.ops.ftgen.kmeans(x, 1024, km_lib, "tf32", 20)  # Lloyd from kmeans++ centroids
    X = torch.ops.ftgen.fft(x, fft_lib)                          # DFT along the last dimension (complex64 / complex128)
    model = ftt.protect(model, lib, precision="tf32x3")          # every nn.Linear -> FTLinear
    ftt.report()                                                 # fault counters per op, read from the device now

The ops are ``torch.library.custom_op``s (``ftgen::mm``, ``ftgen::addmm``, ``ftgen::attention``, ``ftgen::kmeans``,
``ftgen::fft``) with a fake implementation (shapes for ``torch.compile`` and meta tensors); the GEMMs and the FFT have an
autograd formula whose products run through the same protected op (attention is forward only, kmeans has no
gradient). Fault counters stay on the device, accumulated by the
library's handle per device, and are read when asked (``report``, ``json_line``); ``set_policy`` says what an
uncorrectable fault does (``warn``, ``raise``, or ``recompute``: rerun the call, which reads the counters after every
call). torch is needed only here: ``import ftgen`` never imports it
(``pip install ftgen[torch]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch
from torch import Tensor, nn

from ..binding import FtgenLibError, Library
from .telemetry import POLICIES, TELEMETRY, UncorrectableFault

__all__ = ["FTLinear", "FtgenLibError", "Library", "UncorrectableFault", "load", "mm", "addmm", "attention", "kmeans", "fft", "protect",
           "report", "json_line", "reset", "set_policy", "inject", "record_scores", "POLICIES"]

# precision -> (the library's entry-point tag, the torch dtype of its operands)
PRECISIONS = {"tf32x3": ("tf32x3", torch.float32), "tf32": ("tf32", torch.float32), "fp32": ("f32", torch.float32),
              "fp64": ("f64", torch.float64), "fp16": ("f16", torch.float16), "bf16": ("bf16", torch.bfloat16)}


def load(path: str | Path, key: str | None = None) -> str:
    """Load ``libftgen_<name>.so`` (its ``ftgen_<name>.json`` beside it or in ../lib); returns the key the ops take
    (default: the library's name). Loading the same key again returns it without reloading."""
    lib = Library(path)
    key = key or lib.name
    if key not in TELEMETRY.libs:
        TELEMETRY.libs[key] = lib
    return key


def _gemm_groups(precision: str) -> tuple[str, str]:
    """A precision's GEMM entry points in a library: B row-major, B column-major (``_rc``). Only these are the
    precision's (``gemm_tf32x3`` is not tf32's)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    base = f"gemm_{PRECISIONS[precision][0]}"
    return base, f"{base}_rc"


def _entry(lib: Library, precision: str, b: Tensor) -> tuple[str, Tensor, int]:
    """The entry point for b's layout, the B operand to pass and its leading dimension."""
    base, base_rc = _gemm_groups(precision)
    k, n = b.shape
    rr, rc = base in lib.groups, base_rc in lib.groups
    if rr and b.is_contiguous():
        return base, b, n
    if rc and b.t().is_contiguous():  # B column-major: b.t() (n x k) row-major
        return base_rc, b, k
    if rr:
        return base, b.contiguous(), n
    if rc:
        return base_rc, b.t().contiguous().t(), k
    raise FtgenLibError(f"{lib.path.name} has no {precision} GEMM entry point ({base}); it has: {', '.join(lib.groups)}")


def _run(lib: Library, group: str, a: Tensor, b: Tensor, ldb: int, out: Tensor, beta: float) -> None:
    m, k = a.shape
    n = out.shape[1]
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(dev):
        stream = torch.cuda.current_stream().cuda_stream
        lib.call(group, dev, [m, n, k, 1.0, a.data_ptr(), k, b.data_ptr(), ldb, beta, out.data_ptr(), n], stream)


def _protected(op: str, a: Tensor, b: Tensor, lib: str, precision: str, bias: Tensor | None) -> Tensor:
    """a @ b (+ bias, broadcast over the rows, through the GEMM's beta C: one rounding) on library `lib`."""
    if lib not in TELEMETRY.libs:
        raise KeyError(f"ftgen::{op}: no library loaded as {lib!r} (ftgen.torch.load)")
    L = TELEMETRY.libs[lib]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"ftgen::{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")
    want = PRECISIONS.get(precision, (None, None))[1]
    if a.dtype != want or b.dtype != want or not a.is_cuda or a.device != b.device:
        raise ValueError(f"ftgen::{op}: {precision} takes two {want} CUDA tensors on one device, not {a.dtype} on "
                         f"{a.device} and {b.dtype} on {b.device}")
    m, n = a.shape[0], b.shape[1]
    if bias is not None and (bias.shape != (n,) or bias.dtype != want or bias.device != a.device):
        raise ValueError(f"ftgen::{op}: bias must be a {want} vector of {n} on {a.device}, not {tuple(bias.shape)} "
                         f"{bias.dtype} on {bias.device}")

    out = torch.empty((m, n), dtype=a.dtype, device=a.device)  # never a view of an input (the bias of 1 x 1 would be)
    if m == 0 or n == 0:
        return out
    if a.shape[1] == 0:
        return out.zero_() if bias is None else out.copy_(bias.expand(m, n))
    a_c = a if a.is_contiguous() else a.contiguous()
    group, bb, ldb = _entry(L, precision, b)

    def run() -> None:
        if bias is not None:  # beta C is the bias, on a rerun too (C then holds the last result)
            out.copy_(bias.expand(m, n))
        _run(L, group, a_c, bb, ldb, out, 0.0 if bias is None else 1.0)

    _with_policy(lib, "mm", run)
    return out


def _with_policy(lib: str, op: str, run) -> None:
    """Run a call, count it under `op`, and under the recompute policy run it once more when it left an uncorrectable
    fault (a second one raises)."""
    run()
    stats = TELEMETRY.called(lib, op)
    if TELEMETRY.policy_of(op) == "recompute" and TELEMETRY.new_uncorrectable(lib, op) > 0:
        stats.reruns += 1
        run()
        if TELEMETRY.new_uncorrectable(lib, op) > 0:
            raise UncorrectableFault(f"{lib}:{op}: uncorrectable twice in a row")


@torch.library.custom_op("ftgen::mm", mutates_args=())
def mm(a: Tensor, b: Tensor, lib: str, precision: str) -> Tensor:
    """a @ b through library `lib`'s protected GEMM of `precision` (2-D CUDA tensors of that precision's dtype)."""
    return _protected("mm", a, b, lib, precision, None)


@torch.library.custom_op("ftgen::addmm", mutates_args=())
def addmm(bias: Tensor, a: Tensor, b: Tensor, lib: str, precision: str) -> Tensor:
    """a @ b + bias (a vector over the columns) through the same GEMM, the bias taken in as beta C: the result is
    rounded to the precision's type once, as a fused bias epilogue rounds it (counted as the library's `mm`)."""
    return _protected("addmm", a, b, lib, precision, bias)


@mm.register_fake
def _mm_fake(a: Tensor, b: Tensor, lib: str, precision: str) -> Tensor:
    return a.new_empty((a.shape[0], b.shape[1]))


@addmm.register_fake
def _addmm_fake(bias: Tensor, a: Tensor, b: Tensor, lib: str, precision: str) -> Tensor:
    return a.new_empty((a.shape[0], b.shape[1]))


def _mm_setup(ctx, inputs, output):
    a, b, lib, precision = inputs
    ctx.save_for_backward(a, b)
    ctx.lib, ctx.precision = lib, precision


def _mm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    ga = mm(grad, b.t(), ctx.lib, ctx.precision) if ctx.needs_input_grad[0] else None
    gb = mm(a.t(), grad, ctx.lib, ctx.precision) if ctx.needs_input_grad[1] else None
    return ga, gb, None, None


def _addmm_setup(ctx, inputs, output):
    _mm_setup(ctx, inputs[1:], output)


def _addmm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    ga = mm(grad, b.t(), ctx.lib, ctx.precision) if ctx.needs_input_grad[1] else None
    gb = mm(a.t(), grad, ctx.lib, ctx.precision) if ctx.needs_input_grad[2] else None
    gbias = grad.sum(0) if ctx.needs_input_grad[0] else None
    return gbias, ga, gb, None, None


mm.register_autograd(_mm_backward, setup_context=_mm_setup)
addmm.register_autograd(_addmm_backward, setup_context=_addmm_setup)


# the attention library's element types: torch dtype -> the entry points' tag
_ATTENTION_TYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}


def _attention_group(lib: Library, q: Tensor, causal: bool) -> str:
    """The entry point of `lib` that runs q's type, head dim and mask (`attention_<f16|bf16>_d<head_dim>[_causal]`)."""
    if q.dtype not in _ATTENTION_TYPES:
        raise ValueError(f"ftgen::attention: q, k and v must be float16 or bfloat16, not {q.dtype}")
    group = f"attention_{_ATTENTION_TYPES[q.dtype]}_d{q.shape[-1]}{'_causal' if causal else ''}"
    if group not in lib.groups:
        raise FtgenLibError(f"{lib.path.name} has no entry point {group} (type, head dim {q.shape[-1]}, "
                            f"{'causal' if causal else 'not causal'}); it has: {', '.join(lib.groups)}")
    return group


@torch.library.custom_op("ftgen::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, lib: str, causal: bool = False, scale: float = 0.0) -> Tensor:
    """softmax(scale q k^T [+ causal mask]) v for every (batch, head) through library `lib`'s protected attention
    (``ftgen build --lib`` of an attention spec): q (batch, heads, seq_q, head_dim), k and v (batch, kv_heads, seq_k,
    head_dim), float16 or bfloat16 CUDA tensors; kv_heads divides heads (grouped-query attention: query head h reads
    K / V head h / (heads / kv_heads), as SDPA's ``enable_gqa=True``); scale 0 means 1 / sqrt(head_dim); causal: query
    i sees keys <= i (seq_k == seq_q). Forward only (there is no backward kernel). Counted as the library's
    `attention` op."""
    if lib not in TELEMETRY.libs:
        raise KeyError(f"ftgen::attention: no library loaded as {lib!r} (ftgen.torch.load)")
    L = TELEMETRY.libs[lib]
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] \
            or q.shape[3] != k.shape[3] or k.shape[1] < 1 or q.shape[1] % k.shape[1]:
        raise ValueError(f"ftgen::attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: want q (batch, "
                         "heads, seq_q, head_dim) and k, v (batch, kv_heads, seq_k, head_dim), kv_heads a divisor of heads")
    if not (q.dtype == k.dtype == v.dtype) or not q.is_cuda or not (q.device == k.device == v.device):
        raise ValueError(f"ftgen::attention: q, k and v must be CUDA tensors of one type on one device, not {q.dtype} on "
                         f"{q.device}, {k.dtype} on {k.device}, {v.dtype} on {v.device}")
    if causal and k.shape[2] != q.shape[2]:
        raise ValueError(f"ftgen::attention: causal needs seq_k == seq_q (got {q.shape[2]} and {k.shape[2]})")
    group = _attention_group(L, q, causal)
    b, h, lq, _ = q.shape
    hk, lk = k.shape[1], k.shape[2]
    qc, kc, vc = (t if t.is_contiguous() else t.contiguous() for t in (q, k, v))
    out = torch.empty_like(qc)
    if out.numel() == 0:
        return out
    if lk == 0:
        return out.zero_()
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()

    def run() -> None:
        with torch.cuda.device(dev):
            args = [b, h, lq, lk, hk, float(scale), qc.data_ptr(), kc.data_ptr(), vc.data_ptr(), out.data_ptr()]
            L.call(group, dev, args, torch.cuda.current_stream().cuda_stream)

    _with_policy(lib, "attention", run)
    return out


@attention.register_fake
def _attention_fake(q: Tensor, k: Tensor, v: Tensor, lib: str, causal: bool = False, scale: float = 0.0) -> Tensor:
    return torch.empty_like(q, memory_format=torch.contiguous_format)


# kmeans: where the initial centroids come from (ftgen_kmeans_init) and the element type of each precision
_KMEANS_INIT = {"given": 0, "random": 1, "kmeans++": 2, "kmeans++-sample": 3}
_KMEANS_TYPES = {"tf32": torch.float32, "tf32x3": torch.float32, "fp64": torch.float64}


@torch.library.custom_op("ftgen::kmeans", mutates_args=())
def kmeans(x: Tensor, clusters: int, lib: str, precision: str = "tf32", max_iters: int = 20, tol: float = 0.0,
           init: str = "kmeans++", c0: Optional[Tensor] = None, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Lloyd's k-means of x (samples, dims) into `clusters` centroids through library `lib`'s protected iteration
    (``ftgen build --lib`` of a kmeans spec; precision tf32 or tf32x3 on float32 tensors, fp64 on float64). The
    initial centroids: c0 (clusters, dims) with init "given", else samples of x chosen by seed ("random": uniformly,
    "kmeans++": D^2 weighting, a pass over x per centroid; "kmeans++-sample": kmeans++ over a uniform sample of 64
    samples per cluster, a pass over the sample per centroid; docs/kmeans.md). At most max_iters iterations (0: the
    initial centroids only), fewer when the largest squared centroid shift is at most tol times the mean squared
    centroid norm (tol > 0; decided on the device). Returns (centroids (clusters, dims), labels (samples,) int32 of the last assignment, inertia
    (max_iters,) float64 of each iteration's assignment (0 past convergence), iterations run (1,) int32). Counted
    as the library's `kmeans` op."""
    if lib not in TELEMETRY.libs:
        raise KeyError(f"ftgen::kmeans: no library loaded as {lib!r} (ftgen.torch.load)")
    L = TELEMETRY.libs[lib]
    want = _KMEANS_TYPES.get(precision)
    if want is None:
        raise ValueError(f"ftgen::kmeans: precision {precision!r} is not one of {', '.join(_KMEANS_TYPES)}")
    if init not in _KMEANS_INIT:
        raise ValueError(f"ftgen::kmeans: init {init!r} is not one of {', '.join(_KMEANS_INIT)}")
    if x.dim() != 2 or x.dtype != want or not x.is_cuda or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"ftgen::kmeans: x must be a non-empty (samples, dims) {want} CUDA tensor for {precision}, not "
                         f"{tuple(x.shape)} {x.dtype} on {x.device}")
    n, d = x.shape
    if not 1 <= clusters <= n or max_iters < 0 or not 0 <= seed < 2**63:
        raise ValueError(f"ftgen::kmeans: clusters {clusters} must be in 1..samples ({n}), max_iters {max_iters} >= 0, "
                         f"seed {seed} in 0..2^63-1")
    if init == "given" and (c0 is None or c0.shape != (clusters, d) or c0.dtype != want or c0.device != x.device):
        raise ValueError(f"ftgen::kmeans: init 'given' needs c0 of shape ({clusters}, {d}), {want}, on {x.device}")
    group = f"kmeans_{precision}"
    if group not in L.groups:
        raise FtgenLibError(f"{L.path.name} has no entry point {group}; it has: {', '.join(L.groups)}")
    xc = x if x.is_contiguous() else x.contiguous()
    C = torch.empty((clusters, d), dtype=want, device=x.device)
    labels = torch.empty(n, dtype=torch.int32, device=x.device)
    inertia = torch.zeros(max_iters, dtype=torch.float64, device=x.device)
    iters = torch.zeros(1, dtype=torch.int32, device=x.device)
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()

    def run() -> None:
        with torch.cuda.device(dev):
            if init == "given":
                C.copy_(c0)  # (C in: the initial centroids; a rerun starts from c0 again)
            args = [n, d, clusters, xc.data_ptr(), C.data_ptr(), labels.data_ptr(), 0, inertia.data_ptr() if max_iters else 0,
                    max_iters, float(tol), _KMEANS_INIT[init], seed, iters.data_ptr()]
            L.call(group, dev, args, torch.cuda.current_stream().cuda_stream)

    _with_policy(lib, "kmeans", run)
    return C, labels, inertia, iters


@kmeans.register_fake
def _kmeans_fake(x: Tensor, clusters: int, lib: str, precision: str = "tf32", max_iters: int = 20, tol: float = 0.0,
                 init: str = "kmeans++", c0: Optional[Tensor] = None, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (x.new_empty((clusters, x.shape[1])), x.new_empty((x.shape[0],), dtype=torch.int32),
            x.new_empty((max_iters,), dtype=torch.float64), x.new_empty((1,), dtype=torch.int32))


# fft: the library's entry points (fft_<c2c|z2z>_<fwd|inv>) by element type
_FFT_TYPES = {torch.complex64: "c2c", torch.complex128: "z2z"}
_FFT_MAX_ELEMENTS = 1 << 31  # n * batch of one call (ftgen_fft_problem)


@torch.library.custom_op("ftgen::fft", mutates_args=())
def fft(x: Tensor, lib: str, inverse: bool = False) -> Tensor:
    """The discrete Fourier transform along x's last dimension through library `lib`'s protected FFT (``ftgen build
    --lib`` of an fft spec): x a complex64 (C2C, fp32) or complex128 (Z2Z, fp64) CUDA tensor whose last dimension n is a
    power of two (at least 2), every leading dimension a batch. Unnormalised both ways, as cuFFT: ``torch.fft.fft(x)``,
    and with `inverse` ``n * torch.fft.ifft(x)``. Larger batches than one call takes (n * batch <= 2^31) are split.
    Counted as the library's `fft` op."""
    if lib not in TELEMETRY.libs:
        raise KeyError(f"ftgen::fft: no library loaded as {lib!r} (ftgen.torch.load)")
    L = TELEMETRY.libs[lib]
    if x.dtype not in _FFT_TYPES or not x.is_cuda or x.dim() < 1:
        raise ValueError(f"ftgen::fft: x must be a complex64 or complex128 CUDA tensor, not {x.dtype} of shape "
                         f"{tuple(x.shape)} on {x.device}")
    n = x.shape[-1]
    if n < 2 or n & (n - 1):
        raise ValueError(f"ftgen::fft: the last dimension must be a power of two (at least 2), not {n}")
    group = f"fft_{_FFT_TYPES[x.dtype]}_{'inv' if inverse else 'fwd'}"
    if group not in L.groups:
        raise FtgenLibError(f"{L.path.name} has no entry point {group} ({x.dtype}, {'inverse' if inverse else 'forward'}); "
                            f"it has: {', '.join(L.groups)}")
    xc = x.contiguous()
    if xc.data_ptr() % 16:  # (a view starting mid-allocation: the kernels load 16 bytes at a time)
        xc = xc.clone()
    out = torch.empty_like(xc)
    batch = xc.numel() // n
    if batch == 0:
        return out
    step = max(1, _FFT_MAX_ELEMENTS // n)
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    item = xc.element_size()

    def run() -> None:
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream().cuda_stream
            for b0 in range(0, batch, step):
                nb = min(step, batch - b0)
                L.call(group, dev, [n, nb, xc.data_ptr() + b0 * n * item, out.data_ptr() + b0 * n * item], stream)

    _with_policy(lib, "fft", run)
    return out


@fft.register_fake
def _fft_fake(x: Tensor, lib: str, inverse: bool = False) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _fft_setup(ctx, inputs, output):
    ctx.lib, ctx.inverse = inputs[1], inputs[2]


def _fft_backward(ctx, grad):
    # y = F x (F the unnormalised DFT matrix, symmetric): the gradient is F^H grad = conj(F) grad, the other direction
    return torch.ops.ftgen.fft(grad.contiguous(), ctx.lib, not ctx.inverse), None, None


fft.register_autograd(_fft_backward, setup_context=_fft_setup)


class FTLinear(nn.Module):
    """nn.Linear whose product runs through a protected GEMM: y = x W^T + b, W passed column-major where the library
    has that entry point (no copy of the weight), else transposed once per call."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, lib: str, precision: str = "tf32x3",
                 device=None, dtype=None):
        super().__init__()
        dtype = dtype or PRECISIONS[precision][1]
        self.in_features, self.out_features, self.lib, self.precision = in_features, out_features, lib, precision
        self.weight = nn.Parameter(torch.empty((out_features, in_features), device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype)) if bias else None
        nn.Linear.reset_parameters(self)

    @classmethod
    def from_linear(cls, linear: nn.Linear, lib: str, precision: str = "tf32x3") -> "FTLinear":
        """An FTLinear sharing `linear`'s parameters."""
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        m.in_features, m.out_features, m.lib, m.precision = linear.in_features, linear.out_features, lib, precision
        m.weight, m.bias = linear.weight, linear.bias
        return m

    def forward(self, x: Tensor) -> Tensor:
        x2 = x.reshape(-1, self.in_features)
        if self.bias is not None and PRECISIONS[self.precision][1].itemsize == 2:
            # a 16-bit output: the bias through the GEMM's beta C, one rounding as nn.Linear's fused bias (added after
            # the GEMM's rounding it would double the output's error); wider types add it after, which costs less
            y = torch.ops.ftgen.addmm(self.bias, x2, self.weight.t(), self.lib, self.precision)
        else:
            y = torch.ops.ftgen.mm(x2, self.weight.t(), self.lib, self.precision)
            if self.bias is not None:
                y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, " \
               f"lib={self.lib!r}, precision={self.precision!r}"


def protect(model: nn.Module, lib: str, precision: str = "tf32x3") -> nn.Module:
    """Replace every nn.Linear of `model` (in place) by an FTLinear sharing its parameters; returns `model`."""
    if isinstance(model, nn.Linear):
        return FTLinear.from_linear(model, lib, precision)
    for name, child in model.named_children():
        setattr(model, name, protect(child, lib, precision))
    return model


def report(emit: bool = True) -> dict:
    """Fault counters per op, read from the device now (see ftgen.torch.telemetry.Telemetry.report)."""
    return TELEMETRY.report(emit)


def json_line(step: int | None = None) -> str:
    """The report as one JSON line (append one per step to a log; a Prometheus exporter can read the same dict)."""
    return TELEMETRY.json_line(step)


def set_policy(policy: str, op: str | None = None) -> None:
    """What an uncorrectable fault does: warn (default), raise, or recompute; for one op ("mm") or all."""
    TELEMETRY.set_policy(policy, op)


def inject(lib: str, faults_per_call: int, seed: int = 0, device: int | None = None) -> None:
    """Fault injection for testing: every later op of library `lib` on `device` (default: the current one) flips a
    random bit of an accumulator in `faults_per_call` threadblocks of each GEMM launch; 0 stops it. The library must
    have been built from a spec with `inject: true` (specs/gemm/torch_linear.yaml is); `report()` counts the faults
    applied (`injected`) beside what the protection did with them."""
    if lib not in TELEMETRY.libs:
        raise KeyError(f"ftgen.torch.inject: no library loaded as {lib!r} (ftgen.torch.load)")
    dev = torch.cuda.current_device() if device is None else device
    with torch.cuda.device(dev):
        TELEMETRY.libs[lib].inject(dev, faults_per_call, seed)


def record_scores(lib: str, on: bool = True, device: int | None = None) -> None:
    """Record the largest detection score (``max_score`` in ``report()``) in every op of library `lib` on `device`
    (default: the current one) where that costs time; off by default (the FFT's checks then take every group through
    their rare path: measured 1.05-3.2x slower, docs/library.md)."""
    if lib not in TELEMETRY.libs:
        raise KeyError(f"ftgen.torch.record_scores: no library loaded as {lib!r} (ftgen.torch.load)")
    dev = torch.cuda.current_device() if device is None else device
    with torch.cuda.device(dev):
        TELEMETRY.libs[lib].record_scores(dev, on)


def reset() -> None:
    """Zero every handle's counters and the call counts."""
    TELEMETRY.reset()
