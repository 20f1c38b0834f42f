#!/usr/bin/env bash
# The tf32x3 ABFT's strip widths, one call on one H200: STEPS (default "rounds camp512") of
#   rounds    SPEC (default experiments/specs/gemm_tf32x3_strips128.yaml) through gpu_gemm_rounds.sh (16 faults per
#             launch, the twin and cuBLAS SGEMM alternated, ROUNDS rounds, the odd shapes)
#   camp512   CAMP (default experiments/specs/gemm_tf32x3_strips128_campaign.yaml): 3 x (TRIALS, default 300, clean +
#             single bit flips) at 512x512x1024
#   camp4096  the same at 4096^3 with 1000 trials per distribution (seed 11)
#   campodd   the same at 1000x1234x777 (seed 12)
#   bash experiments/scripts/gpu_gemm_strips.sh OUT   (wheels in .whl/; FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
top=${1:?usage: gpu_gemm_strips.sh OUT}; mkdir -p "$top"; top=$(cd "$top" && pwd); cd "$(dirname "$0")/../.." || exit 1
camp=${CAMP:-experiments/specs/gemm_tf32x3_strips128_campaign.yaml}; out=$top/campaigns; mkdir -p "$out"
for step in ${STEPS:-rounds camp512}; do
  case $step in
    rounds) SPEC=${SPEC:-experiments/specs/gemm_tf32x3_strips128.yaml} ROUNDS=${ROUNDS:-2} LANE_SECONDS=${ROUNDS_SECONDS:-330} \
              bash experiments/scripts/gpu_gemm_rounds.sh "$top" ;;
    camp512) . experiments/scripts/gpu_common.sh
             ft 200 campaign $camp -o generated/strips --trials ${TRIALS:-300} --seed 7 --json $out/campaign_512.jsonl 2>&1 | tail -n 12; t camp512 ;;
    camp4096) . experiments/scripts/gpu_common.sh
              ft 400 campaign $camp -o generated/strips --trials 1000 --seed 11 --shape 4096x4096x4096 --json $out/campaign_4096.jsonl 2>&1 | tail -n 12; t camp4096 ;;
    campodd) . experiments/scripts/gpu_common.sh
             ft 300 campaign $camp -o generated/strips --trials 1000 --seed 12 --shape 1000x1234x777 --json $out/campaign_odd.jsonl 2>&1 | tail -n 12; t campodd ;;
  esac
done
for f in "$out"/*.jsonl; do [ -f "$f" ] && gzip -f "$f"; done
tar czf "$top/campaigns.tgz" -C "$top" campaigns && rm -rf "$out"
