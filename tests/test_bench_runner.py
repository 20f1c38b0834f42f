"""Running executables in their own processes: rows, failures by kind, timeouts, provenance."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ftgen.bench import BenchOptions, failure_kind, gpu_slug, run_executable, write_jsonl
from ftgen.errors import NoGpuError


def fake(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return p


ROW = '{"kernel":"k","shape":{"m":1,"n":1,"k":1},"ms":{"median":1.0},"ok":true}'


def test_rows_are_parsed_and_noise_ignored(tmp_path):
    exe = fake(tmp_path, "k", f"echo 'hello'\necho '{ROW}'")
    rows = run_executable(exe, "k", [], 10)
    assert len(rows) == 1 and rows[0]["ok"] and failure_kind(rows[0]) is None


def test_crash_becomes_runtime_row(tmp_path):
    exe = fake(tmp_path, "k", "echo 'illegal address' >&2; kill -SEGV $$")
    rows = run_executable(exe, "k", [], 10)
    assert failure_kind(rows[-1]) == "runtime" and "signal" in rows[-1]["error"]["message"]


def test_verification_failure_kind(tmp_path):
    exe = fake(tmp_path, "k", "echo '{\"kernel\":\"k\",\"ok\":false}'; exit 1")
    rows = run_executable(exe, "k", [], 10)
    assert [failure_kind(r) for r in rows] == ["verification"]


def test_timeout_kind(tmp_path):
    exe = fake(tmp_path, "k", "sleep 5")
    rows = run_executable(exe, "k", [], 0.5)
    assert failure_kind(rows[-1]) == "timeout"


def test_missing_executable(tmp_path):
    rows = run_executable(tmp_path / "nope", "nope", [], 1)
    assert failure_kind(rows[0]) == "missing"


def test_no_gpu_exit_code_raises(tmp_path):
    exe = fake(tmp_path, "k", "echo 'no usable CUDA GPU' >&2; exit 4")
    with pytest.raises(NoGpuError):
        run_executable(exe, "k", [], 10)


def test_inject_flag_only_for_inject_builds():
    from ftgen import families

    fam = families.get("gemm")
    o = BenchOptions(shapes=[{"m": 2, "n": 3, "k": 4}], inject=5, reps=3)
    assert o.argv(fam, {"protection": {"inject": True}}) == ["--shapes", "2x3x4", "--reps", "3", "--inject", "5"]
    assert "--inject" not in o.argv(fam, {"protection": {"scheme": "none"}})


def test_results_file_has_provenance_first(tmp_path):
    from ftgen.report.provenance import provenance

    prov = provenance({"name": "NVIDIA H200", "sm_count": 132, "driver": "580"}, argv=["ftgen", "bench"])
    out = tmp_path / "r.jsonl"
    write_jsonl(out, prov, [json.loads(ROW)])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    p = lines[0]["provenance"]
    for key in ("ftgen_version", "git_sha", "git_dirty", "gpu", "sm_count", "driver", "nvcc", "argv", "utc"):
        assert key in p
    assert lines[1]["kernel"] == "k"


def test_launcher_names_the_commit(monkeypatch):
    # a GPU machine's copy may carry a stale .git: the commit the launcher names wins
    from ftgen.report.provenance import provenance

    monkeypatch.setenv("FTGEN_GIT_SHA", "abc1234")
    monkeypatch.setenv("FTGEN_GIT_DIRTY", "0")
    p = provenance(None, argv=["ftgen"])
    assert p["git_sha"] == "abc1234" and p["git_dirty"] is False
    monkeypatch.delenv("FTGEN_GIT_SHA")
    assert provenance(None, argv=["ftgen"])["git_sha"] != "abc1234"


def test_gpu_slug():
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert gpu_slug("NVIDIA H200") == "h200"


def test_table_shows_the_paired_ratio_only_when_rows_have_one():
    import io

    from ftgen.report.table import print_rows

    base = {"kernel": "k", "shape": {"m": 1, "n": 2, "k": 3}, "ms": {"median": 2.0}, "ok": True}
    buf = io.StringIO()
    print_rows([base], file=buf)
    assert "x unprot" not in buf.getvalue()
    buf = io.StringIO()
    print_rows([base, {**base, "protection": {"scheme": "tmr"}, "paired": {"x_unprotected": 3.0123}}], file=buf)
    assert "x unprot" in buf.getvalue() and "3.012" in buf.getvalue()


def test_table_says_a_row_run_without_its_reference_is_unverified():
    import io

    from ftgen.report.table import print_rows

    base = {"kernel": "k", "shape": {"m": 1, "n": 2, "k": 3}, "ms": {"median": 2.0}, "ok": True}
    buf = io.StringIO()
    print_rows([{**base, "verified": False}], file=buf)
    assert "unverified" in buf.getvalue() and "yes" not in buf.getvalue()
    buf = io.StringIO()
    print_rows([base], file=buf)
    assert "unverified" not in buf.getvalue() and "yes" in buf.getvalue()


def test_site_reaches_the_executables():
    from ftgen import families
    from ftgen.cli import _bench_options

    opts = _bench_options(None, families.get("kmeans"), None, None, 0, None, None, None, False, 60.0, "argmin")
    argv = opts.argv(families.get("kmeans"))
    assert argv[argv.index("--site") + 1] == "argmin"
    assert "--site" not in _bench_options(None, families.get("gemm"), None, None, 0, None, None, None, False, 60.0).argv(families.get("gemm"))


@pytest.mark.parametrize("ok", ["true", "false"])
def test_a_row_the_executable_skipped_is_not_run_and_never_a_pass(tmp_path, ok):
    """A skipped row (the executable did not run the shape, e.g. its workspace did not fit) verified nothing: whatever
    its ok, it is a not-run row as a shape outside the variant's range, and the table never shows it as passing."""
    from ftgen.bench import not_run
    from ftgen.families.base import OUT_OF_RANGE
    from ftgen.report.table import rows_table

    exe = fake(tmp_path, "k", f"echo '{{\"kernel\":\"k\",\"shape\":{{\"m\":1,\"n\":1,\"k\":1}},\"skipped\":\"no memory\",\"ok\":{ok}}}'")
    (row,) = run_executable(exe, "k", [], 10)
    assert row["ok"] is False and failure_kind(row) == OUT_OF_RANGE and not_run(row)
    assert row["error"] == {"kind": OUT_OF_RANGE, "message": "skipped by the executable: no memory"}
    raw = {"kernel": "k", "skipped": "no memory", "ok": ok == "true"}  # as a results file may hold it
    assert failure_kind(raw) == OUT_OF_RANGE and not_run(raw)
    assert rows_table([row, raw, dict(raw, verified=False)]).columns[-1]._cells == ["[yellow]not run[/]"] * 3


