// Probe for bf16 / fp16 ABFT on the sm90 kernels (docs/gemm-hopper.md, "bf16 / fp16 ABFT: the design from the model"):
// a CUTLASS 3.x bf16 GEMM whose epilogue, besides D = bf16(alpha acc), stores per row and 128-column tile the sums of
// the fp32 values alpha acc and w alpha acc (w = the column's place in its tile + 1) -- an epilogue visitor DAG with two
// Sm90ColReduction nodes that keep per-tile partials (FinalReduction = false) -- beside the same GEMM with the default
// epilogue. It checks D against a host reference, the two partial sums against host sums of the fp32 accumulators'
// reference, and times both kernels alternately (CUDA events, median of reps).
//   nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -arch=sm_90a -I$CUTLASS/include -I$CUTLASS/tools/util/include \
//        experiments/scripts/evt_rowsum_probe.cu -o evt_probe && ./evt_probe [M N K (check)] [M N K (timing)]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

using ElementAB = cutlass::bfloat16_t;
using ElementD = cutlass::bfloat16_t;
using ElementAcc = float;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlign = 8;
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_2, _1, _1>;
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

namespace fusion = cutlass::epilogue::fusion;
// per row and CTA tile column: the partial row sum of the node's fp32 input (m-major, M rounded up to the tile)
using RowPartial = fusion::Sm90ColReduction<cutlass::plus, cutlass::plus, cutlass::plus, 0, TileShape, float, float, kRound,
                                            Stride<_1, _0, int64_t>, 4, true, /*FinalReduction=*/false>;
using Weights = fusion::Sm90RowBroadcast<0, TileShape, float, float, Stride<_0, _1, int64_t>>;
// 0 acc, 1 alpha, 2 alpha acc, 3 its row partial, 4 w, 5 w alpha acc, 6 its row partial, 7 D = bf16(alpha acc)
using CheckEVT = fusion::Sm90TopologicalVisitor<
    float,
    cute::tuple<seq<>, seq<>, seq<1, 0>, seq<2>, seq<>, seq<4, 2>, seq<5>, seq<2>>,
    fusion::Sm90AccFetch, fusion::Sm90ScalarBroadcast<float>,
    fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial, Weights,
    fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial,
    fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, float, kRound>>;

template <class Fusion>
struct Gemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto,
      ElementAcc, float, void, LayoutD, kAlign, ElementD, LayoutD, kAlign, EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, LayoutA, kAlign, ElementAB, LayoutB, kAlign, ElementAcc,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Op = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};
using GemmCheck = Gemm<CheckEVT>;
using GemmPlain = Gemm<fusion::LinearCombination<ElementD, float, void, float, kRound>>;

struct Problem {
  int m, n, k;
  ElementAB *A, *B;
  ElementD* D;
  float *W, *S1, *SW;
  void* ws;
  size_t ws_bytes;
};

template <class G>
typename G::Op::Arguments arguments(const Problem& p, float alpha) {
  auto sa = cutlass::make_cute_packed_stride(typename G::Kernel::StrideA{}, {p.m, p.k, 1});
  auto sb = cutlass::make_cute_packed_stride(typename G::Kernel::StrideB{}, {p.n, p.k, 1});
  auto sd = cutlass::make_cute_packed_stride(typename G::Kernel::StrideD{}, {p.m, p.n, 1});
  typename G::Op::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {p.m, p.n, p.k, 1}, {p.A, sa, p.B, sb}, {{}, nullptr, sd, p.D, sd}};
  if constexpr (std::is_same_v<G, GemmCheck>) {
    const int64_t mpad = (p.m + 127) / 128 * 128;
    // the DAG's arguments: one per node, in topological order (nodes without arguments: {})
    args.epilogue.thread = {
        {},                                     // acc
        {{alpha}},                              // alpha
        {},                                     // alpha acc
        {p.S1, 0.f, {_1{}, _0{}, mpad * ((p.n + 127) / 128)}},  // its row partials
        {p.W, 0.f, {_0{}, _1{}, 0}},            // w
        {},                                     // w alpha acc
        {p.SW, 0.f, {_1{}, _0{}, mpad * ((p.n + 127) / 128)}},  // its row partials
        {}};                                    // D
  } else {
    args.epilogue.thread.alpha = alpha;
    args.epilogue.thread.beta = 0.f;
  }
  return args;
}

template <class G>
void run(const Problem& p, float alpha, cudaStream_t s) {
  typename G::Op op;
  auto args = arguments<G>(p, alpha);
  if (op.can_implement(args) != cutlass::Status::kSuccess) { std::fprintf(stderr, "can_implement failed\n"); std::exit(1); }
  if (G::Op::get_workspace_size(args) > p.ws_bytes) { std::fprintf(stderr, "workspace\n"); std::exit(1); }
  if (op.initialize(args, p.ws, s) != cutlass::Status::kSuccess) { std::fprintf(stderr, "initialize failed\n"); std::exit(1); }
  if (op.run(s) != cutlass::Status::kSuccess) { std::fprintf(stderr, "run failed\n"); std::exit(1); }
  CHECK(cudaGetLastError());
}

