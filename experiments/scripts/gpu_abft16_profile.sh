#!/usr/bin/env bash
# Where the bf16 accumulator-check ABFT's side work and fault path go, one call on one H200: the B column-major variants
# of experiments/specs/abft16_fix.yaml built (-j 16); Nsight Compute's sections (launch, occupancy, throughput, warp
# states) for the reference GEMM and for a corrections launch with faults (the kernels' times: gpu_abft16_fix.sh).
# WHAT=epilogue instead: the checked GEMM (KernelChk, bf16 recompute) against its twin (Kernel) at 4096^3, no faults,
# the same sections with the instruction statistics and the source counters (the stalls' top SASS lines).
#   bash experiments/scripts/gpu_abft16_profile.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_abft16_profile.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/abft16_fix.yaml; gen=generated/fix; proj=$gen/abft16_fix
ncu_base="ncu --clock-control none --cache-control none --kernel-name-base demangled"  # (demangled: -k sees KernelRef)
sec="--section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
if [ "${WHAT:-}" = epilogue ]; then
  BUILD_KERNELS='*bf16*_rc_evtrecomp*' gen_build $spec $gen $proj
  e=$(ls $proj/bin/gemm_* | grep -v '\.' | grep '_rc_evtrecomp' | head -n 1)
  for k in 'Kernel>' 'KernelChk>'; do
    echo "== $k 4096x4096x4096"
    timeout 120 $ncu_base $sec --section InstructionStats --section SourceCounters -k "regex:$k" -c 1 "$e" --shapes 4096x4096x4096 --reps 1 --warmup 0
  done > "$out/epilogue.txt" 2>&1
  grep -E "^==|Duration|Registers|Executed Instructions |Issued Instructions |Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Compute \(SM\)|Memory Throughput|Stall|stall" "$out/epilogue.txt" | head -n 120
  t epilogue; exit 0
fi
BUILD_KERNELS='*_rc_*' gen_build $spec $gen $proj
e=$(ls $proj/bin/gemm_* | grep -v '\.' | grep '_rc_evtrecomp' | head -n 1)
{ echo "== KernelRef 1024x4096x4096"
  timeout 90 $ncu_base $sec -k regex:KernelRef -c 1 "$e" --shapes 1024x4096x4096 --reps 1 --warmup 0
  echo "== abft16_fix with faults 4096x4096x4096"
  timeout 90 $ncu_base $sec -k regex:abft16_fix --launch-skip 2 -c 1 "$e" --shapes 4096x4096x4096 --reps 1 --warmup 0 --inject 16
} > "$out/sections.txt" 2>&1
grep -E "^==|Duration|Grid Size|Block Size|Registers|Achieved Occupancy|Theoretical Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\)|L2 Hit|Stall|Warp Cycles Per Issued|Waves Per SM|Eligible|No Eligible|One or More" "$out/sections.txt" | head -n 80
t sections
