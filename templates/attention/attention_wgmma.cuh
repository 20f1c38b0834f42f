// ftgen attention, wgmma backend: flash attention forward on Hopper's warpgroup MMA (sm_90a): TMA loads of Q, K and
// V into a pipeline of shared-memory stages (one producer warp), two or three consumer warpgroups of 64 query rows each, the
// products on wgmma (S = Q K^T from shared memory, O += P V with P from registers), the protection levels of
// ftgen/families/attention/model.py in the same steps as the mma backend (attention_mma.cuh: softmax_tile,
// check_s, check_o_tile, finish_rows).
//
// The wgmma accumulator fragment of an m64nN tile repeats the m16n8 layout per warp: warp w of the warpgroup holds
// rows 16 w + lane / 4 and + 8, and element 4 n + e of a thread is column 8 n + 2 (lane % 4) + e % 2 of row half e / 2.
// The stride-8 column groups of a product are therefore thread-local as on mma.sync, and the strided checksums are
// products: S's checksum columns Q Kc^T (Kc: the unit and the weighted checksum of each group of K's rows, each one
// 16-bit row, 16 x head_dim) and O's 32 checksum columns P Vc (Vc: V's unit checksum in a high and a low half, its
// weighted checksum and the group magnitudes), whose element e of n8 block c lands in the thread that holds group
// cq + e % 2. Kc's rows follow their tile's keys in the stage (each loaded by a TMA load of its own: the keys from K,
// the Kc rows from the workspace), so S and its checksum columns are one wgmma of N = block_n + 16 over K' = [K; Kc];
// Vc (stored transposed, 32 x keys) is one more wgmma of N = 32 beside O += P V (efta: 48, its rows 32-47 ones, so that
// the same product gives each thread the row sums of its two rows). Kc and Vc are encoded once per launch
// (encode_kernel: what the mma backend's encode_tile computes, laid out for speed) and travel through the pipeline with
// their K and V tiles.
//
// What a check cannot locate is recomputed: a block where any check failed to correct (S, O, the exps or the row sums)
// lists itself in the workspace, and after the kernel redo_kernel recomputes the listed blocks with this kernel's code
// unprotected (Redo): one wave of persistent blocks that take the list's entries in turn, so that a launch with nothing
// listed costs one wave of empty blocks, not one per 132 blocks of the grid. No vote crosses a warp (a warp's
// votes are __any_sync, and what a fault corrupts stays in the rows of one warp); the consumers' only barriers are the
// ping-pong schedule's turns, at fixed points of the loop.
#pragma once

#include <algorithm>
#include <cstdlib>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/pipeline/pipeline.hpp>

// CUTLASS's Hopper FMHA example (in the nvidia-cutlass wheel beside the include directory): its TMA tile loader and
// the wgmma helpers (the register-sourced variant of a tiled MMA, the accumulator as an A operand).
#include "../examples/88_hopper_fmha/collective/fmha_collective_load.hpp"
#include "../examples/88_hopper_fmha/collective/fmha_common.hpp"

#include "attention_mma.cuh"

namespace ftattn {
namespace wg {

using namespace cute;
namespace fc = cutlass::fmha::collective;

// the consumers' turn barriers: named barriers kTurnBar + w for consumer w, CUTLASS's first ones for users (0 is
// __syncthreads', 1-7 CUTLASS's reserved)
constexpr int kTurnBar = static_cast<int>(cutlass::arch::ReservedNamedBarriers::FirstUserBarrier);

template <class T>
struct CuteOf;
template <>
struct CuteOf<__half> {
  using type = cutlass::half_t;
};
template <>
struct CuteOf<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};

// A staged swizzled shared-memory layout (the collective builder's: tile modes, then stages) with its stages kStride
// elements apart.
template <int kStride, class L>
constexpr auto restaged(L const& staged) {
  const auto b = staged.layout_b();
  return make_composed_layout(staged.layout_a(), staged.offset(),
                              make_layout(make_shape(shape<0>(b), shape<1>(b), Int<size<2>(decltype(b){})>{}),
                                          make_stride(stride<0>(b), stride<1>(b), Int<kStride>{})));
}

// The TMA descriptor type of collective M's B operand where S holds, else Fallback (M's builder not instantiated)
template <bool S, class M, class Fallback>
struct TmaOf {
  using type = Fallback;
};
template <class M, class Fallback>
struct TmaOf<true, M, Fallback> {
  using type = typename M::Params::TMA_B;
};

template <class T_, int D_, int BN_, bool CAUSAL_, int LEVEL_, bool INJECT_, int STAGES_, bool PINGPONG_, int WGS_ = 2>
struct Config : Levels<LEVEL_> {
  using T = T_;
  using E = typename CuteOf<T>::type;
  using L = Levels<LEVEL_>;
  using L::kStrided;
  // kWgs consumer warpgroups of 64 rows (two, or three: more warps to hide the softmax's and the checks' latencies
  // behind the others' products, in fewer registers each)
  static constexpr int kWgs = WGS_, D = D_, BN = BN_, WM = 64, BM = kWgs * WM;
  static_assert(kWgs == 2 || kWgs == 3, "two or three consumer warpgroups");
  static constexpr bool kCausal = CAUSAL_;
  static constexpr bool kInject = INJECT_;
  static constexpr int NT = BN / 8, ND = D / 8;
  static constexpr int kStages = STAGES_;
  // the consumers take turns at the tensor cores (ping-pong): see kernel()
  static constexpr bool kPingPong = PINGPONG_;
  static constexpr int kThreads = 128 * (kWgs + 1), kConsumers = 128 * kWgs;
  // setmaxnreg: the producer warpgroup's and each consumer's registers (a block's 64K: 24 + 2 x 240, 24 + 3 x 160)
  static constexpr int kProducerRegs = 24, kConsumerRegs = kWgs == 2 ? 240 : 160;
  // the recomputation of flagged rows: this kernel unprotected, on the blocks with a flagged warpgroup
  using Redo = Config<T_, D_, BN_, CAUSAL_, kLevelNone, false, STAGES_, PINGPONG_, WGS_>;

