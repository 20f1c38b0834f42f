"""gemm CUTLASS backend and TMR: names, constraints, validation (exit 2), emission through
cutlass_library, golden sources, and nvcc compiles of every TMR level for sm_80 and sm_90."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import REPO, golden_dir_check, without_copied_headers
from ftgen.cli import main
from ftgen.codegen.emit import generate, render_spec
from ftgen.families.gemm import cutlass as gc
from ftgen.families.gemm import tmr_model as tm
from ftgen.families import get as get_family
from ftgen.families.base import Protection, Variant
from ftgen.families.gemm import abft_model as am
from ftgen.families.gemm.abft_model import abft_encode, abft_gemm_model, abft_threshold_unit, abft_verify_rows
from ftgen.paths import cutlass_include_dir
from ftgen.spec import load_spec_text

FAMILY = get_family("gemm")
CUT = FAMILY.backend_named("cutlass")


def variant(precision="tf32", level=None, interval=1, inject=False, arch=("sm_90",), **params) -> Variant:
    prot = Protection("tmr", level, "online", interval, "auto", inject) if level else Protection()
    defs = CUT.param_defs(precision, prot)
    p = {d.name: d.default[0] for d in defs}
    p.update(params)
    v = Variant("gemm", precision, prot, tuple((d.name, p[d.name]) for d in defs), tuple(arch), "cutlass")
    return Variant(v.family, v.precision, v.protection, v.params, v.arch, v.backend, CUT.kernel_name(v))


def spec_text(body: str, name: str = "t") -> str:
    return f"name: {name}\nfamily: gemm\narch: [sm_90]\n" + textwrap.dedent(body)


def run_cli(tmp_path, body, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(spec_text(body))
    rc = main(["generate", str(f), "-o", str(tmp_path / "gen")])
    return rc, capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------------------------


def test_name_of_the_default_kernel_level_variant():
    assert variant(level="kernel").name == "gemm_tf32_tmr-kernel_cutlass_128x128x32_w64x64x32_i16x8x8_s3_a4_sw8_rr"


def test_names_encode_level_interval_layouts_teams_and_injection():
    assert variant(level="threadblock", interval=4, tb_m=128, tb_n=64, warp_m=32, warp_n=32).name == (
        "gemm_tf32_tmr-tb-i4_cutlass_128x64x32_w32x32x32_i16x8x8_s3_a4_sw8_rr"
    )
    assert variant(level="multikernel", interval=32, inject=True).name.startswith("gemm_tf32_tmr-multikernel-i32_cutlass_")
    assert variant(level="multikernel", interval=32, inject=True).name.endswith("_inj")
    assert variant(level="cooperative", coop_teams=20).name.endswith("_rr_teams20")
    assert "_teams" not in variant(level="cooperative").name
    assert variant(layout_a="col", layout_b="row").name.endswith("_cr")
    assert variant("fp16").name == "gemm_f16_none_cutlass_128x128x32_w64x64x32_i16x8x16_s3_a8_sw8_rr"
    assert variant("fp64").name == "gemm_f64_none_cutlass_64x64x16_w32x32x16_i8x8x4_s3_a1_sw8_rr"
    assert variant("fp64", inst_m=16).name == "gemm_f64_none_cutlass_64x64x16_w32x32x16_i16x8x4_s3_a1_sw8_rr"


def test_every_parameter_changes_the_name():
    base = variant(level="cooperative")
    alternatives = {
        "tb_m": 256, "tb_n": 256, "tb_k": 16, "warp_m": 32, "warp_n": 32, "warp_k": 16, "inst_m": 8, "inst_n": 16,
        "inst_k": 4, "stages": 4, "align": 2, "swizzle": 4, "layout_a": "col", "layout_b": "col", "coop_teams": 7,
    }
    # ref_checksums, abft_cols: abft only (below); backend: one choice, it only selects this backend
    assert set(alternatives) | {"ref_checksums", "abft_cols", "backend"} == {p.name for p in gc.PARAMS}
    names = {base.name}
    for k, val in alternatives.items():
        names.add(variant(level="cooperative", **{k: val}).name)
    assert len(names) == len(alternatives) + 1
    # fp64 abft: the strip width is in the name, and refused elsewhere
    prot = Protection("abft", "threadblock", "online", 1024, "auto", False)

    def f64_abft(cols):
        p = {d.name: d.default[0] for d in CUT.param_defs("fp64", prot)} | {"abft_cols": cols}
        v = Variant("gemm", "fp64", prot, tuple(p.items()), ("sm_90",), "cutlass")
        assert CUT.constraints(v) == []
        return CUT.kernel_name(v)

    f64 = {c: f64_abft(c) for c in (32, 64, 128)}
    assert len(set(f64.values())) == 3 and f64[32].endswith("_conc_cs32")
    assert any("abft_cols applies to fp64 and tf32x3 abft only" in r for r in CUT.constraints(variant(abft_cols=32)))
    # tf32x3 concurrent: 0 is the widest calibrated strip that fits the tiles; the name says the strip where it is not
    # the warp column; a strip is whole warp columns dividing tb_n
    p3 = {d.name: d.default[0] for d in CUT.param_defs("tf32x3", prot)} | {"ref_checksums": "concurrent"}

    def f32_abft(**kw):
        return Variant("gemm", "tf32x3", prot, tuple((p3 | kw).items()), ("sm_90",), "cutlass")

    assert p3["abft_cols"] == 0 and (p3["tb_n"], p3["warp_n"]) == (128, 64)
    assert gc.abft_strip_cols(f32_abft()) == 128 and gc.abft_strip_cols(f32_abft(warp_n=32, tb_n=64)) == 64
    assert gc.abft_strip_cols(f32_abft(warp_n=32, abft_cols=32)) == 32 and gc.abft_strip_unit(f32_abft()) == 0.6 * 2.0**-24
    t3 = {c: CUT.kernel_name(f32_abft(warp_n=32, abft_cols=c)) for c in (0, 32, 64, 128)}
    assert t3[0] == t3[128] and t3[32].endswith("_conc") and t3[64].endswith("_conc_cs64") and t3[128].endswith("_conc_cs128")
    assert all(CUT.constraints(f32_abft(warp_n=32, abft_cols=c)) == [] for c in (0, 32, 64, 128))
    assert any("whole warp columns of warp_n=64" in r for r in CUT.constraints(f32_abft(abft_cols=32)))
    assert any("divides tb_n=128" in r for r in CUT.constraints(f32_abft(warp_n=32, abft_cols=256)))
    assert any("the strips of ref_checksums: concurrent" in r for r in CUT.constraints(f32_abft(ref_checksums="prepass", abft_cols=128)))


# ---------------------------------------------------------------------------------------------
# constraints and validation
# ---------------------------------------------------------------------------------------------


def reasons(**kw):
    precision = kw.pop("precision", "tf32")
    level = kw.pop("level", None)
    interval = kw.pop("interval", 1)
    return " | ".join(CUT.constraints(variant(precision, level, interval, **kw)))


def test_default_parameters_fit_every_precision_and_level():
    for precision in gc.PRECISIONS:
        for level in (None,) + gc.TMR_LEVELS:
            assert reasons(precision=precision, level=level) == "", (precision, level)


@pytest.mark.parametrize(
    "kw, expect",
    [
        ({"inst_k": 16}, "not a tf32 tensor-core MMA"),
        ({"precision": "fp64", "inst_m": 16, "inst_k": 8}, "not a fp64 tensor-core MMA"),
        ({"tb_m": 64, "warp_m": 128}, "tb_m=64 is not a multiple of warp_m=128"),
        ({"warp_k": 16}, "must equal tb_k"),
        ({"tb_k": 8, "warp_k": 8}, "even number >= 2"),
        ({"align": 8}, "cp.async moves 32 to 128 bits"),
        ({"precision": "fp16", "align": 1}, "cp.async moves 32 to 128 bits"),
        ({"stages": 8, "tb_m": 256}, "bytes of shared memory"),
        ({"stages": 2}, "needs at least 3 stages"),
        ({"level": "threadblock", "tb_m": 128, "tb_n": 128, "warp_m": 64, "warp_n": 64}, "three accumulator sets"),
        ({"level": "kernel", "interval": 4}, "interval does not apply to tmr kernel"),
        ({"coop_teams": 3}, "coop_teams applies to tmr cooperative only"),
        ({"level": "cooperative", "coop_teams": 500}, "co-resident threadblocks"),
        ({"tb_m": 256, "tb_n": 256}, "do not fit one SM's"),
        ({"tb_m": 64, "tb_n": 64, "tb_k": 64, "warp_m": 32, "warp_n": 32, "warp_k": 64}, "at most 128 bytes along k"),
    ],
)
def test_constraint_reasons(kw, expect):
    assert expect in reasons(**kw)


def test_protection_reasons():
    assert "precision tf32" in CUT.protection_ok("fp32", Protection("tmr", "kernel"))
    assert "correct: detect does not apply" in CUT.protection_ok("tf32", Protection("tmr", "kernel", "detect"))
    assert "exact (bitwise) equality" in CUT.protection_ok("tf32", Protection("tmr", "kernel", threshold=1e-3))
    assert CUT.protection_ok("bf16", Protection("tmr", "cooperative", interval=8)) is None
    assert CUT.protection_ok("fp64", Protection()) is None


@pytest.mark.parametrize(
    "body, message",
    [
        ("precision: tf32\nprotection: {scheme: tmr, level: cooperative, interval: 0}\n", "protection.interval: 0 must be at least 1"),
        ("precision: tf32\nprotection: {scheme: tmr, level: turbo}\n", "'turbo' is not a protection level"),
        ("precision: tf32\nprotection: {scheme: tmr, level: cooperative}\nparams: {coop_teams: 400}\n", "coop_teams=400 needs 1200 co-resident"),
        ("precision: tf32\nprotection: {scheme: tmr, level: warp}\n", "is not a tmr level"),
        ("precision: fp32\nprotection: {scheme: tmr, level: kernel}\n", "precision tf32"),
        ("precision: tf32\nprotection: {scheme: tmr, level: kernel}\nparams: {layout_a: diagonal}\n", "params.layout_a: 'diagonal' is not one of row, col"),
        ("precision: tf32\nprotection: {scheme: tmr, level: kernel}\nparams: {tb_mm: 64}\n", "did you mean 'tb_m'"),
        ("precision: tf32x3\nprotection: {scheme: tmr, level: kernel}\n", "tmr is not implemented for tf32x3"),
        ("precision: tf32\nprotection: {scheme: abft, level: threadblock}\n", "implemented for tf32x3 and fp64 (level threadblock), not tf32"),
        ("precision: tf32x3\nprotection: {scheme: abft, level: warp}\n", "level threadblock only"),
        ("precision: tf32x3\nprotection: {scheme: abft, level: threadblock, interval: 0}\n", "must be at least 1"),
        ("precision: tf32x3\nprotection: {scheme: abft, level: threadblock, threshold: -1}\n", "threshold"),
    ],
)
def test_bad_specs_exit_2_with_a_clear_message(tmp_path, capsys, body, message):
    rc, err = run_cli(tmp_path, body, capsys)
    assert rc == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "gen" / "t").exists()


def test_shipped_specs_load_without_rejections():
    files = sorted((REPO / "specs" / "gemm").glob("tmr_*.yaml")) + sorted((REPO / "specs" / "gemm").glob("cutlass_*.yaml"))
    assert len(files) >= 5
    levels = set()
    for f in files:
        s = load_spec_text(f.read_text(), str(f))
        assert not s.rejected, (f, s.rejected)
        assert all(v.backend == "cutlass" for v in s.variants)
        levels |= {v.protection.level for v in s.variants if v.protection.enabled}
    assert levels == set(gc.TMR_LEVELS)


# ---------------------------------------------------------------------------------------------
# tolerance
# ---------------------------------------------------------------------------------------------


def test_tolerance_is_the_delivered_precision_rule():
    from ftgen import tolerance as rule

    k = 4096
    for prec in ("tf32", "tf32x3", "fp16", "bf16", "fp64"):
        assert gc.tolerance(prec, k) == rule.tolerance(prec, k)
    # tf32x3 is held to fp32-level error, tf32 to its own; 16-bit outputs add one rounding of the output
    assert gc.tolerance("tf32x3", k) == rule.tolerance("fp32", k) < gc.tolerance_fp32("tf32", k) / 50
    assert gc.tolerance("fp16", k) - gc.tolerance("tf32x3", k) == pytest.approx(2.0**-11)
    # against unrounded inputs tf32 adds 2u + u^2
    assert gc.tolerance_fp32("tf32", k) - gc.tolerance("tf32", k) == pytest.approx(2 * 2.0**-11 + 2.0**-22)
    assert gc.tolerance("fp64", k) < 1e-11
    assert gc.tolerance("tf32", 777) < gc.tolerance("tf32", 4096) < 1e-2
    # one k-tile of 32 products missing from a sum of 4096 normal products is far outside the fp32-level rule
    assert (32**0.5) / (0.6366 * 4096) > 100 * gc.tolerance("tf32x3", 4096)


# ---------------------------------------------------------------------------------------------
# emission
# ---------------------------------------------------------------------------------------------

GOLDEN = spec_text(
    """
    variants:
      - {precision: tf32, protection: {scheme: tmr, level: kernel, inject: true},
         params: {tb_m: 64, tb_n: 64, tb_k: 16, warp_m: 32, warp_n: 32, warp_k: 16, align: 4}}
      - {precision: fp16, protection: {scheme: tmr, level: threadblock, interval: 2},
         params: {tb_m: 64, tb_n: 64, tb_k: 32, warp_m: 32, warp_n: 32, warp_k: 32, inst_k: 16, align: 8, layout_b: col}}
    shapes: [{m: 100, n: 70, k: 33}]
    """,
    "golden_cutlass",
)


def test_golden_sources():
    files, _ = render_spec(load_spec_text(GOLDEN, "golden_cutlass.yaml"))
    texts = {rel.replace("/", "__"): text for rel, text in without_copied_headers(files).items()
             if rel.endswith((".cu", ".h", ".cuh", "CMakeLists.txt"))}
    assert len(texts) == 7 and "common/cutlass_tmr.cuh" in files  # per variant .h, .cu, _bench.cu; the TMR header once
    golden_dir_check(REPO / "tests" / "golden" / "gemm_cutlass", texts)


def test_emission_goes_through_cutlass_library_and_is_deterministic():
    a, _ = render_spec(load_spec_text(GOLDEN, "g.yaml"))
    b, _ = render_spec(load_spec_text(GOLDEN, "g.yaml"))
    assert a == b
    cu = next(t for p, t in a.items() if p.endswith("_inj.cu"))
    assert "(cutlass_library)" in cu and "using OpMain = cutlass::gemm::device::Gemm<" in cu
    assert "using OpFallback = cutlass::gemm::device::Gemm<" in cu  # align 4: a scalar-store fallback for any N
    assert "cutlass::arch::OpClassTensorOp" in cu and "cutlass::gemm::GemmShape<16, 8, 8>" in cu
    cmake = a["CMakeLists.txt"]
    assert "${FTGEN_CUTLASS_INCLUDE}" in cmake and "FTGEN_CUTLASS_INCLUDE" in cmake.split("add_library")[0]


def test_injection_code_only_in_inject_builds():
    files, _ = render_spec(load_spec_text(GOLDEN, "g.yaml"))
    plain, _ = render_spec(load_spec_text(GOLDEN.replace("inject: true", "inject: false"), "g.yaml"))
    inj = next(t for p, t in files.items() if p.endswith("_inj.cu"))
    clean = next(t for p, t in plain.items() if p.endswith(".cu") and "tmr-kernel" in p and "bench" not in p)
    assert "#define FTGEN_TMR_INJECT 1" in inj and "#define FTGEN_TMR_INJECT 0" in clean
    header = (REPO / "templates" / "gemm" / "cutlass_tmr.cuh").read_text()
    body = header.split("#if FTGEN_TMR_INJECT\n", 1)[1].split("#endif  // FTGEN_TMR_INJECT", 1)[0]
    assert "CUTLASS_DEVICE void apply_fault(" in body and "ftgen::apply_fault" in body
    outside = header.replace(body, "")
    assert "ftgen::apply_fault" not in outside  # the fault primitive is only reachable in inject builds
    # the threadblock ABFT kernel reaches it only through apply_fault<K>, under `if constexpr (kInject)`
    abft = (REPO / "templates" / "gemm" / "cutlass_abft.cuh").read_text()
    assert "ftgen::apply_fault" not in abft
    lines = abft.splitlines()
    calls = [i for i, line in enumerate(lines) if "apply_fault<K>(" in line]
    assert calls and all(any("if constexpr (kInject)" in lines[j] for j in range(max(0, i - 3), i)) for i in calls)
    # ... and its fault records (the concurrent design's errors worked out before the GEMM) through planned_record,
    # defined in the inject section too
    assert "CUTLASS_DEVICE ftgen::FaultRecord planned_record(ftgen::FaultSpec const& f, long long row, long long col, double partial) {" in body
    calls = [i for i, line in enumerate(lines) if "planned_record<" in line]
    assert calls and all("if constexpr (kInject)" in lines[i] for i in calls)


def test_constants_shared_by_python_and_cuda_agree():
    header = (REPO / "templates" / "gemm" / "cutlass_tmr.cuh").read_text()
    assert f"constexpr int kMaxAttempts = {tm.MAX_ATTEMPTS};" in header
    # the vote table of the device code (ftgen_rules.h) is the model's (status numbers)
    rules = (REPO / "templates" / "common" / "ftgen_rules.h").read_text()
    for name, value in (("kAgree", tm.AGREE), ("kMinority0", tm.MINORITY_0), ("kMinority1", tm.MINORITY_1),
                        ("kMinority2", tm.MINORITY_2), ("kUncorrectable", tm.UNCORRECTABLE)):
        assert re.search(rf"\b{name} = {value}\b", rules), name
    # the cooperative level's digest is the model's (fnv_digest)
    b = tm.FNV_BASIS
    assert f"uint32_t h[4] = {{{b}u, {b}u ^ 1u, {b}u ^ 2u, {b}u ^ 3u}};" in header
    assert f"h[i % 4] = (h[i % 4] ^ w[i]) * {tm.FNV_PRIME}u;" in header


# ---------------------------------------------------------------------------------------------
# compile: one variant per TMR level, sm_80 and sm_90 (library TU; one bench TU)
# ---------------------------------------------------------------------------------------------

COMPILE_SPEC = spec_text(
    """
    precision: tf32
    params: {tb_m: 64, tb_n: 64, tb_k: 16, warp_m: 32, warp_n: 32, warp_k: 16, stages: 3, align: 1}
    variants:
      - {protection: {scheme: tmr, level: kernel, inject: true}}
      - {protection: {scheme: tmr, level: threadblock, interval: 2, inject: true}}
      - {protection: {scheme: tmr, level: multikernel, interval: 2, inject: true}}
      - {protection: {scheme: tmr, level: cooperative, interval: 2}}
      - {protection: {scheme: tmr, level: kernel}}
      - {precision: tf32x3, protection: {scheme: abft, level: threadblock, interval: 2, inject: true}}
      - {precision: tf32x3, protection: {scheme: abft, level: threadblock, interval: 2, inject: true}, params: {tb_m: 64, tb_n: 64, tb_k: 16, warp_m: 32, warp_n: 32, warp_k: 16, stages: 3, align: 1, ref_checksums: prepass}}
      - {precision: tf32x3, protection: {scheme: abft, level: threadblock, interval: 1024, inject: true}, params: {tb_m: 64, tb_n: 64, tb_k: 16, warp_m: 32, warp_n: 32, warp_k: 16, stages: 3, align: 1, ref_checksums: concurrent}}
    shapes: [{m: 100, n: 70, k: 33}]
    """,
    "compile_cutlass",
).replace("arch: [sm_90]", "arch: [sm_80, sm_90]")

# How each translation unit is compiled: (archs, full). Full: nvcc -c, host and device code, all archs in one run -- one
# full build per precision (the kernel level's inject build, the checkpointed tf32x3 ABFT) and the bench TU. The others:
# device code only (-cubin, one nvcc run per arch), as ptxas' report and the SASS are all their tests read (nvcc's
# device pass still parses and instantiates their host code). The tf32x3 ABFT builds for sm_90, the arch of the shipped
# ABFT specs: their test reads which kernels were compiled, not per arch.
COMPILE_MODES = {
    "kernel": (("sm_80", "sm_90"), True), "threadblock": (("sm_80", "sm_90"), False),
    "multikernel": (("sm_80", "sm_90"), False), "cooperative": (("sm_80", "sm_90"), False),
    "kernel-plain": (("sm_80", "sm_90"), False), "bench": (("sm_90",), True),
    "abft": (("sm_90",), True), "abft-prepass": (("sm_90",), False), "abft-conc": (("sm_90",), False),
}


def _nvcc():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else None)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Compile the library TUs of every level (and one bench TU) in parallel, as COMPILE_MODES says;
    {level: (ok, log, [object or cubin per nvcc run])}."""
    nvcc, inc = _nvcc(), cutlass_include_dir()
    if nvcc is None:
        pytest.skip("nvcc not found")
    if inc is None or not (Path(inc) / "cutlass" / "cutlass.h").is_file():
        pytest.skip("CUTLASS headers not found (pip install nvidia-cutlass)")
    out = tmp_path_factory.mktemp("cutlass_compile")
    spec = load_spec_text(COMPILE_SPEC, "compile_cutlass.yaml")
    g = generate(spec, out)
    units = {}
    for v in spec.variants:
        d = g.out_dir / v.name
        key = f"{v.protection.level}-plain" if v.protection.level == "kernel" and not v.protection.inject else v.protection.level
        if v.protection.scheme == "abft":
            key = "abft-prepass" if v.name.endswith("_prepass_inj") else "abft-conc" if "_conc" in v.name else "abft"
        units[key] = (d / f"{v.name}.cu", d)
    first = spec.variants[0]
    units["bench"] = (g.out_dir / first.name / f"{first.name}_bench.cu", g.out_dir / first.name)
    assert set(units) == set(COMPILE_MODES)
    runs = []  # (key, source, include dir, -c or -cubin, output, archs): one per nvcc run
    for key, (src, d) in units.items():
        archs, full = COMPILE_MODES[key]
        if full:
            runs.append((key, src, d, "-c", out / f"{key}.o", archs))
        else:
            runs += [(key, src, d, "-cubin", out / f"{key}.{a}.cubin", (a,)) for a in archs]

    def build(run):
        _, src, d, mode, obj, archs = run
        gencode = [x for a in archs for x in ("-gencode", f"arch=compute_{a[3:]},code={a}")]
        cmd = [nvcc, "-std=c++17", "-O3", "--expt-relaxed-constexpr", *gencode, f"-I{d}", f"-I{g.out_dir / 'common'}",
               f"-I{inc}", "-Xptxas", "-v", mode, str(src), "-o", str(obj)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        return p.returncode == 0, p.stdout + p.stderr, obj

    with ThreadPoolExecutor(max_workers=4) as ex:
        done = list(ex.map(build, runs))
    results = {}
    for (key, *_), (ok, log, obj) in zip(runs, done):
        was_ok, was_log, objs = results.get(key, (True, "", []))
        results[key] = (was_ok and ok, was_log + log, objs + [obj])
    return results


KERNEL_OF_LEVEL = {"kernel": "copy_kernel", "threadblock": "tb_kernel", "multikernel": "copy_kernel", "cooperative": "coop_kernel",
                   "kernel-plain": "cutlass_copy_kernel"}


def _ptxas_entries(log: str) -> dict[str, list[str]]:
    """Mangled kernel name -> ptxas lines about it."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)' for '(sm_\d+)'", line)
        if m:
            cur = f"{m.group(1)}@{m.group(2)}"
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return out


@pytest.mark.compile
@pytest.mark.parametrize("level", [*gc.TMR_LEVELS, "kernel-plain"])
def test_every_level_compiles_for_sm80_and_sm90_without_spills(compiled, level):
    ok, log, _ = compiled[level]
    assert ok, log[-4000:]
    entries = _ptxas_entries(log)
    mine = {k: v for k, v in entries.items() if KERNEL_OF_LEVEL[level] in k}
    assert {k.split("@")[1] for k in mine} == {"sm_80", "sm_90"}
    for k, lines in mine.items():
        text = " ".join(lines)
        assert "0 bytes spill stores, 0 bytes spill loads" in text, (k, text)
    # no static shared memory in any TMR kernel: it would sit before the dynamic memory and shift
    # CUTLASS's swizzled tiles off their alignment (2x the L2 sectors, 1.35x the time of the cooperative level)
    for k, lines in entries.items():
        if "ftgen_tmr" in k:
            assert not re.search(r"\d+ bytes smem", " ".join(lines)), (k, lines)


@pytest.mark.compile
def test_bench_compiles(compiled):
    ok, log, _ = compiled["bench"]
    assert ok, log[-4000:]


@pytest.mark.compile
def test_threadblock_level_runs_three_copies_of_the_tensor_core_mmas(compiled):
    """The three accumulator sets are three MMA streams: the compiler did not merge the copies."""
    cuobjdump = shutil.which("cuobjdump") or ("/usr/local/cuda/bin/cuobjdump" if Path("/usr/local/cuda/bin/cuobjdump").is_file() else None)
    if cuobjdump is None:
        pytest.skip("cuobjdump not found")
    ok, _, objs = compiled["threadblock"]
    assert ok
    sass = "".join(subprocess.run([cuobjdump, "-sass", str(o)], capture_output=True, text=True, timeout=300).stdout for o in objs)
    funcs = re.split(r"\n\s+Function : ", sass)
    tb = [f for f in funcs if "tb_kernel" in f.split("\n", 1)[0]]
    assert len(tb) == 2  # sm_80 and sm_90
    # warp tile 32x32x16 of 16x8x8 instructions: 2 x 4 x 2 = 16 MMAs per copy per k-iteration
    for f in tb:
        assert len(re.findall(r"\bHMMA\.1688\.F32\.TF32\b", f)) == 3 * 16


@pytest.mark.compile
def test_tf32x3_threadblock_abft_compiles(compiled):
    ok, log, _ = compiled["abft"]
    assert ok, log[-4000:]
    entries = _ptxas_entries(log)
    assert any("abft_kernel" in k for k in entries) and any("abft_enc_kernel" in k for k in entries)
    ok, log, _ = compiled["abft-prepass"]
    assert ok, log[-4000:]
    entries = _ptxas_entries(log)
    assert any("abft_kernel" in k for k in entries) and any("abft_ref_kernel" in k for k in entries)
    # ref_checksums: concurrent: the GEMM storing its sums (abft_once_kernel), the pre-pass, the check kernel after both
    ok, log, _ = compiled["abft-conc"]
    assert ok, log[-4000:]
    entries = _ptxas_entries(log)
    assert any("abft_check_kernel" in k for k in entries) and any("abft_once_kernel" in k for k in entries)
    assert any("abft_ref_kernel" in k for k in entries)


@pytest.mark.compile
def test_fp64_threadblock_abft_compiles_without_spills(tmp_path):
    """fp64 ABFT on Hopper's DMMA (inject build, row-major and column-major): the unprotected GEMM, the encodings, the
    reference GEMM, pass 1, the rare path and the recomputation, for sm_90, no spills; the bit-for-bit recheck of the
    band's suspects (the variant's mainloop on gathered rows of A) in the row-major build only (CUTLASS gathers rows of a
    row-major A). The row-major build is compiled in full (host and device code), the column-major one device code only
    (-cubin: ptxas' report is what it is checked by)."""
    nvcc, inc = _nvcc(), cutlass_include_dir()
    if nvcc is None or inc is None or not (Path(inc) / "cutlass" / "cutlass.h").is_file():
        pytest.skip("nvcc or the CUTLASS headers not found")
    spec = load_spec_text(spec_text("""
        precision: fp64
        params: {backend: cutlass, inst_m: 16, tb_m: 64, tb_n: 64, tb_k: 16, warp_m: 32, warp_n: 32, warp_k: 16, stages: 3}
        protection: {scheme: abft, level: threadblock, inject: true}
        variants:
          - {params: {layout_a: row, layout_b: row}}
          - {params: {layout_a: col, layout_b: col, abft_cols: 32}}
        """), "f64abft.yaml")
    g = generate(spec, tmp_path)

    def build(v, full):
        d = g.out_dir / v.name
        cmd = [nvcc, "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG", "-gencode", "arch=compute_90,code=sm_90",
               f"-I{d}", f"-I{g.out_dir / 'common'}", f"-I{inc}", "-Xptxas", "-v", "-c" if full else "-cubin",
               str(d / f"{v.name}.cu"), "-o", str(tmp_path / f"{v.name}.{'o' if full else 'cubin'}")]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        return p.returncode == 0, p.stdout + p.stderr

    with ThreadPoolExecutor(max_workers=2) as ex:
        for ok, log, row in zip(*zip(*ex.map(build, spec.variants, (True, False))), (True, False)):
            assert ok, log[-4000:]
            entries = _ptxas_entries(log)
            for kernel in ("abft64_enc_kernel", "abft64_check_kernel", "abft64_rare_kernel", "abft64_redo_kernel",
                           "abft64_apply_kernel", "abft_fault_error_kernel"):
                assert any(kernel in k for k in entries), kernel
            assert any("abft64_recheck_kernel" in k for k in entries) == row
            for k, lines in entries.items():
                assert "0 bytes spill stores, 0 bytes spill loads" in " ".join(lines), (k, lines)


# ---------------------------------------------------------------------------------------------
# tf32x3 and threadblock ABFT on the tensor cores
# ---------------------------------------------------------------------------------------------


def test_tf32x3_names_tolerance_and_protection():
    v = variant(precision="tf32x3", warp_n=32)
    assert v.name.startswith("gemm_tf32x3_none_cutlass_128x128x32_w64x32x32_")
    # fp32 data on the tensor cores is held to fp32-level error (the delivered-precision rule)
    assert gc.tolerance("tf32x3", 4096) == pytest.approx(2.0**-24 * (3.2998 * 64 + 16), rel=1e-3)
    assert CUT.protection_ok("tf32x3", Protection("abft", "threadblock")) is None
    assert "level threadblock only" in CUT.protection_ok("tf32x3", Protection("abft", "warp"))
    assert "implemented for tf32x3" in CUT.protection_ok("tf32", Protection("abft", "threadblock"))
    assert "not implemented for tf32x3" in CUT.protection_ok("tf32x3", Protection("tmr", "kernel"))
    base = variant(precision="tf32x3", warp_n=32)
    a = Variant("gemm", "tf32x3", Protection("abft", "threadblock", "online", 8, "auto", True), base.params, base.arch, "cutlass")
    assert "_abft-tb-i8_cutlass_" in CUT.kernel_name(a) and CUT.kernel_name(a).endswith("_inj")
    assert CUT.constraints(a) == []
    pre = Variant(a.family, a.precision, a.protection, tuple((k, "prepass" if k == "ref_checksums" else x) for k, x in a.params),
                  a.arch, "cutlass")
    assert CUT.kernel_name(pre) == CUT.kernel_name(a).replace("_rr_inj", "_rr_prepass_inj") and CUT.constraints(pre) == []
    conc = Variant(a.family, a.precision, a.protection, tuple((k, "concurrent" if k == "ref_checksums" else x) for k, x in a.params),
                   a.arch, "cutlass")
    # (its strips: the widest calibrated that fits, here the 128-column tile)
    assert CUT.kernel_name(conc) == CUT.kernel_name(a).replace("_rr_inj", "_rr_conc_cs128_inj") and CUT.constraints(conc) == []
    assert gc.abft_prepass(conc) and gc.abft_concurrent(conc) and not gc.abft_concurrent(pre)
    for ref in ("prepass", "concurrent"):
        tmr = variant(level="kernel", ref_checksums=ref)
        assert any(f"ref_checksums: {ref} applies to abft only" in r for r in CUT.constraints(tmr))


def test_tf32x3_abft_constants_are_the_models():

    # the kernel's threshold unit is the CPU model's (gemm.abft_threshold_unit) for tf32x3 at the SIMT lambda
    assert gc.ABFT_LAMBDA * gc.ABFT_UNIT == pytest.approx(abft_threshold_unit("tf32x3", 0, 0) / 1.0)
    header = (REPO / "templates" / "gemm" / "cutlass_abft.cuh").read_text()
    # lambda u (sqrt(k done) + sqrt(strip width) + 1): at a checkpoint (abft_kernel, the tile's tb_n) and after the whole
    # k (abft_once_kernel, abft_check_kernel: the strip's columns, tb_n or ref_checksums: concurrent's warp_n)
    assert "p.unit * (sqrtf(float(k_done)) + sqrt_cols + 1.f)" in header
    assert "p.unit * (sqrtf(float(Kd)) + sqrtf(float(St::kCols)) + 1.f)" in header
    # the location rule of gemm.abft_classify, on d and dw in double (as the model computes them)
    rules = (REPO / "templates" / "common" / "ftgen_rules.h").read_text()  # (abft_locate, the kernels' call)
    assert "fabs(dd) > 2.0 * tau_w" in rules and "fabs(ddw - jq * dd) <= double(tau_w)" in rules


@pytest.mark.parametrize("fault", [(3, 5, 17, "bitflip", 29), (0, 40, 0, "offset", 5.0), (7, 63, 63, "bitflip", 30)])
def test_cpu_model_of_the_tf32x3_threadblock_level_corrects(fault):
    import numpy as np


    rng = np.random.default_rng(3)
    A = rng.standard_normal((64, 256)).astype(np.float32)
    B = rng.standard_normal((256, 64)).astype(np.float32)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    C, c = abft_gemm_model(A, B, cols=64, kt=32, interval=2, precision="tf32x3", faults=[fault])
    assert c["detected"] >= 1 and c["corrected"] >= 1
    assert np.max(np.abs(C - ref)) < 1e-3
    clean, c0 = abft_gemm_model(A, B, cols=64, kt=32, interval=2, precision="tf32x3")
    assert c0["detected"] == 0 and c0["max_score"] < 1.0


# ---------------------------------------------------------------------------------------------
# ref_checksums: prepass (the reference rows of every checkpoint from a pre-pass)
# ---------------------------------------------------------------------------------------------


def test_prepass_checkpoints_follow_the_main_kernels_k_iterations():
    # k = 100, k-tiles of 32: the residue (4) first, then 32 each; a checkpoint every `interval` k-iterations
    assert am.abft_checkpoints(100, 32, 1) == [4, 36, 68, 100]
    assert am.abft_checkpoints(100, 32, 2) == [36, 100]
    assert am.abft_checkpoints(100, 32, 16) == [100]
    assert am.abft_checkpoints(96, 32, 2) == [64, 96]


def test_prepass_refs_are_the_sums_up_to_each_checkpoint():
    import numpy as np


    rng = np.random.default_rng(3)
    A = rng.standard_normal((37, 100)).astype(np.float32)
    B = rng.standard_normal((100, 200)).astype(np.float32)
    be, bw, _ = abft_encode(B.astype(np.float64), 128)
    for interval in (1, 2, 3):
        refs = am.abft_checkpoint_refs(A, be, bw, kt=32, interval=interval)
        ks = am.abft_checkpoints(100, 32, interval)
        assert refs.shape == (len(ks), 37, 2, 2)
        for c, kc in enumerate(ks):
            exact = A[:, :kc].astype(np.float64) @ np.stack([be[:kc], bw[:kc]], axis=-1).reshape(kc, -1)
            scale = np.abs(A[:, :kc]).astype(np.float64) @ np.abs(np.stack([be[:kc], bw[:kc]], axis=-1).reshape(kc, -1))
            assert np.all(np.abs(refs[c].reshape(37, -1) - exact) <= 1e-6 * scale + 1e-30)


@pytest.mark.parametrize("interval", [1, 3, 8, 16, 17, 24, 32, 64, 128, 1000])
def test_tensor_core_prepass_sub_chunks_end_at_every_checkpoint(interval):
    # the scan of the tensor-core pre-pass writes checkpoint c where a sub-chunk ends: those k extents must be the
    # main kernel's checkpoints (gc.abft_checkpoints), each written once, in order
    for k in (32, 64, 96, 1024, 4064, 4096, 8192):
        sub, per, subs = am.abft_ref_subchunks(k, 32, interval)
        assert sub % 32 == 0 and sub <= 16 * 32
        chunks = len(am.abft_checkpoints(k, 32, interval))
        ends = [(min(u // per, chunks - 1), min((u + 1) * sub, k)) for u in range(subs) if u == subs - 1 or (u + 1) % per == 0]
        assert [c for c, _ in ends] == list(range(chunks)), (k, interval)
        assert [e for _, e in ends] == am.abft_checkpoints(k, 32, interval), (k, interval)
    assert am.abft_ref_subchunks(777, 32, 16) is None  # a residue iteration: the SIMT pre-pass


def test_prepass_filter_leaves_rows_beyond_the_cap_to_the_full_rule():
    import numpy as np


    rng = np.random.default_rng(3)
    cols, k = 128, 512
    for big in (2e17, 1e19, 3e38):  # a term above the cap; squares that overflow fp32
        row = rng.standard_normal(cols) * big
        r, rw = row.sum(), (row * np.arange(1, cols + 1)).sum()  # exact references: the full rule passes the row
        full, _ = abft_verify_rows(row[None, :], np.array([r]), np.array([rw]), np.array([0.0]), k, "tf32x3")
        assert full == []
        assert not am.abft_prepass_filter(row, r, rw, k)  # pass 1 does not decide it: the rare path does
    row = rng.standard_normal(cols) * 1e16  # below the cap, finite squares: decided by pass 1
    assert am.abft_prepass_filter(row, row.sum(), (row * np.arange(1, cols + 1)).sum(), k)


@pytest.mark.parametrize("dist", ["normal", "loguniform"])
def test_prepass_filter_passes_only_rows_the_full_rule_passes(dist):
    import numpy as np


    rng = np.random.default_rng(11)
    m, k, cols = 64, 512, 128

    def draw(shape):
        if dist == "normal":
            return rng.standard_normal(shape)
        return rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-3, 3, shape)

    passed_clean = flagged_faulty = 0
    for trial in range(6):
        A, B = draw((m, k)).astype(np.float32), draw((k, cols)).astype(np.float32)
        C = (A @ B).astype(np.float32)  # fp32 rounding: the clean residuals
        be, bw, b2 = abft_encode(B.astype(np.float64), cols)
        A64 = A.astype(np.float64)
        r, rw, r2 = (A64 @ be)[:, 0], (A64 @ bw)[:, 0], ((A64 * A64) @ b2)[:, 0]
        for i in range(m):
            row = C[i].astype(np.float64).copy()
            faulty = i % 2 == 1
            if faulty:  # a fault of a random size (1e-9 .. 1e1 of the row's largest element) at a random column
                row[rng.integers(cols)] += rng.choice([-1, 1]) * 10.0 ** rng.uniform(-9, 1) * np.abs(row).max()
            ok = am.abft_prepass_filter(row, r[i], rw[i], k)
            full, _ = abft_verify_rows(row[None, :], r[i:i + 1], rw[i:i + 1], r2[i:i + 1], k, "tf32x3")
            if ok:
                assert full == [], (i, trial)  # never passes a row the full rule flags
            passed_clean += ok and not faulty
            flagged_faulty += (not ok) and faulty
    assert passed_clean == 6 * m // 2  # every clean row passes pass 1 (no trip to the rare path)
    assert flagged_faulty > 0


def test_hoppers_fp64_mma_is_sm90_only_and_emits_the_sm90_arch_tag():
    v = variant("fp64", inst_m=16, tb_m=128, tb_n=128, warp_m=32, warp_n=64)
    assert CUT.constraints(v) == []
    text = gc.cutlass_operation(v, "OpMain", 1, 1)
    assert "cutlass::arch::Sm90" in text and "cutlass::gemm::GemmShape<16, 8, 4>" in text
    assert "cutlass::arch::Sm80" in gc.cutlass_operation(variant("fp64"), "OpMain", 1, 1)
    old = variant("fp64", inst_m=16, arch=("sm_80", "sm_90"))
    assert any("Hopper's fp64 MMA: arch must be sm_90 or sm_90a only" in r for r in CUT.constraints(old))
    assert CUT.constraints(variant("fp64", arch=("sm_80",))) == []


def test_fp64_loads_one_element_per_access():
    # CUTLASS's fp64 tensor-op thread maps take one element per access; align 2 failed its static assertions
    assert any("fp64 tensor-op kernels load one element per access" in r for r in CUT.constraints(variant("fp64", align=2)))
    assert not any("per access" in r for r in CUT.constraints(variant("fp64", align=1)))


def test_params_backend_cutlass_selects_the_cutlass_backend_for_fp64(tmp_path):
    from ftgen.spec import load_spec_text

    s = load_spec_text(spec_text("""\
        precision: fp64
        variants:
          - {protection: {scheme: none}}
          - {protection: {scheme: none}, params: {backend: cutlass, inst_m: 16}}
        shapes: [{m: 64, n: 64, k: 64}]
        """), "s.yaml")
    assert [v.backend for v in s.variants] == ["simt", "cutlass"]
    assert s.variants[1].name == "gemm_f64_none_cutlass_64x64x16_w32x32x16_i16x8x4_s3_a1_sw8_rr"
