#!/usr/bin/env bash
# The mma backend's warp-level ABFT beside its threadblock level (experiments/specs/kmeans_warp.yaml) on one GPU, in one
# call: built (-j 16); STEPS (default "anchors inject shapes campaign"):
#   anchors   the four flash-kmeans anchors, each variant alternated with its twin, the cuBLAS-based iteration and
#             flash-kmeans (from .whl/), median of REPS (10)
#   inject    the anchors with one fault per launch (every row verified)
#   shapes    awkward shapes clean and with one fault: 1000003x3x7, 100003x29x300, 65536x100x1000, 4099x129x1
#   campaign  site accumulator, the warp level in tf32x3 and fp64 at CSHAPE (16384x64x256), TRIALS (400) clean + TRIALS
#             single bit flips per distribution, SEED (25); with SHARDS (e.g. "0 1") only those parts of N (2), each into
#             OUT/campaign_I.jsonl, at most CAMPAIGN_SECONDS (400) each
# A short table last.   bash experiments/scripts/gpu_kmeans_warp.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_kmeans_warp.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-experiments/specs/kmeans_warp.yaml}; gen=generated/kw; proj=$gen/$(sed -n 's/^name: *//p' "$spec")
gen_build "$spec" $gen "$proj"
anchors=1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024
shapes=1000003x3x7,100003x29x300,65536x100x1000,4099x129x1
for step in ${STEPS:-anchors inject shapes campaign}; do
  case $step in
    anchors) ft 240 bench "$proj" --shapes $anchors --reps "${REPS:-10}" --warmup 3 --json "$out/anchors.jsonl" > "$out/anchors.txt" 2>&1 ;;
    inject) FTGEN_BENCH_REFS=none ft 150 bench "$proj" --shapes $anchors --reps 3 --warmup 1 --inject 1 \
              --json "$out/anchors_inject.jsonl" > "$out/anchors_inject.txt" 2>&1 ;;
    shapes) FTGEN_BENCH_REFS=none ft 90 bench "$proj" --shapes $shapes --reps 3 --warmup 1 --json "$out/shapes.jsonl" > "$out/shapes.txt" 2>&1
            FTGEN_BENCH_REFS=none ft 90 bench "$proj" --shapes $shapes --reps 3 --warmup 1 --inject 1 \
              --json "$out/shapes_inject.jsonl" > "$out/shapes_inject.txt" 2>&1 ;;
    campaign)  # SHARDS="0 1" N=2: those parts of the campaign, each into campaign_I.jsonl (merge with ftgen campaign --from)
      for i in ${SHARDS:-all}; do
        f=campaign; sh=(); [ "$i" = all ] || { f=campaign_$i; sh=(--shard "$i/${N:-2}"); }
        ft "${CAMPAIGN_SECONDS:-400}" campaign "$spec" -o $gen --kernels "${CKERNELS:-kmeans_tf32x3_abft-warp_*,kmeans_f64_abft-warp_*}" \
          --site accumulator --shape "${CSHAPE:-16384x64x256}" --trials "${TRIALS:-400}" --seed "${SEED:-25}" "${sh[@]}" \
          --json "$out/$f.jsonl" > "$out/$f.txt" 2>&1
        echo "$f rc $?"; gzip -f "$out/$f.jsonl"  # a trial a row: over the 16 MB a file the device returns
      done ;;
  esac
  echo "$step rc $?"; t "$step"
done
python3 experiments/scripts/kmeans_table.py "$out"
