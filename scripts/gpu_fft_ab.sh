#!/usr/bin/env bash
# A/B of two versions of the fft core header on the device machine, in one run: the same generated
# project built twice (A: the header in ALT_DIR, B: the working tree's), then every size run with A and
# B alternately (each row verified against cuFFT and timed against it in its own process).
#
#   bash scripts/gpu_fft_ab.sh OUTDIR ALT_DIR [KERNELS]
#
# ALT_DIR holds an ftgen_fft_core.h (e.g. `git show REV:templates/fft/ftgen_fft_core.h > ALT_DIR/...`).
# KERNELS: comma-separated globs of the project's variants (default: every automatic-plan variant).
# PRECS (env): the precisions to run (default "fp32 fp64").
# Rows go to OUTDIR/ab_{A,B}_<prec>.jsonl; the table of both ratios (and B / A) is printed last and kept in
# OUTDIR/summary.txt.
set -uo pipefail
out=${1:?usage: bash scripts/gpu_fft_ab.sh OUTDIR ALT_DIR [KERNELS]}
alt=${2:?usage: bash scripts/gpu_fft_ab.sh OUTDIR ALT_DIR [KERNELS]}
kern=${3:-*_auto,*_auto_inj}
mkdir -p "$out"
out=$(cd "$out" && pwd)
alt=$(cd "$alt" && pwd)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
gen=${FTGEN_FFT_GEN:-/tmp/ftgen-fft-ab}
ft() { python3 -m ftgen.cli "$@"; }
t0=$SECONDS
log() { echo "[gpu_fft_ab $((SECONDS - t0))s] $*" >&2; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
nvcc --version | tail -1 | tee -a "$out/gpu.txt"
echo "${FTGEN_GIT_SHA:-$(git rev-parse --short HEAD 2>/dev/null)}" | tee -a "$out/gpu.txt"
sha256sum "$alt/ftgen_fft_core.h" templates/fft/ftgen_fft_core.h | tee -a "$out/gpu.txt"

cat > "$out/fft_ab.yaml" <<'EOF'
name: fft_ab
family: fft
description: scripts/gpu_fft_ab.sh -- unprotected and two-sided-tb (with injection) on the automatic plans
arch: [sm_90]
variants:
  - {precision: [fp32, fp64], protection: {scheme: none}, params: {logn: 0}}
  - {precision: [fp32, fp64], protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 0}}
shapes:
  - {n: 4096, batch: 64}
EOF
rm -rf "$gen"
ft generate "$out/fft_ab.yaml" -o "$gen/B" > /dev/null 2> "$out/generate.log" || { cat "$out/generate.log"; exit 2; }
cp -r "$gen/B" "$gen/A"
cp "$alt/ftgen_fft_core.h" "$gen/A/fft_ab/common/ftgen_fft_core.h"
for v in A B; do
  log "build $v"
  FTGEN_CACHE_DIR=/tmp/ftgen-ab-cache-$v ft build "$gen/$v/fft_ab" -j 16 --arch sm_90 > "$out/build_$v.log" 2>&1 \
    || { tail -40 "$out/build_$v.log"; echo "BUILD $v FAILED"; exit 3; }
done
shapes() { python3 -c "import sys; t=int(sys.argv[1]); print(','.join(f'{1<<l}x{1<<(t-l)}' for l in range(3, 25)))" "$1"; }
for prec in ${PRECS:-fp32 fp64}; do
  if [ $prec = fp32 ]; then tag=c2c_f32; S=$(shapes 26); else tag=z2z_f64; S=$(shapes 25); fi
  : > "$out/ab_A_$prec.jsonl"; : > "$out/ab_B_$prec.jsonl"
  for k in ${kern//,/ }; do
    for v in A B; do
      args=()
      [[ $k == *_inj ]] && args=(--inject 1)
      log "$prec $k $v"
      ft bench "$gen/$v/fft_ab" --kernels "fft_${tag}_$k" --shapes "$S" "${args[@]}" --reps 30 --warmup 5 --json - \
        >> "$out/ab_${v}_$prec.jsonl" 2>> "$out/bench_$v.log"
    done
  done
done
log "done"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
def load(v, prec):
    t = {}
    for line in open(os.path.join(out, f"ab_{v}_{prec}.jsonl")):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if not r.get("kernel") or "skipped" in r or not r.get("ms"):
            continue
        lg = r["shape"]["n"].bit_length() - 1
        t[(r["kernel"], lg)] = (r["ref"]["ms"] / r["ms"]["median"], bool(r.get("ok")), r)
    return t
for prec in ("fp32", "fp64"):
    if not os.path.exists(os.path.join(out, f"ab_A_{prec}.jsonl")):
        continue
    a, b = load("A", prec), load("B", prec)
    for kern in sorted({k for k, _ in a} | {k for k, _ in b}):
        print(f"\n{kern}: x cuFFT  A  B  B/A  (ok A/B)")
        ra, rb = [], []
        for lg in range(3, 25):
            x, y = a.get((kern, lg)), b.get((kern, lg))
            if not x or not y:
                print(f"  {lg:2d} missing A={bool(x)} B={bool(y)}")
                continue
            ra.append(x[0]); rb.append(y[0])
            flag = "" if x[1] and y[1] else "  FAILED"
            inj = y[2].get("injected")
            extra = f"  B inj/corr/fa {inj}/{y[2].get('corrected')}/{y[2].get('false_alarms')}" if inj else ""
            print(f"  {lg:2d} {x[0]:.3f} {y[0]:.3f} {y[0] / x[0]:.3f}{flag}{extra}")
        if ra:
            print(f"  mean {sum(ra) / len(ra):.3f} {sum(rb) / len(rb):.3f}  min {min(ra):.3f} {min(rb):.3f}")
PY
