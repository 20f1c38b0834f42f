#!/usr/bin/env bash
# kmeans on the cutlass90 backend with the threadblock ABFT (specs/kmeans/cutlass90_abft.yaml: the reference checksums in
# 8 extra columns of the GEMM's own tiles, every row checked in the epilogue before the arg-min), one call on one H200
# (<= 9 minutes): built (-j 16), benched at the four flash-kmeans anchors without faults (refs: the cuBLAS-based Lloyd
# iteration and the unprotected twin alternated in the executable, flash-kmeans alternated in its driver on the same data;
# torch and flash-kmeans from .whl/) and with one fault per launch (--inject 1: its own clean run, the uncorrected run,
# the corrected run), the spec's awkward shapes with and without faults, the Lloyd loop against the fp64 loop, the
# accumulator campaign (1000 clean + 1000 single bit flips per distribution) at the campaign shape and an odd one.
# A short table last; JSON lines under OUT. STEPS (default "anchors inject shapes lloyd campaign") picks the steps;
# "profile" adds Nsight Compute's per-kernel device time of KERNEL's executable (variant and twin) at 2^20 x 8 x 128
# and 2^20 x 128 x 1024 (or the shapes PSHAPES), with the first launches in order; "stalls" Nsight Compute's warp-state, scheduler, instruction
# and launch sections of the first checked assign GEMM (ArgMinDirect<8>) and of the twin's (ArgMinDirect<0>) at the same
# two shapes (OUT/stalls_<which>_<shape>.txt); "source" their source counters at 2^20 x 128 x 1024 or SSHAPE (instructions
# executed per CUDA source line and per SASS instruction: OUT/src_<which>.{cuda,sass}.csv.gz; per source line with the
# stall samples: OUT/src_<which>.lines.txt); "memk" Nsight Compute's memory and
# warp-state sections of X's pass and the update's sums and reduction at 2^20 x 128 x 1024 (OUT/memk.txt); "sites" the
# campaigns of the sites SITES (default "norm update": X's norms, the update's sums; 300 + 300 per distribution at
# 65536 x 128 x 256); "quick" every shape of the spec
# without flash-kmeans, then the anchors with it, 10 reps each, clean (OUT/shapes.jsonl, OUT/anchors.jsonl).
#   bash experiments/scripts/gpu_kmeans90_abft.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git; KERNEL: the
#   glob of the variant of the campaigns and the profile, default *128x160x32*; SPEC: the spec, default
#   specs/kmeans/cutlass90_abft.yaml (specs/kmeans/cutlass90_tf32x3.yaml: tf32x3); BUILD_KERNELS: build only these;
#   TRIALS: the campaign's trials per distribution, default 1000; CAMPAIGN_SECONDS: each campaign's time limit)
set -u
out=${1:?usage: gpu_kmeans90_abft.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build
spec=${SPEC:-specs/kmeans/cutlass90_abft.yaml}; gen=generated/k90a; kern=${KERNEL:-*128x160x32*}
proj=$gen/$(sed -n 's/^name: *//p' "$spec")
gen_build $spec $gen $proj
steps=" ${STEPS:-anchors inject shapes lloyd campaign} "
has() { [[ $steps == *" $1 "* ]]; }
anchors=1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024
if has profile; then
  ncu_times "$(ls $proj/bin/$kern | head -n 1)" 120 ${PSHAPES:-1048576x8x128 1048576x128x1024}
  t profile
fi
if has stalls; then
  exe=$(ls $proj/bin/$kern | head -n 1)
  for s in 1048576x8x128 1048576x128x1024; do
    for which in ILi8E ILi0E; do
      timeout 150 ncu --kernel-name-base mangled --kernel-name "regex:ArgMinDirect$which" --launch-count 1 --section WarpStateStats \
        --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy --section SpeedOfLight \
        "$exe" --shapes $s --reps 1 --warmup 0 > "$out/stalls_${which}_$s.txt" 2>&1
      echo "stalls $which $s rc=$?"
      grep -E "Duration|Registers Per|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Executed Instructions  |Dynamic Shared|Achieved Occ" \
        "$out/stalls_${which}_$s.txt" | head -30
    done
  done
  t stalls
fi
if has memk; then  # the memory-bound kernels of the iteration (X's pass, the update's sums and reduction) at 2^20 x 128 x 1024
  exe=$(ls $proj/bin/$kern | head -n 1)
  timeout 200 ncu --kernel-name regex:"^(x_stats_kernel|norms_kernel|sums_kernel|reduce_kernel)" --launch-count 10 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
    "$exe" --shapes 1048576x128x1024 --reps 1 --warmup 0 > "$out/memk.txt" 2>&1
  echo "memk rc=$?"; grep -E "^  [a-z_]+kernel|Duration|Memory Throughput|DRAM Throughput|Achieved Occ|Registers Per|Grid Size|Block Size" "$out/memk.txt" | head -80
  t memk
fi
if has source; then
  exe=$(ls $proj/bin/$kern | head -n 1)
  for which in ILi8E ILi0E; do
    rep="$out/src_$which"
    timeout 200 ncu --kernel-name-base mangled --kernel-name "regex:ArgMinDirect$which" --launch-count 1 --section SourceCounters \
      --section SpeedOfLight --section WarpStateStats --import-source yes -o "$rep" -f "$exe" --shapes ${SSHAPE:-1048576x128x1024} --reps 1 \
      --warmup 0 > "$rep.log" 2>&1
    echo "source $which rc=$?"
    for what in cuda sass; do ncu -i "$rep.ncu-rep" --page source --csv --print-source $what > "$rep.$what.csv" 2>> "$rep.log"; done
    NCU_LINES_TOP=40 NCU_LINES_HEAD=25 ncu_lines "$rep" "$exe"
    gzip -f "$rep.sass.csv" "$rep.cuda.csv"; rm -f "$rep.ncu-rep"
  done
  t source
fi
if has quick; then
  FTGEN_BENCH_REFS=none ft 70 bench $proj --reps 10 --warmup 3 --json "$out/shapes.jsonl" > "$out/shapes.txt" 2>&1; t shapes
  ft 110 bench $proj --shapes $anchors --reps 10 --warmup 3 --json "$out/anchors.jsonl" > "$out/anchors.txt" 2>&1; t anchors
fi
if has sites; then  # campaigns at the sites SITES (default: norm update), 300 + 300 per distribution at 65536 x 128 x 256
  for site in ${SITES:-norm update}; do
    ft 90 campaign $spec -o $gen --kernels "$kern" --site $site --trials 300 --seed 9 --shape 65536x128x256 \
      --json "$out/campaign_$site.jsonl" > "$out/campaign_$site.txt" 2>&1
    tail -n 4 "$out/campaign_$site.txt"; t campaign $site
  done
fi
if has campaign; then
  ft ${CAMPAIGN_SECONDS:-120} campaign $spec -o $gen --kernels "$kern" --trials ${TRIALS:-1000} --seed 7 --json "$out/campaign.jsonl" > "$out/campaign.txt" 2>&1
  tail -n 8 "$out/campaign.txt"; t campaign
  ft ${CAMPAIGN_SECONDS:-90} campaign $spec -o $gen --kernels "$kern" --trials ${TRIALS:-1000} --seed 8 --shape 20011x100x300 --json "$out/campaign_odd.jsonl" > "$out/campaign_odd.txt" 2>&1
  tail -n 8 "$out/campaign_odd.txt"; t campaign odd
fi
if has inject; then
  ft 100 bench $proj --shapes $anchors --reps 20 --warmup 5 --inject 1 --json "$out/anchors_inject.jsonl" > "$out/anchors_inject.txt" 2>&1
  t anchors inject
fi
if has shapes; then
  # (flash-kmeans only at the anchors: its driver's start-up takes most of a step's time)
  FTGEN_BENCH_REFS=none ft 60 bench $proj --reps 5 --warmup 2 --json "$out/shapes.jsonl" > "$out/shapes.txt" 2>&1
  ft 60 bench $proj --reps 5 --warmup 2 --inject 1 --json "$out/shapes_inject.jsonl" > "$out/shapes_inject.txt" 2>&1
  t shapes
fi
if has lloyd; then
  kmeans_lloyd 65536x32x128,100003x100x1000
  t lloyd
fi
if has anchors; then
  ft 200 bench $proj --shapes $anchors --reps 30 --warmup 5 --json "$out/anchors.jsonl" > "$out/anchors.txt" 2>&1
  t anchors
fi
python3 experiments/scripts/kmeans_table.py "$out"
