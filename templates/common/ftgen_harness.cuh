// ftgen benchmark harness: shared by every family's benchmark executable.
//
// Argument parsing, checked CUDA calls, random inputs, CUDA-event timing (warm-up, median of
// reps, rotating input sets), verification helpers, fault-injection plans and counters, and
// JSON-lines output. Nothing here is family specific; the driver (ftgen_bench.cuh) and the
// families' problem adapters compose it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ftgen_ft.cuh"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ftgen {

// ------------------------------------------------------------------------------------------
// Errors. A failure prints one JSON row (so the driver records the kind) and exits non-zero.
// ------------------------------------------------------------------------------------------

struct RowContext {
  std::string meta;   // "kernel":...,"family":...  (members without braces)
  std::string shape;  // {"m":..}
};
inline RowContext& row_context() {
  static RowContext ctx;
  return ctx;
}

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (c == '\n') {
      o += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o;
}

[[noreturn]] inline void fail(const char* kind, int exit_code, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const RowContext& c = row_context();
  std::printf("{%s%s\"shape\":%s,\"ok\":false,\"error\":{\"kind\":\"%s\",\"message\":\"%s\"}}\n", c.meta.c_str(),
              c.meta.empty() ? "" : ",", c.shape.empty() ? "null" : c.shape.c_str(), kind, json_escape(msg).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "error (%s): %s\n", kind, msg);
  std::exit(exit_code);
}

#define FT_CUDA(call)                                                                                  \
  do {                                                                                                 \
    cudaError_t ft_err_ = (call);                                                                      \
    if (ft_err_ != cudaSuccess)                                                                        \
      ::ftgen::fail("runtime", 1, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,                 \
                    cudaGetErrorString(ft_err_));                                                      \
  } while (0)

// After every launch: configuration errors now, execution errors at the next synchronization.
#define FT_LAUNCH_CHECK()                                                                              \
  do {                                                                                                 \
    cudaError_t ft_err_ = cudaGetLastError();                                                          \
    if (ft_err_ != cudaSuccess)                                                                        \
      ::ftgen::fail("runtime", 1, "kernel launch failed at %s:%d: %s", __FILE__, __LINE__,             \
                    cudaGetErrorString(ft_err_));                                                      \
  } while (0)

#define FT_CHECK_STATUS(call, ok_value, what)                                                          \
  do {                                                                                                 \
    auto ft_st_ = (call);                                                                              \
    if (ft_st_ != (ok_value))                                                                          \
      ::ftgen::fail("runtime", 1, "%s failed at %s:%d: %s status %d", #call, __FILE__, __LINE__, what, \
                    static_cast<int>(ft_st_));                                                         \
  } while (0)

// ------------------------------------------------------------------------------------------
// Arguments (the same flags for every family's executable; README.md "CLI")
// ------------------------------------------------------------------------------------------

// Input distributions: normal N(0,1), uniform (-1, 1], log-uniform sign * 10^U(-3, 3), and an outlier mix
// (N(0,1), one value in 1000 drawn from N(0, 100^2) instead).
enum Dist { kNormal = 0, kUniform = 1, kLogUniform = 2, kOutliers = 3 };

// One campaign run of --runs: `trials` trials of input distribution `dist`, `inject` faults each, trial t from seed + t.
struct TrialRun {
  int dist = 0;
  int inject = 0;
  unsigned long long seed = 0;
  int trials = 0;
};

struct Args {
  std::vector<std::vector<long long>> shapes;
  int reps = 50;
  int warmup = 10;
  int inject = 0;           // faults per launch
  int inject_kind = kBitflip;
  int bit = -1;             // bit to flip (-1: random over the representation)
  double offset = 0.0;      // offset to add (0: derived from the magnitude of the value)
  unsigned long long seed = 20231;
  bool seed_given = false;  // --seed named: fault plans use it as is (else it is mixed with each shape)
  bool no_ref = false;
  bool info = false;
  int dist = kNormal;
  bool dist_given = false;
  double threshold = 0.0;   // 0: the variant's own (auto or the spec's number)
  int trials = 0;           // >0: campaign mode, verification trials instead of timing
  bool no_timing = false;
  bool verbose = false;
  std::string site;         // --site: where faults land, for families with several sites (empty: the family's default)
  std::vector<TrialRun> runs;  // --runs: several campaign runs in one process (instead of --trials/--inject/--dist/--seed)
};

