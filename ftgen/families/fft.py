"""``fft``: batched complex-to-complex FFTs (C2C fp32, Z2Z fp64), forward and inverse, with the
fault-tolerance schemes of TurboFFT (seed 002).

Algorithm
---------
One transform of size ``N = 2**logn`` is a chain of 1-3 *launches* (kernels). Launch ``l`` has size
``R = N_l`` and the stride ``S`` (the product of the earlier launch sizes), ``M' = N/(S*R)``; it is
one generalised Stockham pass: for every *column* ``(s, m)`` (``s < S``, ``m < M'``) it reads the
``R`` elements ``in[s + S*(m + M'*i)]``, computes their R-point DFT, multiplies output ``k`` by
``w_{R*M'}^{m*k}`` and writes ``out[s + S*(k + R*m)]``. Inside a threadblock the R-point DFT is the
same recursion again: *sub-passes* of radix ``n`` (the per-thread size; the last one may be
smaller) exchanging data through shared memory, and inside a thread the radix-``n`` DFT is a
straight-line *codelet* of radix-2/4 layers whose twiddles are compile-time constants. Twiddles
between sub-passes and launches are a sincospi base plus a short recurrence (fp32) or table
look-ups (fp64). A block handles ``bs`` consecutive columns; each thread holds ``tcols`` of them
in registers at once (the "signals per thread" of the seed, and the batch of the two-sided
checksums).

Plans: ``launches``, ``N1..N3``, ``n1..n3``, ``bs1..bs3``, ``tcols`` and ``minb`` (resident blocks per SM
every launch is compiled for: ``__launch_bounds__``, i.e. the register cap) set a plan; 0 leaves a value to
the rules (``auto_launches``, ``auto_n``, ``auto_bs``, ``auto_tcols``, ``LaunchPlan.min_blocks``). Where a
plan search on the GPU found a better plan than the rules give, ``TUNED`` holds it per precision, level and
size, with the measurement; it applies when a variant sets none of the plan keys.

Cluster plans (``cluster: 1`` or ``2``, unprotected or the simultaneous two-sided-tb, every arch sm_90 or later):
the last launch (``N_L`` of 2, 4 or 8 points) has no kernel of its own. The launch before it keeps its twiddled
columns in shared memory; its blocks that hold the same columns ``s`` for the ``N_L`` values of ``m`` are one
thread-block cluster, and after the cluster barrier each computes the ``N_L``-point DFTs of its share of positions
from every block's tile (distributed shared memory) and stores them: the data cross DRAM once for both launches
(``CLUSTER_SIZES``, ``cluster_reasons``). Two-sided-tb cluster plans (``TUNED_CLUSTER``) check the launch before as
any launch, its outputs left in the tile (the rare path spills the tile to the workspace and reads it back), and
each fused DFT ``y = F z`` on its own: ``e^T y = N_L z_0`` and ``((k+1)_k)^T y = a^T z`` (``fused_coefficients``);
an output error is located by the quotient of the two residuals and replaced, anything else recomputes the DFT
from the tiles (``FftModel._fused_checked``). ``hooksplit: 1`` (injection builds of a protected
level): only the blocks the fault plan gives a fault carry the fault hooks; ``hooksplit: 2`` the same with that block's
hooked body a function call of its own; ``hooksplit: 3`` that block in a kernel of its own beside the launch.

Protection (``protection.scheme: abft``), per launch and column, under the single-event upset model
(one fault per check):

* ``one-sided``: per-column left checksum ``e^T u`` against the precomputed ``(W^T e)^T x``
  (``u`` the output with the launch twiddle divided out); detection recomputes the tile.
* ``two-sided-thread``: every sub-pass of every thread checks its ``tcols`` DFTs with two
  right-side checksum vectors (weights 1 and ``l+1``) transformed alongside; the quotient of the
  two residual vectors locates the column and the residual is subtracted (no recomputation).
* ``two-sided-tb``, sequential (log n <= ``TB_SEQ_MAX_LOGN``): a thread takes its ``tcols`` columns one
  after the other, keeping the running right-side sums ``sum_l x_l`` and ``sum_l u_l`` in shared memory,
  then transforms the checksum column ``sum_l x_l`` like a data column; the residual vector
  ``sum_l u_l - W sum_l x_l`` (reduced over the group with warp shuffles) detects.
  Simultaneous (larger sizes; the unprotected plans and data path): the thread's right-side sum of its
  columns against the precomputed left encodings ``e^T W`` and ``e2^T W`` (``e2 = e o (-1)^popcount(k)``)
  on the way in, ``e^T`` and ``e2^T`` of the outputs on the way out, reduced over the group; a group above
  the prefilter (``TB_PRE``) takes a rare path that transforms the checksum column only then and decides
  on the same residual vector. In both, once it fires the left-side checksums are evaluated (outputs as
  stored, inputs re-read): the non-finite mask or the quotient of their sums with weights 1 and ``l+1``
  locates the column, which is replaced by ``W sum x - sum_{l != j} u_l`` and verified with its own left
  checksum (delayed correction, no recomputation). An ambiguous location falls back to recomputation.
  One-launch calls in place go through the workspace (the input is re-read after the outputs are stored).
  ``tbenc: 2`` (``TUNED_TBENC``; launches with a staged input): the input-side encodings are computed by the
  staged load (each thread projects the sum of the adjacent columns it loads at one position) and, in launches
  without launch twiddles, the output side by the staged store; the prefilter then decides on the block's sums
  (every thread from the warps' partial sums), the rare path per group as above. ``tbenc: 3``: the same in the
  launches of at least ``TBENC3_MIN_T`` threads per column only.
  ``prefetch: 2`` (``TUNED_PREFETCH``; the sequential design's one-launch plans): each step prefetches the next step's
  columns into L2 (one contiguous run of whole signals), so their loads wait for L2 instead of DRAM.

Kernel names
------------
::

    fft_<c2c|z2z>_<f32|f64>_<protection>_<fwd|inv>_logn<L>_N<N1>[x<N2>[x<N3>]]_n<n1>[x..]_bs<b1>[x..]_t<tcols>[_mb<minb>][_sm|_sq][_cl|_cls][_te|_tl][_pf][_hs][_inj]
    fft_<c2c|z2z>_<f32|f64>_<protection>_<fwd|inv>_auto[_t<tcols>][_te<tbenc>][_pf<prefetch>][_hs][_inj]        (logn: 0, every size)

``<protection>`` is :meth:`Protection.token` (``none``, ``abft-1sided``, ``abft-2sided-thread``,
``abft-2sided-tb``, with ``-detect``, ``-th<x>`` suffixes); automatic parameters are resolved
before naming, so the name always shows the plan that is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import SpecError
from .base import (
    CLUSTER_ARCHS,
    MAX_THREADS_PER_SM,
    PRECISION_TAG,
    SMEM_PER_BLOCK,
    SMEM_PER_SM,
    UNIT_ROUNDOFF,
    Backend,
    EmittedVariant,
    Family,
    LauncherSignature,
    Param,
    Protection,
    Variant,
    positive_int,
    suggest,
)

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

PRECISIONS = ("fp32", "fp64")
CTYPE = {"fp32": "float", "fp64": "double"}
ESIZE = {"fp32": 8, "fp64": 16}  # bytes per complex element
MAX_LOGN = {"fp32": 26, "fp64": 25}
AUTO_MAX_LOGN = 24  # every-size variants (logn: 0) cover 2^1 .. 2^24; fixed sizes go to MAX_LOGN
CODELET_RADICES = (2, 4, 8, 16, 32)
ABFT_LEVELS = ("two-sided-tb", "two-sided-thread", "one-sided")
LEVEL_CODE = {"none": 0, "one-sided": 1, "two-sided-thread": 2, "two-sided-tb": 3}
# levels whose kernels read their input again after storing their output (the one-sided recomputation,
# two-sided-tb's location): a one-launch call in place goes through the workspace
REREADS_INPUT = ("one-sided", "two-sided-tb")
DIRECTIONS = ("forward", "inverse")
# total elements of the default shapes (fp32 2^26, fp64 2^25: the same bytes)
TOTAL_LOG = {"fp32": 26, "fp64": 25}
MAX_THREADS = 1024
SMEM_LIMIT = SMEM_PER_BLOCK["sm_90"]  # opt-in dynamic shared memory per block (sm_80: less, checked at run time)
SMEM_SM = SMEM_PER_SM["sm_90"]  # shared memory per SM (the minb checks; sm_80 has less, checked at run time)
MAX_SM_THREADS = MAX_THREADS_PER_SM["sm_90"]  # resident threads per SM (sm_80 the same)
SMEM_TARGET = 100 * 1024  # the automatic plans keep two blocks per SM
MAX_REGS = 232  # register estimate above which a plan is rejected (255 minus headroom)

# --- accuracy and detection constants (see tolerance(), thresholds(); calibrated with the CPU model)
# Verification: worst per-signal normwise error ||y - y_ref|| / ||y_ref|| <= TOL_C * u * sqrt(log2 N + 1).
TOL_C = 24.0
# Element check: max |y - y_ref| / rms(y_ref) <= TOL_ELEM_C * u * sqrt(log2 N + 1) * sqrt(2 ln(total)+1)
TOL_ELEM_C = 10.0
# Detection thresholds: residual > K * u * noise scale (defaults of `threshold: auto`).
K_TB = 4.0  # two-sided-tb: ||sum u - W sum x|| vs K u sqrt(log2 R + 1) sqrt(R (sum ||x||^2 + ||sum x||^2))
# two-sided-tb's common path only prefilters: the scalar checksums |e^T sum u - (W^T e)^T sum x| and the same with
# e2 = e o (-1)^popcount(k), against TB_PRE * K u sqrt(log2 R + 1) sqrt(R sum ||x||^2); a group above it goes to the rare path,
# where the vector residual above decides (false alarms are the vector check's). One projection can nearly cancel
# a fault spread over many outputs; both of two independent ones rarely do. The campaign of the one-level scalar
# check (dc2b577, K = 12, e2 = e o (-1)^k, results/h100/fft/tbsim): missed significant faults scored
# 0.27-0.96 of it (0.65-2.3 of this prefilter); clean blocks scored at most 0.27 (0.65)
TB_PRE = 1.25
K_1S = 12.0  # one-sided: |e^T u - v^T x| vs K u sqrt(log2 R + 1) sqrt(R) ||x||
K_TH = 12.0  # two-sided-thread: max_k |r_k| vs K u (log2 n + 1) sqrt(sum_l ||a_l||^2)
LOCATE_TOL = 0.25  # |quotient - (j+1)| accepted as a location
TWIDDLE_FRESH = 4  # fp32 recurrence: a fresh sincospi every 4 powers


def ilog2(x: int) -> int:
    return int(x).bit_length() - 1


def is_pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


# --------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------


def subpass_radices(R: int, n: int) -> tuple[int, ...]:
    """Radices of the sub-passes of an R-point launch with n elements per thread: n, n, ..., rest."""
    out = []
    rem = R
    while rem > 1:
        r = min(n, rem)
        out.append(r)
        rem //= r
    return tuple(out)


def codelet_layers(r: int) -> tuple[int, ...]:
    """Radix-2/4 layers of the in-register DFT-r (compile-time twiddles between layers)."""
    return {1: (), 2: (2,), 4: (4,), 8: (2, 4), 16: (4, 4), 32: (2, 4, 4)}[r]


@dataclass(frozen=True)
class LaunchPlan:
    index: int  # 0-based launch number
    N: int  # transform size
    R: int  # this launch's DFT size
    n: int  # elements per thread (sub-pass radix)
    bs: int  # columns per threadblock
    L: int  # columns per thread, held together in registers
    S: int  # product of the earlier launch sizes
    esize: int
    level: str = "none"
    xw: int = 0  # columns exchanged per shared-memory round (0: all at once); filled by the planner
    minb: int = 0  # resident blocks per SM the kernel is compiled for (0: the automatic rule of min_blocks)
    cluster: int = 0  # cluster plans: this launch runs the next (last) launch's DFTs of this size after its own
    fused: bool = False  # cluster plans: this launch has no kernel of its own (done by the launch before)
    cl_scatter: bool = False  # cluster plans (cluster: 2): contiguous loads exchanged through distributed shared memory
    tbenc: int = 0  # simultaneous two-sided-tb: 2 / 3 the encodings at the staged copies, the prefilter per block (tb_stage)
    prefetch: bool = False  # plan key prefetch: 2 (the launch prefetches where it can: pf)
    design: int = 0  # plan key tbseq: two-sided-tb's design, 2 sequential, 1 simultaneous, 0 by size (TB_SEQ_MAX_LOGN)

    @property
    def Mp(self) -> int:
        return self.N // (self.S * self.R)

    @property
    def cols_per_signal(self) -> int:
        return self.N // self.R

    @property
    def radices(self) -> tuple[int, ...]:
        return subpass_radices(self.R, self.n)

    @property
    def P(self) -> int:
        return len(self.radices)

    @property
    def T(self) -> int:
        return self.R // self.n

    @property
    def G(self) -> int:
        return self.bs // self.L

    @property
    def threads(self) -> int:
        return self.G * self.T

    @property
    def tbseq(self) -> bool:
        """two-sided-tb in the sequential design (plan key tbseq; by size: see TB_SEQ_MAX_LOGN)."""
        return self.level == "two-sided-tb" and tb_sequential(ilog2(self.N), self.design)

    @property
    def p2_bound(self) -> float:
        """Protected cluster plans: the fused C-point DFTs' threshold per unit roundoff and ||z|| (fused_bound; the
        kernels' Cfg::P2_BOUND), 0 without a fused launch."""
        return fused_bound(self.cluster) if self.cluster else 0.0

    @property
    def pf(self) -> bool:
        """The next column step prefetched into L2 while a step computes (plan key prefetch: 2): sequential levels of
        one-launch plans (a column is a whole signal, a step's columns one contiguous run) with more than one step of
        data columns."""
        return self.prefetch and self.seq and self.N == self.R and self.L > 1

    @property
    def data_path_unprotected(self) -> bool:
        """The unprotected kernel's data path: unprotected, or the simultaneous two-sided-tb (checks in registers)."""
        return self.level == "none" or (self.level == "two-sided-tb" and not self.tbseq)

    @property
    def seq(self) -> bool:
        """One-sided and the sequential two-sided-tb take a thread's L columns one after the other
        (registers: one column, the running right-side sums); the unprotected, thread and simultaneous
        threadblock levels hold all L at once."""
        return self.level == "one-sided" or self.tbseq

    @property
    def cpt(self) -> int:
        """Columns a thread holds in registers at once (and pushes through an exchange)."""
        return 1 if self.seq else self.L

    @property
    def steps(self) -> int:
        return self.L + (1 if self.level == "two-sided-tb" else 0) if self.seq else 1

    @property
    def W(self) -> int:
        """Elements per 128-byte bank row (the swizzle width)."""
        return 128 // self.esize

    @property
    def staged(self) -> bool:
        """The input or the output goes through the shared tile."""
        return self.staged_in or self.staged_out

    @property
    def staged_cols(self) -> int:
        """Columns a staged load or store moves at once (one step's in the sequential levels)."""
        return self.G if self.seq else self.bs

    @property
    def padded(self) -> bool:
        """Shared tile layout: padded (one spare element after every n positions of a column; the
        addresses of a thread's elements differ by constants, i.e. the loads' and stores' immediates)
        or XOR-swizzled (every address computed). Padded where it is as free of bank conflicts as the
        swizzle (at least a bank row of threads per column, so a half-warp's exchange accesses stay in
        one column; staged column groups of at most a bank row, which the pitch spreads) and where it
        measured no slower: unprotected fp32 (static SASS -8..-20% per launch; A/B on the H100,
        results/h100/fft/ab_pad: 2^13 0.906 -> 0.935 of cuFFT, the other sizes within +-0.7%). fp64 and
        the protected levels keep the swizzle: padded, fp64 2^20 lost 8% and two-sided-tb 5-17% at
        2^8-2^12 and 2^15-2^24 (the larger tile; the same run)."""
        return (self.data_path_unprotected and self.esize == 8 and self.T >= self.W
                and (not self.staged or self.staged_cols <= self.W))

    @property
    def pitch(self) -> int:
        """Elements per tile column. Padded: R + R/n rounded up to W/c modulo W (c: the staged
        columns), so the c columns one staged half-warp access touches start in c distinct bank groups."""
        if not self.padded:
            return self.R
        q = self.R + self.R // self.n
        r = (self.W // min(self.staged_cols, self.W)) % self.W if self.staged else 1
        return q + (r - q) % self.W

    @property
    def swz_mask(self) -> int:
        """XOR width minus one (-1: the padded layout)."""
        return -1 if self.padded else min(self.W, self.R) - 1

    @property
    def xcols(self) -> int:
        """Columns exchanged per round through shared memory, per group."""
        return self.xw if self.xw else self.cpt

    @property
    def rounds(self) -> int:
        return -(-self.cpt // self.xcols)

    @property
    def staged_in(self) -> bool:
        """Input goes through shared memory when the columns are strided (vectors then run
        across consecutive columns); contiguous columns are loaded directly (coalesced for
        >= 4 threads per column, 16-byte vectors when one thread holds a whole column)."""
        return self.cols_per_signal > 1

    @property
    def staged_out(self) -> bool:
        """Strided output (later launches), or contiguous output rows of a first launch whose
        columns have too few threads for full sectors."""
        return self.S > 1 or (self.cols_per_signal > 1 and self.T < self.W)

    @property
    def tile_cols(self) -> int:
        """Columns of the shared-memory tile: one exchange round of every group, or the columns
        one load/store step stages."""
        if self.seq:
            return self.G
        x = self.G * self.xcols
        if self.staged:
            x = max(x, self.bs)
        return x

    @property
    def tile_elems(self) -> int:
        if self.P > 1 or self.staged:
            return self.tile_cols * self.pitch
        return 0

    @property
    def smem_bytes(self) -> int:
        red = 0
        if self.level in ("one-sided", "two-sided-tb"):
            nv = 7 + self.L if self.level == "two-sided-tb" else 3 * self.L
            red = (self.threads // 32 + 1) * nv * 8
        # two-sided-tb: sequential, the running sums sum x, sum u; simultaneous, each thread's two input-side
        # checksums and norm (three complex slots)
        tb = self.level == "two-sided-tb"
        sums = 2 * self.n * self.threads if tb and self.seq else 0
        ck = 3 * self.threads if tb and not self.seq else 0
        body = -(-((-(-(self.tile_elems + sums) // 2) * 2 + ck) * self.esize) // 16) * 16
        return body + red + 16

    @property
    def min_blocks(self) -> int:
        """__launch_bounds__ minimum blocks per SM: 768 resident threads for unprotected fp32
        kernels (80-85 registers), 512 otherwise (128 registers: fp64, checksums). Measured on the
        H100 (results/h100/fft/min_blocks.jsonl): the fp32 multi-launch plans gain 3-17% from the
        extra warps (log n 17-24), the fp64 ones lose 5-20% except at 2^20. The parameter `minb`
        overrides it (ptxas then caps registers at 65536 / (minb * threads))."""
        if self.minb:
            return self.minb
        target = 768 if (self.data_path_unprotected and self.esize == 8) else 512
        return max(1, target // self.threads)

    def regs_estimate(self) -> int:
        """32-bit registers per thread, calibrated on ptxas for sm_90 (see tests/test_fft_compile)."""
        w = self.esize // 4  # 32-bit registers per complex
        data = self.cpt * self.n * w
        if self.level == "two-sided-tb":
            # (the sequential design holds one column at a time: ptxas gives fp32 2^12 128 registers at 4, 8 and 16
            # columns per thread alike)
            ft = 3 * w + 24 if self.tbseq else 3 * w + 4
        elif self.level == "two-sided-thread":
            ft = 2 * self.n * w + self.n * 2 + 16
        elif self.level == "one-sided":
            ft = self.L * 3 * w + 12
        else:
            ft = 0
        return data + ft + self.n * w + 32

    @property
    def tb_stage(self) -> bool:
        """Simultaneous two-sided-tb with the input-side encodings in the staged load (a thread sums the adjacent columns
        it loads at one position before the table read and the products) and, in launches without launch twiddles, the
        output side in the staged store; the prefilter then decides on the block's sums instead of each group's
        (FftLaunch::TBX, TBX_OUT; the rare path decides per group as before)."""
        wide = self.tbenc == 2 or (self.tbenc == 3 and self.T >= TBENC3_MIN_T)
        return wide and self.level == "two-sided-tb" and not self.tbseq and self.staged_in and not self.fused

    @property
    def tb_stage_out(self) -> bool:
        """tb_stage with the output-side encodings in the staged store too (strided output without launch twiddles)."""
        return self.tb_stage and self.staged_out and self.Mp == 1 and self.S > 1 and not self.cluster

    @property
    def cluster_tb(self) -> bool:
        """A protected cluster kernel: this launch's simultaneous two-sided-tb with the next (last) launch's checked
        C-point DFTs inside (FftLaunch::CLTB)."""
        return bool(self.cluster) and self.level == "two-sided-tb" and not self.tbseq

    @property
    def fused_vc(self) -> int:
        """Cluster kernels: the fused DFTs per stored vector (a 16-byte vector of positions in two-launch plans, of
        adjacent columns in three-launch ones when bs holds one; FftLaunch::P2_VC)."""
        V = 16 // self.esize
        return V if (self.S == 1 or self.bs >= V) else 1

    @property
    def fused_vectors(self) -> int:
        """Cluster kernels: the 16-byte vectors (or single columns) of the fused DFTs' outputs a block stores."""
        if self.S == 1:
            return self.R // (self.cluster // self.bs) // self.fused_vc
        return self.R // self.cluster * (self.bs // self.fused_vc)

    @property
    def fused_dfts(self) -> int:
        """Cluster kernels: the fused launch's C-point DFTs one thread computes."""
        return -(-self.fused_vectors // self.threads) * self.fused_vc

    @property
    def fault_steps(self) -> int:
        """Fault stages of the kernel: 0 .. P, and the fused DFTs' inputs and outputs of a protected cluster kernel."""
        return self.P + 1 + (2 if self.cluster_tb else 0)

    @property
    def fault_elems(self) -> int:
        """Values a thread can be faulted in at one stage (the fault plan's element range)."""
        return max(self.L * self.n, self.fused_dfts * self.cluster if self.cluster_tb else 0)

    def describe(self) -> str:
        return f"R={self.R} S={self.S} M'={self.Mp} n={self.n} radices={'x'.join(map(str, self.radices))} bs={self.bs} L={self.L} threads={self.threads}"


@dataclass(frozen=True)
class Plan:
    precision: str
    logn: int
    launches: tuple[LaunchPlan, ...]
    level: str = "none"
    cluster: int = 0  # the size of the fused last launch (cluster plans), else 0
    hooksplit: int = 0  # injection builds: the fault hooks only in the blocks with a planned fault (FftLaunch::body, HOOK_SPLIT); 2: that block's body a call of its own (HOOK_CALL); 3: a kernel of its own (kernels.cu.j2)

    @property
    def N(self) -> int:
        return 1 << self.logn

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(lp.R for lp in self.launches)


def _split_log(logn: int, parts: int) -> list[int]:
    base, extra = divmod(logn, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def auto_launches(precision: str, logn: int, level: str = "none") -> int:
    # one launch while a signal fits a block's shared memory: unprotected up to 2^14 (fp32) / 2^13
    # (fp64), measured faster than two launches there (results/h100/fft/search_*.jsonl: 0.835 vs 0.51
    # and 0.79 vs 0.54 of cuFFT); the protected levels hold several signals per block, one size less
    one = (14 if precision == "fp32" else 13) if level == "none" else (13 if precision == "fp32" else 12)
    # three launches from 2^21 (unprotected): search_large.jsonl.gz, 2^22: 0.695 vs 0.581 (fp32) and 0.770 vs
    # 0.638 (fp64) of cuFFT, 2^21: 0.637 vs 0.618 and 0.710 vs 0.648; two launches win up to 2^19, tie at 2^20.
    # fp32 since the 768-thread target and the 16-byte store fix: two launches at 2^21 with 256-thread
    # blocks (search_two.jsonl.gz: 0.813 vs 0.725 for three launches; 2^22: 0.780 vs 0.794, three stay)
    # two-sided-tb as well (search_tbweak.jsonl.gz: 2^22 three launches 0.513 / 0.526 of cuFFT against two 0.353 /
    # 0.330, fp32 / fp64; fp64 2^21 0.489 against 0.476); the other protected levels keep two launches to 2^22
    two = (21 if precision == "fp32" else 20) if level in ("none", "two-sided-tb") else 22
    if logn <= one:
        return 1
    if logn <= two:
        return 2
    return 3


def auto_tcols(precision: str, level: str, launches: int = 1, rmax: int = 0) -> int:
    if level == "two-sided-tb":
        # one launch: four columns per thread. Multi-launch plans (search_tbcols.jsonl.gz at b0c87fa, radix 16
        # fp32 / 8 fp64): four while every launch is at most 256 points (2^16: 0.863 of cuFFT against
        # 0.814 with two, fp64 0.780 / 0.731; 2^23 256x256x128: 0.615 / 0.576, fp64 0.751 / 0.689), two
        # for larger launches (2^20 1024x1024: 0.586 against 0.457, fp64 0.556 / 0.452: a step then takes four
        # columns, 32 bytes of each 128-byte row segment, and DRAM reads double: ncu_*_de1c4e4.txt). Eight measured
        # faster at 2^6 (0.878 / 0.853) but would put the residual threshold above two thirds of the
        # tolerance (test_two_sided_tb_threshold_is_below_significance)
        return 4 if launches == 1 or rmax <= 256 else 2
    if level == "two-sided-thread":
        return 2
    return 1


def auto_n(R: int, precision: str = "fp32", level: str = "none", single: bool = True, tcols: int = 0) -> int:
    """Elements per thread: radix 16 for fp32, 8 where registers are scarcer (fp64; the thread
    level holds two checksum vectors), never more than the launch size."""
    cap = 16 if precision == "fp32" else 8
    if level == "none" and single and R <= 16:
        # tiny signals: more threads per signal (results/h100/fft/search_*.jsonl, n = 8: radix 2 per
        # thread 1.03x cuFFT vs 0.78 at 8; n = 16: radix 4 0.96 vs 0.42 at 16; fp64 n = 8: 4, 0.96 vs 0.47)
        return max(2, R // 4) if precision == "fp32" else max(2, R // 2)
    if level == "two-sided-tb" and single and R == (16 if precision == "fp32" else 8):
        # four elements per thread (search_tbweak.jsonl.gz: fp32 2^4 0.661 of cuFFT against 0.540 with one
        # thread per signal; fp64 2^3 0.869 against 0.542)
        return 4
    if level == "two-sided-thread":
        cap = 8 if precision == "fp32" else 4
    if R <= cap:
        return R
    if R <= 64:
        return 8
    return cap


def auto_bs(precision: str, R: int, n: int, strided: bool, L: int, single: bool, level: str = "none") -> int:
    """Columns per block: about 256 threads (each holding L columns) and a tile of up to 4096
    (fp32) / 2048 (fp64) elements per column group; strided launches keep runs of >= 32 bytes
    of consecutive columns, except where that would make unprotected fp32 blocks larger than 256
    threads (their 768-thread target then leaves 128 registers and one block per SM; at 2^21 the
    first launch of 2048 measured 0.813 of cuFFT with 2 columns against 0.723 with 4:
    results/h100/fft/search_two.jsonl.gz)."""
    esize = ESIZE[precision]
    T = R // n
    if single:
        groups = max(1, 256 // max(T, 1))
        groups = min(groups, max(1, (32768 // esize) // R))
    else:
        groups = max(1, (32768 // esize) // R)
        while groups * T > 512 and groups > 1:
            groups //= 2
    bs = groups * L
    if strided:
        wide = max(bs, 32 // esize)
        if level == "none" and precision == "fp32" and (wide // L) * T > 256:
            wide = max(bs, 256 * L // T)
        bs = wide
    return bs

def auto_xw(lp: LaunchPlan) -> int:
    """Exchange all columns at once unless the shared-memory tile would exceed the target."""
    cpt = lp.cpt
    for xw in range(cpt, 0, -1):
        if cpt % xw and xw != cpt:
            continue
        trial = LaunchPlan(**{**lp.__dict__, "xw": 0 if xw == cpt else xw})
        if trial.smem_bytes <= SMEM_TARGET:
            return 0 if xw == cpt else xw
    return 1


# Measured winners that the rules above do not produce: plans of single sizes from the plan searches on
# the H100 (results/h100/fft/search_occ*.jsonl, search_tbocc.jsonl.gz, search_tw64*.jsonl, search_small.jsonl.gz, search_tbsmall*.jsonl: x cuFFT against the
# rule's plan in the same run). Applied when a variant gives none of the plan keys (PLAN_KEYS); the name shows the
# plan built.
TUNED = {
    # the smallest signals (search_small at 4a46536, x cuFFT at 2^26 / 2^25 elements): fp32 2^4 32 signals per
    # block 0.999 against the rule's 64 (0.972); fp32 2^5 four elements per thread (eight threads per signal)
    # 1.036 against eight elements (0.949); fp64 2^4 two elements per thread 1.016 against eight (0.895)
    ("fp32", "none", 4): {"n1": 4, "bs1": 32},
    ("fp32", "none", 5): {"n1": 4, "bs1": 64},
    ("fp64", "none", 4): {"n1": 2, "bs1": 64},
    # one launch, radix 32 (two exchanges instead of three): 256 threads at 254 registers, one block of 8
    # warps per SM, instead of 512 threads at 127 registers (one block of 16 warps): 0.881 against 0.812
    # (search_occ2)
    ("fp32", "none", 13): {"n1": 32, "minb": 1},
    # two launches of 2048 points, 8 columns per block (1024 threads): 0.821 / 0.812 against the three
    # launches' 0.792 / 0.803 at batch 16 / 8 (search_occ)
    # (since stop 30 the three-launch cluster plan below: 0.887 / 0.889 against this plan's 0.870 / 0.865)
    ("fp32", "none", 22): {"launches": 3, "N1": 512, "N2": 2048, "N3": 4, "bs2": 4, "cluster": 1, "minb": 2},
    # cluster plans (search_cluster.jsonl.gz at 12e7447, H100, x cuFFT at 2^26 / 2^25 elements and half that): fp32 2^15
    # 8192 x 4, four blocks of 512 threads a cluster, two blocks per SM: 0.974 / 0.974 against the two launches' 0.847 /
    # 0.873 (radix 32 or 16384 x 2: 0.90-0.96). fp64 2^14 4096 x 4 radix 16: 1.391 / 1.406 against 0.950 / 0.970, 2^15
    # 4096 x 8: 1.181 / 1.179 against 1.014 / 1.015. Lost: fp32 2^16 / 2^17 (16384 x 4: 0.944 against 1.074), fp64 2^13
    # (4096 x 2: 0.900 against one launch's 0.968) and 2^16 (8192 x 8: 0.835 against 1.016). On the H200 (4.8 TB/s,
    # results/h200/fft/stop30/) the two-launch plans held at fp32 2^15 (0.98 against 0.84): their second pass costs less
    ("fp32", "none", 15): {"N1": 8192, "cluster": 1, "n1": 16, "minb": 2},
    ("fp64", "none", 14): {"N1": 4096, "cluster": 1, "n1": 16},
    ("fp64", "none", 15): {"N1": 4096, "cluster": 1, "n1": 16},
    # three-launch cluster plans (search_cluster3.jsonl.gz at 13683a6, H100, x cuFFT at 2^26 / 2^25 elements and half that):
    # two passes over DRAM, the second launch's clusters of four blocks of 4 x 2048 points (fp32, 512 threads, two per SM)
    # or 4 x 1024 (fp64). fp32 2^23 1024 x 2048 x 4: 0.892 / 0.912 against three launches' 0.817 / 0.838, 2^22 512 x 2048
    # x 4: 0.887 / 0.889 against two launches' 0.870 / 0.865; fp64 2^21 512 x 1024 x 4: 0.934 / 0.947 against 0.905 / 0.922,
    # 2^22 1024 x 1024 x 4: 0.943 / 0.959 against 0.912 / 0.919, 2^24 4096 x 1024 x 4: 1.046 / 1.042 against 1.005 / 1.003.
    # Lost: fp32 2^20 / 2^21 / 2^24 (0.80 / 0.83 / 0.82 against 0.94 / 0.87 / 0.86-0.88), fp64 2^23 (0.995 against 1.001)
    ("fp32", "none", 23): {"launches": 3, "N1": 1024, "N2": 2048, "N3": 4, "bs2": 4, "cluster": 1, "minb": 2},
    # fp32 2^24 with a first launch of 32-byte runs (search_cluster24.jsonl at f192b92): 1024 x 2048 x 8 0.878 / 0.899 against
    # three launches' 0.856 / 0.883 (1024 x 4096 x 4: 0.47-0.71)
    ("fp32", "none", 24): {"launches": 3, "N1": 1024, "N2": 2048, "N3": 8, "bs1": 4, "bs2": 4, "cluster": 1, "minb": 2},
    ("fp64", "none", 24): {"launches": 3, "N1": 4096, "N2": 1024, "N3": 4, "bs2": 4, "n2": 16, "cluster": 1},
    # fp64 (search_tw64, after the table twiddles became products of one factor per exponent bit):
    # 2^12 two blocks of 512 threads per SM capped at 64 registers: 1.004 against 0.883 (radix 16 1.000)
    ("fp64", "none", 12): {"minb": 2},
    # 2^13 radix 16, 512 threads: 0.957 against 0.897
    ("fp64", "none", 13): {"n1": 16},
    # 2^19 radix 16 at up to 255 registers, 4 + 4 columns: 1.027 against 0.958 (64 registers, radix 8: 1.013)
    ("fp64", "none", 19): {"launches": 2, "n1": 16, "n2": 16, "bs1": 4, "bs2": 4, "minb": 1},
    # 2^20 1024-point launches of 4 columns (512 threads) at 64 registers, two blocks per SM: 0.977 against
    # 0.863 (radix 16 at 255 registers 0.969)
    ("fp64", "none", 20): {"launches": 2, "bs1": 4, "bs2": 4, "minb": 2},
    # 2^21 two launches (2048 x 1024) of radix 16 with 2 + 4 columns: 0.907 against the three launches'
    # 0.752 (4 + 4 columns 0.873, radix 8 with 4 + 8 columns 0.816; search_tw64b: 0.908, radix 16 then 8 at 128
    # registers 0.914)
    # (since stop 30 the three-launch cluster plan: 0.934 / 0.947 against this plan's 0.905 / 0.922)
    ("fp64", "none", 21): {"launches": 3, "N1": 512, "N2": 1024, "N3": 4, "bs2": 4, "n2": 16, "cluster": 1},
    # 2^22 two launches (2048 x 2048), radix 16 with 2 columns then radix 8 with 4, up to 255 registers: 0.887
    # against 0.824 (search_tw64b; radix 8 with 4 + 4 columns 0.849, radix 16 with 2 + 2 columns 0.847)
    # (since stop 30 the three-launch cluster plan: 0.943 / 0.959 against this plan's 0.912 / 0.919)
    ("fp64", "none", 22): {"launches": 3, "N1": 1024, "N2": 1024, "N3": 4, "bs2": 4, "n2": 16, "cluster": 1},
    # two-sided-tb, sequential design (log n <= TB_SEQ_MAX_LOGN):
    # two-sided-tb, one fault per transform (search_tbocc): radix 32 / 16 at up to 255 registers. fp32 2^13
    # 0.638 against 0.570 (232 registers; at 2^10-2^12, 2^16 and 2^20 radix 32 lost: 0.30-0.78 against
    # 0.59-0.86). fp64 (search_tw64): 2^10 0.846 against 0.814, 2^11 0.836 against 0.805, 2^12 0.698
    # against 0.636; at 2^13 and 2^16-2^22 the rules' plans won (2^16 0.816 against 0.780, 2^20 0.589
    # against 0.547)
    # two-sided-tb at the smallest sizes (search_tbsmall at 1abec7c, one fault per transform): fewer signals per
    # block than the rule's (32 instead of 256 / 256 / 128 / 64: more blocks per SM at the same registers):
    # fp32 2^4 0.892 against 0.805, 2^5 0.951 against 0.845, 2^6 0.925 against 0.852, 2^8 0.936 against 0.908
    # (at 2^7 and 2^9-2^12 the rule's plans were within 1% of the best)
    ("fp32", "two-sided-tb", 4): {"n1": 4, "bs1": 32},
    ("fp32", "two-sided-tb", 5): {"n1": 8, "bs1": 32},
    ("fp32", "two-sided-tb", 6): {"n1": 8, "bs1": 32},
    # the simultaneous design (tbseq: 1, the unprotected rules' plans) at sequential sizes, with the hook split
    # (TUNED_HOOKSPLIT), one fault per transform (stop34/search_tbsim_754fea0, the same again in search_tbsim2_d889ce3, x
    # cuFFT against the sequential rules' plan with the split): fp32 2^7 0.982 against 0.919, 2^8 0.991 against 0.922 (the
    # sequential bs 32 of search_tbsmall: 0.953), 2^9 0.995 against 0.885, 2^10 two columns per block 0.938 against 0.867
    # (four: 0.870), 2^11 one column per block 0.990 against 0.868 (two: 0.860), 2^12 0.880 against 0.862; fp64 2^5 1.011
    # against 1.002 (the sequential plan without the split), 2^6 1.021 against 1.007. Without the split the simultaneous
    # plans ran 0.90-0.94 (fp32) and 0.94-0.96 (fp64): the blocks without the planned fault then carry its hooks too.
    # Lost: fp32 2^3-2^5 (0.58-0.89 against 0.98-1.00), fp64 2^3 / 2^4 and 2^7-2^12 (2^12 0.641 against 0.856)
    ("fp32", "two-sided-tb", 7): {"tbseq": 1},
    ("fp32", "two-sided-tb", 8): {"tbseq": 1},
    ("fp32", "two-sided-tb", 9): {"tbseq": 1},
    ("fp32", "two-sided-tb", 10): {"tbseq": 1, "bs1": 2},
    ("fp32", "two-sided-tb", 11): {"tbseq": 1, "bs1": 1},
    ("fp32", "two-sided-tb", 12): {"tbseq": 1},
    ("fp64", "two-sided-tb", 5): {"tbseq": 1},
    ("fp64", "two-sided-tb", 6): {"tbseq": 1},
    # fp64 (search_tbsmall64 at 9c22893): 2^3 64 signals per block 0.974 against 512 (0.869), 2^4 four elements
    # per thread with 32 signals 0.960 against eight elements with 512 (0.891); 2^5-2^9: the rules' plans best
    ("fp64", "two-sided-tb", 3): {"n1": 4, "bs1": 64},
    # 2^4: the simultaneous design with two columns per thread (stop35/search_weak35h_c19a3e6: 1.001 against 0.973)
    ("fp64", "two-sided-tb", 4): {"tbseq": 1, "n1": 4, "tcols": 2, "bs1": 16},
    # the simultaneous design with two columns per thread at radix 8 (the checks' table reads and products once per two
    # columns; the fp64 cluster plans' shape), with the hook split (stop35/search_weak35e_c5dcb8b, x cuFFT against the
    # sequential plans in the same run): 2^7 four columns per block 0.997 against 0.965, 2^8 two 0.996 against 0.962, 2^9
    # two 0.996 against 0.940, 2^10 0.971 against 0.877 (without the split 0.939), 2^11 0.914 against 0.874 (0.893); at
    # 2^12 0.745 against 0.825 (search_weak35d_2c3e8c8). With one column per thread it had lost at every size from 2^7
    # (stop34/search_tbsim_754fea0)
    ("fp64", "two-sided-tb", 7): {"tbseq": 1, "n1": 8, "tcols": 2, "bs1": 4},
    ("fp64", "two-sided-tb", 8): {"tbseq": 1, "n1": 8, "tcols": 2, "bs1": 2},
    ("fp64", "two-sided-tb", 9): {"tbseq": 1, "n1": 8, "tcols": 2, "bs1": 2},
    ("fp64", "two-sided-tb", 10): {"tbseq": 1, "n1": 8, "tcols": 2, "bs1": 2},
    ("fp64", "two-sided-tb", 11): {"tbseq": 1, "n1": 8, "tcols": 2, "bs1": 2},
    ("fp64", "two-sided-tb", 12): {"n1": 16, "minb": 1},
    # two-sided-tb, simultaneous design (the unprotected data path with the checks in registers; otherwise the
    # unprotected plans), one fault per transform (search_tbreg.jsonl.gz at d18d561, x cuFFT against the unprotected plan
    # in the same run): fp32 2^13 radix 32 at two blocks per SM 0.777 / 0.683, 2^14 radix 32 at one 0.785 / 0.657
    # (radix 16), 2^22 three launches 0.743 / 0.599; fp64 2^20 radix 8 then 16 at up to 255 registers 0.685 / 0.593,
    # 2^21 / 2^22 three launches 0.644 / 0.614 and 0.698 / 0.598
    ("fp32", "two-sided-tb", 13): {"n1": 32, "minb": 2},
    ("fp32", "two-sided-tb", 14): {"n1": 32, "minb": 1},
    # two columns per thread at radix 8 (the checks' products and table reads once per two columns), three blocks per SM
    # (search_tbcols2.jsonl.gz at da3995c): 2^18 0.916 against radix 16 with one column 0.886, 2^22 (three launches) 0.741
    # against 0.717; elsewhere radix 16 with one column stayed best or within 1% (2^16 1.011 against two columns' 0.981,
    # 2^20 0.766 against 0.721)
    ("fp32", "two-sided-tb", 18): {"launches": 2, "n1": 8, "n2": 8, "tcols": 2, "bs1": 8, "bs2": 8, "minb": 3},
    ("fp32", "two-sided-tb", 22): {"launches": 3, "n1": 8, "n2": 8, "n3": 8, "tcols": 2, "bs1": 16, "bs2": 32, "bs3": 32, "minb": 3},
    # fp64 2^19 after 9fed26f's cheaper checks (search_tb27.jsonl.gz): radix 8 then 16 at up to 255 registers 0.706 against
    # the unprotected plan's radix 16 / 16 (0.672); the other weak sizes' current plans stayed best (fp64 2^21 two
    # launches 0.628 against three 0.627)
    ("fp64", "two-sided-tb", 19): {"launches": 2, "n1": 8, "n2": 16, "bs1": 4, "bs2": 4, "minb": 1},
    ("fp64", "two-sided-tb", 20): {"launches": 2, "n1": 8, "n2": 16, "bs1": 4, "bs2": 4, "minb": 1},
    # fp64 two columns per thread at radix 4 (the table reads once per two columns; search_tb64cols2.jsonl.gz at 54a700c):
    # 2^14 0.830 against radix 8 with one column 0.799, 2^21 (three launches) 0.650 against 0.629; 2^16-2^20 lost (2^18
    # 0.601 against 0.776: the radix-4 passes), 2^22 tied
    ("fp64", "two-sided-tb", 14): {"launches": 2, "n1": 4, "n2": 4, "tcols": 2, "bs1": 8, "bs2": 8},
    # fp64 two columns per thread at radix 8 (the fp64 cluster plans' shape) in the two-launch plans, with the hook split
    # (stop35/search_weak35_1d9806b, x cuFFT, the same run): 2^15 0.920 against one column's 0.904, 2^16 0.939 against
    # 0.894. Lost at 2^17 / 2^18 (0.842 / 0.844 against 0.888 / 0.869; other block shapes and the staged encodings
    # search_weak35b_3f04a2e: 0.74-0.84), 2^19 1024 x 512 0.866 against TUNED_CLUSTER's 0.860 (search_weak35f: 0.856 against 0.857)
    # (2^24's three launches likewise: search_weak35h_c19a3e6 0.902 against 0.890, search_weak35 / _weak35f 0.897 against 0.889)
    ("fp64", "two-sided-tb", 24): {"launches": 3, "n1": 8, "n2": 8, "n3": 8, "tcols": 2},
    ("fp64", "two-sided-tb", 15): {"launches": 2, "n1": 8, "n2": 8, "tcols": 2},
    ("fp64", "two-sided-tb", 16): {"launches": 2, "n1": 8, "n2": 8, "tcols": 2},
    ("fp64", "two-sided-tb", 21): {"launches": 3, "n1": 4, "n2": 4, "n3": 4, "tcols": 2, "bs1": 8, "bs2": 8, "bs3": 8},
    # (fp64 2^22 three launches, 0.698 against the unprotected plan's two 0.598 (search_tbreg), is the rules' plan since the
    # unprotected 2^22 plan became a cluster plan at stop 30, which the two-sided-tb does not take)
}


# Two-sided-tb cluster plans (sm_90; an architecture before it takes TUNED's plan or the rules'): the last launch's
# 4-point DFTs inside the launch before, whose simultaneous two-sided-tb keeps its outputs in the shared tile, each fused
# DFT checked on its own (FftLaunch::checked_dft), with two columns per thread at radix 8 (the checks' table reads and
# products on the sum of a thread's columns). fp64 only: fp32 lost at every shape (0.40-0.62 of cuFFT against 0.70-0.79,
# results/h100/fft/search_tbcluster*.jsonl). x cuFFT with one fault per transform, against the plan TUNED or the rules
# give in the same search: 2^14 2048 x 8 (two columns m per block, four blocks a cluster) 0.934 against 0.827
# (search_tbcluster3 at dcf8127); 2^20 512 x 512 x 4 0.789 against 0.672 and 2^21 512 x 1024 x 4 (bs2 2) 0.705 against
# 0.648 (the same search); 2^19 256 x 512 x 4 0.736 against 0.707, 2^22 2048 x 512 x 4 0.718 against 0.684 and 2^23
# 4096 x 512 x 4 0.857 against 0.831 (search_tbcluster4 at 5a5ae7b). Lost: 2^13, 2^15-2^18, 2^24 (0.57-0.80 against
# 0.67-0.84). (Their injection builds take the hook split: TUNED_HOOKSPLIT.) Stop 35 (results/h100/fft/stop35/search_weak35_1d9806b,
# with the split, the same run): 2^13 2048 x 4 0.714 against the one-launch plan's 0.690; 2^21 1024 x 512 x 4 (the 512-point
# middle launch of the 2^20 / 2^22 plans) 0.790 against 512 x 1024 x 4's 0.724 (256 x 2048 x 4 0.709; search_weak35b_3f04a2e:
# bs2 8 0.789, 2048 x 256 x 4 0.750). Lost there: 2^19 512 x 256 x 4 (0.834 against 0.860), 2^20 1024 x 256 x 4 / 2048 x 128 x 4
# (0.820 / 0.753 against 0.847), 2^22 4096 x 256 x 4 and bs2 2 (0.759 / 0.734 against 0.792)
TUNED_CLUSTER = {
    ("fp64", "two-sided-tb", 13): {"launches": 2, "N1": 2048, "N2": 4, "bs1": 2, "tcols": 2, "cluster": 1, "n1": 8},
    ("fp64", "two-sided-tb", 14): {"N1": 2048, "N2": 8, "bs1": 2, "tcols": 2, "cluster": 1, "n1": 8},
    ("fp64", "two-sided-tb", 19): {"launches": 3, "N1": 256, "N2": 512, "N3": 4, "bs2": 4, "tcols": 2, "cluster": 1, "n2": 8},
    ("fp64", "two-sided-tb", 20): {"launches": 3, "N1": 512, "N2": 512, "N3": 4, "bs2": 4, "tcols": 2, "cluster": 1, "n2": 8},
    ("fp64", "two-sided-tb", 21): {"launches": 3, "N1": 1024, "N2": 512, "N3": 4, "bs2": 4, "tcols": 2, "cluster": 1, "n2": 8},
    ("fp64", "two-sided-tb", 22): {"launches": 3, "N1": 2048, "N2": 512, "N3": 4, "bs2": 4, "tcols": 2, "cluster": 1, "n2": 8},
    ("fp64", "two-sided-tb", 23): {"launches": 3, "N1": 4096, "N2": 512, "N3": 4, "bs2": 4, "tcols": 2, "cluster": 1, "n2": 8},
}


# Injection builds whose fault hooks are only in the block that holds the planned fault (hooksplit: 1, FftLaunch::body;
# the other blocks run the code of the build without injection code, told by the caller which block that is), per
# precision and level: the sizes where the split measured faster than hooks in every block, sm_90 builds (their plans).
# specs/fft_plan_search_hooks2.yaml (results/h100/fft/stop32/search_hooks2_6f3407c.jsonl.gz, one fault per transform, x
# cuFFT, the same run): fp64 2^10 0.881 -> 0.930, 2^12 0.699 -> 0.734, 2^15 0.844 -> 0.907, 2^16 0.829 -> 0.898, 2^24
# 0.835 -> 0.896; fp32 2^18 0.918 -> 0.945, 2^22 0.740 -> 0.759; fp64 2^5 / 2^6 since their TUNED plans are simultaneous
# (stop34/search_tbsim2_d889ce3: 0.944 -> 1.011, 0.955 -> 1.021; fp32 2^12's simultaneous plan without it: 0.880 against
# 0.880, where the sequential one had won with it, 0.843 -> 0.861). Lost: fp32 2^13 / 2^14 (0.779 / 0.763 -> 0.698 / 0.666:
# the code without hooks spills there, stop 26) and 2^20 / 2^21 (0.771 / 0.702 -> 0.730 / 0.679), by 0.3-2% at fp32 2^3,
# 2^6 and fp64 2^5, 2^6, 2^9. fp64 2^14, 2^19-2^23 (TUNED_CLUSTER's plans): stop 31's full runs (stop31/rerun_9b2ba0b
# without, rerun_6cc3eb9 with: 2^14 0.933 -> 1.033, 2^19 0.743 -> 0.821, 2^22 0.718 -> 0.793), then every block still
# read the fault table. Stop 35's simultaneous two-column plans (stop35/search_weak35c_2c3e8c8, search_weak35e_c5dcb8b,
# search_weak35f_17a67eb, the same run each): fp64 2^7 0.995 -> 0.998, 2^8 0.984 -> 0.995, 2^9 0.980 -> 0.997, 2^10 0.939 -> 0.971,
# 2^11 0.893 -> 0.914, 2^15 0.838 -> 0.923, 2^16 0.873 -> 0.940. fp32 2^13 since stop 36, whose code without hooks no longer
# spills (ENC_FENCE; stop36/search_weak36d_c0968f8: 0.792 -> 0.805; 2^14 still lost, 0.784 -> 0.748).
TUNED_HOOKSPLIT = {
    ("fp32", "two-sided-tb"): frozenset({4, 5, 7, 8, 9, 10, 11, 13, 15, 16, 17, 18, 19, 21, 22, 23, 24}),
    ("fp64", "two-sided-tb"): frozenset({3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}),
}

# hooksplit 2: the faulted block's hooked body a call of its own (FftLaunch::body_hooked), where it measured faster than
# the hooked body inlined beside the other blocks' code. results/h100/fft/stop37/ab_hookcall_2ad7f4a (one fault per
# transform, A/B in one run; B: the call at every size with the split, fp32 every size): fp32 2^7 +1.5%, 2^10 +2.7%,
# 2^13 +2.9%, 2^21 +2.1% (with the split, which it had not taken), 2^22 / 2^23 +0.8%; fp64 2^15 +1.8%, 2^16 +1.8%, 2^24
# +2.1%. Lost: fp32 2^9 -12%, 2^4 -2.5%, 2^6 / 2^11 / 2^12 / 2^20 -1.5..-2.4%, fp64 2^13 / 2^14 -5.5% (the callee's
# registers raise the kernel's count where its own code needed fewer). ab_hookcall_6f9f1a4 (these sizes only, the
# same A): fp32 2^13 +2.9%, 2^21 +2.0%, fp64 2^15 / 2^16 / 2^24 +1.5..1.9%; 2^10 -0.3% (dropped). Elsewhere that run
# moved within 0.3% (the A/B's spread)
TUNED_HOOKCALL = {
    ("fp32", "two-sided-tb"): frozenset({7, 13, 21, 22, 23}),
    ("fp64", "two-sided-tb"): frozenset({15, 16, 24}),
}
# hooksplit 3: the faulted block (its cluster) in a kernel of its own on a second stream of the greatest priority beside
# the launch's kernel of the other blocks, whose code is then that of the build without injection code
# (stop37/fault_cost_e8c0cf7: the injection builds ran up to 6% below those with no fault at all), where every A/B that
# measured it there had it more than 0.7% faster than the measured hooksplit 0 / 1 / 2 (one fault per transform, A the
# tree without it, B this at every size): results/h100/fft/stop38/ab_hkprio_c3e8877 (fp32) and ab_hkprio2_c3e8877:
# fp32 2^15-2^20 +2.4..+5.0%, 2^23 / 2^24 +2.1..+2.5%; fp64 2^10 +0.9%, 2^15 / 2^16 +1.7 / +2.2%, 2^19 / 2^20 +2.1..+2.5%,
# 2^23 +6.1%.
# Lost: fp32 2^11 / 2^12 -7..-9%, 2^5 / 2^10 -2%, fp64 2^13 / 2^14 -4%, 2^17 -2.3% (the faulted block's own kernel and the
# fork and join cost more than the code without hooks gains). On a stream of default priority (stop38/ab_hk_c3e8877) it lost
# at almost every size (presumably the faulted block's kernel dispatched after the other blocks' kernel, at the end of the
# launch; not profiled)
TUNED_HOOKKERNEL: dict[tuple[str, str], frozenset[int]] = {
    ("fp32", "two-sided-tb"): frozenset({15, 16, 17, 18, 19, 20, 23, 24}),
    ("fp64", "two-sided-tb"): frozenset({10, 15, 16, 19, 20, 23}),
}
# name tokens of hooksplit 0, 1, 2, 3
HOOKSPLIT_TAG = {0: "", 1: "_hs", 2: "_hc", 3: "_hk"}


# Builds without injection code take the injection builds' measured plans. Until stop 36 fp32 2^13 / 2^14 had their own
# (TUNED_CLEAN: radix 32 at one block per SM, radix 16): compiled without the fault hooks, the radix-32 launches had issued
# the input encoding's 32 table reads with the data loads and spilled around them (search_tbclean_b302189: 0.619 against
# the injection build's 0.740 at 2^13). With those encodings fenced off in the code without hooks (FftLaunch::ENC_FENCE)
# the injection builds' plans won without injection code too (stop36/search_weak36e_c0968f8, no faults, x cuFFT, the same
# run): 2^13 radix 32 at two blocks per SM 0.853 against 0.693, 2^14 radix 32 0.793 against radix 16's 0.637.


# two-sided-tb: the sequential design (columns one after the other, the checksum column transformed in the common
# path, the vector residual checked there) up to this size, the simultaneous one (the unprotected data path, scalar
# prefilter in registers, the rest in a rare path) above it. Measured in full runs (results/h100/fft/tbsim/): the
# simultaneous design lost at every one-launch size up to 2^12 (fp32 0.70-0.98 against 0.85-0.98) and won at the
# larger ones (fp32 2^13-2^24 0.64-0.95 against 0.46-0.87). The rule of a variant without plan keys; since stop 34
# measured plans (TUNED, plan key tbseq: 1) take the simultaneous design at fp32 2^7-2^12 and fp64 2^5 / 2^6, where it
# won with the hook split (stop34/search_tbsim_*), since stop 35 at fp64 2^4 and 2^7-2^11 with two columns per thread
# (stop35/search_weak35e_*, _weak35h_*); the sequential design at fp32 2^13 lost (0.55-0.73 against 0.795,
# stop34/search_tbseq_89ce8b2: one block of 512 threads per SM)
TB_SEQ_MAX_LOGN = 12


# The simultaneous two-sided-tb with the encodings at the staged copies (tbenc: 2, LaunchPlan.tb_stage), per precision
# and level: the sizes where it measured faster than each thread encoding its own columns, with the measured plans.
# specs/fft_plan_search_tbenc.yaml (results/h100/fft/stop33/search_tbenc_1ede807/, one fault per transform, x cuFFT, the
# same run): fp32 2^20 0.772 -> 0.829, 2^21 0.702 -> 0.775, fp64 2^17 0.830 -> 0.866, 2^18 0.816 -> 0.858 (their launches
# have 64 threads per column: the group's sums crossed warps through shared memory already, and the per-thread encodings
# spilled). Lost where a column's threads fit one warp (the group's sums were shuffles only; the block's need barriers):
# fp32 2^15-2^18 and 2^22-2^24 by 4-9%, and in the fp64 cluster plans (two columns per thread, which the thread's own
# encodings sum first: 2^19 / 2^20 -15%); fp32 2^19, fp64 2^15 / 2^16 / 2^24 within 0.5%.
# tbenc 3 (only the launches of at least TBENC3_MIN_T threads per column; specs/fft_plan_search_tbenc3.yaml,
# results/h100/fft/stop33/search_tbenc3_92eb41b/): fp32 2^19 0.852 -> 0.867 (tbenc 2 0.834: its 512-point launch lost), fp64
# 2^17 0.825 -> 0.893 (tbenc 2 0.885). (Where every launch has 64 threads per column, 2 and 3 build the same kernels.)
TUNED_TBENC = {
    ("fp32", "two-sided-tb"): {19: 3, 20: 2, 21: 2},
    ("fp64", "two-sided-tb"): {17: 3, 18: 2},
}
# tbenc 3: the staged encodings only in the launches whose columns have at least this many threads (the 1024-point
# launches of radix 16 and 512-point ones of radix 8, where tbenc 2 won)
TBENC3_MIN_T = 64


# The sequential levels' one-launch plans with the next step's columns prefetched into L2 while a step computes
# (prefetch: 2, LaunchPlan.pf; FftLaunch::prefetch_step), per precision and level: the sizes where it measured more than 1%
# faster than without. specs/fft_plan_search_pf.yaml (results/h100/fft/stop34/search_pf_97c008c/, one fault per transform,
# x cuFFT at 2^26 elements, the same run): fp64 2^12 0.733 -> 0.856 (one block of 256 threads per SM at 218 registers: its
# loads waited for DRAM with nothing else resident), 2^11 0.907 -> 0.950, 2^10 0.928 -> 0.950, 2^9 0.946 -> 0.957, 2^3 1.002
# -> 1.016; fp32 2^4 0.942 -> 0.994, 2^5 0.981 -> 1.004. Lost: fp32 2^3, 2^7-2^9 (2^8 0.953 -> 0.885), fp64 2^5-2^8 (-3..-5%:
# many resident blocks, the prefetches' extra L2 requests); fp32 2^6, 2^10-2^12 and fp64 2^4 within 1%. The A/B runs before
# it (stop34/ab_prefetch_d66a717/, every step prefetching) agree within 1-3% at every size.
# (fp64 2^9-2^11 since stop 35: their measured plans are simultaneous, TUNED, with nothing to prefetch)
TUNED_PREFETCH: dict[tuple[str, str], frozenset[int]] = {
    ("fp32", "two-sided-tb"): frozenset({4, 5}),
    ("fp64", "two-sided-tb"): frozenset({3, 12}),
}


def auto_prefetch(precision: str, level: str, logn: int, measured_plan: bool = True) -> int:
    """prefetch's automatic value: 2 where TUNED_PREFETCH measured it faster with the measured plan, else 1."""
    return 2 if measured_plan and logn in TUNED_PREFETCH.get((precision, level), ()) else 1


def auto_tbenc(precision: str, level: str, logn: int, measured_plan: bool = True) -> int:
    """tbenc's automatic value: TUNED_TBENC's where it measured faster with the measured plan, else 1."""
    return TUNED_TBENC.get((precision, level), {}).get(logn, 1) if measured_plan else 1


def tb_sequential(logn: int, tbseq: int = 0) -> bool:
    """two-sided-tb's design: sequential where plan key tbseq says 2, simultaneous where 1, by size where 0."""
    return tbseq == 2 or (tbseq == 0 and logn <= TB_SEQ_MAX_LOGN)


def plan_level(level: str, logn: int, tbseq: int = 0) -> str:
    """The level whose plan rules a variant follows: the simultaneous two-sided-tb plans are the unprotected ones."""
    return "none" if level == "two-sided-tb" and not tb_sequential(logn, tbseq) else level


def tuned_hooksplit(precision: str, level: str, logn: int) -> int:
    """The measured hooksplit value of an sm_90 injection build at a size: 3 (TUNED_HOOKKERNEL), 2 (TUNED_HOOKCALL, within
    TUNED_HOOKSPLIT), 1 (TUNED_HOOKSPLIT), else 0."""
    def at(table: dict) -> bool:
        return logn in table.get((precision, level), ())

    return 3 if at(TUNED_HOOKKERNEL) else (2 if at(TUNED_HOOKCALL) else 1) if at(TUNED_HOOKSPLIT) else 0


def tuned_plan(precision: str, level: str, logn: int, inject: bool = False, clusters: bool = True) -> dict:
    """The measured winner's plan keys for a size (the two-sided-tb cluster plans of TUNED_CLUSTER first; injection builds
    add TUNED_HOOKSPLIT's split, as a call where TUNED_HOOKCALL says), or {}. The simultaneous
    two-sided-tb takes the unprotected plan, except an unprotected cluster plan (the rules' plan); `clusters` False (a
    build for an architecture before sm_90): TUNED's plan or the rules' instead of a cluster plan, hooks in every
    block."""
    key = (precision, level, logn)
    hs = tuned_hooksplit(precision, level, logn) if inject and clusters else 0
    split = {"hooksplit": hs} if hs else {}
    if clusters and key in TUNED_CLUSTER:
        return {**TUNED_CLUSTER[key], **split}
    entry = TUNED.get(key, TUNED.get((precision, plan_level(level, logn), logn), {}))
    return {**({} if entry.get("cluster") and (level != "none" or not clusters) else entry), **split}


def resolve_params(precision: str, level: str, params: Mapping[str, Any], inject: bool = False, clusters: bool = True) -> dict:
    """Fill the automatic (0) parameters of a fixed-size variant (`inject`: built with fault injection, which selects
    the measured winners, tuned_plan). Returns a new dict; raises ValueError with a reason when the given parameters
    cannot form a plan."""
    p = dict(params)
    logn = p["logn"]
    N = 1 << logn
    # the simultaneous two-sided-tb runs the unprotected kernel's data path (its checks ride along in registers):
    # the unprotected plans and their measured winners (plan_level)
    measured = not any(p.get(k) for k in PLAN_KEYS)
    if measured:
        given_split = p.get("hooksplit")
        p.update(tuned_plan(precision, level, logn, inject, clusters))
        if given_split:
            p["hooksplit"] = given_split  # (the variant's own choice over the measured one)
    if not inject:
        p["hooksplit"] = 0  # (a measured plan's choice for injection builds)
    p["tbenc"] = p.get("tbenc") or auto_tbenc(precision, level, logn, measured)
    p["prefetch"] = p.get("prefetch") or auto_prefetch(precision, level, logn, measured)
    level = plan_level(level, logn, p.get("tbseq", 0))
    Ns = [p.get("N1", 0), p.get("N2", 0), p.get("N3", 0)]
    launches = p.get("launches", 0)
    given = [x for x in Ns if x]
    if p.get("cluster") and not given and not launches:
        # cluster plans: N2 = 2 (the smallest cluster) unless given
        launches = 2
        given = [N // 2] if N >= 4 else []
        Ns = given + [0, 0]
    if given:
        if Ns[len(given):] != [0] * (3 - len(given)):
            raise ValueError("N1, N2, N3 must be given in order (N2 needs N1, N3 needs N2)")
        names = "*".join(f"N{i + 1}" for i in range(len(given)))
        prod = math.prod(given)
        if N % prod:
            raise ValueError(f"{names} = {prod} does not divide n = {N}")
        rest = N // prod
        if rest == 1:
            if launches and launches != len(given):
                raise ValueError(f"launches={launches} but {names} = n already ({len(given)} launch(es))")
        else:
            more = (launches - len(given)) if launches else 1
            if len(given) == 3 or more <= 0:
                raise ValueError(f"{names} = {prod} is not n = {N}")
            if rest < 2**more:
                raise ValueError(f"{names} = {prod} leaves n/{prod} = {rest}, too small for {more} more launch(es)")
            given = given + [1 << x for x in _split_log(ilog2(rest), more)]
    else:
        if not launches:
            launches = auto_launches(precision, logn, level)
        if launches > logn:
            raise ValueError(f"{launches} launches need n >= {2 ** launches}")
        given = [1 << x for x in _split_log(logn, launches)]
    sizes = given
    L = p.get("tcols", 0) or (1 if p.get("cluster") else auto_tcols(precision, level, launches=len(sizes), rmax=max(sizes)))
    out = dict(p)
    out["launches"] = len(sizes)
    for i in range(3):
        out[f"N{i + 1}"] = sizes[i] if i < len(sizes) else 0
        if i >= len(sizes):
            out[f"n{i + 1}"] = 0
            out[f"bs{i + 1}"] = 0
            continue
        R = sizes[i]
        n = p.get(f"n{i + 1}", 0) or auto_n(R, precision, level, single=len(sizes) == 1, tcols=L)
        out[f"n{i + 1}"] = n
        bs = p.get(f"bs{i + 1}", 0) or auto_bs(precision, R, min(n, R), strided=len(sizes) > 1, L=L, single=len(sizes) == 1, level=level)
        if len(sizes) > 1 and not p.get(f"bs{i + 1}", 0):
            # consecutive columns of one block must share (b, m): bs <= S (later launches) or M' (first)
            S = math.prod(sizes[:i])
            limit = S if i > 0 else N // R
            bs = min(bs, limit)
            bs = max(bs, min(L, limit))
        out[f"bs{i + 1}"] = bs
    out["tcols"] = L
    if p.get("cluster"):
        # the fused last launch has no kernel: its DFT is one codelet of its radix per position; in two-launch plans
        # launch 1 takes one column per block
        nl = out["launches"]
        if nl in (2, 3):
            out[f"n{nl}"] = out[f"N{nl}"]
            out[f"bs{nl}"] = 1
            if nl == 2 and not p.get("bs1", 0):
                out["bs1"] = 1
    return out


def make_plan(precision: str, level: str, params: Mapping[str, Any]) -> Plan:
    """The plan of a fixed-size variant (parameters already resolved)."""
    logn = params["logn"]
    N = 1 << logn
    lps = []
    S = 1
    nl = params["launches"]
    cl = bool(params.get("cluster", 0)) and nl in (2, 3)
    for i in range(nl):
        R = params[f"N{i + 1}"]
        lp = LaunchPlan(i, N, R, min(params[f"n{i + 1}"], R), params[f"bs{i + 1}"], min(params["tcols"], params[f"bs{i + 1}"]), S, ESIZE[precision], level,
                        minb=params.get("minb", 0), cluster=params[f"N{nl}"] if cl and i == nl - 2 else 0, fused=cl and i == nl - 1,
                        cl_scatter=cl and i == nl - 2 and params.get("cluster") == 2, tbenc=params.get("tbenc", 0),
                        prefetch=params.get("prefetch", 0) == 2, design=params.get("tbseq", 0))
        lp = LaunchPlan(**{**lp.__dict__, "xw": auto_xw(lp)})
        lps.append(lp)
        S *= R
    # (a cluster plan of another launch count keeps the flag, for plan_reasons to reject)
    return Plan(precision, logn, tuple(lps), level, cluster=params[f"N{nl}"] if params.get("cluster") else 0, hooksplit=int(params.get("hooksplit", 0)))


def plan_reasons(plan: Plan, level: str) -> list[str]:
    """Why a plan cannot be built (empty when it can)."""
    r: list[str] = []
    N = plan.N
    if math.prod(plan.sizes) != N:
        return [f"launch sizes {'x'.join(map(str, plan.sizes))} multiply to {math.prod(plan.sizes)}, not n = {N}"]
    if plan.cluster:
        r.extend(cluster_reasons(plan, level))
    for lp in plan.launches:
        tag = f"launch {lp.index + 1} (N{lp.index + 1}={lp.R})"
        if lp.fused:
            continue
        if lp.R < 2:
            r.append(f"{tag}: a launch size must be at least 2")
            continue
        if lp.n not in CODELET_RADICES:
            r.append(f"{tag}: n{lp.index + 1}={lp.n} is not one of {', '.join(map(str, CODELET_RADICES))}")
            continue
        if lp.bs < 1 or not is_pow2(lp.bs):
            r.append(f"{tag}: bs{lp.index + 1}={lp.bs} is not a power of two")
            continue
        if len(plan.launches) > 1:
            limit = lp.S if lp.index > 0 else lp.Mp
            what = "the stride of the earlier launches" if lp.index > 0 else f"n/N1 = {lp.Mp} columns per signal"
            if lp.bs > limit:
                r.append(f"{tag}: bs{lp.index + 1}={lp.bs} exceeds {what} ({limit}); consecutive columns must share a signal")
        if (level == "two-sided-thread" or (level == "two-sided-tb" and lp.seq)) and lp.L < 2:
            r.append(f"{tag}: {level} needs at least 2 columns per thread (tcols >= 2 and bs{lp.index + 1} >= 2), got {lp.L}")
        if lp.bs % lp.L:
            r.append(f"{tag}: bs{lp.index + 1}={lp.bs} is not a multiple of tcols={lp.L}")
        if lp.threads > MAX_THREADS:
            r.append(f"{tag}: {lp.threads} threads per block (bs/tcols * N/n) exceed {MAX_THREADS}; raise n{lp.index + 1} or tcols, or lower bs{lp.index + 1}")
        if lp.smem_bytes > SMEM_LIMIT:
            r.append(f"{tag}: needs {lp.smem_bytes} bytes of shared memory (more than {SMEM_LIMIT})")
        if lp.minb and lp.minb * lp.threads > MAX_SM_THREADS:
            r.append(f"{tag}: minb={lp.minb} blocks of {lp.threads} threads exceed the {MAX_SM_THREADS} threads an SM holds")
        elif lp.minb and lp.minb * lp.smem_bytes > SMEM_SM:
            r.append(f"{tag}: minb={lp.minb} blocks of {lp.smem_bytes} bytes of shared memory exceed the {SMEM_SM} bytes of an SM")
        regs = lp.regs_estimate()
        if regs > MAX_REGS:
            r.append(f"{tag}: needs about {regs} registers per thread (more than {MAX_REGS}); lower n{lp.index + 1} or tcols")
    return r


def cluster_reasons(plan: Plan, level: str) -> list[str]:
    """Why a cluster plan (`cluster: 1` or `2`) cannot be built (empty when it can)."""
    r: list[str] = []
    if level not in ("none", "two-sided-tb"):
        r.append(f"cluster plans are for unprotected plans and the two-sided-tb, not {level}")
    elif level == "two-sided-tb" and plan.launches[0].tbseq:
        r.append(f"two-sided-tb cluster plans need the simultaneous design (log n > {TB_SEQ_MAX_LOGN}, or tbseq: 1), got log n = {plan.logn}")
    nl = len(plan.launches)
    if nl not in (2, 3):
        return r + [f"cluster plans need two or three launches (the last one inside the one before), got {nl}"]
    first, second = plan.launches[-2], plan.launches[-1]
    a, b = f"N{nl - 1}", f"N{nl}"
    if second.R not in CLUSTER_SIZES:
        r.append(f"cluster plans need {b} in {', '.join(map(str, CLUSTER_SIZES))} (the blocks of a cluster), got {b}={second.R}")
    if nl == 2 and (first.bs < 1 or 2 * first.bs > second.R):
        r.append(f"two-launch cluster plans take at most half of a signal's N2 columns per block (bs1 <= N2 / 2: two blocks a "
                 f"cluster at least), got bs1={first.bs}, N2={second.R}")
    if first.cl_scatter and level != "none":
        r.append(f"cluster: 2 (scattered loads) is for unprotected plans, not {level}")
    if (first.cluster_tb and first.L == 1 and second.R in CLUSTER_SIZES and (nl == 3 or 2 * first.bs <= second.R)
            and first.fused_vectors % first.threads):
        r.append(f"two-sided-tb cluster plans give every thread the same number of the last launch's DFTs: {first.fused_vectors} "
                 f"vectors do not divide among {first.threads} threads (raise n{nl - 1} or lower bs{nl - 1})")
    if first.cl_scatter and first.bs != 1:
        r.append(f"cluster: 2 (scattered loads) takes one column per block (bs1 = 1), got bs1={first.bs}")
    if nl == 3 and first.cl_scatter:
        r.append("cluster: 2 (scattered loads) is for two-launch plans")
    if first.L != 1 and level == "none":
        r.append(f"unprotected cluster plans take one column per thread (tcols = 1), got {first.L}")
    if first.R // max(second.R, 1) < 2:
        r.append(f"cluster plans need {a} >= 2 {b}, got {a}={first.R}, {b}={second.R}")
    return r


# --------------------------------------------------------------------------------------------
# Tolerances and thresholds (the bench executables and the CPU model use the same formulas)
# --------------------------------------------------------------------------------------------


def tolerance(precision: str, logn: int) -> float:
    """Bound on the worst per-signal normwise error against cuFFT (both sides' rounding)."""
    return TOL_C * UNIT_ROUNDOFF[precision] * math.sqrt(logn + 1)


def elem_tolerance(precision: str, logn: int, total: int) -> float:
    """Bound on max |y - y_ref| / rms(y_ref) over all elements (clean runs)."""
    return TOL_ELEM_C * UNIT_ROUNDOFF[precision] * math.sqrt(logn + 1) * math.sqrt(2 * math.log(max(total, 2)) + 1)


# --------------------------------------------------------------------------------------------
# NumPy CPU model: the same launches, sub-passes, codelet layers, twiddles and checks as the
# kernels, vectorised over columns. Used by the tests and to calibrate the constants above.
# --------------------------------------------------------------------------------------------


def fft_reference(x: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Unnormalised DFT along the last axis in float64 (cuFFT's convention: the inverse is not
    scaled by 1/n)."""
    x = np.asarray(x, dtype=np.complex128)
    return np.fft.ifft(x, axis=-1) * x.shape[-1] if inverse else np.fft.fft(x, axis=-1)


def _sign(direction: str) -> int:
    return -1 if direction == "forward" else 1


def _cdt(precision: str):
    return np.complex64 if precision == "fp32" else np.complex128


def _rdt(precision: str):
    return np.float32 if precision == "fp32" else np.float64


def exact_twiddle(idx, M: int, sign: int) -> np.ndarray:
    """exp(sign 2 pi i idx / M) in float64, with the angle reduced exactly."""
    idx = np.asarray(idx, dtype=np.int64) % M
    ang = 2.0 * idx.astype(np.float64) / M  # exact: M is a power of two
    return np.cos(np.pi * ang) + 1j * sign * np.sin(np.pi * ang)


def fresh_twiddle_f32(idx, M: int, sign: int) -> np.ndarray:
    """The kernels' fp32 sincospif twiddle: exact argument, result rounded to float. Angles whose
    index does not fit a float mantissa are split into two exact products."""
    idx = np.asarray(idx, dtype=np.int64) % M
    if M <= (1 << 24):
        return exact_twiddle(idx, M, sign).astype(np.complex64)
    hi = (idx >> 12) << 12
    lo = idx & 4095
    return (exact_twiddle(hi, M, sign).astype(np.complex64) * exact_twiddle(lo, M, sign).astype(np.complex64)).astype(np.complex64)


def powers_f32(base_idx, M: int, count: int, sign: int) -> np.ndarray:
    """w^k, k < count, for w = exp(sign 2 pi i base_idx / M) as the fp32 kernels compute it: a fresh
    sincospi every TWIDDLE_FRESH powers, times w^(k mod F) from the recurrence."""
    a = np.asarray(base_idx, dtype=np.int64)
    F = TWIDDLE_FRESH
    one = np.ones(a.shape, dtype=np.complex64)
    w1 = fresh_twiddle_f32(a, M, sign)
    small = [one, w1]
    for _ in range(2, F):
        small.append((small[-1] * w1).astype(np.complex64))
    out = []
    for k in range(count):
        if k < F:
            out.append(small[k])
            continue
        f = fresh_twiddle_f32(a * (k - k % F), M, sign)
        out.append((f * small[k % F]).astype(np.complex64) if k % F else f)
    return np.stack(out, -1)


def table_twiddle_f64(idx, M: int, sign: int) -> np.ndarray:
    """fp64 outer twiddle from two tables (hi/lo split of the index), one complex product."""
    idx = np.asarray(idx, dtype=np.int64) % M
    h = (ilog2(M) + 1) // 2
    hi = exact_twiddle((idx >> h) << h, M, sign)
    lo = exact_twiddle(idx & ((1 << h) - 1), M, sign)
    return hi * lo


def bit_products(first: np.ndarray, factor, count: int) -> np.ndarray:
    """out[..., i] = first * prod over the set bits b of i (lowest first) of factor(b), i < count: the
    fp64 kernels' twiddle powers from log2(count) table reads (at most log2(count) products)."""
    out = [first]
    b = 1
    while b < count:
        f = factor(b)
        out += [out[i - b] * f for i in range(b, min(2 * b, count))]
        b *= 2
    return np.stack(out, -1)


def _base_dft(x: np.ndarray, r: int, sign: int) -> np.ndarray:
    """Radix-2/4 butterflies on the last axis (additions only; +-i is a swap)."""
    if r == 2:
        return np.stack([x[..., 0] + x[..., 1], x[..., 0] - x[..., 1]], -1)
    a0, a1, a2, a3 = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    s02, d02, s13, d13 = a0 + a2, a0 - a2, a1 + a3, a1 - a3
    jd = (1j * sign) * d13
    return np.stack([s02 + s13, d02 + jd, s02 - s13, d02 - jd], -1)


def _stockham(x: np.ndarray, S: int, r: int, Mp: int, kernel, tw: np.ndarray | None) -> np.ndarray:
    """One generalised Stockham pass on the last axis: in[s + S(m + M'i)] -> out[s + S(k + r m)],
    output k of DFT (s, m) multiplied by tw[m, k] (when given)."""
    sh = x.shape[:-1]
    X = np.moveaxis(x.reshape(sh + (r, Mp, S)), -3, -1)  # (..., m, s, i)
    Y = kernel(X)  # (..., m, s, k)
    if tw is not None:
        Y = Y * tw[:, None, :]
    return np.moveaxis(Y, -1, -2).reshape(sh + (S * r * Mp,))


def codelet(x: np.ndarray, r: int, sign: int) -> np.ndarray:
    """The in-register DFT-r of the kernels (layers of radix 2/4, constant twiddles rounded to
    the working precision) on the last axis."""
    lay = codelet_layers(r)
    if len(lay) <= 1:
        return x if r == 1 else _base_dft(x, r, sign)
    y = x
    S = 1
    for rr in lay:
        Mp = r // (S * rr)
        tw = None
        if Mp > 1:
            m = np.arange(Mp)[:, None]
            k = np.arange(rr)[None, :]
            tw = exact_twiddle(m * k, rr * Mp, sign).astype(x.dtype)
        y = _stockham(y, S, rr, Mp, lambda X, rr=rr: _base_dft(X, rr, sign), tw)
        S *= rr
    return y


def subpass_twiddles(precision: str, R: int, S: int, r: int, sign: int) -> np.ndarray | None:
    """Twiddles w_R^{S m k} (m < M', k < r) of a sub-pass, as the kernels compute them."""
    Mp = R // (S * r)
    if Mp == 1:
        return None
    m = np.arange(Mp)
    if precision == "fp32":
        return powers_f32(S * m, R, r, sign)
    return bit_products(np.ones(Mp, dtype=np.complex128), lambda b: exact_twiddle(S * m * b, R, sign), r)


def launch_twiddles(precision: str, lp: LaunchPlan, sign: int) -> np.ndarray | None:
    """Outer twiddles w_{R M'}^{m k} (m < M', k < R) of a launch, as the kernels compute them:
    k = t + T i; fp32: w^{m t} * (w^{m T})^i with the recurrence; fp64: w^{m t} times w^{m T b} for the
    bits b of i, each from the two-table look-up."""
    Mp = lp.Mp
    if Mp == 1:
        return None
    M = lp.R * Mp
    m = np.arange(Mp)[:, None]
    k = np.arange(lp.R)[None, :]
    T = lp.T
    t = k % T
    i = k // T
    if precision == "fp64":
        tw = bit_products(table_twiddle_f64(m * np.arange(T)[None, :], M, sign), lambda b: table_twiddle_f64(m * T * b, M, sign), lp.n)
        return tw[:, t[0], i[0]]  # (Mp, T, n) -> (Mp, R)
    base = fresh_twiddle_f32(m * t, M, sign)  # (Mp, R)
    pw = powers_f32(m[:, 0] * T, M, lp.n, sign)  # (Mp, n)
    return (base * np.take_along_axis(pw, np.broadcast_to(i, (Mp, lp.R)), axis=1)).astype(np.complex64)


def thue_morse(R: int) -> np.ndarray:
    """(-1)^popcount(k), k < R: the second encoding of two-sided-tb is e o thue_morse(R)."""
    k = np.arange(R)
    bits = np.zeros(R, dtype=np.int64)
    for b in range(max(1, R.bit_length())):
        bits += (k >> b) & 1
    return np.where(bits % 2 == 0, 1.0, -1.0)


def encoding_vectors(R: int, sign: int, thue_morse_sign: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Left-side checksum encoding: e (unit-modulus random phases from splitmix64, the same
    sequence the kernels' tables hold; times (-1)^popcount(k) for the second encoding of
    two-sided-tb) and v = W^T e (computed in float64)."""
    k = np.arange(R, dtype=np.uint64)
    z = (k + np.uint64(0x5EED0000) + np.uint64(R)) * np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    phase = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    e = np.cos(2 * np.pi * phase) + 1j * np.sin(2 * np.pi * phase)
    if thue_morse_sign:
        e = e * thue_morse(R)
    v = fft_reference(e, inverse=(sign > 0))  # W is symmetric: W^T e = W e
    return e, v


def fused_coefficients(C: int, sign: int) -> np.ndarray:
    """a_c = sum_k (k + 1) w^(c k), w = e^(sign 2 pi i / C): ((k + 1)_k)^T F z = a^T z (protected cluster plans' fused
    C-point DFTs; the kernels' p2_coef)."""
    k = np.arange(C)
    return (np.exp(sign * 2j * np.pi * np.outer(k, k) / C) * (k + 1)[None, :]).sum(axis=1)


def fused_bound(C: int) -> float:
    """The fused DFTs' threshold per unit roundoff and ||z|| at K = 1: 2 C (log2 C + 1) (worst-case rounding of a C-point
    DFT and of the two output sums; the kernels' P2_BOUND)."""
    return 2.0 * C * (ilog2(C) + 1)


@dataclass
class ModelFault:
    """A fault in the model: launch, stage (0 = input after the checksums, p = output of
    sub-pass p, P = launch output after the twiddle), global column (batch included), position
    in the column at that stage, and what happens to the value there."""

    launch: int
    stage: int
    column: int
    position: int
    kind: str = "bitflip"  # bitflip | offset
    bit: int = 30  # bit of the real (bit < bits) or imaginary part
    offset: complex = 0.0


def flip_bit(value: complex, bit: int, precision: str) -> complex:
    bits = 32 if precision == "fp32" else 64
    part, b = divmod(bit % (2 * bits), bits)
    ft = np.float32 if precision == "fp32" else np.float64
    it = np.uint32 if precision == "fp32" else np.uint64
    comp = np.array([value.real if part == 0 else value.imag], dtype=ft)
    comp.view(it)[0] ^= it(1) << it(b)
    return complex(comp[0], value.imag) if part == 0 else complex(value.real, comp[0])


@dataclass
class ModelReport:
    detected: int = 0
    corrected: int = 0
    recomputed: int = 0
    uncorrectable: int = 0
    false_alarms: int = 0
    located: list = field(default_factory=list)  # (launch, column) corrections applied
    max_score: float = 0.0
    escalated: int = 0  # two-sided-tb groups the prefilter sent to the exact (vector) check, first attempts


class FftModel:
    """NumPy model of one fixed-size variant: ``run(x, faults)`` transforms a batch (rows of x)
    through the same launches, tiles (``bs`` columns), groups (``tcols`` columns), sub-passes,
    codelets, twiddles, checks, locations and corrections as the kernels."""

    def __init__(self, precision: str, level: str, params: Mapping[str, Any], direction: str = "forward", k: float | None = None):
        self.precision = precision
        self.level = level
        self.params = resolve_params(precision, level, params)
        self.plan = make_plan(precision, level, self.params)
        self.sign = _sign(direction)
        self.cdt = _cdt(precision)
        self.rdt = _rdt(precision)
        self.u = UNIT_ROUNDOFF[precision]
        self.k = k  # detection multiplier override (None: the level's default)
        self._enc: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray]] = {}

    def enc(self, R: int, second: bool = False) -> tuple[np.ndarray, np.ndarray]:
        if (R, second) not in self._enc:
            e, v = encoding_vectors(R, self.sign, second)
            self._enc[(R, second)] = (e.astype(self.cdt), v.astype(self.cdt))
        return self._enc[(R, second)]

    def _faulted(self, value: complex, f: ModelFault) -> complex:
        """The value after fault f (a bit flip of its real or imaginary part, or an offset added)."""
        return flip_bit(value, f.bit, self.precision) if f.kind == "bitflip" else value + f.offset

    def kmult(self, default: float) -> float:
        return default if self.k is None else self.k

    # ---- the transform ---------------------------------------------------------------------
    def run(self, x: np.ndarray, faults: list[ModelFault] | None = None, correct: bool = True) -> tuple[np.ndarray, ModelReport]:
        faults = list(faults or [])
        rep = ModelReport()
        cur = np.asarray(x).astype(self.cdt)
        assert cur.ndim == 2 and cur.shape[1] == self.plan.N, f"the model is planned for n={self.plan.N}"
        for lp in self.plan.launches:
            if lp.fused and self.plan.launches[lp.index - 1].cluster_tb:
                cur = self._fused_checked(cur, lp, faults, correct, rep)
            else:
                cur = self._launch(cur, lp, faults, correct, rep)
        return cur, rep

    def _fused_checked(self, x: np.ndarray, lp: LaunchPlan, faults, correct: bool, rep: ModelReport) -> np.ndarray:
        """The last launch of a protected cluster plan: every C-point DFT y = F z checked on its own (the kernels'
        checked_dft): r1 = e^T y - C z_0, r2 = ((k+1)_k)^T y - a^T z (fused_coefficients); an error in output k gives
        r2 / r1 = k + 1 and the output is replaced by C z_0 minus the others, any other detection recomputes the DFT from its (intact) inputs. Faults:
        stage 0 an input after the encodings, stage 1 an output (column = the launch's global column)."""
        B, N = x.shape
        C, S, cps, cdt = lp.R, lp.S, lp.cols_per_signal, self.cdt
        X = x.reshape(B, C, cps).transpose(0, 2, 1).reshape(B * cps, C).astype(cdt)
        a = fused_coefficients(C, self.sign).astype(cdt)
        s0 = (X[:, 0] * cdt(C)).astype(cdt)
        sa = (X * a[None, :]).sum(axis=1).astype(cdt)
        nz = np.sum(np.abs(X.astype(np.complex128)) ** 2, axis=1)
        hit: set = set()

        def hook(stage: int, Z: np.ndarray) -> None:
            for f in faults:
                if f.launch == lp.index and f.stage == stage and 0 <= f.column < Z.shape[0]:
                    val = complex(Z[f.column, f.position])
                    Z[f.column, f.position] = self._faulted(val, f)
                    hit.add(f.column)

        Z = X.copy()
        hook(0, Z)
        Y = codelet(Z, C, self.sign).astype(cdt)
        hook(1, Y)
        w = np.arange(1, C + 1).astype(self.rdt)
        tau = self.kmult(K_TB) * fused_bound(C) * self.u * np.sqrt(nz)

        def resid(Yv, sel=slice(None)):
            r1 = (Yv.sum(axis=-1) - s0[sel]).astype(np.complex128)
            r2 = ((Yv * w).sum(axis=-1) - sa[sel]).astype(np.complex128)
            return r1, r2, np.maximum(np.abs(r1) ** 2, np.abs(r2) ** 2 / C**2)

        r1, r2, dv = resid(Y)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            score = np.sqrt(dv) / np.maximum(tau, 1e-300)
            det = np.nonzero(~(dv <= tau**2))[0]
        rep.max_score = max(rep.max_score, _score_max(score))
        for c in det:
            rep.detected += 1
            rep.false_alarms += int(c not in hit)
            if not correct:
                continue
            ok = False
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                q = r2[c] / r1[c]
            if np.isfinite(q) and 0.5 < q.real < C + 0.5:
                j = int(np.floor(q.real + 0.5)) - 1
                if (q.real - (j + 1)) ** 2 + q.imag**2 < LOCATE_TOL**2:
                    # the replacement s0 - sum of the other outputs (no cancellation against a huge faulty value)
                    y = Y[c].copy()
                    y[j] = s0[c] - np.delete(y, j).sum(dtype=cdt)
                    if resid(y, c)[2] <= tau[c] ** 2:
                        Y[c] = y
                        ok = True
                        rep.located.append((lp.index, int(c)))
            if not ok:
                rep.recomputed += 1
                Y[c] = codelet(X[c:c + 1], C, self.sign).astype(cdt)[0]
                ok = bool(resid(Y[c], c)[2] <= tau[c] ** 2)
            rep.corrected += int(ok)
            rep.uncorrectable += int(not ok)
        return Y.reshape(B, 1, S, C).transpose(0, 1, 3, 2).reshape(B, N)

    def _launch(self, x: np.ndarray, lp: LaunchPlan, faults, correct: bool, rep: ModelReport) -> np.ndarray:
        B, N = x.shape
        R, S, Mp, cps = lp.R, lp.S, lp.Mp, lp.cols_per_signal
        # column c = s + S m of signal b holds in[b N + c + cps i]
        X = x.reshape(B, R, cps).transpose(0, 2, 1).reshape(B * cps, R)
        d = launch_twiddles(self.precision, lp, self.sign)
        D = None
        if d is not None:
            D = d[(np.arange(B * cps) % cps) // S].astype(self.cdt)
        Y = np.empty_like(X)
        for c0 in range(0, X.shape[0], lp.bs):  # threadblocks; a short last tile has fewer columns
            c1 = min(c0 + lp.bs, X.shape[0])
            Y[c0:c1] = self._tile(X[c0:c1], None if D is None else D[c0:c1], lp, faults, correct, rep, c0)
        # out[b N + s + S (k + R m)]
        return Y.reshape(B, Mp, S, R).transpose(0, 1, 3, 2).reshape(B, N)

    def _tile(self, X0: np.ndarray, D, lp: LaunchPlan, faults, correct: bool, rep: ModelReport, col0: int) -> np.ndarray:
        Y, bad, ndet = self._tile_once(X0, D, lp, faults, correct, rep, col0, hooks=True)
        if bad and correct:
            # the seed's baseline recovery (and the fallback of an ambiguous location): recompute
            # the tile from its input, faults do not repeat (single-event upset)
            rep.recomputed += 1
            Y2, bad2, _ = self._tile_once(X0, D, lp, [], correct, rep, col0, hooks=False)
            if bad2:
                rep.uncorrectable += ndet
            else:
                rep.corrected += ndet
            return Y2
        return Y  # (correction off: the campaign's "uncorrected" run keeps the faulty output)

    def _tile_once(self, X0, D, lp: LaunchPlan, faults, correct: bool, rep: ModelReport, col0: int, hooks: bool):
        """One attempt at a tile. Returns (outputs, needs-recompute, detections to settle)."""
        level, u, cdt = self.level, self.u, self.cdt
        C, R = X0.shape
        L = lp.L
        if lp.seq:
            # group g owns tile columns g, g + G, g + 2G, ... (the kernels' sequential steps)
            G = lp.G
            groups = [[c for c in range(g, C, G)] for g in range(min(G, C))]
        else:
            groups = [list(range(a, min(a + L, C))) for a in range(0, C, L)]
        active: set = set()

        def hook(stage: int, Y: np.ndarray) -> None:
            if not hooks:
                return
            for fi, f in enumerate(faults):
                if fi in active or f.launch != lp.index or f.stage != stage:
                    continue
                c = f.column - col0
                if 0 <= c < C:
                    val = complex(Y[c, f.position])
                    Y[c, f.position] = self._faulted(val, f)
                    active.add(c)

        X = X0.copy()
        nrm = np.sum(np.abs(X.astype(np.complex128)) ** 2, axis=1)
        if level in ("one-sided", "two-sided-tb"):
            e, v = self.enc(R)
            in_part = (X * v[None, :]).sum(axis=1)
        if level == "two-sided-tb":
            # the checksum columns sum_l x_l: the kernels transform them only when a check fires (same
            # sub-passes, no launch twiddle); here they ride along
            SX = np.stack([X[idx].sum(axis=0) for idx in groups]).astype(cdt)
            X = np.concatenate([X, SX], axis=0)
        tstate = {"bad": False, "det": 0}
        chk_in = self._thread_sums(X, lp, groups, 0) if level == "two-sided-thread" else None
        hook(0, X)
        S = 1
        rad = lp.radices
        for p, r in enumerate(rad):
            Mp = R // (S * r)
            tw = subpass_twiddles(self.precision, R, S, r, self.sign)
            Y = _stockham(X, S, r, Mp, lambda A, r=r: codelet(A, r, self.sign), tw)
            last = p == len(rad) - 1
            if last and D is not None:
                Y[:C] = (Y[:C] * D).astype(cdt)
            hook(p + 1, Y)
            if level == "two-sided-thread":
                self._thread_check(Y, chk_in, lp, groups, S, r, Mp, tw, D if last else None, correct, rep, tstate, col0, active if hooks else set())
            X = Y
            S *= r
            if level == "two-sided-thread" and not last:
                chk_in = self._thread_sums(X, lp, groups, p + 1)
        Y = X[:C]
        ndet = tstate["det"]
        bad = tstate["bad"]
        if level in ("one-sided", "two-sided-tb"):
            e, v = self.enc(R)
            U = (Y * np.conj(D)).astype(cdt) if D is not None else Y
            s = (U * e[None, :]).sum(axis=1) - in_part
        if level == "two-sided-tb":
            # the second encoding e o (-1)^popcount(k) (the kernels: a sign on the output side, W^T e2 from the table)
            e2, v2 = self.enc(R, True)
            s2 = (U * e2[None, :]).sum(axis=1) - (X0 * v2[None, :]).sum(axis=1)
        if level == "one-sided":
            tau = self.kmult(K_1S) * u * math.sqrt(ilog2(R) + 1) * np.sqrt(R * nrm)
            with np.errstate(invalid="ignore", over="ignore"):
                score = np.abs(s) / np.maximum(tau, 1e-300)
                detm = ~(score <= 1.0)  # NaN-safe: a non-finite residual is a detection
            rep.max_score = max(rep.max_score, _score_max(score))
            det = int(detm.sum())
            if det and hooks:
                rep.detected += det
                ndet += det
                rep.false_alarms += int(sum(1 for c in np.nonzero(detm)[0] if c not in active))
            bad = bad or det > 0
        elif level == "two-sided-tb":
            WSX = X[C:]
            # tb_stage: the prefilter's sums are the block's (its threads encode the staged copies, not their own columns)
            pre = self._tb_prefilter(s, s2, nrm, R) if lp.tb_stage else None
            if pre is not None:
                rep.escalated += int(hooks and not (pre <= 1.0))
            for gi, idx in enumerate(groups):
                res = self._tb_group(U[idx], WSX[gi], s[idx], s2[idx], nrm[idx], SX[gi], in_part[idx], D[idx] if D is not None else None, R, e, correct,
                                     prefilter=not lp.seq, pre=pre)
                rep.max_score = max(rep.max_score, res["score"])
                rep.escalated += int(hooks and res["escalated"] and pre is None)
                if not res["detected"]:
                    continue
                if hooks:
                    rep.detected += 1
                    if not any(c in active for c in idx):
                        rep.false_alarms += 1
                if res["j"] is None:
                    bad = True
                    ndet += 1
                elif correct:
                    Y[idx[res["j"]]] = res["fixed"]
                    rep.corrected += 1
                    rep.located.append((lp.index, col0 + idx[res["j"]]))
        return Y, bad, ndet

    def _tb_prefilter(self, s, s2, nrm, R) -> float:
        """The simultaneous two-sided-tb's prefilter score over the columns given: max(|sum s|, |sum s2|) (the two
        encodings' two-sided checksums) over TB_PRE times the threshold of their norms; inf for a non-finite one."""
        with np.errstate(invalid="ignore", over="ignore"):
            r1, r2 = np.abs(np.complex128(s.sum())), np.abs(np.complex128(s2.sum()))
            dp = float(max(r1, r2)) if np.isfinite(r1) and np.isfinite(r2) else math.inf
            tau_pre = self.kmult(K_TB) * TB_PRE * self.u * math.sqrt(ilog2(R) + 1) * math.sqrt(R * float(nrm.sum()))
            return dp / max(tau_pre, 1e-300)

    def _tb_group(self, U, w, s, s2, nrm, SX, in_part, D, R, e, correct, prefilter: bool = True, pre: float | None = None) -> dict:
        """Two-sided-tb decision for one group: (simultaneous design) prefilter on the two-sided checksums
        |e^T sum u - (W^T e)^T sum x| (= the sum of the columns' left residuals s_l) and the same with
        e2 = e o (-1)^popcount(k) (s2) against TB_PRE times the threshold; above it, the residual vector
        ||sum u - W sum x|| decides (the kernels' rare path); locate by the non-finite mask or the
        quotient of the weighted left checksums, correct by replacement
        y_j = d_j (W sum x - sum_{l != j} u_l), verify with column j's left checksum."""
        u = self.u
        Lg = U.shape[0]
        k = self.kmult(K_TB)
        with np.errstate(invalid="ignore", over="ignore"):
            nsum = float(nrm.sum())
            if pre is None:
                pre = self._tb_prefilter(s, s2, nrm, R)
            # the decision score min(prefilter, vector) (the kernels know the vector part only where the prefilter
            # fired, and report the prefilter's score, an upper bound, elsewhere)
            delta = U.sum(axis=0) - w
            dv = float(np.sum(np.abs(delta.astype(np.complex128)) ** 2))
            nx = nsum + float(np.sum(np.abs(SX.astype(np.complex128)) ** 2))
            tau = k * u * math.sqrt(ilog2(R) + 1) * math.sqrt(R * nx)
            sv = math.sqrt(dv) / max(tau, 1e-300) if math.isfinite(dv) else math.inf
            score = (min(pre, sv) if math.isfinite(pre) else sv) if prefilter else sv
        out = {"score": math.inf if math.isnan(score) else score, "detected": not (score <= 1.0), "j": None, "fixed": None,
               "escalated": prefilter and not (pre <= 1.0)}
        if not out["detected"]:
            return out
        nonfinite = [not np.all(np.isfinite(U[l])) for l in range(Lg)]
        j = None
        if sum(nonfinite) == 1:
            j = nonfinite.index(True)
        elif not any(nonfinite):
            wts = np.arange(1, Lg + 1)
            with np.errstate(invalid="ignore", over="ignore"):
                r1, r2 = complex(s.sum()), complex((wts * s).sum())
                q = r2 / r1 if r1 != 0 else complex("nan")
            if math.isfinite(q.real) and math.isfinite(q.imag):
                jj = int(round(q.real)) - 1
                if 0 <= jj < Lg and abs(q - (jj + 1)) < LOCATE_TOL:
                    j = jj
        if j is None:
            return out
        others = np.zeros_like(w)
        for l in range(Lg):
            if l != j:
                others = (others + U[l]).astype(self.cdt)
        fixed_u = (w - others).astype(self.cdt)
        # verify: the corrected column's left checksum against its input checksum
        with np.errstate(invalid="ignore", over="ignore"):
            sj = complex((fixed_u * e).sum() - in_part[j])
            tau1 = self.kmult(K_1S) * u * math.sqrt(ilog2(R) + 1) * math.sqrt(R * nsum)
        if not (abs(sj) <= tau1):
            return out
        out["j"] = j
        out["fixed"] = (fixed_u * D[j]).astype(self.cdt) if D is not None else fixed_u
        return out

    # ---- two-sided-thread ------------------------------------------------------------------
    def _thread_sums(self, X: np.ndarray, lp: LaunchPlan, groups, p: int):
        """Right-side checksums of the DFTs of sub-pass p over each group's columns: weights 1
        and l+1, plus sum ||a_l||^2 per DFT. Inputs of DFT q are X[:, q + (R/r) i]."""
        R = lp.R
        r = lp.radices[p]
        nq = R // r
        A = X.reshape(X.shape[0], r, nq)  # (col, i, q)
        out = []
        for idx in groups:
            w = np.arange(1, len(idx) + 1, dtype=np.float64)[:, None, None].astype(self.rdt)
            s1 = A[idx].sum(axis=0)
            s2 = (w * A[idx]).sum(axis=0)
            nn = np.sum(np.abs(A[idx].astype(np.complex128)) ** 2, axis=(0, 1))
            out.append((s1.astype(self.cdt), s2.astype(self.cdt), nn))
        return out

    def _thread_check(self, Y, chk_in, lp: LaunchPlan, groups, S, r, Mp, tw, D, correct, rep: ModelReport, tstate, col0: int = 0, active=()) -> None:
        """Per thread (DFT q of a group): residual vectors of the two checksums; detect, locate
        by their quotient, subtract the residual from the located column (in place in Y)."""
        u = self.u
        R = lp.R
        nq = R // r
        q = np.arange(nq)
        s_idx, m_idx = q % S, q // S
        pos = s_idx[:, None] + S * (np.arange(r)[None, :] + r * m_idx[:, None])  # (q, k)
        for gi, idx in enumerate(groups):
            a, b = 0, len(idx)
            s1, s2, nn = chk_in[gi]
            # transform the checksums exactly like the data (codelet + sub-pass twiddle)
            def xform(sv):
                Z = codelet(sv.T, r, self.sign)  # (q, k)
                if tw is not None:
                    Z = Z * tw[m_idx]
                return Z.astype(self.cdt)

            c1, c2 = xform(s1), xform(s2)
            B = Y[idx][:, pos]  # (l, q, k)
            if D is not None:
                Bu = (B * np.conj(D[idx][:, pos])).astype(self.cdt)
            else:
                Bu = B
            w = np.arange(1, b - a + 1, dtype=np.float64)[:, None, None].astype(self.rdt)
            r1 = Bu.sum(axis=0) - c1
            r2 = (w * Bu).sum(axis=0) - c2
            tau = self.kmult(K_TH) * u * (ilog2(r) + 1) * np.sqrt(nn)
            with np.errstate(invalid="ignore", over="ignore"):
                score = np.abs(r1).max(axis=1) / np.maximum(tau, 1e-300)
                detm = ~(score <= 1.0)
            rep.max_score = max(rep.max_score, _score_max(score))
            for qq in np.nonzero(detm)[0]:
                rep.detected += 1
                tstate["det"] += 1
                if not any(c in active for c in idx):
                    rep.false_alarms += 1
                Lg = b - a
                nonfinite = [not np.all(np.isfinite(Bu[l, qq])) for l in range(Lg)]
                j = None
                if sum(nonfinite) == 1:
                    j = nonfinite.index(True)
                elif not any(nonfinite):
                    rr1, rr2 = r1[qq].astype(np.complex128), r2[qq].astype(np.complex128)
                    with np.errstate(invalid="ignore", over="ignore"):
                        lam = np.vdot(rr1, rr2) / np.vdot(rr1, rr1)
                    if np.isfinite(lam):
                        jj = int(round(lam.real)) - 1
                        if 0 <= jj < Lg and abs(lam - (jj + 1)) < LOCATE_TOL:
                            j = jj
                if j is not None:
                    # replacement: b_j = W sum a - sum_{l != j} b_l; verify with the second checksum
                    others = np.zeros(r, dtype=self.cdt)
                    for l in range(Lg):
                        if l != j:
                            others = (others + Bu[l, qq]).astype(self.cdt)
                    fixed = (c1[qq] - others).astype(self.cdt)
                    w2 = np.arange(1, Lg + 1)
                    with np.errstate(invalid="ignore", over="ignore"):
                        chk = sum(w2[l] * (fixed if l == j else Bu[l, qq]) for l in range(Lg)) - c2[qq]
                        okv = bool(np.all(np.abs(chk) <= tau[qq] * Lg))
                    if not okv:
                        j = None
                if j is None:
                    tstate["bad"] = True
                    continue
                if correct:
                    val = fixed if D is None else (D[idx[j]][pos[qq]] * fixed).astype(self.cdt)
                    Y[idx[j], pos[qq]] = val
                    rep.corrected += 1
                    tstate["det"] -= 1
                    rep.located.append((lp.index, col0 + idx[j]))


def _score_max(a) -> float:
    """The largest score; a non-finite residual (NaN) is over every threshold: +inf, as the kernels record it."""
    a = np.nan_to_num(np.asarray(a, dtype=np.float64), nan=math.inf, posinf=math.inf)
    return float(a.max()) if a.size else 0.0


# --------------------------------------------------------------------------------------------
# Codelets: straight-line DFT-r with compile-time twiddles (the C++ is generated from the same
# layer structure as the model's `codelet`; templates/fft/ftgen_fft_core.h holds the output of
# `codelet_source()`, and a test keeps the two in sync).
# --------------------------------------------------------------------------------------------


def _c_literal(x: float) -> str:
    s = repr(float(x))
    return s if ("e" in s or "." in s) else s + ".0"


def codelet_source() -> str:
    """C++ for every codelet radix and both directions: ``dft<R, SIGN>(cplx<T>* z)`` in place."""
    lines = ["// ---- generated by ftgen.families.fft.codelet_source(); do not edit by hand ----"]
    for r in CODELET_RADICES:
        for sign in (-1, 1):
            lines += _codelet_fn(r, sign)
    lines.append("// ---- end of generated codelets ----")
    return "\n".join(lines) + "\n"


def _codelet_fn(r: int, sign: int) -> list[str]:
    out = [
        f"template <> struct Dft<{r}, {sign}> {{",
        "  template <class T>",
        "  static FT_HD FT_INLINE void run(cplx<T>* z) {",
    ]
    cur = [f"z[{i}]" for i in range(r)]
    S = 1
    for li, rr in enumerate(codelet_layers(r)):
        Mp = r // (S * rr)
        nxt = [None] * r
        out.append(f"    cplx<T> t{li}[{r}];")
        for m in range(Mp):
            for s in range(S):
                ins = [cur[s + S * (m + Mp * i)] for i in range(rr)]
                outs = [f"t{li}[{s + S * (k + rr * m)}]" for k in range(rr)]
                if rr == 2:
                    out.append(f"    {outs[0]} = cadd({ins[0]}, {ins[1]}); {outs[1]} = csub({ins[0]}, {ins[1]});")
                else:
                    jd = "cmul_pj" if sign > 0 else "cmul_mj"
                    out.append("    {")
                    out.append(f"      const cplx<T> s02 = cadd({ins[0]}, {ins[2]}), d02 = csub({ins[0]}, {ins[2]});")
                    out.append(f"      const cplx<T> s13 = cadd({ins[1]}, {ins[3]}), d13 = {jd}(csub({ins[1]}, {ins[3]}));")
                    out.append(f"      {outs[0]} = cadd(s02, s13); {outs[1]} = cadd(d02, d13); {outs[2]} = csub(s02, s13); {outs[3]} = csub(d02, d13);")
                    out.append("    }")
                if Mp > 1:
                    for k in range(1, rr):
                        if m == 0:
                            continue
                        ang = m * k / (rr * Mp)  # fraction of a turn
                        c = complex(math.cos(2 * math.pi * ang), sign * math.sin(2 * math.pi * ang))
                        # exact special values
                        frac = (m * k) / (rr * Mp)
                        tgt = outs[k]
                        if abs(frac * 4 - round(frac * 4)) < 1e-12:
                            q = int(round(frac * 4)) % 4
                            q = q if sign < 0 else (-q) % 4
                            # multiply by (-i)^q
                            fn = {0: None, 1: "cmul_mj", 2: "cneg", 3: "cmul_pj"}[q]
                            if fn:
                                out.append(f"    {tgt} = {fn}({tgt});")
                        else:
                            out.append(f"    {tgt} = cmul({tgt}, cplx<T>{{T({_c_literal(c.real)}), T({_c_literal(c.imag)})}});")
        cur = [f"t{li}[{i}]" for i in range(r)]
        S *= rr
    for i in range(r):
        out.append(f"    z[{i}] = {cur[i]};")
    out += ["  }", "};"]
    return out


# --------------------------------------------------------------------------------------------
# The family
# --------------------------------------------------------------------------------------------


def _pow2_or_zero(v: int) -> str | None:
    if v == 0 or is_pow2(v):
        return None
    return f"{v} is not a power of two (or 0 for automatic)"


def _range(lo: int, hi: int):
    def check(v: int) -> str | None:
        return None if lo <= v <= hi else f"{v} is outside {lo}..{hi}"

    return check


PLAN_KEYS = ("launches", "N1", "N2", "N3", "n1", "n2", "n3", "bs1", "bs2", "bs3", "minb", "cluster", "tbseq")

# Cluster plans (the module docstring; the kernels in ftgen_fft_core.h, cluster_phase0/1/2): the sizes of a fused last
# launch. cluster: 1 reads the columns from global memory; cluster: 2 (two launches, one column per block) reads
# contiguous parts and stores each element into its column's tile through distributed shared memory first.
CLUSTER_SIZES = (2, 4, 8)

PARAMS = (
    Param("direction", str, ("forward",), "transform direction (inverse is unnormalised, like cuFFT)", choices=DIRECTIONS),
    Param("logn", int, (0,), "log2 of the size the variant is built for; 0: every size 2^1..2^max with automatic plans", check=_range(0, 26)),
    Param("launches", int, (0,), "kernels per transform, 1..3 (0: automatic)", check=_range(0, 3)),
    Param("N1", int, (0,), "size of launch 1 (0: automatic)", check=_pow2_or_zero),
    Param("N2", int, (0,), "size of launch 2 (0: automatic / none)", check=_pow2_or_zero),
    Param("N3", int, (0,), "size of launch 3 (0: automatic / none)", check=_pow2_or_zero),
    Param("n1", int, (0,), "elements per thread (sub-pass radix) in launch 1 (0: automatic)", choices=(0,) + CODELET_RADICES),
    Param("n2", int, (0,), "elements per thread in launch 2 (0: automatic)", choices=(0,) + CODELET_RADICES),
    Param("n3", int, (0,), "elements per thread in launch 3 (0: automatic)", choices=(0,) + CODELET_RADICES),
    Param("bs1", int, (0,), "columns (signals) per threadblock in launch 1 (0: automatic)", check=_pow2_or_zero),
    Param("bs2", int, (0,), "columns per threadblock in launch 2 (0: automatic)", check=_pow2_or_zero),
    Param("bs3", int, (0,), "columns per threadblock in launch 3 (0: automatic)", check=_pow2_or_zero),
    Param("tcols", int, (0,), "columns each thread holds in registers, the two-sided batch (0: automatic)", check=_pow2_or_zero),
    Param("minb", int, (0,), "resident threadblocks per SM every launch is compiled for (__launch_bounds__ minimum: registers <= 65536 / (minb * threads); 0: automatic)", check=_range(0, 32)),
    Param("cluster", int, (0,), "the last launch (2, 4 or 8 points) inside the one before, whose blocks of the same columns form a thread-block cluster exchanging through distributed shared memory (sm_90; unprotected or two-sided-tb): 1 strided loads, 2 (unprotected two-launch plans) each block loads a contiguous part and scatters it to the blocks' tiles; 0: separate launches", choices=(0, 1, 2)),
    Param("tbenc", int, (0,), "two-sided-tb with the simultaneous design (multi-launch plans): 2 the input-side encodings in the staged load (a thread sums the adjacent columns it loads before the table read and the products) and, in launches without launch twiddles, the output side in the staged store, the prefilter deciding on the block's sums; 1 each thread encodes its own columns, the prefilter per column group; 0 automatic (TUNED_TBENC's value with the measured plans, else 1); 3 as 2 in the launches of at least TBENC3_MIN_T threads per column only", choices=(0, 1, 2, 3)),
    Param("tbseq", int, (0,), "two-sided-tb's design: 2 sequential (a thread's columns one after the other, the checksum column transformed in the common path; one-launch plans), 1 simultaneous (the unprotected kernel's data path with the checks in registers), 0 by size (sequential up to 2^TB_SEQ_MAX_LOGN)", choices=(0, 1, 2)),
    Param("prefetch", int, (0,), "the sequential levels' one-launch plans (one-sided; two-sided-tb up to 2^12) with more than one column step: 2 each step prefetches the next step's columns into L2 (one prefetch per 128-byte line), so their loads wait for L2 instead of DRAM; 1 none; 0 automatic (TUNED_PREFETCH's value with the measured plans, else 1)", choices=(0, 1, 2)),
    Param("hooksplit", int, (0,), "injection builds of a protected level: 1 only the threadblocks the fault plan gives a fault carry the fault hooks, the others run the code of the build without injection code (a caller that names the faulted block, ftgen_fft_problem::fault_block_hint, spares them the fault table's read); 2 the same with that block's hooked body a function call of its own (its registers apart from the code the other blocks run); 3 the faulted block (its cluster in cluster plans) in a kernel of its own on a second stream of the greatest priority beside the launch's kernel of the other blocks, which holds no hooked code (faults the caller does not name: the split kernel over every block); 0 (automatic: the measured plans of sm_90 set 1, 2 or 3 where each measured fastest, TUNED_HOOKSPLIT, TUNED_HOOKCALL, TUNED_HOOKKERNEL) every block carries them", choices=(0, 1, 2, 3)),
)

def c_symbol(name: str) -> str:
    """The C identifier of a kernel name (names may contain '-' from the protection token)."""
    return name.replace("-", "_")


# sizes the bench executables of every-size variants measure by default (total 2^26 / 2^25 elements)
AUTO_BENCH_LOGNS = (4, 10, 12, 16, 20, 24)


class FftFamily(Family):
    name = "fft"
    description = "batched C2C/Z2Z FFTs (cuFFT layout), 1-3 launches of Stockham passes, with TurboFFT's one-/two-sided ABFT (seed 002)"
    shape_keys = ("n", "batch")
    precisions = PRECISIONS
    schemes = {"none": (), "abft": ABFT_LEVELS}
    backends = (Backend(name="stockham", precisions=PRECISIONS, params=PARAMS, requires=("cufft",),
                        levels={"abft": {"two-sided-tb": "2sided-tb", "two-sided-thread": "2sided-thread", "one-sided": "1sided"}}),)
    default_shapes = ({"n": 4096, "batch": 16384}, {"n": 1048576, "batch": 64})
    campaign_shape = {"n": 4096, "batch": 64}  # small: many trials; batch a multiple of every tile
    reference_lib = "cufft"
    template_dir = "fft"

    # ---- parameters -----------------------------------------------------------------------
    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        return PARAMS

    def all_param_defs(self) -> dict[str, Param]:
        return {p.name: p for p in PARAMS}

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        reason = super().protection_ok(precision, protection)
        if reason:
            return reason
        if protection.enabled:
            if protection.interval != 1:
                return f"fft checks once per launch and column: protection.interval must be 1, not {protection.interval}"
            if protection.correct == "detect" and protection.level != "one-sided":
                return f"level {protection.level} corrects online; for detect-and-recompute use level one-sided"
        return None

    # ---- plans ------------------------------------------------------------------------------
    @staticmethod
    def clusters_ok(v: Variant) -> bool:
        """Thread-block clusters (cluster plans) need sm_90 or later in every architecture the variant is built for."""
        return all(a in CLUSTER_ARCHS for a in v.arch)

    @staticmethod
    def level_of(v: Variant) -> str:
        return v.protection.level if v.protection.enabled else "none"

    def resolved(self, v: Variant) -> dict:
        """Parameters with the automatic ones filled (fixed-size variants); raises ValueError."""
        p = v.param_dict
        if p["logn"] == 0:
            return dict(p)
        return resolve_params(v.precision, self.level_of(v), p, v.protection.injects, self.clusters_ok(v))

    def plans(self, v: Variant) -> list[Plan]:
        level = self.level_of(v)
        p = v.param_dict
        if p["logn"]:
            return [make_plan(v.precision, level, self.resolved(v))]
        out = []
        for logn in range(1, AUTO_MAX_LOGN + 1):
            q = resolve_params(v.precision, level, {**{k: 0 for k in PLAN_KEYS}, "logn": logn, "tcols": p.get("tcols", 0), "hooksplit": p.get("hooksplit", 0),
                                                    "tbenc": p.get("tbenc", 0), "prefetch": p.get("prefetch", 0)},
                               v.protection.injects,
                               self.clusters_ok(v))
            out.append(make_plan(v.precision, level, q))
        return out

    # ---- constraints ------------------------------------------------------------------------
    def constraints(self, v: Variant) -> list[str]:
        p = v.param_dict
        level = self.level_of(v)
        r: list[str] = []
        if p["logn"] > MAX_LOGN[v.precision]:
            return [f"logn={p['logn']} exceeds the largest {v.precision} size this family supports (2^{MAX_LOGN[v.precision]})"]
        if p["logn"] == 0:
            fixed = [k for k in PLAN_KEYS if p.get(k)]
            if fixed:
                return [f"logn: 0 builds every size with automatic plans; give logn to set {', '.join(fixed)}"]
        try:
            plans = self.plans(v)
        except ValueError as e:
            return [str(e)]
        if not self.clusters_ok(v) and any(pl.cluster for pl in plans):
            r.append(f"cluster: {p.get('cluster')} needs thread-block clusters (sm_90 or later); arch lists {', '.join(v.arch)}")
        for plan in plans:
            reasons = plan_reasons(plan, level)
            if p["logn"] == 0 and reasons:
                reasons = [f"n=2^{plan.logn}: {x}" for x in reasons]
            r.extend(reasons)
        if p.get("tbenc") in (2, 3) and p["logn"] and not any(lp.tb_stage for pl in plans for lp in pl.launches):
            r.append(f"tbenc: {p['tbenc']} moves the simultaneous two-sided-tb's encodings into the staged loads of multi-launch plans; "
                     f"this variant has none (level {level}, log n {p['logn']})")
        if p.get("tbseq") and level != "two-sided-tb":
            r.append(f"tbseq: {p['tbseq']} chooses two-sided-tb's design; this variant's level is {level}")
        elif p.get("tbseq") == 2 and any(lp.N != lp.R for pl in plans for lp in pl.launches):
            r.append("tbseq: 2 (the sequential design) needs a one-launch plan (launches: 1, N1 = n)")
        if p.get("prefetch") == 2 and p["logn"] and not any(lp.pf for pl in plans for lp in pl.launches):
            r.append(f"prefetch: 2 prefetches the next column step of the sequential levels' one-launch plans (one-sided, two-sided-tb "
                     f"up to 2^{TB_SEQ_MAX_LOGN}, more than one step); this variant has none (level {level}, log n {p['logn']})")
        if p.get("hooksplit") and not v.protection.injects:
            r.append(f"hooksplit: {p['hooksplit']} places the fault hooks of injection builds; this variant has none (protection inject: false)")
        elif p.get("hooksplit") and level == "none":
            r.append(f"hooksplit: {p['hooksplit']} places the fault hooks of protected levels; this variant is unprotected")
        return r

    def constraint_docs(self) -> list[str]:
        return [
            "n = 2^logn, logn 1..26 (fp32) / 1..25 (fp64); N1*N2*N3 = n; 1..3 launches",
            "n1..n3 in 2, 4, 8, 16, 32 (sub-pass radix = elements per thread); the last sub-pass may be smaller",
            "multi-launch: bs1 <= n/N1, bs_l <= N1*...*N_(l-1) (a block's columns share one signal)",
            "bs a multiple of tcols; two-sided levels need tcols >= 2",
            "threads per block = (bs/tcols) * (N_l/n_l) <= 1024",
            "shared memory <= 227 KB (exchanges in rounds when the tile would exceed ~100 KB); estimated registers <= 232",
            "minb (0: automatic) resident blocks per SM: minb * threads <= 2048, minb * shared memory <= 228 KB",
            "cluster 1 / 2: unprotected (tcols = 1) or the simultaneous two-sided-tb (log n > 12, every thread the same number of fused DFTs), two or three launches, the last N_L in 2, 4, 8 and N_(L-1) >= 2 N_L; two launches: bs1 <= N2 / 2; 2 (scattered loads): unprotected two-launch plans, bs1 = 1; every arch sm_90 or later",
            "hooksplit 1: injection builds of a protected level",
            "tbseq 1 / 2: two-sided-tb; 2 (sequential) one-launch plans",
            f"prefetch 2: one-sided or two-sided-tb (log n <= {TB_SEQ_MAX_LOGN}) one-launch plans of more than one step (tcols > 1 columns per thread)",
            f"tbenc 2 / 3: two-sided-tb plans with a simultaneous launch whose input is staged (multi-launch; 3: of at least {TBENC3_MIN_T} threads per column)",
            "no plan key given: the rules' plan, or the measured winner of TUNED for that precision, level and size",
            f"logn: 0 (every size 2^1..2^{AUTO_MAX_LOGN}) takes the automatic plans (tcols may be set)",
            "protection: abft levels one-sided, two-sided-thread, two-sided-tb; interval 1; correct: detect only with one-sided",
        ]

    # ---- names ------------------------------------------------------------------------------
    def kernel_name(self, v: Variant) -> str:
        p = v.param_dict
        head = f"fft_{'c2c' if v.precision == 'fp32' else 'z2z'}_{PRECISION_TAG[v.precision]}_{self.protection_token(v.protection)}_{'fwd' if p['direction'] == 'forward' else 'inv'}"
        if p["logn"] == 0:
            name = (head + "_auto" + (f"_t{p['tcols']}" if p.get("tcols") else "") + (f"_te{p['tbenc']}" if p.get("tbenc") else "")
                    + (f"_pf{p['prefetch']}" if p.get("prefetch") else "") + HOOKSPLIT_TAG[p.get("hooksplit", 0)])
        else:
            q = self.resolved(v)
            nl = q["launches"]
            lps = make_plan(v.precision, self.level_of(v), q).launches
            parts = [
                f"logn{q['logn']}",
                "N" + "x".join(str(q[f"N{i + 1}"]) for i in range(nl)),
                "n" + "x".join(str(min(q[f"n{i + 1}"], q[f"N{i + 1}"])) for i in range(nl)),
                "bs" + "x".join(str(q[f"bs{i + 1}"]) for i in range(nl)),
                f"t{q['tcols']}",
            ] + ([f"mb{q['minb']}"] if q.get("minb") else []) + ([{1: "sm", 2: "sq"}[q["tbseq"]]] if q.get("tbseq") else []) + ([{1: "cl", 2: "cls"}[q["cluster"]]] if q.get("cluster") else []) + (
                [{2: "te", 3: "tl"}[q["tbenc"]]] if any(lp.tb_stage for lp in lps) else []) + (
                ["pf"] if any(lp.pf for lp in lps) else []) + ([HOOKSPLIT_TAG[q["hooksplit"]][1:]] if q.get("hooksplit") else [])
            name = head + "_" + "_".join(parts)
        return name + ("_inj" if v.protection.inject else "")

    # ---- shapes -----------------------------------------------------------------------------
    def normalize_shape(self, raw: Any, where: str, source: str | None = None) -> dict[str, int]:
        if not isinstance(raw, dict):
            raise SpecError(f"{raw!r} is not a mapping; an fft shape has keys n (or logn) and batch", source=source, path=where)
        for key in raw:
            if key not in ("n", "logn", "batch"):
                raise SpecError(f"unknown shape key {key!r}{suggest(key, ('n', 'logn', 'batch'))}; an fft shape has keys n (or logn) and batch", source=source, path=f"{where}.{key}")
        if "n" in raw and "logn" in raw:
            raise SpecError("give n or logn, not both", source=source, path=where)
        if "n" in raw:
            n = positive_int(raw["n"], f"{where}.n", source)
            if not is_pow2(n) or n < 2:
                raise SpecError(f"{n} is not a power of two >= 2; family fft supports n = 2^1 .. 2^{max(MAX_LOGN.values())}", source=source, path=f"{where}.n")
        elif "logn" in raw:
            lg = positive_int(raw["logn"], f"{where}.logn", source)
            if lg > max(MAX_LOGN.values()):
                raise SpecError(f"{lg} is outside 1..{max(MAX_LOGN.values())}", source=source, path=f"{where}.logn")
            n = 1 << lg
        else:
            raise SpecError("missing shape key 'n' (or 'logn')", source=source, path=where)
        if ilog2(n) > max(MAX_LOGN.values()):
            raise SpecError(f"{n} exceeds the largest supported size 2^{max(MAX_LOGN.values())}", source=source, path=f"{where}.n")
        if "batch" not in raw:
            raise SpecError("missing shape key 'batch'", source=source, path=where)
        batch = positive_int(raw["batch"], f"{where}.batch", source)
        if n * batch > (1 << 31):
            raise SpecError(f"n * batch = {n * batch} elements exceeds 2^31", source=source, path=where)
        return {"n": n, "batch": batch}

    def format_shape(self, shape: Mapping[str, int]) -> str:
        n = shape["n"] if "n" in shape else 1 << shape["logn"]
        return f"{n}x{shape['batch']}"

    def variant_default_shapes(self, v: Variant) -> list[dict]:
        total = TOTAL_LOG[v.precision]
        lgs = [v.param_dict["logn"]] if v.param_dict["logn"] else list(AUTO_BENCH_LOGNS)
        return [{"n": 1 << lg, "batch": 1 << max(0, total - lg)} for lg in lgs]

    def work(self, shape: Mapping[str, int]) -> float:
        n = shape["n"] if "n" in shape else 1 << shape["logn"]
        return 5.0 * n * math.log2(n) * shape["batch"]

    # ---- emission ---------------------------------------------------------------------------
    def namespace(self, v: Variant) -> str:
        return "ftgen_" + "".join(c if c.isalnum() else "_" for c in v.name)

    def resolved_meta(self, v: Variant) -> str:
        """JSON members every row starts with: the DESIGN fields, params resolved."""
        import json

        p = v.param_dict if v.param_dict["logn"] == 0 else self.resolved(v)
        d = {
            "kernel": v.name,
            "family": self.name,
            "precision": v.precision,
            "protection": v.protection.to_dict(),
            "params": {k: p[k] for k in (x.name for x in PARAMS)},
        }
        return json.dumps(d, separators=(",", ":"))[1:-1]

    def plan_context(self, v: Variant, plan: Plan) -> dict:
        lps = []
        cltb = any(lp.cluster_tb for lp in plan.launches)
        for lp in plan.launches:
            cps = lp.cols_per_signal
            Mp = lp.Mp
            RMp = lp.R * Mp
            lps.append(
                {
                    "index": lp.index,
                    "R": lp.R,
                    "LOGR": ilog2(lp.R),
                    "n": lp.n,
                    "RL": lp.radices[-1],
                    "P": lp.P,
                    "T": lp.T,
                    "G": lp.G,
                    "L": lp.L,
                    "bs": lp.bs,
                    "NT": lp.threads,
                    "minb": lp.min_blocks,
                    "cps": cps,
                    "S": lp.S,
                    "MP": Mp,
                    "staged_in": lp.staged_in,
                    "staged_out": lp.staged_out,
                    "pitch": lp.pitch,
                    "swz_k": ilog2(lp.n),
                    "swz_w": lp.swz_mask + 1,
                    "xw": lp.xcols,
                    "out_h": (ilog2(RMp) + 1) // 2 if Mp > 1 else 0,
                    "tile_elems": lp.tile_elems,
                    "tbseq": lp.tbseq,
                    "pf": lp.pf,
                    "smem_bytes": lp.smem_bytes,
                    "cluster": lp.cluster,
                    # the kernel's parameters (a protected cluster kernel also carries the fused launch's output) and its
                    # output: workspace buffer out_ws (the last kernel: the caller's output, -1; a protected cluster kernel's
                    # rare path keeps a buffer of its own)
                    "params": "ClusterParams" if lp.cluster_tb else "LaunchParams",
                    "out_ws": lp.index if lp.index < len(plan.launches) - 1 - (1 if plan.cluster else 0) or lp.cluster_tb else -1,
                    "fault_steps": lp.fault_steps,
                    "fault_elems": lp.fault_elems,
                    "fused": lp.fused,
                    "cl_scatter": lp.cl_scatter,
                    "p2_bound": repr(lp.p2_bound),
                    "tb_stage": lp.tb_stage,
                    "tb_stage_out": lp.tb_stage_out,
                    "desc": lp.describe() + f" S={lp.S} M'={Mp} cols/signal={cps} staged={'in' if lp.staged_in else ''}{'/out' if lp.staged_out else ''} rounds={lp.rounds} smem={lp.smem_bytes}B",
                }
            )
        return {
            "logn": plan.logn,
            "N": plan.N,
            "sizes": list(plan.sizes),
            "launches": lps,
            "kernels": [x for x in lps if not x["fused"]],
            "cluster": plan.cluster,
            "hooksplit": plan.hooksplit,
            # protected cluster plans: the fused kernel's phase 1 keeps a workspace buffer (its rare path's scratch)
            "cltb": cltb,
            "ws_bufs": len(plan.launches) - 1 if cltb else len([x for x in lps if not x["fused"]]) - 1,
            "desc": " x ".join(str(s) for s in plan.sizes) + f" ({len(plan.sizes)} launch{'es' if len(plan.sizes) > 1 else ''})",
        }

    def template_context(self, v: Variant) -> dict:
        level = self.level_of(v)
        prot = v.protection
        kdef = {"none": 0.0, "one-sided": K_1S, "two-sided-thread": K_TH, "two-sided-tb": K_TB}[level]
        if prot.enabled and prot.threshold != "auto":
            kdef = float(prot.threshold)
        plans = [self.plan_context(v, pl) for pl in self.plans(v)]
        p = v.param_dict
        return {
            "name": v.name,
            "cname": c_symbol(v.name),
            "ns": self.namespace(v),
            "T": CTYPE[v.precision],
            "precision": v.precision,
            "direction": p["direction"],
            "sign": _sign(p["direction"]),
            "level": LEVEL_CODE[level],
            "level_name": level,
            "rereads_input": level in REREADS_INPUT,
            "inject": prot.injects,
            "prot_token": self.protection_token(prot),
            "kdef": repr(float(kdef)),
            "k1s": repr(float(K_1S)),
            "tb_pre": repr(float(TB_PRE)),
            "locate_tol": repr(float(LOCATE_TOL)),
            "plans": plans,
            "max_logn": MAX_LOGN[v.precision],
            "meta_json": self.resolved_meta(v),
            "unit_roundoff": repr(UNIT_ROUNDOFF[v.precision]),
            "tol_c": repr(TOL_C),
            "tol_elem_c": repr(TOL_ELEM_C),
            "esize": ESIZE[v.precision],
            "sizes_desc": (f"this variant is built for n = 2^{p['logn']} only" if p["logn"] else f"this variant covers n = 2^1 .. 2^{AUTO_MAX_LOGN}"),
            "summary": f"{'C2C' if v.precision == 'fp32' else 'Z2Z'} {v.precision} {p['direction']}, protection {self.protection_token(prot)}, "
            + (f"n = 2^{p['logn']}" if p["logn"] else f"n = 2^1 .. 2^{AUTO_MAX_LOGN}"),
        }

    def bench_shapes(self, v: Variant, shapes: list[dict] | None) -> list[dict]:
        """The spec's shapes this variant implements (a fixed-size variant: n = 2^logn; an
        every-size one: n up to 2^AUTO_MAX_LOGN); its own defaults when none of them fits."""
        lg = v.param_dict["logn"]
        fit = [dict(s) for s in (shapes or []) if (s["n"] == 1 << lg if lg else ilog2(s["n"]) <= AUTO_MAX_LOGN)]
        return fit or self.variant_default_shapes(v)

    def emit(self, v: Variant, env, shapes: list[dict] | None = None) -> EmittedVariant:
        ctx = self.template_context(v)
        ctx["default_shapes"] = self.default_shapes_arg(v, shapes)
        d = v.name
        files = {
            f"{d}/{d}.h": env.render("fft/variant.h.j2", ctx),
            f"{d}/{d}_internal.h": env.render("fft/internal.h.j2", ctx),
            f"{d}/{d}.cu": env.render("fft/variant.cu.j2", ctx),
            f"{d}/{d}_bench.cu": env.render("fft/bench.cu.j2", ctx),
        }
        libs = [f"{d}/{d}.cu"]
        for plan in ctx["plans"]:
            path = f"{d}/{d}_k{plan['logn']}.cu"
            files[path] = env.render("fft/kernels.cu.j2", {**ctx, "plan": plan})
            libs.append(path)
        return EmittedVariant(
            name=d,
            files=files,
            library_sources=libs,
            bench_sources=[f"{d}/{d}_bench.cu"],
            header=f"{d}/{d}.h",
            requires=["cufft"],
        )

    def emit_emulator(self, v: Variant, env, logn: int) -> dict[str, str]:
        """Sources of a host emulator of size 2^logn (tests): the kernel translation unit plus a
        main that runs every block of every launch on the CPU (see ftgen_fft_emu.h)."""
        ctx = self.template_context(v)
        plan = next(p for p in ctx["plans"] if p["logn"] == logn)
        d = v.name
        return {
            f"{d}_k{logn}.cu": env.render("fft/kernels.cu.j2", {**ctx, "plan": plan}),
            f"{d}_emu.cpp": env.render("fft/emu_main.cpp.j2", {**ctx, "plan": plan}),
        }

    def launcher_signature(self, v: Variant) -> LauncherSignature:
        return LauncherSignature(
            params="const ftgen_fft_problem* p, cudaStream_t stream",
            args="p, stream",
            selector_args=("p->n", "p->batch"),
        )
