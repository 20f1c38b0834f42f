// ftgen, CUTLASS 3.x sm90 kernels (the gemm and kmeans cutlass90 backends): what the pieces around the sm90 GEMMs share
// -- the tile's accumulator layout (which output element a consumer thread's accumulator holds: the fault units of
// injection), the operands as the wgmma reads them (recomputations in double), the plumbing of ftgen's own epilogue
// pieces, and the mainloops tf32x3 runs on (accumulator promotion, loads over the split operands' two parts, A split
// in registers). Copied verbatim into every generated project. Do not edit the copies.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cuda_host_adapter.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/tfloat32.h"
#include "ftgen_ft.cuh"  // device_sms
#include "ftgen_rules.h"  // tf32_round

namespace ftgen_sm90 {

// The sm90 tile and how its accumulators are held: consumer warp groups of 128 threads, rows_per_wg rows each (ws-coop:
// two groups split the tile's rows; ws-pingpong: one group holds the whole tile), 64-row wgmmas of tile_n columns.
struct Geometry {
  int tile_m, tile_n;
  int rows_per_wg;
};

// The output element (row, col of C) that accumulator element `elem` of consumer thread `thread` (0 .. threads holding
// the tile - 1) holds in tile (tm, tn): the wgmma D fragment (PTX ISA, wgmma .m64nNk: per warp 16 rows; register i of a
// thread at row lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2), tile_n / 2 registers per 64-row
// wgmma, the 64-row blocks of the warp group's rows one after the other.
__host__ __device__ inline void fault_element(Geometry const& g, int thread, int elem, int tm, int tn, long long& row, long long& col) {
  const int wg = thread / 128, lt = thread % 128, warp = lt / 32, lane = lt % 32;
  const int per_m = g.tile_n / 2;
  const int mi = elem / per_m, i = elem % per_m;
  row = static_cast<long long>(tm) * g.tile_m + wg * g.rows_per_wg + 64 * mi + 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
  col = static_cast<long long>(tn) * g.tile_n + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
}

// An operand as the wgmma reads it, widened exactly: fp32 words rounded to TF32 as CUTLASS's converter rounds them (the
// measured sm90 behaviour, docs/gemm-hopper.md "The tf32 reference"); 16-bit values as they are.
__device__ __forceinline__ double wgmma_operand(float x) {
  using Conv = cutlass::NumericConverter<cutlass::tfloat32_t, float, cutlass::PreferredRoundingMode<cutlass::tfloat32_t, float>::kRound>;
  return static_cast<double>(__uint_as_float(Conv::convert(x).raw() & ~0x1fffu));
}
template <class X>
__device__ __forceinline__ double wgmma_operand(X x) {
  return static_cast<double>(static_cast<float>(x));
}

inline int tiles_of(int extent, int tile) { return (extent + tile - 1) / tile; }

// The current device and its SMs (the persistent schedulers' grids; ftgen::device_sms)
inline cudaError_t hardware(cutlass::KernelHardwareInfo& hw) {
  int dev = 0, sms = 0;
  if (const cudaError_t e = ftgen::device_sms(dev, sms); e != cudaSuccess) return e;
  hw.device_id = dev;
  hw.sm_count = sms;
  return cudaSuccess;
}

// An epilogue piece whose arguments are its parameters and that needs no workspace (CUTLASS's static interface of
// fusion nodes and collective epilogues)
template <class Args>
struct PassThrough {
  using Arguments = Args;
  using Params = Args;
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
};

// A mainloop the collective builder chose, rebuilt on CUTLASS's FP8 dispatch policy: the same TMA loads, shared-memory
// layouts and wgmma, and the wgmma's partial sums added into a second set of fp32 registers every
// mma_promotion_interval wgmmas (round to nearest: the wgmma's own accumulation truncates, its error growing like the
// number of k-steps; docs/gemm-hopper.md)
template <class Built>
using PromotedMainloop = cutlass::gemm::collective::CollectiveMma<
    cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Built::DispatchPolicy::Stages, typename Built::DispatchPolicy::ClusterShape,
                                                         typename Built::DispatchPolicy::Schedule>,
    typename Built::TileShape, typename Built::ElementA, typename Built::StrideA, typename Built::ElementB, typename Built::StrideB,
    typename Built::TiledMma, typename Built::GmemTiledCopyA, typename Built::SmemLayoutAtomA, typename Built::SmemCopyAtomA,
    typename Built::TransformA, typename Built::GmemTiledCopyB, typename Built::SmemLayoutAtomB, typename Built::SmemCopyAtomB,
    typename Built::TransformB>;

// The producer of a warp-specialized sm90 mainloop (Base: its types and parameters) whose k-tile t of the problem's K
// reads A's k-tile a_tile(t) and B's k-tile b_tile(t) of the tensors load_init made: Base's TMA loads with the k-tiles
// remapped (the tf32x3 mainloops read operands that hold fewer k-tiles than the tripled K).
template <class Base, class TensorA, class TensorB, class BlockCoord, class MapA, class MapB>
CUTLASS_DEVICE void load_remapped(typename Base::Params const& params, typename Base::MainloopPipeline pipeline,
                                  typename Base::PipelineState write, cute::tuple<TensorA, TensorB> const& inputs, BlockCoord const& blk, int t,
                                  int k_tile_count, uint32_t block_rank_in_cluster, typename Base::TensorStorage& smem, MapA const& a_tile,
                                  MapB const& b_tile) {
  using namespace cute;
  if (!elect_one_sync()) return;
  Tensor sA = make_tensor(make_smem_ptr(smem.smem_A.data()), typename Base::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.smem_B.data()), typename Base::SmemLayoutB{});
  using Cluster = typename Base::DispatchPolicy::ClusterShape;
  constexpr uint32_t cx = get<0>(Cluster{});
  const uint32_t bx = block_rank_in_cluster % cx, by = block_rank_in_cluster / cx;
  auto tma_a = params.tma_load_a.get_slice(by);
  auto tma_b = params.tma_load_b.get_slice(bx);
  auto [m, n, k, l] = blk;
  (void)k;
  Tensor tAgA = tma_a.partition_S(get<0>(inputs)(_, _, m, _, l));
  Tensor tAsA = tma_a.partition_D(sA);
  Tensor tBgB = tma_b.partition_S(get<1>(inputs)(_, _, n, _, l));
  Tensor tBsB = tma_b.partition_D(sB);
  uint16_t mask_a = 0, mask_b = 0;
  auto blocks = Layout<Cluster>{};
  if constexpr (is_same_v<typename Base::GmemTiledCopyA, SM90_TMA_LOAD_MULTICAST>)
    for (int j = 0; j < size<1>(blocks); ++j) mask_a |= uint16_t(1) << blocks(bx, j, Int<0>{});
  if constexpr (is_same_v<typename Base::GmemTiledCopyB, SM90_TMA_LOAD_MULTICAST>)
    for (int i = 0; i < size<0>(blocks); ++i) mask_b |= uint16_t(1) << blocks(i, by, Int<0>{});
  CUTLASS_PRAGMA_NO_UNROLL
  for (; k_tile_count > 0; --k_tile_count, ++t, ++write) {
    pipeline.producer_acquire(write);
    auto* bar = pipeline.producer_get_barrier(write);
    const int s = write.index();
    copy(params.tma_load_a.with(*bar, mask_a), tAgA(_, _, _, a_tile(t)), tAsA(_, _, _, s));
    copy(params.tma_load_b.with(*bar, mask_b), tBgB(_, _, _, b_tile(t)), tBsB(_, _, _, s));
  }
}

