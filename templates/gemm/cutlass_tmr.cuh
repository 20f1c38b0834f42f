// ftgen gemm, CUTLASS backend: triple modular redundancy (TMR) around CUTLASS 2.x tensor-op GEMMs.
// Copied verbatim into every generated CUTLASS variant. Do not edit the copies.
//
// Every kernel here is built from the components of one `cutlass::gemm::device::Gemm` type (emitted
// by cutlass_library): its threadblock Mma (global iterators, shared-memory layouts, warp-level
// tensor-core MMA), its Epilogue and its ThreadblockSwizzle. `Mainloop` is CUTLASS's MmaMultistage
// (cp.async multistage pipeline) with two additions: it updates kCopies accumulator sets from the
// same warp fragments, and it calls a hook after every k-iteration (checkpoints, fault injection).
//
//   level        | copies                                   | vote
//   -------------+------------------------------------------+----------------------------------------
//   kernel       | 3 launches on 3 streams                  | the last copy of a tile to finish (+ recompute_kernel)
//   threadblock  | 3 accumulator sets in one threadblock    | registers, every `interval` k-iterations
//   multikernel  | 1 launch per k-chunk per copy            | vote_states_kernel between chunks, then as kernel
//   cooperative  | 3 threadblocks on 3 SMs (cooperative)    | digests, then (on a mismatch) accumulators
//                |                                          | through global memory at team barriers
//
// Votes compare bit patterns: fault-free copies run identical instructions on identical data. The
// compiler must not merge the three copies of the threadblock level, so each copy's accumulators
// start from a distinct kernel parameter holding zero (`zero_bits`), which no optimizer can prove
// equal to the others.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "cutlass/cutlass.h"
#include "cutlass/fast_math.h"
#include "cutlass/numeric_types.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/arch/memory_sm80.h"

#include "ftgen_ft.cuh"
#include "ftgen_gemm.h"
#include "ftgen_rules.h"

// Every generated variant compiles its own copy of what follows; internal linkage keeps the copies of two variants
// apart when both are linked into one library.
namespace ftgen_tmr {
namespace {

#ifndef FTGEN_TMR_INJECT
#define FTGEN_TMR_INJECT 0
#endif

#ifndef FTGEN_ABFT_PREPASS
#define FTGEN_ABFT_PREPASS 0  // threadblock ABFT: reference checksums from a pre-pass (ref_checksums: prepass)
#endif
constexpr bool kAbftPrepass = FTGEN_ABFT_PREPASS != 0;
#ifndef FTGEN_ABFT_CONCURRENT
#define FTGEN_ABFT_CONCURRENT 0  // ref_checksums: concurrent (implies the pre-pass)
#endif
constexpr bool kAbftConcurrent = FTGEN_ABFT_CONCURRENT != 0;
#ifndef FTGEN_ABFT_STRIP_N
#define FTGEN_ABFT_STRIP_N 0  // ref_checksums: concurrent: columns of a checksum strip (whole warp columns; 0: the tile's tb_n)
#endif
constexpr int kAbftStripN = FTGEN_ABFT_STRIP_N;
#ifndef FTGEN_ABFT_REF_EXTERNAL
#define FTGEN_ABFT_REF_EXTERNAL 0  // ref_checksums: concurrent around another backend's GEMM: its reference GEMM too
#endif
// The reference D = A E (E: k x ref_w, D: m x ref_w, fp32, row-major) from the caller of run_external (the cutlass90
// backend's sm90 tf32x3 kernel, on the pre-passes' stream) in place of AbftRefGemm's batched sub-chunks: E and D for
// any k, one sub-chunk of the whole k
constexpr bool kAbftRefExternal = FTGEN_ABFT_REF_EXTERNAL != 0;
static_assert(!kAbftConcurrent || kAbftPrepass, "ref_checksums: concurrent runs the pre-pass kernels");

enum Level : int { kLevelNone = 0, kLevelKernel = 1, kLevelThreadblock = 2, kLevelMultikernel = 3, kLevelCooperative = 4, kLevelAbft = 5 };
constexpr int kCopies = 3;
constexpr int kMaxAttempts = 3;  // computations of a tile: the first and at most two recomputations (gemm_cutlass.MAX_ATTEMPTS)

// ----------------------------------------------------------------------------------------------
// Bit patterns and the vote of one element
// ----------------------------------------------------------------------------------------------

template <int Bytes>
struct UIntOf;
template <>
struct UIntOf<2> {
  using type = uint16_t;
};
template <>
struct UIntOf<4> {
  using type = uint32_t;
};
template <>
struct UIntOf<8> {
  using type = unsigned long long;
};
template <class T>
using Bits = typename UIntOf<sizeof(T)>::type;

template <class T>
CUTLASS_HOST_DEVICE Bits<T> to_bits(T const& x) {
  Bits<T> u;
  memcpy(&u, &x, sizeof(u));
  return u;
}
template <class T>
CUTLASS_HOST_DEVICE T from_bits(Bits<T> u) {
  T x;
  memcpy(&x, &u, sizeof(u));
  return x;
}

// Vote status of one element and the vote (ftgen_rules.h): 0 the copies agree; 1 + c: copy c is the minority
// (the other two agree); 4: all three differ. `maj` is the majority (u0 when all differ). Same table as
// gemm_cutlass.classify.
using ftgen_rules::VoteStatus;
using ftgen_rules::kAgree;
using ftgen_rules::kMinority0;
using ftgen_rules::kMinority1;
using ftgen_rules::kMinority2;
using ftgen_rules::kUncorrectable;
using ftgen_rules::vote_element;

// Per-thread tallies, flushed to the FtCounters with one atomic per non-zero field.
struct Tally {
  unsigned detected = 0, corrected = 0, uncorrectable = 0;
  CUTLASS_DEVICE void flush(ftgen::FtCounters* c) const {
    if (c == nullptr) return;
    if (detected) atomicAdd(&c->detected, static_cast<unsigned long long>(detected));
    if (corrected) atomicAdd(&c->corrected, static_cast<unsigned long long>(corrected));
    if (uncorrectable) atomicAdd(&c->uncorrectable, static_cast<unsigned long long>(uncorrectable));
  }
};

// vote_element, counted: detected, then corrected or uncorrectable (which also sets `unc`).
template <class U>
CUTLASS_DEVICE int counted_vote(U u0, U u1, U u2, U& maj, Tally& tally, bool& unc) {
  return ftgen_rules::counted_vote(u0, u1, u2, maj, tally.detected, tally.corrected, tally.uncorrectable, unc);
}

CUTLASS_DEVICE void count_recomputed(ftgen::FtCounters* c) {
  if (c) atomicAdd(&c->recomputed, 1ull);
}

CUTLASS_DEVICE unsigned sm_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

CUTLASS_DEVICE unsigned ld_acquire(unsigned const* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Fill a fragment with the (zero) value whose bit pattern is an opaque kernel parameter.
template <class Fragment>
CUTLASS_DEVICE void fill_opaque(Fragment& f, unsigned long long zero_bits) {
  using E = typename Fragment::Element;
  const E z = from_bits<E>(static_cast<Bits<E>>(zero_bits));
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < Fragment::kElements; ++i) f[i] = z;
}

// ----------------------------------------------------------------------------------------------
// Types of one CUTLASS device-level GEMM
// ----------------------------------------------------------------------------------------------

template <class Op_>
struct Kit {
  using Op = Op_;
  using GemmKernel = typename Op::GemmKernel;
  using Mma = typename GemmKernel::Mma;
  using Epilogue = typename GemmKernel::Epilogue;
  using OutputOp = typename GemmKernel::OutputOp;
  using Swizzle = typename GemmKernel::ThreadblockSwizzle;
  using GemmParams = typename GemmKernel::Params;
  using ElementA = typename Op::ElementA;
  using ElementB = typename Op::ElementB;
  using ElementC = typename Op::ElementC;
  using ElementAcc = typename Op::ElementAccumulator;
  using ElementCompute = typename OutputOp::ElementCompute;
  using LayoutA = typename Op::LayoutA;
  using LayoutB = typename Op::LayoutB;
  using Shape = typename Mma::Shape;
  using WarpCount = typename Mma::WarpCount;
  using Operator = typename Mma::Operator;
  using FragmentC = typename Mma::FragmentC;
  using OutParams = typename Epilogue::OutputTileIterator::Params;
  static int const kThreads = GemmKernel::kThreadCount;
  static int const kAccElems = FragmentC::kElements;
  static int const kVec = 16 / int(sizeof(ElementAcc));  // accumulators per 16-byte access
  static int const kTileElems = kThreads * kAccElems;
  static int const kAlignA = Mma::IteratorA::AccessType::kElements;
  static int const kAlignB = Mma::IteratorB::AccessType::kElements;
  static int const kAlignC = Epilogue::OutputTileIterator::kElementsPerAccess;
  static_assert(kTileElems == Shape::kM * Shape::kN, "one accumulator per tile element");
  static_assert(kAccElems % kVec == 0, "accumulators move in 16-byte vectors");
  static_assert(std::is_same<typename Op::LayoutC, cutlass::layout::RowMajor>::value, "C is row-major");
};

// Row and column, within the warp tile, of accumulator element `e` of lane `lane` (the mapping of
// CUTLASS's MmaTensorOpAccumulatorTileIterator). Used to report where an injected fault landed.
template <class Operator>
struct AccLayout {
  using Inst = typename Operator::InstructionShape;
  using Iter = typename Operator::MmaIterations;
  static int const kEPA = Inst::kN / 4;
  static int const kRows = Inst::kM / 8;
  static int const kPerMma = kRows * kEPA;
  static_assert(Operator::Policy::OpDelta::kRow == 1 && Operator::Policy::OpDelta::kColumn == 1, "unit OpDelta");
  static_assert(Operator::FragmentC::kElements == kPerMma * Iter::kCount, "accumulator layout");
  CUTLASS_DEVICE static void coord(int lane, int e, int& row, int& col) {
    const int mma = e / kPerMma, r = (e % kPerMma) / kEPA, c = e % kEPA;
    const int mma_m = mma % Iter::kRow, mma_n = mma / Iter::kRow;
    row = (lane >> 2) + mma_m * Inst::kM + r * 8;
    col = (lane & 3) * kEPA + mma_n * Inst::kN + c;
  }
};

// ----------------------------------------------------------------------------------------------
// Mainloop: cutlass::gemm::threadblock::MmaMultistage with kCopies accumulator sets and a hook
// called with (k-iteration, accumulators) after every k-iteration.
// ----------------------------------------------------------------------------------------------

template <class Mma_, int kCopies_, cutlass::gemm::SharedMemoryClearOption kClear>
class Mainloop : public cutlass::gemm::threadblock::MmaBase<typename Mma_::Shape, typename Mma_::Policy, Mma_::kStages> {
 public:
  using Base = cutlass::gemm::threadblock::MmaBase<typename Mma_::Shape, typename Mma_::Policy, Mma_::kStages>;
  using Shape = typename Mma_::Shape;
  using IteratorA = typename Mma_::IteratorA;
  using IteratorB = typename Mma_::IteratorB;
  using SmemIteratorA = typename Mma_::SmemIteratorA;
  using SmemIteratorB = typename Mma_::SmemIteratorB;
  using Policy = typename Mma_::Policy;
  using Operator = typename Policy::Operator;
  using FragmentC = typename Operator::FragmentC;
  using SharedStorage = typename Base::SharedStorage;
  static cutlass::arch::CacheOperation::Kind const kCacheOpA = Mma_::kCacheOpA;
  static cutlass::arch::CacheOperation::Kind const kCacheOpB = Mma_::kCacheOpB;
  static int const kNumCopies = kCopies_;
  static int const kStages = Base::kStages;
  static int const kWarpGemmIterations = Base::kWarpGemmIterations;
  static int const kIterationsA = IteratorA::ThreadMap::Iterations::kCount;
  static int const kIterationsB = IteratorB::ThreadMap::Iterations::kCount;
  static int const kAccessesPerGroupA = (kIterationsA + kWarpGemmIterations - 1) / kWarpGemmIterations;
  static int const kAccessesPerGroupB = (kIterationsB + kWarpGemmIterations - 1) / kWarpGemmIterations;
  // Staged accumulation (tf32x3, OpMultiplyAddFastF32): each k-iteration's MMAs go into a zeroed fragment
  // that is then added to the accumulators (short truncating fp32 chains). CUTLASS adds it after the first
  // k-group of the next k-iteration; here it is added at the end of the k-iteration itself (same chain
  // lengths and cost), so the accumulators are complete whenever the hook runs.
  static bool const kStaged = cutlass::arch::detail::UseStagedAccumulation<Operator>::value;
  static_assert(kClear != cutlass::gemm::SharedMemoryClearOption::kClearLastStage, "kClearLastStage is not supported");
  static_assert(kStages >= 3, "multistage pipeline");

 private:
  struct PipeState {
    typename Operator::FragmentA loaded_A[2];
    typename Operator::TransformedFragmentA tA[2];
    typename Operator::FragmentB loaded_B[2];
    typename Operator::TransformedFragmentB tB[2];
    FragmentC staged[kStaged ? kCopies_ : 1];
  };

  Operator warp_mma_;
  SmemIteratorA smem_iterator_A_;
  SmemIteratorB smem_iterator_B_;
  int smem_write_stage_idx_;
  int smem_read_stage_idx_;

 public:
  CUTLASS_DEVICE
  Mainloop(SharedStorage& shared_storage, int thread_idx, int warp_idx, int lane_idx)
      : Base(shared_storage, thread_idx, warp_idx, lane_idx),
        smem_iterator_A_(shared_storage.operand_A_ref(), thread_idx),
        smem_iterator_B_(shared_storage.operand_B_ref(), thread_idx),
        smem_write_stage_idx_(0),
        smem_read_stage_idx_(0) {
    const int warp_idx_mn = warp_idx % (Base::WarpCount::kM * Base::WarpCount::kN);
    const int warp_idx_k = warp_idx / (Base::WarpCount::kM * Base::WarpCount::kN);
    const int warp_idx_m = warp_idx_mn % Base::WarpCount::kM;
    const int warp_idx_n = warp_idx_mn / Base::WarpCount::kM;
    this->warp_tile_iterator_A_.add_tile_offset({warp_idx_m, Base::kWarpGemmIterations * warp_idx_k});
    this->warp_tile_iterator_B_.add_tile_offset({Base::kWarpGemmIterations * warp_idx_k, warp_idx_n});
  }

  CUTLASS_DEVICE void advance_smem_read_stage() {
    ++smem_read_stage_idx_;
    if (smem_read_stage_idx_ == kStages) {
      this->warp_tile_iterator_A_.add_tile_offset({0, -kStages * Policy::kPartitionsK * kWarpGemmIterations});
      this->warp_tile_iterator_B_.add_tile_offset({-kStages * Policy::kPartitionsK * kWarpGemmIterations, 0});
      smem_read_stage_idx_ = 0;
    }
  }

  CUTLASS_DEVICE void advance_smem_write_stage(IteratorA& iterator_A, IteratorB& iterator_B) {
    iterator_A.add_tile_offset({0, 1});
    iterator_B.add_tile_offset({1, 0});
    smem_iterator_A_.add_tile_offset({0, 1});
    smem_iterator_B_.add_tile_offset({1, 0});
    ++smem_write_stage_idx_;
    if (smem_write_stage_idx_ == kStages) {
      smem_iterator_A_.add_tile_offset({0, -kStages});
      smem_iterator_B_.add_tile_offset({-kStages, 0});
      smem_write_stage_idx_ = 0;
    }
  }

  template <class Iterator, class SmemIterator, cutlass::arch::CacheOperation::Kind kCacheOp, int kGroup, int kIterations,
            bool kAlwaysZfill>
  CUTLASS_DEVICE static void copy_group(Iterator& iterator, SmemIterator& smem_iterator, int group_start) {
    iterator.set_iteration_index(group_start * Iterator::kAccessesPerVector);
    smem_iterator.set_iteration_index(group_start);
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kGroup; ++j) {
      if (group_start + j < kIterations) {
        typename Iterator::AccessType* dst_ptr = reinterpret_cast<typename Iterator::AccessType*>(smem_iterator.get());
        int const kSrcBytes = cutlass::sizeof_bits<typename Iterator::Element>::value *
                              Iterator::ThreadMap::kElementsPerAccess / Iterator::kAccessesPerVector / 8;
        CUTLASS_PRAGMA_UNROLL
        for (int v = 0; v < Iterator::kAccessesPerVector; ++v) {
          auto gmem_ptr = iterator.get();
          if (kAlwaysZfill || kClear == cutlass::gemm::SharedMemoryClearOption::kZfill) {
            cutlass::arch::cp_async_zfill<kSrcBytes, kCacheOp>(dst_ptr + v, gmem_ptr, iterator.valid());
          } else {
            cutlass::arch::cp_async<kSrcBytes, kCacheOp>(dst_ptr + v, gmem_ptr, iterator.valid());
          }
          ++iterator;
        }
        ++smem_iterator;
      }
    }
  }

  CUTLASS_DEVICE void copy_tiles_and_advance(IteratorA& iterator_A, IteratorB& iterator_B, int group_start_A, int group_start_B) {
    copy_group<IteratorA, SmemIteratorA, kCacheOpA, kAccessesPerGroupA, kIterationsA, false>(iterator_A, smem_iterator_A_, group_start_A);
    copy_group<IteratorB, SmemIteratorB, kCacheOpB, kAccessesPerGroupB, kIterationsB, false>(iterator_B, smem_iterator_B_, group_start_B);
  }

  // Fetch the first kStages - 1 k-tiles (zero-filled outside the problem, as in MmaMultistage).
  CUTLASS_DEVICE void prologue(IteratorA& iterator_A, IteratorB& iterator_B, int& gemm_k_iterations) {
    CUTLASS_PRAGMA_UNROLL
    for (int stage = 0; stage < kStages - 1; ++stage, --gemm_k_iterations) {
      iterator_A.clear_mask(gemm_k_iterations == 0);
      iterator_B.clear_mask(gemm_k_iterations == 0);
      copy_group<IteratorA, SmemIteratorA, kCacheOpA, kIterationsA, kIterationsA, true>(iterator_A, smem_iterator_A_, 0);
      copy_group<IteratorB, SmemIteratorB, kCacheOpB, kIterationsB, kIterationsB, true>(iterator_B, smem_iterator_B_, 0);
      advance_smem_write_stage(iterator_A, iterator_B);
      cutlass::arch::cp_async_fence();
    }
  }

