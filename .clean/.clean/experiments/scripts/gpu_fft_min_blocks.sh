#!/usr/bin/env bash
# FFT multi-launch plans under three __launch_bounds__ occupancy targets: the generated kernels of the
# unprotected fixed-size plans (fp32 log n 15-24, fp64 14-24 even), patched to minimum blocks per SM =
# TARGET / threads for 512, 768 and 1024 resident threads (ptxas then caps registers at 128 / 80 / 64),
# each built and run against cuFFT (default shapes: 2^26 fp32 / 2^25 fp64 elements).
# Usage: bash experiments/scripts/gpu_fft_min_blocks.sh OUTDIR [LEVEL]   (LEVEL: none (default) or an abft level,
# e.g. two-sided-tb; rows: OUTDIR/min_blocks[_LEVEL].jsonl, a table last)
set -uo pipefail
out=${1:?usage: bash experiments/scripts/gpu_fft_min_blocks.sh OUTDIR [LEVEL]}
level=${2:-none}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_provenance.sh"
gpu_start "$out"
if [ "$level" = none ]; then prot="{scheme: none}"; tag=""; else prot="{scheme: abft, level: $level}"; tag="_$level"; fi
gen=/tmp/ftgen-fft-minb
rm -rf $gen
cat > "$out/fft_min_blocks$tag.yaml" <<Y
name: fft_mb
family: fft
arch: [sm_90]
protection: $prot
variants:
  - {precision: fp32, params: {logn: [15, 16, 17, 18, 19, 20, 21, 22, 23, 24]}}
  - {precision: fp64, params: {logn: [14, 16, 18, 20, 22, 24]}}
shapes:
  - {n: 1024, batch: 16}
Y
python3 -m ftgen.cli generate "$out/fft_min_blocks$tag.yaml" -o $gen/gen > /dev/null || exit 2
for t in 512 768 1024; do
  cp -r $gen/gen $gen/t$t
  python3 - $gen/t$t/fft_mb $t <<'PY'
import re, sys, pathlib
root, target = pathlib.Path(sys.argv[1]), int(sys.argv[2])
for f in root.glob("*/*_k*.cu"):
    s = f.read_text()
    f.write_text(re.sub(r"__launch_bounds__\((\d+), (\d+)\)", lambda m: f"__launch_bounds__({m.group(1)}, {max(1, target // int(m.group(1)))})", s))
PY
done
for t in 512 768 1024; do (python3 -m ftgen.cli build $gen/t$t/fft_mb -j 6 --arch sm_90 > "$out/build_t$t.log" 2>&1; echo "t$t build rc=$?") & done; wait
: > "$out/min_blocks$tag.jsonl"
for t in 512 768 1024; do
  for exe in $gen/t$t/fft_mb/bin/*; do
    $exe --reps 20 --warmup 3 | grep '^{"kernel' | sed "s/^{/{\"resident_threads\": $t, /" >> "$out/min_blocks$tag.jsonl"
  done
done
python3 - "$out/min_blocks$tag.jsonl" <<'PY'
import json, sys
tab = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    tab.setdefault((r["precision"], r["params"]["logn"]), {})[r["resident_threads"]] = (r["ref"]["ms"] / r["ms"]["median"], r["ok"])
print("x cuFFT (ref ms / ms; '!' = failed verification)\nprec logn    512    768   1024")
for (p, l), d in sorted(tab.items()):
    print(f"{p} {l:4d} " + " ".join(f"{d[t][0]:6.3f}{'' if d[t][1] else '!'}" if t in d else "     -" for t in (512, 768, 1024)))
PY