// The element types a mainloop's TMA descriptors are built on (the FP8-policy mainloop: ElementA, ElementB; the
// builder's: its InternalElementA, InternalElementB, tfloat32_t for fp32 read as TF32)
template <class M, class = void>
struct TmaElements {
  using A = typename M::ElementA;
  using B = typename M::ElementB;
};
template <class M>
struct TmaElements<M, std::void_t<typename M::InternalElementA>> {
  using A = typename M::InternalElementA;
  using B = typename M::InternalElementB;
};

// The tiled TMA views a producer loads from (as a mainloop's load_init returns them): A over (M, K, L), B over (N, K, L),
// K the problem's (tripled) K even where an operand stores fewer k-tiles. CUTLASS's ping-pong kernel takes a work tile's
// k-tile count from A's tiles (the cooperative one from the problem shape), so tiles over a stored extent would give it
// only some of the parts. The views are coordinates: the mainloops' k-tile maps read only stored k-tiles, and the TMA
// descriptors keep the operands' own extents.
template <class TileShape, class Params, class I>
CUTLASS_DEVICE auto tiled_operands(Params const& params, I M, I N, int K, I L) {
  using namespace cute;
  Tensor mA = params.tma_load_a.get_tma_tensor(make_shape(M, K, L));
  Tensor mB = params.tma_load_b.get_tma_tensor(make_shape(N, K, L));
  return make_tuple(local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, Underscore, _1>{}),
                    local_tile(mB, TileShape{}, make_coord(_, _, _), Step<Underscore, _1, _1>{}));
}