  using RowStride = cute::tuple<int, _1, cute::tuple<int, int>>;  // (rows, columns, (batch, head)), rows contiguous
  using ColStride = cute::tuple<_1, int, cute::tuple<int, int>>;
  using Cluster = Shape<_1, _1, _1>;
  template <class Tile, class StrideB>
  using Mma = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E, RowStride, 8, E, StrideB, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCount<kStages>, cutlass::gemm::KernelTmaWarpSpecialized>::CollectiveOp;
  // the strided levels' K tile carries its checksum rows after its BN keys (Kc: the unit and the weighted checksum of
  // each group of the tile's keys, one 16-bit row each: the S check allows for the unit checksum's rounding,
  // model.s_threshold), so S and its checksum columns are one wgmma of N = BN + 16: a stage of BN + 16 rows, the keys
  // loaded from K and the 16 Kc rows from the workspace (written by encode_kernel) by TMA loads of their own.
  // kScal: the per-tile scalars (Params::scal).
  static constexpr int kKcRows = kStrided ? 16 : 0, BNS = BN + kKcRows, kScal = 32;
  // efta's row sums from the tensor cores: Vc^T's rows 32-47 are ones, so that P Vc^T's columns 32-47 are P's row sums,
  // in every lane of a quad (columns cq and cq + 1 of n8 blocks 4 and 5), accumulated and rescaled with O's checksums;
  // the softmax sums no P. (The unified check compares them with the row sum the unit checksum's +1 carries.) 16 rows,
  // not 8: the builder's TMA for a Vc tile of 40 rows fails cute's divisibility checks.
  // At head_dim 256 the softmax sums the rows (as snvr's and the mma backend's efta do): the ones' 16 rows a stage
  // would cost efta its third stage, and their 8 accumulators a thread would sit beside O's 128.
  static constexpr bool kRowSumTc = L::kUnified && D_ <= 128;
  // bf16's exp check takes the S check's group sums where no exp is floored (softmax_tile)
  static constexpr bool kExpFast = L::kUnified && std::is_same_v<T_, __nv_bfloat16>;
  static constexpr int kVcRows = kRowSumTc ? 48 : 32;
  using TileQK = Shape<_64, Int<BNS>, Int<D>>;
  using TileP = Shape<_64, Int<BN>, Int<D>>;  // S without its checksum columns: the layout of P
  using TilePV = Shape<_64, Int<D>, Int<BN>>;
  using TilePVc = Shape<_64, Int<kVcRows>, Int<BN>>;
  using MmaQK = Mma<TileQK, RowStride>;
  using MmaPV = Mma<TilePV, ColStride>;  // B = V as (head_dim, keys)
  using MmaPVc = Mma<TilePVc, RowStride>;  // B = Vc^T (kVcRows, keys)
  using TiledQK = typename MmaQK::TiledMma;
  using TiledP = typename Mma<TileP, RowStride>::TiledMma;
  using TiledPV = decltype(fc::convert_to_gmma_rs(typename MmaPV::TiledMma{}));
  using TiledPVc = decltype(fc::convert_to_gmma_rs(typename MmaPVc::TiledMma{}));
  using LayoutQ = decltype(fc::unstageSmemLayout(typename MmaQK::SmemLayoutA{}, Int<kWgs>{}));
  using LayoutK = typename MmaQK::SmemLayoutB;
  // V's stages at K's stage stride: a stage holds a K tile or a V tile at different times, so the two staged arrays
  // share their storage, and with K' (BNS rows: the keys and their Kc rows) larger than V a V stage at V's own stride
  // would overlap the end of the K' tile of the stage before it
  using LayoutV = decltype(restaged<BNS * D>(typename MmaPV::SmemLayoutB{}));
  using LayoutVc = typename MmaPVc::SmemLayoutB;
  using Pipe = cutlass::PipelineTmaAsync<kStages>;
  using PipeQ = cutlass::PipelineTmaAsync<kWgs>;  // a Q tile of 64 rows per consumer
  using TmaQ = typename MmaQK::Params::TMA_A;
  // K's loads: the tile's BN keys from K itself (the descriptor of a BN-row tile, MmaP's), and (strided) its Kc rows from
  // the workspace (a 16-row tile's); each written into its rows of the BNS-row stage (LayoutKeys, LayoutKc: LayoutK's
  // rows 0..BN-1 and BN..BNS-1; with the 128-byte swizzle a stage is D / 64 column blocks of BNS rows, and BN rows of
  // 128 bytes are whole 1024-byte swizzle atoms, so each part's boxes land where LayoutK has them)
  using MmaP = Mma<TileP, RowStride>;
  using TileKc = Shape<_64, _16, Int<D>>;
  using MmaKc = Mma<TileKc, RowStride>;
  using LayoutKeys = decltype(cute::composition(LayoutK{}, Layout<Shape<Int<BN>, Int<D>, Int<kStages>>, Stride<_1, Int<BNS>, Int<BNS * D>>>{}));
  using LayoutKc = decltype(cute::composition(LayoutK{}, Layout<Shape<_16, Int<D>, Int<kStages>>, Stride<_1, Int<BNS>, Int<BNS * D>>>{}));
  // where the Kc rows start in K's storage: row BN of the first column block, whose rows are 128 bytes (the swizzle
  // atom's), so BN * 64 16-bit elements on, a multiple of 1024 bytes
  static_assert(sizeof(E) == 2 && BN % 8 == 0, "16-bit K rows of the 128-byte swizzle, whole swizzle atoms of keys");
  static constexpr int kKcOffset = BN * 64;
  using TmaK = typename MmaP::Params::TMA_B;
  using TmaKc = typename TmaOf<kStrided, MmaKc, TmaK>::type;  // (only the strided levels build the Kc loads)
  using TmaV = typename MmaPV::Params::TMA_B;
  using TmaVc = typename MmaPVc::Params::TMA_B;
  static constexpr uint32_t kKVBytes = BN * D * 2, kQBytes = WM * D * 2, kKcBytes = kKcRows * D * 2,
                            kVcBytes = kVcRows * BN * 2;

  // the tiles as the TMA loaders take them (CollectiveLoadTma's storage type), 1024-byte aligned for the 128-byte swizzle
  template <class Layout>
  using Store = cute::array_aligned<E, cute::cosize_v<Layout>>;
  // Vc in stages of its own (a stage holds a K' tile or a V tile at different times; Vc travels with V)
  struct Checksums {
    alignas(1024) Store<LayoutVc> vc;
  };
  struct Smem {
    alignas(1024) Store<LayoutQ> q;
    union {
      alignas(1024) Store<LayoutK> k;
      alignas(1024) Store<LayoutV> v;
    };
    std::conditional_t<kStrided, Checksums, char> c;
    alignas(16) typename Pipe::SharedStorage pipe;
    alignas(16) typename PipeQ::SharedStorage pipe_q;
  };
  static_assert(cute::cosize_v<LayoutK> == kStages * BNS * D && cute::cosize_v<LayoutV> <= cute::cosize_v<LayoutK>,
                "K and V stages kStride = BNS x D elements apart");
  static constexpr int kSmem = static_cast<int>(sizeof(Smem)) + 1024;  // + the alignment of the dynamic base
  static_assert(kSmem <= 227 * 1024, "shared memory of a block on sm_90 (the backend's stages rule: wgmma.py smem_bytes)");

