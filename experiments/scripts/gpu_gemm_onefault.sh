#!/usr/bin/env bash
# One significant fault per launch on the concurrent design (device machine): the online and detect injection builds
# of specs/gemm/abft_tc_concurrent.yaml ('*rr_conc_cs128_inj'), version A with the working tree's headers and B with those
# in AB_DIR (default ab/prev), run directly with --inject 1 and each of the ';'-separated argument sets of CASES
# (default "--bit 29;--bit 20": exponent bit 29 scales the element's partial sum by 2^64 or 2^-64, mantissa bit 20 gives
# an error that is detected but may be too small to locate, the tile then recomputed), ROUNDS rounds (default 2), at
# 4096^3 and 8192^3, paired with the unprotected kernel.
# Usage: bash experiments/scripts/gpu_gemm_onefault.sh OUT    Files: OUT/onefault.jsonl (the executables' rows, with version,
# fault (the case's arguments) and round added), OUT/gpu.txt; a table of the medians x the unprotected kernel last.
set -uo pipefail
out=${1:?output dir}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
for v in A B; do
  (
    export FTGEN_CACHE_DIR=/tmp/onefault-cache-$v
    headers=""
    [ $v = B ] && headers=${AB_DIR:-ab/prev}
    build_version specs/gemm/abft_tc_concurrent.yaml /tmp/onefault-$v "$headers" -j 8 --kernels '*rr_conc_cs128_inj' > "$out/build_$v.log" 2>&1
  ) &
done
wait
IFS=';' read -r -a cases <<< "${CASES:---bit 29;--bit 20}"
for rep in $(seq 1 "${ROUNDS:-2}"); do
  for c in "${cases[@]}"; do
    for v in A B; do
      for k in /tmp/onefault-$v/gemm_abft_tc_concurrent/bin/*rr_conc_cs128_inj; do
        # shellcheck disable=SC2086
        "$k" --shapes 4096x4096x4096,8192x8192x8192 --inject 1 $c --reps 10 --warmup 3 | grep '"kernel"' |
          sed "s/^{/{\"version\": \"$v\", \"fault\": \"$c\", \"round\": $rep, /" >> "$out/onefault.jsonl"
      done
    done
  done
done
python3 - "$out/onefault.jsonl" <<'PY'
import json, statistics, sys
cell = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["kernel"].split("_cutlass")[0][12:], "x".join(str(r["shape"][d]) for d in "mnk"), r.get("fault", str(r.get("bit_arg"))))
    c = cell.setdefault(key, {}).setdefault(r["version"], {"x": [], "ok": True, "rec": 0, "det": 0})
    c["x"].append(r["paired"]["x_unprotected"])
    c["ok"] &= bool(r.get("ok")) and not r.get("false_alarms")
    c["det"] += r.get("detected", 0)
    c["rec"] += r.get("recomputed", 0)
print(f"{'kernel':22s} {'shape':15s} {'fault':28s} {'A':>8s} {'B':>8s}   (median x unprotected; detected / recomputed in the check launches)")
for (k, s, b), byv in sorted(cell.items()):
    parts = [f"{statistics.median(byv[v]['x']):7.3f}{' ' if byv[v]['ok'] else '!'}" if v in byv else f"{'-':>8s}" for v in "AB"]
    print(f"{k:22s} {s:15s} {b:28s} " + " ".join(parts) + "   " + " ".join(f"{v}: {byv[v]['det']}/{byv[v]['rec']}" for v in "AB" if v in byv))
PY
