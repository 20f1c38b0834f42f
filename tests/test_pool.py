"""The GPU pool on the CPU: fake GPUs (UUIDs that fake executables read from CUDA_VISIBLE_DEVICES),
fake executables that print JSON rows, crash, hang or say "no GPU" on one GPU. Every row lands once,
failed runs are re-queued elsewhere, a GPU that keeps failing leaves the pool, rows name their GPU."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import ftgen.faults as F
from ftgen.bench import run_executable
from ftgen.bench.pool import Gpu, GpuPool, PoolProgress, WorkItem, list_gpus, run_campaign, same_model, select_gpus
from ftgen.cli import main
from ftgen.errors import NoGpuError, SpecError
from ftgen.search.shard import batch_chunks, campaign_chunks, continues, shard_chunks

GPUS = [Gpu(i, f"GPU-fake-{i}", "NVIDIA H200", "580.1") for i in range(3)]

# a benchmark executable: one row per run naming the device it saw; misbehaves on the GPU named in BAD_GPU
FAKE = """#!{python}
import json, os, sys, time
dev = os.environ.get("CUDA_VISIBLE_DEVICES", "")
mode = {mode!r}
if dev == {bad!r}:
    if mode == "crash":
        os.kill(os.getpid(), 9)
    if mode == "hang":
        time.sleep(60)
    if mode == "nogpu":
        sys.exit(4)
kernel = os.path.basename(sys.argv[0])
print("noise line")
print(json.dumps({{"kernel": kernel, "ok": True, "dev": dev, "ms": {{"median": 1.0}}}}))
"""


def fake_exes(tmp_path: Path, n: int, mode: str = "", bad: str = "") -> list[WorkItem]:
    items = []
    for i in range(n):
        exe = tmp_path / "bin" / f"k{i}"
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text(FAKE.format(python=sys.executable, mode=mode, bad=bad))
        exe.chmod(0o755)
        items.append(WorkItem(f"k{i}", exe, f"k{i}", [], timeout=20.0 if mode != "hang" else 2.0))
    return items


def test_every_row_lands_once_and_names_its_gpu(tmp_path):
    items = fake_exes(tmp_path, 9)
    spool = tmp_path / "rows.jsonl"
    seen = []
    pool = GpuPool(GPUS, spool=spool)
    out = pool.run(items, on_done=lambda it, rows, g: seen.append((it.key, g.uuid)))
    assert list(out) == [f"k{i}" for i in range(9)]
    rows = [r for got in out.values() for r in got]
    assert len(rows) == 9 and all(r["ok"] for r in rows)
    for r in rows:  # the executable saw the GPU the row names
        assert r["dev"] == r["gpu_uuid"] and r["gpu"] == "NVIDIA H200"
    assert sorted(k for k, _ in seen) == sorted(out)
    assert sum(pool.done_by.values()) == 9
    lines = [json.loads(x) for x in spool.read_text().splitlines()]
    assert sorted(x["kernel"] for x in lines) == sorted(out)


@pytest.mark.parametrize("mode", ["crash", "hang", "nogpu"])
def test_a_failing_gpu_is_reported_and_its_work_requeued(tmp_path, mode):
    items = fake_exes(tmp_path, 8, mode, bad=GPUS[1].uuid)
    logs = []
    # one run that failed on gpu1 and then ran elsewhere is enough to send gpu1 out of the pool
    pool = GpuPool(GPUS, log=logs.append, gpu_fail_limit=1)
    out = pool.run(items)
    rows = [r for got in out.values() for r in got]
    assert len(rows) == 8 and all(r["ok"] for r in rows), rows
    assert {r["gpu_uuid"] for r in rows} == {GPUS[0].uuid, GPUS[2].uuid} and pool.done_by["gpu1"] == 0
    assert pool.retried >= 1 and any("re-queued" in x for x in logs)
    assert list(pool.dead) == ["gpu1"] and any(x.startswith("gpu1 (GPU-fake-1) leaves the pool") for x in logs)
    again = pool.run(fake_exes(tmp_path, 4))  # the next batch of a search: gpu1 stays out
    assert all(r["gpu_uuid"] != GPUS[1].uuid for got in again.values() for r in got)


def test_killing_an_executable_mid_run_loses_no_row(tmp_path):
    """The first run of k0 waits to be killed from outside; the pool re-runs it and every row arrives once."""
    marker = tmp_path / "pid"
    exe = tmp_path / "victim" / "k0"
    exe.parent.mkdir(parents=True)
    exe.write_text(f"""#!{sys.executable}
