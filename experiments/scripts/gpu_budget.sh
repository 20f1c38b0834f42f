# Sourced by the single-call GPU scripts (from the repository root, after the wheels are on PYTHONPATH): each step's
# timeout out of the call's budget. LANE_SECONDS (default 540) bounds the call; 15 s are kept for the table.
#   t MSG            prints MSG with the seconds since the script began
#   ft SECONDS ARGS  runs `python3 -m ftgen.cli ARGS` for at most SECONDS or what is left (skipped under 20 s: rc 124)
T0=$SECONDS
t() { echo "[$((SECONDS - T0)) s] $*"; }
left() { echo $((${LANE_SECONDS:-540} - 15 - SECONDS + T0)); }
cap() { local l; l=$(left); echo $(( l < $1 ? l : $1 )); }
ft() { local s=$1; shift; local c; c=$(cap "$s"); if [ "$c" -lt 20 ]; then echo "skipped (time): $*"; return 124; fi
       timeout "$c" python3 -m ftgen.cli "$@"; }
big=4096x4096x4096,8192x8192x8192; odd=1x1x1,1000x1234x777,4097x3x129,17x4096x33
