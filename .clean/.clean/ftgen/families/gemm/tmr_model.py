"""NumPy model of the CUTLASS backend's TMR voting and repair (the algorithms of cutlass_tmr.cuh)."""

from __future__ import annotations

import numpy as np

MAX_ATTEMPTS = 3  # computations of a tile (first + recomputations) before giving up

AGREE, MINORITY_0, MINORITY_1, MINORITY_2, UNCORRECTABLE = 0, 1, 2, 3, 4


def classify(u0, u1, u2):
    """Vote on bit patterns (integer arrays): status per element and the majority value.

    Status: AGREE, MINORITY_c (copy c differs from the two others, which agree) or UNCORRECTABLE
    (all three differ; the majority returned there is u0, unused). The device code makes the same
    decisions in the same order (vote_element in cutlass_tmr.cuh).
    """
    u0, u1, u2 = np.asarray(u0), np.asarray(u1), np.asarray(u2)
    e01, e02, e12 = u0 == u1, u0 == u2, u1 == u2
    status = np.full(u0.shape, UNCORRECTABLE, dtype=np.int8)
    status[e01 & e02] = AGREE
    status[e01 & ~e02] = MINORITY_2
    status[~e01 & e02] = MINORITY_1
    status[~e01 & ~e02 & e12] = MINORITY_0
    majority = np.where(~e01 & ~e02 & e12, u1, u0)
    return status, majority


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


def flip(x, kind: str, bit: int = 0, offset: float = 0.0):
    """The fault primitive of ftgen_ft.cuh: flip one bit of the representation, or add an offset."""
    x = np.array(x)
    if kind == "offset":
        return (x.astype(np.float64) + offset).astype(x.dtype)
    u = _bits(x).copy()
    u ^= u.dtype.type(1) << u.dtype.type(bit)
    return u.view(x.dtype)


FNV_PRIME = 16777619
FNV_BASIS = 2166136261


def fnv_digest(x) -> tuple[int, int, int, int]:
    """The cooperative level's ``digest`` (cutlass_tmr.cuh) of an array's 32-bit words, in memory order.

    Four FNV-1a chains: word i feeds chain i % 4 with h <- (h ^ w) * FNV_PRIME mod 2^32, chain c
    starting at FNV_BASIS ^ c (8-byte elements give their low word, then their high word). Each
    step is a bijection of the state for a fixed word and of the word for a fixed state, so two word
    sequences that differ in exactly one word always have different digests.
    """
    words = np.ascontiguousarray(x).reshape(-1).view(np.uint32)
    h = [FNV_BASIS ^ c for c in range(4)]
    for i, w in enumerate(words.tolist()):
        h[i % 4] = ((h[i % 4] ^ w) * FNV_PRIME) & 0xFFFFFFFF
    return tuple(h)


class Counters(dict):
    def __init__(self):
        super().__init__(injected=0, detected=0, corrected=0, uncorrectable=0, recomputed=0)


def _vote_inplace(acc: list[np.ndarray], counters: Counters, repair: bool) -> np.ndarray:
    """Vote three accumulator arrays in place; return the mask of uncorrectable elements."""
    status, maj = classify(_bits(acc[0]), _bits(acc[1]), _bits(acc[2]))
    bad = status != AGREE
    counters["detected"] += int(bad.sum())
    unc = status == UNCORRECTABLE
    counters["uncorrectable"] += int(unc.sum())
    counters["corrected"] += int((bad & ~unc).sum())
    if repair:
        for c in range(3):
            fix = status == (MINORITY_0 + c)
            _bits(acc[c])[fix] = maj[fix]
    return unc