  struct Params {
    TmaQ tma_q;
    TmaK tma_k;
    TmaKc tma_kc;
    TmaV tma_v;
    TmaVc tma_vc;
    ftgen_attention_problem p;
    Rules rules;
    int n_tiles, seq_pad;
    const float* scal;  // per (K / V head, key tile), kScal: the group key-norm sums [8], ||Kc2[g]||^2 [8], max |Vc2| [8],
                        // ||Kc1[g] - hi(Kc1[g])|| [8]
    int* redo;  // protected: the blocks to recompute (Workspace: the count, a mark per block, the list)
  };
};

// ---- the workspace of the protected levels -----------------------------------------------------------------------
// The strided levels' Kc [kv][tile * 16 + row][D] (a tile's 16 checksum rows), Vc^T
// [kv][kVcRows][seq_pad] (T) and scalars [kv][tile][kScal] (float)
// per K / V head (kv = batch * kv_heads + kv head: grouped query heads share them), and every protected level's list of
// the blocks to recompute (int: [0] the count, [kRedoHead + block] a block's mark, [kRedoHead + blocks + i] the list;
// cleared before the kernel), each 256-byte aligned. A block is bh * grid_x + its row block (grid_x = ceil(seq_q / BM)).
constexpr int kRedoHead = 64;
template <class C>
struct Workspace {
  size_t kc, vc, scal, redo, bytes;
  __host__ __device__ static long long blocks(const ftgen_attention_problem& p) {
    return static_cast<long long>(p.batch) * p.heads * ((p.seq_q + C::BM - 1) / C::BM);
  }
  __host__ __device__ explicit Workspace(const ftgen_attention_problem& p) {
    const size_t tiles = (p.seq_k + C::BN - 1) / C::BN;
    const size_t kv = static_cast<size_t>(p.batch) * ftgen_attention_kv_heads(&p);
    const auto up = [](size_t x) { return (x + 255) / 256 * 256; };
    const size_t n = C::kStrided ? 1 : 0;
    kc = 0;
    vc = kc + n * up(kv * tiles * C::kKcRows * C::D * 2);
    scal = vc + n * up(kv * C::kVcRows * tiles * C::BN * 2);
    redo = scal + n * up(kv * tiles * C::kScal * 4);
    bytes = redo + up((kRedoHead + 2 * static_cast<size_t>(blocks(p))) * 4);
  }
};

template <class C>
size_t workspace(const ftgen_attention_problem* p) {
  return C::kProtected ? Workspace<C>(*p).bytes : 0;
}

// The encodings of one key tile into the workspace layout, what the mma backend's encode_tile computes, laid out for
// speed: the K and V tiles staged by cp.async, every copy of a thread in flight at once (kEncThreads threads, a K / V
// row padded by 16 bytes so that the column-group reads of V hit distinct banks); Kc by 16-byte rows of 8 columns, each
// (group, 8 columns) summed over its keys in kKcParts parts by adjacent lanes (every thread one part) and combined by
// shuffles, the same loads giving the keys' squared norms by 8 columns (summed per key after a barrier); the group
// scalars reduced in a warp before one shared atomic each, and Vc^T staged in shared memory and stored in rows.
constexpr int kEncThreads = 256;
template <class C>
struct EncSmem {
  static constexpr int LD = C::D + 8;    // halves a staged row
  static constexpr int LDT = C::BN + 8;  // halves a row of Vc^T (the 8 groups' rows of a column on distinct banks)
  static constexpr int kTile = C::BN * LD;
  static constexpr int kVec = C::D / 8;  // 16-byte vectors a row
  // the parts of a group's keys summed apart: one (group, 8 columns, part) item a thread
  static constexpr int kKcParts = kEncThreads / (8 * kVec) < 1 ? 1 : kEncThreads / (8 * kVec);
  static_assert(C::NT % kKcParts == 0 && (kKcParts & (kKcParts - 1)) == 0 && 8 * kVec * kKcParts == kEncThreads,
                "whole parts of a group's keys, one item a thread, a group's items one warp");
  typename C::T k[kTile], v[kTile], vct[32 * LDT];
  float kn2[C::BN * kVec];  // the keys' squared norms by 8 columns
  float kn[C::BN], g[24];  // key norms; sum_c Kc2[g][c]^2 [0..7], max_key |Vc2[g]| [8..15], sum_c lo(Kc1[g][c])^2 [16..23]
};

template <class C>
__global__ void __launch_bounds__(kEncThreads) encode_kernel(ftgen_attention_problem p) {
  using T = typename C::T;
  using H = Half<T>;
  using S = EncSmem<C>;
  constexpr int D = C::D, BN = C::BN, LD = S::LD, LDT = S::LDT, kVec = D / 8;  // 16-byte vectors a row
  extern __shared__ char smem_raw[];  // the fused kernel's declaration: one dynamic shared array per translation unit
  S& sm = *reinterpret_cast<S*>(smem_raw);
  // kv: the K / V index (batch * kv_heads + kv head)
  const int tid = threadIdx.x, lane = tid % 32, tile = blockIdx.x, kv = blockIdx.y, tiles = gridDim.x;
  const int seq_pad = tiles * BN, k0 = tile * BN;
  const Workspace<C> w(p);
  unsigned char* base = static_cast<unsigned char*>(p.workspace);

  // ---- stage K and V by cp.async (16 bytes each, all in flight at once; keys past seq_k zero-filled) ---------------
  const T* kg = static_cast<const T*>(p.k) + static_cast<long long>(kv) * p.seq_k * D;
  const T* vg = static_cast<const T*>(p.v) + static_cast<long long>(kv) * p.seq_k * D;
  for (int e = tid; e < BN * kVec; e += kEncThreads) {
    const int key = e / kVec, c = (e % kVec) * 8;
    const bool in = k0 + key < p.seq_k;
    const long long off = in ? static_cast<long long>(k0 + key) * D + c : 0;  // a zero-fill reads nothing
    const auto copy16 = [&](T* dst, const T* src) {
      const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst + key * LD + c));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src + off), "r"(in ? 16 : 0));
    };
    copy16(sm.k, kg);
    copy16(sm.v, vg);
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  if (tid < 24) sm.g[tid] = 0.f;
  __syncthreads();

  // ---- Kc, each checksum rounded once into T: rows g (unit), 8 + g (weighted); sum_c Kc2[g][c]^2 and
  // sum_c (Kc1[g][c] - hi(Kc1[g][c]))^2 --------------------------------------------------------------------------------
  T* kc = reinterpret_cast<T*>(base + w.kc) + (static_cast<long long>(kv) * tiles + tile) * C::kKcRows * D;
  constexpr int P = S::kKcParts, kPartKeys = C::NT / P;
  for (int i = tid; i < 8 * kVec * P; i += kEncThreads) {
    // item i: part i % P of group g's keys g + 8 l (l in the part's range), columns 8 v .. 8 v + 7
    const int part = i % P, v8 = (i / P) % kVec, g = i / (P * kVec), c = v8 * 8;
    float s1[8], s2[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) s1[e] = 0.f, s2[e] = 0.f;
#pragma unroll
    for (int ll = 0; ll < kPartKeys; ++ll) {
      const int l = part * kPartKeys + ll, key = g + 8 * l;
      const uint4 q = *reinterpret_cast<const uint4*>(sm.k + key * LD + c);
      float n2 = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const uint32_t w = (&q.x)[e / 2];
        const float x = e % 2 ? H::hi(w) : H::lo(w);
        s1[e] += x;
        s2[e] = fmaf(static_cast<float>(l + 1), x, s2[e]);
        n2 = fmaf(x, x, n2);
      }
      sm.kn2[key * kVec + v8] = n2;
    }
