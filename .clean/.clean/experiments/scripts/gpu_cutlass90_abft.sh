#!/usr/bin/env bash
# Hopper-native protected GEMM, one call on one H200 (<= 9 minutes): specs/gemm/cutlass90_abft.yaml (tf32x3 on the
# cutlass90 backend with the cutlass backend's ref_checksums: concurrent ABFT) generated and built (-j 16), benched with
# 16 faults per launch (the variant, its unprotected twin and cuBLAS SGEMM alternated; 4096^3, 8192^3 and the odd
# shapes), the fault campaign at 512x512x1024 (1000 clean + 1000 faulty trials per distribution), the bench without
# faults, and -- where the built threshold (lambda 1.5 on 2^-24, the sm80 check's) left less than a 1.5x margin over the
# largest clean score -- the bench and a shorter campaign at a lambda calibrated from it (FTGEN_ABFT_LAMBDA,
# docs/gemm-hopper.md), as time allows. A short table last; JSON lines under OUT.
#   bash experiments/scripts/gpu_cutlass90_abft.sh OUT   (wheels in .whl/ installed to /tmp/site; FTGEN_GIT_SHA/DIRTY where
#   the copy has no .git)
set -u
out=${1:?usage: gpu_cutlass90_abft.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
spec=specs/gemm/cutlass90_abft.yaml; gen=generated/c90abft; proj=$gen/gemm_cutlass90_abft
gen_build $spec $gen $proj

# 1. 16 faults per launch, timed with them (the target: x cuBLAS SGEMM), the big and the odd shapes
ft 130 bench $proj --inject 16 --shapes $big,$odd --reps 20 --warmup 5 --json "$out/bench_inject16.jsonl" 2>&1 | tail -n 8
t bench inject16
# 2. the campaign (the rule's significant single faults: coverage; clean trials: false alarms, the largest clean score)
ft 200 campaign $spec -o $gen --kernels '*abft*' --trials 1000 --seed 7 --shape 512x512x1024 --json "$out/campaign_512.jsonl" 2>&1 \
  | tail -n 6
t campaign
# 3. no faults planned: the check's cost alone
ft 80 bench $proj --shapes $big --reps 20 --warmup 5 --json "$out/bench_clean.jsonl" 2>&1 | tail -n 4; t bench clean

# 4. calibration: lambda = 1.5 (built) x the largest clean score seen x 1.5 (margin), where that is above 1.5
lam=$(python3 - "$out" <<'EOF'
import json, math, sys, pathlib
best = 0.0
for f in ("bench_clean.jsonl", "bench_inject16.jsonl", "campaign_512.jsonl"):
    p = pathlib.Path(sys.argv[1]) / f
    for line in (p.read_text().splitlines() if p.is_file() else []):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        best = max(best, float(r.get("max_score_clean") or 0), float((r.get("campaign") or {}).get("max_clean_score") or 0))
lam = 1.5 * best * 1.5
print(f"{math.ceil(lam * 10) / 10:.1f}" if lam > 1.5 else "")
EOF
)
echo "$lam" > "$out/lambda.txt"
if [ -n "$lam" ]; then
  echo "largest clean score above 1/1.5 of the threshold: FTGEN_ABFT_LAMBDA=$lam"
  export FTGEN_ABFT_LAMBDA=$lam
  ft 90 bench $proj --inject 16 --shapes $big --reps 10 --warmup 3 --json "$out/bench_inject16_lambda.jsonl" 2>&1 | tail -n 3
  t "bench lambda $lam"
  ft 150 campaign $spec -o $gen --kernels '*abft*' --trials 300 --seed 8 --shape 512x512x1024 --json "$out/campaign_512_lambda.jsonl" 2>&1 \
    | tail -n 4
  t "campaign lambda $lam"
  unset FTGEN_ABFT_LAMBDA
fi

# the table
python3 - "$out" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def rows(name):
    p = out / name
    return [json.loads(x) for x in p.read_text().splitlines() if x.startswith("{")] if p.is_file() else []
nan = float("nan")
print(f"{'run':<16} {'shape':<16} {'ms':>8} {'x_unprot':>8} {'x_cuBLAS':>8} {'rel_err':>9} {'fa':>3} {'clean_sc':>8} {'det/cor/unc/rec':>16} ok")
for name in ("bench_inject16.jsonl", "bench_clean.jsonl", "bench_inject16_lambda.jsonl"):
    for r in rows(name):
        if "shape" not in r:
            continue
        s = r["shape"]
        shape = f"{s['m']}x{s['n']}x{s['k']}"
        c = "/".join(str(r.get(k, "-")) for k in ("detected", "corrected", "uncorrectable", "recomputed"))
        print(f"{name[6:-6]:<16} {shape:<16} {(r.get('ms') or {}).get('median', nan):8.3f} {r.get('x_unprot') or nan:8.3f} "
              f"{r.get('speedup_vs_ref') or nan:8.3f} {r.get('max_rel_err_injected', r.get('max_rel_err')) or 0:9.2e} "
              f"{r.get('false_alarms', '-')!s:>3} {r.get('max_score_clean') or 0:8.3f} {c:>16} {r.get('ok', r.get('error'))}")
for name in ("campaign_512.jsonl", "campaign_512_lambda.jsonl"):
    for r in rows(name):
        c = r.get("campaign")
        if c:
            print(f"{name[:-6]}: coverage {c.get('detected')}/{c.get('significant')} = {c.get('coverage')}, false alarms "
                  f"{c.get('false_alarms')}/{c.get('clean_trials')}, largest clean score {c.get('max_clean_score')}, "
                  f"smallest significant score {c.get('min_significant_score')}")
lam = (out / "lambda.txt").read_text().strip() if (out / "lambda.txt").is_file() else ""
print(f"calibrated FTGEN_ABFT_LAMBDA: {lam or 'not needed (the built lambda 1.5 kept a 1.5x clean margin)'}")
EOF
t done
