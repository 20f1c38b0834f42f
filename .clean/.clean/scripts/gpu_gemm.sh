#!/usr/bin/env bash
# The GEMM figures of record (results/index.json), on one H100/H200. Usage, from the repository root:
#
#   bash scripts/gpu_gemm.sh MODE OUTDIR
#
#   tc-concurrent           tensor-core (tf32x3) threadblock ABFT, every reference-checksum mode, online / detect,
#                           row- and column-major, and the unprotected twin (specs/gemm/abft_tc_concurrent.yaml):
#                           odd shapes with 8 faults per launch; 4096^3 and 8192^3 clean and with 16 faults
#   tc-concurrent-campaign  its fault campaign (specs/gemm/abft_tc_concurrent_campaign.yaml)
#   tf32x3-search           the unprotected tf32x3 search space at 4096^3 and 8192^3 (specs/gemm/cutlass_tf32x3_search.yaml)
#   simt-search             the fp32 SIMT search, the fp32 shape sweep and the fp64 sweep (specs/gemm/sgemm_search.yaml,
#                           sweep.yaml, dgemm_search.yaml; shapes from specs/gemm/shapes/)
#   levels                  SIMT ABFT at every level against the unprotected kernel (specs/gemm/abft_levels.yaml)
#   prepass                 SIMT threadblock ABFT with pre-pass references (specs/gemm/abft_tb_prepass.yaml)
#   campaign                campaigns of the SIMT ABFT kernels (CAMPAIGN_SPEC, default specs/gemm/abft_campaign.yaml)
#
# TMR: scripts/gpu_tmr.sh. Every results file (JSON lines, provenance first) goes to OUTDIR; ftgen prints its tables.
# SEED (default 7) and TRIALS (default 1000) set the campaigns.
set -uo pipefail
mode=${1:?usage: bash scripts/gpu_gemm.sh MODE OUTDIR}
out=${2:?usage: bash scripts/gpu_gemm.sh MODE OUTDIR}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_env.sh"
gpu_start "$out"
out=$(cd "$out" && pwd)
export FTGEN_CACHE_DIR=${FTGEN_CACHE_DIR:-/tmp/ftgen-cache}
gen=${FTGEN_GEMM_GEN:-/tmp/ftgen-gen}
speed=4096x4096x4096,8192x8192x8192

# SPEC PROJECT PREFIX ODD_SHAPES: generate and build SPEC; its injection builds on ODD_SHAPES with 8 faults per launch;
# every variant at 4096^3 and 8192^3 clean; the injection builds there with 16 faults per launch
check_and_speed() {
  local spec=$1 proj=$2 pre=$3 odd=$4
  ft generate "$spec" -o "$gen" > /dev/null || exit 2
  ft build "$gen/$proj" -j 16 --arch sm_90 || exit 3
  ft bench "$gen/$proj" --kernels '*_inj' --shapes "$odd" --inject 8 --reps 3 --warmup 1 --json "$out/${pre}check_inject.jsonl"
  ft bench "$gen/$proj" --shapes $speed --reps 10 --warmup 3 --json "$out/${pre}speed_clean.jsonl"
  ft bench "$gen/$proj" --kernels '*_inj' --shapes $speed --inject 16 --reps 10 --warmup 3 --json "$out/${pre}speed_inject.jsonl"
}

# SPEC PREFIX: `ftgen campaign` with TRIALS clean + faulty trials per distribution
run_campaign() {
  ft campaign "$1" --trials "${TRIALS:-1000}" --seed "${SEED:-7}" -o "$gen" --json "$out/${2}campaign.jsonl" --plot "$out/${2}campaign.png"
}

case "$mode" in
tc-concurrent)
  check_and_speed specs/gemm/abft_tc_concurrent.yaml gemm_abft_tc_concurrent tcconc_ \
    1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
  ;;
tc-concurrent-campaign)
  run_campaign specs/gemm/abft_tc_concurrent_campaign.yaml tcconc_
  ;;
tf32x3-search)
  ft search specs/gemm/cutlass_tf32x3_search.yaml --shapes $speed -o "$gen" -j 16 --reps 20 --warmup 5 --no-cache \
    --json "$out/tf32x3_search.jsonl"
  ;;
simt-search)
  ft search specs/gemm/sgemm_search.yaml --reps 10 --warmup 3 -j 16 -o "$gen" --json "$out/sgemm_search.jsonl"
  ft search experiments/specs/gemm_sweep.yaml --shapes specs/gemm/shapes/gemm_sweep_fp32.yaml --reps 10 --warmup 3 -j 16 -o "$gen" \
    --json "$out/sgemm_sweep.jsonl"
  cp "$gen"/sgemm_sweep-search/sgemm_sweep_dispatch.h "$gen"/sgemm_sweep-search/sgemm_sweep_best.yaml "$out/" 2>/dev/null
  ft search experiments/specs/gemm_dgemm_search.yaml --shapes specs/gemm/shapes/gemm_sweep_fp64.yaml --reps 10 --warmup 3 -j 16 -o "$gen" \
    --json "$out/dgemm_sweep.jsonl"
  ;;
levels)
  ft generate specs/gemm/abft_levels.yaml -o "$gen" > /dev/null || exit 2
  ft build "$gen/sgemm_abft_levels" -j 16 || exit 3
  lv=2048x2048x2048,$speed,128x128x1024,256x256x1024,480x480x1024,256x256x256,1000x1234x777
  ft bench "$gen/sgemm_abft_levels" --shapes $lv --reps 10 --warmup 3 --json "$out/abft_levels_clean.jsonl"
  ft bench "$gen/sgemm_abft_levels" --kernels '*_inj' --shapes $lv --inject 16 --reps 10 --warmup 3 --json "$out/abft_levels_inject.jsonl"
  ;;
prepass)
  check_and_speed specs/gemm/abft_tb_prepass.yaml sgemm_abft_tb_prepass abft_prepass_ 1x1x1,1000x1234x777,257x129x1031,2048x2048x2048
  run_campaign experiments/specs/gemm_abft_prepass_campaign.yaml abft_prepass_
  ;;
campaign)
  run_campaign "${CAMPAIGN_SPEC:-specs/gemm/abft_campaign.yaml}" abft_
  ;;
*)
  echo "gpu_gemm.sh: unknown mode '$mode' (tc-concurrent, tc-concurrent-campaign, tf32x3-search, simt-search, levels, prepass, campaign)" >&2
  exit 2
  ;;
esac
