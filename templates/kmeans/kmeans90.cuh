// ftgen kmeans, sm90: the assign step as a CUTLASS 3.x GEMM (TMA loads, wgmma TF32, warp-specialized) whose epilogue
// takes the arg-min on the accumulator registers: per element d' = ||c_j||^2 - 2 x_i . c_j, the smallest per row of the
// CTA tile with its column (the lower index on a tie), stored as one 64-bit key per (row, tile of centroids) -- the
// distance's order-preserving bits above, the column below. No distance is written. A finishing kernel takes each row's
// smallest key over the tiles: its label, and the inertia's term max(d' + ||x_i||^2, 0).
// Protected (the threadblock ABFT, the model kmeans model.assign90): the GEMM's B is the packed centroid tiles, each
// followed by its encodings, so the epilogue holds the reference checksums beside the accumulators and checks every row
// before a row's minimum leaves the thread (ArgMinDirect<8>); a fix kernel recomputes what the check could not correct
// in place.
// Near ties refined (kTop2, the tf32 refine option, model.refine_assign): the epilogue keeps each row's two nearest per
// tile (a second key per (row, tile)), the finishing kernel its two nearest over the tiles, and a row whose two are
// closer than their error bounds takes the nearer of them by exact distances (ftgen_kmeans_refine.cuh).
// Copied verbatim into every generated project. Do not edit the copies.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "ftgen_ft.cuh"
#include "ftgen_kmeans_refine.cuh"
#include "ftgen_rules.h"
#include "ftgen_sm90.cuh"

