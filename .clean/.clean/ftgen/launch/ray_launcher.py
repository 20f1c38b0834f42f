"""Run the shards of an ftgen search or campaign as Ray tasks, one GPU each, then merge a search.

    python -m ftgen.launch.ray_launcher --shards 8 --out results/shards -- search specs/x.yaml --reps 50

runs ``ftgen search specs/x.yaml --reps 50 --shard I/8 --json results/shards/shard-I-of-8.jsonl`` for
I = 0..7 as ``ray`` tasks with ``num_gpus=1`` (Ray sets each task's ``CUDA_VISIBLE_DEVICES``), then
``ftgen search specs/x.yaml --from <the 8 files>`` on this machine. The workers need ftgen installed
and the spec and ``--out`` on a file system they share with this machine. Needs ``pip install ftgen[ray]``.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from ..errors import FtgenError, SpecError


def shard_commands(ftgen_args: list[str], shards: int, out_dir: Path, prefix: list[str] | None = None) -> list[tuple[list[str], Path]]:
    """(command, results file) of each shard: ``prefix`` (``python -m ftgen.cli``) and the ftgen command,
    with ``--shard I/N --json FILE`` added."""
    if not ftgen_args or ftgen_args[0] not in ("search", "campaign"):
        raise SpecError("ray launcher: give the ftgen command after --, starting with search or campaign")
    for flag in ("--shard", "--json", "--from", "--gpus"):
        if any(a == flag or a.startswith(flag + "=") for a in ftgen_args):
            raise SpecError(f"ray launcher: the launcher sets {flag} itself (or, for --from, merges); leave it out of the command")
    if shards < 1:
        raise SpecError("ray launcher: --shards must be at least 1")
    out = []
    for i in range(shards):
        path = Path(out_dir) / f"shard-{i}-of-{shards}.jsonl"
        cmd = [*(prefix or [sys.executable, "-m", "ftgen.cli"]), *ftgen_args, "--shard", f"{i}/{shards}", "--json", str(path)]
        out.append((cmd, path))
    return out


def _run(cmd: list[str]) -> tuple[int, str]:
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stderr or "")[-3000:]


def launch(ftgen_args: list[str], shards: int, out_dir: Path, *, num_gpus: float = 1, address: str | None = None,
           prefix: list[str] | None = None, log=lambda s: None) -> list[Path]:
    """Run every shard as a Ray task and wait for all; returns the results files. A shard whose worker
    dies is retried once by Ray (``max_retries``); one that wrote no results file is reported with its stderr."""
    import ray

    cmds = shard_commands(ftgen_args, shards, out_dir, prefix)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    if not ray.is_initialized():
        ray.init(address=address)
    task = ray.remote(num_gpus=num_gpus, max_retries=1)(_run)
    refs = [task.remote(cmd) for cmd, _ in cmds]
    failed = []
    for (cmd, path), (rc, err) in zip(cmds, ray.get(refs)):
        log(f"{path.name}: exit {rc}")
        # a search shard exits 0; a campaign shard may exit 1 when its executables failed (its rows say which)
        if not path.is_file():
            failed.append(f"{path.name} (exit {rc}): {err.strip()[-800:]}")
    if failed:
        raise FtgenError(f"{len(failed)} of {shards} shard(s) wrote no results: " + "; ".join(failed))
    return [p for _, p in cmds]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ftgen.launch.ray_launcher", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, required=True, help="number of shards (Ray tasks)")
    ap.add_argument("--out", required=True, help="directory of the shards' results files (shared with the workers)")
    ap.add_argument("--address", default=None, help="Ray cluster address [default: ray.init's: RAY_ADDRESS, else a local cluster]")
    ap.add_argument("--num-gpus", type=float, default=1, help="GPUs per task [default: 1]")
    ap.add_argument("--ftgen", default=None,
                    help="the command that runs ftgen on the workers and here, e.g. 'apptainer exec ftgen.sif ftgen' "
                         "[default: this Python with -m ftgen.cli]")
    ap.add_argument("ftgen_args", nargs=argparse.REMAINDER, help="-- then the ftgen command: search SPEC ... or campaign SPEC ...")
    a = ap.parse_args(argv)
    args = a.ftgen_args[1:] if a.ftgen_args[:1] == ["--"] else a.ftgen_args
    prefix = shlex.split(a.ftgen) if a.ftgen else [sys.executable, "-m", "ftgen.cli"]
    try:
        import ray  # noqa: F401
    except ImportError:
        print("error: the Ray launcher needs ray: pip install 'ftgen[ray]'", file=sys.stderr)
        return 2
    try:
        files = launch(args, a.shards, Path(a.out), num_gpus=a.num_gpus, address=a.address, prefix=prefix,
                       log=lambda s: print(s, file=sys.stderr))
    except FtgenError as e:
        print(("error: " if e.exit_code in (1, 2, 3) else "") + e.message, file=sys.stderr)
        return e.exit_code
    if args[0] != "search":
        print("\n".join(map(str, files)))
        return 0
    # the merge: the spec and the options that shape the outputs, then the files
    keep = _merge_args(args[1:])
    return subprocess.run([*prefix, "search", *keep, "--from", *map(str, files)]).returncode


def _merge_args(args: list[str]) -> list[str]:
    """Of a search command's arguments, those `search --from` reads: the spec, --shapes, -o/--out and the space flags."""
    takes_value = {"--shapes", "-o", "--out", "--max-points", "--max-variants", "--budget", "--strategy", "--seed", "-j", "--jobs",
                   "--reps", "--warmup", "--inject", "--timeout"}
    keep_flags = {"--shapes", "-o", "--out", "--max-points", "--max-variants"}
    out, i = [], 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if name in takes_value:
            has_inline = "=" in a
            if name in keep_flags:
                out += [a] if has_inline else args[i:i + 2]
            i += 1 if has_inline else 2
            continue
        if not a.startswith("-"):
            out.append(a)  # the spec
        i += 1
    return out


if __name__ == "__main__":
    sys.exit(main())
