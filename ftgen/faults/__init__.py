"""Fault campaigns: clean and faulty trials through the benchmark executables, aggregated into
coverage, false alarms, per-bit statistics and a ROC curve over the detection threshold.

The protocol between this module and an executable is docs/campaign-protocol.md; any family and
scheme whose bench template implements it can be run here (one campaign command for all).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Callable

from .. import tolerance as _tolerance
from ..bench import run_executable
from ..errors import SpecError

DISTS = ("normal", "uniform", "loguniform")  # the default campaign distributions
ALL_DISTS = DISTS + ("outliers",)  # every distribution the executables draw


def parse_dists(text: str) -> list[str]:
    """``--dists``: distributions of ALL_DISTS, comma-separated, each once."""
    names = [d.strip() for d in text.split(",") if d.strip()]
    for d in names:
        if d not in ALL_DISTS:
            raise SpecError(f"--dists: {d[:40]!r} is not one of {', '.join(ALL_DISTS)}")
    if not names:
        raise SpecError(f"--dists: give at least one of {', '.join(ALL_DISTS)} (comma-separated)")
    if len(set(names)) < len(names):
        raise SpecError(f"--dists: {next(d for d in names if names.count(d) > 1)!r} is named twice")
    return names
ROC_MULTIPLIERS = tuple(10 ** (e / 4) for e in range(-12, 13))  # 1e-3 .. 1e3 times the threshold


def score_of(r: dict) -> float:
    """A trial's detection score (residual / threshold). JSON has no infinity: the executables write a
    non-finite score (a non-finite checksum residual) as null, which is over every threshold."""
    if "score" not in r:
        return 0.0
    v = r["score"]
    return math.inf if v is None else float(v)


# top-level integer fields of a trial row that are not counters of the scheme's work
_NOT_COUNTERS = {"trial", "injected", "detected", "corrected", "uncorrectable", "recomputed", "clean_false_alarms",
                 "seed", "reps", "warmup"}
CLEAN_MULTIPLIERS = (2, 10, 100)  # coverage also at these multiples of the campaign's largest clean error


def _err(r: dict, key: str = "max_rel_err") -> float:
    """An error field of a row; JSON null (a non-finite error) or NaN is over every tolerance."""
    v = r.get(key)
    if v is None:
        return math.inf
    v = float(v)
    return math.inf if math.isnan(v) else v


def _applied(r: dict) -> int:
    """Faults applied in a trial: the fault record's `applied`, else the row's `injected`."""
    f = r.get("fault")
    if isinstance(f, dict) and "applied" in f:
        return int(f["applied"])
    return int(r.get("injected") or 0)


def counters_violated(r: dict) -> bool:
    """A trial whose counters break detected <= faults applied + false alarms (the false alarms of its own clean
    run where the row carries them), or that detected something and reports it neither corrected, recomputed nor
    uncorrectable (where the row carries those counters: every detection must end in one of them). Such a trial is
    flagged and never counted as corrected."""
    detected = int(r.get("detected") or 0)
    if detected > _applied(r) + int(r.get("clean_false_alarms") or 0):
        return True
    outcomes = [k for k in ("corrected", "recomputed", "uncorrectable") if k in r]
    return detected > 0 and bool(outcomes) and sum(int(r.get(k) or 0) for k in outcomes) == 0


def trial_ok(r: dict) -> bool:
    """The executable's verdict on a trial (``ok``: the output within its tolerance and the family's extra checks);
    a row without one has none against it."""
    return r.get("ok", True) is not False


def failed_trials(rows: list[dict]) -> list[dict]:
    """Trial rows that fail the campaign: a clean trial the executable marked not ok (the kernel is wrong with no
    fault at all), and a faulty trial marked not ok that is no miss of the detection: it detected something (the
    correction or recomputation left a wrong output), or its fault, left uncorrected, stayed within the executable's
    tolerance (``significant`` false beside an ``uncorrected_err``), so the kernel itself broke the output. A
    significant fault that went undetected and left the output wrong is a miss, counted by the coverage."""
    out = []
    for r in rows:
        if "trial" not in r or trial_ok(r):
            continue
        if not r.get("injected") or int(r.get("detected") or 0) > 0 or ("uncorrected_err" in r and not r.get("significant")):
            out.append(r)
    return out


def failure_message(rows: list[dict]) -> str | None:
    """Why a campaign's rows fail it, or None: executable runs that failed (error rows), then :func:`failed_trials`."""
    runs = [r for r in rows if "trial" not in r and not r.get("ok", True)]
    if runs:
        err = runs[0].get("error")
        return (f"{len(runs)} executable run(s) failed during the campaign: "
                f"{err.get('message') if isinstance(err, dict) else err}")
    bad = failed_trials(rows)
    if not bad:
        return None
    clean = sum(1 for r in bad if not r.get("injected"))
    first = ", ".join(f"{r.get('kernel')} trial {r.get('trial')} ({'faulty' if r.get('injected') else 'clean'}, "
                      f"max_rel_err {r.get('max_rel_err')})" for r in bad[:3])
    return (f"{len(bad)} trial(s) failed verification ({clean} clean, {len(bad) - clean} faulty that detected their "
            f"fault or whose fault alone did not matter): {first}")


