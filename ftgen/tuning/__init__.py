"""Measured tuning, as data: the choices plan searches on a GPU found faster than a family's rules.

One JSON file per GPU, ``ftgen/tuning/<gpu>.json``::

    {"format": 1,
     "gpu": "h100",
     "arch": "sm_90",
     "provenance": {"gpu": "...", "what": "...", "results": ["results/..."]},
     "families": {"<family>": {"provenance": [{...}, ...],
                               "entries": [{"key": {...}, "params": {...}, "evidence": "..."}, ...]}}}

An entry's ``key`` says where it applies (a family defines its key fields, e.g. fft: precision, level, logn, arch) and
``params`` the parameter values chosen there; ``evidence`` (optional) says which measurement supports it. Families read
their entries at resolution (:func:`load`, :meth:`Tuning.for_family`); ``ftgen search --write-tuning`` writes them
(:func:`write`). The GPU whose file is read (:func:`choice`): the argument, else the environment variable
``FTGEN_TUNING`` (a GPU name or the path of a tuning file), else ``FTGEN_GPU``, else the GPU of this machine
(:func:`detect_gpu`, ``nvidia-smi``; ``FTGEN_TUNING_DETECT=0`` turns it off): its own file, else the file measured on a
GPU of the same architecture (a file's ``arch``), else none -- a GPU that nothing was measured for takes the rules; a
machine without a GPU reads ``h100``. A GPU named without a file has no entries: the families' rules apply. The
generated project's manifest records the choice (``tuning``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import SpecError
from ..fileio import atomic_write
from ..smi import query_gpus

FORMAT = 1
DEFAULT_GPU = "h100"
TUNING_DIR = Path(__file__).resolve().parent
_GPU_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_SCALAR = (str, int, float, bool)


class TuningError(SpecError):
    """A tuning file or a tuning choice that cannot be used (bad input: exit code 2)."""


@dataclass(frozen=True)
class FamilyTuning:
    """One family's entries in a tuning file."""

    family: str
    entries: tuple[dict, ...] = ()
    provenance: tuple[dict, ...] = ()

    def lookup(self, **key: Any) -> dict:
        """The params of the entry whose key is exactly ``key`` (a copy), or {} when there is none."""
        for e in self.entries:
            if e["key"] == key:
                return dict(e["params"])
        return {}

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Tuning:
    """A tuning file: its GPU, provenance and every family's entries."""

    gpu: str
    path: Path | None = None
    provenance: dict = field(default_factory=dict)
    families: dict = field(default_factory=dict)

    def for_family(self, name: str) -> FamilyTuning:
        return self.families.get(name) or FamilyTuning(name)


@dataclass(frozen=True)
class Choice:
    """Which tuning a resolution reads: ``gpu`` (a GPU name or a file path; "" for none: the rules) and why."""

    gpu: str
    why: str

    def to_dict(self) -> dict:
        return {"gpu": self.gpu or None, "why": self.why}


# the architecture's name (sm_XY) of a compute capability as nvidia-smi prints it ("9.0")
def _arch_of(cap: str) -> str | None:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cap or "")
    return f"sm_{m.group(1)}{m.group(2)}" if m else None


def short_name(name: str) -> str:
    """A GPU's tuning name from its marketing name: ``NVIDIA H100 80GB HBM3`` -> ``h100``, ``NVIDIA A100-SXM4-80GB`` ->
    ``a100``, ``NVIDIA GH200 480GB`` -> ``gh200``, ``NVIDIA GeForce RTX 4090`` -> ``rtx4090``; otherwise the name in
    lower case with every run of other characters as one '-'."""
    words = re.sub(r"\b(NVIDIA|GeForce|Tesla|Quadro)\b", " ", name, flags=re.I).split()
    for i, w in enumerate(words):
        m = re.match(r"([A-Za-z]{1,3}\d{2,4}[A-Za-z]?)(?:$|-)", w)
        if m:
            return m.group(1).lower()
        if w.upper() in ("RTX", "GTX") and i + 1 < len(words) and words[i + 1].isdigit():
            return f"{w}{words[i + 1]}".lower()
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


@lru_cache(maxsize=1)
def detect_gpu() -> tuple[str, str | None] | None:
    """(marketing name, sm_XY) of this machine's first GPU by ``nvidia-smi``, or None without one (no driver, no GPU,
    ``FTGEN_TUNING_DETECT=0``)."""
    if os.environ.get("FTGEN_TUNING_DETECT", "1") in ("0", "false", "no", "off"):
        return None
    rows = query_gpus(["name", "compute_cap"], timeout=15)
    if not rows:
        return None
    return ",".join(rows[0][:-1]), _arch_of(rows[0][-1])


