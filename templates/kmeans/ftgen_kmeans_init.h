// ftgen kmeans: the initial centroids a launch can choose itself (ftgen_kmeans_problem::init), by seed.
//
// Both methods pick samples of X, so whatever they choose is a valid start:
//   random    the `clusters` samples with the smallest keys ftkm_key(seed, i) (ties: the lower index; none
//             in practice: 64-bit keys), in key order: a uniform sample without replacement.
//   kmeans++  the first centroid is sample floor(ftkm_uniform(seed, 0) samples); centroid t (t >= 1) is the
//             first sample i whose running sum of D^2 (each sample's squared distance to its nearest chosen
//             centroid, in fp64) exceeds ftkm_uniform(seed, t) times their total: D^2 weighting (Arthur and
//             Vassilvitskii). Where the running sum never exceeds it (rounding), the last sample with D^2 > 0;
//             where the total is 0 (every sample on a chosen centroid), sample floor(u samples).
//   kmeans++ over a sample
//             random's first m = ftkm_sample_size(samples, clusters) samples (the m smallest keys, in key order) as
//             a sample Y, kmeans++ over Y with the same seed; centroid t is the sample of X behind Y's pick t. Where m
//             is every sample, kmeans++ itself. A pass per centroid reads m rows instead of X (for 2^20 samples and
//             1024 clusters a sixteenth of X).
// The draws are a counter-based generator (splitmix64's finalizer), the same on the host and the device: the
// device kernels (ftgen_kmeans_init.cuh), the bench's reference (below) and the NumPy model
// (ftgen/families/kmeans/model.py) pick the same samples, but where a draw falls within fp64 rounding of a
// boundary between two samples (their sums are added in different orders).
#pragma once

#include <stdint.h>

#include <algorithm>
#include <utility>
#include <vector>

#if defined(__CUDACC__)
#define FTKM_HD __host__ __device__
#else
#define FTKM_HD
#endif

// splitmix64's output function: a bijection of 64-bit words that mixes every bit into every other
FTKM_HD inline uint64_t ftkm_mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// the random method's key of sample i
FTKM_HD inline uint64_t ftkm_key(uint64_t seed, uint64_t i) { return ftkm_mix(ftkm_mix(seed) + i); }
// kmeans++'s draw t: uniform in [0, 1), 53 bits
FTKM_HD inline double ftkm_uniform(uint64_t seed, uint64_t t) { return static_cast<double>(ftkm_mix(ftkm_mix(~seed) + t) >> 11) * 0x1.0p-53; }
// kmeans++ over a sample: the sample's size, 64 samples per cluster (every sample where that is more)
constexpr long long kFtkmSamplePerCluster = 64;
FTKM_HD inline long long ftkm_sample_size(long long n, int k) {
  const long long m = kFtkmSamplePerCluster * k;
  return m < n ? m : n;
}
// a sample drawn uniformly by draw t (< n)
FTKM_HD inline long long ftkm_uniform_index(uint64_t seed, uint64_t t, long long n) {
  const long long i = static_cast<long long>(ftkm_uniform(seed, t) * static_cast<double>(n));
  return i < n ? i : n - 1;
}

// ---- the host reference (the bench's check of the device kernels; a shim of the tests' against the NumPy model) ----

// random: the chosen samples' indices, in the order they become centroids
inline std::vector<long long> ftkm_reference_random(long long n, long long k, uint64_t seed) {
  std::vector<std::pair<uint64_t, long long>> keys(static_cast<size_t>(n));
  for (long long i = 0; i < n; ++i) keys[static_cast<size_t>(i)] = {ftkm_key(seed, static_cast<uint64_t>(i)), i};
  std::partial_sort(keys.begin(), keys.begin() + k, keys.end());
  std::vector<long long> idx(static_cast<size_t>(k));
  for (long long t = 0; t < k; ++t) idx[static_cast<size_t>(t)] = keys[static_cast<size_t>(t)].second;
  return idx;
}

// kmeans++: the chosen samples' indices (X: n x d, row-major); D^2 in fp64, sums in index order
template <class T>
std::vector<long long> ftkm_reference_plusplus(const T* X, long long n, int d, int k, uint64_t seed) {
  std::vector<long long> idx(static_cast<size_t>(k));
  std::vector<double> d2(static_cast<size_t>(n));
  idx[0] = ftkm_uniform_index(seed, 0, n);
  for (int t = 0; t < k; ++t) {
    const T* c = X + idx[static_cast<size_t>(t)] * d;
    for (long long i = 0; i < n; ++i) {
      const T* x = X + i * d;
      double s = 0.0;
      for (int j = 0; j < d; ++j) {
        const double e = static_cast<double>(x[j]) - static_cast<double>(c[j]);
        s += e * e;
      }
      d2[static_cast<size_t>(i)] = t == 0 ? s : std::min(d2[static_cast<size_t>(i)], s);
    }
    if (t + 1 == k) break;
    double total = 0.0;
    for (double v : d2) total += v;
    const double u = ftkm_uniform(seed, static_cast<uint64_t>(t + 1));
    long long pick = -1;
    if (total > 0.0) {
      const double target = u * total;
      double run = 0.0;
      long long last = -1;
      for (long long i = 0; i < n && pick < 0; ++i) {
        if (d2[static_cast<size_t>(i)] > 0.0) last = i;
        run += d2[static_cast<size_t>(i)];
        if (run > target) pick = i;
      }
      if (pick < 0) pick = last;
    } else {
      pick = ftkm_uniform_index(seed, static_cast<uint64_t>(t + 1), n);
    }
    idx[static_cast<size_t>(t + 1)] = pick;
  }
  return idx;
}

// kmeans++ over a sample: the chosen samples' indices in X
template <class T>
std::vector<long long> ftkm_reference_plusplus_sample(const T* X, long long n, int d, int k, uint64_t seed) {
  const long long m = ftkm_sample_size(n, k);
  if (m == n) return ftkm_reference_plusplus(X, n, d, k, seed);
  const std::vector<long long> rows = ftkm_reference_random(n, m, seed);
  std::vector<T> Y(static_cast<size_t>(m) * d);
  for (long long j = 0; j < m; ++j)
    std::copy(X + rows[static_cast<size_t>(j)] * d, X + (rows[static_cast<size_t>(j)] + 1) * d, Y.begin() + j * d);
  std::vector<long long> idx = ftkm_reference_plusplus(Y.data(), m, d, k, seed);
  for (long long& i : idx) i = rows[static_cast<size_t>(i)];
  return idx;
}
