# Sourced by the GPU scripts, run from the repository root. `gpu_start OUTDIR`: their common start (OUTDIR created, this
# repository first on PYTHONPATH with unbuffered output, /tmp/site before it where the device's nvidia-cutlass was
# installed (the gemm CUTLASS backend), `ft` the ftgen CLI, OUTDIR/gpu.txt written). `provenance OUTDIR` writes (and prints)
# OUTDIR/gpu.txt: the GPU (name, driver, memory, maximum SM clock), nvcc's version line and the commit the run measures
# (FTGEN_GIT_SHA when set: the device machine's copy of the tree may carry a stale .git).
provenance() {
  mkdir -p "$1"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$1/gpu.txt"
  nvcc --version | tail -1 | tee -a "$1/gpu.txt"
  echo "${FTGEN_GIT_SHA:-$(git rev-parse --short HEAD 2>/dev/null)}" | tee -a "$1/gpu.txt"
}

gpu_start() {
  mkdir -p "$1"
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  if [ -d /tmp/site/cutlass_library ]; then export PYTHONPATH="/tmp/site:$PYTHONPATH"; fi
  provenance "$1"
}
ft() { python3 -m ftgen.cli "$@"; }
# `prov_header ARGS`: the provenance line of a step without bench rows (ftgen's results header: commit, GPU state,
# driver, nvcc, libraries; ARGS as its argv), for record_run.py --provenance-from
prov_header() { python3 -c "import json, sys; from ftgen.bench import gpu_info; from ftgen.report.provenance import provenance
print(json.dumps({'provenance': provenance(gpu_info(), sys.argv[1:])}))" "$@"; }

# `spec_project SPEC`: the name of SPEC's generated project (its `name`)
spec_project() {
  python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$1"
}

# `build_version SPEC DIR HEADERS [ftgen build options...]`: generate SPEC into DIR and build its project there
# (FTGEN_CACHE_DIR as the caller sets it), with the tensor-core headers (*.cuh) of the directory HEADERS copied over the
# generated ones first (HEADERS empty: the working tree's templates). Returns 1 where generating (or the copy) failed,
# 3 where the build did; the build's output goes to stdout.
build_version() {
  local spec=$1 dir=$2 headers=$3 proj
  shift 3
  proj=$(spec_project "$spec") || return 1
  python3 -m ftgen.cli generate "$spec" -o "$dir" > /dev/null || return 1
  if [ -n "$headers" ]; then cp "$headers"/*.cuh "$dir/$proj/common/" || return 1; fi
  python3 -m ftgen.cli build "$dir/$proj" "$@" || return 3
}

# `build_versions OUT DIRS SPEC KERNELS`: the versions of an A/B, A (the working tree's templates) and B, C, ... (the
# *.cuh of the colon-separated DIRS copied over the generated ones), SPEC's KERNELS generated under /tmp/ab-<V> and built
# at the same time, the 16 cores shared (FTGEN_CACHE_DIR /tmp/ab-cache-<V>; logs in OUT/build_<V>.log). Sets `versions`
# (A B ...); returns 3 where a build failed, the logs' tails printed.
build_versions() {
  local out=$1 dirs=$2 spec=$3 kernels=$4 i v per_build fail=0 job
  local -a dir_list letters=(B C D E F G H)
  IFS=: read -r -a dir_list <<< "$dirs"
  versions=(A)
  for i in "${!dir_list[@]}"; do versions+=("${letters[$i]}"); done
  per_build=$(( (16 + ${#versions[@]} - 1) / ${#versions[@]} ))
  for i in "${!versions[@]}"; do
    v=${versions[$i]}
    (
      export FTGEN_CACHE_DIR=/tmp/ab-cache-$v
      local headers=""
      [ "$i" -gt 0 ] && headers=${dir_list[$((i - 1))]}
      build_version "$spec" /tmp/ab-$v "$headers" -j "$per_build" --kernels "$kernels" > "$out/build_$v.log" 2>&1
    ) &
  done
  for job in $(jobs -p); do wait "$job" || fail=1; done
  [ $fail = 0 ] || { tail -n 30 "$out"/build_*.log; return 3; }
}

# `bench_rounds OUT PROJ KERNELS SHAPES [ftgen bench options...]`: REPS rounds (default 3) of `ftgen bench` of each of
# `versions` (build_versions') in turn, A, B, ..., A, B, ... (FTGEN_CACHE_DIR /tmp/ab-cache-<V>), rows into
# OUT/ab_<V>_<round>.jsonl
bench_rounds() {
  local out=$1 proj=$2 kernels=$3 shapes=$4 rep v
  shift 4
  for rep in $(seq 1 "${REPS:-3}"); do
    for v in "${versions[@]}"; do
      FTGEN_CACHE_DIR=/tmp/ab-cache-$v ft bench /tmp/ab-$v/$proj --kernels "$kernels" --shapes "$shapes" "$@" --reps 10 --warmup 3 \
        --json "$out/ab_${v}_$rep.jsonl" > /dev/null 2>&1
      echo "$v round $rep rc=$?"
    done
  done
}

# `header_ab OUT DIRS SPEC KERNELS SHAPES SHAPE_KEYS`: an A/B of template headers in one call (gpu_attention_ab.sh,
# gpu_kmeans_ab.sh): the carried wheels into /tmp/site, the versions built (build_versions), REPS rounds of each without
# the vendor references and with INJECT faults per launch (default 0), the table (ab_table.py; SHAPE_KEYS: the shape's
# keys in order). Exits 3 where a build failed.
header_ab() {
  local out=$1 dirs=$2 spec=$3 kernels=$4 shapes=$5 keys=$6 proj
  ls .whl/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
  gpu_start "$out"
  proj=$(spec_project "$spec")
  build_versions "$out" "$dirs" "$spec" "$kernels" || exit 3
  FTGEN_BENCH_REFS=none bench_rounds "$out" "$proj" "$kernels" "$shapes" --inject "${INJECT:-0}"
  python3 "$(dirname "${BASH_SOURCE[0]}")/ab_table.py" "$out" --shape-keys "$keys" "${versions[@]}"
}
