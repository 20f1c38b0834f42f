#!/usr/bin/env python3
"""Instructions executed and stall samples per source line of one kernel, from Nsight Compute's source counters.

    python3 experiments/scripts/ncu_lines.py SASS.csv DIS.txt [--per N] [--top 40] [--root DIR]

SASS.csv: `ncu -i REPORT --page source --csv --print-source sass` of a report taken with `--section SourceCounters`
(one kernel). DIS.txt: `nvdisasm -g -c` of the cubin(s) holding that kernel (extract them from an executable with
`cuobjdump -xelf all EXE`; several files may be concatenated). The kernel's function in DIS.txt is the one whose
instruction sequence matches the report's (its name is not needed); each instruction's address offset then gives its
innermost source line. Prints, for the top lines, the share of instructions executed and of stall samples, the count
per `--per` (e.g. warps x key tiles, for a per-tile figure) and the source text where the file is readable (under
`--root` when the paths are another machine's).
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
from pathlib import Path

INSN = re.compile(r"/\*([0-9a-f]+)\*/\s+([^;]*);")
LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def opcode(text: str) -> str:
    """The opcode of one SASS instruction's text (its predicate skipped), or "?"."""
    m = OPCODE.match(text.strip())
    return m.group(1) if m else "?"


def functions(dis: str) -> dict[str, list[tuple[int, str, tuple[str, int] | None]]]:
    """name -> [(address, opcode, (file, line) or None)] for every .text section of nvdisasm -g output."""
    out: dict[str, list] = {}
    cur, where = None, None
    for raw in dis.splitlines():
        if raw.startswith(".text.") and raw.rstrip().endswith(":"):
            cur = raw.strip()[len(".text."):-1]
            out[cur] = []
            where = None
            continue
        m = LINE.search(raw)
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        m = INSN.search(raw)
        if m and cur is not None:
            out[cur].append((int(m.group(1), 16), opcode(m.group(2)), where))
    return out


def report(path: Path) -> list[dict]:
    rows = list(csv.reader(path.open()))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    names = rows[head]
    return [dict(zip(names, r)) for r in rows[head + 1:] if len(r) == len(names)]


def match(fns: dict[str, list], ops: list[str]) -> str:
    """The function whose opcode sequence agrees best with the report's (same length first)."""
    def score(seq):
        return sum(a == b for (_, a, _), b in zip(seq, ops)) if len(seq) == len(ops) else -1
    best = max(fns, key=lambda n: score(fns[n]))
    if score(fns[best]) < 0.99 * len(ops):
        raise SystemExit(f"no function in the disassembly matches the report's {len(ops)} instructions")
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("dis")
    ap.add_argument("--per", type=float, default=0.0)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--root", default="")
    ap.add_argument("--by", choices=("executed", "stalls"), default="executed", help="the order of the lines")
    a = ap.parse_args()
    rows = report(Path(a.sass))
    ops = [opcode(r["Source"]) for r in rows]
    fns = functions(Path(a.dis).read_text())
    name = match(fns, ops)
    base = int(rows[0]["Address"], 16)
    where = {addr: w for addr, _, w in fns[name]}
    executed, stalls = collections.Counter(), collections.Counter()
    for r in rows:
        w = where.get(int(r["Address"], 16) - base)
        executed[w] += int(r.get("Instructions Executed") or 0)
        stalls[w] += int(r.get("Warp Stall Sampling (All Samples)") or 0)
    total, samples = sum(executed.values()) or 1, sum(stalls.values()) or 1
    print(f"{name}: {len(rows)} instructions, {total} executed, {samples} stall samples")
    texts: dict[str, list[str]] = {}
    for w, _ in (executed if a.by == "executed" else stalls).most_common(a.top):
        n = executed[w]
        text = ""
        if w:
            p = Path(a.root + w[0]) if a.root else Path(w[0])
            if w[0] not in texts:
                texts[w[0]] = p.read_text(errors="replace").splitlines() if p.is_file() else []
            lines = texts[w[0]]
            text = lines[w[1] - 1].strip()[:80] if w[1] <= len(lines) else ""
        per = f" {n / a.per:9.1f}" if a.per else ""
        loc = f"{Path(w[0]).name}:{w[1]}" if w else "?"
        print(f"{100 * n / total:5.1f}% {100 * stalls[w] / samples:5.1f}%{per}  {loc:32s} {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
