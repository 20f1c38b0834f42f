// ftgen attention, the decoupled baseline (model.decoupled_forward): three steps over an L x L workspace.
//   1. S = Q K^T in fp32 (SIMT tiles), then every row checked against classic row checksums of K
//      (q . sum_c K[c] and q . sum_c (c+1) K[c]): a located element is replaced, any other detection recomputes the row;
//   2. the softmax of every row twice (the second copy reads S through a volatile pointer, so both are computed);
//      a mismatch computes a third copy, which is kept;
//   3. O = P V in fp32 (SIMT tiles), every row checked against the classic row checksums of V (P . sum_d V[:, d],
//      P . sum_d (d+1) V[:, d]) like step 1, then stored in the 16-bit type.
// Fault sites (FaultSpec::elem / 1024): qk (step 0, the S element of the thread), rowmax, exp, p16, rowsum, inv_l
// (step 1, the first softmax copy; thread = lane of the row's warp, block = row / warps per block), o (step 2).
#pragma once

#include "attention_mma.cuh"

namespace ftattn {

template <class T_, int D_, bool CAUSAL_, bool INJECT_>
struct DecoupledConfig {
  using T = T_;
  static constexpr int D = D_;
  static constexpr bool kCausal = CAUSAL_;
  static constexpr bool kInject = INJECT_;
  static constexpr int TILE = 16;        // SIMT product tiles: 16 x 16 outputs per block
  static constexpr int kRowWarps = 8;    // rows per block of the row kernels (one warp each)
};

struct DecoupledWorkspace {
  float* S;      // [bh][Lq][Lk]
  void* P;       // [bh][Lq][Lk], element type
  float* O;      // [bh][Lq][D]
  double* kc;    // [bh][3][D]: sum_c K[c], sum_c (c+1) K[c], sum_c |K[c]|
  double* vc;    // [bh][Lk][3]: sum_d V[c][d], sum_d (d+1) V[c][d], sum_d |V[c][d]|
};

inline size_t align256(size_t x) { return (x + 255) / 256 * 256; }

template <class C>
size_t decoupled_workspace(const ftgen_attention_problem* p) {
  const size_t bh = static_cast<size_t>(p->batch) * p->heads, lq = p->seq_q, lk = p->seq_k;
  return align256(bh * lq * lk * 4) + align256(bh * lq * lk * sizeof(typename C::T)) + align256(bh * lq * C::D * 4) +
         align256(bh * 3 * C::D * 8) + align256(bh * lk * 3 * 8);
}

template <class C>
DecoupledWorkspace carve(const ftgen_attention_problem* p) {
  const size_t bh = static_cast<size_t>(p->batch) * p->heads, lq = p->seq_q, lk = p->seq_k;
  char* w = static_cast<char*>(p->workspace);
  DecoupledWorkspace ws;
  ws.S = reinterpret_cast<float*>(w);
  w += align256(bh * lq * lk * 4);
  ws.P = w;
  w += align256(bh * lq * lk * sizeof(typename C::T));
  ws.O = reinterpret_cast<float*>(w);
  w += align256(bh * lq * C::D * 4);
  ws.kc = reinterpret_cast<double*>(w);
  w += align256(bh * 3 * C::D * 8);
  ws.vc = reinterpret_cast<double*>(w);
  return ws;
}

template <class C>
void decoupled_geometry(const ftgen_attention_problem* p, long long* blocks, int* threads, int* steps) {
  const long long bh = static_cast<long long>(p->batch) * p->heads;
  *blocks = bh * ((p->seq_q + C::TILE - 1) / C::TILE) * ((p->seq_k + C::TILE - 1) / C::TILE);  // step 0
  *threads = C::TILE * C::TILE;
  *steps = 3;
}

template <class C>
__device__ __forceinline__ bool visible(int i, int c, int lk) {
  return c < lk && (!C::kCausal || c <= i);
}

// encodings of K (per bh and dim) and V (per bh and key)
template <class C>
__global__ void encode_kernel(ftgen_attention_problem p, DecoupledWorkspace ws) {
  using H = Half<typename C::T>;
  const int bh = blockIdx.y;
  const auto* K = static_cast<const typename C::T*>(p.k) + ftgen_attention_kv_bh(&p, bh) * p.seq_k * C::D;
  const auto* V = static_cast<const typename C::T*>(p.v) + ftgen_attention_kv_bh(&p, bh) * p.seq_k * C::D;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < C::D) {
    double s1 = 0, s2 = 0, a = 0;
    for (int c = 0; c < p.seq_k; ++c) {
      const double x = H::to(K[static_cast<long long>(c) * C::D + t]);
      s1 += x;
      s2 += (c + 1.0) * x;
      a += fabs(x);
    }
    double* kc = ws.kc + static_cast<long long>(bh) * 3 * C::D;
    kc[t] = s1;
    kc[C::D + t] = s2;
    kc[2 * C::D + t] = a;
  }
  for (int c = t; c < p.seq_k; c += gridDim.x * blockDim.x) {
    double s1 = 0, s2 = 0, a = 0;
    for (int d = 0; d < C::D; ++d) {
      const double x = H::to(V[static_cast<long long>(c) * C::D + d]);
      s1 += x;
      s2 += (d + 1.0) * x;
      a += fabs(x);
    }
    double* vc = ws.vc + (static_cast<long long>(bh) * p.seq_k + c) * 3;
    vc[0] = s1;
    vc[1] = s2;
    vc[2] = a;
  }
}

