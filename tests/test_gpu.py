"""GPU tests: a representative variant of every family x scheme, generated, built and run on a real GPU, with and
without faults; verification, counters and campaign arithmetic checked on real rows. Marked `gpu`: skipped on a
machine without one. Run them on an H100/H200 with

    FTGEN_GPU_ARCH=sm_90 python -m pytest -m gpu -q tests/test_gpu.py

(a few minutes on one GPU, most of it building the CUTLASS variants).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.gpu

ARCH = os.environ.get("FTGEN_GPU_ARCH", "sm_90")

SPECS = {
    "gpu_gemm_simt": f"""
name: gpu_gemm_simt
family: gemm
arch: [{ARCH}]
precision: fp32
variants:
  - {{protection: {{scheme: none}}}}
  - {{protection: {{scheme: abft, level: threadblock, inject: true}}}}
  - {{protection: {{scheme: abft, level: thread, inject: true}}}}
  - {{precision: fp64, protection: {{scheme: abft, level: threadblock, inject: true}}, params: {{m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8}}}}
""",
    "gpu_gemm_cutlass": f"""
name: gpu_gemm_cutlass
family: gemm
arch: [{ARCH}]
variants:
  - {{precision: tf32x3, protection: {{scheme: abft, level: threadblock, inject: true}}, params: {{tb_m: 128, tb_n: 128, tb_k: 32, warp_m: 64, warp_n: 32, warp_k: 32, stages: 4, ref_checksums: concurrent}}}}
  - {{precision: tf32, protection: {{scheme: tmr, level: kernel, inject: true}}}}
  - {{precision: fp16, protection: {{scheme: tmr, level: threadblock, inject: true}}, params: {{tb_m: 64, tb_n: 64, tb_k: 32, warp_m: 32, warp_n: 32, warp_k: 32, inst_k: 16, align: 2}}}}
""",
    "gpu_fft": f"""
name: gpu_fft
family: fft
arch: [{ARCH}]
precision: [fp32, fp64]
protection: {{scheme: [none, abft], level: two-sided-tb, inject: true}}
params: {{logn: 12}}
""",
    "gpu_gemm_cutlass90": """
name: gpu_gemm_cutlass90
family: gemm
arch: [sm_90a]
protection: {scheme: abft, level: threadblock, inject: true}
params: {backend: cutlass90, scheduler: persistent, cluster_m: 2, tile_m: 128, tile_n: 128}
variants:
  - {precision: bf16, params: {schedule: ws-pingpong}}
  - {precision: tf32x3, params: {schedule: ws-coop}}
  - {precision: tf32x3, params: {schedule: ws-pingpong, tile_m: 64}}
""",
    "gpu_attention_wgmma": """
name: gpu_attention_wgmma
family: attention
arch: [sm_90a]
precision: fp16
params: {backend: wgmma, head_dim: 64}
variants:
  - {protection: {scheme: none}}
  - {protection: {scheme: abft, level: [strided, efta], inject: true}}
  - {protection: {scheme: [none, abft], level: snvr, inject: true}, params: {block_m: 192}}
""",
    "gpu_attention_mma": f"""
name: gpu_attention_mma
family: attention
arch: [{ARCH}]
precision: fp16
params: {{head_dim: 64}}
variants:
  - {{protection: {{scheme: abft, level: [strided, efta], inject: true}}}}
""",
    "gpu_kmeans_fused": f"""
name: gpu_kmeans_fused
family: kmeans
arch: [{ARCH}]
precision: tf32
params: {{backend: fused}}
variants:
  - {{protection: {{scheme: none}}}}
  - {{protection: {{scheme: abft, level: threadblock, correct: detect, inject: true}}}}
""",
    "gpu_kmeans_mma": f"""
name: gpu_kmeans_mma
family: kmeans
arch: [{ARCH}]
protection: {{scheme: abft, level: warp, inject: true}}
precision: [tf32x3, fp64]
""",
    # tf32x3 on both schedules: the ping-pong kernel counts a work tile's k-tiles from A's tiles (SplitAMainloop)
    "gpu_kmeans90": """
name: gpu_kmeans90
family: kmeans
arch: [sm_90a]
precision: tf32x3
protection: {scheme: abft, level: threadblock, inject: true}
params: {backend: cutlass90, cluster_m: 1, tile_k: 32, tile_n: 160}
variants:
  - {params: {schedule: ws-coop, tile_m: 128}}
  - {params: {schedule: ws-pingpong, tile_m: 64}}
