"""References timed outside the benchmark executable, merged into its rows (``refs``).

A family may list such references as ``bench_refs``: objects with ``name``, ``unavailable(variant) -> reason | None``
(cheap checks: nothing is imported or run) and ``command(project, variant, shapes, opts) -> argv`` (a driver process;
``variant`` is the manifest entry, ``shapes`` the executable's --shapes spelling, ``opts`` the BenchOptions). After a
variant's executable has run, `ftgen bench` runs each reference's driver on the same GPU (the same environment, so the
same ``CUDA_VISIBLE_DEVICES``) for the shapes the executable timed. The driver times the variant and the reference
alternately in its own process, on the executable's data, and prints one JSON line per shape::

    {"ref": NAME, "shape": {...}, "ms": 1.75, "kernel_ms": 4.05, ...}      its medians (ms), and its own detail
    {"ref": NAME, "shape": {...}, "unavailable": "why"}                    no time for that shape (detail may follow)
    {"ref": NAME, "unavailable": "why"}                                    no time at all

Every timed row of the variant then carries, beside the executable's ``ref`` (its in-process vendor reference):

* ``refs``: ``{name: ms}``, the executable's ``ref.lib`` (and ``alt_ref.lib``, a second in-process reference where
  the family has one) and every reference timed at the row's shape;
* ``speedup_vs_refs``: ``{name: reference ms / kernel ms}``, each the ratio of one alternated pairing (for the
  executable's reference its ``speedup_vs_ref``; for a driver's, the kernel time that driver measured beside it);
* ``ref_timings``: ``{name: the driver's line}`` (min, max, reps, the kernel's time in that pairing, versions, ...);
* ``refs_missing``: ``{name: why}`` for each reference of the family without a time for the row.

A reference that could not be timed is never given a number. ``--no-ref`` runs none and adds nothing; `ftgen bench
--refs` (or else ``FTGEN_BENCH_REFS``; ``none``, or the names to run, comma-separated) limits which run; rows of a run
with ``--inject`` get no driver's times (the executable times the kernel with its faults, a driver without).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

ENV = "FTGEN_BENCH_REFS"
_PKG_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the ftgen package (for the drivers' -m)


def family_refs(family) -> tuple:
    """The references a family times outside its executables (``bench_refs``; none by default)."""
    return tuple(getattr(family, "bench_refs", ()) or ())


def finite_ms(value) -> bool:
    """A time the merge accepts: a finite positive number of milliseconds."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def timed(row: dict) -> bool:
    """A row the executable verified and timed (no error, no skip)."""
    return (isinstance(row.get("ms"), dict) and isinstance(row.get("shape"), dict) and row.get("ok") is True
            and "error" not in row and "skipped" not in row)


def selected(name: str, chosen: str | None = None) -> str | None:
    """Why reference ``name`` is left out: by ``chosen`` (`ftgen bench --refs`: ``none``, or the names to run,
    comma-separated), else by ``FTGEN_BENCH_REFS`` (the same spelling); None when it runs."""
    text, where = (chosen, "--refs") if chosen is not None else (os.environ.get(ENV), ENV)
    if text is None:
        return None
    names = {t.strip() for t in text.split(",") if t.strip()}
    if name in names:
        return None
    return f"not run ({where}={text.strip()[:80] or 'none'})"


def check_chosen(family, text: str) -> None:
    """`ftgen bench --refs`: ``none`` or names of the family's references; SpecError (exit 2) otherwise."""
    from ..errors import SpecError

    known = [r.name for r in family_refs(family)]
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise SpecError(f"--refs: name the references to time ({', '.join(known) or 'this family has none'}), or none")
    for n in names:
        if n != "none" and n not in known:
            raise SpecError(f"--refs: {n[:60]!r} is not a reference of this family (it has "
                            f"{', '.join(known) or 'none'}; or none)")


