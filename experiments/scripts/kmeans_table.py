"""The short table of a kmeans GPU call (experiments/scripts/gpu_kmeans*.sh): per JSON-lines file under OUT, each row's kernel,
shape, median ms, ratios to flash-kmeans and the cuBLAS-based iteration, x_unprot, verification and fault counters, and
each campaign's summary.
    python3 experiments/scripts/kmeans_table.py OUT
"""
import gzip, json, pathlib, sys
for f in sorted([*pathlib.Path(sys.argv[1]).glob("*.jsonl"), *pathlib.Path(sys.argv[1]).glob("*.jsonl.gz")]):
    text = gzip.decompress(f.read_bytes()).decode() if f.suffix == ".gz" else f.read_text()
    for line in text.splitlines():
        r = json.loads(line)
        if "campaign" in r:
            c = r["campaign"]
            print(f.name.split(".")[0], {k: c.get(k) for k in ("significant", "corrected", "coverage", "false_alarms", "clean_trials", "max_clean_score",
                                                  "counter_violations", "by_dist")})
        if "shape" not in r or "kernel" not in r or "ms" not in r:
            continue
        s = "x".join(str(v) for v in r["shape"].values())
        x = r.get("speedup_vs_refs") or {}
        print(f.stem, r["kernel"][7:], s, round(r["ms"]["median"], 4), "flash", round(x.get("flash-kmeans", float("nan")), 3),
              "cublas", round(x.get("cublas-lloyd", float("nan")), 3), "x_unprot", r.get("x_unprot"), "ok", r.get("ok"),
              "agree", r.get("agreement"), "ft", {k: r.get(k) for k in ("injected", "detected", "corrected", "recomputed", "clean_false_alarms", "significant")},
              "lloyd", r.get("lloyd_inertia_rel", ""),
              *(("iters", r["lloyd_iters"], r["lloyd_iters_ref"], "final", r["lloyd_final_inertia_rel"], "lloyd_ok", r["lloyd_ok"])
                if "lloyd_iters_ref" in r else ()))
