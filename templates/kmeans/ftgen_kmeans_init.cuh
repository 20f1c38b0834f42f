// ftgen kmeans: the device side of the initial centroids (ftgen_kmeans_init.h says what is chosen).
//
// random    a key per sample (ftkm_key), CUB's radix sort of (key, index) pairs, the first `clusters` indices'
//           rows copied into C.
// kmeans++  per centroid t one pass over X (pass_kernel: each sample's squared distance to centroid t in fp64, its D^2
//           the minimum over the chosen ones, a partial sum per block of rows_per_block samples, every sum in a fixed
//           order); the pass's last block to finish (a counter) finds the next centroid from the partials and the D^2
//           of one block and copies its row into C: clusters launches, each pass reading X once (O(samples dims
//           clusters) in all, as every kmeans++).
// kmeans++ over a sample
//           random's sort, its first m = ftkm_sample_size(samples, clusters) samples' rows gathered into Y, kmeans++'s
//           passes over Y (rows of Y into C), the picks mapped back to their samples of X.
// Either way the centroids are rows of X copied bit for bit; a protected variant copies them again from the chosen
// indices and compares (verify_kernel): a fault in the choice can only choose another sample, a fault in the copy is
// detected and repaired.
// The scratch overlays the start of the launch's workspace (the launch uses it before anything else does).
#pragma once

#include <algorithm>

#include <cub/cub.cuh>

#include "ftgen_ft.cuh"
#include "ftgen_kmeans.h"
#include "ftgen_kmeans_init.h"

