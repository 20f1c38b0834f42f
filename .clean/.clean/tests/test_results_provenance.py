"""Every file under results/ carries provenance: JSON lines start with ftgen's {"provenance": {...}} line, with a real
dirty flag and the library versions; any other file (tables, logs, a script's own JSON) is named in its folder's
provenance.json, which holds the same fields, taken from a JSON-lines header of the same call (skipped when results/ is
not in the tree)."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import REPO

RESULTS = REPO / "results"
FILES = sorted(p for p in RESULTS.rglob("*") if p.is_file() and p.parent != RESULTS) if RESULTS.is_dir() else []
REQUIRED = ("git_sha", "gpu", "driver", "nvcc")


def _complete(prov: dict) -> str | None:
    """None when ``prov`` is provenance of record, else what is missing."""
    missing = [k for k in REQUIRED if not prov.get(k)]
    if not isinstance(prov.get("git_dirty"), bool):
        missing.append("git_dirty (true or false)")
    libs = prov.get("libraries")
    if not isinstance(libs, dict) or not libs:
        missing.append("libraries")
    return ", ".join(missing) or None


def _header(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        first = f.readline()
    try:
        return json.loads(first).get("provenance")
    except (ValueError, AttributeError):
        return None


def _covered(path) -> bool:
    side = path.parent / "provenance.json"
    return side.is_file() and path.name in json.loads(side.read_text()).get("covers", [])


@pytest.mark.skipif(not FILES, reason="results/ data is not in this tree")
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_results_file_has_provenance(path):
    if path.name == "provenance.json":
        side = json.loads(path.read_text())
        assert _complete(side) is None, f"{path}: missing {_complete(side)}"
        for name in side.get("covers", []):
            assert (path.parent / name).is_file(), f"{path}: covers {name}, which is not in the folder"
        return
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        prov = _header(path)
        if prov is not None and _complete(prov) is None:
            return
    assert _covered(path), (f"{path}: no provenance of record (a JSON-lines header with git_dirty and libraries, or an entry in "
                            f"the folder's provenance.json)")
