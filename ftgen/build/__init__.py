"""Build: configure the generated CMake project with Ninja and build its variants in parallel.

An unchanged variant is never recompiled: each variant's build key is a hash of its sources, the
shared headers, the nvcc version, the architectures and the flags. Executables are kept in a
content-addressed cache (``$FTGEN_CACHE_DIR/bin/<key>/``) so another project (a search, another
spec) with the same variant reuses them.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import BuildError, FtgenError
from .. import libraries
from ..paths import cache_dir

STATE_FILE = "build/ftgen-build-state.json"
_NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


@dataclass
class BuildResult:
    built: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)  # up to date, or restored from the binary cache
    failed: dict[str, str] = field(default_factory=dict)  # kernel -> compiler output
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed


def tool_versions() -> dict:
    return {"nvcc": nvcc_version(), "cmake": _first_line(["cmake", "--version"])}


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def find_nvcc() -> str | None:
    for cand in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).is_file():
            return cand
    return None


_NVCC_VERSION: dict[str, str | None] = {}


def nvcc_version() -> str | None:
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    if nvcc not in _NVCC_VERSION:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        m = re.search(r"release ([\d.]+), (V[\d.]+)", out)
        _NVCC_VERSION[nvcc] = f"{m.group(1)} ({m.group(2)})" if m else (out.strip().splitlines() or [None])[-1]
    return _NVCC_VERSION[nvcc]


def load_manifest(project: Path) -> dict:
    mf = project / "manifest.json"
    if not mf.is_file():
        raise FtgenError(f"{project}: no manifest.json here; run `ftgen generate SPEC` first (or give the generated directory)")
    try:
        return json.loads(mf.read_text())
    except ValueError as e:
        raise FtgenError(f"{mf}: unreadable manifest: {e}") from None


def select_variants(manifest: dict, pattern: str | None) -> list[dict]:
    variants = manifest["variants"]
    if not pattern:
        return variants
    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    chosen = [v for v in variants if any(fnmatch.fnmatchcase(v["kernel"], p) for p in pats)]
    if not chosen:
        from ..errors import SpecError

        raise SpecError(f"--kernels {pattern!r} matches none of the {len(variants)} variants (e.g. {variants[0]['kernel']})")
    return chosen


def arch_override(arch: str | None) -> list[str] | None:
    if not arch:
        return None
    from ..errors import SpecError
    from ..families.base import ARCHS

    out = []
    for a in arch.split(","):
        a = a.strip()
        if a not in ARCHS:
            raise SpecError(f"--arch: {a!r} is not one of {', '.join(ARCHS)}")
        out.append(a)
    return out


def build_key(variant: dict, archs: list[str], nvcc: str | None) -> str:
    h = hashlib.sha256()
    for part in (variant["source_hash"], ",".join(archs), nvcc or "", "Release", "cudart-shared", "v1"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def binary_path(project: Path, kernel: str) -> Path:
    return project / "bin" / kernel


def build(
    project: Path,
    *,
    jobs: int | None = None,
    arch: str | None = None,
    kernels: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> BuildResult:
    t0 = time.monotonic()
    project = project.resolve()
    manifest = load_manifest(project)
    variants = select_variants(manifest, kernels)
    archs_override = arch_override(arch)
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found (put the CUDA toolkit's bin/ on PATH or set CUDACXX)")
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        raise BuildError("cmake and ninja are needed to build (pip install cmake ninja, or your package manager)")
    nvcc_ver = nvcc_version()
    result = BuildResult()

    state_path = project / STATE_FILE
    state = _read_json(state_path)
    bin_cache = cache_dir() / "bin"
    todo: list[tuple[dict, str]] = []
    for v in variants:
        archs = archs_override or v["archs"]
        key = build_key(v, archs, nvcc_ver)
        exe = binary_path(project, v["kernel"])
        if exe.is_file() and state.get(v["kernel"]) == key:
            result.cached.append(v["kernel"])
            continue
        cached = bin_cache / key / v["kernel"]
        if cached.is_file():
            exe.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cached, exe)
            state[v["kernel"]] = key
            result.cached.append(v["kernel"])
            continue
        todo.append((v, key))

    if todo:
        _configure(project, archs_override, manifest, log)
        for v, _ in todo:  # a stale executable must not pass for a fresh one
            binary_path(project, v["kernel"]).unlink(missing_ok=True)
        output = _ninja(project, [v["kernel"] for v, _ in todo], jobs, progress)
        for v, key in todo:
            exe = binary_path(project, v["kernel"])
            if exe.is_file():
                result.built.append(v["kernel"])
                state[v["kernel"]] = key
                dst = bin_cache / key
                try:
                    dst.mkdir(parents=True, exist_ok=True)
                    tmp = dst / f".{v['kernel']}.tmp{os.getpid()}"
                    shutil.copy2(exe, tmp)
                    os.replace(tmp, dst / v["kernel"])
                except OSError:
                    pass  # the cache is an optimisation
            else:
                state.pop(v["kernel"], None)
                result.failed[v["kernel"]] = _failure_log(output, v["kernel"])
    state_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, state_path)
    result.seconds = time.monotonic() - t0
    return result


def _read_json(p: Path) -> dict:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def _configure(project: Path, archs: list[str] | None, manifest: dict, log) -> None:
    build_dir = project / "build"
    cmd = ["cmake", "-S", str(project), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
    nvcc = find_nvcc()
    if nvcc:
        cmd.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    from ..codegen.emit import cuda_arch_numbers

    arch_list = archs or manifest["spec"]["arch"]
    cmd.append(f"-DFTGEN_CUDA_ARCHITECTURES={';'.join(cuda_arch_numbers(arch_list))}")
    cmd.extend(libraries.configure_args())
    cache = build_dir / "CMakeCache.txt"
    stamp = build_dir / "ftgen-configure.txt"
    want = "\n".join(cmd)
    if cache.is_file() and stamp.is_file() and stamp.read_text() == want:
        return  # configured with the same settings; ninja re-runs cmake itself when CMakeLists changes
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"cmake configure failed in {build_dir}:\n{_tail(proc.stdout + proc.stderr, 40)}")
    stamp.write_text(want)
    if log:
        log(f"configured {build_dir}")


def _ninja(project: Path, targets: list[str], jobs: int | None, progress) -> str:
    build_dir = project / "build"
    cmd = ["cmake", "--build", str(build_dir), "--parallel", str(jobs or os.cpu_count() or 2), "--target", *targets, "--", "-k", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        m = _NINJA_PROGRESS.match(line)
        if m and progress:
            progress(int(m.group(1)), int(m.group(2)), line[m.end():].strip())
    proc.wait()
    return "".join(lines)


def _failure_log(output: str, kernel: str) -> str:
    """The compiler messages that belong to one target (ninja prints 'FAILED: <outputs>')."""
    blocks = re.split(r"(?m)^(?=\[\d+/\d+\]|FAILED: )", output)
    mine = [b for b in blocks if b.startswith("FAILED: ") and kernel in b.splitlines()[0]]
    text = "".join(mine) if mine else output
    return _tail(text, 60)


def _tail(text: str, n: int) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join(lines[-n:])


def print_failures(result: BuildResult, stream=None) -> None:
    stream = stream or sys.stderr
    for k, msg in result.failed.items():
        print(f"--- {k}: compile failed\n{msg}\n", file=stream)
