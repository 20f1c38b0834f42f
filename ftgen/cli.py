"""The ftgen command line (DESIGN.md "CLI").

Exit codes: 0 ok; 2 bad input (spec, flags); 3 build failed; 4 no usable GPU (after generate and
build have done what they can); 1 anything else. No traceback reaches the user unless --debug.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from . import __version__
from .errors import BuildError, FtgenError, NoGpuError, SpecError, VerificationFailed

LAST_FILE = ".ftgen-last"


def _err(msg: str) -> None:
    click.echo(msg, err=True)


def _stderr_tty() -> bool:
    return sys.stderr.isatty()


class Ctx:
    debug = False


# --------------------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ftgen")
@click.option("--debug", is_flag=True, help="Show tracebacks for unexpected errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """ftgen: YAML kernel specs -> fault-tolerant CUDA kernels, built, benchmarked and searched."""
    ctx.obj = Ctx()
    ctx.obj.debug = debug


def _project_dir(path: str | None) -> Path:
    """The generated project: the given directory, else the one last generated here."""
    if path:
        p = Path(path)
        if p.suffix in (".yaml", ".yml") and p.is_file():
            raise SpecError(f"{p} is a spec; give the generated directory (run `ftgen generate {p}` first)")
        return p
    root = Path("generated")
    last = root / LAST_FILE
    if last.is_file():
        p = Path(last.read_text().strip())
        if (p / "manifest.json").is_file():
            return p
    projects = sorted(d for d in root.glob("*") if (d / "manifest.json").is_file()) if root.is_dir() else []
    if len(projects) == 1:
        return projects[0]
    if not projects:
        raise SpecError("no generated project here; run `ftgen generate SPEC` first or give DIR")
    raise SpecError("several generated projects; give DIR: " + ", ".join(map(str, projects)))


# --------------------------------------------------------------------------------------------


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("-o", "--out", "out_root", default="generated", show_default=True, help="Output root; the project goes to OUT/<name>.")
def generate(spec: str, out_root: str) -> None:
    """Validate SPEC, expand it and emit sources, a CMake project and manifest.json."""
    from .codegen.emit import generate as do_generate
    from .spec import load_spec

    s = load_spec(spec)
    g = do_generate(s, out_root)
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
        click.echo(v.name)


def _remember(out_dir: Path, out_root: str) -> None:
    try:
        (Path(out_root) / LAST_FILE).write_text(str(out_dir) + "\n")
    except OSError:
        pass


# --------------------------------------------------------------------------------------------


def _run_build(project: Path, jobs, arch, kernels):
    from .build import build as do_build

    if _stderr_tty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("build"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"), transient=True) as prog:
            task = prog.add_task("", total=None)

            def progress(i, n, what):
                prog.update(task, completed=i, total=n, description=what[-60:])

            return do_build(project, jobs=jobs, arch=arch, kernels=kernels, progress=progress)
    return do_build(project, jobs=jobs, arch=arch, kernels=kernels)


def _report_build(r) -> None:
    from .build import print_failures

    _err(f"build: {len(r.built)} compiled, {len(r.cached)} up to date, {len(r.failed)} failed ({r.seconds:.1f} s)")
    if r.failed:
        print_failures(r)
        raise BuildError(f"{len(r.failed)} variant(s) failed to compile: {', '.join(r.failed)}")


@cli.command(name="build")
@click.argument("directory", required=False)
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None, help="Parallel compile jobs (default: all cores).")
@click.option("--arch", default=None, help="Override the spec's architectures, e.g. sm_90 or sm_80,sm_90.")
@click.option("--kernels", default=None, help="Only variants whose names match this glob (comma-separated globs allowed).")
def build_cmd(directory, jobs, arch, kernels) -> None:
    """Configure (CMake + Ninja) and build the variants of a generated project."""
    project = _project_dir(directory)
    r = _run_build(project, jobs, arch, kernels)
    _report_build(r)


# --------------------------------------------------------------------------------------------


def _bench_options(shapes_text, family, reps, warmup, inject, inject_kind, seed, dist, no_ref, timeout):
    from .bench import BenchOptions
    from .spec import parse_shapes

    shapes = parse_shapes(family, shapes_text) if shapes_text else None
    return BenchOptions(
        shapes=shapes, reps=reps, warmup=warmup, inject=inject, inject_kind=inject_kind, seed=seed, dist=dist, no_ref=no_ref, timeout=timeout
    )


def bench_flags(f):
    f = click.option("--shapes", default=None, help="Comma-separated shapes (4096x4096x4096,...) or a YAML file of shapes.")(f)
    f = click.option("--reps", type=click.IntRange(1, 100000), default=None, help="Timed repetitions (median reported).")(f)
    f = click.option("--warmup", type=click.IntRange(0, 100000), default=None, help="Untimed warm-up launches.")(f)
    f = click.option("--inject", type=click.IntRange(0, 1 << 20), default=0, help="Faults injected per launch (variants built with inject: true).")(f)
    f = click.option("--inject-kind", type=click.Choice(["bitflip", "offset"]), default=None)(f)
    f = click.option("--seed", type=click.IntRange(0), default=None, help="Seed for inputs and fault plans.")(f)
    f = click.option("--dist", type=click.Choice(["normal", "uniform", "loguniform"]), default=None, help="Input distribution.")(f)
    f = click.option("--no-ref", is_flag=True, help="Skip the vendor-library reference (no verification!).")(f)
    f = click.option("--timeout", type=click.FloatRange(1), default=600.0, show_default=True, help="Seconds per executable.")(f)
    return f


@cli.command()
@click.argument("directory", required=False)
@bench_flags
@click.option("--kernels", default=None, help="Only variants whose names match this glob.")
@click.option("--json", "json_out", default=None, help="Write results (JSON lines with provenance) to PATH, or - for stdout.")
def bench(directory, shapes, reps, warmup, inject, inject_kind, seed, dist, no_ref, timeout, kernels, json_out) -> None:
    """Run the built variants, verify them against the vendor library and print a table."""
    from . import families
    from .bench import bench_project, gpu_info
    from .build import binary_path, load_manifest, select_variants
    from .report.provenance import provenance
    from .report.table import print_rows

    project = _project_dir(directory)
    manifest = load_manifest(project)
    family = families.get(manifest["spec"]["family"])
    opts = _bench_options(shapes, family, reps, warmup, inject, inject_kind, seed, dist, no_ref, timeout)
    variants = select_variants(manifest, kernels)
    built = [v for v in variants if binary_path(project, v["kernel"]).is_file()]
    if not built:
        raise FtgenError(f"{project}: nothing built yet; run `ftgen build {project}` first")
    if inject:
        not_inj = [v["kernel"] for v in built if not v["protection"].get("inject")]
        if len(not_inj) == len(built):
            raise SpecError("--inject: none of the selected variants was built with fault injection (set protection.inject: true in the spec)")
        if not_inj:
            _err(f"--inject: {len(not_inj)} variant(s) built without fault injection run clean: {', '.join(not_inj[:4])}{' ...' if len(not_inj) > 4 else ''}")
    gpu = gpu_info(binary_path(project, built[0]["kernel"]))
    prov = provenance(gpu, project=str(project), spec=manifest["spec"]["source"])
    tty = _stderr_tty()

    def on_rows(kernel, rows):
        if tty:
            bad = sum(1 for r in rows if not r.get("ok"))
            _err(f"  {kernel}: {len(rows)} row(s){', ' + str(bad) + ' failed' if bad else ''}")

    rows = bench_project(project, built, family, opts, on_rows)
    for v in variants:
        if v not in built:
            rows.append({"kernel": v["kernel"], "ok": False, "error": {"kind": "missing", "message": "not built"}})
    if json_out:
        from .bench import write_jsonl

        write_jsonl(json_out, prov, rows)
    print_rows(rows, title=f"{manifest['spec']['name']} on {gpu.get('name')}", file=sys.stderr if json_out == "-" else None)
    bad = [r for r in rows if not r.get("ok")]
    if bad:
        raise VerificationFailed(f"{len(bad)} of {len(rows)} row(s) failed: " + ", ".join(sorted({f'{r.get("kernel")} ({(r.get("error") or {}).get("kind", "verification")})' for r in bad})))


# --------------------------------------------------------------------------------------------


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--shapes", default=None, help="Shapes to optimise for (default: the spec's shapes).")
@click.option("--budget", type=click.IntRange(1), default=None, help="Most variants to evaluate (default: all).")
@click.option("--strategy", type=click.Choice(["exhaustive", "random"]), default="exhaustive", show_default=True)
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Seed of the random strategy.")
@click.option("-o", "--out", "out_root", default="generated", show_default=True, help="Output root of the search project.")
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None)
@click.option("--reps", type=click.IntRange(1, 100000), default=None)
@click.option("--warmup", type=click.IntRange(0, 100000), default=None)
@click.option("--inject", type=click.IntRange(0, 1 << 20), default=0, help="Search with this many faults injected per launch.")
@click.option("--timeout", type=click.FloatRange(1), default=600.0, show_default=True)
@click.option("--json", "json_out", default=None, help="Write every row (JSON lines with provenance) to PATH or -.")
@click.option("--no-cache", is_flag=True, help="Ignore (but still update) the results cache.")
def search(spec, shapes, budget, strategy, seed, out_root, jobs, reps, warmup, inject, timeout, json_out, no_cache) -> None:
    """Build and bench the spec's space; best variant per shape as a table, a spec and a dispatch header."""
    from .bench import BenchOptions, gpu_info, write_jsonl
    from .build import nvcc_version
    from .report.provenance import provenance
    from .report.table import print_rows
    from .search import STRATEGIES, ResultsCache, check_dispatch_compiles, dispatch_header, search as do_search, winners_spec
    from .spec import load_spec, parse_shapes

    s = load_spec(spec)
    shape_list = parse_shapes(s.family, shapes) if shapes else s.shapes
    opts = BenchOptions(reps=reps, warmup=warmup, inject=inject, timeout=timeout)
    try:
        gpu = gpu_info()
    except NoGpuError:
        # generate and build what the search would run, then say plainly that running needs a GPU
        from .codegen.emit import generate as do_generate
        from .spec import Spec

        proj = Spec(s.source, f"{s.name}-search", s.family, s.arch, s.description, s.shapes, s.variants, s.rejected, s.raw)
        g = do_generate(proj, out_root)
        _report_build(_run_build(g.out_dir, jobs, None, None))
        raise
    cache = ResultsCache()
    if no_cache:
        cache.entries = {}
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
        log=(lambda m: _err(m)) if _stderr_tty() else (lambda m: None),
    )
    fails = {}
    for r in result.rows:
        if not r.get("ok"):
            k = (r.get("error") or {}).get("kind", "verification")
            fails[k] = fails.get(k, 0) + 1
    _err(
        f"search: {len(result.evaluated)} variant(s) x {len(shape_list)} shape(s); compiled {result.compiled}, ran {result.ran}, "
        f"cache hits {result.cache_hits}; failures: {json.dumps(fails) if fails else 'none'}"
    )
    best_rows = list(result.best.values())
    print_rows(best_rows, title=f"best variant per shape ({gpu.get('name')})", file=sys.stderr if json_out == "-" else None)
    if result.project is not None:  # SM count, compute capability, L2 from a built executable
        built = sorted((result.project / "bin").glob("*"))
        if built:
            try:
                gpu = {**gpu, **gpu_info(built[0])}
            except NoGpuError:
                pass
    prov = provenance(gpu, spec=s.source, strategy=strategy, budget=budget, nvcc=nvcc_version())
    if json_out:
        write_jsonl(json_out, prov, result.rows, [{"best": {k: r["kernel"] for k, r in result.best.items()}}])
    missing = [s.family.format_shape(x) for x in shape_list if s.family.format_shape(x) not in result.best]
    if result.best and result.project is not None:
        spec_path = result.project / f"{s.name}_best.yaml"
        spec_path.write_text(winners_spec(s, result, shape_list))
        hdr = result.project / f"{s.name.replace('-', '_')}_dispatch.h"
        hdr.write_text(dispatch_header(s, result))
        ok, log = check_dispatch_compiles(hdr, result.project)
        _err(f"winners spec: {spec_path}\ndispatch header: {hdr} ({'compiles' if ok else 'DOES NOT COMPILE'})")
        if not ok:
            _err(log)
            raise FtgenError("the generated dispatch header does not compile (a bug in ftgen)")
    if missing:
        raise VerificationFailed(f"no verified variant for shape(s): {', '.join(missing)}")


