"""The shared benchmark driver (templates/common/ftgen_bench.cuh + ftgen_bench_driver.cu).

Structure: every family's generated `_bench.cu` is a problem adapter handed to `ftgen::bench_main`,
the driver is compiled once per project (an object library) and no driver code is repeated in the
generated files.

Behaviour, without a GPU: the driver is compiled with nvcc and linked with a scripted problem
adapter and a stand-in for the few CUDA runtime calls it makes (device query, events, synchronize),
whose event clock advances only when the adapter "launches". The rows it prints are then checked:
the alternated timing of kernel, unprotected twin and reference, the clean / injected / uncorrected
runs of an injection row, the counter invariant, NaN handling, per-shape fault seeds, the campaign
rows and the exit codes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from ftgen.build import find_nvcc
from ftgen.codegen.emit import render_spec
from ftgen.spec import load_spec_text

REPO = Path(__file__).resolve().parents[1]

SPECS = {
    "gemm": """
        name: hgemm
        family: gemm
        arch: [sm_90]
        variants:
          - {precision: fp32, params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 2}}
          - {precision: fp32, protection: {scheme: abft, level: threadblock, interval: 8, inject: true},
             params: {m_tb: 64, n_tb: 128, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 4}}
        """,
    "gemm_cutlass": """
        name: hcutlass
        family: gemm
        arch: [sm_90]
        variants:
          - {precision: tf32x3, protection: {scheme: abft, level: threadblock, interval: 8, inject: true},
             params: {tb_m: 128, tb_n: 64, tb_k: 32, warp_m: 32, warp_n: 32, warp_k: 32, stages: 4}}
          - {precision: tf32, protection: {scheme: tmr, level: kernel, inject: true},
             params: {tb_m: 64, tb_n: 64, tb_k: 16, warp_m: 32, warp_n: 32, warp_k: 16, stages: 3}}
        """,
    "fft": """
        name: hfft
        family: fft
        arch: [sm_90]
        variants:
          - {precision: fp32, params: {logn: 10}}
          - {precision: fp32, protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 10}}
        """,
}

# what only the driver may do: parse flags, time, print rows, run campaigns
DRIVER_ONLY = ("parse_args", "time_alternating", "time_launches", "emit_row", "run_trials", "cudaEventCreate", "rotation_count")


@pytest.mark.parametrize("family", sorted(SPECS))
def test_every_bench_is_an_adapter_handed_to_the_one_driver(family):
    files, manifest = render_spec(load_spec_text(textwrap.dedent(SPECS[family]), f"{family}.yaml"))
    benches = {p: t for p, t in files.items() if p.endswith("_bench.cu")}
    assert len(benches) == len(manifest["variants"]) == 2
    for path, text in benches.items():
        assert "ftgen::bench_main(" in text, path
        assert len(text.splitlines()) <= 60, f"{path}: {len(text.splitlines())} lines"
        for name in DRIVER_ONLY:
            assert name not in text, f"{path} does what the driver owns: {name}"
    # the driver and the family's adapter header ship once, in common/
    assert "common/ftgen_bench_driver.cu" in files and "common/ftgen_bench.cuh" in files
    driver = files["common/ftgen_bench_driver.cu"]
    definition = re.compile(r"int bench_main\(BenchProblem& \w+, int argc, char\*\* argv\) \{")
    assert definition.search(driver)
    for path, text in files.items():
        if path != "common/ftgen_bench_driver.cu":
            assert not definition.search(text), path
    # compiled once per project, linked into every executable
    cmake = files["CMakeLists.txt"]
    assert cmake.count("add_library(ftgen_bench_driver OBJECT common/ftgen_bench_driver.cu)") == 1
    exes = re.findall(r"^add_executable\((\S+) (.*)\)$", cmake, re.M)
    assert len(exes) == 2 and all("$<TARGET_OBJECTS:ftgen_bench_driver>" in srcs for _, srcs in exes)


def test_kernel_sources_do_not_include_the_driver():
    for family, spec in SPECS.items():
        files, manifest = render_spec(load_spec_text(textwrap.dedent(spec), f"{family}.yaml"))
        for v in manifest["variants"]:
            for src in v["sources"]:
                if not src.endswith("_bench.cu"):
                    assert "ftgen_bench" not in files[src], src


# ------------------------------------------------------------------------------------------------
# The driver's behaviour, with a scripted adapter and a stand-in CUDA runtime
# ------------------------------------------------------------------------------------------------

# The CUDA runtime calls the driver makes, answered on the host: one device, and events that read a
# clock the scripted adapter advances when it launches.
FAKE_CUDART = r"""
#include <cuda_runtime_api.h>
#include <cstring>
double g_fake_clock_ms = 0;
extern "C" {
void** __cudaRegisterFatBinary(void*) { static void* handle = nullptr; return &handle; }
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "stand-in");
  p->multiProcessorCount = 1;
  p->l2CacheSize = 1 << 20;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) { *v = 12000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* v) { *v = 12000; return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = reinterpret_cast<cudaEvent_t>(new double(0)); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete reinterpret_cast<double*>(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) { *reinterpret_cast<double*>(e) = g_fake_clock_ms; return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = static_cast<float>(*reinterpret_cast<double*>(b) - *reinterpret_cast<double*>(a));
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t) { return "stand-in error"; }
}
"""

# A protected kernel on an m x n shape with one fault unit per element. FAKE_MODE scripts what its
# runs report: ok | nan (a NaN error, as from a NaN in the reference) | overcount (more detections
# than faults) | unaccounted (detections neither corrected, recomputed nor uncorrectable) | clean_alarm (a
# detection without a fault) | uncorrected (the corrected output still wrong) | unapplied (a planned fault
# never applied) | miscounted (the kernel's injected counter off by one) | stray (faults counted in a run
# without a plan) | twin_wrong (the unprotected twin's output wrong) | insignificant (faults that leave the
# output within tolerance without correction) | tight (the second verification run's tolerance is tighter
# than its error, though it counts no bad unit).
FAKE_ADAPTER = r"""
#include <cmath>
#include <cstdlib>
#include <string>
#include "ftgen_bench.cuh"

