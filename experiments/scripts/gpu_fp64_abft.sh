#!/usr/bin/env bash
# fp64 threadblock ABFT on Hopper's DMMA, one call on one H200 (<= 9 minutes): specs/gemm/cutlass_fp64_abft.yaml generated
# and built (-j 16), benched with 16 faults per launch (each variant, its unprotected twin and cuBLAS DGEMM alternated;
# 4096^3, 8192^3 and the odd shapes), without faults, then the fault campaigns of the online builds (strips of 128, 64
# and 32 columns) at 512x512x1024 and at 1000x1234x777 (1000 clean + 1000 faulty trials per distribution). A short table last; JSON lines under OUT.
#   bash experiments/scripts/gpu_fp64_abft.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_fp64_abft.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
spec=specs/gemm/cutlass_fp64_abft.yaml; gen=generated/f64abft; proj=$gen/gemm_cutlass_fp64_abft
gen_build $spec $gen $proj
# 1. 16 faults per launch, timed with them (the target: x cuBLAS DGEMM), the big and the odd shapes
ft 150 bench $proj --kernels '*_inj' --inject 16 --shapes $big,$odd --reps 20 --warmup 5 --json "$out/bench_inject16.jsonl" 2>&1 | tail -n 8
t bench inject16
# 2. the build without injection, no faults: the check's cost alone; beta != 0 and odd leading dimensions on the odd shapes
ft 60 bench $proj --kernels '*_cs128' --shapes $big,$odd --reps 20 --warmup 5 --json "$out/bench_clean.jsonl" 2>&1 | tail -n 6
t bench clean
# 2b. the suspect band's cost: the default strips with 16 faults, the band off (FTGEN_ABFT_BAND=0) and on, in turn
for band in 0 on; do
  if [ $band = 0 ]; then export FTGEN_ABFT_BAND=0; else unset FTGEN_ABFT_BAND; fi
  ft 60 bench $proj --kernels '*abft-tb-i*_rr_conc_cs128_inj' --inject 16 --shapes $big --reps 20 --warmup 5 \
    --json "$out/bench_band_$band.jsonl" 2>&1 | tail -n 3
done
unset FTGEN_ABFT_BAND
t bench band
# 3. the campaigns (significant single faults under the fp64 rule: coverage; clean trials: false alarms, largest score)
ft 200 campaign $spec -o $gen --kernels '*abft-tb-i*_rr_conc_cs*_inj' --trials 1000 --seed 7 --shape 512x512x1024 \
  --json "$out/campaign_512.jsonl" 2>&1 | tail -n 8
t campaign 512
ft 200 campaign $spec -o $gen --kernels '*abft-tb-i*_rr_conc_cs*_inj' --trials 1000 --seed 8 --shape 1000x1234x777 \
  --json "$out/campaign_odd.jsonl" 2>&1 | tail -n 8
t campaign odd
python3 experiments/scripts/abft_summary.py "$out"
