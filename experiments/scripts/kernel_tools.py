"""Shared pieces of the no-GPU kernel inspection scripts (fft_ptxas.py, sass_loops.py): render variant
entries of a spec into a source tree, compile one source with nvcc (ptxas report or cubin), and read the
SASS of a cubin (cuobjdump) as functions of (address, instruction) pairs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ftgen.build import cuda_tool_dirs, find_cuda_tool, find_nvcc  # noqa: E402
from ftgen.codegen.emit import render_spec  # noqa: E402
from ftgen.templating import TemplateEnv  # noqa: E402
from ftgen.paths import cutlass_include_dir  # noqa: E402
from ftgen.spec import load_spec_text  # noqa: E402

NVCC_FLAGS = ["-std=c++17", "-O3", "--expt-relaxed-constexpr"]
# /*addr*/  [@P0 ]OPCODE[.modifiers] operands ;   (addresses grow past four hex digits in long kernels)
SASS_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
SASS_OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")
SASS_FUNCTION = re.compile(r"\n\s+Function : ([^\n]+)")


def tools(need_dump: bool = True) -> tuple[str, str | None]:
    """nvcc and (when needed) cuobjdump, or exit with a message."""
    nvcc = find_nvcc()
    if not nvcc:
        raise SystemExit("needs nvcc (the CUDA toolkit)")
    dump = find_cuda_tool("cuobjdump")
    if dump is None and need_dump:
        raise SystemExit("needs cuobjdump (the CUDA toolkit, or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", "")] + cuda_tool_dirs())  # (cuobjdump runs nvdisasm)
    return nvcc, dump


def write_variants(family: str, arch: str, variants: list[str], root: Path) -> list[Path]:
    """Render the variant entries (one spec `variants:` item each) under root; returns the .cu sources."""
    body = "\n".join(f"  - {v}" for v in variants)
    spec = load_spec_text(f"name: inspect\nfamily: {family}\narch: [{arch}]\nvariants:\n{body}\n", "inspect.yaml")
    files, _ = render_spec(spec)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return sorted(root / rel for rel in files if rel.endswith(".cu"))


def variant_options(family: str, arch: str, variants: list[str]) -> dict[str, list[str]]:
    """Each variant's compile options as ftgen build passes them (the backend's: e.g. -DNDEBUG for the sm90 kernels,
    without which ptxas serializes the wgmma), by the variant's directory name."""
    body = "\n".join(f"  - {v}" for v in variants)
    spec = load_spec_text(f"name: inspect\nfamily: {family}\narch: [{arch}]\nvariants:\n{body}\n", "inspect.yaml")
    env = TemplateEnv()
    return {v.name: list(spec.family.emit(v, env, shapes=spec.shapes).compile_options) for v in spec.variants}


def extra_includes() -> list[Path]:
    """The CUTLASS headers of the nvidia-cutlass wheel, where installed (the CUTLASS backend's sources need them)."""
    inc = cutlass_include_dir()
    return [inc] if inc else []


def nvcc(nvcc_path: str, src: Path, includes: list[Path], arch: str, extra: list[str]) -> str:
    """Compile src with the project's flags plus `extra`; returns stderr (ptxas -v reports there)."""
    cmd = [nvcc_path, *NVCC_FLAGS, f"-arch={arch}", *extra]
    for inc in includes:
        cmd += ["-I", str(inc)]
    p = subprocess.run(cmd + [str(src)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"nvcc failed on {src.name}:\n{p.stderr[-2000:]}")
    return p.stderr


def sass_functions(dump_tool: str, cubin: Path) -> list[tuple[str, list[tuple[int, str]]]]:
    """(function name, [(address, instruction text)]) of every function in the cubin."""
    dump = subprocess.run([dump_tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    parts = SASS_FUNCTION.split(dump)
    return [(name.strip(), [(int(m.group(1), 16), m.group(2).strip()) for m in SASS_INSN.finditer(body)]) for name, body in zip(parts[1::2], parts[2::2])]


def opcode(insn: str) -> str:
    return SASS_OPCODE.match(insn).group(1)
