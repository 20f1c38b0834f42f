"""The README's table of headline figures, rendered from the results index.

`results/index.json` lists the figures of record: one entry per claim, each
`{"claim", "family", "file", "command", "commit", "gpu", "figure": {name: value}}`. The README holds
the rendered table between two marker lines; nothing else in the README may state a measured figure.

    python -m ftgen.report.readme            # rewrite the table in README.md
    python -m ftgen.report.readme --check    # exit 1 with a diff when README.md is not current

Exit codes: 0 ok (or current), 1 README.md out of date (--check), 2 bad index or README (the message
names the file and the entry).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path

BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"
KEYS = ("claim", "family", "file", "command", "commit", "gpu", "figure")
OPTIONAL = ("headline",)  # headline: false keeps an entry in the index but out of the README's short table
REPO = Path(__file__).resolve().parents[2]


class ReadmeError(ValueError):
    """The index or the README cannot be used; the message names the file and what is wrong."""


def load_index(path: Path) -> list[dict]:
    """The index's entries, each checked for the keys and types the table needs."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReadmeError(f"{path}: not found") from None
    except json.JSONDecodeError as e:
        raise ReadmeError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(data, list):
        raise ReadmeError(f"{path}: must be a JSON list of entries")
    for i, entry in enumerate(data):
        where = f"{path}: entry {i}"
        if not isinstance(entry, dict):
            raise ReadmeError(f"{where}: must be an object with the keys {', '.join(KEYS)}")
        missing = [k for k in KEYS if k not in entry]
        if missing:
            raise ReadmeError(f"{where}: missing {', '.join(missing)}")
        unknown = sorted(set(entry) - set(KEYS) - set(OPTIONAL))
        if unknown:
            raise ReadmeError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS + OPTIONAL)}")
        if not isinstance(entry.get("headline", True), bool):
            raise ReadmeError(f"{where}: headline must be true or false")
        for k in KEYS[:-1]:
            if not isinstance(entry[k], str) or not entry[k].strip():
                raise ReadmeError(f"{where}: {k} must be a non-empty string")
        fig = entry["figure"]
        if not isinstance(fig, dict) or not fig:
            raise ReadmeError(f"{where}: figure must be a non-empty object {{name: value}}")
        for name, value in fig.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ReadmeError(f"{where}: figure.{name}: must be a number or a string")
        if entry["file"].startswith("/") or ".." in Path(entry["file"]).parts:
            raise ReadmeError(f"{where}: file must be a path inside the repository, relative to its root")
    return data


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(v: int | float | str) -> str:
    return v if isinstance(v, str) else f"{v:g}"


def render_table(entries: list[dict], readme_dir: Path = REPO, repo: Path = REPO) -> str:
    """The markdown table, one row per headline entry in index order; each row's figures link to its data file."""
    lines = ["| family | claim | figures (data) | GPU, commit |", "| --- | --- | --- | --- |"]
    for e in entries:
        if not e.get("headline", True):
            continue
        link = Path(os.path.relpath(repo / e["file"], readme_dir)).as_posix()
        figs = "; ".join(f"{_cell(k)} **{_cell(_value(v))}**" for k, v in e["figure"].items())
        gpu = _cell(e["gpu"]).replace("NVIDIA ", "")
        lines.append(f"| {_cell(e['family'])} | {_cell(e['claim'])} | [{figs}]({link}) | {gpu}, `{_cell(e['commit'])}` |")
    return "\n".join(lines) + "\n"


def splice(readme: str, table: str, where: str = "README.md") -> str:
    """README text with the part between the markers replaced by the table."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise ReadmeError(f"{where}: needs exactly one '{BEGIN}' line and one '{END}' line")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ftgen.report.readme", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 with a diff when README.md is not current")
    ap.add_argument("--index", type=Path, default=REPO / "results" / "index.json", help="results index")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md", help="README to render into")
    args = ap.parse_args(argv)
    try:
        entries = load_index(args.index)
        try:
            old = args.readme.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ReadmeError(f"{args.readme}: not found") from None
        repo = args.index.resolve().parent.parent
        new = splice(old, render_table(entries, args.readme.resolve().parent, repo), str(args.readme))
    except ReadmeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new == old:
            return 0
        diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(args.readme), "rendered from the index")
        sys.stdout.writelines(diff)
        print(f"{args.readme}: the figures table is not current; run: python -m ftgen.report.readme", file=sys.stderr)
        return 1
    if new != old:
        tmp = args.readme.with_name(args.readme.name + ".tmp")
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
