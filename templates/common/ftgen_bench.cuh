// ftgen benchmark driver: the one main() of every family's benchmark executable.
//
// A family supplies a problem adapter (a subclass of ftgen::BenchProblem: set up a shape, fill
// inputs, compute the reference, run its kernel once and check the output, plan faults, launch the
// kernel / its unprotected twin / the vendor reference for timing). The driver, compiled once per
// project (ftgen_bench_driver.cu), owns everything else: arguments, input rotation, verification
// bookkeeping (clean run, run with the planned faults, the same faults with correction disabled),
// counter invariants, fault plans' seeds, timing (the kernel, the twin and the reference
// alternately, in one process), the campaign protocol (--trials) and the JSON rows.
#pragma once

#include "ftgen_harness.cuh"

#include <string>
#include <vector>

namespace ftgen {

// What a family declares about its executables (constant for one variant).
struct BenchTraits {
  const char* name = "this variant";  // the kernel (for messages)
  const char* meta = "";            // JSON members naming the variant (kernel, family, precision, ...)
  const char* shape_keys = "";      // JSON keys of one shape, comma separated ("m,n,k")
  const char* shape_usage = "";     // the same for --help ("m x n x k")
  int min_shape_keys = 0;           // > 0: a shape may leave the keys past this many out (the family defaults them)
  const char* default_shapes = "";  // --shapes default
  bool is_protected = false;        // a protection scheme other than none
  bool inject_built = false;        // built with fault injection
  bool can_disable_correction = false;  // RunRequest::no_correct reaches the kernel
  // every planned fault must be applied (without it: some of the plan; the kernel's `injected` counter must
  // equal the applied count either way)
  bool exact_fault_accounting = false;
  int max_trial_faults = 1 << 30;   // --inject limit in campaign mode
  int verify_runs = 1;              // verification runs of one check (e.g. beta = 0 and beta != 0; in place)
  const char* fault_site = "accumulator";  // where faults land (the `site` of a row's faults)
  const char* fault_scope = nullptr;       // e.g. "launch": faults are per batched launch, not per transform
  const char* output_unit = "element";     // what `bad` / `significant` count (elements, signals)
  const char* ref_lib = nullptr;    // vendor library timed beside the kernel (nullptr: none)
  const char* alt_ref_lib = nullptr;  // a second vendor reference timed beside both (e.g. at another math mode)
  bool has_unprotected = false;     // launch_unprotected() exists (verified with RunRequest::twin, timed alternately)
  bool takes_threshold = false;     // --threshold reaches the kernel's checks (rows then carry threshold_override)

  // The fields every family's variant table gives (name, meta, default shapes, protection, injection), and the
  // family's shape keys.
  template <class V>
  static BenchTraits of(const V& v, const char* keys, const char* usage) {
    BenchTraits t;
    t.name = v.name;
    t.meta = v.meta;
    t.shape_keys = keys;
    t.shape_usage = usage;
    t.default_shapes = v.default_shapes;
    t.is_protected = v.is_protected;
    t.inject_built = v.inject;
    t.can_disable_correction = v.inject;
    return t;
  }
};

// One verification run the driver asks for (always on input set 0).
struct RunRequest {
  int run = 0;                                    // 0 .. verify_runs - 1
  const std::vector<FaultSpec>* plan = nullptr;   // faults to inject (null or empty: none)
  bool no_correct = false;                        // detect and count, but do not correct
  bool campaign = false;                          // a campaign trial (record detection scores)
  bool twin = false;                              // run the unprotected twin (launch_unprotected's kernel) instead
  bool has_faults() const { return plan && !plan->empty(); }
};

// What one run found.
struct RunCheck {
  double max_rel = 0;         // largest error in the family's scaled measure (+inf when non-finite)
  double tolerance = 0;       // the precision's tolerance for it
  long long bad = 0;          // output units beyond tolerance (non-finite ones included)
  long long nonfinite = 0;    // non-finite outputs or references
  long long worst = -1;       // index of the worst output unit (-1: unknown)
  bool extra_ok = true;       // the family's own further checks
  std::string extra;          // the family's JSON members for the row (clean runs only), without braces
  FtCounters counters{};
  long long kernel_false_alarms = -1;  // detections the kernel attributes to blocks without a fault (-1: not counted)
  std::vector<FaultRecord> records;    // one per planned fault
  long long applied() const {
    long long a = 0;
    for (const auto& r : records) a += r.applied;
    return a;
  }
  bool ok() const { return nonfinite == 0 && bad == 0 && !(max_rel > tolerance) && max_rel == max_rel && extra_ok; }
};

class BenchProblem {
 public:
  virtual ~BenchProblem() = default;
  virtual const BenchTraits& traits() const = 0;
  // Flag checks of the family (call bad_arg for a flag this variant cannot honour).
  virtual void check_args(const Args&) {}
  // Allocate for `shape` with `sets` rotating input sets. Return false to skip the shape (a variant
  // built for other sizes), after writing the reason into `skip_reason`: the row says so and is not ok
  // (nothing was verified), and the executable's exit code stays 0.
  virtual bool setup(const std::vector<long long>& shape, int sets, std::string& skip_reason) = 0;
  virtual size_t set_bytes(const std::vector<long long>& shape) const = 0;
  virtual void fill(unsigned long long seed, int dist) = 0;
  // JSON members describing the set-up shape beyond the shape itself (e.g. an FFT plan), after fill.
  virtual std::string shape_members() const { return ""; }
  // The reference of input set 0 (after fill).
  virtual void prepare_reference() = 0;
  virtual RunCheck run_checked(const RunRequest&) = 0;
  // `n` faults over the kernel's fault units, seeded; the kernel's own geometry decides where.
  virtual std::vector<FaultSpec> plan_faults(int n, unsigned long long seed, const Args&) = 0;
  // The family's fields of one fault record (campaign rows' "fault" object; members without braces).
  virtual std::string fault_members(const FaultRecord&) const = 0;
  // The site a planned fault lands at (a row's `site`): the traits' one, unless the family draws a site per fault.
  virtual const char* fault_site_of(const FaultSpec&) const { return traits().fault_site; }
  // Detection score of a run (residual / threshold; +inf writes null).
  virtual double score(const FtCounters& c) const { return score_from_bits(c.max_score_bits); }
  // Counters a family adds to the standard ones (members without braces).
  virtual std::string extra_counters(const FtCounters&) const { return ""; }
  // Checks after verification that need the device (e.g. where a cooperative grid ran).
  virtual bool after_verification(Json&) { return true; }
  // Timing: faults armed for every timed launch (empty: none), then launches over input set `set`.
  virtual void arm_timing(const std::vector<FaultSpec>&) {}
  virtual void launch(int set) = 0;
  virtual void launch_unprotected(int) {}
  virtual void launch_ref(int) {}
  virtual void launch_alt_ref(int) {}
  // Rate members of a timed row (gflops, gbps) for a median time in milliseconds.
  virtual std::string rate_members(double ms) const = 0;
  // A last verification after timing (warm caches and tables); false fails the row.
  virtual bool verify_after_timing(Json&) { return true; }
  virtual void release() {}
};

// Parse the flags, run every shape (or the campaign on the first), print one JSON line per shape or
// trial; the process exit code.
int bench_main(BenchProblem& problem, int argc, char** argv);

}  // namespace ftgen
