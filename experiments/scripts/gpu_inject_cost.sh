#!/usr/bin/env bash
# What compiling fault injection in costs the protected kernels, one call on one GPU: the kmeans and attention kernels
# of the figures of record built with and without `inject` (experiments/specs/inject_cost_{kmeans,attention}.yaml),
# each benched beside its unprotected twin without faults, in ROUNDS rounds (default 2; no vendor references); then
# the tf32x3 ABFT GEMM of specs/gemm/cutlass90_abft.yaml with 16 faults per launch at its shapes (every row verified).
# PARTS (default "kmeans attention gemm") picks the parts; `gemm16`: the bf16 / fp16 ABFT GEMM of
# experiments/specs/inject_cost_gemm16.yaml with and without `inject`, beside its twin and cuBLAS without faults in ROUNDS
# rounds, then its injecting kernels with 16 faults a launch.
# The table (median ms and x the twin per kernel and shape) last; JSON lines under OUT.
#   bash experiments/scripts/gpu_inject_cost.sh OUT   (carry .whl; FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_inject_cost.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
gen=generated/inject_cost; parts=" ${PARTS:-kmeans attention gemm} "; has() { [[ $parts == *" $1 "* ]]; }
km=$gen/inject_cost_kmeans at=$gen/inject_cost_attention gm=$gen/gemm_cutlass90_abft g16=$gen/inject_cost_gemm16
declare -A spec=([kmeans]=experiments/specs/inject_cost_kmeans.yaml [attention]=experiments/specs/inject_cost_attention.yaml
                 [gemm]=specs/gemm/cutlass90_abft.yaml [gemm16]=experiments/specs/inject_cost_gemm16.yaml)
declare -A proj=([kmeans]=$km [attention]=$at [gemm]=$gm [gemm16]=$g16)
for p in kmeans attention gemm gemm16; do
  has $p || continue
  python3 -m ftgen.cli generate ${spec[$p]} -o $gen > /dev/null 2>&1 || echo "generate ${spec[$p]} failed"
  (ft 330 build ${proj[$p]} -j ${JOBS:-5} > "$out/build_$p.txt" 2>&1; echo "build $p rc $?") &
done
wait; t built
for r in $(seq 1 "${ROUNDS:-2}"); do
  for p in kmeans attention; do
    has $p && { FTGEN_BENCH_REFS=none ft 60 bench ${proj[$p]} --reps 20 --warmup 5 --json "$out/${p}_$r.jsonl" > "$out/${p}_$r.txt" 2>&1; t $p round $r; }
  done
  has gemm16 && { ft 60 bench $g16 --reps 30 --warmup 5 --json "$out/gemm16_$r.jsonl" > "$out/gemm16_$r.txt" 2>&1; t gemm16 round $r; }
done
if has gemm16; then
  ft 60 bench $g16 --inject 16 --kernels '*_inj' --reps 30 --warmup 5 --json "$out/gemm16_inject16.jsonl" > "$out/gemm16_inject16.txt" 2>&1
  t gemm16 inject 16
fi
if has gemm; then
  ft 120 bench $gm --inject 16 --reps 20 --warmup 5 --json "$out/gemm_inject16.jsonl" > "$out/gemm_inject16.txt" 2>&1; t gemm
  tail -n 12 "$out/gemm_inject16.txt"
fi
python3 - "$out" <<'PY'
import glob, json, statistics, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        if "kernel" not in r or not isinstance(r.get("ms"), dict):
            continue
        key = (r["kernel"], "x".join(str(v) for v in r["shape"].values()))
        ms = r["ms"]["median"]
        faulty = "inject16" in f
        rows.setdefault(key + (faulty,), []).append((ms, r.get("x_unprot"), r.get("ok"), r.get("speedup_vs_ref"),
                                                     r.get("faults_applied", r.get("injected", 0)), r.get("corrected", 0)))
med = lambda xs: statistics.median(xs) if xs else float("nan")
print(f"{'kernel':72} {'shape':16} faults {'ms':>8} {'x twin':>7} {'x ref':>6} n ok  inj/corr")
for (k, s, faulty), v in sorted(rows.items()):
    print(f"{k:72} {s:16} {'16' if faulty else '0':>6} {med([x[0] for x in v]):8.3f} {med([x[1] for x in v if x[1]]):7.3f}"
          f" {med([x[3] for x in v if x[3]]):6.3f} {len(v)} {all(x[2] for x in v)!s:5} {sum(x[4] or 0 for x in v)}/{sum(x[5] or 0 for x in v)}")
PY