def significance(rows: list[dict]) -> dict:
    """The significance rule of a campaign's rows: {rule, tolerance, max_clean_err}. The rule is the one of
    ftgen/tolerance.py for the precision the rows deliver and their accumulation depth; rows it does not cover
    keep the executable's own tolerance (rule "executable"; the largest any row carries). ``max_clean_err`` is over
    the clean trials the executable passed: a wrong clean output is a failure (:func:`failed_trials`), not a scale."""
    clean = [r for r in rows if not r.get("injected") and trial_ok(r)]
    out = {"rule": None, "tolerance": None, "max_clean_err": max((_err(r) for r in clean), default=None)}
    got = _tolerance.for_row(rows[0]) if rows else None
    if got is not None:
        out["rule"], out["tolerance"] = got
    else:
        ts = [float(r["tolerance"]) for r in rows if r.get("tolerance") is not None]
        if ts:
            out["rule"], out["tolerance"] = "executable", max(ts)
    return out


def is_significant(r: dict, tol: float | None) -> bool:
    """A fault that, left uncorrected, changes the output beyond `tol` (the row's uncorrected run); rows without
    an uncorrected error keep the executable's own verdict."""
    if tol is not None and "uncorrected_err" in r:
        return _err(r, "uncorrected_err") > tol
    return bool(r.get("significant"))


def is_corrected(r: dict, tol: float | None) -> bool:
    """A significant fault that was detected and left the output within `tol` (finite), with consistent counters and
    the executable's own verdict ``ok`` (where the row has one: it also covers a family's checks beyond the output
    error). A detected trial whose output is still wrong is not corrected."""
    if not is_significant(r, tol) or int(r.get("detected") or 0) <= 0 or counters_violated(r) or not trial_ok(r):
        return False
    if tol is not None and "max_rel_err" in r:
        return _err(r) <= tol
    return bool(r.get("ok"))


def _coverage_at(faulty: list[dict], tol: float | None) -> dict:
    sig = [r for r in faulty if is_significant(r, tol)]
    cor = sum(1 for r in sig if is_corrected(r, tol))
    return {"tolerance": tol, "significant": len(sig), "corrected": cor, "coverage": (cor / len(sig)) if sig else None}


