// ftgen gemm, CUTLASS backend: threadblock ABFT for fp64 (the DMMA tensor-core kernels), checked after the GEMM in double.
// Included by cutlass_tmr.cuh inside namespace ftgen_tmr (uses its Kit, Prepared, fault records and counters).
// Copied verbatim into every generated CUTLASS variant. Do not edit the copies.
//
// The rules are abft_model's (ftgen/families/gemm/abft_model.py, abft_fp64_check) with every sum in double:
//
//   encode   a pre-pass per k row and checksum strip of kAbft64Cols columns: B e, B w (w = 1..cols) into E, the B operand
//            of the reference GEMM, and B^2 e (abft64_enc_kernel)
//   refs     r, r' of every row and strip: R = A E, an fp64 GEMM on the tensor cores (Abft64RefGemm), batched over
//            sub-chunks of k so that it fills the GPU, the sub-chunks then added up in k order (abft64_ref_sum_kernel)
//   GEMM     the variant's own unprotected kernel, unchanged, writing C = alpha A B (beta != 0: into a workspace C')
//   verify   8 lanes per (row, strip) unit: d = sum_j c_j - r, dw = sum_j w_j c_j - r' of c = C / alpha against
//            tau = lambda u (sqrt(k) + sqrt(cols) + 1) max(|r|, ||c|| without its largest element) (pass 1); a unit over
//            it takes the full rule (ftgen_rules::abft_row_verdict_t, r2 = sum_k a_ik^2 (B^2 e)_k added to the scale)
//   locate   only with certainty (|d| > 2 tau_w, j = rint(dw / d) in 1..cols, |dw - j d| <= tau_w)
//   correct  online: c_j recomputed from A's row and B's column in double (abft_model's fix='dot': r - sum_{l != j} c_l
//            would carry the rounding of the whole row, beyond the fp64 tolerance of a small element beside large ones);
//            not located (or correct: detect): the unit's row of the strip is recomputed from A and B in double
//            (abft_model's recompute='row'). Pass 1 is abft64_check_kernel (C read once); the units over its threshold
//            go to abft64_rare_kernel (a block each), the rows to recompute to abft64_redo_kernel
//   band     a unit the full rule passes with a score over the suspect band's floor (abft_model.abft64_band_floor) may
//            hide a fault in a small element beside large ones (the threshold follows the strip's largest elements, a
//            fault's significance its own element's |a_i| |b_j|): its row of the strip is recomputed by compensated dot
//            products beside the magnitudes sum |a| |b|, a detection only where an element differs from its
//            recomputation by more than the element tolerance (ftgen_rules::abft_element_differs), else a recheck
//            (FtCounters::family_counter, the bench's `rechecked`); the elements take the recomputed values either way
//   recheck  with row-major A, the band's suspects are first recomputed by the variant's own DMMA mainloop on A's rows
//            gathered by index (abft64_recheck_kernel): each element's products summed in the kernel's own k order, so
//            a clean unit comes back bit for bit and counts as rechecked; only a unit that differs anywhere takes the
//            compensated recomputation above, which decides (a fault in the recheck itself never reaches C)
//
// The encodings and the reference GEMM run on a second stream of low priority beside the GEMM (the streams of
// ref_checksums: concurrent); the check runs after both. Inject builds: each planned fault's error (a bit flip of the
// accumulator's partial sum at its k-iteration, abft_fault_error_kernel) is added to its C element after the GEMM and
// before the check (abft64_apply_kernel): the value the GEMM would have stored with that upset in its accumulator.
#pragma once

constexpr int kAbft64Cols = FTGEN_ABFT_STRIP_N;  // columns per checksum strip
static_assert(kAbft64Cols % 32 == 0, "whole warps of columns per strip");

// ---- pre-pass: the strip encodings of B ------------------------------------------------------------------------
// E[kk * lde + 2 s + {0, 1}] = {sum_j B(kk, j), sum_j (j - j0 + 1) B(kk, j)} over strip s's columns j0 .. j0 + cols - 1
// (< n), the columns 2 strips .. lde - 1 zero; b2[s * k + kk] = sum_j B(kk, j)^2. Row-major B: kAbft64Lanes lanes per
// (k row, strip), each reading pairs of columns (one 16-byte load where B allows it; the group's loads are 128
// contiguous bytes); column-major: a thread per (k row, strip), consecutive threads along k (coalesced either way).
constexpr int kAbft64Lanes = 8;  // lanes per checksum unit (a row of a strip) in the encodings and the check
static_assert(kAbft64Cols % (2 * kAbft64Lanes) == 0, "whole column pairs per lane");

