"""The shared library of a project (``ftgen build --lib``): a C interface over its variants.

The library holds, per group of variants that take the same arguments (``Family.library_group``),
one entry point that picks a variant per shape: the variant measured fastest at the nearest searched
shape (log-shape distance, as the dispatch header) among those that run the shape, else the group's
fallback, a variant that runs every legal shape. The winners come from ``dispatch.json``, which
``ftgen search`` writes into its project; without it the table maps the spec's shapes, each to the
first variant (protected ones first) that runs it. When a group has
no variant that runs every legal shape, the family's ``library_fallback`` gives one, built with the
library only.

The sources are rendered from the manifest into ``lib/`` of the project (files rewritten only when
their content changes, stale ones removed); ``lib/ftgen-lib.cmake`` is what the project's
CMakeLists includes when configured with ``-DFTGEN_BUILD_LIB=ON``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..errors import SpecError
from ..fileio import atomic_write, holds
from ..families.base import EmittedVariant, Family, LibraryEntry, Protection, Variant
from ..templating import TemplateEnv

LIB_DIR = "lib"
TABLE_FILE = "dispatch.json"
ABI_VERSION = 5  # 5: ftgen_kmeans_problem gained init and seed


def lib_name(spec_name: str) -> str:
    """The C identifier of a project's library: ftgen_<lib_name>.h, libftgen_<lib_name>.so."""
    return re.sub(r"[^A-Za-z0-9_]", "_", spec_name)


@dataclass
class Group:
    name: str
    entry: LibraryEntry
    members: list[int] = field(default_factory=list)  # library variant indices
    table: list[dict] = field(default_factory=list)  # {"shape", "variant", "ms"} in table order
    fallback: int = -1
    ranges: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)
    legal: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class LibraryPlan:
    name: str  # C identifier
    spec_name: str
    family: Family
    variants: list[Variant]  # library variant index -> variant
    extra: list[str]  # names of fallbacks the project does not hold (built with the library)
    groups: list[Group]
    gpu: str | None = None
    fault_plans: dict[int, str] = field(default_factory=dict)  # variant index -> its fault plan (C++; inject: true only)

    def group(self, name: str) -> Group:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def select(self, group: str, shape: dict) -> int:
        """The variant index a shape runs (what the generated C computes)."""
        g = self.group(group)
        keys = self.family.shape_keys
        best, best_d = g.fallback, -1.0
        for t in g.table:
            if not self.family.runs_shape(self.variants[t["variant"]], shape):
                continue
            d = 0.0
            for key in keys:
                diff = math.log(float(shape[key])) - math.log(float(t["shape"][key]))
                d += diff * diff
            if best_d < 0.0 or d < best_d:
                best_d, best = d, t["variant"]
        return best




def variant_from_manifest(entry: dict) -> Variant:
    prot = Protection(**entry.get("protection", {}))
    return Variant(
        entry.get("family", ""), entry["precision"], prot, tuple((entry.get("params") or {}).items()),
        tuple(entry.get("arch") or ()), entry.get("backend", ""), entry["kernel"],
    )


def read_table(project: Path, manifest: dict, family: Family) -> tuple[list[dict], str | None]:
    """The search's winners of the project ({"shape", "kernel", "ms"} rows) and the GPU they were
    measured on; none when the project has no dispatch.json."""
    path = project / TABLE_FILE
    if not path.is_file():
        return [], None
    bad = f"{path}: not a dispatch table written by ftgen search"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise SpecError(f"{bad} ({str(e)[:80]}); re-run the search or remove the file") from None
    rows = doc.get("winners") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise SpecError(f"{bad} (no winners list); re-run the search or remove the file")
    kernels = {v["kernel"] for v in manifest["variants"]}
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("kernel"), str) or not isinstance(r.get("shape"), dict):
            raise SpecError(f"{bad} (winners[{i}] has no kernel and shape); re-run the search or remove the file")
        if r["kernel"] not in kernels:
            raise SpecError(f"{path}: winners[{i}] names {r['kernel']!r}, which the project does not hold; re-run the search or remove the file")
        try:
            shape = family.normalize_shape(r["shape"], f"winners[{i}].shape", str(path))
        except SpecError as e:
            raise SpecError(f"{bad} ({e}); re-run the search or remove the file") from None
        ms = r.get("ms")
        out.append({"shape": shape, "kernel": r["kernel"], "ms": float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None})
    gpu = doc.get("gpu") if isinstance(doc.get("gpu"), str) else None
    return out, gpu


