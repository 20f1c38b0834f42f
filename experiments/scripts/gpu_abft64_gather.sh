#!/usr/bin/env bash
# The fp64 check's suspects rechecked by the variant's own mainloop with A gathered by rows
# (experiments/scripts/abft64_gather_probe.cu), one short call on one GPU: the elements that differ in any bit from the
# GEMM's (expected 0) and the recheck's time beside the GEMM's at the suspect counts a floor of 0.3 gave (docs/gemm-hopper.md,
# "The suspect band"). Output in OUT/probe.txt.
#   bash experiments/scripts/gpu_abft64_gather.sh OUT   (wheels in .whl/ installed to /tmp/site)
set -u
out=${1:?usage: gpu_abft64_gather.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t
inc=$(python3 -c "from ftgen.paths import cutlass_include_dir; print(cutlass_include_dir())")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -arch=sm_90a -I"$inc" experiments/scripts/abft64_gather_probe.cu \
  -o "$out/probe" > "$out/build.txt" 2>&1; echo "build rc $?"; t built
for c in "4096 4096 4096 normal 10 40 128 256" "4096 4096 4096 loguniform 40" "8192 8192 8192 normal 251 128" \
         "8192 8192 8192 loguniform 251" "1000 1234 777 loguniform 100 1000"; do
  timeout 200 "$out/probe" $c 2>&1 | tee -a "$out/probe.txt"
  t "$c"
done
rm -f "$out/probe"
