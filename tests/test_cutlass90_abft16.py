"""bf16 / fp16 threadblock ABFT on the cutlass90 backend (ftgen/families/gemm/cutlass90.py, templates/gemm/cutlass90_abft16.cuh,
the NumPy model abft_model.abft16_check).

CPU: the spec rules (accepted for bf16 and fp16 with A K-major, refused with a reason elsewhere), the names, what the
sources of a build hold (the checked kernels with their visitor trees, the reference GEMM, injection only in inject
builds), the bench's and the library's fault units (the kernel's own tiles), and the model: clean GEMMs of every input
distribution raise no detection, every fault beyond the delivered precision's tolerance is corrected, and a located
fault is corrected in place. The device rule itself is tested against the model in tests/test_device_logic.py.
nvcc (compile): the inject build's translation unit for sm_90a, the design's kernels without spills."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from conftest import REPO, compile_sm90a, draw, gemm_spec_text as spec_text, load_gemm_spec as load
from ftgen import tolerance
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.families import get as get_family
from ftgen.families.base import Protection
from ftgen.families.gemm import abft_model as g
from ftgen.families.gemm import cutlass90 as c90
from ftgen.spec import load_spec_text

FAMILY = get_family("gemm")
B90 = FAMILY.backend_named("cutlass90")
ABFT16 = "precision: %s\nprotection: {scheme: abft, level: threadblock%s}\nparams: {backend: cutlass90, tile_n: 256%s}\n"


# ---- the spec rules and the names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("prec, tag, tk", [("bf16", "bf16", 64), ("fp16", "f16", 64), ("tf32", "tf32", 32)])
def test_abft_16bit_is_accepted_with_its_token(prec, tag, tk):
    s = load(ABFT16 % (prec, ", inject: true", ""))
    assert not s.rejected and [v.backend for v in s.variants] == ["cutlass90"]
    v = s.variants[0]
    assert v.name == f"gemm_{tag}_abft-tb-i1024_cutlass90_128x256x{tk}_c1x1_ws-coop_persistent_sauto_sw1_rc_evt_inj"
    (rc,) = load(ABFT16 % (prec, ", inject: true", ", abft_locate: recompute")).variants
    assert rc.name == v.name.replace("_evt_", "_evtrecomp_")
    geo = c90.Geometry(v)
    assert geo.abft16 and geo.promote == 0 and geo.threads == 256  # fault units: the threads holding the accumulators
    assert B90.protection_ok(prec, Protection("abft", "threadblock", interval=1024)) is None
    # detect builds and ping-pong tiles too
    body = (ABFT16 % (prec, ", correct: detect", ", schedule: [ws-coop, ws-pingpong]")).replace("tile_n: 256", "tile_n: 128")
    names = {x.name for x in load(body).variants}
    assert names == {f"gemm_{tag}_abft-tb-detect-i1024_cutlass90_128x128x{tk}_c1x1_ws-coop_persistent_sauto_sw1_rc_evt",
                     f"gemm_{tag}_abft-tb-detect-i1024_cutlass90_128x128x{tk}_c1x1_ws-pingpong_persistent_sauto_sw1_rc_evt"}


@pytest.mark.parametrize(
    "body, message",
    [
        (ABFT16 % ("fp16", "", ", layout_a: col"), "the check's reference GEMM reads A K-major"),
        (ABFT16 % ("bf16", ", interval: 64", ""), "checks once, after the whole K"),
        (ABFT16 % ("tf32", "", ", layout_b: row"), "the TF32 wgmma reads K-major operands only"),
        (ABFT16 % ("bf16", ", level: warp", ""), "level"),
        ("precision: tf32x3\nprotection: {scheme: abft, level: threadblock}\nparams: {backend: cutlass90, promote: 1, "
         "abft_locate: recompute}\n", "abft_locate=recompute: how the tf32 / bf16 / fp16 threadblock ABFT repairs"),
        (ABFT16 % ("bf16", "", ", abft_locate: nearest"), "abft_locate"),
    ],
)
def test_bad_16bit_abft_specs_exit_2_with_a_reason(tmp_path, capsys, body, message):
    f = tmp_path / "s.yaml"
    f.write_text(spec_text(body.replace(", level: threadblock, level: warp", ", level: warp")))
    rc = main(["generate", str(f), "-o", str(tmp_path / "gen")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "gen" / "t").exists()


def _sources(body: str) -> dict[str, str]:
    s = load(body)
    v = s.variants[0]
    files, _ = render_spec(s)
    return {suffix: files[f"{v.name}/{v.name}{suffix}"] for suffix in (".cu", "_bench.cu")}


def test_a_build_holds_the_checked_kernels_the_reference_and_injection_only_where_asked():
    inj = _sources(ABFT16 % ("bf16", ", inject: true", ""))
    lib = inj[".cu"]
    for token in ("struct KernelChk :", "struct KernelChkBeta :", "struct KernelRef :", "ftgen_abft16::FaultAccFetch",
                  "ftgen_abft16::abft16_check_kernel", "ftgen_abft16::abft16_fix_kernel", "ftgen_abft16::abft16_enc_kernel",
                  "cutlass::gemm::StreamKScheduler", "_unprotected("):
        assert token in lib, token
    # the checked kernel's epilogue reads no C; the beta != 0 one does
    chk = lib[lib.index("using KernelChk_epilogue"):lib.index("using KernelChk_mainloop")]
    beta = lib[lib.index("using KernelChkBeta_epilogue"):lib.index("using KernelChkBeta_mainloop")]
    assert re.search(r"float, float,\s*void, cutlass::layout::RowMajor", chk) and "ChkFusion\n" in chk
    assert re.search(r"float, float,\s*cutlass::bfloat16_t, cutlass::layout::RowMajor", beta) and "ChkFusionBeta" in beta
    lib_plain = _sources(ABFT16 % ("bf16", "", ""))[".cu"]
    assert "FaultAccFetch" not in lib_plain and "Sm90AccFetch>" in lib_plain
    bench = inj["_bench.cu"]
    # the bench's fault units: the kernel's own tiles, the threads that hold their accumulators
    assert "v.tile_m = 128, v.tile_n = 256, v.tile_k = 64;" in bench and "v.threads = 256, v.acc_elems = 128;" in bench
    assert "v.copies = 1;" in bench and "v.abft = true;" in bench


def test_the_library_plans_faults_in_the_kernels_tiles():
    v = load(ABFT16 % ("fp16", ", inject: true", "")).variants[0]
    plan = FAMILY.library_fault_plan(v)
    assert "+ 127) / 128) * ((n + 255) / 256) * 1;" in plan and ", 256, 128, (k + 63) / 64," in plan


def test_the_shipped_spec():
    s = load_spec_text((REPO / "specs" / "gemm" / "cutlass90_abft16.yaml").read_text(), "cutlass90_abft16.yaml")
    assert not s.rejected and len(s.variants) == 4
    assert {v.precision for v in s.variants} == {"bf16", "fp16"} and all(v.name.endswith("_evt_inj") for v in s.variants)
    shapes = {(x["m"], x["n"], x["k"]) for x in s.shapes}
    assert {(4096,) * 3, (8192,) * 3, (1, 1, 1), (1000, 1234, 777), (4097, 3, 129), (17, 4096, 33)} <= shapes


# ---- the model ----------------------------------------------------------------------------------------------------


def _draw(rng, shape, dist, prec):
    return g.to16(draw(rng, shape, dist, decades=1.5), prec)  # log-uniform as the fp16 benches draw it


def _delivered(prec: str, k: int) -> float:
    """The campaigns' significance: the rule of the precision delivered (tolerance.for_row; tf32: its input rounding)."""
    return tolerance.for_row({"precision": prec, "shape": {"k": k}})[1]


