// ftgen attention, mma backend: flash attention forward on mma.sync m16n8k16 (fp16 / bf16 in, fp32 accumulate)
// with the protection levels of ftgen/families/attention/model.py (the NumPy model states every rule; the
// thresholds below are its formulas).
//
// Thread block: BM / 16 warps, BM query rows of one (batch, head); each warp owns 16 rows, its Q fragments in
// registers. Key / value tiles of BN keys are staged in shared memory (K as [key][dim], V as [key][dim]).
// Accumulator layout of m16n8k16: lane t holds rows r = t / 4 and r + 8 and columns cq = 2 (t % 4), cq + 1 of
// every n8 block; element e of a fragment is (row half e / 2, column cq + e % 2). A row's column groups
// g = c % 8 are therefore thread-local: group g of the S tile is element e of every n8 block l (c = g + 8 l),
// and the strided checksums (stride 8) are three more n8 blocks whose element e is the same group's checksum. The
// second product has a fourth: the group magnitudes sum_l |V[c][g+8l]| (+1 in efta), whose P-weighted sum is the
// scale of the O check's threshold (model.o_threshold, group_magnitudes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <cstring>
#include <type_traits>
#include <stdint.h>

#include "ftgen_attention.h"
#include "ftgen_ft.cuh"

namespace ftattn {

enum Level { kLevelNone = 0, kLevelStrided = 1, kLevelSnvr = 2, kLevelEfta = 3 };
// What a level computes, for the kernels' configurations.
template <int LEVEL>
struct Levels {
  static constexpr int kLevel = LEVEL;
  static constexpr bool kStrided = LEVEL == kLevelStrided || LEVEL == kLevelEfta;
  static constexpr bool kSnvr = LEVEL == kLevelSnvr || LEVEL == kLevelEfta;
  static constexpr bool kUnified = LEVEL == kLevelEfta;
  static constexpr bool kProtected = LEVEL != kLevelNone;
  // the row sums from the tensor cores (P times columns of ones beside O's checksum columns: the wgmma backend's efta)
  // rather than the softmax's additions; a configuration that does so says so
  static constexpr bool kRowSumTc = false;
  // the exp check's fast path (softmax_tile): a configuration whose S check hands its group sums on says so
  static constexpr bool kExpFast = false;
};

// Threshold constants of the model (rendered by the variant from ftgen.families.attention.model).
struct Rules {
  float u_acc, u32, u_mufu, u_in, c_sqrt, c_const, p_floor, exp_tau;
  float exp_tau_fast, exp_fast_msl;  // the exp check's fast path: model.exp_fast_threshold, EXP_FAST_MSL
  float exp_band;  // fp16: what the exp check's threshold adds per value below the normal range (model.exp_band_relief)
  float s_lo_margin;  // the S check's allowance for K's unit checksum rounded once (model.S_LO_MARGIN)
};

// ---- 16-bit types ------------------------------------------------------------------------------

template <class T>
struct Half;
template <>
struct Half<__half> {
  static constexpr bool kBf16 = false;
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float lo(uint32_t x) { return __half2float(__ushort_as_half(static_cast<unsigned short>(x & 0xffffu))); }
  static __device__ __forceinline__ float hi(uint32_t x) { return __half2float(__ushort_as_half(static_cast<unsigned short>(x >> 16))); }
  static __host__ __device__ __forceinline__ __half from(float a) { return __float2half_rn(a); }
  static __host__ __device__ __forceinline__ __half from_up(float a) { return __float2half_ru(a); }
  static __host__ __device__ __forceinline__ float to(__half a) { return __half2float(a); }
};
template <>
struct Half<__nv_bfloat16> {
  static constexpr bool kBf16 = true;
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float lo(uint32_t x) { return __uint_as_float((x & 0xffffu) << 16); }
  static __device__ __forceinline__ float hi(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }
  static __host__ __device__ __forceinline__ __nv_bfloat16 from(float a) { return __float2bfloat16_rn(a); }
  static __host__ __device__ __forceinline__ __nv_bfloat16 from_up(float a) { return __float2bfloat16_ru(a); }
  static __host__ __device__ __forceinline__ float to(__nv_bfloat16 a) { return __bfloat162float(a); }
};

// A packed pair w with its high (or low) half replaced by v in the 16-bit type of H.
template <class H>
__device__ __forceinline__ uint32_t pack_at(uint32_t w, bool high, float v) {
  return high ? H::pack(H::lo(w), v) : H::pack(v, H::hi(w));
}

template <class T>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float finite_or_inf(float x) { return isnan(x) ? INFINITY : x; }
__host__ __device__ __forceinline__ float bits_as_float(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// sum_l max(log2 p_l, F) over a group of 16-bit values p_l, with one lg2 per group instead of one per element: each
// normal value is 2^e (1 + m), so the sum is sum_l e_l + log2 prod_l (1 + m_l) (a product of factors in [1, 2): no
// underflow); a value below 2^F (F: the type's smallest normal exponent; zero and subnormals) contributes F. A
// negative, infinite or NaN value makes the sum +inf (the check fails). The lg2 is the caller's (ex2/lg2.approx on
// the device, log2 on the host).
struct Log2Parts {
  int exponents = 0;
  float product = 1.f;
  bool bad = false;
  // Branch-free and without an int-to-float conversion (which issues on the exp's pipe): the mantissa factor 1 + m is
  // the float whose exponent is 0 and whose leading mantissa bits are m, exactly.
  template <bool kBf16>
  __host__ __device__ __forceinline__ void add(unsigned bits16) {
    constexpr int kMantBits = kBf16 ? 7 : 10, kExpMax = kBf16 ? 255 : 31, kBias = kBf16 ? 127 : 15;
    constexpr unsigned kInf = static_cast<unsigned>(kExpMax) << kMantBits;  // from here up: inf, NaN, negative
    const int e = static_cast<int>((bits16 >> kMantBits) & kExpMax);
    exponents += (e > 0 ? e : 1) - kBias;  // zero and subnormals (e = 0): the floor
    const float mant = bits_as_float(0x3f800000u | ((bits16 & ((1u << kMantBits) - 1)) << (23 - kMantBits)));
    product *= e > 0 ? mant : 1.f;
    bad = bad || (bits16 >= kInf && bits16 != 0x8000u);  // -0 is a zero
  }
};

// snvr's duplicated row-sum accumulation (model._row_sum_differs): each lane runs l = alpha l + part and, on negated
// operands, l' = alpha l' - part with the same fma; round-to-nearest is symmetric, so l' = -l exactly and any difference
// is a fault of one copy (a NaN differs too). The negation keeps the two chains apart for the compiler. Host-callable
// (tested against the model).
__host__ __device__ __forceinline__ float row_sum_step(float alpha, float l, float part) { return fmaf(alpha, l, part); }
__host__ __device__ __forceinline__ bool row_sum_differs(float l, float lneg) { return !(l == -lneg); }

// ---- fault injection ---------------------------------------------------------------------------

// The one fault planned for this thread (if any), found once per launch: its index and the step it lands in; the rest
// of the plan is read from the fault list where the fault lands (in registers for the whole kernel it spilled the
// accumulators of the fused kernels).
struct ThreadFault {
  int index;  // into faults / records; -1: none
  int step;
  __device__ __forceinline__ const ftgen::FaultSpec& spec(const ftgen_attention_problem& p) const { return p.faults[index]; }
  // the site and its element (valid with index >= 0)
  __device__ __forceinline__ int site(const ftgen_attention_problem& p) const { return spec(p).elem / FTGEN_ATTN_ELEMS_PER_SITE; }
  __device__ __forceinline__ int elem(const ftgen_attention_problem& p) const { return spec(p).elem % FTGEN_ATTN_ELEMS_PER_SITE; }
};
constexpr ThreadFault kNoFault{-1, -1};

__device__ __forceinline__ ThreadFault find_fault(const ftgen_attention_problem& p, long long block, int thread) {
  for (int i = 0; i < p.fault_count; ++i) {
    const ftgen::FaultSpec& s = p.faults[i];
    if (s.block == block && s.thread == thread) return ThreadFault{i, s.step};
  }
  return kNoFault;
}

// Apply the thread's fault to `x` when it targets (site, elem, step); record it.
__device__ __forceinline__ float maybe_fault(float x, const ThreadFault& f, const ftgen_attention_problem& p, int site, int elem,
                                             int step, long long row, long long col) {
  if (f.index < 0 || f.site(p) != site || f.elem(p) != elem || (site != FTGEN_ATTN_SITE_INV_L && f.step != step)) return x;
  const ftgen::FaultSpec& s = f.spec(p);
  const float y = ftgen::apply_fault<float>(x, s.kind, s.bit, s.offset);
  ftgen::record_fault(p.fault_records ? p.fault_records + f.index : nullptr, p.counters, s.block, s.thread, s.elem, s.step, s.bit, x, y,
                      row, col);
  return y;
}

// The same for one 16-bit half of a packed register (`high`: the upper half); the bit is of the 16-bit value.
template <class T>
__device__ __forceinline__ uint32_t maybe_fault16(uint32_t x, bool high, const ThreadFault& f, const ftgen_attention_problem& p,
                                                  int elem, int step, long long row, long long col) {
  if (f.index < 0 || f.site(p) != FTGEN_ATTN_SITE_P16 || f.elem(p) != elem || f.step != step) return x;
  const ftgen::FaultSpec& s = f.spec(p);
  const float before = high ? Half<T>::hi(x) : Half<T>::lo(x);
  const uint32_t y = s.kind == ftgen::kOffset ? pack_at<Half<T>>(x, high, static_cast<float>(before + s.offset))
                                              : x ^ (1u << ((s.bit & 15) + (high ? 16 : 0)));
  ftgen::record_fault(p.fault_records ? p.fault_records + f.index : nullptr, p.counters, s.block, s.thread, s.elem, s.step, s.bit, before,
                      high ? Half<T>::hi(y) : Half<T>::lo(y), row, col);
  return y;
}

// The same sum for fp16 at a third of the work a value: F = -14, so the product of max(p_l, 2^-14) stays normal in fp32
// for 8 factors (2^-112) and is renormalized after each 8 (its exponent moved into `exponents`); one lg2 per group.
// The floor is taken on the raw 16-bit patterns of a packed pair (floor2: an unsigned max), so a value with its sign
// bit set keeps it, -0 included, and makes the product negative (its lg2 NaN: the check fails); an infinite or NaN
// value makes it infinite or NaN. Host-callable (tested against the model).
// A product's exponent moved into `exponents` (the sign and the mantissa kept, the exponent 0); `bad` set where the
// product is infinite or NaN. On loose registers too (softmax_tile keeps four products beside the exps).
__host__ __device__ __forceinline__ void renormalize(float& product, int& exponents, bool& bad) {
  uint32_t b;
  std::memcpy(&b, &product, sizeof b);
  const int ex = static_cast<int>((b >> 23) & 0xffu);
  bad = bad || ex == 0xff;
  exponents += ex - 127;
  b = (b & 0x807fffffu) | 0x3f800000u;
  std::memcpy(&product, &b, sizeof b);
}

struct ExpProduct16 {
  float product = 1.f;
  int exponents = 0;
  bool bad = false;
  static constexpr uint32_t kFloor2 = 0x02000200u;  // 2^-15 in both halves (fp16: model.P_FLOOR; bf16's is 0x38803880u)
  // fp16 values of the binade below the normal range, [2^-15, 2^-14) (model.EXP_BAND): bits 0x0200-0x03ff
  static __host__ __device__ __forceinline__ int band(uint32_t half) { return (half & 0x7e00u) == 0x0200u; }
  // each 16-bit half of w raised to the pattern's (an unsigned max: a value with its sign bit set keeps it)
  static __host__ __device__ __forceinline__ uint32_t floor2(uint32_t w, uint32_t pattern = kFloor2) {
#ifdef __CUDA_ARCH__
    return __vmaxu2(w, pattern);
#else
    const uint32_t lo = w & 0xffffu, hi = w >> 16, plo = pattern & 0xffffu, phi = pattern >> 16;
    return (lo > plo ? lo : plo) | (hi > phi ? hi : phi) << 16;
#endif
  }
  __host__ __device__ __forceinline__ void renormalize() { ::ftattn::renormalize(product, exponents, bad); }
};

// ---- counters ------------------------------------------------------------------------------------

struct Tally {
  unsigned detected = 0, corrected = 0, recomputed = 0, uncorrectable = 0;
  float max_score = 0.f;
  // the largest |residual| / threshold seen, NaN once a residual was NaN (reported as infinite): four instructions on
  // the device (a floor of the threshold, an approximate reciprocal, a product, a NaN-propagating max), as it runs at
  // every check of every tile
  __host__ __device__ __forceinline__ void score(float residual, float tau) {
#ifdef __CUDA_ARCH__
    float r, m;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fmaxf(tau, 1e-30f)));
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(max_score), "f"(fabsf(residual) * r));
    max_score = m;
#else
    const float s = fabsf(residual) / fmaxf(tau, 1e-30f);
    max_score = isnan(s) || isnan(max_score) ? NAN : fmaxf(max_score, s);
#endif
  }
  __host__ __device__ __forceinline__ float reported_score() const { return isnan(max_score) ? INFINITY : max_score; }
  __device__ __forceinline__ void flush(ftgen::FtCounters* c) const {
    if (!c) return;
    if (detected) atomicAdd(&c->detected, static_cast<unsigned long long>(detected));
    if (corrected) atomicAdd(&c->corrected, static_cast<unsigned long long>(corrected));
    if (recomputed) atomicAdd(&c->recomputed, static_cast<unsigned long long>(recomputed));
    if (uncorrectable) atomicAdd(&c->uncorrectable, static_cast<unsigned long long>(uncorrectable));
    if (!(max_score <= 0.f)) ftgen::record_score(c, static_cast<double>(reported_score()));
  }
  // The fused kernel's counters, once per group of threads that share rows (every thread of it calls): a fault shows in
  // several lanes (a row's four quad lanes) and at several checks (a wrong O element at every later tile until the rows
  // are recomputed), so the group reports whether it detected, corrected, recomputed or gave up, once each; fault plans
  // put at most one fault in a block, and the campaign's rule detected <= faults applied + false alarms holds per fault.
  // The mma kernel's group is the thread block.
  __device__ __forceinline__ void flush_block(ftgen::FtCounters* c) const {
    const bool d = __syncthreads_or(detected > 0) != 0, co = __syncthreads_or(corrected > 0) != 0,
               re = __syncthreads_or(recomputed > 0) != 0, un = __syncthreads_or(uncorrectable > 0) != 0;
    if (!c) return;
    if (threadIdx.x == 0) {
      if (d) atomicAdd(&c->detected, 1ull);
      if (co) atomicAdd(&c->corrected, 1ull);
      if (re) atomicAdd(&c->recomputed, 1ull);
      if (un) atomicAdd(&c->uncorrectable, 1ull);
    }
    if (!(max_score <= 0.f)) ftgen::record_score(c, static_cast<double>(reported_score()));
  }
  // The wgmma kernel's group is a warp (every lane calls). Each counter's ballot elects the lowest lane that has it, so
  // every lane reads every ballot: a vote whose result only lane 0 reads is not enough, since ptxas (CUDA 13.0) may
  // recompute it inside lane 0's branch -- it did for `recomputed`, the predicate the kernel had voted on already for its
  // redo flag, and the vote then saw lane 0 alone.
  __device__ __forceinline__ void flush_warp(ftgen::FtCounters* c) const {
    constexpr unsigned kAll = 0xffffffffu;
    const unsigned lane = threadIdx.x % 32;
    const unsigned bd = __ballot_sync(kAll, detected > 0), bc = __ballot_sync(kAll, corrected > 0),
                   br = __ballot_sync(kAll, recomputed > 0), bu = __ballot_sync(kAll, uncorrectable > 0);
    if (!c) return;
    if (bd && lane == static_cast<unsigned>(__ffs(bd) - 1)) atomicAdd(&c->detected, 1ull);
    if (bc && lane == static_cast<unsigned>(__ffs(bc) - 1)) atomicAdd(&c->corrected, 1ull);
    if (br && lane == static_cast<unsigned>(__ffs(br) - 1)) atomicAdd(&c->recomputed, 1ull);
    if (bu && lane == static_cast<unsigned>(__ffs(bu) - 1)) atomicAdd(&c->uncorrectable, 1ull);
    if (!(max_score <= 0.f)) ftgen::record_score(c, static_cast<double>(reported_score()));
  }
};

