"""The attention family's NumPy model: flash attention with an online softmax, and its protection levels
(strided, snvr, efta, decoupled) on clean inputs and on single faults at every site."""

from __future__ import annotations

import numpy as np
import pytest

from ftgen.families.attention import model as M

# which sites each level detects and corrects (the rest pass through it undetected by design)
COVERS = {
    "strided": {"qk", "o"},
    "snvr": {"rowmax", "exp", "p16", "rowsum", "rescale", "inv_l"},
    "efta": set(M.SITES),
    "decoupled": set(M.SITES) - {"rescale"},  # no online softmax: nothing is rescaled
}


def _faults(site: str, row: int, tile: int, col: int):
    """Bit flips (exponent bits included) and offsets of both signs at one place."""
    bits = (14, 12, 10, 9) if site == "p16" else (30, 27, 25, 23, 22)
    out = [M.Fault(site, row, tile, col, "bitflip", b) for b in bits]
    out += [M.Fault(site, row, tile, col, "offset", offset=x) for x in (1.0, -0.3, 4.0)]
    return out


def _col(site: str) -> int:
    return {"qk": 13, "exp": 13, "p16": 13, "o": 21}.get(site, 1)


@pytest.mark.parametrize("kind", ["normal", "uniform", "outlier"])
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_clean_inputs_raise_nothing_and_match_the_reference(kind, precision, causal):
    q, k, v = M.inputs(kind, 200, 200, 64, seed=11)
    for level in M.LEVELS:
        o, c = M.flash_forward(q, k, v, precision=precision, level=level, causal=causal)
        assert c.detected == 0 and c.injected == 0, (level, c)
        assert c.max_score < 1.0
        assert M.max_error(o, q, k, v, precision, causal, normalized_p=level == "decoupled") <= 1.0, level


@pytest.mark.parametrize("d,lq,lk", [(128, 97, 131), (64, 1, 70), (64, 64, 130)])
def test_odd_lengths_head_dim_128_and_uneven_causal(d, lq, lk):
    q, k, v = M.inputs("outlier", lq, lk, d, seed=5)
    for causal in (False, True):
        for level in M.LEVELS:
            o, c = M.flash_forward(q, k, v, precision="fp16", level=level, causal=causal)
            assert c.detected == 0, (level, causal, c)
            assert M.max_error(o, q, k, v, "fp16", causal) <= 1.0


def test_many_clean_seeds_keep_a_margin_below_every_threshold():
    worst = 0.0
    for seed in range(12):
        for kind in ("normal", "uniform", "outlier"):
            q, k, v = M.inputs(kind, 96, 192, 64, seed=seed)
            _, c = M.flash_forward(q, k, v, precision="bf16" if seed % 2 else "fp16", level="efta", causal=seed % 3 == 0)
            assert c.detected == 0
            worst = max(worst, c.max_score)
    assert worst < 0.9


@pytest.mark.parametrize("site", M.SITES)
def test_a_single_fault_at_each_site_is_detected_and_corrected_where_the_level_covers_it(site):
    q, k, v = M.inputs("normal", 160, 160, 64, seed=3)
    significant = 0
    for f in _faults(site, row=70, tile=1, col=_col(site)):
        o, c = M.flash_forward(q, k, v, precision="fp16", level="none", faults=[f])
        assert c.injected == 1
        significant += M.max_error(o, q, k, v, "fp16", False) > 1.0
        for level, sites in COVERS.items():
            # significant for this level: its output with correction off is beyond the tolerance
            o1, _ = M.flash_forward(q, k, v, precision="fp16", level=level, faults=[f], correct=False)
            bad = M.max_error(o1, q, k, v, "fp16", False) > 1.0
            o2, c2 = M.flash_forward(q, k, v, precision="fp16", level=level, faults=[f])
            err = M.max_error(o2, q, k, v, "fp16", False)
            if site in sites:
                assert err <= 1.0, (level, f, c2)  # corrected (in place or by recomputation) or insignificant
                if bad:
                    assert c2.detected >= 1 and c2.corrected + c2.recomputed >= 1 and c2.uncorrectable == 0, (level, f)
            if c2.detected:
                assert c2.corrected + c2.recomputed >= 1 or c2.uncorrectable >= 1
    assert significant >= 2  # the fault list hits the output: the checks above are not vacuous


