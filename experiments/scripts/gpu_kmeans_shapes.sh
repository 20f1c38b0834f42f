#!/usr/bin/env bash
# The kmeans shapes of experiments/specs/kmeans_shapes.yaml on one GPU, in one call (<= 9 minutes): built (-j 16), every
# shape clean with the refs (the twin and the cuBLAS-based Lloyd iteration in the executable, flash-kmeans in its driver
# on the same data; torch and flash-kmeans from .whl/), then with one fault per launch (no flash-kmeans: --inject rows
# time the faults). The cutlass90 variant runs every shape, the fused one those with dims <= 32. A short table last.
#   bash experiments/scripts/gpu_kmeans_shapes.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_kmeans_shapes.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/kmeans_shapes.yaml; gen=generated/kshapes; proj=$gen/kmeans_shapes
gen_build $spec $gen $proj
seed=131072x8x8,131072x8x16,131072x8x32,131072x8x64,131072x8x128,131072x128x8,131072x128x16,131072x128x32,131072x128x64,131072x128x128
swap=131072x16x8,131072x32x8,131072x64x8,131072x16x128,131072x32x128,131072x64x128
large=262144x128x512,1048576x128x1024,4194304x128x2048,1048576x256x20000
small=131072x8x8,131072x8x16,131072x8x32,131072x8x64,131072x8x128,131072x16x8,131072x32x8,131072x16x128,131072x32x128
c90='*cutlass90*'; fused='*fused*'
ft 200 bench $proj --kernels "$c90" --shapes $seed,$swap,$large --reps 10 --warmup 3 --json "$out/c90.jsonl" > "$out/c90.txt" 2>&1
t c90 clean
ft 100 bench $proj --kernels "$fused" --shapes $small --reps 10 --warmup 3 --json "$out/fused.jsonl" > "$out/fused.txt" 2>&1
t fused clean
FTGEN_BENCH_REFS=none ft 100 bench $proj --kernels "$c90" --shapes $seed,$swap,$large --reps 5 --warmup 2 --inject 1 --json "$out/c90_inject.jsonl" > "$out/c90_inject.txt" 2>&1
t c90 inject
FTGEN_BENCH_REFS=none ft 60 bench $proj --kernels "$fused" --shapes $small --reps 5 --warmup 2 --inject 1 --json "$out/fused_inject.jsonl" > "$out/fused_inject.txt" 2>&1
t fused inject
python3 experiments/scripts/kmeans_table.py "$out"
