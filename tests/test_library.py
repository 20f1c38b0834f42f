"""The shared library of a project (``ftgen build --lib``): the selection of a variant per shape (on the
CPU, and the generated C against the Python model of it), the dispatch table a search leaves, and, where
nvcc is present, the library built and installed, then found by a separate CMake project whose C
programs call it (built here; on a GPU they run and check the results against cuBLAS / cuFFT)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO
from ftgen import families
from ftgen.cli import main
from ftgen.codegen.emit import generate, render_spec
from ftgen.codegen.library import plan_library, read_table, render_library, write_dispatch_table, write_library
from ftgen.errors import SpecError
from ftgen.spec import load_spec_text

GEMM = textwrap.dedent(
    """
    name: lib-demo
    family: gemm
    arch: [sm_80]
    precision: fp32
    protection:
      scheme: [none, abft]
      level: threadblock
    params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8}
    shapes:
      - {m: 512, n: 512, k: 512}
    """
)
FFT = textwrap.dedent(
    """
    name: lib-fft
    family: fft
    arch: [sm_80]
    precision: fp32
    protection: {scheme: none}
    params: {logn: 10}
    shapes:
      - {n: 1024, batch: 64}
    """
)
ATTN = textwrap.dedent(
    """
    name: lib-attn
    family: attention
    arch: [sm_90a]
    precision: [fp16, bf16]
    protection: {scheme: abft, level: efta}
    params: {backend: wgmma, head_dim: [64, 128], causal: [false, true]}
    shapes:
      - {batch: 1, heads: 4, seq: 1024}
    """
)
HIDDEN_GEMM = [(1, 1, 1), (1000, 1234, 777), (4097, 3, 129), (17, 4096, 33)]
CONSUMER = REPO / "tests" / "data" / "lib_consumer"
ENV = {**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/local/cuda/bin", "PYTHONPATH": str(REPO)}


def manifest_of(text: str) -> dict:
    _, manifest = render_spec(load_spec_text(text, "lib.yaml"))
    return manifest


def names(manifest: dict) -> tuple[str, str]:
    ks = [v["kernel"] for v in manifest["variants"]]
    return next(k for k in ks if "_none_" in k), next(k for k in ks if "_abft" in k)


def gshape(m, n, k):
    return {"m": m, "n": n, "k": k}


# ---- selection on the CPU ------------------------------------------------------------------


def test_without_search_every_variant_is_in_and_a_protected_one_is_the_fallback():
    m = manifest_of(GEMM)
    none, abft = names(m)
    plan = plan_library(m, families.get("gemm"))
    assert plan.name == "lib_demo" and [g.name for g in plan.groups] == ["gemm_f32"]
    assert {v.name for v in plan.variants} == {none, abft}
    g = plan.group("gemm_f32")
    assert plan.variants[g.fallback].name == abft
    # the spec's shape is the table, mapped to the first protected variant; so is every other shape
    assert [(t["shape"], plan.variants[t["variant"]].name) for t in g.table] == [(gshape(512, 512, 512), abft)]
    for s in HIDDEN_GEMM:
        assert plan.variants[plan.select("gemm_f32", gshape(*s))].name == abft


def test_search_winners_choose_by_nearest_log_shape():
    m = manifest_of(GEMM)
    none, abft = names(m)
    table = [
        {"shape": gshape(4096, 4096, 4096), "kernel": none, "ms": 2.0},
        {"shape": gshape(1000, 1234, 777), "kernel": abft, "ms": 0.3},
        {"shape": gshape(16, 4096, 32), "kernel": none, "ms": 0.01},
    ]
    plan = plan_library(m, families.get("gemm"), table, "H200")
    pick = lambda s: plan.variants[plan.select("gemm_f32", gshape(*s))].name  # noqa: E731
    assert pick((4096, 4096, 4096)) == none
    assert pick((1000, 1234, 777)) == abft
    assert pick((1, 1, 1)) == none  # log-distance 88.9 to (16, 4096, 32), 142.7 to (1000, 1234, 777)
    assert pick((4097, 3, 129)) == abft
    assert pick((17, 4096, 33)) == none  # beside (16, 4096, 32)
    assert pick((8192, 8192, 8192)) == none


def test_only_winners_and_the_fallback_are_in_a_searched_library():
    spec = GEMM.replace("scheme: [none, abft]", "scheme: [none, abft]\n  correct: [online, detect]")
    m = manifest_of(spec)
    ks = [v["kernel"] for v in m["variants"]]
    assert len(ks) == 3  # none, abft online, abft detect
    winner = next(k for k in ks if "_none_" in k)
    plan = plan_library(m, families.get("gemm"), [{"shape": gshape(64, 64, 64), "kernel": winner, "ms": 0.1}], "H200")
    # the winner runs every gemm shape, so it is its own fallback and the library holds it alone
    assert [v.name for v in plan.variants] == [winner]
    assert plan.select("gemm_f32", gshape(1, 1, 1)) == 0


def test_fft_fixed_size_winner_falls_back_to_an_every_size_variant():
    m = manifest_of(FFT)
    fixed = m["variants"][0]["kernel"]
    assert "logn10" in fixed
    fam = families.get("fft")
    plan = plan_library(m, fam, [{"shape": {"n": 1024, "batch": 64}, "kernel": fixed, "ms": 0.01}], "H200")
    g = plan.group("fft_c2c_fwd")
    fb = plan.variants[g.fallback]
    assert fb.name.endswith("_auto") and fb["logn"] == 0 and plan.extra == [fb.name]
    for logn in range(3, 25):
        for batch in (1, 3, 7, 129):
            got = plan.variants[plan.select("fft_c2c_fwd", {"n": 1 << logn, "batch": batch})].name
            assert got == (fixed if logn == 10 else fb.name), (logn, batch)
    # the fallback's sources go into lib/ (not its bench), with a kernel target of its own
    files = render_library(plan)
    assert f"lib/{fb.name}/{fb.name}.cu" in files and f"lib/{fb.name}/{fb.name}.h" in files
    assert not any(p.endswith("_bench.cu") for p in files)
    assert f"add_library({fb.name}_kernel STATIC" in files["lib/ftgen-lib.cmake"]


def _select_program(tmp_path: Path, plan, group: str, nkeys: int) -> Path:
    files = render_library(plan)
    hdr = tmp_path / f"ftgen_{plan.name}_select.h"
    hdr.write_text(files[f"lib/ftgen_{plan.name}_select.h"])
    keys = ", ".join(f"atoll(argv[i + {j}])" for j in range(nkeys))
    src = tmp_path / "sel.c"
    src.write_text(
        f'#include <stdio.h>\n#include <stdlib.h>\n#include "{hdr.name}"\n'
        f"int main(int argc, char** argv) {{\n  int i;\n  for (i = 1; i + {nkeys - 1} < argc; i += {nkeys}) "
        f'printf("%d\\n", ftgen_{plan.name}_{group}_choose({keys}));\n  return 0;\n}}\n'
    )
    exe = tmp_path / "sel"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe), "-lm"], check=True, cwd=tmp_path)
    return exe


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")
def test_generated_c_selection_matches_the_model(tmp_path):
    rnd = random.Random(7)
    m = manifest_of(GEMM)
    none, abft = names(m)
    table = [
        {"shape": gshape(4096, 4096, 4096), "kernel": none, "ms": 2.0},
        {"shape": gshape(1000, 1234, 777), "kernel": abft, "ms": 0.3},
        {"shape": gshape(16, 4096, 32), "kernel": none, "ms": 0.01},
        {"shape": gshape(128, 128, 128), "kernel": abft, "ms": 0.01},
    ]
    plan = plan_library(m, families.get("gemm"), table, "H200")
    exe = _select_program(tmp_path, plan, "gemm_f32", 3)
    shapes = HIDDEN_GEMM + [tuple(rnd.choice([1, 2, 3, 17, 100, 1000, 4096, 65536, 2**31 - 1]) for _ in range(3)) for _ in range(300)]
    out = subprocess.run([str(exe), *[str(x) for s in shapes for x in s]], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in out] == [plan.select("gemm_f32", gshape(*s)) for s in shapes]
    assert len(set(out)) == 2  # both variants are chosen somewhere

    mf = manifest_of(FFT)
    fplan = plan_library(mf, families.get("fft"), [{"shape": {"n": 1024, "batch": 64}, "kernel": mf["variants"][0]["kernel"], "ms": 0.01}], "H200")
    exe = _select_program(tmp_path, fplan, "fft_c2c_fwd", 2)
    fshapes = [(1 << lg, b) for lg in range(1, 25) for b in (1, 3, 63, 64, 1001)]
    out = subprocess.run([str(exe), *[str(x) for s in fshapes for x in s]], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in out] == [fplan.select("fft_c2c_fwd", {"n": n, "batch": b}) for n, b in fshapes]


# ---- the search's table ----------------------------------------------------------------------


def test_dispatch_table_round_trip_and_bad_tables(tmp_path):
    g = generate(load_spec_text(GEMM, "lib.yaml"), tmp_path)
    m = json.loads((g.out_dir / "manifest.json").read_text())
    none, abft = names(m)
    fam = families.get("gemm")
    best = {"64x64x64": {"kernel": abft, "shape": gshape(64, 64, 64), "ms": {"median": 0.5}}}
    write_dispatch_table(g.out_dir, fam, best, {"name": "NVIDIA H200"})
    rows, gpu = read_table(g.out_dir, m, fam)
    assert gpu == "NVIDIA H200" and rows == [{"shape": gshape(64, 64, 64), "kernel": abft, "ms": 0.5}]
    plan = write_library(g.out_dir, m, fam)
    assert [v.name for v in plan.variants] == [abft]
    sel = (g.out_dir / "lib" / "ftgen_lib_demo_select.h").read_text()
    assert "Winners measured on NVIDIA H200" in sel and "0.5000 ms" in sel

    path = g.out_dir / "dispatch.json"
    path.write_text(json.dumps({"gpu": "x", "winners": [{"shape": gshape(1, 1, 1), "kernel": "gemm_gone", "ms": 1}]}))
    with pytest.raises(SpecError, match="gemm_gone.*does not hold"):
        read_table(g.out_dir, m, fam)
    path.write_text("{not json")
    with pytest.raises(SpecError, match="dispatch.json: not a dispatch table"):
        read_table(g.out_dir, m, fam)
    path.write_text(json.dumps({"winners": [{"shape": {"m": 1}, "kernel": abft}]}))
    with pytest.raises(SpecError, match="missing shape key"):
        read_table(g.out_dir, m, fam)


def test_lib_with_kernels_is_a_usage_error(tmp_path, capsys):
    g = generate(load_spec_text(GEMM, "lib.yaml"), tmp_path)
    assert main(["build", str(g.out_dir), "--lib", str(tmp_path / "inst"), "--kernels", "gemm_*"]) == 2
    assert "--kernels" in capsys.readouterr().err
    assert not (g.out_dir / "lib").exists()
    # `--lib PROJECT` reads as an install prefix: a generated project there is refused, nothing written
    assert main(["build", "--lib", str(g.out_dir)]) == 2
    assert "not an install prefix" in capsys.readouterr().err
    assert not (g.out_dir / "lib").exists()
    (tmp_path / "afile").write_text("x")
    assert main(["build", str(g.out_dir), "--lib", str(tmp_path / "afile")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert not (g.out_dir / "lib").exists()


def test_rendering_is_deterministic_and_rewrites_only_changes(tmp_path):
    g = generate(load_spec_text(GEMM, "lib.yaml"), tmp_path)
    m = json.loads((g.out_dir / "manifest.json").read_text())
    write_library(g.out_dir, m, families.get("gemm"))
    lib = g.out_dir / "lib"
    stamp = {p.name: p.stat().st_mtime_ns for p in lib.iterdir()}
    (lib / "stale.cu").write_text("// left over")
    write_library(g.out_dir, m, families.get("gemm"))
    assert {p.name: p.stat().st_mtime_ns for p in lib.iterdir()} == stamp  # stale file removed, the rest untouched
    hdr = (lib / "ftgen_lib_demo.h").read_text()
    assert 'extern "C"' in hdr and "cuda" not in hdr.split("#include")[1].split("\n")[0]
    assert "int ftgen_lib_demo_gemm_f32(ftgen_lib_demo_t handle, int m, int n, int k, double alpha" in hdr


def test_an_attention_library_has_an_entry_point_per_type_head_dim_and_mask(tmp_path):
    """Attention variants are chosen by shape only, so the library groups them by element type, head dim and mask; an
    entry point takes the sizes and the four tensors, sizes its workspace by the variant's own function over the
    problem, and refuses a causal call with seq_k != seq_q, kv_heads that do not divide heads, or a misaligned pointer."""
    g = generate(load_spec_text(ATTN, "lib.yaml"), tmp_path)
    plan = write_library(g.out_dir, json.loads((g.out_dir / "manifest.json").read_text()), families.get("attention"))
    assert sorted(gr.name for gr in plan.groups) == sorted(
        f"attention_{t}_d{d}{c}" for t in ("f16", "bf16") for d in (64, 128) for c in ("", "_causal"))
    lib = g.out_dir / "lib"
    hdr = (lib / "ftgen_lib_attn.h").read_text()
    assert ("int ftgen_lib_attn_attention_bf16_d128_causal(ftgen_lib_attn_t handle, int batch, int heads, int seq_q, int "
            "seq_k, int kv_heads, float scale, const void* Q, const void* K, const void* V, void* O,") in hdr
    src = (lib / "ftgen_lib_attn.cu").read_text()
    causal = src[src.index("int ftgen_lib_attn_attention_f16_d64_causal("):]
    legal = causal.split("{")[1]
    assert "seq_k == seq_q" in legal and "((size_t)O & 15) == 0" in legal and "heads % kv_heads == 0" in legal
    assert "P.kv_heads = kv_heads" in causal.split("\n}\n")[0]
    assert ("_workspace(&static_cast<const ftgen_attention_problem&>(ftgen_attention_shape(batch, heads, seq_q, seq_k, kv_heads, "
            "128)))") in src
    desc = json.loads((lib / "ftgen_lib_attn.json").read_text())
    g64 = next(gr for gr in desc["groups"] if gr["name"] == "attention_f16_d64")
    assert [n for _, n in g64["params"]] == ["batch", "heads", "seq_q", "seq_k", "kv_heads", "scale", "Q", "K", "V", "O"]
    assert desc["inject"] == [] and "ftgen_lib_attn_inject" in src  # no variant with injection: the library refuses it


def test_an_attention_library_plans_faults_as_the_bench_does(tmp_path):
    """An inject build's entry point plans a call's faults over the variant's launch geometry and gives each a site of
    its level through the bench's own function (ftgen_attention_faults.h), which the variant's header brings in."""
    g = generate(load_spec_text(ATTN.replace("level: efta}", "level: efta, inject: true}"), "lib.yaml"), tmp_path)
    plan = write_library(g.out_dir, json.loads((g.out_dir / "manifest.json").read_text()), families.get("attention"))
    assert sorted(plan.fault_plans) == list(range(len(plan.variants)))
    src = (g.out_dir / "lib" / "ftgen_lib_attn.cu").read_text()
    causal = src[src.index("int ftgen_lib_attn_attention_f16_d64_causal("):].split("\n}\n")[0]
    assert "_geometry(&P, &blocks, &threads, &steps);" in causal
    assert "ftattn_faults::assign_sites(plan, fseed, ftattn_faults::Layout{64, 128, 128, 255, true, false}" in causal
    header = next(p for p in g.out_dir.glob("attn_f16_abft-efta_wgmma_d64_c_*/*.h"))
    assert '#include "ftgen_attention_faults.h"' in header.read_text()


# ---- built, installed, found and called from C ------------------------------------------------


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ftgen.cli", *args], capture_output=True, text=True, env=ENV, cwd=cwd)


def _consume(tmp_path: Path, prefix: Path, lib: str, entry_flag: str, program: str) -> subprocess.CompletedProcess:
    build = tmp_path / f"consumer-{program}"
    cfg = subprocess.run(
        ["cmake", "-S", str(CONSUMER), "-B", str(build), "-G", "Ninja", f"-DFTGEN_LIB_NAME={lib}", entry_flag, f"-DCMAKE_PREFIX_PATH={prefix}"],
        capture_output=True, text=True, env=ENV,
    )
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    cache = (build / "CMakeCache.txt").read_text()
    assert "CMAKE_CXX_COMPILER:" not in cache and "CMAKE_CUDA_COMPILER:" not in cache  # a C project
    b = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, env=ENV)
    assert b.returncode == 0, b.stdout + b.stderr
    run = subprocess.run([str(build / program)], capture_output=True, text=True, env=ENV, timeout=600)
    # without a GPU the program stops after the argument checks (77); with one it must verify every shape
    from conftest import _has_gpu

    want = 0 if _has_gpu() else 77
    assert run.returncode == want, run.stdout + run.stderr
    return run


def _exports(lib: Path) -> list[str]:
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in nm.splitlines() if line.split() and line.split()[1] in "TtDdBbRr"]


@pytest.mark.compile
def test_gemm_library_builds_installs_and_links_from_c(tmp_path):
    spec = tmp_path / "lib.yaml"
    spec.write_text(GEMM)
    r = _cli("generate", str(spec), "-o", str(tmp_path / "gen"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    project, prefix = tmp_path / "gen" / "lib-demo", tmp_path / "inst"
    r = _cli("build", str(project), "--lib", str(prefix), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "entry points: ftgen_lib_demo_gemm_f32" in r.stderr
    so = prefix / "lib" / "libftgen_lib_demo.so"
    assert so.exists() and (prefix / "include" / "ftgen_lib_demo.h").is_file()
    assert (prefix / "lib" / "cmake" / "ftgen_lib_demo" / "ftgen_lib_demo-config.cmake").is_file()
    # only the C interface is exported: no variant launcher, no C++ symbol
    exported = _exports(so)
    assert exported and all(s.startswith("ftgen_lib_demo_") for s in exported), exported
    assert not any((project / "bin").glob("*"))  # the library alone: no benchmark executable built

    run = _consume(tmp_path, prefix, "lib_demo", "-DFTGEN_GEMM_ENTRY=gemm_f32", "gemm_consumer")
    assert "lib-demo: 2 variant(s)" in run.stdout

    # with FTGEN_BUILD_BENCH=OFF the default target holds the library and its kernels, no executable
    subprocess.run(["cmake", str(project / "build"), "-DFTGEN_BUILD_BENCH=OFF"], check=True, capture_output=True, env=ENV)
    dry = subprocess.run(["ninja", "-C", str(project / "build"), "-n", "-t", "commands", "all"], capture_output=True, text=True, check=True).stdout
    assert "libftgen_lib_demo.so" in dry and "_bench.cu" not in dry


@pytest.mark.compile
def test_fft_library_with_fallback_links_from_c(tmp_path):
    spec = tmp_path / "fft.yaml"
    spec.write_text(FFT)
    assert _cli("generate", str(spec), "-o", str(tmp_path / "gen"), cwd=tmp_path).returncode == 0
    project, prefix = tmp_path / "gen" / "lib-fft", tmp_path / "inst"
    r = _cli("build", str(project), "--lib", str(prefix), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "fallback built with it: fft_c2c_f32_none_fwd_auto" in r.stderr
    exported = _exports(prefix / "lib" / "libftgen_lib_fft.so")
    assert "ftgen_lib_fft_fft_c2c_fwd" in exported and all(s.startswith("ftgen_lib_fft_") for s in exported)
    _consume(tmp_path, prefix, "lib_fft", "-DFTGEN_FFT_ENTRY=fft_c2c_fwd", "fft_consumer")


@pytest.mark.compile
def test_default_entry_from_the_launcher_signature_compiles(tmp_path):
    """A family that describes no C entry gets one from its launcher signature (its problem struct passed
    through ``const void*``); the library source of such an entry compiles."""
    from ftgen.build import find_nvcc
    from ftgen.families.base import Family
    from ftgen.families.gemm import GemmFamily

    class Plain(GemmFamily):
        library_group = Family.library_group
        library_entry = Family.library_entry

    g = generate(load_spec_text(GEMM, "lib.yaml"), tmp_path)
    m = json.loads((g.out_dir / "manifest.json").read_text())
    plan = plan_library(m, Plain())
    files = render_library(plan)
    hdr = files["lib/ftgen_lib_demo.h"]
    assert "int ftgen_lib_demo_gemm_fp32(ftgen_lib_demo_t handle, const void* problem, void* workspace" in hdr
    assert "size_t ftgen_lib_demo_gemm_fp32_workspace(void);" in hdr
    for rel, text in files.items():
        (g.out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (g.out_dir / rel).write_text(text)
    incs = [f"-I{g.out_dir / d}" for d in ["lib", "common", *(v.name for v in plan.variants)]]
    p = subprocess.run([find_nvcc(), "-std=c++17", "-c", str(g.out_dir / "lib" / "ftgen_lib_demo.cu"), "-o", str(tmp_path / "lib.o"), *incs],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def _cutlass90_plans(precision: str, first: str, second: str, params: str) -> tuple[str, str]:
    """The library fault plans of two cutlass90 variants (protections `first`, `second`; extra `params`)."""
    s = load_spec_text(textwrap.dedent(f"""\
        name: lib90
        family: gemm
        arch: [sm_90a]
        precision: {precision}
        variants:
          - {{protection: {first}, params: {{backend: cutlass90{params}}}}}
          - {{protection: {second}, params: {{backend: cutlass90{params}}}}}
        """), "lib90.yaml")
    fam = families.get("gemm")
    return tuple(fam.library_fault_plan(v) for v in s.variants)


def test_a_cutlass90_abft_library_plans_faults_over_the_checks_tiles():
    """A cutlass90 ABFT variant built with injection is injectable from the library: its fault plan is the bench's, over
    the check's sm80 descriptor (128x128 tiles, 256 threads, 64 accumulators, k-tiles of 32, one unit per tile); the
    unprotected cutlass90 variant has none."""
    plan, none = _cutlass90_plans("tf32x3", "{scheme: abft, level: threadblock, inject: true}", "{scheme: none}", "")
    assert "+ 127) / 128) * ((n + 127) / 128) * 1;" in plan
    assert "plan = ftgen::plan_faults(handle->inject_n, fseed, blocks, 256, 64, (k + 31) / 32, 32," in plan
    assert none == ""


def test_a_cutlass90_tmr_library_plans_faults_over_the_kernels_tiles_and_copies():
    """A cutlass90 TMR variant built with injection plans its faults as its bench does: (tile, copy) units over the sm90
    kernel's tiles (128x256, three copies), the 256 threads that hold a ws-coop tile's accumulators (not the producer
    warp group), 128 accumulators each, k-tiles of the kernel's tile_k; built without injection, none."""
    plan, plain = _cutlass90_plans("bf16", "{scheme: tmr, level: kernel, inject: true}", "{scheme: tmr, level: kernel}",
                                   ", tile_n: 256")
    assert "+ 127) / 128) * ((n + 255) / 256) * 3;" in plan
    assert "plan = ftgen::plan_faults(handle->inject_n, fseed, blocks, 256, 128, (k + 63) / 64, 32," in plan
    assert plain == ""


