"""The interface description a library ships (ftgen_<name>.json) and the ctypes binding that reads it (ftgen.binding,
which ftgen.torch builds on). No torch needed. The compile test builds a real library and binds it."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from ftgen import families
from ftgen.codegen.emit import render_spec
from ftgen.codegen.library import ABI_VERSION, c_params, describe, plan_library
from ftgen.spec import load_spec_text
from ftgen import binding as _lib

SPEC = textwrap.dedent(
    """
    name: torch-gemm
    family: gemm
    arch: [sm_80]
    variants:
      - {precision: fp32, protection: {scheme: abft, level: threadblock},
         params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8}}
      - {precision: fp64, protection: {scheme: none}, params: {m_tb: 64, n_tb: 64, k_tb: 8, m_w: 32, n_w: 32, m_t: 4, n_t: 8}}
    shapes:
      - {m: 256, n: 256, k: 256}
    """
)


def test_c_params_parse_types_and_names():
    assert c_params("int m, const float* A, double alpha, float *C, void* p") == [
        ["int", "m"], ["const float*", "A"], ["double", "alpha"], ["float*", "C"], ["void*", "p"]]
    assert c_params("void") == [] and c_params("") == []


def test_ctypes_of_the_description_types():
    assert _lib.ctype_of("int") is ctypes.c_int and _lib.ctype_of("double") is ctypes.c_double
    assert _lib.ctype_of("const float*") is ctypes.c_void_p and _lib.ctype_of("size_t") is ctypes.c_size_t
    with pytest.raises(ValueError, match="no ctypes equivalent"):
        _lib.ctype_of("struct foo")


def test_description_lists_every_entry_point_with_its_parameters():
    _, manifest = render_spec(load_spec_text(SPEC, "lib.yaml"))
    plan = plan_library(manifest, families.get("gemm"))
    d = describe(plan)
    assert d["abi_version"] == ABI_VERSION == _lib.ABI_VERSION and d["family"] == "gemm" and d["name"] == "torch_gemm"
    groups = {g["name"]: g for g in d["groups"]}
    assert set(groups) == {"gemm_f32", "gemm_f64"}
    names = [n for _, n in groups["gemm_f32"]["params"]]
    assert names == ["m", "n", "k", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]
    assert dict((n, t) for t, n in groups["gemm_f64"]["params"])["A"] == "const double*"
    assert all(_lib.ctype_of(t) for g in d["groups"] for t, _ in g["params"])  # every type binds
    json.dumps(d)  # plain data


def test_find_description_beside_the_library_or_in_lib(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "build").mkdir()
    so = tmp_path / "build" / "libftgen_x.so"
    so.write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="ftgen_x.json"):
        _lib.find_description(so)
    (tmp_path / "lib" / "ftgen_x.json").write_text("{}")
    assert _lib.find_description(so) == tmp_path / "lib" / "ftgen_x.json"
    with pytest.raises(ValueError, match="libftgen_<name>.so"):
        _lib.find_description(tmp_path / "other.so")


def test_an_old_interface_version_is_refused(tmp_path):
    so = tmp_path / "libftgen_old.so"
    so.write_bytes(b"")
    (tmp_path / "ftgen_old.json").write_text(json.dumps({"abi_version": 1, "name": "old"}))
    with pytest.raises(_lib.FtgenLibError, match="rebuild it"):
        _lib.Library(so)


def test_importing_ftgen_imports_no_torch():
    code = "import sys, ftgen, ftgen.cli, ftgen.binding; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.compile
def test_the_built_library_binds(tmp_path):
    spec = tmp_path / "lib.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/local/cuda/bin", "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "ftgen.cli"]
    r = subprocess.run(cli + ["generate", str(spec), "-o", str(tmp_path / "gen")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cli + ["build", str(tmp_path / "gen" / "torch-gemm"), "--lib", str(tmp_path / "inst")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    so = tmp_path / "inst" / "lib" / "libftgen_torch_gemm.so"
    assert (tmp_path / "inst" / "lib" / "ftgen_torch_gemm.json").is_file()  # installed beside the library
    lib = _lib.Library(so)
    assert set(lib.groups) == {"gemm_f32", "gemm_f64"}
    assert lib.version().startswith("ftgen ") and lib.variant_name(0) and lib.variant_name(99) is None
    assert lib.select("gemm_f32", 1000, 1234, 777) >= 0
    from conftest import _has_gpu

    if not _has_gpu():
        with pytest.raises(_lib.FtgenLibError, match="create"):
            lib.handle(0)
    else:
        assert lib.handle(0) and lib.counters(0)["detected"] == 0
        lib.close()
