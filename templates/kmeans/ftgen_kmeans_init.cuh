// ftgen kmeans: the device side of the initial centroids (ftgen_kmeans_init.h says what is chosen).
//
// random    a key per sample (ftkm_key), CUB's radix sort of (key, index) pairs, the first `clusters` indices'
//           rows copied into C.
// kmeans++  one cooperative launch (plusplus_kernel); per centroid t one pass over X (dist_block: each sample's
//           squared distance to centroid t in fp64, its D^2 the minimum over the chosen ones, a partial sum per
//           partition block of rows_per_block samples, every sum in a fixed order), a grid-wide barrier, one warp
//           (pick_block) finds the next centroid from the partials and the D^2 of one partition block and copies its
//           row into C, a second barrier: each pass reads X once (O(samples dims clusters) in all, as every kmeans++),
//           with no launch between the passes.
// kmeans++ over a sample
//           random's sort, its first m = ftkm_sample_size(samples, clusters) samples' rows gathered into Y, kmeans++'s
//           passes over Y (rows of Y into C), the picks mapped back to their samples of X.
// Either way the centroids are rows of X copied bit for bit; a protected variant copies them again from the chosen
// indices and compares (verify_kernel): a fault in the choice can only choose another sample, a fault in the copy is
// detected and repaired.
// The scratch overlays the start of the launch's workspace (the launch uses it before anything else does).
#pragma once

#include <algorithm>

#include <cooperative_groups.h>
#include <cub/cub.cuh>

#include "ftgen_ft.cuh"
#include "ftgen_kmeans.h"
#include "ftgen_kmeans_init.h"

namespace ftkm_init {

// samples per block of a kmeans++ pass over n rows (one partial sum each): 256, fewer where n is small, so that about
// a thousand blocks keep loads in flight (a sample of 65536 rows: 1024 blocks of 64)
__host__ __device__ inline int rows_per_block(int n) { return n >= (1 << 18) ? 256 : n >= (1 << 16) ? 64 : 32; }
constexpr int kThreads = 256;   // threads of the pass's blocks
constexpr int kStagedParts = 6144;  // partials the picking block stages in shared memory (48 KB)

inline size_t align256(size_t x) { return (x + 255) & ~static_cast<size_t>(255); }
__host__ __device__ inline int blocks_of(int n) { return (n + rows_per_block(n) - 1) / rows_per_block(n); }

// CUB's scratch for the sort of n (key, index) pairs
inline size_t sort_temp_bytes(int n) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
                                  static_cast<const int*>(nullptr), static_cast<int*>(nullptr), n);
  return bytes;
}

// kmeans++'s passes over m rows: each row's D^2, a partial sum per block of rows_per_block(m) rows, the current centroid's row
struct PlusPlus {
  double *d2, *part;
  long long* cur;
};