inline const char* dist_name(int d) {
  return d == kUniform ? "uniform" : d == kLogUniform ? "loguniform" : d == kOutliers ? "outliers" : "normal";
}

inline void usage(const char* prog, int nkeys, const char* keys) {
  std::fprintf(stderr,
               "usage: %s [--shapes %s[,...]] [--reps N] [--warmup N] [--inject N] [--inject-kind bitflip|offset]\n"
               "          [--bit B] [--offset X] [--seed S] [--dist normal|uniform|loguniform|outliers] [--threshold X]\n"
               "          [--trials N] [--runs DIST:INJECT:SEED:TRIALS[,...]] [--site NAME] [--no-ref] [--no-timing] [--info]\n"
               "  shapes: %d integers joined by 'x' (%s)\n",
               prog, keys, nkeys, keys);
}

[[noreturn]] inline void bad_arg(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "error: %s\n", msg);
  std::exit(2);
}

inline long long parse_int(const char* flag, const char* s, long long lo) {
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (!s[0] || *end) bad_arg("%s: '%s' is not an integer", flag, s);
  if (v < lo) bad_arg("%s: %lld is less than %lld", flag, v, lo);
  return v;
}

inline double parse_double(const char* flag, const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (!s[0] || *end) bad_arg("%s: '%s' is not a number", flag, s);
  return v;
}

inline int parse_dist(const char* flag, const std::string& d) {
  if (d == "normal") return kNormal;
  if (d == "uniform") return kUniform;
  if (d == "loguniform") return kLogUniform;
  if (d == "outliers") return kOutliers;
  bad_arg("%s: '%s' is not normal, uniform, loguniform or outliers", flag, d.c_str());
}

// `s` cut at every `sep` (an empty string gives one empty piece).
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

// --runs: comma-separated DIST:INJECT:SEED:TRIALS.
inline std::vector<TrialRun> parse_runs(const char* s) {
  std::vector<TrialRun> out;
  for (const std::string& tok : split(s, ',')) {
    const std::vector<std::string> f = split(tok, ':');
    if (f.size() != 4) bad_arg("--runs: '%s' is not DIST:INJECT:SEED:TRIALS", tok.c_str());
    TrialRun r;
    r.dist = parse_dist("--runs", f[0]);
    r.inject = static_cast<int>(parse_int("--runs", f[1].c_str(), 0));
    r.seed = static_cast<unsigned long long>(parse_int("--runs", f[2].c_str(), 0));
    r.trials = static_cast<int>(parse_int("--runs", f[3].c_str(), 1));
    out.push_back(r);
  }
  return out;
}

// Shapes of nkeys numbers each, or of at least min_keys where min_keys > 0 (the trailing keys are optional).
inline std::vector<std::vector<long long>> parse_shapes(const char* s, int nkeys, const char* keys, int min_keys = 0) {
  std::vector<std::vector<long long>> out;
  for (const std::string& tok : split(s, ',')) {
    if (tok.empty()) continue;
    std::vector<long long> dims;
    for (const std::string& num : split(tok, 'x')) dims.push_back(parse_int("--shapes", num.c_str(), 1));
    const int lo = min_keys > 0 ? min_keys : nkeys, got = static_cast<int>(dims.size());
    if (got < lo || got > nkeys) {
      if (lo == nkeys) bad_arg("--shapes: '%s' has %zu numbers, expected %d (%s)", tok.c_str(), dims.size(), nkeys, keys);
      bad_arg("--shapes: '%s' has %zu numbers, expected %d to %d (%s)", tok.c_str(), dims.size(), lo, nkeys, keys);
    }
    out.push_back(dims);
  }
  if (out.empty()) bad_arg("--shapes: no shape given");
  return out;
}

