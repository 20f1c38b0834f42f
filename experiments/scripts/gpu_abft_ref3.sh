#!/usr/bin/env bash
# One call on one GPU: the tf32x3 threadblock ABFT variant of specs/gemm/cutlass90_abft.yaml as this tree generates it
# ("new") against projects generated from other commits (VERSIONS: "name=project ..."; default
# "old=generated/abft_old/gemm_cutlass90_abft", carried to the device), all built at once; ROUNDS (default 3) rounds of
# each in turn at 4096^3 and 8192^3 with 16 faults a launch (cuBLAS SGEMM and each one's twin alternated in its process),
# the odd shapes once (new), Nsight Compute's time per kernel of one launch at 4096^3 (new), and the campaign (1000
# clean + 1000 single bit flips per distribution at 512x512x1024, new). The A/B table last (ab_table.py); the files in OUT/ref3.tgz.
#   git stash; ftgen generate specs/gemm/cutlass90_abft.yaml -o generated/abft_old; git stash pop
#   bash experiments/scripts/gpu_abft_ref3.sh OUT     (carry .whl and the projects VERSIONS names; CTRIALS: also the
#   campaign at 1000x1234x777 with that many trials per distribution; CAMPAIGN=0: not the one at 512x512x1024; NCU=0:
#   no Nsight Compute step; SPEC: another spec, the projects VERSIONS names generated from it; INJECT: faults a launch,
#   0 for unprotected variants)
set -u
top=${1:?usage: gpu_abft_ref3.sh OUT}; mkdir -p "$top/ref3"; top=$(cd "$top" && pwd); out=$top/ref3
cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-specs/gemm/cutlass90_abft.yaml}; gen=generated/ref3; proj=$gen/$(sed -n "s/^name: //p" "$spec")
inj=(--inject "${INJECT:-16}"); [ "${INJECT:-16}" = 0 ] && inj=()
versions=${VERSIONS:-old=generated/abft_old/gemm_cutlass90_abft}; names=""
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -m ftgen.cli generate $spec -o $gen > "$out/generate.txt" 2>&1; echo "generate rc $?"
(ft 300 build $proj -j 6 > "$out/build_new.txt" 2>&1; echo "build new rc $?") &
for v in $versions; do
  (ft 300 build "${v#*=}" -j 5 > "$out/build_${v%%=*}.txt" 2>&1; echo "build ${v%%=*} rc $?") &
  names="$names ${v%%=*}"
done
wait; t built
for r in $(seq 1 "${ROUNDS:-3}"); do
  for v in $versions new=$proj; do
    ft 60 bench "${v#*=}" "${inj[@]}" --shapes $big --reps 20 --warmup 5 --json "$out/ab_${v%%=*}_$r.jsonl" > "$out/ab_${v%%=*}_$r.txt" 2>&1
  done
  t "round $r"
done
ft 60 bench $proj "${inj[@]}" --shapes $odd --reps 5 --warmup 2 --json "$out/odd.jsonl" > "$out/odd.txt" 2>&1; t odd
exe=$(ls $proj/bin/* | head -n 1)
[ "${NCU:-1}" != 0 ] && { ncu_times "$exe" 30 4096x4096x4096 > "$out/ncu_summary.txt" 2>&1; t ncu; }
if [ "${CAMPAIGN:-1}" != 0 ]; then
  ft 200 campaign $spec -o $gen --trials 1000 --seed 7 --shape 512x512x1024 --json "$out/campaign_512.jsonl" \
    > "$out/campaign_512.txt" 2>&1; t campaign
  tail -n 12 "$out/campaign_512.txt" | cut -c1-220
fi
if [ -n "${CTRIALS:-}" ]; then
  ft 200 campaign $spec -o $gen --trials "$CTRIALS" --seed 8 --shape 1000x1234x777 --json "$out/campaign_odd.jsonl" \
    > "$out/campaign_odd.txt" 2>&1; t "campaign odd"; tail -n 3 "$out/campaign_odd.txt" | cut -c100-260
fi
prov_header bench > "$out/provenance.jsonl"
[ -f "$out/ncu_summary.txt" ] && head -n 16 "$out/ncu_summary.txt"
grep -h -E "ok|yes|no " "$out/odd.txt" | tail -n 4 | cut -c100-260
for f in "$out"/ab_new_1.txt; do grep -E "4096x4096|8192x8192" "$f" | cut -c100-300; done
python3 experiments/scripts/abft_summary.py "$out" | grep "^campaign" | cut -c1-240
python3 experiments/scripts/ab_table.py "$out" --shape-keys m,n,k $names new
tar czf "$top/ref3.tgz" -C "$top" ref3
