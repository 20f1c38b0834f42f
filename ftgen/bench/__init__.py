"""Bench: run each variant's executable in its own process with a timeout, parse its JSON lines.

A crash, a timeout or an illegal address in one variant becomes an error row for that variant
and never poisons the rest.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from ..errors import NoGpuError
from ..families.base import OUT_OF_RANGE

@dataclass
class BenchOptions:
    shapes: list[dict] | None = None  # None: the executable's defaults (the spec's shapes)
    reps: int | None = None
    warmup: int | None = None
    inject: int = 0
    inject_kind: str | None = None
    seed: int | None = None
    dist: str | None = None
    no_ref: bool = False
    refs: str | None = None  # the references timed outside the executable (refs.selected); None: all, or FTGEN_BENCH_REFS
    timeout: float = 600.0
    extra: tuple[str, ...] = ()

    def argv(self, family, variant: dict | None = None) -> list[str]:
        """Flags for one executable. --inject goes only to variants built with fault injection."""
        a: list[str] = []
        if self.shapes:
            a += ["--shapes", ",".join(family.format_shape(s) for s in self.shapes)]
        for flag, val in (("--reps", self.reps), ("--warmup", self.warmup), ("--seed", self.seed)):
            if val is not None:
                a += [flag, str(val)]
        if self.inject and (variant is None or variant.get("protection", {}).get("inject")):
            a += ["--inject", str(self.inject)]
        if self.inject_kind:
            a += ["--inject-kind", self.inject_kind]
        if self.dist:
            a += ["--dist", self.dist]
        if self.no_ref:
            a.append("--no-ref")
        return a + list(self.extra)

    def _split(self, family, variant: dict, spec_shapes: list[dict]):
        """The variant, the shapes asked for (``--shapes``, else the spec's) and which of them it runs
        (``family.runs_shape``)."""
        from ..codegen.library import variant_from_manifest

        shapes = self.shapes or spec_shapes
        v = variant_from_manifest(variant)
        return v, shapes, [family.runs_shape(v, s) for s in shapes]

    def plan(self, family, variant: dict, spec_shapes: list[dict]) -> tuple[list[str] | None, list[dict]]:
        """One variant's flags and the rows of the shapes it does not run (``family.runs_shape`` false: a backend for
        small dims only, a shared-memory bound), which are recorded and not run; flags None: no shape left to run."""
        v, shapes, runs = self._split(family, variant, spec_shapes)
        if all(runs):
            return self.argv(family, variant), []
        inside = [s for s, r in zip(shapes, runs) if r]
        skipped = [family.out_of_range_row(v, s) for s, r in zip(shapes, runs) if not r]
        return (replace(self, shapes=inside).argv(family, variant) if inside else None), skipped

    def requested(self, family, variant: dict, spec_shapes: list[dict]) -> list[dict]:
        """The shapes :meth:`plan`'s flags ask the executable for: ``--shapes`` where they give it, else the
        executable's own defaults (``family.bench_shapes`` of the spec's shapes)."""
        v, shapes, runs = self._split(family, variant, spec_shapes)
        if self.shapes or not all(runs):
            return [s for s, r in zip(shapes, runs) if r]
        return family.bench_shapes(v, spec_shapes)

    def cache_key(self) -> str:
        return json.dumps(
            {
                "reps": self.reps,
                "warmup": self.warmup,
                "inject": self.inject,
                "inject_kind": self.inject_kind,
                "seed": self.seed,
                "dist": self.dist,
                "no_ref": self.no_ref,
                "extra": list(self.extra),
            },
            sort_keys=True,
        )


# --------------------------------------------------------------------------------------------
# GPU probe
# --------------------------------------------------------------------------------------------


def gpu_info(probe_exe: Path | None = None) -> dict:
    """Name, driver, SM count ... of GPU 0, or raise NoGpuError. Uses nvidia-smi, then the
    harness's ``--info`` flag of a built executable (for SM count, L2 and compute capability)."""
    info: dict = {}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader,nounits", "-i", "0"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if out.returncode == 0 and out.stdout.strip():
                name, driver, mem, clock = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")]
                info.update({"name": name, "driver": driver, "memory_mib": _num(mem), "max_sm_clock_mhz": _num(clock)})
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
    if probe_exe is not None and probe_exe.is_file():
        try:
            out = subprocess.run([str(probe_exe), "--info"], capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                for line in out.stdout.splitlines():
                    if line.startswith("{"):
                        d = json.loads(line).get("device", {})
                        info.update({k: d[k] for k in ("sm_count", "cc", "l2_bytes", "runtime_api", "driver_api") if k in d})
                        info.setdefault("name", d.get("name"))
            elif out.returncode == 4 and not info:
                raise NoGpuError(_no_gpu_message())
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
    if not info.get("name"):
        raise NoGpuError(_no_gpu_message())
    return info


def _num(s: str):
    try:
        return int(float(s))
    except ValueError:
        return s


def _no_gpu_message() -> str:
    return (
        "no CUDA GPU on this machine: benchmarking needs one (an H100/H200 or any sm_80+ GPU). "
        "The sources were generated and built; copy the project to a GPU machine and run `ftgen bench` there."
    )


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3' (the results/<gpu>/ folder name)."""
    s = name.lower().replace("nvidia", "").strip()
    return "-".join("".join(c if c.isalnum() else " " for c in s).split())


# --------------------------------------------------------------------------------------------
# Running executables
# --------------------------------------------------------------------------------------------


def run_executable(exe: Path, kernel: str, argv: list[str], timeout: float, meta: dict | None = None,
                   env: dict[str, str] | None = None) -> list[dict]:
    """Run one benchmark executable (in ``env``, else this process's environment); return its rows.
    Failures become rows with ``error``."""
    base = {"kernel": kernel, **(meta or {})}
    if not exe.is_file():
        return [{**base, "ok": False, "error": {"kind": "missing", "message": f"{exe} not built"}}]
    try:
        proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        rows = _parse_rows(e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace"))
        return rows + [{**base, "ok": False, "error": {"kind": "timeout", "message": f"no result within {timeout:g} s"}}]
    except OSError as e:
        return [{**base, "ok": False, "error": {"kind": "runtime", "message": str(e)}}]
    rows = _parse_rows(proc.stdout)
    if proc.returncode == 4:
        raise NoGpuError(_no_gpu_message())
    if proc.returncode == 2:
        return rows + [{**base, "ok": False, "error": {"kind": "runtime", "message": "bad arguments: " + proc.stderr.strip()[-500:]}}]
    if proc.returncode != 0 and not any(not r.get("ok", True) for r in rows):
        sig = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        msg = (proc.stderr.strip()[-800:] or "no message")
        rows.append({**base, "ok": False, "error": {"kind": "runtime", "message": f"{sig}: {msg}"}})
    for r in rows:
        if "skipped" in r and "error" not in r:  # the executable did not run the shape: nothing was verified
            r["ok"] = False
            r["error"] = {"kind": OUT_OF_RANGE, "message": f"skipped by the executable: {r['skipped']}"}
        elif not r.get("ok", True) and "error" not in r:
            r["error"] = {"kind": "verification", "message": "output or fault counters failed verification"}
    return rows


NO_ROW = "no row for this shape (the executable ended without one)"


def with_missing_shapes(family, kernel: str, shapes: list[dict], rows: list[dict]) -> list[dict]:
    """``rows`` of one executable run, and a failing row for each of the requested ``shapes`` that no row names: a run
    that exits 0 and prints nothing for a shape has verified nothing there. A failing row without a shape (a crash, a
    timeout) already stands for the shapes the run did not reach."""
    if any(not r.get("ok", True) and not isinstance(r.get("shape"), dict) for r in rows):
        return rows
    seen = {family.format_shape(r["shape"]) for r in rows if isinstance(r.get("shape"), dict)}
    return rows + [{"kernel": kernel, "shape": dict(s), "ok": False, "error": {"kind": "runtime", "message": NO_ROW}}
                   for s in shapes if family.format_shape(s) not in seen]


def _parse_rows(stdout: str) -> list[dict]:
    rows = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "kernel" in row:
            rows.append(row)
    return rows


def bench_project(
    project: Path,
    variants: Iterable[dict],
    family,
    opts: BenchOptions,
    on_rows: Callable[[str, list[dict]], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """Every variant's executable in turn; a family's references timed outside the executables
    (:mod:`ftgen.bench.refs`) run right after each, and their times join its rows (``refs``)."""
    from .refs import RefRunner

    variants = list(variants)
    refs = RefRunner(project, family, opts, log)
    refs.prepare(variants)
    spec_shapes = project_shapes(project)
    rows: list[dict] = []
    for v in variants:
        exe = project / "bin" / v["kernel"]
        argv, got = opts.plan(family, v, spec_shapes)
        if argv is not None:
            ran = run_executable(exe, v["kernel"], argv, opts.timeout)
            refs.add(v, ran)
            got = with_missing_shapes(family, v["kernel"], opts.requested(family, v, spec_shapes), ran) + got
        rows.extend(got)
        if on_rows:
            on_rows(v["kernel"], got)
    return rows


def project_shapes(project: Path) -> list[dict]:
    """The spec's shapes of a generated project (its executables' defaults)."""
    from ..build import load_manifest

    return list(load_manifest(project)["spec"].get("shapes") or [])


def failure_kind(row: dict) -> str | None:
    """None for a row that passed; else its error's kind. A row the executable skipped (``skipped``: it did not run the
    shape) is not run whatever its ``ok``, as a shape outside the variant's range."""
    if "skipped" in row:
        return OUT_OF_RANGE
    if row.get("ok", False):
        return None
    return (row.get("error") or {}).get("kind", "verification")


def not_run(row: dict) -> bool:
    """A row recorded for a shape outside its variant's range (``Family.out_of_range_row``), or one the executable
    skipped: not run, not a failure."""
    return failure_kind(row) == OUT_OF_RANGE


def write_jsonl(path: Path | str, provenance: dict, rows: list[dict], extra: list[dict] | None = None) -> None:
    """First line {"provenance": ...}, then one row per line (docs/architecture.md, results files)."""
    lines = [json.dumps({"provenance": provenance})] + [json.dumps(r) for r in rows] + [json.dumps(e) for e in (extra or [])]
    text = "\n".join(lines) + "\n"
    if str(path) == "-":
        print(text, end="")
        return
    from ..fileio import atomic_write

    atomic_write(path, text)  # a failed write (a directory there, a full disk) leaves no temporary file behind
