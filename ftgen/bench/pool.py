"""A pool of GPU workers: one thread per GPU, each running executables with ``CUDA_VISIBLE_DEVICES``
set to its GPU's UUID, all drawing from one queue of work items.

A run that fails the way a sick GPU fails (a crash or a signal, a timeout, the executable's
"no usable GPU" exit) is retried, on another GPU where one is left; rows of the failed attempt are
dropped, so every item's rows land exactly once, and each row of the attempt that counts names the
failed ones (``retried``: their GPU and error), so a flaky kernel that passed on a second try shows.
A GPU that says it is unusable, or on which ``gpu_fail_limit`` runs failed that then ran on another
GPU, leaves the pool; its item goes back to the queue. Deterministic failures (verification, bad
arguments, a missing binary) are the variant's and are kept as they are.

Every row gets the name and UUID of the GPU it ran on (``gpu``, ``gpu_uuid``). Finished items can be
appended to a JSON-lines spool under a file lock, so several pools (processes) may share one file.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import NoGpuError, SpecError
from ..progress import LineProgress
from ..smi import query_gpus
from . import run_executable

# error kinds of a run that may be the GPU's fault rather than the variant's: such runs are retried
RETRY_KINDS = ("runtime", "timeout")


@dataclass(frozen=True)
class Gpu:
    """One GPU of this host as nvidia-smi lists it. ``uuid`` None: the process's default device
    (no ``CUDA_VISIBLE_DEVICES`` is set), for runs without ``--gpus``."""

    index: int | None
    uuid: str | None
    name: str
    driver: str | None = None

    @property
    def label(self) -> str:
        return "gpu" if self.index is None else f"gpu{self.index}"

    def info(self) -> dict:
        """The dict the search's cache keys and the provenance read (``name``, ``driver``, ``uuid``)."""
        d = {"name": self.name, "driver": self.driver}
        if self.uuid:
            d["uuid"] = self.uuid
            d["index"] = self.index
        return d

    def env(self) -> dict[str, str] | None:
        if not self.uuid:
            return None
        return {**os.environ, "CUDA_VISIBLE_DEVICES": self.uuid}


def list_gpus() -> list[Gpu]:
    """The GPUs nvidia-smi sees (index, UUID, name, driver); empty when there is none."""
    gpus = []
    for parts in query_gpus(["index", "uuid", "name", "driver_version"], timeout=30):
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        gpus.append(Gpu(int(parts[0]), parts[1], ",".join(parts[2:-1]), parts[-1]))
    return gpus


def check_gpus_text(text: str | None) -> str:
    """``--gpus`` in its form (``all``, or comma-separated indices or UUIDs), checked before any GPU is asked for:
    a malformed value is bad input on any machine."""
    text = (text or "").strip()
    for tok in ([] if text == "all" else [t.strip() for t in text.split(",")]):
        if not (tok.isdigit() and tok.isascii() or tok.startswith(("GPU-", "MIG-"))):
            raise SpecError(f"--gpus: {tok[:40]!r} is not a GPU index or UUID; give 'all' or comma-separated indices, e.g. 0,2")
    return text


def select_gpus(text: str, available: list[Gpu] | None = None) -> list[Gpu]:
    """``--gpus``: ``all`` or comma-separated indices (``0,2``) or UUIDs of this host's GPUs. ``all`` is
    the GPUs ``CUDA_VISIBLE_DEVICES`` names where it is set (a scheduler's share of the host), else every GPU."""
    text = check_gpus_text(text)
    gpus = list_gpus() if available is None else available
    if not gpus:
        raise NoGpuError("--gpus: nvidia-smi lists no GPU on this machine")
    if text == "all":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        if not visible:
            return list(gpus)
        try:
            return select_gpus(visible, gpus)
        except SpecError:
            raise SpecError(f"--gpus all: CUDA_VISIBLE_DEVICES={visible[:80]!r} names GPUs nvidia-smi does not list "
                            "by index or UUID; give --gpus explicitly") from None
    chosen: list[Gpu] = []
    by_index = {str(g.index): g for g in gpus}
    by_uuid = {g.uuid: g for g in gpus}
    for tok in (t.strip() for t in text.split(",")):
        g = by_index.get(tok) or by_uuid.get(tok)
        if g is None:
            raise SpecError(f"--gpus: {tok[:40]!r} is not a GPU of this host; give 'all' or indices from "
                            f"{', '.join(by_index)} (or their UUIDs)")
        if g in chosen:
            raise SpecError(f"--gpus: GPU {tok} is named twice")
        chosen.append(g)
    if not chosen:
        raise SpecError("--gpus: give 'all' or comma-separated GPU indices, e.g. 0,2")
    return chosen


