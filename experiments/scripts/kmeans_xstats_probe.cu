// X's statistics pass of the protected kmeans iteration (x_stats_kernel: the rows' squared norms twice, DMR, and the
// column sums of x and |x| in fp64), and the unprotected norms pass, against other forms of the same pass: where the
// time goes at 2^20 samples. Every form is checked against fp64 sums on the host (norms of sampled rows, the column
// sums); each is timed alternately with the others (CUDA events, median of REPS after warm-up).
//   nvcc -std=c++17 -O3 -arch=sm_90a experiments/scripts/kmeans_xstats_probe.cu -o /tmp/xs && /tmp/xs 1048576x128 1048576x8
// One JSON line per (shape, form) on stdout, a table on stderr.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr double kBand = 2.0 * 7.0 * 5.960464477539063e-08;

__device__ __forceinline__ unsigned segment_mask(int lanes) {
  return lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (threadIdx.x & 31 & ~(lanes - 1));
}
__device__ __forceinline__ float verdict(float s, float s2, int dims, unsigned* bad) {
  const double tol = kBand * sqrt(double(dims)) * fmax(fabs(double(s)), fabs(double(s2)));
  if (!(fabs(double(s) - double(s2)) <= tol)) atomicAdd(bad, 1u);
  return s;
}

// ---- the product's form (templates/kmeans/kmeans_variant.cu.j2, x_stats_kernel, without injection) ----------------
constexpr int XS_R = 8, XS_U = 4;
template <int R>
__global__ void __launch_bounds__(256) xs_scalar(const float* __restrict__ X, int rows, int dims, int lanes, float* out, double* colstat,
                                                 unsigned* bad) {
  __shared__ double red[2][32 * XS_R];
  for (int i = threadIdx.x; i < 32 * XS_R; i += blockDim.x) red[0][i] = red[1][i] = 0.0;
  __syncthreads();
  const int lane = threadIdx.x % lanes, segs = blockDim.x / lanes;
  const unsigned seg = segment_mask(lanes);
  const int stride = gridDim.x * segs;
  double cs[R], ca[R];
#pragma unroll
  for (int q = 0; q < R; ++q) cs[q] = ca[q] = 0.0;
  for (int row0 = blockIdx.x * segs + static_cast<int>(threadIdx.x) / lanes; row0 < rows; row0 += XS_U * stride) {
    float v[XS_U][R];
#pragma unroll
    for (int u = 0; u < XS_U; ++u)
#pragma unroll
      for (int q = 0; q < R; ++q) {
        const int row = row0 + u * stride, d = lane + lanes * q;
        v[u][q] = row < rows && d < dims ? __ldg(X + static_cast<size_t>(row) * dims + d) : 0.f;
      }
#pragma unroll
    for (int u = 0; u < XS_U; ++u) {
      const int row = row0 + u * stride;
      if (row >= rows) continue;
      float s = 0, s2 = 0;
#pragma unroll
      for (int q = 0; q < R; ++q) {
        s = __fadd_rn(s, __fmul_rn(v[u][q], v[u][q]));
        s2 = fmaf(v[u][R - 1 - q], v[u][R - 1 - q], s2);
        cs[q] += static_cast<double>(v[u][q]);
        ca[q] += fabs(static_cast<double>(v[u][q]));
      }
      for (int o = lanes / 2; o; o >>= 1) s += __shfl_xor_sync(seg, s, o, lanes);
      for (int o = 1; o < lanes; o <<= 1) s2 += __shfl_xor_sync(seg, s2, o, lanes);
      if (lane == 0) out[row] = verdict(s, s2, dims, bad);
    }
  }
#pragma unroll
  for (int q = 0; q < R; ++q) {
    const int d = lane + lanes * q;
    if (d < dims && (cs[q] != 0.0 || ca[q] != 0.0)) {
      atomicAdd(&red[0][d], cs[q]);
      atomicAdd(&red[1][d], ca[q]);
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < dims; d += blockDim.x) {
    atomicAdd(&colstat[d], red[0][d]);
    atomicAdd(&colstat[dims + d], red[1][d]);
  }
}

// ---- 16-byte loads: a lane takes 4 consecutive dimensions (dims % 4 == 0, X 16-byte aligned), L lanes a row (the
// power of two covering dims / 4, at most 32), R4 float4 per lane; U rows per segment in flight. kCols: the column
// sums too (fp64 in the lanes, then shared memory and one global atomic per dimension and block).
template <int R4, int U, bool kCols>
__global__ void __launch_bounds__(256) xs_vec(const float* __restrict__ X, int rows, int dims, int lanes, float* out, double* colstat,
                                              unsigned* bad) {
  __shared__ double red[2][32 * 4 * R4];
  if (kCols) {
    for (int i = threadIdx.x; i < 32 * 4 * R4; i += blockDim.x) red[0][i] = red[1][i] = 0.0;
    __syncthreads();
  }
  const int lane = threadIdx.x % lanes, segs = blockDim.x / lanes, d4 = dims / 4;
  const unsigned seg = segment_mask(lanes);
  const int stride = gridDim.x * segs;
  double cs[4 * R4], ca[4 * R4];
#pragma unroll
  for (int q = 0; q < 4 * R4; ++q) cs[q] = ca[q] = 0.0;
  const float4* X4 = reinterpret_cast<const float4*>(X);
  for (int row0 = blockIdx.x * segs + static_cast<int>(threadIdx.x) / lanes; row0 < rows; row0 += U * stride) {
    float4 v[U][R4];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int q = 0; q < R4; ++q) {
        const int row = row0 + u * stride, d = lane + lanes * q;
        v[u][q] = row < rows && d < d4 ? __ldg(X4 + static_cast<size_t>(row) * d4 + d) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int row = row0 + u * stride;
      if (row >= rows) continue;
      float s = 0, s2 = 0;
#pragma unroll
      for (int q = 0; q < R4; ++q) {
        const float e[4] = {v[u][q].x, v[u][q].y, v[u][q].z, v[u][q].w};
        const float4 b = v[u][R4 - 1 - q];
        const float f[4] = {b.w, b.z, b.y, b.x};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          s = __fadd_rn(s, __fmul_rn(e[t], e[t]));
          s2 = fmaf(f[t], f[t], s2);
          if (kCols) {
            cs[4 * q + t] += static_cast<double>(e[t]);
            ca[4 * q + t] += fabs(static_cast<double>(e[t]));
          }
        }
      }
      for (int o = lanes / 2; o; o >>= 1) s += __shfl_xor_sync(seg, s, o, lanes);
      for (int o = 1; o < lanes; o <<= 1) s2 += __shfl_xor_sync(seg, s2, o, lanes);
      if (lane == 0) out[row] = verdict(s, s2, dims, bad);
    }
  }
  if (kCols) {
#pragma unroll
    for (int q = 0; q < R4; ++q)
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int d = 4 * (lane + lanes * q) + t;
        if (d < dims && (cs[4 * q + t] != 0.0 || ca[4 * q + t] != 0.0)) {
          atomicAdd(&red[0][d], cs[4 * q + t]);
          atomicAdd(&red[1][d], ca[4 * q + t]);
        }
      }
    __syncthreads();
    for (int d = threadIdx.x; d < dims; d += blockDim.x) {
      atomicAdd(&colstat[d], red[0][d]);
      atomicAdd(&colstat[dims + d], red[1][d]);
    }
  }
}

