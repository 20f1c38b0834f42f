"""Load, validate and expand a spec.

Every error names the file, the field path, the bad value and what is allowed. All checks run
before anything is written, so a bad spec leaves the disk untouched.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import families
from ..errors import SpecError, SpecErrors
from ..families.base import (
    ARCHS,
    CORRECT_MODES,
    PRECISIONS,
    SCHEMES,
    Family,
    Protection,
    Variant,
    check_type,
    suggest,
)

TOP_KEYS = ("name", "family", "description", "arch", "precision", "protection", "params", "shapes", "variants")
PROTECTION_KEYS = ("scheme", "level", "correct", "interval", "threshold", "inject")
VARIANT_KEYS = ("precision", "protection", "params")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass
class Rejected:
    point: dict
    reasons: list[str]


@dataclass
class Spec:
    source: str
    name: str
    family: Family
    arch: tuple[str, ...]
    description: str
    shapes: list[dict[str, int]]
    variants: list[Variant]
    rejected: list[Rejected] = field(default_factory=list)
    raw: dict = field(default_factory=dict)

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


# --------------------------------------------------------------------------------------------


class _Errors:
    """Collects independent errors so the user sees all of them in one go."""

    def __init__(self, source: str):
        self.source = source
        self.items: list[SpecError] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(SpecError(message, source=self.source, path=path))

    def raise_if_any(self) -> None:
        if len(self.items) == 1:
            raise self.items[0]
        if self.items:
            raise SpecErrors(self.items)


def load_spec(path: str | Path) -> Spec:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec file not found: {p}")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read spec: {e}", source=str(p)) from None
    return load_spec_text(text, str(p))


def load_spec_text(text: str, source: str = "<spec>") -> Spec:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{where}: not valid YAML: {problem}", source=source) from None
    if not isinstance(raw, dict):
        raise SpecError(
            f"the spec must be a YAML mapping with keys {', '.join(TOP_KEYS[:2])}, ..., not {type(raw).__name__}",
            source=source,
        )
    return _build(raw, source)


def _unknown_keys(errs: _Errors, mapping: dict, allowed, where: str) -> None:
    for key in mapping:
        if key not in allowed:
            path = f"{where}.{key}" if where else str(key)
            errs.add(path, f"unknown key{suggest(key, allowed)}; allowed keys: {', '.join(allowed)}")


def _as_list(value: Any) -> tuple[list, bool]:
    """Values of a field (a scalar or a list), and whether it was a list."""
    if isinstance(value, list):
        return value, True
    return [value], False


def _item_path(where: str, i: int, was_list: bool) -> str:
    return f"{where}[{i}]" if was_list else where


def _build(raw: dict, source: str) -> Spec:
    errs = _Errors(source)
    _unknown_keys(errs, raw, TOP_KEYS, "")

    # ---- name ---------------------------------------------------------------------------
    name = raw.get("name")
    if name is None:
        errs.add("name", "missing; give the output directory name ([a-z0-9_-], e.g. sgemm_demo)")
    elif not isinstance(name, str) or not NAME_RE.match(name):
        errs.add(
            "name",
            f"{name!r} is not allowed: use lower-case letters, digits, '_' and '-' only, starting with a letter or digit (no '/', '..' or spaces)",
        )

    # ---- family -------------------------------------------------------------------------
    fam_name = raw.get("family")
    family: Family | None = None
    known = families.names()
    if fam_name is None:
        errs.add("family", f"missing; one of {', '.join(known)}")
    elif not isinstance(fam_name, str) or fam_name not in known:
        errs.add("family", f"{fam_name!r} is not a family{suggest(fam_name, known)}; available: {', '.join(known)}")
    else:
        family = families.get(fam_name)

    # ---- description --------------------------------------------------------------------
    description = raw.get("description", "")
    if not isinstance(description, str):
        errs.add("description", f"{description!r} is not a string")
        description = ""

    # ---- arch ---------------------------------------------------------------------------
    arch_vals, arch_list = _as_list(raw.get("arch", ["sm_80", "sm_90"]))
    archs: list[str] = []
    if not arch_vals:
        errs.add("arch", "is empty; give one or more of " + ", ".join(ARCHS))
    for i, a in enumerate(arch_vals):
        if a not in ARCHS:
            errs.add(_item_path("arch", i, arch_list), f"{a!r} is not a supported arch{suggest(a, ARCHS)}; allowed: {', '.join(ARCHS)}")
        elif a not in archs:
            archs.append(a)

    if family is None:
        errs.raise_if_any()
        raise AssertionError("unreachable")  # pragma: no cover

    # ---- shapes -------------------------------------------------------------------------
    shapes: list[dict[str, int]] = []
    raw_shapes = raw.get("shapes")
    if raw_shapes is None:
        shapes = [dict(s) for s in family.default_shapes]
    elif not isinstance(raw_shapes, list) or not raw_shapes:
        errs.add("shapes", f"must be a non-empty list of mappings with keys {', '.join(family.shape_keys)}")
    else:
        for i, s in enumerate(raw_shapes):
            try:
                shapes.append(family.normalize_shape(s, f"shapes[{i}]", source))
            except SpecError as e:
                errs.items.append(e)

    # ---- the points of the space: base fields, and optional explicit variants -------------
    base = {k: raw[k] for k in VARIANT_KEYS if k in raw}
    groups: list[tuple[str, dict]] = []
    if "variants" in raw:
        vlist = raw["variants"]
        if not isinstance(vlist, list) or not vlist:
            errs.add("variants", "must be a non-empty list of mappings with keys precision, protection, params")
        else:
            for i, item in enumerate(vlist):
                if not isinstance(item, dict):
                    errs.add(f"variants[{i}]", f"{item!r} is not a mapping")
                    continue
                _unknown_keys(errs, item, VARIANT_KEYS, f"variants[{i}]")
                merged = dict(base)
                for key in VARIANT_KEYS:
                    if key in item:
                        if isinstance(item[key], dict) and isinstance(merged.get(key), dict):
                            merged[key] = {**merged[key], **item[key]}
                        else:
                            merged[key] = item[key]
                groups.append((f"variants[{i}].", merged))
    else:
        groups.append(("", base))

    points: list[tuple[str, Protection, dict[str, Any]]] = []
    for prefix, fields in groups:
        points.extend(_expand_group(errs, family, prefix, fields))

    errs.raise_if_any()
    assert isinstance(name, str)

    variants: list[Variant] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    symbols: dict[str, str] = {}
    for precision, prot, params in points:
        reason = family.protection_ok(precision, prot)
        backend = family.backend(precision, prot, params) if reason is None else ""
        point = {"precision": precision, "protection": prot.to_dict(), "params": params}
        if reason:
            rejected.append(Rejected(point, [reason]))
            continue
        chosen = family.select_backend(precision, prot)
        if backend and chosen is not None and backend != chosen.name:  # a backend selected by params (gemm's cutlass90)
            defs = {p.name: p for p in family.backend_named(backend).param_defs(precision, prot)}
        else:
            defs = {p.name: p for p in family.param_defs(precision, prot)}
        unused = [k for k in params if k not in defs]
        full = {pname: params.get(pname, pdef.default[0]) for pname, pdef in defs.items()}
        # parameters the spec omitted take their default(s); several defaults expand too
        open_defaults = [(pn, pd.default) for pn, pd in defs.items() if pn not in params and len(pd.default) > 1]
        reasons_unused = (
            [f"params {', '.join(unused)} do not apply to the {backend or family.name} backend of {precision} (it takes {', '.join(defs)})"]
            if unused
            else []
        )
        for combo in itertools.product(*[vals for _, vals in open_defaults]):
            full2 = dict(full)
            for (pn, _), val in zip(open_defaults, combo):
                full2[pn] = val
            ordered = tuple((pn, full2[pn]) for pn in defs)
            v = Variant(family.name, precision, prot, ordered, tuple(archs), backend)
            reasons = reasons_unused + family.constraints(v)
            if reasons:
                rejected.append(Rejected({**point, "params": dict(ordered)}, reasons))
                continue
            v = Variant(family.name, precision, prot, ordered, tuple(archs), backend, family.kernel_name(v))
            if v.name in seen:
                continue
            seen.add(v.name)
            if v.symbol in symbols:
                raise SpecError(f"kernel names {symbols[v.symbol]} and {v.name} map to one C symbol {v.symbol}", source=source)
            symbols[v.symbol] = v.name
            variants.append(v)

    if not variants:
        lines = [f"no valid variant: all {len(rejected)} points of the space were rejected:"]
        for r in rejected[:8]:
            lines.append(f"  {_point_str(r.point)}: {'; '.join(r.reasons)}")
        if len(rejected) > 8:
            lines.append(f"  ... and {len(rejected) - 8} more")
        raise SpecError("\n".join(lines), source=source, path="params")

    return Spec(source, name, family, tuple(archs), description, shapes, variants, rejected, raw)


def _point_str(point: dict) -> str:
    params = ",".join(f"{k}={v}" for k, v in point.get("params", {}).items())
    prot = point.get("protection", {})
    scheme = prot.get("scheme", "none")
    ptxt = scheme if scheme == "none" else f"{scheme}/{prot.get('level')}"
    return f"{point.get('precision')} {ptxt} {params}"


def _expand_group(errs: _Errors, family: Family, prefix: str, fields: dict):
    """Validate one group's precision/protection/params and yield its cartesian points."""
    n_before = len(errs.items)

    # precision
    prec_vals, prec_list = _as_list(fields.get("precision", family.precisions[0]))
    precisions = []
    for i, p in enumerate(prec_vals):
        path = _item_path(prefix + "precision", i, prec_list)
        if p not in PRECISIONS:
            errs.add(path, f"{p!r} is not a precision{suggest(p, PRECISIONS)}; allowed for {family.name}: {', '.join(family.precisions)}")
        elif p not in family.precisions:
            errs.add(path, f"{p!r} is not available for family {family.name}; allowed: {', '.join(family.precisions)}")
        else:
            precisions.append(p)

    # protection
    prot_raw = fields.get("protection", {})
    prot_opts: dict[str, list] = {}
    if prot_raw is None:
        prot_raw = {}
    if not isinstance(prot_raw, dict):
        errs.add(prefix + "protection", f"{prot_raw!r} is not a mapping with keys {', '.join(PROTECTION_KEYS)}")
        prot_raw = {}
    _unknown_keys(errs, prot_raw, PROTECTION_KEYS, prefix + "protection")
    all_levels = sorted({lv for lvs in family.schemes.values() for lv in lvs} | {"none"})
    # levels are checked against every level of the family; a level that does not fit a listed
    # scheme is a rejected point (with its reason), so one spec can sweep schemes and levels
    spec_field = {
        "scheme": (lambda v: _check_scheme(family, v), "none"),
        "level": (
            lambda v: None if v in all_levels else f"{v!r} is not a protection level of family {family.name}{suggest(v, all_levels)}; allowed: {', '.join(all_levels)}",
            None,
        ),
        "correct": (lambda v: None if v in CORRECT_MODES else f"{v!r} is not allowed; use one of {', '.join(CORRECT_MODES)}", "online"),
        "interval": (lambda v: check_type(v, int) or (None if v >= 1 else f"{v} must be at least 1"), 1),
        "threshold": (_check_threshold, "auto"),
        "inject": (lambda v: check_type(v, bool), False),
    }
    for key, (check, default) in spec_field.items():
        vals, was_list = _as_list(prot_raw.get(key, default))
        if was_list and not vals:
            errs.add(prefix + f"protection.{key}", "is an empty list")
        ok = []
        for i, v in enumerate(vals):
            if v is None and key == "level":
                ok.append(None)
                continue
            reason = check(v)
            if reason:
                errs.add(_item_path(prefix + f"protection.{key}", i, was_list), reason)
            else:
                ok.append(float(v) if key == "threshold" and v != "auto" else v)
        prot_opts[key] = ok

    # params
    params_raw = fields.get("params", {}) or {}
    all_defs = family.param_names()
    param_opts: dict[str, list] = {}
    if not isinstance(params_raw, dict):
        errs.add(prefix + "params", f"{params_raw!r} is not a mapping of parameter names to values or lists")
        params_raw = {}
    for key, value in params_raw.items():
        path = prefix + f"params.{key}"
        if key not in all_defs:
            errs.add(path, f"unknown parameter{suggest(key, all_defs)}; {family.name} parameters: {', '.join(all_defs)}")
            continue
        vals, was_list = _as_list(value)
        if was_list and not vals:
            errs.add(path, "is an empty list")
        ok = []
        for i, v in enumerate(vals):
            reason = family.param_reason(key, v)
            if reason:
                errs.add(_item_path(path, i, was_list), reason)
            elif v not in ok:
                ok.append(v)
        param_opts[key] = ok

    if len(errs.items) > n_before:
        return []

    points = []
    pkeys = list(param_opts)
    for precision in precisions:
        for scheme, level, correct, interval, threshold, inject in itertools.product(
            *[prot_opts[k] for k in PROTECTION_KEYS]
        ):
            if scheme == "none" or level == "none":
                prot = Protection()  # unprotected: level, correct, ... and inject do not apply
            else:
                level = level or family.schemes[scheme][0]
                prot = Protection(scheme, level, correct, interval, threshold, inject)
            for combo in itertools.product(*[param_opts[k] for k in pkeys]):
                points.append((precision, prot, dict(zip(pkeys, combo))))
    return points