namespace ftgen_km90 {

namespace fusion = cutlass::epilogue::fusion;
using ftkm_refine::block_sum;
using ftkm_refine::near_gap;
using ftkm_refine::Refine;

// The order-preserving 32-bit image of a float (negative values reversed below the positive ones), and back
__host__ __device__ inline uint32_t ordered(float d) {
  uint32_t u;
  memcpy(&u, &d, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__host__ __device__ inline float unordered(uint32_t o) {
  const uint32_t u = (o & 0x80000000u) ? (o & 0x7fffffffu) : ~o;
  float d;
  memcpy(&d, &u, 4);
  return d;
}
// The arg-min and the check's row sums run as independent chains per row held: 2 x kChainGroups of them (the column's
// parity and its 8-column group's index mod kChainGroups), so that consecutive steps do not wait on each other
constexpr int kChainGroups = 2;
// The checked tf32x3 kernels' chain groups (the epilogue's argument kChains). Beside the split mainloop's registers,
// ptxas compiled the checked pass with four chains a row by keeping each chain's index as bit flags in one register
// (two LOP3 a step instead of a SEL, and the flags decoded after the pass: 776 instructions against 411 with two chains
// a row at 128x160, cuobjdump); the tf32 kernels and the unprotected tf32x3 twin keep a SEL a step with four.
constexpr int kSplitChainGroups = 1;
// ... and their check's sums in four chains a row (the epilogue's argument kSumParts; 0: one per arg-min chain), so that
// the sums' additions, which ptxas issues as a block before the compare-and-select chains, are four-deep a step
constexpr int kSplitSumParts = 4;
constexpr uint64_t kNoKey = ~0ull;  // a column past the last centroid: never the nearest
// (d + 0: -0 becomes +0, the two equal distances one key)
__host__ __device__ inline uint64_t key(float d, int col) { return (static_cast<uint64_t>(ordered(d + 0.f)) << 32) | static_cast<uint32_t>(col); }
// The two smallest of {a1 <= a2} and {b1 <= b2}, in place into (a1, a2) (keys are distinct: the column is in them)
__host__ __device__ inline void merge2(uint64_t& a1, uint64_t& a2, uint64_t b1, uint64_t b2) {
  const uint64_t hi = a1 > b1 ? a1 : b1;
  a1 = a1 < b1 ? a1 : b1;
  const uint64_t lo2 = a2 < b2 ? a2 : b2;
  a2 = hi < lo2 ? hi : lo2;
}

// The check's rare path and the faults of inject builds
struct CheckArgs {
  double unit = 0;            // the threshold unit: lambda u (ceil(dims / 8) + centroids per tile + 1), or the spec's number
  double rms_w = 1;           // the rms of the weights 1..centroids per tile (a full tile's)
  double inv_se = 1, inv_sw = 1;  // 1 / the encodings' power-of-two scales
  const float* xx = nullptr;      // ||x_i||^2, samples of them (the first stage's scale)
  const float* tile_nc = nullptr; // per tile of centroids: the sum of their norms ||c_j|| (pack_kernel)
  int samples = 0;
  int online = 1;             // a located element corrected in place (else every detection recomputed)
  int no_correct = 0;         // the campaigns' uncorrected run: detect and count, change nothing
  int* flag_count = nullptr;  // (row, tile) units to recompute before the minimum over the tiles (fix_units)
  int2* flags = nullptr;
  int flag_capacity = 0;
  ftgen::FtCounters* counters = nullptr;
  // inject builds: the planned faults of the accumulator site, applied in the first iteration
  const int* iter = nullptr;  // the loop's iteration counter (faults when 0)
  int site_acc = 0;           // the launch's site is the accumulators
  const ftgen::FaultSpec* faults = nullptr;
  ftgen::FaultRecord* records = nullptr;
  int fault_count = 0;
};

struct ArgMinArgs {
  const float* cc = nullptr;  // ||c_j||^2, clusters of them
  int clusters = 0;
  uint64_t* keys = nullptr;   // the per-tile minima: (rows padded to the tile) x (tiles of centroids), m-major
  long long rows_padded = 0;
  CheckArgs check{};          // (kEnc > 0)
  uint64_t* keys2 = nullptr;  // (kTop2) the per-tile second smallest, as keys
};

// The arg-min as an operator-style epilogue (CUTLASS's Sm90TmaWarpSpecializedAdapter, no shared memory, no visitor
// tree; 10-12% faster than the same arg-min as an epilogue visitor tree, docs/kmeans.md) on the wgmma accumulator
// registers in place. A consumer thread's accumulators are (V = tile N / 2 per 64-row wgmma, MM 64-row wgmmas, 1): in a
// wgmma D fragment element v sits at column 8 (v / 4) + 2 (lane % 4) + v % 2 and at row lane / 4 + 8 ((v / 2) % 2) of
// its warp's 16 (PTX ISA, wgmma .m64nNk8), so every element's column in the tile is a constant plus 2 (lane % 4), and
// the four lanes of a quad hold a row: two shuffles reduce it. The rows' coordinates come from the MMA's partition.
//
// kEnc = 8 (the threadblock ABFT): the tile's last 8 columns are not centroids but the centroid tile's encodings (hi and
// lo of se s_t, of sw w_t, four zero columns: pack_kernel), so the same wgmma computes the reference checksums r = x . s_t,
// r' = x . w_t beside the accumulators. Every row is checked before its minimum leaves the thread, in two stages
// (model.assign90 with prefilter, ftgen_rules::norm_prefilter_clean). The first stage's sum is taken in the arg-min's
// own pass over the accumulators (its additions fill issue slots the compare-and-select chains leave idle), the verdict
// after it, and a tile where an element was corrected in place gets the pass again. The sum P1 of a over the centroid
// columns passes when
// |P1 - r| <= unit max(||x|| sum ||c_j||, |r|) -- by Cauchy-Schwarz that scale bounds sum |a|, so the stage flags no row
// the full rule's unweighted residual passes; any
// other row gets the full rule on its sums of a, (j + 1) a and |a| against r, r' (ftgen_rules::abft16_unit_verdict, the
// gemm backend's 16-bit check). A located element is corrected in place (r minus the row's other elements, summed anew
// in double), any other detection (every one when correct: detect) queues the (row, tile), whose minimum finish_kernel
// recomputes first (fix_units).
// kInject: the planned accumulator faults (block = the tile's row of tiles, step = its column, thread = the consumer
// thread, elem = the accumulator) flip a bit of the register before the check, in the first iteration.
// kTop2 (refine): each chain keeps its second smallest beside its smallest, the chains and the quad merge the pairs as
// 64-bit keys, and the row's second key goes to keys2.
template <int kEnc = 0, bool kInject = false, bool kTop2 = false, int kChains = kChainGroups, int kSumParts = 0>
class ArgMinDirect : public ftgen_sm90::PassThrough<ArgMinArgs> {
 public:
  using EpilogueSchedule = cutlass::gemm::EpilogueDefault;
  using DispatchPolicy = EpilogueSchedule;
  using ElementC = void;
  using ElementD = float;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementOutput = float;
  using ElementScalar = float;
  using StrideC = cute::Stride<int64_t, cute::_1, int64_t>;
  using StrideD = cute::Stride<int64_t, cute::_1, int64_t>;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  // (the device adapter's name for the epilogue's thread operator: a type only, never applied)
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<float, 1, float, float>;
  struct SharedStorage {};
  using TensorStorage = SharedStorage;
  using Params = ArgMinArgs;
  CUTLASS_HOST_DEVICE ArgMinDirect(Params const& p, SharedStorage const& = SharedStorage()) : params(p) {}
  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout, class TiledMma,
            class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK, BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc_in, TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    constexpr int W = size<1>(BlockShapeMNK{});  // the GEMM tile's columns
    constexpr int NT = W - kEnc;                  // its centroids
    constexpr int V = W / 2;                      // accumulators per 64-row wgmma
    constexpr int MM = size<1>(FrgLayout{});      // 64-row wgmmas per thread
    static_assert(size<0>(FrgLayout{}) == V && size<2>(FrgLayout{}) == 1 && NT % 8 == 0, "one wgmma D fragment across the tile");
    auto& acc = const_cast<cute::Tensor<FrgEngine, FrgLayout>&>(acc_in);  // (the rare path corrects an element in place)
    auto M = get<0>(problem_shape_mnkl);
    auto N = get<1>(problem_shape_mnkl);
    auto [m, n, k, l] = blk_coord_mnkl;
    const int q = thread_idx % 4;  // the quad lane: its columns are 2 q + constants
    const int j0 = int(n) * NT;    // the tile's first centroid
    const int cols = min(NT, params.clusters - j0);
    const float* cc = params.cc + j0;
    Tensor cD = local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_MNK), make_coord(m, n));
    Tensor tCcD = tiled_mma.get_thread_slice(thread_idx).partition_C(cD);  // each accumulator's (row, column)
    auto row_of = [&](int mm, int r) { return static_cast<long long>(get<0>(tCcD(2 * r, mm, 0))); };
    auto col_of = [&](int v) { return 8 * (v / 4) + 2 * q + v % 2; };  // the element's column in the tile

    // the check's loads first (the rows' squared norms, the tile's sum of centroid norms), so that their latency
    // overlaps the planned faults' lookup and the first stage's sums instead of following them
    float xx[MM][2] = {}, nc = 0.f;
    if constexpr (kEnc > 0) {
      nc = __ldg(params.check.tile_nc + int(n));
      CUTLASS_PRAGMA_UNROLL
      for (int mm = 0; mm < MM; ++mm) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < 2; ++r) {
          const long long row = row_of(mm, r);
          xx[mm][r] = row < params.check.samples ? __ldg(params.check.xx + row) : 0.f;
        }
      }
    }
    if constexpr (kInject) inject(acc, int(m), int(n), thread_idx, j0, tCcD);

    // the arg-min: per row held, the smallest d' = ||c_j||^2 - 2 a and its element v, in independent chains a row
    // (argmin_pass). With kEnc the same pass sums the check's first stage (P1 = sum a, in the same chains), so the
    // check's additions fill the issue slots the compare-and-select chains leave (the epilogue issues on 35-45% of its
    // cycles); the verdict follows the pass, and where it corrected an element in place (rare) the pass runs again
    // over the corrected tile before the minima leave the thread.
    constexpr int kG = NT / 8 >= 2 * kChains ? kChains : 1;  // (a tile of one or few groups: by parity only)
    constexpr int MS = kTop2 ? MM : 1;  // (the second smallest's chains: kTop2 only)
    constexpr int MP = kEnc > 0 ? MM : 1;  // (the check's partial sums: kEnc only)
    constexpr int PS = kSumParts > 0 ? kSumParts : 2 * kG;  // the check's sums' chains a row (even)
    float bv[MM][2][2 * kG], sv[MS][2][2 * kG], part[MP][2][PS];
    int bx[MM][2][2 * kG], sx[MS][2][2 * kG];
    const float2* ccq = reinterpret_cast<const float2*>(cc + 2 * q);  // (cc + j0: j0 and 2 q even, cc 8-byte aligned)
    // The loaded norms enter the check as 0 * t + x, t a result of the pass (not folded: where t is inf or NaN, so is
    // the sum, the check's first-stage scale is 0 and the stage stricter), so that ptxas cannot place their first use
    // before the pass: placed right after the loads, it waited out their latency (about 5% of the checked tf32x3
    // GEMM's time at 2^20 x 8 x 128, Nsight Compute's source counters). Only with the check's sums split (tf32x3): the
    // tf32 kernels measured slower with it (1.06 -> 1.15x their twin at 2^20 x 128 x 1024, H100).
    auto after_pass = [&](const auto& t) {
      CUTLASS_PRAGMA_UNROLL
      for (int mm = 0; mm < MM; ++mm) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < 2; ++r) xx[mm][r] = fmaf(0.f, t[mm][r][0], xx[mm][r]);
      }
      nc = fmaf(0.f, t[0][0][0], nc);
    };
    if constexpr (kEnc > 0 && kTop2) {
      // (the two-key chains leave no registers for the check beside them -- fused, ptxas spilled, 303 local-memory
      // accesses: the check first, on a pass of its own sums, then the arg-min over the checked tile)
      argmin_pass<true, false>(acc, ccq, bv, bx, sv, sx, part);
      check(acc, part, cols, int(n), q, xx, nc, row_of, col_of);
      argmin_pass<false>(acc, ccq, bv, bx, sv, sx, part);
    } else {
      argmin_pass<(kEnc > 0)>(acc, ccq, bv, bx, sv, sx, part);
      if constexpr (kEnc > 0) {
        // (chain 0 holds column 0, a centroid in every tile: its minimum is finite)
        if constexpr (kSumParts > 0) after_pass(bv);
        if (check(acc, part, cols, int(n), q, xx, nc, row_of, col_of)) argmin_pass<false>(acc, ccq, bv, bx, sv, sx, part);
      }
    }
    if constexpr (kTop2) {
      top2_store(bv, bx, sv, sx, int(n), j0, q, row_of, col_of);
      return;
    }
    float bvr[MM][2];
    int bxr[MM][2];
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        bvr[mm][r] = bv[mm][r][0];
        bxr[mm][r] = bx[mm][r][0];
        CUTLASS_PRAGMA_UNROLL
        for (int c = 1; c < 2 * kG; ++c) {
          if (bv[mm][r][c] < bvr[mm][r] || (bv[mm][r][c] == bvr[mm][r] && bx[mm][r][c] < bxr[mm][r])) {
            bvr[mm][r] = bv[mm][r][c];
            bxr[mm][r] = bx[mm][r][c];
          }
        }
        bxr[mm][r] = col_of(bxr[mm][r]);  // (the chains merge with the lower v on a tie: v ascends with the column)
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int o = 1; o <= 2; o <<= 1) {
      CUTLASS_PRAGMA_UNROLL
      for (int mm = 0; mm < MM; ++mm) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < 2; ++r) {
          const float ov = __shfl_xor_sync(0xffffffffu, bvr[mm][r], o);
          const int ox = __shfl_xor_sync(0xffffffffu, bxr[mm][r], o);
          if (ov < bvr[mm][r] || (ov == bvr[mm][r] && ox < bxr[mm][r])) {
            bvr[mm][r] = ov;
            bxr[mm][r] = ox;
          }
        }
      }
    }
    if (q != 0) return;
    uint64_t* keys = params.keys + static_cast<long long>(n) * params.rows_padded;
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) keys[row_of(mm, r)] = key(bvr[mm][r], j0 + bxr[mm][r]);
    }
  }

 private:
  // One pass over the tile's centroid columns: the arg-min chains (c = the element's column parity and its 8-column
  // group's index mod kG) reset and filled -- columns ascend along v within a chain, so a strict < keeps the lower index
  // on a tie; the norms two at a time (the pair of an 8-column group a lane holds: 8 (v / 4) + 2 q + {0, 1}, at
  // constant offsets from one address), no column tested: params.cc holds +inf past the last centroid up to the last
  // tile's end, whose columns' accumulators are 0 (B's rows past the centroids are zeros), so their d' is +inf and never
  // the smallest. kSum: the check's first-stage sums of a per row and chain into part; kMin false: those sums alone.
  template <bool kSum, bool kMin = true, class Acc, int MM, int C2, int MS, int MP, int PS>
  CUTLASS_DEVICE static void argmin_pass(Acc const& acc, const float2* ccq, float (&bv)[MM][2][C2], int (&bx)[MM][2][C2], float (&sv)[MS][2][C2],
                                         int (&sx)[MS][2][C2], float (&part)[MP][2][PS]) {
    using namespace cute;
    constexpr int V = size<0>(typename Acc::layout_type{});
    constexpr int NT = 2 * V - kEnc;
    constexpr int kG = C2 / 2;
    static_assert(!kSum || MP == MM, "the check's sums per 64-row wgmma");
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < C2; ++c) {
          if constexpr (kMin) {
            bv[mm][r][c] = INFINITY;
            bx[mm][r][c] = 0;
          }
          if constexpr (kMin && kTop2) {
            sv[mm][r][c] = INFINITY;
            sx[mm][r][c] = 0;
          }
        }
        if constexpr (kSum) {
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c < PS; ++c) part[mm][r][c] = 0.f;
        }
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int g = 0; g < NT / 8; ++g) {
      const float2 c2 = kMin ? __ldg(ccq + 4 * g) : float2{};
      CUTLASS_PRAGMA_UNROLL
      for (int mm = 0; mm < MM; ++mm) {
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int v = 4 * g + e, r = e / 2, c = 2 * (g % kG) + e % 2;
          const float a = static_cast<float>(acc(v, mm, 0));
          if constexpr (kSum) part[mm][r][2 * (g % (PS / 2)) + e % 2] += a;
          if constexpr (kMin) {
            const float d = fmaf(-2.f, a, e % 2 ? c2.y : c2.x);
            if constexpr (kTop2) {  // (before the smallest moves: a new smallest pushes the old one to second)
              const bool first = d < bv[mm][r][c], second = d < sv[mm][r][c];
              sv[mm][r][c] = first ? bv[mm][r][c] : second ? d : sv[mm][r][c];
              sx[mm][r][c] = first ? bx[mm][r][c] : second ? v : sx[mm][r][c];
            }
            if (d < bv[mm][r][c]) {
              bv[mm][r][c] = d;
              bx[mm][r][c] = v;
            }
          }
        }
      }
    }
  }

  // kTop2: the chains' (smallest, second) pairs as keys (the tile's column in them), merged over the chains and the quad;
  // the row's smallest to keys, its second to keys2
  template <int MM, int C2, class RowOf, class ColOf>
  CUTLASS_DEVICE void top2_store(const float (&bv)[MM][2][C2], const int (&bx)[MM][2][C2], const float (&sv)[MM][2][C2],
                                 const int (&sx)[MM][2][C2], int tile, int j0, int q, RowOf const& row_of, ColOf const& col_of) {
    const long long off = static_cast<long long>(tile) * params.rows_padded;
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        uint64_t k1 = key(bv[mm][r][0], j0 + col_of(bx[mm][r][0])), k2 = key(sv[mm][r][0], j0 + col_of(sx[mm][r][0]));
        CUTLASS_PRAGMA_UNROLL
        for (int c = 1; c < C2; ++c) merge2(k1, k2, key(bv[mm][r][c], j0 + col_of(bx[mm][r][c])), key(sv[mm][r][c], j0 + col_of(sx[mm][r][c])));
        // (then over the quad: its four lanes hold the row)
        const uint64_t a1 = __shfl_xor_sync(0xffffffffu, k1, 1), a2 = __shfl_xor_sync(0xffffffffu, k2, 1);
        merge2(k1, k2, a1, a2);
        const uint64_t b1 = __shfl_xor_sync(0xffffffffu, k1, 2), b2 = __shfl_xor_sync(0xffffffffu, k2, 2);
        merge2(k1, k2, b1, b2);
        if (q == 0) {
          params.keys[off + row_of(mm, r)] = k1;
          params.keys2[off + row_of(mm, r)] = k2;
        }
      }
    }
  }

  // The threadblock ABFT of the tile (kEnc > 0), before the minima leave the thread; see the class comment
  // part: the first stage's sums of a per row and chain (argmin_pass), xx: the squared norms of the rows held (0 past the
  // samples), nc: the tile's sum of centroid norms (operator() loads them before the faults' lookup). Returns whether an
  // element was corrected in place (the caller's arg-min pass then runs again).
  template <class Acc, int MM, int C2, class RowOf, class ColOf>
  CUTLASS_DEVICE bool check(Acc& acc, const float (&part)[MM][2][C2], int cols, int tile, int q, const float (&xx)[MM][2], float nc, RowOf const& row_of,
                            ColOf const& col_of) {
    using namespace cute;
    constexpr int V = size<0>(typename Acc::layout_type{});
    static_assert(MM == size<1>(typename Acc::layout_type{}), "the rows held");
    constexpr int NT = 2 * V - kEnc;
    CheckArgs const& p = params.check;
    // the first stage's scale per row held: ||x_i|| sum ||c_j|| (rows past the samples: 0, their accumulators are 0),
    // the square root by the approximate reciprocal root (within 2 ulp) taken 2^-20 below it: a scale below the exact
    // one only makes the stage stricter (a row it does not pass gets the full rule), never looser
    float scale[MM][2];
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        const float x2 = xx[mm][r];
        scale[mm][r] = x2 > 0.f ? x2 * rsqrtf(x2) * (nc * kBelow) : 0.f;
      }
    }
    float s1[MM][2], rs[MM][2];
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) rs[mm][r] = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int v = NT / 2; v < NT / 2 + 4; ++v) {
        const float a = static_cast<float>(acc(v, mm, 0));
        if (q == 0) rs[mm][(v / 2) % 2] += v % 2 ? a * kLo : a;  // lane 0 of the quad: s_t's hi, lo
      }
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        float t[C2];
        CUTLASS_PRAGMA_UNROLL
        for (int c = 0; c < C2; ++c) t[c] = part[mm][r][c];
        CUTLASS_PRAGMA_UNROLL
        for (int w = 1; w < C2; w <<= 1) {
          CUTLASS_PRAGMA_UNROLL
          for (int c = 0; c + w < C2; c += 2 * w) t[c] += t[c + w];
        }
        s1[mm][r] = t[0];
      }
    }
    bool beat = false;  // a passed row's score above the warp's record so far (seen_)
    unsigned todo[MM] = {};  // per 64-row wgmma, the rows held (bit r) the first stage did not pass
    const float unit_f = static_cast<float>(p.unit);
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < 2; ++r) {
        CUTLASS_PRAGMA_UNROLL
        for (int o = 1; o <= 2; o <<= 1) {
          s1[mm][r] += __shfl_xor_sync(0xffffffffu, s1[mm][r], o);
          rs[mm][r] += __shfl_xor_sync(0xffffffffu, rs[mm][r], o);
        }
        // (every lane of the quad holds the same sums, so the same verdict)
        const float ref_f = rs[mm][r] * static_cast<float>(p.inv_se);
        if (ftgen_rules::norm_prefilter_clean(s1[mm][r], ref_f, scale[mm][r], unit_f, nullptr)) {
          // (the score |s1 - ref| / tau, telemetry only, against the record without a division)
          beat |= fabsf(s1[mm][r] - ref_f) > seen_ * ftgen_rules::norm_prefilter_tau(ref_f, scale[mm][r], unit_f);
          continue;
        }
        todo[mm] |= 1u << r;
      }
    }
    // the warp's largest clean score (the first stage's), computed, reduced and recorded only when a lane's beats the
    // warp's record so far (seen_, the same in every lane): after the first tiles a vote per tile, not a division per
    // row and five shuffles. Before the full rule, so that none of it lives across the full rule's copies (after them,
    // ptxas moved the main loop's descriptor arithmetic out of the uniform datapath: 39 R2UR against 8 at 128x224)
    if (p.counters && __any_sync(0xffffffffu, beat)) {
      float top = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int mm = 0; mm < MM; ++mm) {
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < 2; ++r) {
          if (todo[mm] >> r & 1u) continue;
          const float ref_f = rs[mm][r] * static_cast<float>(p.inv_se);
          const float tau = ftgen_rules::norm_prefilter_tau(ref_f, scale[mm][r], unit_f);
          top = fmaxf(top, tau > 0.f ? __fdividef(fabsf(s1[mm][r] - ref_f), tau) : 0.f);
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
      if (threadIdx.x % 32 == 0) ftgen::record_score(p.counters, top, seen_);
      seen_ = fmaxf(seen_, top);
    }
    // the rows the first stage did not pass: the full rule, one inlined copy per 64-row wgmma with the row held a
    // run-time value (the cold code stays small beside the hot epilogue)
    bool corrected = false;
    CUTLASS_PRAGMA_UNROLL
    for (int mm = 0; mm < MM; ++mm) {
      if (!todo[mm]) continue;
#pragma unroll 1
      for (int r = 0; r < 2; ++r) {
        if (!(todo[mm] >> r & 1u)) continue;
        const float P1 = r ? s1[mm][1] : s1[mm][0], rr = r ? rs[mm][1] : rs[mm][0];
        corrected |= full(acc, mm, r, P1, static_cast<double>(rr) * p.inv_se, cols, tile, q, row_of, col_of);
      }
    }
    return corrected;
  }

  // The full rule for a row the first stage did not pass (its quad only): the sums of (j + 1) a and |a| and the weighted
  // reference, then the verdict; a detection to the rare path (true: an element corrected in place)
  template <class Acc, class RowOf, class ColOf>
  CUTLASS_DEVICE bool full(Acc& acc, int mm, int r, float P1, double ref, int cols, int tile, int q, RowOf const& row_of, ColOf const& col_of) {
    using namespace cute;
    constexpr int V = size<0>(typename Acc::layout_type{});
    constexpr int NT = 2 * V - kEnc;
    CheckArgs const& p = params.check;
    float s1 = 0.f, sw = 0.f, sa = 0.f, rw = 0.f;  // (s1: this lane's part of P1)
    CUTLASS_PRAGMA_UNROLL
    for (int v = 0; v < V; ++v) {
      if ((v / 2) % 2 != r) continue;
      const float a = static_cast<float>(acc(v, mm, 0));
      if (v < NT / 2) {  // (its weight less 2 q, a constant; 2 q times this lane's sum is added below)
        s1 += a;
        sw = fmaf(static_cast<float>(8 * (v / 4) + v % 2 + 1), a, sw);
        sa += fabsf(a);
      } else if (v < NT / 2 + 4 && q == 1) {  // lane 1 of the quad: w_t's hi, lo
        rw += v % 2 ? a * kLo : a;
      }
    }
    sw = fmaf(static_cast<float>(2 * q), s1, sw);
    const unsigned quad = quad_mask();
    CUTLASS_PRAGMA_UNROLL
    for (int o = 1; o <= 2; o <<= 1) {
      sw += __shfl_xor_sync(quad, sw, o);
      sa += __shfl_xor_sync(quad, sa, o);
      rw += __shfl_xor_sync(quad, rw, o);
    }
    const double rms_w = cols == NT ? p.rms_w : ftgen_rules::rms_weights(cols);  // (the last tile may be partial)
    const double refw = static_cast<double>(rw) * p.inv_sw;
    double score = 0.0;
    const int verdict = ftgen_rules::abft16_unit_verdict(P1, sw, sa, ref, refw, p.unit, 0.0, rms_w, cols, &score);
    return verdict != -1 && rare(acc, verdict, mm, r, ref, tile, q, row_of, col_of);
  }

  // A detection (rare): count it; a located element (online) corrected in place (true), else the (row, tile) queued
  template <class Acc, class RowOf, class ColOf>
  CUTLASS_DEVICE bool rare(Acc& acc, int verdict, int mm, int r, double ref, int tile, int q, RowOf const& row_of, ColOf const& col_of) {
    using namespace cute;
    constexpr int V = size<0>(typename Acc::layout_type{});
    constexpr int NT = 2 * V - kEnc;
    CheckArgs const& p = params.check;
    // a row past the samples (the last row tile's padding) is no output: no label reads its key, so a fault there is
    // neither a detection nor a unit to recompute
    if (row_of(mm, r) >= p.samples) return false;
    const bool lead = q == 0;
    if (lead && p.counters) atomicAdd(&p.counters->detected, 1ull);
    if (p.no_correct) return false;
    if (p.online && verdict >= 0) {
      double rest = 0.0;  // the row's other elements, summed anew
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < NT / 2; ++v)
        if ((v / 2) % 2 == r && col_of(v) != verdict) rest += static_cast<double>(acc(v, mm, 0));
      const unsigned quad = quad_mask();  // (only the quad shares the row's verdict)
      rest += __shfl_xor_sync(quad, rest, 1);
      rest += __shfl_xor_sync(quad, rest, 2);
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < NT / 2; ++v)
        if ((v / 2) % 2 == r && col_of(v) == verdict) acc(v, mm, 0) = static_cast<float>(ref - rest);
      if (lead && p.counters) atomicAdd(&p.counters->corrected, 1ull);
      return true;
    }
    if (!lead) return false;
    const int slot = atomicAdd(p.flag_count, 1);
    if (slot < p.flag_capacity) p.flags[slot] = make_int2(static_cast<int>(row_of(mm, r)), tile);
    else if (p.counters) atomicAdd(&p.counters->uncorrectable, 1ull);
    return false;
  }

  // The planned accumulator faults of this tile and thread (inject builds, first iteration)
  template <class Acc, class Coords>
  CUTLASS_DEVICE void inject(Acc& acc, int tm, int tn, int thread_idx, int j0, Coords const& tCcD) {
    using namespace cute;
    constexpr int V = size<0>(typename Acc::layout_type{});
    constexpr int NT = 2 * V - kEnc;
    CheckArgs const& p = params.check;
    if (!p.site_acc || p.fault_count == 0 || p.iter == nullptr || *p.iter != 0) return;  // (no load of the counter without faults)
    for (int f = 0; f < p.fault_count; ++f) {
      const ftgen::FaultSpec fs = p.faults[f];
      if (fs.block != tm || fs.step != tn || fs.thread != thread_idx) continue;
      const int e = fs.elem % int(size(acc));
      // the element read by selects, faulted once, written back by selects (one inlined fault per site, not one per
      // accumulator: the cold code stays small beside the hot epilogue)
      float before = 0.f;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < int(size(acc)); ++i) before = i == e ? static_cast<float>(acc(i)) : before;
      const float after = ftgen::apply_fault(before, fs.kind, fs.bit, fs.offset);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < int(size(acc)); ++i) acc(i) = i == e ? after : acc(i);
      const int c = int(get<1>(tCcD(e))) - tn * 2 * V;  // the element's column in the tile (-1 below: an encoding column)
      ftgen::record_fault(p.records + f, p.counters, tm, thread_idx, e, tn, fs.kind == ftgen::kOffset ? -1 : (fs.bit & 31), before, after,
                          static_cast<long long>(get<0>(tCcD(e))), c < NT ? j0 + c : -1);
    }
  }

  static constexpr float kLo = 1.f / 2048.f;  // the encodings' low parts' scale (tf32_split)
  static constexpr float kBelow = 1.f - 1.f / 1048576.f;  // (the first stage's scale taken below its rounding)
  // The lanes of this thread's quad: the four that hold a row (the shuffles of a row's verdict, taken by its quad only)
  CUTLASS_DEVICE static unsigned quad_mask() { return 0xfu << (threadIdx.x % 32 & ~3u); }

  Params params;
  // (the consumer threads keep one epilogue object over all their tiles of the persistent schedule)
  float seen_ = 0.f;  // the largest score this warp has recorded (every lane holds it)
};

