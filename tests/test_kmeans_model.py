"""The NumPy model of the protected Lloyd iteration (ftgen.families.kmeans.model): clean data raises
nothing, single faults in the distance accumulators are located and corrected (or recomputed with
correct: detect), arg-min, norm and update faults are caught, labels agree with the fp64 reference
except within the derived near-tie band, empty clusters keep their centroid."""

from __future__ import annotations

import numpy as np
import pytest

from ftgen.families.kmeans import model as km
from ftgen.families.kmeans import warp_model as kw

PRECISIONS = ("tf32", "tf32x3", "fp64")


def data(dist: str, n=1500, dims=40, k=70, seed=1):
    rng = np.random.default_rng(seed)
    if dist == "normal":
        X = rng.standard_normal((n, dims))
    elif dist == "uniform":
        X = rng.uniform(-1, 1, (n, dims))
    elif dist == "blobs":
        X, _ = km.blobs(n, dims, k, seed)
    else:
        raise ValueError(dist)
    X = np.asarray(X, np.float32)
    C = X[rng.choice(n, k, replace=False)].copy()
    return X, C


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dist", ["normal", "uniform", "blobs"])
def test_clean_data_raises_nothing(precision, dist):
    X, C = data(dist)
    c = km.Counters()
    labels, best, _, _ = km.assign(X, C, precision, n_tb=32, counters=c)
    assert c.detected == 0 and c.recomputed == 0, c.events
    assert 0 < c.max_score < 1.0
    C1, counts = km.update(X, labels, C.astype(km.storage_dtype(precision)), counters=c)
    assert c.detected == 0
    assert counts.sum() == X.shape[0]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dist", ["normal", "blobs"])
def test_labels_agree_with_fp64_reference_within_band(precision, dist):
    X, C = data(dist, seed=3)
    labels, _, _, _ = km.assign(X, C, precision, n_tb=32)
    rate, outside = km.check_labels(X, C, labels, precision)
    assert outside == 0
    assert rate > (0.99 if dist == "blobs" else 0.95)


def test_band_is_needed_for_tf32_near_ties():
    """On i.i.d. data TF32 picks another label than fp64 for some samples: the band is not vacuous
    (without it the check would fail), and every such sample lies inside it."""
    X, C = data("normal", n=4000, dims=64, k=128, seed=5)
    labels, _, _, _ = km.assign(X, C, "tf32", n_tb=64)
    D = km.reference_distances(X, C)
    assert (labels != D.argmin(1)).any()
    assert km.check_labels(X, C, labels, "tf32")[1] == 0


def tau_of(X, C, precision, n_tb, row, tile):
    Ct = np.asarray(C[tile * n_tb:(tile + 1) * n_tb], np.float64)
    s, w, q, s2 = km.tile_encodings(Ct)
    x2 = np.asarray(X[row], np.float64) ** 2
    return km.abft_unit(precision, X.shape[1], Ct.shape[0]) * (np.sqrt(x2 @ q) + np.sqrt(x2 @ s2))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("factor", [3.0, 40.0, 1e4])
