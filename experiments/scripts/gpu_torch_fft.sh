#!/usr/bin/env bash
# ftgen::fft against torch.fft on one GPU in one call: specs/fft/torch_fft.yaml built as a library, then
# experiments/scripts/torch_fft_time.py (alternated, CUDA events) into OUT/fft_time.jsonl.
#   bash experiments/scripts/gpu_torch_fft.sh OUT [BATCHxN ...]
set -uo pipefail
out=$1; shift
mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
provenance "$out" > /dev/null
t "build"
ft 300 generate specs/fft/torch_fft.yaml -o /tmp/tfft > /dev/null && ft 300 build /tmp/tfft/torch_fft -j 16 --lib /tmp/tfft-inst \
  > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
t "time"
timeout "$(cap 200)" python3 experiments/scripts/torch_fft_time.py /tmp/tfft-inst/lib/libftgen_torch_fft.so "$out/fft_time.jsonl" "$@"
