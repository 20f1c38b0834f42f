"""The family contract: what every kernel family and each of its backends provide.

A :class:`Family` (a problem: its shape keys, default shapes, the C launcher every variant exports)
has one or more :class:`Backend` objects (an implementation: the precisions it accepts, the
protection levels it offers with their name tokens, its parameters as data, constraints that return
reasons, name tokens, template context, sources and the external libraries it requires). The family
picks the backend of a (precision, protection) point and delegates to it. A family is registered in
``ftgen.families`` (the built-in table, or ``register()`` for one defined elsewhere); its templates
live in its own folder, ``templates/<name>/`` or any absolute path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import SpecError
from ..paths import templates_dir

if TYPE_CHECKING:  # pragma: no cover
    from ..templating import TemplateEnv

# --------------------------------------------------------------------------------------------
# Enumerations shared by all families (name tables in the manner of cutlass_library).
# --------------------------------------------------------------------------------------------

PRECISIONS = ("fp32", "fp64", "tf32", "tf32x3", "fp16", "bf16")
PRECISION_TAG = {"fp32": "f32", "fp64": "f64", "tf32": "tf32", "tf32x3": "tf32x3", "fp16": "f16", "bf16": "bf16"}
PRECISION_CTYPE = {"fp32": "float", "fp64": "double", "tf32": "float", "tf32x3": "float", "fp16": "__half", "bf16": "__nv_bfloat16"}
# Unit roundoff of the arithmetic each precision accumulates in (used by tolerances and thresholds).
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "fp64": 2.0**-53, "tf32": 2.0**-11, "tf32x3": 2.0**-23, "fp16": 2.0**-11, "bf16": 2.0**-8}

SCHEMES = ("none", "abft", "tmr", "dmr")
CORRECT_MODES = ("online", "detect")
OUT_OF_RANGE = "out of range"  # the error kind of a row recorded for a shape its variant does not run (not a failure)
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
# per-architecture limits (the largest part of each): dynamic shared memory per block (opt-in) and per SM,
# SMs, resident threads and registers per SM
SMEM_PER_BLOCK = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024, "sm_90a": 227 * 1024}
SMEM_PER_SM = {"sm_80": 164 * 1024, "sm_86": 100 * 1024, "sm_89": 100 * 1024, "sm_90": 228 * 1024, "sm_90a": 228 * 1024}
MAX_SMS = {"sm_80": 108, "sm_86": 84, "sm_89": 144, "sm_90": 132, "sm_90a": 132}
MAX_THREADS_PER_SM = {"sm_80": 2048, "sm_86": 1536, "sm_89": 1536, "sm_90": 2048, "sm_90a": 2048}
REGS_PER_SM = 65536
# architectures with thread-block clusters and distributed shared memory
CLUSTER_ARCHS = frozenset({"sm_90", "sm_90a"})

# --------------------------------------------------------------------------------------------
# Parameters as data
# --------------------------------------------------------------------------------------------


def power_of_two(v: int) -> str | None:
    return None if v > 0 and (v & (v - 1)) == 0 else f"{v} is not a power of two"


_TYPE_WORD = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def tile_multiples(*checks: tuple[str, int, str, int]) -> list[str]:
    """Reasons a tile does not nest: each (name, value, of, divisor) with value not a multiple of divisor reads
    '<name>=<value> is not a multiple of <of>=<divisor>'."""
    return [f"{name}={value} is not a multiple of {of}={d}" for name, value, of, d in checks if d and value % d]


def check_type(value: Any, typ: type) -> str | None:
    """Reason why ``value`` is not of YAML scalar type ``typ`` (bool is not an int here)."""
    if typ is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif typ is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif typ is bool:
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if ok:
        return None
    return f"{value!r} is not {_TYPE_WORD[typ]}"


_TYPE_NAME = {int: "int", float: "float", str: "str", bool: "bool"}
_CHECK_WORDS = {power_of_two: "a power of two"}  # rules of `check` that `ftgen list` can state


@dataclass(frozen=True)
class Param:
    """One tunable parameter. ``default`` is a tuple: several values form a search space.
    ``choices`` lists the allowed values, ``lo``/``hi`` bound numbers (inclusive), and ``check`` is a
    further rule (e.g. :func:`power_of_two`) returning a reason."""

    name: str
    type: type
    default: tuple
    doc: str = ""
    choices: tuple | None = None
    check: Callable[[Any], str | None] | None = None
    lo: int | float | None = None
    hi: int | float | None = None

    def validate(self, value: Any) -> str | None:
        reason = check_type(value, self.type)
        if reason:
            return reason
        if self.choices is not None and value not in self.choices:
            return f"{value!r} is not one of {', '.join(map(str, self.choices))}"
        if self.lo is not None and self.hi is not None and not self.lo <= value <= self.hi:
            return f"{value} is outside {self.lo}..{self.hi}"
        if self.lo is not None and value < self.lo:
            return f"{value} is less than {self.lo}"
        if self.hi is not None and value > self.hi:
            return f"{value} is more than {self.hi}"
        if self.check is not None:
            return self.check(value)
        return None

    def with_default(self, value: Any) -> "Param":
        return Param(self.name, self.type, (value,), self.doc, self.choices, self.check, self.lo, self.hi)

    def describe(self) -> dict:
        """``{"name", "type", "choices", "range", "default", "doc"}`` (``ftgen list``)."""
        return {
            "name": self.name,
            "type": _TYPE_NAME[self.type],
            "choices": list(self.choices) if self.choices is not None else None,
            "range": [self.lo, self.hi] if self.lo is not None or self.hi is not None else None,
            "default": list(self.default) if len(self.default) > 1 else self.default[0],
            "doc": self.doc + (f" ({_CHECK_WORDS[self.check]})" if self.check in _CHECK_WORDS else ""),
        }


# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Protection:
    scheme: str = "none"
    level: str = "none"
    correct: str = "online"
    interval: int = 1
    threshold: float | str = "auto"
    inject: bool = False

    @property
    def enabled(self) -> bool:
        return self.scheme != "none"

    @property
    def injects(self) -> bool:
        """Built with fault injection (a protected variant with inject: true)."""
        return self.enabled and self.inject

    def token(self, level_tokens: Mapping[str, str]) -> str:
        """Name token: ``none`` or ``<scheme>-<level token>[-detect][-i<k>][-th<x>]`` (defaults omitted).
        ``level_tokens`` maps this scheme's levels to their short forms, as the backend declares them."""
        if not self.enabled:
            return "none"
        if self.level not in level_tokens:
            raise ValueError(f"no name token for {self.scheme} level {self.level!r} (known: {', '.join(level_tokens)})")
        parts = [self.scheme, level_tokens[self.level]]
        if self.correct != "online":
            parts.append(self.correct)
        if self.interval != 1:
            parts.append(f"i{self.interval}")
        if self.threshold != "auto":
            parts.append("th" + format_number(self.threshold))
        return "-".join(parts)

    def to_dict(self) -> dict:
        if not self.enabled:
            return {"scheme": "none", "inject": self.inject}
        return {
            "scheme": self.scheme,
            "level": self.level,
            "correct": self.correct,
            "interval": self.interval,
            "threshold": self.threshold,
            "inject": self.inject,
        }


