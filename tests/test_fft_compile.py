"""compile: nvcc builds one fft variant per protection level for sm_80 and sm_90 (no local-memory
arrays, the unprotected kernel without spills, 64/128-bit global accesses, codelet twiddles as
immediates); and the generated kernel code itself runs on the CPU through the host emulator
(ftgen_fft_emu.h, g++): it computes the DFT, corrects injected faults, has no shared-memory races,
reads and writes every element once per launch, and keeps bank conflicts and sectors in check."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from ftgen.build import find_nvcc
from ftgen.codegen.emit import TemplateEnv, render_spec
from ftgen.families import fft as F
from ftgen.paths import templates_dir
from ftgen.spec import load_spec_text

pytestmark = pytest.mark.compile

SPEC = textwrap.dedent(
    """
    name: compile_fft
    family: fft
    arch: [sm_80, sm_90]
    variants:
      - {precision: fp32, params: {logn: 12}}
      - {precision: fp64, params: {logn: 16}}
      - {precision: fp32, protection: {scheme: abft, level: one-sided, inject: true}, params: {logn: 10}}
      - {precision: fp64, protection: {scheme: abft, level: two-sided-thread, inject: true}, params: {logn: 9}}
      - {precision: fp32, protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 14}}
      - {precision: fp64, protection: {scheme: abft, level: two-sided-tb}, params: {logn: 11, direction: inverse}}
      - {precision: fp32, protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 9, N1: 8, N2: 8, N3: 8}}
    """
)


def _nvcc_ptxas(nvcc: str, root: Path, rel: str, *archs: str, device_only: bool = False) -> dict[str, str]:
    """nvcc -c of one translation unit for every arch of `archs` in one run (the host code compiled once), asserted to
    succeed; nvcc's stderr per arch: with one arch all of it, with more ptxas' report of each (the lines from its first
    entry function on). `device_only` (one arch): -cubin, the device code alone (nvcc's device pass, which parses the
    host code too, and ptxas), for the kernels of the hook-split and cluster plans, whose tests read ptxas' report
    (test_nvcc_compiles_every_level_for_sm80_and_sm90 builds each precision in full)."""
    d = str(Path(rel).parent)
    gencode = [f"-gencode=arch=compute_{a[3:]},code=[{a},compute_{a[3:]}]" for a in archs]
    if device_only:
        assert len(archs) == 1
        gencode = [f"-gencode=arch=compute_{archs[0][3:]},code={archs[0]}"]
    cmd = [nvcc, "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xptxas", "-v", *gencode, "-I", str(root / d), "-I", str(root / "common"),
           "-cubin" if device_only else "-c", str(root / rel), "-o", os.devnull]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, f"{rel} ({', '.join(archs)}):\n{p.stdout}{p.stderr}"
    if len(archs) == 1:
        return {archs[0]: p.stderr}
    logs, cur = dict.fromkeys(archs, ""), None
    for line in p.stderr.splitlines(keepends=True):
        m = re.search(r"Compiling entry function '\S+' for '(\w+)'", line)
        cur = m.group(1) if m else cur
        if cur:
            logs[cur] += line
    return logs


def test_nvcc_compiles_every_level_for_sm80_and_sm90(tmp_path):
    nvcc = find_nvcc()
    s = load_spec_text(SPEC, "compile_fft.yaml")
    files, _ = render_spec(s)
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    jobs = [(rel, "sm_80", "sm_90") for rel in files if re.search(r"_k\d+\.cu$", rel)]
    first = s.variants[0].name
    jobs += [(f"{first}/{first}.cu", "sm_90"), (f"{first}/{first}_bench.cu", "sm_90")]
    with ThreadPoolExecutor(max_workers=2) as ex:
        logs = {(j[0], arch): log for j, per_arch in zip(jobs, ex.map(lambda j: _nvcc_ptxas(nvcc, tmp_path, *j), jobs))
                for arch, log in per_arch.items()}
    for (rel, arch), log in logs.items():
        if not re.search(r"_k\d+\.cu$", rel):
            continue
        # per function: (name, stack frame, spill stores). The simultaneous two-sided-tb's rare path and
        # recomputation are functions of their own (tb_rare_call, tb_again: a local State, the launch parameters
        # by value); the kernels that call them keep the outgoing copies of those parameters (128 bytes each) and
        # the registers saved around the calls (at most 255 x 4 bytes) on their stack, used only when a call is made
        funcs = re.findall(r"Function properties for (\S+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores", log)
        assert funcs, (rel, arch, log)
        calls = any("tb_again" in f or "tb_rare_call" in f for f, _, _ in funcs)
        for fname, st, sp in funcs:
            st, sp = int(st), int(sp)
            if "tb_again" in fname or "tb_rare_call" in fname:
                continue
            # the register state is never demoted to local memory (a dynamic index would do that): any stack
            # frame is spill space (and, in the kernels with those calls, their parameter copies) only
            assert st <= sp + 16 + (2 * 128 + 255 * 4 if calls else 0), (rel, arch, fname, st, sp)
            if "_none_" in rel:
                assert sp == 0, (rel, arch, log)
            if "abft" in rel:
                assert sp <= 512, (rel, arch, log)


CLUSTER_SPEC = textwrap.dedent(
    """
    name: compile_fft_cluster
    family: fft
    arch: [sm_90]
    protection: {scheme: none}
    variants:
      - {precision: fp32, params: {logn: 15}}
      - {precision: fp64, params: {logn: 14}}
      - {precision: fp32, params: {logn: 15, N1: 16384, cluster: 2, n1: 32}}
      - {precision: fp64, protection: {scheme: abft, level: two-sided-tb, inject: true}, params: {logn: 14}}
    """
)


def test_nvcc_compiles_the_cluster_plans(tmp_path):
    """The cluster plans (measured fp32 2^15, fp64 2^14; a scattering one; the tuning file's cluster plan two-sided-tb fp64 2^14 with the
    hook split) compile for sm_90: one kernel per plan, declared with its cluster shape, registers at most a few spilled."""
    nvcc = find_nvcc()
    s = load_spec_text(CLUSTER_SPEC, "compile_fft_cluster.yaml")
    assert [v.name.endswith(("_cl", "_cls", "_cl_hs_inj")) for v in s.variants] == [True, True, True, True]
    files, _ = render_spec(s)
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    jobs = [rel for rel in files if re.search(r"_k\d+\.cu$", rel)]
    assert len(jobs) == 4
    for rel in jobs:
        assert "__cluster_dims__(" in files[rel] and files[rel].count("__global__") == 1, rel
    first = s.variants[0].name  # its launcher (size table, info) and bench executable
    more = [f"{first}/{first}.cu", f"{first}/{first}_bench.cu"]
    with ThreadPoolExecutor(max_workers=2) as ex:
        logs = list(ex.map(lambda rel: _nvcc_ptxas(nvcc, tmp_path, rel, "sm_90", device_only=rel in jobs)["sm_90"], jobs + more))
    # 2^15: one kernel, the last launch of 4 inside it, no workspace
    assert "{ 15, 1, 4, 0, {" in files[more[0]].replace("\n", " ")
    for rel, log in zip(jobs, logs):
        funcs = re.findall(r"Function properties for (\S+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores", log)
        kernels = [f for f in funcs if "tb_rare_call" not in f[0] and "tb_again" not in f[0]]  # (the tb rare paths' calls)
        # (the checked kernels as in test_nvcc_compiles_every_level_for_sm80_and_sm90: the tuning file's cluster plan fp64 2^14 spills
        # 364 bytes at 128 registers, measured 1.03x cuFFT with a fault)
        assert len(kernels) == 1 and int(kernels[0][2]) <= (512 if "abft" in rel else 64), (rel, log)


HOOKKERNEL_SPEC = textwrap.dedent(
    """
    name: compile_fft_hookkernel
    family: fft
    arch: [sm_90]
    protection: {scheme: abft, level: two-sided-tb}
    variants:
      - {precision: fp32, params: {logn: 14, launches: 2}}
      - {precision: fp32, protection: {inject: true}, params: {logn: 14, launches: 2, hooksplit: 3}}
      - {precision: fp64, params: {logn: 20}}
      - {precision: fp64, protection: {inject: true}, params: {logn: 20, hooksplit: 3}}
    """
)


def test_nvcc_hook_kernel_builds_keep_the_launch_kernels_of_the_build_without_injection_code(tmp_path):
    """hooksplit 3: each launch has its kernel of the blocks without a fault (k_*, no hooked code: registers and spills as
    the build without injection code has them at fp32 2^14) and the faulted block's (kh_*, from a given block on; a whole cluster in
    the cluster plans), which the launcher runs on a second stream forked from and joined to the caller's."""
    nvcc = find_nvcc()
    s = load_spec_text(HOOKKERNEL_SPEC, "compile_fft_hookkernel.yaml")
    names = [v.name for v in s.variants]
    assert names[1].endswith("_hk_inj") and names[3].endswith("_cl_hk_inj") and names[1][: -len("_hk_inj")] == names[0]
    files, _ = render_spec(s)
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    kern = {v: next(rel for rel in files if rel.startswith(v + "/") and re.search(r"_k\d+\.cu$", rel)) for v in names}
    for v in names[1::2]:
        src = files[kern[v]]
        assert src.count("__global__") == 4 and "kh_" in src and "cudaStreamWaitEvent(stream, aux->join, 0)" in src, v
    with ThreadPoolExecutor(max_workers=2) as ex:
        logs = dict(zip(names, ex.map(lambda v: _nvcc_ptxas(nvcc, tmp_path, kern[v], "sm_90", device_only=True)["sm_90"], names)))

    def launch_kernels(log: str) -> dict[str, tuple[int, int]]:
        """{k_L_I: (registers, spill store bytes)} of the launches' kernels (not kh_*, not the rare paths' calls)"""
        out = {}
        for m in re.finditer(r"Compiling entry function '\S*?(k_\d+_\d)EN[^']*'.*?(\d+) bytes spill stores.*?Used (\d+) registers", log, re.S):
            if "kh_" not in m.group(0).split("'")[1]:
                out[m.group(1)] = (int(m.group(3)), int(m.group(2)))
        return out

    a, b = launch_kernels(logs[names[0]]), launch_kernels(logs[names[1]])
    assert len(a) == 2 and a == b, (a, b)
    # (fp64 2^20's cluster plan: the false-alarm counts injection builds keep beside the fused DFTs' and the finish's
    # detections move ptxas's allocation, 84 / 44 spill bytes against 120 / 36 at 128 registers)
    a, b = launch_kernels(logs[names[2]]), launch_kernels(logs[names[3]])
    assert len(a) == 2 and a.keys() == b.keys() and all(b[k][0] == a[k][0] and b[k][1] <= 2 * a[k][1] for k in a), (a, b)