# --------------------------------------------------------------------------------------------


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--trials", type=click.IntRange(1, 10**6), default=1000, show_default=True, help="Clean trials and faulty trials, each, per distribution.")
@click.option("--dists", default="normal,uniform,loguniform", show_default=True, help="Input distributions (comma-separated).")
@click.option("--shape", "shape_text", default=None, help="Problem shape of the trials (default: the family's campaign shape).")
@click.option("--kernels", default=None, help="Only variants whose names match this glob.")
@click.option("--seed", type=click.IntRange(0), default=1, show_default=True)
@click.option("-o", "--out", "out_root", default="generated", show_default=True, help="Output root of the project.")
@click.option("-j", "--jobs", type=click.IntRange(1, 512), default=None)
@click.option("--json", "json_out", default=None, help="Write trials, per-bit and ROC rows and the summaries (JSON lines) to PATH or -.")
@click.option("--plot", "plot_out", default=None, help="Write the ROC / per-bit plot (PNG) to PATH.")
@click.option("--timeout", type=click.FloatRange(1), default=900.0, show_default=True, help="Seconds per executable run.")
def campaign(spec, trials, dists, shape_text, kernels, seed, out_root, jobs, json_out, plot_out, timeout) -> None:
    """Fault campaign: N clean + N single-fault trials per variant and input distribution; coverage,
    false alarms, per-bit statistics and a ROC curve over the detection threshold."""
    import fnmatch

    from .bench import gpu_info, write_jsonl
    from .codegen.emit import generate as do_generate
    from .faults import DISTS, campaign as do_campaign, per_bit, plot, roc
    from .report.provenance import provenance
    from .spec import load_spec, parse_shapes

    s = load_spec(spec)
    dist_list = [d.strip() for d in dists.split(",") if d.strip()]
    for d in dist_list:
        if d not in DISTS:
            raise SpecError(f"--dists: {d!r} is not one of {', '.join(DISTS)}")
    chosen = [v for v in s.variants if v.protection.injects]
    if kernels:
        chosen = [v for v in chosen if any(fnmatch.fnmatchcase(v.name, g.strip()) for g in kernels.split(","))]
    if not chosen:
        raise SpecError(f"{spec}: a campaign needs protected variants built with protection.inject: true (none selected)")
    fam = s.family
    shape = parse_shapes(fam, shape_text)[0] if shape_text else dict(getattr(fam, "campaign_shape", None) or fam.default_shapes[0])
    g = do_generate(s, out_root)
    _remember(g.out_dir, out_root)
    pattern = ",".join(v.name for v in chosen)
    _report_build(_run_build(g.out_dir, jobs, None, pattern))
    gpu = gpu_info(g.out_dir / "bin" / chosen[0].name)
    from .build import load_manifest, select_variants

    variants = select_variants(load_manifest(g.out_dir), pattern)
    rows, summaries = do_campaign(
        g.out_dir, variants, shape=fam.format_shape(shape), trials=trials, dists=dist_list, seed=seed,
        timeout=timeout, spec_name=s.source, log=(lambda m: _err(m)) if _stderr_tty() else (lambda m: None),
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
        write_jsonl(json_out, provenance(gpu, spec=s.source, trials=trials, dists=dist_list, shape=shape), rows, extra)
    if plot_out:
        why = plot(Path(plot_out), summaries, rocs, bits)
        if why:
            _err(why)
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"fault campaign, {fam.format_shape(shape)}, {trials}+{trials} trials per distribution ({gpu.get('name')})")
    for col in ("kernel", "clean", "faulty", "significant", "detected", "corrected", "coverage", "false alarms", "max resid err"):
        t.add_column(col, justify="left" if col == "kernel" else "right")
    for x in summaries:
        cov = "-" if x["coverage"] is None else f"{100 * x['coverage']:.2f}%"
        t.add_row(x["kernel"], str(x["clean_trials"]), str(x["faulty_trials"]), str(x["significant"]), str(x["detected"]),
                  str(x["corrected"]), cov, str(x["false_alarms"]), f"{x['max_residual_rel_err']:.1e}")
    Console(file=sys.stderr if json_out == "-" else sys.stdout, width=200).print(t)
    failed = [r for r in rows if "trial" not in r and not r.get("ok", True)]
    if failed:
        err = failed[0].get("error")
        raise FtgenError(f"{len(failed)} executable run(s) failed during the campaign: "
                         f"{err.get('message') if isinstance(err, dict) else err}")


