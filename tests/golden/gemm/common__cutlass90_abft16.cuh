// ftgen gemm, cutlass90 backend: threadblock ABFT for bf16 / fp16 (16-bit operands and output, fp32 accumulation), the
// check on the fp32 accumulators before the epilogue rounds them. Copied verbatim into every generated project. Do not
// edit the copies.
//
// The rules are abft_model's (ftgen/families/gemm/abft_model.py, abft16_check):
//
//   epilogue  the variant's sm90 GEMM with an epilogue visitor tree (CheckFusion) that stores, besides D = c rounded to
//             the 16-bit type (c = alpha acc, fp32), per row and CTA tile of columns (the checksum strip) the fp32
//             sums P1 = sum_j c_j, PW = sum_j w_j c_j (w_j = the column's place in its tile + 1) and PA = sum_j |c_j|:
//             three Sm90ColReduction partials that are never reduced across tiles
//   encode    per k row and strip: B e and B w (fp32 sums of the 16-bit values), each scaled by a power of two and split
//             into a high and a low 16-bit part (the low part scaled up by 2^kLoShift), the rows of E (abft16_enc_kernel)
//   refs      R = A E on the tensor cores (the variant's A, a stream-K sm90 GEMM into fp32); r and r' of a unit are its
//             high plus its low product, scaled back (the split keeps 16 + 8 or 11 significant bits: far below the
//             threshold)
//   verify    a thread per (row, strip) unit: d = P1 - alpha r, dw = PW - alpha r' against tau = lambda u (k / kw +
//             cols + 1) max(PA, |alpha r|) (u = 2^-24; kw the wgmma's k: the accumulation is not round to nearest, its
//             error grows with the number of wgmma steps) and tau_w (ftgen_rules::abft16_unit_verdict)
//   locate    only with certainty (|d| > 2 tau_w, j = rint(dw / d) in 1..cols, |dw - j d| <= tau_w)
//   correct   online: the located element recomputed from A's row and B's column in double, rounded to the output
//             type; not located (or correct: detect): the unit's row of the strip recomputed (abft16_fix_kernel)
//
// The encodings and the reference GEMM run on a second stream of low priority beside the GEMM; the check after both.
// Inject builds: the epilogue's leaf (FaultAccFetch) flips the planned bit of the planned accumulator (or adds the
// planned offset) as the epilogue reads it, before D and the sums: an upset of the accumulator register after the last
// k-iteration. The element is the fault's (thread, accumulator element) in the wgmma's layout (ftgen_sm90::fault_element).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"

#include "cutlass90_common.cuh"
#include "ftgen_ft.cuh"
#include "ftgen_gemm_rules.h"

namespace ftgen_abft16 {

namespace fusion = cutlass::epilogue::fusion;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

// ---- the epilogue --------------------------------------------------------------------------------------------------

// |x| elementwise (an Sm90Compute function on fragments)
template <class T>
struct AbsFn {
  CUTLASS_HOST_DEVICE T operator()(T const& x) const {
    T y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < int(T::kElements); ++i) y[i] = fabsf(x[i]);
    return y;
  }
};

// The planned faults of a launch (inject builds), read by the epilogue's leaf
struct FaultArgs {
  const int* by_tile = nullptr;  // per tile of C (row-major, the user's tiles): index into faults, or -1
  const ftgen::FaultSpec* faults = nullptr;
  ftgen::FaultRecord* records = nullptr;
  ftgen::FtCounters* counters = nullptr;
  int m = 0, n = 0, tiles_m = 0, tiles_n = 0;  // the user's C and its tiles
  ftgen_sm90::Geometry geo{};
};

