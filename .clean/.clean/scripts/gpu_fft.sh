#!/usr/bin/env bash
# GPU runs of the fft family for the device machine (H100/H200, CMake/Ninja/nvcc/cuFFT, python3 with
# jinja2/click/pyyaml/rich/numpy; ftgen not installed). Usage, from the repository root:
#
#   bash scripts/gpu_fft.sh OUTDIR
#
# 1. generates and builds (-j 16, sm_90) one project: fp32 C2C and fp64 Z2Z, every size 2^1..2^24
#    (logn: 0), unprotected and one-sided / two-sided-thread / two-sided-tb ABFT, each protected level
#    also with fault injection compiled in; inverse transforms and a few alternative plans at the
#    launch-count boundaries as fixed-size variants. A build failure stops here (exit 3).
# 2. verifies against cuFFT and times every variant for log n = 3..24 (fp32: 2^26 complex elements
#    per shape, fp64: 2^25), the injection builds with one fault per transform (--inject 1).
# 3. fault campaigns through `ftgen campaign`: two-sided-tb 1000 clean + 1000 single-bit-flip trials
#    per precision (docs/campaign-protocol.md), the other levels 150 + 150.
# Full JSON lines (with provenance) go to OUTDIR; a short summary table is printed last.
set -uo pipefail
out=${1:?usage: bash scripts/gpu_fft.sh OUTDIR}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_env.sh"
gpu_start "$out"
out=$(cd "$out" && pwd)
export FTGEN_CACHE_DIR=${FTGEN_CACHE_DIR:-/tmp/ftgen-cache}
gen=${FTGEN_FFT_GEN:-/tmp/ftgen-fft-gen}
t0=$SECONDS
log() { echo "[gpu_fft $((SECONDS - t0))s] $*" >&2; }


# ---- the project ----------------------------------------------------------------------------
cat > "$out/fft_gpu.yaml" <<'EOF'
name: fft_gpu
family: fft
description: scripts/gpu_fft.sh -- every level, both precisions, every size; inverse and plan probes
arch: [sm_90]
variants:
  # sweeps: every size with the automatic plans
  - {precision: [fp32, fp64], protection: {scheme: none}, params: {logn: 0}}
  - {precision: [fp32, fp64], protection: {scheme: abft, level: [one-sided, two-sided-thread, two-sided-tb], inject: [false, true]},
     params: {logn: 0}}
  # inverse transforms (unnormalised, like CUFFT_INVERSE)
  - {precision: [fp32, fp64], protection: {scheme: none}, params: {direction: inverse, logn: [5, 12, 20]}}
  - {precision: [fp32, fp64], protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {direction: inverse, logn: [5, 12, 20]}}
  # plan probes at the launch-count boundaries (unprotected): the alternatives to the defaults
  - {precision: fp32, params: {logn: 13, N1: 64}}
  - {precision: fp32, params: {logn: 12, n1: 8}}
  - {precision: fp32, params: {logn: 22, N1: 256, N2: 128}}
  - {precision: fp32, params: {logn: 23, N1: 4096, bs1: 4, bs2: 4}}
  - {precision: fp32, params: {logn: 22, bs1: 2, bs2: 2}}
  - {precision: fp64, params: {logn: 12, N1: 64}}
  - {precision: fp64, params: {logn: 11, n1: 16}}
  - {precision: fp64, params: {logn: 22, N1: 256, N2: 128}}
  # the rule-made plans where a measured plan replaced them
  - {precision: fp32, params: {logn: 13, n1: 16}}
  - {precision: fp64, params: {logn: [12, 13], n1: 8}}
  - {precision: fp64, params: {logn: [19, 20], launches: 2}}
  - {precision: fp64, params: {logn: [21, 22], launches: 3}}
  - {precision: fp64, params: {logn: 22, launches: 2, bs1: 4, bs2: 4}}
shapes:
  - {n: 4096, batch: 64}
EOF

log "generate"
ft generate "$out/fft_gpu.yaml" -o "$gen" > "$out/variants.txt" 2> "$out/generate.log" || { cat "$out/generate.log"; echo "GENERATE FAILED"; exit 2; }
log "$(wc -l < "$out/variants.txt") variants; build -j 16 --arch sm_90"
ft build "$gen/fft_gpu" -j 16 --arch sm_90 > "$out/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  tail -60 "$out/build.log"
  echo "BUILD FAILED (exit $rc): full log in $out/build.log"
  exit 3
fi
log "built: $(tail -1 "$out/build.log")"

