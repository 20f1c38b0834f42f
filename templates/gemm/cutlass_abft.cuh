// ftgen gemm, CUTLASS backend: threadblock-level ABFT on the tensor-core GEMM (kLevelAbft).
// Included by cutlass_tmr.cuh inside namespace ftgen_tmr (uses its Kit, Mainloop, AccLayout, Iterators,
// epilogue and fault plumbing).
// Copied verbatim into every generated CUTLASS variant. Do not edit the copies.
//
// The scheme is the SIMT threadblock level's (gemm.py: abft_gemm_model / abft_verify_rows), with the
// checksum strip = the threadblock's tb_n columns (ref_checksums: concurrent: one warp column, AbftStrips):
//
//   encode   a pre-pass (enc_kernel) per k row and strip: B e, B w (w = 1..tb_n), B^2 e (B read once)
//   carry    r_i += a_ik (B e)_k, r'_i += a_ik (B w)_k, r2_i += a_ik^2 (B^2 e)_k on the CUDA cores, from the
//            A fragments the warps load for the tensor cores, between the MMAs of each warp-level k-group
//            (Mainloop's `group` hook)
//   verify   every `interval` k-iterations and after the last: d = sum_j C_ij - r_i, dw = sum_j w_j C_ij - r'_i
//            from the accumulators (quad shuffles, then the warps' shares through shared memory), against
//            tau = lambda u (sqrt(k) + sqrt(tb_n) + 1) max(sqrt(r2_i), |r_i|, ||C_i|| without its max),
//            tau_w = max(tau rms(w), lambda u (...) |r'_i|)
//            (a row over the threshold is decided on d, dw summed anew in double from its elements, the location
//            tested in double: float sums round a large fault f by ~u |f|, beyond tau_w; abft_kernel, which verifies
//            from registers inside its main loop, keeps pass 1's float sums and recomputes such a tile instead)
//   locate   only with certainty: |d| > 2 tau_w, j = rint(dw / d) in 1..tb_n, |dw - j d| <= tau_w
//   correct  online: C_ij = r_i - sum_{l != j} C_il (the rest summed anew in double), in the accumulator,
//            so later k-iterations build on the right value; any other detection (or correct: detect):
//            the tile is recomputed from k = 0 (at most kMaxAttempts computations); ref_checksums: concurrent
//            recomputes such a row instead (A's row against the strip of B, in double, by the second launch) and
//            corrects the tile's located rows in place (gemm.abft_gemm_model's recompute='row'), each located element
//            recomputed from A's row and B's column in double where that agrees with r_i - rest (fix='checked')
//
// ref_checksums: prepass (FTGEN_ABFT_PREPASS): r and r' of every checkpoint come from a pre-pass (abft_ref_kernel),
// the main loop carries nothing (it is the unprotected one plus the checkpoint test); see abft_kernel's kPre.
// ref_checksums: concurrent (FTGEN_ABFT_CONCURRENT, with one checkpoint per tile): the same pre-pass on a second stream
// beside the GEMM, which stores each tile's row sums; abft_check_kernel compares after both and the second launch
// corrects (inject builds: each planned fault's error worked out before the GEMM, abft_fault_error_kernel). Its
// checksum strips are FTGEN_ABFT_STRIP_N columns (whole warp columns: kStrips strips per tile): encodings, reference rows,
// the check, the location (j in 1..strip width) and the recomputation of a row are per (row, strip), a `unit`, with
// the strip's own threshold (sqrt(strip width), its lambda: AbftParams::unit).
//
// The fault-free copy of the code (no injection) has no fault branches at all (FTGEN_TMR_INJECT 0).
// The decisions of one row (thresholds, location, the correcting value, the counters) are the pure functions of
// ftgen_rules.h (compiled for the host by the behavioural tests); this file keeps the sums, barriers and atomics.
#pragma once

// ---- pre-pass: the strip encodings of B -----------------------------------------------------------
// enc[s * k + kk] = {sum_j B(kk, j), sum_j (j - j0 + 1) B(kk, j), sum_j B(kk, j)^2, 0} over the columns
// j0 = s * cols .. min(n, j0 + cols) - 1 of strip s, summed in double and rounded to float.
// E (ref_checksums: prepass on the tensor cores; nullptr otherwise): {B e, B w} of strip s also at E[kk * ldE + 2 s + {0, 1}]
// (row-major k x ldE, the columns past 2 strips zero), the B operand of the reference GEMM (AbftRefGemm).
// {B e, B w} of strip s at row kk of E; the last strip's thread(s) zero the padding columns (lane of lanes)
CUTLASS_DEVICE void store_ref_operand(float* E, int ldE, int kk, int s, int strips, double a, double w, int lane, int lanes) {
  float* e = E + static_cast<long long>(kk) * ldE;
  if (lane == 0) e[2 * s] = float(a), e[2 * s + 1] = float(w);
  if (s == strips - 1)
    for (int j = 2 * strips + lane; j < ldE; j += lanes) e[j] = 0.f;
}

template <class EB, bool kRowB>
__global__ void abft_enc_kernel(const EB* __restrict__ B, long long ldb, int k, int n, int cols, int strips, float4* __restrict__ enc,
                                float* __restrict__ E, int ldE) {
  if constexpr (kRowB) {
    // a warp per 8 k rows of one strip (consecutive warps: consecutive strips of the same rows), 4 lanes per row; the 4
    // lanes of a row read 4 V consecutive columns per step (V = 16 bytes of elements: one 16-byte load each where B's
    // rows are aligned), so a warp has a row's whole strip in flight after cols / (4 V) loads per lane, and the 3 sums
    // cross only 4 lanes (a warp per row and 32 lanes took 5 shuffle levels per row: the kernel was bound by them)
    constexpr int V = 16 / static_cast<int>(sizeof(EB));
    const long long wid = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32, quarter = lane % 4;
    if (wid >= static_cast<long long>((k + 7) / 8) * strips) return;  // (warp-uniform)
    const int s = static_cast<int>(wid % strips), kk = static_cast<int>(wid / strips) * 8 + lane / 4;
    const int j0 = s * cols, j1 = min(n, j0 + cols);
    double a = 0.0, w = 0.0, q = 0.0;
    if (kk < k) {
      const EB* const row = B + kk * ldb;
      const bool vec = ldb % V == 0 && reinterpret_cast<unsigned long long>(B) % 16 == 0;  // (j0: a multiple of cols, of V)
      auto add = [&](EB v, int j) {
        const double b = static_cast<double>(v);
        a += b;
        w += b * static_cast<double>(j - j0 + 1);
        q += b * b;
      };
#pragma unroll 4
      for (int j = j0 + quarter * V; j < j1; j += 4 * V) {
        if (vec && j + V <= j1) {
          union {
            uint4 u;
            EB e[V];
          } v;
          v.u = __ldg(reinterpret_cast<const uint4*>(row + j));
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < V; ++t) add(v.e[t], j + t);
        } else {
          for (int t = 0; t < V && j + t < j1; ++t) add(row[j + t], j + t);
        }
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int o = 2; o > 0; o >>= 1) {
      a += __shfl_xor_sync(0xffffffffu, a, o);
      w += __shfl_xor_sync(0xffffffffu, w, o);
      q += __shfl_xor_sync(0xffffffffu, q, o);
    }
    if (kk < k) {
      if (quarter == 0) enc[static_cast<long long>(s) * k + kk] = make_float4(float(a), float(w), float(q), 0.f);
      if (E != nullptr) store_ref_operand(E, ldE, kk, s, strips, a, w, quarter, 4);
    }
  } else {
    // a thread per (k row, strip): consecutive threads along the contiguous k
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (i >= static_cast<long long>(k) * strips) return;
    const int s = static_cast<int>(i / k), kk = static_cast<int>(i % k);
    const int j0 = s * cols, j1 = min(n, j0 + cols);
    double a = 0.0, w = 0.0, q = 0.0;
    for (int j = j0; j < j1; ++j) {
      const double b = static_cast<double>(B[kk + j * ldb]);
      a += b;
      w += b * static_cast<double>(j - j0 + 1);
      q += b * b;
    }
    enc[i] = make_float4(float(a), float(w), float(q), 0.f);
    if (E != nullptr) store_ref_operand(E, ldE, kk, s, strips, a, w, 0, 1);
  }
}

