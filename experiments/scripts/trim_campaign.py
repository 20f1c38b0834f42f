#!/usr/bin/env python3
"""Trim a recorded campaign file for results/: its provenance, summary, per-bit and ROC rows, and per kernel the trials
that matter (significant or detected faults, false alarms, trials not ok, judged by ftgen.faults' significance rule).
Then re-judge both files with `python -m ftgen.faults` and refuse (exit 1, nothing written) unless every kernel's
significant, detected, corrected, false-alarm and counter-violation counts agree.

    python3 experiments/scripts/trim_campaign.py SRC.jsonl[.gz] DST_significant.jsonl.gz
"""

from __future__ import annotations

import collections
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ftgen.faults import is_significant, significance  # noqa: E402

COUNTS = ("significant", "detected", "corrected", "false_alarms", "counter_violations")


def kept(rows: list[dict]) -> list[dict]:
    by_kernel = collections.defaultdict(list)
    for r in rows:
        if "trial" in r:
            by_kernel[r.get("kernel")].append(r)
    keep = set()
    for trials in by_kernel.values():
        tol = significance(trials)["tolerance"]
        for r in trials:
            detected = int(r.get("detected") or 0) > 0
            if (r.get("injected") and is_significant(r, tol)) or detected or r.get("false_alarm") or not r.get("ok", True):
                keep.add(id(r))
    return [r for r in rows if "trial" not in r] + [r for r in rows if id(r) in keep]


def judged(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "ftgen.faults", str(path)], capture_output=True, text=True, cwd=REPO, check=True).stdout
    return {c["kernel"]: tuple(c[k] for k in COUNTS) for c in (json.loads(line)["campaign"] for line in out.splitlines())}


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        rows = [json.loads(line) for line in f]
    out = kept(rows)
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / dst.name
        with gzip.open(trial, "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in out)
        full, trimmed = judged(src), judged(trial)
        if full != trimmed:
            print(f"{src}: the trimmed file judges differently ({COUNTS}): {full} against {trimmed}", file=sys.stderr)
            return 1
        dst.write_bytes(trial.read_bytes())
    print(f"{dst}: {len(rows)} -> {len(out)} rows, the same verdicts per kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
