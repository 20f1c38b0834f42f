"""Threadblock ABFT on the cutlass90 backend (tf32x3): the cutlass backend's ref_checksums: concurrent check around the
unchanged sm90 GEMM (ftgen/families/gemm/cutlass90.py, templates/gemm/cutlass90_variant.cu.j2, Launcher::run_external and
abft_obs_kernel in cutlass_tmr.cuh / cutlass_abft.cuh).

CPU: the spec rules (accepted for tf32x3 at level threadblock, refused with a reason elsewhere), the names, the sm80
descriptor that gives the check its geometry and threshold, what the sources of each build hold (the obs kernel and the
ABFT launcher only in ABFT builds, injection only in inject builds, the bench's fault units), and the NumPy model: the
tf32x3 split of the sm90 kernel (SPLIT_LOSS per product) keeps clean data under the check's threshold.
nvcc (compile): the sums abft_obs_kernel forms (its host+device helpers, compiled for the host) feed the rules as the
sm80 GEMM's own sums do; the variant's translation unit builds for sm_90a with the kernels of the design, and its host
code lays the workspace out as the check needs for odd shapes."""

from __future__ import annotations

import ctypes
import math
import re
import shutil
import subprocess
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

import test_abft_strips as strips
from conftest import REPO, ptxas_entries, draw, gemm_spec_text as spec_text, load_gemm_spec as load
from ftgen import tolerance
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families import get as get_family
from ftgen.families.base import Protection
from ftgen.families.gemm import abft_model
from ftgen.families.gemm import cutlass as sm80
from ftgen.families.gemm import cutlass90 as c90
from ftgen.paths import cutlass_include_dir
from ftgen.spec import load_spec_text

FAMILY = get_family("gemm")
B90 = FAMILY.backend_named("cutlass90")
CUT = FAMILY.backend_named("cutlass")


ABFT = "precision: tf32x3\nprotection: {scheme: abft, level: threadblock%s}\nparams: {backend: cutlass90%s}\n"


# ---------------------------------------------------------------------------------------------
# the spec rules and the names
# ---------------------------------------------------------------------------------------------


def test_abft_tf32x3_is_accepted_with_the_cutlass_backends_tokens():
    s = load(ABFT % ("", ""))
    assert not s.rejected and [v.backend for v in s.variants] == ["cutlass90"]
    v = s.variants[0]
    # the interval a spec that names none gets: the cutlass backend's auto value (the family resolves it), one check
    assert v.protection.interval == c90.ABFT_ONCE_INTERVAL == CUT.auto_interval(Protection("abft", "threadblock"), {})
    assert v.name == "gemm_tf32x3_abft-tb-i1024_cutlass90_128x128x32_c1x1_ws-coop_persistent_sauto_sw1_rc_p1_conc"
    assert B90.protection_token(v.protection) == FAMILY.protection_token(v.protection) == "abft-tb-i1024"
    names = {x.name for x in load(textwrap.dedent("""
        precision: tf32x3
        variants:
          - {protection: {scheme: abft, level: threadblock, inject: true}, params: {backend: cutlass90}}
          - {protection: {scheme: abft, level: threadblock, correct: detect}, params: {backend: cutlass90}}
          - {protection: {scheme: abft, level: threadblock, threshold: 0.001, interval: 4096}, params: {backend: cutlass90}}
          - {protection: {scheme: none}, params: {backend: cutlass90}}
        """)).variants}
    assert names == {"gemm_tf32x3_abft-tb-i1024_cutlass90_128x128x32_c1x1_ws-coop_persistent_sauto_sw1_rc_p1_conc_inj",
                     "gemm_tf32x3_abft-tb-detect-i1024_cutlass90_128x128x32_c1x1_ws-coop_persistent_sauto_sw1_rc_p1_conc",
                     "gemm_tf32x3_abft-tb-i4096-th0p001_cutlass90_128x128x32_c1x1_ws-coop_persistent_sauto_sw1_rc_p1_conc",
                     "gemm_tf32x3_none_cutlass90_128x128x32_c1x1_ws-coop_persistent_sauto_sw1_rc"}
    # every sm90 parameter still reaches the name of a protected variant
    assert load(ABFT % ("", ", tile_m: 256, tile_n: 64, cluster_m: 2, scheduler: streamk, promote: 4")).variants[0].name == (
        "gemm_tf32x3_abft-tb-i1024_cutlass90_256x64x32_c2x1_ws-coop_streamk_sauto_sw1_rc_p4_conc")


def test_abft_needs_the_accumulators_promoted():
    with pytest.raises(SpecError, match="promote=0 with abft: the check's threshold is derived for round-to-nearest"):
        load(ABFT % ("", ", promote: 0"))


