"""Where ftgen finds its templates, specs and caches, in a checkout or an installed wheel."""

from __future__ import annotations

import importlib.util
import os
import unicodedata
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    repo = _PKG.parent / name  # a checkout or an editable install
    if repo.is_dir():
        return repo
    return _PKG / "_data" / name  # a wheel (force-included by pyproject.toml)


def templates_dir() -> Path:
    return _data_dir("templates")


def specs_dir() -> Path:
    return _data_dir("specs")


def check_path_text(flag: str, text: str) -> None:
    """A path given on the command line: not empty, and without newlines or other control characters (CMake and
    the build tools cannot carry them); else a SpecError naming ``flag``."""
    from .errors import SpecError

    if not text:
        raise SpecError(f"{flag}: empty; give a directory (. for the current one)")
    bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise SpecError(f"{flag}: {text[:80]!r} holds the control character {bad!r}; give a path without newlines, tabs "
                        "or other control characters")


def cache_dir() -> Path:
    """Crash-safe results cache and compiled-binary cache (FTGEN_CACHE_DIR overrides)."""
    env = os.environ.get("FTGEN_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ftgen"


def cutlass_include_dir() -> Path | None:
    """CUTLASS/CuTe headers shipped inside the nvidia-cutlass wheel (cutlass_library/source/include)."""
    env = os.environ.get("FTGEN_CUTLASS_INCLUDE")
    if env:
        return Path(env)
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        inc = Path(loc) / "source" / "include"
        if (inc / "cutlass" / "cutlass.h").is_file():
            return inc
    return None
