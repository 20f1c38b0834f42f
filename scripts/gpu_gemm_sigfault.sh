python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=$PWD:/tmp/site FTGEN_GIT_SHA=7da3bc0
mkdir -p /tmp/r; source scripts/gpu_provenance.sh; provenance /tmp/r > /dev/null
for v in A B; do (
  FTGEN_CACHE_DIR=/tmp/c$v python3 -m ftgen.cli generate specs/gemm_abft_tc_concurrent.yaml -o /tmp/g$v > /dev/null
  [ $v = B ] && cp ab/prev/*.cuh /tmp/g$v/gemm_abft_tc_concurrent/common/
  FTGEN_CACHE_DIR=/tmp/c$v python3 -m ftgen.cli build /tmp/g$v/gemm_abft_tc_concurrent -j 8 --kernels '*rr_conc_inj' > /tmp/r/build_$v.log 2>&1 ) & done; wait
for rep in 1 2; do for b in 29 20; do for v in A B; do for k in /tmp/g$v/gemm_abft_tc_concurrent/bin/*rr_conc_inj; do
  $k --shapes 4096x4096x4096,8192x8192x8192 --inject 1 --bit $b --reps 10 --warmup 3 | grep '"kernel"' | sed "s/^{/{\"version\": \"$v\", \"bit_arg\": $b, \"round\": $rep, /" >> /tmp/r/sig.jsonl
done; done; done; done
python3 - <<'PY'
import json, statistics
cell = {}
for l in open('/tmp/r/sig.jsonl'):
    r = json.loads(l)
    k = (r['kernel'].split('_cutlass')[0][12:], r['shape']['m'], r['bit_arg'])
    cell.setdefault(k, {}).setdefault(r['version'], []).append((r['paired']['x_unprotected'], r['detected'], r['corrected'], r['recomputed'], r['ok'], r['false_alarms']))
for k, byv in sorted(cell.items()):
    print(k, {v: (round(statistics.median(x[0] for x in rows), 4), [x[1:] for x in rows]) for v, rows in sorted(byv.items())})
PY