// The product's epilogue: the arg-min (and with kEnc the check, with kTop2 the second smallest) on the accumulator registers
template <int kEnc = 0, bool kInject = false, bool kTop2 = false, int kChains = kChainGroups, int kSumParts = 0>
using DirectEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<ArgMinDirect<kEnc, kInject, kTop2, kChains, kSumParts>>;

// The assign GEMM: A = X (samples x dims, row-major), B = the centroids with zero rows up to the last tile's end
// (pad_rows_kernel; clusters x dims, row-major: CUTLASS's column-major B), or with kEnc the packed centroid tiles
// (pack_kernel: each tile's centroids, then its kEnc encoding rows); TF32 wgmma with fp32 accumulation; no C source, no D. (Epilogue: another collective epilogue taking ArgMinArgs, for experiments.)
// kPromote (tf32x3: the operands split over a tripled K, A in registers and B by pack_kernel): ftgen_sm90's
// SplitAMainloop, X's lo in the first part, the accumulators promoted every four k-tiles.
template <class TileShape, class ClusterShape, class KernelSchedule, int kEnc_ = 0, bool kInject = false,
          class Epilogue_ = DirectEpilogue<kEnc_, kInject>, bool kPromote = false>
struct AssignGemm {
  using Epilogue = Epilogue_;
  using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, float, cutlass::layout::RowMajor, 4, float, cutlass::layout::ColumnMajor, 4,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Mainloop = std::conditional_t<kPromote, ftgen_sm90::SplitAMainloop<BuiltMainloop, 4, 0>, BuiltMainloop>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr int kTileM = cute::size<0>(TileShape{});
  static constexpr int kTileK = cute::size<2>(TileShape{});
  static constexpr int kTileN = cute::size<1>(TileShape{});  // the GEMM's tile: kCentroids centroids, then kEnc encodings
  static constexpr int kEnc = kEnc_;
  static constexpr int kCentroids = kTileN - kEnc;

