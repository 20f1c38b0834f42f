#!/usr/bin/env bash
# GPU runs of the gemm SIMT family, for the device machine (H100/H200). Usage:
#   bash experiments/scripts/gpu_gemm_modes.sh check OUT     # every ABFT level: correctness with faults, speed, short trials
# Everything goes through the ftgen CLI (python3 -m ftgen.cli with PYTHONPATH=repo); full JSON lines land in
# OUT, a short summary is printed last.
set -uo pipefail
mode=${1:?mode}
out=${2:?output dir}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
export FTGEN_CACHE_DIR=/tmp/ftgen-cache
gen=/tmp/ftgen-gen

summary() {  # summary of bench JSON lines: kernel shape ms ref_ms ratio err inj/det/corr ok
  python3 - "$@" <<'EOF'
import json, sys
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if "provenance" in r:
            continue
        sh = "x".join(str(v) for v in (r.get("shape") or {}).values())
        ms = (r.get("ms") or {}).get("median"); ref = (r.get("ref") or {}).get("ms")
        ratio = f"{ref / ms:.3f}" if ms and ref else "-"
        ft = f"{r.get('injected', '-')}/{r.get('detected', '-')}/{r.get('corrected', '-')}/fa{r.get('false_alarms', '-')}"
        err = (r.get("error") or {}).get("message", "")[:50]
        print(f"{r['kernel'][5:52]:47s} {sh:16s} {ms if ms is None else round(ms, 4)!s:>8} {ref if ref is None else round(ref, 4)!s:>8} {ratio:>6} "
              f"{r.get('max_rel_err', float('nan')):.1e} {ft:>14} {r.get('ok')} {err}")
EOF
}

trials_summary() {
  python3 - "$@" <<'EOF'
import json, sys
for path in sys.argv[1:]:
  allrows = [json.loads(l) for l in open(path) if l.startswith("{\"trial\"")]
  groups = {}
  for r in allrows:
    groups.setdefault((r["kernel"], r["dist"], r["injected"] > 0 or "fault" in r), []).append(r)
  for (k, dist, _), rows in sorted(groups.items()):
    inj = [r for r in rows if r["injected"]]
    sig = [r for r in inj if r["significant"]]
    det = [r for r in sig if r["detected"]]
    okc = [r for r in sig if r["ok"]]
    fa = [r for r in rows if r["false_alarm"]]
    clean_scores = sorted(r["score"] for r in rows if not r["injected"])
    print(f"{k[5:50]:45s} {dist:10s} trials={len(rows)} injected={len(inj)} significant={len(sig)} detected={len(det)} "
          f"corrected_ok={len(okc)} false_alarms={len(fa)} not_ok={sum(1 for r in rows if not r['ok'])} "
          f"max_clean_score={clean_scores[-1] if clean_scores else '-'}")
EOF
}

# the square and irregular sweep of the tensor-core modes (tc-sweep, tc-prepass-sweep)
tc_sweep=1024x1024x1024,2048x2048x2048,3072x3072x3072,5120x5120x5120,6144x6144x6144,7168x7168x7168,128x128x1024,256x256x1024,480x480x1024,256x256x256,1000x1234x777,3001x2999x1025

# SPEC PROJECT PREFIX ODD_KERNELS ODD_SHAPES ODD_FAULTS ODD_REPS SPEED_FAULTS: generate and build SPEC; the
# ODD_KERNELS on odd shapes with faults; every variant at 4096^3 and 8192^3 clean; the injection builds
# there with faults. Files: OUT/PREFIX{check_inject,speed_clean,speed_inject}.jsonl
check_and_speed() {
  local spec=$1 proj=$2 pre=$3 oddk=$4 odd=$5 nodd=$6 reps=$7 nspeed=$8
  ft generate "$spec" -o $gen > /dev/null || exit 1
  ft build $gen/$proj -j 16 --arch sm_90 || exit 3
  ft bench $gen/$proj --kernels "$oddk" --shapes $odd --inject $nodd --reps $reps --warmup 1 \
     --json "$out/${pre}check_inject.jsonl" > /dev/null 2> "$out/${pre}check_inject.err"
  echo "bench (inject, odd shapes) rc=$?"
  ft bench $gen/$proj --shapes 4096x4096x4096,8192x8192x8192 --reps 10 --warmup 3 \
     --json "$out/${pre}speed_clean.jsonl" > /dev/null 2> "$out/${pre}speed_clean.err"
  echo "bench (speed, no faults) rc=$?"
  ft bench $gen/$proj --kernels '*_inj' --shapes 4096x4096x4096,8192x8192x8192 --inject $nspeed --reps 10 --warmup 3 \
     --json "$out/${pre}speed_inject.jsonl" > /dev/null 2> "$out/${pre}speed_inject.err"
  echo "bench (speed, $nspeed faults per launch) rc=$?"
}