// ---- V float4 per lane and row (lanes L: the power of two covering dims / 4V), U rows per segment in flight; the
// column sums reduced over the warp's segments by shuffles, then over the warps in shared memory (no atomics but one
// global atomic per dimension and block). kDmr: the norm twice (product, reduced in two orders) and the column sums;
// else the norm once (the twin's pass). kCol (with kDmr): 0 the column sums of x in fp64 (a conversion and a double
// addition per element, the product's form), 1 none (the norms' two copies alone), 2 in fp32 pairs (hi, lo) by Knuth's
// TwoSum (six fp32 additions per element, exact but for lo's own rounding), converted to fp64 once per lane. kFull: the
// rows' loop uniform over the warp (it runs while the warp's first segment has a row; the others load zeros and store
// nothing), so that the norms' shuffles take the full mask instead of the segment's.
template <int V, int U, bool kDmr, int kCol = 0, bool kFull = false>
__global__ void __launch_bounds__(256) xs_v2(const float* __restrict__ X, int rows, int dims, int lanes, float* out, double* colstat,
                                             unsigned* bad) {
  __shared__ double red[8][2][256];  // (dims <= 256 here)
  const int lane = threadIdx.x % lanes, segs = blockDim.x / lanes, d4 = dims / 4;
  const unsigned seg = kFull ? 0xffffffffu : segment_mask(lanes);
  const int stride = gridDim.x * segs;
  const int first = blockIdx.x * segs + static_cast<int>(threadIdx.x) / lanes;
  const int test = kFull ? blockIdx.x * segs + static_cast<int>(threadIdx.x & ~31u) / lanes : first;
  double cs[4 * V];
  float ca[4 * V];  // (as the product: |x| summed in fp32 per lane, it only scales the invariant's band)
  float hi[4 * V], lo[4 * V];
#pragma unroll
  for (int q = 0; q < 4 * V; ++q) cs[q] = 0.0, ca[q] = 0.f, hi[q] = lo[q] = 0.f;
  const float4* X4 = reinterpret_cast<const float4*>(X);
  for (int k0 = 0; test + k0 < rows; k0 += U * stride) {
    const int row0 = first + k0;
    float4 v[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int q = 0; q < V; ++q) {
        const int row = row0 + u * stride, d = lane * V + q;  // (a lane's V float4 consecutive: one 16V-byte run)
        v[u][q] = row < rows && d < d4 ? __ldg(X4 + static_cast<size_t>(row) * d4 + d) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int row = row0 + u * stride;
      float s = 0, s2 = 0;
#pragma unroll
      for (int q = 0; q < V; ++q) {
        const float e[4] = {v[u][q].x, v[u][q].y, v[u][q].z, v[u][q].w};
        const float4 b = v[u][V - 1 - q];
        const float f[4] = {b.w, b.z, b.y, b.x};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          if (kDmr) {
            s = __fadd_rn(s, __fmul_rn(e[t], e[t]));
            s2 = fmaf(f[t], f[t], s2);
            if (kCol == 0) {
              const double x = e[t];
              cs[4 * q + t] += x;
              ca[4 * q + t] += fabsf(e[t]);
            } else if (kCol == 2) {
              const float a = hi[4 * q + t], sum = __fadd_rn(a, e[t]), bb = __fsub_rn(sum, a);
              lo[4 * q + t] += __fadd_rn(__fsub_rn(a, __fsub_rn(sum, bb)), __fsub_rn(e[t], bb));
              hi[4 * q + t] = sum;
              ca[4 * q + t] += fabsf(e[t]);
            }
          } else {
            s = fmaf(e[t], e[t], s);
          }
        }
      }
      for (int o = lanes / 2; o; o >>= 1) s += __shfl_xor_sync(seg, s, o, lanes);
      if (kDmr) {
        for (int o = 1; o < lanes; o <<= 1) s2 += __shfl_xor_sync(seg, s2, o, lanes);
        if (lane == 0 && row < rows) out[row] = verdict(s, s2, dims, bad);
      } else if (lane == 0 && row < rows) {
        out[row] = s;
      }
    }
  }
  if (kDmr && kCol == 2)