@pytest.mark.parametrize("site", ["qk", "o", "exp", "rescale", "inv_l"])
def test_bf16_and_causal_faults_are_caught_too(site):
    q, k, v = M.inputs("outlier", 150, 150, 64, seed=8)
    for f in _faults(site, row=130, tile=1, col=_col(site)):
        o0, _ = M.flash_forward(q, k, v, precision="bf16", level="none", causal=True, faults=[f])
        o, c = M.flash_forward(q, k, v, precision="bf16", level="efta", causal=True, faults=[f])
        assert M.max_error(o, q, k, v, "bf16", True) <= 1.0, (f, c)
        if M.max_error(o0, q, k, v, "bf16", True) > 1.0:
            assert c.detected >= 1


def test_correction_off_detects_but_leaves_the_fault():
    q, k, v = M.inputs("normal", 128, 128, 64, seed=2)
    f = M.Fault("o", row=10, tile=1, col=5, kind="offset", offset=4.0)
    o, c = M.flash_forward(q, k, v, level="efta", faults=[f], correct=False)
    assert c.detected == 1 and c.corrected == 0 and c.recomputed == 0
    assert M.max_error(o, q, k, v, "fp16", False) > 1.0
    o, c = M.flash_forward(q, k, v, level="efta", faults=[f])
    assert c.corrected + c.recomputed == 1 and M.max_error(o, q, k, v, "fp16", False) <= 1.0


def test_a_located_fault_is_corrected_in_place():
    q, k, v = M.inputs("normal", 64, 128, 64, seed=4)
    for site, col in (("qk", 37), ("o", 44)):
        f = M.Fault(site, row=9, tile=1, col=col, kind="bitflip", bit=30)
        o, c = M.flash_forward(q, k, v, level="strided", faults=[f])
        assert (c.detected, c.corrected, c.recomputed) == (1, 1, 0), (site, c)
        assert M.max_error(o, q, k, v, "fp16", False) <= 1.0


def test_a_wrong_row_sum_inside_the_range_is_caught_by_snvrs_duplicate_and_by_efta():
    """A wrong partial row sum inside the range [sum_j 2^{(m_j - m) s}, n_keys] passes the range check; snvr's
    duplicated accumulation catches it (tests/test_attention_snvr_rowsum.py), efta its unified O check."""
    q, k, v = M.inputs("normal", 128, 128, 64, seed=6)
    f = M.Fault("rowsum", row=40, tile=1, col=2, kind="offset", offset=1.0)
    for level in ("snvr", "efta"):
        o, c = M.flash_forward(q, k, v, level=level, faults=[f])
        assert c.detected >= 1 and M.max_error(o, q, k, v, "fp16", False) <= 1.0, level
    # out of range (an exponent flip to a huge sum) both checks of snvr see it: one detection of the row
    f = M.Fault("rowsum", row=40, tile=1, col=2, kind="bitflip", bit=27)
    o, c = M.flash_forward(q, k, v, level="snvr", faults=[f])
    assert c.detected == 1 and M.max_error(o, q, k, v, "fp16", False) <= 1.0


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_efta_exp_check_fast_path_sees_what_the_floored_check_sees(precision, monkeypatch):
    """efta's exp check without the floor, its x side from the S check's group sums (exp_fast_groups): taken on most
    groups of i.i.d. inputs, silent on clean ones, and every significant exp fault detected and repaired with it as
    with the floored check (turned on everywhere by an |msl| bound of -1). Their thresholds differ by the fast path's
    rounding terms, so a flip of a few percent of one exp may be seen by one and not the other: never a significant one."""
    monkeypatch.setattr(M, "EXP_FAST_PRECISIONS", ("fp16", "bf16"))  # the algorithm holds for both
    q, k, v = M.inputs("normal", 128, 384, 128, seed=4)
    _, c = M.flash_forward(q, k, v, precision=precision, level="efta", bc=128)
    assert c.detected == 0 and c.max_score < 0.5
    assert c.fast_exp_groups >= 0.9 * 128 * 3 * M.STRIDE
    rng = np.random.default_rng(7)
    faults = [M.Fault(site, int(rng.integers(128)), int(rng.integers(3)), int(rng.integers(128)), "bitflip",
                      int(rng.integers(16 if site == "p16" else 32))) for site in ("exp", "p16") * 20]
    faults += [M.Fault("p16", 9, 1, 33, "offset", offset=x) for x in (-0.01, 0.003, 1.0)]
    significant = 0
    for f in faults:
        o, _ = M.flash_forward(q, k, v, precision=precision, level="efta", bc=128, faults=[f], correct=False)
        bad = M.max_error(o, q, k, v, precision, False) > 1.0
        significant += bad
        for msl in (M.EXP_FAST_MSL, -1.0):
            monkeypatch.setattr(M, "EXP_FAST_MSL", msl)
            o, c = M.flash_forward(q, k, v, precision=precision, level="efta", bc=128, faults=[f])
            assert M.max_error(o, q, k, v, precision, False) <= 1.0, (f, msl)
            if bad:
                assert c.by_check.get("exp", 0) >= 1, (f, msl)
        monkeypatch.setattr(M, "EXP_FAST_MSL", 64.0)
    assert significant >= 3