// Position l (0..nl-1) of a single fault in a group from its residuals, or -1 (model._locate).
__host__ __device__ __forceinline__ int locate(float r1, float r2, float tau2, int nl, float u32) {
  if (!isfinite(r1) || !isfinite(r2) || !(fabsf(r1) > 2.f * tau2)) return -1;
  const float ratio = r2 / r1;
  if (!(fabsf(ratio) < 1e9f)) return -1;
#ifdef __CUDA_ARCH__
  const int j = __float2int_rn(ratio);
#else
  const int j = static_cast<int>(rintf(ratio));  // to nearest, ties to even, as __float2int_rn
#endif
  if (j < 1 || j > nl) return -1;
  if (fabsf(r2 - j * r1) > tau2 + 4.f * (nl + 1) * u32 * fabsf(r2)) return -1;
  return j - 1;
}

// The sum and the index-weighted sum (weights 1..N) of a stride-8 group: element e of the thread's N n8 blocks.
template <int N>
__host__ __device__ __forceinline__ void group_sums(const float (&acc)[N][4], int e, float& g1, float& g2) {
  g1 = 0.f, g2 = 0.f;
#pragma unroll
  for (int l = 0; l < N; ++l) {
    g1 += acc[l][e];
    g2 = fmaf(static_cast<float>(l + 1), acc[l][e], g2);
  }
}

// The one wrong element of a group g[0..N): located from the residuals, else, where the residual is not finite and
// `c1_finite`, the only non-finite element; -1 when neither (model._locate).
template <int N>
__host__ __device__ __forceinline__ int locate_in(const float (&g)[N], float r1, float r2, float tau2, float u32, bool c1_finite) {
  int pos = locate(r1, r2, tau2, N, u32);
  if (pos < 0 && !isfinite(r1) && c1_finite) {  // an element made non-finite shows itself
    int bad = 0;
#pragma unroll
    for (int l = 0; l < N; ++l)
      if (!isfinite(g[l])) { pos = l; ++bad; }
    if (bad != 1) pos = -1;
  }
  return pos;
}

