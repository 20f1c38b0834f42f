"""The ``cutlass90`` backend of ``gemm``: Hopper-native CUTLASS 3.x kernels (sm_90a only), unprotected, with TMR
(tf32, fp16, bf16: levels kernel and multikernel) or (tf32x3, tf32, bf16, fp16) with threadblock ABFT.

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
  tripled K, big*small + small*big + big*big per product -- small*small dropped. A split kernel
  writes the workspace operands in two parts, ``[A_big | A_small]`` and ``[B_small; B_big]`` (K
  rounded up to whole k-tiles), and the mainloop's loads (``Split3Loads``) read each k-tile i of them
  in three consecutive k-tiles of the tripled K: A_big B_small, A_small B_big, A_big B_big (a third
  less to write than three parts; the second read of a big k-tile hits L2). Per product the split
  loses at most ``2^-21 + 2^-21 + 2^-22 <= 2^-19`` of |a||b| (``SPLIT_LOSS``), fp32 level. The
  accumulators are promoted into fp32 registers every ``promote`` k-tiles where the check needs it
  (ABFT), so the truncating wgmma accumulation spans a few k-tiles only: the delivered precision is
  fp32's (ftgen.tolerance's tf32x3 rule).
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
(stream-K partials; tf32x3 adds its split operands, two parts each).

Kernel names (every parameter is encoded)::

    gemm_<prec>_none_cutlass90_<tile_m>x<tile_n>x<tile_k>_c<cluster_m>x<cluster_n>_<schedule>
        _<scheduler>_s<stages|auto>_sw<swizzle>_<a><b>[_p<promote>][_b0]

``<schedule>`` is ``ws-coop`` or ``ws-pingpong``, ``<scheduler>`` ``persistent`` or ``streamk``,
``<a><b>`` the layouts of A and B (``r``/``c``), ``_b0`` (``beta0: 1``) a second kernel for beta == 0 whose epilogue
has no C source: the default epilogue stages C tiles beside D's (e.g. 66 KB of tf32 128x256 tiles), which a call with
beta == 0 never reads, and without them the builder fits one more main-loop stage. Example:
``gemm_tf32_none_cutlass90_128x256x32_c2x1_ws-coop_persistent_sauto_sw1_rc``.

Build: ``-DNDEBUG`` is a compile option of every variant (CUTLASS's device-side assertions left in
make ptxas serialize the wgmma pipeline), and the arch is ``sm_90a`` (the wgmma and setmaxnreg
instructions exist only there).

Threadblock ABFT (``protection: {scheme: abft, level: threadblock}``, tf32x3; bf16 and fp16 below; docs/gemm-hopper.md): the ``cutlass``
backend's ``ref_checksums: concurrent`` design (templates/gemm/cutlass_abft.cuh) around the unchanged sm90 GEMM. On a
second stream the B encodings and the reference GEMM r = A (B e), r' = A (B w) per row and 32-column strip run beside the
sm90 GEMM, which writes C = alpha A B; the reference is the variant's own sm90 kernel (``KernelRef3``: stream-K, promoted
as the variant is, over the tripled K on the split A the GEMM reads, once the GEMM's stream has written it). After it, on its stream, ``abft_obs_kernel`` reads C and stores per row and strip
the pass-1 sums {sum c, sum w c, sum c^2, max |c|} of c = C / alpha; after both, ``abft_check_kernel`` checks, corrects
located elements in C and lists unlocated (row, strip) units for the cooperative second launch, which recomputes them
from A and B. The check's geometry is that of an sm80 tf32x3 variant of the ``cutlass`` backend (``abft_descriptor``:
128x128x32 tiles of 64x32 warp tiles, 32-column strips, 256 threads, 64 accumulators per thread: the fault units of
injection and the bench's fault plans), whose CUTLASS types only describe the check (and recompute a whole tile in the
rare case of a full row list); its threshold is lambda 1.5 on 2^-24 per 32-column strip (``abft_model.ABFT_BAND_STRIP_LAMBDAS``),
with a suspect band under it: a unit scoring over ``abft_band_floor`` of the threshold is recomputed beside its elements'
magnitudes and counts as a detection only where an element differs beyond half the tf32x3 tolerance (``abft_model``).
The split's loss (``SPLIT_LOSS``) is covered by it: tests/test_cutlass90_abft.py drives the check with tf32x3 products
emulated in NumPy. The check runs once, after the whole K: ``interval`` must be at least ``ABFT_ONCE_INTERVAL`` (the
``cutlass`` backend's auto value, 1024), and names nothing else. beta != 0: C' = alpha A B goes to a workspace buffer,
is checked and corrected there, then C = C' + beta C (fp32 fma); alpha == 0: the unprotected kernel (no products to
check). Injection (``inject: true``): a planned bit flip of an accumulator's partial sum at a k-iteration of the
descriptor's tiles (computed beforehand in double, ``abft_fault_error_kernel``) is added, alpha x its error, to the C
element by ``abft_obs_kernel`` before its sums. ``abft_cols: 64`` makes the strips 64 columns wide (the descriptor's
warp tiles 64x64: half the reference columns, at lambda 1.5), ``abft_cols: 128`` 128 (a quarter, at lambda 1.0). Name tokens: ``abft-tb-i<interval>[-detect][-th<x>]`` and
``_conc`` (the concurrent design; ``_conc64`` / ``_conc128`` with wider strips), ``_inj`` (injection compiled in). ``<sym>_unprotected`` is the unprotected kernel of the same
parameters (the bench's ``x_unprot``). The check's threshold is derived for round-to-nearest fp32 sums, which the wgmma's
accumulation over a whole K is not (its error grows like k u): ABFT variants promote the wgmma accumulators into fp32
registers every ``promote`` k-tiles (default 1; 0 is refused), which measured the sm80 error level and no false alarm
(docs/gemm-hopper.md). FTGEN_ABFT_LAMBDA (environment, read once by the launcher) replaces the check's lambda on 2^-24:
a calibration knob, not needed by the measured variants.

bf16 / fp16 / tf32 threadblock ABFT (templates/gemm/cutlass90_abft16.cuh; the model: abft_model.abft16_check; called
"the 16-bit check" after its first precisions): the check reads the fp32 accumulators before the epilogue writes them.
The variant's kernel is emitted a second time (``KernelChk``) with an epilogue visitor tree in place of
LinearCombination that also stores, per row and CTA tile of columns (the checksum strip: ``tile_n`` columns), the fp32
sums of c = alpha acc, w c (w: the column's place in the tile + 1) and |c|; a third time (``KernelChkBeta``) for
beta != 0, its tree reading C (D = alpha acc + beta C, one rounding). On a second stream, the encodings of B (B e, B w per
strip, split into high and low parts of the operand type; tf32: both rounded to TF32) and the reference GEMM R = A E
(``KernelRef``: a stream-K ws-coop kernel into fp32) run beside the GEMM; after both, a thread per (row, strip) checks
against lambda 2^-24 (k / kw + cols + 1) max(sum |c|, |alpha r|) (the wgmma's accumulation error grows with its k
steps), locates with the weighted sum and corrects (a located element recomputed; an unlocated row of the strip
recomputed). A reads K-major (``layout_a: row``). Injection (``inject: true``): the epilogue's leaf flips the planned
bit of the planned accumulator as it reads it (fault units: the kernel's tiles and the threads that hold their
accumulators). Name token ``evt``; the accumulators are not promoted (``promote`` 0). ``abft_locate: recompute`` (token
``evtrecomp``) drops the weighted sums (the epilogue's w c partials, B w's encodings and R's two columns of it a strip):
a flagged unit's row of the strip is recomputed; detection is then the unweighted residual's alone (on the model the
weighted one detected no significant fault it missed: experiments/scripts/abft16_locate.py). tf32: the same check with
kw = 8; its significant faults are those beyond what tf32 delivers (ftgen.tolerance: input rounding counted,
``for_row``): a check of a whole tile's columns sees every one of those on the model, but not every fault beyond fp32's
level, which is tf32x3's business (experiments/scripts/abft_tf32_model.py).

TMR (``protection: {scheme: tmr, level: kernel | multikernel}``, tf32, fp16, bf16; templates/gemm/cutlass90_tmr.cuh,
docs/gemm-hopper.md): three copies of the unchanged sm90 GEMM, then the cutlass backend's vote kernel
(``vote_outputs_kernel`` of templates/gemm/cutlass_tmr.cuh: bitwise majority per element, detected / corrected /
uncorrectable counted, C written where copy 0 is not the majority). ``kernel``: the three copies in ONE launch, a batch of
L = 3 with A and B at batch stride 0 and the outputs C0, C1, C2 at batch stride M' x N' in the workspace (the vote writes
every element of C). ``multikernel``: three launches of the kernel on the caller's stream (one after the other: they share
CUTLASS's workspace, which stream-K writes), copy 0 into C itself when beta == 0 and C is aligned for TMA. beta != 0: every
copy reads the original C (the kernel's separate C source, at batch stride 0), so C is written only by the vote. Elements
where all three copies differ are left unwritten by the vote and recomputed from A and B (``tmr90_recompute_kernel``: three
computations in double of the operands as the wgmma reads them, voted, at most ``MAX_ATTEMPTS`` - 1 times; a grid of early
exits when nothing is flagged). Injection (``inject: true``): a planned fault flips one bit of the fp32 value of one copy's
output element before the vote (``tmr90_fault_kernel``: an emulated accumulator upset at the end of the mainloop; the
value is the accumulator where alpha = 1 and beta = 0), the element given by the fault's (thread, element) in the wgmma's
accumulator layout of the kernel's tile; fault units are (tile, copy) of the kernel's tiles and the threads that hold a
tile's accumulators (``Geometry.threads``: 256 for ws-coop, 128 for ws-pingpong). Name token ``tmr-kernel`` or
``tmr-multikernel-i<interval>`` (the family's: the copies are voted once, after the whole K, so multikernel takes an
interval of at least ``TMR_ONCE_INTERVAL``, its auto value), then ``_inj``. ``<sym>_unprotected`` is the unprotected
kernel of the same parameters (the bench's ``x_unprot``).
"""

