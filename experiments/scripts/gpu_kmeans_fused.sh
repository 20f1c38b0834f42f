#!/usr/bin/env bash
# kmeans at small dims on the fused backend (specs/kmeans/fused_abft.yaml: one pass over X per iteration -- norms, mma.sync
# distances, arg-min, cluster sums -- with the row checksum per strip of centroids checked before the arg-min, the norms,
# arg-min and sums duplicated), one call on one H200 (<= 9 minutes): built (-j 16), benched at the two anchors with dims
# <= 32 without faults (the cuBLAS-based Lloyd iteration and the unprotected twin alternated in the executable,
# flash-kmeans alternated in its driver on the same data; torch and flash-kmeans from .whl/) and with one fault per launch
# (--inject 1: its own clean run, the uncorrected run, the corrected run), the spec's other shapes with and without
# faults, the Lloyd loop against the fp64 loop, campaigns (1000 clean + 1000 single bit flips per distribution) at the
# sites accumulator, argmin, norm and update (and the accumulator at an odd shape). A short table last; JSON lines under OUT. STEPS (default "anchors inject shapes lloyd
# campaign") picks the steps; "metrics" adds Nsight Compute's sections of the fused kernel; "source" its source counters (variant and twin); "profile" adds Nsight Compute's per-kernel device time of KERNEL's executable (variant and
# twin) at 2^20 x 8 x 128 and 2^20 x 32 x 128.
#   bash experiments/scripts/gpu_kmeans_fused.sh OUT   (SPEC: specs/kmeans/fused_abft.yaml or fused_tf32x3.yaml; FTGEN_GIT_SHA/DIRTY where the copy has no .git; KERNEL: the glob
#   of the variant of the campaigns and the profile, default *fused_s64_w8*; TRIALS: campaign trials per distribution, 1000;
#   CSHAPE / OSHAPE: the campaigns' shape and odd shape, default 16384x32x256 / 20011x29x300; SITES: the campaigns' sites,
#   default "accumulator argmin norm update" (refine builds: refine too))
set -u
out=${1:?usage: gpu_kmeans_fused.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build
spec=${SPEC:-specs/kmeans/fused_abft.yaml}; gen=generated/kfused; proj=$gen/$(sed -n "s/^name: //p" "$spec"); kern=${KERNEL:-*fused_s64_w8*}
trials=${TRIALS:-1000}
gen_build $spec $gen $proj
steps=" ${STEPS:-anchors inject shapes lloyd campaign} "
has() { [[ $steps == *" $1 "* ]]; }
anchors=1048576x8x128,1048576x32x128
if has profile; then
  ncu_times "$(ls $proj/bin/$kern | head -n 1)" 60 1048576x8x128 1048576x32x128
  t profile
fi
if has metrics; then
  # Nsight Compute's sections of the first fused_kernel launch (the variant's) at 2^20 x 8 x 128 and 2^20 x 32 x 128
  exe=$(ls $proj/bin/$kern | head -n 1)
  for s in 1048576x8x128 1048576x32x128; do
    timeout 120 ncu --kernel-name regex:fused_kernel --launch-count 1 --section SpeedOfLight --section Occupancy --section SchedulerStats \
      --section WarpStateStats --section LaunchStats "$exe" --shapes $s --reps 1 --warmup 0 > "$out/ncu_metrics_$s.txt" 2>&1
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|Compute \(SM\) Th|Memory Throughput|Block Limit" "$out/ncu_metrics_$s.txt" | head -20
  done
  t metrics
fi
if has source; then
  # Nsight Compute's source counters (instructions executed per source line and per SASS instruction) of the first
  # fused_kernel launch of the variant and of its twin at 2^20 x 8 x 128 and 2^20 x 32 x 128
  exe=$(ls $proj/bin/$kern | head -n 1)
  for s in 1048576x8x128 1048576x32x128; do
    for which in inj_cu twin_cu; do
      rep="$out/src_${which%_cu}_$s"
      timeout 150 ncu --kernel-name-base mangled --kernel-name "regex:${which}.*fused_kernel" --launch-count 1 --section SourceCounters \
        --section SpeedOfLight --import-source yes -o "$rep" -f "$exe" --shapes $s --reps 1 --warmup 0 > "$rep.log" 2>&1
      echo "source $which $s rc=$?"
      for what in cuda sass; do ncu -i "$rep.ncu-rep" --page source --csv --print-source $what > "$rep.$what.csv" 2>> "$rep.log"; done
      gzip -f "$rep.sass.csv"; rm -f "$rep.ncu-rep"
    done
  done
  t source
fi
if has shapes; then
  # (flash-kmeans only at the anchors: its driver's start-up takes most of a step's time)
  FTGEN_BENCH_REFS=none ft 60 bench $proj --reps 5 --warmup 2 --json "$out/shapes.jsonl" > "$out/shapes.txt" 2>&1
  FTGEN_BENCH_REFS=none ft 60 bench $proj --reps 5 --warmup 2 --inject 1 --json "$out/shapes_inject.jsonl" > "$out/shapes_inject.txt" 2>&1
  tail -n 4 "$out/shapes.txt"; t shapes
fi
if has anchors; then
  ft 150 bench $proj --shapes $anchors --reps 30 --warmup 5 --json "$out/anchors.jsonl" > "$out/anchors.txt" 2>&1
  t anchors
fi
if has inject; then
  ft 100 bench $proj --shapes $anchors --reps 20 --warmup 5 --inject 1 --json "$out/anchors_inject.jsonl" > "$out/anchors_inject.txt" 2>&1
  t anchors inject
fi
if has campaign; then
  # (the family's campaign shape has 64 dims: these are the fused backend's, and an odd one)
  for site in ${SITES:-accumulator argmin norm update}; do
    ft 90 campaign $spec -o $gen --kernels "$kern" --site $site --trials $trials --seed 7 --shape ${CSHAPE:-16384x32x256} \
      --json "$out/campaign_$site.jsonl" > "$out/campaign_$site.txt" 2>&1
    tail -n 4 "$out/campaign_$site.txt"; t campaign $site
  done
  ft 90 campaign $spec -o $gen --kernels "$kern" --site accumulator --trials $trials --seed 8 --shape ${OSHAPE:-20011x29x300} \
    --json "$out/campaign_odd.jsonl" > "$out/campaign_odd.txt" 2>&1
  tail -n 4 "$out/campaign_odd.txt"; t campaign odd
fi
if has lloyd; then
  kmeans_lloyd 65536x32x128,100003x29x300
  t lloyd
fi
python3 experiments/scripts/kmeans_table.py "$out"
