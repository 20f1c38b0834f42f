// ftgen gemm: the problem description every generated gemm launcher takes.
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

// How a variant decomposes a problem: what fault plans (and tools) need to know.
struct ftgen_gemm_geometry {
  long long blocks;     // threadblocks of one launch (all split-K slices)
  int threads;          // threads per block
  int elems_per_thread; // accumulator elements per thread
  int steps;            // main-loop steps (k-tiles) of one block (of the longest split-K slice)
  int value_bits;       // bits of one element (32 or 64)
  int slices;           // split-K slices (1: none); block b is slice b / (blocks / slices)
  int total_steps;      // k-tiles of all slices (slice z takes [z steps, min((z + 1) steps, total_steps)))
};

// C = alpha * A @ B + beta * C, all row-major (lda >= k, ldb >= n, ldc >= n).
// Pointers are to the variant's element type (float for fp32/tf32, double for fp64, ...).
struct ftgen_gemm_problem {
  int m, n, k;
  double alpha, beta;
  const void* A;
  int lda;
  const void* B;
  int ldb;
  void* C;
  int ldc;
  // Fault tolerance (read by protected variants only).
  ftgen::FtCounters* counters;  // device pointer; may be null
  double threshold;             // > 0 overrides the variant's detection threshold
  void* workspace;              // device workspace of <kernel>_workspace(m, n, k) bytes
  // Fault injection (read only by variants built with inject: true).
  const int* fault_by_block;          // per threadblock: index into faults, or -1
  const ftgen::FaultSpec* faults;
  ftgen::FaultRecord* fault_records;
  int fault_count;  // entries in faults (and fault_records)
  int no_correct;  // campaigns only: detect but do not correct a planned fault (measures its effect)
};
