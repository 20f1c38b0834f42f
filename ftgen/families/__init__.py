"""Family registry. Each family lives in its own module; this table is the only shared line."""

from __future__ import annotations

import importlib
import importlib.util  # noqa: F401

from .base import Family

# family name -> module (relative to this package) and the Family subclass in it
_REGISTRY: dict[str, tuple[str, str]] = {
    "gemm": (".gemm", "GemmFamily"),
    "fft": (".fft", "FftFamily"),
}

# families named by DESIGN.md that have no module yet: a spec naming them gets a clear message
PLANNED = ("kmeans", "attention")

_cache: dict[str, Family] = {}


def names() -> list[str]:
    return [n for n in _REGISTRY if _available(n)]


def _available(name: str) -> bool:
    """A family is offered when its module imports and defines its class."""
    mod, cls = _REGISTRY[name]
    try:
        return hasattr(importlib.import_module(mod, __name__), cls)
    except ImportError:
        return False


def get(name: str) -> Family:
    if name not in _cache:
        mod, cls = _REGISTRY[name]
        _cache[name] = getattr(importlib.import_module(mod, __name__), cls)()
    return _cache[name]