// sum over the kAbft64Lanes lanes of a unit (aligned groups of a warp; mask: the group's lanes)
template <class T, class Op>
CUTLASS_DEVICE T abft64_group_reduce(T v, unsigned mask, Op op) {
  CUTLASS_PRAGMA_UNROLL
  for (int o = kAbft64Lanes / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(mask, v, o));
  return v;
}
CUTLASS_DEVICE double abft64_group_sum(double v, unsigned mask) {
  return abft64_group_reduce(v, mask, [](double a, double b) { return a + b; });
}
CUTLASS_DEVICE unsigned abft64_group_mask() {
  return 0xffu << ((threadIdx.x % 32) & ~(kAbft64Lanes - 1));
}

// The 2 elements of a row at columns j, j + 1 of the strip's pairs (0 past n): one 16-byte load where `vec` (the row's
// start and the pair 16-byte aligned)
CUTLASS_DEVICE void abft64_pair(const double* row, int j, int n, bool vec, double& x0, double& x1) {
  if (vec && j + 1 < n) {
    const double2 v = __ldg(reinterpret_cast<const double2*>(row + j));
    x0 = v.x, x1 = v.y;
  } else {
    x0 = j < n ? __ldg(row + j) : 0.0;
    x1 = j + 1 < n ? __ldg(row + j + 1) : 0.0;
  }
}

template <bool kRowB>
__global__ void __launch_bounds__(256) abft64_enc_kernel(const double* __restrict__ B, long long ldb, int k, int n, int strips,
                                                         double* __restrict__ E, int lde, double* __restrict__ b2) {
  constexpr int kC = kAbft64Cols, kL = kAbft64Lanes;
  const long long t = blockIdx.x * 256ll + threadIdx.x;
  int kk, s, sub = 0;
  double a = 0.0, w = 0.0, q = 0.0;
  if constexpr (kRowB) {
    const long long unit = t / kL;
    sub = static_cast<int>(t % kL);
    if (unit >= static_cast<long long>(k) * strips) return;  // (group-uniform)
    kk = static_cast<int>(unit / strips), s = static_cast<int>(unit % strips);
    const double* const row = B + kk * ldb;
    const bool vec = ldb % 2 == 0 && reinterpret_cast<uintptr_t>(B) % 16 == 0;
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < kC / (2 * kL); ++x) {
      const int l = 2 * (sub + kL * x);  // the pair's first column in the strip
      double b0, b1;
      abft64_pair(row, s * kC + l, n, vec, b0, b1);
      a += b0 + b1;
      w += static_cast<double>(l + 1) * b0 + static_cast<double>(l + 2) * b1;
      q += b0 * b0 + b1 * b1;
    }
    const unsigned mask = abft64_group_mask();
    a = abft64_group_sum(a, mask);
    w = abft64_group_sum(w, mask);
    q = abft64_group_sum(q, mask);
  } else {
    if (t >= static_cast<long long>(k) * strips) return;
    s = static_cast<int>(t / k), kk = static_cast<int>(t % k);
    for (int l = 0; l < kC && s * kC + l < n; ++l) {
      const double b = __ldg(B + static_cast<long long>(s * kC + l) * ldb + kk);
      a += b;
      w += static_cast<double>(l + 1) * b;
      q += b * b;
    }
  }
  double* const e = E + static_cast<long long>(kk) * lde;
  if (sub == 0) {
    e[2 * s] = a;
    e[2 * s + 1] = w;
    b2[static_cast<long long>(s) * k + kk] = q;
    if (s == strips - 1)
      for (int j = 2 * strips; j < lde; ++j) e[j] = 0.0;
  }
}

// r, r' of every row and strip: R[i * ldd + c] = sum of the reference GEMM's sub-chunks D[u][i][c] in u order (a thread
// per element; beside the GEMM, so the check reads one 16-byte pair per unit)
__global__ void __launch_bounds__(256) abft64_ref_sum_kernel(const double* __restrict__ D, int subs, long long elems, double* __restrict__ R) {
  const long long t = blockIdx.x * 256ll + threadIdx.x;
  if (t >= elems) return;
  double r = 0.0;
  for (int u = 0; u < subs; ++u) r += __ldg(D + u * elems + t);
  R[t] = r;
}

// ---- the reference GEMM: D[u] = A[:, u sub ..) E[u sub .., :) per sub-chunk u of k, fp64 on the tensor cores ---------
// On the variant's own MMA (Arch, Inst: the sm80 DMMA 8x8x4, or Hopper's 16x8x4 at twice its rate). (The swizzle is
// cutlass_abft.cuh's own type: see AbftRefSwizzle.)
template <class LayoutA, class Arch, class Inst>
using Abft64RefGemm = cutlass::gemm::device::GemmUniversal<
    double, LayoutA, double, cutlass::layout::RowMajor, double, cutlass::layout::RowMajor, double, cutlass::arch::OpClassTensorOp,
    Arch, cutlass::gemm::GemmShape<128, 64, 16>, cutlass::gemm::GemmShape<64, 32, 16>, Inst,
    cutlass::epilogue::thread::LinearCombination<double, 1, double, double>, AbftRefSwizzle, 3, 1, 1, cutlass::arch::OpMultiplyAdd>;

