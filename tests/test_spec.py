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
        ("name: t\nfamily: nosuchfamily\n", "family", "is not a family"),
        ("name: t\nfamily: gemm\nprecision: tf32\nprotection: {scheme: abft}\n", "params", "the SIMT backend offers abft for fp32 and fp64"),
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
    # interval: auto resolved; references from the pre-pass (the threadblock level's default)
    assert "gemm_f32_abft-tb-detect-i512_128x128x16_w32x64_t8x8_s3_prepass_inj" in names
    assert all("-" not in v.symbol for v in s.variants)


@pytest.mark.parametrize(
    "family, arch, precision, extra, default, other",
    [
        ("gemm", "sm_90", "fp64", "", "simt", "cutlass"),
        ("attention", "sm_90a", "fp16", ", head_dim: 128", "mma", "wgmma"),
        ("kmeans", "sm_90a", "tf32", "", "mma", "cutlass90"),
    ],
)
def test_backend_names_any_backend_of_the_family_the_default_included(family, arch, precision, extra, default, other):
    body = f"name: t\nfamily: {family}\narch: [{arch}]\nprecision: {precision}\n"
    plain = load_spec_text(body + (f"params: {{{extra[2:]}}}\n" if extra else ""), "specs/x.yaml")
    named = load_spec_text(body + f"params: {{backend: {default}{extra}}}\n", "specs/x.yaml")
    # naming the default backend changes nothing: the same variants, the same names
    assert [v.name for v in named.variants] == [v.name for v in plain.variants]
    assert {v.backend for v in named.variants} == {default}
    # a list of backends searches over them (each point keeps only what its backend takes)
    both = load_spec_text(body + f"params: {{backend: [{default}, {other}]{extra}}}\n", "specs/x.yaml")
    assert {v.backend for v in both.variants} == {default, other}
    message = err(body + "params: {backend: nope}\n")
    assert "params.backend" in message and f"'nope' is not a backend of family {family} (its backends: " in message


def test_simt_threadblock_abft_takes_prepass_references_unless_the_spec_says_fused():
    tb = spec(base=BASE + "protection: {scheme: abft, level: threadblock}\n").variants[0]
    assert tb.get("ref_checksums") == "prepass" and tb.name.endswith("_prepass")
    fused = spec(base=BASE.replace("n_t: 8}", "n_t: 8, ref_checksums: fused}") + "protection: {scheme: abft}\n").variants[0]
    assert fused.get("ref_checksums") == "fused" and "prepass" not in fused.name
    warp = spec(base=BASE + "protection: {scheme: abft, level: warp}\n").variants[0]
    assert "prepass" not in warp.name


def test_interval_auto_is_the_backends_choice_and_a_number_overrides_it():
    auto = spec(base=BASE + "protection: {scheme: abft, level: threadblock}\n").variants[0]
    assert auto.protection.interval == 512 and "-i512_" in auto.name
    warp = spec(base=BASE + "protection: {scheme: abft, level: warp, interval: auto}\n").variants[0]
    assert warp.protection.interval == 64
    fixed = spec(base=BASE + "protection: {scheme: abft, level: threadblock, interval: 8}\n").variants[0]
    assert fixed.protection.interval == 8 and "-i8_" in fixed.name


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
    assert sorted(v.name for v in both.variants) == ["gemm_f32_abft-tb-i512_128x128x8_w32x64_t8x8_s3",
                                                     "gemm_f32_abft-tb-i512_128x128x8_w32x64_t8x8_s3_prepass"]


def test_concurrent_reference_checksums_are_cutlass_only():
    msg = err(BASE.replace("k_tb: 8", "k_tb: 8, ref_checksums: concurrent") + "protection: {scheme: abft, level: threadblock}\n")
    assert "ref_checksums: concurrent is a CUTLASS-backend design" in msg


# ---- hardening: each case of the hostile-input list gives a clear exit-2 message ---------------


def test_threshold_must_be_finite_and_positive():
    for bad in (".inf", "-.inf", ".nan", "-1e-3", "0", "1e400"):
        msg = err(BASE + f"protection: {{scheme: abft, level: threadblock, threshold: {bad}}}\n")
        assert "protection.threshold" in msg and ("finite" in msg or "positive" in msg), (bad, msg)


