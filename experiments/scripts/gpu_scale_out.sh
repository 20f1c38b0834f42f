#!/bin/bash
# Scale-out on one host of G GPUs (the multi-GPU machine): a search and a campaign on 1 GPU and on all G,
# timed end to end with every executable already in the binary cache; one executable killed mid-campaign;
# two shards as separate processes merged with --from. Usage, from the repository root:
#   bash experiments/scripts/gpu_scale_out.sh OUT [warm|warmc|search|campaign|campaign1|cshards|kill|shards|report]...
# (no phase: warm search campaign kill shards report; campaign1 and cshards run on one GPU); SHAPES, TRIALS and CAMP_SHAPE override the search shapes, the trials per kind
# and the campaign's shape. Each phase writes its rows under OUT; `report` prints the table
# (experiments/scripts/scale_report.py) and writes OUT/scale.json.
set -uo pipefail
OUT=${1:?usage: gpu_scale_out.sh OUT [phase...]}; shift
source scripts/gpu_env.sh
gpu_start "$OUT"
PHASES=${*:-warm search campaign kill shards report}
SPEC=specs/gemm/sgemm_search.yaml
SHAPES=${SHAPES:-4096x4096x4096,2048x2048x2048,1000x1234x777,256x256x1024}
CAMP=specs/gemm/abft_campaign.yaml
CAMP_ARGS=(--trials "${TRIALS:-500}" --dists normal --seed 11 ${CAMP_SHAPE:+--shape $CAMP_SHAPE})
NG=$(nvidia-smi -L | wc -l)
ALL=$(seq -s, 0 $((NG - 1)))
W=/tmp/scale
# t NAME CMD...: run CMD, its output lines stamped with the seconds since its start, and record its wall time
us() { local t=${EPOCHREALTIME/./}; echo $((10#$t)); }  # microseconds since the epoch (bash arithmetic)
t() { local name=$1; shift; local s; s=$(us)
      "$@" 2>&1 | while IFS= read -r l; do local d=$(( $(us) - s )); printf '%5d.%02d %s\n' $((d / 1000000)) $((d % 1000000 / 10000)) "$l"; done > "$OUT/$name.log"
      local rc=${PIPESTATUS[0]} d=$(( $(us) - s ))
      printf '{"phase": "%s", "rc": %d, "s": %d.%03d}\n' "$name" "$rc" $((d / 1000000)) $((d % 1000000 / 1000)) >> "$OUT/times.jsonl"; tail -3 "$OUT/$name.log"; }

for p in $PHASES; do case $p in
  warm)  # compile every variant once (binary cache); these timings are not used
    t warm_search ft search $SPEC --shapes 256x256x1024 --reps 1 --warmup 0 -o $W/warm --gpus "$ALL" --no-cache ;&
  warmc)
    t warm_campaign ft campaign $CAMP --trials 2 --dists normal -o $W/warmc --gpus "$ALL" ;;
  search)
    t search_1gpu ft search $SPEC --shapes "$SHAPES" --reps 10 --warmup 3 -o $W/s1 --gpus 0 --no-cache --json "$OUT/search_1gpu.jsonl"
    t search_${NG}gpu ft search $SPEC --shapes "$SHAPES" --reps 10 --warmup 3 -o $W/sg --gpus all --no-cache --json "$OUT/search_${NG}gpu.jsonl" ;;
  campaign)
    t campaign_1gpu ft campaign $CAMP "${CAMP_ARGS[@]}" -o $W/c1 --gpus 0 --json "$OUT/campaign_1gpu.jsonl"
    t campaign_${NG}gpu ft campaign $CAMP "${CAMP_ARGS[@]}" -o $W/cg --gpus all --json "$OUT/campaign_${NG}gpu.jsonl" ;;
  campaign1)  # one GPU: the campaign through the pool (--gpus 0) and as a plain run (one executable run per variant)
    t campaign_1gpu ft campaign $CAMP "${CAMP_ARGS[@]}" -o $W/c1 --gpus 0 --json "$OUT/campaign_1gpu.jsonl"
    t campaign_plain ft campaign $CAMP "${CAMP_ARGS[@]}" -o $W/c1 --json "$OUT/campaign_plain.jsonl" ;;
  cshards)  # the campaign as CSHARDS shards (default 16: one chunk of 250 trials each at 500 trials of one
            # distribution), one process after another on GPU 0, merged: the unbatched runs, timed as a whole
    n=${CSHARDS:-16}; files=()
    for i in $(seq 0 $((n - 1))); do files+=("$OUT/cshard$i.jsonl"); done
    t campaign_shards bash -c 'for i in $(seq 0 $(('"$n"' - 1))); do CUDA_VISIBLE_DEVICES=0 python3 -m ftgen.cli campaign "$@" --shard $i/'"$n"' --json "'"$OUT"'/cshard$i.jsonl" || exit; done' _ \
      $CAMP "${CAMP_ARGS[@]}" -o $W/cs
    t campaign_shards_merge ft campaign $CAMP --from "${files[@]}" --json "$OUT/campaign_shards.jsonl" ;;
  kill)  # kill -9 one running campaign executable of the G-GPU run once it has worked a few seconds
    ( for _ in $(seq 600); do
        pid=$(pgrep -f "$W/ck/.*/bin/.* --(trials|runs)" | head -1)
        if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then echo "killed $(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-120) pid $pid" > "$OUT/killed.txt"; break; fi
        sleep 0.1; done ) &
    t campaign_kill ft campaign $CAMP "${CAMP_ARGS[@]}" -o $W/ck --gpus all --json "$OUT/campaign_kill.jsonl"
    wait; cat "$OUT/killed.txt" 2>/dev/null ;;
  shards)  # two shards as separate processes, one per GPU, then the merge
    CUDA_VISIBLE_DEVICES=0 ft search $SPEC --shapes "$SHAPES" --reps 10 --warmup 3 -o $W/sh --shard 0/2 --no-cache --json "$OUT/shard0.jsonl" > "$OUT/shard0.log" 2>&1 &
    CUDA_VISIBLE_DEVICES=$((NG > 1 ? 1 : 0)) ft search $SPEC --shapes "$SHAPES" --reps 10 --warmup 3 -o $W/sh --shard 1/2 --no-cache --json "$OUT/shard1.jsonl" > "$OUT/shard1.log" 2>&1 &
    wait
    t shards_merge ft search $SPEC --shapes "$SHAPES" -o $W/shm --from "$OUT/shard0.jsonl" "$OUT/shard1.jsonl" --json "$OUT/shards_merged.jsonl" ;;
  report) python3 experiments/scripts/scale_report.py "$OUT" "$NG"
    tar -czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" ;;
esac; done
