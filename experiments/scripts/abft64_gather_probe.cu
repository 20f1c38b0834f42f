// Probe: can the fp64 ABFT check's suspects be rechecked by the GEMM's own tensor-core kernel, bit for bit?
//
// The fp64 check's suspect band (templates/gemm/cutlass_abft64.cuh) recomputes a suspect unit's row of its strip by
// compensated dot products on the CUDA cores, a block per unit and 32 columns, each block reading B's strip from memory:
// at a floor of 0.3 it rechecked 16095 units a launch at 8192^3 and made the GEMM 2.2x slower (docs/gemm-hopper.md).
// A recheck by the variant's own mainloop (the same threadblock, warp and DMMA shapes and stages, so the same products
// summed in the same order) would give each clean element bit for bit, so any difference is a fault and no magnitudes
// are needed; the units of a strip share B's tiles. This probe:
//   1. C = A B by the variant's kernel (cutlass::gemm::device::Gemm, 128x128x16, warp 32x64x16, DMMA 16x8x4, 3 stages,
//      row-major A, B, C: what cutlass_library emits for gemm_f64_..._128x128x16_w32x64x16_i16x8x4_s3_a1_sw8_rr);
//   2. for every 128-column strip, R random rows recomputed by GemmUniversal with A gathered by row indices (GatherA),
//      problem R x 128 x k, one launch per strip spread over S streams;
//   3. the same in one launch (recheck_kernel: a block per strip and 128 listed rows, the counts read on the device),
//      and in one launch of 32-row tiles (OpGather32: the same k order);
//   4. counts the recomputed elements that differ from C in any bit (expected: 0), and times steps 2 and 3 against
//      step 1 (CUDA events, median of reps, alternated).
// Build (sm_90a, -DNDEBUG; CUTLASS from the nvidia-cutlass wheel):
//   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a -I$CUTLASS/include -I$CUTLASS/tools/util/include abft64_gather_probe.cu -o probe
//   ./probe M N K DIST R... (DIST: normal | loguniform)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/gemm/device/gemm_universal.h"

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CS(x)                                                                                             \
  do {                                                                                                    \
    cutlass::Status s_ = (x);                                                                             \
    if (s_ != cutlass::Status::kSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cutlass::cutlassGetStatusString(s_)); \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

using Row = cutlass::layout::RowMajor;
using TB = cutlass::gemm::GemmShape<128, 128, 16>;
using Warp = cutlass::gemm::GemmShape<32, 64, 16>;
using Inst = cutlass::gemm::GemmShape<16, 8, 4>;
using Epi = cutlass::epilogue::thread::LinearCombination<double, 1, double, double>;
using Swz = cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>;

using OpMain = cutlass::gemm::device::Gemm<double, Row, double, Row, double, Row, double, cutlass::arch::OpClassTensorOp,
                                           cutlass::arch::Sm90, TB, Warp, Inst, Epi, Swz, 3, 1, 1, false,
                                           cutlass::arch::OpMultiplyAdd>;
using OpGather = cutlass::gemm::device::GemmUniversal<
    double, Row, double, Row, double, Row, double, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm90, TB, Warp, Inst, Epi,
    Swz, 3, 1, 1, cutlass::arch::OpMultiplyAdd, cutlass::ComplexTransform::kNone, cutlass::ComplexTransform::kNone,
    /*GatherA=*/true, /*GatherB=*/false, /*ScatterD=*/false>;
static_assert(std::is_same<OpMain::GemmKernel::Mma::Operator, OpGather::GemmKernel::Mma::Operator>::value,
              "the gathered recheck runs the variant's warp-level MMA");
// The same k order in a smaller tile: an element's products are summed along k by the k-tile (16), the warp's k-steps
// (warp k 16) and the DMMA (16x8x4), whatever the tile's rows and columns; 32 x 128 rows and columns a block (4 warps of
// 16 x 64) so that a strip's few listed rows take a block of a quarter of the work.
using OpGather32 = cutlass::gemm::device::GemmUniversal<
    double, Row, double, Row, double, Row, double, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm90,
    cutlass::gemm::GemmShape<32, 128, 16>, cutlass::gemm::GemmShape<16, 64, 16>, Inst, Epi, Swz, 3, 1, 1,
    cutlass::arch::OpMultiplyAdd, cutlass::ComplexTransform::kNone, cutlass::ComplexTransform::kNone, true, false, false>;

// The recheck in one launch: block (x, s) runs the variant's mainloop (the gathered kernel's Mma and epilogue) on rows
// 128 x .. 128 x + 127 of strip s's list, counts[s] read on the device (blocks past it return), so no count goes to
// the host: W[s][r][j] = alpha (A[idx[s][r]] . B[:, 128 s + j]).
template <class GK>
struct RecheckArgs {
  typename GK::Params p;  // strides of A, B and W (ld 128) and the epilogue's alpha
  const double* A;
  const double* B;
  double* W;
  const int* idx;     // [strip][cap]: the rows to recheck
  const int* counts;  // [strip]
  int cap, n, k;
};
template <class GK>
__global__ void __launch_bounds__(GK::kThreadCount) recheck_kernel(RecheckArgs<GK> a) {
  using Mma = typename GK::Mma;
  using Epilogue = typename GK::Epilogue;
  extern __shared__ __align__(16) char smem_raw[];
  auto& smem = *reinterpret_cast<typename GK::SharedStorage*>(smem_raw);
  const int s = blockIdx.y, row0 = blockIdx.x * Mma::Shape::kM;
  const int cnt = min(a.counts[s], a.cap), ns = min(128, a.n - s * 128);
  if (row0 >= cnt) return;
  const int t = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = t % 32;
  typename Mma::IteratorA it_a(a.p.params_A, const_cast<double*>(a.A), {cnt, a.k}, t, {row0, 0}, a.idx + static_cast<long long>(s) * a.cap);
  typename Mma::IteratorB it_b(a.p.params_B, const_cast<double*>(a.B) + s * 128, {a.k, ns}, t, {0, 0}, nullptr);
  Mma mma(smem.main_loop, t, warp, lane);
  typename Mma::FragmentC acc;
  acc.clear();
  mma((a.k + Mma::Shape::kK - 1) / Mma::Shape::kK, acc, it_a, it_b, acc);
  typename GK::EpilogueOutputOp op(a.p.output_op);
  double* const w = a.W + static_cast<long long>(s) * a.cap * 128;
  typename Epilogue::OutputTileIterator it_d(a.p.params_D, w, {cnt, ns}, t, {row0, 0}, nullptr);
  Epilogue epi(smem.epilogue, t, warp, lane);
  epi(op, it_d, acc, it_d);
}

// elements of the recheck W[s][r][j] that differ in any bit from C[idx[s][r]][s * 128 + j]
__global__ void diff_kernel(const double* C, int ldc, int n, const double* W, const int* idx, int strips, int R, unsigned long long* out) {
  const long long t = blockIdx.x * 256ll + threadIdx.x;
  if (t >= static_cast<long long>(strips) * R * 128) return;
  const int j = t % 128, r = (t / 128) % R, s = t / (128ll * R);
  const int col = s * 128 + j;
  if (col >= n) return;
  const double c = C[static_cast<long long>(idx[s * R + r]) * ldc + col], w = W[t];
  if (__double_as_longlong(c) != __double_as_longlong(w)) atomicAdd(out, 1ull);
}

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s M N K normal|loguniform R [R ...]\n", argv[0]);
    return 2;
  }
  const int M = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]);
  const bool logu = std::string(argv[4]) == "loguniform";
  const int strips = (N + 127) / 128, S = 16, reps = 15;
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(-1.0, 1.0);
  auto draw = [&]() { return logu ? std::copysign(std::exp2(12.0 * ud(rng)), ud(rng)) : nd(rng); };
  std::vector<double> hA(static_cast<size_t>(M) * K), hB(static_cast<size_t>(K) * N);
  for (auto& x : hA) x = draw();
  for (auto& x : hB) x = draw();
  double *A, *B, *C;
  CK(cudaMalloc(&A, hA.size() * 8));
  CK(cudaMalloc(&B, hB.size() * 8));
  CK(cudaMalloc(&C, static_cast<size_t>(M) * N * 8));
  CK(cudaMemcpy(A, hA.data(), hA.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B, hB.data(), hB.size() * 8, cudaMemcpyHostToDevice));
  std::vector<cudaStream_t> st(S);
  for (auto& s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaStream_t s0;
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, fork;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  std::vector<cudaEvent_t> join(S);
  for (auto& e : join) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

  OpMain gemm;
  OpMain::Arguments margs({M, N, K}, {A, K}, {B, N}, {C, N}, {C, N}, {1.0, 0.0});
  CS(gemm.initialize(margs, nullptr, s0));
  auto run_main = [&]() { CS(gemm(s0)); };

  std::printf("M N K dist R | differing elements (per-strip launches, one launch, one launch of 32-row tiles) / rechecked | "
              "GEMM ms | recheck ms (the same three) | recheck / GEMM\n");
  for (int a = 5; a < argc; ++a) {
    const int R = std::min(std::atoi(argv[a]), M);
    std::vector<int> hidx(static_cast<size_t>(strips) * R);
    std::vector<int> rows(M);
    for (int i = 0; i < M; ++i) rows[i] = i;
    for (int s = 0; s < strips; ++s) {
      std::shuffle(rows.begin(), rows.end(), rng);
      std::copy(rows.begin(), rows.begin() + R, hidx.begin() + static_cast<size_t>(s) * R);
    }
    int* idx;
    double* W;
    unsigned long long* bad;
    CK(cudaMalloc(&idx, hidx.size() * 4));
    CK(cudaMalloc(&W, hidx.size() * 128 * 8));
    CK(cudaMalloc(&bad, 8));
    CK(cudaMemcpy(idx, hidx.data(), hidx.size() * 4, cudaMemcpyHostToDevice));
    std::vector<OpGather> ops(strips);
    for (int s = 0; s < strips; ++s) {
      const int ns = std::min(128, N - s * 128);
      OpGather::Arguments g(cutlass::gemm::GemmUniversalMode::kGemm, {R, ns, K}, 1, {1.0, 0.0}, A, B + s * 128,
                            W + static_cast<size_t>(s) * R * 128, W + static_cast<size_t>(s) * R * 128, 0, 0, 0, 0, K, N,
                            128, 128, idx + static_cast<size_t>(s) * R, nullptr, nullptr);
      CS(ops[s].can_implement(g));
      CS(ops[s].initialize(g, nullptr, st[s % S]));
    }
    // the one-launch recheck: W2 from the same lists, every strip's count on the device
    double* W2;
    int* cnts;
    CK(cudaMalloc(&W2, hidx.size() * 128 * 8));
    CK(cudaMalloc(&cnts, strips * 4));
    {
      std::vector<int> hc(strips, R);
      CK(cudaMemcpy(cnts, hc.data(), strips * 4, cudaMemcpyHostToDevice));
    }
    OpGather::Arguments ga(cutlass::gemm::GemmUniversalMode::kGemm, {R, 128, K}, 1, {1.0, 0.0}, A, B, W2, W2, 0, 0, 0, 0, K,
                           N, 128, 128, idx, nullptr, nullptr);
    using GK = OpGather::GemmKernel;
    using GK32 = OpGather32::GemmKernel;
    RecheckArgs<GK> ra{GK::Params(ga, 132, 1), A, B, W2, idx, cnts, R, N, K};
    OpGather32::Arguments ga32(cutlass::gemm::GemmUniversalMode::kGemm, {R, 128, K}, 1, {1.0, 0.0}, A, B, W2, W2, 0, 0, 0, 0,
                               K, N, 128, 128, idx, nullptr, nullptr);
    RecheckArgs<GK32> ra32{GK32::Params(ga32, 132, 1), A, B, W2, idx, cnts, R, N, K};
    const int smem_bytes = static_cast<int>(sizeof(GK::SharedStorage)), smem32 = static_cast<int>(sizeof(GK32::SharedStorage));
    CK(cudaFuncSetAttribute(recheck_kernel<GK>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    CK(cudaFuncSetAttribute(recheck_kernel<GK32>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem32));
    bool small = false;  // the 32-row tile
    auto run_recheck1 = [&]() {
      if (small) {
        recheck_kernel<GK32><<<dim3((R + 31) / 32, strips), GK32::kThreadCount, smem32, s0>>>(ra32);
      } else {
        recheck_kernel<GK><<<dim3((R + 127) / 128, strips), GK::kThreadCount, smem_bytes, s0>>>(ra);
      }
      CK(cudaGetLastError());
    };
    auto run_recheck = [&]() {
      CK(cudaEventRecord(fork, s0));
      for (int i = 0; i < S; ++i) CK(cudaStreamWaitEvent(st[i], fork));
      for (int s = 0; s < strips; ++s) CS(ops[s](st[s % S]));
      for (int i = 0; i < S; ++i) {
        CK(cudaEventRecord(join[i], st[i]));
        CK(cudaStreamWaitEvent(s0, join[i]));
      }
    };
    run_main();
    run_recheck();
    const long long total = static_cast<long long>(strips) * R * 128;
    unsigned long long hbad[3] = {0, 0, 0};
    for (int which = 0; which < 3; ++which) {
      if (which > 0) {
        CK(cudaMemsetAsync(W2, 0, total * 8, s0));
        small = which == 2;
        run_recheck1();
      }
      CK(cudaMemsetAsync(bad, 0, 8, s0));
      diff_kernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, s0>>>(C, N, N, which ? W2 : W, idx, strips, R, bad);
      CK(cudaGetLastError());
      CK(cudaMemcpyAsync(&hbad[which], bad, 8, cudaMemcpyDeviceToHost, s0));
      CK(cudaStreamSynchronize(s0));
    }
    long long valid = 0;
    for (int s = 0; s < strips; ++s) valid += static_cast<long long>(R) * std::min(128, N - s * 128);
    std::vector<float> tm, tr, t1, t32;
    for (int w = 0; w < 3; ++w) run_main(), run_recheck(), small = false, run_recheck1(), small = true, run_recheck1();
    auto timed = [&](auto&& run, std::vector<float>& into) {  // one launch between events on s0
      float ms;
      CK(cudaEventRecord(e0, s0));
      run();
      CK(cudaEventRecord(e1, s0));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      into.push_back(ms);
    };
    for (int r = 0; r < reps; ++r) {
      timed(run_main, tm);
      timed(run_recheck, tr);
      small = false;
      timed(run_recheck1, t1);
      small = true;
      timed(run_recheck1, t32);
    }
    CK(cudaDeviceSynchronize());
    const double gm = median(tm), rm = median(tr), r1 = median(t1), r32 = median(t32);
    std::printf("%d %d %d %s %d | %llu %llu %llu / %lld | %.4f | %.4f %.4f %.4f | %.4f %.4f %.4f\n", M, N, K, argv[4], R, hbad[0],
                hbad[1], hbad[2], valid, gm, rm, r1, r32, rm / gm, r1 / gm, r32 / gm);
    CK(cudaFree(idx));
    CK(cudaFree(W));
    CK(cudaFree(W2));
    CK(cudaFree(cnts));
    CK(cudaFree(bad));
  }
  return 0;
}
