"""Build bookkeeping without a compiler: source checks against the manifest, the checked binary cache, the lock."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ftgen.build import cache_lookup, cache_store, project_lock, source_problems
from ftgen.codegen.emit import _hash_files


def make_project(root: Path, with_file_hashes: bool = False) -> tuple[Path, dict]:
    files = {"common/h.cuh": "// common\n", "k/k.cu": "int k;\n", "k/k_bench.cu": "int main(){}\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    own = {r: t for r, t in files.items() if r.startswith("k/")}
    entry = {"kernel": "k", "sources": sorted(own), "archs": ["sm_90"],
             "source_hash": hashlib.sha256((_hash_files({"common/h.cuh": files["common/h.cuh"]}) + _hash_files(own)).encode()).hexdigest()[:32]}
    if with_file_hashes:
        entry["file_hashes"] = {r: hashlib.sha256(t.encode()).hexdigest() for r, t in own.items()}
    (root / "manifest.json").write_text(json.dumps({"spec": {"name": "p", "family": "f", "arch": ["sm_90"], "source": "p.yaml"}, "variants": [entry]}))
    return root, entry


def test_sources_checked_against_the_manifest(tmp_path):
    project, entry = make_project(tmp_path)
    assert source_problems(project, [entry])[:2] == ({}, {})
    (project / "k/k.cu").write_text("int k2;\n")
    missing, changed, hashes = source_problems(project, [entry])
    assert not missing and "differ from what was generated" in changed["k"] and hashes["k"] != entry["source_hash"]
    (project / "k/k_bench.cu").unlink()
    missing, changed, _ = source_problems(project, [entry])
    assert "k/k_bench.cu vanished" in missing["k"] and "ftgen generate p.yaml" in missing["k"] and not changed


def test_changed_file_named_when_the_manifest_has_file_hashes(tmp_path):
    project, entry = make_project(tmp_path, with_file_hashes=True)
    (project / "k/k_bench.cu").write_text("int main(){return 1;}\n")
    _, changed, _ = source_problems(project, [entry])
    assert "(k/k_bench.cu)" in changed["k"]


def test_cache_entry_with_bad_or_no_checksum_is_discarded(tmp_path):
    exe = tmp_path / "exe"
    exe.write_bytes(b"\x7fELF" + b"x" * 5000)
    entry = tmp_path / "cache" / "key" / "k"
    cache_store(exe, entry)
    assert cache_lookup(entry) == entry and (entry.parent / "k.sha256").is_file()
    entry.write_bytes(entry.read_bytes()[:100])  # truncated
    assert cache_lookup(entry) is None and not entry.exists() and not (entry.parent / "k.sha256").exists()
    entry.write_bytes(b"no checksum beside me")
    assert cache_lookup(entry) is None and not entry.exists()


def test_second_lock_waits_and_says_so(tmp_path):
    import threading

    said = []
    first = project_lock(tmp_path)
    got = threading.Event()

    def second():
        lock = project_lock(tmp_path, said.append)
        got.set()
        lock.release()

    t = threading.Thread(target=second)
    t.start()
    t.join(1.0)
    assert not got.is_set() and said and "waiting for another ftgen build" in said[0]
    first.release()
    t.join(10)
    assert got.is_set()
