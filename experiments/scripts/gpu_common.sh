# Sourced by the single-call GPU scripts from the repository root (OUT in $out): the wheels of .whl/ installed to
# /tmp/site and put on PYTHONPATH, and each step's timeout out of the call's budget. LANE_SECONDS (default 540) bounds
# the call; 15 s are kept for the table.
#   t MSG                  prints MSG with the seconds since the script began
#   ft SECONDS ARGS        runs `python3 -m ftgen.cli ARGS` for at most SECONDS or what is left (skipped under 20 s: rc 124)
#   gen_build SPEC GEN P   the GPU's name into OUT/gpu.txt, SPEC generated under GEN, project P built (-j 16; only the
#                          variants BUILD_KERNELS names, where set)
#   kmeans_lloyd SHAPES    kmeans: 10 Lloyd iterations of $proj's $kern against the fp64 loop at SHAPES, i.i.d. data and
#                          Gaussian blobs, into OUT/lloyd_{dist,blobs}.jsonl; then both loops to convergence (tol
#                          LLOYD_TOL, default 1e-8, at most 300 iterations) into OUT/lloyd_conv_{dist,blobs}.jsonl
#   ncu_times EXE N SHAPE...  Nsight Compute's device time of EXE's first N kernels at each SHAPE (one launch, no warm-up),
#                          into OUT/ncu_SHAPE.csv, summarized per kernel and in launch order (ncu_summary.py); caches
#                          not flushed between kernels (NCU_CACHE=all flushes them, Nsight Compute's default: a kernel
#                          that reads what the previous one wrote into L2 then reads it from DRAM and looks slower than
#                          it runs in the pipeline); NCU_KERNELS (a regex of demangled names, e.g. 'KernelRef|abft16_')
#                          keeps only those kernels, NCU_ARGS (e.g. '--inject 16') goes to EXE
#   ncu_lines REP EXE      REP.sass.csv (Nsight Compute's source page of one kernel of EXE) per source line into
#                          REP.lines.txt (ncu_lines.py over EXE's cubins disassembled with their line tables; its head
#                          printed), stderr to REP.log
#   big, odd               the 4096^3 / 8192^3 shapes and the odd ones
#   prov_header ARGS       the provenance line of a step without bench rows (ftgen's results header: commit, GPU state,
#                          driver, nvcc, libraries; ARGS as its argv), for record_run.py --provenance-from
ls .whl/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
. experiments/scripts/gpu_provenance.sh  # prov_header (its ft is replaced below)
NCU_ARGS=${NCU_ARGS:-}
T0=$SECONDS
t() { echo "[$((SECONDS - T0)) s] $*"; }
left() { echo $((${LANE_SECONDS:-540} - 15 - SECONDS + T0)); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
ft() { local s=$1; shift; local c; c=$(cap "$s"); if [ "$c" -lt 20 ]; then echo "skipped (time): $*"; return 124; fi
       timeout "$c" python3 -m ftgen.cli "$@"; }
gen_build() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
  python3 -m ftgen.cli generate "$1" -o "$2" > "$out/generate.txt" 2>&1; echo "generate rc $?"
  ft 300 build "$3" -j 16 ${BUILD_KERNELS:+--kernels "$BUILD_KERNELS"} > "$out/build.txt" 2>&1; echo "build rc $?"; tail -n 2 "$out/build.txt"; t built
}
big=4096x4096x4096,8192x8192x8192; odd=1x1x1,1000x1234x777,4097x3x129,17x4096x33
ncu_times() {
  local exe=$1 n=$2 s; shift 2
  for s in "$@"; do
    timeout 120 ncu --clock-control none --cache-control ${NCU_CACHE:-none} --metrics gpu__time_duration.sum --csv --print-units base \
      ${NCU_KERNELS:+--kernel-name-base demangled -k regex:$NCU_KERNELS} -c "$n" "$exe" --shapes "$s" --reps 1 --warmup 0 $NCU_ARGS \
      > "$out/ncu_$s.csv" 2> "$out/ncu_$s.err"
    python3 experiments/scripts/ncu_summary.py "$out/ncu_$s.csv" --sequence "$n"
  done
}
ncu_lines() {
  local rep=$1 x abs c
  x=$(mktemp -d); abs=$(readlink -f "$2"); (cd "$x" && cuobjdump -xelf all "$abs") >> "$rep.log" 2>&1
  for c in "$x"/*.cubin; do nvdisasm -g -c "$c"; done > "$x/dis.txt" 2>> "$rep.log"
  python3 experiments/scripts/ncu_lines.py "$rep.sass.csv" "$x/dis.txt" --top "${NCU_LINES_TOP:-30}" > "$rep.lines.txt" 2>&1
  head -n "${NCU_LINES_HEAD:-13}" "$rep.lines.txt"; rm -rf "$x"
}
kmeans_lloyd() {
  local data
  for data in dist blobs; do
    FTGEN_BENCH_REFS=none FTGEN_KMEANS_ITERS=10 FTGEN_KMEANS_DATA=$data ft 40 bench $proj --kernels "$kern" --shapes "$1" \
      --reps 3 --warmup 1 --json "$out/lloyd_$data.jsonl" > "$out/lloyd_$data.txt" 2>&1
    FTGEN_BENCH_REFS=none FTGEN_KMEANS_ITERS=300 FTGEN_KMEANS_TOL=${LLOYD_TOL:-1e-8} FTGEN_KMEANS_DATA=$data ft 90 bench $proj \
      --kernels "$kern" --shapes "$1" --reps 3 --warmup 1 --json "$out/lloyd_conv_$data.jsonl" > "$out/lloyd_conv_$data.txt" 2>&1
  done
}
