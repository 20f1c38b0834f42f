"""The family contract, proved by a family defined here: ``vaxpy`` (y = a*x + b on vectors) with
dual modular redundancy (compute twice, compare, recompute on a mismatch), its templates written
to a temporary folder, registered, generated and compiled without touching any shared file."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from ftgen import families
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families.base import PRECISION_CTYPE, PRECISION_TAG, Backend, Family, LauncherSignature, Param, Source, Variant, power_of_two
from ftgen.spec import load_spec_text

# ---- the family ----------------------------------------------------------------------------

TEMPLATES = {
    "ftgen_vaxpy.h": """\
#pragma once
#include <cuda_runtime.h>
// The problem every vaxpy variant's launcher takes: y = a * x + b over n elements.
struct ftgen_vaxpy_problem {
  int n;
  double a, b;
  const void* x;
  void* y;
  int* counters;      // detected, recomputed (may be null)
  int fault_index;    // inject builds: the element whose first result is corrupted (-1: none)
};
""",
    "variant.h.j2": """\
#pragma once
// {{ name }}: y = a*x + b, {{ precision }}, protection {{ prot_token }}
#include "ftgen_vaxpy.h"
extern "C" cudaError_t {{ sym }}(const ftgen_vaxpy_problem* p, cudaStream_t stream);
""",
    "variant.cu.j2": """\
#include "{{ name }}.h"

namespace {
using T = {{ T }};

__global__ void __launch_bounds__({{ block }}) kernel(int n, T a, T b, const T* x, T* y, int* counters, int fault_index) {
  const int i = blockIdx.x * {{ block }} + threadIdx.x;
  if (i >= n) return;
  T r = a * x[i] + b;
{% if dmr %}
{% if inject %}
  if (i == fault_index) r += T(1);
{% endif %}
  // the second copy reads x again through a volatile pointer, so the compiler keeps both
  const T again = a * static_cast<const volatile T*>(x)[i] + b;
  if (r != again) {
    const T third = a * static_cast<const volatile T*>(x)[i] + b;
    if (counters) { atomicAdd(&counters[0], 1); atomicAdd(&counters[1], 1); }
    r = third;
  }
{% endif %}
  y[i] = r;
}
}  // namespace

extern "C" cudaError_t {{ sym }}(const ftgen_vaxpy_problem* p, cudaStream_t stream) {
  const int blocks = (p->n + {{ block }} - 1) / {{ block }};
  kernel<<<blocks, {{ block }}, 0, stream>>>(p->n, T(p->a), T(p->b), static_cast<const T*>(p->x), static_cast<T*>(p->y),
                                             p->counters, p->fault_index);
  return cudaGetLastError();
}
""",
    "bench.cu.j2": """\
// {{ name }}: the shared bench driver with this family's small problem adapter
#include <cmath>
#include "ftgen_bench.cuh"
#include "{{ name }}.h"

namespace {
using T = {{ T }};

class Vaxpy : public ftgen::BenchProblem {
 public:
  Vaxpy() {
    t_.name = "{{ name }}";
    t_.meta = R"FTJSON({{ meta_json }})FTJSON";
    t_.shape_keys = "n";
    t_.shape_usage = "n";
    t_.default_shapes = "{{ default_shapes }}";
    t_.is_protected = {{ dmr | cbool }};
    t_.inject_built = {{ inject | cbool }};
    t_.max_trial_faults = 1;
    t_.output_unit = "element";
  }
  const ftgen::BenchTraits& traits() const override { return t_; }
  bool setup(const std::vector<long long>& shape, int sets, std::string&) override {
    n_ = static_cast<int>(shape[0]), sets_ = sets;
    x_.alloc(static_cast<size_t>(n_) * sets), y_.alloc(n_), counters_.alloc(2);
    return true;
  }
  size_t set_bytes(const std::vector<long long>& shape) const override { return shape[0] * sizeof(T); }
  void fill(unsigned long long seed, int dist) override { ftgen::fill_random(x_.ptr, x_.count, seed, dist); }
  void prepare_reference() override {
    const std::vector<T> x = x_.download();
    ref_.assign(n_, 0.0);
    for (int i = 0; i < n_; ++i) ref_[i] = 2.0 * static_cast<double>(x[i]) + 1.0;
  }
  ftgen::RunCheck run_checked(const ftgen::RunRequest& r) override {
    const int fault = r.has_faults() ? (*r.plan)[0].elem % n_ : -1;
    counters_.zero();
    launch_at(0, fault);
    FT_CUDA(cudaDeviceSynchronize());
    ftgen::RunCheck c;
    const std::vector<T> y = y_.download();
    c.tolerance = 4.0 * {{ "1.1102230246251565e-16" if precision == "fp64" else "5.960464477539063e-08" }};
    for (int i = 0; i < n_; ++i) {
      const double e = std::fabs(static_cast<double>(y[i]) - ref_[i]) / (std::fabs(ref_[i]) + 1.0);
      if (!(e == e)) ++c.nonfinite;
      if (e > c.max_rel || !(e == e)) c.max_rel = e, c.worst = i;
      if (!(e <= c.tolerance)) ++c.bad;
    }
    const std::vector<int> k = counters_.download();
    c.counters.detected = k[0], c.counters.recomputed = k[1];
    if (r.has_faults()) {
      ftgen::FaultRecord f{};
      f.applied = {{ 1 if inject else 0 }}, f.elem = fault, f.row = fault, f.col = -1;
      c.records.push_back(f);
      c.counters.injected = f.applied;
    }
    return c;
  }
  std::vector<ftgen::FaultSpec> plan_faults(int n, unsigned long long seed, const ftgen::Args&) override {
    std::vector<ftgen::FaultSpec> out;
    for (int i = 0; i < n && i < 1; ++i) out.push_back(ftgen::FaultSpec{0, 0, static_cast<int>(seed % n_), 0, 0, 0, 1.0});
    return out;
  }
  std::string fault_members(const ftgen::FaultRecord& f) const override {
    return ftgen::Json().integer("applied", f.applied).integer("element", f.elem).body();
  }
  void launch(int set) override { launch_at(set, -1); }
  std::string rate_members(double ms) const override {
    return ftgen::Json().num("gbps", 2.0 * n_ * sizeof(T) / (ms * 1e6)).body();
  }

