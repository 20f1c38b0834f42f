#!/usr/bin/env bash
# The 16-bit ABFT's side work at linear-layer shapes (experiments/scripts/abft16_side_probe.cu), one short call on one
# GPU: the reference product R = A E^T through cuBLAS and the encodings of B, beside cuBLAS's bf16 GEMM of the same shape.
# Output in OUT/probe.txt.
#   bash experiments/scripts/gpu_abft16_side_probe.sh OUT   (wheels in .whl/ installed to /tmp/site)
set -u
out=${1:?usage: gpu_abft16_side_probe.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t
inc=$(python3 -c "from ftgen.paths import cutlass_include_dir; print(cutlass_include_dir())")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -arch=sm_90a -I"$inc" -Itemplates/common -Itemplates/gemm \
  experiments/scripts/abft16_side_probe.cu -lcublas -o "$out/side_probe" > "$out/build.txt" 2>&1; echo "build rc $?"; t built
timeout 300 "$out/side_probe" 2>&1 | tee "$out/probe.txt"
rm -f "$out/side_probe"
