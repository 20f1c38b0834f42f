"""Sharding a search or a campaign over independent jobs, and merging their results files.

A shard ``I/N`` (0 <= I < N) takes a deterministic part of the work, the same in every job that
expands the same spec with the same flags, so N jobs on N hosts (a Slurm job array, Ray tasks)
each write their own results file:

- a search: the points (variant x shape) of each proposed batch, listed variant by variant, cut
  into N contiguous blocks of nearly equal size (a variant's executable is built by one or two
  shards, never by all). The strategy must propose without looking at measurements (``exhaustive``
  and ``random`` do): every shard proposes the same batch.
- a campaign: its chunks of trials (variant x distribution x clean/faulty x chunk of ``chunk``
  trials, each with its own seed), cut into N contiguous blocks of nearly equal size. A chunk's seed
  does not depend on the shard, so the trials are the same whether run in one job or in N.

A campaign's executable runs take several chunks of one variant each (:func:`batch_chunks`):
starting a process costs about as much as a thousand trials at a small shape, so fewer, longer runs,
enough of them to keep every GPU busy.

``ftgen search SPEC --from a.jsonl b.jsonl ...`` merges the shards' files (:func:`merge_search`)
without compiling or running anything.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SpecError


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard I/N`` -> (I, N)."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except (ValueError, AttributeError):
        i = n = -1
    if n < 1 or not 0 <= i < n:
        raise SpecError(f"--shard: {str(text)[:40]!r} is not I/N with 0 <= I < N (e.g. 0/4; in a Slurm array "
                        "--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with --array=0-(N-1))")
    return i, n


def shard_points(names: list[str], n_shapes: int, i: int, n: int) -> dict[str, list[int]]:
    """Shard I of N of the points (variant, shape index) of ``names`` x ``n_shapes`` shapes: variant
    name -> its shape indices in this shard (variants with none are left out)."""
    total = len(names) * n_shapes
    lo, hi = total * i // n, total * (i + 1) // n
    out: dict[str, list[int]] = {}
    for p in range(lo, hi):
        out.setdefault(names[p // n_shapes], []).append(p % n_shapes)
    return out


# --------------------------------------------------------------------------------------------
# Campaign chunks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """``trials`` trials of one variant, distribution and clean/faulty run, from trial ``start``."""

    kernel: str
    dist: str
    inject: int
    start: int
    trials: int
    seed: int  # the chunk's own seed

    @property
    def key(self) -> str:
        return f"{self.kernel}/{self.dist}/{'faulty' if self.inject else 'clean'}/{self.start}"

    def argv(self, shape: str, extra: tuple[str, ...] = ()) -> list[str]:
        return ["--trials", str(self.trials), "--inject", str(self.inject), "--shapes", shape, "--dist", self.dist,
                "--seed", str(self.seed), "--no-timing", *extra]


CHUNK_TRIALS = 250  # trials of a campaign chunk: the unit of sharding and of an executable run's timeout


def campaign_chunks(kernels: list[str], *, trials: int, dists, seed: int, chunk: int = CHUNK_TRIALS) -> list[Chunk]:
    """Every chunk of a campaign, in the order ``ftgen.faults.campaign`` runs them and with the seeds it
    gives them: run (dist i, inject) of a variant starts at seed + (2 i + inject) trials, and its chunk
    from trial ``done`` at that plus ``done``."""
    out = []
    for k in kernels:
        for i, d in enumerate(dists):
            for inject in (0, 1):
                base = seed + (2 * i + inject) * trials
                for done in range(0, trials, chunk):
                    out.append(Chunk(k, d, inject, done, min(chunk, trials - done), base + done))
    return out


def check_campaign_shards(shard_text: str, n: int, kernels: list[str], dists: list[str], trials: int) -> None:
    """``--shard I/N`` of a campaign: at most as many shards as it has chunks, so that none is empty."""
    chunks = len(campaign_chunks(kernels, trials=trials, dists=dists, seed=0))
    if n > chunks:
        raise SpecError(f"--shard {shard_text}: the campaign has {chunks} chunk(s) of at most {CHUNK_TRIALS} trials "
                        "(variants x distributions x clean/faulty); give at most that many shards")


def shard_chunks(chunks: list[Chunk], i: int, n: int) -> list[Chunk]:
    """Shard I of N: a contiguous block of the chunks, so that a shard's chunks of one run can merge."""
    return chunks[len(chunks) * i // n:len(chunks) * (i + 1) // n]


def continues(a: Chunk, b: Chunk) -> bool:
    """b takes up the trials of a's run (variant, distribution, clean/faulty) where a stops, with the seeds it would
    have in the same executable run."""
    return ((a.kernel, a.dist, a.inject) == (b.kernel, b.dist, b.inject)
            and b.start == a.start + a.trials and b.seed == a.seed + a.trials)


@dataclass(frozen=True)
class Batch:
    """Campaign chunks of one variant in one executable run: each part the chunks of one of its runs (distribution,
    clean/faulty) that continue one another, merged (trial t of a run draws from the run's seed + t, in whatever
    process it runs). Several parts go to the executable as ``--runs``, whose rows carry the part's index."""

    parts: tuple[Chunk, ...]

    @property
    def kernel(self) -> str:
        return self.parts[0].kernel

    @property
    def key(self) -> str:
        return self.parts[0].key + (f"+{len(self.parts) - 1}" if len(self.parts) > 1 else "")

    @property
    def trials(self) -> int:
        return sum(c.trials for c in self.parts)

    def timeout(self, per_chunk: float) -> float:
        """The run's time limit: ``per_chunk`` seconds per started chunk of ``CHUNK_TRIALS`` trials."""
        return per_chunk * max(1, -(-self.trials // CHUNK_TRIALS))

    def argv(self, shape: str, extra: tuple[str, ...] = ()) -> list[str]:
        if len(self.parts) == 1:
            return self.parts[0].argv(shape, extra)
        runs = ",".join(f"{c.dist}:{c.inject}:{c.seed}:{c.trials}" for c in self.parts)
        return ["--runs", runs, "--shapes", shape, "--no-timing", *extra]

    def rows(self, shape: str, got: list[dict]) -> tuple[list[dict], list[dict]]:
        """The run's rows -> (trial rows numbered within their runs, error rows), part after part (:func:`chunk_rows`);
        rows of no part (a crash's error row, every row of a single part) come with the first."""
        by_part: list[list[dict]] = [[] for _ in self.parts]
        for r in got:
            i = r.pop("run", 0)
            by_part[i if isinstance(i, int) and 0 <= i < len(self.parts) else 0].append(r)
        rows, errors = [], []
        for c, mine in zip(self.parts, by_part):
            r, e = chunk_rows(c, shape, mine)
            rows += r
            errors += e
        return rows, errors


def batch_chunks(chunks: list[Chunk], workers: int) -> list[Batch]:
    """The chunks as executable runs: each variant's stretch of consecutive chunks in one run, or, for several
    ``workers`` (GPUs), cut into as few runs as leave each worker two or more over the whole list (where there are that
    many chunks), of nearly equal size; within a run, the chunks that continue one another merged. Starting a process
    (CUDA context, library handles) costs about as much as a thousand small trials."""
    most = len(chunks) if workers <= 1 else max(1, len(chunks) // (2 * workers))  # chunks per run
    out: list[Batch] = []
    i = 0
    while i < len(chunks):
        j = i + 1
        while j < len(chunks) and chunks[j].kernel == chunks[i].kernel:
            j += 1
        runs = -(-(j - i) // most)
        for p in range(runs):
            lo, hi = i + (j - i) * p // runs, i + (j - i) * (p + 1) // runs
            parts: list[Chunk] = []
            for c in chunks[lo:hi]:
                if parts and continues(parts[-1], c):
                    a = parts[-1]
                    parts[-1] = Chunk(a.kernel, a.dist, a.inject, a.start, a.trials + c.trials, a.seed)
                else:
                    parts.append(c)
            out.append(Batch(tuple(parts)))
        i = j
    return out


def chunk_rows(c: Chunk, shape: str, got: list[dict]) -> tuple[list[dict], list[dict]]:
    """A chunk's executable rows -> (trial rows numbered within the whole run, error rows); a row that says the
    variant skips the shape becomes an error row of kind ``shape``."""
    rows, errors = [], []
    for r in got:
        if "trial" in r:
            r["trial"] += c.start
            rows.append(r)
        elif "skipped" in r:  # whatever its ok
            errors.append({"kernel": c.kernel, "ok": False,
                           "error": {"kind": "shape", "message": f"{c.kernel} does not run shape {shape}: {r['skipped']}"}})
        elif not r.get("ok", True):
            errors.append(r)
    return rows, errors


# --------------------------------------------------------------------------------------------
# Merging results files
# --------------------------------------------------------------------------------------------


@dataclass
class ResultsFile:
    path: Path
    provenance: dict
    rows: list[dict] = field(default_factory=list)
    extra: list[dict] = field(default_factory=list)  # lines that are no row: {"best": ...}, {"campaign": ...}


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _shape(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and _count(x) for k, x in v.items())


def _times(v) -> bool:
    return isinstance(v, dict) and all(isinstance(v[k], (int, float)) and not isinstance(v[k], bool) and math.isfinite(v[k])
                                       for k in ("median", "min", "max") if k in v)


# the fields a merge reads, and what each must be where present
ROW_FIELDS = {"kernel": ("a name or null", lambda v: v is None or isinstance(v, str)),
              "shape": ("a shape (names to whole numbers)", _shape),
              "ms": ("times in ms (median, min, max: finite numbers)", _times),
              "trial": ("a trial number", _count),
              "dist": ("a distribution's name", lambda v: isinstance(v, str))}
PROVENANCE_FIELDS = {"shapes": ("a list of shapes", lambda v: isinstance(v, list) and all(_shape(x) for x in v)),
                     "shape": ("a shape (names to whole numbers)", _shape),
                     "trials": ("a number of trials", _count),
                     "dists": ("a list of distributions", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))}


def _bad_fields(d: dict, fields: dict) -> str | None:
    """Why a row (or a provenance) of a results file is not what ftgen writes: the first field of ``fields`` it holds
    in another form, named with the form it must have."""
    for key, (what, ok) in fields.items():
        if key in d and not ok(d[key]):
            return f"{key} is {json.dumps(d[key])[:60]}, not {what}"
    return None


def read_results(path: Path | str) -> ResultsFile:
    """A results file (docs/architecture.md, results files): provenance first, then rows. Bad input is a SpecError."""
    p = Path(path)
    try:
        if p.suffix == ".gz":  # results of record are kept gzipped
            with gzip.open(p, "rt", errors="replace") as f:
                lines = f.read().splitlines()
        else:
            lines = p.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        raise SpecError(f"--from: {p}: no such file") from None
    except IsADirectoryError:
        raise SpecError(f"--from: {p} is a directory; give results files (JSON lines)") from None
    except (gzip.BadGzipFile, EOFError):
        raise SpecError(f"--from: {p}: not a gzipped file (its name ends in .gz)") from None
    out = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            if n == len(lines):  # a torn last line of a job that was killed while writing
                continue
            raise SpecError(f"--from: {p}:{n}: not a JSON line") from None
        if not isinstance(d, dict):
            raise SpecError(f"--from: {p}:{n}: not a JSON object")
        if out is None:
            if not isinstance(d.get("provenance"), dict):
                raise SpecError(f"--from: {p}: the first line is no {{\"provenance\": ...}}; not an ftgen results file")
            why = _bad_fields(d["provenance"], PROVENANCE_FIELDS)
            if why:
                raise SpecError(f"--from: {p}:{n}: provenance {why}; not a results file ftgen wrote")
            out = ResultsFile(p, d["provenance"])
        elif "kernel" in d:
            why = _bad_fields(d, ROW_FIELDS)
            if why:
                raise SpecError(f"--from: {p}:{n}: {why}; not a row ftgen wrote")
            out.rows.append(d)
        else:
            out.extra.append(d)
    if out is None:
        raise SpecError(f"--from: {p} is empty")
    return out


def shards_gpu(files) -> dict:
    """The GPU of the shards' runs, in the form `provenance()` takes: a merged file's provenance describes the
    machine that ran the shards, not the one that merged them."""
    prov = files[0].provenance
    return {"name": prov.get("gpu"), "driver": prov.get("driver"), "sm_count": prov.get("sm_count"),
            "cc": prov.get("compute_capability"), "runtime_api": prov.get("cuda_runtime_api")}


def shards_commits(files) -> list[str]:
    """The commits the shards ran (their provenance's git_sha, each once)."""
    return sorted({str(f.provenance.get("git_sha")) for f in files})


@dataclass
class Merged:
    rows: list[dict]
    gpu: dict
    shapes: list[dict] | None  # the shapes the shards searched, when their provenance says
    notes: list[str]
    commits: list[str]  # the commits the shards ran


def merge_search(paths: list[Path | str], family) -> Merged:
    """The rows of several search results files (shards of one search) as one list: checks that they
    ran on one GPU model and are distinct shards of one partition, drops repeated points."""
    files = [read_results(p) for p in paths]
    notes = _check_shards(files)
    rows, seen = [], {}
    for f in files:
        for r in f.rows:
            if r.get("kernel") is None:
                key = ("rejected", json.dumps(r.get("point"), sort_keys=True))
            else:
                sh = r.get("shape")
                if isinstance(sh, dict):
                    family.normalize_shape(sh, f"--from {f.path}: {r['kernel']}: shape")
                key = (r["kernel"], family.format_shape(sh) if isinstance(sh, dict) else None)
            if key in seen:
                if key[0] != "rejected":
                    notes.append(f"{key[0]} {key[1]}: in {seen[key]} and {f.path}; kept the first")
                continue
            seen[key] = f.path
            rows.append(r)
    shapes = None
    for f in files:
        if isinstance(f.provenance.get("shapes"), list):
            shapes = [family.normalize_shape(x, f"--from {f.path}: provenance shapes") for x in f.provenance["shapes"]]
            break
    return Merged(rows, shards_gpu(files), shapes, notes, shards_commits(files))


def _check_shards(files: list[ResultsFile]) -> list[str]:
    """Files to merge: of one GPU model, distinct shards of one partition. Returns notes (a shard missing)."""
    notes: list[str] = []
    gpus = sorted({str(f.provenance.get("gpu")) for f in files})
    if len(gpus) > 1:
        raise SpecError("--from: the files ran on different GPUs (" + ", ".join(gpus) + "); merge the results of one GPU model")
    shards: dict[str, Path] = {}
    counts = set()
    for f in files:
        sh = f.provenance.get("shard")
        if sh is None:
            continue
        if sh in shards:
            raise SpecError(f"--from: {shards[sh]} and {f.path} are both shard {sh}")
        shards[sh] = f.path
        counts.add(str(sh).split("/")[-1])
    whole = [f.path for f in files if f.provenance.get("shard") is None]
    if shards and whole:
        raise SpecError(f"--from: {whole[0]} is a whole run (no --shard) and {next(iter(shards.values()))} a shard; "
                        "merge the shards of one run")
    if len(counts) > 1:
        raise SpecError(f"--from: shards of different partitions ({', '.join(sorted(shards))}); give the shards of one --shard I/N run")
    if counts:
        n = int(counts.pop())
        missing = [f"{i}/{n}" for i in range(n) if f"{i}/{n}" not in shards]
        if missing:
            notes.append(f"shard(s) {', '.join(missing)} missing: their part is not in the merge")
    return notes


@dataclass
class MergedCampaign:
    rows: list[dict]  # per variant its error rows, then its trials in the order one job runs them
    kernels: list[str]
    gpu: dict
    trials: int
    dists: list[str]
    shape: dict
    notes: list[str]
    site: str | None = None  # the fault site of every trial (campaign --site), or None: the family's sites
    seed: int | None = None  # the campaign's seed (every shard's)
    commits: list[str] = field(default_factory=list)  # the commits the shards ran


def merge_campaign(paths: list[Path | str], kernel_order: list[str] = ()) -> MergedCampaign:
    """The rows of several campaign results files (shards of one campaign) as one campaign's: checks that
    they ran the same campaign (trials, distributions, shape, seed, fault site) on one GPU model. The variants
    in ``kernel_order`` (the spec's) come first, in that order, the others as the files name them."""
    files = [read_results(p) for p in paths]
    notes = _check_shards(files)
    for key in ("trials", "dists", "shape", "seed", "site"):
        vals = {json.dumps(f.provenance.get(key), sort_keys=True) for f in files}
        if len(vals) > 1:
            raise SpecError(f"--from: the files are of different campaigns ({key}: {', '.join(sorted(vals))})")
    prov = files[0].provenance
    if not isinstance(prov.get("trials"), int) or not isinstance(prov.get("dists"), list):
        raise SpecError(f"--from: {files[0].path} is no campaign results file (its provenance has no trials and dists)")
    dists = list(prov["dists"])
    kernels: list[str] = []
    trials: dict[tuple, dict] = {}
    errors: dict[str, list[dict]] = {}
    repeated = 0
    for f in files:
        for r in f.rows:
            k = r.get("kernel")
            if k not in kernels:
                kernels.append(k)
            if "trial" not in r:
                if not r.get("ok", True):
                    errors.setdefault(k, []).append(r)
                continue
            key = (k, r.get("dist"), int(bool(r.get("injected"))), r["trial"])
            if key in trials:
                repeated += 1
                continue
            trials[key] = r
    if repeated:
        notes.append(f"{repeated} trial(s) in more than one file (same variant, distribution, clean/faulty and number); kept the first")
    rank = {k: i for i, k in enumerate(kernel_order)}
    kernels.sort(key=lambda k: rank.get(k, len(rank)))  # stable: the others keep the files' order
    order = {d: i for i, d in enumerate(dists)}
    rows: list[dict] = []
    for k in kernels:
        rows += dedup_errors(errors.get(k, []))
        mine = [r for key, r in trials.items() if key[0] == k]
        rows += sorted(mine, key=lambda r: (order.get(r.get("dist"), len(order)), int(bool(r.get("injected"))), r["trial"]))
    return MergedCampaign(rows, kernels, shards_gpu(files), prov["trials"], dists, prov.get("shape") or {}, notes, prov.get("site"),
                          prov.get("seed"), shards_commits(files))


def dedup_errors(errors: list[dict]) -> list[dict]:
    """A variant's error rows; a shape it does not run, said by every shard or run, once."""
    out, shape_said = [], False
    for e in errors:
        if (e.get("error") or {}).get("kind") == "shape":
            if shape_said:
                continue
            shape_said = True
        out.append(e)
    return out
