// Probe for the 16-bit ABFT's side work at linear-layer shapes (docs/gemm-hopper.md, "bf16 / fp16 ABFT"): the reference
// product R = A E^T (A: m x k bf16 row-major, E: rows_e x k bf16, R fp32; rows_e = 2 per 128-column strip of n, rounded
// up to 8) through cuBLAS (cublasGemmEx, fp32 compute) beside cuBLAS's bf16 GEMM C = A B of the same shape, and the
// encodings of B (abft16_enc_kernel, B row-major and column-major; the row-major kernel as it was, old_enc_rr, beside
// it), checked on the host. CUDA events, warm-up, median of the reps;
// every launch checked. R is compared with a host double reference on sampled elements (the check's input must be fp32
// accurate: the largest error relative to sum |a| |e| is printed).
//   nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -arch=sm_90a -I$CUTLASS/include -Itemplates/common
//        -Itemplates/gemm experiments/scripts/abft16_side_probe.cu -lcublas -o side_probe && ./side_probe
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cutlass/numeric_conversion.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass90_abft16.cuh"

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_BLAS(x)                                                                             \
  do {                                                                                            \
    cublasStatus_t s_ = (x);                                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_));      \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

using EA = cutlass::bfloat16_t;

__global__ void fill(EA* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed * 40503u;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = static_cast<EA>((static_cast<float>(h & 0xffffff) / 16777216.f) * 2.f - 1.f);
  }
}

// The row-major encodings as they were (a thread per (k row, strip) reading its row's columns 16 bytes at a time),
// timed beside abft16_enc_kernel's in the same process
__global__ void __launch_bounds__(256) old_enc_rr(ftgen_abft16::EncParams p) {
  const EA* __restrict__ B = static_cast<const EA*>(p.B);
  EA* E = static_cast<EA*>(p.E);
  constexpr int kV = 8;
  const long long units = p.lde * p.strips;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < units; x += 256ll * gridDim.x) {
    const int kk = static_cast<int>(x / p.strips), s = static_cast<int>(x % p.strips);
    const int j0 = s * p.cols, j1 = min(j0 + p.cols, p.n);
    float se = 0.f, sw = 0.f;
    const EA* row = B + static_cast<long long>(kk) * p.ldb;
    for (int j = j0; j + kV <= j1; j += kV) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + j));
      const EA* e = reinterpret_cast<const EA*>(&v);
      for (int t = 0; t < kV; ++t) {
        const float b = static_cast<float>(e[t]);
        se += b;
        sw = fmaf(static_cast<float>(j + t - j0 + 1), b, sw);
      }
    }
    ftgen_abft16::abft16_store_enc<2>(E, p.lde, s, kk, se, sw, p.se, p.sw);
  }
}

template <class F>
float median_us(F&& f, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  CHECK(cudaGetLastError());
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float ms = 0.f;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.f);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

