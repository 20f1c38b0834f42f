#!/usr/bin/env bash
# Nsight Compute sections (speed of light, occupancy, launch, warp states, scheduler, memory, instructions) of the
# kmeans X pass, protected (first launch) and twin (second), tf32 128x224 cutlass90 at 2^20 x 32 / 8 x 128: OUT/xpass_<shape>.txt.
#   bash experiments/scripts/gpu_kmeans_xpass_profile.sh   (OUT set; carry .whl)
set -u
export PYTHONPATH=$PWD:/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
python3 -m ftgen.cli generate experiments/specs/kmeans_anchors_record.yaml -o /tmp/g > /dev/null
P=/tmp/g/kmeans_anchors_record
timeout 150 python3 -m ftgen.cli build $P -j 16 --kernels '*tf32_abft-tb_cutlass90_128x224*' > $OUT/build.txt 2>&1; tail -1 $OUT/build.txt
exe=$(ls $P/bin/*tf32_abft-tb_cutlass90_128x224* | head -1)
for sh in 1048576x32x128 1048576x8x128; do
timeout 120 ncu --clock-control none --cache-control none -k regex:x_pass_vec_kernel -c 2 --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats "$exe" --shapes $sh --reps 1 --warmup 0 > $OUT/xpass_$sh.txt 2>&1
echo "ncu $sh rc=$?"
done
grep -E "x_pass_vec_kernel|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit Registers|Warp Cycles Per Issued|Issue Slots Busy|Memory Throughput|DRAM Throughput|Executed Ipc A|Stall|One or More Eligible|Executed Instructions  " $OUT/xpass_1048576x32x128.txt | head -60