// ---- pre-pass (ref_checksums: prepass): the reference rows at every checkpoint --------------------
// ref[(s * chunks + c) * m + i] = {r_i, r'_i} = sum over k < k_c of A(i, k) * {(B e)_k, (B w)_k} of strip s, where
// k_c is the k extent done at checkpoint c (the main kernel's k-iterations: the first of r0 = k - (total - 1) kt,
// then kt each; checkpoint c after k-iteration min((c + 1) interval, total) - 1), summed in fp32 k-iteration by
// k-iteration (as the fused level carries them). Each checkpoint interval is cut into `parts` parts of part_len
// k-iterations (slot = c * parts + p, slots = chunks * parts; parts > 1 only where the intervals alone would not
// fill the GPU, Layout::parts). A block takes 64 rows x 32 strips of one slot (blockIdx.z), a thread 4 rows x
// 4 strips (32 sums: 32 FMAs per three shared-memory reads), and writes the part's sums to out[(s * slots + slot) *
// m + i] (out = ref when parts == 1); abft_ref_scan_kernel then adds them up into ref. Four blocks per SM (at most
// 128 registers: 129 gave three, so the 512 blocks of 4096^3 at interval 16 took two waves).
template <class EA, bool kRowA, int kKT>
__global__ void __launch_bounds__(128, 4) abft_ref_kernel(const EA* __restrict__ A, long long lda, int m, int k, int total,
                                                       int interval, int parts, int part_len, int slots,
                                                       const float4* __restrict__ enc, int strips, float2* __restrict__ out) {
  constexpr int kRows = 64, kStrips = 32;
  static_assert(kRows * kKT % 128 == 0 && kStrips * kKT % 128 == 0, "whole tiles per thread");
  __shared__ __align__(16) float as[kKT][kRows + 4];       // A tile, k-major (+4: 16-byte rows, 4-way store conflicts)
  __shared__ __align__(16) float2 es[kKT][kStrips + 2];    // {B e, B w} of the block's strips per k
  const int tid = threadIdx.x;
  const int i0 = blockIdx.x * kRows, s0 = blockIdx.y * kStrips;
  const int rq = (tid % 16) * 4, sq = (tid / 16) * 4;  // this thread's first row and strip in the tile
  const int r0 = k - (total - 1) * kKT;
  float acc[4][4][2];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) acc[a][b][0] = acc[a][b][1] = 0.f;
  const int slot = blockIdx.z, c = slot / parts, it_begin = c * interval + (slot % parts) * part_len;
  const int it_end = min(min(it_begin + part_len, (c + 1) * interval), total);
  // the next k-iteration's A and encodings are read into registers while the current one is computed
  constexpr int kA = kRows * kKT / 128, kE = kStrips * kKT / 128;
  float ra[kA];
  float2 re[kE];
  auto fetch = [&](int it) {
    const int kb = it == 0 ? 0 : r0 + (it - 1) * kKT, kn = it == 0 ? r0 : kKT;
#pragma unroll
    for (int j = 0; j < kA; ++j) {
      const int x = tid + 128 * j;
      if constexpr (kRowA) {  // lanes along k
        const int q = x / kKT, kk = x % kKT, i = i0 + q;
        ra[j] = (kk < kn && i < m) ? static_cast<float>(A[i * lda + kb + kk]) : 0.f;
      } else {  // lanes along the rows
        const int q = x % kRows, kk = x / kRows, i = i0 + q;
        ra[j] = (kk < kn && i < m) ? static_cast<float>(A[static_cast<long long>(kb + kk) * lda + i]) : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < kE; ++j) {  // lanes along k
      const int x = tid + 128 * j, s = x / kKT, kk = x % kKT;
      const float4 e = (kk < kn && s0 + s < strips) ? __ldg(enc + static_cast<long long>(s0 + s) * k + kb + kk) : make_float4(0.f, 0.f, 0.f, 0.f);
      re[j] = make_float2(e.x, e.y);
    }
  };
  auto stage = [&] {
#pragma unroll
    for (int j = 0; j < kA; ++j) {
      const int x = tid + 128 * j;
      if constexpr (kRowA) {
        as[x % kKT][x / kKT] = ra[j];
      } else {
        as[x / kRows][x % kRows] = ra[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kE; ++j) {
      const int x = tid + 128 * j;
      es[x % kKT][x / kKT] = re[j];
    }
  };
  if (it_begin < it_end) fetch(it_begin);
  for (int it = it_begin; it < it_end; ++it) {
    stage();
    __syncthreads();
    if (it + 1 < it_end) fetch(it + 1);
#pragma unroll 4
    for (int kk = 0; kk < kKT; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(&as[kk][rq]);
      const float4 e01 = *reinterpret_cast<const float4*>(&es[kk][sq]), e23 = *reinterpret_cast<const float4*>(&es[kk][sq + 2]);
      const float av[4] = {a.x, a.y, a.z, a.w};
      const float2 ev[4] = {make_float2(e01.x, e01.y), make_float2(e01.z, e01.w), make_float2(e23.x, e23.y), make_float2(e23.z, e23.w)};
#pragma unroll
      for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y) {
          acc[x][y][0] = fmaf(av[x], ev[y].x, acc[x][y][0]);
          acc[x][y][1] = fmaf(av[x], ev[y].y, acc[x][y][1]);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int i = i0 + rq + x;
    if (i >= m) continue;
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int s = s0 + sq + y;
      if (s < strips) out[(static_cast<long long>(s) * slots + slot) * m + i] = make_float2(acc[x][y][0], acc[x][y][1]);
    }
  }
}

// ref[s][c][i] = the sum of part[s][slot][i] over the slots up to the last part of interval c (fp32, in k order, as
// the fused level accumulates them); part == ref when parts == 1 (in place)
__global__ void abft_ref_scan_kernel(const float2* part, float2* ref, int m, int strips, int chunks, int parts) {
  const long long x = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (x >= static_cast<long long>(m) * strips) return;
  const long long s = x / m, i = x % m;
  const float2* q = part + s * chunks * parts * m + i;
  float2* r = ref + s * chunks * m + i;
  float2 run = make_float2(0.f, 0.f);
  for (int c = 0; c < chunks; ++c) {
    for (int j = 0; j < parts; ++j) {
      const float2 v = q[(static_cast<long long>(c) * parts + j) * m];
      run = make_float2(run.x + v.x, run.y + v.y);
    }
    r[static_cast<long long>(c) * m] = run;
  }
}

// ---- the reference pre-pass on the tensor cores (k a multiple of the k-tile: no residue iteration) -------------
// D[u] = A[:, u L' .. (u + 1) L') E[u L' .. (u + 1) L', :] for the sub-chunks u of L' = sub k (a divisor of the
// checkpoint interval's k extent): r, r' of every row and strip per sub-chunk, tf32x3 (three TF32 MMAs, fp32-accurate
// products, fp32 sums), one batched GEMM (plus one for a shorter last sub-chunk). abft_ref_scan_tc_kernel then adds
// the sub-chunks up into ref[s][c][i] as abft_ref_scan_kernel does.
// The swizzle is this file's own type: CUTLASS's GemmUniversal keeps per-device state (occupancy, the kernel's
// shared-memory attribute) in static members, which two variants linked into one library would otherwise share
// while each launches its own copy of the kernel.
struct AbftRefSwizzle : cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8> {};
template <class LayoutA, int kAlignA>
using AbftRefGemm = cutlass::gemm::device::GemmUniversal<
    float, LayoutA, float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp,
    cutlass::arch::Sm80, cutlass::gemm::GemmShape<128, 64, 32>, cutlass::gemm::GemmShape<64, 32, 32>, cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>, AbftRefSwizzle, 4, kAlignA, 4,
    cutlass::arch::OpMultiplyAddFastF32>;

// ref[s][c][i] = sum of D[u][i][2 s .. 2 s + 1] over the sub-chunks u < (c + 1) per (per sub-chunks per checkpoint
// interval; the last checkpoint takes the rest), in u order: a thread per (row, strip), consecutive threads along the
// strips (D's rows: coalesced reads; the 8-byte stores are m apart). (Before: 32 x 32 tiles transposed through shared
// memory, a block per 32 rows: 128 blocks at m = 4096, 9.6 us for 8 MB.)
__global__ void __launch_bounds__(256) abft_ref_scan_tc_kernel(const float* __restrict__ D, int ldd, float2* __restrict__ ref, int m,
                                                               int strips, int chunks, int subs, int per) {
  const long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (t >= static_cast<long long>(m) * strips) return;
  const int i = static_cast<int>(t / strips), st = static_cast<int>(t % strips);
  const float* const d = D + static_cast<long long>(i) * ldd + 2 * st;
  const long long step = static_cast<long long>(m) * ldd;
  float2 run = make_float2(0.f, 0.f);
#pragma unroll 4
  for (int u = 0; u < subs; ++u) {
    const float2 v = __ldg(reinterpret_cast<const float2*>(d + u * step));
    run = make_float2(run.x + v.x, run.y + v.y);
    if (u == subs - 1 || (u + 1) % per == 0) ref[(static_cast<long long>(st) * chunks + min(u / per, chunks - 1)) * m + i] = run;
  }
}

// ---- the kernel --------------------------------------------------------------------------------------
template <class K>
struct AbftParams {
  TileParams<K> t;
  const float4* enc;  // [strip][k] (abft_enc_kernel; kStrips strips per tile column block)
  const float2* ref;  // ref_checksums: prepass: [strip][chunk][m] (abft_ref_kernel, abft_ref_scan_kernel)
  int chunks;         // checkpoints of a tile (prepass)
  const typename K::ElementA* A;  // the A operand (the rare path recomputes the reference rows of flagged rows from it)
  long long lda;
  float unit;         // lambda * u: threshold per unit of (sqrt(k) + sqrt(strip width) + 1) * scale
  float fixed;        // > 0: a fixed threshold (protection.threshold) instead of the derived one
  int online;         // correct: online (1) or detect (0: any detection recomputes the tile)
  int* redo;          // abft_once_kernel: [count][tiles to recompute][parts done per listed tile]
  typename K::ElementAcc* redo_part;  // abft_once_kernel<.., kRedo = true>: partial accumulators, gridDim.x tiles
  float4* obs;        // abft_once_kernel<.., kDefer = true>: per row, strip and warp column {sum c, sum w c, sum c^2, max |c|}
  // ref_checksums: concurrent (else nullptr): the rows abft_check_kernel lists for recomputation, [count][rows_cap
  // ids: tile * kM + row in the tile, -1 unused][rows_cap parts stored], and the partial rows of the second launch
  int* rows_redo;
  int rows_cap;
  double* row_part;   // per part and column {sum a b, sum |a| |b|}
  // ref_checksums: concurrent with a suspect band (0: none): the band's floor (ftgen_rules::abft_band_verdict) and
  // the element tolerance of a suspect unit's recomputation (ftgen_rules::abft_element_differs)
  float band;
  double elem_tol;
  // ref_checksums: concurrent (else nullptr): the tiles abft_check_kernel found a row of for the rare path, [count][tiles
  // listed][the second launch's barrier], decided by the second launch
  int* flagged;
};

// Per-thread geometry of the accumulator fragment and the reference rows.
template <class K>
struct AbftShape {
  using Operator = typename K::Operator;
  using Layout = AccLayout<Operator>;
  using Iter = typename Operator::MmaIterations;
  static int const kM = K::Shape::kM, kN = K::Shape::kN, kK = K::Shape::kK;
  static int const kWarpsM = K::WarpCount::kM, kWarpsN = K::WarpCount::kN;
  static int const kWarpM = Operator::Shape::kM, kWarpN = Operator::Shape::kN;
  static int const kRowsPerThread = Iter::kRow * Layout::kRows;  // rows of the warp tile one lane holds
  static int const kInstM = Layout::Inst::kM, kInstK = Layout::Inst::kK;
  // reference rows a lane carries: 2 per MMA row block its warp column takes (mt % kWarpsN == warp_n)
  static int const kRefRows = 2 * ((Iter::kRow + kWarpsN - 1) / kWarpsN);
  static_assert(K::WarpCount::kK == 1, "no sliced-k warp tiles");
  static_assert(kInstM == 16 && kInstK == 8 && Layout::kRows == 2, "the m16n8k8 A fragment layout (tf32 / tf32x3)");
  static_assert(Operator::FragmentC::kElements == Iter::kCount * Layout::kPerMma, "accumulator layout");
  // row (within the warp tile) of local row index q of a lane: mma row block q / kRows, half q % kRows
  CUTLASS_DEVICE static int row_of(int lane, int q) { return (lane >> 2) + (q / Layout::kRows) * Layout::Inst::kM + (q % Layout::kRows) * 8; }
  // local row index of accumulator element e
  CUTLASS_DEVICE static int q_of(int e) {
    const int mma = e / Layout::kPerMma, r = (e % Layout::kPerMma) / Layout::kEPA;
    return (mma % Iter::kRow) * Layout::kRows + r;
  }
  // f(e, rl, cl, q) for every accumulator element e of a lane: its row within the tile, its column within the
  // strip (the tile's columns) and the lane's local row index q
  template <class F>
  CUTLASS_DEVICE static void each(int lane, int warp_m, int warp_n, F&& f) {
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < Operator::FragmentC::kElements; ++e) {
      int rr, cc;
      Layout::coord(lane, e, rr, cc);
      f(e, warp_m * kWarpM + rr, warp_n * kWarpN + cc, q_of(e));
    }
  }
};

// The checksum strips of a tile: kStrips strips of kCols = kN / kStrips columns, each kParts whole warp columns (1 strip:
// the tile's tb_n columns, as abft_kernel and the prepass design check them; the concurrent design: tb_n /
// FTGEN_ABFT_STRIP_N strips, one tile-wide strip by default). A check is per unit, a (row, strip) pair u = s kM + rl: its sums over the strip's warp columns,
// its reference rows r, r' (of the strip's encodings), its threshold (sqrt(kCols)), its located column (in the strip:
// weights 1..kCols, ftgen_rules::abft_strip_local) and, where it is not located, its recomputation.
template <class K, int kStrips_>
struct AbftStrips {
  using S = AbftShape<K>;
  static int const kStrips = kStrips_;
  static int const kCols = S::kN / kStrips;
  static int const kParts = S::kWarpsN / kStrips;
  static int const kUnits = kStrips * S::kM;
  static_assert(kStrips >= 1 && S::kWarpsN % kStrips == 0, "a checksum strip is whole warp columns");
  static_assert(kUnits % 32 == 0, "whole warps of units (ballots)");
  CUTLASS_DEVICE static int strip(int u) { return u / S::kM; }
  CUTLASS_DEVICE static int row(int u) { return u % S::kM; }
  // the unit of row rl whose strip holds warp column w
  CUTLASS_DEVICE static int unit_of_part(int rl, int w) { return (w / kParts) * S::kM + rl; }
};

// f(u) for each unit u < kUnits this thread takes (a thread per unit, the block's threads in turn: one pass where the
// block has a thread per unit)
template <int kUnits, int kThreads, class F>
CUTLASS_DEVICE void abft_each_unit(int tid, F&& f) {
  if constexpr (kUnits <= kThreads) {
    if (tid < kUnits) f(tid);
  } else {
    for (int u = tid; u < kUnits; u += kThreads) f(u);
  }
}

// whether pred(u) holds for one of this thread's units
template <int kUnits, int kThreads, class P>
CUTLASS_DEVICE bool abft_any_unit(int tid, P&& pred) {
  bool any = false;
  abft_each_unit<kUnits, kThreads>(tid, [&](int u) { any = any || pred(u); });
  return any;
}

// Shared memory of the ABFT kernel beside the CUTLASS storage (which the verification must not touch:
// the next k-tiles are in flight there). Per unit (AbftStrips: row and checksum strip): ref, rtot, col, score, pre.
template <class K, int kEncBufs, int kStrips = 1>
struct AbftScratch {
  using S = AbftShape<K>;
  static int const kUnits = AbftStrips<K, kStrips>::kUnits;
  float2 sums[S::kWarpsN][S::kM];    // per warp column: sum c, sum w c
  float2 norm[S::kWarpsN][S::kM];    // per warp column: sum c^2, max |c| (pass 1, kPre); sum c^2 (capped), max c^2 (rare path)
  int2 bad[S::kWarpsN][S::kM];       // per warp column (second pass): non-finite count, a non-finite column
  float4 enc[kEncBufs][S::kK];       // encodings of the k-iterations in flight (see `group`)
  float4 ref[kUnits];                // r, r', r2
  double red[K::kThreads / 32][3];   // block sums of the rare path
  double2 rest[S::kWarpsN][S::kM];   // rare path: per warp column {sum c, sum w c} in double (the rule); then .x = the
                                     // sum of the unit's other elements (correction)
  float rtot[kUnits];                // r_i of the unit (correction)
  int col[kUnits];                   // -1 clean, else the located column (in the strip); -2 detected, not located; -3 second pass
  float score[kUnits];               // a unit's largest score, pass 1's and the rare path's (recorded once, at the end)
  int pend[2];                       // inject builds: the tile's planned fault (index into faults or -1, k-iteration)
  float2 pre[kUnits];                // abft_once_kernel, abft_check_tile: r, r' of the tile's units
};

// The part of AbftScratch that pass 1 uses (abft_check_kernel: the rare path is the second launch's)
template <class K, int kStrips = 1>
struct AbftPass1Scratch {
  using S = AbftShape<K>;
  static int const kUnits = AbftStrips<K, kStrips>::kUnits;
  float2 sums[S::kWarpsN][S::kM];
  float2 norm[S::kWarpsN][S::kM];
  float2 pre[kUnits];
  int col[kUnits];
  float score[kUnits];
};

template <class K, class ML, int kStrips = 1>
struct AbftStorage {
  SharedStorage<K, ML> ss;
  static int const kEncBufs = ML::kStages + 1 <= 4 ? 4 : ML::kStages + 1 <= 8 ? 8 : 16;
  AbftScratch<K, kEncBufs, kStrips> sc;
};

// What the rare path of a verification needs beside the shared scratch and the accumulators.
// threadIdx.x read where it is used (asm volatile: not hoisted out of the main loop, so no register or predicate
// derived from it stays live across the loop)
CUTLASS_DEVICE int fresh_tid() {
  unsigned t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return static_cast<int>(t);
}

// ref_checksums: concurrent: the mark of a suspect unit in the list of units to recompute (AbftParams::rows_redo: ids
// tile * kUnits + unit stay below it; abft_check_tile lists no suspect of a tile past that)
constexpr int kAbftSuspectId = 1 << 30;

struct AbftRareArgs {
  const float* A;      // prepass: A and the encodings of the tile's first strip, to recompute r, r', r2 of flagged units
  long long lda;
  const float4* enc;
  int k_done, M, N, row0, col0;
  float unit;          // lambda u (sqrt(k_done) + sqrt(strip width) + 1)
  float fixed, rms_w;  // (rms_w of the weights 1..strip width)
  int online, correct, final_attempt;
  ftgen::FtCounters* counters;
  long long enc_strip;  // kStrips > 1: elements from one strip's encodings to the next (k)
  const float* B;       // B (K::LayoutB) and its leading dimension: a located element's dot product
  long long ldb;
  float band;           // the suspect band's floor (0: none; AbftParams::band)
};

// A located unit's value after the rare path's step 4 (abft_rare): its element's dot product of A's row and B's column,
// or NaN where that is not to be taken, and then *others = the sum of the unit's other elements (for r_i - rest)
template <class St, class Sc>
CUTLASS_DEVICE double abft_located_dot(const Sc& sc, int s, int rl, double* others) {
  const double dot = sc.rest[s * St::kParts][rl].y;
  double o = 0.0;
  if (isnan(dot)) {
    for (int x = 0; x < St::kParts; ++x) o += sc.rest[s * St::kParts + x][rl].x;
  }
  *others = o;
  return dot;
}

// The tile's accumulators as the rare path reads and corrects them, per unit (AbftStrips: row and checksum strip; kStrips:
// the rows' strips per tile, AbftFragRows only 1). Per row rl and warp column w (the tile's 32-column parts): norms()
// sets sc.norm[w][rl] = {sum of the capped squares, largest capped square}, sc.rest[w][rl] = {sum c, sum w c} (in
// double, w the weights of the part's strip; AbftFragRows: pass 1's float sums) and sc.bad[w][rl] = {non-finite
// elements, a non-finite column in the strip} of the parts of units pass 1 flagged; rests() sets
// sc.rest[w][rl].x = the sum, in double, of the part's elements but its unit's located column sc.col[u] (units with
// sc.col >= 0); fix() (after a barrier) sets each located element to its dot product where abft_rare kept one, else to
// sc.rtot - the rest of its unit (the sum over the strip's parts), and returns how many elements this thread set.
// Columns past N count for nothing.
// AbftFragRows: this thread's fragment in registers (the quads' shares by shuffles); AbftStagedRows: the tile staged
// in shared memory (a thread per row and warp column, rolled loops: few registers); AbftGlobalRows: the tile in C (the
// deferred check of ref_checksums: concurrent).
template <class K>
struct AbftFragRows {
  using S = AbftShape<K>;
  static int const kStrips = 1;  // (the tile's tb_n columns: abft_kernel)
  static int const kExactUnroll = 4;  // (abft_rare's kExact loop; see AbftGlobalRows)
  static int const kExactBatch = 0;     // (the rolled loop, unrolled kExactUnroll times)
  static bool const kRowRedo = false;  // (see AbftGlobalRows)
  typename K::ElementAcc* a;
  template <class Sc>
  CUTLASS_DEVICE void norms(Sc& sc, const AbftRareArgs& g, int tid) const {
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp % S::kWarpsM, warp_n = warp / S::kWarpsM;
    const float cap = sizeof(typename K::ElementAcc) == 8 ? 1e150f : 1e17f;  // squares stay finite
    float sq[S::kRowsPerThread], mx[S::kRowsPerThread];
    int nb[S::kRowsPerThread], bc[S::kRowsPerThread];
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < S::kRowsPerThread; ++q) sq[q] = mx[q] = 0.f, nb[q] = 0, bc[q] = -1;
    S::each(lane, warp_m, warp_n, [&](int e, int, int cl, int q) {
      const float v = static_cast<float>(a[e]);
      if (g.col0 + cl < g.N) {
        if (isfinite(v)) {
          const float c2 = fminf(fabsf(v), cap) * fminf(fabsf(v), cap);
          sq[q] += c2;
          mx[q] = fmaxf(mx[q], c2);
        } else {
          ++nb[q];
          bc[q] = cl;
        }
      }
    });
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < S::kRowsPerThread; ++q) {
      CUTLASS_PRAGMA_UNROLL
      for (int o = 1; o < 4; o <<= 1) {
        sq[q] += __shfl_xor_sync(0xffffffffu, sq[q], o);
        mx[q] = fmaxf(mx[q], __shfl_xor_sync(0xffffffffu, mx[q], o));
        nb[q] += __shfl_xor_sync(0xffffffffu, nb[q], o);
        bc[q] = max(bc[q], __shfl_xor_sync(0xffffffffu, bc[q], o));
      }
      if ((lane & 3) == 0) {
        const int rl = warp_m * S::kWarpM + S::row_of(lane, q);
        sc.norm[warp_n][rl] = make_float2(sq[q], mx[q]);
        // pass 1's float sums (abft_kernel's main loop holds the accumulators: sums in double here cost its loop 9-42
        // instructions per k-iteration, static SASS; a large fault is then recomputed instead of located)
        sc.rest[warp_n][rl] = make_double2(sc.sums[warp_n][rl].x, sc.sums[warp_n][rl].y);
        sc.bad[warp_n][rl] = make_int2(nb[q], bc[q]);
      }
    }
  }
  template <class Sc>
  CUTLASS_DEVICE void rests(Sc& sc, const AbftRareArgs& g, int tid) const {
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp % S::kWarpsM, warp_n = warp / S::kWarpsM;
    double rest[S::kRowsPerThread];
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < S::kRowsPerThread; ++q) rest[q] = 0.0;
    S::each(lane, warp_m, warp_n, [&](int e, int rl, int cl, int q) {
      if (g.col0 + cl < g.N && sc.col[rl] >= 0 && sc.col[rl] != cl) rest[q] += static_cast<double>(a[e]);
    });
    CUTLASS_PRAGMA_UNROLL
    for (int q = 0; q < S::kRowsPerThread; ++q) {
      rest[q] += __shfl_xor_sync(0xffffffffu, rest[q], 1);
      rest[q] += __shfl_xor_sync(0xffffffffu, rest[q], 2);
      if ((lane & 3) == 0) sc.rest[warp_n][warp_m * S::kWarpM + S::row_of(lane, q)].x = rest[q];
    }
  }
  template <class Sc>
  CUTLASS_DEVICE unsigned fix(Sc& sc, int tid) {
    const int warp = tid / 32, lane = tid % 32;
    unsigned n = 0;
    S::each(lane, warp % S::kWarpsM, warp / S::kWarpsM, [&](int e, int rl, int cl, int) {
      if (sc.col[rl] == cl) {
        double others;
        const double dot = abft_located_dot<AbftStrips<K, 1>>(sc, 0, rl, &others);
        if (isnan(dot)) {
          n += ftgen_rules::correct_element(a[e], static_cast<double>(sc.rtot[rl]), others);
        } else {
          a[e] = static_cast<typename K::ElementAcc>(dot);
          ++n;
        }
      }
    });
    return n;
  }
};

