"""What every kernel family provides: its parameters as data, constraints that return reasons,
names, shapes, and the emitter that turns one variant into sources.

A family is a subclass of :class:`Family` registered in ``ftgen.families``. Adding a family
touches only its own module, its template folder and the registry line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    from ..codegen.emit import TemplateEnv

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

# Short forms used in kernel names. Every level any family knows must appear here.
LEVEL_ABBREV = {
    "none": "none",
    "thread": "thread",
    "warp": "warp",
    "threadblock": "tb",
    "nonfused": "nonfused",
    "one-sided": "1sided",
    "two-sided-thread": "2sided-thread",
    "two-sided-tb": "2sided-tb",
    "strided": "strided",
    "kernel": "kernel",
    "multikernel": "multikernel",
    "cooperative": "coop",
}


# --------------------------------------------------------------------------------------------
# Parameters as data
# --------------------------------------------------------------------------------------------


def power_of_two(v: int) -> str | None:
    return None if v > 0 and (v & (v - 1)) == 0 else f"{v} is not a power of two"


def at_least(lo: int) -> Callable[[int], str | None]:
    def check(v: int) -> str | None:
        return None if v >= lo else f"{v} is less than {lo}"

    return check


def in_range(lo: int, hi: int) -> Callable[[int], str | None]:
    def check(v: int) -> str | None:
        return None if lo <= v <= hi else f"{v} is outside {lo}..{hi}"

    return check


_TYPE_WORD = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


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


@dataclass(frozen=True)
class Param:
    """One tunable parameter. ``default`` is a tuple: several values form a search space."""

    name: str
    type: type
    default: tuple
    doc: str = ""
    choices: tuple | None = None
    check: Callable[[Any], str | None] | None = None

    def validate(self, value: Any) -> str | None:
        reason = check_type(value, self.type)
        if reason:
            return reason
        if self.choices is not None and value not in self.choices:
            return f"{value!r} is not one of {', '.join(map(str, self.choices))}"
        if self.check is not None:
            return self.check(value)
        return None

    def describe(self) -> str:
        allowed = ", ".join(map(str, self.choices)) if self.choices else _TYPE_WORD[self.type]
        return f"{self.name}: {allowed} (default {list(self.default) if len(self.default) > 1 else self.default[0]}) {self.doc}".rstrip()


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

    def token(self) -> str:
        """Name token: ``none`` or ``<scheme>-<level>[-detect][-i<k>][-th<x>]`` (defaults omitted)."""
        if not self.enabled:
            return "none"
        parts = [self.scheme, LEVEL_ABBREV[self.level]]
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

    def meta_json(self) -> str:
        """JSON members every result row of this variant starts with (no braces)."""
        import json

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
class EmittedVariant:
    """Everything the CMake project needs to build one variant. Paths are relative to the
    generated project root; ``files`` maps those paths to their text."""

    name: str
    files: dict[str, str]
    library_sources: list[str]
    bench_sources: list[str]
    header: str
    link_libraries: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    compile_options: list[str] = field(default_factory=list)
    archs: list[str] | None = None  # override of the spec's archs (e.g. sm_90a only)


@dataclass(frozen=True)
class LauncherSignature:
    """The C signature of a family's host launcher, used by dispatch headers."""

    params: str  # e.g. "int m, int n, int k, ..."
    args: str  # e.g. "m, n, k, ..."
    selector_args: tuple[str, ...]  # C expressions (over the params) giving the shape keys, in order


# --------------------------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------------------------

_SHAPE_TOKEN = re.compile(r"^\d+(x\d+)*$")


class Family:
    name: str = ""
    description: str = ""
    shape_keys: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    schemes: Mapping[str, tuple[str, ...]] = {"none": ()}
    default_shapes: tuple[dict, ...] = ()
    campaign_shape: dict | None = None  # shape of fault-campaign trials (default: the first default shape)
    reference_lib: str = ""
    template_dir: str = ""

    # ---- parameters -----------------------------------------------------------------------
    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        """Parameters of the backend that implements (precision, protection)."""
        raise NotImplementedError

    def all_param_defs(self) -> dict[str, Param]:
        """Every parameter any backend knows (for unknown-key detection and `ftgen list`)."""
        raise NotImplementedError

    def backend(self, precision: str, protection: Protection, params: Mapping[str, Any]) -> str:
        return ""

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        """Reason why this family cannot offer (precision, protection); None when it can."""
        levels = self.schemes.get(protection.scheme)
        if levels is None:
            return f"scheme {protection.scheme!r} is not available for family {self.name} (available: {', '.join(self.schemes)})"
        if protection.enabled and protection.level not in levels:
            return f"level {protection.level!r} is not a {protection.scheme} level of family {self.name} (allowed: {', '.join(levels)})"
        return None

    # ---- constraints and names ------------------------------------------------------------
    def constraints(self, v: Variant) -> list[str]:
        """Reasons why a variant cannot be built or run; empty when it is fine."""
        return []

    def kernel_name(self, v: Variant) -> str:
        raise NotImplementedError

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
        if not _SHAPE_TOKEN.match(token):
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

    # ---- emission -------------------------------------------------------------------------
    def emit(self, v: Variant, env: "TemplateEnv", shapes: list[dict] | None = None) -> EmittedVariant:
        """Sources of one variant; `shapes` (the spec's) become its executable's default shapes."""
        raise NotImplementedError

    def bench_shapes(self, v: Variant, shapes: list[dict] | None) -> list[dict]:
        """The default shapes of a variant's executable: the spec's shapes (DESIGN: "default
        benchmark shapes; --shapes overrides"), or the family's defaults when there are none."""
        return [dict(s) for s in shapes] if shapes else [dict(s) for s in self.default_shapes]

    def default_shapes_arg(self, v: Variant, shapes: list[dict] | None) -> str:
        """bench_shapes as the executables' --shapes text (their kDefaultShapes)."""
        return ",".join(self.format_shape(s) for s in self.bench_shapes(v, shapes))

    def launcher_signature(self, v: Variant) -> LauncherSignature:
        raise NotImplementedError

    def work(self, shape: Mapping[str, int]) -> float:
        """Floating-point operations of one run at this shape (for reports)."""
        return 0.0

    # ---- documentation --------------------------------------------------------------------
    def describe(self) -> dict:
        return {
            "family": self.name,
            "description": self.description,
            "precisions": list(self.precisions),
            "schemes": {k: list(v) for k, v in self.schemes.items()},
            "shape_keys": list(self.shape_keys),
            "params": {p.name: p.describe() for p in self.all_param_defs().values()},
            "constraints": self.constraint_docs(),
        }

    def constraint_docs(self) -> list[str]:
        return []


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
