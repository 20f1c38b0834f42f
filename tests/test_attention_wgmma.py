"""The attention family's wgmma backend without a GPU: selection by params backend, names, its constraints (sm_90a
only, no decoupled level, stages that fit shared memory), bad specs exit 2, and an nvcc compile of an snvr variant
with injection for sm_90a against the CUTLASS headers of the nvidia-cutlass wheel."""

from __future__ import annotations

import pytest
from conftest import compile_sm90a

from ftgen.cli import main
from ftgen.errors import SpecError
from ftgen.families.attention.wgmma import SMEM_LIMIT, WgmmaBackend, auto_stages, smem_bytes
from ftgen.spec import load_spec_text

HEAD = "name: t\nfamily: attention\narch: [sm_90a]\n"


def _variants(text: str):
    return load_spec_text(HEAD + text, "t.yaml").variants


def test_params_backend_selects_wgmma_and_the_name_says_so():
    vs = _variants("precision: [fp16, bf16]\nprotection: {scheme: [none, abft], level: snvr, inject: true}\n"
                   "params: {backend: wgmma, head_dim: [64, 128], causal: [false, true]}\n")
    names = sorted(v.name for v in vs)
    assert len(names) == 16 and all(v.backend == "wgmma" for v in vs)
    assert "attn_f16_none_wgmma_d128_nc_128x128_s5_pp" in names
    assert "attn_bf16_abft-snvr_wgmma_d128_c_128x128_s5_pp_inj" in names
    (v,) = _variants("params: {backend: wgmma, head_dim: 64, block_n: 64, stages: 3, schedule: lockstep}\n")
    assert v.name == "attn_f16_none_wgmma_d64_nc_128x64_s3_ls"


