"""Emit: a validated spec -> a CMake project of generated sources and a manifest.

Pure text from Jinja2 templates. The same spec gives byte-identical output. Files are written
into a temporary directory beside the output and renamed into place, and only when their content
changed, so ninja rebuilds only what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import __version__, libraries, tuning
from ..errors import SpecError
from ..fileio import holds
from ..families.base import EmittedVariant, Variant
from ..templating import TemplateEnv
from ..spec import Spec

COMMON_HEADERS = ("ftgen_harness.cuh", "ftgen_ft.cuh", "ftgen_bench.cuh", "ftgen_bench_driver.cu", "ftgen_sm90.cuh", "ftgen_rules.h")
MANIFEST = "manifest.json"


def cuda_arch_numbers(archs) -> list[str]:
    """sm_90 -> 90, sm_90a -> 90a (CMake CUDA_ARCHITECTURES spelling)."""
    return [a.removeprefix("sm_") for a in archs]


@dataclass
class Generated:
    out_dir: Path
    variants: list[Variant]
    written: list[str]
    unchanged: int
    removed: list[str]


def render_spec(spec: Spec, env: TemplateEnv | None = None) -> tuple[dict[str, str], dict]:
    """All files of the project (relative path -> text) and the manifest, without touching disk."""
    env = env or TemplateEnv()
    fam = spec.family
    files: dict[str, str] = {}
    for h in COMMON_HEADERS:
        files[f"common/{h}"] = env.raw(f"common/{h}")
    fam_dir = fam.template_path()
    for extra in sorted([*fam_dir.glob("*.h"), *fam_dir.glob("*.cuh")]):  # the family's shared headers, once
        files[f"common/{extra.name}"] = extra.read_text()

    emitted: list[EmittedVariant] = []
    for v in spec.variants:
        ev = fam.emit(v, env, shapes=spec.shapes)
        files.update(ev.files)
        emitted.append(ev)

    # the external libraries of the project: each variant links and includes those it requires
    required = libraries.get(dict.fromkeys(name for ev in emitted for name in ev.requires))
    files["CMakeLists.txt"] = env.render(
        "cmake/CMakeLists.txt.j2",
        {
            "spec": spec,
            "variants": emitted,
            "archs": cuda_arch_numbers(spec.arch),
            "libraries": required,
            "variant_libraries": {ev.name: libraries.get(ev.requires) for ev in emitted},
            "cuda_arch_numbers": cuda_arch_numbers,
        },
    )
    common_hash = _hash_files({k: v for k, v in files.items() if k.startswith("common/")})
    manifest = {
        "ftgen_version": __version__,
        "spec": {
            "name": spec.name,
            "family": fam.name,
            "source": spec.source,
            "arch": list(spec.arch),
            "shapes": spec.shapes,
            "description": spec.description,
        },
        "tuning": tuning.choice().to_dict(),  # the measured choices the parameters resolved against (ftgen.tuning)
        "variants": [],
        "rejected": [{"point": r.point, "reasons": r.reasons} for r in spec.rejected],
    }
    for v, ev in zip(spec.variants, emitted):
        own = {p: files[p] for p in ev.files}
        entry = v.to_dict()
        entry.update(
            {
                "sources": sorted(ev.files),
                "header": ev.header,
                "requires": list(ev.requires),
                "source_hash": hashlib.sha256((common_hash + _hash_files(own)).encode()).hexdigest()[:32],
                "archs": list(ev.archs) if ev.archs else list(spec.arch),
            }
        )
        manifest["variants"].append(entry)
    files[MANIFEST] = json.dumps(manifest, indent=2, sort_keys=False) + "\n"
    return files, manifest


def _hash_files(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode())
        h.update(b"\0")
        h.update(files[path].encode())
        h.update(b"\0")
    return h.hexdigest()


def output_dir(spec: Spec, out_root: str | Path) -> Path:
    root = Path(out_root).resolve()
    out = (root / spec.name).resolve()
    if root not in out.parents:
        raise SpecError(f"name {spec.name!r} would write outside the output root {root}", source=spec.source, path="name")
    return out


def generate(spec: Spec, out_root: str | Path = "generated", env: TemplateEnv | None = None) -> Generated:
    out = output_dir(spec, out_root)
    if out.exists() and not out.is_dir():
        raise SpecError(f"-o: output path {out} exists and is not a directory")
    files, manifest = render_spec(spec, env)
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise SpecError(f"-o: refusing to write into {out}: it exists, is not empty and holds no ftgen manifest.json")
    written, unchanged, removed = write_tree(out, files)
    return Generated(out, spec.variants, written, unchanged, removed)


def write_tree(out: Path, files: dict[str, str]) -> tuple[list[str], int, list[str]]:
    """Atomically write ``files`` under ``out``; skip unchanged files; drop stale generated ones."""
    out.parent.mkdir(parents=True, exist_ok=True)
    old_sources: set[str] = set()
    old_manifest = out / MANIFEST
    if old_manifest.is_file():
        try:
            old = json.loads(old_manifest.read_text())
            for v in old.get("variants", []):
                old_sources.update(v.get("sources", []))
        except (OSError, ValueError):
            pass
    changed = {rel: text for rel, text in files.items() if not holds(out / rel, text)}
    written: list[str] = []
    if changed:
        tmp = Path(tempfile.mkdtemp(prefix=".ftgen-tmp-", dir=out.parent))
        try:
            for rel, text in changed.items():
                p = tmp / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
            # the manifest goes last: a crash in between leaves the old manifest describing old files
            for rel in sorted(changed, key=lambda r: r == MANIFEST):
                dst = out / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp / rel, dst)
                written.append(rel)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    removed = []
    for rel in sorted(old_sources - set(files)):
        p = out / rel
        if p.is_file():
            p.unlink()
            removed.append(rel)
            try:
                p.parent.rmdir()
            except OSError:
                pass
    return written, len(files) - len(changed), removed

