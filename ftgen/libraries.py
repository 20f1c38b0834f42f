"""External libraries a backend can require, as data.

A backend names what it needs (``requires = ("cublas", "cutlass")``); the CMake project links the
targets and checks the include directories of exactly those libraries, and ``ftgen build`` passes
the include directories it can locate at configure time. Adding a library is one entry here.
"""

from __future__ import annotations

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


LIBRARIES: dict[str, Library] = {
    "cudart": Library("cudart", ("CUDA::cudart",)),
    "cublas": Library("cublas", ("CUDA::cublas",)),
    "cufft": Library("cufft", ("CUDA::cufft",)),
    "cutlass": Library(
        "cutlass",
        include_var="FTGEN_CUTLASS_INCLUDE",
        check_file="cutlass/cutlass.h",
        locate=cutlass_include_dir,
        hint="pip install nvidia-cutlass",
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
