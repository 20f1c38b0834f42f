#!/usr/bin/env bash
# One call on one GPU: the tf32x3 threadblock ABFT variant of specs/gemm/cutlass90_abft.yaml as this tree generates it
# ("new") against a project generated from another commit ("old", OLD: default generated/abft_old/gemm_cutlass90_abft,
# carried to the device), both built at once; ROUNDS (default 3) rounds of old then new at 4096^3 and 8192^3 with 16
# faults a launch (cuBLAS SGEMM and each one's twin alternated in its process), the odd shapes once (new), Nsight
# Compute's time per kernel of one launch at 4096^3 (new), and the campaign (1000 clean + 1000 single bit flips per
# distribution at 512x512x1024, new). The A/B table last (ab_table.py); the files in OUT/ref3.tgz.
#   git stash; ftgen generate specs/gemm/cutlass90_abft.yaml -o generated/abft_old; git stash pop
#   bash experiments/scripts/gpu_abft_ref3.sh OUT     (carry .whl and generated/abft_old)
set -u
top=${1:?usage: gpu_abft_ref3.sh OUT}; mkdir -p "$top/ref3"; top=$(cd "$top" && pwd); out=$top/ref3
cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=specs/gemm/cutlass90_abft.yaml; gen=generated/ref3; proj=$gen/gemm_cutlass90_abft; old=${OLD:-generated/abft_old/gemm_cutlass90_abft}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -m ftgen.cli generate $spec -o $gen > "$out/generate.txt" 2>&1; echo "generate rc $?"
(ft 300 build $proj -j 8 > "$out/build_new.txt" 2>&1; echo "build new rc $?") &
(ft 300 build "$old" -j 8 > "$out/build_old.txt" 2>&1; echo "build old rc $?") &
wait; t built
for r in $(seq 1 "${ROUNDS:-3}"); do
  ft 60 bench "$old" --inject 16 --shapes $big --reps 20 --warmup 5 --json "$out/ab_old_$r.jsonl" > "$out/ab_old_$r.txt" 2>&1
  ft 60 bench $proj --inject 16 --shapes $big --reps 20 --warmup 5 --json "$out/ab_new_$r.jsonl" > "$out/ab_new_$r.txt" 2>&1
  t "round $r"
done
ft 60 bench $proj --inject 16 --shapes $odd --reps 5 --warmup 2 --json "$out/odd.jsonl" > "$out/odd.txt" 2>&1; t odd
exe=$(ls $proj/bin/* | head -n 1)
ncu_times "$exe" 30 4096x4096x4096 > "$out/ncu_summary.txt" 2>&1; t ncu
ft 200 campaign $spec -o $gen --trials 1000 --seed 7 --shape 512x512x1024 --json "$out/campaign_512.jsonl" \
  > "$out/campaign_512.txt" 2>&1; t campaign
prov_header bench > "$out/provenance.jsonl"
head -n 16 "$out/ncu_summary.txt"
tail -n 12 "$out/campaign_512.txt" | cut -c1-220
grep -h -E "ok|yes|no " "$out/odd.txt" | tail -n 4 | cut -c100-260
for f in "$out"/ab_*_1.txt; do grep -E "4096x4096|8192x8192" "$f" | cut -c100-300; done
python3 experiments/scripts/ab_table.py "$out" --shape-keys m,n,k old new
tar czf "$top/ref3.tgz" -C "$top" ref3