  CUTLASS_DEVICE void gmem_wait() {
    cutlass::arch::cp_async_wait<kStages - 2>();
    __syncthreads();
  }

  // One k-iteration (one threadblock k-tile) of MMAs into every accumulator set. `group(g, frag_A)` runs
  // after the MMAs of warp-level k-group g are issued, with that k-group's A fragment as loaded from shared
  // memory (before the tensor-core transform): work that fills the issue slots between the MMAs.
  template <class Group>
  CUTLASS_DEVICE void mac_loop_iter(PipeState& pipe, FragmentC (&accum)[kNumCopies], IteratorA& iterator_A, IteratorB& iterator_B,
                                    int& gemm_k_iterations, Group&& group) {
    CUTLASS_PRAGMA_UNROLL
    for (int warp_mma_k = 0; warp_mma_k < kWarpGemmIterations; ++warp_mma_k) {
      this->warp_tile_iterator_A_.set_kgroup_index((warp_mma_k + 1) % kWarpGemmIterations);
      this->warp_tile_iterator_A_.load(pipe.loaded_A[(warp_mma_k + 1) % 2]);
      ++this->warp_tile_iterator_A_;
      this->warp_tile_iterator_B_.set_kgroup_index((warp_mma_k + 1) % kWarpGemmIterations);
      this->warp_tile_iterator_B_.load(pipe.loaded_B[(warp_mma_k + 1) % 2]);
      ++this->warp_tile_iterator_B_;
      if (warp_mma_k > 0) {
        warp_mma_.transform(pipe.tA[warp_mma_k % 2], pipe.tB[warp_mma_k % 2], pipe.loaded_A[warp_mma_k % 2],
                            pipe.loaded_B[warp_mma_k % 2]);
      }
      // The same fragments feed every copy: shared-memory and global loads are not repeated.
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kNumCopies; ++c) {
        if constexpr (kStaged) {
          warp_mma_(pipe.staged[c], pipe.tA[warp_mma_k % 2], pipe.tB[warp_mma_k % 2], pipe.staged[c]);
        } else {
          warp_mma_(accum[c], pipe.tA[warp_mma_k % 2], pipe.tB[warp_mma_k % 2], accum[c]);
        }
      }
      group(warp_mma_k, pipe.loaded_A[warp_mma_k % 2]);
      if (warp_mma_k < kWarpGemmIterations - 1) {
        copy_tiles_and_advance(iterator_A, iterator_B, warp_mma_k * kAccessesPerGroupA, warp_mma_k * kAccessesPerGroupB);
      }
      if (warp_mma_k + 2 == kWarpGemmIterations) {
        copy_tiles_and_advance(iterator_A, iterator_B, (warp_mma_k + 1) * kAccessesPerGroupA,
                               (warp_mma_k + 1) * kAccessesPerGroupB);
        cutlass::arch::cp_async_fence();
        gmem_wait();
        advance_smem_write_stage(iterator_A, iterator_B);
        advance_smem_read_stage();
        --gemm_k_iterations;
        iterator_A.clear_mask(gemm_k_iterations == 0);
        iterator_B.clear_mask(gemm_k_iterations == 0);
      }
      if (warp_mma_k + 1 == kWarpGemmIterations) {
        warp_mma_.transform(pipe.tA[(warp_mma_k + 1) % 2], pipe.tB[(warp_mma_k + 1) % 2], pipe.loaded_A[(warp_mma_k + 1) % 2],
                            pipe.loaded_B[(warp_mma_k + 1) % 2]);
      }
    }
    if constexpr (kStaged) {
      cutlass::plus<FragmentC> plus_accum;
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kNumCopies; ++c) {
        accum[c] = plus_accum(accum[c], pipe.staged[c]);
        pipe.staged[c].clear();
      }
    }
  }

  // Run `gemm_k_iterations` k-iterations from the iterators' positions. After k-iteration `it`
  // (0, 1, ...) `check(it, accum)` runs inside the pipelined loop and must not change the
  // accumulators; when it returns true the loop is left, `slow(it, accum)` runs (repairs,
  // injected faults) and the loop resumes. Keeping accumulator updates out of the hot loop keeps
  // the tensor-core results in place (no register copies per iteration). Leaves all cp.async
  // drained and the block synchronized (shared memory free).
  template <class Check, class Slow>
  CUTLASS_DEVICE void run(int gemm_k_iterations, FragmentC (&accum)[kNumCopies], IteratorA iterator_A, IteratorB iterator_B,
                          Check&& check, Slow&& slow) {
    run(gemm_k_iterations, accum, iterator_A, iterator_B, [] {}, check, slow, [](int, typename Operator::FragmentA const&) {});
  }

  // As run() above; `pre()` runs once the first k-iteration's tiles are in shared memory.
  // `group(g, frag_A)`: see mac_loop_iter.
  template <class Pre, class Check, class Slow, class Group>
  CUTLASS_DEVICE void run(int gemm_k_iterations, FragmentC (&accum)[kNumCopies], IteratorA iterator_A, IteratorB iterator_B,
                          Pre&& pre, Check&& check, Slow&& slow, Group&& group) {
    prologue(iterator_A, iterator_B, gemm_k_iterations);
    gmem_wait();
    pre();
    PipeState pipe;
    if constexpr (kStaged) {
      CUTLASS_PRAGMA_UNROLL
      for (int c = 0; c < kNumCopies; ++c) pipe.staged[c].clear();
    }
    iterator_A.clear_mask(gemm_k_iterations == 0);
    iterator_B.clear_mask(gemm_k_iterations == 0);
    this->warp_tile_iterator_A_.set_kgroup_index(0);
    this->warp_tile_iterator_A_.load(pipe.loaded_A[0]);
    ++this->warp_tile_iterator_A_;
    this->warp_tile_iterator_B_.set_kgroup_index(0);
    this->warp_tile_iterator_B_.load(pipe.loaded_B[0]);
    ++this->warp_tile_iterator_B_;
    warp_mma_.transform(pipe.tA[0], pipe.tB[0], pipe.loaded_A[0], pipe.loaded_B[0]);
    int it = 0;
    while (true) {
      bool hit = false;
      CUTLASS_GEMM_LOOP
      for (; gemm_k_iterations > (-kStages + 1);) {
        mac_loop_iter(pipe, accum, iterator_A, iterator_B, gemm_k_iterations, group);
        hit = check(it, accum);
        ++it;
        if (hit) break;
      }
      if (!hit) break;
      slow(it - 1, accum);
    }
    cutlass::arch::cp_async_fence();
    cutlass::arch::cp_async_wait<0>();
    __syncthreads();
  }
};

struct NoCheck {
  template <class Frag>
  CUTLASS_DEVICE bool operator()(int, Frag&) const {
    return false;
  }
};
struct NoSlow {
  template <class Frag>
  CUTLASS_DEVICE void operator()(int, Frag&) const {}
};

// ----------------------------------------------------------------------------------------------
// Parameters shared by the TMR kernels
// ----------------------------------------------------------------------------------------------

template <class K>
struct TileParams {
  typename K::GemmParams gemm;  // problem size, tiled shape, swizzle, A, B, C (source), D (destination), alpha/beta
  int total_k;                  // k-iterations of the whole problem
  int interval;                 // checkpoint every `interval` k-iterations (and after the last)
  int tiles_m, tiles_n;
  int correct;                  // 0: detect and count only (campaign measurements in inject builds)
  ftgen::FtCounters* counters;
  unsigned long long zero_bits[kCopies];  // all zero; opaque per-copy zeros (see the file comment)
  const int* fault_by_block;    // inject builds: per (tile * 3 + copy), index into faults or -1
  const ftgen::FaultSpec* faults;
  ftgen::FaultRecord* records;
};

template <class K, class ML>
union SharedStorage {
  typename ML::SharedStorage main_loop;
  typename K::Epilogue::SharedStorage epilogue;
};

// Offset along k of the first k-tile of k-iteration `it`: the residue tile comes first (as in
// CUTLASS's predicated iterators), so every iteration after the first starts on a full tile.
CUTLASS_HOST_DEVICE int k_offset(int it, int K, int KT, int total) {
  if (it == 0) return 0;
  const int r0 = K - (total - 1) * KT;
  return r0 + (it - 1) * KT;
}

template <class P>
CUTLASS_DEVICE unsigned long long zero_of(P const& t, int copy) {
  return copy == 0 ? t.zero_bits[0] : copy == 1 ? t.zero_bits[1] : t.zero_bits[2];
}

// Load bypassing L1 (data written by other blocks or by this block's earlier stores).
template <class T>
CUTLASS_DEVICE Bits<T> ldcg_bits(T const* p) {
  return __ldcg(reinterpret_cast<Bits<T> const*>(p));
}

// ---- fault injection and uncorrected measurements: compiled only into inject builds -----------
// (FTGEN_TMR_INJECT 1, defined by the variant's source). Other builds only see these declarations,
// which discarded `if constexpr (kInject)` branches never instantiate.

// The planned fault of one (tile, copy): the same for every thread of the block (so that leaving
// the pipelined loop to apply it is a block-uniform decision); `mine` for the thread it targets.
struct Pending {
  int idx;    // index into faults, or -1
  int step;   // k-iteration after which it is applied, -1 when none
  bool mine;  // this thread applies it
};

template <class P>
CUTLASS_DEVICE int uncorrected_copy(P const& t, int tile);
template <class P>
CUTLASS_DEVICE Pending pending_fault(P const& t, int tile, int copy, int tid);
template <class K, class Frag, class P>
CUTLASS_DEVICE void apply_fault(P const& t, Frag& acc, int fidx, int tile, int copy, int tm, int tn, int units = kCopies,
                                double const* partial = nullptr);
// The record of planned fault f on an element (row, col) whose partial sum at the fault's k-iteration is `partial`
// (ignored for an offset: before 0, as apply_fault's), not yet applied (abft_fault_error_kernel).
template <class E>
CUTLASS_DEVICE ftgen::FaultRecord planned_record(ftgen::FaultSpec const& f, long long row, long long col, double partial);

// The output element (row, col of C) that accumulator element `elem` of thread `thread` holds in tile (tm, tn).
template <class K>
CUTLASS_DEVICE void fault_element(int thread, int elem, int tm, int tn, long long& row, long long& col) {
  const int warp_mn = (thread / 32) % (K::WarpCount::kM * K::WarpCount::kN);
  int r, c;
  AccLayout<typename K::Operator>::coord(thread % 32, elem, r, c);
  row = static_cast<long long>(tm) * K::Shape::kM + (warp_mn % K::WarpCount::kM) * K::Operator::Shape::kM + r;
  col = static_cast<long long>(tn) * K::Shape::kN + (warp_mn / K::WarpCount::kM) * K::Operator::Shape::kN + c;
}

#if FTGEN_TMR_INJECT
// The copy whose output is kept for a tile when correction is off: the copy a planned fault
// targets (its effect is what a campaign measures), else copy 0.
template <class P>
CUTLASS_DEVICE int uncorrected_copy(P const& t, int tile) {
  if (t.fault_by_block == nullptr) return 0;
  for (int c = 0; c < kCopies; ++c)
    if (t.fault_by_block[tile * kCopies + c] >= 0) return c;
  return 0;
}

template <class P>
CUTLASS_DEVICE Pending pending_fault(P const& t, int tile, int copy, int tid) {
  Pending f{-1, -1, false};
  if (t.fault_by_block == nullptr) return f;
  const int i = t.fault_by_block[tile * kCopies + copy];
  if (i >= 0) {
    f.idx = i;
    f.step = t.faults[i].step;
    f.mine = t.faults[i].thread == tid;
  }
  return f;
}

// Apply planned fault `fidx` to accumulator element f.elem of this thread's copy and record it.
// Selects instead of indexing keep the fragment in registers.
// partial (abft_once_kernel, after its main loop): the element's partial sum at the fault's k-iteration; the fault's
// error on it (the flipped bit's, or the offset) is added to the accumulator, and `before` / `after` record the partial
// sum and its faulty value.
template <class K, class Frag, class P>
CUTLASS_DEVICE void apply_fault(P const& t, Frag& acc, int fidx, int tile, int copy, int tm, int tn, int units, double const* partial) {
  using E = typename Frag::Element;
  const ftgen::FaultSpec f = t.faults[fidx];
  E value = E(0);
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < Frag::kElements; ++e) value = (e == f.elem) ? acc[e] : value;
  const E before = partial != nullptr ? static_cast<E>(*partial) : value;
  const E after = ftgen::apply_fault(before, f.kind, f.bit, f.offset);
  const E faulty = partial != nullptr ? value + (after - before) : after;
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < Frag::kElements; ++e) acc[e] = (e == f.elem) ? faulty : acc[e];
  ftgen::FaultRecord rec;
  rec.applied = 1;
  rec.block = tile * units + copy;  // FaultSpec.block: (tile, copy) units, `units` per tile (ABFT: 1)
  rec.thread = threadIdx.x;
  rec.elem = f.elem;
  rec.step = f.step;
  rec.bit = f.bit;
  rec.before = static_cast<double>(before);
  rec.after = static_cast<double>(after);
  fault_element<K>(threadIdx.x, f.elem, tm, tn, rec.row, rec.col);
  t.records[fidx] = rec;
  if (t.counters) atomicAdd(&t.counters->injected, 1ull);
}

template <class E>
CUTLASS_DEVICE ftgen::FaultRecord planned_record(ftgen::FaultSpec const& f, long long row, long long col, double partial) {
  const E before = f.kind == ftgen::kOffset ? E(0) : static_cast<E>(partial);
  ftgen::FaultRecord rec;
  rec.applied = 0;
  rec.block = f.block;
  rec.thread = f.thread;
  rec.elem = f.elem;
  rec.step = f.step;
  rec.bit = f.bit;
  rec.before = static_cast<double>(before);
  rec.after = static_cast<double>(ftgen::apply_fault(before, f.kind, f.bit, f.offset));
  rec.row = row;
  rec.col = col;
  return rec;
}

#endif  // FTGEN_TMR_INJECT

// ---- fragments in global memory (multikernel states, cooperative exchange slots) ---------------
// Layout per tile: [vector i][thread] of 16-byte vectors, i < kAccElems / kVec (coalesced).

template <class K>
CUTLASS_DEVICE void store_frag(typename K::ElementAcc* base, typename K::FragmentC const& f, int tid) {
  uint4* dst = reinterpret_cast<uint4*>(base);
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < K::kAccElems / K::kVec; ++i) {
    uint4 v;
    memcpy(&v, &f[i * K::kVec], 16);
    dst[i * K::kThreads + tid] = v;
  }
}

template <class K>
CUTLASS_DEVICE void load_frag(typename K::ElementAcc const* base, typename K::FragmentC& f, int tid) {
  uint4 const* src = reinterpret_cast<uint4 const*>(base);
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < K::kAccElems / K::kVec; ++i) {
    uint4 v = __ldcg(src + i * K::kThreads + tid);
    memcpy(&f[i * K::kVec], &v, 16);
  }
}

// ---- register vote of the threadblock level ----------------------------------------------------

template <class Frag>
CUTLASS_DEVICE bool copies_differ(Frag const (&acc)[kCopies]) {
  using U = Bits<typename Frag::Element>;
  U d = 0;
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < Frag::kElements; ++e) {
    const U u0 = to_bits(acc[0][e]);
    d |= (u0 ^ to_bits(acc[1][e])) | (u0 ^ to_bits(acc[2][e]));
  }
  return d != 0;
}

// Vote and (when `repair`) repair the minority copy of every element; returns true when some
// element has three different values.
template <class Frag>
CUTLASS_DEVICE bool vote_registers(Frag (&acc)[kCopies], bool repair, Tally& tally) {
  using E = typename Frag::Element;
  using U = Bits<E>;
  bool unc = false;
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < Frag::kElements; ++e) {
    U maj;
    const int st = counted_vote(to_bits(acc[0][e]), to_bits(acc[1][e]), to_bits(acc[2][e]), maj, tally, unc);
    if (st == kAgree || st == kUncorrectable) continue;
    if (repair) ftgen_rules::repair_minority(st, from_bits<E>(maj), acc[0][e], acc[1][e], acc[2][e]);
  }
  return unc;
}

template <class K>
CUTLASS_DEVICE cutlass::MatrixCoord tile_origin(int tm, int tn) {
  return cutlass::MatrixCoord(tm * K::Shape::kM, tn * K::Shape::kN);
}

template <class K>
struct Iterators {
  typename K::Mma::IteratorA A;
  typename K::Mma::IteratorB B;
  CUTLASS_DEVICE Iterators(typename K::GemmParams const& gp, int tm, int tn, int k0, int tid)
      : A(gp.params_A, gp.ref_A.data(), {gp.problem_size.m(), gp.problem_size.k()}, tid, cutlass::MatrixCoord{tm * K::Shape::kM, k0}),
        B(gp.params_B, gp.ref_B.data(), {gp.problem_size.k(), gp.problem_size.n()}, tid, cutlass::MatrixCoord{k0, tn * K::Shape::kN}) {}
};

// Epilogue D = alpha * acc + beta * C of one tile (CUTLASS's epilogue of the same GEMM type).
template <class K>
CUTLASS_DEVICE void epilogue(typename K::Epilogue::SharedStorage& smem, typename K::GemmParams const& gp, typename K::OutParams const& params_D,
                             typename K::ElementC* ptr_D, typename K::FragmentC const& acc, int tm, int tn, int tid, int warp, int lane) {
  typename K::OutputOp output_op(gp.output_op);
  const cutlass::MatrixCoord origin = tile_origin<K>(tm, tn);
  typename K::Epilogue::OutputTileIterator iterator_C(gp.params_C, gp.ref_C.data(), gp.problem_size.mn(), tid, origin);
  typename K::Epilogue::OutputTileIterator iterator_D(params_D, ptr_D, gp.problem_size.mn(), tid, origin);
  typename K::Epilogue ep(smem, tid, warp, lane);
  ep(output_op, iterator_D, acc, iterator_C);
}