// The epilogue's leaf in inject builds: the accumulators, the planned fault applied to its element as the epilogue reads
// it. A fault outside C (a partial tile's padding) is recorded as applied and changes nothing.
struct FaultAccFetch {
  struct SharedStorage {};
  using Arguments = FaultArgs;
  using Params = FaultArgs;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) { return args; }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) { return true; }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  CUTLASS_HOST_DEVICE FaultAccFetch() : params() {}
  CUTLASS_HOST_DEVICE FaultAccFetch(Params const& p, SharedStorage const&) : params(p) {}
  Params const params;

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(fusion::detail::ProducerLoadArgs<Args...> const&) {
    return fusion::detail::EmptyProducerLoadCallbacks{};
  }

  template <class CTensor>
  struct ConsumerStoreCallbacks : fusion::detail::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, Params const* p, int idx, int lr, int lc, long long row, long long col)
        : tCcD(c), params(p), fault(idx), local_row(lr), local_col(lc), row(row), col(col) {}
    CTensor tCcD;  // (CPY, CPY_M, CPY_N, EPI_M, EPI_N): the coordinates from the thread's first element
    Params const* params;
    int fault, local_row, local_col;  // the planned fault and its element relative to the thread's first one
    long long row, col;

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementAccumulator, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const& frg_acc,
                                                                          int epi_v, int epi_m, int epi_n) {
      cutlass::Array<ElementAccumulator, FragmentSize> out = frg_acc;
      if (fault < 0) return out;
      auto c = tCcD(cute::_, cute::_, cute::_, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        auto crd = c(epi_v * FragmentSize + i);
        if (int(cute::get<0>(crd)) != local_row || int(cute::get<1>(crd)) != local_col) continue;
        const ftgen::FaultSpec f = params->faults[fault];
        const float before = static_cast<float>(out[i]);
        const float after = f.kind == ftgen::kOffset ? before + static_cast<float>(f.offset)
                                                     : __uint_as_float(__float_as_uint(before) ^ (1u << (f.bit & 31)));
        if (row < params->m && col < params->n) out[i] = static_cast<ElementAccumulator>(after);
        ftgen::FaultRecord rec;
        rec.applied = 1;
        rec.block = f.block;
        rec.thread = f.thread;
        rec.elem = f.elem;
        rec.step = f.step;
        rec.bit = f.kind == ftgen::kOffset ? -1 : (f.bit & 31);
        rec.before = static_cast<double>(before);
        rec.after = static_cast<double>(after);
        rec.row = row;
        rec.col = col;
        params->records[fault] = rec;
        if (params->counters) atomicAdd(&params->counters->injected, 1ull);
      }
      return out;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(fusion::detail::ConsumerStoreArgs<Args...> const& args) {
    auto [tm, tn, tk, tl] = args.tile_coord_mnkl;
    // tCcD holds coordinates relative to the thread's first element; that element's place in the tile is the
    // difference of the tile's and the thread's residues
    const int off_m = int(cute::get<0>(args.residue_cD)) - int(cute::get<0>(args.residue_tCcD));
    const int off_n = int(cute::get<1>(args.residue_cD)) - int(cute::get<1>(args.residue_tCcD));
    int idx = -1, lr = -1, lc = -1;
    long long row = -1, col = -1;
    if (params.by_tile != nullptr && int(tm) < params.tiles_m && int(tn) < params.tiles_n) {
      idx = params.by_tile[int(tm) * params.tiles_n + int(tn)];
      if (idx >= 0) {
        const ftgen::FaultSpec f = params.faults[idx];
        ftgen_sm90::fault_element(params.geo, f.thread, f.elem, int(tm), int(tn), row, col);
        lr = static_cast<int>(row - static_cast<long long>(tm) * params.geo.tile_m) - off_m;
        lc = static_cast<int>(col - static_cast<long long>(tn) * params.geo.tile_n) - off_n;
      }
    }
    return ConsumerStoreCallbacks<decltype(args.tCcD)>(args.tCcD, &params, idx, lr, lc, row, col);
  }
};

// Per row and CTA tile of columns: the partial row sum of the node's fp32 input, never reduced across tiles; stored at
// [tile column][row] (rows: M rounded up to the tile)
template <class TileShape>
using RowPartial = fusion::Sm90ColReduction<cutlass::plus, cutlass::plus, cutlass::plus, 0, TileShape, float, float, kRound,
                                            cute::Stride<cute::_1, cute::_0, int64_t>, 4, true, /*FinalReduction=*/false>;
// The column weights w_j (a row of the kernel's N floats)
template <class TileShape>
using Weights = fusion::Sm90RowBroadcast<0, TileShape, float, float, cute::Stride<cute::_0, cute::_1, int64_t>>;

