"""The kmeans warp level (the mma backend's ``level: warp``): the paper's per-thread fragment checksums.

A warp tile is fm x fn MMA fragments; a thread holds the same places of every fragment, so at each place it owns a grid
of fm x fn accumulators, whose sum is one more MMA of the thread's own operands (the MMA is bilinear). This module
models the encodings, the check, the location and the correction as the kernel (templates/kmeans/kmeans_variant.cu.j2,
``warp_checksums`` and the warp verification) performs them; ``model.assign`` calls :func:`verify_tiles` for
``level="warp"``.
"""

from __future__ import annotations

import math

import numpy as np

from .rounding import LAMBDA, U64, rms_weight, round_tf32

# The MMA's M per precision (N is 8): m16n8k8 TF32, m8n8k4 FP64.
MMA_M = {"tf32": 16, "tf32x3": 16, "fp64": 8}
# The check's unit roundoff: the accumulators are fp32 sums of products of the operands (exact TF32 products, or the
# three-product split) and the references fp32-accurate products of the encodings (each split into a TF32 word and
# remainder, three products), so the residual is fp32 rounding whatever TF32 rounded in the operands: 2^-23 covers the
# splits' dropped small x small products (2^-22 of a product, random in sign). fp64: double throughout.
WARP_U = {"tf32": 2.0**-23, "tf32x3": 2.0**-23, "fp64": 2.0**-53}


def mma_operands(A, precision: str) -> np.ndarray:
    """The values the MMAs multiply, in fp64: TF32 words (tf32), words plus remainders (tf32x3), doubles (fp64)."""
    if precision == "fp64":
        return np.asarray(A, np.float64)
    a = np.asarray(A, np.float32)
    big = round_tf32(a)
    if precision == "tf32":
        return big.astype(np.float64)
    return big.astype(np.float64) + round_tf32(a - big).astype(np.float64)


def warp_unit(precision: str, dims: int, fm: int, fn: int) -> float:
    """LAMBDA u (sqrt(dims) + sqrt(fm fn) + 1): the probabilistic bound's factor for a sum of fm x fn dot products of
    length dims and its reference."""
    return LAMBDA * WARP_U[precision] * (math.sqrt(dims) + math.sqrt(fm * fn) + 1.0)


def warp_checksums(Xw, Cw, precision: str) -> dict:
    """The references of one warp tile (rows of X: fm fragments of MMA_M; centroids: fn fragments of 8), per element of
    the MMA's accumulator fragment (MMA_M x 8), which one thread holds: the grid of fm x fn accumulators at that place of
    every fragment sums to ``r``, and weighted by its cell's number (fm' fn + fn' + 1 for the cell (fm', fn')) to
    ``rw``. As the paper's Fig. 6, the thread adds its own A fragments (e^T A, and weighted by fm' fn) and B fragments
    (B e, and weighted by fn' + 1) in registers, and MMAs give r = (e^T A)(B e) and rw = (w_m^T A)(B e) + (e^T A)(B w_n);
    two more give the threshold's scales ``q`` (the grid's sum of x^2 c^2 products) and ``q2`` (the references' own
    products squared), which the kernel adds into one accumulator."""
    mm = MMA_M[precision]
    fm, fn = Xw.shape[0] // mm, Cw.shape[0] // 8
    xa = mma_operands(Xw, precision).reshape(fm, mm, -1)
    cb = mma_operands(Cw, precision).reshape(fn, 8, -1)
    wm = np.arange(fm, dtype=np.float64) * fn
    wn = np.arange(1, fn + 1, dtype=np.float64)
    sa, sb = xa.sum(0), cb.sum(0)
    sa2, sb2 = np.tensordot(wm, xa, 1), np.tensordot(wn, cb, 1)
    return {"r": sa @ sb.T, "rw": sa2 @ sb.T + sa @ sb2.T, "q": (xa * xa).sum(0) @ (cb * cb).sum(0).T,
            "q2": (sa * sa) @ (sb * sb).T}