// ---- kernel level: the vote of one tile by the last of its three copies to finish ---------------
// Every copy kernel, after writing its tile, counts itself in `arrive[tile]` (release: fence after the
// block barrier, as in a grid barrier); the block that brings the count to 3 (acquire: fence after the
// atomic) reads the three outputs of the tile, votes, and writes C only where copy 0 (C itself when
// beta == 0) is not the majority. No separate vote pass over the whole output: the reads are spread
// over the copies' run time and each tile is read once, right after its last copy wrote it.
template <class T>
struct TileVote {
  const T* src0;  // copy 0: C itself when beta == 0 (copy 0 wrote it), else D0
  long long ld0;
  const T* d1;
  const T* d2;
  long long ldw;
  T* dst;  // C
  long long ldc;
  int m, n, tiles_n;
  int write_all;  // dst != src0: every element is written
  int correct;
  int vec;        // 16-byte accesses (N, leading dimensions and pointers allow them)
  unsigned* arrive;  // per tile: copies finished (zeroed before the launches)
  int* flags;        // per tile: 1 when some element has three different values (recompute_kernel)
  int* list;
  int* list_count;
  ftgen::FtCounters* counters;
  const int* fault_by_block;  // measurement mode: which copy to output
};

CUTLASS_DEVICE void flag_tile(int* flags, int* list, int* list_count, int tile, int kind) {
  if (atomicCAS(flags + tile, 0, kind) == 0) list[atomicAdd(list_count, 1)] = tile;
}

// Vote the V elements of one access (a: copy 0, b: copy 1, c: copy 2) and write what must change.
// P: TileVote or OutVoteParams (correct, write_all, flags, list, list_count, fault_by_block); tile_of()
// gives the access's tile, asked for only when an element disagrees (or by the measurement mode).
template <class T, int V, class P, class TileOf>
CUTLASS_DEVICE void vote_access(P const& v, Bits<T> const (&a)[V], Bits<T> const (&b)[V], Bits<T> const (&c)[V], T* dst,
                                TileOf tile_of, Tally& tally) {
  using U = Bits<T>;
  U d = 0;
  CUTLASS_PRAGMA_UNROLL
  for (int j = 0; j < V; ++j) d |= (a[j] ^ b[j]) | (a[j] ^ c[j]);
  if (d == 0) {
    if (v.write_all) {
      if constexpr (V > 1) {
        uint4 va;
        memcpy(&va, a, 16);
        *reinterpret_cast<uint4*>(dst) = va;
      } else {
        dst[0] = from_bits<T>(a[0]);
      }
    }
    return;
  }
  int oc = 0;
#if FTGEN_TMR_INJECT
  if (!v.correct) oc = uncorrected_copy(v, tile_of());
#endif
  bool unc = false;  // (the tile is flagged below instead)
  CUTLASS_PRAGMA_UNROLL
  for (int j = 0; j < V; ++j) {
    U maj;
    const int st = counted_vote(a[j], b[j], c[j], maj, tally, unc);
    U out = maj;
    if (st == kUncorrectable && v.correct) {
      flag_tile(v.flags, v.list, v.list_count, tile_of(), 1);
      continue;  // left for the recompute launch (dst keeps copy 0 / the source)
    }
    if (!v.correct) out = oc == 1 ? b[j] : oc == 2 ? c[j] : a[j];
    if (v.write_all || out != a[j]) dst[j] = from_bits<T>(out);
  }
}

// Called by every block of a copy kernel after its tile's output is written (block-uniform).
template <class K, int kThreads>
CUTLASS_DEVICE void vote_tile_if_last(TileVote<typename K::ElementC> const& v, int tm, int tn) {
  using T = typename K::ElementC;
  using U = Bits<T>;
  constexpr int kTM = K::Shape::kM, kTN = K::Shape::kN;
  constexpr int kBatch = 8;  // accesses in flight per thread and copy (loads are issued before any store)
  const int tid = threadIdx.x;
  const int tile = tm * v.tiles_n + tn;
  __syncthreads();  // the whole block's output stores precede the arrival
  unsigned prev = 0;
  if (tid == 0) {
    __threadfence();
    prev = atomicAdd(v.arrive + tile, 1u);
    if (prev == kCopies - 1) __threadfence();
  }
  if (!__syncthreads_or(tid == 0 && prev == kCopies - 1)) return;
  const int r0 = tm * kTM, c0 = tn * kTN;
  const int rows = min(kTM, v.m - r0), cols = min(kTN, v.n - c0);
  Tally tally;
  if (v.vec) {
    constexpr int V = 16 / int(sizeof(T));
    static_assert(kTN % V == 0, "tile columns in 16-byte accesses");
    constexpr int kPerRow = kTN / V, kAccesses = kTM * kPerRow;
    for (int base = 0; base < kAccesses; base += kBatch * kThreads) {
      uint4 va[kBatch], vb[kBatch], vc[kBatch];
      bool in[kBatch];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kBatch; ++j) {
        const int i = base + j * kThreads + tid;
        const int r = i / kPerRow, cc = (i % kPerRow) * V;
        in[j] = i < kAccesses && r < rows && cc < cols;
        if (in[j]) {
          const long long gr = r0 + r, gc = c0 + cc;
          va[j] = __ldcg(reinterpret_cast<const uint4*>(v.src0 + gr * v.ld0 + gc));
          vb[j] = __ldcg(reinterpret_cast<const uint4*>(v.d1 + gr * v.ldw + gc));
          vc[j] = __ldcg(reinterpret_cast<const uint4*>(v.d2 + gr * v.ldw + gc));
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kBatch; ++j) {
        if (!in[j]) continue;
        const int i = base + j * kThreads + tid;
        const long long gr = r0 + i / kPerRow, gc = c0 + (i % kPerRow) * V;
        U a[V], b[V], c[V];
        memcpy(a, &va[j], 16);
        memcpy(b, &vb[j], 16);
        memcpy(c, &vc[j], 16);
        vote_access<T, V>(v, a, b, c, v.dst + gr * v.ldc + gc, [tile] { return tile; }, tally);
      }
    }
  } else {
    constexpr int kAccesses = kTM * kTN;
    for (int base = 0; base < kAccesses; base += kBatch * kThreads) {
      U va[kBatch][1], vb[kBatch][1], vc[kBatch][1];
      bool in[kBatch];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kBatch; ++j) {
        const int i = base + j * kThreads + tid;
        const int r = i / kTN, cc = i % kTN;
        in[j] = i < kAccesses && r < rows && cc < cols;
        if (in[j]) {
          const long long gr = r0 + r, gc = c0 + cc;
          va[j][0] = ldcg_bits(v.src0 + gr * v.ld0 + gc);
          vb[j][0] = ldcg_bits(v.d1 + gr * v.ldw + gc);
          vc[j][0] = ldcg_bits(v.d2 + gr * v.ldw + gc);
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kBatch; ++j) {
        if (!in[j]) continue;
        const int i = base + j * kThreads + tid;
        const long long gr = r0 + i / kTN, gc = c0 + i % kTN;
        vote_access<T, 1>(v, va[j], vb[j], vc[j], v.dst + gr * v.ldc + gc, [tile] { return tile; }, tally);
      }
    }
  }
  tally.flush(v.counters);
}

// ==============================================================================================
// Kernels
// ==============================================================================================

// ---- one copy over k-iterations [k_begin, k_begin + k_count): kernel-level copies of inject builds
// (kState = false) and multikernel chunks (kState = true: the accumulators start from and return
// to `state` unless first/last).
template <class K>
struct CopyParams {
  TileParams<K> t;
  int copy;
  int k_begin, k_count;
  int first, last;
  typename K::ElementAcc* state;  // tiles x kTileElems (multikernel)
  typename K::OutParams params_D;
  typename K::ElementC* ptr_D;
  TileVote<typename K::ElementC> vote;  // kernel level (kState = false): the last copy of a tile votes it
};

template <class K, bool kInject, bool kState, cutlass::gemm::SharedMemoryClearOption kClear>
__global__ void __launch_bounds__(K::kThreads) copy_kernel(CopyParams<K> p) {
  using ML = Mainloop<typename K::Mma, 1, kClear>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& ss = *reinterpret_cast<SharedStorage<K, ML>*>(smem_raw);
  typename K::Swizzle swizzle;
  const cutlass::gemm::GemmCoord tc = swizzle.get_tile_offset(p.t.gemm.swizzle_log_tile);
  if (tc.m() >= p.t.tiles_m || tc.n() >= p.t.tiles_n) return;
  const int tile = tc.m() * p.t.tiles_n + tc.n();
  const int tid = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = threadIdx.x % 32;
  typename K::FragmentC acc[1];
  if (kState && !p.first) {
    load_frag<K>(p.state + size_t(tile) * K::kTileElems, acc[0], tid);
  } else {
    fill_opaque(acc[0], zero_of(p.t, p.copy));
  }
  Iterators<K> its(p.t.gemm, tc.m(), tc.n(), k_offset(p.k_begin, p.t.gemm.problem_size.k(), K::Shape::kK, p.t.total_k), tid);
  ML ml(ss.main_loop, tid, warp, lane);
  Pending pend{-1, -1, false};
  if constexpr (kInject) pend = pending_fault(p.t, tile, p.copy, tid);
  const int k_begin = p.k_begin;
  ml.run(
      p.k_count, acc, its.A, its.B,
      [&](int it, typename K::FragmentC(&)[1]) { return kInject && pend.step == k_begin + it; },
      [&](int, typename K::FragmentC(&a)[1]) {
        if constexpr (kInject) {
          if (pend.mine) apply_fault<K>(p.t, a[0], pend.idx, tile, p.copy, tc.m(), tc.n());
        }
      });
  if (!kState || p.last) {
    epilogue<K>(ss.epilogue, p.t.gemm, p.params_D, p.ptr_D, acc[0], tc.m(), tc.n(), tid, warp, lane);
  } else {
    store_frag<K>(p.state + size_t(tile) * K::kTileElems, acc[0], tid);
  }
  if constexpr (!kState) vote_tile_if_last<K, K::kThreads>(p.vote, tc.m(), tc.n());
}

// ---- kernel level without injection: CUTLASS's own kernel (cutlass::Kernel<GemmKernel>, the same
// code as the unprotected variant), then the tile vote of the last copy to finish.
template <class K>
__global__ void cutlass_copy_kernel(typename K::GemmParams params, TileVote<typename K::ElementC> vote) {
  extern __shared__ int SharedStorageBase[];
  auto* shared_storage = reinterpret_cast<typename K::GemmKernel::SharedStorage*>(SharedStorageBase);
  {
    typename K::GemmKernel op;
    op(params, *shared_storage);
  }
  typename K::Swizzle swizzle;
  const cutlass::gemm::GemmCoord tc = swizzle.get_tile_offset(params.swizzle_log_tile);
  if (tc.m() >= params.grid_tiled_shape.m() || tc.n() >= params.grid_tiled_shape.n()) return;  // block-uniform
  vote_tile_if_last<K, K::kThreads>(vote, tc.m(), tc.n());
}

// ---- threadblock level: three accumulator sets in one threadblock ------------------------------
template <class K>
struct TbParams {
  TileParams<K> t;
};

template <class K, bool kInject>
__global__ void __launch_bounds__(K::kThreads) tb_kernel(TbParams<K> p) {
  using ML = Mainloop<typename K::Mma, kCopies, cutlass::gemm::SharedMemoryClearOption::kNone>;
  using Frag = typename K::FragmentC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& ss = *reinterpret_cast<SharedStorage<K, ML>*>(smem_raw);
  typename K::Swizzle swizzle;
  const cutlass::gemm::GemmCoord tc = swizzle.get_tile_offset(p.t.gemm.swizzle_log_tile);
  if (tc.m() >= p.t.tiles_m || tc.n() >= p.t.tiles_n) return;
  const int tile = tc.m() * p.t.tiles_n + tc.n();
  const int tid = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = threadIdx.x % 32;
  const bool correct = !kInject || p.t.correct;
  Pending pend[kCopies];
  CUTLASS_PRAGMA_UNROLL
  for (int c = 0; c < kCopies; ++c) {
    pend[c] = Pending{-1, -1, false};
    if constexpr (kInject) pend[c] = pending_fault(p.t, tile, c, tid);
  }
  const int total = p.t.total_k, interval = p.t.interval;
  Frag acc[kCopies];
  Tally tally;
  for (int attempt = 0;; ++attempt) {
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kCopies; ++c) fill_opaque(acc[c], zero_of(p.t, c));
    Iterators<K> its(p.t.gemm, tc.m(), tc.n(), 0, tid);
    ML ml(ss.main_loop, tid, warp, lane);
    bool unc = false;
    const bool inject_now = kInject && attempt == 0;
    // a checkpoint after every `interval` k-iterations and after the last
    int next_checkpoint = interval - 1;
    bool checkpoint = false;
    ml.run(
        total, acc, its.A, its.B,
        // Leave the pipelined loop at every checkpoint (block-uniform: it depends on `it` only; the
        // loop's state is kept, so leaving costs a branch): the comparison of the copies then runs
        // outside the hot loop, where the compiler cannot interleave it with the MMAs of every
        // k-iteration (it did: ncu on H100 counted 16% more instructions for the build without
        // injection than for the one with it).
        [&](int it, Frag(&)[kCopies]) {
          checkpoint = it == next_checkpoint || it + 1 == total;
          if (it == next_checkpoint) next_checkpoint += interval;
          return checkpoint || (inject_now && (pend[0].step == it || pend[1].step == it || pend[2].step == it));
        },
        [&](int it, Frag(&a)[kCopies]) {
          if constexpr (kInject) {
            if (inject_now) {
              CUTLASS_PRAGMA_UNROLL
              for (int c = 0; c < kCopies; ++c)
                if (pend[c].mine && pend[c].step == it) apply_fault<K>(p.t, a[c], pend[c].idx, tile, c, tc.m(), tc.n());
            }
          }
          if (checkpoint && copies_differ(a)) unc |= vote_registers(a, correct, tally);
        });
    const bool redo = __syncthreads_or(unc) != 0;
    if (!redo || !correct || attempt + 1 >= kMaxAttempts) break;
    if (tid == 0) count_recomputed(p.t.counters);
  }
  tally.flush(p.t.counters);
  if constexpr (kInject) {
    if (!correct) {  // measurement mode: the output of the copy a fault targets
      const int oc = uncorrected_copy(p.t, tile);
      if (oc == 1) acc[0] = acc[1];
      if (oc == 2) acc[0] = acc[2];
    }
  }
  epilogue<K>(ss.epilogue, p.t.gemm, p.t.gemm.params_D, p.t.gemm.ref_D.data(), acc[0], tc.m(), tc.n(), tid, warp, lane);
}

// ---- cooperative level: copies in three threadblocks on three SMs ------------------------------
template <class K>
struct CoopParams {
  TileParams<K> t;
  int teams;                         // T; the grid has 3T blocks
  int group;                         // rasterization group (rows of tiles swept column by column)
  int* cta_smid;                     // [3T] SM id of each block (by blockIdx)
  unsigned* team_ctr;                // [3T] barrier counters (team t uses team_ctr[t])
  int* role_smid;                    // [3T] SM id of (team, copy): role_smid[team * 3 + copy]
  int* teams_used;                   // [1] T of this launch (for the host-side SM report)
  typename K::ElementAcc* slots;     // [T][3][2][kTileElems] exchange slots (accumulators, on a digest mismatch)
  uint4* digests;                    // [T][3][2][kThreads] exchange slots (per-thread digests, every checkpoint)
};

// Digest of one thread's accumulators: four FNV-1a chains over the 32-bit words (word i feeds chain
// i % 4). Each step x -> (x ^ w) * p (p odd) is a bijection of the chain state for a given word, so
// copies that differ in any single element always have different digests (and agreeing copies always
// have equal ones); a mismatch triggers the full exchange and the element-wise vote. 2 instructions
// per word, and the four chains are independent (no long dependency chain).
template <class Frag>
CUTLASS_DEVICE uint4 digest(Frag const& f) {
  constexpr int kWords = int(sizeof(Frag)) / 4;
  static_assert(int(sizeof(Frag)) % 16 == 0, "whole 16-byte vectors");
  uint32_t w[kWords];
  memcpy(w, &f, sizeof(Frag));
  uint32_t h[4] = {2166136261u, 2166136261u ^ 1u, 2166136261u ^ 2u, 2166136261u ^ 3u};
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kWords; ++i) h[i % 4] = (h[i % 4] ^ w[i]) * 16777619u;
  return make_uint4(h[0], h[1], h[2], h[3]);
}

CUTLASS_DEVICE void team_barrier(unsigned* ctr, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(ctr, 1u);
    while (ld_acquire(ctr) < target) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
}

// Block-uniform state of the cooperative kernel, kept in shared memory so that it does not occupy
// registers in the pipelined loop (the loop needs all of them for the accumulators and fragments).
struct CoopShared {
  int rank, team, copy;
  int tm, tn, lin;         // current tile
  unsigned barriers;       // team barriers passed (the same count in the team's three blocks)
  int pend_idx, pend_step; // planned fault of this (tile, copy), -1 when none
  int unc;                 // some element had three different values at a checkpoint
};

// The kernel's dynamic shared memory: the CUTLASS storage first, at the aligned base its swizzled
// layouts are made for. (A static __shared__ variable would go before the dynamic memory and shift
// it: with CoopShared there, 48 bytes, the main loop's cp.async loads made L1 ask L2 for 1.25x and L2
// return 2x the sectors of the same loads in CUTLASS's kernel, and the level took 1.35x the time:
// Nsight Compute on an H100.)
template <class K, class ML>
struct CoopStorage {
  SharedStorage<K, ML> ss;
  CoopShared cs;
};