""",
}
SHAPES = {
    "gpu_gemm_simt": "1024x1024x1024,1000x1234x777",
    "gpu_gemm_cutlass": "1024x1024x1024,1000x1234x777",
    "gpu_fft": "4096x1024,4096x1001",
    "gpu_gemm_cutlass90": "1024x1024x1024,1000x1234x777",
    "gpu_attention_wgmma": "2x8x1024,1x4x1000",
    "gpu_attention_mma": "2x8x1024,1x4x1000",
    "gpu_kmeans_fused": "65536x8x128,20011x29x300",
    "gpu_kmeans_mma": "65536x32x128,20011x29x300",
    "gpu_kmeans90": "65536x32x128,20011x100x300",
}


def ftgen(*args, check=True, timeout=1800) -> subprocess.CompletedProcess:
    # the references timed outside the executables (SDPA, flash-kmeans, the decoupled baseline) have GPU tests of their
    # own; here they would only add their builds and timings: none unless the caller names them
    env = {"FTGEN_BENCH_REFS": "none", **os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "ftgen.cli", *args], capture_output=True, text=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"ftgen {' '.join(args)}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def rows_of(path: Path) -> list[dict]:
    return [r for r in (json.loads(l) for l in path.read_text().splitlines() if l.strip()) if "kernel" in r]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> the project of SPECS[name], generated and built on first use (so `-k` builds only what it runs)."""
    root = tmp_path_factory.mktemp("gpu")
    out: dict[str, Path] = {}

    def get(name: str) -> Path:
        if "arch: [sm_90a]" in SPECS[name] and not ARCH.startswith("sm_90"):
            pytest.skip(f"{name} needs a Hopper GPU (sm_90a); FTGEN_GPU_ARCH is {ARCH}")
        if name not in out:
            spec = root / f"{name}.yaml"
            spec.write_text(SPECS[name])
            ftgen("generate", str(spec), "-o", str(root / "gen"))
            ftgen("build", str(root / "gen" / name), "-j", str(os.cpu_count() or 4))
            out[name] = root / "gen" / name
        return out[name]

    return get


def check_rows(rows: list[dict], injected: bool) -> None:
    assert rows, "no rows"
    for r in rows:
        where = f"{r['kernel']} {r.get('shape')}"
        assert r.get("ok") is True, f"{where}: not ok: {r.get('error')}"
        assert r["ms"]["median"] > 0 and r["ms"]["min"] <= r["ms"]["median"] <= r["ms"]["max"], where
        if r.get("ref"):
            assert r["ref"].get("alternated") is True, f"{where}: reference not timed alternately"
        if "x_unprot" in r:  # the twin the overhead is measured against was verified too
            assert r["max_rel_err_unprotected"] <= r["tolerance"] and "twin_error" not in r, where
        prot = r.get("protection") or {}
        if prot.get("scheme", "none") == "none":
            continue
        assert r.get("false_alarms", 0) == 0, where
        if injected and prot.get("inject"):
            applied = r["faults_applied"]
            assert applied > 0 and 0 < len(r["faults"]) <= r["faults_planned"], where  # one run's list
            assert r["injected"] == applied and "fault_accounting_error" not in r, where
            assert r["clean_false_alarms"] == 0, where
            assert r["detected"] <= applied + r.get("false_alarms", 0), f"{where}: more detections than faults"
            assert {"site", "position"} <= set(r["faults"][0]), where
            assert "significant" in r, where


@pytest.mark.parametrize("name", list(SPECS))
def test_clean_and_faulty_rows_verify(built, name, tmp_path):
    clean, faulty = tmp_path / "clean.jsonl", tmp_path / "faulty.jsonl"
    ftgen("bench", str(built(name)), "--shapes", SHAPES[name], "--reps", "5", "--warmup", "2", "--json", str(clean))
    check_rows(rows_of(clean), injected=False)
    inj = "1" if name in ("gpu_fft", "gpu_attention_wgmma", "gpu_attention_mma") else "8"
    ftgen("bench", str(built(name)), "--kernels", "*_inj", "--shapes", SHAPES[name], "--inject", inj, "--reps", "5",
          "--warmup", "2", "--json", str(faulty))
    rows = rows_of(faulty)
    check_rows(rows, injected=True)
    if name == "gpu_fft":
        assert all(r.get("fault_scope") == "launch" for r in rows if r.get("faults"))


