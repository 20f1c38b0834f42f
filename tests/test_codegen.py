"""Emission: deterministic, atomic, incremental; manifest; CMake; golden sources."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, golden_dir_check, without_copied_headers
from ftgen.codegen.emit import generate, render_spec
from ftgen.spec import load_spec_text

SMALL = textwrap.dedent(
    """
    name: golden
    family: gemm
    arch: [sm_80, sm_90]
    variants:
      - {precision: fp32, params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 2}}
      - {precision: fp64, protection: {scheme: abft, level: threadblock, interval: 4, inject: true},
         params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, ref_checksums: fused}}
    shapes: [{m: 100, n: 70, k: 33}]
    """
)


def test_output_is_deterministic_and_incremental(tmp_path):
    s = load_spec_text(SMALL, "golden.yaml")
    a, _ = render_spec(s)
    b, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    assert a == b
    g1 = generate(s, tmp_path)
    assert g1.written and g1.unchanged == 0
    stamp = {p: os.stat(tmp_path / "golden" / p).st_mtime_ns for p in a}
    g2 = generate(load_spec_text(SMALL, "golden.yaml"), tmp_path)
    assert g2.written == [] and g2.unchanged == len(a)
    assert stamp == {p: os.stat(tmp_path / "golden" / p).st_mtime_ns for p in a}
    assert not list(tmp_path.glob(".ftgen-tmp-*"))


def test_stale_variants_are_removed(tmp_path):
    generate(load_spec_text(SMALL, "golden.yaml"), tmp_path)
    one = "\n".join(line for line in SMALL.splitlines() if "fp64" not in line and "ref_checksums: fused}}" not in line)
    assert "fp64" not in one and "fp32" in one
    g = generate(load_spec_text(one, "golden.yaml"), tmp_path)
    assert any("f64" in r for r in g.removed)
    assert not list((tmp_path / "golden").glob("gemm_f64*/*.cu"))


def test_manifest_lists_variants_with_parameters_and_hashes(tmp_path):
    generate(load_spec_text(SMALL, "golden.yaml"), tmp_path)
    m = json.loads((tmp_path / "golden" / "manifest.json").read_text())
    assert [v["kernel"] for v in m["variants"]] == [
        "gemm_f32_none_64x64x8_w32x32_t4x8_s2",
        "gemm_f64_abft-tb-i4_64x64x8_w32x32_t4x8_s3_inj",
    ]
    v = m["variants"][1]
    assert v["params"]["m_tb"] == 64 and v["protection"]["level"] == "threadblock" and v["protection"]["inject"]
    assert len(v["source_hash"]) == 32 and v["archs"] == ["sm_80", "sm_90"]
    cmake = (tmp_path / "golden" / "CMakeLists.txt").read_text()
    assert "CUDA::cublas" in cmake and '"80;90"' in cmake and "add_executable(gemm_f64_abft-tb-i4" in cmake


def test_golden_sources():
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    golden_dir_check(REPO / "tests" / "golden" / "gemm", {
        rel.replace("/", "__"): text for rel, text in without_copied_headers(files).items()
        if rel.endswith((".cu", ".h", ".cuh", "CMakeLists.txt"))})


def test_the_common_headers_are_copies_of_their_templates():
    """The golden files leave out common/: its headers must be the templates' own text (an edit on the way fails)."""
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    assert "common/ftgen_ft.cuh" in files and "common/cutlass_abft.cuh" in files
    assert not any(rel.startswith("common/") for rel in without_copied_headers(files))
    files["common/ftgen_ft.cuh"] += "// edited\n"
    with pytest.raises(AssertionError, match="verbatim copy"):
        without_copied_headers(files)


def test_injection_code_only_in_inject_builds():
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    plain = load_spec_text(SMALL.replace("inject: true", "inject: false"), "golden.yaml")
    files_plain, _ = render_spec(plain)
    inj = files["gemm_f64_abft-tb-i4_64x64x8_w32x32_t4x8_s3_inj/gemm_f64_abft-tb-i4_64x64x8_w32x32_t4x8_s3_inj.cu"]
    clean = files_plain["gemm_f64_abft-tb-i4_64x64x8_w32x32_t4x8_s3/gemm_f64_abft-tb-i4_64x64x8_w32x32_t4x8_s3.cu"]
    assert "maybe_inject" in inj and "apply_fault" in inj
    assert "maybe_inject" not in clean and "apply_fault" not in clean and "fault_by_block" not in clean


def _default_shapes(files: dict[str, str]) -> dict[str, str]:
    import re

    out = {}
    for path, text in files.items():
        if path.endswith("_bench.cu"):
            out[path.split("/")[0]] = re.search(r'kDefaultShapes = "([^"]*)"', text).group(1)
    return out


def test_executables_default_to_the_spec_shapes():
    # DESIGN: the spec's shapes are the default benchmark shapes (--shapes overrides)
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    assert set(_default_shapes(files).values()) == {"100x70x33"}
    fft = textwrap.dedent(
        """
        name: fftshapes
        family: fft
        arch: [sm_90]
        variants:
          - {precision: fp32, params: {logn: 0}}
          - {precision: fp32, params: {logn: 10}}
          - {precision: fp32, params: {logn: 12}}
        shapes: [{n: 1024, batch: 8}, {n: 33554432, batch: 1}]
        """
    )
    got = _default_shapes(render_spec(load_spec_text(fft, "fftshapes.yaml"))[0])
    by_logn = {k.split("_logn")[1].split("_")[0] if "_logn" in k else "auto": v for k, v in got.items()}
    assert by_logn["auto"] == "1024x8"  # 2^25 is beyond the every-size variants' 2^24
    assert by_logn["10"] == "1024x8"  # the shape of its size
    assert by_logn["12"] == "4096x16384"  # no spec shape of its size: its own default (2^26 elements)


def test_prepass_reference_checksums_replace_the_carried_ones():
    text = textwrap.dedent(
        """
        name: pre
        family: gemm
        arch: [sm_90]
        precision: fp32
        protection: {scheme: abft, level: threadblock, interval: 8}
        params: {m_tb: 128, n_tb: 128, k_tb: 16, m_w: 32, n_w: 64, m_t: 8, n_t: 8, stages: 3, ref_checksums: [fused, prepass]}
        """
    )
    files, _ = render_spec(load_spec_text(text, "pre.yaml"))
    fused = files["gemm_f32_abft-tb-i8_128x128x16_w32x64_t8x8_s3/gemm_f32_abft-tb-i8_128x128x16_w32x64_t8x8_s3.cu"]
    pre = files["gemm_f32_abft-tb-i8_128x128x16_w32x64_t8x8_s3_prepass/gemm_f32_abft-tb-i8_128x128x16_w32x64_t8x8_s3_prepass.cu"]
    # fused: encodings travel through the pipeline and the row checksums are carried in shared memory
    assert "sm.Es[" in fused and "sm.chk[" in fused and "ref_kernel" not in fused
    # prepass: two more pre-pass kernels, nothing of the checksums in the main loop, one verification
    # after the loop in an instantiation of its own when the interval covers k
    assert "ref_kernel<<<" in pre and "ref_scan<<<" in pre and "enc_kernel<<<" in pre
    assert "sm.Es[" not in pre and "sm.chk[" not in pre
    assert "gemm_kernel<true, true>" in pre and "if constexpr (ONE_VERIFY)" in pre