// The corrected value of element pos of a group g: `sum` minus the rest of the group.
template <int N>
__host__ __device__ __forceinline__ float corrected_value(const float (&g)[N], int pos, float sum) {
  float others = 0.f;
#pragma unroll
  for (int l = 0; l < N; ++l)
    if (l != pos) others += g[l];
  return sum - others;
}

// Group e (known at compile time) of a [N][4] fragment as a group.
template <int N>
__device__ __forceinline__ void group_at(const float (&acc)[N][4], int e, float (&g)[N]) {
#pragma unroll
  for (int l = 0; l < N; ++l) g[l] = acc[l][e];
}

// locate_in on group e of a fragment.
template <int N>
__device__ __forceinline__ int locate_group(const float (&acc)[N][4], int e, float r1, float r2, float tau2, float u32,
                                            bool c1_finite) {
  float g[N];
  group_at(acc, e, g);
  return locate_in(g, r1, r2, tau2, u32, c1_finite);
}

// Element pos of group e := `sum` minus the rest of the group.
template <int N>
__device__ __forceinline__ void correct_group(float (&acc)[N][4], int e, int pos, float sum) {
  float g[N];
  group_at(acc, e, g);
  const float v = corrected_value(g, pos, sum);
#pragma unroll
  for (int l = 0; l < N; ++l)
    if (l == pos) acc[l][e] = v;
}

// Entry e (0-3, known at run time) of a per-group quadruple, by selects.
__host__ __device__ __forceinline__ float group_of(const float (&x)[4], int e) { return e == 0 ? x[0] : e == 1 ? x[1] : e == 2 ? x[2] : x[3]; }
// Entry h (0, 1, known at run time) of a per-row pair, by a select.
template <class V>
__host__ __device__ __forceinline__ V row_of(const V (&x)[2], int h) {
  return h ? x[1] : x[0];
}

// Group e (known at run time) of a [N][4] fragment against its checksums c1 (unit) and c2 (weighted): the residuals
// recomputed as at detection (group_sums' order), the one wrong element located (locate_in) and set to c1 minus the
// rest; false where it cannot be located. The group's elements are gathered and written back by selects, so a check's
// correction is one copy of this code in a loop over its flagged groups (one per group made the fused kernels' code
// several times larger than the instruction cache, for a path that runs only after a fault).
template <int N>
__host__ __device__ __forceinline__ bool fix_group(float (&acc)[N][4], int e, float c1, float c2, float tau2, float u32, bool c1_finite) {
  float g[N], g1 = 0.f, g2 = 0.f;
#pragma unroll
  for (int l = 0; l < N; ++l) {
    g[l] = e == 0 ? acc[l][0] : e == 1 ? acc[l][1] : e == 2 ? acc[l][2] : acc[l][3];
    g1 += g[l];
    g2 = fmaf(static_cast<float>(l + 1), g[l], g2);
  }
  const int pos = locate_in(g, c1 - g1, c2 - g2, tau2, u32, c1_finite);
  if (pos < 0) return false;
  const float v = corrected_value(g, pos, c1);
#pragma unroll
  for (int l = 0; l < N; ++l)
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (l == pos && k == e) acc[l][k] = v;
  return true;
}

// The detection pass of a check: group e of the fragment against its unit checksum (the sum of the blocks `c`: its
// high and low halves, or one block) at threshold tau(e), its score recorded; bit e of the result set where the residual
// exceeds it (`non_finite`: or is not finite, however large the threshold). With `sums_out`, the group sums go there.
template <int N, class Tau, class... Cs>
__host__ __device__ __forceinline__ unsigned flag_groups(const float (&acc)[N][4], Tau tau, bool non_finite, Tally& tally, float* sums_out,
                                                         const Cs&... c) {
  unsigned flagged = 0;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float g1, g2;
    group_sums(acc, e, g1, g2);
    if (sums_out) sums_out[e] = g1;
    const float r1 = (c[e] + ...) - g1, t = tau(e);
    tally.score(r1, t);
    if (!(fabsf(r1) <= t) || (non_finite && !isfinite(r1))) flagged |= 1u << e;
  }
  return flagged;
}

// The correction pass of a check over its flagged groups (bit e of `flagged`): counts the detections, and with `fix`
// each group's correction (fix_group with what `sums(e, c1, c2, tau2)` gives for group e, recomputed here so that no
// per-group arrays stay live beside the accumulators) and the corrections; returns whether a group could not be located.
template <int N, class Sums>
__host__ __device__ __forceinline__ bool fix_flagged(float (&acc)[N][4], unsigned flagged, Sums sums, bool check_c1, float u32, bool fix, Tally& tally) {
#ifdef __CUDA_ARCH__
  tally.detected += __popc(flagged);
#else
  tally.detected += __builtin_popcount(flagged);
#endif
  if (!fix) return false;
  bool failed = false;
#pragma unroll 1
  for (int e = 0; e < 4; ++e) {
    if (!((flagged >> e) & 1u)) continue;
    float c1, c2, tau2;
    sums(e, c1, c2, tau2);
    if (fix_group(acc, e, c1, c2, tau2, u32, !check_c1 || isfinite(c1))) ++tally.corrected;
    else failed = true;
  }
  return failed;
}

// ---- the steps every fused kernel shares (mma and wgmma backends) ----------------------------------------------
// Both keep a tile's products in the m16n8 accumulator layout (the wgmma D fragment repeats it per warp): float
// [n8 block][4] with element e at row half e / 2, column cq + e % 2, so every check below is thread-local but the
// row max's vote and the row sums.

// The per-row state of the online softmax: the running max, the thread's partial row sum, snvr's negated duplicate
// of it (model._row_sum_differs) and the lower bound of the row sum from the tile maxima (model: rowsum range).
struct Rows {
  float m[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f}, lneg[2] = {0.f, 0.f}, lb[2] = {0.f, 0.f};
};

// Where a tile's injected fault lands: the thread's planned fault, whether it falls in this tile (`hit`), the tile,
// and the positions of the thread's rows and first column (for the fault record).
struct At {
  const ThreadFault& f;
  const ftgen_attention_problem& p;
  bool hit;
  int j, k0, cq;
  int qrow[2];
};

// Element i (row-major) of a register fragment, read and written by selects: an index known only at run time would
// otherwise put the fragment in local memory. A fault site reads its element once, faults it once (one inlined copy
// of the fault and its record, not one per element: per-element copies made the protected kernels' code several times
// larger than the instruction cache) and writes it back.
template <class V, int N, int K>
__device__ __forceinline__ V pick(const V (&x)[N][K], int i) {
  V v = x[0][0];
#pragma unroll
  for (int k = 0; k < N * K; ++k)
    if (k == i) v = x[k / K][k % K];
  return v;
}
template <class V, int N, int K>
__device__ __forceinline__ void put(V (&x)[N][K], int i, V v) {
#pragma unroll
  for (int k = 0; k < N * K; ++k)
    if (k == i) x[k / K][k % K] = v;
}

// The thread's planned fault of a per-row scalar `site` (elem: the row half h) applied to x[h] at step j, one copy of the
// fault's code for both halves (callers branch on whether the fault is in the tile).
__device__ __forceinline__ void inject_row(float (&x)[2], const ThreadFault& f, const ftgen_attention_problem& p, int site, int j,
                                           const int (&qrow)[2]) {
  if (f.index < 0 || f.site(p) != site || f.elem(p) > 1) return;
  const int h = f.elem(p);
  const float y = maybe_fault(row_of(x, h), f, p, site, h, j, row_of(qrow, h), -1);
  if (h) x[1] = y;
  else x[0] = y;
}

// The thread's planned fault of `site` applied to its [n8 block][4] fragment x at tile j; col0: the column of the
// fragment's first n8 block (the tile's first key for S, 0 for O). Callers branch on whether the fault is in the tile.
template <int N>
__device__ __forceinline__ void inject_blocks(float (&x)[N][4], const ThreadFault& f, const ftgen_attention_problem& p, int site, int j,
                                              const int (&qrow)[2], int col0, int cq) {
  if (f.index < 0 || f.site(p) != site || f.step != j || f.elem(p) >= 4 * N) return;
  const int i = f.elem(p), e = i % 4;
  put(x, i, maybe_fault(pick(x, i), f, p, site, i, j, row_of(qrow, e / 2), col0 + (i / 4) * 8 + cq + (e & 1)));
}

// S's keys past seq_k, and under a causal mask the keys after the row, set to -inf (k0: the tile's first key).
template <bool kCausal, int NT>
__device__ __forceinline__ void mask_tile(float (&s)[NT][4], int k0, int seq_k, const int (&qrow)[2], int cq) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k0 + n * 8 + cq + (e & 1);
      if (!(key < seq_k && (!kCausal || key <= qrow[e / 2]))) s[n][e] = -INFINITY;
    }
}

// Row half h of every n8 block of x times a[h] (the rescale of O and its checksum blocks).
template <int N>
__device__ __forceinline__ void scale_rows(float (&x)[N][4], const float (&a)[2]) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
    x[n][0] *= a[0];
    x[n][1] *= a[0];
    x[n][2] *= a[1];
    x[n][3] *= a[1];
  }
}

