// ftgen: the decisions of the protection schemes as pure functions -- check a row's residuals against their
// thresholds, locate a fault, the value that corrects it, the counters of a decision, the TMR vote and repair.
// Included by the kernels (gemm: simt_variant.cu.j2, cutlass_tmr.cuh, cutlass_abft.cuh, cutlass90_abft16.cuh; kmeans: kmeans90.cuh) and compiled for the host by the
// behavioural tests (tests/test_device_logic.py), which drive them with the NumPy models' data. No memory but the
// arguments, no threads: the kernels keep the sums, shuffles, barriers and atomics around them.
// Copied verbatim into every generated project. Do not edit the copies.
#pragma once

#include <math.h>
#include <string.h>

#if defined(__CUDACC__)
#define FTGEN_RULE __host__ __device__ __forceinline__
#else
#define FTGEN_RULE inline
#endif

namespace ftgen_rules {

// ---- ABFT, both backends ---------------------------------------------------------------------------

// The value that corrects a located element: the row's checksum r_i minus the rest of the row (summed anew).
template <class T>
FTGEN_RULE T replacement(double chk, double rest) {
  return static_cast<T>(chk - rest);
}

// Correct a located element in place (x = r_i - rest); returns the count of corrected elements (1).
template <class T>
FTGEN_RULE unsigned correct_element(T& x, double chk, double rest) {
  x = replacement<T>(chk, rest);
  return 1u;
}

// The same for a stored element D = alpha * acc (the deferred check reads and writes C).
template <class T>
FTGEN_RULE unsigned correct_element_scaled(T& x, double alpha, double chk, double rest) {
  x = static_cast<T>(alpha * (chk - rest));
  return 1u;
}

// ---- ABFT, SIMT kernels (double) -------------------------------------------------------------------

// Classify one row's residuals d = sum_j C_ij - r_i and dw = sum_j (j+1) C_ij - r'_i, given thresholds
// that bound their rounding noise. Returns 0: clean; 1: a fault in C at column *col, located with
// certainty (|d| > 2 tau_w, so the quotient dw/d is within 1/2 of exactly one integer, and consistent
// with it); 3: detected but not locatable with certainty (recompute). *score = max residual/threshold.
FTGEN_RULE int classify_row(double d, double dw, double tau, double tau_w, int cols, int* col, double* score) {
  const double s1 = tau > 0 ? fabs(d) / tau : (d != 0 ? 1e300 : 0.0);
  const double s2 = tau_w > 0 ? fabs(dw) / tau_w : (dw != 0 ? 1e300 : 0.0);
  *score = fmax(s1, s2);
  if (!(s1 > 1.0) && !(s2 > 1.0)) return 0;
  if (fabs(d) > 2.0 * tau_w) {
    const double jq = rint(dw / d);
    if (jq >= 1.0 && jq <= cols && fabs(dw - jq * d) <= tau_w) {
      *col = static_cast<int>(jq) - 1;
      return 1;
    }
  }
  return 3;
}

// A located element of the SIMT kernels and of the tf32x3 threadblock checks (cutlass_abft.cuh, abft_located_dots) is
// recomputed from A's row and B's column (a dot product in double):
// the checksum's replacement r_i - (the rest of the row) carries the rounding of every other element of the
// row, which exceeds a small element's own tolerance beside large ones. The two must agree within twice the
// row's threshold (the replacement's noise is the residual's, which the threshold bounds): a fault located at
// the wrong column leaves them a whole fault apart, and the caller recomputes instead.
FTGEN_RULE bool located_fix_agrees(double replacement_value, double dot, double tau) {
  return fabs(replacement_value - dot) <= 2.0 * tau;
}

// ---- ABFT, CUTLASS threadblock level (float or double thresholds, double location) ----------------

// Checksum strips of `cols` columns of a tile (the tile's tb_n columns, or one warp column with ref_checksums:
// concurrent): the strip of tile column c, c's place in its strip (its weight in the weighted checksum is this + 1),
// and the tile column of place `local` of strip `strip` (a located fault's column in the tile).
FTGEN_RULE int abft_strip_of(int c, int cols) { return c / cols; }
FTGEN_RULE int abft_strip_local(int c, int cols) { return c - (c / cols) * cols; }
FTGEN_RULE int abft_strip_column(int strip, int cols, int local) { return strip * cols + local; }

// The arithmetic of the rules below in the threshold type T: float (the tf32x3 kernels' thresholds) or double (fp64).
FTGEN_RULE float rule_fabs(float x) { return fabsf(x); }
FTGEN_RULE double rule_fabs(double x) { return fabs(x); }
FTGEN_RULE float rule_fmax(float a, float b) { return fmaxf(a, b); }
FTGEN_RULE double rule_fmax(double a, double b) { return fmax(a, b); }
FTGEN_RULE float rule_sqrt(float x) { return sqrtf(x); }
FTGEN_RULE double rule_sqrt(double x) { return sqrt(x); }

// |residual| / threshold: 0 / 0 is 0, anything else over 0 is infinite.
template <class T>
FTGEN_RULE T abft_score_t(T r, T tau) { return tau > T(0) ? rule_fabs(r) / tau : (r != T(0) ? T(INFINITY) : T(0)); }
FTGEN_RULE float abft_score(float r, float tau) { return abft_score_t<float>(r, tau); }

// Both residuals within their thresholds (a NaN score is; the callers test finiteness). Both compared, no branch.
template <class T>
FTGEN_RULE bool abft_within_t(T sc1, T sc2) { return !(sc1 > T(1)) & !(sc2 > T(1)); }
FTGEN_RULE bool abft_within(float sc1, float sc2) { return abft_within_t<float>(sc1, sc2); }
// Both scores at most lim (pass 1 of a check with a suspect band: lim = the band's floor, below 1)
template <class T>
FTGEN_RULE bool abft_within_at_t(T sc1, T sc2, T lim) { return !(sc1 > lim) & !(sc2 > lim); }
FTGEN_RULE bool abft_within_at(float sc1, float sc2, float lim) { return abft_within_at_t<float>(sc1, sc2, lim); }

// ---- the suspect band of the strips' check (ref_checksums: concurrent with a band) ---------------------------------
// A unit (a row of a checksum strip) whose full-rule score lies in (band, 1] is clean by the checksum but may hide a
// fault in a small element beside large ones: the checksum's threshold follows the strip's largest elements, the
// significance of a fault its own element's magnitude |a_i| |b_j|. Such a unit is recomputed from A and B in double with
// those magnitudes; it is a detection only where an element differs from its recomputation by more than the element
// tolerance, elem_tol |a_i| |b_j| (a fraction of the delivered precision's rule), and is then corrected by it.
constexpr int kAbftSuspect = -4;  // the verdict of a unit in the band (neither clean nor detected until recomputed)
FTGEN_RULE int abft_band_verdict(int verdict, float score, float band) {
  return verdict == -1 && band > 0.f && score > band ? kAbftSuspect : verdict;
}
// An element differs from its recomputation (exact: the dot product in double, mag: sum |a| |b|) beyond elem_tol; a
// non-finite element always does.
FTGEN_RULE bool abft_element_differs(double c, double exact, double mag, double elem_tol) {
  return !(fabs(c - exact) <= elem_tol * mag);
}

// The thresholds of a row: tau = fixed, or unit * scale; tau_w = fixed * rms(w), or max(tau * rms(w), unit * |r'|).
FTGEN_RULE float abft_tau(float fixed, float unit, float scale) { return fixed > 0.f ? fixed : unit * scale; }
FTGEN_RULE float abft_tau_w(float fixed, float tau, float unit, float rms_w, float RW) {
  return fixed > 0.f ? fixed * rms_w : fmaxf(tau * rms_w, unit * fabsf(RW));
}

// The column (0-based) of a fault located with certainty from the residuals in double: |d| > 2 tau_w,
// j = rint(dw / d) in 1..cols, |dw - j d| <= tau_w; -2 where it cannot be located.
template <class T>
FTGEN_RULE int abft_locate_t(double dd, double ddw, T tau_w, int cols) {
  if (fabs(dd) > 2.0 * tau_w) {
    const double jq = rint(ddw / dd);
    if (jq >= 1.0 && jq <= double(cols) && fabs(ddw - jq * dd) <= double(tau_w)) return int(jq) - 1;
  }
  return -2;
}
FTGEN_RULE int abft_locate(double dd, double ddw, float tau_w, int cols) { return abft_locate_t<float>(dd, ddw, tau_w, cols); }

// The full rule for one row (the rare path): SQ, MX the sum of the row's capped squares and the largest, NB, BC
// its non-finite elements and one of their columns, S1, SW its sums in double, R, RW, R2 the reference checksums.
// Returns -1 clean, the located column, or -2 detected and not located; *score = the largest residual/threshold
// (infinite where the row holds a non-finite element); *tau_out (where given) = the unweighted residual's threshold,
// against which a located element's correction is checked (located_fix_agrees). T: the type of the thresholds and
// references (the fp64 check's are double: float would round its references by 2^-24, far above its threshold).
template <class T>
FTGEN_RULE int abft_row_verdict_t(T SQ, T MX, int NB, int BC, double S1, double SW, T R, T RW, T R2, T unit, T fixed, T rms_w,
                                  int cols, T* score, T* tau_out = nullptr) {
  int verdict = -2;
  *score = T(INFINITY);
  if (NB > 0) {
    verdict = NB == 1 ? BC : -2;
  } else {
    const T robust = rule_sqrt(rule_fmax(SQ - MX, T(0)));
    // abft_tau and abft_tau_w, written out so that the scale is computed only where no fixed threshold replaces it
    const T tau = fixed > T(0) ? fixed : unit * rule_fmax(rule_fmax(rule_sqrt(rule_fmax(R2, T(0))), rule_fabs(R)), robust);
    const T tau_w = fixed > T(0) ? fixed * rms_w : rule_fmax(tau * rms_w, unit * rule_fabs(RW));
    if (tau_out != nullptr) *tau_out = tau;
    // d, dw from the row's elements summed in double, and the location tested in double: in float, the sums and the
    // difference dw - j d round a large fault f by about u |f| (2^-24 of an exponent flip's 2^16-2^64), far beyond
    // tau_w, and the rule would fail to locate it on that rounding alone
    const double dd = S1 - static_cast<double>(R), ddw = SW - static_cast<double>(RW);
    const T d = static_cast<T>(dd), dw = static_cast<T>(ddw);
    const T sc1 = abft_score_t<T>(d, tau);
    const T sc2 = abft_score_t<T>(dw, tau_w);
    *score = rule_fmax(sc1, sc2);
    const bool finite = isfinite(d) && isfinite(dw);
    if (abft_within_t<T>(sc1, sc2) && finite) {
      verdict = -1;
    } else if (finite) {
      verdict = abft_locate_t<T>(dd, ddw, tau_w, cols);
    }
  }
  return verdict;
}
FTGEN_RULE int abft_row_verdict(float SQ, float MX, int NB, int BC, double S1, double SW, float R, float RW, float R2, float unit,
                                float fixed, float rms_w, int cols, float* score, float* tau_out = nullptr) {
  return abft_row_verdict_t<float>(SQ, MX, NB, BC, S1, SW, R, RW, R2, unit, fixed, rms_w, cols, score, tau_out);
}

// The check of a 16-bit GEMM's fp32 accumulators (cutlass90_abft16.cuh) for one (row, strip) unit: P1, PW, PA the
// epilogue's sums of c_j = alpha acc_j, w_j c_j and |c_j| over the strip's columns (fp32), ar, arw alpha times the
// reference checksums r = A (B e), r' = A (B w). tau = fixed, or unit * max(PA, |ar|); tau_w as abft_tau_w. Returns
// -1 clean, the located column (0-based, |d| > 2 tau_w, j = rint(dw / d)), or -2 detected and not located (a residual
// that is not finite included); *score = the largest residual / threshold. The model: abft_model.abft16_verdict.
FTGEN_RULE int abft16_unit_verdict(double P1, double PW, double PA, double ar, double arw, double unit, double fixed,
                                   double rms_w, int cols, double* score) {
  const double tau = fixed > 0.0 ? fixed : unit * fmax(PA, fabs(ar));
  const double tau_w = fixed > 0.0 ? fixed * rms_w : fmax(tau * rms_w, unit * fabs(arw));
  const double d = P1 - ar, dw = PW - arw;
  const double sc1 = abft_score_t<double>(d, tau), sc2 = abft_score_t<double>(dw, tau_w);
  *score = isfinite(d) && isfinite(dw) ? fmax(sc1, sc2) : double(INFINITY);
  if (!(isfinite(d) && isfinite(dw))) return -2;
  if (abft_within_t<double>(sc1, sc2)) return -1;
  return abft_locate_t<double>(d, dw, tau_w, cols);
}

// The 16-bit check's threshold unit: lambda 2^-24 (ceil(k / kw) + cols + 1) -- the fp32 accumulators' rounding over the
// wgmma's k steps (kw columns of k each: the accumulation is not round to nearest) and the strip's cols additions
// (abft_model.abft16_unit)
FTGEN_RULE double abft16_unit(int k, int kw, int cols, double lambda) {
  return lambda * 5.9604644775390625e-08 * (static_cast<double>((k + kw - 1) / kw) + cols + 1.0);
}

// The 16-bit check's first stage on TF32 operands (kmeans cutlass90; kmeans model.norm_prefilter_clean): a unit is clean
// when |P1 - r| <= unit max(scale, |r|), scale = ||x_i|| sum ||c_j|| over the tile -- by Cauchy-Schwarz an upper bound of
// the sum of |a| that abft16_unit_verdict's unweighted threshold takes, so the stage flags no unit that residual passes
// (it is looser, by up to scale / sum |a|); the weighted residual is not looked at. Needs only the sum of a per element;
// a residual that is not finite never passes. *score (score not null): residual / threshold where it passes.
// norm_prefilter_tau: the threshold alone (a unit is clean where |P1 - r| <= it).
FTGEN_RULE float norm_prefilter_tau(float r, float scale, float unit) { return unit * fmaxf(scale, fabsf(r)); }
FTGEN_RULE bool norm_prefilter_clean(float P1, float r, float scale, float unit, float* score) {
  const float tau = norm_prefilter_tau(r, scale, unit), d = fabsf(P1 - r);
  if (!(d <= tau)) return false;
  if (score) *score = tau > 0.f ? d / tau : 0.f;  // (null: the caller takes the score its own way, or none)
  return true;
}

// The counters of one row's verdict: a detection (not -1, not a suspect), uncorrectable where it is not corrected in place (not
// located, or correct: detect).
FTGEN_RULE void abft_count_row(int verdict, int online, unsigned& detected, unsigned& uncorrectable) {
  if (verdict != -1 && verdict != kAbftSuspect) {
    ++detected;
    if (verdict == -2 || !online) ++uncorrectable;
  }
}

// ---- ABFT, the 16-bit check on TF32 operands (kmeans cutlass90): the encodings' split --------------

// x rounded to TF32 as the TF32 wgmma reads an fp32 word: to nearest, ties away (abft_model.to16 "tf32"); finite x
FTGEN_RULE float tf32_round(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, 4);
  return x;
}

