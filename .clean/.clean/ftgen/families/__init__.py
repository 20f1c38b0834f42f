"""Family registry: the built-in families, and ``register()`` for one defined elsewhere (a plugin
or a test). A built-in family is a module (or package) of this package and a class in it."""

from __future__ import annotations

import importlib

from .base import Family

# family name -> module (relative to this package) and the Family subclass in it
BUILTIN: dict[str, tuple[str, str]] = {
    "gemm": (".gemm", "GemmFamily"),
    "fft": (".fft", "FftFamily"),
    "kmeans": (".kmeans", "KmeansFamily"),
    "attention": (".attention", "AttentionFamily"),
}

_registered: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Offer ``family`` under ``family.name`` (replacing a registered family of that name)."""
    if not isinstance(family, Family) or not family.name:
        raise TypeError(f"{family!r} is not a named Family instance")
    _registered[family.name] = family
    return family


def unregister(name: str) -> None:
    _registered.pop(name, None)


def names() -> list[str]:
    return list(dict.fromkeys([*BUILTIN, *_registered]))


def get(name: str) -> Family:
    """The family called ``name``; KeyError lists the registered ones."""
    if name not in _registered:
        if name not in BUILTIN:
            raise KeyError(f"{name!r} is not a family (registered: {', '.join(names())})")
        mod, cls = BUILTIN[name]
        _registered[name] = getattr(importlib.import_module(mod, __name__), cls)()
    return _registered[name]