def probe_gpus(probe_exe: Path, gpus_text, verb: str, log: Callable[[str], None]):
    """The GPU a run reports (``gpu_info``: nvidia-smi and the executable's ``--info``, a CUDA context) and the GPUs
    of ``--gpus`` (nvidia-smi again), probed side by side: each is a process start of its own."""
    from concurrent.futures import ThreadPoolExecutor

    from . import gpu_info

    with ThreadPoolExecutor(2) as ex:
        info = ex.submit(gpu_info, probe_exe)
        pool = ex.submit(gpus_option, gpus_text, verb, log)
        return info.result(), pool.result()


def gpus_option(text: str | None, verb: str, log: Callable[[str], None], one_model: str | None = None) -> list[Gpu]:
    """The GPUs of ``--gpus`` (none without it), said through ``log``; ``one_model``: the command compares
    times across them, so they must be of one model."""
    if text is None:
        return []
    gpus = select_gpus(text)
    if one_model:
        same_model(gpus, one_model)
    log(f"{verb}: {len(gpus)} GPU(s): " + ", ".join(f"{g.label} ({g.name}, {g.uuid})" for g in gpus))
    return gpus


def same_model(gpus: list[Gpu], what: str) -> None:
    """A search compares times across GPUs: they must be of one model (and driver)."""
    models = sorted({(g.name, g.driver) for g in gpus})
    if len(models) > 1:
        raise SpecError(f"--gpus: {what} compares times across GPUs, but these differ: "
                        + "; ".join(f"{n} (driver {d})" for n, d in models) + "; choose GPUs of one model")


@dataclass
class WorkItem:
    """One executable run. ``key`` names it uniquely within a pool run."""

    key: str
    exe: Path
    kernel: str
    argv: list[str]
    timeout: float
    meta: dict = field(default_factory=dict)
    failed_on: list[str] = field(default_factory=list)  # labels of the GPUs where an attempt failed
    failures: list[dict] = field(default_factory=list)  # {"gpu", "gpu_uuid", "error"} of each failed attempt, in order
    attempts: int = 0


def suspect(rows: list[dict]) -> str | None:
    """The message of the first row whose failure may be the GPU's, else None."""
    for r in rows:
        err = r.get("error") if not r.get("ok", True) else None
        if isinstance(err, dict) and err.get("kind") in RETRY_KINDS and not str(err.get("message", "")).startswith("bad arguments"):
            return f"{err.get('kind')}: {str(err.get('message', ''))[:200]}"
    return None


