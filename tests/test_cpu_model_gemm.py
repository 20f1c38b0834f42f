"""The gemm ABFT scheme proven on the CPU (NumPy model of encode, carry, verify, locate, correct)
with injected faults, for every checksum granularity the kernels use (thread, warp, threadblock,
non-fused) and fp32 / fp64. The CUDA kernels implement the same rules (templates/gemm)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from conftest import draw
from ftgen.families.gemm import abft_model as g
from ftgen.families.gemm import simt

LEVEL_COLS = {"thread": 8, "warp": 32, "threadblock": 128, "nonfused": 128, "prepass": 128}


def level_kw(level):
    """Model arguments of a level ('prepass': threadblock with pre-pass reference checksums)."""
    if level == "prepass":
        return {"lam": g.abft_lambda("threadblock"), "ref": "prepass"}
    return {"lam": g.abft_lambda(level)}


def inputs(rng, m, k, n, dist, dt):
    return draw(rng, (m, k), dist).astype(dt), draw(rng, (k, n), dist).astype(dt)


def tolerance(precision, k):
    return simt.tolerance(precision, k)


def max_rel_err(C, A, B):
    ref = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    return float(np.max(np.abs(C.astype(np.float64) - ref) / np.maximum(scale, 1e-300)))


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
@pytest.mark.parametrize("level", list(LEVEL_COLS))
def test_clean_runs_never_alarm(precision, dist, level):
    rng = np.random.default_rng(zlib.crc32(f"{precision}/{dist}/{level}".encode()))  # hash() varies per process
    dt = np.float64 if precision == "fp64" else np.float32
    worst = 0.0
    for _ in range(3):
        A, B = inputs(rng, 48, 512, 256, dist, dt)
        C, c = g.abft_gemm_model(A, B, cols=LEVEL_COLS[level], kt=8, interval=8, precision=precision, **level_kw(level))
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
    lam = level_kw(level)["lam"]
    m, k, n = 16, 1024, cols * 2
    tol = tolerance(precision, k)
    significant = caught = guaranteed = 0
    for trial in range(50):
        A, B = inputs(rng, m, k, n, "normal", dt)
        fault = (int(rng.integers(0, k // 8)), int(rng.integers(0, m)), int(rng.integers(0, n)), "bitflip",
                 int(rng.integers(0, bits)))
        kw = dict(cols=cols, kt=8, interval=4, precision=precision, **level_kw(level))
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


def test_rows_that_are_not_located_are_recomputed_as_rows():
    """recompute='row' (ref_checksums: concurrent): a row with two faults is recomputed from A and B, a located
    fault in another row of the same strip corrected in place; nothing else is recomputed. With correct: detect
    every detected row is recomputed, one count each."""
    rng = np.random.default_rng(4)
    A, B = inputs(rng, 16, 128, 256, "normal", np.float32)
    C_clean, c0 = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16, recompute="row")
    assert c0["detected"] == 0 and c0["recomputed"] == 0
    faults = [(2, 5, 10, "offset", 50.0), (2, 5, 90, "offset", -70.0), (9, 7, 33, "offset", 40.0)]
    C, c = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16, faults=faults, recompute="row")
    assert c["recomputed"] == 1 and c["corrected"] == 2 and c["uncorrectable"] >= 1
    assert max_rel_err(C, A, B) <= tolerance("fp32", 128)
    assert np.array_equal(C[:5], C_clean[:5]) and np.array_equal(C[8:], C_clean[8:])  # the other rows untouched
    faults = [(1, 2, 3, "bitflip", 30), (4, 11, 200, "offset", 25.0)]
    C, c = g.abft_gemm_model(A, B, cols=128, kt=8, interval=16, online=False, faults=faults, recompute="row")
    assert c["detected"] == 2 and c["recomputed"] == 2
    assert max_rel_err(C, A, B) <= tolerance("fp32", 128)
    with pytest.raises(ValueError):
        g.abft_gemm_model(A, B, cols=128, kt=8, interval=4, recompute="row")


def test_a_faults_error_as_the_accumulators_start_acts_as_the_fault_at_its_step():
    """fault_at='start' (the concurrent design's inject builds: the error of the flipped partial sum, worked out
    before the GEMM, is the faulty accumulator's start): unprotected (no_correct) it leaves the faulty element
    within the rounding of the later steps' sums of the fault at its step, every other element bitwise the
    same; protected, the same faults are detected, located or recomputed, and the output verifies."""
    rng = np.random.default_rng(11)
    A, B = inputs(rng, 32, 512, 128, "normal", np.float32)  # (m, k, n)
    u = np.finfo(np.float32).eps / 2
    for bit in (0, 12, 20, 23, 27, 29, 30, 31):
        faults = [(int(rng.integers(0, 16)), int(rng.integers(0, 32)), int(rng.integers(0, 128)), "bitflip", bit),
                  (int(rng.integers(0, 16)), int(rng.integers(0, 32)), int(rng.integers(0, 128)), "offset", 30.0)]
        if faults[0][1:3] == faults[1][1:3]:
            continue
        kw = dict(cols=128, kt=32, interval=16, faults=faults, recompute="row")
        C_step, _ = g.abft_gemm_model(A, B, no_correct=True, **kw)
        C_start, _ = g.abft_gemm_model(A, B, no_correct=True, fault_at="start", **kw)
        hit = np.zeros(C_step.shape, dtype=bool)
        for (_, i, j, _, _) in faults:
            hit[i, j] = True
        assert np.array_equal(C_step[~hit], C_start[~hit])
        C_clean = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        for (_, i, j, _, _) in faults:
            err = abs(float(C_step[i, j]) - float(C_clean[i, j]))  # the fault's error on the output
            scale = err + float(np.abs(A[i]).astype(np.float64) @ np.abs(B[:, j]).astype(np.float64))
            assert abs(float(C_step[i, j]) - float(C_start[i, j])) <= 16 * 16 * u * scale, (bit, i, j)
        C1, c1 = g.abft_gemm_model(A, B, **kw)
        C2, c2 = g.abft_gemm_model(A, B, fault_at="start", **kw)
        assert (c1["detected"], c1["recomputed"]) == (c2["detected"], c2["recomputed"]), bit
        assert max_rel_err(C2, A, B) <= tolerance("fp32", 512)
    with pytest.raises(ValueError):
        g.abft_gemm_model(A, B, cols=128, kt=32, interval=16, fault_at="end")


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


@pytest.mark.parametrize("k,kt,interval,split_k,sub_k", [(777, 16, 256, 1, 512), (777, 16, 8, 4, 512), (4096, 16, 512, 1, 512),
                                                         (1031, 8, 3, 2, 40), (1, 8, 1, 1, 512), (100, 16, 1, 8, 512)])
def test_prepass_segments_partition_each_slice(k, kt, interval, split_k, sub_k):
    """The pre-pass's sub-slices partition k; each split-K slice's segments start at the slice and end
    at the k-tile after which its blocks verify; no sub-slice is longer than sub_k."""
    layout = g.abft_prepass_layout(k, kt, interval, split_k, sub_k)
    covered = sorted(p for subs in layout.values() for p in subs if p[0] < p[1])
    assert covered[0][0] == 0 and covered[-1][1] == k
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))
    assert all(kb - ka <= sub_k for ka, kb in covered)
    ktiles = -(-k // kt)
    per_slice = -(-ktiles // split_k)
    for (z, c), subs in layout.items():
        end = max(kb for _, kb in subs)
        if end > min(k, z * per_slice * kt) and subs[0][0] < subs[-1][1]:
            assert subs[0][0] == min(k, (z * per_slice + c * interval) * kt)
            assert end == min(k, (z * per_slice + min((c + 1) * interval, per_slice)) * kt)


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
def test_prepass_references_are_the_cumulative_products(precision):
    rng = np.random.default_rng(11)
    dt = np.float64 if precision == "fp64" else np.float32
    A, B = inputs(rng, 24, 1031, 200, "normal", dt)
    be, bw, b2 = g.abft_encode(B, 128)
    ref = g.abft_prepass_reference(A, be, bw, b2, kt=8, interval=30, split_k=2, precision=precision, sub_k=64)
    layout = g.abft_prepass_layout(1031, 8, 30, 2, 64)
    A64 = A.astype(np.float64)
    for (z, c), (r, rw, r2) in ref.items():
        k0 = layout[(z, 0)][0][0]
        k1 = max(kb for _, kb in layout[(z, c)])
        exact = [A64[:, k0:k1] @ e[k0:k1].astype(np.float64) for e in (be, bw)] + [(A64 * A64)[:, k0:k1] @ b2[k0:k1].astype(np.float64)]
        scale = [np.abs(A64[:, k0:k1]) @ np.abs(e[k0:k1].astype(np.float64)) for e in (be, bw, b2)]
        u = g.UNIT_ROUNDOFF[precision]
        for got, want, sc in zip((r, rw, r2), exact, scale):
            assert np.all(np.abs(got.astype(np.float64) - want) <= 4 * u * np.sqrt(max(k1 - k0, 1)) * sc + 1e-300)


def test_prepass_locates_and_corrects_like_the_fused_scheme():
    rng = np.random.default_rng(3)
    A, B = inputs(rng, 16, 1200, 256, "normal", np.float32)
    kw = dict(cols=128, kt=8, interval=16, ref="prepass")
    C_clean, c0 = g.abft_gemm_model(A, B, **kw)
    assert c0["detected"] == 0
    C, c = g.abft_gemm_model(A, B, faults=[(40, 5, 77, "offset", 1000.0), (3, 9, 200, "bitflip", 30)], **kw)
    assert c["detected"] == 2 and c["corrected"] == 2 and c["recomputed"] == 0
    assert abs(float(C[5, 77]) - float(C_clean[5, 77])) < 1e-2
    assert max_rel_err(C, A, B) <= tolerance("fp32", 1200)


def _row_float32_sums(c):
    """sum c and sum w c of one row accumulated in float32 (as pass 1 of the CUDA kernels sums)."""
    s1 = sw = np.float32(0.0)
    for j, v in enumerate(c.astype(np.float32)):
        s1 = np.float32(s1 + v)
        sw = np.float32(sw + np.float32(j + 1) * v)
    return float(s1), float(sw)


def test_large_faults_are_located_on_sums_in_double():
    """Flips of exponent bits 27-29 scale an element by 2^16..2^64. Decided on d, dw summed in double from
    the row's elements and located in double (abft_verify_rows; the kernels' rare path sums a flagged row
    anew in double and tests the location in double), every such fault is located at its column and
    corrected; on float32 sums (pass 1's in the kernels) the rounding of sum w c, about u |fault|, exceeds
    tau_w and most would not be located (the tile recomputed instead)."""
    rng = np.random.default_rng(29)
    cols, k, rows = 128, 1024, 96
    A, B = inputs(rng, rows, k, cols, "normal", np.float32)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    C = (A64 @ B64).astype(np.float32)
    be, bw, b2 = g.abft_encode(B64, cols)
    r, rw, r2 = A64 @ be[:, 0], A64 @ bw[:, 0], (A64 * A64) @ b2[:, 0]
    unit = g.abft_threshold_unit("fp32", k, cols, g.abft_lambda("threadblock"))
    located = located_f32 = faults = 0
    for i in range(rows):
        j, bit = int(rng.integers(cols)), 27 + i % 3
        row = C[i].copy()
        row.view(np.uint32)[j] ^= np.uint32(1 << bit)
        if not np.isfinite(row[j]) or abs(float(row[j]) - float(C[i, j])) < 1e-2 * float(np.abs(C[i]).max()):
            continue  # only finite faults that change the row significantly (non-finite ones are located directly)
        faults += 1
        out, _ = g.abft_verify_rows(row[None, :], r[i:i + 1], rw[i:i + 1], r2[i:i + 1], k, "fp32", g.abft_lambda("threadblock"))
        if out == [(0, 1, j)]:
            located += 1
            rest = float(np.sum(np.delete(row, j).astype(np.float64)))
            assert abs((float(r[i]) - rest) - float(C[i, j])) <= 1e-3 * max(1.0, abs(float(C[i, j])))
        tau = g.abft_row_threshold(row, r[i], rw[i], r2[i], k, "fp32", g.abft_lambda("threadblock"))
        s1, sw = _row_float32_sums(row)
        kind, col = g.abft_classify(s1 - float(r[i]), sw - float(rw[i]), tau, g.abft_weighted_threshold(tau, rw[i], unit, cols), cols)
        located_f32 += kind == 1 and col == j
    assert faults >= 60
    assert located == faults
    assert located_f32 < faults // 2


@pytest.mark.parametrize("level", list(LEVEL_COLS))
def test_a_small_element_beside_large_ones_is_recomputed_not_replaced(level):
    """A located fault in a column 1e-5 the size of the rest: r_i - (the rest of the row) carries the rounding of the
    other elements, far beyond the small element's own tolerance; the kernels' fix (the dot product of A's row and
    B's column, taken where it agrees with r_i - rest: fix='checked') restores it within the tolerance."""
    rng = np.random.default_rng(29)
    m, k, cols = 8, 512, LEVEL_COLS[level]
    A, B = inputs(rng, m, k, 2 * cols, "normal", np.float32)
    j = cols + 5
    B[:, j] *= np.float32(1e-5)
    kw = dict(cols=cols, kt=8, interval=k // 8, faults=[(40, 3, j, "offset", 1e3)], **level_kw(level))
    tol = tolerance("fp32", k)

    def err(C):
        ref = A[3].astype(np.float64) @ B[:, j].astype(np.float64)
        return abs(float(C[3, j]) - ref) / float(np.abs(A[3]).astype(np.float64) @ np.abs(B[:, j]).astype(np.float64))

    C, c = g.abft_gemm_model(A, B, fix="checksum", **kw)
    assert c["corrected"] == 1 and c["recomputed"] == 0 and err(C) > 10 * tol, (c, err(C) / tol)
    C, c = g.abft_gemm_model(A, B, **kw)  # fix='checked', the default
    assert (c["detected"], c["corrected"], c["recomputed"]) == (1, 1, 0) and err(C) <= tol, (c, err(C) / tol)
    assert max_rel_err(C, A, B) <= tol


def test_a_fix_that_disagrees_with_the_checksum_is_recomputed(monkeypatch):
    """Where the dot product of the located element and r_i - rest disagree (forced here: every check refuses), the
    detection is handled as one that is not located: the tile is recomputed, and the result is still right."""
    rng = np.random.default_rng(31)
    A, B = inputs(rng, 16, 256, 128, "normal", np.float32)
    monkeypatch.setattr(g, "located_fix_agrees", lambda *a: False)
    C, c = g.abft_gemm_model(A, B, cols=128, kt=8, interval=8, faults=[(5, 2, 9, "offset", 100.0)])
    assert (c["detected"], c["corrected"], c["recomputed"]) == (1, 1, 1), c
    assert max_rel_err(C, A, B) <= tolerance("fp32", 256)
