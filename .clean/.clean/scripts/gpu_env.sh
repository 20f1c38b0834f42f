# Sourced by the GPU scripts, run from the repository root. `gpu_start OUTDIR` creates OUTDIR, puts this checkout first
# on PYTHONPATH (and /tmp/site before it where the device machine's nvidia-cutlass wheel was installed with
# `pip install --no-deps --target /tmp/site`), and defines `ft`, the ftgen CLI. The provenance of every run is the
# first line of each results file that ftgen writes (set FTGEN_GIT_SHA where the machine's copy has no .git).
gpu_start() {
  mkdir -p "$1"
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  if [ -d /tmp/site/cutlass_library ]; then export PYTHONPATH="/tmp/site:$PYTHONPATH"; fi
}
ft() { python3 -m ftgen.cli "$@"; }
