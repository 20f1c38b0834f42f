"""The README: its figures table is rendered from results/index.json, it stays small, and the index points at data
that exists (that part is skipped when results/ is not in the tree)."""

import json
from pathlib import Path

import pytest

from ftgen.report import readme

REPO = Path(__file__).resolve().parent.parent
INDEX = REPO / "results" / "index.json"
README = REPO / "README.md"
# The index is small and travels with the README; the data files it names may be moved away.
DATA_PRESENT = (REPO / "results").is_dir() and any(p.is_dir() for p in (REPO / "results").iterdir())


def test_readme_is_under_25_kb():
    assert README.stat().st_size < 25 * 1024


@pytest.mark.skipif(not INDEX.is_file(), reason="results/index.json is not in this tree")
def test_readme_figures_table_is_current(capsys):
    rc = readme.main(["--check"])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err


@pytest.mark.skipif(not INDEX.is_file(), reason="results/index.json is not in this tree")
def test_every_headline_entry_is_complete_and_in_the_table():
    entries = readme.load_index(INDEX)
    assert any(e.get("headline", True) for e in entries)
    text = README.read_text(encoding="utf-8")
    table = text.split(readme.BEGIN, 1)[1].split(readme.END, 1)[0]
    # a file several entries cite (a campaign judged by two rules) is linked when any of them is a headline
    headline_files = {e["file"] for e in entries if e.get("headline", True)}
    for e in entries:
        assert (f"]({e['file']})" in table) == (e["file"] in headline_files), e["file"]


def test_entries_off_the_headline_stay_out_of_the_table():
    entries = [{"claim": "a", "family": "f", "file": "r/a", "command": "c", "commit": "1", "gpu": "G", "figure": {"x": 1}},
               {"claim": "b", "family": "f", "file": "r/b", "command": "c", "commit": "1", "gpu": "G", "figure": {"x": 2},
                "headline": False}]
    table = readme.render_table(entries)
    assert "](r/a)" in table and "](r/b)" not in table


@pytest.mark.skipif(not DATA_PRESENT, reason="results/ data is not in this tree")
def test_every_index_entry_names_a_file_that_exists():
    missing = [e["file"] for e in readme.load_index(INDEX) if not (REPO / e["file"]).is_file()]
    assert not missing


@pytest.mark.skipif(not DATA_PRESENT, reason="results/ data is not in this tree")
def test_results_stay_under_10_mb():
    size = sum(p.stat().st_size for p in (REPO / "results").rglob("*") if p.is_file())
    assert size < 10 * 1024 * 1024, size


def _write(tmp_path, index, text):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "index.json").write_text(json.dumps(index))
    (tmp_path / "README.md").write_text(text)
    return ["--index", str(tmp_path / "results" / "index.json"), "--readme", str(tmp_path / "README.md")]


ENTRY = {"claim": "a claim", "family": "fam", "file": "results/x/a.jsonl", "command": "ftgen bench", "commit": "abc1234",
         "gpu": "GPU", "figure": {"x ref": 1.25, "faults": "3/3"}}
PAGE = f"# t\n\ntext\n{readme.BEGIN}\nold\n{readme.END}\nafter\n"


def test_render_writes_the_table_between_the_markers_and_check_sees_it(tmp_path, capsys):
    args = _write(tmp_path, [ENTRY], PAGE)
    assert readme.main(["--check", *args]) == 1
    assert "+| fam | a claim |" in capsys.readouterr().out
    assert readme.main(args) == 0
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("# t\n\ntext\n") and text.endswith(f"{readme.END}\nafter\n")
    assert "[x ref **1.25**; faults **3/3**](results/x/a.jsonl)" in text
    assert "GPU, `abc1234`" in text and "old" not in text
    assert readme.main(["--check", *args]) == 0


@pytest.mark.parametrize("index, message", [
    ({"claim": "x"}, "must be a JSON list"),
    ([{k: v for k, v in ENTRY.items() if k != "commit"}], "entry 0: missing commit"),
    ([{**ENTRY, "figures": {}}], "unknown key(s) figures"),
    ([{**ENTRY, "figure": {}}], "figure must be a non-empty object"),
    ([{**ENTRY, "figure": {"ok": True}}], "figure.ok: must be a number or a string"),
    ([{**ENTRY, "file": "../elsewhere.jsonl"}], "file must be a path inside the repository"),
])
def test_bad_index_exits_2_naming_the_entry(tmp_path, capsys, index, message):
    args = _write(tmp_path, index, PAGE)
    assert readme.main(args) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "README.md").read_text() == PAGE


def test_readme_without_markers_exits_2(tmp_path, capsys):
    args = _write(tmp_path, [ENTRY], "# no markers\n")
    assert readme.main(args) == 2
    assert "figures:begin" in capsys.readouterr().err