inline Args parse_args(int argc, char** argv, int nkeys, const char* keys, const char* default_shapes, int min_keys = 0) {
  Args a;
  a.shapes = parse_shapes(default_shapes, nkeys, keys, min_keys);
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto need = [&](void) -> const char* {
      if (i + 1 >= argc) bad_arg("%s needs a value", f.c_str());
      return argv[++i];
    };
    if (f == "--shapes") a.shapes = parse_shapes(need(), nkeys, keys, min_keys);
    else if (f == "--reps") a.reps = static_cast<int>(parse_int("--reps", need(), 1));
    else if (f == "--warmup") a.warmup = static_cast<int>(parse_int("--warmup", need(), 0));
    else if (f == "--inject") a.inject = static_cast<int>(parse_int("--inject", need(), 0));
    else if (f == "--inject-kind") {
      std::string k = need();
      if (k == "bitflip") a.inject_kind = kBitflip;
      else if (k == "offset") a.inject_kind = kOffset;
      else bad_arg("--inject-kind: '%s' is not bitflip or offset", k.c_str());
    } else if (f == "--bit") a.bit = static_cast<int>(parse_int("--bit", need(), 0));
    else if (f == "--offset") a.offset = parse_double("--offset", need());
    else if (f == "--seed") {
      a.seed = static_cast<unsigned long long>(parse_int("--seed", need(), 0));
      a.seed_given = true;
    }
    else if (f == "--dist") a.dist = parse_dist("--dist", need()), a.dist_given = true;
    else if (f == "--threshold") {
      a.threshold = parse_double("--threshold", need());
      if (!(a.threshold > 0)) bad_arg("--threshold must be positive");
    } else if (f == "--trials") a.trials = static_cast<int>(parse_int("--trials", need(), 0));
    else if (f == "--runs") a.runs = parse_runs(need());
    else if (f == "--site") a.site = need();
    else if (f == "--no-ref") a.no_ref = true;
    else if (f == "--no-timing") a.no_timing = true;
    else if (f == "--info") a.info = true;
    else if (f == "--verbose" || f == "-v") a.verbose = true;
    else if (f == "--help" || f == "-h") {
      usage(argv[0], nkeys, keys);
      std::exit(0);
    } else {
      usage(argv[0], nkeys, keys);
      bad_arg("unknown flag '%s'", f.c_str());
    }
  }
  return a;
}

// ------------------------------------------------------------------------------------------
// Device
// ------------------------------------------------------------------------------------------

struct DeviceInfo {
  cudaDeviceProp prop;
  int device = 0;
  int driver = 0;
  int runtime = 0;
};

// Exit code 4 (the README's exit-code table) when no usable GPU is present.
inline DeviceInfo require_device() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no usable CUDA GPU: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    std::printf("{\"error\":{\"kind\":\"no_gpu\",\"message\":\"no usable CUDA GPU\"}}\n");
    std::exit(4);
  }
  DeviceInfo d;
  FT_CUDA(cudaGetDevice(&d.device));
  FT_CUDA(cudaGetDeviceProperties(&d.prop, d.device));
  FT_CUDA(cudaDriverGetVersion(&d.driver));
  FT_CUDA(cudaRuntimeGetVersion(&d.runtime));
  return d;
}

inline void print_device_info(const DeviceInfo& d) {
  std::printf(
      "{\"device\":{\"name\":\"%s\",\"sm_count\":%d,\"cc\":\"%d.%d\",\"driver_api\":%d,\"runtime_api\":%d,"
      "\"l2_bytes\":%d,\"smem_per_block_optin\":%zu,\"memory_bytes\":%zu}}\n",
      json_escape(d.prop.name).c_str(), d.prop.multiProcessorCount, d.prop.major, d.prop.minor, d.driver, d.runtime,
      d.prop.l2CacheSize, d.prop.sharedMemPerBlockOptin, d.prop.totalGlobalMem);
}

// Number of input sets to rotate through so that repeated runs do not measure the L2 cache.
inline int rotation_count(const DeviceInfo& d, size_t bytes_per_set, size_t budget_bytes = size_t(4) << 30) {
  size_t l2 = static_cast<size_t>(d.prop.l2CacheSize);
  if (bytes_per_set == 0) return 1;
  size_t want = (3 * l2 + bytes_per_set - 1) / bytes_per_set;  // the sets together span 3x L2
  size_t cap = std::max<size_t>(1, budget_bytes / bytes_per_set);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>({want, cap, 64})));
}

