#!/usr/bin/env bash
# The kmeans initial centroids on one GPU, in one call (<= 9 minutes): experiments/specs/kmeans_init.yaml built (-j 16);
# per method (METHODS, default: random kmeans++ kmeans++-sample) every variant with the Lloyd loop (10 iterations
# against the fp64 loop) from the kernel's C0 at small shapes (the fused variant at dims <= 32 only), fp64 also on
# Gaussian blobs (tf32's loop misses 1e-4 there whatever the start: docs/kmeans.md), clusters = samples in one
# iteration; each C0 checked against the host reference; then the choice's time and its inertia (the first
# iteration's, from C0) at two anchors (2^20 x 128 x 1024, 2^20 x 8 x 128) on the cutlass90 variant, i.i.d. data and
# Gaussian blobs. Every row into OUT/init.jsonl, the logs into OUT/log.txt; a short table last.
#   bash experiments/scripts/gpu_kmeans_init.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
#   METHODS='kmeans++-sample kmeans++' bash experiments/scripts/gpu_kmeans_init.sh OUT
set -u
out=${1:?usage: gpu_kmeans_init.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/kmeans_init.yaml; gen=generated/kinit; proj=$gen/kmeans_init
gen_build $spec $gen $proj
parts=$(mktemp -d)
b() { local tag=$1 s=$2; shift 2; FTGEN_BENCH_REFS=none ft "$s" bench $proj --reps 3 --warmup 1 --json "$parts/$tag.jsonl" "$@" >> "$out/log.txt" 2>&1; }
for m in ${METHODS:-random kmeans++ kmeans++-sample}; do
  export FTGEN_KMEANS_INIT=$m
  FTGEN_KMEANS_ITERS=10 b "$m-loop" 60 --kernels '*_w*x*' --shapes 65536x32x128,20011x100x300,4099x17x1
  FTGEN_KMEANS_ITERS=10 b "$m-loop-c90" 40 --kernels '*cutlass90*' --shapes 65536x32x128,20011x100x300,4099x17x1
  FTGEN_KMEANS_ITERS=10 b "$m-loop-fused" 40 --kernels '*fused*' --shapes 65536x32x128,4099x17x1
  FTGEN_KMEANS_ITERS=10 FTGEN_KMEANS_DATA=blobs b "$m-blobs" 40 --kernels '*f64*' --shapes 65536x32x128
  b "$m-all" 60 --kernels '*_w*x*' --shapes 5000x8x5000
  b "$m-anchors" 90 --kernels '*cutlass90*' --shapes 1048576x128x1024,1048576x8x128
  FTGEN_KMEANS_DATA=blobs b "$m-anchors-blobs" 60 --kernels '*cutlass90*' --shapes 1048576x128x1024,1048576x8x128
  t "$m"
done
unset FTGEN_KMEANS_INIT
for f in "$parts"/*.jsonl; do cat "$f"; done > "$out/init.jsonl"
python3 - "$out/init.jsonl" <<'P'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "kernel" not in r or "shape" not in r:
        continue
    s = r["shape"]
    print(r["kernel"][7:42], "x".join(str(s[k]) for k in ("samples", "dims", "clusters")), r.get("data"), r.get("init"), "init_ms", r.get("init_ms"),
          r.get("init_check"), "inertia", r.get("inertia"), "lloyd", r.get("lloyd_inertia_rel"), "ok", r.get("ok"),
          "" if r.get("ok") else str(r.get("error"))[:120])
P