from __future__ import annotations

import re

from ...errors import FtgenError
from ...libraries import cutlass_library
from ..base import PRECISION_TAG, SMEM_PER_BLOCK, Backend, Param, Protection, Source, Variant
from ...tolerance import C_CONST, C_SQRT
from ...tolerance import context as tolerance_context
from ...tolerance import rule as tolerance_rule
from . import cutlass as sm80
from . import abft_model
from .abft_model import ABFT_BAND_STRIP_LAMBDAS, ABFT_ELEMENT_FRACTION, abft_band_floor, abft_band_strip_lambda
from .tmr_model import MAX_ATTEMPTS

PRECISIONS = ("tf32", "tf32x3", "fp16", "bf16")
ARCH = "sm_90a"
SCHEDULES = ("ws-coop", "ws-pingpong")
SCHEDULERS = ("persistent", "streamk")
ELEM_BYTES = {"tf32": 4, "tf32x3": 4, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}  # (fp32, fp64: for the reasons)
# K of one wgmma instruction (the accumulation granularity of the tolerance)
WGMMA_K = {"tf32": 8, "tf32x3": 8, "fp16": 16, "bf16": 16}
SPLIT_LOSS = 2.0**-19  # tf32x3: largest relative loss of the split per product (module docstring)
TMA_BYTES = 16  # TMA: 16-byte aligned addresses and strides
# The wgmma's fp32 accumulation is not round-to-nearest (measured: the sm90 tf32x3 error grows like k u, a truncating
# accumulator's signature; docs/gemm-hopper.md). ``promote: p`` accumulates each p k-tiles in the wgmma accumulators,
# then adds them into a second fp32 register set with FADD (CUTLASS's FP8 mainloop, MainloopSm90TmaGmmaWarpSpecializedFP8,
# with its mma_promotion_interval = p x the wgmmas of one k-tile): the truncation then acts on p k-tiles' partial sums only.
# tf32x3 without promotion: measured 0.31 of the fp32 rule's tolerance at 4096³ and 8192³ (its small products are added
# into running sums that hold big ones); with it, 0.03.
PROMOTE = (0, 1, 2, 4)
ABFT16_LOCATE = ("weighted", "recompute")  # how the 16-bit check repairs a flagged unit (param abft_locate)
# A consumer warp group holds its part of the tile's fp32 accumulators in registers; the kernels give
# consumer warp groups 232 (ping-pong) / 240 (cooperative) registers per thread, of which at most 128
# accumulators leave room for the fragments and addresses.
MAX_ACC_PER_THREAD = 128
# With promotion a consumer thread holds two sets (the wgmma's and the promoted one): at most 192 registers of them, which
# admits 128x192 ws-coop and 64x192 ws-pingpong (96 + 96) and leaves 40+ registers for fragments and addresses.
MAX_PROMOTED_ACC = 192


