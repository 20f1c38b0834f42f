"""The model of the threadblock ABFT planned for the kmeans cutlass90 backend (ftgen/families/kmeans/model.py: assign90):
the gemm backend's 16-bit check on TF32 operands -- the accumulators' row sums per tile of centroids against references
from the tiles' encodings split into TF32 high and low parts, the rule abft16_verdict at lambda 2^-24 (ceil(dims / 8) +
n_tb + 1), a flagged tile's nearest centroid recomputed. On the CPU: clean data of every distribution raises no alarm,
with a wide margin; every significant single fault (a label outside its rounding band without correction) is detected
and corrected; a threshold 10^7 times weaker misses some (the tests can fail)."""

from __future__ import annotations

import numpy as np
import pytest

from ftgen.families.kmeans import model as m


def data(dist: str, n: int, dims: int, k: int, seed: int):
    rng = np.random.default_rng(seed)
    if dist == "blobs":
        X, _ = m.blobs(n, dims, k, seed=seed)
    elif dist == "normal":
        X = rng.standard_normal((n, dims))
    elif dist == "uniform":
        X = rng.uniform(-1, 1, (n, dims))
    else:  # log-uniform magnitudes 1e-3..1e3, random signs
        X = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), (n, dims))) * rng.choice([-1, 1], (n, dims))
    X = np.asarray(X, np.float32)
    return X, X[rng.choice(n, k, replace=False)].copy(), rng


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform", "blobs"])
@pytest.mark.parametrize("dims, k", [(8, 128), (32, 7), (100, 300)])
def test_clean_data_raise_no_alarm_with_a_wide_margin(dist, dims, k):
    X, C, _ = data(dist, 512, dims, k, seed=dims + k)
    labels, verdicts, clean, counters = m.assign90(X, C)
    assert verdicts == {} and counters.detected == 0
    assert clean < 0.1, clean  # (the 16-bit check's lambda leaves a 4x margin on bf16 data; TF32 operands leave more)
    assert m.check_labels(X, C, labels, "tf32")[1] == 0


def _trials(dist: str, trials: int, lam: float | None = None, prefilter: bool = False, tf32x3: bool = False):
    """Single bit flips, half of them in the accumulator of a row's nearest centroid (where a flip can change the
    label), bits 16..31 (tf32x3, whose fp32 band makes smaller faults significant: 8..31): per trial (significant:
    labels outside their band without correction, detected, labels outside their band after correction)."""
    X, C, rng = data(dist, 256, 64, 200, seed=11)
    kw = ({} if lam is None else {"lam": lam}) | ({"prefilter": True} if prefilter else {}) | ({"tf32x3": True} if tf32x3 else {})
    prec = "tf32x3" if tf32x3 else "tf32"
    clean_labels = m.assign90(X, C, **kw)[0]
    out = []
    for t in range(trials):
        i = int(rng.integers(X.shape[0]))
        j = int(clean_labels[i]) if t % 2 == 0 else int(rng.integers(C.shape[0]))
        fault = [(i, j, int(rng.integers(8 if tf32x3 else 16, 32)))]
        uncorrected = m.assign90(X, C, faults=fault, correct=False, **kw)[0]
        labels, verdicts, _, _ = m.assign90(X, C, faults=fault, **kw)
        out.append((m.check_labels(X, C, uncorrected, prec)[1] > 0, bool(verdicts), m.check_labels(X, C, labels, prec)[1]))
    return out


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
def test_every_significant_fault_is_detected_and_corrected(dist):
    out = _trials(dist, 80)
    significant = [o for o in out if o[0]]
    assert len(significant) >= 5, len(significant)  # (the trials reach the labels)
    assert all(detected for _, detected, _ in significant)
    assert all(outside == 0 for _, _, outside in out)  # corrected, or insignificant


def test_a_check_that_sees_only_huge_residuals_misses_significant_faults():
    out = _trials("normal", 60, lam=1e7 * m._g.ABFT16_LAMBDA)
    assert any(sig and not detected for sig, detected, _ in out)
    assert any(outside > 0 for _, _, outside in out)