// ---- inject builds: the planned faults' errors into C ------------------------------------------------------------
// A thread per planned fault: its record (abft_fault_error_kernel: the element, its partial sum and faulty value) adds
// alpha x (after - before) to the element (where it lies in C), marks the fault applied and counts it.
__global__ void abft64_apply_kernel(const ftgen::FaultSpec* __restrict__ faults, ftgen::FaultRecord* records, int count, int total_k,
                                    double* C, long long ldc, int m, int n, double alpha, ftgen::FtCounters* counters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count || faults[i].step < 0 || faults[i].step >= total_k) return;
  ftgen::FaultRecord* const r = records + i;
  if (r->row < m && r->col < n) C[r->row * ldc + r->col] += alpha * (r->after - r->before);
  r->applied = 1;
  if (counters != nullptr) atomicAdd(&counters->injected, 1ull);
}

// ---- the check -----------------------------------------------------------------------------------------------------
template <class T>
CUTLASS_DEVICE T abft64_warp_sum(T v) {
  CUTLASS_PRAGMA_UNROLL
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

struct Abft64Params {
  const double* A;  // the operands (r2 and the recomputation of a row read them)
  long long lda;
  const double* B;
  long long ldb;
  double* C;  // C = alpha A B, checked and corrected in place
  long long ldc;
  double alpha;
  int m, n, k, strips;
  const double* R;  // R[i * ldd + 2 s + {0, 1}] = {r, r'} of row i, strip s (abft64_ref_sum_kernel)
  int ldd;
  const double* b2;  // [strip][k]: B^2 e
  double unit;       // lambda u (sqrt(k) + sqrt(cols) + 1)
  double fixed;      // > 0: a fixed threshold
  double rms_w;      // rms of the weights 1..cols
  int online;        // correct: online (1) or detect (0)
  int correct;       // 0: detect and count only (inject builds measuring the uncorrected error)
  ftgen::FtCounters* counters;
  int* lists;  // [3][list_cap = m x strips]: the units over their pass-1 threshold (abft64_rare_kernel's), then those
               // whose row of the strip abft64_redo_kernel recomputes (suspects marked kAbft64Suspect), then per entry
               // of the second list its suspect's state (abft64_redo_kernel's groups done, and how many found a fault)
  int* counts;  // the lists' counts: [0] flagged, [1] to recompute
  long long list_cap;
  double band;      // the suspect band's floor (a fraction of the threshold; 0: no band)
  double elem_tol;  // a suspect element's tolerance, a fraction of its magnitude sum |a| |b|
  // the suspects' buckets for abft64_recheck_kernel (nullptr: none; the suspects then go to abft64_redo_kernel): per
  // strip its count (bucket_n[strip]) and its rows (bucket[strip * m + x]), each entry's state beside (bucket_state)
  int* bucket;
  int* bucket_n;
  int* bucket_state;  // per bucket entry, its recheck's column parts done (low 16 bits) and those that differed (above)
};
// the mark of a suspect unit in the list of rows to recompute (units below it: the launcher builds no band past it)
constexpr int kAbft64Suspect = 1 << 30;

// A(i, k) and B(k, j) of the problem (row- or column-major)
template <bool kRowA>
CUTLASS_DEVICE double abft64_a(const Abft64Params& p, int i, int kk) {
  return kRowA ? p.A[static_cast<long long>(i) * p.lda + kk] : p.A[static_cast<long long>(kk) * p.lda + i];
}
template <bool kRowB>
CUTLASS_DEVICE double abft64_b(const Abft64Params& p, int kk, int j) {
  return __ldg(kRowB ? p.B + static_cast<long long>(kk) * p.ldb + j : p.B + static_cast<long long>(j) * p.ldb + kk);
}

// The sum (or, with op, another reduction) of v over a block of kThreads threads, in a fixed order (each warp's shuffle
// tree, then the warps in order); every thread gets the result. red: kThreads / 32 slots of shared memory.
template <int kThreads, class T, class Op>
CUTLASS_DEVICE T abft64_block_reduce(T v, T* red, Op op) {
  CUTLASS_PRAGMA_UNROLL
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // (red's previous use)
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  T x = red[0];
  for (int w = 1; w < kThreads / 32; ++w) x = op(x, red[w]);
  return x;
}

// Pass 1: kAbft64Lanes lanes per unit (row i, strip s), consecutive groups along the strips of a row; lane `sub` of a
// group holds the column pairs 2 (sub + kAbft64Lanes x), 2 (sub + kAbft64Lanes x) + 1 of the strip (the group's loads:
// 128 contiguous bytes). It reads C and the unit's r, r' and lists a unit over its pass-1 threshold for
// abft64_rare_kernel (every shuffle takes its group's mask).
template <int kC>  // kAbft64Cols (a template: instantiated only by the fp64 runner)
__global__ void __launch_bounds__(256) abft64_check_kernel(Abft64Params p) {
  constexpr int kL = kAbft64Lanes, kPairs = kC / (2 * kL);
  __shared__ double best_of[8];
  const long long unit = (blockIdx.x * 256ll + threadIdx.x) / kL;
  const int sub = threadIdx.x % kL, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned mask = abft64_group_mask();
  auto gsum = [&](double v) { return abft64_group_sum(v, mask); };
  double score = 0.0;
  if (unit < static_cast<long long>(p.m) * p.strips) {  // (group-uniform)
    const int i = static_cast<int>(unit / p.strips), s = static_cast<int>(unit % p.strips), j0 = s * kC;
    double* const row = p.C + i * p.ldc;
    const bool vec = p.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(p.C) % 16 == 0;
    double c[2 * kPairs];
    double s1 = 0.0, sw = 0.0, sq = 0.0, mx = 0.0;
    int nb = 0, bc = kC;
    CUTLASS_PRAGMA_UNROLL
    for (int x = 0; x < kPairs; ++x) {
      const int l = 2 * (sub + kL * x);
      abft64_pair(row, j0 + l, p.n, vec, c[2 * x], c[2 * x + 1]);
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        double& v = c[2 * x + h];
        if (p.alpha != 1.0) v /= p.alpha;
        s1 += v;
        sw += static_cast<double>(l + h + 1) * v;
        if (isfinite(v)) {
          const double a = fmin(fabs(v), 1e150), a2 = a * a;  // (capped: abft_model's squares)
          sq += a2;
          mx = fmax(mx, a2);
        } else {
          ++nb;
          bc = min(bc, l + h);
        }
      }
    }
    s1 = gsum(s1);
    sw = gsum(sw);
    sq = gsum(sq);
    mx = abft64_group_reduce(mx, mask, [](double a, double b) { return fmax(a, b); });
    nb = abft64_group_reduce(nb, mask, [](int a, int b) { return a + b; });
    bc = abft64_group_reduce(bc, mask, [](int a, int b) { return min(a, b); });
    const double2 rr = __ldg(reinterpret_cast<const double2*>(p.R + static_cast<long long>(i) * p.ldd + 2 * s));
    const double r = rr.x, rw = rr.y;
    // pass 1: the threshold without r2
    const double robust = sqrt(fmax(sq - mx, 0.0));
    const double tau = p.fixed > 0.0 ? p.fixed : p.unit * fmax(fabs(r), robust);
    const double tau_w = p.fixed > 0.0 ? p.fixed * p.rms_w : fmax(tau * p.rms_w, p.unit * fabs(rw));
    const double sc1 = ftgen_rules::abft_score_t(s1 - r, tau), sc2 = ftgen_rules::abft_score_t(sw - rw, tau_w);
    score = fmax(sc1, sc2);
    // (with a band every unit over its floor takes the full rule)
    const bool within = p.band > 0.0 ? ftgen_rules::abft_within_at_t(sc1, sc2, p.band) : ftgen_rules::abft_within_t(sc1, sc2);
    if (nb > 0 || !within || !isfinite(s1 - r) || !isfinite(sw - rw)) {  // (rare)
      score = 0.0;  // (the full rule's, abft64_rare_kernel's)
      if (sub == 0) p.lists[atomicAdd(p.counts, 1)] = static_cast<int>(unit);
    }
  }
  // the block's largest score, recorded once
  CUTLASS_PRAGMA_UNROLL
  for (int o = 16; o > 0; o >>= 1) score = fmax(score, __shfl_xor_sync(0xffffffffu, score, o));
  if (lane == 0) best_of[warp] = score;
  __syncthreads();
  if (threadIdx.x == 0) {
    double best = 0.0;
    for (int w = 0; w < 8; ++w) best = fmax(best, best_of[w]);
    if (best > 0.0) ftgen::record_score(p.counters, best);
  }
}

