"""Campaign aggregation (coverage, false alarms, per bit, ROC) on synthetic trial rows, and the
command's input checks. The trials themselves run on a GPU (scripts/gpu_gemm.sh)."""

from __future__ import annotations

from ftgen.cli import main
from ftgen.faults import per_bit, roc, run_trials, summarize


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
    assert s["max_residual_rel_err"] == 1e-7 and s["max_clean_score"] == 2.0 and s["min_significant_score"] == 0.5
    assert "escalated_per_clean_trial" not in s  # only where the rows carry a prefilter's escalations (fft)
    esc = [dict(trial(0), escalated=e) for e in (0, 3, 0, 1)]
    s = summarize("k", esc + rows[-4:])
    assert s["escalated_per_clean_trial"] == 1.0 and s["max_escalated_clean"] == 3
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


def test_a_shape_the_variant_skips_is_an_error(tmp_path):
    """A fixed-size variant asked for another size prints a skipped row and no trials; the campaign must not report it
    as a clean 0/0 (a campaign script once ran 2^14 variants at 2^23's shape and summarized nothing)."""
    exe = tmp_path / "k"
    exe.write_text('#!/bin/sh\necho \'{"kernel": "k", "shape": {"n": 8388608, "batch": 1}, "skipped": "sizes 16384", "ok": true}\'\n')
    exe.chmod(0o755)
    rows, errors = run_trials(exe, "k", shape="8388608x1", dist="normal", trials=3, inject=1, seed=1)
    assert rows == [] and len(errors) == 1 and not errors[0]["ok"]
    assert errors[0]["error"]["kind"] == "shape" and "8388608x1" in errors[0]["error"]["message"]
