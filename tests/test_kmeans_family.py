"""The kmeans family without a GPU: spec validation (bad shapes and protection exit 2 with a clear
message), kernel names, parameters and constraints, golden sources of a small spec, the example specs,
and (marked compile) nvcc builds of a protected and an unprotected variant for sm_80 and sm_90."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, golden_dir_check, ptxas_entries, without_copied_headers
from ftgen import families
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families.kmeans.family import Geometry
from ftgen.spec import load_spec, load_spec_text

SMALL = textwrap.dedent(
    """
    name: golden_kmeans
    family: kmeans
    arch: [sm_80]
    precision: tf32
    protection:
      scheme: [none, abft]
      level: threadblock
      inject: true
    params: {m_tb: 64, n_tb: 32, k_tb: 16, m_w: 32, n_w: 16}
    shapes:
      - {samples: 1000, dims: 10, clusters: 7}
    """
)


def spec_of(body: str):
    return load_spec_text("name: t\nfamily: kmeans\n" + textwrap.dedent(body), "t.yaml")


def test_registered_and_described():
    fam = families.get("kmeans")
    assert fam.shape_keys == ("samples", "dims", "clusters")
    d = fam.describe()
    assert d["precisions"] == ["tf32", "tf32x3", "fp64"]
    assert d["backends"][0]["schemes"] == {"none": [], "abft": ["threadblock", "warp"]}  # mma
    assert all(b["schemes"]["abft"] == ["threadblock"] for b in d["backends"][1:])  # cutlass90, fused


def test_the_warp_level_is_the_mma_backends():
    """level: warp names its kernels abft-warp, keeps the threadblock level's encodings and row sums out of the source
    and the shared memory, and is refused with a clear message by the backends that do not have it."""
    s = spec_of("precision: [tf32, fp64]\nprotection: {scheme: abft, level: warp, inject: true}\n")
    names = sorted(v.name for v in s.variants)
    assert names == ["kmeans_f64_abft-warp_64x64x16_w32x32_inj", "kmeans_tf32_abft-warp_128x64x32_w64x32_inj"]
    files, _ = render_spec(s)
    src = files[f"{names[1]}/{names[1]}.cu"]
    assert "warp_checksums(wck, fa, fb);" in src and "__syncthreads_or(redo)" in src
    assert "encode_kernel" not in src and "row_sums(" not in src and "T es[2]" not in src
    tb = spec_of("precision: tf32\nprotection: {scheme: abft, level: threadblock}\n")
    assert Geometry(s.variants[1]).smem_bytes < Geometry(tb.variants[0]).smem_bytes
    for params in ("{backend: cutlass90}", "{backend: fused}"):
        with pytest.raises(SpecError, match="level 'warp' is not a abft level of the (cutlass90|fused) backend"):
            spec_of(f"arch: [sm_90a]\nprecision: tf32\nparams: {params}\nprotection: {{scheme: abft, level: warp}}\n")


def test_names_encode_every_parameter():
    s = load_spec_text(SMALL, "golden.yaml")
    assert sorted(v.name for v in s.variants) == [
        "kmeans_tf32_abft-tb_64x32x16_w32x16_inj",
        "kmeans_tf32_none_64x32x16_w32x16",
    ]
    s = spec_of("precision: [tf32x3, fp64]\nprotection: {scheme: abft, level: threadblock, correct: detect}\n")
    assert sorted(v.name for v in s.variants) == [
        "kmeans_f64_abft-tb-detect_64x64x16_w32x32",
        "kmeans_tf32x3_abft-tb-detect_128x64x32_w64x32",
    ]


def test_shapes_parse_from_the_command_line_order():
    fam = families.get("kmeans")
    assert fam.parse_shape_token("1048576x128x1024") == {"samples": 1048576, "dims": 128, "clusters": 1024}


@pytest.mark.parametrize(
    "body, where, message",
    [
        ("shapes: [{samples: 10, dims: 4, clusters: 11}]", "shapes[0].clusters", "clusters=11 is more than samples=10"),
        ("shapes: [{samples: 10, dims: 0, clusters: 2}]", "shapes[0].dims", "0 must be at least 1"),
        ("shapes: [{samples: 10, dim: 4, clusters: 2}]", "shapes[0].dim", "did you mean 'dims'"),
        ("protection: {scheme: abft, level: thread}", "protection.level", "allowed: none, threadblock, warp"),
        ("protection: {scheme: tmr, level: kernel}", "protection.scheme", "abft"),
        ("precision: fp32", "precision", "tf32"),
        ("params: {m_tb: 96}", "params.m_tb", "96 is not a power of two"),
        ("params: {k_tb: 128}", "params.k_tb", "outside 4..64"),
    ],
)
def test_bad_specs_name_the_field(body, where, message):
    with pytest.raises(SpecError) as e:
        spec_of(body)
    assert where in str(e.value) and message in str(e.value), str(e.value)


def test_constraints_give_reasons():
    s = spec_of("precision: tf32\nparams: {m_tb: 64, n_tb: [32, 64], m_w: [64, 8], n_w: 32}\n")
    reasons = [r for rej in s.rejected for r in rej.reasons]
    assert any("m_w=8 is not a multiple of the tf32 MMA's M=16" in r for r in reasons), reasons
    with pytest.raises(SpecError) as e:
        spec_of("precision: tf32\nparams: {m_tb: 256, n_tb: 256, m_w: 128, n_w: 128}\n")
    assert "accumulator registers" in str(e.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (("clusters: 7", "clusters: 1001"), "clusters=1001 is more than samples=1000"),
        (("dims: 10", "dims: 0"), "0 must be at least 1"),
        (("level: threadblock", "level: thread"), "allowed: none, threadblock"),
    ],
)
def test_cli_bad_spec_exits_2_without_writing(tmp_path, capsys, change, message):
    spec = tmp_path / "k.yaml"
    spec.write_text(SMALL.replace(*change))
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("path", sorted((REPO / "specs" / "kmeans").glob("*.yaml")), ids=lambda p: p.name)
def test_example_specs_load(path):
    s = load_spec(path)
    assert s.variants
    if path.name != "search.yaml":  # a search space has points the constraints reject
        assert not s.rejected


def test_golden_sources():
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    golden_dir_check(REPO / "tests" / "golden" / "kmeans", {
        Path(p).name: t for p, t in without_copied_headers(files).items() if p.startswith("kmeans_")
    })


def test_unprotected_source_has_no_checks_and_protected_has_all():
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    none = files["kmeans_tf32_none_64x32x16_w32x16/kmeans_tf32_none_64x32x16_w32x16.cu"]
    prot = files["kmeans_tf32_abft-tb_64x32x16_w32x16_inj/kmeans_tf32_abft-tb_64x32x16_w32x16_inj.cu"]
    for marker in ("encode_kernel", "UpdateCheck", "update_invariant", "row_sums", "apply_fault"):
        assert marker in prot and marker not in none, marker
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in none


def test_a_protected_benchmark_times_its_unprotected_twin():
    """The protected variant's executable compiles the same template with protection none as <sym>_unprotected (its own
    translation unit) and times it alternately (x_unprot); an unprotected variant has no twin."""
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    d = "kmeans_tf32_abft-tb_64x32x16_w32x16_inj/kmeans_tf32_abft-tb_64x32x16_w32x16_inj"
    twin, bench, prot = files[d + "_twin.cu"], files[d + "_bench.cu"], files[d + ".cu"]
    sym = "kmeans_tf32_abft_tb_64x32x16_w32x16_inj"
    assert "constexpr bool PROTECTED = false;" in twin and "constexpr bool INJECT = false;" in twin
    assert "constexpr bool PROTECTED = true;" in prot
    assert f'extern "C" cudaError_t {sym}_unprotected(' in twin and f"{sym}_unprotected_workspace" in twin
    for marker in ("encode_kernel", "UpdateCheck", "apply_fault"):
        assert marker not in twin, marker
    # the same tiles as the variant
    assert "constexpr int MT = 64, NT = 32, KT = 16;" in twin and "constexpr int MT = 64, NT = 32, KT = 16;" in prot
    assert f"{sym}_unprotected_workspace, {sym}_unprotected}};" in bench
    none = "kmeans_tf32_none_64x32x16_w32x16/kmeans_tf32_none_64x32x16_w32x16"
    assert none + "_twin.cu" not in files and "nullptr, nullptr};" in files[none + "_bench.cu"]


COMPILE = textwrap.dedent(
    """
    name: compile_kmeans
    family: kmeans
    arch: [sm_80, sm_90]
    variants:
      - {precision: tf32x3, protection: {scheme: abft, level: threadblock, inject: true}}
      - {precision: fp64, protection: {scheme: none}}
    """
)


def _nvcc(root: Path, rel: str, *archs: str) -> str:
    """nvcc -c of one translation unit for every arch of `archs` in one run (the host code compiled once), asserted to
    succeed without a warning; its stderr (ptxas' report of each arch)."""
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    d = str(Path(rel).parent)
    gencode = [f"-gencode=arch=compute_{a[3:]},code=[{a},compute_{a[3:]}]" for a in archs]
    cmd = [nvcc, "-std=c++17", "-O3", "-Xptxas", "-v", *gencode, "-I", str(root / d), "-I", str(root / "common"),
           "-c", str(root / rel), "-o", os.devnull]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{rel} ({', '.join(archs)}):\n{p.stdout}{p.stderr}"
    assert "warning" not in p.stderr.lower(), p.stderr
    for a in archs:
        assert f"for '{a}'" in p.stderr, (a, p.stderr[-2000:])
    return p.stderr


@pytest.mark.compile
def test_nvcc_compiles_protected_and_unprotected_for_sm80_and_sm90(tmp_path):
    files, _ = render_spec(load_spec_text(COMPILE, "compile_kmeans.yaml"))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    libs = sorted(p for p in files if p.endswith(".cu") and not p.endswith(("_bench.cu", "_twin.cu")) and not p.startswith("common/"))
    twins = sorted(p for p in files if p.endswith("_twin.cu"))
    assert len(libs) == 2 and len(twins) == 1  # the protected variant's benchmark twin
    for rel in libs + twins:
        _nvcc(tmp_path, rel, "sm_80", "sm_90")


@pytest.mark.compile
def test_the_warp_level_compiles_without_spills(tmp_path):
    """The warp level's assign kernel (five more MMAs per k-step, the check in registers) without a spill: tf32 with
    faults compiled in for sm_80 and sm_90 (its warp tile holds the most), fp64 for sm_90."""
    files, _ = render_spec(spec_of("arch: [sm_80, sm_90]\nprecision: [tf32, fp64]\n"
                                   "protection: {scheme: abft, level: warp, inject: true}\n"))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for name, archs in (("kmeans_tf32_abft-warp_128x64x32_w64x32_inj", ("sm_80", "sm_90")),
                        ("kmeans_f64_abft-warp_64x64x16_w32x32_inj", ("sm_90",))):
        err = _nvcc(tmp_path, f"{name}/{name}.cu", *archs)
        for arch in archs:
            entries = ptxas_entries(err, arch)
            assign = [t for n, t in entries.items() if "assign_kernel" in n]
            assert len(assign) == 1, (name, arch, list(entries))
            assert "0 bytes spill stores, 0 bytes spill loads" in assign[0], (name, arch, assign[0])


@pytest.mark.compile
def test_nvcc_compiles_the_bench_adapter(tmp_path):
    """The adapter on the shared bench driver (ftgen_bench.cuh), once the driver is part of the project."""
    files, _ = render_spec(load_spec_text(COMPILE, "compile_kmeans.yaml"))
    if "common/ftgen_bench.cuh" not in files:
        pytest.skip("the shared bench driver (common/ftgen_bench.cuh) is not emitted on this branch")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    bench = sorted(p for p in files if p.endswith("_bench.cu") and "tf32x3" in p)
    assert len(bench) == 1
    _nvcc(tmp_path, bench[0], "sm_80")


def test_fault_sites_are_the_ones_the_executables_take():
    """``--site`` is checked in Python against the family's sites: the same names the bench adapter's site_from takes."""
    import re

    src = (REPO / "templates" / "kmeans" / "ftgen_kmeans_bench.h").read_text()
    body = src[src.index("inline int site_from("):src.index("inline int site_from_env(")]
    assert set(families.get("kmeans").fault_sites) == set(re.findall(r'strcmp\(s, "([a-z]+)"\)', body))