template <class K, bool kInject>
__global__ void __launch_bounds__(K::kThreads) coop_kernel(CoopParams<K> p) {
  using ML = Mainloop<typename K::Mma, 1, cutlass::gemm::SharedMemoryClearOption::kZfill>;
  using Frag = typename K::FragmentC;
  using U = Bits<typename K::ElementAcc>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& storage = *reinterpret_cast<CoopStorage<K, ML>*>(smem_raw);
  auto& ss = storage.ss;
  CoopShared& cs = storage.cs;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const int tid = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = threadIdx.x % 32;
  const int G = gridDim.x;

  // Roles: rank the blocks by (SM id, block index); team t takes ranks t, t + T, t + 2T. Blocks of one
  // SM have consecutive ranks and an SM holds at most T of them (the host sizes the grid so), so the
  // three copies of a team run on three different SMs.
  const int my_sm = static_cast<int>(sm_id());
  if (tid == 0) {
    p.cta_smid[blockIdx.x] = my_sm;
    p.team_ctr[blockIdx.x] = 0u;
    if (blockIdx.x == 0) *p.teams_used = p.teams;
    cs.rank = 0;
    cs.barriers = 0u;
  }
  grid.sync();
  {
    int below = 0;
    for (int j = tid; j < G; j += K::kThreads) {
      const int sj = __ldcg(p.cta_smid + j);
      below += (sj < my_sm) || (sj == my_sm && j < static_cast<int>(blockIdx.x));
    }
    atomicAdd(&cs.rank, below);
  }
  __syncthreads();
  if (tid == 0) {
    cs.team = cs.rank % p.teams;
    cs.copy = cs.rank / p.teams;
    p.role_smid[cs.team * kCopies + cs.copy] = my_sm;
  }
  __syncthreads();

  const bool correct = !kInject || p.t.correct;
  const int tiles = p.t.tiles_m * p.t.tiles_n;
  for (int tile = cs.team; tile < tiles; tile += p.teams) {
    __syncthreads();  // everybody has read the previous tile's shared state
    if (tid == 0) {
      const int per_group = p.group * p.t.tiles_n;
      const int first_m = (tile / per_group) * p.group;
      const int gsize = min(p.t.tiles_m - first_m, p.group);
      const int in_group = tile % per_group;
      cs.tm = first_m + in_group % gsize;
      cs.tn = in_group / gsize;
      cs.lin = cs.tm * p.t.tiles_n + cs.tn;  // row-major tile index (fault plans, reports)
      cs.pend_idx = -1;
      cs.pend_step = -1;
      if constexpr (kInject) {
        const Pending f = pending_fault(p.t, cs.lin, cs.copy, 0);
        cs.pend_idx = f.idx;
        cs.pend_step = f.step;
      }
    }
    __syncthreads();
    Frag acc[1];
    for (int attempt = 0;; ++attempt) {
      if (tid == 0) cs.unc = 0;
      fill_opaque(acc[0], zero_of(p.t, cs.copy));
      Iterators<K> its(p.t.gemm, cs.tm, cs.tn, 0, tid);
      ML ml(ss.main_loop, tid, warp, lane);
      const bool inject_now = kInject && attempt == 0;
      int next_checkpoint = p.t.interval - 1;  // a checkpoint after every `interval` k-iterations and after the last
      bool checkpoint = false;
      auto slot = [&](int c, unsigned buf) {
        return p.slots + ((size_t(cs.team) * kCopies + c) * 2 + buf) * size_t(K::kTileElems);
      };
      auto dslot = [&](int c, unsigned buf) { return p.digests + ((size_t(cs.team) * kCopies + c) * 2 + buf) * size_t(K::kThreads); };
      // Publish this copy's per-thread digests (16 bytes per thread, not the accumulators), wait for
      // the team, compare with the two other copies. Returns (block-uniformly) whether some copy
      // differs: the same in all three blocks (a copy that equals both others makes all three equal).
      // Slots are double-buffered by the parity of the team's barrier count (a block reuses a slot
      // only after the whole team has passed the next barrier, i.e. finished reading it).
      auto exchange = [&](Frag const& a) {
        const unsigned b = cs.barriers, buf = b & 1u;
        const int copy = cs.copy;
        const uint4 own = digest(a);
        dslot(copy, buf)[tid] = own;
        team_barrier(p.team_ctr + cs.team, kCopies * (b + 1));
        if (tid == 0) cs.barriers = b + 1;  // read again only after the __syncthreads_or below
        const uint4 x = __ldcg(dslot((copy + 1) % kCopies, buf) + tid), y = __ldcg(dslot((copy + 2) % kCopies, buf) + tid);
        const unsigned d = (own.x ^ x.x) | (own.y ^ x.y) | (own.z ^ x.z) | (own.w ^ x.w) | (own.x ^ y.x) | (own.y ^ y.y) |
                           (own.z ^ y.z) | (own.w ^ y.w);
        return __syncthreads_or(d != 0) != 0;
      };
      // After a digest mismatch (all three blocks take this branch): publish the accumulators, one
      // more team barrier, then `vote` reads the two other copies from the slots of this barrier.
      auto publish = [&](Frag const& a) {
        const unsigned b = cs.barriers, buf = b & 1u;
        store_frag<K>(slot(cs.copy, buf), a, tid);
        team_barrier(p.team_ctr + cs.team, kCopies * (b + 1));
        if (tid == 0) cs.barriers = b + 1;
        __syncthreads();  // cs.barriers is read by vote
      };
      // Vote every element with the two other copies of the last exchange; repair this copy.
      auto vote = [&](Frag& a) {
        const unsigned buf = (cs.barriers - 1u) & 1u;
        const int copy = cs.copy;
        uint4 const* s1 = reinterpret_cast<uint4 const*>(slot((copy + 1) % kCopies, buf));
        uint4 const* s2 = reinterpret_cast<uint4 const*>(slot((copy + 2) % kCopies, buf));
        Tally tally;
        bool unc = false;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < K::kAccElems / K::kVec; ++i) {
          const uint4 x = __ldcg(s1 + i * K::kThreads + tid), y = __ldcg(s2 + i * K::kThreads + tid);
          U n1v[K::kVec], n2v[K::kVec];
          memcpy(n1v, &x, 16);
          memcpy(n2v, &y, 16);
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < K::kVec; ++j) {
            const int e = i * K::kVec + j;
            // (own, n1, n2) are copies (copy, copy + 1, copy + 2) mod 3
            const U own = to_bits(a[e]), n1 = n1v[j], n2 = n2v[j];
            const U v0 = copy == 0 ? own : copy == 1 ? n2 : n1;
            const U v1 = copy == 0 ? n1 : copy == 1 ? own : n2;
            const U v2 = copy == 0 ? n2 : copy == 1 ? n1 : own;
            U maj;
            const int st = counted_vote(v0, v1, v2, maj, tally, unc);
            if (correct && st == kMinority0 + copy) a[e] = from_bits<typename K::ElementAcc>(maj);
          }
        }
        if (copy == 0) tally.flush(p.t.counters);  // every block sees the same three values; copy 0 counts
        if (unc) cs.unc = 1;
      };
      ml.run(
          p.t.total_k, acc, its.A, its.B,
          // the exchange runs outside the pipelined loop: its loads must not compete for the loop's registers
          [&](int it, Frag(&)[1]) {
            checkpoint = it == next_checkpoint || it + 1 == p.t.total_k;
            if (it == next_checkpoint) next_checkpoint += p.t.interval;
            return checkpoint || (inject_now && cs.pend_step == it);  // block-uniform
          },
          [&](int it, Frag(&a)[1]) {
            if constexpr (kInject) {
              if (inject_now && cs.pend_step == it && p.t.faults[cs.pend_idx].thread == tid)
                apply_fault<K>(p.t, a[0], cs.pend_idx, cs.lin, cs.copy, cs.tm, cs.tn);
            }
            if (checkpoint && exchange(a[0])) {
              publish(a[0]);
              vote(a[0]);
            }
          });
      // the three blocks decide identically (same values), so their barrier sequences stay aligned
      const bool redo = __syncthreads_or(cs.unc) != 0;
      if (!redo || !correct || attempt + 1 >= kMaxAttempts) break;
      if (tid == 0 && cs.copy == 0) count_recomputed(p.t.counters);
    }
    int out = 0;
    if constexpr (kInject) out = correct ? 0 : uncorrected_copy(p.t, cs.lin);
    if (cs.copy == out)
      epilogue<K>(ss.epilogue, p.t.gemm, p.t.gemm.params_D, p.t.gemm.ref_D.data(), acc[0], cs.tm, cs.tn, tid, warp, lane);
    __syncthreads();  // shared memory is reused by the next tile's prologue
  }
}

// ---- vote of the three outputs (kernel and multikernel levels) ---------------------------------
template <class T>
struct OutVoteParams {
  int m, n;
  const T* src0;  // copy 0: C itself when beta == 0 (copy 0 wrote it), else D0
  long long ld0;
  const T* d1;
  const T* d2;
  long long ldw;
  T* dst;  // C
  long long ldc;
  int write_all;  // dst != src0: every element is written
  int correct;
  int tile_m, tile_n, tiles_n;
  int* flags;       // per tile: 0, 1 (uncorrectable elements), 2 (whole tile poisoned by a state vote)
  int* list;        // tiles to recompute
  int* list_count;
  ftgen::FtCounters* counters;
  const int* fault_by_block;  // measurement mode: which copy to output
};

// Work order: strips of 32 vectors (one warp-wide row segment), the last strip first. CUTLASS's
// identity swizzles finish the right-most tile columns last, so the vote reads the most recently
// written outputs first, while they may still be in L2. The order does not change any result.
template <class T, int V, bool kPoison>
__global__ void __launch_bounds__(256) vote_outputs_kernel(OutVoteParams<T> p) {
  using U = Bits<T>;
  const int nv = p.n / V;
  const int strips = (nv + 31) / 32;
  // thread -> (strip, row, lane) of warp-row index w = idx / 32 (row = w % m, strip from the right
  // = w / m); the grid stride is a whole number of warps, so it is added without divisions
  const long long w0 = (blockIdx.x * 256ll + threadIdx.x) / 32, dw = 8ll * gridDim.x;
  const int lane = threadIdx.x % 32;
  const int d_row = static_cast<int>(dw % p.m), d_strip = static_cast<int>(dw / p.m);
  int r = static_cast<int>(w0 % p.m), back = static_cast<int>(w0 / p.m);
  Tally tally;
  for (; back < strips; r += d_row, back += d_strip) {
    if (r >= p.m) {
      r -= p.m;
      ++back;
      if (back >= strips) break;
    }
    const int cv = (strips - 1 - back) * 32 + lane;
    if (cv >= nv) continue;
    const int c0 = cv * V;
    auto tile_of = [&]() { return (r / p.tile_m) * p.tiles_n + c0 / p.tile_n; };
    if (kPoison && __ldcg(p.flags + tile_of()) == 2) continue;  // recomputed as a whole
    U a[V], b[V], c[V];
    if (V > 1) {
      uint4 va = __ldcs(reinterpret_cast<const uint4*>(p.src0 + r * p.ld0 + c0));
      uint4 vb = __ldcs(reinterpret_cast<const uint4*>(p.d1 + r * p.ldw + c0));
      uint4 vc = __ldcs(reinterpret_cast<const uint4*>(p.d2 + r * p.ldw + c0));
      memcpy(a, &va, 16);
      memcpy(b, &vb, 16);
      memcpy(c, &vc, 16);
    } else {
      a[0] = ldcg_bits(p.src0 + r * p.ld0 + c0);
      b[0] = ldcg_bits(p.d1 + r * p.ldw + c0);
      c[0] = ldcg_bits(p.d2 + r * p.ldw + c0);
    }
    vote_access<T, V>(p, a, b, c, p.dst + r * p.ldc + c0, tile_of, tally);
  }
  tally.flush(p.counters);
}

// ---- vote of the accumulator states between multikernel chunks --------------------------------
template <class Acc>
struct StateVoteParams {
  Acc* s[kCopies];
  long long vectors;  // 16-byte vectors per state
  int tile_vectors;   // vectors per tile
  int correct;
  int* flags;
  int* list;
  int* list_count;
  ftgen::FtCounters* counters;
};

template <class Acc>
__global__ void __launch_bounds__(256) vote_states_kernel(StateVoteParams<Acc> p) {
  using U = Bits<Acc>;
  constexpr int V = 16 / sizeof(Acc);
  Tally tally;
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < p.vectors; i += 256ll * gridDim.x) {
    uint4 v[kCopies];
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kCopies; ++c) v[c] = __ldcg(reinterpret_cast<const uint4*>(p.s[c]) + i);
    if (v[0].x == v[1].x && v[0].y == v[1].y && v[0].z == v[1].z && v[0].w == v[1].w && v[0].x == v[2].x && v[0].y == v[2].y &&
        v[0].z == v[2].z && v[0].w == v[2].w)
      continue;
    U u[kCopies][V];
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kCopies; ++c) memcpy(u[c], &v[c], 16);
    const int tile = static_cast<int>(i / p.tile_vectors);
    bool fixed[kCopies] = {false, false, false};
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < V; ++j) {
      U maj;
      const int st = vote_element(u[0][j], u[1][j], u[2][j], maj);
      if (st == kAgree) continue;
      ++tally.detected;
      if (st == kUncorrectable) {
        ++tally.uncorrectable;
        if (p.correct) flag_tile(p.flags, p.list, p.list_count, tile, 2);
        continue;
      }
      ++tally.corrected;
      if (p.correct) {
        const int c = st - kMinority0;
        u[c][j] = maj;
        fixed[c] = true;
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int c = 0; c < kCopies; ++c) {
      if (fixed[c]) {
        uint4 w;
        memcpy(&w, u[c], 16);
        reinterpret_cast<uint4*>(p.s[c])[i] = w;
      }
    }
  }
  tally.flush(p.counters);
}

// ---- recompute the tiles the votes flagged (kernel and multikernel levels) ---------------------
// A no-op grid when nothing is flagged. For each flagged tile: mark its elements (flag 1: the
// elements where the three outputs differ; flag 2: every element), compute the tile three times
// into D0, D1, D2 (identical instructions), vote the marked elements into C; repeat when they
// still differ (at most MAX_ATTEMPTS - 1 recomputations).
template <class K, class ML>
struct RecomputeStorage {
  static constexpr int kWords = (K::kTileElems + 31) / 32;
  SharedStorage<K, ML> ss;  // first, at the aligned base (see CoopStorage)
  unsigned mask[kWords];    // elements of the tile with three different values
};

template <class K>
struct RecomputeParams {
  TileParams<K> t;  // gemm.C is the source (beta != 0) and the destination of the votes
  typename K::OutParams params_w;
  typename K::ElementC* d[kCopies];  // workspace outputs (ld ldw)
  long long ldw;
  const typename K::ElementC* src0;  // copy 0 of the first vote (C when beta == 0, else D0)
  long long ld0;
  int* flags;
  int* list;
  int* list_count;
  int max_attempts;
};

template <class K>
__global__ void __launch_bounds__(K::kThreads) recompute_kernel(RecomputeParams<K> p) {
  using ML = Mainloop<typename K::Mma, 1, cutlass::gemm::SharedMemoryClearOption::kNone>;
  using T = typename K::ElementC;
  using U = Bits<T>;
  constexpr int kWords = RecomputeStorage<K, ML>::kWords;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& storage = *reinterpret_cast<RecomputeStorage<K, ML>*>(smem_raw);  // no static __shared__: see CoopStorage
  auto& ss = storage.ss;
  unsigned* mask = storage.mask;
  const int n_list = *reinterpret_cast<volatile int*>(p.list_count);
  if (static_cast<int>(blockIdx.x) >= n_list) return;
  const int tid = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = threadIdx.x % 32;
  const int M = p.t.gemm.problem_size.m(), N = p.t.gemm.problem_size.n();
  T* C = p.t.gemm.ref_D.data();
  const long long ldc = p.t.gemm.ref_D.stride(0);
  Tally tally;
  for (int i = blockIdx.x; i < n_list; i += gridDim.x) {
    const int tile = __ldcg(p.list + i), kind = __ldcg(p.flags + tile);
    const int tm = tile / p.t.tiles_n, tn = tile % p.t.tiles_n;
    const int r0 = tm * K::Shape::kM, c0 = tn * K::Shape::kN;
    for (int w = tid; w < kWords; w += K::kThreads) mask[w] = 0u;
    __syncthreads();
    for (int e = tid; e < K::kTileElems; e += K::kThreads) {
      const int r = r0 + e / K::Shape::kN, c = c0 + e % K::Shape::kN;
      if (r >= M || c >= N) continue;
      bool bad = kind == 2;
      if (!bad) {
        U maj;
        bad = vote_element(ldcg_bits(p.src0 + r * p.ld0 + c), ldcg_bits(p.d[1] + r * p.ldw + c),
                           ldcg_bits(p.d[2] + r * p.ldw + c), maj) == kUncorrectable;
      }
      if (bad) atomicOr(mask + e / 32, 1u << (e % 32));
    }
    __syncthreads();
    for (int attempt = 1; attempt < p.max_attempts; ++attempt) {
      if (tid == 0) count_recomputed(p.t.counters);
      for (int c = 0; c < kCopies; ++c) {
        typename K::FragmentC acc[1];
        fill_opaque(acc[0], zero_of(p.t, c));
        Iterators<K> its(p.t.gemm, tm, tn, 0, tid);
        ML ml(ss.main_loop, tid, warp, lane);
        ml.run(p.t.total_k, acc, its.A, its.B, NoCheck{}, NoSlow{});
        epilogue<K>(ss.epilogue, p.t.gemm, p.params_w, p.d[c], acc[0], tm, tn, tid, warp, lane);
        __syncthreads();
      }
      int again = 0;
      for (int e = tid; e < K::kTileElems; e += K::kThreads) {
        if (!(mask[e / 32] & (1u << (e % 32)))) continue;
        const int r = r0 + e / K::Shape::kN, c = c0 + e % K::Shape::kN;
        U maj;
        const int st = vote_element(ldcg_bits(p.d[0] + r * p.ldw + c), ldcg_bits(p.d[1] + r * p.ldw + c),
                                    ldcg_bits(p.d[2] + r * p.ldw + c), maj);
        if (st == kUncorrectable) {
          ++tally.uncorrectable;
          again = 1;
        } else {
          C[r * ldc + c] = from_bits<T>(maj);
        }
      }
      if (!__syncthreads_or(again)) break;
    }
    __syncthreads();
  }
  tally.flush(p.t.counters);
}

// ---- zero-padded copy of an operand (fp16/bf16 operands with odd contiguous extent or stride) ---
// dst (rows_dst x ld_dst) = src (rows x cols) with zeros around it
template <class T>
__global__ void repack_kernel(const T* src, long long ld_src, T* dst, long long ld_dst, int rows, int cols, int rows_dst) {
  const long long total = static_cast<long long>(rows_dst) * ld_dst;
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < total; i += 256ll * gridDim.x) {
    const int r = static_cast<int>(i / ld_dst), c = static_cast<int>(i % ld_dst);
    dst[i] = r < rows && c < cols ? src[r * ld_src + c] : T(0);
  }
}

#include "cutlass_abft.cuh"  // threadblock ABFT on the same components (kLevelAbft)
#include "cutlass_abft64.cuh"  // ... and its fp64 check, after the GEMM in double