#pragma unroll
    for (int o = 1; o < P; o <<= 1) {  // the parts of an item are adjacent lanes
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        s1[e] += __shfl_xor_sync(0xffffffffu, s1[e], o);
        s2[e] += __shfl_xor_sync(0xffffffffu, s2[e], o);
      }
    }
    float q2 = 0.f, lo2 = 0.f;
    uint32_t hi[4], wt[4];
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      hi[e / 2] = H::pack(s1[e], s1[e + 1]);
      const float l0 = s1[e] - H::lo(hi[e / 2]), l1 = s1[e + 1] - H::hi(hi[e / 2]);
      lo2 = fmaf(l0, l0, fmaf(l1, l1, lo2));
      wt[e / 2] = H::pack(s2[e], s2[e + 1]);
      q2 = fmaf(s2[e], s2[e], fmaf(s2[e + 1], s2[e + 1], q2));
    }
    if (part == 0) {
      *reinterpret_cast<uint4*>(kc + g * D + c) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      *reinterpret_cast<uint4*>(kc + (8 + g) * D + c) = make_uint4(wt[0], wt[1], wt[2], wt[3]);
    }
    // the group's two sums of squares: its items are P * kVec adjacent lanes (a warp holds whole groups, or a group
    // spans whole warps)
    constexpr int kGroupLanes = P * kVec < 32 ? P * kVec : 32;
#pragma unroll
    for (int o = P; o < kGroupLanes; o <<= 1) q2 += __shfl_xor_sync(0xffffffffu, q2, o), lo2 += __shfl_xor_sync(0xffffffffu, lo2, o);
    if (lane % kGroupLanes == 0) atomicAdd(&sm.g[g], q2), atomicAdd(&sm.g[16 + g], lo2);
  }
  // ---- V: the four encodings of each (key, group) into Vc^T (rows 8 c + g); max_key |Vc2[g]| ------------------------
  static_assert(BN * 8 % kEncThreads == 0, "whole warps of (key, group) items");
  for (int i = tid; i < BN * 8; i += kEncThreads) {
    const int key = i / 8, g = i % 8;
    T enc[4];
    float m = encode_v_group<T, C::ND, C::kUnified>(sm.v + key * LD, g, enc);
#pragma unroll
    for (int c = 0; c < 4; ++c) sm.vct[(8 * c + g) * LDT + key] = enc[c];
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));  // the lanes of one group: g = lane % 8
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
    if (lane < 8) atomicMax(reinterpret_cast<int*>(&sm.g[8 + g]), __float_as_int(m));  // non-negative floats order as ints
  }
  __syncthreads();

  // ---- the key norms, Vc^T rows and the tile's scalars ----------------------------------------------------------
  for (int key = tid; key < BN; key += kEncThreads) {
    float a = 0.f;
#pragma unroll
    for (int v8 = 0; v8 < kVec; ++v8) a += sm.kn2[key * kVec + v8];
    sm.kn[key] = sqrtf(a);
  }
  T* vc = reinterpret_cast<T*>(base + w.vc) + static_cast<long long>(kv) * C::kVcRows * seq_pad + k0;
  const uint32_t ones = H::pack(1.f, 1.f);
  for (int i = tid; i < C::kVcRows * BN / 8; i += kEncThreads) {
    const int r = i / (BN / 8), c = i % (BN / 8);  // rows 32..: the row sums' ones
    *reinterpret_cast<uint4*>(vc + static_cast<long long>(r) * seq_pad + c * 8) =
        r < 32 ? *reinterpret_cast<const uint4*>(sm.vct + r * LDT + c * 8) : make_uint4(ones, ones, ones, ones);
  }
  float* sc = reinterpret_cast<float*>(base + w.scal) + (static_cast<long long>(kv) * tiles + tile) * C::kScal;
  __syncthreads();  // the key norms
  if (tid < 8) {
    float kn = 0.f;
    for (int l = 0; l < C::NT; ++l) kn += sm.kn[tid + 8 * l];
    sc[tid] = kn;
  } else if (tid < 24) {
    sc[tid] = sm.g[tid - 8];
  } else if (tid < 32) {
    sc[tid] = sqrtf(sm.g[tid - 8]);
  }
}

// A fragment's registers as the [n8 block][4] array of the m16n8 layout.
template <int N, class Frag>
__device__ __forceinline__ float (&as_blocks(Frag& f))[N][4] {
  return *reinterpret_cast<float(*)[N][4]>(raw_pointer_cast(f.data()));
}

