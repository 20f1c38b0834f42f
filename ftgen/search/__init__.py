"""Search: which variant is fastest for each shape.

The space is the spec's expansion, pruned by the family's constraints (rejected points are
recorded with kind ``constraint``); a variant is not built or run at the shapes outside its range
(``library_range``, e.g. a backend for small dims only, and ``shape_fits``, e.g. a shared-memory bound: rows of kind
``out of range``). A :class:`Strategy` proposes batches of variants; each batch
is generated, built in parallel and then run, every candidate in its own process, on one GPU or
on a pool of GPUs (:mod:`ftgen.bench.pool`); a shard evaluates its part of each batch
(:mod:`.shard`). Results (failures too) go to a crash-safe cache keyed by GPU model, source hash,
nvcc version, shape and bench settings, so a repeated search with nothing changed compiles and
runs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import yaml

from ..bench import BenchOptions, failure_kind, run_executable
from ..build import build, find_nvcc, load_manifest, nvcc_version
from ..codegen.emit import TemplateEnv, generate
from ..errors import SpecError
from ..families.base import Variant
from ..paths import cache_dir
from ..spec import Spec

# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


class Strategy(Protocol):
    """Chooses what to evaluate next. ``history`` maps kernel name -> rows measured so far
    (one per shape, failures included). Return the next batch, or an empty list to stop."""

    name: str

    def propose(self, space: list[Variant], history: dict[str, list[dict]], budget: int) -> list[Variant]: ...


class Exhaustive:
    name = "exhaustive"

    def propose(self, space, history, budget):
        return [v for v in space if v.name not in history][:budget]


class RandomSample:
    name = "random"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self._done = False

    def propose(self, space, history, budget):
        if self._done:
            return []
        self._done = True
        todo = [v for v in space if v.name not in history]
        return self.rng.sample(todo, min(budget, len(todo)))


STRATEGIES: dict[str, Callable[[int], Strategy]] = {
    "exhaustive": lambda seed: Exhaustive(),
    "random": lambda seed: RandomSample(seed),
}

# --------------------------------------------------------------------------------------------
# Results cache (append-only JSON lines; a torn last line from a crash is skipped)
# --------------------------------------------------------------------------------------------


class ResultsCache:
    def __init__(self, path: Path | None = None):
        self.path = path or (cache_dir() / "results.jsonl")
        self.entries: dict[str, dict] = {}
        if self.path.is_file():
            for line in self.path.read_text(errors="replace").splitlines():
                try:
                    e = json.loads(line)
                    self.entries[e["key"]] = e["row"]
                except (ValueError, KeyError, TypeError):
                    continue

    @staticmethod
    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:40]

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def put(self, key: str, row: dict) -> None:
        from filelock import FileLock

        self.entries[key] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock", timeout=600), open(self.path, "a") as f:  # searches may share the cache
            f.write(json.dumps({"key": key, "row": row}) + "\n")
            f.flush()
            os.fsync(f.fileno())


# --------------------------------------------------------------------------------------------


@dataclass
class SearchResult:
    rows: list[dict] = field(default_factory=list)  # every measured or failed (variant, shape)
    best: dict[str, dict] = field(default_factory=dict)  # shape string -> best row
    compiled: int = 0
    ran: int = 0
    cache_hits: int = 0
    project: Path | None = None
    evaluated: list[str] = field(default_factory=list)
    gpu: dict = field(default_factory=dict)


def search(
    spec: Spec,
    shapes: list[dict],
    *,
    out_root: Path,
    budget: int | None,
    strategy: Strategy,
    opts: BenchOptions,
    jobs: int | None = None,
    cache: ResultsCache | None = None,
    gpu: dict,
    log: Callable[[str], None] = lambda s: None,
    progress=None,
    pool=None,
    shard: tuple[int, int] | None = None,
) -> SearchResult:
    """``pool`` (a :class:`ftgen.bench.pool.GpuPool`): run the candidates on its GPUs, each row cached
    under the GPU it ran on (``gpu`` is then the GPUs' common model, for the cache look-ups).
    ``shard`` (I, N): evaluate only this shard's points of each batch (:func:`ftgen.search.shard.shard_points`)."""
    fam = spec.family
    cache = cache or ResultsCache()
    res = SearchResult(gpu=gpu)
    nvcc = nvcc_version()
    shape_strs = [fam.format_shape(s) for s in shapes]
    for r in spec.rejected if shard is None or shard[0] == 0 else ():  # one shard records them
        res.rows.append(
            {"kernel": None, "point": r.point, "ok": False, "error": {"kind": "constraint", "message": "; ".join(r.reasons)}}
        )

    history: dict[str, list[dict]] = {}
    space = list(spec.variants)
    budget = len(space) if budget is None else budget
    env = TemplateEnv()
    # the project holds every proposed candidate; its name is the spec's with a -search suffix, and a
    # shard's its own (shards that share an output directory must not rewrite each other's project)
    search_spec = Spec(spec.source, search_project_name(spec.name, shard), fam, spec.arch, spec.description, spec.shapes, [], [], spec.raw)

    while budget > 0:
        batch = strategy.propose(space, history, budget)
        if not batch:
            break
        budget -= len(batch)
        if shard is not None:
            from .shard import shard_points

            mine = shard_points([v.name for v in batch], len(shapes), *shard)
            for v in batch:
                history.setdefault(v.name, [])  # proposed: the other shards measure the rest
            batch = [v for v in batch if mine.get(v.name)]
        else:
            mine = {v.name: list(range(len(shapes))) for v in batch}
        # the shapes outside a variant's range: recorded, never built or run
        outside: dict[str, list[dict]] = {}
        for v in batch:
            out = [i for i in mine[v.name] if not fam.runs_shape(v, shapes[i])]
            if out:
                mine[v.name] = [i for i in mine[v.name] if i not in out]
                outside[v.name] = [fam.out_of_range_row(v, shapes[i]) for i in out]
        search_spec.variants = list({v.name: v for v in search_spec.variants + batch}.values())
        gen = generate(search_spec, out_root, env)
        res.project = gen.out_dir
        manifest = {v["kernel"]: v for v in load_manifest(gen.out_dir)["variants"]}

        # which (variant, shape) pairs are cached?
        need_build: list[str] = []
        pending: dict[str, list[int]] = {}
        for v in batch:
            history[v.name] = list(outside.get(v.name, []))
            if not mine[v.name]:
                continue
            entry = manifest[v.name]
            ckey = ResultsCache.key("compile", entry["source_hash"], nvcc, entry["archs"])
            failed = cache.get(ckey)
            if failed is not None and not failed.get("ok", True):
                history[v.name] += [dict(failed, shape=shapes[i]) for i in mine[v.name]]
                res.cache_hits += len(mine[v.name])
                continue
            rows, missing = [], []
            for i in mine[v.name]:
                s = shape_strs[i]
                row = cache.get(_row_key(gpu, entry, nvcc, s, opts))
                if row is None:
                    missing.append(i)
                else:
                    rows.append(row)
                    res.cache_hits += 1
            history[v.name] += rows
            if missing:
                pending[v.name] = missing
                need_build.append(v.name)

        if need_build:
            pattern = ",".join(need_build)
            br = build(gen.out_dir, jobs=jobs, kernels=pattern, progress=progress)
            res.compiled += len(br.built)
            for k, msg in br.failed.items():
                entry = manifest[k]
                row = {"kernel": k, "ok": False, "error": {"kind": "compile", "message": msg[-2000:]}}
                cache.put(ResultsCache.key("compile", entry["source_hash"], nvcc, entry["archs"]), row)
                history[k] += [dict(row, shape=shapes[i]) for i in mine[k]]
                pending.pop(k, None)

        def record(k: str, idx: list[int], got: list[dict], ran_on: dict) -> None:
            entry = manifest[k]
            by_shape = {}
            for r in got:
                sh = r.get("shape")
                by_shape[fam.format_shape(sh) if isinstance(sh, dict) else None] = r
            for i in idx:
                s = shape_strs[i]
                row = by_shape.get(s) or dict(by_shape.get(None) or {"kernel": k, "ok": False, "error": {"kind": "runtime", "message": "no row for this shape"}})
                row.setdefault("shape", shapes[i])
                if failure_kind(row) != "timeout":  # a timeout may be transient; everything else is kept
                    cache.put(_row_key(ran_on, entry, nvcc, s, opts), row)
                history[k].append(row)

        def argv(k: str, idx: list[int]) -> list[str]:
            return BenchOptions(**{**opts.__dict__, "shapes": [shapes[i] for i in idx]}).argv(fam, manifest[k])

        if pool is not None and pending:
            from ..bench.pool import WorkItem

            items = [WorkItem(k, gen.out_dir / "bin" / k, k, argv(k, idx), opts.timeout) for k, idx in pending.items()]
            pool.run(items, on_done=lambda it, got, g: record(it.key, pending[it.key], got, g.info()))
            res.ran += len(items)
        t_runs = time.monotonic()
        for j, (k, idx) in enumerate(pending.items() if pool is None else (), 1):
            got = run_executable(gen.out_dir / "bin" / k, k, argv(k, idx), opts.timeout)
            res.ran += 1
            left = len(pending) - j
            eta = f"  (ETA {(time.monotonic() - t_runs) / j * left:.0f}s)" if left else ""
            log(f"[{j}/{len(pending)}] ran {k} on {len(idx)} shape(s){eta}")
            record(k, idx, got, gpu)
        res.evaluated.extend(v.name for v in batch)

    for k in res.evaluated:
        res.rows.extend(history.get(k, []))
    res.best = best_per_shape(fam, res.rows, shape_strs)
    return res


def search_project_name(name: str, shard: tuple[int, int] | None = None) -> str:
    return f"{name}-search" + (f"-shard{shard[0]}of{shard[1]}" if shard else "")


def best_per_shape(fam, rows: list[dict], shape_strs: list[str]) -> dict[str, dict]:
    """Shape string -> the verified row with the lowest median time, for the shapes that have one. A row run without
    its reference (``verified: false``, ``--no-ref``) or skipped by the executable is never a winner."""
    best = {}
    for s in shape_strs:
        cands = [r for r in rows if r.get("ok") and r.get("verified") is not False and "skipped" not in r
                 and isinstance(r.get("shape"), dict) and fam.format_shape(r["shape"]) == s and r.get("ms")]
        if cands:
            best[s] = min(cands, key=lambda r: r["ms"]["median"])
    return best


def _row_key(gpu: dict, entry: dict, nvcc, shape: str, opts: BenchOptions) -> str:
    return ResultsCache.key("row", gpu.get("name"), gpu.get("driver"), entry["source_hash"], nvcc, entry["archs"], shape, opts.cache_key())


# --------------------------------------------------------------------------------------------
# Outputs: a spec of the winners and a dispatch header
# --------------------------------------------------------------------------------------------


def winners_spec(spec: Spec, result: SearchResult, shapes: list[dict]) -> str:
    winners: dict[str, dict] = {}
    for row in result.best.values():
        winners.setdefault(row["kernel"], row)
    variants = []
    for k in winners:
        v = spec.variant(k)
        item = {"precision": v.precision, "params": v.param_dict}
        if v.protection.enabled:
            item["protection"] = {key: val for key, val in v.protection.to_dict().items()}
        else:
            item["protection"] = {"scheme": "none"}
        variants.append(item)
    doc = {
        "name": f"{spec.name}_best",
        "family": spec.family.name,
        "description": f"winners of `ftgen search {spec.source}` on {result.gpu.get('name', '?')}",
        "arch": list(spec.arch),
        "variants": variants,
        "shapes": shapes,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def dispatch_header(spec: Spec, result: SearchResult, env: TemplateEnv | None = None) -> str:
    env = env or TemplateEnv()
    fam = spec.family
    kernels: list[str] = []
    table = []
    for s, row in result.best.items():
        k = row["kernel"]
        if k not in kernels:
            kernels.append(k)
        table.append({"shape": row["shape"], "index": kernels.index(k), "kernel": k, "ms": row["ms"]["median"]})
    if not kernels:
        raise SpecError("no shape has a verified winner: nothing to dispatch to")
    sig = fam.launcher_signature(spec.variant(kernels[0]))
    guard = "FTGEN_" + "".join(c if c.isalnum() else "_" for c in spec.name).upper() + "_DISPATCH_H"
    return env.render(
        "common/dispatch.h.j2",
        {
            "spec": spec,
            "fname": "".join(c if c.isalnum() else "_" for c in spec.name),
            "guard": guard,
            "kernels": kernels,
            "table": table,
            "sig": sig,
            "keys": fam.shape_keys,
            "family_header": f"ftgen_{fam.name}.h",
            "gpu": result.gpu.get("name", "?"),
        },
    )


def check_dispatch_compiles(header: Path, project: Path) -> tuple[bool, str]:
    """Compile a translation unit that includes the header and calls the dispatcher."""
    nvcc = find_nvcc()
    if nvcc is None:
        return False, "nvcc not found"
    tu = header.with_name(header.stem + "_check.cu")
    tu.write_text(f'#include "{header.name}"\nint ftgen_dispatch_check_unused() {{ return 0; }}\n')
    cmd = [nvcc, "-std=c++17", "-c", str(tu), "-o", os.devnull, f"-I{header.parent}", f"-I{project}", f"-I{project / 'common'}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    tu.unlink(missing_ok=True)
    return p.returncode == 0, (p.stdout + p.stderr)[-3000:]
