#!/usr/bin/env bash
# First GPU runs of two new pieces, on one H100/H200 (carry .whl for the CUTLASS headers):
#   bash experiments/scripts/gpu_first_runs.sh OUT
# 1. the cutlass90 backend (sm_90a: TMA + wgmma, warp-specialized) unprotected: tf32, bf16, fp16 and tf32x3 beside
#    cuBLAS (alternated), at 4096^3 and 8192^3 and on odd shapes (the padded path);
# 2. the kmeans family: the demo spec (tf32, unprotected and threadblock ABFT) on the flash-kmeans anchor shape
#    128x1024 and awkward shapes, clean and with faults, and the Lloyd loop checked over 10 iterations.
# OUT gets c90.jsonl, c90x3.jsonl, kmeans.jsonl, kmeans_inj.jsonl and log.txt.
set -uo pipefail
out=${1:?usage: gpu_first_runs.sh OUT}
mkdir -p "$out"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 FTGEN_CACHE_DIR=/tmp/ftgen-cache
[ -d /tmp/site/cutlass_library ] && export PYTHONPATH="/tmp/site:$PYTHONPATH"
ft() { python3 -m ftgen.cli "$@"; }
log="$out/log.txt"
gen=/tmp/first
c90='*tf32_none_cutlass90_128x256x32_c2x1*,*tf32_none_cutlass90_128x128x32_c2x1_ws-coop*,*bf16_none_cutlass90_128x256x64_c2x1*,*f16_none_cutlass90_128x256x64_c2x1*,*bf16_none_cutlass90_128x128x64_c1x1_ws-pingpong*'
for s in specs/gemm/cutlass90_search.yaml specs/gemm/cutlass90_tf32x3.yaml specs/kmeans/demo.yaml; do ft generate "$s" -o $gen >> "$log" 2>&1; done
ft build $gen/gemm_cutlass90_search -j 16 --kernels "$c90" >> "$log" 2>&1 & b1=$!
ft build $gen/gemm_cutlass90_tf32x3 -j 8 --kernels '*persistent*' >> "$log" 2>&1 & b2=$!
ft build $gen/kmeans_demo -j 8 --arch sm_90 >> "$log" 2>&1 & b3=$!
wait $b1; echo "build c90 rc $?" | tee -a "$log"; wait $b2; echo "build c90x3 rc $?" | tee -a "$log"; wait $b3; echo "build kmeans rc $?" | tee -a "$log"
odd=1000x1234x777,1x1x1,4097x3x129,17x4096x33
ft bench $gen/gemm_cutlass90_search --kernels "$c90" --shapes 4096x4096x4096,8192x8192x8192,$odd --reps 20 --warmup 5 --json "$out/c90.jsonl" 2>> "$log" | tail -30
ft bench $gen/gemm_cutlass90_tf32x3 --kernels '*persistent*' --shapes 4096x4096x4096,8192x8192x8192,$odd --reps 10 --warmup 3 --json "$out/c90x3.jsonl" 2>> "$log" | tail -12
km=1048576x128x1024,1048576x8x128,1048576x32x128,1048576x128x128,1000003x3x7,65536x100x1000,4099x129x1
ft bench $gen/kmeans_demo --shapes $km --reps 10 --warmup 3 --json "$out/kmeans.jsonl" 2>> "$log" | tail -20
ft bench $gen/kmeans_demo --kernels '*abft*' --shapes 1048576x128x1024,65536x100x1000 --inject 8 --reps 5 --warmup 2 --json "$out/kmeans_inj.jsonl" 2>> "$log" | tail -8
FTGEN_KMEANS_ITERS=10 ft bench $gen/kmeans_demo --shapes 65536x32x128 --reps 3 --warmup 1 --json "$out/kmeans_lloyd.jsonl" 2>> "$log" | tail -6
# 3. the shared library with its C ABI: the C consumer programs built against the installed package and run
#    (they verify against cuBLAS / cuFFT and a host reference; exit 0 when every element is right)
python3 -m pytest -q -p no:cacheprovider -m compile tests/test_library.py 2>&1 | tail -5 | tee -a "$log"
