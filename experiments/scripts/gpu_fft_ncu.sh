#!/usr/bin/env bash
# Where the multi-launch FFT plans lose to cuFFT (fp32 log n 18-22 run at 840-1000 GB/s against cuFFT's
# 1200-1360): Nsight Compute on the automatic fp32 plans of 2^20 (two launches) and 2^14 (one launch),
# unprotected, and on cuFFT's kernels of the same transforms.
# Usage: [LOGNS="16, 18"] bash experiments/scripts/gpu_fft_ncu.sh OUTDIR [tb|tb64|tbenc|tbcols|large|big|mix|cluster|tbcluster|source]   (ncu_fft_*.txt: one report per size
# (LOGNS: the sizes of the tb / tb64 modes, default 12 and 20); mix: the
# instruction classes (fadd/ffma/fmul/integer/conversion/memory/...) of the fp32 2^20 and 2^23 automatic plans
# and of cuFFT's kernels (mix_*.txt); big: fp32
# 2^13 (one launch) and 2^23 in three launches (automatic) and in two (4096 x 2048, 4 + 8 columns); large: the
# unprotected fp32 2^22 and fp64 2^20 / 2^21 plans (TUNED) beside cuFFT's kernels; tb: the
# two-sided-tb injection builds of 2^12 (one launch) and 2^20 (two launches) beside the unprotected ones, with
# the warp stall reasons (tb64: the same in fp64; tbenc: two-sided-tb with tbenc 1 and 2 at LOGNS, default 16 and 20); tbcols: two-sided-tb 2^20 with two and four columns per thread;
# cluster: the unprotected fp32 2^14 (one launch) and 2^15 / fp64 2^14 (cluster plans), stall reasons as in tb; tbcluster:
# the two-sided-tb cluster kernels of fp32 2^15 (4096 x 8) beside the unprotected one, and fp64 2^14 (4096 x 4, radix 8);
# source: where a kernel's instructions go, per source line and per SASS instruction, Nsight Compute's source counters (the
# builds carry -lineinfo) of one launch k_<logn>_<LAUNCH> (default 0) of each variant in VARIANTS (a YAML flow list's
# entries; default the fp32 two-sided-tb injection builds of 2^13 and 2^22), exported as CSV: src_<variant>.{ncu-rep,
# cuda.csv,sass.csv}, cuda per line of the core header, sass per instruction with its line)
set -uo pipefail
out=${1:?usage: bash experiments/scripts/gpu_fft_ncu.sh OUTDIR [tb|tb64|tbcols|large|big|mix|cluster|tbcluster|source]}
which=${2:-none}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
gen=/tmp/ftgen-fft-ncu
tb="{scheme: abft, level: two-sided-tb, inject: true}"
case "$which" in
  tb) variants="[{protection: {scheme: none}, params: {logn: [${LOGNS:-12, 20}]}}, {protection: $tb, params: {logn: [${LOGNS:-12, 20}]}}]" ;;
  tb64) variants="[{precision: fp64, protection: {scheme: none}, params: {logn: [${LOGNS:-12, 20}]}}, {precision: fp64, protection: $tb, params: {logn: [${LOGNS:-12, 20}]}}]" ;;
  tbcols) variants="[{protection: $tb, params: {logn: 20, n1: 16, n2: 16, tcols: [2, 4]}}]" ;;
  tbenc) variants="[{protection: $tb, params: {logn: [${LOGNS:-16, 20}], tbenc: [1, 2]}}]" ;;
  mix) variants="[{protection: {scheme: none}, params: {logn: [20, 23]}}]" ;;
  tbcluster) variants="[{protection: $tb, params: {logn: 15, N1: 4096, cluster: 1, n1: 16}}, {protection: {scheme: none}, params: {logn: 15, N1: 4096, cluster: 1, n1: 16}}, {precision: fp64, protection: $tb, params: {logn: 14, N1: 4096, cluster: 1, n1: 8}}]" ;;
  cluster) variants="[{protection: {scheme: none}, params: {logn: [14, 15]}}, {precision: fp64, protection: {scheme: none}, params: {logn: 14}}]" ;;
  big) variants="[{protection: {scheme: none}, params: {logn: [13, 23]}}, {protection: {scheme: none}, params: {logn: 23, launches: 2, bs1: 4, bs2: 8}}]" ;;
  large) variants="[{protection: {scheme: none}, params: {logn: 22}}, {precision: fp64, protection: {scheme: none}, params: {logn: [20, 21]}}]" ;;
  source) variants="[${VARIANTS:-"{protection: $tb, params: {logn: [13, 22]}}"}]" ;;
  *) variants="[{protection: {scheme: none}, params: {logn: [14, 20]}}]" ;;