def _file_arch(path: Path) -> str | None:
    """The architecture a tuning file was measured on (its ``arch``), None when it names none or cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _file_arch_of(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _file_arch_of(path: str, mtime_ns: int, size: int) -> str | None:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc.get("arch") if isinstance(doc, dict) else None


def choice() -> Choice:
    """The tuning this process reads (the order is the module's: FTGEN_TUNING, FTGEN_GPU, this machine's GPU, h100)."""
    for var in ("FTGEN_TUNING", "FTGEN_GPU"):
        if os.environ.get(var):
            return Choice(os.environ[var], var)
    found = detect_gpu()
    if found is None:
        return Choice(DEFAULT_GPU, "default (no GPU detected)")
    name, arch = found
    own = short_name(name)
    if (TUNING_DIR / f"{own}.json").is_file():
        return Choice(own, f"detected {name}")
    if arch:
        for f in sorted(TUNING_DIR.glob("*.json")):
            if _file_arch(f) == arch:
                return Choice(f.stem, f"detected {name} ({arch}): no {own} file, the {arch} file {f.stem}")
    return Choice("", f"detected {name} ({arch or 'unknown architecture'}): no tuning measured for it, the rules apply")


def default_gpu() -> str:
    """The GPU (or tuning file path) :func:`choice` names ("" for none)."""
    return choice().gpu


def tuning_path(gpu: str | None = None) -> Path:
    """The file of a GPU name (``ftgen/tuning/<gpu>.json``), or ``gpu`` itself when it names a file path."""
    g = (gpu or default_gpu()).strip()
    if g.endswith(".json") or os.sep in g or "/" in g:
        return Path(g).expanduser()
    name = g.lower()
    if not _GPU_NAME.match(name):
        raise TuningError(f"tuning GPU {g!r}: a GPU name is lower-case letters, digits, '.', '_' or '-' (e.g. h100), "
                          f"or give the path of a tuning .json file (FTGEN_TUNING)")
    return TUNING_DIR / f"{name}.json"


def load(gpu: str | None = None) -> Tuning:
    """The tuning of a GPU (None: :func:`default_gpu`). A GPU name without a file gives an empty tuning; a path that does
    not exist, or a file that is not a valid tuning file, raises TuningError."""
    if gpu is None:
        gpu = default_gpu()
        if not gpu:
            return Tuning("")
    path = tuning_path(gpu)
    explicit = path.parent != TUNING_DIR
    try:
        stat = path.stat()
    except FileNotFoundError:
        if explicit:
            raise TuningError(f"tuning file {path} does not exist (FTGEN_TUNING names a GPU, e.g. h100, or a tuning .json file)") from None
        return Tuning(path.stem)
    return _load_file(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _load_file(path: str, mtime_ns: int, size: int) -> Tuning:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise TuningError(f"tuning file {path}: cannot read it as JSON ({e})") from None
    return _parse(doc, path)


def _parse(doc: Any, where: str) -> Tuning:
    if not isinstance(doc, dict):
        raise TuningError(f"tuning file {where}: the top level must be an object with format, gpu, provenance, families")
    if doc.get("format") != FORMAT:
        raise TuningError(f"tuning file {where}: format must be {FORMAT}, got {doc.get('format')!r}")
    fams = doc.get("families", {})
    if not isinstance(fams, dict):
        raise TuningError(f"tuning file {where}: families must be an object of family name -> {{provenance, entries}}")
    out = {}
    for name, body in fams.items():
        if not isinstance(body, dict) or not isinstance(body.get("entries", []), list):
            raise TuningError(f"tuning file {where}: families.{name} must be an object with a list 'entries'")
        entries = tuple(_check_entry(e, f"{where}: families.{name}.entries[{i}]") for i, e in enumerate(body.get("entries", [])))
        prov = body.get("provenance", [])
        out[name] = FamilyTuning(name, entries, tuple(prov if isinstance(prov, list) else [prov]))
    prov = doc.get("provenance", {})
    return Tuning(str(doc.get("gpu", Path(where).stem)), Path(where), prov if isinstance(prov, dict) else {}, out)


def _check_entry(e: Any, where: str) -> dict:
    if not isinstance(e, dict) or not isinstance(e.get("key"), dict) or not isinstance(e.get("params"), dict):
        raise TuningError(f"{where}: an entry is an object with 'key' and 'params' objects")
    for part in ("key", "params"):
        for k, v in e[part].items():
            if not isinstance(v, _SCALAR):
                raise TuningError(f"{where}.{part}.{k}: {v!r} is not a number, string or boolean")
    return {"key": dict(e["key"]), "params": dict(e["params"]), **({"evidence": str(e["evidence"])} if "evidence" in e else {})}


def write(path: str | Path, family: str, entries: Iterable[Mapping[str, Any]], provenance: Mapping[str, Any]) -> Path:
    """Merge a family's entries into the tuning file at ``path`` (created when missing): an entry replaces the one with
    the same key, the others stay; ``provenance`` (what was measured, GPU, the results it comes from) is appended to the
    family's provenance list. Written to a temporary file and renamed into place. Returns the path."""
    path = Path(path)
    new = [_check_entry(dict(e), f"{family} entry {i}") for i, e in enumerate(entries)]
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise TuningError(f"tuning file {path}: cannot read it as JSON ({e})") from None
        _parse(doc, str(path))
    else:
        found = detect_gpu()
        doc = {"format": FORMAT, "gpu": path.stem, **({"arch": found[1]} if found and found[1] else {}), "provenance": {},
               "families": {}}
    fam = doc["families"].setdefault(family, {"provenance": [], "entries": []})
    keys = [e["key"] for e in new]
    kept = [e for e in fam.get("entries", []) if e.get("key") not in keys]
    fam["entries"] = kept + new
    prov = fam.get("provenance", [])
    fam["provenance"] = (prov if isinstance(prov, list) else [prov]) + [dict(provenance)]
    atomic_write(path, json.dumps(doc, indent=1) + "\n")
    return path
