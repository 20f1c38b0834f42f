"""Summarize a run of gpu_scale_out.sh: speed-ups on G GPUs, winners, identical campaign trials.

    python3 experiments/scripts/scale_report.py OUT G

Reads OUT/times.jsonl and the phases' JSON lines; prints a short table and writes OUT/scale.json. The
winners of two searches agree "within noise" where the other run's winner is, in the first run's own
timings, within the spread (min..max over the reps) of the first run's winner or within 2% of it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOLATILE = {"gpu", "gpu_uuid", "ms", "wall_s"}  # fields that may differ between identical trials


def rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def times(out: Path) -> dict[str, dict]:
    return {r["phase"]: r for r in rows(out / "times.jsonl")}


def search_summary(rs: list[dict]) -> tuple[int, dict, dict]:
    points = [r for r in rs if r.get("kernel") and "shape" in r]
    best = next((r["best"] for r in rs if "best" in r), {})
    ms = {}
    for r in points:
        if r.get("ok") and isinstance(r.get("ms"), dict):
            s = r["shape"]
            ms[(r["kernel"], f"{s['m']}x{s['n']}x{s['k']}")] = r["ms"]
    return len(points), best, ms


def winners_agree(best_a: dict, best_b: dict, ms_a: dict) -> dict:
    """Per shape: same winner, or the other winner within the first run's noise (said so), or not."""
    verdict = {}
    for shape, wa in best_a.items():
        wb = best_b.get(shape)
        if wb == wa:
            verdict[shape] = "same"
            continue
        a, b = ms_a.get((wa, shape)), ms_a.get((wb, shape))
        if a and b and (b["median"] <= a["max"] or b["median"] <= 1.02 * a["median"]):
            verdict[shape] = f"within noise ({wb}: {b['median']:.4g} ms against {wa}: {a['median']:.4g} ms in run 1)"
        else:
            verdict[shape] = f"differs ({wa} / {wb})"
    return verdict


def trials(rs: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rs if "trial" in r]


def main(out: Path, g: int) -> int:
    tm = times(out)
    res: dict = {"gpus": g}
    lines = []
    s1, sg = tm.get("search_1gpu"), tm.get(f"search_{g}gpu")
    if s1 and sg:
        n1, b1, m1 = search_summary(rows(out / "search_1gpu.jsonl"))
        ng, bg, _ = search_summary(rows(out / f"search_{g}gpu.jsonl"))
        speed = s1["s"] / sg["s"]
        agree = winners_agree(b1, bg, m1)
        res["search"] = {"points": [n1, ng], "s": [s1["s"], sg["s"]], "speedup": speed, "bar": 0.8 * g,
                         "rc": [s1["rc"], sg["rc"]], "winners": agree}
        lines.append(f"search   {n1} points: 1 GPU {s1['s']:.1f} s, {g} GPUs {sg['s']:.1f} s -> x{speed:.2f} "
                     f"(bar {0.8 * g:.2f}); winners: " + "; ".join(f"{k} {v}" for k, v in agree.items()))
    c1, cg = tm.get("campaign_1gpu"), tm.get(f"campaign_{g}gpu")
    if c1 and cg:
        t1, tg = trials(rows(out / "campaign_1gpu.jsonl")), trials(rows(out / f"campaign_{g}gpu.jsonl"))
        speed = c1["s"] / cg["s"]
        same = t1 == tg
        res["campaign"] = {"trials": [len(t1), len(tg)], "s": [c1["s"], cg["s"]], "speedup": speed, "bar": 0.85 * g,
                           "identical": same, "rc": [c1["rc"], cg["rc"]]}
        lines.append(f"campaign {len(t1)} trials: 1 GPU {c1['s']:.1f} s, {g} GPUs {cg['s']:.1f} s -> x{speed:.2f} "
                     f"(bar {0.85 * g:.2f}); trials identical: {same}")
    ck = tm.get("campaign_kill")
    if ck:
        t1, tk = trials(rows(out / "campaign_1gpu.jsonl")), trials(rows(out / "campaign_kill.jsonl"))
        killed = (out / "killed.txt").read_text().strip() if (out / "killed.txt").is_file() else "nothing killed"
        res["kill"] = {"killed": killed, "trials": len(tk), "identical": t1 == tk, "rc": ck["rc"]}
        lines.append(f"kill     {killed}; rc {ck['rc']}, {len(tk)} trials, identical to the 1-GPU run: {t1 == tk}")
    for name, what in (("campaign_plain", "the plain run (no pool)"), ("campaign_shards", "one process per chunk, merged")):
        cp = tm.get(name)
        if cp and c1:
            t1, tp = trials(rows(out / "campaign_1gpu.jsonl")), trials(rows(out / f"{name}.jsonl"))
            res[name] = {"trials": len(tp), "s": cp["s"], "identical": t1 == tp, "rc": cp["rc"]}
            lines.append(f"{name} {what}: {cp['s']:.1f} s (1 GPU through the pool {c1['s']:.1f} s), rc {cp['rc']}, "
                         f"{len(tp)} trials, identical to the 1-GPU run: {t1 == tp}")
    sm = tm.get("shards_merge")
    if sm:
        _, bm, _ = search_summary(rows(out / "shards_merged.jsonl"))
        ref_name = "search_1gpu.jsonl"
        _, b1, m1 = search_summary(rows(out / ref_name))
        agree = winners_agree(b1, bm, m1)
        res["shards"] = {"rc": sm["rc"], "winners": agree}
        lines.append("shards   2 processes merged; winners against the 1-GPU search: "
                     + "; ".join(f"{k} {v}" for k, v in agree.items()))
    (out / "scale.json").write_text(json.dumps(res, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