def epilogue_smem(schedule: str, tile_m: int, tile_n: int, c_bytes: int) -> int:
    """Bytes of shared memory the default TMA epilogue keeps beside the mainloop's stages, as CUTLASS 4.2's sm90 builder
    sizes it (``sizeof(CollectiveEpilogue::SharedStorage)`` with ``EpilogueTileAuto``): subtiles of 32 columns and 128
    rows (ws-coop with tile_m >= 128) or 64, of which C and D stage min(4, subtiles + 1), plus 512 elements of pipeline
    storage. Measured for tf32 and bf16 tiles of both schedules (tests/test_gemm_cutlass90.py holds the table); the builder's
    stage count is (SMEM_PER_BLOCK - this) // stage bytes, and CUTLASS refuses fewer than 2."""
    epi_m = 128 if schedule == "ws-coop" and tile_m >= 128 else 64
    subtiles = (tile_m // epi_m if tile_m >= epi_m else 1) * max(1, tile_n // 32)
    return (min(4, subtiles + 1) * epi_m * 32 + 512) * c_bytes


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
    Param("promote", int, (0,), "k-tiles between promotions of the wgmma accumulators into fp32 registers (0: none, the "
          "wgmma accumulates the whole K; abft: 1)", choices=PROMOTE),
    Param("abft_cols", int, (32,), "columns of a checksum strip of the tf32x3 threadblock ABFT, with its lambda under the "
          "suspect band (abft_model.ABFT_BAND_STRIP_LAMBDAS): 32 (2 reference columns per 32, 6.25% of the products, "
          "lambda 1.5), 64 (half of them, lambda 1.5), 128 (a quarter, lambda 1.0)", choices=tuple(ABFT_BAND_STRIP_LAMBDAS)),
    Param("beta0", int, (0,), "1: a second kernel for calls with beta == 0, whose epilogue has no C source (it stages no C "
          "tiles, so the main loop's stages get that shared memory; stages 0 counts them per kernel)", choices=(0, 1)),
    Param("abft_locate", str, ("weighted",), "how the tf32 / bf16 / fp16 threadblock ABFT repairs a flagged (row, strip) unit: "
          "weighted (a weighted checksum locates one element, corrected in place; the epilogue sums w c too and the "
          "reference GEMM has 4 columns a strip) or recompute (the unit's row of the strip recomputed: no weighted sums, 2 "
          "reference columns a strip)", choices=ABFT16_LOCATE),
)

_PREC_DEFAULTS = {"tf32": {}, "tf32x3": {}, "fp16": {"tile_k": 64}, "bf16": {"tile_k": 64}}

_CTYPES = {  # A/B element, C/D element, accumulator, epilogue compute (CUTLASS types)
    "tf32": ("float", "float", "float", "float"),
    "tf32x3": ("float", "float", "float", "float"),
    "fp16": ("cutlass::half_t", "cutlass::half_t", "float", "float"),
    "bf16": ("cutlass::bfloat16_t", "cutlass::bfloat16_t", "float", "float"),
}
_BENCH_TYPES = {"tf32": "float", "tf32x3": "float", "fp16": "__half", "bf16": "__nv_bfloat16"}

# ---- TMR: three copies of the sm90 GEMM and the cutlass backend's vote ---------------------------------------------------
TMR_PRECISIONS = ("tf32", "fp16", "bf16")  # tf32x3: not built (its split would run three times; abft protects it)
TMR_LEVELS = {"kernel": "kernel", "multikernel": "multikernel"}  # level: name token
# The copies are voted once, after the whole K (the sm90 GEMM has no checkpoints between k-tiles): multikernel takes an
# interval of at least the cutlass backend's auto value for it, which a spec that names none gets (the family's
# auto_interval); the kernel level's interval is 1, as on the cutlass backend
TMR_ONCE_INTERVAL = 1024
COPIES = 3

