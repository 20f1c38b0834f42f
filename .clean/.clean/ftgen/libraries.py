"""External libraries a backend can require, as data.

A backend names what it needs (``requires = ("cublas", "cutlass")``); the CMake project links the
targets and checks the include directories of exactly those libraries, and ``ftgen build`` passes
the include directories it can locate at configure time. Adding a library is one entry here.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import FtgenError
from .paths import cutlass_include_dir


@dataclass(frozen=True)
class Library:
    name: str
    link: tuple[str, ...] = ()  # CMake targets a variant's targets link
    include_var: str | None = None  # CMake cache variable that holds the include directory
    check_file: str | None = None  # a header that must exist under that directory
    locate: Callable[[], Path | None] | None = None  # finds the include directory on this machine
    hint: str = ""  # how to get it when it is missing
    version: Callable[[], str | None] | None = None  # the version on this machine (results' provenance)


def cutlass_library(who: str):
    """CUTLASS's Python generator (``cutlass_library``: its ``library`` and ``gemm_operation`` modules), through which
    `who` (a backend) emits its kernels; a clear error where it cannot be imported."""
    try:
        from cutlass_library import gemm_operation, library
    except Exception as e:  # noqa: BLE001 - any import failure is an environment problem
        raise FtgenError(
            f"cannot import cutlass_library ({type(e).__name__}: {e}); {who} emits its kernels "
            f"through it: pip install nvidia-cutlass==4.2.0.0"
        ) from None
    return library, gemm_operation


def _load(names: tuple[str, ...]):
    """The first of ``names`` the dynamic loader finds, else the same under the CUDA toolkit's lib64."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    for n in (*names, *(os.path.join(home, "lib64", n) for n in names)):
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    return None


def _cublas_version() -> str | None:
    lib = _load(("libcublas.so", "libcublas.so.13", "libcublas.so.12"))
    if lib is None:
        return None
    parts = []
    for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        v = ctypes.c_int(0)
        try:
            if lib.cublasGetProperty(prop, ctypes.byref(v)) != 0:
                return None
        except AttributeError:
            return None
        parts.append(str(v.value))
    return ".".join(parts)


def _cufft_version() -> str | None:
    lib = _load(("libcufft.so", "libcufft.so.12", "libcufft.so.11"))
    if lib is None:
        return None
    v = ctypes.c_int(0)
    try:
        return str(v.value) if lib.cufftGetVersion(ctypes.byref(v)) == 0 else None
    except AttributeError:
        return None


def _wheel_version(dist: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return probe


LIBRARIES: dict[str, Library] = {
    "cudart": Library("cudart", ("CUDA::cudart",)),
    "cublas": Library("cublas", ("CUDA::cublas",), version=_cublas_version),
    "cufft": Library("cufft", ("CUDA::cufft",), version=_cufft_version),
    "cutlass": Library(
        "cutlass",
        include_var="FTGEN_CUTLASS_INCLUDE",
        check_file="cutlass/cutlass.h",
        locate=cutlass_include_dir,
        hint="pip install nvidia-cutlass",
        version=_wheel_version("nvidia-cutlass"),
    ),
}


def get(names) -> list[Library]:
    """The libraries of ``names`` in the order given; an unknown name is a bug in a backend."""
    out = []
    for n in names:
        if n not in LIBRARIES:
            raise FtgenError(f"unknown library {n!r} (known: {', '.join(LIBRARIES)})")
        out.append(LIBRARIES[n])
    return out


def configure_args(names=None) -> list[str]:
    """``-D<var>=<dir>`` for every library (of ``names``, or all) whose include directory is found."""
    args = []
    for lib in get(names) if names is not None else LIBRARIES.values():
        if lib.include_var and lib.locate:
            found = lib.locate()
            if found:
                args.append(f"-D{lib.include_var}={found}")
    return args


@functools.lru_cache(maxsize=None)
def versions() -> dict[str, str | None]:
    """The version on this machine of every library with a probe (None where it is absent)."""
    return {name: lib.version() for name, lib in LIBRARIES.items() if lib.version is not None}
