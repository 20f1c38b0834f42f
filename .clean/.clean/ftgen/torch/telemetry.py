"""Fault telemetry of the protected torch ops: counters kept on the device by each library handle (accumulating,
read only when asked), a policy per op for an uncorrectable fault, and a report.

Reading counters waits for the stream of the handle's last call, so it is lazy: `report()` (or `check()`) reads them;
an op whose policy is `recompute` reads them after every call (a synchronization per call, the price of recomputing
what the kernel could not correct).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from dataclasses import dataclass, field

log = logging.getLogger("ftgen.torch")

POLICIES = ("warn", "raise", "recompute")
_FIELDS = ("injected", "detected", "corrected", "unlocated", "recomputed", "uncorrectable")


class UncorrectableFault(RuntimeError):
    """A protected op detected a fault it could neither correct nor recompute (policy `raise`)."""


@dataclass
class OpStats:
    calls: int = 0
    reruns: int = 0
    seen: dict = field(default_factory=lambda: {f: 0 for f in _FIELDS})  # counters already accounted for
    max_score: float = 0.0


class Telemetry:
    """Per (library, op): calls and the counters read from the library's handles; the policy of each op."""

    def __init__(self):
        self.stats: dict[tuple[str, str], OpStats] = {}
        self.policy: dict[str, str] = {}
        self.default_policy = "warn"
        self.libs: dict[str, object] = {}  # key -> ftgen.binding.Library

    def set_policy(self, policy: str, op: str | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        if op is None:
            self.default_policy = policy
        else:
            self.policy[op] = policy

    def policy_of(self, op: str) -> str:
        return self.policy.get(op, self.default_policy)

    def called(self, lib: str, op: str) -> OpStats:
        s = self.stats.setdefault((lib, op), OpStats())
        s.calls += 1
        return s

    def _read(self, key: str) -> dict:
        lib = self.libs[key]
        tot = {f: 0 for f in _FIELDS}
        best = 0.0
        for dev in lib.devices():
            c = lib.counters(dev)
            for f in _FIELDS:
                tot[f] += int(c[f])
            best = max(best, float(c["max_score"]))
        tot["max_score"] = best
        return tot

    def new_uncorrectable(self, lib: str, op: str) -> int:
        """Read the library's counters now; the uncorrectable faults since the last read for this op."""
        s = self.stats.setdefault((lib, op), OpStats())
        tot = self._read(lib)
        new = tot["uncorrectable"] - s.seen["uncorrectable"]
        s.seen = {f: tot[f] for f in _FIELDS}
        s.max_score = max(s.max_score, tot["max_score"])
        return new

    def report(self, emit: bool = True) -> dict:
        """Counts per op ({lib}:{op} -> calls, detected, corrected, recomputed, uncorrectable, max_score, reruns),
        read from the device now; logged at INFO (WARNING where something was uncorrectable) and checked against
        the policies (`warn` warns, `raise` raises UncorrectableFault)."""
        out = {}
        totals = {key: self._read(key) for key in self.libs}
        for (lib, op), s in self.stats.items():
            tot = totals.get(lib, {})
            # a library's handles count every op that called it: ops of one library share its counters
            ops_of_lib = [o for (l2, o) in self.stats if l2 == lib]
            row = {"calls": s.calls, "reruns": s.reruns, **{f: tot.get(f, 0) for f in _FIELDS},
                   "max_score": max(s.max_score, tot.get("max_score", 0.0)), "shared_with": [o for o in ops_of_lib if o != op]}
            out[f"{lib}:{op}"] = row
            if emit:
                (log.warning if row["uncorrectable"] else log.info)("ftgen %s:%s %s", lib, op, row)
            if row["uncorrectable"] > s.seen["uncorrectable"]:
                pol = self.policy_of(op)
                msg = f"{lib}:{op}: {row['uncorrectable'] - s.seen['uncorrectable']} uncorrectable fault(s)"
                s.seen = {f: row[f] for f in _FIELDS}
                if pol == "raise":
                    raise UncorrectableFault(msg)
                if pol == "warn":
                    warnings.warn(msg, RuntimeWarning, stacklevel=2)
        return out

    def json_line(self, step: int | None = None) -> str:
        """One JSON line of the report (e.g. one per training or inference step, appended to a log file)."""
        return json.dumps({"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "step": step, "ops": self.report(emit=False)})

    def reset(self) -> None:
        for key, lib in self.libs.items():
            for dev in lib.devices():
                lib.reset(dev)
        for s in self.stats.values():
            s.calls = s.reruns = 0
            s.seen = {f: 0 for f in _FIELDS}
            s.max_score = 0.0


TELEMETRY = Telemetry()