// ------------------------------------------------------------------------------------------
// Random inputs (counter-based, reproducible from the seed; never zeros)
// ------------------------------------------------------------------------------------------


// decades: the log-uniform magnitudes span 10^-decades .. 10^decades (3; a 16-bit format's caller narrows it so that
// sums of k products stay within its range)
__host__ __device__ inline double random_value(unsigned long long seed, unsigned long long i, int dist, double decades = 3.0) {
  unsigned long long h1 = splitmix64(seed * 0x632BE59BD9B4E019ull + 2 * i);
  double u = u01(h1);
  if (dist == kUniform) return 2.0 * u - 1.0;  // (-1, 1]
  unsigned long long h2 = splitmix64(h1 ^ (2 * i + 1));
  double v = u01(h2);
  if (dist == kLogUniform) {  // sign * 10^U(-decades, decades)
    double mag = pow(10.0, decades * (2.0 * u - 1.0));
    return v < 0.5 ? -mag : mag;
  }
  const double z = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);  // Box-Muller
  if (dist == kOutliers && u01(splitmix64(h2 ^ 0x9E3779B97F4A7C15ull)) <= 1e-3) return 100.0 * z;
  return z;
}

template <class T>
__global__ void fill_random_kernel(T* p, size_t n, unsigned long long seed, int dist, double decades) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<T>(random_value(seed, i, dist, decades));
}

template <class T>
inline void fill_random(T* p, size_t n, unsigned long long seed, int dist, cudaStream_t s = 0, double decades = 3.0) {
  if (n == 0) return;
  int blocks = static_cast<int>(std::min<size_t>((n + 255) / 256, 65535));
  fill_random_kernel<T><<<blocks, 256, 0, s>>>(p, n, seed, dist, decades);
  FT_LAUNCH_CHECK();
}

// Poison an output with NaN so that unwritten elements fail verification.
template <class T>
inline void poison(T* p, size_t n, cudaStream_t s = 0) {
  if (n == 0) return;
  int blocks = static_cast<int>(std::min<size_t>((n + 255) / 256, 65535));
  fill_value_kernel<T><<<blocks, 256, 0, s>>>(p, n, static_cast<T>(NAN));
  FT_LAUNCH_CHECK();
}

template <class T>
__global__ void abs_kernel(const T* in, T* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i] < T(0) ? -in[i] : in[i];
}

template <class T>
inline void absolute(const T* in, T* out, size_t n, cudaStream_t s = 0) {
  if (n == 0) return;
  int blocks = static_cast<int>(std::min<size_t>((n + 255) / 256, 65535));
  abs_kernel<T><<<blocks, 256, 0, s>>>(in, out, n);
  FT_LAUNCH_CHECK();
}

