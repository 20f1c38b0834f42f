#!/usr/bin/env bash
# FFT batch counts that are not multiples of the block's signal count (bs): the automatic plans
# (logn: 0), unprotected and two-sided-tb with one fault per transform, fp32 and fp64, at odd batch
# counts from n = 8 (one launch, many signals per block) to n = 2^23 (two / three launches, cluster plans); every
# row verified against cuFFT. Usage: bash scripts/gpu_fft_odd_batch.sh OUTDIR (JSON lines; ftgen bench prints the tables).
set -uo pipefail
out=${1:?usage: bash scripts/gpu_fft_odd_batch.sh OUTDIR}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_env.sh"
gpu_start "$out"
gen=/tmp/ftgen-fft-odd
cat > "$out/fft_odd_batch.yaml" <<'Y'
name: fft_odd_batch
family: fft
arch: [sm_90]
variants:
  - {precision: [fp32, fp64], protection: {scheme: none}, params: {logn: 0}}
  - {precision: [fp32, fp64], protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 0}}
shapes:
  - {n: 4096, batch: 13}
Y
ft generate "$out/fft_odd_batch.yaml" -o $gen > /dev/null || exit 2
ft build $gen/fft_odd_batch -j 16 --arch sm_90 || exit 3
S=8x1001,16x999,64x333,1024x77,4096x13,16384x5,32768x3,65536x7,524288x5,1048576x3,2097152x3,4194304x1,8388608x1
ft bench $gen/fft_odd_batch --kernels '*_none_*' --shapes $S --reps 5 --warmup 1 --json "$out/odd_batch_none.jsonl"
echo "unprotected rc=$?"
ft bench $gen/fft_odd_batch --kernels '*_inj' --shapes $S --inject 1 --reps 5 --warmup 1 --json "$out/odd_batch_tb_inj.jsonl"
echo "two-sided-tb, 1 fault per transform rc=$?"