@pytest.mark.parametrize(
    "precision, prot, expect",
    [
        ("tf32", Protection("abft", "warp", interval=1024), "level threadblock only"),
        ("tf32x3", Protection("abft", "warp", interval=1024), "level threadblock only"),
        ("tf32x3", Protection("abft", "threadblock", interval=16), "checks once, after the whole K"),
        ("tf32x3", Protection("tmr", "kernel"), "tmr on the cutlass90 backend takes precision tf32, fp16, bf16"),
        ("fp64", Protection("abft", "threadblock", interval=1024), "not fp64"),
    ],
)
def test_the_backend_refuses_with_a_reason(precision, prot, expect):
    reason = B90.protection_ok(precision, prot)
    assert reason and expect in reason, reason


def test_the_backend_offers_what_it_builds():
    assert B90.schemes == {"none": (), "abft": ("threadblock",), "tmr": ("kernel", "multikernel")}
    for prot in (Protection(), Protection("abft", "threadblock", interval=1024),
                 Protection("abft", "threadblock", "detect", 1024, 0.5, True)):
        assert B90.protection_ok("tf32x3", prot) is None
    # the sm80 backends' choices are unchanged: abft tf32x3 without params backend stays on the cutlass backend
    assert FAMILY.select_backend("tf32x3", Protection("abft", "threadblock")).name == "cutlass"
    s = load("precision: tf32x3\nprotection: {scheme: abft, level: threadblock}\n", arch="[sm_90]")
    assert [v.backend for v in s.variants] == ["cutlass"]