// The check's epilogue: 0 the accumulators (Leaf: Sm90AccFetch, or FaultAccFetch in inject builds), 1 alpha, 2 c = alpha
// acc, 3 its row partial P1, 4 w, 5 w c, 6 its row partial PW, 7 |c|, 8 its row partial PA, 9 D = c in the output type
template <class TileShape, class ElementD, class Leaf>
using CheckFusion = fusion::Sm90TopologicalVisitor<
    float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<1, 0>, cute::seq<2>, cute::seq<>, cute::seq<4, 2>, cute::seq<5>, cute::seq<2>,
                       cute::seq<7>, cute::seq<2>>,
    Leaf, fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    Weights<TileShape>, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<AbsFn, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, float, kRound>>;

// The arguments of CheckFusion's nodes (in topological order; nodes without arguments: {})
template <class Fusion, class LeafArgs>
typename Fusion::Arguments check_arguments(LeafArgs const& leaf, float alpha, float* P1, float* PW, float* PA, const float* W,
                                           int64_t parts) {
  return typename Fusion::Arguments{
      leaf,                                         // acc
      {{alpha}},                                    // alpha
      {},                                           // c
      {P1, 0.f, {cute::_1{}, cute::_0{}, parts}},  // P1
      {W, 0.f, {cute::_0{}, cute::_1{}, 0}},        // w
      {},                                           // w c
      {PW, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PW
      {},                                           // |c|
      {PA, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PA
      {}};                                          // D
}

// ---- the encodings of B ---------------------------------------------------------------------------------------------

// The bits of the low part's shift: the 16-bit type's significand (bf16 8, fp16 11)
template <class E>
constexpr int lo_shift() {
  return std::is_same<E, cutlass::half_t>::value ? 11 : 8;
}

struct EncParams {
  const void* B;
  long long ldb;
  int k, n;       // the kernel's K and N (padded extents)
  int cols, strips;
  long long lde;  // E: rows of lde (>= k) elements, K contiguous
  int rows_e;     // E's rows: 4 strips, rounded up (the rest zero)
  float se, sw;   // the power-of-two scales of B e and B w (their 16-bit parts stay in range)
  void* E;        // rows_e x lde of the 16-bit type
  float* W;       // the column weights (n floats)
};

// E[(4 s + {0, 1, 2, 3}) lde + kk] = {hi, lo} of se (B e)_kk and of sw (B w)_kk over strip s; rows past 4 strips and
// columns past k zero; W[j] = j % cols + 1. A thread per (k row, strip): row-major B along the strips, its row's columns
// read 16 bytes at a time (the kernel's B is TMA-aligned); column-major B along k (coalesced), 16 columns' loads in
// flight.
template <class EA, bool kRowB>
__global__ void __launch_bounds__(256) abft16_enc_kernel(EncParams p) {
  const EA* __restrict__ B = static_cast<const EA*>(p.B);
  EA* E = static_cast<EA*>(p.E);
  const long long units = static_cast<long long>(p.lde) * p.strips;
  constexpr float kLo = float(1 << lo_shift<EA>());
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < units; x += 256ll * gridDim.x) {
    const int kk = kRowB ? static_cast<int>(x / p.strips) : static_cast<int>(x % p.lde);
    const int s = kRowB ? static_cast<int>(x % p.strips) : static_cast<int>(x / p.lde);
    float se = 0.f, sw = 0.f;
    if (kk < p.k) {
      const int j0 = s * p.cols, j1 = min(j0 + p.cols, p.n);
      int j = j0;
      if constexpr (kRowB) {
        const EA* row = B + static_cast<long long>(kk) * p.ldb;
        for (; j + 8 <= j1; j += 8) {
          const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + j));
          const EA* e = reinterpret_cast<const EA*>(&v);
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < 8; ++t) {
            const float b = static_cast<float>(e[t]);
            se += b;
            sw = fmaf(static_cast<float>(j - j0 + t + 1), b, sw);
          }
        }
        for (; j < j1; ++j) {
          const float b = static_cast<float>(row[j]);
          se += b;
          sw = fmaf(static_cast<float>(j - j0 + 1), b, sw);
        }
      } else {
#pragma unroll 16
        for (; j < j1; ++j) {
          const float b = static_cast<float>(B[static_cast<long long>(j) * p.ldb + kk]);
          se += b;
          sw = fmaf(static_cast<float>(j - j0 + 1), b, sw);
        }
      }
    }
    const float xe = se * p.se, xw = sw * p.sw;
    const EA he = static_cast<EA>(xe), hw = static_cast<EA>(xw);
    EA* e = E + static_cast<long long>(4 * s) * p.lde + kk;
    e[0] = he;
    e[p.lde] = static_cast<EA>((xe - static_cast<float>(he)) * kLo);
    e[2 * p.lde] = hw;
    e[3 * p.lde] = static_cast<EA>((xw - static_cast<float>(hw)) * kLo);
  }
  const long long pad = static_cast<long long>(p.rows_e - 4 * p.strips) * p.lde;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < pad; x += 256ll * gridDim.x) E[4ll * p.strips * p.lde + x] = static_cast<EA>(0.f);
  for (long long j = blockIdx.x * 256ll + threadIdx.x; j < p.n; j += 256ll * gridDim.x) p.W[j] = static_cast<float>(j % p.cols + 1);
}

