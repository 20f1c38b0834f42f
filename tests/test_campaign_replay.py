"""The recorded campaigns judged again: every results file under results/ that holds a campaign's summary line beside its
trial rows is re-summarized by today's rule (``python -m ftgen.faults``, no GPU), and must give the figures it recorded.
A file keeps either every trial, or every significant trial, or only the significant trials that were not corrected (the
misses beside a summary); for the first two the re-judged significant and corrected counts equal the recorded ones, for
the last the re-judged trials are all significant and uncorrected, as many as the recorded summary missed. A change to the
significance rule, the tolerance or the counters' reading that would change a figure of record fails here. Also the
command's own input checks (skipped when results/ is not in the tree)."""

from __future__ import annotations

import functools
import gzip
import json

import pytest

from conftest import REPO
from ftgen.faults import summarize
from ftgen.faults.__main__ import _rows as read_rows
from ftgen.faults.__main__ import main as rejudge

RESULTS = REPO / "results"


@functools.lru_cache(maxsize=None)
def _records(path):
    """{kernel: (recorded campaign summary, [trial rows])} of one results file, kernels with both only (read once, by
    the command's own reader)."""
    camps, trials = {}, {}
    for r in read_rows(path):
        if isinstance(r.get("campaign"), dict):
            camps[r["campaign"].get("kernel")] = r["campaign"]
        elif "trial" in r and "kernel" in r:
            trials.setdefault(r["kernel"], []).append(r)
    return {k: (camps[k], rows) for k, rows in trials.items() if k in camps}


def _campaign_files():
    if not RESULTS.is_dir():
        return []
    return [p for p in sorted(RESULTS.rglob("*.jsonl*")) if p.suffix in (".jsonl", ".gz") and _records(p)]


FILES = _campaign_files()


@pytest.mark.skipif(not FILES, reason="no results/ in this tree")
def test_there_are_recorded_campaigns_to_judge_again():
    judged = sum(len(_records(p)) for p in FILES)
    assert judged >= 70, judged  # (the families' campaigns of record: gemm, fft, kmeans, attention)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_recorded_campaign_judged_again_gives_its_figures(path):
    for kernel, (rec, rows) in _records(path).items():
        s = summarize(kernel, rows)
        got = (s["significant"], s["corrected"])
        want = (rec["significant"], rec["corrected"])
        misses = rec["significant"] - rec["corrected"]
        if got != want:  # a file of the misses alone
            assert got == (misses, 0) and len(rows) == misses, (kernel, "re-judged", got, "recorded", want, len(rows))
        if len(rows) == rec["clean_trials"] + rec["faulty_trials"]:  # every trial kept: the clean ones judged again too
            assert (s["false_alarms"], s["clean_trials"], s["faulty_trials"]) == (
                rec["false_alarms"], rec["clean_trials"], rec["faulty_trials"]), kernel


def test_the_command_judges_a_file_again(tmp_path, capsys):
    rows = [{"trial": i, "kernel": "k", "precision": "fp32", "dist": "normal", "injected": 1, "significant": True,
             "detected": 1, "ok": True, "score": 20.0, "max_rel_err": 1e-7, "fault": {"bit": 30}, "false_alarm": False}
            for i in range(3)]
    f = tmp_path / "c.jsonl.gz"
    with gzip.open(f, "wt") as out:
        out.write(json.dumps({"provenance": {"git_sha": "x"}}) + "\n")
        out.writelines(json.dumps(r) + "\n" for r in rows)
    assert rejudge([str(f)]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert line["campaign"]["kernel"] == "k" and line["campaign"]["significant"] == 3 and line["campaign"]["detected"] == 3


def test_the_command_refuses_what_it_cannot_judge(tmp_path, capsys):
    assert rejudge([]) == 2
    assert rejudge([str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "e.jsonl"
    empty.write_text(json.dumps({"provenance": {}}) + "\n")
    assert rejudge([str(empty)]) == 2
    assert "no trial rows" in capsys.readouterr().err
    assert rejudge(["--help"]) == 0
