#!/usr/bin/env bash
# The recomputation launch of the wgmma attention kernels: an A/B of the working tree's attention_wgmma.cuh against
# DIR_B's (gpu_attention_ab.sh: efta fp16 non-causal, d64 and d128, each beside its twin, clean, three rounds, at short
# and long lengths), then the working tree's kernels with 16 faults a launch, the recomputation run by the default
# wave of blocks and by one block taking every listed entry in turn (FTGEN_ATTENTION_REDO_BLOCKS=1), every row verified.
#   bash experiments/scripts/gpu_attention_redo.sh OUT DIR_B[:DIR_C...]   (carry ab and .whl; DIR_B: e.g. ab/b, the old
#   header; more versions colon-separated, as gpu_attention_ab.sh takes them)
set -uo pipefail
out=${1:?output dir}; dir_b=${2:?directory with the B header}
mkdir -p "$out"; out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.." || exit 1
spec=experiments/specs/attention_wgmma_bench.yaml
bash experiments/scripts/gpu_attention_ab.sh "$out/ab" "$dir_b" "$spec" '*_nc_*' \
  "${AB_SHAPES:-32x16x512,32x32x512,4x16x4096,4x32x4096,1x8x4097}" | tail -n 20
export PYTHONPATH="$PWD:/tmp/site"
proj=$(ls -d /tmp/ab-A/*/ | head -n 1)
for nb in 0 1; do
  FTGEN_ATTENTION_REDO_BLOCKS=$nb FTGEN_CACHE_DIR=/tmp/ab-cache-A FTGEN_BENCH_REFS=none timeout 200 python3 -m ftgen.cli bench \
    "$proj" --kernels '*_nc_*' --shapes 4x16x1024,1x8x4097,2x4x777,1x32x512 --inject 16 --reps 3 --warmup 1 \
    --json "$out/redo_blocks$nb.jsonl" > "$out/redo_blocks$nb.txt" 2>&1
  echo "redo blocks $nb: rc $?"
  python3 - "$out/redo_blocks$nb.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "kernel" not in r:
        continue
    print(f"{r['kernel'][:44]:44s} {'x'.join(str(v) for v in r['shape'].values()):18s} ok={r.get('ok')} "
          f"ms={r['ms']['median']:.4f} x_unprot={r.get('x_unprot')} injected={r.get('injected')} "
          f"detected={r.get('detected')} corrected={r.get('corrected')} recomputed={r.get('recomputed')} "
          f"err/tol={r.get('max_rel_err', 0) / max(r.get('tolerance') or 1, 1e-30):.3f}")
PY
done
# Nsight Compute's device time of the first launches of the encoding, the kernel and the recomputation (by name) of the efta
# executables of A and B at a short and a long length, one launch each
NCU_SHAPES=${NCU_SHAPES:-32x32x512x512 4x32x4096x4096}
for v in A B; do
  for exe in /tmp/ab-$v/*/bin/*abft*; do
    [ -x "$exe" ] || continue
    echo "== $v $(basename "$exe")"
    for s in $NCU_SHAPES; do
      timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
        -k regex:'^(encode_kernel|kernel|redo_kernel)$' -c 8 "$exe" --shapes "$s" --reps 1 --warmup 0 > "$out/ncu_${v}_$(basename "$exe")_$s.csv" 2> /dev/null
      echo "-- $s"; python3 experiments/scripts/ncu_summary.py "$out/ncu_${v}_$(basename "$exe")_$s.csv" --sequence 8 | tail -n 9
    done
  done
done