// tf32x3's operands in two parts, not three (any warp-specialized sm90 mainloop Base: the builder's, or
// PromotedMainloop): the GEMM over the tripled K reads A = [big | small] and B = [small; big] of 2 P k-tiles each
// (K-major; P = K / (3 tile_k)), every k-tile i of the operands in three consecutive k-tiles of the tripled K: A's big
// with B's small, A's small with B's big, both bigs. So the split copies have a third less to write (they are
// memory-bound), and the second read of a big k-tile follows the first closely enough to find it in L2. The problem's K
// is the tripled one; the strides are the stored operands'.
template <class Base>
struct Split3Loads : Base {
  using typename Base::Arguments;
  using typename Base::Params;
  using typename Base::TileShape;
  using typename Base::DispatchPolicy;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  static constexpr int kTileK = cute::size<2>(TileShape{});

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void* workspace) {
    using namespace cute;
    Params p = Base::to_underlying_arguments(problem_shape, args, workspace);
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    const int k2 = K / 3 * 2;
    Tensor a = make_tensor(reinterpret_cast<typename TmaElements<Base>::A const*>(args.ptr_A), make_layout(make_shape(M, k2, L), args.dA));
    Tensor b = make_tensor(reinterpret_cast<typename TmaElements<Base>::B const*>(args.ptr_B), make_layout(make_shape(N, k2, L), args.dB));
    using Cluster = typename DispatchPolicy::ClusterShape;
    p.tma_load_a = make_tma_copy_A_sm90(typename Base::GmemTiledCopyA{}, a, typename Base::SmemLayoutA{}(_, _, Int<0>{}), TileShape{}, Cluster{});
    p.tma_load_b = make_tma_copy_B_sm90(typename Base::GmemTiledCopyB{}, b, typename Base::SmemLayoutB{}(_, _, Int<0>{}), TileShape{}, Cluster{});
    return p;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    const int K = cute::get<2>(cute::append<4>(problem_shape, 1));
    return Base::can_implement(problem_shape, args) && K % (3 * kTileK) == 0;
  }

  // (A's and B's tiles over the tripled K, 3 P k-tiles; the maps below read their 2 P stored ones)
  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& params) const {
    auto [M, N, K, L] = problem_shape_MNKL;
    return tiled_operands<TileShape>(params, M, N, static_cast<int>(K), L);
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState write, cute::tuple<TensorA, TensorB> const& inputs,
                           BlockCoord const& blk, KTileIterator k_tile_iter, int k_tile_count, int, uint32_t block_rank_in_cluster,
                           TensorStorage& smem) {
    const int per_part = static_cast<int>(cute::size<3>(cute::get<0>(inputs))) / 3;  // P
    load_remapped<Base>(
        params, pipeline, write, inputs, blk, static_cast<int>(*k_tile_iter), k_tile_count, block_rank_in_cluster, smem,
        [per_part](int t) { return (t % 3 == 1 ? per_part : 0) + t / 3; },   // A: big, small, big
        [per_part](int t) { return (t % 3 == 0 ? 0 : per_part) + t / 3; });  // B: small, big, big
  }
};

