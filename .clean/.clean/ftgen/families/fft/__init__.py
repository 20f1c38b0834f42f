"""``fft``: batched complex-to-complex FFTs (C2C fp32, Z2Z fp64), forward and inverse, with the fault-tolerance schemes
of TurboFFT.

The package by concern:

* :mod:`.plan`: launches, sub-passes and tiles of a plan, the rules that fill its automatic values, its constraints.
* :mod:`.tuning`: the measured choices (``ftgen/tuning/<gpu>.json``) a variant without plan keys takes, and the tuning
  entries a search's winners give.
* :mod:`.model`: the NumPy CPU model of the kernels (twiddles, encodings, checks, faults).
* :mod:`.codelets`: the C++ generator of the in-register DFT codelets.
* :mod:`.family`: :class:`FftFamily` (parameters, constraints, names, shapes, template context).

Cluster plans (``cluster: 1`` or ``2``, unprotected or the simultaneous two-sided-tb, every arch sm_90 or later):
the last launch (``N_L`` of 2, 4 or 8 points) has no kernel of its own. The launch before it keeps its twiddled
columns in shared memory; its blocks that hold the same columns ``s`` for the ``N_L`` values of ``m`` are one
thread-block cluster, and after the cluster barrier each computes the ``N_L``-point DFTs of its share of positions
from every block's tile (distributed shared memory) and stores them: the data cross DRAM once for both launches
(``CLUSTER_SIZES``, ``cluster_reasons``). Two-sided-tb cluster plans check the launch before as any launch, its
outputs left in the tile (the rare path spills the tile to the workspace and reads it back), and each fused DFT
``y = F z`` on its own: ``e^T y = N_L z_0`` and ``((k+1)_k)^T y = a^T z`` (``fused_coefficients``); an output error
is located by the quotient of the two residuals and replaced, anything else recomputes the DFT from the tiles
(``FftModel._fused_checked``). ``hooksplit: 1`` (injection builds of a protected level): only the blocks the fault
plan gives a fault carry the fault hooks; ``hooksplit: 2`` the same with that block's hooked body a function call of
its own; ``hooksplit: 3`` that block in a kernel of its own beside the launch.

Protection (``protection.scheme: abft``), per launch and column, under the single-event upset model
(one fault per check):

* ``one-sided``: per-column left checksum ``e^T u`` against the precomputed ``(W^T e)^T x``
  (``u`` the output with the launch twiddle divided out); detection recomputes the tile.
* ``two-sided-thread``: every sub-pass of every thread checks its ``tcols`` DFTs with two
  right-side checksum vectors (weights 1 and ``l+1``) transformed alongside; the quotient of the
  two residual vectors locates the column and the residual is subtracted (no recomputation).
* ``two-sided-tb``, sequential (log n <= ``TB_SEQ_MAX_LOGN``, or ``tbseq: 2``): a thread takes its ``tcols`` columns
  one after the other, keeping the running right-side sums ``sum_l x_l`` and ``sum_l u_l`` in shared memory,
  then transforms the checksum column ``sum_l x_l`` like a data column; the residual vector
  ``sum_l u_l - W sum_l x_l`` (reduced over the group with warp shuffles) detects.
  Simultaneous (larger sizes, or ``tbseq: 1``; the unprotected plans and data path): the thread's right-side sum of
  its columns against the precomputed left encodings ``e^T W`` and ``e2^T W`` (``e2 = e o (-1)^popcount(k)``)
  on the way in, ``e^T`` and ``e2^T`` of the outputs on the way out, reduced over the group; a group above
  the prefilter (``TB_PRE``) takes a rare path that transforms the checksum column only then and decides
  on the same residual vector. In both, once it fires the left-side checksums are evaluated (outputs as
  stored, inputs re-read): the non-finite mask or the quotient of their sums with weights 1 and ``l+1``
  locates the column, which is replaced by ``W sum x - sum_{l != j} u_l`` and verified with its own left
  checksum (delayed correction, no recomputation). An ambiguous location falls back to recomputation.
  One-launch calls in place go through the workspace (the input is re-read after the outputs are stored).
  ``tbenc: 2`` (launches with a staged input): the input-side encodings are computed by the
  staged load (each thread projects the sum of the adjacent columns it loads at one position) and, in launches
  without launch twiddles, the output side by the staged store; the prefilter then decides on the block's sums
  (every thread from the warps' partial sums), the rare path per group as above. ``tbenc: 3``: the same in the
  launches of at least ``TBENC3_MIN_T`` threads per column only.
  ``prefetch: 2`` (the sequential design's one-launch plans): each step prefetches the next step's
  columns into L2 (one contiguous run of whole signals), so their loads wait for L2 instead of DRAM.
"""

from .codelets import codelet_source
from .family import HOOKSPLIT_TAG, PARAMS, FftFamily, c_symbol
from .model import (
    FftModel,
    ModelFault,
    ModelReport,
    codelet,
    encoding_vectors,
    exact_twiddle,
    fft_reference,
    flip_bit,
    fused_coefficients,
    thue_morse,
)
from .plan import *  # noqa: F401,F403  (the plan geometry, its constants and rules)
from .plan import __all__ as _plan_all
from .tuning import measured_params, resolve_params, tuning_entries

__all__ = [
    "FftFamily", "FftModel", "ModelFault", "ModelReport", "PARAMS", "HOOKSPLIT_TAG", "c_symbol", "codelet", "codelet_source",
    "encoding_vectors", "exact_twiddle", "fft_reference", "flip_bit", "fused_coefficients", "thue_morse", "measured_params",
    "resolve_params", "tuning_entries", *_plan_all,
]