import json, os, time
m = {str(marker)!r}
if not os.path.exists(m):
    print(json.dumps({{"kernel": "k0", "ok": True, "partial": True}}), flush=True)
    open(m + ".tmp", "w").write(str(os.getpid())); os.replace(m + ".tmp", m)
    time.sleep(60)
print(json.dumps({{"kernel": "k0", "ok": True, "dev": os.environ.get("CUDA_VISIBLE_DEVICES")}}))
""")
    exe.chmod(0o755)
    items = [WorkItem("k0", exe, "k0", [], 30.0)] + fake_exes(tmp_path, 4)[1:]

    def killer():
        for _ in range(300):
            if marker.is_file():
                os.kill(int(marker.read_text()), signal.SIGKILL)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    out = GpuPool(GPUS[:2]).run(items)
    t.join()
    assert [len(v) for v in out.values()] == [1, 1, 1, 1]
    assert not any(r.get("partial") for got in out.values() for r in got)  # the killed attempt's rows are dropped
    assert items[0].attempts == 2
    # ... and the row that counts says an attempt failed before it: on which GPU, and how
    (row,) = out["k0"]
    (first,) = row["retried"]
    assert first["gpu"] in ("gpu0", "gpu1") and first["gpu_uuid"] in (GPUS[0].uuid, GPUS[1].uuid)
    assert first["error"].startswith("runtime: signal 9")
    assert not any("retried" in r for k in ("k1", "k2", "k3") for r in out[k])


def test_a_variant_that_crashes_everywhere_is_its_own_failure(tmp_path):
    exe = tmp_path / "bad"
    exe.write_text("#!/bin/sh\necho 'illegal address' >&2\nkill -9 $$\n")
    exe.chmod(0o755)
    items = [WorkItem("bad", exe, "bad", [], 10.0)] + fake_exes(tmp_path, 3)
    pool = GpuPool(GPUS[:2])
    out = pool.run(items)
    assert len(out["bad"]) == 1 and out["bad"][0]["error"]["kind"] == "runtime" and "signal 9" in out["bad"][0]["error"]["message"]
    assert items[0].attempts == 2 and set(items[0].failed_on) == {"gpu0", "gpu1"}  # tried on both GPUs
    # the failure kept is the last attempt's; the one before it is named in the row
    assert [f["gpu"] for f in out["bad"][0]["retried"]] == items[0].failed_on[:1]
    assert not pool.dead and all(out[f"k{i}"][0]["ok"] for i in range(1, 3))


def test_single_gpu_retries_once_in_place(tmp_path):
    exe = tmp_path / "bad"
    exe.write_text("#!/bin/sh\nexit 139\n")
    exe.chmod(0o755)
    item = WorkItem("bad", exe, "bad", [], 10.0)
    out = GpuPool([Gpu(None, None, "NVIDIA H200")]).run([item])
    assert item.attempts == 2 and out["bad"][0]["error"]["kind"] == "runtime"
    assert "gpu_uuid" not in out["bad"][0] and out["bad"][0]["gpu"] == "NVIDIA H200"


def test_when_every_gpu_fails_the_run_says_so(tmp_path):
    exe = tmp_path / "k"
    exe.write_text("#!/bin/sh\nexit 4\n")
    exe.chmod(0o755)
    with pytest.raises(NoGpuError, match="every GPU left the pool"):
        GpuPool(GPUS[:2]).run([WorkItem("k", exe, "k", [], 10.0)])


def test_an_error_in_the_callback_stops_the_pool_and_is_raised(tmp_path):
    items = fake_exes(tmp_path, 6)

    def on_done(item, rows, gpu):
        if item.key == "k2":
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        GpuPool(GPUS[:2]).run(items, on_done=on_done)


def test_gpus_option_parsing(monkeypatch, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, GPU-aaa, NVIDIA H200, 580.1'\necho '1, GPU-bbb, NVIDIA H200, 580.1'\n"
                   "echo '2, GPU-ccc, NVIDIA H100 80GB HBM3, 580.1'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus = list_gpus()
    assert [(g.index, g.uuid, g.name) for g in gpus] == [(0, "GPU-aaa", "NVIDIA H200"), (1, "GPU-bbb", "NVIDIA H200"),
                                                          (2, "GPU-ccc", "NVIDIA H100 80GB HBM3")]
    assert select_gpus("all") == gpus
    assert [g.index for g in select_gpus("0,2")] == [0, 2]
    assert [g.index for g in select_gpus("GPU-bbb")] == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-ccc,1")  # a scheduler's share: what 'all' means
    assert [g.index for g in select_gpus("all")] == [2, 1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-123")
    with pytest.raises(SpecError, match="CUDA_VISIBLE_DEVICES"):
        select_gpus("all")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    for bad in ("7", "0,0", "x", ","):
        with pytest.raises(SpecError, match="--gpus"):
            select_gpus(bad)
    with pytest.raises(SpecError, match="differ"):
        same_model(select_gpus("1,2"), "a search")
    spec = tmp_path / "s.yaml"
    spec.write_text(CAMPAIGN_SPEC)
    assert main(["search", str(spec), "--gpus", "9", "-o", str(tmp_path / "g")]) == 2
    assert main(["search", str(spec), "--gpus", "0,2", "-o", str(tmp_path / "g")]) == 2


def test_progress_lines_name_each_gpu(tmp_path, capsys):
    items = fake_exes(tmp_path, 4)
    prog = PoolProgress("ran", GPUS[:2], min_interval=0, tty=False)
    with prog:
        GpuPool(GPUS[:2], progress=prog).run(items)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("[1/4] ran ") and "ETA" in lines[0] and "gpu0" in lines[0] and "gpu1" in lines[0]
    assert lines[-1].startswith("[4/4]") and "ETA" not in lines[-1]


# --------------------------------------------------------------------------------------------
# campaigns on a pool

TRIAL_EXE = """#!{python}
import json, sys
a = sys.argv[1:]
arg = lambda f: a[a.index(f) + 1]
if "--runs" in a:  # DIST:INJECT:SEED:TRIALS,...: rows numbered by run
    runs = [(d, int(i), int(s), int(n)) for d, i, s, n in (r.split(":") for r in arg("--runs").split(","))]