esac
cat > "$out/fft_ncu.yaml" <<Y
name: fft_ncu
family: fft
arch: [sm_90]
precision: fp32
variants: $variants
shapes:
  - {logn: 20, batch: 64}
Y
rm -rf $gen  # a project of an earlier run would leave its executables in bin/
ft generate "$out/fft_ncu.yaml" -o $gen > /dev/null || exit 2
ft build $gen/fft_ncu -j 16 --arch sm_90 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
sections="--launch-count 6 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats"
report=ncu
keep="^  [a-zA-Z_].*\(|Duration|inst_executed|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|DRAM Throughput|Memory Throughput|Achieved Occupancy|dram__bytes_read.sum|dram__bytes_write.sum|Registers Per|Dynamic Shared|sectors_pipe_lsu_mem_global_op_ld.sum|requests_pipe_lsu_mem_global_op_ld.sum"
metrics="--metrics smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
case "$which" in tb | tb64 | tbenc | cluster | tbcluster)
  # the stall reasons, warps per issued instruction
  for r in barrier long_scoreboard short_scoreboard mio_throttle lg_throttle math_pipe_throttle wait not_selected dispatch_stall no_instruction; do
    metrics="$metrics,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  # the executed instruction classes (thread instructions) and the memory instructions by space
  for op in fadd ffma fmul dadd dfma dmul integer conversion control memory misc bit uniform inter_thread_communication; do
    metrics="$metrics,smsp__sass_thread_inst_executed_op_${op}_pred_on.sum"
  done
  metrics="$metrics,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_global_st.sum,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum"
  keep="$keep|issue_stalled|_op_" ;;
esac
if [ "$which" = mix ]; then
  sections="--launch-count 5"
  report=mix
  keep="^  [a-zA-Z_].*\(|inst_executed|duration"
  metrics="--metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_global_st.sum,smsp__sass_inst_executed_op_local_ld.sum,gpu__time_duration.sum"
  for op in fadd ffma fmul integer conversion control memory misc bit uniform inter_thread_communication; do
    metrics="$metrics,smsp__sass_thread_inst_executed_op_${op}_pred_on.sum"
  done
fi
for exe in $gen/fft_ncu/bin/*; do
  name=$(basename "$exe")
  # 2^26 complex elements (fp32) or 2^25 (fp64) per transform set, as in the sweeps (older reports ran fp64
  # 2^12 / 2^14 at 2^26)
  logn=$(echo "$name" | sed -E 's/.*_logn([0-9]+)_.*/\1/'); tot=26; case "$name" in *f64*) tot=25 ;; esac
  shape=$((1 << logn))x$((1 << (tot - logn)))
  if [ "$which" = source ]; then
    rep="$out/src_$name"
    ncu --kernel-name "regex:k_${logn}_${LAUNCH:-0}" --launch-count 1 --section SourceCounters --section SpeedOfLight \
      --import-source yes -o "$rep" -f "$exe" --shapes $shape --reps 1 --warmup 0 > "$rep.log" 2>&1
    echo "$name rc=$?"
    for what in cuda sass; do
      ncu -i "$rep.ncu-rep" --page source --csv --print-source "$what" > "$rep.$what.csv" 2>> "$rep.log"
      echo "  $what: $(wc -l < "$rep.$what.csv") lines"
    done
    continue
  fi
  # the first kernels named k_* (ours: the verified transform) or *fft* (cuFFT's reference transform)
  ncu --kernel-name regex:'k_|fft' $sections $metrics "$exe" --shapes $shape --reps 1 --warmup 0 \
    > "$out/${report}_${name}.txt" 2>&1
  echo "$name rc=$?"
  grep -E "$keep" "$out/${report}_${name}.txt" | cut -c1-160 | head -80
done