// ==============================================================================================
// Host side
// ==============================================================================================

inline size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct DeviceProps {
  int device = -1, sms = 0;
};
inline cudaError_t device_props(DeviceProps& out) { return ftgen::device_sms(out.device, out.sms); }

// Two extra non-blocking streams and events for the concurrent copies (created once per device and process). prio: the
// streams of ref_checksums: concurrent, s[0] at the device's greatest priority and s[1] at its least (the GEMM on one,
// the pre-passes on the other: FTGEN_ABFT_SIDE).
struct Streams {
  cudaStream_t s[2] = {nullptr, nullptr};
  cudaEvent_t fork = nullptr, join[2] = {nullptr, nullptr};
  bool ready = false;
};
inline cudaError_t streams(Streams*& out, bool prio = false) {
  constexpr int kDevices = 64;
  static Streams st[kDevices][2];
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= kDevices) return cudaErrorInvalidDevice;
  Streams& x = st[dev][prio ? 1 : 0];
  if (!x.ready) {
    int least = 0, greatest = 0;
    if (prio && (e = cudaDeviceGetStreamPriorityRange(&least, &greatest)) != cudaSuccess) return e;
    for (int i = 0; i < 2; ++i) {
      if ((e = cudaStreamCreateWithPriority(&x.s[i], cudaStreamNonBlocking, i == 0 ? greatest : least)) != cudaSuccess) return e;
      if ((e = cudaEventCreateWithFlags(&x.join[i], cudaEventDisableTiming)) != cudaSuccess) return e;
    }
    if ((e = cudaEventCreateWithFlags(&x.fork, cudaEventDisableTiming)) != cudaSuccess) return e;
    x.ready = true;
  }
  out = &x;
  return cudaSuccess;
}

inline cudaError_t fork(Streams& st, cudaStream_t main) {
  cudaError_t e = cudaEventRecord(st.fork, main);
  for (int i = 0; i < 2 && e == cudaSuccess; ++i) e = cudaStreamWaitEvent(st.s[i], st.fork, 0);
  return e;
}
inline cudaError_t join(Streams& st, cudaStream_t main) {
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < 2 && e == cudaSuccess; ++i) {
    e = cudaEventRecord(st.join[i], st.s[i]);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(main, st.join[i], 0);
  }
  return e;
}

using ftgen::set_smem;  // (ftgen_ft.cuh)

// ---- problem preparation: layouts, alignment, kernel choice, workspace ------------------------

template <class T>
inline bool aligned_ptr(const void* p, int elems) {
  return reinterpret_cast<uintptr_t>(p) % (size_t(elems) * sizeof(T)) == 0;
}

// The layout of one operand: rows (strided extent) x cols (contiguous extent) with leading dimension ld.
struct Operand {
  int rows, cols;
  long long ld;
};
inline Operand operand_a(const ftgen_gemm_problem& q, bool row_major) {
  return row_major ? Operand{q.m, q.k, q.lda} : Operand{q.k, q.m, q.lda};
}
inline Operand operand_b(const ftgen_gemm_problem& q, bool row_major) {
  return row_major ? Operand{q.k, q.n, q.ldb} : Operand{q.n, q.k, q.ldb};
}
inline bool operand_aligned(const void* ptr, Operand o, int align, size_t elem_bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % (align * elem_bytes) == 0 && o.ld % align == 0 && o.cols % align == 0;
}

// Byte offsets of the workspace sections (each 256-byte aligned) for one problem.
struct Layout {
  size_t rep_a = 0, rep_b = 0, ctl = 0, d[kCopies] = {0, 0, 0}, s[kCopies] = {0, 0, 0};
  size_t coop_smid = 0, coop_ctr = 0, coop_role = 0, coop_meta = 0, coop_slots = 0, coop_digests = 0, enc = 0, ref = 0, ref_parts = 0, redo = 0, redo_part = 0, obs = 0;
  size_t total = 0;
  long long ld_rep_a = 0, ld_rep_b = 0, ldw = 0;
  int tiles_m = 0, tiles_n = 0, total_k = 0, teams = 0;
  int chunks = 0, parts = 1, part_len = 0;  // threadblock ABFT pre-pass: checkpoint intervals, parts of each (k-iterations)
  // the pre-pass on the tensor cores (k a multiple of the k-tile): E (k x ref_w), D (subs x m x ref_w), sub-chunks of
  // ref_sub k, ref_per of them per checkpoint interval
  bool ref_tc = false;
  int ref_w = 0, ref_sub = 0, subs = 0, ref_per = 0;
  size_t ref_e = 0, ref_d = 0;
  // ref_checksums: concurrent: rows to recompute (after the tile list in redo: [count][rows_cap ids][rows_cap parts
  // stored]) and their partial rows (row_part: a row of tb_n doubles per block of the recomputation launch)
  int rows_cap = 0;
  size_t redo_ints = 0, row_part = 0;
  // ref_checksums: concurrent, inject builds: per planned fault (at most one per tile) a counter of its error's parts
  // (at index fault_done of the redo ints, zeroed with them) and the parts (abft_fault_error_kernel)
  size_t fault_done = 0, fault_part = 0;
  // ref_checksums: concurrent: at index flagged of the redo ints, the tiles the check leaves to the rare path of the
  // second launch ([count][tiles][barrier])
  size_t flagged = 0;
  // the checksum strips of the pre-pass (the encodings, the reference rows): `strips` of strip_n columns (strip_n: the
  // tile's tb_n, or with ref_checksums: concurrent and one checkpoint per tile FTGEN_ABFT_STRIP_N; the workspace is sized
  // for these, and a run that falls back to the prepass design takes the tile's strips in it: Runner::tile_strips)
  int strips = 0, strip_n = 0;
};

// Threadblock ABFT settings of a variant (kLevelAbft; see cutlass_abft.cuh).
struct AbftConfig {
  float unit = 0.f;       // lambda * u
  float fixed = 0.f;      // > 0: fixed threshold
  int online = 1;         // correct: online (1) or detect (0)
  float conc_unit = 0.f;  // ref_checksums: concurrent: lambda * u of its check per strip of FTGEN_ABFT_STRIP_N columns (0: unit)
  // ref_checksums: concurrent: the suspect band's floor (0: no band; cutlass_abft.cuh, abft_check_tile) and a suspect
  // element's tolerance at depth k, elem_u (elem_c_sqrt sqrt(k) + elem_c_const) (ftgen.tolerance's rule, a fraction of it)
  float band = 0.f;
  double elem_u = 0.0, elem_c_sqrt = 0.0, elem_c_const = 0.0;
};

// The problem as the level runners see it (operands possibly replaced by padded copies).
struct Prepared {
  int m, n, k;
  double alpha, beta;
  const void* A;
  long long lda;
  const void* B;
  long long ldb;
  void* C;
  long long ldc;
  char* ws;
  Layout lay;
  int interval;
  int group;       // cooperative: rasterization group (the swizzle parameter)
  int coop_param;  // cooperative: requested teams (0: as many as fit)
  int correct;
  ftgen::FtCounters* counters;
  const int* fault_by_block;
  const ftgen::FaultSpec* faults;
  ftgen::FaultRecord* records;
  int fault_count;
  AbftConfig abft;
};

// The streams of a check's GEMM (gs) and of its pre-passes (ps), forked from s as FTGEN_ABFT_SIDE (read once) places
// them: low (the default, also for any other value: the GEMM at the device's greatest stream priority, the pre-passes
// at its least), high (the other way round), serial (both s: st stays nullptr; else join(*st, s) after both).
inline cudaError_t abft_side_streams(cudaStream_t s, Streams*& st, cudaStream_t& gs, cudaStream_t& ps) {
  static const int mode = [] {
    const char* v = std::getenv("FTGEN_ABFT_SIDE");
    return v == nullptr ? 0 : std::strcmp(v, "high") == 0 ? 1 : std::strcmp(v, "serial") == 0 ? 2 : 0;
  }();
  st = nullptr;
  gs = ps = s;
  if (mode == 2) return cudaSuccess;
  cudaError_t e;
  if ((e = streams(st, true)) != cudaSuccess || (e = fork(*st, s)) != cudaSuccess) return e;
  gs = st->s[mode == 0 ? 0 : 1];
  ps = st->s[mode == 0 ? 1 : 0];
  return cudaSuccess;
}

// Everything one level needs for one CUTLASS GEMM type.
template <class K, int kLevel, bool kInject>
struct Runner {
  using GemmKernel = typename K::GemmKernel;
  using EA = typename K::ElementA;
  using EB = typename K::ElementB;
  using EC = typename K::ElementC;
  using Acc = typename K::ElementAcc;
  using MLCopy = Mainloop<typename K::Mma, 1, cutlass::gemm::SharedMemoryClearOption::kNone>;
  using MLZfill = Mainloop<typename K::Mma, 1, cutlass::gemm::SharedMemoryClearOption::kZfill>;
  using MLTb = Mainloop<typename K::Mma, kCopies, cutlass::gemm::SharedMemoryClearOption::kNone>;
  static int const kSmemCutlass = int(sizeof(typename GemmKernel::SharedStorage));
  static int const kSmemCopy = int(sizeof(SharedStorage<K, MLCopy>));
  static int const kSmemZfill = int(sizeof(SharedStorage<K, MLZfill>));
  static int const kSmemCoop = int(sizeof(CoopStorage<K, MLZfill>));
  static int const kSmemRecompute = int(sizeof(RecomputeStorage<K, MLCopy>));
  static int const kSmemTb = int(sizeof(SharedStorage<K, MLTb>));
  static int const kSmemAbft = int(sizeof(AbftStorage<K, MLCopy>));
  // ref_checksums: concurrent: its checksum strips per tile (tb_n / FTGEN_ABFT_STRIP_N, whole warp columns each), and
  // the shared memory of the kernels that check them (the GEMM itself keeps kSmemAbft: abft_once_kernel's kDefer)
  static int const kConcStrips = kAbftConcurrent && kAbftStripN > 0 ? K::Shape::kN / kAbftStripN : 1;
  static int const kSmemAbftConc = int(sizeof(AbftStorage<K, MLCopy, kConcStrips>));
  // fp64 threadblock ABFT: its own check after the GEMM, in double (cutlass_abft64.cuh)
  static constexpr bool kAbft64 = std::is_same<Acc, double>::value;

  static cutlass::gemm::GemmCoord tiled(int m, int n, int k) {
    typename K::Swizzle sw;
    return sw.get_tiled_shape(cutlass::gemm::GemmCoord(m, n, k), {K::Shape::kM, K::Shape::kN, K::Shape::kK}, 1);
  }

  static typename K::GemmParams gemm_params(const Prepared& q, EC* D, long long ldd) {
    const cutlass::gemm::GemmCoord problem(q.m, q.n, q.k);
    typename K::Mma::IteratorA::TensorRef ref_A(const_cast<EA*>(static_cast<const EA*>(q.A)), typename K::LayoutA(q.lda));
    typename K::Mma::IteratorB::TensorRef ref_B(const_cast<EB*>(static_cast<const EB*>(q.B)), typename K::LayoutB(q.ldb));
    typename K::Epilogue::OutputTileIterator::TensorRef ref_C(static_cast<EC*>(q.C), cutlass::layout::RowMajor(q.ldc));
    typename K::Epilogue::OutputTileIterator::TensorRef ref_D(D, cutlass::layout::RowMajor(ldd));
    typename K::OutputOp::Params epi(static_cast<typename K::ElementCompute>(q.alpha), static_cast<typename K::ElementCompute>(q.beta));
    return typename K::GemmParams(problem, tiled(q.m, q.n, q.k), ref_A, ref_B, ref_C, ref_D, epi, nullptr);
  }

  static TileParams<K> tile_params(const Prepared& q, EC* D, long long ldd) {
    TileParams<K> t;
    t.gemm = gemm_params(q, D, ldd);
    t.total_k = q.lay.total_k;
    t.interval = q.interval;
    t.tiles_m = q.lay.tiles_m;
    t.tiles_n = q.lay.tiles_n;
    t.correct = q.correct;
    t.counters = q.counters;
    for (int c = 0; c < kCopies; ++c) t.zero_bits[c] = 0ull;
    t.fault_by_block = kInject ? q.fault_by_block : nullptr;
    t.faults = kInject ? q.faults : nullptr;
    t.records = kInject ? q.records : nullptr;
    return t;
  }

  static dim3 grid_of(const Prepared& q) {
    typename K::Swizzle sw;
    return sw.get_grid_shape(tiled(q.m, q.n, q.k));
  }

  // -- the unprotected CUTLASS kernel (also the kernel-level copies of builds without injection)
  static cudaError_t launch_cutlass(const Prepared& q, EC* D, long long ldd, cudaStream_t s) {
    if (const cudaError_t e = set_smem(cutlass::Kernel<GemmKernel>, kSmemCutlass); e != cudaSuccess) return e;
    typename K::GemmParams gp = gemm_params(q, D, ldd);
    cutlass::Kernel<GemmKernel><<<grid_of(q), dim3(K::kThreads), kSmemCutlass, s>>>(gp);
    return cudaGetLastError();
  }

  // -- kernel level without injection: CUTLASS's kernel with the tile vote appended
  static cudaError_t launch_cutlass_vote(const Prepared& q, EC* D, long long ldd, TileVote<EC> const& vote, cudaStream_t s) {
    auto kernel = cutlass_copy_kernel<K>;
    if (const cudaError_t e = set_smem(kernel, kSmemCutlass); e != cudaSuccess) return e;
    typename K::GemmParams gp = gemm_params(q, D, ldd);
    kernel<<<grid_of(q), dim3(K::kThreads), kSmemCutlass, s>>>(gp, vote);
    return cudaGetLastError();
  }

  template <bool kState, cutlass::gemm::SharedMemoryClearOption kClear>
  static cudaError_t launch_copy(const Prepared& q, int copy, int k_begin, int k_count, Acc* state, EC* D, long long ldd,
                                 cudaStream_t s, TileVote<EC> const* vote = nullptr) {
    auto kernel = copy_kernel<K, kInject, kState, kClear>;
    const int smem = kClear == cutlass::gemm::SharedMemoryClearOption::kZfill ? kSmemZfill : kSmemCopy;
    if (const cudaError_t e = set_smem(kernel, smem); e != cudaSuccess) return e;
    CopyParams<K> cp;
    cp.t = tile_params(q, D, ldd);
    cp.copy = copy;
    cp.k_begin = k_begin;
    cp.k_count = k_count;
    cp.first = k_begin == 0;
    cp.last = k_begin + k_count == q.lay.total_k;
    cp.state = state;
    cp.params_D = typename K::OutParams(cutlass::layout::RowMajor(ldd));
    cp.ptr_D = D;
    if (vote) cp.vote = *vote;
    else std::memset(&cp.vote, 0, sizeof(cp.vote));
    kernel<<<grid_of(q), dim3(K::kThreads), smem, s>>>(cp);
    return cudaGetLastError();
  }

  // Output of copy c: C itself for copy 0 when beta == 0 (nothing reads C then), else workspace.
  static EC* out_ptr(const Prepared& q, int c) {
    return (c == 0 && q.beta == 0.0) ? static_cast<EC*>(q.C) : reinterpret_cast<EC*>(q.ws + q.lay.d[c]);
  }
  static long long out_ld(const Prepared& q, int c) { return (c == 0 && q.beta == 0.0) ? q.ldc : q.lay.ldw; }

  // ctl: [list count][flags: tiles][list: tiles][arrivals: tiles] (arrivals: kernel level only)
  static int* ctl(const Prepared& q) { return reinterpret_cast<int*>(q.ws + q.lay.ctl); }

  // Whether the output votes can use 16-byte accesses.
  static bool vote_vec(const Prepared& q) {
    constexpr int V = 16 / int(sizeof(EC));
    return K::Shape::kN % V == 0 && q.n % V == 0 && out_ld(q, 0) % V == 0 && q.lay.ldw % V == 0 && q.ldc % V == 0 &&
           aligned_ptr<EC>(out_ptr(q, 0), V) && aligned_ptr<EC>(q.C, V) && aligned_ptr<EC>(out_ptr(q, 1), V) &&
           aligned_ptr<EC>(out_ptr(q, 2), V);
  }

  static TileVote<EC> tile_vote(const Prepared& q) {
    const int tiles = q.lay.tiles_m * q.lay.tiles_n;
    TileVote<EC> v;
    v.src0 = out_ptr(q, 0);
    v.ld0 = out_ld(q, 0);
    v.d1 = out_ptr(q, 1);
    v.d2 = out_ptr(q, 2);
    v.ldw = q.lay.ldw;
    v.dst = static_cast<EC*>(q.C);
    v.ldc = q.ldc;
    v.m = q.m;
    v.n = q.n;
    v.tiles_n = q.lay.tiles_n;
    v.write_all = q.beta != 0.0;
    v.correct = q.correct;
    v.vec = vote_vec(q) ? 1 : 0;
    v.list_count = ctl(q);
    v.flags = ctl(q) + 1;
    v.list = ctl(q) + 1 + tiles;
    v.arrive = reinterpret_cast<unsigned*>(ctl(q) + 1 + 2 * tiles);
    v.counters = q.counters;
    v.fault_by_block = kInject ? q.fault_by_block : nullptr;
    return v;
  }

  static cudaError_t vote_and_recompute(const Prepared& q, bool poison, cudaStream_t s) {
    DeviceProps dp;
    cudaError_t e = device_props(dp);
    if (e != cudaSuccess) return e;
    const int tiles = q.lay.tiles_m * q.lay.tiles_n;
    int* flags = ctl(q) + 1;
    int* list = flags + tiles;
    OutVoteParams<EC> vp;
    vp.m = q.m;
    vp.n = q.n;
    vp.src0 = out_ptr(q, 0);
    vp.ld0 = out_ld(q, 0);
    vp.d1 = out_ptr(q, 1);
    vp.d2 = out_ptr(q, 2);
    vp.ldw = q.lay.ldw;
    vp.dst = static_cast<EC*>(q.C);
    vp.ldc = q.ldc;
    vp.write_all = q.beta != 0.0;
    vp.correct = q.correct;
    vp.tile_m = K::Shape::kM;
    vp.tile_n = K::Shape::kN;
    vp.tiles_n = q.lay.tiles_n;
    vp.flags = flags;
    vp.list = list;
    vp.list_count = ctl(q);
    vp.counters = q.counters;
    vp.fault_by_block = kInject ? q.fault_by_block : nullptr;
    constexpr int V = 16 / int(sizeof(EC));
    const bool vec = vote_vec(q);
    const long long work = static_cast<long long>(q.m) * (((vec ? q.n / V : q.n) + 31) / 32) * 32;
    const int blocks = static_cast<int>(std::min<long long>((work + 255) / 256, 8ll * dp.sms));
    if (vec) {
      if (poison) vote_outputs_kernel<EC, V, true><<<blocks, 256, 0, s>>>(vp);
      else vote_outputs_kernel<EC, V, false><<<blocks, 256, 0, s>>>(vp);
    } else {
      if (poison) vote_outputs_kernel<EC, 1, true><<<blocks, 256, 0, s>>>(vp);
      else vote_outputs_kernel<EC, 1, false><<<blocks, 256, 0, s>>>(vp);
    }
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    return recompute(q, s);
  }

