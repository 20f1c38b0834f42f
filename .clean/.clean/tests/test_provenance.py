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
