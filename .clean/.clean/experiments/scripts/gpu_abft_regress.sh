#!/usr/bin/env bash
# A regression check of the tf32x3 threadblock ABFT after a change to the shared CUTLASS machinery, one short call on one
# GPU: specs/gemm/demo.yaml (sm80 kernels, ref_checksums: concurrent) and specs/gemm/cutlass90_abft.yaml (the same check
# around the sm90 GEMM) built and benched with 16 faults per launch at 4096^3 and the odd shapes (fewer reps: a
# verification, not figures of record). A short table last; JSON lines under OUT.
#   bash experiments/scripts/gpu_abft_regress.sh OUT   (wheels in .whl/ installed to /tmp/site)
set -u
out=${1:?usage: gpu_abft_regress.sh OUT}; mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
python3 -m ftgen.cli generate specs/gemm/demo.yaml -o generated/rg > /dev/null
python3 -m ftgen.cli generate specs/gemm/cutlass90_abft.yaml -o generated/rg > /dev/null
ft 150 build generated/rg/gemm_demo -j 8 > "$out/build_demo.txt" 2>&1 &
ft 150 build generated/rg/gemm_cutlass90_abft -j 8 --kernels '*' > "$out/build_c90.txt" 2>&1; wait
tail -qn 1 "$out"/build_*.txt; t built
ft 60 bench generated/rg/gemm_demo --inject 16 --shapes 4096x4096x4096,1000x1234x777,17x4096x33 --reps 5 --warmup 2 \
  --json "$out/demo_inject16.jsonl" > "$out/demo.txt" 2>&1; t demo
ft 60 bench generated/rg/gemm_cutlass90_abft --inject 16 --shapes 4096x4096x4096,1000x1234x777,17x4096x33 --reps 5 --warmup 2 \
  --json "$out/c90_inject16.jsonl" > "$out/c90.txt" 2>&1; t c90
python3 - "$out" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    for l in open(f):
        r = json.loads(l)
        if "kernel" in r and "shape" in r:
            print(f.rsplit("/", 1)[1][:5], r["kernel"][-40:], "x".join(str(v) for v in r["shape"].values()), r.get("speedup_vs_ref"),
                  r.get("x_unprot"), r.get("ok"), r.get("detected"), r.get("corrected"), r.get("max_score_clean"))
PY
