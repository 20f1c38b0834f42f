"""Errors that reach the user, each with the exit code the README's exit-code table assigns to it."""

from __future__ import annotations

# The one exit-code table: `ftgen --help` prints it and the code follows it.
EXIT_CODES = (
    (0, "ok"),
    (1, "anything else: a bug in ftgen, or a kernel that ran but failed verification"),
    (2, "bad input: a spec, a flag, a path, a missing or corrupt project"),
    (3, "build failed (cmake, ninja or nvcc)"),
    (4, "no usable GPU (bench, search, campaign; generate and build still ran)"),
    (130, "interrupted (Ctrl-C, or the build tool killed by a signal)"),
)

# Longest rendering of a user's value inside a message.
VALUE_CHARS = 80


def short(value, limit: int = VALUE_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (a huge bad value must not flood the terminal)."""
    if isinstance(value, str) and len(value) > 4 * limit:
        value = value[: 4 * limit]  # repr of a cut string: no need to render megabytes first
    if isinstance(value, (list, dict, tuple, set)) and len(value) > limit:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


class Interrupted(FtgenError):
    """The user (or a signal to the build tool) stopped the command. Exit code 130."""

    exit_code = 130


class VerificationFailed(FtgenError):
    """A kernel ran but its output (or its fault counters) failed verification."""

    exit_code = 1