else:
    runs = [(arg("--dist"), int(arg("--inject")), int(arg("--seed")), int(arg("--trials")))]
k = __import__("os").path.basename(sys.argv[0])
for run, (dist, inject, seed, n) in enumerate(runs):
    for t in range(n):  # trial t draws from seed + t, as the driver's run_trials does
        x = ((seed + t) * 6364136223846793005 + 1442695040888963407) % 2**32 >> 8
        print(json.dumps({{"trial": t, **({{"run": run}} if "--runs" in a else {{}}), "kernel": k, "dist": dist, "injected": inject,
                          "significant": bool(inject and x % 3), "detected": int(inject and x % 3 > 0 and x % 7 != 0),
                          "ok": not (inject and x % 7 == 0), "score": x / 2**30, "fault": {{"bit": x % 32}}, "max_rel_err": 1e-7,
                          **({{"site_arg": arg("--site")}} if "--site" in a else {{}})}}))
"""


def test_campaign_chunks_follow_the_sequential_seeds(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(F, "run_executable", lambda exe, k, argv, timeout, meta=None: calls.append((k, argv, timeout)) or [])
    F.campaign(tmp_path, [{"kernel": "a"}, {"kernel": "b"}], shape="64x64x64", trials=10, dists=("normal", "uniform"), seed=5,
               chunk=4, timeout=7)
    chunks = campaign_chunks(["a", "b"], trials=10, dists=("normal", "uniform"), seed=5, chunk=4)
    # one executable run a variant: its four runs, each its three chunks' trials from the first chunk's seed
    assert len(chunks) == 24 and [(b.kernel, b.argv("64x64x64"), 7.0) for b in batch_chunks(chunks, 1)] == calls
    runs = ",".join(f"{d}:{i}:{chunks[3 * (2 * n + i)].seed}:10" for n, d in enumerate(("normal", "uniform")) for i in (0, 1))
    assert calls[0][:2] == ("a", ["--runs", runs, "--shapes", "64x64x64", "--no-timing"])
    parts = [shard_chunks(chunks, i, 3) for i in range(3)]
    assert sorted(c.key for p in parts for c in p) == sorted(c.key for c in chunks) and max(map(len, parts)) - min(map(len, parts)) <= 1


def trials_of(chunks) -> dict:
    """(kernel, dist, inject, trial) -> seed, over every trial of the chunks."""
    return {(c.kernel, c.dist, c.inject, c.start + t): c.seed + t for c in chunks for t in range(c.trials)}


def test_batches_keep_every_trial_and_seed_and_leave_each_gpu_two_runs():
    chunks = campaign_chunks(["a", "b"], trials=1000, dists=("normal", "uniform", "loguniform"), seed=9)
    assert len(chunks) == 2 * 3 * 2 * 4
    for workers, runs in ((1, 2), (2, 4), (4, 8), (8, 16), (16, 48), (100, 48)):
        got = batch_chunks(chunks, workers)
        assert len(got) == runs and trials_of(c for b in got for c in b.parts) == trials_of(chunks), workers
        assert len(got) >= min(len(chunks), 2 * workers) and len({b.key for b in got}) == len(got)
        assert all(len({c.kernel for c in b.parts}) == 1 for b in got)
        assert max(b.trials for b in got) - min(b.trials for b in got) <= 250  # a variant's chunks cut evenly
        for b in got:  # within a run, a chunk that continues the one before is merged into it
            assert not any(continues(x, y) for x, y in zip(b.parts, b.parts[1:]))
    assert [len(b.parts) for b in batch_chunks(chunks, 1)] == [6, 6]  # a variant's 6 runs in one process
    # chunks that do not continue one another stay apart: a shard's block, a run's chunks in another order
    block = shard_chunks(chunks, 1, 3)
    assert trials_of(c for b in batch_chunks(block, 1) for c in b.parts) == trials_of(block)
    assert [c for b in batch_chunks(chunks[::-1], 1) for c in b.parts] == chunks[::-1]
    assert batch_chunks([], 4) == []


def test_a_batch_has_the_timeout_of_its_trials_and_splits_its_rows(tmp_path):
    exe = tmp_path / "bin" / "k"
    exe.parent.mkdir()
    exe.write_text(TRIAL_EXE.format(python=sys.executable))
    exe.chmod(0o755)
    seen = []

    def runner(exe, k, argv, timeout, env=None):
        seen.append((argv, timeout))
        return run_executable(exe, k, argv, timeout, env=env)

    batches = batch_chunks(campaign_chunks(["k"], trials=600, dists=("normal", "uniform"), seed=1), 1)
    rows, summ = run_campaign(tmp_path, batches, GpuPool(GPUS[:1], runner=runner), shape="8x8x8", timeout=10)
    assert len(seen) == 1 and seen[0][1] == 100.0 and seen[0][0][0] == "--runs"  # 10 s per 250 of 2400 trials
    seq, seq_summ = F.campaign(tmp_path, [{"kernel": "k"}], shape="8x8x8", trials=600, dists=("normal", "uniform"), seed=1)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("gpu", "gpu_uuid")} for r in rs]
    assert strip(rows) == seq and summ == seq_summ and len(rows) == 4 * 600 and all("run" not in r for r in rows)


def test_campaign_on_gpus_gives_the_same_trials_as_one_run(tmp_path):
    exe = tmp_path / "bin" / "k"
    exe.parent.mkdir()
    exe.write_text(TRIAL_EXE.format(python=sys.executable))
    exe.chmod(0o755)
    kw = dict(shape="64x64x64", trials=9, dists=("normal", "uniform"), seed=3, chunk=4)
    seq_rows, seq_summ = F.campaign(tmp_path, [{"kernel": "k"}], **kw)
    chunks = campaign_chunks(["k"], trials=9, dists=kw["dists"], seed=3, chunk=4)
    rows, summ = run_campaign(tmp_path, batch_chunks(chunks, len(GPUS)), GpuPool(GPUS), shape=kw["shape"])
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("gpu", "gpu_uuid")} for r in rs]
    assert strip(rows) == seq_rows and summ == seq_summ and len(rows) == 2 * 2 * 9
    # shards: each its part of the trials, together all of them
    parts = [run_campaign(tmp_path, batch_chunks(shard_chunks(chunks, i, 2), 1), GpuPool(GPUS[:1]), shape=kw["shape"])[0]
             for i in range(2)]
    key = lambda r: (r["dist"], r["injected"], r["trial"])
    assert sorted(map(key, strip(parts[0] + parts[1]))) == sorted(map(key, seq_rows))
    assert sorted(strip(parts[0] + parts[1]), key=key) == sorted(seq_rows, key=key)


def test_run_executable_passes_the_environment(tmp_path):
    items = fake_exes(tmp_path, 1)
    rows = run_executable(items[0].exe, "k0", [], 20, env={**os.environ, "CUDA_VISIBLE_DEVICES": "GPU-x"})
    assert rows[0]["dev"] == "GPU-x"


CAMPAIGN_SPEC = """
name: camp
family: gemm
arch: [sm_90]
variants:
  - {precision: fp32, protection: {scheme: abft, level: threadblock, interval: 16, inject: true},
     params: {m_tb: [64, 128], n_tb: 128, k_tb: 16, m_w: 32, n_w: 32, m_t: 4, n_t: 8, stages: 2}}
