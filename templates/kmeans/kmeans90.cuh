// ftgen kmeans, sm90: the assign step as a CUTLASS 3.x GEMM (TMA loads, wgmma TF32, warp-specialized) whose epilogue
// visitor tree takes the arg-min: per element d' = ||c_j||^2 - 2 x_i . c_j, packed with its column as one 64-bit key
// (the distance's order-preserving bits above, the column below: the smallest key is the nearest centroid, the lower
// index on a tie), reduced per row over the CTA tile's columns (CUTLASS's column reduction: registers, then the quad's
// shuffles) into one key per (row, tile of centroids). No distance is written. A finishing kernel takes each row's
// smallest key over the tiles: its label, and the inertia's term max(d' + ||x_i||^2, 0).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace ftgen_km90 {

namespace fusion = cutlass::epilogue::fusion;

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
constexpr uint64_t kNoKey = ~0ull;  // a column past the last centroid: never the nearest
// (d + 0: -0 becomes +0, the two equal distances one key)
__host__ __device__ inline uint64_t key(float d, int col) { return (static_cast<uint64_t>(ordered(d + 0.f)) << 32) | static_cast<uint32_t>(col); }

// The (row, column) of every element a thread visits, partitioned as CUTLASS's own epilogue loads partition theirs:
// (CPY, CPY_M, CPY_N, EPI_M, EPI_N), element epi_v * FragmentSize + i of (epi_m, epi_n) in visit
template <bool ReferenceSrc, class... A>
CUTLASS_DEVICE auto thread_coords(fusion::detail::ConsumerStoreArgs<A...> const& args) {
  auto [M, N, K, L] = args.problem_shape_mnkl;
  return fusion::detail::sm90_partition_for_epilogue<ReferenceSrc>(cute::make_identity_tensor(cute::make_shape(M, N, L)), args.tile_shape_mnk,
                                                                   args.tile_coord_mnkl, args.epi_tile, args.tiled_copy, args.thread_idx);
}

struct ArgMinArgs {
  const float* cc = nullptr;  // ||c_j||^2, clusters of them
  int clusters = 0;
  uint64_t* keys = nullptr;   // the per-tile minima: (rows padded to the tile) x (tiles of centroids), m-major
  long long rows_padded = 0;
  float* parts = nullptr;     // (kSums) the check's row sums of the accumulators per tile: [3][tiles][rows_padded]
  int tiles = 0;
};

// The tree's one node, a leaf that consumes the accumulators: every thread keeps, for each row it holds, the smallest
// d' = ||c_j||^2 - 2 x_i . c_j of its columns and that column (registers laid out as CUTLASS's column reduction lays
// out its partial sums: the thread's partition of the tile with the columns' stride 0); after the tile's last subtile
// the lanes that share a row take the smaller of their pairs (shuffles), and one lane per row stores the pair as a key
// into the tile's column of the minima. It returns zeros (D is void: nothing is stored). Its ElementAux names the element
// CUTLASS's builder lays the absent output's shared memory out for.
// kSums: besides, per row held and tile, the sums of the accumulators a, (j + 1) a (j: the column in the tile) and |a|
// (a checksum test's row partials), reduced as the minima are and stored into params.parts.
template <int kProbe = 0,  // (experiments only: 1 leaves the norms out, 2 the arg-min; 0 in every product build)
          bool kSums = false>
struct RowArgMin {
  using ElementAux = float;
  struct SharedStorage {};
  using Arguments = ArgMinArgs;
  using Params = ArgMinArgs;
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
  CUTLASS_HOST_DEVICE RowArgMin() : params() {}
  CUTLASS_HOST_DEVICE RowArgMin(Params const& p, SharedStorage const&) : params(p) {}
  Params params;
  template <class... A>
  CUTLASS_DEVICE auto get_producer_load_callbacks(fusion::detail::ProducerLoadArgs<A...> const&) {
    return fusion::detail::EmptyProducerLoadCallbacks{};
  }

