#!/usr/bin/env bash
# The demo: the tensor-core threadblock ABFT GEMM (specs/gemm/demo.yaml: tf32x3, ref_checksums: concurrent, fault
# injection compiled in) beside its unprotected twin and cuBLAS SGEMM, with 16 faults injected per launch; and a
# protected FFT (specs/fft/demo.yaml: two-sided-tb) beside cuFFT with one fault per transform. Every output is verified.
# Generates and builds everything first; without a GPU it then says that benchmarking needs one and exits 0.
# Run from the repository root with `ftgen` on the PATH (`make demo` does both).
set -uo pipefail
out=${FTGEN_DEMO_OUT:-generated}
arch=()
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ -n "$cc" ]; then
  if [ "$cc" -lt 80 ]; then
    echo "This GPU (compute capability ${cc:0:1}.${cc:1}) is older than the demo needs (sm_80 or newer)." >&2
    exit 4
  fi
  arch=(--arch "sm_$cc")  # build for the GPU that is here
fi

for spec in specs/gemm/demo.yaml specs/fft/demo.yaml; do
  echo "== ftgen generate $spec"
  ftgen generate "$spec" -o "$out" || exit $?
done
for proj in gemm_demo fft_demo; do
  echo "== ftgen build $out/$proj ${arch[*]}"
  ftgen build "$out/$proj" "${arch[@]}" || exit $?
done

echo "== ftgen bench $out/gemm_demo --inject 16   (x cuBLAS: cuBLAS SGEMM time / ours; paired: ours / the unprotected twin)"
ftgen bench "$out/gemm_demo" --inject 16 --json "$out/gemm_demo-results.jsonl"
rc=$?
if [ $rc -eq 4 ]; then
  echo
  echo "No GPU here: the demo generated and built every variant ($out/gemm_demo/bin/, $out/fft_demo/bin/)."
  echo "Benchmarking needs an NVIDIA GPU (sm_80 or newer): run 'make demo' on one."
  exit 0
fi
echo "== ftgen bench $out/fft_demo --inject 1   (x cuFFT: cuFFT time / ours)"
ftgen bench "$out/fft_demo" --inject 1 --json "$out/fft_demo-results.jsonl"
rc2=$?
[ $rc -ne 0 ] && exit $rc
exit $rc2
