"""The table of an A/B run (gpu_gemm_ab.sh, gpu_attention_ab.sh): per kernel and shape, each version's median ms and
median x its own unprotected twin over the rounds' rows (OUT/ab_<version>_<round>.jsonl), '!' where a row failed
verification or raised a false alarm.

    python3 ab_table.py OUT --shape-keys m,n,k [--drop REGEX] A B ...

--drop removes a part of the kernel's name (e.g. its tiling) so that versions built with other tiles share a row."""

from __future__ import annotations

import argparse
import glob
import json
import re
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--shape-keys", required=True, help="the shape's keys in the order shown, comma-separated")
    ap.add_argument("--drop", default="", help="a regex removed from the kernel's name")
    a = ap.parse_args()
    keys = a.shape_keys.split(",")
    cell: dict = {}
    for v in a.versions:
        for f in sorted(glob.glob(f"{a.out}/ab_{v}_*.jsonl")):
            for line in open(f):
                r = json.loads(line)
                if "kernel" not in r or "ms" not in r:
                    continue
                name = re.sub(a.drop, "", r["kernel"]) if a.drop else r["kernel"]
                c = cell.setdefault((name, "x".join(str(r["shape"][k]) for k in keys)), {}).setdefault(v, {"ms": [], "x": [], "ok": True})
                c["ms"].append(r["ms"]["median"])
                if r.get("x_unprot"):
                    c["x"].append(r["x_unprot"])
                c["ok"] &= bool(r.get("ok")) and not r.get("false_alarms")
    width = max((len(k) for k, _ in cell), default=6)
    print(f"{'kernel':{width}s} {'shape':16s} " + " ".join(f"{v + ' ms':>9s} {'x twin':>7s}" for v in a.versions))
    for (k, s), byv in sorted(cell.items()):
        parts = []
        for v in a.versions:
            c = byv.get(v)
            if not c:
                parts.append(f"{'-':>9s} {'-':>7s}")
                continue
            x = f"{statistics.median(c['x']):7.3f}" if c["x"] else f"{'-':>7s}"
            parts.append(f"{statistics.median(c['ms']):8.4f}{' ' if c['ok'] else '!'} {x}")
        print(f"{k:{width}s} {s:16s} " + " ".join(parts))


if __name__ == "__main__":
    main()
