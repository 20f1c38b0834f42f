#!/usr/bin/env bash
# One call on one GPU: every test marked `gpu` (all families, the reference drivers, ftgen.torch where torch is
# installed), spread over worker processes when pytest-xdist is there: a module's tests on one worker, except
# tests/test_torch.py's, which go by the library they build (`--dist loadgroup`, tests/conftest.py).
#   bash experiments/scripts/gpu_tests.sh OUT [PYTEST_ARGS...]   (wheels in .whl/)
set -u
out=$1; shift; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels of .whl/ on PYTHONPATH
export FTGEN_GPU_ARCH=${FTGEN_GPU_ARCH:-sm_90}
provenance "$out" > /dev/null 2>&1  # OUT/gpu.txt: the GPU, driver, nvcc and the commit
par=(); python3 -c "import xdist" 2> /dev/null && par=(-n ${GPU_TESTS_WORKERS:-6} --dist loadgroup)
timeout "${GPU_TESTS_SECONDS:-560}" python3 -m pytest -m gpu -v -p no:cacheprovider -p no:benchmark -rfE --durations=25 "${par[@]}" "$@" tests/ \
  > "$out/pytest_gpu.txt" 2>&1
echo "pytest rc $?"
grep -oE "(PASSED|FAILED|ERROR|SKIPPED)" "$out/pytest_gpu.txt" | sort | uniq -c
grep -E "(FAILED|ERROR) " "$out/pytest_gpu.txt" | cut -c1-200 | head -20
tail -n 3 "$out/pytest_gpu.txt"
