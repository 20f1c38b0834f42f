#!/usr/bin/env bash
# Two-sided-tb fault campaigns at multi-launch sizes (docs/campaign-protocol.md: N clean + N single-bit-flip trials,
# ROC over the threshold), fp32 and fp64, automatic plans: 2^16 (two launches of 256 points), 2^20 (two of 1024),
# 2^23 (three launches). gpu_fft.sh runs its campaign at 4096 points
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
    --dists normal,loguniform --shape $shape --json "$out/campaign_tb_logn$lg.jsonl" 2>&1 | tee "$out/campaign_tb_logn$lg.txt"
  echo "2^$lg rc=${PIPESTATUS[0]}"
done
