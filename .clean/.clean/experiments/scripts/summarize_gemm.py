#!/usr/bin/env python3
"""Short tables of gemm results files (bench, search): per shape the best verified row vs cuBLAS,
and the summary lines of campaigns. Used by experiments/scripts/gpu_gemm_modes.sh and to write results READMEs."""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def load(path):
    rows, extra = [], []
    for line in open(path):
        r = json.loads(line)
        if "provenance" in r:
            continue
        (rows if "kernel" in r else extra).append(r)
    return rows, extra


def shape_key(r):
    s = r.get("shape") or {}
    return "x".join(str(v) for v in s.values()) if isinstance(s, dict) else "-"


def best_per_shape(rows):
    best = {}
    for r in rows:
        if not r.get("ok") or not r.get("ms"):
            continue
        k = (r.get("precision"), shape_key(r))
        if k not in best or r["ms"]["median"] < best[k]["ms"]["median"]:
            best[k] = r
    return best


def main(paths):
    for path in paths:
        rows, extra = load(path)
        print(f"== {path}: {len(rows)} rows, {sum(1 for r in rows if not r.get('ok'))} not ok")
        fails = defaultdict(int)
        for r in rows:
            if not r.get("ok"):
                fails[(r.get("error") or {}).get("kind", "verification")] += 1
        if fails:
            print("   failures by kind:", dict(fails))
        if "search" in path or "sweep" in path:
            best = best_per_shape(rows)
            ratios = []
            for (prec, sh), r in sorted(best.items(), key=lambda kv: (kv[0][0], [int(x) for x in kv[0][1].split("x")])):
                ref = (r.get("ref") or {}).get("ms")
                ratio = ref / r["ms"]["median"] if ref else None
                ratios.append(ratio)
                print(f"   {prec} {sh:16s} {r['ms']['median']:9.4f} ms  cuBLAS {ref:9.4f} ms  x{ratio:.3f}  {r['kernel']}")
        else:
            for r in rows:
                ms = (r.get("ms") or {}).get("median")
                ref = (r.get("ref") or {}).get("ms")
                ratio = f"{ref / ms:.3f}" if ms and ref else "-"
                ft = f"{r.get('injected', '-')}/{r.get('detected', '-')}/{r.get('corrected', '-')}/{r.get('false_alarms', '-')}"
                print(f"   {r['kernel'][5:]:48s} {shape_key(r):15s} {ms if ms is None else round(ms, 4)!s:>9} x{ratio:>6} {ft:>12} {r.get('ok')}")
        for e in extra:
            if "campaign" in e:
                c = e["campaign"]
                print(f"   campaign {c['kernel']}: significant {c['significant']} corrected {c['corrected']} "
                      f"coverage {c['coverage']} false alarms {c['false_alarms']}/{c['clean_trials']} max clean score {c['max_clean_score']:.3g}")


if __name__ == "__main__":
    main(sys.argv[1:])