// The rare path's sums over one (row rl, warp column w) part of a tile, its elements get(j) for j < kWarpN from column c0
// (columns past N count for nothing), by kLanes lanes of a warp (lane: this one's; the elements j = lane, lane + kLanes,
// ...; kLanes > 1: the part's lanes are one whole warp): abft_part_norms sets sc.norm[w][rl] = {sum of the capped squares,
// largest capped square}, sc.rest[w][rl] = {sum c, sum w c} in double (w: the column's weight in its strip of kCols
// columns) and sc.bad[w][rl] = {non-finite elements, a non-finite column of the strip} of a unit pass 1 flagged (sc.col
// == -3); abft_part_rest sets sc.rest[w][rl].x = the sum, in double, of the part's elements but its unit's located
// column sc.col[u] (units with sc.col >= 0).
template <int kLanes, class T, class Op>
CUTLASS_DEVICE T abft_lanes_reduce(T v, Op op) {
  CUTLASS_PRAGMA_UNROLL
  for (int o = kLanes / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <class K, int kLanes, int kStrips, class Sc, class Get>
CUTLASS_DEVICE void abft_part_norms(Sc& sc, const AbftRareArgs& g, int rl, int w, int c0, int lane, Get&& get) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  if (sc.col[St::unit_of_part(rl, w)] != -3) return;  // only the units pass 1 flagged are decided (and read: AbftGlobalRows reads C)
  const float cap = sizeof(typename K::ElementAcc) == 8 ? 1e150f : 1e17f;  // squares stay finite
  const int jn = min(S::kWarpN, g.N - g.col0 - c0);  // columns of the part inside C
  const int l0 = ftgen_rules::abft_strip_local(c0, St::kCols);  // the part's first place in its strip
  float sq = 0.f, mx = 0.f;
  double s1 = 0.0, sw = 0.0;
  int nb = 0, bc = -1;
#pragma unroll 8
  for (int j = lane; j < S::kWarpN; j += kLanes) {  // (unrolled, predicated: several loads in flight)
    const float v = j < jn ? get(j) : 0.f;
    s1 += v;
    sw = fma(double(l0 + j + 1), double(v), sw);
    if (isfinite(v)) {
      const float c2 = fminf(fabsf(v), cap) * fminf(fabsf(v), cap);
      sq += c2;
      mx = fmaxf(mx, c2);
    } else {
      ++nb;
      bc = l0 + j;
    }
  }
  if constexpr (kLanes > 1) {
    auto add = [](auto a, auto b) { return a + b; };
    sq = abft_lanes_reduce<kLanes>(sq, add), s1 = abft_lanes_reduce<kLanes>(s1, add), sw = abft_lanes_reduce<kLanes>(sw, add);
    nb = abft_lanes_reduce<kLanes>(nb, add);
    mx = abft_lanes_reduce<kLanes>(mx, [](float a, float b) { return fmaxf(a, b); });
    bc = abft_lanes_reduce<kLanes>(bc, [](int a, int b) { return max(a, b); });
  }
  if (lane == 0) {
    sc.norm[w][rl] = make_float2(sq, mx);
    sc.rest[w][rl] = make_double2(s1, sw);
    sc.bad[w][rl] = make_int2(nb, bc);
  }
}

template <class K, int kLanes, int kStrips, class Sc, class Get>
CUTLASS_DEVICE void abft_part_rest(Sc& sc, const AbftRareArgs& g, int rl, int w, int c0, int lane, Get&& get) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  const int col = sc.col[St::unit_of_part(rl, w)];  // (in the strip)
  if (col < 0) return;
  const int jn = min(S::kWarpN, g.N - g.col0 - c0);
  const int l0 = ftgen_rules::abft_strip_local(c0, St::kCols);
  double rest = 0.0;
#pragma unroll 8
  for (int j = lane; j < S::kWarpN; j += kLanes)
    if (j < jn && l0 + j != col) rest += get(j);
  if constexpr (kLanes > 1) rest = abft_lanes_reduce<kLanes>(rest, [](double a, double b) { return a + b; });
  if (lane == 0) sc.rest[w][rl].x = rest;
}

// The staged tile: kM rows of kPitch elements (odd: a thread per row reads without bank conflicts).
template <class K, int kStrips_ = 1>
struct AbftStagedRows {
  using S = AbftShape<K>;
  static int const kStrips = kStrips_;
  using St = AbftStrips<K, kStrips>;
  static int const kExactUnroll = 4;  // (abft_rare's kExact loop; see AbftGlobalRows)
  static int const kExactBatch = 0;     // (the rolled loop, unrolled kExactUnroll times)
  static bool const kRowRedo = false;  // (see AbftGlobalRows)
  static int const kPitch = S::kN + 1;
  typename K::ElementAcc* tile;
  // f(e, x) for every accumulator element e of this thread's fragment: its place x in the staged tile
  template <class F>
  CUTLASS_DEVICE static void each_of_fragment(F&& f) {
    const int tid = fresh_tid(), warp = tid / 32, lane = tid % 32;
    S::each(lane, warp % S::kWarpsM, warp / S::kWarpsM, [&](int e, int rl, int cl, int) { f(e, rl * kPitch + cl); });
  }
  // f(rl, w, first element of the part, first column) for the (row, warp column) parts this thread takes
  template <class F>
  CUTLASS_DEVICE void each_part(int tid, F&& f) const {
    for (int x = tid; x < S::kM * S::kWarpsN; x += K::kThreads) {
      const int rl = x % S::kM, w = x / S::kM;
      f(rl, w, tile + rl * kPitch + w * S::kWarpN, w * S::kWarpN);
    }
  }
  template <class Sc>
  CUTLASS_DEVICE void norms(Sc& sc, const AbftRareArgs& g, int tid) const {
    each_part(tid, [&](int rl, int w, const typename K::ElementAcc* x, int c0) { abft_part_norms<K, 1, kStrips>(sc, g, rl, w, c0, 0, [&](int j) { return static_cast<float>(x[j]); }); });
  }
  template <class Sc>
  CUTLASS_DEVICE void rests(Sc& sc, const AbftRareArgs& g, int tid) const {
    each_part(tid, [&](int rl, int w, const typename K::ElementAcc* x, int c0) { abft_part_rest<K, 1, kStrips>(sc, g, rl, w, c0, 0, [&](int j) { return static_cast<double>(x[j]); }); });
  }
  template <class Sc>
  CUTLASS_DEVICE unsigned fix(Sc& sc, int tid) {
    unsigned n = 0;
    abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int u) {
      if (sc.col[u] < 0) return;
      const int s = St::strip(u), rl = St::row(u);
      double others;
      const double dot = abft_located_dot<St>(sc, s, rl, &others);
      auto& x = tile[rl * kPitch + ftgen_rules::abft_strip_column(s, St::kCols, sc.col[u])];
      if (isnan(dot)) {
        n += ftgen_rules::correct_element(x, static_cast<double>(sc.rtot[u]), others);
      } else {
        x = static_cast<typename K::ElementAcc>(dot);
        ++n;
      }
    });
    return n;
  }
};

// f(rl) for each row (or unit) rl < kM of a tile with pred(rl), in order, found by ballots 32 at a time (the flagged rows
// are few: the kM rows are not visited one by one). Called by whole warps; every warp gets the same list.
template <int kM, class Pred, class F>
CUTLASS_DEVICE void abft_each_row(int lane, Pred&& pred, F&& f) {
  static_assert(kM % 32 == 0, "whole warps of rows");
  for (int base = 0; base < kM; base += 32) {
    unsigned m = __ballot_sync(0xffffffffu, pred(base + lane));
    for (; m != 0u; m &= m - 1u) f(base + __ffs(m) - 1);
  }
}

// The sum over k = k0, k0 + stride, ... < k1 of A(gi, k) B(k, gj) in double, in k order (A, B in K's layouts; EA, EB
// their element types). The loads go kBatch at a time, predicated, all issued before the first is used: an unrolled
// `for (kk < k1)` loop kept a branch on the bound between its iterations, and each iteration's loads waited for the one
// before (one trip to L2 or DRAM per k: the row recomputation's 64 k per thread took ~10 us).
// kMag: *mag = the sum of |A(gi, k) B(k, gj)| over the same k (the magnitudes of an element's tolerance).
template <class K, bool kRowA, int kBatch, bool kMag = false, class EA, class EB>
CUTLASS_DEVICE double abft_dot_k(const EA* A, long long lda, const EB* B, long long ldb, int gi, int gj, int k0, int k1, int stride,
                                 double* mag = nullptr) {
  constexpr bool kRowB = std::is_same<typename K::LayoutB, cutlass::layout::RowMajor>::value;
  double s = 0.0, t = 0.0;
  for (int kb = k0; kb < k1; kb += kBatch * stride) {
    EA a[kBatch];
    EB b[kBatch];
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      const int kk = kb + u * stride;
      const bool in = kk < k1;
      a[u] = in ? __ldg(kRowA ? A + static_cast<long long>(gi) * lda + kk : A + static_cast<long long>(kk) * lda + gi) : EA(0);
      b[u] = in ? __ldg(kRowB ? B + static_cast<long long>(kk) * ldb + gj : B + static_cast<long long>(gj) * ldb + kk) : EB(0);
    }
    CUTLASS_PRAGMA_UNROLL
    for (int u = 0; u < kBatch; ++u) {
      s += static_cast<double>(a[u]) * static_cast<double>(b[u]);
      if constexpr (kMag) t += fabs(static_cast<double>(a[u]) * static_cast<double>(b[u]));
    }
  }
  if constexpr (kMag) *mag = t;
  return s;
}

// abft_dot_k on the operands of p (a planned fault's partial sum, the row recomputation; kMag: a suspect's, with *mag)
template <class K, bool kRowA, int kBatch = 16, bool kMag = false>
CUTLASS_DEVICE double abft_ab_dot(const AbftParams<K>& p, int gi, int gj, int k0, int k1, int stride, double* mag = nullptr) {
  return abft_dot_k<K, kRowA, kBatch, kMag>(p.A, p.lda, p.t.gemm.ref_B.data(), static_cast<long long>(p.t.gemm.ref_B.stride(0)), gi, gj,
                                            k0, k1, stride, mag);
}

// The tile in global memory, as the deferred check (abft_check_kernel) reads and corrects it: D = alpha x the
// accumulators (the deferred design runs with beta = 0 and alpha != 0 only), D pointing at the tile's origin, `rows`
// of it inside C; values are divided by alpha on the way in, the corrected element multiplied by it on the way out.
template <class K, int kStrips_ = 1>
struct AbftGlobalRows {
  using S = AbftShape<K>;
  static int const kStrips = kStrips_;
  using St = AbftStrips<K, kStrips>;
  // the rare path's loop over k for r, r', r2 of a flagged row (kExact): loads kExactBatch at a time, predicated, all
  // in flight before the first is used (the deferred check, a kernel of its own, waits for this row: its unrolled
  // loop kept a branch on the bound between iterations, one trip to L2 or DRAM per k, ~10 us at k = 4096)
  static int const kExactUnroll = 4;
  static int const kExactBatch = 8;
  // a detection that is not located (every detection with correct: detect) is left to the caller to recompute as a row
  // (abft_check_kernel lists the row; the second launch recomputes it); the other row policies recompute the tile
  static bool const kRowRedo = true;
  using EC = typename K::ElementC;
  EC* D;
  long long ldd;
  int rows;
  float alpha;
  // f(rl, w, first element of the part, first column, lane) for the (row, warp column) parts of the units whose sc.col
  // satisfies `want`, a warp per part (lanes over its columns: coalesced loads from C), the parts dealt out to the warps
  // in turn (a unit's list from ballots: the flagged units are few, the tile's are not read)
  template <class Sc, class Want, class F>
  CUTLASS_DEVICE void each_part(const Sc& sc, int tid, Want&& want, F&& f) const {
    const int warp = tid / 32, lane = tid % 32;
    int n = 0;  // parts dealt so far (the same in every warp)
    abft_each_row<St::kUnits>(lane, [&](int u) { return St::row(u) < rows && want(sc.col[u]); }, [&](int u) {
      const int rl = St::row(u);
      for (int x = 0; x < St::kParts; ++x, ++n) {
        const int w = St::strip(u) * St::kParts + x;
        if (n % (K::kThreads / 32) == warp) f(rl, w, D + rl * ldd + w * S::kWarpN, w * S::kWarpN, lane);
      }
    });
  }
  template <class Sc>
  CUTLASS_DEVICE void norms(Sc& sc, const AbftRareArgs& g, int tid) const {
    each_part(sc, tid, [](int c) { return c == -3; }, [&](int rl, int w, const EC* x, int c0, int lane) {
      abft_part_norms<K, 32, kStrips>(sc, g, rl, w, c0, lane, [&](int j) { return static_cast<float>(x[j]) / alpha; });
    });
  }
  template <class Sc>
  CUTLASS_DEVICE void rests(Sc& sc, const AbftRareArgs& g, int tid) const {
    each_part(sc, tid, [](int c) { return c >= 0; }, [&](int rl, int w, const EC* x, int c0, int lane) {
      abft_part_rest<K, 32, kStrips>(sc, g, rl, w, c0, lane, [&](int j) { return static_cast<double>(x[j]) / alpha; });
    });
  }
  template <class Sc>
  CUTLASS_DEVICE unsigned fix(Sc& sc, int tid) {
    unsigned n = 0;
    abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int u) {
      const int s = St::strip(u), rl = St::row(u);
      if (rl >= rows || sc.col[u] < 0) return;
      double others;
      const double dot = abft_located_dot<St>(sc, s, rl, &others);
      EC& x = D[rl * ldd + ftgen_rules::abft_strip_column(s, St::kCols, sc.col[u])];
      if (isnan(dot)) {
        n += ftgen_rules::correct_element_scaled(x, static_cast<double>(alpha), static_cast<double>(sc.rtot[u]), others);
      } else {
        x = static_cast<EC>(static_cast<double>(alpha) * dot);
        ++n;
      }
    });
    return n;
  }
};

