// ftgen gemm, cutlass90 backend: triple modular redundancy (TMR) around the unchanged CUTLASS 3.x sm90 GEMM.
// Copied verbatim into every generated project. Do not edit the copies.
//
// The copies are whole sm90 GEMMs (the variant's launcher runs them: one batched launch of L = 3 at the kernel level,
// three launches at the multikernel level), so nothing here touches the GEMM. What follows them is the cutlass backend's
// TMR code of cutlass_tmr.cuh, called as it is where it does not depend on the sm80 kernel's types:
//
//   vote            vote_outputs_kernel (OutVoteParams): bitwise majority per element, detected / corrected /
//                   uncorrectable counted (Tally), C written where copy 0 is not the majority (every element when C is
//                   not copy 0), elements where all three differ left unwritten and their tile listed (flag_tile);
//                   with correction off (campaigns), the tile's output taken from the copy a planned fault targets
//   fault records   planned_record (inject builds), the FtCounters' `injected` as the sm80 copies count it
//
// and two kernels of its own, because their sm80 versions run the sm80 GEMM's mainloop and accumulator layout:
//
//   tmr90_fault_kernel      inject builds: each planned fault flips one bit of the fp32 value of one copy's output
//                           element before the vote (an emulated accumulator upset at the end of the mainloop); the
//                           element is the fault's (thread, accumulator element) in the wgmma's accumulator layout
//   tmr90_recompute_kernel  the elements the vote left (three different values): computed three times from A and B in
//                           double (operands as the wgmma reads them), voted, written to C; again when they still
//                           differ, at most kMaxAttempts - 1 times; a grid of early exits when nothing is listed
#pragma once

#include "ftgen_sm90.cuh"  // the sm90 tile geometry, its fault elements, the operands as the wgmma reads them
#include "cutlass_tmr.cuh"  // the cutlass backend's vote, counters and fault records (ftgen_tmr)

namespace ftgen_tmr90 {
namespace {

using ftgen_tmr::Bits;
using ftgen_tmr::kCopies;
using ftgen_tmr::kUncorrectable;
using ftgen_tmr::Tally;
using ftgen_sm90::fault_element;
using ftgen_sm90::Geometry;
using ftgen_sm90::tiles_of;
using ftgen_sm90::wgmma_operand;

// ---- fault injection (inject builds) ----------------------------------------------------------------------------------
template <class T>
struct FaultParams {
  T* d[kCopies];  // the copies' outputs
  long long ld[kCopies];
  int m, n, tiles_n;
  Geometry geo;
  const ftgen::FaultSpec* faults;  // FaultSpec.block = tile * 3 + copy (tiles of the sm90 kernel, row-major)
  ftgen::FaultRecord* records;
  int count;
  ftgen::FtCounters* counters;
};

#if FTGEN_TMR_INJECT
// One thread per planned fault (the plan puts at most one into a (tile, copy)): the element's fp32 value (its
// accumulator where alpha = 1 and beta = 0) with the planned bit flipped (or the offset added), rounded to the output
// type, written back; recorded and counted as applied. An element outside C (a partial tile's padding, which the sm90
// kernel does not store either) is counted as applied and changes nothing, as an sm80 accumulator outside C.
template <class T>
__global__ void tmr90_fault_kernel(FaultParams<T> p) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += blockDim.x * gridDim.x) {
    const ftgen::FaultSpec f = p.faults[i];
    const int tile = f.block / kCopies, copy = f.block % kCopies;
    long long row, col;
    fault_element(p.geo, f.thread, f.elem, tile / p.tiles_n, tile % p.tiles_n, row, col);
    const bool stored = row < p.m && col < p.n;
    T* x = stored ? p.d[copy] + row * p.ld[copy] + col : nullptr;
    const float value = stored ? static_cast<float>(*x) : 0.f;
    ftgen::FaultRecord rec = ftgen_tmr::planned_record<float>(f, row, col, value);
    // planned_record: the flipped value, or for an offset the offset itself (its `before` is 0)
    const float faulty = f.kind == ftgen::kOffset ? value + static_cast<float>(rec.after - rec.before) : static_cast<float>(rec.after);
    if (stored) *x = static_cast<T>(faulty);
    rec.applied = 1;
    rec.before = static_cast<double>(value);
    rec.after = static_cast<double>(faulty);
    p.records[i] = rec;
    if (p.counters) atomicAdd(&p.counters->injected, 1ull);
  }
}
#endif  // FTGEN_TMR_INJECT