@pytest.mark.parametrize("level", ["threadblock", "warp"])
def test_accumulator_fault_located_and_corrected(precision, factor, level):
    X, C = data("normal", seed=7)
    if level == "warp":  # rows and columns inside whole warp tiles (no padding), the threshold of the fault's place
        run, place, tau_at = warp_assign, (1408, 64), lambda row, col: warp_tau(X, C, precision, row, col)
    else:
        run = lambda X, C, precision, **kw: km.assign(X, C, precision, n_tb=32, **kw)  # noqa: E731
        place, tau_at = X.shape[:1] + C.shape[:1], lambda row, col: tau_of(X, C, precision, 32, row, col // 32)
    clean, cbest, _, _ = run(X, C, precision)
    rng = np.random.default_rng(11)
    for trial in range(12):
        row, col = int(rng.integers(place[0])), int(rng.integers(place[1]))
        sign = 1 if trial % 2 else -1
        c = km.Counters()
        labels, best, _, _ = run(X, C, precision, faults=[km.Fault("acc", row, col, offset=sign * factor * tau_at(row, col))], counters=c)
        assert c.injected == 1 and c.detected == 1
        assert c.corrected + c.recomputed == 1
        if factor >= 40:
            assert c.corrected == 1, "a fault far above the threshold is located"
        assert np.array_equal(labels, clean)
        assert np.allclose(best, cbest, rtol=1e-5, atol=1e-4 * np.abs(cbest).max())


@pytest.mark.parametrize("precision", ["tf32x3", "fp64"])
def test_bitflip_faults_either_caught_or_harmless(precision):
    """Bit flips at every bit of the accumulator: a flip that changes a label beyond the band, or a
    distance beyond its rounding band, was detected; flips of the high exponent bits are always caught."""
    X, C = data("blobs", seed=13)
    clean, cbest, xx, cc = km.assign(X, C, precision, n_tb=32)
    dt = km.storage_dtype(precision)
    nbits = 64 if dt == np.float64 else 32
    rng = np.random.default_rng(17)
    for bit in range(nbits - 1):  # the sign bit is covered by the high-exponent flips' rule too
        row, col = int(rng.integers(X.shape[0])), int(rng.integers(C.shape[0]))
        c = km.Counters()
        labels, best, _, _ = km.assign(X, C, precision, n_tb=32, faults=[km.Fault("acc", row, col, bit=bit)], counters=c)
        band = km.distance_band(float(xx[row]), float(cc[clean[row]]), X.shape[1], precision)
        harmless = labels[row] == clean[row] and abs(best[row] - cbest[row]) <= band
        assert c.detected == 1 or harmless, f"bit {bit}: undetected and significant"
        if bit >= nbits - 8:  # exponent flips: caught, corrected online unless the value overflowed the sums
            assert c.detected == 1 and c.corrected + c.recomputed == 1
        assert labels[row] == clean[row] or c.detected == 0


def test_detect_mode_recomputes():
    X, C = data("normal", seed=19)
    clean, _, _, _ = km.assign(X, C, "tf32x3", n_tb=32)
    tau = tau_of(X, C, "tf32x3", 32, 5, 0)
    c = km.Counters()
    labels, _, _, _ = km.assign(X, C, "tf32x3", n_tb=32, correct="detect", faults=[km.Fault("acc", 5, 3, offset=1e3 * tau)], counters=c)
    assert (c.detected, c.corrected, c.recomputed) == (1, 0, 1)
    assert np.array_equal(labels, clean)


def test_unprotected_twin_lets_the_fault_through():
    X, C = data("normal", seed=19)
    clean, _, _, _ = km.assign(X, C, "fp64", n_tb=32, scheme="none")
    labels, _, _, _ = km.assign(X, C, "fp64", n_tb=32, scheme="none", faults=[km.Fault("acc", 5, int((clean[5] + 1) % 70), offset=1e6)])
    assert labels[5] != clean[5]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_argmin_and_norm_faults_caught(precision):
    X, C = data("blobs", seed=23)
    clean, _, _, _ = km.assign(X, C, precision, n_tb=32)
    wrong = int((clean[9] + 33) % C.shape[0])
    c = km.Counters()
    labels, _, _, _ = km.assign(X, C, precision, n_tb=32, faults=[km.Fault("argmin", 9, wrong)], counters=c)
    assert c.detected == 1 and ("argmin", 9) in c.events
    assert np.array_equal(labels, clean)
    c = km.Counters()
    bit = 62 if precision == "fp64" else 30
    labels, _, _, _ = km.assign(X, C, precision, n_tb=32, faults=[km.Fault("norm", 4, bit=bit)], counters=c)
    assert ("norm", 4) in c.events
    assert np.array_equal(labels, clean)
    c = km.Counters()
    labels, _, _, _ = km.assign(X, C, precision, n_tb=32, faults=[km.Fault("cnorm", int(clean[9]), bit=bit)], counters=c)
    assert c.injected == 1 and ("norm", int(clean[9])) in c.events
    assert np.array_equal(labels, clean)
    # unprotected, the same centroid-norm fault moves labels
    labels, _, _, _ = km.assign(X, C, precision, n_tb=32, scheme="none", faults=[km.Fault("cnorm", int(clean[9]), bit=bit)])
    assert not np.array_equal(labels, clean)


@pytest.mark.parametrize("fault", [km.Fault("update-sum", 3, 7, bit=52), km.Fault("update-sum", 3, 7, bit=40),
                                   km.Fault("update-count", 5, bit=0), km.Fault("update-count", 6, offset=-1)])
def test_update_faults_caught(fault):
    X, C = data("blobs", seed=29)
    labels, _, _, _ = km.assign(X, C, "tf32x3", n_tb=32)
    clean_C, clean_counts = km.update(X, labels, C)
    c = km.Counters()
    C1, counts = km.update(X, labels, C, faults=[fault], counters=c)
    assert c.detected == 1 and c.recomputed == 1
    assert np.array_equal(counts, clean_counts)
    assert np.array_equal(C1, clean_C)


def test_empty_cluster_keeps_its_centroid():
    X, C = data("blobs", seed=37)
    C = C.copy()
    C[4] = 1e3  # far from every point: nothing is assigned to it
    labels, _, _, _ = km.assign(X, C, "fp64", n_tb=32)
    assert not (labels == 4).any()
    C1, counts = km.update(X, labels, C)
    assert counts[4] == 0
    assert np.array_equal(C1[4], C[4])


def test_lloyd_decreases_inertia_and_stops_on_tolerance():
    X, _ = km.blobs(3000, 16, 12, seed=41)
    C0 = X[:12].copy()
    C, labels, hist = km.lloyd(X, C0, "tf32x3", iters=50, tol=1e-10, n_tb=32)
    inertia = [h["inertia"] for h in hist]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(inertia, inertia[1:]))
    assert len(hist) < 50