def test_integers_that_kernels_hold_in_32_bits():
    for bad in (2**31, 2**32 + 128, 2**63):
        msg = err(BASE + f"protection: {{scheme: abft, level: threadblock, interval: {bad}}}\n")
        assert "protection.interval" in msg and "32-bit" in msg
        msg = err(BASE.replace("m_tb: 128", f"m_tb: {bad}"))
        assert "params.m_tb" in msg and "32-bit" in msg
    assert spec("protection: {scheme: abft, level: threadblock, interval: 2}\n").variants


def test_name_is_full_matched_and_bounded():
    assert "not allowed" in err(BASE.replace("name: t", 'name: "abc\\n"'))
    assert "at most 64" in err(BASE.replace("name: t", "name: " + "a" * 300))
    assert spec(base=BASE.replace("name: t", "name: " + "a" * 64)).name == "a" * 64


def test_duplicate_keys_are_an_error():
    msg = err(BASE + "name: u\n")
    assert "duplicate key 'name'" in msg and "line" in msg
    msg = err(BASE.replace("m_t: 8", "m_t: 8, m_t: 16"))
    assert "duplicate key 'm_t'" in msg
    # a merge key may be overridden (that is what it is for)
    s = spec(base="name: t\nfamily: gemm\narch: [sm_90]\nparams:\n  <<: {m_tb: 128, n_tb: 64, k_tb: 8, m_w: 32, n_w: 64, m_t: 8, n_t: 8}\n  n_tb: 128\n")
    assert s.variants[0].get("n_tb") == 128


def test_space_is_bounded_before_expansion():
    import time

    lists = "{m_tb: [16,32,64,128,256,512], n_tb: [16,32,64,128,256,512], k_tb: [4,8,16,32], m_w: [8,16,32,64], n_w: [8,16,32,64], m_t: [1,2,4,8], n_t: [1,2,4,8], stages: [2,3,4,5,6], split_k: [1,2,4,8,16,32]}"
    t0 = time.monotonic()
    msg = err(f"name: t\nfamily: gemm\nparams: {lists}\n")  # 1.1 million points: refused from the list lengths
    assert time.monotonic() - t0 < 5
    assert "1105920 points" in msg and "--max-points" in msg
    # the bounds are parameters: a smaller one refuses a small space, and variants are bounded after constraints
    with pytest.raises(SpecError, match="--max-points"):
        load_spec_text(BASE.replace("m_t: 8", "m_t: [4, 8]"), "x.yaml", max_points=1)
    with pytest.raises(SpecError, match="--max-variants"):
        load_spec_text(BASE.replace("m_tb: 128", "m_tb: [32, 64, 128]"), "x.yaml", max_variants=2)


def test_alias_bomb_is_refused_before_expansion():
    import time

    lines = ["name: t", "family: gemm", "params:", "  a: &a [1,1,1,1,1,1,1,1,1]"]
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  {cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    t0 = time.monotonic()
    msg = err("\n".join(lines) + "\n")
    assert time.monotonic() - t0 < 5 and "aliases" in msg and len(msg) < 400
    # a few aliases are fine
    s = spec(base="name: t\nfamily: gemm\narch: [sm_90]\nshapes: [&s {m: 64, n: 64, k: 64}, {<<: *s, k: 128}]\n")
    assert s.shapes == [{"m": 64, "n": 64, "k": 64}, {"m": 64, "n": 64, "k": 128}]


def test_bad_values_are_cut_in_messages():
    msg = err(BASE.replace("name: t", "name: " + "X" * 1_000_00))
    assert len(msg) < 400
    many = ", ".join(f"k{i}: 1" for i in range(5000))
    msg = err(BASE.replace("m_t: 8", "m_t: 8, " + many))
    assert len(msg) < 8000 and "4980 more error(s)" in msg


def test_spec_that_is_not_a_regular_file(tmp_path):
    with pytest.raises(SpecError, match="is a device"):
        load_spec("/dev/null")
    import os

    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="is a FIFO"):
        load_spec(fifo)  # must not block on opening it
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "nope.yaml")


