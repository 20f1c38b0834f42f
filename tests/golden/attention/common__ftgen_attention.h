// ftgen attention: the problem description every generated attention launcher takes.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
namespace ftgen {
struct FtCounters;
struct FaultSpec;
struct FaultRecord;
}  // namespace ftgen
#endif

// O = softmax(scale * Q K^T [+ causal mask]) V for every (batch, head). Q and O are [batch][heads][seq_q][head_dim],
// K and V [batch][kv_heads][seq_k][head_dim], contiguous, in the variant's element type (__half or __nv_bfloat16).
// Grouped-query attention: kv_heads divides heads and query head h reads K / V head h / (heads / kv_heads), as torch's
// scaled_dot_product_attention(..., enable_gqa=True) does; kv_heads 0 means kv_heads = heads.
// Causal: query i sees keys c <= i (seq_k == seq_q).
struct ftgen_attention_problem {
  int batch, heads, seq_q, seq_k;
  int head_dim;   // must equal the variant's head_dim
  float scale;    // softmax scale; 0 means 1 / sqrt(head_dim)
  const void* q;
  const void* k;
  const void* v;
  void* o;
  // Fault tolerance (read by protected variants only).
  ftgen::FtCounters* counters;  // device pointer; may be null
  void* workspace;              // device workspace of <kernel>_workspace(p) bytes (the decoupled baseline's S and P, the
                                // strided levels' K / V encodings)
  // Fault injection (read only by variants built with inject: true).
  const ftgen::FaultSpec* faults;  // FaultSpec::elem = site * 1024 + element (see the kernel header)
  ftgen::FaultRecord* fault_records;
  int fault_count;
  int no_correct;  // campaigns only: detect and count, but do not correct
  int kv_heads;    // K / V heads (a divisor of heads); 0: heads (last, so that {batch, heads, seq_q, seq_k, ...} still reads)
};

#if defined(__CUDACC__)
#define FTGEN_ATTN_HD __host__ __device__
#else
#define FTGEN_ATTN_HD
#endif
// The K / V heads of a problem, and the K / V index of bh = batch * heads + head.
static inline FTGEN_ATTN_HD int ftgen_attention_kv_heads(const struct ftgen_attention_problem* p) {
  return p->kv_heads > 0 ? p->kv_heads : p->heads;
}
static inline FTGEN_ATTN_HD long long ftgen_attention_kv_bh(const struct ftgen_attention_problem* p, long long bh) {
  const int kvh = ftgen_attention_kv_heads(p);
  return bh / p->heads * kvh + bh % p->heads / (p->heads / kvh);
}
// A problem of these sizes, every other field zero (what a workspace query needs).
static inline struct ftgen_attention_problem ftgen_attention_shape(int batch, int heads, int seq_q, int seq_k, int kv_heads,
                                                                   int head_dim) {
  struct ftgen_attention_problem p = {0};
  p.batch = batch, p.heads = heads, p.seq_q = seq_q, p.seq_k = seq_k, p.kv_heads = kv_heads, p.head_dim = head_dim;
  return p;
}
// The problem's shape is one the kernels take (head_dim aside): sizes >= 1, kv_heads 0 or a divisor of heads.
static inline FTGEN_ATTN_HD int ftgen_attention_shape_ok(const struct ftgen_attention_problem* p) {
  return p->batch >= 1 && p->heads >= 1 && p->seq_q >= 1 && p->seq_k >= 1 && p->kv_heads >= 0 &&
         (p->kv_heads == 0 || (p->kv_heads <= p->heads && p->heads % p->kv_heads == 0));
}

// The fault sites of the attention kernels (FaultSpec::elem / 1024).
enum ftgen_attention_site {
  FTGEN_ATTN_SITE_QK = 0,       // an S = Q K^T accumulator (element: index in the thread's S fragment)
  FTGEN_ATTN_SITE_ROWMAX = 1,   // the row max (element: 0 or 1, the thread's two rows)
  FTGEN_ATTN_SITE_EXP = 2,      // an exp output, fp32 (element as QK)
  FTGEN_ATTN_SITE_P16 = 3,      // P after conversion to the 16-bit type (element as QK; bit of the 16-bit value)
  FTGEN_ATTN_SITE_ROWSUM = 4,   // the thread's partial row sum (element: row 0 or 1)
  FTGEN_ATTN_SITE_RESCALE = 5,  // the rescale factor exp(m_old - m_new) (element: row)
  FTGEN_ATTN_SITE_O = 6,        // an O accumulator (element: index in the thread's O fragment)
  FTGEN_ATTN_SITE_INV_L = 7     // 1 / l after the loop (element: row); step is ignored
};
#define FTGEN_ATTN_ELEMS_PER_SITE 1024
