"""The ``cutlass`` backend of ``gemm``: CUTLASS 2.x tensor-op kernels with TMR and threadblock ABFT.

Precisions: ``tf32`` (fp32 data, TF32 tensor cores, fp32 accumulation), ``tf32x3`` (fp32 data split into
big + small TF32 halves, three MMAs per product -- CUTLASS's OpMultiplyAddFastF32 -- for fp32 accuracy,
compared with cuBLAS SGEMM), ``fp16`` and ``bf16``
(16-bit data and output, fp32 accumulation), ``fp64`` (DMMA). The unprotected kernel of every
variant is a CUTLASS 2.x ``cutlass::gemm::device::Gemm`` (sm_80 multistage mainloop, which also
runs on sm_90) whose C++ declaration is emitted by ``cutlass_library`` from a ``MathInstruction``,
a ``TileDescription`` and a ``GemmOperation``. The TMR kernels are built from the components of
that same type (its threadblock ``Mma``: iterators, shared-memory layout and warp-level tensor-core
MMA; its ``Epilogue``; its ``ThreadblockSwizzle``) in ``templates/gemm/cutlass_tmr.cuh``, so every
level runs the instruction stream of the unprotected kernel.

Layouts: C is row-major; A (M x K) and B (K x N) are row- or column-major (params ``layout_a``,
``layout_b``). The leading dimensions of ``ftgen_gemm_problem`` are read as usual for each layout::

    A row-major: A(i, k) = A[i * lda + k], lda >= K      A column-major: A(i, k) = A[i + k * lda], lda >= M
    B row-major: B(k, j) = B[k * ldb + j], ldb >= N      B column-major: B(k, j) = B[k + j * ldb], ldb >= K
    C row-major: C(i, j) = C[i * ldc + j], ldc >= N

Any M, N, K >= 1: the ``align``-element kernel runs when the pointers, the leading dimensions and
the contiguous extents of A, B and C are multiples of ``align``; otherwise a second instantiation
with 4-byte A/B accesses and scalar C stores runs (fp16/bf16 operands whose contiguous extent or
leading dimension is odd are first copied into a zero-padded workspace buffer).

TMR levels (``protection: {scheme: tmr, level: ...}``); votes compare bit patterns (the three
copies execute identical instructions, so fault-free copies are bitwise equal):

* ``kernel`` — three launches of the kernel on three streams (copy 0 on the caller's stream, writing
  C itself when beta == 0) writing three outputs; each copy's block counts its tile as done, and the
  last of the three copies of a tile votes that tile element-wise (writes C only where copy 0 is not
  the majority, counts) -- no separate pass over the outputs; elements where all three differ are
  recomputed by one more launch after the three (a no-op grid when nothing is flagged) that computes
  the tile three times and votes again. Without injection the copies run CUTLASS's own kernel code.
* ``threadblock`` — one threadblock holds three accumulator sets fed by the same shared-memory
  tiles (loads are not tripled); every ``interval`` k-iterations (and at the end) the copies are
  voted in registers and the minority copy is repaired, so later k-steps build on the right value.
  Three disagreeing copies -> the tile is recomputed from k = 0 (at most twice).
* ``multikernel`` — one launch per k-chunk of ``interval`` k-iterations per copy; the copies'
  accumulator states (in the register-fragment order, in global memory) are voted and repaired
  between chunks; the outputs of the last chunk are voted like ``kernel``. An uncorrectable state
  marks the tile for recomputation by the final recompute launch.
* ``cooperative`` — the three copies of a tile run in three threadblocks of one cooperative launch
  that are placed on three different SMs (the grid is co-resident; each block reads its SM id,
  blocks are ranked by SM id and a team takes ranks t, t+T, t+2T, which cannot share an SM); at
  each checkpoint the copies exchange 16-byte per-thread digests of their accumulators (four FNV-1a
  chains: any single differing element changes the digest) through global memory (double-buffered
  slots, one barrier among the team's three blocks, ordered by the cooperative launch's
  co-residency); on a mismatch they exchange the accumulators themselves (one more barrier) and
  every copy votes and repairs itself; the tiles are looped over by
  ``T`` teams (``coop_teams``: 0 = as many as fit co-resident). The SM id of every copy is recorded.

Kernel names (every parameter is encoded)::

    gemm_<prec>_<protection>_cutlass_<tb_m>x<tb_n>x<tb_k>_w<warp_m>x<warp_n>x<warp_k>
        _i<inst_m>x<inst_n>x<inst_k>_s<stages>_a<align>_sw<swizzle>_<a><b>[_teams<T>][_inj]

``<protection>`` is ``none``, ``tmr-<kernel|tb|multikernel|coop>[-i<interval>]`` or ``abft-tb[...]``; ``<a><b>`` are the layouts of A and B, ``r`` (row) or ``c`` (column);
``_teams<T>`` appears for cooperative variants with an explicit team count; ``_inj`` marks a build
with fault injection compiled in. Example: ``gemm_tf32_tmr-kernel_cutlass_128x128x32_w64x64x32_i16x8x8_s3_a4_sw8_rr``.

Fault injection (``inject: true`` builds only): a ``FaultSpec`` targets one copy's accumulator.
For TMR its ``block`` is ``tile * 3 + copy`` (``tile`` = row-major index of the output tile), and
``step`` is the k-iteration after which the fault is applied (before that iteration's vote when it
is a checkpoint). With ``ftgen_gemm_problem::no_correct`` set the votes still detect and count, but
nothing is repaired or recomputed and each tile's output is taken from the copy a planned fault
targets (the value the fault would have produced) -- the campaigns' ``uncorrected_err``.
"""