def summarize(kernel: str, rows: list[dict], spec_name: str = "") -> dict:
    """The campaign summary line (docs/campaign-protocol.md), plus per-distribution, per-site and counter detail.

    Significance and correction are judged at the tolerance of :func:`significance` (the rule of the delivered
    precision): significant = the uncorrected run of the same fault is beyond it; corrected = significant,
    detected, the protected output within it and the trial's counters consistent (:func:`counters_violated`).
    `coverage_at` repeats the count at 2x, 10x and 100x the largest clean error of the same rows.
    `max_residual_rel_err` is the largest output error a fault left undetected."""
    clean = [r for r in rows if not r.get("injected")]
    faulty = [r for r in rows if r.get("injected")]
    signif = significance(rows)
    tol = signif["tolerance"]
    sig = [r for r in faulty if is_significant(r, tol)]
    detected = [r for r in sig if int(r.get("detected") or 0) > 0]
    corrected = [r for r in sig if is_corrected(r, tol)]
    false_alarms = [r for r in clean if r.get("false_alarm") or int(r.get("detected") or 0) > 0]
    flagged = [r for r in faulty if counters_violated(r)]
    undetected = [r for r in faulty if int(r.get("detected") or 0) <= 0]
    first = rows[0] if rows else {}
    out = {
        "spec": spec_name,
        "kernel": kernel,
        "precision": first.get("precision"),
        "protection": first.get("protection"),
        "shape": first.get("shape"),
        "clean_trials": len(clean),
        "faulty_trials": len(faulty),
        "significant": len(sig),
        "detected": len(detected),
        "corrected": len(corrected),
        "coverage": (len(corrected) / len(sig)) if sig else None,
        "false_alarms": len(false_alarms),
        "false_alarm_rate": (len(false_alarms) / len(clean)) if clean else None,
        # the largest error a fault left in the output undetected (significant or not)
        "max_residual_rel_err": max((_err(r) for r in undetected), default=0.0),
        "max_corrected_rel_err": max((_err(r) for r in corrected), default=0.0),
        "significance": signif,
        "coverage_at": {},
        "counter_violations": len(flagged),
        "flagged_trials": [r.get("trial") for r in flagged[:20]],
        "detected_not_corrected": len(detected) - len(corrected),
        "not_ok": sum(1 for r in rows if not r.get("ok")),
        "failed_trials": len(failed_trials(rows)),
        "max_clean_score": max((score_of(r) for r in clean), default=0.0),
        # the detection margin on the other side: the weakest significant fault's score
        "min_significant_score": min((score_of(r) for r in sig), default=None),
    }
    mc = signif["max_clean_err"]
    out["coverage_at"]["rule"] = _coverage_at(faulty, tol)
    for x in CLEAN_MULTIPLIERS:
        out["coverage_at"][f"{x}x_clean"] = _coverage_at(faulty, x * mc if mc is not None and math.isfinite(mc) else None)
    # any further integer counter the rows carry (e.g. how often a cheap prefilter escalated to an exact check: in a
    # clean trial a cost, not an alarm), per clean and per faulty trial
    names = sorted({k for r in rows for k, v in r.items()
                    if isinstance(v, int) and not isinstance(v, bool) and k not in _NOT_COUNTERS})
    for name in names:
        for part, rs in (("clean", clean), ("faulty", faulty)):
            vals = [int(r.get(name) or 0) for r in rs if name in r]
            if vals:
                out[f"{name}_per_{part}_trial"] = sum(vals) / len(vals)
                out[f"max_{name}_{part}"] = max(vals)
    by_dist = {}
    for d in sorted({r.get("dist") for r in rows}, key=str):
        rs = [r for r in rows if r.get("dist") == d]
        s = [r for r in rs if r.get("injected") and is_significant(r, tol)]
        by_dist[d] = {
            "clean": sum(1 for r in rs if not r.get("injected")),
            "faulty": sum(1 for r in rs if r.get("injected")),
            "significant": len(s),
            "corrected": sum(1 for r in s if is_corrected(r, tol)),
            "false_alarms": sum(1 for r in rs if not r.get("injected") and int(r.get("detected") or 0) > 0),
        }
    out["by_dist"] = by_dist
    sites = per_site(rows, tol)
    if sites:
        out["by_site"] = sites
    return out


def _tally(rows: list[dict], key: Callable[[dict], object], tol: float | None) -> dict:
    acc: dict = defaultdict(lambda: {"faults": 0, "significant": 0, "detected": 0, "corrected": 0})
    for r in rows:
        if not r.get("injected"):
            continue
        a = acc[key(r)]
        a["faults"] += 1
        if is_significant(r, tol):
            a["significant"] += 1
            a["detected"] += int(r.get("detected") or 0) > 0
            a["corrected"] += is_corrected(r, tol)
    return acc


def per_site(rows: list[dict], tol: float | None = None) -> dict:
    """Per fault site (the rows' fault.site: e.g. accumulator, operand A / B), where rows carry one."""
    if not any(isinstance(r.get("fault"), dict) and "site" in r["fault"] for r in rows):
        return {}
    acc = _tally(rows, lambda r: str((r.get("fault") or {}).get("site", "unknown")), tol)
    return {s: v for s, v in sorted(acc.items())}