// The thread's two rows of O (of the head's [seq_q][8 ND] output; rows past seq_q skipped) in the 16-bit type.
template <class T, int ND>
__device__ __forceinline__ void store_rows(T* O, const float (&o)[ND][4], const int (&qrow)[2], int seq_q, int cq) {
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (qrow[h] < seq_q)
        *reinterpret_cast<uint32_t*>(O + static_cast<long long>(qrow[h]) * (8 * ND) + n * 8 + cq) = Half<T>::pack(o[n][2 * h], o[n][2 * h + 1]);
}

// The S check of the strided levels: each of the thread's four groups against the checksum blocks sc (unit,
// weighted: each K checksum one 16-bit row) at model.s_threshold; a located fault is corrected in place. qn: the
// norms of the thread's two rows; kn, klo, kc2: per group g = cq, cq + 1 the sum of its keys' norms,
// ||Kc1[g] - hi(Kc1[g])|| (what rounding the unit checksum into T left out) and ||Kc2[g]||^2. Returns whether a group
// could not be located (the caller recomputes). With `gsums`, the four group sums of S as checked go there and
// `*flagged_out` says which groups the check flagged (the exp check's fast path takes the others' sums). Host-callable:
// tests/test_attention_family.py runs it on faults.
template <int NT>
__host__ __device__ __forceinline__ bool check_s(float (&s)[NT][4], const float (&sc)[2][4], const float (&qn)[2], const float (&kn)[2],
                                                 const float (&klo)[2], const float (&kc2)[2], int D, const Rules& rules, bool fix,
                                                 Tally& tally, float* gsums = nullptr, unsigned* flagged_out = nullptr) {
  const float unit = 2.f * rules.u_acc * (rules.c_sqrt * sqrtf(static_cast<float>(D)) + rules.c_const) + 2.f * NT * rules.u32;
  // the threshold over ||q||, per group
  const float kt[2] = {fmaf(kn[0], unit, rules.s_lo_margin * klo[0]), fmaf(kn[1], unit, rules.s_lo_margin * klo[1])};
  const unsigned flagged = flag_groups(s, [&](int e) { return qn[e / 2] * kt[e & 1]; }, false, tally, gsums, sc[0]);
  if (flagged_out) *flagged_out = flagged;
  const auto sums = [&](int e, float& c1, float& c2, float& tau2) {
    const float q = row_of(qn, e >> 1);
    c1 = group_of(sc[0], e);
    c2 = group_of(sc[1], e);
    tau2 = q * row_of(kt, e & 1) * (NT + 1) + rules.u_in * q * sqrtf(row_of(kc2, e & 1));
  };
  return flagged && fix_flagged(s, flagged, sums, false, rules.u32, fix, tally);
}

// One tile of the online softmax on the masked S tile: the row max (snvr: the quad's copies vote), the exps packed to
// the 16-bit type in pk (snvr: checked per group in the log domain), the rescale factor alpha (snvr: checked against
// its argument) and the row sums; the faults of the sites rowmax, exp, p16, rescale and rowsum are applied here.
// Returns whether an exp check failed (with `fix`): the caller recomputes the rows. With C::kExpFast, `sg` holds the S
// check's group sums of this tile and `fast_tile` says that no key of it is masked and the S check flagged no group.
template <class C>
__device__ __forceinline__ bool softmax_tile(float (&s)[C::NT][4], uint32_t (&pk)[C::NT][2], float (&alpha)[2], Rows& st, const At& at,
                                             float sl2, const Rules& rules, bool fix, Tally& tally, const float* sg = nullptr,
                                             bool fast_tile = false) {
  using H = Half<typename C::T>;
  const ThreadFault& fault = at.f;
  const ftgen_attention_problem& p = at.p;
  const bool hit = at.hit;
  const int j = at.j, k0 = at.k0, cq = at.cq;
  const int(&qrow)[2] = at.qrow;
  float(&m)[2] = st.m;
  float(&lsum)[2] = st.lsum;
  float(&lneg)[2] = st.lneg;
  float(&lb)[2] = st.lb;
  float mt[2], mnew[2], smin[2];  // smin: the thread's smallest score per row half (the exp check's fast path)
  bool recompute = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float x = -INFINITY, y = INFINITY;
#pragma unroll
    for (int n = 0; n < C::NT; ++n) {
      x = fmaxf(x, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
      if (C::kExpFast) y = fminf(y, fminf(s[n][2 * h], s[n][2 * h + 1]));
    }
    smin[h] = y;
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    mt[h] = x;
    mnew[h] = fmaxf(m[h], x);
  }
  if (hit) inject_row(mnew, fault, p, FTGEN_ATTN_SITE_ROWMAX, j, qrow);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (C::kSnvr) {
      // the quad's four copies vote; a single corrupted copy is outvoted (model: rowmax)
      const float b = __shfl_xor_sync(0xffffffffu, mnew[h], 1);
      const float c = __shfl_xor_sync(0xffffffffu, mnew[h], 2);
      const float d = __shfl_xor_sync(0xffffffffu, mnew[h], 3);
      const bool same = mnew[h] == b && mnew[h] == c && mnew[h] == d;
      if (!same && !(mnew[h] == b && mnew[h] == c) && !(mnew[h] == b && mnew[h] == d) && !(mnew[h] == c && mnew[h] == d)) {
        // this copy is not in a majority of three
        ++tally.detected;
        if (fix) {
          if (b == c && c == d) {
            mnew[h] = b;
            ++tally.corrected;
          } else {
            mnew[h] = fmaxf(m[h], mt[h]);
            ++tally.recomputed;
          }
        }
      }
    }
  }

  // ---- exp, conversion, the exp check -------------------------------------------------------
  // x = s sl2 - msl with the row max in the exp's units, 0 where the row has seen no key yet (every s -inf): a masked
  // key's x is -inf (its exp 0), never NaN, with one FFMA an element. snvr sums max(x, F) per group as the exps are
  // taken; S is not live past them (its registers go to the check and the second product), so a group that fails the
  // exp check has its rows recomputed (the caller's).
  float msl[2], xs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int h = 0; h < 2; ++h) msl[h] = mnew[h] == -INFINITY ? 0.f : mnew[h] * sl2;
  // the planned fault of element fi's exp (before its conversion) or of its 16-bit value (after it), taken before the
  // exps, where S is the only tile live: the exp recomputed (the same instruction on the same operands) and faulted;
  // fv is put in pk after the conversions (an exp's value rounded as any other, a 16-bit value's exact)
  int fi = -1;
  float fv = 0.f;
  if (hit && (fault.site(p) == FTGEN_ATTN_SITE_EXP || fault.site(p) == FTGEN_ATTN_SITE_P16) && fault.elem(p) < 4 * C::NT) {
    fi = fault.elem(p);
    const int e = fi % 4, key = k0 + (fi / 4) * 8 + cq + (e & 1);
    const float pv = ex2(fmaf(pick(s, fi), sl2, -row_of(msl, e / 2)));
    fv = fault.site(p) == FTGEN_ATTN_SITE_EXP
             ? maybe_fault(pv, fault, p, FTGEN_ATTN_SITE_EXP, fi, j, row_of(qrow, e / 2), key)
             : H::lo(maybe_fault16<typename C::T>(H::pack(pv, 0.f), false, fault, p, fi, j, row_of(qrow, e / 2), key));
  }
  // The exp check's p side, sum_l max(log2 p16_l, F), for fp16 (ExpProduct16: the floored values multiplied, an lg2 per
  // group) accumulates in the exp loop, whose time the exps' MUFU throughput sets: the floors, conversions and
  // products issue beside them (measured: the same work after the loop cost 3-5% more). bf16's Log2Parts runs after it.
  // bf16's fast path (C::kExpFast; model.exp_fast_groups, exp_fast_threshold), decided per thread before the exps:
  // where every x of the thread's four groups is at least -13 (from its smallest score), no key of the tile is masked,
  // the S check flagged no group and |msl| <= EXP_FAST_MSL, no floor acts, so the x side sum_l x_l is fma(sl2, g1,
  // -NT msl) from the S check's group sum g1, and the p side is the plain product (a value a fault made smaller
  // moves the sum by its log; a zero or a flushed subnormal makes it -inf or moves it by 127).
  bool fast = false;
  if constexpr (C::kExpFast)
    fast = fast_tile && fabsf(msl[0]) <= rules.exp_fast_msl && fabsf(msl[1]) <= rules.exp_fast_msl &&
           fmaf(smin[0], sl2, -msl[0]) >= -13.f && fmaf(smin[1], sl2, -msl[1]) >= -13.f;  // model.EXP_FAST_LOG2
  constexpr uint32_t kFloor2 = H::kBf16 ? 0x38803880u : ExpProduct16::kFloor2;  // bf16: 2^-14 in both halves
  // group e's product (row half e / 2, the words' low halves for even e, high for odd) and the exponents moved out of
  // it: ExpProduct16's, in registers
  float prod[4] = {1.f, 1.f, 1.f, 1.f};
  int pexp[4] = {0, 0, 0, 0};
  bool pbad = false;
  const auto exps = [&](auto sum_x, auto mul_p) {
#pragma unroll
    for (int n = 0; n < C::NT; ++n) {
      float pv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = fmaf(s[n][e], sl2, -msl[e / 2]);
        pv[e] = ex2(x);
        if (decltype(sum_x)::value) xs[e] += fmaxf(x, rules.p_floor);  // max(x, F) takes F where x is -inf (a masked key)
      }
      pk[n][0] = H::pack(pv[0], pv[1]);
      pk[n][1] = H::pack(pv[2], pv[3]);
      if constexpr (decltype(mul_p)::value) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const uint32_t w = ExpProduct16::floor2(pk[n][k], kFloor2);
          prod[2 * k] *= H::lo(w);
          prod[2 * k + 1] *= H::hi(w);
        }
        if (n % 8 == 7 && n + 1 < C::NT)
