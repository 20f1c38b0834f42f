"""Tuning as data: the generic loader and writer of ftgen/tuning/<gpu>.json, and the fft family's use of it (measured
choices at resolution, names from resolved parameters only, search winners into entries). No GPU, no compiler."""

from __future__ import annotations

import json
import os

import pytest

from ftgen import tuning
from ftgen.cli import main
from ftgen.families import fft as F
from ftgen.spec import load_spec_text


def name_of(precision: str, prot: str, params: str, arch: str = "sm_90") -> str:
    txt = f"name: t\nfamily: fft\narch: [{arch}]\nprecision: {precision}\nprotection: {prot}\nparams: {params}\n"
    return load_spec_text(txt, "t.yaml").variants[0].name


TB_INJ = "{scheme: abft, level: two-sided-tb, inject: true}"


def test_the_h100_file_is_the_default_and_has_provenance(monkeypatch):
    monkeypatch.delenv("FTGEN_TUNING", raising=False)
    monkeypatch.delenv("FTGEN_GPU", raising=False)
    t = tuning.load()
    assert t.gpu == "h100" and t.path == tuning.TUNING_DIR / "h100.json"
    assert t.provenance["gpu"].startswith("NVIDIA H100") and "results/h100/fft" in t.provenance["results"]
    fam = t.for_family("fft")
    assert len(fam) > 50 and fam.provenance
    notes = fam.provenance[0]["notes"]
    for e in fam:  # every entry names the measurement that supports it
        assert set(e["key"]) <= {"precision", "level", "logn", "arch"} and e["params"], e
        assert all(ref in notes for ref in e["evidence"].split()), e
    assert fam.lookup(precision="fp64", level="none", logn=20) == {"launches": 2, "bs1": 4, "bs2": 4, "minb": 2}
    assert fam.lookup(precision="fp64", level="none", logn=21) == {}  # (a cluster plan: keyed to sm_90)
    assert fam.lookup(precision="fp64", level="none", logn=21, arch="sm_90")["cluster"] == 1
    assert tuning.load("h100").for_family("nosuch").entries == ()


def test_a_gpu_without_a_file_takes_the_rules(monkeypatch):
    auto = name_of("fp64", "{scheme: none}", "{logn: 20}")
    assert auto.endswith("_N1024x1024_n8x8_bs4x4_t1_mb2")  # the H100's measured plan
    rules = name_of("fp64", "{scheme: none}", "{logn: 20, launches: 2}")
    monkeypatch.setenv("FTGEN_GPU", "nosuchgpu")
    assert tuning.load().for_family("fft").entries == ()
    assert name_of("fp64", "{scheme: none}", "{logn: 20}") == rules
    monkeypatch.setenv("FTGEN_TUNING", "h100")  # FTGEN_TUNING first
    assert name_of("fp64", "{scheme: none}", "{logn: 20}") == auto


def test_bad_tuning_names_and_files_are_input_errors(tmp_path, monkeypatch):
    with pytest.raises(tuning.TuningError, match="a GPU name is lower-case"):
        tuning.load("H100 SXM")
    with pytest.raises(tuning.TuningError, match="does not exist"):
        tuning.load(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1, "families": {"fft": {"entries": [{"key": {"logn": [1]}, "params": {}}]}}}')
    with pytest.raises(tuning.TuningError, match=r"families.fft.entries\[0\].key.logn"):
        tuning.load(str(bad))
    typo = tmp_path / "typo.json"
    tuning.write(typo, "fft", [{"key": {"precision": "fp32", "level": "none", "logn": 12}, "params": {"n_1": 8}}], {})
    monkeypatch.setenv("FTGEN_TUNING", str(typo))
    with pytest.raises(tuning.TuningError, match=r"fft entry params.n_1: 8; an entry sets integers of launches"):
        F.resolve_params("fp32", "none", {"logn": 12})
    monkeypatch.delenv("FTGEN_TUNING")
    bad.write_text("{")
    with pytest.raises(tuning.TuningError, match="cannot read it as JSON"):
        tuning.load(str(bad))
    # the CLI: a bad tuning file is bad input (exit 2), not a traceback
    monkeypatch.setenv("FTGEN_TUNING", str(bad))
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nfamily: fft\nparams: {logn: 12}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_write_merges_entries_and_appends_provenance(tmp_path):
    path = tmp_path / "x100.json"
    a = {"key": {"precision": "fp32", "level": "none", "logn": 12}, "params": {"n1": 8}}
    b = {"key": {"precision": "fp32", "level": "none", "logn": 13}, "params": {"n1": 16}}
    tuning.write(path, "fft", [a, b], {"what": "first"})
    tuning.write(path, "fft", [{**a, "params": {"n1": 4}, "evidence": "run 2"}], {"what": "second"})
    t = tuning.load(str(path))
    fam = t.for_family("fft")
    assert t.gpu == "x100" and [p["what"] for p in fam.provenance] == ["first", "second"]
    assert fam.lookup(precision="fp32", level="none", logn=12) == {"n1": 4}
    assert fam.lookup(precision="fp32", level="none", logn=13) == {"n1": 16}
    assert len(fam) == 2 and not list(tmp_path.glob(".*"))  # (no temporary file left behind)
    with pytest.raises(tuning.TuningError, match="an entry is an object"):
        tuning.write(path, "fft", [{"key": {}}], {})
    assert tuning.load(str(path)).for_family("fft").lookup(precision="fp32", level="none", logn=12) == {"n1": 4}


