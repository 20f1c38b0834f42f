#!/usr/bin/env bash
# Nsight Compute's source counters per source line and per SASS instruction: `bash experiments/scripts/gpu_fft_ncu.sh OUTDIR source`
# (VARIANTS and LAUNCH as there), e.g. the second launch of the fp32 2^22 injection build:
#   VARIANTS="{precision: fp32, protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 22}}" \
#   LAUNCH=1 bash experiments/scripts/gpu_fft_ncu_source.sh OUTDIR
exec bash "$(dirname "${BASH_SOURCE[0]}")/gpu_fft_ncu.sh" "${1:?usage: bash experiments/scripts/gpu_fft_ncu_source.sh OUTDIR}" source
