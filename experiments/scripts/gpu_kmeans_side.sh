#!/usr/bin/env bash
# The protected cutlass90 kmeans iteration's side kernels, A/B in one call on one GPU (experiments/specs/
# kmeans_side_kernels.yaml): A the working tree, B the tree in DIR_B (ftgen/ and templates/ of another commit), both
# built at once; then
#   - REPS rounds (default 3) of A, B, A, B, ... at the four flash-kmeans anchors, the variants beside their twins, no
#     faults, no flash-kmeans (OUT/ab_<V>_<round>.jsonl);
#   - X's pass probe (experiments/scripts/kmeans_xstats_probe.cu: the product's pass at four and three blocks per SM,
#     without its column sums, with them in fp32 pairs) at 2^20 x 8 / 32 / 128 (OUT/xstats.{jsonl,txt});
#   - A with one fault per launch at the spec's seven shapes, every variant (the detect variant's every detection
#     through the recomputation; OUT/shapes_inject.jsonl);
#   - A's campaigns: the update site (tf32 128x224) and the accumulator site of the detect variant, TRIALS (default
#     300) clean + TRIALS single faults per distribution (OUT/campaign_*.jsonl);
#   - the A/B table last (ab_table.py).
# Only the ws-coop variants are built (BUILD: another glob); each step after the builds within LANE_SECONDS (570).
# PROFILE (a glob of one variant): Nsight Compute's per-kernel times of each version's at 2^20 x 8 / 32 x 128 after the
# rounds (OUT/ncu_<V>/); CAMPAIGNS=0 leaves the campaigns out. DIR_B may name several trees, colon-separated (B, C, ...).
#   bash experiments/scripts/gpu_kmeans_side.sh OUT DIR_B   (carry DIR_B and .whl; FTGEN_GIT_SHA / FTGEN_GIT_DIRTY)
set -u
out=${1:?usage: gpu_kmeans_side.sh OUT DIR_B}; dirb=${2:?DIR_B}
mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_provenance.sh
ls .whl/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
gpu_start "$out"
T0=$SECONDS
t() { echo "[$((SECONDS - T0)) s] $*"; }
spec=experiments/specs/kmeans_side_kernels.yaml
proj=$(spec_project "$spec")
anchors=1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024
shapes=$(python3 -c "import yaml; print(','.join('{samples}x{dims}x{clusters}'.format(**s) for s in yaml.safe_load(open('$spec'))['shapes']))")
(nvcc -std=c++17 -O3 -arch=sm_90a experiments/scripts/kmeans_xstats_probe.cu -o /tmp/xs > "$out/xstats_build.txt" 2>&1) &
probe=$!
build_versions "$out" "$dirb" "$spec" "${BUILD:-*ws-coop*}" || exit 3
wait $probe
t built
# each later step within what is left of LANE_SECONDS (default 570)
cap() { local l=$((${LANE_SECONDS:-570} - SECONDS + T0)); echo $(( l < $1 ? l : $1 )); }
FTGEN_BENCH_REFS=none bench_rounds "$out" "$proj" "${BUILD:-*ws-coop*}" "$anchors" --inject 0
t rounds
if [ -n "${PROFILE:-}" ]; then  # Nsight Compute's per-kernel times of each version's PROFILE variant (a glob) at 2^20 x 8 / 32 x 128
  for v in "${versions[@]}"; do
    exe=$(ls /tmp/ab-$v/$proj/bin/$PROFILE | head -n 1); mkdir -p "$out/ncu_$v"
    for sh in 1048576x8x128 1048576x32x128; do  # (gpu_common.sh's ncu_times: caches kept, one launch)
      FTGEN_CACHE_DIR=/tmp/ab-cache-$v timeout "$(cap 60)" ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
        --print-units base -c 45 "$exe" --shapes $sh --reps 1 --warmup 0 > "$out/ncu_$v/ncu_$sh.csv" 2> "$out/ncu_$v/ncu_$sh.err"
      python3 experiments/scripts/ncu_summary.py "$out/ncu_$v/ncu_$sh.csv" --sequence 45 >> "$out/ncu_$v/summary.txt"
    done
  done
  t profile
fi
REPS=30 timeout "$(cap 40)" /tmp/xs 1048576x8 1048576x32 1048576x128 > "$out/xstats.jsonl" 2> "$out/xstats.txt"
t probe
export FTGEN_CACHE_DIR=/tmp/ab-cache-A
FTGEN_BENCH_REFS=none timeout "$(cap 90)" python3 -m ftgen.cli bench /tmp/ab-A/$proj --kernels "${BUILD:-*ws-coop*}" --shapes "$shapes" --inject 1 --reps 3 --warmup 1 \
  --json "$out/shapes_inject.jsonl" > "$out/shapes_inject.txt" 2>&1
echo "inject rc $?"; t inject
[ "${CAMPAIGNS:-1}" = 0 ] || {
timeout "$(cap 100)" python3 -m ftgen.cli campaign "$spec" -o /tmp/ab-A --kernels '*tf32_abft-tb_cutlass90_128x224*' --site update \
  --trials "${TRIALS:-300}" --seed 9 --shape 65536x128x256 --json "$out/campaign_update.jsonl" > "$out/campaign_update.txt" 2>&1
tail -n 4 "$out/campaign_update.txt"; t campaign update
timeout "$(cap 90)" python3 -m ftgen.cli campaign "$spec" -o /tmp/ab-A --kernels '*abft-tb-detect*' --trials "${TRIALS:-300}" \
  --seed 7 --shape 16384x64x256 --json "$out/campaign_detect.jsonl" > "$out/campaign_detect.txt" 2>&1
tail -n 4 "$out/campaign_detect.txt"; t campaign detect
}
python3 - "$out/shapes_inject.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if "kernel" in r]
bad = [r for r in rows if not r.get("ok")]
print(f"with one fault per launch: {len(rows) - len(bad)}/{len(rows)} rows verified;",
      "injected", sum(r.get("injected") or 0 for r in rows), "corrected", sum(r.get("corrected") or 0 for r in rows),
      "recomputed", sum(r.get("recomputed") or 0 for r in rows))
for r in bad: print("  FAILED", r["kernel"], r["shape"])
PY
grep -h '"form"' "$out/xstats.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r['form'].startswith(('product', 'v2 norms U4', 'norms (twin)', 'read floor')): print(f\"{r['shape']:>12} {r['form']:<28} {r['us']:8.1f} us\")"
for v in "${versions[@]}"; do
  [ -f "$out/ncu_$v/summary.txt" ] && { echo "== $v"; grep -E "^  #" "$out/ncu_$v/summary.txt" | grep -v -E "ftkmeans_bench|fill_|ftgen::compare" | head -n 40; }
done
python3 experiments/scripts/ab_table.py "$out" --shape-keys samples,dims,clusters "${versions[@]}"