// This thread's share of a located element's dot product in the rare path: the sum over k = tid, tid + kThreads, ...
// < g.k_done of A(gi, k) B(k, gj) in double (kBatch > 0: that many loads in flight, predicated; else a rolled loop
// unrolled kUnroll times: few registers, where the rare path is inlined into the GEMM kernel)
template <class K, bool kRowA, int kBatch, int kUnroll>
CUTLASS_DEVICE double abft_rare_dot(const AbftRareArgs& g, int gi, int gj, int tid) {
  if constexpr (kBatch > 0) {
    return abft_dot_k<K, kRowA, kBatch>(g.A, g.lda, g.B, g.ldb, gi, gj, tid, g.k_done, K::kThreads);
  } else {
    constexpr bool kRowB = std::is_same<typename K::LayoutB, cutlass::layout::RowMajor>::value;
    double s = 0.0;
#pragma unroll(kUnroll)
    for (int kk = tid; kk < g.k_done; kk += K::kThreads) {
      const float a = __ldg(kRowA ? g.A + static_cast<long long>(gi) * g.lda + kk : g.A + static_cast<long long>(kk) * g.lda + gi);
      const float b = __ldg(kRowB ? g.B + static_cast<long long>(kk) * g.ldb + gj : g.B + static_cast<long long>(gj) * g.ldb + kk);
      s += static_cast<double>(a) * static_cast<double>(b);
    }
    return s;
  }
}

// The rare path's step 4 (abft_rare), every thread of the block: each located unit's element recomputed from A's row and
// B's column over k < k_done (in double, by the whole block) and kept where it agrees with the checksum's replacement
// r_i - rest (located_fix_agrees: the replacement carries the rounding of the unit's other elements, beyond a small
// element's tolerance beside large ones) in sc.rest[the unit's first part][rl].y, which fix() writes (NaN there: fix()
// writes the replacement). Where they disagree and this is not the last attempt: Rows::kRowRedo: the unit's sc.col set
// to -2. Returns the disagreements (thread 0; 0 elsewhere).
template <class K, bool kRowA, class Rows, class Sc>
CUTLASS_DEVICE unsigned abft_located_dots(Sc& sc, const AbftRareArgs& g) {
  using St = AbftStrips<K, Rows::kStrips>;
  const int tid = fresh_tid(), warp = tid / 32, lane = tid % 32;
  unsigned disagree = 0;
  abft_each_row<St::kUnits>(lane, [&](int un) { return sc.col[un] >= 0; }, [&](int un) {
    const int s = St::strip(un), rl = St::row(un), cl = ftgen_rules::abft_strip_column(s, St::kCols, sc.col[un]);
    const bool inside = g.col0 + cl < g.N && g.row0 + rl < g.M;  // (block-uniform)
    double dot = inside ? abft_rare_dot<K, kRowA, Rows::kExactBatch, Rows::kExactUnroll>(g, g.row0 + rl, g.col0 + cl, tid) : 0.0;
    CUTLASS_PRAGMA_UNROLL
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0) sc.red[warp][0] = dot;
    __syncthreads();
    if (tid == 0) {
      dot = 0.0;
      for (int w = 0; w < K::kThreads / 32; ++w) dot += sc.red[w][0];
      double others = 0.0;
      for (int x = 0; x < St::kParts; ++x) others += sc.rest[s * St::kParts + x][rl].x;
      const bool agrees = inside && ftgen_rules::located_fix_agrees(static_cast<double>(sc.rtot[un]) - others, dot, static_cast<double>(sc.ref[un].w));
      sc.rest[s * St::kParts][rl].y = agrees ? dot : static_cast<double>(NAN);
      if (!agrees && !g.final_attempt) {
        ++disagree;
        if constexpr (Rows::kRowRedo) sc.col[un] = -2;
      }
    }
    __syncthreads();  // (sc.red reused by the next unit)
  });
  return disagree;
}

// The same as a call: no code of it in the caller but the call (the fused design's main loop).
template <class K, bool kRowA, class Rows, class Sc>
__device__ __noinline__ unsigned abft_located_dots_call(Sc& sc, const AbftRareArgs g) {
  return abft_located_dots<K, kRowA, Rows>(sc, g);
}

// The rare path of a verification: the units (rows of a checksum strip, AbftStrips; Rows::kStrips strips per tile) pass
// 1 flagged (sc.col == -3; their r, r', r2 in sc.ref) are decided by the full rule of gemm.abft_verify_rows (sum c and
// sum w c of the unit summed anew in double, the robust norm ||C_i|| without its largest element, the non-finite
// elements), located units corrected through `rows` (AbftFragRows: the accumulators in registers; AbftStagedRows: the
// tile staged in shared memory; AbftGlobalRows: the tile in C). Inlined into abft_kernel: as a call (noinline, on a copy
// of the accumulators) it cost the main loop more (the static SASS of the tf32x3 128x128x32 prepass kernel: 897
// instructions per k-iteration against 831 inlined and 768 unprotected).
// kExact (ref_checksums: prepass): r, r', r2 of the flagged units are first recomputed from A and the encodings of their
// strips, in double (the pre-pass gives r and r' only, and a fault there must not be taken for one in the tile).
// Returns {recompute the tile, detected, corrected, uncorrectable} (Rows::kRowRedo: never the tile; the units left with
// sc.col -2, or every detected unit with correct: detect, are for the caller to recompute).
template <class K, bool kExact, bool kRowA, class Sc, class Rows>
CUTLASS_DEVICE uint4 abft_rare(Sc& sc, Rows& rows, const AbftRareArgs g) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, Rows::kStrips>;
  const int tid = fresh_tid(), warp = tid / 32, lane = tid % 32;
  unsigned detected = 0, corrected = 0, uncorrectable = 0;
  // 1. per part of a flagged unit: ||C_i||^2 (capped) and its largest term, the non-finite elements
  rows.norms(sc, g, tid);
  if constexpr (kExact) {
    // r, r', r2 of flagged unit un (row rl, strip s) over k < k_done, by the whole block
    auto exact_row = [&](int un) {
      const int rl = St::row(un);
      const float4* const enc = g.enc + St::strip(un) * g.enc_strip;
      const long long i = g.row0 + rl;
      double x = 0.0, y = 0.0, z = 0.0;
      if constexpr (Rows::kExactBatch > 0) {
        constexpr int kB = Rows::kExactBatch;
        for (int kb = tid; kb < g.k_done; kb += kB * K::kThreads) {
          float a[kB];
          float4 e[kB];
          CUTLASS_PRAGMA_UNROLL
          for (int u = 0; u < kB; ++u) {
            const int kk = kb + u * K::kThreads;
            const bool in = kk < g.k_done;
            a[u] = in ? (kRowA ? g.A[i * g.lda + kk] : g.A[kk * g.lda + i]) : 0.f;
            e[u] = in ? __ldg(enc + kk) : make_float4(0.f, 0.f, 0.f, 0.f);
          }
          CUTLASS_PRAGMA_UNROLL
          for (int u = 0; u < kB; ++u) {
            const double v = static_cast<double>(a[u]);
            x += v * e[u].x;
            y += v * e[u].y;
            z += v * v * e[u].z;
          }
        }
      } else {
#pragma unroll(Rows::kExactUnroll)
        for (int kk = tid; kk < g.k_done; kk += K::kThreads) {
          const double v = static_cast<double>(kRowA ? g.A[i * g.lda + kk] : g.A[kk * g.lda + i]);
          const float4 e = __ldg(enc + kk);
          x += v * e.x;
          y += v * e.y;
          z += v * v * e.z;
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int o = 16; o > 0; o >>= 1) {
        x += __shfl_xor_sync(0xffffffffu, x, o);
        y += __shfl_xor_sync(0xffffffffu, y, o);
        z += __shfl_xor_sync(0xffffffffu, z, o);
      }
      if (lane == 0) sc.red[warp][0] = x, sc.red[warp][1] = y, sc.red[warp][2] = z;
      __syncthreads();
      if (tid == 0) {
        x = y = z = 0.0;
        for (int w = 0; w < K::kThreads / 32; ++w) x += sc.red[w][0], y += sc.red[w][1], z += sc.red[w][2];
        sc.ref[un] = make_float4(float(x), float(y), float(z), 0.f);
      }
      __syncthreads();
    };
    if constexpr (Rows::kExactBatch > 0) {
      // the flagged units found by ballots, not by the loop below over all of them (the redo launch of the concurrent
      // design spills: that loop's counter lived in local memory; measured on H100 at 4096^3 with 16 random faults,
      // the second launch 23.8 us against 36.0, x1.037 against x1.046 the unprotected kernel)
      abft_each_row<St::kUnits>(lane, [&](int un) { return sc.col[un] == -3; }, exact_row);
    } else {
      for (int un = 0; un < St::kUnits; ++un) {
        if (sc.col[un] != -3) continue;  // block-uniform
        exact_row(un);
      }
    }
  }
  __syncthreads();
  // 2. the full rule for the flagged units: their parts' sums, the strip's threshold, a column of the strip
  abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int un) {
    if (sc.col[un] != -3) return;
    const int s = St::strip(un), rl = St::row(un);
    float SQ = 0.f, MX = 0.f;
    double S1 = 0.0, SW = 0.0;
    int NB = 0, BC = -1;
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < St::kParts; ++x) {
      const int w = s * St::kParts + x;
      SQ += sc.norm[w][rl].x, MX = fmaxf(MX, sc.norm[w][rl].y), NB += sc.bad[w][rl].x, BC = max(BC, sc.bad[w][rl].y);
      S1 += sc.rest[w][rl].x, SW += sc.rest[w][rl].y;
    }
    const float R = sc.ref[un].x, RW = sc.ref[un].y, R2 = sc.ref[un].z;
    sc.rtot[un] = R;
    float score, tau = 0.f;
    const int verdict = ftgen_rules::abft_band_verdict(
        ftgen_rules::abft_row_verdict(SQ, MX, NB, BC, S1, SW, R, RW, R2, g.unit, g.fixed, g.rms_w, St::kCols, &score, &tau), score, g.band);
    sc.ref[un].w = tau;  // (step 4 checks a located element's recomputation against it; a unit located by its one
                         // non-finite element keeps tau 0, so step 4 finds them apart and the unit is recomputed)
    sc.score[un] = fmaxf(sc.score[un], score);
    sc.col[un] = verdict;
  });
  const int flagged = __syncthreads_count(abft_any_unit<St::kUnits, K::kThreads>(tid, [&](int un) { return sc.col[un] != -1; }));
  if (flagged == 0) return make_uint4(0u, 0u, 0u, 0u);
  abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int un) { ftgen_rules::abft_count_row(sc.col[un], g.online, detected, uncorrectable); });
  if (!g.correct) return make_uint4(0u, detected, corrected, uncorrectable);  // measurement mode: detect and count only
  const bool any_unlocated = __syncthreads_or(abft_any_unit<St::kUnits, K::kThreads>(tid, [&](int un) { return sc.col[un] == -2; })) != 0;
  if ((any_unlocated || !g.online) && !g.final_attempt) {
    if constexpr (!Rows::kRowRedo) {
      return make_uint4(1u, detected, corrected, uncorrectable);  // recompute the tile (the model counts the recomputed fault as corrected)
    } else if (!g.online) {
      return make_uint4(0u, detected, corrected, uncorrectable);  // every detected unit recomputed as a row of its strip (the caller lists them)
    }
    // (kRowRedo, online: the located units corrected below, the unlocated ones recomputed as rows of their strips)
  }
  if (!g.online) return make_uint4(0u, detected, corrected, uncorrectable);  // the last computation: not a transient fault
  // 3. online correction of the located elements: the rest of each flagged unit, summed in double
  rows.rests(sc, g, tid);
  __syncthreads();
  // 4. each located element recomputed from A's row and B's column (abft_located_dots); a disagreement is handled as
  // a detection that is not located: Rows::kRowRedo: the unit is left to the caller (sc.col -2); else the tile is
  // recomputed; on the last attempt the replacement stays. The fused design (!kExact: the rare path inlined into a main
  // loop that carries the references) calls it out of line: inlined there, its code made that loop 13-15% slower
  // (x1.29-1.36 its twin -> x1.48-1.54, 16 faults, H100); as a call, 3% faster than with no such step (x1.24-1.31).
  unsigned disagree;
  if constexpr (kExact) {
    disagree = abft_located_dots<K, kRowA, Rows>(sc, g);
  } else {
    disagree = abft_located_dots_call<K, kRowA, Rows>(sc, g);
  }
  if constexpr (!Rows::kRowRedo) {
    if (__syncthreads_count(disagree > 0) != 0) return make_uint4(1u, detected, corrected, uncorrectable);  // recompute the tile
  }
  corrected += rows.fix(sc, tid);
  __syncthreads();  // the scratch is reused by the next verification
  return make_uint4(0u, detected, corrected, uncorrectable);
}

// A counter of the FtCounters, where there are counters and n > 0.
CUTLASS_DEVICE void add_count(ftgen::FtCounters* c, unsigned long long ftgen::FtCounters::*field, unsigned n) {
  if (n && c != nullptr) atomicAdd(&(c->*field), static_cast<unsigned long long>(n));
}

// Pass 1's decision for each unit of the tile (AbftStrips: row rl and checksum strip s; kStrips = 1: row tid, tid < kM)
// from its strip's sums per warp column in sc.sums and (kPre) sc.norm: within the threshold without its robust-norm
// (kPre) or variance-floor term (with a suspect band: within the band's floor): clean (sc.col -1, its score kept); otherwise (and kPre units with a term above the cap or
// an overflowed sum of squares) left to the rare path (sc.col -3; kPre: the rare path recomputes its r, r', r2). kPre:
// ref_of(u) = r, r' of unit u.
template <class K, bool kPre, int kStrips, class Sc, class RefOf>
CUTLASS_DEVICE void abft_pass1_rows(Sc& sc, const AbftRareArgs& g, RefOf&& ref_of, int tid) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  const float unit = g.unit, rms_w = g.rms_w;
  const float cap = sizeof(typename K::ElementAcc) == 8 ? 1e150f : 1e17f;  // squares stay finite
  abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int u) {
    const int s = St::strip(u), rl = St::row(u);
    int verdict = -1;
    if (g.row0 + rl < g.M) {
      float S1 = 0.f, SW = 0.f, R, RW, scale;
      bool decided = true;  // kPre: false for a unit with a term above the cap or an overflowed sum of squares
      CUTLASS_PRAGMA_UNROLL
      for (int x = 0; x < St::kParts; ++x) S1 += sc.sums[s * St::kParts + x][rl].x, SW += sc.sums[s * St::kParts + x][rl].y;
      if constexpr (kPre) {
        const float2 ref = ref_of(u);
        R = ref.x, RW = ref.y;
        float SQ = 0.f, MX = 0.f;
        CUTLASS_PRAGMA_UNROLL
        for (int x = 0; x < St::kParts; ++x) SQ += sc.norm[s * St::kParts + x][rl].x, MX = fmaxf(MX, sc.norm[s * St::kParts + x][rl].y);
        decided = MX <= cap && SQ <= FLT_MAX;  // (NaN fails too)
        scale = fmaxf(sqrtf(fmaxf(SQ - MX * MX, 0.f)), fabsf(R));
      } else {
        R = sc.ref[u].x, RW = sc.ref[u].y;
        scale = fmaxf(sqrtf(fmaxf(sc.ref[u].z, 0.f)), fabsf(R));
      }
      const float tau = ftgen_rules::abft_tau(g.fixed, unit, scale);
      const float tau_w = ftgen_rules::abft_tau_w(g.fixed, tau, unit, rms_w, RW);
      const float d = S1 - R, dw = SW - RW;
      const float sc1 = ftgen_rules::abft_score(d, tau);
      const float sc2 = ftgen_rules::abft_score(dw, tau_w);
      if ((decided & ftgen_rules::abft_within_at(sc1, sc2, g.band > 0.f ? g.band : 1.f)) && isfinite(d) && isfinite(dw)) {
        sc.score[u] = fmaxf(sc.score[u], fmaxf(sc1, sc2));  // >= the full threshold's score
      } else {
        verdict = -3;
      }
    }
    sc.col[u] = verdict;
  });
}