// One block of BM query rows of head bh: the kernel's work for block (m_block, bh), whether launched as the grid's block
// (kernel) or taken from the recomputation list (redo_kernel, which leaves the registers as the launch gives them:
// kSetRegs false).
template <class C, bool kSetRegs>
__device__ __forceinline__ void run_block(const typename C::Params& prm, const int m_block, const int bh) {
  using E = typename C::E;
  using Pipe = typename C::Pipe;
  using PipeQ = typename C::PipeQ;
  extern __shared__ char smem_raw[];
  auto& sm = *reinterpret_cast<typename C::Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const ftgen_attention_problem& p = prm.p;

  const int warp_group = threadIdx.x / 128, warp_in_group = (threadIdx.x / 32) % 4;
  const int lane_predicate = cute::elect_one_sync();
  const int b = bh / p.heads, h = bh % p.heads;
  const int grid_x = (p.seq_q + C::BM - 1) / C::BM;
  const int kvh = ftgen_attention_kv_heads(&p), kv = static_cast<int>(ftgen_attention_kv_bh(&p, bh));  // K / V head
  const int m_base = m_block * C::BM;
  int n_tiles = prm.n_tiles;
  if (C::kCausal) n_tiles = min(n_tiles, (min(m_base + C::BM, p.seq_q) + C::BN - 1) / C::BN);
  if (threadIdx.x == 0) {
    cute::prefetch_tma_descriptor(prm.tma_q.get_tma_descriptor());
    cute::prefetch_tma_descriptor(prm.tma_k.get_tma_descriptor());
    cute::prefetch_tma_descriptor(prm.tma_v.get_tma_descriptor());
    if constexpr (C::kStrided) {
      cute::prefetch_tma_descriptor(prm.tma_kc.get_tma_descriptor());
      cute::prefetch_tma_descriptor(prm.tma_vc.get_tma_descriptor());
    }
  }
  typename Pipe::Params pp;
  pp.transaction_bytes = C::kKVBytes;
  pp.is_leader = warp_group == 0 && warp_in_group == 0 && lane_predicate;
  pp.num_consumers = C::kConsumers;
  pp.role = warp_group == 0 ? (warp_in_group == 0 ? Pipe::ThreadCategory::Producer : Pipe::ThreadCategory::NonParticipant)
                            : Pipe::ThreadCategory::Consumer;
  typename PipeQ::Params pq;
  pq.transaction_bytes = C::kQBytes;
  pq.is_leader = pp.is_leader;
  pq.num_consumers = 128;
  pq.role = warp_group == 0 ? (warp_in_group == 0 ? PipeQ::ThreadCategory::Producer : PipeQ::ThreadCategory::NonParticipant)
                            : PipeQ::ThreadCategory::Consumer;
  Pipe pipe(sm.pipe, pp, Shape<_1, _1, _1>{});
  PipeQ pipe_q(sm.pipe_q, pq, Shape<_1, _1, _1>{});
  __syncthreads();

  auto blk = make_coord(m_block, _0{}, make_coord(b, h));
  auto blk_kv = make_coord(m_block, _0{}, make_coord(b, kv % kvh));  // K, V and their checksums: the K / V head
  if (warp_group == 0) {
    // ---- producer: Q of every consumer, then K (K' with Kc) and V (with Vc) tile by tile -------------------------
    if constexpr (kSetRegs) cutlass::arch::warpgroup_reg_dealloc<C::kProducerRegs>();
    if (warp_in_group != 0) return;
    const auto ps = make_shape(p.batch, p.heads, p.seq_q, p.seq_k, static_cast<int>(C::D));
    const auto ps_kv = make_shape(p.batch, kvh, p.seq_q, p.seq_k, static_cast<int>(C::D));
    fc::CollectiveLoadTma<fc::LoadKind::kQ, PipeQ, E, typename C::LayoutQ, typename C::TmaQ> load_q{prm.tma_q, pipe_q, sm.q};
    // the keys into rows 0..BN-1 of K's stages (the strided levels' Kc rows follow them)
    fc::CollectiveLoadTma<fc::LoadKind::kK, Pipe, E, typename C::LayoutKeys, typename C::TmaK> load_k{
        prm.tma_k, pipe, *reinterpret_cast<typename C::template Store<typename C::LayoutKeys>*>(sm.k.data())};
    fc::CollectiveLoadTma<fc::LoadKind::kV, Pipe, E, typename C::LayoutV, typename C::TmaV> load_v{prm.tma_v, pipe, sm.v};
    auto state_q = load_q.init_state(_0{}, ps, typename C::TileQK{}, blk, C::kWgs);
    auto state_k = load_k.init_state(_0{}, ps_kv, typename C::TileP{}, blk_kv, n_tiles);
    auto state_v = load_v.init_state(_0{}, ps_kv, typename C::TilePV{}, blk_kv, n_tiles);
    typename cutlass::PipelineState<C::kStages> wr = cutlass::make_producer_start_state<Pipe>();
    typename cutlass::PipelineState<C::kWgs> wq = cutlass::make_producer_start_state<PipeQ>();
    auto q_iter = cute::make_coord_iterator(Int<C::kWgs>{});
    auto k_iter = cute::make_coord_iterator(n_tiles);
    int nq = C::kWgs, nk = n_tiles, nv = n_tiles;
    if constexpr (C::kStrided) {
      const auto ps_vc = make_shape(p.batch, kvh, p.seq_q, prm.seq_pad, static_cast<int>(C::kVcRows));
      const auto ps_kc = make_shape(p.batch, kvh, p.seq_q, prm.n_tiles * C::kKcRows, static_cast<int>(C::D));
      // the Kc rows at row BN of K's stages: a 1024-byte aligned offset (BN rows of 128 bytes)
      fc::CollectiveLoadTma<fc::LoadKind::kK, Pipe, E, typename C::LayoutKc, typename C::TmaKc> load_kc{
          prm.tma_kc, pipe, *reinterpret_cast<typename C::template Store<typename C::LayoutKc>*>(sm.k.data() + C::kKcOffset)};
      auto state_kc = load_kc.init_state(_0{}, ps_kc, typename C::TileKc{}, blk_kv, n_tiles);
      int nkc = n_tiles;
      fc::CollectiveLoadTma<fc::LoadKind::kV, Pipe, E, typename C::LayoutVc, typename C::TmaVc> load_vc{prm.tma_vc, pipe, sm.c.vc};
      auto state_vc = load_vc.init_state(_0{}, ps_vc, typename C::TilePVc{}, blk_kv, n_tiles);
      int nvc = n_tiles;
      const auto load_tiles = [&](bool first) {
        if (lane_predicate && nk > 0) pipe.producer_acquire(wr);
        if (lane_predicate && nk > 0) pipe.producer_expect_transaction(wr, C::kKcBytes);  // the stage's Kc rows too
        load_kc.template step<false, false, false>(k_iter, state_kc, wr, lane_predicate, nkc);
        load_k.template step<false, true, false>(k_iter, state_k, wr, lane_predicate, nk);
        while (first && nq > 0) load_q.step(q_iter, state_q, wq, lane_predicate, nq);
        if (lane_predicate && nv > 0) pipe.producer_acquire(wr);
        if (lane_predicate && nv > 0) pipe.producer_expect_transaction(wr, C::kVcBytes);
        load_v.template step<false, false, false>(k_iter, state_v, wr, lane_predicate, nv);
        load_vc.template step<true, true, false>(k_iter, state_vc, wr, lane_predicate, nvc);
      };
      load_q.step(q_iter, state_q, wq, lane_predicate, nq);
      bool first = true;  // the other warpgroups' Q after the first K tile, as below; one copy of the loads' code
      do {
        load_tiles(first);
        first = false;
      } while (nk > 0);
    } else {
      load_q.step(q_iter, state_q, wq, lane_predicate, nq);
      load_k.template step<false>(k_iter, state_k, wr, lane_predicate, nk);
      while (nq > 0) load_q.step(q_iter, state_q, wq, lane_predicate, nq);
      load_v.template step<true>(k_iter, state_v, wr, lane_predicate, nv);
      while (nk > 0) {
        load_k.template step<false>(k_iter, state_k, wr, lane_predicate, nk);
        load_v.template step<true>(k_iter, state_v, wr, lane_predicate, nv);
      }
    }
    // keep the producer's barriers alive until the consumers are done with the last stages
    if (lane_predicate) pipe.producer_tail(wr);
    return;
  }

  // ---- consumers -------------------------------------------------------------------------------------------------
  if constexpr (kSetRegs) cutlass::arch::warpgroup_reg_alloc<C::kConsumerRegs>();
  const int ctid = threadIdx.x - 128, wg = ctid / 128, wtid = ctid % 128, warp = wtid / 32, lane = wtid % 32;
  const int r = lane / 4, cq = (lane % 4) * 2;
  const int wg_row0 = m_base + wg * C::WM;
  const int qrow[2] = {wg_row0 + warp * 16 + r, wg_row0 + warp * 16 + r + 8};
  const long long block = static_cast<long long>(bh) * grid_x + m_block;
  const float scale = p.scale > 0.f ? p.scale : rsqrtf(static_cast<float>(C::D));
  const float sl2 = scale * 1.4426950408889634f;
  const bool fix = !p.no_correct;
  const Rules& rules = prm.rules;
  ThreadFault fault = kNoFault;
  if (C::kInject && p.faults) fault = find_fault(p, block, ctid);
  Tally tally;

  typename C::TiledQK mma_qk;
  typename C::TiledPV mma_pv;
  typename C::TiledPVc mma_pvc;
  auto thr_qk = mma_qk.get_thread_slice(wtid);
  auto thr_pv = mma_pv.get_thread_slice(wtid);
  auto thr_pvc = mma_pvc.get_thread_slice(wtid);
  Tensor sQ = make_tensor(make_smem_ptr(sm.q.data()), typename C::LayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(sm.k.data()), typename C::LayoutK{});
  Tensor sV = make_tensor(make_smem_ptr(sm.v.data()), typename C::LayoutV{});
  Tensor tSrQ = thr_qk.make_fragment_A(thr_qk.partition_A(sQ));
  Tensor tSrK = thr_qk.make_fragment_B(thr_qk.partition_B(sK));
  Tensor tOrV = thr_pv.make_fragment_B(thr_pv.partition_B(sV));
  Tensor acc_s = partition_fragment_C(mma_qk, Shape<_64, Int<C::BNS>>{});  // S, then (strided) its checksum columns
  Tensor acc_o = partition_fragment_C(mma_pv, Shape<_64, Int<C::D>>{});
  Tensor acc_oc = partition_fragment_C(mma_pvc, Shape<_64, Int<C::kVcRows>>{});
  Tensor tOrP = make_fragment_like<E>(fc::convert_c_layout_to_a_layout(partition_fragment_C(typename C::TiledP{}, Shape<_64, Int<C::BN>>{}).layout(),
                                                                     shape<1>(typename C::TiledPV::LayoutA_TV{})));
  static_assert(sizeof(acc_s) == sizeof(float) * C::BNS / 2 && sizeof(acc_o) == sizeof(float) * 4 * C::ND, "fragment sizes");
  static_assert(sizeof(tOrP) == sizeof(uint32_t) * 2 * C::NT, "P fragment size");
  float(&s)[C::NT][4] = as_blocks<C::NT>(acc_s);
  float(&o)[C::ND][4] = as_blocks<C::ND>(acc_o);
  float(&oc)[C::kVcRows / 8][4] = as_blocks<C::kVcRows / 8>(acc_oc);  // O's checksum blocks (efta: then the row sums)
  uint32_t(&pw)[C::NT][2] = *reinterpret_cast<uint32_t(*)[C::NT][2]>(raw_pointer_cast(tOrP.data()));

  typename cutlass::PipelineState<C::kStages> rd;
  typename cutlass::PipelineState<C::kWgs> rq;
  rq.advance(wg);
  pipe_q.consumer_wait(rq);
  const int qs = rq.index();

  // the norms of the thread's two query rows (strided levels), read from global memory (L2: the TMA has just loaded
  // them), the quad's four lanes each a quarter of the row's 16-byte chunks; rows past seq_q have norm 0
  float qn[2] = {0.f, 0.f};
  if constexpr (C::kStrided) {
    using H = Half<typename C::T>;
    const uint4* qg = static_cast<const uint4*>(p.q) + static_cast<long long>(bh) * p.seq_q * (C::D / 8);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float acc = 0.f;
      if (qrow[hh] < p.seq_q) {
#pragma unroll
        for (int i = 0; i < C::D / 32; ++i) {
          const uint4 v = __ldg(qg + static_cast<long long>(qrow[hh]) * (C::D / 8) + lane % 4 + 4 * i);
          for (const uint32_t w : {v.x, v.y, v.z, v.w}) acc = fmaf(H::lo(w), H::lo(w), fmaf(H::hi(w), H::hi(w), acc));
        }
      }
      acc += __shfl_xor_sync(0xffffffffu, acc, 1);
      acc += __shfl_xor_sync(0xffffffffu, acc, 2);
      qn[hh] = sqrtf(acc);
    }
  }

  Rows st;
  float vmag2[2] = {0.f, 0.f};
  bool redo = false;
  clear(acc_o);
  clear(acc_oc);
  mma_pv.accumulate_ = GMMA::ScaleOut::One;
  mma_pvc.accumulate_ = GMMA::ScaleOut::One;
  int keys_seen = 0;
  typename cutlass::PipelineState<C::kStages> v_prev;

  // after tile jj's second product has completed, before O is next rescaled (where S is not live): its O fault (and,
  // with the row sums on the tensor cores, its row-sum fault: the thread's copy in its row sum column), the strided
  // level's O check (lsum: the row sums of tiles 0..jj)
  const auto after_pv = [&](int jj, const float (&lsum)[2]) {
    if (C::kInject && fault.index >= 0 && fault.step == jj) {
      inject_blocks(o, fault, p, FTGEN_ATTN_SITE_O, jj, qrow, 0, cq);
      if constexpr (C::kRowSumTc) {
        float l[2] = {oc[4][0], oc[4][2]};
        inject_row(l, fault, p, FTGEN_ATTN_SITE_ROWSUM, jj, qrow);
        oc[4][0] = l[0], oc[4][2] = l[1];
      }
    }
    if constexpr (C::kStrided && !C::kUnified) {
      if (check_o_tile(o, oc, lsum, keys_seen, jj, vmag2, rules, fix, tally)) redo = true;
    }
  };

  // Ping-pong (FlashAttention-3's schedule, kPingPong): the consumers take turns issuing their products, a turn being
  // one warpgroup's O += P V of tile j - 1 and S = Q K^T of tile j, so that while one warpgroup's products run on the
  // tensor cores the others do their softmax and checks (without turns they tend to wait for their products at the
  // same time, then compete for the issue slots). Turns go round the consumers: named barrier kTurnBar + w opens
  // warpgroup w's turn, its 128 threads bar.sync, the previous warpgroup's 128 (w - 1, cyclically) bar.arrive as
  // their turn ends. The last warpgroup opens the first one's first turn; the others arrive once more after the loop,
  // so that every warpgroup's n_tiles + 1 turns are opened. A turn begins once its operands have arrived, and every
  // warp reconverges before a barrier (bar.sync is aligned).
  const auto turn_begin = [&] {
    if constexpr (C::kPingPong) {
      __syncwarp();
      asm volatile("bar.sync %0, 256;" ::"r"(kTurnBar + wg) : "memory");
    }
  };
  const auto turn_end = [&] {
    if constexpr (C::kPingPong) {
      __syncwarp();
      asm volatile("bar.arrive %0, 256;" ::"r"(kTurnBar + (wg + 1) % C::kWgs) : "memory");
    }
  };
  if (wg == C::kWgs - 1) turn_end();
  if (n_tiles > 0) pipe.consumer_wait(rd);  // K of the first tile
  turn_begin();

  for (int j = 0; j < n_tiles; ++j) {
    const int k0 = j * C::BN;
    keys_seen += C::BN;
    const bool hit = C::kInject && fault.index >= 0 && fault.step == j;
    float kn[2], klo[2], kc2[2], sg[4];  // sg: the S check's group sums (the exp check's fast path)
    unsigned sflag = 1;
    if constexpr (C::kStrided) {
      const float* scj = prm.scal + (static_cast<long long>(kv) * prm.n_tiles + j) * C::kScal;
      kn[0] = __ldg(scj + cq), kn[1] = __ldg(scj + cq + 1);
      klo[0] = __ldg(scj + 24 + cq), klo[1] = __ldg(scj + 24 + cq + 1);
      kc2[0] = __ldg(scj + 8 + cq), kc2[1] = __ldg(scj + 8 + cq + 1);
      vmag2[0] = fmaxf(vmag2[0], __ldg(scj + 16 + cq)), vmag2[1] = fmaxf(vmag2[1], __ldg(scj + 16 + cq + 1));
    }

    // ---- GEMM I: S = Q K^T (strided: with the checksum columns, K' = [K; Kc]); K has arrived ----------------------
    const int ks = rd.index();
    warpgroup_fence_operand(acc_s);
    warpgroup_arrive();
    fc::gemm_zero_acc(mma_qk, tSrQ(_, _, _, qs), tSrK(_, _, _, ks), acc_s);
    warpgroup_commit_batch();
    turn_end();
    auto k_state = rd;
    ++rd;
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(acc_oc);
    if (j > 0) pipe.consumer_release(v_prev);
    if (hit) inject_blocks(s, fault, p, FTGEN_ATTN_SITE_QK, j, qrow, k0, cq);
    if constexpr (C::kStrided) {
      // not located: the thread's rows are recomputed after the kernel (a wgmma is the warpgroup's, so recomputing the
      // tile at once would need the warpgroup to agree first)
      // the checksum columns: n8 blocks NT.. of the same fragment (unit, weighted)
      const float(&sc)[2][4] = *reinterpret_cast<const float(*)[2][4]>(&as_blocks<C::BNS / 8>(acc_s)[C::NT]);
      if (check_s(s, sc, qn, kn, klo, kc2, C::D, rules, fix, tally, sg, &sflag)) redo = true;
    }
    pipe.consumer_release(k_state);

    // ---- mask, softmax ------------------------------------------------------------------------------------
    const bool masked = k0 + C::BN > p.seq_k || (C::kCausal && k0 + C::BN - 1 > wg_row0);
    if (masked) mask_tile<C::kCausal>(s, k0, p.seq_k, qrow, cq);
    float alpha[2];
    const float lprev[2] = {st.lsum[0], st.lsum[1]};
    if (softmax_tile<C>(s, pw, alpha, st, At{fault, p, hit, j, k0, cq, {qrow[0], qrow[1]}}, sl2, rules, fix, tally, sg,
                        !masked && sflag == 0))
      redo = true;

    // ---- GEMM II: O = diag(alpha) O + P V (and the checksum columns) ------------------------------------------
    if (j > 0) after_pv(j - 1, lprev);
    scale_rows(o, alpha);
    if constexpr (C::kStrided) scale_rows(oc, alpha);
    pipe.consumer_wait(rd);
    const int vs = rd.index();
    auto v_state = rd;
    ++rd;
    if (j + 1 < n_tiles) pipe.consumer_wait(rd);  // K of the next tile, before the turn
    turn_begin();
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(acc_oc);
    warpgroup_fence_operand(tOrP);
    warpgroup_arrive();
    cute::gemm(mma_pv, tOrP, tOrV(_, _, _, vs), acc_o);
    if constexpr (C::kStrided) {
      Tensor sVc = make_tensor(make_smem_ptr(sm.c.vc.data()), typename C::LayoutVc{});
      cute::gemm(mma_pvc, tOrP, thr_pvc.make_fragment_B(thr_pvc.partition_B(sVc))(_, _, _, vs), acc_oc);
    }
    warpgroup_commit_batch();
    v_prev = v_state;
  }
  if (wg != C::kWgs - 1) turn_end();
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc_o);
  warpgroup_fence_operand(acc_oc);
  if (n_tiles > 0) {
    after_pv(n_tiles - 1, st.lsum);
    pipe.consumer_release(v_prev);
  }

  // ---- row sums, 1/l, normalization, the unified verification --------------------------------------------------
  if (finish_rows<C>(o, oc, st, vmag2, keys_seen, n_tiles, qrow, fault, p, C::kInject, rules, fix, tally)) redo = true;
  if constexpr (C::kProtected) {  // the list is cleared before the launch; the block's first warp to flag lists it
    if (redo) ++tally.recomputed;
    if (__any_sync(0xffffffffu, redo) && lane == 0 && wg_row0 < p.seq_q &&
        atomicExch(prm.redo + kRedoHead + block, 1) == 0)
      prm.redo[kRedoHead + Workspace<C>::blocks(p) + atomicAdd(prm.redo, 1)] = static_cast<int>(block);
  }

  // ---- store O, the counters --------------------------------------------------------------------------------
  store_rows(static_cast<typename C::T*>(p.o) + static_cast<long long>(bh) * p.seq_q * C::D, o, qrow, p.seq_q, cq);
  // the counters once per warp: what a fault corrupts stays in one row (S, P, the row's scalars) or one element of O,
  // and a row is one warp's (its quad's four lanes)
  if constexpr (C::kProtected) tally.flush_warp(p.counters);
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) kernel(const __grid_constant__ typename C::Params prm) {
  run_block<C, true>(prm, blockIdx.x, blockIdx.y);
}

