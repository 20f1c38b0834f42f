"""Campaign aggregation (coverage, false alarms, per bit, ROC) on synthetic trial rows, and the
command's input checks. The trials themselves run on a GPU (scripts/gpu_gemm.sh)."""

from __future__ import annotations

import pytest

from ftgen.cli import main
from ftgen import tolerance
from ftgen.faults import campaign, counters_violated, failed_trials, failure_message, is_corrected, is_significant, per_bit, roc, summarize


def trial(injected, significant=False, detected=0, ok=True, score=0.1, bit=3, err=1e-7):
    return {"trial": 0, "kernel": "k", "precision": "fp32", "dist": "normal", "injected": injected,
            "significant": significant, "detected": detected, "ok": ok, "score": score, "max_rel_err": err,
            "fault": {"bit": bit}, "false_alarm": (not injected) and detected > 0}


def test_summary_counts():
    rows = [trial(0)] * 5 + [trial(0, detected=1, score=2.0)] + [
        trial(1, True, 1, True, 50.0, 30), trial(1, True, 1, True, 9.0, 29), trial(1, True, 0, False, 0.5, 12, 1e-3),
        trial(1, False, 0, True, 0.2, 1),
    ]
    s = summarize("k", rows, "spec.yaml")
    assert (s["clean_trials"], s["faulty_trials"], s["significant"], s["detected"], s["corrected"]) == (6, 4, 3, 2, 2)
    assert s["coverage"] == 2 / 3 and s["false_alarms"] == 1 and s["false_alarm_rate"] == 1 / 6
    # the largest error an undetected fault left (the significant one missed), whatever the executable's `ok`
    assert s["max_residual_rel_err"] == 1e-3 and s["max_clean_score"] == 2.0 and s["min_significant_score"] == 0.5
    assert "escalated_per_clean_trial" not in s  # only where the rows carry such a counter
    # rows without a depth the rule covers keep the executable's verdicts; no tolerance at all here
    assert s["significance"] == {"rule": None, "tolerance": None, "max_clean_err": 1e-7}
    esc = [dict(trial(0), escalated=e) for e in (0, 3, 0, 1)]
    s = summarize("k", esc + rows[-4:])
    assert s["escalated_per_clean_trial"] == 1.0 and s["max_escalated_clean"] == 3
    assert "trial_per_clean_trial" not in s and "detected_per_clean_trial" not in s  # ids and the named counters: no
    bits = {b["bit"]: b for b in per_bit(rows)}
    assert bits[12] == {"bit": 12, "faults": 1, "significant": 1, "detected": 0, "corrected": 0}
    r = {round(p["threshold_multiplier"], 6): p for p in roc(rows)}
    assert r[1.0]["tpr"] == 2 / 3 and r[1.0]["fpr"] == 1 / 6
    assert r[1000.0]["tpr"] == 0 and r[0.001]["tpr"] == 1.0


def test_a_null_score_is_over_every_threshold():
    # the executables write a non-finite score (a fault that made the residual Inf or NaN) as JSON null
    rows = [trial(0)] * 3 + [trial(1, True, 1, True, None, 30), trial(1, True, 1, True, 4.0, 29)]
    s = summarize("k", rows)
    assert s["corrected"] == 2 and s["max_clean_score"] == 0.1
    r = {round(p["threshold_multiplier"], 6): p for p in roc(rows)}
    assert r[1000.0]["tpr"] == 0.5 and r[1.0]["tpr"] == 1.0 and r[1.0]["fpr"] == 0.0


