# Sourced by the GPU scripts: `provenance OUTDIR` writes (and prints) OUTDIR/gpu.txt: the GPU (name, driver,
# memory, maximum SM clock), nvcc's version line and the commit the run measures (FTGEN_GIT_SHA when set: the
# device machine's copy of the tree may carry a stale .git).
provenance() {
  mkdir -p "$1"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$1/gpu.txt"
  nvcc --version | tail -1 | tee -a "$1/gpu.txt"
  echo "${FTGEN_GIT_SHA:-$(git rev-parse --short HEAD 2>/dev/null)}" | tee -a "$1/gpu.txt"
}