template <class T>
inline cudaError_t inject_faults(FaultParams<T> const& p, cudaStream_t s) {
#if FTGEN_TMR_INJECT
  if (p.count <= 0 || p.faults == nullptr || p.records == nullptr) return cudaSuccess;
  tmr90_fault_kernel<T><<<(p.count + 127) / 128, 128, 0, s>>>(p);
  return cudaGetLastError();
#else
  (void)p;
  (void)s;
  return cudaSuccess;
#endif
}

// ---- recomputation of the elements where all three copies differ --------------------------------------------------------
template <class EA, class T>
struct RecomputeParams {
  const EA* A;
  long long lda;
  const EA* B;
  long long ldb;
  T* C;  // the caller's C: the original value where the vote left an element (beta != 0 reads it)
  long long ldc;
  int m, n, k;
  float alpha, beta;
  const T* src0;  // the copies as the vote read them (copy 0: C itself where it was copy 0)
  long long ld0;
  const T* d1;
  const T* d2;
  long long ldw;
  int tile_m, tile_n, tiles_n;
  const int* list;
  const int* list_count;
  ftgen::FtCounters* counters;
  double zero[kCopies];  // all zero; opaque per-computation zeros (no optimizer can merge the three computations)
  int max_attempts;
};

// alpha A(r, :) B(:, c) + beta C(r, c) as the epilogue forms it (fp32 fma), the sum in double from `zero`.
template <bool kRowA, bool kRowB, class EA, class T>
__device__ T recompute_element(RecomputeParams<EA, T> const& p, int r, int c, double zero) {
  double acc = zero;
  for (int kk = 0; kk < p.k; ++kk) {
    const EA a = kRowA ? p.A[r * p.lda + kk] : p.A[r + kk * p.lda];
    const EA b = kRowB ? p.B[kk * p.ldb + c] : p.B[kk + c * p.ldb];
    acc = fma(wgmma_operand(a), wgmma_operand(b), acc);
  }
  float out = p.alpha * static_cast<float>(acc);
  if (p.beta != 0.f) out = fmaf(p.beta, static_cast<float>(p.C[r * p.ldc + c]), out);
  return static_cast<T>(out);
}

template <bool kRowA, bool kRowB, class EA, class T>
__global__ void __launch_bounds__(256) tmr90_recompute_kernel(RecomputeParams<EA, T> p) {
  using U = Bits<T>;
  const int n_list = *reinterpret_cast<volatile const int*>(p.list_count);
  if (static_cast<int>(blockIdx.x) >= n_list) return;
  Tally tally;
  for (int i = blockIdx.x; i < n_list; i += gridDim.x) {
    const int tile = __ldcg(p.list + i);
    const int r0 = (tile / p.tiles_n) * p.tile_m, c0 = (tile % p.tiles_n) * p.tile_n;
    const int rows = min(p.tile_m, p.m - r0), cols = min(p.tile_n, p.n - c0);
    for (int attempt = 1; attempt < p.max_attempts; ++attempt) {
      if (threadIdx.x == 0) ftgen_tmr::count_recomputed(p.counters);
      int again = 0;
      for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
        const int r = r0 + e / cols, c = c0 + e % cols;
        U maj;
        if (ftgen_tmr::vote_element(ftgen_tmr::ldcg_bits(p.src0 + r * p.ld0 + c), ftgen_tmr::ldcg_bits(p.d1 + r * p.ldw + c),
                                    ftgen_tmr::ldcg_bits(p.d2 + r * p.ldw + c), maj) != kUncorrectable)
          continue;  // the vote decided this element
        U v[kCopies];
        CUTLASS_PRAGMA_UNROLL
        for (int x = 0; x < kCopies; ++x) v[x] = ftgen_tmr::to_bits(recompute_element<kRowA, kRowB>(p, r, c, p.zero[x]));
        if (ftgen_tmr::vote_element(v[0], v[1], v[2], maj) == kUncorrectable) {
          ++tally.uncorrectable;
          again = 1;
        } else {
          p.C[r * p.ldc + c] = ftgen_tmr::from_bits<T>(maj);
        }
      }
      if (!__syncthreads_or(again)) break;
    }
  }
  tally.flush(p.counters);
}

// ---- the vote and the recomputation, launched after the copies --------------------------------------------------------
template <class T>
struct VoteIn {
  int m, n;
  const T* d[kCopies];  // copy 0 may be C itself
  long long ld0, ldw;   // copy 0's leading dimension; copies 1 and 2's
  T* C;
  long long ldc;
  int tile_m, tile_n;
  int correct;                 // 0: detect and count only (campaigns: the tile's output from the faulted copy)
  const int* fault_by_block;   // inject builds, correction off: which copy to output
  int* ctl;                    // [list count][flags: tiles][list: tiles], zeroed before the copies
  ftgen::FtCounters* counters;
};

