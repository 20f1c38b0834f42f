#!/usr/bin/env bash
# The kmeans cutlass90 kernel schedules (SPEC, default experiments/specs/kmeans90_schedules.yaml), one call on one H200:
# built (-j 16), every variant benched clean at the spec's shapes beside its unprotected twin and the cuBLAS-based Lloyd
# iteration (no flash-kmeans: its driver's build does not fit the call), then with one fault per launch at INJ_SHAPES.
# JSON lines under OUT; a table last (ms, x the variant's twin, verified, faults detected / corrected).
#   bash experiments/scripts/gpu_kmeans90_schedules.sh OUT   (REPS, default 20; FTGEN_GIT_SHA/DIRTY where there is no .git)
set -u
out=${1:?usage: gpu_kmeans90_schedules.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh
spec=${SPEC:-experiments/specs/kmeans90_schedules.yaml}; gen=generated/k90s
proj=$gen/$(sed -n 's/^name: *//p' "$spec")
gen_build $spec $gen $proj
FTGEN_BENCH_REFS=none ft 240 bench $proj --reps ${REPS:-20} --warmup 3 --json "$out/clean.jsonl" > "$out/clean.txt" 2>&1; t clean
FTGEN_BENCH_REFS=none ft 150 bench $proj --shapes ${INJ_SHAPES:-1048576x128x1024,65536x100x1000} --inject 1 --reps 10 --warmup 2 \
  --json "$out/inject.jsonl" > "$out/inject.txt" 2>&1; t inject
python3 - "$out" <<'PY'
import json, sys, pathlib
for f in ("clean", "inject"):
    p = pathlib.Path(sys.argv[1]) / f"{f}.jsonl"
    if not p.exists():
        continue
    for line in p.read_text().splitlines():
        r = json.loads(line)
        if "kernel" not in r:
            continue
        sh = r["shape"]
        print(f, r["kernel"].replace("kmeans_tf32_abft-tb_cutlass90_", ""), f"{sh['samples']}x{sh['dims']}x{sh['clusters']}",
              f"{r['ms']['median']:.4f}", f"twin {r['unprotected_ms']['median']:.4f}", f"x {r['x_unprot']:.3f}",
              "verified" if r.get("ok", r.get("verified")) else "NOT VERIFIED", r.get("labels_outside_band"),
              f"inj {r['injected']} det {r['detected']} corr {r['corrected']} rec {r['recomputed']}")
PY
