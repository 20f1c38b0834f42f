"""The ftgen command line (README.md "CLI").

Exit codes (``errors.EXIT_CODES``, printed by ``ftgen --help``): 0 ok; 1 a bug or a failed
verification; 2 bad input (spec, flags, paths, a missing or corrupt project); 3 build failed;
4 no usable GPU (after generate and build have done what they can); 130 interrupted. No
traceback reaches the user unless --debug.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from pathlib import Path

import click

from . import __version__
from .errors import EXIT_CODES, BuildError, FtgenError, NoGpuError, SpecError, VerificationFailed
from .progress import LineProgress, secs
from .spec.loader import DEFAULT_MAX_POINTS, DEFAULT_MAX_VARIANTS

LAST_FILE = ".ftgen-last"
LAST_PROJECTS = "last-projects.json"  # in the cache dir: working directory -> the project last generated from it
MESSAGE_LINE_CHARS = 400  # longest line of an error message shown
MESSAGE_LINES = 60  # most lines of an error message shown


def _err(msg: str) -> None:
    click.echo(msg, err=True)


def _stderr_tty() -> bool:
    return sys.stderr.isatty()


class Ctx:
    debug = False


EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code:<4} {what}" for code, what in EXIT_CODES)


class Progress(LineProgress):
    """Progress of N steps on stderr: a rich bar on a terminal, else plain lines at a modest rate
    (``[12/50] built <kernel>  (ETA 40s)``), the first and the last step always."""

    def __init__(self, verb: str, min_interval: float = 2.0):
        super().__init__(verb, min_interval, tty=_stderr_tty())
        self._task = None

    def make_rich(self):
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        return RichProgress(TextColumn(self.verb), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TimeRemainingColumn(), TextColumn("{task.description}"), transient=True)

    def add_tasks(self) -> None:
        self._task = self._rich.add_task("", total=None)

    def __call__(self, i: int, n: int, what: str) -> None:
        if self._rich is not None:
            self._rich.update(self._task, completed=i, total=n, description=what[-60:])
            return
        if self.due(i, n):
            when = self.when(i, n)
            _err(f"[{i}/{n}] {self.verb} {_short_what(what)}" + (f"  ({when})" if when else ""))


def _short_what(what: str) -> str:
    """A ninja line's subject: 'Linking CUDA executable /x/bin/k' -> 'k'."""
    what = what.strip()
    last = what.split()[-1] if what.split() else what
    return Path(last).name if "/" in last else what[-100:]