// The flagged units, a block each (grid-stride): their sums anew from C, r2 = sum_k a_ik^2 (B^2 e)_k (the threads along
// k), the full rule (ftgen_rules::abft_row_verdict_t, every thread on the same block-wide sums); a located element
// recomputed from A's row and B's column in double (the threads along k), an unlocated unit (or any detection with
// correct: detect) listed for abft64_redo_kernel.
// 128 threads a block (a thread per column of the widest strip) and several blocks an SM: at a band's floor thousands of
// units are flagged, and a unit's latency (its block-wide sums, r2 along k) is what a block spends on it (at most 128
// registers a thread: without the bound ptxas capped the column-major instantiation at 64 and spilled).
constexpr int kAbft64RareThreads = 128;
static_assert(kAbft64Cols <= kAbft64RareThreads, "a thread per column of a strip");
template <bool kRowA, bool kRowB>
__global__ void __launch_bounds__(kAbft64RareThreads, 4) abft64_rare_kernel(Abft64Params p) {
  constexpr int kT = kAbft64RareThreads, kC = kAbft64Cols;
  __shared__ double red[kT / 32];
  __shared__ int ired[kT / 32];
  auto sum = [](double a, double b) { return a + b; };
  const int t = threadIdx.x, flagged = __ldcg(p.counts);
  for (int x = blockIdx.x; x < flagged; x += gridDim.x) {  // (block-uniform)
    const int unit = __ldcg(p.lists + x), i = unit / p.strips, s = unit % p.strips, j0 = s * kC;
    double* const row = p.C + i * p.ldc;
    double c = 0.0, a2 = 0.0;
    int nb = 0, bc = kC;
    if (t < kC && j0 + t < p.n) {
      c = p.alpha == 1.0 ? row[j0 + t] : row[j0 + t] / p.alpha;
      if (isfinite(c)) {
        const double a = fmin(fabs(c), 1e150);  // (capped: abft_model's squares)
        a2 = a * a;
      } else {
        nb = 1, bc = t;
      }
    }
    const double s1 = abft64_block_reduce<kT>(c, red, sum);
    const double sw = abft64_block_reduce<kT>(static_cast<double>(t + 1) * c, red, sum);
    const double sq = abft64_block_reduce<kT>(a2, red, sum);
    const double mx = abft64_block_reduce<kT>(a2, red, [](double u, double v) { return fmax(u, v); });
    nb = abft64_block_reduce<kT>(nb, ired, [](int u, int v) { return u + v; });
    bc = abft64_block_reduce<kT>(bc, ired, [](int u, int v) { return min(u, v); });
    double r2 = 0.0;
    for (int kk = t; kk < p.k; kk += kT) {
      const double a = abft64_a<kRowA>(p, i, kk);
      r2 += a * a * __ldg(p.b2 + static_cast<long long>(s) * p.k + kk);
    }
    r2 = abft64_block_reduce<kT>(r2, red, sum);
    const double r = p.R[static_cast<long long>(i) * p.ldd + 2 * s], rw = p.R[static_cast<long long>(i) * p.ldd + 2 * s + 1];
    double score = 0.0;
    const int verdict = ftgen_rules::abft_band_verdict(
        ftgen_rules::abft_row_verdict_t<double>(sq, mx, nb, bc, s1, sw, r, rw, r2, p.unit, p.fixed, p.rms_w, kC, &score),
        static_cast<float>(score), static_cast<float>(p.band));
    if (t == 0) ftgen::record_score(p.counters, score);
    if (verdict == ftgen_rules::kAbftSuspect) {  // (its row recomputed and compared; nothing counted yet)
      if (t == 0 && p.correct && p.bucket != nullptr) {
        const long long at = static_cast<long long>(s) * p.m + atomicAdd(p.bucket_n + s, 1);
        p.bucket[at] = i;
        p.bucket_state[at] = 0;
      } else if (t == 0 && p.correct) {
        const int at = atomicAdd(p.counts + 1, 1);
        p.lists[p.list_cap + at] = unit | kAbft64Suspect;
        p.lists[2 * p.list_cap + at] = 0;
      }
      continue;
    }
    if (verdict == -1) continue;  // (a pass-1 flag the full rule clears)
    unsigned detected = 0, uncorrectable = 0;
    ftgen_rules::abft_count_row(verdict, p.online, detected, uncorrectable);
    const bool located = verdict >= 0 && j0 + verdict < p.n && p.online;
    if (t == 0) {
      add_count(p.counters, &ftgen::FtCounters::detected, detected);
      add_count(p.counters, &ftgen::FtCounters::uncorrectable, located ? 0u : uncorrectable);
    }
    if (!p.correct) continue;
    if (located) {
      const int j = j0 + verdict;
      double v = 0.0;
      for (int kk = t; kk < p.k; kk += kT) v = fma(abft64_a<kRowA>(p, i, kk), abft64_b<kRowB>(p, kk, j), v);
      v = abft64_block_reduce<kT>(v, red, sum);
      if (t == 0) {
        row[j] = p.alpha * v;
        add_count(p.counters, &ftgen::FtCounters::corrected, 1u);
      }
    } else if (t == 0) {
      p.lists[p.list_cap + atomicAdd(p.counts + 1, 1)] = unit;
    }
  }
}

