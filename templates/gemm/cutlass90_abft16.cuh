// ftgen gemm, cutlass90 backend: threadblock ABFT on the fp32 accumulators for the single-pass precisions (bf16 / fp16:
// 16-bit operands and output; tf32: fp32 operands the wgmma reads as TF32, fp32 output), the check on the accumulators
// before the epilogue writes them. Copied verbatim into every generated project. Do not edit the copies.
//
// The rules are abft_model's (ftgen/families/gemm/abft_model.py, abft16_check):
//
//   epilogue  the variant's sm90 GEMM with an epilogue visitor tree (CheckFusion) that stores, besides D = c in the output
//             type (c = alpha acc, fp32), per row and CTA tile of columns (the checksum strip) the fp32 sums
//             P1 = sum_j c_j, PW = sum_j w_j c_j (w_j = the column's place in its tile + 1) and PA = sum_j |c_j|:
//             three Sm90ColReduction partials that are never reduced across tiles; beta != 0: CheckFusionBeta, whose
//             D = alpha acc + beta C is rounded once (the corrections add beta C as it was before the GEMM)
//   encode    per k row and strip: B e and B w (fp32 sums of B's values as the wgmma reads them), each scaled by a
//             power of two and split into a high and a low part of the operand type (the low part scaled up by
//             2^kLoShift; tf32: both parts rounded to TF32 as the wgmma rounds), the rows of E (abft16_enc_kernel)
//   refs      R = A E on the tensor cores (the variant's A, a stream-K sm90 GEMM into fp32); r and r' of a unit are its
//             high plus its low product, scaled back (the split keeps 16 (bf16) or 22 (fp16, tf32) significant bits:
//             its rounding is far below the threshold). A is rounded by the same wgmma as in the checked GEMM.
//   verify    a thread per (row, strip) unit: d = P1 - alpha r, dw = PW - alpha r' against tau = lambda u (k / kw +
//             cols + 1) max(PA, |alpha r|) (u = 2^-24; kw the wgmma's k: the accumulation is not round to nearest, its
//             error grows with the number of wgmma steps) and tau_w (ftgen_rules::abft16_unit_verdict)
//   locate    only with certainty (|d| > 2 tau_w, j = rint(dw / d) in 1..cols, |dw - j d| <= tau_w); abft_locate:
//             recompute has no weighted sums (SumFusion, E's and R's rows of B w dropped): every detection is unlocated
//   correct   online: the located element recomputed from A's row and B's column in double (the operands as the
//             wgmma reads them), written in the output type; not located (or correct: detect): the unit's row of the
//             strip recomputed (abft16_fix_kernel)
//
// The encodings and the reference GEMM run on a second stream of low priority beside the GEMM; the check after both.
// Inject builds: the epilogue's leaf (FaultAccFetch) flips the planned bit of the planned accumulator (or adds the
// planned offset) as the epilogue reads it, before D and the sums: an upset of the accumulator register after the last
// k-iteration. The element is the fault's (thread, accumulator element) in the wgmma's layout (ftgen_sm90::fault_element).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"

#include "ftgen_sm90.cuh"
#include "ftgen_ft.cuh"
#include "ftgen_rules.h"

