"""NumPy model of the protected Lloyd iteration. The CUDA kernels (``templates/kmeans/``) implement
these rules; the tests prove them here on injected faults.

One iteration, X (samples x dims) and C (clusters x dims):

  norms    xx_i = ||x_i||^2, cc_j = ||c_j||^2, each computed twice (DMR) and recomputed on a mismatch
  assign   per centroid tile t (``n_tb`` centroids): acc = X C_t^T (the distance GEMM in the delivered
           precision), then cc_j - 2 acc_ij and the arg-min (xx_i, common to the row, is added to the
           nearest: its distance); the distance matrix is never stored
  ABFT     per tile, from the tile's column sum s_t = e^T C_t and index-weighted sum w_t = (1..n_tb)^T C_t,
           the reference checksums r_i = x_i . s_t, r'_i = x_i . w_t (products in the delivered precision, as the
           distance GEMM's; and the scales r2_i = x_i^2 . q_t, rs2_i = x_i^2 . s_t^2 with q_t = e^T (C_t o C_t));
           before the arg-min reads the accumulators:
             d_i = sum_j acc_ij - r_i,  dw_i = sum_j (j+1) acc_ij - r'_i
             tau_i   = LAMBDA u (sqrt(dims) + sqrt(n_tb) + 1) (sqrt(r2_i) + sqrt(rs2_i))
             tau_w_i = tau_i * rms(1..n_tb)
           detected when |d| > tau or |dw| > tau_w; located when j = rint(dw / d) is a column of the tile and
           |dw - j d| <= tau_w + 2 n_tb u_T |dw| (and |d| > 2 tau; u_T of the storage type); corrected in place (acc_ij = r_i - the
           sum of the row's other accumulators) with ``correct: online``;
           anything else, and every detection with ``correct: detect``, recomputes the tile
  arg-min  computed twice (DMR: a forward and a backward scan with the same tie rule, lower index wins);
           a mismatch recomputes it from the verified accumulators (the kernels duplicate the merges across
           lanes, warps and tiles the same way; those have no fault site of their own)
  update   per cluster the sums (fp64) and counts (integers), computed twice (DMR) in the same order (the
           samples sorted by label); the counts and the sums must agree exactly; invariants: the counts add up to the
           number of samples, the cluster sums add up (per dimension) to the column sums of X (fp64). A
           failed check recomputes the update. Empty clusters keep their centroid.

LAMBDA is derived, not tuned: the probabilistic rounding bound (Higham & Mary) |e| <= lambda sqrt(n) u s holds
with probability at least 1 - 2 exp(-lambda^2 / 2); LAMBDA is the lambda of a failure probability P_FALSE_ALARM
per check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..base import UNIT_ROUNDOFF, ModelCounters
from ..gemm import abft_model as _g
from .init_model import (SAMPLE_PER_CLUSTER, init_keys, init_plusplus, init_plusplus_sample, init_random,  # noqa: F401
                         init_sample_size, init_uniform)

from .rounding import LAMBDA, P_FALSE_ALARM, U64, rms_weight, round_tf32  # noqa: F401
from .warp_model import verify_tiles


def storage_dtype(precision: str):
    return np.float64 if precision == "fp64" else np.float32


# ---------------------------------------------------------------------------------------------
# Arithmetic of the delivered precision
# ---------------------------------------------------------------------------------------------


def gemm_nt(X, C, precision: str) -> np.ndarray:
    """acc = X C^T as the tensor cores deliver it: tf32 inputs rounded to TF32 (fp32 accumulation),
    tf32x3 the three-product split (big*big + big*small + small*big), fp64 in double."""
    if precision == "fp64":
        return np.asarray(X, np.float64) @ np.asarray(C, np.float64).T
    X = np.asarray(X, np.float32)
    C = np.asarray(C, np.float32)
    xb, cb = round_tf32(X), round_tf32(C)
    if precision == "tf32":
        return (xb @ cb.T).astype(np.float32)
    xs, cs = round_tf32(X - xb), round_tf32(C - cb)
    return ((xb @ cs.T) + (xs @ cb.T) + (xb @ cb.T)).astype(np.float32)


def flip_bit(value, bit: int, dtype):
    a = np.array([value], dtype=dtype)
    view = a.view(np.uint64 if dtype == np.float64 else np.uint32)
    view[0] ^= view.dtype.type(1) << view.dtype.type(bit)
    return a[0]


# ---------------------------------------------------------------------------------------------
# Faults and counters
# ---------------------------------------------------------------------------------------------


@dataclass
class Fault:
    """One fault. ``site``: ``acc`` (accumulator acc[row, col] of the distance GEMM, before verification),
    ``argmin`` (the label the first arg-min copy chooses for ``row`` is replaced by ``col``), ``norm``
    (the first copy of xx[row]), ``cnorm`` (the first copy of cc[row]), ``update-sum`` (the first copy's sum of cluster ``row``, dimension ``col``),
    ``update-count`` (the first copy's count of cluster ``row``). ``bit`` flips a bit, else ``offset`` adds."""

    site: str
    row: int
    col: int = 0
    bit: int | None = None
    offset: float = 0.0

    def apply(self, value, dtype):
        if self.bit is not None:
            return flip_bit(value, self.bit, dtype)
        return dtype(value + self.offset)


@dataclass
class Counters(ModelCounters):
    events: list = field(default_factory=list)  # (site, what) per detection


# ---------------------------------------------------------------------------------------------
# Thresholds
# ---------------------------------------------------------------------------------------------


def abft_unit(precision: str, dims: int, n_tb: int) -> float:
    return LAMBDA * UNIT_ROUNDOFF[precision] * (math.sqrt(dims) + math.sqrt(n_tb) + 1.0)


def tile_encodings(Ct: np.ndarray):
    """s_t, w_t, q_t, s_t^2 of one centroid tile (rows: centroids), in fp64."""
    c = np.asarray(Ct, np.float64)
    w = np.arange(1, c.shape[0] + 1, dtype=np.float64)
    s = c.sum(axis=0)
    return s, (w[:, None] * c).sum(axis=0), (c * c).sum(axis=0), s * s


def distance_band(xx, cc, dims: int, precision: str) -> np.ndarray:
    """Rounding band of a computed distance xx + cc - 2 x.c (broadcasting xx (n,1) and cc (1,k)):
    LAMBDA u (sqrt(dims) + 2) (xx + cc + 2 sqrt(xx cc)), the probabilistic bound on the norms and the
    inner product (|x|.|c| <= ||x|| ||c||) of the delivered precision."""
    u = UNIT_ROUNDOFF[precision]
    return LAMBDA * u * (math.sqrt(dims) + 2.0) * (xx + cc + 2.0 * np.sqrt(xx * cc))


# ---------------------------------------------------------------------------------------------
# The steps
# ---------------------------------------------------------------------------------------------


def norms(X, precision: str, faults=(), counters: Counters | None = None, protect: bool = True) -> np.ndarray:
    """||x_i||^2 in the storage precision (fp32 accumulation for the fp32-stored precisions), DMR when
    ``protect``."""
    dt = storage_dtype(precision)
    X = np.asarray(X, dt)
    a = (X * X).sum(axis=1, dtype=dt)
    b = (X[:, ::-1] * X[:, ::-1]).sum(axis=1, dtype=dt)  # the second copy
    for f in faults:
        if f.site == "norm":
            a[f.row] = f.apply(a[f.row], dt)
            if counters:
                counters.injected += 1
    if not protect:
        return a
    # the copies round differently (other order): agree within their rounding band
    tol = 2.0 * LAMBDA * UNIT_ROUNDOFF["fp32" if dt == np.float32 else "fp64"] * math.sqrt(X.shape[1]) * np.maximum(np.abs(b), np.abs(a)).astype(np.float64)
    bad = ~(np.abs(a.astype(np.float64) - b.astype(np.float64)) <= tol)
    if bad.any():
        if counters:
            counters.detected += int(bad.sum())
            counters.recomputed += int(bad.sum())
            counters.events += [("norm", int(i)) for i in np.flatnonzero(bad)]
        a[bad] = (X[bad] * X[bad]).sum(axis=1, dtype=dt)
    return a


def verify_tile(acc_t, r, rw, r2, rs2, precision: str, dims: int):
    """Classify every row of one tile's accumulators: a list of (row, kind, col) for the rows that are not
    clean (kind 1: located at col, 3: detected, not locatable), the residuals d, and the largest score."""
    rows, n_tb = acc_t.shape
    a = acc_t.astype(np.float64)
    w = np.arange(1, n_tb + 1, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        d = a.sum(axis=1) - r
        dw = (a * w).sum(axis=1) - rw
    tau = abft_unit(precision, dims, n_tb) * (np.sqrt(np.maximum(r2, 0)) + np.sqrt(np.maximum(rs2, 0)))
    tau_w = tau * rms_weight(n_tb)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s1 = np.where(tau > 0, np.abs(d) / tau, np.where(d != 0, np.inf, 0.0))
        s2 = np.where(tau_w > 0, np.abs(dw) / tau_w, np.where(dw != 0, np.inf, 0.0))
    score = np.maximum(np.nan_to_num(s1, nan=np.inf), np.nan_to_num(s2, nan=np.inf))
    out = []
    for i in np.flatnonzero(~(score <= 1.0)):
        kind, col = 3, -1
        if np.isfinite(d[i]) and np.isfinite(dw[i]) and abs(d[i]) > 2.0 * tau[i]:
            jq = float(np.rint(dw[i] / d[i]))
            # the sums of a huge faulty value carry its rounding error (n_tb u |dw|, u of the storage type:
            # the kernels add each thread's partials in it)
            u_store = U64 if acc_t.dtype == np.float64 else 2.0**-24
            slack = tau_w[i] + 2.0 * n_tb * u_store * abs(dw[i])
            if 1.0 <= jq <= n_tb and abs(dw[i] - jq * d[i]) <= slack:
                kind, col = 1, int(jq) - 1
        out.append((int(i), kind, col))
    best = float(score.max()) if score.size and np.isfinite(score).all() else (math.inf if score.size else 0.0)
    return out, d, best


def argmin_dmr(dist_t: np.ndarray, offset: int, faults=(), counters: Counters | None = None):
    """(best distance, label) per row of one tile, computed twice: a forward scan and a backward scan
    with the same rule (the smaller distance; the lower index on a tie). A mismatch recomputes."""
    fwd = np.argmin(dist_t, axis=1)  # forward, strict '<': the first minimum
    # backward with '<=': the last minimum it meets, the lowest index among the minima
    rev = np.argmax(dist_t == dist_t.min(axis=1, keepdims=True), axis=1)
    fwd = fwd.copy()
    for f in faults:
        if f.site == "argmin" and f.row < fwd.size:
            fwd[f.row] = f.col
            if counters:
                counters.injected += 1
    bad = fwd != rev
    if bad.any():
        if counters:
            counters.detected += int(bad.sum())
            counters.recomputed += int(bad.sum())
            counters.events += [("argmin", int(i)) for i in np.flatnonzero(bad)]
        fwd[bad] = np.argmin(dist_t[bad], axis=1)
    rows = np.arange(dist_t.shape[0])
    return dist_t[rows, fwd], fwd + offset


def assign(X, C, precision: str, n_tb: int = 64, scheme: str = "abft", correct: str = "online",
           faults=(), counters: Counters | None = None, xx=None, cc=None, level: str = "threadblock",
           warp_tile: tuple[int, int] = (64, 32)):
    """Labels and their distances (xx + cc - 2 acc) of one assign step, tile by tile. ``level``: ``threadblock``
    (row checksums of the centroid tile) or ``warp`` (each warp tile of ``warp_tile`` (rows, centroids) checked by
    ``warp_model.verify_warp``)."""
    dt = storage_dtype(precision)
    X = np.asarray(X, dt)
    C = np.asarray(C, dt)
    n, dims = X.shape
    k = C.shape[0]
    counters = counters if counters is not None else Counters()
    if xx is None:
        xx = norms(X, precision, faults, counters, protect=scheme != "none")
    if cc is None:
        cfaults = [Fault("norm", f.row, bit=f.bit, offset=f.offset) for f in faults if f.site == "cnorm"]
        cc = norms(C, precision, cfaults, counters, protect=scheme != "none")
    best = np.full(n, np.inf)
    label = np.zeros(n, dtype=np.int64)
    for t0 in range(0, k, n_tb):
        t1 = min(k, t0 + n_tb)
        Ct = C[t0:t1]
        acc = gemm_nt(X, Ct, precision).astype(dt)
        for f in faults:
            if f.site == "acc" and t0 <= f.col < t1:
                acc[f.row, f.col - t0] = f.apply(acc[f.row, f.col - t0], dt)
                counters.injected += 1
        if scheme == "abft" and level == "warp":
            bad = verify_tiles(X, Ct, acc, precision, warp_tile, correct == "online", counters)
            if bad:
                acc = gemm_nt(X, Ct, precision).astype(dt)
                counters.recomputed += 1
        elif scheme == "abft":
            s, w, q, s2 = tile_encodings(Ct)
            # the references as the kernel carries them: products on the tensor cores in the delivered precision
            # (the encodings stored in the storage type); the threshold's scales from the squared samples
            rr = gemm_nt(X, np.stack([s, w]).astype(dt), precision).astype(np.float64)
            r, rw = rr[:, 0], rr[:, 1]
            x2 = (X * X).astype(np.float64)
            r2, rs2 = x2 @ q, x2 @ s2
            bad, d, score = verify_tile(acc, r, rw, r2, rs2, precision, dims)
            counters.max_score = max(counters.max_score, score)
            recompute = False
            for i, kind, col in bad:
                counters.detected += 1
                counters.events.append(("acc", i))
                if kind == 1 and correct == "online":
                    # from the others: no cancellation against a huge faulty value
                    acc[i, col] = dt(r[i] - np.delete(acc[i], col).astype(np.float64).sum())
                    counters.corrected += 1
                else:
                    recompute = True
            if recompute:
                acc = gemm_nt(X, Ct, precision).astype(dt)
                counters.recomputed += 1
        # as the kernels' epilogue: ||c_j||^2 - 2 acc_ij (||x_i||^2, common to the row, is added to the nearest)
        dist = (cc[None, t0:t1] - dt(2) * acc).astype(dt)
        if scheme == "abft":
            local = [Fault(f.site, f.row, f.col - t0) for f in faults if f.site == "argmin" and t0 <= f.col < t1]
            tb, tl = argmin_dmr(dist, t0, local, counters)
        else:
            tl = np.argmin(dist, axis=1) + t0
            tb = dist[np.arange(n), tl - t0]
        take = tb < best
        best = np.where(take, tb, best)
        label = np.where(take, tl, label)
    return label, (best + xx.astype(np.float64)).astype(dt), xx, cc


def update_once(X, labels, k: int):
    """Cluster sums (fp64) and integer counts, each cluster's samples added in one fixed order (the kernels
    sort the samples by label and both DMR copies walk that list: the copies agree bit for bit)."""
    sums = np.zeros((k, X.shape[1]), np.float64)
    np.add.at(sums, labels, np.asarray(X, np.float64))
    counts = np.bincount(labels, minlength=k).astype(np.int64)
    return sums, counts


def update(X, labels, C_old, faults=(), counters: Counters | None = None, scheme: str = "abft"):
    """New centroids (empty clusters keep theirs) and counts, protected by DMR and the invariants."""
    counters = counters if counters is not None else Counters()
    dt = storage_dtype("fp64" if np.asarray(C_old).dtype == np.float64 else "fp32")
    X = np.asarray(X)
    k = C_old.shape[0]
    n = X.shape[0]
    sums, counts = update_once(X, labels, k)
    for f in faults:
        if f.site == "update-sum":
            sums[f.row, f.col] = f.apply(sums[f.row, f.col], np.float64)
            counters.injected += 1
        elif f.site == "update-count":
            counts[f.row] = counts[f.row] ^ (1 << (f.bit or 0)) if f.bit is not None else counts[f.row] + int(f.offset)
            counters.injected += 1
    if scheme != "none":
        sums_b, counts_b = update_once(X, labels, k)
        col = np.asarray(X, np.float64).sum(axis=0)
        colabs = np.abs(np.asarray(X, np.float64)).sum(axis=0)
        why = []
        if not np.array_equal(counts, counts_b):
            why.append("counts")
        if not np.array_equal(sums.view(np.int64), sums_b.view(np.int64)):
            why.append("sums")
        if int(counts.sum()) != n:
            why.append("count invariant")
        if not (np.abs(sums.sum(axis=0) - col) <= 2.0 * LAMBDA * U64 * (math.sqrt(n) + math.sqrt(k)) * colabs).all():
            why.append("sum invariant")
        if why:
            counters.detected += 1
            counters.recomputed += 1
            counters.events.append(("update", ",".join(why)))
            sums, counts = update_once(X, labels, k)
    C_new = np.array(C_old, dtype=dt, copy=True)
    nz = counts > 0
    C_new[nz] = (sums[nz] / counts[nz, None]).astype(dt)
    return C_new, counts


def lloyd(X, C0, precision: str, iters: int = 10, tol: float = 0.0, n_tb: int = 64, scheme: str = "abft",
          refine: bool = False, backend: str = "cutlass90"):
    """Iterate until ``iters`` or the largest centroid shift squared <= tol * (mean ||c||^2). refine: the assign step
    with near ties refined (``refine_assign`` with the distances of ``backend``; the inertia from the update's sums,
    ``refine_inertia``)."""
    dt = storage_dtype(precision)
    C = np.asarray(C0, dt)
    history = []
    for it in range(iters):
        if refine:
            labels = refine_assign(X, C, precision, backend=backend)[0]
            inertia = refine_inertia(X, C, labels)
        else:
            labels, best, xx, _ = assign(X, C, precision, n_tb, scheme)
            inertia = float(np.maximum(best, 0).sum())
        C_new, counts = update(X, labels, C, scheme=scheme)
        shift = float(((C_new.astype(np.float64) - C.astype(np.float64)) ** 2).sum(axis=1).max())
        history.append({"iter": it, "inertia": inertia, "shift": shift})
        C = C_new
        if tol > 0 and shift <= tol * float((C.astype(np.float64) ** 2).sum(axis=1).mean()):
            break
    return C, labels, history


# ---------------------------------------------------------------------------------------------
# The reference and the label check
# ---------------------------------------------------------------------------------------------


def reference_distances(X, C) -> np.ndarray:
    X = np.asarray(X, np.float64)
    C = np.asarray(C, np.float64)
    return (X * X).sum(1)[:, None] + (C * C).sum(1)[None, :] - 2.0 * X @ C.T


def check_labels(X, C, labels, precision: str):
    """Compare labels with the fp64 reference: a label may differ only where its distance is within the
    rounding bands of the reference's nearest. Returns (agreement rate, labels outside their band)."""
    D = reference_distances(X, C)
    n = D.shape[0]
    ref = np.argmin(D, axis=1)
    rows = np.arange(n)
    xx = (np.asarray(X, np.float64) ** 2).sum(1)
    cc = (np.asarray(C, np.float64) ** 2).sum(1)
    band = distance_band(xx, cc[labels], X.shape[1], precision) + distance_band(xx, cc[ref], X.shape[1], precision)
    diff = labels != ref
    outside = diff & ~(D[rows, labels] - D[rows, ref] <= band)
    return 1.0 - diff.mean(), int(outside.sum())


def blobs(n: int, dims: int, k: int, seed: int = 0, spread: float = 0.1):
    """Gaussian blobs: k centres normal(0, 1), points around them with standard deviation ``spread``."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, dims))
    lab = rng.integers(0, k, n)
    return (centres[lab] + spread * rng.standard_normal((n, dims))).astype(np.float32), centres.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# tf32 near ties refined (the cutlass90 and fused backends' ``refine`` option)
# ---------------------------------------------------------------------------------------------


def top2(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nearest and the second nearest column of each row of d, the lower index first on a tie (the kernels' 64-bit
    keys: the distance's order-preserving bits above the column). One column: the second is the first."""
    order = np.argsort(d, axis=1, kind="stable")
    return order[:, 0], order[:, 1] if d.shape[1] > 1 else order[:, 0]


TF32_OPERAND_ERR = 2.0**-9  # |tf32(x) tf32(c) - x c| <= (2^-10 + 2^-10 + 2^-20) |x c|: each operand within 2^-10 (truncated or rounded)


def refine_band(xx, cc, dims: int):
    """The refine step's bound on the error of one computed d' = cc - 2 acc (tf32 operands, fp32 sums), deterministic:
    2 (2^-9 + (ceil(dims / 8) + 2) 2^-23) ||x|| ||c|| + (dims + 2) 2^-24 cc -- the operands' rounding (Cauchy-Schwarz:
    sum |x_i c_i| <= ||x|| ||c||), the wgmma's truncating fp32 sums (a rounding per k-step of 8) and cc's own fp32 sum.
    Far tighter than ``distance_band`` (the label check's probabilistic bound on the whole distance, which is about
    (sqrt(dims) + 2) LAMBDA (||x|| + ||c||)^2 / (4 ||x|| ||c||) times wider) and still a bound, so the near ties it flags
    hold every row whose computed order of the two nearest can differ from the exact one."""
    g_acc = (math.ceil(dims / 8) + 2) * 2.0**-23
    g_cc = (dims + 2) * 2.0**-24
    xx, cc = np.asarray(xx, np.float64), np.asarray(cc, np.float64)
    return 2.0 * (TF32_OPERAND_ERR + g_acc) * np.sqrt(xx * cc) + g_cc * cc


def fused_refine_band(xx, cc, dims: int):
    """The same bound for the fused backend's d = -2 a'' (``fused_distances``): its MMA folds both norms in, so the
    fp32 sums' roundings (a truncation per k-step: ceil(dims / 8) of the dimensions, the norms' one, two more for the
    sums inside an MMA) act on partial sums up to ||x||^2 + ||c||^2 rather than ||x|| ||c||, and the arg-min's key drops
    5 bits of a'' (2^-18 of |a''| <= ||x||^2 + ||c||^2): 2 2^-9 ||x|| ||c|| + (2 (ceil(dims / 8) + 3) 2^-23 + 2^-17)
    (||x||^2 + ||c||^2) + (2^-22 + (dims + 2) 2^-24) ||c||^2 -- the last term -cc/2's two TF32 parts and cc's own fp32
    sum. ||x||^2's rounding and its parts are the same in every distance of a row and drop out of the gap."""
    g = 2.0 * (math.ceil(dims / 8) + 3) * 2.0**-23 + 2.0**-17
    g_cc = 2.0**-22 + (dims + 2) * 2.0**-24
    xx, cc = np.asarray(xx, np.float64), np.asarray(cc, np.float64)
    return 2.0 * TF32_OPERAND_ERR * np.sqrt(xx * cc) + g * (xx + cc) + g_cc * cc


REFINE_BANDS = {"cutlass90": refine_band, "fused": fused_refine_band}


def refine_flags(d1, d2, xx, cc1, cc2, dims: int, backend: str = "cutlass90") -> np.ndarray:
    """A near tie: the two nearest computed distances closer than the sum of their error bounds (``refine_band``, or
    ``fused_refine_band``), d2 - d1 <= band(xx, cc1) + band(xx, cc2). Outside it the computed order is the exact one."""
    band = REFINE_BANDS[backend]
    with np.errstate(invalid="ignore"):
        return (np.asarray(d2, np.float64) - d1) <= band(xx, cc1, dims) + band(xx, cc2, dims)


def fused_distances(X, C) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fused kernel's distances d = -2 a'' as its arg-min reads them: the MMA's A row is the sample's TF32 words
    (dims padded to 8 ceil(dims / 8)), then (1, 1, tf32(xx), tf32(xx - tf32(xx))); B's column the centroid's, then (-cc/2
    as two TF32 parts, -1/2, -1/2); exact products summed in fp32 a k-step of 8 at a time; the key keeps a'' without its
    5 low bits. Returns (d in float64, xx, cc: the fp32 norms)."""
    X = np.asarray(X, np.float32)
    C = np.asarray(C, np.float32)
    n, dims = X.shape
    kx = 8 * math.ceil(dims / 8)
    xx = (X * X).sum(axis=1, dtype=np.float32)
    cc = (C * C).sum(axis=1, dtype=np.float32)
    A = np.zeros((n, kx + 8), np.float64)
    B = np.zeros((C.shape[0], kx + 8), np.float64)
    A[:, :dims], B[:, :dims] = round_tf32(X), round_tf32(C)
    hi = round_tf32(xx)
    A[:, kx:kx + 4] = np.stack([np.ones(n), np.ones(n), hi, round_tf32((xx - hi).astype(np.float32))], axis=1)
    h = (np.float32(-0.5) * cc).astype(np.float32)
    hh = round_tf32(h)
    B[:, kx:kx + 4] = np.stack([hh, round_tf32((h - hh).astype(np.float32)), np.full(len(C), -0.5), np.full(len(C), -0.5)], axis=1)
    a2 = _g.wgmma_acc(A, B.T, 8)
    a2 = (a2.view(np.uint32) & np.uint32(0xFFFFFFE0)).view(np.float32)
    return -2.0 * a2.astype(np.float64), xx, cc


def exact_distance(x, c, backward: bool = False) -> float:
    """||x - c||^2 in fp64 from the fp32 values, the terms added forward (the kernel: fused multiply-adds) or backward
    (a multiply, then an addition): the refine step's two copies."""
    t = np.asarray(x, np.float64) - np.asarray(c, np.float64)
    t = t[::-1] if backward else t
    e = 0.0
    for v in t * t:
        e += float(v)
    return e


def refine_agree(a: float, b: float, dims: int) -> bool:
    """The refine step's DMR: two sums of the same dims non-negative terms in other orders differ by at most
    2 (dims + 2) u64 of the larger (each within gamma_(dims+1) of the exact sum); NaN never agrees."""
    return bool(abs(a - b) <= 2.0 * (dims + 2) * U64 * max(a, b))


def refine_assign(X, C, precision: str = "tf32", faults=(), counters: Counters | None = None, backend: str = "cutlass90"):
    """The assign step with near ties refined, as the kernels run it with ``refine: true``: the computed distances --
    cutlass90: d' = cc - 2 acc (``gemm_nt`` of the precision); fused: d = -2 a'' (``fused_distances``) --, each row's two
    nearest (``top2``); a row whose two are closer than their error bounds (``refine_flags``) takes, of the two, the one
    nearer by exact distances (``exact_distance``, twice: forward and backward, ``refine_agree``; a mismatch computes
    both copies again, a second one keeps the computed label and counts as uncorrectable). faults: (row, bit) flips of
    copy A's distance to the nearest of a flagged row, the first time it is computed. Returns (labels, distances: the
    exact one for a refined row, else the computed one, flagged rows)."""
    counters = counters if counters is not None else Counters()
    X = np.asarray(X, np.float32)
    C = np.asarray(C, np.float32)
    n, dims = X.shape
    if backend == "fused":
        d, xx, cc = fused_distances(X, C)
        base = np.zeros(n)
    else:
        xx = (X * X).sum(axis=1, dtype=np.float32)
        cc = (C * C).sum(axis=1, dtype=np.float32)
        d = (cc[None, :] - np.float32(2) * gemm_nt(X, C, precision)).astype(np.float32)
        base = xx.astype(np.float64)
    rows = np.arange(n)
    l1, l2 = top2(d)
    labels = l1.copy()
    dist = d[rows, l1].astype(np.float64) + base
    flagged = np.flatnonzero((l1 != l2) & refine_flags(d[rows, l1], d[rows, l2], xx.astype(np.float64),
                                                        cc[l1].astype(np.float64), cc[l2].astype(np.float64), dims, backend))
    flips = {int(r): int(b) for r, b in faults}
    for i in flagged:
        i = int(i)
        for attempt in range(2):
            e1a, e2a = exact_distance(X[i], C[l1[i]]), exact_distance(X[i], C[l2[i]])
            if attempt == 0 and i in flips:
                e1a = float(flip_bit(e1a, flips[i], np.float64))
                counters.injected += 1
            e1b, e2b = exact_distance(X[i], C[l1[i]], True), exact_distance(X[i], C[l2[i]], True)
            if refine_agree(e1a, e1b, dims) and refine_agree(e2a, e2b, dims):
                break
            counters.detected += 1
        else:
            counters.uncorrectable += 1
            continue
        if attempt:
            counters.recomputed += 1
        second = e2a < e1a or (e2a == e1a and l2[i] < l1[i])
        labels[i] = l2[i] if second else l1[i]
        dist[i] = e2a if second else e1a
    return labels, dist, flagged


def refine_inertia(X, C, labels) -> float:
    """The inertia as the kernel reports it with ``refine``: sum_i ||x_i||^2 + sum_j (n_j ||c_j||^2 - 2 c_j . S_j) in fp64
    from the update's cluster sums S_j and counts n_j and the assign's centroids (the squared norms in fp32, as the
    kernel's X pass gives them). The rounded distances of the rows no near tie refined would leave TF32's rounding of
    ||x||^2 + ||c||^2 in the sum."""
    X = np.asarray(X, np.float32)
    C64 = np.asarray(C, np.float64)
    sums, counts = update_once(X, labels, C64.shape[0])
    xx = (X * X).sum(axis=1, dtype=np.float32).astype(np.float64)
    return max(float(xx.sum() + (counts * (C64 * C64).sum(axis=1)).sum() - 2.0 * (C64 * sums).sum()), 0.0)


# ---------------------------------------------------------------------------------------------
# The cutlass90 backend's threadblock ABFT (the sm90 assign step): the model the kernels are to implement
# ---------------------------------------------------------------------------------------------

WGMMA_K_TF32 = 8  # k of one TF32 wgmma: the accumulation steps of the threshold


def encode90(Ct, n_tb: int):
    """The centroid tiles' encodings as the cutlass90 kernel's pack step writes them: per tile hi and lo of se s_t and of
    sw w_t (E: 4 rows per tile, dims columns; s_t, w_t summed in fp64 from the TF32 centroids, rounded to fp32 once,
    split into TF32 parts)."""
    return _g.abft16_encode(np.asarray(Ct, np.float32).T, n_tb, "tf32", sums=np.float64)


def refs90(Xt, E, n_tb: int):
    """(r, r') per row and tile as the kernel reads them from the encodings' extra columns of its own GEMM: the fp32
    accumulators of X E^T (the same wgmma), each pair combined in fp32 as hi + lo 2^-11, scaled back."""
    R = _g.wgmma_acc(np.asarray(Xt, np.float64), np.asarray(E, np.float64).T, WGMMA_K_TF32)
    se, sw = (2.0**x for x in _g.abft16_scales(n_tb))
    lo = np.float32(2.0 ** -_g.ABFT16_LO_SHIFT["tf32"])
    return ((R[:, 0::4] + R[:, 1::4] * lo).astype(np.float64) / se, (R[:, 2::4] + R[:, 3::4] * lo).astype(np.float64) / sw)


def split3(V, b_side: bool) -> np.ndarray:
    """tf32x3 on the cutlass90 backend: an operand split over a tripled K as the kernel forms it (X in registers by
    the mainloop, SplitAMainloop; the centroids by pack_kernel), hi = tf32(v), lo = tf32(v - hi): [lo | hi | hi] for X,
    [hi | lo | hi] for the centroids (b_side), so that the product of the split rows is x_lo c_hi + x_hi c_lo + x_hi c_hi."""
    V = np.asarray(V, np.float32)
    hi = round_tf32(V)
    lo = round_tf32((V - hi).astype(np.float32))
    return np.concatenate([hi, lo, hi] if b_side else [lo, hi, hi], axis=1)


def norm_prefilter_clean(P1: float, r: float, nx: float, nc: float, unit: float) -> bool:
    """The first stage of the cutlass90 check (ftgen_rules::norm_prefilter_clean): a unit is clean when
    |P1 - r| <= unit max(nx nc, |r|), nx = ||x_i||, nc = the sum of ||c_j|| over the tile. By Cauchy-Schwarz nx nc bounds
    sum |a|, so this threshold is never below the full rule's unweighted one: the stage raises no alarm the full rule
    would not, and is looser by up to nx nc / sum |a| (about sqrt(pi dims / 2) on i.i.d. data); whether a fault it
    passes matters is the campaigns' question (significance: a label outside its band). The epilogue sums only a per
    element, and (j + 1) a and |a| for the full rule on the rare path; the weighted residual is not looked at here."""
    d = P1 - r
    return bool(np.isfinite(d)) and abs(d) <= unit * max(nx * nc, abs(r))


def assign90(X, C, n_tb: int = 128, faults=(), correct: bool = True, lam: float = _g.ABFT16_LAMBDA, online: bool = True,
             prefilter: bool = False, tf32x3: bool = False):
    """The sm90 assign step with the gemm backend's 16-bit check transplanted to TF32 operands, as the cutlass90 kernel
    runs it: the accumulators acc = X C^T of the operands as the wgmma reads them (TF32, fp32 sums WGMMA_K_TF32 at a
    time), faults applied to them (each (row, col, bit)); per row and tile of n_tb centroids the epilogue's sums (a,
    (j + 1) a, |a| in fp32) and the references from the tiles' encodings (`encode90`, `refs90`); the verdict
    `ftgen_rules::abft16_unit_verdict` at lambda 2^-24 (ceil(dims / 8) + n_tb + 1), before the arg-min reads the
    accumulators. A located fault (online) is corrected in place (r minus the row's other elements, summed anew in fp64: no
    cancellation against a huge faulty value), then the tile's nearest centroid is taken; any
    other detection (and every one with online False: correct: detect) has the (row, tile)'s distances recomputed from
    the exact products (the kernel's fix before the minimum over the tiles). correct False: nothing is changed (the
    campaigns' uncorrected run). prefilter: the first stage (`norm_prefilter_clean`, as the kernel runs it) decides clean
    units, the full rule the rest. tf32x3: the operands split over a tripled K (`split3`; the encodings of the values the
    products see, each encoding row [v | 0 | v]) and the unit counting the three products' k-steps. Returns (labels,
    verdicts {(row, tile): verdict}, largest clean score, counters)."""
    X = np.asarray(X, np.float32)
    C = np.asarray(C, np.float32)
    n, dims = X.shape
    k = C.shape[0]
    if tf32x3:
        Xt, Ct = split3(X, False), split3(C, True)
        Cv = Ct[:, :dims] + Ct[:, dims:2 * dims]  # (the values the products see: c_hi + c_lo, exact in fp32)
        E = encode90(Cv, n_tb)
        E = np.concatenate([E, np.zeros_like(E), E], axis=1)
        ksum = 3 * dims
    else:
        Xt, Ct = round_tf32(X), round_tf32(C)
        E = encode90(Ct, n_tb)
        ksum = dims
    X64, C64 = Xt.astype(np.float64), Ct.astype(np.float64)
    acc = _g.wgmma_acc(X64, C64.T, WGMMA_K_TF32)
    for row, col, bit in faults:
        acc[row, col] = flip_bit(acc[row, col], int(bit), np.float32)
    cc = (C * C).sum(axis=1, dtype=np.float32)
    nx = np.sqrt((X * X).sum(axis=1, dtype=np.float32))
    exact = X64 @ C64.T
    r, rw = refs90(Xt, E, n_tb)
    unit = _g.abft16_unit(ksum, WGMMA_K_TF32, n_tb, lam)
    tiles = -(-k // n_tb)
    best_v = np.full(n, np.inf)
    best_i = np.zeros(n, dtype=np.int64)
    verdicts, clean, counters = {}, 0.0, Counters()
    for t in range(tiles):
        j0, j1 = t * n_tb, min(k, (t + 1) * n_tb)
        P1, PW, PA = _g.strip_sums(acc, j0, j1)
        nc = float(np.sqrt(cc[j0:j1]).sum(dtype=np.float32))
        for i in range(n):
            if prefilter and norm_prefilter_clean(float(P1[i]), float(r[i, t]), float(nx[i]), nc, unit):
                v, score = -1, 0.0
            else:
                v, score = _g.abft16_verdict(float(P1[i]), float(PW[i]), float(PA[i]), float(r[i, t]), float(rw[i, t]),
                                             unit, j1 - j0)
            a = acc[i, j0:j1].copy()
            recompute = False
            if v == -1:
                clean = max(clean, score)
            else:
                verdicts[(i, t)] = v
                counters.detected += 1
                if correct and online and v >= 0:  # in place: r minus the row's other elements (summed anew, in fp64)
                    a[v] = np.float32(float(r[i, t]) - np.delete(a, v).astype(np.float64).sum())
                    counters.corrected += 1
                elif correct:
                    recompute = True
                    counters.recomputed += 1
            with np.errstate(over="ignore", invalid="ignore"):
                row_d = (cc[j0:j1].astype(np.float64) - 2.0 * exact[i, j0:j1] if recompute
                         else (cc[j0:j1] - np.float32(2.0) * a).astype(np.float32).astype(np.float64))
            j = int(np.argmin(np.where(np.isnan(row_d), np.inf, row_d)))
            if row_d[j] < best_v[i]:  # (strictly: the lower tile keeps a tie)
                best_v[i], best_i[i] = row_d[j], j0 + j
    return best_i, verdicts, clean, counters


# ---------------------------------------------------------------------------------------------
# The fused backend (dims <= 32): exact fixed-point cluster sums and the arg-min's two checks
# ---------------------------------------------------------------------------------------------

LABEL_EPS = 2.0 ** -15  # the fused kernel's label check: the label's distance recomputed within LABEL_EPS (xx + cc)


def fx_shift(xmax: float, samples: int) -> int:
    """The fused update's fixed point of one dimension: x is added as rint(x 2^shift), shift = B - e with
    B = 62 - bits(samples) and max |x| < 2^e, so that any sum of `samples` terms fits an int64 (the kernel's
    fx_shift, clamped to a float's exponent range)."""
    _, e = math.frexp(float(xmax))
    return max(-126, min(127, 62 - int(samples).bit_length() - e))


def fx_quantize(X) -> tuple[np.ndarray, np.ndarray]:
    """X (float32) as the fused update's integers, per dimension, and each dimension's shift."""
    X = np.asarray(X, np.float32)
    shifts = np.array([fx_shift(np.abs(X[:, d]).max(initial=0.0), X.shape[0]) for d in range(X.shape[1])])
    q = np.rint(np.ldexp(X.astype(np.float64), shifts[None, :])).astype(np.int64)  # (exact: x 2^shift is a float32)
    return q, shifts


def fx_update(X, labels, k: int, faults=(), counters: Counters | None = None):
    """The fused update: cluster sums and counts as exact integers (so the order of the atomics does not matter),
    twice; a fault (Fault(site='update', row=cluster, col=dimension or dims for the count, bit=...)) lands in copy 0.
    The copies must agree exactly and the sums add up to X's column sums exactly, the counts to the samples; a
    failure recomputes. Returns (sums in fp64, counts, detected)."""
    counters = counters if counters is not None else Counters()
    q, shifts = fx_quantize(X)
    dims = q.shape[1]
    sums = np.zeros((2, k, dims), np.int64)
    for copy in range(2):
        np.add.at(sums[copy], labels, q)
    counts = np.stack([np.bincount(labels, minlength=k).astype(np.int64)] * 2)
    colsum = q.sum(axis=0)
    for f in faults:
        if f.site != "update":
            continue
        if f.col < dims:
            sums[0, f.row, f.col] = np.int64(np.uint64(sums[0, f.row, f.col].view(np.uint64) ^ np.uint64(1 << (f.bit & 63))).view(np.int64))
        else:
            counts[0, f.row] ^= 1 << (f.bit & 30)
        counters.injected += 1
    bad = (not np.array_equal(sums[0], sums[1]) or not np.array_equal(counts[0], counts[1])
           or not np.array_equal(sums[0].sum(axis=0), colsum) or counts[0].sum() != len(labels))
    if bad:
        counters.detected += 1
        counters.recomputed += 1
        sums[0] = sums[1] = 0
        np.add.at(sums[0], labels, q)
        counts[0] = np.bincount(labels, minlength=k)
    return np.ldexp(sums[0].astype(np.float64), -shifts[None, :]), counts[0], bad


def label_distance_tf32(x, c) -> np.float32:
    """d'(label) = ||c||^2 - 2 x . c from TF32 operands, exact products, an fp32 sum (the fused kernel recomputes the
    label's a'' = -d / 2 the same way, its norms folded in as TF32 parts)."""
    xt, ct = round_tf32(np.asarray(x, np.float32)), round_tf32(np.asarray(c, np.float32))
    dot = np.float32(0.0)
    for a, b in zip(xt.astype(np.float64), ct.astype(np.float64)):
        dot = np.float32(dot + np.float32(a * b))
    return np.float32(np.float32(np.dot(c.astype(np.float64), c.astype(np.float64))) - np.float32(2.0) * dot)


def label_distance_tf32x3(x, c) -> np.float32:
    """The same for tf32x3: each product as the three TF32 products (big * big, big * small, small * big; small =
    tf32(v - big)), each exact, added in fp32 in the kernel's order (small ones first)."""
    x, c = np.asarray(x, np.float32), np.asarray(c, np.float32)
    xb, cb = round_tf32(x), round_tf32(c)
    xs, cs = round_tf32((x - xb).astype(np.float32)), round_tf32((c - cb).astype(np.float32))
    dot = np.float32(0.0)
    for ab, as_, bb, bs in zip(*(v.astype(np.float64) for v in (xb, xs, cb, cs))):
        for term in (ab * bb, as_ * bb, ab * bs):
            dot = np.float32(dot + np.float32(term))
    return np.float32(np.float32(np.dot(c.astype(np.float64), c.astype(np.float64))) - np.float32(2.0) * dot)


def argmin_keys(a2: np.ndarray) -> tuple[int, int]:
    """The fused kernel's arg-min over one row's a'' = -d / 2 (float32): the smallest key, the unsigned bits of a'' with
    the column's place in the 5 low bits (here the column itself, < 32), and the second copy, the smallest bare bit
    pattern. Returns (key, second)."""
    bits = np.asarray(a2, np.float32).view(np.uint32)
    keys = (bits & np.uint32(0xFFFFFFE0)) | np.arange(len(bits), dtype=np.uint32)
    return int(keys.min()), int(bits.min())


def argmin_checks(key: int, second: int, recomputed: float, xx: float, cc_label: float) -> bool:
    """The fused kernel's two checks of one row's arg-min (True: accepted). The value: the key's value bits are the
    second copy's. The label: its a'' recomputed from the operands is the key's within LABEL_EPS (xx + cc) / 2 -- a
    label that passes is within LABEL_EPS (xx + cc) of the smallest distance, whatever its index."""
    value = np.uint32(key & 0xFFFFFFE0).view(np.float32)
    return bool((key & 0xFFFFFFE0) == (second & 0xFFFFFFE0) and abs(float(recomputed) - float(value)) <= 0.5 * LABEL_EPS * (xx + cc_label))
