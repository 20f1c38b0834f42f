// ftgen benchmark driver (see ftgen_bench.cuh). Compiled once per project and linked into every
// benchmark executable.
#include "ftgen_bench.cuh"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace ftgen {
namespace {

std::vector<std::string> split_keys(const char* keys) { return split(keys, ','); }

std::string shape_json(const BenchTraits& t, const std::vector<long long>& shape) {
  const std::vector<std::string> keys = split_keys(t.shape_keys);
  Json j;
  for (size_t i = 0; i < shape.size() && i < keys.size(); ++i) j.integer(keys[i].c_str(), shape[i]);
  return j.str();
}

// The seed of a shape's fault plan: `base` as given with --seed, else mixed with the shape so that
// every size gets its own faults (bits, positions, steps).
unsigned long long fault_seed(const Args& a, const std::vector<long long>& shape, unsigned long long base) {
  if (a.seed_given) return base;
  unsigned long long h = splitmix64(base ^ 0x5EEDF00Dull);
  for (long long d : shape) h = splitmix64(h ^ static_cast<unsigned long long>(d));
  return h;
}

// The verification runs of one check (RunRequest::run = 0 .. verify_runs - 1), taken together.
struct Combined {
  double max_rel = 0, tolerance = 0;  // the largest error; run 0's tolerance (the one the row shows)
  long long bad = 0, nonfinite = 0, worst = -1;
  bool within = true;  // every run's error within that run's own tolerance
  bool extra_ok = true;
  std::string extra;
  FtCounters c{};
  long long kernel_false_alarms = -1;
  long long applied = 0, planned = 0;
  std::vector<FaultRecord> records;  // of run 0
  bool ok() const { return nonfinite == 0 && bad == 0 && within && extra_ok; }
};

Combined run_all(BenchProblem& p, const std::vector<FaultSpec>* plan, bool no_correct, bool twin = false) {
  Combined all;
  const int runs = std::max(1, p.traits().verify_runs);
  for (int r = 0; r < runs; ++r) {
    RunRequest q;
    q.run = r;
    q.plan = plan;
    q.no_correct = no_correct;
    q.twin = twin;
    const RunCheck c = p.run_checked(q);
    if (r == 0 || !(c.max_rel <= all.max_rel)) {  // NaN counts as the worst
      all.max_rel = c.max_rel;
      all.worst = c.worst;
    }
    all.tolerance = r == 0 ? c.tolerance : all.tolerance;
    all.within = all.within && c.max_rel <= c.tolerance;  // (false for NaN)
    all.bad += c.bad;
    all.nonfinite += c.nonfinite;
    all.extra_ok = all.extra_ok && c.extra_ok;
    if (!c.extra.empty()) all.extra += (all.extra.empty() ? "" : ",") + c.extra;
    all.c.injected += c.counters.injected;
    all.c.detected += c.counters.detected;
    all.c.corrected += c.counters.corrected;
    all.c.uncorrectable += c.counters.uncorrectable;
    all.c.recomputed += c.counters.recomputed;
    all.c.family_counter += c.counters.family_counter;
    all.c.max_score_bits = std::max(all.c.max_score_bits, c.counters.max_score_bits);
    if (c.kernel_false_alarms >= 0) all.kernel_false_alarms = std::max(0ll, all.kernel_false_alarms) + c.kernel_false_alarms;
    all.applied += c.applied();
    all.planned += plan ? static_cast<long long>(plan->size()) : 0;
    if (r == 0) all.records = c.records;
  }
  return all;
}

std::string faults_json(const BenchProblem& p, const std::vector<FaultSpec>& plan, const std::vector<FaultRecord>& rec) {
  std::string s = "[";
  for (size_t i = 0; i < plan.size(); ++i) {
    const FaultRecord r = i < rec.size() ? rec[i] : FaultRecord{};
    Json f;
    f.str("site", p.fault_site_of(plan[i]));
    if (plan[i].kind == kOffset)
      f.num("offset", plan[i].offset);
    else
      f.integer("bit", i < rec.size() && r.applied ? r.bit : plan[i].bit);
    f.raw("position", "[" + std::to_string(r.applied ? r.row : -1) + "," + std::to_string(r.applied ? r.col : -1) + "]");
    f.integer("step", r.applied ? r.step : plan[i].step).integer("block", plan[i].block).integer("applied", r.applied);
    s += (i ? "," : "") + f.str();
  }
  return s + "]";
}

std::string counters_of(const BenchProblem& p, const FtCounters& c, long long false_alarms) {
  Json j;
  j.members(counters_members(c, static_cast<unsigned long long>(false_alarms)));
  j.members(p.extra_counters(c));
  return j.body();
}

// What every row of a shape carries first: the variant's meta, the shape, the input distribution and, where the
// checks ran at a threshold given on the command line, that threshold instead of the spec's.
void row_head(Json& row, const BenchTraits& t, const std::string& shape_json_text, const Args& args) {
  row.members(t.meta).raw("shape", shape_json_text).str("dist", dist_name(args.dist));
  if (args.threshold > 0) row.num("threshold_override", args.threshold);
}

bool run_shape(BenchProblem& p, const Args& args, const DeviceInfo& dev, const std::vector<long long>& shape) {
  const BenchTraits& t = p.traits();
  const std::string sj = shape_json(t, shape);
  row_context().shape = sj;
  Json row;
  row_head(row, t, sj, args);
  std::string skip;
  const int sets = args.no_timing ? 1 : rotation_count(dev, p.set_bytes(shape));
  if (!p.setup(shape, sets, skip)) {
    row.str("skipped", skip).boolean("ok", false);  // nothing verified; not a failure of the executable
    emit_row(row);
    return true;
  }
  p.fill(args.seed, args.dist);
  row.members(p.shape_members());  // (after fill: a problem may describe what its inputs turned out to be)
  std::vector<FaultSpec> plan;
  if (args.inject > 0) plan = p.plan_faults(args.inject, fault_seed(args, shape, args.seed), args);
  bool ok = true;

  if (!args.no_ref) {
    p.prepare_reference();
    // 1. clean: every detection is a false alarm
    const Combined clean = run_all(p, nullptr, false);
    ok = ok && clean.ok();
    row.num("max_rel_err", clean.max_rel).num("tolerance", clean.tolerance).members(clean.extra);
    if (!clean.ok()) {
      row.integer("bad", clean.bad).integer("nonfinite", clean.nonfinite).str("bad_unit", t.output_unit);
      if (clean.worst >= 0) row.integer("worst", clean.worst);
    }
    const long long clean_fa = static_cast<long long>(clean.c.detected);
    if (clean.c.injected != 0) {
      row.str("counter_error", "faults injected in a run without a plan");
      ok = false;
    }
    if (t.has_unprotected) {
      // the twin the overhead is measured against computes the same output, within the same tolerance
      const Combined twin = run_all(p, nullptr, false, true);
      row.num("max_rel_err_unprotected", twin.max_rel);
      if (!twin.ok()) {
        row.integer("bad_unprotected", twin.bad).integer("nonfinite_unprotected", twin.nonfinite);
        row.str("twin_error", "the unprotected twin's output is wrong");
        ok = false;
      }
    }
    if (t.is_protected) {
      FtCounters shown = clean.c;
      long long false_alarms = clean_fa;
      if (!plan.empty()) {
        // 2. the planned faults, corrected; 3. the same faults with correction disabled
        const Combined faulty = run_all(p, &plan, false);
        false_alarms = faulty.kernel_false_alarms >= 0 ? faulty.kernel_false_alarms : clean_fa;
        shown = faulty.c;
        if (faulty.tolerance != clean.tolerance) row.num("tolerance_injected", faulty.tolerance);  // (tf32: its delivered rule)
        row.num("max_rel_err_injected", faulty.max_rel)
            .integer("faults_planned", faulty.planned)
            .integer("faults_applied", faulty.applied)
            .integer("clean_false_alarms", clean_fa)
            .raw("faults", faults_json(p, plan, faulty.records));
        if (t.fault_scope) row.str("fault_scope", t.fault_scope);
        if (!faulty.ok()) {
          row.integer("bad_injected", faulty.bad).integer("nonfinite_injected", faulty.nonfinite);
          ok = false;
        }
        // the row's corrections are of faults that happened: as many as the kernel counted, and all of the
        // plan (a family whose faults may land where they change nothing, e.g. on a masked key: some of it)
        if (static_cast<long long>(faulty.c.injected) != faulty.applied ||
            (t.exact_fault_accounting ? faulty.applied != faulty.planned : faulty.applied == 0)) {
          row.str("fault_accounting_error", "faults applied differ from the plan or from the kernel's count");
          ok = false;
        }
        if (t.can_disable_correction) {
          const Combined unc = run_all(p, &plan, true);
          // output units beyond tolerance without correction: the faults that mattered
          row.integer("significant", unc.bad).num("uncorrected_err", unc.nonfinite ? INFINITY : unc.max_rel);
        }
        // counters: a detection is an applied fault or a false alarm; more is a counting error. And every
        // detection ends corrected, recomputed or uncorrectable: a run that reports none of them lost a count
        if (static_cast<long long>(faulty.c.detected) > faulty.applied + false_alarms) {
          row.str("counter_error", "detected > faults applied + false alarms");
          ok = false;
        } else if (faulty.c.detected > 0 && faulty.c.corrected + faulty.c.recomputed + faulty.c.uncorrectable == 0) {
          row.str("counter_error", "detections neither corrected, recomputed nor uncorrectable");
          ok = false;
        }
      }
      row.members(counters_of(p, shown, false_alarms));
      row.num("max_score_clean", score_from_bits(clean.c.max_score_bits));
      if (clean_fa) ok = false;  // a detection on clean data
    }
    ok = p.after_verification(row) && ok;
  } else {
    row.boolean("verified", false);  // --no-ref: no reference, so nothing was checked (ok covers the launches only)
  }

  if (!args.no_timing) {
    p.arm_timing(plan);
    std::vector<std::function<void(int)>> seqs{[&](int i) { p.launch(i); }};
    const bool twin = t.has_unprotected, ref = t.ref_lib && !args.no_ref, alt = ref && t.alt_ref_lib;
    if (twin) seqs.push_back([&](int i) { p.launch_unprotected(i); });
    if (ref) seqs.push_back([&](int i) { p.launch_ref(i); });
    if (alt) seqs.push_back([&](int i) { p.launch_alt_ref(i); });
    // the kernel, its twin and the references alternately (rep r: each once, in turn): the same clocks
    const std::vector<TimeStats> ts = time_alternating(seqs, args.warmup, args.reps);
    const TimeStats& tk = ts[0];
    row.raw("ms", time_json(tk)).members(p.rate_members(tk.median));
    if (args.inject > 0) row.boolean("timed_with_faults", !plan.empty());
    if (twin) {
      const TimeStats& tu = ts[1];
      row.raw("unprotected_ms", time_json(tu))
          .raw("paired", Json()
                             .num("ms", tk.median)
                             .num("unprotected_ms", tu.median)
                             .num("x_unprotected", tk.median / tu.median)
                             .integer("reps", tk.reps)
                             .str())
          .num("x_unprot", tk.median / tu.median);
    }
    auto ref_json = [&](const char* lib, const TimeStats& tr) {
      return Json()
          .str("lib", lib)
          .num("ms", tr.median)
          .num("min", tr.min)
          .num("max", tr.max)
          .integer("reps", tr.reps)
          .boolean("alternated", true)
          .members(p.rate_members(tr.median))
          .str();
    };
    if (ref) {
      const TimeStats& tr = ts[alt ? ts.size() - 2 : ts.size() - 1];
      row.raw("ref", ref_json(t.ref_lib, tr));
      row.num("speedup_vs_ref", tr.median / tk.median);
      if (alt) {
        const TimeStats& ta = ts.back();
        row.raw("alt_ref", ref_json(t.alt_ref_lib, ta)).num("speedup_vs_alt_ref", ta.median / tk.median);
      }
      ok = p.verify_after_timing(row) && ok;
    }
  }
  FT_CUDA(cudaDeviceSynchronize());
  row.boolean("ok", ok);
  emit_row(row);
  p.release();
  return ok;
}

// Campaign protocol (--trials N) on the first shape: trial t fills inputs from seed + t; with
// --inject 1 it plans one fault, runs it with correction disabled (would it have mattered?) and with
// correction; one JSON line per trial, numbered `run` too where it is one of several (--runs).
int run_trials(BenchProblem& p, const Args& args, const std::vector<long long>& shape, int run = -1) {
  const BenchTraits& t = p.traits();
  const std::string sj = shape_json(t, shape);
  row_context().shape = sj;
  std::string skip;
  if (!p.setup(shape, 1, skip)) {
    Json row;
    if (run >= 0) row.integer("run", run);
    row.members(t.meta).raw("shape", sj).str("skipped", skip).boolean("ok", false);
    emit_row(row);
    return 0;
  }
  for (int k = 0; k < args.trials; ++k) {
    const unsigned long long seed = args.seed + static_cast<unsigned long long>(k);
    p.fill(seed, args.dist);
    p.prepare_reference();
    std::vector<FaultSpec> plan;
    if (args.inject > 0) plan = p.plan_faults(args.inject, fault_seed(args, shape, seed * 7919 + 13), args);
    RunRequest q;
    q.plan = &plan;
    q.campaign = true;
    double uncorrected = 0;
    bool have_unc = false;
    if (!plan.empty() && t.can_disable_correction) {
      q.no_correct = true;
      const RunCheck u = p.run_checked(q);
      uncorrected = u.nonfinite ? 1e300 : u.max_rel;
      have_unc = true;
      q.no_correct = false;
    }
    const RunCheck r = p.run_checked(q);
    const bool applied = !plan.empty() && r.applied() > 0;
    Json row;
    row.integer("trial", k);
    if (run >= 0) row.integer("run", run);
    row_head(row, t, sj, args);
    row.integer("injected", applied ? 1 : 0);
    if (!plan.empty()) {
      const FaultRecord f = r.records.empty() ? FaultRecord{} : r.records.front();
      row.raw("fault", Json().members(p.fault_members(f)).str("site", p.fault_site_of(plan.front())).str());
    }
    if (have_unc) row.num("uncorrected_err", uncorrected);
    row.boolean("significant", applied && have_unc && !(uncorrected <= r.tolerance));
    row.integer("detected", static_cast<long long>(r.counters.detected))
        .integer("corrected", static_cast<long long>(r.counters.corrected))
        .integer("uncorrectable", static_cast<long long>(r.counters.uncorrectable))
        .integer("recomputed", static_cast<long long>(r.counters.recomputed))
        .members(p.extra_counters(r.counters))
        .boolean("false_alarm", !applied && r.counters.detected > 0)
        .num("score", p.score(r.counters))
        .num("max_rel_err", r.nonfinite ? 1e300 : r.max_rel)
        .num("tolerance", r.tolerance);
    if (t.fault_scope && !plan.empty()) row.str("fault_scope", t.fault_scope);
    row.boolean("ok", r.ok());
    emit_row(row);
  }
  p.release();
  return 0;
}

// The flags' rules that do not depend on the device (a campaign run of --runs checked as its own --trials run).
void check_flags(BenchProblem& p, const Args& args) {
  const BenchTraits& t = p.traits();
  if ((args.inject > 0 || args.trials > 0) && !t.is_protected)
    bad_arg("--inject/--trials: %s is not protected (protection.scheme: none)", t.name);
  if (args.inject > 0 && !t.inject_built)
    bad_arg("--inject: %s was built without fault injection (set protection.inject: true in the spec)", t.name);
  if (args.trials > 0 && args.inject > t.max_trial_faults)
    bad_arg("--trials: --inject must be at most %d (faults per trial)", t.max_trial_faults);
  if (args.threshold > 0 && !(t.is_protected && t.takes_threshold))
    bad_arg("--threshold: %s has no check that takes a threshold from the command line (set protection.threshold in the spec)",
            t.name);
  p.check_args(args);  // a family with several fault sites takes --site here (and names it in its traits)
  if (!args.site.empty() && args.site != t.fault_site)
    bad_arg("--site: %s injects faults at '%s' only, not '%s'", t.name, t.fault_site, args.site.c_str());
}

// The arguments of campaign run i of --runs: its distribution, faults, seed and trials.
Args run_args(const Args& args, size_t i) {
  Args a = args;
  const TrialRun& r = args.runs[i];
  a.dist = r.dist, a.inject = r.inject, a.seed = r.seed, a.seed_given = true, a.trials = r.trials;
  a.runs.clear();
  return a;
}

}  // namespace

