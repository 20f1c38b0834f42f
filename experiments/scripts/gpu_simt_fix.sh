#!/usr/bin/env bash
# The SIMT gemm levels' correction of a located element (a dot product checked against r_i - rest) on one GPU, in one
# call: experiments/specs/gemm_simt_levels.yaml built from the working tree (A) and, where OLD names a generated
# project of the same spec (ftgen generate with the earlier templates, carried), that one too (B); then
#   1. the campaign that left a corrected fault over its tolerance (threadblock, 256x256x512, seed 3, 60 trials),
#   2. campaigns of every level (CAMP_TRIALS per distribution, default 300) at 256x256x512 and 1000x1234x777,
#   3. A and B benched in turn (REPS rounds, default 3) at BENCH_SHAPES, clean and with 16 faults.
#   bash experiments/scripts/gpu_simt_fix.sh OUT [OLD]
set -uo pipefail
out=$1; old=${2:-}
mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/gemm_simt_levels.yaml; proj=simt_levels
provenance "$out" > /dev/null
t "build"
ft 200 generate "$spec" -o /tmp/simt-A > /dev/null && ft 200 build /tmp/simt-A/$proj -j 16 > "$out/build_A.log" 2>&1 || { tail -20 "$out/build_A.log"; exit 3; }
if [ -n "$old" ]; then
  rm -rf /tmp/simt-B && cp -r "$old" /tmp/simt-B && ft 200 build /tmp/simt-B -j 16 > "$out/build_B.log" 2>&1 || { tail -20 "$out/build_B.log"; exit 3; }
fi
t "campaign: the failing one"
ft 120 campaign "$spec" -o /tmp/simt-A --kernels 'gemm_f32_abft-tb*prepass*' --trials 60 --shape 256x256x512 --seed 3 \
  --json "$out/campaign_seed3.jsonl" > "$out/campaign_seed3.txt" 2>&1; echo "rc=$?" >> "$out/campaign_seed3.txt"
tail -4 "$out/campaign_seed3.txt"
for shape in 256x256x512 1000x1234x777; do
  t "campaigns $shape"
  ft 150 campaign "$spec" -o /tmp/simt-A --kernels '*abft*' --trials "${CAMP_TRIALS:-300}" --shape $shape --seed 11 \
    --json "$out/campaign_$shape.jsonl" > "$out/campaign_$shape.txt" 2>&1; echo "rc=$?" >> "$out/campaign_$shape.txt"
  grep -E "│|rc=|error" "$out/campaign_$shape.txt" | cut -c1-220
done
for rep in $(seq 1 "${REPS:-3}"); do
  for v in A B; do
    [ "$v" = B ] && [ -z "$old" ] && continue
    dir=/tmp/simt-A/$proj; [ "$v" = B ] && dir=/tmp/simt-B
    for inj in 0 16; do
      ft 60 bench "$dir" --shapes "${BENCH_SHAPES:-2048x2048x2048,4096x4096x4096}" --inject $inj --reps 10 --warmup 3 \
        --json "$out/ab_${v}${inj}_${rep}.jsonl" > /dev/null 2>&1
      echo "$v round $rep inject $inj rc=$?"
    done
  done
done
t "table"
python3 experiments/scripts/ab_table.py "$out" --shape-keys m,n,k A0 A16 $( [ -n "$old" ] && echo B0 B16 ) 2>&1 | tail -30