#pragma unroll
          for (int e = 0; e < 4; ++e) renormalize(prod[e], pexp[e], pbad);
      }
    }
  };
  using kSnvr = std::integral_constant<bool, C::kSnvr>;
  using kNo = std::false_type;
  if constexpr (!H::kBf16) exps(kSnvr{}, kSnvr{});
  else if (fast) exps(kNo{}, kNo{});
  else exps(kSnvr{}, kNo{});
  if (fi >= 0) {  // word fi / 2, its high half where fi is odd; fp16's product has the value before the fault
    const uint32_t before = pick(pk, fi / 2), after = pack_at<H>(before, fi & 1, fv);
    put(pk, fi / 2, after);
    if (C::kSnvr && !H::kBf16) {
      const uint32_t b = ExpProduct16::floor2(before, kFloor2), a = ExpProduct16::floor2(after, kFloor2);
      const float ratio = (fi & 1) ? H::hi(a) / H::hi(b) : H::lo(a) / H::lo(b);
#pragma unroll
      for (int e = 0; e < 4; ++e) prod[e] *= e == fi % 4 ? ratio : 1.f;  // selects: an index would put prod in memory
    }
  }
  if (C::kSnvr) {
    // per group: sum_l max(log2 p16_l, F) - sum_l max(x_l, F) (model: exp_threshold), one lg2 per group
    float res[4], tau = rules.exp_tau;
    if (H::kBf16 && fast) {  // the product after the loop, beside the exps it spilled registers (the values are >= 2^-13)
#pragma unroll
      for (int n = 0; n < C::NT; ++n) {
#pragma unroll
        for (int k = 0; k < 2; ++k) prod[2 * k] *= H::lo(pk[n][k]), prod[2 * k + 1] *= H::hi(pk[n][k]);
        if (n % 8 == 7 && n + 1 < C::NT)
#pragma unroll
          for (int e = 0; e < 4; ++e) renormalize(prod[e], pexp[e], pbad);
      }
    }
    if (!H::kBf16 || fast) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float xside = C::kExpFast && fast ? fmaf(sl2, sg[e], -static_cast<float>(C::NT) * msl[e / 2]) : xs[e];
        res[e] = pbad ? INFINITY : static_cast<float>(pexp[e]) + lg2(prod[e]) - xside;
      }
      if (C::kExpFast && fast) tau = rules.exp_tau_fast;
    } else if constexpr (H::kBf16) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        Log2Parts parts;
#pragma unroll
        for (int l = 0; l < C::NT; ++l) parts.add<true>((e & 1) ? (pk[l][e / 2] >> 16) : (pk[l][e / 2] & 0xffffu));
        res[e] = parts.bad ? INFINITY : static_cast<float>(parts.exponents) + lg2(parts.product) - xs[e];
      }
    }
    // the hot path takes no branch per group: a group over tau is scored in the rare branch, where fp16 judges it again
    // with its values below the normal range counted (one threshold, one reciprocal for the four groups' scores)
    bool over[4], any = false;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      over[e] = !(fabsf(res[e]) <= tau);
      any |= over[e];
      tally.score(over[e] ? 0.f : res[e], tau);
    }
    if (any) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (!over[e]) continue;
        float t = tau;
        if constexpr (!H::kBf16) {
          int band = 0;
#pragma unroll
          for (int n = 0; n < C::NT; ++n) band += ExpProduct16::band((e & 1) ? (pk[n][e / 2] >> 16) : (pk[n][e / 2] & 0xffffu));
          t = fmaf(static_cast<float>(band), rules.exp_band, tau);
        }
        tally.score(res[e], t);
        if (!(fabsf(res[e]) <= t)) {
          ++tally.detected;
          if (fix) recompute = true;
        }
      }
    }
  }

  // ---- rescale factor, row sum ------------------------------------------------------------------
#pragma unroll
  for (int h = 0; h < 2; ++h) alpha[h] = ex2(m[h] == -INFINITY ? -INFINITY : (m[h] - mnew[h]) * sl2);
  if (hit) inject_row(alpha, fault, p, FTGEN_ATTN_SITE_RESCALE, j, qrow);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float arg = m[h] == -INFINITY ? -INFINITY : (m[h] - mnew[h]) * sl2;
    if (C::kSnvr) {
      const float a = fmaxf(arg, -126.f);
      const float ra = fmaxf(finite_or_inf(lg2(alpha[h])), -126.f) - a;
      const float ta = 2.f * rules.u_mufu * 1.4426950408889634f * 1.01f + rules.u_mufu * (1.f + fabsf(a));
      tally.score(ra, ta);
      if (!(fabsf(ra) <= ta) || alpha[h] > 1.f) {
        ++tally.detected;
        if (fix) {
          alpha[h] = ex2(arg);
          ++tally.recomputed;
        }
      }
      const float targ = mt[h] == -INFINITY ? -INFINITY : (mt[h] - mnew[h]) * sl2;
      lb[h] = lb[h] * alpha[h] + ex2(targ);
    }
    if constexpr (!C::kRowSumTc) {  // else the caller's product P [V | 1] sums the row (its row-sum fault is there)
      float part = 0.f;
#pragma unroll
      for (int n = 0; n < C::NT; ++n) part += H::lo(pk[n][h]) + H::hi(pk[n][h]);
      lsum[h] = row_sum_step(alpha[h], lsum[h], part);
      if (C::kSnvr && !C::kUnified) lneg[h] = row_sum_step(alpha[h], lneg[h], -part);
    }
    m[h] = mnew[h];
  }
  if (!C::kRowSumTc && hit) inject_row(lsum, fault, p, FTGEN_ATTN_SITE_ROWSUM, j, qrow);
  return recompute;
}

// The strided level's O check after every tile, unnormalized: the threshold's scale is the accumulated group
// magnitude oc[3] (model.o_threshold), the weighted checksum's rounding bound max |Vc2| (vmag2) times the running row
// sum. A located fault is corrected in place; returns whether one could not be (the caller recomputes the rows).
template <int ND>
__device__ __forceinline__ bool check_o_tile(float (&o)[ND][4], const float (&oc)[4][4], const float (&lsum)[2], int keys_seen, int j,
                                             const float (&vmag2)[2], const Rules& rules, bool fix, Tally& tally) {
  float lf[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float t = lsum[h] + __shfl_xor_sync(0xffffffffu, lsum[h], 1);
    lf[h] = fmaxf(t + __shfl_xor_sync(0xffffffffu, t, 2), 1e-30f);
  }
  const float unit = 2.f * rules.u_acc * (rules.c_sqrt * sqrtf(static_cast<float>(keys_seen)) + rules.c_const + (j + 1) + ND) +
                     rules.u_in * rules.u_in;
  const unsigned flagged = flag_groups(o, [&](int e) { return oc[3][e] * unit; }, true, tally, nullptr, oc[0], oc[1]);
  const auto sums = [&](int e, float& c1, float& c2, float& tau2) {
    c1 = group_of(oc[0], e) + group_of(oc[1], e);
    c2 = group_of(oc[2], e);
    tau2 = group_of(oc[3], e) * unit * (ND + 1) + rules.u_in * row_of(vmag2, e & 1) * row_of(lf, e >> 1);
  };
  return flagged && fix_flagged(o, flagged, sums, true, rules.u32, fix, tally);
}

// After the last tile: the row sums over the quad (C::kRowSumTc: the row sum's columns of oc, from block 4, in every lane),
// snvr's checks of the row sum (its range, the lane's duplicate) and of 1/l, the normalization of O, and efta's
// unified verification of O (the V checksum's +1 carries the row sum through every rescale and the normalization; with
// the row sum from the tensor cores, its column and the +1 are two accumulations of it). The fault of site inv_l is
// applied here (`inj`: this run injects). Located faults are corrected in place; returns whether the rows must be
// recomputed.
template <class C, int NOC>
__device__ __forceinline__ bool finish_rows(float (&o)[C::ND][4], const float (&oc)[NOC][4], const Rows& st, const float (&vmag2)[2],
                                            int keys_seen, int n_tiles, const int (&qrow)[2], const ThreadFault& fault,
                                            const ftgen_attention_problem& p, bool inj, const Rules& rules, bool fix, Tally& tally) {
  const float(&lsum)[2] = st.lsum;
  const float(&lneg)[2] = st.lneg;
  const float(&lb)[2] = st.lb;
  float lfull[2], inv[2];
  bool redo = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if constexpr (C::kRowSumTc) {
      static_assert(NOC > 4, "the row sum's columns follow O's four checksum blocks");
      lfull[h] = oc[4][2 * h];
    } else {
      const float t = lsum[h] + __shfl_xor_sync(0xffffffffu, lsum[h], 1);
      lfull[h] = t + __shfl_xor_sync(0xffffffffu, t, 2);
    }
    if (C::kSnvr) {
      const int vis = C::kCausal ? min(p.seq_k, qrow[h] + 1) : p.seq_k;
      const float tol = C::BN * rules.u_in + (n_tiles + 1) * 4.f * rules.u_mufu;
      bool bad = !(lfull[h] >= lb[h] * (1.f - tol) && lfull[h] <= vis * (1.f + tol));
      if (!C::kUnified) bad = bad || row_sum_differs(lsum[h], lneg[h]);  // this lane's copy or its duplicate is off
      if (bad) {
        ++tally.detected;
        if (fix) redo = true;
      }
    }
    inv[h] = 1.f / lfull[h];
  }
  if (C::kInject && inj) inject_row(inv, fault, p, FTGEN_ATTN_SITE_INV_L, 0, qrow);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (C::kSnvr) {  // efta too: a wrong 1/l large enough to overflow O's threshold would pass the unified check
      const float ri = lfull[h] * inv[h] - 1.f;
      if (!(fabsf(ri) <= 4.f * rules.u_mufu)) {
        ++tally.detected;
        if (fix) {
          inv[h] = 1.f / lfull[h];
          ++tally.recomputed;
        }
      }
    }
  }