"""


@pytest.fixture
def fake_host(monkeypatch, tmp_path):
    """Three fake GPUs, a build that writes trial executables, GPU 0's info without a GPU."""
    import ftgen.bench
    import ftgen.bench.pool as P
    import ftgen.build
    from ftgen.build import BuildResult, load_manifest

    def build(project, *, kernels=None, **kw):
        r = BuildResult()
        for v in load_manifest(project)["variants"]:
            exe = Path(project) / "bin" / v["kernel"]
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.write_text(TRIAL_EXE.format(python=sys.executable))
            exe.chmod(0o755)
            r.built.append(v["kernel"])
        return r

    monkeypatch.setattr(P, "list_gpus", lambda: list(GPUS))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(ftgen.build, "build", build)
    monkeypatch.setattr(ftgen.bench, "gpu_info", lambda probe=None: {"name": "NVIDIA H200", "driver": "580.1"})
    spec = tmp_path / "camp.yaml"
    spec.write_text(CAMPAIGN_SPEC)
    return spec


# the same trials, each detection reported neither corrected, recomputed nor uncorrectable
BAD_COUNTS_EXE = TRIAL_EXE.replace('"fault": {{"bit": x % 32}}', '"fault": {{"bit": x % 32}}, "corrected": 0, "recomputed": 0, "uncorrectable": 0')


