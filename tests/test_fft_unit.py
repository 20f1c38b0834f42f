"""fft family: parameters, constraints and their reasons, names, shapes, CLI exit codes, golden
sources. No GPU, no compiler."""

from __future__ import annotations

import fnmatch
import gzip
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, golden_dir_check, without_copied_headers
from ftgen.cli import main
from ftgen.codegen.emit import TemplateEnv, render_spec
from ftgen.errors import SpecError
from ftgen.families import fft as F
from ftgen.families import get
from ftgen.spec import load_spec_text, parse_shapes
from ftgen.tuning import load as load_tuning

DATA = REPO / "tests" / "data"


def spec(body: str, name: str = "t") -> str:
    return f"name: {name}\nfamily: fft\narch: [sm_90]\n" + textwrap.dedent(body)


def variants(body: str):
    s = load_spec_text(spec(body), "t.yaml")
    return s.variants, s.rejected


# ---- names -----------------------------------------------------------------------------------


def test_names_encode_the_resolved_plan():
    vs, _ = variants("precision: fp32\nparams: {logn: 12}\n")
    assert [v.name for v in vs] == ["fft_c2c_f32_none_fwd_logn12_N4096_n16_bs1_t1"]
    vs, _ = variants("precision: fp64\nprotection: {scheme: abft, level: two-sided-tb, inject: true}\nparams: {logn: 19, direction: inverse}\n")
    (v,) = vs
    # above 2^12 two-sided-tb takes its measured plan (here fp64 2^19's the two-sided-tb cluster plans: three launches, the last inside the
    # second, two columns per thread)
    assert v.name == "fft_z2z_f64_abft-2sided-tb_inv_logn19_N256x512x4_n8x8x4_bs16x4x1_t2_cl_hk_inj"
    vs, _ = variants("precision: fp32\nprotection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 10}\n")
    # fp32 2^10 takes its measured plan, the simultaneous design (tbseq: 1) with two columns per block
    assert [v.name for v in vs] == ["fft_c2c_f32_abft-2sided-tb_fwd_logn10_N1024_n16_bs2_t1_sm"]
    vs, _ = variants("precision: fp32\nprotection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 10, launches: 1}\n")
    assert [v.name for v in vs] == ["fft_c2c_f32_abft-2sided-tb_fwd_logn10_N1024_n16_bs16_t4"]  # the rules: sequential, four columns
    vs, _ = variants("precision: fp32\nprotection: {scheme: abft, level: one-sided, threshold: 20}\nparams: {logn: 0}\n")
    assert [v.name for v in vs] == ["fft_c2c_f32_abft-1sided-th20_fwd_auto"]


def test_explicit_params_equal_to_auto_give_the_same_variant():
    vs, _ = variants("precision: fp32\nvariants:\n  - params: {logn: 12}\n  - params: {logn: 12, N1: 4096, n1: 16, bs1: 1, tcols: 1}\n")
    assert len(vs) == 1


def test_every_parameter_changes_the_name():
    base = {"logn": 16, "N1": 256, "n1": 16, "n2": 16, "bs1": 16, "bs2": 16, "direction": "forward"}

    def name(**over):
        p = {**base, **over}
        (v,), _ = variants("precision: fp32\nparams: {" + ", ".join(f"{k}: {x}" for k, x in p.items()) + "}\n")
        return v.name

    n0 = name()
    changed = [name(n1=8), name(n2=8), name(bs1=8), name(bs2=8), name(N1=128), name(direction="inverse")]
    assert len({n0, *changed}) == 1 + len(changed)


# ---- constraints: reasons, not booleans -------------------------------------------------------


@pytest.mark.parametrize(
    "params, reason",
    [
        ("{logn: 12, N1: 4096, n1: 8, bs1: 4}", "threads per block"),
        ("{logn: 16, N1: 256, N2: 256, bs2: 512}", "consecutive columns must share a signal"),
        ("{logn: 16, N1: 256, N2: 512}", "does not divide n = 65536"),
        ("{logn: 16, N1: 256, N2: 16, N3: 4}", "is not n = 65536"),
        ("{logn: 0, n1: 8}", "give logn to set n1"),
        ("{logn: 0, minb: 2}", "give logn to set minb"),
        ("{logn: 14, minb: 3}", "minb=3 blocks of 1024 threads exceed the 2048 threads an SM holds"),
        ("{logn: 14, n1: 32, minb: 2}", "minb=2 blocks of 135200 bytes of shared memory exceed"),
        ("{logn: 26}", None),
    ],
)
def test_constraint_reasons(params, reason):
    vs, rej = variants(f"precision: fp32\nvariants:\n  - params: {params}\n  - params: {{logn: 4}}\n")
    if reason is None:
        assert any("logn26" in v.name for v in vs)
    else:
        assert rej and reason in "; ".join(rej[0].reasons), rej


def test_two_sided_levels_need_two_columns_per_thread():
    # (the sequential design: the rules' plan at 2^10; the measured plan there is simultaneous, one column per thread)
    vs, rej = variants("precision: fp32\nprotection: {scheme: abft, level: two-sided-tb}\nvariants:\n  - params: {logn: 10, launches: 1, tcols: 1}\n  - params: {logn: 10}\n")
    assert len(vs) == 1 and rej and "at least 2 columns per thread" in rej[0].reasons[0]


def test_fp64_size_limit_is_a_reason():
    _, rej = variants("precision: fp64\nvariants:\n  - params: {logn: 26}\n  - params: {logn: 3}\n")
    assert "largest fp64 size" in rej[0].reasons[0]


def test_protection_options_are_checked():
    with pytest.raises(SpecError, match="interval must be 1"):
        load_spec_text(spec("protection: {scheme: abft, level: two-sided-tb, interval: 4}\nparams: {logn: 8}\n"))
    with pytest.raises(SpecError, match="for detect-and-recompute use level one-sided"):
        load_spec_text(spec("protection: {scheme: abft, level: two-sided-tb, correct: detect}\nparams: {logn: 8}\n"))
    with pytest.raises(SpecError, match="not a abft level of family fft|is not a protection level"):
        load_spec_text(spec("protection: {scheme: abft, level: warp}\nparams: {logn: 8}\n"))