def format_number(x: float) -> str:
    """Compact, name-safe rendering of a number: 1e-05 -> 1em5, 0.5 -> 0p5."""
    s = f"{x:g}"
    return s.replace("-", "m").replace("+", "").replace(".", "p")


@dataclass(frozen=True)
class Variant:
    family: str
    precision: str
    protection: Protection
    params: tuple[tuple[str, Any], ...]
    arch: tuple[str, ...]
    backend: str = ""
    name: str = ""

    @property
    def symbol(self) -> str:
        """The C identifier of the variant's launcher: the name with '-' written as '_'."""
        return self.name.replace("-", "_")

    def __getitem__(self, key: str) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    def common_context(self) -> dict:
        """The template keys every backend's sources read: the variant, its name and C symbol, precision, protection and
        the members its result rows start with."""
        return {"v": self, "name": self.name, "sym": self.symbol, "precision": self.precision, "prot": self.protection,
                "meta_json": self.meta_json()}

    def meta_json(self) -> str:
        """JSON members every result row of this variant starts with (no braces)."""
        d = {
            "kernel": self.name,
            "family": self.family,
            "precision": self.precision,
            "protection": self.protection.to_dict(),
            "params": self.param_dict,
        }
        if self.backend:
            d["backend"] = self.backend
        return json.dumps(d, separators=(",", ":"))[1:-1]

    def to_dict(self) -> dict:
        return {
            "kernel": self.name,
            "family": self.family,
            "backend": self.backend,
            "precision": self.precision,
            "protection": self.protection.to_dict(),
            "params": self.param_dict,
            "arch": list(self.arch),
        }


