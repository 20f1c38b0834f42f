"""The short table a GPU script prints last: per bench row of OUT/bench_*.jsonl its precision, the parameter tokens of
its name, shape, x the vendor reference, x the unprotected twin, verification and counters; then each campaign summary
of OUT/campaign_*.jsonl (significant, corrected, coverage, false alarms, the worst corrected fault over its
tolerance, the suspect band's rechecks in the clean and the faulty trials).

    python experiments/scripts/abft_summary.py OUT
"""
import glob
import json
import sys


def short(kernel: str) -> str:
    """The precision, the protection's token and the tokens after the backend's: what tells a script's variants apart."""
    parts = kernel.split("_")
    return " ".join(parts[1:3] + parts[4:])


def main(out: str) -> None:
    print("file kernel shape x_ref x_twin ok detected corrected recomputed rechecked significant max_rel_err/tol max_score_clean")
    for f in sorted(glob.glob(out + "/bench_*.jsonl")):
        for line in open(f):
            r = json.loads(line)
            if "kernel" not in r or "shape" not in r:
                continue
            s = "x".join(str(v) for v in r["shape"].values())
            rel = r.get("max_rel_err") / r["tolerance"] if r.get("max_rel_err") is not None and r.get("tolerance") else None
            print(f.rsplit("/", 1)[1][6:-6], short(r["kernel"]), s, r.get("speedup_vs_ref"), r.get("x_unprot"), r.get("ok"),
                  r.get("detected"), r.get("corrected"), r.get("recomputed"), r.get("rechecked"), r.get("significant"),
                  None if rel is None else round(rel, 4), r.get("max_score_clean"))
    for f in sorted(glob.glob(out + "/campaign_*.jsonl")):
        rechecks = {}  # kernel -> [clean trials' rechecks, faulty trials']
        for line in open(f):
            r = json.loads(line)
            if "trial" in r and r.get("rechecked") is not None:
                rechecks.setdefault(r["kernel"], [0, 0])[1 if r.get("injected") else 0] += r["rechecked"]
            if "campaign" in r:
                c = r["campaign"]
                tol = (c.get("significance") or {}).get("tolerance")
                worst = round(c["max_corrected_rel_err"] / tol, 3) if tol and c.get("max_corrected_rel_err") is not None else None
                print(f.rsplit("/", 1)[1], short(c["kernel"]), "significant", c["significant"], "corrected", c["corrected"],
                      "coverage", round(c["coverage"], 5), "false alarms", c["false_alarms"], "/", c["clean_trials"],
                      "max clean score", c.get("max_clean_score"), "worst corrected / tol", worst,
                      "rechecks clean / faulty", rechecks.get(c["kernel"]))


if __name__ == "__main__":
    main(sys.argv[1])