def test_automatic_plans_are_valid_for_every_size_precision_and_level():
    for prec in F.PRECISIONS:
        for level in ("none",) + F.ABFT_LEVELS:
            for logn in range(1, F.MAX_LOGN[prec] + 1):
                q = F.resolve_params(prec, level, {"logn": logn})
                plan = F.make_plan(prec, level, q)
                assert F.plan_reasons(plan, level) == [], (prec, level, logn, F.plan_reasons(plan, level))
                rules = F.plan_level(level, logn)  # the simultaneous two-sided-tb takes the unprotected plans
                tuned = F.measured_params(prec, level, logn)  # (a build without injection code)
                assert all(q[k] == v for k, v in tuned.items()), (prec, level, logn, tuned)
                assert plan.N == 1 << logn and len(plan.launches) == (tuned.get("launches") or F.auto_launches(prec, logn, rules))
                for lp in plan.launches:
                    if lp.fused:  # a cluster plan's last launch runs inside the one before (no kernel of its own)
                        assert level in ("none", "two-sided-tb") and tuned.get("cluster") and plan.launches[-2].cluster == lp.R
                        assert lp is plan.launches[-1]
                        continue
                    assert lp.threads % 32 == 0 and lp.threads <= 1024  # the automatic plans use whole warps
                    assert lp.smem_bytes <= F.SMEM_LIMIT, (prec, level, logn, lp.describe())
                    assert lp.minb * lp.threads <= F.MAX_SM_THREADS and max(lp.minb, 1) * lp.smem_bytes <= F.SMEM_SM
                    # a single-launch signal may fill the SM; measured plans (the tuning file) may take more
                    if level == "none" and len(plan.launches) > 1 and not tuned:
                        assert lp.smem_bytes <= F.SMEM_TARGET, (prec, logn, lp.describe())
                        assert lp.regs_estimate() <= 128, (prec, logn, lp.describe())


def test_tuned_plans_apply_only_when_no_plan_key_is_given():
    T = tuning_tables()
    assert ("fp64", "none", 20) in T.plans
    q = F.resolve_params("fp64", "none", {"logn": 20})
    assert (q["launches"], q["bs1"], q["bs2"], q["minb"]) == (2, 4, 4, 2)
    name = get("fft").kernel_name(load_spec_text(spec("precision: fp64\nparams: {logn: 20}\n")).variants[0])
    assert name.endswith("_logn20_N1024x1024_n8x8_bs4x4_t1_mb2")
    q = F.resolve_params("fp64", "none", {"logn": 20, "launches": 2})  # a plan key given: the rules alone
    assert (q["bs1"], q["bs2"], q.get("minb", 0)) == (2, 2, 0)
    assert ("fp32", "none", 20) not in T.plans and ("fp32", "two-sided-tb", 13) in T.plans  # per level
    assert F.resolve_params("fp32", "none", {"logn": 13})["n1"] == 32
    assert F.resolve_params("fp32", "two-sided-tb", {"logn": 20}).get("minb", 0) == 0


# ---- shapes ---------------------------------------------------------------------------------


def test_shapes_n_or_logn_and_batch():
    fam = get("fft")
    assert parse_shapes(fam, "4096x1024,8x3") == [{"n": 4096, "batch": 1024}, {"n": 8, "batch": 3}]
    assert fam.normalize_shape({"logn": 5, "batch": 2}, "shapes[0]") == {"n": 32, "batch": 2}


@pytest.mark.parametrize(
    "text, message",
    [
        ("1000x4", "1000 is not a power of two"),
        ("4096", "has 1 numbers"),
        ("1x4", "not a power of two >= 2"),
        ("134217728x64", "exceeds 2^31|largest supported size"),
    ],
)
def test_bad_shape_tokens(text, message):
    with pytest.raises(SpecError, match=message):
        parse_shapes(get("fft"), text)