#pragma unroll
    for (int q = 0; q < 4 * V; ++q) cs[q] = static_cast<double>(hi[q]) + static_cast<double>(lo[q]);
  if (kDmr && kCol != 1) {
    // the warp's segments: lanes l, l + lanes, ... hold the same columns
#pragma unroll
    for (int q = 0; q < 4 * V; ++q)
      for (int o = lanes; o < 32; o <<= 1) {
        cs[q] += __shfl_xor_sync(0xffffffffu, cs[q], o);
        ca[q] += __shfl_xor_sync(0xffffffffu, ca[q], o);
      }
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 < lanes)
#pragma unroll
      for (int q = 0; q < 4 * V; ++q) red[warp][0][lane * 4 * V + q] = cs[q], red[warp][1][lane * 4 * V + q] = ca[q];
    __syncthreads();
    for (int d = threadIdx.x; d < dims; d += blockDim.x) {
      double a = 0, b = 0;
      for (int w = 0; w < 8; ++w) a += red[w][0][d], b += red[w][1][d];
      atomicAdd(&colstat[d], a);
      atomicAdd(&colstat[dims + d], b);
    }
  }
}

// ---- the unprotected norms pass (norms_kernel, one copy) ----------------------------------------------------------
__global__ void norms_plain(const float* __restrict__ A, int rows, int dims, int lanes, float* out) {
  const int lane = threadIdx.x % lanes;
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / lanes;
  if (row >= rows) return;
  const unsigned seg = segment_mask(lanes);
  const float* a = A + static_cast<size_t>(row) * dims;
  float s = 0;
  for (int d = lane; d < dims; d += lanes) s += a[d] * a[d];
  for (int o = lanes / 2; o; o >>= 1) s += __shfl_xor_sync(seg, s, o, lanes);
  if (lane == 0) out[row] = s;
}

