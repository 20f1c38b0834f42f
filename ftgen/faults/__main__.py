"""Re-summarize a recorded campaign: ``python -m ftgen.faults FILE.jsonl[.gz] ...``.

Reads the per-trial rows of campaign results files and prints one ``{"campaign": {...}}`` line per kernel, judged by
the significance rule of this ftgen (the rows carry their own errors, depths and counters, so a campaign recorded under an
earlier rule can be judged again without a GPU)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from . import summarize


def _rows(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                yield json.loads(line)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip())
        return 0 if args else 2
    by_kernel: dict[str, list[dict]] = {}
    for a in args:
        p = Path(a)
        if not p.is_file():
            print(f"ftgen.faults: {a}: no such file", file=sys.stderr)
            return 2
        for r in _rows(p):
            if "trial" in r and "kernel" in r:
                by_kernel.setdefault(r["kernel"], []).append(r)
    if not by_kernel:
        print("ftgen.faults: no trial rows in the given files", file=sys.stderr)
        return 2
    for kernel, rows in by_kernel.items():
        print(json.dumps({"campaign": summarize(kernel, rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