class RefRunner:
    """Runs a family's references beside each variant's executable and merges their times into its rows.

    ``add(variant, rows, env)`` is called once per executable run (from several threads under a GPU pool); ``log``
    gets each reason a reference is not timed once per run, and one line per variant where drivers ran."""

    def __init__(self, project: Path, family, opts, log: Callable[[str], None] | None = None):
        self.project = Path(project)
        self.family = family
        self.opts = opts
        self.refs = family_refs(family)
        self.log = log or (lambda m: print(m, file=sys.stderr))
        self._said: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return bool(self.refs) and not self.opts.no_ref

    def _say(self, name: str, why: str) -> None:
        with self._lock:
            if (name, why) in self._said:
                return
            self._said.add((name, why))
        self.log(f"bench: {name} not timed: {why}; rows carry refs without it (refs_missing says why)")

    def why_not(self, ref, variant: dict) -> str | None:
        why = selected(ref.name, self.opts.refs)
        if why is None and self.opts.inject:
            why = "not timed in a run with --inject (the executable times the kernel with its faults, the driver without)"
        if why is None:
            why = ref.unavailable(variant)
        return why

    def prepare(self, variants: list[dict]) -> None:
        """Build what the drivers will build (a reference's ``prepare``: ctypes drivers compile the variant into a
        shared object, about a minute of nvcc for a CUTLASS variant) for every variant in parallel, one nvcc a core,
        before the executables run: a driver would build its own inside its time limit, one variant after another.
        One build per driver module and variant (the references of one module share it); a build that fails is left to
        the driver, which meets the same error and says it in the rows."""
        if not self.active:
            return
        jobs: dict[tuple[str, str], tuple] = {}
        for v in variants:
            for ref in self.refs:
                if hasattr(ref, "prepare") and self.why_not(ref, v) is None:
                    jobs.setdefault((getattr(ref, "driver", ref.name), v["kernel"]), (ref, v))
        if not jobs:
            return
        from concurrent.futures import ThreadPoolExecutor

        from ..build import load_manifest
        from ..errors import FtgenError

        manifest = load_manifest(self.project)
        workers = min(len(jobs), os.cpu_count() or 1)
        self.log(f"bench: building the references' shared objects of {len(jobs)} variant(s), {workers} at a time")

        def build(job) -> None:
            ref, v = job
            try:
                ref.prepare(self.project, manifest, v)
            except (FtgenError, OSError):
                pass  # the driver meets it again and says why in the rows

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(build, jobs.values()))

    def add(self, variant: dict, rows: list[dict], env: dict[str, str] | None = None) -> None:
        """Merge the references of ``variant`` into its timed ``rows`` (in place)."""
        if not self.active:
            return
        rows_t = [r for r in rows if timed(r)]
        if not rows_t:
            return
        shapes = list(dict.fromkeys(self.family.format_shape(r["shape"]) for r in rows_t))
        lines: dict[str, dict[str, dict]] = {}
        reasons: dict[str, str] = {}
        for ref in self.refs:
            why = self.why_not(ref, variant)
            n = 0
            if why is None:
                got, why = self.drive(ref, variant, shapes, env)
                lines[ref.name] = {self.family.format_shape(g["shape"]): g for g in got}
                n = sum(1 for g in got if finite_ms(g.get("ms")) and not g.get("unavailable"))
                if got:
                    self.log(f"bench: {ref.name} timed alternately with {variant['kernel']} at {n} of {len(shapes)} "
                             f"shape(s){'; ' + why if why else ''}")
            if why is not None:
                reasons[ref.name] = why
                if not n:
                    self._say(ref.name, why)
        for r in rows_t:
            key = self.family.format_shape(r["shape"])
            merge(r, [ref.name for ref in self.refs], {name: got.get(key) for name, got in lines.items()}, reasons)

    def drive(self, ref, variant: dict, shapes: list[str], env: dict[str, str] | None) -> tuple[list[dict], str | None]:
        """Run one reference's driver: (its per-shape lines, why it stopped short or gave none; None when it did not)."""
        argv = ref.command(self.project, variant, shapes, self.opts)
        env = dict(env if env is not None else os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PKG_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.opts.timeout, env=env)
        except subprocess.TimeoutExpired:
            return [], f"its driver gave no result within {self.opts.timeout:g} s"
        except OSError as e:
            return [], f"its driver could not start: {e}"
        got: list[dict] = []
        why = None
        for line in (proc.stdout or "").splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if not isinstance(d, dict):
                continue
            if d.get("ref") == ref.name and isinstance(d.get("shape"), dict):
                got.append(d)
            elif d.get("ref") == ref.name and d.get("unavailable"):
                why = str(d["unavailable"])
            elif isinstance(d.get("error"), dict) and why is None:  # a C++ failure line of the harness
                why = f"its driver failed: {d['error'].get('message', '?')}"
        if why is None and proc.returncode != 0:
            tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])[-600:] or "no message"
            why = f"its driver failed (exit code {proc.returncode}): {tail}"
        if why is None and not got:
            why = "its driver printed no result"
        return got, why


def merge(row: dict, names: list[str], lines: dict[str, dict | None], reasons: dict[str, str]) -> None:
    """Add ``refs``, ``speedup_vs_refs``, ``ref_timings`` and ``refs_missing`` to one timed row (before its ``ok``):
    ``lines`` holds each driver's line for the row's shape (None: it printed none), ``reasons`` why a driver did not
    run or stopped short (said for the shapes it gave no line)."""
    refs: dict[str, float] = {}
    speed: dict[str, float] = {}
    timings: dict[str, dict] = {}
    missing: dict[str, str] = {}
    for key, ratio in (("ref", "speedup_vs_ref"), ("alt_ref", "speedup_vs_alt_ref")):  # the executable's own
        own = row.get(key)
        if isinstance(own, dict) and finite_ms(own.get("ms")):
            lib = str(own.get("lib") or key)
            refs[lib] = own["ms"]
            if finite_ms(row.get(ratio)):
                speed[lib] = row[ratio]
    for name in names:
        line = lines.get(name)
        if line is None:
            missing[name] = reasons.get(name, "its driver printed no result for this shape")
            continue
        detail = {k: v for k, v in line.items() if k not in ("ref", "shape", "unavailable")}
        if detail:
            timings[name] = detail
        if line.get("unavailable"):
            missing[name] = str(line["unavailable"])
        elif not (finite_ms(line.get("ms")) and finite_ms(line.get("kernel_ms"))):
            missing[name] = "its driver gave no valid time for this shape"
        else:
            refs[name] = line["ms"]
            speed[name] = line["ms"] / line["kernel_ms"]
    ok = row.pop("ok")
    row["refs"] = refs
    row["speedup_vs_refs"] = speed
    if timings:
        row["ref_timings"] = timings
    if missing:
        row["refs_missing"] = missing
    row["ok"] = ok