def test_a_located_fault_is_corrected_in_place_and_detect_recomputes():
    """online: the located accumulator is replaced (r minus the row's other elements), nothing recomputed; correct: detect
    (online False): the same detection recomputes the (row, tile); both give the clean label back."""
    X, C, _ = data("normal", 256, 64, 200, seed=11)
    clean = m.assign90(X, C)[0]
    i = 5
    j = int(clean[i])
    fault = [(i, j, 30)]  # (the exponent's top bit: the nearest centroid's product made tiny or huge)
    assert m.assign90(X, C, faults=fault, correct=False)[0][i] != clean[i]
    labels, verdicts, _, c = m.assign90(X, C, faults=fault)
    assert verdicts == {(i, j // 128): j % 128} and (c.detected, c.corrected, c.recomputed) == (1, 1, 0)
    labels2, _, _, c2 = m.assign90(X, C, faults=fault, online=False)
    assert (c2.detected, c2.corrected, c2.recomputed) == (1, 0, 1)
    assert labels[i] == labels2[i] == clean[i]


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform", "blobs"])
def test_the_norm_prefilter_keeps_every_significant_fault(dist):
    """The kernel's cheaper first stage (model.norm_prefilter_clean: the unweighted residual against
    lambda u (...) ||x|| sum ||c_j||): no clean alarm, and every significant single fault still detected and corrected."""
    X, C, _ = data(dist, 512, 32, 300, seed=5)
    labels, verdicts, _, counters = m.assign90(X, C, prefilter=True)
    assert verdicts == {} and counters.detected == 0
    assert m.check_labels(X, C, labels, "tf32")[1] == 0
    out = _trials(dist if dist != "blobs" else "normal", 60, prefilter=True)
    significant = [o for o in out if o[0]]
    assert len(significant) >= 3, len(significant)
    assert all(detected for _, detected, _ in significant)
    assert all(outside == 0 for _, _, outside in out)


def test_the_norm_bound_is_an_upper_bound_of_the_sums():
    """||x|| sum ||c_j|| >= sum |x . c_j| (Cauchy-Schwarz): the prefilter's threshold is never below the full rule's
    unweighted one, so it raises no alarm on a unit the full rule passes on d."""
    X, C, _ = data("loguniform", 256, 16, 64, seed=2)
    nx = np.sqrt((X.astype(np.float64) ** 2).sum(1))
    nc = np.sqrt((C.astype(np.float64) ** 2).sum(1)).sum()
    assert np.all(nx * nc >= np.abs(X.astype(np.float64) @ C.T.astype(np.float64)).sum(1) * (1 - 1e-6))
    unit = 1e-6
    assert not m.norm_prefilter_clean(10.0, 0.0, 1.0, 1.0, unit) and m.norm_prefilter_clean(1e-7, 0.0, 1.0, 1.0, unit)
    assert not m.norm_prefilter_clean(float("nan"), 0.0, 1.0, 1.0, unit)


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform", "blobs"])
def test_tf32x3_over_a_tripled_k_is_clean_and_within_the_fp32_band(dist):
    """tf32x3 on the cutlass90 backend (model.split3: the operands over a tripled K, the encodings [v | 0 | v]): clean data
    raise no alarm (as the kernel runs it, the first stage included), and the labels are within fp32's band, where
    tf32's are not always."""
    X, C, _ = data(dist, 512, 100, 300, seed=9)
    for prefilter in (False, True):
        labels, verdicts, clean, counters = m.assign90(X, C, tf32x3=True, prefilter=prefilter)
        assert verdicts == {} and counters.detected == 0 and clean < 0.1, clean
        assert m.check_labels(X, C, labels, "tf32x3")[1] == 0


def test_tf32x3_labels_are_the_fp64_labels_where_tf32_decides_near_ties_otherwise():
    X = np.random.default_rng(9).standard_normal((4096, 100)).astype(np.float32)
    C = X[np.random.default_rng(10).choice(4096, 300, replace=False)].copy()
    assert m.check_labels(X, C, m.assign90(X, C)[0], "tf32")[0] < 1.0
    assert m.check_labels(X, C, m.assign90(X, C, tf32x3=True)[0], "tf32x3")[0] == 1.0


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
def test_tf32x3_every_significant_fault_is_detected_and_corrected(dist):
    out = _trials(dist, 80, prefilter=True, tf32x3=True)
    significant = [o for o in out if o[0]]
    assert len(significant) >= 5, len(significant)
    assert all(detected for _, detected, _ in significant)
    assert all(outside == 0 for _, _, outside in out)
