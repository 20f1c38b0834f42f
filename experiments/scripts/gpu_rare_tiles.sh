#!/usr/bin/env bash
# The cutlass90 values the figures of record do not use (experiments/specs/{gemm,kmeans}_cutlass90_rare_tiles.yaml:
# narrow and wide tiles, k-tiles of 16, 64-row ping-pong in clusters of two, tf32x3 on 64- and 96-wide tiles), built
# (both projects at once, -j 8 each) and benched at their odd shapes, every row verified; the kmeans project clean and
# with one fault per launch. One call on one GPU; a table last, JSON lines and logs.tgz under OUT.
#   bash experiments/scripts/gpu_rare_tiles.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_rare_tiles.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout)
gen=generated/rare
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
for f in gemm kmeans; do
  python3 -m ftgen.cli generate experiments/specs/${f}_cutlass90_rare_tiles.yaml -o $gen > "$out/generate_$f.txt" 2>&1
  echo "generate $f rc $?"
done
ft 400 build $gen/gemm_cutlass90_rare_tiles -j 8 > "$out/build_gemm.txt" 2>&1 &
ft 400 build $gen/kmeans_cutlass90_rare_tiles -j 8 > "$out/build_kmeans.txt" 2>&1
echo "build kmeans rc $?"; wait; echo "build gemm done"; tail -n 1 "$out/build_gemm.txt" "$out/build_kmeans.txt"; t built
FTGEN_BENCH_REFS=none ft 60 bench $gen/gemm_cutlass90_rare_tiles --reps 5 --warmup 2 --json "$out/gemm.jsonl" > "$out/gemm.txt" 2>&1
echo "bench gemm rc $?"; t gemm
FTGEN_BENCH_REFS=none ft 60 bench $gen/kmeans_cutlass90_rare_tiles --reps 5 --warmup 2 --json "$out/kmeans.jsonl" > "$out/kmeans.txt" 2>&1
echo "bench kmeans rc $?"; t kmeans
FTGEN_BENCH_REFS=none ft 60 bench $gen/kmeans_cutlass90_rare_tiles --reps 5 --warmup 2 --inject 1 --json "$out/kmeans_inject.jsonl" > "$out/kmeans_inject.txt" 2>&1
echo "bench kmeans --inject 1 rc $?"; t kmeans inject
python3 - "$out" <<'PY'
import json, pathlib, sys
n = ok = 0
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl")):
    for line in f.read_text().splitlines():
        r = json.loads(line)
        if "shape" not in r or "kernel" not in r:
            continue
        n += 1; ok += bool(r.get("ok"))
        s = "x".join(str(v) for v in r["shape"].values())
        print(f.stem, r["kernel"], s, round(r["ms"]["median"], 4), "ok", r.get("ok"), "det", r.get("detected", ""), r.get("corrected", ""))
print(f"rows verified: {ok}/{n}")
PY
# at most 8 files come back from a device call: the logs go back as one archive
(cd "$out" && tar czf logs.tgz generate_*.txt build_*.txt gemm.txt kmeans.txt kmeans_inject.txt && rm -f generate_*.txt build_*.txt gemm.txt kmeans.txt kmeans_inject.txt)