shapes() {  # log n = 3..24 with 2^total elements each
  python3 -c "import sys; t=int(sys.argv[1]); print(','.join(f'{1<<l}x{1<<(t-l)}' for l in range(3, 25)))" "$1"
}
S32=$(shapes 26)
S64=$(shapes 25)
R="--reps 30 --warmup 5"

for prec in fp32 fp64; do
  if [ $prec = fp32 ]; then tag=c2c_f32; S=$S32; else tag=z2z_f64; S=$S64; fi
  clean="fft_${tag}_none_fwd_auto,fft_${tag}_abft-1sided_fwd_auto,fft_${tag}_abft-2sided-thread_fwd_auto,fft_${tag}_abft-2sided-tb_fwd_auto"
  log "$prec: clean sweep (unprotected + 3 levels) x 22 sizes"
  ft bench "$gen/fft_gpu" --kernels "$clean" --shapes "$S" $R --json "$out/sweep_${prec}.jsonl" > "$out/sweep_${prec}.txt" 2>&1
  log "$prec: sweep with one fault per transform (inject builds)"
  ft bench "$gen/fft_gpu" --kernels "fft_${tag}_*_fwd_auto_inj" --shapes "$S" --inject 1 $R --json "$out/sweep_${prec}_inj.jsonl" > "$out/sweep_${prec}_inj.txt" 2>&1
done

log "inverse transforms and plan probes"
# the sweeps' shapes (a fixed-size variant runs the one of its n): 2^26 / 2^25 elements like the sweeps
# (before, n = 4096 took the spec's campaign shape 4096x64)
probe() {  # NAME KERNELS [ARGS...]: fp32 and fp64 rows of one bench into OUT/NAME.jsonl
  local name=$1 kern=$2; shift 2
  : > "$out/$name.jsonl"; : > "$out/$name.txt"
  for prec in fp32 fp64; do
    if [ $prec = fp32 ]; then tag=c2c_f32; S=$S32; else tag=z2z_f64; S=$S64; fi
    ft bench "$gen/fft_gpu" --kernels "fft_${tag}_$kern" --shapes "$S" "$@" $R --json - >> "$out/$name.jsonl" 2>> "$out/$name.txt"
  done
}
probe inverse "*_inv_*"
probe inverse_inj "*_inv_*_inj" --inject 1
probe probes "none_fwd_logn*"

log "campaign: two-sided-tb, 1000 clean + 1000 single-bit-flip trials per precision"
ft campaign "$out/fft_gpu.yaml" -o "$gen" --kernels "*2sided-tb_fwd_auto_inj" --trials 1000 --dists normal --shape 4096x64 \
  --json "$out/campaign_tb.jsonl" > "$out/campaign_tb.txt" 2>&1
log "campaign: one-sided and two-sided-thread, 150 + 150 trials, normal and loguniform inputs"
ft campaign "$out/fft_gpu.yaml" -o "$gen" --kernels "*1sided_fwd_auto_inj,*2sided-thread_fwd_auto_inj" --trials 150 --dists normal,loguniform \
  --shape 4096x64 --json "$out/campaign_levels.jsonl" > "$out/campaign_levels.txt" 2>&1
log "done; summary"

python3 - "$out" <<'EOF'
import json, sys, glob, math, os
out = sys.argv[1]