def test_sass_of_the_unprotected_kernel(tmp_path):
    nvcc = find_nvcc()
    cuobjdump = shutil.which("cuobjdump") or str(Path(nvcc).parent / "cuobjdump")
    if not Path(cuobjdump).exists():
        pytest.skip("cuobjdump not found")
    s = load_spec_text(SPEC, "compile_fft.yaml")
    files, _ = render_spec(s)
    v = s.variants[0]
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    cubin = tmp_path / "k.cubin"
    subprocess.run([nvcc, "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-arch=sm_90", "-cubin", "-I", str(tmp_path / v.name), "-I",
                    str(tmp_path / "common"), "-o", str(cubin), str(tmp_path / v.name / f"{v.name}_k12.cu")], check=True, capture_output=True)
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"LDG\.E\.64\.CONSTANT", sass)  # coalesced read-only loads of whole complex values
    assert re.search(r"STG\.E\.64", sass) and re.search(r"STS\.64", sass) and re.search(r"LDS\.64", sass)
    assert "LDL" not in sass and "STL" not in sass
    # compile-time twiddles of the radix-16 codelet: cos(pi/8), cos(pi/4) as immediates
    assert "0.92387950420379638672" in sass and "0.70710676908493041992" in sass


# ---- the host emulator --------------------------------------------------------------------------


