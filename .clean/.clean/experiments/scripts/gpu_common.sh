# Sourced by the single-call GPU scripts from the repository root (OUT in $out): the wheels of .whl/ installed to
# /tmp/site and put on PYTHONPATH, and each step's timeout out of the call's budget. LANE_SECONDS (default 540) bounds
# the call; 15 s are kept for the table.
#   t MSG                  prints MSG with the seconds since the script began
#   ft SECONDS ARGS        runs `python3 -m ftgen.cli ARGS` for at most SECONDS or what is left (skipped under 20 s: rc 124)
#   gen_build SPEC GEN P   the GPU's name into OUT/gpu.txt, SPEC generated under GEN, project P built (-j 16)
#   big, odd               the 4096^3 / 8192^3 shapes and the odd ones
ls .whl/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
T0=$SECONDS
t() { echo "[$((SECONDS - T0)) s] $*"; }
left() { echo $((${LANE_SECONDS:-540} - 15 - SECONDS + T0)); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
ft() { local s=$1; shift; local c; c=$(cap "$s"); if [ "$c" -lt 20 ]; then echo "skipped (time): $*"; return 124; fi
       timeout "$c" python3 -m ftgen.cli "$@"; }
gen_build() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
  python3 -m ftgen.cli generate "$1" -o "$2" > "$out/generate.txt" 2>&1; echo "generate rc $?"
  ft 300 build "$3" -j 16 > "$out/build.txt" 2>&1; echo "build rc $?"; tail -n 2 "$out/build.txt"; t built
}
big=4096x4096x4096,8192x8192x8192; odd=1x1x1,1000x1234x777,4097x3x129,17x4096x33