// The counters of a rare path's outcome {recompute, detected, corrected, uncorrectable}; whether to recompute.
CUTLASS_DEVICE bool abft_rare_outcome(const uint4 r, ftgen::FtCounters* counters) {
  add_count(counters, &ftgen::FtCounters::detected, r.y);
  add_count(counters, &ftgen::FtCounters::corrected, r.z);
  add_count(counters, &ftgen::FtCounters::uncorrectable, r.w);
  return r.x != 0;
}

// Pass 1's sums of this lane's fragment `a`: per row of the lane, sum c and sum w c (kNorm: and sum c^2, max |c|) over
// the lane's columns, then over the quad (shuffles); store(row in the tile, s1, sw, sq, mx) in the quad's first lane, for
// the warp's 32-column part warp_n; the weights w those of the checksum strips of kCols columns (1..kCols in each).
// Columns past N count as 0 (full_n: none, block-uniform). The squares are not capped (a row with a term above the cap
// goes to the rare path; abft_pass1_rows).
template <class K, bool kNorm, int kCols = K::Shape::kN, class Store>
CUTLASS_DEVICE void abft_frag_sums(typename K::FragmentC const& a, bool full_n, int col0, int N, int lane, int warp_m, int warp_n, Store&& store) {
  using S = AbftShape<K>;
  static_assert(kCols % S::kWarpN == 0 && S::kN % kCols == 0, "checksum strips of whole warp columns");
  // the first column of this warp's strip: the weight of tile column cl is cl - c_base + 1 (c_base = 0: the tile's strip)
  const int c_base = kCols == S::kN ? 0 : ftgen_rules::abft_strip_column(ftgen_rules::abft_strip_of(warp_n * S::kWarpN, kCols), kCols, 0);
  float s1[S::kRowsPerThread], sw[S::kRowsPerThread], sq[kNorm ? S::kRowsPerThread : 1], mx[kNorm ? S::kRowsPerThread : 1];
  CUTLASS_PRAGMA_UNROLL
  for (int q = 0; q < S::kRowsPerThread; ++q) s1[q] = sw[q] = 0.f;
  CUTLASS_PRAGMA_UNROLL
  for (int q = 0; q < (kNorm ? S::kRowsPerThread : 1); ++q) sq[q] = mx[q] = 0.f;
  auto add = [&](float v, int cl, int q) {
    s1[q] += v;
    sw[q] = fmaf(float(cl - c_base + 1), v, sw[q]);
    if constexpr (kNorm) {
      sq[q] = fmaf(v, v, sq[q]);
      mx[q] = fmaxf(mx[q], fabsf(v));
    }
  };
  // (one select per element: a second copy of the loop for whole tiles was if-converted, both copies issued)
  S::each(lane, warp_m, warp_n, [&](int e, int, int cl, int q) { add((full_n || col0 + cl < N) ? static_cast<float>(a[e]) : 0.f, cl, q); });
  CUTLASS_PRAGMA_UNROLL
  for (int q = 0; q < S::kRowsPerThread; ++q) {
    CUTLASS_PRAGMA_UNROLL
    for (int o = 1; o < 4; o <<= 1) {
      s1[q] += __shfl_xor_sync(0xffffffffu, s1[q], o);
      sw[q] += __shfl_xor_sync(0xffffffffu, sw[q], o);
      if constexpr (kNorm) {
        sq[q] += __shfl_xor_sync(0xffffffffu, sq[q], o);
        mx[q] = fmaxf(mx[q], __shfl_xor_sync(0xffffffffu, mx[q], o));
      }
    }
    if ((lane & 3) == 0) store(warp_m * S::kWarpM + S::row_of(lane, q), s1[q], sw[q], kNorm ? sq[q] : 0.f, kNorm ? mx[q] : 0.f);
  }
}

// Verify every row of the tile from the accumulators `a` (after g.k_done of k); correct located faults in `a`. Returns
// whether the tile must be recomputed (the same in every thread). kPre: ref_row = r, r' of this thread's row (tid < kM);
// otherwise refs(warp_m, warp_n, lane) puts the fused design's reference rows into sc.ref before the block barrier.
template <class K, bool kPre, bool kRowA, class Sc, class Refs>
CUTLASS_DEVICE bool abft_verify(Sc& sc, typename K::FragmentC& a, const AbftRareArgs g, const float2 ref_row, int tid, Refs&& refs) {
  using S = AbftShape<K>;
  using Frag = typename K::FragmentC;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp % S::kWarpsM, warp_n = warp / S::kWarpsM;
  const bool full_n = g.col0 + S::kN <= g.N;  // block-uniform: no column of the tile past C
  // 1. sum c and sum w c per row (kPre: and ||C_i||^2 and its largest |term|): this lane's share, over the quad,
  //    the warps' shares in shared memory. A row within the threshold without its robust-norm term (kPre:
  //    without its variance-floor term) is within the full one (that term only raises it); the other rows are
  //    decided by the rare path (non-finite values land there too). kPre: the squares are not capped here; a
  //    row with a term above the cap (or a sum of squares that overflowed) goes to the rare path, so a row
  //    pass 1 lets through had the same sums capped (5 instructions per element instead of 7).
  abft_frag_sums<K, kPre>(a, full_n, g.col0, g.N, lane, warp_m, warp_n, [&](int rl, float s1, float sw, float sq, float mx) {
    sc.sums[warp_n][rl] = make_float2(s1, sw);
    if constexpr (kPre) sc.norm[warp_n][rl] = make_float2(sq, mx);
  });
  refs(warp_m, warp_n, lane);  // the fused design: its reference rows into sc.ref
  __syncthreads();
  abft_pass1_rows<K, kPre, 1>(sc, g, [&](int) { return ref_row; }, tid);  // (a unit per row: this thread's, tid)
  if (__syncthreads_count(tid < S::kM && sc.col[tid] == -3) == 0) return false;
  // 2. (rare) the rows over that threshold
  typename K::ElementAcc buf[Frag::kElements];  // (a plain array: passing a.data() cost the main loop 50 instructions)
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < Frag::kElements; ++e) buf[e] = a[e];
  AbftFragRows<K> rows{buf};
  const uint4 r = abft_rare<K, kPre, kRowA>(sc, rows, g);
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < Frag::kElements; ++e) a[e] = buf[e];
  return abft_rare_outcome(r, g.counters);
}

// kPre (ref_checksums: prepass): the reference rows come from abft_ref_kernel at every checkpoint, the main loop
// carries nothing; pass 1 then takes the robust norm of the row instead of the variance floor r2 (it can only
// lower the threshold, so a row it passes passes the full rule too), and the rare path recomputes r, r', r2.
template <class K, bool kInject, bool kPre, bool kRowA>
__global__ void __launch_bounds__(K::kThreads) abft_kernel(AbftParams<K> p) {
  using ML = Mainloop<typename K::Mma, 1, cutlass::gemm::SharedMemoryClearOption::kNone>;
  using Frag = typename K::FragmentC;
  using S = AbftShape<K>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& st = *reinterpret_cast<AbftStorage<K, ML>*>(smem_raw);
  auto& sc = st.sc;
  typename K::Swizzle swizzle;
  const cutlass::gemm::GemmCoord tc = swizzle.get_tile_offset(p.t.gemm.swizzle_log_tile);
  if (tc.m() >= p.t.tiles_m || tc.n() >= p.t.tiles_n) return;
  const int tile = tc.m() * p.t.tiles_n + tc.n();
  const int tid = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = threadIdx.x % 32;
  const int M = p.t.gemm.problem_size.m(), N = p.t.gemm.problem_size.n(), Kd = p.t.gemm.problem_size.k();
  const int total = p.t.total_k, interval = p.t.interval;
  const int warp_m = warp % S::kWarpsM, warp_n = warp / S::kWarpsM;
  const int row0 = tc.m() * S::kM, col0 = tc.n() * S::kN;
  const float4* enc = p.enc + static_cast<long long>(tc.n()) * Kd;
  const int r0 = Kd - (total - 1) * S::kK;  // k extent of the first (residue) k-iteration
  const float sqrt_cols = sqrtf(float(S::kN));
  const float rms_w = sqrtf((S::kN + 1.f) * (2.f * S::kN + 1.f) / 6.f);
  const float2* ref = kPre ? p.ref + static_cast<long long>(tc.n()) * p.chunks * M : nullptr;

  // the planned fault of this tile (inject builds): its index and k-iteration in shared memory, read where the loop
  // is left
  if constexpr (kInject) {
    if (tid == 0) {
      const int i = p.t.fault_by_block != nullptr ? p.t.fault_by_block[tile] : -1;
      sc.pend[0] = i;
      sc.pend[1] = i >= 0 ? p.t.faults[i].step : -1;
    }
    __syncthreads();
  }

  Frag acc[1];
  if (tid < S::kM) sc.score[tid] = 0.f;
  // kPre: r, r' of this thread's row (tid < kM) at the next checkpoint, read one interval ahead
  auto ref_at = [&](int checkpoint) {
    return (kPre && tid < S::kM && row0 + tid < M) ? __ldg(ref + static_cast<long long>(checkpoint / interval) * M + row0 + tid)
                                                   : make_float2(0.f, 0.f);
  };
  float2 ref_next = make_float2(0.f, 0.f);
  for (int attempt = 0;; ++attempt) {
    fill_opaque(acc[0], zero_of(p.t, 0));
    Iterators<K> its(p.t.gemm, tc.m(), tc.n(), 0, tid);
    ML ml(st.ss.main_loop, tid, warp, lane);
    bool redo = false;
    // the next k-iteration after which the loop is left: a checkpoint (every `interval` and the last) or a
    // planned fault; one compare per k-iteration
    int next_checkpoint = min(interval, total) - 1;
    if constexpr (kPre) ref_next = ref_at(next_checkpoint);
    auto next_stop = [&](int after) {
      int s = next_checkpoint;
      if constexpr (kInject) {
        const int step = sc.pend[1];
        if (attempt == 0 && step > after && step < s) s = step;
      }
      return s;
    };
    int stop = next_stop(-1);

    // r, r', r2 += a_ik (B e)_k, a_ik (B w)_k, a_ik^2 (B^2 e)_k from the A fragments the warps load for the
    // tensor cores (no extra shared-memory reads of A): the kWarpsN warps of a warp row hold the same A
    // fragments, so warp column n takes the MMA row blocks mt with mt % kWarpsN == n; in a block (m16n8k8)
    // lane (g, t) = (lane / 4, lane % 4) holds rows g and g + 8 at k = t and t + 4 of the k-group. `group`
    // runs between the MMAs of each k-group, so the next k-group's MMAs need not wait for it (run between
    // k-iterations instead, the same work cost 1.5x more time).
    // The encodings come from shared memory: warp 0 copies a k-iteration's 32 (one per lane) with cp.async
    // at the first k-group of the k-iteration kStages - 1 before it, into one of kBufs buffers: the
    // copy joins the mainloop's cp.async group of that k-iteration, which the mainloop waits for (and
    // follows with a barrier) before the k-iteration that reads them -- the same pipeline as the A and B tiles.
    static_assert(S::kK <= 32, "one encoding per lane of warp 0");
    constexpr int kGroups = ML::kWarpGemmIterations;
    constexpr int kAhead = ML::kStages - 1, kBufs = AbftStorage<K, ML>::kEncBufs;  // a power of two >= kStages + 1
    static_assert(kGroups * S::kInstK == S::kK, "k-groups of one MMA depth");
    auto copy_enc = [&](int it) {  // warp 0
      const int kbase = it == 0 ? 0 : r0 + (it - 1) * S::kK;
      const bool valid = it < total && lane < (it == 0 ? r0 : S::kK);
      if (lane < S::kK)
        cutlass::arch::cp_async_zfill<16>(&sc.enc[it & (kBufs - 1)][lane], enc + (valid ? kbase + lane : 0), valid);
    };
    int it_cur = 0;                                  // the k-iteration being computed
    const float4* enc_row = &sc.enc[0][lane & 3];    // its encodings in shared memory (lane's k = t)
    float rr[S::kRefRows], rrw[S::kRefRows], rr2[S::kRefRows];
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < S::kRefRows; ++i) rr[i] = rrw[i] = rr2[i] = 0.f;
    auto group = [&](int g, typename K::Operator::FragmentA const& fa) {
      if constexpr (kPre) return;
      if (g == 0) {
        if (warp == 0) copy_enc(it_cur + kAhead);
        enc_row = &sc.enc[it_cur & (kBufs - 1)][lane & 3];
      }
      const float4* e = enc_row + g * S::kInstK;
      const float4 e0 = e[0], e1 = e[4];  // k = t and t + 4 of the k-group
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < S::kRefRows / 2; ++j) {
        // MMA row block mt = warp_n + j * kWarpsN of the warp tile: its fragment {(g, t), (g + 8, t), (g, t + 4),
        // (g + 8, t + 4)}, picked by a warp-uniform switch (a register array indexed at run time would go
        // to local memory)
        float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
        CUTLASS_PRAGMA_UNROLL
        for (int n = 0; n < S::kWarpsN; ++n) {
          const int mt = n + j * S::kWarpsN;
          if (mt < S::Iter::kRow && warp_n == n) {
            a0 = static_cast<float>(fa[mt * 4 + 0]), a1 = static_cast<float>(fa[mt * 4 + 1]);
            a2 = static_cast<float>(fa[mt * 4 + 2]), a3 = static_cast<float>(fa[mt * 4 + 3]);
          }
        }
        const int i = 2 * j;
        rr[i] = fmaf(a0, e0.x, fmaf(a2, e1.x, rr[i]));
        rrw[i] = fmaf(a0, e0.y, fmaf(a2, e1.y, rrw[i]));
        rr2[i] = fmaf(a0 * a0, e0.z, fmaf(a2 * a2, e1.z, rr2[i]));
        rr[i + 1] = fmaf(a1, e0.x, fmaf(a3, e1.x, rr[i + 1]));
        rrw[i + 1] = fmaf(a1, e0.y, fmaf(a3, e1.y, rrw[i + 1]));
        rr2[i + 1] = fmaf(a1 * a1, e0.z, fmaf(a3 * a3, e1.z, rr2[i + 1]));
      }
      if (g == kGroups - 1) ++it_cur;
    };

    // verify every row of the tile after k-iteration `it`; correct located faults in `a`
    auto verify = [&](int it, Frag& a) {
      const int tid = fresh_tid();
      const int k_done = it + 1 >= total ? Kd : r0 + it * S::kK;
      const AbftRareArgs g{p.A, p.lda, enc, k_done, M, N, row0, col0, p.unit * (sqrtf(float(k_done)) + sqrt_cols + 1.f), p.fixed, rms_w,
                           p.online, !kInject || p.t.correct, attempt + 1 >= kMaxAttempts, p.t.counters, 0, p.t.gemm.ref_B.data(),
                           p.t.gemm.ref_B.stride(0)};
      const bool again = abft_verify<K, kPre, kRowA>(sc, a, g, ref_next, tid, [&](int warp_m, int warp_n, int lane) {
        if constexpr (!kPre) {
          // the reference rows: this lane's k share, over the quad's k, into shared memory
          CUTLASS_PRAGMA_UNROLL
          for (int mt = 0; mt < S::Iter::kRow; ++mt) {
            if (mt % S::kWarpsN != warp_n) continue;
            const int i = (mt / S::kWarpsN) * 2;
            CUTLASS_PRAGMA_UNROLL
            for (int h = 0; h < 2; ++h) {
              float x = rr[i + h], y = rrw[i + h], z = rr2[i + h];
              CUTLASS_PRAGMA_UNROLL
              for (int o = 1; o < 4; o <<= 1) {
                x += __shfl_xor_sync(0xffffffffu, x, o);
                y += __shfl_xor_sync(0xffffffffu, y, o);
                z += __shfl_xor_sync(0xffffffffu, z, o);
              }
              if ((lane & 3) == 0) sc.ref[warp_m * S::kWarpM + mt * S::kInstM + (lane >> 2) + 8 * h] = make_float4(x, y, z, 0.f);
            }
          }
        }
      });
      if (again) redo = true;  // (called only while redo is false)
    };

    ml.run(
        total, acc, its.A, its.B,
        [&] {  // the first kAhead k-iterations' encodings, synchronously
          if constexpr (!kPre) {
            for (int i = warp; i < kAhead; i += K::kThreads / 32) {
              const int kbase = i == 0 ? 0 : r0 + (i - 1) * S::kK;
              const bool valid = i < total && lane < (i == 0 ? r0 : S::kK);
              if (lane < S::kK) sc.enc[i & (kBufs - 1)][lane] = valid ? __ldg(enc + kbase + lane) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
            __syncthreads();
          }
        },
        // leave the pipelined loop at checkpoints and at a planned fault (block-uniform decisions)
        [&](int it, Frag(&)[1]) { return it == stop; },
        [&](int it, Frag(&a)[1]) {
          const int tid = fresh_tid();
          if constexpr (kInject) {
            const int i = sc.pend[0];
            if (attempt == 0 && i >= 0 && sc.pend[1] == it && p.t.faults[i].thread == tid) apply_fault<K>(p.t, a[0], i, tile, 0, tc.m(), tc.n(), 1);
          }
          if (it == next_checkpoint) {
            if (!redo) verify(it, a[0]);
            next_checkpoint = min(next_checkpoint + interval, total - 1);
            if constexpr (kPre) ref_next = ref_at(next_checkpoint);
          }
          stop = next_stop(it);
        },
        group);
    if (!redo) break;
    if (tid == 0) count_recomputed(p.t.counters);
    if (tid == 0) add_count(p.t.counters, &ftgen::FtCounters::corrected, 1u);  // by the recomputation (as gemm.abft_gemm_model counts it)
  }
  const float best = tid < S::kM ? sc.score[tid] : 0.f;
  if (best > 0.f) ftgen::record_score(p.t.counters, static_cast<double>(best));
  epilogue<K>(st.ss.epilogue, p.t.gemm, p.t.gemm.params_D, p.t.gemm.ref_D.data(), acc[0], tc.m(), tc.n(), tid, warp, lane);
}