def test_a_row_max_copy_is_outvoted_by_the_other_lanes():
    q, k, v = M.inputs("uniform", 64, 192, 64, seed=9)
    f = M.Fault("rowmax", row=3, tile=2, col=3, kind="offset", offset=-2.0)
    o, c = M.flash_forward(q, k, v, level="snvr", faults=[f])
    assert (c.detected, c.corrected) == (1, 1) and c.by_check == {"rowmax": 1}
    assert M.max_error(o, q, k, v, "fp16", False) <= 1.0


def _two_fault_coverage(stride: int, trials: int = 40) -> float:
    """Share of two faults in one row of one tile (random columns) corrected in place."""
    rng = np.random.default_rng(1)
    q, k, v = M.inputs("normal", 64, 64, 64, seed=1)
    fixed = 0
    for _ in range(trials):
        a, b = rng.choice(64, size=2, replace=False)
        fs = [M.Fault("qk", 5, 0, int(a), "offset", offset=3.0), M.Fault("qk", 5, 0, int(b), "offset", offset=-5.0)]
        o, c = M.flash_forward(q, k, v, level="strided", faults=fs, stride=stride)
        assert M.max_error(o, q, k, v, "fp16", False) <= 1.0  # located, or the row recomputed
        fixed += c.corrected == 2 and c.recomputed == 0
    return fixed / trials


def test_strided_checksums_locate_more_than_a_classic_checksum():
    """Stride 8: two faults in one row are located unless their columns are 8 apart (7/8 of pairs); the
    classic checksum (one per row of the tile: stride 1) cannot locate two and recomputes."""
    strided, classic = _two_fault_coverage(8), _two_fault_coverage(1)
    assert classic == 0.0
    assert strided >= 0.75


def test_decoupled_baseline_verifies_each_kernel():
    q, k, v = M.inputs("normal", 96, 96, 64, seed=7)
    for site in ("qk", "exp", "rowsum", "o"):
        f = M.Fault(site, row=50, col=_col(site), kind="offset", offset=4.0)
        o, c = M.flash_forward(q, k, v, level="decoupled", faults=[f])
        assert c.detected == 1 and M.max_error(o, q, k, v, "fp16", False) <= 1.0, site


