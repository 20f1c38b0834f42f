#!/usr/bin/env bash
# What the one planned fault per transform costs the two-sided-tb with injection (the issue's measure): at the sizes
# where the injection build ran furthest below the build without injection code (fp32 2^7 0.899 against
# 0.951), the automatic plans built without injection code, the injection build with no fault planned (--inject 0: every
# block takes the split's body without hooks), and with one fault at five seeds (a different faulted block, position and
# stage each: the corrected block's extra work lands in a different wave). Same run, same inputs, x cuFFT.
# Usage: [LOGNS="7 12"] bash experiments/scripts/gpu_fft_fault_cost.sh OUTDIR   (JSON lines per case, table last)
set -uo pipefail
out=${1:?usage: bash experiments/scripts/gpu_fft_fault_cost.sh OUTDIR}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
gen=/tmp/ftgen-fft-faultcost
logns=${LOGNS:-7 12 13 16}
cat > "$out/fft_fault_cost.yaml" <<Y
name: fft_fault_cost
family: fft
arch: [sm_90]
precision: [fp32, fp64]
variants:
  - {protection: {scheme: abft, level: two-sided-tb}, params: {logn: [${logns// /, }]}}
  - {protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: [${logns// /, }]}}
shapes:
  - {n: 4096, batch: 16384}
Y
ft generate "$out/fft_fault_cost.yaml" -o $gen > /dev/null || exit 2
ft build $gen/fft_fault_cost -j 16 --arch sm_90 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
for prec in 32 64; do
  S=""
  for lg in $logns; do S="$S${S:+,}$((1 << lg))x$(( (prec == 32 ? 1 << 26 : 1 << 25) >> lg ))"; done
  ft bench $gen/fft_fault_cost --kernels "*_f${prec}_*[!j]" --shapes $S --reps 30 --warmup 5 --json "$out/clean_fp$prec.jsonl" > /dev/null
  ft bench $gen/fft_fault_cost --kernels "*_f${prec}_*_inj" --shapes $S --inject 0 --reps 30 --warmup 5 --json "$out/inj0_fp$prec.jsonl" > /dev/null
  for seed in 1 2 3 4 5; do
    ft bench $gen/fft_fault_cost --kernels "*_f${prec}_*_inj" --shapes $S --inject 1 --seed $seed --reps 30 --warmup 5 \
      --json "$out/inj1_seed${seed}_fp$prec.jsonl" > /dev/null
  done
done
python3 - "$out" <<'P'
import glob, json, os, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    case = os.path.basename(path).rsplit("_fp", 1)[0]
    for line in open(path):
        r = json.loads(line)
        if "provenance" in r or not r.get("kernel") or "skipped" in r or r.get("speedup_vs_ref") is None:
            continue  # (rows of the shapes of the other sizes)
        if case == "clean" and r["kernel"].endswith("_inj"):
            continue
        key = (r["precision"], r["shape"]["n"])
        ok = r.get("ok") and (case != "clean" or r.get("detected", 0) == 0)
        rows.setdefault(key, {})[case] = f"{r.get('speedup_vs_ref', float('nan')):.3f}{'' if ok else '!'}" + (
            f"/{r.get('corrected', 0)}{'r' if r.get('recomputed') else ''}" if case.startswith("inj1") else "")
cases = ["clean", "inj0"] + [f"inj1_seed{s}" for s in range(1, 6)]
print("x cuFFT: build without injection code, injection build without a fault, with one fault (seed 1..5; /corrected, r: recomputed)")
print(f"{'':>12}" + "".join(f"{c:>14}" for c in cases))
for (prec, n), v in sorted(rows.items()):
    print(f"{prec} 2^{n.bit_length() - 1:<4}" + "".join(f"{v.get(c, '-'):>14}" for c in cases))
P
