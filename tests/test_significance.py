"""The one tolerance rule (ftgen/tolerance.py) on simulated GEMM results: an fp32-level result passes the
fp32-level rule, a single-pass tf32 result does not (it passes tf32's), and the rule's terms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ftgen import tolerance as tol


def tf32_round(x):
    """fp32 -> tf32 (10 explicit mantissa bits), round to nearest even, as fp32."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    lsb = (u >> 13) & 1
    u = ((u + 0xFFF + lsb) >> 13) << 13
    return u.astype(np.uint32).view(np.float32)


def draw(rng, shape, dist):
    if dist == "uniform":
        return rng.uniform(0.0, 1.0, shape)
    if dist == "loguniform":
        return rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-3, 3, shape)
    return rng.standard_normal(shape)


def fp32_sequential(A, B):
    """C = A B with every product and partial sum rounded to fp32, the terms added one by one in k order."""
    acc = np.zeros((A.shape[0], B.shape[1]), dtype=np.float32)
    for kk in range(A.shape[1]):
        acc = (acc + np.outer(A[:, kk], B[kk, :]).astype(np.float32)).astype(np.float32)
    return acc


def rel_err(C, A, B):
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    ref = A64 @ B64
    s = np.abs(A64) @ np.abs(B64)
    return float(np.max(np.abs(C.astype(np.float64) - ref) / s))


@pytest.mark.parametrize("dist", ["normal", "uniform", "loguniform"])
def test_fp32_result_passes_and_tf32_result_fails_the_fp32_level_rule(dist):
    rng = np.random.default_rng({"normal": 1, "uniform": 2, "loguniform": 3}[dist])
    m, k, n = 48, 2048, 48
    A = draw(rng, (m, k), dist).astype(np.float32)
    B = draw(rng, (k, n), dist).astype(np.float32)
    fp32 = fp32_sequential(A, B)
    # single-pass tf32: the operands rounded to tf32, exact products, fp32 sums
    tf32 = fp32_sequential(tf32_round(A), tf32_round(B))
    e32, etf = rel_err(fp32, A, B), rel_err(tf32, A, B)
    t32 = tol.tolerance("fp32", k)
    assert tol.tolerance("tf32x3", k) == t32  # tf32x3 delivers fp32-level products: held to fp32's rule
    assert e32 <= t32, (e32, t32)
    assert etf > t32, (etf, t32)  # a tf32 result must not pass as fp32-level
    assert etf <= tol.tolerance("tf32", k, rounded_reference=False)  # it passes tf32's own rule
    # the rule is not the worst-case bound: within a few hundred roundoffs at this k
    assert t32 < 300 * 2.0**-24


def test_the_rule_terms():
    k = 4096
    r = tol.rule("fp32")
    assert r.tolerance(k) == pytest.approx(2.0**-24 * (tol.C_SQRT * 64 + tol.C_CONST))
    assert tol.tolerance("fp64", k) == pytest.approx(2.0**-53 * (tol.C_SQRT * 64 + tol.C_CONST))
    # tf32: fp32-level sums of exact products of the rounded operands; its input rounding against unrounded data
    assert tol.tolerance("tf32", k) == pytest.approx(r.tolerance(k))
    ut = 2.0**-11
    assert tol.tolerance("tf32", k, rounded_reference=False) == pytest.approx(r.tolerance(k) + 2 * ut + ut * ut)
    # fp16 / bf16 with fp32 accumulation: fp32's accumulation term plus the output rounding (and input rounding
    # against an unrounded reference)
    assert tol.tolerance("fp16", k) == pytest.approx(r.tolerance(k) + 2.0**-11)
    assert tol.tolerance("bf16", k) == pytest.approx(r.tolerance(k) + 2.0**-8)
    u = 2.0**-8
    assert tol.tolerance("bf16", k, rounded_reference=False) == pytest.approx(r.tolerance(k) + 2 * u + u * u + 2.0**-8)
    # grows with sqrt(k), never below the constant term
    assert tol.tolerance("fp32", 4 * k) < 2 * tol.tolerance("fp32", k)
    assert tol.tolerance("fp32", 0) == tol.tolerance("fp32", 1) > 2.0**-24 * tol.C_CONST
    # the constant derivation: LAMBDA standard deviations of sqrt(2) u sqrt(k) / 3
    assert tol.C_SQRT == pytest.approx(tol.LAMBDA * math.sqrt(2) / 3)
    with pytest.raises(ValueError, match="precision"):
        tol.rule("fp8")


def test_context_and_rows():
    c = tol.context("tf32x3")
    t = float(c["tol_u"]) * (float(c["tol_c1"]) * math.sqrt(1000) + float(c["tol_c0"])) + float(c["tol_io"])
    assert t == pytest.approx(tol.tolerance("tf32x3", 1000))
    desc, t = tol.for_row({"precision": "fp32", "shape": {"m": 8, "n": 8, "k": 1024}})
    assert t == tol.tolerance("fp32", 1024) and desc.startswith("fp32:")
    assert tol.for_row({"precision": "fp32", "shape": {"n": 1024, "batch": 4}}) is None  # no depth: not this rule
    assert tol.for_row({"precision": "fp8", "shape": {"k": 4}}) is None
    # a campaign of tf32 rows judges significance by what tf32 delivers on the caller's fp32 data: its input rounding
    desc, t = tol.for_row({"precision": "tf32", "shape": {"m": 8, "n": 8, "k": 1024}})
    assert t == tol.tolerance("tf32", 1024, rounded_reference=False) > tol.tolerance("tf32", 1024) and "2^2" not in desc
    assert "+2*0.000488281" in desc


def test_a_rule_1000x_looser_would_let_the_tf32_result_through(monkeypatch):
    """The planted bug 'verification tolerance x1000' (the worst-case bound's order of magnitude): the behavioural
    test above must catch it, i.e. the simulated tf32 result then passes the fp32-level rule."""
    rng = np.random.default_rng(1)
    A = draw(rng, (16, 2048), "normal").astype(np.float32)
    B = draw(rng, (2048, 16), "normal").astype(np.float32)
    etf = rel_err(fp32_sequential(tf32_round(A), tf32_round(B)), A, B)
    assert etf > tol.tolerance("fp32", 2048)
    monkeypatch.setattr(tol, "C_SQRT", tol.C_SQRT * 1000)
    monkeypatch.setattr(tol, "C_CONST", tol.C_CONST * 1000)
    assert etf <= tol.tolerance("fp32", 2048)  # so test_fp32_result_passes_and_tf32_result_fails... would fail