// The recomputation of the listed blocks (C: the unprotected configuration; prm.redo: the protected launch's list): a
// block takes entries blockIdx.x, + gridDim.x, ...; between two entries every thread has left the previous one (its
// pipelines drained, producer_tail), and the pipelines' barriers are invalidated and initialized anew.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) redo_kernel(const __grid_constant__ typename C::Params prm) {
  const int* list = prm.redo + kRedoHead + Workspace<C>::blocks(prm.p);
  const int count = *prm.redo, grid_x = (prm.p.seq_q + C::BM - 1) / C::BM;
  for (int i = blockIdx.x; i < count; i += gridDim.x) {
    if (i != static_cast<int>(blockIdx.x)) {
      __syncthreads();
      if (threadIdx.x == 0) {
        extern __shared__ char smem_raw[];
        auto& sm = *reinterpret_cast<typename C::Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
        static_assert(sizeof(sm.pipe) % 8 == 0 && sizeof(sm.pipe_q) % 8 == 0, "pipelines' storage: 64-bit barriers");
        const auto inval = [](void* bars, int n) {
          for (int k = 0; k < n; ++k) {
            const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(static_cast<uint64_t*>(bars) + k));
            asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(a) : "memory");
          }
        };
        inval(&sm.pipe, static_cast<int>(sizeof(sm.pipe) / 8));
        inval(&sm.pipe_q, static_cast<int>(sizeof(sm.pipe_q) / 8));
      }
      __syncthreads();
    }
    const int item = list[i];
    run_block<C, false>(prm, item % grid_x, item / grid_x);
  }
}

