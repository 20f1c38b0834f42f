// ftgen attention: the fp32 reference (shares nothing with the kernels; tests/test_attention_ref.py runs the row
// function on the host against the NumPy model's fp64 reference) and the verification tolerance of
// ftgen.families.attention.model.output_tolerance.
//
// One query row: logits s_c = scale * q . k_c (fp32 dot products), w_c = exp(s_c - max) / sum (double), the output
// O_j = sum_c w_c V_cj and the scale of its error measure sum_c w_c |V_cj| (double), and the row's tolerance.
#pragma once

#include <cuda_runtime.h>
#include <math.h>

namespace ftattn_ref {

struct RowTolerance {
  double u_in, u_acc, u32, u_mufu, c_sqrt, c_const;  // model constants
};

// q: [d]; K, V: [lk][d] row-major (as float through `load`); key c visible when c < lk and (!causal or c <= i).
// out, scale_out: [d]. Returns the row's tolerance on |O - O_ref| / scale.
template <class T, class Load>
__host__ __device__ double reference_row(const T* q, const T* K, const T* V, int lk, int d, bool causal, int i, float scale,
                                         const RowTolerance& r, Load load, double* out, double* scale_out) {
  const int vis = causal ? (i + 1 < lk ? i + 1 : lk) : lk;
  // pass 1: the largest logit and the largest sum_d |q||k| (the tolerance's S magnitude)
  double mx = -INFINITY, mag = 0;
  for (int c = 0; c < vis; ++c) {
    float dot = 0.f;
    double a = 0;
    for (int t = 0; t < d; ++t) {
      const float x = load(q[t]), y = load(K[static_cast<long long>(c) * d + t]);
      dot = fmaf(x, y, dot);
      a += fabs(static_cast<double>(x) * y);
    }
    mx = fmax(mx, static_cast<double>(scale * dot));
    mag = fmax(mag, a);
  }
  // pass 2: the weights' sum, the output and its scale (double accumulation)
  for (int t = 0; t < d; ++t) out[t] = scale_out[t] = 0;
  double sum = 0;
  for (int c = 0; c < vis; ++c) {
    float dot = 0.f;
    for (int t = 0; t < d; ++t) dot = fmaf(load(q[t]), load(K[static_cast<long long>(c) * d + t]), dot);
    const double w = exp(static_cast<double>(scale * dot) - mx);
    sum += w;
    for (int t = 0; t < d; ++t) {
      const double v = load(V[static_cast<long long>(c) * d + t]);
      out[t] += w * v;
      scale_out[t] += w * fabs(v);
    }
  }
  for (int t = 0; t < d; ++t) {
    out[t] /= sum;
    scale_out[t] /= sum;
  }
  // model.output_tolerance (as model.max_error: rescales counted for tiles of 16 keys, the smallest tile)
  const double ds = r.u_acc * (r.c_sqrt * sqrt(static_cast<double>(d)) + r.c_const) * mag;
  const int n_tiles = (lk + 15) / 16;
  const double w_err = 2.0 * r.u_in + 4.0 * r.u_mufu + n_tiles * 2.0 * r.u32 + scale * ds;
  return r.u_in + 2.0 * w_err + r.u_acc * (r.c_sqrt * sqrt(static_cast<double>(lk)) + r.c_const);
}

}  // namespace ftattn_ref
