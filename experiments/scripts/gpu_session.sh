#!/usr/bin/env bash
# One device session's runs on one GPU (GPU 0 of whatever host), in phases so that a phase fits one call:
#   bash experiments/scripts/gpu_session.sh OUT build|tmr|attention|kmeans ...
# build:     generate + build the attention and kmeans demo projects (under generated/session, kept between calls)
# tmr:       every TMR level against the previous build (scripts/gpu_regress.sh OLD tmr; needs .base/<rev>)
# attention: the attention demo clean and with one fault per launch, odd lengths included
# sdpa:      torch SDPA FLASH and cuDNN at the same shapes and the seed's 16k shapes (experiments/scripts/sdpa_time.py)
# attention_campaign: the attention campaign (ATTN_TRIALS, ATTN_DISTS, ATTN_KERNELS)
# torch:     tests/test_torch.py and examples/protected_mlp.py (ftgen.torch) on the library of TORCH_SPEC (default
#            specs/gemm/torch_linear.yaml), built once; TORCH_PRECISIONS: the example's precisions (default tf32x3)
# torch_attention: the attention library of specs/attention/torch_attention.yaml through ftgen.torch: its tests
#            (tests/test_torch.py -k attention; injection on the library of torch_attention_inject.yaml) and
#            experiments/scripts/torch_attention_time.py against SDPA
# torch_kmeans: the kmeans library of specs/kmeans/torch_kmeans.yaml through ftgen.torch: tests/test_torch.py -k kmeans
# torch_kmeans_inject: ftgen.torch.inject on the kmeans library with injection built in (torch_kmeans_inject.yaml)
# gpu_tests: pytest -m gpu tests/test_gpu.py
# kmeans:    the kmeans demo at the flash-kmeans anchor shapes and awkward shapes, with faults, the Lloyd loop,
#            and flash-kmeans timed in the same call (experiments/scripts/flash_kmeans_time.py; carry .whl)
# Wheels in .whl/ are installed to /tmp/site first. OUT gets one folder per phase and log.txt.
set -uo pipefail
out=${1:?usage: gpu_session.sh OUT phase...}; shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.." || exit 1
if ls .whl/*.whl > /dev/null 2>&1 && [ ! -d /tmp/site/cutlass_library ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
[ -d /tmp/site/cutlass_library ] && export PYTHONPATH="/tmp/site:$PYTHONPATH"
. experiments/scripts/gpu_provenance.sh  # ft, prov_header
gen=generated/session
log="$out/log.txt"
km=1048576x128x1024,1048576x8x128,1048576x32x128,1048576x128x128
kodd=1000003x3x7,65536x100x1000,4099x129x1
for phase in "$@"; do
  s=$SECONDS
  case $phase in
    build)
      ft generate specs/attention/demo.yaml -o $gen >> "$log" 2>&1
      ft generate specs/attention/campaign.yaml -o $gen >> "$log" 2>&1
      ft generate specs/kmeans/demo.yaml -o $gen >> "$log" 2>&1
      ft build $gen/attn_demo -j 10 --arch sm_90 >> "$log" 2>&1; echo "build attn_demo rc $?" | tee -a "$log"
      ft build $gen/$(python3 -c "import yaml; print(yaml.safe_load(open('specs/attention/campaign.yaml'))['name'])") -j 10 --arch sm_90 >> "$log" 2>&1
      echo "build attn campaign rc $?" | tee -a "$log"
      ft build $gen/kmeans_demo -j 6 --arch sm_90 >> "$log" 2>&1; echo "build kmeans rc $?" | tee -a "$log" ;;
    tmr)
      rev=$(ls .base | head -1)
      bash scripts/gpu_regress.sh ".base/$rev" "$out/tmr" tmr > "$out/tmr.txt" 2>&1; echo "tmr rc $?" | tee -a "$log"
      tail -n 25 "$out/tmr/compare.txt" ;;
    attention)
      mkdir -p "$out/attention"
      ft bench $gen/attn_demo --reps "${REPS:-20}" --warmup 5 --json "$out/attention/clean.jsonl" 2>> "$log" | tail -n 30
      ft bench $gen/attn_demo --kernels '*_inj' --inject 1 --reps "${REPS:-20}" --warmup 5 --json "$out/attention/inject.jsonl" 2>> "$log" | tail -n 16 ;;
    sdpa)  # the vendor references of the attention family: torch SDPA FLASH (FA2) and cuDNN, alternated
      mkdir -p "$out/attention"
      shapes="4x32x4096x64 4x32x4096x128 2x16x1000x64 2x16x1000x128 1x8x4097x64 1x8x4097x128 1x16x16384x64 1x32x16384x128"
      python3 experiments/scripts/sdpa_time.py "$out/attention/sdpa.jsonl" $shapes 2>> "$log" | tail -n 20
      python3 experiments/scripts/sdpa_time.py "$out/attention/sdpa_causal.jsonl" --causal $shapes 2>> "$log" | tail -n 20 ;;
    attention_campaign)
      mkdir -p "$out/attention"
      ft campaign specs/attention/campaign.yaml -o $gen --trials "${ATTN_TRIALS:-300}" --dists "${ATTN_DISTS:-normal,uniform,outliers}" \
        --kernels "${ATTN_KERNELS:-*}" --json "$out/attention/campaign.jsonl" 2>> "$log" | tail -n 20 ;;
    kmeans)
      mkdir -p "$out/kmeans"
      python3 experiments/scripts/flash_kmeans_time.py "$out/kmeans/flash_kmeans.jsonl" ${km//,/ } 2>> "$log" | tail -n 6
      ft bench $gen/kmeans_demo --shapes $km,$kodd --reps 10 --warmup 3 --json "$out/kmeans/clean.jsonl" 2>> "$log" | tail -n 20
      ft bench $gen/kmeans_demo --kernels '*abft*' --shapes $km,$kodd --inject 8 --reps 5 --warmup 2 --json "$out/kmeans/inject.jsonl" 2>> "$log" | tail -n 10
      python3 experiments/scripts/flash_kmeans_time.py "$out/kmeans/flash_kmeans_after.jsonl" ${km//,/ } 2>> "$log" | tail -n 6 ;;
    torch)  # ftgen.torch: its GPU tests and the example (torch is on the device machine; the library is built here)
      mkdir -p "$out/torch"
      tspec=${TORCH_SPEC:-specs/gemm/torch_linear.yaml}
      tname=$(python3 -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$tspec")
      ft generate "$tspec" -o $gen >> "$log" 2>&1 && ft build $gen/$tname --lib >> "$log" 2>&1; echo "build $tname rc $?" | tee -a "$log"
      tlib=$gen/$tname/install/lib/libftgen_$tname.so
      FTGEN_TORCH_LIB=$tlib FTGEN_GPU_ARCH=sm_90 python3 -m pytest -q -p no:cacheprovider -rA tests/test_torch.py -k "not attention" > "$out/torch/pytest_torch.txt" 2>&1
      tail -n 15 "$out/torch/pytest_torch.txt"
      for prec in ${TORCH_PRECISIONS:-tf32x3}; do
        python3 examples/protected_mlp.py "$tlib" --precision "$prec" 2>&1 | tee "$out/torch/example_$prec.txt" | tail -n 8
      done ;;
    torch_attention)  # ftgen::attention against SDPA FLASH / cuDNN
      mkdir -p "$out/torch"
      # ATTN_LIB / ATTN_INJ_LIB: the two libraries built beforehand (e.g. on the CPU machine, and carried): the sixteen
      # kernels take more than one call's 600 s to build on a fresh device machine
      alib=${ATTN_LIB:-$gen/torch_attention/install/lib/libftgen_torch_attention.so}
      ilib=${ATTN_INJ_LIB:-$gen/torch_attention_inject/install/lib/libftgen_torch_attention_inject.so}
      if [ -z "${ATTN_LIB:-}" ]; then
        ft generate specs/attention/torch_attention.yaml -o $gen >> "$log" 2>&1 && ft build $gen/torch_attention --lib >> "$log" 2>&1
        echo "build torch_attention rc $?" | tee -a "$log"
      fi
      if [ -z "${ATTN_INJ_LIB:-}" ]; then
        ft generate specs/attention/torch_attention_inject.yaml -o $gen >> "$log" 2>&1 && ft build $gen/torch_attention_inject --lib >> "$log" 2>&1
        echo "build torch_attention_inject rc $?" | tee -a "$log"
      fi
      prov_header tests/test_torch.py -k attention > "$out/torch/provenance_attention.jsonl"
      FTGEN_TORCH_ATTN_INJ_LIB=$ilib FTGEN_TORCH_ATTN_LIB=$alib python3 -m pytest -q -p no:cacheprovider -rA tests/test_torch.py -k attention > "$out/torch/pytest_attn.txt" 2>&1
      tail -n 3 "$out/torch/pytest_attn.txt"
      python3 experiments/scripts/torch_attention_time.py "$alib" "$out/torch/attn_time.jsonl" 4x32x4096x128 4x16x4096x64 2>> "$log"
      python3 experiments/scripts/torch_attention_time.py "$alib" "$out/torch/attn_time_causal.jsonl" 4x32x4096x128 --causal 2>> "$log" ;;
    torch_kmeans)  # ftgen::kmeans: the library of specs/kmeans/torch_kmeans.yaml through ftgen.torch, its GPU tests
      mkdir -p "$out/torch"
      ft generate specs/kmeans/torch_kmeans.yaml -o $gen >> "$log" 2>&1 && ft build $gen/torch_kmeans --lib -j 16 >> "$log" 2>&1
      echo "build torch_kmeans rc $?" | tee -a "$log"
      prov_header tests/test_torch.py -k kmeans > "$out/torch/provenance_kmeans.jsonl"
      FTGEN_TORCH_KM_LIB=$gen/torch_kmeans/install/lib/libftgen_torch_kmeans.so python3 -m pytest -q -p no:cacheprovider -rA \
        tests/test_torch.py -k kmeans > "$out/torch/pytest_kmeans.txt" 2>&1
      tail -n 25 "$out/torch/pytest_kmeans.txt" ;;
    torch_kmeans_inject)  # ftgen.torch.inject on the kmeans library of specs/kmeans/torch_kmeans_inject.yaml
      mkdir -p "$out/torch"
      ft generate specs/kmeans/torch_kmeans_inject.yaml -o $gen >> "$log" 2>&1 && ft build $gen/torch_kmeans_inject --lib -j 16 >> "$log" 2>&1
      echo "build torch_kmeans_inject rc $?" | tee -a "$log"
      prov_header tests/test_torch.py -k kmeans_injected > "$out/torch/provenance_kmeans_inject.jsonl"
      FTGEN_TORCH_KM_INJ_LIB=$gen/torch_kmeans_inject/install/lib/libftgen_torch_kmeans_inject.so python3 -m pytest -q -p no:cacheprovider \
        -rA tests/test_torch.py -k kmeans_injected > "$out/torch/pytest_kmeans_inject.txt" 2>&1
      tail -n 8 "$out/torch/pytest_kmeans_inject.txt" ;;
    gpu_tests)  # the GPU test suite of every family x scheme
      mkdir -p "$out/all"
      FTGEN_GPU_ARCH=sm_90 python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_gpu.py > "$out/all/pytest_gpu.txt" 2>&1
      tail -n 15 "$out/all/pytest_gpu.txt" ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
  echo "phase $phase: $((SECONDS - s)) s" | tee -a "$log"
done
