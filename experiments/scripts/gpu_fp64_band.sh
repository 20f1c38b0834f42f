#!/usr/bin/env bash
# The fp64 check's suspect band on the GPU, one call (<= 9 minutes): the default 128-column strips (specs/gemm/
# cutlass_fp64_abft.yaml, the online inject build) benched with 16 faults per launch at 4096^3 and 8192^3 (the variant,
# its unprotected twin and cuBLAS DGEMM alternated) at each floor of FLOORS (FTGEN_ABFT_BAND; 0: no band) and each tile
# of TILES (FTGEN_ABFT64_RECHECK: the bit-for-bit recheck's rows x columns a block, 32x32, 32x128 or 64x32): the
# rechecks a launch and the time; then the campaigns at CFLOOR (1000 clean + 1000 faulty trials per distribution, 512x512x1024
# seed 7 and 1000x1234x777 seed 8, as gpu_fp64_abft.sh runs them), their failed trials kept in OUT/campaign_*_notok.jsonl.
#   FLOORS="0 0.3 0.35 0.4 0.45" TILES="32x128 32x32" CFLOOR=0.35 bash experiments/scripts/gpu_fp64_band.sh OUT
set -u
out=${1:?usage: gpu_fp64_band.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=specs/gemm/cutlass_fp64_abft.yaml; gen=generated/f64abft; proj=$gen/gemm_cutlass_fp64_abft
kern='*abft-tb-i1024*_rr_conc_cs128_inj'
BUILD_KERNELS=$kern gen_build $spec $gen $proj
for f in ${FLOORS:-0 0.3 0.35 0.4 0.45}; do
  for r in ${TILES:-32x32}; do
    FTGEN_ABFT_BAND=$f FTGEN_ABFT64_RECHECK=$r ft 60 bench $proj --kernels "$kern" --inject 16 --shapes $big --reps 10 \
      --warmup 3 --json "$out/bench_floor_${f}_$r.jsonl" 2>&1 | tail -n 2
    t "floor $f, recheck tile $r"
  done
done
for c in "512x512x1024 7 512" "1000x1234x777 8 odd"; do
  set -- $c
  FTGEN_ABFT_BAND=${CFLOOR:-0.35} ft 120 campaign $spec -o $gen --kernels "$kern" --trials 1000 --seed $2 --shape $1 \
    --json "$out/campaign_$3.jsonl" 2>&1 | tail -n 4
  python3 - "$out/campaign_$3.jsonl" > "$out/campaign_$3_notok.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "campaign" in r or "provenance" in r or ("trial" in r and (r.get("ok") is False or r.get("false_alarm"))):
        print(json.dumps(r))
PY
  t "campaign $3"
done
python3 experiments/scripts/abft_summary.py "$out"
