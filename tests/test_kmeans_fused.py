"""The kmeans fused backend (params backend: fused; templates/kmeans/kmeans_variant.cu.j2, the fused pass): the spec rules
(tf32 or tf32x3, protection none or abft threadblock with correct: detect; a clear exit-2 message otherwise), the names, what a
build's source holds (the one-pass kernel, its scale, pack and update kernels; none of the sorted update's), the shapes
the library may dispatch to it (dims <= 32), the NumPy model of its exact fixed-point update and of its arg-min checks,
and (marked compile) nvcc builds without spills or warnings."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import ptxas_entries
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families import get as get_family
from ftgen.families.kmeans import model
from ftgen.spec import load_spec_text

FUSED = "arch: [sm_90]\nprecision: tf32\nparams: {backend: fused%s}\nshapes:\n  - {samples: 1000, dims: 10, clusters: 7}\n"
ABFT = FUSED % ", strip: 64, warps: 4" + "protection: {scheme: abft, level: threadblock, correct: detect, inject: true}\n"
NAME = "kmeans_tf32_abft-tb-detect_fused_s64_w4_inj"


def spec_of(body: str):
    return load_spec_text("name: t\nfamily: kmeans\n" + textwrap.dedent(body), "t.yaml")


def test_fused_is_chosen_by_its_param_with_its_name():
    s = spec_of(FUSED % ", strip: [64, 128], warps: 8")
    assert {v.backend for v in s.variants} == {"fused"}
    assert sorted(v.name for v in s.variants) == ["kmeans_tf32_none_fused_s128_w8", "kmeans_tf32_none_fused_s64_w8"]
    assert [v.name for v in spec_of(ABFT).variants] == [NAME]
    assert [v.name for v in spec_of(FUSED % "").variants] == ["kmeans_tf32_none_fused_s64_w8"]  # the defaults


@pytest.mark.parametrize(
    "body, message",
    [
        (FUSED % "" + "protection: {scheme: abft, level: threadblock}\n", "write correct: detect"),
        (FUSED.replace("precision: tf32", "precision: fp64") % "", "takes precision tf32 or tf32x3, not fp64"),
        (FUSED % "" + "protection: {scheme: abft, level: threadblock, correct: detect, interval: 2}\n", "verifies once per centroid tile"),
        (FUSED % ", strip: 96", "strip"),
        (FUSED % ", warps: 2", "warps"),
    ],
)
def test_bad_fused_specs_give_the_reason(body, message):
    with pytest.raises(SpecError) as e:
        spec_of(body)
    assert message in str(e.value), str(e.value)


def test_cli_refuses_an_online_fused_spec_with_exit_2(tmp_path, capsys):
    spec = tmp_path / "k.yaml"
    spec.write_text("name: t\nfamily: kmeans\n" + FUSED % "" + "protection: {scheme: abft, level: threadblock}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "correct: detect" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_a_fused_variant_is_one_pass_with_its_checks():
    files, _ = render_spec(spec_of(ABFT))
    src = files[f"{NAME}/{NAME}.cu"]
    for piece in ("fused_kernel", "fused_scale_kernel", "fused_pack_kernel", "fused_update_kernel", "norm_prefilter_clean",
                  "fx_add", "LABEL_EPS = 0x1.0p-15f", "constexpr int STRIP = 64;", "update_invariant", "redo_update_kernel"):
        assert piece in src, piece
    for absent in ("count_kernel", "scan_kernel", "sums_kernel", "assign_kernel", "x_stats_kernel", "update_check_kernel"):
        assert absent not in src, absent
    twin = files[f"{NAME}/{NAME}_twin.cu"]
    assert "fused_kernel" in twin and "ftgen_rules::norm_prefilter_tau(" not in twin and "fx_quant_b(" not in twin
    assert "ftgen_rules::norm_prefilter_tau(" in src and "constexpr int FRAG_PARTS = 1;" in src


def test_a_tf32x3_variant_takes_the_three_products_and_exact_keys():
    files, _ = render_spec(spec_of(ABFT.replace("precision: tf32", "precision: tf32x3")))
    name = NAME.replace("tf32_", "tf32x3_")
    src = files[f"{name}/{name}.cu"]
    for piece in ("constexpr int FRAG_PARTS = 2;", "constexpr unsigned KEY_MASK = 0xffffffffu;", "mma(acc[nb], afr[ks], bw);",
                  "mma(acc[nb], af[ks], bwr);", "fused_b_rem(", "if (bits < key) key = bits, place = 2 * nb + c;",
                  "abft16_unit(3 * dims, 8, STRIP"):
        assert piece in src, piece


def test_the_library_dispatches_only_small_dims_to_it():
    fam = get_family("kmeans")
    (v,) = spec_of(ABFT).variants
    assert fam.library_range(v) == {"dims": (1, 32)}
    (mma,) = spec_of(FUSED.replace("params: {backend: fused%s}\n", "")).variants
    assert fam.library_range(mma) == {}
    # a project of fused variants only gets the mma backend's default of the same protection as the library's fallback
    fb = fam.library_fallback(v)
    assert fb.backend == "mma" and fb.name == "kmeans_tf32_abft-tb-detect_128x64x32_w64x32" and fam.library_range(fb) == {}


# ---- the NumPy model: exact fixed-point sums ---------------------------------------------------------------------


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
def test_fixed_point_sums_are_exact_and_in_any_order(dist):
    rng = np.random.default_rng(3)
    n, dims, k = 4000, 7, 13
    X = {"normal": rng.standard_normal((n, dims)), "uniform": rng.uniform(-1, 1, (n, dims)),
         "loguniform": np.sign(rng.uniform(-1, 1, (n, dims))) * 10.0 ** rng.uniform(-3, 3, (n, dims))}[dist].astype(np.float32)
    labels = rng.integers(0, k, n)
    q, shifts = model.fx_quantize(X)
    assert np.abs(q).max() < 2 ** (62 - n.bit_length())  # any sum of n terms fits an int64
    perm = rng.permutation(n)
    a = np.zeros((k, dims), np.int64)
    b = np.zeros((k, dims), np.int64)
    np.add.at(a, labels, q)
    np.add.at(b, labels[perm], q[perm])
    assert np.array_equal(a, b)
    sums, counts, bad = model.fx_update(X, labels, k)
    assert not bad and np.array_equal(counts, np.bincount(labels, minlength=k))
    exact = np.zeros((k, dims), np.float64)
    np.add.at(exact, labels, X.astype(np.float64))
    # each term is off by at most half a quantum 2^-shift: the mean by at most that
    quantum = np.ldexp(1.0, -shifts)
    assert np.all(np.abs(sums - exact) <= counts[:, None] * quantum[None, :] / 2 + 1e-300)


def test_every_bit_flipped_in_a_sum_or_count_is_detected():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 5)).astype(np.float32)
    labels = rng.integers(0, 6, 500)
    clean, _, _ = model.fx_update(X, labels, 6)
    for bit in range(64):
        c = model.Counters()
        sums, _, bad = model.fx_update(X, labels, 6, faults=[model.Fault("update", row=bit % 6, col=bit % 5, bit=bit)], counters=c)
        assert bad and c.detected == 1 and np.array_equal(sums, clean), bit
    for bit in range(31):
        _, counts, bad = model.fx_update(X, labels, 6, faults=[model.Fault("update", row=2, col=5, bit=bit)])
        assert bad and np.array_equal(counts, np.bincount(labels, minlength=6)), bit


# ---- the NumPy model: the arg-min's value and label checks -----------------------------------------------------------


def _sample_pairs(seed: int, per_dist: int):
    """(x, c) float32 pairs of 1..32 dims, per_dist each from normal, uniform and log-uniform (1e-3..1e3) values."""
    rng = np.random.default_rng(seed)
    for dist in ("normal", "uniform", "loguniform"):
        for _ in range(per_dist):
            dims = int(rng.integers(1, 33))
            if dist == "loguniform":
                x, c = (np.sign(rng.uniform(-1, 1, dims)) * 10.0 ** rng.uniform(-3, 3, dims) for _ in range(2))
            else:
                x, c = (rng.standard_normal(dims) if dist == "normal" else rng.uniform(-1, 1, dims) for _ in range(2))
            yield x.astype(np.float32), c.astype(np.float32)


def test_the_label_check_bound_covers_the_recomputation():
    """The kernel's label check compares d' from the MMA (exact TF32 products, fp32 sums) with d' recomputed from the
    same TF32 operands in another fp32 order: the derived LABEL_EPS (xx + cc) must cover that with a margin."""
    worst = 0.0
    for x, c in _sample_pairs(5, 300):
        xt, ct = model.round_tf32(x).astype(np.float64), model.round_tf32(c).astype(np.float64)
        cc = np.float32(np.dot(c.astype(np.float64), c.astype(np.float64)))
        mma = np.float32(cc - np.float32(2.0) * np.float32(np.dot(xt, ct)))  # one rounding of the exact dot
        rec = model.label_distance_tf32(x, c)
        xx = float(np.dot(x.astype(np.float64), x.astype(np.float64)))
        worst = max(worst, abs(float(rec) - float(mma)) / (model.LABEL_EPS * (xx + float(cc))))
    assert worst < 0.5, worst


def test_the_label_check_bound_covers_the_tf32x3_recomputation():
    """tf32x3: the MMA's a'' (three exact TF32 products per product, here summed exactly and rounded once) against the
    recomputation (the same products in fp32, in the kernel's order): within half of LABEL_EPS (xx + cc), and far closer
    to the fp64 value than the TF32 one is (the check is then an fp32-level one)."""
    worst, err3, err1 = 0.0, 0.0, 0.0
    for x, c in _sample_pairs(6, 200):
        xb, cb = model.round_tf32(x), model.round_tf32(c)
        xs, cs = model.round_tf32(x - xb), model.round_tf32(c - cb)
        f = lambda a: a.astype(np.float64)  # noqa: E731
        exact3 = float(np.dot(f(xb), f(cb)) + np.dot(f(xs), f(cb)) + np.dot(f(xb), f(cs)))
        cc = np.float32(np.dot(f(c), f(c)))
        mma = np.float32(cc - np.float32(2.0) * np.float32(exact3))
        rec = model.label_distance_tf32x3(x, c)
        xx = float(np.dot(f(x), f(x)))
        scale = xx + float(cc)
        worst = max(worst, abs(float(rec) - float(mma)) / (model.LABEL_EPS * scale))
        true = float(np.dot(f(c), f(c)) - 2.0 * np.dot(f(x), f(c)))
        err3 = max(err3, abs(float(rec) - true) / scale)
        err1 = max(err1, abs(float(model.label_distance_tf32(x, c)) - true) / scale)
    assert worst < 0.5, worst
    assert err3 < 2.0 ** -19 and err1 > 2.0 ** -14, (err3, err1)


def test_the_arg_min_is_the_smallest_key_of_the_folded_accumulators():
    """a'' = -d / 2 (negative, the nearest nearest zero): the smallest unsigned key is the nearest centroid, a distance
    rounded below zero (a'' > 0) wins, and a near-tie within the key's 5 dropped bits goes to the lower place."""
    d = np.array([3.0, 1.0, 2.0, 0.5, 7.0], np.float32)
    key, second = model.argmin_keys(-d / 2)
    assert key & 31 == 3 and (key & ~31) == (second & ~31)
    key, _ = model.argmin_keys(-np.array([3.0, -1e-9, 0.5], np.float32) / 2)
    assert key & 31 == 1
    tie = np.array([1.0, np.nextafter(np.float32(1.0), np.float32(2.0))], np.float32)
    key, _ = model.argmin_keys(-tie / 2)
    assert key & 31 == 0


def test_the_arg_min_checks_accept_the_minimum_and_refuse_a_wrong_one():
    d = np.array([3.0, 1.0, 2.0, 1.0 + 2.0 ** -22], np.float32)
    a2 = -d / 2
    xx, cc = 4.0, 1.0
    key, second = model.argmin_keys(a2)
    assert model.argmin_checks(key, second, a2[key & 31], xx, cc)
    assert not model.argmin_checks(key, int(np.float32(a2[2]).view(np.uint32)), a2[key & 31], xx, cc)  # a value not the smallest
    assert not model.argmin_checks((key & ~31) | 0, second, a2[0], xx, cc)  # the smallest value with a label far from it
    assert model.argmin_checks((key & ~31) | 3, second, a2[3], xx, cc)  # a near-tie's label: within the check's epsilon


def _nvcc(root: Path, rel: str, *archs: str) -> dict[str, dict[str, str]]:
    """nvcc -c of one translation unit for every arch of `archs` in one run (the host code compiled once), asserted to
    succeed without a warning; ptxas' report per arch and entry function."""
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    d = str(Path(rel).parent)
    gencode = [f"-gencode=arch=compute_{a[3:]},code=[{a},compute_{a[3:]}]" for a in archs]
    cmd = [nvcc, "-std=c++17", "-O3", "-Xptxas", "-v", "-Xptxas=-warn-spills", *gencode, "-I", str(root / d), "-I",
           str(root / "common"), "-c", str(root / rel), "-o", os.devnull]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{rel} ({', '.join(archs)}):\n{p.stdout}{p.stderr}"
    assert "warning" not in p.stderr.lower(), p.stderr
    return {a: ptxas_entries(p.stderr, a) for a in archs}


@pytest.mark.compile
@pytest.mark.parametrize("precision, refine", [("tf32", False), ("tf32x3", False), ("tf32", True)], ids=["tf32", "tf32x3", "tf32-refine"])
def test_nvcc_compiles_the_fused_variant_without_spills(tmp_path, precision, refine):
    """The variant for sm_80 and sm_90, its benchmark twin for sm_90 (refine: the arg-min's second keys and the
    near ties' relabelling and moves)."""
    body = ABFT.replace("sm_90]", "sm_80, sm_90]").replace("precision: tf32", f"precision: {precision}")
    files, _ = render_spec(spec_of(body.replace("warps: 4", "warps: 4, refine: true") if refine else body))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    name = NAME.replace("tf32_", f"{precision}_").replace("_inj", "_refine_inj" if refine else "_inj")
    for rel, archs in ((f"{name}/{name}.cu", ("sm_80", "sm_90")), (f"{name}/{name}_twin.cu", ("sm_90",))):
        for arch, entries in _nvcc(tmp_path, rel, *archs).items():
            fused = {n: t for n, t in entries.items() if "fused_kernel" in n}
            assert len(fused) == 4, (rel, arch, list(entries))  # one instance per k-step count (dims <= 8, 16, 24, 32)
            for kernel, text in fused.items():
                assert "0 bytes spill stores, 0 bytes spill loads" in text, (rel, arch, kernel, text)


@pytest.mark.parametrize("precision, strip", [("tf32", 64), ("tf32x3", 128)])
def test_the_shared_memory_rule_sends_shapes_that_do_not_fit_elsewhere(precision, strip):
    """shape_fits: the fused kernel's shared memory for a shape against the block's limit; the library's plan and the
    search apply it (the launcher would refuse the shape with cudaErrorNotSupported)."""
    fam = get_family("kmeans")
    (v,) = spec_of(ABFT.replace("strip: 64", f"strip: {strip}").replace("precision: tf32", f"precision: {precision}")).variants
    fits, c_expr = fam.shape_fits(v)
    assert fits({"samples": 1 << 20, "dims": 32, "clusters": 128})
    assert not fits({"samples": 1 << 20, "dims": 32, "clusters": 1000})
    assert fits({"samples": 1 << 20, "dims": 29, "clusters": 300}) == (precision == "tf32")  # as measured on the H200
    assert "clusters" in c_expr and "dims" in c_expr and "<=" in c_expr
    (mma,) = spec_of(ABFT.replace("backend: fused, strip: 64, warps: 4", "m_tb: 64")).variants
    assert fam.shape_fits(mma) is None


@pytest.mark.compile
@pytest.mark.parametrize("precision, strip", [("tf32", 64), ("tf32x3", 128)])
def test_the_shared_memory_rule_is_the_launchers(tmp_path, precision, strip):
    """fused_smem_bytes (Python, and its C expression) against the template's fused_smem, compiled on the host."""
    from ftgen.families.kmeans.family import fused_smem_bytes

    (v,) = spec_of(ABFT.replace("strip: 64", f"strip: {strip}").replace("precision: tf32", f"precision: {precision}")).variants
    files, _ = render_spec(spec_of(ABFT.replace("strip: 64", f"strip: {strip}").replace("precision: tf32", f"precision: {precision}")))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    name = v.name
    grid = [(d, k) for d in (1, 3, 8, 9, 17, 24, 25, 32) for k in (1, 7, 64, 65, 128, 300, 1000)]
    expr = fused_smem_bytes(v, "dims", "clusters")
    main = tmp_path / "probe.cu"
    main.write_text(f'#include "{name}.cu"\n#include <cstdio>\nint main() {{\n'
                    + "".join(f"  {{ const long long dims = {d}, clusters = {k}; std::printf(\"%zu %lld\\n\", fused_smem({d}, {k}), {expr}); }}\n"
                              for d, k in grid) + "}\n")
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    exe = tmp_path / "probe"
    # (the device code to PTX only, no ptxas: the probe runs host code)
    p = subprocess.run([nvcc, "-std=c++17", "-arch=compute_90", "-I", str(tmp_path / name), "-I", str(tmp_path / "common"), "-o", str(exe),
                        str(main)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True).stdout.split("\n")
    assert len(out) > len(grid), out
    for (d, k), line in zip(grid, out):
        cpp, c_expr = (int(x) for x in line.split())
        assert cpp == fused_smem_bytes(v, d, k) == c_expr, (d, k, line)