# ---- threadblock ABFT: the cutlass backend's ref_checksums: concurrent check around the sm90 GEMM -----------------------
ABFT_PRECISIONS = ("tf32x3", "tf32", "bf16", "fp16")
# The single-pass precisions: the check on the fp32 accumulators, sums in the epilogue (templates/gemm/cutlass90_abft16.cuh,
# "the 16-bit check" after its first precisions; tf32's operands are fp32 words the wgmma reads as TF32)
ABFT16_PRECISIONS = ("tf32", "bf16", "fp16")
# The reference GEMM R = A E of that check (a stream-K sm90 GEMM into fp32): its tile per precision (k: 128 bytes a row)
ABFT16_REF_TILE = {"tf32": (128, 64, 32), "bf16": (128, 64, 64), "fp16": (128, 64, 64)}
# The check runs once per launch, after the whole K (the concurrent design's one checkpoint per tile): an interval of at
# least the cutlass backend's auto value, which a spec that names none gets (family auto_interval: the cutlass backend)
ABFT_ONCE_INTERVAL = 1024
# The geometry of the check: an sm80 tf32x3 variant of the cutlass backend with these parameters (its 128x128 tiles, 64x32
# warp tiles: 32-column warp columns and checksum strips, 256 threads, 64 accumulators per thread), the demo's
ABFT_DESCRIPTOR = {"tb_m": 128, "tb_n": 128, "tb_k": 32, "warp_m": 64, "warp_n": 32, "warp_k": 32, "inst_m": 16, "inst_n": 8,
                   "inst_k": 8, "stages": 4, "align": 4, "swizzle": 8, "ref_checksums": "concurrent"}


def abft_descriptor(v: Variant) -> Variant:
    """The sm80 ``cutlass`` tf32x3 variant (ref_checksums: concurrent) whose types describe the check of the cutlass90
    ABFT variant ``v``: tiles, warp columns, strips, fault units, threshold (its GEMM is never launched; its main loop
    recomputes a tile only where the second launch's row list is full). Same layouts and protection as ``v``; its warp
    strips are ``v``'s ``abft_cols`` columns (its warp columns 64 wide for strips of 64, else 32)."""
    cb = sm80.CutlassBackend()
    prot = v.protection
    defs = cb.param_defs("tf32x3", prot)
    p = {d.name: d.default[0] for d in defs}
    cols = v.get("abft_cols")
    p.update(ABFT_DESCRIPTOR, layout_a=v.get("layout_a"), layout_b=v.get("layout_b"), warp_n=64 if cols == 64 else 32,
             abft_cols=cols)
    d = Variant("gemm", "tf32x3", prot, tuple((x.name, p[x.name]) for x in defs), ("sm_90",), "cutlass")
    return Variant(d.family, d.precision, d.protection, d.params, d.arch, d.backend, cb.kernel_name(d))


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
        self.cta_threads = 128 * (1 + self.consumers)  # one producer warp group
        rows_per_wg = self.tile[0] // 2 if self.schedule == "ws-coop" else self.tile[0]
        self.rows_per_wg = rows_per_wg
        self.acc_elems = rows_per_wg * self.tile[1] // 128  # fp32 accumulators per consumer thread
        # threads that hold one tile's accumulators: both consumer warp groups (ws-coop) or one (ws-pingpong)
        self.acc_threads = 256 if self.schedule == "ws-coop" else 128
        self.tmr = v.protection.scheme == "tmr"
        # the 16-bit ABFT check (sums of the fp32 accumulators in the epilogue; faults in the kernel's own tiles)
        self.abft16 = v.protection.scheme == "abft" and v.precision in ABFT16_PRECISIONS
        # the bench adapter's threads per fault unit: TMR and 16-bit ABFT faults target the threads that hold a tile's
        # accumulators (the producer warp group holds none); otherwise the CTA's threads
        self.threads = self.acc_threads if self.tmr or self.abft16 else self.cta_threads
        self.stage_bytes = (self.tile[0] + self.tile[1]) * self.tile[2] * self.elem_bytes
        self.coop_teams = 0  # (the bench adapter's field: no cooperative TMR here)
        self.level = v.protection.level if self.tmr else "none"  # TMR: kernel or multikernel
        self.abft = v.protection.scheme == "abft"
        self.promote = p["promote"]
        # wgmma instructions between promotions (CUTLASS's mma_promotion_interval)
        self.promote_mmas = self.promote * self.tile[2] // WGMMA_K[v.precision]
        # a second kernel without a C source for beta == 0 (the unprotected GEMM, gemm90: the twin, and the tf32x3 check's
        # GEMM, which always runs with beta == 0)
        self.beta0 = bool(p["beta0"])


def cutlass90_operation(v: Variant, alias: str, *, fusion: str | None = None, c_source: bool = True) -> str:
    """C++ of the kernel: the epilogue and mainloop collectives and ``struct <alias> : GemmUniversal<...>``,
    emitted by cutlass_library's 3.x emitter. ``fusion``: a C++ type that replaces the emitted LinearCombination
    epilogue (the 16-bit ABFT check's epilogue visitor tree); ``c_source`` False: an epilogue without C."""
    g = Geometry(v)
    text = _emit(v.precision, alias, g.tile, g.cluster, g.stages, g.schedule, g.scheduler, g.layout_a, g.layout_b,
                 v.precision)
    if fusion is not None:
        text = _replace_fusion(text, fusion)
    if not c_source:
        # the visitor tree reads no C: without a C source the epilogue stages no C tiles in shared memory, which the
        # mainloop keeps for its stages
        c_arg = re.compile(r"(float, float,\n\s*)([\w:]+)(, cutlass::layout::RowMajor, \d+,)")
        if not c_arg.search(text):  # pragma: no cover - guards against a changed emitter
            raise FtgenError("unexpected cutlass_library output: no C element in the epilogue's builder")
        text = c_arg.sub(lambda mm: mm.group(1) + "void" + mm.group(3), text, count=1)
    return _rebuilt_mainloop(text, alias, promote=bool(g.promote), split3=v.precision == "tf32x3")


