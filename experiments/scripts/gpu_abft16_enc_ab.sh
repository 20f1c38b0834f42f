#!/usr/bin/env bash
# The 16-bit ABFT's encodings of a row-major B summed by rows (abft16_enc_kernel) against the thread per (k row, strip)
# they replaced, one call on one GPU: the side-work probe (gpu_abft16_side_probe.sh: both encoding kernels alternated in
# one process and checked on the host, the column-major one and cuBLAS's reference product beside them), then an A/B of
# whole trees: A the working tree, B the tree in ab/base (ftgen/ and templates/ of the commit before: `git archive BASE
# ftgen templates | tar x -C ab/base`, carried), experiments/specs/abft16_enc_rr.yaml built by both at the same time,
# REPS rounds (default 2) of A and B in turn with INJECT (default 16) faults a launch, each variant beside its twin and
# cuBLAS; the table last (ab_table.py) and every row's verification.
#   bash experiments/scripts/gpu_abft16_enc_ab.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git; .whl/ and ab/base carried)
set -u
out=${1:?usage: gpu_abft16_enc_ab.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
bash experiments/scripts/gpu_abft16_side_probe.sh "$out/probe" 2>&1 | tail -n 24
. experiments/scripts/gpu_common.sh  # (the wheels into /tmp/site; t, cap)
. experiments/scripts/gpu_provenance.sh
gpu_start "$out"
spec=experiments/specs/abft16_enc_rr.yaml; proj=abft16_enc_rr
shapes=${SHAPES:-16x4096x4096,1024x4096x4096,4096x4096x4096,8192x8192x8192,1024x11008x4096,1000x1234x777,4097x3x129,17x4096x33,1x1x1}
(FTGEN_CACHE_DIR=/tmp/ab-cache-A build_version $spec /tmp/ab-A "" -j 8 > "$out/build_A.log" 2>&1; echo "A build rc $?") &
(FTGEN_CACHE_DIR=/tmp/ab-cache-B build_version $spec /tmp/ab-B ab/base -j 8 > "$out/build_B.log" 2>&1; echo "B build rc $?") &
wait; t built
for rep in $(seq 1 "${REPS:-2}"); do
  for v in A B; do
    FTGEN_CACHE_DIR=/tmp/ab-cache-$v timeout "$(cap 120)" python3 -m ftgen.cli bench /tmp/ab-$v/$proj --shapes "$shapes" \
      --inject "${INJECT:-16}" --reps 20 --warmup 5 --json "$out/ab_${v}_$rep.jsonl" > "$out/bench_${v}_$rep.txt" 2>&1
    echo "$v round $rep rc=$?"
  done
done
t bench
python3 experiments/scripts/ab_table.py "$out" --shape-keys m,n,k A B
python3 - "$out" <<'PY'
import glob, json, os, sys
bad = rows = 0
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ab_*.jsonl"))):
    for line in open(f):
        r = json.loads(line)
        if "kernel" not in r:
            continue
        rows += 1
        if not r.get("ok") or r.get("false_alarms"):
            bad += 1
            print("NOT VERIFIED", os.path.basename(f), r["kernel"], r.get("shape"))
print(f"rows: {rows}, not verified or with a false alarm: {bad}")
PY
(cd "$out" && tar czf ab.tgz ab_*.jsonl bench_*.txt build_*.log && rm -f ab_*.jsonl bench_*.txt build_*.log)