// Step 0 / 2 products: out[i][j] = sum_t A[i][t] B'[j][t] (qk: B' = K) or sum_t P[i][t] V[t][j] (pv).
template <class C, bool PV>
__global__ void product_kernel(ftgen_attention_problem p, DecoupledWorkspace ws) {
  using T = typename C::T;
  using H = Half<T>;
  const int bh = blockIdx.z;
  const int rows = p.seq_q, cols = PV ? C::D : p.seq_k, depth = PV ? p.seq_k : C::D;
  const int i = blockIdx.y * C::TILE + threadIdx.y, j = blockIdx.x * C::TILE + threadIdx.x;
  __shared__ float sa[C::TILE][C::TILE + 1], sb[C::TILE][C::TILE + 1];
  const T* A = PV ? static_cast<const T*>(ws.P) + static_cast<long long>(bh) * rows * depth
                  : static_cast<const T*>(p.q) + static_cast<long long>(bh) * rows * depth;
  const T* B = PV ? static_cast<const T*>(p.v) + ftgen_attention_kv_bh(&p, bh) * p.seq_k * C::D
                  : static_cast<const T*>(p.k) + ftgen_attention_kv_bh(&p, bh) * p.seq_k * C::D;
  float acc = 0.f;
  for (int t0 = 0; t0 < depth; t0 += C::TILE) {
    const int ta = t0 + threadIdx.x, tb = t0 + threadIdx.y;
    sa[threadIdx.y][threadIdx.x] = (i < rows && ta < depth) ? H::to(A[static_cast<long long>(i) * depth + ta]) : 0.f;
    const int jb = blockIdx.x * C::TILE + threadIdx.x;
    float bv = 0.f;
    if (jb < cols && tb < depth)
      bv = PV ? H::to(B[static_cast<long long>(tb) * C::D + jb]) : H::to(B[static_cast<long long>(jb) * C::D + tb]);
    sb[threadIdx.y][threadIdx.x] = bv;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < C::TILE; ++t) acc = fmaf(sa[threadIdx.y][t], sb[t][threadIdx.x], acc);
    __syncthreads();
  }
  if (C::kInject && p.faults) {
    const long long block = (static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const ThreadFault f = find_fault(p, block, threadIdx.y * C::TILE + threadIdx.x);
    acc = maybe_fault(acc, f, p, PV ? FTGEN_ATTN_SITE_O : FTGEN_ATTN_SITE_QK, 0, PV ? 2 : 0, i, j);
  }
  if (i < rows && j < cols) {
    float* out = PV ? ws.O + static_cast<long long>(bh) * rows * C::D : ws.S + static_cast<long long>(bh) * rows * p.seq_k;
    out[static_cast<long long>(i) * cols + j] = acc;
  }
}

