#!/usr/bin/env bash
# The bf16 epilogue with per-tile row sums of the fp32 accumulators (experiments/scripts/evt_rowsum_probe.cu), one short
# call on one GPU: built against the CUTLASS headers of the nvidia-cutlass wheel, checked at 512x384x1024 and
# 1000x1232x776 against the host, timed beside the plain epilogue at 4096^3 and 8192^3. Output in OUT/probe.txt.
#   bash experiments/scripts/gpu_evt_probe.sh OUT   (wheels in .whl/ installed to /tmp/site)
set -u
out=${1:?usage: gpu_evt_probe.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
inc=$(python3 -c "from ftgen.paths import cutlass_include_dir; print(cutlass_include_dir())")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -arch=sm_90a -I"$inc" -I"$inc/../tools/util/include" \
  experiments/scripts/evt_rowsum_probe.cu -o "$out/evt_probe" > "$out/build.txt" 2>&1; echo "build rc $?"; t built
for shapes in "512 384 1024 4096 4096 4096" "1000 1232 776 8192 8192 8192"; do  # (16-byte rows: n, k multiples of 8)
  timeout 120 "$out/evt_probe" $shapes 2>&1 | tee -a "$out/probe.txt"
done
rm -f "$out/evt_probe"