int main() {
  cublasHandle_t h;
  CHECK_BLAS(cublasCreate(&h));
  const int ms_[] = {16, 256, 1024, 4096, 8192};
  const int nk[][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}};
  const int reps = 50;
  std::printf("%6s %6s %6s %5s | %9s %9s | %9s %9s %9s | %s\n", "m", "n", "k", "rowsE", "refBLASus", "gemm_us", "enc_rr_old",
              "enc_rr", "enc_rc", "max rel err of cuBLAS's R");
  for (auto& p : nk) {
    const int n = p[0], k = p[1];
    const int strips = (n + 127) / 128, rows_e = (2 * strips + 7) / 8 * 8;
    EA *B, *E;
    CHECK(cudaMalloc(&B, sizeof(EA) * size_t(n) * k));
    CHECK(cudaMalloc(&E, sizeof(EA) * size_t(rows_e) * k));
    fill<<<1024, 256>>>(B, (long long)n * k, 7);
    fill<<<64, 256>>>(E, (long long)rows_e * k, 9);
    CHECK(cudaGetLastError());
    ftgen_abft16::EncParams ep;
    ep.B = B;
    ep.n = n;
    ep.cols = 128;
    ep.strips = strips;
    ep.lde = k;
    ep.rows_e = rows_e;
    ep.se = 1.f;
    ep.sw = 1.f;
    ep.E = E;
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    auto enc = [&](bool row) {
      const unsigned blocks = static_cast<unsigned>(ftgen_abft16::enc_blocks(row, k, strips, sms));
      if (row) {
        ep.ldb = n;
        ftgen_abft16::abft16_enc_kernel<EA, true, 2><<<blocks, 256>>>(ep);
      } else {
        ep.ldb = k;
        ftgen_abft16::abft16_enc_kernel<EA, false, 2><<<blocks, 256>>>(ep);
      }
    };
    auto enc_old = [&] {
      ep.ldb = n;
      const long long units = (long long)k * strips;
      old_enc_rr<<<static_cast<unsigned>(std::min<long long>((units + 255) / 256, 8ll * sms)), 256>>>(ep);
    };
    float t_rr = 0.f, t_rc = 0.f, t_rr_old = 0.f;
    {
      std::vector<float> a, b, c;
      for (int r = 0; r < 3; ++r) {  // alternated rounds
        a.push_back(median_us([&] { enc(true); }, reps));
        b.push_back(median_us([&] { enc(false); }, reps));
        c.push_back(median_us(enc_old, reps));
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      std::sort(c.begin(), c.end());
      t_rr = a[1];
      t_rc = b[1];
      t_rr_old = c[1];
    }
    {  // the encodings of both layouts against host sums on sampled (strip, k row) units: hi + lo 2^-8 within 2^-15
      std::vector<EA> hb(size_t(n) * k), he(size_t(rows_e) * k);
      CHECK(cudaMemcpy(hb.data(), B, sizeof(EA) * hb.size(), cudaMemcpyDeviceToHost));
      for (int row = 1; row >= 0; --row) {
        enc(row);
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(he.data(), E, sizeof(EA) * he.size(), cudaMemcpyDeviceToHost));
        std::mt19937 rng(3);
        double worst = 0.0;
        for (int q = 0; q < 64; ++q) {
          const int s = (q == 0 ? strips - 1 : rng() % strips), kk = rng() % k;
          double v = 0.0, mag = 0.0;
          for (int j = s * 128; j < std::min(n, (s + 1) * 128); ++j) {
            const double b = static_cast<float>(row ? hb[size_t(kk) * n + j] : hb[size_t(j) * k + kk]);
            v += b;
            mag += std::fabs(b);
          }
          const double got = static_cast<float>(he[size_t(2 * s) * k + kk]) + std::ldexp(static_cast<float>(he[size_t(2 * s + 1) * k + kk]), -8);
          worst = std::max(worst, std::fabs(got - v) / std::max(mag, 1e-30));
        }
        std::printf("encodings %s n %d k %d: largest error / sum |b| %.3g%s\n", row ? "row-major B" : "column-major B", n, k, worst,
                    worst < std::ldexp(1.0, -15) ? "" : "  WRONG");
      }
    }
    fill<<<64, 256>>>(E, (long long)rows_e * k, 9);
    for (int m : ms_) {
      EA *A, *C;
      float* R;
      CHECK(cudaMalloc(&A, sizeof(EA) * size_t(m) * k));
      CHECK(cudaMalloc(&C, sizeof(EA) * size_t(m) * n));
      CHECK(cudaMalloc(&R, sizeof(float) * size_t(m) * rows_e));
      fill<<<1024, 256>>>(A, (long long)m * k, 11);
      CHECK(cudaGetLastError());
      const float one = 1.f, zero = 0.f;
      // R (m x rows_e, row-major) = A E^T: column-major R^T (rows_e x m) = E (k x rows_e col-major)^T A^T (k x m col-major)
      auto ref = [&] {
        CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows_e, m, k, &one, E, CUDA_R_16BF, k, A, CUDA_R_16BF, k, &zero, R,
                                CUDA_R_32F, rows_e, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      // C (m x n row-major) = A B with B column-major (n x k rows of k): column-major C^T = B^T... as cuBLAS sees it
      auto gemm = [&] {
        CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_16BF, k, A, CUDA_R_16BF, k, &zero, C,
                                CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      float t_ref = 0.f, t_gemm = 0.f;
      {
        std::vector<float> a, b;
        for (int r = 0; r < 3; ++r) {  // alternated rounds
          a.push_back(median_us(ref, reps));
          b.push_back(median_us(gemm, reps));
        }
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        t_ref = a[1];
        t_gemm = b[1];
      }
      ref();
      CHECK(cudaDeviceSynchronize());
      // sampled elements of R against double sums
      std::vector<float> hR(size_t(m) * rows_e);
      CHECK(cudaMemcpy(hR.data(), R, sizeof(float) * hR.size(), cudaMemcpyDeviceToHost));
      std::vector<EA> ha(k), he(k);
      double worst = 0.0;
      std::mt19937 rng(5);
      for (int s = 0; s < 8; ++s) {
        const int i = rng() % m, j = rng() % rows_e;
        CHECK(cudaMemcpy(ha.data(), A + size_t(i) * k, sizeof(EA) * k, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(he.data(), E + size_t(j) * k, sizeof(EA) * k, cudaMemcpyDeviceToHost));
        double v = 0.0, mag = 0.0;
        for (int q = 0; q < k; ++q) {
          const double x = static_cast<float>(ha[q]), y = static_cast<float>(he[q]);
          v += x * y;
          mag += std::fabs(x * y);
        }
        worst = std::max(worst, std::fabs(hR[size_t(i) * rows_e + j] - v) / mag);
      }
      std::printf("%6d %6d %6d %5d | %9.2f %9.2f | %9.2f %9.2f %9.2f | %.3g (2^-24 k/16 = %.3g)\n", m, n, k, rows_e, t_ref, t_gemm,
                  t_rr_old, t_rr, t_rc, worst, std::ldexp(1.0, -24) * k / 16.0);
      CHECK(cudaFree(A));
      CHECK(cudaFree(C));
      CHECK(cudaFree(R));
    }
    CHECK(cudaFree(B));
    CHECK(cudaFree(E));
  }
  CHECK_BLAS(cublasDestroy(h));
  return 0;
}
