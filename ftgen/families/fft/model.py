"""NumPy CPU model of the ``fft`` kernels: the same launches, sub-passes, codelet layers, twiddles and checks,
vectorised over columns. Used by the tests and to calibrate the detection constants of :mod:`.plan`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..base import UNIT_ROUNDOFF, ModelCounters
from .plan import (
    K_1S,
    K_TB,
    K_TH,
    LOCATE_K,
    LOCATE_TOL,
    TB_PRE,
    TWIDDLE_FRESH,
    fused_bound,
    LaunchPlan,
    codelet_layers,
    ilog2,
    make_plan,
)
from .tuning import resolve_params


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
class ModelReport(ModelCounters):
    false_alarms: int = 0
    located: list = field(default_factory=list)  # (launch, column) corrections applied
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
    @np.errstate(over="ignore", invalid="ignore")  # a fault may make a residual Inf or NaN, as on the GPU
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
            # TurboFFT's baseline recovery (and the fallback of an ambiguous location): recompute
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
                # the quotient is trusted only where r1 stands above what the columns' rounding can move it by
                rmin = LOCATE_K * max(Lg - 1, 1) * u * math.sqrt(ilog2(R) + 1) * math.sqrt(R * nsum)
            if r1.real * r1.real + r1.imag * r1.imag >= rmin * rmin and math.isfinite(q.real) and math.isfinite(q.imag):
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
