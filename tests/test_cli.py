"""CLI behaviour and exit codes (DESIGN.md): 0 ok, 2 bad input, 3 build failed, 4 no GPU, 1 else."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ftgen.cli import main

HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()


def write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_help_and_version(capsys):
    assert main(["--help"]) == 0
    assert "generate" in capsys.readouterr().out
    assert main(["--version"]) == 0


def test_list_shows_families_params_constraints(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "gemm" in out and "m_tb" in out and "threads per block" in out
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any(d["family"] == "gemm" for d in data)
    assert main(["list", "nosuch"]) == 2


def test_unknown_flag_is_exit_2(capsys):
    assert main(["bench", "--reps", "zero"]) == 2


def test_bench_without_project_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bench"]) == 2
    assert "ftgen generate" in capsys.readouterr().err


def test_generate_prints_variants_and_rejections(tmp_path, capsys):
    spec = write(tmp_path / "s.yaml", "name: s\nfamily: gemm\nparams: {m_t: [8, 16]}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip() == "gemm_f32_none_128x128x8_w32x64_t8x8_s3"
    assert "rejected by constraints" in cap.err and "not 32" in cap.err


def test_internal_errors_have_no_traceback(monkeypatch, capsys):
    import ftgen.cli as cli

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cli, "_project_dir", boom)
    assert main(["build"]) == 1
    err = capsys.readouterr().err
    assert "kaboom" in err and "Traceback" not in err


@pytest.mark.compile
@pytest.mark.skipif(not HAS_NVCC or shutil.which("cmake") is None or shutil.which("ninja") is None, reason="needs nvcc, cmake, ninja")
def test_generate_build_bench_without_gpu(tmp_path, capsys, monkeypatch):
    """The demo path on a machine without a GPU: generate and build work, bench says so and exits 4;
    a second build compiles nothing."""
    spec = write(
        tmp_path / "s.yaml",
        "name: s\nfamily: gemm\narch: [sm_90]\nparams: {m_tb: 32, n_tb: 32, k_tb: 8, m_w: 16, n_w: 32, m_t: 4, n_t: 4, stages: 2}\n",
    )
    out = tmp_path / "g"
    assert main(["generate", str(spec), "-o", str(out)]) == 0
    assert main(["build", str(out / "s"), "-j", "2"]) == 0
    assert (out / "s" / "bin" / "gemm_f32_none_32x32x8_w16x32_t4x4_s2").is_file()
    capsys.readouterr()
    assert main(["build", str(out / "s")]) == 0
    assert "0 compiled, 1 up to date" in capsys.readouterr().err
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU tool is present: the no-GPU path cannot be shown here")
    assert main(["bench", str(out / "s")]) == 4
    assert "no CUDA GPU" in capsys.readouterr().err


@pytest.mark.compile
@pytest.mark.skipif(not HAS_NVCC or shutil.which("cmake") is None, reason="needs nvcc and cmake")
def test_build_failure_is_exit_3(tmp_path, capsys):
    spec = write(tmp_path / "s.yaml", "name: s\nfamily: gemm\narch: [sm_90]\nparams: {m_tb: 32, n_tb: 32, k_tb: 8, m_w: 16, n_w: 32, m_t: 4, n_t: 4}\n")
    out = tmp_path / "g"
    assert main(["generate", str(spec), "-o", str(out)]) == 0
    cu = next((out / "s").glob("gemm_*/gemm_*_s3.cu"))
    cu.write_text(cu.read_text() + "\nthis is not C++;\n")
    assert main(["build", str(out / "s"), "-j", "2"]) == 3
    assert "failed to compile" in capsys.readouterr().err