def test_spec_shape_errors_name_the_field(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(spec("params: {logn: 10}\nshapes:\n  - {n: 1000, batch: 4}\n"))
    assert main(["generate", str(p), "-o", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "shapes[0].n" in err and "1000 is not a power of two" in err and "Traceback" not in err


# ---- CLI exit codes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        ("params: {logn: 12, n1: 12}\n", "params.n1: 12 is not one of"),
        ("params: {logn: 12, bs1: 3}\n", "params.bs1: 3 is not a power of two"),
        ("params: {logn: 12, direction: sideways}\n", "params.direction"),
        ("params: {logn: 30}\n", "params.logn: 30 is outside 0..26"),
        ("params: {log_n: 12}\n", "did you mean 'logn'"),
        ("params: {logn: 12, N1: 8192}\n", "N1 = 8192 does not divide n = 4096"),
        ("precision: fp16\nparams: {logn: 12}\n", "precision"),
    ],
)
def test_invalid_specs_exit_2_with_the_field(tmp_path, capsys, body, message):
    p = tmp_path / "s.yaml"
    p.write_text(spec(body))
    assert main(["generate", str(p), "-o", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_bench_shapes_flag_rejects_non_powers_of_two(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text(spec("params: {logn: 3}\n"))
    assert main(["generate", str(p), "-o", str(tmp_path / "g")]) == 0
    assert main(["bench", str(tmp_path / "g" / "t"), "--shapes", "100x3"]) == 2
    assert "100 is not a power of two" in capsys.readouterr().err


def test_list_describes_the_family(capsys):
    assert main(["list", "fft", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)[0]
    assert d["family"] == "fft" and d["shape_keys"] == ["n", "batch"]
    assert set(d["backends"][0]["schemes"]["abft"]) == {"one-sided", "two-sided-thread", "two-sided-tb"}
    for key in ("direction", "logn", "N1", "n1", "bs1", "tcols"):
        assert key in [p["name"] for p in d["backends"][0]["params"]]
    assert any("bs1 <= n/N1" in c for c in d["constraints"])


def test_example_specs_generate(tmp_path):
    for path in sorted((REPO / "specs" / "fft").glob("*.yaml")):
        text = path.read_text()
        s = load_spec_text(text, str(path))
        assert s.variants, path
        files, manifest = render_spec(s)
        assert manifest["variants"], path


def test_sweep_specs_fill_the_device():
    for prec, total in (("fp32", 26), ("fp64", 25)):
        s = load_spec_text((REPO / "specs" / "fft" / f"sweep_{prec}.yaml").read_text())
        logns = [x["n"].bit_length() - 1 for x in s.shapes]
        assert logns == list(range(3, 25))
        assert all(x["n"] * x["batch"] == 1 << total for x in s.shapes)


# ---- emission -------------------------------------------------------------------------------


def test_emission_is_deterministic_and_links_cufft():
    s = load_spec_text(spec("precision: fp32\nprotection: {scheme: abft, level: two-sided-tb, inject: true}\nparams: {logn: 14}\n"))
    a, _ = render_spec(s)
    b, _ = render_spec(s)
    assert a == b
    assert "CUDA::cufft" in a["CMakeLists.txt"]
    (v,) = s.variants
    # the symbol is a C identifier; kernels of one launch per file
    assert "cudaError_t fft_c2c_f32_abft_2sided_tb_fwd_logn14" in a[f"{v.name}/{v.name}.h"]
    assert f"{v.name}/{v.name}_k14.cu" in a
    assert "common/ftgen_fft_core.h" in a and "common/ftgen_fft.h" in a


def test_injection_code_only_in_inject_builds():
    s = load_spec_text(spec("precision: fp32\nprotection: {scheme: abft, level: two-sided-tb, inject: [false, true]}\nparams: {logn: 10}\n"))
    files, _ = render_spec(s)
    clean, inj = s.variants
    assert "INJECT = false" in files[f"{clean.name}/{clean.name}_k10.cu"]
    assert "INJECT = true" in files[f"{inj.name}/{inj.name}_k10.cu"]


def test_codelets_in_the_header_match_the_generator():
    text = (REPO / "templates" / "fft" / "ftgen_fft_core.h").read_text()
    start = text.index("// ---- generated by ftgen.families.fft.codelet_source()")
    end = text.index("// ---- end of generated codelets ----") + len("// ---- end of generated codelets ----\n")
    assert text[start:end] == F.codelet_source()


GOLDEN = spec(
    """
    precision: [fp32, fp64]
    protection:
      scheme: [none, abft]
      level: two-sided-tb
      inject: true
    params: {logn: 10}
    shapes: [{n: 1024, batch: 64}]
    """,
    name="golden_fft",
)


def test_golden_sources():
    files, _ = render_spec(load_spec_text(GOLDEN, "golden_fft.yaml"))
    golden_dir_check(REPO / "tests" / "golden" / "fft", {
        rel.replace("/", "__"): text for rel, text in without_copied_headers(files).items()
        if rel not in ("manifest.json", "CMakeLists.txt")})


def test_in_place_one_launch_protected_calls_go_through_the_workspace(tmp_path):
    """one-sided and two-sided-tb re-read their input after storing (location, recomputation): a
    one-launch call in place must not overwrite it, so the launcher routes it through the workspace
    and the workspace query counts that buffer; the unprotected and thread levels need none."""
    for level, expect in (("two-sided-tb", True), ("one-sided", True), ("two-sided-thread", False), ("none", False)):
        prot = "{scheme: none}" if level == "none" else f"{{scheme: abft, level: {level}}}"
        s = load_spec_text(f"name: ip\nfamily: fft\nprecision: fp32\nprotection: {prot}\nparams: {{logn: 10}}\n", "ip.yaml")
        (v,) = s.variants
        files = s.family.emit(v, TemplateEnv()).files
        kern = next(t for p, t in files.items() if p.endswith("_k10.cu"))
        launcher = next(t for p, t in files.items() if p.endswith(f"{v.name}.cu"))
        assert ("via_ws" in kern) == expect, level
        assert ("p->in == p->out" in launcher) == expect, level
        assert ("s->wsbufs : 1;" in launcher) == expect, level


class TuningTables:
    """The fft entries of the H100 tuning file as the tables the replay tests compare with the recorded searches: plans
    ((precision, level, logn) -> plan keys: any arch, and the unprotected cluster plans), cluster_plans (two-sided-tb,
    sm_90), hooksplit ((precision, level) -> {logn: value}), tbenc ((precision, level) -> {logn: value}), prefetch
    ((precision, level) -> sizes with prefetch 2)."""

    def __init__(self):
        self.plans, self.cluster_plans, self.hooksplit, self.tbenc, self.prefetch = {}, {}, {}, {}, {}
        for e in load_tuning("h100").for_family("fft"):
            k, params = e["key"], e["params"]
            key, pl = (k["precision"], k["level"], k["logn"]), (k["precision"], k["level"])
            plan = {n: v for n, v in params.items() if n not in ("hooksplit", "tbenc", "prefetch")}
            if plan:
                (self.cluster_plans if k.get("arch") and k["level"] != "none" else self.plans)[key] = plan
            if "hooksplit" in params:
                self.hooksplit.setdefault(pl, {})[k["logn"]] = params["hooksplit"]
            if "tbenc" in params:
                self.tbenc.setdefault(pl, {})[k["logn"]] = params["tbenc"]
            if params.get("prefetch") == 2:
                self.prefetch.setdefault(pl, set()).add(k["logn"])

    def hook_sizes(self, prec: str, level: str, value: int) -> set[int]:
        return {lg for lg, v in self.hooksplit.get((prec, level), {}).items() if v == value}

    def split_sizes(self, prec: str, level: str) -> set[int]:
        """The sizes where the hook split (hooksplit 1, or 2 which splits too) measured faster than hooks in every block:
        hooksplit 1 / 2, and at the sizes of hooksplit 3 the value those searches measured (HOOK_BEFORE_KERNEL)."""
        before = HOOK_BEFORE_KERNEL.get(prec, {})
        return {lg for lg, v in self.hooksplit.get((prec, level), {}).items() if v in (1, 2) or (v == 3 and before.get(lg, 0) >= 1)}

    def call_sizes(self, prec: str, level: str) -> set[int]:
        """hooksplit 2's sizes, and those of hooksplit 3 that had measured 2 before it."""
        before = HOOK_BEFORE_KERNEL.get(prec, {})
        return {lg for lg, v in self.hooksplit.get((prec, level), {}).items() if v == 2 or (v == 3 and before.get(lg) == 2)}

    def hooksplit_of(self, prec: str, level: str, logn: int) -> int:
        return self.hooksplit.get((prec, level), {}).get(logn, 0)


# The two-sided-tb hook placement the recorded searches and A/Bs measured at the sizes that now take hooksplit 3 (a
# kernel of its own for the faulted block), which came after them: the names they measured carry that value's token.
HOOK_BEFORE_KERNEL = {"fp32": {15: 1, 16: 1, 17: 1, 18: 1, 19: 1, 20: 0, 23: 2, 24: 1},
                      "fp64": {10: 1, 15: 2, 16: 2, 19: 1, 20: 1, 23: 1}}


def tuning_tables() -> TuningTables:
    return TuningTables()


def _searches_fixture() -> dict:
    return json.loads(gzip.decompress((DATA / "fft_h100_searches.json.gz").read_bytes()))["runs"]


def _recorded_searches(*patterns: str, exclude: tuple[str, ...] = ()) -> list[tuple[str, dict[tuple[str, int], float]]]:
    """The recorded plan searches whose keys match a pattern and no pattern of `exclude`, oldest first: (provenance
    time, x cuFFT per (kernel, n) of the rows that verified). A key names the search (`search_<name>.jsonl`, <name> the
    name of its spec) and, where a search ran more than once, its run in time order (`search_<name>.<k>.jsonl`, k = 1
    the earliest). Read from tests/data/fft_h100_searches.json.gz, which holds those ratios (the best verified row of a
    kernel at a size) of every search these tests replay."""
    runs: list[tuple[str, dict[tuple[str, int], float]]] = []
    fixture = _searches_fixture()
    keys = {k for pattern in patterns for k in fixture if fnmatch.fnmatchcase(k, pattern)}
    for path in sorted(k for k in keys if not any(fnmatch.fnmatchcase(k, x) for x in exclude)):
        run = fixture[path]
        assert run["utc"], f"{path}: no provenance time"
        runs.append((run["utc"], {(k, n): r for k, n, r in run["rows"]}))
    runs.sort(key=lambda x: x[0])
    return runs


def _variant_name(prec: str, prot: str, params: str) -> str:
    return load_spec_text(f"name: t\nfamily: fft\narch: [sm_90]\nprecision: {prec}\nprotection: {prot}\nparams: {params}\n", "t.yaml").variants[0].name


def _before_hk(prec: str, logn: int, name: str) -> str:
    """The name the searches before hooksplit 3 measured for an automatic two-sided-tb injection build: its `_hk` token
    as the hook placement they measured at that size (HOOK_BEFORE_KERNEL; the plans are otherwise the same)."""
    if not name.endswith("_hk_inj"):
        return name
    tag = F.HOOKSPLIT_TAG[HOOK_BEFORE_KERNEL[prec][logn]]
    return name[: -len("_hk_inj")] + tag + "_inj"


def _keys_name(prec: str, prot: str, keys: dict) -> str:
    """The sm_90 variant name of the plan keys `keys`."""
    return _variant_name(prec, prot, "{" + ", ".join(f"{k}: {v}" for k, v in keys.items()) + "}")


def _measured_pair(runs, n: int, pair: tuple[str, str], split_pair: tuple[str, str] | None):
    """(a, b, the runs that measured both at n): the hook-split pair where a search measured both of it, else `pair`."""
    def both(a: str, b: str) -> list:
        return [ratios for _, ratios in runs if (a, n) in ratios and (b, n) in ratios]

    if split_pair and both(*split_pair):
        return (*split_pair, both(*split_pair))
    return (*pair, both(*pair))


def test_tuned_plans_replay_the_recorded_searches():
    """Every measured plan of the tuning file was measured on the GPU (the recorded searches, rows that verified) and
    beat the plan the rules give for the same size in the latest search that measured both (kernels change between
    searches: the provenance's time orders them), or else in the latest searches that measured each."""
    # (not the hook split's search, the staged encodings' and the last round at the weakest sizes: the tests of the hook
    # split, of tbenc, of the automatic plans against the alternatives and of the clean builds replay those)
    runs = _recorded_searches("search_*.jsonl",
                              exclude=("search_hooks2.jsonl", "search_tbenc*.jsonl", "search_weak36*.jsonl"))
    assert runs
    T = tuning_tables()
    for (prec, level, logn), entry in T.plans.items():
        prot = "{scheme: none}" if level == "none" else f"{{scheme: abft, level: {level}, inject: true}}"
        # with the hook split where the automatic plan takes it, where a search measured both so
        split = {"hooksplit": 1} if logn in T.split_sizes(prec, level) else {}

        def named(keys: dict) -> str:
            return _keys_name(prec, prot, keys)

        tuned = named({"logn": logn, **entry})
        # what applies without this entry: the measured plan of the level whose rules apply (the simultaneous
        # two-sided-tb follows the unprotected plans), else the rules (a plan key given)
        fallback = T.plans.get((prec, F.plan_level(level, logn), logn)) if F.plan_level(level, logn) != level else None
        if fallback and fallback.get("cluster"):  # cluster plans are unprotected only (tuned_plan)
            fallback = None
        rule_keys = {"logn": logn, **fallback} if fallback else {"logn": logn, "launches": F.auto_launches(prec, logn, F.plan_level(level, logn))}
        rule = named(rule_keys)
        assert tuned != rule, (prec, level, logn)
        n = 1 << logn
        split_pair = (named({"logn": logn, **entry, **split}), named({**rule_keys, **split})) if split else None
        tuned, rule, both = _measured_pair(runs, n, (tuned, rule), split_pair)
        if both:
            a, b = both[-1][(tuned, n)], both[-1][(rule, n)]
        else:  # measured in different searches: the latest measurement of each
            ta = [ratios[(tuned, n)] for _, ratios in runs if (tuned, n) in ratios]
            tb = [ratios[(rule, n)] for _, ratios in runs if (rule, n) in ratios]
            assert ta, f"{tuned}: no recorded search row"
            assert tb, f"{rule}: no recorded search row"
            a, b = ta[-1], tb[-1]
        assert a > b, (tuned, a, rule, b)


def test_automatic_plans_beat_the_recorded_alternatives():
    """The searches of plan shapes not measured before at the weakest two-sided-tb sizes (search_weak36, _weak36b,
    _weak36c: cluster plans with one column chunk per block at fp64 2^12 / 2^13 and fp32 2^12-2^14, other register caps,
    the fp64 cluster plans' first launch at radix 4; one fault per transform) found no faster plan: at every size the
    automatic two-sided-tb injection build of that precision beat each alternative measured beside it."""
    runs = _recorded_searches(*(f"search_weak36{x}.jsonl" for x in ("", "b", "c")))
    assert len(runs) == 3
    prot = "{scheme: abft, level: two-sided-tb, inject: true}"
    autos = {(prec, logn): _before_hk(prec, logn, _variant_name(prec, prot, f"{{logn: {logn}}}")) for prec in ("fp32", "fp64") for logn in range(3, 25)}
    checked = 0
    for _, ratios in runs:
        for prec, tag in (("fp32", "_c2c_f32_"), ("fp64", "_z2z_f64_")):
            for logn in range(3, 25):
                n = 1 << logn
                auto = autos[(prec, logn)]
                if (auto, n) not in ratios:
                    continue
                others = [(k, r) for (k, m), r in ratios.items() if m == n and tag in k and k != auto]
                for k, r in others:
                    assert ratios[(auto, n)] > r, (auto, ratios[(auto, n)], k, r)
                checked += len(others)
    assert checked >= 20


def test_hooksplit_is_for_injection_builds_of_protected_levels():
    for body in ("protection: {scheme: abft, level: two-sided-tb, inject: true}\nparams: {logn: 16, hooksplit: 1}\n",
                 "protection: {scheme: abft, level: two-sided-tb, inject: true}\nparams: {logn: 10, hooksplit: 1}\n",
                 "protection: {scheme: abft, level: one-sided, inject: true}\nparams: {logn: 16, hooksplit: 1}\n"):
        vs, _ = variants(body)
        assert vs[0].name.endswith("_hs_inj") and F.FftFamily().plans(vs[0])[0].hooksplit
    for body, why in {"protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 16, hooksplit: 1}": "inject: false",
                      "params: {logn: 16, hooksplit: 1}": "inject: false"}.items():
        with pytest.raises(SpecError, match=why):
            load_spec_text(spec(body), "t.yaml")
    # a build without injection code never takes a measured plan's split (the two-sided-tb cluster plans sets it for injection builds)
    clean = load_spec_text(spec("precision: fp64\nprotection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 20}\n"), "t.yaml")
    assert clean.variants[0].name.endswith("_cl") and not F.FftFamily().plans(clean.variants[0])[0].hooksplit


def test_tbenc_is_for_staged_simultaneous_two_sided_tb_launches():
    """tbenc 2 (the encodings at the staged copies) names the variant `_te` and marks the launches with a staged input;
    a variant without such a launch (unprotected, the sequential design, one launch) is rejected with the reason; the
    kernels' Cfg carries it per launch."""
    vs, _ = variants("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 16, tbenc: 2}\n")
    plan = F.FftFamily().plans(vs[0])[0]
    assert "_te" in vs[0].name and all(lp.tb_stage for lp in plan.launches)
    assert [lp.tb_stage_out for lp in plan.launches] == [False, True]  # (the first launch's outputs carry launch twiddles)
    for body in ("params: {logn: 20, tbenc: 2}", "protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 12, tbenc: 2}",
                 "protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 14, tbenc: 2}"):
        with pytest.raises(SpecError, match="tbenc: 2 moves"):
            load_spec_text(spec(body), "t.yaml")
    vs, _ = variants("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 16, tbenc: 1}\n")
    assert "_te" not in vs[0].name and not any(lp.tb_stage for lp in F.FftFamily().plans(vs[0])[0].launches)


def test_tb_cluster_plans_replay_the_recorded_searches():
    """Every two-sided-tb cluster plan of the tuning file (sm_90) was measured on the GPU with one fault per transform and beat the plan
    an architecture without clusters gets (the measured plan or the rules') in the latest search that measured both
    (the cluster plan searches search_tbcluster, _tbcluster2-4 and _tbcluster64, and the rounds at the weakest sizes,
    search_weak35*); sm_80 builds keep that plan."""
    runs = _recorded_searches("search_tbcluster.jsonl", "search_tbcluster[2-4].jsonl", "search_tbcluster64.jsonl",
                              "search_weak35*.jsonl")
    T = tuning_tables()
    assert runs and T.cluster_plans
    for (prec, level, logn), entry in T.cluster_plans.items():
        assert entry.get("cluster") and level == "two-sided-tb"
        prot = f"{{scheme: abft, level: {level}, inject: true}}"
        # the plan as the searches measured it (hooks in every block; the tuning file adds the split to the automatic plan)
        tuned = _keys_name(prec, prot, {"logn": logn, **entry})
        # (the rules' plan named by its launch count: any plan key keeps the measured cluster plan away)
        other = {k: v for k, v in F.measured_params(prec, level, logn, inject=True, clusters=False).items() if k in (*F.PLAN_KEYS, "tcols")} or {"launches": F.auto_launches(prec, logn, F.plan_level(level, logn))}
        assert not other.get("cluster")
        base = _keys_name(prec, prot, {"logn": logn, **other})
        s80 = load_spec_text(f"name: t\nfamily: fft\narch: [sm_80]\nprecision: {prec}\nprotection: {prot}\nparams: {{logn: {logn}}}\n", "t.yaml")
        assert tuned.endswith("_cl_inj") and s80.variants[0].name == base
        n = 1 << logn
        # with the hook split where a search measured both so (the search_weak35* rounds measure the split plans only)
        split_pair = (_keys_name(prec, prot, {"logn": logn, **entry, "hooksplit": 1}), _keys_name(prec, prot, {"logn": logn, **other, "hooksplit": 1}))
        tuned, base, both = _measured_pair(runs, n, (tuned, base), split_pair)
        assert both, (tuned, base)
        assert both[-1][(tuned, n)] > both[-1][(base, n)], (tuned, both[-1][(tuned, n)], base, both[-1][(base, n)])


def test_hook_split_sizes_replay_the_recorded_search():
    """The hook split (hooksplit 1 entries of the tuning file): at each size of the sm_90 injection builds the hook split is taken exactly where it measured
    faster than the same plan with hooks in every block (search_hooks2, one fault per transform; the latest search that
    measured both), and the automatic plans carry it there (not on sm_80, not without injection code)."""
    # (the simultaneous plans at sequential sizes were measured with and without the split in search_tbsim2, the
    # two-column plans in search_weak35c / e / f / h / j, the code without hooks with the input encodings fenced off
    # (ENC_FENCE) at fp32 2^13 / 2^14 in search_weak36d)
    runs = _recorded_searches("search_hooks2.jsonl", "search_tbsim2.jsonl", "search_weak35[cefhj].jsonl",
                              "search_weak36d.jsonl")
    assert runs
    checked = 0
    T = tuning_tables()
    for (prec, level) in T.hooksplit:
        sizes = T.split_sizes(prec, level)
        prot = f"{{scheme: abft, level: {level}, inject: true}}"
        for logn in range(3, 25):
            auto = _variant_name(prec, prot, f"{{logn: {logn}}}")
            kernel = logn in T.hook_sizes(prec, level, 3)
            calls = logn in T.hook_sizes(prec, level, 2)
            assert auto.endswith("_hs_inj") == (logn in sizes and not calls and not kernel), auto
            assert auto.endswith("_hc_inj") == calls, auto
            assert auto.endswith("_hk_inj") == kernel, auto
            s80 = load_spec_text(f"name: t\nfamily: fft\narch: [sm_80]\nprecision: {prec}\nprotection: {prot}\nparams: {{logn: {logn}}}\n", "t.yaml")
            assert not s80.variants[0].name.endswith(("_hs_inj", "_hc_inj", "_hk_inj"))
            clean = _variant_name(prec, f"{{scheme: abft, level: {level}}}", f"{{logn: {logn}}}")
            assert "_hs" not in clean and "_hc" not in clean and "_hk" not in clean
            if "_cl_" in auto or calls:
                # (the two-sided-tb cluster plans: their split was chosen in full runs, not in a search; hooksplit 2
                # (tuning file): the test below)
                continue
            # (hooksplit 3's sizes, the test below: the hook split entries still holds the search's record there)
            # (the search of the split was before tbenc and prefetch)
            hooked = auto.replace("_te_", "_").replace("_tl_", "_").replace("_pf_", "_").replace("_hs_inj", "_inj").replace("_hk_inj", "_inj")
            split = hooked.replace("_inj", "_hs_inj")
            n = 1 << logn
            both = [ratios for _, ratios in runs if (hooked, n) in ratios and (split, n) in ratios]
            assert both, (hooked, split)
            a, b = both[-1][(split, n)], both[-1][(hooked, n)]
            assert (a > b) == (logn in sizes), (split, a, hooked, b)
            checked += 1
    assert checked >= 28


def _ab_ratios(folder: str) -> dict[tuple[str, int], float]:
    """{(precision, log n): B / A} of a recorded A/B (its summary, the automatic plans), read from its copy
    tests/data/fft_h100_ab/<folder>.txt."""
    out, prec = {}, None
    for line in (DATA / "fft_h100_ab" / f"{folder}.txt").read_text().splitlines():
        if line.startswith("fft_"):
            prec = "fp32" if "_f32_" in line else "fp64"
        elif prec and re.match(r"\s+\d+ ", line):
            f = line.split()
            out[(prec, int(f[0]))] = float(f[3])
    return out


def test_hook_call_sizes_replay_the_recorded_ab():
    """hooksplit 2 (tuning file): the hook split's faulted block runs its hooked body as a call of its own (hooksplit 2) exactly where
    every recorded A/B whose B made that call there measured B more than 0.7% faster than A (the hooked body inlined, or at
    fp32 2^21 no split; twice the spread those A/Bs showed where nothing changed), one fault per transform."""
    # B made the call: 2ad7f4a at every size with the split (fp32: every size), 6f9f1a4 at its hooksplit 2
    runs = [(_ab_ratios("ab_hookcall_2ad7f4a"), {"fp32": set(range(3, 25)), "fp64": set(range(3, 25))}),
            (_ab_ratios("ab_hookcall_6f9f1a4"), {"fp32": {10, 13, 21}, "fp64": {15, 16, 24}})]
    assert all(len(r) == 44 for r, _ in runs)
    T = tuning_tables()
    for prec in ("fp32", "fp64"):
        calls = T.call_sizes(prec, "two-sided-tb")
        assert calls <= T.split_sizes(prec, "two-sided-tb")
        for logn in range(3, 25):
            measured = [r[(prec, logn)] for r, made in runs if logn in made[prec]]
            assert measured, (prec, logn)
            assert (min(measured) > 1.007) == (logn in calls), (prec, logn, measured)


def test_hook_kernel_sizes_replay_the_recorded_ab():
    """hooksplit 3 (tuning file): the faulted block runs in a kernel of its own on a second stream (hooksplit 3, names `_hk`) exactly
    where every recorded A/B whose B did so there measured B more than 0.7% faster than A (the measured hooksplit 0 / 1 /
    2), one fault per transform; it wins over hooksplit 2 and the hook split entries, and only sm_90 injection builds take it."""
    # B at every size: ab_hkprio_c3e8877 (fp32 only) and ab_hkprio2_c3e8877 (the aux stream of the greatest priority; the
    # first A/B, ab_hk_c3e8877, ran it on a stream of default priority: another kernel launch order, not this build)
    every = set(range(3, 25))
    runs = [(_ab_ratios("ab_hkprio_c3e8877"), {"fp32": every, "fp64": set()}),
            (_ab_ratios("ab_hkprio2_c3e8877"), {"fp32": every, "fp64": every})]
    assert [len(r) for r, _ in runs] == [22, 44]
    T = tuning_tables()
    for prec in ("fp32", "fp64"):
        kernel = T.hook_sizes(prec, "two-sided-tb", 3)
        for logn in range(3, 25):
            measured = [r[(prec, logn)] for r, made in runs if logn in made[prec]]
            assert measured, (prec, logn)
            assert (min(measured) > 1.007) == (logn in kernel), (prec, logn, measured)
            auto = F.measured_params(prec, "two-sided-tb", logn, inject=True).get("hooksplit", 0)
            assert auto == T.hooksplit_of(prec, "two-sided-tb", logn) == (3 if logn in kernel else 2 if logn in T.call_sizes(prec, "two-sided-tb") else 1 if logn in T.split_sizes(prec, "two-sided-tb") else 0)


def test_tbenc_sizes_replay_the_recorded_search():
    """tbenc (tuning file): the automatic two-sided-tb plans take the staged encodings (tbenc 2, names `_te`; 3, only the launches of
    64 threads per column, `_tl`) exactly where that value measured more than 1% faster than each thread encoding its own
    columns in a search with both (search_tbenc, search_tbenc3, one fault per transform, the latest run of each), and no
    other measured value did elsewhere; a plan given by its keys keeps tbenc 1 unless asked."""
    # (the two-column plans at fp64 2^15 / 2^16 / 2^24 were measured with tbenc 1 / 2 in search_weak35g / _weak35j)
    runs = [r[-1][1] for r in (_recorded_searches("search_tbenc.*.jsonl"),
                                _recorded_searches("search_tbenc3.*.jsonl"),
                                _recorded_searches("search_weak35g.jsonl"),
                                _recorded_searches("search_weak35j.jsonl")) if r]
    assert len(runs) == 4
    tags = {2: "_te", 3: "_tl"}

    def gains(plain: str, n: int, value: int) -> list[float]:
        tail = "_hs_inj" if plain.endswith("_hs_inj") else "_inj"
        name = plain[: -len(tail)] + tags[value] + tail
        return [rows[(name, n)] / rows[(plain, n)] for rows in runs if (name, n) in rows and (plain, n) in rows]

    def untagged(name: str) -> str:
        return name.replace("_te_", "_").replace("_tl_", "_")

    # the staged encodings' gains on the two-column cluster plans (names `_t2_cl_`) of the searches
    cl_gains = [rows[(k, n)] / rows[(k.replace("_cl_te_", "_cl_"), n)]
                for rows in runs for (k, n) in rows if "_t2_cl_te_" in k and (k.replace("_cl_te_", "_cl_"), n) in rows]
    checked = 0
    for (prec, level), sizes in tuning_tables().tbenc.items():
        prot = f"{{scheme: abft, level: {level}, inject: true}}"
        for logn in range(13, 25):
            auto = _before_hk(prec, logn, _variant_name(prec, prot, f"{{logn: {logn}}}"))
            if auto.endswith("_hc_inj"):
                # (hooksplit 2 came after these searches, which measured the plan with the split or without it; one-launch
                # sizes have no staged encodings to measure)
                auto = next((a for a in (auto[:-7] + "_hs_inj", auto[:-7] + "_inj")
                             if any(untagged(k) == untagged(a) for rows in runs for k, _ in rows)), auto[:-7] + "_hs_inj")
            value = sizes.get(logn, 1)
            plain = auto
            for v, tag in tags.items():
                assert (tag + "_" in auto) == (value == v), auto
                plain = plain.replace(tag + "_", "_")
            n = 1 << logn
            if value != 1:
                g = gains(plain, n, value)
                assert g and g[-1] > 1.01, (auto, g)
            else:
                measured = gains(plain, n, 2) + gains(plain, n, 3)
                assert all(x <= 1.01 for x in measured), (plain, measured)
                if not measured and "_t2_cl_" in plain:
                    # a two-column cluster plan not measured with them (fp64 2^21 1024 x 512 x 4, from
                    # search_weak35): the staged encodings lost or tied on every two-column cluster plan search_tbenc
                    # measured them on (2^14, 2^19-2^23)
                    assert len(cl_gains) >= 5 and all(x <= 1.01 for x in cl_gains), cl_gains
                elif not measured:
                    assert logn <= 14, (plain, n)  # (one-launch plans: no staged input)
            checked += 1
        given = _variant_name(prec, prot, f"{{logn: {min(sizes)}, launches: 2}}")
        assert "_te_" not in given and "_tl_" not in given
    assert checked >= 20


def test_prefetch_sizes_replay_the_recorded_search():
    """prefetch (tuning file): the automatic sequential two-sided-tb plans prefetch the next column step (prefetch 2, names `_pf`)
    exactly where that measured more than 1% faster than without in the latest search with both (search_pf, one fault
    per transform), and nowhere else; a plan given by its keys does not unless asked."""
    runs = _recorded_searches("search_pf.jsonl")
    assert runs
    rows = runs[-1][1]
    checked = 0
    for prec in ("fp32", "fp64"):
        prot = "{scheme: abft, level: two-sided-tb, inject: true}"
        sizes = tuning_tables().prefetch.get((prec, "two-sided-tb"), set())
        for logn in range(3, F.TB_SEQ_MAX_LOGN + 1):
            auto = _variant_name(prec, prot, f"{{logn: {logn}}}")
            assert ("_pf_" in auto) == (logn in sizes), auto
            if "_sm_" in auto:
                assert logn not in sizes  # (the measured simultaneous plans: nothing to prefetch)
                continue
            plain = auto.replace("_pf_", "_")
            tail = "_hs_inj" if plain.endswith("_hs_inj") else "_inj"
            with_pf = plain[: -len(tail)] + "_pf" + tail
            n = 1 << logn
            gain = rows[(with_pf, n)] / rows[(plain, n)]
            assert (gain > 1.01) == (logn in sizes), (auto, gain)
            checked += 1
        if sizes:
            given = _variant_name(prec, prot, f"{{logn: {min(sizes)}, bs1: 64}}")
            assert "_pf_" not in given
    assert checked >= 6  # (the sizes the sequential design still has: fp32 2^3-2^6, fp64 2^3 / 2^12)


def test_prefetch_needs_a_sequential_one_launch_plan():
    """prefetch: 2 names the variant `_pf` and sets the launch's Cfg::PREFETCH; a plan without a column step to prefetch
    (the simultaneous two-sided-tb, one column per thread, an unprotected plan) is rejected with the reason."""
    vs, _ = variants("precision: fp64\nprotection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 12, prefetch: 2}\n")
    assert "_pf" in vs[0].name and F.FftFamily().plans(vs[0])[0].launches[0].pf
    for body in ("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 16, prefetch: 2}",
                 "protection: {scheme: abft, level: one-sided}\nparams: {logn: 10, prefetch: 2}",
                 "params: {logn: 10, prefetch: 2}"):
        with pytest.raises(SpecError, match="prefetch: 2 prefetches"):
            load_spec_text(spec(body), "t.yaml")
    vs, _ = variants("precision: fp64\nprotection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 12, prefetch: 1}\n")
    assert "_pf" not in vs[0].name and not F.FftFamily().plans(vs[0])[0].launches[0].pf


def test_tbseq_chooses_the_two_sided_tb_design():
    """tbseq 2 builds the sequential two-sided-tb where the size would take the simultaneous one (one-launch plans whose
    tile and running sums fit, `_sq`), tbseq 1 the simultaneous one on the unprotected plans' rules (`_sm`); the kernels'
    Cfg::TB_SEQ follows. Multi-launch plans, tiles that do not fit and other levels are rejected with the reason."""
    vs, _ = variants("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 13, launches: 1, tbseq: 2, n1: 16, bs1: 4, tcols: 4, minb: 1}\n")
    lp = F.FftFamily().plans(vs[0])[0].launches[0]
    assert "_sq" in vs[0].name and lp.tbseq and lp.seq and lp.L == 4
    vs, _ = variants("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 12, tbseq: 1}\n")
    lp = F.FftFamily().plans(vs[0])[0].launches[0]
    assert "_sm" in vs[0].name and not lp.tbseq and lp.data_path_unprotected and lp.L == 1
    for body, why in (("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 16, tbseq: 2}", "needs a one-launch plan"),
                      ("precision: fp64\nprotection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 13, launches: 1, tbseq: 2}",
                       "shared memory"),
                      ("params: {logn: 12, tbseq: 2}", "chooses two-sided-tb's design"),
                      ("protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 0, tbseq: 2}", "give logn to set tbseq")):
        with pytest.raises(SpecError, match=why):
            load_spec_text(spec(body), "t.yaml")


def test_clean_builds_take_the_measured_plans_and_beat_the_former_clean_plans():
    """Builds without injection code take the injection builds' measured plans (no plans of their own): at fp32 2^13 /
    2^14, where they had plans of their own until the input encodings were fenced off in the code without hooks (ENC_FENCE),
    those plans built without injection code beat the former ones (radix 32 at one block per SM, radix 16) in the same search
    (search_weak36e, no faults)."""
    runs = _recorded_searches("search_weak36e.jsonl")
    assert runs
    rows = runs[-1][1]
    clean_prot, inj_prot = "{scheme: abft, level: two-sided-tb}", "{scheme: abft, level: two-sided-tb, inject: true}"
    for logn, former in ((13, {"n1": 32, "minb": 1}), (14, {"n1": 16, "minb": 1})):
        clean = _variant_name("fp32", clean_prot, f"{{logn: {logn}}}")
        injected = _variant_name("fp32", inj_prot, f"{{logn: {logn}}}")
        assert injected.replace("_hs_inj", "").replace("_hc_inj", "").replace("_inj", "") == clean  # the same plan
        old = _keys_name("fp32", clean_prot, {"logn": logn, **former})
        n = 1 << logn
        assert old != clean and (clean, n) in rows and (old, n) in rows, (clean, old)
        assert rows[(clean, n)] > rows[(old, n)], (clean, rows[(clean, n)], old, rows[(old, n)])


# ---- cluster plans ----------------------------------------------------------------------------


def test_cluster_plans_names_and_constraints():
    vs, rej = variants("""
        variants:
          - params: {logn: 15, N1: 8192, cluster: 1, n1: 16, minb: 2}
          - params: {logn: 15, N1: 16384, cluster: 2}
          - params: {logn: 12, cluster: 1}
        """)
    assert [v.name for v in vs] == ["fft_c2c_f32_none_fwd_logn15_N8192x4_n16x4_bs1x1_t1_mb2_cl",
                                    "fft_c2c_f32_none_fwd_logn15_N16384x2_n16x2_bs1x1_t1_cls",
                                    "fft_c2c_f32_none_fwd_logn12_N2048x2_n16x2_bs1x1_t1_cl"]  # N2 = 2 unless given
    plan = F.FftFamily().plans(vs[0])[0]
    assert plan.cluster == 4 and plan.launches[0].cluster == 4 and plan.launches[1].fused and not plan.launches[0].cl_scatter
    assert F.FftFamily().plans(vs[1])[0].launches[0].cl_scatter
    assert not rej
    cases = {
        "params: {logn: 15, N1: 1024, cluster: 1}": "N2 in 2, 4, 8",
        "params: {logn: 15, launches: 3, N1: 8, N2: 1024, cluster: 2}": "two-launch plans",
        "params: {logn: 15, N1: 8192, cluster: 1, bs1: 4}": "bs1 <= N2 / 2",
        "params: {logn: 15, N1: 8192, cluster: 2, bs1: 2}": "bs1 = 1",
        "params: {logn: 15, launches: 3, cluster: 1}": "N3 in 2, 4, 8",
        "protection: {scheme: abft, level: one-sided}\nparams: {logn: 15, N1: 8192, cluster: 1}": "unprotected plans and the two-sided-tb",
        "protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 12, N1: 1024, cluster: 1}": "simultaneous design",
        "protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 15, N1: 16384, cluster: 2}": "scattered loads. is for unprotected",
        "protection: {scheme: abft, level: two-sided-tb}\nparams: {logn: 13, launches: 3, N1: 16, N2: 64, N3: 8, n2: 2, bs2: 1, cluster: 1}":
            "do not divide among 32 threads",
        "params: {logn: 15, N1: 8192, cluster: 3}": "cluster",
    }
    for body, why in cases.items():
        with pytest.raises(SpecError, match=why):
            load_spec_text(spec(body), "t.yaml")


def test_cluster_plans_need_sm90():
    # an explicit cluster plan is rejected for sm_80; the automatic plans take the rules' plan there instead of the measured
    with pytest.raises(SpecError, match="sm_90 or later"):
        load_spec_text("name: t\nfamily: fft\narch: [sm_80, sm_90]\nparams: {logn: 15, N1: 8192, cluster: 1}\n", "t.yaml")
    s80 = load_spec_text("name: t\nfamily: fft\narch: [sm_80]\nparams: {logn: 15}\n", "t.yaml")
    s90 = load_spec_text("name: t\nfamily: fft\narch: [sm_90]\nparams: {logn: 15}\n", "t.yaml")
    assert s90.variants[0].name.endswith("_cl") and s80.variants[0].name == "fft_c2c_f32_none_fwd_logn15_N256x128_n16x16_bs16x32_t1"
    auto80 = load_spec_text("name: t\nfamily: fft\narch: [sm_80]\nparams: {logn: 0}\n", "t.yaml").variants[0]
    auto90 = load_spec_text("name: t\nfamily: fft\narch: [sm_90]\nparams: {logn: 0}\n", "t.yaml").variants[0]
    assert not any(p.cluster for p in F.FftFamily().plans(auto80))
    assert [p.logn for p in F.FftFamily().plans(auto90) if p.cluster] == [15, 22, 23, 24]
    # the simultaneous two-sided-tb keeps the rules' plan where the unprotected one is a cluster plan
    tb = load_spec_text("name: t\nfamily: fft\narch: [sm_90]\nprecision: fp64\nprotection: {scheme: abft, level: two-sided-tb}\n"
                        "params: {logn: 15}\n", "t.yaml").variants[0]
    assert not F.FftFamily().plans(tb)[0].cluster


def test_two_sided_tb_cluster_plans():
    """Two-sided-tb cluster plans (explicit; the automatic plans stay without clusters until measured): one kernel whose
    fault stages add the fused DFTs' inputs and outputs, a workspace buffer for the rare path, names with _cl."""
    s = load_spec_text(spec("protection: {scheme: abft, level: two-sided-tb, inject: true}\nvariants:\n"
                            "  - params: {logn: 15, N1: 8192, cluster: 1, n1: 16}\n"
                            "  - params: {logn: 23, launches: 3, N1: 1024, N2: 2048, N3: 4, bs2: 4, cluster: 1}\n"), "t.yaml")
    assert [v.name for v in s.variants] == ["fft_c2c_f32_abft-2sided-tb_fwd_logn15_N8192x4_n16x4_bs1x1_t1_cl_inj",
                                            "fft_c2c_f32_abft-2sided-tb_fwd_logn23_N1024x2048x4_n16x16x4_bs4x4x1_t1_cl_inj"]
    fam = F.FftFamily()
    two, three = (fam.plans(v)[0] for v in s.variants)
    k = two.launches[0]
    assert k.cluster_tb and k.L == 1 and k.fault_steps == k.P + 3
    # 8192 / 4 positions per block, two per 16-byte vector, over 512 threads: two vectors (four DFTs) a thread
    assert k.fused_vectors == 1024 and k.fused_dfts == 4 and k.fault_elems == max(k.n, 4 * 4)
    assert three.launches[1].cluster_tb and not three.launches[0].cluster_tb and three.launches[1].fault_steps == three.launches[1].P + 3
    ctx2 = fam.plan_context(s.variants[0], two)
    ctx3 = fam.plan_context(s.variants[1], three)
    assert ctx2["cltb"] and ctx2["ws_bufs"] == 1 and len(ctx2["kernels"]) == 1
    assert ctx3["cltb"] and ctx3["ws_bufs"] == 2 and len(ctx3["kernels"]) == 2
    unprot = load_spec_text(spec("params: {logn: 15, N1: 8192, cluster: 1, n1: 16}"), "t.yaml").variants[0]
    c = fam.plan_context(unprot, fam.plans(unprot)[0])
    assert not c["cltb"] and c["ws_bufs"] == 0 and c["kernels"][0]["fault_steps"] == fam.plans(unprot)[0].launches[0].P + 1


@pytest.mark.parametrize("precision, params, direction", [("fp32", {"logn": 13, "N1": 2048, "cluster": 1, "n1": 16}, "forward"),
                                                        ("fp64", {"logn": 13, "N1": 16, "N2": 128, "N3": 4, "n2": 16, "bs2": 4, "cluster": 1}, "inverse")])
def test_model_of_the_fused_dft_checks(precision, params, direction):
    """The NumPy model of a two-sided-tb cluster plan's fused launch: clean runs detect nothing (scores well below 1); a
    fault in a fused DFT's output is located by the quotient of the two residuals and subtracted, one in an input is
    recomputed from the inputs; either way the result verifies."""
    rng = np.random.default_rng(9)
    n = 1 << params["logn"]
    x = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
    m = F.FftModel(precision, "two-sided-tb", params, direction)
    last = m.plan.launches[-1]
    assert last.fused and m.plan.launches[-2].cluster_tb
    ref = F.fft_reference(x.astype(m.cdt), inverse=direction == "inverse")
    tol = F.tolerance(precision, params["logn"])
    def err(y):  # (an uncorrected exponent flip makes the norm overflow: inf, over the tolerance)
        with np.errstate(over="ignore"):
            return float(np.max(np.linalg.norm(y - ref, axis=1) / np.linalg.norm(ref, axis=1)))

    y, rep = m.run(x)
    assert rep.detected == 0 and 0 < rep.max_score < 0.5 and err(y) < tol / 8
    cols = 2 * last.cols_per_signal
    for stage, bit in ((1, 30 if precision == "fp32" else 62), (0, 29 if precision == "fp32" else 61), (1, 95 if precision == "fp64" else 60)):
        for _ in range(3):
            f = F.ModelFault(last.index, stage, int(rng.integers(cols)), int(rng.integers(last.R)), bit=bit)
            yu, _ = m.run(x, [f], correct=False)
            y, rep = m.run(x, [f])
            assert err(yu) > tol and rep.detected == 1 and rep.corrected == 1 and rep.false_alarms == 0, (f, rep)
            assert err(y) < tol / 8
            # an output's error is located (no recomputation); an input's changes every output: recomputed
            assert rep.recomputed == (1 if stage == 0 else 0) and len(rep.located) == (0 if stage == 0 else 1)


def test_cluster_plan_model_is_the_two_launch_plan():
    """The NumPy model of a cluster plan is its two launches (launch 2's DFTs are the same codelet on the device)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4096)) + 1j * rng.standard_normal((3, 4096))
    for prec, params in (("fp32", {"logn": 12, "N1": 1024, "cluster": 1, "n1": 16}), ("fp64", {"logn": 12, "N1": 512, "cluster": 2})):
        m = F.FftModel(prec, "none", params)
        assert [lp.R for lp in m.plan.launches] == [params["N1"], 4096 // params["N1"]]
        y, rep = m.run(x)
        ref = F.fft_reference(x.astype(m.cdt))
        assert np.max(np.linalg.norm(y - ref, axis=1) / np.linalg.norm(ref, axis=1)) < F.tolerance(prec, 12) / 8
