"""The ``cutlass90`` backend of ``gemm``: Hopper-native CUTLASS 3.x kernels (sm_90a only), unprotected.

Chosen by ``params: {backend: cutlass90}`` (the other gemm backends keep their selection by
precision and scheme). Each variant is a ``cutlass::gemm::kernel::GemmUniversal`` whose C++ is
emitted by ``cutlass_library`` (``GemmKind.Universal3x``, ``EmitGemmUniversal3xInstance``) from a
``MathInstruction``, a ``TileDescription`` (tile, cluster, stages) and a ``GemmOperation`` (kernel
schedule, epilogue schedule, tile scheduler): the sm90 collective builders give a mainloop of TMA
loads into a shared-memory pipeline feeding ``wgmma`` (a producer warp group and one or two consumer
warp groups: warp-specialized *cooperative* -- two consumer warp groups split one tile's rows -- or
*ping-pong* -- two consumer warp groups alternate between tiles, one's epilogue overlapping the
other's mainloop), a TMA epilogue, thread-block clusters (TMA multicast of A along the cluster's
columns and B along its rows) and a persistent (or stream-K) tile scheduler.

Precisions and types (those of the ``cutlass`` backend's launcher, ``ftgen_gemm_problem``):

* ``tf32``: fp32 A, B, C; the wgmma reads the fp32 words as TF32; fp32 accumulation. Measured on an H200 the
  products match CUTLASS's rounding conversion of the operands (verified against a reference of the rounded
  operands; against truncated ones the error was 70x larger), so the bench's reference rounds as for sm80.
* ``tf32x3`` (fp32-accurate): fp32 data split into ``big`` (fp32 rounded to TF32, low bits zero) and
  ``small`` (``a - big``, exact in fp32, which the wgmma reads as TF32); one TF32 GEMM over a
  tripled K, ``[A_big | A_small | A_big] x [B_small; B_big; B_big]`` (workspace operands written by
  a split kernel before it), i.e. big*small + small*big + big*big per product -- small*small dropped.
  Per product the split loses at most ``2^-21 + 2^-21 + 2^-22 <= 2^-19`` of |a||b| (``SPLIT_LOSS``),
  fp32 level. The two small thirds come first, so the partial sums they build are about 2^-11 of the
  final one and add nothing noticeable to the accumulation error of the K big*big products: the
  delivered precision is fp32's (ftgen.tolerance's tf32x3 rule).
* ``fp16``, ``bf16``: 16-bit A, B, C and D, fp32 accumulation and epilogue.
* ``fp64`` is not offered: Hopper's FP64 tensor-core MMA is not a wgmma, and CUTLASS 4.2's sm90
  collective builder has no fp64 path (the ``cutlass`` backend's DMMA kernels run on sm_90).

Layouts: C row-major; A and B row- or column-major (``layout_a``, ``layout_b``; the leading
dimensions as in the ``cutlass`` backend). The TF32 wgmma reads K-major operands only, so tf32 and
tf32x3 take A row-major and B column-major (the default: both K-major).

Alignment (any M, N, K >= 1, any leading dimension): TMA needs 16-byte aligned base addresses and
leading dimensions, and CUTLASS's kernels need the contiguous extents to be multiples of 16 bytes.
When A, B and C all meet that, the kernel runs on them directly. Otherwise the launcher copies the
operands into zero-padded workspace buffers (contiguous extents and leading dimensions rounded up
to 16 bytes; zeros in the padded K add nothing), runs the same kernel on the padded problem into a
padded C (holding C's values first when beta != 0) and copies the M x N result back. The workspace
always has room for the padded buffers (``<kernel>_workspace(m, n, k)`` cannot know the leading
dimensions and pointers): 4 or 2 bytes x (M'K' + K'N' + M'N') on top of CUTLASS's own workspace
(stream-K partials; tf32x3 adds its tripled operands).

Kernel names (every parameter is encoded)::

    gemm_<prec>_none_cutlass90_<tile_m>x<tile_n>x<tile_k>_c<cluster_m>x<cluster_n>_<schedule>
        _<scheduler>_s<stages|auto>_sw<swizzle>_<a><b>

``<schedule>`` is ``ws-coop`` or ``ws-pingpong``, ``<scheduler>`` ``persistent`` or ``streamk``,
``<a><b>`` the layouts of A and B (``r``/``c``). Example:
``gemm_tf32_none_cutlass90_128x256x32_c2x1_ws-coop_persistent_sauto_sw1_rc``.

Build: ``-DNDEBUG`` is a compile option of every variant (CUTLASS's device-side assertions left in
make ptxas serialize the wgmma pipeline), and the arch is ``sm_90a`` (the wgmma and setmaxnreg
instructions exist only there).
"""

