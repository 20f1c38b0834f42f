// ftgen fft: the problem description every generated fft launcher takes.
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

// flags
#define FTGEN_FFT_RECORD_SCORES 1u  // record max |residual| / threshold in counters->max_score_bits
#define FTGEN_FFT_NO_CORRECT 2u     // detect and count only (campaigns' "uncorrected" run)

// Batched complex-to-complex FFT of `batch` signals of `n` points, interleaved complex
// (float2 for C2C, double2 for Z2Z), signal b at in + b * n. Unnormalised in both directions
// (like cuFFT). Out-of-place or in-place (out == in). Pointers 16-byte aligned.
struct ftgen_fft_problem {
  long long n;
  long long batch;
  const void* in;
  void* out;
  void* workspace;  // <kernel>_workspace(n, batch) bytes (may be null when that is 0)
  // Fault tolerance (read by protected variants only).
  ftgen::FtCounters* counters;  // device pointer; may be null
  double threshold;             // > 0: detection multiplier K (residual > K * rounding scale)
  unsigned flags;               // FTGEN_FFT_* flags
  unsigned long long* false_alarms;  // device counter of detections in blocks without a fault (inject builds)
  // Fault injection (read only by variants built with inject: true).
  const int* fault_by_block;  // per threadblock of all launches in order: index into faults, or -1
  const ftgen::FaultSpec* faults;
  ftgen::FaultRecord* fault_records;
  // Optional: b + 1 when threadblock b (over all launches) is the only one with a planned fault, -1 when none has one;
  // 0 (the default): unknown. Launches of variants built with hooksplit then skip the table read in the other blocks.
  long long fault_block_hint;
};

// Geometry of a variant at one size (for fault plans and reports).
struct ftgen_fft_info {
  int supported;      // 0 when the variant does not implement this n
  int launches;       // kernels per transform
  long long blocks;   // threadblocks of all launches together
  int max_threads;    // largest threadblock
  int max_elems;      // largest (columns per thread) x (elements per thread)
  int max_steps;      // largest number of fault stages (sub-passes + 1)
  int sizes[3];       // launch sizes N1..N3 (0 unused)
  long long partial[3];  // block index (over all launches) of each launch's partial last block, -1 when none
  int cluster;        // a cluster plan: the size of its last launch, done inside the kernel before (0: none)
};