  // Recompute whatever the votes flagged (a grid of early exits when nothing is).
  static cudaError_t recompute(const Prepared& q, cudaStream_t s) {
    if (!q.correct) return cudaSuccess;
    DeviceProps dp;
    cudaError_t e = device_props(dp);
    if (e != cudaSuccess) return e;
    const int tiles = q.lay.tiles_m * q.lay.tiles_n;
    int* flags = ctl(q) + 1;
    int* list = flags + tiles;
    auto kernel = recompute_kernel<K>;
    if ((e = set_smem(kernel, kSmemRecompute)) != cudaSuccess) return e;
    RecomputeParams<K> rp;
    rp.t = tile_params(q, static_cast<EC*>(q.C), q.ldc);
    rp.params_w = typename K::OutParams(cutlass::layout::RowMajor(q.lay.ldw));
    for (int c = 0; c < kCopies; ++c) rp.d[c] = reinterpret_cast<EC*>(q.ws + q.lay.d[c]);
    rp.ldw = q.lay.ldw;
    rp.src0 = out_ptr(q, 0);
    rp.ld0 = out_ld(q, 0);
    rp.flags = flags;
    rp.list = list;
    rp.list_count = ctl(q);
    rp.max_attempts = kMaxAttempts;
    kernel<<<std::min(tiles, dp.sms), dim3(K::kThreads), kSmemRecompute, s>>>(rp);
    return cudaGetLastError();
  }

  // Three copies on three streams (copy 0 on the caller's), each launched right after the fork; the
  // last copy of each tile votes it (no separate vote pass); the caller's stream then waits for the
  // two others only before the recompute launch (a no-op grid unless a tile was flagged).
  static cudaError_t run_kernel_level(const Prepared& q, cudaStream_t s) {
    Streams* st = nullptr;
    cudaError_t e = streams(st);
    if (e == cudaSuccess) e = cudaMemsetAsync(ctl(q), 0, sizeof(int) * (1 + 3 * size_t(q.lay.tiles_m) * q.lay.tiles_n), s);
    if (e == cudaSuccess) e = fork(*st, s);
    const TileVote<EC> vote = tile_vote(q);
    for (int c = 0; c < kCopies && e == cudaSuccess; ++c) {
      cudaStream_t sc = c == 0 ? s : st->s[c - 1];
      if constexpr (kInject) {
        e = launch_copy<false, cutlass::gemm::SharedMemoryClearOption::kNone>(q, c, 0, q.lay.total_k, nullptr, out_ptr(q, c),
                                                                               out_ld(q, c), sc, &vote);
      } else {
        e = launch_cutlass_vote(q, out_ptr(q, c), out_ld(q, c), vote, sc);
      }
    }
    if (e == cudaSuccess) e = join(*st, s);
    if (e == cudaSuccess) e = recompute(q, s);
    return e;
  }

  static cudaError_t run_multikernel(const Prepared& q, cudaStream_t s) {
    Streams* st = nullptr;
    DeviceProps dp;
    cudaError_t e = streams(st);
    if (e == cudaSuccess) e = device_props(dp);
    const int tiles = q.lay.tiles_m * q.lay.tiles_n;
    if (e == cudaSuccess) e = cudaMemsetAsync(ctl(q), 0, sizeof(int) * (1 + 2 * size_t(tiles)), s);
    Acc* state[kCopies];
    for (int c = 0; c < kCopies; ++c) state[c] = reinterpret_cast<Acc*>(q.ws + q.lay.s[c]);
    for (int kb = 0; kb < q.lay.total_k && e == cudaSuccess; kb += q.interval) {
      const int kc = std::min(q.interval, q.lay.total_k - kb);
      const bool last = kb + kc == q.lay.total_k;
      e = fork(*st, s);
      for (int c = 0; c < kCopies && e == cudaSuccess; ++c) {
        cudaStream_t sc = c == 0 ? s : st->s[c - 1];
        e = launch_copy<true, cutlass::gemm::SharedMemoryClearOption::kZfill>(q, c, kb, kc, state[c], out_ptr(q, c), out_ld(q, c), sc);
      }
      if (e == cudaSuccess) e = join(*st, s);
      if (e == cudaSuccess && !last) {
        StateVoteParams<Acc> vp;
        for (int c = 0; c < kCopies; ++c) vp.s[c] = state[c];
        vp.tile_vectors = K::kTileElems / (16 / int(sizeof(Acc)));
        vp.vectors = static_cast<long long>(tiles) * vp.tile_vectors;
        vp.correct = q.correct;
        vp.flags = ctl(q) + 1;
        vp.list = ctl(q) + 1 + tiles;
        vp.list_count = ctl(q);
        vp.counters = q.counters;
        const int blocks = static_cast<int>(std::min<long long>((vp.vectors + 255) / 256, 8ll * dp.sms));
        vote_states_kernel<Acc><<<blocks, 256, 0, s>>>(vp);
        e = cudaGetLastError();
      }
    }
    if (e == cudaSuccess) e = vote_and_recompute(q, true, s);
    return e;
  }

  static cudaError_t run_threadblock(const Prepared& q, cudaStream_t s) {
    auto kernel = tb_kernel<K, kInject>;
    if (const cudaError_t e = set_smem(kernel, kSmemTb); e != cudaSuccess) return e;
    TbParams<K> tp;
    tp.t = tile_params(q, static_cast<EC*>(q.C), q.ldc);
    kernel<<<grid_of(q), dim3(K::kThreads), kSmemTb, s>>>(tp);
    return cudaGetLastError();
  }

  // The reference GEMM of the tensor-core pre-pass (ref_checksums: prepass): D[u] = A[:, u sub ..] E[u sub .., :] for
  // the sub-chunks u of k; part 0 the full sub-chunks (batched), part 1 a shorter last one.
  using RefGemm = AbftRefGemm<typename K::LayoutA, K::kAlignA>;
  static int ref_gemm_batches(const Prepared& q, int part) {
    const int full = q.k / q.lay.ref_sub;
    return part == 0 ? full : (q.k - full * q.lay.ref_sub > 0 ? 1 : 0);
  }
  // (auto: GemmUniversal is instantiated only where it runs; G: RefGemm, or Abft64RefGemm for fp64)
  template <class G = RefGemm>
  static auto ref_gemm_args(const Prepared& q, int part) {
    using T = typename G::ElementA;
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    const T* A = static_cast<const T*>(q.A);
    const T* E = reinterpret_cast<const T*>(q.ws + q.lay.ref_e);
    T* D = reinterpret_cast<T*>(q.ws + q.lay.ref_d);
    const int w = q.lay.ref_w, sub = q.lay.ref_sub, full = q.k / sub, batches = ref_gemm_batches(q, part);
    const int kk = part == 0 ? sub : q.k - full * sub;
    const long long step_a = kRowA ? sub : sub * q.lda;  // A's offset per sub-chunk of k
    const long long u0 = part == 0 ? 0 : full, stride_d = static_cast<long long>(q.m) * w;
    return typename G::Arguments(
        batches > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm, {q.m, w, kk}, batches,
        {T(1), T(0)}, A + u0 * step_a, E + u0 * sub * w, D + u0 * stride_d, D + u0 * stride_d, step_a, static_cast<long long>(sub) * w,
        stride_d, stride_d, q.lda, w, w, w);
  }
  // the reference GEMM G on stream s: both parts (the full sub-chunks batched, a shorter last one)
  template <class G = RefGemm>
  static cudaError_t run_ref_gemm(const Prepared& q, cudaStream_t s) {
    for (int part = 0; part < 2; ++part) {
      if (ref_gemm_batches(q, part) == 0) continue;
      G gemm;
      if (gemm.initialize(ref_gemm_args<G>(q, part), nullptr, s) != cutlass::Status::kSuccess) return cudaErrorInvalidConfiguration;
      if (gemm.run(s) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }

  // the reference pre-pass on the tensor cores where k has no residue iteration and CUTLASS can run the reference GEMM
  // (A's alignment at every sub-chunk); the SIMT pre-pass otherwise
  static bool ref_on_tc(const Prepared& q) {
    bool ref_tc = false;
    if constexpr (kAbftPrepass) {
      ref_tc = q.lay.ref_tc;
      if (kAbftRefExternal) return ref_tc;
      for (int part = 0; part < 2 && ref_tc; ++part)
        ref_tc = ref_gemm_batches(q, part) == 0 || RefGemm::can_implement(ref_gemm_args(q, part)) == cutlass::Status::kSuccess;
    }
    return ref_tc;
  }

  // threadblock ABFT: the strip encodings of B (a pre-pass reading B once), then the GEMM
  // The pre-passes of threadblock ABFT on stream s: the strip encodings of B, then (prepass) r, r' at every checkpoint.
  // ext_ref (kAbftRefExternal): ext_ref(E, ref_w, used columns, D, s) computes D = A E on s in place of the batched
  // reference GEMM.
  template <class ExtRef = std::nullptr_t>
  static cudaError_t launch_prepass(const Prepared& q, cudaStream_t s, ExtRef&& ext_ref = nullptr) {
    float4* enc = reinterpret_cast<float4*>(q.ws + q.lay.enc);
    const int strips = q.lay.strips;  // (of q.lay.strip_n columns: the tile's, or ref_checksums: concurrent's)
    constexpr bool kRowB = std::is_same<typename K::LayoutB, cutlass::layout::RowMajor>::value;
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    // (row-major B: a warp per 8 k rows of a strip; column-major: a thread per k row and strip)
    const long long threads = kRowB ? static_cast<long long>((q.k + 7) / 8) * strips * 32 : static_cast<long long>(q.k) * strips;
    const bool ref_tc = ref_on_tc(q);
    float* E = ref_tc ? reinterpret_cast<float*>(q.ws + q.lay.ref_e) : nullptr;
    abft_enc_kernel<EB, kRowB><<<static_cast<unsigned>((threads + 255) / 256), 256, 0, s>>>(static_cast<const EB*>(q.B), q.ldb, q.k, q.n,
                                                                                          q.lay.strip_n, strips, enc, E, q.lay.ref_w);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    if constexpr (kAbftPrepass) {  // r, r' at every checkpoint: a pre-pass reading A once
      float2* ref = reinterpret_cast<float2*>(q.ws + q.lay.ref);
      if (ref_tc) {  // on the tensor cores: a batched GEMM A x E per sub-chunk (or the caller's GEMM), then the scan
        if constexpr (kAbftRefExternal && !std::is_same<std::decay_t<ExtRef>, std::nullptr_t>::value) {
          e = ext_ref(static_cast<const float*>(E), q.lay.ref_w, 2 * strips, reinterpret_cast<float*>(q.ws + q.lay.ref_d), s);
        } else {
          e = run_ref_gemm(q, s);
        }
        if (e != cudaSuccess) return e;
        const long long n = static_cast<long long>(q.m) * strips;
        abft_ref_scan_tc_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(
            reinterpret_cast<const float*>(q.ws + q.lay.ref_d), q.lay.ref_w, ref, q.m, strips, q.lay.chunks, q.lay.subs, q.lay.ref_per);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
      } else {  // the SIMT pre-pass (in parts where the intervals alone would not fill the GPU), then the scan
        const int slots = q.lay.chunks * q.lay.parts;
        float2* part = q.lay.parts > 1 ? reinterpret_cast<float2*>(q.ws + q.lay.ref_parts) : ref;
        const dim3 grid(static_cast<unsigned>((q.m + 63) / 64), static_cast<unsigned>((strips + 31) / 32), static_cast<unsigned>(slots));
        abft_ref_kernel<EA, kRowA, K::Shape::kK><<<grid, 128, 0, s>>>(static_cast<const EA*>(q.A), q.lda, q.m, q.k, q.lay.total_k,
                                                                     q.interval, q.lay.parts, q.lay.part_len, slots, enc, strips, part);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        if (slots > 1) {
          const long long n = static_cast<long long>(q.m) * strips;
          abft_ref_scan_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(part, ref, q.m, strips, q.lay.chunks, q.lay.parts);
          if ((e = cudaGetLastError()) != cudaSuccess) return e;
        }
      }
    }
    return cudaSuccess;
  }

  static AbftParams<K> abft_params(const Prepared& q) {
    AbftParams<K> ap;
    ap.t = tile_params(q, static_cast<EC*>(q.C), q.ldc);
    ap.enc = reinterpret_cast<const float4*>(q.ws + q.lay.enc);
    ap.ref = kAbftPrepass ? reinterpret_cast<const float2*>(q.ws + q.lay.ref) : nullptr;
    ap.chunks = q.lay.chunks;
    ap.A = static_cast<const EA*>(q.A);
    ap.lda = q.lda;
    ap.unit = q.abft.unit;
    ap.fixed = q.abft.fixed;
    ap.online = q.abft.online;
    ap.redo = nullptr;
    ap.redo_part = nullptr;
    ap.obs = nullptr;
    ap.rows_redo = nullptr;
    ap.rows_cap = 0;
    ap.row_part = nullptr;
    ap.flagged = nullptr;
    ap.band = 0.f;
    ap.elem_tol = 0.0;
    if (kAbftPrepass && q.lay.chunks == 1) {
      ap.redo = reinterpret_cast<int*>(q.ws + q.lay.redo);
      ap.redo_part = reinterpret_cast<Acc*>(q.ws + q.lay.redo_part);
    }
    return ap;
  }

  // abft_once_kernel's second launch: the listed tiles recomputed, a block per SM, all resident (redo_part holds sms
  // tiles; the parts of a tile wait for each other)
  // (kStrips: the checksum strips per tile of the check that listed them)
  template <int kStrips = 1>
  static cudaError_t launch_redo(AbftParams<K>& ap, cudaStream_t s) {
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    constexpr int kSmem = kStrips == 1 ? kSmemAbft : kSmemAbftConc;
    static_assert(kStrips == 1 || kStrips == kConcStrips, "the strips of the prepass or the concurrent design");
    auto redo = abft_once_kernel<K, kInject, kRowA, true, false, kStrips>;
    DeviceProps dp;
    cudaError_t e;
    if ((e = set_smem(redo, kSmem)) != cudaSuccess || (e = device_props(dp)) != cudaSuccess) return e;
    void* args[] = {&ap};
    return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(redo), dim3(static_cast<unsigned>(std::max(dp.sms, 1))),
                                       dim3(K::kThreads), args, kSmem, s);
  }

  // The problem with the pre-pass on the tiles' own checksum strips (tb_n columns): a ref_checksums: concurrent build
  // whose run falls back to the prepass design (beta != 0 or alpha == 0) takes them in the workspace sized for its
  // finer strips (fewer strips: every section fits).
  static Prepared tile_strips(const Prepared& q) {
    Prepared r = q;
    r.lay.strips = q.lay.tiles_n;
    r.lay.strip_n = K::Shape::kN;
    if (r.lay.ref_tc) r.lay.ref_w = (2 * r.lay.strips + 7) / 8 * 8;
    return r;
  }

  // ref_checksums: concurrent (one checkpoint per tile, beta = 0, alpha != 0): the GEMM (abft_once_kernel<.., kDefer>,
  // its pass-1 sums to obs) and the pre-passes on two streams at once, then on s the check (abft_check_kernel) and the
  // recomputation of the tiles it listed. FTGEN_ABFT_SIDE (read once): low (the default, also for any other value: the
  // GEMM on a stream of the greatest priority, the pre-passes at the least, so their blocks fill what the GEMM leaves),
  // high (the other way round), serial (everything on s, in order: the same kernels without the overlap, to compare).
  // first(ap, gs) launches the GEMM on gs: the one that writes C and stores the pass-1 sums to ap.obs (this variant's
  // abft_once_kernel<.., kDefer>, or run_abft_external's GEMM of another backend followed by abft_obs_kernel), after the
  // planned faults' errors (inject builds) on the same stream.
  static cudaError_t run_abft_concurrent(const Prepared& q, cudaStream_t s) {
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    // the GEMM storing its sums with the weights of the check's strips (kConcStrips per tile, its scratch kSmemAbft's)
    return run_abft_concurrent(q, s, [&](AbftParams<K> const& ap, cudaStream_t gs) {
      auto first = abft_once_kernel<K, kInject, kRowA, false, true, kConcStrips>;
      cudaError_t e;
      if ((e = set_smem(first, kSmemAbft)) != cudaSuccess) return e;
      first<<<grid_of(q), dim3(K::kThreads), kSmemAbft, gs>>>(ap);
      return cudaGetLastError();
    });
  }
  // ext_ref: the caller's reference GEMM (kAbftRefExternal; launch_prepass), on the pre-passes' stream (it waits there for
  // what it reads of first's work)
  template <class First, class ExtRef = std::nullptr_t>
  static cudaError_t run_abft_concurrent(const Prepared& q, cudaStream_t s, First&& first, ExtRef&& ext_ref = nullptr) {
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    static_assert(kAbftStripN == 0 || (K::Shape::kN % kAbftStripN == 0 && kAbftStripN % AbftShape<K>::kWarpN == 0),
                  "FTGEN_ABFT_STRIP_N: whole warp columns, dividing tb_n");
    cudaError_t e;
    AbftParams<K> ap = abft_params(q);
    if (q.abft.conc_unit > 0.f) ap.unit = q.abft.conc_unit;  // the threshold unit of the strips' check (its lambda)
    ap.obs = reinterpret_cast<float4*>(q.ws + q.lay.obs);
    const int tiles = q.lay.tiles_m * q.lay.tiles_n;
    Streams* st;
    cudaStream_t gs, ps;  // the GEMM's stream, the pre-passes'
    if ((e = abft_side_streams(s, st, gs, ps)) != cudaSuccess) return e;
    ap.rows_redo = ap.redo + 1 + 3 * size_t(tiles);
    ap.rows_cap = q.lay.rows_cap;
    ap.row_part = reinterpret_cast<double*>(q.ws + q.lay.row_part);
    ap.flagged = ap.redo + q.lay.flagged;
    ap.band = q.abft.band;
    ap.elem_tol = q.abft.elem_u * (q.abft.elem_c_sqrt * std::sqrt(static_cast<double>(q.k)) + q.abft.elem_c_const);
    if ((e = cudaMemsetAsync(ap.redo, 0, sizeof(int) * q.lay.redo_ints, gs)) != cudaSuccess) return e;
    if constexpr (kInject) {  // the planned faults' errors, for the GEMM to start their accumulators with
      if (ap.t.faults != nullptr && q.fault_count > 0) {
        abft_fault_error_kernel<K, kRowA, kInject><<<dim3(static_cast<unsigned>(q.fault_count), kFaultParts), 256, 0, gs>>>(
            ap, ap.redo + q.lay.fault_done, reinterpret_cast<double*>(q.ws + q.lay.fault_part));
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
      }
    }
    if ((e = first(static_cast<AbftParams<K> const&>(ap), gs)) != cudaSuccess) return e;
    if ((e = launch_prepass(q, ps, ext_ref)) != cudaSuccess) return e;
    if (st != nullptr && (e = join(*st, s)) != cudaSuccess) return e;
    abft_check_kernel<K, kInject, kRowA, kConcStrips><<<static_cast<unsigned>(tiles), dim3(K::kThreads), 0, s>>>(ap);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    return launch_redo<kConcStrips>(ap, s);
  }

  // ref_checksums: concurrent around a GEMM of another backend (the cutlass90 backend's sm90 kernel): gemm(gs) writes
  // C = alpha A B of the problem q (beta = 0, alpha != 0: the caller's to ensure) on stream gs, then abft_obs_kernel
  // forms the pass-1 sums from C (and, inject builds, adds the planned faults' errors to C first) in place of
  // abft_once_kernel<.., kDefer>; the pre-passes, the check and the second launch are run_abft_concurrent's. This
  // kit K only describes the check: its tiles, warp columns and strips, its fault units (fault_element), and the second
  // launch's recomputation of a tile (its main loop; rare: a full list of rows).
  // ext_ref (kAbftRefExternal): the reference GEMM of the same backend (launch_prepass), on the pre-passes' stream.
  template <class ExtGemm, class ExtRef = std::nullptr_t>
  static cudaError_t run_abft_external(const Prepared& q, cudaStream_t s, ExtGemm&& gemm, ExtRef&& ext_ref = nullptr) {
    static_assert(kLevel == kLevelAbft && kAbftConcurrent, "the design of ref_checksums: concurrent");
    return run_abft_concurrent(
        q, s,
        [&](AbftParams<K> const& ap, cudaStream_t gs) {
          cudaError_t e = gemm(gs);
          if (e != cudaSuccess) return e;
          return launch_obs(ap, gs);
        },
        ext_ref);
  }

  // abft_obs_kernel over C (M rows x the tiles' columns, kObsCols columns per thread)
  static cudaError_t launch_obs(AbftParams<K> const& ap, cudaStream_t s) {
    DeviceProps dp;
    cudaError_t e;
    if ((e = device_props(dp)) != cudaSuccess) return e;
    const long long items = static_cast<long long>(ap.t.gemm.problem_size.m()) * ap.t.tiles_n * (K::Shape::kN / kObsCols);
    const long long blocks = std::max(1LL, std::min<long long>((items + 255) / 256, 16LL * std::max(dp.sms, 1)));
    abft_obs_kernel<K, kInject, kConcStrips><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
        ap, cutlass::FastDivmod(ap.t.tiles_n * (K::Shape::kN / kObsCols)));
    return cudaGetLastError();
  }

