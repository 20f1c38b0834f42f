#!/usr/bin/env bash
# One call on one GPU: ftgen.torch through a GEMM library protected by TMR (specs/gemm/torch_linear90_tmr.yaml: tf32,
# bf16, fp16 on the cutlass90 backend, three copies in one launch, injection built in). Builds the library, then runs
# tests/test_torch.py's TMR tests: every hidden shape and both layouts of B within the precision's rule with nothing
# detected, and 4 bit flips a call applied, counted and voted out.
#   bash experiments/scripts/gpu_torch_tmr.sh OUT     (wheels in .whl/)
set -u
out=$1; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -m ftgen.cli generate specs/gemm/torch_linear90_tmr.yaml -o generated/tmr > "$out/generate.txt" 2>&1; echo "generate rc $?"
ft 240 build generated/tmr/torch_linear90_tmr --lib -j 16 > "$out/build_lib.txt" 2>&1; echo "build lib rc $?"; t lib
lib=generated/tmr/torch_linear90_tmr/install/lib/libftgen_torch_linear90_tmr.so
FTGEN_TORCH_TMR_LIB=$lib FTGEN_GPU_ARCH=sm_90 timeout "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -rA \
  tests/test_torch.py -k tmr > "$out/pytest_torch_tmr.txt" 2>&1
echo "pytest rc $?"; prov_header tests/test_torch.py -k tmr > "$out/provenance_tmr.jsonl"; tail -n 12 "$out/pytest_torch_tmr.txt"; t tests
