// ftgen kmeans: tf32 near ties refined (the refine option of the cutlass90 and fused backends; the model
// model.refine_assign). The assign step keeps each row's two nearest computed distances; a row whose two are closer than
// the sum of their error bounds (a near tie: near_gap) takes the nearer of the two by exact distances, fp64 from X and the
// centroids, each distance twice when protected (refine_kernel: after cutlass90's finishing kernel, or after the fused
// pass, which moves a relabelled sample between the cluster sums). The inertia then comes from the update's exact sums
// (refine_inertia_kernel), not from the rounded distances.
// Copied verbatim into every generated project. Do not edit the copies.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "ftgen_ft.cuh"

namespace ftkm_refine {

namespace {  // (internal linkage: a variant and its unprotected twin both include this header)

// The refine step's inputs (X as the assign reads it, the centroids, the near-tie bound's factors)
struct Refine {
  const float* X = nullptr;
  long long ldx = 0;
  const float* C = nullptr;  // clusters x dims, row-major
  int dims = 0, clusters = 0;
  const float* cc = nullptr;  // ||c_j||^2 (the bound's scale)
  // the bound on one computed distance (model.refine_band, model.fused_refine_band): band_xc ||x|| ||c|| + band_cc ||c||^2
  // + band_xx ||x||^2
  double band_xc = 0, band_cc = 0, band_xx = 0;
  int* cand = nullptr;        // samples: a near tie's second candidate, else -1 (finish_kernel -> refine_kernel)
  // or, where set, the near ties alone as (sample, second candidate), *near_count of them (the fused pass appends them)
  int2* near = nullptr;
  int* near_count = nullptr;
  bool dmr = false;           // protected: each exact distance twice (by fused multiply-adds, and by a multiply and an add)
  ftgen::FtCounters* counters = nullptr;
  // inject builds, site refine: the planned faults (block = the sample) of the first copy of the distance to the nearest,
  // in the first iteration
  const int* iter = nullptr;
  const ftgen::FaultSpec* faults = nullptr;
  ftgen::FaultRecord* records = nullptr;
  int fault_count = 0;
  int no_correct = 0;  // the campaigns' uncorrected run: a mismatch is counted, the first copy decides
};

// A near tie (model.refine_flags): the two nearest computed distances d1 <= d2 closer than the sum of their error bounds;
// x = ||x||^2, c1 and c2 the two centroids' squared norms. NaN: not a near tie.
__host__ __device__ inline bool near_gap(double d1, double d2, double x, double c1, double c2, Refine const& rf) {
  return d2 - d1 <= rf.band_xc * (sqrt(x * c1) + sqrt(x * c2)) + rf.band_cc * (c1 + c2) + 2.0 * rf.band_xx * x;
}

// The two copies of a distance agree (model.refine_agree): within 2 (dims + 2) u64 of the larger; NaN never agrees
__device__ inline bool refine_agree(double a, double b, int dims) { return fabs(a - b) <= 2.0 * (dims + 2) * 0x1.0p-53 * fmax(a, b); }

// Component z of a float4 (z a constant after unrolling), or the float itself
__device__ inline float part(float v, int) { return v; }
__device__ inline float part(float4 v, int z) { return z == 0 ? v.x : z == 1 ? v.y : z == 2 ? v.z : v.w; }

// One lane's part of ||x - c1||^2 and ||x - c2||^2 in fp64 from the fp32 values, elements lane, lane + G, ... of n (VEC
// floats each: float4 when the rows are 16-byte aligned): e by fused multiply-adds, f (the DMR copy, dmr) by a multiply
// and an addition, both from the same loaded values
template <int VEC>
__device__ inline void refine_part(const float* x, const float* c1, const float* c2, int n, int lane, int G, bool dmr, double (&e)[2],
                                   double (&f)[2]) {
  using V = std::conditional_t<VEC == 4, float4, float>;
  const V* xv = reinterpret_cast<const V*>(x);
  const V* av = reinterpret_cast<const V*>(c1);
  const V* bv = reinterpret_cast<const V*>(c2);
#pragma unroll (VEC == 4 ? 4 : 1)  // (floats: not unrolled; unrolled, ptxas spilled 12 bytes)
  for (int q = lane; q < n; q += G) {
    const V xq = xv[q], aq = av[q], bq = bv[q];
#pragma unroll
    for (int z = 0; z < VEC; ++z) {  // (the components by value: an address of xq would put it in local memory)
      const double v = part(xq, z), t1 = v - part(aq, z), t2 = v - part(bq, z);
      e[0] = fma(t1, t1, e[0]);
      e[1] = fma(t2, t2, e[1]);
      if (dmr) {
        f[0] = __dadd_rn(f[0], __dmul_rn(t1, t1));
        f[1] = __dadd_rn(f[1], __dmul_rn(t2, t2));
      }
    }
  }
}

// The near ties relabelled (model.refine_assign): groups of G lanes (a power of two, 1 to 32) take a row each, the lanes
// along the row (VEC = 4: float4 loads of x and of the two centroids; 1: floats), ||x - c1||^2 and ||x - c2||^2 in fp64;
// the label becomes the nearer (the lower index on a tie). Protected, each distance twice from the same loaded values
// (refine_part), the lanes' parts reduced in two orders; a mismatch computes both again, a second one keeps the GEMM's
// label (uncorrectable). Rows without a candidate (-1) are skipped; with rf.near only the listed rows are visited.
// Nothing once converged. A row whose label changes calls move(i, l1, l2, lane, G) in each lane of its group (the fused
// backend moves the sample between its cluster sums, which its pass has already added it to; NoMove: the update runs
// after the relabelling).
struct NoMove {
  __device__ void operator()(long long, int, int, int, int) const {}
};
template <int VEC, class Move = NoMove>
__global__ void __launch_bounds__(256) refine_kernel(int samples, int G, const int* converged, Refine rf, int* labels, Move move = {}) {
  if (*converged) return;
  const int lane = threadIdx.x % G, groups = gridDim.x * (blockDim.x / G), n = rf.dims / VEC;
  const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1) << (threadIdx.x % 32 / G * G);
  const long long rows = rf.near ? min(*rf.near_count, samples) : samples;  // (the list, or every sample's candidate)
  for (long long u = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / G; u < rows; u += groups) {
    const int2 entry = rf.near ? rf.near[u] : make_int2(0, rf.cand[u]);
    const long long i = rf.near ? entry.x : u;
    const int l2 = entry.y;
    if (l2 < 0) continue;
    const int l1 = labels[i];
    const float* xr = rf.X + i * rf.ldx;
    const float* r1 = rf.C + static_cast<long long>(l1) * rf.dims;
    const float* r2 = rf.C + static_cast<long long>(l2) * rf.dims;
    bool agree = true;
    double e[2], f[2];
    for (int attempt = 0; attempt < 2; ++attempt) {
      e[0] = e[1] = f[0] = f[1] = 0;
      refine_part<VEC>(xr, r1, r2, n, lane, G, rf.dmr, e, f);
      for (int o = G / 2; o > 0; o >>= 1) {
        e[0] += __shfl_xor_sync(mask, e[0], o, G);
        e[1] += __shfl_xor_sync(mask, e[1], o, G);
      }
      if (rf.fault_count > 0 && attempt == 0 && *rf.iter == 0) {  // (every lane holds the sum: each applies the fault)
        for (int f = 0; f < rf.fault_count; ++f) {
          const ftgen::FaultSpec fs = rf.faults[f];
          if (fs.block != i) continue;
          const double before = e[0];
          e[0] = ftgen::apply_fault(e[0], fs.kind, fs.bit, fs.offset);
          if (lane == 0) ftgen::record_fault(rf.records + f, rf.counters, static_cast<int>(i), 0, 0, 0, fs.kind == ftgen::kOffset ? -1 : (fs.bit & 63),
                                             before, e[0], i, l1);
        }
      }
      if (!rf.dmr) break;
      for (int o = 1; o < G; o <<= 1) {
        f[0] = __dadd_rn(f[0], __shfl_xor_sync(mask, f[0], o, G));
        f[1] = __dadd_rn(f[1], __shfl_xor_sync(mask, f[1], o, G));
      }
      if (refine_agree(e[0], f[0], rf.dims) && refine_agree(e[1], f[1], rf.dims)) {
        if (attempt && lane == 0 && rf.counters) atomicAdd(&rf.counters->recomputed, 1ull);
        break;
      }
      if (lane == 0 && rf.counters) atomicAdd(&rf.counters->detected, 1ull);
      if (rf.no_correct) break;
      if (attempt) {  // (twice: the label the GEMM chose stays)
        if (lane == 0 && rf.counters) atomicAdd(&rf.counters->uncorrectable, 1ull);
        agree = false;
      }
    }
    if (agree && (e[1] < e[0] || (e[1] == e[0] && l2 < l1))) {  // (the group's lanes agree: they hold the same sums)
      if (lane == 0) labels[i] = l2;
      move(i, l1, l2, lane, G);
    }
  }
}
// refine_kernel's lanes per row: about 4 float4 (VEC 4) or 4 floats (VEC 1) a lane, a power of two, 1 to 32
inline int refine_lanes(int dims, int vec) {
  const int per_lane = vec == 4 ? 16 : 4;
  int g = 1;
  while (g < 32 && g * per_lane < dims) g *= 2;
  return g;
}

// The block's fp64 sum of v, to every thread (blockDim.x a multiple of 32, at most 1024)
__device__ inline double block_sum(double v) {
  __shared__ double warps[32];
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) v += warps[w];
  return v;
}