// tf32x3's mainloop (fp32-accurate products from TF32 wgmmas): one GEMM over a tripled K of three parts of part_tiles
// k-tiles each, A's k-tiles split as [big | big | big] but for its small part kSmallPart, B the caller's split copy
// whose parts pair with them (kmeans: A = X as [lo | hi | hi], B = [c_hi | c_lo | c_hi]), with A read as it is -- one
// fp32 copy, not three. A's TMA reads k-tile (t mod part_tiles) of A (its ka columns, zeros past them) for k-tile t of
// the tripled K; the consumers load their A fragments from shared memory (ldmatrix) and split them in registers --
// big = tf32(a), small = tf32(a - big), for finite data below fp32's overflow -- and issue the wgmma with A from
// registers. The next k-tile's A is loaded and split while the current k-tile's wgmmas run (two register buffers). The
// wgmma's accumulation truncates, so its partial sums are added into the fp32 accumulators (round to nearest) every
// kPromote k-tiles (2 or 4; as PromotedMainloop's promotion interval). The k-tile's part comes from its place in the
// work tile's K: the persistent tile schedulers only (each work tile runs the whole K from its first k-tile).
// Measured on the gemm backend's 128x128 tiles (docs/gemm-hopper.md, "Tried and rejected"), where the main loop sets
// the time, the split in registers made the GEMM about twice as slow as copies of the split operands.
template <class Built, int kPromote = 4, int kSmallPart = 0>
struct SplitAMainloop : PromotedMainloop<Built> {
  using Base = PromotedMainloop<Built>;
  using typename Base::DispatchPolicy;
  using typename Base::TileShape;
  using typename Base::ElementA;
  using typename Base::StrideA;
  using typename Base::ElementB;
  using typename Base::StrideB;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::ElementAccumulator;
  using AtomLayoutMNK = std::conditional_t<std::is_same_v<typename DispatchPolicy::Schedule, cutlass::gemm::KernelTmaWarpSpecializedCooperative>,
                                           cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>, cute::Layout<cute::Shape<cute::_1, cute::_1, cute::_1>>>;
  // the TF32 wgmma with A from registers, of the built tile's N
  using TiledMma = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<cutlass::tfloat32_t, cutlass::tfloat32_t, float, TileShape, cute::GMMA::Major::K, cute::GMMA::Major::K>(),
      AtomLayoutMNK{}));
  static_assert(cute::size<2>(TileShape{}) == 32, "tf32x3: k-tiles of 32");
  static_assert(kPromote == 2 || kPromote == 4, "promotion every 2 or 4 k-tiles");
  static_assert(kSmallPart >= 0 && kSmallPart < 3, "the small part: one of the three");

  struct Arguments : Base::Arguments {
    int ka = 0;          // A's columns (the TMA reads zeros past them)
    int part_tiles = 1;  // k-tiles per part of the tripled K
  };
  struct Params : Base::Params {
    int part_tiles = 1;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void* workspace) {
    Params p;
    static_cast<typename Base::Params&>(p) = Base::to_underlying_arguments(problem_shape, args, workspace);
    auto [M, N, K, L] = cute::append<4>(problem_shape, 1);
    (void)N;
    (void)K;
    cute::Tensor a = cute::make_tensor(args.ptr_A, cute::make_layout(cute::make_shape(M, args.ka, L), args.dA));
    p.tma_load_a = cute::make_tma_copy_A_sm90(typename Base::GmemTiledCopyA{}, a, SmemLayoutA{}(cute::_, cute::_, cute::Int<0>{}), TileShape{},
                                              typename DispatchPolicy::ClusterShape{});
    p.part_tiles = args.part_tiles;
    return p;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    const int K = cute::get<2>(cute::append<4>(problem_shape, 1));
    return Base::can_implement(problem_shape, args) && args.ka % 4 == 0 && args.ka <= args.part_tiles * 32 && K == 3 * args.part_tiles * 32;
  }

  // (both operands' tiles over the tripled K; the producer reads A's k-tile t mod part_tiles, within its ka columns)
  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& params) const {
    auto [M, N, K, L] = problem_shape_MNKL;
    return tiled_operands<TileShape>(params, M, N, static_cast<int>(K), L);
  }

  // The producer: k-tile t of the tripled K is B's k-tile t and A's k-tile t mod part_tiles
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState write, cute::tuple<TensorA, TensorB> const& inputs,
                           BlockCoord const& blk, KTileIterator k_tile_iter, int k_tile_count, int, uint32_t block_rank_in_cluster,
                           TensorStorage& smem) {
    const int per_part = params.part_tiles;
    load_remapped<Base>(params, pipeline, write, inputs, blk, static_cast<int>(*k_tile_iter), k_tile_count, block_rank_in_cluster, smem,
                        [per_part](int t) { return t % per_part; }, [](int t) { return t; });
  }

  // The consumers: per k-tile, A from shared memory into registers and split, four wgmmas (A from registers) into the
  // partial sums, a stage released once its wgmmas complete
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState read, FrgTensorC& accum, int k_tile_count, int thread_idx, TensorStorage& smem,
                          Params const& params) {
    using namespace cute;
    Tensor sA = make_tensor(make_smem_ptr(smem.smem_A.data()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(smem.smem_B.data()), SmemLayoutB{});
    constexpr int kGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    const int wg = __shfl_sync(0xffffffffu, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thr = tiled_mma.get_thread_slice(thread_idx);
    auto grp = tiled_mma.get_slice(make_layout(Int<kGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{})(wg));
    Tensor tCrB = grp.make_fragment_B(grp.partition_B(sB));            // (MMA, N, K, PIPE) descriptors
    Tensor rA0 = thr.partition_fragment_A(sA(_, _, Int<0>{}));         // (MMA, M, K) registers
    Tensor rA1 = make_fragment_like(rA0);
    // (ldmatrix: each 32-bit word as two 16-bit halves, the m16n8k8 TF32 A fragment of each warp's 16 rows)
    auto copy_a = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, cutlass::tfloat32_t>{}, tiled_mma);
    auto thr_copy = copy_a.get_thread_slice(thread_idx);
    Tensor tsA = thr_copy.partition_S(sA);                             // (CPY, M, K, PIPE)
    Tensor part = make_fragment_like(accum);                           // the partial sums between promotions
    const int per_part = params.part_tiles;
    // A's k-tile t from stage s into r, split for its part
    auto load_a = [&](auto& r, int s, int t) {
      Tensor view = thr_copy.retile_D(r);
      copy(copy_a, tsA(_, _, _, s), view);
      const bool small = t >= kSmallPart * per_part && t < (kSmallPart + 1) * per_part;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(r); ++i) {
        const float x = __uint_as_float(r(i).raw());
        const float big = ftgen_rules::tf32_round(x);
        r(i) = cutlass::tfloat32_t::bitcast(__float_as_uint(small ? ftgen_rules::tf32_round(x - big) : big));
      }
    };
    // one k-tile's wgmmas into acc (zero: acc starts from zero)
    auto issue = [&](auto& r, int s, bool zero, auto& acc) {
      warpgroup_fence_operand(r);
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      tiled_mma.accumulate_ = zero ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
      CUTLASS_PRAGMA_UNROLL
      for (int kb = 0; kb < size<2>(r); ++kb) {
        cute::gemm(tiled_mma, r(_, _, kb), tCrB(_, _, kb, s), acc);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
    };
    PipelineState oldest = read;  // the oldest stage not yet released
    auto release = [&] {
      pipeline.consumer_release(oldest);
      ++oldest;
    };
    // k-tile t: its wgmmas (A in cur) issued into part; with after_previous the previous k-tile's awaited (their stage
    // released, their A registers -- other -- free); the next k-tile's stage awaited and its A loaded into other while
    // these run
    auto tile = [&](auto& cur, auto& other, int t, bool zero, bool after_previous) {
      issue(cur, read.index(), zero, part);
      ++read;
      if (after_previous) {
        warpgroup_wait<1>();
        release();
      }
      if (t + 1 < k_tile_count) {
        pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
        load_a(other, read.index(), t + 1);
      }
    };
    // part into accum (round to nearest), once the wgmmas are done; the last k-tile's stage released
    auto promote = [&] {
      warpgroup_wait<0>();
      warpgroup_fence_operand(part);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
      release();
    };
    warpgroup_fence_operand(accum);
    if (k_tile_count > 0) {
      pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
      load_a(rA0, read.index(), 0);
    }
    // The k-tiles in groups whose shape is fixed at compile time (the promotion and the waits are then unconditional in
    // the loop body: under a run-time condition ptxas serialized every wgmma); the A buffers alternate, a group of an
    // even number of k-tiles starting in rA0
    int t = 0;
    clear(accum);
    if constexpr (kPromote == 4) {
      CUTLASS_PRAGMA_NO_UNROLL
      for (; t + 4 <= k_tile_count; t += 4) {
        tile(rA0, rA1, t, true, false);
        tile(rA1, rA0, t + 1, false, true);
        tile(rA0, rA1, t + 2, false, true);
        tile(rA1, rA0, t + 3, false, true);
        promote();
      }
    }
    CUTLASS_PRAGMA_NO_UNROLL
    for (; t + 2 <= k_tile_count; t += 2) {  // (kPromote 2, or what is left of 4: a pair into part)
      tile(rA0, rA1, t, true, false);
      tile(rA1, rA0, t + 1, false, true);
      promote();
    }
    if (t < k_tile_count) {  // one k-tile left (its A in rA0)
      tile(rA0, rA1, t, true, false);
      promote();
    }
    warpgroup_fence_operand(accum);
  }

  // (every stage is released in mma)
  CUTLASS_DEVICE void mma_tail(MainloopPipeline, PipelineState, int) {}
};

}  // namespace ftgen_sm90
