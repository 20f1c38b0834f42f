"""nvidia-smi's GPU queries in one place (the bench's GPU pool, the tuning's GPU, a run's provenance)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable


def query_gpus(fields: Iterable[str], *, gpu: str | None = None, units: bool = True, timeout: float = 20) -> list[list[str]]:
    """The rows of ``nvidia-smi --query-gpu=FIELDS`` (one per GPU, or the one ``gpu`` names: an index or UUID), each
    as its comma-separated values stripped; [] where there is no nvidia-smi, no GPU or the query fails. ``units``
    False: the numbers without their units."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    cmd = [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader" + ("" if units else ",nounits")]
    if gpu:
        cmd.append(f"--id={gpu}")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0:
        return []
    return [[x.strip() for x in line.split(",")] for line in p.stdout.splitlines() if line.strip()]