def test_a_campaign_whose_counters_break_the_rules_fails(fake_host, tmp_path, monkeypatch, capsys):
    """Detections that end neither corrected, recomputed nor uncorrectable are a counting error: the campaign writes its
    rows and summaries, flags the trials, and exits non-zero naming the kernel."""
    from ftgen.search.shard import read_results

    assert BAD_COUNTS_EXE != TRIAL_EXE
    monkeypatch.setattr(sys.modules[__name__], "TRIAL_EXE", BAD_COUNTS_EXE)
    out = tmp_path / "bad.jsonl"
    assert main(["campaign", str(fake_host), "--trials", "20", "--dists", "normal", "-o", str(tmp_path / "g"), "--json", str(out)]) == 1
    assert "counters broke the rules" in capsys.readouterr().err
    summ = [e["campaign"] for e in read_results(out).extra if "campaign" in e]
    assert summ and all(s["counter_violations"] > 0 and s["corrected"] == 0 for s in summ)


# the same trials, the first clean trial of each run wrong (error 5.0) and failed by the executable
WRONG_CLEAN_EXE = TRIAL_EXE.replace('"ok": not (inject and x % 7 == 0)', '"ok": not (inject and x % 7 == 0) and (inject or t > 0)').replace(
    '"max_rel_err": 1e-7', '"max_rel_err": 1e-7 if inject or t > 0 else 5.0')


