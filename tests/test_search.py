"""Search without a GPU: recorded H200 timings are replayed in place of runs (Kernel Tuner style).
Checks the strategy loop, failure kinds, the results cache (a repeated search compiles and runs
nothing), the winners spec and the dispatch header (which must compile)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ftgen.search as S
from ftgen.bench import BenchOptions
from ftgen.build import BuildResult
from ftgen.spec import load_spec, load_spec_text

DATA = json.loads((Path(__file__).parent / "data" / "gemm_h200_replay.json").read_text())
GPU = {"name": DATA["gpu"], "driver": "580.159.04", "sm_count": 132}

SPEC = """
name: replay
family: gemm
arch: [sm_90]
precision: fp32
variants:
  - params: {m_tb: 128, n_tb: 128, k_tb: [8, 16], m_w: 32, n_w: 64, m_t: 8, n_t: 8}
  - params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 64, m_t: 8, n_t: 8}
  - params: {m_tb: 32, n_tb: 32, k_tb: 32, m_w: 16, n_w: 32, m_t: 4, n_t: 4, split_k: [4, 16]}
  - params: {m_tb: 32, n_tb: 128, k_tb: 8, m_w: 16, n_w: 64, m_t: 4, n_t: 8}
shapes: [{m: 4096, n: 4096, k: 4096}, {m: 1000, n: 1234, k: 777}, {m: 256, n: 256, k: 1024}]
"""


class Replay:
    """Stands in for the GPU: build makes placeholder binaries, runs return recorded rows."""

    def __init__(self, fail_compile=(), crash=()):
        self.builds, self.runs = [], []
        self.fail_compile, self.crash = set(fail_compile), set(crash)

    def build(self, project, *, jobs=None, kernels=None, progress=None, **kw):
        r = BuildResult()
        for k in kernels.split(","):
            self.builds.append(k)
            if k in self.fail_compile:
                r.failed[k] = "error: expected a ';'"
                continue
            exe = Path(project) / "bin" / k
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.write_text("#!/bin/sh\n")
            r.built.append(k)
        return r

    def run(self, exe, kernel, argv, timeout, meta=None):
        self.runs.append(kernel)
        if kernel in self.crash:
            return [{"kernel": kernel, "ok": False, "error": {"kind": "runtime", "message": "illegal address"}}]
        shapes = argv[argv.index("--shapes") + 1].split(",")
        p = kernel.split("_none_")[1]
        tiling, _, rest = p.partition("_s3")
        key = tiling + "_" + (rest.lstrip("_") or "sk1")
        rows = []
        for sh in shapes:
            rec = DATA["timings"][key][sh]
            m, n, k = (int(x) for x in sh.split("x"))
            rows.append({"kernel": kernel, "shape": {"m": m, "n": n, "k": k}, "ms": {"median": rec["ms"]},
                         "ref": {"lib": "cublas", "ms": rec["ref_ms"]}, "max_rel_err": rec["max_rel_err"], "ok": True})
        return rows


@pytest.fixture
def replay(monkeypatch):
    r = Replay(fail_compile={"gemm_f32_none_32x128x8_w16x64_t4x8_s3"})
    monkeypatch.setattr(S, "build", r.build)
    monkeypatch.setattr(S, "run_executable", r.run)
    return r


def run_search(tmp_path, spec, strategy=None, budget=None):
    return S.search(spec, spec.shapes, out_root=tmp_path / "gen", budget=budget, strategy=strategy or S.Exhaustive(),
                    opts=BenchOptions(reps=10), cache=S.ResultsCache(tmp_path / "cache.jsonl"), gpu=GPU)


def test_search_picks_the_fastest_per_shape_and_records_failures(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    res = run_search(tmp_path, spec)
    assert res.compiled == 5 and res.ran == 5 and len(replay.runs) == 5
    best = {s: r["kernel"] for s, r in res.best.items()}
    # the recorded H200 timings: 128x128x8 wins the large square, split-K 4 the small ones
    assert best["4096x4096x4096"] == "gemm_f32_none_128x128x8_w32x64_t8x8_s3"
    assert best["256x256x1024"] == "gemm_f32_none_32x32x32_w16x32_t4x4_s3_sk4"
    kinds = {(r.get("kernel"), (r.get("error") or {}).get("kind")) for r in res.rows if not r.get("ok")}
    assert ("gemm_f32_none_32x128x8_w16x64_t4x8_s3", "compile") in kinds


def test_repeated_search_compiles_and_runs_nothing(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    first = run_search(tmp_path, spec)
    builds, runs = len(replay.builds), len(replay.runs)
    again = run_search(tmp_path, load_spec_text(SPEC, "replay.yaml"))
    assert len(replay.builds) == builds and len(replay.runs) == runs
    assert again.compiled == 0 and again.ran == 0 and again.cache_hits == 6 * 3
    assert {s: r["kernel"] for s, r in again.best.items()} == {s: r["kernel"] for s, r in first.best.items()}


def test_cache_is_keyed_by_gpu(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    run_search(tmp_path, spec)
    runs = len(replay.runs)
    S.search(spec, spec.shapes, out_root=tmp_path / "gen", budget=None, strategy=S.Exhaustive(), opts=BenchOptions(reps=10),
             cache=S.ResultsCache(tmp_path / "cache.jsonl"), gpu={**GPU, "name": "NVIDIA H100 80GB HBM3"})
    assert len(replay.runs) == runs + 5


def test_cache_survives_a_torn_line(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    run_search(tmp_path, spec)
    with open(tmp_path / "cache.jsonl", "a") as f:
        f.write('{"key": "abc", "row": {"kernel"')  # a crash mid-write
    c = S.ResultsCache(tmp_path / "cache.jsonl")
    assert len(c.entries) >= 5


def test_random_strategy_respects_the_budget(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    res = run_search(tmp_path, spec, strategy=S.RandomSample(seed=1), budget=3)
    assert len(res.evaluated) == 3 and len(replay.builds) == 3


def test_winners_spec_round_trips(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    res = run_search(tmp_path, spec)
    text = S.winners_spec(spec, res, spec.shapes)
    p = tmp_path / "best.yaml"
    p.write_text(text)
    again = load_spec(p)
    assert {v.name for v in again.variants} == {r["kernel"] for r in res.best.values()}
    assert again.shapes == spec.shapes


@pytest.mark.compile
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").is_file(), reason="needs nvcc")
def test_dispatch_header_compiles(tmp_path, replay):
    spec = load_spec_text(SPEC, "replay.yaml")
    res = run_search(tmp_path, spec)
    hdr = res.project / "replay_dispatch.h"
    hdr.write_text(S.dispatch_header(spec, res))
    text = hdr.read_text()
    assert "ftgen_replay_select" in text and "gemm_f32_none_128x128x8_w32x64_t8x8_s3(p, stream)" in text
    ok, log = S.check_dispatch_compiles(hdr, res.project)
    assert ok, log


KMEANS_SPEC = """
name: ranges
family: kmeans
arch: [sm_90]
precision: tf32
protection: {scheme: abft, level: threadblock, correct: detect}
variants:
  - params: {backend: fused, strip: 64, warps: 8}
  - params: {m_tb: 64, n_tb: 64, k_tb: 16, m_w: 32, n_w: 32}
