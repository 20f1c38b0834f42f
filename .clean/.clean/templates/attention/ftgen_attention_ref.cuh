// ftgen attention: the fp32 reference (shares nothing with the kernels; tests/test_attention_family.py runs the row
// function on the host against the NumPy model's fp64 reference) and the verification bound of
// ftgen.families.attention.model.output_tolerance and output_floor.
//
// One query row: logits s_c = scale * q . k_c (fp32 dot products), w_c = exp(s_c - max) / sum (double), the output
// O_j = sum_c w_c V_cj, the scale of its error measure s_j = sum_c w_c |V_cj| (double), the row's tolerance tol and
// the element's absolute floor f_j: an output element is within its bound when |O - O_ref| <= s_j * tol + f_j. The
// steps (max_step, sum_step, finish) are shared by reference_row (host-tested) and the benches' tiled kernel.
#pragma once

#include <cuda_runtime.h>
#include <math.h>

namespace ftattn_ref {

struct RowTolerance {
  double u_in, u_acc, u32, u_mufu, c_sqrt, c_const;  // model constants
  double eta;          // model.ETA: the absolute rounding error of a value below the 16-bit type's normal range
  bool normalized_p;   // P holds the normalized weights (decoupled), not exp(s - max) (the flash kernels)
};

// The row's running state over its visible keys: pass 1 (max_step) the largest logit and the largest
// sum_d |q||k| (the tolerance's S magnitude); pass 2 (sum_step) the weights' sum, the number of keys, the output, its
// scale and sum_c |V_cj|.
struct RowState {
  double mx, mag, sum;
  int keys;
};

template <class A, class B, class LA, class LB>
__host__ __device__ inline float logit(const A* q, const B* k, int d, float scale, LA la, LB lb, double* absdot) {
  float dot = 0.f;
  double a = 0;
  for (int t = 0; t < d; ++t) {
    const float x = la(q[t]), y = lb(k[t]);
    dot = fmaf(x, y, dot);
    a += fabs(static_cast<double>(x) * y);
  }
  if (absdot) *absdot = a;
  return scale * dot;
}

template <class A, class B, class LA, class LB>
__host__ __device__ inline void max_step(const A* q, const B* k, int d, float scale, LA la, LB lb, RowState& s) {
  double a = 0;
  const float x = logit(q, k, d, scale, la, lb, &a);
  s.mx = fmax(s.mx, static_cast<double>(x));
  s.mag = fmax(s.mag, a);
}

template <class A, class B, class LA, class LB>
__host__ __device__ inline void sum_step(const A* q, const B* k, const B* v, int d, float scale, LA la, LB lb, RowState& s,
                                         double* out, double* scale_out, double* floor_out) {
  const double w = exp(static_cast<double>(logit(q, k, d, scale, la, lb, nullptr)) - s.mx);
  s.sum += w;
  ++s.keys;
  for (int t = 0; t < d; ++t) {
    const double x = lb(v[t]);
    out[t] += w * x;
    scale_out[t] += w * fabs(x);
    floor_out[t] += fabs(x);
  }
}

// Normalize the row, turn floor_out (sum_c |V_cj| so far) into the elements' absolute floors (model.output_floor) and
// return the row's tolerance on |O - O_ref| / scale: model.output_tolerance (as model.max_error: rescales counted
// for tiles of 16 keys, the smallest tile).
__host__ __device__ inline double finish(const RowState& s, int d, int lk, float scale, const RowTolerance& r, double* out,
                                         double* scale_out, double* floor_out) {
  for (int t = 0; t < d; ++t) {
    out[t] /= s.sum;
    scale_out[t] /= s.sum;
    // P rounded below the 16-bit type's normal range errs by up to eta absolutely (not u_in relatively): at most
    // eta sum_c (|V_cj| + |O_j|) / l over the row, l = sum_c exp(s_c - max) >= 1 the row sum P is normalized by
    // (eta sum_c |V_cj| when P holds the normalized weights); the output's own rounding adds eta.
    const double p_abs = r.normalized_p ? floor_out[t] : (floor_out[t] + s.keys * scale_out[t]) / s.sum;
    floor_out[t] = r.eta * (1.0 + p_abs);
  }
  const double ds = r.u_acc * (r.c_sqrt * sqrt(static_cast<double>(d)) + r.c_const) * s.mag;
  const int n_tiles = (lk + 15) / 16;
  const double w_err = 2.0 * r.u_in + 4.0 * r.u_mufu + n_tiles * 2.0 * r.u32 + scale * ds;
  return r.u_in + 2.0 * w_err + r.u_acc * (r.c_sqrt * sqrt(static_cast<double>(lk)) + r.c_const);
}

// Keys a query row sees: c < lk, and c <= i when causal.
__host__ __device__ inline int visible_keys(int i, int lk, bool causal) { return causal ? (i + 1 < lk ? i + 1 : lk) : lk; }

// One row from K, V in memory ([lk][d] row-major, read as float through `load`); out, scale_out, floor_out: [d].
template <class T, class Load>
__host__ __device__ double reference_row(const T* q, const T* K, const T* V, int lk, int d, bool causal, int i, float scale,
                                         const RowTolerance& r, Load load, double* out, double* scale_out, double* floor_out) {
  const int vis = visible_keys(i, lk, causal);
  RowState s{-INFINITY, 0, 0, 0};
  for (int c = 0; c < vis; ++c) max_step(q, K + static_cast<long long>(c) * d, d, scale, load, load, s);
  for (int t = 0; t < d; ++t) out[t] = scale_out[t] = floor_out[t] = 0;
  for (int c = 0; c < vis; ++c)
    sum_step(q, K + static_cast<long long>(c) * d, V + static_cast<long long>(c) * d, d, scale, load, load, s, out, scale_out,
             floor_out);
  return finish(s, d, lk, scale, r, out, scale_out, floor_out);
}

}  // namespace ftattn_ref