// The parameters of configuration C's kernel for problem p: Q, K and V's TMA descriptors and, in the protected
// configurations, the workspace's parts (the checksums' descriptors and scalars, the redo flags).
template <class C>
typename C::Params params(const ftgen_attention_problem& p, const Rules& rules) {
  using E = typename C::E;
  const int B = p.batch, Hh = p.heads, Hk = ftgen_attention_kv_heads(&p), Lq = p.seq_q, Lk = p.seq_k, D = C::D;
  typename C::Params prm{};
  prm.p = p;
  prm.rules = rules;
  prm.n_tiles = (Lk + C::BN - 1) / C::BN;
  prm.seq_pad = prm.n_tiles * C::BN;
  const int tiles = prm.n_tiles, seq_pad = prm.seq_pad;
  using RS = typename C::RowStride;
  using CS = typename C::ColStride;
  const RS dq{D, _1{}, make_tuple(Hh * Lq * D, Lq * D)}, dk{D, _1{}, make_tuple(Hk * Lk * D, Lk * D)};
  const auto* q = static_cast<const E*>(p.q);
  const auto* k = static_cast<const E*>(p.k);
  const auto* v = static_cast<const E*>(p.v);
  // Q's descriptor over (batch, heads), K's and V's (and their checksums') over (batch, kv_heads): each a problem of
  // its own, of which one operand's descriptor is kept
  auto pqk = C::MmaQK::to_underlying_arguments(make_shape(Lq, Lk, D, make_shape(B, Hh)), typename C::MmaQK::Arguments{q, dq, k, dk},
                                               nullptr);
  // K's descriptor: BN-row tiles of K (the strided levels' Kc rows have a descriptor of their own, below)
  const Workspace<C> w(p);
  unsigned char* base = static_cast<unsigned char*>(p.workspace);
  auto pk = C::MmaP::to_underlying_arguments(make_shape(Lq, Lk, D, make_shape(B, Hk)), typename C::MmaP::Arguments{q, dk, k, dk}, nullptr);
  auto ppv = C::MmaPV::to_underlying_arguments(make_shape(Lq, D, Lk, make_shape(B, Hk)),
                                               typename C::MmaPV::Arguments{k, dk, v, CS{_1{}, D, make_tuple(Hk * Lk * D, Lk * D)}}, nullptr);
  prm.tma_q = pqk.tma_load_a;
  prm.tma_k = pk.tma_load_b;
  prm.tma_v = ppv.tma_load_b;
  if constexpr (C::kProtected) {
    prm.redo = reinterpret_cast<int*>(base + w.redo);
    if constexpr (C::kStrided) {
      const auto* vc = reinterpret_cast<const E*>(base + w.vc);
      auto pvc = C::MmaPVc::to_underlying_arguments(
          make_shape(Lq, static_cast<int>(C::kVcRows), seq_pad, make_shape(B, Hk)),
          typename C::MmaPVc::Arguments{q, dk, vc, RS{seq_pad, _1{}, make_tuple(Hk * C::kVcRows * seq_pad, C::kVcRows * seq_pad)}},
          nullptr);
      prm.tma_vc = pvc.tma_load_b;
      const auto* kc = reinterpret_cast<const E*>(base + w.kc);
      const int lkc = tiles * C::kKcRows;
      const RS dkc{D, _1{}, make_tuple(Hk * lkc * D, lkc * D)};
      auto pkc = C::MmaKc::to_underlying_arguments(make_shape(Lq, lkc, D, make_shape(B, Hk)), typename C::MmaKc::Arguments{q, dkc, kc, dkc},
                                                   nullptr);
      prm.tma_kc = pkc.tma_load_b;
      prm.scal = reinterpret_cast<const float*>(base + w.scal);
    }
  }
  return prm;
}

