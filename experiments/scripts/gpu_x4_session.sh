#!/usr/bin/env bash
# One call on a machine of four GPUs (nvidia-h200-x4), four lanes side by side, each on its own GPU and with its own
# build (-j 16 each of the 64 cores); every lane's files are packed into OUT/<lane>.tar.gz (the device returns at most
# eight files) and a short table of each lane is printed last:
#   c90      GPU 0: experiments/scripts/gpu_cutlass90_abft.sh (sm90 tf32x3 threadblock ABFT: bench with 16 faults,
#            campaign at 512x512x1024, clean bench, lambda calibration)
#   fft      GPU 1: scripts/gpu_fft.sh (the FFT sweep, injection rows, campaigns)
#   gemm     GPU 2: scripts/gpu_tmr.sh (every TMR level), then scripts/gpu_gemm.sh prepass (SIMT pre-pass ABFT)
#   campaign GPU 3: the tf32x3 threadblock ABFT campaign (specs/gemm/abft_tc_concurrent_campaign.yaml) at 4096^3, then at
#            1000x1234x777 (1000 clean + 1000 single bit flips per distribution, three distributions)
#   bash experiments/scripts/gpu_x4_session.sh OUT [lane...]   (default: all four; wheels in .whl/; FTGEN_GIT_SHA and
#   FTGEN_GIT_DIRTY where the copy has no .git)
set -u
out=${1:?usage: gpu_x4_session.sh OUT [lane...]}; shift
mkdir -p "$out"; out=$(cd "$out" && pwd); cd "$(dirname "$0")/../.." || exit 1
lanes=${*:-c90 fft gemm campaign}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
budget=${LANE_SECONDS:-540}
lane() {  # NAME GPU COMMAND...: the command on that GPU with the lane's time, output in OUT/NAME/log.txt
  local name=$1 gpu=$2; shift 2
  mkdir -p "$out/$name"
  ( export CUDA_VISIBLE_DEVICES=$gpu; s=$SECONDS; timeout "$budget" "$@" > "$out/$name/log.txt" 2>&1
    echo "lane $name (GPU $gpu): rc $? in $((SECONDS - s)) s" | tee "$out/$name/rc.txt" ) &
}
ft() { python3 -m ftgen.cli "$@"; }
campaigns() {
  local spec=specs/gemm/abft_tc_concurrent_campaign.yaml d=$out/campaign
  ft campaign $spec -o generated/x4 --trials 1000 --seed 11 --shape 4096x4096x4096 --json $d/campaign_4096.jsonl
  ft campaign $spec -o generated/x4 --trials 1000 --seed 12 --shape 1000x1234x777 --json $d/campaign_odd.jsonl
}
for l in $lanes; do
  case $l in
    c90) lane c90 0 bash experiments/scripts/gpu_cutlass90_abft.sh "$out/c90" ;;
    fft) lane fft 1 bash scripts/gpu_fft.sh "$out/fft" ;;
    gemm) lane gemm 2 bash -c "FTGEN_TMR_BUILD=/tmp/tmr bash scripts/gpu_tmr.sh '$out/gemm/tmr'; \
                               FTGEN_GEMM_GEN=/tmp/prepass bash scripts/gpu_gemm.sh prepass '$out/gemm/prepass'" ;;
    campaign) lane campaign 3 campaigns ;;
    *) echo "unknown lane $l" >&2 ;;
  esac
done
wait
for l in $lanes; do
  echo "==== $l: $(cat "$out/$l/rc.txt" 2>/dev/null)"
  case $l in
    c90) grep -A40 "^run " "$out/c90/log.txt" | head -40 ;;
    fft) grep -E "^logn| avg| min|injection rows|campaign|coverage" "$out/fft/log.txt" | head -20 ;;
    gemm) grep -E "x cuBLAS|PASS|FAIL" "$out/gemm/log.txt" | head -12; tail -n 12 "$out/gemm/log.txt" ;;
    campaign) python3 - "$out/campaign" <<'PY'
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("campaign_*.jsonl")):
    for line in p.read_text().splitlines():
        c = json.loads(line).get("campaign") if line.startswith('{"campaign"') else None
        if c:
            s = c["significance"]
            print(f"{p.name}: {c['corrected']}/{c['significant']} = {c['coverage']:.5f}, false alarms {c['false_alarms']}/"
                  f"{c['clean_trials']}, tolerance {s['tolerance']:.3g} = {s['tolerance'] / max(s['max_clean_err'], 1e-300):.1f}x "
                  f"max clean, at 2x/10x/100x {[round(v['coverage'], 4) for v in c['coverage_at'].values()][1:]}, "
                  f"max clean score {c.get('max_clean_score')}, min significant score {c.get('min_significant_score')}")
PY
    ;;
  esac
done
for l in $lanes; do (cd "$out" && tar czf "$l.tar.gz" "$l" && rm -rf "$l"); done
ls -la "$out"