def per_bit(rows: list[dict], tol: float | None = None) -> list[dict]:
    """Per flipped bit: faults, how many changed the output beyond tolerance (default: the campaign's rule),
    detected, corrected."""
    if tol is None:
        tol = significance(rows)["tolerance"]
    acc = _tally(rows, lambda r: (r.get("fault") or {}).get("bit", -1), tol)
    return [{"bit": b, **v} for b, v in sorted(acc.items())]


def roc(rows: list[dict]) -> list[dict]:
    """Detection at threshold multiplier m happens when score > m: true-positive rate over the
    significant faults, false-positive rate over the clean trials."""
    tol = significance(rows)["tolerance"]
    clean = [score_of(r) for r in rows if not r.get("injected")]
    sig = [score_of(r) for r in rows if r.get("injected") and is_significant(r, tol)]
    out = []
    for m in ROC_MULTIPLIERS:
        out.append({
            "threshold_multiplier": m,
            "tpr": (sum(s > m for s in sig) / len(sig)) if sig else None,
            "fpr": (sum(s > m for s in clean) / len(clean)) if clean else None,
        })
    return out


def plot(path: Path, summaries: list[dict], rocs: dict[str, list[dict]], bits: dict[str, list[dict]]) -> str | None:
    """ROC curves and per-bit coverage as one PNG. Returns a reason when it could not be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib): no plot"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for k, pts in rocs.items():
        xs = [p["threshold_multiplier"] for p in pts]
        ax1.plot(xs, [p["tpr"] if p["tpr"] is not None else math.nan for p in pts], label=f"{k} TPR")
        ax1.plot(xs, [p["fpr"] if p["fpr"] is not None else math.nan for p in pts], "--", label=f"{k} FPR")
    ax1.set_xscale("log")
    ax1.axvline(1.0, color="k", lw=0.6)
    ax1.set_xlabel("threshold / auto threshold")
    ax1.set_ylabel("rate")
    ax1.set_title("detection (significant faults) and false alarms (clean)")
    ax1.legend(fontsize=6)
    for k, bs in bits.items():
        xs = [b["bit"] for b in bs]
        ax2.plot(xs, [b["significant"] / b["faults"] if b["faults"] else 0 for b in bs], "o-", ms=3, label=f"{k} significant")
        ax2.plot(xs, [b["corrected"] / b["significant"] if b["significant"] else math.nan for b in bs], "s", ms=3,
                 label=f"{k} corrected/significant")
    ax2.set_xlabel("flipped bit")
    ax2.set_ylabel("fraction")
    ax2.set_title("per bit position")
    ax2.legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def campaign(project: Path, variants: list[dict], *, shape: str, trials: int, dists=DISTS, seed: int = 1,
             chunk: int | None = None, timeout: float = 900.0, spec_name: str = "", extra: tuple[str, ...] = (),
             log: Callable[[str], None] = lambda s: None) -> tuple[list[dict], list[dict]]:
    """Clean and faulty trials for every variant and distribution (``extra``: further executable flags, e.g.
    ``--site NAME``), one executable run after another: the chunks of :func:`ftgen.search.shard.campaign_chunks`
    (``chunk`` trials each) batched as for one GPU (:func:`ftgen.search.shard.batch_chunks`: one run per variant), a
    run allowed ``timeout`` seconds per 250 trials (``Batch.timeout``). Returns (all rows, summaries)."""
    from ..search.shard import CHUNK_TRIALS, batch_chunks, campaign_chunks, dedup_errors

    all_rows: list[dict] = []
    summaries: list[dict] = []
    for v in variants:
        k = v["kernel"]
        (b,) = batch_chunks(campaign_chunks([k], trials=trials, dists=dists, seed=seed, chunk=chunk or CHUNK_TRIALS), 1)
        log(f"{k}: " + ", ".join(f"{c.trials} {'faulty' if c.inject else 'clean'} trials ({c.dist})" for c in b.parts))
        rows, errors = b.rows(shape, run_executable(project / "bin" / k, k, b.argv(shape, extra), b.timeout(timeout)))
        all_rows += dedup_errors(errors) + rows
        summaries.append(summarize(k, rows, spec_name))
    return all_rows, summaries
