#!/usr/bin/env bash
# experiments/specs/kmeans_tf32x3_anchors.yaml on one GPU, in one call (<= 9 minutes): built (-j 16), the four anchors
# clean with the refs (the twin and the cuBLAS-based Lloyd iteration in the executable, flash-kmeans in its driver on the
# same data; torch and flash-kmeans from .whl/), then with one fault per launch. A short table last.
#   bash experiments/scripts/gpu_kmeans_tf32x3.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_kmeans_tf32x3.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/kmeans_tf32x3_anchors.yaml; gen=generated/kx3; proj=$gen/kmeans_tf32x3_anchors
gen_build $spec $gen $proj
anchors=1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024
ft 200 bench $proj --shapes $anchors --reps 10 --warmup 3 --json "$out/anchors.jsonl" > "$out/anchors.txt" 2>&1
t anchors
FTGEN_BENCH_REFS=none ft 120 bench $proj --shapes $anchors --reps 5 --warmup 2 --inject 1 --json "$out/anchors_inject.jsonl" > "$out/anchors_inject.txt" 2>&1
t inject
python3 experiments/scripts/kmeans_table.py "$out"
