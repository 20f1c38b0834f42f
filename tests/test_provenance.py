"""Provenance of results files: git state read from the tree, GPU state, library versions."""

from __future__ import annotations

from ftgen.report import provenance as P


def test_provenance_has_every_field():
    d = P.provenance(None, argv=["ftgen", "bench"])
    for key in ("ftgen_version", "git_sha", "git_dirty", "gpu", "gpu_state", "driver", "nvcc", "libraries", "argv", "utc"):
        assert key in d, key
    assert set(d["libraries"]) == {"cublas", "cufft", "cutlass"}
    assert d["argv"] == ["ftgen", "bench"]


def test_dirty_flag_is_read_from_the_tree():
    g = P.git_state()
    if g["sha"] is None:  # not a checkout
        return
    assert isinstance(g["dirty"], bool)


def test_launcher_named_commit(monkeypatch):
    monkeypatch.setenv("FTGEN_GIT_SHA", "abc1234")
    monkeypatch.setenv("FTGEN_GIT_DIRTY", "0")
    assert P.git_state() == {"sha": "abc1234", "dirty": False}
    monkeypatch.setenv("FTGEN_GIT_DIRTY", "1")
    assert P.git_state()["dirty"] is True


def test_cutlass_version_from_the_wheel():
    import importlib.metadata

    try:
        want = importlib.metadata.version("nvidia-cutlass")
    except importlib.metadata.PackageNotFoundError:
        want = None
    assert P.library_versions()["cutlass"] == want


def test_gpu_state_without_a_gpu(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert P.gpu_state() == {}


def test_host_facts_are_read_beside_the_caller(monkeypatch):
    """A command starts reading the host's facts (git, nvidia-smi, nvcc) on a thread, builds and probes meanwhile,
    and its provenance takes them: the GPU state is the one at its start, and no fact is read twice."""
    import threading
    import time

    started, release = threading.Event(), threading.Event()

    def slow_state():
        started.set()
        release.wait(5)
        return {"uuid": "GPU-x", "driver": "580.1", "sm_clock_mhz": 1980.0}

    monkeypatch.setattr(P, "gpu_state", slow_state)
    monkeypatch.setattr(P, "git_state", lambda: {"sha": "f" * 40, "dirty": False})
    t0 = time.monotonic()
    fut = P.host_facts_soon()
    assert time.monotonic() - t0 < 1.0 and started.wait(5) and not fut.done()  # running, the caller not held
    release.set()
    facts = fut.result(timeout=5)
    monkeypatch.setattr(P, "gpu_state", lambda: (_ for _ in ()).throw(AssertionError("read twice")))
    monkeypatch.setattr(P, "git_state", lambda: (_ for _ in ()).throw(AssertionError("read twice")))
    d = P.provenance({"name": "NVIDIA H200"}, argv=["ftgen"], facts=facts)
    assert d["gpu_state"]["uuid"] == "GPU-x" and d["git_sha"] == "f" * 40 and d["driver"] == "580.1"
    assert P.provenance(None, argv=["ftgen"], facts=facts)["gpu_state"] == {}  # no GPU ran: no GPU state


def test_run_time_overrides_of_the_executables_are_recorded(monkeypatch):
    """Every FTGEN_* variable a template reads with getenv is one RUNTIME_ENV names, and those set are in the
    provenance's `env` (a lambda override, say), so results made under an override can be told apart."""
    import re

    from conftest import REPO

    read = set()
    for f in (REPO / "templates").rglob("*"):
        if f.is_file():
            read |= set(re.findall(r'getenv\("(FTGEN_[A-Z0-9_]+)"\)', f.read_text(errors="replace")))
    assert "FTGEN_ABFT_LAMBDA" in read and read <= set(P.RUNTIME_ENV), read - set(P.RUNTIME_ENV)
    for k in P.RUNTIME_ENV:
        monkeypatch.delenv(k, raising=False)
    facts = {"git": {"sha": None, "dirty": None}, "gpu_state": {}, "nvcc": None, "libraries": {}}
    assert P.provenance(None, argv=["ftgen"], facts=facts)["env"] == {}
    monkeypatch.setenv("FTGEN_ABFT_LAMBDA", "0.5")
    monkeypatch.setenv("FTGEN_KMEANS_ITERS", "8")
    monkeypatch.setenv("FTGEN_UNRELATED", "x")
    assert P.provenance(None, argv=["ftgen"], facts=facts)["env"] == {"FTGEN_ABFT_LAMBDA": "0.5", "FTGEN_KMEANS_ITERS": "8"}
