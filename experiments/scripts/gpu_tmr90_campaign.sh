#!/usr/bin/env bash
# The cutlass90 TMR campaign on one GPU, in one call (<= 9 minutes): experiments/specs/gemm_cutlass90_tmr_campaign.yaml
# built (-j 16), then `ftgen campaign` (TRIALS clean + TRIALS single bit flips per distribution, default 1000; normal,
# uniform, log-uniform) at 512x512x1024 and at 1000x1234x777 (ODD=0 skips it). A short table last; OUT keeps the
# campaigns' summaries (campaign_*_summary.jsonl: provenance, summaries, per-bit and ROC rows, any significant miss).
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
# what comes back from the device: the provenance line, the summaries, per-bit and ROC rows (the trial rows stay behind:
# a significant fault left out of tolerance would be in the summaries' counts, and its trial is kept)
for f in "$out"/campaign_*.jsonl; do
  python3 - "$f" <<'P'
import json, sys
keep = [l for l in open(sys.argv[1]) if "trial" not in json.loads(l) or (json.loads(l).get("significant") and not json.loads(l).get("ok"))]
open(sys.argv[1].replace(".jsonl", "_summary.jsonl"), "w").writelines(keep)
P
  mkdir -p /tmp/tmr90_trials && mv "$f" /tmp/tmr90_trials/  # (off OUT: every file under it comes back)
done
