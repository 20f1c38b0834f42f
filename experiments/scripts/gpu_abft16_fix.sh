#!/usr/bin/env bash
# The bf16 accumulator-check ABFT's fault path, one call on one H200: experiments/specs/abft16_fix.yaml built (-j 16),
# benched with no faults and with 16 a launch (each variant, its twin and cuBLAS alternated), then Nsight Compute's
# device times of the reference GEMM, encodings, check and corrections kernels of one launch with 16 faults (B
# column-major) at 256, 1024 and 4096 rows of 4096x4096.
#   bash experiments/scripts/gpu_abft16_fix.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_abft16_fix.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-experiments/specs/abft16_fix.yaml}; gen=generated/fix; proj=$gen/$(awk '/^name:/{print $2}' $spec)
gen_build $spec $gen $proj
for inj in 0 16; do
  ft 150 bench $proj --inject $inj --reps ${REPS:-30} --warmup 5 --json "$out/bench_f$inj.jsonl" > "$out/bench_f$inj.txt" 2>&1
  echo "bench f$inj rc $?"
done
t bench
for e in $(ls $proj/bin/gemm_* | grep -v '\.' | grep '_rc_'); do
  for s in 256x4096x4096 1024x4096x4096 4096x4096x4096; do
    echo "== $(basename "$e") $s"
    NCU_KERNELS='KernelRef|abft16_' NCU_ARGS='--inject 16' ncu_times "$e" 16 $s \
      | grep '#' | awk '{n=$2; sub(/.*::/, "", n); sub(/_kernel/, "", n); t[n]=t[n] " " $3} END {for (n in t) printf "  %s:%s", n, t[n]; print ""}'
  done
done 2>&1 | tee "$out/ncu.txt"
(cd "$out" && tar czf ncu.tgz ncu_*.csv ncu_*.err && rm -f ncu_*.csv ncu_*.err)  # (the last executable's; few files come back)
t profile
python3 - "$out" <<'PY'
import json, glob, os, sys
print(f"{'variant':26} {'inj':>3} {'shape':16} {'ms':>9} {'twin':>9} {'cuBLAS':>9} {'x twin':>7} {'x cuBLAS':>8} ok  faults")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench_f*.jsonl"))):
    for line in open(f):
        r = json.loads(line)
        if "shape" not in r: continue
        s = r["shape"]; sh = "x".join(str(s[k]) for k in ("m", "n", "k"))
        name = r["precision"] + " " + r["kernel"].split("_sw1_")[-1]
        ms = (r.get("ms") or {}).get("median"); tw = (r.get("unprotected_ms") or {}).get("median"); ref = (r.get("ref") or {}).get("ms")
        print(f"{name:26} {os.path.basename(f)[7:-6]:>3} {sh:16} {ms!s:>9.9} {tw!s:>9.9} {ref!s:>9.9} {r.get('x_unprot')!s:>7.7} "
              f"{r.get('speedup_vs_ref')!s:>8.8} {r.get('ok')} {r.get('injected')}/{r.get('detected')}/{r.get('corrected')}")
PY
