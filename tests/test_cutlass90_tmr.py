"""TMR on the cutlass90 backend (tf32, fp16, bf16; levels kernel and multikernel): three copies of the unchanged sm90 GEMM
(one batched launch of L = 3, or three launches), the cutlass backend's vote kernel, the element recomputation and the
emulated accumulator upsets of templates/gemm/cutlass90_tmr.cuh (ftgen/families/gemm/cutlass90.py,
templates/gemm/cutlass90_variant.cu.j2).

CPU: the spec rules (accepted for tf32, fp16 and bf16 at levels kernel and multikernel, refused with a reason elsewhere),
the names, what the sources of each build hold (the batch of three or the three launches, the shared vote, injection only
in inject builds, the bench's fault units and counters); the vote's decisions through the host-compiled rules harness of
test_device_logic (the functions vote_outputs_kernel calls). nvcc (compile): the fault units map one to one onto the
tile's elements (the header's host+device mapping, compiled for the host); the tf32 kernel-level inject variant of the
shipped spec builds for sm_90a through ``ftgen build``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import test_device_logic as device_logic
from conftest import REPO, gemm_spec_text as spec_text, load_gemm_spec as load
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.families import get as get_family
from ftgen.families.base import PRECISION_TAG, Protection
from ftgen.families.gemm import cutlass90 as c90
from ftgen.paths import cutlass_include_dir
from ftgen.spec import load_spec_text

FAMILY = get_family("gemm")
B90 = FAMILY.backend_named("cutlass90")
SPEC = REPO / "specs" / "gemm" / "cutlass90_tmr.yaml"
TAIL = "cutlass90_128x256x{tk}_c2x1_ws-coop_persistent_sauto_sw1_rc"


TMR = "precision: %s\nprotection: {scheme: tmr, level: %s%s}\nparams: {backend: cutlass90%s}\n"


# ---------------------------------------------------------------------------------------------
# the spec rules and the names
# ---------------------------------------------------------------------------------------------


def test_the_shipped_spec_names_every_variant():
    s = load_spec_text(SPEC.read_text(), SPEC.name)
    assert not s.rejected
    assert all(v.backend == "cutlass90" and v.arch == ("sm_90a",) for v in s.variants)
    names = {v.name for v in s.variants}
    expect = set()
    for prec, tk in (("tf32", 32), ("bf16", 64), ("f16", 64)):  # tile_k: the backend's default per precision
        for level in ("tmr-kernel", "tmr-multikernel-i1024"):
            for inj in ("", "_inj"):
                expect.add(f"gemm_{prec}_{level}_{TAIL.format(tk=tk)}{inj}")
    assert names == expect
    assert {tuple(sorted(sh.items())) for sh in s.shapes} == {
        tuple(sorted(d.items())) for d in ({"m": 4096, "n": 4096, "k": 4096}, {"m": 8192, "n": 8192, "k": 8192},
                                           {"m": 1000, "n": 1234, "k": 777}, {"m": 4097, "n": 3, "k": 129})}


@pytest.mark.parametrize("precision", ["tf32", "fp16", "bf16"])
def test_tmr_levels_are_accepted_with_the_family_tokens(precision):
    for level, token in (("kernel", "tmr-kernel"), ("multikernel", "tmr-multikernel-i1024")):
        s = load(TMR % (precision, level, ", inject: true", ""))
        assert not s.rejected, s.rejected
        (v,) = s.variants
        assert v.backend == "cutlass90" and v.protection.scheme == "tmr" and v.protection.level == level
        assert v.name.startswith(f"gemm_{PRECISION_TAG[precision]}_{token}_cutlass90_") and v.name.endswith("_inj")
        assert B90.protection_ok(precision, v.protection) is None


def test_the_backend_offers_tmr_kernel_and_multikernel():
    assert B90.schemes["tmr"] == ("kernel", "multikernel")
    assert B90.schemes["abft"] == ("threadblock",)
    # without params backend, tmr stays on the sm80 cutlass backend
    assert FAMILY.select_backend("tf32", Protection("tmr", "kernel")).name == "cutlass"


@pytest.mark.parametrize(
    "precision, prot, expect",
    [
        ("tf32x3", Protection("tmr", "kernel"), "tmr on the cutlass90 backend takes precision tf32, fp16, bf16, not tf32x3"),
        ("tf32", Protection("tmr", "threadblock", interval=1024), "level 'threadblock': tmr on the cutlass90 backend has levels kernel, multikernel"),
        ("bf16", Protection("tmr", "cooperative", interval=1024), "has levels kernel, multikernel"),
        ("tf32", Protection("tmr", "kernel", "detect"), "correct takes online only"),
        ("tf32", Protection("tmr", "kernel", threshold=0.5), "threshold takes auto only"),
        ("tf32", Protection("tmr", "kernel", interval=8), "interval takes 1 only"),
        ("fp16", Protection("tmr", "multikernel", interval=64), "votes once, after the whole K"),
        ("tf32", Protection("ft", "kernel"), "offers scheme none, tmr (levels kernel, multikernel) and abft"),
    ],
)
def test_the_backend_refuses_with_a_reason(precision, prot, expect):
    reason = B90.protection_ok(precision, prot)
    assert reason and expect in reason, reason


@pytest.mark.parametrize(
    "body, message",
    [
        (TMR % ("tf32", "threadblock", "", ""), "level 'threadblock'"),
        (TMR % ("tf32", "multikernel", ", interval: 64", ""), "votes once, after the whole K"),
        (TMR % ("tf32", "kernel", ", interval: 8", ""), "interval takes 1 only"),
        (TMR % ("tf32x3", "kernel", "", ""), "tmr"),  # the family's answer (the cutlass backend has no tf32x3 TMR either)
        (TMR % ("tf32", "kernel", "", ", layout_b: row"), "tf32 takes layout_a row, layout_b col"),
    ],
)
def test_bad_tmr_specs_exit_2_with_a_reason(tmp_path, capsys, body, message):
    f = tmp_path / "s.yaml"
    f.write_text(spec_text(body))
    rc = main(["generate", str(f), "-o", str(tmp_path / "gen")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "gen" / "t").exists()


# ---------------------------------------------------------------------------------------------
# what the sources hold
# ---------------------------------------------------------------------------------------------

P256 = "params: {backend: cutlass90, tile_n: 256, cluster_m: 2}"
BUILDS = spec_text(f"""
    precision: tf32
    variants:
      - {{protection: {{scheme: none}}, {P256}}}
      - {{protection: {{scheme: tmr, level: kernel}}, {P256}}}
      - {{protection: {{scheme: tmr, level: kernel, inject: true}}, {P256}}}
      - {{protection: {{scheme: tmr, level: multikernel, inject: true}}, {P256}}}
      - {{protection: {{scheme: tmr, level: multikernel, inject: true}}, params: {{backend: cutlass90, schedule: ws-pingpong, tile_m: 64}}}}
    shapes: [{{m: 100, n: 70, k: 33}}]
    """, "builds")


@pytest.fixture(scope="module")
def rendered():
    s = load_spec_text(BUILDS, "builds.yaml")
    assert not s.rejected, s.rejected
    files, _ = render_spec(s)
    out = {}
    for key, v in zip(("none", "kernel", "kernel_inj", "multi_inj", "pingpong"), s.variants):
        out[key] = {suffix: files[f"{v.name}/{v.name}{suffix}"] for suffix in (".cu", ".h", "_bench.cu")}
        out[key]["v"] = v
    out["tmr90_cuh"] = files["common/cutlass90_tmr.cuh"]
    return out


def test_only_tmr_builds_carry_the_copies_and_the_vote(rendered):
    none = rendered["none"]
    for marker in ('#include "cutlass90_tmr.cuh"', "ftgen_tmr90::vote(", "_unprotected(", "tmr_sections("):
        assert marker not in none[".cu"], marker
        for key in ("kernel", "kernel_inj", "multi_inj"):
            assert marker in rendered[key][".cu"], (key, marker)
    for key in ("kernel", "kernel_inj", "multi_inj"):
        assert "cudaError_t " in rendered[key][".h"] and "_unprotected(const ftgen_gemm_problem* p" in rendered[key][".h"]
        # the sm90 kernel is the unprotected variant's, unchanged
        pattern = r"using Kernel_epilogue =.*?public Kernel_base \{ \};"
        assert re.search(pattern, rendered[key][".cu"], re.S).group(0) == re.search(pattern, none[".cu"], re.S).group(0)


def test_the_kernel_level_is_one_batched_launch_with_shared_operands(rendered):
    cu = rendered["kernel"][".cu"]
    assert "constexpr bool kBatched = true;" in cu
    assert "args.problem_shape = {s.m, s.n, s.k, kCopies};" in cu
    for line in ("cute::get<2>(args.mainloop.dA) = 0;", "cute::get<2>(args.mainloop.dB) = 0;",
                 "cute::get<2>(args.epilogue.dD) = sec.stride;"):
        assert line in cu, line
    # beta != 0: every copy reads the original C (batch stride 0), never a copy's output
    assert "args.epilogue.ptr_C = csrc;" in cu and cu.count("cute::get<2>(args.epilogue.dC) = 0;") == 1
    # one launch of the sm90 kernel for the copies
    body = cu.split('extern "C" cudaError_t ' + rendered["kernel"]["v"].symbol + "(", 1)[1]
    assert body.count("run_op<Gemm>(") == 1 and "for (int c = 0; c < kCopies; ++c) {\n    typename Gemm::Arguments" not in body


def test_the_multikernel_level_is_three_launches_on_the_callers_stream(rendered):
    cu = rendered["multi_inj"][".cu"]
    assert "constexpr bool kBatched = false;" in cu
    body = cu.split('extern "C" cudaError_t ' + rendered["multi_inj"]["v"].symbol + "(", 1)[1]
    assert "for (int c = 0; c < kCopies; ++c) {\n    typename Gemm::Arguments args" in body
    assert "run_op<Gemm>(args, ws + lay.cutlass, stream)" in body  # one CUTLASS workspace, one stream
    assert "args.problem_shape = {s.m, s.n, s.k, kCopies};" not in body
    # copy 0 is C itself where beta == 0 and TMA can write it (the vote then writes only where copy 0 loses)
    assert "if (beta0 && c_direct) {\n    d[0] = static_cast<EC*>(p->C);" in body


def test_injection_is_compiled_into_inject_builds_only(rendered):
    clean, inj = rendered["kernel"][".cu"], rendered["kernel_inj"][".cu"]
    assert "#define FTGEN_TMR_INJECT 0 " in clean and "#define FTGEN_TMR_INJECT 1 " in inj
    assert "ftgen_tmr90::inject_faults(fp, stream)" in inj and "inject_faults" not in clean
    assert "vin.correct = p->no_correct ? 0 : 1;" in inj and "vin.correct = 1;" in clean
    assert "vin.fault_by_block = p->fault_by_block;" in inj and "vin.fault_by_block = nullptr;" in clean


def test_the_header_calls_the_cutlass_backends_vote_and_records(rendered):
    h = rendered["tmr90_cuh"]
    assert '#include "cutlass_tmr.cuh"' in h
    # the vote, its counters and the fault records are cutlass_tmr.cuh's, called as they are
    assert "ftgen_tmr::vote_outputs_kernel<T, V, false>" in h and "ftgen_tmr::vote_outputs_kernel<T, 1, false>" in h
    assert "ftgen_tmr::OutVoteParams<T>" in h and "ftgen_tmr::planned_record<float>(" in h
    assert "ftgen_tmr::count_recomputed(" in h and "ftgen_tmr::kMaxAttempts" in h
    # no copy of the decisions: every vote goes through ftgen_rules::vote_element (test_device_logic's functions)
    assert "int vote_element(" not in h and "counted_vote(" not in h and h.count("ftgen_tmr::vote_element(") == 2
    tmr = (REPO / "templates" / "gemm" / "cutlass_tmr.cuh").read_text()
    assert "vote_access<T, V>(p, a, b, c, p.dst + r * p.ldc + c0, tile_of, tally);" in tmr  # (vote_outputs_kernel's)
    assert "counted_vote(a[j], b[j], c[j], maj, tally, unc);" in tmr


def test_the_bench_plans_faults_over_copies_of_the_kernels_tiles(rendered):
    for key, (tm, tn, threads, acc) in (("kernel_inj", (128, 256, 256, 128)), ("pingpong", (64, 128, 128, 64))):
        b = rendered[key]["_bench.cu"]
        assert f"v.tile_m = {tm}, v.tile_n = {tn}," in b, key
        assert f"v.threads = {threads}, v.acc_elems = {acc};" in b, key  # the threads that hold a tile's accumulators
        assert "v.copies = 3;" in b and "v.is_protected = true;" in b and "v.abft = false;" in b and "v.inject = true;" in b
        assert "v.launch_unprotected = " in b and "fault units: the ABFT check" not in b
        g = c90.Geometry(rendered[key]["v"])
        assert g.acc_threads * g.acc_elems == tm * tn and g.cta_threads == 384
    assert "v.inject = false;" in rendered["kernel"]["_bench.cu"]
    # the CTA's threads in the source's description
    assert "384 threads" in rendered["kernel"][".cu"] and "384 threads" in rendered["none"][".cu"]


def test_the_workspace_holds_the_three_copies(rendered):
    cu = rendered["kernel"][".cu"]
    assert "return tmr_sections(m, n, k, hw).total;" in cu
    assert "t.ctl = t.copies + section(sizeof(EC) * size_t(kCopies) * size_t(t.stride));" in cu
    assert "cutlass3 = Gemm::get_workspace_size(args);" in cu  # CUTLASS's workspace of the batch of three
    assert "constexpr ftgen_tmr90::Geometry kGeo{128, 256, 64};" in cu
    assert "constexpr ftgen_tmr90::Geometry kGeo{64, 128, 64};" in rendered["pingpong"][".cu"]


# ---------------------------------------------------------------------------------------------
# the vote's decisions: the host-compiled rules of test_device_logic (the functions vote_outputs_kernel calls)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules_lib(tmp_path_factory):
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no host C++ compiler")
    return device_logic.build(device_logic.RULES.parent, tmp_path_factory.mktemp("rules"))


def test_the_vote_decides_through_the_shared_rules(rules_lib):
    device_logic.check_tmr(rules_lib)


# ---------------------------------------------------------------------------------------------
# nvcc: the fault units' mapping, and the variant's build
# ---------------------------------------------------------------------------------------------

MAPPING = r"""#include "cutlass90_tmr.cuh"
#include <cstdio>
#include <vector>
int main() {
  // (tile_m, tile_n, rows per warp group, threads holding the tile): ws-coop 128x256, 256x128; ws-pingpong 64x128, 128x64
  const int cases[4][4] = {{128, 256, 64, 256}, {256, 128, 128, 256}, {64, 128, 64, 128}, {128, 64, 128, 128}};
  for (const auto& c : cases) {
    const ftgen_tmr90::Geometry g{c[0], c[1], c[2]};
    const int elems = c[0] * c[1] / c[3];
    std::vector<int> hit(size_t(c[0]) * c[1], 0);
    for (int t = 0; t < c[3]; ++t)
      for (int e = 0; e < elems; ++e) {
        long long r, col;
        ftgen_tmr90::fault_element(g, t, e, 1, 2, r, col);  // tile (1, 2)
        r -= c[0];
        col -= 2 * c[1];
        if (r < 0 || r >= c[0] || col < 0 || col >= c[1]) { std::printf("out %d %d %lld %lld\n", t, e, r, col); return 1; }
        ++hit[r * c[1] + col];
      }
    for (int x : hit)
      if (x != 1) { std::printf("not one to one\n"); return 1; }
    long long r, col;
    ftgen_tmr90::fault_element(g, 37, 6, 0, 0, r, col);  // warp 1, lane 5, register 6: row 16 + 1 + 8, column 8 + 2 + 0
    std::printf("%lld %lld\n", r, col);
  }
  return 0;
}
"""


def _nvcc() -> str:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).is_file():
        pytest.skip("nvcc not found")
    return nvcc


@pytest.mark.compile
def test_the_fault_units_map_one_to_one_onto_the_tile(tmp_path):
    """fault_element (host+device) for both schedules: every (consumer thread, accumulator element) of a tile names one
    element of it, each element once, in the wgmma's accumulator layout."""
    nvcc = _nvcc()
    src = tmp_path / "map.cu"
    src.write_text(MAPPING)
    exe = tmp_path / "map"
    common = REPO / "templates"
    cmd = [nvcc, "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-gencode", "arch=compute_90a,code=sm_90a",
           f"-I{common / 'gemm'}", f"-I{common / 'common'}", f"-I{cutlass_include_dir()}", str(src), "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-4000:]
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split("\n")[0] == "25 10"


@pytest.mark.compile
def test_the_tf32_kernel_level_inject_variant_builds_for_sm90a(tmp_path):
    """The shipped spec's tf32 kernel-level inject variant through ftgen generate and ftgen build (nvcc, sm_90a)."""
    _nvcc()
    out = tmp_path / "gen"
    assert main(["generate", str(SPEC), "-o", str(out)]) == 0
    name = f"gemm_tf32_tmr-kernel_{TAIL.format(tk=32)}_inj"
    proj = out / "gemm_cutlass90_tmr"
    assert (proj / name / f"{name}.cu").is_file()
    assert main(["build", str(proj), "--kernels", name]) == 0
    built = [p for p in (proj / "build").rglob(f"*{name}*") if p.is_file() and p.suffix in ("", ".a", ".so")]
    assert built, list((proj / "build").iterdir())