def test_a_campaign_with_a_clean_trial_that_fails_verification_fails(fake_host, tmp_path, monkeypatch, capsys):
    """A clean trial marked not ok makes the campaign exit 1 after writing its results; its error is no scale for
    coverage_at, and the table shows the not-ok trials."""
    from ftgen.search.shard import read_results

    assert WRONG_CLEAN_EXE.count("t > 0") == 2
    assert main(["campaign", str(fake_host), "--trials", "20", "--dists", "normal", "-o", str(tmp_path / "g")]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys.modules[__name__], "TRIAL_EXE", WRONG_CLEAN_EXE)
    out = tmp_path / "bad.jsonl"
    assert main(["campaign", str(fake_host), "--trials", "20", "--dists", "normal", "-o", str(tmp_path / "g"), "--json", str(out)]) == 1
    cap = capsys.readouterr()
    assert "trial(s) failed verification (2 clean" in cap.err and "trial 0 (clean, max_rel_err 5.0)" in cap.err
    assert "not ok" in cap.out and "(1 failed)" in cap.out
    summ = [e["campaign"] for e in read_results(out).extra if "campaign" in e]
    assert len(summ) == 2 and all(s["failed_trials"] == 1 and s["significance"]["max_clean_err"] == 1e-7 for s in summ)


def _trials(path):
    from ftgen.search.shard import read_results

    rows = [r for r in read_results(path).rows if "trial" in r]
    return sorted(({k: v for k, v in r.items() if k not in ("gpu", "gpu_uuid")} for r in rows),
                  key=lambda r: (r["kernel"], r["dist"], r["injected"], r["trial"]))


def test_campaign_command_on_gpus_and_in_shards(fake_host, tmp_path, capsys):
    """`campaign --gpus 0,1,2` and two `--shard` jobs give the trial rows of a plain campaign, same seed."""
    base = ["campaign", str(fake_host), "--trials", "300", "--dists", "normal,uniform", "--seed", "7", "-o", str(tmp_path / "g")]
    assert main(base + ["--json", str(tmp_path / "one.jsonl")]) == 0
    assert main(base + ["--gpus", "0,1,2", "--json", str(tmp_path / "three.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "campaign: 3 GPU(s): gpu0 (NVIDIA H200, GPU-fake-0)" in err and "] ran " in err
    one, three = _trials(tmp_path / "one.jsonl"), _trials(tmp_path / "three.jsonl")
    assert len(one) == 2 * 2 * 2 * 300 and three == one
    from ftgen.search.shard import read_results

    r3 = read_results(tmp_path / "three.jsonl")
    assert {r["gpu_uuid"] for r in r3.rows} == {g.uuid for g in GPUS}  # 2 x 8 chunks in 8 runs dealt over 3 GPUs
    assert [g["uuid"] for g in r3.provenance["gpus"]] == [g.uuid for g in GPUS]
    summ = lambda rf: [e["campaign"] for e in rf.extra if "campaign" in e]
    assert summ(r3) == summ(read_results(tmp_path / "one.jsonl"))
    for i in range(2):
        assert main(base + ["--shard", f"{i}/2", "--json", str(tmp_path / f"s{i}.jsonl")]) == 0
    parts = _trials(tmp_path / "s0.jsonl") + _trials(tmp_path / "s1.jsonl")
    assert 0 < len(_trials(tmp_path / "s0.jsonl")) < len(one)
    assert sorted(parts, key=lambda r: (r["kernel"], r["dist"], r["injected"], r["trial"])) == one
    assert read_results(tmp_path / "s1.jsonl").provenance["shard"] == "1/2"
    # the shards merged: the single run's trials, in its order, and its summaries
    shards = [str(tmp_path / f"s{i}.jsonl") for i in (1, 0)]
    assert main(["campaign", str(fake_host), "--from", *shards, "--json", str(tmp_path / "m.jsonl")]) == 0
    m, single = read_results(tmp_path / "m.jsonl"), read_results(tmp_path / "one.jsonl")
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("gpu", "gpu_uuid")} for r in rs]
    assert strip(m.rows) == single.rows and m.extra == single.extra and m.provenance["merged_from"] == shards
    # the merged provenance is the shards' campaign and machine, not the merging host's defaults
    s0 = read_results(tmp_path / "s0.jsonl").provenance
    assert m.provenance["seed"] == 7 and m.provenance["shards_git_sha"] == [s0["git_sha"]]
    assert all(m.provenance[k] == s0[k] for k in ("gpu", "driver", "sm_count", "compute_capability", "cuda_runtime_api"))
    assert main(["campaign", str(fake_host), "--from", shards[0]]) == 0
    assert "shard(s) 0/2 missing" in capsys.readouterr().err
    assert main(["campaign", str(fake_host), "--from", shards[0], str(tmp_path / "one.jsonl")]) == 2
    assert "a whole run (no --shard)" in capsys.readouterr().err
    assert main(["campaign", str(fake_host), "--from", str(tmp_path / "one.jsonl"), str(tmp_path / "three.jsonl")]) == 0
    assert "trial(s) in more than one file" in capsys.readouterr().err
    search_file = tmp_path / "search.jsonl"
    search_file.write_text(json.dumps({"provenance": {"gpu": "NVIDIA H200", "strategy": "exhaustive"}}) + "\n")
    assert main(["campaign", str(fake_host), "--from", str(search_file)]) == 2
    assert "no campaign results file" in capsys.readouterr().err
    assert main(["campaign", str(fake_host), str(search_file)]) == 2 and "add --from" in capsys.readouterr().err