def test_lambda_is_derived():
    assert km.LAMBDA == pytest.approx(np.sqrt(2 * np.log(2 / km.P_FALSE_ALARM)))


# ---- the warp level (per-thread fragment checksums; the mma backend's level: warp) ----------------------------------

WARP_TILE = {"tf32": (64, 32), "tf32x3": (64, 32), "fp64": (32, 32)}  # the mma backend's default warp tiles


def warp_assign(X, C, precision, **kw):
    return km.assign(X, C, precision, n_tb=64, level="warp", warp_tile=WARP_TILE[precision], **kw)


def warp_tau(X, C, precision, row, col):
    """The threshold of the place that holds acc[row, col] (row < the last whole warp tile, col < 64: no padding)."""
    mw, nw = WARP_TILE[precision]
    mm = kw.MMA_M[precision]
    r0, c0 = row // mw * mw, col // nw * nw
    refs = kw.warp_checksums(X[r0:r0 + mw], C[c0:c0 + nw], precision)
    m, n = (row - r0) % mm, (col - c0) % 8
    return kw.warp_unit(precision, X.shape[1], mw // mm, nw // 8) * np.sqrt(2 * (refs["q"][m, n] + refs["q2"][m, n]))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dist", ["normal", "uniform", "blobs"])
def test_warp_level_clean_data_raises_nothing(precision, dist):
    X, C = data(dist)
    c = km.Counters()
    labels, _, _, _ = warp_assign(X, C, precision, counters=c)
    assert c.detected == 0 and c.recomputed == 0, c.events
    assert 0 < c.max_score < 0.5
    assert np.array_equal(labels, km.assign(X, C, precision, n_tb=64)[0])  # the threadblock level's labels


@pytest.mark.parametrize("precision", PRECISIONS)
def test_warp_level_bitflips_either_caught_or_harmless(precision):
    """A flip at every bit of an accumulator (any row and column, the padded warp tiles included): detected, or it
    changes neither the label nor the distance beyond its band; exponent flips always caught and repaired."""
    X, C = data("blobs", seed=13)
    clean, cbest, xx, cc = warp_assign(X, C, precision)
    nbits = 64 if precision == "fp64" else 32
    rng = np.random.default_rng(17)
    for bit in range(nbits - 1):
        row, col = int(rng.integers(X.shape[0])), int(rng.integers(C.shape[0]))
        c = km.Counters()
        labels, best, _, _ = warp_assign(X, C, precision, faults=[km.Fault("acc", row, col, bit=bit)], counters=c)
        band = km.distance_band(float(xx[row]), float(cc[clean[row]]), X.shape[1], precision)
        harmless = labels[row] == clean[row] and abs(best[row] - cbest[row]) <= band
        assert c.detected == 1 or harmless, f"bit {bit}: undetected and significant"
        if bit >= nbits - 8:
            assert c.detected == 1 and c.corrected + c.recomputed == 1
        assert labels[row] == clean[row] or c.detected == 0


def test_warp_level_detect_mode_recomputes_and_the_twin_does_not_see():
    X, C = data("normal", seed=19)
    clean, _, _, _ = warp_assign(X, C, "tf32x3")
    tau = warp_tau(X, C, "tf32x3", 5, 3)
    c = km.Counters()
    labels, _, _, _ = warp_assign(X, C, "tf32x3", correct="detect", faults=[km.Fault("acc", 5, 3, offset=1e3 * tau)], counters=c)
    assert (c.detected, c.corrected, c.recomputed) == (1, 0, 1)
    assert np.array_equal(labels, clean)
    c = km.Counters()
    warp_assign(X, C, "tf32x3", faults=[km.Fault("acc", 5, 3, offset=0.5 * tau)], counters=c)
    assert c.detected == 0, "a fault under the threshold passes (the check is not tuned to the injected value)"