// ---- the check and the corrections -----------------------------------------------------------------------------------

struct CheckParams {
  const float *P1, *PW, *PA;  // [strip][row], rows of mpad
  long long mpad;
  const float* R;             // m x ldr: per strip {hi, lo} of r, {hi, lo} of r'
  long long ldr;
  int m, n, k, cols, strips;
  double alpha, unit, fixed, rms_w;
  double inv_se, inv_sw, lo;  // 1 / se, 1 / sw, 2^-kLoShift
  int online, correct;
  int* count;                 // flagged units (then the list: {unit, verdict} pairs)
  int* list;
  ftgen::FtCounters* counters;
};

// A thread per (row, strip) unit, consecutive threads along the rows (the partials' order)
__global__ void __launch_bounds__(256) abft16_check_kernel(CheckParams p) {
  const long long units = static_cast<long long>(p.m) * p.strips;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < units; x += 256ll * gridDim.x) {
    const int i = static_cast<int>(x % p.m), s = static_cast<int>(x / p.m);
    const long long at = static_cast<long long>(s) * p.mpad + i;
    const float* r4 = p.R + static_cast<long long>(i) * p.ldr + 4 * s;
    const double r = (static_cast<double>(r4[0]) + static_cast<double>(r4[1]) * p.lo) * p.inv_se;
    const double rw = (static_cast<double>(r4[2]) + static_cast<double>(r4[3]) * p.lo) * p.inv_sw;
    const int cols = min(p.cols, p.n - s * p.cols);
    double score = 0.0;
    int verdict = ftgen_rules::abft16_unit_verdict(__ldg(p.P1 + at), __ldg(p.PW + at), __ldg(p.PA + at), p.alpha * r, p.alpha * rw,
                                                   p.unit, p.fixed, p.rms_w, cols, &score);
    ftgen::record_score(p.counters, score);
    if (verdict == -1) continue;
    unsigned detected = 0, uncorrectable = 0;
    ftgen_rules::abft_count_row(verdict, p.online, detected, uncorrectable);
    if (p.counters) {
      atomicAdd(&p.counters->detected, static_cast<unsigned long long>(detected));
      if (uncorrectable) atomicAdd(&p.counters->uncorrectable, static_cast<unsigned long long>(uncorrectable));
    }
    if (!p.online) verdict = -2;
    const int slot = atomicAdd(p.count, 1);
    p.list[2 * slot] = static_cast<int>(x);
    p.list[2 * slot + 1] = verdict;
  }
}

template <class EA, class EC>
struct FixParams {
  const EA* A;
  long long lda;
  const EA* B;
  long long ldb;
  EC* D;  // the checked output
  long long ldd;
  int m, n, k, cols;
  double alpha;
  int correct;
  const int* count;
  const int* list;
  ftgen::FtCounters* counters;
};

