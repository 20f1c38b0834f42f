"""cpu-model: the NumPy model of the fft kernels (same launches, sub-passes, codelets, twiddles,
checks) computes the DFT, and its ABFT levels detect, locate and correct a fault injected
anywhere in the butterfly network, in fp32 and fp64, without false alarms on clean data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftgen.families import fft as F
from ftgen.families.base import UNIT_ROUNDOFF
from ftgen.families.fft.model import _cdt

RNG = np.random.default_rng(20240601)
# faults that overflow to inf/NaN are part of the sweep
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def data(dist: str, shape, rng=RNG) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if dist == "uniform":
        return rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)
    mag = lambda: 10 ** rng.uniform(-3, 3, shape) * rng.choice([-1, 1], shape)  # noqa: E731
    return mag() + 1j * mag()


def rel_err(y: np.ndarray, ref: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.linalg.norm(y - ref, axis=1) / np.linalg.norm(ref, axis=1)
    return float(np.max(e)) if np.all(np.isfinite(e)) else math.inf


# ---- the transform -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "logn, params",
    [(1, {}), (3, {}), (5, {}), (8, {}), (12, {}), (14, {}), (8, {"N1": 16, "N2": 16}), (9, {"N1": 8, "N2": 8, "N3": 8}),
     (10, {"N1": 4, "N2": 16, "N3": 16, "n2": 4, "n3": 8}), (7, {"n1": 2}), (6, {"n1": 32})],
)
@pytest.mark.parametrize("direction", ["forward", "inverse"])
def test_model_is_the_dft(logn, params, direction):
    m = F.FftModel("fp64", "none", {"logn": logn, **params}, direction=direction)
    x = data("normal", (3, 1 << logn))
    y, rep = m.run(x)
    ref = F.fft_reference(x, inverse=direction == "inverse")
    assert rel_err(y, ref) < 1e-14
    assert rep.detected == 0


@pytest.mark.parametrize("precision", F.PRECISIONS)
def test_rounding_error_is_well_inside_the_tolerance(precision):
    for logn in (4, 10, 16):
        m = F.FftModel(precision, "none", {"logn": logn})
        x = data("normal", (max(2, 4096 >> logn), 1 << logn))
        y, _ = m.run(x)
        err = rel_err(y, F.fft_reference(x.astype(_cdt(precision))))
        # the tolerance leaves room for cuFFT's own error and for corrected columns
        assert err < F.tolerance(precision, logn) / 8, (logn, err)


# ---- faults anywhere in the network ------------------------------------------------------------


def sweep_faults(model: F.FftModel, batch: int, precision: str, kinds, positions_per_stage: int | None = None):
    """Every launch, stage and (a sample of) positions; returns (faults, missed)."""
    x = data("normal", (batch, model.plan.N))
    ref = F.fft_reference(x.astype(_cdt(precision)))
    tol = F.tolerance(precision, model.plan.logn)
    faults = missed = 0
    for lp in model.plan.launches:
        ncols = batch * lp.cols_per_signal
        for stage in range(lp.P + 1):
            positions = range(lp.R) if positions_per_stage is None else RNG.choice(lp.R, size=min(lp.R, positions_per_stage), replace=False)
            for pos in positions:
                col = int(RNG.integers(ncols))
                for kind in kinds:
                    f = F.ModelFault(lp.index, stage, col, int(pos), **kind)
                    y0, _ = model.run(x, [f], correct=False)
                    if not rel_err(y0, ref) > tol:
                        continue  # not significant: nothing to correct
                    y, rep = model.run(x, [f])
                    faults += 1
                    if not (rel_err(y, ref) <= tol and rep.detected >= 1 and rep.false_alarms == 0):
                        missed += 1
    return faults, missed


@pytest.mark.parametrize("precision", F.PRECISIONS)
def test_two_sided_tb_corrects_faults_everywhere(precision):
    bits = 32 if precision == "fp32" else 64
    kinds = [
        {"kind": "offset", "offset": 3.0 + 1.5j},
        {"kind": "bitflip", "bit": bits - 2},  # exponent: inf / huge values, replaced not subtracted
        {"kind": "bitflip", "bit": 2 * bits - 4},
    ]
    # two launches (16 x 8) plus a one-launch plan; every stage, every position of launch 1
    for logn, params, per_stage in ((7, {"N1": 16, "N2": 8, "n1": 4, "n2": 4}, None), (8, {}, 24)):
        m = F.FftModel(precision, "two-sided-tb", {"logn": logn, **params})
        faults, missed = sweep_faults(m, batch=4, precision=precision, kinds=kinds, positions_per_stage=per_stage)
        assert faults > 100 and missed == 0, (logn, faults, missed)


@pytest.mark.parametrize("precision", F.PRECISIONS)
def test_two_sided_thread_corrects_faults_everywhere(precision):
    kinds = [{"kind": "offset", "offset": -2.0 + 0.5j}, {"kind": "bitflip", "bit": (32 if precision == "fp32" else 64) - 3}]
    m = F.FftModel(precision, "two-sided-thread", {"logn": 6, "N1": 8, "N2": 8})
    faults, missed = sweep_faults(m, batch=2, precision=precision, kinds=kinds, positions_per_stage=None)
    assert faults > 40 and missed == 0, (faults, missed)


def test_two_sided_tb_locates_the_column_by_the_quotient():
    m = F.FftModel("fp64", "two-sided-tb", {"logn": 10})
    lp = m.plan.launches[0]
    x = data("uniform", (lp.bs, 1 << 10))
    for col in range(lp.bs):
        f = F.ModelFault(0, 1, col, 77, kind="offset", offset=0.25)
        y, rep = m.run(x, [f])
        assert rep.located == [(0, col)] and rep.corrected == 1 and rep.recomputed == 0
        assert rel_err(y, F.fft_reference(x)) < 1e-13


def test_two_sided_tb_recomputes_a_fault_too_small_to_locate():
    """A fault just over the tolerance: the columns' rounding moves the weighted quotient by 0.92, onto the next
    column, whose replacement would carry the fault (a campaign trial "corrected" to 1.04x the tolerance). Its r1
    stands 1.2 (L - 1) rounding scales above zero, under LOCATE_K: the tile is recomputed, the output within bounds."""
    m = F.FftModel("fp64", "two-sided-tb", {"logn": 12})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4096)) + 1j * rng.standard_normal((64, 4096))
    ref, tol = F.fft_reference(x), F.tolerance("fp64", 12)
    f = F.ModelFault(0, 0, 54, 918, kind="bitflip", bit=13)
    yu, _ = m.run(x, [f], correct=False)
    assert 1.0 < rel_err(yu, ref) / tol < 1.1  # significant, barely
    y, rep = m.run(x, [f])
    assert rep.detected == 1 and rep.located == [] and rep.recomputed == 1
    assert rel_err(y, ref) < tol / 10
    # the same fault 64x larger is located in its own column and corrected in place
    y, rep = m.run(x, [F.ModelFault(0, 0, 54, 918, kind="bitflip", bit=19)])
    assert rep.located == [(0, 54)] and rep.recomputed == 0 and rel_err(y, ref) < tol / 10


def test_one_sided_detects_and_recomputes():
    for precision in F.PRECISIONS:
        m = F.FftModel(precision, "one-sided", {"logn": 9, "N1": 16, "N2": 32})
        x = data("normal", (3, 512))
        ref = F.fft_reference(x.astype(_cdt(precision)))
        for stage in range(m.plan.launches[0].P + 1):
            y, rep = m.run(x, [F.ModelFault(0, stage, 5, 3, kind="offset", offset=5.0)])
            assert rep.detected == 1 and rep.recomputed == 1 and rep.corrected == 1
            assert rel_err(y, ref) <= F.tolerance(precision, 9)


def test_correction_off_leaves_the_fault():
    m = F.FftModel("fp32", "two-sided-tb", {"logn": 8})
    x = data("normal", (8, 256))
    y, rep = m.run(x, [F.ModelFault(0, 1, 3, 10, kind="offset", offset=10.0)], correct=False)
    assert rep.detected == 1 and rep.corrected == 0
    assert rel_err(y, F.fft_reference(x.astype(np.complex64))) > F.tolerance("fp32", 8)


# ---- thresholds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", F.PRECISIONS)
@pytest.mark.parametrize("level", F.ABFT_LEVELS)
def test_no_false_alarms_on_clean_data(precision, level):
    """Clean data of every distribution: no detection, and the largest score (residual/threshold)
    leaves a margin for the GPU's different rounding."""
    sizes = (3, 9, 12) if level != "two-sided-thread" else (3, 9)
    for dist in ("normal", "uniform", "loguniform"):
        for logn in sizes:
            m = F.FftModel(precision, level, {"logn": logn})
            x = data(dist, (max(4, 8192 >> logn), 1 << logn))
            y, rep = m.run(x)
            assert rep.detected == 0 and rep.false_alarms == 0, (dist, logn, rep)
            assert rep.max_score < 0.6, (dist, logn, rep.max_score)
            assert rel_err(y, F.fft_reference(x.astype(_cdt(precision)))) <= F.tolerance(precision, logn)


def test_two_sided_tb_threshold_is_below_significance():
    """A fault that moves the output by the tolerance moves a column by at least that much
    (relative); the vector residual threshold must sit well below it."""
    for precision in F.PRECISIONS:
        for logn in range(3, 25):
            plan = F.make_plan(precision, "two-sided-tb", F.resolve_params(precision, "two-sided-tb", {"logn": logn}))
            for lp in plan.launches:
                # residual threshold relative to one column's output norm, batch of L + checksum
                rel_threshold = F.K_TB * UNIT_ROUNDOFF[precision] * math.sqrt(math.log2(lp.R) + 1) * math.sqrt(2 * lp.L)
                assert rel_threshold < F.tolerance(precision, logn) / 1.5, (precision, logn, lp.describe())


def test_encodings_have_no_blind_spots_at_the_output():
    e, v = F.encoding_vectors(64, -1)
    assert np.allclose(np.abs(e), 1)
    assert np.allclose(v, np.fft.fft(e))
    e2, _ = F.encoding_vectors(64, 1)
    assert np.allclose(e, e2)  # e does not depend on the direction, W^T e does
