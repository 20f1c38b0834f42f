#!/usr/bin/env python3
"""Instruction mix of the loops in the SASS of generated kernels (no GPU needed).

    python3 scripts/sass_loops.py "{precision: fp32, protection: {scheme: none}, params: {m_tb: 128, n_tb: 128, k_tb: 16, m_w: 32, n_w: 64, m_t: 8, n_t: 8, stages: 3}}"
    python3 scripts/sass_loops.py --family fft "{precision: fp32, params: {logn: 23}}"

Each argument is one entry of a spec's `variants:` list (arch sm_90). Every generated .cu source of the variant
is compiled to a cubin, disassembled with cuobjdump, and for every kernel the loops of at least --min
instructions (a backward branch and its target) are printed with their length and most frequent opcodes. For
a GEMM main loop the FFMA share bounds the fraction of the FP32 peak the loop can issue; for the fft kernels
(unrolled, no loops) use scripts/fft_ptxas.py --sass.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ftgen.build import find_nvcc  # noqa: E402
from ftgen.codegen.emit import render_spec  # noqa: E402
from ftgen.spec import load_spec_text  # noqa: E402

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")
TARGET = re.compile(r"BRA\s.*?0x([0-9a-f]+)")


def loops(sass: str, min_len: int) -> list[tuple[str, int, collections.Counter]]:
    """(kernel, length, opcode counts) of every loop of at least min_len instructions."""
    out = []
    for part in re.split(r"\n\s+Function : ", sass)[1:]:
        name = part.split("\n", 1)[0].strip()
        ins = [(int(m.group(1), 16), m.group(2).strip()) for m in INSN.finditer(part)]
        index = {a: i for i, (a, _) in enumerate(ins)}
        for i, (a, text) in enumerate(ins):
            t = TARGET.search(text) if "BRA" in text else None
            if not t or int(t.group(1), 16) >= a or int(t.group(1), 16) not in index:
                continue
            body = ins[index[int(t.group(1), 16)] : i + 1]
            if len(body) >= min_len:
                out.append((name, len(body), collections.Counter(OPCODE.match(x).group(1) for _, x in body)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="variant entries of a spec")
    ap.add_argument("--family", default="gemm", choices=["gemm", "fft"])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--min", type=int, default=100, help="shortest loop to report (instructions)")
    a = ap.parse_args()
    nvcc = find_nvcc()
    dump_tool = shutil.which("cuobjdump") or (str(Path(nvcc).with_name("cuobjdump")) if nvcc else None)
    if not nvcc or not dump_tool:
        raise SystemExit("needs nvcc and cuobjdump")
    body = "\n".join(f"  - {v}" for v in a.variants)
    spec = load_spec_text(f"name: sass\nfamily: {a.family}\narch: [{a.arch}]\nvariants:\n{body}\n", "sass.yaml")
    files, _ = render_spec(spec)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        srcs = sorted(root / rel for rel in files if rel.endswith(".cu") and not rel.endswith("_bench.cu"))
        for src in srcs:
            cubin = root / (src.stem + ".cubin")
            cmd = [nvcc, "-std=c++17", "-O3", "--expt-relaxed-constexpr", f"-arch={a.arch}", "-cubin", "-o", str(cubin),
                   "-I", str(src.parent), "-I", str(root / "common"), str(src)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode:
                raise SystemExit(f"nvcc failed on {src.name}:\n{p.stderr[-2000:]}")
            sass = subprocess.run([dump_tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
            for name, n, ops in loops(sass, a.min):
                top = ", ".join(f"{op} {c}" for op, c in ops.most_common(8))
                ffma = ops.get("FFMA", 0) + ops.get("DFMA", 0)
                print(f"{src.stem}: loop of {n} instructions, FMA {100 * ffma / n:.0f}%: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
