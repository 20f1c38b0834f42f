"""Compare two results files (JSON lines from ``bench``, ``search`` or a campaign): B against A.

Rows are matched by their identity: the kernel, the shape and the fields that say how a row was
run (``IDENTITY``); a key that occurs several times in one file is numbered in file order. For
every pair with timings, the verdict on ``ms.median`` follows nvbench_compare's decision:

- each row's noise is half its relative spread, ``(ms.max - ms.min) / (2 * ms.median)``;
- the tolerance is the larger of the two rows' noises and the noise floor (``--threshold``, percent);
- a relative change ``(B - A) / A`` within the tolerance is ``SAME``, below it ``FASTER``, above it
  ``SLOWER``; with neither a spread in both rows nor a floor, the verdict is ``???``.

The ratio to the vendor reference (``ref.ms / ms.median``, measured in the same run as the row) is
compared too: it cancels drift of the machine between the two runs. Rows whose ``ok`` changed are
flagged; a row that stopped verifying counts as a regression like a significant slowdown.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SpecError, short

# Fields besides kernel and shape that distinguish rows of one file (how the row was run).
IDENTITY = ("dist", "inject_kind", "trial", "seed")
# Lines of a results file that are not rows.
NOT_ROWS = ("provenance", "best", "campaign", "per_bit", "roc")
SAME, FASTER, SLOWER, UNKNOWN = "SAME", "FASTER", "SLOWER", "???"


@dataclass
class Pair:
    key: str
    a: dict | None
    b: dict | None
    a_ms: float | None = None
    b_ms: float | None = None
    change: float | None = None  # (B - A) / A of the median time
    tolerance: float | None = None  # relative; the verdict's bound
    verdict: str | None = None
    a_ref_ratio: float | None = None  # ref.ms / ms in A (above 1: faster than the reference)
    b_ref_ratio: float | None = None
    ok_change: str | None = None  # "ok->FAILED" or "FAILED->ok"

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "kernel": (self.a or self.b or {}).get("kernel"),
            "shape": (self.a or self.b or {}).get("shape"),
            "in": "both" if self.a is not None and self.b is not None else "a" if self.a is not None else "b",
            "a_ms": self.a_ms,
            "b_ms": self.b_ms,
            "change": self.change,
            "tolerance": self.tolerance,
            "verdict": self.verdict,
            "a_ref_ratio": self.a_ref_ratio,
            "b_ref_ratio": self.b_ref_ratio,
            "ok_a": None if self.a is None else bool(self.a.get("ok")),
            "ok_b": None if self.b is None else bool(self.b.get("ok")),
            "ok_change": self.ok_change,
        }


@dataclass
class Comparison:
    a_path: str
    b_path: str
    noise_pct: float | None
    pairs: list[Pair] = field(default_factory=list)
    a_provenance: dict = field(default_factory=dict)
    b_provenance: dict = field(default_factory=dict)

    def matched(self) -> list[Pair]:
        return [p for p in self.pairs if p.a is not None and p.b is not None]

    def regressions(self) -> list[str]:
        return [p.key for p in self.matched() if p.verdict == SLOWER or p.ok_change == "ok->FAILED"]

    def summary(self) -> dict:
        m = self.matched()
        counts = {v: sum(1 for p in m if p.verdict == v) for v in (SAME, FASTER, SLOWER, UNKNOWN)}
        speedups = [p.a_ms / p.b_ms for p in m if p.a_ms and p.b_ms]
        ref_a = [p.a_ref_ratio for p in m if p.a_ref_ratio and p.b_ref_ratio]
        ref_b = [p.b_ref_ratio for p in m if p.a_ref_ratio and p.b_ref_ratio]
        return {
            "matched": len(m),
            "only_a": sum(1 for p in self.pairs if p.b is None),
            "only_b": sum(1 for p in self.pairs if p.a is None),
            "verdicts": counts,
            "geomean_speedup": geomean(speedups),  # A.ms / B.ms: above 1, B is faster
            "geomean_ref_ratio_a": geomean(ref_a),
            "geomean_ref_ratio_b": geomean(ref_b),
            "ok_changed": sum(1 for p in m if p.ok_change),
            "regressions": len(self.regressions()),
        }

    def to_json(self) -> dict:
        return {
            "a": self.a_path,
            "b": self.b_path,
            "noise_floor_pct": self.noise_pct,
            "rows": [p.to_json() for p in self.pairs],
            "summary": self.summary(),
        }


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


# --------------------------------------------------------------------------------------------


def read_results(path: str | Path) -> tuple[dict, list[dict]]:
    """(provenance, rows) of a results file (JSON lines, or the same gzipped: ``.gz``); a bad file is a clear
    exit-2 error."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: no such results file" if not p.exists() else f"{p}: not a regular file")
    prov: dict = {}
    rows: list[dict] = []
    try:
        opener = gzip.open if p.suffix == ".gz" else open  # results of record are kept gzipped
        with opener(p, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    raise SpecError(f"{p}:{n}: not a JSON object: {short(line)}") from None
                if not isinstance(obj, dict):
                    raise SpecError(f"{p}:{n}: not a JSON object: {short(line)}")
                if "provenance" in obj and len(obj) == 1:
                    prov = obj["provenance"] if isinstance(obj["provenance"], dict) else {}
                elif "kernel" in obj:
                    rows.append(obj)
                elif not any(k in obj for k in NOT_ROWS):
                    raise SpecError(f"{p}:{n}: neither a row (no 'kernel') nor provenance: {short(line)}")
    except UnicodeDecodeError as e:
        raise SpecError(f"{p}: not UTF-8 text (byte {e.start})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # a .gz name on a file that is not (or not wholly) gzip
        raise SpecError(f"{p}: not a readable gzip file ({e})") from None
    if not rows:
        raise SpecError(f"{p}: no result rows (lines with a 'kernel')")
    return prov, rows


def row_key(row: dict) -> str:
    shape = row.get("shape")
    shape_txt = "x".join(str(v) for v in shape.values()) if isinstance(shape, dict) else str(shape or "-")
    parts = [str(row.get("kernel")), shape_txt]
    parts += [f"{k}={row[k]}" for k in IDENTITY if k in row]
    return " ".join(parts)


def _keyed(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    seen: dict[str, int] = {}
    for r in rows:
        k = row_key(r)
        seen[k] = seen.get(k, 0) + 1
        out[k if seen[k] == 1 else f"{k} #{seen[k]}"] = r
    return out


def _ms(row: dict) -> tuple[float | None, float | None]:
    """(median ms, relative noise) of a row that ran and verified; noise None without a spread."""
    ms = row.get("ms")
    if not isinstance(ms, dict):
        return None, None
    med = _num(ms.get("median"))
    if not med or med <= 0:
        return None, None
    lo, hi = _num(ms.get("min")), _num(ms.get("max"))
    noise = (hi - lo) / (2 * med) if lo is not None and hi is not None and hi >= lo else None
    return med, noise


def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _ref_ratio(row: dict, med: float | None) -> float | None:
    ref = row.get("ref")
    ref_ms = _num(ref.get("ms")) if isinstance(ref, dict) else None
    return ref_ms / med if ref_ms and med else None


def verdict(a_ms: float, a_noise: float | None, b_ms: float, b_noise: float | None, floor: float | None) -> tuple[float, float | None, str]:
    """(relative change, tolerance, verdict) of B's median against A's (see the module doc)."""
    change = (b_ms - a_ms) / a_ms
    noises = [x for x in (a_noise, b_noise) if x is not None]
    if len(noises) == 2:
        tol = max(noises + ([floor] if floor is not None else []))
    elif floor is not None:
        tol = max(noises + [floor])
    else:
        return change, None, UNKNOWN
    if abs(change) <= tol:
        return change, tol, SAME
    return change, tol, FASTER if change < 0 else SLOWER


def compare_rows(a_rows: list[dict], b_rows: list[dict], noise_pct: float | None = None) -> list[Pair]:
    floor = None if noise_pct is None else noise_pct / 100.0
    a, b = _keyed(a_rows), _keyed(b_rows)
    pairs = []
    for key in list(a) + [k for k in b if k not in a]:
        ra, rb = a.get(key), b.get(key)
        p = Pair(key, ra, rb)
        a_noise = b_noise = None
        if ra is not None:
            p.a_ms, a_noise = _ms(ra) if ra.get("ok") else (None, None)
            p.a_ref_ratio = _ref_ratio(ra, p.a_ms)
        if rb is not None:
            p.b_ms, b_noise = _ms(rb) if rb.get("ok") else (None, None)
            p.b_ref_ratio = _ref_ratio(rb, p.b_ms)
        if ra is not None and rb is not None:
            if bool(ra.get("ok")) != bool(rb.get("ok")):
                p.ok_change = "ok->FAILED" if ra.get("ok") else "FAILED->ok"
            if p.a_ms and p.b_ms:
                p.change, p.tolerance, p.verdict = verdict(p.a_ms, a_noise, p.b_ms, b_noise, floor)
        pairs.append(p)
    return pairs


def compare_files(a: str | Path, b: str | Path, noise_pct: float | None = None) -> Comparison:
    if noise_pct is not None and math.isnan(noise_pct):  # NaN passes click's FloatRange
        raise SpecError("--threshold: nan is not a number; give a percentage from 0 to 1000")
    a_prov, a_rows = read_results(a)
    b_prov, b_rows = read_results(b)
    c = Comparison(str(a), str(b), noise_pct, compare_rows(a_rows, b_rows, noise_pct), a_prov, b_prov)
    if not c.matched():
        raise SpecError(f"{a} and {b} have no row in common (rows are matched by kernel, shape and {', '.join(IDENTITY)})")
    return c


# --------------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.2f}%"


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_comparison(c: Comparison, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=200)
    t = Table(title=f"B = {c.b_path} against A = {c.a_path}", header_style="bold", title_justify="left")
    for col in ("kernel / shape", "A ms", "B ms", "change", "noise", "verdict", "A ref x", "B ref x", "ok"):
        t.add_column(col, justify="left" if col == "kernel / shape" else "right")
    style = {SLOWER: "red", FASTER: "green", UNKNOWN: "yellow"}
    for p in c.pairs:
        if p.a is None or p.b is None:
            t.add_row(p.key, _f(p.a_ms, ".4f"), _f(p.b_ms, ".4f"), "-", "-", "only in " + ("A" if p.b is None else "B"), "-", "-", "-")
            continue
        v = p.verdict or "-"
        ok = p.ok_change or ("ok" if p.a.get("ok") else "FAILED")
        t.add_row(
            p.key, _f(p.a_ms, ".4f"), _f(p.b_ms, ".4f"), _pct(p.change), _pct(p.tolerance).lstrip("+"),
            f"[{style[v]}]{v}[/]" if v in style else v, _f(p.a_ref_ratio, ".3f"), _f(p.b_ref_ratio, ".3f"),
            f"[red]{ok}[/]" if p.ok_change == "ok->FAILED" else ok,
        )
    console.print(t)
    s = c.summary()
    vs = s["verdicts"]
    lines = [
        f"{s['matched']} matched row(s): {vs[SAME]} SAME, {vs[FASTER]} FASTER, {vs[SLOWER]} SLOWER, {vs[UNKNOWN]} ???"
        + (f"; {s['only_a']} only in A" if s["only_a"] else "") + (f"; {s['only_b']} only in B" if s["only_b"] else ""),
        f"geometric mean of A.ms / B.ms: {_f(s['geomean_speedup'], '.4f')} (above 1: B is faster)",
        f"geometric mean of ref.ms / ms: A {_f(s['geomean_ref_ratio_a'], '.4f')}, B {_f(s['geomean_ref_ratio_b'], '.4f')}",
    ]
    if s["ok_changed"]:
        lines.append(f"{s['ok_changed']} row(s) changed verification status")
    if c.noise_pct is None:
        lines.append("noise: each row's min/max spread (give --threshold PCT for a noise floor)")
    else:
        lines.append(f"noise: each row's min/max spread, at least {c.noise_pct:g}%")
    for ln in lines:
        console.print(ln, highlight=False, markup=False)