template <class C>
cudaError_t launch(const ftgen_attention_problem* p, const Rules& rules, cudaStream_t stream) {
  if (p->head_dim != C::D || !ftgen_attention_shape_ok(p)) return cudaErrorInvalidValue;
  if (C::kCausal && p->seq_k != p->seq_q) return cudaErrorInvalidValue;
  if (C::kProtected && !p->workspace) return cudaErrorInvalidValue;  // workspace() bytes: encodings, redo flags
  const typename C::Params prm = params<C>(*p, rules);
  const dim3 grid((p->seq_q + C::BM - 1) / C::BM, p->batch * p->heads);
  if constexpr (C::kStrided) {
    constexpr int kEncSmem = static_cast<int>(sizeof(EncSmem<C>));
    if (const cudaError_t e = ftgen::set_smem(encode_kernel<C>, kEncSmem); e != cudaSuccess) return e;
    encode_kernel<C><<<dim3(static_cast<unsigned>(prm.n_tiles), p->batch * ftgen_attention_kv_heads(p)), kEncThreads, kEncSmem, stream>>>(*p);
  }
  if constexpr (C::kProtected) {  // the recomputation list (the workspace's last part) cleared
    const Workspace<C> w(*p);
    if (const cudaError_t e = cudaMemsetAsync(prm.redo, 0, w.bytes - w.redo, stream); e != cudaSuccess) return e;
  }
  if (const cudaError_t e = ftgen::set_smem(kernel<C>, C::kSmem); e != cudaSuccess) return e;
  kernel<C><<<grid, C::kThreads, C::kSmem, stream>>>(prm);
  if constexpr (C::kProtected) {
    // the blocks a warpgroup could not correct, recomputed by this kernel unprotected (no faults): one wave of blocks
    // over the list (FTGEN_ATTENTION_REDO_BLOCKS: fewer, to test the blocks' turns over several entries)
    using R = typename C::Redo;
    static_assert(R::BM == C::BM, "the recomputation's blocks are the kernel's");
    ftgen_attention_problem q2 = *p;
    q2.faults = nullptr, q2.fault_records = nullptr, q2.fault_count = 0, q2.counters = nullptr;
    typename R::Params rp = params<R>(q2, rules);
    rp.redo = prm.redo;
    int dev = 0, sms = 0;
    if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
    static const int forced = [] {
      const char* s = std::getenv("FTGEN_ATTENTION_REDO_BLOCKS");
      return s ? std::atoi(s) : 0;
    }();
    const long long blocks = Workspace<C>::blocks(*p);
    const int n = static_cast<int>(std::min<long long>(blocks, forced > 0 ? forced : sms));
    if (const cudaError_t e = ftgen::set_smem(redo_kernel<R>, R::kSmem); e != cudaSuccess) return e;
    redo_kernel<R><<<n, R::kThreads, R::kSmem, stream>>>(rp);
  }
  return cudaGetLastError();
}

}  // namespace wg
}  // namespace ftattn
