#!/usr/bin/env bash
# GEMM variants side by side in rounds, one call on one H200 (<= 9 minutes): SPEC (default
# experiments/specs/gemm_cutlass90_beta0.yaml) generated and built (-j 16), then ROUNDS (default 3) rounds of: the
# unprotected variants and the variants with injection built in with 16 faults per launch at 4096^3 and 8192^3 (each
# row: the variant, its unprotected twin and cuBLAS alternated), one round at the odd shapes; a table of the rounds
# last; the JSON lines and logs in OUT/TAG.tgz (TAG: the spec's name).
#   bash experiments/scripts/gpu_gemm_rounds.sh OUT   (wheels in .whl/; FTGEN_GIT_SHA/DIRTY where the copy has no .git)
#   SPEC=experiments/specs/gemm_tf32x3_strips64.yaml bash experiments/scripts/gpu_gemm_rounds.sh OUT
set -u
top=${1:?usage: gpu_gemm_rounds.sh OUT}; cd "$(dirname "$0")/../.." || exit 1
spec=${SPEC:-experiments/specs/gemm_cutlass90_beta0.yaml}; tag=$(sed -n "s/^name: //p" "$spec")
mkdir -p "$top/$tag"; top=$(cd "$top" && pwd); out=$top/$tag
. experiments/scripts/gpu_common.sh  # the wheels, t, ft (each step's timeout), gen_build, big, odd
gen=generated/rounds; proj=$gen/$tag
gen_build $spec $gen $proj
have() { ls $proj/bin/$1 > /dev/null 2>&1; }  # the spec has variants of that glob
for r in $(seq 1 "${ROUNDS:-3}"); do
  if have '*_none_*'; then
    ft 60 bench $proj --kernels '*_none_*' --shapes $big --reps 30 --warmup 5 --json "$out/none_$r.jsonl" > "$out/none_$r.txt" 2>&1
  fi
  if have '*_inj'; then
    ft 90 bench $proj --kernels '*_inj' --inject 16 --shapes $big --reps 30 --warmup 5 --json "$out/abft_$r.jsonl" > "$out/abft_$r.txt" 2>&1
  fi
  t "round $r"
done
ft 60 bench $proj --shapes $odd --reps 5 --warmup 2 --json "$out/odd.jsonl" > "$out/odd.txt" 2>&1; t odd
python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
from collections import defaultdict
out = pathlib.Path(sys.argv[1])
acc, bad = defaultdict(list), []
for p in sorted(out.glob("*.jsonl")):
    for line in p.read_text().splitlines():
        r = json.loads(line)
        if "kernel" not in r or r.get("kernel") is None:
            continue
        sh = "x".join(str(v) for v in r["shape"].values())
        if not r.get("ok"):
            bad.append((p.name, r["kernel"], sh, r.get("error") or r.get("max_rel_err")))
        if p.name.startswith("odd") or not r.get("ms"):
            continue
        k = r["kernel"].replace("gemm_", "").replace("_cutlass90", "").replace("_ws-coop_persistent_sauto", "").replace("_i16x8x8", "")
        acc[(k, sh)].append((r["speedup_vs_ref"], r.get("x_unprot"), r["ms"]["median"], r["ref"]["ms"]))
print(f"{'kernel':72s} {'shape':15s} {'x ref (rounds)':24s} {'x twin':7s} ms")
for (k, sh), v in sorted(acc.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    xs = " ".join(f"{a[0]:.3f}" for a in v)
    tw = statistics.median([a[1] for a in v if a[1]] or [0])
    print(f"{k:72s} {sh:15s} {xs:24s} {tw:7.3f} {statistics.median(a[2] for a in v):.4f}")
print(f"rows failed: {len(bad)}", *bad[:10], sep="\n")
PY
tar czf "$top/$tag.tgz" -C "$top" "$tag" && rm -rf "$out"
