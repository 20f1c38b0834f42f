#!/usr/bin/env bash
# Where the fp64 threadblock ABFT spends its time, one call on one H200: specs/gemm/cutlass_fp64_abft.yaml built, the
# inject builds (strips of 128, 64, 32 columns) benched with 16 faults at 4096^3 and 8192^3 with the pre-passes beside
# the GEMM at low priority, at high priority and after it on one stream (FTGEN_ABFT_SIDE=low|high|serial), then the
# per-kernel device time of each strip width at 4096^3 read with Nsight Compute (launches serialized: each kernel's own
# cost). A short table last; JSON lines and the CSVs under OUT.
#   bash experiments/scripts/gpu_fp64_abft_profile.sh OUT   (wheels in .whl/ installed to /tmp/site; SIDES: the modes, default "low high serial")
set -u
out=${1:?usage: gpu_fp64_abft_profile.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
spec=specs/gemm/cutlass_fp64_abft.yaml; gen=generated/f64prof; proj=$gen/gemm_cutlass_fp64_abft
python3 -m ftgen.cli generate $spec -o $gen > /dev/null
ft 300 build $proj -j 16 --kernels '*_rr_conc_cs*_inj' > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
for side in ${SIDES-low high serial}; do
  FTGEN_ABFT_SIDE=$side timeout 150 python3 -m ftgen.cli bench $proj --kernels '*abft-tb-i*_rr_conc_cs*_inj' --inject 16 \
    --shapes 4096x4096x4096,8192x8192x8192 --reps 10 --warmup 3 --json "$out/side_$side.jsonl" > "$out/side_$side.txt" 2>&1
done
for e in $proj/bin/gemm_f64_abft-tb-i*_rr_conc_cs*_inj; do
  tag=$(basename "$e" | grep -o 'cs[0-9]*')
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base -c 300 \
    "$e" --shapes 4096x4096x4096 --reps 1 --warmup 1 --inject 16 > "$out/ncu_$tag.csv" 2> "$out/ncu_$tag.err"
  python3 experiments/scripts/ncu_summary.py "$out/ncu_$tag.csv"
done
python3 - "$out" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/side_*.jsonl")):
    for l in open(f):
        r = json.loads(l)
        if "kernel" in r and "shape" in r:
            print(f.rsplit("/", 1)[1], r["kernel"][-12:], r["shape"]["m"], r.get("speedup_vs_ref"), r.get("x_unprot"), r.get("ok"))
PY
