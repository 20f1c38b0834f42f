#!/usr/bin/env bash
# The cutlass90 TMR campaign on one GPU, in one call (<= 9 minutes): experiments/specs/gemm_cutlass90_tmr_campaign.yaml
# built (-j 16), then `ftgen campaign` (TRIALS clean + TRIALS single bit flips per distribution, default 1000; normal,
# uniform, log-uniform) at 512x512x1024 and at 1000x1234x777 (ODD=0 skips it). A short table last.
#   bash experiments/scripts/gpu_tmr90_campaign.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_tmr90_campaign.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/gemm_cutlass90_tmr_campaign.yaml; gen=generated/tmr90c; proj=$gen/gemm_cutlass90_tmr_campaign
gen_build $spec $gen $proj
ft 240 campaign $spec -o $gen --trials "${TRIALS:-1000}" --seed 11 --json "$out/campaign_main.jsonl" > "$out/campaign_main.txt" 2>&1
t campaign
if [ "${ODD:-1}" != 0 ]; then
  ft 200 campaign $spec -o $gen --trials "${TRIALS:-1000}" --seed 12 --shape 1000x1234x777 --json "$out/campaign_odd.jsonl" > "$out/campaign_odd.txt" 2>&1
  t campaign odd
fi
python3 experiments/scripts/abft_summary.py "$out"