@pytest.mark.parametrize(
    "body, message",
    [
        ((ABFT % ("", "")).replace("tf32x3", "tf32").replace("threadblock", "warp"), "level threadblock only"),
        ((ABFT % ("", ", layout_a: col")).replace("tf32x3", "fp16"), "the check's reference GEMM reads A K-major"),
        (ABFT % (", interval: 64", ""), "checks once, after the whole K"),
        (ABFT % ("", ", layout_a: col"), "tf32x3 takes layout_a row, layout_b col"),
        ("precision: tf32x3\nprotection: {scheme: tmr, level: kernel}\nparams: {backend: cutlass90}\n", "tmr"),
    ],
)
def test_bad_abft_specs_exit_2_with_a_reason(tmp_path, capsys, body, message):
    f = tmp_path / "s.yaml"
    f.write_text(spec_text(body))
    rc = main(["generate", str(f), "-o", str(tmp_path / "gen")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "gen" / "t").exists()


def test_the_shipped_spec_is_the_protected_tf32x3_variant():
    s = load_spec_text((REPO / "specs" / "gemm" / "cutlass90_abft.yaml").read_text(), "cutlass90_abft.yaml")
    assert not s.rejected and len(s.variants) == 1
    v = s.variants[0]
    assert v.backend == "cutlass90" and v.precision == "tf32x3" and v.protection.scheme == "abft" and v.protection.inject
    assert v.name.endswith("_conc_inj")
    # promote 4 and beta0 (the check's GEMM on the kernel without C): its compile test below builds that kernel too
    assert "_p4_b0_conc" in v.name
    shapes = {(x["m"], x["n"], x["k"]) for x in s.shapes}
    assert {(4096,) * 3, (8192,) * 3, (1, 1, 1), (1000, 1234, 777), (4097, 3, 129), (17, 4096, 33)} <= shapes


# ---------------------------------------------------------------------------------------------
# the check's descriptor: an sm80 tf32x3 variant of the cutlass backend (ref_checksums: concurrent)
# ---------------------------------------------------------------------------------------------


def _emitted_abft_config(v) -> list[float]:
    """The kAbft initializer of v's generated source: unit, fixed, online, conc_unit, band, elem_u, elem_c_sqrt, elem_c_const."""
    files, _ = render_spec(load(ABFT % ("", f", abft_cols: {v.get('abft_cols')}")))
    cu = next(t for p, t in files.items() if p.endswith(f"{v.name}.cu"))
    return [float(x.strip().rstrip("f")) for x in re.search(r"AbftConfig kAbft\{([^}]*)\}", cu).group(1).split(",")]


@pytest.mark.parametrize("cols, lam, warp_n", [(32, 1.5, 32), (64, 1.5, 64), (128, 1.0, 32)])
def test_abft_cols_sets_the_strips_and_the_banded_lambda(cols, lam, warp_n):
    v = load(ABFT % ("", f", abft_cols: {cols}")).variants[0]
    assert v.name.endswith("_conc" if cols == 32 else f"_conc{cols}")
    d = c90.abft_descriptor(v)
    assert CUT.constraints(d) == []
    g = sm80.Geometry(d)
    assert (g.tb, g.warp) == ((128, 128, 32), (64, warp_n, 32))
    assert sm80.abft_strip_cols(d) == cols and abft_model.abft_band_strip_lambda(cols) == lam
    # the emitted check: the banded lambda on 2^-24 (not the sm80 check's: 64 columns 1.0, 128 columns 0.6), the band's
    # floor, and half of the tf32x3 tolerance rule for a suspect's elements
    unit, fixed, online, conc, band, eu, ec_sqrt, ec_const = _emitted_abft_config(v)
    assert unit == conc == pytest.approx(lam * 2.0**-24) and (fixed, online) == (0.0, 1)
    assert band == pytest.approx(abft_model.abft_band_floor(cols)) and abft_model.abft_band_floor(32) == 0.5
    assert abft_model.abft_band_floor(64) == pytest.approx(0.333, abs=1e-3) and abft_model.abft_band_floor(128) == pytest.approx(0.327, abs=1e-3)
    k = 777
    assert eu * (ec_sqrt * math.sqrt(k) + ec_const) == pytest.approx(abft_model.abft_element_tol("tf32x3", k))
    assert abft_model.abft_element_tol("tf32x3", k) == pytest.approx(0.5 * tolerance.tolerance("tf32x3", k))


def test_abft_cols_is_the_tf32x3_checks_only():
    with pytest.raises(SpecError, match="abft_cols"):
        load(ABFT % ("", ", abft_cols: 256"))
    # the other variants of the backend keep 32
    with pytest.raises(SpecError, match="abft_cols=64: the strip width of the tf32x3 threadblock ABFT"):
        load(ABFT.replace("tf32x3", "bf16") % ("", ", abft_cols: 64"))


def test_the_descriptor_is_the_demos_concurrent_variant():
    v = load(ABFT % (", inject: true, correct: detect", ", tile_m: 256, tile_n: 64")).variants[0]
    d = c90.abft_descriptor(v)
    assert d.backend == "cutlass" and d.precision == "tf32x3" and d.protection == v.protection
    assert CUT.constraints(d) == [] and sm80.abft_concurrent(d)
    g = sm80.Geometry(d)
    assert (g.tb, g.warp, g.threads, g.acc_elems) == ((128, 128, 32), (64, 32, 32), 256, 64)
    assert (g.layout_a, g.layout_b) == (v.get("layout_a"), v.get("layout_b")) == ("row", "col")
    # the check per warp column: 32-column strips at lambda 1.5 on 2^-24, the sm80 concurrent check's threshold
    assert sm80.abft_strip_cols(d) == 32
    assert sm80.abft_strip_unit(d) == sm80.ABFT_STRIP_LAMBDA * sm80.ABFT_STRIP_UNIT == 1.5 * 2.0**-24
    # the demo's protected variant has the same parameters (its checked geometry, measured on the H200)
    demo = load_spec_text((REPO / "specs" / "gemm" / "demo.yaml").read_text(), "demo.yaml")
    prot = next(x for x in demo.variants if x.protection.scheme == "abft")
    same = {k: x for k, x in prot.params if k not in ("layout_b", "abft_cols")}
    assert same == {k: x for k, x in d.params if k not in ("layout_b", "abft_cols")}
    # but for its strips: one per 128-column tile (abft_cols 0: the widest calibrated), where cutlass90 keeps 32 by default
    assert sm80.abft_strip_cols(prot) == 128 and sm80.abft_strip_unit(prot) == 0.6 * 2.0**-24


# ---------------------------------------------------------------------------------------------
# the sources of each build
# ---------------------------------------------------------------------------------------------

BUILDS = spec_text(
    """
    precision: tf32x3
    variants:
      - {protection: {scheme: none}, params: {backend: cutlass90, tile_n: 128, cluster_m: 2, promote: 1}}
      - {protection: {scheme: abft, level: threadblock}, params: {backend: cutlass90, tile_n: 128, cluster_m: 2}}
      - {protection: {scheme: abft, level: threadblock, inject: true, correct: detect}, params: {backend: cutlass90, tile_n: 128, cluster_m: 2}}
    shapes: [{m: 100, n: 70, k: 33}]
    """,
    "builds",
)


@pytest.fixture(scope="module")
def rendered():
    s = load_spec_text(BUILDS, "builds.yaml")
    files, _ = render_spec(s)
    none, clean, inj = s.variants
    out = {}
    for key, v in (("none", none), ("clean", clean), ("inj", inj)):
        out[key] = {suffix: files[f"{v.name}/{v.name}{suffix}"] for suffix in (".cu", ".h", "_bench.cu")}
        out[key]["v"] = v
    out["abft_cuh"] = files["common/cutlass_abft.cuh"]
    out["tmr_cuh"] = files["common/cutlass_tmr.cuh"]
    return out


def test_only_abft_builds_carry_the_check(rendered):
    none, clean, inj = rendered["none"], rendered["clean"], rendered["inj"]
    for marker in ('#include "cutlass_tmr.cuh"', "Launch::run_external(", "FTGEN_ABFT_CONCURRENT", "_unprotected(", "axpby_kernel"):
        assert marker not in none[".cu"], marker
        assert marker in clean[".cu"] and marker in inj[".cu"], marker
    assert "_unprotected" not in none[".h"] and "_unprotected" in clean[".h"] and "_unprotected" in inj[".h"]
    for b in (clean, inj):
        cu = b[".cu"]
        assert "#define FTGEN_ABFT_PREPASS 1 " in cu and "#define FTGEN_ABFT_STRIP_N 32 " in cu
        # the descriptor's types: the sm80 tf32x3 GEMM (OpMultiplyAddFastF32), 128x128x32 tiles of 64x32x32 warp tiles
        assert cu.count("cutlass::arch::OpMultiplyAddFastF32") == 2 and "using OpMain =" in cu and "using OpFallback =" in cu
        assert "cutlass::gemm::GemmShape<128, 128, 32>" in cu and "cutlass::gemm::GemmShape<64, 32, 32>" in cu
        # the threshold unit of the concurrent check, as the cutlass backend renders it
        unit = re.search(r"AbftConfig kAbft\{([^}]*)\}", cu).group(1).split(",")
        assert float(unit[3].strip().rstrip("f")) == pytest.approx(1.5 * 2.0**-24) == float(unit[0].strip().rstrip("f"))
        # the sm90 kernel is the unprotected variant's, unchanged
        pattern = r"using Kernel_epilogue =.*?public Kernel_base \{ \};"
        kernel = re.search(pattern, cu, re.S).group(0)
        assert "KernelTmaWarpSpecializedCooperative" in kernel and kernel == re.search(pattern, none[".cu"], re.S).group(0)
        # with the accumulators promoted every k-tile (the builder's mainloop on the FP8 dispatch policy, ftgen_sm90.cuh)
        assert "using Kernel_mainloop = ftgen_sm90::Split3Loads<ftgen_sm90::PromotedMainloop<Kernel_mainloop_built>>;" in kernel
        assert "constexpr unsigned kPromoteMmas = 4;" in cu and "args.mainloop.mma_promotion_interval = kPromoteMmas;" in cu
    # injection: compiled into the inject build only
    assert "#define FTGEN_TMR_INJECT 0 " in clean[".cu"] and "#define FTGEN_TMR_INJECT 1 " in inj[".cu"]
    assert "ftgen_tmr::kLevelAbft, false, true, false>" in clean[".cu"] and "ftgen_tmr::kLevelAbft, true, true, false>" in inj[".cu"]
    # the calibration knob of the threshold (lambda on fp32's unit roundoff), read once by the launcher
    assert "FTGEN_ABFT_LAMBDA" in clean[".cu"] and f"lambda * {2.0**-24!r}" in clean[".cu"] and "FTGEN_ABFT_LAMBDA" not in none[".cu"]
    # correct: detect reaches the check
    assert re.search(r"AbftConfig kAbft\{[^,]*, 0\.0f, 1,", clean[".cu"]) and re.search(r"AbftConfig kAbft\{[^,]*, 0\.0f, 0,", inj[".cu"])


def test_the_obs_kernel_forms_the_sums_the_check_reads(rendered):
    abft = rendered["abft_cuh"]
    body = abft[abft.index("__global__ void __launch_bounds__(256) abft_obs_kernel"):]
    # its planned faults only under kInject (a clean build compiles none of it), added before the sums
    inject = body[body.index("if constexpr (kInject)"):body.index("float4 s = abft_obs_part")]
    assert "p.t.records" in inject and "injected" in inject and "applied = 1" in inject
    assert "p.t.records" not in body.replace(inject, "")
    # the layout abft_check_tile reads: obs[(tn kWarpsN + w) M + row]
    assert "p.obs[(static_cast<long long>(tn) * S::kWarpsN + cl / S::kWarpN) * M + row]" in body
    assert "__ldg(p.obs + (static_cast<long long>(tn) * S::kWarpsN + w) * M + row)" in abft
    # the weights of the strips, through the rules
    assert "ftgen_rules::abft_strip_local(cl + j, kCols) + 1" in abft
    tmr = rendered["tmr_cuh"]
    assert "abft_obs_kernel<K, kInject, kConcStrips>" in tmr and "run_abft_concurrent(q, s, [&](AbftParams<K> const& ap, cudaStream_t gs)" in tmr


def test_the_bench_plans_faults_over_the_checks_tiles(rendered):
    none, clean, inj = rendered["none"], rendered["clean"], rendered["inj"]
    for b in (clean, inj):
        bench, sym = b["_bench.cu"], b["v"].symbol
        assert "v.tile_m = 128, v.tile_n = 128, v.tile_k = 32;" in bench
        assert "v.threads = 256, v.acc_elems = 64;" in bench and "v.copies = 1;" in bench
        assert "v.abft = true;" in bench and "v.is_protected = true;" in bench
        assert f"v.launch_unprotected = {sym}_unprotected;" in bench
    assert "v.inject = false;" in clean["_bench.cu"] and "v.inject = true;" in inj["_bench.cu"]
    # the unprotected variant keeps its own geometry
    assert "v.tile_m = 128, v.tile_n = 128, v.tile_k = 32;" in none["_bench.cu"] and "v.threads = 384," in none["_bench.cu"]
    assert "launch_unprotected" not in none["_bench.cu"] and "v.abft = false;" in none["_bench.cu"]


# ---------------------------------------------------------------------------------------------
# the NumPy model: the sm90 tf32x3 split under the check's threshold
# ---------------------------------------------------------------------------------------------


def tf32_round(x: np.ndarray) -> np.ndarray:
    """split3_kernel's big half: fp32 rounded to TF32 (ties away; truncated where rounding up would overflow)."""
    bits = x.astype(np.float32).view(np.uint32)
    up = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(up), up, (bits & np.uint32(0xFFFFE000)).view(np.float32))