# a benchmark that prints one row per shape of --shapes, else of its defaults (the spec's: gemm's default shapes);
# `drop` names a shape it prints nothing for, as an executable that exits 0 with a shape left out
BENCH_EXE = """#!{python}
import json, os, sys
a = sys.argv[1:]
shapes = (a[a.index("--shapes") + 1] if "--shapes" in a else {defaults!r}).split(",")
kernel = os.path.basename(sys.argv[0])
for s in shapes:
    if s != {drop!r}:
        m, n, k = map(int, s.split("x"))
        print(json.dumps({{"kernel": kernel, "shape": {{"m": m, "n": n, "k": k}}, "ok": True, "ms": {{"median": 1.0}},
                          "dev": os.environ.get("CUDA_VISIBLE_DEVICES", "")}}))
"""


def _bench_project(spec, tmp_path, drop=""):
    """The fake host's spec generated and built, each executable a benchmark that prints one row per shape."""
    import ftgen.build
    from ftgen import families

    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    project = tmp_path / "g" / "camp"
    ftgen.build.build(project)
    fam = families.get("gemm")
    for exe in (project / "bin").iterdir():
        exe.write_text(BENCH_EXE.format(python=sys.executable, drop=drop,
                                        defaults=",".join(fam.format_shape(x) for x in fam.default_shapes)))
    return project


@pytest.mark.parametrize("gpus", [[], ["--gpus", "all"]], ids=["one", "pool"])
def test_a_shape_an_executable_printed_no_row_for_fails_the_bench(fake_host, tmp_path, capsys, gpus):
    """An executable that exits 0 and prints no row for a requested shape (here its second default shape, or the only
    shape of --shapes) verified nothing there: that shape gets a failing row and the bench exits 1."""
    from ftgen import families
    from ftgen.bench import NO_ROW
    from ftgen.search.shard import read_results

    fam = families.get("gemm")
    missing = fam.format_shape(fam.default_shapes[1])
    project = _bench_project(fake_host, tmp_path, drop=missing)
    capsys.readouterr()
    out = tmp_path / "b.jsonl"
    assert main(["bench", str(project), "--json", str(out)] + gpus) == 1
    rows = read_results(out).rows
    n = len(list((project / "bin").iterdir()))
    bad = [r for r in rows if not r["ok"]]
    assert len(rows) == 2 * n and len(bad) == n
    assert all(fam.format_shape(r["shape"]) == missing and r["error"] == {"kind": "runtime", "message": NO_ROW} for r in bad)
    assert "row(s) failed" in capsys.readouterr().err
    assert main(["bench", str(project), "--shapes", missing] + gpus) == 1
    assert main(["bench", str(project), "--shapes", fam.format_shape(fam.default_shapes[0])] + gpus) == 0