extern double g_fake_clock_ms;

class Scripted final : public ftgen::BenchProblem {
 public:
  Scripted() {
    const char* m = std::getenv("FAKE_MODE");
    mode_ = m ? m : "ok";
    t_.meta = "\"kernel\":\"scripted\",\"family\":\"test\"";
    t_.shape_keys = "m,n";
    t_.shape_usage = "m x n";
    t_.default_shapes = "8x8";
    t_.is_protected = true;
    t_.inject_built = true;
    t_.can_disable_correction = true;
    t_.exact_fault_accounting = true;
    t_.verify_runs = 2;
    t_.ref_lib = "refblas";
    t_.has_unprotected = true;
    t_.takes_threshold = mode_ != "no_threshold";
  }
  const ftgen::BenchTraits& traits() const override { return t_; }
  size_t set_bytes(const std::vector<long long>& s) const override { return static_cast<size_t>(s[0] * s[1]) * 4; }
  bool setup(const std::vector<long long>& s, int, std::string& skip) override {
    if (s[0] == 7) {
      skip = "built for other sizes";
      return false;
    }
    m_ = s[0];
    return true;
  }
  void fill(unsigned long long, int) override {}
  void prepare_reference() override {}
  ftgen::RunCheck run_checked(const ftgen::RunRequest& rq) override {
    ftgen::RunCheck c;
    c.tolerance = 1e-5;
    c.max_rel = mode_ == "nan" ? NAN : 1e-7;
    if (rq.twin) {
      if (mode_ == "twin_wrong") c.bad = 2, c.max_rel = 1.0;
      return c;
    }
    if (rq.run == 1 && mode_ == "tight") c.tolerance = 1e-8;  // run 1 held to a tighter rule than run 0
    if (rq.run == 0 && !rq.has_faults()) c.extra = "\"scripted_extra\":1";
    if (!rq.has_faults()) {
      c.counters.detected = mode_ == "clean_alarm" ? 1 : 0;
      c.counters.injected = mode_ == "stray" ? 1 : 0;
      return c;
    }
    const auto& plan = *rq.plan;
    for (size_t i = 0; i < plan.size(); ++i) {
      ftgen::FaultRecord r{};
      r.applied = mode_ == "unapplied" && i + 1 == plan.size() ? 0 : 1;
      r.block = plan[i].block;
      r.bit = plan[i].bit;
      r.step = plan[i].step;
      r.row = plan[i].thread;
      r.col = plan[i].elem;
      c.records.push_back(r);
    }
    const unsigned long long n = static_cast<unsigned long long>(c.applied());
    c.counters.injected = n + (mode_ == "miscounted" ? 1 : 0);
    c.counters.detected = n + (mode_ == "overcount" ? 3 : 0);
    c.counters.corrected = rq.no_correct || mode_ == "unaccounted" ? 0 : n;
    c.counters.max_score_bits = 0;
    if (rq.no_correct && mode_ == "insignificant") {  // the faults moved the output within tolerance
      c.max_rel = 2e-6;
    } else if (rq.no_correct) {  // each fault left one element beyond tolerance
      c.bad = static_cast<long long>(n);
      c.max_rel = 0.5;
    } else if (mode_ == "uncorrected") {  // one element still wrong after the corrections
      c.bad = 1;
      c.max_rel = 0.5;
    }
    return c;
  }
  std::vector<ftgen::FaultSpec> plan_faults(int n, unsigned long long seed, const ftgen::Args& a) override {
    std::vector<ftgen::FaultSpec> plan;
    unsigned long long h = seed;
    for (int i = 0; i < n; ++i) {
      ftgen::FaultSpec f{};
      h = ftgen::splitmix64(h);
      f.block = i;
      f.thread = static_cast<int>(h % m_);
      f.elem = static_cast<int>((h >> 20) % m_);
      f.step = static_cast<int>((h >> 40) % 4);
      f.kind = a.inject_kind;
      f.bit = a.bit >= 0 ? a.bit : static_cast<int>((h >> 50) % 32);
      f.offset = 1.5;
      plan.push_back(f);
    }
    return plan;
  }
  std::string fault_members(const ftgen::FaultRecord& f) const override {
    return ftgen::Json().integer("applied", f.applied).integer("bit", f.bit).integer("row", f.row).body();
  }
  // in turn (kernel, twin, reference) they take 2, 1 and 3 ms; out of turn the twin and the
  // reference take 7 and 9 ms: timing them apart from the kernel would show
  void launch(int) override { g_fake_clock_ms += 2.0, last_ = 1; }
  void launch_unprotected(int) override { g_fake_clock_ms += last_ == 1 ? 1.0 : 7.0, last_ = 2; }
  void launch_ref(int) override { g_fake_clock_ms += last_ == 2 ? 3.0 : 9.0, last_ = 3; }
  std::string rate_members(double ms) const override { return ftgen::Json().num("rate", 1.0 / ms).body(); }

