"""CPU model of TMR voting and repair (ftgen.families.gemm.tmr_model.classify / model_tile): the
rules the CUDA kernels implement, proven here on injected faults for every level."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ftgen.families.gemm import tmr_model as gc
from ftgen.families.gemm.cutlass import TMR_LEVELS

LEVELS = TMR_LEVELS


def majority_by_counting(u0, u1, u2):
    """Independent reference: the value held by at least two copies, and who differs."""
    vals = [u0, u1, u2]
    for v in vals:
        if vals.count(v) >= 2:
            if vals.count(v) == 3:
                return gc.AGREE, v
            return gc.MINORITY_0 + [x != v for x in vals].index(True), v
    return gc.UNCORRECTABLE, None


def test_vote_table_matches_majority_by_counting():
    for a, b, c in itertools.product(range(3), repeat=3):
        st, maj = gc.classify(np.array([a]), np.array([b]), np.array([c]))
        ref_st, ref_maj = majority_by_counting(a, b, c)
        assert int(st[0]) == ref_st, (a, b, c)
        if ref_maj is not None:
            assert int(maj[0]) == ref_maj, (a, b, c)


def test_vote_is_on_bit_patterns():
    nan_a = np.array([0x7FC00000], dtype=np.uint32)
    nan_b = np.array([0x7FC00001], dtype=np.uint32)
    st, maj = gc.classify(nan_a, nan_a, nan_b)  # two identical NaNs win over a different NaN
    assert st[0] == gc.MINORITY_2 and maj[0] == nan_a[0]
    pz, nz = np.float32(0.0).view(np.uint32), np.float32(-0.0).view(np.uint32)
    st, _ = gc.classify(np.array([pz]), np.array([pz]), np.array([nz]))  # +0 and -0 differ
    assert st[0] == gc.MINORITY_2


def problem(seed, m=12, n=10, k=37):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def clean(A, B, kt):
    out, c = gc.model_tile(A, B, kt, "threadblock", 1)
    assert c["detected"] == 0 and c["injected"] == 0
    return out


def random_fault(rng, m, n, iters, copy=None, step=None, kind=None):
    kind = kind or ("bitflip" if rng.random() < 0.8 else "offset")
    return {
        "copy": int(rng.integers(3)) if copy is None else copy,
        "row": int(rng.integers(m)),
        "col": int(rng.integers(n)),
        "step": int(rng.integers(iters)) if step is None else step,
        "kind": kind,
        "bit": int(rng.integers(32)),
        "offset": float(rng.choice([-1, 1]) * rng.uniform(1, 10)),
    }


@pytest.mark.parametrize("level", LEVELS)
def test_any_single_fault_is_corrected_bitwise(level):
    rng = np.random.default_rng(7)
    kt = 8
    for trial in range(60):
        A, B = problem(trial)
        iters = -(-A.shape[1] // kt)
        ref = clean(A, B, kt)
        f = random_fault(rng, *ref.shape, iters)
        out, c = gc.model_tile(A, B, kt, level, interval=2, faults=[f])
        assert c["injected"] == 1
        assert np.array_equal(out.view(np.uint32), ref.view(np.uint32)), (level, f)
        assert c["uncorrectable"] == 0 and c["recomputed"] == 0
        assert c["detected"] == c["corrected"] <= 1
        if level != "kernel":  # voted at the next checkpoint: a changed accumulator is always seen
            assert c["detected"] == 1, f


@pytest.mark.parametrize("level", LEVELS)
def test_faults_at_every_copy_and_checkpoint(level):
    A, B = problem(3)
    kt, interval = 8, 2
    iters = -(-A.shape[1] // kt)
    ref = clean(A, B, kt)
    for copy in range(3):
        for step in range(iters):
            f = {"copy": copy, "row": 5, "col": 4, "step": step, "kind": "bitflip", "bit": 30}
            out, c = gc.model_tile(A, B, kt, level, interval, faults=[f])
            assert np.array_equal(out, ref) and c["corrected"] == 1 and c["detected"] == 1, (copy, step, c)


@pytest.mark.parametrize("level", LEVELS)
def test_two_faults_in_two_copies_at_one_element_are_uncorrectable_and_recomputed(level):
    A, B = problem(11)
    kt = 8
    iters = -(-A.shape[1] // kt)
    ref = clean(A, B, kt)
    # mantissa bits: the two faulty values stay apart through later accumulation (exponent flips
    # early in a checkpoint-free level can shrink both partial sums to nothing and then agree:
    # see test_identical_faults_in_two_copies_outvote_the_correct_one)
    for step in (0, iters // 2, iters - 1):
        faults = [
            {"copy": 0, "row": 2, "col": 3, "step": step, "kind": "bitflip", "bit": 22},
            {"copy": 2, "row": 2, "col": 3, "step": step, "kind": "bitflip", "bit": 21},
        ]
        out, c = gc.model_tile(A, B, kt, level, 1, faults=faults)
        assert c["uncorrectable"] >= 1 and c["recomputed"] >= 1, (level, step, c)
        assert np.array_equal(out, ref), (level, step)


@pytest.mark.parametrize("level", ["threadblock", "cooperative", "multikernel"])
def test_faults_in_two_copies_at_different_checkpoints_are_both_corrected(level):
    """The point of checkpoints: the first fault is repaired before the second one happens."""
    A, B = problem(5)
    kt, interval = 8, 1
    ref = clean(A, B, kt)
    faults = [
        {"copy": 0, "row": 1, "col": 1, "step": 0, "kind": "bitflip", "bit": 27},
        {"copy": 1, "row": 1, "col": 1, "step": 2, "kind": "bitflip", "bit": 26},
    ]
    out, c = gc.model_tile(A, B, kt, level, interval, faults=faults)
    assert c["uncorrectable"] == 0 and c["corrected"] == 2
    assert np.array_equal(out, ref)


def test_the_same_faults_without_checkpoints_are_uncorrectable():
    A, B = problem(5)
    kt = 8
    ref = clean(A, B, kt)
    faults = [
        {"copy": 0, "row": 1, "col": 1, "step": 0, "kind": "bitflip", "bit": 27},
        {"copy": 1, "row": 1, "col": 1, "step": 2, "kind": "bitflip", "bit": 26},
    ]
    out, c = gc.model_tile(A, B, kt, "kernel", 1, faults=faults)
    assert c["uncorrectable"] == 1 and c["recomputed"] == 1
    assert np.array_equal(out, ref)


def test_identical_faults_in_two_copies_outvote_the_correct_one():
    """TMR's limit: two copies corrupted the same way form a wrong majority (documented)."""
    A, B = problem(9)
    kt = 8
    ref = clean(A, B, kt)
    same = {"row": 0, "col": 0, "step": 1, "kind": "bitflip", "bit": 30}
    out, c = gc.model_tile(A, B, kt, "threadblock", 1, faults=[dict(same, copy=0), dict(same, copy=1)])
    assert c["detected"] == 1 and c["corrected"] == 1
    assert out[0, 0] != ref[0, 0]