@pytest.mark.parametrize("prec", ["bf16", "fp16", "tf32"])
@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
def test_the_model_is_clean_on_clean_data_and_corrects_every_significant_fault(prec, dist):
    rng = np.random.default_rng(abs(hash((prec, dist))) % 2**32)
    m, k, n, cols = 24, 384, 200, 128
    kw = c90.WGMMA_K[prec]
    A, B = _draw(rng, (m, k), dist, prec), _draw(rng, (k, n), dist, prec)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    tol, sig_tol = tolerance.tolerance(prec, k), _delivered(prec, k)  # (verification: the rounded operands' rule)
    D, verdicts, clean, counters = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw)
    assert not verdicts and clean < 0.5, (verdicts, clean)
    assert np.max(np.abs(D - exact) / scale) <= tol
    significant = corrected = 0
    with np.errstate(invalid="ignore", over="ignore"):
        for _ in range(60):
            fault = [(int(rng.integers(m)), int(rng.integers(n)), "bit", int(rng.integers(10, 31)))]
            # significance: the error the fault leaves without correction, under the delivered precision's rule
            Du, _, _, _ = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw, faults=fault, correct=False)
            D, verdicts, _, counters = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw, faults=fault)
            assert set(verdicts) <= {(fault[0][0], fault[0][1] // cols)} and counters["detected"] == len(verdicts)
            if not np.nanmax(np.abs(Du - exact) / scale) <= sig_tol:
                significant += 1
                corrected += int(np.max(np.abs(D - exact) / scale) <= tol)
    assert significant > 10 and corrected == significant, (corrected, significant)


def test_tf32_faults_between_fp32_and_tf32_level_are_not_what_its_check_is_for():
    """A tf32 result carries tf32's input rounding (2^-11 relative): the check of a whole tile's columns sees every fault
    beyond that, but not every one beyond fp32's level (tf32x3's bar; experiments/scripts/abft_tf32_model.py). Planted
    check: judging tf32 by the rounded operands' fp32-level rule would count faults the check does not see."""
    rng = np.random.default_rng(11)
    m, k, n, cols = 16, 1024, 256, 128
    A, B = _draw(rng, (m, k), "normal", "tf32"), _draw(rng, (k, n), "normal", "tf32")
    exact = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    fp32_level, delivered = tolerance.tolerance("tf32", k), _delivered("tf32", k)
    missed = {"fp32": 0, "tf32": 0}
    with np.errstate(invalid="ignore", over="ignore"):
        for _ in range(150):
            fault = [(int(rng.integers(m)), int(rng.integers(n)), "bit", int(rng.integers(0, 31)))]
            Du, verdicts, _, _ = g.abft16_check(A, B, cols=cols, precision="tf32", kw=8, faults=fault, correct=False)
            err = np.nanmax(np.abs(Du - exact) / scale)
            for rule, t in (("fp32", fp32_level), ("tf32", delivered)):
                missed[rule] += int(not err <= t and not verdicts)
    assert missed["tf32"] == 0 and missed["fp32"] > 0, missed


@pytest.mark.parametrize("prec", ["bf16", "fp16", "tf32"])
def test_without_the_weighted_sums_every_significant_fault_is_detected_and_its_row_recomputed(prec):
    """abft_locate: recompute: the verdict on the unweighted residual alone detects the significant faults the weighted
    check detects (experiments/scripts/abft16_locate.py at scale), each recomputed, and clean data stays clean."""
    rng = np.random.default_rng(5)
    m, k, n, cols = 24, 384, 200, 128
    A, B = _draw(rng, (m, k), "loguniform", prec), _draw(rng, (k, n), "loguniform", prec)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    scale = np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
    tol, sig_tol, kw = tolerance.tolerance(prec, k), _delivered(prec, k), c90.WGMMA_K[prec]
    D, verdicts, clean, _ = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw, locate=False)
    assert not verdicts and clean < 0.5
    significant = 0
    with np.errstate(invalid="ignore", over="ignore"):
        for _ in range(60):
            fault = [(int(rng.integers(m)), int(rng.integers(n)), "bit", int(rng.integers(10, 31)))]
            Du, _, _, _ = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw, faults=fault, correct=False)
            if np.nanmax(np.abs(Du - exact) / scale) <= sig_tol:
                continue
            significant += 1
            _, weighted, _, _ = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw, faults=fault)
            D, verdicts, _, counters = g.abft16_check(A, B, cols=cols, precision=prec, kw=kw, faults=fault, locate=False)
            assert set(verdicts) == set(weighted) and set(verdicts.values()) == {-2}, (verdicts, weighted)
            assert counters["recomputed"] == 1 and np.max(np.abs(D - exact) / scale) <= tol
    assert significant > 10