def test_requested_shapes_without_a_row_get_failing_rows():
    from ftgen import families
    from ftgen.bench import NO_ROW, with_missing_shapes

    fam = families.get("gemm")
    a, b = {"m": 1, "n": 2, "k": 3}, {"m": 4, "n": 5, "k": 6}
    assert with_missing_shapes(fam, "k", [a, b], []) == [
        {"kernel": "k", "shape": s, "ok": False, "error": {"kind": "runtime", "message": NO_ROW}} for s in (a, b)]
    got = [{"kernel": "k", "shape": dict(b), "ok": True}]
    assert with_missing_shapes(fam, "k", [a, b], got) == got + [{"kernel": "k", "shape": a, "ok": False,
                                                                "error": {"kind": "runtime", "message": NO_ROW}}]
    # a failing row without a shape (a crash, a timeout) stands for the shapes the run did not reach
    crash = [{"kernel": "k", "ok": False, "error": {"kind": "timeout", "message": "no result"}}]
    assert with_missing_shapes(fam, "k", [a, b], crash) == crash


def test_requested_shapes_are_the_flags_or_the_executables_defaults():
    from ftgen import families
    from ftgen.spec import load_spec_text

    s = load_spec_text("name: t\nfamily: fft\nprecision: fp32\nparams: {logn: 12}\n"
                       "shapes: [{n: 4096, batch: 8}, {n: 8192, batch: 8}]\n", "t.yaml")
    fam = families.get("fft")
    v = s.variants[0].to_dict()
    # the executable's own defaults: the spec's shapes of its size
    assert BenchOptions().requested(fam, v, s.shapes) == fam.bench_shapes(s.variants[0], s.shapes)
    given = [{"n": 4096, "batch": 2}]
    assert BenchOptions(shapes=given).requested(fam, v, s.shapes) == given
