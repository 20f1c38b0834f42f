// ftgen kmeans, sm90: the assign step as a CUTLASS 3.x GEMM (TMA loads, wgmma TF32, warp-specialized) whose epilogue
// takes the arg-min on the accumulator registers: per element d' = ||c_j||^2 - 2 x_i . c_j, the smallest per row of the
// CTA tile with its column (the lower index on a tie), stored as one 64-bit key per (row, tile of centroids) -- the
// distance's order-preserving bits above, the column below. No distance is written. A finishing kernel takes each row's
// smallest key over the tiles: its label, and the inertia's term max(d' + ||x_i||^2, 0).
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

#include "ftgen_sm90.cuh"  // (ftgen_sm90::PassThrough)

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

struct ArgMinArgs {
  const float* cc = nullptr;  // ||c_j||^2, clusters of them
  int clusters = 0;
  uint64_t* keys = nullptr;   // the per-tile minima: (rows padded to the tile) x (tiles of centroids), m-major
  long long rows_padded = 0;
  float* parts = nullptr;     // (kSums) the row sums of the accumulators per tile: [3][tiles][rows_padded]
  int tiles = 0;
};

// The arg-min as an operator-style epilogue (CUTLASS's Sm90TmaWarpSpecializedAdapter, no shared memory, no visitor
// tree; 10-12% faster than the same arg-min as an epilogue visitor tree, docs/kmeans.md): it works on the wgmma
// accumulator registers in place, each accumulator's coordinates from the MMA's
// own partition of the tile (static offsets from the tile's corner), the per-row registers likewise partitioned with the
// columns' stride 0; the four lanes of a quad hold a row's columns (the wgmma D fragment), so two shuffles reduce a row.
template <bool kSums = false>
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
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    auto M = get<0>(problem_shape_mnkl);
    auto N = get<1>(problem_shape_mnkl);
    auto [m, n, k, l] = blk_coord_mnkl;
    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor cD = local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_MNK), make_coord(m, n));
    Tensor tCcD = thr_mma.partition_C(cD);  // each accumulator's (row, column)
    Tensor mKey = make_tensor(make_gmem_ptr(params.keys + static_cast<long long>(n) * params.rows_padded),
                              make_layout(make_shape(params.rows_padded, N), make_stride(_1{}, _0{})));
    Tensor tCgKey = thr_mma.partition_C(local_tile(mKey, take<0, 2>(blk_shape_MNK), make_coord(m, _0{})));
    Tensor tV = make_tensor_like<float>(tCgKey);  // per row held: the smallest d' and its column
    Tensor tX = make_tensor_like<int>(tCgKey);
    Tensor tS1 = make_tensor_like<float>(tCgKey);  // (kSums) the sums of a, (j + 1) a, |a|
    Tensor tSW = make_tensor_like<float>(tCgKey);
    Tensor tSA = make_tensor_like<float>(tCgKey);
    fill(tV, INFINITY);
    fill(tX, 0);
    if constexpr (kSums) {
      fill(tS1, 0.f);
      fill(tSW, 0.f);
      fill(tSA, 0.f);
    }
    const int col0 = int(n) * int(size<1>(blk_shape_MNK));
    const bool inside = col0 + int(size<1>(blk_shape_MNK)) <= params.clusters;  // (no column past the last centroid)
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); ++i) {
      const int col = int(get<1>(tCcD(i)));
      const float a = static_cast<float>(acc(i));
      const float d = (inside || col < params.clusters) ? fmaf(-2.f, a, __ldg(params.cc + col)) : INFINITY;
      if (d < tV(i) || (d == tV(i) && col < tX(i))) {
        tV(i) = d;
        tX(i) = col;
      }
      if constexpr (kSums) {
        tS1(i) += a;
        tSW(i) = fmaf(static_cast<float>(col - col0 + 1), a, tSW(i));
        tSA(i) += fabsf(a);
      }
    }
    // one register per row held (the columns' stride-0 modes filtered out)
    auto vf = filter(tV);
    auto xf = filter(tX);
    auto f1 = filter(tS1);
    auto fw = filter(tSW);
    auto fa = filter(tSA);
    CUTLASS_PRAGMA_UNROLL
    for (int o = 1; o <= 2; o <<= 1) {
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < size(vf); ++r) {
        const float ov = __shfl_xor_sync(0xffffffffu, vf(r), o);
        const int ox = __shfl_xor_sync(0xffffffffu, xf(r), o);
        if (ov < vf(r) || (ov == vf(r) && ox < xf(r))) {
          vf(r) = ov;
          xf(r) = ox;
        }
        if constexpr (kSums) {
          f1(r) += __shfl_xor_sync(0xffffffffu, f1(r), o);
          fw(r) += __shfl_xor_sync(0xffffffffu, fw(r), o);
          fa(r) += __shfl_xor_sync(0xffffffffu, fa(r), o);
        }
      }
    }
    if (thread_idx % 4 != 0) return;
    auto gf = filter(tCgKey);
    const long long plane = static_cast<long long>(params.tiles) * params.rows_padded;
    CUTLASS_PRAGMA_UNROLL
    for (int r = 0; r < size(vf); ++r) {
      gf(r) = key(vf(r), xf(r));
      if constexpr (kSums) {
        const long long at = &gf(r) - params.keys;
        params.parts[at] = f1(r);
        params.parts[plane + at] = fw(r);
        params.parts[2 * plane + at] = fa(r);
      }
    }
  }

 private:
  Params params;
};

// The assign GEMM: A = X (samples x dims, row-major), B = C (clusters x dims, row-major: CUTLASS's column-major B),
// TF32 wgmma with fp32 accumulation; no C source, no D. kSums: the epilogue also stores the check's row sums (above).
// (Epilogue: another collective epilogue taking ArgMinArgs, for experiments.)
template <class TileShape, class ClusterShape, class KernelSchedule, bool kSums_ = false,
          class Epilogue_ = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<ArgMinDirect<kSums_>>>
struct AssignGemm {
  using Epilogue = Epilogue_;
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
    const ArgMinArgs am{cc, clusters, keys, rows_padded(samples), parts, col_tiles(clusters)};
    if constexpr (std::is_same_v<typename Epilogue::Arguments, ArgMinArgs>) args.epilogue = am;
    else args.epilogue.thread = am;
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
