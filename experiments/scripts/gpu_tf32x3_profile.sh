#!/usr/bin/env bash
# Where the tf32x3 threadblock ABFT variant of specs/gemm/cutlass90_abft.yaml spends its time at 4096^3 and 8192^3:
# Nsight Compute's device time of every kernel of one bench launch (the split copies, the sm90 GEMM, B's encodings, the
# reference GEMM, the pass over C, the check; the twin and cuBLAS SGEMM beside them), then the bench itself with 16 faults
# (the side work beside the GEMM, and serial: FTGEN_ABFT_SIDE=serial).
#   bash experiments/scripts/gpu_tf32x3_profile.sh OUT    (wheels in .whl/)
set -u
out=$1; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-specs/gemm/cutlass90_abft.yaml}; gen=generated/t3prof
proj=$gen/$(python3 -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$spec")
gen_build "$spec" $gen $proj
exe=$(ls $proj/bin/* | grep -v _twin | head -n 1); echo "exe $exe"
NCU_ARGS=${NCU_ARGS:-} ncu_times "$exe" "${NCU_N:-80}" ${SHAPES:-4096x4096x4096 8192x8192x8192}; t ncu
ft 120 bench $proj --inject 16 --shapes $big --reps 20 --warmup 5 --json "$out/bench.jsonl" > "$out/bench.txt" 2>&1; t bench
FTGEN_ABFT_SIDE=serial ft 120 bench $proj --inject 16 --shapes $big --reps 20 --warmup 5 --json "$out/bench_serial.jsonl" \
  > "$out/bench_serial.txt" 2>&1; t serial
prov_header bench > "$out/provenance.jsonl"
for f in bench bench_serial; do echo "== $f"; grep -E "│ *(4096|8192)x" "$out/$f.txt" | cut -c100-300; done
