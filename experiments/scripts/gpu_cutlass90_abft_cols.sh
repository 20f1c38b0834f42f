#!/usr/bin/env bash
# experiments/specs/gemm_cutlass90_abft_cols.yaml in one call on one GPU (<= 9 minutes): built (-j 16); ROUNDS (default
# 2) rounds of every strip width with 16 faults per launch at 4096^3 and 8192^3 (the twin and cuBLAS SGEMM alternated),
# the odd shapes once; the campaigns of the widths KERNELS names (default: 64 and 128 columns; 1000 clean + 1000 single
# bit flips per distribution at 512x512x1024, CTRIALS (default 1000) at 1000x1234x777). A table last; the files in
# OUT/abft_cols.tgz.
#   bash experiments/scripts/gpu_cutlass90_abft_cols.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
top=${1:?usage: gpu_cutlass90_abft_cols.sh OUT}; mkdir -p "$top/abft_cols"; top=$(cd "$top" && pwd); out=$top/abft_cols
cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/gemm_cutlass90_abft_cols.yaml; gen=generated/abftcols; proj=$gen/gemm_cutlass90_abft_cols
gen_build $spec $gen $proj
for r in $(seq 1 "${ROUNDS:-2}"); do
  ft 90 bench $proj --inject 16 --shapes $big --reps 30 --warmup 5 --json "$out/bench_$r.jsonl" > "$out/bench_$r.txt" 2>&1; t "round $r"
done
ft 60 bench $proj --inject 16 --shapes $odd --reps 5 --warmup 2 --json "$out/odd.jsonl" > "$out/odd.txt" 2>&1; t odd
ft 200 campaign $spec -o $gen --kernels "${KERNELS:-*_conc[16]*}" --trials 1000 --seed 7 --shape 512x512x1024 --json "$out/campaign_512.jsonl" \
  > "$out/campaign_512.txt" 2>&1; t "campaign 512"
ft 170 campaign $spec -o $gen --kernels "${KERNELS:-*_conc[16]*}" --trials "${CTRIALS:-1000}" --seed 8 --shape 1000x1234x777 \
  --json "$out/campaign_odd.jsonl" > "$out/campaign_odd.txt" 2>&1; t "campaign odd"
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for p in sorted(out.glob("*.jsonl")):
    for line in p.read_text().splitlines():
        r = json.loads(line)
        if "campaign" in r:
            c = r["campaign"]
            print(p.name, c.get("kernel", "")[-40:], {k: c.get(k) for k in ("significant", "corrected", "detected", "coverage",
                  "false_alarms", "clean_trials", "faulty_trials", "max_clean_score")})
        elif r.get("kernel") and r.get("ms") and not p.name.startswith("campaign"):
            sh = "x".join(str(v) for v in r["shape"].values())
            print(p.name, r["kernel"][-30:], sh, f"ok={r.get('ok')} x_sgemm={r.get('speedup_vs_ref')} x_twin={r.get('x_unprot')}",
                  f"det={r.get('detected')}/{r.get('faults_applied')} fa={r.get('clean_false_alarms')} clean={r.get('max_score_clean')}")
        elif r.get("kernel") and not r.get("ok") and not p.name.startswith("campaign"):
            print(p.name, "FAILED", r["kernel"], r.get("error"))
PY
tar czf "$top/abft_cols.tgz" -C "$top" abft_cols && rm -rf "$out"