// The samples' squared norms (fp32, as the assign computed them) summed in fp64, once per launch (X does not change),
// added into *out (zeroed before; one atomic per block)
__global__ void sum_norms_kernel(const float* xx, int samples, double* out) {
  double s = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < samples; i += static_cast<long long>(gridDim.x) * blockDim.x)
    s += xx[i];
  s = block_sum(s);
  if (threadIdx.x == 0 && s != 0) atomicAdd(out, s);
}

// The iteration's inertia, sum_i ||x_i - c_(l_i)||^2 = sum_i ||x_i||^2 + sum_j (n_j ||c_j||^2 - 2 c_j . S_j), in
// fp64 from the update's (verified) sums S_j and counts n_j and the centroids the assign used (before finalize moves
// them). The rounded distances of the rows no near tie refined would keep TF32's rounding of ||x||^2 + ||c||^2 in it
// (the model: 2e-4 of the exact value on Gaussian blobs; this way 4e-10). One block; nothing once converged.
__global__ void refine_inertia_kernel(const float* C, const double* sums, const int* counts, int clusters, int dims, const double* xx_sum,
                                      double* inertia, const int* converged) {
  if (*converged) return;
  double s = 0;
  for (long long e = threadIdx.x; e < static_cast<long long>(clusters) * dims; e += blockDim.x) {
    const double c = C[e];
    s += c * (counts[e / dims] * c - 2.0 * sums[e]);
  }
  s = block_sum(s);
  if (threadIdx.x == 0) *inertia = fmax(*xx_sum + s, 0.0);
}

}  // namespace

}  // namespace ftkm_refine
