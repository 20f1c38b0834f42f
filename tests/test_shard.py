"""Sharding and merging on the CPU with the recorded H200 timings of tests/test_search.py: shards of a
search partition its points, and merged (`ftgen search SPEC --from ...`) give the unsharded winners.
A search on a pool of fake GPUs gives the same winners and caches each row under the GPU it ran on."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import yaml

import ftgen.search as S
from ftgen.bench import BenchOptions, write_jsonl
from ftgen.bench.pool import Gpu, GpuPool
from ftgen.cli import main
from ftgen.errors import SpecError
from ftgen.search.shard import merge_search, parse_shard, read_results, shard_points
from ftgen.spec import load_spec_text
from test_search import GPU, SPEC, Replay

SHAPES = ["4096x4096x4096", "1000x1234x777", "256x256x1024"]


@pytest.fixture
def replay(monkeypatch):
    r = Replay(fail_compile={"gemm_f32_none_32x128x8_w16x64_t4x8_s3"})
    monkeypatch.setattr(S, "build", r.build)
    monkeypatch.setattr(S, "run_executable", r.run)
    return r


def search(tmp_path, name, shard=None, pool=None):
    spec = load_spec_text(SPEC, "replay.yaml")
    return spec, S.search(spec, spec.shapes, out_root=tmp_path / name, budget=None, strategy=S.Exhaustive(), opts=BenchOptions(reps=10),
                          cache=S.ResultsCache(tmp_path / f"{name}-cache.jsonl"), gpu=GPU, shard=shard, pool=pool)


def winners(res):
    return {s: r["kernel"] for s, r in res.best.items()}


def test_parse_shard():
    assert parse_shard("0/4") == (0, 4) and parse_shard("3/4") == (3, 4)
    for bad in ("4/4", "-1/4", "1", "a/b", "0/0", "1/2/3"):
        with pytest.raises(SpecError, match="--shard"):
            parse_shard(bad)


def test_shards_partition_the_points():
    names = [f"v{i}" for i in range(7)]
    for n in (1, 2, 3, 5, 21, 30):
        parts = [shard_points(names, 3, i, n) for i in range(n)]
        points = [(k, s) for p in parts for k, ss in p.items() for s in ss]
        assert sorted(points) == sorted((k, s) for k in names for s in range(3))  # every point once
        sizes = [sum(map(len, p.values())) for p in parts]
        assert max(sizes) - min(sizes) <= 1
        assert all(sum(k in p for p in parts) <= 2 for k in names) or n > 7  # a variant in one or two shards


def test_two_shards_merged_give_the_unsharded_winners(tmp_path, replay):
    spec, whole = search(tmp_path, "whole")
    files = []
    for i in range(2):
        _, part = search(tmp_path, f"shard{i}", shard=(i, 2))
        p = tmp_path / f"shard{i}.jsonl"
        write_jsonl(p, {"gpu": GPU["name"], "driver": GPU["driver"], "shard": f"{i}/2", "shapes": spec.shapes}, part.rows)
        files.append(p)
        assert part.ran < whole.ran or part.compiled < whole.compiled  # each did part of the work
    # no point measured twice, none left out
    measured = lambda rows: sorted((r["kernel"], json.dumps(r["shape"], sort_keys=True)) for r in rows if r.get("kernel"))
    parts = [read_results(f).rows for f in files]
    assert measured(parts[0] + parts[1]) == measured(whole.rows)
    assert sum(r.get("kernel") is None for r in parts[0] + parts[1]) == sum(r.get("kernel") is None for r in whole.rows)
    merged = merge_search(files, spec.family)
    assert not merged.notes and merged.shapes == spec.shapes
    assert winners(type(whole)(best=S.best_per_shape(spec.family, merged.rows, SHAPES))) == winners(whole)

    # the same through the command line: nothing compiled or run, outputs written
    spec_path = tmp_path / "replay.yaml"
    spec_path.write_text(SPEC)
    builds, runs = len(replay.builds), len(replay.runs)
    out = tmp_path / "merged"
    assert main(["search", str(spec_path), "--from", *map(str, files), "-o", str(out), "--json", str(tmp_path / "m.jsonl")]) == 0
    assert (len(replay.builds), len(replay.runs)) == (builds, runs)
    best = yaml.safe_load((out / "replay-search" / "replay_best.yaml").read_text())
    assert len(best["variants"]) == len(set(winners(whole).values())) and best["shapes"] == spec.shapes
    assert "ftgen_replay_select" in (out / "replay-search" / "replay_dispatch.h").read_text()
    m = read_results(tmp_path / "m.jsonl")
    assert m.extra[-1]["best"] == winners(whole) and m.provenance["merged_from"] == list(map(str, files))


def test_merge_refuses_bad_input(tmp_path, capsys):
    spec_path = tmp_path / "replay.yaml"
    spec_path.write_text(SPEC)
    row = {"kernel": "gemm_f32_none_64x64x8_w32x64_t8x8_s3", "shape": {"m": 256, "n": 256, "k": 1024}, "ok": True, "ms": {"median": 1.0}}

    def results(name, prov, rows=(row,)):
        p = tmp_path / name
        write_jsonl(p, prov, list(rows))
        return str(p)

    a = results("a.jsonl", {"gpu": "NVIDIA H200", "shard": "0/2"})
    cases = [
        ([a], "give the results files"),  # --from and nothing after it is checked below
        ([a, results("b.jsonl", {"gpu": "NVIDIA H100 80GB HBM3", "shard": "1/2"})], "different GPUs"),
        ([a, results("c.jsonl", {"gpu": "NVIDIA H200", "shard": "0/2"})], "both shard 0/2"),
        ([a, results("d.jsonl", {"gpu": "NVIDIA H200", "shard": "1/3"})], "different partitions"),
        ([results("e.jsonl", {"gpu": "NVIDIA H200"}, [{**row, "kernel": "gemm_nope"}])], "no variants of"),
        ([str(tmp_path / "missing.jsonl")], "no such file"),
    ]
    (tmp_path / "f.jsonl").write_text('{"kernel": "k"}\n')
    cases.append(([str(tmp_path / "f.jsonl")], "not an ftgen results file"))
    for files, msg in cases[1:]:
        assert main(["search", str(spec_path), "--from", *files, "-o", str(tmp_path / "o")]) == 2, msg
        assert msg in capsys.readouterr().err
    assert main(["search", str(spec_path), "--from", "-o", str(tmp_path / "o")]) == 2
    assert "give the results files" in capsys.readouterr().err
    assert main(["search", str(spec_path), a]) == 2
    assert "add --from" in capsys.readouterr().err
    assert main(["search", str(spec_path), "--from", a, "--shard", "0/2"]) == 2
    assert main(["search", str(spec_path), "--shard", "2/2"]) == 2
    assert "0 <= I < N" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing half-written
    # a lone shard merges, with a note that the other is missing
    assert main(["search", str(spec_path), "--from", a, "-o", str(tmp_path / "o")]) == 1  # the other shapes have no winner
    err = capsys.readouterr().err
    assert "shard(s) 1/2 missing" in err and "no verified variant for shape(s)" in err


def test_search_on_a_pool_of_gpus(tmp_path, replay):
    """Two fake GPUs of one model: the same winners as one GPU, rows name the GPU they ran on, the cache is
    keyed by the GPU model so a repeated search on either GPU runs nothing."""
    _, one = search(tmp_path, "one")
    seen = set()
    # each GPU's first run waits for the other's first: both take work whatever the threads' scheduling (a loaded
    # machine once let one worker drain the queue alone)
    both_started = threading.Barrier(2, timeout=30)

    def runner(exe, kernel, argv, timeout, env=None):
        dev = env["CUDA_VISIBLE_DEVICES"]
        first = dev not in seen
        seen.add(dev)
        if first:
            both_started.wait()
        return replay.run(exe, kernel, argv, timeout)

    gpus = [Gpu(i, f"GPU-fake-{i}", GPU["name"], GPU["driver"]) for i in range(2)]
    _, two = search(tmp_path, "two", pool=GpuPool(gpus, runner=runner))
    assert winners(two) == winners(one) and two.ran == one.ran
    assert seen == {"GPU-fake-0", "GPU-fake-1"}
    ran = [r for r in two.rows if r.get("ms")]
    assert ran and all(r["gpu"] == GPU["name"] and r["gpu_uuid"] in seen for r in ran)
    runs = len(replay.runs)
    spec = load_spec_text(SPEC, "replay.yaml")
    again = S.search(spec, spec.shapes, out_root=tmp_path / "two", budget=None, strategy=S.Exhaustive(), opts=BenchOptions(reps=10),
                     cache=S.ResultsCache(tmp_path / "two-cache.jsonl"), gpu=GPU)
    assert len(replay.runs) == runs and again.ran == 0 and winners(again) == winners(one)


SHARD_JOB = """
import os, sys
sys.path[:0] = [{tests!r}, os.path.dirname({tests!r})]
import ftgen.bench, ftgen.search as S
from test_search import GPU, Replay
r = Replay(fail_compile={{"gemm_f32_none_32x128x8_w16x64_t4x8_s3"}})
S.build, S.run_executable = r.build, r.run
ftgen.bench.gpu_info = lambda probe=None: dict(GPU)
from ftgen.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_shards_as_separate_processes_through_the_command_line(tmp_path, replay):
    """`ftgen search --shard I/2 --json` in two processes at once with one output directory (the recorded
    timings stand in for the GPU), then `--from`: the winners of the unsharded search."""
    import subprocess
    import sys

    spec_path = tmp_path / "replay.yaml"
    spec_path.write_text(SPEC)
    job = tmp_path / "job.py"
    job.write_text(SHARD_JOB.format(tests=str(Path(__file__).parent)))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    procs = [subprocess.Popen([sys.executable, str(job), "search", str(spec_path), "--shard", f"{i}/2", "--reps", "10",
                               "-o", str(tmp_path / "gen"), "--json", str(tmp_path / f"s{i}.jsonl")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    files = [tmp_path / f"s{i}.jsonl" for i in range(2)]
    assert [read_results(f).provenance["shard"] for f in files] == ["0/2", "1/2"]
    # one output directory (a shared file system): each shard its own project, no winners
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == ["replay-search-shard0of2", "replay-search-shard1of2"]
    merged = tmp_path / "merged.jsonl"
    p = subprocess.run([sys.executable, str(job), "search", str(spec_path), "--from", *map(str, files), "-o", str(tmp_path / "m"),
                        "--json", str(merged)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    _, whole = search(tmp_path, "whole")
    assert read_results(merged).extra[-1]["best"] == winners(whole)
    best = yaml.safe_load((tmp_path / "m" / "replay-search" / "replay_best.yaml").read_text())
    assert len(best["variants"]) == len(set(winners(whole).values()))


def test_a_shard_without_gpu_builds_its_part_then_exits_4(tmp_path, monkeypatch, replay):
    import shutil

    import ftgen.build
    from ftgen.build import load_manifest

    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine: the search would run")
    def build_all(project, *, kernels=None, **kw):
        names = ",".join(v["kernel"] for v in load_manifest(project)["variants"])
        return replay.build(project, kernels=kernels or names)

    monkeypatch.setattr(ftgen.build, "build", build_all)
    spec_path = tmp_path / "replay.yaml"
    spec_path.write_text(SPEC)
    assert main(["search", str(spec_path), "--shard", "0/2", "-o", str(tmp_path / "gen")]) == 4
    project = tmp_path / "gen" / "replay-search-shard0of2"
    spec = load_spec_text(SPEC, "replay.yaml")
    mine = shard_points([v.name for v in spec.variants], len(spec.shapes), 0, 2)
    assert sorted(v["kernel"] for v in load_manifest(project)["variants"]) == sorted(mine) == sorted(replay.builds)


def test_a_gzipped_results_file_merges_as_the_plain_one(tmp_path):
    import gzip

    from ftgen.errors import SpecError
    from ftgen.search.shard import read_results

    text = json.dumps({"provenance": {"gpu": "NVIDIA H200"}}) + "\n" + json.dumps({"kernel": "k", "shape": {"m": 1}}) + "\n"
    (tmp_path / "a.jsonl").write_text(text)
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.write(text)
    assert read_results(tmp_path / "a.jsonl.gz").rows == read_results(tmp_path / "a.jsonl").rows == [{"kernel": "k", "shape": {"m": 1}}]
    (tmp_path / "b.jsonl.gz").write_text(text)
    with pytest.raises(SpecError, match="not a gzipped file"):
        read_results(tmp_path / "b.jsonl.gz")
