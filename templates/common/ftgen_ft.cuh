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

// The same for a thread that keeps its own record across calls (e.g. a persistent epilogue over its tiles): no load, the
// atomic only when the score beats what this thread recorded before (`seen`).
__device__ __forceinline__ void record_score(FtCounters* c, float score, float& seen) {
  if (c == nullptr || !(score > seen)) return;
  seen = score;
  atomicMax(&c->max_score_bits, static_cast<unsigned long long>(__double_as_longlong(static_cast<double>(score))));
}
// True in the block of the grid that gets here last, which then sees the global writes every block made before the
// call (each fences its own). Every thread of every block calls it (thread 0 of a one-dimensional block takes the
// ticket); the counter is zeroed again for the next launch.
__device__ inline bool last_block(unsigned* counter) {
  __shared__ bool last;
  __threadfence();  // (this block's writes before its count)
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
    if (last) *counter = 0;
  }
  __syncthreads();
  if (last) __threadfence();  // (acquire: the other blocks' writes before this block's loads)
  return last;
}

// A planned fault applied: its record (rec null: none asked for) and the launch's `injected` count (counters null: none).
// The injection sites record through here, but for three: the FFT's (fault_applied, which its host emulator runs too),
// the sm90 TMR's (the planned record, cutlass90_tmr.cuh) and the sm80 CUTLASS kernels' (cutlass_tmr.cuh apply_fault:
// the record built whole and stored at once; field by field, ptxas spills in the TMR kernel level's inject build).
__device__ __forceinline__ void record_fault(FaultRecord* rec, FtCounters* counters, int block, int thread, int elem, int step, int bit,
                                    double before, double after, long long row, long long col) {
  if (rec != nullptr) {
    rec->applied = 1;
    rec->block = block;
    rec->thread = thread;
    rec->elem = elem;
    rec->step = step;
    rec->bit = bit;
    rec->before = before;
    rec->after = after;
    rec->row = row;
    rec->col = col;
  }
  if (counters != nullptr) atomicAdd(&counters->injected, 1ull);
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

// The current device and its SMs (persistent kernels' grids), the count looked up once per device
inline cudaError_t device_sms(int& device, int& sms) {
  static int cached[64] = {};
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= 64) return cudaErrorInvalidDevice;
  if (cached[device] == 0 && (e = cudaDeviceGetAttribute(&cached[device], cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return e;
  sms = cached[device];
  return cudaSuccess;
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

// Blocks of `kernel` (`threads` a block, no dynamic shared memory) resident on one SM of the current device, at most
// `cap`, looked up once per kernel, size and device in this process: a grid-stride kernel's grid of that many blocks per
// SM runs in one wave (with one block more per SM than fits, the last blocks run in a second wave, alone).
template <class Kernel>
inline cudaError_t resident_blocks(Kernel kernel, int threads, int cap, int& per_sm) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  struct Entry {
    const void* kernel;
    int threads, device, blocks;
  };
  static std::mutex lock;
  static std::vector<Entry> known;  // one list per kernel signature
  const std::lock_guard<std::mutex> hold(lock);
  for (const Entry& k : known)
    if (k.kernel == (const void*)kernel && k.threads == threads && k.device == device) {
      per_sm = std::min(k.blocks, cap);
      return cudaSuccess;
    }
  int blocks = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0); e != cudaSuccess) return e;
  blocks = std::max(blocks, 1);
  known.push_back({(const void*)kernel, threads, device, blocks});
  per_sm = std::min(blocks, cap);
  return cudaSuccess;
}

// cp.async (sm_80+) for the kernels' shared-memory pipelines: src_size 0 zero-fills the destination.
template <int BYTES>
__device__ __forceinline__ void cp_async_raw(unsigned smem, const void* gmem, bool pred) {
  const int src_size = pred ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(src_size));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem), "l"(gmem), "n"(BYTES), "r"(src_size));
  }
}
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, bool pred) {
  cp_async_raw<BYTES>(static_cast<unsigned>(__cvta_generic_to_shared(smem)), gmem, pred);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- fault plans (host): the harness's and the library's ------------------------------------------

// counter-based hashing (reproducible from a seed)
__host__ __device__ inline unsigned long long splitmix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// uniform in (0, 1]
__host__ __device__ inline double u01(unsigned long long h) { return (static_cast<double>(h >> 11) + 1.0) * 0x1.0p-53; }

// Plan `n` faults spread over distinct blocks (at most one per block), seeded.
//   elems: accumulator elements per thread; steps: main-loop steps per block;
//   bits: width of the value's representation (32 or 64).
// `skip`: blocks that get no fault (blocks with idle threads, e.g. a partial last block, where a
// fault could land on a value that is never stored); ignored when it would leave no block.
inline std::vector<FaultSpec> plan_faults(int n, unsigned long long seed, long long blocks, int threads, int elems,
                                          int steps, int bits, int kind, int fixed_bit, double fixed_offset,
                                          const std::vector<long long>& skip = {}) {
  std::vector<FaultSpec> plan;
  if (n <= 0 || blocks <= 0) return plan;
  long long skipped = 0;
  for (long long b : skip) skipped += (b >= 0 && b < blocks) ? 1 : 0;
  const bool use_skip = skipped < blocks;
  n = static_cast<int>(std::min<long long>(n, use_skip ? blocks - skipped : blocks));
  unsigned long long h = splitmix64(seed ^ 0xF00DFACEull);
  std::vector<long long> chosen;
  // choose distinct blocks: a partial Fisher-Yates over a virtual permutation (small n)
  while (static_cast<int>(chosen.size()) < n) {
    h = splitmix64(h);
    long long b = static_cast<long long>(h % static_cast<unsigned long long>(blocks));
    if (use_skip && std::find(skip.begin(), skip.end(), b) != skip.end()) continue;
    if (std::find(chosen.begin(), chosen.end(), b) == chosen.end()) chosen.push_back(b);
  }
  std::sort(chosen.begin(), chosen.end());
  for (long long b : chosen) {
    FaultSpec f;
    f.block = static_cast<int>(b);
    h = splitmix64(h);
    f.thread = static_cast<int>(h % threads);
    h = splitmix64(h);
    f.elem = static_cast<int>(h % elems);
    h = splitmix64(h);
    f.step = static_cast<int>(h % std::max(1, steps));
    f.kind = kind;
    h = splitmix64(h);
    f.bit = fixed_bit >= 0 ? fixed_bit : static_cast<int>(h % bits);
    h = splitmix64(h);
    // an offset comparable to a typical accumulator value, random sign, unless given
    f.offset = fixed_offset != 0.0 ? fixed_offset : (u01(h) < 0.5 ? -1.0 : 1.0) * (1.0 + 9.0 * u01(splitmix64(h)));
    plan.push_back(f);
  }
  return plan;
}

// n copies of value from p on (a grid-stride loop: any grid)
template <class T>
__global__ void fill_value_kernel(T* p, size_t n, T value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = value;
}

}  // namespace ftgen
