#!/usr/bin/env bash
# Programmatic dependent launch in the kmeans Lloyd iteration, one call on one GPU (<= 9 minutes): the PDL probe
# (experiments/scripts/pdl_probe.cu: a chain of small kernels with and without dependent launches), then
# experiments/specs/kmeans_pdl.yaml built once (-j 16) and benched at the flash-kmeans anchors in ROUNDS rounds (default
# 3), each round with FTGEN_PDL=0 (ordinary launches) and then without it (dependent launches), the twin and the
# cuBLAS-based iteration alternated in each executable; then one round with one fault per launch and one with the
# flash-kmeans driver (dependent launches). A table last (median ms and x twin per mode); JSON lines under OUT.
#   bash experiments/scripts/gpu_kmeans_pdl.sh OUT   (carry .whl; FTGEN_GIT_SHA / FTGEN_GIT_DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_kmeans_pdl.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I templates/common experiments/scripts/pdl_probe.cu -o /tmp/pdl_probe \
  && /tmp/pdl_probe | tee "$out/pdl_probe.txt"
t probe
spec=experiments/specs/kmeans_pdl.yaml; gen=generated/kpdl; proj=$gen/kmeans_pdl
gen_build $spec $gen $proj
anchors=1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024
for r in $(seq 1 ${ROUNDS:-3}); do
  for mode in 0 1; do
    if [ $mode = 0 ]; then export FTGEN_PDL=0; else unset FTGEN_PDL; fi
    FTGEN_BENCH_REFS=none ft 70 bench $proj --shapes $anchors --reps 20 --warmup 5 --json "$out/pdl${mode}_r$r.jsonl" \
      > "$out/pdl${mode}_r$r.txt" 2>&1
    echo "round $r pdl $mode rc $?"
  done
  t round $r
done
unset FTGEN_PDL
FTGEN_BENCH_REFS=none ft 80 bench $proj --shapes $anchors --reps 10 --warmup 3 --inject 1 --json "$out/pdl1_inject.jsonl" \
  > "$out/pdl1_inject.txt" 2>&1; echo "inject rc $?"; t inject
ft 150 bench $proj --shapes $anchors --reps 20 --warmup 5 --json "$out/pdl1_flash.jsonl" > "$out/pdl1_flash.txt" 2>&1
echo "flash rc $?"; t flash
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "pdl*_r*.jsonl"))):
    mode = os.path.basename(f)[3]
    for line in open(f):
        r = json.loads(line)
        if "kernel" not in r or not isinstance(r.get("ms"), dict):
            continue
        s = r["shape"]
        key = (r["kernel"].split("_tf32_")[1][:32], f"{s['dims']}x{s['clusters']}")
        rows.setdefault(key, {}).setdefault(mode, []).append((r["ms"]["median"], r.get("x_unprot"), r.get("ok")))
print(f"{'variant':34} {'shape':9} {'ms ordinary':>22} {'ms dependent':>22} {'x twin ord':>10} {'x twin dep':>10} ok")
for (k, s), m in sorted(rows.items()):
    def f(v):
        return " ".join(f"{x[0]:.3f}" for x in v)
    def tw(v):
        xs = [x[1] for x in v if isinstance(x[1], (int, float))]
        return f"{statistics.median(xs):.3f}" if xs else "-"
    ok = all(x[2] is True for v in m.values() for x in v)
    print(f"{k:34} {s:9} {f(m.get('0', [])):>22} {f(m.get('1', [])):>22} {tw(m.get('0', [])):>10} {tw(m.get('1', [])):>10} {ok}")
for name in ("pdl1_inject.jsonl", "pdl1_flash.jsonl"):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        continue
    for line in open(p):
        r = json.loads(line)
        if "kernel" in r and "shape" in r:
            s = r["shape"]
            sv = r.get("speedup_vs_refs") or {}
            print(name[5:-6], r["kernel"].split("_tf32_")[1][:32], f"{s['dims']}x{s['clusters']}", r.get("ok"),
                  (r.get("ms") or {}).get("median"), r.get("x_unprot"), {k: round(v, 3) for k, v in sv.items()},
                  r.get("detected"), r.get("faults_applied"), r.get("error", ""))
PY