from __future__ import annotations

from ...errors import FtgenError
from ...libraries import cutlass_library
from ...tolerance import C_CONST, C_SQRT
from ...tolerance import context as tolerance_context, rule as tolerance_rule, tolerance as rule_tolerance
from ..base import (
    CLUSTER_ARCHS,
    MAX_SMS,
    MAX_THREADS_PER_SM,
    PRECISION_TAG,
    REGS_PER_SM,
    SMEM_PER_BLOCK,
    SMEM_PER_SM,
    UNIT_ROUNDOFF,
    Backend,
    Param,
    Protection,
    Source,
    Variant,
    power_of_two,
)
from .abft_model import (ABFT64_LAMBDA, ABFT64_STRIP_COLS, ABFT_ELEMENT_FRACTION, ABFT_STRIP_LAMBDA, ABFT_STRIP_LAMBDAS,
                         ABFT_STRIP_UNIT_PRECISION, abft64_band_built, abft_strip_lambda)
from .tmr_model import MAX_ATTEMPTS

# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

PRECISIONS = ("tf32", "tf32x3", "fp16", "bf16", "fp64")
# protection levels and their name tokens
LEVEL_TOKENS = {"tmr": {"kernel": "kernel", "threadblock": "tb", "multikernel": "multikernel", "cooperative": "coop"},
                "abft": {"threadblock": "tb"}}
TMR_LEVELS = tuple(LEVEL_TOKENS["tmr"])
COPIES = 3
# Threadblock ABFT: tf32x3 (templates/gemm/cutlass_abft.cuh) with the SIMT threadblock level's rules (abft_model),
# the tensor cores' truncating fp32 accumulation as the unit roundoff (2^-23) and the SIMT level's lambda (the GPU
# fault campaigns measure the margin, the largest clean score); fp64 (templates/gemm/cutlass_abft64.cuh) with its own
# check after the GEMM, every sum in double (ABFT64_* below).
ABFT_PRECISIONS = ("tf32x3", "fp64")
ABFT_LAMBDA = 2.0
ABFT_UNIT = 2.0**-23
# ref_checksums: concurrent checks each row per checksum strip of abft_cols columns (whole warp columns, with its own
# encodings and reference rows; by default the widest calibrated strip that fits, 128 on 128-column tiles) at its own
# threshold: lambda 1.5 on the unit roundoff of fp32 sums for strips of 32 columns, 1.0 for 64, 0.6 for 128
# (abft_model.abft_strip_lambda, abft_concurrent_check; docs/gemm-abft.md: the margin and the coverage they give)
ABFT_STRIP_UNIT = UNIT_ROUNDOFF[ABFT_STRIP_UNIT_PRECISION]
# fp64 (templates/gemm/cutlass_abft64.cuh): the check after the GEMM in double, once per launch (abft_model.abft_fp64_check)
ABFT64_ONCE_INTERVAL = 1024

PARAMS = (
    Param("backend", str, ("cutlass",), "selects this backend where another would be the default (fp64 unprotected: "
          "the SIMT kernels)", choices=("cutlass",)),
    Param("tb_m", int, (128,), "threadblock tile rows", check=power_of_two),
    Param("tb_n", int, (128,), "threadblock tile columns", check=power_of_two),
    Param("tb_k", int, (32,), "threadblock tile depth (one k-iteration)", check=power_of_two),
    Param("warp_m", int, (64,), "warp tile rows", check=power_of_two),
    Param("warp_n", int, (64,), "warp tile columns", check=power_of_two),
    Param("warp_k", int, (32,), "warp tile depth (= tb_k)", check=power_of_two),
    Param("inst_m", int, (16,), "tensor-core instruction rows (tf32/fp16/bf16: 16, fp64: 8, or 16 on sm_90)", check=power_of_two),
    Param("inst_n", int, (8,), "tensor-core instruction columns (8)", check=power_of_two),
    Param("inst_k", int, (8,), "tensor-core instruction depth (tf32: 8, fp16/bf16: 8 or 16, fp64: 4)", check=power_of_two),
    Param("stages", int, (3,), "cp.async shared-memory pipeline stages", lo=3, hi=8),
    Param("align", int, (4,), "elements per global access of A, B and C (at most 128 bits, at least 32)", check=power_of_two),
    Param("swizzle", int, (8,), "threadblock rasterization group (GemmIdentityThreadblockSwizzle<N>)", choices=(1, 2, 4, 8)),
    Param("layout_a", str, ("row",), "layout of A (M x K)", choices=("row", "col")),
    Param("layout_b", str, ("row",), "layout of B (K x N)", choices=("row", "col")),
    Param("coop_teams", int, (0,), "tmr cooperative: teams of three threadblocks (0: as many as fit co-resident)", lo=0),
    Param("ref_checksums", str, ("fused",), "abft: where the reference row checksums A (B e), A (B w) come from: fused "
          "(carried in the main loop from the A fragments of the tensor cores), prepass (a pre-pass kernel per "
          "checkpoint; the main loop is the unprotected one; workspace: 8 bytes per row, block column and checkpoint) "
          "or concurrent (the pre-pass on a second stream while the GEMM runs, the GEMM storing each tile's row sums, a "
          "check kernel after both that checks each row per strip of abft_cols columns against that strip's own reference "
          "(whole warp columns; lambda 1.5 on fp32's unit roundoff for 32, 0.6 for 128), corrects located faults in C and has a row of a strip "
          "it cannot locate recomputed from A and B; where a tile has one checkpoint, beta = 0 and alpha != 0, else as "
          "prepass; workspace: 16 bytes more per row, block column and warp column, the encodings and reference rows "
          "per strip)",
          choices=("fused", "prepass", "concurrent")),
    Param("abft_cols", int, (ABFT64_STRIP_COLS,), "abft: columns per checksum strip (each strip adds 2 columns to the "
          "reference GEMM). fp64: 32, 64 or 128 (the default; 32 costs 4x the reference work of 128 and sees smaller faults "
          "beside large elements; docs/gemm-hopper.md). tf32x3 with ref_checksums: concurrent: whole warp columns dividing "
          "tb_n -- 32 (lambda 1.5), 64 (1.0) or 128 (0.6: a quarter of the reference GEMM of 32-column strips, the same "
          "coverage); 0 (the default): the widest of these that fits the tiles (docs/gemm-abft.md)", choices=(0, 32, 64, 128, 256)))