// The scratch, carved in order: the chosen indices (clusters), then random's keys and indices (twice) and CUB's
// scratch; kmeans++ over X overlays random's pieces, kmeans++ over a sample follows them (it reads the sorted indices):
// the sample's rows Y, then its passes' pieces
struct Scratch {
  long long* chosen;
  uint64_t *keys, *keys_out;
  int *vals, *vals_out;
  void* temp;
  size_t temp_bytes;
  PlusPlus pp;         // kmeans++ over X
  unsigned char* Y;    // kmeans++ over a sample: its rows (m x d elements)
  PlusPlus sample_pp;  // and its passes
};
inline size_t carve(int n, int d, int k, size_t elem_bytes, unsigned char* base, Scratch* s) {
  size_t off = 0;
  auto take = [&](size_t bytes) -> unsigned char* {
    unsigned char* p = base ? base + off : nullptr;
    off += align256(bytes);
    return p;
  };
  Scratch tmp;
  Scratch& o = s ? *s : tmp;
  o.chosen = reinterpret_cast<long long*>(take(sizeof(long long) * k));
  const size_t common = off;
  o.keys = reinterpret_cast<uint64_t*>(take(sizeof(uint64_t) * n));
  o.keys_out = reinterpret_cast<uint64_t*>(take(sizeof(uint64_t) * n));
  o.vals = reinterpret_cast<int*>(take(sizeof(int) * n));
  o.vals_out = reinterpret_cast<int*>(take(sizeof(int) * n));
  o.temp_bytes = sort_temp_bytes(n);
  o.temp = take(o.temp_bytes);
  auto passes = [&](int m) {
    PlusPlus q;
    q.d2 = reinterpret_cast<double*>(take(sizeof(double) * m));
    q.part = reinterpret_cast<double*>(take(sizeof(double) * blocks_of(m)));
    q.cur = reinterpret_cast<long long*>(take(sizeof(long long)));
    return q;
  };
  const int m = static_cast<int>(ftkm_sample_size(n, k));
  o.Y = take(m < n ? elem_bytes * static_cast<size_t>(m) * d : 0);
  o.sample_pp = passes(m);
  const size_t sample_end = off;
  off = common;  // (kmeans++'s pieces overlay random's)
  o.pp = passes(n);
  return std::max(off, sample_end);
}
// the workspace bytes the initial centroids need (the launch's workspace is at least this)
inline size_t workspace_bytes(int n, int d, int k, size_t elem_bytes) { return carve(n, d, k, elem_bytes, nullptr, nullptr); }

template <class T>
__global__ void key_kernel(int n, uint64_t seed, uint64_t* keys, int* vals) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    keys[i] = ftkm_key(seed, static_cast<uint64_t>(i));
    vals[i] = i;
  }
}

// C[t] = X[idx[t]] for t < k (a warp per row); chosen[t] = idx[t] where chosen is not null
template <class T>
__global__ void gather_kernel(const T* __restrict__ X, int d, int k, const int* idx, long long* chosen, T* C) {
  const int warps = gridDim.x * blockDim.x / 32, lane = threadIdx.x % 32;
  for (int t = (blockIdx.x * blockDim.x + threadIdx.x) / 32; t < k; t += warps) {
    const long long i = idx[t];
    if (lane == 0 && chosen) chosen[t] = i;
    for (int j = lane; j < d; j += 32) C[static_cast<size_t>(t) * d + j] = X[static_cast<size_t>(i) * d + j];
  }
}

// One partition block's share of a pass: D^2 of its samples (block b of rows_per_block(n)) against the centroid row c,
// and their partial sum into part[b]. G lanes per sample (along the dimensions), the samples in order; every sum in a
// fixed order.
template <class T, int G>
__device__ void dist_block(const T* __restrict__ X, int n, int d, const T* c, double* d2, double* part, bool first, int b,
                           double* warp_sum) {
  const int lane = threadIdx.x % 32, g = lane % G, warp = threadIdx.x / 32;
  const int rows = rows_per_block(n), r0 = b * rows, r1 = min(n, r0 + rows);
  constexpr int kPerPass = kThreads / G;  // samples per pass of the block
  double acc = 0.0;                       // (the group leader's samples, in order)
  // two samples a group at once (r and r + kPerPass: twice the loads in flight), each one's sum in the order of one
  for (int r = r0 + threadIdx.x / G; r - static_cast<int>(threadIdx.x / G) < r1; r += 2 * kPerPass) {
    const bool in0 = r < r1, in1 = r + kPerPass < r1;
    const T* x0 = X + static_cast<size_t>(in0 ? r : r0) * d;
    const T* x1 = X + static_cast<size_t>(in1 ? r + kPerPass : r0) * d;
    double s0 = 0.0, s1 = 0.0;
    for (int j = g; j < d; j += G) {
      const double cj = static_cast<double>(__ldg(c + j));
      const double e0 = static_cast<double>(x0[j]) - cj, e1 = static_cast<double>(x1[j]) - cj;
      s0 = fma(e0, e0, s0);
      s1 = fma(e1, e1, s1);
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) {
      s0 += __shfl_xor_sync(0xffffffffu, s0, o);
      s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    }
    if (g == 0 && in0) {
      const double v = first ? s0 : fmin(d2[r], s0);
      d2[r] = v;
      acc += v;
    }
    if (g == 0 && in1) {
      const double v = first ? s1 : fmin(d2[r + kPerPass], s1);
      d2[r + kPerPass] = v;
      acc += v;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) warp_sum[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) sum += warp_sum[w];
    part[b] = sum;
  }
  __syncthreads();  // (warp_sum is written again by the next partition block)
}

