#!/usr/bin/env bash
# The 16-bit check's reference GEMM (KernelRef, R = A E) under each decomposition along K (FTGEN_ABFT16_REF: CUTLASS's
# heuristic, split-K 4 / 8 / 16, stream-K, data-parallel), one call on one H200: the bf16 ABFT of
# experiments/specs/gemm_small_shapes.yaml built, then per mode KernelRef's device time at 1024x4096x4096 and 4096^3
# (Nsight Compute, one launch) and the variant with 16 faults beside its twin and cuBLAS (every row verified).
#   bash experiments/scripts/gpu_abft16_ref.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_abft16_ref.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
proj=generated/small/gemm_small_shapes
BUILD_KERNELS='*bf16_abft*' gen_build experiments/specs/gemm_small_shapes.yaml generated/small $proj
e=$(ls $proj/bin/gemm_bf16_abft* | grep -v bench | head -n 1)
for mode in ${MODES:-heuristic splitk:4 splitk:8 splitk:16 streamk dp}; do
  if [ "$mode" = heuristic ]; then unset FTGEN_ABFT16_REF; else export FTGEN_ABFT16_REF=$mode; fi
  for s in 1024x4096x4096 4096x4096x4096; do
    timeout 60 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base -k regex:KernelRef \
      -c 3 "$e" --shapes $s --reps 1 --warmup 0 > "$out/ncu_${mode/:/}_$s.csv" 2> /dev/null
    echo "$mode $s KernelRef us: $(grep KernelRef "$out/ncu_${mode/:/}_$s.csv" | awk -F'","' '{print $NF}' | tr -d '"' | awk '{printf "%.1f ", $1/1000}')"
  done
  timeout 60 "$e" --shapes 4096x4096x4096,1024x4096x4096 --reps 20 --warmup 5 --inject 16 > "$out/bench_${mode/:/}.jsonl" 2> "$out/bench_${mode/:/}.err"
  python3 - "$out/bench_${mode/:/}.jsonl" "$mode" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if not line.startswith("{"): continue
    r = json.loads(line)
    if "kernel" not in r: continue
    s = r["shape"]
    print(f"  {sys.argv[2]:10s} {s['m']}x{s['n']}x{s['k']}: {r['ms']['median']:.4f} ms  x cuBLAS {r['ref']['ms'] / r['ms']['median']:.3f}  x twin {r.get('x_unprot')}  ok {r.get('ok')}  detected {r.get('detected', r.get('faults', {}))}")
PY
done
t done
