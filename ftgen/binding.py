"""ctypes binding of a library built by ``ftgen build --lib``, from the interface description installed beside it
(``ftgen_<name>.json``, written by :func:`ftgen.codegen.library.describe`). It knows C types, device addresses as
integers and streams as integers, and nothing of torch: ``ftgen.torch`` builds its ops on it, and any other array
library can call it the same way.
"""

from __future__ import annotations

import ctypes
import json
import threading
from pathlib import Path

ABI_VERSION = 5  # the C interface this binding speaks (accumulating counters, fault injection, attention's kv_heads, kmeans' init)

_SCALARS = {
    "int": ctypes.c_int,
    "long": ctypes.c_long,
    "long long": ctypes.c_longlong,
    "unsigned": ctypes.c_uint,
    "unsigned long long": ctypes.c_ulonglong,
    "size_t": ctypes.c_size_t,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}


class FtgenLibError(RuntimeError):
    """A library call returned an error status (the message names the function and the CUDA error)."""


class Counters(ctypes.Structure):
    """ftgen_<name>_counters."""

    _fields_ = [("detected", ctypes.c_ulonglong), ("corrected", ctypes.c_ulonglong), ("recomputed", ctypes.c_ulonglong),
                ("uncorrectable", ctypes.c_ulonglong), ("max_score", ctypes.c_double), ("injected", ctypes.c_ulonglong),
                ("unlocated", ctypes.c_ulonglong)]

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f, _ in self._fields_}


def ctype_of(c_type: str):
    """The ctypes type of a C parameter type of the description ('const float*' -> c_void_p, 'int' -> c_int)."""
    t = c_type.replace("const ", "").strip()
    if t.endswith("*"):
        return ctypes.c_void_p
    if t not in _SCALARS:
        raise ValueError(f"parameter type {c_type!r} has no ctypes equivalent here")
    return _SCALARS[t]


def find_description(so: Path) -> Path:
    """ftgen_<name>.json beside libftgen_<name>.so (an install prefix's lib/), or in ../lib (a project's build/)."""
    stem = so.name
    if not (stem.startswith("libftgen_") and ".so" in stem):
        raise ValueError(f"{so}: not a library built by `ftgen build --lib` (libftgen_<name>.so)")
    name = stem[len("lib"):stem.index(".so")]
    for d in (so.parent, so.parent.parent / "lib"):
        if (d / f"{name}.json").is_file():
            return d / f"{name}.json"
    raise FileNotFoundError(f"{so}: its interface description {name}.json is neither beside it nor in ../lib")


