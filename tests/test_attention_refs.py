"""attention rows carry `refs`: SDPA with the FLASH backend and with the cuDNN backend (ftgen.bench.refs,
ftgen.families.attention.sdpa_ref).

Without a GPU: the merge of the drivers' lines into the executable's rows (fake executables and fake drivers that
print recorded lines: both references, a backend that refuses a shape, outputs that disagree, a crash, a driver that
prints the other reference's lines too), the reasons said when SDPA cannot run (no torch, no nvcc, another type), the
family's registration, and the driver's command line (bad input exits 2 with a message). Marked compile: the driver's
shared object (the variant and the C shim around the attention bench adapter) builds for sm_90 and loads. Marked gpu
(skipped without a GPU or torch): the driver and `ftgen bench` on a real GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, RecordedDriver, fake_bench_executables, gpu_attention_bench
from ftgen.bench import BenchOptions, bench_project
from ftgen.bench import ctypes_driver
from ftgen.codegen.emit import generate
from ftgen.families.attention import AttentionFamily
from ftgen.families.attention import sdpa_ref
from ftgen.spec import load_spec_text

SPEC = textwrap.dedent(
    """
    name: refs_attn
    family: attention
    arch: [sm_90]
    variants:
      - {precision: fp16, protection: {scheme: none}, params: {head_dim: 64, causal: [false, true]}}
      - {precision: bf16, protection: {scheme: abft, level: efta}, params: {head_dim: 128}}
    shapes:
      - {batch: 4, heads: 32, seq: 4096}
      - {batch: 1, heads: 8, seq: 4097}
    """
)
BIG = {"batch": 4, "heads": 32, "seq": 4096, "seq_k": 4096}
ODD = {"batch": 1, "heads": 8, "seq": 4097, "seq_k": 4097}


def row(kernel: str, shape: dict, ms: float) -> dict:
    """A timed row as the attention executable prints it (its fields):
    no in-process vendor reference."""
    return {"kernel": kernel, "family": "attention", "precision": "fp16", "backend": "mma", "shape": shape,
            "dist": "normal", "max_rel_err": 0.0446711, "tolerance": 1,
            "ms": {"median": ms, "min": ms, "max": ms, "reps": 10}, "tflops": 160.11, "gflops": 160110, "ok": True}


@pytest.fixture
def project(tmp_path):
    """The generated project (manifest and sources) with fake executables that print recorded rows."""
    out = generate(load_spec_text(SPEC, "refs_attn.yaml"), tmp_path / "gen").out_dir
    manifest = json.loads((out / "manifest.json").read_text())
    fake_bench_executables(out, manifest["variants"], lambda i, k: [row(k, BIG, 3.43362 + i), row(k, ODD, 0.3 + i)])
    return out, manifest["variants"]


class FakeDriver(RecordedDriver, sdpa_ref.SdpaRef):
    """One SDPA reference with every check passed and its driver replaced by a recorded script (RecordedDriver)."""

    def __init__(self, name: str, tmp: Path, lines, code: int = 0, stderr: str = ""):
        super().__init__(name)
        self.record(tmp / name, lines, code, stderr)


def family_with(*refs):
    class Fam(AttentionFamily):
        bench_refs = refs

    return Fam()


def sdpa_line(name: str, shape: dict, ms: float, kernel_ms: float, **more) -> dict:
    """A driver line (times of a standalone SDPA run on an H200, fields of sdpa_ref.time_shape)."""
    return {"ref": name, "shape": shape, "ms": ms, "min": ms, "max": ms, "reps": 10, "kernel_ms": kernel_ms,
            "kernel_min": kernel_ms, "kernel_max": kernel_ms, "alternated": True, "alternated_with": ["kernel", name],
            "backend": f"SDPBackend.{sdpa_ref.BACKENDS[name]}", "agreement": 1.0, "max_abs_diff": 0.000977,
            "v_max": 4.9, "bound": 0.049, **more}


def test_rows_carry_both_references(project, tmp_path):
    out, variants = project
    flash = FakeDriver("sdpa-flash", tmp_path, [sdpa_line("sdpa-flash", BIG, 1.88843, 3.44),
                                                 sdpa_line("sdpa-flash", ODD, 0.21, 0.31)])
    cudnn = FakeDriver("sdpa-cudnn", tmp_path, [sdpa_line("sdpa-cudnn", BIG, 1.21555, 3.42),
                                                 sdpa_line("sdpa-cudnn", ODD, 0.15, 0.30)])
    logs: list[str] = []
    big, odd = bench_project(out, variants[:1], family_with(flash, cudnn), BenchOptions(reps=10, seed=5),
                             log=logs.append)
    assert big["refs"] == {"sdpa-flash": 1.88843, "sdpa-cudnn": 1.21555}
    # each ratio is of its own pairing: the kernel time its driver measured beside it, not the executable's
    assert big["speedup_vs_refs"] == {"sdpa-flash": pytest.approx(1.88843 / 3.44), "sdpa-cudnn": pytest.approx(1.21555 / 3.42)}
    assert big["ref_timings"]["sdpa-cudnn"]["kernel_ms"] == 3.42 and "refs_missing" not in big
    assert odd["refs"] == {"sdpa-flash": 0.21, "sdpa-cudnn": 0.15} and list(big)[-1] == "ok" and big["ok"] is True
    for drv, name in ((flash, "sdpa-flash"), (cudnn, "sdpa-cudnn")):
        (call,) = drv.calls()  # one driver run per variant and reference, for the shapes the executable timed
        assert call["argv"][:2] == [str(out), variants[0]["kernel"]]
        assert call["argv"][2:] == ["--shapes", "4x32x4096x4096,1x8x4097x4097", "--refs", name, "--reps", "10",
                                    "--seed", "5"]
        assert any(f"{name} timed alternately with" in m and "at 2 of 2" in m for m in logs)


def test_a_backend_that_refuses_a_shape_is_missing_there_only(project, tmp_path):
    out, variants = project
    refused = {"ref": "sdpa-cudnn", "shape": ODD,
               "unavailable": "SDPA's CUDNN_ATTENTION backend refuses this shape: No available kernel. Aborting execution."}
    flash = FakeDriver("sdpa-flash", tmp_path, [sdpa_line("sdpa-flash", BIG, 1.88843, 3.44),
                                                 sdpa_line("sdpa-flash", ODD, 0.21, 0.31)])
    cudnn = FakeDriver("sdpa-cudnn", tmp_path, [sdpa_line("sdpa-cudnn", BIG, 1.21555, 3.42), refused])
    big, odd = bench_project(out, variants[:1], family_with(flash, cudnn), BenchOptions(), log=lambda m: None)
    assert set(big["refs"]) == {"sdpa-flash", "sdpa-cudnn"} and "refs_missing" not in big
    assert odd["refs"] == {"sdpa-flash": 0.21}
    assert odd["refs_missing"] == {"sdpa-cudnn": refused["unavailable"]} and "sdpa-cudnn" not in odd["speedup_vs_refs"]
    assert "sdpa-cudnn" not in odd.get("ref_timings", {})  # the refusal line has no detail to keep


def test_outputs_that_disagree_keep_their_detail_but_give_no_number(project, tmp_path):
    out, variants = project
    bad = sdpa_line("sdpa-flash", BIG, 1.88843, 3.44, agreement=0.5, max_abs_diff=2.5,
                    unavailable="SDPA's output (FLASH_ATTENTION) agrees with the kernel's on 0.5000 of 33554432 elements")
    flash = FakeDriver("sdpa-flash", tmp_path, [bad, sdpa_line("sdpa-flash", ODD, float("nan"), 0.31)])
    big, odd = bench_project(out, variants[:1], family_with(flash), BenchOptions(), log=lambda m: None)
    assert "sdpa-flash" not in big["refs"] and "0.5000" in big["refs_missing"]["sdpa-flash"]
    assert big["ref_timings"]["sdpa-flash"]["max_abs_diff"] == 2.5
    assert "sdpa-flash" not in odd["refs"] and "no valid time" in odd["refs_missing"]["sdpa-flash"]


def test_each_reference_takes_only_its_own_lines(project, tmp_path):
    """The driver run without --refs prints both references' lines; a reference's run merges its own only."""
    out, variants = project
    both = [sdpa_line("sdpa-flash", BIG, 1.88843, 3.44), sdpa_line("sdpa-cudnn", BIG, 1.21555, 3.44),
            sdpa_line("sdpa-cudnn", ODD, 0.15, 0.30)]
    flash = FakeDriver("sdpa-flash", tmp_path, both)
    big, odd = bench_project(out, variants[:1], family_with(flash), BenchOptions(), log=lambda m: None)
    assert big["refs"] == {"sdpa-flash": 1.88843}
    assert odd["refs"] == {} and "sdpa-flash" in odd["refs_missing"]


def test_a_crashed_driver_is_a_reason_not_a_failure(project, tmp_path):
    out, variants = project
    flash = FakeDriver("sdpa-flash", tmp_path, ["Segmentation fault"], code=139, stderr="an illegal memory access\n")
    cudnn = FakeDriver("sdpa-cudnn", tmp_path, [{"ref": "sdpa-cudnn", "unavailable": "torch sees no CUDA GPU"}])
    rows = bench_project(out, variants[:1], family_with(flash, cudnn), BenchOptions(), log=lambda m: None)
    for r in rows:
        assert "exit code 139" in r["refs_missing"]["sdpa-flash"] and "illegal memory access" in r["refs_missing"]["sdpa-flash"]
        assert r["refs_missing"]["sdpa-cudnn"] == "torch sees no CUDA GPU"
        assert r["refs"] == {} and r["ok"] is True  # a reference that fails is not the kernel's failure


def test_the_family_registers_both_references_and_the_decoupled_baseline():
    from ftgen.families.attention.decoupled_ref import DecoupledRef

    refs = AttentionFamily().bench_refs
    assert [r.name for r in refs] == ["sdpa-flash", "sdpa-cudnn", "decoupled"]
    assert all(isinstance(r, sdpa_ref.SdpaRef) for r in refs[:2]) and isinstance(refs[2], DecoupledRef)


def test_without_torch_rows_say_why(project, monkeypatch):
    """The family as registered: without torch neither driver runs, and each reference is missing with the reason."""
    out, variants = project
    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: m != "torch")
    monkeypatch.setattr(sdpa_ref.SdpaRef, "command", lambda *a: pytest.fail("the driver must not run"))
    logs: list[str] = []
    rows = bench_project(out, variants, AttentionFamily(), BenchOptions(), log=logs.append)
    assert len(rows) == 6
    for r in rows:
        assert r["refs"] == {} and r["speedup_vs_refs"] == {} and "ref_timings" not in r
        assert set(r["refs_missing"]) == {"sdpa-flash", "sdpa-cudnn", "decoupled"}
        assert all("torch is not installed" in r["refs_missing"][n] for n in ("sdpa-flash", "sdpa-cudnn"))
    # the decoupled baseline is timed beside protected variants only (two unprotected, then efta)
    assert "is unprotected" in rows[0]["refs_missing"]["decoupled"]
    assert "torch is not installed" in rows[4]["refs_missing"]["decoupled"]
    for name in ("sdpa-flash", "sdpa-cudnn"):
        assert len([m for m in logs if f"{name} not timed" in m]) == 1  # said once per run


def test_without_nvcc_or_with_another_type_there_is_a_reason(monkeypatch):
    import ftgen.build

    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: True)
    ref = sdpa_ref.SdpaRef("sdpa-cudnn")
    monkeypatch.setattr(ftgen.build, "find_nvcc", lambda: None)
    assert "nvcc not found" in ref.unavailable({"kernel": "k", "precision": "fp16"})
    monkeypatch.setattr(ftgen.build, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    assert ref.unavailable({"kernel": "k", "precision": "bf16"}) is None
    assert "fp16 and bf16" in ref.unavailable({"kernel": "k", "precision": "fp32"})


def test_no_ref_and_inject_run_no_driver(project, tmp_path):
    out, variants = project
    flash = FakeDriver("sdpa-flash", tmp_path, [sdpa_line("sdpa-flash", BIG, 1.88843, 3.44)])
    rows = bench_project(out, variants[:1], family_with(flash), BenchOptions(no_ref=True), log=lambda m: None)
    assert all("refs" not in r for r in rows)
    rows = bench_project(out, variants[:1], family_with(flash), BenchOptions(inject=1), log=lambda m: None)
    assert all("--inject" in r["refs_missing"]["sdpa-flash"] for r in rows) and not flash.calls()
    assert not hasattr(flash, "prepared")  # nothing built for drivers that do not run


def test_the_drivers_shared_objects_are_built_first_once_a_variant(project, tmp_path):
    """Before the executables run, each variant's shared object is built once (both SDPA references load the same
    one), in parallel; the drivers then find it built."""
    out, variants = project
    flash = FakeDriver("sdpa-flash", tmp_path, [sdpa_line("sdpa-flash", BIG, 1.88843, 3.44)])
    cudnn = FakeDriver("sdpa-cudnn", tmp_path, [sdpa_line("sdpa-cudnn", BIG, 1.21555, 3.42)])
    logs: list[str] = []
    bench_project(out, variants, family_with(flash, cudnn), BenchOptions(reps=10, seed=5), log=logs.append)
    assert sorted(flash.prepared) == sorted(v["kernel"] for v in variants) and not hasattr(cudnn, "prepared")
    built = [i for i, m in enumerate(logs) if "building the references' shared objects of 3 variant(s)" in m]
    timed = [i for i, m in enumerate(logs) if "timed alternately" in m]
    assert built and timed and built[0] < timed[0]


def test_refusal_names_torchs_error_and_its_warnings():
    class W:
        def __init__(self, text):
            self.message = text

    caught = [W("Flash attention requires q,k,v to have the same last dimension"),
              W("Flash attention requires q,k,v to have the same last dimension"), W("  cuDNN\nrefused  ")]
    why = sdpa_ref.refusal(RuntimeError("No available kernel. Aborting execution.\ntraceback detail"), caught)
    assert why == ("No available kernel. Aborting execution. (Flash attention requires q,k,v to have the same last "
                   "dimension; cuDNN refused)")
    assert sdpa_ref.refusal(RuntimeError(""), []) == "RuntimeError"


def test_agreement_counts_elements_within_the_bound():
    torch = pytest.importorskip("torch")
    want = torch.zeros((2, 1, 4, 8), dtype=torch.float16)
    v = torch.full((2, 1, 4, 8), 2.0, dtype=torch.float16)
    got = want.clone()
    got[0, 0, 0, :4] = 0.5  # beyond 1e-2 * 2
    got[1, 0, 0, 0] = float("nan")
    a = sdpa_ref.agreement(torch, got, want, v, 1e-2)
    assert a["checked_elements"] == 64 and a["agreement"] == pytest.approx(59 / 64)
    assert a["bound"] == pytest.approx(0.02) and a["max_abs_diff"] == float("inf")


# ---- the driver's command line ----------------------------------------------------------------------------------------


def driver(*args):
    return subprocess.run([sys.executable, "-m", "ftgen.families.attention.sdpa_ref", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, says", [
    (["{tmp}/nope", "k", "--shapes", "4x32x4096"], "no such directory"),
    (["{out}", "nope", "--shapes", "4x32x4096"], "no variant 'nope'"),
    (["{out}", "{k}", "--shapes", "4x32"], "not an attention shape"),
    (["{out}", "{k}", "--shapes", "4x32x0"], "seq"),
    (["{out}", "{k}", "--shapes", "4x32x4096", "--reps", "0"], "--reps"),
    (["{out}", "{k}", "--shapes", "4x32x4096", "--warmup", "-1"], "--warmup"),
    (["{out}", "{k}", "--shapes", "4x32x4096", "--seed", "-1"], "--seed"),
    (["{out}", "{k}", "--shapes", "4x32x4096", "--refs", "sdpa-xla"], "no reference 'sdpa-xla'"),
    (["{out}", "{k}", "--shapes", "4x32x4096", "--refs", ","], "name at least one"),
    (["{out}", "{k}", "--shapes", "4x32x4096", "--dist", "cauchy"], "invalid choice"),
    (["{out}", "{k}"], "--shapes"),
])
def test_driver_bad_input_exits_2_with_a_message(project, tmp_path, args, says):
    out, variants = project
    p = driver(*(a.format(tmp=tmp_path, out=out, k=variants[0]["kernel"]) for a in args))
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr and p.stdout == ""


def test_driver_refuses_a_project_of_another_family(tmp_path):
    gemm = generate(load_spec_text("name: g\nfamily: gemm\nprecision: fp32\n", "g.yaml"), tmp_path).out_dir
    kernel = json.loads((gemm / "manifest.json").read_text())["variants"][0]["kernel"]
    p = driver(gemm, kernel, "--shapes", "4x32x4096")
    assert p.returncode == 2 and "attention projects" in p.stderr and "Traceback" not in p.stderr


def test_driver_says_why_it_cannot_time(project, monkeypatch, capsys):
    out, variants = project
    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: m != "torch")
    assert sdpa_ref.main([str(out), variants[0]["kernel"], "--shapes", "1x8x4097"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    why = "torch is not installed (scaled_dot_product_attention is torch's)"
    assert lines == [{"ref": "sdpa-flash", "unavailable": why}, {"ref": "sdpa-cudnn", "unavailable": why}]
    assert sdpa_ref.main([str(out), variants[0]["kernel"], "--shapes", "1x8x4097", "--refs", "sdpa-cudnn"]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [{"ref": "sdpa-cudnn", "unavailable": why}]


def test_driver_without_a_gpu_says_so(project, monkeypatch, capsys):
    """torch present but without a GPU (as `_reference` reports it): one unavailable line per reference, exit 0."""
    import ftgen.build

    out, variants = project
    monkeypatch.setattr(sdpa_ref, "_importable", lambda m: True)
    monkeypatch.setattr(sdpa_ref, "_reference", lambda: (None, "torch sees no CUDA GPU"))
    monkeypatch.setattr(sdpa_ref, "build_shared_object", lambda *a: pytest.fail("nothing to build without a GPU"))
    monkeypatch.setattr(ftgen.build, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")  # not run on this path
    assert sdpa_ref.main([str(out), variants[1]["kernel"], "--shapes", "4x32x4096"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [{"ref": n, "unavailable": "torch sees no CUDA GPU"} for n in ("sdpa-flash", "sdpa-cudnn")]


def test_driver_command_carries_the_bench_flags(project):
    out, variants = project
    opts = BenchOptions(reps=7, warmup=2, seed=9, dist="uniform")
    argv = sdpa_ref.SdpaRef("sdpa-cudnn").command(out, variants[0], ["4x32x4096x4096", "1x8x4097x4097"], opts)
    assert argv[:3] == [sys.executable, "-m", "ftgen.families.attention.sdpa_ref"]
    assert argv[3:] == [str(out), variants[0]["kernel"], "--shapes", "4x32x4096x4096,1x8x4097x4097", "--refs",
                        "sdpa-cudnn", "--reps", "7", "--warmup", "2", "--seed", "9", "--dist", "uniform"]
    with pytest.raises(ValueError, match="sdpa-xla"):
        sdpa_ref.SdpaRef("sdpa-xla")


# ---- the shared object (nvcc, no GPU) ------------------------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("which, bf16, head_dim, causal", [(1, 0, 64, 1), (2, 1, 128, 0)])
def test_the_shared_object_builds_for_sm90_loads_and_is_reused(project, which, bf16, head_dim, causal):
    out, variants = project
    manifest = json.loads((out / "manifest.json").read_text())
    entry = variants[which]  # fp16 causal d64 unprotected; bf16 efta d128
    assert ctypes_driver.built_archs(out, manifest, entry) == ["90"]
    so = sdpa_ref.build_shared_object(out, manifest, entry)
    shim = sdpa_ref.Shim(so)  # binds every ftgen_ref_* function: a missing one fails here
    assert (shim.elem_bytes(), shim.is_bf16(), shim.head_dim(), shim.causal()) == (2, bf16, head_dim, causal)
    assert shim.default_reps() >= 1 and shim.default_warmup() >= 0
    assert [shim.dist(n) for n in (b"normal", b"uniform", b"loguniform", b"outliers", b"cauchy")] == [0, 1, 2, 3, -1]
    before = so.stat().st_mtime_ns
    assert sdpa_ref.build_shared_object(out, manifest, entry) == so and so.stat().st_mtime_ns == before
    text = (so.parent / "ref_shim.cu").read_text()
    assert "ftgen_attention_bench.h" in text and f"return {entry['kernel'].replace('-', '_')}(p, stream);" in text


# ---- on a GPU -----------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_driver_and_bench_on_a_gpu(tmp_path):
    """Two variants of the demo spec at small shapes: the driver's lines, its kernel time beside the executable's, and
    `ftgen bench` rows with both references where the backend takes the shape (FTGEN_GPU_ARCH, default sm_90)."""
    why = sdpa_ref.SdpaRef("sdpa-flash").unavailable({"kernel": "k", "precision": "fp16"})
    if why:
        pytest.skip(why)
    rows = gpu_attention_bench(tmp_path, "attn_refs_gpu", """
        - {precision: fp16, protection: {scheme: none}, params: {head_dim: 64, causal: [false, true]}}
    """, ["--shapes", "2x8x1024", "--reps", "20"])
    assert len(rows) == 2
    for r in rows:
        assert "sdpa-flash" in r["refs"], r.get("refs_missing")
        for name, t in r["ref_timings"].items():
            if name not in r["refs"]:
                continue
            assert t["agreement"] >= sdpa_ref.AGREEMENT_FLOOR and t["alternated"] is True
            # the driver times the executable's own timed unit on its data: the same time within clock noise
            assert 0.7 < t["kernel_ms"] / r["ms"]["median"] < 1.4, (t["kernel_ms"], r["ms"])
            assert r["speedup_vs_refs"][name] == pytest.approx(t["ms"] / t["kernel_ms"])