// One of a unit's `parts` blocks reports whether its elements differed (state: the unit's counter, zeroed before the
// first report: parts done in the low 16 bits, those that differed above). True for the last part to report, with
// `differed` then whether any part did.
CUTLASS_DEVICE bool abft64_last_part(int* state, int parts, bool& differed) {
  const int old = atomicAdd(state, 1 + (differed ? 1 << 16 : 0));
  differed = differed || (old >> 16) > 0;
  return (old & 0xffff) == parts - 1;
}

// A dot product's term added by Ogita, Rump and Oishi's Dot2 (TwoProduct by fma, TwoSum): s + c carries the sum to about
// u^2 of its magnitudes, mag = sum |a| |b| beside it (a suspect's recomputation: its elements compared with the
// kernel's, so its own rounding must stay far under theirs)
CUTLASS_DEVICE void abft64_dot2_add(double a, double b, double& s, double& c, double& mag) {
  const double q = a * b, eq = fma(a, b, -q);
  const double t = s + q, z = t - s;
  c += eq + ((s - (t - z)) + (q - z));
  s = t;
  mag = fma(fabs(a), fabs(b), mag);
}
// Two compensated partial sums added (TwoSum): (s, c) += (s2, c2)
CUTLASS_DEVICE void abft64_dot2_merge(double& s, double& c, double s2, double c2) {
  const double t = s + s2, z = t - s;
  c += c2 + ((s - (t - z)) + (s2 - z));
  s = t;
}

