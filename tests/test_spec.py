"""Spec loading, validation messages (file, field path, value, what is allowed), expansion."""

from __future__ import annotations

import textwrap

import pytest

from ftgen.cli import main
from ftgen.errors import SpecError
from ftgen.spec import load_spec, load_spec_text, parse_shapes

BASE = """
name: t
family: gemm
arch: [sm_90]
precision: fp32
params: {m_tb: 128, n_tb: 128, k_tb: 8, m_w: 32, n_w: 64, m_t: 8, n_t: 8}
"""


def spec(extra: str = "", base: str = BASE):
    return load_spec_text(textwrap.dedent(base) + textwrap.dedent(extra), "specs/x.yaml")


def err(text: str) -> str:
    with pytest.raises(SpecError) as e:
        load_spec_text(textwrap.dedent(text), "specs/x.yaml")
    return e.value.message


def test_minimal_spec_expands_to_one_variant():
    s = spec()
    assert [v.name for v in s.variants] == ["gemm_f32_none_128x128x8_w32x64_t8x8_s3"]
    assert s.shapes[0] == {"m": 4096, "n": 4096, "k": 4096}  # family default shapes


def test_lists_expand_to_the_cartesian_product_and_constraints_give_reasons():
    assert "96 is not a power of two" in err(BASE.replace("m_tb: 128", "m_tb: [64, 128, 96]"))
    s = spec(base=BASE.replace("m_tb: 128", "m_tb: [64, 128]").replace("m_t: 8", "m_t: [8, 16]")
             .replace("precision: fp32", "precision: [fp32, fp64]"))
    names = {v.name for v in s.variants}
    assert "gemm_f32_none_64x128x8_w32x64_t8x8_s3" in names and "gemm_f64_none_128x128x8_w32x64_t8x8_s3" in names
    assert len(s.variants) == 4
    # 16x8 thread tiles leave 16 threads in a 32x64 warp tile: rejected with a reason, never dropped silently
    assert len(s.rejected) == 4 and all(r.reasons for r in s.rejected)
    assert all("not 32" in r.reasons[0] for r in s.rejected)


def test_protection_levels_sweep_in_one_spec():
    s = spec("protection: {scheme: abft, level: [none, thread, warp, threadblock], interval: 4}\n")
    tokens = sorted(s.family.protection_token(v.protection) for v in s.variants)
    assert tokens == ["abft-tb-i4", "abft-thread-i4", "abft-warp-i4", "none"]


@pytest.mark.parametrize(
    "text, where, what",
    [
        ("name: t\nfamily: gemm\nparams: {m_tb: [64, 128}\n", "specs/x.yaml: line", "not valid YAML"),
        ("name: t\nfamily: gemmm\n", "family", "did you mean 'gemm'"),
        ("name: t\nfamily: gemm\nprecison: fp32\n", "precison", "did you mean 'precision'"),
        ("name: t\nfamily: gemm\nprecision: fp128\n", "precision", "allowed for gemm"),
        ("name: t\nfamily: gemm\nparams: {m_tb: big}\n", "params.m_tb", "is not an integer"),
        ("name: t\nfamily: gemm\nparams: {m_tb: 96}\n", "params.m_tb", "not a power of two"),
        ("name: t\nfamily: gemm\nparams: {mtb: 64}\n", "params.mtb", "did you mean 'm_tb'"),
        ("name: t\nfamily: gemm\nparams: {m_tb: 64, m_w: 128}\n", "params", "is not a multiple of m_w=128"),
        ("name: t\nfamily: gemm\nshapes: [{m: -5, n: 4, k: 4}]\n", "shapes[0].m", "must be at least 1"),
        ("name: t\nfamily: gemm\nshapes: [{m: 5, n: 4}]\n", "shapes[0]", "missing shape key 'k'"),
        ("name: ../evil\nfamily: gemm\n", "name", "'..'"),
        ("family: gemm\n", "name", "missing"),
        ("name: t\nfamily: gemm\narch: [sm_70]\n", "arch", "not a supported arch"),
        ("name: t\nfamily: gemm\nprotection: {scheme: abft, level: diagonal}\n", "protection.level", "not a protection level"),
        ("name: t\nfamily: gemm\nprotection: {scheme: abft, interval: 0}\n", "protection.interval", "at least 1"),
        ("name: t\nfamily: gemm\nprotection: {scheme: abft, threshold: -1}\n", "protection.threshold", "must be positive"),
        ("name: t\nfamily: gemm\nprotection: {scheme: parity}\n", "protection.scheme", "not a scheme"),
        ("name: t\nfamily: kmeans\n", "family", "is not a family"),
        ("name: t\nfamily: gemm\nprecision: tf32\nprotection: {scheme: abft}\n", "params", "abft is implemented for the SIMT backend"),
        ("- just a list\n", "specs/x.yaml", "must be a YAML mapping"),
        ("name: t\nfamily: gemm\nparams: {ref_checksums: later}\n", "params.ref_checksums", "not one of fused, prepass"),
    ],
)
def test_bad_specs_name_the_field(text, where, what):
    msg = err(text)
    assert msg.startswith("specs/x.yaml")
    assert where in msg and what in msg, msg