# Defaults that fit each precision (the tuple above holds the tf32 ones): CutlassBackend.param_defs.
_PREC_DEFAULTS = {
    "tf32": {},
    "tf32x3": {"abft_cols": 0},
    "fp16": {"inst_k": 16, "align": 8},
    "bf16": {"inst_k": 16, "align": 8},
    "fp64": {"tb_m": 64, "tb_n": 64, "tb_k": 16, "warp_m": 32, "warp_n": 32, "warp_k": 16, "inst_m": 8, "inst_k": 4, "align": 1},
}
_TB_DEFAULTS = {"tb_m": 128, "tb_n": 64, "warp_m": 32, "warp_n": 32}  # threadblock TMR: three accumulator sets


INSTRUCTIONS = {
    "tf32": ((16, 8, 8),),
    "tf32x3": ((16, 8, 8),),
    "fp16": ((16, 8, 16), (16, 8, 8)),
    "bf16": ((16, 8, 16), (16, 8, 8)),
    # fp64: the sm80 DMMA m8n8k4, or Hopper's m16n8k4 (CUTLASS 2.x arch::Sm90; sm_90 / sm_90a only)
    "fp64": ((8, 8, 4), (16, 8, 4)),
}
SM90_ONLY_INSTRUCTIONS = {("fp64", (16, 8, 4))}
ELEM_BITS = {"tf32": 32, "tf32x3": 32, "fp16": 16, "bf16": 16, "fp64": 64}
ACC_WORDS = {"tf32": 1, "tf32x3": 1, "fp16": 1, "bf16": 1, "fp64": 2}  # 32-bit registers per accumulator element
# the co-residency bound of cooperative grids is checked against the per-architecture limits of base.py
# (SMEM_PER_BLOCK, SMEM_PER_SM, MAX_SMS, MAX_THREADS_PER_SM, REGS_PER_SM) and again at run time
MAX_REGS = 255