// The lanes' contiguous chunks of v[0, m): each lane's sum, their inclusive scan over the lanes and the exclusive one
// (every sum in a fixed order)
__device__ inline void chunk_scan(const double* v, int m, int lane, int& lo, int& hi, double& sum, double& incl, double& excl) {
  const int per = (m + 31) / 32;
  lo = min(m, lane * per), hi = min(m, lo + per);
  sum = 0.0;
  for (int i = lo; i < hi; ++i) sum += v[i];
  incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double up = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += up;
  }
  excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = 0.0;
}

// Centroid t: the first sample whose running sum of D^2 exceeds u_t times the total, found by warp 0 of one block from
// the partition blocks' partials (staged in shared memory where they fit), then within that partition block from its
// samples' D^2 (ftgen_kmeans_init.h); its row into C[t] and its index into *cur
template <class T>
__device__ void pick_block(const T* __restrict__ X, int n, int d, const double* d2, const double* part, uint64_t seed, int t,
                           long long* cur, long long* chosen, T* C, double* staged) {
  const int nb = blocks_of(n);
  if (nb <= kStagedParts) {
    for (int i = threadIdx.x; i < nb; i += blockDim.x) staged[i] = part[i];
    __syncthreads();
    part = staged;
  }
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  int lo, hi;
  double sum, incl, excl;
  chunk_scan(part, nb, lane, lo, hi, sum, incl, excl);
  const double total = __shfl_sync(0xffffffffu, incl, 31);
  const double u = ftkm_uniform(seed, static_cast<uint64_t>(t));
  long long pick;
  if (total > 0.0) {
    const double target = u * total;
    // the block: the first lane whose inclusive sum exceeds the target (else the last lane with a positive chunk), then
    // that lane's partials in order
    unsigned over = __ballot_sync(0xffffffffu, incl > target);
    const int L = over ? __ffs(over) - 1 : 31 - __clz(__ballot_sync(0xffffffffu, sum > 0.0) | 1u);
    int b = -1;
    double base = 0.0;
    if (lane == L) {
      double run = excl;
      int last = -1;
      for (int i = lo; i < hi; ++i) {
        if (part[i] > 0.0) last = i;
        if (run + part[i] > target) {
          b = i;
          break;
        }
        run += part[i];
      }
      if (b < 0) b = last, run -= last >= 0 ? part[last] : 0.0;
      base = run;
    }
    b = __shfl_sync(0xffffffffu, b, L);
    base = __shfl_sync(0xffffffffu, base, L);
    // the sample: the block's D^2 in the lanes' chunks, scanned
    const int r0 = b * rows_per_block(n), rows = min(n, r0 + rows_per_block(n)) - r0;
    chunk_scan(d2 + r0, rows, lane, lo, hi, sum, incl, excl);
    over = __ballot_sync(0xffffffffu, base + incl > target);
    const int L2 = over ? __ffs(over) - 1 : 31 - __clz(__ballot_sync(0xffffffffu, sum > 0.0) | 1u);
    long long i_pick = -1;
    if (lane == L2) {
      double run = base + excl;
      int last = -1;
      for (int i = lo; i < hi; ++i) {
        const double v = d2[r0 + i];
        if (v > 0.0) last = i;
        run += v;
        if (run > target) {
          i_pick = r0 + i;
          break;
        }
      }
      if (i_pick < 0) i_pick = last >= 0 ? r0 + last : r0;
    }
    pick = __shfl_sync(0xffffffffu, i_pick, L2);
  } else {
    pick = ftkm_uniform_index(seed, static_cast<uint64_t>(t), n);
  }
  if (lane == 0) *cur = pick, chosen[t] = pick;
  for (int j = lane; j < d; j += 32) C[static_cast<size_t>(t) * d + j] = X[static_cast<size_t>(pick) * d + j];
}