def _gxx() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def emulator_sources(fam, v, logn: int) -> dict[str, str]:
    """Sources of a host emulator of the variant at size 2^logn: the kernel translation unit plus a main that runs every
    block of every launch on the CPU (see ftgen_fft_emu.h)."""
    env = TemplateEnv()
    ctx = fam.template_context(v)
    plan = next(p for p in ctx["plans"] if p["logn"] == logn)
    return {
        f"{v.name}_k{logn}.cu": env.render("fft/kernels.cu.j2", {**ctx, "plan": plan}),
        f"{v.name}_emu.cpp": env.render("fft/emu_main.cpp.j2", {**ctx, "plan": plan}),
    }


def build_emulator(tmp: Path, precision: str, level: str, params: dict, inject: bool = False, direction: str = "forward") -> tuple[Path, object]:
    prot = "{scheme: none}" if level == "none" else f"{{scheme: abft, level: {level}, inject: {'true' if inject else 'false'}}}"
    body = ", ".join(f"{k}: {v}" for k, v in {**params, "direction": direction}.items())
    s = load_spec_text(f"name: emu\nfamily: fft\narch: [sm_90]\nprecision: {precision}\nprotection: {prot}\nparams: {{{body}}}\n")
    (v,) = s.variants
    fam = s.family
    d = tmp / v.name
    d.mkdir(parents=True, exist_ok=True)
    for rel, text in emulator_sources(fam, v, params["logn"]).items():
        (d / rel).write_text(text)
    for h in ("ftgen_fft_core.h", "ftgen_fft_emu.h"):
        shutil.copy(templates_dir() / "fft" / h, d / h)
    exe = d / "emu"
    p = subprocess.run([_gxx(), "-std=c++17", "-O1", "-w", "-I", str(d), str(d / f"{v.name}_emu.cpp"), "-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-4000:]
    return exe, v


def run_emulator(exe: Path, x: np.ndarray, dtype, faults=(), flags: int = 0, k: float | None = None, hint: bool = True) -> tuple[np.ndarray, dict]:
    d = exe.parent
    x.astype(dtype).tofile(d / "in.bin")
    argv = [str(exe), str(d / "in.bin"), str(d / "out.bin"), str(x.shape[0]), "--flags", str(flags)] + ([] if hint else ["--no-hint"])
    if k is not None:
        argv += ["--k", str(k)]
    for f in faults:
        argv += ["--fault", *map(str, f)]
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return np.fromfile(d / "out.bin", dtype=dtype).reshape(x.shape), json.loads(p.stdout)


def rel_err(y, ref) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.linalg.norm(y - ref, axis=1) / np.linalg.norm(ref, axis=1)
    return float(np.max(e)) if np.all(np.isfinite(e)) else float("inf")


EMU_CASES = [
    ("fp32", "none", {"logn": 3, "n1": 8}, 300, "forward"),  # one thread per column, 16-byte vectors, partial tile
    ("fp32", "none", {"logn": 4}, 301, "forward"),  # the automatic plan: 4 threads per signal, partial tile
    ("fp64", "none", {"logn": 4}, 77, "inverse"),  # measured plan: 8 threads per signal, partial tile
    ("fp32", "none", {"logn": 11}, 3, "inverse"),
    ("fp64", "none", {"logn": 9, "N1": 8, "N2": 8, "N3": 8}, 2, "forward"),
    ("fp32", "none", {"logn": 14}, 2, "forward"),
    ("fp32", "one-sided", {"logn": 8, "N1": 16, "N2": 16}, 3, "forward"),
    ("fp64", "two-sided-thread", {"logn": 10}, 3, "forward"),
    ("fp32", "two-sided-tb", {"logn": 12}, 8, "forward"),
    ("fp32", "two-sided-tb", {"logn": 5}, 77, "forward"),  # measured plan: 32 signals per block, a partial last block
    ("fp64", "two-sided-tb", {"logn": 4}, 45, "inverse"),  # measured plan: four threads per signal, 32 signals per block
    ("fp64", "two-sided-tb", {"logn": 9, "N1": 8, "N2": 8, "N3": 8}, 2, "inverse"),
    # measured plans of the tuning file: radix 32 in one launch, radix 16 fp64 two-sided-tb, and the shapes
    # of the large two-launch plans at a small size (radix 16 fp64 / 8 columns fp32 per block)
    ("fp32", "none", {"logn": 13}, 2, "forward"),
    ("fp64", "two-sided-tb", {"logn": 10}, 8, "forward"),
    ("fp32", "two-sided-tb", {"logn": 13}, 4, "forward"),
    # the simultaneous two-sided-tb (above 2^12) in two launches: per-column launch twiddles (the first), one set per
    # block (the second), the prefilter and the rare path's vector check, location and correction
    ("fp32", "two-sided-tb", {"logn": 14, "launches": 2}, 2, "forward"),
    ("fp64", "two-sided-tb", {"logn": 13, "launches": 2}, 2, "inverse"),
    # ... with two columns per thread (measured plans at fp32 2^18 / 2^22, fp64 2^14 / 2^21): the checks on the sum of a thread's columns
    ("fp32", "two-sided-tb", {"logn": 13, "launches": 2, "n1": 8, "n2": 8, "tcols": 2, "bs1": 8, "bs2": 8, "minb": 3}, 2, "inverse"),
    ("fp64", "two-sided-tb", {"logn": 13, "launches": 2, "n1": 4, "n2": 4, "tcols": 2, "bs1": 8, "bs2": 8}, 2, "forward"),  # measured plan fp64 2^14
    ("fp64", "none", {"logn": 12, "launches": 2, "n1": 16, "n2": 16, "bs1": 4, "bs2": 4}, 2, "forward"),
    ("fp64", "none", {"logn": 12, "launches": 2, "n1": 16, "n2": 8, "bs1": 2, "bs2": 4}, 3, "inverse"),  # 2^22's shape
    ("fp32", "none", {"logn": 12, "launches": 2, "bs1": 8, "bs2": 8}, 2, "forward"),
    # cluster plans (launch 2 inside launch 1, the blocks of a signal one cluster): the measured fp32 2^15 plan's shape (four blocks of
    # radix 16, columns at stride 4), fp64 2^14 / 2^15's (radix 16, four and eight blocks), the contiguous loads scattered
    # through distributed shared memory (cluster: 2)
    ("fp32", "none", {"logn": 12, "N1": 1024, "cluster": 1, "n1": 16, "minb": 2}, 3, "forward"),
    ("fp64", "none", {"logn": 11, "N1": 512, "cluster": 1, "n1": 16}, 2, "inverse"),
    ("fp64", "none", {"logn": 12, "N1": 512, "cluster": 1, "n1": 16}, 2, "forward"),
    ("fp32", "none", {"logn": 11, "N1": 1024, "cluster": 2, "n1": 32}, 3, "inverse"),
    ("fp64", "none", {"logn": 10, "N1": 256, "cluster": 2, "n1": 8}, 2, "forward"),
    # ... two columns m per block (clusters of N2 / 2 blocks, vectors across the two columns)
    ("fp32", "none", {"logn": 12, "N1": 512, "N2": 8, "cluster": 1, "bs1": 2, "n1": 16}, 3, "inverse"),
    ("fp64", "none", {"logn": 11, "N1": 512, "N2": 4, "cluster": 1, "bs1": 2, "n1": 16}, 2, "forward"),
    # three-launch cluster plans: launch 3 inside launch 2, whose clusters hold bs2 adjacent columns (vectors across them, or
    # one column: scalar stores)
    ("fp32", "none", {"logn": 12, "N1": 16, "N2": 64, "N3": 4, "n2": 16, "bs2": 4, "cluster": 1}, 3, "forward"),
    ("fp64", "none", {"logn": 11, "N1": 8, "N2": 128, "N3": 2, "n2": 16, "bs2": 2, "cluster": 1}, 2, "inverse"),
    ("fp32", "none", {"logn": 10, "N1": 8, "N2": 32, "N3": 4, "n2": 8, "bs2": 1, "cluster": 1}, 2, "forward"),
    # two-sided-tb cluster plans: phase 1's checks with the outputs in the tile (the rare path through the workspace), the
    # fused DFTs' own checks; faults at every stage of both (two and three launches)
    # (the tuning file's cluster plan shapes: two columns per thread, two columns m per block in clusters of N2 / 2 blocks, or bs2 columns
    # s of a three-launch plan)
    ("fp32", "two-sided-tb", {"logn": 13, "N1": 2048, "cluster": 1, "n1": 16}, 2, "forward"),
    # (hooksplit, as the tuning file's cluster plan injection builds: the faulted block runs the hooked body, the others the body without hooks)
    ("fp64", "two-sided-tb", {"logn": 13, "N1": 1024, "N2": 8, "bs1": 2, "tcols": 2, "cluster": 1, "n1": 8, "hooksplit": 1}, 2, "forward"),
    ("fp64", "two-sided-tb", {"logn": 13, "N1": 16, "N2": 128, "N3": 4, "n2": 8, "bs2": 4, "tcols": 2, "cluster": 1, "hooksplit": 1}, 2, "inverse"),
    # ... and the split in the other designs: the sequential two-sided-tb, the simultaneous one without a cluster, one-sided
    ("fp32", "two-sided-tb", {"logn": 12, "hooksplit": 1}, 8, "inverse"),
    ("fp32", "two-sided-tb", {"logn": 14, "launches": 2, "hooksplit": 1}, 2, "forward"),
    ("fp64", "one-sided", {"logn": 8, "N1": 16, "N2": 16, "hooksplit": 1}, 3, "forward"),
    # tbenc 2: the encodings at the staged copies (both sides in the last launch, the input side in the others: launch
    # twiddles per column in the first launch, one set per block in a middle one), the prefilter on the block's sums;
    # two columns per thread; a cluster plan's phase 1; the hook split
    ("fp32", "two-sided-tb", {"logn": 14, "launches": 2, "tbenc": 2}, 2, "forward"),
    ("fp64", "two-sided-tb", {"logn": 13, "launches": 2, "tbenc": 2}, 2, "inverse"),
    ("fp32", "two-sided-tb", {"logn": 13, "launches": 3, "tbenc": 2, "hooksplit": 1}, 2, "inverse"),
    ("fp64", "two-sided-tb", {"logn": 13, "launches": 3, "bs2": 2, "tbenc": 2}, 3, "forward"),
    ("fp32", "two-sided-tb", {"logn": 13, "launches": 2, "n1": 8, "n2": 8, "tcols": 2, "bs1": 8, "bs2": 8, "minb": 3, "tbenc": 2}, 2, "inverse"),
    ("fp64", "two-sided-tb", {"logn": 13, "N1": 1024, "N2": 8, "bs1": 2, "tcols": 2, "cluster": 1, "n1": 8, "hooksplit": 1, "tbenc": 2}, 2, "forward"),
    # tbenc 3: the staged encodings in the launch of 64 threads per column only (block prefilter there, group prefilter in
    # the other)
    ("fp32", "two-sided-tb", {"logn": 13, "N1": 1024, "tbenc": 3}, 2, "inverse"),
]


@pytest.fixture(scope="module")
def emu_dir(tmp_path_factory):
    if _gxx() is None:
        pytest.skip("no C++ compiler for the host emulator")
    return tmp_path_factory.mktemp("fft_emu")


def test_tile_of_eight_threads_per_column_is_conflict_free(emu_dir):
    """fp32 128-point launches at radix 16 (8 threads per column: two columns per half-warp), staged in 16 and 32
    columns: every launch's shared-memory wavefronts equal the ideal (the swizzle's column term; the default one left
    2-way conflicts, 1.3-1.7x)."""
    params = {"logn": 14, "N1": 128, "N2": 128, "bs1": 16, "bs2": 32}
    exe, _ = build_emulator(emu_dir, "fp32", "none", params)
    x = np.random.default_rng(3).standard_normal((2, 1 << 14)) + 1j * np.random.default_rng(4).standard_normal((2, 1 << 14))
    y, st = run_emulator(exe, x, np.complex64)
    assert rel_err(y, F.fft_reference(x.astype(np.complex64))) <= F.tolerance("fp32", 14) / 8
    for wavefronts, ideal, _, _ in st["per_launch"][:2]:
        assert ideal > 0 and wavefronts == ideal, st["per_launch"]


@pytest.mark.parametrize("precision, level, params, batch, direction", EMU_CASES)
def test_emulated_kernels(emu_dir, precision, level, params, batch, direction):
    inject = level != "none"
    exe, v = build_emulator(emu_dir, precision, level, params, inject=inject, direction=direction)
    dtype = np.complex64 if precision == "fp32" else np.complex128
    rng = np.random.default_rng(7)
    n = 1 << params["logn"]
    x = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
    ref = F.fft_reference(x.astype(dtype), inverse=direction == "inverse")
    tol = F.tolerance(precision, params["logn"])
    y, st = run_emulator(exe, x, dtype)
    assert rel_err(y, ref) <= tol / 8, rel_err(y, ref) / tol
    assert st["races"] == 0, st["first_race"]
    assert st["detected"] == 0
    plan = F.FftFamily().plans(v)[0]
    launches = sum(1 for lp in plan.launches if not lp.fused)  # kernels (a cluster plan: one for two launches)
    esize = F.ESIZE[precision]
    assert st["gmem"]["load_bytes"] == launches * batch * n * esize  # every element read once per kernel
    assert st["gmem"]["store_bytes"] == launches * batch * n * esize
    # radix <= 4 per thread (the automatic plans of n <= 16, measured 2x faster on the GPU than radix
    # 8-16 there) exchanges through shared memory with 2-way conflicts
    small_radix = min(lp.n for lp in plan.launches) <= 4
    assert st["smem"]["worst"] <= 4.0 and st["smem"]["wavefronts"] <= (2.05 if small_radix else 1.6) * max(st["smem"]["ideal"], 1)
    # one thread per column (16-byte vectors 8 * R bytes apart): each 32-byte sector is half used
    # per instruction (the other half by the next, from L1); otherwise full sectors
    one_thread_per_column = any(lp.T == 1 for lp in plan.launches)
    bound = 2.05 if one_thread_per_column else 1.6
    if plan.cluster and not plan.launches[0].cl_scatter:
        # columns loaded at stride N2: a 32-byte sector holds min(N2, 32 / esize) blocks' elements; stores are contiguous
        bound = 1.05 * (min(plan.cluster, 32 // esize) + 1) / 2
    assert st["gmem"]["sectors"] <= bound * st["gmem"]["ideal"], (st["gmem"], bound)
    if not inject:
        return
    # faults at every stage of every launch, each in its own run: corrected (or recomputed)
    bits = 64 if precision == "fp32" else 128
    blocks = st["blocks"]
    lps = [lp for lp in plan.launches if not lp.fused]  # the kernels (a cluster kernel's stages include the fused DFTs)
    threads = max(lp.threads for lp in lps)
    elems = max(lp.fault_elems for lp in lps)
    steps = max(lp.fault_steps for lp in lps)
    fixed = 0
    for trial in range(24):
        f = (int(rng.integers(blocks)), int(rng.integers(threads)), int(rng.integers(elems)), trial % steps, trial % 2,
             int(rng.integers(bits // 2 - 8, bits // 2)) if trial % 2 == 0 else bits // 2 - 2, 4.0)
        yu, su = run_emulator(exe, x, dtype, [f], flags=2)
        yc, sc = run_emulator(exe, x, dtype, [f])
        assert sc["races"] == 0
        if not sc["fault"]["applied"]:
            assert sc["detected"] == 0
            continue
        if rel_err(yu, ref) > tol:
            assert sc["detected"] >= 1 and rel_err(yc, ref) <= tol, (f, sc, rel_err(yc, ref) / tol)
            assert sc["corrected"] >= 1 and sc["false_alarms"] == 0
            fixed += 1
    assert fixed >= 4


def test_emulated_hook_split_with_and_without_the_callers_hint(emu_dir):
    """hooksplit: with one planned fault the launches get its block from the caller (ftgen_fft_problem::fault_block_hint)
    and the other blocks read no fault table; without the hint (--no-hint) or with two faults every block reads the
    table. Either way the faulted blocks run the hooked body: the same outputs and counters, every fault corrected."""
    params = {"logn": 14, "launches": 2, "hooksplit": 1}
    exe, v = build_emulator(emu_dir, "fp32", "two-sided-tb", params, inject=True)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 1 << 14)) + 1j * rng.standard_normal((4, 1 << 14))
    ref = F.fft_reference(x.astype(np.complex64))
    tol = F.tolerance("fp32", 14)
    _, st = run_emulator(exe, x, np.complex64)
    blocks, threads = st["blocks"], min(lp.threads for lp in F.FftFamily().plans(v)[0].launches)
    first = (1, threads - 1, 3, 0, 1, 30, 4.0)  # launch 1, stage 0: an offset of 4
    last = (blocks - 1, 0, 5, 1, 1, 30, 4.0)  # launch 2, stage 1
    for f in (first, last):
        y, st = run_emulator(exe, x, np.complex64, [f])
        yn, stn = run_emulator(exe, x, np.complex64, [f], hint=False)
        assert st["fault"]["applied"] and st["corrected"] >= 1 and st["false_alarms"] == 0, st
        assert np.array_equal(y, yn) and st == stn
        assert rel_err(y, ref) <= tol
    y, st = run_emulator(exe, x, np.complex64, [first, last])
    assert st["detected"] >= 2 and st["corrected"] >= 2 and st["false_alarms"] == 0, st
    assert rel_err(y, ref) <= tol


def test_emulated_tb_recomputes_a_fault_too_small_to_locate(emu_dir):
    """The kernels' side of the model's test_two_sided_tb_recomputes_a_fault_too_small_to_locate: a fault of 1.04x the
    tolerance, whose weighted quotient points at the next column, is recomputed, not "corrected" into that column."""
    exe, _ = build_emulator(emu_dir, "fp64", "two-sided-tb", {"logn": 12}, inject=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4096)) + 1j * rng.standard_normal((64, 4096))
    ref, tol = F.fft_reference(x), F.tolerance("fp64", 12)
    fault = (13, 150, 35, 0, 0, 13, 0.0)  # column 54, position 918, before the first sub-pass: bit 13 of the real part
    yu, su = run_emulator(exe, x, np.complex128, [fault], flags=2)
    assert su["fault"]["column"] == 54 and 1.0 < rel_err(yu, ref) / tol < 1.1
    y, st = run_emulator(exe, x, np.complex128, [fault])
    assert st["detected"] == 1 and st["recomputed"] == 1 and st["false_alarms"] == 0, st
    assert rel_err(y, ref) < tol / 10


@pytest.mark.parametrize("precision, params, direction", [("fp32", {"logn": 14, "launches": 2}, "forward"),
                                                        ("fp64", {"logn": 13, "launches": 2}, "inverse"),
                                                        ("fp32", {"logn": 14, "launches": 2, "tbenc": 2}, "inverse")])
def test_emulated_tb_prefilter_escalations_and_exact_scores(emu_dir, precision, params, direction):
    """The simultaneous two-sided-tb's prefilter: the kernels count the groups it escalates to the exact check as
    the model does, and recorded scores (campaigns) are the decision's own min(prefilter, vector), like the
    model's, not the prefilter's upper bound; a group the prefilter clears never detects."""
    exe, _ = build_emulator(emu_dir, precision, "two-sided-tb", params, inject=True, direction=direction)
    dtype = np.complex64 if precision == "fp32" else np.complex128
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 1 << params["logn"])) + 1j * rng.standard_normal((2, 1 << params["logn"]))
    model = F.FftModel(precision, "two-sided-tb", params, direction)
    _, rep = model.run(x.astype(dtype))
    _, st = run_emulator(exe, x, dtype)
    assert st["detected"] == st["escalated"] == rep.escalated == 0 and st["score"] == 0  # scores not recorded
    _, st = run_emulator(exe, x, dtype, flags=1)
    assert st["detected"] == st["escalated"] == 0 and 0 < st["score"] < 0.5
    assert 1 / 1.6 < st["score"] / rep.max_score < 1.6, (st["score"], rep.max_score)
    # a multiplier small enough that (about) every group escalates (2 signals x the columns of each launch), and
    # one where the prefilter sends groups the exact check clears: the counts agree with the model's
    # (tbenc 2: one prefilter per block)
    groups = sum(2 * lp.cols_per_signal // (lp.bs if lp.tb_stage else lp.L) for lp in model.plan.launches)
    # (a block's prefilter sums many columns: its scores spread less, here 0.12-0.42 of TB_PRE times the threshold at
    # the default multiplier 4, and 1.1 splits them away from the boundary)
    for k in (1e-6, 1.1 if params.get("tbenc") == 2 else 0.3):
        model.k = k
        _, rep = model.run(x.astype(dtype))
        _, st = run_emulator(exe, x, dtype, flags=1, k=k)
        if k == 1e-6:
            # (a clean residual of a few ulps is now and then exactly zero: it passes any multiplier)
            assert min(st["escalated"], rep.escalated) >= groups - 2 and st["detected"] > 0
        else:
            # (the kernels sum their shares in thread order, the model pairwise: a group near the boundary can go either
            # way; tbenc 2 at 1.1, 16 groups: 7 against the model's 5 with the output sums split by sign, 6 before that
            # split)
            assert 0 < rep.escalated < groups and abs(st["escalated"] - rep.escalated) <= max(2, 0.02 * groups)
            assert st["detected"] < st["escalated"]
    # a fault that overflows (the top exponent bit of an input): its residual is not finite, which is over every
    # threshold; the recorded score says so (JSON null) instead of leaving the trial at the clean groups' score
    # (the flipped value is set to 1.5: its exponent bits all ones after the flip, an infinity)
    half = 32 if precision == "fp32" else 64
    fault = (0, 0, 0, 0, 0, half - 2, 0.0)
    _, st = run_emulator(exe, x, dtype, [fault])
    n = 1 << params["logn"]
    col, pos = st["fault"]["column"], st["fault"]["position"]
    lp = model.plan.launches[0]
    x = x.copy()
    x.reshape(-1)[(col // lp.cols_per_signal) * n + col % lp.cols_per_signal + lp.cols_per_signal * pos] = 1.5 + 1.5j
    y, st = run_emulator(exe, x, dtype, [fault], flags=1)
    assert st["fault"]["applied"] and st["detected"] >= 1 and st["corrected"] >= 1, st
    assert st["score"] is None, st["score"]
    ref = F.fft_reference(x.astype(dtype), inverse=direction == "inverse")
    assert rel_err(y, ref) <= F.tolerance(precision, params["logn"])


def test_search_dispatch_header_over_fft_variants_compiles(tmp_path):
    """`ftgen search` writes a dispatch header calling the winners by their C symbols (names with
    '-' from the protection token become '_'); it must compile against the fft launchers."""
    from ftgen.codegen.emit import generate
    from ftgen.search import SearchResult, check_dispatch_compiles, dispatch_header

    s = load_spec_text(
        "name: dsp\nfamily: fft\narch: [sm_90]\nprecision: fp32\nprotection: {scheme: abft, level: two-sided-tb}\n"
        "variants:\n  - params: {logn: 12}\n  - params: {logn: 20}\nshapes: [{n: 4096, batch: 64}]\n"
    )
    g = generate(s, tmp_path)
    res = SearchResult(gpu={"name": "test"})
    for v, n in zip(s.variants, (4096, 1 << 20)):
        res.best[f"{n}x64"] = {"kernel": v.name, "shape": {"n": n, "batch": 64}, "ms": {"median": 1.0}}
    hdr = g.out_dir / "dsp_dispatch.h"
    hdr.write_text(dispatch_header(s, res))
    ok, log = check_dispatch_compiles(hdr, g.out_dir)
    assert ok, log
    assert "fft_c2c_f32_abft_2sided_tb_fwd_logn12_N4096_n16_bs1_t1_sm(p, stream)" in hdr.read_text()