 private:
  ftgen::BenchTraits t_;
  std::string mode_;
  long long m_ = 1;
  int last_ = 0;
};

int main(int argc, char** argv) {
  Scripted p;
  return ftgen::bench_main(p, argc, argv);
}
"""


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    root = tmp_path_factory.mktemp("driver")
    common = REPO / "templates" / "common"
    (root / "fake_cudart.cpp").write_text(FAKE_CUDART)
    (root / "scripted.cu").write_text(FAKE_ADAPTER)
    cuda_inc = Path(nvcc).resolve().parents[1] / "include"
    flags = ["-std=c++17", "-O1", "-arch=sm_90", f"-I{common}"]
    objs = []
    for src, extra in (("scripted.cu", []), (str(common / "ftgen_bench_driver.cu"), []), ("fake_cudart.cpp", [f"-I{cuda_inc}"])):
        obj = root / (Path(src).stem + ".o")
        p = subprocess.run([nvcc, *flags, *extra, "-c", str(root / src) if "/" not in src else src, "-o", str(obj)],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        objs.append(str(obj))
    exe = root / "scripted"
    p = subprocess.run([nvcc, "-cudart", "none", *objs, "-o", str(exe)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr

    def run(*args: str, mode: str = "ok") -> tuple[int, list[dict], str]:
        env = {**os.environ, "FAKE_MODE": mode}
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60, env=env)
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        return p.returncode, rows, p.stderr

    return run



@pytest.mark.compile
def test_driver_times_kernel_twin_and_reference_alternately(scripted):
    rc, rows, err = scripted("--shapes", "8x8", "--reps", "7", "--warmup", "2")
    assert rc == 0, err
    (row,) = rows
    assert row["ok"] is True and row["kernel"] == "scripted" and row["shape"] == {"m": 8, "n": 8}
    assert row["ms"] == {"median": 2, "min": 2, "max": 2, "reps": 7}
    assert row["ref"]["lib"] == "refblas" and row["ref"]["alternated"] is True
    assert (row["ref"]["ms"], row["ref"]["min"], row["ref"]["max"], row["ref"]["reps"]) == (3, 3, 3, 7)
    assert row["x_unprot"] == 2 and row["paired"]["x_unprotected"] == 2 and row["unprotected_ms"]["median"] == 1
    assert row["speedup_vs_ref"] == 1.5 and row["rate"] == 0.5
    assert row["scripted_extra"] == 1 and row["false_alarms"] == 0 and "faults" not in row
    assert row["max_rel_err_unprotected"] == 1e-7 and "twin_error" not in row  # the twin was verified too
    assert "verified" not in row and "max_rel_err" in row


@pytest.mark.compile
def test_a_row_without_its_reference_says_it_was_not_verified(scripted):
    rc, rows, err = scripted("--shapes", "8x8", "--reps", "3", "--no-ref")
    assert rc == 0, err
    (row,) = rows
    assert row["verified"] is False and "max_rel_err" not in row and "ref" not in row


@pytest.mark.compile
def test_injection_row_has_clean_and_uncorrected_runs_and_lists_its_faults(scripted):
    rc, rows, err = scripted("--shapes", "8x8,16x16", "--inject", "3", "--reps", "3")
    assert rc == 0, err
    for row in rows:
        assert row["ok"] is True
        assert row["clean_false_alarms"] == 0
        assert row["faults_planned"] == row["faults_applied"] == 6  # two verification runs of three faults
        assert row["injected"] == 6 and row["detected"] == 6 and row["corrected"] == 6
        assert row["significant"] == 6  # the uncorrected runs left every fault beyond tolerance
        assert row["uncorrected_err"] == 0.5
        assert len(row["faults"]) == 3 and row["timed_with_faults"] is True
        for f in row["faults"]:
            assert set(f) == {"site", "bit", "position", "step", "block", "applied"}
            assert f["site"] == "accumulator" and f["applied"] == 1 and len(f["position"]) == 2
    # no --seed: every shape gets its own faults (the scripted plan's bits depend on the seed only);
    # --seed S: the same seed everywhere
    def bits(row):
        return [f["bit"] for f in row["faults"]]

    assert bits(rows[0]) != bits(rows[1])
    _, seeded, _ = scripted("--shapes", "8x8,16x16", "--inject", "3", "--seed", "5", "--reps", "3")
    assert bits(seeded[0]) == bits(seeded[1])


@pytest.mark.compile
def test_offset_faults_are_listed_by_offset(scripted):
    rc, rows, err = scripted("--inject", "1", "--inject-kind", "offset", "--reps", "2")
    assert rc == 0, err
    (f,) = rows[0]["faults"]
    assert f["offset"] == 1.5 and "bit" not in f


@pytest.mark.compile
@pytest.mark.parametrize("mode, inject, what", [
    ("nan", "0", None),                       # a NaN error (e.g. a NaN in the reference) fails the row
    ("overcount", "2", "counter_error"),      # detected > applied + false alarms
    ("unaccounted", "2", "counter_error"),    # detections that end neither corrected, recomputed nor uncorrectable
    ("clean_alarm", "0", None),               # a detection on clean data
    ("clean_alarm", "2", None),               # ... also in an injection row's clean run
    ("uncorrected", "2", "bad_injected"),     # the corrected output is still wrong
    ("unapplied", "2", "fault_accounting_error"),   # a planned fault that never happened
    ("miscounted", "2", "fault_accounting_error"),  # the kernel counts a fault it did not apply
    ("stray", "0", "counter_error"),          # faults counted in a run without a plan
    ("twin_wrong", "0", "twin_error"),        # the twin the overhead is measured against is wrong
    ("tight", "0", None),                     # each verification run is held to its own tolerance
])
def test_rows_that_break_the_rules_fail(scripted, mode, inject, what):
    rc, rows, _ = scripted("--inject", inject, "--reps", "2", mode=mode)
    assert rc == 1 and rows[0]["ok"] is False
    if what:
        assert what in rows[0]
    if mode == "clean_alarm":
        assert rows[0]["false_alarms"] >= 1
        if inject != "0":
            assert rows[0]["clean_false_alarms"] == 2  # one per clean verification run


@pytest.mark.compile
def test_campaign_rows(scripted):
    rc, rows, err = scripted("--trials", "3", "--inject", "1", "--shapes", "8x8")
    assert rc == 0, err
    assert [r["trial"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["injected"] == 1 and r["significant"] is True and r["ok"] is True and r["false_alarm"] is False
        assert r["uncorrected_err"] == 0.5 and r["detected"] == 1 and r["corrected"] == 1
        assert r["fault"]["site"] == "accumulator" and r["fault"]["applied"] == 1
    assert len({r["fault"]["row"] for r in rows} | {r["fault"]["bit"] for r in rows}) > 1  # faults vary by trial
    rc, clean, _ = scripted("--trials", "2", mode="clean_alarm")
    assert rc == 0 and all(r["injected"] == 0 and r["significant"] is False and r["false_alarm"] is True for r in clean)
    # a trial's own verdict: the corrected output still wrong is not ok (the exit code stays 0: ftgen reads the rows)
    rc, wrong, _ = scripted("--trials", "2", "--inject", "1", "--shapes", "8x8", mode="uncorrected")
    assert rc == 0 and all(r["ok"] is False and r["max_rel_err"] == 0.5 for r in wrong)
    # significance is the uncorrected error against the tolerance, not the fault's mere presence
    _, mild, _ = scripted("--trials", "2", "--inject", "1", "--shapes", "8x8", mode="insignificant")
    assert all(r["injected"] == 1 and r["significant"] is False and r["ok"] is True for r in mild)


@pytest.mark.compile
def test_several_campaign_runs_in_one_process(scripted):
    """--runs gives the rows of one --trials run each, in order, numbered by run; its flags are checked per run."""
    rc, rows, err = scripted("--runs", "uniform:0:11:2,normal:1:40:3", "--shapes", "8x8")
    assert rc == 0, err
    assert [(r["run"], r["trial"], r["dist"], r["injected"]) for r in rows] == \
        [(0, 0, "uniform", 0), (0, 1, "uniform", 0)] + [(1, t, "normal", 1) for t in range(3)]
    _, alone, _ = scripted("--trials", "3", "--inject", "1", "--seed", "40", "--shapes", "8x8")
    strip = lambda rs: [{k: v for k, v in r.items() if k != "run"} for r in rs]
    assert strip(rows[2:]) == alone  # the same trials, faults included, as the run on its own
    rc, skipped, _ = scripted("--runs", "normal:0:1:2,normal:1:3:2", "--shapes", "7x7")
    assert rc == 0 and [(r["run"], r["skipped"]) for r in skipped] == [(0, "built for other sizes"), (1, "built for other sizes")]
    for bad in (["--runs", "normal:0:1"], ["--runs", "sideways:0:1:2"], ["--runs", "normal:0:1:0"], ["--runs", "normal:0:1:2,"],
                ["--runs", "normal:0:1:2", "--trials", "2"], ["--runs", "normal:0:1:2", "--seed", "3"],
                ["--runs", "normal:0:1:2", "--dist", "uniform"]):
        assert scripted(*bad)[0] == 2, bad


@pytest.mark.compile
def test_skipped_shapes_and_flag_errors(scripted):
    rc, rows, _ = scripted("--shapes", "7x7", "--reps", "2")
    assert rc == 0 and rows[0]["skipped"] == "built for other sizes" and rows[0]["ok"] is False  # nothing verified
    assert scripted("--bogus")[0] == 2
    assert scripted("--shapes", "8x8x8")[0] == 2
    assert scripted("--inject-kind", "sideways")[0] == 2
    assert scripted("--site", "elsewhere")[0] == 2  # a family with one fault site takes only that one
    # --threshold: refused where the checks take none from the command line, echoed in the row where they do
    rc, _, err = scripted("--threshold", "3", mode="no_threshold")
    assert rc == 2 and "--threshold" in err, err
    rc, rows, _ = scripted("--threshold", "3", "--reps", "2")
    assert rc == 0 and rows[0]["threshold_override"] == 3 and rows[0]["ok"] is True
    assert "threshold_override" not in scripted("--reps", "2")[1][0]
    assert scripted("--help")[0] == 0


@pytest.mark.compile
def test_input_distributions_on_the_host(tmp_path):
    """The driver's --dist values as the harness draws them: moments of normal / uniform / log-uniform, and the
    outlier mix (about one value in 1000 from N(0, 100^2), the rest N(0, 1))."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    src = tmp_path / "dists.cu"
    src.write_text(textwrap.dedent("""\
        #include <cmath>
        #include <cstdio>
        #include "ftgen_harness.cuh"
        int main() {
          const int n = 1000000;
          for (int d = 0; d < 4; ++d) {
            double s = 0, s2 = 0, big = 0, lo = 1e300, hi = -1e300;
            for (int i = 0; i < n; ++i) {
              const double x = ftgen::random_value(7, i, d);
              s += x, s2 += x * x, big += std::fabs(x) > 10.0, lo = x < lo ? x : lo, hi = x > hi ? x : hi;
            }
            std::printf("%s %.4f %.4f %.6f %g %g\\n", ftgen::dist_name(d), s / n, s2 / n, big / n, lo, hi);
          }
          return 0;
        }
        """))
    exe = tmp_path / "dists"
    p = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "common"), str(src), "-o", str(exe)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout.splitlines():
        name, *vals = line.split()
        out[name] = [float(v) for v in vals]
    mean, m2, big, lo, hi = out["normal"]
    assert abs(mean) < 0.01 and abs(m2 - 1) < 0.01 and big == 0
    mean, m2, big, lo, hi = out["uniform"]
    assert abs(mean) < 0.01 and abs(m2 - 1 / 3) < 0.01 and -1 <= lo and hi <= 1
    mean, m2, big, lo, hi = out["loguniform"]
    assert 1e-3 * 0.99 < min(abs(lo), abs(hi)) and max(abs(lo), abs(hi)) <= 1e3
    mean, m2, big, lo, hi = out["outliers"]
    assert 0.0006 < big < 0.0012  # one in 1000 drawn 100x wider; |100 z| > 10 for ~92% of those
    assert 8 < m2 < 14  # 0.999 * 1 + 0.001 * 10^4
