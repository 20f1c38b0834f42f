#!/usr/bin/env bash
# Small and skinny shapes on the cutlass90 GEMM, one call on one H200 (<= 9 minutes): experiments/specs/gemm_small_shapes.yaml
# generated and built (-j 16), benched at its shapes (each variant, cuBLAS of its precision and, for the ABFT variant, its
# twin alternated; 100 reps), then each executable's kernels at three shapes listed in launch order with their device
# times (Nsight Compute, one launch of the variant, its twin and cuBLAS: what a call launches and what each launch costs).
#   bash experiments/scripts/gpu_small_shapes.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_small_shapes.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/gemm_small_shapes.yaml; gen=generated/small; proj=$gen/gemm_small_shapes
gen_build $spec $gen $proj
ft 150 bench $proj --reps 100 --warmup 10 --json "$out/bench.jsonl" 2>&1 | tail -n 30
t bench
for e in $proj/bin/gemm_*; do
  case "$e" in *_bench*|*.*) continue;; esac
  echo "== $(basename "$e")"
  top=$out; out=$top/$(basename "$e"); mkdir -p "$out"
  ncu_times "$e" 60 1x1x1 1000x1234x777
  out=$top
done
t profile
