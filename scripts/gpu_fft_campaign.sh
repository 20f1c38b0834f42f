#!/usr/bin/env bash
# Two-sided-tb fault campaigns at multi-launch sizes (the seed's protocol: N clean + N single-bit-flip trials,
# ROC over the threshold), fp32 and fp64, automatic plans: 2^16 (two launches of 256 points, four columns per
# thread at stop 20; one since the simultaneous design), 2^20 (two of 1024), 2^23 (three launches). gpu_fft.sh runs its campaign at 4096 points
# (one launch); these exercise the location path of the first launches (launch twiddles per column, strided
# columns) and of the later ones. Usage: [LOGNS="18 22"] bash scripts/gpu_fft_campaign.sh OUTDIR [TRIALS]   (default 1000;
# LOGNS: the sizes up to 2^24, default 16 20 23; CASES="fp32:20 fp64:17": those precision / size pairs instead)
set -uo pipefail
out=${1:?usage: bash scripts/gpu_fft_campaign.sh OUTDIR [TRIALS]}
trials=${2:-1000}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_env.sh"
gpu_start "$out"
gen=/tmp/ftgen-fft-campaign
logns=${LOGNS:-16 20 23}
if [ -n "${CASES:-}" ]; then
  variants=""; logns=""
  for c in $CASES; do
    variants="$variants  - {precision: ${c%%:*}, params: {logn: ${c##*:}}}"$'\n'
    case " $logns " in *" ${c##*:} "*) ;; *) logns="$logns ${c##*:}" ;; esac
  done
else
  variants="  - {precision: [fp32, fp64], params: {logn: [${logns// /, }]}}"$'\n'
fi
cat > "$out/fft_campaign.yaml" <<Y
name: fft_campaign
family: fft
arch: [sm_90]
protection: {scheme: abft, level: two-sided-tb, inject: true}
variants:
${variants}shapes:
  - {logn: 16, batch: 64}
Y
python3 -m ftgen.cli generate "$out/fft_campaign.yaml" -o $gen > /dev/null || exit 2
python3 -m ftgen.cli build $gen/fft_campaign -j 16 --arch sm_90 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
for lg in $logns; do
  shape=$((1 << lg))x$((1 << ((24 - lg) / 2)))  # 2^16 x 16, 2^20 x 4, 2^23 x 1, ...
  python3 -m ftgen.cli campaign "$out/fft_campaign.yaml" -o $gen --kernels "*_logn${lg}_*" --trials "$trials" \
    --dists normal,loguniform --shape $shape --json "$out/campaign_tb_logn$lg.jsonl" > "$out/campaign_tb_logn$lg.txt" 2>&1
  echo "2^$lg rc=$?"
done
python3 - "$out" <<'PY'
import glob, json, os, sys
print("two-sided-tb campaigns: trials clean/faulty, significant, corrected, coverage, false alarms, largest clean score and\n"
      "smallest significant fault's score (both the decision's own), prefilter escalations per clean trial (largest)")
for p in sorted(glob.glob(os.path.join(sys.argv[1], "campaign_tb_logn*.jsonl"))):
    for line in open(p):
        c = json.loads(line).get("campaign")
        if c:
            cov = "-" if c["coverage"] is None else f"{100 * c['coverage']:.2f}%"
            print(f"  {c['kernel']:64s} {c['clean_trials']:5d}/{c['faulty_trials']:<5d} sig {c['significant']:4d} corr {c['corrected']:4d} "
                  f"cov {cov:>8s} fa {c['false_alarms']} score {c.get('max_clean_score', 0):.3f} / {c.get('min_significant_score') or 0:.3g} "
                  f"esc {c.get('escalated_per_clean_trial', 0):.2f} ({c.get('max_escalated_clean', 0)})")
PY
