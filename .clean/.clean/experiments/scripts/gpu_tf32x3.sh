#!/usr/bin/env bash
# The CUTLASS tf32x3 gemm (fp32 accuracy on TF32 tensor cores) against cuBLAS SGEMM, on one H100/H200:
#   pip install --no-deps --target /tmp/site .whl/nvidia_cutlass*.whl
#   bash experiments/scripts/gpu_tf32x3.sh OUT
# `ftgen search` over specs/gemm/cutlass_tf32x3_search.yaml at 4096^3 and 8192^3 (every row verified
# against a pedantic fp32 cuBLAS GEMM), then the winner on odd shapes. JSON lines in OUT.
set -uo pipefail
OUT=${1:?usage: experiments/scripts/gpu_tf32x3.sh OUT}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT" || exit 1
export PYTHONPATH=/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
source experiments/scripts/gpu_provenance.sh
provenance "$OUT"
GEN=${FTGEN_BUILD:-/tmp/ftgen_tf32x3}
python3 -m ftgen.cli search specs/gemm/cutlass_tf32x3_search.yaml --shapes 4096x4096x4096,8192x8192x8192 -o "$GEN" -j 16 \
  --reps 20 --warmup 5 --no-cache --json "$OUT/tf32x3_search.jsonl" 2> "$OUT/tf32x3_search.log" | tail -30
P=$GEN/gemm_cutlass_tf32x3_search-search  # the search's project: <spec name>-search
python3 -m ftgen.cli bench "$P" --shapes 1x1x1,1000x1234x777,257x129x1031,130x131x129 --reps 3 --warmup 1 \
  --json "$OUT/tf32x3_odd.jsonl" 2> "$OUT/tf32x3_odd.log" | tail -60
