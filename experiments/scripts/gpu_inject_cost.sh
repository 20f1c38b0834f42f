#!/usr/bin/env bash
# What compiling fault injection in costs the protected kernels, one call on one GPU: the kmeans and attention kernels
# of the figures of record built with and without `inject` (experiments/specs/inject_cost_{kmeans,attention}.yaml),
# each benched beside its unprotected twin without faults, in ROUNDS rounds (default 2; no vendor references); then
# the tf32x3 ABFT GEMM of specs/gemm/cutlass90_abft.yaml with 16 faults per launch at its shapes (every row verified).
# The table (median ms and x the twin per kernel and shape) last; JSON lines under OUT.
#   bash experiments/scripts/gpu_inject_cost.sh OUT   (carry .whl; FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_inject_cost.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
gen=generated/inject_cost
for s in experiments/specs/inject_cost_kmeans.yaml experiments/specs/inject_cost_attention.yaml specs/gemm/cutlass90_abft.yaml; do
  python3 -m ftgen.cli generate $s -o $gen > /dev/null 2>&1 || echo "generate $s failed"
done
km=$gen/inject_cost_kmeans at=$gen/inject_cost_attention gm=$gen/gemm_cutlass90_abft
(ft 330 build $km -j 5 > "$out/build_kmeans.txt" 2>&1; echo "build kmeans rc $?") &
(ft 330 build $at -j 6 > "$out/build_attention.txt" 2>&1; echo "build attention rc $?") &
(ft 330 build $gm -j 5 > "$out/build_gemm.txt" 2>&1; echo "build gemm rc $?") &
wait; t built
for r in $(seq 1 "${ROUNDS:-2}"); do
  FTGEN_BENCH_REFS=none ft 60 bench $km --reps 20 --warmup 5 --json "$out/kmeans_$r.jsonl" > "$out/kmeans_$r.txt" 2>&1; t kmeans round $r
  FTGEN_BENCH_REFS=none ft 60 bench $at --reps 20 --warmup 5 --json "$out/attention_$r.jsonl" > "$out/attention_$r.txt" 2>&1; t attention round $r
done
ft 120 bench $gm --inject 16 --reps 20 --warmup 5 --json "$out/gemm_inject16.jsonl" > "$out/gemm_inject16.txt" 2>&1; t gemm
tail -n 12 "$out/gemm_inject16.txt"
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
        rows.setdefault(key, []).append((ms, r.get("x_unprot"), r.get("ok"), r.get("false_alarms", 0), r.get("injected", 0), r.get("corrected", 0)))
print(f"{'kernel':72} {'shape':22} {'ms':>8} {'x twin':>7} ok  inj/corr")
for (k, s), v in sorted(rows.items()):
    ms = statistics.median(x[0] for x in v); xu = [x[1] for x in v if x[1]]
    print(f"{k:72} {s:22} {ms:8.3f} {statistics.median(xu) if xu else float('nan'):7.3f} {all(x[2] for x in v)!s:5} {sum(x[4] for x in v)}/{sum(x[5] for x in v)}")
PY
