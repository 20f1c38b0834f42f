#!/usr/bin/env bash
# One call on a machine of four GPUs (nvidia-h200-x4): up to four lanes side by side, each on its own GPU with its own
# build (-j 16 of the 64 cores); each lane's files are packed into OUT/<lane>.tar.gz (the device returns at most eight
# files) and a short table of each lane is printed last.
#   bash experiments/scripts/gpu_x4_session.sh OUT lane[:gpu] ...   (wheels in .whl/; FTGEN_GIT_SHA and FTGEN_GIT_DIRTY
#   where the copy has no .git; LANE_SECONDS, default 540, bounds every lane)
# Lanes:
#   c90abft  experiments/scripts/gpu_cutlass90_abft.sh (specs/gemm/cutlass90_abft.yaml: bench, campaign, calibration)
#   promote  the wgmma accumulation: experiments/specs/gemm_cutlass90_promote.yaml (unprotected tf32x3, promote 0/1/2/4)
#            and gemm_cutlass90_abft_promote.yaml (ABFT, promote 1/2/4) benched with cuBLAS SGEMM alternated: clean,
#            and the ABFT builds with 16 faults per launch; 4096^3, 8192^3 and the odd shapes
#   c90camp  campaigns of gemm_cutlass90_abft_promote.yaml: 512x512x1024 (every promote), then 4096^3 (promote 1)
#   fft      scripts/gpu_fft.sh (the FFT sweep, injection rows, campaigns)
#   tmr      scripts/gpu_tmr.sh (every TMR level), then scripts/gpu_gemm.sh prepass (SIMT pre-pass ABFT)
#   camp4096 the sm80 tf32x3 threadblock ABFT campaign (specs/gemm/abft_tc_concurrent_campaign.yaml) at 4096^3
#   campodd  the same at 1000x1234x777, then the SIMT split-K pre-pass build with 8 faults on odd shapes
#   simt     the SIMT fp32 search (specs/gemm/sgemm_search.yaml), then scripts/gpu_gemm.sh levels
#   simtcamp scripts/gpu_gemm.sh campaign (the SIMT ABFT campaigns), then scripts/gpu_fft_odd_batch.sh
#   fftcamp  scripts/gpu_fft_campaign.sh at 2^13, 2^14, 2^19 (fp32), 2^11, 2^23 (fp64), 500 + 500 trials; tests/test_torch.py
#   c90search ftgen search of experiments/specs/gemm_cutlass90_abft_search.yaml with 16 faults per launch; pytest -m gpu
#   levels   scripts/gpu_gemm.sh levels (SIMT ABFT at every level, clean and with 16 faults)
#   sdpa     the attention references (experiments/scripts/gpu_session.sh OUT sdpa: torch SDPA FLASH and cuDNN)
#   kmcamp   kmeans campaigns (specs/kmeans/precisions.yaml, tf32x3 and fp64 online): accumulators 1000 + 1000 trials per
#            distribution, argmin / norm / update 300 + 300
#   kmsites  kmeans campaigns at the argmin, norm and update sites, 1000 + 1000 per distribution
#   kmbig    the kmeans accumulator campaign, 9000 + 9000 per distribution, on every GPU (run it alone: kmbig:all;
#            KMBIG_TRIALS and KMBIG_SEED change the trials and the seed)
#   kmfast   kmeans: the demo at the flash-kmeans anchors and awkward shapes (protected, its twin and cuBLAS-Lloyd
#            alternated), specs/kmeans/precisions.yaml with one fault, a 300 + 300 accumulator campaign, the
#            register cap (experiments/specs/kmeans_min_blocks.yaml)
#   kmrefs   kmeans: the demo at the four flash-kmeans anchors (1048576 samples; 8x128, 32x128, 128x128, 128x1024) with
#            refs: cuBLAS-Lloyd alternated in the executable, flash-kmeans alternated in its driver on the same data
#            (ftgen/families/kmeans/flash_ref.py; needs torch, and flash-kmeans from .whl/: carry .whl)
#   kmablate the protected kmeans demo beside copies that leave parts of its protection out
#            (experiments/scripts/kmeans_ablate.py: the arg-min DMR, the verification, the reference fragments)
#   kmtiles  experiments/specs/kmeans_tiles.yaml (tf32 tiles, unprotected and ABFT) at 1048576x8x128 and x128x1024
#   kmcheck  kmeans: the Lloyd loop (10 iterations against the fp64 loop) of the demo and of every precision, on
#            i.i.d. data and Gaussian blobs; every precision with one fault again (another seed)
#   prof     experiments/scripts/gpu_profile.sh (per-kernel time of the kmeans demo and the efta attention, Nsight Compute)
#   f64dmma  experiments/specs/gemm_fp64_dmma.yaml: fp64 CUTLASS tensor-op kernels (DMMA m8n8k4 and Hopper's m16n8k4),
#            unprotected and TMR with 16 faults, cuBLAS DGEMM alternated; 4096^3, 8192^3 and the odd shapes
#   c90tmr   specs/gemm/cutlass90_tmr.yaml (TMR kernel / multikernel on the sm90 kernels, tf32, bf16, fp16): clean, and
#            with 16 faults per launch; 4096^3, 8192^3, 1000x1234x777, 4097x3x129
#   gputests pytest -m gpu over tests/ (output in pytest_gpu.txt)
#   f64abft  experiments/scripts/gpu_fp64_abft.sh (specs/gemm/cutlass_fp64_abft.yaml: fp64 ABFT on DMMA, bench, campaigns)
#   f64search ftgen search of experiments/specs/gemm_fp64_dmma_search.yaml (fp64 DMMA m16n8k4 tiles) at 4096^3, 8192^3
#   c90wide  ftgen search of experiments/specs/gemm_cutlass90_wide_search.yaml (34 tf32 sm90 variants) at 4096^3, 8192^3
#   attnrefs attention rows with SDPA-FLASH and SDPA-cuDNN alternated (fp16 none and efta, non-causal) at the 16k-token
#            and FA3 shapes and 1x8x4097; efta d128 at 1x8x131072 with one fault per launch
#   attnlong efta d128 at 1x8x131072, one fault per launch, verified
#   attnmore experiments/specs/attention_bf16.yaml (bf16, every level, clean and one fault); the decoupled campaign
#   attnlev  the attention campaign of the strided and snvr levels (fp16, head dim 128, non-causal), 1000 + 1000 per
#            distribution
#   attncamp the attention campaign of the efta level (fp16, head dim 128, causal and not), 1000 + 1000 per distribution
# (1000 clean + 1000 single bit flips per distribution, three distributions, in every campaign)
set -u
if [ "${1:-}" = --lane ]; then  # one lane, in this process (called by the loop below)
  name=$2 out=$3
  cd "$(dirname "$0")/../.." || exit 1
  ft() { python3 -m ftgen.cli "$@"; }
  big=4096x4096x4096,8192x8192x8192; odd=1x1x1,1000x1234x777,4097x3x129,17x4096x33
  sm80=specs/gemm/abft_tc_concurrent_campaign.yaml
  case $name in
    c90abft) bash experiments/scripts/gpu_cutlass90_abft.sh "$out" ;;
    promote)
      ft generate experiments/specs/gemm_cutlass90_promote.yaml -o generated/lp > /dev/null
      ft generate experiments/specs/gemm_cutlass90_abft_promote.yaml -o generated/lp > /dev/null
      ft build generated/lp/gemm_cutlass90_promote -j 8 > "$out/build_promote.txt" 2>&1 &
      ft build generated/lp/gemm_cutlass90_abft_promote -j 8 > "$out/build_abft.txt" 2>&1; wait
      tail -n 1 "$out"/build_*.txt
      ft bench generated/lp/gemm_cutlass90_promote --shapes $big,1000x1234x777 --reps 20 --warmup 5 --json "$out/promote.jsonl"
      ft bench generated/lp/gemm_cutlass90_abft_promote --inject 16 --shapes $big,$odd --reps 20 --warmup 5 --json "$out/abft_inject16.jsonl"
      ft bench generated/lp/gemm_cutlass90_abft_promote --shapes $big --reps 20 --warmup 5 --json "$out/abft_clean.jsonl" ;;
    c90camp)
      spec=experiments/specs/gemm_cutlass90_abft_promote.yaml
      ft campaign $spec -o generated/lc --trials 1000 --seed 7 --shape 512x512x1024 --json "$out/campaign_512.jsonl"
      ft campaign $spec -o generated/lc --kernels '*_p1_*' --trials 1000 --seed 11 --shape 4096x4096x4096 --json "$out/campaign_4096.jsonl" ;;
    fft) bash scripts/gpu_fft.sh "$out" ;;
    tmr) FTGEN_TMR_BUILD=/tmp/tmr bash scripts/gpu_tmr.sh "$out/tmr"
         FTGEN_GEMM_GEN=/tmp/prepass bash scripts/gpu_gemm.sh prepass "$out/prepass" ;;
    camp4096) ft campaign $sm80 -o generated/l4 --trials 1000 --seed 11 --shape 4096x4096x4096 --json "$out/campaign_4096.jsonl" ;;
    campodd)
      ft campaign $sm80 -o generated/lo --trials 1000 --seed 12 --shape 1000x1234x777 --json "$out/campaign_odd.jsonl"
      ft generate specs/gemm/abft_tb_prepass.yaml -o generated/lo > /dev/null && ft build generated/lo/sgemm_abft_tb_prepass -j 16 > /dev/null
      ft bench generated/lo/sgemm_abft_tb_prepass --kernels '*sk4*_inj' --shapes 1x1x1,1000x1234x777,257x129x1031,2048x2048x2048 \
        --inject 8 --reps 3 --warmup 1 --json "$out/prepass_splitk_inject8.jsonl" ;;
    simt)
      ft search specs/gemm/sgemm_search.yaml --reps 10 --warmup 3 -j 16 -o generated/ls --json "$out/sgemm_search.jsonl" > "$out/search.txt" 2>&1
      FTGEN_GEMM_GEN=/tmp/levels bash scripts/gpu_gemm.sh levels "$out" ;;
    simtcamp)
      FTGEN_GEMM_GEN=/tmp/simtcamp bash scripts/gpu_gemm.sh campaign "$out"
      bash scripts/gpu_fft_odd_batch.sh "$out/fft_odd" ;;
    fftcamp)
      CASES="fp32:13 fp32:14 fp32:19 fp64:11 fp64:23" bash scripts/gpu_fft_campaign.sh "$out" 500
      FTGEN_GPU_ARCH=sm_90 python3 -m pytest -q -p no:cacheprovider -rA tests/test_torch.py > "$out/pytest_torch.txt" 2>&1
      tail -n 5 "$out/pytest_torch.txt" ;;
    c90search)
      ft search experiments/specs/gemm_cutlass90_abft_search.yaml -o generated/lr -j 16 --inject 16 --reps 10 --warmup 3 \
        --shapes 4096x4096x4096,8192x8192x8192 --no-cache --json "$out/abft_search.jsonl"
      FTGEN_GPU_ARCH=sm_90 python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/test_gpu.py tests/test_cutlass90_abft.py > "$out/pytest_gpu.txt" 2>&1
      tail -n 12 "$out/pytest_gpu.txt" ;;
    levels) FTGEN_GEMM_GEN=/tmp/levels bash scripts/gpu_gemm.sh levels "$out" ;;
    sdpa) bash experiments/scripts/gpu_session.sh "$out" sdpa ;;
    kmcamp)  # kmeans campaigns, tf32x3 and fp64 online: the distance accumulators, then the other sites
      spec=specs/kmeans/precisions.yaml k='kmeans_tf32x3_abft-tb_*,kmeans_f64_abft-tb_*'
      ft campaign $spec -o generated/lk --kernels "$k" --trials 1000 --seed 21 --json "$out/campaign_accumulator.jsonl"
      for site in argmin norm update; do
        ft campaign $spec -o generated/lk --kernels "$k" --site $site --trials 300 --seed 22 --json "$out/campaign_$site.jsonl"
      done ;;
    kmsites)  # kmeans campaigns at the argmin, norm and update sites (tf32x3 and fp64 online), 1000 + 1000 per distribution
      spec=specs/kmeans/precisions.yaml k='kmeans_tf32x3_abft-tb_*,kmeans_f64_abft-tb_*'
      for site in argmin norm update; do
        ft campaign $spec -o generated/lk --kernels "$k" --site $site --trials 1000 --seed 23 --json "$out/campaign_$site.jsonl"
      done ;;
    kmbig)  # the accumulator site with enough trials for 3000 significant faults, over every GPU of the host (no other lane)
      ft campaign specs/kmeans/precisions.yaml -o generated/lk --kernels 'kmeans_tf32x3_abft-tb_*,kmeans_f64_abft-tb_*' \
        --gpus all --trials "${KMBIG_TRIALS:-9000}" --seed "${KMBIG_SEED:-24}" --json "$out/campaign_accumulator.jsonl" ;;
    kmfast)
      ft generate specs/kmeans/demo.yaml -o generated/lf > /dev/null
      ft generate specs/kmeans/precisions.yaml -o generated/lf > /dev/null
      ft build generated/lf/kmeans_demo -j 16 > "$out/build_demo.txt" 2>&1
      ft build generated/lf/kmeans_precisions -j 16 > "$out/build_prec.txt" 2>&1
      tail -n 1 "$out"/build_*.txt
      ft bench generated/lf/kmeans_demo --reps 10 --warmup 3 --json "$out/demo.jsonl" \
        --shapes 1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024,1000003x3x7,65536x100x1000,4099x129x1
      ft bench generated/lf/kmeans_precisions --inject 1 --reps 5 --warmup 2 --json "$out/prec_inject1.jsonl"
      ft campaign specs/kmeans/precisions.yaml -o generated/lf --kernels 'kmeans_tf32x3_abft-tb_*,kmeans_f64_abft-tb_*' \
        --trials 300 --seed 25 --json "$out/campaign_accumulator.jsonl"
      ft generate experiments/specs/kmeans_min_blocks.yaml -o generated/lf > /dev/null
      ft build generated/lf/kmeans_min_blocks -j 16 > "$out/build_mb.txt" 2>&1; tail -n 1 "$out/build_mb.txt"
      ft bench generated/lf/kmeans_min_blocks --reps 10 --warmup 3 --json "$out/min_blocks.jsonl" ;;
    kmrefs)  # every row's refs {cublas-lloyd, flash-kmeans}, each timed alternately with the kernel on the same data
      ft generate specs/kmeans/demo.yaml -o generated/lkr > /dev/null
      ft build generated/lkr/kmeans_demo -j 16 > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
      python3 -c "import torch, triton, flash_kmeans as f; print('torch', torch.__version__, 'triton', triton.__version__, 'flash-kmeans', f.__version__)" 2>&1 | tail -n 1
      ft bench generated/lkr/kmeans_demo --shapes 1048576x8x128,1048576x32x128,1048576x128x128,1048576x128x1024 \
        --reps 50 --warmup 10 --json "$out/demo_refs.jsonl" ;;
    kmablate)
      k=kmeans_tf32_abft-tb_128x64x32_w64x32
      ft generate specs/kmeans/demo.yaml -o generated/lab > /dev/null
      python3 experiments/scripts/kmeans_ablate.py generated/lab/kmeans_demo $k generated/lab/cut > /dev/null
      for p in generated/lab/kmeans_demo generated/lab/cut/*; do ft build "$p" -j 4 --kernels "$k" > "$out/build_$(basename "$p").txt" 2>&1 & done; wait
      tail -q -n 1 "$out"/build_*.txt
      for p in generated/lab/kmeans_demo generated/lab/cut/*; do
        FTGEN_BENCH_REFS=none ft bench "$p" --kernels "$k" --shapes 1048576x8x128,1048576x128x128,1048576x128x1024 --reps 10 --warmup 3 \
          --json "$out/ablate_$(basename "$p").jsonl" > /dev/null 2>&1
      done ;;
    kmtiles)
      ft generate experiments/specs/kmeans_tiles.yaml -o generated/lt > /dev/null
      ft build generated/lt/kmeans_tiles -j 16 > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
      FTGEN_BENCH_REFS=none ft bench generated/lt/kmeans_tiles --reps 10 --warmup 3 --json "$out/tiles.jsonl" > /dev/null 2>&1 ;;
    kmcheck)
      ft generate specs/kmeans/precisions.yaml -o generated/lc2 > /dev/null
      ft generate specs/kmeans/demo.yaml -o generated/lc2 > /dev/null
      ft build generated/lc2/kmeans_precisions -j 8 > "$out/build_p.txt" 2>&1 &
      ft build generated/lc2/kmeans_demo -j 8 > "$out/build_d.txt" 2>&1; wait
      for data in dist blobs; do
        FTGEN_KMEANS_DATA=$data FTGEN_KMEANS_ITERS=10 FTGEN_BENCH_REFS=none ft bench generated/lc2/kmeans_demo \
          --shapes 65536x32x128,100003x100x1000 --reps 3 --warmup 1 --json "$out/lloyd_demo_$data.jsonl" > /dev/null 2>&1
        FTGEN_KMEANS_DATA=$data FTGEN_KMEANS_ITERS=10 ft bench generated/lc2/kmeans_precisions --shapes 65536x32x128 \
          --reps 3 --warmup 1 --json "$out/lloyd_prec_$data.jsonl" > /dev/null 2>&1
      done
      ft bench generated/lc2/kmeans_precisions --inject 1 --reps 5 --warmup 2 --seed 5 --json "$out/prec_inject1.jsonl" > /dev/null 2>&1 ;;
    prof) bash experiments/scripts/gpu_profile.sh "$out" ;;
    f64dmma)  # fp64 on the tensor cores: sm80 DMMA m8n8k4 against Hopper's m16n8k4, unprotected and TMR, with cuBLAS DGEMM
      ft generate experiments/specs/gemm_fp64_dmma.yaml -o generated/fd > /dev/null
      ft build generated/fd/gemm_fp64_dmma -j 16 > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
      ft bench generated/fd/gemm_fp64_dmma --kernels '*_none_*' --shapes $big,$odd --reps 20 --warmup 5 --json "$out/f64_none.jsonl"
      ft bench generated/fd/gemm_fp64_dmma --kernels '*_tmr-*' --inject 16 --shapes $big,1000x1234x777,4097x3x129 --reps 10 --warmup 3 \
        --json "$out/f64_tmr_inject16.jsonl" ;;
    c90tmr)  # TMR on the sm90 kernels (specs/gemm/cutlass90_tmr.yaml: tf32, bf16, fp16; kernel and multikernel): clean builds,
      # then the inject builds with 16 faults per launch, each beside its unprotected twin and cuBLAS
      ft generate specs/gemm/cutlass90_tmr.yaml -o generated/ct > /dev/null
      ft build generated/ct/gemm_cutlass90_tmr -j 16 > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
      ft bench generated/ct/gemm_cutlass90_tmr --kernels '*[!j]' --shapes $big,1000x1234x777,4097x3x129 --reps 10 --warmup 3 \
        --json "$out/tmr_clean.jsonl"
      ft bench generated/ct/gemm_cutlass90_tmr --kernels '*_inj' --inject 16 --shapes $big,1000x1234x777,4097x3x129 --reps 10 \
        --warmup 3 --json "$out/tmr_inject16.jsonl" ;;
    f64abft)  # fp64 threadblock ABFT on the DMMA kernels (its own script: bench with and without faults, campaigns)
      LANE_SECONDS=$((${LANE_SECONDS:-540} - 10)) bash experiments/scripts/gpu_fp64_abft.sh "$out" > "$out/run.txt" 2>&1
      tail -n 30 "$out/run.txt" ;;
    gputests)  # the GPU test suite (every family x scheme, the references' drivers, ftgen.torch)
      FTGEN_GPU_ARCH=sm_90 python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/ > "$out/pytest_gpu.txt" 2>&1
      tail -n 15 "$out/pytest_gpu.txt" ;;
    f64search)  # the fp64 DMMA m16n8k4 space (tiles, stages, swizzle) searched, cuBLAS DGEMM alternated
      ft search experiments/specs/gemm_fp64_dmma_search.yaml -o generated/fs -j 16 --reps 10 --warmup 3 \
        --shapes $big --no-cache --json "$out/f64_search.jsonl" ;;
    c90wide)  # the sm90 tf32 space searched wider (tiles, clusters, swizzle, ping-pong, stream-K), cuBLAS TF32 alternated
      ft search experiments/specs/gemm_cutlass90_wide_search.yaml -o generated/cw -j 16 --reps 20 --warmup 5 \
        --shapes $big --no-cache --json "$out/wide_search.jsonl" ;;
    attnrefs)  # attention rows with SDPA-FLASH and SDPA-cuDNN alternated (fp16, none and efta, non-causal) at the seed's
      # 16k-token shapes, FA3's and an odd length; then the 128k-token shape protected (one fault per launch)
      ft generate specs/attention/demo.yaml -o generated/ar > /dev/null
      k='attn_f16_none_mma_d*_nc_*,attn_f16_abft-efta_mma_d*_nc_*'
      ft build generated/ar/attn_demo -j 16 --kernels "$k" > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
      ft bench generated/ar/attn_demo --kernels "$k" --shapes 4x32x4096,1x32x16384,4x16x4096,1x16x16384,1x8x4097 \
        --reps 10 --warmup 3 --json "$out/refs.jsonl"
      FTGEN_BENCH_REFS=none ft bench generated/ar/attn_demo --kernels 'attn_f16_abft-efta_mma_d128_nc_*' --inject 1 \
        --shapes 1x8x131072 --reps 3 --warmup 1 --json "$out/long_inject1.jsonl" ;;
    attnlong)  # the 128k-token shape, protected with one fault per launch and verified (its build from a fresh project)
      ft generate specs/attention/demo.yaml -o generated/al > /dev/null
      ft build generated/al/attn_demo -j 16 --kernels 'attn_f16_abft-efta_mma_d128_nc_*' > "$out/build.txt" 2>&1
      FTGEN_BENCH_REFS=none ft bench generated/al/attn_demo --kernels 'attn_f16_abft-efta_mma_d128_nc_*' --inject 1 \
        --shapes 1x8x131072 --reps 3 --warmup 1 --json "$out/long_inject1.jsonl" ;;
    attnmore)  # bf16 rows of every level (clean and one fault per launch), verified; the decoupled level's campaign
      ft generate experiments/specs/attention_bf16.yaml -o generated/ab > /dev/null
      ft build generated/ab/attn_bf16 -j 16 > "$out/build.txt" 2>&1; tail -n 1 "$out/build.txt"
      export FTGEN_BENCH_REFS=none  # (the SDPA drivers: attnrefs)
      ft bench generated/ab/attn_bf16 --reps 5 --warmup 2 --json "$out/bf16_clean.jsonl"
      ft bench generated/ab/attn_bf16 --kernels '*_inj' --inject 1 --reps 5 --warmup 2 --json "$out/bf16_inject1.jsonl"
      ft campaign specs/attention/campaign.yaml -o generated/ad --kernels 'attn_f16_abft-dec_mma_d128_nc_*' --trials 1000 \
        --dists normal,uniform,outliers --seed 33 --json "$out/campaign_decoupled.jsonl" ;;
    attnlev)
      ft campaign specs/attention/campaign.yaml -o generated/lv --kernels 'attn_f16_abft-strided_mma_d128_nc_*,attn_f16_abft-snvr_mma_d128_nc_*' \
        --trials 1000 --dists normal,uniform,outliers --seed 32 --json "$out/campaign_levels.jsonl" ;;
    attncamp)  # the efta level (fp16, head dim 128, causal and not): 1000 clean + 1000 faulty trials per distribution
      ft campaign specs/attention/campaign.yaml -o generated/la --kernels 'attn_f16_abft-efta_mma_d128_*' --trials 1000 \
        --dists normal,uniform,outliers --seed 31 --json "$out/campaign_efta.jsonl" ;;
    *) echo "unknown lane $name" >&2; exit 2 ;;
  esac
  exit $?
fi
out=${1:?usage: gpu_x4_session.sh OUT lane[:gpu] ...}; shift
mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpus.txt" 2>&1
names=()
i=0
for spec in "$@"; do
  name=${spec%%:*}; gpu=$i; [ "$spec" != "$name" ] && gpu=${spec#*:}
  names+=("$name"); mkdir -p "$out/$name"
  ( if [ "$gpu" = all ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES=$gpu; fi; s=$SECONDS
    timeout "${LANE_SECONDS:-540}" bash "$0" --lane "$name" "$out/$name" > "$out/$name/log.txt" 2>&1
    echo "lane $name (GPU $gpu): rc $? in $((SECONDS - s)) s" > "$out/$name/rc.txt" ) &
  i=$((i + 1))
done
wait
summ() {  # the campaign summaries of the JSON-lines files given
  python3 - "$@" <<'PY'
import json, sys, pathlib
for f in sys.argv[1:]:
    p = pathlib.Path(f)
    for line in (p.read_text().splitlines() if p.is_file() else []):
        c = json.loads(line).get("campaign") if line.startswith('{"campaign"') else None
        if c:
            s = c["significance"]
            at = [round(v["coverage"], 4) for k, v in c["coverage_at"].items() if k != "rule"]
            print(f"{p.name} {c['kernel'][-40:]}: {c['corrected']}/{c['significant']} = {c['coverage']:.5f}, false alarms "
                  f"{c['false_alarms']}/{c['clean_trials']}, tolerance {s['tolerance']:.3g} = {s['tolerance'] / max(s['max_clean_err'], 1e-300):.1f}x "
                  f"max clean, at 2x/10x/100x {at}, max clean score {c.get('max_clean_score')}, min significant score {c.get('min_significant_score')}")
PY
}
rows() {  # bench rows: kernel tail, shape, ms, x twin, x ref, error, detections, ok
  python3 - "$@" <<'PY'
import json, sys, pathlib
for f in sys.argv[1:]:
    p = pathlib.Path(f)
    for line in (p.read_text().splitlines() if p.is_file() else []):
        r = json.loads(line)
        if "shape" not in r or "kernel" not in r:
            continue
        s = "x".join(str(v) for v in r["shape"].values())
        det = "/".join(str(r.get(k, "-")) for k in ("faults_applied", "detected", "corrected", "recomputed", "false_alarms"))
        print(f"{p.stem[:14]:<14} {r['kernel'][-44:]:<44} {s:<15} {(r.get('ms') or {}).get('median', float('nan')):8.3f} "
              f"{r.get('x_unprot') or float('nan'):6.3f} {r.get('speedup_vs_ref') or float('nan'):6.3f} "
              f"{r.get('max_rel_err_injected', r.get('max_rel_err')) or 0:9.2e} {r.get('max_score_clean') or 0:6.3f} {det:>16} {r.get('ok')}")
PY
}
refs() {  # kmeans rows with refs: kernel tail, shape, ms, each reference's ms and x (its ms / the kernel's, alternated)
  python3 - "$@" <<'PY'
import json, sys, pathlib
for f in sys.argv[1:]:
    p = pathlib.Path(f)
    for line in (p.read_text().splitlines() if p.is_file() else []):
        r = json.loads(line)
        if "shape" not in r or "kernel" not in r:
            continue
        s = "x".join(str(v) for v in r["shape"].values())
        refs, x, t = r.get("refs") or {}, r.get("speedup_vs_refs") or {}, (r.get("ref_timings") or {}).get("flash-kmeans") or {}
        each = "  ".join(f"{n} {ms:.4f} x{x.get(n, float('nan')):.3f}" for n, ms in refs.items())
        pair = f"  (flash pair: kernel {t['kernel_ms']:.4f}, labels {t.get('label_agreement_fp64', 0):.4f})" if "kernel_ms" in t else ""
        miss = "".join(f"  [{n} missing: {why[:120]}]" for n, why in (r.get("refs_missing") or {}).items())
        print(f"{r['kernel'][-36:]:<36} {s:<16} {(r.get('ms') or {}).get('median', float('nan')):8.4f}  {each}{pair}{miss} {r.get('ok')}")
PY
}
for l in "${names[@]}"; do
  echo "==== $(cat "$out/$l/rc.txt" 2>/dev/null)"
  case $l in
    c90abft) grep -A40 "^run " "$out/c90abft/log.txt" | head -30 ;;
    promote) rows "$out"/promote/*.jsonl ;;
    c90camp) summ "$out"/c90camp/campaign_*.jsonl ;;
    fft) grep -E "^logn| avg| min|injection rows" "$out/fft/log.txt" | head -12 ;;
    tmr) grep -E "PASS|FAIL" "$out/tmr/log.txt" | head -12; tail -n 8 "$out/tmr/log.txt" ;;
    camp4096|campodd) summ "$out/$l"/campaign_*.jsonl; rows "$out/$l"/prepass_*.jsonl ;;
    simt) tail -n 4 "$out/simt/search.txt"; grep -E "error|failed" "$out/simt/log.txt" | head -5 ;;
    simtcamp) summ "$out"/simtcamp/*campaign*.jsonl; grep -E "error|failed|verified" "$out/simtcamp/log.txt" | tail -n 5 ;;
    fftcamp) tail -n 25 "$out/fftcamp/log.txt" ;;
    c90search) rows "$out"/c90search/abft_search.jsonl | sort -k4 -n | head -40 ;;
    c90tmr) rows "$out"/c90tmr/tmr_*.jsonl ;;
    gputests) grep -E "passed|failed|error" "$out/gputests/pytest_gpu.txt" | tail -n 5 ;;
    f64search) rows "$out"/f64search/f64_search.jsonl | sort -k3,3 -k6,6nr | head -12; tail -n 6 "$out/f64search/log.txt" ;;
    f64dmma) rows "$out"/f64dmma/f64_*.jsonl ;;
    c90wide) rows "$out"/c90wide/wide_search.jsonl | sort -k3,3 -k6,6nr | head -24; tail -n 6 "$out/c90wide/log.txt" ;;
    levels) rows "$out"/levels/abft_levels_*.jsonl | grep -v " True$" | head -20
            echo "rows ok: $(rows "$out"/levels/abft_levels_*.jsonl | grep -c " True$") of $(rows "$out"/levels/abft_levels_*.jsonl | wc -l)" ;;
    kmfast) rows "$out"/kmfast/demo.jsonl "$out"/kmfast/prec_inject1.jsonl "$out"/kmfast/min_blocks.jsonl; summ "$out"/kmfast/campaign_*.jsonl ;;
    kmrefs) refs "$out"/kmrefs/demo_refs.jsonl; grep -E "^torch|flash-kmeans|Traceback" "$out/kmrefs/log.txt" | head -8 ;;
    kmablate) rows "$out"/kmablate/ablate_*.jsonl ;;
    kmtiles) rows "$out"/kmtiles/tiles.jsonl | sort -k3,3 -k4,4n ;;
    kmcheck) rows "$out"/kmcheck/*.jsonl
             python3 -c "import json,glob; rs=[json.loads(l) for f in glob.glob('$out/kmcheck/lloyd_*.jsonl') for l in open(f)]; rs=[r for r in rs if 'lloyd_ok' in r]; print('lloyd rows', len(rs), 'ok', sum(r['lloyd_ok'] for r in rs), 'worst rel', max([r['lloyd_inertia_rel'] for r in rs] or [0]))" ;;
    prof) grep -A15 '^== ' "$out/prof/log.txt" | head -90 ;;
    sdpa) tail -n 12 "$out/sdpa/log.txt" ;;
    attnrefs) rows "$out"/attnrefs/*.jsonl; python3 -c "
import json,sys
for l in open('$out/attnrefs/refs.jsonl'):
    r=json.loads(l)
    if 'kernel' in r and 'shape' in r: print(r['kernel'][-34:], 'x'.join(map(str,r['shape'].values())), r.get('refs'), r.get('speedup_vs_refs'), list((r.get('refs_missing') or {}).values())[:1])
" 2>&1 | cut -c1-400 ;;
    attnlong) rows "$out"/attnlong/*.jsonl ;;
    attnmore) rows "$out"/attnmore/bf16_*.jsonl | awk '{print $NF}' | sort | uniq -c; summ "$out"/attnmore/campaign_*.jsonl ;;
    kmcamp|kmsites|kmbig|attncamp|attnlev) summ "$out/$l"/campaign_*.jsonl; grep -iE "error|Traceback" "$out/$l/log.txt" | head -5 ;;
  esac
done
for l in "${names[@]}"; do (cd "$out" && tar czf "$l.tar.gz" "$l" && rm -rf "$l"); done
ls -la "$out"