def test_rounding_and_flips():
    assert M.round_bf16(np.float32(1.0 + 2.0**-9))[()] == 1.0  # tie to even
    assert M.round_bf16(np.float32(1.0 + 3 * 2.0**-9))[()] == np.float32(1.0 + 2.0**-7)
    assert M.flip(1.0, 23) == 0.5 and M.flip(1.0, 30) == float("inf") or M.flip(1.0, 30) > 1e38
    assert M.flip(1.0, 10, "fp16") == 0.5
    with pytest.raises(ValueError):
        M.flash_forward(*M.inputs("normal", 8, 8, 64), level="bogus")
    with pytest.raises(ValueError):
        M.flash_forward(*M.inputs("normal", 8, 8, 64), faults=[M.Fault("nowhere", 0)])


def test_the_reference_is_softmax_attention():
    q, k, v = M.inputs("normal", 5, 7, 8, seed=0)
    ref, s = M.reference(q, k, v, causal=True)
    for i in range(5):
        vis = i + 2 + 1  # queries are the last 5 of 7 positions
        logits = np.array([q[i].astype(np.float64) @ k[c].astype(np.float64) for c in range(vis)], dtype=np.float64) / np.sqrt(8)
        w = np.exp(logits - logits.max())
        w /= w.sum()
        assert np.allclose(ref[i], w @ v[:vis].astype(np.float64), rtol=1e-12, atol=1e-12)
        assert np.allclose(s[i], w @ np.abs(v[:vis].astype(np.float64)))


@pytest.mark.parametrize("level", ["snvr", "efta"])
def test_an_exp_of_zero_flipped_to_the_smallest_normal_is_caught_beside_an_outlier(level, monkeypatch):
    """fp16: a P of exactly 0 whose exponent bit 10 flips becomes 2^-14, fp16's smallest normal value; with a V of
    10^4 at that key the output moves past its tolerance. The exp check floors both sides one binade lower (P_FLOOR),
    so the flipped value stands above the floor and the group is recomputed; with the floor at 2^-14 the exp check
    does not see it."""
    q, k, v = M.inputs("normal", 64, 128, 64, seed=3)
    k[37] = -40.0 * q[5] / np.linalg.norm(q[5])  # row 5's score at key 37: far below its max, P = 0
    v[37] = 1.0e4
    f = M.Fault("p16", 5, 0, 37, "bitflip", 10)
    o0, _ = M.flash_forward(q, k, v, precision="fp16", level="none", faults=[f])
    assert M.max_error(o0, q, k, v, "fp16", False) > 1.0  # significant
    o, c = M.flash_forward(q, k, v, precision="fp16", level=level, faults=[f])
    assert c.by_check.get("exp", 0) >= 1 and M.max_error(o, q, k, v, "fp16", False) <= 1.0
    monkeypatch.setitem(M.P_FLOOR, "fp16", -14.0)  # the floor at fp16's smallest normal value
    _, c = M.flash_forward(q, k, v, precision="fp16", level=level, faults=[f])
    assert c.by_check.get("exp", 0) == 0


def test_values_below_the_normal_range_widen_a_failing_groups_threshold_only():
    """exp_band_relief: what the floored check's threshold adds per fp16 value in [2^-15, 2^-14) when a group fails it:
    their rounding (up to 2^-10 relative) beyond the u_in the threshold counts; nothing for bf16."""
    assert M.exp_band_relief("fp16") == pytest.approx((2.0**-10 - 2.0**-11) * M.LOG2E * 1.01)
    assert M.exp_band_relief("bf16") == 0.0
    bits = [0x0200, 0x0400, 0x0000, 0x01FF, 0x83FF, 0x3C00, 0x03FF, 0x0100]  # 2^-15, 2^-14, 0, below 2^-15, ...
    p = np.array([bits], dtype=np.uint16).view(np.float16).astype(np.float32)
    assert M.exp_band_count(p, 1, "fp16").tolist() == [[3]]  # 2^-15, -(2^-14 - 2^-24), 2^-14 - 2^-24
    assert M.exp_band_count(p, 1, "bf16").tolist() == [[0]]
