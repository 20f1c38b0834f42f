#!/usr/bin/env bash
# The figures of record re-measured against a previous build, on one H100/H200, in one call. Here, first:
#   rev=895040e; mkdir -p .base/$rev && git archive $rev ftgen templates | tar -x -C .base/$rev
# then on the device machine (carry .base and .whl):
#   bash scripts/gpu_regress.sh .base/$rev OUT [gemm|tmr|fft|all]
# Both trees generate and build the same specs (the previous build's ftgen and templates, this tree's specs); per
# spec the previous build's executables run, then this tree's, on the same GPU; `ftgen compare` gives the verdict.
# OUT gets old.jsonl, new.jsonl (rows with provenance), compare.txt and log.txt. Set FTGEN_GIT_SHA (and
# FTGEN_GIT_DIRTY) to this tree's commit where the device machine's copy has no .git.
set -uo pipefail
old=$(cd "${1:?usage: gpu_regress.sh OLD_TREE OUT [gemm|tmr|fft|all]}" && pwd)
out=${2:?usage: gpu_regress.sh OLD_TREE OUT [gemm|tmr|fft|all]}
part=${3:-all}
mkdir -p "$out"; out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd); cd "$root" || exit 1
site=""; [ -d /tmp/site/cutlass_library ] && site=/tmp/site
export PYTHONUNBUFFERED=1
log="$out/log.txt"
# the ftgen of TREE; the previous build's rows name its commit (the folder's name), this tree's FTGEN_GIT_SHA
ftv() {
  local tree=$1 sha=${FTGEN_GIT_SHA:-}; shift
  [ "$tree" = "$old" ] && sha=$(basename "$tree")
  PYTHONPATH="$tree${site:+:$site}" FTGEN_GIT_SHA=$sha FTGEN_CACHE_DIR=/tmp/ftgen-cache-$(basename "$tree") python3 -m ftgen.cli "$@"
}
name_of() { python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$1"; }

gemm_specs="specs/gemm/abft_tc_concurrent.yaml specs/gemm/abft_tb_prepass.yaml specs/gemm/tmr_kernel.yaml specs/gemm/tmr_threadblock.yaml"
tmr_specs="specs/gemm/tmr_kernel.yaml specs/gemm/tmr_threadblock.yaml specs/gemm/tmr_cooperative.yaml specs/gemm/tmr_multikernel.yaml"
fft_specs="specs/fft/sweep_fp32.yaml specs/fft/sweep_fp64.yaml"
case $part in gemm) specs=$gemm_specs ;; tmr) specs=$tmr_specs ;; fft) specs=$fft_specs ;; *) specs="$gemm_specs $fft_specs" ;; esac

# build both trees at once, 8 jobs each
build_tree() {  # TREE GEN
  local tree=$1 gen=$2 s rc=0
  for s in $specs; do ftv "$tree" generate "$s" -o "$gen" > /dev/null || rc=2; done
  for s in $specs; do ftv "$tree" build "$gen/$(name_of "$s")" -j 8 --kernels "$(kernels_of "$s")" || rc=3; done
  return $rc
}
kernels_of() {  # the variants the figures of record use
  case $1 in
    *sweep_fp*) echo '*_none_*,*2sided-tb_*' ;;
    *) echo '*' ;;
  esac
}
t0=$SECONDS
build_tree "$old" /tmp/regress-old >> "$log" 2>&1 & p_old=$!
build_tree "$root" /tmp/regress-new >> "$log.new" 2>&1 & p_new=$!
wait $p_old; rc_old=$?; wait $p_new; rc_new=$?
cat "$log.new" >> "$log"; rm -f "$log.new"
echo "builds: old rc $rc_old, new rc $rc_new, $((SECONDS - t0)) s" | tee -a "$log"

fft_shapes=16x8388608,256x262144,1024x65536,4096x16384,65536x1024,1048576x64,16777216x4
bench_pair() {  # SPEC KERNELS SHAPES EXTRA...: the old build's rows, then the new build's, for one spec
  local s=$1 k=$2 sh=$3; shift 3
  local n; n=$(name_of "$s")
  for side in old new; do
    local tree=$old; [ $side = new ] && tree=$root
    ftv "$tree" bench "/tmp/regress-$side/$n" --kernels "$k" --shapes "$sh" "$@" --json "$out/$side.part.jsonl" >> "$log" 2>&1
    echo "bench $side $n $k $*: rc $?" | tee -a "$log"
    cat "$out/$side.part.jsonl" >> "$out/$side.jsonl"; rm -f "$out/$side.part.jsonl"
  done
}
for s in $specs; do
  case $s in
    *abft_tc_concurrent*|*abft_tb_prepass*)
      bench_pair "$s" '*' 4096x4096x4096,8192x8192x8192 --reps 20 --warmup 5
      bench_pair "$s" '*_inj' 4096x4096x4096,8192x8192x8192 --inject 16 --reps 20 --warmup 5 ;;
    *tmr_*)
      bench_pair "$s" '*' 4096x4096x4096 --reps 20 --warmup 5 ;;
    *sweep_fp*)
      bench_pair "$s" '*_none_*,*2sided-tb_*' "$fft_shapes" --reps 20 --warmup 5
      bench_pair "$s" '*2sided-tb_*inj*' "$fft_shapes" --inject 1 --reps 20 --warmup 5 ;;
  esac
done
echo "total $((SECONDS - t0)) s" | tee -a "$log"
PYTHONPATH="$root" python3 -m ftgen.cli compare "$out/old.jsonl" "$out/new.jsonl" | tee "$out/compare.txt"