__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
  for (int o = 16; o; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Step 0 check: one warp per row of S.
template <class C>
__global__ void check_s_kernel(ftgen_attention_problem p, DecoupledWorkspace ws, Rules rules) {
  using H = Half<typename C::T>;
  const int bh = blockIdx.y, lane = threadIdx.x % 32;
  const int i = blockIdx.x * C::kRowWarps + threadIdx.x / 32;
  if (i >= p.seq_q) return;
  const int lk = p.seq_k;
  float* S = ws.S + (static_cast<long long>(bh) * p.seq_q + i) * lk;
  const auto* q = static_cast<const typename C::T*>(p.q) + (static_cast<long long>(bh) * p.seq_q + i) * C::D;
  const auto* K = static_cast<const typename C::T*>(p.k) + ftgen_attention_kv_bh(&p, bh) * lk * C::D;
  const double* kc = ws.kc + static_cast<long long>(bh) * 3 * C::D;
  double c1 = 0, c2 = 0, bnd = 0, g1 = 0, g2 = 0;
  for (int d = lane; d < C::D; d += 32) {
    const double x = H::to(q[d]);
    c1 += x * kc[d];
    c2 += x * kc[C::D + d];
    bnd += fabs(x) * kc[2 * C::D + d];
  }
  for (int c = lane; c < lk; c += 32) {
    g1 += S[c];
    g2 += (c + 1.0) * S[c];
  }
  c1 = warp_sum(c1), c2 = warp_sum(c2), bnd = warp_sum(bnd), g1 = warp_sum(g1), g2 = warp_sum(g2);
  const double tau = bnd * (2.0 * rules.u_acc * (rules.c_sqrt * sqrt(static_cast<double>(C::D)) + rules.c_const) + lk * rules.u32);
  const double r1 = c1 - g1, r2 = c2 - g2;
  Tally tally;
  if (lane == 0) tally.score(static_cast<float>(r1), static_cast<float>(tau));
  if (!(fabs(r1) <= tau)) {
    if (lane == 0) ++tally.detected;
    if (!p.no_correct) {
      const int pos = locate(static_cast<float>(r1), static_cast<float>(r2), static_cast<float>(tau * (lk + 1)), lk, rules.u32);
      if (pos >= 0) {
        double others = 0;
        for (int c = lane; c < lk; c += 32)
          if (c != pos) others += S[c];
        others = warp_sum(others);
        if (lane == 0) {
          S[pos] = static_cast<float>(c1 - others);
          ++tally.corrected;
        }
      } else {  // recompute the row
        for (int c = lane; c < lk; c += 32) {
          float acc = 0.f;
          for (int d = 0; d < C::D; ++d) acc = fmaf(H::to(q[d]), H::to(K[static_cast<long long>(c) * C::D + d]), acc);
          S[c] = acc;
        }
        if (lane == 0) ++tally.recomputed;
      }
    }
  }
  if (lane == 0) tally.flush(p.counters);
}

// One softmax copy of row i into P (lanes stride over keys); `faulty`: the copy the planned fault hits.
template <class C>
__device__ void softmax_row(const volatile float* S, typename C::T* P, int i, int lk, float sl2, const ThreadFault& f,
                            const ftgen_attention_problem& p, bool faulty) {
  using H = Half<typename C::T>;
  const int lane = threadIdx.x % 32;
  float mx = -INFINITY;
  for (int c = lane; c < lk; c += 32)
    if (visible<C>(i, c, lk)) mx = fmaxf(mx, S[c]);
#pragma unroll
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (faulty) mx = maybe_fault(mx, f, p, FTGEN_ATTN_SITE_ROWMAX, 0, 1, i, -1);
  float sum = 0.f;
  for (int c = lane; c < lk; c += 32) {
    float e = visible<C>(i, c, lk) ? ex2(fmaf(S[c], sl2, -mx * sl2)) : 0.f;
    if (faulty) e = maybe_fault(e, f, p, FTGEN_ATTN_SITE_EXP, c / 32, 1, i, c);
    sum += e;
  }
#pragma unroll
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (faulty) sum = maybe_fault(sum, f, p, FTGEN_ATTN_SITE_ROWSUM, 0, 1, i, -1);
  float inv = 1.f / sum;
  if (faulty) inv = maybe_fault(inv, f, p, FTGEN_ATTN_SITE_INV_L, 0, 1, i, -1);
  for (int c = lane; c < lk; c += 32) {
    float e = visible<C>(i, c, lk) ? ex2(fmaf(S[c], sl2, -mx * sl2)) : 0.f;
    if (faulty && f.index >= 0 && f.site(p) == FTGEN_ATTN_SITE_EXP && f.elem(p) == c / 32)  // the same faulty exp (recorded above)
      e = ftgen::apply_fault<float>(e, f.spec(p).kind, f.spec(p).bit, f.spec(p).offset);
    float v = e * inv;
    if (faulty && f.index >= 0 && f.site(p) == FTGEN_ATTN_SITE_P16 && f.elem(p) == c / 32) {
      const uint32_t w = maybe_fault16<typename C::T>(H::pack(v, 0.f), false, f, p, c / 32, 1, i, c);
      v = H::lo(w);
    }
    P[c] = H::from(v);
  }
}

// Step 1: the softmax twice (DMR), a third time on a mismatch.
template <class C>
__global__ void softmax_kernel(ftgen_attention_problem p, DecoupledWorkspace ws, float sl2) {
  using T = typename C::T;
  const int bh = blockIdx.y, lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const int i = blockIdx.x * C::kRowWarps + w;
  if (i >= p.seq_q) return;
  const int lk = p.seq_k;
  const long long row = static_cast<long long>(bh) * p.seq_q + i;
  const float* S = ws.S + row * lk;
  T* P = static_cast<T*>(ws.P) + row * lk;
  ThreadFault f = kNoFault;
  if (C::kInject && p.faults) f = find_fault(p, static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x, threadIdx.x);
  softmax_row<C>(S, P, i, lk, sl2, f, p, C::kInject);
  __syncwarp();
  // the second copy, compared element by element with the first
  Tally tally;
  const volatile float* vS = S;
  float mx = -INFINITY;
  for (int c = lane; c < lk; c += 32)
    if (visible<C>(i, c, lk)) mx = fmaxf(mx, vS[c]);
#pragma unroll
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int c = lane; c < lk; c += 32) sum += visible<C>(i, c, lk) ? ex2(fmaf(vS[c], sl2, -mx * sl2)) : 0.f;
#pragma unroll
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.f / sum;
  bool differ = false;
  for (int c = lane; c < lk; c += 32) {
    const T v = Half<T>::from((visible<C>(i, c, lk) ? ex2(fmaf(vS[c], sl2, -mx * sl2)) : 0.f) * inv);
    const T u = P[c];
    differ |= *reinterpret_cast<const unsigned short*>(&v) != *reinterpret_cast<const unsigned short*>(&u);
  }
  if (__any_sync(0xffffffffu, differ)) {
    if (lane == 0) ++tally.detected;
    if (!p.no_correct) {
      const ThreadFault none = kNoFault;
      softmax_row<C>(vS, P, i, lk, sl2, none, p, false);  // the third copy agrees with the second
      if (lane == 0) ++tally.recomputed;
    }
  }
  if (lane == 0) tally.flush(p.counters);
}

