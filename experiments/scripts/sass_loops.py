#!/usr/bin/env python3
"""Instruction mix of the loops in the SASS of generated kernels (no GPU needed).

    python3 experiments/scripts/sass_loops.py "{precision: fp32, protection: {scheme: none}, params: {m_tb: 128, n_tb: 128, k_tb: 16, m_w: 32, n_w: 64, m_t: 8, n_t: 8, stages: 3}}"
    python3 experiments/scripts/sass_loops.py --family fft "{precision: fp32, params: {logn: 23}}"

    python3 experiments/scripts/sass_loops.py --family kmeans --arch sm_90a --kernels 0 \
        "{precision: tf32, protection: {scheme: abft, level: threadblock, inject: true}, params: {backend: cutlass90, tile_n: 224}}"

Each argument is one entry of a spec's `variants:` list (arch sm_90 unless --arch). Every generated .cu source of the
variant (but the bench harness; the unprotected twin's included) is compiled to a cubin with the backend's compile
options, disassembled with cuobjdump, and for every kernel the loops of at least --min instructions (a backward branch
and its target) are printed with their length, most frequent opcodes and the instructions inside the loop that a
forward branch of at least 32 instructions can jump over (rare paths, fault sites: code a clean iteration does not
run but that the hot path is spread across). --kernels N prints each kernel of at least N instructions with its size
and its local-memory accesses (LDL / STL: a stack frame or spills). For a GEMM main loop the FFMA share bounds the
fraction of the FP32 peak the loop can issue; for the fft kernels (unrolled, no loops) use
experiments/scripts/fft_ptxas.py --sass.
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


def skippable(body: list[tuple[int, str]], min_skip: int = 32) -> int:
    """Instructions of a loop body that a forward branch inside it can jump over by at least min_skip instructions."""
    index = {a: i for i, (a, _) in enumerate(body)}
    skipped: set[int] = set()
    for i, (a, text) in enumerate(body):
        t = TARGET.search(text) if "BRA" in text else None
        j = index.get(int(t.group(1), 16), -1) if t else -1
        if j - i - 1 >= min_skip:
            skipped.update(range(i + 1, j))
    return len(skipped)


def loops(functions: list[tuple[str, list[tuple[int, str]]]], min_len: int) -> list[tuple[str, int, collections.Counter, int]]:
    """(kernel, length, opcode counts, instructions a forward branch can skip) of every loop of at least min_len
    instructions."""
    out = []
    for name, ins in functions:
        index = {a: i for i, (a, _) in enumerate(ins)}
        for i, (a, text) in enumerate(ins):
            t = TARGET.search(text) if "BRA" in text else None
            if not t or int(t.group(1), 16) >= a or int(t.group(1), 16) not in index:
                continue
            body = ins[index[int(t.group(1), 16)] : i + 1]
            if len(body) >= min_len:
                out.append((name, len(body), collections.Counter(kt.opcode(x) for _, x in body), skippable(body)))
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
    ap.add_argument("--family", default="gemm", choices=["gemm", "fft", "kmeans", "attention"])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--min", type=int, default=100, help="shortest loop to report (instructions)")
    ap.add_argument("--kernels", type=int, default=None, metavar="N",
                    help="also print every kernel of at least N instructions: size and local-memory accesses")
    a = ap.parse_args()
    nvcc, dump = kt.tools()
    options = kt.variant_options(a.family, a.arch, a.variants)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for src in kt.write_variants(a.family, a.arch, a.variants, root):
            if src.name.endswith("_bench.cu"):
                continue
            cubin = root / (src.stem + ".cubin")
            extra = [o for o in options.get(src.parent.name, []) if not o.startswith("-Xptxas")]
            kt.nvcc(nvcc, src, [src.parent, root / "common", *kt.extra_includes()], a.arch, [*extra, "-cubin", "-o", str(cubin)])
            functions = kt.sass_functions(dump, cubin)
            if a.kernels is not None:
                for name, ins in functions:
                    if len(ins) >= a.kernels:
                        local = sum(kt.opcode(x) in ("LDL", "STL") for _, x in ins)
                        print(f"{src.stem} {short_name(name)}: {len(ins)} instructions, {local} local-memory accesses")
            for name, n, ops, cold in loops(functions, a.min):
                top = ", ".join(f"{op} {c}" for op, c in ops.most_common(8))
                fma = ops.get("FFMA", 0) + ops.get("DFMA", 0)
                print(f"{src.stem} {short_name(name)}: loop of {n} instructions ({cold} behind forward branches), "
                      f"FMA {100 * fma / n:.0f}%: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
