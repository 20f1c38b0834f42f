"""Writing files so a reader never sees half of one: a temporary file beside the target, renamed into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (the parent folder is created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def holds(path: str | Path, text: str) -> bool:
    """Whether the file at ``path`` already holds exactly ``text`` (a missing or unreadable file does not)."""
    path = Path(path)
    try:
        return path.is_file() and path.read_text() == text
    except (OSError, UnicodeDecodeError):
        return False
