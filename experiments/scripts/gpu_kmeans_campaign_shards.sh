#!/usr/bin/env bash
# The kmeans accumulator campaign of record (specs/kmeans/precisions.yaml: tf32x3 and fp64, online) in N shards, run
# over several calls of one GPU: SHARDS (e.g. "0 1 2") of N parts of TRIALS clean + TRIALS faulty trials per
# distribution at SEED, each shard's rows into OUT/campaign_accumulator_I.jsonl. A shard starts only while the call has
# time for one more (its predecessor's time plus a quarter). Merge the shards afterwards, without a GPU:
#   ftgen campaign specs/kmeans/precisions.yaml --from OUT*/campaign_accumulator_*.jsonl --json merged.jsonl
# OUT.tgz holds OUT. Usage: [N=12] [TRIALS=10500] [SEED=25] SHARDS="0 1" bash experiments/scripts/gpu_kmeans_campaign_shards.sh OUT
set -u
out=${1:?usage: gpu_kmeans_campaign_shards.sh OUT}
mkdir -p "$out"
. experiments/scripts/gpu_common.sh
N=${N:-12}; TRIALS=${TRIALS:-10500}; SEED=${SEED:-25}
kern=${KERNELS:-kmeans_tf32x3_abft-tb_*,kmeans_f64_abft-tb_*}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
need=0
for i in ${SHARDS:-0}; do
  if [ "$(left)" -lt "$need" ]; then echo "shard $i not started: $(left) s left, the last took $((need * 4 / 5)) s"; continue; fi
  s0=$SECONDS
  ft 560 campaign specs/kmeans/precisions.yaml -o generated/lk --kernels "$kern" --trials "$TRIALS" --seed "$SEED" \
    --shard "$i/$N" --json "$out/campaign_accumulator_$i.jsonl" > "$out/shard_$i.txt" 2>&1
  rc=$?
  echo "shard $i/$N rc $rc"; tail -n 6 "$out/shard_$i.txt"; t "shard $i"
  [ $rc -eq 0 ] || rm -f "$out/campaign_accumulator_$i.jsonl"
  need=$(( (SECONDS - s0) * 5 / 4 ))
done
# one archive (the device returns a bounded number of files)
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
