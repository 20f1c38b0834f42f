"""The attention family's error bounds: the rounding units of the kernels' arithmetic and the thresholds of every
check, derived per row from the precision and the magnitudes involved. The NumPy model (``model.py``) applies them; the
kernels' constants are rendered from them (``mma.py``)."""

from __future__ import annotations

import math

import numpy as np

from ...tolerance import C_CONST, C_SQRT

U_ACC = 2.0**-23  # fp32 accumulation of the tensor cores (truncating)
U32 = 2.0**-24    # fp32 arithmetic on the CUDA cores
U_MUFU = 2.0**-22  # ex2.approx / lg2.approx / rcp.approx relative error bound (2 ulp)
U_IN = {"fp16": 2.0**-11, "bf16": 2.0**-8}  # rounding of P and of the checksum halves into the input type
# absolute rounding error of a value below the 16-bit type's normal range, where u_in no longer bounds it
# relatively: half the spacing of fp16's subnormals; bf16 has fp32's exponent range, and ex2.approx.ftz and the
# fp32 arithmetic before the conversion flush results below 2^-126 to zero
ETA = {"fp16": 2.0**-25, "bf16": 2.0**-126}
# log2 of the floor of the exp check: smaller probabilities are clamped on both sides of it (their contribution to a
# row is below the type's resolution). bf16: its smallest normal value. fp16: one binade below its smallest normal,
# 2^-14, so that an exp of 0 flipped to 2^-14 (exponent bit 10) stands above the floor; at the smallest normal such a
# flip was invisible to the check, and with an outlier V it moves an output past the tolerance. The product of eight
# floored factors stays in fp32's normal range (ExpProduct16 renormalizes after every eight).
P_FLOOR = {"fp16": -15.0, "bf16": -126.0}
# fp16 values in the binade [2^-15, 2^-14) below the normal range round by ETA absolutely, up to 2 U_IN relatively:
# exp_threshold counts U_IN per value, and a group that fails it is judged again with exp_band_relief for each such
# value (the kernel counts them only then)
EXP_BAND = {"fp16": (2.0**-15, 2.0**-14)}
# efta's exp check without the floor (exp_fast_threshold): taken where every x_l of the group is at least EXP_FAST_LOG2
# (so in [-13, 0] and every exp a normal 16-bit value) and the row max in the exp's units, msl, is at most EXP_FAST_MSL in
# magnitude (the x side's cancellation, below)
EXP_FAST_LOG2 = -13.0
EXP_FAST_MSL = 64.0
LOG2E = 1.0 / math.log(2.0)
# the S check's allowance for K's unit checksum rounded once into the 16-bit type, in units of ||q|| ||Kc1 - hi(Kc1)||
# (s_threshold): without it above 1 the model's largest clean score reached 0.98 of the threshold, with 1.25 0.785
S_LO_MARGIN = 1.25


def s_threshold(qnorm, kgroup_norm, klo_norm, d: int, nl: int, precision: str):
    """Threshold of ``S_c1[i, g] - sum_l S[i, g + 8l]`` for row norms ``qnorm`` (rows, 1), the group's sum of key
    norms ``sum_l ||K[g + 8l]||`` (1, groups) and ``klo_norm = ||Kc1[g] - hi(Kc1[g])||`` (1, groups), what rounding
    the unit checksum once into the 16-bit type left out of it: B = ||q|| sum_l ||k_l|| bounds every sum_d |q||k|
    involved (Cauchy-Schwarz); each side accumulates over d in fp32 (the tolerance rule's bound), the group sum adds
    nl roundings and the checksum's encoding in fp32 nl more; the checksum column misses q . (Kc1 - hi(Kc1)), at
    most ||q|| klo_norm, taken S_LO_MARGIN times (Cauchy-Schwarz is tight where q and the rounding share one outlier
    column, and the accumulation terms stack on it)."""
    b = qnorm * kgroup_norm
    return b * (2.0 * U_ACC * (C_SQRT * math.sqrt(d) + C_CONST) + 2.0 * nl * U32) + S_LO_MARGIN * qnorm * klo_norm


