#!/usr/bin/env bash
# TMR on the CUTLASS gemm backend, measured on one H100/H200 (issue 4). Usage:
#
#   pip install --no-deps --target /tmp/site .whl/nvidia_cutlass*.whl     # once (headers + cutlass_library)
#   scripts/gpu_tmr.sh OUTDIR
#
# 1. `ftgen search` over the unprotected tf32 space (specs/gemm/cutlass_tf32_search.yaml) at 4096^3;
# 2. one project with every TMR level (kernel, multikernel and cooperative use the search winner's
#    tile configuration; threadblock its own 32x32-warp candidates from specs/gemm/tmr_threadblock.yaml,
#    all timed, the first also built with injection), the unprotected winner beside them; cooperative at
#    intervals 32 (also with injection), 64 (the spec's default) and 128;
# 3. bench at 4096^3 and two non-multiple shapes: clean, and with 4 faults per launch;
# 4. targeted faults (every copy; first, middle, last k-iteration; two faults at one element of one
#    tile in two copies -> uncorrectable -> recomputed), each run verified against cuBLAS;
# 5. a short campaign (--trials) per level;
# all rows as JSON lines under OUTDIR (4 files: search, bench_clean, bench_inject, faults .jsonl; logs
# and the generated spec beside them), a short summary table last; the generated projects and builds
# go to a temporary directory under /tmp (FTGEN_TMR_BUILD to choose it), never under OUTDIR.
# Needs: CUDA (nvcc, cuBLAS), CMake, Ninja, python3 with jinja2 click pyyaml rich numpy. ftgen is run
# from this checkout. About 3-4 minutes on 16 cores and one H200.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_tmr.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT" || exit 1
export PYTHONPATH=/tmp/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}
FT=(python3 -m ftgen.cli)
GEN=${FTGEN_TMR_BUILD:-$(mktemp -d /tmp/ftgen_gpu_tmr.XXXXXX)}
mkdir -p "$GEN"
case "$(cd "$GEN" && pwd)/" in "$OUT"/*) echo "gpu_tmr: the build directory $GEN is inside OUTDIR $OUT" >&2; exit 1 ;; esac
JOBS=${JOBS:-16}
T0=$(date +%s)
log() { echo "[gpu_tmr $(($(date +%s) - T0))s] $*" >&2; }

# CUTLASS: headers found without importing (find_spec); the emitter imports cutlass_library
python3 - <<'EOF' || exit 1
import sys
from ftgen.paths import cutlass_include_dir
inc = cutlass_include_dir()
if inc is None or not (inc / "cutlass" / "cutlass.h").is_file():
    sys.exit("gpu_tmr: CUTLASS headers not found: pip install --no-deps --target /tmp/site nvidia_cutlass*.whl, or set FTGEN_CUTLASS_INCLUDE")
try:
    import cutlass_library.gemm_operation  # noqa: F401
except Exception as e:  # the emitter needs it
    sys.exit(f"gpu_tmr: cutlass_library does not import ({type(e).__name__}: {e})")
print(f"[gpu_tmr] CUTLASS headers: {inc}", file=sys.stderr)
EOF
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >&2 || true

# ---- 1. search the unprotected tf32 space at 4096^3 ------------------------------------------------
log "search"
"${FT[@]}" search specs/gemm/cutlass_tf32_search.yaml --shapes 4096x4096x4096 -o "$GEN" -j "$JOBS" \
  --reps 30 --warmup 5 --no-cache --json "$OUT/search.jsonl" 2> "$OUT/search.log" || log "search exited $? (see search.log)"

# ---- 2. one project with every level ----------------------------------------------------------------
python3 - "$OUT" <<'EOF'
import json, sys, yaml
out = sys.argv[1]
best_params = None
try:
    rows = [json.loads(l) for l in open(f"{out}/search.jsonl") if l.strip()]
    best = next(r["best"] for r in rows if "best" in r)
    kernel = best.get("4096x4096x4096")
    best_params = next(r["params"] for r in rows if r.get("kernel") == kernel and "params" in r)
except Exception as e:  # no search result: the shipped configuration
    print(f"[gpu_tmr] no search winner ({e}); using specs/gemm/tmr_kernel.yaml's configuration", file=sys.stderr)
base = yaml.safe_load(open("specs/gemm/tmr_kernel.yaml"))["params"]
tb_spec = yaml.safe_load(open("specs/gemm/tmr_threadblock.yaml"))
# candidates (the first is also built with injection), in the winner's layouts: every level is
# compared with the unprotected kernel of the same problem
lay = {k: v for k, v in (best_params or {}).items() if k in ("layout_a", "layout_b")}
tbs = [{**v["params"], **lay} for v in tb_spec["variants"]]
tb_i = tb_spec["protection"]["interval"]
coop_i = yaml.safe_load(open("specs/gemm/tmr_cooperative.yaml"))["protection"]["interval"]
coop_i = coop_i[0] if isinstance(coop_i, list) else coop_i  # the default (first) interval
cfg = {k: v for k, v in (best_params or base).items() if k != "coop_teams"}
print(f"[gpu_tmr] TMR configuration (search winner): {cfg}", file=sys.stderr)
variants = [{"protection": {"scheme": "none"}, "params": cfg}]
for inj in (False, True):
    variants += [
        {"protection": {"scheme": "tmr", "level": "kernel", "inject": inj}, "params": cfg},
        {"protection": {"scheme": "tmr", "level": "multikernel", "interval": 32, "inject": inj}, "params": cfg},
        {"protection": {"scheme": "tmr", "level": "cooperative", "interval": 32, "inject": inj}, "params": cfg},
        {"protection": {"scheme": "tmr", "level": "threadblock", "interval": tb_i, "inject": inj}, "params": tbs[0]},
    ]
variants += [{"protection": {"scheme": "tmr", "level": "cooperative", "interval": i}, "params": cfg} for i in sorted({coop_i, 128} - {32})]
# the cooperative spec's own tiles (two blocks per SM: one block computes while the other waits at a
# team barrier), in the winner's layouts
coop_cfg = {**{k: v for k, v in yaml.safe_load(open("specs/gemm/tmr_cooperative.yaml"))["params"].items() if k != "coop_teams"}, **lay}
if coop_cfg != cfg:
    variants += [{"protection": {"scheme": "tmr", "level": "cooperative", "interval": i}, "params": coop_cfg} for i in sorted({coop_i, 128})]
variants += [{"protection": {"scheme": "tmr", "level": "threadblock", "interval": tb_i}, "params": p} for p in tbs[1:]]
spec = {"name": "gemm_tmr_gpu", "family": "gemm", "arch": ["sm_90"], "precision": "tf32", "variants": variants,
        "shapes": [{"m": 4096, "n": 4096, "k": 4096}, {"m": 1000, "n": 1234, "k": 777}, {"m": 2049, "n": 3001, "k": 1531}]}
yaml.safe_dump(spec, open(f"{out}/gemm_tmr_gpu.yaml", "w"), sort_keys=False)
EOF
log "generate + build ($(grep -c 'scheme' "$OUT/gemm_tmr_gpu.yaml") variants)"
"${FT[@]}" generate "$OUT/gemm_tmr_gpu.yaml" -o "$GEN" > "$OUT/variants.txt" 2> "$OUT/generate.log" || { cat "$OUT/generate.log" >&2; exit 1; }
"${FT[@]}" build "$GEN/gemm_tmr_gpu" -j "$JOBS" --arch sm_90 2> "$OUT/build.log" || log "build exited $? (see build.log)"
P=$GEN/gemm_tmr_gpu

# ---- 3. bench: clean, then 4 faults per launch in the inject builds ---------------------------------
log "bench (clean)"
"${FT[@]}" bench "$P" --reps 30 --warmup 5 --json "$OUT/bench_clean.jsonl" > "$OUT/bench_clean.txt" 2>&1 || log "bench (clean): some rows failed"
log "bench (--inject 4)"
"${FT[@]}" bench "$P" --kernels '*_inj' --inject 4 --reps 20 --warmup 3 --json "$OUT/bench_inject.jsonl" > "$OUT/bench_inject.txt" 2>&1 \
  || log "bench (inject): some rows failed"

# ---- 4 + 5. targeted faults and short campaigns (executables called directly) -----------------------
log "fault tests and trials"
python3 - "$P" "$OUT" <<'EOF'
import json, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
proj, out = Path(sys.argv[1]), Path(sys.argv[2])
kernels = [v["kernel"] for v in json.loads((proj / "manifest.json").read_text())["variants"]]
inj = [k for k in kernels if k.endswith("_inj")]
jobs = []
def run(kernel, argv, tag):
    jobs.append((kernel, argv, tag))
def execute(job):  # verification runs only (no timing): several at once share the GPU
    kernel, argv, tag = job
    exe = proj / "bin" / kernel
    if not exe.is_file():
        return [{"kernel": kernel, "test": tag, "ok": False, "error": {"kind": "missing"}}]
    try:
        p = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=300)
        got = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    except subprocess.TimeoutExpired:
        got, p = [], None
    if not got:
        return [{"kernel": kernel, "test": tag, "ok": False, "error": {"kind": "runtime", "message": (p.stderr[-500:] if p else "timeout")}}]
    for r in got:
        r.setdefault("kernel", kernel)
        r["test"] = tag
        r["argv"] = argv
    return got
odd = "1000x1234x777,2049x3001x1531"
for k in inj:
    for copy in (0, 1, 2):
        for step, name in ((0, "first"), (-2, "random"), (-1, "last")):
            argv = ["--shapes", "1000x1234x777", "--inject", "1", "--inject-copy", str(copy), "--no-timing", "--seed", str(11 + copy)]
            if step != -2:
                argv += ["--inject-step", str(step)]
            run(k, argv, f"single-copy{copy}-{name}")
    run(k, ["--shapes", odd, "--inject", "16", "--inject-kind", "offset", "--no-timing", "--seed", "5"], "16-offsets")
    run(k, ["--shapes", odd, "--inject", "2", "--inject-collide", "--inject-step", "-1", "--bit", "21", "--no-timing", "--seed", "3"], "collide")
    run(k, ["--shapes", "512x512x1024", "--trials", "12", "--inject", "1", "--no-timing", "--seed", "100"], "trials-faulty")
    run(k, ["--shapes", "512x512x1024", "--trials", "4", "--inject", "0", "--no-timing", "--seed", "200"], "trials-clean")
with ThreadPoolExecutor(max_workers=4) as ex:
    rows = [r for got in ex.map(execute, jobs) for r in got]
with open(out / "faults.jsonl", "w") as f:
    # the provenance line of this call's bench (same tree, GPU and libraries), then the verification rows
    with open(out / "bench_inject.jsonl") as h:
        f.write(h.readline())
    for r in rows:
        f.write(json.dumps(r) + "\n")
EOF

# ---- summary ------------------------------------------------------------------------------------------
log "summary"
python3 - "$OUT" <<'EOF'
import json, re, sys
from collections import defaultdict
out = sys.argv[1]
def load(name):
    try:
        return [json.loads(l) for l in open(f"{out}/{name}") if l.strip().startswith("{") and '"provenance"' not in l[:20]]
    except FileNotFoundError:
        return []
def level(r):
    p = r.get("protection", {})
    return "none" if p.get("scheme", "none") == "none" else f"{p['level']}" + (f"-i{p['interval']}" if p.get("interval", 1) != 1 else "")
def shp(r):
    s = r.get("shape") or {}
    return f"{s.get('m')}x{s.get('n')}x{s.get('k')}"
search = load("search.jsonl"); clean = load("bench_clean.jsonl"); inj = load("bench_inject.jsonl"); faults = load("faults.jsonl")
best_kernel = next((r["best"].get("4096x4096x4096") for r in search if "best" in r), None)
best = next((r for r in search if r.get("kernel") == best_kernel and r.get("ms")), None)
print()
if best:
    print(f"search winner {best_kernel}: {best['ms']['median']:.3f} ms, cuBLAS TF32 {best['ref']['ms']:.3f} ms, "
          f"{best['ref']['ms'] / best['ms']['median']:.3f} x cuBLAS (target >= 0.55)")
base = {(shp(r)): r for r in clean if level(r) == "none" and not r["kernel"].endswith("_inj") and r.get("ms")}
inj_ms = {(r["kernel"], shp(r)): r for r in inj if r.get("ms")}
targets = {"kernel": 3.1, "threadblock": 3.2, "cooperative": 3.5}
def tile(r):  # the tile configuration, to tell threadblock candidates apart
    m = re.search(r"_cutlass_(\d+x\d+x\d+)_w(\d+x\d+)x\d+_i\d+x\d+x\d+_s(\d+)", r["kernel"])
    return f"{m.group(1)} w{m.group(2)} s{m.group(3)}" if m else ""
# x pair: the level over the unprotected kernel of its own parameters, timed alternately in the same
# executable (`paired`: both under the same clocks); x sep: over the separately timed `none` row of the
# search winner (a run of its own, shorter, so often at higher clocks). The target is checked on x pair
# where the level runs the winner's parameters (then its own unprotected kernel is the winner), else on x sep.
def paired(r):
    return (r.get("paired") or {}).get("x_unprotected", float("nan"))
def strip(p):
    return {k: v for k, v in (p or {}).items() if k != "coop_teams"}
win_params = strip(best.get("params")) if best else None
def sep_ratio(r):
    b = base.get(shp(r))
    return r["ms"]["median"] / b["ms"]["median"] if b else float("nan")
def target_ratio(r, sep):  # (ratio, how)
    return (paired(r), "pair") if win_params and strip(r.get("params")) == win_params else (sep, "sep")
print(f"{'level':18s} {'build':6s} {'shape':16s} {'ms':>8s} {'x pair':>8s} {'x sep':>8s} {'x cuBLAS':>8s} {'inj4 ms':>8s} {'ok':>3s}  notes")
best_of = {}  # level -> ((target ratio, how), separate ratio, row) of the fastest plain build at 4096^3
for r in clean:
    lv = r.get("protection", {}).get("level")
    if lv in targets and r.get("ms") and shp(r) == "4096x4096x4096" and not r["kernel"].endswith("_inj"):
        sep = sep_ratio(r)
        if lv not in best_of or target_ratio(r, sep)[0] < best_of[lv][0][0]:
            best_of[lv] = (target_ratio(r, sep), sep, r)
for r in sorted(clean, key=lambda r: (level(r), tile(r), r["kernel"].endswith("_inj"), shp(r) != "4096x4096x4096", shp(r))):
    if not r.get("ms"):
        print(f"{level(r):18s} {'inj' if r['kernel'].endswith('_inj') else 'plain':6s} {shp(r):16s} FAILED {r.get('error', {}).get('kind', '')}")
        continue
    ratio = sep_ratio(r)
    vs_cublas = r["ref"]["ms"] / r["ms"]["median"] if r.get("ref") else float("nan")
    i = inj_ms.get((r["kernel"], shp(r)))
    notes = []
    lv = r.get("protection", {}).get("level")
    if lv in ("threadblock", "cooperative"):
        notes.append(tile(r))
    if lv in targets and shp(r) == "4096x4096x4096" and not r["kernel"].endswith("_inj"):
        tr, how = target_ratio(r, ratio)
        notes.append(f"{how} {tr:.3f} <= {targets[lv]}: {'PASS' if tr <= targets[lv] else 'FAIL'}")
    if "coop" in r:
        notes.append(f"teams {r['coop']['teams']}, same-SM teams {r['coop']['same_sm_teams']}, SMs {r['coop']['distinct_sms']}")
    if i:
        notes.append(f"inj4: det {i.get('detected')} corr {i.get('corrected')} ok {i.get('ok')}")
    print(f"{level(r):18s} {'inj' if r['kernel'].endswith('_inj') else 'plain':6s} {shp(r):16s} {r['ms']['median']:8.3f} {paired(r):8.3f} "
          f"{ratio:8.3f} {vs_cublas:8.3f} {(i['ms']['median'] if i else float('nan')):8.3f} {'y' if r.get('ok') else 'N':>3s}  {'; '.join(notes)}")
print()
for lv, t in targets.items():
    if lv in best_of:
        (ratio, how), sep, r = best_of[lv]
        how = "paired with the winner's parameters" if how == "pair" else "over the separate `none` row"
        print(f"best {lv:12s} {level(r):18s} {tile(r):22s} {r['ms']['median']:.3f} ms = {ratio:.3f} x unprotected ({how}; "
              f"x pair {paired(r):.3f}, x sep {sep:.3f}) (target <= {t}): {'PASS' if ratio <= t else 'FAIL'}")
    else:
        print(f"best {lv:12s} no 4096^3 row")
print()
agg = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0, 0]))  # runs ok, runs, faults applied, detected, corrected
trials = defaultdict(lambda: {"faulty": 0, "significant": 0, "corrected_sig": 0, "clean": 0, "false": 0, "bad_out": 0})
for r in faults:
    lv = level(r) if "protection" in r else r.get("kernel", "?")
    t = r.get("test", "?")
    if t.startswith("trials"):
        s = trials[lv]
        if r.get("injected"):
            s["faulty"] += 1
            if r.get("significant"):
                s["significant"] += 1
                s["corrected_sig"] += bool(r.get("corrected"))
        else:
            s["clean"] += 1
            s["false"] += bool(r.get("false_alarm"))
        s["bad_out"] += not r.get("ok")
        continue
    key = "collide" if t == "collide" else ("16-offsets" if t == "16-offsets" else "single")
    a = agg[lv][key]
    a[1] += 1
    good = bool(r.get("ok")) and (key != "collide" or (r.get("uncorrectable", 0) >= 1 and r.get("recomputed", 0) >= 1))
    a[0] += good
    if key != "collide":  # faults applied, and what the votes found of them
        a[2] += r.get("applied", 0)
        a[3] += r.get("detected", 0)
        a[4] += r.get("corrected", 0)
# runs ok/runs (faults applied: detected/corrected) -- a fault whose output element ends up bit-equal to the
# clean one (a low bit early in k, rounded away later) is neither detected nor needs correcting
print(f"{'level (inject)':18s} {'single faults':>22s} {'16 offsets':>18s} {'collide->recompute':>19s} {'trials sig/corr':>16s} {'clean false':>12s} {'bad out':>8s}")
for lv in sorted(set(agg) | set(trials)):
    a, s = agg[lv], trials[lv]
    f = lambda x: f"{x[0]}/{x[1]} ({x[2]}: {x[3]}/{x[4]})"
    print(f"{lv:18s} {f(a['single']):>22s} {f(a['16-offsets']):>18s} {a['collide'][0]}/{a['collide'][1]:<17d} {s['significant']:>7d}/{s['corrected_sig']:<8d} "
          f"{s['false']:>5d}/{s['clean']:<6d} {s['bad_out']:>8d}")
EOF
log "done; JSON lines in $OUT (build: $GEN)"