// ---- the floor: X read once with 16-byte loads (a sum per block, to keep the loads)
__global__ void __launch_bounds__(256) read_floor(const float4* __restrict__ X, size_t n4, float* sink) {
  float s = 0.f;
  for (size_t i = blockIdx.x * 256ull + threadIdx.x; i < n4; i += 256ull * gridDim.x) {
    const float4 v = __ldg(X + i);
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 12345.f) sink[blockIdx.x] = s;
}

__global__ void fill(float* x, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * 256ull + threadIdx.x; i < n; i += 256ull * gridDim.x) {
    unsigned long long z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = static_cast<float>((z >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
  }
}

static int pow2_covering(int x) {
  int l = 1;
  while (l < x && l < 32) l *= 2;
  return l;
}

int main(int argc, char** argv) {
  const int reps = std::getenv("REPS") ? std::atoi(std::getenv("REPS")) : 20;
  {  // registers a thread and 256-thread blocks resident per SM of the protected V = 2 and V = 4 forms
    auto occ = [](const char* name, auto kernel) {
      cudaFuncAttributes a{};
      int blocks = 0;
      CK(cudaFuncGetAttributes(&a, kernel));
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 256, 0));
      std::fprintf(stderr, "occupancy %-16s %3d registers a thread, %d blocks of 256 an SM\n", name, a.numRegs, blocks);
    };
    occ("xs_v2<2,4,dmr,2>", xs_v2<2, 4, true, 2>);
    occ("xs_v2<4,2,dmr,2>", xs_v2<4, 2, true, 2>);
  }
  for (int a = 1; a < argc; ++a) {
    int n = 0, dims = 0;
    if (std::sscanf(argv[a], "%dx%d", &n, &dims) != 2 || n < 1 || dims < 1 || dims % 4 || dims > 256) {
      std::fprintf(stderr, "shape %s: want NxD with D a multiple of 4 up to 256\n", argv[a]);
      return 2;
    }
    const size_t ne = static_cast<size_t>(n) * dims;
    float *X, *out, *sink;
    double* col;
    unsigned* bad;
    CK(cudaMalloc(&X, ne * 4));
    CK(cudaMalloc(&out, size_t(n) * 4));
    CK(cudaMalloc(&sink, 4096 * 4));
    CK(cudaMalloc(&col, 2 * dims * 8));
    CK(cudaMalloc(&bad, 4));
    fill<<<2048, 256>>>(X, ne, 7);
    CK(cudaGetLastError());
    std::vector<float> hX(ne);
    CK(cudaMemcpy(hX.data(), X, ne * 4, cudaMemcpyDeviceToHost));
    std::vector<double> hcol(2 * dims, 0.0);
    for (size_t i = 0; i < ne; ++i) hcol[i % dims] += hX[i], hcol[dims + i % dims] += std::fabs(double(hX[i]));
    const int nl = pow2_covering(dims), r = (dims + nl - 1) / nl;
    const int nl4 = pow2_covering(dims / 4), r4 = (dims / 4 + nl4 - 1) / nl4;
    double* const colp = col;
    const int grid0 = static_cast<int>(std::min<size_t>((size_t(n) * nl + 256 * XS_U - 1) / (256 * XS_U), 2048));
    struct Form {
      std::string name;
      std::function<void()> run;
      bool cols, norms;
    };
    std::vector<Form> forms;
    forms.push_back({"x_stats (product)", [=] {
                       if (r <= 1) xs_scalar<1><<<grid0, 256>>>(X, n, dims, nl, out, col, bad);
                       else if (r <= 4) xs_scalar<4><<<grid0, 256>>>(X, n, dims, nl, out, col, bad);
                       else xs_scalar<8><<<grid0, 256>>>(X, n, dims, nl, out, col, bad);
                     }, true, true});
    auto vec = [&](const char* name, int U, bool cols, int gmax) {
      forms.push_back({name, [=] {
                         const int g = static_cast<int>(std::min<size_t>((size_t(n) * nl4 + 256 * U - 1) / (256 * U), size_t(gmax)));
                         if (U == 4 && cols) {
                           if (r4 <= 1) xs_vec<1, 4, true><<<g, 256>>>(X, n, dims, nl4, out, col, bad);
                           else xs_vec<2, 4, true><<<g, 256>>>(X, n, dims, nl4, out, col, bad);
                         } else if (U == 8 && cols) {
                           if (r4 <= 1) xs_vec<1, 8, true><<<g, 256>>>(X, n, dims, nl4, out, col, bad);
                           else xs_vec<2, 8, true><<<g, 256>>>(X, n, dims, nl4, out, col, bad);
                         } else {
                           if (r4 <= 1) xs_vec<1, 4, false><<<g, 256>>>(X, n, dims, nl4, out, col, bad);
                           else xs_vec<2, 4, false><<<g, 256>>>(X, n, dims, nl4, out, col, bad);
                         }
                       }, cols, true});
    };
    vec("vec4 U4", 4, true, 2048);
    vec("vec4 U8", 8, true, 2048);
    vec("vec4 U4 grid 1056", 4, true, 1056);
    vec("vec4 U4 no colstats", 4, false, 2048);
    // xs_v2: V float4 per lane: V = 4 where dims >= 64, 2 where dims >= 8, else 1; lanes cover dims / 4V
    const int V0 = dims >= 64 ? 4 : dims >= 8 ? 2 : 1;
    auto v2 = [&](const char* name, int U, int gmax, bool dmr, int V = 0) {
      V = V ? V : V0;
      const int lv = pow2_covering((dims / 4 + V - 1) / V);
      forms.push_back({name, [=] {
                         const int g = static_cast<int>(std::min<size_t>((size_t(n) * lv + 256 * U - 1) / (256 * U), size_t(gmax)));
#define XS2(VV, UU) xs_v2<VV, UU, true><<<g, 256>>>(X, n, dims, lv, out, col, bad)
#define NS2(VV, UU) xs_v2<VV, UU, false><<<g, 256>>>(X, n, dims, lv, out, col, bad)
                         if (dmr) {
                           if (U == 2) { if (V == 4) XS2(4, 2); else if (V == 2) XS2(2, 2); else XS2(1, 2); }
                           else if (U == 8) { if (V == 4) XS2(4, 8); else if (V == 2) XS2(2, 8); else XS2(1, 8); }
                           else { if (V == 4) XS2(4, 4); else if (V == 2) XS2(2, 4); else XS2(1, 4); }
                         } else {
                           if (U == 2) { if (V == 4) NS2(4, 2); else if (V == 2) NS2(2, 2); else NS2(1, 2); }
                           else { if (V == 4) NS2(4, 4); else if (V == 2) NS2(2, 4); else NS2(1, 4); }
                         }
#undef XS2
#undef NS2
                       }, dmr, true});
    };
    // the product's X pass (x_pass_vec_kernel: V float4 a lane, U 2 where V is 4 else 4, four blocks per SM) against
    // the same without column sums and with them in fp32 pairs
    const int Up = V0 == 4 ? 2 : 4;
    auto v2col = [&](const char* name, int mode) {
      const int lv = pow2_covering((dims / 4 + V0 - 1) / V0);
      forms.push_back({name, [=] {
                         const int g = static_cast<int>(std::min<size_t>((size_t(n) * lv + 256 * Up - 1) / (256 * Up), 528));
#define XC(VV, UU) (mode == 1 ? (void)xs_v2<VV, UU, true, 1><<<g, 256>>>(X, n, dims, lv, out, col_, bad) : (void)xs_v2<VV, UU, true, 2><<<g, 256>>>(X, n, dims, lv, out, col_, bad))
                         double* col_ = colp;
                         if (V0 == 4) XC(4, 2); else if (V0 == 2) XC(2, 4); else XC(1, 4);
#undef XC
                       }, mode == 2, true});
    };
    v2("product: U* g528", Up, 528, true);
    v2("product: U* g396", Up, 396, true);  // (three blocks per SM: the V = 2 form's registers allow three)
    {
      const int lv = pow2_covering((dims / 4 + V0 - 1) / V0);
      forms.push_back({"product, full-mask shuffles", [=] {
                         const int g = static_cast<int>(std::min<size_t>((size_t(n) * lv + 256 * Up - 1) / (256 * Up), 396));
                         if (V0 == 4) xs_v2<4, 2, true, 0, true><<<g, 256>>>(X, n, dims, lv, out, colp, bad);
                         else if (V0 == 2) xs_v2<2, 4, true, 0, true><<<g, 256>>>(X, n, dims, lv, out, colp, bad);
                         else xs_v2<1, 4, true, 0, true><<<g, 256>>>(X, n, dims, lv, out, colp, bad);
                       }, true, true});
    }
    v2col("product without col sums", 1);
    v2col("product, col sums TwoSum", 2);
    v2("v2 U2 g132", 2, 132, true);
    v2("v2 U4 g132", 4, 132, true);
    v2("v2 U4 g264", 4, 264, true);
    v2("v2 U8 g264", 8, 264, true);
    v2("v2 U8 g132", 8, 132, true);
    v2("v2 U2 g264", 2, 264, true);
    v2("v2 U2 g528", 2, 528, true);
    v2("v2 U4 g528", 4, 528, true);
    v2("v2 U2 g1056", 2, 1056, true);
    v2("v2 U4 g2048", 4, 2048, true);
    v2("v2 V2 U2 g1056", 2, 1056, true, 2);
    v2("v2 V1 U4 g1056", 4, 1056, true, 1);
    v2("v2 norms U2 g1056", 2, 1056, false);
    v2("v2 norms U4 g2048", 4, 2048, false);
    forms.push_back({"norms (twin)", [=] { norms_plain<<<static_cast<int>((size_t(n) * nl + 255) / 256), 256>>>(X, n, dims, nl, out); }, false, true});
    forms.push_back({"read floor", [=] { read_floor<<<2048, 256>>>(reinterpret_cast<const float4*>(X), ne / 4, sink); }, false, false});
    // correctness of each form
    std::vector<float> hout(n);
    for (auto& f : forms) {
      CK(cudaMemset(col, 0, 2 * dims * 8));
      CK(cudaMemset(bad, 0, 4));
      CK(cudaMemset(out, 0xff, size_t(n) * 4));
      f.run();
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      bool ok = true;
      if (f.norms) {
        CK(cudaMemcpy(hout.data(), out, size_t(n) * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i += std::max(1, n / 4096)) {
          double s = 0;
          for (int d = 0; d < dims; ++d) s += double(hX[size_t(i) * dims + d]) * hX[size_t(i) * dims + d];
          if (!(std::fabs(hout[i] - s) <= 1e-5 * s + 1e-30)) ok = false;
        }
        unsigned hb = 0;
        CK(cudaMemcpy(&hb, bad, 4, cudaMemcpyDeviceToHost));
        if (hb) ok = false;
      }
      if (f.cols) {
        std::vector<double> c(2 * dims);
        CK(cudaMemcpy(c.data(), col, 2 * dims * 8, cudaMemcpyDeviceToHost));
        // (the sums of |x|: fp32 in the lanes in the v2 forms, as in the product, where they only scale a band)
        for (int d = 0; d < 2 * dims; ++d)
          if (!(std::fabs(c[d] - hcol[d]) <= (d < dims ? 1e-9 : 1e-5) * std::fabs(hcol[dims + d % dims]) + 1e-9)) ok = false;
      }
      if (!ok) {
        std::fprintf(stderr, "%s at %dx%d: WRONG\n", f.name.c_str(), n, dims);
        return 1;
      }
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<std::vector<float>> ms(forms.size());
    for (int it = 0; it < reps + 3; ++it)
      for (size_t f = 0; f < forms.size(); ++f) {
        CK(cudaMemsetAsync(col, 0, 2 * dims * 8));
        CK(cudaEventRecord(e0));
        forms[f].run();
        CK(cudaEventRecord(e1));
        CK(cudaGetLastError());
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 3) ms[f].push_back(t);
      }
    for (size_t f = 0; f < forms.size(); ++f) {
      std::sort(ms[f].begin(), ms[f].end());
      const double med = ms[f][ms[f].size() / 2];
      std::printf("{\"shape\": \"%dx%d\", \"form\": \"%s\", \"us\": %.2f, \"GBps\": %.0f, \"verified\": true}\n", n, dims, forms[f].name.c_str(),
                  med * 1e3, ne * 4.0 / (med * 1e-3) / 1e9);
      std::fprintf(stderr, "%10dx%-4d %-22s %9.1f us %7.0f GB/s\n", n, dims, forms[f].name.c_str(), med * 1e3, ne * 4.0 / (med * 1e-3) / 1e9);
    }
    CK(cudaFree(X));
    CK(cudaFree(out));
    CK(cudaFree(sink));
    CK(cudaFree(col));
    CK(cudaFree(bad));
  }
  return 0;
}