// An encoding (a tile's sum, in double) scaled by a power of two, rounded to fp32 once and split into TF32 parts:
// hi = tf32(xs), lo = tf32((xs - hi) 2^11) (abft_model.abft16_encode, "tf32"; the references are hi + lo 2^-11)
FTGEN_RULE void tf32_split(double x, double scale, float* hi, float* lo) {
  const float xs = static_cast<float>(x * scale);
  *hi = tf32_round(xs);
  *lo = tf32_round((xs - *hi) * 2048.f);
}

// The root mean square of the weights 1..cols (the weighted checksum's threshold factor; abft_model.abft_rms_w)
FTGEN_RULE double rms_weights(int cols) { return sqrt((cols + 1.0) * (2.0 * cols + 1.0) / 6.0); }

// ---- TMR --------------------------------------------------------------------------------------------

// Vote status of one element: 0 the copies agree; 1 + c: copy c is the minority (the other two agree);
// 4: all three differ. `maj` is the majority (u0 when all differ). Same table as ftgen.families.gemm.tmr_model.classify.
enum VoteStatus : int { kAgree = 0, kMinority0 = 1, kMinority1 = 2, kMinority2 = 3, kUncorrectable = 4 };

template <class U>
FTGEN_RULE int vote_element(U u0, U u1, U u2, U& maj) {
  const bool e01 = u0 == u1, e02 = u0 == u2;
  maj = u0;
  if (e01 && e02) return kAgree;
  if (e01) return kMinority2;
  if (e02) return kMinority1;
  if (u1 == u2) {
    maj = u1;
    return kMinority0;
  }
  return kUncorrectable;
}

// vote_element, counted: detected, then corrected or uncorrectable (which also sets `unc`).
template <class U>
FTGEN_RULE int counted_vote(U u0, U u1, U u2, U& maj, unsigned& detected, unsigned& corrected, unsigned& uncorrectable, bool& unc) {
  const int st = vote_element(u0, u1, u2, maj);
  if (st == kAgree) return st;
  ++detected;
  if (st == kUncorrectable) {
    ++uncorrectable;
    unc = true;
  } else {
    ++corrected;
  }
  return st;
}

// Repair the minority copy of a vote (st: its status) with the majority m.
template <class E>
FTGEN_RULE void repair_minority(int st, E m, E& x0, E& x1, E& x2) {
  if (st == kMinority0) x0 = m;
  if (st == kMinority1) x1 = m;
  if (st == kMinority2) x2 = m;
}

}  // namespace ftgen_rules
