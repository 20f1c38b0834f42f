"""A shared library links several variants of one family, each a translation unit compiled from the same templates.
What one variant defines at namespace scope must then not be defined by another: every non-template kernel in the
code a variant's library source compiles (its template and the local headers it includes, followed transitively)
sits inside an anonymous namespace, as the build's linker would otherwise report a multiple definition (as it did
for two bf16 cutlass90 ABFT variants in one library). Template kernels are instantiated per variant configuration and
may stay outside."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

TEMPLATES = REPO / "templates"
# the library sources of every family (the benches' templates and headers are not linked into a library)
SOURCES = sorted(p for p in TEMPLATES.glob("*/*.cu.j2") if "bench" not in p.name and p.parent.name not in ("common", "cmake"))

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_TOKEN = re.compile(r'#include\s+"([^"]+)"|\bnamespace\s+(\w+)?\s*\{|\{|\}|\b(__global__)\b')


def _resolve(name: str, here: Path) -> Path | None:
    for base in (here.parent, TEMPLATES / "common"):
        if (base / name).is_file():
            return base / name
    return None


def _non_template_kernels(path: Path, anon: bool = False, seen: set | None = None) -> list[str]:
    """(file name:line) of each non-template __global__ outside an anonymous namespace, entering included local
    headers with the namespace state of the include."""
    seen = set() if seen is None else seen
    if (path, anon) in seen:
        return []
    seen.add((path, anon))
    raw = path.read_text()
    includes = {m.start(): m.group(1) for m in re.finditer(r'#include\s+"([^"]+)"', raw)}
    # Jinja blanked (positions kept for the includes): a namespace named by the template (`namespace {{ ns }} {`, a
    # name per variant) then reads as anonymous, which is what it is for linkage
    text = _JINJA.sub(lambda m: " " * len(m.group(0)), raw)
    text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    # strings blanked except the include names (kept in `includes`)
    text = _STRING.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)
    bad: list[str] = []
    stack: list[str] = []  # "anon", "ns" or "block"
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok.startswith("#include"):
            name = includes.get(m.start())
            dep = _resolve(name, path) if name else None
            if dep is not None:
                bad += _non_template_kernels(dep, anon or "anon" in stack, seen)
        elif tok.startswith("namespace"):
            stack.append("ns" if m.group(2) else "anon")
        elif tok == "{":
            stack.append("block")
        elif tok == "}":
            if stack:
                stack.pop()
        elif m.group(3):
            before = text[max(0, m.start() - 200):m.start()]
            templated = re.search(r"template\s*<[^;{}]*>\s*$", before) is not None
            if not templated and not anon and "anon" not in stack:
                bad.append(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}")
    return bad


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_non_template_kernel_of_a_library_source_has_internal_linkage(source):
    assert _non_template_kernels(source) == []


def test_the_scan_finds_a_kernel_outside_an_anonymous_namespace(tmp_path):
    """The scanner itself: a header with a plain kernel in a named namespace is reported; inside `namespace {` or as
    a template it is not, and an include inside an anonymous namespace passes its state on."""
    (tmp_path / "k.cuh").write_text("namespace a {\n__global__ void k(int x) {}\n}\n")
    (tmp_path / "ok.cuh").write_text("namespace a {\nnamespace {\n__global__ void k(int x) {}\n}\n"
                                     "template <class T>\n__global__ void t(T x) {}\n}\n")
    (tmp_path / "host.cu.j2").write_text('namespace {\n#include "k.cuh"\n}\n{% if x %}#include "ok.cuh"{% endif %}\n')
    assert _non_template_kernels(tmp_path / "k.cuh") == ["k.cuh:2"]
    assert _non_template_kernels(tmp_path / "ok.cuh") == []
    assert _non_template_kernels(tmp_path / "host.cu.j2") == []