// Step 2 check and store: one warp per row of O.
template <class C>
__global__ void check_o_kernel(ftgen_attention_problem p, DecoupledWorkspace ws, Rules rules) {
  using T = typename C::T;
  using H = Half<T>;
  const int bh = blockIdx.y, lane = threadIdx.x % 32;
  const int i = blockIdx.x * C::kRowWarps + threadIdx.x / 32;
  if (i >= p.seq_q) return;
  const int lk = p.seq_k;
  const long long row = static_cast<long long>(bh) * p.seq_q + i;
  float* Or = ws.O + row * C::D;
  const T* P = static_cast<const T*>(ws.P) + row * lk;
  const T* V = static_cast<const T*>(p.v) + ftgen_attention_kv_bh(&p, bh) * lk * C::D;
  const double* vc = ws.vc + static_cast<long long>(bh) * lk * 3;
  double c1 = 0, c2 = 0, mag = 0, g1 = 0, g2 = 0;
  for (int c = lane; c < lk; c += 32) {
    const double x = H::to(P[c]);
    c1 += x * vc[3 * c];
    c2 += x * vc[3 * c + 1];
    mag += x * vc[3 * c + 2];
  }
  for (int d = lane; d < C::D; d += 32) {
    g1 += Or[d];
    g2 += (d + 1.0) * Or[d];
  }
  c1 = warp_sum(c1), c2 = warp_sum(c2), mag = warp_sum(mag), g1 = warp_sum(g1), g2 = warp_sum(g2);
  const double tau = mag * (2.0 * rules.u_acc * (rules.c_sqrt * sqrt(static_cast<double>(lk)) + rules.c_const) + C::D * rules.u32);
  const double r1 = c1 - g1, r2 = c2 - g2;
  Tally tally;
  if (lane == 0) tally.score(static_cast<float>(r1), static_cast<float>(tau));
  if (!(fabs(r1) <= tau)) {
    if (lane == 0) ++tally.detected;
    if (!p.no_correct) {
      const int pos = locate(static_cast<float>(r1), static_cast<float>(r2), static_cast<float>(tau * (C::D + 1)), C::D, rules.u32);
      if (pos >= 0) {
        double others = 0;
        for (int d = lane; d < C::D; d += 32)
          if (d != pos) others += Or[d];
        others = warp_sum(others);
        __syncwarp();
        if (lane == 0) {
          Or[pos] = static_cast<float>(c1 - others);
          ++tally.corrected;
        }
      } else {
        for (int d = lane; d < C::D; d += 32) {
          float acc = 0.f;
          for (int c = 0; c < lk; ++c) acc = fmaf(H::to(P[c]), H::to(V[static_cast<long long>(c) * C::D + d]), acc);
          Or[d] = acc;
        }
        if (lane == 0) ++tally.recomputed;
      }
      __syncwarp();
    }
  }
  T* O = static_cast<T*>(p.o) + row * C::D;
  for (int d = lane; d < C::D; d += 32) O[d] = H::from(Or[d]);
  if (lane == 0) tally.flush(p.counters);
}

