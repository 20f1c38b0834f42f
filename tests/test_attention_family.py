"""The attention family without a GPU: spec validation (bad specs exit 2 with a clear message and write nothing),
names, shapes, the template context against the model, a golden source, nvcc compiles of a protected and an
unprotected variant for sm_90, and the fp32 reference's row function run on the host against the NumPy model."""

from __future__ import annotations

import json
import math
import subprocess
import textwrap

import numpy as np
import pytest
from conftest import REPO, attention_host_program, golden_dir_check, without_copied_headers

from ftgen import families
from ftgen.build import find_nvcc
from ftgen.cli import main
from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families.attention import model as M
from ftgen.spec import load_spec_text

SMALL = """\
name: attn_golden
family: attention
arch: [sm_90]
precision: fp16
protection: {scheme: abft, level: efta, inject: true}
params: {head_dim: 64, causal: false}
shapes: [{batch: 1, heads: 2, seq: 1000}]
"""


def _variants(text: str):
    return load_spec_text(text, "t.yaml").variants


def test_names_encode_every_parameter_and_the_backend_is_mma():
    spec = textwrap.dedent("""\
        name: t
        family: attention
        precision: [fp16, bf16]
        protection: {scheme: [none, abft], level: efta, inject: true}
        params: {head_dim: [64, 128], causal: [false, true]}
        """)
    names = sorted(v.name for v in _variants(spec))
    assert "attn_f16_none_mma_d64_nc_64x64" in names
    assert "attn_bf16_abft-efta_mma_d128_c_64x64_inj" in names
    assert len(names) == 16 and all(v.backend == "mma" for v in _variants(spec))
    dec = _variants("name: t\nfamily: attention\nprotection: {scheme: abft, level: decoupled}\n")
    assert [v.name for v in dec] == ["attn_f16_abft-dec_mma_d64_nc_64x64"]


@pytest.mark.parametrize("body,where,message", [
    ("params: {head_dim: 96}", "params.head_dim", "96 is not one of 64, 128"),
    ("params: {head_dim: 256}", "params", "head_dim 256: the mma backend takes 64, 128"),  # 256: the wgmma backend's
    ("protection: {scheme: abft, level: unified}", "protection.level", "is not a protection level of family attention"),
    ("precision: fp32", "precision", "allowed: fp16, bf16"),
    ("params: {causal: 1}", "params.causal", "1 is not true or false"),
    ("params: {block_n: 48}", "params.block_n", "48 is not one of 32, 64, 128"),
])
def test_bad_specs_name_the_field(body, where, message):
    with pytest.raises(SpecError) as e:
        load_spec_text(f"name: t\nfamily: attention\n{body}\n", "t.yaml")
    assert where in str(e.value) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("body,message", [
    ("protection: {scheme: abft, level: efta, threshold: 0.4}", "threshold: auto"),
    ("protection: {scheme: abft, level: decoupled}\nparams: {block_n: 32}", "do not apply to the decoupled baseline"),
    ("params: {head_dim: 128, block_n: 128}", "use block_n <= 64"),
])
def test_rejected_points_say_why(body, message):
    with pytest.raises(SpecError) as e:
        load_spec_text(f"name: t\nfamily: attention\n{body}\n", "t.yaml")
    assert "no valid variant" in str(e.value) and message in str(e.value), str(e.value)