@pytest.mark.parametrize("name,kernels,shape", [
    ("gpu_gemm_cutlass", "*tf32x3_abft*", "512x512x1024"),
    ("gpu_gemm_simt", "gemm_f32_abft-tb*", "256x256x512"),
    ("gpu_fft", "*f32_abft*", "4096x64"),
    ("gpu_kmeans_fused", "*abft*", "16384x32x256"),
    ("gpu_kmeans_mma", "*abft-warp*", "16384x64x256"),
    ("gpu_gemm_cutlass90", "*bf16_abft*", "512x512x1024"),
    ("gpu_attention_wgmma", "*abft*", "1x4x1024"),
])
def test_campaign_arithmetic_on_real_trials(built, name, kernels, shape, tmp_path):
    out = tmp_path / "campaign.jsonl"
    project = built(name)
    spec = project.parent.parent / f"{name}.yaml"
    ftgen("campaign", str(spec), "-o", str(project.parent), "--kernels", kernels, "--trials", "60", "--shape", shape,
          "--seed", "3", "--json", str(out))
    lines = [json.loads(l) for l in out.read_text().splitlines() if l.strip()]
    summaries = [l["campaign"] for l in lines if "campaign" in l]
    trials = [l for l in lines if "trial" in l]
    assert summaries and trials
    for s in summaries:
        mine = [t for t in trials if t["kernel"] == s["kernel"]]
        assert s["clean_trials"] + s["faulty_trials"] == len(mine)
        assert s["corrected"] <= s["detected"] and s["corrected"] <= s["significant"] <= s["faulty_trials"]
        if s["significant"]:
            assert s["coverage"] == pytest.approx(s["corrected"] / s["significant"])
        assert s["false_alarms"] == 0, s
        assert not s.get("counter_violations"), s
        assert {"rule", "tolerance", "max_clean_err"} <= set(s["significance"])


def test_simt_abft_without_an_interval_runs_near_its_unprotected_tiling(tmp_path):
    """interval: auto (the default) gives the measured fast configuration: within 25% of the same tiling unprotected."""
    spec = tmp_path / "auto.yaml"
    spec.write_text(f"name: gpu_auto\nfamily: gemm\narch: [{ARCH}]\nprecision: fp32\n"
                    "protection: {scheme: [none, abft], level: threadblock}\n")
    ftgen("generate", str(spec), "-o", str(tmp_path / "gen"))
    ftgen("build", str(tmp_path / "gen" / "gpu_auto"), "-j", str(os.cpu_count() or 4))
    out = tmp_path / "auto.jsonl"
    ftgen("bench", str(tmp_path / "gen" / "gpu_auto"), "--shapes", "4096x4096x4096", "--reps", "20", "--warmup", "5",
          "--json", str(out))
    rows = rows_of(out)
    check_rows(rows, injected=False)
    by = {(r.get("protection") or {}).get("scheme", "none"): r["ms"]["median"] for r in rows}
    assert by["abft"] <= 1.25 * by["none"], by


@pytest.mark.parametrize("body", [
    "precision: fp64\nprotection: {scheme: none}\n",
    "precision: tf32\nprotection: {scheme: abft, level: threadblock, correct: detect, inject: true}\n"
    "params: {backend: fused, refine: true}\n",
], ids=["fp64", "tf32-fused-refine"])
def test_kmeans_lloyd_to_convergence_follows_the_fp64_loop(tmp_path, monkeypatch, body):
    """The bench's Lloyd check to convergence (FTGEN_KMEANS_TOL): fp64, and tf32 with near ties refined (the fused
    backend, protected), on Gaussian blobs from k-means++ converge at the fp64 reference loop's iteration (within one)
    and to its inertia (1e-4); the row says both loops' counts."""
    spec = tmp_path / "lloyd.yaml"
    spec.write_text(f"name: gpu_lloyd\nfamily: kmeans\narch: [{ARCH}]\n" + body)
    ftgen("generate", str(spec), "-o", str(tmp_path / "gen"))
    ftgen("build", str(tmp_path / "gen" / "gpu_lloyd"), "-j", str(os.cpu_count() or 4))
    for k, v in {"FTGEN_KMEANS_ITERS": "300", "FTGEN_KMEANS_TOL": "1e-8", "FTGEN_KMEANS_DATA": "blobs",
                 "FTGEN_KMEANS_INIT": "kmeans++", "FTGEN_BENCH_REFS": "none"}.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "lloyd.jsonl"
    ftgen("bench", str(tmp_path / "gen" / "gpu_lloyd"), "--shapes", "65536x32x128", "--reps", "1", "--warmup", "1",
          "--json", str(out))
    (row,) = rows_of(out)
    assert row["ok"] is True and row["lloyd_ok"] is True, row
    assert abs(row["lloyd_iters"] - row["lloyd_iters_ref"]) <= 1 and 1 < row["lloyd_iters"] < 300, row
    assert row["lloyd_final_inertia_rel"] <= 1e-4 and row["lloyd_tol"] == 1e-8, row
