"""NumPy model of the attention family's kernels and of their protection levels.

The model computes one head, ``O = softmax(scale * Q K^T [+ causal mask]) V``, the way the ``mma`` kernels do:
flash attention over key/value tiles of ``bc`` keys with an online softmax, 16-bit inputs (fp16 or bf16), fp32
accumulation, P converted to the input type before the second product. It follows the kernels' thread
ownership where the checks depend on it: in the m16n8k16 accumulator layout a thread holds, for each of its
rows, the columns ``c`` with ``(c % 8) // 2 == lane % 4`` of every n8 block, so the four threads of a quad
share a row and each owns the column groups ``g = c % 8`` with ``g // 2`` equal to its lane. Everything a
thread checks is its own: the model keeps per-lane copies of the row max, the partial row sum, the rescale
factor and 1/l.

Protection levels (``level``):

* ``strided`` -- strided row checksums of K and V (stride 8, the n8 block of the accumulator layout):
  ``Kc1[g] = sum_l K[g + 8l]`` and ``Kc2[g] = sum_l (l + 1) K[g + 8l]``, each rounded once into the 16-bit
  type (:func:`k_checksums`), appended as 16 more columns of the first product; the same for V over the head
  dimension in the second, Vc1 split into a 16-bit high and low part (the O check needs its fp32 accuracy).
  ``S_c1[i, g] - sum_l S[i, g + 8l]`` is checked per tile before the softmax; the weighted residual locates ``l``
  and the fault is corrected in place (else the tile row is recomputed). The O checksums are checked every tile.
  With ``stride`` 1 the same code is the classic scheme (one checksum per row of the tile).
* ``snvr`` -- selective neuron value restriction of the softmax: the four lanes' row maxima agree (a
  corrupted copy is outvoted), the exp outputs after conversion are checked per group in the log domain
  against their arguments (``sum_l max(log2 p_l, F) = sum_l max(x_l, F)``: linear, no product of exps
  that underflows), the rescale factor likewise (``log2 alpha = (m_old - m_new) * scale * log2 e``), the
  row sum against its range ``[sum_j 2^{(m_j - m) s}, n_keys]`` and against a duplicate of each lane's
  accumulation (:func:`_row_sum_differs`; a difference recomputes the block), and ``l * (1/l) = 1``.
* ``efta`` -- both, with the unified verification of the second product: the V checksum carries ``+1``
  (``Vc1[c, g] = sum_l V[c, g + 8l] + 1``), so the O checksum also accumulates the row sum of P through
  the tensor cores; rescaling and normalization apply to it like to O, and one check after the loop
  (``(O_c1 - sum_l O) * (1/l) = 1``) covers the second product, every rescale, the row sum and 1/l.
  A fault of O is located and corrected; a wrong row sum or 1/l shows in both groups of a lane equally
  and is corrected by rescaling the lane's columns. The O checks' thresholds (strided and efta) scale with the
  row's P-weighted group magnitude, a fourth checksum block of the second product (:func:`o_threshold`).
* ``decoupled`` -- the three-kernel baseline: S = Q K^T materialized with a classic row checksum (locate,
  correct), the softmax twice (DMR: a mismatch recomputes it), O = P V with a classic row checksum.

Thresholds are derived per row (``auto``) from the precision and the magnitudes of the operands; see
:func:`s_threshold`, :func:`o_threshold`, :func:`exp_threshold` and :func:`output_tolerance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...tolerance import C_CONST, C_SQRT
from ..base import ModelCounters
from .rules import (ETA, EXP_FAST_LOG2, EXP_FAST_MSL, LOG2E, P_FLOOR, U32, U_ACC, U_IN, U_MUFU,
                    alpha_threshold, exp_band_count, exp_band_relief, exp_fast_threshold, exp_threshold, o_threshold,
                    s_threshold)

LEVELS = ("none", "strided", "snvr", "efta", "decoupled")
SITES = ("qk", "rowmax", "exp", "p16", "rowsum", "rescale", "o", "inv_l")
STRIDE = 8  # the n8 block of mma.sync m16n8k16: a thread's columns repeat every 8
LANES = 4   # threads sharing a row of the accumulator

# the precisions whose kernels take it: bf16, whose floored check (exponents and mantissas apart, F = -126) costs a few
# operations a score more; fp16's floored product runs beside the exps for free (docs/attention.md)
EXP_FAST_PRECISIONS = ("bf16",)


# --------------------------------------------------------------------------------------------
# Rounding to the 16-bit types
# --------------------------------------------------------------------------------------------


def round_bf16(x) -> np.ndarray:
    """float32 -> nearest bf16 (ties to even), returned as float32."""
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = r.view(np.float32).copy()
    nan = np.isnan(a)
    out[nan] = np.nan
    return out


def round_to(x, precision: str) -> np.ndarray:
    if precision == "fp16":
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    if precision == "bf16":
        return round_bf16(x)
    raise ValueError(f"precision {precision!r} is not fp16 or bf16")


def round_up_to(x, precision: str) -> np.ndarray:
    """Non-negative float32 -> the smallest value of the 16-bit type that is >= it, returned as float32 (what
    ``__float2half_ru`` / ``__float2bfloat16_ru`` give)."""
    a = np.asarray(x, dtype=np.float32)
    r = round_to(a, precision)
    low = r < a
    if np.any(low):
        if precision == "fp16":
            up = np.nextafter(r.astype(np.float16), np.float16(np.inf)).astype(np.float32)
        else:
            up = (np.ascontiguousarray(r).view(np.uint32) + np.uint32(1 << 16)).view(np.float32)
        r = np.where(low, up, r).astype(np.float32)
    return r


def flip(value: float, bit: int, precision: str = "fp32") -> float:
    """``value`` with one bit of its representation flipped (fp32, or the 16-bit type for P)."""
    if precision == "fp32":
        u = np.array([value], dtype=np.float32).view(np.uint32)
        u ^= np.uint32(1 << (bit & 31))
        return float(u.view(np.float32)[0])
    if precision == "fp16":
        u = np.array([value], dtype=np.float16).view(np.uint16)
        u ^= np.uint16(1 << (bit & 15))
        return float(u.view(np.float16)[0])
    u = np.array([value], dtype=np.float32).view(np.uint32)
    u ^= np.uint32(1 << ((bit & 15) + 16))
    return float(u.view(np.float32)[0])


# --------------------------------------------------------------------------------------------
# Faults and counters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """One planned fault. ``row``: the query row; ``tile``: the key tile after whose step it lands (ignored
    for ``inv_l``); ``col``: the column within the tile (qk, exp, p16), the output column (o) or the lane
    0..3 (rowmax, rowsum, rescale, inv_l). ``kind``: ``bitflip`` (``bit`` of the fp32 value, of the 16-bit
    value for p16) or ``offset`` (``offset`` added)."""

    site: str
    row: int
    tile: int = 0
    col: int = 0
    kind: str = "bitflip"
    bit: int = 30
    offset: float = 0.0

    def apply(self, value: float, precision: str) -> float:
        if self.kind == "offset":
            return float(np.float32(value + self.offset))
        return flip(value, self.bit, precision if self.site == "p16" else "fp32")


@dataclass
class Counters(ModelCounters):
    by_check: dict = field(default_factory=dict)
    fast_exp_groups: int = 0  # efta's exp checks that took the fast path (exp_fast_groups)

    def hit(self, check: str, fixed: str) -> None:
        self.detected += 1
        self.by_check[check] = self.by_check.get(check, 0) + 1
        if fixed == "corrected":
            self.corrected += 1
        elif fixed == "recomputed":
            self.recomputed += 1
        else:
            self.uncorrectable += 1

    def score(self, residual, threshold) -> None:
        r = np.abs(np.asarray(residual, dtype=np.float64)) / np.maximum(np.asarray(threshold, dtype=np.float64), 1e-300)
        r = r[np.isfinite(r)] if np.ndim(r) else r
        if np.size(r):
            self.max_score = max(self.max_score, float(np.max(r)))


class _Faults:
    """The planned faults, looked up by (site, tile); each is applied once."""

    def __init__(self, faults, precision: str, counters: Counters):
        self.faults = list(faults or ())
        self.precision = precision
        self.counters = counters
        for f in self.faults:
            if f.site not in SITES:
                raise ValueError(f"fault site {f.site!r} is not one of {', '.join(SITES)}")

    def at(self, site: str, tile: int, r0: int, r1: int):
        for f in self.faults:
            if f.site == site and (site == "inv_l" or f.tile == tile) and r0 <= f.row < r1:
                yield f

    def apply(self, arr, site, tile, r0, r1, index) -> None:
        """Corrupt ``arr[index(f)]`` for every fault planned here."""
        for f in self.at(site, tile, r0, r1):
            idx = index(f)
            arr[idx] = f.apply(float(arr[idx]), self.precision)
            self.counters.injected += 1


# --------------------------------------------------------------------------------------------
# The reference and the tolerances
# --------------------------------------------------------------------------------------------


def reference(q, k, v, causal: bool, scale: float | None = None):
    """fp64 attention of the (already rounded) inputs and the per-element scale of its error measure:
    ``(O, s)`` with ``s_ij = sum_c w_ic |V_cj|`` (w the softmax weights)."""
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lq, d = q64.shape
    lk = k64.shape[0]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = scale * (q64 @ k64.T)
    if causal:
        s = np.where(causal_mask(lq, lk), s, -np.inf)
    s -= s.max(axis=1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=1, keepdims=True)
    return w @ v64, w @ np.abs(v64)


def causal_mask(lq: int, lk: int, r0: int = 0, c0: int = 0, rows: int | None = None, cols: int | None = None):
    """True where query row i may see key c: c <= i + (lk - lq) (the queries are the last lq positions)."""
    rows = lq - r0 if rows is None else rows
    cols = lk - c0 if cols is None else cols
    i = np.arange(r0, r0 + rows)[:, None]
    c = np.arange(c0, c0 + cols)[None, :]
    return c <= i + (lk - lq)


def output_tolerance(q, k, precision: str, n_keys: int, scale: float | None = None, n_tiles: int = 1):
    """Per-row tolerance of ``|O - O_ref| / s`` (see :func:`reference`) for the flash kernels.

    A relative error delta_c of weight w_c moves O by sum_c w_c delta_c (V_c - O), at most 2 max|delta| s. The
    weights err by the rounding of P into the input type (u_in), of the exp (2 ulp) and of the row sum's
    rescales (per tile), and by scale * |dS| where S = Q K^T is accumulated in fp32 (the tolerance rule's
    probabilistic bound over depth d of the row's largest sum_d |q||k|); the fp32 accumulation over all keys
    and the rounding of O into the output type add u_acc (...) and u_in. The relative bound u_in of P and of O holds
    in the type's normal range only: :func:`output_floor` is the absolute term that completes it."""
    q64, k64 = np.abs(np.asarray(q, dtype=np.float64)), np.abs(np.asarray(k, dtype=np.float64))
    d = q64.shape[1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    mag = (q64 @ k64.T).max(axis=1)
    ds = U_ACC * (C_SQRT * math.sqrt(d) + C_CONST) * mag
    u = U_IN[precision]
    w_err = 2.0 * u + 4.0 * U_MUFU + n_tiles * 2.0 * U32 + scale * ds
    return u + 2.0 * w_err + U_ACC * (C_SQRT * math.sqrt(n_keys) + C_CONST)


def output_floor(q, k, v, precision: str, causal: bool, scale: float | None = None, normalized_p: bool = False):
    """Per-element absolute term of the output's error bound, (rows, d): O is within its bound when
    ``|O - O_ref| <= s * output_tolerance + output_floor`` (s as in :func:`reference`).

    P = exp(s_c - max) rounded into the input type errs by u_in p relatively only in the type's normal range; below
    it (fp16: p < 2^-14, which a row dominated by one key -- outlier inputs, logits spread over tens -- has for
    nearly every other key) the rounding error is absolute, up to eta (:data:`ETA`); a later rescale by alpha <= 1
    only shrinks it. With p'_c = p_c (1 + delta_c) + eps_c, |delta_c| <= u_in, |eps_c| <= eta, the kernel's
    O' = sum_c p'_c V_c / sum_c p'_c differs from O by sum_c (p'_c - p_c) (V_c - O) / l': the delta part is
    :func:`output_tolerance`'s, the eps part at most eta sum_c (|V_c| + |O|) / l <= eta (sum_c |V_c| + n s) / l,
    with l = sum_c exp(s_c - max) >= 1 the row's sum of weights (l' = l to first order) and n its visible keys.
    When P holds the normalized weights (``normalized_p``: the decoupled baseline rounds w_c itself) nothing is
    renormalized and the eps part is eta sum_c |V_c|. The rounding of O into the output type adds eta (|O| below
    the normal range)."""
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lq, d = q64.shape
    lk = k64.shape[0]
    vis = causal_mask(lq, lk) if causal else np.ones((lq, lk), dtype=bool)
    a = vis.astype(np.float64) @ np.abs(v64)  # sum_c |V_cj| over the visible keys
    if normalized_p:
        return ETA[precision] * (1.0 + a)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    logits = np.where(vis, scale * (q64 @ k64.T), -np.inf)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    l = p.sum(axis=1, keepdims=True)  # >= 1
    s = (p @ np.abs(v64)) / l
    n = vis.sum(axis=1, keepdims=True)
    return ETA[precision] * (1.0 + (a + n * s) / l)


def group_magnitudes(v, ones: float, precision: str) -> np.ndarray:
    """V (keys, d) -> A (keys, 8): ``A[c, g] = ones + sum_l |V[c, g + 8l]|`` summed in fp32 in the kernel's order
    (l = 0, 1, ...), rounded up into the 16-bit type (the B operand of the magnitude block of the second product;
    rounding up keeps the bound)."""
    keys, d = v.shape
    av = np.abs(np.asarray(v, dtype=np.float32))
    a = np.full((keys, STRIDE), ones, dtype=np.float32)
    for l in range(d // STRIDE):
        a = (a + av[:, STRIDE * l:STRIDE * (l + 1)]).astype(np.float32)
    return round_up_to(a, precision)


def exp_fast_groups(x, msl, sflag, row_valid, stride: int):
    """Where efta's exp check takes its fast path (exp_fast_threshold), per row and group, decided before the exps (a
    fault of an exp or of its 16-bit value comes after): every key of the row's tile visible (no mask), the group's S
    check passed (``sflag`` False: its g1 is the sum of the scores exponentiated), every x_l of the group >=
    EXP_FAST_LOG2 and |msl| <= EXP_FAST_MSL. The kernel decides per thread (its four groups) and key tile; any such
    granularity gives the same verdicts within the thresholds."""
    rows, nl = x.shape[0], x.shape[1] // stride
    low = x.reshape(rows, nl, stride).min(axis=1) >= EXP_FAST_LOG2
    return low & ~sflag & row_valid[:, None] & (np.abs(msl) <= EXP_FAST_MSL)[:, None]


# --------------------------------------------------------------------------------------------
# Flash attention with the protection levels
# --------------------------------------------------------------------------------------------


def _lane_of(cols):
    return (np.asarray(cols) % STRIDE) // 2


def strided_checksums(x, stride: int, ones: float = 0.0):
    """Rows of ``x`` (n, dims) -> (c1_hi, c1_lo, c2) of the strided row checksums over n: group g = r % stride,
    ``c1[g] = sum_l x[g + stride l] + ones`` split into two rounded halves is left to the caller;
    returns c1 (fp32, exact sum in float64 rounded once) and c2 = sum_l (l + 1) x[g + stride l]."""
    n = x.shape[0]
    nl = n // stride
    blocks = np.asarray(x, dtype=np.float64).reshape(nl, stride, -1)
    w = np.arange(1, nl + 1, dtype=np.float64)[:, None, None]
    c1 = (blocks.sum(axis=0) + ones).astype(np.float32)
    c2 = (blocks * w).sum(axis=0).astype(np.float32)
    return c1, c2


def split16(c, precision: str):
    """fp32 checksum -> (hi, lo) in the 16-bit input type with hi + lo = c to u_in^2."""
    hi = round_to(c, precision)
    lo = round_to(np.asarray(c, dtype=np.float32) - hi, precision)
    return hi, lo


def k_checksums(kt, stride: int, precision: str):
    """A key tile's checksum rows as the kernels encode them: (Kc1, Kc2) (stride, d), each rounded once from its fp32
    sum into the 16-bit type (s_threshold allows for what Kc1's rounding left out), ||Kc1 - Kc1 kept|| and ||Kc2||."""
    c1, c2 = strided_checksums(kt, stride)
    hi = round_to(c1, precision)
    lo_norm = np.sqrt(((c1.astype(np.float64) - hi) ** 2).sum(axis=1))[None, :]
    c2norm = np.sqrt((c2.astype(np.float64) ** 2).sum(axis=1))[None, :]
    return hi, round_to(c2, precision), lo_norm, c2norm


def _group_sums(a, stride: int):
    """a (rows, n) -> (sum_l a[:, g + stride l], sum_l (l + 1) a[:, g + stride l]), each (rows, stride)."""
    rows, nl = a.shape[0], a.shape[1] // stride
    b = a.reshape(rows, nl, stride).astype(np.float32)
    w = np.arange(1, nl + 1, dtype=np.float32)[None, :, None]
    return b.sum(axis=1, dtype=np.float32), (b * w).sum(axis=1, dtype=np.float32)


def _locate(r1, r2, tau2, nl: int):
    """Position l (0..nl-1) of a single fault from the residuals ``r1`` (checksum) and ``r2`` (weighted,
    threshold ``tau2``), or -1 when the weighted residual does not point at one element with certainty:
    |r1| > 2 tau2 (neighbouring positions differ by |r1|), j = rint(r2 / r1) in 1..nl and |r2 - j r1| within
    tau2 and the relative rounding of the sums that hold the faulty value."""
    if not np.isfinite(r1) or not np.isfinite(r2) or not abs(r1) > 2.0 * tau2:
        return -1
    ratio = r2 / r1
    j = int(np.rint(ratio)) if abs(ratio) < 1e9 else -1
    if not 1 <= j <= nl:
        return -1
    if abs(r2 - j * r1) > tau2 + 4.0 * (nl + 1) * U32 * abs(r2):
        return -1
    return j - 1


def _nonfinite_at(row, g: int, stride: int, nl: int) -> int:
    """The position of the one non-finite element of a group (an exponent flip to inf / NaN makes the
    residuals non-finite, but the element shows itself), else -1."""
    bad = [l for l in range(nl) if not np.isfinite(row[g + stride * l])]
    return bad[0] if len(bad) == 1 else -1


def _others(row, g: int, pos: int, stride: int, nl: int) -> float:
    """Sum of the group's elements other than the one at ``pos`` (fp32, in order)."""
    acc = np.float32(0.0)
    for l in range(nl):
        if l != pos:
            acc = np.float32(acc + row[g + stride * l])
    return float(acc)


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # a fault may make a sum Inf or NaN, as on the GPU
def flash_forward(q, k, v, *, precision: str = "fp16", level: str = "none", causal: bool = False,
                  br: int = 64, bc: int = 64, faults=(), correct: bool = True, stride: int = STRIDE,
                  scale: float | None = None):
    """One head of the flash kernel with protection ``level``; returns ``(O (rows, d) float32, Counters)``.

    ``q`` (lq, d), ``k`` and ``v`` (lk, d) are rounded into ``precision`` first. ``faults`` are
    :class:`Fault`; ``correct=False`` detects and counts but repairs nothing (a fault campaign's
    uncorrected output). ``stride`` is the checksum stride of the first product (8: strided; 1: the classic
    scheme, one checksum per row of the tile); the second product's stride is always 8."""
    if level == "decoupled":
        return decoupled_forward(q, k, v, precision=precision, causal=causal, faults=faults, correct=correct, scale=scale)
    if level not in LEVELS:
        raise ValueError(f"level {level!r} is not one of {', '.join(LEVELS)}")
    q, k, v = (round_to(a, precision) for a in (q, k, v))
    lq, d = q.shape
    lk = k.shape[0]
    if bc % 16 or bc % stride or d % STRIDE:
        raise ValueError("bc must be a multiple of 16 and of the stride, d of 8")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    sl2 = np.float32(scale * LOG2E)
    cnt = Counters()
    fx = _Faults(faults, precision, cnt)
    strided = level in ("strided", "efta")
    snvr = level in ("snvr", "efta")
    unified = level == "efta"
    nt = -(-lk // bc)
    floor = P_FLOOR[precision]
    out = np.zeros((lq, d), dtype=np.float32)
    kpad = np.zeros((nt * bc, d), dtype=np.float32)
    kpad[:lk] = k
    vpad = np.zeros((nt * bc, d), dtype=np.float32)
    vpad[:lk] = v
    nl_s = bc // stride
    nl_o = d // STRIDE
    for r0 in range(0, lq, br):
        r1 = min(lq, r0 + br)
        out[r0:r1] = _query_block(q[r0:r1], kpad, vpad, r0, lq, lk, d, bc, nt, causal, sl2, precision, level,
                                  strided, snvr, unified, stride, nl_s, nl_o, floor, fx, cnt, correct, r1)
    return out, cnt


def _query_block(qb, kpad, vpad, r0, lq, lk, d, bc, nt, causal, sl2, precision, level, strided, snvr, unified,
                 stride, nl_s, nl_o, floor, fx, cnt, correct, r1):
    rows = qb.shape[0]
    m = np.full((rows, LANES), -np.inf, dtype=np.float32)      # per-lane row max
    lsum = np.zeros((rows, LANES), dtype=np.float32)           # per-lane partial row sum
    lneg = np.zeros((rows, LANES), dtype=np.float32)           # its duplicate, negated (_row_sum_differs)
    lb = np.zeros((rows, 1), dtype=np.float32)                 # range check: sum_j 2^{(m_j - m) s}
    o = np.zeros((rows, d), dtype=np.float32)
    oc1 = np.zeros((rows, STRIDE), dtype=np.float32)
    oc2 = np.zeros((rows, STRIDE), dtype=np.float32)
    omag = np.zeros((rows, STRIDE), dtype=np.float32)  # sum_c p_c A[c, g], rescaled like O (group_magnitudes)
    vmag2 = np.zeros((1, STRIDE), dtype=np.float32)  # running max over keys of |Vc2[c, g]|
    qnorm = np.sqrt((qb.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
    ocol_lane = _lane_of(np.arange(d))
    n_keys = 0
    for j in range(nt):
        c0 = j * bc
        if causal and c0 > r1 - 1 + (lk - lq):
            break  # the whole tile is masked for every row of the block
        n_keys += bc
        kt, vt = kpad[c0:c0 + bc], vpad[c0:c0 + bc]
        # ---- GEMM I with the strided K checksums -------------------------------------------------
        s = (qb @ kt.T).astype(np.float32)
        fx.apply(s, "qk", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        if strided:
            kc1, kc2, klo, c2norm = k_checksums(kt, stride, precision)
            sc1 = (qb @ kc1.T).astype(np.float32)
            sc2 = (qb @ kc2.T).astype(np.float32)
            knorm = np.sqrt((kt.astype(np.float64) ** 2).sum(axis=1)).reshape(nl_s, stride).sum(axis=0)[None, :]
            tau = s_threshold(qnorm, knorm, klo, d, nl_s, precision)
            # the weighted checksum is one 16-bit column: its rounding, u_in ||q|| ||Kc2||, adds to its residual
            tau2 = tau * (nl_s + 1) + U_IN[precision] * qnorm * c2norm
            g1, g2 = _group_sums(s, stride)
            res1 = sc1 - g1
            res2 = sc2.astype(np.float64) - g2
            cnt.score(res1, tau)
            sflag = ~(np.abs(res1) <= tau)
            for i, g in zip(*np.nonzero(~(np.abs(res1) <= tau))):
                pos = _locate(float(res1[i, g]), float(res2[i, g]), float(tau2[i, g]), nl_s)
                if pos < 0 and not np.isfinite(res1[i, g]):
                    pos = _nonfinite_at(s[i], g, stride, nl_s)
                if not correct:
                    cnt.hit("qk", "none")
                elif pos >= 0:
                    s[i, g + stride * pos] = np.float32(sc1[i, g] - _others(s[i], g, pos, stride, nl_s))
                    cnt.hit("qk", "corrected")
                else:  # the weighted residual does not point at one element: recompute the tile row
                    s[i] = (qb[i] @ kt.T).astype(np.float32)
                    cnt.hit("qk", "recomputed")
        # ---- mask, row max -------------------------------------------------------------------------
        valid = np.arange(c0, c0 + bc)[None, :] < lk
        if causal:
            valid = valid & causal_mask(lq, lk, r0, c0, rows, bc)
        s = np.where(valid, s, -np.inf).astype(np.float32)
        mt = s.max(axis=1)  # quad-reduced tile max of each row
        m_old = m.copy()
        m_new = np.maximum(m_old, mt[:, None]).astype(np.float32)
        fx.apply(m_new, "rowmax", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        if snvr:
            # the four lanes' copies agree; a single corrupted copy is outvoted by the other three
            for i in np.nonzero(~np.all(m_new == m_new[:, :1], axis=1))[0]:
                vals, counts = np.unique(m_new[i], return_counts=True)
                if correct and counts.max() >= 3:
                    m_new[i] = vals[np.argmax(counts)]
                    cnt.hit("rowmax", "corrected")
                elif correct:
                    m_new[i] = np.maximum(m_old[i], mt[i])
                    cnt.hit("rowmax", "recomputed")
                else:
                    cnt.hit("rowmax", "none")
        col_lane = _lane_of(np.arange(bc))
        mcol = m_new[:, col_lane]
        # ---- exp, conversion -------------------------------------------------------------------------
        with np.errstate(invalid="ignore", over="ignore"):
            x = (s * sl2 - mcol * sl2).astype(np.float32)
            x = np.where(np.isneginf(s), -np.inf, x).astype(np.float32)
            p = np.exp2(x).astype(np.float32)
        fx.apply(p, "exp", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        p16 = round_to(p, precision)
        fx.apply(p16, "p16", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        if snvr:
            tau_e = exp_threshold(bc // STRIDE, precision, floor)
            with np.errstate(divide="ignore", invalid="ignore"):
                lp = np.maximum(np.log2(p16), floor)
            xe = np.maximum(x, floor)
            lp = np.where(np.isnan(lp) | (np.signbit(p16) & (precision == "fp16")), np.inf, lp)  # fp16: -0 fails
            re = _group_sums(lp, STRIDE)[0].astype(np.float64) - _group_sums(xe, STRIDE)[0]
            tau_e = np.full(re.shape, tau_e)
            if unified and stride == STRIDE and precision in EXP_FAST_PRECISIONS:
                # the fast path: no floor, the x side from the S check's group sums (exp_fast_groups)
                msl = (m_new[:, 0] * sl2).astype(np.float32)
                fast = exp_fast_groups(x, msl, sflag, valid.all(axis=1), STRIDE)
                with np.errstate(divide="ignore", invalid="ignore"):
                    lpf = np.log2(p16.astype(np.float64))
                lpf = np.where(np.isnan(lpf) | np.signbit(p16), np.inf, lpf)
                xf = (sl2 * g1.astype(np.float64) - (bc // STRIDE) * msl[:, None].astype(np.float64)).astype(np.float32)
                re = np.where(fast, _group_sums(lpf, STRIDE)[0].astype(np.float64) - xf, re)
                tau_e = np.where(fast, exp_fast_threshold(bc // STRIDE, precision), tau_e)
                cnt.fast_exp_groups += int(fast.sum())
            else:
                fast = np.zeros(re.shape, dtype=bool)
            # a floored group over its threshold is judged again with its values below the normal range counted
            relief = exp_band_relief(precision) * exp_band_count(p16, STRIDE, precision)
            tau_e = np.where(~(np.abs(re) <= tau_e) & ~fast, tau_e + relief, tau_e)
            cnt.score(re, tau_e)
            for i, g in zip(*np.nonzero(~(np.abs(re) <= tau_e))):
                cols = np.arange(g, bc, STRIDE)
                if correct:
                    p16[i, cols] = round_to(np.exp2(x[i, cols]), precision)
                    cnt.hit("exp", "recomputed")
                else:
                    cnt.hit("exp", "none")
        # ---- rescale factor, row sum ---------------------------------------------------------------
        with np.errstate(invalid="ignore"):
            arg = np.where(np.isneginf(m_old), -np.inf, (m_old - m_new) * sl2).astype(np.float32)
        alpha = np.exp2(arg).astype(np.float32)
        fx.apply(alpha, "rescale", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        if snvr:
            with np.errstate(divide="ignore", invalid="ignore"):
                la = np.maximum(np.log2(alpha), -126.0)
            la = np.where(np.isnan(la), np.inf, la)
            ra = la - np.maximum(arg, -126.0)
            ta = alpha_threshold(np.maximum(arg, -126.0))
            cnt.score(ra, ta)
            for i, ln in zip(*np.nonzero(~(np.abs(ra) <= ta) | (alpha > 1.0))):
                if correct:
                    alpha[i, ln] = np.exp2(arg[i, ln])
                    cnt.hit("rescale", "recomputed")
                else:
                    cnt.hit("rescale", "none")
            with np.errstate(invalid="ignore", over="ignore"):
                lb = (lb * alpha[:, :1] + np.exp2(np.where(np.isneginf(mt), -np.inf, (mt - m_new[:, 0]) * sl2))[:, None]).astype(np.float32)
        part = np.zeros((rows, LANES), dtype=np.float32)
        for ln in range(LANES):
            part[:, ln] = p16[:, col_lane == ln].sum(axis=1, dtype=np.float32)
        lsum = (alpha * lsum + part).astype(np.float32)
        lneg = (alpha * lneg - part).astype(np.float32)
        fx.apply(lsum, "rowsum", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        m = m_new
        # ---- GEMM II with the strided V checksums --------------------------------------------------
        acol = alpha[:, ocol_lane]
        o = (acol * o + (p16 @ vt)).astype(np.float32)
        fx.apply(o, "o", j, r0, r0 + rows, lambda f: (f.row - r0, f.col))
        if strided:
            cv1, cv2 = strided_checksums(vt.T, STRIDE, 1.0 if unified else 0.0)
            cv1, cv2 = cv1.T, cv2.T  # (bc, 8)
            vhi, vlo = split16(cv1, precision)
            a8 = alpha[:, _lane_of(np.arange(STRIDE))]
            oc1 = (a8 * oc1 + (p16 @ vhi) + (p16 @ vlo)).astype(np.float32)
            oc2 = (a8 * oc2 + (p16 @ round_to(cv2, precision))).astype(np.float32)
            omag = (a8 * omag + (p16 @ group_magnitudes(vt, 1.0 if unified else 0.0, precision))).astype(np.float32)
            vmag2 = np.maximum(vmag2, np.abs(cv2).max(axis=0)[None, :])
            if not unified:  # strided: check every tile, unnormalized (omag is; max |Vc2| scales by the running row sum)
                lrow = lsum.sum(axis=1, keepdims=True)
                if _check_o(o, oc1, oc2, omag, vmag2 * np.maximum(lrow, 1e-30), n_keys, j + 1,
                            nl_o, precision, cnt, correct, False):
                    return _recompute_block(qb, kpad, vpad, r0, lq, lk, causal, precision, bc)
    # ---- end of the loop: row sum, 1/l, normalization, unified verification ------------------------
    l_row = lsum.sum(axis=1)
    if snvr:
        n_vis = _visible(lq, lk, r0, rows, causal)
        tol_l = bc * U_IN[precision] + (n_keys // bc + 1) * 4.0 * U_MUFU
        bad = ~((l_row >= lb[:, 0] * (1.0 - tol_l)) & (l_row <= n_vis * (1.0 + tol_l)))
        bad |= _row_sum_differs(lsum, lneg) & (not unified)  # efta: its unified check covers the row sum
        for i in np.nonzero(bad)[0]:
            cnt.hit("rowsum", "none" if not correct else "recomputed")
            if correct:
                return _recompute_block(qb, kpad, vpad, r0, lq, lk, causal, precision, bc)
    inv = np.repeat((np.float32(1.0) / l_row.astype(np.float32))[:, None], LANES, axis=1).astype(np.float32)
    fx.apply(inv, "inv_l", 0, r0, r0 + rows, lambda f: (f.row - r0, f.col))
    if snvr:  # efta too: a wrong 1/l large enough to overflow O's threshold would pass the unified check
        ri = l_row[:, None] * inv - 1.0
        for i, ln in zip(*np.nonzero(~(np.abs(ri) <= 4.0 * U_MUFU))):
            if correct:
                inv[i, ln] = np.float32(1.0) / l_row[i]
                cnt.hit("inv_l", "recomputed")
            else:
                cnt.hit("inv_l", "none")
    res = (o * inv[:, ocol_lane]).astype(np.float32)
    if unified:
        a8 = inv[:, _lane_of(np.arange(STRIDE))]
        if _check_o(res, (oc1 * a8).astype(np.float32), (oc2 * a8).astype(np.float32), (omag * a8).astype(np.float32),
                    vmag2, n_keys,
                    n_keys // bc + 1, nl_o, precision, cnt, correct, True):
            return _recompute_block(qb, kpad, vpad, r0, lq, lk, causal, precision, bc)
    return res


def _row_sum_differs(lsum, lneg):
    """snvr: (rows, lanes) -> (rows,), True where a lane's partial row sum ``l = alpha l + part`` and its duplicate
    ``l' = alpha l' - part`` (same alpha, part and operations; negated: not one expression to a compiler) disagree.
    Round-to-nearest is symmetric, so ``l' = -l`` exactly: a zero rounding bound, any difference is a fault."""
    return np.any(~(lsum == -lneg), axis=1)


def _visible(lq, lk, r0, rows, causal):
    i = np.arange(r0, r0 + rows)
    return np.minimum(lk, i + (lk - lq) + 1) if causal else np.full(rows, lk)


def _recompute_block(qb, kpad, vpad, r0, lq, lk, causal, precision, bc):
    """The query block again, without faults (what a kernel's recompute does)."""
    sub, d, nt = Counters(), qb.shape[1], kpad.shape[0] // bc
    return _query_block(qb, kpad, vpad, r0, lq, lk, d, bc, nt, causal, np.float32(LOG2E / math.sqrt(d)), precision, "none",
                        False, False, False, STRIDE, bc // STRIDE, d // STRIDE, P_FLOOR[precision],
                        _Faults((), precision, sub), sub, True, r0 + qb.shape[0])


def _check_o(o, oc1, oc2, mag, mag2, n_keys, n_tiles, nl, precision, cnt, correct, unified) -> bool:
    """Check the O checksums per (row, group); correct a located element in place. ``unified``: the
    checksum carries the row sum (its residual is 1 after normalization); a residual equal in both groups
    of a lane with no weighted residual is a wrong row scale (row sum or 1/l) and is corrected by rescaling
    the lane's columns; a residual of one group with no weighted residual is a fault of the checksum itself
    (O is right). ``mag``: the P-weighted group magnitudes (rows, 8) of :func:`o_threshold`, on O's scale;
    ``mag2``: the bound of |Vc2| on O's scale (the weighted checksum's rounding). Returns True when something could
    not be located: the query block is recomputed."""
    rows, d = o.shape
    ones = 1.0 if unified else 0.0
    g1, g2 = _group_sums(o, STRIDE)
    r1 = oc1.astype(np.float64) - g1 - ones
    r2 = oc2.astype(np.float64) - g2
    tau = np.broadcast_to(o_threshold(mag, n_keys, n_tiles, nl, precision), r1.shape)
    # the weighted checksum is one 16-bit column: its rounding (u_in max_c |Vc2[c, g]| after normalization) adds
    # to its residual
    tau2 = tau * (nl + 1) + U_IN[precision] * np.broadcast_to(mag2, r1.shape)
    cnt.score(r1, tau)
    flagged = ~(np.abs(r1) <= tau) | ~np.isfinite(r1)  # a non-finite residual fails even a non-finite threshold
    done = np.zeros_like(flagged)
    recompute = False
    for i, g in zip(*np.nonzero(flagged)):
        if done[i, g]:
            continue
        pair = (g - g % 2, g - g % 2 + 1)  # the lane's two groups
        if not correct:
            cnt.hit("o", "none")
            done[i, pair[0]] = done[i, pair[1]] = True
            continue
        pos = _locate(float(r1[i, g]), float(r2[i, g]), float(tau2[i, g]), nl)
        if pos < 0 and not np.isfinite(r1[i, g]) and np.isfinite(oc1[i, g]):
            pos = _nonfinite_at(o[i], g, STRIDE, nl)
        if pos >= 0:
            o[i, g + STRIDE * pos] = np.float32(float(oc1[i, g]) - ones - _others(o[i], g, pos, STRIDE, nl))
            cnt.hit("o", "corrected")
            done[i, g] = True
            continue
        # a residual without a weighted one (told apart only when |r1| > 2 tau2: a fault at l = 0 gives r2 = r1)
        quiet = [abs(r1[i, p]) > 2.0 * tau2[i, p] and abs(r2[i, p]) <= tau2[i, p] + 4.0 * (nl + 1) * U32 * abs(oc2[i, p])
                 for p in pair]
        if unified and all(flagged[i, p] for p in pair) and all(quiet):
            # a row scale: (O_c1 - sum O) / l' = l_mma / l' in both groups; the lane's O is off by that factor
            f = r1[i, pair[0]] + 1.0
            if np.isfinite(f) and f > 0 and abs(r1[i, pair[1]] - r1[i, pair[0]]) <= 2.0 * (tau[i, pair[0]] + tau[i, pair[1]]) + 1e-3 * abs(f):
                for p in pair:
                    o[i, p::STRIDE] = (o[i, p::STRIDE] / f).astype(np.float32)
                cnt.hit("o", "corrected")
                done[i, pair[0]] = done[i, pair[1]] = True
                continue
        if quiet[g % 2] and not flagged[i, pair[1 - g % 2]]:
            cnt.hit("o", "corrected")  # only the checksum is off: O is right
            done[i, g] = True
            continue
        cnt.hit("o", "recomputed")
        done[i] = True
        recompute = True
    return recompute


# --------------------------------------------------------------------------------------------
# The decoupled baseline: ABFT GEMM, DMR softmax, ABFT GEMM
# --------------------------------------------------------------------------------------------


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # a fault may make a sum Inf or NaN, as on the GPU
def decoupled_forward(q, k, v, *, precision="fp16", causal=False, faults=(), correct=True, scale=None):
    """Three kernels over a materialized L x L score matrix: S = Q K^T with classic row checksums (K's row
    sum and weighted row sum; locate, correct), the softmax twice (a mismatch: a third time), O = P V with
    classic row checksums of V. Fault sites: qk (S), rowmax, exp, p16, rowsum, inv_l (the first softmax
    copy), o (O); ``tile`` is ignored."""
    q, k, v = (round_to(a, precision) for a in (q, k, v))
    lq, d = q.shape
    lk = k.shape[0]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    sl2 = np.float32(scale * LOG2E)
    cnt = Counters()
    fx = _Faults([Fault(f.site, f.row, 0, f.col, f.kind, f.bit, f.offset) for f in faults], precision, cnt)
    # ---- kernel 1: S with classic checksums
    s = (q @ k.T).astype(np.float32)
    fx.apply(s, "qk", 0, 0, lq, lambda f: (f.row, f.col))
    kc1 = k.astype(np.float64).sum(axis=0)
    kc2 = (k.astype(np.float64) * np.arange(1, lk + 1)[:, None]).sum(axis=0)
    r1 = (q.astype(np.float64) @ kc1) - s.sum(axis=1, dtype=np.float64)
    r2 = (q.astype(np.float64) @ kc2) - (s.astype(np.float64) * np.arange(1, lk + 1)).sum(axis=1)
    bnd = np.abs(q.astype(np.float64)) @ np.abs(k.astype(np.float64)).T
    tau = bnd.sum(axis=1) * (2 * U_ACC * (C_SQRT * math.sqrt(d) + C_CONST) + lk * U32)
    cnt.score(r1, tau)
    for i in np.nonzero(~(np.abs(r1) <= tau))[0]:
        pos = _locate(float(r1[i]), float(r2[i]), float(tau[i]) * (lk + 1), lk)
        if not correct:
            cnt.hit("qk", "none")
        elif pos >= 0:
            s[i, pos] = np.float32(q[i].astype(np.float64) @ kc1 - np.delete(s[i], pos).sum(dtype=np.float64))
            cnt.hit("qk", "corrected")
        else:
            s[i] = (q[i] @ k.T).astype(np.float32)
            cnt.hit("qk", "recomputed")
    # ---- kernel 2: softmax, twice
    def softmax(faulty: bool):
        f = fx if faulty else _Faults((), precision, Counters())
        ss = np.where(causal_mask(lq, lk), s, -np.inf) if causal else s.copy()
        mx = ss.max(axis=1).astype(np.float32)
        f.apply(mx, "rowmax", 0, 0, lq, lambda t: t.row)
        with np.errstate(over="ignore", invalid="ignore"):
            p = np.exp2((ss * sl2 - mx[:, None] * sl2)).astype(np.float32)
        f.apply(p, "exp", 0, 0, lq, lambda t: (t.row, t.col))
        ls = p.sum(axis=1, dtype=np.float32)
        f.apply(ls, "rowsum", 0, 0, lq, lambda t: t.row)
        inv = (np.float32(1.0) / ls).astype(np.float32)
        f.apply(inv, "inv_l", 0, 0, lq, lambda t: t.row)
        pn = round_to(p * inv[:, None], precision)
        f.apply(pn, "p16", 0, 0, lq, lambda t: (t.row, t.col))
        return pn
    p1 = softmax(True)
    p2 = softmax(False)
    bad_rows = np.nonzero(~np.all((p1 == p2) | (np.isnan(p1) & np.isnan(p2)), axis=1))[0]
    for i in bad_rows:
        if correct:
            p1[i] = p2[i]  # the third copy agrees with the second
            cnt.hit("softmax", "recomputed")
        else:
            cnt.hit("softmax", "none")
    # ---- kernel 3: O with classic checksums
    o = (p1 @ v).astype(np.float32)
    fx.apply(o, "o", 0, 0, lq, lambda f: (f.row, f.col))
    vc1 = v.astype(np.float64).sum(axis=1)
    vc2 = (v.astype(np.float64) * np.arange(1, d + 1)[None, :]).sum(axis=1)
    r1 = p1.astype(np.float64) @ vc1 - o.sum(axis=1, dtype=np.float64)
    r2 = p1.astype(np.float64) @ vc2 - (o.astype(np.float64) * np.arange(1, d + 1)).sum(axis=1)
    mag = p1.astype(np.float64) @ np.abs(v.astype(np.float64)).sum(axis=1)
    tau = mag * (2 * U_ACC * (C_SQRT * math.sqrt(lk) + C_CONST) + d * U32)
    cnt.score(r1, tau)
    for i in np.nonzero(~(np.abs(r1) <= tau))[0]:
        pos = _locate(float(r1[i]), float(r2[i]), float(tau[i]) * (d + 1), d)
        if not correct:
            cnt.hit("o", "none")
        elif pos >= 0:
            o[i, pos] = np.float32(p1[i].astype(np.float64) @ vc1 - np.delete(o[i], pos).sum(dtype=np.float64))
            cnt.hit("o", "corrected")
        else:
            o[i] = (p1[i] @ v).astype(np.float32)
            cnt.hit("o", "recomputed")
    return o, cnt


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def inputs(kind: str, lq: int, lk: int, d: int, seed: int = 0):
    """Q, K, V of a distribution: ``normal`` N(0,1), ``uniform`` U(-1,1), ``outlier`` N(0,1) with one element
    in 1000 drawn from N(0,100) (standard deviation 100)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (lq, lk, lk):
        if kind == "normal":
            a = rng.standard_normal((n, d))
        elif kind == "uniform":
            a = rng.uniform(-1.0, 1.0, (n, d))
        elif kind == "outlier":
            a = rng.standard_normal((n, d))
            mask = rng.random((n, d)) < 1e-3
            a[mask] = rng.normal(0.0, 100.0, mask.sum())
        else:
            raise ValueError(f"input kind {kind!r} is not normal, uniform or outlier")
        out.append(a.astype(np.float32))
    return tuple(out)


def max_error(o, q, k, v, precision: str, causal: bool, normalized_p: bool = False):
    """Largest ``|O - O_ref|`` over its bound ``s * tol + floor`` (:func:`output_tolerance`, :func:`output_floor`;
    <= 1: within), of rounded inputs. ``normalized_p``: the decoupled baseline's P (see :func:`output_floor`)."""
    qr, kr, vr = (round_to(a, precision) for a in (q, k, v))
    ref, s = reference(qr, kr, vr, causal)
    tol = output_tolerance(qr, kr, precision, kr.shape[0], n_tiles=-(-kr.shape[0] // 16))
    bound = s * tol[:, None] + output_floor(qr, kr, vr, precision, causal, normalized_p=normalized_p)
    err = np.abs(np.asarray(o, dtype=np.float64) - ref) / bound
    err = np.where(np.isfinite(err), err, np.inf)
    return float(np.max(err))