from __future__ import annotations

from ...errors import FtgenError
from ...libraries import cutlass_library
from ..base import PRECISION_TAG, SMEM_PER_BLOCK, Backend, Param, Protection, Source, Variant
from ...tolerance import context as tolerance_context

PRECISIONS = ("tf32", "tf32x3", "fp16", "bf16")
ARCH = "sm_90a"
SCHEDULES = ("ws-coop", "ws-pingpong")
SCHEDULERS = ("persistent", "streamk")
ELEM_BYTES = {"tf32": 4, "tf32x3": 4, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}  # (fp32, fp64: for the reasons)
# K of one wgmma instruction (the accumulation granularity of the tolerance)
WGMMA_K = {"tf32": 8, "tf32x3": 8, "fp16": 16, "bf16": 16}
SPLIT_LOSS = 2.0**-19  # tf32x3: largest relative loss of the split per product (module docstring)
TMA_BYTES = 16  # TMA: 16-byte aligned addresses and strides
# A consumer warp group holds its part of the tile's fp32 accumulators in registers; the kernels give
# consumer warp groups 232 (ping-pong) / 240 (cooperative) registers per thread, of which at most 128
# accumulators leave room for the fragments and addresses.
MAX_ACC_PER_THREAD = 128
# Shared memory the TMA epilogue keeps beside the mainloop stages (its C and D staging buffers): an
# upper estimate used only to check explicit stage counts; stages: 0 lets the builder carve it out.
EPILOGUE_SMEM = 32 * 1024

PARAMS = (
    Param("backend", str, ("cutlass90",), "selects this backend (Hopper CUTLASS 3.x kernels, arch sm_90a)", choices=("cutlass90",)),
    Param("tile_m", int, (128,), "CTA tile rows (ws-coop: 128 or 256; ws-pingpong: 64 or 128)", choices=(64, 128, 256)),
    Param("tile_n", int, (128,), "CTA tile columns (a wgmma N: multiple of 16, at most 256)", lo=16, hi=256),
    Param("tile_k", int, (32,), "CTA tile depth per pipeline stage (tile_k x element bytes: 64, 128 or 256)", lo=8, hi=128),
    Param("cluster_m", int, (1,), "thread-block cluster rows (CTAs sharing B by TMA multicast)", choices=(1, 2, 4)),
    Param("cluster_n", int, (1,), "thread-block cluster columns (CTAs sharing A by TMA multicast)", choices=(1, 2, 4)),
    Param("schedule", str, ("ws-coop",), "kernel schedule: warp-specialized cooperative or ping-pong", choices=SCHEDULES),
    Param("scheduler", str, ("persistent",), "tile scheduler: persistent (data-parallel tiles) or stream-K (ws-coop only)", choices=SCHEDULERS),
    Param("stages", int, (0,), "shared-memory pipeline stages (0: as many as fit beside the epilogue)", lo=0, hi=12),
    Param("swizzle", int, (1,), "tile rasterization swizzle of the scheduler (max_swizzle_size)", choices=(1, 2, 4, 8)),
    Param("layout_a", str, ("row",), "layout of A (M x K)", choices=("row", "col")),
    Param("layout_b", str, ("col",), "layout of B (K x N)", choices=("row", "col")),
)

_PREC_DEFAULTS = {"tf32": {}, "tf32x3": {}, "fp16": {"tile_k": 64}, "bf16": {"tile_k": 64}}