// The listed units' rows of their strips from A and B in double: a block per (unit, 32 columns of its strip). Row-major
// B: its 32 warps split k, a lane per column (B's rows read 256 contiguous bytes at a time), the warps' partial sums
// added in warp order; column-major: a warp per column, the lanes along k. The block of a unit's first columns counts
// its recomputation. A suspect (marked kAbft64Suspect) takes compensated dot products beside their magnitudes, compares
// each element with the kernel's (ftgen_rules::abft_element_differs at p.elem_tol), and the last of its blocks counts
// it: detected (and corrected by the recomputation) where an element of any block differed, else rechecked.
constexpr int kAbft64RedoThreads = 1024;
template <bool kRowA, bool kRowB>
__global__ void __launch_bounds__(kAbft64RedoThreads) abft64_redo_kernel(Abft64Params p) {
  constexpr int kW = kAbft64RedoThreads / 32, kGroups = kAbft64Cols / 32;
  __shared__ double part[3][kW][33];  // the warps' partial sums (a suspect's: compensations, magnitudes beside)
  const int listed = __ldcg(p.counts + 1), lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (long long x = blockIdx.x; x < static_cast<long long>(listed) * kGroups; x += gridDim.x) {  // (block-uniform)
    const int entry = __ldcg(p.lists + p.list_cap + x / kGroups), g = static_cast<int>(x % kGroups);
    const bool sus = (entry & kAbft64Suspect) != 0;  // (block-uniform)
    const int unit = entry & (kAbft64Suspect - 1);
    const int i = unit / p.strips, jg = (unit % p.strips) * kAbft64Cols + g * 32;
    const int k0 = static_cast<int>(static_cast<long long>(p.k) * warp / kW), k1 = static_cast<int>(static_cast<long long>(p.k) * (warp + 1) / kW);
    if constexpr (kRowB) {
      const int j = jg + lane;
      double v = 0.0, c = 0.0, mag = 0.0;
      if (j < p.n) {
        if (sus) {
          for (int kk = k0; kk < k1; ++kk) abft64_dot2_add(abft64_a<kRowA>(p, i, kk), abft64_b<kRowB>(p, kk, j), v, c, mag);
        } else {
#pragma unroll 8
          for (int kk = k0; kk < k1; ++kk) v = fma(abft64_a<kRowA>(p, i, kk), abft64_b<kRowB>(p, kk, j), v);
        }
      }
      part[0][warp][lane] = v;
      part[1][warp][lane] = c;
      part[2][warp][lane] = mag;
    } else {  // warp w: column jg + w over the whole k
      static_assert(kW == 32, "a warp per column of the group");
      double v = 0.0, c = 0.0, mag = 0.0;
      if (jg + warp < p.n) {
        if (sus) {
          for (int kk = lane; kk < p.k; kk += 32) abft64_dot2_add(abft64_a<kRowA>(p, i, kk), abft64_b<kRowB>(p, kk, jg + warp), v, c, mag);
        } else {
          for (int kk = lane; kk < p.k; kk += 32) v = fma(abft64_a<kRowA>(p, i, kk), abft64_b<kRowB>(p, kk, jg + warp), v);
        }
      }
      if (sus) {
        CUTLASS_PRAGMA_UNROLL
        for (int o = 16; o > 0; o >>= 1) {
          const double v2 = __shfl_xor_sync(0xffffffffu, v, o), c2 = __shfl_xor_sync(0xffffffffu, c, o);
          mag += __shfl_xor_sync(0xffffffffu, mag, o);
          abft64_dot2_merge(v, c, v2, c2);
        }
      } else {
        v = abft64_warp_sum(v);
      }
      if (lane == 0) part[0][0][warp] = v, part[1][0][warp] = c, part[2][0][warp] = mag;
    }
    __syncthreads();
    if (warp == 0) {
      double sum = 0.0, comp = 0.0, mag = 0.0;
      if constexpr (kRowB) {
        for (int w = 0; w < kW; ++w) {
          if (sus) {
            abft64_dot2_merge(sum, comp, part[0][w][lane], part[1][w][lane]);
            mag += part[2][w][lane];
          } else {
            sum += part[0][w][lane];
          }
        }
      } else {
        sum = part[0][0][lane], comp = part[1][0][lane], mag = part[2][0][lane];
      }
      const double exact = sum + comp;
      bool differs = false;
      if (jg + lane < p.n) {
        double& out = p.C[i * p.ldc + jg + lane];
        if (sus) differs = ftgen_rules::abft_element_differs(out / p.alpha, exact, mag, p.elem_tol);
        out = p.alpha * exact;
      }
      if (sus) {  // (warp-uniform) the unit's last block counts it
        bool any = __any_sync(0xffffffffu, differs);
        if (lane == 0) {
          if (abft64_last_part(p.lists + 2 * p.list_cap + x / kGroups, kGroups, any)) {
            if (any) {
              add_count(p.counters, &ftgen::FtCounters::detected, 1u);
              count_recomputed(p.counters);
              add_count(p.counters, &ftgen::FtCounters::corrected, 1u);
            } else {
              add_count(p.counters, &ftgen::FtCounters::family_counter, 1u);
            }
          }
        }
      } else if (lane == 0 && g == 0) {
        count_recomputed(p.counters);
        add_count(p.counters, &ftgen::FtCounters::corrected, 1u);
      }
    }
    __syncthreads();  // (part is the next item's)
  }
}