# SPEC PROJECT PREFIX ODD_SHAPES: check_and_speed with 8 faults on the odd shapes (3 reps) and 16 at speed, then the
# error tails and the summaries of the three files
check_speed_report() {
  check_and_speed "$1" "$2" "$3" '*_inj' "$4" 8 3 16
  tail -n 3 "$out"/*.err
  summary "$out/${3}check_inject.jsonl"
  summary "$out/${3}speed_clean.jsonl" "$out/${3}speed_inject.jsonl"
}

# SPEC PREFIX SEED: `ftgen campaign` of SPEC with TRIALS (default 1000) clean + faulty trials per distribution;
# files OUT/PREFIX{campaign.jsonl,campaign.png,campaign.log}
run_campaign() {
  ft campaign "$1" --trials ${TRIALS:-1000} --seed "$3" -o $gen \
     --json "$out/${2}campaign.jsonl" --plot "$out/${2}campaign.png" 2> "$out/${2}campaign.log"
  echo "campaign rc=$?"; grep -v '^\[' "$out/${2}campaign.log" | tail -12
}

# KERNELS...: generate FTGEN_NCU_SPEC (default experiments/scripts/gpu_abft_check.yaml) and build only the listed
# kernels; sets proj (the project's name)
build_listed() {
  local spec=${FTGEN_NCU_SPEC:-experiments/scripts/gpu_abft_check.yaml}
  proj=$(spec_project "$spec")
  build_version "$spec" $gen "" -j 16 --arch sm_90 --kernels "$(IFS=,; echo "$*")" || exit $?
}

case "$mode" in
levels)
  # every ABFT level vs unprotected vs cuBLAS (clean, with faults), then the campaign with CAMPAIGN=1
  ft generate specs/gemm/abft_levels.yaml -o $gen > /dev/null && ft build $gen/sgemm_abft_levels -j 16 2>> "$out/levels.log" || exit 3
  lv=2048x2048x2048,4096x4096x4096,8192x8192x8192,128x128x1024,256x256x1024,480x480x1024,256x256x256,1000x1234x777
  ft bench $gen/sgemm_abft_levels --shapes $lv --reps 10 --warmup 3 --json "$out/abft_levels_clean.jsonl" > /dev/null 2>> "$out/levels.log"
  echo "levels clean rc=$?"
  ft bench $gen/sgemm_abft_levels --kernels '*_inj' --shapes $lv --inject 16 --reps 10 --warmup 3 --json "$out/abft_levels_inject.jsonl" > /dev/null 2>> "$out/levels.log"
  echo "levels inject rc=$?"
  grep -E "^error" "$out/levels.log"
  python3 experiments/scripts/summarize_gemm.py "$out/abft_levels_clean.jsonl" "$out/abft_levels_inject.jsonl"
  ;;
campaign)
  # CAMPAIGN_SPEC (default specs/gemm/abft_campaign.yaml), PREFIX of the output files (default abft_)
  run_campaign ${CAMPAIGN_SPEC:-specs/gemm/abft_campaign.yaml} ${PREFIX:-abft_} ${SEED:-1}
  ;;
tb-perf)
  # threadblock-level ABFT vs unprotected, same tilings, registers for 1 or 2 blocks per SM
  check_and_speed experiments/specs/gemm_abft_tb_perf.yaml sgemm_abft_tb_perf tb_ '*_inj' 1x1x1,1000x1234x777,257x129x1031 8 3 16
  tail -3 "$out"/*.err
  summary "$out/tb_check_inject.jsonl" "$out/tb_speed_clean.jsonl" "$out/tb_speed_inject.jsonl"
  ;;
prepass)
  # threadblock ABFT with pre-pass reference checksums vs the fused design vs unprotected; faults on odd
  # shapes, split-K, fp64; clean and faulty trials of three input distributions
  check_and_speed specs/gemm/abft_tb_prepass.yaml sgemm_abft_tb_prepass pre_ '*_inj' 1x1x1,1000x1234x777,257x129x1031,2048x2048x2048 8 3 16
  for k in gemm_f32_abft-tb-i16_128x128x16_w32x64_t8x8_s3_prepass_inj gemm_f64_abft-tb-i4_64x64x8_w32x32_t4x8_s3_prepass_inj; do
    for d in normal uniform loguniform; do
      $gen/sgemm_abft_tb_prepass/bin/$k --trials ${TRIALS:-300} --inject 0 --shapes 512x512x1024 --dist $d --seed 1 > "$out/trials_${k}_${d}_clean.jsonl"
      $gen/sgemm_abft_tb_prepass/bin/$k --trials ${TRIALS:-300} --inject 1 --shapes 512x512x1024 --dist $d --seed 100001 > "$out/trials_${k}_${d}_fault.jsonl"
    done
  done
  cat "$out"/trials_*.jsonl > "$out/pre_trials.jsonl"; rm "$out"/trials_*_*.jsonl
  tail -3 "$out"/*.err
  summary "$out/pre_check_inject.jsonl" | grep -v " True" ; echo "(check rows not ok above, if any)"
  summary "$out/pre_speed_clean.jsonl" "$out/pre_speed_inject.jsonl"
  trials_summary "$out/pre_trials.jsonl"
  ;;
tc)
  # threadblock ABFT on the CUTLASS tf32x3 tensor-core GEMM vs its unprotected kernel vs cuBLAS SGEMM:
  # faults on odd shapes, 4096^3 / 8192^3 clean and with 16 faults, then `ftgen campaign` of
  # experiments/specs/gemm_abft_tc_campaign.yaml (TRIALS clean + TRIALS faulty per distribution, default 1000)
  check_speed_report experiments/specs/gemm_abft_tc.yaml gemm_abft_tc tc_ 1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
  run_campaign experiments/specs/gemm_abft_tc_campaign.yaml tc_ ${SEED:-7}
  ;;
tc-prepass)
  # threadblock ABFT with the reference checksums from a pre-pass (ref_checksums: prepass) beside the fused design
  # and the unprotected kernel: faults on odd shapes, 4096^3 / 8192^3 clean and with 16 faults
  # (experiments/specs/gemm_abft_tc_prepass.yaml); the campaign is mode tc-prepass-campaign
  check_speed_report experiments/specs/gemm_abft_tc_prepass.yaml gemm_abft_tc_prepass tcpre_ 1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
  ;;
tc-prepass-times)
  # each kernel of one launch of the listed kernels of FTGEN_NCU_SPEC (default experiments/specs/gemm_abft_tc_prepass.yaml: the pre-passes and the
  # GEMM; ncu at the application's clocks) at SHAPE (default 4096x4096x4096)
  shift 2
  FTGEN_NCU_SPEC=${FTGEN_NCU_SPEC:-experiments/specs/gemm_abft_tc_prepass.yaml} build_listed "$@"
  for k in "$@"; do
    echo "== $k"
    timeout 200 ncu --clock-control none -s ${NCU_SKIP:-6} -c ${NCU_COUNT:-6} --metrics gpu__time_duration.sum,smsp__inst_executed.sum \
      $gen/$proj/bin/$k --shapes ${SHAPE:-4096x4096x4096} --reps 2 --warmup 1 --no-ref 2>&1 | tee "$out/times_$k.txt" \
      | grep -E "^  [a-zA-Z_]|gpu__time|inst_executed" | cut -c1-90
  done
  ;;
tc-prepass-sweep)
  # the prepass and fused tensor-core ABFT (interval 16, 128x128x32 row-major kernels of experiments/specs/gemm_abft_tc_prepass.yaml)
  # with the unprotected kernel on the square and irregular sweeps: clean, then the injection builds with 16 faults
  k='*-i16_cutlass_128x128x32_w64x32x32_i16x8x8_s4_a4_sw8_rr*,*_none_cutlass_128x128x32_w64x32x32_i16x8x8_s4_a4_sw8_rr'
  ft generate experiments/specs/gemm_abft_tc_prepass.yaml -o $gen > /dev/null && ft build $gen/gemm_abft_tc_prepass -j 16 --kernels "$k" > /dev/null || exit 3
  ft bench $gen/gemm_abft_tc_prepass --kernels "$k" --shapes $tc_sweep --reps 10 --warmup 3 --json "$out/tcpre_sweep_clean.jsonl" > /dev/null 2> "$out/tcpre_sweep.err"
  echo "sweep clean rc=$?"
  ft bench $gen/gemm_abft_tc_prepass --kernels '*-i16_cutlass_128x128x32_w64x32x32_i16x8x8_s4_a4_sw8_rr*_inj' --shapes $tc_sweep --inject 16 --reps 10 --warmup 3 \
     --json "$out/tcpre_sweep_inject.jsonl" > /dev/null 2>> "$out/tcpre_sweep.err"
  echo "sweep inject rc=$?"
  tail -n 3 "$out/tcpre_sweep.err"
  ;;
tc-prepass-intervals)
  # the prepass tensor-core ABFT at intervals 16..128 (experiments/specs/gemm_abft_tc_prepass_intervals.yaml): odd shapes with
  # faults, 4096^3 / 8192^3 clean and with 16 faults
  check_speed_report experiments/specs/gemm_abft_tc_prepass_intervals.yaml gemm_abft_tc_prepass_intervals tcint_ 1000x1234x777,257x129x1031,2048x2048x2048
  ;;
tc-prepass-tiles)
  # the prepass tensor-core ABFT on 64x128 and 128x64 threadblock tiles (two blocks per SM) beside 128x128
  # (experiments/specs/gemm_abft_tc_prepass_tiles.yaml): odd shapes with faults, 4096^3 / 8192^3 clean and with 16 faults
  check_speed_report experiments/specs/gemm_abft_tc_prepass_tiles.yaml gemm_abft_tc_prepass_tiles tctiles_ 1000x1234x777,257x129x1031,2048x2048x2048
  ;;
tc-prepass-campaign)
  run_campaign experiments/specs/gemm_abft_tc_prepass_campaign.yaml tcpre_ ${SEED:-7}
  ;;
tc-prepass-once)
  # the prepass tensor-core ABFT with one checkpoint per tile (abft_once_kernel) beside interval 16 and the unprotected
  # kernel (experiments/specs/gemm_abft_tc_prepass_once.yaml): odd shapes with faults (online, detect, column-major operands),
  # 4096^3 / 8192^3 clean and with 16 faults
  check_speed_report experiments/specs/gemm_abft_tc_prepass_once.yaml gemm_abft_tc_prepass_once tconce_ 1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
  ;;
tc-concurrent)
  # ref_checksums: concurrent (the reference pre-pass beside the GEMM on a second stream, the check kernel after both)
  # next to prepass with one checkpoint and the unprotected kernel (specs/gemm/abft_tc_concurrent.yaml): odd shapes
  # with faults, 4096^3 / 8192^3 clean and with 16 faults; then the stream modes (FTGEN_ABFT_SIDE serial / high / low)
  # of the concurrent kernels in turn, ROUNDS rounds (default 2), with 16 and with 1 fault per launch
  check_speed_report specs/gemm/abft_tc_concurrent.yaml gemm_abft_tc_concurrent tcconc_ 1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
  for rep in $(seq 1 "${ROUNDS:-2}"); do
    for nf in 16 1; do
      for side in serial high low; do
        FTGEN_ABFT_SIDE=$side ft bench $gen/gemm_abft_tc_concurrent --kernels '*_prepass_inj,*rr_conc_cs128_inj' \
          --shapes 4096x4096x4096,8192x8192x8192 --inject $nf --reps 10 --warmup 3 \
          --json "$out/tcconc_side_${side}_f${nf}_$rep.jsonl" > /dev/null 2>> "$out/tcconc_side.err"
        echo "side $side faults $nf round $rep rc=$?"
      done
    done
  done
  python3 - "$out" <<'PY'
import glob, json, statistics, sys
cell = {}
for f in glob.glob(f"{sys.argv[1]}/tcconc_side_*.jsonl"):
    side, nf = f.rsplit("/", 1)[1].split("_")[2:4]
    for line in open(f):
        r = json.loads(line)
        if "paired" not in r:
            continue
        k = ("conc" if "_conc" in r["kernel"] else "prepass", nf, "x".join(str(r["shape"][d]) for d in "mnk"))
        c = cell.setdefault(k, {}).setdefault(side, {"x": [], "ok": True})
        c["x"].append(r["paired"]["x_unprotected"])
        c["ok"] &= bool(r.get("ok")) and not r.get("false_alarms")
print(f"{'kernel':8s} {'faults':6s} {'shape':16s} {'serial':>9s} {'high':>9s} {'low':>9s}   (median x unprotected, paired)")
for (k, nf, sh), sides in sorted(cell.items()):
    row = [f"{statistics.median(sides[s]['x']):.3f}{'' if sides[s]['ok'] else '!'}" if s in sides else "-" for s in ("serial", "high", "low")]
    print(f"{k:8s} {nf:6s} {sh:16s} " + " ".join(f"{x:>9s}" for x in row))
PY
  ;;
tc-concurrent-ab)
  # the concurrent design's kernels (specs/gemm/abft_tc_concurrent.yaml, '*rr_conc*': online and detect with injection,
  # online without) A/B against the headers in AB_DIR (default ab/prev: `git show COMMIT:templates/gemm/cutlass_abft.cuh`
  # and cutlass_tmr.cuh there), REPS rounds (default 3) with 16 and with 1 fault per launch at 4096^3 and 8192^3; the
  # working tree's build on odd shapes with 8 faults per launch (online and detect); then the campaign (TRIALS, SEED;
  # CAMPAIGN=0: none). AB_DIR may list several directories (B:C:...)
  abk='*rr_conc*'; odd=1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
  INJECT=16 REPS=${REPS:-3} bash experiments/scripts/gpu_gemm_ab.sh "$out/ab_f16" "${AB_DIR:-ab/prev}" specs/gemm/abft_tc_concurrent.yaml "$abk" 4096x4096x4096,8192x8192x8192
  FTGEN_CACHE_DIR=/tmp/ab-cache-A ft bench /tmp/ab-A/gemm_abft_tc_concurrent --kernels '*rr_conc_cs128_inj' --shapes $odd --inject 8 --reps 3 \
    --warmup 1 --json "$out/tcconc_ab_check_inject.jsonl" > /dev/null 2> "$out/tcconc_ab_check_inject.err"
  echo "odd shapes with faults rc=$?"; summary "$out/tcconc_ab_check_inject.jsonl"
  INJECT=1 REPS=${REPS:-3} bash experiments/scripts/gpu_gemm_ab.sh "$out/ab_f1" "${AB_DIR:-ab/prev}" specs/gemm/abft_tc_concurrent.yaml "$abk" 4096x4096x4096,8192x8192x8192
  [ "${CAMPAIGN:-1}" = 0 ] || run_campaign specs/gemm/abft_tc_concurrent_campaign.yaml tcconc_ ${SEED:-7}
  ;;
tc-concurrent-times)
  # each kernel of the concurrent design's launches under ncu (serialized: durations, not the overlap) at SHAPE
  # (default 4096^3): the listed kernels with NCU_FAULTS (default 16 1 0) faults per launch (builds without injection
  # code: 0 only); HEADERS=DIR[:DIR...]: the same again built with the tensor-core headers of each DIR
  shift 2
  FTGEN_NCU_SPEC=specs/gemm/abft_tc_concurrent.yaml build_listed "$@"
  versions=("$gen/$proj")
  IFS=: read -r -a hdirs <<< "${HEADERS:-}"
  for i in "${!hdirs[@]}"; do
    FTGEN_CACHE_DIR=/tmp/ncu-cache-v$i build_version specs/gemm/abft_tc_concurrent.yaml /tmp/ncu-v$i "${hdirs[$i]}" \
      -j 16 --arch sm_90 --kernels "$(IFS=,; echo "$*")" > /dev/null || exit $?
    versions+=("/tmp/ncu-v$i/$proj")
  done
  for v in "${!versions[@]}"; do
    for k in "$@"; do
      for nf in ${NCU_FAULTS:-16 1 0}; do
        case $k in *_inj) ;; *) [ "$nf" = 0 ] || continue ;; esac
        echo "== version $v (${versions[$v]}): $k, $nf faults per launch"
        timeout 200 ncu --clock-control none -c ${NCU_COUNT:-40} --metrics gpu__time_duration.sum \
          ${versions[$v]}/bin/$k --shapes ${SHAPE:-4096x4096x4096} --reps 2 --warmup 1 --no-ref --inject $nf > "$out/times_v${v}_${k}_f$nf.txt" 2>&1
        python3 - "$out/times_v${v}_${k}_f$nf.txt" <<'PY'
import re, sys
name = None
for line in open(sys.argv[1]):
    m = re.match(r"^  (\S.*?) (\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))", line)
    if m:  # the kernel's name without namespaces and template arguments, and its grid
        name = re.sub(r"<.*", "", m.group(1).split("(")[0]).split("::")[-1] + " " + m.group(2)
    elif "gpu__time_duration.sum" in line and name and not name.startswith("fill_random"):
        print(f"  {name[:60]:60s} {' '.join(line.split()[1:])}")
PY
      done
    done
  done
  ;;
tc-concurrent-campaign)
  run_campaign specs/gemm/abft_tc_concurrent_campaign.yaml tcconc_ ${SEED:-7}
  ;;
tc-prepass-once-campaign)
  run_campaign experiments/specs/gemm_abft_tc_prepass_once_campaign.yaml tconce_ ${SEED:-7}
  ;;
tc-layouts)
  # the tensor-core threadblock ABFT for every layout of A and B: faults on odd shapes and 4096^3, then TRIALS
  # clean + faulty trials per distribution of each kernel (experiments/specs/gemm_abft_tc_layouts.yaml)
  ft generate experiments/specs/gemm_abft_tc_layouts.yaml -o $gen > /dev/null && ft build $gen/gemm_abft_tc_layouts -j 16 > /dev/null || exit 3
  ft bench $gen/gemm_abft_tc_layouts --shapes 1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048,4096x4096x4096 \
     --inject 8 --reps 3 --warmup 1 --json "$out/tc_layouts_check.jsonl" > /dev/null 2> "$out/tc_layouts.err"
  echo "check rc=$?"
  for k in $(ls $gen/gemm_abft_tc_layouts/bin); do
    for d in normal uniform loguniform; do
      $gen/gemm_abft_tc_layouts/bin/$k --trials ${TRIALS:-200} --inject 0 --shapes 512x512x1024 --dist $d --seed 1 >> "$out/tc_layouts_trials.jsonl"
      $gen/gemm_abft_tc_layouts/bin/$k --trials ${TRIALS:-200} --inject 1 --shapes 512x512x1024 --dist $d --seed 100001 >> "$out/tc_layouts_trials.jsonl"
    done
  done
  tail -n 3 "$out/tc_layouts.err"
  summary "$out/tc_layouts_check.jsonl"
  trials_summary "$out/tc_layouts_trials.jsonl"
  ;;
tc-search)
  # tile candidates of the tensor-core ABFT (experiments/specs/gemm_abft_tc_search.yaml) at 4096^3 and 8192^3 with 16 faults
  # per launch, each paired with its unprotected kernel
  ft generate experiments/specs/gemm_abft_tc_search.yaml -o $gen > /dev/null && ft build $gen/gemm_abft_tc_search -j 16 > /dev/null || exit 3
  ft bench $gen/gemm_abft_tc_search --shapes 4096x4096x4096,8192x8192x8192 --inject 16 --reps 10 --warmup 3 \
     --json "$out/tc_search_inject.jsonl" > /dev/null 2> "$out/tc_search.err"
  echo "bench rc=$?"; tail -n 3 "$out/tc_search.err"
  python3 - "$out/tc_search_inject.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "kernel" not in r:
        continue
    p = r.get("paired") or {}
    print(f"{r['kernel'][12:80]:68s} {r['shape']['m']:5d} {r['ms']['median']:8.3f} x cuBLAS {r['ref']['ms'] / r['ms']['median']:.3f}"
          f" x unprot {p.get('x_unprotected', float('nan')):.3f} ({p.get('unprotected_ms', float('nan')):.3f} ms)"
          f" inj/det/corr {r.get('injected')}/{r.get('detected')}/{r.get('corrected')} ok {r['ok']}")
PY
  ;;
tc-sweep)
  # the tensor-core threadblock ABFT (128x128 tiles of experiments/specs/gemm_abft_tc.yaml) on the square and irregular sweeps:
  # clean, then the injection builds with 16 faults per launch
  ft generate experiments/specs/gemm_abft_tc.yaml -o $gen > /dev/null && ft build $gen/gemm_abft_tc -j 16 --kernels '*_128x128x32_*' > /dev/null || exit 3
  ft bench $gen/gemm_abft_tc --kernels '*_128x128x32_*' --shapes $tc_sweep --reps 10 --warmup 3 --json "$out/tc_sweep_clean.jsonl" > /dev/null 2> "$out/tc_sweep.err"
  echo "sweep clean rc=$?"
  ft bench $gen/gemm_abft_tc --kernels '*_128x128x32_*_inj' --shapes $tc_sweep --inject 16 --reps 10 --warmup 3 --json "$out/tc_sweep_inject.jsonl" > /dev/null 2>> "$out/tc_sweep.err"
  echo "sweep inject rc=$?"
  tail -n 3 "$out/tc_sweep.err"
  summary "$out/tc_sweep_clean.jsonl" "$out/tc_sweep_inject.jsonl"
  ;;
check)
  check_and_speed experiments/scripts/gpu_abft_check.yaml abft_check "" '*' 1x1x1,1000x1234x777,257x129x1031,2048x2048x2048 8 5 64
  for k in gemm_f32_abft-tb-i64_128x128x8_w32x64_t8x8_s4_inj gemm_f64_abft-tb-i64_64x64x8_w32x32_t4x8_s3_inj gemm_f32_abft-thread-i64_128x128x8_w32x64_t8x8_s4_inj; do
    for d in normal loguniform; do
      $gen/abft_check/bin/$k --trials 150 --inject 0 --shapes 512x512x1024 --dist $d --seed 1 > "$out/trials_${k}_${d}_clean.jsonl"
      $gen/abft_check/bin/$k --trials 150 --inject 1 --shapes 512x512x1024 --dist $d --seed 100001 > "$out/trials_${k}_${d}_fault.jsonl"
    done
  done
  tail -3 "$out"/*.err
  summary "$out/check_inject.jsonl" "$out/speed_clean.jsonl" "$out/speed_inject.jsonl"
  trials_summary "$out"/trials_*.jsonl
  ;;
profile)
  # correctness with faults on awkward shapes, hardware counters of the unprotected vs ABFT kernels, trials
  ft generate experiments/scripts/gpu_abft_check.yaml -o $gen > /dev/null || exit 1
  ft build $gen/abft_check -j 16 --arch sm_90 || exit 3
  ft bench $gen/abft_check --shapes 1000x1234x777,257x129x1031,2048x2048x2048 --inject 8 --reps 3 --warmup 1 \
     --json "$out/check_inject.jsonl" > /dev/null 2> "$out/check_inject.err"
  echo "bench (inject) rc=$?"
  for k in gemm_f32_none_128x128x8_w32x64_t8x8_s4 gemm_f32_abft-tb-i64_128x128x8_w32x64_t8x8_s4 gemm_f32_abft-thread-i64_128x128x8_w32x64_t8x8_s4_inj; do
    timeout 120 ncu --clock-control none -k regex:gemm_kernel -s 3 -c 1 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section SchedulerStats --section LaunchStats \
      $gen/abft_check/bin/$k --shapes 4096x4096x4096 --reps 2 --warmup 1 --no-ref > "$out/ncu_$k.txt" 2>&1
    echo "== $k"; grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issued Warp|No Eligible|Stall|Warp Cycles Per Issued|Compute \(SM\) Throughput|Dynamic Shared|Eligible Warps" "$out/ncu_$k.txt" | head -24
  done
  for k in gemm_f32_abft-tb-i64_128x128x8_w32x64_t8x8_s4_inj gemm_f32_abft-thread-i64_128x128x8_w32x64_t8x8_s4_inj gemm_f64_abft-thread-i64_64x64x8_w32x32_t4x8_s3_inj; do
    for d in normal loguniform; do
      $gen/abft_check/bin/$k --trials 150 --inject 0 --shapes 512x512x1024 --dist $d --seed 1 > "$out/trials_${k}_${d}_clean.jsonl"
      $gen/abft_check/bin/$k --trials 150 --inject 1 --shapes 512x512x1024 --dist $d --seed 100001 > "$out/trials_${k}_${d}_fault.jsonl"
    done
  done
  cat "$out"/trials_*.jsonl > "$out/trials_all.jsonl"; rm "$out"/trials_*_*.jsonl
  summary "$out/check_inject.jsonl"
  trials_summary "$out/trials_all.jsonl"
  ;;
final-a)
  # fp32: search over >= 50 variants (twice: the repeat must compile and run nothing), then the full
  # shape sweep (square, irregular, odd) with the sweep candidates; best variant vs cuBLAS per shape
  ft search specs/gemm/sgemm_search.yaml --reps 10 --warmup 3 -j 16 -o $gen --json "$out/sgemm_search.jsonl" 2> "$out/search.log"
  echo "search rc=$?"; grep -E "^search:" "$out/search.log"
  ft search specs/gemm/sgemm_search.yaml --reps 10 --warmup 3 -j 16 -o $gen --json "$out/sgemm_search_repeat.jsonl" 2>> "$out/search.log" > /dev/null
  echo "repeat rc=$?"; grep -E "^search:" "$out/search.log" | tail -1
  ft search experiments/specs/gemm_sweep.yaml --shapes specs/gemm/shapes/gemm_sweep_fp32.yaml --reps 10 --warmup 3 -j 16 -o $gen \
     --json "$out/sgemm_sweep.jsonl" 2>> "$out/search.log" > "$out/sgemm_sweep_table.txt"
  echo "sweep rc=$?"; grep -E "^search:|dispatch header" "$out/search.log" | tail -2
  cp $gen/sgemm_sweep-search/sgemm_sweep_dispatch.h $gen/sgemm_sweep-search/sgemm_sweep_best.yaml "$out/" 2>/dev/null
  rm -f "$out/sgemm_search_repeat.jsonl"
  python3 experiments/scripts/summarize_gemm.py "$out/sgemm_sweep.jsonl" "$out/sgemm_search.jsonl"
  ;;
final-b)
  # fp64 sweep; every ABFT level vs unprotected vs cuBLAS (clean, with faults); fault campaigns
  ft search experiments/specs/gemm_dgemm_search.yaml --shapes specs/gemm/shapes/gemm_sweep_fp64.yaml --reps 10 --warmup 3 -j 16 -o $gen \
     --json "$out/dgemm_sweep.jsonl" 2> "$out/final_b.log" > /dev/null
  echo "fp64 sweep rc=$?"; grep -E "^search:" "$out/final_b.log"
  ft generate specs/gemm/abft_levels.yaml -o $gen > /dev/null && ft build $gen/sgemm_abft_levels -j 16 2>> "$out/final_b.log"
  lv=2048x2048x2048,4096x4096x4096,8192x8192x8192,128x128x1024,256x256x1024,480x480x1024,256x256x256,1000x1234x777
  ft bench $gen/sgemm_abft_levels --shapes $lv --reps 10 --warmup 3 --json "$out/abft_levels_clean.jsonl" > /dev/null 2>> "$out/final_b.log"
  echo "levels clean rc=$?"
  ft bench $gen/sgemm_abft_levels --kernels '*_inj' --shapes $lv --inject 16 --reps 10 --warmup 3 --json "$out/abft_levels_inject.jsonl" > /dev/null 2>> "$out/final_b.log"
  echo "levels inject rc=$?"
  ft campaign specs/gemm/abft_campaign.yaml --trials ${TRIALS:-1000} -o $gen --json "$out/abft_campaign.jsonl" --plot "$out/abft_campaign.png" 2>> "$out/final_b.log"
  echo "campaign rc=$?"
  python3 experiments/scripts/summarize_gemm.py "$out/dgemm_sweep.jsonl" "$out/abft_levels_clean.jsonl" "$out/abft_levels_inject.jsonl"
  ;;
perf)
  # speed of every variant of a spec (clean, then with faults for inject builds), plus a correctness pass
  spec=$3; shapes=${4:-4096x4096x4096}
  name=$(python3 -c "import yaml,sys; print(yaml.safe_load(open('$spec'))['name'])")
  ft generate $spec -o $gen > /dev/null || exit 1
  ft build $gen/$name -j 16 --arch sm_90 || exit 3
  ft bench $gen/$name --shapes 257x129x1031,1000x1234x777 --inject 4 --reps 2 --warmup 1 --json "$out/perf_check.jsonl" > /dev/null 2> "$out/perf_check.err"
  echo "check rc=$?"
  ft bench $gen/$name --shapes $shapes --reps 20 --warmup 5 --json "$out/perf_clean.jsonl" > /dev/null 2> "$out/perf_clean.err"
  ft bench $gen/$name --kernels '*_inj' --shapes $shapes --inject 64 --reps 20 --warmup 5 --json "$out/perf_inject.jsonl" > /dev/null 2> "$out/perf_inject.err"
  summary "$out/perf_check.jsonl" | grep -v True
  summary "$out/perf_clean.jsonl" "$out/perf_inject.jsonl"
  ;;
durations)
  # every kernel a listed executable launches (pre-passes included), with its duration, at 4096^3 (FTGEN_NCU_SPEC)
  shift 2
  build_listed "$@"
  for k in "$@"; do
    echo "== $k"
    timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size \
      $gen/$proj/bin/$k --shapes ${SHAPE:-4096x4096x4096} --reps 2 --warmup 0 --no-ref 2>&1 > "$out/ncu_durations_$k.txt"
    grep -E "^  [a-zA-Z_<>:()0-9, ]+\(|duration|registers|grid_size" "$out/ncu_durations_$k.txt" | tail -24
  done
  ;;
ncu-stalls)
  # stall reasons per issued instruction, bank conflicts, occupancy, pipe use of the listed kernels (FTGEN_NCU_SPEC;
  # NCU_K: ncu's kernel filter, default regex:gemm_kernel -- the CUTLASS backend's are Kernel and abft_kernel)
  shift 2
  build_listed "$@"
  st=smsp__average_warps_issue_stalled
  m="gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread"
  m="$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
  m="$m,smsp__inst_executed_op_local_ld.sum,smsp__inst_executed_op_local_st.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
  m="$m,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
  m="$m,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"
  for r in long_scoreboard short_scoreboard mio_throttle wait barrier lg_throttle math_pipe_throttle not_selected selected dispatch_stall no_instruction branch_resolving; do
    m="$m,${st}_${r}_per_issue_active.ratio"
  done
  for k in "$@"; do
    echo "== $k"
    timeout 200 ncu --clock-control none -k "${NCU_K:-regex:gemm_kernel}" -s 2 -c 1 --metrics "$m" \
      $gen/$proj/bin/$k --shapes 4096x4096x4096 --reps 2 --warmup 1 --no-ref 2>&1 | tee "$out/ncu_stalls_$k.txt" | grep -E "^ +[a-z_]+__" | sed 's/smsp__average_warps_issue_stalled_//'
  done
  ;;
ncu)
  # hardware counters (stall reasons, occupancy, hot SASS) of the listed kernels of a spec
  # (FTGEN_NCU_SPEC, default experiments/scripts/gpu_abft_check.yaml)
  shift 2
  build_listed "$@"
  for k in "$@"; do
    timeout 200 ncu --clock-control none -k regex:'gemm_kernel|enc_kernel' -s 2 -c 2 --set full --import-source no \
      $gen/$proj/bin/$k --shapes 4096x4096x4096 --reps 2 --warmup 1 --no-ref > "$out/ncu_$k.txt" 2>&1
    echo "== $k"
    grep -E "^  [a-z_]+.*(gemm_kernel|enc_kernel)|^ +(Duration|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Block Limit (Registers|Shared Mem)|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued Instruction|Compute \(SM\) Throughput|Executed Ipc Active|Executed Instructions  |Local Memory Spilling|Dynamic Shared Memory Per Block)" "$out/ncu_$k.txt" | head -40
    grep -iE "stall|est\. speedup|bank" "$out/ncu_$k.txt" | head -14
  done
  ;;
*)
  echo "unknown mode $mode"; exit 2 ;;
esac
