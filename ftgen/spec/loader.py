"""Load, validate and expand a spec.

Every error names the file, the field path, the bad value and what is allowed. All checks run
before anything is written, so a bad spec leaves the disk untouched.
"""

from __future__ import annotations

import itertools
import math
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import families
from ..errors import SpecError, SpecErrors, short
from ..families.base import (
    ARCHS,
    CORRECT_MODES,
    PRECISIONS,
    SCHEMES,
    Family,
    Param,
    Protection,
    Variant,
    check_type,
)
from ..families.base import suggest as _suggest


def suggest(word: Any, candidates) -> str:
    """' (did you mean ...?)' for a short misspelling; nothing for long or odd values."""
    if not isinstance(word, (str, int, float)) or len(str(word)) > 64:
        return ""
    return _suggest(word, candidates)

TOP_KEYS = ("name", "family", "description", "arch", "precision", "protection", "params", "shapes", "variants")
PROTECTION_KEYS = ("scheme", "level", "correct", "interval", "threshold", "inject")
VARIANT_KEYS = ("precision", "protection", "params")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")  # used with fullmatch: no trailing newline slips through
NAME_MAX = 64  # the project directory's name; kernel names derived from it stay far below NAME_MAX of file systems
INT32_MAX = 2**31 - 1  # integers reach kernels as C `int`
SPEC_MAX_BYTES = 1 << 20  # a spec is a page of YAML; larger input is refused before parsing
YAML_MAX_NODES = 100_000  # nodes of the document with every alias expanded
MAX_ERRORS = 20  # errors listed for one spec (the rest are counted)
DEFAULT_MAX_POINTS = 4096  # points of the space before constraints (--max-points raises it)
DEFAULT_MAX_VARIANTS = 1024  # variants after constraints (--max-variants raises it)


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
        if len(self.items) > MAX_ERRORS:
            more = len(self.items) - MAX_ERRORS
            raise SpecErrors(self.items[:MAX_ERRORS] + [SpecError(f"... and {more} more error(s)", source=self.source)])
        if self.items:
            raise SpecErrors(self.items)


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and documents whose aliases expand beyond a bound."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader reports it
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"duplicate key {short(key)} (first at line {first.line + 1})", key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root, limit: int) -> int:
    """Nodes of the composed document with aliases expanded, counted without expanding them
    (an alias is the same node object: memoised). Stops counting past ``limit``."""
    memo: dict[int, int] = {}
    active: set[int] = set()

    def size(node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in active:  # a recursive alias: a document of infinite size
            return limit + 1
        active.add(key)
        n = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                n += size(child)
                if n > limit:
                    break
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                n += size(k) + size(v)
                if n > limit:
                    break
        active.discard(key)
        memo[key] = n
        return n

    return size(root)


def parse_yaml(text: str, source: str):
    """YAML text -> Python data, with duplicate keys refused and alias expansion bounded."""
    loader = _SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, YAML_MAX_NODES) > YAML_MAX_NODES:
            raise SpecError(
                f"the document expands to more than {YAML_MAX_NODES} YAML nodes (anchors and aliases repeat "
                "content); write the spec out, or use fewer aliases",
                source=source,
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_spec_text(path: str | Path) -> str:
    """The text of a spec file: a regular file, at most SPEC_MAX_BYTES, UTF-8."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise SpecError(f"spec file not found: {p}") from None
    except OSError as e:
        raise SpecError(f"cannot read spec {short(str(p))}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
        raise SpecError(f"{p} is {kind}; give a YAML spec file")
    if st.st_size > SPEC_MAX_BYTES:
        raise SpecError(f"{p} is {st.st_size} bytes; a spec may have at most {SPEC_MAX_BYTES} bytes")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"not UTF-8 text (byte {e.start})", source=str(p)) from None
    except OSError as e:
        raise SpecError(f"cannot read spec: {e.strerror}", source=str(p)) from None


def load_spec(path: str | Path, *, max_points: int = DEFAULT_MAX_POINTS, max_variants: int = DEFAULT_MAX_VARIANTS) -> Spec:
    text = read_spec_text(path)
    return load_spec_text(text, str(path), max_points=max_points, max_variants=max_variants)


def load_spec_text(
    text: str, source: str = "<spec>", *, max_points: int = DEFAULT_MAX_POINTS, max_variants: int = DEFAULT_MAX_VARIANTS
) -> Spec:
    if len(text) > SPEC_MAX_BYTES:
        raise SpecError(f"the spec has {len(text)} characters; at most {SPEC_MAX_BYTES} are allowed", source=source)
    try:
        raw = parse_yaml(text, source)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{where}: not valid YAML: {short(problem, 160)}", source=source) from None
    except RecursionError:
        raise SpecError("the YAML is nested too deeply", source=source) from None
    if not isinstance(raw, dict):
        raise SpecError(
            f"the spec must be a YAML mapping with keys {', '.join(TOP_KEYS[:2])}, ..., not {type(raw).__name__}",
            source=source,
        )
    return _build(raw, source, max_points, max_variants)


def _unknown_keys(errs: _Errors, mapping: dict, allowed, where: str) -> None:
    for key in mapping:
        if key not in allowed:
            k = short(key, 40) if not isinstance(key, str) or len(key) > 40 else key
            path = f"{where}.{k}" if where else str(k)
            errs.add(path, f"unknown key{suggest(key, allowed)}; allowed keys: {', '.join(allowed)}")


def _as_list(value: Any) -> tuple[list, bool]:
    """Values of a field (a scalar or a list), and whether it was a list."""
    if isinstance(value, list):
        return value, True
    return [value], False


def _item_path(where: str, i: int, was_list: bool) -> str:
    return f"{where}[{i}]" if was_list else where


def _build(raw: dict, source: str, max_points: int = DEFAULT_MAX_POINTS, max_variants: int = DEFAULT_MAX_VARIANTS) -> Spec:
    errs = _Errors(source)
    _unknown_keys(errs, raw, TOP_KEYS, "")

    # ---- name ---------------------------------------------------------------------------
    name = raw.get("name")
    if name is None:
        errs.add("name", "missing; give the output directory name ([a-z0-9_-], e.g. my_kernels)")
    elif not isinstance(name, str) or not NAME_RE.fullmatch(name):
        kind = "true or false" if isinstance(name, bool) else "a number"
        quote = f" (YAML reads it as {kind}; quote the name: name: \"...\")" if isinstance(name, (int, float)) else ""
        errs.add(
            "name",
            f"{short(name)} is not allowed: use lower-case letters, digits, '_' and '-' only, starting with a letter or digit (no '/', '..', spaces or newlines){quote}",
        )
    elif len(name) > NAME_MAX:
        errs.add("name", f"{short(name)} has {len(name)} characters; at most {NAME_MAX} are allowed")

    # ---- family -------------------------------------------------------------------------
    fam_name = raw.get("family")
    family: Family | None = None
    known = families.names()
    if fam_name is None:
        errs.add("family", f"missing; one of {', '.join(known)}")
    elif not isinstance(fam_name, str) or fam_name not in known:
        errs.add("family", f"{short(fam_name)} is not a family{suggest(fam_name, known)}; available: {', '.join(known)}")
    else:
        family = families.get(fam_name)

    # ---- description --------------------------------------------------------------------
    description = raw.get("description", "")
    if not isinstance(description, str):
        errs.add("description", f"{short(description)} is not a string")
        description = ""

    # ---- arch ---------------------------------------------------------------------------
    arch_vals, arch_list = _as_list(raw.get("arch", ["sm_80", "sm_90"]))
    archs: list[str] = []
    if not arch_vals:
        errs.add("arch", "is empty; give one or more of " + ", ".join(ARCHS))
    for i, a in enumerate(arch_vals):
        if not isinstance(a, str) or a not in ARCHS:
            errs.add(_item_path("arch", i, arch_list), f"{short(a)} is not a supported arch{suggest(a, ARCHS)}; allowed: {', '.join(ARCHS)}")
        elif a in archs:
            errs.add(_item_path("arch", i, arch_list), f"{a} is listed twice")
        else:
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
    elif len(raw_shapes) > MAX_SHAPES:
        errs.add("shapes", f"has {len(raw_shapes)} shapes; at most {MAX_SHAPES} are allowed")
    else:
        for i, s in enumerate(raw_shapes):
            try:
                shape = family.normalize_shape(s, f"shapes[{i}]", source)
            except SpecError as e:
                errs.items.append(e)
                continue
            if shape in shapes:
                errs.add(f"shapes[{i}]", f"{family.format_shape(shape)} is the same shape as shapes[{shapes.index(shape)}]")
            shapes.append(shape)

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
                    errs.add(f"variants[{i}]", f"{short(item)} is not a mapping")
                    continue
                _unknown_keys(errs, item, VARIANT_KEYS, f"variants[{i}]")
                merged = dict(base)
                for key in VARIANT_KEYS:
                    if key in item:
                        if key == "protection" and _unprotected(item[key]):  # the base's scheme fields do not carry over
                            merged[key] = item[key]
                        elif isinstance(item[key], dict) and isinstance(merged.get(key), dict):
                            merged[key] = {**merged[key], **item[key]}
                        else:
                            merged[key] = item[key]
                groups.append((f"variants[{i}].", merged))
    else:
        groups.append(("", base))

    points: list[tuple[str, Protection, dict[str, Any]]] = []
    for prefix, fields in groups:
        points.extend(_expand_group(errs, family, prefix, fields, max_points, len(points)))

    errs.raise_if_any()
    assert isinstance(name, str)

    variants: list[Variant] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    symbols: dict[str, str] = {}
    n_points = 0
    for precision, prot, params in points:
        reason = family.protection_ok(precision, prot, params)
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
        # `backend` naming the backend that runs the point is its selector, whether or not that backend declares it
        unused = [k for k in params if k not in defs and not (k == "backend" and params[k] == backend)]
        # the family checked each value against the union of its backends' parameters; the chosen backend's own
        # definition judges it here (a value only another backend takes), where its constraints found nothing else
        invalid = [r for r in (_backend_value_reason(pn, val, defs[pn], backend or family.name) for pn, val in params.items() if pn in defs) if r]
        full = {pname: params.get(pname, pdef.default[0]) for pname, pdef in defs.items()}
        # parameters the spec omitted take their default(s); several defaults expand too
        open_defaults = [(pn, pd.default) for pn, pd in defs.items() if pn not in params and len(pd.default) > 1]
        reasons_unused = (
            [f"params {', '.join(unused)} do not apply to the {backend or family.name} backend of {precision} (it takes {', '.join(defs)})"]
            if unused
            else []
        )
        n_points += math.prod(len(vals) for _, vals in open_defaults)
        if n_points > max_points:  # omitted parameters with several defaults multiply the space too
            raise SpecError(_too_many("points", "the space (with the defaults of omitted parameters)", f"more than {max_points}", "--max-points"), source=source, path="params")
        for combo in itertools.product(*[vals for _, vals in open_defaults]):
            full2 = dict(full)
            for (pn, _), val in zip(open_defaults, combo):
                full2[pn] = val
            ordered = tuple((pn, full2[pn]) for pn in defs)
            v = Variant(family.name, precision, prot, ordered, tuple(archs), backend)
            reasons = reasons_unused + (family.constraints(v) or invalid)
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
            if len(variants) > max_variants:
                raise SpecError(_too_many("variants", "the constraints leave", f"more than {max_variants}", "--max-variants"), source=source, path="params")

    if not variants:
        lines = [f"no valid variant: all {len(rejected)} points of the space were rejected:"]
        for r in rejected[:8]:
            lines.append(f"  {_point_str(r.point)}: {'; '.join(r.reasons)}")
        if len(rejected) > 8:
            lines.append(f"  ... and {len(rejected) - 8} more")
        raise SpecError("\n".join(lines), source=source, path="params")
    family.check_spec_shapes(variants, shapes, source)

    return Spec(source, name, family, tuple(archs), description, shapes, variants, rejected, raw)


def _backend_value_reason(name: str, value: Any, pdef: Param, backend: str) -> str | None:
    """Why the backend's own definition of parameter ``name`` refuses ``value``; None when it takes it."""
    reason = pdef.validate(value)
    if reason is None:
        return None
    if pdef.choices is not None and value not in pdef.choices:
        return f"{name} {value}: the {backend} backend takes {', '.join(map(str, pdef.choices))}"
    return f"{name} {value}: {reason} (the {backend} backend)"


def _too_many(what: str, where: str, count: str, flag: str) -> str:
    return (f"{where} {count} {what}; narrow the lists under precision, protection and params, "
            f"split the spec, or raise the bound with {flag} N")


def _point_str(point: dict) -> str:
    params = ",".join(f"{k}={v}" for k, v in point.get("params", {}).items())
    prot = point.get("protection", {})
    scheme = prot.get("scheme", "none")
    ptxt = scheme if scheme == "none" else f"{scheme}/{prot.get('level')}"
    return f"{point.get('precision')} {ptxt} {params}"


def _expand_group(errs: _Errors, family: Family, prefix: str, fields: dict, max_points: int, used: int = 0):
    """Validate one group's precision/protection/params and return its cartesian points
    (refused, before anything is expanded, when they and the ``used`` points of earlier groups
    would be more than ``max_points``)."""
    n_before = len(errs.items)

    # precision
    prec_vals, prec_list = _as_list(fields.get("precision", family.precisions[0]))
    precisions = []
    for i, p in enumerate(prec_vals):
        path = _item_path(prefix + "precision", i, prec_list)
        if not isinstance(p, str) or p not in PRECISIONS:
            errs.add(path, f"{short(p)} is not a precision{suggest(p, PRECISIONS)}; allowed for {family.name}: {', '.join(family.precisions)}")
        elif p not in family.precisions:
            errs.add(path, f"{p!r} is not available for family {family.name}; allowed: {', '.join(family.precisions)}")
        elif p in precisions:
            errs.add(path, f"{p} is listed twice")
        else:
            precisions.append(p)

    # protection
    prot_raw = fields.get("protection", {})
    prot_opts: dict[str, list] = {}
    if prot_raw is None:
        prot_raw = {}
    if not isinstance(prot_raw, dict):
        errs.add(prefix + "protection", f"{short(prot_raw)} is not a mapping with keys {', '.join(PROTECTION_KEYS)}")
        prot_raw = {}
    _unknown_keys(errs, prot_raw, PROTECTION_KEYS, prefix + "protection")
    all_levels = sorted({lv for lvs in family.schemes.values() for lv in lvs} | {"none"})
    # levels are checked against every level of the family; a level that does not fit a listed
    # scheme is a rejected point (with its reason), so one spec can sweep schemes and levels
    spec_field = {
        "scheme": (lambda v: _check_scheme(family, v), "none"),
        "level": (
            lambda v: None if isinstance(v, str) and v in all_levels else f"{short(v)} is not a protection level of family {family.name}{suggest(v, all_levels)}; allowed: {', '.join(all_levels)}",
            None,
        ),
        "correct": (lambda v: None if isinstance(v, str) and v in CORRECT_MODES else f"{short(v)} is not allowed; use one of {', '.join(CORRECT_MODES)}", "online"),
        "interval": (_check_interval, "auto"),
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
                v = float(v) if key == "threshold" and v != "auto" else v
                if v in ok:
                    errs.add(_item_path(prefix + f"protection.{key}", i, was_list), f"{short(v)} is listed twice")
                ok.append(v)
        prot_opts[key] = ok
    if prot_opts["scheme"] == ["none"]:
        for key in PROTECTION_KEYS[1:]:
            if any(v not in UNPROTECTED.get(key, ()) for v in _as_list(prot_raw.get(key, []))[0]):
                errs.add(prefix + f"protection.{key}", f"does not apply to scheme none (an unprotected variant has no checks "
                         f"and no fault injection); remove it, or give a protected scheme: {', '.join(s for s in family.schemes if s != 'none')}")

    # params
    params_raw = fields.get("params", {}) or {}
    all_defs = family.param_names()
    param_opts: dict[str, list] = {}
    if not isinstance(params_raw, dict):
        errs.add(prefix + "params", f"{short(params_raw)} is not a mapping of parameter names to values or lists")
        params_raw = {}
    for key, value in params_raw.items():
        path = prefix + f"params.{key}"
        if not isinstance(key, str) or key not in all_defs:
            if not isinstance(key, str) or len(key) > 40:
                path = prefix + f"params.{short(key, 40)}"
            errs.add(path, f"unknown parameter{suggest(key, all_defs)}; {family.name} parameters: {', '.join(all_defs)}")
            continue
        vals, was_list = _as_list(value)
        if was_list and not vals:
            errs.add(path, "is an empty list")
        ok = []
        for i, v in enumerate(vals):
            reason = _check_param(lambda x, key=key: family.param_reason(key, x), v)
            if reason:
                errs.add(_item_path(path, i, was_list), reason)
            elif v in ok:
                errs.add(_item_path(path, i, was_list), f"{short(v)} is listed twice")
            else:
                ok.append(v)
        param_opts[key] = ok

    if len(errs.items) > n_before:
        return []

    # the size of the product, from the list lengths, before anything is expanded
    n = len(precisions) * math.prod(len(v) for v in prot_opts.values()) * math.prod(len(v) for v in param_opts.values())
    if used + n > max_points:
        sizes = [f"precision {len(precisions)}"] + [f"{k} {len(v)}" for k, v in prot_opts.items() if len(v) > 1] + [
            f"{k} {len(v)}" for k, v in param_opts.items() if len(v) > 1
        ]
        before = f" (after {used} of earlier variants)" if used else ""
        errs.add(prefix + "params", _too_many("points", f"the lists ({' x '.join(sizes)}) expand to", f"{n}", "--max-points")
                 + f"{before}; at most {max_points} points are allowed before constraints")
        return []

    points = []
    pkeys = list(param_opts)
    for precision in precisions:
        for scheme, level, correct, interval, threshold, inject in itertools.product(
            *[prot_opts[k] for k in PROTECTION_KEYS]
        ):
            for combo in itertools.product(*[param_opts[k] for k in pkeys]):
                params = dict(zip(pkeys, combo))
                if scheme == "none" or level == "none":
                    prot = Protection()  # unprotected: level, correct, ... and inject do not apply
                else:
                    level = level or family.schemes[scheme][0]
                    prot = Protection(scheme, level, correct, 1, threshold, inject)
                    # auto: the backend's measured choice for this point (a number overrides it)
                    iv = family.auto_interval(precision, prot, params) if interval == "auto" else interval
                    prot = Protection(scheme, level, correct, iv, threshold, inject)
                points.append((precision, prot, params))
    return points


# values of the protection fields that say what scheme none means anyway (any other value does not apply to it)
UNPROTECTED = {"level": (None, "none"), "inject": (False,)}


def _unprotected(prot: Any) -> bool:
    """Whether a protection mapping names scheme none only."""
    return isinstance(prot, dict) and "scheme" in prot and all(s == "none" for s in _as_list(prot["scheme"])[0])


def _check_scheme(family: Family, v: Any) -> str | None:
    if v not in SCHEMES:
        return f"{v!r} is not a scheme{suggest(v, SCHEMES)}; allowed: {', '.join(SCHEMES)}"
    if v not in family.schemes:
        return f"scheme {v!r} is not available for family {family.name}; it offers: {', '.join(family.schemes)}"
    return None


def _check_threshold(v: Any) -> str | None:
    if v == "auto":
        return None
    if isinstance(v, str):  # YAML 1.1 reads 1e-30 (no dot) as text
        try:
            x = float(v)
        except ValueError:
            x = math.nan
        if math.isfinite(x) and 0 < x <= 1e30:
            return f"{short(v)} is text to YAML; write the number with a dot, e.g. {x:.1e}, or auto"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{short(v)} is not allowed; use auto or a positive number"
    if not math.isfinite(v) or abs(v) > 1e30:
        return f"{short(v)} is not allowed; use auto or a finite positive number (at most 1e30)"
    if not v > 0:
        return f"{short(v)} must be positive (or auto)"
    return None


def _check_interval(v: Any) -> str | None:
    if v == "auto":
        return None
    reason = check_type(v, int)
    if reason:
        return reason.replace(repr(v), short(v)) if len(reason) > 100 else reason
    if v < 1:
        return f"{short(v)} must be at least 1"
    if v > INT32_MAX:
        return f"{short(v)} is too large; kernels hold it in a 32-bit int (at most {INT32_MAX})"
    return None


def _check_param(family_reason, v: Any) -> str | None:
    """The engine's checks of a parameter value (scalars only, integers within 32 bits, numbers finite, strings
    short), then the family's own (``family_reason(v)``: a reason, or None)."""
    if isinstance(v, (list, dict)) or v is None:
        return f"{short(v)} is not a scalar (a list may not nest)"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT32_MAX:
        return f"{short(v)} is too large; kernels hold it in a 32-bit int (at most {INT32_MAX})"
    if isinstance(v, float) and not math.isfinite(v):
        return f"{short(v)} is not a finite number"
    if isinstance(v, str) and len(v) > NAME_MAX:
        return f"{short(v)} is not allowed: at most {NAME_MAX} characters"
    reason = family_reason(v)
    if reason and len(reason) > 200:
        reason = reason[:197] + "..."
    return reason


# --------------------------------------------------------------------------------------------


MAX_SHAPES = 256  # shapes of one --shapes option


def parse_shapes(family: Family, text: str) -> list[dict[str, int]]:
    """``--shapes``: comma-separated tokens (``4096x4096x4096``) or a YAML file of shapes."""
    text = text.strip()
    if _looks_like_file(text):
        p = Path(text)
        try:
            data = parse_yaml(read_spec_text(p), f"--shapes {p}")
        except SpecError as e:
            raise SpecError(f"--shapes: {e.message}") from None
        except yaml.YAMLError as e:
            raise SpecError(f"--shapes: {p}: not valid YAML: {short(str(e).splitlines()[0], 160)}") from None
        if isinstance(data, dict) and "shapes" in data:
            data = data["shapes"]
        if not isinstance(data, list) or not data:
            raise SpecError(f"--shapes: {p}: expected a list of shapes (or a mapping with key 'shapes')")
        if len(data) > MAX_SHAPES:
            raise SpecError(f"--shapes: {p}: {len(data)} shapes; at most {MAX_SHAPES} are allowed")
        return [family.normalize_shape(s, f"shapes[{i}]", str(p)) for i, s in enumerate(data)]
    tokens = [t for t in text.split(",") if t.strip()]
    if not tokens:
        raise SpecError("--shapes: no shapes given")
    if len(tokens) > MAX_SHAPES:
        raise SpecError(f"--shapes: {len(tokens)} shapes; at most {MAX_SHAPES} are allowed")
    for t in tokens:
        if len(t.strip()) > 80:
            raise SpecError(f"--shapes: {short(t.strip())} is not a shape (too long)")
    return [family.parse_shape_token(t) for t in tokens]


def parse_one_shape(family: Family, text: str, flag: str) -> dict[str, int]:
    """One shape (``flag``: the option that gives it, e.g. ``--shape``) in the form of ``--shapes``."""
    try:
        shapes = parse_shapes(family, text)
    except SpecError as e:
        if e.message.startswith("--shapes"):
            raise SpecError(flag + e.message[len("--shapes"):]) from None
        raise
    if len(shapes) != 1:
        raise SpecError(f"{flag}: {len(shapes)} shapes given; give one (run one command per shape)")
    return shapes[0]


def _looks_like_file(text: str) -> bool:
    """A shapes file rather than shape tokens: a .yaml/.yml name, or an existing path."""
    if text.endswith((".yaml", ".yml")):
        return True
    if re.fullmatch(r"[0-9x,\s]*", text):
        return False
    try:
        return Path(text).exists()
    except (OSError, ValueError):  # a name too long for the file system, or a NUL byte
        return False
