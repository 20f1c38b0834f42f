#!/usr/bin/env bash
# The attention wgmma backend on one GPU, in one call: OUT [STEPS] (default: build bench inject)
#   build    generate SPEC (default experiments/specs/attention_wgmma_try.yaml) under generated/, build it (-j 16)
#   bench    every variant clean, alternated with its twin and SDPA FLASH / cuDNN (REPS, default 20; EXE_TIMEOUT s each, 120;
#            the step at most BENCH_SECONDS, 300)
#   inject   the *_inj variants with one fault per launch (at most BENCH_SECONDS)
#   probe    each built executable (PROBE_GLOB) alone at PROBE_SHAPE (default 1x2x512x512), 20 s each: exit code, last lines
#   profile  Nsight Compute's source counters of the first launch of PROFILE_KERNEL (a regex of the demangled name, default
#            the fused kernel, wg::kernel<; wg::encode_kernel for the K / V encoding) of each executable (PROFILE_GLOB) at PROFILE_SHAPE
#            (default 1x16x4096x4096): instructions executed per SASS instruction and per source line (src_*.sass.csv,
#            src_*.lines.txt by ncu_lines.py, in OUT/profile.tgz; the top lines in profile.txt). Where no cubin came out
#            of the executable (cuobjdump's message in src_*.log), join src_*.sass.csv here: nvcc -cubin -lineinfo of the
#            variant's .cu with the build's flags, nvdisasm -g -c of it, ncu_lines.py on the two
#   times    Nsight Compute's device time per kernel of each executable (PROFILE_GLOB) at PROFILE_SHAPE: its first
#            TIMES_COUNT (default 40) launches, one bench launch (ncu_times: OUT/ncu_SHAPE.csv and a summary per kernel)
#   campaign ftgen campaign SPEC (CAMPAIGN_KERNELS: a --kernels filter; TRIALS, default 200; DISTS, default
#            normal,uniform,outliers; CAMPAIGN_SITES: space-separated fault sites, one campaign each with every fault at
#            that site, into OUT/campaign_SITE.*, instead of one campaign over the level's sites)
# Prints a short table last; the JSON rows go under OUT. For figures of record set FTGEN_GIT_SHA and FTGEN_GIT_DIRTY
# (the device copy's .git may be stale: its headers would name an older commit).
set -u
out=$1; shift; mkdir -p "$out"
. experiments/scripts/gpu_common.sh
SPEC=${SPEC:-experiments/specs/attention_wgmma_try.yaml}
proj=generated/$(python3 -c "import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$SPEC")
for step in ${*:-build bench inject}; do
  case $step in
    build) gen_build "$SPEC" generated "$proj" ;;
    bench) ft "${BENCH_SECONDS:-300}" bench "$proj" --reps "${REPS:-20}" --warmup 5 --timeout "${EXE_TIMEOUT:-120}" --json "$out/clean.jsonl" > "$out/clean.txt" 2>&1; echo "bench rc $?"; t bench ;;
    inject) ft "${BENCH_SECONDS:-300}" bench "$proj" --kernels '*_inj' --inject 1 --reps "${REPS:-20}" --warmup 5 --timeout "${EXE_TIMEOUT:-120}" --json "$out/inject.jsonl" > "$out/inject.txt" 2>&1
            echo "inject rc $?"; t inject ;;
    probe) hung=; for exe in "$proj"/bin/${PROBE_GLOB:-*}; do
             echo "== $(basename "$exe")"; timeout 20 "$exe" --shapes "${PROBE_SHAPE:-1x2x512x512}" --reps 3 --warmup 1 2>&1 | tail -n 4
             rc=${PIPESTATUS[0]}; echo "rc $rc"; [ "$rc" = 124 ] && [ -z "$hung" ] && hung=$exe; done > "$out/probe.txt"
           # where the warps of the first hung launch wait (cuda-gdb attached to it)
           if [ -n "$hung" ] && command -v cuda-gdb > /dev/null; then
             "$hung" --shapes "${PROBE_SHAPE:-1x2x512x512}" --reps 3 --warmup 1 > /dev/null 2>&1 & pid=$!; sleep 6
             timeout 60 cuda-gdb -p $pid -batch -ex "info cuda kernels" -ex "info cuda warps" -ex "info cuda lanes" > "$out/gdb.txt" 2>&1
             kill -9 $pid 2> /dev/null; echo "== gdb of $(basename "$hung")" >> "$out/probe.txt"; head -c 3000 "$out/gdb.txt" >> "$out/probe.txt"
           fi; t probe ;;
    profile) for exe in "$proj"/bin/${PROFILE_GLOB:-*}; do
               rep="$out/src_$(basename "$exe")"
               timeout 150 ncu --kernel-name-base demangled --kernel-name regex:"${PROFILE_KERNEL:-wg::kernel<}" --launch-count 1 --section SourceCounters \
                 --section SpeedOfLight --section WarpStateStats --import-source yes -o "$rep" -f "$exe" --shapes "${PROFILE_SHAPE:-1x16x4096x4096}" --reps 1 \
                 --warmup 0 > "$rep.log" 2>&1; echo "$(basename "$exe") rc $?"
               ncu -i "$rep.ncu-rep" --page details --section WarpStateStats --section SpeedOfLight > "$rep.details.txt" 2>> "$rep.log"
               for what in cuda sass; do ncu -i "$rep.ncu-rep" --page source --csv --print-source "$what" > "$rep.$what.csv" 2>> "$rep.log"; done
               rm -f "$rep.ncu-rep"
               ncu_lines "$rep" "$exe"  # per source line (gpu_common.sh)
             done > "$out/profile.txt"; tar czf "$out/profile.tgz" -C "$out" $(cd "$out" && ls src_*) && rm -f "$out"/src_*; t profile ;;
    times) for exe in "$proj"/bin/${PROFILE_GLOB:-*}; do echo "== $(basename "$exe")"; ncu_times "$exe" "${TIMES_COUNT:-40}" "${PROFILE_SHAPE:-1x16x4096x4096}"; done \
             > "$out/times.txt" 2>&1; t times ;;
    campaign) for site in ${CAMPAIGN_SITES:-all}; do
                tag=${site/#all/}; tag=${tag:+_$tag}
                ft 400 campaign "$SPEC" -o generated ${CAMPAIGN_KERNELS:+--kernels "$CAMPAIGN_KERNELS"} --trials "${TRIALS:-200}" \
                  --dists "${DISTS:-normal,uniform,outliers}" $([ "$site" = all ] || echo "--site $site") \
                  --json "$out/campaign$tag.jsonl" > "$out/campaign$tag.txt" 2>&1; echo "campaign$tag rc $?"; t "campaign$tag"
              done ;;
  esac
done
for f in probe profile times clean inject campaign campaign_{qk,rowmax,exp,p16,rowsum,rescale,o,inv_l}; do
  [ -f "$out/$f.txt" ] && { echo "== $f"; tail -n 25 "$out/$f.txt"; }; done