_CTYPES = {  # A/B element, C/D element, accumulator, epilogue compute (CUTLASS types)
    "tf32": ("float", "float", "float", "float"),
    "tf32x3": ("float", "float", "float", "float"),
    "fp16": ("cutlass::half_t", "cutlass::half_t", "float", "float"),
    "bf16": ("cutlass::bfloat16_t", "cutlass::bfloat16_t", "float", "float"),
}
_BENCH_TYPES = {"tf32": "float", "tf32x3": "float", "fp16": "__half", "bf16": "__nv_bfloat16"}


class Geometry:
    """Derived quantities of a cutlass90 variant (constraints, names, templates, bench)."""

    def __init__(self, v: Variant):
        p = v.param_dict
        self.tile = (p["tile_m"], p["tile_n"], p["tile_k"])
        self.tb = self.tile  # the bench adapter's name for the output tile
        self.cluster = (p["cluster_m"], p["cluster_n"])
        self.schedule, self.scheduler = p["schedule"], p["scheduler"]
        self.stages, self.swizzle = p["stages"], p["swizzle"]
        self.layout_a, self.layout_b = p["layout_a"], p["layout_b"]
        self.elem_bytes = ELEM_BYTES[v.precision]
        self.align = TMA_BYTES // self.elem_bytes  # elements per 16 bytes
        self.consumers = 2  # consumer warp groups (cooperative: one tile; ping-pong: alternating tiles)
        self.threads = 128 * (1 + self.consumers)  # one producer warp group
        rows_per_wg = self.tile[0] // 2 if self.schedule == "ws-coop" else self.tile[0]
        self.acc_elems = rows_per_wg * self.tile[1] // 128  # fp32 accumulators per consumer thread
        self.stage_bytes = (self.tile[0] + self.tile[1]) * self.tile[2] * self.elem_bytes
        self.coop_teams = 0  # (the bench adapter's field: no cooperative TMR here)


def cutlass90_operation(v: Variant, alias: str) -> str:
    """C++ of the kernel: the epilogue and mainloop collectives and ``struct <alias> : GemmUniversal<...>``,
    emitted by cutlass_library's 3.x emitter."""
    lib, gop = cutlass_library("the cutlass90 backend")
    g = Geometry(v)
    data = {"tf32": lib.DataType.f32, "tf32x3": lib.DataType.f32, "fp16": lib.DataType.f16, "bf16": lib.DataType.bf16}[v.precision]
    mma_in = lib.DataType.tf32 if v.precision in ("tf32", "tf32x3") else data
    coop = g.schedule == "ws-coop"
    # the instruction shape only names the math (the builder picks the wgmma from the tile)
    inst = [64, g.tile[1], WGMMA_K[v.precision]]
    math_inst = lib.MathInstruction(inst, mma_in, mma_in, lib.DataType.f32, lib.OpcodeClass.TensorOp, lib.MathOperation.multiply_add)
    warps = [4 * g.consumers, 1, 1] if coop else [4, 1, 1]
    tile = lib.TileDescription(list(g.tile), g.stages, warps, math_inst, 90, 90, [g.cluster[0], g.cluster[1], 1])
    lay = {"row": lib.LayoutType.RowMajor, "col": lib.LayoutType.ColumnMajor}
    a = lib.TensorDescription(data, lay[g.layout_a], g.align)
    b = lib.TensorDescription(data, lay[g.layout_b], g.align)
    c = lib.TensorDescription(data, lib.LayoutType.RowMajor, g.align)
    kernel_schedule = lib.KernelScheduleType.TmaWarpSpecializedCooperative if coop else lib.KernelScheduleType.TmaWarpSpecializedPingpong
    epi_schedule = lib.EpilogueScheduleType.TmaWarpSpecializedCooperative if coop else lib.EpilogueScheduleType.TmaWarpSpecialized
    scheduler = lib.TileSchedulerType.StreamK if g.scheduler == "streamk" else lib.TileSchedulerType.Persistent
    op = gop.GemmOperation(
        lib.GemmKind.Universal3x, 90, tile, a, b, c, lib.DataType.f32, lib.EpilogueFunctor.LinearCombination,
        lib.SwizzlingFunctor.Identity1, kernel_schedule=kernel_schedule, epilogue_schedule=epi_schedule, tile_scheduler=scheduler,
    )
    text = gop.EmitGemmUniversal3xInstance().emit(op)
    old = op.procedural_name()
    if f"struct {old} :" not in text:  # pragma: no cover - guards against a changed emitter
        raise FtgenError(f"unexpected cutlass_library output for {v.name}: struct {old} not found")
    text = text.replace(f"// Gemm operator {old}", f"// {old} (cutlass_library)")
    text = text.replace(f"struct {old} :", f"struct {alias} :").replace(old, alias)
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    out: list[str] = []
    for ln in lines:  # collapse the emitter's runs of blank lines
        if ln or (out and out[-1]):
            out.append(ln)
    return "\n".join(out)


