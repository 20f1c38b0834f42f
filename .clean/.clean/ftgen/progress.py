"""Progress of N steps on stderr: a rich bar on a terminal, else plain lines at a modest rate (the first and the
last step always). The build's and the GPU pool's progress (``ftgen.cli.Progress``, ``ftgen.bench.pool.PoolProgress``)
share the clock, the rate limit, the ETA text and the log line here; each draws its own bar and line."""

from __future__ import annotations

import sys
import time


def secs(s: float) -> str:
    """A duration for a progress line: '40s', '7min'."""
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}min"


class LineProgress:
    """The plain-line half of a progress display, and the rich display's lifetime and log."""

    def __init__(self, verb: str, min_interval: float = 2.0, tty: bool = False):
        self.verb = verb
        self.min_interval = min_interval
        self.tty = tty
        self.t0 = time.monotonic()
        self.last = 0.0
        self._rich = None

    def __enter__(self):
        if self.tty:
            self._rich = self.make_rich()
            self._rich.__enter__()
            self.add_tasks()
        return self

    def __exit__(self, *exc):
        if self._rich is not None:
            self._rich.__exit__(*exc)
        return False

    def make_rich(self):  # the rich Progress of a terminal (subclasses)
        raise NotImplementedError

    def add_tasks(self) -> None:  # its tasks (subclasses)
        raise NotImplementedError

    def due(self, i: int, n: int) -> bool:
        """Whether step i of n gets a plain line now (the first and the last always, else at most one per
        min_interval); a line that is due restarts the interval."""
        now = time.monotonic()
        if i != 1 and i < n and now - self.last < self.min_interval:
            return False
        self.last = now
        return True

    def when(self, i: int, n: int) -> str:
        """'ETA 40s' before the last step, the elapsed time at it, '' before the first."""
        elapsed = time.monotonic() - self.t0
        if i >= n:
            return secs(elapsed)
        return f"ETA {secs(elapsed / i * (n - i))}" if i > 0 else ""

    def log(self, msg: str) -> None:
        if self._rich is not None:
            self._rich.console.print(msg, markup=False, highlight=False)
        else:
            print(msg, file=sys.stderr)