# --------------------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.version_option(__version__, prog_name="ftgen")
@click.option("--debug", is_flag=True, help="Show tracebacks for unexpected errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """ftgen: YAML kernel specs -> fault-tolerant CUDA kernels, built, benchmarked and searched."""
    ctx.obj = Ctx()
    ctx.obj.debug = debug


def _project_dir(path: str | None, command: str = "") -> Path:
    """The generated project: the given directory, else the one last generated from this working
    directory (wherever -o put it), else the only one under generated/. Says which it chose."""
    if path:
        p = Path(path)
        if p.suffix in (".yaml", ".yml") and p.is_file():
            raise SpecError(f"{p} is a spec; give the generated directory (run `ftgen generate {p}` first)")
        if not p.exists():
            raise SpecError(f"{p}: no such directory; run `ftgen generate SPEC` first, or give the generated directory")
        if not p.is_dir():
            raise SpecError(f"{p}: not a directory; give the generated project directory")
        return p
    last = _last_project()
    if last is not None:
        if command:
            _err(f"{command}: {last} (the project last generated from here)")
        return last
    root = Path("generated")
    projects = sorted(d for d in root.glob("*") if (d / "manifest.json").is_file()) if root.is_dir() else []
    if len(projects) == 1:
        if command:
            _err(f"{command}: {projects[0]}")
        return projects[0]
    if not projects:
        raise SpecError("no generated project here; run `ftgen generate SPEC` first or give DIR")
    raise SpecError("several generated projects; give DIR: " + ", ".join(map(str, projects)))


def _last_project() -> Path | None:
    from .paths import cache_dir

    candidates = []
    try:
        table = json.loads((cache_dir() / LAST_PROJECTS).read_text())
        if isinstance(table, dict) and isinstance(table.get(os.getcwd()), str):
            candidates.append(Path(table[os.getcwd()]))
    except (OSError, ValueError):
        pass
    try:
        candidates.append(Path((Path("generated") / LAST_FILE).read_text().strip()))
    except (OSError, ValueError):
        pass
    for p in candidates:
        try:
            if (p / "manifest.json").is_file():
                return p
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------------------------


def space_flags(f):
    f = click.option("--max-variants", type=click.IntRange(1), default=DEFAULT_MAX_VARIANTS, show_default=True,
                     help="Most variants the space may keep after constraints.")(f)
    f = click.option("--max-points", type=click.IntRange(1), default=DEFAULT_MAX_POINTS, show_default=True,
                     help="Most points the spec's lists may expand to before constraints.")(f)
    return f


def _load(spec: str, max_points: int, max_variants: int):
    from .spec import load_spec

    return load_spec(spec, max_points=max_points, max_variants=max_variants)


def _check_out_root(out_root: str) -> None:
    """-o/--out: a directory (made when missing) that can be written, named without control characters."""
    from .paths import check_path_text

    check_path_text("-o/--out", out_root)
    p = Path(out_root)
    try:
        if p.exists() and not p.is_dir():
            raise SpecError(f"-o/--out: {out_root} exists and is not a directory")
        for parent in p.resolve().parents:
            if parent.exists():
                if not parent.is_dir():
                    raise SpecError(f"-o/--out: {parent} is not a directory")
                break
    except OSError as e:
        raise SpecError(f"-o/--out: {_oserror_text(e)}") from None


def _generate(s, out_root: str):
    from .codegen.emit import generate as do_generate

    _check_out_root(out_root)
    return do_generate(s, out_root)


@cli.command(epilog=EPILOG)
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out_root", default="generated", show_default=True, help="Output root; the project goes to OUT/<name>.")
@space_flags
def generate(spec: str, out_root: str, max_points: int, max_variants: int) -> None:
    """Validate SPEC, expand it and emit sources, a CMake project and manifest.json."""
    s = _load(spec, max_points, max_variants)
    g = _generate(s, out_root)
    _remember(g.out_dir, out_root)
    _err(
        f"{g.out_dir}: {len(s.variants)} variant(s), {len(g.written)} file(s) written, {g.unchanged} unchanged"
        + (f", {len(g.removed)} stale removed" if g.removed else "")
    )
    if s.rejected:
        _err(f"{len(s.rejected)} point(s) of the space rejected by constraints:")
        for r in s.rejected[:20]:
            from .spec.loader import _point_str

            _err(f"  {_point_str(r.point)}: {'; '.join(r.reasons)}")
        if len(s.rejected) > 20:
            _err(f"  ... {len(s.rejected) - 20} more (all listed in manifest.json)")
    for v in s.variants:
        outside = [sh for sh in s.shapes if not s.family.runs_shape(v, sh)]
        if outside:
            _err(f"note: {v.name} runs {s.family.range_broken(v, outside[0])} only: `ftgen bench` records {len(outside)} of the spec's {len(s.shapes)} shape(s) as out of range")
    for v in s.variants:
        click.echo(v.name)


def _remember(out_dir: Path, out_root: str) -> None:
    """Note the project just generated, so a bare `ftgen build` / `bench` from this working
    directory acts on it (and says so)."""
    from .paths import cache_dir

    try:
        (Path(out_root) / LAST_FILE).write_text(str(out_dir) + "\n")
    except OSError:
        pass
    path = cache_dir() / LAST_PROJECTS
    try:
        from filelock import FileLock

        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=10):
            try:
                table = json.loads(path.read_text())
                table = table if isinstance(table, dict) else {}
            except (OSError, ValueError):
                table = {}
            table[os.getcwd()] = str(Path(out_dir).resolve())
            if len(table) > 200:  # keep the most recent entries
                table = dict(list(table.items())[-200:])
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(table, indent=1))
            os.replace(tmp, path)
    except Exception:  # remembering is a convenience; generate has succeeded
        pass


# --------------------------------------------------------------------------------------------


def _run_build(project: Path, jobs, arch, kernels):
    from .build import build as do_build

    with Progress("built") as prog:
        r = do_build(project, jobs=jobs, arch=arch, kernels=kernels, progress=prog, log=prog.log)
    for k, why in r.changed.items():
        _err(f"warning: {k}: {why}")
    return r


def _report_build(r) -> None:
    from .build import print_failures

    _err(f"build: {len(r.built)} compiled, {len(r.cached)} up to date, {len(r.failed)} failed ({r.seconds:.1f} s)")
    if r.failed:
        print_failures(r)
        raise BuildError(f"{len(r.failed)} variant(s) failed to compile: {', '.join(r.failed)}")


def _check_early(gpus_text=None, **flags) -> None:
    """What can be checked of a command's flags before any work: the form of ``--gpus`` and the output files named by
    flags (``json=PATH``...), where a directory would lose the results of a long run at its end."""
    if gpus_text is not None:
        from .bench.pool import check_gpus_text

        check_gpus_text(gpus_text)
    for flag, path in flags.items():
        if path and path != "-" and Path(path).is_dir():
            raise SpecError(f"--{flag.replace('_', '-')}: {path} is a directory; give a file path")


@cli.command(name="build", epilog=EPILOG)
@click.argument("directory", required=False)
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None, help="Parallel compile jobs [default: all cores].")
@click.option("--arch", default=None, help="Override the spec's architectures, e.g. sm_90 or sm_80,sm_90 [default: the spec's].")
@click.option("--kernels", default=None, help="Only variants whose names match this glob (comma-separated globs allowed) [default: all].")
@click.option("--lib", "lib_prefix", is_flag=False, flag_value="", default=None, metavar="[PREFIX]",
              help="Build the shared library libftgen_<name> (C header, CMake package) instead of the executables and install it under PREFIX [default PREFIX: DIRECTORY/install].")
def build_cmd(directory, jobs, arch, kernels, lib_prefix) -> None:
    """Configure (CMake + Ninja) and build the variants of a generated project (DIRECTORY, or the
    project last generated from this directory)."""
    if lib_prefix and (Path(lib_prefix) / "manifest.json").is_file():
        raise SpecError(f"--lib {lib_prefix}: that is a generated project, not an install prefix; write `ftgen build {lib_prefix} --lib [PREFIX]`")
    project = _project_dir(directory, "build")
    if directory:
        _err(f"build: {project}")
    if lib_prefix is not None:
        if kernels:
            raise SpecError("--kernels: the library holds the project's variants (the search's winners and a fallback); give --lib without --kernels")
        from .build import build_library

        with Progress("built") as prog:
            r = build_library(project, Path(lib_prefix) if lib_prefix else project / "install", jobs=jobs, arch=arch, progress=prog, log=prog.log)
        _err(f"library: {r.library} ({len(r.variants)} variant(s){', fallback built with it: ' + ', '.join(r.extra) if r.extra else ''}; {r.seconds:.1f} s)")
        _err(f"header: {r.header}; entry points: {', '.join(r.entry_points)}")
        _err(f"package: find_package({r.library.name[3:-3]}) with -DCMAKE_PREFIX_PATH={r.prefix}")
        return
    r = _run_build(project, jobs, arch, kernels)
    _report_build(r)


# --------------------------------------------------------------------------------------------


GPUS_HELP = "Run on several GPUs of this host, one worker each: all, or indices such as 0,2 [default: the first GPU]."
SHARD_HELP = "Do only part I of N (0 <= I < N, e.g. 0/4) of the work, for N independent jobs; see docs/scale-out.md."


def _bench_options(shapes_text, family, reps, warmup, inject, inject_kind, seed, dist, no_ref, timeout, site=None):
    from .bench import BenchOptions
    from .spec import parse_shapes

    shapes = parse_shapes(family, shapes_text) if shapes_text is not None else None
    family.check_site(site)
    return BenchOptions(
        shapes=shapes, reps=reps, warmup=warmup, inject=inject, inject_kind=inject_kind, seed=seed, dist=dist, no_ref=no_ref,
        timeout=timeout, extra=("--site", site) if site else (),
    )


def bench_flags(f):
    f = click.option("--shapes", default=None, help="Comma-separated shapes (4096x4096x4096,...) or a YAML file of shapes [default: the spec's].")(f)
    f = click.option("--reps", type=click.IntRange(1, 100000), default=None, help="Timed repetitions (median reported) [default: the executable's].")(f)
    f = click.option("--warmup", type=click.IntRange(0, 100000), default=None, help="Untimed warm-up launches [default: the executable's].")(f)
    f = click.option("--inject", type=click.IntRange(0, 1 << 20), default=0, show_default=True, help="Faults injected per launch (variants built with inject: true).")(f)
    f = click.option("--inject-kind", type=click.Choice(["bitflip", "offset"]), default=None,
                     help="Fault model: flip one bit, or add an offset [default: the executable's, bitflip].")(f)
    f = click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None, help="Seed for inputs and fault plans [default: the executable's].")(f)
    f = click.option("--dist", type=click.Choice(["normal", "uniform", "loguniform", "outliers"]), default=None,
                     help="Input distribution (outliers: N(0,1) with one value in 1000 from N(0,100^2)) [default: normal].")(f)
    f = click.option("--site", default=None, help="Where faults land, for a family with several fault sites (its docs name them) [default: the family's].")(f)
    f = click.option("--no-ref", is_flag=True, help="Skip the vendor-library reference and with it the verification (rows say verified: false).")(f)
    f = click.option("--timeout", type=click.FloatRange(1), default=600.0, show_default=True, help="Seconds per executable.")(f)
    return f


@cli.command(epilog=EPILOG)
@click.argument("directory", required=False)
@bench_flags
@click.option("--kernels", default=None, help="Only variants whose names match this glob [default: all].")
@click.option("--json", "json_out", default=None, help="Write results (JSON lines with provenance) to PATH, or - for stdout.")
@click.option("--gpus", "gpus_text", default=None, help=GPUS_HELP)
@click.option("--refs", "refs_text", default=None,
              help="References timed beside the variants outside the executable (kmeans: flash-kmeans; attention: "
                   "sdpa-flash, sdpa-cudnn, decoupled), comma-separated, or none [default: all, or FTGEN_BENCH_REFS].")
def bench(directory, shapes, reps, warmup, inject, inject_kind, seed, dist, site, no_ref, timeout, kernels, json_out, gpus_text,
          refs_text) -> None:
    """Run the built variants, verify them against the vendor library and print a table.

    Needs a CUDA GPU (sm_80 or newer); without one it exits 4."""
    from . import families
    from .bench import bench_project, not_run
    from .build import binary_path, load_manifest, select_variants
    from .report.provenance import host_facts_soon, provenance
    from .report.table import print_rows

    _check_early(gpus_text, json=json_out)
    project = _project_dir(directory, "bench")
    if directory:
        _err(f"bench: {project}")
    manifest = load_manifest(project)
    if manifest["spec"]["family"] not in families.names():
        raise SpecError(f"{project}/manifest.json: family {manifest['spec']['family'][:40]!r} is not known to this ftgen; re-generate the project")
    family = families.get(manifest["spec"]["family"])
    opts = _bench_options(shapes, family, reps, warmup, inject, inject_kind, seed, dist, no_ref, timeout, site)
    if refs_text is not None:
        from .bench.refs import check_chosen

        check_chosen(family, refs_text)
        opts.refs = refs_text
    variants = select_variants(manifest, kernels)
    built = [v for v in variants if binary_path(project, v["kernel"]).is_file()]
    if not built:
        raise SpecError(f"{project}: nothing built yet; run `ftgen build {project}` first")
    if inject:
        not_inj = [v["kernel"] for v in built if not v["protection"].get("inject")]
        if len(not_inj) == len(built):
            raise SpecError("--inject: none of the selected variants was built with fault injection (set protection.inject: true in the spec)")
        if not_inj:
            _err(f"--inject: {len(not_inj)} variant(s) built without fault injection run clean: {', '.join(not_inj[:4])}{' ...' if len(not_inj) > 4 else ''}")
    facts = host_facts_soon()
    from .bench.pool import bench_on_gpus, probe_gpus

    gpu, gpus = probe_gpus(binary_path(project, built[0]["kernel"]), gpus_text, "bench", _err)

    prov = provenance(gpu, facts=facts.result(), project=str(project), spec=manifest["spec"]["source"],
                      **({"gpus": [g.info() for g in gpus]} if gpus else {}))
    t0 = time.monotonic()
    done = [0]
    so_far: list[dict] = []

    def on_rows(kernel, rows):
        done[0] += 1
        so_far.extend(rows)
        if json_out and json_out != "-":  # the rows so far on disk after each variant: a run cut short keeps them
            from .bench import write_jsonl

            write_jsonl(json_out, {**prov, "partial": f"{done[0]} of {len(built)} variants"} if done[0] < len(built) else prov, so_far)
        bad = sum(1 for r in rows if not r.get("ok") and not not_run(r))
        left = len(built) - done[0]
        eta = f"  (ETA {secs((time.monotonic() - t0) / done[0] * left)})" if left else ""
        _err(f"[{done[0]}/{len(built)}] ran {kernel}: {len(rows)} row(s){', ' + str(bad) + ' failed' if bad else ''}{eta}")

    rows = bench_on_gpus(project, built, family, opts, gpus) if gpus else bench_project(project, built, family, opts, on_rows)
    for v in variants:
        if v not in built:
            rows.append({"kernel": v["kernel"], "ok": False, "error": {"kind": "missing", "message": "not built"}})
    if json_out:
        from .bench import write_jsonl

        write_jsonl(json_out, prov, rows)
    print_rows(rows, title=f"{manifest['spec']['name']} on {gpu.get('name')}", file=sys.stderr if json_out == "-" else None)
    outside = [r for r in rows if not_run(r)]
    if outside:
        _err(f"{len(outside)} row(s) not run: the shape is outside the variant's range ({outside[0]['error']['message']})")
    bad = [r for r in rows if not r.get("ok") and not not_run(r)]
    if bad:
        raise VerificationFailed(f"{len(bad)} of {len(rows)} row(s) failed: " + ", ".join(sorted({f'{r.get("kernel")} ({(r.get("error") or {}).get("kind", "verification")})' for r in bad})))


# --------------------------------------------------------------------------------------------


@cli.command(epilog=EPILOG)
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("results", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--shapes", default=None, help="Shapes to optimise for [default: the spec's shapes].")
@click.option("--budget", type=click.IntRange(1), default=None, help="Most variants to evaluate (without a GPU: to build) [default: all].")
@click.option("--strategy", type=click.Choice(["exhaustive", "random"]), default="exhaustive", show_default=True, help="How to pick the variants to evaluate.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True, help="Seed of the random strategy.")
@click.option("-o", "--out", "out_root", default="generated", show_default=True, help="Output root of the search project.")
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None, help="Parallel compile jobs [default: all cores].")
@click.option("--reps", type=click.IntRange(1, 100000), default=None, help="Timed repetitions per shape (median reported) [default: the executable's].")
@click.option("--warmup", type=click.IntRange(0, 100000), default=None, help="Untimed warm-up launches per shape [default: the executable's].")
@click.option("--inject", type=click.IntRange(0, 1 << 20), default=0, show_default=True, help="Search with this many faults injected per launch.")
@click.option("--timeout", type=click.FloatRange(1), default=600.0, show_default=True, help="Seconds per executable.")
@click.option("--json", "json_out", default=None, help="Write every row (JSON lines with provenance) to PATH or -.")
@click.option("--no-cache", is_flag=True, help="Ignore (but still update) the results cache.")
@click.option("--write-tuning", "write_tuning", default=None, metavar="PATH",
              help="Merge the winners' measured choices into the tuning file PATH (e.g. ftgen/tuning/h100.json), read at resolution.")
@click.option("--gpus", "gpus_text", default=None, help=GPUS_HELP)
@click.option("--shard", "shard_text", default=None, help=SHARD_HELP + " Write each part's rows with --json.")
@click.option("--from", "merge", is_flag=True, help="Merge the results files after SPEC (of --shard runs): winners spec, header, table.")
@space_flags
def search(spec, results, shapes, budget, strategy, seed, out_root, jobs, reps, warmup, inject, timeout, json_out, no_cache,
           gpus_text, shard_text, merge, write_tuning, max_points, max_variants) -> None:
    """Build and bench the spec's space; best variant per shape as a table, a spec and a dispatch header.

    `ftgen search SPEC --from a.jsonl b.jsonl ...` merges the results of sharded searches instead.

    Needs a CUDA GPU (sm_80 or newer); without one it generates and builds the variants it would evaluate (the --budget
    and --strategy selection; with --shard, that part of it), then exits 4."""
    from .bench import BenchOptions, gpu_info, write_jsonl
    from .report.provenance import host_facts_soon, provenance
    from .search import STRATEGIES, ResultsCache, search as do_search
    from .bench.pool import gpus_option, pool_for
    from .search.merge import check_merge_flags, merge_search_files, search_outputs, shard_spec
    from .search.shard import parse_shard
    from .spec import parse_shapes

    check_merge_flags("search", merge, results, gpus_text, shard_text)
    _check_early(gpus_text, json=json_out, write_tuning=write_tuning)
    shard = parse_shard(shard_text) if shard_text is not None else None
    s = _load(spec, max_points, max_variants)
    shape_list = parse_shapes(s.family, shapes) if shapes is not None else s.shapes
    if shard and shard[1] > (n_points := min(budget or len(s.variants), len(s.variants)) * len(shape_list)):
        raise SpecError(f"--shard {shard_text}: the search has {n_points} point(s) (variants{' within --budget' if budget else ''} x "
                        "shapes); give at most that many shards")
    if merge:
        _check_out_root(out_root)
        return merge_search_files(s, results, shape_list if shapes else None, out_root, json_out, _err, write_tuning)
    opts = BenchOptions(reps=reps, warmup=warmup, inject=inject, timeout=timeout)
    _check_out_root(out_root)
    facts = host_facts_soon()
    try:
        gpus = gpus_option(gpus_text, "search", _err, one_model="a search")
        gpu = {"name": gpus[0].name, "driver": gpus[0].driver} if gpus else gpu_info()
    except NoGpuError:
        # generate and build what the search would run (a shard: its part), then say plainly that running needs a GPU
        proj = shard_spec(s, len(shape_list), shard, STRATEGIES[strategy](seed).propose(list(s.variants), {}, budget or len(s.variants)))
        g = _generate(proj, out_root)
        _err(f"search: {g.out_dir}: no GPU; building the {len(proj.variants)} of {len(s.variants)} variant(s) the search would run")
        _report_build(_run_build(g.out_dir, jobs, None, None))
        raise
    cache = ResultsCache()
    if no_cache:
        cache.entries = {}
    from .search import search_project_name

    _err(f"search: {Path(out_root) / search_project_name(s.name, shard)}" + (f", shard {shard_text}" if shard else ""))
    prog = Progress("built")
    with pool_for(gpus) as pool:
        result = do_search(
            s,
            shape_list,
            out_root=Path(out_root),
            budget=budget,
            strategy=STRATEGIES[strategy](seed),
            opts=opts,
            jobs=jobs,
            cache=cache,
            gpu=gpu,
            log=_err,
            progress=prog,
            pool=pool,
            shard=shard,
        )
    from .bench import failure_kind, not_run

    fails, outside = {}, 0
    for r in result.rows:
        if not_run(r):
            outside += 1
        elif not r.get("ok"):
            k = failure_kind(r)
            fails[k] = fails.get(k, 0) + 1
    _err(
        f"search: {len(result.evaluated)} variant(s) x {len(shape_list)} shape(s); compiled {result.compiled}, ran {result.ran}, "
        f"cache hits {result.cache_hits}; failures: {json.dumps(fails) if fails else 'none'}"
        + (f"; {outside} point(s) outside their variant's shapes, not run" if outside else "")
        + (f"; {pool.retried} run(s) re-queued, GPU(s) left the pool: {', '.join(pool.dead) or 'none'}" if pool else "")
    )
    if result.project is not None:  # SM count, compute capability, L2 from a built executable
        built = sorted((result.project / "bin").glob("*"))
        if built:
            try:
                gpu = {**gpu, **gpu_info(built[0])}
            except NoGpuError:
                pass
    extra = {"shapes": shape_list, **({"shard": shard_text} if shard else {}), **({"gpus": [g.info() for g in gpus]} if gpus else {})}
    prov = provenance(gpu, facts=facts.result(), spec=s.source, strategy=strategy, budget=budget, **extra)
    if json_out:
        write_jsonl(json_out, prov, result.rows, [{"best": {k: r["kernel"] for k, r in result.best.items()}}])
    search_outputs(s, result, shape_list, json_out, True, _err, shard_text, tuning_path=write_tuning, prov=prov)



# --------------------------------------------------------------------------------------------


@cli.command(epilog=EPILOG)
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--trials", type=click.IntRange(1, 10**6), default=1000, show_default=True, help="Clean trials and faulty trials, each, per distribution.")
@click.option("--dists", default="normal,uniform,loguniform", show_default=True, help="Input distributions (comma-separated; also outliers).")
@click.option("--site", default=None, help="Where faults land, for a family with several fault sites (its docs name them) [default: the family's].")
@click.option("--shape", "shape_text", default=None, help="Problem shape of the trials [default: the family's campaign shape].")
@click.option("--kernels", default=None, help="Only variants whose names match this glob [default: all with inject: true].")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=1, show_default=True, help="Seed of inputs and fault plans.")
@click.option("-o", "--out", "out_root", default="generated", show_default=True, help="Output root of the project.")
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None, help="Parallel compile jobs [default: all cores].")
@click.option("--json", "json_out", default=None, help="Write trials, per-bit and ROC rows and the summaries (JSON lines) to PATH or -.")
@click.option("--plot", "plot_out", default=None, help="Write the ROC / per-bit plot (PNG) to PATH.")
@click.option("--timeout", type=click.FloatRange(1), default=900.0, show_default=True, help="Seconds an executable run may take per 250 trials it runs.")
@click.option("--gpus", "gpus_text", default=None, help=GPUS_HELP)
@click.option("--shard", "shard_text", default=None, help=SHARD_HELP + " A part's summaries count its own trials only.")
@click.option("--from", "merge", is_flag=True, help="Merge the results files after SPEC (of --shard runs): summaries over all trials.")
@click.argument("results", nargs=-1, type=click.Path(dir_okay=False))
@space_flags
def campaign(spec, trials, dists, site, shape_text, kernels, seed, out_root, jobs, json_out, plot_out, timeout, gpus_text,
             shard_text, merge, results, max_points, max_variants) -> None:
    """Fault campaign: N clean + N single-fault trials per variant and input distribution; coverage,
    false alarms, per-bit statistics and a ROC curve over the detection threshold.

    `ftgen campaign SPEC --from a.jsonl b.jsonl ...` merges the results of sharded campaigns instead.

    Needs a CUDA GPU (sm_80 or newer); without one it generates and builds, then exits 4."""
    import fnmatch

    from .bench import write_jsonl
    from .faults import campaign as do_campaign, failure_message, parse_dists, per_bit, plot, roc
    from .bench.pool import campaign_on_gpus, probe_gpus
    from .report.provenance import host_facts_soon, provenance
    from .search.merge import check_merge_flags, merge_campaign_files
    from .search.shard import check_campaign_shards, parse_shard
    from .spec import parse_one_shape

    check_merge_flags("campaign", merge, results, gpus_text, shard_text)
    _check_early(gpus_text, json=json_out, plot=plot_out)
    shard = parse_shard(shard_text) if shard_text is not None else None
    s = _load(spec, max_points, max_variants)
    dist_list = parse_dists(dists)
    chosen = [v for v in s.variants if v.protection.injects]
    if kernels:
        chosen = [v for v in chosen if any(fnmatch.fnmatchcase(v.name, g.strip()) for g in kernels.split(","))]
    if not chosen:
        raise SpecError(f"{spec}: a campaign needs protected variants built with protection.inject: true (none selected)")
    if shard:
        check_campaign_shards(shard_text, shard[1], [v.name for v in chosen], dist_list, trials)
    fam = s.family
    fam.check_site(site)
    shape = parse_one_shape(fam, shape_text, "--shape") if shape_text is not None else dict(getattr(fam, "campaign_shape", None) or fam.default_shapes[0])
    outside = [v for v in chosen if not fam.runs_shape(v, shape)]
    if outside and not merge:
        why = fam.out_of_range_row(outside[0], shape)["error"]["message"]
        raise SpecError(f"--shape {fam.format_shape(shape)}{'' if shape_text else ' (the family default)'}: outside the range of "
                        f"{len(outside)} variant(s), e.g. {outside[0].name} ({why}); give a --shape they run, or leave them out with --kernels")
    gpus = []
    if merge:
        if site:
            raise SpecError("--site: a merge takes the site the shards' files name (campaign --from without --site)")
        m, summaries = merge_campaign_files(s, results, chosen, _err)
        rows, variants, gpu, site = m.rows, [{"kernel": k} for k in m.kernels], m.gpu, m.site
        trials, dist_list, shape, seed = m.trials, m.dists, m.shape, m.seed if m.seed is not None else seed
    else:
        facts = host_facts_soon()
        g = _generate(s, out_root)
        _remember(g.out_dir, out_root)
        _err(f"campaign: {g.out_dir}")
        pattern = ",".join(v.name for v in chosen)
        _report_build(_run_build(g.out_dir, jobs, None, pattern))
        gpu, gpus = probe_gpus(g.out_dir / "bin" / chosen[0].name, gpus_text, "campaign", _err)
        from .build import load_manifest, select_variants

        variants = select_variants(load_manifest(g.out_dir), pattern)
        if gpus or shard:  # the trials in chunks over a pool of GPUs: the same chunks and seeds as one run
            rows, summaries = campaign_on_gpus(g.out_dir, variants, gpus, gpu, shard, trials=trials, dists=dist_list, seed=seed,
                                               shape=fam.format_shape(shape), timeout=timeout, spec_name=s.source, log=_err,
                                               extra=("--site", site) if site else ())
        else:
            rows, summaries = do_campaign(
                g.out_dir, variants, shape=fam.format_shape(shape), trials=trials, dists=dist_list, seed=seed,
                timeout=timeout, spec_name=s.source, log=_err, extra=("--site", site) if site else (),
            )
    extra, rocs, bits = [], {}, {}
    for v, summ in zip(variants, summaries):
        mine = [r for r in rows if r.get("kernel") == v["kernel"] and "trial" in r]
        bits[v["kernel"]] = per_bit(mine)
        rocs[v["kernel"]] = roc(mine)
        extra += [{"per_bit": {"kernel": v["kernel"], **b}} for b in bits[v["kernel"]]]
        extra += [{"roc": {"kernel": v["kernel"], **p}} for p in rocs[v["kernel"]]]
    extra += [{"campaign": summ} for summ in summaries]
    if json_out:
        more = {**({"shard": shard_text} if shard else {}), **({"gpus": [x.info() for x in gpus]} if gpus else {}),
                **({"site": site} if site else {}),
                **({"merged_from": list(results), "shards_git_sha": m.commits} if merge else {})}
        prov = provenance(gpu, facts=None if merge else facts.result(), spec=s.source, trials=trials, dists=dist_list,
                          shape=shape, seed=seed, **more)
        write_jsonl(json_out, prov, rows, extra)
    if plot_out:
        why = plot(Path(plot_out), summaries, rocs, bits)
        if why:
            _err(why)
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"fault campaign, {fam.format_shape(shape)}, {trials}+{trials} trials per distribution ({gpu.get('name')})"
              + (f", merged from {len(results)} file(s)" if merge else "")
              + (f", shard {shard_text}: its trials only" if shard else ""))
    for col in ("kernel", "clean", "faulty", "significant", "detected", "corrected", "coverage", "false alarms", "max resid err", "not ok"):
        t.add_column(col, justify="left" if col == "kernel" else "right")
    for x in summaries:
        cov = "-" if x["coverage"] is None else f"{100 * x['coverage']:.2f}%"
        t.add_row(x["kernel"], str(x["clean_trials"]), str(x["faulty_trials"]), str(x["significant"]), str(x["detected"]),
                  str(x["corrected"]), cov, str(x["false_alarms"]), f"{x['max_residual_rel_err']:.1e}",
                  f"{x.get('not_ok', 0)}" + (f" ({x['failed_trials']} failed)" if x.get("failed_trials") else ""))
    Console(file=sys.stderr if json_out == "-" else sys.stdout, width=200).print(t)
    why = failure_message(rows)  # a failed run, a wrong clean trial, or a detected fault left wrong
    if why:
        raise FtgenError(why)
    # a kernel whose counters break the rules (more detections than faults and false alarms, or a detection that ended
    # neither corrected, recomputed nor uncorrectable) miscounts: its flagged trials are not counted as corrected, and
    # the campaign fails after writing everything
    broken = [x for x in summaries if x.get("counter_violations")]
    if broken:
        raise FtgenError("counters broke the rules in " + "; ".join(
            f"{x['kernel']}: {x['counter_violations']} trial(s) (first: {x['flagged_trials'][:5]})" for x in broken)
            + " -- detected > faults applied + false alarms, or a detection neither corrected, recomputed nor uncorrectable")


# --------------------------------------------------------------------------------------------


@cli.command(name="list", epilog=EPILOG)
@click.argument("family", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: each family's description as structured data.")
def list_cmd(family, as_json) -> None:
    """Families, their backends, parameters (type, allowed values or range, default), schemes and constraints."""
    from . import families

    names = families.names()
    if family and family not in names:
        raise SpecError(f"{family[:40]!r} is not a family; available: {', '.join(names)}")
    descs = [families.get(n).describe() for n in ([family] if family else names)]
    if as_json:
        click.echo(json.dumps(descs, indent=2, default=str))
        return
    from rich.console import Console

    from .report.listing import print_family, terminal_width

    console = Console(width=max(100, min(160, terminal_width())), soft_wrap=False)
    for d in descs:
        print_family(console, d)


# --------------------------------------------------------------------------------------------


@cli.command(epilog=EPILOG)
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--threshold", type=click.FloatRange(0, 1000), default=None,
              help="Noise floor in percent: a change within it is SAME even when the rows' own spread is smaller [default: the rows' spread only].")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (rows and summary) on stdout.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a row is significantly SLOWER or stopped verifying.")
def compare(a, b, threshold, as_json, fail_on_regression) -> None:
    """Compare two results files (JSON lines from bench, search or campaign): B against A.

    Rows are matched by kernel, shape and the fields that identify a run; the median times are
    compared with a noise-aware verdict (SAME / FASTER / SLOWER / ???), the ratios to the vendor
    reference too, and rows whose `ok` changed are flagged."""
    from .compare import compare_files, print_comparison

    result = compare_files(a, b, noise_pct=threshold)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    else:
        print_comparison(result)
    if fail_on_regression and result.regressions():
        raise VerificationFailed(f"{len(result.regressions())} row(s) regressed: " + ", ".join(result.regressions()[:10]))


# --------------------------------------------------------------------------------------------


def _oserror_text(e: OSError) -> str:
    name = e.filename if isinstance(e.filename, str) else None
    where = f"{name[:120] + '...' if name and len(name) > 120 else name}: " if name else ""
    hint = {
        errno.ENAMETOOLONG: " (a file name is too long for the file system; use a shorter name or output root)",
        errno.EACCES: " (no permission; choose another output directory with -o)",
        errno.EROFS: " (read-only file system; choose another output directory with -o)",
        errno.ENOSPC: " (the disk is full)",
        errno.ENOTDIR: " (a path component is a file, not a directory)",
        errno.EEXIST: " (exists already)",
    }.get(e.errno, "")
    return f"{where}{e.strerror or e}{hint}"


def _clip(message: str) -> str:
    """An error message cut to a readable size."""
    lines = message.splitlines() or [""]
    out = [ln if len(ln) <= MESSAGE_LINE_CHARS else ln[: MESSAGE_LINE_CHARS - 3] + "..." for ln in lines[:MESSAGE_LINES]]
    if len(lines) > MESSAGE_LINES:
        out.append(f"... {len(lines) - MESSAGE_LINES} more line(s)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="ftgen", standalone_mode=False)
    except click.exceptions.Abort:
        _err("interrupted")
        return 130
    except click.exceptions.UsageError as e:
        e.show()
        return 2
    except click.exceptions.ClickException as e:
        e.show()
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except FtgenError as e:
        if debug:
            import traceback

            traceback.print_exc()
        _err(_clip(("error: " if e.exit_code in (1, 2, 3) else "") + e.message))
        return e.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except OSError as e:  # the environment: a read-only directory, a name too long, a full disk
        if debug:
            raise
        _err(_clip(f"error: {_oserror_text(e)}"))
        return 2
    except MemoryError:
        _err("error: out of memory (is the spec's space or a --shapes list very large?)")
        return 2
    except Exception as e:  # a bug: the message, not a traceback, unless --debug
        if debug:
            raise
        _err(_clip(f"internal error: {type(e).__name__}: {e} (run with --debug for a traceback)"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
