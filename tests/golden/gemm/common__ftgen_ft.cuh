// ftgen fault tolerance: device-side structures shared by library kernels and the harness.
// Counters, planned faults and fault records; the bit-flip / offset primitive.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace ftgen {

enum InjectKind { kBitflip = 0, kOffset = 1 };

// Fault injection is built into a variant only when it is generated with inject: true;
// otherwise no kernel refers to any of this.

// One planned fault: where (block, thread, element of the thread's accumulators, step of the
// main loop) and what (flip `bit`, or add `offset`). The kernel records what it did.
struct FaultSpec {
  int block;    // linear threadblock index
  int thread;   // thread index in the block
  int elem;     // accumulator element in the thread
  int step;     // main-loop step (k-tile, stage, checkpoint ...)
  int kind;     // kBitflip | kOffset
  int bit;      // bit to flip
  double offset;
};

struct FaultRecord {
  int applied;       // 1 when the kernel reached the planned point
  int block, thread, elem, step, bit;
  double before, after;  // value before and after the fault
  long long row, col;    // output element it landed in (family-specific meaning), -1 unknown
};

struct FtCounters {
  unsigned long long injected;
  unsigned long long detected;
  unsigned long long corrected;
  unsigned long long uncorrectable;  // detected but not locatable (e.g. two faults in one interval)
  unsigned long long recomputed;     // tiles recomputed after detection
  // Largest detection score seen: |checksum residual| / threshold (1.0 = at the threshold), as the
  // bit pattern of a non-negative double (monotonic under unsigned max). Campaigns sweep the
  // threshold over these scores to draw the ROC curve without rerunning.
  unsigned long long max_score_bits;
  // One counter a family defines for itself and reports through its bench adapter's extra_counters (e.g.
  // how often a cheap prefilter sent a group to the exact check); the engine only sums it.
  unsigned long long family_counter;
};

// Record a detection score (residual / threshold); non-negative scores only. The atomic only when the score
// beats the maximum seen so far (read past L1): thousands of warps verify many times per launch, and
// atomics on one address serialize.
__device__ __forceinline__ void record_score(FtCounters* c, double score) {
  if (c == nullptr || !(score >= 0.0)) return;
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(score));
  if (bits <= __ldcg(&c->max_score_bits)) return;
  atomicMax(&c->max_score_bits, bits);
}

__host__ __device__ inline double score_from_bits(unsigned long long bits) {
  union {
    unsigned long long u;
    double d;
  } x;
  x.u = bits;
  return x.d;
}

// Flip bit `bit` of x, or add an offset. Works for float and double.
template <class T>
__device__ __forceinline__ T apply_fault(T x, int kind, int bit, double offset) {
  if (kind == kOffset) return static_cast<T>(static_cast<double>(x) + offset);
  if (sizeof(T) == 8) {
    unsigned long long u = __double_as_longlong(static_cast<double>(x));
    u ^= 1ull << (bit & 63);
    return static_cast<T>(__longlong_as_double(u));
  } else {
    unsigned int u = __float_as_uint(static_cast<float>(x));
    u ^= 1u << (bit & 31);
    return static_cast<T>(__uint_as_float(u));
  }
}

// Opt `kernel` in to `bytes` of dynamic shared memory on the current device (needed above 48 KiB); once per kernel,
// size and device in this process (launches from several host threads may ask at once).
template <class Kernel>
inline cudaError_t set_smem(Kernel kernel, int bytes) {
  if (bytes < (48 << 10)) return cudaSuccess;
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  struct Key {
    const void* kernel;
    int bytes, device;
    bool operator==(const Key& o) const { return kernel == o.kernel && bytes == o.bytes && device == o.device; }
  };
  static std::mutex lock;
  static std::vector<Key> done;  // one list per kernel signature
  const std::lock_guard<std::mutex> hold(lock);
  const Key key{(const void*)kernel, bytes, device};
  if (std::find(done.begin(), done.end(), key) != done.end()) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.push_back(key);
  return e;
}

}  // namespace ftgen