def model_tile(A, B, kt: int, level: str, interval: int, faults=(), correct: bool = True, dtype=np.float32):
    """Simulate one output tile computed by three copies under a TMR level.

    A: (m x K), B: (K x n) arrays; kt: k-iteration depth; faults: dicts with copy, row, col, step,
    kind ('bitflip' or 'offset'), bit, offset; a fault is applied to the copy's accumulator after
    k-iteration ``step`` of the first computation of the tile (before that iteration's vote).

    Checkpoints: threadblock and cooperative vote and repair after every ``interval`` k-iterations
    and after the last (an uncorrectable vote recomputes the tile from k = 0); multikernel votes the
    states between chunks of ``interval`` iterations (an uncorrectable state marks the tile, which the
    final recompute computes again) and the outputs at the end; kernel votes the outputs only (elements
    where all three differ are recomputed). Returns (output, counters). With correct=False nothing is
    repaired or recomputed and the output is the copy of the first fault (copy 0 without faults).
    """
    A = np.asarray(A, dtype=dtype)
    B = np.asarray(B, dtype=dtype)
    K = A.shape[1]
    iters = -(-K // kt)
    counters = Counters()
    out_copy = faults[0]["copy"] if (faults and not correct) else 0

    def k_slice(it):
        # the residue k-tile comes first, like CUTLASS's predicated iterators
        r0 = K - (iters - 1) * kt
        lo = 0 if it == 0 else r0 + (it - 1) * kt
        hi = r0 if it == 0 else lo + kt
        return slice(lo, hi)

    def compute(with_faults: bool, checkpoints: bool):
        acc = [np.zeros((A.shape[0], B.shape[1]), dtype=dtype) for _ in range(3)]
        unc_any = np.zeros(acc[0].shape, dtype=bool)
        for it in range(iters):
            ks = k_slice(it)
            prod = (A[:, ks] @ B[ks, :]).astype(dtype)  # identical instructions for the three copies
            for c in range(3):
                acc[c] += prod
            if with_faults:
                for f in faults:
                    if f["step"] == it:
                        a = acc[f["copy"]]
                        a[f["row"], f["col"]] = flip(a[f["row"], f["col"]], f["kind"], f.get("bit", 0), f.get("offset", 0.0))
                        counters["injected"] += 1
            last = it == iters - 1
            if checkpoints and ((it + 1) % interval == 0 or last):
                if level in ("threadblock", "cooperative") or not last:
                    unc = _vote_inplace(acc, counters, correct)
                    unc_any |= unc
        return acc, unc_any

    with np.errstate(invalid="ignore", over="ignore"):  # flipped exponents make Inf and NaN
        return _model_levels(compute, level, correct, out_copy, counters)


def _model_levels(compute, level, correct, out_copy, counters):
    if level in ("threadblock", "cooperative"):
        acc, unc = compute(True, True)
        attempts = 1
        while unc.any() and correct and attempts < MAX_ATTEMPTS:
            counters["recomputed"] += 1
            attempts += 1
            acc, unc = compute(False, True)
        return acc[0 if correct else out_copy].copy(), counters
    if level == "multikernel":
        acc, poisoned = compute(True, True)
    elif level == "kernel":
        acc, poisoned = compute(True, False)
    else:
        raise ValueError(f"unknown level {level!r}")
    # final vote on the outputs (kernel, multikernel)
    if not correct:
        unc = _vote_inplace([a.copy() for a in acc], counters, False)
        return acc[out_copy].copy(), counters
    if poisoned.any():  # the tile is recomputed as a whole; the output vote skips it
        out = None
        unc = np.ones(acc[0].shape, dtype=bool)
    else:
        status, maj = classify(_bits(acc[0]), _bits(acc[1]), _bits(acc[2]))
        bad = status != AGREE
        unc = status == UNCORRECTABLE
        counters["detected"] += int(bad.sum())
        counters["corrected"] += int((bad & ~unc).sum())
        counters["uncorrectable"] += int(unc.sum())
        out = maj.view(acc[0].dtype).copy()
    if unc.any():
        counters["recomputed"] += 1
        for _ in range(MAX_ATTEMPTS - 1):
            re, _ = compute(False, False)
            status, maj = classify(_bits(re[0]), _bits(re[1]), _bits(re[2]))
            if out is None:
                out = np.zeros_like(acc[0])
            _bits(out)[unc] = maj[unc]
            again = unc & (status == UNCORRECTABLE)
            counters["uncorrectable"] += int(again.sum())
            if not again.any():
                break
    return out, counters