  static long long rows_padded(int samples) { return (static_cast<long long>(samples) + kTileM - 1) / kTileM * kTileM; }
  static int col_tiles(int clusters) { return (clusters + kCentroids - 1) / kCentroids; }
  // the GEMM's N: whole tiles. B is always a copy of whole tiles (pack_kernel's packed tiles, or the centroids with zero
  // rows up to the last tile's end): with the clusters as N (the last tile's box past B's rows) the unprotected GEMM
  // took 152 us at 2^20 x 8 x 128 in 128x160 tiles, with whole tiles 100 (H100)
  static int gemm_n(int clusters) { return col_tiles(clusters) * kTileN; }
  // the keys' buffer: rows_padded x col_tiles
  static size_t keys_bytes(int samples, int clusters) { return sizeof(uint64_t) * rows_padded(samples) * col_tiles(clusters); }

  static typename Gemm::Arguments arguments(const float* X, long long ldx, const float* B, long long ldb, int samples, int dims, int clusters,
                                            const float* cc, uint64_t* keys, const cutlass::KernelHardwareInfo& hw,
                                            CheckArgs const& check = CheckArgs{}, int ka = 0, uint64_t* keys2 = nullptr) {
    typename Kernel::StrideA sa{};
    typename Kernel::StrideB sb{};
    cute::get<0>(sa) = ldx;
    cute::get<0>(sb) = ldb;
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {samples, gemm_n(clusters), dims, 1};
    args.mainloop.ptr_A = X;
    args.mainloop.dA = sa;
    args.mainloop.ptr_B = B;
    args.mainloop.dB = sb;
    if constexpr (kPromote) {  // (dims: the tripled K; ka: X's columns, ldx or fewer)
      args.mainloop.ka = ka;
      args.mainloop.part_tiles = dims / (3 * kTileK);
    }
    const ArgMinArgs am{cc, clusters, keys, rows_padded(samples), check, keys2};
    if constexpr (std::is_same_v<typename Epilogue::Arguments, ArgMinArgs>) args.epilogue = am;
    else args.epilogue.thread = am;
    args.hw_info = hw;
    return args;
  }
};