# --------------------------------------------------------------------------------------------


@cli.command(name="list")
@click.argument("family", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(family, as_json) -> None:
    """Families, their parameters, schemes and constraints."""
    from . import families

    names = families.names()
    if family and family not in names:
        raise SpecError(f"{family!r} is not a family; available: {', '.join(names)}")
    descs = [families.get(n).describe() for n in ([family] if family else names)]
    if as_json:
        click.echo(json.dumps(descs, indent=2))
        return
    for d in descs:
        click.echo(f"{d['family']}: {d['description']}")
        click.echo(f"  precisions: {', '.join(d['precisions'])}")
        click.echo(f"  shape keys: {', '.join(d['shape_keys'])}")
        for b in d["backends"]:
            click.echo(f"  backend {b['name']}: {', '.join(b['precisions'])}; requires {', '.join(b['requires']) or '-'}")
            click.echo("    schemes: " + "; ".join(f"{k}: {', '.join(v) or '-'}" for k, v in b["schemes"].items()))
            for p in b["params"]:
                allowed = p["choices"] or (f"{p['range'][0]}..{p['range'][1]}" if p["range"] else p["type"])
                click.echo(f"    {p['name']}: {allowed} (default {p['default']}) {p['doc']}".rstrip())
        if d["constraints"]:
            click.echo("  constraints:")
            for c in d["constraints"]:
                click.echo(f"    {c}")
        click.echo()


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="ftgen", standalone_mode=False)
    except click.exceptions.Abort:
        _err("aborted")
        return 1
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
        _err(("error: " if e.exit_code in (1, 2, 3) else "") + e.message)
        return e.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except Exception as e:  # a bug: the message, not a traceback, unless --debug
        if debug:
            raise
        _err(f"internal error: {type(e).__name__}: {e} (run with --debug for a traceback)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