// Every generated variant compiles its own copy of what follows; internal linkage keeps the copies of two variants
// apart when both are linked into one library.
namespace ftgen_abft16 {
namespace {

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

// What every leaf of the check's epilogue shares: arguments passed through, no workspace, no loads
template <class Args>
struct LeafNode : ftgen_sm90::PassThrough<Args> {
  struct SharedStorage {};
  using Params = Args;
  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  CUTLASS_HOST_DEVICE LeafNode() : params() {}
  CUTLASS_HOST_DEVICE LeafNode(Params const& p, SharedStorage const&) : params(p) {}
  Params const params;
  template <class... A>
  CUTLASS_DEVICE auto get_producer_load_callbacks(fusion::detail::ProducerLoadArgs<A...> const&) {
    return fusion::detail::EmptyProducerLoadCallbacks{};
  }
};

// The (row, column) of C of every element a thread visits, partitioned as the library's own loads partition their
// tensors: (CPY, CPY_M, CPY_N, EPI_M, EPI_N), element epi_v * FragmentSize + i of (epi_m, epi_n) in visit
template <bool ReferenceSrc, class... A>
CUTLASS_DEVICE auto thread_coords(fusion::detail::ConsumerStoreArgs<A...> const& args) {
  auto [M, N, K, L] = args.problem_shape_mnkl;
  return fusion::detail::sm90_partition_for_epilogue<ReferenceSrc>(cute::make_identity_tensor(cute::make_shape(M, N, L)), args.tile_shape_mnk,
                                                                   args.tile_coord_mnkl, args.epi_tile, args.tiled_copy, args.thread_idx);
}

// The column weights w_j = j + 1 of a column's place j in the tile (the checksum strip), from the coordinates
struct ColumnWeights : LeafNode<fusion::Sm90VisitorImpl<>::Arguments> {
  using LeafNode::LeafNode;
  template <class CTensor>
  struct ConsumerStoreCallbacks : fusion::detail::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, int c0) : tCc(c), col0(c0) {}
    CTensor tCc;  // the columns of C
    int col0;     // the tile's first column, less 1
    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int epi_m,
                                                             int epi_n) {
      cutlass::Array<float, FragmentSize> w;
      auto c = tCc(cute::_, cute::_, cute::_, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) w[i] = static_cast<float>(int(cute::get<1>(c(epi_v * FragmentSize + i))) - col0);
      return w;
    }
  };
  template <bool ReferenceSrc, class... A>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(fusion::detail::ConsumerStoreArgs<A...> const& args) {
    auto tCc = thread_coords<ReferenceSrc>(args);
    const int col0 = int(cute::get<1>(args.tile_coord_mnkl)) * int(cute::size<1>(args.tile_shape_mnk)) - 1;
    return ConsumerStoreCallbacks<decltype(tCc)>(tCc, col0);
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

// The planned fault `fault` applied to the value `before` of C's element (row, col) and recorded: the value the
// epilogue goes on with (unchanged outside C: a partial tile's padding). Out of line, scalars in and out, so that the
// fault's code appears once in the kernel instead of once per element of every unrolled epilogue subtile (cold code
// that the hot epilogue would otherwise jump across).
// (Everything by value: a pointer to the epilogue's arguments would put them in local memory for the whole kernel.)
__device__ __noinline__ float apply_planned(const ftgen::FaultSpec* faults, ftgen::FaultRecord* records, ftgen::FtCounters* counters, int m, int n,
                                            int fault, float before, long long row, long long col) {
  const ftgen::FaultSpec f = faults[fault];
  const float after = f.kind == ftgen::kOffset ? before + static_cast<float>(f.offset) : __uint_as_float(__float_as_uint(before) ^ (1u << (f.bit & 31)));
  ftgen::record_fault(records + fault, counters, f.block, f.thread, f.elem, f.step, f.kind == ftgen::kOffset ? -1 : (f.bit & 31),
                      static_cast<double>(before), static_cast<double>(after), row, col);
  return row < m && col < n ? after : before;
}

// The epilogue's leaf in inject builds: the accumulators, the planned fault applied to its element as the epilogue reads
// it (found by comparisons, read and written back by selects, applied by apply_planned). A fault outside C (a partial
// tile's padding) is recorded as applied and changes nothing.
struct FaultAccFetch : LeafNode<FaultArgs> {
  using LeafNode::LeafNode;

  template <class CTensor>
  struct ConsumerStoreCallbacks : fusion::detail::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, Params const* p, int idx, long long row, long long col)
        : tCc(c), params(p), fault(idx), row(row), col(col) {}
    CTensor tCc;  // the (row, column) of C of each element
    Params const* params;
    int fault;  // the planned fault (-1: none in this tile)
    long long row, col;  // its element

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementAccumulator, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const& frg_acc,
                                                                          int epi_v, int epi_m, int epi_n) {
      cutlass::Array<ElementAccumulator, FragmentSize> out = frg_acc;
      if (fault < 0) return out;
      auto c = tCc(cute::_, cute::_, cute::_, epi_m, epi_n);
      int hit = -1;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        auto crd = c(epi_v * FragmentSize + i);
        if (static_cast<long long>(cute::get<0>(crd)) == row && static_cast<long long>(cute::get<1>(crd)) == col) hit = i;
      }
      if (hit < 0) return out;
      float before = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) before = i == hit ? static_cast<float>(out[i]) : before;
      const auto after = static_cast<ElementAccumulator>(apply_planned(params->faults, params->records, params->counters, params->m, params->n, fault, before, row, col));
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) out[i] = i == hit ? after : out[i];
      return out;
    }
  };

  template <bool ReferenceSrc, class... A>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(fusion::detail::ConsumerStoreArgs<A...> const& args) {
    auto [tm, tn, tk, tl] = args.tile_coord_mnkl;
    int idx = -1;
    long long row = -1, col = -1;
    if (params.by_tile != nullptr && int(tm) < params.tiles_m && int(tn) < params.tiles_n) {
      idx = params.by_tile[int(tm) * params.tiles_n + int(tn)];
      if (idx >= 0) {
        const ftgen::FaultSpec f = params.faults[idx];
        ftgen_sm90::fault_element(params.geo, f.thread, f.elem, int(tm), int(tn), row, col);
      }
    }
    auto tCc = thread_coords<ReferenceSrc>(args);
    return ConsumerStoreCallbacks<decltype(tCc)>(tCc, &params, idx, row, col);
  }
};

