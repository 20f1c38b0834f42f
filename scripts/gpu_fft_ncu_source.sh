#!/usr/bin/env bash
# Where a kernel's instructions go, per source line and per SASS instruction: Nsight Compute's source counters
# (the builds carry -lineinfo) of one launch of each named variant, exported as CSV (cuda: per line of the core
# header; sass: per instruction, with its line). Usage:
#   VARIANTS="{precision: fp32, protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 22}}" \
#   LAUNCH=1 bash scripts/gpu_fft_ncu_source.sh OUTDIR
# VARIANTS: a YAML flow list's entries (default: the fp32 two-sided-tb injection builds of 2^13 and 2^22); LAUNCH: which
# launch k_<logn>_<LAUNCH> of each (default 0). Reports OUTDIR/src_<variant>.{ncu-rep,cuda.csv,sass.csv}.
set -uo pipefail
out=${1:?usage: bash scripts/gpu_fft_ncu_source.sh OUTDIR}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
gen=/tmp/ftgen-fft-ncu-src
tb="{scheme: abft, level: two-sided-tb, inject: true}"
variants=${VARIANTS:-"{protection: $tb, params: {logn: [13, 22]}}"}
cat > "$out/fft_ncu_src.yaml" <<Y
name: fft_ncu_src
family: fft
arch: [sm_90]
precision: fp32
variants: [$variants]
shapes:
  - {logn: 20, batch: 64}
Y
rm -rf $gen
ft generate "$out/fft_ncu_src.yaml" -o $gen > /dev/null || exit 2
ft build $gen/fft_ncu_src -j 16 --arch sm_90 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
for exe in $gen/fft_ncu_src/bin/*; do
  name=$(basename "$exe")
  logn=$(echo "$name" | sed -E 's/.*_logn([0-9]+)_.*/\1/'); tot=26; case "$name" in *f64*) tot=25 ;; esac
  rep="$out/src_$name"
  ncu --kernel-name "regex:k_${logn}_${LAUNCH:-0}" --launch-count 1 --section SourceCounters --section SpeedOfLight \
    --import-source yes -o "$rep" -f "$exe" --shapes $((1 << logn))x$((1 << (tot - logn))) --reps 1 --warmup 0 > "$rep.log" 2>&1
  echo "$name rc=$?"
  for what in cuda sass; do
    ncu -i "$rep.ncu-rep" --page source --csv --print-source "$what" > "$rep.$what.csv" 2>> "$rep.log"
    echo "  $what: $(wc -l < "$rep.$what.csv") lines"
  done
done