namespace ftkm_init {

// samples per block of a kmeans++ pass over n rows (one partial sum each): 256, fewer where n is small, so that about
// a thousand blocks keep loads in flight (a sample of 65536 rows: 1024 blocks of 64)
__host__ __device__ inline int rows_per_block(int n) { return n >= (1 << 18) ? 256 : n >= (1 << 16) ? 64 : 32; }
constexpr int kThreads = 256;   // threads of the pass's blocks

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
  unsigned* done;  // blocks of the current pass that have finished
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
    q.done = reinterpret_cast<unsigned*>(take(sizeof(unsigned)));
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

// One block's share of a pass: D^2 of its samples (block b of rows_per_block(n)) against the centroid row c, and their
// partial sum into part[b]. G lanes per sample (along the dimensions), the samples in order; every sum in a
// fixed order.
template <class T, int G>
__device__ void dist_block(const T* __restrict__ X, int n, int d, const T* c, double* d2, double* part, bool first, int b,
                           double* warp_sum) {
  const int lane = threadIdx.x % 32, g = lane % G, warp = threadIdx.x / 32;
  const int rows = rows_per_block(n), r0 = b * rows, r1 = min(n, r0 + rows);
  constexpr int kPerPass = kThreads / G;  // samples per pass of the block
  // rows of fewer than 32 dimensions: the old D^2 loaded beside the row, not after its sum (10% faster at 8 dimensions;
  // at 32 lanes a row it measured 25% slower at 128)
  constexpr bool kEarly = G < 32;
  double acc = 0.0;                       // (the group leader's samples, in order)
  for (int r = r0 + threadIdx.x / G; r - static_cast<int>(threadIdx.x / G) < r1; r += kPerPass) {
    double s = 0.0, before = 0.0;
    if (r < r1) {
      if (kEarly && !first && g == 0) before = d2[r];
      const T* x = X + static_cast<size_t>(r) * d;
      for (int j = g; j < d; j += G) {
        const double e = static_cast<double>(x[j]) - static_cast<double>(__ldg(c + j));
        s = fma(e, e, s);
      }
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (r < r1 && g == 0) {
      const double v = first ? s : fmin(kEarly ? before : d2[r], s);
      d2[r] = v;
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
}

// The threads' contiguous chunks of v[0, m) over one block of kThreads: each thread's sum, its inclusive and exclusive
// prefix over the block (the exclusive one is exactly the previous thread's inclusive one, which the pick's walk relies
// on and CUB's BlockScan does not promise) and the total; every sum in a fixed order. wsum: kThreads / 32 doubles of
// shared memory.
__device__ inline void block_chunk_scan(const double* v, int m, int& lo, int& hi, double& sum, double& incl, double& excl,
                                        double& total, double* wsum) {
  const int per = (m + kThreads - 1) / kThreads, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  lo = min(m, static_cast<int>(threadIdx.x) * per), hi = min(m, lo + per);
  sum = 0.0;
  for (int i = lo; i < hi; ++i) sum += v[i];
  double x = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double up = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += up;
  }
  const double before = __shfl_up_sync(0xffffffffu, x, 1);
  __syncthreads();  // (wsum may still be read by the previous scan)
  if (lane == 31) wsum[warp] = x;
  __syncthreads();
  double off = 0.0;
  total = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w == warp) off = total;
    total += wsum[w];
  }
  incl = off + x;
  excl = lane ? off + before : off;
}

// The first thread of the block with `hit`, else the last one with a positive sum (0 if none); sel: 2 ints of shared memory
__device__ inline int block_select(bool hit, double sum, int* sel) {
  __syncthreads();  // (sel may still be read after the previous selection)
  if (threadIdx.x == 0) sel[0] = kThreads, sel[1] = 0;
  __syncthreads();
  if (hit) atomicMin(&sel[0], static_cast<int>(threadIdx.x));
  if (sum > 0.0) atomicMax(&sel[1], static_cast<int>(threadIdx.x));
  __syncthreads();
  return sel[0] < kThreads ? sel[0] : sel[1];
}

// Centroid t, by one block: the first sample whose running sum of D^2 exceeds u_t times the total (ftgen_kmeans_init.h),
// found among the pass's blocks' partials, then within that block among its samples' D^2; its index into chosen[t] and
// *cur, its row into C[t]
template <class T>
__device__ void pick_block(const T* __restrict__ X, int n, int d, const double* d2, const double* part, uint64_t seed, int t,
                           long long* cur, long long* chosen, T* C) {
  __shared__ double wsum[kThreads / 32];
  __shared__ int sel[2];
  __shared__ long long s_pick;
  __shared__ double s_base;
  __shared__ int s_block;
  const int nb = blocks_of(n);
  int lo, hi;
  double sum, incl, excl, total;
  block_chunk_scan(part, nb, lo, hi, sum, incl, excl, total, wsum);
  const double u = ftkm_uniform(seed, static_cast<uint64_t>(t));
  if (total > 0.0) {
    const double target = u * total;
    // the block: the chosen thread's partials in order
    const int L = block_select(incl > target, sum, sel);
    if (threadIdx.x == L) {
      double run = excl;
      int b = -1, last = -1;
      for (int i = lo; i < hi; ++i) {
        if (part[i] > 0.0) last = i;
        if (run + part[i] > target) {
          b = i;
          break;
        }
        run += part[i];
      }
      if (b < 0) b = last, run -= last >= 0 ? part[last] : 0.0;
      s_block = b, s_base = run;
    }
    __syncthreads();
    const int b = s_block;
    const double base = s_base;
    // the sample: that block's D^2 (one per thread where rows_per_block <= kThreads)
    const int r0 = b * rows_per_block(n), rows = min(n, r0 + rows_per_block(n)) - r0;
    block_chunk_scan(d2 + r0, rows, lo, hi, sum, incl, excl, total, wsum);
    const int L2 = block_select(base + incl > target, sum, sel);
    if (threadIdx.x == L2) {
      double run = base + excl;
      long long i_pick = -1;
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
      s_pick = i_pick;
    }
  } else if (threadIdx.x == 0) {
    s_pick = ftkm_uniform_index(seed, static_cast<uint64_t>(t), n);
  }
  __syncthreads();
  const long long pick = s_pick;
  if (threadIdx.x == 0) *cur = pick, chosen[t] = pick;
  for (int j = threadIdx.x; j < d; j += blockDim.x) C[static_cast<size_t>(t) * d + j] = X[static_cast<size_t>(pick) * d + j];
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

// kmeans++'s first centroid: the uniform draw 0; the passes' counter zeroed
template <class T>
__global__ void first_kernel(const T* __restrict__ X, int n, int d, uint64_t seed, PlusPlus q, long long* chosen, T* C) {
  const long long i = ftkm_uniform_index(seed, 0, n);
  if (threadIdx.x == 0) *q.cur = i, chosen[0] = i, *q.done = 0;
  for (int j = threadIdx.x; j < d; j += blockDim.x) C[j] = X[static_cast<size_t>(i) * d + j];
}

// Pass t of kmeans++: a block per rows_per_block(n) samples (dist_block against centroid t, row *q.cur of X); the last
// block to finish (a counter) picks centroid t + 1 (pick_block) and zeroes the counter for the next pass
template <class T, int G>
__global__ void __launch_bounds__(kThreads) pass_kernel(const T* __restrict__ X, int n, int d, int k, int t, uint64_t seed, PlusPlus q,
                                                        long long* chosen, T* C) {
  __shared__ double warp_sum[kThreads / 32];
  const T* c = X + static_cast<size_t>(*q.cur) * d;
  dist_block<T, G>(X, n, d, c, q.d2, q.part, t == 0, blockIdx.x, warp_sum);
  if (t + 1 == k) return;
  if (ftgen::last_block(q.done)) pick_block<T>(X, n, d, q.d2, q.part, seed, t + 1, q.cur, chosen, C);
}

template <class T, int G>
cudaError_t plusplus_passes(const T* X, int n, int d, int k, uint64_t seed, const PlusPlus& q, long long* chosen, T* C, cudaStream_t stream) {
  first_kernel<T><<<1, 128, 0, stream>>>(X, n, d, seed, q, chosen, C);
  for (int t = 0; t < k; ++t) pass_kernel<T, G><<<blocks_of(n), kThreads, 0, stream>>>(X, n, d, k, t, seed, q, chosen, C);
  return cudaGetLastError();
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