def dispatch_table(family: Family, best: dict, gpu: dict) -> dict:
    """The content of dispatch.json from a search's best rows (shape string -> row)."""
    rows = []
    for row in best.values():
        shape = family.normalize_shape(row["shape"], "shape")
        rows.append({"shape": shape, "kernel": row["kernel"], "ms": row["ms"]["median"]})
    return {"gpu": gpu.get("name", "?"), "winners": rows}


def write_dispatch_table(project: Path, family: Family, best: dict, gpu: dict) -> Path:
    path = project / TABLE_FILE
    atomic_write(path, json.dumps(dispatch_table(family, best, gpu), indent=1) + "\n")
    return path


def plan_library(manifest: dict, family: Family, table: list[dict] | None = None, gpu: str | None = None) -> LibraryPlan:
    """Which variants the library holds and how each group chooses among them. With a table only the
    winners and each group's fallback are in the library; without one, every variant of the project."""
    project_variants = [variant_from_manifest(e) for e in manifest["variants"]]
    by_name = {v.name: v for v in project_variants}
    table = list(table or [])
    winners = list(dict.fromkeys(t["kernel"] for t in table))
    variants: list[Variant] = []
    index: dict[str, int] = {}

    def add(v: Variant) -> int:
        if v.name not in index:
            index[v.name] = len(variants)
            variants.append(v)
        return index[v.name]

    # the order of candidates for a group's fallback: the winners, then the project's protected
    # variants, then the rest (each in the project's order)
    rest = [v for v in project_variants if v.name not in winners]
    order = [by_name[k] for k in winners] + sorted(rest, key=lambda v: not v.protection.enabled)
    groups: dict[str, Group] = {}
    for v in (order if not winners else [by_name[k] for k in winners]):
        gname = family.library_group(v)
        if gname not in groups:
            groups[gname] = Group(gname, family.library_entry(v), legal=family.library_legal(v))
        groups[gname].members.append(add(v))
    extra: list[str] = []
    for g in groups.values():
        fb = next((v for v in order if family.library_group(v) == g.name and family.runs_every_legal_shape(v, g.legal)), None)
        if fb is None:
            first = variants[g.members[0]]
            fb = family.library_fallback(first)
            if fb is None or family.library_group(fb) != g.name or not family.runs_every_legal_shape(fb, g.legal):
                raise SpecError(
                    f"the library's {g.name} entry has no variant that runs every legal shape and family {family.name} "
                    f"cannot make one; add such a variant to the spec"
                )
            if fb.name not in by_name:
                extra.append(fb.name)
        g.fallback = add(fb)
        if g.fallback not in g.members:
            g.members.append(g.fallback)
    if not table:
        # no search: the spec's shapes, each to the first variant (protected first) that runs it
        for raw in manifest["spec"].get("shapes") or []:
            try:
                shape = family.normalize_shape(raw, "spec.shapes")
            except SpecError:
                continue
            for v in order:
                if v.name in index and family.runs_shape(v, shape):
                    table.append({"shape": shape, "kernel": v.name, "ms": None})
                    break
    for g in groups.values():
        g.ranges = {i: family.library_range(variants[i]) for i in g.members}
        g.table = [{"shape": t["shape"], "variant": index[t["kernel"]], "ms": t["ms"]} for t in table if family.library_group(variants[index[t["kernel"]]]) == g.name]
    plans = {i: family.library_fault_plan(v).replace("{sym}", v.symbol) for i, v in enumerate(variants)}
    return LibraryPlan(lib_name(manifest["spec"]["name"]), manifest["spec"]["name"], family, variants, extra, list(groups.values()), gpu,
                       {i: text for i, text in plans.items() if text})


def _c_range(rng: dict[str, tuple[int, int]]) -> str:
    parts = [f"{key} >= {lo}LL && {key} <= {hi}LL" for key, (lo, hi) in rng.items()]
    return " && ".join(parts) if parts else "1"


def _c_runs(rng: dict[str, tuple[int, int]], rule) -> str:
    """The C condition of a variant's shapes: its range, and the family's rule beyond it (as a C expression)."""
    return _c_range(rng) if rule is None else f"{_c_range(rng)} && ({rule[1]})"


