"""Copy a device lane's files into results/ as a run of record and add its entry to results/index.json.

    python experiments/scripts/record_run.py SRC_DIR results/<gpu>/<family>/<claim>_<commit> FILE... \
        --claim "..." --family F --command "..." --figure KEY=VALUE ...

JSON-lines files (ftgen's, with their provenance header) are gzipped when larger than 64 KiB; any other file named
(logs, tables) is listed in the folder's provenance.json, whose fields come from the first JSON-lines header copied.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def commit_of(prov: dict) -> str | None:
    """The commit a run is of: the shards' where the file merges shards of one commit (--from), else its own."""
    shards = prov.get("shards_git_sha") or []
    return shards[0] if len(shards) == 1 else prov.get("git_sha")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dest")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--claim", required=True)
    ap.add_argument("--family", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--figure", action="append", default=[], help="KEY=VALUE (repeat)")
    ap.add_argument("--index-file", help="the file the index entry names: a path in the repository or a file of this run "
                    "(default: the first file copied)")
    ap.add_argument("--provenance-from", help="a JSON-lines file of the same device call whose header gives the provenance "
                    "(where no JSON-lines file is copied)")
    a = ap.parse_args()
    src, dest = Path(a.src), REPO / a.dest
    dest.mkdir(parents=True, exist_ok=True)
    prov, covers, copied = None, [], []
    if a.provenance_from:
        with open(a.provenance_from) as f:
            prov = json.loads(f.readline()).get("provenance")
    for name in a.files:
        p = src / name
        if name.endswith(".jsonl"):
            head = json.loads(p.open().readline()).get("provenance")
            prov = prov or head
            if p.stat().st_size > 64 * 1024:
                out = dest / (name + ".gz")
                with p.open("rb") as f, gzip.open(out, "wb", compresslevel=9) as g:
                    shutil.copyfileobj(f, g)
            else:
                out = dest / name
                shutil.copy(p, out)
        else:
            out = dest / name
            shutil.copy(p, out)
            covers.append(name)
        copied.append(out)
    if covers:
        if prov is None:
            sys.exit("no JSON-lines header to take the provenance of the other files from")
        side = {k: prov.get(k) for k in ("git_sha", "git_dirty", "gpu", "driver", "nvcc", "libraries", "gpu_state")}
        if prov.get("shards_git_sha"):  # a merge of shards (--from): the commits the shards ran
            side["shards_git_sha"] = prov["shards_git_sha"]
        side["covers"] = covers
        (dest / "provenance.json").write_text(json.dumps(side, indent=1) + "\n")
    fig = dict(kv.split("=", 1) for kv in a.figure)
    indexed = copied[0]
    if a.index_file:  # a path in the repository, or a file of this run (as named on the command line or as copied)
        found = [c for c in (REPO / a.index_file, dest / a.index_file, dest / (a.index_file + ".gz")) if c.is_file()]
        if not found:
            sys.exit(f"--index-file {a.index_file}: no such file in the repository or in {a.dest}")
        indexed = found[0]
    entry = {"claim": a.claim, "family": a.family,
             "file": str(indexed).replace(str(REPO) + "/", ""),
             "command": a.command, "commit": (commit_of(prov or {}) or "")[:7] or None, "gpu": (prov or {}).get("gpu"),
             "headline": False, "figure": fig}
    idx_path = REPO / "results" / "index.json"
    idx = json.loads(idx_path.read_text())
    idx = [e for e in idx if e.get("file") != entry["file"]] + [entry]
    idx_path.write_text(json.dumps(idx, indent=2, ensure_ascii=False) + "\n")
    print("\n".join(str(c.relative_to(REPO)) for c in copied))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