namespace {  // (internal linkage: the variant and its twin, two translation units, both include this header)
// kmeans++ over a sample: its picks (rows of the sample) as samples of X, rows[chosen[t]]
__global__ void sample_rows_kernel(int k, const int* rows, long long* chosen) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < k; t += gridDim.x * blockDim.x) chosen[t] = rows[chosen[t]];
}
}  // namespace

__device__ inline bool same_bits(float a, float b) { return __float_as_uint(a) == __float_as_uint(b); }
__device__ inline bool same_bits(double a, double b) { return __double_as_longlong(a) == __double_as_longlong(b); }

// The protected variants' second copy: each centroid compared with its sample's row, bit for bit; a difference (a
// fault in the first copy) is counted, detected and corrected, and the row copied again
template <class T>
__global__ void verify_kernel(const T* __restrict__ X, int n, int d, int k, const long long* chosen, T* C, ftgen::FtCounters* counters) {
  const int warps = gridDim.x * blockDim.x / 32, lane = threadIdx.x % 32;
  for (int t = (blockIdx.x * blockDim.x + threadIdx.x) / 32; t < k; t += warps) {
    const long long i = chosen[t];
    if (i < 0 || i >= n) continue;  // (never: the kernels above choose in range)
    bool diff = false;
    for (int j = lane; j < d; j += 32) {
      const T x = X[static_cast<size_t>(i) * d + j];
      T& c = C[static_cast<size_t>(t) * d + j];
      if (!same_bits(x, c)) c = x, diff = true;
    }
    if (__any_sync(0xffffffffu, diff) && lane == 0 && counters) {
      atomicAdd(&counters->detected, 1ull);
      atomicAdd(&counters->corrected, 1ull);
    }
  }
}

// kmeans++'s passes in one cooperative launch: every block takes partition blocks b = blockIdx.x, + gridDim.x, ... of a
// pass (dist_block); after a grid-wide barrier block 0 picks the next centroid (pick_block) and a second barrier
// publishes it through *q.cur. The first centroid is the uniform draw 0, which every block computes.
template <class T, int G>
__global__ void __launch_bounds__(kThreads, 6) plusplus_kernel(const T* __restrict__ X, int n, int d, int k, uint64_t seed, PlusPlus q,
                                                            long long* chosen, T* C) {
  extern __shared__ double staged[];
  __shared__ double warp_sum[kThreads / 32];
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const int nb = blocks_of(n);
  long long cur = ftkm_uniform_index(seed, 0, n);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) chosen[0] = cur;
    for (int j = threadIdx.x; j < d; j += blockDim.x) C[j] = X[static_cast<size_t>(cur) * d + j];
  }
  for (int t = 0; t < k; ++t) {
    const T* c = X + static_cast<size_t>(cur) * d;
    for (int b = blockIdx.x; b < nb; b += gridDim.x) dist_block<T, G>(X, n, d, c, q.d2, q.part, t == 0, b, warp_sum);
    if (t + 1 == k) break;
    grid.sync();
    if (blockIdx.x == 0) pick_block<T>(X, n, d, q.d2, q.part, seed, t + 1, q.cur, chosen, C, staged);
    grid.sync();
    cur = *static_cast<volatile long long*>(q.cur);
  }
}