// Per row and CTA tile of columns: the partial row sum of the node's fp32 input, never reduced across tiles; stored at
// [tile column][row] (rows: M rounded up to the tile). No null pointer is passed, and no per-element bounds check: the
// accumulators outside C are exact zeros (TMA fills the operands' out-of-bounds parts, and the padded copies, with
// zeros; a fault outside C changes nothing), the identity of the sums
template <class TileShape>
using RowPartial = fusion::Sm90ColReduction<cutlass::plus, cutlass::plus, cutlass::plus, 0, TileShape, float, float, kRound,
                                            cute::Stride<cute::_1, cute::_0, int64_t>, 4, /*EnableNullptr=*/false,
                                            /*FinalReduction=*/false, /*VisitCheckOOB=*/false>;

// The check's epilogue: 0 the accumulators (Leaf: Sm90AccFetch, or FaultAccFetch in inject builds), 1 alpha, 2 c = alpha
// acc, 3 its row partial P1, 4 w, 5 w c, 6 its row partial PW, 7 |c|, 8 its row partial PA, 9 D = c in the output type
template <class TileShape, class ElementD, class Leaf>
using CheckFusion = fusion::Sm90TopologicalVisitor<
    float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<1, 0>, cute::seq<2>, cute::seq<>, cute::seq<4, 2>, cute::seq<5>, cute::seq<2>,
                       cute::seq<7>, cute::seq<2>>,
    Leaf, fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    ColumnWeights, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<AbsFn, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, float, kRound>>;

// beta != 0: the same, and 9 C (the epilogue's source), 10 beta, 11 D = beta C + c in the output type (one rounding)
template <class TileShape, class ElementD, class ElementC, class Leaf>
using CheckFusionBeta = fusion::Sm90TopologicalVisitor<
    float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<1, 0>, cute::seq<2>, cute::seq<>, cute::seq<4, 2>, cute::seq<5>, cute::seq<2>,
                       cute::seq<7>, cute::seq<>, cute::seq<>, cute::seq<10, 9, 2>>,
    Leaf, fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    ColumnWeights, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<AbsFn, float, float, kRound>, RowPartial<TileShape>, fusion::Sm90SrcFetch<ElementC>,
    fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, float, kRound>>;

// abft_locate: recompute: the unweighted sums only: 0 the accumulators, 1 alpha, 2 c = alpha acc, 3 its row partial P1,
// 4 |c|, 5 its row partial PA, 6 D = c in the output type
template <class TileShape, class ElementD, class Leaf>
using SumFusion = fusion::Sm90TopologicalVisitor<
    float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<1, 0>, cute::seq<2>, cute::seq<2>, cute::seq<4>, cute::seq<2>>, Leaf,
    fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<AbsFn, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<cutlass::epilogue::thread::Identity, ElementD, float, kRound>>;

// ... beta != 0: 6 C, 7 beta, 8 D = beta C + c in the output type (one rounding)
template <class TileShape, class ElementD, class ElementC, class Leaf>
using SumFusionBeta = fusion::Sm90TopologicalVisitor<
    float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<1, 0>, cute::seq<2>, cute::seq<2>, cute::seq<4>, cute::seq<>, cute::seq<>,
                       cute::seq<7, 6, 2>>,
    Leaf, fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>, RowPartial<TileShape>,
    fusion::Sm90Compute<AbsFn, float, float, kRound>, RowPartial<TileShape>, fusion::Sm90SrcFetch<ElementC>,
    fusion::Sm90ScalarBroadcast<float>, fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, float, kRound>>;

