#!/usr/bin/env bash
# Instruction mix (Nsight Compute, per class: fadd/ffma/fmul/integer/conversion/memory/control/...) of the
# unprotected fp32 2^20 and 2^23 automatic plans and of cuFFT's kernels of the same transforms.
# Usage: bash scripts/gpu_fft_ncu_mix.sh OUTDIR   (mix_<kernel>.txt, one report per executable)
set -uo pipefail
out=$1
mkdir -p $out
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
gen=/tmp/ftgen-fft-mix
cat > $out/mix.yaml <<Y
name: fft_mix
family: fft
arch: [sm_90]
precision: fp32
variants: [{protection: {scheme: none}, params: {logn: [20, 23]}}]
shapes:
  - {logn: 20, batch: 64}
Y
python3 -m ftgen.cli generate $out/mix.yaml -o $gen > /dev/null || exit 2
python3 -m ftgen.cli build $gen/fft_mix -j 16 --arch sm_90 > $out/build.log 2>&1 || { tail -20 $out/build.log; exit 3; }
m=""
for op in fadd ffma fmul integer conversion control memory misc bit uniform inter_thread_communication; do m="$m,smsp__sass_thread_inst_executed_op_${op}_pred_on.sum"; done
m="smsp__inst_executed.sum,smsp__thread_inst_executed.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_global_st.sum,smsp__sass_inst_executed_op_local_ld.sum,gpu__time_duration.sum$m"
for exe in $gen/fft_mix/bin/*; do
  name=$(basename $exe)
  case $name in *logn23*) shape=8388608x8 ;; *) shape=1048576x64 ;; esac
  ncu --kernel-name regex:'k_|fft' --launch-count 5 --metrics $m $exe --shapes $shape --reps 1 --warmup 0 > $out/mix_$name.txt 2>&1
  echo "$name rc=$?"
  grep -E "^  [a-zA-Z_].*\(|inst_executed|duration" $out/mix_$name.txt | sed -E 's/\(kernel_arguments.*//; s/HostConfigPlaceholder//' | cut -c1-130
done