def test_all_errors_reported_at_once():
    msg = err("name: t\nfamily: gemm\nprecision: fp128\nparams: {m_tb: 96, zzz: 1}\n")
    assert "precision" in msg and "params.m_tb" in msg and "params.zzz" in msg


def test_explicit_variants_list():
    s = spec(
        """
        variants:
          - params: {m_tb: 64}
          - {precision: fp64, params: {m_tb: 64, n_tb: 64, m_w: 32, n_w: 32, m_t: 4, n_t: 8}}
        """
    )
    assert [v.name for v in s.variants] == [
        "gemm_f32_none_64x128x8_w32x64_t8x8_s3",
        "gemm_f64_none_64x64x8_w32x32_t4x8_s3",
    ]


def test_names_encode_every_parameter_and_are_unique():
    s = spec(base=BASE.replace("k_tb: 8", "k_tb: [8, 16]") + "protection: {scheme: abft, level: threadblock, correct: [online, detect], inject: [false, true]}\n")
    names = [v.name for v in s.variants]
    assert len(names) == len(set(names)) == 8
    assert "gemm_f32_abft-tb-detect_128x128x16_w32x64_t8x8_s3_inj" in names
    assert all("-" not in v.symbol for v in s.variants)


def test_shapes_on_the_command_line(tmp_path):
    from ftgen import families

    fam = families.get("gemm")
    assert parse_shapes(fam, "4096x4096x4096,1000x1234x777") == [
        {"m": 4096, "n": 4096, "k": 4096},
        {"m": 1000, "n": 1234, "k": 777},
    ]
    for bad in ("4096x4096", "10x0x4", "axbxc", ""):
        with pytest.raises(SpecError):
            parse_shapes(fam, bad)
    f = tmp_path / "shapes.yaml"
    f.write_text("shapes: [{m: 1, n: 2, k: 3}]\n")
    assert parse_shapes(fam, str(f)) == [{"m": 1, "n": 2, "k": 3}]


def test_bad_spec_exits_2_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nfamily: gemm\nparams: {m_tb: 96}\n")
    out = tmp_path / "out"
    assert main(["generate", str(bad), "-o", str(out)]) == 2
    err_text = capsys.readouterr().err
    assert "params.m_tb" in err_text and "Traceback" not in err_text
    assert not out.exists()


def test_missing_spec_file_exits_2(tmp_path, capsys):
    assert main(["generate", str(tmp_path / "nope.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_shipped_specs_load():
    from ftgen.paths import specs_dir

    for p in sorted(specs_dir().glob("*/*.yaml")):
        s = load_spec(p)
        assert s.variants, p


def test_prepass_reference_checksums_name_only_threadblock_variants():
    s = spec(base=BASE.replace("k_tb: 8", "k_tb: 8, ref_checksums: prepass")
             + "protection: {scheme: abft, level: [none, threadblock, warp], interval: 4}\n")
    names = sorted(v.name for v in s.variants)
    assert names == ["gemm_f32_abft-tb-i4_128x128x8_w32x64_t8x8_s3_prepass", "gemm_f32_abft-warp-i4_128x128x8_w32x64_t8x8_s3",
                     "gemm_f32_none_128x128x8_w32x64_t8x8_s3"]
    both = spec(base=BASE.replace("k_tb: 8", "k_tb: 8, ref_checksums: [fused, prepass]")
                + "protection: {scheme: abft, level: threadblock}\n")
    assert sorted(v.name for v in both.variants) == ["gemm_f32_abft-tb_128x128x8_w32x64_t8x8_s3",
                                                     "gemm_f32_abft-tb_128x128x8_w32x64_t8x8_s3_prepass"]


def test_concurrent_reference_checksums_are_cutlass_only():
    msg = err(BASE.replace("k_tb: 8", "k_tb: 8, ref_checksums: concurrent") + "protection: {scheme: abft, level: threadblock}\n")
    assert "ref_checksums: concurrent is a CUTLASS-backend design" in msg