def verify_warp(acc_w: np.ndarray, refs: dict, precision: str, dims: int, online: bool = True):
    """Check one warp tile's accumulators (fm MMA_M x fn 8) against ``warp_checksums``, element place by element place
    (each thread its own, no communication). Returns the events [(row, col, kind)] -- kind 1: located at (row, col) of
    the tile and, with ``online``, corrected in ``acc_w`` to r - (the rest of its grid); kind 3: detected, not located
    (row and col -1) -- and the largest score."""
    mm = MMA_M[precision]
    fm, fn = acc_w.shape[0] // mm, acc_w.shape[1] // 8
    with np.errstate(invalid="ignore", over="ignore"):
        a = acc_w.astype(np.float64).reshape(fm, mm, fn, 8)
    cell = (np.arange(fm)[:, None] * fn + np.arange(fn)[None, :] + 1).astype(np.float64)  # (fm, fn)
    with np.errstate(over="ignore", invalid="ignore"):
        d = a.sum(axis=(0, 2)) - refs["r"]
        dw = np.einsum("ij,imjn->mn", cell, a) - refs["rw"]
    # sqrt(2 (q + q2)) >= sqrt(q) + sqrt(q2): the kernel adds both scales into one accumulator
    tau = warp_unit(precision, dims, fm, fn) * np.sqrt(2.0 * np.maximum(refs["q"] + refs["q2"], 0))
    tau_w = tau * rms_weight(fm * fn)

    def ratio(x, t):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.nan_to_num(np.where(t > 0, np.abs(x) / t, np.where(x != 0, np.inf, 0.0)), nan=np.inf)

    score = np.maximum(ratio(d, tau), ratio(dw, tau_w))
    u_store = U64 if acc_w.dtype == np.float64 else 2.0**-24
    out = []
    for m, n in zip(*np.nonzero(~(score <= 1.0))):
        kind, row, col = 3, -1, -1
        dd, ww = d[m, n], dw[m, n]
        if np.isfinite(dd) and np.isfinite(ww) and abs(dd) > 2.0 * tau[m, n]:
            cq = float(np.rint(ww / dd))
            slack = tau_w[m, n] + 2.0 * fm * fn * u_store * abs(ww)
            if 1.0 <= cq <= fm * fn and abs(ww - cq * dd) <= slack:
                i, j = divmod(int(cq) - 1, fn)
                kind, row, col = 1, i * mm + int(m), j * 8 + int(n)
                if online:
                    grid = a[:, m, :, n].copy()
                    grid[i, j] = 0.0
                    acc_w[row, col] = acc_w.dtype.type(refs["r"][m, n] - grid.sum())
        out.append((row, col, kind))
    best = float(score.max()) if score.size and np.isfinite(score).all() else (math.inf if score.size else 0.0)
    return out, best


def verify_tiles(X, Ct, acc, precision: str, warp_tile: tuple[int, int], online: bool, counters) -> bool:
    """The warp level over one centroid tile's accumulators (in place): X's rows and the tile's centroids padded with
    zeros to whole warp tiles, as the kernel's shared-memory tiles are; ``counters``: the model's (``model.Counters``).
    True when a detection was not corrected (the kernel recomputes the tile)."""
    mw, nw = warp_tile
    n, dims = X.shape
    cols = Ct.shape[0]
    rows_p, cols_p = -(-n // mw) * mw, -(-cols // nw) * nw
    Xp = np.zeros((rows_p, dims), X.dtype)
    Xp[:n] = X
    Cp = np.zeros((cols_p, dims), Ct.dtype)
    Cp[:cols] = Ct
    ap = np.zeros((rows_p, cols_p), acc.dtype)
    ap[:n, :cols] = acc
    recompute = False
    for r0 in range(0, rows_p, mw):
        for c0 in range(0, cols_p, nw):
            tile = ap[r0:r0 + mw, c0:c0 + nw]
            events, score = verify_warp(tile, warp_checksums(Xp[r0:r0 + mw], Cp[c0:c0 + nw], precision), precision, dims,
                                        online)
            counters.max_score = max(counters.max_score, score)
            for row, col, kind in events:
                counters.detected += 1
                counters.events.append(("acc", r0 + max(row, 0)))
                if kind == 1 and online:
                    counters.corrected += 1
                else:
                    recompute = True
    acc[:] = ap[:n, :cols]
    return recompute
