"""Errors that reach the user, each with the exit code DESIGN.md assigns to it."""

from __future__ import annotations


class FtgenError(Exception):
    """Base class: a message for the user and an exit code. Never shown as a traceback."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SpecError(FtgenError):
    """Bad input: a spec, a shape or a flag. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None):
        where = ": ".join(p for p in (source, path) if p)
        super().__init__(f"{where}: {message}" if where else message)
        self.source = source
        self.path = path
        self.detail = message


class SpecErrors(SpecError):
    """Several independent problems found in one spec; all are reported at once."""

    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        FtgenError.__init__(self, "\n".join(e.message for e in errors))


class BuildError(FtgenError):
    exit_code = 3


class NoGpuError(FtgenError):
    exit_code = 4


class VerificationFailed(FtgenError):
    """A kernel ran but its output (or its fault counters) failed verification."""

    exit_code = 1
