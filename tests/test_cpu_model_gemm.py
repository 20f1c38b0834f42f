"""The gemm ABFT scheme proven on the CPU (NumPy model of encode, carry, verify, locate, correct)
with injected faults, for every checksum granularity the kernels use (thread, warp, threadblock,
non-fused) and fp32 / fp64. The CUDA kernels implement the same rules (templates/gemm)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftgen.families import gemm as g

LEVEL_COLS = {"thread": 8, "warp": 32, "threadblock": 128, "nonfused": 256}


def inputs(rng, m, k, n, dist, dt):
    def draw(shape):
        if dist == "uniform":
            return rng.uniform(-1, 1, shape)
        if dist == "loguniform":
            return rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-3, 3, shape)
        return rng.standard_normal(shape)

    return draw((m, k)).astype(dt), draw((k, n)).astype(dt)


def tolerance(precision, k):
    return g.GemmFamily().tolerance(precision, k)


def max_rel_err(C, A, B):
    ref = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    return float(np.max(np.abs(C.astype(np.float64) - ref) / np.maximum(scale, 1e-300)))


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
@pytest.mark.parametrize("level", list(LEVEL_COLS))
def test_clean_runs_never_alarm(precision, dist, level):
    rng = np.random.default_rng(hash((precision, dist, level)) % 2**32)
    dt = np.float64 if precision == "fp64" else np.float32
    worst = 0.0
    for _ in range(3):
        A, B = inputs(rng, 48, 512, 256, dist, dt)
        C, c = g.abft_gemm_model(A, B, cols=LEVEL_COLS[level], kt=8, interval=8, precision=precision,
                                 lam=g.abft_lambda(level))
        assert c["detected"] == 0, c
        assert max_rel_err(C, A, B) <= tolerance(precision, 512)
        worst = max(worst, c["max_score"])
    assert worst < 0.6  # clean scores stay below the threshold with margin (the GPU sums in other orders)


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("level", list(LEVEL_COLS))
def test_single_bit_flips_anywhere(precision, level):
    """A single bit flip in any accumulator at any step: every fault above the detection threshold
    (the scheme's guarantee) is detected and the result ends correct; no fault makes a result
    worse than leaving it alone; and nearly all faults that would break the result are caught."""
    rng = np.random.default_rng(7)
    dt = np.float64 if precision == "fp64" else np.float32
    bits = 64 if precision == "fp64" else 32
    cols = LEVEL_COLS[level]
    lam = g.abft_lambda(level)
    m, k, n = 16, 1024, cols * 2
    tol = tolerance(precision, k)
    significant = caught = guaranteed = 0
    for trial in range(50):
        A, B = inputs(rng, m, k, n, "normal", dt)
        fault = (int(rng.integers(0, k // 8)), int(rng.integers(0, m)), int(rng.integers(0, n)), "bitflip",
                 int(rng.integers(0, bits)))
        kw = dict(cols=cols, kt=8, interval=4, precision=precision, lam=lam)
        C0, _ = g.abft_gemm_model(A, B, **kw)
        Cu, _ = g.abft_gemm_model(A, B, faults=[fault], no_correct=True, **kw)
        C, c = g.abft_gemm_model(A, B, faults=[fault], **kw)
        i, j = fault[1], fault[2]
        effect = abs(float(Cu[i, j]) - float(C0[i, j])) if np.isfinite(Cu[i, j]) else math.inf
        err_u = max_rel_err(Cu, A, B) if np.all(np.isfinite(Cu)) else math.inf
        # the row's threshold at the end bounds the thresholds of the earlier verifications
        be, bw, b2 = g.abft_encode(B.astype(dt), cols)
        t = j // cols
        r, rw, r2 = (A.astype(dt) @ be[:, t])[i], (A.astype(dt) @ bw[:, t])[i], ((A * A).astype(dt) @ b2[:, t])[i]
        tau = g.abft_row_threshold(C0[i, t * cols:(t + 1) * cols], r, rw, r2, k, precision, lam)
        err = max_rel_err(C, A, B)
        assert err <= max(tol, err_u), (trial, fault, c)  # never worse than the fault itself
        if effect > 2 * tau:
            guaranteed += 1
            assert c["detected"] >= 1 and err <= tol, (trial, fault, effect, tau, c)
        if err_u > tol:
            significant += 1
            caught += err <= tol
    assert guaranteed >= 10
    assert significant >= 10 and caught / significant >= 0.9, (caught, significant)


def test_location_is_exact_and_correction_restores_the_value():
    rng = np.random.default_rng(3)
    A, B = inputs(rng, 16, 128, 128, "normal", np.float32)
    C_clean, _ = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16)
    C, c = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16, faults=[(3, 5, 77, "offset", 1000.0)])
    assert c["detected"] == 1 and c["corrected"] == 1 and c["recomputed"] == 0
    assert abs(float(C[5, 77]) - float(C_clean[5, 77])) < 1e-2


def test_two_faults_in_one_row_are_detected_and_recomputed():
    rng = np.random.default_rng(4)
    A, B = inputs(rng, 16, 128, 128, "normal", np.float32)
    faults = [(2, 5, 10, "offset", 50.0), (2, 5, 90, "offset", -70.0)]
    C, c = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16, faults=faults)
    assert c["detected"] >= 1 and c["recomputed"] == 1 and c["uncorrectable"] >= 1
    assert max_rel_err(C, A, B) <= tolerance("fp32", 128)


def test_faults_in_different_rows_are_each_corrected_in_place():
    rng = np.random.default_rng(5)
    A, B = inputs(rng, 16, 128, 128, "normal", np.float32)
    faults = [(2, 1, 10, "offset", 50.0), (2, 9, 90, "offset", -70.0)]
    C, c = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16, faults=faults)
    assert c["corrected"] == 2 and c["recomputed"] == 0


def test_detect_only_mode_recomputes():
    rng = np.random.default_rng(6)
    A, B = inputs(rng, 16, 128, 64, "normal", np.float32)
    C, c = g.abft_gemm_model(A, B, cols=64, kt=8, interval=4, online=False, faults=[(1, 2, 3, "bitflip", 30)])
    assert c["detected"] == 1 and c["recomputed"] == 1
    assert max_rel_err(C, A, B) <= tolerance("fp32", 128)


def test_a_detection_repeated_while_recomputing_finishes_the_tile():
    # a threshold far below the rounding noise alarms on every verification, in the recomputation
    # too (a permanent cause, not a transient fault): the recomputation still runs to the end
    rng = np.random.default_rng(7)
    A, B = inputs(rng, 16, 128, 64, "normal", np.float32)
    C, c = g.abft_gemm_model(A, B, cols=64, kt=8, interval=4, online=False, lam=1e-9)
    assert c["detected"] > 1 and c["recomputed"] == 1
    assert C is not None and C.shape == (16, 64)
    assert max_rel_err(C, A, B) <= tolerance("fp32", 128)


def test_non_finite_values_are_located_and_replaced():
    rng = np.random.default_rng(8)
    A, B = inputs(rng, 8, 64, 64, "normal", np.float32)
    # flipping exponent bits of a float can give Inf/NaN: located directly, replaced from the checksum
    C, c = g.abft_gemm_model(A, B, cols=64, kt=8, interval=2, faults=[(0, 3, 7, "offset", np.inf)])
    assert np.all(np.isfinite(C)) and c["corrected"] >= 1
    assert max_rel_err(C, A, B) <= tolerance("fp32", 64)


def test_threshold_grows_like_sqrt_k_and_with_the_strip():
    assert g.abft_threshold_unit("fp32", 4096, 128) / g.abft_threshold_unit("fp32", 1024, 128) == pytest.approx(
        (64 + math.sqrt(128) + 1) / (32 + math.sqrt(128) + 1)
    )
    assert g.abft_threshold_unit("fp64", 1024, 128) < g.abft_threshold_unit("fp32", 1024, 128) * 1e-8


def test_classify_rules():
    # clean
    assert g.abft_classify(0.5, 1.0, 1.0, 10.0, 128) == (0, -1)
    # a fault of 1000 at column 41 (weight 42): located
    assert g.abft_classify(1000.0, 42000.0, 1.0, 10.0, 128) == (1, 41)
    # detected but too small to locate with certainty: recompute
    assert g.abft_classify(15.0, 630.0, 1.0, 10.0, 128)[0] == 3
    # quotient off any integer (two faults): recompute
    assert g.abft_classify(1000.0, 41500.0, 1.0, 10.0, 128)[0] == 3
    # NaN residual is a detection
    assert g.abft_classify(float("nan"), 0.0, 1.0, 10.0, 128)[0] == 3