template <int kT>
__device__ double abft16_block_sum(double v, double* red) {
  CUTLASS_PRAGMA_UNROLL
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0.0;
  CUTLASS_PRAGMA_UNROLL
  for (int w = 0; w < kT / 32; ++w) s += red[w];
  __syncthreads();
  return s;
}

// The flagged units, a block each (grid-stride): a located element recomputed from A's row and B's column in double
// (the threads along k); an unlocated unit's row of the strip recomputed, a warp per column (the lanes along k). A
// grid of early exits when nothing is flagged.
constexpr int kFixThreads = 256;
template <class EA, class EC, bool kRowB>
__global__ void __launch_bounds__(kFixThreads) abft16_fix_kernel(FixParams<EA, EC> p) {
  __shared__ double red[kFixThreads / 32];
  const int flagged = *reinterpret_cast<volatile const int*>(p.count);
  if (!p.correct) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto b_at = [&](int kk, int j) { return ftgen_sm90::wgmma_operand(kRowB ? p.B[static_cast<long long>(kk) * p.ldb + j] : p.B[static_cast<long long>(j) * p.ldb + kk]); };
  for (int x = blockIdx.x; x < flagged; x += gridDim.x) {  // (block-uniform)
    const int unit = __ldcg(p.list + 2 * x), verdict = __ldcg(p.list + 2 * x + 1);
    const int i = unit % p.m, s = unit / p.m, j0 = s * p.cols;
    const EA* a = p.A + static_cast<long long>(i) * p.lda;
    if (verdict >= 0 && j0 + verdict < p.n) {
      const int j = j0 + verdict;
      double v = 0.0;
      for (int kk = threadIdx.x; kk < p.k; kk += kFixThreads) v = fma(ftgen_sm90::wgmma_operand(a[kk]), b_at(kk, j), v);
      v = abft16_block_sum<kFixThreads>(v, red);
      if (threadIdx.x == 0) {
        p.D[static_cast<long long>(i) * p.ldd + j] = static_cast<EC>(static_cast<float>(p.alpha * v));
        if (p.counters) atomicAdd(&p.counters->corrected, 1ull);
      }
    } else {
      const int j1 = min(j0 + p.cols, p.n);
      for (int j = j0 + warp; j < j1; j += kFixThreads / 32) {
        double v = 0.0;
        for (int kk = lane; kk < p.k; kk += 32) v = fma(ftgen_sm90::wgmma_operand(a[kk]), b_at(kk, j), v);
        CUTLASS_PRAGMA_UNROLL
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) p.D[static_cast<long long>(i) * p.ldd + j] = static_cast<EC>(static_cast<float>(p.alpha * v));
      }
      if (threadIdx.x == 0 && p.counters) {
        atomicAdd(&p.counters->recomputed, 1ull);
        atomicAdd(&p.counters->corrected, 1ull);
      }
    }
  }
}

// ---- the side stream ----------------------------------------------------------------------------------------------

// A low-priority stream and two events per device, made once (FTGEN_ABFT_SIDE=serial: everything on the caller's stream)
struct Side {
  cudaStream_t s = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};
inline cudaError_t side_stream(Side*& out) {
  static Side sides[64];
  static const bool serial = [] {
    const char* v = std::getenv("FTGEN_ABFT_SIDE");
    return v != nullptr && std::strcmp(v, "serial") == 0;
  }();
  out = nullptr;
  if (serial) return cudaSuccess;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= 64) return cudaSuccess;
  Side& sd = sides[dev];
  if (sd.s == nullptr) {
    int lo = 0, hi = 0;
    if ((e = cudaDeviceGetStreamPriorityRange(&lo, &hi)) != cudaSuccess) return e;
    if ((e = cudaStreamCreateWithPriority(&sd.s, cudaStreamNonBlocking, lo)) != cudaSuccess) return e;
    if ((e = cudaEventCreateWithFlags(&sd.fork, cudaEventDisableTiming)) != cudaSuccess) return e;
    if ((e = cudaEventCreateWithFlags(&sd.join, cudaEventDisableTiming)) != cudaSuccess) return e;
  }
  out = &sd;
  return cudaSuccess;
}

}  // namespace ftgen_abft16