def test_long_shapes_option_is_a_clear_error():
    from ftgen import families

    fam = families.get("gemm")
    with pytest.raises(SpecError, match="--shapes"):
        parse_shapes(fam, "1x" * 200 + "1")
    with pytest.raises(SpecError, match="--shapes"):
        parse_shapes(fam, "a" * 300)
    assert parse_shapes(fam, "64x64x64,32x32x32") == [{"m": 64, "n": 64, "k": 64}, {"m": 32, "n": 32, "k": 32}]


def test_shapes_list_is_bounded():
    many = "shapes: [" + ", ".join(["{m: 8, n: 8, k: 8}"] * 300) + "]\n"
    assert "at most 256" in err(BASE + many)


def test_space_bound_counts_every_variants_group():
    two = BASE.replace("params: {", "variants:\n  - params: {m_t: [4, 8]}\n  - params: {m_t: [4, 8]}\nparams: {")
    assert len(load_spec_text(two, "x.yaml", max_points=4).rejected) >= 1
    with pytest.raises(SpecError, match="after 2 of earlier variants"):
        load_spec_text(two, "x.yaml", max_points=3)


def test_a_threshold_yaml_reads_as_text_says_how_to_write_it(tmp_path):
    from ftgen.cli import main

    spec = tmp_path / "t.yaml"
    spec.write_text("name: t\nfamily: gemm\nprotection: {scheme: abft, level: threadblock, threshold: 1e-30}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 2
    spec.write_text("name: t\nfamily: gemm\nprotection: {scheme: abft, level: threadblock, threshold: 1.0e-30}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0


@pytest.mark.parametrize("fields, field", [
    ("inject: true", "protection.inject"),
    ("level: threadblock", "protection.level"),
    ("interval: 5", "protection.interval"),
    ("threshold: 0.1", "protection.threshold"),
    ("correct: detect", "protection.correct"),
])
def test_protection_fields_do_not_apply_to_scheme_none(fields, field):
    msg = err(BASE + f"protection: {{scheme: none, {fields}}}\n")
    assert msg.startswith(f"specs/x.yaml: {field}: does not apply to scheme none") and "abft" in msg, msg


def test_scheme_none_takes_the_values_that_mean_unprotected_and_drops_a_base_scheme_s_fields():
    assert spec("protection: {scheme: none, level: none, inject: false}\n").variants[0].name.startswith("gemm_f32_none")
    # a scheme list: the fields apply to its protected points
    assert len(spec("protection: {scheme: [none, abft], level: threadblock, inject: true}\n").variants) == 2
    # a variant that sets scheme none does not inherit the base's protected fields
    s = spec("protection: {scheme: abft, level: threadblock, inject: true}\nvariants:\n  - {}\n"
             "  - protection: {scheme: none}\n")
    assert sorted(v.protection.scheme for v in s.variants) == ["abft", "none"]
    assert "protection.inject: does not apply" in err(BASE + "variants:\n  - protection: {scheme: none, inject: true}\n")


def test_a_value_listed_twice_and_a_repeated_shape_are_refused():
    assert "params.m_tb[1]: 64 is listed twice" in err(BASE.replace("m_tb: 128", "m_tb: [64, 64]"))
    assert "precision[1]: fp32 is listed twice" in err(BASE.replace("precision: fp32", "precision: [fp32, fp32]"))
    assert "arch[1]: sm_90 is listed twice" in err(BASE.replace("arch: [sm_90]", "arch: [sm_90, sm_90]"))
    assert "shapes[1]: 64x64x64 is the same shape as shapes[0]" in err(BASE + "shapes: [{m: 64, n: 64, k: 64}, {m: 64, n: 64, k: 64}]\n")


def test_a_name_yaml_reads_as_a_number_says_to_quote_it():
    assert "quote the name" in err(BASE.replace("name: t", "name: 123"))
    assert spec(base=BASE.replace("name: t", 'name: "123"')).name == "123"


def test_shipped_and_experiment_specs_load():
    from ftgen.paths import specs_dir

    paths = sorted(specs_dir().glob("*/*.yaml")) + sorted((specs_dir().parent / "experiments" / "specs").glob("*.yaml"))
    assert len(paths) > 50
    for p in paths:
        assert load_spec(p).variants, p


def test_shape_tokens_take_ascii_digits_only():
    from ftgen import families

    for fam in ("gemm", "attention"):
        with pytest.raises(SpecError, match="--shapes"):
            parse_shapes(families.get(fam), "\uff11\uff12\uff18x128x128")
