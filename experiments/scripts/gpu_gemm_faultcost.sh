#!/usr/bin/env bash
# Where the time of a launch with faults goes on the concurrent design (device machine): the online injection build of
# specs/gemm/abft_tc_concurrent.yaml ('*rr_conc_cs128_inj') and its no-injection build, one version per directory of
# HEADERS (':'-separated; empty entry or none = the working tree's headers; e.g. HEADERS=":ab/prev"), at SHAPE (default
# 4096x4096x4096):
#   1. paired x the unprotected kernel for each ';'-separated fault argument set of CASES (default: 16 faults that change
#      nothing (offset 1e-30; bit 0), 16 located (bit 30), 16 of mantissa bit 20 (detected, mostly not located: rows
#      recomputed), 16 of random bits (the benchmark's case), 1 of random bits, none), ROUNDS rounds, versions in turn;
#   2. ncu durations of every kernel of a launch for the cases of NCU_CASES (default: the no-injection build, none, and
#      the 16-fault cases);
#   3. (SAMPLE=1) ncu warp-state samples per SASS instruction of the check kernel (16 faults, bit 30) and of the second
#      launch (16 faults, bit 20), version 0 only.
#   4. (VERIFY=1, the default) version 0's injection builds verified against cuBLAS with 16 faults per launch at SHAPE
#      and 8 on odd shapes (ftgen bench).
# Usage: bash experiments/scripts/gpu_gemm_faultcost.sh OUT    Files: OUT/cost.jsonl (rows with version, case, round), OUT/times_*.txt,
# OUT/sass_*.csv; the tables last.
set -uo pipefail
out=${1:?output dir}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
spec=specs/gemm/abft_tc_concurrent.yaml
proj=$(spec_project "$spec")
shape=${SHAPE:-4096x4096x4096}
IFS=: read -r -a hdirs <<< "${HEADERS:-}"
[ ${#hdirs[@]} = 0 ] && hdirs=("")
for v in "${!hdirs[@]}"; do
  (FTGEN_CACHE_DIR=/tmp/cost-cache-$v build_version "$spec" /tmp/cost-$v "${hdirs[$v]}" -j $((16 / ${#hdirs[@]})) --arch sm_90 \
     --kernels '*rr_conc_cs128_inj,*rr_conc_cs128' > "$out/build_$v.log" 2>&1) &
done
fail=0
for job in $(jobs -p); do wait "$job" || fail=1; done
[ $fail = 0 ] || { tail -n 30 "$out"/build_*.log; exit 3; }
bin() { echo /tmp/cost-$1/$proj/bin/gemm_tf32x3_abft-tb-i1024_cutlass_128x128x32_w64x32x32_i16x8x8_s4_a4_sw8_rr_conc_cs128$2; }
IFS=';' read -r -a cases <<< "${CASES:---inject 16 --inject-kind offset --offset 1e-30;--inject 16 --bit 0;--inject 16 --bit 30;--inject 16 --bit 20;--inject 16;--inject 1;--inject 0}"
for rep in $(seq 1 "${ROUNDS:-3}"); do
  for c in "${cases[@]}" "no injection code"; do
    for v in "${!hdirs[@]}"; do
      if [ "$c" = "no injection code" ]; then exe=$(bin "$v" "") args=""; else exe=$(bin "$v" _inj) args=$c; fi
      # shellcheck disable=SC2086
      "$exe" --shapes "$shape" $args --reps 10 --warmup 3 --no-ref | grep '"kernel"' |
        sed "s/^{/{\"version\": $v, \"case\": \"$c\", \"round\": $rep, /" >> "$out/cost.jsonl"
    done
  done
done
IFS=';' read -r -a ncases <<< "${NCU_CASES:-no injection code;--inject 0;--inject 16 --inject-kind offset --offset 1e-30;--inject 16 --bit 0;--inject 16 --bit 30;--inject 16 --bit 20;--inject 16}"
for v in "${!hdirs[@]}"; do
  for i in "${!ncases[@]}"; do
    if [ "${ncases[$i]}" = "no injection code" ]; then exe=$(bin "$v" "") args=""; else exe=$(bin "$v" _inj) args=${ncases[$i]}; fi
    # shellcheck disable=SC2086
    timeout 200 ncu --clock-control none --print-units base -s 20 -c 48 --metrics gpu__time_duration.sum "$exe" --shapes "$shape" \
      --reps 5 --warmup 1 --no-ref $args > "$out/times_v${v}_c$i.txt" 2>&1
    echo "== version $v, case '${ncases[$i]}'"
    python3 - "$out/times_v${v}_c$i.txt" <<'PY'
import re, statistics, sys
by = {}
name = None
for line in open(sys.argv[1]):
    m = re.match(r"^  (\S.*?) (\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))", line)
    if m:
        name = re.sub(r"<.*", "", m.group(1).split("(")[0]).split("::")[-1] + " " + m.group(2)
    m = re.match(r"^\s+gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", "")) * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "usecond": 1.0, "msecond": 1e3, "nsecond": 1e-3}.get(m.group(1), 1.0)
        by.setdefault(name, []).append(v)
        name = None
for k, xs in by.items():
    print(f"  {k:60s} n={len(xs):2d} median {statistics.median(xs):9.2f} us  min {min(xs):9.2f}  max {max(xs):9.2f}")
PY
  done
done
if [ "${VERIFY:-1}" = 1 ]; then  # version 0's injection builds verified (cuBLAS) with faults, odd shapes and SHAPE
  for nf in 16 8; do
    shapes=$shape; [ $nf = 8 ] && shapes=1x1x1,1000x1234x777,257x129x1031,130x131x129,2048x2048x2048
    FTGEN_CACHE_DIR=/tmp/cost-cache-0 python3 -m ftgen.cli bench /tmp/cost-0/$proj --kernels '*rr_conc_cs128_inj' --shapes "$shapes" \
      --inject $nf --reps 2 --warmup 1 --json "$out/verify_f$nf.jsonl" > /dev/null 2> "$out/verify_f$nf.err"
    echo "verify, $nf faults per launch: rc=$?"
  done
  python3 - "$out"/verify_f*.jsonl <<'PY'
import json, sys
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if "kernel" not in r:
            continue
        sh = "x".join(str(r["shape"][d]) for d in "mnk")
        print(f"  {r['kernel'][13:40]:28s} {sh:16s} ok={r.get('ok')} err={r.get('max_rel_err', float('nan')):.1e} "
              f"injected/applied/detected/corrected/recomputed/false_alarms={r.get('injected')}/{r.get('applied')}/{r.get('detected')}/"
              f"{r.get('corrected')}/{r.get('recomputed')}/{r.get('false_alarms')} {(r.get('error') or {}).get('message', '')[:60]}")
PY
fi
if [ "${SAMPLE:-1}" = 1 ]; then
  for what in "check:abft_check_kernel:--inject 16 --bit 30" "redo:abft_once_kernel:--inject 16 --bit 20"; do
    IFS=: read -r tag kname fargs <<< "$what"
    skip=3; [ "$tag" = redo ] && skip=7  # (abft_once_kernel: the GEMM and the second launch in turn; a second launch)
    # shellcheck disable=SC2086
    timeout 200 ncu --clock-control none -k "regex:$kname" -s $skip -c 1 --section SourceCounters --section WarpStateStats \
      --section LaunchStats --section Occupancy --section SpeedOfLight --warp-sampling-interval 0 -f -o "$out/sass_$tag" \
      "$(bin 0 _inj)" --shapes "$shape" --reps 2 --warmup 1 --no-ref $fargs > "$out/sass_$tag.log" 2>&1
    ncu -i "$out/sass_$tag.ncu-rep" --page details > "$out/sass_${tag}_details.txt" 2>&1
    ncu -i "$out/sass_$tag.ncu-rep" --page source --csv --print-source sass > "$out/sass_$tag.csv" 2>&1
    echo "== $tag: $(grep -E 'Duration|Registers Per|Achieved Occupancy' "$out/sass_${tag}_details.txt" | tr -s ' ' | tr '\n' ';')"
  done
fi
python3 - "$out/cost.jsonl" <<'PY'
import json, statistics, sys
cell = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    c = cell.setdefault((r["case"], r["version"]), {"x": [], "ok": True, "det": 0, "rec": 0, "cor": 0})
    c["x"].append(r["paired"]["x_unprotected"])
    c["ok"] &= bool(r.get("ok")) and not r.get("false_alarms")
    c["det"] += r.get("detected", 0); c["rec"] += r.get("recomputed", 0); c["cor"] += r.get("corrected", 0)
print(f"{'case':50s} {'version':>7s} {'x unprot (median)':>18s} {'min':>6s} {'max':>6s}  detected/corrected/recomputed (all rounds' check launches)")
for (case, v), c in cell.items():
    print(f"{case:50s} {v:7d} {statistics.median(c['x']):17.4f}{' ' if c['ok'] else '!'} {min(c['x']):6.4f} {max(c['x']):6.4f}  {c['det']}/{c['cor']}/{c['rec']}")
PY