// ---- the suspects rechecked bit for bit -----------------------------------------------------------------------------
// The variant's threadblock MMA rebuilt for a tile of kRows rows and kCols columns of a strip with A's rows gathered by
// index (CUTLASS's GatherA: row-major A only, the gather runs along the strided dimension). The same element types,
// alignments, warp k, DMMA instruction, stages and math operator as K's mainloop: each element's products are added to
// its accumulator in ascending k, a k-step of the instruction at a time, whatever the tile's rows and columns, so a clean
// element equals the kernel's bit for bit. A k-partitioned warp layout (warp k < threadblock k) sums partial
// accumulators in the epilogue, in an order this recheck would not repeat: it is built only without one (kBuilt).
// A strip's kC / kCols column parts are blocks of their own (a k-tile's loads of B, one 8-byte access per element, are
// what a block's time follows: fewer columns a block, shorter blocks and more of them for a strip's few rows).
template <class K, int kRows_, int kCols_>
struct Abft64Recheck {
  static constexpr bool kRowA = std::is_same<typename K::LayoutA, cutlass::layout::RowMajor>::value;
  static constexpr bool kBuilt = kRowA && K::Shape::kK == K::Operator::Shape::kK;
  // four warps: kRows / 16 of 16 rows (the DMMA's m) by 64 / kRows of the tile's columns
  static constexpr int kRows = kRows_, kCols = kCols_ < kAbft64Cols ? kCols_ : kAbft64Cols, kParts = kAbft64Cols / kCols;
  static_assert(kRows == 16 || kRows == 32 || kRows == 64, "16, 32 or 64 rows a block");
  static_assert(kAbft64Cols % kCols == 0 && kCols * kRows % 512 == 0, "whole warps of 8-column DMMA tiles");
  using OutputOp = typename K::OutputOp;
  using Tile = cutlass::gemm::GemmShape<kRows, kCols, K::Shape::kK>;
  using Warp = cutlass::gemm::GemmShape<16, kCols * kRows / 64, K::Operator::Shape::kK>;
  using Mma = typename cutlass::gemm::threadblock::DefaultMma<
      double, typename K::LayoutA, K::kAlignA, double, typename K::LayoutB, K::kAlignB, double, cutlass::layout::RowMajor,
      cutlass::arch::OpClassTensorOp, typename K::Op::ArchTag, Tile, Warp, typename K::Operator::InstructionShape,
      K::Mma::kStages, typename K::Op::Operator, false, cutlass::gemm::SharedMemoryClearOption::kNone, /*GatherA=*/true,
      /*GatherB=*/false>::ThreadblockMma;
  static_assert(std::is_same<typename Mma::Operator::ArchMmaOperator, typename K::Operator::ArchMmaOperator>::value,
                "the recheck runs the variant's MMA instruction");
  static_assert(K::OutputOp::kCount == 1, "the epilogue's functor applied an element at a time");
  static_assert(Mma::WarpCount::kCount == 4, "four warps");
  static constexpr int kThreads = 32 * Mma::WarpCount::kCount;
  static constexpr int kSmem = static_cast<int>(sizeof(typename Mma::SharedStorage));
};