class Geometry:
    """Derived quantities of a CUTLASS variant (shared by constraints, names and templates)."""

    def __init__(self, v: Variant):
        p = v.param_dict
        self.precision = v.precision
        self.tb = (p["tb_m"], p["tb_n"], p["tb_k"])
        self.warp = (p["warp_m"], p["warp_n"], p["warp_k"])
        self.inst = (p["inst_m"], p["inst_n"], p["inst_k"])
        self.stages, self.align, self.swizzle = p["stages"], p["align"], p["swizzle"]
        self.layout_a, self.layout_b = p["layout_a"], p["layout_b"]
        self.coop_teams = p["coop_teams"]
        prot = v.protection
        self.level = prot.level if prot.scheme == "tmr" else ("abft" if prot.scheme == "abft" else "none")
        self.interval = prot.interval
        self.copies_in_block = COPIES if self.level == "threadblock" else 1
        self.elem_bits = ELEM_BITS[v.precision]
        self.elem_bytes = self.elem_bits // 8
        wc = [self.tb[i] // self.warp[i] if self.warp[i] else 0 for i in range(3)]
        self.warp_count = tuple(wc)
        self.threads = wc[0] * wc[1] * wc[2] * 32
        self.acc_elems = self.warp[0] * self.warp[1] // 32  # accumulator elements per thread, per copy
        self.smem_bytes = self.stages * (self.tb[0] * self.tb[2] + self.tb[2] * self.tb[1]) * self.elem_bytes
        self.warp_k_iters = self.warp[2] // self.inst[2] if self.inst[2] else 0
        # 4-byte accesses (the smallest cp.async) for the fallback instantiation
        self.fallback_align = max(1, 32 // self.elem_bits)
        self.regs_estimate = self._regs()

    def _regs(self) -> int:
        wm, wn, _ = self.warp
        im, inn, ik = self.inst
        if not (im and inn and ik):
            return 0
        acc = self.copies_in_block * self.acc_elems * ACC_WORDS[self.precision]
        if self.precision == "fp64":
            a_regs, b_regs = (wm // 8) * 2, (wn // 8) * 2
        else:
            per_a = 4 if (self.precision in ("tf32", "tf32x3") or ik == 16) else 2
            per_b = 2 if (self.precision in ("tf32", "tf32x3") or ik == 16) else 1
            a_regs, b_regs = (wm // 16) * per_a, (wn // 8) * per_b
        return acc + 2 * (a_regs + b_regs) + 40

    def blocks_per_sm(self, arch: str) -> int:
        """Upper bound on co-resident blocks per SM (shared memory, threads, estimated registers)."""
        if self.threads <= 0:
            return 0
        by_smem = SMEM_PER_SM[arch] // max(1, self.smem_bytes + 1024)
        by_threads = MAX_THREADS_PER_SM[arch] // self.threads
        regs = min(MAX_REGS, max(self.regs_estimate, 32))
        by_regs = REGS_PER_SM // (regs * self.threads)
        return max(0, min(by_smem, by_threads, by_regs, 32))


def abft_prepass(v: Variant) -> bool:
    """Threadblock ABFT whose reference checksums come from the pre-pass kernel (ref_checksums: prepass or concurrent)."""
    return v.protection.scheme == "abft" and v.get("ref_checksums", "fused") in ("prepass", "concurrent")


def _default_cols(precision: str) -> int:
    """abft_cols's default for the precision (tf32x3: 0, the widest calibrated strip; fp64: ABFT64_STRIP_COLS)."""
    return _PREC_DEFAULTS.get(precision, {}).get("abft_cols", ABFT64_STRIP_COLS)


def abft_concurrent(v: Variant) -> bool:
    """ref_checksums: concurrent: the pre-pass beside the GEMM on a second stream, the check after both."""
    return v.protection.scheme == "abft" and v.get("ref_checksums", "fused") == "concurrent"


def abft_strip_cols(v: Variant) -> int:
    """Columns of a checksum strip of the threadblock ABFT: fp64's abft_cols; with ref_checksums: concurrent, tf32x3's
    abft_cols (whole warp columns) or, where that is 0, abft_auto_strip; the tile's tb_n otherwise."""
    if v.precision == "fp64":
        return v.get("abft_cols", ABFT64_STRIP_COLS)
    if abft_concurrent(v):
        return v.get("abft_cols", 0) or abft_auto_strip(v.get("warp_n"), v.get("tb_n"))
    return v.get("tb_n")


def abft_auto_strip(warp_n: int, tb_n: int) -> int:
    """tf32x3's abft_cols: 0 -- the widest strip with a calibrated lambda (abft_model.ABFT_STRIP_LAMBDAS: 128, 64, 32
    columns) that is whole warp columns and divides tb_n; the warp column where none is. The widest costs the fewest
    reference columns and, at its lambda, detects as much (docs/gemm-abft.md)."""
    for cols in sorted(ABFT_STRIP_LAMBDAS, reverse=True):
        if cols % warp_n == 0 and tb_n % cols == 0:
            return cols
    return warp_n


def abft_strip_unit(v: Variant) -> float:
    """The threshold unit (lambda x unit roundoff) of the check per strip: fp64's ABFT64_LAMBDA x 2^-53,
    abft_strip_lambda(strip columns) x ABFT_STRIP_UNIT with ref_checksums: concurrent (1.5 for 32 columns, 1.0 for 64),
    ABFT_LAMBDA x ABFT_UNIT otherwise."""
    if v.precision == "fp64":
        return ABFT64_LAMBDA * UNIT_ROUNDOFF["fp64"]
    return abft_strip_lambda(abft_strip_cols(v)) * ABFT_STRIP_UNIT if abft_concurrent(v) else ABFT_LAMBDA * ABFT_UNIT


def abft64_band_context(v: Variant) -> dict:
    """The fp64 check's suspect band as the variant's template renders it: whether it has one (fp64 with a derived
    threshold, of which the band's floor is a fraction), the built floor (abft_model.abft64_band_built: 0.3 of the
    threshold on 128-column strips with row-major A, none otherwise; the environment's FTGEN_ABFT_BAND replaces it) and a
    suspect element's tolerance, ABFT_ELEMENT_FRACTION of ftgen.tolerance's fp64 rule u (C_SQRT sqrt(k) + C_CONST)."""
    banded = v.precision == "fp64" and v.protection.scheme == "abft" and v.protection.threshold == "auto"
    band = abft64_band_built(abft_strip_cols(v), v.get("layout_a", "row") == "row") if banded else 0.0
    return {
        "abft_banded": banded,
        "abft_band": repr(band),
        "abft_elem_u": repr(ABFT_ELEMENT_FRACTION * tolerance_rule("fp64").u),
        "abft_elem_c_sqrt": repr(C_SQRT),
        "abft_elem_c_const": repr(C_CONST),
    }


# --------------------------------------------------------------------------------------------
# Verification tolerance: ftgen.tolerance's rule for the delivered precision
# --------------------------------------------------------------------------------------------


def tolerance(precision: str, k: int) -> float:
    """Largest allowed max_ij |C - C_ref|_ij / s_ij, s = |alpha| |A_r||B_r| + |beta| |C_0|, against cuBLAS on the
    operands as the tensor cores see them (A_r, B_r: tf32 data rounded by the kernel's own conversion, the others
    unchanged): the rule of ``ftgen.tolerance`` for the delivered precision (tf32x3 at fp32 level, tf32 at tf32's,
    fp16 / bf16 with fp32 accumulation plus the rounding of a 16-bit C)."""
    return rule_tolerance(precision, k)


def tolerance_fp32(precision: str, k: int) -> float:
    """The same against the product of the unrounded inputs (tf32 adds its input rounding 2u + u^2, u = 2^-11)."""
    return rule_tolerance(precision, k, rounded_reference=False)


# --------------------------------------------------------------------------------------------
# Emission
# --------------------------------------------------------------------------------------------

_CTYPES = {  # (A/B element, C element, accumulator, epilogue compute) as CUTLASS types
    "tf32": ("float", "float", "float", "float"),
    "tf32x3": ("float", "float", "float", "float"),
    "fp16": ("cutlass::half_t", "cutlass::half_t", "float", "float"),
    "bf16": ("cutlass::bfloat16_t", "cutlass::bfloat16_t", "float", "float"),
    "fp64": ("double", "double", "double", "double"),
}
_BENCH_TYPES = {"tf32": "float", "tf32x3": "float", "fp16": "__half", "bf16": "__nv_bfloat16", "fp64": "double"}
LEVEL_ENUM = {"none": 0, "kernel": 1, "threadblock": 2, "multikernel": 3, "cooperative": 4, "abft": 5}


def cutlass_operation(v: Variant, alias: str, align: int, align_c: int) -> str:
    """C++ declaration ``using <alias> = cutlass::gemm::device::Gemm<...>;`` emitted by cutlass_library."""
    lib, gop = cutlass_library("the CUTLASS backend")
    g = Geometry(v)
    dt = {"tf32": lib.DataType.f32, "tf32x3": lib.DataType.f32, "fp16": lib.DataType.f16, "bf16": lib.DataType.bf16, "fp64": lib.DataType.f64}[v.precision]
    acc = lib.DataType.f64 if v.precision == "fp64" else lib.DataType.f32
    mma_in = lib.DataType.tf32 if v.precision == "tf32" else dt
    # tf32x3: fp32 operands split into big + small tf32 halves, three MMAs (OpMultiplyAddFastF32)
    math_op = lib.MathOperation.multiply_add_fast_f32 if v.precision == "tf32x3" else lib.MathOperation.multiply_add
    math_inst = lib.MathInstruction(list(g.inst), mma_in, mma_in, acc, lib.OpcodeClass.TensorOp, math_op)
    cc = 90 if (v.precision, g.inst) in SM90_ONLY_INSTRUCTIONS else 80  # the arch tag (Sm90: Hopper's DMMA m16n8k4)
    tile = lib.TileDescription(list(g.tb), g.stages, list(g.warp_count), math_inst, cc, 1024)
    lay = {"row": lib.LayoutType.RowMajor, "col": lib.LayoutType.ColumnMajor}
    a = lib.TensorDescription(dt, lay[g.layout_a], align)
    b = lib.TensorDescription(dt, lay[g.layout_b], align)
    c = lib.TensorDescription(dt, lib.LayoutType.RowMajor, align_c)
    swz = {1: lib.SwizzlingFunctor.Identity1, 2: lib.SwizzlingFunctor.Identity2, 4: lib.SwizzlingFunctor.Identity4, 8: lib.SwizzlingFunctor.Identity8}
    op = gop.GemmOperation(lib.GemmKind.Gemm, cc, tile, a, b, c, acc, lib.EpilogueFunctor.LinearCombination, swz[g.swizzle])
    text = gop.EmitGemmInstance().emit(op)
    old = f"Operation_{op.procedural_name()}"
    if text.count(old) != 1:  # pragma: no cover - guards against a changed emitter
        raise FtgenError(f"unexpected cutlass_library output for {v.name}: {old} not found once")
    return text.replace(old, alias).replace(f"// Gemm operator {op.procedural_name()}", f"// {op.procedural_name()} (cutlass_library)")


class CutlassBackend(Backend):
    name = "cutlass"
    precisions = PRECISIONS
    levels = LEVEL_TOKENS
    params = PARAMS
    requires = ("cublas", "cutlass")  # cuBLAS: the bench executable's reference
    compile_options = ("-Xptxas=-warn-spills",)
    constraint_docs = (
        "cutlass: tb_m % warp_m == 0, tb_n % warp_n == 0, warp_k == tb_k, warp tile a multiple of the instruction",
        "cutlass: instruction tf32 16x8x8; fp16/bf16 16x8x16 or 16x8x8; fp64 8x8x4, or 16x8x4 (Hopper's DMMA) with arch sm_90/sm_90a only; warp_k/inst_k even and >= 2",
        "cutlass: align x element bits in 32..128 (fp64: align 1); A and B tiles split evenly into threads x align accesses",
        "cutlass: stages x (tb_m*tb_k + tb_k*tb_n) x element bytes <= the arch's shared memory per block",
        "cutlass: a k-contiguous operand (A row-major, B column-major) needs tb_k x element bytes <= 128 (tf32: tb_k <= 32)",
        "cutlass: estimated registers <= 255 and threads x registers <= 65536 (threadblock TMR holds three accumulator sets: use 32x32 warp tiles)",
        "cutlass tmr: interval >= 1 (kernel level: 1); correct: online; threshold: auto; coop_teams only for cooperative, 3*coop_teams co-resident",
        "cutlass abft: precision tf32x3 or fp64, level threadblock; tb_k <= 32; ref_checksums fused, prepass or concurrent (abft only)",
        f"cutlass abft fp64: ref_checksums concurrent (the default: the check after the GEMM, in double; strips of "
        f"{ABFT64_STRIP_COLS} columns), interval auto or >= {ABFT64_ONCE_INTERVAL} (it checks once, after the whole K)",
    )

    def auto_interval(self, prot: Protection, params) -> int:
        """k-iterations between checks when a spec names none: ABFT verifies once per tile (measured on an H100:
        x1.01-1.10 the unprotected kernel, against x1.33-1.42 verifying every 8 or 16); TMR compares the copies once, at
        the end, except the kernel level, whose interval is 1 by construction."""
        if prot.scheme == "tmr" and prot.level == "kernel":
            return 1
        return 1024

    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        """PARAMS with defaults that fit (precision, protection)."""
        over = dict(_PREC_DEFAULTS.get(precision, {}))
        if protection.scheme == "abft" and precision == "fp64":
            over["ref_checksums"] = "concurrent"  # (its only design: the check after the GEMM, in double)
        if protection.scheme == "tmr" and protection.level == "threadblock":
            over.update(_TB_DEFAULTS if precision != "fp64" else {"warp_m": 16, "warp_n": 32})
        out = []
        for p in PARAMS:
            if p.name in over:
                p = p.with_default(over[p.name])
            out.append(p)
        return tuple(out)

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        """Reason why the CUTLASS backend cannot offer (precision, protection), or None."""
        if precision not in PRECISIONS:
            return (
                f"the CUTLASS tensor-op backend (needed for {protection.scheme}) takes precision tf32 "
                f"(fp32 data on TF32 tensor cores), tf32x3 (fp32 data, three TF32 MMAs: fp32 accuracy), fp16, bf16 or "
                f"fp64, not {precision}"
            )
        if protection.scheme == "none":
            return None
        if protection.scheme == "abft":
            if precision not in ABFT_PRECISIONS:
                tc = " and ".join(ABFT_PRECISIONS)
                return (f"abft on the CUTLASS backend is implemented for {tc} (level threadblock), not {precision}; the "
                        f"SIMT backend offers abft for fp32 and fp64")
            if protection.level != "threadblock":
                return f"abft on the CUTLASS backend has level threadblock only, not {protection.level!r}"
            if protection.interval < 1:
                return f"interval {protection.interval} must be at least 1 (k-iterations between verifications)"
            return None
        if protection.scheme != "tmr":
            return f"scheme {protection.scheme!r} is not implemented by the CUTLASS backend (it offers none, tmr and abft)"
        if precision == "tf32x3":
            return "tmr is not implemented for tf32x3 (its staged accumulation); use tf32, fp16, bf16 or fp64, or abft"
        if protection.level not in TMR_LEVELS:
            return f"level {protection.level!r} is not a tmr level (allowed: {', '.join(TMR_LEVELS)})"
        if protection.correct != "online":
            return "tmr corrects by majority vote (three copies disagreeing are recomputed); correct: detect does not apply"
        if protection.threshold != "auto":
            return "tmr votes by exact (bitwise) equality of the copies; a numeric threshold does not apply"
        if protection.interval < 1:
            return f"interval {protection.interval} must be at least 1 (k-iterations between checkpoints)"
        return None

    def constraints(self, v: Variant) -> list[str]:
        """Reasons why a variant cannot be built or run (empty when it is fine)."""
        g = Geometry(v)
        r: list[str] = []
        insts = INSTRUCTIONS[v.precision]
        if g.inst not in insts:
            r.append(
                f"instruction {'x'.join(map(str, g.inst))} is not a {v.precision} tensor-core MMA "
                f"(use {' or '.join('x'.join(map(str, i)) for i in insts)})"
            )
        if (v.precision, g.inst) in SM90_ONLY_INSTRUCTIONS and not set(v.arch or ["sm_90"]) <= CLUSTER_ARCHS:
            r.append(
                f"instruction {'x'.join(map(str, g.inst))} is Hopper's {v.precision} MMA: arch must be sm_90 or sm_90a "
                f"only, not {', '.join(v.arch)} (use {'x'.join(map(str, insts[0]))} for older GPUs)"
            )
        for i, d in enumerate("mnk"):
            if g.tb[i] % g.warp[i]:
                r.append(f"tb_{d}={g.tb[i]} is not a multiple of warp_{d}={g.warp[i]}")
        if g.warp[2] != g.tb[2]:
            r.append(f"warp_k={g.warp[2]} must equal tb_k={g.tb[2]} (sliced-k warp tiles are not supported)")
        if g.warp[0] % g.inst[0] or g.warp[1] % g.inst[1]:
            r.append(f"the warp tile {g.warp[0]}x{g.warp[1]} is not a multiple of the instruction {g.inst[0]}x{g.inst[1]}")
        if g.inst[2] and (g.warp[2] % g.inst[2] or g.warp_k_iters < 2 or g.warp_k_iters % 2):
            r.append(
                f"warp_k/inst_k = {g.warp[2]}/{g.inst[2]} must be an even number >= 2 (the multistage mainloop "
                f"double-buffers warp fragments)"
            )
        if g.stages < 3:
            r.append(f"stages={g.stages}: the cp.async multistage mainloop needs at least 3 stages")
        if r:
            return r
        if g.threads > 1024:
            r.append(f"{g.threads} threads per block (more than 1024)")
        if g.acc_elems % 4:
            r.append(f"the warp tile {g.warp[0]}x{g.warp[1]} gives {g.acc_elems} accumulators per thread (must be a multiple of 4)")
        bits = g.align * g.elem_bits
        if v.precision == "fp64" and g.align != 1:
            # CUTLASS's fp64 tensor-op shared-memory layouts (64-bit congruous / crosswise) come with thread maps of
            # one element per access: wider accesses fail its static assertions
            r.append(f"align={g.align}: fp64 tensor-op kernels load one element per access (align 1)")
        elif bits > 128 or bits < 32:
            r.append(
                f"align={g.align} x {g.elem_bits}-bit elements = {bits}-bit accesses (cp.async moves 32 to 128 bits: "
                f"align {max(1, 32 // g.elem_bits)}..{128 // g.elem_bits} for {v.precision})"
            )
        for name, rows, cols in (("A", g.tb[0], g.tb[2]), ("B", g.tb[2], g.tb[1])):
            for al in {g.align, g.fallback_align}:
                if al and (rows * cols) % (g.threads * al):
                    r.append(
                        f"the {rows}x{cols} {name} tile does not split into {g.threads} threads x {al}-element accesses"
                    )
        # k-contiguous operands (A row-major, B column-major) use CUTLASS's crosswise shared-memory layouts,
        # whose k extent is at most one 128-byte shared-memory line (static assertion in
        # cutlass/layout/tensor_op_multiplicand_sm75.h): tf32 tb_k <= 32, fp16/bf16 tb_k <= 64
        crosswise = [n for n, k_major in (("A", g.layout_a == "row"), ("B", g.layout_b == "col")) if k_major]
        if crosswise and g.tb[2] * g.elem_bytes > 128:
            r.append(
                f"tb_k={g.tb[2]} x {g.elem_bytes}-byte elements = {g.tb[2] * g.elem_bytes} bytes: the k-contiguous "
                f"{' and '.join(crosswise)} tile{'s' if len(crosswise) > 1 else ''} (crosswise shared-memory layout) "
                f"{'allow' if len(crosswise) > 1 else 'allows'} at most 128 bytes along k; use tb_k <= {128 // g.elem_bytes}"
            )
        archs = list(v.arch) or ["sm_90"]
        smem_limit = min(SMEM_PER_BLOCK[a] for a in archs)
        if g.smem_bytes > smem_limit:
            r.append(
                f"needs {g.smem_bytes} bytes of shared memory ({g.stages} stages); at most {smem_limit} on "
                f"{', '.join(archs)}: use fewer stages or a smaller tile"
            )
        if g.regs_estimate > MAX_REGS:
            what = "three accumulator sets of" if g.copies_in_block == 3 else ""
            r.append(
                f"needs about {g.regs_estimate} registers per thread ({what} {g.acc_elems} "
                f"{'fp64' if v.precision == 'fp64' else 'fp32'} accumulators for the {g.warp[0]}x{g.warp[1]} warp tile) "
                f"-- more than {MAX_REGS}; use a smaller warp tile".replace("( ", "(")
            )
        elif g.threads * max(g.regs_estimate, 32) > REGS_PER_SM:
            r.append(
                f"{g.threads} threads x about {g.regs_estimate} registers do not fit one SM's {REGS_PER_SM} registers; "
                f"use fewer warps per threadblock"
            )
        lvl = g.level
        if lvl == "abft" and g.tb[2] > 32:
            r.append(f"abft: tb_k={g.tb[2]}: warp 0 stages a k-iteration's B encodings one per lane (tb_k <= 32)")
        if lvl == "kernel" and g.interval != 1:
            r.append("interval does not apply to tmr kernel level (it votes once, on the three outputs); leave it at 1")
        if lvl == "abft" and v.precision == "fp64" and v.protection.interval < ABFT64_ONCE_INTERVAL:
            r.append(f"interval {v.protection.interval}: fp64 abft checks once, after the whole K (in double, after the "
                     f"GEMM); omit interval (auto: {ABFT64_ONCE_INTERVAL}) or give at least {ABFT64_ONCE_INTERVAL}")
        if lvl == "abft" and v.precision == "fp64" and not abft_concurrent(v):
            r.append(f"ref_checksums: {v.get('ref_checksums')}: fp64 abft has the concurrent design only (the check after "
                     f"the GEMM, every sum in double; fused and prepass keep fp32 sums); use ref_checksums: concurrent")
        cols = v.get("abft_cols", ABFT64_STRIP_COLS)
        if lvl == "abft" and v.precision == "fp64":
            if cols not in (32, 64, 128):
                r.append(f"abft_cols={cols}: fp64 abft's strips are 32, 64 or 128 columns")
        elif lvl == "abft" and v.precision == "tf32x3":
            if cols and not abft_concurrent(v):
                r.append(f"abft_cols={cols}: the strips of ref_checksums: concurrent's check; the other designs check the "
                         f"tile's tb_n columns (leave abft_cols at 0)")
            elif cols and (cols % g.warp[1] or g.tb[1] % cols):
                r.append(f"abft_cols={cols}: a checksum strip is whole warp columns of warp_n={g.warp[1]} and divides "
                         f"tb_n={g.tb[1]} (0: the widest that does)")
        elif cols != _default_cols(v.precision):
            r.append(f"abft_cols applies to fp64 and tf32x3 abft only (the strips of their checks); leave it at "
                     f"{_default_cols(v.precision)}")
        if v.get("ref_checksums", "fused") != "fused" and lvl != "abft":
            r.append(f"ref_checksums: {v.get('ref_checksums')} applies to abft only (the reference checksums of threadblock ABFT)")
        if g.coop_teams and lvl != "cooperative":
            r.append("coop_teams applies to tmr cooperative only")
        if lvl == "cooperative" and g.coop_teams:
            for a in archs:
                cap = g.blocks_per_sm(a) * MAX_SMS[a]
                if 3 * g.coop_teams > cap:
                    r.append(
                        f"coop_teams={g.coop_teams} needs {3 * g.coop_teams} co-resident threadblocks, but at most {cap} fit on "
                        f"{a} ({MAX_SMS[a]} SMs x {g.blocks_per_sm(a)} blocks); use coop_teams: 0 (as many as fit, tiles looped over)"
                    )
                    break
        return r

    def name_tokens(self, v: Variant) -> list[str]:
        g = Geometry(v)
        tb, w, i = g.tb, g.warp, g.inst
        tokens = [
            "gemm",
            PRECISION_TAG[v.precision],
            self.protection_token(v.protection),
            "cutlass",
            f"{tb[0]}x{tb[1]}x{tb[2]}",
            f"w{w[0]}x{w[1]}x{w[2]}",
            f"i{i[0]}x{i[1]}x{i[2]}",
            f"s{g.stages}",
            f"a{g.align}",
            f"sw{g.swizzle}",
            f"{g.layout_a[0]}{g.layout_b[0]}",
        ]
        if g.level == "cooperative" and g.coop_teams:
            tokens.append(f"teams{g.coop_teams}")
        if abft_prepass(v):
            tokens.append("conc" if abft_concurrent(v) else "prepass")
        if g.level == "abft" and (v.precision == "fp64" or (abft_concurrent(v) and abft_strip_cols(v) != g.warp[1])):
            tokens.append(f"cs{abft_strip_cols(v)}")
        if v.protection.inject:
            tokens.append("inj")
        return tokens

    def context(self, v: Variant) -> dict:
        g = Geometry(v)
        ta, tc, tacc, tepi = _CTYPES[v.precision]
        t = {**tolerance_context(v.precision), "io_unrounded": tolerance_context(v.precision, rounded_reference=False)["tol_io"]}
        fallback = g.align > 1  # the main kernel's C stores are `align` wide: any N needs the scalar-store fallback
        return {
            **v.common_context(),
            "g": g,
            "inject": v.protection.inject,
            "level": g.level,
            "level_enum": LEVEL_ENUM[g.level],
            "interval": g.interval,
            "op_main": cutlass_operation(v, "OpMain", g.align, g.align),
            "op_fallback": cutlass_operation(v, "OpFallback", g.fallback_align, 1) if fallback else "",
            "has_fallback": fallback,
            "ElementAB": ta,
            "ElementC": tc,
            "ElementAcc": tacc,
            "ElementEpi": tepi,
            "BenchT": _BENCH_TYPES[v.precision],
            "tol": t,
            "max_attempts": MAX_ATTEMPTS,
            "abft_unit": repr(ABFT_LAMBDA * ABFT_UNIT),
            "abft_fixed": repr(float(v.protection.threshold)) if v.protection.threshold != "auto" else "0.0",
            "abft_online": 1 if v.protection.correct == "online" else 0,
            "abft_prepass": abft_prepass(v),
            "abft_concurrent": abft_concurrent(v),
            # ref_checksums: concurrent: the check per strip of warp_n columns and its threshold unit (0: the tile's)
            "abft_strip_n": abft_strip_cols(v) if abft_concurrent(v) else 0,
            "abft_conc_unit": repr(abft_strip_unit(v)) if abft_concurrent(v) else "0.0",
            **abft64_band_context(v),
            "copies": 1 if g.level == "abft" else COPIES,
            "row_a": g.layout_a == "row",
            "row_b": g.layout_b == "row",
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return (
            Source("cutlass_variant.h.j2", ".h", "header"),
            Source("cutlass_variant.cu.j2", ".cu", "library"),
            Source("cutlass_bench.cu.j2", "_bench.cu", "bench"),
        )
