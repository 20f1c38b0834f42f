"""Shared pytest fixtures and options.

Test layers (DESIGN.md): unit, golden, compile (nvcc, no GPU), cpu-model, gpu (marked `gpu`,
skipped without a GPU). `pytest --update-golden` (or FTGEN_UPDATE_GOLDEN=1) rewrites golden files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# The NumPy models' float64 matrix products go through OpenBLAS, whose kernels (picked per CPU) sum in different orders;
# the tests that replay a recorded GPU run's rounding (a fault 1.26x its tolerance, a recomputed dot product) need one
# order everywhere: the AVX2 kernels (read when numpy loads, so before any test module imports it; an explicit setting
# wins).
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
# the tuning file is h100's on any machine (not the one of the GPU nvidia-smi finds: ftgen.tuning.choice), so names and
# golden files do not depend on the GPU the tests run on
os.environ.setdefault("FTGEN_TUNING_DETECT", "0")

import pytest  # noqa: E402

from ftgen.build import cuda_tool_dirs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# cuobjdump and nvdisasm from the dev extra's NVIDIA wheels where the CUDA toolkit has none: the SASS tests find them on
# PATH (and cuobjdump finds nvdisasm there)
os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", "")] + cuda_tool_dirs())


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ from the current templates")


def pytest_configure(config):
    if config.getoption("--update-golden"):
        os.environ["FTGEN_UPDATE_GOLDEN"] = "1"
    # xdist (3.7 on) hands out the units of --dist loadscope and loadfile those with the most tests first unless told
    # otherwise; the order that pytest_collection_modifyitems gives them is the one meant here
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _xdist_groups(config, items) -> None:
    """Under `--dist loadgroup` (the GPU tests' script) every test goes with its module, as under loadfile, except in a
    module that names its build fixtures (`BUILD_FIXTURES`, module-scoped, each a library built for the module): there a
    test goes with the first of them it uses, so that the libraries build on different workers at once."""
    if not (getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", None) == "loadgroup"):
        return
    for item in items:
        group = item.nodeid.split("::")[0]
        used = [name for name in getattr(getattr(item, "module", None), "BUILD_FIXTURES", ())
                if name in getattr(item, "fixturenames", ())]
        item.add_marker(pytest.mark.xdist_group(group + (f"[{used[0]}]" if used else "")))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups
def pytest_collection_modifyitems(config, items):
    _xdist_groups(config, items)
    # The modules with nvcc tests first (each keeps its order), the others after them: under xdist's loadfile (`make
    # test`) the workers start on the long compiles and the many short modules fill in at the end, so that no worker
    # idles while another finishes a long compile.
    compiles = {item.nodeid.split("::")[0] for item in items if "compile" in item.keywords}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in compiles)
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU on this machine")
    has_gpu = _has_gpu()
    has_nvcc = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()
    skip_nvcc = pytest.mark.skip(reason="nvcc not found")
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)
        if "compile" in item.keywords and not has_nvcc:
            item.add_marker(skip_nvcc)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never touch the user's ~/.cache/ftgen from tests."""
    monkeypatch.setenv("FTGEN_CACHE_DIR", str(tmp_path_factory.mktemp("ftgen-cache")))


def golden_check(path: Path, text: str) -> None:
    """Compare `text` with the golden file, or rewrite it under --update-golden."""
    if os.environ.get("FTGEN_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.is_file(), f"golden file {path} missing; run pytest --update-golden"
    expected = path.read_text()
    assert text == expected, f"emitted source differs from {path}; if intended, run pytest --update-golden"


def golden_dir_check(root: Path, texts: dict[str, str]) -> None:
    """golden_check for every file of `texts` (name -> text) in `root`, and no golden file that
    nothing emits any more (--update-golden removes those)."""
    for name, text in sorted(texts.items()):
        golden_check(root / name, text)
    stale = sorted(p.name for p in root.glob("*") if p.is_file() and p.name not in texts)
    if os.environ.get("FTGEN_UPDATE_GOLDEN") == "1":
        for name in stale:
            (root / name).unlink()
        return
    assert not stale, f"golden files that nothing emits any more in {root}: {stale}; run pytest --update-golden"


def without_copied_headers(files: dict[str, str]) -> dict[str, str]:
    """The emitted files (relative path -> text) without the project's ``common/`` headers, each asserted to be a
    verbatim copy of its template (``templates/common/`` or a family's folder): the generator copies them, so a golden
    file of one would only repeat the template."""
    for rel, text in files.items():
        if rel.startswith("common/"):
            name = rel.split("/", 1)[1]
            sources = [p for p in (REPO / "templates").glob(f"*/{name}") if p.is_file()]
            assert len(sources) == 1, f"{rel}: {len(sources)} templates of that name: {sources}"
            assert text == sources[0].read_text(), f"{rel} is not a verbatim copy of {sources[0]}"
    return {rel: text for rel, text in files.items() if not rel.startswith("common/")}


def draw(rng, shape, dist: str, decades: float = 3.0):
    """Random test data of one of the campaign distributions (normal, uniform, loguniform: 10^-decades .. 10^decades,
    random sign; the benches draw fp16 over 1.5 decades each way)."""
    if dist == "uniform":
        return rng.uniform(-1, 1, shape)
    if dist == "loguniform":
        return rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-decades, decades, shape)
    return rng.standard_normal(shape)


def planted_bug_caught(rules: Path, old: str, new: str, build, checks, tmp_path: Path) -> list[str]:
    """Plant one bug (old -> new) in a copy of the header `rules`, build it with `build(dir, out)` and run the
    behavioural `checks` on it; the names of the checks that caught it."""
    text = rules.read_text()
    assert text.count(old) == 1, f"the planted bug no longer applies to {rules.name}: update it to the header"
    (tmp_path / rules.name).write_text(text.replace(old, new))
    mutant = build(tmp_path, tmp_path)
    caught = []
    for check in checks:
        try:
            check(mutant)
        except AssertionError:
            caught.append(check.__name__)
    return caught


def build_shim(shim: str, include_dir: Path, out: Path, sig: dict):
    """Compile a C++ shim (extern "C" wrappers of host+device functions) against the headers in `include_dir` into a
    shared library in `out`; the loaded library with the ctypes signatures `sig` (name -> (restype, argtypes))."""
    import ctypes

    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, lib_path = out / "shim.cpp", out / "libshim.so"
    src.write_text(shim)
    cmd = [cxx, "-std=c++17", "-O2", "-ffp-contract=off", "-shared", "-fPIC", f"-I{include_dir}", str(src), "-o", str(lib_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lib = ctypes.CDLL(str(lib_path))
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def fake_bench_executables(out: Path, variants: list[dict], rows_of) -> None:
    """``out/bin/<kernel>``: scripts standing in for a project's benchmark executables; the i-th prints the JSON rows
    ``rows_of(i, kernel)``."""
    import stat
    import sys

    (out / "bin").mkdir()
    for i, v in enumerate(variants):
        exe = out / "bin" / v["kernel"]
        rows = rows_of(i, v["kernel"])
        exe.write_text(f"#!{sys.executable}\nimport json\n" + "".join(f"print(json.dumps({r!r}))\n" for r in rows))
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


class RecordedDriver:
    """A bench reference (``ftgen.bench.ctypes_driver.DriverReference``, put after this class) with every check passed
    and its driver replaced by a script that prints ``lines`` (JSON objects, or plain text), writes ``stderr`` and exits
    with ``code``; each run's argv, CUDA_VISIBLE_DEVICES and PYTHONPATH are appended to a log (:meth:`calls`); its
    ``prepare`` (the shared object's build ahead of the run) only records the variants (``prepared``)."""

    def record(self, folder: Path, lines, code: int = 0, stderr: str = "") -> None:
        import json
        import textwrap

        folder.mkdir(parents=True, exist_ok=True)
        self.script = folder / "driver.py"
        self.log = folder / "driver_calls.jsonl"
        texts = [x if isinstance(x, str) else json.dumps(x) for x in lines]
        self.script.write_text(textwrap.dedent(f"""
            import json, os, sys
            with open({str(self.log)!r}, "a") as f:
                f.write(json.dumps({{"argv": sys.argv[1:], "dev": os.environ.get("CUDA_VISIBLE_DEVICES"),
                                     "pythonpath": os.environ.get("PYTHONPATH", "")}}) + "\\n")
            for line in {texts!r}:
                print(line)
            sys.stderr.write({stderr!r})
            sys.exit({code})
        """))

    def unavailable(self, variant):
        return None

    def prepare(self, project, manifest, variant):
        self.prepared = getattr(self, "prepared", []) + [variant["kernel"]]

    def command(self, project, variant, shapes, opts):
        import sys

        return [sys.executable, str(self.script)] + super().command(project, variant, shapes, opts)[3:]

    def calls(self) -> list[dict]:
        import json

        return [json.loads(x) for x in self.log.read_text().splitlines()] if self.log.is_file() else []


def gemm_spec_text(body: str, name: str = "t", arch: str = "[sm_90a]") -> str:
    """A gemm spec: the header (name, family, arch) and ``body`` (YAML, dedented)."""
    import textwrap

    return f"name: {name}\nfamily: gemm\narch: {arch}\n" + textwrap.dedent(body)


def load_gemm_spec(body: str, **kw):
    """The loaded spec of :func:`gemm_spec_text`."""
    from ftgen.spec import load_spec_text

    return load_spec_text(gemm_spec_text(body, **kw), "s.yaml")


def ptxas_entries(stderr: str, arch: str = "sm_90a") -> dict[str, str]:
    """ptxas -v's report per entry function of `arch` (mangled name: its lines joined), from nvcc's stderr (which may hold
    the reports of other archs too)."""
    import re

    entries: dict[str, str] = {}
    cur = None
    for line in stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)' for '(\w+)'", line)
        if m:
            cur = m.group(1) if m.group(2) == arch else None
            if cur:
                entries[cur] = ""
        elif cur:
            entries[cur] += line + " "
    return entries


def compile_sm90a(src, includes, out, *, opt: str = "-O3", link: bool = False, device_only: bool = False,
                  options=()) -> dict[str, str]:
    """nvcc of `src` for sm_90a with CUTLASS's headers (-DNDEBUG, ptxas -v, the backend's `options`; `-c` unless `link`),
    asserted to succeed; ptxas' report per entry function. `device_only`: `-cubin`, the device code alone (nvcc's
    device pass, which parses and instantiates the host code too, and ptxas; no host compiler run), for a test that reads
    ptxas' report of a translation unit that another test builds in full for the same backend and precision. Skips the
    test without nvcc or the nvidia-cutlass wheel."""
    import shutil
    import subprocess

    from ftgen.paths import cutlass_include_dir

    nvcc, inc = shutil.which("nvcc"), cutlass_include_dir()
    if nvcc is None or inc is None:
        pytest.skip("nvcc and the CUTLASS headers are needed")
    cmd = [nvcc, "-std=c++17", opt, "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode", "arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
           *options, *(f"-I{d}" for d in includes), f"-I{inc}", *(["-cubin"] if device_only else [] if link else ["-c"]),
           str(src), "-o", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-4000:]
    return ptxas_entries(p.stderr)


def attention_host_program(tmp_path: Path, name: str, source: str) -> Path:
    """A host program over the attention templates (their host-callable steps) compiled with nvcc; skips without
    nvcc. Returns the executable."""
    from ftgen.build import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    src, exe = tmp_path / f"{name}.cu", tmp_path / name
    src.write_text(source)
    r = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "attention"), "-I", str(REPO / "templates" / "common"),
                        str(src), "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def gpu_attention_bench(tmp_path: Path, name: str, variants: str, bench_args: list[str], env_extra: dict | None = None
                        ) -> list[dict]:
    """On a GPU: an attention spec of ``variants`` (YAML lines under ``variants:``) for FTGEN_GPU_ARCH (default sm_90)
    at 2x8x1024, generated, built and benched (``ftgen bench`` with ``bench_args``) in subprocesses; its rows."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    from ftgen.codegen.emit import generate
    from ftgen.spec import load_spec_text

    arch = os.environ.get("FTGEN_GPU_ARCH", "sm_90")
    spec = f"name: {name}\nfamily: attention\narch: [{arch}]\nvariants:\n{textwrap.indent(textwrap.dedent(variants).strip(), '  ')}\n" \
           "shapes:\n  - {batch: 2, heads: 8, seq: 1024}\n"
    out = generate(load_spec_text(spec, f"{name}.yaml"), tmp_path).out_dir
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(env_extra or {})}
    b = subprocess.run([sys.executable, "-m", "ftgen.cli", "build", str(out)], cwd=REPO, capture_output=True, text=True, env=env)
    assert b.returncode == 0, b.stderr[-2000:]
    js = tmp_path / "bench.jsonl"
    p = subprocess.run([sys.executable, "-m", "ftgen.cli", "bench", str(out), *bench_args, "--json", str(js)], cwd=REPO,
                       capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads(x) for x in js.read_text().splitlines()[1:]]