int bench_main(BenchProblem& p, int argc, char** argv) {
  const BenchTraits& t = p.traits();
  const int rank = static_cast<int>(split_keys(t.shape_keys).size());
  Args args = parse_args(argc, argv, rank, t.shape_usage, t.default_shapes, t.min_shape_keys);
  row_context().meta = t.meta;
  if (!args.runs.empty()) {
    if (args.trials > 0 || args.inject > 0 || args.seed_given || args.dist_given)
      bad_arg("--runs gives each run its distribution, faults, seed and trials: leave out --trials, --inject, --dist and --seed");
    for (size_t i = 0; i < args.runs.size(); ++i) check_flags(p, run_args(args, i));
  } else {
    check_flags(p, args);
  }
  const DeviceInfo dev = require_device();
  if (args.info) {
    print_device_info(dev);
    return 0;
  }
  if (!args.runs.empty()) {  // one process for several runs: the device and library handles are set up once
    for (size_t i = 0; i < args.runs.size(); ++i) {
      const Args a = run_args(args, i);
      p.check_args(a);  // an adapter may keep what it reads here (fft: whether faults are injected)
      run_trials(p, a, args.shapes.front(), static_cast<int>(i));
    }
    return 0;
  }
  if (args.trials > 0) return run_trials(p, args, args.shapes.front());
  int failed = 0;
  for (const auto& s : args.shapes)
    if (!run_shape(p, args, dev, s)) ++failed;
  if (failed) std::fprintf(stderr, "%d shape(s) failed verification\n", failed);
  return failed ? 1 : 0;
}

}  // namespace ftgen