// ---- ref_checksums: prepass with one checkpoint per tile (interval >= the tile's k-iterations) ------------------
// The verification then comes after the main loop, and the main loop is the unprotected one: CUTLASS's
// MmaMultistage without a hook (the static SASS of the aligned tf32x3 128x128x32 kernel: 768 instructions per
// k-iteration and warp, as unprotected, against 817 / 820 for abft_kernel, whose loop leaves for the verification).
// The accumulators are staged in the main loop's shared memory (idle once the loop is drained) and verified there by
// a call (abft_verify_staged), so no register, predicate or address of the verification is live in the loop. The
// inject build runs a tile with a planned fault in two pipelines, split after the fault's k-iteration (the other
// tiles in one, as the clean build).

// Verify the staged tile (kPre, one checkpoint) and correct it in place; true: recompute the tile. Pass 1 takes a thread
// per row and warp column (the same 32-column parts whose sums abft_verify forms from the registers), in a rolled
// loop, so the call needs few registers (a call holding the accumulators in registers cost the main loop of the
// caller about 60 instructions per k-iteration: ptxas allocates across the call); the rare path is a call of its own.
// The arguments are a few scalars (the parameters by value went through the stack: 4% of the kernel's time at 4096^3);
// r, r' of the units (rows of the kStrips checksum strips) come from shared memory (sc.pre, fetched with the tile's first
// k-tiles).
template <class K, bool kRowA, int kStrips, class Sc>
__device__ __noinline__ bool abft_verify_staged(Sc& sc, typename K::ElementAcc* tilebuf, const AbftRareArgs g) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  const int tid = fresh_tid(), N = g.N;
  AbftStagedRows<K, kStrips> rows{tilebuf};
  rows.each_part(tid, [&](int rl, int w, const typename K::ElementAcc* x, int c0) {
    const int l0 = ftgen_rules::abft_strip_local(c0, St::kCols);  // (the weights of the part's strip)
    float s1 = 0.f, sw = 0.f, sq = 0.f, mx = 0.f;
#pragma unroll 4
    for (int j = 0; j < S::kWarpN; ++j) {
      const float v = g.col0 + c0 + j < N ? static_cast<float>(x[j]) : 0.f;
      s1 += v;
      sw = fmaf(float(l0 + j + 1), v, sw);
      sq = fmaf(v, v, sq);
      mx = fmaxf(mx, fabsf(v));
    }
    sc.sums[w][rl] = make_float2(s1, sw);
    sc.norm[w][rl] = make_float2(sq, mx);
  });
  __syncthreads();
  abft_pass1_rows<K, true, kStrips>(sc, g, [&](int u) { return sc.pre[u]; }, tid);
  if (__syncthreads_count(abft_any_unit<St::kUnits, K::kThreads>(tid, [&](int u) { return sc.col[u] == -3; })) == 0) return false;
  return abft_rare_outcome(abft_rare<K, true, kRowA>(sc, rows, g), g.counters);
}

// The rare path's arguments for tile (tm, tn) verified after the whole k (abft_once_kernel, abft_check_kernel), its
// kStrips checksum strips of kCols columns each: the threshold unit lambda u (sqrt(k) + sqrt(kCols) + 1), the weights
// 1..kCols, the encodings of the tile's first strip (the next strip's k further on).
template <class K, bool kInject, int kStrips = 1>
CUTLASS_DEVICE AbftRareArgs abft_once_args(const AbftParams<K>& p, int tm, int tn, bool final_attempt) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  const int M = p.t.gemm.problem_size.m(), N = p.t.gemm.problem_size.n(), Kd = p.t.gemm.problem_size.k();
  const float unit = p.unit * (sqrtf(float(Kd)) + sqrtf(float(St::kCols)) + 1.f);
  const float rms_w = sqrtf((St::kCols + 1.f) * (2.f * St::kCols + 1.f) / 6.f);
  return AbftRareArgs{p.A, p.lda, p.enc + static_cast<long long>(tn) * kStrips * Kd, Kd, M, N, tm * S::kM, tn * S::kN, unit, p.fixed,
                      rms_w, p.online, !kInject || p.t.correct, final_attempt, p.t.counters, Kd, p.t.gemm.ref_B.data(),
                      p.t.gemm.ref_B.stride(0), p.band};
}

// The k bound of a fault planned at k-iteration `step`: the partial sum it hits covers k < this (the residue k-tile
// first, as the main loop's order)
template <class K>
CUTLASS_DEVICE int abft_fault_kend(const AbftParams<K>& p, int step) {
  const int Kd = p.t.gemm.problem_size.k(), total = p.t.total_k;
  return step + 1 < total ? k_offset(step + 1, Kd, K::Shape::kK, total) : Kd;
}

// ref_checksums: concurrent, inject builds: the error each planned fault puts into its accumulator, computed before the
// GEMM (on its stream, in place of the GEMM's own block working it out after its main loop: a block-wide dot product
// whose strided reads of B's column, 4 bytes a k row, held the tile's SM ~8 us, and whose code in the GEMM kernel cost
// its clean launches too). Grid (faults, kFaultParts): block (i, c) sums part c of k < the fault's bound of A's row and
// B's column in double; the last part to finish adds the parts in k order and writes fault i's record: the element,
// its partial sum `before` (rounded to the accumulator type) and `after` (the bit flipped, or the offset added: for
// an offset the value does not matter and before is 0, as apply_fault's). The GEMM then starts the faulty
// accumulator at after - before instead of zero (abft_once_kernel, kDefer): the element holds partial sum + error from
// k-iteration `step` on, as with the fault at that step (the earlier k-iterations have no checkpoint to see it), and
// the error reaches the final value, as the fault's would. `done`: a counter per fault, zero on entry.
static int const kFaultParts = 16;
template <class K, bool kRowA, bool kInject>
__global__ void __launch_bounds__(256) abft_fault_error_kernel(AbftParams<K> p, int* done, double* parts) {
  static_assert(kInject, "inject builds only");
  using E = typename K::ElementAcc;
  const int i = blockIdx.x, c = blockIdx.y, t = threadIdx.x;
  const ftgen::FaultSpec f = p.t.faults[i];
  const int tm = f.block / p.t.tiles_n, tn = f.block % p.t.tiles_n;
  long long gi, gj;
  fault_element<K>(f.thread, f.elem, tm, tn, gi, gj);
  double part = 0.0;
  if (f.kind != ftgen::kOffset && gi < p.t.gemm.problem_size.m() && gj < p.t.gemm.problem_size.n()) {
    const int kend = abft_fault_kend(p, f.step);
    const int k0 = static_cast<int>(static_cast<long long>(kend) * c / kFaultParts);
    const int k1 = static_cast<int>(static_cast<long long>(kend) * (c + 1) / kFaultParts);
    part = abft_ab_dot<K, kRowA>(p, static_cast<int>(gi), static_cast<int>(gj), k0 + t, k1, 256);
  }
  __shared__ double red[8];
  __shared__ int last;
  part = abft_lanes_reduce<32>(part, [](double a, double b) { return a + b; });
  if (t % 32 == 0) red[t / 32] = part;
  __syncthreads();
  if (t != 0) return;
  part = 0.0;
  for (int w = 0; w < 8; ++w) part += red[w];
  parts[static_cast<size_t>(i) * kFaultParts + c] = part;
  __threadfence();
  last = atomicAdd(done + i, 1) == kFaultParts - 1;
  if (!last) return;
  __threadfence();
  double sum = 0.0;
  for (int q = 0; q < kFaultParts; ++q) sum += __ldcg(parts + static_cast<size_t>(i) * kFaultParts + q);
  if constexpr (kInject) p.t.records[i] = planned_record<E>(f, gi, gj, sum);
}

template <class K, bool kInject, bool kRowA, bool kDeferRare, int kStrips, class Sc>
CUTLASS_DEVICE void abft_check_tile(const AbftParams<K>& p, Sc& sc, int tile);

