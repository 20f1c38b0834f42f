#!/usr/bin/env bash
# bf16 / fp16 threadblock ABFT on the cutlass90 backend, one call on one H200 (<= 9 minutes): specs/gemm/cutlass90_abft16.yaml
# generated and built (-j 16), benched with 16 faults per launch (each variant, its unprotected twin and cuBLAS of the
# same precision alternated; 4096^3, 8192^3 and the odd shapes), without faults, then the fault campaigns at 512x512x1024
# and 1000x1234x777 (1000 clean + 1000 faulty trials per distribution). SIDE=serial runs the check's side work on the
# caller's stream (FTGEN_ABFT_SIDE); SPEC another spec of 16-bit ABFT variants; BREAKDOWN=0 skips the serial, reserved-SM and
# Nsight Compute runs, CAMPAIGNS=0 the campaigns. A short table last; JSON lines under OUT.
#   bash experiments/scripts/gpu_abft16.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_abft16.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
[ -n "${SIDE:-}" ] && export FTGEN_ABFT_SIDE=$SIDE
spec=${SPEC:-specs/gemm/cutlass90_abft16.yaml}; gen=generated/abft16  # SPEC: e.g. experiments/specs/abft16_tiles.yaml
proj=$gen/$(python3 -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$spec")
gen_build $spec $gen $proj
grep -i "spill\|error" "$out/build.txt" | head -n 5
# 1. 16 faults per launch, timed with them (the target: x cuBLAS, x its twin), the big and the odd shapes
ft 200 bench $proj --inject 16 --shapes $big,$odd --reps 20 --warmup 5 --json "$out/bench_inject16.jsonl" 2>&1 | tail -n 12
t bench inject16
# 2. no faults: the check's cost alone, clean detections
ft 90 bench $proj --shapes $big --reps 20 --warmup 5 --json "$out/bench_clean.jsonl" 2>&1 | tail -n 6
t bench clean
# 2b. where the time goes: the check's side work on the caller's stream, on a few SMs beside the GEMM, and each kernel's
#     device time at 4096^3 (Nsight Compute, launches serialized) of the bf16 build of TILE (its campaigns' too)
if [ "${BREAKDOWN:-1}" = 1 ]; then
FTGEN_ABFT_SIDE=serial ft 60 bench $proj --shapes $big --reps 20 --warmup 5 --json "$out/bench_serial.jsonl" > /dev/null 2>&1
for r in ${RESERVE-4 8}; do  # the side work on r SMs beside the GEMM (FTGEN_ABFT16_SIDE_SMS)
  FTGEN_ABFT16_SIDE_SMS=$r ft 60 bench $proj --shapes $big --reps 20 --warmup 5 --json "$out/bench_sms$r.jsonl" > /dev/null 2>&1
done
for e in $proj/bin/gemm_bf16_abft*${TILE:-128x128x64_c2x1_ws-pingpong}*; do
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base -c 300 \
    "$e" --shapes 4096x4096x4096 --reps 1 --warmup 1 --inject 16 > "$out/ncu_bf16.csv" 2> "$out/ncu_bf16.err"
  python3 experiments/scripts/ncu_summary.py "$out/ncu_bf16.csv"
done
t profile
fi
# 3. the campaigns (significant single faults under the delivered precision's rule: coverage; clean trials: false alarms)
if [ "${CAMPAIGNS:-1}" = 1 ]; then
ft 120 campaign $spec -o $gen --kernels "*${TILE:-128x128x64_c2x1_ws-pingpong}*" --trials 1000 --seed 7 --shape 512x512x1024 --json "$out/campaign_512.jsonl" 2>&1 | tail -n 6
t campaign 512
ft 120 campaign $spec -o $gen --kernels "*${TILE:-128x128x64_c2x1_ws-pingpong}*" --trials 1000 --seed 8 --shape 1000x1234x777 --json "$out/campaign_odd.jsonl" 2>&1 | tail -n 6
t campaign odd
fi
python3 experiments/scripts/abft_summary.py "$out"