def abft16_ref_operation(v: Variant, alias: str) -> str:
    """C++ of the 16-bit check's reference GEMM R = A E: the variant's A (its type and layout), E column-major (K
    contiguous), R in fp32, on an ABFT16_REF_TILE ws-coop stream-K kernel (a tall, narrow GEMM: stream-K spreads its k
    over the SMs)."""
    g = Geometry(v)
    return _emit(v.precision, alias, ABFT16_REF_TILE[v.precision], (1, 1), 0, "ws-coop", "streamk", g.layout_a, "col", "fp32")


def abft_ref3_operation(v: Variant, alias: str) -> str:
    """C++ of the tf32x3 check's reference GEMM R = A E on the sm90 path: the split operands over the tripled K (A as the
    GEMM reads it, E split as B is), R in fp32, on an ABFT16_REF_TILE["tf32"] ws-coop stream-K kernel whose wgmma
    accumulators are promoted as the variant's are (fp32-level sums, as the check's threshold assumes)."""
    g = Geometry(v)
    text = _emit("tf32x3", alias, ABFT16_REF_TILE["tf32"], (1, 1), 0, "ws-coop", "streamk", "row", "col", "fp32")
    return _rebuilt_mainloop(text, alias, promote=bool(g.promote), split3=True)


def _emit(precision: str, alias: str, tile, cluster, stages: int, schedule: str, scheduler: str, layout_a: str,
          layout_b: str, out: str) -> str:
    lib, gop = cutlass_library("the cutlass90 backend")
    dt = {"tf32": lib.DataType.f32, "tf32x3": lib.DataType.f32, "fp16": lib.DataType.f16, "bf16": lib.DataType.bf16,
          "fp32": lib.DataType.f32}
    data = dt[precision]
    mma_in = lib.DataType.tf32 if precision in ("tf32", "tf32x3") else data
    coop = schedule == "ws-coop"
    # the instruction shape only names the math (the builder picks the wgmma from the tile)
    inst = [64, tile[1], WGMMA_K[precision]]
    math_inst = lib.MathInstruction(inst, mma_in, mma_in, lib.DataType.f32, lib.OpcodeClass.TensorOp, lib.MathOperation.multiply_add)
    warps = [8, 1, 1] if coop else [4, 1, 1]
    td = lib.TileDescription(list(tile), stages, warps, math_inst, 90, 90, [cluster[0], cluster[1], 1])
    lay = {"row": lib.LayoutType.RowMajor, "col": lib.LayoutType.ColumnMajor}
    align = TMA_BYTES // ELEM_BYTES[precision]
    a = lib.TensorDescription(data, lay[layout_a], align)
    b = lib.TensorDescription(data, lay[layout_b], align)
    c = lib.TensorDescription(dt[out], lib.LayoutType.RowMajor, TMA_BYTES // ELEM_BYTES[out])
    kernel_schedule = lib.KernelScheduleType.TmaWarpSpecializedCooperative if coop else lib.KernelScheduleType.TmaWarpSpecializedPingpong
    epi_schedule = lib.EpilogueScheduleType.TmaWarpSpecializedCooperative if coop else lib.EpilogueScheduleType.TmaWarpSpecialized
    sched = lib.TileSchedulerType.StreamK if scheduler == "streamk" else lib.TileSchedulerType.Persistent
    op = gop.GemmOperation(
        lib.GemmKind.Universal3x, 90, td, a, b, c, lib.DataType.f32, lib.EpilogueFunctor.LinearCombination,
        lib.SwizzlingFunctor.Identity1, kernel_schedule=kernel_schedule, epilogue_schedule=epi_schedule, tile_scheduler=sched,
    )
    text = gop.EmitGemmUniversal3xInstance().emit(op)
    old = op.procedural_name()
    if f"struct {old} :" not in text:  # pragma: no cover - guards against a changed emitter
        raise FtgenError(f"unexpected cutlass_library output for {alias}: struct {old} not found")
    text = text.replace(f"// Gemm operator {old}", f"// {old} (cutlass_library)")
    text = text.replace(f"struct {old} :", f"struct {alias} :").replace(old, alias)
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    outl: list[str] = []
    for ln in lines:  # collapse the emitter's runs of blank lines
        if ln or (outl and outl[-1]):
            outl.append(ln)
    return "\n".join(outl)


def _replace_fusion(text: str, fusion: str) -> str:
    """The emitted kernel with its epilogue's fusion operation (the LinearCombination<...> argument of the epilogue's
    collective builder) replaced by ``fusion``."""
    head = "cutlass::epilogue::fusion::LinearCombination<"
    at = text.find(head)
    if at < 0:  # pragma: no cover - guards against a changed emitter
        raise FtgenError("unexpected cutlass_library output: no LinearCombination epilogue to replace")
    depth, i = 0, at + len(head) - 1
    while True:
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        if depth == 0:
            break
        i += 1
    return text[:at] + fusion + text[i + 1:]


def _rebuilt_mainloop(text: str, alias: str, *, promote: bool, split3: bool) -> str:
    """The emitted kernel with its mainloop collective rebuilt from the types the builder chose
    (templates/common/ftgen_sm90.cuh): ``promote``, on CUTLASS's FP8 dispatch policy (``PromotedMainloop``: the same TMA
    loads, shared-memory layouts and wgmma, one more fp32 register set); ``split3`` (tf32x3), its loads over the split
    operands stored in two parts (``Split3Loads``: the tripled K reads A = [big | small] and B = [small; big])."""
    if not (promote or split3):
        return text
    built = f"using {alias}_mainloop =\n  typename cutlass::gemm::collective::CollectiveBuilder<"
    if built not in text:  # pragma: no cover - guards against a changed emitter
        raise FtgenError(f"unexpected cutlass_library output: no {alias}_mainloop built by CollectiveBuilder")
    head, tail = text.split(built, 1)
    end = tail.index(">::CollectiveOp;") + len(">::CollectiveOp;")
    b = f"{alias}_mainloop_built"
    notes, expr = [], b
    if promote:
        notes.append("on the FP8 dispatch policy: wgmma partial sums promoted into fp32 registers")
        expr = f"ftgen_sm90::PromotedMainloop<{expr}>"
    if split3:
        notes.append("its loads over the split operands in two parts")
        expr = f"ftgen_sm90::Split3Loads<{expr}>"
    rebuilt = f"\n\n// the builder's mainloop {'; '.join(notes)}\nusing {alias}_mainloop = {expr};"
    return head + f"using {b} =\n  typename cutlass::gemm::collective::CollectiveBuilder<" + tail[:end] + rebuilt + tail[end:]


def tolerance(precision: str) -> dict:
    """The bench's tolerance constants: ftgen.tolerance's rule for the delivered precision, as the ``cutlass``
    backend renders it (against the unrounded fp32 inputs tf32 adds its input rounding)."""
    return {**tolerance_context(precision), "io_unrounded": tolerance_context(precision, rounded_reference=False)["tol_io"]}


class Cutlass90Backend(Backend):
    name = "cutlass90"
    precisions = PRECISIONS
    levels = {"abft": {"threadblock": "tb"}, "tmr": TMR_LEVELS}
    params = PARAMS
    requires = ("cublas", "cutlass")  # cuBLAS: the bench executable's reference
    compile_options = ("-DNDEBUG", "-Xptxas=-warn-spills")
    constraint_docs = (
        "cutlass90: chosen by params backend: cutlass90; arch sm_90a only; protection none, tmr (below), or abft at level "
        "threadblock for tf32x3, tf32, bf16 and fp16 (correct online or detect, threshold auto or a number, interval >= 1024: checked "
        "once, after the GEMM; tf32 / bf16 / fp16: layout_a row)",
        "cutlass90 tmr: precision tf32, fp16 or bf16; level kernel (interval 1) or multikernel (interval >= 1024: voted "
        "once, after the GEMM); correct online; threshold auto",
        "cutlass90: precision tf32, tf32x3, fp16 or bf16 (no fp64: the sm90 builder has no FP64 wgmma path)",
        "cutlass90: ws-coop tile_m 128 or 256, ws-pingpong tile_m 64 or 128; tile_n a multiple of 16 (<= 256); "
        "tile_k x element bytes 64, 128 or 256",
        "cutlass90: fp32 accumulators per consumer thread (tile_m/2 or tile_m) x tile_n / 128 <= 128",
        "cutlass90: cluster_m x cluster_n <= 8 (portable cluster); streamk with ws-coop only",
        "cutlass90: stages x (tile_m + tile_n) x tile_k x element bytes + the epilogue's shared memory <= 227 KiB, with stages "
        ">= 2 (explicit) or 2 (stages 0: as many as fit); the epilogue's: C and D subtiles of 32 columns x 128 (ws-coop, "
        "tile_m >= 128) or 64 rows, min(4, subtiles + 1) of them, + 512 elements",
        "cutlass90: tf32 and tf32x3 take K-major operands (layout_a row, layout_b col)",
    )

    def auto_interval(self, prot: Protection, params) -> int:
        """interval: auto -- the check after the whole K (abft; tmr multikernel: the copies compared at the end), the
        kernel level's 1."""
        return 1 if prot.scheme == "tmr" and prot.level == "kernel" else ABFT_ONCE_INTERVAL

    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        promoted = protection.scheme == "abft" and precision not in ABFT16_PRECISIONS
        over = {**_PREC_DEFAULTS.get(precision, {}), **({"promote": 1} if promoted else {})}
        return tuple(p.with_default(over[p.name]) if p.name in over else p for p in PARAMS)

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        if precision not in PRECISIONS:
            return (f"the cutlass90 backend takes precision {', '.join(PRECISIONS)}, not {precision} "
                    f"(fp64 and fp32: the cutlass and simt backends)")
        if protection.scheme == "none":
            return None
        if protection.scheme == "tmr":
            return self._tmr_ok(precision, protection)
        if protection.scheme != "abft":
            return (f"the cutlass90 backend offers scheme none, tmr (levels kernel, multikernel) and abft (level "
                    f"threadblock, tf32x3), not {protection.scheme}; for {protection.scheme} use the cutlass backend "
                    f"(omit params backend)")
        if precision not in ABFT_PRECISIONS:
            return (f"abft on the cutlass90 backend is implemented for {', '.join(ABFT_PRECISIONS)} only, not {precision}; "
                    f"for fp64 use the cutlass backend (omit params backend)")
        if protection.level != "threadblock":
            return f"abft on the cutlass90 backend has level threadblock only, not {protection.level!r}"
        if protection.interval < ABFT_ONCE_INTERVAL:
            return (f"interval {protection.interval}: abft on the cutlass90 backend checks once, after the whole K (no "
                    f"checkpoints inside the sm90 GEMM); omit interval (auto: {ABFT_ONCE_INTERVAL}) or give at least "
                    f"{ABFT_ONCE_INTERVAL}")
        return None

    @staticmethod
    def _tmr_ok(precision: str, protection: Protection) -> str | None:
        if precision not in TMR_PRECISIONS:
            return (f"tmr on the cutlass90 backend takes precision {', '.join(TMR_PRECISIONS)}, not {precision} "
                    f"(tf32x3: use scheme abft, level threadblock)")
        if protection.level not in TMR_LEVELS:
            return (f"level {protection.level!r}: tmr on the cutlass90 backend has levels {', '.join(TMR_LEVELS)} (whole "
                    f"sm90 GEMMs as copies, voted after them); threadblock and cooperative TMR run on the cutlass backend "
                    f"(omit params backend)")
        if protection.correct != "online":
            return (f"correct: {protection.correct}: tmr corrects by majority vote (three copies disagreeing are "
                    f"recomputed); correct takes online only")
        if protection.threshold != "auto":
            return (f"threshold: {protection.threshold}: tmr votes by exact (bitwise) equality of the copies; threshold "
                    f"takes auto only")
        if protection.level == "kernel" and protection.interval != 1:
            return (f"interval {protection.interval}: tmr kernel level votes once, on the three outputs; interval takes "
                    f"1 only (omit it)")
        if protection.level == "multikernel" and protection.interval < TMR_ONCE_INTERVAL:
            return (f"interval {protection.interval}: tmr multikernel on the cutlass90 backend votes once, after the "
                    f"whole K (no checkpoints inside the sm90 GEMM); omit interval (auto: {TMR_ONCE_INTERVAL}) or give at "
                    f"least {TMR_ONCE_INTERVAL}")
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
        elif g.promote and 2 * g.acc_elems > MAX_PROMOTED_ACC:
            r.append(f"promote={g.promote} with tile {tm}x{tn} ({g.schedule}): promotion keeps a second set of {g.acc_elems} "
                     f"fp32 accumulators per consumer thread ({2 * g.acc_elems}, at most {MAX_PROMOTED_ACC}); use a smaller "
                     f"tile (e.g. 128x192 ws-coop) or promote: 0")
        if v.get("abft_cols") != 32 and not (g.abft and not g.abft16):
            r.append(f"abft_cols={v.get('abft_cols')}: the strip width of the tf32x3 threadblock ABFT; other variants take "
                     f"32 (omit it)")
        if g.abft and not g.abft16 and not g.promote:
            r.append("promote=0 with abft: the check's threshold is derived for round-to-nearest fp32 sums, which the wgmma's "
                     "accumulation over the whole K is not (clean runs raise false alarms); use promote 1, 2 or 4 (the default "
                     "with abft is 1)")
        cm, cn = g.cluster
        if cm * cn > 8:
            r.append(f"cluster {cm}x{cn} has {cm * cn} CTAs; a portable cluster has at most 8")
        if g.scheduler == "streamk" and g.schedule != "ws-coop":
            r.append("scheduler streamk needs schedule ws-coop (CUTLASS's ping-pong kernel has the persistent scheduler only)")
        epi = epilogue_smem(g.schedule, tm, tn, 4 if v.precision in ("tf32", "tf32x3") else 2)
        if g.stages:
            smem = g.stages * g.stage_bytes + epi
            if g.stages < 2:
                r.append(f"stages={g.stages}: the TMA pipeline needs at least 2 stages (or 0: as many as fit)")
            elif smem > SMEM_PER_BLOCK[ARCH]:
                r.append(f"stages={g.stages} x {g.stage_bytes} bytes + {epi} for the epilogue = {smem} bytes of shared "
                         f"memory; at most {SMEM_PER_BLOCK[ARCH]} on sm_90a: use fewer stages, stages: 0, or a smaller tile")
        elif 2 * g.stage_bytes + epi > SMEM_PER_BLOCK[ARCH]:
            r.append(f"stages=0 (as many as fit): two stages of {g.stage_bytes} bytes and the epilogue's {epi} take "
                     f"{2 * g.stage_bytes + epi} bytes of shared memory, more than the {SMEM_PER_BLOCK[ARCH]} on sm_90a (CUTLASS "
                     f"needs 2 stages at least); use a smaller tile_k or tile")
        if v.precision in ("tf32", "tf32x3") and (g.layout_a, g.layout_b) != ("row", "col"):
            r.append(f"layout_a={g.layout_a}, layout_b={g.layout_b}: the TF32 wgmma reads K-major operands only "
                     f"({v.precision} takes layout_a row, layout_b col)")
        if v.get("abft_locate") != "weighted" and not g.abft16:
            r.append(f"abft_locate={v.get('abft_locate')}: how the tf32 / bf16 / fp16 threadblock ABFT repairs a flagged unit; "
                     f"other variants take weighted (omit it)")
        if g.abft16 and g.layout_a != "row":
            r.append(f"layout_a={g.layout_a} with abft ({v.precision}): the check's reference GEMM reads A K-major; use "
                     f"layout_a row")
        if g.abft and not g.abft16 and not r:
            desc = abft_descriptor(v)
            r += [f"the ABFT check's sm80 descriptor {desc.name}: {x}" for x in sm80.CutlassBackend().constraints(desc)]
        return r

    def name_tokens(self, v: Variant) -> list[str]:
        g = Geometry(v)
        tm, tn, tk = g.tile
        p_cols = v.get("abft_cols")
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
        ] + ([f"p{g.promote}"] if g.promote else []) + (["b0"] if g.beta0 else []) + (
            (["evt" if v.get("abft_locate") == "weighted" else "evtrecomp"] if g.abft16 else
             ["conc" if p_cols == 32 else f"conc{p_cols}"]) if g.abft else []) + (
            ["inj"] if v.protection.injects else [])

    def context(self, v: Variant) -> dict:
        g = Geometry(v)
        ta, tc, tacc, tepi = _CTYPES[v.precision]
        return {
            **v.common_context(),
            "g": g,
            "inject": v.protection.injects,
            "level": "abft" if g.abft else ("tmr" if g.tmr else "none"),
            "abft16": g.abft16,
            "tmr_level": g.level,
            "max_attempts": MAX_ATTEMPTS,
            **((self._abft16_context(v) if g.abft16 else self._abft_context(v)) if g.abft else {}),
            "op_kernel": cutlass90_operation(v, "Kernel"),
            "op_kernel_noc": cutlass90_operation(v, "KernelNoC", c_source=False) if g.beta0 else "",
            "ElementAB": ta,
            "ElementC": tc,
            "ElementAcc": tacc,
            "ElementEpi": tepi,
            "BenchT": _BENCH_TYPES[v.precision],
            "split3": v.precision == "tf32x3",
            # the bench's reference takes the tf32 operands rounded as CUTLASS's converter rounds them (see above)
            "tf32_truncate": False,
            "tol": tolerance(v.precision),
            "copies": COPIES if g.tmr else 1,  # fault units per tile (the bench): TMR copies, or 1
            "row_a": g.layout_a == "row",
            "row_b": g.layout_b == "row",
        }

    @staticmethod
    def _abft_context(v: Variant) -> dict:
        """The ABFT variant's context: the descriptor's CUTLASS types (main: 4-element accesses; fallback: 1), its
        geometry for the bench's fault plans (fault_geo), the check's settings (the cutlass backend's AbftConfig)."""
        d = abft_descriptor(v)
        dg = sm80.Geometry(d)
        unit = repr(abft_band_strip_lambda(sm80.abft_strip_cols(d)) * sm80.ABFT_STRIP_UNIT)  # (the banded check's lambda)
        elem = tolerance_rule(v.precision)  # tf32x3: fp32-level sums, no input rounding
        prot = v.protection
        return {
            "abft_desc": d.name,
            "op_main": sm80.cutlass_operation(d, "OpMain", dg.align, dg.align),
            "op_fallback": sm80.cutlass_operation(d, "OpFallback", dg.fallback_align, 1),
            "op_ref3": abft_ref3_operation(v, "KernelRef3"),
            "fault_geo": dg,  # the bench's fault units: the descriptor's tiles, threads, accumulators per thread
            "interval": prot.interval,
            "abft_strip_n": sm80.abft_strip_cols(d),
            # the concurrent check's threshold unit, as the prepass unit too (no other design runs here)
            "abft_unit": unit,
            "abft_conc_unit": unit,
            "abft_unit_base": repr(sm80.ABFT_STRIP_UNIT),  # (FTGEN_ABFT_LAMBDA's unit roundoff)
            "abft_fixed": repr(float(prot.threshold)) if prot.threshold != "auto" else "0.0",
            "abft_online": 1 if prot.correct == "online" else 0,
            # the suspect band (none with a fixed threshold: the band is a fraction of the derived one)
            "abft_banded": prot.threshold == "auto",
            "abft_band": repr(abft_band_floor(sm80.abft_strip_cols(d)) if prot.threshold == "auto" else 0.0),
            "abft_elem_u": repr(ABFT_ELEMENT_FRACTION * elem.u),
            "abft_elem_c_sqrt": repr(C_SQRT),
            "abft_elem_c_const": repr(C_CONST),
        }

    @staticmethod
    def _abft16_context(v: Variant) -> dict:
        """The accumulator check's variant context (tf32, bf16, fp16): the checked kernel (the variant's, its epilogue the
        check's visitor tree), the reference GEMM, the check's constants (abft_model.abft16_check)."""
        g = Geometry(v)
        prot = v.protection
        tm, tn, tk = g.tile
        tile = f"cute::Shape<cute::_{tm}, cute::_{tn}, cute::_{tk}>"
        leaf = "ftgen_abft16::FaultAccFetch" if prot.injects else "cutlass::epilogue::fusion::Sm90AccFetch"
        cols = tn
        se_log2, sw_log2 = abft_model.abft16_scales(cols)
        locate = v.get("abft_locate") == "weighted"
        fusion = "CheckFusion" if locate else "SumFusion"
        return {
            "abft16_locate": locate,
            "abft16_fusion": f"ftgen_abft16::{fusion}<{tile}, {_CTYPES[v.precision][1]}, {leaf}>",
            "op_kernel_chk": cutlass90_operation(v, "KernelChk", fusion="ChkFusion", c_source=False),
            "abft16_fusion_beta": f"ftgen_abft16::{fusion}Beta<{tile}, {_CTYPES[v.precision][1]}, {_CTYPES[v.precision][1]}, {leaf}>",
            "op_kernel_chk_beta": cutlass90_operation(v, "KernelChkBeta", fusion="ChkFusionBeta"),
            "op_ref": abft16_ref_operation(v, "KernelRef"),
            "abft16_cols": cols,
            "abft16_lambda": repr(abft_model.ABFT16_LAMBDA),
            "abft16_kw": WGMMA_K[v.precision],
            "abft16_rms_w": repr(abft_model.abft_rms_w(cols)),
            "abft16_se_log2": se_log2,
            "abft16_sw_log2": sw_log2,
            "abft_fixed": repr(float(prot.threshold)) if prot.threshold != "auto" else "0.0",
            "abft_online": 1 if prot.correct == "online" else 0,
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return (
            Source("cutlass90_variant.h.j2", ".h", "header"),
            Source("cutlass90_variant.cu.j2", ".cu", "library"),
            Source("cutlass_bench.cu.j2", "_bench.cu", "bench"),
        )