def _winner(precision: str, prot: str, params: str, ms: float, arch: str = "sm_90", n_batch: int = 64) -> dict:
    """A search result row of the variant (its name, protection and resolved parameters, as the bench rows carry them)."""
    s = load_spec_text(f"name: t\nfamily: fft\narch: [{arch}]\nprecision: {precision}\nprotection: {prot}\nparams: {params}\n", "t.yaml")
    (v,) = s.variants
    meta = json.loads("{" + s.family.resolved_meta(v) + "}")
    n = 1 << meta["params"]["logn"]
    return {**meta, "shape": {"n": n, "batch": n_batch}, "ms": {"median": ms}, "ref": {"lib": "cufft", "ms": 1.0}, "ok": True}


def test_search_winners_become_entries_that_resolve_to_the_winners(tmp_path, monkeypatch):
    """Written to a tuning file and read at resolution, a search's winners are what the automatic variants of their sizes
    build: the same names (derived from the resolved parameters, not from which entry gave them)."""
    winners = [
        _winner("fp32", "{scheme: none}", "{logn: 12, n1: 8, bs1: 2}", 0.9),
        _winner("fp32", "{scheme: none}", "{logn: 12, n1: 4}", 1.1),  # slower at the same size: not taken
        _winner("fp64", TB_INJ, "{logn: 20, launches: 3, N1: 512, N2: 512, N3: 4, bs2: 4, tcols: 2, cluster: 1, n2: 8, hooksplit: 3}", 1.0),
        _winner("fp32", TB_INJ, "{logn: 20, launches: 2, tbenc: 2, hooksplit: 1}", 1.0),
        _winner("fp32", "{scheme: none}", "{logn: 0}", 0.5),  # every-size variants: the rules' plans, no entry
        {**_winner("fp32", "{scheme: none}", "{logn: 14, launches: 2}", 0.5), "ok": False},  # did not verify
        {**_winner("fp32", "{scheme: none}", "{logn: 16, launches: 2}", 0.5), "verified": False},  # ran with --no-ref
        {**_winner("fp32", "{scheme: none}", "{logn: 12, n1: 16}", 0.1), "verified": False},  # faster, unverified
    ]
    entries = F.FftFamily().tuning_entries(winners)
    keys = [e["key"] for e in entries]
    assert {"precision": "fp32", "level": "none", "logn": 12} in keys and not any(k["logn"] in (0, 14, 16) for k in keys)
    assert {"precision": "fp64", "level": "two-sided-tb", "logn": 20, "arch": "sm_90"} in keys
    path = tmp_path / "t.json"
    tuning.write(path, "fft", entries, {"what": "test search", "gpu": "none"})
    monkeypatch.setenv("FTGEN_TUNING", str(path))
    assert name_of("fp32", "{scheme: none}", "{logn: 12}") == winners[0]["kernel"]
    assert name_of("fp64", TB_INJ, "{logn: 20}") == winners[2]["kernel"]
    assert name_of("fp32", TB_INJ, "{logn: 20}") == winners[3]["kernel"]
    # an sm_80 build takes no cluster plan and no hook placement; a build without injection code no hook placement
    assert "_cl" not in name_of("fp64", TB_INJ, "{logn: 20}", arch="sm_80")
    assert name_of("fp32", "{scheme: abft, level: two-sided-tb}", "{logn: 20}") + "_hs_inj" == winners[3]["kernel"]


def test_names_do_not_depend_on_which_entry_gave_the_parameters(tmp_path, monkeypatch):
    """A size's measured plan moved from one entry to another (or given by the variant itself) builds the same kernel
    under the same name."""
    base = name_of("fp64", "{scheme: none}", "{logn: 20}")
    given = name_of("fp64", "{scheme: none}", "{logn: 20, launches: 2, bs1: 4, bs2: 4, minb: 2}")
    assert base == given
    path = tmp_path / "t.json"
    # the same plan as a two-sided-tb size's fallback (the simultaneous design takes the unprotected plans): same kernel
    tuning.write(path, "fft", [{"key": {"precision": "fp64", "level": "none", "logn": 20}, "params": {"launches": 2, "bs1": 4, "bs2": 4, "minb": 2}}], {})
    monkeypatch.setenv("FTGEN_TUNING", str(path))
    assert name_of("fp64", "{scheme: none}", "{logn: 20}") == base


