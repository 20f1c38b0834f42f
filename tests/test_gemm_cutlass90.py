"""gemm cutlass90 backend (Hopper CUTLASS 3.x kernels): selection, names, constraints, validation
(exit 2), emission through cutlass_library's 3.x emitter, golden sources, the tf32x3 split, an nvcc
build of a tf32 and a bf16 variant for sm_90a through ``ftgen generate`` + ``ftgen build``, and (host
code only) CUTLASS's acceptance of the padded problems the launcher gives its kernel for odd shapes."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, golden_dir_check, without_copied_headers
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.families import get as get_family
from ftgen.families.base import SMEM_PER_BLOCK, Protection, Variant
from ftgen.families.gemm import cutlass90 as c90
from ftgen.paths import cutlass_include_dir
from ftgen.spec import load_spec_text

FAMILY = get_family("gemm")
B90 = FAMILY.backend_named("cutlass90")


def variant(precision="tf32", arch=("sm_90a",), scheme="none", **params) -> Variant:
    prot = Protection(scheme, "kernel" if scheme == "tmr" else "none")
    defs = B90.param_defs(precision, prot)
    p = {d.name: d.default[0] for d in defs}
    p.update(params)
    v = Variant("gemm", precision, prot, tuple((d.name, p[d.name]) for d in defs), tuple(arch), "cutlass90")
    if B90.constraints(v):  # named only when valid, as the spec loader does
        return v
    return Variant(v.family, v.precision, v.protection, v.params, v.arch, v.backend, B90.kernel_name(v))


def spec_text(body: str, name: str = "t", arch: str = "[sm_90a]") -> str:
    return f"name: {name}\nfamily: gemm\narch: {arch}\n" + textwrap.dedent(body)


def run_cli(tmp_path, body, capsys, arch="[sm_90a]"):
    f = tmp_path / "s.yaml"
    f.write_text(spec_text(body, arch=arch))
    rc = main(["generate", str(f), "-o", str(tmp_path / "gen")])
    return rc, capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# selection and names
# ---------------------------------------------------------------------------------------------


def test_backend_param_selects_cutlass90_and_nothing_else_changes():
    s = load_spec_text(spec_text("precision: [tf32, bf16]\nparams: {backend: cutlass90}\n"), "s.yaml")
    assert [v.backend for v in s.variants] == ["cutlass90", "cutlass90"] and not s.rejected
    # without the param the same points stay on the sm80 CUTLASS backend (sm_90a included)
    s = load_spec_text(spec_text("precision: [tf32, bf16]\n"), "s.yaml")
    assert [v.backend for v in s.variants] == ["cutlass", "cutlass"]
    assert FAMILY.select_backend("tf32", Protection()).name == "cutlass"


def test_one_spec_compares_the_sm80_and_sm90_kernels_on_sm_90a():
    s = load_spec_text(spec_text("""
        precision: tf32
        variants:
          - params: {layout_b: col}
          - params: {backend: cutlass90}
        """), "s.yaml")
    assert [v.backend for v in s.variants] == ["cutlass", "cutlass90"] and not s.rejected
    assert s.variants[0].param_dict.get("backend") == "cutlass" and s.variants[1]["backend"] == "cutlass90"


def test_default_name_encodes_every_parameter():
    assert variant().name == "gemm_tf32_none_cutlass90_128x128x32_c1x1_ws-coop_persistent_sauto_sw1_rc"
    assert variant("bf16").name == "gemm_bf16_none_cutlass90_128x128x64_c1x1_ws-coop_persistent_sauto_sw1_rc"
    assert variant("tf32x3", tile_n=256, cluster_m=2).name == "gemm_tf32x3_none_cutlass90_128x256x32_c2x1_ws-coop_persistent_sauto_sw1_rc"


def test_every_parameter_changes_the_name():
    base = variant("fp16")
    alternatives = {"tile_m": 256, "tile_n": 64, "tile_k": 32, "cluster_m": 2, "cluster_n": 2, "schedule": "ws-pingpong",
                    "scheduler": "streamk", "stages": 4, "swizzle": 8, "layout_a": "col", "layout_b": "row", "promote": 2,
                    "beta0": 1}
    # backend has one value; abft_cols names the tf32x3 ABFT's strips (below), abft_locate the 16-bit ABFT's repair
    # (test_cutlass90_abft16.py)
    assert set(alternatives) | {"backend", "abft_cols", "abft_locate"} == {p.name for p in c90.PARAMS}
    names = {base.name}
    for key, value in alternatives.items():
        names.add(variant("fp16", **{key: value}).name)
    assert len(names) == len(alternatives) + 1
    prot = Protection("abft", "threadblock", interval=1024)
    defs = B90.param_defs("tf32x3", prot)
    named = set()
    for cols in (32, 64):
        p = {d.name: d.default[0] for d in defs} | {"abft_cols": cols}
        v = Variant("gemm", "tf32x3", prot, tuple((d.name, p[d.name]) for d in defs), ("sm_90a",), "cutlass90")
        assert B90.constraints(v) == []
        named.add(B90.kernel_name(v))
    assert len(named) == 2 and any(n.endswith("_conc64") for n in named)


def test_default_parameters_fit_every_precision():
    for prec in c90.PRECISIONS:
        assert B90.constraints(variant(prec)) == [], prec


# ---------------------------------------------------------------------------------------------
# constraints and validation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, expect",
    [
        ({"arch": ("sm_90",)}, "builds for sm_90a only"),
        ({"arch": ("sm_80", "sm_90a")}, "builds for sm_90a only"),
        ({"precision": "fp64"}, "not fp64"),
        ({"precision": "tf32x3", "scheme": "tmr"}, "not tf32x3"),
        ({"tile_m": 64}, "ws-coop schedule takes tile_m 128 or 256"),
        ({"tile_m": 256, "schedule": "ws-pingpong"}, "ws-pingpong schedule takes tile_m 64 or 128"),
        ({"tile_n": 100}, "tile_n=100 is not a wgmma N"),
        ({"tile_n": 256, "promote": 1}, "promotion keeps a second set of 128 fp32 accumulators"),
        ({"tile_k": 8}, "tile_k=8 x 4-byte elements = 32 bytes"),
        ({"precision": "bf16", "tile_k": 16}, "tile_k 32, 64, 128 for bf16"),
        ({"tile_m": 256, "tile_n": 256}, "256 fp32 accumulators per consumer thread"),
        ({"tile_n": 256, "schedule": "ws-pingpong"}, "use a smaller tile or ws-coop"),
        ({"cluster_m": 4, "cluster_n": 4}, "a portable cluster has at most 8"),
        ({"scheduler": "streamk", "schedule": "ws-pingpong"}, "streamk needs schedule ws-coop"),
        ({"stages": 1}, "at least 2 stages"),
        ({"stages": 12, "tile_n": 256}, "use fewer stages"),
        # 4 x 49152 + 32 KiB would fit; with the epilogue's 67584 bytes (128x256 ws-coop, fp32 C) it does not
        ({"stages": 4, "tile_n": 256}, "use fewer stages"),
        # as many as fit: one stage of 98304 bytes beside the epilogue, and CUTLASS needs two (a compile error before)
        ({"tile_n": 256, "tile_k": 64}, "CUTLASS needs 2 stages at least"),
        ({"layout_b": "row"}, "the TF32 wgmma reads K-major operands only"),
        ({"precision": "tf32x3", "layout_a": "col"}, "tf32x3 takes layout_a row, layout_b col"),
    ],
)
def test_constraint_reasons(kw, expect):
    kw = dict(kw)
    prec = kw.pop("precision", "tf32")
    arch = kw.pop("arch", ("sm_90a",))
    scheme = kw.pop("scheme", "none")
    reasons = B90.constraints(variant(prec, arch, scheme, **kw))
    assert any(expect in r for r in reasons), reasons


# sizeof(CollectiveEpilogue::SharedStorage) and the builder's stage count (StageCountAutoCarveout) of the default TMA
# epilogue, printed by a host program over the generated kernels' types (CUTLASS 4.2, sm_90a): (schedule, tile_m, tile_n,
# C bytes, tile_k) -> (bytes, stages)
EPILOGUE_SMEM_MEASURED = {
    ("ws-pingpong", 128, 128, 4, 32): (34816, 6), ("ws-pingpong", 64, 64, 4, 32): (26624, 12),
    ("ws-pingpong", 64, 128, 4, 32): (34816, 8), ("ws-pingpong", 64, 256, 4, 32): (34816, 4),
    ("ws-pingpong", 128, 64, 4, 32): (34816, 8), ("ws-coop", 128, 64, 4, 32): (51200, 7),
    ("ws-coop", 128, 128, 4, 32): (67584, 5), ("ws-coop", 128, 192, 4, 32): (67584, 4),
    ("ws-coop", 128, 256, 4, 32): (67584, 3), ("ws-coop", 256, 64, 4, 32): (67584, 4),
    ("ws-coop", 256, 128, 4, 32): (67584, 3), ("ws-pingpong", 64, 64, 2, 64): (13312, 13),
    ("ws-pingpong", 64, 128, 2, 64): (17408, 8), ("ws-pingpong", 64, 256, 2, 64): (17408, 5),
    ("ws-pingpong", 128, 64, 2, 64): (17408, 8), ("ws-pingpong", 128, 128, 2, 64): (17408, 6),
    ("ws-coop", 128, 64, 2, 64): (25600, 8), ("ws-coop", 128, 128, 2, 64): (33792, 6),
    ("ws-coop", 128, 192, 2, 64): (33792, 4), ("ws-coop", 128, 256, 2, 64): (33792, 4),
    ("ws-coop", 256, 64, 2, 64): (33792, 4), ("ws-coop", 256, 128, 2, 64): (33792, 4),
}


@pytest.mark.parametrize("key", sorted(EPILOGUE_SMEM_MEASURED))
def test_epilogue_shared_memory_is_the_builders(key):
    schedule, tm, tn, cb, tk = key
    epi, stages = EPILOGUE_SMEM_MEASURED[key]
    assert c90.epilogue_smem(schedule, tm, tn, cb) == epi
    assert (SMEM_PER_BLOCK["sm_90a"] - epi) // ((tm + tn) * tk * cb) == stages


def test_16_bit_operands_take_any_layout():
    for la in ("row", "col"):
        for lb in ("row", "col"):
            assert B90.constraints(variant("fp16", layout_a=la, layout_b=lb)) == []


@pytest.mark.parametrize(
    "body, arch, message",
    [
        ("precision: tf32\nparams: {backend: cutlass90}\n", "[sm_90]", "builds for sm_90a only"),
        ("precision: tf32\nparams: {backend: cutlass90}\n", "[sm_80, sm_90a]", "builds for sm_90a only"),
        ("precision: tf32\nparams: {backend: cutlass90, tile_m: 192}\n", "[sm_90a]", "params.tile_m: 192 is not one of 64, 128, 256"),
        ("precision: tf32\nparams: {backend: cutlass90, tile_n: 120}\n", "[sm_90a]", "tile_n=120 is not a wgmma N"),
        ("precision: tf32\nparams: {backend: cutlass90, cluster_m: 3}\n", "[sm_90a]", "params.cluster_m: 3 is not one of 1, 2, 4"),
        ("precision: tf32\nparams: {backend: cutlass90, cluster_m: 4, cluster_n: 4}\n", "[sm_90a]", "at most 8"),
        ("precision: tf32\nparams: {backend: cutlass90, schedule: basic}\n", "[sm_90a]", "is not one of ws-coop, ws-pingpong"),
        ("precision: fp64\nparams: {backend: cutlass90}\n", "[sm_90a]", "not fp64"),
        ("precision: tf32\nprotection: {scheme: tmr, level: threadblock}\nparams: {backend: cutlass90}\n", "[sm_90a]", "level 'threadblock'"),
        ("precision: tf32\nparams: {backend: simt}\n", "[sm_90a]", "the simt backend takes precision fp32, fp64, not tf32"),
        ("precision: tf32\nparams: {backend: cublas}\n", "[sm_90a]", "'cublas' is not a backend of family gemm (its backends: simt, cutlass, cutlass90)"),
    ],
)
def test_bad_specs_exit_2_with_a_reason(tmp_path, capsys, body, arch, message):
    rc, err = run_cli(tmp_path, body, capsys, arch)
    assert rc == 2, err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "gen" / "t").exists()


def test_shipped_specs_load_without_rejections():
    files = sorted((REPO / "specs" / "gemm").glob("cutlass90_*.yaml"))
    assert files
    for f in files:
        s = load_spec_text(f.read_text(), str(f))
        assert s.variants and all(v.backend == "cutlass90" for v in s.variants), f
        assert s.arch == ("sm_90a",)


# ---------------------------------------------------------------------------------------------
# emission
# ---------------------------------------------------------------------------------------------

GOLDEN = spec_text(
    """
    variants:
      - {precision: tf32x3, params: {backend: cutlass90, tile_n: 64, cluster_m: 2}}
      - {precision: fp16, params: {backend: cutlass90, tile_m: 64, tile_n: 128, schedule: ws-pingpong, stages: 4,
                                  swizzle: 2, layout_a: col, layout_b: row}}
    shapes: [{m: 100, n: 70, k: 33}]
    """,
    "golden_cutlass90",
)


def test_golden_sources():
    files, _ = render_spec(load_spec_text(GOLDEN, "golden_cutlass90.yaml"))
    texts = {rel.replace("/", "__"): text for rel, text in without_copied_headers(files).items()
             if rel.endswith((".cu", ".h", "CMakeLists.txt"))}
    assert len(texts) == 7  # per variant .h, .cu, _bench.cu; the CMake project
    golden_dir_check(REPO / "tests" / "golden" / "gemm_cutlass90", texts)


def test_emission_goes_through_cutlass_library_and_is_deterministic():
    a, manifest = render_spec(load_spec_text(GOLDEN, "g.yaml"))
    b, _ = render_spec(load_spec_text(GOLDEN, "g.yaml"))
    assert a == b
    x3 = next(t for p, t in a.items() if p.endswith(".cu") and "tf32x3" in p and not p.endswith("_bench.cu"))
    pp = next(t for p, t in a.items() if p.endswith(".cu") and "_f16_" in p and not p.endswith("_bench.cu"))
    for cu in (x3, pp):
        assert "(cutlass_library)" in cu and "cutlass::gemm::collective::CollectiveBuilder<" in cu
        assert "cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp" in cu and "struct Kernel :" in cu
        assert "cutlass::gemm::PersistentScheduler>" in cu
    assert "cutlass::gemm::KernelTmaWarpSpecializedCooperative" in x3 and "cute::Shape<cute::_2, cute::_1, cute::_1>" in x3
    assert "cutlass::gemm::collective::StageCountAutoCarveout<" in x3 and "split3_kernel" in x3
    assert "cutlass::gemm::KernelTmaWarpSpecializedPingpong" in pp and "StageCount<4>" in pp and "split3_kernel" not in pp
    # tf32x3's loads read the split operands' two parts three times; the 16-bit kernel keeps the builder's mainloop
    assert "using Kernel_mainloop = ftgen_sm90::Split3Loads<Kernel_mainloop_built>;" in x3 and "Split3Loads" not in pp
    assert "cutlass::half_t, cutlass::layout::ColumnMajor, 8" in pp and "cutlass::half_t, cutlass::layout::RowMajor, 8" in pp
    # built with -DNDEBUG (CUTLASS's device assertions serialize the wgmma pipeline) for sm_90a
    cmake = a["CMakeLists.txt"]
    assert cmake.count("$<$<COMPILE_LANGUAGE:CUDA>:-DNDEBUG>") == 4  # (the library and the benchmark: its twin)
    assert "90a" in cmake


def test_beta0_adds_a_kernel_without_c_for_beta_zero():
    """beta0: 1 emits the variant's kernel a second time with a void C (no C tiles in its epilogue's shared memory) and
    the launcher takes it exactly when beta == 0; without it the one kernel runs every call."""
    spec = spec_text("""
        precision: tf32
        variants:
          - params: {backend: cutlass90, tile_n: 256, beta0: [0, 1]}
        shapes: [{m: 64, n: 64, k: 64}]
        """)
    files, _ = render_spec(load_spec_text(spec, "b0.yaml"))
    lib = {p: t for p, t in files.items() if p.endswith(".cu") and not p.endswith("_bench.cu")}
    with_b0 = next(t for p, t in lib.items() if p.endswith("_b0.cu"))
    without = next(t for p, t in lib.items() if p.endswith("_sw1_rc.cu"))
    assert "struct KernelNoC :" in with_b0 and "struct KernelNoC :" not in without
    noc = with_b0[with_b0.index("struct KernelNoC :") - 3000:with_b0.index("struct KernelNoC :")]
    assert "float, float,\n    void, cutlass::layout::RowMajor, 4," in noc  # the epilogue's C element
    body = with_b0[with_b0.index("cudaError_t gemm_tf32"):]
    assert "if (p->beta == 0.0)\n    e = run_op<GemmNoC>(arguments<GemmNoC>(" in body
    assert "run_op<GemmNoC>" not in without and without.count("e = run_op<Gemm>(arguments(") == 1
    # the workspace covers both kernels
    assert "std::max(cutlass_ws, GemmNoC::get_workspace_size(" in with_b0


def test_bench_is_the_cutlass_adapter_with_the_derived_tolerance():
    files, _ = render_spec(load_spec_text(GOLDEN, "g.yaml"))
    bench = next(t for p, t in files.items() if p.endswith("_bench.cu") and "tf32x3" in p)
    assert "gemm_tf32x3_none_cutlass90_128x64x32_c2x1_ws_coop_persistent_sauto_sw1_rc_workspace" in bench
    t = c90.tolerance("tf32x3")
    assert f"return {t['tol_u']} * ({t['tol_c1']} * std::sqrt(" in bench  # the fp32-level rule of tf32x3


def test_tolerance_is_the_delivered_precision_rule():
    from ftgen.tolerance import context

    for prec in c90.PRECISIONS:
        t = c90.tolerance(prec)
        assert {k: t[k] for k in ("tol_u", "tol_c1", "tol_c0", "tol_io")} == context(prec)
    assert float(c90.tolerance("tf32")["io_unrounded"]) == 2 * 2.0**-11 + 2.0**-22  # rounded operands (measured)
    assert float(c90.tolerance("tf32x3")["io_unrounded"]) == 0.0
    assert float(c90.tolerance("bf16")["tol_io"]) == 2.0**-8  # the 16-bit output


# ---------------------------------------------------------------------------------------------
# the tf32x3 split (the arithmetic of split3_kernel, in NumPy)
# ---------------------------------------------------------------------------------------------


def _tf32_big(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    up = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    down = (bits & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(up), up, down)


def _wgmma_reads(x: np.ndarray) -> np.ndarray:
    """A TF32 wgmma operand: the fp32 word with its 13 low bits ignored."""
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32x3_split_loses_at_most_u_split_per_product():
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(200_000) * np.exp(rng.uniform(-20, 20, 200_000))).astype(np.float32)
    b = (rng.standard_normal(200_000) * np.exp(rng.uniform(-20, 20, 200_000))).astype(np.float32)
    ab, bb = _tf32_big(a), _tf32_big(b)
    assert np.array_equal(_wgmma_reads(ab), ab)  # the big halves are read exactly
    asm, bsm = a - ab, b - bb
    assert np.array_equal(ab.astype(np.float64) + asm, a.astype(np.float64))  # the small halves are exact in fp32
    got = (ab.astype(np.float64) * _wgmma_reads(bsm) + _wgmma_reads(asm).astype(np.float64) * bb
           + ab.astype(np.float64) * bb)
    exact = a.astype(np.float64) * b
    rel = np.abs(got - exact) / np.abs(exact)
    assert rel.max() <= c90.SPLIT_LOSS
    assert rel.max() > c90.SPLIT_LOSS / 64  # the bound is not vacuous: the dropped terms are of that order
    # plain tf32 (one truncated product) is 2^-10-ish: far outside the split's bound
    one = _wgmma_reads(a).astype(np.float64) * _wgmma_reads(b)
    assert (np.abs(one - exact) / np.abs(exact)).max() > 2.0**-11


def test_tf32x3_split_keeps_specials():
    x = np.array([np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38, 0.0], dtype=np.float32)
    big = _tf32_big(x)
    assert np.isinf(big[0]) and np.isinf(big[1]) and np.isnan(big[2])
    assert np.isfinite(big[3:]).all()  # rounding up would overflow: truncated


# ---------------------------------------------------------------------------------------------
# nvcc: ftgen generate + ftgen build of one tf32 and one bf16 variant for sm_90a
# ---------------------------------------------------------------------------------------------

BUILD_SPEC = spec_text(
    """
    variants:
      - {precision: tf32, params: {backend: cutlass90, tile_n: 256, cluster_m: 2}}
      - {precision: bf16, params: {backend: cutlass90, schedule: ws-pingpong, cluster_n: 2}}
    shapes: [{m: 4096, n: 4096, k: 4096}, {m: 1000, n: 1234, k: 777}]
    """,
    "build_cutlass90",
)


@pytest.mark.compile
def test_tf32_and_bf16_variants_build_for_sm90a(tmp_path):
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").is_file():
        pytest.skip("nvcc not found")
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    inc = cutlass_include_dir()
    if inc is None or not (Path(inc) / "cutlass" / "cutlass.h").is_file():
        pytest.skip("CUTLASS headers not found (pip install nvidia-cutlass)")
    spec = tmp_path / "s.yaml"
    spec.write_text(BUILD_SPEC)
    out = tmp_path / "gen"
    assert main(["generate", str(spec), "-o", str(out)]) == 0
    proj = out / "build_cutlass90"
    manifest = json.loads((proj / "manifest.json").read_text())
    names = [v["kernel"] for v in manifest["variants"]]
    assert names == ["gemm_tf32_none_cutlass90_128x256x32_c2x1_ws-coop_persistent_sauto_sw1_rc",
                     "gemm_bf16_none_cutlass90_128x128x64_c1x2_ws-pingpong_persistent_sauto_sw1_rc"]
    jobs = str(min(2, os.cpu_count() or 1))
    assert main(["build", str(proj), "-j", jobs]) == 0
    wgmma = {names[0]: b"wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32",
             names[1]: b"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"}
    for n in names:
        exe = proj / "bin" / n
        assert exe.is_file() and os.access(exe, os.X_OK), f"no bench executable of {n}"
        # the executable embeds the sm_90a PTX of the kernel: wgmma (the wgmma N is the tile's N) and the
        # warp-specialized register split
        data = exe.read_bytes()
        assert wgmma[n] in data and b"setmaxnreg.inc.sync.aligned.u32" in data


# ---------------------------------------------------------------------------------------------
# nvcc, host only: CUTLASS accepts the problems the launcher gives its kernel (odd shapes padded)
# ---------------------------------------------------------------------------------------------

ODD_SHAPES = [(1, 1, 1), (1000, 1234, 777), (4097, 3, 129), (17, 4096, 33), (4096, 4096, 4096), (8, 16, 8)]

_DRIVER = """#include "{name}.cu"  // the launcher's translation unit: its kernel types and host helpers
#include <cstdio>
int main() {{
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = 132;
  const int shapes[][3] = {{{shapes}}};
  const EA* a = reinterpret_cast<const EA*>(0x100000);  // never dereferenced: can_implement checks shapes and strides
  EC* c = reinterpret_cast<EC*>(0x100000);
  for (auto& sh : shapes) {{
    const Shape s = kernel_shape(sh[0], sh[1], sh[2]);
    const auto padded = arguments(s, 1.f, 0.5f, a, kRowA ? stored_k(s) : s.m, a, kRowB ? s.n : stored_k(s), c, s.n, hw);
    const auto raw = arguments(Shape{{sh[0], sh[1], sh[2]}}, 1.f, 0.5f, a, kRowA ? sh[2] : sh[0], a, kRowB ? sh[1] : sh[2], c, sh[1], hw);
    const Layout lay = layout(sh[0], sh[1], sh[2], hw);
    std::printf("%d %d %d %d %d %d %d %d %zu %zu %zu %zu\\n", sh[0], sh[1], sh[2], s.m, s.n, s.k,
                int(Gemm::can_implement(padded) == cutlass::Status::kSuccess), int(Gemm::can_implement(raw) == cutlass::Status::kSuccess),
                lay.b, lay.c, lay.cutlass, lay.total);
  }}
  return 0;
}}
"""


@pytest.mark.compile
def test_cutlass_accepts_the_padded_problems_of_odd_shapes(tmp_path):
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else None)
    inc = cutlass_include_dir()
    if nvcc is None or inc is None or not (Path(inc) / "cutlass" / "cutlass.h").is_file():
        pytest.skip("nvcc and the CUTLASS headers are needed")
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from ftgen.codegen.emit import generate

    spec = load_spec_text(GOLDEN, "golden_cutlass90.yaml")
    g = generate(spec, tmp_path / "gen")
    shapes = ",".join("{%d, %d, %d}" % s for s in ODD_SHAPES)

    def run(v):
        d = g.out_dir / v.name
        drv = tmp_path / f"{v.name}_drv.cu"
        drv.write_text(_DRIVER.format(name=v.name, shapes=shapes))
        exe = tmp_path / f"{v.name}_drv"
        cmd = [nvcc, "-std=c++17", "-O1", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode", "arch=compute_90a,code=sm_90a",
               f"-I{d}", f"-I{g.out_dir / 'common'}", f"-I{inc}", str(drv), "-o", str(exe)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-4000:]
        out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)  # host code only: no GPU needed
        assert out.returncode == 0, out.stderr
        return v, [list(map(int, line.split())) for line in out.stdout.split("\n") if line.strip()]

    with ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(run, spec.variants))
    for v, rows in results:
        g90 = c90.Geometry(v)
        esize = g90.elem_bytes
        assert len(rows) == len(ODD_SHAPES)
        for (m, n, k, sm, sn, sk, padded_ok, raw_ok, off_b, off_c, off_cutlass, total) in rows:
            assert padded_ok == 1, (v.name, m, n, k)
            # contiguous extents are 16-byte multiples; tf32x3 triples K, each part whole k-tiles, and stores two parts
            assert sn % g90.align == 0 and sn - n < g90.align and sm >= m and sk >= k
            stored = sk
            if v.precision == "tf32x3":
                part_k = max(g90.tile[2], 32)
                assert sk % 3 == 0 and (sk // 3) % part_k == 0 and sk // 3 - k < part_k
                stored = sk // 3 * 2
            unaligned = (n % g90.align) or (k % g90.align and (g90.layout_a == "row" or g90.layout_b == "col")) or (
                m % g90.align and g90.layout_a == "col")
            if v.precision != "tf32x3":
                assert raw_ok == (0 if unaligned else 1), (v.name, m, n, k)
            # the workspace holds the padded (or split) A, B and C
            assert off_b >= esize * sm * stored and off_c - off_b >= esize * stored * sn and off_cutlass - off_c >= esize * sm * sn
            assert total >= off_cutlass
