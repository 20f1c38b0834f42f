"""attention rows carry the decoupled baseline in `refs` (ftgen.families.attention.decoupled_ref).

Without a GPU: which variants it is timed beside and why not elsewhere, the baseline generated for a variant (its
precision, head dimension and mask; level decoupled, no injection; one project shared by the variants that have
it), and the driver's command line (bad input exits 2, a variant it is not timed beside gets one unavailable line).
Marked compile: both shared objects build for sm_90 and load. Marked gpu (skipped without a GPU or torch): `ftgen
bench` rows with the baseline timed alternately.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, gpu_attention_bench
from ftgen.bench import BenchOptions
from ftgen.codegen.emit import generate
from ftgen.families.attention import decoupled_ref, sdpa_ref
from ftgen.spec import load_spec_text

SPEC = textwrap.dedent(
    """
    name: dec_refs
    family: attention
    arch: [sm_90]
    variants:
      - {precision: fp16, protection: {scheme: none}, params: {head_dim: 64}}
      - {precision: fp16, protection: {scheme: abft, level: [efta, strided], inject: true}, params: {head_dim: 64}}
      - {precision: bf16, protection: {scheme: abft, level: efta}, params: {head_dim: 128, causal: true}}
      - {precision: fp16, protection: {scheme: abft, level: decoupled}, params: {head_dim: 64}}
    shapes:
      - {batch: 1, heads: 4, seq: 1024}
    """
)


@pytest.fixture
def project(tmp_path):
    out = generate(load_spec_text(SPEC, "dec_refs.yaml"), tmp_path / "gen").out_dir
    manifest = json.loads((out / "manifest.json").read_text())
    return out, manifest, manifest["variants"]


def test_timed_beside_protected_variants_other_than_the_baseline(project, monkeypatch):
    import ftgen.build

    _, _, variants = project
    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: True)
    monkeypatch.setattr(ftgen.build, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    ref = decoupled_ref.DecoupledRef()
    why = [ref.unavailable(v) for v in variants]
    assert "is unprotected" in why[0] and why[1] is None and why[2] is None and why[3] is None
    assert "the decoupled baseline itself" in why[4]
    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: m != "torch")
    assert "torch is not installed" in ref.unavailable(variants[1])
    assert "fp32" in ref.unavailable({**variants[1], "precision": "fp32"})


def test_the_baseline_has_the_variants_precision_head_dim_and_mask(project):
    out, manifest, variants = project
    dproj, dman, dentry = decoupled_ref.baseline_project(out, manifest, variants[3])  # bf16 efta d128 causal
    assert dproj == (out / "build" / "refs" / "decoupled" / "decoupled_bf16_d128_c").resolve()
    assert dentry["precision"] == "bf16" and dentry["backend"] == "mma"
    assert dentry["params"]["head_dim"] == 128 and dentry["params"]["causal"] is True
    prot = dentry["protection"]
    assert prot["level"] == "decoupled" and prot["correct"] == "online" and not prot.get("inject")
    assert dentry["archs"] == ["sm_90"] and len(dman["variants"]) == 1
    for rel in dentry["sources"]:
        assert (dproj / rel).is_file()


def test_variants_of_one_kind_share_one_baseline(project):
    """efta and strided (fp16, d64, injection built in) are timed against the same baseline, generated once."""
    out, manifest, variants = project
    a = decoupled_ref.baseline_project(out, manifest, variants[1])
    stamp = (a[0] / "manifest.json").stat().st_mtime_ns
    b = decoupled_ref.baseline_project(out, manifest, variants[2])
    assert a[0] == b[0] and a[2]["kernel"] == b[2]["kernel"] and "_inj" not in a[2]["kernel"]
    assert (b[0] / "manifest.json").stat().st_mtime_ns == stamp  # unchanged files are not rewritten
    assert sorted(p.name for p in (out / "build" / "refs" / "decoupled").iterdir() if p.is_dir()) == ["decoupled_fp16_d64_nc"]


def test_the_command_line_carries_the_bench_flags(project):
    out, _, variants = project
    opts = BenchOptions(reps=7, warmup=2, seed=9, dist="outliers")
    argv = decoupled_ref.DecoupledRef().command(out, variants[1], ["4x32x4096x4096"], opts)
    assert argv[:3] == [sys.executable, "-m", "ftgen.families.attention.decoupled_ref"]
    assert argv[3:] == [str(out), variants[1]["kernel"], "--shapes", "4x32x4096x4096", "--reps", "7", "--warmup", "2",
                        "--seed", "9", "--dist", "outliers"]


def driver(*args):
    return subprocess.run([sys.executable, "-m", decoupled_ref.DRIVER, *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args, says", [
    (["{out}", "nope", "--shapes", "1x4x1024"], "no variant 'nope'"),
    (["{out}", "{k}", "--shapes", "1x4"], "not an attention shape"),
    (["{out}", "{k}", "--shapes", "1x4x1024", "--reps", "0"], "--reps"),
    (["{out}", "{k}", "--shapes", "1x4x1024", "--dist", "cauchy"], "invalid choice"),
])
def test_driver_bad_input_exits_2_with_a_message(project, args, says):
    out, _, variants = project
    p = driver(*(a.format(out=out, k=variants[1]["kernel"]) for a in args))
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr and p.stdout == ""


def test_driver_says_why_it_cannot_time(project, monkeypatch, capsys):
    out, _, variants = project
    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: True)
    monkeypatch.setattr(sdpa_ref, "_reference", lambda: (None, "torch sees no CUDA GPU"))
    monkeypatch.setattr(decoupled_ref, "build_shared_objects", lambda *a: pytest.fail("nothing to build"))
    import ftgen.build

    monkeypatch.setattr(ftgen.build, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    assert decoupled_ref.main([str(out), variants[1]["kernel"], "--shapes", "1x4x1024"]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [
        {"ref": "decoupled", "unavailable": "torch sees no CUDA GPU"}]
    assert decoupled_ref.main([str(out), variants[0]["kernel"], "--shapes", "1x4x1024"]) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert "is unprotected" in line["unavailable"]


@pytest.mark.compile
def test_both_shared_objects_build_for_sm90_and_load(project):
    out, manifest, variants = project
    kernel_so, base_so = decoupled_ref.build_shared_objects(out, manifest, variants[1])
    kernel, base = sdpa_ref.Shim(kernel_so), sdpa_ref.Shim(base_so)
    for shim in (kernel, base):
        assert (shim.elem_bytes(), shim.is_bf16(), shim.head_dim(), shim.causal()) == (2, 0, 64, 0)
    assert kernel.default_seed() == base.default_seed()
    text = (base_so.parent / "ref_shim.cu").read_text()
    assert "v.decoupled = true;" in text and "v.inject = false;" in text


@pytest.mark.gpu
def test_bench_rows_carry_the_decoupled_baseline_on_a_gpu(tmp_path):
    """An efta variant (mma, fp16, d64) at a small shape: the baseline timed alternately, its output agreeing with
    the kernel's, and slower than the fused kernel (FTGEN_GPU_ARCH, default sm_90)."""
    why = decoupled_ref.DecoupledRef().unavailable({"kernel": "k", "precision": "fp16",
                                                    "protection": {"scheme": "abft", "level": "efta"}})
    if why:
        pytest.skip(why)
    rows = gpu_attention_bench(tmp_path, "attn_dec_gpu", """
        - {precision: fp16, protection: {scheme: abft, level: efta}, params: {head_dim: 64}}
    """, ["--reps", "10"], {"FTGEN_BENCH_REFS": "decoupled"})
    (row,) = rows
    assert "decoupled" in row["refs"], row.get("refs_missing")
    t = row["ref_timings"]["decoupled"]
    assert t["agreement"] >= sdpa_ref.AGREEMENT_FLOOR and t["alternated"] is True
    assert 0.7 < t["kernel_ms"] / row["ms"]["median"] < 1.4, (t["kernel_ms"], row["ms"])
    assert row["speedup_vs_refs"]["decoupled"] > 1.0  # three launches over an L x L matrix against one fused kernel