def test_the_schedule_reaches_the_kernel_and_its_twin(tmp_path):
    """schedule: pingpong / lockstep is the Config's last argument in the variant and in the bench's twin."""
    spec = tmp_path / "s.yaml"
    spec.write_text(HEAD + "protection: {scheme: abft, level: efta}\nparams: {backend: wgmma, schedule: [pingpong, lockstep]}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    for tag, flag in (("pp", "true"), ("ls", "false")):
        d = tmp_path / "g" / "t" / f"attn_f16_abft-efta_wgmma_d64_nc_128x128_s5_{tag}"
        variant = (d / f"{d.name}.cu").read_text()
        bench = next(d.glob("*bench*.cu")).read_text()
        assert f"ftattn::kLevelEfta, false, 5, {flag}, 2>" in variant
        assert f"kLevelNone, false, 5, {flag}, 2>" in bench


def test_block_m_192_is_three_consumer_warpgroups_in_the_kernel_and_its_twin(tmp_path):
    """block_m: 192 is the Config's consumer warpgroup count (3) in the variant and its bench twin; the name says 192."""
    spec = tmp_path / "s.yaml"
    spec.write_text(HEAD + "protection: {scheme: abft, level: efta}\nparams: {backend: wgmma, block_m: 192, block_n: 64}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    (d,) = (tmp_path / "g" / "t").glob("attn_*")
    assert d.name == "attn_f16_abft-efta_wgmma_d64_nc_192x64_s5_pp"
    assert "ftattn::kLevelEfta, false, 5, true, 3>" in (d / f"{d.name}.cu").read_text()
    assert "kLevelNone, false, 5, true, 3>" in next(d.glob("*bench*.cu")).read_text()
    assert smem_bytes(64, 64, 5, True, 192) == smem_bytes(64, 64, 5, True) + 64 * 64 * 2  # a third Q tile


def test_head_dim_256_takes_block_n_64_and_the_stages_that_fit():
    """head_dim 256 (block_n 64): its stages fit shared memory at every level, and the name says d256."""
    vs = _variants("protection: {scheme: [none, abft], level: [snvr, strided, efta]}\n"
                   "params: {backend: wgmma, head_dim: 256, block_n: 64}\n")
    names = sorted(v.name for v in vs)
    assert "attn_f16_abft-efta_wgmma_d256_nc_128x64_s3_pp" in names and "attn_f16_none_wgmma_d256_nc_128x64_s5_pp" in names
    assert "attn_f16_abft-strided_wgmma_d256_nc_128x64_s3_pp" in names
    for strided in (False, True):
        for row_sums in (False, True):
            assert smem_bytes(256, 64, auto_stages(256, 64, strided, 128, row_sums), strided, 128, row_sums) <= SMEM_LIMIT


def test_stages_auto_is_the_most_that_fit():
    assert auto_stages(128, 128, False) == 5 and auto_stages(128, 128, True) == 4  # the checksum stages leave room for four
    # efta's Vc stages carry 16 rows of ones more (its row sums), its K' stages 16 checksum rows: four stages at head_dim
    # 128, in the name too
    assert auto_stages(128, 128, True, 128, True) == 4 and auto_stages(64, 128, True, 128, True) == 5
    assert smem_bytes(128, 128, 3, True, 128, True) - smem_bytes(128, 128, 3, True) == 3 * 16 * 128 * 2
    assert smem_bytes(128, 128, 3, True) - smem_bytes(128, 128, 3, False) == 3 * (16 * 128 + 32 * 128) * 2
    (v,) = _variants("protection: {scheme: abft, level: efta}\nparams: {backend: wgmma, head_dim: 128}\n")
    assert v.name == "attn_f16_abft-efta_wgmma_d128_nc_128x128_s4_pp"
    for d in (64, 128):
        for bn in (64, 128):
            for strided in (False, True):
                n = auto_stages(d, bn, strided)
                assert smem_bytes(d, bn, n, strided) <= SMEM_LIMIT
                assert n == 5 or smem_bytes(d, bn, n + 1, strided) > SMEM_LIMIT


@pytest.mark.parametrize("body,message", [
    ("arch: [sm_90]\nparams: {backend: wgmma}", "builds for sm_90a only"),
    ("protection: {scheme: abft, level: decoupled}\nparams: {backend: wgmma}", "decoupled baseline runs on the mma backend"),
    ("params: {backend: wgmma, head_dim: 128, block_m: 192}", "block_m 192 with head_dim 128"),
    ("params: {backend: wgmma, head_dim: 256}", "head_dim 256 with block_n 128"),
    ("params: {head_dim: 256}", "head_dim 256: the mma backend takes 64, 128"),
])
def test_rejected_points_say_why(body, message):
    text = (HEAD.replace("arch: [sm_90a]\n", "") if body.startswith("arch") else HEAD) + body + "\n"
    with pytest.raises(SpecError) as e:
        load_spec_text(text, "t.yaml")
    assert message in str(e.value), str(e.value)


@pytest.mark.parametrize("body,message", [
    ("params: {backend: wgmma, block_n: 32}", "block_n 32: the wgmma backend takes 64, 128"),
    ("params: {backend: wgmma, stages: 7}", "params.stages: 7 is not one of 0, 2, 3, 4, 5"),
])
def test_bad_specs_exit_2_and_write_nothing(tmp_path, capsys, body, message):
    spec = tmp_path / "bad.yaml"
    spec.write_text(HEAD.replace("name: t", "name: bad") + body + "\n")
    out = tmp_path / "out"
    assert main(["generate", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (out / "bad").exists()


COMPILE_SPEC = HEAD + """\
variants:
  - {precision: bf16, protection: {scheme: abft, level: efta, inject: true}, params: {backend: wgmma, head_dim: 128, causal: true}}
"""


@pytest.mark.compile
def test_wgmma_variants_compile_for_sm90a(tmp_path):
    from ftgen.codegen.emit import generate

    spec = load_spec_text(COMPILE_SPEC, "c.yaml")
    out = generate(spec, tmp_path / "gen")
    for v in spec.variants:
        d = out.out_dir / v.name
        compile_sm90a(d / f"{v.name}.cu", [d, out.out_dir / "common"], tmp_path / f"{v.name}.o", options=WgmmaBackend.compile_options)


@pytest.mark.compile
def test_efta_at_head_dim_256_compiles_with_the_softmax_row_sums(tmp_path):
    """efta at head_dim 256 sums the rows in the softmax (no ones in Vc): three stages, its shared storage within a
    block's (the kernel's static_assert), the device code alone."""
    from ftgen.codegen.emit import generate

    spec = load_spec_text(HEAD + "precision: fp16\nprotection: {scheme: abft, level: efta, inject: true}\n"
                          "params: {backend: wgmma, head_dim: 256, block_n: 64}\n", "c.yaml")
    out = generate(spec, tmp_path / "gen")
    (v,) = spec.variants
    assert v.name == "attn_f16_abft-efta_wgmma_d256_nc_128x64_s3_pp_inj"
    d = out.out_dir / v.name
    compile_sm90a(d / f"{v.name}.cu", [d, out.out_dir / "common"], tmp_path / "v.cubin", device_only=True,
                  options=WgmmaBackend.compile_options)