// The recheck's tile, rows x columns: 32x32 (the default), or 32x128 or 64x32 where FTGEN_ABFT64_RECHECK says so (read
// once; a calibration knob). On an H100 with a floor of 0.3 (40 listed rows a strip at 4096^3, 251 at 8192^3) 32x32 ran
// at 0.84-0.89x DGEMM at 4096^3 against 0.83 for the other two: a strip's few rows spread over four times the blocks.
inline int abft64_recheck_tile() {
  static const int tile = [] {
    const char* v = std::getenv("FTGEN_ABFT64_RECHECK");
    if (v == nullptr) return 0;
    return std::strcmp(v, "32x128") == 0 ? 1 : std::strcmp(v, "64x32") == 0 ? 2 : 0;
  }();
  return tile;
}

// A block per kRows listed rows of a strip and one of its column parts (grid y: strip x kParts + part; x: a grid-stride
// loop over the strip's bucket, whose count is read on the device). Each element's recomputation goes through the
// variant's epilogue functor (alpha acc, beta 0, as the GEMM wrote C) and is compared with C in every bit. The last part
// of a row to finish decides (Abft64Params::bucket_state: parts done, and whether one differed): a row that matched
// everywhere counts as rechecked, one that differed anywhere is listed for abft64_redo_kernel as a suspect.
template <class R>
__global__ void __launch_bounds__(R::kThreads, 1) abft64_recheck_kernel(Abft64Params p, typename R::Mma::IteratorA::Params pa,
                                                                    typename R::Mma::IteratorB::Params pb, double alpha) {
  using Mma = typename R::Mma;
  using Lay = AccLayout<typename Mma::Operator>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename Mma::SharedStorage*>(smem_raw);
  __shared__ int differs[R::kRows];
  const int s = blockIdx.y / R::kParts, jp = s * kAbft64Cols + (blockIdx.y % R::kParts) * R::kCols;
  const int listed = __ldcg(p.bucket_n + s);
  const int* const rows = p.bucket + static_cast<long long>(s) * p.m;
  const int t = threadIdx.x, warp = cutlass::canonical_warp_idx_sync(), lane = t % 32;
  const int wm = warp % Mma::WarpCount::kM, wn = warp / Mma::WarpCount::kM;
  typename R::OutputOp::Params op_params(alpha, 0.0);
  const typename R::OutputOp op(op_params);
  for (int row0 = blockIdx.x * R::kRows; row0 < listed; row0 += gridDim.x * R::kRows) {  // (block-uniform)
    __syncthreads();  // (the previous rows' shared memory and flags)
    if (t < R::kRows) differs[t] = 0;
    typename Mma::IteratorA it_a(pa, const_cast<double*>(p.A), {listed, p.k}, t, {row0, 0}, rows);
    typename Mma::IteratorB it_b(pb, const_cast<double*>(p.B), {p.k, p.n}, t, {0, jp});
    Mma mma(smem, t, warp, lane);
    typename Mma::FragmentC acc;
    acc.clear();
    mma((p.k + Mma::Shape::kK - 1) / Mma::Shape::kK, acc, it_a, it_b, acc);
    __syncthreads();  // (differs zeroed)
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < Mma::FragmentC::kElements; ++e) {
      int r, c;
      Lay::coord(lane, e, r, c);
      r += wm * R::Warp::kM, c += wn * R::Warp::kN;
      if (row0 + r < listed && jp + c < p.n) {
        typename R::OutputOp::FragmentAccumulator f;
        f[0] = acc[e];
        const double v = op(f)[0], was = p.C[static_cast<long long>(rows[row0 + r]) * p.ldc + jp + c];
        if (__double_as_longlong(v) != __double_as_longlong(was)) differs[r] = 1;
      }
    }
    __syncthreads();
    if (warp == 0) {
      for (int r = lane; r < (R::kRows + 31) / 32 * 32; r += 32) {  // (warp-uniform)
        const bool mine = r < R::kRows && row0 + r < listed;
        bool decide = false, bad = false;
        if (mine) {
          bad = differs[r] != 0;
          decide = true;
          if constexpr (R::kParts > 1) decide = abft64_last_part(p.bucket_state + static_cast<long long>(s) * p.m + row0 + r, R::kParts, bad);
        }
        if (decide && bad) {
          const int at = atomicAdd(p.counts + 1, 1);
          p.lists[p.list_cap + at] = (rows[row0 + r] * p.strips + s) | kAbft64Suspect;
          p.lists[2 * p.list_cap + at] = 0;
        }
        const unsigned clean = __popc(__ballot_sync(0xffffffffu, decide && !bad));
        if (lane == 0 && clean > 0) add_count(p.counters, &ftgen::FtCounters::family_counter, clean);
      }
    }
  }
}

// beta != 0: C = C' + beta C, C' = alpha A B checked in the workspace (ld n)
__global__ void abft64_axpby_kernel(const double* __restrict__ Cp, double* C, long long ldc, int m, int n, double beta) {
  const long long t = blockIdx.x * 256ll + threadIdx.x;
  if (t >= static_cast<long long>(m) * n) return;
  const long long i = t / n, j = t % n;
  C[i * ldc + j] = fma(beta, C[i * ldc + j], Cp[t]);
}
