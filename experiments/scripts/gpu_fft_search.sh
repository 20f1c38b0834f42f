#!/usr/bin/env bash
# Plan search of the fft family on the device machine: specs/fft_plan_search_fp{32,64}.yaml over the
# sizes where the automatic plans were furthest from cuFFT; every candidate vs cuFFT in its own process.
# Usage: bash experiments/scripts/gpu_fft_search.sh OUTDIR [MODE]   (MODE: a label of the `case` below, each a search of its spec over its
# shapes: `named MODE` ones experiments/specs/fft_plan_search_MODE.yaml, the others the spec they name; any other MODE, or none: the
# fp32 and fp64 specs over the sizes above. Full rows in OUTDIR/search_*.jsonl, the winners' spec and dispatch header
# beside them, the tables last)
set -uo pipefail
out=${1:?usage: bash experiments/scripts/gpu_fft_search.sh OUTDIR [small|large]}
which=${2:-small}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
export FTGEN_CACHE_DIR=${FTGEN_CACHE_DIR:-/tmp/ftgen-cache}
gen=/tmp/ftgen-fft-search
rm -rf "$gen"  # (the winners' specs and headers of an earlier search on the same machine are not this one's)
# NAME SPEC SHAPES [ARGS...]: one search, rows to OUT/search_NAME.jsonl, table and log beside them
search() {
  local name=$1 spec=$2 shapes=$3; shift 3
  ft search "$spec" --shapes "$shapes" "$@" --reps 20 --warmup 3 -j 16 -o $gen --json "$out/search_$name.jsonl" \
    > "$out/search_$name.txt" 2> "$out/search_$name.log"; echo "$name search rc=$?"
}
# NAME SHAPES [ARGS...]: search NAME with experiments/specs/fft_plan_search_NAME.yaml
named() { local name=$1; shift; search "$name" "experiments/specs/fft_plan_search_$name.yaml" "$@"; }
case "$which" in
  weak36e) named weak36e 8192x8192,16384x4096 ;;
  weak36d) named weak36d 8192x8192,16384x4096 --inject 1 ;;
  weak36c) named weak36c 8192x4096,524288x64,1048576x32,2097152x16,4194304x8 --inject 1 ;;
  weak36b) named weak36b 4096x8192,8192x4096,32768x2048 --inject 1 ;;
  weak36) named weak36 16384x4096,8192x4096,8192x8192,4096x8192,4096x16384,2048x32768 --inject 1 ;;
  weak35j) named weak35j 16x2097152,16777216x2 --inject 1 ;;
  weak35i) named weak35i 8192x4096,16384x2048,65536x512 --inject 1 ;;
  weak35h) named weak35h 8x4194304,16x2097152,32x1048576,64x524288,262144x128,1048576x32,4194304x8,8388608x4,16777216x2 --inject 1 ;;
  weak35g) named weak35g 32768x1024,65536x512 --inject 1 ;;
  weak35f) named weak35f 128x262144,256x131072,512x65536,4096x8192,524288x64,1048576x32,2097152x16,4194304x8,16777216x2 --inject 1 ;;
  weak35e) named weak35e 1024x65536,2048x32768,128x262144,256x131072,512x65536,1024x32768,2048x16384,4096x8192 --inject 1 ;;
  weak35d) named weak35d 4096x16384,8192x8192,1024x32768,2048x16384,4096x8192,32768x1024,65536x512,131072x256,262144x128 --inject 1 ;;
  weak35c) named weak35c 32768x1024,65536x512 --inject 1 ;;
  weak35b) named weak35b 4096x16384,524288x128,1048576x64,2097152x32,131072x256,262144x128,524288x64,1048576x32,2097152x16,4194304x8,8388608x4 --inject 1 ;;
  weak35) named weak35 8192x8192,16384x4096,32768x2048,65536x1024,8192x4096,32768x1024,65536x512,131072x256,262144x128,2097152x16,16777216x2 --inject 1 ;;
  tbcluster32) search tbcluster32 experiments/specs/fft_plan_search_tbcluster32.yaml 8192x8192,16384x4096,32768x2048,65536x1024,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tbsim2) search tbsim2 experiments/specs/fft_plan_search_tbsim2.yaml 32x2097152,64x1048576,128x524288,256x262144,512x131072,1024x65536,2048x32768,4096x16384 --inject 1 ;;
  tbsim) search tbsim experiments/specs/fft_plan_search_tbsim.yaml 8x8388608,16x4194304,32x2097152,64x1048576,128x524288,256x262144,512x131072,1024x65536,2048x32768,4096x16384 --inject 1 ;;
  tbseq) search tbseq experiments/specs/fft_plan_search_tbseq.yaml 512x131072,1024x65536,2048x32768,4096x16384,8192x8192 --inject 1 ;;
  pfseq) search pfseq experiments/specs/fft_plan_search_pfseq.yaml 512x131072,1024x65536,2048x32768,4096x16384 --inject 1 ;;
  pf) search pf experiments/specs/fft_plan_search_pf.yaml 8x8388608,16x4194304,32x2097152,64x1048576,128x524288,256x262144,512x131072,1024x65536,2048x32768,4096x16384 --inject 1 ;;
  tbcluster) search tbcluster experiments/specs/fft_plan_search_tbcluster.yaml 8192x8192,16384x4096,32768x2048,65536x1024,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tbcluster2) search tbcluster2 experiments/specs/fft_plan_search_tbcluster2.yaml 32768x2048,4194304x16,8388608x8,16384x2048,2097152x16 --inject 1 ;;
  tbcluster3) search tbcluster3 experiments/specs/fft_plan_search_tbcluster3.yaml 8192x4096,16384x2048,65536x512,131072x256,262144x128,524288x64,1048576x32,2097152x16,4194304x8,8388608x4,16777216x2 --inject 1 ;;
  tbcluster4) search tbcluster4 experiments/specs/fft_plan_search_tbcluster4.yaml 32768x1024,65536x512,131072x256,262144x128,524288x64,1048576x32,2097152x16,4194304x8,8388608x4,16777216x2 --inject 1 ;;
  tbsplit) search tbsplit experiments/specs/fft_plan_search_tbsplit.yaml 4096x16384,8192x8192,16384x4096,32768x2048,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tbenc) search tbenc experiments/specs/fft_plan_search_tbenc.yaml 16384x4096,32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tbenc2) search tbenc2 experiments/specs/fft_plan_search_tbenc2.yaml 524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tbseq8) search tbseq8 experiments/specs/fft_plan_search_tbseq8.yaml 512x131072,1024x65536,2048x32768,4096x16384 --inject 1 ;;
  tbenc3) search tbenc3 experiments/specs/fft_plan_search_tbenc3.yaml 32768x2048,65536x1024,131072x512,262144x256,524288x128 --inject 1 ;;
  tb13) search tb13 experiments/specs/fft_plan_search_tb13.yaml 8192x8192 --inject 1 ;;
  hooks2) search hooks2 experiments/specs/fft_plan_search_hooks2.yaml 8x8388608,16x4194304,32x2097152,64x1048576,128x524288,256x262144,512x131072,1024x65536,2048x32768,4096x16384,8192x8192,16384x4096,32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  hooks) search hooks experiments/specs/fft_plan_search_hooks.yaml 8192x8192,16384x4096,32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tbcluster64) search tbcluster64 experiments/specs/fft_plan_search_tbcluster64.yaml 8192x4096,16384x2048,32768x1024,65536x512,524288x64,1048576x32,2097152x16,4194304x8,8388608x4,16777216x2 --inject 1 ;;
  cluster2c) search cluster2c experiments/specs/fft_plan_search_cluster2c.yaml 8192x4096,16384x4096,32768x2048,65536x1024,16384x2048,32768x1024 ;;
  cluster24) search cluster24 experiments/specs/fft_plan_search_cluster24.yaml 16777216x4,16777216x2 ;;
  cluster3) search cluster3 experiments/specs/fft_plan_search_cluster3.yaml 1048576x64,2097152x32,4194304x16,8388608x8,16777216x4,2097152x16,4194304x8,8388608x4,16777216x2 ;;
  cluster) search cluster experiments/specs/fft_plan_search_cluster.yaml 16384x4096,32768x2048,65536x1024,131072x512,8192x4096,16384x2048,32768x1024,65536x512 ;;
  tbreg) search tbreg experiments/specs/fft_plan_search_tbreg.yaml 8x8388608,16x4194304,32x2097152,64x1048576,8192x8192,16384x4096,4194304x16,8x4194304,16x2097152,32x1048576,1048576x32,2097152x16,4194304x8 --inject 1 ;;
  tb64cols2) search tb64cols2 experiments/specs/fft_plan_search_tb64cols2.yaml 16384x2048,65536x512,262144x128,524288x64,1048576x32,2097152x16,4194304x8 --inject 1 ;;
  tbcols2) search tbcols2 experiments/specs/fft_plan_search_tbcols2.yaml 8192x8192,16384x4096,32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tb28) search tb28 experiments/specs/fft_plan_search_tb28.yaml 8192x8192,16384x4096,32768x2048,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  tb27) search tb27 experiments/specs/fft_plan_search_tb27.yaml 8192x8192,16384x4096,32768x2048,524288x128,1048576x64,2097152x32,4096x8192,524288x64,1048576x32,2097152x16,4194304x8 --inject 1 ;;
  tbclean) search tbclean experiments/specs/fft_plan_search_tbclean.yaml 8192x8192,16384x4096 ;;
  r128) search r128 experiments/specs/fft_plan_search_r128.yaml 32768x2048,2097152x32,4194304x16,8388608x8,16777216x4 ;;
  tbbs) search tbbs experiments/specs/fft_plan_search_tbbs.yaml 32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,4194304x16,8388608x8,16777216x4,16384x2048,32768x1024,65536x512,131072x256,262144x128,524288x64,1048576x32,4194304x8,8388608x4,16777216x2 --inject 1 ;;
  tbsmall64) search tbsmall64 experiments/specs/fft_plan_search_tbsmall64.yaml 8x4194304,16x2097152,32x1048576,64x524288,128x262144,256x131072,512x65536 --inject 1 ;;
  tbsmall) search tbsmall experiments/specs/fft_plan_search_tbsmall.yaml 16x4194304,32x2097152,64x1048576,128x524288,256x262144,512x131072,1024x65536,2048x32768,4096x16384,1024x32768,2048x16384,4096x8192 --inject 1 ;;
  small2) search small2 experiments/specs/fft_plan_search_small.yaml 16x4194304,32x2097152,16x2097152 ;;
  l2) search l2 experiments/specs/fft_plan_search_l2.yaml 65536x1024,262144x256,1048576x64,4194304x16,65536x512,262144x128,1048576x32,4194304x8 ;;
  pad) search pad experiments/specs/fft_plan_search_pad.yaml 32768x2048,2097152x32,4194304x16,8388608x8,16777216x4 ;;
  launches) search launches experiments/specs/fft_plan_search_launches.yaml 524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 ;;
  tbweak) search tbweak experiments/specs/fft_plan_search_tbweak.yaml 8x8388608,16x4194304,32x2097152,4096x16384,8192x8192,16384x4096,2097152x32,4194304x16 --inject 1 ;;
  tbcols) search tbcols experiments/specs/fft_plan_search_tbcols.yaml 64x1048576,1024x65536,4096x16384,65536x1024,1048576x64,8388608x8 --inject 1 ;;
  tb) search tb experiments/specs/fft_plan_search_tb.yaml 64x1048576,1024x65536,4096x16384,65536x1024,1048576x64 --inject 1 ;;
  bs) search bs experiments/specs/fft_plan_search_bs.yaml 524288x128,1048576x64,2097152x32 ;;
  two) search two experiments/specs/fft_plan_search_two.yaml 2097152x32,4194304x16,8388608x8,16777216x4 ;;
  tbminb) search tbminb experiments/specs/fft_plan_search_tbminb.yaml 32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4,16384x2048,32768x1024,65536x512,131072x256,262144x128,524288x64,1048576x32,2097152x16,4194304x8 --inject 1 ;;
  tbocc) search tbocc experiments/specs/fft_plan_search_tbocc.yaml 1024x65536,2048x32768,4096x16384,8192x8192,65536x1024,1048576x64,1024x32768,2048x16384,4096x8192,65536x512,1048576x32 --inject 1 ;;
  f32mid) search f32mid experiments/specs/fft_plan_search_f32mid.yaml 8388608x8,16777216x4 ;;
  f32big) search f32big experiments/specs/fft_plan_search_f32big.yaml 2097152x32,4194304x16,8388608x8,16777216x4 ;;
  tw64b) search tw64b experiments/specs/fft_plan_search_tw64b.yaml 2097152x16,4194304x8 ;;
  tw64) search tw64 experiments/specs/fft_plan_search_tw64.yaml 1024x32768,2048x16384,4096x8192,8192x4096,65536x512,131072x256,262144x128,524288x64,1048576x32,2097152x16,4194304x8 --inject 1 ;;
  occ5) search occ5 experiments/specs/fft_plan_search_occ5.yaml 32768x2048,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4,524288x64,1048576x32,2097152x16,4194304x8 ;;
  occ4) search occ4 experiments/specs/fft_plan_search_occ4.yaml 32768x2048,2097152x32,4194304x16,8388608x8,16777216x4,2097152x16,4194304x8 ;;
  occ3) search occ3 experiments/specs/fft_plan_search_occ3.yaml 4096x8192,8192x4096,16384x2048,32768x1024,65536x512,131072x256,262144x128,524288x64,1048576x32,2097152x16,4194304x8,8388608x4,16777216x2 ;;
  occ2) search occ2 experiments/specs/fft_plan_search_occ2.yaml 8192x8192,32768x2048,2097152x32,4194304x16,8388608x8,16777216x4,16384x2048,65536x512,262144x128,524288x64,1048576x32,2097152x16,4194304x8,8388608x4,16777216x2 ;;
  occ) search occ experiments/specs/fft_plan_search_occ.yaml 8192x8192,16384x4096,1048576x64,2097152x32,4194304x16,4096x8192,8192x4096,524288x64,1048576x32,2097152x16,4194304x8 ;;
  mid) search mid experiments/specs/fft_plan_search_mid.yaml 8192x8192,16384x4096,32768x2048 ;;
  fp64large) search fp64large experiments/specs/fft_plan_search_fp64_large.yaml 524288x64,1048576x32,2097152x16,4194304x8 ;;
  tblarge) search tblarge experiments/specs/fft_plan_search_tb_large.yaml 32768x2048,65536x1024,131072x512,262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 --inject 1 ;;
  large) search large experiments/specs/fft_plan_search_large.yaml 262144x256,524288x128,1048576x64,2097152x32,4194304x16,8388608x8,16777216x4 ;;
  *) search fp32 experiments/specs/fft_plan_search_fp32.yaml 8x8388608,16x4194304,8192x8192,16384x4096,262144x256,1048576x64,4194304x16
     search fp64 experiments/specs/fft_plan_search_fp64.yaml 8x4194304,8192x4096,1048576x32 ;;
esac
cp $gen/*-search/*_best.yaml $gen/*-search/*_dispatch.h "$out/" 2>/dev/null
grep -hE "^search:|dispatch header|error" "$out"/search_*.log
python3 - "$out" <<'PY'
import glob, json, sys, os
for p in sorted(glob.glob(os.path.join(sys.argv[1], "search_*.jsonl"))):
    best = {}
    for line in open(p):
        r = json.loads(line)
        if not r.get("kernel") or not r.get("ok") or not r.get("ms") or "skipped" in r:
            continue
        n = (r.get("precision"), (r.get("shape") or {}).get("n"))
        ratio = r["ref"]["ms"] / r["ms"]["median"]
        print(f"{r['kernel']:64s} n={n[1]:>8} {r['ms']['median']:.4f} ms  x cuFFT {ratio:.3f}")
        if n not in best or ratio > best[n][1]:
            best[n] = (r["kernel"], ratio)
    print("best:", {n: f"{k} {x:.3f}" for n, (k, x) in sorted(best.items())})
PY