  // fp64 threadblock ABFT (cutlass_abft64.cuh): on a low-priority stream the encodings of B and the reference GEMM, beside
  // (high priority) the planned faults' errors (inject builds), the variant's unprotected kernel writing C = alpha A B and
  // the errors added to C; then, after both, the check on the caller's stream. beta != 0: the GEMM writes C' to the
  // workspace, checked there, then C = C' + beta C. alpha = 0: the unprotected kernel (C = beta C, no products).
  static cudaError_t run_abft64(const Prepared& q, cudaStream_t s) {
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    constexpr bool kRowB = std::is_same<typename K::LayoutB, cutlass::layout::RowMajor>::value;
    if (q.alpha == 0.0) return launch_cutlass(q, static_cast<EC*>(q.C), q.ldc, s);
    const bool direct = q.beta == 0.0;
    Prepared g = q;
    g.beta = 0.0;
    g.C = direct ? q.C : q.ws + q.lay.d[0];
    g.ldc = direct ? q.ldc : q.n;
    double* const out = static_cast<double*>(g.C);
    cudaError_t e;
    Streams* st;
    cudaStream_t gs, ps;  // the GEMM's stream, the pre-passes'
    if ((e = abft_side_streams(s, st, gs, ps)) != cudaSuccess) return e;
    const bool faults = kInject && q.faults != nullptr && q.records != nullptr && q.fault_count > 0;
    if constexpr (kInject) {
      if (faults) {
        const AbftParams<K> ap = abft_params(g);  // (the tiles, the operands and the plan)
        int* const done = reinterpret_cast<int*>(q.ws + q.lay.redo);
        if ((e = cudaMemsetAsync(done, 0, sizeof(int) * q.lay.flagged, gs)) != cudaSuccess) return e;
        abft_fault_error_kernel<K, kRowA, kInject><<<dim3(static_cast<unsigned>(q.fault_count), kFaultParts), 256, 0, gs>>>(
            ap, done, reinterpret_cast<double*>(q.ws + q.lay.fault_part));
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
      }
    }
    if ((e = launch_cutlass(g, out, g.ldc, gs)) != cudaSuccess) return e;
    if (faults) {
      abft64_apply_kernel<<<static_cast<unsigned>((q.fault_count + 127) / 128), 128, 0, gs>>>(q.faults, q.records, q.fault_count, q.lay.total_k,
                                                                                             out, g.ldc, q.m, q.n, q.alpha, q.counters);
      if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    const int strips = q.lay.strips;
    const long long enc_threads = static_cast<long long>(q.k) * strips * (kRowB ? kAbft64Lanes : 1);
    abft64_enc_kernel<kRowB><<<static_cast<unsigned>((enc_threads + 255) / 256), 256, 0, ps>>>(
        static_cast<const double*>(q.B), q.ldb, q.k, q.n, strips, reinterpret_cast<double*>(q.ws + q.lay.ref_e), q.lay.ref_w,
        reinterpret_cast<double*>(q.ws + q.lay.enc));
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    using RefGemm64 = Abft64RefGemm<typename K::LayoutA, typename K::Operator::ArchTag, typename K::Operator::InstructionShape>;
    if ((e = run_ref_gemm<RefGemm64>(q, ps)) != cudaSuccess) return e;
    const long long ref_elems = static_cast<long long>(q.m) * q.lay.ref_w;
    abft64_ref_sum_kernel<<<static_cast<unsigned>((ref_elems + 255) / 256), 256, 0, ps>>>(
        reinterpret_cast<const double*>(q.ws + q.lay.ref_d), q.lay.subs, ref_elems, reinterpret_cast<double*>(q.ws + q.lay.ref));
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    if (st != nullptr && (e = join(*st, s)) != cudaSuccess) return e;
    Abft64Params cp;
    cp.A = static_cast<const double*>(q.A);
    cp.lda = q.lda;
    cp.B = static_cast<const double*>(q.B);
    cp.ldb = q.ldb;
    cp.C = out;
    cp.ldc = g.ldc;
    cp.alpha = q.alpha;
    cp.m = q.m, cp.n = q.n, cp.k = q.k, cp.strips = strips;
    cp.R = reinterpret_cast<const double*>(q.ws + q.lay.ref);
    cp.ldd = q.lay.ref_w;
    cp.b2 = reinterpret_cast<const double*>(q.ws + q.lay.enc);
    cp.unit = static_cast<double>(q.abft.conc_unit) * (std::sqrt(static_cast<double>(q.k)) + std::sqrt(double(kAbft64Cols)) + 1.0);
    cp.fixed = q.abft.fixed;
    cp.rms_w = std::sqrt((kAbft64Cols + 1.0) * (2.0 * kAbft64Cols + 1.0) / 6.0);
    cp.online = q.abft.online;
    cp.correct = q.correct;
    cp.counters = q.counters;
    const long long units = static_cast<long long>(q.m) * strips;
    cp.counts = reinterpret_cast<int*>(q.ws + q.lay.redo) + q.lay.flagged;
    cp.lists = cp.counts + 2;
    cp.list_cap = units;
    // the suspect band (none where a unit's id would reach the suspects' mark)
    cp.band = units < kAbft64Suspect ? static_cast<double>(q.abft.band) : 0.0;
    cp.elem_tol = q.abft.elem_u * (q.abft.elem_c_sqrt * std::sqrt(static_cast<double>(q.k)) + q.abft.elem_c_const);
    // the band's suspects rechecked bit for bit first (row-major A; only a unit that differs is recomputed in Dot2)
    using Recheck = Abft64Recheck<K, 32, 32>;
    const bool recheck = Recheck::kBuilt && cp.band > 0.0 && q.correct;
    cp.bucket_n = recheck ? cp.lists + 3 * units : nullptr;
    cp.bucket = recheck ? cp.bucket_n + strips : nullptr;
    cp.bucket_state = recheck ? cp.bucket + units : nullptr;
    if ((e = cudaMemsetAsync(cp.counts, 0, 2 * sizeof(int), s)) != cudaSuccess) return e;
    if (recheck && (e = cudaMemsetAsync(cp.bucket_n, 0, strips * sizeof(int), s)) != cudaSuccess) return e;
    abft64_check_kernel<kAbft64Cols><<<static_cast<unsigned>((units * kAbft64Lanes + 255) / 256), 256, 0, s>>>(cp);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    DeviceProps dp;
    if ((e = device_props(dp)) != cudaSuccess) return e;
    const unsigned rare_blocks = static_cast<unsigned>(std::max(dp.sms, 1));  // (a grid-stride loop over the lists)
    abft64_rare_kernel<kRowA, kRowB><<<8 * rare_blocks, kAbft64RareThreads, 0, s>>>(cp);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    if constexpr (Recheck::kBuilt) {
      if (recheck) {
        switch (abft64_recheck_tile()) {
          case 1: e = launch_recheck<Abft64Recheck<K, 32, 128>>(cp, q, strips, dp.sms, s); break;
          case 2: e = launch_recheck<Abft64Recheck<K, 64, 32>>(cp, q, strips, dp.sms, s); break;
          default: e = launch_recheck<Recheck>(cp, q, strips, dp.sms, s);
        }
        if (e != cudaSuccess) return e;
      }
    }
    abft64_redo_kernel<kRowA, kRowB><<<rare_blocks, kAbft64RedoThreads, 0, s>>>(cp);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    if (!direct) {
      const long long n = static_cast<long long>(q.m) * q.n;
      abft64_axpby_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(out, static_cast<double*>(q.C), q.ldc, q.m, q.n, q.beta);
      if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    return cudaSuccess;
  }

  // abft64_recheck_kernel of R's tile over every strip's bucket (grid y: the strips' column parts)
  template <class R>
  static cudaError_t launch_recheck(const Abft64Params& cp, const Prepared& q, int strips, int sms, cudaStream_t s) {
    auto kernel = abft64_recheck_kernel<R>;
    if (const cudaError_t e = set_smem(kernel, R::kSmem); e != cudaSuccess) return e;
    // a strip's row blocks: about two waves over all strips (the blocks past a strip's count return at once)
    const int parts = strips * R::kParts;
    const unsigned per_strip = static_cast<unsigned>(std::max(1, std::min((2 * std::max(sms, 1) + parts - 1) / parts, (q.m + R::kRows - 1) / R::kRows)));
    kernel<<<dim3(per_strip, static_cast<unsigned>(parts)), R::kThreads, R::kSmem, s>>>(
        cp, typename R::Mma::IteratorA::Params(typename K::LayoutA(q.lda)), typename R::Mma::IteratorB::Params(typename K::LayoutB(q.ldb)), q.alpha);
    return cudaGetLastError();
  }

  static cudaError_t run_abft(const Prepared& q0, cudaStream_t s) {
    constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
    if constexpr (kAbftConcurrent) {
      // (C then holds alpha x the accumulators: the check reads them back from it)
      if (q0.lay.chunks == 1 && q0.beta == 0.0 && q0.alpha != 0.0) return run_abft_concurrent(q0, s);
    }
    const Prepared q = tile_strips(q0);  // the prepass and fused designs: a checksum strip per tile
    cudaError_t e = launch_prepass(q, s);
    if (e != cudaSuccess) return e;
    AbftParams<K> ap = abft_params(q);
    if constexpr (kAbftPrepass) {
      if (q.lay.chunks == 1) {  // one checkpoint per tile: the verification after an unmodified main loop (abft_once_kernel)
        auto first = abft_once_kernel<K, kInject, kRowA, false>;
        if ((e = set_smem(first, kSmemAbft)) != cudaSuccess) return e;
        if ((e = cudaMemsetAsync(ap.redo, 0, sizeof(int) * q.lay.redo_ints, s)) != cudaSuccess) return e;
        first<<<grid_of(q), dim3(K::kThreads), kSmemAbft, s>>>(ap);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        return launch_redo(ap, s);
      }
    }
    auto kernel = abft_kernel<K, kInject, kAbftPrepass, kRowA>;
    if ((e = set_smem(kernel, kSmemAbft)) != cudaSuccess) return e;
    kernel<<<grid_of(q), dim3(K::kThreads), kSmemAbft, s>>>(ap);
    return cudaGetLastError();
  }

  // Co-resident blocks of the cooperative kernel on this device (0 on error); cached per device.
  static int coop_capacity(int* per_sm = nullptr) {
    static int cached_device = -1, cached_nb = 0, cached_sms = 0;
    DeviceProps dp;
    if (device_props(dp) != cudaSuccess) return 0;
    if (cached_device != dp.device) {
      auto kernel = coop_kernel<K, kInject>;
      if (set_smem(kernel, kSmemCoop) != cudaSuccess) return 0;
      int nb = 0;
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, kernel, K::kThreads, kSmemCoop) != cudaSuccess) return 0;
      cached_device = dp.device;
      cached_nb = nb;
      cached_sms = dp.sms;
    }
    if (per_sm) *per_sm = cached_nb;
    return cached_nb * cached_sms;
  }

  // Teams of the cooperative grid: `requested` (0 = as many as fit, at most one per tile), raised to
  // the blocks an SM can hold so that a team's three ranks never share an SM. 0 when it cannot fit.
  static int coop_teams(int tiles, int requested) {
    int nb = 0;
    const int cap = coop_capacity(&nb);
    if (cap < kCopies || nb < 1) return 0;
    int t = requested > 0 ? requested : std::min(tiles, cap / kCopies);
    t = std::max(t, nb);
    return kCopies * t <= cap ? t : 0;
  }

  static cudaError_t run_cooperative(const Prepared& q, cudaStream_t s) {
    auto kernel = coop_kernel<K, kInject>;
    // this instantiation's own co-resident capacity (the workspace is sized for the larger one)
    const int teams = coop_teams(q.lay.tiles_m * q.lay.tiles_n, q.coop_param);
    if (teams <= 0 || teams > q.lay.teams) return cudaErrorCooperativeLaunchTooLarge;
    CoopParams<K> cp;
    cp.t = tile_params(q, static_cast<EC*>(q.C), q.ldc);
    cp.teams = teams;
    cp.group = q.group;
    cp.cta_smid = reinterpret_cast<int*>(q.ws + q.lay.coop_smid);
    cp.team_ctr = reinterpret_cast<unsigned*>(q.ws + q.lay.coop_ctr);
    cp.role_smid = reinterpret_cast<int*>(q.ws + q.lay.coop_role);
    cp.teams_used = reinterpret_cast<int*>(q.ws + q.lay.coop_meta);
    cp.slots = reinterpret_cast<Acc*>(q.ws + q.lay.coop_slots);
    cp.digests = reinterpret_cast<uint4*>(q.ws + q.lay.coop_digests);
    void* args[] = {&cp};
    cudaError_t e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(kCopies * cp.teams), dim3(K::kThreads), args,
                                                kSmemCoop, s);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
  }

  // Only the chosen level's kernels are instantiated.
  static cudaError_t run(const Prepared& q, cudaStream_t s) {
    if constexpr (kLevel == kLevelNone) return launch_cutlass(q, static_cast<EC*>(q.C), q.ldc, s);
    if constexpr (kLevel == kLevelKernel) return run_kernel_level(q, s);
    if constexpr (kLevel == kLevelThreadblock) return run_threadblock(q, s);
    if constexpr (kLevel == kLevelMultikernel) return run_multikernel(q, s);
    if constexpr (kLevel == kLevelCooperative) return run_cooperative(q, s);
    if constexpr (kLevel == kLevelAbft) {
      if constexpr (kAbft64) return run_abft64(q, s);
      else return run_abft(q, s);
    }
    return cudaErrorInvalidValue;
  }
};

// ---- the variant's launcher ---------------------------------------------------------------------

template <class OpMain, class OpFallback, int kLevel, bool kInject, bool kRowA, bool kRowB>
struct Launcher {
  using KM = Kit<OpMain>;
  using KF = Kit<OpFallback>;
  using RM = Runner<KM, kLevel, kInject>;
  using RF = Runner<KF, kLevel, kInject>;
  using EA = typename KM::ElementA;
  using EB = typename KM::ElementB;
  using EC = typename KM::ElementC;
  using Acc = typename KM::ElementAcc;
  static_assert(std::is_same<typename KM::LayoutA, typename std::conditional<kRowA, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>::type>::value, "layout A");
  static_assert(std::is_same<typename KM::LayoutB, typename std::conditional<kRowB, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>::type>::value, "layout B");
  static_assert(KM::Shape::kM == KF::Shape::kM && KM::Shape::kN == KF::Shape::kN && KM::Shape::kK == KF::Shape::kK, "same tiles");
  // fp16/bf16 operands the fallback's 4-byte accesses cannot read are copied into padded buffers
  static constexpr bool kRepack = sizeof(EA) < 4;
  static_assert(std::is_same<OpMain, OpFallback>::value || KF::kAlignC == 1, "the fallback stores C element by element");