def test_a_large_fault_is_located_and_corrected_in_place():
    rng = np.random.default_rng(3)
    A, B = _draw(rng, (8, 512), "normal", "bf16"), _draw(rng, (512, 256), "normal", "bf16")
    D, verdicts, _, counters = g.abft16_check(A, B, cols=128, precision="bf16", faults=[(5, 140, "offset", 1e4)])
    assert verdicts == {(5, 1): 140 - 128} and counters == {"detected": 1, "corrected": 1, "recomputed": 0, "uncorrectable": 0}


# ---- nvcc ---------------------------------------------------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("prec, locate, layout_b", [("bf16", "weighted", "row"), ("tf32", "recompute", "col")])
def test_the_inject_build_compiles_for_sm90a_without_spills(tmp_path, prec, locate, layout_b):
    """Device code only (-cubin: ptxas' report is what it is checked by; nvcc's device pass parses and instantiates the
    host code too): the cutlass90 backend's bf16 build in full is test_gemm_cutlass90's `ftgen build`. The two builds
    cover both epilogue trees (weighted: CheckFusion; recompute: SumFusion), both operand widths of the encodings
    (16-bit; tf32: 4-byte vectors, TF32 parts) and both layouts of B (row-major: a block per k row)."""
    from ftgen.codegen.emit import generate

    spec = load_spec_text(spec_text(ABFT16 % (prec, ", inject: true", f", abft_locate: {locate}, layout_b: {layout_b}")), "t.yaml")
    out = generate(spec, tmp_path / "gen")
    v = spec.variants[0]
    d = out.out_dir / v.name
    entries = compile_sm90a(d / f"{v.name}.cu", [d, out.out_dir / "common"], tmp_path / "v.cubin", device_only=True)
    names = " ".join(entries)
    for kernel in ("abft16_enc_kernel", "abft16_check_kernel", "abft16_fix_kernel", "KernelChk", "KernelChkBeta", "KernelRef"):
        assert kernel in names, kernel
    for name, text in entries.items():
        if "abft16_fix_kernel" in name and "Lb1E" in name:
            # (known: the row-major B corrections, 1024 threads capped at 64 registers with 16 loads of each operand in
            # flight, spill one word; a rare path, docs/gemm-hopper.md "Not done yet")
            assert re.search(r"\b[0-8] bytes spill stores, [0-8] bytes spill loads", text), (name, text)
            continue
        assert "0 bytes spill stores, 0 bytes spill loads" in text, (name, text)
        if "KernelChk" in name:  # (the fault leaf's arguments by value: a pointer to them put them on the stack)
            assert " 0 bytes stack frame" in text, (name, text)


