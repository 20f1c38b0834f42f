"""What the reference drivers of :mod:`ftgen.bench.refs` share: a variant's library source and a C shim around its
family's bench adapter compiled into a shared object and loaded with ctypes, the adapter's device buffers seen by
torch without a copy, and the alternating CUDA-event timing of the benchmark executable.

A driver (``ftgen.families.kmeans.flash_ref``, ``ftgen.families.attention.sdpa_ref``) renders its shim (a Jinja
template with the variant's backend context), builds it here with :func:`build_shared_object`, binds its C functions
with a :class:`Shim` subclass, and times with :func:`alternate`. Nothing here imports torch: the functions that time
take the module as an argument, so the bench hooks stay cheap.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from ..errors import BuildError, FtgenError, SpecError

REFS_DIR = Path("build") / "refs"  # under the project: the shared objects, one folder per variant
# Clock cycles of the pad kernel before each timed segment (about 0.5 ms at 2 GHz): longer than the host takes to
# queue either segment's launches.
PAD_CYCLES = 1 << 20


class DriverReference:
    """The bench hook of a reference timed by a ctypes driver (:mod:`ftgen.bench.refs`): the checks every such driver
    needs (its precisions, its Python modules, nvcc) and its command line. A subclass sets ``name``, ``driver`` (the
    module run with ``python -m``), ``precisions`` and ``modules`` (``{module: why it is needed}``), and may add
    ``extra_args``; nothing here imports torch."""

    name = ""
    driver = ""
    precisions: tuple[str, ...] = ()
    modules: dict[str, str] = {}
    extra_args: tuple[str, ...] = ()

    def precision_refused(self, variant: dict) -> str:
        return f"{self.name} is not timed for {variant.get('precision')} ({variant.get('kernel')})"

    def has_module(self, module: str) -> bool:
        return importable(module)

    def unavailable(self, variant: dict) -> str | None:
        """Why it cannot be timed beside ``variant`` (a manifest entry) on this machine; None when it may be."""
        if variant.get("precision") not in self.precisions:
            return self.precision_refused(variant)
        for module, why in self.modules.items():
            if not self.has_module(module):
                return why
        from ..build import find_nvcc

        if find_nvcc() is None:
            return "nvcc not found: the driver compiles the variant's launcher into a shared object"
        return None

    def prepare(self, project: Path, manifest: dict, variant: dict) -> None:
        """Build the driver's shared object for ``variant`` (a manifest entry) ahead of its run, so that the driver
        finds it built and its time limit covers the timing only: the driver module's ``build_shared_object`` (the
        module is imported, torch is not). Raises what that raises (BuildError, SpecError)."""
        importlib.import_module(self.driver).build_shared_object(project, manifest, variant)

    def command(self, project: Path, variant: dict, shapes: list[str], opts) -> list[str]:
        """The driver's command line for ``shapes`` (the executable's --shapes spelling) under ``opts`` (BenchOptions)."""
        argv = [sys.executable, "-m", self.driver, str(project), variant["kernel"], "--shapes", ",".join(shapes),
                *self.extra_args]
        for flag, val in (("--reps", opts.reps), ("--warmup", opts.warmup), ("--seed", opts.seed), ("--dist", opts.dist)):
            if val is not None:
                argv += [flag, str(val)]
        return argv


def importable(module: str) -> bool:
    """Whether ``module`` can be found (nothing is imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def version(dist: str) -> str | None:
    """The installed version of distribution ``dist``; None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def variant_entry(project: Path, kernel: str, family: str, ref: str) -> tuple[dict, dict]:
    """(manifest, the kernel's entry) of a ``family`` project; SpecError (exit 2) for anything else (``ref`` names the
    reference in the message)."""
    from ..build import load_manifest

    manifest = load_manifest(project)
    if manifest["spec"]["family"] != family:
        raise SpecError(f"{project}: a {manifest['spec']['family'][:40]} project; {ref} is a reference of {family} projects")
    for entry in manifest["variants"]:
        if entry["kernel"] == kernel:
            return manifest, entry
    names = ", ".join(e["kernel"] for e in manifest["variants"][:4])
    raise SpecError(f"{project}: no variant {kernel[:80]!r} (it has {names}{' ...' if len(manifest['variants']) > 4 else ''})")


def driver_parser(module: str, description: str, family: str, shapes_help: str):
    """The command line every reference driver takes (``python -m MODULE PROJECT KERNEL --shapes ...`` and the
    executable's --reps, --warmup, --seed and --dist); a driver adds its own flags to it."""
    import argparse

    p = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    p.add_argument("project", help=f"the generated {family} project (ftgen generate; ftgen build)")
    p.add_argument("kernel", help="the variant's name")
    p.add_argument("--shapes", required=True, help=shapes_help)
    p.add_argument("--reps", type=int, default=None, help="timed repetitions [default: the executable's]")
    p.add_argument("--warmup", type=int, default=None, help="untimed rounds [default: the executable's]")
    p.add_argument("--seed", type=int, default=None, help="the executable's --seed [default: its default]")
    p.add_argument("--dist", default=None, choices=("normal", "uniform", "loguniform", "outliers"),
                   help="the executable's --dist [default: normal]")
    return p


def run_settings(args, shim) -> dict:
    """The driver's flags resolved against the executable's defaults (read from its shim): ``dist`` (the name),
    ``dist_code``, ``seed``, ``reps``, ``warmup``; SpecError for a distribution the executable does not know."""
    name = args.dist or "normal"
    code = shim.dist(name.encode())
    if code < 0:
        raise SpecError(f"--dist: the executable knows no distribution {name!r}")
    return {"dist": name, "dist_code": code, "seed": args.seed if args.seed is not None else shim.default_seed(),
            "reps": args.reps if args.reps is not None else shim.default_reps(),
            "warmup": args.warmup if args.warmup is not None else shim.default_warmup()}


def check_run_args(args) -> None:
    """The driver's --reps, --warmup and --seed (None: the executable's default); SpecError when out of range."""
    if args.reps is not None and args.reps < 1:
        raise SpecError(f"--reps: {args.reps} is less than 1")
    if args.warmup is not None and args.warmup < 0:
        raise SpecError(f"--warmup: {args.warmup} is less than 0")
    if args.seed is not None and not 0 <= args.seed < 2**64:
        raise SpecError(f"--seed: {args.seed} is not in 0..2^64-1")


def driver_main(args, family: str, ref: str, run, unavailable, prepare=None) -> int:
    """A driver's main after its flags: ``prepare()`` (the driver's own flags), the project's variant and shapes (bad
    input: the message, exit 2), then ``run(project, manifest, entry, shapes)``; a failure there is said once per
    reference (``unavailable(reason)``: the rows' refs_missing) and on stderr, never as a traceback."""
    import sys

    try:
        from ..families import get
        from ..spec import parse_shapes

        if prepare is not None:
            prepare()
        check_run_args(args)
        project = Path(args.project)
        manifest, entry = variant_entry(project, args.kernel, family, ref)
        shapes = parse_shapes(get(family), args.shapes)
    except FtgenError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return e.exit_code
    try:
        return run(project, manifest, entry, shapes)
    except FtgenError as e:
        unavailable(e.message[-1500:])
        print(f"error: {e.message}", file=sys.stderr)
        return 0
    except Exception as e:  # noqa: BLE001 - said in one line (the row's refs_missing), not as a traceback
        unavailable(f"the {ref} driver failed: {type(e).__name__}: {str(e)[:500]}")
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


# The C functions at the end of every shim (``{{ shim_common }}`` in its template): the element size, the executable's
# defaults (ftgen_harness.cuh's Args) and its input distributions by name (-1: none such).
SHIM_COMMON = r"""FTGEN_REF_API int ftgen_ref_elem_bytes(void) { return static_cast<int>(sizeof({{ T }})); }
FTGEN_REF_API unsigned long long ftgen_ref_default_seed(void) { return ftgen::Args{}.seed; }
FTGEN_REF_API int ftgen_ref_default_reps(void) { return ftgen::Args{}.reps; }
FTGEN_REF_API int ftgen_ref_default_warmup(void) { return ftgen::Args{}.warmup; }
FTGEN_REF_API int ftgen_ref_dist(const char* name) {
  for (int d = ftgen::kNormal; d <= ftgen::kOutliers; ++d)
    if (!std::strcmp(ftgen::dist_name(d), name)) return d;
  return -1;
}"""


def render_shim(family: str, template: str, entry: dict) -> str:
    """The C shim ``template`` of a variant (a manifest entry), rendered with its backend's template context (and
    ``shim_common``, :data:`SHIM_COMMON`)."""
    from ..codegen.library import variant_from_manifest
    from ..families import get
    from ..templating import TemplateEnv

    v = variant_from_manifest(entry)
    ctx = get(family).backend_of(v).context(v)
    env = TemplateEnv().env
    return env.from_string(template).render(**ctx, shim_common=env.from_string(SHIM_COMMON).render(**ctx))


def built_archs(project: Path, manifest: dict, entry: dict) -> list[str]:
    """The CUDA architectures (CMake spelling: 80, 90a) the executable was built for: the variant's own archs, or where
    they are the spec's, the build's FTGEN_CUDA_ARCHITECTURES (which `ftgen build --arch` sets)."""
    from ..codegen.emit import cuda_arch_numbers

    own = cuda_arch_numbers(entry["archs"])
    if list(entry["archs"]) != list(manifest["spec"]["arch"]):
        return own
    cache = project / "build" / "CMakeCache.txt"
    try:
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("FTGEN_CUDA_ARCHITECTURES:"):
                got = [a for a in line.split("=", 1)[1].strip().split(";") if a]
                return got or own
    except OSError:
        pass
    return own


def include_flags(requires) -> list[str]:
    """``-I<dir>`` of every library a backend requires whose headers live outside the toolkit (CUTLASS's, found as
    ``ftgen build`` finds them); a required library that cannot be found fails the build with nvcc's message."""
    from .. import libraries

    out = []
    for lib in libraries.get(tuple(requires)):
        found = lib.locate() if lib.locate else None
        if found:
            out.append(f"-I{found}")
    return out


def build_shared_object(project: Path, manifest: dict, entry: dict, *, family: str, shim: str,
                        libs: tuple[str, ...] = ()) -> Path:
    """``PROJECT/build/refs/<kernel>/lib<kernel>_ref.so``: the variant's library source and its rendered ``shim``,
    compiled as the project's CMake compiles the variant's kernel library (Release, C++17, -lineinfo,
    --expt-relaxed-constexpr, PIC, the shared CUDA runtime, the executable's architectures), linked with ``libs``
    (``-lcublas``, ...). Rebuilt when a source, a flag or nvcc changes; one build at a time (a file lock)."""
    from filelock import FileLock

    from ..build import find_nvcc, nvcc_version
    from ..codegen.library import variant_from_manifest
    from ..families import get

    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found (put the CUDA toolkit's bin/ on PATH or set CUDACXX)")
    project = project.resolve()
    v = variant_from_manifest(entry)
    backend = get(family).backend_of(v)
    sources = [project / v.name / f"{v.name}{s.suffix}" for s in backend.sources(v) if s.role == "library"]
    headers = sorted((project / "common").glob("*.h*")) + [project / v.name / f"{v.name}.h"]
    gone = [str(p) for p in sources + headers if not p.is_file()]
    if gone:
        raise SpecError(f"{project}: {', '.join(gone[:3])} missing; re-generate the project")
    toolkit = Path(nvcc).resolve().parent.parent
    libdirs = [d for d in (toolkit / "lib64", toolkit / "targets" / "x86_64-linux" / "lib") if d.is_dir()]
    flags = ["-O3", "-DNDEBUG", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr", "-Xcompiler=-fPIC", "-shared",
             "-cudart", "shared", *backend.compile_options,
             *(f"--generate-code=arch=compute_{a},code=[compute_{a},sm_{a}]" for a in built_archs(project, manifest, entry)),
             f"-I{project / 'common'}", f"-I{project / v.name}", *include_flags(backend.requires), *libs,
             *(f"-Xlinker=-rpath,{d}" for d in libdirs)]
    h = hashlib.sha256(json.dumps([flags, nvcc_version(), shim]).encode())
    for p in sources + headers:
        h.update(p.read_bytes())
    key = h.hexdigest()
    out = project / REFS_DIR / v.name
    out.mkdir(parents=True, exist_ok=True)
    so = out / f"lib{v.name}_ref.so"
    stamp = out / "key"
    with FileLock(str(out / ".lock")):
        if so.is_file() and stamp.is_file() and stamp.read_text().strip() == key:
            return so
        (out / "ref_shim.cu").write_text(shim)
        tmp = out / f".lib{v.name}_ref.so.tmp{os.getpid()}"
        cmd = [nvcc, *flags, *map(str, sources), str(out / "ref_shim.cu"), "-o", str(tmp)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildError(f"nvcc did not finish building {so.name}: {e}") from None
        if proc.returncode != 0 or not tmp.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
            raise BuildError(f"nvcc failed to build {so.name} (exit {proc.returncode}):\n{tail}")
        os.replace(tmp, so)
        stamp.write_text(key + "\n")
    return so


class Shim:
    """The C functions ``ftgen_ref_<name>`` of a shared object: those every shim has (``COMMON``: open, close, launch,
    the element size, the executable's defaults, the distribution's code) and the subclass's own ``_SIGS`` (name:
    (argtypes, restype))."""

    COMMON = {
        "open": ([], ctypes.c_void_p),
        "close": ([ctypes.c_void_p], None),
        "launch": ([ctypes.c_void_p, ctypes.c_int], None),
        "elem_bytes": ([], ctypes.c_int),
        "default_seed": ([], ctypes.c_ulonglong),
        "default_reps": ([], ctypes.c_int),
        "default_warmup": ([], ctypes.c_int),
        "dist": ([ctypes.c_char_p], ctypes.c_int),
    }
    _SIGS: dict = {}

    def __init__(self, path: Path):
        self._dll = ctypes.CDLL(str(path))
        for name, (args, res) in {**self.COMMON, **self._SIGS}.items():
            f = getattr(self._dll, "ftgen_ref_" + name)
            f.argtypes, f.restype = args, res
            setattr(self, name, f)


class DeviceArray:
    """A device buffer of the adapter as torch sees it (``__cuda_array_interface__``: no copy, no ownership)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None}


def stats(times: list[float]) -> dict:
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "reps": len(times)}


def pad_kernel(torch, cycles: int = PAD_CYCLES):
    """(the pad before each timed segment, its cycles): ``torch.cuda._sleep``, or nothing (0) where torch lacks it."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return (lambda: None), 0
    return (lambda: sleep(cycles)), cycles


def alternate(torch, seqs, warmup: int, reps: int, pad) -> list[dict]:
    """Time the launch sequences in turn, as the executable's ``time_alternating``: ``warmup`` untimed rounds, then per
    repetition each sequence once between its own CUDA events (after ``pad()``); one ``stats`` per sequence."""
    for i in range(warmup):
        for f in seqs:
            f(i)
    torch.cuda.synchronize()
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in seqs] for _ in range(reps)]
    for i in range(reps):
        for f, (a, b) in zip(seqs, ev[i]):
            pad()
            a.record()
            f(warmup + i)
            b.record()
    torch.cuda.synchronize()
    return [stats([ev[i][j][0].elapsed_time(ev[i][j][1]) for i in range(reps)]) for j in range(len(seqs))]