// kRedo = false: a block per tile (the grid of the unprotected kernel); a tile whose verification asks for a
// recomputation (a detection not located, or correct: detect) is not written but listed in p.redo. kRedo = true
// (launched after it, a block per SM): the listed tiles, recomputed (at most kMaxAttempts computations in all) and
// written. Kept apart so the first kernel's main loop is not nested in a loop of recomputations (that cost it 20
// instructions per k-iteration and spills).
// kStrips: the checksum strips per tile (AbftStrips; 1: the tile's tb_n columns; ref_checksums: concurrent: a strip per
// warp column). kDefer stores its sums with the strips' weights and keeps the scratch of one strip (its shared memory is
// the unprotected kernel's main loop's plus that: a larger one shrinks the L1 carve-out).
template <class K, bool kInject, bool kRowA, bool kRedo, bool kDefer = false, int kStrips = 1>
__global__ void __launch_bounds__(K::kThreads) abft_once_kernel(AbftParams<K> p) {
  static_assert(!(kRedo && kDefer), "the recomputation verifies in the kernel");
  using ML = Mainloop<typename K::Mma, 1, cutlass::gemm::SharedMemoryClearOption::kNone>;
  using Frag = typename K::FragmentC;
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  using Sx = AbftStrips<K, kDefer ? 1 : kStrips>;  // the units of the scratch (kDefer: scores only, none recorded)
  using E = typename K::ElementAcc;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& st = *reinterpret_cast<AbftStorage<K, ML, Sx::kStrips>*>(smem_raw);
  auto& sc = st.sc;
  static_assert(sizeof(st.ss) >= sizeof(E) * S::kM * AbftStagedRows<K>::kPitch, "the staged tile fits the main loop's shared memory");
  E* const tilebuf = reinterpret_cast<E*>(&st.ss);
  const int tid = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = threadIdx.x % 32;
  const int total = p.t.total_k;
  Frag acc[1];
  // r, r' of tile tc's units (rows of its kStrips strips) at its (only) checkpoint into sc.pre: cp.async, in the main
  // loop's first group of copies
  auto fetch_ref = [&](cutlass::gemm::GemmCoord tc) {
    const int M = p.t.gemm.problem_size.m();
    abft_each_unit<Sx::kUnits, K::kThreads>(fresh_tid(), [&](int u) {
      const int row = tc.m() * S::kM + Sx::row(u);
      const float2* ref = p.ref + ((static_cast<long long>(tc.n()) * Sx::kStrips + Sx::strip(u)) * p.chunks + p.chunks - 1) * M;
      cutlass::arch::cp_async_zfill<8>(&sc.pre[u], ref + (row < M ? row : 0), row < M);
    });
  };
  // k-iterations [it0, it0 + count) of tile tc into acc, from fresh iterators through a fresh pipeline (drained at
  // the end: the shared memory is free afterwards)
  auto run = [&](cutlass::gemm::GemmCoord tc, int it0, int count) {
    Iterators<K> its(p.t.gemm, tc.m(), tc.n(), k_offset(it0, p.t.gemm.problem_size.k(), S::kK, total), tid);
    typename K::Mma mma(st.ss.main_loop, tid, warp, lane);  // CUTLASS's own (its staged sums added a k-group late)
    mma(count, acc[0], its.A, its.B, acc[0]);
  };
  // verify acc as tile tc's after computation `attempt` (staged, a call, reloaded); true: recompute the tile
  auto verify = [&](cutlass::gemm::GemmCoord tc, int attempt) {
    AbftStagedRows<K>::each_of_fragment([&](int e, int x) { tilebuf[x] = acc[0][e]; });
    __syncthreads();
    const bool redo = abft_verify_staged<K, kRowA, Sx::kStrips>(sc, tilebuf, abft_once_args<K, kInject, Sx::kStrips>(p, tc.m(), tc.n(), attempt + 1 >= kMaxAttempts));
    __syncthreads();
    AbftStagedRows<K>::each_of_fragment([&](int e, int x) { acc[0][e] = tilebuf[x]; });
    __syncthreads();  // the shared memory goes back to the main loop or the epilogue
    return redo;
  };
  // kDefer: the tile's pass-1 sums, per row and warp column (the weighted sum with the weights of the kStrips strips), to
  // p.obs (abft_check_kernel decides after the kernel)
  auto defer_sums = [&](cutlass::gemm::GemmCoord tc) {
    const int t = fresh_tid(), w = t / 32, M = p.t.gemm.problem_size.m(), N = p.t.gemm.problem_size.n();
    const int warp_n = w / S::kWarpsM, row0 = tc.m() * S::kM, col0 = tc.n() * S::kN;
    float4* const obs = p.obs + (static_cast<long long>(tc.n()) * S::kWarpsN + warp_n) * M + row0;
    abft_frag_sums<K, true, St::kCols>(acc[0], col0 + S::kN <= N, col0, N, t % 32, w % S::kWarpsM, warp_n, [&](int rl, float s1, float sw, float sq, float mx) {
      if (row0 + rl < M) obs[rl] = make_float4(s1, sw, sq, mx);
    });
  };
  // This tile's planned fault (inject builds) after the main loop: a fault in an accumulator at k-iteration `step` passes
  // its error unchanged to the element's final value (the later k-iterations only add to it), so the error is added to
  // the final accumulator: a bit flip's, that of the bit flipped in the element's partial sum after k-iteration `step`,
  // which the block recomputes from A and B in double. (Applying it at `step` split the main loop in two calls, two
  // copies of its code: 1-3% of the kernel's time under ncu, clean launches included; one copy in a loop run twice,
  // 5%.) Block-uniform (every thread of a tile with a planned fault).
  auto ab_dot = [&](int gi, int gj, int k0, int k1, int stride) { return abft_ab_dot<K, kRowA>(p, gi, gj, k0, k1, stride); };
  auto planned_partial = [&](cutlass::gemm::GemmCoord tc, const auto& f, int step) {  // (generic: instantiated by inject builds only)
    double part = 0.0;
    if (f.kind == ftgen::kOffset) return part;  // (an offset's error does not depend on the value)
    const int t = fresh_tid();
    long long gi, gj;
    fault_element<K>(f.thread, f.elem, tc.m(), tc.n(), gi, gj);
    if (gi < p.t.gemm.problem_size.m() && gj < p.t.gemm.problem_size.n())
      part = ab_dot(static_cast<int>(gi), static_cast<int>(gj), t, abft_fault_kend(p, step), K::kThreads);
    part = abft_lanes_reduce<32>(part, [](double a, double b) { return a + b; });
    if (t % 32 == 0) sc.red[t / 32][0] = part;
    __syncthreads();
    part = 0.0;
    for (int w = 0; w < K::kThreads / 32; ++w) part += sc.red[w][0];
    __syncthreads();  // (sc.red is the rare path's too)
    return part;
  };
  auto apply_planned = [&](cutlass::gemm::GemmCoord tc, int tile, int step) {
    if constexpr (kInject) {
      const int i = p.t.fault_by_block[tile];
      const double part = planned_partial(tc, p.t.faults[i], step);
      if (fresh_tid() == p.t.faults[i].thread) apply_fault<K>(p.t, acc[0], i, tile, 0, tc.m(), tc.n(), 1, &part);
    }
  };
  // kDefer (inject builds): this tile's planned fault as the start of its accumulator, the error worked out before the
  // launch (abft_fault_error_kernel: the fault's record holds the partial sum and its faulty value); the main loop then
  // adds the products to it, and the element carries the error from k-iteration `step` on
  auto seed_planned = [&](int tile) {
    if constexpr (kInject) {
      const int i = __ldg(p.t.fault_by_block + tile);
      const ftgen::FaultSpec& f = p.t.faults[i];
      if (fresh_tid() == f.thread) {
        ftgen::FaultRecord* const r = p.t.records + i;
        const E err = static_cast<E>(r->after) - static_cast<E>(r->before);
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < Frag::kElements; ++e) acc[0][e] = e == f.elem ? err : acc[0][e];
        r->applied = 1;
        add_count(p.t.counters, &ftgen::FtCounters::injected, 1u);
      }
    }
  };
  // one computation of tile tc (and the planned fault at k-iteration `step`, if any) and its verification (kDefer: its
  // sums stored); true: recompute it
  auto attempt_once = [&](cutlass::gemm::GemmCoord tc, int tile, int attempt, int step) {
    fill_opaque(acc[0], zero_of(p.t, 0));
    if constexpr (!kDefer) fetch_ref(tc);
    if constexpr (kDefer) {
      if (step >= 0 && step < total) seed_planned(tile);  // (inject builds)
    }
    run(tc, 0, total);
    if constexpr (!kDefer) {
      if (step >= 0 && step < total) apply_planned(tc, tile, step);  // (inject builds)
    }
    if constexpr (kDefer) {
      defer_sums(tc);
      return false;
    } else {
      return verify(tc, attempt);
    }
  };
  auto count_recomputation = [&] {
    if (fresh_tid() == 0) {
      count_recomputed(p.t.counters);
      add_count(p.t.counters, &ftgen::FtCounters::corrected, 1u);  // by the recomputation (as gemm.abft_gemm_model counts it)
    }
  };
  // ref_checksums: concurrent: the units (rows of a checksum strip: id = tile kUnits + unit) abft_check_kernel listed, each
  // recomputed from A and B in double and written to C (alpha x the row of the strip; beta = 0 on this path), split along
  // k into `parts` blocks: a thread per column and k residue, the parts' partial rows to p.row_part, added up in k order
  // by part 0 once all are stored (a cooperative launch). A unit costs 2 kCols k products and reads its strip of B once,
  // against a tile's 2 tb_m tb_n k. A suspect (marked kAbftSuspectId) also sums |a b| per element, and part 0 counts it
  // detected (and corrected by the recomputation) only where an element differed from its recomputation beyond
  // p.elem_tol of that sum (ftgen_rules::abft_element_differs); otherwise it counts the recheck (FtCounters::
  // family_counter, the bench's `rechecked`).
  auto redo_rows = [&] {
    const int listed = min(__ldcg(p.rows_redo), p.rows_cap);
    if (listed == 0) return;
    constexpr int kC = St::kCols;
    constexpr int kMaxParts = 32, kRes = K::kThreads / kC;  // parts per unit (at most); k residues per column
    static_assert(K::kThreads % kC == 0, "whole columns per thread set");
    const int parts = max(1, min(kMaxParts, static_cast<int>(gridDim.x) / listed));
    const int M = p.t.gemm.problem_size.m(), N = p.t.gemm.problem_size.n(), Kd = p.t.gemm.problem_size.k();
    const long long ldc = p.t.gemm.ref_D.stride(0);
    const double alpha = static_cast<double>(p.t.gemm.output_op.alpha);
    int* const stored = p.rows_redo + 1 + p.rows_cap;
    double* const red = reinterpret_cast<double*>(tilebuf);  // (the main loop's shared memory, free here): sums, then |.| sums
    for (int item = blockIdx.x; item < listed * parts; item += gridDim.x) {
      const int j = item / parts, c = item % parts, entry = __ldcg(p.rows_redo + 1 + j);
      if (entry < 0) continue;  // (block-uniform: an unused slot)
      const bool sus = (entry & kAbftSuspectId) != 0;  // (block-uniform)
      const int id = entry & (kAbftSuspectId - 1);
      const int tile = id / St::kUnits, u = id % St::kUnits, gi = (tile / p.t.tiles_n) * S::kM + St::row(u);
      const int col0 = (tile % p.t.tiles_n) * S::kN + ftgen_rules::abft_strip_column(St::strip(u), kC, 0);  // the strip's first column
      const int t = fresh_tid(), cl = t % kC, res = t / kC, gj = col0 + cl;
      const int k0 = static_cast<int>(static_cast<long long>(Kd) * c / parts), k1 = static_cast<int>(static_cast<long long>(Kd) * (c + 1) / parts);
      double s = 0.0, mag = 0.0;
      if (gi < M && gj < N) {
        s = sus ? abft_ab_dot<K, kRowA, 16, true>(p, gi, gj, k0 + res, k1, kRes, &mag) : ab_dot(gi, gj, k0 + res, k1, kRes);
      }
      red[t] = s;
      red[K::kThreads + t] = mag;
      __syncthreads();
      if (res == 0) {
        for (int q = 1; q < kRes; ++q) s += red[q * kC + cl], mag += red[K::kThreads + q * kC + cl];
        p.row_part[(static_cast<size_t>(item) * kC + cl) * 2] = s;
        p.row_part[(static_cast<size_t>(item) * kC + cl) * 2 + 1] = mag;
      }
      __threadfence();
      __syncthreads();
      if (t == 0) atomicAdd(stored + j, 1);
      if (c == 0) {  // part 0 (block-uniform): the row once every part is stored
        if (t == 0)
          while (*reinterpret_cast<volatile int*>(stored + j) < parts) __nanosleep(64);
        __syncthreads();
        __threadfence();
        bool differs = false;
        if (res == 0 && gi < M && gj < N) {
          double v = 0.0, w = 0.0;
          const double* const prow = p.row_part + (static_cast<size_t>(j) * parts * kC + cl) * 2;
          for (int q0 = 0; q0 < parts; q0 += 8) {  // (loads in flight 8 at a time, added in k order)
            double2 b[8];
            CUTLASS_PRAGMA_UNROLL
            for (int x = 0; x < 8; ++x)
              if (q0 + x < parts) b[x] = __ldcg(reinterpret_cast<const double2*>(prow + static_cast<size_t>(q0 + x) * kC * 2));
            CUTLASS_PRAGMA_UNROLL
            for (int x = 0; x < 8; ++x)
              if (q0 + x < parts) v += b[x].x, w += b[x].y;
          }
          typename K::ElementC& out = p.t.gemm.ref_D.data()[gi * ldc + gj];
          if (sus) differs = ftgen_rules::abft_element_differs(static_cast<double>(out) / alpha, v, w, p.elem_tol);
          out = static_cast<typename K::ElementC>(alpha * v);
        }
        const bool any = __syncthreads_or(differs) != 0;
        if (!sus || any) {
          if (sus && t == 0) add_count(p.t.counters, &ftgen::FtCounters::detected, 1u);
          count_recomputation();
        } else if (t == 0) {
          add_count(p.t.counters, &ftgen::FtCounters::family_counter, 1u);
        }
      }
      __syncthreads();  // (red is reused by the block's next item)
    }
  };
  auto finish = [&](cutlass::gemm::GemmCoord tc) {  // the tile's largest score, then its output
    const int t = fresh_tid();
    float best = 0.f;
    abft_each_unit<Sx::kUnits, K::kThreads>(t, [&](int u) { best = fmaxf(best, sc.score[u]); });
    if (best > 0.f) ftgen::record_score(p.t.counters, static_cast<double>(best));
    epilogue<K>(st.ss.epilogue, p.t.gemm, p.t.gemm.params_D, p.t.gemm.ref_D.data(), acc[0], tc.m(), tc.n(), t, t / 32, t % 32);
  };
  if constexpr (!kRedo) {
    typename K::Swizzle swizzle;
    const cutlass::gemm::GemmCoord tc = swizzle.get_tile_offset(p.t.gemm.swizzle_log_tile);
    if (tc.m() >= p.t.tiles_m || tc.n() >= p.t.tiles_n) return;
    const int tile = tc.m() * p.t.tiles_n + tc.n();
    // the k-iteration of this tile's planned fault (inject builds), read by every thread (the same address: no barrier)
    int step = -1;
    if constexpr (kInject) {
      const int i = p.t.fault_by_block != nullptr ? __ldg(p.t.fault_by_block + tile) : -1;
      if (i >= 0) step = __ldg(&p.t.faults[i].step);
    }
    abft_each_unit<Sx::kUnits, K::kThreads>(tid, [&](int u) { sc.score[u] = 0.f; });
    if (attempt_once(tc, tile, 0, step)) {  // block-uniform
      if (fresh_tid() == 0) p.redo[1 + atomicAdd(p.redo, 1)] = tile;
      return;
    }
    finish(tc);
  } else {
    // the listed tiles, each split along k into `parts` of about total / parts k-iterations over as many blocks (a
    // recomputation then costs about total / parts k-iterations after the first launch, not a whole tile). The parts
    // of a tile wait for each other (a cooperative launch: every block is resident), add the partial accumulators up
    // in k order, each over its 1/parts of the tile, and the last one to finish verifies and writes the tile.
    const int tiles = p.t.tiles_m * p.t.tiles_n;
    if (p.flagged != nullptr) {  // ref_checksums: concurrent: first the rare path of each tile the check flagged
      const int nf = __ldcg(p.flagged);
      if (nf > 0) {  // (the same in every block)
        for (int j = blockIdx.x; j < nf; j += gridDim.x) {
          abft_check_tile<K, kInject, kRowA, false, kStrips>(p, sc, __ldcg(p.flagged + 1 + j));
          __syncthreads();
        }
        // then, once every block's listing is stored, the recomputations: a grid barrier (a cooperative launch: every
        // block is resident)
        __threadfence();
        __syncthreads();
        if (fresh_tid() == 0) {
          int* const bar = p.flagged + 1 + tiles;
          atomicAdd(bar, 1);
          while (*reinterpret_cast<volatile int*>(bar) < static_cast<int>(gridDim.x)) __nanosleep(32);
        }
        __syncthreads();
        __threadfence();
      }
    }
    if (p.rows_redo != nullptr) redo_rows();
    const int listed = __ldcg(p.redo);
    if (listed == 0) return;
    const int parts = max(1, min(total, static_cast<int>(gridDim.x) / listed));
    int* const stored = p.redo + 1 + tiles;  // per list entry: its parts stored
    int* const summed = stored + tiles;      // per list entry: its parts' slices summed
    for (int item = blockIdx.x; item < listed * parts; item += gridDim.x) {
      const int j = item / parts, c = item % parts, tile = __ldcg(p.redo + 1 + j);
      const cutlass::gemm::GemmCoord tc(tile / p.t.tiles_n, tile % p.t.tiles_n, 0);
      const int it0 = static_cast<int>(static_cast<long long>(total) * c / parts);
      const int it1 = static_cast<int>(static_cast<long long>(total) * (c + 1) / parts);
      fill_opaque(acc[0], zero_of(p.t, 0));
      fetch_ref(tc);
      run(tc, it0, it1 - it0);
      if (parts > 1) {  // block-uniform
        E* const slots = p.redo_part + static_cast<size_t>(j) * parts * K::kTileElems;
        store_frag<K>(slots + static_cast<size_t>(c) * K::kTileElems, acc[0], fresh_tid());
        __threadfence();
        __syncthreads();
        if (fresh_tid() == 0) {
          atomicAdd(stored + j, 1);
          while (*reinterpret_cast<volatile int*>(stored + j) < parts) __nanosleep(64);
        }
        __syncthreads();
        __threadfence();
        // this part's slice of the tile: the sum over the parts, in k order, into slot 0
        constexpr int kVecs = K::kTileElems * int(sizeof(E)) / 16;
        uint4* const v = reinterpret_cast<uint4*>(slots);
        // (the parts' loads kBatch at a time, all in flight before they are added in order: one at a time, a slice
        // of a tile split 128 ways took 128 dependent trips to L2)
        constexpr int kBatch = 16;
        for (int x = kVecs * c / parts + fresh_tid(); x < kVecs * (c + 1) / parts; x += K::kThreads) {
          uint4 a = __ldcg(v + x);
          for (int q0 = 1; q0 < parts; q0 += kBatch) {
            uint4 b[kBatch];
            CUTLASS_PRAGMA_UNROLL
            for (int u = 0; u < kBatch; ++u)
              if (q0 + u < parts) b[u] = __ldcg(v + static_cast<size_t>(q0 + u) * kVecs + x);
            CUTLASS_PRAGMA_UNROLL
            for (int u = 0; u < kBatch; ++u) {
              if (q0 + u >= parts) break;
              E ea[16 / sizeof(E)], eb[16 / sizeof(E)];
              memcpy(ea, &a, 16);
              memcpy(eb, &b[u], 16);
              CUTLASS_PRAGMA_UNROLL
              for (int t = 0; t < int(16 / sizeof(E)); ++t) ea[t] += eb[t];
              memcpy(&a, ea, 16);
            }
          }
          v[x] = a;
        }
        __threadfence();
        __syncthreads();
        if (fresh_tid() == 0) sc.pend[0] = atomicAdd(summed + j, 1);
        __syncthreads();
        if (sc.pend[0] != parts - 1) continue;  // another part verifies and writes the tile
        __threadfence();
        load_frag<K>(slots, acc[0], fresh_tid());
      }
      count_recomputation();
      abft_each_unit<Sx::kUnits, K::kThreads>(fresh_tid(), [&](int u) { sc.score[u] = 0.f; });
      bool redo = verify(tc, 1);
      for (int attempt = 2; redo; ++attempt) {  // (a second detection: the whole tile in this block)
        count_recomputation();
        redo = attempt_once(tc, tile, attempt, -1);
      }
      finish(tc);
      __syncthreads();  // the epilogue's shared memory, before the next item's main loop
    }
  }
}

