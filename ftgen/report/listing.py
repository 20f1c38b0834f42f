"""`ftgen list`: a family's description rendered as tables of parameters per backend."""

from __future__ import annotations

import click


def terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((120, 24)).columns


def print_family(console, d: dict) -> None:
    """One family of `ftgen list`: its backends as tables of parameters. Reads the structured
    description (``backends: [{name, precisions, schemes, requires, params: [...]}]``) and the
    older flat one (``schemes``, ``params: {name: text}``)."""
    from rich.table import Table

    click.echo(f"{d['family']}: {d.get('description', '')}")
    click.echo(f"  precisions: {', '.join(d.get('precisions', []))}")
    click.echo(f"  shape keys: {', '.join(d.get('shape_keys', []))}")
    backends = d.get("backends")
    if isinstance(backends, list) and len(backends) > 1:
        click.echo(f"  backends: {', '.join(str(b.get('name')) for b in backends)} (`params: {{backend: NAME}}` selects one, "
                   "a list searches over them; without it the first that offers the precision and scheme)")
    if isinstance(backends, list) and backends:
        for b in backends:
            t = Table(title=f"{d['family']} backend {b.get('name')}", title_justify="left", header_style="bold")
            for col in ("param", "type", "allowed", "default", "doc"):
                t.add_column(col, overflow="fold")
            for prm in b.get("params", []):
                if prm.get("choices"):
                    allowed = ", ".join(map(str, prm["choices"]))
                elif prm.get("range"):
                    lo, hi = prm["range"]
                    allowed = f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"{lo} .. {hi}"
                else:
                    allowed = "-"
                default = prm.get("default")
                t.add_row(str(prm.get("name")), str(prm.get("type")), allowed,
                          ", ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default), str(prm.get("doc") or ""))
            console.print(t)
            click.echo(f"  precisions: {', '.join(b.get('precisions', []))}")
            schemes = b.get("schemes") or {}
            click.echo("  schemes: " + "; ".join(f"{k}: {', '.join(v) or '-'}" for k, v in schemes.items()))
            if b.get("requires"):
                click.echo(f"  requires: {', '.join(b['requires'])}")
    else:
        click.echo("  schemes: " + "; ".join(f"{k}: {', '.join(v) or '-'}" for k, v in d.get("schemes", {}).items()))
        click.echo("  params:")
        params = d.get("params", {})
        for p in params.values() if isinstance(params, dict) else params:
            click.echo(f"    {p}")
    if d.get("constraints"):
        click.echo("  constraints:")
        for c in d["constraints"]:
            click.echo(f"    {c}")
    click.echo()