  template <class CTensor, class VTensor, class ITensor, class GTensor, class LaneLayout, class LaneCoord>
  struct ConsumerStoreCallbacks : fusion::detail::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, VTensor v, ITensor i, GTensor g, LaneLayout ll, LaneCoord lc, Params const* p,
                                          VTensor s1, VTensor sw, VTensor sa, int col0)
        : tCc(c), tCrVal(v), tCrIdx(i), tCgKey(g), lane_layout(ll), lane_mn(lc), params(p), tS1(s1), tSW(sw), tSA(sa), col0(col0) {}
    CTensor tCc;     // (row, column) of every element
    VTensor tCrVal;  // per row held: the smallest d'
    ITensor tCrIdx;  // ... and its column
    GTensor tCgKey;  // per row held: its key's place in the tile's column of minima
    LaneLayout lane_layout;
    LaneCoord lane_mn;
    Params const* params;
    VTensor tS1, tSW, tSA;  // (kSums) per row held: the sums of a, (j + 1) a, |a| over the thread's columns
    int col0;               // the tile's first column, less 1

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const& acc, int epi_v,
                                                             int epi_m, int epi_n) {
      auto c = tCc(cute::_, cute::_, cute::_, epi_m, epi_n);
      auto v = tCrVal(cute::_, cute::_, cute::_, epi_m, epi_n);
      auto x = tCrIdx(cute::_, cute::_, cute::_, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        const int e = epi_v * FragmentSize + i;
        const int col = int(cute::get<1>(c(e)));
        float d;
        if constexpr (kProbe == 0) d = col < params->clusters ? fmaf(-2.f, static_cast<float>(acc[i]), __ldg(params->cc + col)) : INFINITY;
        else d = col < params->clusters ? -2.f * static_cast<float>(acc[i]) : INFINITY;
        if constexpr (kSums) {
          auto s1 = tS1(cute::_, cute::_, cute::_, epi_m, epi_n);
          auto sw = tSW(cute::_, cute::_, cute::_, epi_m, epi_n);
          auto sa = tSA(cute::_, cute::_, cute::_, epi_m, epi_n);
          const float a = static_cast<float>(acc[i]);
          s1(e) += a;
          sw(e) = fmaf(static_cast<float>(col - col0), a, sw(e));
          sa(e) += fabsf(a);
        }
        if constexpr (kProbe == 2) v(e) = fminf(v(e), d);
        else if (d < v(e) || (d == v(e) && col < x(e))) {
          v(e) = d;
          x(e) = col;
        }
      }
      cutlass::Array<float, FragmentSize> z;
      z.clear();
      return z;
    }

    template <class STensor, class SyncFn, class RTensor>
    CUTLASS_DEVICE void reduce(STensor&&, SyncFn const&, int, int, bool is_last_iteration, RTensor) {
      if (!is_last_iteration) return;
      auto vf = cute::filter(tCrVal);
      auto xf = cute::filter(tCrIdx);
      CUTLASS_PRAGMA_UNROLL
      for (int r = cute::size<1>(lane_layout) / 2; r > 0; r /= 2) {
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < cute::size(vf); ++k) {
          const float ov = __shfl_down_sync(0xffffffffu, vf(k), lane_layout(cute::_0{}, r));
          const int ox = __shfl_down_sync(0xffffffffu, xf(k), lane_layout(cute::_0{}, r));
          if (ov < vf(k) || (ov == vf(k) && ox < xf(k))) {
            vf(k) = ov;
            xf(k) = ox;
          }
        }
      }
      if constexpr (kSums) {
        auto f1 = cute::filter(tS1);
        auto fw = cute::filter(tSW);
        auto fa = cute::filter(tSA);
        CUTLASS_PRAGMA_UNROLL
        for (int r = cute::size<1>(lane_layout) / 2; r > 0; r /= 2) {
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < cute::size(f1); ++k) {
            f1(k) += __shfl_down_sync(0xffffffffu, f1(k), lane_layout(cute::_0{}, r));
            fw(k) += __shfl_down_sync(0xffffffffu, fw(k), lane_layout(cute::_0{}, r));
            fa(k) += __shfl_down_sync(0xffffffffu, fa(k), lane_layout(cute::_0{}, r));
          }
        }
      }
      if (cute::get<1>(lane_mn) != 0) return;
      auto gf = cute::filter(tCgKey);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < cute::size(vf); ++k) gf(k) = key(vf(k), xf(k));
      if constexpr (kSums) {
        // the sums' places: the keys' (the same rows), in the parts' planes
        auto f1 = cute::filter(tS1);
        auto fw = cute::filter(tSW);
        auto fa = cute::filter(tSA);
        const long long plane = static_cast<long long>(params->tiles) * params->rows_padded;
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < cute::size(vf); ++k) {
          const long long at = &gf(k) - params->keys;
          params->parts[at] = f1(k);
          params->parts[plane + at] = fw(k);
          params->parts[2 * plane + at] = fa(k);
        }
      }
    }
  };

  template <bool ReferenceSrc, class... A>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(fusion::detail::ConsumerStoreArgs<A...> const& args) {
    using namespace cute;
    auto tCc = thread_coords<ReferenceSrc>(args);
    // the lanes that share a row (as CUTLASS's column reduction finds them): lane_mn -> lane
    Layout ref_layout_MN = [&]() {
      auto mn_shape = shape(typename decltype(args.tiled_copy)::Tiler_MN{});
      if constexpr (ReferenceSrc) return right_inverse(args.tiled_copy.get_layoutS_TV()).with_shape(mn_shape);
      else return right_inverse(args.tiled_copy.get_layoutD_TV()).with_shape(mn_shape);
    }();
    using W = Int<decltype(args.tiled_copy)::TiledNumThr::value / cutlass::NumThreadsPerWarp>;
    Layout tv2lane = Layout<Shape<Int<cutlass::NumThreadsPerWarp>, W, _1>, Stride<_1, _0, _0>>{};
    Layout ref2lane = composition(tv2lane, ref_layout_MN);
    Layout lane_layout = make_layout(filter(get<0>(ref2lane)), filter(get<1>(ref2lane)));
    auto lane_mn = idx2crd(right_inverse(lane_layout)(cutlass::canonical_lane_idx()), shape(lane_layout));
    Layout tv2warp = Layout<Shape<Int<cutlass::NumThreadsPerWarp>, W, _1>, Stride<_0, _1, _0>>{};
    Layout ref2warp = composition(tv2warp, ref_layout_MN);
    static_assert(decltype(size(filter(get<1>(ref2warp))))::value == 1, "one warp across a row of the tile");
    // the tile's column of minima, its rows partitioned as the epilogue partitions the tile (the columns' stride 0)
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [m, n, k, l] = args.tile_coord_mnkl;
    Tensor mKey = make_tensor(make_gmem_ptr(params.keys + static_cast<long long>(n) * params.rows_padded),
                              make_layout(make_shape(params.rows_padded, N), make_stride(_1{}, _0{})));
    Tensor gKey = local_tile(mKey, take<0, 2>(args.tile_shape_mnk), make_coord(m, _0{}));
    Tensor tCgKey = fusion::detail::sm90_partition_for_epilogue<ReferenceSrc>(gKey, args.epi_tile, args.tiled_copy, args.thread_idx);
    Tensor tCrVal = make_tensor_like<float>(tCgKey);
    Tensor tCrIdx = make_tensor_like<int>(tCgKey);
    fill(tCrVal, INFINITY);
    fill(tCrIdx, 0);
    Tensor tS1 = make_tensor_like<float>(tCgKey);
    Tensor tSW = make_tensor_like<float>(tCgKey);
    Tensor tSA = make_tensor_like<float>(tCgKey);
    if constexpr (kSums) {
      fill(tS1, 0.f);
      fill(tSW, 0.f);
      fill(tSA, 0.f);
    }
    const int col0 = int(n) * int(size<1>(args.tile_shape_mnk)) - 1;
    return ConsumerStoreCallbacks<decltype(tCc), decltype(tCrVal), decltype(tCrIdx), decltype(tCgKey), decltype(lane_layout),
                                  decltype(lane_mn)>(tCc, tCrVal, tCrIdx, tCgKey, lane_layout, lane_mn, &params, tS1, tSW, tSA, col0);
  }
};