// ------------------------------------------------------------------------------------------
// Device buffers
// ------------------------------------------------------------------------------------------

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { alloc(n); }
  // (re)allocate for n elements; an allocation of that size already held is kept (contents undefined)
  void alloc(size_t n) {
    if (n == count && ptr) return;
    release();
    count = n;
    if (n) FT_CUDA(cudaMalloc(&ptr, n * sizeof(T)));
  }
  void release() {
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
    count = 0;
  }
  void zero() {
    if (count) FT_CUDA(cudaMemset(ptr, 0, count * sizeof(T)));
  }
  std::vector<T> download() const {
    std::vector<T> h(count);
    if (count) FT_CUDA(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// ------------------------------------------------------------------------------------------
// Timing: one event pair per rep, warm-up first, median/min/max.
// ------------------------------------------------------------------------------------------

struct TimeStats {
  double median = 0, min = 0, max = 0;
  int reps = 0;
};

inline TimeStats stats_of(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  TimeStats st;
  st.reps = static_cast<int>(t.size());
  if (t.empty()) return st;
  const size_t r = t.size();
  st.min = t.front();
  st.max = t.back();
  st.median = r % 2 ? t[r / 2] : 0.5 * (t[r / 2 - 1] + t[r / 2]);
  return st;
}

// Launch sequences timed in turn (rep r: seq 0, seq 1, ..., each between its own events), after
// `warmup` untimed rounds; one TimeStats per sequence. Several sequences are timed alternately so
// that all see the same clocks: under a power or thermal limit a long sequence timed after a short
// one runs at lower clocks than the short one did, and separate timings compare states, not work.
inline std::vector<TimeStats> time_alternating(const std::vector<std::function<void(int)>>& seqs, int warmup, int reps,
                                               cudaStream_t s = 0) {
  const size_t ns = seqs.size();
  for (int i = 0; i < warmup; ++i) {
    for (const auto& launch : seqs) {
      launch(i);
      FT_LAUNCH_CHECK();
    }
  }
  FT_CUDA(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev((ns + 1) * reps);
  for (auto& e : ev) FT_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    FT_CUDA(cudaEventRecord(ev[(ns + 1) * i], s));
    for (size_t j = 0; j < ns; ++j) {
      seqs[j](warmup + i);
      FT_LAUNCH_CHECK();
      FT_CUDA(cudaEventRecord(ev[(ns + 1) * i + j + 1], s));
    }
  }
  FT_CUDA(cudaStreamSynchronize(s));
  std::vector<std::vector<double>> t(ns, std::vector<double>(reps));
  for (int i = 0; i < reps; ++i) {
    for (size_t j = 0; j < ns; ++j) {
      float ms = 0;
      FT_CUDA(cudaEventElapsedTime(&ms, ev[(ns + 1) * i + j], ev[(ns + 1) * i + j + 1]));
      t[j][i] = ms;
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::vector<TimeStats> out;
  for (auto& x : t) out.push_back(stats_of(std::move(x)));
  return out;
}

template <class Launch>
inline TimeStats time_launches(Launch&& launch, int warmup, int reps, cudaStream_t s = 0) {
  return time_alternating({std::function<void(int)>(launch)}, warmup, reps, s).front();
}

template <class LaunchA, class LaunchB>
inline std::pair<TimeStats, TimeStats> time_pair(LaunchA&& launch_a, LaunchB&& launch_b, int warmup, int reps, cudaStream_t s = 0) {
  const auto t = time_alternating({std::function<void(int)>(launch_a), std::function<void(int)>(launch_b)}, warmup, reps, s);
  return {t[0], t[1]};
}

// ------------------------------------------------------------------------------------------
// Verification: max |out - ref| / scale over all elements, with NaN/Inf and unwritten checks.
// A non-finite output, reference or scale element counts as `nonfinite` (and fails the check).
// ------------------------------------------------------------------------------------------

struct ErrorStats {
  double max_rel = 0;    // max over i of |out-ref| / scale_i
  double max_abs = 0;
  long long worst = -1;  // index of the worst element
  long long nonfinite = 0;
  long long bad = 0;     // elements whose scaled error exceeds the tolerance
};

// Device-side table: for each block, the index of its fault in the plan or -1.
struct FaultTable {
  DeviceBuffer<int> by_block;
  DeviceBuffer<FaultSpec> specs;
  DeviceBuffer<FaultRecord> records;
  int count = 0;

  void upload(const std::vector<FaultSpec>& plan, long long blocks) {
    std::vector<int> idx(static_cast<size_t>(std::max<long long>(blocks, 1)), -1);
    for (size_t i = 0; i < plan.size(); ++i) idx[plan[i].block] = static_cast<int>(i);
    by_block.alloc(idx.size());
    FT_CUDA(cudaMemcpy(by_block.ptr, idx.data(), idx.size() * sizeof(int), cudaMemcpyHostToDevice));
    count = static_cast<int>(plan.size());
    specs.alloc(std::max<size_t>(plan.size(), 1));
    records.alloc(std::max<size_t>(plan.size(), 1));
    if (!plan.empty())
      FT_CUDA(cudaMemcpy(specs.ptr, plan.data(), plan.size() * sizeof(FaultSpec), cudaMemcpyHostToDevice));
    reset_records();
  }
  void reset_records() { records.zero(); }
  std::vector<FaultRecord> download() const {
    std::vector<FaultRecord> r = records.download();
    r.resize(count);
    return r;
  }
  // Point a family's problem at the table: faults, fault_records, fault_count, no_correct, and fault_by_block where
  // the problem struct has one.
  template <class P>
  void attach(P& q, bool no_correct) const {
    q.faults = specs.ptr;
    q.fault_records = records.ptr;
    q.fault_count = count;
    q.no_correct = no_correct ? 1 : 0;
    if constexpr (HasFaultByBlock<P>::value) q.fault_by_block = by_block.ptr;
  }

 private:
  template <class P, class = void>
  struct HasFaultByBlock : std::false_type {};
  template <class P>
  struct HasFaultByBlock<P, std::void_t<decltype(std::declval<P&>().fault_by_block)>> : std::true_type {};
};

// Launch a variant through its launcher on the default stream; a launch error ends the run (exit 1).
template <class P>
inline void launch_or_fail(cudaError_t (*fn)(const P*, cudaStream_t), const P& q, const char* name) {
  const cudaError_t e = fn(&q, 0);
  if (e != cudaSuccess) fail("runtime", 1, "launch of %s failed: %s", name, cudaGetErrorString(e));
}

// The same comparison on the device (outputs of any size in a millisecond). The worst element is
// located on the device too, by a second pass only when something is wrong: the first non-finite
// element, else the first whose scaled error equals the maximum.
struct CompareAccum {
  unsigned long long max_rel_bits, max_abs_bits, bad, nonfinite, first_nonfinite, worst;
};

// An output element as a double (the 16-bit types convert through float).
template <class T>
__host__ __device__ inline double widen(T x) { return static_cast<double>(x); }
__host__ __device__ inline double widen(__half x) { return __half2float(x); }
__host__ __device__ inline double widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T, class R>
__device__ inline bool scaled_error(const T* out, const R* ref, const R* scale, size_t i, double floor, double& d, double& rel) {
  const double o = widen(out[i]), r = static_cast<double>(ref[i]);
  const double sv = static_cast<double>(scale ? scale[i] : ref[i]);
  if (!isfinite(o) || !isfinite(r) || !isfinite(sv)) return false;  // fmax would drop a NaN
  d = fabs(o - r);
  rel = d / fmax(floor, fabs(sv));
  return true;
}

template <class T, class R>
__global__ void compare_kernel(const T* out, const R* ref, const R* scale, size_t n, double floor, double tol,
                               CompareAccum* acc) {
  double mrel = 0, mabs = 0;
  unsigned long long bad = 0, nonfinite = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    double d, rel;
    if (!scaled_error(out, ref, scale, i, floor, d, rel)) {
      if (!nonfinite) atomicMin(&acc->first_nonfinite, static_cast<unsigned long long>(i));
      ++nonfinite;
      continue;
    }
    mrel = fmax(mrel, rel);
    mabs = fmax(mabs, d);
    bad += rel > tol;
  }
  for (int off = 16; off > 0; off /= 2) {
    mrel = fmax(mrel, __shfl_xor_sync(0xffffffffu, mrel, off));
    mabs = fmax(mabs, __shfl_xor_sync(0xffffffffu, mabs, off));
    bad += __shfl_xor_sync(0xffffffffu, bad, off);
    nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(&acc->max_rel_bits, static_cast<unsigned long long>(__double_as_longlong(mrel)));
    atomicMax(&acc->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(mabs)));
    if (bad) atomicAdd(&acc->bad, bad);
    if (nonfinite) atomicAdd(&acc->nonfinite, nonfinite);
  }
}

template <class T, class R>
__global__ void locate_worst_kernel(const T* out, const R* ref, const R* scale, size_t n, double floor, CompareAccum* acc) {
  const double want = __longlong_as_double(static_cast<long long>(acc->max_rel_bits));
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    double d, rel;
    if (scaled_error(out, ref, scale, i, floor, d, rel) && rel == want) atomicMin(&acc->worst, static_cast<unsigned long long>(i));
  }
}

// One accumulator for the process (the comparisons run one after another on the default stream).
inline CompareAccum* compare_accum() {
  static DeviceBuffer<CompareAccum> acc(1);
  return acc.ptr;
}

template <class T, class R>
inline ErrorStats compare_device(const T* out, const R* ref, const R* scale, size_t n, double floor, double tol) {
  CompareAccum* acc = compare_accum();
  const CompareAccum init{0, 0, 0, 0, ~0ull, ~0ull};
  FT_CUDA(cudaMemcpy(acc, &init, sizeof init, cudaMemcpyHostToDevice));
  const int blocks = std::max(static_cast<int>(std::min<size_t>((n + 255) / 256, 4096)), 1);
  if (n) compare_kernel<T, R><<<blocks, 256>>>(out, ref, scale, n, floor, tol, acc);
  FT_LAUNCH_CHECK();
  CompareAccum a;
  FT_CUDA(cudaMemcpy(&a, acc, sizeof a, cudaMemcpyDeviceToHost));
  if (a.bad && !a.nonfinite) {
    locate_worst_kernel<T, R><<<blocks, 256>>>(out, ref, scale, n, floor, acc);
    FT_LAUNCH_CHECK();
    FT_CUDA(cudaMemcpy(&a, acc, sizeof a, cudaMemcpyDeviceToHost));
  }
  ErrorStats e;
  e.max_rel = score_from_bits(a.max_rel_bits);
  e.max_abs = score_from_bits(a.max_abs_bits);
  e.bad = static_cast<long long>(a.bad);
  e.nonfinite = static_cast<long long>(a.nonfinite);
  const unsigned long long w = a.nonfinite ? a.first_nonfinite : a.worst;
  if (w != ~0ull) e.worst = static_cast<long long>(w);
  return e;
}

// ------------------------------------------------------------------------------------------
// JSON-lines output
// ------------------------------------------------------------------------------------------

class Json {
 public:
  Json& key(const char* k) {
    if (!first_) s_ += ',';
    first_ = false;
    s_ += '"';
    s_ += k;
    s_ += "\":";
    return *this;
  }
  Json& raw(const char* k, const std::string& v) {
    key(k);
    s_ += v;
    return *this;
  }
  Json& str(const char* k, const std::string& v) {
    key(k);
    s_ += '"' + json_escape(v) + '"';
    return *this;
  }
  Json& num(const char* k, double v) {
    key(k);
    s_ += number(v);
    return *this;
  }
  Json& integer(const char* k, long long v) {
    key(k);
    s_ += std::to_string(v);
    return *this;
  }
  Json& boolean(const char* k, bool v) {
    key(k);
    s_ += v ? "true" : "false";
    return *this;
  }
  Json& members(const std::string& m) {  // pre-rendered members, without braces
    if (m.empty()) return *this;
    if (!first_) s_ += ',';
    first_ = false;
    s_ += m;
    return *this;
  }
  std::string str() const { return "{" + s_ + "}"; }
  const std::string& body() const { return s_; }  // members without braces
  static std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
  }

 private:
  std::string s_;
  bool first_ = true;
};

inline std::string time_json(const TimeStats& t) {
  return Json().num("median", t.median).num("min", t.min).num("max", t.max).integer("reps", t.reps).str();
}

// A fault record's common members after `j`'s own: applied, bit, step, row, col, before, after.
inline std::string record_members(Json j, const FaultRecord& f) {
  return j.integer("applied", f.applied)
      .integer("bit", f.bit)
      .integer("step", f.step)
      .integer("row", f.row)
      .integer("col", f.col)
      .num("before", f.before)
      .num("after", f.after)
      .body();
}

inline std::string counters_members(const FtCounters& c, unsigned long long false_alarms) {
  return Json()
      .integer("injected", static_cast<long long>(c.injected))
      .integer("detected", static_cast<long long>(c.detected))
      .integer("corrected", static_cast<long long>(c.corrected))
      .integer("uncorrectable", static_cast<long long>(c.uncorrectable))
      .integer("recomputed", static_cast<long long>(c.recomputed))
      .integer("false_alarms", static_cast<long long>(false_alarms))
      .body();
}

inline void emit_row(const Json& row) {
  std::string s = row.str();
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

}  // namespace ftgen
