#!/usr/bin/env bash
# A/B of the kmeans cutlass90 headers on the device machine, on one GPU in one call: the same spec built once per
# version (A: the working tree's templates; B, C, ...: the *.cuh of DIR_B, DIR_C, ... copied over the generated ones),
# then benched in turn (A, B, ..., A, B, ...) for REPS rounds (default 3) at the flash-kmeans anchors, without the
# flash-kmeans driver, with INJECT faults per launch (default 0). Usage:
#   mkdir -p ab/b && git show COMMIT:templates/kmeans/kmeans90.cuh > ab/b/kmeans90.cuh
#   bash experiments/scripts/gpu_kmeans_ab.sh OUT ab/b[:ab/c...] [SPEC] [KERNELS] [SHAPES]   (carry ab and .whl)
# Files: OUT/ab_{A,B,...}_<round>.jsonl; the table (median ms and x the version's own twin) last.
set -uo pipefail
out=${1:?output dir}
dirs=${2:?directories with the headers of B, C, ... (colon-separated)}
spec=${3:-specs/kmeans/cutlass90_tf32x3.yaml}
kernels=${4:-*}
shapes=${5:-1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
header_ab "$out" "$dirs" "$spec" "$kernels" "$shapes" samples,dims,clusters