template <class T, int G>
cudaError_t plusplus_passes(const T* X, int n, int d, int k, uint64_t seed, PlusPlus q, long long* chosen, T* C, cudaStream_t stream) {
  const int nb = blocks_of(n);
  const size_t smem = nb <= kStagedParts ? sizeof(double) * nb : 0;
  const void* kernel = reinterpret_cast<const void*>(&plusplus_kernel<T, G>);
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t err;
  if ((err = cudaGetDevice(&dev)) != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return err;
  if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem)) != cudaSuccess) return err;
  const int grid = std::max(1, std::min(nb, per_sm * sms));
  void* args[] = {&X, &n, &d, &k, &seed, &q, &chosen, &C};
  return cudaLaunchCooperativeKernel(kernel, grid, kThreads, args, smem, stream);
}
// kmeans++ over the n rows of X (its picks' indices into chosen, their rows into C), lanes per row by the dimensions
template <class T>
cudaError_t plusplus(const T* X, int n, int d, int k, uint64_t seed, const PlusPlus& q, long long* chosen, T* C, cudaStream_t stream) {
  return d >= 32 ? plusplus_passes<T, 32>(X, n, d, k, seed, q, chosen, C, stream)
       : d >= 16 ? plusplus_passes<T, 16>(X, n, d, k, seed, q, chosen, C, stream)
       : d >= 8  ? plusplus_passes<T, 8>(X, n, d, k, seed, q, chosen, C, stream)
                 : plusplus_passes<T, 4>(X, n, d, k, seed, q, chosen, C, stream);
}
// random's order: the (key, index) pairs sorted by key into keys_out / vals_out
template <class T>
cudaError_t random_order(int n, uint64_t seed, const Scratch& s, cudaStream_t stream) {
  key_kernel<T><<<min((n + 255) / 256, 4096), 256, 0, stream>>>(n, seed, s.keys, s.vals);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t bytes = s.temp_bytes;
  return cub::DeviceRadixSort::SortPairs(s.temp, bytes, s.keys, s.keys_out, s.vals, s.vals_out, n, 0, 64, stream);
}

// The initial centroids into C (k x d) by `method` (ftgen_kmeans_init), the scratch at `base`; a protected variant
// (counters: where its second copy's differences go) checks the copies
template <class T>
cudaError_t run(int method, const T* X, int n, int d, int k, uint64_t seed, unsigned char* base, T* C, bool checked, ftgen::FtCounters* counters,
                cudaStream_t stream) {
  Scratch s;
  carve(n, d, k, sizeof(T), base, &s);
  const int m = static_cast<int>(ftkm_sample_size(n, k));
  cudaError_t err = cudaSuccess;
  if (method == FTGEN_KMEANS_INIT_RANDOM) {
    if ((err = random_order<T>(n, seed, s, stream)) != cudaSuccess) return err;
    gather_kernel<T><<<min((k + 7) / 8, 4096), 256, 0, stream>>>(X, d, k, s.vals_out, s.chosen, C);
    err = cudaGetLastError();
  } else if (method == FTGEN_KMEANS_INIT_PLUSPLUS || (method == FTGEN_KMEANS_INIT_PLUSPLUS_SAMPLE && m == n)) {
    err = plusplus<T>(X, n, d, k, seed, s.pp, s.chosen, C, stream);
  } else if (method == FTGEN_KMEANS_INIT_PLUSPLUS_SAMPLE) {
    T* Y = reinterpret_cast<T*>(s.Y);
    if ((err = random_order<T>(n, seed, s, stream)) != cudaSuccess) return err;
    gather_kernel<T><<<min((m + 7) / 8, 4096), 256, 0, stream>>>(X, d, m, s.vals_out, nullptr, Y);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if ((err = plusplus<T>(Y, m, d, k, seed, s.sample_pp, s.chosen, C, stream)) != cudaSuccess) return err;
    sample_rows_kernel<<<min((k + 255) / 256, 4096), 256, 0, stream>>>(k, s.vals_out, s.chosen);
    err = cudaGetLastError();
  } else {
    return cudaErrorInvalidValue;
  }
  if (err != cudaSuccess || !checked) return err;
  verify_kernel<T><<<min((k + 7) / 8, 4096), 256, 0, stream>>>(X, n, d, k, s.chosen, C, counters);
  return cudaGetLastError();
}

}  // namespace ftkm_init