@pytest.mark.parametrize("level", LEVELS)
def test_without_correction_the_output_is_the_faulty_copy(level):
    A, B = problem(13)
    kt = 8
    ref = clean(A, B, kt)
    f = {"copy": 1, "row": 3, "col": 2, "step": 1, "kind": "offset", "offset": 100.0}
    out, c = gc.model_tile(A, B, kt, level, 1, faults=[f], correct=False)
    assert c["detected"] >= 1 and c["corrected"] >= 1  # detected and counted, nothing repaired
    diff = np.argwhere(out != ref)
    assert [tuple(x) for x in diff] == [(3, 2)]
    assert abs(float(out[3, 2]) - float(ref[3, 2]) - 100.0) < 1e-3


def test_residue_tile_first_like_cutlass():
    """k-iterations: the residue k-tile first, then full tiles; every k exactly once."""
    A, B = problem(1, m=3, n=3, k=37)
    kt = 8
    ref = (A.astype(np.float64) @ B.astype(np.float64))
    out, _ = gc.model_tile(A, B, kt, "threadblock", 1)
    assert np.allclose(out, ref, rtol=1e-5, atol=1e-5)
    # a fault after iteration 0 sees only the residue (37 % 8 = 5 products) accumulated
    f = {"copy": 0, "row": 0, "col": 0, "step": 0, "kind": "offset", "offset": 0.0}
    out2, c = gc.model_tile(A, B, kt, "threadblock", 1, faults=[f], correct=False)
    assert c["injected"] == 1 and np.array_equal(out2, out)


def test_flip_primitive_matches_ieee():
    x = np.float32(1.0)
    assert gc.flip(x, "bitflip", 31) == np.float32(-1.0)
    assert gc.flip(x, "bitflip", 23) == np.float32(0.5)  # lowest exponent bit of 127
    assert np.float32(gc.flip(x, "bitflip", 22)) == np.float32(1.5)
    assert float(gc.flip(np.float32(2.0), "offset", offset=0.5)) == 2.5


# ---------------------------------------------------------------------------------------------
# digests (cooperative level: exchanged at every checkpoint instead of the accumulators)
# ---------------------------------------------------------------------------------------------


def test_fnv_digest_is_fnv1a_per_chain():
    words = np.arange(1, 10, dtype=np.uint32)
    ref = []
    for c in range(4):
        h = 2166136261 ^ c
        for w in words[c::4]:
            h = ((h ^ int(w)) * 16777619) % 2**32
        ref.append(h)
    assert gc.fnv_digest(words) == tuple(ref)
    # 8-byte elements: low word, then high word (little-endian memory order)
    d = np.array([1.5, -2.25])
    assert gc.fnv_digest(d) == gc.fnv_digest(d.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_single_bit_flip_changes_the_digest(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(24).astype(dtype)
    base = gc.fnv_digest(x)
    bits = 8 * np.dtype(dtype).itemsize
    for i in range(x.size):
        for b in range(bits):
            y = x.copy()
            y[i] = gc.flip(y[i], "bitflip", b)
            assert gc.fnv_digest(y) != base, (i, b)


def test_any_single_changed_word_changes_the_digest():
    rng = np.random.default_rng(4)
    for _ in range(300):
        x = rng.integers(0, 2**32, size=int(rng.integers(1, 40)), dtype=np.uint32)
        y = x.copy()
        i = int(rng.integers(x.size))
        y[i] = (int(y[i]) + int(rng.integers(1, 2**32))) % 2**32
        assert gc.fnv_digest(x) != gc.fnv_digest(y)
