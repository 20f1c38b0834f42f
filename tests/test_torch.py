"""ftgen.torch on a GPU: the protected GEMM as a torch op (opcheck), FTLinear against nn.Linear, protect() and
torch.compile, counters and policies. Skipped without torch or a GPU (CI installs neither); on the GPU machine:
    FTGEN_GPU_ARCH=sm_90 python -m pytest -m gpu tests/test_torch.py
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

import ftgen.torch as ftt  # noqa: E402  (after the skip: it imports torch)
from ftgen import tolerance  # noqa: E402

HIDDEN = [(1, 1, 1), (1000, 1234, 777), (4097, 3, 129), (17, 4096, 33), (256, 512, 1024)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torchlib")
    env = {**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/local/cuda/bin",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    cli = [sys.executable, "-m", "ftgen.cli"]
    spec = REPO / "specs" / "gemm" / "torch_linear.yaml"
    r = subprocess.run(cli + ["generate", str(spec), "-o", str(tmp / "gen")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cli + ["build", str(tmp / "gen" / "torch_linear"), "--lib", str(tmp / "inst")], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return ftt.load(tmp / "inst" / "lib" / "libftgen_torch_linear.so")


def _check(out, a, b):
    ref = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    err = ((out.double() - ref).abs() / scale.clamp_min(1e-30)).max().item()
    tol = tolerance.rule("tf32x3").tolerance(a.shape[1])
    assert torch.isfinite(out).all() and err <= tol, (tuple(a.shape), tuple(b.shape), err, tol)


@pytest.mark.parametrize("m,n,k", HIDDEN)
def test_mm_is_fp32_accurate_at_every_shape(lib, m, n, k):
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    _check(torch.ops.ftgen.mm(a, b, lib, "tf32x3"), a, b)
    _check(torch.ops.ftgen.mm(a, b.t().contiguous().t(), lib, "tf32x3"), a, b)  # B column-major: the _rc entry


def test_opcheck(lib):
    a = torch.randn(64, 96, device="cuda", requires_grad=True)
    b = torch.randn(96, 80, device="cuda", requires_grad=True)
    torch.library.opcheck(torch.ops.ftgen.mm.default, (a, b, lib, "tf32x3"))


def test_bad_inputs_are_refused(lib):
    a = torch.randn(4, 5, device="cuda")
    with pytest.raises(ValueError, match="do not multiply"):
        torch.ops.ftgen.mm(a, torch.randn(4, 5, device="cuda"), lib, "tf32x3")
    with pytest.raises(ValueError, match="float32"):
        torch.ops.ftgen.mm(a.double(), torch.randn(5, 3, device="cuda").double(), lib, "tf32x3")
    with pytest.raises(Exception, match="no .*tf32 GEMM entry point|gemm_tf32"):
        torch.ops.ftgen.mm(a, torch.randn(5, 3, device="cuda"), lib, "tf32")
    with pytest.raises(ValueError, match="policy"):
        ftt.set_policy("ignore")


def _mlp(d=256):
    return torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)).cuda()


def test_ftlinear_and_protect_match_the_model_and_compile(lib):
    torch.manual_seed(0)
    model = _mlp()
    x = torch.randn(8, 33, 256, device="cuda")
    with torch.no_grad():
        want = model(x)
        prot = ftt.protect(model, lib)
        assert isinstance(prot[0], ftt.FTLinear) and prot[0].weight is model[0].weight
        got = prot(x)
        compiled = torch.compile(prot)(x)
    assert (got - want).abs().max().item() <= 1e-4 * want.abs().max().item()
    assert torch.equal(compiled, got)


def test_backward_runs_through_the_protected_op(lib):
    a = torch.randn(64, 32, device="cuda", requires_grad=True)
    b = torch.randn(32, 48, device="cuda", requires_grad=True)
    torch.ops.ftgen.mm(a, b, lib, "tf32x3").sum().backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    (a @ b).sum().backward()
    assert torch.allclose(ga, a.grad, rtol=1e-5, atol=1e-5) and torch.allclose(gb, b.grad, rtol=1e-5, atol=1e-5)


def test_clean_calls_report_no_fault(lib):
    ftt.reset()
    a, b = torch.randn(512, 512, device="cuda"), torch.randn(512, 512, device="cuda")
    for _ in range(5):
        torch.ops.ftgen.mm(a, b, lib, "tf32x3")
    rep = ftt.report(emit=False)[f"{lib}:mm"]
    assert rep["calls"] == 5 and rep["detected"] == 0 and rep["uncorrectable"] == 0
    assert '"ops"' in ftt.json_line(step=1)
