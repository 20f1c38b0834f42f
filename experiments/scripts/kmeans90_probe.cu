// The kmeans assign step on sm90 (templates/kmeans/kmeans90.cuh): the TF32 wgmma distance GEMM with the arg-min in its
// epilogue, per tile configuration, against cuBLAS's TF32 GEMM of the same shape (which writes the distance matrix and
// takes no arg-min: the GEMM's floor), timed alternately (CUDA events, median of REPS). Labels checked against fp64
// distances of sampled rows: a label may differ from the fp64 nearest only within the TF32 rounding band.
//   nvcc -std=c++17 -O3 -arch=sm_90a -DNDEBUG --expt-relaxed-constexpr -I<cutlass>/include -I<cutlass>/tools/util/include \
//        -Itemplates/kmeans experiments/scripts/kmeans90_probe.cu -lcublas -o probe
//   ./probe 1048576x128x1024 1048576x8x128 ...
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kmeans90.cuh"

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

using namespace cute;

__global__ void fill_kernel(float* p, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    unsigned g = h * 747796405u + 2891336453u;
    g ^= g >> 17;
    const float u1 = (h >> 8) * (1.f / 16777216.f) + 1e-7f, u2 = (g >> 8) * (1.f / 16777216.f);
    p[i] = scale * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
  }
}
// centroids: rows of X plus a small offset (points near their centroids, as in a clustering)
__global__ void centroids_kernel(const float* X, int dims, int clusters, long long stride, float* C) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < static_cast<long long>(clusters) * dims; i += 256ll * gridDim.x) {
    const long long r = i / dims, d = i % dims;
    C[i] = X[r * stride * dims + d] + 0.01f * static_cast<float>((r * 7 + d * 13) % 17 - 8);
  }
}
__global__ void norms_kernel(const float* A, int rows, int dims, float* out) {
  const long long r = blockIdx.x * 256ll + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f;
  for (int d = 0; d < dims; ++d) s = fmaf(A[r * dims + d], A[r * dims + d], s);
  out[r] = s;
}
// fp64 check of sampled rows: the label's distance minus the nearest one, against the row's scale ||x||^2 + ||c||^2
__global__ void check_kernel(const float* X, const float* C, int samples, int dims, int clusters, const int* labels, int step, double* worst,
                             int* differ) {
  const int r = (blockIdx.x * step) % samples;
  __shared__ double bv[256];
  __shared__ int bi[256];
  double best = 1e300;
  int arg = 0;
  for (int j = threadIdx.x; j < clusters; j += blockDim.x) {
    double d = 0;
    for (int k = 0; k < dims; ++k) {
      const double t = static_cast<double>(X[static_cast<long long>(r) * dims + k]) - C[static_cast<long long>(j) * dims + k];
      d += t * t;
    }
    if (d < best) best = d, arg = j;
  }
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = arg;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int t = 1; t < blockDim.x; ++t)
      if (bv[t] < best || (bv[t] == best && bi[t] < arg)) best = bv[t], arg = bi[t];
    const int l = labels[r];
    double dl = 0, xx = 0, cc = 0;
    for (int k = 0; k < dims; ++k) {
      const double x = X[static_cast<long long>(r) * dims + k], c = C[static_cast<long long>(l) * dims + k];
      dl += (x - c) * (x - c);
      xx += x * x;
      cc += c * c;
    }
    if (l != arg) atomicAdd(differ, 1);
    const double gap = (dl - best) / (xx + cc);
    unsigned long long* w = reinterpret_cast<unsigned long long*>(worst);
    unsigned long long old = *w;
    while (gap > __longlong_as_double(old)) {
      const unsigned long long prev = atomicCAS(w, old, __double_as_longlong(gap));
      if (prev == old) break;
      old = prev;
    }
  }
}

// RN to TF32 (10 mantissa bits), as the wgmma reads fp32 words on this GPU
float tf32_host(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&x, &u, 4);
  return x;
}

#define PROBE_STR(x) #x
#define PROBE_NAME(x) PROBE_STR(x)

struct Shape3 {
  int n, d, k;
};

template <class Assign>
struct Runner {
  using Gemm = typename Assign::Gemm;
  Gemm op;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  uint64_t* keys = nullptr;
  float* parts = nullptr;
  const char* name;
  explicit Runner(const char* nm) : name(nm) {}
  bool setup(const float* X, const float* C, const Shape3& s, const float* cc, const cutlass::KernelHardwareInfo& hw) {
    CK(cudaMalloc(&keys, Assign::keys_bytes(s.n, s.k)));
    CK(cudaMalloc(&parts, 3 * Assign::keys_bytes(s.n, s.k) / 2));  // 3 floats per key
    auto args = Assign::arguments(X, s.d, C, s.d, s.n, s.d, s.k, cc, keys, hw, parts);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) {
      std::printf("%s: cannot implement\n", name);
      return false;
    }
    ws_bytes = Gemm::get_workspace_size(args);
    if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
    if (op.initialize(args, ws) != cutlass::Status::kSuccess) {
      std::printf("%s: initialize failed\n", name);
      return false;
    }
    return true;
  }
  void run(const Shape3& s, const float* xx, int* labels, double* inertia) {
    if (op.run() != cutlass::Status::kSuccess) {
      std::printf("%s: run failed\n", name);
      std::exit(1);
    }
    ftgen_km90::finish_kernel<<<528, 256>>>(keys, Assign::rows_padded(s.n), Assign::col_tiles(s.k), s.n, xx, labels, inertia, nullptr);
    CK(cudaGetLastError());
  }
  void release() {
    cudaFree(keys);
    cudaFree(parts);
    if (ws) cudaFree(ws);
  }
};