#pragma unroll
  for (int n = 0; n < C::ND; ++n) {
    o[n][0] *= inv[0];
    o[n][1] *= inv[0];
    o[n][2] *= inv[1];
    o[n][3] *= inv[1];
  }
  if (C::kUnified) {
    const float unit = 2.f * rules.u_acc * (rules.c_sqrt * sqrtf(static_cast<float>(keys_seen)) + rules.c_const + n_tiles + 1 + C::ND) +
                       rules.u_in * rules.u_in;
    float r1[4], r2[4], c1[4], tau[4], tau2[4];
    bool flagged[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float g1, g2;
      group_sums(o, e, g1, g2);
      c1[e] = (oc[0][e] + oc[1][e]) * inv[e / 2];
      const float c2 = oc[2][e] * inv[e / 2];
      r1[e] = c1[e] - g1 - 1.f;
      r2[e] = c2 - g2;
      // the P-weighted group magnitude, rescaled and normalized like O: sum_c w_c (1 + sum_l |V[c][g+8l]|)
      tau[e] = oc[3][e] * inv[e / 2] * unit;
      tau2[e] = tau[e] * (C::ND + 1) + rules.u_in * vmag2[e & 1];
      tally.score(r1[e], tau[e]);
      flagged[e] = !(fabsf(r1[e]) <= tau[e]) || !isfinite(r1[e]);  // a non-finite residual fails any threshold
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!flagged[2 * h] && !flagged[2 * h + 1]) continue;
      ++tally.detected;
      if (!fix) continue;
      bool quiet[2];
#pragma unroll
      for (int gi = 0; gi < 2; ++gi) {
        const int e = 2 * h + gi;
        quiet[gi] = fabsf(r1[e]) > 2.f * tau2[e] && fabsf(r2[e]) <= tau2[e] + 4.f * (C::ND + 1) * rules.u32 * fabsf(oc[2][e] * inv[h]);
      }
      if (flagged[2 * h] && flagged[2 * h + 1] && quiet[0] && quiet[1]) {
        // a row scale (row sum or 1/l): (O_c1 - sum O) = l_mma / l' in both groups; O is off by that factor
        const float f = r1[2 * h] + 1.f;
        if (isfinite(f) && f > 0.f && fabsf(r1[2 * h + 1] - r1[2 * h]) <= 2.f * (tau[2 * h] + tau[2 * h + 1]) + 1e-3f * f) {
#pragma unroll
          for (int n = 0; n < C::ND; ++n) {
            o[n][2 * h] /= f;
            o[n][2 * h + 1] /= f;
          }
          ++tally.corrected;
          continue;
        }
      }
      bool all_fixed = true;
#pragma unroll
      for (int gi = 0; gi < 2; ++gi) {
        const int e = 2 * h + gi;
        if (!flagged[e]) continue;
        const int pos = locate_group(o, e, r1[e], r2[e], tau2[e], rules.u32, isfinite(c1[e]));
        if (pos >= 0) {
          correct_group(o, e, pos, c1[e] - 1.f);
        } else if (!(quiet[gi] && !flagged[2 * h + 1 - gi])) {  // quiet alone: only the checksum is off
          all_fixed = false;
        }
      }
      if (all_fixed) ++tally.corrected;
      else redo = true;
    }
  }
  return redo;
}

// ---- the fused kernel ------------------------------------------------------------------------------

template <class T_, int D_, int BM_, int BN_, bool CAUSAL_, int LEVEL_, bool INJECT_>
struct Config : Levels<LEVEL_> {
  using T = T_;
  using L = Levels<LEVEL_>;
  using L::kStrided;
  static constexpr int D = D_, BM = BM_, BN = BN_;
  static constexpr bool kCausal = CAUSAL_;
  static constexpr bool kInject = INJECT_;
  static constexpr int kWarps = BM / 16;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int NT = BN / 8;   // n8 blocks of an S tile
  static constexpr int ND = D / 8;    // n8 blocks of O
  static constexpr int KD = D / 16;   // k16 steps of Q K^T
  static constexpr int KN = BN / 16;  // k16 steps of P V
  static constexpr int CK = kStrided ? 16 : 0;   // checksum rows of K: unit, weighted
  static constexpr int CKV = kStrided ? 32 : 0;  // columns of V: hi, lo, weighted, magnitude
  static constexpr int LDQ = D + 8;             // shared-memory row pitches (elements; +8: bank spread)
  static constexpr int LDK = D + 8;
  static constexpr int LDV = D + CKV + 8;
  static constexpr int kSmemQ = BM * LDQ * 2;
  static constexpr int kSmemK = (BN + CK) * LDK * 2;
  static constexpr int kSmemV = BN * LDV * 2;
  static constexpr int kSmemF = (BN + BM + 24) * 4;  // key norms, query norms, per-group scratch (sG)
  static constexpr int kSmem = kSmemQ + kSmemK + kSmemV + kSmemF;
  static_assert(D % 16 == 0 && BN % 16 == 0 && BM % 16 == 0, "tile shapes");
};

// Stage rows [r0, r0 + rows) of a [n][D] matrix into shared memory (pitch ld), zero past n.
template <class C>
__device__ __forceinline__ void stage(typename C::T* dst, int ld, const typename C::T* src, int r0, int rows, int n) {
  constexpr int kVec = 8;  // 16-byte accesses
  constexpr int kPerRow = C::D / kVec;
  for (int i = threadIdx.x; i < rows * kPerRow; i += C::kThreads) {
    const int r = i / kPerRow, c = (i % kPerRow) * kVec;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < n) val = *reinterpret_cast<const uint4*>(src + static_cast<long long>(r0 + r) * C::D + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = val;
  }
}

// ---- the K / V encodings of the strided levels, once per launch ----------------------------------------
// The checksum rows of K (unit, weighted), the checksum and magnitude columns of V, the key norms and the per-group
// scalars sG depend on the key tile only, not on the query block: encode_kv_kernel computes them once per (batch,
// K / V head, key tile) into the workspace (grouped query heads share them), and each block of flash_kernel stages
// them with the tile. Layout per tile: K rows [16][D] and V columns [BN][32] of T, key norms [BN] and sG[0..23] as
// floats (sG[16..23] as norms: encode_tile leaves their squares).
template <class C>
struct EncLayout {
  static constexpr int kKBytes = 16 * C::D * 2;
  static constexpr int kVBytes = C::BN * 32 * 2;
  static constexpr int kNBytes = C::BN * 4;
  static constexpr int kGBytes = 24 * 4;
  static constexpr int kBytes = (kKBytes + kVBytes + kNBytes + kGBytes + 15) / 16 * 16;
};

template <class C>
__host__ __device__ inline long long key_tiles(const ftgen_attention_problem& p) { return (p.seq_k + C::BN - 1) / C::BN; }

template <class C>
size_t flash_workspace(const ftgen_attention_problem* p) {
  if (!C::kStrided) return 0;
  return static_cast<size_t>(p->batch) * ftgen_attention_kv_heads(p) * key_tiles<C>(*p) * EncLayout<C>::kBytes;
}

template <class C>
__device__ __forceinline__ const unsigned char* enc_of(const ftgen_attention_problem& p, long long kv, int tile) {
  return static_cast<const unsigned char*>(p.workspace) + (kv * key_tiles<C>(p) + tile) * EncLayout<C>::kBytes;
}

// Euclidean norms of `rows` staged rows of D elements (pitch ld), one thread a row.
template <class C>
__device__ __forceinline__ void row_norms(const typename C::T* s, int ld, int rows, float* out, int tid) {
  using H = Half<typename C::T>;
  for (int i = tid; i < rows; i += C::kThreads) {
    float acc = 0.f;
    for (int c = 0; c < C::D; ++c) {
      const float x = H::to(s[i * ld + c]);
      acc = fmaf(x, x, acc);
    }
    out[i] = sqrtf(acc);
  }
}

