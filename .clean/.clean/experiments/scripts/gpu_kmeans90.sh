#!/usr/bin/env bash
# kmeans on the cutlass90 backend (specs/kmeans/cutlass90.yaml: the assign step as a CUTLASS 3.x sm90 GEMM with the arg-min
# in its epilogue) beside the mma backend's unprotected demo variant, one call on one H200 (<= 9 minutes): both built
# (-j 16), benched at the four flash-kmeans anchors (refs: the cuBLAS-based Lloyd iteration alternated in the executable,
# flash-kmeans alternated in its driver on the same data; torch and flash-kmeans from .whl/), the cutlass90 spec's own
# shapes (awkward dims through the padded operands), and a 10-iteration Lloyd loop against the fp64 loop (i.i.d. and
# Gaussian blobs). A short table last; JSON lines under OUT.
#   bash experiments/scripts/gpu_kmeans90.sh OUT   (FTGEN_GIT_SHA/DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_kmeans90.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build
gen=generated/k90; c90=$gen/kmeans_cutlass90; demo=$gen/kmeans_demo
python3 -m ftgen.cli generate specs/kmeans/demo.yaml -o $gen > /dev/null 2>&1
ft 300 build $demo -j 8 --kernels 'kmeans_tf32_none_*' > "$out/build_demo.txt" 2>&1 &
gen_build specs/kmeans/cutlass90.yaml $gen $c90
wait; tail -n 1 "$out/build_demo.txt"
python3 -c "import torch, triton, flash_kmeans as f; print('torch', torch.__version__, 'triton', triton.__version__, 'flash-kmeans', f.__version__)" 2>&1 | tail -n 1
anchors=1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024
ft 200 bench $c90 --shapes $anchors --reps 50 --warmup 10 --json "$out/c90_anchors.jsonl" > "$out/c90_anchors.txt" 2>&1
t c90 anchors
ft 90 bench $demo --kernels 'kmeans_tf32_none_*' --shapes $anchors --reps 50 --warmup 10 --json "$out/mma_anchors.jsonl" > "$out/mma_anchors.txt" 2>&1
t mma anchors
ft 60 bench $c90 --reps 10 --warmup 3 --json "$out/c90_shapes.jsonl" > "$out/c90_shapes.txt" 2>&1
t spec shapes
for data in dist blobs; do
  FTGEN_KMEANS_ITERS=10 FTGEN_KMEANS_DATA=$data ft 60 bench $c90 --kernels '*128x128x32*' --shapes 65536x32x128,100003x100x1000 \
    --reps 3 --warmup 1 --json "$out/c90_lloyd_$data.jsonl" > "$out/c90_lloyd_$data.txt" 2>&1
done
t lloyd
python3 - "$out" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl")):
    for line in f.read_text().splitlines():
        r = json.loads(line)
        if "shape" not in r or "kernel" not in r:
            continue
        s = "x".join(str(v) for v in r["shape"].values())
        x = r.get("speedup_vs_refs") or {}
        print(f.stem, r["kernel"][7:], s, round(r["ms"]["median"], 4), "flash", round(x.get("flash-kmeans", float("nan")), 3),
              "cublas", round(x.get("cublas-lloyd", float("nan")), 3), "ok", r.get("ok"), "agree", r.get("agreement"), "lloyd", r.get("lloyd_inertia_rel", ""), r.get("lloyd_ok", ""))
PY
