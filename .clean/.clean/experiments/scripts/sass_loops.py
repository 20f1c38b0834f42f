#!/usr/bin/env python3
"""Instruction mix of the loops in the SASS of generated kernels (no GPU needed).

    python3 experiments/scripts/sass_loops.py "{precision: fp32, protection: {scheme: none}, params: {m_tb: 128, n_tb: 128, k_tb: 16, m_w: 32, n_w: 64, m_t: 8, n_t: 8, stages: 3}}"
    python3 experiments/scripts/sass_loops.py --family fft "{precision: fp32, params: {logn: 23}}"

Each argument is one entry of a spec's `variants:` list (arch sm_90). Every generated .cu source of the variant
(but the bench harness) is compiled to a cubin, disassembled with cuobjdump, and for every kernel the loops of
at least --min instructions (a backward branch and its target) are printed with their length and most
frequent opcodes. For a GEMM main loop the FFMA share bounds the fraction of the FP32 peak the loop can issue;
for the fft kernels (unrolled, no loops) use experiments/scripts/fft_ptxas.py --sass.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kernel_tools as kt  # noqa: E402

TARGET = re.compile(r"BRA\s.*?0x([0-9a-f]+)")


def loops(functions: list[tuple[str, list[tuple[int, str]]]], min_len: int) -> list[tuple[str, int, collections.Counter]]:
    """(kernel, length, opcode counts) of every loop of at least min_len instructions."""
    out = []
    for name, ins in functions:
        index = {a: i for i, (a, _) in enumerate(ins)}
        for i, (a, text) in enumerate(ins):
            t = TARGET.search(text) if "BRA" in text else None
            if not t or int(t.group(1), 16) >= a or int(t.group(1), 16) not in index:
                continue
            body = ins[index[int(t.group(1), 16)] : i + 1]
            if len(body) >= min_len:
                out.append((name, len(body), collections.Counter(kt.opcode(x) for _, x in body)))
    return out


def short_name(mangled: str) -> str:
    """The kernel's name without namespaces and template arguments (demangled with c++filt where there is
    one): enough to tell the kernels of one executable apart."""
    filt = shutil.which("c++filt")
    text = subprocess.run([filt], input=mangled, capture_output=True, text=True).stdout.strip() if filt else mangled
    if text.startswith("_Z"):  # not demangled (c++filt gives up on some CUTLASS names): its first nested name
        parts, i = [], 3 if text.startswith("_ZN") else 2
        while i < len(text) and text[i].isdigit():  # <length><name> ... up to the template arguments
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            parts.append(text[j : j + int(text[i:j])])
            i = j + int(text[i:j])
        return "::".join(parts) or text[:40]
    depth, out = 0, []
    for ch in text.replace("(anonymous namespace)", "anon"):  # drop template arguments
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">"
    head = "".join(out).split("(")[0].split()  # [return type,] qualified name
    return head[-1].split("::")[-1] if head else mangled[:40]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="variant entries of a spec")
    ap.add_argument("--family", default="gemm", choices=["gemm", "fft"])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--min", type=int, default=100, help="shortest loop to report (instructions)")
    a = ap.parse_args()
    nvcc, dump = kt.tools()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for src in kt.write_variants(a.family, a.arch, a.variants, root):
            if src.name.endswith("_bench.cu"):
                continue
            cubin = root / (src.stem + ".cubin")
            kt.nvcc(nvcc, src, [src.parent, root / "common", *kt.extra_includes()], a.arch, ["-cubin", "-o", str(cubin)])
            for name, n, ops in loops(kt.sass_functions(dump, cubin), a.min):
                top = ", ".join(f"{op} {c}" for op, c in ops.most_common(8))
                fma = ops.get("FFMA", 0) + ops.get("DFMA", 0)
                print(f"{src.stem} {short_name(name)}: loop of {n} instructions, FMA {100 * fma / n:.0f}%: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
