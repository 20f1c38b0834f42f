"""nvcc compiles a representative variant of every gemm SIMT scheme for sm_80 and sm_90 (no GPU),
and the built code is what it should be: no spills in the unprotected kernel, FFMA/DFMA present."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ftgen.build import find_nvcc
from ftgen.codegen.emit import render_spec
from ftgen.spec import load_spec_text

pytestmark = pytest.mark.compile

SPEC = textwrap.dedent(
    """
    name: compile
    family: gemm
    arch: [sm_80, sm_90]
    variants:
      - {precision: fp32, params: {m_tb: 128, n_tb: 128, k_tb: 8, m_w: 32, n_w: 64, m_t: 8, n_t: 8, stages: 2}}
      - {precision: fp32, params: {m_tb: 32, n_tb: 32, k_tb: 32, m_w: 16, n_w: 32, m_t: 4, n_t: 4, stages: 3, split_k: 4}}
      - {precision: fp32, protection: {scheme: abft, level: threadblock, interval: 8, inject: true},
         params: {m_tb: 64, n_tb: 128, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 4}}
      - {precision: fp32, protection: {scheme: abft, level: [warp, thread], correct: detect},
         params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 2}}
      - {precision: fp64, protection: {scheme: abft, level: nonfused, interval: 16, inject: true},
         params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 3}}
      - {precision: fp32, protection: {scheme: abft, level: threadblock, interval: 4, inject: true},
         params: {m_tb: 64, n_tb: 64, k_tb: 16, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 2, split_k: 2, ref_checksums: prepass}}
    """
)


def compile_one(nvcc: str, root: Path, rel: str) -> tuple[str, int, str]:
    obj = root / (rel + ".o")
    cmd = [nvcc, "-std=c++17", "-O3", "-Xptxas", "-v", "-gencode=arch=compute_80,code=sm_80",
           "-gencode=arch=compute_90,code=sm_90", f"-I{root / 'common'}", f"-I{(root / rel).parent}", "-c",
           str(root / rel), "-o", str(obj)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return rel, p.returncode, p.stdout + p.stderr


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    spec = load_spec_text(SPEC, "compile.yaml")
    files, manifest = render_spec(spec)
    root = tmp_path_factory.mktemp("compile")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    libs = [s for v in manifest["variants"] for s in v["sources"] if s.endswith(".cu") and not s.endswith("_bench.cu")]
    assert len(libs) == 7
    with ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda r: compile_one(nvcc, root, r), libs))
    return root, {rel: (rc, log) for rel, rc, log in results}


def test_every_scheme_compiles_for_sm80_and_sm90(compiled):
    _, results = compiled
    for rel, (rc, log) in results.items():
        assert rc == 0, f"{rel}:\n{log[-3000:]}"
        assert "sm_80" in log and "sm_90" in log


def test_unprotected_kernel_does_not_spill(compiled):
    _, results = compiled
    rc, log = results["gemm_f32_none_128x128x8_w32x64_t8x8_s2/gemm_f32_none_128x128x8_w32x64_t8x8_s2.cu"]
    # the aligned instantiation (gemm_kernel<true>) for sm_90 is the one that runs on aligned shapes
    blocks = log.split("Compiling entry function")
    hot = [b for b in blocks if "gemm_kernelILb1E" in b and "sm_90" in b]
    assert hot and "0 bytes spill stores" in hot[0], hot


@pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump not installed")
def test_fma_instructions_present(compiled):
    root, _ = compiled
    obj = root / "gemm_f64_abft-nonfused-i16_64x64x8_w32x32_t4x8_s3_inj" / "gemm_f64_abft-nonfused-i16_64x64x8_w32x32_t4x8_s3_inj.cu.o"
    sass = subprocess.run(["cuobjdump", "-sass", str(obj)], capture_output=True, text=True).stdout
    assert "DFMA" in sass