class GpuPool:
    """Run work items on a set of GPUs, one item per GPU at a time.

    ``runner(exe, kernel, argv, timeout, env=...)`` runs one executable and returns its rows
    (:func:`ftgen.bench.run_executable`); ``on_done(item, rows, gpu)`` is called once per item, under
    the pool's lock, with the rows that count; ``log`` gets one line per event worth telling."""

    def __init__(self, gpus: list[Gpu], *, runner: Callable | None = None, retries: int = 1, gpu_fail_limit: int = 3,
                 spool: Path | None = None, log: Callable[[str], None] = lambda s: None, progress=None):
        if not gpus:
            raise ValueError("a pool needs at least one GPU")
        self.gpus = list(gpus)
        self.runner = runner or run_executable
        self.retries = retries
        self.gpu_fail_limit = gpu_fail_limit
        self.spool = Path(spool) if spool else None
        self.log = log
        self.progress = progress
        self.dead: dict[str, str] = {}  # GPU label -> why it left the pool
        self.done_by: dict[str, int] = {g.label: 0 for g in self.gpus}
        self.retried = 0
        self._blame: dict[str, int] = {}  # GPU label -> runs that failed there and then ran elsewhere
        self._lock = threading.Lock()

    def run(self, items: list[WorkItem], on_done: Callable[[WorkItem, list[dict], Gpu], None] | None = None) -> dict[str, list[dict]]:
        """Every item's rows by key, in the order of ``items``. Raises NoGpuError when every GPU left
        the pool before the work was done (rows already delivered to ``on_done`` stay delivered)."""
        if len({it.key for it in items}) != len(items):
            raise ValueError("work item keys must be unique")
        results: dict[str, list[dict]] = {}
        todo: queue.Queue = queue.Queue()
        for it in items:
            todo.put(it)
        state = {"left": len(items)}
        if hasattr(self.progress, "start"):
            self.progress.start()  # the ETA counts from the first run, not from the builds before it
        alive = {g.label for g in self.gpus} - set(self.dead)  # a GPU that left in an earlier run stays out
        if items and not alive:
            raise NoGpuError("every GPU has left the pool: " + "; ".join(f"{k}: {v}" for k, v in self.dead.items()))
        wake = threading.Condition(self._lock)

        def finish(item: WorkItem, rows: list[dict], gpu: Gpu, retried: list[dict]) -> None:
            for r in rows:
                r.setdefault("gpu", gpu.name)
                if gpu.uuid:
                    r.setdefault("gpu_uuid", gpu.uuid)
                if retried:  # the attempts before this one failed
                    r.setdefault("retried", [dict(f) for f in retried])
            results[item.key] = rows
            state["left"] -= 1
            self.done_by[gpu.label] += 1
            if self.spool is not None:
                _append_locked(self.spool, rows)
            if on_done is not None:
                on_done(item, rows, gpu)
            if self.progress is not None:
                self.progress(len(items) - state["left"], len(items), f"{item.key} on {gpu.label}", dict(self.done_by))
            wake.notify_all()

        def take(gpu: Gpu) -> WorkItem | None:
            """The next item for this GPU: one that has not failed here if such is queued, else any
            (when no other live GPU could take it). None when the work is done or this GPU is out."""
            with wake:
                while True:
                    if state["left"] == 0 or gpu.label not in alive:
                        return None
                    held = []
                    found = None
                    while True:
                        try:
                            it = todo.get_nowait()
                        except queue.Empty:
                            break
                        others = alive - {gpu.label} - set(it.failed_on)
                        if gpu.label not in it.failed_on or not others:
                            found = it
                            break
                        held.append(it)
                    for it in held:
                        todo.put(it)
                    if found is not None:
                        return found
                    wake.wait(timeout=0.5)

        errors: list[BaseException] = []

        def worker(gpu: Gpu) -> None:
            try:
                work(gpu)
            except BaseException as e:  # on_done or progress failed (a full disk, a bug): stop every worker, raise it below
                with wake:
                    errors.append(e)
                    alive.clear()
                    wake.notify_all()

        def work(gpu: Gpu) -> None:
            while True:
                item = take(gpu)
                if item is None:
                    return
                item.attempts += 1
                unusable = None
                try:
                    rows = self.runner(item.exe, item.kernel, item.argv, item.timeout, env=gpu.env())
                    why = suspect(rows)
                except NoGpuError as e:
                    rows, why, unusable = [], f"no usable GPU: {e.message[:200]}", e.message
                except Exception as e:  # the runner broke: count it as a failed attempt on this GPU
                    rows, why = [], f"{type(e).__name__}: {e}"
                with wake:
                    if why is None:
                        self._blame[gpu.label] = 0
                        for other in set(item.failed_on) - {gpu.label}:
                            # it failed there and ran here: evidence against that GPU
                            self._blame[other] = self._blame.get(other, 0) + 1
                            if self._blame[other] >= self.gpu_fail_limit and other in alive:
                                eject(other, f"{self._blame[other]} run(s) failed there that ran elsewhere")
                        finish(item, rows, gpu, item.failures)
                        continue
                    item.failed_on.append(gpu.label)
                    item.failures.append({"gpu": gpu.label, **({"gpu_uuid": gpu.uuid} if gpu.uuid else {}), "error": why})
                    if unusable is not None and gpu.label in alive:
                        eject(gpu.label, why)
                    if alive and (item.attempts <= self.retries or unusable is not None or gpu.label not in alive):
                        self.retried += 1
                        self.log(f"{gpu.label}: {item.key} failed ({why}); re-queued")
                        todo.put(item)
                        wake.notify_all()
                        continue
                    if not alive:
                        todo.put(item)  # counted as not done below
                        wake.notify_all()
                        return
                    # it failed on every GPU it was given: the variant's failure, kept as rows
                    if not rows:
                        rows = [{"kernel": item.kernel, **item.meta, "ok": False, "error": {"kind": "runtime", "message": why}}]
                    finish(item, rows, gpu, item.failures[:-1])

        def eject(label: str, why: str) -> None:
            alive.discard(label)
            self.dead[label] = why
            g = next(g for g in self.gpus if g.label == label)
            self.log(f"{label} ({g.uuid or g.name}) leaves the pool: {why}")
            wake.notify_all()

        threads = [threading.Thread(target=worker, args=(g,), name=f"ftgen-{g.label}", daemon=True) for g in self.gpus if g.label in alive]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        if state["left"]:
            raise NoGpuError(f"every GPU left the pool with {state['left']} of {len(items)} run(s) not done: "
                             + "; ".join(f"{k}: {v}" for k, v in self.dead.items()))
        return {it.key: results[it.key] for it in items}


