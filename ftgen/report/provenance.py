"""Where a result came from: ftgen version and git state, GPU (name, UUID, clocks, power limit), driver, nvcc,
the versions of the libraries the benches use (``ftgen.libraries``), argv, time."""

from __future__ import annotations

import datetime as _dt
import os
from concurrent.futures import Future, ThreadPoolExecutor
import platform
import subprocess
import sys
from pathlib import Path

from .. import __version__
from ..build import nvcc_version
from ..libraries import versions as library_versions
from ..smi import query_gpus


# Environment variables the executables read at run time (getenv in templates/) that change what a run does: the
# ABFT check's lambda and suspect band, its side streams and SMs, the attention recomputation's blocks, kmeans' input
# data, iterations, tolerance, initialisation and fault site. A results file records those that were set (``env``), so
# results made under an override can be told apart.
RUNTIME_ENV = ("FTGEN_ABFT_BAND", "FTGEN_ABFT64_RECHECK", "FTGEN_ABFT_LAMBDA", "FTGEN_ABFT_SIDE", "FTGEN_ABFT16_SIDE_SMS", "FTGEN_ATTENTION_REDO_BLOCKS",
               "FTGEN_KMEANS_DATA", "FTGEN_KMEANS_INIT", "FTGEN_KMEANS_ITERS", "FTGEN_KMEANS_SITE", "FTGEN_KMEANS_TOL")


def runtime_env() -> dict[str, str]:
    """The variables of RUNTIME_ENV set in this process's environment (which the executables inherit)."""
    return {k: os.environ[k] for k in RUNTIME_ENV if k in os.environ}


def git_state(where: Path | None = None) -> dict:
    where = where or Path(__file__).resolve().parents[2]
    def run(*args):
        try:
            p = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=20)
            return p.stdout.strip() if p.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            return None
    env_sha = os.environ.get("FTGEN_GIT_SHA")
    if env_sha:  # the launcher names the commit (a GPU machine's copy may carry a stale .git)
        dirty = os.environ.get("FTGEN_GIT_DIRTY")
        return {"sha": env_sha, "dirty": None if dirty is None else dirty not in ("0", "false", "")}
    sha = run("rev-parse", "HEAD")
    if sha is None:
        return {"sha": None, "dirty": None}
    dirty = run("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "dirty": bool(dirty)}


_SMI_FIELDS = {
    "uuid": "uuid",
    "sm_clock_mhz": "clocks.sm",
    "sm_clock_max_mhz": "clocks.max.sm",
    "mem_clock_mhz": "clocks.mem",
    "power_limit_w": "power.limit",
    "temperature_c": "temperature.gpu",
    "driver": "driver_version",
}


def gpu_state(index: int | None = None) -> dict:
    """UUID, SM / memory clocks, power limit and temperature of the GPU a run uses, read by nvidia-smi at its start
    (the first visible GPU unless ``index`` names one); empty where there is no GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    rows = query_gpus(_SMI_FIELDS.values(), gpu=str(index) if index is not None else visible or None, units=False)
    if not rows:
        return {}
    values = rows[0]
    out: dict = {}
    for key, value in zip(_SMI_FIELDS, values):
        try:
            out[key] = value if key in ("uuid", "driver") else float(value)
        except ValueError:
            out[key] = None
    return out


def host_facts() -> dict:
    """What a run's provenance says of the host rather than of the run: the git state, the state of the first visible
    GPU (empty without one), nvcc's and the libraries' versions. Each is a subprocess or a probe of its own."""
    return {"git": git_state(), "gpu_state": gpu_state(), "nvcc": nvcc_version(), "libraries": library_versions()}


def host_facts_soon() -> Future:
    """``host_facts()`` read on a thread of its own, so that a command's generation, build and GPU probe run beside
    it (about half a second of nvidia-smi, nvcc and git on a GPU host) and the GPU state is the one at its start."""
    ex = ThreadPoolExecutor(1, thread_name_prefix="ftgen-facts")
    fut = ex.submit(host_facts)
    ex.shutdown(wait=False)  # the thread ends with the work; the caller waits on the future
    return fut


def provenance(gpu: dict | None, argv: list[str] | None = None, facts: dict | None = None, **extra) -> dict:
    """The first line of a results file. ``facts``: ``host_facts()`` read earlier (``host_facts_soon``), else now."""
    f = facts if facts is not None else host_facts()
    g = f["git"]
    d = {
        "ftgen_version": __version__,
        "git_sha": g["sha"],
        "git_dirty": g["dirty"],
        "gpu": (gpu or {}).get("name"),
        "sm_count": (gpu or {}).get("sm_count"),
        "compute_capability": (gpu or {}).get("cc"),
        "driver": (gpu or {}).get("driver") or None,
        "cuda_runtime_api": (gpu or {}).get("runtime_api"),
        "gpu_state": (state := f["gpu_state"] if gpu else {}),
        "nvcc": f["nvcc"],
        "libraries": f["libraries"],
        "host": platform.node(),
        "python": platform.python_version(),
        "argv": list(argv if argv is not None else sys.argv),
        "env": runtime_env(),
        "utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if not d["driver"]:  # no executable reported it (a script timing a vendor library): nvidia-smi's
        d["driver"] = state.get("driver")
    d.update(extra)
    return d
