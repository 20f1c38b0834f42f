"""Plan geometry of the ``fft`` family: launches, sub-passes, tiles, the rules that fill a plan's automatic values,
and the reasons a plan cannot be built.

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
in registers at once (the batch of the two-sided checksums).

Plans: ``launches``, ``N1..N3``, ``n1..n3``, ``bs1..bs3``, ``tcols`` and ``minb`` (resident blocks per SM
every launch is compiled for: ``__launch_bounds__``, i.e. the register cap) set a plan; 0 leaves a value to
the rules here (``auto_launches``, ``auto_n``, ``auto_bs``, ``auto_tcols``, ``LaunchPlan.min_blocks``), or to the
measured choices of the GPU's tuning file where a variant sets no plan key (:mod:`.tuning`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..base import MAX_THREADS_PER_SM, SMEM_PER_BLOCK, SMEM_PER_SM, UNIT_ROUNDOFF

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
# a fault spread over many outputs; both of two independent ones rarely do. In a fault campaign of a one-level scalar
# check (K = 12, e2 = e o (-1)^k) on the H100, missed significant faults scored 0.27-0.96 of it (0.65-2.3 of this
# prefilter); clean blocks scored at most 0.27 (0.65)
TB_PRE = 1.25
K_1S = 12.0  # one-sided: |e^T u - v^T x| vs K u sqrt(log2 R + 1) sqrt(R) ||x||
K_TH = 12.0  # two-sided-thread: max_k |r_k| vs K u (log2 n + 1) sqrt(sum_l ||a_l||^2)
LOCATE_TOL = 0.25  # |quotient - (j+1)| accepted as a location
# two-sided-tb: the quotient of the weighted left residuals moves by sum_l (l - j) n_l / r1 under the columns' rounding
# n_l (each up to about 3 rounding scales u sqrt(log2 R + 1) sqrt(R sum ||x||^2) on clean data), so a location is trusted
# only where |r1| stands LOCATE_K (L - 1) scales above it; a fault under that is recomputed. In a campaign a fault of
# 1.04x the tolerance (|r1| 1.2 (L - 1) scales) moved the quotient by 0.92 onto the next column, which was replaced by
# a value carrying the fault; the CPU model puts 2-14% of located significant fp64 mantissa faults of bits 8-24 under 8.
LOCATE_K = 8.0
TWIDDLE_FRESH = 4  # fp32 recurrence: a fresh sincospi every 4 powers


# two-sided-tb: the sequential design (columns one after the other, the checksum column transformed in the common
# path, the vector residual checked there) up to this size, the simultaneous one (the unprotected data path, scalar
# prefilter in registers, the rest in a rare path) above it: in full runs on the H100 the
# simultaneous design lost at every one-launch size up to 2^12 (fp32 0.70-0.98 of cuFFT against 0.85-0.98) and won at
# the larger ones (fp32 2^13-2^24 0.64-0.95 against 0.46-0.87). The rule of a variant without plan keys; measured plans
# may choose either design (plan key tbseq).
TB_SEQ_MAX_LOGN = 12
# tbenc 3: the staged encodings only in the launches whose columns have at least this many threads (the 1024-point
# launches of radix 16 and 512-point ones of radix 8, where tbenc 2 measured faster)
TBENC3_MIN_T = 64
# Cluster plans (the kernels in ftgen_fft_core.h, cluster_phase0/1/2): the sizes of a fused last launch. cluster: 1 reads
# the columns from global memory; cluster: 2 (two launches, one column per block) reads contiguous parts and stores each
# element into its column's tile through distributed shared memory first.
CLUSTER_SIZES = (2, 4, 8)
# the parameters that set a plan: a variant that gives none of them takes the measured plan of its size, if any
PLAN_KEYS = ("launches", "N1", "N2", "N3", "n1", "n2", "n3", "bs1", "bs2", "bs3", "minb", "cluster", "tbseq")


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


def fused_bound(C: int) -> float:
    """The fused DFTs' threshold per unit roundoff and ||z|| at K = 1: 2 C (log2 C + 1) (worst-case rounding of a C-point
    DFT and of the two output sums; the kernels' P2_BOUND)."""
    return 2.0 * C * (ilog2(C) + 1)


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
        measured no slower: unprotected fp32 (static SASS -8..-20% per launch; A/B on the H100:
        2^13 0.906 -> 0.935 of cuFFT, the other sizes within +-0.7%). fp64 and
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
        H100: the fp32 multi-launch plans gain 3-17% from the
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
    # (fp64), measured faster than two launches there on the H100 (0.835 vs 0.51 and 0.79 vs 0.54 of cuFFT); the
    # protected levels hold several signals per block, one size less
    one = (14 if precision == "fp32" else 13) if level == "none" else (13 if precision == "fp32" else 12)
    # three launches from 2^21 (unprotected fp64; 2^22: 0.770 vs 0.638 of cuFFT, 2^21: 0.710 vs 0.648; two launches win
    # up to 2^19, tie at 2^20) and 2^22 (unprotected fp32, whose 768-thread blocks with 16-byte stores keep two launches
    # at 2^21 with 256-thread blocks: 0.813 vs 0.725 for three launches; 2^22: 0.780 vs 0.794, three stay). Two-sided-tb
    # as well (2^22 three launches 0.513 / 0.526 of cuFFT against two 0.353 / 0.330, fp32 / fp64; fp64 2^21 0.489
    # against 0.476); the other protected levels keep two launches to 2^22
    two = (21 if precision == "fp32" else 20) if level in ("none", "two-sided-tb") else 22
    if logn <= one:
        return 1
    if logn <= two:
        return 2
    return 3