// The arguments of CheckFusion's nodes (in topological order; nodes without arguments: {})
template <class Fusion, class LeafArgs>
typename Fusion::Arguments check_arguments(LeafArgs const& leaf, float alpha, float* P1, float* PW, float* PA, int64_t parts) {
  return typename Fusion::Arguments{
      leaf,                                         // acc
      {{alpha}},                                    // alpha
      {},                                           // c
      {P1, 0.f, {cute::_1{}, cute::_0{}, parts}},  // P1
      {},                                           // w
      {},                                           // w c
      {PW, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PW
      {},                                           // |c|
      {PA, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PA
      {}};                                          // D
}
// ... and CheckFusionBeta's
template <class Fusion, class LeafArgs>
typename Fusion::Arguments check_arguments_beta(LeafArgs const& leaf, float alpha, float beta, float* P1, float* PW, float* PA,
                                                int64_t parts) {
  return typename Fusion::Arguments{
      leaf,                                         // acc
      {{alpha}},                                    // alpha
      {},                                           // c
      {P1, 0.f, {cute::_1{}, cute::_0{}, parts}},  // P1
      {},                                           // w
      {},                                           // w c
      {PW, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PW
      {},                                           // |c|
      {PA, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PA
      {},                                           // C
      {{beta}},                                     // beta
      {}};                                          // D
}

// ... and SumFusion's
template <class Fusion, class LeafArgs>
typename Fusion::Arguments sum_arguments(LeafArgs const& leaf, float alpha, float* P1, float* PA, int64_t parts) {
  return typename Fusion::Arguments{
      leaf,                                         // acc
      {{alpha}},                                    // alpha
      {},                                           // c
      {P1, 0.f, {cute::_1{}, cute::_0{}, parts}},  // P1
      {},                                           // |c|
      {PA, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PA
      {}};                                          // D
}
// ... and SumFusionBeta's
template <class Fusion, class LeafArgs>
typename Fusion::Arguments sum_arguments_beta(LeafArgs const& leaf, float alpha, float beta, float* P1, float* PA,
                                              int64_t parts) {
  return typename Fusion::Arguments{
      leaf,                                         // acc
      {{alpha}},                                    // alpha
      {},                                           // c
      {P1, 0.f, {cute::_1{}, cute::_0{}, parts}},  // P1
      {},                                           // |c|
      {PA, 0.f, {cute::_1{}, cute::_0{}, parts}},  // PA
      {},                                           // C
      {{beta}},                                     // beta
      {}};                                          // D
}

// ---- the encodings of B ---------------------------------------------------------------------------------------------

// The bits of the low part's shift: the operand type's significand (bf16 8, fp16 11, tf32 (fp32 storage) 11)
template <class E>
constexpr int lo_shift() {
  return std::is_same<E, cutlass::bfloat16_t>::value ? 8 : 11;
}

// An operand's value as the wgmma reads it (tf32: the fp32 word rounded to TF32), and a value written as an operand
// (tf32: rounded to TF32, so that the wgmma reads it unchanged)
template <class EA>
__device__ __forceinline__ float operand_value(EA x) {
  return static_cast<float>(ftgen_sm90::wgmma_operand(x));
}
template <class EA>
__device__ __forceinline__ EA to_operand(float x) {
  if constexpr (std::is_same<EA, float>::value) return operand_value(x);
  else return static_cast<EA>(x);
}

struct EncParams {
  const void* B;
  long long ldb;
  int n;          // the kernel's N (its padded extent)
  int cols, strips;
  long long lde;  // E: rows of lde (>= k) elements, K contiguous
  int rows_e;     // E's rows: 4 strips, rounded up (the rest zero)
  float se, sw;   // the power-of-two scales of B e and B w (their 16-bit parts stay in range)
  void* E;        // rows_e x lde of the operand type
};

// One k row's split sums into E: hi and lo of se (B e)_kk, and (kRows 4: abft_locate weighted) of sw (B w)_kk
template <int kRows, class EA>
__device__ __forceinline__ void abft16_store_enc(EA* E, long long lde, int s, int kk, float se, float sw, float scale_e, float scale_w) {
  constexpr float kLo = float(1 << lo_shift<EA>());
  const float xe = se * scale_e;
  const EA he = to_operand<EA>(xe);
  EA* e = E + static_cast<long long>(kRows * s) * lde + kk;
  e[0] = he;
  e[lde] = to_operand<EA>((xe - static_cast<float>(he)) * kLo);
  if constexpr (kRows == 4) {
    const float xw = sw * scale_w;
    const EA hw = to_operand<EA>(xw);
    e[2 * lde] = hw;
    e[3 * lde] = to_operand<EA>((xw - static_cast<float>(hw)) * kLo);
  }
}

// E[(kEncRows s + {0, 1, 2, 3}) lde + kk] = {hi, lo} of se (B e)_kk and (kEncRows 4) of sw (B w)_kk over strip s; rows
// past kEncRows strips zero.
// The kernel's B is TMA-aligned (16-byte rows, lde = k a multiple of kV = 16 bytes of elements), so every load is 16
// bytes. Row-major B: a block per k row, its threads along the row (the chunks' sums added per strip in shared memory,
// each strip's in column order). Column-major B: a block per
// (32 kV k rows, strip), a warp per group of columns (every 8th), its lanes along k, kV k rows each; the groups' sums
// added in shared memory.
template <class EA, bool kRowB, int kEncRows>
__global__ void __launch_bounds__(256) abft16_enc_kernel(EncParams p) {
  const EA* __restrict__ B = static_cast<const EA*>(p.B);
  EA* E = static_cast<EA*>(p.E);
  constexpr int kV = 16 / int(sizeof(EA));  // 16-byte vectors
  if constexpr (kRowB) {
    // a block per k row (grid-stride), its threads along the row 16 bytes each (coalesced), in segments of kSeg chunks:
    // each thread's chunk sums into shared memory, then a thread per strip of the segment adds its chunks in order
    constexpr int kSeg = 2048;  // chunks of shared memory
    __shared__ float part[2][kSeg];
    const int cpr = (p.n + kV - 1) / kV, cps = p.cols / kV;  // chunks per row, per strip (cols: a multiple of 16)
    const int segc = kSeg / cps * cps;                        // chunks of a segment: whole strips
    for (long long kk = blockIdx.x; kk < p.lde; kk += gridDim.x) {  // (block-uniform)
      const EA* row = B + kk * p.ldb;
      for (int c0 = 0; c0 < cpr; c0 += segc) {
        const int seg = min(segc, cpr - c0);
        for (int c = threadIdx.x; c < seg; c += 256) {
          const int j = (c0 + c) * kV;
          const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + j));
          const EA* e = reinterpret_cast<const EA*>(&v);
          const int place = j % p.cols + 1;
          float se = 0.f, sw = 0.f;
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kV; ++t) {
            const float b = j + t < p.n ? operand_value(e[t]) : 0.f;
            se += b;
            sw = fmaf(static_cast<float>(place + t), b, sw);
          }
          part[0][c] = se;
          if constexpr (kEncRows == 4) part[1][c] = sw;
        }
        __syncthreads();
        for (int q = threadIdx.x; q * cps < seg; q += 256) {
          float se = 0.f, sw = 0.f;
          for (int c = q * cps; c < min(seg, (q + 1) * cps); ++c) {
            se += part[0][c];
            if constexpr (kEncRows == 4) sw += part[1][c];
          }
          abft16_store_enc<kEncRows>(E, p.lde, (c0 / cps) + q, static_cast<int>(kk), se, sw, p.se, p.sw);
        }
        __syncthreads();  // (part is the next segment's)
      }
    }
  } else {
    constexpr int kGroups = 8, kRows = 32 * kV;  // warps (column groups), k rows per block
    __shared__ float part[2][kGroups][kRows];
    const int lane = threadIdx.x % 32, g = threadIdx.x / 32;
    const long long chunks = (p.lde + kRows - 1) / kRows;
    for (long long x = blockIdx.x; x < chunks * p.strips; x += gridDim.x) {  // (block-uniform)
      const int s = static_cast<int>(x / chunks);
      const long long base = (x % chunks) * kRows, kk0 = base + lane * kV;
      const int j0 = s * p.cols, j1 = min(j0 + p.cols, p.n);
      float se[kV] = {}, sw[kV] = {};
      if (kk0 < p.lde) {
#pragma unroll 4
        for (int j = j0 + g; j < j1; j += kGroups) {
          const uint4 v = __ldg(reinterpret_cast<const uint4*>(B + static_cast<long long>(j) * p.ldb + kk0));
          const EA* e = reinterpret_cast<const EA*>(&v);
          const float w = static_cast<float>(j - j0 + 1);
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < kV; ++t) {
            const float b = operand_value(e[t]);
            se[t] += b;
            sw[t] = fmaf(w, b, sw[t]);
          }
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kV; ++t) {
        part[0][g][lane * kV + t] = se[t];
        if constexpr (kEncRows == 4) part[1][g][lane * kV + t] = sw[t];
      }
      __syncthreads();
      for (int t = threadIdx.x; t < kRows; t += 256) {  // (kRows: 256 for 16-bit B, 128 for tf32)
        const long long kk = base + t;
        float e = 0.f, w = 0.f;
        CUTLASS_PRAGMA_UNROLL
        for (int q = 0; q < kGroups; ++q) {
          e += part[0][q][t];
          if constexpr (kEncRows == 4) w += part[1][q][t];
        }
        if (kk < p.lde) abft16_store_enc<kEncRows>(E, p.lde, s, static_cast<int>(kk), e, w, p.se, p.sw);
      }
      __syncthreads();  // (part is the next item's)
    }
  }
  const long long pad = static_cast<long long>(p.rows_e - kEncRows * p.strips) * p.lde;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < pad; x += 256ll * gridDim.x)
    E[static_cast<long long>(kEncRows) * p.strips * p.lde + x] = static_cast<EA>(0.f);
}

// abft16_enc_kernel's grid (grid-stride, at most 8 blocks per SM): row-major B a block per k row, column-major B a block
// per 256 (k row, strip) units
inline long long enc_blocks(bool row_b, long long k, int strips, int sms) {
  const long long items = row_b ? k : (k * strips + 255) / 256;
  return std::max(1ll, std::min(items, 8ll * sms));
}

// ---- the check and the corrections -----------------------------------------------------------------------------------

struct CheckParams {
  const float *P1, *PW, *PA;  // [strip][row], rows of mpad (PW: null where abft_locate is recompute)
  long long mpad;
  const float* R;             // m x ldr: per strip {hi, lo} of r, and where PW is given {hi, lo} of r'
  long long ldr;
  int m, n, cols, strips;
  double alpha, unit, fixed, rms_w;
  double inv_se, inv_sw, lo;  // 1 / se, 1 / sw, 2^-kLoShift
  int online, correct;
  int* count;                 // flagged units (then the list: {unit, verdict} pairs)
  int* list;
  ftgen::FtCounters* counters;
};

// A thread per (row, strip) unit, consecutive threads along the rows (the partials' order); the block's largest score
// recorded once
__global__ void __launch_bounds__(256) abft16_check_kernel(CheckParams p) {
  __shared__ double best[8];
  const long long units = static_cast<long long>(p.m) * p.strips;
  double top = 0.0;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < units; x += 256ll * gridDim.x) {
    const int i = static_cast<int>(x % p.m), s = static_cast<int>(x / p.m);
    const long long at = static_cast<long long>(s) * p.mpad + i;
    // without the weighted sums (abft_locate: recompute) the weighted residual and its reference are zero: the verdict
    // is the unweighted residual's, and a detection is not located
    const bool weighted = p.PW != nullptr;
    const float* r4 = p.R + static_cast<long long>(i) * p.ldr + (weighted ? 4 : 2) * s;
    const double r = (static_cast<double>(r4[0]) + static_cast<double>(r4[1]) * p.lo) * p.inv_se;
    const double rw = weighted ? (static_cast<double>(r4[2]) + static_cast<double>(r4[3]) * p.lo) * p.inv_sw : 0.0;
    const int cols = min(p.cols, p.n - s * p.cols);
    double score = 0.0;
    int verdict = ftgen_rules::abft16_unit_verdict(__ldg(p.P1 + at), weighted ? __ldg(p.PW + at) : 0.f, __ldg(p.PA + at), p.alpha * r,
                                                   p.alpha * rw, p.unit, p.fixed, p.rms_w, cols, &score);
    top = fmax(top, score);
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
  CUTLASS_PRAGMA_UNROLL
  for (int o = 16; o > 0; o >>= 1) top = fmax(top, __shfl_xor_sync(0xffffffffu, top, o));
  if (threadIdx.x % 32 == 0) best[threadIdx.x / 32] = top;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < 8; ++w) top = fmax(top, best[w]);
    ftgen::record_score(p.counters, top);
  }
}

