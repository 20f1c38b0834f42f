#!/usr/bin/env bash
# A/B of the CUTLASS-backend GEMM headers on the device machine: the same spec built once per version, A with the
# working tree's templates, B (C, D, ...) with the tensor-core headers (cutlass_abft.cuh, cutlass_tmr.cuh) found in
# DIR_B (DIR_C, ...: a colon-separated list), then the listed kernels benched in turn (A, B, ..., A, B, ...), REPS
# rounds (default 3), INJECT (default 16) faults per launch. Usage:
#   mkdir -p ab/old && git show COMMIT:templates/gemm/cutlass_abft.cuh > ab/old/cutlass_abft.cuh   # (and cutlass_tmr.cuh)
#   bash experiments/scripts/gpu_gemm_ab.sh OUT ab/old[:ab/other...] [SPEC] [KERNELS] [SHAPES]
# Files: OUT/ab_{A,B,...}_<round>.jsonl (ftgen bench JSON lines).
set -uo pipefail
out=${1:?output dir}
dirs=${2:?directories with the headers of B, C, ... (colon-separated)}
spec=${3:-experiments/specs/gemm_abft_tc_prepass_intervals.yaml}
kernels=${4:-*prepass_inj}
shapes=${5:-4096x4096x4096,8192x8192x8192}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
proj=$(spec_project "$spec")
build_versions "$out" "$dirs" "$spec" "$kernels" || exit 3
bench_rounds "$out" "$proj" "$kernels" "$shapes" --inject "${INJECT:-16}"
# the table (ab_table.py): per kernel and shape (the name without its tiling), each version's median ms and x its
# unprotected kernel over the rounds, '!' where a row failed verification or raised a false alarm
python3 "$(dirname "${BASH_SOURCE[0]}")/ab_table.py" "$out" --shape-keys m,n,k --drop '_cutlass_.*?_sw\d+' "${versions[@]}"