  // K of the repacked operands: padded with zeros to a multiple of 8 where it is an operand's contiguous extent (A
  // row-major, B column-major), else unchanged. An odd K there would leave every k-tile after the first, partial one
  // at an odd element offset, which the 4-byte accesses cannot read.
  static int pad_k(int k) { return (kRowA || !kRowB) ? static_cast<int>(round_up(k, 8)) : k; }

  static Layout layout(int m, int n, int k, int coop_teams_param, int interval = 1) {
    Layout L;
    const cutlass::gemm::GemmCoord t = RM::tiled(m, n, k);
    L.tiles_m = t.m();
    L.tiles_n = t.n();
    L.total_k = (k + KM::Shape::kK - 1) / KM::Shape::kK;
    const size_t tiles = size_t(L.tiles_m) * L.tiles_n;
    size_t off = 0;
    auto take = [&](size_t bytes) {
      const size_t at = off;
      off = round_up(off + bytes, 256);
      return at;
    };
    if constexpr (kRepack) {
      const int kk = pad_k(k);  // (the same k-tiles: total_k is unchanged)
      const Operand a = kRowA ? Operand{m, kk, 0} : Operand{kk, m, 0};
      const Operand b = kRowB ? Operand{kk, n, 0} : Operand{n, kk, 0};
      L.ld_rep_a = static_cast<long long>(round_up(a.cols, 8));
      L.ld_rep_b = static_cast<long long>(round_up(b.cols, 8));
      L.rep_a = take(size_t(a.rows) * L.ld_rep_a * sizeof(EA));
      L.rep_b = take(size_t(b.rows) * L.ld_rep_b * sizeof(EB));
    }
    L.ldw = static_cast<long long>(round_up(n, 16));
    if (kLevel == kLevelKernel || kLevel == kLevelMultikernel) {
      L.ctl = take(sizeof(int) * (1 + 3 * tiles));
      for (int c = 0; c < kCopies; ++c) L.d[c] = take(size_t(m) * L.ldw * sizeof(EC));
    }
    if (kLevel == kLevelMultikernel) {
      for (int c = 0; c < kCopies; ++c) L.s[c] = take(tiles * KM::kTileElems * sizeof(Acc));
    }
    if constexpr (kLevel == kLevelCooperative) {
      // both instantiations have the same tiles; size for the larger co-resident grid
      L.teams = std::max(RM::coop_teams(static_cast<int>(tiles), coop_teams_param), RF::coop_teams(static_cast<int>(tiles), coop_teams_param));
      const size_t g = size_t(kCopies) * std::max(L.teams, 1);
      L.coop_smid = take(sizeof(int) * g);
      L.coop_ctr = take(sizeof(unsigned) * g);
      L.coop_role = take(sizeof(int) * g);
      L.coop_meta = take(sizeof(int));
      L.coop_slots = take(size_t(std::max(L.teams, 1)) * kCopies * 2 * KM::kTileElems * sizeof(Acc));
      L.coop_digests = take(size_t(std::max(L.teams, 1)) * kCopies * 2 * KM::kThreads * sizeof(uint4));
    }
    if constexpr (kLevel == kLevelAbft && RM::kAbft64) {
      // fp64 (cutlass_abft64.cuh): strips of kAbft64Cols columns of C; E (k x ref_w: B e, B w per strip, the reference
      // GEMM's B), B^2 e (strips x k, at enc), the reference GEMM's sub-chunks (subs x m x ref_w) and their sum (m x
      // ref_w, at ref), C' (beta != 0), and in
      // inject builds the planned faults' error parts (abft_fault_error_kernel: its counters at redo)
      DeviceProps dp;
      const int sms = device_props(dp) == cudaSuccess && dp.sms > 0 ? dp.sms : 132;
      L.strip_n = kAbft64Cols;
      L.strips = (n + kAbft64Cols - 1) / kAbft64Cols;
      L.ref_w = 2 * L.strips;
      // sub-chunks of k: as many as give the reference GEMM (128 x 64 tiles) about two waves, at least 64 k each
      const long long ref_tiles = static_cast<long long>((m + 127) / 128) * ((L.ref_w + 63) / 64);
      const int want = static_cast<int>(std::max(1LL, std::min<long long>((2LL * sms + ref_tiles - 1) / ref_tiles, std::max(1, k / 64))));
      L.ref_sub = static_cast<int>(round_up((k + want - 1) / want, 16));
      L.subs = (k + L.ref_sub - 1) / L.ref_sub;
      L.ref_e = take(size_t(k) * L.ref_w * sizeof(double));
      L.enc = take(size_t(L.strips) * k * sizeof(double));
      L.ref_d = take(size_t(L.subs) * m * L.ref_w * sizeof(double));
      L.ref = take(size_t(m) * L.ref_w * sizeof(double));
      L.d[0] = take(size_t(m) * n * sizeof(double));
      // the ints at redo: the planned faults' counters (inject builds: tiles of them, abft_fault_error_kernel's), then
      // at `flagged` the check's two lists' counts and the lists ([3][m x strips]: Abft64Params::lists), then the
      // suspects' buckets (Abft64Params::bucket_n, bucket, bucket_state: strips, then twice strips x m)
      L.flagged = kInject ? tiles : 0;
      L.redo_ints = L.flagged + 2 + 3 * size_t(m) * L.strips + L.strips + 2 * size_t(m) * L.strips;
      L.redo = take(sizeof(int) * L.redo_ints);
      if (kInject) L.fault_part = take(tiles * kFaultParts * sizeof(double));
    } else if (kLevel == kLevelAbft) {
      // the checksum strips: the tiles' (tb_n columns), or with ref_checksums: concurrent and one checkpoint per tile
      // (its design runs only then) RM::kConcStrips per tile (FTGEN_ABFT_STRIP_N columns each)
      const int iv = std::min(std::max(interval, 1), L.total_k);
      const bool conc = kAbftConcurrent && (L.total_k - 1) / iv == 0;
      L.strips = L.tiles_n * (conc ? RM::kConcStrips : 1);
      L.strip_n = KM::Shape::kN / (conc ? RM::kConcStrips : 1);
      L.enc = take(size_t(L.strips) * k * sizeof(float4));
    }
    if (kLevel == kLevelAbft && kAbftPrepass && !RM::kAbft64) {
      const int iv = std::min(std::max(interval, 1), L.total_k);
      L.chunks = (L.total_k - 1) / iv + 1;
      // parts per interval: as many as keep the pre-pass within one wave at four blocks per SM (64 rows x 32 strips
      // each; a grid of one interval per block already past a wave keeps one part), parts of at least 8 k-iterations.
      // (Measured at 4096^3, 64 blocks per interval: 512 blocks of 16 k-iterations 82 us, 1024 of 8 90 us.)
      DeviceProps dp;
      const int sms = device_props(dp) == cudaSuccess && dp.sms > 0 ? dp.sms : 132;
      const long long per_slot = static_cast<long long>((m + 63) / 64) * ((L.strips + 31) / 32);
      const long long want = 4LL * sms / (per_slot * L.chunks);
      const int parts = static_cast<int>(std::max(1LL, std::min<long long>(want, iv / 8)));
      L.part_len = (iv + parts - 1) / parts;
      L.parts = (iv + L.part_len - 1) / L.part_len;
      L.ref = take(size_t(L.strips) * L.chunks * m * sizeof(float2));
      // on the tensor cores where k has no residue iteration (and, checked at run time, A's alignment holds at every
      // sub-chunk); the SIMT pre-pass otherwise
      const int kt = KM::Shape::kK;
      L.ref_tc = std::is_same<typename KM::ElementA, float>::value && (kAbftRefExternal || k % kt == 0);
      if (L.ref_tc) {
        int g = 1;  // the largest divisor of the interval up to 16 k-iterations: sub-chunks of g k-iterations
        for (int d = 1; d <= std::min(iv, 16); ++d)
          if (iv % d == 0) g = d;
        L.ref_sub = kAbftRefExternal ? k : g * kt;
        L.ref_per = kAbftRefExternal ? 1 : iv / g;
        L.subs = (k + L.ref_sub - 1) / L.ref_sub;
        L.ref_w = (2 * L.strips + 7) / 8 * 8;
        L.ref_e = take(size_t(k) * L.ref_w * sizeof(float));
        L.ref_d = take(size_t(L.subs) * m * L.ref_w * sizeof(float));
      }
      if (L.parts > 1) L.ref_parts = take(size_t(L.strips) * L.chunks * L.parts * m * sizeof(float2));
      if (L.chunks == 1) {  // abft_once_kernel: the tiles to recompute, a partial tile per block of the second launch
        L.rows_cap = kAbftConcurrent ? 2 * sms : 0;
        L.redo_ints = 1 + 3 * size_t(tiles) + (kAbftConcurrent ? 1 + 2 * size_t(L.rows_cap) : 0);
        if (kAbftConcurrent) {  // the check's flagged tiles and the second launch's barrier
          L.flagged = L.redo_ints;
          L.redo_ints += 1 + size_t(tiles) + 1;
        }
        if (kAbftConcurrent && kInject) {
          L.fault_done = L.redo_ints;
          L.redo_ints += size_t(tiles);
          L.fault_part = take(size_t(tiles) * kFaultParts * sizeof(double));
        }
        L.redo = take(sizeof(int) * L.redo_ints);
        // (a row per block and part: at most max(rows listed, blocks of the launch) partial rows, two sums an element)
        if (kAbftConcurrent) L.row_part = take(size_t(std::max(L.rows_cap, sms)) * KM::Shape::kN * 2 * sizeof(double));
        L.redo_part = take(size_t(sms) * KM::kTileElems * sizeof(Acc));
        // ref_checksums: concurrent: the GEMM's pass-1 sums per row, strip and warp column
        if (kAbftConcurrent) L.obs = take(size_t(L.tiles_n) * KM::WarpCount::kN * m * sizeof(float4));
      }
    }
    L.total = off;
    return L;
  }

  static size_t workspace(int m, int n, int k, int coop_teams_param, int interval = 1) {
    if (m < 1 || n < 1 || k < 1) return 0;
    return layout(m, n, k, coop_teams_param, interval).total;
  }

  // The problem p as the runners take it (its workspace layout, the counters and the fault plan); an error where p is
  // not a problem (missing pointers, extents, leading dimensions) or its workspace is missing
  static cudaError_t prepare(const ftgen_gemm_problem* p, int interval, int coop_teams_param, int group, AbftConfig const& abft,
                             Prepared& q) {
    if (p == nullptr || p->m < 1 || p->n < 1 || p->k < 1 || !p->A || !p->B || !p->C) return cudaErrorInvalidValue;
    const Operand a = operand_a(*p, kRowA), b = operand_b(*p, kRowB), c = Operand{p->m, p->n, p->ldc};
    if (a.ld < a.cols || b.ld < b.cols || c.ld < c.cols) return cudaErrorInvalidValue;
    q.m = p->m;
    q.n = p->n;
    q.k = p->k;
    q.alpha = p->alpha;
    q.beta = p->beta;
    q.A = p->A;
    q.lda = p->lda;
    q.B = p->B;
    q.ldb = p->ldb;
    q.C = p->C;
    q.ldc = p->ldc;
    q.ws = static_cast<char*>(p->workspace);
    q.lay = layout(p->m, p->n, p->k, coop_teams_param, interval);
    if (q.lay.total > 0 && q.ws == nullptr) return cudaErrorInvalidValue;
    q.interval = interval;
    q.group = group;
    q.coop_param = coop_teams_param;
    q.abft = abft;
    q.correct = 1;
#if FTGEN_TMR_INJECT
    if constexpr (kInject) q.correct = p->no_correct ? 0 : 1;
#endif
    q.counters = p->counters;
    q.fault_by_block = p->fault_by_block;
    q.faults = p->faults;
    q.records = p->fault_records;
    q.fault_count = p->fault_records != nullptr ? p->fault_count : 0;
    return cudaSuccess;
  }

  // The main kit's accesses fit the operands and C (else the fallback kit runs)
  static bool main_aligned(const ftgen_gemm_problem& p) {
    const Operand a = operand_a(p, kRowA), b = operand_b(p, kRowB), c = Operand{p.m, p.n, p.ldc};
    return operand_aligned(p.A, a, KM::kAlignA, sizeof(EA)) && operand_aligned(p.B, b, KM::kAlignB, sizeof(EB)) &&
           operand_aligned(p.C, c, KM::kAlignC, sizeof(EC));
  }

  static cudaError_t run(const ftgen_gemm_problem* p, cudaStream_t s, int interval, int coop_teams_param, int group,
                         AbftConfig const& abft = AbftConfig{}) {
    Prepared q;
    if (const cudaError_t e = prepare(p, interval, coop_teams_param, group, abft, q); e != cudaSuccess) return e;
    const bool main_ok = main_aligned(*p);
    if (main_ok) {
      if (kLevel == kLevelCooperative && q.lay.teams <= 0) return cudaErrorCooperativeLaunchTooLarge;
      return RM::run(q, s);
    }
    if constexpr (std::is_same<OpMain, OpFallback>::value) {
      return cudaErrorInvalidValue;  // 1-element accesses: only a pointer not aligned to its element type gets here
    }
    if constexpr (kRepack) {
      const Operand a = operand_a(*p, kRowA), b = operand_b(*p, kRowB);
      DeviceProps dp;
      cudaError_t e = device_props(dp);
      if (e != cudaSuccess) return e;
      // a padded K needs both operands copied (the zeros of one meet the zeros of the other)
      const int kk = pad_k(p->k);
      const bool padded = kk != p->k;
      if (padded || !operand_aligned(p->A, a, KF::kAlignA, sizeof(EA))) {
        EA* dst = reinterpret_cast<EA*>(q.ws + q.lay.rep_a);
        const int rows = kRowA ? a.rows : kk;
        const long long total = static_cast<long long>(rows) * q.lay.ld_rep_a;
        repack_kernel<EA><<<static_cast<int>(std::min<long long>((total + 255) / 256, 8ll * dp.sms)), 256, 0, s>>>(
            static_cast<const EA*>(p->A), a.ld, dst, q.lay.ld_rep_a, a.rows, a.cols, rows);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        q.A = dst;
        q.lda = q.lay.ld_rep_a;
      }
      if (padded || !operand_aligned(p->B, b, KF::kAlignB, sizeof(EB))) {
        EB* dst = reinterpret_cast<EB*>(q.ws + q.lay.rep_b);
        const int rows = kRowB ? kk : b.rows;
        const long long total = static_cast<long long>(rows) * q.lay.ld_rep_b;
        repack_kernel<EB><<<static_cast<int>(std::min<long long>((total + 255) / 256, 8ll * dp.sms)), 256, 0, s>>>(
            static_cast<const EB*>(p->B), b.ld, dst, q.lay.ld_rep_b, b.rows, b.cols, rows);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        q.B = dst;
        q.ldb = q.lay.ld_rep_b;
      }
      q.k = kk;
    }
    if (kLevel == kLevelCooperative && q.lay.teams <= 0) return cudaErrorCooperativeLaunchTooLarge;
    return RF::run(q, s);
  }

  // Threadblock ABFT (ref_checksums: concurrent) around a GEMM that is not this variant's (the cutlass90 backend's sm90
  // kernel): gemm(stream) writes C = alpha A B of p on the stream it is given; OpMain and OpFallback only describe the
  // check (Runner::run_abft_external), the main kit where A, B and C suit its accesses. beta = 0, alpha != 0 and one
  // checkpoint per tile (interval: that of `workspace`, at least the k-iterations) only: cudaErrorInvalidValue otherwise.
  template <class ExtGemm, class ExtRef = std::nullptr_t>
  static cudaError_t run_external(const ftgen_gemm_problem* p, cudaStream_t s, int interval, AbftConfig const& abft, ExtGemm&& gemm,
                                  ExtRef&& ext_ref = nullptr) {
    static_assert(kLevel == kLevelAbft && kAbftConcurrent && !kRepack, "ref_checksums: concurrent on fp32 operands");
    Prepared q;
    if (const cudaError_t e = prepare(p, interval, 0, 1, abft, q); e != cudaSuccess) return e;
    if (q.beta != 0.0 || q.alpha == 0.0 || q.lay.chunks != 1) return cudaErrorInvalidValue;
    if (main_aligned(*p)) return RM::run_abft_external(q, s, gemm, ext_ref);
    return RF::run_abft_external(q, s, gemm, ext_ref);
  }

  // Cooperative level, after a synchronized launch on this workspace: teams, teams with a tile, and
  // how many teams have two copies on one SM (must be 0); distinct SMs used by the copies.
  static cudaError_t sm_report(const ftgen_gemm_problem* p, int coop_teams_param, int* teams, int* active, int* violations,
                               int* distinct_sms) {
    if (kLevel != kLevelCooperative || p == nullptr || p->workspace == nullptr) return cudaErrorInvalidValue;
    const Layout L = layout(p->m, p->n, p->k, coop_teams_param);
    int T = 0;
    cudaError_t e = cudaMemcpy(&T, static_cast<char*>(p->workspace) + L.coop_meta, sizeof(int), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return e;
    if (T < 1 || T > L.teams) return cudaErrorInvalidValue;
    const int tiles = L.tiles_m * L.tiles_n, act = std::min(T, tiles);
    std::vector<int> role(size_t(kCopies) * T);
    e = cudaMemcpy(role.data(), static_cast<char*>(p->workspace) + L.coop_role, sizeof(int) * role.size(), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return e;
    int bad = 0;
    std::vector<int> seen;
    for (int t = 0; t < act; ++t) {
      const int* r = &role[size_t(t) * kCopies];
      if (r[0] == r[1] || r[0] == r[2] || r[1] == r[2]) ++bad;
      for (int c = 0; c < kCopies; ++c)
        if (std::find(seen.begin(), seen.end(), r[c]) == seen.end()) seen.push_back(r[c]);
    }
    *teams = T;
    *active = act;
    *violations = bad;
    *distinct_sms = static_cast<int>(seen.size());
    return cudaSuccess;
  }

  static int coop_capacity() {
    if constexpr (kLevel == kLevelCooperative) return RM::coop_capacity();
    return 0;
  }
};

}  // namespace
}  // namespace ftgen_tmr