Problem make(int m, int n, int k, unsigned seed) {
  Problem p{};
  p.m = m, p.n = n, p.k = k;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<ElementAB> a(size_t(m) * k), b(size_t(k) * n);
  for (auto& x : a) x = ElementAB(nd(rng));
  for (auto& x : b) x = ElementAB(nd(rng));
  std::vector<float> w(n);
  for (int j = 0; j < n; ++j) w[j] = float(j % 128 + 1);
  const size_t parts = size_t((m + 127) / 128 * 128) * ((n + 127) / 128);
  CHECK(cudaMalloc(&p.A, a.size() * sizeof(ElementAB)));
  CHECK(cudaMalloc(&p.B, b.size() * sizeof(ElementAB)));
  CHECK(cudaMalloc(&p.D, size_t(m) * n * sizeof(ElementD)));
  CHECK(cudaMalloc(&p.W, n * sizeof(float)));
  CHECK(cudaMalloc(&p.S1, parts * sizeof(float)));
  CHECK(cudaMalloc(&p.SW, parts * sizeof(float)));
  p.ws_bytes = size_t(64) << 20;
  CHECK(cudaMalloc(&p.ws, p.ws_bytes));
  CHECK(cudaMemcpy(p.A, a.data(), a.size() * sizeof(ElementAB), cudaMemcpyHostToDevice));  // A row-major m x k
  CHECK(cudaMemcpy(p.B, b.data(), b.size() * sizeof(ElementAB), cudaMemcpyHostToDevice));  // B column-major: n rows of k
  CHECK(cudaMemcpy(p.W, w.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

int main(int argc, char** argv) {
  const int cm = argc > 3 ? std::atoi(argv[1]) : 512, cn = argc > 3 ? std::atoi(argv[2]) : 384, ck = argc > 3 ? std::atoi(argv[3]) : 1024;
  const int tm = argc > 6 ? std::atoi(argv[4]) : 4096, tn = argc > 6 ? std::atoi(argv[5]) : 4096, tk = argc > 6 ? std::atoi(argv[6]) : 4096;
  const float alpha = 1.5f;
  // 1. correctness at a small shape: D against the host's fp64 reference (bf16 tolerance), the partial sums against the
  //    host's sums of the same fp64 reference (fp32-accumulation tolerance)
  {
    Problem p = make(cm, cn, ck, 7);
    run<GemmCheck>(p, alpha, nullptr);
    CHECK(cudaDeviceSynchronize());
    std::vector<ElementAB> a(size_t(cm) * ck), b(size_t(ck) * cn);
    std::vector<ElementD> d(size_t(cm) * cn);
    const int tiles_n = (cn + 127) / 128, mpad = (cm + 127) / 128 * 128;
    std::vector<float> s1(size_t(mpad) * tiles_n), sw(s1.size());
    CHECK(cudaMemcpy(a.data(), p.A, a.size() * sizeof(ElementAB), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b.data(), p.B, b.size() * sizeof(ElementAB), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(d.data(), p.D, d.size() * sizeof(ElementD), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(s1.data(), p.S1, s1.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(sw.data(), p.SW, sw.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst_d = 0, worst_s = 0, worst_w = 0;
    for (int i = 0; i < cm; ++i) {
      std::vector<double> r1(tiles_n, 0.0), rw(tiles_n, 0.0), mag(tiles_n, 0.0), magw(tiles_n, 0.0);
      for (int j = 0; j < cn; ++j) {
        double c = 0, s = 0;
        for (int kk = 0; kk < ck; ++kk) {
          const double x = double(float(a[size_t(i) * ck + kk])) * double(float(b[size_t(j) * ck + kk]));
          c += x;
          s += std::abs(x);
        }
        c *= alpha, s *= alpha;
        worst_d = std::max(worst_d, std::abs(double(float(d[size_t(i) * cn + j])) - c) / (s * (1.0 / 256 + 1e-5)));
        const int t = j / 128;
        r1[t] += c, rw[t] += (j % 128 + 1) * c, mag[t] += s, magw[t] += (j % 128 + 1) * s;
      }
      for (int t = 0; t < tiles_n; ++t) {
        const double e1 = std::abs(s1[size_t(t) * mpad + i] - r1[t]) / (mag[t] * 2e-6 * std::sqrt(double(ck)));
        const double ew = std::abs(sw[size_t(t) * mpad + i] - rw[t]) / (magw[t] * 2e-6 * std::sqrt(double(ck)));
        worst_s = std::max(worst_s, e1), worst_w = std::max(worst_w, ew);
      }
    }
    std::printf("check %dx%dx%d: D err/tol %.3f, row sums err/tol %.3f, weighted %.3f -> %s\n", cm, cn, ck, worst_d, worst_s, worst_w,
                worst_d <= 1 && worst_s <= 1 && worst_w <= 1 ? "ok" : "FAILED");
    if (!(worst_d <= 1 && worst_s <= 1 && worst_w <= 1)) return 1;
  }
  // 2. timing: the GEMM with the row-sum epilogue against the plain one, alternately, median of 20
  {
    Problem p = make(tm, tn, tk, 9);
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<float> tc, tp;
    for (int rep = 0; rep < 25; ++rep) {
      for (int which = 0; which < 2; ++which) {
        CHECK(cudaEventRecord(e0));
        if (which == 0) run<GemmCheck>(p, alpha, nullptr);
        else run<GemmPlain>(p, alpha, nullptr);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep >= 5) (which == 0 ? tc : tp).push_back(ms);
      }
    }
    std::sort(tc.begin(), tc.end());
    std::sort(tp.begin(), tp.end());
    const double mc = tc[tc.size() / 2], mp = tp[tp.size() / 2], fl = 2.0 * tm * tn * tk;
    std::printf("time %dx%dx%d: row-sum epilogue %.4f ms (%.0f TFLOP/s), plain %.4f ms (%.0f TFLOP/s), x %.3f\n", tm, tn, tk, mc,
                fl / mc / 1e9, mp, fl / mp / 1e9, mc / mp);
  }
  return 0;
}