 private:
  void launch_at(int set, int fault) {
    ftgen_vaxpy_problem p{n_, 2.0, 1.0, x_.ptr + static_cast<size_t>(set % sets_) * n_, y_.ptr, counters_.ptr, fault};
    FT_CUDA({{ sym }}(&p, 0));
  }
  ftgen::BenchTraits t_;
  int n_ = 0, sets_ = 1;
  ftgen::DeviceBuffer<T> x_, y_;
  ftgen::DeviceBuffer<int> counters_;
  std::vector<double> ref_;
};
}  // namespace

int main(int argc, char** argv) {
  Vaxpy problem;
  return ftgen::bench_main(problem, argc, argv);
}
""",
}


class DmrBackend(Backend):
    name = "simt"
    precisions = ("fp32", "fp64")
    levels = {"dmr": {"thread": "t"}}
    params = (
        Param("block", int, (256,), "threads per block", check=power_of_two, lo=32, hi=1024),
        Param("unroll", int, (1,), "elements per thread", choices=(1, 2, 4)),
    )
    constraint_docs = ("vaxpy: unroll 1 only (the kernel takes one element per thread)",)

    def constraints(self, v: Variant) -> list[str]:
        return [] if v["unroll"] == 1 else [f"unroll={v['unroll']}: the kernel takes one element per thread"]

    def name_tokens(self, v: Variant) -> list[str]:
        return ["vaxpy", PRECISION_TAG[v.precision], self.protection_token(v.protection), f"b{v['block']}"] + (
            ["inj"] if v.protection.inject else [])

    def context(self, v: Variant) -> dict:
        return {"name": v.name, "sym": v.symbol, "precision": v.precision, "T": PRECISION_CTYPE[v.precision],
                "block": v["block"], "dmr": v.protection.enabled, "inject": v.protection.injects,
                "meta_json": v.meta_json()}

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return (Source("variant.h.j2", ".h", "header"), Source("variant.cu.j2", ".cu", "library"),
                Source("bench.cu.j2", "_bench.cu", "bench"))


class VaxpyFamily(Family):
    name = "vaxpy"
    description = "y = a*x + b with dual modular redundancy (a family defined by a test)"
    shape_keys = ("n",)
    backends = (DmrBackend(),)
    default_shapes = ({"n": 4096},)
    launcher = LauncherSignature("const ftgen_vaxpy_problem* p, cudaStream_t stream", "p, stream", ("p->n",))

    def __init__(self, template_dir: Path):
        self.template_dir = str(template_dir)


SPEC = """\
name: vaxpy_demo
family: vaxpy
arch: [sm_80]
precision: [fp32, fp64]
protection: {scheme: [none, dmr], level: thread, inject: true}
params: {block: [128, 256], unroll: [1, 2]}
shapes: [{n: 1000}]
"""


@pytest.fixture
def vaxpy(tmp_path):
    folder = tmp_path / "vaxpy_templates"
    folder.mkdir()
    for name, text in TEMPLATES.items():
        (folder / name).write_text(text)
    fam = families.register(VaxpyFamily(folder.resolve()))
    yield fam
    families.unregister("vaxpy")


# ---- the contract, without a compiler ------------------------------------------------------


def test_a_registered_family_is_offered_and_an_unknown_one_is_explained(vaxpy):
    assert "vaxpy" in families.names() and families.get("vaxpy") is vaxpy
    with pytest.raises(SpecError) as e:
        load_spec_text("name: t\nfamily: vaxpz\n", "t.yaml")
    assert "did you mean 'vaxpy'" in str(e.value) and "gemm" in str(e.value) and "vaxpy" in str(e.value)


def test_the_space_expands_with_the_backends_levels_tokens_and_constraints(vaxpy):
    spec = load_spec_text(SPEC, "vaxpy.yaml")
    names = sorted(v.name for v in spec.variants)
    assert names == sorted(f"vaxpy_{p}_{prot}_b{b}{inj}" for p in ("f32", "f64") for b in (128, 256)
                           for prot, inj in (("none", ""), ("dmr-t", "_inj")))
    assert len(spec.rejected) == 8 and all("one element per thread" in r.reasons[0] for r in spec.rejected)
    assert all(v.backend == "simt" for v in spec.variants)


def test_bad_values_name_the_field(vaxpy):
    for body, where, message in (
        ("params: {block: 48}", "params.block", "48 is not a power of two"),
        ("params: {block: 2048}", "params.block", "2048 is outside 32..1024"),
        ("params: {blok: 64}", "params.blok", "did you mean 'block'"),
        ("protection: {scheme: abft}", "protection.scheme", "abft"),
        ("precision: fp16", "precision", "fp16"),
    ):
        with pytest.raises(SpecError) as e:
            load_spec_text(f"name: t\nfamily: vaxpy\n{body}\n", "t.yaml")
        assert where in str(e.value) and message in str(e.value), str(e.value)


def test_generation_renders_from_the_familys_own_folder(vaxpy, tmp_path):
    files, manifest = render_spec(load_spec_text(SPEC, "vaxpy.yaml"))
    assert files["common/ftgen_vaxpy.h"] == TEMPLATES["ftgen_vaxpy.h"]  # the family's headers, once per project
    v = "vaxpy_f32_dmr-t_b128_inj"
    assert f"{v}/{v}.cu" in files and f"{v}/{v}_bench.cu" in files
    assert "// vaxpy_f32_dmr-t_b128_inj: y = a*x + b, fp32, protection dmr-t" in files[f"{v}/{v}.h"]
    assert "if (i == fault_index)" in files[f"{v}/{v}.cu"]
    assert "fault_index) r" not in files["vaxpy_f32_none_b128/vaxpy_f32_none_b128.cu"]
    entry = next(e for e in manifest["variants"] if e["kernel"] == v)
    assert entry["requires"] == [] and entry["backend"] == "simt" and entry["header"] == f"{v}/{v}.h"
    assert "FTGEN_CUTLASS_INCLUDE" not in files["CMakeLists.txt"] and "CUDA::cublas" not in files["CMakeLists.txt"]


def test_describe_is_structured(vaxpy):
    d = vaxpy.describe()
    assert list(d) == ["family", "description", "shape_keys", "precisions", "backends", "constraints"]
    assert d["shape_keys"] == ["n"] and d["precisions"] == ["fp32", "fp64"]
    (b,) = d["backends"]
    assert list(b) == ["name", "precisions", "schemes", "requires", "params"]
    assert b["schemes"] == {"none": [], "dmr": ["thread"]} and b["requires"] == []
    assert b["params"][0] == {"name": "block", "type": "int", "choices": None, "range": [32, 1024], "default": 256,
                              "doc": "threads per block (a power of two)"}
    assert b["params"][1]["choices"] == [1, 2, 4] and b["params"][1]["range"] is None
    assert d["constraints"] == ["vaxpy: unroll 1 only (the kernel takes one element per thread)"]
    json.dumps(d)


def test_builtin_gemm_describes_each_backends_real_ranges():
    d = families.get("gemm").describe()
    by = {b["name"]: {p["name"]: p for p in b["params"]} for b in d["backends"]}
    assert by["simt"]["stages"]["range"] == [2, 6] and by["cutlass"]["stages"]["range"] == [3, 8]
    assert by["cutlass"]["coop_teams"]["range"] == [0, None]
    assert {b["name"]: b["requires"] for b in d["backends"]} == {"simt": ["cublas"], "cutlass": ["cublas", "cutlass"],
                                                                        "cutlass90": ["cublas", "cutlass"]}
    assert {b["name"]: b["schemes"] for b in d["backends"]}["cutlass"]["tmr"] == ["kernel", "threadblock", "multikernel", "cooperative"]


# ---- generate and compile ------------------------------------------------------------------


@pytest.mark.compile
def test_generate_and_compile_with_the_cli(vaxpy, tmp_path, capsys):
    spec = tmp_path / "vaxpy.yaml"
    spec.write_text(textwrap.dedent(SPEC).replace("precision: [fp32, fp64]", "precision: fp32")
                    .replace("block: [128, 256], unroll: [1, 2]", "block: 128"))
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 0
    project = tmp_path / "out" / "vaxpy_demo"
    manifest = json.loads((project / "manifest.json").read_text())
    assert [v["kernel"] for v in manifest["variants"]] == ["vaxpy_f32_none_b128", "vaxpy_f32_dmr-t_b128_inj"]
    assert main(["build", str(project), "--arch", "sm_80"]) == 0, capsys.readouterr().err
    for v in manifest["variants"]:
        assert (project / "bin" / v["kernel"]).is_file()
        # the family's bench is an adapter handed to the shared driver: the driver's flags, nothing of its own
        bench = (project / v["kernel"] / f"{v['kernel']}_bench.cu").read_text()
        assert "ftgen::bench_main(" in bench and "argc" in bench and "strcmp" not in bench
        run = subprocess.run([str(project / "bin" / v["kernel"]), "--help"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and "--inject" in run.stdout + run.stderr
