#!/usr/bin/env bash
# One call on one GPU: the demo GEMM with 16 faults per launch (cuBLAS SGEMM and the twin alternated), the tf32x3
# concurrent ABFT campaign (512x512x1024, then 1000x1234x777 as time allows), ftgen.torch's tests and example, and
# pytest -m gpu.  bash experiments/scripts/gpu_final_checks.sh OUT   (wheels in .whl/; FTGEN_GIT_SHA/DIRTY where the
# copy has no .git)
set -u
out=$1; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
ft() { python3 -m ftgen.cli "$@"; }
T0=$SECONDS; t() { echo "[$((SECONDS - T0)) s] $*"; }
mkdir -p $out/gemm $out/torch $out/all
ft generate specs/gemm/demo.yaml -o generated/final > /dev/null; ft generate specs/gemm/abft_tc_concurrent_campaign.yaml -o generated/final > /dev/null
ft generate specs/gemm/torch_linear.yaml -o generated/final > /dev/null
(ft build generated/final/gemm_demo -j 6 > $out/gemm/build_demo.txt 2>&1; echo "build demo rc $?") &
(ft build generated/final/gemm_abft_tc_concurrent_campaign -j 5 > $out/gemm/build_camp.txt 2>&1; echo "build camp rc $?") &
(ft build generated/final/torch_linear --lib -j 5 > $out/torch/build_lib.txt 2>&1; echo "build lib rc $?") &
wait; t built
timeout 120 python3 -m ftgen.cli bench generated/final/gemm_demo --inject 16 --shapes 4096x4096x4096,8192x8192x8192 --reps 20 --warmup 5 --json $out/gemm/demo_inject16.jsonl 2>&1 | tail -n 8; t demo
timeout 150 python3 -m ftgen.cli campaign specs/gemm/abft_tc_concurrent_campaign.yaml -o generated/final --trials 1000 --seed 7 --json $out/gemm/campaign_512.jsonl 2>&1 | tail -n 8; t campaign 512
timeout 170 python3 -m pytest -q -p no:cacheprovider -rA tests/test_torch.py > $out/torch/pytest_torch.txt 2>&1; tail -n 17 $out/torch/pytest_torch.txt; t torch tests
timeout 80 python3 examples/protected_mlp.py generated/final/torch_linear/install/lib/libftgen_torch_linear.so > $out/torch/example.txt 2>&1; cat $out/torch/example.txt | cut -c1-300; t example
FTGEN_GPU_ARCH=sm_90 timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_gpu.py > $out/all/pytest_gpu.txt 2>&1; tail -n 10 $out/all/pytest_gpu.txt; t gpu tests
left=$((560 - SECONDS + T0)); [ $left -gt 30 ] && timeout $left python3 -m ftgen.cli campaign specs/gemm/abft_tc_concurrent_campaign.yaml -o generated/final --trials 1000 --seed 8 --shape 1000x1234x777 --json $out/gemm/campaign_odd.jsonl 2>&1 | tail -n 8; t campaign odd