// The V encodings of group g of one key (row `v` of D = 8 ND elements): out[0], out[1] the unit checksum
// sum_l V[g+8l] (+1 in efta, the row-sum column) in fp32 split into a high and a low 16-bit half, out[2] the weighted
// checksum sum_l (l+1) V[g+8l], out[3] the group magnitude sum_l |V[g+8l]| (+1 in efta) in fp32 rounded up (so that
// it bounds; model.split16, strided_checksums, group_magnitudes). Returns |weighted| in fp32. Host-callable (tested
// against the model).
template <class T, int ND, bool kUnified>
__host__ __device__ inline float encode_v_group(const T* v, int g, T out[4]) {
  using H = Half<T>;
  float s1 = kUnified ? 1.f : 0.f, s2 = 0.f, a1 = kUnified ? 1.f : 0.f;
#pragma unroll
  for (int l = 0; l < ND; ++l) {
    const float x = H::to(v[g + 8 * l]);
    s1 += x;
    a1 += fabsf(x);
    s2 = fmaf(static_cast<float>(l + 1), x, s2);
  }
  out[0] = H::from(s1);
  out[1] = H::from(s1 - H::to(out[0]));
  out[2] = H::from(s2);
  out[3] = H::from_up(a1);
  return fabsf(s2);
}

// The encodings of one staged tile (sK rows BN.., sV columns D.., sKn, sG[0..23]; sG zeroed by the caller).
template <class C>
__device__ __forceinline__ void encode_tile(typename C::T* sK, typename C::T* sV, float* sKn, float* sG, int tid) {
  using T = typename C::T;
  using H = Half<T>;
  // K checksums, each rounded once into T: rows BN + g (unit), BN + 8 + g (weighted); sG[16 + g] sums the squares of
  // what the unit checksum's rounding left out (model.k_checksums)
  for (int i = tid; i < 8 * C::D; i += C::kThreads) {
    const int g = i / C::D, c = i % C::D;
    float s1 = 0.f, s2 = 0.f;
#pragma unroll
    for (int l = 0; l < C::NT; ++l) {
      const float x = H::to(sK[(g + 8 * l) * C::LDK + c]);
      s1 += x;
      s2 = fmaf(static_cast<float>(l + 1), x, s2);
    }
    const T hi = H::from(s1);
    const float lo = s1 - H::to(hi);
    sK[(C::BN + g) * C::LDK + c] = hi;
    sK[(C::BN + 8 + g) * C::LDK + c] = H::from(s2);
    atomicAdd(&sG[g], s2 * s2);
    atomicAdd(&sG[16 + g], lo * lo);
  }
  row_norms<C>(sK, C::LDK, C::BN, sKn, tid);
  // V: columns D + g, D + 8 + g, D + 16 + g, D + 24 + g of each key (encode_v_group)
  for (int i = tid; i < C::BN * 8; i += C::kThreads) {
    const int key = i / 8, g = i % 8;
    T enc[4];
    const float w = encode_v_group<T, C::ND, C::kUnified>(sV + key * C::LDV, g, enc);
#pragma unroll
    for (int c = 0; c < 4; ++c) sV[key * C::LDV + C::D + 8 * c + g] = enc[c];
    // non-negative floats order like their bit patterns
    atomicMax(reinterpret_cast<int*>(&sG[8 + g]), __float_as_int(w));
  }
}

// Copy `bytes` (a multiple of 16) from global to shared memory, 16 bytes a thread.
template <class C>
__device__ __forceinline__ void copy16(void* dst, const void* src, int bytes, int tid) {
  for (int i = tid; i < bytes / 16; i += C::kThreads) reinterpret_cast<uint4*>(dst)[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
}

// Stage a tile's encodings from the workspace (what encode_tile left in shared memory).
template <class C>
__device__ __forceinline__ void load_encoding(const unsigned char* e, typename C::T* sK, typename C::T* sV, float* sKn, float* sG, int tid) {
  using L = EncLayout<C>;
  constexpr int kRowVec = C::D * 2 / 16;  // 16-byte vectors per K row
  for (int i = tid; i < 16 * kRowVec; i += C::kThreads) {
    const int rr = i / kRowVec, c = i % kRowVec;
    reinterpret_cast<uint4*>(sK + (C::BN + rr) * C::LDK)[c] = __ldg(reinterpret_cast<const uint4*>(e) + i);
  }
  const uint4* v = reinterpret_cast<const uint4*>(e + L::kKBytes);
  for (int i = tid; i < C::BN * 4; i += C::kThreads) {  // 32 values = four vectors per key
    const int key = i / 4, c = i % 4;
    reinterpret_cast<uint4*>(sV + key * C::LDV + C::D)[c] = __ldg(v + i);
  }
  copy16<C>(sKn, e + L::kKBytes + L::kVBytes, L::kNBytes, tid);
  const float* g = reinterpret_cast<const float*>(e + L::kKBytes + L::kVBytes + L::kNBytes);
  if (tid < 24) sG[tid] = __ldg(g + tid);
}

// The fused kernel's shared memory carved from the dynamic base: the Q tile, the K tile with its 16 checksum rows, the
// V tile with its 32 checksum columns, then key norms [BN], query norms [BM] and the per-group scalars sG [24]
// ([0..7] ||Kc2[g]||^2, [8..15] max_c |Vc2[c][g]|, [16..23] ||Kc1[g] - hi(Kc1[g])||).
template <class C>
struct Tiles {
  typename C::T *sQ, *sK, *sV;
  float *sKn, *sQn, *sG;
  __device__ explicit Tiles(unsigned char* smem)
      : sQ(reinterpret_cast<typename C::T*>(smem)),
        sK(reinterpret_cast<typename C::T*>(smem + C::kSmemQ)),
        sV(reinterpret_cast<typename C::T*>(smem + C::kSmemQ + C::kSmemK)),
        sKn(reinterpret_cast<float*>(smem + C::kSmemQ + C::kSmemK + C::kSmemV)),
        sQn(sKn + C::BN),
        sG(sKn + C::BN + C::BM) {}
};

// Key tile `tile` of K / V head `kv` (batch * kv_heads + kv head): K and V staged into t.sK / t.sV and encoded there
// (encode_tile: the checksum rows of K, the checksum columns of V, the key norms, sG). Every thread of the block calls
// it; the encodings are in shared memory when it returns.
template <class C>
__device__ __forceinline__ void stage_and_encode(const ftgen_attention_problem& p, long long kv, int tile, const Tiles<C>& t, int tid) {
  using T = typename C::T;
  const T* K = static_cast<const T*>(p.k) + kv * p.seq_k * C::D;
  const T* V = static_cast<const T*>(p.v) + kv * p.seq_k * C::D;
  stage<C>(t.sK, C::LDK, K, tile * C::BN, C::BN, p.seq_k);
  stage<C>(t.sV, C::LDV, V, tile * C::BN, C::BN, p.seq_k);
  if (tid < 24) t.sG[tid] = 0.f;
  __syncthreads();
  encode_tile<C>(t.sK, t.sV, t.sKn, t.sG, tid);
  __syncthreads();
}

template <class C>
__global__ void __launch_bounds__(C::kThreads) encode_kv_kernel(ftgen_attention_problem p) {
  using L = EncLayout<C>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, tile = blockIdx.x, kv = blockIdx.y;  // kv: batch * kv_heads + K / V head
  const Tiles<C> t(smem);
  stage_and_encode<C>(p, kv, tile, t, tid);
  unsigned char* e = static_cast<unsigned char*>(p.workspace) + (static_cast<long long>(kv) * key_tiles<C>(p) + tile) * L::kBytes;
  constexpr int kRowVec = C::D * 2 / 16;
  for (int i = tid; i < 16 * kRowVec; i += C::kThreads) {
    const int rr = i / kRowVec, c = i % kRowVec;
    reinterpret_cast<uint4*>(e)[i] = reinterpret_cast<const uint4*>(t.sK + (C::BN + rr) * C::LDK)[c];
  }
  uint4* v = reinterpret_cast<uint4*>(e + L::kKBytes);
  for (int i = tid; i < C::BN * 4; i += C::kThreads) {
    const int key = i / 4, c = i % 4;
    v[i] = reinterpret_cast<const uint4*>(t.sV + key * C::LDV + C::D)[c];
  }
  float* kn = reinterpret_cast<float*>(e + L::kKBytes + L::kVBytes);
  for (int i = tid; i < C::BN; i += C::kThreads) kn[i] = t.sKn[i];
  if (tid < 24) kn[C::BN + tid] = tid < 16 ? t.sG[tid] : sqrtf(t.sG[tid]);
}

template <class C>
__global__ void __launch_bounds__(C::kThreads) flash_kernel(ftgen_attention_problem p, Rules rules) {
  using T = typename C::T;
  using H = Half<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  const auto [sQ, sK, sV, sKn, sQn, sG] = Tiles<C>(smem);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r = lane / 4, cq = (lane % 4) * 2;
  const int bh = blockIdx.y;  // batch * heads + head
  const int m0 = blockIdx.x * C::BM;
  const long long block = static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x;
  const long long kv = ftgen_attention_kv_bh(&p, bh);  // the K / V head
  const T* Q = static_cast<const T*>(p.q) + static_cast<long long>(bh) * p.seq_q * C::D;
  const T* K = static_cast<const T*>(p.k) + kv * p.seq_k * C::D;
  const T* V = static_cast<const T*>(p.v) + kv * p.seq_k * C::D;
  T* O = static_cast<T*>(p.o) + static_cast<long long>(bh) * p.seq_q * C::D;
  const float scale = p.scale > 0.f ? p.scale : rsqrtf(static_cast<float>(C::D));
  const float sl2 = scale * 1.4426950408889634f;
  const bool fix = !p.no_correct;
  ThreadFault fault = kNoFault;
  if (C::kInject && p.faults) fault = find_fault(p, block, tid);
  Tally tally;

  // rows of this thread (h = 0, 1) in the sequence
  const int qrow[2] = {m0 + warp * 16 + r, m0 + warp * 16 + r + 8};
  int n_tiles = (p.seq_k + C::BN - 1) / C::BN;
  if (C::kCausal) n_tiles = min(n_tiles, (min(m0 + C::BM, p.seq_q) + C::BN - 1) / C::BN);

  // Q tile and its row norms
  stage<C>(sQ, C::LDQ, Q, m0, C::BM, p.seq_q);
  __syncthreads();
  if (C::kStrided) row_norms<C>(sQ, C::LDQ, C::BM, sQn, tid);
  uint32_t qf[C::KD][4];
#pragma unroll
  for (int kk = 0; kk < C::KD; ++kk) {
    const T* base = sQ + (warp * 16 + r) * C::LDQ + kk * 16 + cq;
    qf[kk][0] = *reinterpret_cast<const uint32_t*>(base);
    qf[kk][1] = *reinterpret_cast<const uint32_t*>(base + 8 * C::LDQ);
    qf[kk][2] = *reinterpret_cast<const uint32_t*>(base + 8);
    qf[kk][3] = *reinterpret_cast<const uint32_t*>(base + 8 * C::LDQ + 8);
  }
  __syncthreads();
  float qn[2] = {0.f, 0.f};
  if (C::kStrided) {
    qn[0] = sQn[warp * 16 + r];
    qn[1] = sQn[warp * 16 + r + 8];
  }

  float o[C::ND][4];
  bool done = false;
  for (int attempt = 0; attempt < 2 && !done; ++attempt) {
    const bool inj = C::kInject && attempt == 0;  // a recomputation runs without the planned fault
    // the O checksum blocks: the unit checksum's high and low halves, the weighted one, and the P-weighted group
    // magnitude sum_c p_c (sum_l |V[c][g+8l]| (+1)) that scales the check's threshold
    float oc[4][4];
    Rows st;
    float vmag2[2] = {0.f, 0.f};  // max_c |Vc2[c][g]| of this thread's two groups of O
    bool redo = false;
#pragma unroll
    for (int n = 0; n < C::ND; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
#pragma unroll
    for (int c = 0; c < 4; ++c) oc[c][0] = oc[c][1] = oc[c][2] = oc[c][3] = 0.f;
    int keys_seen = 0;

    for (int j = 0; j < n_tiles; ++j) {
      const int k0 = j * C::BN;
      keys_seen += C::BN;
      // this thread's planned fault falls in this tile: one branch around each site's injection code (the code is
      // large and, predicated, would cost every thread of an injection build on every tile)
      const bool hit = C::kInject && inj && fault.index >= 0 && fault.step == j;
      __syncthreads();  // the previous tile's readers are done
      stage<C>(sK, C::LDK, K, k0, C::BN, p.seq_k);
      stage<C>(sV, C::LDV, V, k0, C::BN, p.seq_k);
      if (C::kStrided) load_encoding<C>(enc_of<C>(p, kv, j), sK, sV, sKn, sG, tid);
      __syncthreads();

      // ---- GEMM I: S = Q K^T (and the checksum blocks) ----------------------------------------
      float s[C::NT][4];
      float sc[2][4];
#pragma unroll
      for (int n = 0; n < C::NT; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < C::KD; ++kk) {
          const T* b = sK + (n * 8 + r) * C::LDK + kk * 16 + cq;
          mma16816<T>(s[n], qf[kk], *reinterpret_cast<const uint32_t*>(b), *reinterpret_cast<const uint32_t*>(b + 8));
        }
      }
      if (hit) inject_blocks(s, fault, p, FTGEN_ATTN_SITE_QK, j, qrow, k0, cq);
      if (C::kStrided) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          sc[c][0] = sc[c][1] = sc[c][2] = sc[c][3] = 0.f;
#pragma unroll
          for (int kk = 0; kk < C::KD; ++kk) {
            const T* b = sK + (C::BN + c * 8 + r) * C::LDK + kk * 16 + cq;
            mma16816<T>(sc[c], qf[kk], *reinterpret_cast<const uint32_t*>(b), *reinterpret_cast<const uint32_t*>(b + 8));
          }
        }
        // per element e: the group g = cq + e % 2 of row half e / 2 (model: s_threshold, _locate)
        float kn[2] = {0.f, 0.f};
#pragma unroll
        for (int l = 0; l < C::NT; ++l) kn[0] += sKn[cq + 8 * l], kn[1] += sKn[cq + 1 + 8 * l];
        const float kc2[2] = {sG[cq], sG[cq + 1]}, klo[2] = {sG[16 + cq], sG[16 + cq + 1]};
        const bool again = check_s(s, sc, qn, kn, klo, kc2, C::D, rules, fix, tally);
        if (__any_sync(0xffffffffu, again)) {  // not located: the warp recomputes its S tile
          if (again) ++tally.recomputed;
#pragma unroll
          for (int n = 0; n < C::NT; ++n) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < C::KD; ++kk) {
              const T* b = sK + (n * 8 + r) * C::LDK + kk * 16 + cq;
              mma16816<T>(s[n], qf[kk], *reinterpret_cast<const uint32_t*>(b), *reinterpret_cast<const uint32_t*>(b + 8));
            }
          }
        }
      }

      // ---- mask, softmax --------------------------------------------------------------------------
      mask_tile<C::kCausal>(s, k0, p.seq_k, qrow, cq);
      uint32_t pk[C::NT][2];
      float alpha[2];
      if (softmax_tile<C>(s, pk, alpha, st, At{fault, p, hit, j, k0, cq, {qrow[0], qrow[1]}}, sl2, rules, fix, tally)) redo = true;

      // ---- GEMM II: O = diag(alpha) O + P V (and the checksum blocks) -------------------------------
      scale_rows(o, alpha);