def _append_locked(path: Path, rows: list[dict]) -> None:
    """Append rows as JSON lines under a file lock (other pools may write the same file)."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    with FileLock(str(path) + ".lock", timeout=600):
        with open(path, "a") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


class PoolProgress(LineProgress):
    """Progress of a pool run on stderr, per GPU: a rich bar for the whole and one line per GPU on a
    terminal, else plain lines at a modest rate (``[12/200] k on gpu1  (ETA 40s; gpu0 6, gpu1 6)``)."""

    def __init__(self, verb: str, gpus: list[Gpu], min_interval: float = 2.0, tty: bool | None = None):
        super().__init__(verb, min_interval, sys.stderr.isatty() if tty is None else tty)
        self.gpus = gpus
        self._tasks: dict[str, int] = {}

    def make_rich(self):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        return Progress(TextColumn("{task.fields[who]}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TimeRemainingColumn(), TextColumn("{task.description}"), transient=True)

    def add_tasks(self) -> None:
        self._tasks["all"] = self._rich.add_task("", total=None, who=self.verb)
        for g in self.gpus:
            self._tasks[g.label] = self._rich.add_task("", total=None, who=f"  {g.label}")

    def start(self) -> None:
        """A new run of the pool: the clock of its ETA starts now."""
        self.t0 = time.monotonic()
        self.last = 0.0
        if self._rich is not None:
            for task in self._tasks.values():
                self._rich.reset(task, total=None)

    def __call__(self, i: int, n: int, what: str, per_gpu: dict[str, int]) -> None:
        if self._rich is not None:
            self._rich.update(self._tasks["all"], completed=i, total=n)
            for label, done in per_gpu.items():
                if label in self._tasks:
                    # each GPU's bar is scaled to its share so far: done items, and the rest split evenly
                    share = done + (n - i) / max(1, len(per_gpu))
                    self._rich.update(self._tasks[label], completed=done, total=round(share),
                                      description=what[-60:] if what.endswith(label) else None)
            return
        if self.due(i, n):
            per = ", ".join(f"{k} {v}" for k, v in per_gpu.items())
            print(f"[{i}/{n}] {self.verb} {what}  ({self.when(i, n)}; {per})", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Campaigns on a pool
# --------------------------------------------------------------------------------------------


def run_campaign(project: Path, batches, pool: GpuPool, *, shape: str, timeout: float = 900.0, spec_name: str = "",
                 binary: Callable[[Path, str], Path] | None = None, extra: tuple[str, ...] = ()) -> tuple[list[dict], list[dict]]:
    """Run a campaign's executable runs (:func:`ftgen.search.shard.batch_chunks` of its chunks, all or one shard's) on
    the pool's GPUs (``extra``: further executable flags, e.g. ``--site NAME``), ``timeout`` seconds per 250 trials of
    a run. Returns (all rows, one summary per variant) as ``ftgen.faults.campaign`` does: per variant its error rows,
    then its trial rows in chunk order, whatever GPU ran them."""
    from ..faults import summarize
    from ..search.shard import dedup_errors

    binary = binary or (lambda proj, k: proj / "bin" / k)
    items = [WorkItem(b.key, binary(project, b.kernel), b.kernel, b.argv(shape, extra), b.timeout(timeout))
             for b in batches]
    got = pool.run(items)
    all_rows: list[dict] = []
    summaries: list[dict] = []
    for k in dict.fromkeys(b.kernel for b in batches):
        rows: list[dict] = []
        errors: list[dict] = []
        for b in batches:
            if b.kernel == k:
                r, e = b.rows(shape, got[b.key])
                rows += r
                errors += e
        all_rows += dedup_errors(errors) + rows
        summaries.append(summarize(k, rows, spec_name))
    return all_rows, summaries


def campaign_on_gpus(project: Path, variants: list[dict], gpus: list[Gpu], gpu: dict, shard: tuple[int, int] | None, *,
                     trials: int, dists, seed: int, shape: str, timeout: float, spec_name: str,
                     log: Callable[[str], None], extra: tuple[str, ...] = ()) -> tuple[list[dict], list[dict]]:
    """`campaign --gpus / --shard`: the campaign's chunks (one shard's), on ``gpus`` or else the default GPU
    (``gpu``, its info), with per-GPU progress. Returns (rows, summaries) as ``ftgen.faults.campaign``."""
    from ..search.shard import batch_chunks, campaign_chunks, shard_chunks

    chunks = campaign_chunks([v["kernel"] for v in variants], trials=trials, dists=dists, seed=seed)
    if shard:
        chunks = shard_chunks(chunks, *shard)
        log(f"campaign: shard {shard[0]}/{shard[1]}: {len(chunks)} chunk(s) of trials")
    with pool_for(gpus or [Gpu(None, None, gpu.get("name") or "?", gpu.get("driver"))]) as pool:
        out = run_campaign(project, batch_chunks(chunks, len(gpus) or 1), pool, shape=shape, timeout=timeout,
                           spec_name=spec_name, extra=extra)
    if pool.retried or pool.dead:
        log(f"campaign: {pool.retried} run(s) re-queued; GPU(s) left the pool: {', '.join(pool.dead) or 'none'}")
    return out


@contextlib.contextmanager
def pool_for(gpus: list[Gpu], verb: str = "ran"):
    """A pool of ``gpus`` with per-GPU progress on stderr, or None without GPUs."""
    if not gpus:
        yield None
        return
    with PoolProgress(verb, gpus) as prog:
        yield GpuPool(gpus, log=prog.log, progress=prog)


def bench_on_gpus(project: Path, variants: list[dict], family, opts, gpus: list[Gpu]) -> list[dict]:
    """`bench --gpus`: every variant's executable on the pool; the rows in the order of ``variants``. A family's
    references timed outside the executables (:mod:`ftgen.bench.refs`) run right after each, on its GPU."""
    from .refs import RefRunner

    with pool_for(gpus) as pool:
        refs = RefRunner(project, family, opts, pool.log)
        refs.prepare(variants)
        if refs.active:
            by_kernel = {v["kernel"]: v for v in variants}

            def runner(exe, kernel, argv, timeout, env=None):
                rows = run_executable(exe, kernel, argv, timeout, env=env)
                if suspect(rows) is None:  # a run the pool retries elsewhere gets its references there
                    refs.add(by_kernel[kernel], rows, env)
                return rows

            pool.runner = runner
        from . import project_shapes, with_missing_shapes

        spec_shapes = project_shapes(project)
        by_name = {v["kernel"]: v for v in variants}
        plans = {v["kernel"]: opts.plan(family, v, spec_shapes) for v in variants}
        items = [WorkItem(v["kernel"], project / "bin" / v["kernel"], v["kernel"], plans[v["kernel"]][0], opts.timeout)
                 for v in variants if plans[v["kernel"]][0] is not None]
        got = pool.run(items)
        for k, rows in got.items():
            v = by_name[k]
            got[k] = with_missing_shapes(family, k, opts.requested(family, v, spec_shapes), rows)
        return [r for v in variants for r in got.get(v["kernel"], []) + plans[v["kernel"]][1]]