@dataclass
class ModelCounters:
    """The fault counters a protection scheme's NumPy model keeps, as the kernels' device counters do
    (``FtCounters``); a family's model subclasses it for its own detail."""

    injected: int = 0
    detected: int = 0
    corrected: int = 0
    recomputed: int = 0
    uncorrectable: int = 0
    max_score: float = 0.0  # largest residual / threshold of any check (clean runs: < 1)


@dataclass
class EmittedVariant:
    """Everything the CMake project needs to build one variant. Paths are relative to the
    generated project root; ``files`` maps those paths to their text. ``requires`` names the
    external libraries (``ftgen.libraries``) the variant's targets use: the project links their
    targets and checks their include directories."""

    name: str
    files: dict[str, str]
    library_sources: list[str]
    bench_sources: list[str]
    header: str
    requires: list[str] = field(default_factory=list)
    compile_options: list[str] = field(default_factory=list)
    archs: list[str] | None = None  # override of the spec's archs (e.g. sm_90a only)


@dataclass(frozen=True)
class LauncherSignature:
    """The C signature of a family's host launcher, used by dispatch headers."""

    params: str  # e.g. "int m, int n, int k, ..."
    args: str  # e.g. "m, n, k, ..."
    selector_args: tuple[str, ...]  # C expressions (over the params) giving the shape keys, in order


@dataclass(frozen=True)
class LibraryEntry:
    """The C entry point of one group of a project's variants in the shared library (``ftgen build --lib``).

    Every text is C: ``params`` is the public parameter list after the handle (C99 types only: no
    CUDA or C++ type), ``shape`` gives the shape keys as expressions over the params (what the
    dispatcher selects by), ``legal`` is true for arguments every variant of the group accepts (else
    the call returns cudaErrorInvalidValue), ``fill`` are C++ statements setting the fields of
    ``P`` (a zeroed ``problem_type``) from the params, ``workspace`` the byte count of one call as an
    expression over ``workspace_params`` with ``{sym}`` for the variant's symbol, and ``call`` the
    statements that launch: ``{launch}(&P, stream)`` returns a cudaError_t (the default runs it once);
    ``scores`` what makes the launch record its largest detection score, where that is optional."""

    params: str
    shape: tuple[str, ...]
    legal: str
    problem_type: str
    fill: str
    workspace_params: str
    workspace: str
    call: str = "return {launch}(&P, stream);"
    doc: str = ""
    scores: str = ""  # statements that make the launch record its largest detection score (none: it always does)


@dataclass(frozen=True)
class Source:
    """One generated file of a variant: ``template`` (in the family's template folder) rendered to
    ``<name>/<name><suffix>``. ``role``: ``header`` (the launcher's declaration), ``library`` (compiled
    into the kernel library) or ``bench`` (the benchmark executable)."""

    template: str
    suffix: str
    role: str


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


