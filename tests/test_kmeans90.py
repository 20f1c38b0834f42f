"""The kmeans cutlass90 backend (ftgen/families/kmeans/family.py, templates/kmeans/kmeans90.cuh): the spec rules (sm_90a,
tf32 or tf32x3, protection none or abft threadblock; a clear exit-2 message otherwise), the names, what a build's source holds (the
CUTLASS sm90 GEMM with the arg-min in its epilogue, the finishing kernel, the padded operands; protected, the packed
centroid tiles with their encodings, the check and the fix; none of the mma kernels), the key's order (the host half of
the device's packing: nearer first, the lower index on a tie), and (marked compile) the sm_90a builds without spills."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from conftest import compile_sm90a
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families.kmeans.model import split3
from ftgen.paths import cutlass_include_dir
from ftgen.spec import load_spec_text

C90 = "arch: [sm_90a]\nprecision: tf32\nparams: {backend: cutlass90%s}\nshapes:\n  - {samples: 1000, dims: 10, clusters: 7}\n"


def spec_of(body: str):
    return load_spec_text("name: t\nfamily: kmeans\n" + textwrap.dedent(body), "t.yaml")


def test_cutlass90_is_chosen_by_its_param_with_its_name():
    s = spec_of(C90 % ", tile_n: [128, 256], schedule: ws-coop")
    assert not s.rejected and {v.backend for v in s.variants} == {"cutlass90"}
    assert sorted(v.name for v in s.variants) == ["kmeans_tf32_none_cutlass90_128x128x32_c1x1_ws-coop",
                                                  "kmeans_tf32_none_cutlass90_128x256x32_c1x1_ws-coop"]
    # without the param: the mma kernels, as before
    assert {v.backend for v in spec_of(C90.replace("params: {backend: cutlass90%s}\n", "")).variants} == {"mma"}


@pytest.mark.parametrize(
    "body, message",
    [
        (C90.replace("precision: tf32", "precision: fp64") % "", "takes precision tf32 or tf32x3, not fp64"),
        (C90.replace("precision: tf32", "precision: tf32x3") % ", tile_n: 224", "a second, promoted set"),
        (C90.replace("precision: tf32", "precision: tf32x3") % ", tile_k: 16", "use tile_k 32"),
        (C90 % "" + "protection: {scheme: abft, level: threadblock, interval: 2}\n", "verifies once per centroid tile"),
        (C90.replace("sm_90a", "sm_90") % "", "builds for sm_90a only"),
        (C90 % ", tile_m: 64", "the ws-coop schedule takes tile_m 128 or 256"),
        (C90 % ", tile_m: 256, tile_n: 256", "fp32 accumulators per consumer thread"),
    ],
)
def test_bad_cutlass90_specs_give_the_reason(body, message):
    with pytest.raises(SpecError) as e:
        spec_of(body)
    assert message in str(e.value), str(e.value)


def test_cli_refuses_a_bad_abft_cutlass90_spec_with_exit_2(tmp_path, capsys):
    spec = tmp_path / "k.yaml"
    spec.write_text("name: t\nfamily: kmeans\n" + C90 % ", tile_n: 100" + "protection: {scheme: abft, level: threadblock}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "tile_n" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


ABFT90 = C90 % ", tile_n: 160" + "protection: {scheme: abft, level: threadblock, inject: true}\n"


def rendered(body: str, name: str) -> tuple[str, str, dict]:
    """The spec's one variant, which must be `name`: its source, its twin's and every file of the project."""
    s = spec_of(body)
    assert [v.name for v in s.variants] == [name]
    files, _ = render_spec(s)
    return files[f"{name}/{name}.cu"], files[f"{name}/{name}_twin.cu"], files


def test_an_abft_cutlass90_variant_checks_in_its_gemm_tiles():
    src, twin, _ = rendered(ABFT90, "kmeans_tf32_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_inj")
    # 152 centroids and the check's 8 columns per GEMM tile; the epilogue with the check and the injection
    assert "ftgen_km90::AssignGemm<cute::Shape<cute::_128, cute::_160, cute::_32>" in src and "ftgen_km90::DirectEpilogue<8, true, false>, false>;" in src
    for piece in ("pack_kernel", "fix_units", "flag_count", "SCALE_E = -8, SCALE_W = -14", "ABFT16_LAMBDA = 0.5"):
        assert piece in src, piece
    # the queue emptied by pack_kernel before the GEMM fills it, its units recomputed by finish_kernel
    assert "&w.state->converged, KPARTS, w.flag_count);" in src and "&w.state->converged, fix, REFINE ? w.keys2 : nullptr, refine," in src
    assert "encode_kernel" not in src and "assign_kernel" not in src  # (the mma backend's)
    # the unprotected twin: the same tiles, no check
    assert "cute::_160, cute::_32>" in twin and "ftgen_km90::DirectEpilogue<0, false, false>, false>;" in twin
    assert "pack_kernel<<<" not in twin and "ftgen_km90::FixArgs fix;" not in twin
    assert "&w.state->converged, ftgen_km90::FixArgs{}, REFINE ? w.keys2 : nullptr, refine," in twin


def test_the_update_is_checked_by_finalize_unless_refine_reads_it_first():
    """Without refine, finalize_kernel's blocks check the update's DMR and add up its sums (the last block tests the
    invariants) and a rejected update is recomputed after it, which moves the centroids again from the kept ones; with
    refine, whose inertia reads the verified sums before finalize runs, the check stays a kernel of its own, before."""
    src, twin, _ = rendered(ABFT90, "kmeans_tf32_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_inj")
    assert "update_check_kernel" not in src and "UpdateCheck{n, w.colstat, w.colcheck, w.cold, counters, inj}" in src
    assert src.index("finalize_kernel<<<") < src.index("redo_update_kernel<<<") and "constexpr int CHECK_ROWS = 32;" in src
    assert "UpdateCheck" not in twin and "redo_update_kernel" not in twin
    ref, _, _ = rendered(ABFT90.replace("tile_n: 160", "tile_n: 160, refine: true"),
                         "kmeans_tf32_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_refine_inj")
    assert "UpdateCheck" not in ref and "constexpr int CHECK_ROWS = 1;" in ref
    assert ref.index("update_check_kernel<<<") < ref.index("redo_update_kernel<<<") < ref.index("finalize_kernel<<<")


X3 = C90.replace("precision: tf32", "precision: tf32x3") % ", tile_n: 160" + "protection: {scheme: abft, level: threadblock, inject: true}\n"


def test_a_tf32x3_variant_splits_its_operands_over_a_tripled_k_and_promotes():
    src, twin, files = rendered(X3, "kmeans_tf32x3_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_inj")
    # the split mainloop (the explicit epilogue, then kPromote), K = 3 lp (parts of whole k-tiles): X read as it is (A's
    # ld columns, split in registers), the packed B split per iteration
    assert "ftgen_km90::DirectEpilogue<8, true, false, ftgen_km90::kSplitChainGroups, ftgen_km90::kSplitSumParts>, true>;" in src and "constexpr int KPARTS = 3;" in src
    for piece in ("const int ld = padded_dims(dims), lp = part_dims(dims), kk = KPARTS * lp;",
                  "ftgen_rules::abft16_unit(kk, 8, NT, ABFT16_LAMBDA)", "Assign::arguments(Xg, ld, w.cx, kk, n, kk, k, w.cc, w.keys, hw, check, ld, REFINE ? w.keys2 : nullptr)",
                  "&w.state->converged, KPARTS, w.flag_count);", "fix.X = Xg;\n  fix.ldx = ld;", "fix.lp = lp;\n  fix.parts = KPARTS;\n  fix.dims = ld;",
                  "bool operands_copied(int dims) { return padded_dims(dims) != dims; }"):
        assert piece in src, piece
    assert "ftgen_km90::DirectEpilogue<0, false, false>, true>;" in twin and "w.cpad, w.state, KPARTS, k);" in twin
    header = files["common/kmeans90.cuh"]
    assert "std::conditional_t<kPromote, ftgen_sm90::SplitAMainloop<BuiltMainloop, 4, 0>, BuiltMainloop>;" in header
    shared = files["common/ftgen_sm90.cuh"]
    assert "return t % per_part;" in shared and "rs_op_selector" in shared
    # tf32 keeps the builder's mainloop and K = ld
    tf32 = rendered(ABFT90, "kmeans_tf32_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_inj")[0]
    assert "DirectEpilogue<8, true, false>, false>;" in tf32 and "constexpr int KPARTS = 1;" in tf32


def test_the_tripled_k_products_are_fp32_accurate():
    """x_lo c_hi + x_hi c_lo + x_hi c_hi, the products of the split rows, against fp64: within fp32's rounding where one
    TF32 product is 2^-11 off."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(64, 128)).astype(np.float32)
    c = rng.normal(size=(32, 128)).astype(np.float32)
    exact = x.astype(np.float64) @ c.astype(np.float64).T
    x3, c3 = split3(x, False).astype(np.float64), split3(c, True).astype(np.float64)
    three = x3 @ c3.T
    one = x3[:, 128:256] @ c3[:, :128].T  # (x_hi c_hi: TF32)
    scale = np.abs(x).astype(np.float64) @ np.abs(c).astype(np.float64).T
    assert np.max(np.abs(three - exact) / scale) < 2.0 ** -20
    assert np.max(np.abs(one - exact) / scale) > 2.0 ** -14


