#!/usr/bin/env bash
# A/B of the attention kernel headers on the device machine, on one GPU in one call: the same spec built once per
# version (A: the working tree's templates; B, C, ...: the *.cuh of DIR_B, DIR_C, ... copied over the generated ones),
# then the listed kernels benched in turn (A, B, ..., A, B, ...) for REPS rounds (default 3), without the SDPA
# references, with INJECT faults per launch (default 0: clean). Two H200s can differ by 5-8% on the protected kernels,
# so versions are compared here, on one GPU, never across calls. Usage:
#   mkdir -p ab/b && for f in attention_wgmma.cuh attention_mma.cuh; do git show BRANCH:templates/attention/$f > ab/b/$f; done
#   bash experiments/scripts/gpu_attention_ab.sh OUT ab/b[:ab/c...] [SPEC] [KERNELS] [SHAPES]   (carry ab and .whl)
# Files: OUT/ab_{A,B,...}_<round>.jsonl (ftgen bench JSON lines); the table (median ms and x the version's own
# unprotected twin, '!' where a row failed verification or raised a false alarm) is printed last.
set -uo pipefail
out=${1:?output dir}
dirs=${2:?directories with the headers of B, C, ... (colon-separated)}
spec=${3:-experiments/specs/attention_wgmma_schedule.yaml}
kernels=${4:-*_pp*}
shapes=${5:-4x32x4096,4x16x4096}
# (the carried wheels: nvidia-cutlass, the CUTLASS headers the wgmma backend needs)
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
header_ab "$out" "$dirs" "$spec" "$kernels" "$shapes" batch,heads,seq
