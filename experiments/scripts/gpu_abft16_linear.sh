#!/usr/bin/env bash
# The bf16 accumulator-check ABFT at linear-layer shapes (tokens x 4096 x 4096 and an MLP's 4096 -> 11008), one call on
# one H200: experiments/specs/gemm_small_shapes.yaml's bf16 variants built (-j 16), then each side-work mode of the launcher
# benched beside the twin and cuBLAS (no faults and 16 a launch): the default (encodings and reference GEMM on a
# low-priority stream), FTGEN_ABFT_SIDE=serial, and FTGEN_ABFT16_SIDE_SMS = 4 / 8 / 16; then the ABFT call's kernels
# at three shapes (Nsight Compute: how the reference GEMM's time follows m and k).
#   bash experiments/scripts/gpu_abft16_linear.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_abft16_linear.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/gemm_small_shapes.yaml; gen=generated/linear; proj=$gen/gemm_small_shapes
BUILD_KERNELS=${BUILD_KERNELS:-'*bf16*'} gen_build $spec $gen $proj
shapes=${SHAPES:-1024x4096x4096,4096x4096x4096,1024x11008x4096}
for inj in 0 16; do
  for mode in default serial sms4 sms8 sms16; do
    case $mode in
      default) env=();; serial) env=(FTGEN_ABFT_SIDE=serial);; sms*) env=(FTGEN_ABFT16_SIDE_SMS=${mode#sms});;
    esac
    env "${env[@]}" timeout "$(cap 60)" python3 -m ftgen.cli bench $proj --kernels '*bf16_abft*' --shapes "$shapes" --inject $inj \
      --reps ${REPS:-50} --warmup 5 --json "$out/bench_${mode}_f$inj.jsonl" > "$out/bench_${mode}_f$inj.txt" 2>&1
    echo "$mode f$inj rc $?"
  done
done
t bench
exe=$(ls $proj/bin/gemm_bf16_abft* | grep -v '\.' | head -n 1)
NCU_KERNELS='Kernel|abft16_' ncu_times "$exe" 12 256x4096x4096 1024x4096x4096 1024x4096x1024 | grep -v '^  [a-z]'  # (the call's kernels)
t profile
python3 - "$out" <<'PY'
import json, glob, os, sys
print(f"{'mode':12} {'shape':18} {'ms':>8} {'twin':>8} {'cublas':>8} {'x twin':>7} {'x cuBLAS':>8} verified")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench_*.jsonl"))):
    mode = os.path.basename(f)[6:-6]
    for line in open(f):
        r = json.loads(line)
        s = r.get("shape", {})
        sh = "x".join(str(s.get(k)) for k in ("m", "n", "k"))
        ms = (r.get("ms") or {}).get("median"); tw = (r.get("unprotected_ms") or {}).get("median")
        ref = (r.get("ref") or {}).get("ms")
        print(f"{mode:12} {sh:18} {ms!s:>8.8} {tw!s:>8.8} {ref!s:>8.8} {r.get('x_unprot')!s:>7.7} {r.get('speedup_vs_ref')!s:>8.8}"
              f" {r.get('ok')} inj {r.get('injected')} det {r.get('detected')} cor {r.get('corrected')}")
PY
(cd "$out" && tar czf benches.tgz bench_*.jsonl bench_*.txt ncu_* && rm -f bench_*.jsonl bench_*.txt ncu_*)  # (few files come back)