def test_a_build_holds_the_sm90_gemm_and_not_the_mma_kernels():
    files, _ = render_spec(spec_of(C90 % ", schedule: ws-pingpong"))
    name = "kmeans_tf32_none_cutlass90_128x128x32_c1x1_ws-pingpong"
    src = files[f"{name}/{name}.cu"]
    assert "ftgen_km90::AssignGemm<cute::Shape<cute::_128, cute::_128, cute::_32>" in src
    assert "KernelTmaWarpSpecializedPingpong" in src
    assert "finish_kernel" in src and "pad_rows_kernel" in src and "op.run(stream)" in src
    for mma in ("assign_kernel", "mma.sync", "struct Smem"):
        assert mma not in src, mma
    assert "common/kmeans90.cuh" in files
    # the update, norms and convergence are the mma backend's
    for shared in ("count_kernel", "sums_kernel", "finalize_kernel", "converge_block", "norms_kernel"):
        assert shared in src, shared


def _key(d: float, col: int) -> int:
    """The host twin of ftgen_km90::key: the order-preserving image of a float (-0 as +0) above the column."""
    u = int((np.float32(d) + np.float32(0)).view(np.uint32))
    o = (~u & 0xFFFFFFFF) if u & 0x80000000 else (u | 0x80000000)
    return (o << 32) | int(col)