using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using ECoop = cutlass::epilogue::TmaWarpSpecializedCooperative;
using EPing = cutlass::epilogue::TmaWarpSpecialized;
using A0 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop>;
using A1 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_2, _1, _1>, Coop, ECoop>;
using A2 = ftgen_km90::AssignGemm<Shape<_64, _128, _32>, Shape<_1, _1, _1>, Ping, EPing>;
using A3 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Ping, EPing>;
using A4 = ftgen_km90::AssignGemm<Shape<_256, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop>;
using A5 = ftgen_km90::AssignGemm<Shape<_128, _128, _16>, Shape<_1, _1, _1>, Coop, ECoop>;
using A6 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop, Shape<_128, _64>>;
using A7 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop, Shape<_128, _128>>;
// the floors: without the norms' loads, without the arg-min (their labels are not checked)
using F1 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop, cutlass::epilogue::collective::EpilogueTileAuto, 1>;
using F2 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop, cutlass::epilogue::collective::EpilogueTileAuto, 2>;
// with a checksum test's row sums (a, (j + 1) a, |a| per row and tile): what the threadblock ABFT's epilogue adds
using S1 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, Shape<_1, _1, _1>, Coop, ECoop, cutlass::epilogue::collective::EpilogueTileAuto, 0, true>;
using S2 = ftgen_km90::AssignGemm<Shape<_128, _256, _32>, Shape<_1, _1, _1>, Coop, ECoop, cutlass::epilogue::collective::EpilogueTileAuto, 0, true>;
using A8 = ftgen_km90::AssignGemm<Shape<_128, _256, _32>, Shape<_1, _1, _1>, Coop, ECoop>;

template <class F>
float time_ms(F&& f, cudaEvent_t a, cudaEvent_t b) {
  CK(cudaEventRecord(a));
  f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}
float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Assign>
void probe(const char* name, const Shape3& s, const float* X, const float* C, const float* xx, const float* cc, float* D, cublasHandle_t h,
           const cutlass::KernelHardwareInfo& hw, int reps) {
  Runner<Assign> r(name);
  if (!r.setup(X, C, s, cc, hw)) return;
  int* labels;
  double *inertia, *worst;
  int* differ;
  CK(cudaMalloc(&labels, sizeof(int) * s.n));
  CK(cudaMalloc(&inertia, sizeof(double)));
  CK(cudaMalloc(&worst, sizeof(double)));
  CK(cudaMalloc(&differ, sizeof(int)));
  CK(cudaMemset(inertia, 0, sizeof(double)));
  CK(cudaMemset(worst, 0, sizeof(double)));
  CK(cudaMemset(differ, 0, sizeof(int)));
  CK(cudaMemset(labels, 0xff, sizeof(int) * s.n));
  r.run(s, xx, labels, inertia);
  CK(cudaDeviceSynchronize());
  const int checks = 4096;
  check_kernel<<<checks, 256>>>(X, C, s.n, s.d, s.k, labels, 7919, worst, differ);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  double w = 0, in = 0;
  int dif = 0;
  CK(cudaMemcpy(&w, worst, sizeof(double), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&dif, differ, sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&in, inertia, sizeof(double), cudaMemcpyDeviceToHost));
  // the check's row sums (kSums builds): rows 0, 1, n/2, n-1 of every tile against fp64 sums of the TF32 operands
  double sums_err = -1;
  if (Assign::kSums) {
    std::vector<float> hc(static_cast<size_t>(s.k) * s.d), hx(s.d);
    CK(cudaMemcpy(hc.data(), C, sizeof(float) * hc.size(), cudaMemcpyDeviceToHost));
    const long long rp = Assign::rows_padded(s.n), tiles = Assign::col_tiles(s.k);
    std::vector<float> hp(3 * rp * tiles);
    CK(cudaMemcpy(hp.data(), r.parts, sizeof(float) * hp.size(), cudaMemcpyDeviceToHost));
    sums_err = 0;
    for (long long row : {0ll, 1ll, static_cast<long long>(s.n / 2), static_cast<long long>(s.n - 1)}) {
      CK(cudaMemcpy(hx.data(), X + row * s.d, sizeof(float) * s.d, cudaMemcpyDeviceToHost));
      for (long long t = 0; t < tiles; ++t) {
        double s1 = 0, sw = 0, sa = 0;
        for (int j = static_cast<int>(t * Assign::kTileN); j < std::min<long long>(s.k, (t + 1) * Assign::kTileN); ++j) {
          double a = 0;
          for (int d = 0; d < s.d; ++d) a += static_cast<double>(tf32_host(hx[d])) * tf32_host(hc[static_cast<size_t>(j) * s.d + d]);
          s1 += a;
          sw += (j - t * Assign::kTileN + 1) * a;
          sa += std::fabs(a);
        }
        const double e = std::max({std::fabs(hp[t * rp + row] - s1) / sa, std::fabs(hp[rp * tiles + t * rp + row] - sw) / (sa * Assign::kTileN),
                                   std::fabs(hp[2 * rp * tiles + t * rp + row] - sa) / sa});
        sums_err = std::max(sums_err, e);
      }
    }
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const float one = 1.f, zero = 0.f;
  auto ours = [&] { r.run(s, xx, labels, nullptr); };
  auto blas = [&] {
    // D^T (k x n, column-major) = C (k x d, row-major = d x k column-major, transposed) x X^T
    if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, s.k, s.n, s.d, &one, C, s.d, X, s.d, &zero, D, s.k) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  };
  for (int i = 0; i < 5; ++i) ours(), blas();
  CK(cudaDeviceSynchronize());
  std::vector<float> t0, t1;
  for (int i = 0; i < reps; ++i) {
    t0.push_back(time_ms(ours, a, b));
    t1.push_back(time_ms(blas, a, b));
  }
  const double flop = 2.0 * s.n * s.k * static_cast<double>(s.d);
  const float m0 = median(t0), m1 = median(t1);
  std::printf("{\"shape\": \"%dx%dx%d\", \"config\": \"%s\", \"assign_us\": %.2f, \"cublas_tf32_gemm_us\": %.2f, \"x_cublas_gemm\": %.3f, "
              "\"tflops\": %.1f, \"sampled\": %d, \"differ\": %d, \"worst_gap\": %.3g, \"inertia\": %.9g, \"sums_err\": %.3g}\n",
              s.n, s.d, s.k, name, 1e3 * m0, 1e3 * m1, m1 / m0, flop / (m0 * 1e9), checks, dif, w, in, sums_err);
  std::fflush(stdout);
  r.release();
  cudaFree(labels);
  cudaFree(inertia);
  cudaFree(worst);
  cudaFree(differ);
}