def test_search_write_tuning_merges_the_winners(tmp_path):
    """`ftgen search --write-tuning PATH`: the winners' fixed-size plans become entries of the tuning file, which
    then resolves the same plan."""
    from types import SimpleNamespace

    from ftgen import tuning
    from ftgen.search.merge import write_tuning
    from ftgen.spec.loader import load_spec_text

    s = load_spec_text(
        "name: t\nfamily: fft\narch: [sm_90]\nprecision: fp32\nprotection: {scheme: abft, level: two-sided-tb}\n"
        "params: {logn: 10, launches: 1, N1: 1024, n1: 16, bs1: 2}\n",
        "t.yaml",
    )
    v = s.variants[0]
    row = {"kernel": v.name, "precision": v.precision, "protection": v.protection.to_dict(), "params": v.param_dict,
           "shape": {"n": 1024, "batch": 65536}, "ms": {"median": 1.0}, "ref": {"lib": "cufft", "ms": 0.95}, "ok": True}
    path = tmp_path / "gpu1.json"
    write_tuning(str(path), SimpleNamespace(family=s.family, source="t.yaml"), [row], {"gpu": "X", "git_sha": "abc"}, print)
    t = tuning.load(str(path)).for_family("fft")
    got = t.lookup(precision="fp32", level="two-sided-tb", logn=10)
    assert (got["n1"], got["bs1"]) == (16, 2), got
    assert t.provenance[-1]["what"] == "ftgen search t.yaml"


def test_gpu_names_map_to_tuning_names():
    assert tuning.short_name("NVIDIA H100 80GB HBM3") == "h100"
    assert tuning.short_name("NVIDIA H200") == "h200"
    assert tuning.short_name("NVIDIA A100-SXM4-80GB") == "a100"
    assert tuning.short_name("NVIDIA GH200 480GB") == "gh200"
    assert tuning.short_name("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert tuning.short_name("Some Card (rev 2)") == "some-card-rev-2"


def _detected(monkeypatch, found):
    monkeypatch.delenv("FTGEN_TUNING", raising=False)
    monkeypatch.delenv("FTGEN_GPU", raising=False)
    monkeypatch.setattr(tuning, "detect_gpu", lambda: found)


def test_the_gpu_of_the_machine_picks_its_file_else_its_architectures_else_the_rules(monkeypatch):
    """The order: FTGEN_TUNING, FTGEN_GPU, the detected GPU's own file, a file measured on its architecture, none (the
    rules); without a GPU, h100."""
    measured = name_of("fp64", "{scheme: none}", "{logn: 20}")
    rules = name_of("fp64", "{scheme: none}", "{logn: 20, launches: 2}")
    assert measured != rules
    _detected(monkeypatch, None)
    assert tuning.choice() == tuning.Choice("h100", "default (no GPU detected)")
    _detected(monkeypatch, ("NVIDIA H100 80GB HBM3", "sm_90"))
    assert tuning.choice() == tuning.Choice("h100", "detected NVIDIA H100 80GB HBM3")
    _detected(monkeypatch, ("NVIDIA H200", "sm_90"))  # no h200 file: the sm_90 one
    c = tuning.choice()
    assert c.gpu == "h100" and "no h200 file, the sm_90 file h100" in c.why
    assert tuning.load().gpu == "h100" and name_of("fp64", "{scheme: none}", "{logn: 20}") == measured
    _detected(monkeypatch, ("NVIDIA A100-SXM4-80GB", "sm_80"))  # nothing measured on sm_80: the rules
    c = tuning.choice()
    assert c.gpu == "" and "the rules apply" in c.why and c.to_dict()["gpu"] is None
    assert tuning.load().for_family("fft").entries == ()
    assert name_of("fp64", "{scheme: none}", "{logn: 20}") == rules
    monkeypatch.setenv("FTGEN_GPU", "h100")  # a named GPU comes first
    assert tuning.choice() == tuning.Choice("h100", "FTGEN_GPU")
    assert name_of("fp64", "{scheme: none}", "{logn: 20}") == measured


def test_detection_reads_nvidia_smi_and_can_be_turned_off(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA H200, 9.0'\necho 'NVIDIA H200, 9.0'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    detect = tuning.detect_gpu.__wrapped__  # (uncached)
    monkeypatch.setenv("FTGEN_TUNING_DETECT", "1")
    assert detect() == ("NVIDIA H200", "sm_90")
    fake.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    assert detect() is None
    monkeypatch.setenv("FTGEN_TUNING_DETECT", "0")
    fake.write_text("#!/bin/sh\necho 'NVIDIA H200, 9.0'\n")
    assert detect() is None


def test_the_manifest_records_the_tuning_choice(tmp_path, monkeypatch):
    _detected(monkeypatch, ("NVIDIA A100-SXM4-80GB", "sm_80"))
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nfamily: fft\nparams: {logn: 12}\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "out")]) == 0
    got = json.loads((tmp_path / "out" / "s" / "manifest.json").read_text())["tuning"]
    assert got["gpu"] is None and got["why"].startswith("detected NVIDIA A100-SXM4-80GB (sm_80)")
