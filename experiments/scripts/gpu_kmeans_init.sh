#!/usr/bin/env bash
# The kmeans initial centroids on one GPU, in one call (<= 9 minutes): experiments/specs/kmeans_init.yaml built (-j 16);
# per method (random, kmeans++) every variant at small shapes with the Lloyd loop (10 iterations against the fp64 loop,
# i.i.d. data and Gaussian blobs), each C0 checked against the host reference; then the choice's time at the anchors
# (2^20 x 128 x 1024, 2^20 x 8 x 128) on the cutlass90 variant. A short table last.
#   bash experiments/scripts/gpu_kmeans_init.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_kmeans_init.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=experiments/specs/kmeans_init.yaml; gen=generated/kinit; proj=$gen/kmeans_init
gen_build $spec $gen $proj
small=65536x32x128,20011x100x300,4099x17x1,5000x8x5000
for m in random kmeans++; do
  tag=${m//+/p}
  FTGEN_KMEANS_INIT=$m FTGEN_KMEANS_ITERS=10 FTGEN_BENCH_REFS=none ft 90 bench $proj --shapes $small --reps 3 --warmup 1 \
    --json "$out/init_${tag}_dist.jsonl" > "$out/init_${tag}_dist.txt" 2>&1
  FTGEN_KMEANS_INIT=$m FTGEN_KMEANS_ITERS=10 FTGEN_KMEANS_DATA=blobs FTGEN_BENCH_REFS=none ft 60 bench $proj --shapes 65536x32x128 --reps 3 \
    --warmup 1 --json "$out/init_${tag}_blobs.jsonl" > "$out/init_${tag}_blobs.txt" 2>&1
  FTGEN_KMEANS_INIT=$m FTGEN_BENCH_REFS=none ft 90 bench $proj --kernels '*cutlass90*' --shapes 1048576x128x1024,1048576x8x128 --reps 3 \
    --warmup 1 --json "$out/init_${tag}_anchors.jsonl" > "$out/init_${tag}_anchors.txt" 2>&1
  t "$m"
done
python3 - "$out" <<'P'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("init_*.jsonl")):
    for line in f.read_text().splitlines():
        r = json.loads(line)
        if "kernel" not in r or "shape" not in r:
            continue
        s = r["shape"]
        print(f.stem, r["kernel"][7:40], "x".join(str(s[k]) for k in ("samples", "dims", "clusters")), s.get("init"), "init_ms", s.get("init_ms"),
              s.get("init_check"), "lloyd", r.get("lloyd_inertia_rel"), "ok", r.get("ok"), r.get("error", "")[:80] if not r.get("ok") else "")
P