// ---- the kernels around the GEMM (internal linkage: a variant and its unprotected twin both include this header) ----
namespace {

// The packed B of the checked GEMM, once per iteration: per tile of NT centroids (W = NT + 8 rows of ld floats) its
// centroids rounded to TF32 (zero rows past the last, zero columns past dims), then hi and lo of se s_t and of sw w_t (s_t, w_t: the sum
// and the (j + 1)-weighted sum of the tile's centroids as the wgmma reads them, TF32, in double; ftgen_rules::tf32_split)
// and four zero rows. A block per (tile, 32 columns): lanes along the columns, the PACK_WARPS warps over the tile's rows
// (there are few blocks: 4 at 128 centroids and 128 dimensions). The check's first stage also takes, per tile, the sum of
// its centroids' norms sqrt(cc_j) in fp32 (tile_nc).
constexpr int PACK_WARPS = 32;
__global__ void __launch_bounds__(PACK_WARPS * 32) pack_kernel(const float* __restrict__ C, int clusters, int dims, int ld, int nt, double se, double sw,
                                                   float* __restrict__ cx, const float* __restrict__ cc, float* tile_nc, const int* converged,
                                                   int parts = 1, int* flag_count = nullptr) {
  if (flag_count && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *flag_count = 0;  // (the GEMM's queue, emptied before it runs)
  if (converged && *converged) return;
  __shared__ double part[2][PACK_WARPS][32];
  const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (blockIdx.y == 0 && warp == 1) {
    float nc = 0.f;
    for (int c = lane; c < nt && t * nt + c < clusters; c += 32) nc += sqrtf(cc[t * nt + c]);
    for (int o = 16; o > 0; o >>= 1) nc += __shfl_xor_sync(0xffffffffu, nc, o);
    if (lane == 0) tile_nc[t] = nc;
  }
  const int d = blockIdx.y * 32 + lane;
  const int w = nt + 8;
  const long long L = static_cast<long long>(parts) * ld;  // a row of the packed B
  double s = 0.0, ws = 0.0;
  for (int c = warp; c < nt; c += PACK_WARPS) {
    const int j = t * nt + c;
    // (stored rounded: the wgmma reads exactly the values the encodings add up, whatever its own rounding of fp32 words
    // does with ties; tf32x3 (parts 3): the centroid's TF32 word and remainder, [hi | lo | hi] along the tripled K)
    const float v = (j < clusters && d < dims) ? C[static_cast<long long>(j) * dims + d] : 0.f;
    const float x = ftgen_rules::tf32_round(v);
    const float r = parts == 3 ? ftgen_rules::tf32_round(v - x) : 0.f;
    if (d < ld) {
      float* row = cx + (static_cast<long long>(t) * w + c) * L + d;
      row[0] = x;
      if (parts == 3) row[ld] = r, row[2 * ld] = x;
    }
    const double y = static_cast<double>(x) + r;  // (the value the products see)
    s += y;
    ws += (c + 1) * y;
  }
  part[0][warp][lane] = s;
  part[1][warp][lane] = ws;
  __syncthreads();
  if (warp != 0 || d >= ld) return;
  s = ws = 0.0;
  for (int g = 0; g < PACK_WARPS; ++g) {
    s += part[0][g][lane];
    ws += part[1][g][lane];
  }
  // (tf32x3: each encoding row [v | 0 | v], a TF32 value and no remainder)
  float* e = cx + (static_cast<long long>(t) * w + nt) * L + d;
  float v[8] = {};
  ftgen_rules::tf32_split(s, se, &v[0], &v[1]);
  ftgen_rules::tf32_split(ws, sw, &v[2], &v[3]);
  for (int z = 0; z < 8; ++z) {
    e[z * L] = v[z];
    if (parts == 3) e[z * L + ld] = 0.f, e[z * L + 2 * ld] = v[z];
  }
}

// The checked GEMM's queue of (row, tile) units (its detections that were not corrected in place), recomputed by
// finish_kernel before it reads the keys: the queue's length, where the units are, X as the GEMM reads it (rows of ldx,
// their first dims words) and the packed centroids (rows of parts x lp words; tf32x3, parts 3: [c_hi | c_lo | c_hi]
// against X's [x_lo | x_hi | x_hi]) with their norms. Null flag_count: no queue (the twin).
struct FixArgs {
  const int* flag_count = nullptr;
  const int2* flags = nullptr;
  int capacity = 0;
  const float* X = nullptr;
  long long ldx = 0;
  const float* cx = nullptr;
  const float* cc = nullptr;
  int lp = 0, parts = 1, dims = 0, nt = 0, clusters = 0;
  ftgen::FtCounters* counters = nullptr;
};

// The queued units of the rows this block of finish_kernel takes (row i: block (i / blockDim.x) % gridDim.x), each
// tile's minimum recomputed from the operands as the wgmma reads them, the products summed in double, the block's
// threads over the tile's centroids; keys2 (refine): the tile's second smallest too. An empty queue costs the block one
// load; as a kernel of its own the recomputation cost 1.9-2.4 us an iteration even then (Nsight Compute).
__device__ void fix_units(const FixArgs& f, uint64_t* keys, uint64_t* keys2, long long rows_padded, int samples) {
  __shared__ uint64_t best[32], second[32];
  const int units = min(*f.flag_count, f.capacity);
  const int warps = static_cast<int>(blockDim.x) / 32;
  for (int u = 0; u < units; ++u) {
    const int2 q = f.flags[u];
    if (q.x >= samples || (q.x / static_cast<int>(blockDim.x)) % static_cast<int>(gridDim.x) != static_cast<int>(blockIdx.x)) continue;
    const float* x = f.X + static_cast<long long>(q.x) * f.ldx;
    uint64_t b = kNoKey, b2 = kNoKey;
    for (int c = threadIdx.x; c < f.nt; c += blockDim.x) {
      const int j = q.y * f.nt + c;
      if (j >= f.clusters) break;
      const float* y = f.cx + (static_cast<long long>(q.y) * (f.nt + 8) + c) * f.parts * f.lp;
      double a = 0.0;
      if (f.parts == 3) {
        for (int i = 0; i < f.dims; ++i) {
          const float v = x[i], hi = ftgen_rules::tf32_round(v), lo = ftgen_rules::tf32_round(v - hi);
          a = fma(static_cast<double>(hi), static_cast<double>(y[f.lp + i]) + y[2 * f.lp + i], fma(static_cast<double>(lo), y[i], a));
        }
      } else {
        for (int i = 0; i < f.dims; ++i) a = fma(ftgen_sm90::wgmma_operand(x[i]), ftgen_sm90::wgmma_operand(y[i]), a);
      }
      merge2(b, b2, key(fmaf(-2.f, static_cast<float>(a), f.cc[j]), j), kNoKey);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const uint64_t o1 = __shfl_xor_sync(0xffffffffu, b, o), o2 = __shfl_xor_sync(0xffffffffu, b2, o);
      merge2(b, b2, o1, o2);
    }
    if (threadIdx.x % 32 == 0) best[threadIdx.x / 32] = b, second[threadIdx.x / 32] = b2;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < warps; ++w) merge2(b, b2, best[w], second[w]);
      keys[static_cast<long long>(q.y) * rows_padded + q.x] = b;
      if (keys2) keys2[static_cast<long long>(q.y) * rows_padded + q.x] = b2;
      if (f.counters) atomicAdd(&f.counters->recomputed, 1ull);
    }
    __syncthreads();  // (the key written before the block reads it)
  }
}

