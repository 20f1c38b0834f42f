#!/usr/bin/env python3
"""Registers and spill bytes of generated fft kernels, per launch, from ptxas (no GPU needed).

    python3 experiments/scripts/fft_ptxas.py "{precision: fp64, params: {logn: 20}}" "{precision: fp32, params: {logn: 0}}"
    python3 experiments/scripts/fft_ptxas.py --header-dir /tmp/alt "{precision: fp32, params: {logn: 22}}"
    python3 experiments/scripts/fft_ptxas.py --sass "{precision: fp32, params: {logn: 23}}"

--sass adds the static SASS instruction count of each launch and its integer share (from cuobjdump; the
kernels are unrolled, so the static count follows the executed one: Nsight Compute on an H100 found
integer instructions to be 34-57% of the fp32 2^23 launches' work against 10% in cuFFT's).

Each argument is one entry of a spec's `variants:` list (family fft, arch sm_90). With --header-dir the
kernels are also compiled against that directory's ftgen_fft_core.h (an edited copy) and both columns are
printed. Used for the spill analyses of docs/fft.md; a spill seen here is a candidate, its cost is
measured on the GPU (on an H100, fewer spills were not always faster).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kernel_tools as kt  # noqa: E402

ENTRY = re.compile(r"entry function '[^']*(k_\d+_\d)[^']*'.*?(\d+) bytes spill stores.*?Used (\d+) registers", re.S)
# SASS opcodes counted as integer / address work
INT_OPS = {"IMAD", "IADD3", "LOP3", "SHF", "LEA", "ISETP", "SEL", "IABS", "PRMT", "MOV", "IMNMX", "BMSK", "SGXT", "POPC", "FLO", "BREV",
           "I2F", "F2I", "UIADD3", "UMOV", "ULOP3", "USHF", "UIMAD", "ULEA", "UISETP", "USEL", "S2R", "S2UR"}


def ptxas(nvcc: str, src: Path, includes: list[Path], arch: str) -> list[tuple[str, int, int]]:
    """(launch, registers, spill store bytes) of one kernel source."""
    err = kt.nvcc(nvcc, src, includes, arch, ["-Xptxas", "-v", "-c", "-o", "/dev/null"])
    return sorted((m.group(1), int(m.group(3)), int(m.group(2))) for m in ENTRY.finditer(err))


def sass_counts(nvcc: str, dump: str, src: Path, includes: list[Path], arch: str, cubin: Path) -> dict[str, tuple[int, int]]:
    """{launch: (instructions, integer instructions)} of one kernel source, compiled to `cubin`."""
    kt.nvcc(nvcc, src, includes, arch, ["-cubin", "-o", str(cubin)])
    out = {}
    for name, insns in kt.sass_functions(dump, cubin):
        k = re.search(r"k_\d+_\d", name)
        if k:
            ops = [kt.opcode(x) for _, x in insns]
            out[k.group(0)] = (len(ops), sum(op in INT_OPS for op in ops))
    return out


def fmt(e: tuple) -> str:
    """launch: registers, spill bytes[, static instructions (integer share)]"""
    txt = f"{e[0]}: {e[1]} regs {e[2]} B spilled"
    if len(e) > 3 and e[3]:
        txt += f" {e[3][0]} instr ({100 * e[3][1] // max(e[3][0], 1)}% int)"
    return txt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="variant entries, e.g. \"{precision: fp32, params: {logn: 13}}\"")
    ap.add_argument("--header-dir", type=Path, help="directory with an alternative ftgen_fft_core.h")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-j", "--jobs", type=int, default=4)
    ap.add_argument("--sass", action="store_true", help="also count the static SASS instructions per launch (cuobjdump)")
    a = ap.parse_args()
    nvcc, dump = kt.tools(need_dump=a.sass)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kernels = [p for p in kt.write_variants("fft", a.arch, a.variants, root) if re.search(r"_k\d+\.cu$", p.name)]
        srcs = sorted(kernels, key=lambda p: (p.parent.name, int(re.search(r"_k(\d+)\.cu$", p.name).group(1))))
        heads = [None] + ([a.header_dir] if a.header_dir else [])
        jobs = [(s, h) for s in srcs for h in heads]

        def run(job):
            src, head = job
            inc = ([head] if head else []) + [src.parent, root / "common"]
            regs = ptxas(nvcc, src, inc, a.arch)
            if not a.sass:
                return regs
            cnt = sass_counts(nvcc, dump, src, inc, a.arch, root / f"{src.stem}_{'alt' if head else 'cur'}.cubin")
            return [(k, r, sp, cnt.get(k)) for k, r, sp in regs]

        with ThreadPoolExecutor(a.jobs) as ex:
            res = dict(zip(jobs, ex.map(run, jobs)))
    total = [0, 0]
    for src in srcs:
        cols = [res[(src, h)] for h in heads]
        for i, c in enumerate(cols):
            total[i] += sum(x[2] for x in c)
        line = "  ".join(" ".join(fmt(e) for e in c) for c in cols)
        print(f"{src.name[:-3]:70s} {line}")
    print("spill bytes in all:", total[0], *(["(alternative header:", total[1], ")"] if a.header_dir else []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
