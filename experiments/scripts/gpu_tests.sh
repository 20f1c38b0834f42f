#!/usr/bin/env bash
# Every test marked `gpu` (all families, the reference drivers, ftgen.torch where torch is installed) on one GPU,
# spread over worker processes when pytest-xdist is there: a module's tests on one worker, except tests/test_torch.py's,
# which go by the library they build (`--dist loadgroup`, tests/conftest.py).
#   bash experiments/scripts/gpu_tests.sh OUT [PYTEST_ARGS...]   (wheels in .whl/; GPU_TESTS_PATHS: default tests/)
# From a fresh device machine the builds do not all fit one 600 s call (an H200 reached 102 of 124 tests): run it as
# two calls, the torch library's tests apart:
#   bash experiments/scripts/gpu_tests.sh OUT --ignore=tests/test_torch.py
#   GPU_TESTS_PATHS=tests/test_torch.py bash experiments/scripts/gpu_tests.sh OUT2
# The two attention libraries of tests/test_torch.py (-k attention) did not finish building in 400 s on a fresh H100:
# build them on the CPU machine (about 6 minutes each on 2 cores), carry the install folders and name them, e.g.
#   ftgen generate specs/attention/torch_attention.yaml -o generated/tlib
#   ftgen build generated/tlib/torch_attention --lib generated/tlib/inst        (and torch_attention_inject -> insti)
#   run with carry [.whl, generated/tlib/inst, generated/tlib/insti]:
#   ATTN_LIB=$PWD/generated/tlib/inst/lib/libftgen_torch_attention.so \
#   ATTN_INJ_LIB=$PWD/generated/tlib/insti/lib/libftgen_torch_attention_inject.so bash experiments/scripts/gpu_session.sh OUT torch_attention
# (the run of record recreated the libftgen_*.so links from the .so.0.1.0 files first, in case a carry drops links)
set -u
out=$1; shift; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels of .whl/ on PYTHONPATH
export FTGEN_GPU_ARCH=${FTGEN_GPU_ARCH:-sm_90}
provenance "$out" > /dev/null 2>&1  # OUT/gpu.txt: the GPU, driver, nvcc and the commit
par=(); python3 -c "import xdist" 2> /dev/null && par=(-n ${GPU_TESTS_WORKERS:-6} --dist loadgroup)
timeout "${GPU_TESTS_SECONDS:-560}" python3 -m pytest -m gpu -v -p no:cacheprovider -p no:benchmark -rfE --durations=25 "${par[@]}" "$@" ${GPU_TESTS_PATHS:-tests/} \
  > "$out/pytest_gpu.txt" 2>&1
echo "pytest rc $?"
grep -oE "(PASSED|FAILED|ERROR|SKIPPED)" "$out/pytest_gpu.txt" | sort | uniq -c
grep -E "(FAILED|ERROR) " "$out/pytest_gpu.txt" | cut -c1-200 | head -20
tail -n 3 "$out/pytest_gpu.txt"