def o_threshold(mag, n_keys: int, n_tiles: int, nl: int, precision: str):
    """Threshold of the O residual per (row, group). ``mag`` is the row's P-weighted group magnitude
    ``sum_c p_c A[c, g]`` with ``A[c, g] = sum_l |V[c, g + 8l]|`` (+1 with the row-sum column), carried through the
    same rescales (and, after the loop, the same 1/l) as O and its checksum; :func:`group_magnitudes` encodes A
    and the second product accumulates it as one more n8 block. Every term of both sides of the check is a
    P-weighted sum of V's elements of the group or of its checksum, so ``mag`` bounds the magnitudes whose roundings
    the residual holds: fp32 accumulation over all keys (the rule's bound), one rounding per rescale and per group
    element, and the checksum halves' u_in^2. The weights are the row's own, so a large |V| at a key the row
    barely sees adds its weight's share, not its whole size."""
    return mag * (2.0 * U_ACC * (C_SQRT * math.sqrt(n_keys) + C_CONST + n_tiles + nl) + U_IN[precision] ** 2)


def exp_threshold(nl: int, precision: str, floor: float):
    """Threshold of ``sum_l max(log2 p_l, F) - sum_l max(x_l, F)`` over a group of nl elements: each p is
    exp2(x) to 2 ulp, then rounded into the P type (u_in), and lg2 errs by 2 ulp of |log2 p| <= |F|."""
    return nl * ((U_IN[precision] + 2.0 * U_MUFU) * LOG2E * 1.01 + U_MUFU * (1.0 + abs(floor)))


def exp_band_relief(precision: str) -> float:
    """What exp_threshold adds for each value of the group in the binade below the normal range (EXP_BAND): the rounding
    of such a value, ETA / 2^P_FLOOR relative at most, beyond the U_IN that exp_threshold counts for it; 0 where the P
    type has no such binade."""
    if precision not in EXP_BAND:
        return 0.0
    return (ETA[precision] * 2.0 ** -P_FLOOR[precision] - U_IN[precision]) * LOG2E * 1.01


def exp_band_count(p16, stride: int, precision: str):
    """Per (row, group of the stride): how many values of P lie in EXP_BAND (none where the type has no band)."""
    if precision not in EXP_BAND:
        return np.zeros((p16.shape[0], stride), dtype=np.int64)
    lo, hi = EXP_BAND[precision]
    a = np.abs(p16)
    inband = ((a >= lo) & (a < hi)).astype(np.int64)
    return inband.reshape(p16.shape[0], -1, stride).sum(axis=1)


def exp_fast_threshold(nl: int, precision: str):
    """Threshold of efta's exp check where no exp of the group is floored: ``sum_l log2 p_l - x_side`` with the x side
    ``fma(sl2, g1, -nl msl)`` from the S check's group sum ``g1 = sum_l s_l`` instead of ``sum_l max(x_l, F)``. Beside
    exp_threshold's terms (|log2 p| <= 14 here): each x_l = fma(s_l, sl2, -msl) rounds by u32 |x_l| <= 14 u32, the x side's
    fma by u32 |x side| <= 14 nl u32, and g1's sequential sum by (nl - 1) u32 sum_l |s_l| with sl2 |s_l| <= 14 + |msl|."""
    return (nl * ((U_IN[precision] + 2.0 * U_MUFU) * LOG2E * 1.01 + U_MUFU * 15.0)
            + U32 * (2.0 * 14.0 * nl + (nl - 1) * nl * (14.0 + EXP_FAST_MSL)))


def alpha_threshold(arg):
    """Threshold of ``log2(alpha) - arg`` for alpha = exp2(arg): 2 ulp of the exp, lg2's 2 ulp of |arg|."""
    return 2.0 * U_MUFU * LOG2E * 1.01 + U_MUFU * (1.0 + np.abs(arg))