def auto_tcols(precision: str, level: str, launches: int = 1, rmax: int = 0) -> int:
    if level == "two-sided-tb":
        # one launch: four columns per thread. Multi-launch plans (radix 16 fp32 / 8 fp64, H100): four while every launch is at most 256 points (2^16: 0.863 of cuFFT against
        # 0.814 with two, fp64 0.780 / 0.731; 2^23 256x256x128: 0.615 / 0.576, fp64 0.751 / 0.689), two
        # for larger launches (2^20 1024x1024: 0.586 against 0.457, fp64 0.556 / 0.452: a step then takes four
        # columns, 32 bytes of each 128-byte row segment, and DRAM reads double in the profiles). Eight measured
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
        # tiny signals: more threads per signal (H100, n = 8: radix 2 per
        # thread 1.03x cuFFT vs 0.78 at 8; n = 16: radix 4 0.96 vs 0.42 at 16; fp64 n = 8: 4, 0.96 vs 0.47)
        return max(2, R // 4) if precision == "fp32" else max(2, R // 2)
    if level == "two-sided-tb" and single and R == (16 if precision == "fp32" else 8):
        # four elements per thread (fp32 2^4 0.661 of cuFFT against 0.540 with one
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
    first launch of 2048 measured 0.813 of cuFFT with 2 columns against 0.723 with 4 on the H100)."""
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


def tb_sequential(logn: int, tbseq: int = 0) -> bool:
    """two-sided-tb's design: sequential where plan key tbseq says 2, simultaneous where 1, by size where 0."""
    return tbseq == 2 or (tbseq == 0 and logn <= TB_SEQ_MAX_LOGN)


def plan_level(level: str, logn: int, tbseq: int = 0) -> str:
    """The level whose plan rules a variant follows: the simultaneous two-sided-tb plans are the unprotected ones."""
    return "none" if level == "two-sided-tb" and not tb_sequential(logn, tbseq) else level


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


__all__ = [
    "PRECISIONS", "CTYPE", "ESIZE", "MAX_LOGN", "AUTO_MAX_LOGN", "CODELET_RADICES", "ABFT_LEVELS", "LEVEL_CODE",
    "REREADS_INPUT", "DIRECTIONS", "TOTAL_LOG", "MAX_THREADS", "SMEM_LIMIT", "SMEM_SM", "MAX_SM_THREADS",
    "SMEM_TARGET", "MAX_REGS", "TOL_C", "TOL_ELEM_C", "K_TB", "TB_PRE", "K_1S", "K_TH", "LOCATE_TOL", "LOCATE_K",
    "TWIDDLE_FRESH", "TB_SEQ_MAX_LOGN", "TBENC3_MIN_T", "CLUSTER_SIZES", "PLAN_KEYS", "ilog2", "is_pow2",
    "subpass_radices", "codelet_layers", "fused_bound", "LaunchPlan", "Plan", "auto_launches", "auto_tcols",
    "auto_n", "auto_bs", "auto_xw", "tb_sequential", "plan_level", "make_plan", "plan_reasons", "cluster_reasons",
    "tolerance"
]