// The assign GEMM: A = X (samples x dims, row-major), B = C (clusters x dims, row-major: CUTLASS's column-major B),
// TF32 wgmma with fp32 accumulation; no C source, no D.
template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule,
          class EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto, int kProbe = 0, bool kSums_ = false>
struct AssignGemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpilogueTile, float, float, void,
      cutlass::layout::RowMajor, 4, void, cutlass::layout::RowMajor, 4, EpilogueSchedule, RowArgMin<kProbe, kSums_>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, float, cutlass::layout::RowMajor, 4, float, cutlass::layout::ColumnMajor, 4,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr int kTileM = cute::size<0>(TileShape{});
  static constexpr int kTileN = cute::size<1>(TileShape{});
  static constexpr bool kSums = kSums_;

  static long long rows_padded(int samples) { return (static_cast<long long>(samples) + kTileM - 1) / kTileM * kTileM; }
  static int col_tiles(int clusters) { return (clusters + kTileN - 1) / kTileN; }
  // the keys' buffer: rows_padded x col_tiles
  static size_t keys_bytes(int samples, int clusters) { return sizeof(uint64_t) * rows_padded(samples) * col_tiles(clusters); }

  static typename Gemm::Arguments arguments(const float* X, long long ldx, const float* C, long long ldc, int samples, int dims, int clusters,
                                            const float* cc, uint64_t* keys, const cutlass::KernelHardwareInfo& hw,
                                            float* parts = nullptr) {
    typename Kernel::StrideA sa{};
    typename Kernel::StrideB sb{};
    cute::get<0>(sa) = ldx;
    cute::get<0>(sb) = ldc;
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {samples, clusters, dims, 1};
    args.mainloop.ptr_A = X;
    args.mainloop.dA = sa;
    args.mainloop.ptr_B = C;
    args.mainloop.dB = sb;
    args.epilogue.thread = ArgMinArgs{cc, clusters, keys, rows_padded(samples), parts, col_tiles(clusters)};
    args.hw_info = hw;
    return args;
  }
};

// Each row's smallest key over the tiles of centroids: its label, and (inertia != null) the sum over the rows of
// max(d' + ||x_i||^2, 0) in fp64 (a warp's sum, one atomic per warp). Nothing once *converged (null: never) is set.
__global__ void finish_kernel(const uint64_t* keys, long long rows_padded, int tiles, int samples, const float* xx, int* labels,
                              double* inertia, const int* converged) {
  if (converged && *converged) return;
  double part = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < samples; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    uint64_t best = keys[i];
    for (int t = 1; t < tiles; ++t) best = min(best, keys[t * rows_padded + i]);
    labels[i] = static_cast<int>(best & 0xffffffffu);
    part += fmax(static_cast<double>(unordered(static_cast<uint32_t>(best >> 32))) + static_cast<double>(xx[i]), 0.0);
  }
  if (inertia) {
    for (int o = 16; o; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    if (threadIdx.x % 32 == 0 && part != 0) atomicAdd(inertia, part);
  }
}

}  // namespace ftgen_km90
