"""The command line's side of searches and campaigns across jobs: a shard's search project, the outputs of
a search (best-per-shape table, winners spec, dispatch header) and the `--from` merges of sharded searches
and campaigns. Compiles and runs nothing but the header check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from ..errors import FtgenError, SpecError, VerificationFailed


def check_merge_flags(command: str, merge: bool, results: tuple, gpus_text, shard_text) -> None:
    """Results files go with --from and --from with results files; a merge runs nothing."""
    if results and not merge:
        raise SpecError(f"{command}: unexpected argument(s) after SPEC: {' '.join(results)[:200]}; to merge results files, add --from")
    if merge and not results:
        raise SpecError(f"--from: give the results files to merge after SPEC, e.g. `ftgen {command} SPEC --from a.jsonl b.jsonl`")
    if merge and (gpus_text or shard_text):
        raise SpecError("--from compiles and runs nothing: it takes no --gpus or --shard")


def shard_spec(spec, n_shapes: int, shard: tuple[int, int] | None, chosen: list | None = None):
    """The search project of a shard (or of the whole search): the variants with points in it, of ``chosen`` (what the
    strategy proposes within the budget) or else of the whole space."""
    from ..spec import Spec
    from . import search_project_name
    from .shard import shard_points

    chosen = spec.variants if chosen is None else chosen
    mine = shard_points([v.name for v in chosen], n_shapes, *shard) if shard else None
    todo = [v for v in chosen if mine is None or v.name in mine]
    return Spec(spec.source, search_project_name(spec.name, shard), spec.family, spec.arch, spec.description, spec.shapes,
                todo, spec.rejected, spec.raw)


def search_outputs(s, result, shape_list, json_out, check: bool | None, log: Callable[[str], None], shard: str | None = None,
                   tuning_path: str | None = None, prov: dict | None = None) -> None:
    """The best-per-shape table, the winners spec, the dispatch header (compiled when ``check``; None: when the
    project holds the winners' sources) and the dispatch table of `ftgen build --lib`; with ``tuning_path`` the
    family's tuning entries from the winners merged into that tuning file. A shard (``I/N``) prints its table only:
    its best rows are no winners; `--from` merges the shards."""
    from ..report.table import print_rows
    from . import check_dispatch_compiles, dispatch_header, winners_spec

    where = f" in shard {shard}" if shard else ""
    print_rows(list(result.best.values()), title=f"best variant per shape{where} ({result.gpu.get('name')})",
               file=sys.stderr if json_out == "-" else None)
    if shard:
        if not json_out:
            log("warning: --shard without --json: this part's rows are only in the results cache; give --json to merge them with --from")
        return
    missing = [s.family.format_shape(x) for x in shape_list if s.family.format_shape(x) not in result.best]
    if result.best and result.project is not None:
        result.project.mkdir(parents=True, exist_ok=True)
        spec_path = result.project / f"{s.name}_best.yaml"
        spec_path.write_text(winners_spec(s, result, shape_list))
        hdr = result.project / f"{s.name.replace('-', '_')}_dispatch.h"
        hdr.write_text(dispatch_header(s, result))
        from ..codegen.library import write_dispatch_table

        write_dispatch_table(result.project, s.family, result.best, result.gpu)  # what `ftgen build --lib` dispatches by
        if check is None:
            check = all((result.project / r["kernel"] / f"{r['kernel']}.h").is_file() for r in result.best.values())
        if check:
            ok, text = check_dispatch_compiles(hdr, result.project)
            log(f"winners spec: {spec_path}\ndispatch header: {hdr} ({'compiles' if ok else 'DOES NOT COMPILE'})")
            if not ok:
                log(text)
                raise FtgenError("the generated dispatch header does not compile (a bug in ftgen)")
        else:
            log(f"winners spec: {spec_path}\ndispatch header: {hdr} (not compiled: the winners' sources are not under "
                f"{result.project}; `ftgen generate` the winners spec to build them)")
    if tuning_path and result.best:
        write_tuning(tuning_path, s, list(result.best.values()), prov or {}, log)
    if missing:
        raise VerificationFailed(f"no verified variant for shape(s): {', '.join(missing)}")


def write_tuning(path: str, s, winners: list[dict], prov: dict, log: Callable[[str], None]) -> None:
    """The family's tuning entries from the search's winners, merged into the tuning file at ``path``."""
    from .. import tuning

    entries = s.family.tuning_entries(winners)
    if not entries:
        log(f"--write-tuning: the {s.family.name} family records no tuning entry for these winners; {path} unchanged")
        return
    what = {"what": f"ftgen search {s.source}", "gpu": prov.get("gpu"), "git_sha": prov.get("git_sha"),
            "git_dirty": prov.get("git_dirty"), "utc": prov.get("utc")}
    written = tuning.write(path, s.family.name, entries, what)
    log(f"tuning: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} merged into {written}")


def merge_search_files(s, results, shape_list, out_root: str, json_out, log: Callable[[str], None],
                       tuning_path: str | None = None) -> None:
    """`search --from`: the shards' rows merged, then the same outputs as a search (in OUT/<name>-search), the
    tuning file's entries included (``tuning_path``, `--write-tuning`)."""
    from ..bench import write_jsonl
    from ..report.provenance import provenance
    from . import SearchResult, best_per_shape, search_project_name
    from .shard import merge_search

    merged = merge_search(list(results), s.family)
    for note in merged.notes:
        log(f"warning: {note}")
    names = {v.name for v in s.variants}
    strangers = sorted({r["kernel"] for r in merged.rows if r.get("kernel") is not None and r["kernel"] not in names})
    if strangers:
        raise SpecError(f"--from: {len(strangers)} kernel(s) in the files are no variants of {s.source}: "
                        f"{', '.join(strangers[:5])}; give the spec the shards searched")
    shape_list = shape_list or merged.shapes or s.shapes
    result = SearchResult(rows=merged.rows, gpu=merged.gpu)
    result.evaluated = list(dict.fromkeys(r["kernel"] for r in merged.rows if r.get("kernel") is not None))
    result.best = best_per_shape(s.family, merged.rows, [s.family.format_shape(x) for x in shape_list])
    result.project = Path(out_root) / search_project_name(s.name)
    log(f"search --from: {len(results)} file(s), {len(merged.rows)} row(s) of {len(result.evaluated)} variant(s)")
    prov = provenance(merged.gpu, spec=s.source, merged_from=[str(p) for p in results], shards_git_sha=merged.commits,
                      shapes=shape_list)
    if json_out:
        write_jsonl(json_out, prov, merged.rows, [{"best": {k: r["kernel"] for k, r in result.best.items()}}])
    # the dispatch header includes the winners' headers: it is compiled where the project holds them
    search_outputs(s, result, shape_list, json_out, None, log, tuning_path=tuning_path, prov=prov)


def merge_campaign_files(s, results, chosen, log: Callable[[str], None]):
    """`campaign --from`: the merged shards (:class:`ftgen.search.shard.MergedCampaign`) and their summaries, the
    campaign's settings read from the files."""
    from ..faults import summarize
    from .shard import merge_campaign

    m = merge_campaign(list(results), [v.name for v in chosen])
    if m.shape:
        s.family.normalize_shape(m.shape, f"--from {results[0]}: provenance shape")
    for note in m.notes:
        log(f"warning: {note}")
    names = {v.name for v in chosen}
    strangers = [k for k in m.kernels if k not in names]
    if strangers:
        raise SpecError(f"--from: {len(strangers)} kernel(s) in the files are no campaign variants of {s.source}: "
                        f"{', '.join(strangers[:5])}; give the spec the shards ran")
    summaries = [summarize(k, [r for r in m.rows if r.get("kernel") == k and "trial" in r], s.source) for k in m.kernels]
    return m, summaries