# ---- GPU (sm_90a): the shipped spec's bench with faults (skipped without a GPU) ------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("spec, tile", [("cutlass90_abft16", "128x256x64"), ("cutlass90_abft_tf32", "128x256x32")])
def test_on_the_gpu_faults_are_corrected_and_clean_runs_raise_no_alarm(tmp_path, spec, tile):
    """python -m pytest -m gpu tests/test_cutlass90_abft16.py on an H100/H200: generate, build, bench with 8 faults per
    launch at odd shapes; every row verified (beta = 0 and beta != 0), every planned fault applied, no false alarm."""
    import json
    import os
    import sys

    def ftgen(*args):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        p = subprocess.run([sys.executable, "-m", "ftgen.cli", *args], capture_output=True, text=True, env=env, timeout=1800)
        assert p.returncode == 0, f"ftgen {' '.join(args)}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"

    ftgen("generate", str(REPO / "specs" / "gemm" / f"{spec}.yaml"), "-o", str(tmp_path))
    proj = tmp_path / f"gemm_{spec}"
    ftgen("build", str(proj), "--kernels", f"*{tile}*")
    out = tmp_path / "rows.jsonl"
    ftgen("bench", str(proj), "--kernels", f"*{tile}*", "--inject", "8", "--shapes", "512x512x1024,1000x1234x777,17x4096x33,1x1x1",
          "--reps", "3", "--warmup", "1", "--json", str(out))
    rows = [r for r in (json.loads(x) for x in out.read_text().splitlines() if x.strip()) if "kernel" in r]
    assert len(rows) == 8
    for r in rows:
        assert r["ok"] and r["false_alarms"] == 0 and r["clean_false_alarms"] == 0, r
        assert r["faults_applied"] == r["faults_planned"] and r["x_unprot"] > 0, r
