"""Tables of result rows (rich), for bench, search and campaigns."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from ..bench import not_run


def _fmt(x, spec: str) -> str:
    if x is None:
        return "-"
    try:
        return format(x, spec)
    except (TypeError, ValueError):
        return str(x)


def shape_str(shape) -> str:
    if not isinstance(shape, dict):
        return "-"
    return "x".join(str(v) for v in shape.values())


def rows_table(rows: list[dict], title: str | None = None) -> Table:
    t = Table(title=title, show_lines=False, header_style="bold")
    # "x unprot": a protected variant over the unprotected kernel of its parameters, timed alternately
    # in the same executable (the `paired` field of its row)
    paired = any(r.get("paired") for r in rows)
    for col, just in (
        ("kernel", "left"),
        ("shape", "left"),
        ("ms", "right"),
        ("GFLOP/s", "right"),
        ("ref ms", "right"),
        ("x ref", "right"),
        *((("x unprot", "right"),) if paired else ()),
        ("max err", "right"),
        ("inj/det/corr", "right"),
        ("ok", "center"),
    ):
        t.add_column(col, justify=just, overflow="fold")
    for r in rows:
        ms = (r.get("ms") or {}).get("median")
        ref = (r.get("ref") or {}).get("ms")
        ratio = ref / ms if ms and ref else None
        rate = r.get("gflops")
        if rate is None and r.get("gbps") is not None:
            rate = r["gbps"]
        ft = "-"
        if r.get("protection", {}).get("scheme", "none") != "none":
            ft = f"{r.get('injected', 0)}/{r.get('detected', 0)}/{r.get('corrected', 0)}"
        err = r.get("error")
        ok = ("[yellow]not run[/]" if not_run(r) else "[green]yes[/]" if r.get("ok")
              else f"[red]no[/] {err.get('kind')}" if err else "[red]no[/]")
        if r.get("ok") and r.get("verified") is False and not not_run(r):  # --no-ref: it ran, nothing was checked
            ok = "[yellow]unverified[/]"
        t.add_row(
            r.get("kernel", "?"),
            shape_str(r.get("shape")),
            _fmt(ms, ".4f"),
            _fmt(rate, ".0f"),
            _fmt(ref, ".4f"),
            _fmt(ratio, ".3f"),
            *((_fmt((r.get("paired") or {}).get("x_unprotected"), ".3f"),) if paired else ()),
            _fmt(r.get("max_rel_err"), ".1e"),
            ft,
            ok,
        )
    return t


def print_rows(rows: list[dict], title: str | None = None, file=None) -> None:
    console = Console(file=file or sys.stdout, width=200 if not (file or sys.stdout).isatty() else None)
    console.print(rows_table(rows, title))
