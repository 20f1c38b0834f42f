"""The attention output's verification bound on outlier inputs (N(0,1), one value in 1000 from N(0, 100^2)).

An outlier in q or k spreads a row's logits over tens, so one key takes nearly all the weight and every other
P = exp(s - max) falls below fp16's normal range (2^-14), where its rounding is absolute (up to 2^-25), not relative
(u_in). Where the dominant key's V is small, that error is large against s = sum_c w_c |V_c|, the scale of the
relative tolerance: the bound needs the absolute term of model.output_floor (the bench's ftgen_attention_ref.cuh
computes the same per element)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftgen.families.attention import model as M

L, D, SEED = 128, 128, 40  # a seed whose rows include one dominated by a key with a small V


def _inputs():
    return M.inputs("outlier", L, L, D, seed=SEED)


def _relative_only(o, q, k, v, causal):
    """|O - O_ref| / (s tol): the bound without its absolute floor."""
    qr, kr, vr = (M.round_to(a, "fp16") for a in (q, k, v))
    ref, s = M.reference(qr, kr, vr, causal)
    tol = M.output_tolerance(qr, kr, "fp16", L, n_tiles=L // 16)
    return float(np.max(np.abs(np.asarray(o, dtype=np.float64) - ref) / (s * tol[:, None])))


def _single_pass(q, k, v, causal, keep_small):
    """O with P = exp2(s sl2 - max sl2) rounded into fp16 (one key tile: the row's final max) and O rounded into fp16;
    ``keep_small``: P below fp16's normal range and O kept in fp32 instead (what u_in alone would bound)."""
    qr, kr, vr = (M.round_to(a, "fp16") for a in (q, k, v))
    sl2 = np.float32(M.LOG2E / math.sqrt(D))
    s = (qr @ kr.T).astype(np.float32)
    if causal:
        s = np.where(M.causal_mask(L, L), s, -np.inf).astype(np.float32)
    m = s.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        p = np.exp2((s * sl2 - m * sl2).astype(np.float32)).astype(np.float32)
    p16 = M.round_to(p, "fp16")
    if keep_small:
        p16 = np.where(p < 2.0**-14, p, p16)
    o = (p16.astype(np.float64) @ vr.astype(np.float64)) / p16.sum(axis=1, dtype=np.float64)[:, None]
    return o if keep_small else M.round_to(o, "fp16")


@pytest.mark.parametrize("causal", [False, True])
def test_clean_fp16_outputs_on_outliers_exceed_the_relative_tolerance_and_stay_within_the_bound(causal):
    q, k, v = _inputs()
    for level in ("none", "efta"):
        o, c = M.flash_forward(q, k, v, precision="fp16", level=level, causal=causal, bc=64)
        o16 = M.round_to(o, "fp16")  # the kernel writes O in fp16
        assert c.detected == 0, (level, c)
        assert _relative_only(o16, q, k, v, causal) > 3.0, level  # the relative tolerance alone fails a clean output
        assert M.max_error(o16, q, k, v, "fp16", causal) <= 0.5, level


@pytest.mark.parametrize("causal", [False, True])
def test_the_excess_is_the_rounding_of_p_below_the_normal_range(causal):
    q, k, v = _inputs()
    assert _relative_only(_single_pass(q, k, v, causal, keep_small=False), q, k, v, causal) > 3.0
    assert _relative_only(_single_pass(q, k, v, causal, keep_small=True), q, k, v, causal) <= 0.5
    assert M.max_error(_single_pass(q, k, v, causal, keep_small=False), q, k, v, "fp16", causal) <= 0.5


def test_the_floor_loosens_rows_without_outliers_by_little():
    q, k, v = (M.round_to(a, "fp16") for a in M.inputs("normal", L, L, D, seed=SEED))
    _, s = M.reference(q, k, v, False)
    tol = M.output_tolerance(q, k, "fp16", L, n_tiles=L // 16)[:, None]
    assert np.max(M.output_floor(q, k, v, "fp16", False) / (s * tol)) < 0.01


def test_the_floor_is_eta_times_the_row_terms():
    q, k, v = (M.round_to(a, "fp16") for a in _inputs())
    s64 = (q.astype(np.float64) @ k.astype(np.float64).T) / math.sqrt(D)
    w = np.exp(s64 - s64.max(axis=1, keepdims=True))
    l = w.sum(axis=1, keepdims=True)
    a = np.abs(v.astype(np.float64)).sum(axis=0)[None, :]
    s = (w / l) @ np.abs(v.astype(np.float64))
    assert np.allclose(M.output_floor(q, k, v, "fp16", False), 2.0**-25 * (1.0 + (a + L * s) / l))
    assert np.allclose(M.output_floor(q, k, v, "fp16", False, normalized_p=True), 2.0**-25 * (1.0 + a))
    assert np.all(M.output_floor(q, k, v, "bf16", False) < 1e-30)  # bf16: only the fp32 flush to zero


@pytest.mark.parametrize("causal", [False, True])
def test_planted_wrong_outputs_are_still_rejected(causal):
    q, k, v = _inputs()
    o, _ = M.flash_forward(q, k, v, precision="fp16", level="none", causal=causal, bc=64)
    o16 = M.round_to(o, "fp16").astype(np.float64)
    qr, kr, vr = (M.round_to(a, "fp16") for a in (q, k, v))
    ref, s = M.reference(qr, kr, vr, causal)
    tol = M.output_tolerance(qr, kr, "fp16", L, n_tiles=L // 16)[:, None]
    floor = M.output_floor(qr, kr, vr, "fp16", causal)
    # 1% of the error scale everywhere
    assert M.max_error(o16 + 0.01 * s, q, k, v, "fp16", causal) > 1.0
    # the element where the floor is largest against s tol (a dominant key with a small V): an error of 1e-4 there
    i, j = np.unravel_index(np.argmax(floor / (s * tol)), s.shape)
    assert floor[i, j] > 5.0 * s[i, j] * tol[i, 0]
    bad = o16.copy()
    bad[i, j] += 1e-4
    assert M.max_error(bad, q, k, v, "fp16", causal) > 1.0
    # a wrong row: the row's output of the next query
    bad = o16.copy()
    bad[i] = o16[(i + 1) % L]
    assert M.max_error(bad, q, k, v, "fp16", causal) > 1.0
    # an uncorrected fault: an exponent bit of P at the row's dominant key
    c = int(np.argmax(np.where(M.causal_mask(L, L)[i] if causal else True, qr[i] @ kr.T, -np.inf)))
    f = M.Fault("p16", int(i), c // 64, c % 64, "bitflip", 13)
    of, cnt = M.flash_forward(q, k, v, precision="fp16", level="none", causal=causal, bc=64, faults=[f])
    assert cnt.injected == 1
    assert M.max_error(M.round_to(of, "fp16"), q, k, v, "fp16", causal) > 1.0
