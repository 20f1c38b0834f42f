#!/usr/bin/env bash
# Per-kernel device time of one protected variant beside its unprotected twin, read with Nsight Compute
# (gpu__time_duration of every launch, summed per kernel name): where a protected Lloyd iteration or attention launch
# spends its time. One warm-up and one timed repetition each (the bench also runs its verification and references).
# KM_SHAPES: the kmeans shapes (default 2^20 x 128 x 1024 and 2^20 x 8 x 128); ATTN=0 leaves attention out.
#   bash experiments/scripts/gpu_profile.sh OUT
set -u
out=${1:?usage: gpu_profile.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
ft() { python3 -m ftgen.cli "$@"; }
ft generate specs/kmeans/demo.yaml -o generated/lp > /dev/null
ft build generated/lp/kmeans_demo -j 8 > "$out/build_kmeans.txt" 2>&1 &
if [ "${ATTN:-1}" = 1 ]; then
  ft generate specs/attention/demo.yaml -o generated/lp > /dev/null
  ft build generated/lp/attn_demo -j 8 --kernels 'attn_f16_*_d128_nc_*' > "$out/build_attn.txt" 2>&1
fi
wait
tail -n 1 "$out"/build_*.txt
prof() {  # exe shape tag
  ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base -c 400 \
    "$1" --shapes "$2" --reps 1 --warmup 1 $4 > "$out/$3.csv" 2> "$out/$3.err"
  python3 experiments/scripts/ncu_summary.py "$out/$3.csv"
}
for s in ${KM_SHAPES:-1048576x128x1024 1048576x8x128}; do
  for e in generated/lp/kmeans_demo/bin/*; do prof "$e" $s "km_$(basename "$e" | cut -d_ -f3)_$s" ""; done
done
[ "${ATTN:-1}" = 1 ] || exit 0
for e in generated/lp/attn_demo/bin/attn_f16_none_mma_d128_nc_* generated/lp/attn_demo/bin/attn_f16_abft-efta_mma_d128_nc_*; do
  prof "$e" 4x32x4096x4096 "attn_$(basename "$e" | cut -d_ -f3)" "$( [[ $e == *_inj ]] && echo --inject 1)"
done