class Library:
    """One loaded ``libftgen_<name>.so``: its entry points by group name, handles per device."""

    def __init__(self, path: str | Path, description: str | Path | None = None):
        self.path = Path(path).resolve()
        desc_path = Path(description) if description else find_description(self.path)
        self.desc = json.loads(desc_path.read_text())
        if self.desc.get("abi_version") != ABI_VERSION:
            raise FtgenLibError(f"{self.path}: C interface version {self.desc.get('abi_version')}, this binding speaks "
                                f"{ABI_VERSION}; rebuild it with this ftgen (`ftgen build --lib`)")
        self.name = self.desc["name"]
        self.family = self.desc["family"]
        self.inject_variants = list(self.desc.get("inject", []))
        self.groups = {g["name"]: g for g in self.desc["groups"]}
        self._dll = ctypes.CDLL(str(self.path))
        p = f"ftgen_{self.name}_"
        vp, ci = ctypes.c_void_p, ctypes.c_int
        self._fn = {}
        for fname, args, res in [
            ("create", [ctypes.POINTER(vp)], ci), ("destroy", [vp], ci),
            ("last_counters", [vp, ctypes.POINTER(Counters)], ci), ("accumulate", [vp, ci], ci),
            ("reset_counters", [vp, vp], ci), ("record_scores", [vp, ci], ci), ("last_variant", [vp], ci),
            ("status_string", [ci], ctypes.c_char_p), ("variant_count", [], ci), ("variant_name", [ci], ctypes.c_char_p),
            ("version", [], ctypes.c_char_p), ("inject", [vp, ci, ctypes.c_ulonglong], ci),
        ]:
            f = getattr(self._dll, p + fname)
            f.argtypes, f.restype = args, res
            self._fn[fname] = f
        for g in self.desc["groups"]:
            f = getattr(self._dll, p + g["name"])
            f.argtypes = [vp] + [ctype_of(t) for t, _ in g["params"]] + [vp, ctypes.c_size_t, vp]
            f.restype = ci
            self._fn[g["name"]] = f
            s = getattr(self._dll, p + g["name"] + "_select")
            s.argtypes, s.restype = [ctypes.c_longlong] * len(self.desc["shape_keys"]), ci
            self._fn[g["name"] + "_select"] = s
        self._handles: dict[int, int] = {}
        self._lock = threading.Lock()

    # -- handles ---------------------------------------------------------------------------------------------
    def _check(self, status: int, what: str) -> None:
        if status != 0:
            msg = self._fn["status_string"](status)
            raise FtgenLibError(f"{self.path.name}: {what}: {msg.decode() if msg else status}")

    def handle(self, device: int) -> int:
        """The library's handle of `device` (created there on first use, counters accumulating). The caller makes
        `device` current first."""
        with self._lock:
            h = self._handles.get(device)
            if h is None:
                out = ctypes.c_void_p()
                self._check(self._fn["create"](ctypes.byref(out)), "create")
                h = out.value
                self._check(self._fn["accumulate"](h, 1), "accumulate")
                self._handles[device] = h
            return h

    def counters(self, device: int) -> dict:
        """The counters of `device`'s handle since its last reset (waits for the stream of its last call)."""
        h = self._handles.get(device)
        if h is None:
            return Counters().as_dict()
        c = Counters()
        self._check(self._fn["last_counters"](h, ctypes.byref(c)), "last_counters")
        return c.as_dict()

    def reset(self, device: int, stream: int = 0) -> None:
        h = self._handles.get(device)
        if h is not None:
            self._check(self._fn["reset_counters"](h, stream), "reset_counters")

    def inject(self, device: int, faults_per_call: int, seed: int = 0) -> None:
        """Arm fault injection on `device`'s handle: every later call flips a bit in `faults_per_call` threadblocks
        (0 disarms). Only variants built with `inject: true` have the sites (`inject_variants`); a call that runs
        another variant while armed fails."""
        if faults_per_call and not self.inject_variants:
            raise FtgenLibError(f"{self.path.name}: no variant was generated with inject: true; fault injection needs one")
        self._check(self._fn["inject"](self.handle(device), int(faults_per_call), int(seed) & (2**64 - 1)), "inject")

    def record_scores(self, device: int, on: bool = True) -> None:
        """Make `device`'s handle record the largest detection score (``max_score``) where that costs time (off by
        default: the FFT's checks then take every group through their rare path)."""
        self._check(self._fn["record_scores"](self.handle(device), int(bool(on))), "record_scores")

    def devices(self) -> list[int]:
        return sorted(self._handles)

    def close(self) -> None:
        with self._lock:
            for h in self._handles.values():
                self._fn["destroy"](h)
            self._handles.clear()

    # -- calls -----------------------------------------------------------------------------------------------
    def call(self, group: str, device: int, args: list, stream: int, workspace: int = 0, workspace_bytes: int = 0) -> None:
        """Run entry point `group` with its parameters `args` (in the description's order) on `stream`."""
        if group not in self.groups:
            raise KeyError(f"{self.path.name} has no entry point {group!r}; it has: {', '.join(self.groups)}")
        h = self.handle(device)
        self._check(self._fn[group](h, *args, workspace or None, workspace_bytes, stream or None), group)

    def select(self, group: str, *shape: int) -> int:
        return self._fn[group + "_select"](*shape)

    def variant_name(self, i: int) -> str | None:
        r = self._fn["variant_name"](i)
        return r.decode() if r else None

    def version(self) -> str:
        return self._fn["version"]().decode()