def rows(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    rs = []
    for line in open(p):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "kernel" in r and r.get("kernel"):
            rs.append(r)
    return rs

def level(r):
    k = r["kernel"]
    for tag, short in (("none", "none"), ("1sided", "1s"), ("2sided-thread", "th"), ("2sided-tb", "tb")):
        if f"_{tag}_" in k or k.split("_")[3].startswith("abft-" + tag):
            return short + ("+inj" if k.endswith("_inj") else "")
    return "?"

bad = []
for prec, f1, f2 in (("fp32", "sweep_fp32.jsonl", "sweep_fp32_inj.jsonl"), ("fp64", "sweep_fp64.jsonl", "sweep_fp64_inj.jsonl")):
    table = {}
    for r in rows(f1) + rows(f2):
        if "skipped" in r:
            continue
        lv = level(r)
        lg = (r.get("shape") or {}).get("n", 0).bit_length() - 1
        ms = (r.get("ms") or {}).get("median")
        ref = (r.get("ref") or {}).get("ms")
        ratio = ref / ms if ms and ref else None
        table.setdefault(lg, {})[lv] = (ratio, r.get("ok"), r.get("gbps"), r)
        if not r.get("ok"):
            bad.append(f"{r['kernel']} n=2^{lg}: {(r.get('error') or {}).get('kind', 'verification')} "
                       f"err={r.get('max_rel_err')} tol={r.get('tolerance')} inj/det/corr={r.get('injected')}/{r.get('detected')}/{r.get('corrected')}")
    cols = ["none", "1s", "th", "tb", "1s+inj", "th+inj", "tb+inj"]
    print(f"\n{prec}: speed relative to cuFFT (ref ms / ms; '!' = failed verification); GB/s of the unprotected kernel and of cuFFT")
    print("logn " + " ".join(f"{c:>7}" for c in cols) + "   GB/s  cuFFT")
    avg = {c: [] for c in cols}
    for lg in sorted(table):
        line = f"{lg:4d} "
        for c in cols:
            v = table[lg].get(c)
            if v is None or v[0] is None:
                line += f"{'-':>7} " if v is None else f"{'!' if not v[1] else '-':>7} "
                continue
            avg[c].append(v[0])
            line += f"{v[0]:6.3f}{'' if v[1] else '!'} " if v[1] else f"{v[0]:6.3f}! "
        un = table[lg].get("none")
        if un:
            r = un[3]
            line += f" {r.get('gbps') or 0:6.0f} {((r.get('ref') or {}).get('gbps') or 0):6.0f}"
        print(line)
    line = " avg "
    for c in cols:
        line += f"{(sum(avg[c]) / len(avg[c])) if avg[c] else float('nan'):7.3f} "
    print(line)
    line = " min "
    for c in cols:
        line += f"{min(avg[c]) if avg[c] else float('nan'):7.3f} "
    print(line)
    inj = [x[3] for lg in table for c, x in table[lg].items() if c.endswith("+inj")]
    if inj:
        print(f"  injection rows: injected {sum(r.get('injected', 0) for r in inj)}, detected {sum(r.get('detected', 0) for r in inj)}, "
              f"corrected {sum(r.get('corrected', 0) for r in inj)}, recomputed {sum(r.get('recomputed', 0) for r in inj)}, "
              f"false alarms {sum(r.get('false_alarms', 0) for r in inj)}; clean protected rows: false alarms "
              f"{sum(x[3].get('false_alarms', 0) for lg in table for c, x in table[lg].items() if c in ('1s', 'th', 'tb'))}")
    esc = {lg: table[lg]["tb"][3].get("escalated") for lg in sorted(table) if "tb" in table[lg]}
    if any(v for v in esc.values()):
        print("  two-sided-tb clean rows, groups the prefilter escalated to the exact check (per transform set): "
              + ", ".join(f"2^{lg} {v}" for lg, v in esc.items() if v))

print("\ninverse + probes (ref ms / ms, ok):")
for r in rows("inverse.jsonl") + rows("inverse_inj.jsonl") + rows("probes.jsonl"):
    if "skipped" in r:
        continue
    ms = (r.get("ms") or {}).get("median"); ref = (r.get("ref") or {}).get("ms")
    print(f"  {r['kernel']:60s} {(ref / ms) if ms and ref else float('nan'):6.3f} ok={r.get('ok')} err={r.get('max_rel_err')}")
    if not r.get("ok"):
        bad.append(f"{r['kernel']}: {(r.get('error') or {}).get('message', 'verification')}")

print("\ncampaigns (shape 4096x64): trials clean/faulty, significant, corrected, coverage, false alarms, max clean score")
for name in ("campaign_tb.jsonl", "campaign_levels.jsonl"):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        print(f"  {name}: missing (see {name.replace('.jsonl', '.txt')})")
        continue
    for line in open(p):
        r = json.loads(line)
        c = r.get("campaign")
        if c:
            cov = "-" if c["coverage"] is None else f"{100 * c['coverage']:.2f}%"
            print(f"  {c['kernel']:48s} {c['clean_trials']:5d}/{c['faulty_trials']:<5d} sig {c['significant']:4d} corr {c['corrected']:4d} "
                  f"cov {cov:>8s} fa {c['false_alarms']} score {c.get('max_clean_score', 0):.3f} resid {c['max_residual_rel_err']:.1e}")
if bad:
    print(f"\n{len(bad)} failed row(s):")
    for b in bad[:25]:
        print("  " + b)
EOF
echo "full results in $out (sweep_*.jsonl, inverse*.jsonl, probes.jsonl, campaign_*.jsonl, build.log); $((SECONDS - t0)) s"