@pytest.mark.parametrize("body,message", [
    ("params: {head_dim: 96}", "params.head_dim: 96 is not one of 64, 128"),
    ("protection: {scheme: abft, level: bogus}", "is not a protection level of family attention"),
    ("params: {causal: true}\nshapes: [{batch: 1, heads: 2, seq: 512, seq_k: 1024}]", "causal attention needs seq_k = seq"),
    ("shapes: [{batch: 1, heads: 2, sequence: 512}]", "unknown shape key 'sequence'"),
])
def test_bad_specs_exit_2_and_write_nothing(tmp_path, capsys, body, message):
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"name: bad\nfamily: attention\narch: [sm_90]\n{body}\n")
    out = tmp_path / "out"
    assert main(["generate", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (out / "bad").exists()


def test_shapes_seq_k_and_kv_heads_are_optional():
    fam = families.get("attention")
    assert fam.parse_shape_token("4x32x4096") == {"batch": 4, "heads": 32, "seq": 4096, "seq_k": 4096, "kv_heads": 32}
    assert fam.parse_shape_token("1x8x1000x4097") == {"batch": 1, "heads": 8, "seq": 1000, "seq_k": 4097, "kv_heads": 8}
    assert fam.parse_shape_token("1x8x1000x4097x2") == {"batch": 1, "heads": 8, "seq": 1000, "seq_k": 4097, "kv_heads": 2}
    # the executables' form: kv_heads only where it groups heads (rows of ungrouped shapes keep their four numbers)
    assert fam.format_shape({"batch": 1, "heads": 8, "seq": 1000, "seq_k": 1000}) == "1x8x1000x1000"
    assert fam.format_shape({"batch": 1, "heads": 8, "seq": 1000, "seq_k": 1000, "kv_heads": 8}) == "1x8x1000x1000"
    assert fam.format_shape(fam.parse_shape_token("1x8x1000x4097x2")) == "1x8x1000x4097x2"
    for bad in ("4x32", "4x32x0", "4xx32x1", "1x2x3x4x5x6", "1x8x100x100x3", "1x8x100x100x0", "1x8x100x100x16"):
        with pytest.raises(SpecError):
            fam.parse_shape_token(bad)
    with pytest.raises(SpecError, match="kv_heads 3 does not divide heads 8") as e:
        fam.normalize_shape({"batch": 1, "heads": 8, "seq": 64, "kv_heads": 3}, "shapes[0]")
    assert e.value.path == "shapes[0].kv_heads"


def test_the_kernels_exp_thresholds_have_their_derived_values():
    """The exp thresholds rendered into a kernel, against the rule of docs/attention.md written out with literal
    rounding units: per value of a group of nl = block_n / 8, the rounding into the P type (u_in: 2^-11 fp16, 2^-8
    bf16) and ex2's 2 ulp of fp32 (2^-21), in log2 units with 1% slack, plus lg2's 2 ulp of |log2 p| <= |F| + 1 (F =
    -15 fp16, -126 bf16); the fast path bounds |log2 p| by 14 and adds the x side's fp32 roundings."""
    fam = families.get("attention")
    log2e = 1.4426950408889634
    u_in = {"fp16": 2.0**-11, "bf16": 2.0**-8}
    floor = {"fp16": -15.0, "bf16": -126.0}
    for prec in ("fp16", "bf16"):
        for bn in (32, 64):
            (v,) = _variants(f"name: t\nfamily: attention\nprecision: {prec}\nprotection: {{scheme: abft, level: efta}}\n"
                             f"params: {{block_n: {bn}}}\n")
            t = fam.backend_of(v).context(v)["t"]
            nl = bn // 8
            per_value = (u_in[prec] + 2 * 2.0**-22) * log2e * 1.01
            tau = float(t["exp_tau"])
            assert tau == pytest.approx(nl * (per_value + 2.0**-22 * (1 - floor[prec])), rel=1e-12)
            fast = nl * (per_value + 2.0**-22 * 15) + 2.0**-24 * (2 * 14 * nl + (nl - 1) * nl * (14 + 64))
            assert float(t["exp_tau_fast"]) == pytest.approx(fast, rel=1e-12) and float(t["exp_fast_msl"]) == 64.0
            # a clean group's roundings stay under it; flipping the top mantissa bit of one exp (|log2| change at
            # least log2(4/3)) is over it
            assert nl * u_in[prec] * log2e < tau < math.log2(4 / 3)
            assert float(t["u_in"]) == u_in[prec] and float(t["p_floor"]) == floor[prec]
            assert float(t["u_acc"]) == 2.0**-23 and float(t["c_sqrt"]) == pytest.approx(7 * math.sqrt(2) / 3, rel=1e-12)
        # fp16 values in [2^-15, 2^-14) round by 2^-25 absolutely, i.e. up to 2^-25 / 2^-15 = 2^-10 relatively: the
        # relief is that less the u_in already counted; bf16 has no such binade
        band = (2.0**-10 - 2.0**-11) * log2e * 1.01 if prec == "fp16" else 0.0
        assert float(t["exp_band"]) == pytest.approx(band, rel=1e-12, abs=0.0)


def test_golden_sources():
    files, manifest = render_spec(load_spec_text(SMALL, "golden.yaml"))
    (entry,) = manifest["variants"]
    assert entry["kernel"] == "attn_f16_abft-efta_mma_d64_nc_64x64_inj" and entry["requires"] == []
    assert "common/attention_mma.cuh" in files and "common/ftgen_attention_bench.h" in files
    mine = {rel.replace("/", "__"): text for rel, text in without_copied_headers(files).items()
            if rel.startswith(entry["kernel"] + "/")}
    golden_dir_check(REPO / "tests" / "golden" / "attention", mine)


def test_injection_code_only_in_inject_builds():
    files, _ = render_spec(load_spec_text(SMALL, "golden.yaml"))
    plain, _ = render_spec(load_spec_text(SMALL.replace("inject: true", "inject: false"), "golden.yaml"))
    assert "kLevelEfta, true>" in files["attn_f16_abft-efta_mma_d64_nc_64x64_inj/attn_f16_abft-efta_mma_d64_nc_64x64_inj.cu"]
    assert "kLevelEfta, false>" in plain["attn_f16_abft-efta_mma_d64_nc_64x64/attn_f16_abft-efta_mma_d64_nc_64x64.cu"]


# ---- nvcc, no GPU ------------------------------------------------------------------------------------

COMPILE_SPEC = """\
name: attn_compile
family: attention
arch: [sm_90]
variants:
  - {precision: fp16, protection: {scheme: abft, level: efta, inject: true}, params: {head_dim: 64}}
  - {precision: bf16, protection: {scheme: none}, params: {head_dim: 128, causal: true}}
  - {precision: bf16, protection: {scheme: abft, level: decoupled, inject: true}, params: {head_dim: 64, causal: true}}
"""


@pytest.mark.compile
def test_protected_and_unprotected_variants_compile_for_sm90(tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    files, manifest = render_spec(load_spec_text(COMPILE_SPEC, "c.yaml"))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for v in manifest["variants"]:
        name = v["kernel"]
        cmd = [nvcc, "-std=c++17", "-O3", "-arch=sm_90", "-Xptxas", "-v", "-I", str(tmp_path / "common"), "-I",
               str(tmp_path / name), "-c", str(tmp_path / name / f"{name}.cu"), "-o", str(tmp_path / f"{name}.o")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        if name.startswith("attn_f16_abft-efta_mma_d64"):
            assert "0 bytes spill stores" in r.stderr  # the efta kernel's accumulators fit the registers (d 64)
    # one bench (the adapter on the shared driver) compiles too
    name = next(v["kernel"] for v in manifest["variants"] if "efta" in v["kernel"])
    cmd = [nvcc, "-std=c++17", "-arch=sm_90", "-I", str(tmp_path / "common"), "-I", str(tmp_path / name), "-c",
           str(tmp_path / name / f"{name}_bench.cu"), "-o", str(tmp_path / f"{name}_bench.o")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


REF_MAIN = r"""
#include <cstdio>
#include <vector>
#include "ftgen_attention_ref.cuh"
struct LoadF { __host__ __device__ float operator()(float x) const { return x; } };
int main() {
  int lq, lk, d, causal;
  if (std::scanf("%d %d %d %d", &lq, &lk, &d, &causal) != 4) return 1;
  std::vector<float> q(lq * d), k(lk * d), v(lk * d);
  for (auto* a : {&q, &k, &v}) for (auto& x : *a) if (std::scanf("%f", &x) != 1) return 1;
  ftattn_ref::RowTolerance r{0x1p-11, 0x1p-23, 0x1p-24, 0x1p-22, 3.2998316455372216, 16.0, 0x1p-25, false};
  std::vector<double> out(d), sc(d), fl(d);
  for (int i = 0; i < lq; ++i) {
    const double tol = ftattn_ref::reference_row(&q[i * d], k.data(), v.data(), lk, d, causal != 0, i, 1.f / std::sqrt((float)d),
                                                 r, LoadF(), out.data(), sc.data(), fl.data());
    std::printf("%.17g", tol);
    for (int t = 0; t < d; ++t) std::printf(" %.17g %.17g %.17g", out[t], sc[t], fl[t]);
    std::printf("\n");
  }
}
"""


@pytest.mark.compile
@pytest.mark.parametrize("causal", [False, True])
def test_the_fp32_reference_row_matches_the_models_fp64_reference(tmp_path, causal):
    exe = attention_host_program(tmp_path, "ref_main", REF_MAIN)
    lq = lk = 37
    d = 64
    q, k, v = (M.round_to(a, "fp16") for a in M.inputs("outlier", lq, lk, d, seed=2))
    data = f"{lq} {lk} {d} {int(causal)}\n" + " ".join(f"{x:.9g}" for a in (q, k, v) for x in a.ravel())
    run = subprocess.run([str(exe)], input=data, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    rows = np.array([[float(x) for x in line.split()] for line in run.stdout.splitlines()])
    ref, s = M.reference(q, k, v, causal)
    tol = rows[:, 0]
    out, sc, fl = rows[:, 1::3], rows[:, 2::3], rows[:, 3::3]
    assert np.all(np.abs(out - ref) <= 1e-5 * s)  # fp32 logits, double sums: far inside any tolerance
    assert np.allclose(sc, s, rtol=1e-5)
    assert np.allclose(fl, M.output_floor(q, k, v, "fp16", causal), rtol=1e-5)  # fp32 logits: l to 1e-5
    model_tol = M.output_tolerance(q, k, "fp16", lk, n_tiles=math.ceil(lk / 16))
    if not causal:  # the model bounds the logits over all keys, the row function over the visible ones
        assert np.allclose(tol, model_tol, rtol=1e-6)
    assert np.all(tol <= model_tol * (1 + 1e-6)) and np.all(tol > 0)
    json.dumps(tol.tolist())


LOG2_MAIN = r"""
#include <cmath>
#include <cstdio>
#include <cuda_fp16.h>
#include "attention_mma.cuh"
// The exp check's group sum as the kernel takes it: bf16 through Log2Parts, fp16 through ExpProduct16 (each pair of
// values floored as one packed word, the product renormalized after every 8 factors but the last).
int main() {
  int n, bf16;
  if (std::scanf("%d %d", &n, &bf16) != 2) return 1;
  ftattn::Log2Parts parts;
  ftattn::ExpProduct16 prod;
  int band = 0;  // fp16: the values below the normal range that the threshold counts where the group fails it
  for (int i = 0; i < n; ++i) {
    unsigned b;
    if (std::scanf("%u", &b) != 1) return 1;
    if (bf16) {
      parts.add<true>(b);
    } else {
      const unsigned w = ftattn::ExpProduct16::floor2(b) & 0xffffu;  // the low half of a packed pair
      prod.product *= __half2float(__ushort_as_half(static_cast<unsigned short>(w)));
      if (i % 8 == 7 && i + 1 < n) prod.renormalize();
      band += ftattn::ExpProduct16::band(b);
    }
  }
  if (bf16)
    std::printf("%d %.9g 0\n", parts.bad ? 1 : 0, parts.exponents + std::log2(static_cast<double>(parts.product)));
  else {  // a sum that is not finite fails the kernel's check (lg2 of a negative product: NaN; of -0: -inf)
    const double sum = prod.exponents + std::log2(static_cast<double>(prod.product));
    std::printf("%d %.9g %d\n", prod.bad || !std::isfinite(sum) ? 1 : 0, sum, band);
  }
}
"""


@pytest.mark.compile
def test_the_kernels_group_log2_sum_is_the_models_clamped_log2_sum(tmp_path):
    """The exp check takes sum_l max(log2 p_l, F) as exponents plus one log2 of a product (bf16: of the mantissas;
    fp16: of the floored values, renormalized); compiled for the host, it equals the model's element-wise clamped log2
    sum, and a negative, infinite or NaN P fails (fp16: -0 too, as in the model)."""
    exe = attention_host_program(tmp_path, "log2_main", LOG2_MAIN)

    bands = []

    def run(bits, bf16):
        out = subprocess.run([str(exe)], input=f"{len(bits)} {int(bf16)} " + " ".join(map(str, bits)),
                             capture_output=True, text=True, timeout=30).stdout.split()
        bands.append(int(out[2]))
        return int(out[0]), float(out[1])

    rng = np.random.default_rng(0)
    for bf16, floor in ((False, M.P_FLOOR["fp16"]), (True, M.P_FLOOR["bf16"])):
        for _ in range(6):
            p = np.exp2(rng.uniform(-40 if not bf16 else -140, 0, 16)).astype(np.float32)
            p[rng.random(16) < 0.2] = 0.0
            if bf16:
                vals = M.round_bf16(p)
                bits = [int(b) >> 16 for b in vals.view(np.uint32)]
            else:
                vals = p.astype(np.float16)
                bits = [int(b) for b in vals.view(np.uint16)]
            with np.errstate(divide="ignore"):
                want = float(np.maximum(np.log2(vals.astype(np.float64)), floor).sum())
            bad, got = run(bits, bf16)
            assert bad == 0 and abs(got - want) <= 1e-5, (bf16, got, want)
            assert bands[-1] == int(M.exp_band_count(vals[None, :], 1, "bf16" if bf16 else "fp16").sum())
    assert run([0x3C00, 0xBC00], False)[0] == 1  # a negative P
    assert run([0x3C00, 0x7C00], False)[0] == 1  # +inf
    assert run([0x3C00, 0x7FC0], True)[0] == 1   # NaN (bf16)
    assert run([0x3C00, 0x8000], False)[0] == 1  # fp16: -0 keeps its sign bit through the floor and fails
    assert run([0x3F80, 0x8000], True) == (0, -126.0)  # bf16: -0 is a zero, the floor
    assert run([0x3C00] * 7 + [0x0000] * 9, False) == (0, -135.0)  # 9 values at the floor 2^-15: renormalized, no underflow
    assert run([0x0000, 0x0400], False) == (0, -29.0)  # fp16: an exp of 0 flipped to 2^-14 stands above the floor
    assert run([0x0200, 0x03FF, 0x83FF, 0x0400, 0x01FF], False)[0] == 1 and bands[-1] == 3  # the band, either sign


CHECK_S_MAIN = r"""
#include <cmath>
#include <cstdio>
#include <random>
#include "attention_mma.cuh"
// A thread's S tile (16 n8 blocks, four stride-8 groups) with checksum blocks, faults added, check_s run: per case
// the return, the counts, the largest change left against the clean tile and the reported score. The unit checksum
// is off by `lo` (what rounding Kc1 into the 16-bit type leaves out, q . lo at most ||q|| ||lo||), which the threshold
// allows for through klo = `lo` times the margin's reciprocal.
int main() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  const ftattn::Rules rules{1e-6f, 6e-8f, 1e-6f, 1e-3f, 1.f, 1.f, -24.f, 1e-3f, 0.f, 0.f, 0.f, 1.25f};
  const float qn[2] = {1.f, 1.f}, kn[2] = {1.f, 1.f}, kc2[2] = {1.f, 1.f};
  int ne, fix;
  float lo;
  while (std::scanf("%d %d %f", &ne, &fix, &lo) == 3) {
    const float klo[2] = {lo / 1.25f, lo / 1.25f};
    float s[16][4], clean[16][4], sc[2][4];
    for (int l = 0; l < 16; ++l)
      for (int e = 0; e < 4; ++e) clean[l][e] = s[l][e] = nd(rng);
    for (int e = 0; e < 4; ++e) {
      double c1 = 0, c2 = 0;
      for (int l = 0; l < 16; ++l) c1 += s[l][e], c2 += (l + 1) * static_cast<double>(s[l][e]);
      sc[0][e] = static_cast<float>(c1) + (e % 2 ? lo : -lo);
      sc[1][e] = static_cast<float>(c2);
    }
    for (int i = 0; i < ne; ++i) {  // faults: group e, position l, value added (nan: made NaN)
      int e, l;
      char v[32];
      if (std::scanf("%d %d %31s", &e, &l, v) != 3) return 1;
      s[l][e] = v[0] == 'n' ? NAN : s[l][e] + std::strtof(v, nullptr);
    }
    ftattn::Tally t;
    const bool again = ftattn::check_s(s, sc, qn, kn, klo, kc2, 64, rules, fix != 0, t);
    float worst = 0.f;
    for (int l = 0; l < 16; ++l)
      for (int e = 0; e < 4; ++e) worst = std::fmax(worst, std::isnan(s[l][e]) ? INFINITY : std::fabs(s[l][e] - clean[l][e]));
    std::printf("%d %u %u %.9g %.9g\n", again ? 1 : 0, t.detected, t.corrected, worst, t.reported_score());
  }
}
"""


@pytest.mark.compile
def test_the_s_check_corrects_one_fault_per_group_compiled_for_the_host(tmp_path):
    """check_s (the strided levels' S check, shared by the mma and wgmma kernels) on the host: a single fault in a
    group, at any group and position, bit-sized or NaN, is detected and corrected in place; one in each of two groups
    too; two in one group are detected and not located (the caller recomputes); detect-only counts and leaves S. The
    score (the largest |residual| / threshold) is under 1 on the clean tile, over 1 with a fault, infinite with NaN.
    A unit checksum off by its 16-bit rounding passes clean within the allowance and corrects to within it."""
    exe = attention_host_program(tmp_path, "check_s", CHECK_S_MAIN)
    cases = [("0 1 0", None), ("0 1 0.25", None)]
    cases += [(f"1 1 0 {e} {l} {v}", "fixed") for e in range(4) for l in (0, 7, 15) for v in ("8", "-0.5", "1e6", "nan")]
    cases += [("2 1 0 0 3 4 2 9 -2", "fixed2"), ("2 1 0 1 3 4 1 9 -2", "again"), ("1 0 0 2 5 8", "detect")]
    cases += [(f"1 1 0.25 {e} 7 100", "fixed_lo") for e in range(4)]  # corrected up to the checksum's rounding
    run = subprocess.run([str(exe)], input="\n".join(c for c, _ in cases) + "\n", capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = [line.split() for line in run.stdout.splitlines()]
    assert len(got) == len(cases)
    for (case, want), (again, det, corr, worst, score) in zip(cases, got):
        again, det, corr, worst, score = int(again), int(det), int(corr), float(worst), float(score)
        assert (score == math.inf) == case.endswith("nan") and (score < 1) == (want is None), (case, score)
        if want is None:
            assert (again, det, corr) == (0, 0, 0) and worst == 0, case
        elif want == "fixed":
            assert (again, det, corr) == (0, 1, 1) and worst < 1e-4, case
        elif want == "fixed_lo":
            assert (again, det, corr) == (0, 1, 1) and abs(worst - 0.25) < 1e-4, case
        elif want == "fixed2":
            assert (again, det, corr) == (0, 2, 2) and worst < 1e-4, case
        elif want == "again":
            assert again == 1 and det == 1 and corr == 0, case
        else:
            assert (again, det, corr) == (0, 1, 0) and worst == 8, case


SHAPES_MAIN = r"""
#include <cstdio>
#include "ftgen_harness.cuh"
int main(int argc, char** argv) {
  // the attention bench's shapes: batch x heads x seq x seq_k [x kv_heads]
  const auto shapes = ftgen::parse_shapes(argv[1], 5, "batch x heads x seq x seq_k [x kv_heads]", 4);
  for (const auto& s : shapes) std::printf("%zu\n", s.size());
}
"""


@pytest.mark.compile
def test_the_bench_takes_an_optional_kv_heads(tmp_path):
    """The executables' --shapes: four numbers, or five with kv_heads; fewer or more exit 2 naming the range."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    (tmp_path / "m.cu").write_text(SHAPES_MAIN)
    common = REPO / "templates" / "common"
    exe = tmp_path / "m"
    r = subprocess.run([nvcc, "-std=c++17", "-I", str(common), str(tmp_path / "m.cu"), "-o", str(exe)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ok = subprocess.run([str(exe), "4x32x4096x4096,4x32x4096x4096x8"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.split() == ["4", "5"], ok.stderr
    for bad in ("4x32x4096", "4x32x4096x4096x8x1"):
        r = subprocess.run([str(exe), bad], capture_output=True, text=True)
        assert r.returncode == 2 and "expected 4 to 5" in r.stderr, (bad, r.stderr)


SITES_MAIN = r"""
#include <cstdio>
#include <cstdlib>
#include "ftgen_attention_faults.h"
// argv: head_dim block_m block_n site_mask causal decoupled lq lk bh site_only bit_given count seed
int main(int argc, char** argv) {
  if (argc != 14) return 1;
  int a[13];
  for (int i = 0; i < 12; ++i) a[i] = std::atoi(argv[i + 1]);
  const unsigned long long seed = std::strtoull(argv[13], nullptr, 10);
  const ftattn_faults::Layout lay{a[0], a[1], a[2], a[3], a[4] != 0, a[5] != 0};
  const int lq = a[6], lk = a[7], bh = a[8];
  const long long blocks = a[5] ? 1000000 : static_cast<long long>((lq + a[1] - 1) / a[1]) * bh;
  auto plan = ftgen::plan_faults(a[11], seed, blocks, 256, 1, (lk + a[2] - 1) / a[2], 32, ftgen::kBitflip, -1, 0.0);
  ftattn_faults::assign_sites(plan, seed, lay, a[9], a[10] != 0, lq, lk, bh);
  for (const auto& f : plan) std::printf("%d %d %d %d %d\n", f.block, f.step, f.elem / FTGEN_ATTN_ELEMS_PER_SITE,
                                         f.elem % FTGEN_ATTN_ELEMS_PER_SITE, f.bit);
}
"""


@pytest.mark.compile
def test_fault_sites_stay_in_the_level_and_its_fragments(tmp_path):
    """The fault plan the bench and the library share (ftgen_attention_faults.h): each fault at a site of the level's
    mask (or the one asked for), an element inside that site's fragment, a key tile the causal block reaches, a p16
    flip inside the 16-bit value, and for the decoupled baseline a block of its step's grid; the same seed, the same
    plan."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    (tmp_path / "s.cu").write_text(SITES_MAIN)
    exe = tmp_path / "s"
    inc = [f"-I{REPO / 'templates' / d}" for d in ("common", "attention")]
    r = subprocess.run([nvcc, "-std=c++17", *inc, str(tmp_path / "s.cu"), "-o", str(exe)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]

    def plan(*args):
        out = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, check=True).stdout
        return [tuple(int(x) for x in line.split()) for line in out.splitlines()]

    d, bm, bn, lq, lk, bh = 128, 128, 128, 1000, 1000, 4
    mask = (1 << 0) | (1 << 2) | (1 << 6)  # qk, exp, o
    got = plan(d, bm, bn, mask, 1, 0, lq, lk, bh, -1, 0, 24, 7)
    assert len(got) == 24 and got == plan(d, bm, bn, mask, 1, 0, lq, lk, bh, -1, 0, 24, 7)
    assert {site for _, _, site, _, _ in got} <= {0, 2, 6} and len({site for _, _, site, _, _ in got}) > 1
    for block, step, site, elem, _ in got:
        assert 0 <= elem < (4 * d // 8 if site == 6 else 4 * bn // 8)
        bx = block % ((lq + bm - 1) // bm)
        assert step < (min((bx + 1) * bm, lq) + bn - 1) // bn  # the tiles a causal block sees
    p16 = plan(d, bm, bn, 255, 0, 0, lq, lk, bh, 3, 0, 30, 11)
    assert {s for _, _, s, _, _ in p16} == {3} and all(bit < 16 for *_, bit in p16)
    assert any(bit >= 16 for *_, bit in plan(d, bm, bn, 255, 0, 0, lq, lk, bh, 0, 0, 30, 11))  # 32-bit sites keep theirs
    dec = plan(64, 64, 64, 255, 0, 1, 300, 200, 2, -1, 0, 40, 5)
    for block, step, site, elem, _ in dec:
        grid = {0: ((200 + 15) // 16) * ((300 + 15) // 16) * 2, 1: ((300 + 7) // 8) * 2, 2: (64 // 16) * ((300 + 15) // 16) * 2}
        assert step == (0 if site == 0 else 2 if site == 6 else 1) and 0 <= block < grid[step]
        assert elem < ((200 + 31) // 32 if site in (2, 3) else 1)


def test_a_shape_with_seq_k_not_seq_is_out_of_range_for_causal_variants_only(tmp_path, capsys):
    """Causal and non-causal variants with a seq_k != seq shape: the spec generates, the causal variant's executable
    defaults leave the shape out, and bench records it as a not-run row; a spec of causal variants only names the file,
    the shape and why."""
    from ftgen.bench import BenchOptions, not_run

    body = "name: t\nfamily: attention\narch: [sm_90]\nparams: {causal: [true, false]}\n" \
           "shapes: [{batch: 1, heads: 4, seq: 3, seq_k: 1, kv_heads: 1}, {batch: 1, heads: 4, seq: 128}]\n"
    spec = tmp_path / "t.yaml"
    spec.write_text(body)
    assert main(["generate", str(spec), "-o", str(tmp_path / "g")]) == 0
    assert "records 1 of the spec's 2 shape(s) as out of range" in capsys.readouterr().err
    s = load_spec_text(body, "t.yaml")
    fam = s.family
    causal = next(v for v in s.variants if v["causal"])
    plain = next(v for v in s.variants if not v["causal"])
    assert fam.default_shapes_arg(causal, s.shapes) == "1x4x128x128"
    assert fam.default_shapes_arg(plain, s.shapes) == "1x4x3x1x1,1x4x128x128"
    argv, skipped = BenchOptions().plan(fam, causal.to_dict(), s.shapes)
    assert "1x4x128x128" in argv and len(skipped) == 1 and not_run(skipped[0])
    assert "seq_k = seq" in skipped[0]["error"]["message"] and "1x4x3x1x1" in skipped[0]["error"]["message"]
    spec.write_text(body.replace("causal: [true, false]", "causal: true"))
    assert main(["generate", str(spec), "-o", str(tmp_path / "g2")]) == 2
    err = capsys.readouterr().err
    assert f"{spec}: shapes[0]: 1x4x3x1x1: causal attention needs seq_k = seq" in err and "every variant" in err, err
    assert not (tmp_path / "g2").exists()


def test_fault_sites_are_the_model_s():
    assert families.get("attention").fault_sites == M.SITES
    families.get("attention").check_site("p16")
    with pytest.raises(SpecError, match="--site: 'accumulator' is not a fault site of family attention; allowed: qk, "):
        families.get("attention").check_site("accumulator")