int main(int argc, char** argv) {
  int reps = 50;
  std::vector<Shape3> shapes;
  for (int i = 1; i < argc; ++i) {
    Shape3 s{};
    if (std::sscanf(argv[i], "%dx%dx%d", &s.n, &s.d, &s.k) != 3 || s.d % 4 || s.k > s.n) {
      std::fprintf(stderr, "bad shape %s (samples x dims x clusters, dims a multiple of 4)\n", argv[i]);
      return 2;
    }
    shapes.push_back(s);
  }
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  for (const Shape3& s : shapes) {
    float *X, *C, *xx, *cc, *D;
    CK(cudaMalloc(&X, sizeof(float) * s.n * static_cast<size_t>(s.d)));
    CK(cudaMalloc(&C, sizeof(float) * s.k * static_cast<size_t>(s.d)));
    CK(cudaMalloc(&xx, sizeof(float) * s.n));
    CK(cudaMalloc(&cc, sizeof(float) * s.k));
    CK(cudaMalloc(&D, sizeof(float) * s.n * static_cast<size_t>(s.k)));
    fill_kernel<<<4096, 256>>>(X, static_cast<long long>(s.n) * s.d, 12345u + s.d, 1.f);
    centroids_kernel<<<1024, 256>>>(X, s.d, s.k, s.n / s.k, C);
    norms_kernel<<<(s.n + 255) / 256, 256>>>(X, s.n, s.d, xx);
    norms_kernel<<<(s.k + 255) / 256, 256>>>(C, s.k, s.d, cc);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
#ifdef PROBE_ONLY  // one configuration (e.g. -DPROBE_ONLY=F2: a binary for Nsight Compute)
    probe<PROBE_ONLY>(PROBE_NAME(PROBE_ONLY), s, X, C, xx, cc, D, h, hw, reps);
#else
    probe<A0>("coop 128x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<S1>("coop 128x128x32 c1 + sums", s, X, C, xx, cc, D, h, hw, reps);
    probe<A8>("coop 128x256x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<S2>("coop 128x256x32 c1 + sums", s, X, C, xx, cc, D, h, hw, reps);
#ifndef ONE_CONFIG
    probe<A1>("coop 128x128x32 c2", s, X, C, xx, cc, D, h, hw, reps);
    probe<A2>("pingpong 64x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A3>("pingpong 128x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A4>("coop 256x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A5>("coop 128x128x16 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A6>("coop 128x128x32 c1 epi128x64", s, X, C, xx, cc, D, h, hw, reps);
    probe<A7>("coop 128x128x32 c1 epi128x128", s, X, C, xx, cc, D, h, hw, reps);
    probe<F1>("floor: no norms", s, X, C, xx, cc, D, h, hw, reps);
    probe<F2>("floor: no arg-min", s, X, C, xx, cc, D, h, hw, reps);
#endif
#endif
    cudaFree(X);
    cudaFree(C);
    cudaFree(xx);
    cudaFree(cc);
    cudaFree(D);
  }
  return 0;
}