class Backend:
    """One implementation of a family. Subclasses set the class attributes and override the
    methods; a plain instance with keyword fields serves a backend that is data only.

    ``levels`` maps each protection scheme the backend offers (besides ``none``) to its levels and
    their name tokens, e.g. ``{"abft": {"threadblock": "tb", "warp": "warp"}}``; ``requires`` names
    libraries of ``ftgen.libraries``."""

    name: str = ""
    precisions: tuple[str, ...] = ()
    levels: Mapping[str, Mapping[str, str]] = {}
    params: tuple[Param, ...] = ()
    requires: tuple[str, ...] = ()
    compile_options: tuple[str, ...] = ()
    constraint_docs: tuple[str, ...] = ()

    def __init__(self, **fields: Any) -> None:
        for key, value in fields.items():
            if not hasattr(type(self), key) or callable(getattr(type(self), key)):
                raise TypeError(f"Backend has no field {key!r}")
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # ---- what it offers ---------------------------------------------------------------------
    @property
    def schemes(self) -> dict[str, tuple[str, ...]]:
        return {"none": (), **{s: tuple(lv) for s, lv in self.levels.items()}}

    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        """The parameters of (precision, protection), with the defaults that fit them."""
        return self.params

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        """Reason why this backend cannot offer (precision, protection); None when it can."""
        if precision not in self.precisions:
            return f"the {self.name} backend takes precision {', '.join(self.precisions)}, not {precision}"
        levels = self.schemes.get(protection.scheme)
        if levels is None:
            return f"scheme {protection.scheme!r} is not offered by the {self.name} backend (it offers {', '.join(self.schemes)})"
        if protection.enabled and protection.level not in levels:
            return f"level {protection.level!r} is not a {protection.scheme} level of the {self.name} backend (allowed: {', '.join(levels)})"
        return None

    # ---- one variant --------------------------------------------------------------------------
    def constraints(self, v: Variant) -> list[str]:
        """Reasons why a variant cannot be built or run; empty when it is fine."""
        return []

    def auto_interval(self, prot: Protection, params: Mapping[str, Any]) -> int:
        """The check / checkpoint interval of ``interval: auto``: the backend's measured fast choice."""
        return 1

    def protection_token(self, prot: Protection) -> str:
        return prot.token(self.levels.get(prot.scheme, {}))

    def name_tokens(self, v: Variant) -> list[str]:
        """The parts of the kernel name, joined by ``_``; every parameter that changes the code appears."""
        raise NotImplementedError

    def kernel_name(self, v: Variant) -> str:
        return "_".join(self.name_tokens(v))

    def context(self, v: Variant) -> dict:
        """Template context of the variant's sources (the family adds ``prot_token`` and ``default_shapes``)."""
        return {}

    def sources(self, v: Variant) -> tuple[Source, ...]:
        raise NotImplementedError

    def launcher_signature(self, v: Variant) -> LauncherSignature | None:
        """The launcher's C signature when it differs from the family's."""
        return None

    def describe(self) -> dict:
        return {
            "name": self.name,
            "precisions": list(self.precisions),
            "schemes": {k: list(v) for k, v in self.schemes.items()},
            "requires": list(self.requires),
            "params": [p.describe() for p in self.params],
        }


# --------------------------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------------------------

_SHAPE_TOKEN = re.compile(r"[0-9]+(x[0-9]+)*")  # ASCII digits only (used with fullmatch)


