"""Builds under concurrency, interruption, vanished sources and a corrupted binary cache (nvcc, no GPU)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HAS_TOOLS = all(shutil.which(t) or Path(f"/usr/local/cuda/bin/{t}").is_file() for t in ("nvcc", "cmake", "ninja"))
pytestmark = [pytest.mark.compile, pytest.mark.skipif(not HAS_TOOLS, reason="needs nvcc, cmake and ninja")]

# two tiny variants (they differ in the pipeline depth only)
SPEC = "name: t\nfamily: gemm\narch: [sm_90]\nparams: {m_tb: 32, n_tb: 32, k_tb: 8, m_w: 16, n_w: 32, m_t: 4, n_t: 4, stages: [2, 3]}\n"
K2, K3 = "gemm_f32_none_32x32x8_w16x32_t4x4_s2", "gemm_f32_none_32x32x8_w16x32_t4x4_s3"


def ftgen(*args, cwd=None, **kw):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "") + ":/usr/local/cuda/bin"}
    return subprocess.run([sys.executable, "-m", "ftgen.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, **kw)


def ftgen_bg(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "") + ":/usr/local/cuda/bin"}
    return subprocess.Popen([sys.executable, "-m", "ftgen.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "t.yaml").write_text(SPEC)
    r = ftgen("generate", str(tmp_path / "t.yaml"), "-o", str(tmp_path / "g"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "g" / "t"


def test_two_concurrent_builds_of_a_fresh_project(project):
    a = ftgen_bg("build", str(project), "-j", "1")
    time.sleep(0.5)
    b = ftgen_bg("build", str(project), "-j", "1")
    out_a, out_b = a.communicate(timeout=600), b.communicate(timeout=600)
    assert a.returncode == 0 and b.returncode == 0, (out_a, out_b)
    assert (project / "bin" / K2).is_file() and (project / "bin" / K3).is_file()
    assert "waiting for another ftgen build" in out_a[1] + out_b[1]
    assert f"build: {project}" in out_a[1]  # says which project


def test_progress_lines_when_piped_and_cache_checksums(project):
    r = ftgen("build", str(project), "-j", "1")  # stderr is a pipe, not a terminal
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert len(lines) >= 2 and lines[-1].startswith("[") and K3 in r.stderr and "ETA" in r.stderr
    # every cache entry has its checksum beside it
    entries = sorted(Path(os.environ["FTGEN_CACHE_DIR"], "bin").glob("*/gemm_*"))
    assert {e.name for e in entries} == {K2, K3, K2 + ".sha256", K3 + ".sha256"}
    # a corrupted entry is discarded and rebuilt, not copied into bin/
    entry = next(e for e in entries if e.name == K3)
    entry.write_bytes(entry.read_bytes()[:1000])
    shutil.rmtree(project / "bin")
    (project / "build" / "ftgen-build-state.json").unlink()
    r = ftgen("build", str(project), "--kernels", K3)
    assert r.returncode == 0, r.stderr
    assert "1 compiled, 0 up to date" in r.stderr
    good = (project / "bin" / K3).read_bytes()
    assert len(good) > 1000 and entry.read_bytes() == good


def test_vanished_source_is_refused_and_others_still_build(project):
    # deleted before the first build: --kernels naming the other variant still configures and builds
    (project / K2 / f"{K2}.cu").unlink()
    r = ftgen("build", str(project), "--kernels", K3, "-j", "1")
    assert r.returncode == 0, r.stderr
    assert (project / "bin" / K3).is_file()
    # the whole project: refused as an incomplete project (exit 2), naming the file, before the build system runs
    r = ftgen("build", str(project))
    assert r.returncode == 2
    assert f"{K2}/{K2}.cu;" in r.stderr and "ftgen generate" in r.stderr and "Traceback" not in r.stderr
    # deleted after a build: noticed, not "up to date"
    (project / K3 / f"{K3}_bench.cu").unlink()
    r = ftgen("build", str(project), "--kernels", K3)
    assert r.returncode == 2 and f"{K3}/{K3}_bench.cu;" in r.stderr


def test_changed_source_is_rebuilt_with_a_warning(project):
    r = ftgen("build", str(project), "--kernels", K2, "-j", "1")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr  # a fresh project matches its manifest
    cu = project / K2 / f"{K2}.cu"
    cu.write_text(cu.read_text() + "\n// edited\n")
    r = ftgen("build", str(project), "--kernels", K2)
    assert r.returncode == 0 and "sources differ from what was generated" in r.stderr and "1 compiled" in r.stderr


def _ninja_of(build_dir: Path, timeout: float = 120) -> int | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if Path(cmd.decode()).name == "ninja" and Path(os.readlink(f"/proc/{pid}/cwd")) == build_dir:
                    return int(pid)
            except OSError:
                continue
        time.sleep(0.2)
    return None


def test_interrupted_build_reports_interrupted(project):
    p = ftgen_bg("build", str(project), "-j", "1")
    pid = _ninja_of(project.resolve() / "build")
    assert pid is not None, "ninja never started"
    time.sleep(1.0)
    os.kill(pid, signal.SIGINT)  # the signal reaches ninja only
    out, err = p.communicate(timeout=300)
    if p.returncode == 0:
        pytest.skip("the build finished before the signal arrived")
    assert p.returncode == 130, err
    assert "interrupted" in err and "compile failed" not in err