def test_campaign_needs_injection_builds(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nfamily: gemm\nprotection: {scheme: abft, level: threadblock}\n")
    assert main(["campaign", str(spec), "-o", str(tmp_path / "g")]) == 2
    assert "inject: true" in capsys.readouterr().err
    assert main(["campaign", str(spec), "--dists", "cauchy"]) == 2


def test_a_campaign_shape_outside_a_variant_s_range_exits_2_before_building(tmp_path, capsys):
    """The fused kmeans backend runs dims <= 32: the family's default campaign shape (64 dims) and an explicit shape
    outside the range are refused with the rule and nothing generated; a shape inside passes that check."""
    spec = tmp_path / "f.yaml"
    spec.write_text("name: f\nfamily: kmeans\narch: [sm_90a]\nprecision: tf32\n"
                    "protection: {scheme: abft, level: threadblock, correct: detect, inject: true}\n"
                    "params: {backend: fused, strip: 64, warps: 8}\n")
    out = tmp_path / "g"
    assert main(["campaign", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "16384x64x256 (the family default)" in err and "runs dims 1..32 only" in err and "--kernels" in err
    assert main(["campaign", str(spec), "-o", str(out), "--shape", "200011x29x100000"]) == 2
    assert "shared memory" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("ok", ["true", "false"])
def test_a_shape_the_variant_skips_is_an_error(tmp_path, ok):
    """A fixed-size variant asked for another size prints a skipped row (ok either way) and no trials; the campaign
    must not report it as a clean 0/0 (a campaign script once ran 2^14 variants at 2^23's shape and summarized
    nothing)."""
    exe = tmp_path / "k"
    exe.write_text('#!/bin/sh\necho \'{"kernel": "k", "shape": {"n": 8388608, "batch": 1}, "skipped": "sizes 16384", "ok": %s}\'\n' % ok)
    exe.chmod(0o755)
    (tmp_path / "bin").mkdir()
    exe.rename(tmp_path / "bin" / "k")
    rows, summaries = campaign(tmp_path, [{"kernel": "k"}], shape="8388608x1", trials=3, dists=("normal", "uniform"))
    assert len(rows) == 1 and not rows[0]["ok"]  # said once: the other runs are not tried
    assert rows[0]["error"]["kind"] == "shape" and "8388608x1" in rows[0]["error"]["message"]
    assert summaries[0]["clean_trials"] == summaries[0]["faulty_trials"] == 0


K = 1024
TOL = tolerance.tolerance("fp32", K)  # the rule's tolerance of these rows (~7.2e-6)


def row(injected, unc=None, err=2e-7, detected=0, ok=True, applied=None, site=None, **extra):
    """A trial row as the executables write it (DESIGN / docs/campaign-protocol.md), at shape k = 1024, fp32."""
    r = {"trial": 0, "kernel": "k", "precision": "fp32", "shape": {"m": 64, "n": 64, "k": K}, "dist": "normal",
         "injected": injected, "detected": detected, "ok": ok, "max_rel_err": err, "tolerance": 1e-3, "score": 0.1,
         "uncorrected_err": err if unc is None else unc, "significant": True}
    if injected:
        r["fault"] = {"applied": injected if applied is None else applied, "bit": 20}
        if site:
            r["fault"]["site"] = site
    r.update(extra)
    return r


def test_summary_judges_significance_by_the_rule_and_never_counts_a_wrong_output_as_corrected():
    clean = [row(0, err=1e-7), row(0, err=4e-7)]  # largest clean error 4e-7
    good = row(1, unc=1e-2, err=3e-7, detected=1)  # significant, detected, corrected
    wrong = row(1, unc=1e-2, err=1e-3, detected=1, ok=True)  # detected but the output is still wrong (ok lies)
    missed = row(1, unc=3e-5, err=3e-5)  # significant at the rule, undetected
    small = row(1, unc=3e-6, err=3e-6)  # below the rule and 10x the clean error, above 2x
    bogus = row(1, unc=1e-2, err=3e-7, detected=3, applied=1)  # 3 detections of 1 fault, no false alarm: flagged
    alarms_ok = row(1, unc=1e-2, err=3e-7, detected=2, applied=1, clean_false_alarms=1)  # its clean run alarmed once
    s = summarize("k", clean + [good, wrong, missed, small, bogus, alarms_ok])
    sig = s["significance"]
    assert sig["tolerance"] == TOL and sig["max_clean_err"] == 4e-7 and sig["rule"].startswith("fp32:")
    # at the rule: good, wrong, missed, bogus, alarms_ok significant; good and alarms_ok corrected
    assert (s["significant"], s["detected"], s["corrected"]) == (5, 4, 2)
    assert s["coverage"] == 2 / 5 and s["detected_not_corrected"] == 2
    assert s["counter_violations"] == 1 and counters_violated(bogus) and not counters_violated(alarms_ok)
    # a detection must end corrected, recomputed or uncorrectable: one that reports none of them is flagged (the wgmma
    # attention kernels once lost their recomputations on the way to the row)
    unaccounted = row(1, unc=1e-2, err=3e-7, detected=1, corrected=0, recomputed=0, uncorrectable=0)
    assert counters_violated(unaccounted)
    assert not counters_violated(row(1, unc=1e-2, err=3e-7, detected=1, corrected=0, recomputed=1, uncorrectable=0))
    s2 = summarize("k", clean + [good, unaccounted])
    assert (s2["significant"], s2["corrected"], s2["counter_violations"]) == (2, 1, 1)
    assert s["max_residual_rel_err"] == 3e-5  # the missed fault (small, also undetected, left 3e-6)
    assert s["max_corrected_rel_err"] == 3e-7
    at = s["coverage_at"]
    assert at["rule"] == {"tolerance": TOL, "significant": 5, "corrected": 2, "coverage": 2 / 5}
    assert at["2x_clean"]["tolerance"] == 8e-7 and at["2x_clean"]["significant"] == 6  # `small` counts there
    assert at["2x_clean"]["corrected"] == 2
    assert at["10x_clean"]["significant"] == 5 and at["100x_clean"]["significant"] == 4  # 4e-5: `missed` drops out
    assert at["100x_clean"]["corrected"] == 2 and at["100x_clean"]["coverage"] == 0.5
    bits = per_bit(clean + [good, wrong, missed, small, bogus, alarms_ok])
    assert bits == [{"bit": 20, "faults": 6, "significant": 5, "detected": 4, "corrected": 2}]


def test_a_detected_but_wrong_trial_is_never_corrected_at_any_tolerance():
    rows = [row(0, err=1e-7)] * 4 + [row(1, unc=1.0, err=0.5, detected=1, ok=True)] * 3
    s = summarize("k", rows)
    assert s["significant"] == 3 and s["detected"] == 3 and s["corrected"] == 0 and s["coverage"] == 0.0
    assert all(v["corrected"] == 0 for v in s["coverage_at"].values())
    # a non-finite output (JSON null) is wrong too
    s = summarize("k", [row(0)] + [row(1, unc=None, err=None, detected=1)])
    assert s["corrected"] == 0 and s["significant"] == 1


def test_rows_without_the_rules_depth_keep_the_executables_tolerance():
    fft = [dict(row(0, err=1e-7), shape={"n": 4096, "batch": 8}, tolerance=5e-6),
           dict(row(1, unc=1e-5, err=2e-7, detected=1), shape={"n": 4096, "batch": 8}, tolerance=5e-6),
           dict(row(1, unc=4e-6, err=4e-6), shape={"n": 4096, "batch": 8}, tolerance=5e-6)]
    s = summarize("k", fft)
    assert s["significance"]["rule"] == "executable" and s["significance"]["tolerance"] == 5e-6
    assert (s["significant"], s["corrected"]) == (1, 1)


def test_per_site_and_generic_counters():
    rows = [row(0, escalated=2, prefilter_hits=1), row(0, escalated=0, prefilter_hits=3),
            row(1, unc=1e-2, err=2e-7, detected=1, site="accumulator", escalated=5),
            row(1, unc=1e-2, err=1e-2, site="operand_a"), row(1, unc=1e-2, err=2e-7, detected=1, site="operand_a")]
    s = summarize("k", rows)
    assert s["by_site"] == {"accumulator": {"faults": 1, "significant": 1, "detected": 1, "corrected": 1},
                            "operand_a": {"faults": 2, "significant": 2, "detected": 1, "corrected": 1}}
    assert s["escalated_per_clean_trial"] == 1.0 and s["max_escalated_clean"] == 2
    assert s["escalated_per_faulty_trial"] == 5.0 and s["max_escalated_faulty"] == 5
    assert s["prefilter_hits_per_clean_trial"] == 2.0 and s["max_prefilter_hits_clean"] == 3
    assert "by_site" not in summarize("k", [row(0), row(1, unc=1e-2, detected=1)])


def test_the_wrong_output_check_is_what_catches_a_detected_but_wrong_trial():
    """Plant the bug (a detected, significant trial counted as corrected whatever its output) in a copy of the
    module: the summary's behavioural test above must then fail."""
    import importlib.util
    import sys

    import ftgen.faults as faults

    src = open(faults.__file__).read()
    planted = src.replace("        return _err(r) <= tol\n", "        return True\n")
    assert planted != src
    spec = importlib.util.spec_from_loader("ftgen.faults_planted", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "ftgen.faults"
    sys.modules["ftgen.faults_planted"] = mod
    try:
        exec(compile(planted, faults.__file__, "exec"), mod.__dict__)
        s = mod.summarize("k", [row(0, err=1e-7)] * 4 + [row(1, unc=1.0, err=0.5, detected=1, ok=True)] * 3)
        assert s["corrected"] == 3  # the planted bug counts them ...
        s = summarize("k", [row(0, err=1e-7)] * 4 + [row(1, unc=1.0, err=0.5, detected=1, ok=True)] * 3)
        assert s["corrected"] == 0  # ... the module does not
    finally:
        del sys.modules["ftgen.faults_planted"]


def test_a_clean_trial_that_fails_verification_fails_the_campaign_and_scales_no_tolerance():
    """A kernel wrong with no fault at all: its clean trial (ok false, error 5.0) fails the campaign, and is left out
    of max_clean_err, so the coverage_at tolerances stay those of the clean trials that passed."""
    wrong_clean = row(0, err=5.0, ok=False)
    good = row(1, unc=1e-2, err=3e-7, detected=1)
    rows = [row(0, err=1e-7), wrong_clean, good]
    s = summarize("k", rows)
    assert s["significance"]["max_clean_err"] == 1e-7
    assert s["coverage_at"]["2x_clean"]["tolerance"] == 2e-7 and s["coverage_at"]["100x_clean"]["tolerance"] == 100 * 1e-7
    assert s["not_ok"] == 1 and s["failed_trials"] == 1
    assert failed_trials(rows) == [wrong_clean]
    why = failure_message(rows)
    assert why and "1 trial(s) failed verification (1 clean, 0 faulty" in why and "max_rel_err 5.0" in why
    # only failing clean trials: no scale at all
    assert summarize("k", [wrong_clean, good])["coverage_at"]["2x_clean"]["tolerance"] is None
    assert failure_message([row(0), good]) is None


def test_which_faulty_trials_that_fail_verification_fail_the_campaign():
    """A significant fault left undetected is a miss (the coverage counts it), not a failure; a detected fault whose
    output is still wrong, or a fault that did not matter left uncorrected while the output fails, is a failure."""
    miss = row(1, unc=1e-2, err=1e-2, ok=False, significant=True)
    bad_fix = row(1, unc=1e-2, err=1e-2, detected=1, ok=False)
    broke = row(1, unc=1e-9, err=1e-2, ok=False, significant=False)
    rows = [row(0), miss, bad_fix, broke]
    assert failed_trials(rows) == [bad_fix, broke]
    assert failed_trials([row(0), miss]) == [] and failure_message([row(0), miss]) is None
    assert "2 trial(s) failed verification (0 clean, 2 faulty" in failure_message(rows)
    # an executable run that failed is named first
    run = {"kernel": "k", "ok": False, "error": {"kind": "runtime", "message": "exit code 1: boom"}}
    assert failure_message([run] + rows) == "1 executable run(s) failed during the campaign: exit code 1: boom"


def test_a_trial_the_executable_failed_is_never_corrected():
    """A family's checks beyond the output error (kmeans: the inertia) fail the trial's `ok` with a small max_rel_err:
    such a trial is not corrected."""
    failed = row(1, unc=1e-2, err=1e-8, detected=1, ok=False)
    assert not is_corrected(failed, TOL) and is_corrected(dict(failed, ok=True), TOL)
    s = summarize("k", [row(0), failed])
    assert (s["significant"], s["detected"], s["corrected"], s["coverage"]) == (1, 1, 0, 0.0)
    assert all(v["corrected"] == 0 for v in s["coverage_at"].values())
    # a row without `ok` is judged by its error alone
    assert is_corrected({k: v for k, v in failed.items() if k != "ok"}, TOL)


def test_a_nan_error_is_over_every_tolerance():
    nan = float("nan")
    assert is_significant(row(1, unc=nan, err=1e-8, detected=1), TOL)
    assert is_significant(row(1, unc=nan), 1e300)
    assert not is_corrected(row(1, unc=1e-2, err=nan, detected=1), TOL)
    s = summarize("k", [row(0), row(1, unc=nan, err=nan), row(1, unc=1e-2, err=nan, detected=1)])
    assert (s["significant"], s["corrected"]) == (2, 0) and s["max_residual_rel_err"] == float("inf")
    assert s["coverage_at"]["rule"]["significant"] == 2
    # a NaN clean error is no scale for coverage_at
    assert summarize("k", [row(0, err=nan), row(1, unc=1e-2, err=3e-7, detected=1)])["coverage_at"]["2x_clean"]["tolerance"] is None


def test_a_clean_detection_is_a_false_alarm_without_the_flag():
    rows = [row(0), row(0, detected=1, false_alarm=False), row(0, detected=0, false_alarm=True)]
    s = summarize("k", rows)
    assert s["false_alarms"] == 2 and s["false_alarm_rate"] == 2 / 3