#pragma unroll
      for (int kk = 0; kk < C::KN; ++kk) {
        const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
        const T* vb = sV + (kk * 16 + cq) * C::LDV + r;
#pragma unroll
        for (int n = 0; n < C::ND; ++n) {
          const T* b = vb + n * 8;
          const uint32_t b0 = H::pack(H::to(b[0]), H::to(b[C::LDV]));
          const uint32_t b1 = H::pack(H::to(b[8 * C::LDV]), H::to(b[9 * C::LDV]));
          mma16816<T>(o[n], a, b0, b1);
        }
      }
      if (C::kStrided) {
        scale_rows(oc, alpha);
#pragma unroll
        for (int kk = 0; kk < C::KN; ++kk) {
          const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
          const T* vb = sV + (kk * 16 + cq) * C::LDV + C::D + r;
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const T* b = vb + c * 8;
            const uint32_t b0 = H::pack(H::to(b[0]), H::to(b[C::LDV]));
            const uint32_t b1 = H::pack(H::to(b[8 * C::LDV]), H::to(b[9 * C::LDV]));
            mma16816<T>(oc[c], a, b0, b1);
          }
        }
#pragma unroll
        for (int gi = 0; gi < 2; ++gi) vmag2[gi] = fmaxf(vmag2[gi], sG[8 + cq + gi]);
      }
      if (hit) inject_blocks(o, fault, p, FTGEN_ATTN_SITE_O, j, qrow, 0, cq);
      if (C::kStrided && !C::kUnified && check_o_tile(o, oc, st.lsum, keys_seen, j, vmag2, rules, fix, tally)) redo = true;
    }  // key tiles

    // ---- row sum, 1/l, normalization, the unified verification ----------------------------------------
    if (finish_rows<C>(o, oc, st, vmag2, keys_seen, n_tiles, qrow, fault, p, inj, rules, fix, tally)) redo = true;
    const int again = __syncthreads_or(redo ? 1 : 0);
    if (again && attempt == 0) {
      if (redo) ++tally.recomputed;
      continue;  // the block's rows once more, without the planned fault
    }
    if (again && redo) ++tally.uncorrectable;
    done = true;
  }

  store_rows(O, o, qrow, p.seq_q, cq);
  if (C::kProtected) tally.flush_block(p.counters);
}

template <class C>
cudaError_t launch_flash(const ftgen_attention_problem* p, const Rules& rules, cudaStream_t stream) {
  if (p->head_dim != C::D || !ftgen_attention_shape_ok(p)) return cudaErrorInvalidValue;
  if (C::kCausal && p->seq_k != p->seq_q) return cudaErrorInvalidValue;
  if (const cudaError_t e = ftgen::set_smem(flash_kernel<C>, C::kSmem); e != cudaSuccess) return e;
  if (C::kStrided && !p->workspace) return cudaErrorInvalidValue;  // flash_workspace bytes for the encodings
  if (C::kStrided) {
    if (const cudaError_t e = ftgen::set_smem(encode_kv_kernel<C>, C::kSmem); e != cudaSuccess) return e;
    encode_kv_kernel<C><<<dim3(static_cast<unsigned>(key_tiles<C>(*p)), p->batch * ftgen_attention_kv_heads(p)), C::kThreads, C::kSmem,
                         stream>>>(*p);
  }
  const dim3 grid((p->seq_q + C::BM - 1) / C::BM, p->batch * p->heads);
  flash_kernel<C><<<grid, C::kThreads, C::kSmem, stream>>>(*p, rules);
  return cudaGetLastError();
}

}  // namespace ftattn