inline size_t ctl_ints(int m, int n, int tile_m, int tile_n) { return 1 + 2 * size_t(tiles_of(m, tile_m)) * size_t(tiles_of(n, tile_n)); }

// vote_outputs_kernel over the M x N outputs (16-byte accesses where N, the leading dimensions and the pointers allow)
template <class T>
inline cudaError_t vote(VoteIn<T> const& in, cudaStream_t s) {
  ftgen_tmr::DeviceProps dp;
  cudaError_t e = ftgen_tmr::device_props(dp);
  if (e != cudaSuccess) return e;
  const int tiles = tiles_of(in.m, in.tile_m) * tiles_of(in.n, in.tile_n);
  ftgen_tmr::OutVoteParams<T> vp;
  vp.m = in.m;
  vp.n = in.n;
  vp.src0 = in.d[0];
  vp.ld0 = in.ld0;
  vp.d1 = in.d[1];
  vp.d2 = in.d[2];
  vp.ldw = in.ldw;
  vp.dst = in.C;
  vp.ldc = in.ldc;
  vp.write_all = in.d[0] != in.C;
  vp.correct = in.correct;
  vp.tile_m = in.tile_m;
  vp.tile_n = in.tile_n;
  vp.tiles_n = tiles_of(in.n, in.tile_n);
  vp.list_count = in.ctl;
  vp.flags = in.ctl + 1;
  vp.list = in.ctl + 1 + tiles;
  vp.counters = in.counters;
  vp.fault_by_block = in.fault_by_block;
  constexpr int V = 16 / int(sizeof(T));
  const bool vec = in.tile_n % V == 0 && in.n % V == 0 && in.ld0 % V == 0 && in.ldw % V == 0 && in.ldc % V == 0 &&
                   ftgen_tmr::aligned_ptr<T>(in.d[0], V) && ftgen_tmr::aligned_ptr<T>(in.d[1], V) &&
                   ftgen_tmr::aligned_ptr<T>(in.d[2], V) && ftgen_tmr::aligned_ptr<T>(in.C, V);
  const long long work = static_cast<long long>(in.m) * (((vec ? in.n / V : in.n) + 31) / 32) * 32;
  const int blocks = static_cast<int>(std::min<long long>((work + 255) / 256, 8ll * dp.sms));
  if (vec)
    ftgen_tmr::vote_outputs_kernel<T, V, false><<<blocks, 256, 0, s>>>(vp);
  else
    ftgen_tmr::vote_outputs_kernel<T, 1, false><<<blocks, 256, 0, s>>>(vp);
  return cudaGetLastError();
}

// tmr90_recompute_kernel on the tiles the vote listed (nothing to do with correction off)
template <bool kRowA, bool kRowB, class EA, class T>
inline cudaError_t recompute(VoteIn<T> const& in, const EA* A, long long lda, const EA* B, long long ldb, int k, double alpha, double beta,
                             cudaStream_t s) {
  if (!in.correct) return cudaSuccess;
  ftgen_tmr::DeviceProps dp;
  cudaError_t e = ftgen_tmr::device_props(dp);
  if (e != cudaSuccess) return e;
  const int tiles = tiles_of(in.m, in.tile_m) * tiles_of(in.n, in.tile_n);
  RecomputeParams<EA, T> rp;
  rp.A = A;
  rp.lda = lda;
  rp.B = B;
  rp.ldb = ldb;
  rp.C = in.C;
  rp.ldc = in.ldc;
  rp.m = in.m;
  rp.n = in.n;
  rp.k = k;
  rp.alpha = static_cast<float>(alpha);
  rp.beta = static_cast<float>(beta);
  rp.src0 = in.d[0];
  rp.ld0 = in.ld0;
  rp.d1 = in.d[1];
  rp.d2 = in.d[2];
  rp.ldw = in.ldw;
  rp.tile_m = in.tile_m;
  rp.tile_n = in.tile_n;
  rp.tiles_n = tiles_of(in.n, in.tile_n);
  rp.list = in.ctl + 1 + tiles;
  rp.list_count = in.ctl;
  rp.counters = in.counters;
  for (int x = 0; x < kCopies; ++x) rp.zero[x] = 0.0;
  rp.max_attempts = ftgen_tmr::kMaxAttempts;
  tmr90_recompute_kernel<kRowA, kRowB, EA, T><<<std::min(tiles, dp.sms), 256, 0, s>>>(rp);
  return cudaGetLastError();
}

}  // namespace
}  // namespace ftgen_tmr90
