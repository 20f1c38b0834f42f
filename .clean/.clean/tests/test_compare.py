"""`ftgen compare A B`: rows matched by identity, a noise-aware verdict, ratios, ok changes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ftgen.cli import main
from ftgen.compare import FASTER, SAME, SLOWER, UNKNOWN, compare_files, verdict


def row(kernel, shape, med, lo=None, hi=None, ref=None, ok=True, **extra):
    r = {"kernel": kernel, "shape": shape, "ok": ok, **extra}
    if med is not None:
        r["ms"] = {"median": med, **({"min": lo} if lo is not None else {}), **({"max": hi} if hi is not None else {})}
    if ref is not None:
        r["ref"] = {"lib": "vendor", "ms": ref}
    return r


def results(path: Path, rows, provenance=True) -> Path:
    lines = ([json.dumps({"provenance": {"gpu": "x"}})] if provenance else []) + [json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


S1, S2 = {"m": 64, "n": 64, "k": 64}, {"m": 128, "n": 128, "k": 128}


def test_verdict_follows_the_noise():
    assert verdict(1.0, 0.02, 1.01, 0.01, None)[2] == SAME  # 1% change within 2% noise
    assert verdict(1.0, 0.002, 1.05, 0.002, None)[2] == SLOWER
    assert verdict(1.0, 0.002, 0.95, 0.002, None)[2] == FASTER
    assert verdict(1.0, None, 1.05, None, None)[2] == UNKNOWN  # no spread and no floor: cannot tell
    assert verdict(1.0, None, 1.05, None, 10.0 / 100)[2] == SAME  # within a 10% floor
    assert verdict(1.0, 0.001, 1.02, 0.001, 0.01)[1] == pytest.approx(0.01)


def test_compare_files_matches_rows_and_summarises(tmp_path):
    a = results(tmp_path / "a.jsonl", [
        row("k1", S1, 1.00, 0.99, 1.01, ref=1.2),
        row("k1", S2, 2.00, 1.99, 2.01, ref=2.0),
        row("k2", S1, 1.00, 0.999, 1.001, ref=1.0),
        row("k3", S1, 1.00, 0.99, 1.01),
        row("gone", S1, 1.0, 0.9, 1.1),
    ])
    b = results(tmp_path / "b.jsonl", [
        row("k1", S2, 1.80, 1.79, 1.81, ref=2.0),  # order does not matter
        row("k1", S1, 1.005, 0.99, 1.02, ref=1.2),
        row("k2", S1, 1.10, 1.099, 1.101, ref=1.0),
        row("k3", S1, None, ok=False, error={"kind": "verification"}),
        row("new", S1, 1.0, 0.9, 1.1),
    ])
    c = compare_files(a, b)
    by = {p.key: p for p in c.pairs}
    assert by["k1 64x64x64"].verdict == SAME
    assert by["k1 128x128x128"].verdict == FASTER
    assert by["k2 64x64x64"].verdict == SLOWER
    assert by["k3 64x64x64"].ok_change == "ok->FAILED" and by["k3 64x64x64"].verdict is None
    assert by["k2 64x64x64"].a_ref_ratio == pytest.approx(1.0) and by["k2 64x64x64"].b_ref_ratio == pytest.approx(1 / 1.1)
    s = c.summary()
    assert s["matched"] == 4 and s["only_a"] == 1 and s["only_b"] == 1
    assert s["verdicts"] == {SAME: 1, FASTER: 1, SLOWER: 1, UNKNOWN: 0}
    want = math.exp((math.log(1 / 1.005) + math.log(2 / 1.8) + math.log(1 / 1.1)) / 3)
    assert s["geomean_speedup"] == pytest.approx(want)
    assert sorted(c.regressions()) == ["k2 64x64x64", "k3 64x64x64"]


def test_identity_fields_keep_rows_apart(tmp_path):
    a = results(tmp_path / "a.jsonl", [row("k", S1, 1.0, 0.99, 1.01, dist="normal"), row("k", S1, 2.0, 1.99, 2.01, dist="uniform")])
    b = results(tmp_path / "b.jsonl", [row("k", S1, 2.0, 1.99, 2.01, dist="uniform"), row("k", S1, 1.0, 0.99, 1.01, dist="normal")],
                provenance=False)
    assert {p.verdict for p in compare_files(a, b).pairs} == {SAME}


def test_cli_compare_table_json_and_exit_codes(tmp_path, capsys):
    a = results(tmp_path / "a.jsonl", [row("k1", S1, 1.0, 0.999, 1.001), row("k2", S1, 1.0, 0.99, 1.01)])
    b = results(tmp_path / "b.jsonl", [row("k1", S1, 1.2, 1.199, 1.201), row("k2", S1, 1.0, 0.99, 1.01)])
    assert main(["compare", str(a), str(b)]) == 0  # a slowdown alone does not fail
    out = capsys.readouterr().out
    assert "SLOWER" in out and "SAME" in out and "geometric mean" in out
    assert main(["compare", str(a), str(b), "--fail-on-regression"]) == 1
    assert "k1" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--threshold", "25", "--fail-on-regression"]) == 0  # within a 25% floor
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["verdicts"]["SLOWER"] == 1 and {r["kernel"] for r in data["rows"]} == {"k1", "k2"}


def test_cli_compare_bad_files_exit_2(tmp_path, capsys):
    a = results(tmp_path / "a.jsonl", [row("k1", S1, 1.0, 0.9, 1.1)])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"provenance": {}}\n{not json\n')
    other = results(tmp_path / "o.jsonl", [row("zz", S1, 1.0, 0.9, 1.1)])
    for args, what in (([str(a), str(tmp_path / "none.jsonl")], "no such results file"), ([str(a), str(bad)], "bad.jsonl:2"),
                       ([str(a), str(other)], "no row in common"), ([str(a), str(a), "--threshold", "-1"], "threshold")):
        assert main(["compare", *args]) == 2
        cap = capsys.readouterr()
        assert what in cap.err and "Traceback" not in cap.err


def test_gzipped_results_files(tmp_path):
    import gzip

    a = results(tmp_path / "a.jsonl", [row("k1", S1, 1.0, 0.99, 1.01)])
    gz = tmp_path / "b.jsonl.gz"
    gz.write_bytes(gzip.compress(results(tmp_path / "b.jsonl", [row("k1", S1, 2.0, 1.99, 2.01)]).read_bytes()))
    c = compare_files(a, gz)
    assert [p.verdict for p in c.pairs] == [SLOWER]
