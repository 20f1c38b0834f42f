#!/usr/bin/env bash
# The 16-bit ABFT's reference products R = A E: abft16_ref_kernel (mma.sync, split k) against the CUTLASS sm90 kernel
# it replaced (FTGEN_ABFT16_REF=cutlass), one call on one H200: experiments/specs/abft16_locate.yaml built (-j 16), each
# way benched in alternating rounds beside the twin and cuBLAS with 16 faults a launch and without (linear-layer shapes,
# 4096^3, 8192^3; the odd shapes once), Nsight Compute's device time of both reference kernels, then the bf16 recompute
# variant's campaign at 512x512x1024. A short table last; JSON lines in OUT/benches.tgz.
#   bash experiments/scripts/gpu_abft16_ref.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_abft16_ref.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-experiments/specs/abft16_locate.yaml}; gen=generated/abft16ref; proj=$gen/abft16_locate
gen_build $spec $gen $proj
grep -i "spill\|error" "$out/build.txt" | head -n 5
shapes=${SHAPES:-1024x4096x4096,1024x11008x4096,4096x4096x4096,8192x8192x8192}
for round in 1 2; do
  for ref in mma cutlass; do
    env=(); [ $ref = cutlass ] && env=(FTGEN_ABFT16_REF=cutlass)
    s=$shapes; [ $round = 1 ] && s=$shapes,$odd
    env "${env[@]}" timeout "$(cap 70)" python3 -m ftgen.cli bench $proj --shapes "$s" --inject 16 --reps ${REPS:-30} --warmup 5 \
      --json "$out/bench_${ref}_f16_r$round.jsonl" > "$out/bench_${ref}_f16_r$round.txt" 2>&1
    echo "$ref f16 r$round rc $?"
  done
done
for ref in mma cutlass; do
  env=(); [ $ref = cutlass ] && env=(FTGEN_ABFT16_REF=cutlass)
  env "${env[@]}" timeout "$(cap 50)" python3 -m ftgen.cli bench $proj --shapes "$shapes" --reps ${REPS:-30} --warmup 5 \
    --json "$out/bench_${ref}_f0_r1.jsonl" > "$out/bench_${ref}_f0_r1.txt" 2>&1
  echo "$ref f0 rc $?"
done
t bench
exe=$(ls $proj/bin/gemm_bf16_abft*evtrecomp* | grep -v '\.' | head -n 1)
NCU_KERNELS='KernelRef|abft16_' ncu_times "$exe" 12 1024x4096x4096 4096x4096x4096 | grep -v '^  [a-z]'
FTGEN_ABFT16_REF=cutlass NCU_KERNELS='KernelRef|abft16_' ncu_times "$exe" 12 1024x4096x4096 4096x4096x4096 | grep -v '^  [a-z]'
t profile
ft 150 campaign $spec -o $gen --kernels '*bf16*evtrecomp*' --trials 1000 --seed 7 --shape 512x512x1024 \
  --json "$out/campaign_512.jsonl" 2>&1 | tail -n 6
t campaign
python3 - "$out" <<'PY'
import json, glob, os, sys
print(f"{'run':16} {'kernel':10} {'shape':18} {'ms':>8} {'twin':>8} {'x twin':>7} {'x cuBLAS':>8} verified")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench_*.jsonl"))):
    run = os.path.basename(f)[6:-6]
    for line in open(f):
        r = json.loads(line)
        if "kernel" not in r:
            continue
        s = r.get("shape", {})
        sh = "x".join(str(s.get(k)) for k in ("m", "n", "k"))
        k = r["kernel"]
        kern = ("bf16" if "bf16" in k else "f16") + ("-rc" if "evtrecomp" in k else "-w")
        ms = (r.get("ms") or {}).get("median"); tw = (r.get("unprotected_ms") or {}).get("median")
        print(f"{run:16} {kern:10} {sh:18} {ms!s:>8.8} {tw!s:>8.8} {r.get('x_unprot')!s:>7.7} {r.get('speedup_vs_ref')!s:>8.8}"
              f" {r.get('ok')} inj {r.get('injected')} det {r.get('detected')} cor {r.get('corrected')}")
PY
(cd "$out" && tar czf benches.tgz bench_*.jsonl bench_*.txt ncu_* && rm -f bench_*.jsonl bench_*.txt ncu_*)  # (few files come back)
