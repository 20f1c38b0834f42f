#!/usr/bin/env bash
# The main job on the built-in demo spec: generate, build, bench (with faults injected into the
# protected variant). Without a GPU the bench step says so plainly; that is not an error here.
set -uo pipefail
spec=specs/demo.yaml
echo "== ftgen generate $spec"
ftgen generate "$spec" || exit $?
echo "== ftgen build"
ftgen build || exit $?
echo "== ftgen bench --inject 16"
ftgen bench --inject 16 --json generated/demo-results.jsonl
rc=$?
if [ $rc -eq 4 ]; then
  echo
  echo "No GPU here: the demo generated and built every variant (generated/sgemm_demo/bin/)."
  echo "Benchmarking needs an NVIDIA GPU (sm_80 or newer): run 'make demo' on one."
  exit 0
fi
exit $rc
