#!/usr/bin/env bash
# The kmeans assign step on sm90 (templates/kmeans/kmeans90.cuh: the TF32 wgmma distance GEMM, the arg-min in its epilogue),
# several tile configurations at the flash-kmeans anchors and the large-N shapes, against cuBLAS's TF32 GEMM of the same
# shape (experiments/scripts/kmeans90_probe.cu); one JSON line per (shape, configuration) into OUT/probe.jsonl.
#   bash experiments/scripts/gpu_kmeans90_probe.sh OUT
set -u
out=${1:?usage: gpu_kmeans90_probe.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
cut=$(python3 -c "import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__))" 2>/dev/null)/source
[ -d "$cut/include" ] || { pip install -q --no-index --no-deps --target /tmp/site .whl/nvidia_cutlass*.whl > /dev/null 2>&1; cut=/tmp/site/cutlass_library/source; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
bin=${PROBE_BIN:-/tmp/km90probe}  # PROBE_BIN: a binary built beforehand (the same command)
[ -n "${PROBE_BIN:-}" ] || nvcc -std=c++17 -O3 -arch=sm_90a -DNDEBUG --expt-relaxed-constexpr -I"$cut/include" -I"$cut/tools/util/include" -Itemplates/kmeans -Itemplates/common \
  experiments/scripts/kmeans90_probe.cu -lcublas -o /tmp/km90probe > "$out/build.txt" 2>&1 || { tail -n 20 "$out/build.txt"; exit 1; }
timeout ${PROBE_SECONDS:-240} "$bin" ${SHAPES:-1048576x8x128 1048576x32x128 1048576x128x128 1048576x128x1024 131072x128x128 4194304x128x2048} \
  | tee "$out/probe.jsonl"
