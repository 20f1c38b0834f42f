#!/usr/bin/env bash
# The kmeans Lloyd loop against the fp64 loop on one GPU, in one call (<= 9 minutes): experiments/specs/kmeans_lloyd.yaml
# built (-j 16); every variant on i.i.d. (normal) data and Gaussian blobs, from the bench's C0 (every clusters-th
# sample) and from k-means++ (the kernel's choice, checked against the host reference): 10 iterations compared
# iteration by iteration, then both loops to convergence (FTGEN_KMEANS_TOL=LLOYD_TOL, default 1e-8, at most 300
# iterations; the bar: iteration counts within one, final inertias within 1e-4). Shapes 65536x32x128 and
# 100003x29x300 (the fused variant's dims <= 32). Rows into OUT/lloyd.jsonl, logs into OUT/log.txt; a short table last.
#   bash experiments/scripts/gpu_kmeans_lloyd.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git; SPEC: another spec,
#   e.g. experiments/specs/kmeans_refine.yaml)
set -u
out=${1:?usage: gpu_kmeans_lloyd.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-experiments/specs/kmeans_lloyd.yaml}; gen=generated/klloyd; proj=$gen/$(sed -n 's/^name: *//p' "$spec")
gen_build $spec $gen $proj
parts=$(mktemp -d)
b() { local tag=$1; shift; FTGEN_BENCH_REFS=none ft 120 bench $proj --shapes 65536x32x128,100003x29x300 --reps 1 --warmup 1 \
        --json "$parts/$tag.jsonl" "$@" >> "$out/log.txt" 2>&1; echo "$tag rc $?"; }
for init in strided kmeans++; do
  for data in normal blobs; do
    export FTGEN_KMEANS_INIT=$init FTGEN_KMEANS_DATA=$data
    FTGEN_KMEANS_ITERS=10 b "$init-$data-10"
    FTGEN_KMEANS_ITERS=300 FTGEN_KMEANS_TOL=${LLOYD_TOL:-1e-8} b "$init-$data-conv"
    t "$init $data"
  done
done
for f in "$parts"/*.jsonl; do python3 -c "
import json, sys
tag = sys.argv[1].rsplit('/', 1)[1][:-6]
for line in open(sys.argv[1]):
    r = json.loads(line); r['lloyd_run'] = tag; print(json.dumps(r))" "$f"; done > "$out/lloyd.jsonl"
python3 - "$out/lloyd.jsonl" <<'P'
import json, sys
print(f"{'run':24} {'kernel':44} {'shape':14} {'ok':5} {'iters':>9} {'per-iter':>9} {'final':>9} lloyd_ok")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "lloyd_iters" not in r:
        continue
    s = "x".join(str(v) for v in r["shape"].values())
    it = f"{r['lloyd_iters']}/{r.get('lloyd_iters_ref', '-')}"
    fin = r.get("lloyd_final_inertia_rel")
    print(f"{r['lloyd_run']:24} {r['kernel'][7:51]:44} {s:14} {str(r.get('ok')):5} {it:>9} {r['lloyd_inertia_rel']:9.2e} "
          f"{'' if fin is None else format(fin, '9.2e'):>9} {r.get('lloyd_ok')}")
P