template <class EA, class EC>
struct FixParams {
  const EA* A;  // A and B as the GEMM reads them (16-byte aligned rows and columns)
  long long lda;
  const EA* B;
  long long ldb;
  EC* D;  // the checked output
  long long ldd;
  const EC* Cs;  // beta != 0: C as it was before the GEMM (D = alpha A B + beta C)
  long long ldcs;
  float beta;
  int m, n, k, cols;
  double alpha;
  int correct;
  const int* count;
  const int* list;
  ftgen::FtCounters* counters;
};

// The flagged units' corrections, grid-stride over the list, block-uniform branches, in double from the operands as the
// wgmma reads them, alpha times the dot plus beta C (fp32 fma, one rounding, as the epilogue):
// - a located unit: one block per unit, its 1024 threads along k (a block reduction), the element corrected in place;
// - an unlocated unit (or correct: detect): its row of the strip, a block per group of columns (B row-major: 32, the
//   lanes along the columns, the warps split k; column-major: 8, each split along k over 4 warps whose lanes read
//   16-byte chunks: more loads in flight than a warp per column, whose chain of dependent loads set the time).
// A grid of early exits when nothing is flagged.
constexpr int kFixThreads = 1024;  // (launch bounds with one block per SM: without it ptxas caps 32 registers and spills)
// The sum over kk = first, first + stride, ... < k of a(kk) b(kk) in double, in that order, with kBatch loads of each
// operand issued before their products: a correction's time is the loads' latency, not the chain of fmas
template <class EA, class FA, class FB>
__device__ __forceinline__ double abft16_ordered_dot(long long first, long long stride, long long k, FA a, FB b) {
  constexpr int kBatch = 16;
  double v = 0.0;
  long long kk = first;
  for (; kk + (kBatch - 1) * stride < k; kk += kBatch * stride) {
    EA x[kBatch], y[kBatch];
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kBatch; ++u) x[u] = a(kk + u * stride), y[u] = b(kk + u * stride);
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kBatch; ++u) v = fma(ftgen_sm90::wgmma_operand(x[u]), ftgen_sm90::wgmma_operand(y[u]), v);
  }
  for (; kk < k; kk += stride) v = fma(ftgen_sm90::wgmma_operand(a(kk)), ftgen_sm90::wgmma_operand(b(kk)), v);
  return v;
}
// The same over two contiguous vectors a[0, k) and b[0, k) in 16-byte chunks: chunk first, first + stride, ..., kBatch
// chunks of each in flight. The operands as the GEMM reads them: 16-byte aligned, and k a multiple of the chunk or the
// copies zero-padded past k (kernel_shape, operands), so a last partial chunk is in bounds
template <class EA>
__device__ __forceinline__ double abft16_contiguous_dot(const EA* a, const EA* b, long long k, long long first, long long stride) {
  constexpr int kVec = 16 / sizeof(EA), kBatch = 2;
  const long long chunks = (k + kVec - 1) / kVec;
  double v = 0.0;
  for (long long c0 = first; c0 < chunks; c0 += kBatch * stride) {
    uint4 x[kBatch], y[kBatch];
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const long long c = c0 + u * stride;
      x[u] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(a) + c) : make_uint4(0u, 0u, 0u, 0u);
      y[u] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(b) + c) : make_uint4(0u, 0u, 0u, 0u);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const EA* xe = reinterpret_cast<const EA*>(&x[u]);
      const EA* ye = reinterpret_cast<const EA*>(&y[u]);
      const long long e0 = (c0 + u * stride) * kVec;
      CUTLASS_PRAGMA_UNROLL
      for (int t = 0; t < kVec; ++t)  // (past k the operands hold zeros; the bound keeps ptxas from spilling under 64 registers)
        if (e0 + t < k) v = fma(ftgen_sm90::wgmma_operand(xe[t]), ftgen_sm90::wgmma_operand(ye[t]), v);
    }
  }
  return v;
}
// A's row i times B's column j, the sum split over the warp's lanes (first, stride: the lane's chunks or elements)
// and added over them; B column-major: 16-byte chunks
template <class EA, class EC, bool kRowB>
__device__ __forceinline__ double abft16_dot(const FixParams<EA, EC>& p, int i, int j, int first, int stride) {
  const EA* a = p.A + static_cast<long long>(i) * p.lda;
  double v;
  if constexpr (kRowB) {
    const EA* b = p.B + j;
    v = abft16_ordered_dot<EA>(first, stride, p.k, [&](long long kk) { return a[kk]; }, [&](long long kk) { return b[kk * p.ldb]; });
  } else {
    v = abft16_contiguous_dot(a, p.B + static_cast<long long>(j) * p.ldb, p.k, first, stride);
  }
  CUTLASS_PRAGMA_UNROLL
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class EA, class EC>
__device__ __forceinline__ void abft16_store(const FixParams<EA, EC>& p, int i, int j, double v) {
  float out = static_cast<float>(p.alpha * v);
  if (p.beta != 0.f) out = fmaf(p.beta, static_cast<float>(p.Cs[static_cast<long long>(i) * p.ldcs + j]), out);
  p.D[static_cast<long long>(i) * p.ldd + j] = static_cast<EC>(out);
}
template <class EA, class EC, bool kRowB>
__global__ void __launch_bounds__(kFixThreads, 1) abft16_fix_kernel(FixParams<EA, EC> p) {
  __shared__ double part[kFixThreads / 32];
  __shared__ double dots[kFixThreads / 32][32];
  const int flagged = *reinterpret_cast<volatile const int*>(p.count);
  if (!p.correct) return;
  constexpr int kGroupCols = kRowB ? 32 : 8;  // an unlocated unit's columns an item
  const int groups = (p.cols + kGroupCols - 1) / kGroupCols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (long long x = blockIdx.x; x < static_cast<long long>(flagged) * groups; x += gridDim.x) {  // (block-uniform)
    const int item = static_cast<int>(x / groups), g = static_cast<int>(x % groups);
    const int unit = __ldcg(p.list + 2 * item), verdict = __ldcg(p.list + 2 * item + 1);
    const int i = unit % p.m, j0 = (unit / p.m) * p.cols;
    if (verdict >= 0 && j0 + verdict < p.n) {  // located: the item's first block only
      if (g != 0) continue;
      const double v = abft16_dot<EA, EC, kRowB>(p, i, j0 + verdict, threadIdx.x, kFixThreads);
      if (lane == 0) part[warp] = v;
      __syncthreads();
      if (warp == 0) {
        double t = lane < kFixThreads / 32 ? part[lane] : 0.0;
        CUTLASS_PRAGMA_UNROLL
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
        if (lane == 0) {
          abft16_store(p, i, j0 + verdict, t);
          if (p.counters) atomicAdd(&p.counters->corrected, 1ull);
        }
      }
      __syncthreads();  // (part is the next item's)
      continue;
    }
    if (p.counters && g == 0 && threadIdx.x == 0) {  // a unit counted once
      atomicAdd(&p.counters->corrected, 1ull);
      atomicAdd(&p.counters->recomputed, 1ull);
    }
    if constexpr (kRowB) {
      // B row-major: the lanes along the group's 32 columns (coalesced rows of B), the warps split k; the warps'
      // partial dots added in warp order
      const int j = j0 + g * 32 + lane;
      const bool mine = g * 32 + lane < p.cols && j < p.n;
      const EA* a = p.A + static_cast<long long>(i) * p.lda;
      const EA* b = p.B + j;
      const double v = mine ? abft16_ordered_dot<EA>(warp, kFixThreads / 32, p.k, [&](long long kk) { return a[kk]; },
                                                     [&](long long kk) { return b[kk * p.ldb]; })
                            : 0.0;
      dots[warp][lane] = v;
      __syncthreads();
      if (warp == 0 && mine) {
        double t = 0.0;
        for (int w = 0; w < kFixThreads / 32; ++w) t += dots[w][lane];
        abft16_store(p, i, j, t);
      }
      __syncthreads();  // (dots is the next item's)
    } else {
      // B column-major: each column of the group split along k over kSlices warps (the lanes in 16-byte chunks, the
      // slices interleaved), the slices' partial dots added in slice order
      constexpr int kSlices = kFixThreads / 32 / kGroupCols;
      const int c = warp % kGroupCols, slice = warp / kGroupCols;
      const int j = j0 + g * kGroupCols + c;
      const bool mine = g * kGroupCols + c < p.cols && j < p.n;
      const double v = mine ? abft16_dot<EA, EC, kRowB>(p, i, j, slice * 32 + lane, 32 * kSlices) : 0.0;
      if (lane == 0) dots[slice][c] = v;
      __syncthreads();
      const int jl = j0 + g * kGroupCols + lane;  // (warp 0: lane l adds column l's slices)
      if (warp == 0 && lane < kGroupCols && g * kGroupCols + lane < p.cols && jl < p.n) {
        double t = 0.0;
        for (int w = 0; w < kSlices; ++w) t += dots[w][lane];
        abft16_store(p, i, jl, t);
      }
      __syncthreads();  // (dots is the next item's)
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

// FTGEN_ABFT16_SIDE_SMS (read once; a calibration knob): SMs left to the side work while the checked GEMM runs, where
// the GEMM's tiles take as many waves on the rest (rounded to whole clusters); 0 where they would not
inline int reserved_sms(int sms, long long tiles, int cluster) {
  static const int want = [] {
    const char* v = std::getenv("FTGEN_ABFT16_SIDE_SMS");
    const int x = v != nullptr ? std::atoi(v) : 0;
    return x > 0 && x < 64 ? x : 0;
  }();
  if (want == 0 || cluster < 1) return 0;
  const int r = (want + cluster - 1) / cluster * cluster;
  const int rest = (sms - r) / cluster * cluster, all = sms / cluster * cluster;
  if (rest <= 0) return 0;
  return (tiles + rest - 1) / rest == (tiles + all - 1) / all ? r : 0;
}

}  // namespace
}  // namespace ftgen_abft16