def test_a_shape_that_does_not_fit_a_variant_goes_elsewhere(tmp_path):
    """The family's rule beyond the range (kmeans fused: the block's shared memory): the C dispatch's `runs` carries it,
    and a shape a winner cannot hold goes to the nearest winner that can, else the fallback."""
    spec = """
name: lib_km
family: kmeans
arch: [sm_90a]
precision: tf32x3
protection: {scheme: abft, level: threadblock, correct: detect}
variants:
  - params: {backend: fused, strip: 64, warps: 8}
  - params: {m_tb: 64, n_tb: 64, k_tb: 16, m_w: 32, n_w: 32}
shapes: [{samples: 65536, dims: 32, clusters: 128}]
"""
    m = manifest_of(spec)
    fused = next(v["kernel"] for v in m["variants"] if "fused" in v["kernel"])
    mma = next(v["kernel"] for v in m["variants"] if "fused" not in v["kernel"])
    shape = lambda n, d, k: {"samples": n, "dims": d, "clusters": k}  # noqa: E731
    table = [{"shape": shape(65536, 32, 128), "kernel": fused, "ms": 0.1}, {"shape": shape(65536, 64, 128), "kernel": mma, "ms": 0.5}]
    plan = plan_library(m, families.get("kmeans"), table, "H200")
    (g,) = plan.groups
    pick = lambda s: plan.variants[plan.select(g.name, s)].name  # noqa: E731
    assert pick(shape(65536, 32, 128)) == fused
    assert pick(shape(65536, 32, 256)) == mma  # 242704 bytes of shared memory: more than the block has
    assert pick(shape(65536, 33, 128)) == mma  # past dims 32
    assert plan.variants[g.fallback].name == mma
    files = render_library(plan)
    select_h = next(text for path, text in files.items() if path.endswith("_select.h"))
    assert "clusters" in select_h and "<= 231424LL" in select_h
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:  # the header is C99
        (tmp_path / "sel.h").write_text(select_h)
        (tmp_path / "sel.c").write_text('#include "sel.h"\nint main(void) { return 0; }\n')
        p = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-fsyntax-only", str(tmp_path / "sel.c")], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