def test_bench_command_on_gpus(fake_host, tmp_path, capsys):
    from ftgen.search.shard import read_results

    project = _bench_project(fake_host, tmp_path)
    capsys.readouterr()
    assert main(["bench", str(project), "--gpus", "all", "--json", str(tmp_path / "b.jsonl")]) == 0
    rf = read_results(tmp_path / "b.jsonl")
    assert sorted(r["kernel"] for r in rf.rows) == sorted(2 * [p.name for p in (project / "bin").iterdir()])  # 2 shapes
    assert all(r["dev"] == r["gpu_uuid"] and r["gpu"] == "NVIDIA H200" for r in rf.rows)
    assert len(rf.provenance["gpus"]) == 3
    assert "ETA" in capsys.readouterr().err


def test_bench_writes_its_rows_as_each_variant_finishes(fake_host, tmp_path, monkeypatch, capsys):
    """A bench cut short (its time limit, a hung variant) leaves the rows of the variants that finished on disk."""
    import ftgen.bench as B
    from ftgen.search.shard import read_results

    project = _bench_project(fake_host, tmp_path)
    exes = sorted((project / "bin").iterdir())
    out, seen, real = tmp_path / "b.jsonl", [], B.bench_project

    def spy(project, variants, family, opts, on_rows=None, log=None):
        def hook(kernel, rows):
            on_rows(kernel, rows)
            got = read_results(out)
            seen.append((got.provenance.get("partial"), len(got.rows)))
        return real(project, variants, family, opts, hook, log)

    monkeypatch.setattr(B, "bench_project", spy)
    assert main(["bench", str(project), "--json", str(out)]) == 0
    n = len(exes)
    per = 2  # rows of a variant: one per default shape
    assert n >= 2 and seen[0] == (f"1 of {n} variants", per) and seen[-1] == (None, per * n)
    assert "partial" not in read_results(out).provenance


def test_campaign_site_on_gpus_in_shards_and_merged(fake_host, tmp_path, capsys):
    """`campaign --site` reaches every executable on a pool and in shards, the files name the site, and a merge
    refuses shards of different sites."""
    from ftgen.search.shard import read_results

    base = ["campaign", str(fake_host), "--trials", "40", "--dists", "normal", "--seed", "7", "-o", str(tmp_path / "g")]
    assert main(base + ["--site", "accumulator", "--gpus", "0,1,2", "--json", str(tmp_path / "pool.jsonl")]) == 0
    pool = read_results(tmp_path / "pool.jsonl")
    assert pool.provenance["site"] == "accumulator" and all(r["site_arg"] == "accumulator" for r in pool.rows if "trial" in r)
    for i in range(2):
        assert main(base + ["--site", "accumulator", "--shard", f"{i}/2", "--json", str(tmp_path / f"s{i}.jsonl")]) == 0
    assert main(base + ["--shard", "1/2", "--json", str(tmp_path / "plain1.jsonl")]) == 0
    capsys.readouterr()
    merged = tmp_path / "m.jsonl"
    assert main(["campaign", str(fake_host), "--from", str(tmp_path / "s0.jsonl"), str(tmp_path / "s1.jsonl"), "--json", str(merged)]) == 0
    m = read_results(merged)
    assert m.provenance["site"] == "accumulator" and _trials(merged) == _trials(tmp_path / "pool.jsonl")
    assert main(["campaign", str(fake_host), "--from", str(tmp_path / "s0.jsonl"), str(tmp_path / "plain1.jsonl")]) == 2
    assert "different campaigns (site" in capsys.readouterr().err
    assert main(["campaign", str(fake_host), "--site", "accumulator", "--from", str(tmp_path / "s0.jsonl")]) == 2
    assert "a merge takes the site" in capsys.readouterr().err