shapes: [{samples: 65536, dims: 8, clusters: 128}, {samples: 65536, dims: 128, clusters: 128},
         {samples: 65536, dims: 32, clusters: 1000}]
"""


def test_a_variant_is_not_built_or_run_outside_its_shapes(tmp_path, monkeypatch):
    """The fused kmeans backend runs dims <= 32 (library_range) and what its shared memory holds (shape_fits): at dims
    128 and at 32 x 1000 the search records it as out of range and runs only the other variant there; the winners come
    from the shapes each variant ran."""
    built, ran = [], []

    def fake_build(project, *, jobs=None, kernels=None, progress=None, **kw):
        r = BuildResult()
        for k in kernels.split(","):
            built.append(k)
            exe = Path(project) / "bin" / k
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.write_text("#!/bin/sh\n")
            r.built.append(k)
        return r

    def fake_run(exe, kernel, argv, timeout, meta=None):
        shapes = argv[argv.index("--shapes") + 1].split(",")
        ran.append((kernel, tuple(shapes)))
        rows = []
        for sh in shapes:
            n, d, k = (int(x) for x in sh.split("x"))
            ms = 0.1 if "fused" in kernel else 0.3
            rows.append({"kernel": kernel, "shape": {"samples": n, "dims": d, "clusters": k}, "ms": {"median": ms}, "ok": True})
        return rows

    monkeypatch.setattr(S, "build", fake_build)
    monkeypatch.setattr(S, "run_executable", fake_run)
    spec = load_spec_text(KMEANS_SPEC, "ranges.yaml")
    res = run_search(tmp_path, spec)
    fused = next(v.name for v in spec.variants if "fused" in v.name)
    other = next(v.name for v in spec.variants if "fused" not in v.name)
    assert sorted(built) == sorted([fused, other])
    assert (fused, ("65536x8x128",)) in ran and (other, ("65536x8x128", "65536x128x128", "65536x32x1000")) in ran
    assert not any(k == fused and ("65536x128x128" in shapes or "65536x32x1000" in shapes) for k, shapes in ran)
    outside = [r for r in res.rows if (r.get("error") or {}).get("kind") == "out of range"]
    assert sorted((r["kernel"], r["shape"]["dims"]) for r in outside) == [(fused, 32), (fused, 128)]
    msg = {r["shape"]["dims"]: r["error"]["message"] for r in outside}
    assert msg[128].startswith("runs dims 1..32 only") and "shared memory" in msg[32] and "clusters x dims" in msg[32]
    best = {s: r["kernel"] for s, r in res.best.items()}
    assert best == {"65536x8x128": fused, "65536x128x128": other, "65536x32x1000": other}


def test_bench_records_the_shapes_outside_a_variant_s_range_and_runs_the_rest(tmp_path, monkeypatch):
    """`ftgen bench` applies the same range as the search: the fused variant runs only 65536x8x128 (passed as --shapes),
    its other two shapes are rows of kind `out of range`, and the variant that runs every shape gets its executable's
    default shapes (no --shapes)."""
    import ftgen.bench as B
    from ftgen import families
    from ftgen.build import load_manifest
    from ftgen.codegen.emit import generate

    spec = load_spec_text(KMEANS_SPEC, "ranges.yaml")
    project = generate(spec, tmp_path / "gen").out_dir
    ran = {}

    def fake_run(exe, kernel, argv, timeout, meta=None, env=None):
        ran[kernel] = argv
        shapes = argv[argv.index("--shapes") + 1].split(",") if "--shapes" in argv else ["65536x8x128", "65536x128x128", "65536x32x1000"]
        return [{"kernel": kernel, "shape": dict(zip(("samples", "dims", "clusters"), map(int, s.split("x")))), "ok": True} for s in shapes]

    monkeypatch.setattr(B, "run_executable", fake_run)
    manifest = load_manifest(project)
    rows = B.bench_project(project, manifest["variants"], families.get("kmeans"), BenchOptions())
    fused = next(v["kernel"] for v in manifest["variants"] if "fused" in v["kernel"])
    other = next(v["kernel"] for v in manifest["variants"] if "fused" not in v["kernel"])
    assert ran[fused][ran[fused].index("--shapes") + 1] == "65536x8x128" and "--shapes" not in ran[other]
    outside = [r for r in rows if (r.get("error") or {}).get("kind") == "out of range"]
    assert sorted((r["kernel"], r["shape"]["dims"], r["shape"]["clusters"]) for r in outside) == [(fused, 32, 1000), (fused, 128, 128)]
    assert all(r["error"]["message"].startswith("runs ") and "not run at 65536x" in r["error"]["message"] for r in outside)
    assert sum(1 for r in rows if r.get("ok")) == 4


def test_generate_notes_the_spec_shapes_a_variant_does_not_run(tmp_path, capsys):
    from ftgen.cli import main

    spec = tmp_path / "ranges.yaml"
    spec.write_text(KMEANS_SPEC)
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "fused" in notes[0] and "2 of the spec's 3 shape(s)" in notes[0]


def test_an_unverified_or_skipped_row_is_never_a_winner():
    """`--no-ref` rows (ok, verified: false) and rows the executable skipped are not verified: the slower verified row
    wins, and a shape with only such rows has no winner."""
    from ftgen import families

    fam = families.get("gemm")
    shape = {"m": 64, "n": 64, "k": 64}

    def r(kernel, ms, **extra):
        return {"kernel": kernel, "shape": shape, "ok": True, "ms": {"median": ms}, **extra}

    rows = [r("fast_unverified", 0.1, verified=False), r("skipped", 0.05, skipped="too big"), r("slow_verified", 0.2)]
    assert S.best_per_shape(fam, rows, ["64x64x64"])["64x64x64"]["kernel"] == "slow_verified"
    assert S.best_per_shape(fam, rows[:2], ["64x64x64"]) == {}
    assert S.best_per_shape(fam, [r("k", 0.3, verified=True)], ["64x64x64"])["64x64x64"]["kernel"] == "k"
