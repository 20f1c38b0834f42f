"""The Ray launcher: shard commands and the merge's arguments always; a run on a local Ray cluster of
this machine's CPUs (recorded timings in place of GPUs) when ray imports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ftgen.errors import SpecError
from ftgen.launch.ray_launcher import _merge_args, shard_commands


def test_shard_commands():
    cmds = shard_commands(["search", "s.yaml", "--reps", "50"], 3, Path("out"), prefix=["py", "-m", "ftgen.cli"])
    assert [c for c, _ in cmds][1] == ["py", "-m", "ftgen.cli", "search", "s.yaml", "--reps", "50", "--shard", "1/3",
                                       "--json", str(Path("out") / "shard-1-of-3.jsonl")]
    for bad in (["bench", "x"], ["search", "s.yaml", "--shard", "0/2"], ["search", "s.yaml", "--json=x"], []):
        with pytest.raises(SpecError):
            shard_commands(bad, 2, Path("out"))


def test_merge_keeps_what_from_reads():
    args = ["s.yaml", "--reps", "50", "-o", "gen", "--shapes=64x64x64", "--no-cache", "--strategy", "random", "--max-points", "9"]
    assert _merge_args(args) == ["s.yaml", "-o", "gen", "--shapes=64x64x64", "--max-points", "9"]


def test_ray_tasks_run_the_shards(tmp_path):
    ray = pytest.importorskip("ray")
    from ftgen.launch.ray_launcher import launch
    from ftgen.search.shard import read_results

    # a stand-in for `python -m ftgen.cli search ... --shard I/N --json FILE`: writes the shard's results file
    fake = tmp_path / "fake.py"
    fake.write_text(
        "import json, sys\n"
        "a = sys.argv\n"
        "shard, path = a[a.index('--shard') + 1], a[a.index('--json') + 1]\n"
        "open(path, 'w').write(json.dumps({'provenance': {'gpu': 'NVIDIA H200', 'shard': shard}}) + '\\n')\n"
    )
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        files = launch(["search", "s.yaml"], 3, tmp_path / "out", num_gpus=0, prefix=[sys.executable, str(fake)])
    finally:
        ray.shutdown()
    assert [read_results(f).provenance["shard"] for f in files] == ["0/3", "1/3", "2/3"]


def test_ray_launcher_end_to_end(tmp_path):
    """`python -m ftgen.launch.ray_launcher --shards 2 -- search SPEC`: two Ray tasks run the shards (the
    recorded H200 timings stand in for the GPU), then the merge writes the unsharded search's winners."""
    ray = pytest.importorskip("ray")
    import yaml

    from ftgen.launch.ray_launcher import main
    from test_search import SPEC
    from test_shard import SHARD_JOB

    spec = tmp_path / "replay.yaml"
    spec.write_text(SPEC)
    job = tmp_path / "job.py"
    job.write_text(SHARD_JOB.format(tests=str(Path(__file__).parent)))
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        rc = main(["--shards", "2", "--out", str(tmp_path / "shards"), "--num-gpus", "0", "--ftgen", f"{sys.executable} {job}",
                   "--", "search", str(spec), "--reps", "10", "-o", str(tmp_path / "gen")])
    finally:
        ray.shutdown()
    assert rc == 0
    assert sorted(p.name for p in (tmp_path / "shards").glob("*.jsonl")) == ["shard-0-of-2.jsonl", "shard-1-of-2.jsonl"]
    best = yaml.safe_load((tmp_path / "gen" / "replay-search" / "replay_best.yaml").read_text())
    names = {v["params"]["k_tb"] for v in best["variants"]}
    assert len(best["variants"]) == 3 and names == {8, 32}  # the winners of tests/test_search.py's recorded search
