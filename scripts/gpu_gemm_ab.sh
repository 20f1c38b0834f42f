#!/usr/bin/env bash
# A/B of the CUTLASS-backend GEMM headers on the device machine: the same spec built twice, A with the working
# tree's templates, B with the tensor-core headers (cutlass_abft.cuh, cutlass_tmr.cuh) found in DIR_B, then the
# listed kernels benched alternately (A, B, A, B, ...), REPS rounds (default 3), 16 faults per launch. Usage:
#   mkdir -p ab/old && git show COMMIT:templates/gemm/cutlass_abft.cuh > ab/old/cutlass_abft.cuh   # (and cutlass_tmr.cuh)
#   bash scripts/gpu_gemm_ab.sh OUT ab/old [SPEC] [KERNELS] [SHAPES]
# Files: OUT/ab_{A,B}_<round>.jsonl (ftgen bench JSON lines).
set -uo pipefail
out=${1:?output dir}
dir_b=${2:?directory with B's headers}
spec=${3:-specs/gemm_abft_tc_prepass_intervals.yaml}
kernels=${4:-*prepass_inj}
shapes=${5:-4096x4096x4096,8192x8192x8192}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d /tmp/site/cutlass_library ] && export PYTHONPATH="/tmp/site:$PYTHONPATH"
ft() { python3 -m ftgen.cli "$@"; }
proj=$(python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$spec")
for v in A B; do
  export FTGEN_CACHE_DIR=/tmp/ab-cache-$v
  ft generate "$spec" -o /tmp/ab-$v > /dev/null || exit 1
  [ $v = B ] && cp "$dir_b"/*.cuh /tmp/ab-$v/$proj/common/
  ft build /tmp/ab-$v/$proj -j 16 --kernels "$kernels,*_none_*" > /dev/null || exit 3
done
for rep in $(seq 1 "${REPS:-3}"); do
  for v in A B; do
    FTGEN_CACHE_DIR=/tmp/ab-cache-$v ft bench /tmp/ab-$v/$proj --kernels "$kernels" --shapes "$shapes" --inject 16 \
      --reps 10 --warmup 3 --json "$out/ab_${v}_$rep.jsonl" > /dev/null 2>&1
    echo "$v round $rep rc=$?"
  done
done