template <class C>
cudaError_t launch_decoupled(const ftgen_attention_problem* p, const Rules& rules, cudaStream_t stream) {
  if (p->head_dim != C::D || !ftgen_attention_shape_ok(p) || !p->workspace) return cudaErrorInvalidValue;
  if (C::kCausal && p->seq_k != p->seq_q) return cudaErrorInvalidValue;
  const DecoupledWorkspace ws = carve<C>(p);
  const int bh = p->batch * p->heads;
  const float scale = p->scale > 0.f ? p->scale : 1.f / sqrtf(static_cast<float>(C::D));
  const float sl2 = scale * 1.4426950408889634f;
  encode_kernel<C><<<dim3((max(p->seq_k, C::D) + 255) / 256, bh), 256, 0, stream>>>(*p, ws);
  const dim3 tile(C::TILE, C::TILE);
  product_kernel<C, false><<<dim3((p->seq_k + C::TILE - 1) / C::TILE, (p->seq_q + C::TILE - 1) / C::TILE, bh), tile, 0, stream>>>(*p, ws);
  const dim3 rows((p->seq_q + C::kRowWarps - 1) / C::kRowWarps, bh);
  check_s_kernel<C><<<rows, 32 * C::kRowWarps, 0, stream>>>(*p, ws, rules);
  softmax_kernel<C><<<rows, 32 * C::kRowWarps, 0, stream>>>(*p, ws, sl2);
  product_kernel<C, true><<<dim3((C::D + C::TILE - 1) / C::TILE, (p->seq_q + C::TILE - 1) / C::TILE, bh), tile, 0, stream>>>(*p, ws);
  check_o_kernel<C><<<rows, 32 * C::kRowWarps, 0, stream>>>(*p, ws, rules);
  return cudaGetLastError();
}

}  // namespace ftattn
