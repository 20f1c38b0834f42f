"""Build: configure the generated CMake project with Ninja and build its variants in parallel.

An unchanged variant is never recompiled: each variant's build key is a hash of its sources, the
shared headers, the nvcc version, the architectures and the flags. Executables are kept in a
content-addressed cache (``$FTGEN_CACHE_DIR/bin/<key>/``, each with a ``.sha256`` beside it that is
checked before use) so another project (a search, another spec) with the same variant reuses them.

One build of a project runs at a time (a file lock in ``build/``); a second one waits. Sources are
compared with the manifest before building: a selected variant whose source vanished is refused
before the build system runs (re-generate the project); the vanished sources of variants left out
with ``--kernels`` are declared generated to CMake, so the rest of the project still configures; a
changed source is rebuilt with a warning.
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

from ..errors import BuildError, Interrupted, SpecError
from .. import libraries
from ..paths import cache_dir

STATE_FILE = "build/ftgen-build-state.json"
LOCK_FILE = "build/.ftgen.lock"
MISSING_CMAKE = "build/ftgen-missing-sources.cmake"
_NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")


@dataclass
class BuildResult:
    built: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)  # up to date, or restored from the binary cache
    failed: dict[str, str] = field(default_factory=dict)  # kernel -> compiler output (or why it was not built)
    seconds: float = 0.0
    changed: dict[str, str] = field(default_factory=dict)  # kernel -> its sources differ from the generated ones

    @property
    def ok(self) -> bool:
        return not self.failed


def find_nvcc() -> str | None:
    for cand in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).is_file():
            return cand
    return None


def cuda_tool_dirs() -> list[str]:
    """The bin folders of the NVIDIA CUDA tools installed from PyPI into this Python (the dev extra's
    nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm: <site-packages>/nvidia/cu*/bin), for machines whose CUDA toolkit
    lacks them. cuobjdump runs nvdisasm, so both go on PATH (tests/conftest.py)."""
    try:
        import nvidia  # (a namespace package of NVIDIA's wheels)
    except ImportError:
        return []
    dirs = []
    for root in getattr(nvidia, "__path__", []):
        for d in sorted(Path(root).glob("cu*/bin")) + sorted(Path(root).glob("cuda_*/bin")):
            if any((d / t).is_file() for t in ("cuobjdump", "nvdisasm")) and str(d) not in dirs:
                dirs.append(str(d))
    return dirs


def find_cuda_tool(name: str) -> str | None:
    """A CUDA toolkit program (cuobjdump, nvdisasm): on PATH, beside nvcc, or from cuda_tool_dirs()."""
    nvcc = find_nvcc()
    for cand in [shutil.which(name), str(Path(nvcc).with_name(name)) if nvcc else None] + [str(Path(d) / name) for d in cuda_tool_dirs()]:
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
    """The project's manifest.json, checked for the fields the engine reads (exit 2 when it is
    missing, unreadable or not what ``ftgen generate`` writes)."""
    if not project.exists():
        raise SpecError(f"{project}: no such directory; run `ftgen generate SPEC` first (or give the generated directory)")
    if not project.is_dir():
        raise SpecError(f"{project}: not a directory; give the generated project directory")
    mf = project / "manifest.json"
    if not mf.is_file():
        raise SpecError(f"{project}: no generated project here (no manifest.json); run `ftgen generate SPEC` first (or give the generated directory)")
    bad = f"{mf}: not a manifest written by ftgen generate"
    try:
        m = json.loads(mf.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise SpecError(f"{bad} ({str(e)[:80]}); re-generate the project") from None
    except OSError as e:
        raise SpecError(f"{mf}: cannot read: {e.strerror}") from None
    why = _manifest_problem(m)
    if why:
        raise SpecError(f"{bad} ({why}); re-generate the project with `ftgen generate SPEC`")
    return m


def _manifest_problem(m) -> str | None:
    if not isinstance(m, dict):
        return "not a JSON object"
    spec = m.get("spec")
    if not isinstance(spec, dict) or not all(isinstance(spec.get(k), str) for k in ("name", "family")):
        return "no spec name and family"
    if not isinstance(spec.get("arch"), list):
        return "no spec arch"
    vs = m.get("variants")
    if not isinstance(vs, list) or not vs:
        return "no variants"
    for i, v in enumerate(vs):
        if not isinstance(v, dict):
            return f"variants[{i}] is not an object"
        if not isinstance(v.get("kernel"), str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,200}", v["kernel"]):
            return f"variants[{i}] has no valid kernel name"
        if not isinstance(v.get("source_hash"), str) or not isinstance(v.get("archs"), list):
            return f"variants[{i}] has no source_hash or archs"
        srcs = v.get("sources")
        if not isinstance(srcs, list) or not all(isinstance(x, str) and _safe_rel(x) for x in srcs):
            return f"variants[{i}] has no valid source list"
        if not isinstance(v.get("protection", {}), dict):
            return f"variants[{i}] has no valid protection"
    return None


def _safe_rel(rel: str) -> bool:
    p = Path(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts


def select_variants(manifest: dict, pattern: str | None) -> list[dict]:
    variants = manifest["variants"]
    if not pattern:
        return variants
    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    chosen = [v for v in variants if any(fnmatch.fnmatchcase(v["kernel"], p) for p in pats)]
    if not chosen:
        raise SpecError(f"--kernels {pattern[:80]!r} matches none of the {len(variants)} variants (e.g. {variants[0]['kernel']})")
    return chosen


def arch_override(arch: str | None) -> list[str] | None:
    if not arch:
        return None
    from ..families.base import ARCHS

    out = []
    for a in arch.split(","):
        a = a.strip()
        if a not in ARCHS:
            raise SpecError(f"--arch: {a[:40]!r} is not one of {', '.join(ARCHS)}")
        out.append(a)
    return out


def build_key(variant: dict, archs: list[str], nvcc: str | None, source_hash: str | None = None) -> str:
    """The cache key of one executable: its sources (the hash on disk when given, else the
    manifest's), the architectures, nvcc and the build flags."""
    h = hashlib.sha256()
    for part in (source_hash or variant["source_hash"], ",".join(archs), nvcc or "", "Release", "cudart-shared", "v1"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def binary_path(project: Path, kernel: str) -> Path:
    return project / "bin" / kernel


def source_problems(project: Path, variants: list[dict]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Compare each variant's sources on disk with the manifest: (missing, changed, hash on disk).
    ``missing`` and ``changed`` map kernel -> a message naming the files; ``hashes`` maps every
    variant whose files are all present to the hash of its sources as they are now."""
    from ..codegen.emit import _hash_files

    common = {}
    cdir = project / "common"
    if cdir.is_dir():
        for f in sorted(cdir.rglob("*")):
            if f.is_file():
                common[f.relative_to(project).as_posix()] = f.read_text(errors="replace")
    common_hash = _hash_files(common)
    missing: dict[str, str] = {}
    changed: dict[str, str] = {}
    hashes: dict[str, str] = {}
    for v in variants:
        own, gone = {}, []
        for rel in v["sources"]:
            f = project / rel
            try:
                own[rel] = f.read_text()
            except (OSError, UnicodeDecodeError):
                gone.append(rel)
        if gone:
            missing[v["kernel"]] = (
                f"source {', '.join(gone)} vanished (or is unreadable) since generation; "
                f"re-generate the project (`ftgen generate {_spec_hint(project)}`) to restore it"
            )
            continue
        h = hashlib.sha256((common_hash + _hash_files(own)).encode()).hexdigest()[:32]
        hashes[v["kernel"]] = h
        if h != v["source_hash"]:
            # a manifest that records each file's sha256 (``file_hashes``) lets the message name the file
            per_file = v.get("file_hashes") if isinstance(v.get("file_hashes"), dict) else None
            which = [rel for rel, text in own.items() if per_file and per_file.get(rel) not in (None, hashlib.sha256(text.encode()).hexdigest())]
            files = ", ".join(which) if which else f"one of {', '.join(v['sources'])} or common/"
            changed[v["kernel"]] = (
                f"sources differ from what was generated ({files}); "
                f"re-generate the project (`ftgen generate {_spec_hint(project)}`) to restore them"
            )
    return missing, changed, hashes


def check_sources(project: Path, variants: list[dict]) -> None:
    """Refuse (a SpecError, before the build system runs) to build variants whose generated sources are missing or
    unreadable: the project is incomplete, and `ftgen generate` restores it."""
    gone: dict[str, list[str]] = {}
    for v in variants:
        files = [rel for rel in v["sources"] if not _readable_text(project / rel)]
        if files:  # a variant with none of its sources left is named by its folder
            gone[v["kernel"]] = files if len(files) < len(v["sources"]) else [f"{v['kernel']}/ (all its sources)"]
    if gone:
        listed = [f for files in gone.values() for f in files]
        raise SpecError(
            f"{project}: generated sources missing or unreadable: {', '.join(listed[:3])}"
            f"{f' and {len(listed) - 3} more' if len(listed) > 3 else ''}; re-run `ftgen generate {_spec_hint(project)} -o "
            f"{project.parent}` to restore them, or leave {'that variant' if len(gone) == 1 else 'those variants'} out with --kernels")


def _readable_text(p: Path) -> bool:
    try:
        p.read_text()
        return True
    except (OSError, UnicodeDecodeError):
        return False


def _spec_hint(project: Path) -> str:
    try:
        return json.loads((project / "manifest.json").read_text())["spec"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return "SPEC"


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_lookup(entry: Path) -> Path | None:
    """A cached executable whose checksum (``<exe>.sha256`` beside it) matches, else None; a bad
    entry (no checksum, truncated, corrupted) is removed so it is rebuilt."""
    if not entry.is_file():
        return None
    check = entry.with_name(entry.name + ".sha256")
    try:
        ok = check.read_text().split()[0] == _sha256_file(entry)
    except (OSError, IndexError):
        ok = False
    if ok:
        return entry
    for p in (entry, check):
        try:
            p.unlink()
        except OSError:
            pass
    return None


def cache_store(exe: Path, entry: Path) -> None:
    """Copy a built executable into the cache with its checksum (the checksum goes last)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_name(f".{entry.name}.tmp{os.getpid()}")
    shutil.copy2(exe, tmp)
    digest = _sha256_file(tmp)
    os.replace(tmp, entry)
    tmp2 = entry.with_name(f".{entry.name}.sha256.tmp{os.getpid()}")
    tmp2.write_text(f"{digest}  {entry.name}\n")
    os.replace(tmp2, entry.with_name(entry.name + ".sha256"))


def project_lock(project: Path, log: Callable[[str], None] | None = None):
    """The project's build lock (held while configuring and building). A second build waits
    for the first and says so."""
    from filelock import FileLock, Timeout

    lock_path = project / LOCK_FILE
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0.2)
    except Timeout:
        (log or (lambda m: print(m, file=sys.stderr)))(f"waiting for another ftgen build of {project} to finish (lock {lock_path})")
        lock.acquire()
    return lock


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
    check_sources(project, variants)
    archs_override = arch_override(arch)
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found (put the CUDA toolkit's bin/ on PATH or set CUDACXX)")
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        raise BuildError("cmake and ninja are needed to build (pip install cmake ninja, or your package manager)")
    nvcc_ver = nvcc_version()
    lock = project_lock(project, log)
    try:
        return _build_locked(project, manifest, variants, archs_override, nvcc_ver, jobs, progress, log, t0)
    finally:
        lock.release()


def _build_locked(project, manifest, variants, archs_override, nvcc_ver, jobs, progress, log, t0) -> BuildResult:
    result = BuildResult()
    state_path = project / STATE_FILE
    state = _read_json(state_path)
    bin_cache = cache_dir() / "bin"
    missing, changed, hashes = source_problems(project, manifest["variants"])
    gone = [v["kernel"] for v in variants if v["kernel"] in missing]  # vanished since check_sources
    if gone:
        raise SpecError(f"{gone[0]}: {missing[gone[0]]}" + (f" (and {len(gone) - 1} more variant(s))" if len(gone) > 1 else ""))
    result.changed = {k: m for k, m in changed.items() if k in {v["kernel"] for v in variants}}
    todo: list[tuple[dict, str]] = []
    for v in variants:
        k = v["kernel"]
        archs = archs_override or v["archs"]
        key = build_key(v, archs, nvcc_ver, hashes[k])
        exe = binary_path(project, k)
        if exe.is_file() and state.get(k) == key:
            result.cached.append(k)
            continue
        cached = cache_lookup(bin_cache / key / k) if k not in changed else None
        if cached is not None:
            exe.parent.mkdir(parents=True, exist_ok=True)
            tmp = exe.with_name(f".{k}.tmp{os.getpid()}")
            shutil.copy2(cached, tmp)
            os.replace(tmp, exe)
            state[k] = key
            result.cached.append(k)
            continue
        todo.append((v, key))

    try:
        if todo:
            _configure(project, archs_override, manifest, log, missing_sources=_missing_files(project, manifest, missing))
            for v, _ in todo:  # a stale executable must not pass for a fresh one
                binary_path(project, v["kernel"]).unlink(missing_ok=True)
            output, interrupted = _ninja(project, [v["kernel"] for v, _ in todo], jobs, progress)
            for v, key in todo:
                k = v["kernel"]
                exe = binary_path(project, k)
                if exe.is_file():
                    result.built.append(k)
                    state[k] = key
                    if k not in changed:  # the cache holds what generate wrote, never local edits
                        try:
                            cache_store(exe, bin_cache / key / k)
                        except OSError:
                            pass  # the cache is an optimisation
                elif not interrupted:
                    state.pop(k, None)
                    result.failed[k] = _failure_log(output, k)
            if interrupted:
                raise Interrupted(
                    f"build of {project} interrupted ({interrupted}); {len(result.built)} variant(s) finished, "
                    f"{len(todo) - len(result.built)} not built"
                )
    finally:
        _write_state(state_path, state)
    result.seconds = time.monotonic() - t0
    return result


@dataclass
class LibraryResult:
    prefix: Path  # the install prefix
    library: Path
    header: Path
    package_dir: Path  # holds ftgen_<name>-config.cmake
    variants: list[str] = field(default_factory=list)
    entry_points: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # fallbacks the project does not hold
    seconds: float = 0.0


def build_library(
    project: Path,
    prefix: Path,
    *,
    jobs: int | None = None,
    arch: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> LibraryResult:
    """Render the project's shared library (``lib/``), build it and install it under ``prefix``
    (lib/libftgen_<name>.so, include/ftgen_<name>.h, lib/cmake/ftgen_<name>/)."""
    from ..codegen.library import write_library
    from .. import families

    t0 = time.monotonic()
    project = project.resolve()
    manifest = load_manifest(project)
    archs_override = arch_override(arch)
    prefix = Path(prefix).resolve()
    if prefix.exists() and not prefix.is_dir():
        raise SpecError(f"--lib {prefix}: exists and is not a directory")
    try:
        family = families.get(manifest["spec"]["family"])
    except KeyError:
        raise SpecError(f"{project}/manifest.json: unknown family {manifest['spec']['family']!r}") from None
    if find_nvcc() is None:
        raise BuildError("nvcc not found (put the CUDA toolkit's bin/ on PATH or set CUDACXX)")
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        raise BuildError("cmake and ninja are needed to build (pip install cmake ninja, or your package manager)")
    lock = project_lock(project, log)
    try:
        missing, _, _ = source_problems(project, manifest["variants"])
        plan = write_library(project, manifest, family)
        gone = [v.name for v in plan.variants if v.name in missing]
        if gone:
            raise SpecError(f"the library needs variant(s) whose sources vanished: {'; '.join(missing[k] for k in gone)}")
        _configure(project, archs_override, manifest, log, missing_sources=_missing_files(project, manifest, missing), lib=True)
        target = f"ftgen_{plan.name}"
        output, interrupted = _ninja(project, [target], jobs, progress)
        if interrupted:
            raise Interrupted(f"build of the library of {project} interrupted ({interrupted})")
        built = project / "build" / f"lib{target}.so"
        if not built.is_file():
            raise BuildError(f"the library {target} failed to build:\n{_tail(output, 60)}")
        proc = subprocess.run(["cmake", "--install", str(project / "build"), "--prefix", str(prefix)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"cmake --install to {prefix} failed:\n{_tail(proc.stdout + proc.stderr, 40)}")
    finally:
        lock.release()
    libdir = next((d for d in (prefix / "lib", prefix / "lib64") if (d / f"lib{target}.so").exists()), prefix / "lib")
    return LibraryResult(
        prefix=prefix,
        library=libdir / f"lib{target}.so",
        header=prefix / "include" / f"{target}.h",
        package_dir=libdir / "cmake" / target,
        variants=[v.name for v in plan.variants],
        entry_points=[f"{target}_{g.name}" for g in plan.groups],
        extra=list(plan.extra),
        seconds=time.monotonic() - t0,
    )


def _write_state(state_path: Path, state: dict) -> None:
    state_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_path.with_name(state_path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, state_path)


def _missing_files(project: Path, manifest: dict, missing: dict[str, str]) -> list[str]:
    """The vanished sources of every variant (not only the selected ones)."""
    out = []
    for v in manifest["variants"]:
        if v["kernel"] in missing:
            out.extend(rel for rel in v["sources"] if not (project / rel).is_file())
    return sorted(set(out))


def _read_json(p: Path) -> dict:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def _configure(project: Path, archs: list[str] | None, manifest: dict, log, missing_sources: list[str] = (), lib: bool = False) -> None:
    """Configure once per settings. Sources that vanished are declared GENERATED (in a file
    included after ``project()``), so CMake still configures the variants that are intact."""
    build_dir = project / "build"
    cmd = ["cmake", "-S", str(project), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
    include = project / MISSING_CMAKE
    include.parent.mkdir(parents=True, exist_ok=True)
    body = "# Written by ftgen build: sources missing on disk; their variants are reported, not built.\n"
    if missing_sources:
        body += "set_source_files_properties(\n" + "".join(f'  "${{CMAKE_CURRENT_SOURCE_DIR}}/{m}"\n' for m in missing_sources) + "  PROPERTIES GENERATED TRUE)\n"
    if not include.is_file() or include.read_text() != body:
        include.write_text(body)
    cmd.append(f"-DCMAKE_PROJECT_INCLUDE={include}")
    nvcc = find_nvcc()
    if nvcc:
        cmd.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    from ..codegen.emit import cuda_arch_numbers

    arch_list = archs or manifest["spec"]["arch"]
    cmd.append(f"-DFTGEN_CUDA_ARCHITECTURES={';'.join(cuda_arch_numbers(arch_list))}")
    cmd.extend(libraries.configure_args())
    cmd.append(f"-DFTGEN_BUILD_LIB={'ON' if lib else 'OFF'}")
    cache = build_dir / "CMakeCache.txt"
    stamp = build_dir / "ftgen-configure.txt"
    want = "\n".join(cmd + [f"missing: {m}" for m in missing_sources])
    if cache.is_file() and stamp.is_file() and stamp.read_text() == want:
        return  # configured with the same settings; ninja re-runs cmake itself when CMakeLists changes
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"cmake configure failed in {build_dir}:\n{_tail(proc.stdout + proc.stderr, 40)}")
    stamp.write_text(want)
    if log:
        log(f"configured {build_dir}")


def _ninja(project: Path, targets: list[str], jobs: int | None, progress) -> tuple[str, str | None]:
    """Run the build; (its output, why it was interrupted or None). A KeyboardInterrupt here
    stops ninja and propagates."""
    build_dir = project / "build"
    cmd = ["cmake", "--build", str(build_dir), "--parallel", str(jobs or os.cpu_count() or 2), "--target", *targets, "--", "-k", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace")
    lines: list[str] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            m = _NINJA_PROGRESS.match(line)
            if m and progress:
                progress(int(m.group(1)), int(m.group(2)), line[m.end():].strip())
        proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    output = "".join(lines)
    why = None
    if proc.returncode < 0:
        why = f"the build tool was killed by signal {-proc.returncode}"
    elif proc.returncode in (130, 137, 143) or "interrupted by user" in output:
        why = "the build tool was interrupted"
    elif "Subprocess killed" in output:  # cmake --build, when ninja died of a signal
        why = "the build tool was killed by a signal"
    return output, why


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