// ---- ref_checksums: concurrent: the check after the GEMM -----------------------------------------------------------
// The GEMM (abft_once_kernel<.., kDefer = true>) runs while the pre-passes compute r, r' on another stream; it stores
// each tile's pass-1 sums per row and warp column (p.obs) beside C. abft_check_tile checks one tile, unit by unit (a row of
// one of its kStrips checksum strips: the concurrent design checks each row of each warp column against the reference of
// that warp column): pass 1 against r, r' as abft_verify_staged's; a tile with a flagged unit is (kDeferRare:
// abft_check_kernel, after both, a block per tile) listed in p.flagged, or (abft_once_kernel's second launch, first)
// taken through the same rare path on the tile in C (AbftGlobalRows: located elements corrected in C); a unit that is
// not located (every detected unit with correct: detect) is listed in p.rows_redo, which the second launch then
// recomputes from A and B (its row of its strip; a tile only where that list is full, in p.redo). (beta = 0 and alpha
// != 0 only: C then holds alpha x the accumulators and nothing of its old value is needed.)
template <class K, bool kInject, bool kRowA, bool kDeferRare, int kStrips, class Sc>
CUTLASS_DEVICE void abft_check_tile(const AbftParams<K>& p, Sc& sc, int tile) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  const int M = p.t.gemm.problem_size.m(), tiles_n = p.t.tiles_n;
  const int tid = threadIdx.x, tm = tile / tiles_n, tn = tile % tiles_n;
  const int row0 = tm * S::kM, col0 = tn * S::kN, row = row0 + tid;
  if (tid < S::kM) {
    const bool in = row < M;
    CUTLASS_PRAGMA_UNROLL
    for (int w = 0; w < S::kWarpsN; ++w) {
      const float4 o = in ? __ldg(p.obs + (static_cast<long long>(tn) * S::kWarpsN + w) * M + row) : make_float4(0.f, 0.f, 0.f, 0.f);
      sc.sums[w][tid] = make_float2(o.x, o.y);
      sc.norm[w][tid] = make_float2(o.z, o.w);
    }
  }
  // r, r' of each unit (row and strip: the reference of strip tn kStrips + s)
  abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int u) {
    const int r = row0 + St::row(u);
    sc.pre[u] = r < M ? __ldg(p.ref + ((static_cast<long long>(tn) * kStrips + St::strip(u)) * p.chunks + p.chunks - 1) * M + r)
                      : make_float2(0.f, 0.f);
    sc.score[u] = 0.f;
  });
  __syncthreads();
  const AbftRareArgs g = abft_once_args<K, kInject, kStrips>(p, tm, tn, kMaxAttempts <= 1);
  abft_pass1_rows<K, true, kStrips>(sc, g, [&](int u) { return sc.pre[u]; }, tid);
  if (__syncthreads_count(abft_any_unit<St::kUnits, K::kThreads>(tid, [&](int u) { return sc.col[u] == -3; })) != 0) {  // (rare)
    if constexpr (kDeferRare) {  // listed for the second launch (which records the tile's scores)
      if (tid == 0) p.flagged[1 + atomicAdd(p.flagged, 1)] = tile;
      return;
    } else {
      const long long ldd = p.t.gemm.ref_D.stride(0);
      AbftGlobalRows<K, kStrips> rows{p.t.gemm.ref_D.data() + row0 * ldd + col0, ldd, min(S::kM, M - row0), p.t.gemm.output_op.alpha};
      bool tile_redo = abft_rare_outcome(abft_rare<K, true, kRowA>(sc, rows, g), g.counters);  // block-uniform
      // the units to recompute (a row of a strip: inside C, and not located; every detected unit with correct: detect),
      // listed for the second launch, which recomputes each from A and B; where the list is full, the tile is
      // recomputed instead. The suspects (the band's units) are listed too, marked (kAbftSuspectId): the second launch
      // recomputes them and counts a detection only where an element differed; where the list is full, they are left
      // as they are (the checksum passed them)
      auto inside = [&](int u) { return u < St::kUnits && row0 + St::row(u) < M; };
      auto redo_unit = [&](int u) {
        return inside(u) && (sc.col[u] == -2 || (!g.online && sc.col[u] != -1 && sc.col[u] != ftgen_rules::kAbftSuspect));
      };
      auto suspect_unit = [&](int u) { return inside(u) && sc.col[u] == ftgen_rules::kAbftSuspect && tile < kAbftSuspectId / St::kUnits; };
      int n = 0, ns = 0;  // (block-uniform)
      for (int u0 = 0; u0 < St::kUnits; u0 += K::kThreads) {
        n += __syncthreads_count(g.correct && !g.final_attempt && redo_unit(u0 + tid));
        ns += __syncthreads_count(g.correct && !g.final_attempt && suspect_unit(u0 + tid));
      }
      if (!tile_redo && n + ns > 0) {
        if (tid == 0) sc.pend[0] = atomicAdd(p.rows_redo, n + ns);
        __syncthreads();
        const int base = sc.pend[0];
        const bool all = base + n + ns <= p.rows_cap;
        if (all || (n == 0 && base < p.rows_cap)) {  // (the suspects alone, as many as fit)
          if (tid < 32) {  // the units in order, by warp 0, 32 at a time (ballots)
            const int lane = tid;
            for (int u0 = 0, x = base; u0 < St::kUnits; u0 += 32) {
              const int u = u0 + lane;
              const bool sus = suspect_unit(u), want = redo_unit(u) || sus;
              const unsigned m = __ballot_sync(0xffffffffu, want);
              const int at = x + __popc(m & ((1u << lane) - 1u));
              if (want && at < p.rows_cap) p.rows_redo[1 + at] = (tile * St::kUnits + u) | (sus ? kAbftSuspectId : 0);
              x += __popc(m);
            }
          }
        } else {
          for (int x = base + tid; x < min(base + n + ns, p.rows_cap); x += K::kThreads) p.rows_redo[1 + x] = -1;  // (unused slots)
          tile_redo = n > 0;
        }
      }
      if (tile_redo) {
        if (tid == 0) p.redo[1 + atomicAdd(p.redo, 1)] = tile;
        return;
      }
    }
  }
  float best = 0.f;
  abft_each_unit<St::kUnits, K::kThreads>(tid, [&](int u) { best = fmaxf(best, sc.score[u]); });
  if (best > 0.f) ftgen::record_score(g.counters, static_cast<double>(best));
}

// abft_check_tile for every tile, a block each; the rare path of a flagged tile is left to the second launch
// (abft_once_kernel<.., kRedo>): here its reads of A, the encodings and C queued behind this kernel's reads of the sums
// (a round trip 2-8 us while the other blocks ran, the tile's rare path ~15 us, the kernel's end waiting for it)
template <class K, bool kInject, bool kRowA, int kStrips = 1>
__global__ void __launch_bounds__(K::kThreads, 8) abft_check_kernel(AbftParams<K> p) {
  __shared__ AbftPass1Scratch<K, kStrips> sc;
  abft_check_tile<K, kInject, kRowA, true, kStrips>(p, sc, blockIdx.x);
}

// ---- ref_checksums: concurrent around a GEMM of another backend: the pass-1 sums from C -------------------------------
// The cutlass90 backend's sm90 GEMM writes C = alpha A B (beta = 0) and nothing else; abft_obs_kernel, after it on its
// stream, forms from C what abft_once_kernel<.., kDefer> stores from its accumulators (defer_sums: abft_frag_sums with
// the strips' weights), in the layout abft_check_tile reads: per row and warp column of K's tiles (kWarpN columns; the
// warp column w of tile column tn is g = tn kWarpsN + w over the tiles' columns) {sum c, sum w c, sum c^2, max |c|} at
// p.obs[g M + row], c = C / alpha (the accumulators, as AbftGlobalRows reads them back), w = the column's place in its
// checksum strip (kCols columns, ftgen_rules::abft_strip_local) + 1, the columns past N counting 0. A thread takes
// kObsCols consecutive columns of a row (one 16-byte load where C allows it), the kWarpN / kObsCols threads of a warp
// column add theirs up by shuffles; a warp is one row of one tile (x runs along the columns, 32 threads per tile row).
// Inject builds: a planned fault in an accumulator at k-iteration `step` reaches the element's final value unchanged
// (the later k-iterations only add to it), so its error -- the record's after - before, worked out before the GEMM by
// abft_fault_error_kernel -- is added to the element, alpha x it to C, before the sums, and written back to C: C then
// holds what the GEMM would have stored with the fault (abft_once_kernel<.., kDefer> starts the accumulator at the error
// instead). The thread of the tile's first element marks the fault applied and counts it (also where the faulty
// element lies past C, as the kDefer kernel does).
constexpr int kObsCols = 4;
// The sums {sum c, sum w c, sum c^2, max |c|} of kObsCols consecutive elements x of a row of C from tile column cl on, c =
// x / alpha, w = the column's place in its checksum strip of kCols columns + 1 (host and device: the arithmetic the
// tests compile for the host, tests/test_cutlass90_abft.py)
template <int kCols>
CUTLASS_HOST_DEVICE float4 abft_obs_part(const float (&x)[kObsCols], int cl, float alpha) {
  float s1 = 0.f, sw = 0.f, sq = 0.f, mx = 0.f;
  CUTLASS_PRAGMA_UNROLL
  for (int j = 0; j < kObsCols; ++j) {
    const float c = alpha == 1.f ? x[j] : x[j] / alpha;
    s1 += c;
    sw = fmaf(float(ftgen_rules::abft_strip_local(cl + j, kCols) + 1), c, sw);
    sq = fmaf(c, c, sq);
    mx = fmaxf(mx, fabsf(c));
  }
  return make_float4(s1, sw, sq, mx);
}
// two threads' sums of one warp column, added (the shuffle tree of abft_obs_kernel: a += the partner's b)
CUTLASS_HOST_DEVICE float4 abft_obs_add(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, fmaxf(a.w, b.w)); }

// per_row: the threads of a row (p.t.tiles_n kPerTile), for the row and column of an item below 2^31 without a 64-bit division
template <class K, bool kInject, int kStrips>
__global__ void __launch_bounds__(256) abft_obs_kernel(AbftParams<K> p, cutlass::FastDivmod per_row) {
  using S = AbftShape<K>;
  using St = AbftStrips<K, kStrips>;
  using EC = typename K::ElementC;
  static_assert(std::is_same<EC, float>::value, "fp32 C (tf32x3)");
  constexpr int kGroup = S::kWarpN / kObsCols;  // threads per warp column of a row
  constexpr int kPerTile = S::kN / kObsCols;    // threads per row of a tile
  static_assert(S::kWarpN % kObsCols == 0 && 32 % kGroup == 0 && kPerTile % 32 == 0, "a warp: whole warp columns of one row of one tile");
  const int M = p.t.gemm.problem_size.m(), N = p.t.gemm.problem_size.n();
  const long long ldc = p.t.gemm.ref_D.stride(0);
  EC* const C = p.t.gemm.ref_D.data();
  const float alpha = static_cast<float>(p.t.gemm.output_op.alpha);
  const long long row_items = per_row.divisor;  // p.t.tiles_n kPerTile
  const long long items = static_cast<long long>(M) * row_items;  // (a multiple of 32: whole warps, warp-uniform loop)
  const bool narrow = items <= INT_MAX;
  const bool vec = ldc % kObsCols == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < items; x += 256ll * gridDim.x) {
    int row, c0;
    if (narrow) {
      per_row(row, c0, static_cast<int>(x));
    } else {
      row = static_cast<int>(x / row_items);
      c0 = static_cast<int>(x % row_items);
    }
    c0 *= kObsCols;
    const int tn = c0 / S::kN, cl = c0 - tn * S::kN;  // the tile column, the first column in the tile
    EC* const at = C + static_cast<long long>(row) * ldc + c0;
    static_assert(kObsCols == 4, "one float4 per thread");
    float v[kObsCols];
    if (vec && c0 + kObsCols <= N) {
      const float4 q = *reinterpret_cast<const float4*>(at);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kObsCols; ++j) v[j] = c0 + j < N ? static_cast<float>(at[j]) : 0.f;
    }
    if constexpr (kInject) {  // this tile's planned fault (fault_by_block: ABFT's one unit per tile)
      if (p.t.fault_by_block != nullptr && p.t.records != nullptr) {
        const int tm = row / S::kM, tile = tm * p.t.tiles_n + tn;
        const int i = __ldg(p.t.fault_by_block + tile);
        const int step = i >= 0 ? __ldg(&p.t.faults[i].step) : -1;
        if (step >= 0 && step < p.t.total_k) {
          ftgen::FaultRecord* const r = p.t.records + i;
          const long long fr = r->row, fc = r->col;
          if (fr == row && fc >= c0 && fc < c0 + kObsCols && fc < N) {
            const float err = static_cast<float>(r->after) - static_cast<float>(r->before);
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kObsCols; ++j) {
              if (c0 + j == fc) {
                v[j] = v[j] + alpha * err;
                at[j] = static_cast<EC>(v[j]);
              }
            }
          }
          if (row == tm * S::kM && cl == 0) {
            r->applied = 1;
            add_count(p.t.counters, &ftgen::FtCounters::injected, 1u);
          }
        }
      }
    }
    float4 s = abft_obs_part<St::kCols>(v, cl, alpha);
    CUTLASS_PRAGMA_UNROLL
    for (int o = 1; o < kGroup; o <<= 1) {
      const float4 b = make_float4(__shfl_xor_sync(0xffffffffu, s.x, o), __shfl_xor_sync(0xffffffffu, s.y, o),
                                   __shfl_xor_sync(0xffffffffu, s.z, o), __shfl_xor_sync(0xffffffffu, s.w, o));
      s = abft_obs_add(s, b);
    }
    if (threadIdx.x % kGroup == 0) p.obs[(static_cast<long long>(tn) * S::kWarpsN + cl / S::kWarpN) * M + row] = s;
  }
}
