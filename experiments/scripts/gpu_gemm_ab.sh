#!/usr/bin/env bash
# A/B of the CUTLASS-backend GEMM headers on the device machine: the same spec built once per version, A with the
# working tree's templates, B (C, D, ...) with the tensor-core headers (cutlass_abft.cuh, cutlass_tmr.cuh) found in
# DIR_B (DIR_C, ...: a colon-separated list), then the listed kernels benched in turn (A, B, ..., A, B, ...), REPS
# rounds (default 3), INJECT (default 16) faults per launch. Usage:
#   mkdir -p ab/old && git show COMMIT:templates/gemm/cutlass_abft.cuh > ab/old/cutlass_abft.cuh   # (and cutlass_tmr.cuh)
#   bash experiments/scripts/gpu_gemm_ab.sh OUT ab/old[:ab/other...] [SPEC] [KERNELS] [SHAPES]
# Files: OUT/ab_{A,B,...}_<round>.jsonl (ftgen bench JSON lines).
set -uo pipefail
out=${1:?output dir}
dirs=${2:?directories with the headers of B, C, ... (colon-separated)}
spec=${3:-experiments/specs/gemm_abft_tc_prepass_intervals.yaml}
kernels=${4:-*prepass_inj}
shapes=${5:-4096x4096x4096,8192x8192x8192}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
proj=$(spec_project "$spec")
build_versions "$out" "$dirs" "$spec" "$kernels" || exit 3
bench_rounds "$out" "$proj" "$kernels" "$shapes" --inject "${INJECT:-16}"
# the table: per kernel and shape, each version's median x its unprotected kernel (paired) over the rounds, and
# whether every row verified without a false alarm ('!' where not)
python3 - "$out" "${versions[@]}" <<'PY'
import glob, json, re, statistics, sys
out, versions = sys.argv[1], sys.argv[2:]
cell = {}
for v in versions:
    for f in sorted(glob.glob(f"{out}/ab_{v}_*.jsonl")):
        for line in open(f):
            r = json.loads(line)
            if "kernel" not in r or "paired" not in r:
                continue
            # the kernel's name without its tiling (kept: level, layouts, reference checksums, injection)
            key = (re.sub(r"_cutlass_.*?_sw\d+", "", r["kernel"]), "x".join(str(r["shape"][d]) for d in "mnk"))
            c = cell.setdefault(key, {}).setdefault(v, {"x": [], "ok": True})
            c["x"].append(r["paired"]["x_unprotected"])
            c["ok"] &= bool(r.get("ok")) and not r.get("false_alarms")
print(f"{'kernel':46s} {'shape':16s} " + " ".join(f"{v:>8s}" for v in versions))
for (k, s), byv in sorted(cell.items()):
    parts = []
    for v in versions:
        c = byv.get(v)
        parts.append(f"{statistics.median(c['x']):7.3f}{' ' if c['ok'] else '!'}" if c else f"{'-':>8s}")
    print(f"{k:46s} {s:16s} " + " ".join(parts))
PY
