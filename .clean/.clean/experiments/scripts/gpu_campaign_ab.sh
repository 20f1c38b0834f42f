#!/usr/bin/env bash
# The tf32x3 threadblock ABFT campaign (specs/gemm/abft_tc_concurrent_campaign.yaml) of a previous build and of this
# tree, one after the other on one H100/H200, both judged by this tree's significance rule (python -m ftgen.faults):
#   rev=895040e; mkdir -p .base/$rev && git archive $rev ftgen templates | tar -x -C .base/$rev   # here, first
#   bash experiments/scripts/gpu_campaign_ab.sh .base/$rev OUT [TRIALS]                         # carry .base, .whl
# OUT gets old.jsonl, new.jsonl (trials and summaries), old_rejudged.jsonl, new_rejudged.jsonl and log.txt.
set -uo pipefail
old=$(cd "${1:?usage: gpu_campaign_ab.sh OLD_TREE OUT [TRIALS]}" && pwd)
out=${2:?usage}; trials=${3:-300}
mkdir -p "$out"; out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd); cd "$root" || exit 1
site=""; [ -d /tmp/site/cutlass_library ] && site=/tmp/site
export PYTHONUNBUFFERED=1
spec=specs/gemm/abft_tc_concurrent_campaign.yaml
run() {  # TREE SIDE
  local tree=$1 side=$2 sha=${FTGEN_GIT_SHA:-}
  [ "$side" = old ] && sha=$(basename "$tree")
  PYTHONPATH="$tree${site:+:$site}" FTGEN_GIT_SHA=$sha FTGEN_CACHE_DIR=/tmp/cache-$side python3 -m ftgen.cli campaign "$spec" \
    -o /tmp/camp-$side -j 8 --trials "$trials" --seed 7 --json "$out/$side.jsonl" >> "$out/log.txt" 2>&1
  echo "campaign $side rc $?" | tee -a "$out/log.txt"
}
run "$old" old & a=$!; sleep 1; run "$root" new & b=$!   # the builds overlap; the GPU runs overlap too (timing is not measured)
wait $a $b
for side in old new; do
  PYTHONPATH="$root" python3 -m ftgen.faults "$out/$side.jsonl" > "$out/${side}_rejudged.jsonl"
  python3 -c "import json,sys
for l in open(sys.argv[1]):
    c=json.loads(l)['campaign']; print(sys.argv[2], c['kernel'][-20:], 'significant', c['significant'], 'corrected', c['corrected'],
      'coverage %.4f' % c['coverage'], 'false alarms', c['false_alarms'], 'clean', c['clean_trials'], 'at 10x', c['coverage_at']['10x_clean']['coverage'])" "$out/${side}_rejudged.jsonl" "$side"
done