// A near tie (model.refine_flags): the two nearest keys' distances closer than the sum of their error bounds. Returns the
// second key's centroid, or -1.
__device__ inline int near_tie(uint64_t b1, uint64_t b2, float xx, Refine const& rf) {
  const int l1 = static_cast<int>(b1 & 0xffffffffu), l2 = static_cast<int>(b2 & 0xffffffffu);
  if (b2 == kNoKey || l2 >= rf.clusters || l2 == l1) return -1;
  const double d1 = unordered(static_cast<uint32_t>(b1 >> 32)), d2 = unordered(static_cast<uint32_t>(b2 >> 32));
  return near_gap(d1, d2, xx, rf.cc[l1], rf.cc[l2], rf) ? l2 : -1;
}

// Each row's smallest key over the tiles of centroids: its label, and (inertia != null) the sum over the rows of
// max(d' + ||x_i||^2, 0) in fp64 (a block's sum, one atomic per block). Nothing once *converged (null: never) is set.
// fix (the checked GEMM's queue): its units recomputed first (fix_units); pack_kernel empties the queue for the next
// iteration.
// keys2 (refine): the second smallest per tile too; a row's two nearest over the tiles: the label the nearest, and a near
// tie's second candidate into rf.cand for refine_kernel (else -1); the inertia comes from refine_inertia_kernel (pass
// inertia null).
// counts2 (not with keys2; `clusters` ints of dynamic shared memory): the labels counted as they are written, a histogram
// per block added into counts2 -- the counts' second DMR copy (count_kernel takes the first from the stored labels).
__global__ void finish_kernel(uint64_t* keys, long long rows_padded, int tiles, int samples, const float* xx, int* labels,
                              double* inertia, const int* converged, FixArgs fix = FixArgs{}, uint64_t* keys2 = nullptr,
                              Refine rf = Refine{}, int* counts2 = nullptr, int clusters = 0) {
  extern __shared__ int hist[];
  if (converged && *converged) return;
  if (fix.flag_count) fix_units(fix, keys, keys2, rows_padded, samples);
  if (counts2) {
    for (int e = threadIdx.x; e < clusters; e += blockDim.x) hist[e] = 0;
    __syncthreads();
  }
  double part = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < samples; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    uint64_t best = keys[i];
    if (keys2) {
      uint64_t second = keys2[i];
      for (int t = 1; t < tiles; ++t) merge2(best, second, keys[t * rows_padded + i], keys2[t * rows_padded + i]);
      labels[i] = static_cast<int>(best & 0xffffffffu);
      rf.cand[i] = near_tie(best, second, xx[i], rf);
      continue;
    }
    for (int t = 1; t < tiles; ++t) best = min(best, keys[t * rows_padded + i]);
    const int label = static_cast<int>(best & 0xffffffffu);
    labels[i] = label;
    if (counts2) atomicAdd(&hist[label], 1);
    part += fmax(static_cast<double>(unordered(static_cast<uint32_t>(best >> 32))) + static_cast<double>(xx[i]), 0.0);
  }
  if (counts2) {
    __syncthreads();
    for (int e = threadIdx.x; e < clusters; e += blockDim.x)
      if (hist[e]) atomicAdd(&counts2[e], hist[e]);
  }
  if (inertia) {  // one atomic per block (atomics on one address serialize)
    part = block_sum(part);
    if (threadIdx.x == 0 && part != 0) atomicAdd(inertia, part);
  }
}

}  // namespace

}  // namespace ftgen_km90
