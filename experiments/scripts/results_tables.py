#!/usr/bin/env python3
"""Markdown tables for the README from committed results files (the README's figures come only
from results/). Usage: python3 experiments/scripts/results_tables.py results/h200/gemm"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path


def lines_of(path: Path) -> list[str]:
    """The lines of a results file, committed gzipped (NAME.jsonl.gz) or not."""
    return (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()).splitlines()


def found(d: Path, name: str) -> Path | None:
    """d/name, or its gzipped copy d/name.gz."""
    return next((p for p in (d / name, d / (name + ".gz")) if p.is_file()), None)


def rows_of(path: Path):
    out = []
    for line in lines_of(path):
        r = json.loads(line)
        if "kernel" in r:
            out.append(r)
    return out


def best(rows):
    b = {}
    for r in rows:
        if r.get("ok") and r.get("ms"):
            key = (r["precision"], tuple(r["shape"].values()))
            if key not in b or r["ms"]["median"] < b[key]["ms"]["median"]:
                b[key] = r
    return b


def ratio(r):
    return r["ref"]["ms"] / r["ms"]["median"]


def sweep_table(path: Path, title: str) -> str:
    b = best(rows_of(path))
    lines = [f"**{title}** (`{path}`)", "", "| shape (m x n x k) | best variant | ms | cuBLAS ms | x cuBLAS |", "|---|---|---:|---:|---:|"]
    for (prec, sh), r in sorted(b.items(), key=lambda kv: (kv[0][0], kv[0][1][0] * kv[0][1][1] * kv[0][1][2], kv[0][1])):
        lines.append(f"| {'x'.join(map(str, sh))} | `{r['kernel']}` | {r['ms']['median']:.4f} | {r['ref']['ms']:.4f} | {ratio(r):.3f} |")
    irr = [ratio(r) for (p, sh), r in b.items() if sh[0] == sh[1] and 64 <= sh[0] <= 490 and (sh[0] - 64) % 32 == 0 and sh[2] in (256, 1024)]
    if irr:
        lines += ["", f"Irregular sweep (seed 000 5.1.2, {len(irr)} shapes): mean x cuBLAS = {statistics.mean(irr):.3f}"]
    return "\n".join(lines)


def levels_table(path: Path, shapes=((4096, 4096, 4096), (8192, 8192, 8192))) -> str:
    rows = rows_of(path)
    lines = ["| kernel | " + " | ".join("x".join(map(str, s)) + " ms (x cuBLAS)" for s in shapes) + " | ok |", "|---|" + "---:|" * len(shapes) + "---|"]
    for k in dict.fromkeys(r["kernel"] for r in rows):
        cells = []
        oks = []
        for s in shapes:
            r = next((r for r in rows if r["kernel"] == k and tuple(r["shape"].values()) == s), None)
            cells.append(f"{r['ms']['median']:.3f} ({ratio(r):.3f})" if r and r.get("ms") and r.get("ref") else "-")
            oks.append(bool(r and r.get("ok")))
        lines.append(f"| `{k}` | " + " | ".join(cells) + f" | {'yes' if all(oks) else 'no'} |")
    return "\n".join(lines)


def campaign_table(path: Path) -> str:
    lines = ["| kernel | clean | faulty | significant | corrected | coverage | false alarms | per distribution (corrected/significant, false alarms) |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for line in lines_of(path):
        r = json.loads(line)
        if "campaign" in r:
            c = r["campaign"]
            per = "; ".join(f"{d}: {v['corrected']}/{v['significant']}, {v['false_alarms']}" for d, v in c["by_dist"].items())
            lines.append(f"| `{c['kernel']}` | {c['clean_trials']} | {c['faulty_trials']} | {c['significant']} | {c['corrected']} | "
                         f"{100 * c['coverage']:.2f}% | {c['false_alarms']} | {per} |")
    return "\n".join(lines)


if __name__ == "__main__":
    d = Path(sys.argv[1] if len(sys.argv) > 1 else "results/h200/gemm")
    for name, title in (("sgemm_sweep.jsonl", "fp32, best searched variant per shape"), ("dgemm_sweep.jsonl", "fp64, best searched variant per shape")):
        if found(d, name):
            print(sweep_table(found(d, name), title), "\n")
    for name in ("abft_levels_clean.jsonl", "abft_levels_inject.jsonl"):
        if found(d, name):
            print(levels_table(found(d, name)), "\n")
    if found(d, "abft_campaign.jsonl"):
        print(campaign_table(found(d, "abft_campaign.jsonl")))