def test_the_keys_order_is_the_nearest_first_then_the_lower_index():
    rng = np.random.default_rng(3)
    d = np.concatenate([rng.normal(0, 1e3, 200), rng.normal(0, 1e-3, 200), [0.0, -0.0, 1.0, 1.0, -5.0, -5.0]]).astype(np.float32)
    cols = rng.integers(0, 1 << 20, d.size)
    keys = [_key(x, c) for x, c in zip(d, cols)]
    best = min(range(d.size), key=lambda i: keys[i])
    nearest = np.flatnonzero(d == d.min())
    assert d[best] == d.min() and cols[best] == cols[nearest].min()
    assert sorted(range(d.size), key=lambda i: keys[i]) == sorted(range(d.size), key=lambda i: (float(d[i]), int(cols[i])))


@pytest.mark.compile
@pytest.mark.parametrize("body, full", [(C90 % ", refine: true", True), (ABFT90.replace("tile_n: 160", "tile_n: 224"), False),
                                        (ABFT90.replace("tile_n: 160", "tile_n: 224, refine: true"), False), (X3, True)],
                         ids=["none-refine", "abft", "abft-refine", "tf32x3-abft"])
def test_the_cutlass90_variant_compiles_for_sm90a_without_spills(tmp_path, body, full):
    """Built in full (host and device code) once per precision and protection code path: the tf32 unprotected variant (with
    refine: the epilogue's two nearest, the finishing kernel's near ties, the inertia from the sums) and
    the tf32x3 protected one (the protected launcher, the same template as tf32's); the tf32 protected variant device code
    only (its kernels, ptxas' report), at 128x224, the widest tile of the product's (112 accumulators a thread), with and
    without refine (whose two-key chains beside the check's sums spilled 303 local-memory accesses when the two shared
    one pass: the check now runs first there). The GEMM
    has no stack frame either: the epilogue's fault site and full rule are kept small (a fault applied by a predicated
    copy per accumulator, with the full rule inlined once per row held, put 64 bytes of stack frame and 128 bytes of
    spills in this kernel)."""
    from ftgen.codegen.emit import generate

    spec = spec_of(body)
    out = generate(spec, tmp_path / "gen")
    v = spec.variants[0]
    d = out.out_dir / v.name
    from ftgen.families.kmeans.family import Cutlass90Backend

    entries = compile_sm90a(d / f"{v.name}.cu", [d, out.out_dir / "common"], tmp_path / ("v.o" if full else "v.cubin"),
                            device_only=not full, options=Cutlass90Backend.compile_options)
    names = " ".join(entries)
    for kernel in ("GemmUniversal", "finish_kernel", "pad_rows_kernel", "sums_kernel") + (("refine_kernel", "refine_inertia_kernel") if "refine" in body else ()):
        assert kernel in names, kernel
    for name, text in entries.items():
        assert "0 bytes spill stores, 0 bytes spill loads" in text, (name, text)
        if "GemmUniversal" in name:
            assert " 0 bytes stack frame" in text, (name, text)


def test_the_reference_library_build_finds_cutlass_headers():
    """The flash-kmeans driver builds the variant as a shared library outside CMake: a backend that requires CUTLASS gets
    its include directory (the one ftgen build passes), a backend without it none."""
    from ftgen.bench.ctypes_driver import include_flags

    inc = cutlass_include_dir()
    if inc is None:
        pytest.skip("the nvidia-cutlass wheel is needed")
    assert include_flags(("cublas", "cutlass")) == [f"-I{inc}"]
    assert include_flags(("cublas",)) == []