def tf32_truncate(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def sm90_tf32x3(A: np.ndarray, B: np.ndarray, read=tf32_round, kstep: int = 8) -> np.ndarray:
    """The cutlass90 tf32x3 GEMM in NumPy: one TF32 GEMM over the tripled K [A_big | A_small | A_big] x
    [B_small; B_big; B_big] (the small halves as the wgmma reads them: `read`), the exact sum of each wgmma's kstep
    products added to an fp32 accumulator rounded to nearest (the sm80 check's fp32-level model of the accumulation)."""
    Ab, Bb = tf32_round(A), tf32_round(B)
    As, Bs = read(A - Ab), read(B - Bb)
    C = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for a, b in ((Ab, Bs), (As, Bb), (Ab, Bb)):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        for k0 in range(0, A.shape[1], kstep):
            C = (C.astype(np.float64) + a64[:, k0:k0 + kstep] @ b64[k0:k0 + kstep]).astype(np.float32)
    return C


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return strips.build(strips.RULES.parent, tmp_path_factory.mktemp("c90_rules"))


@pytest.mark.parametrize("read", [tf32_round, tf32_truncate], ids=["small-rounded", "small-truncated"])
@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
@pytest.mark.parametrize("m, k, n", [(64, 256, 128), (48, 1024, 128), (16, 4096, 128), (64, 33, 128)])
def test_the_split_loss_keeps_clean_data_under_the_threshold(lib, read, dist, m, k, n):
    """The split loses up to SPLIT_LOSS = 2^-19 of |a||b| per product (more than fp32's rounding of one product), but it
    is a per-product error of random sign: summed over a 32-column strip and k it stays below the accumulation noise the
    threshold is derived for, so the sm80 concurrent check's threshold (lambda 1.5 on 2^-24) keeps the margin of
    test_abft_strips.test_clean_data_is_never_flagged_at_lambda_1_5 on the sm90 kernel's products (the full rule's
    largest clean score below 2/3, pass 1 sending at most 2 units per thousand to the rare path). What the threshold
    does not model is the wgmma's own accumulation: docs/gemm-hopper.md, to be measured (the GPU campaign)."""
    rng = np.random.default_rng(zlib.crc32(f"{dist}/{m}/{k}/{n}/{read.__name__}".encode()))
    b = strips.Block(rng, m, k, n, dist)
    b.C = sm90_tf32x3(b.A, b.B, read)
    b.clean = b.C.copy()
    # fp32-level error (the bench's rule), the split's loss included
    assert np.max(np.abs(b.C - b.exact) / b.S) <= tolerance.tolerance("tf32x3", k)
    worst_full = worst1 = 0.0
    flagged1 = 0
    for i in range(m):
        for s, clean1, v, sc1, sc2 in b.check_row(lib, i):
            assert v in (None, -1), (dist, m, k, n, i, s, v, sc2)
            worst_full, worst1 = max(worst_full, sc2), max(worst1, sc1)
            flagged1 += not clean1
    assert worst_full < 2 / 3, worst_full
    assert flagged1 / (m * (n // strips.WARP_N)) <= 2e-3, worst1


def test_the_split_loss_per_product_is_within_split_loss():
    rng = np.random.default_rng(3)
    a = draw(rng, 100_000, "loguniform").astype(np.float32)
    b = draw(rng, 100_000, "loguniform").astype(np.float32)
    got = sm90_tf32x3(a[None, :1000].T.copy(), b[None, :1000], kstep=1)  # (1000 x 1 x 1000: one product each)
    exact = a[:1000, None].astype(np.float64) * b[None, :1000]
    assert np.max(np.abs(got - exact) / np.abs(exact)) <= c90.SPLIT_LOSS + 2.0**-24


# ---------------------------------------------------------------------------------------------
# nvcc: abft_obs_kernel's arithmetic on the host, the variant's translation unit and its workspace layout
# ---------------------------------------------------------------------------------------------


def _nvcc():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else None)


def _tools():
    nvcc, inc = _nvcc(), cutlass_include_dir()
    if nvcc is None or inc is None or not (Path(inc) / "cutlass" / "cutlass.h").is_file():
        pytest.skip("nvcc and the CUTLASS headers are needed")
    return nvcc, inc


OBS_SHIM = r"""
#define FTGEN_ABFT_PREPASS 1
#define FTGEN_ABFT_CONCURRENT 1
#define FTGEN_ABFT_STRIP_N 32
#include "cutlass_tmr.cuh"
// One row of C (n columns, tiles_n tiles of 128) as abft_obs_kernel reduces it: a thread per kObsCols columns
// (abft_obs_part), the 8 threads of a 32-column warp column added by the shuffle tree (lane l += lane l ^ o, o = 1, 2, 4:
// abft_obs_add), lane 0's sums stored. out: per warp column g, {sum c, sum w c, sum c^2, max |c|}.
extern "C" void obs_row(const float* row, int n, int tiles_n, float alpha, float* out) {
  using namespace ftgen_tmr;
  constexpr int kGroup = 32 / kObsCols;
  for (int g = 0; g < tiles_n * 4; ++g) {
    float4 lane[kGroup];
    for (int l = 0; l < kGroup; ++l) {
      const int c0 = g * 32 + l * kObsCols, cl = c0 % 128;
      float x[kObsCols];
      for (int j = 0; j < kObsCols; ++j) x[j] = c0 + j < n ? row[c0 + j] : 0.f;
      lane[l] = abft_obs_part<32>(x, cl, alpha);
    }
    for (int o = 1; o < kGroup; o <<= 1) {
      float4 next[kGroup];
      for (int l = 0; l < kGroup; ++l) next[l] = abft_obs_add(lane[l], lane[l ^ o]);
      for (int l = 0; l < kGroup; ++l) lane[l] = next[l];
    }
    out[4 * g + 0] = lane[0].x, out[4 * g + 1] = lane[0].y, out[4 * g + 2] = lane[0].z, out[4 * g + 3] = lane[0].w;
  }
}
"""


@pytest.fixture(scope="module")
def obs_lib(tmp_path_factory):
    nvcc, inc = _tools()
    out = tmp_path_factory.mktemp("obs")
    src, so = out / "obs.cu", out / "libobs.so"
    src.write_text(OBS_SHIM)
    cmd = [nvcc, "-std=c++17", "-O2", "--expt-relaxed-constexpr", "-shared", "-Xcompiler", "-fPIC", "-Xcompiler", "-ffp-contract=off",
           f"-I{REPO / 'templates' / 'gemm'}", f"-I{REPO / 'templates' / 'common'}", f"-I{inc}", str(src), "-o", str(so)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    lib = ctypes.CDLL(str(so))
    P = ctypes.POINTER(ctypes.c_float)
    lib.obs_row.restype, lib.obs_row.argtypes = None, [P, ctypes.c_int, ctypes.c_int, ctypes.c_float, P]
    return lib


def obs_of(obs_lib, row: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    n = row.size
    tiles_n = -(-n // 128)
    out = np.zeros((tiles_n * 4, 4), np.float32)
    r = np.ascontiguousarray(row, dtype=np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    obs_lib.obs_row(r.ctypes.data_as(fp), n, tiles_n, ctypes.c_float(alpha), out.ctypes.data_as(fp))
    return out


@pytest.mark.compile
def test_the_obs_sums_are_the_strip_sums(obs_lib):
    rng = np.random.default_rng(11)
    for n in (128, 256, 200, 3, 33):
        row = rng.standard_normal(n).astype(np.float32)
        o = obs_of(obs_lib, row)
        pad = np.zeros(o.shape[0] * 32)
        pad[:n] = row
        blocks = pad.reshape(-1, 32).astype(np.float64)
        w = np.arange(1, 33, dtype=np.float64)  # the weights restart in every 32-column strip
        ref = np.stack([blocks.sum(1), (blocks * w).sum(1), (blocks * blocks).sum(1), np.abs(blocks).max(1)], axis=1)
        assert np.allclose(o, ref, rtol=1e-5, atol=1e-5), (n, o, ref)
        assert np.array_equal(o[:, 3], ref[:, 3].astype(np.float32))
        assert not o[-(-n // 32):].any()  # the strips past N: zero sums
    # constant rows: every strip's weighted sum is 1 + ... + 32, whatever its place in the tile
    assert np.array_equal(obs_of(obs_lib, np.ones(256, np.float32))[:, 1], np.full(8, 528.0, np.float32))
    # C = alpha x the accumulators: divided by alpha on the way in, as AbftGlobalRows reads C
    row = rng.standard_normal(128).astype(np.float32)
    assert np.allclose(obs_of(obs_lib, (row * np.float32(1.5)).astype(np.float32), 1.5), obs_of(obs_lib, row), rtol=1e-6, atol=1e-6)


@pytest.mark.compile
@pytest.mark.parametrize("dist", ["normal", "loguniform"])
def test_the_obs_sums_drive_the_check_as_the_sm80_gemms_sums_do(obs_lib, lib, dist):
    """Pass 1 on abft_obs_kernel's sums of the sm90 kernel's C: clean rows pass (the strips' own references), and a
    fault planted in C is flagged in its strip only and located there by the full rule (test_abft_strips' decisions)."""
    rng = np.random.default_rng(zlib.crc32(dist.encode()))
    b = strips.Block(rng, 32, 512, 128, dist)
    b.C = sm90_tf32x3(b.A, b.B)
    b.clean = b.C.copy()

    def pass1(i):
        o = obs_of(obs_lib, b.C[i])
        res = []
        for s in range(4):
            sc = ctypes.c_float()
            res.append(lib.pass1(o[s, 0], o[s, 1], o[s, 2], o[s, 3], b.r32[i, s], b.rw32[i, s], b.unit, b.rms_w, ctypes.byref(sc)))
        return res

    assert all(all(pass1(i)) for i in range(b.m))
    for i, j in ((3, 0), (7, 45), (20, 127), (31, 96)):
        b.C[i, j] = np.float32(float(b.C[i, j]) + 1e3 * max(1.0, abs(float(b.clean[i, j]))))
        p = pass1(i)
        assert p == [int(s != j // 32) for s in range(4)], (i, j, p)
        _, _, v, _, _ = b.check_row(lib, i)[j // 32]
        assert v == j % 32, (i, j, v)
        b.C[i, j] = b.clean[i, j]


DRIVER = """#include "{name}.cu"  // the launcher's translation unit: its kernels, types and host helpers
#include <cstdio>
int main() {{
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = 132;
  const int shapes[][3] = {{{shapes}}};
  for (auto& sh : shapes) {{
    const int m = sh[0], n = sh[1], k = sh[2];
    const AbftSections s = abft_sections(m, n, k, hw);
    const ftgen_tmr::Layout L = Launch::layout(m, n, k, 0, kInterval);  // (no GPU: 132 SMs assumed)
    std::printf("%d %d %d %zu %zu %zu %zu %lld %zu %d %d %d %d %d %zu %zu %zu %d\\n", m, n, k, layout(m, n, k, hw).total, s.cprime, s.abft,
                s.total, s.ld_cprime, L.total, L.chunks, L.strips, L.strip_n, L.tiles_m, L.tiles_n, L.obs, L.redo, L.enc, int(L.ref_tc));
  }}
  return 0;
}}
"""

ODD = [(1, 1, 1), (1000, 1234, 777), (4097, 3, 129), (17, 4096, 33), (4096, 4096, 4096), (128, 128, 40000)]


@pytest.mark.compile
def test_the_variant_builds_for_sm90a_and_lays_out_its_workspace(tmp_path):
    """The inject build of the shipped spec's variant: one nvcc run of a host driver that includes its translation unit
    (-Xptxas -v: the kernels of the design, none spilling but the sm80 reference GEMM's fallback, as on the cutlass
    backend), then (host code only, no GPU) the workspace sections for odd shapes: the sm90 GEMM's first, C', then the
    check's, with one checkpoint per tile, 32-column strips and the sums of every strip of every row; the reference GEMM
    on the sm90 path (KernelRef3, E split by split3_t_kernel) at any k."""
    nvcc, inc = _tools()
    from ftgen.codegen.emit import generate

    spec = load_spec_text((REPO / "specs" / "gemm" / "cutlass90_abft.yaml").read_text(), "cutlass90_abft.yaml")
    g = generate(spec, tmp_path / "gen")
    v = spec.variants[0]
    d = g.out_dir / v.name
    drv = tmp_path / "drv.cu"
    drv.write_text(DRIVER.format(name=v.name, shapes=",".join("{%d, %d, %d}" % s for s in ODD)))
    exe = tmp_path / "drv"
    cmd = [nvcc, "-std=c++17", "-O2", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode", "arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
           f"-I{d}", f"-I{g.out_dir / 'common'}", f"-I{inc}", str(drv), "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-4000:]
    entries = ptxas_entries(p.stderr)
    names = " ".join(entries)
    for kernel in ("abft_obs_kernel", "abft_check_kernel", "abft_once_kernel", "abft_enc_kernel", "abft_fault_error_kernel",
                   "abft_ref_scan_tc_kernel", "axpby_kernel", "split3_kernel", "split3_t_kernel", "device_kernel"):
        assert kernel in names, kernel
    assert sum("abft_obs_kernel" in k for k in entries) == 2  # the main and the fallback descriptor
    for k, text in entries.items():
        if "abft_obs_kernel" in k or "abft_check_kernel" in k or "abft_once_kernel" in k or "device_kernel" in k:
            assert "0 bytes spill stores, 0 bytes spill loads" in text, (k, text)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [list(map(int, line.split())) for line in out.stdout.splitlines() if line.strip()]
    assert len(rows) == len(ODD)
    for m, n, k, gemm_total, cprime, abft, total, ld_cp, l_total, chunks, nstrips, strip_n, tiles_m, tiles_n, obs, redo, enc, ref_tc in rows:
        assert cprime >= gemm_total and cprime % 256 == 0
        assert ld_cp >= n and ld_cp % 4 == 0 and abft - cprime >= 4 * m * ld_cp and abft % 256 == 0
        assert total >= abft + l_total
        assert chunks == 1 and strip_n == 32 and nstrips == 4 * tiles_n  # one check per tile, per warp column
        assert (tiles_m, tiles_n) == (-(-m // 128), -(-n // 128))
        assert l_total >= obs + 16 * nstrips * m  # the sums of every strip of every row
        assert ref_tc == 1  # the reference on the sm90 path (KernelRef3) for any k


# ---------------------------------------------------------------------------------------------
# GPU (sm_90a): the bench of the shipped spec's variant with faults (skipped without a GPU)
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_on_the_gpu_faults_are_corrected_and_clean_runs_raise_no_alarm(tmp_path):
    """python -m pytest -m gpu tests/test_cutlass90_abft.py on an H100/H200: generate, build, bench with 8 faults per
    launch at odd shapes and the campaign's; every row verified (beta = 0 and beta != 0), every planned fault applied,
    no false alarm (the threshold's margin on the sm90 accumulation: docs/gemm-hopper.md)."""
    import json
    import os
    import sys

    def ftgen(*args):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        p = subprocess.run([sys.executable, "-m", "ftgen.cli", *args], capture_output=True, text=True, env=env, timeout=1800)
        assert p.returncode == 0, f"ftgen {' '.join(args)}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"

    ftgen("generate", str(REPO / "specs" / "gemm" / "cutlass90_abft.yaml"), "-o", str(tmp_path))
    proj = tmp_path / "gemm_cutlass90_abft"
    ftgen("build", str(proj))
    out = tmp_path / "rows.jsonl"
    ftgen("bench", str(proj), "--inject", "8", "--shapes", "512x512x1024,1000x1234x777,4097x3x129,1x1x1", "--reps", "3",
          "--warmup", "1", "--json", str(out))
    rows = [r for r in (json.loads(x) for x in out.read_text().splitlines() if x.strip()) if "kernel" in r]
    assert len(rows) == 4
    for r in rows:
        assert r["ok"] and r["false_alarms"] == 0 and r["clean_false_alarms"] == 0, r
        assert r["faults_applied"] == r["faults_planned"] and r["x_unprot"] > 0, r