class Family:
    name: str = ""
    description: str = ""
    shape_keys: tuple[str, ...] = ()
    backends: tuple[Backend, ...] = ()
    default_shapes: tuple[dict, ...] = ()
    campaign_shape: dict | None = None  # shape of fault-campaign trials (default: the first default shape)
    template_dir: str = ""  # a folder name under templates/, or an absolute path
    launcher: LauncherSignature | None = None  # the C signature every variant's launcher has
    fault_sites: tuple[str, ...] = ("accumulator",)  # what `--site` may name: where the executables put injected faults

    # ---- what the backends offer, together ------------------------------------------------
    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for b in self.backends for p in b.precisions))

    @property
    def schemes(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {"none": ()}
        for b in self.backends:
            for scheme, levels in b.schemes.items():
                out[scheme] = tuple(dict.fromkeys(out.get(scheme, ()) + levels))
        return out

    def template_path(self) -> Path:
        """The family's template folder (its sources' templates and the headers every project gets)."""
        p = Path(self.template_dir)
        return p if p.is_absolute() else templates_dir() / p

    # ---- backends -------------------------------------------------------------------------
    def select_backend(self, precision: str, protection: Protection) -> Backend | None:
        """The backend of (precision, protection): the first that offers both; else the first that
        offers the scheme (its protection_ok says why it cannot); None when no backend has the scheme."""
        offering = [b for b in self.backends if protection.scheme in b.schemes]
        for b in offering:
            if precision in b.precisions:
                return b
        return offering[0] if offering else None

    def auto_interval(self, precision: str, protection: Protection, params: Mapping[str, Any]) -> int:
        """``interval: auto`` resolved by the backend of (precision, protection) -- the one ``params: {backend: ...}``
        names, where it names one of this family's; 1 where none offers it."""
        b = self.backend_for(precision, protection, params)
        return b.auto_interval(protection, params) if b is not None and precision in b.precisions else 1

    def backend_named(self, name: str) -> Backend:
        for b in self.backends:
            if b.name == name:
                return b
        raise KeyError(f"family {self.name} has no backend {name!r} (it has {', '.join(b.name for b in self.backends)})")

    def backend_of(self, v: Variant) -> Backend:
        if v.backend:
            return self.backend_named(v.backend)
        b = self.select_backend(v.precision, v.protection)
        if b is None:
            raise KeyError(f"family {self.name} has no backend for {v.precision} {v.protection.scheme}")
        return b

    def backend_for(self, precision: str, protection: Protection, params: Mapping[str, Any] | None) -> Backend | None:
        """The backend of a point of the space: the one ``params: {backend: ...}`` names (any of the family's, the
        default one included), else the first that offers (precision, protection) (`select_backend`)."""
        if params and params.get("backend") in self.backend_names:
            return self.backend_named(params["backend"])
        return self.select_backend(precision, protection)

    def backend(self, precision: str, protection: Protection, params: Mapping[str, Any]) -> str:
        """Name of the backend of a point of the space (`backend_for`)."""
        b = self.backend_for(precision, protection, params)
        return b.name if b else ""

    @property
    def backend_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.backends)

    # ---- parameters -----------------------------------------------------------------------
    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        """Parameters of the backend that implements (precision, protection)."""
        b = self.select_backend(precision, protection)
        return b.param_defs(precision, protection) if b else ()

    def param_names(self) -> list[str]:
        """Every parameter any backend knows (for unknown-key detection); ``backend`` where there are several."""
        names = [p.name for b in self.backends for p in b.params] + (["backend"] if len(self.backends) > 1 else [])
        return list(dict.fromkeys(names))

    def param_reason(self, name: str, value: Any) -> str | None:
        """Reason why no backend with parameter ``name`` accepts ``value``; None when one does (each
        backend's constraints then judge the value for its own variants). ``backend`` takes the name of any of the
        family's backends."""
        if name == "backend":
            return None if value in self.backend_names else (
                f"{value!r} is not a backend of family {self.name} (its backends: {', '.join(self.backend_names)})")
        reasons = []
        for b in self.backends:
            for p in b.params:
                if p.name == name:
                    reason = p.validate(value)
                    if reason is None:
                        return None
                    reasons.append((b.name, reason))
        if not reasons:
            return f"unknown parameter {name!r}"
        if len(reasons) == 1 or len({r for _, r in reasons}) == 1:
            return reasons[0][1]
        return "; ".join(f"{r} ({b} backend)" for b, r in reasons)

    def protection_ok(self, precision: str, protection: Protection, params: Mapping[str, Any] | None = None) -> str | None:
        """Reason why this family cannot offer (precision, protection); None when it can. The backend ``params`` name
        (``params: {backend: ...}``) judges it where they name one of this family's."""
        levels = self.schemes.get(protection.scheme)
        if levels is None:
            return f"scheme {protection.scheme!r} is not available for family {self.name} (available: {', '.join(self.schemes)})"
        if protection.enabled and protection.level not in levels:
            return f"level {protection.level!r} is not a {protection.scheme} level of family {self.name} (allowed: {', '.join(levels)})"
        b = self.backend_for(precision, protection, params)
        return b.protection_ok(precision, protection) if b else None

    # ---- constraints and names ------------------------------------------------------------
    def constraints(self, v: Variant) -> list[str]:
        """Reasons why a variant cannot be built or run; empty when it is fine. A backend selected by ``params`` is held
        to its own precisions and protection levels too (the default backend was chosen for the point before its
        params were read)."""
        b = self.backend_of(v)
        reasons = b.constraints(v)
        if not reasons:
            why = b.protection_ok(v.precision, v.protection)
            reasons = [why] if why else []
        return reasons

    def level_tokens(self, scheme: str) -> dict[str, str]:
        """The name tokens of a scheme's levels, as the backends declare them."""
        out: dict[str, str] = {}
        for b in self.backends:
            out.update(b.levels.get(scheme, {}))
        return out

    def protection_token(self, prot: Protection) -> str:
        return prot.token(self.level_tokens(prot.scheme))

    def kernel_name(self, v: Variant) -> str:
        return self.backend_of(v).kernel_name(v)

    # ---- shapes ---------------------------------------------------------------------------
    def normalize_shape(self, raw: Any, where: str, source: str | None = None) -> dict[str, int]:
        """Validate a shape mapping from a spec or shapes file."""
        if not isinstance(raw, dict):
            raise SpecError(
                f"{raw!r} is not a mapping; a {self.name} shape has keys {', '.join(self.shape_keys)}",
                source=source,
                path=where,
            )
        out: dict[str, int] = {}
        for key in raw:
            if key not in self.shape_keys:
                raise SpecError(
                    f"unknown shape key {key!r}{suggest(key, self.shape_keys)}; a {self.name} shape has keys {', '.join(self.shape_keys)}",
                    source=source,
                    path=f"{where}.{key}",
                )
        for key in self.shape_keys:
            if key not in raw:
                raise SpecError(f"missing shape key {key!r}", source=source, path=where)
            out[key] = positive_int(raw[key], f"{where}.{key}", source)
        return out

    def parse_shape_token(self, token: str) -> dict[str, int]:
        token = token.strip()
        if not _SHAPE_TOKEN.fullmatch(token):
            raise SpecError(
                f"--shapes: {token!r} is not a shape; write the {self.name} keys {'x'.join(self.shape_keys)} as integers joined by 'x', e.g. {self.format_shape(self.default_shapes[0])}"
            )
        values = [int(x) for x in token.split("x")]
        if len(values) != len(self.shape_keys):
            raise SpecError(
                f"--shapes: {token!r} has {len(values)} numbers; a {self.name} shape has {len(self.shape_keys)} ({'x'.join(self.shape_keys)})"
            )
        return self.normalize_shape(dict(zip(self.shape_keys, values)), f"--shapes {token}")

    def format_shape(self, shape: Mapping[str, int]) -> str:
        return "x".join(str(shape[k]) for k in self.shape_keys)

    def check_site(self, site: str | None) -> None:
        """``--site``: None (the executables' default) or one of ``fault_sites``; else a SpecError naming them."""
        if site is not None and site not in self.fault_sites:
            raise SpecError(f"--site: {site[:40]!r} is not a fault site of family {self.name}{suggest(site, self.fault_sites)}; "
                            f"allowed: {', '.join(self.fault_sites)}")

    # ---- emission -------------------------------------------------------------------------
    def emit(self, v: Variant, env: "TemplateEnv", shapes: list[dict] | None = None) -> EmittedVariant:
        """Sources of one variant: the backend's sources rendered with its context; `shapes` (the
        spec's) become its executable's default shapes."""
        b = self.backend_of(v)
        env = env.including(self.template_path())
        ctx = dict(b.context(v))
        ctx["prot_token"] = self.protection_token(v.protection)
        ctx["default_shapes"] = self.default_shapes_arg(v, shapes)
        d = v.name
        files: dict[str, str] = {}
        roles: dict[str, list[str]] = {"header": [], "library": [], "bench": []}
        for src in b.sources(v):
            if src.role not in roles:
                raise ValueError(f"source role {src.role!r} of {src.template} is not one of {', '.join(roles)}")
            path = f"{d}/{d}{src.suffix}"
            files[path] = env.render(src.template, ctx)
            roles[src.role].append(path)
        if len(roles["header"]) != 1:
            raise ValueError(f"the {b.name} backend gives {len(roles['header'])} header sources; a variant has one")
        return EmittedVariant(
            name=d,
            files=files,
            library_sources=roles["library"],
            bench_sources=roles["bench"],
            header=roles["header"][0],
            requires=list(b.requires),
            compile_options=list(b.compile_options),
        )

    def bench_shapes(self, v: Variant, shapes: list[dict] | None) -> list[dict]:
        """The default shapes of a variant's executable: the spec's shapes (DESIGN: "default
        benchmark shapes; --shapes overrides"), or the family's defaults when there are none."""
        return [dict(s) for s in shapes] if shapes else [dict(s) for s in self.default_shapes]

    def default_shapes_arg(self, v: Variant, shapes: list[dict] | None) -> str:
        """bench_shapes as the executables' --shapes text (their kDefaultShapes)."""
        return ",".join(self.format_shape(s) for s in self.bench_shapes(v, shapes))

    def launcher_signature(self, v: Variant) -> LauncherSignature:
        sig = self.backend_of(v).launcher_signature(v) or self.launcher
        if sig is None:
            raise NotImplementedError(f"family {self.name} declares no launcher signature")
        return sig

    # ---- the shared library (ftgen build --lib) --------------------------------------------
    def library_group(self, v: Variant) -> str:
        """Name of the library entry point ``v`` belongs to (a C identifier): variants of one group take
        the same arguments with the same meaning, so the dispatcher may choose any of them."""
        return f"{self.name}_{v.precision}"

    def library_entry(self, v: Variant) -> LibraryEntry:
        """The C entry point of ``v``'s group. The default passes the family's problem struct (as its
        C++ header defines it) through ``const void* problem``, selecting by the launcher's selector
        arguments; it has no workspace (families that describe their arguments override this)."""
        sig = self.launcher_signature(v)
        ptype = sig.params.split(",")[0].replace("const", "").replace("*", " ").split()[0]
        return LibraryEntry(
            params="const void* problem",
            shape=tuple(a.replace("p->", "Q->") for a in sig.selector_args),
            legal="problem != 0",
            problem_type=ptype,
            fill=f"const {ptype}* Q = static_cast<const {ptype}*>(problem);\n  P = *Q;",
            workspace_params="",
            workspace="0",
            doc=f"problem: a {ptype} (the family's C++ header)",
        )

    def library_fault_plan(self, v: Variant) -> str:
        """C++ statements that plan one library call's faults for ``v`` (built with ``inject: true``; else ""): from the
        entry's parameters, ``handle->inject_n`` (faults per call) and ``fseed`` they set ``plan`` (a
        ``std::vector<ftgen::FaultSpec>``) and ``blocks`` (the threadblocks the plan's ``block`` indexes); ``{sym}`` is
        the variant's symbol. A family without a plan for ``v`` returns "" (the library then refuses injection there)."""
        return ""

    def library_range(self, v: Variant) -> dict[str, tuple[int, int]]:
        """Shapes ``v`` runs: shape key -> inclusive (lo, hi); keys not given take any legal value."""
        return {}

    def shape_fits(self, v: Variant) -> tuple[Callable[[dict], bool], str] | None:
        """A rule beyond ``library_range`` that ``v``'s shapes must meet (e.g. a shared-memory bound that depends on
        several shape keys): a predicate over a shape dict and the same as a C expression over the shape keys (long
        long); None: no rule. The library's dispatch and ``ftgen search`` apply it with the range."""
        return None

    def runs_shape(self, v: Variant, shape: Mapping[str, int]) -> bool:
        """Whether ``v`` runs ``shape``: inside its ``library_range`` and meeting its ``shape_fits`` rule."""
        rule = self.shape_fits(v)
        return all(lo <= shape[key] <= hi for key, (lo, hi) in self.library_range(v).items()) and (rule is None or rule[0](shape))

    def check_spec_shapes(self, variants: list[Variant], shapes: list[dict], source: str) -> None:
        """Raise a SpecError for a spec shape that none of ``variants`` can ever run; by default none is refused (a
        shape outside a variant's range is recorded as out of range instead)."""

    def shape_fits_text(self, v: Variant) -> str:
        """``shape_fits``'s rule in words, for messages; by default its C expression."""
        rule = self.shape_fits(v)
        return f"shapes with {rule[1]}" if rule else ""

    def range_broken(self, v: Variant, shape: Mapping[str, int]) -> str:
        """What ``v`` runs that ``shape`` is not ("dims 1..32", or the ``shape_fits`` rule in words), for messages."""
        broken = [f"{key} {lo}..{hi}" for key, (lo, hi) in self.library_range(v).items() if not lo <= shape[key] <= hi]
        return " and ".join(broken) if broken else self.shape_fits_text(v)

    def out_of_range_row(self, v: Variant, shape: Mapping[str, int]) -> dict:
        """The row of a shape ``v`` does not run (``runs_shape`` false), recorded instead of running it."""
        return {"kernel": v.name, "ok": False, "shape": dict(shape),
                "error": {"kind": OUT_OF_RANGE, "message": f"runs {self.range_broken(v, shape)} only; not run at {self.format_shape(shape)}"}}

    def runs_every_legal_shape(self, v: Variant, legal: Mapping[str, tuple[int, int]]) -> bool:
        """Whether ``v``'s range covers ``legal`` (shape key -> inclusive range) with no rule beyond it: a fallback."""
        if self.shape_fits(v) is not None:
            return False
        for key, (lo, hi) in self.library_range(v).items():
            llo, lhi = legal.get(key, (1, 2**31 - 1))
            if lo > llo or hi < lhi:
                return False
        return True

    def library_legal(self, v: Variant) -> dict[str, tuple[int, int]]:
        """Shapes the entry point of ``v``'s group accepts (as library_range); its fallback variant must
        run all of them."""
        return {}

    def library_fallback(self, v: Variant) -> Variant | None:
        """A variant of ``v``'s group that runs every shape of library_legal, for a project that has
        none (the library then builds it too); None when the family cannot make one."""
        return None

    # ---- documentation --------------------------------------------------------------------
    def tuning_entries(self, rows) -> list[dict]:
        """Tuning entries (``{"key", "params", "evidence"}``, see ``ftgen.tuning``) from search winners; a family
        without measured tuning data records none."""
        return []

    def describe(self) -> dict:
        """The family as data (``ftgen list``): its shapes and precisions, each backend's schemes,
        levels, required libraries and parameters (types, choices, ranges, defaults), and the rules."""
        return {
            "family": self.name,
            "description": self.description,
            "shape_keys": list(self.shape_keys),
            "precisions": list(self.precisions),
            "backends": [b.describe() for b in self.backends],
            "constraints": self.constraint_docs(),
        }

    def constraint_docs(self) -> list[str]:
        return [doc for b in self.backends for doc in b.constraint_docs]


def positive_int(value: Any, where: str, source: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{value!r} is not an integer", source=source, path=where)
    if value < 1:
        raise SpecError(f"{value} must be at least 1", source=source, path=where)
    if value > 2**31 - 1:
        raise SpecError(f"{value} is too large (at most {2**31 - 1})", source=source, path=where)
    return value


def suggest(word: str, candidates) -> str:
    import difflib

    close = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