def tolerance(precision: str) -> dict:
    """The bench's tolerance constants: ftgen.tolerance's rule for the delivered precision, as the ``cutlass``
    backend renders it (against the unrounded fp32 inputs tf32 adds its input rounding)."""
    return {**tolerance_context(precision), "io_unrounded": tolerance_context(precision, rounded_reference=False)["tol_io"]}


class Cutlass90Backend(Backend):
    name = "cutlass90"
    precisions = PRECISIONS
    levels = {}
    params = PARAMS
    requires = ("cublas", "cutlass")  # cuBLAS: the bench executable's reference
    compile_options = ("-DNDEBUG", "-Xptxas=-warn-spills")
    constraint_docs = (
        "cutlass90: chosen by params backend: cutlass90; arch sm_90a only; protection none only",
        "cutlass90: precision tf32, tf32x3, fp16 or bf16 (no fp64: the sm90 builder has no FP64 wgmma path)",
        "cutlass90: ws-coop tile_m 128 or 256, ws-pingpong tile_m 64 or 128; tile_n a multiple of 16 (<= 256); "
        "tile_k x element bytes 64, 128 or 256",
        "cutlass90: fp32 accumulators per consumer thread (tile_m/2 or tile_m) x tile_n / 128 <= 128",
        "cutlass90: cluster_m x cluster_n <= 8 (portable cluster); streamk with ws-coop only",
        "cutlass90: stages (explicit) >= 2 and stages x (tile_m + tile_n) x tile_k x element bytes + 32 KiB <= 227 KiB",
        "cutlass90: tf32 and tf32x3 take K-major operands (layout_a row, layout_b col)",
    )

    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        over = _PREC_DEFAULTS.get(precision, {})
        return tuple(p.with_default(over[p.name]) if p.name in over else p for p in PARAMS)

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        if precision not in PRECISIONS:
            return (f"the cutlass90 backend takes precision {', '.join(PRECISIONS)}, not {precision} "
                    f"(fp64 and fp32: the cutlass and simt backends)")
        if protection.scheme != "none":
            return (f"the cutlass90 backend offers scheme none only, not {protection.scheme}; "
                    f"for protected tensor-core GEMMs use the cutlass backend (omit params backend)")
        return None

    def constraints(self, v: Variant) -> list[str]:
        r: list[str] = []
        reason = self.protection_ok(v.precision, v.protection)
        if reason:
            return [reason]
        if tuple(v.arch) != (ARCH,):
            return [f"arch {', '.join(v.arch)}: the cutlass90 backend builds for sm_90a only (wgmma and setmaxnreg "
                    f"exist only there); write arch: [sm_90a], or omit params backend for the sm_80 CUTLASS kernels"]
        g = Geometry(v)
        tm, tn, tk = g.tile
        allowed_m = (128, 256) if g.schedule == "ws-coop" else (64, 128)
        if tm not in allowed_m:
            r.append(f"tile_m={tm}: the {g.schedule} schedule takes tile_m {' or '.join(map(str, allowed_m))}"
                     + (" (two consumer warp groups split the tile's rows, 64 each at least)" if g.schedule == "ws-coop" else ""))
        if tn % 16 or not 16 <= tn <= 256:
            r.append(f"tile_n={tn} is not a wgmma N: a multiple of 16 from 16 to 256")
        kb = tk * g.elem_bytes
        if kb not in (64, 128, 256):
            ok = ", ".join(str(b // g.elem_bytes) for b in (64, 128, 256))
            r.append(f"tile_k={tk} x {g.elem_bytes}-byte elements = {kb} bytes: the TMA/wgmma shared-memory layouts take "
                     f"64, 128 or 256 bytes along K (tile_k {ok} for {v.precision})")
        if g.acc_elems > MAX_ACC_PER_THREAD:
            r.append(f"tile {tm}x{tn} with {g.schedule}: {g.acc_elems} fp32 accumulators per consumer thread (at most "
                     f"{MAX_ACC_PER_THREAD}); use a smaller tile" + (" or ws-coop" if g.schedule == "ws-pingpong" else ""))
        cm, cn = g.cluster
        if cm * cn > 8:
            r.append(f"cluster {cm}x{cn} has {cm * cn} CTAs; a portable cluster has at most 8")
        if g.scheduler == "streamk" and g.schedule != "ws-coop":
            r.append("scheduler streamk needs schedule ws-coop (CUTLASS's ping-pong kernel has the persistent scheduler only)")
        if g.stages:
            smem = g.stages * g.stage_bytes + EPILOGUE_SMEM
            if g.stages < 2:
                r.append(f"stages={g.stages}: the TMA pipeline needs at least 2 stages (or 0: as many as fit)")
            elif smem > SMEM_PER_BLOCK[ARCH]:
                r.append(f"stages={g.stages} x {g.stage_bytes} bytes + about {EPILOGUE_SMEM} for the epilogue = {smem} bytes "
                         f"of shared memory; at most {SMEM_PER_BLOCK[ARCH]} on sm_90a: use fewer stages, stages: 0, or a smaller tile")
        elif 2 * g.stage_bytes + EPILOGUE_SMEM > SMEM_PER_BLOCK[ARCH]:
            r.append(f"two stages of {g.stage_bytes} bytes do not fit beside the epilogue in {SMEM_PER_BLOCK[ARCH]} bytes; use a smaller tile")
        if v.precision in ("tf32", "tf32x3") and (g.layout_a, g.layout_b) != ("row", "col"):
            r.append(f"layout_a={g.layout_a}, layout_b={g.layout_b}: the TF32 wgmma reads K-major operands only "
                     f"({v.precision} takes layout_a row, layout_b col)")
        return r

    def name_tokens(self, v: Variant) -> list[str]:
        g = Geometry(v)
        tm, tn, tk = g.tile
        return [
            "gemm",
            PRECISION_TAG[v.precision],
            self.protection_token(v.protection),
            "cutlass90",
            f"{tm}x{tn}x{tk}",
            f"c{g.cluster[0]}x{g.cluster[1]}",
            g.schedule,
            g.scheduler,
            f"s{g.stages}" if g.stages else "sauto",
            f"sw{g.swizzle}",
            f"{g.layout_a[0]}{g.layout_b[0]}",
        ]

    def context(self, v: Variant) -> dict:
        g = Geometry(v)
        ta, tc, tacc, tepi = _CTYPES[v.precision]
        return {
            "v": v,
            "g": g,
            "name": v.name,
            "sym": v.symbol,
            "precision": v.precision,
            "prot": v.protection,
            "inject": False,
            "level": "none",
            "meta_json": v.meta_json(),
            "op_kernel": cutlass90_operation(v, "Kernel"),
            "ElementAB": ta,
            "ElementC": tc,
            "ElementAcc": tacc,
            "ElementEpi": tepi,
            "BenchT": _BENCH_TYPES[v.precision],
            "split3": v.precision == "tf32x3",
            # the bench's reference takes the tf32 operands rounded as CUTLASS's converter rounds them (see above)
            "tf32_truncate": False,
            "tol": tolerance(v.precision),
            "copies": 1,
            "row_a": g.layout_a == "row",
            "row_b": g.layout_b == "row",
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return (
            Source("cutlass90_variant.h.j2", ".h", "header"),
            Source("cutlass90_variant.cu.j2", ".cu", "library"),
            Source("cutlass_bench.cu.j2", "_bench.cu", "bench"),
        )
