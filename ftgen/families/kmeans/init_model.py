"""NumPy model of the initial centroids a kmeans launch can choose itself (templates/kmeans/ftgen_kmeans_init.h):
the counter-based draws, the random method and kmeans++ (over X or over a sample). Re-exported by :mod:`.model`."""

from __future__ import annotations

import numpy as np

_M64 = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function over uint64 arrays (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def init_keys(n: int, seed: int) -> np.ndarray:
    """The random method's key of every sample: mix(mix(seed) + i)."""
    with np.errstate(over="ignore"):
        return _mix(_mix(np.array([seed & _M64], dtype=np.uint64)) + np.arange(n, dtype=np.uint64))


def init_uniform(seed: int, t) -> np.ndarray:
    """kmeans++'s draws t: uniform in [0, 1), 53 bits."""
    with np.errstate(over="ignore"):
        z = _mix(_mix(np.array([~seed & _M64], dtype=np.uint64)) + np.asarray(t, dtype=np.uint64))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def init_random(n: int, k: int, seed: int) -> np.ndarray:
    """The indices of the samples the random method makes centroids, in order: the k smallest keys (ties: the lower
    index)."""
    return np.argsort(init_keys(n, seed), kind="stable")[:k]


def init_plusplus(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """kmeans++ (D^2 weighting) by the counter-based draws: the first centroid sample floor(u_0 n); centroid t the
    first sample whose running sum of D^2 (fp64) exceeds u_t times the total (else the last with D^2 > 0; a total of 0:
    sample floor(u_t n)). Returns the chosen indices in order."""
    X64 = np.asarray(X, dtype=np.float64)
    n = X64.shape[0]
    u = init_uniform(seed, np.arange(k))
    idx = np.empty(k, dtype=np.int64)
    idx[0] = min(int(u[0] * n), n - 1)
    d2 = None
    for t in range(k):
        dist = ((X64 - X64[idx[t]]) ** 2).sum(axis=1)
        d2 = dist if d2 is None else np.minimum(d2, dist)
        if t + 1 == k:
            break
        total = d2.sum()
        if total > 0:
            run = np.cumsum(d2)
            over = np.flatnonzero(run > u[t + 1] * total)
            idx[t + 1] = over[0] if over.size else np.flatnonzero(d2 > 0)[-1]
        else:
            idx[t + 1] = min(int(u[t + 1] * n), n - 1)
    return idx


SAMPLE_PER_CLUSTER = 64  # kmeans++ over a sample: samples per cluster (ftkm_sample_size)


def init_sample_size(n: int, k: int) -> int:
    """kmeans++ over a sample: how many samples it sees, 64 per cluster (every sample where that is more)."""
    return min(n, SAMPLE_PER_CLUSTER * k)


def init_plusplus_sample(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """kmeans++ over a sample: the random method's first m = init_sample_size(n, k) samples (in key order) as a sample
    Y, kmeans++ over Y with the same seed; returns the chosen samples' indices in X. Where m is every sample, kmeans++
    itself."""
    n = X.shape[0]
    m = init_sample_size(n, k)
    if m == n:
        return init_plusplus(X, k, seed)
    rows = init_random(n, m, seed)
    return rows[init_plusplus(X[rows], k, seed)]