def _check_scheme(family: Family, v: Any) -> str | None:
    if v not in SCHEMES:
        return f"{v!r} is not a scheme{suggest(v, SCHEMES)}; allowed: {', '.join(SCHEMES)}"
    if v not in family.schemes:
        return f"scheme {v!r} is not available for family {family.name}; it offers: {', '.join(family.schemes)}"
    return None


def _check_threshold(v: Any) -> str | None:
    if v == "auto":
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v!r} is not allowed; use auto or a positive number"
    if not v > 0:
        return f"{v} must be positive (or auto)"
    return None


# --------------------------------------------------------------------------------------------


def parse_shapes(family: Family, text: str) -> list[dict[str, int]]:
    """``--shapes``: comma-separated tokens (``4096x4096x4096``) or a YAML file of shapes."""
    text = text.strip()
    if text.endswith((".yaml", ".yml")) or Path(text).is_file():
        p = Path(text)
        if not p.is_file():
            raise SpecError(f"--shapes: file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise SpecError(f"--shapes: {p}: not valid YAML: {e}") from None
        if isinstance(data, dict) and "shapes" in data:
            data = data["shapes"]
        if not isinstance(data, list) or not data:
            raise SpecError(f"--shapes: {p}: expected a list of shapes (or a mapping with key 'shapes')")
        return [family.normalize_shape(s, f"shapes[{i}]", str(p)) for i, s in enumerate(data)]
    tokens = [t for t in text.split(",") if t.strip()]
    if not tokens:
        raise SpecError("--shapes: no shapes given")
    return [family.parse_shape_token(t) for t in tokens]