def _legal_doc(legal: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{lo} <= {key} <= {hi}" for key, (lo, hi) in legal.items())


def c_params(text: str) -> list[list[str]]:
    """'int m, const float* A' -> [['int', 'm'], ['const float*', 'A']] (a C parameter list, no function pointers)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part or part == "void":
            continue
        decl, _, pname = part.rpartition(" ")
        stars = len(pname) - len(pname.lstrip("*"))
        out.append([(decl + "*" * stars).strip(), pname.lstrip("*")])
    return out


def describe(plan: LibraryPlan) -> dict:
    """The library's interface as data (ftgen_<name>.json, installed beside the library): what a binding such as
    ftgen.torch needs to call it without parsing the header."""
    return {
        "name": plan.name,
        "abi_version": ABI_VERSION,
        "family": plan.family.name,
        "spec": plan.spec_name,
        "ftgen_version": __version__,
        "gpu": plan.gpu,
        "shape_keys": list(plan.family.shape_keys),
        "variants": [v.name for v in plan.variants],
        "inject": [plan.variants[i].name for i in sorted(plan.fault_plans)],
        "groups": [
            {"name": g.name, "params": c_params(g.entry.params), "workspace_params": c_params(g.entry.workspace_params),
             "shape": list(g.entry.shape), "doc": g.entry.doc, "fallback": plan.variants[g.fallback].name}
            for g in plan.groups
        ],
    }


def render_library(plan: LibraryPlan, env: TemplateEnv | None = None) -> dict[str, str]:
    """The library's files, paths relative to the project."""
    env = env or TemplateEnv()
    fam = plan.family
    name = plan.name
    groups = []
    for g in plan.groups:
        ws_names = {p.split()[-1].lstrip("*") for p in g.entry.workspace_params.split(",") if p.strip()}
        groups.append({
            "name": g.name,
            "entry": g.entry,
            "members": g.members,
            "table": g.table,
            "fallback": g.fallback,
            "runs": {i: _c_runs(g.ranges[i], plan.family.shape_fits(plan.variants[i])) for i in g.members},
            "workspace": {i: g.entry.workspace.format(sym=plan.variants[i].symbol) for i in g.members},
            "call": {i: g.entry.call.replace("{launch}", plan.variants[i].symbol) for i in g.members},
            "faults": {i: plan.fault_plans.get(i, "") for i in g.members},
            "ws_selects": set(fam.shape_keys) <= ws_names,
            "legal_doc": _legal_doc(g.legal),
        })
    ctx = {
        "name": name,
        "NAME": "FTGEN_" + name.upper(),
        "guard": "FTGEN_" + name.upper() + "_H",
        "spec_name": plan.spec_name,
        "family": fam.name,
        "ftgen_version": __version__,
        "version": __version__,
        "abi_version": ABI_VERSION,
        "variants": plan.variants,
        "groups": groups,
        "keys": fam.shape_keys,
        "gpu": plan.gpu,
        "inject_variants": sorted(plan.fault_plans),
    }
    files = {
        f"{LIB_DIR}/ftgen_{name}.json": json.dumps(describe(plan), indent=1) + "\n",
        f"{LIB_DIR}/ftgen_{name}.h": env.render("common/ftgen_lib.h.j2", ctx),
        f"{LIB_DIR}/ftgen_{name}_select.h": env.render("common/ftgen_lib_select.h.j2", ctx),
        f"{LIB_DIR}/ftgen_{name}.cu": env.render("common/ftgen_lib.cu.j2", ctx),
        f"{LIB_DIR}/ftgen_{name}-config.cmake": env.render("cmake/ftgen-config.cmake.j2", ctx),
    }
    extra: list[EmittedVariant] = []
    for v in plan.variants:
        if v.name in plan.extra:
            ev = fam.emit(v, env)
            for rel, text in ev.files.items():
                if rel in ev.library_sources or rel == ev.header or not rel.endswith(".cu"):
                    files[f"{LIB_DIR}/{rel}"] = text
            extra.append(ev)
    from .emit import cuda_arch_numbers

    files[f"{LIB_DIR}/ftgen-lib.cmake"] = env.render(
        "cmake/ftgen-lib.cmake.j2", {**ctx, "extra": extra, "cuda_arch_numbers": cuda_arch_numbers}
    )
    return files


def write_library(project: Path, manifest: dict, family: Family, env: TemplateEnv | None = None) -> LibraryPlan:
    """Render the library into ``project/lib/``: changed files rewritten atomically, stale ones removed."""
    table, gpu = read_table(project, manifest, family)
    plan = plan_library(manifest, family, table, gpu)
    files = render_library(plan, env)
    root = project / LIB_DIR
    for rel, text in files.items():
        if not holds(project / rel, text):
            atomic_write(project / rel, text)
    if root.is_dir():
        for p in sorted(root.rglob("*"), reverse=True):
            rel = p.relative_to(project).as_posix()
            if p.is_file() and rel not in files:
                p.unlink()
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    return plan
