"""Fault campaigns: clean and faulty trials through the benchmark executables, aggregated into
coverage, false alarms, per-bit statistics and a ROC curve over the detection threshold.

The protocol between this module and an executable is docs/campaign-protocol.md; any family and
scheme whose bench template implements it can be run here (one campaign command for all).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..bench import run_executable

DISTS = ("normal", "uniform", "loguniform")
ROC_MULTIPLIERS = tuple(10 ** (e / 4) for e in range(-12, 13))  # 1e-3 .. 1e3 times the threshold


@dataclass
class CampaignResult:
    kernel: str
    rows: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)


def run_trials(exe: Path, kernel: str, *, shape: str, dist: str, trials: int, inject: int, seed: int,
               chunk: int = 250, timeout: float = 900.0, extra: tuple[str, ...] = ()) -> tuple[list[dict], list[dict]]:
    """Run `trials` trials in chunks (each chunk its own process). Returns (trial rows, error rows)."""
    rows, errors = [], []
    done = 0
    while done < trials:
        n = min(chunk, trials - done)
        argv = ["--trials", str(n), "--inject", str(inject), "--shapes", shape, "--dist", dist,
                "--seed", str(seed + done), "--no-timing", *extra]
        got = run_executable(exe, kernel, argv, timeout)
        for r in got:
            if "trial" in r:
                r["trial"] += done
                rows.append(r)
            elif not r.get("ok", True):
                errors.append(r)
            elif "skipped" in r:
                # a variant that does not run this shape (a fixed size) would count no trials at all; the
                # remaining chunks would skip it again
                errors.append({"kernel": kernel, "ok": False,
                               "error": {"kind": "shape", "message": f"{kernel} does not run shape {shape}: {r['skipped']}"}})
                return rows, errors
        done += n
    return rows, errors


def score_of(r: dict) -> float:
    """A trial's detection score (residual / threshold). JSON has no infinity: the executables write a
    non-finite score (a non-finite checksum residual) as null, which is over every threshold."""
    if "score" not in r:
        return 0.0
    v = r["score"]
    return math.inf if v is None else float(v)


def summarize(kernel: str, rows: list[dict], spec_name: str = "") -> dict:
    """The campaign summary line of DESIGN.md, plus per-distribution and per-bit detail."""
    clean = [r for r in rows if not r.get("injected")]
    faulty = [r for r in rows if r.get("injected")]
    sig = [r for r in faulty if r.get("significant")]
    detected = [r for r in sig if r.get("detected", 0) > 0]
    corrected = [r for r in sig if r.get("ok")]
    false_alarms = [r for r in clean if r.get("false_alarm") or r.get("detected", 0) > 0]
    residual = max((r.get("max_rel_err", 0.0) for r in faulty if r.get("ok")), default=0.0)
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
        "max_residual_rel_err": residual,
        "not_ok": sum(1 for r in rows if not r.get("ok")),
        "max_clean_score": max((score_of(r) for r in clean), default=0.0),
        # the detection margin on the other side: the weakest significant fault's score
        "min_significant_score": min((score_of(r) for r in sig), default=None),
    }
    if any("escalated" in r for r in clean):
        # checks a prefilter escalated to the exact one (fft two-sided-tb) per clean trial: their cost, not alarms
        esc = [int(r.get("escalated", 0)) for r in clean]
        out["escalated_per_clean_trial"] = sum(esc) / len(esc)
        out["max_escalated_clean"] = max(esc)
    by_dist = {}
    for d in sorted({r.get("dist") for r in rows}):
        rs = [r for r in rows if r.get("dist") == d]
        s = [r for r in rs if r.get("injected") and r.get("significant")]
        by_dist[d] = {
            "clean": sum(1 for r in rs if not r.get("injected")),
            "faulty": sum(1 for r in rs if r.get("injected")),
            "significant": len(s),
            "corrected": sum(1 for r in s if r.get("ok")),
            "false_alarms": sum(1 for r in rs if not r.get("injected") and r.get("detected", 0) > 0),
        }
    out["by_dist"] = by_dist
    return out


def per_bit(rows: list[dict]) -> list[dict]:
    """Per flipped bit: faults, how many changed the output beyond tolerance, detected, corrected."""
    acc: dict[int, dict] = defaultdict(lambda: {"faults": 0, "significant": 0, "detected": 0, "corrected": 0})
    for r in rows:
        if not r.get("injected"):
            continue
        b = (r.get("fault") or {}).get("bit", -1)
        a = acc[b]
        a["faults"] += 1
        if r.get("significant"):
            a["significant"] += 1
            a["detected"] += r.get("detected", 0) > 0
            a["corrected"] += bool(r.get("ok"))
    return [{"bit": b, **v} for b, v in sorted(acc.items())]


def roc(rows: list[dict]) -> list[dict]:
    """Detection at threshold multiplier m happens when score > m: true-positive rate over the
    significant faults, false-positive rate over the clean trials."""
    clean = [score_of(r) for r in rows if not r.get("injected")]
    sig = [score_of(r) for r in rows if r.get("injected") and r.get("significant")]
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
             chunk: int = 250, timeout: float = 900.0, spec_name: str = "",
             log: Callable[[str], None] = lambda s: None) -> tuple[list[dict], list[dict]]:
    """Clean and faulty trials for every variant and distribution. Returns (all rows, summaries)."""
    all_rows: list[dict] = []
    summaries: list[dict] = []
    for v in variants:
        k = v["kernel"]
        exe = project / "bin" / k
        rows: list[dict] = []
        runs = [(d, inject, seed + (2 * i + inject) * trials) for i, d in enumerate(dists) for inject in (0, 1)]
        for d, inject, base in runs:
            log(f"{k}: {trials} {'faulty' if inject else 'clean'} trials ({d})")
            got, errs = run_trials(exe, k, shape=shape, dist=d, trials=trials, inject=inject, seed=base,
                                   chunk=chunk, timeout=timeout)
            rows.extend(got)
            all_rows.extend(errs)
            if any(e.get("error", {}).get("kind") == "shape" for e in errs):
                break  # the other runs would skip the shape too
        all_rows.extend(rows)
        s = summarize(k, rows, spec_name)
        summaries.append(s)
    return all_rows, summaries
