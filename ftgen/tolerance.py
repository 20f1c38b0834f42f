"""One significance / verification tolerance rule for every precision: a probabilistic rounding bound for
the precision a kernel actually delivers.

The rule (quoted in the README)::

    tol(precision, k) = u_d * (C_SQRT * sqrt(k) + C_CONST) + 2 * u_in + u_in**2 + u_out

on the error metric of the bench executables, max_ij |C - C_ref|_ij / s_ij with
s = |alpha| |A| |B| + |beta| |C_0| (element-wise magnitudes), where

* ``u_d`` is the unit roundoff of the precision the accumulation delivers: fp64 2^-53; fp32, tf32x3 (three
  TF32 products per term: fp32-level products, fp32 sums), single-pass tf32 and fp16 / bf16 inputs (exact
  products of the rounded operands, fp32 sums) 2^-24. What tf32, fp16 and bf16 lose is their input rounding,
  ``u_in`` below: against a reference of the unrounded data a tf32 result is held to tf32's level
  (fp32-level sums + 2 u_in + u_in^2, u_in = 2^-11), never to fp32's, and against a reference of the operands as
  the kernel rounds them (the bench executables' case) to fp32-level sums;
* ``k`` is the accumulation depth (the dot-product length);
* ``C_SQRT * sqrt(k)``: the rounding errors of a k-term sum are modelled as independent and of mean zero
  (Higham & Mary, *A new approach to probabilistic rounding error analysis*, 2019). One rounding of a
  partial sum s_j errs by at most u |s_j| <= u (j / k) s for same-sign terms, uniformly: a standard deviation
  of at most u s sqrt(sum_j j^2 / k^2 / 3) = u s sqrt(k) / 3 per computation, sqrt(2) u s sqrt(k) / 3 for
  the difference of kernel and reference. C_SQRT = LAMBDA * sqrt(2) / 3 with LAMBDA = 7 standard deviations:
  a Gaussian tail of 2.6e-12 per element, i.e. about one clean element over the bound in 4e11 element
  checks (1000 trials of a 4096 x 4096 output: 1.7e10);
* ``C_CONST``: a few roundoffs that do not grow with k (the epilogue alpha * acc + beta * c of kernel and
  reference, the magnitudes s themselves computed in floating point);
* ``u_in``: input rounding where the operands are rounded before the products and the reference takes the
  unrounded data (one rounding of each operand per product: 2 u_in + u_in^2 relative to |a| |b|); zero
  where the reference takes the same rounded operands (the bench executables' case for tf32, fp16, bf16);
* ``u_out``: one rounding of the output into a narrower type (fp16 2^-11, bf16 2^-8 output; else 0).

The same tolerance decides a verification row's pass/fail and, in fault campaigns, which faults are
*significant* (the output of the same fault with correction switched off is beyond it). For a campaign's rows
(:func:`for_row`) the rule is the one of the precision delivered to the caller's data: tf32 with its input rounding
(a fault whose error stays under what tf32's rounding of fp32 inputs leaves anyway does not change what a tf32 result
is worth), the others as above (their benches' inputs are the rounded data the caller gives, or fp32-level products).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LAMBDA = 7.0  # standard deviations of the rounding-error model (see the module docstring)
C_SQRT = LAMBDA * math.sqrt(2.0) / 3.0  # ~3.30
C_CONST = 16.0

# unit roundoff of the delivered accumulation, of input rounding (against unrounded operands), of the output
_DELIVERED = {
    "fp64": 2.0**-53,
    "fp32": 2.0**-24,
    "tf32x3": 2.0**-24,
    "tf32": 2.0**-24,
    "fp16": 2.0**-24,
    "bf16": 2.0**-24,
}
_INPUT = {"fp64": 0.0, "fp32": 0.0, "tf32x3": 0.0, "tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}
_OUTPUT = {"fp64": 0.0, "fp32": 0.0, "tf32x3": 0.0, "tf32": 0.0, "fp16": 2.0**-11, "bf16": 2.0**-8}

PRECISIONS = tuple(_DELIVERED)
RULE = "u_d*(C_SQRT*sqrt(k)+C_CONST)+2*u_in+u_in^2+u_out"


@dataclass(frozen=True)
class Rule:
    """The rule's terms for one precision (see the module docstring)."""

    precision: str
    u: float       # u_d: unit roundoff of the delivered accumulation
    u_in: float    # input rounding counted (0 where the reference takes the rounded operands)
    u_out: float   # output rounding (a 16-bit C)

    def tolerance(self, k: int) -> float:
        k = max(int(k), 1)
        return self.u * (C_SQRT * math.sqrt(k) + C_CONST) + 2.0 * self.u_in + self.u_in * self.u_in + self.u_out

    def describe(self) -> str:
        """The rule as a line a summary carries: the formula with this precision's numbers."""
        return (f"{self.precision}: {self.u:.6g}*({C_SQRT:.4g}*sqrt(k)+{C_CONST:g})"
                + (f"+2*{self.u_in:.6g}+{self.u_in:.6g}^2" if self.u_in else "")
                + (f"+{self.u_out:.6g}" if self.u_out else ""))


def rule(precision: str, *, rounded_reference: bool = True, narrow_output: bool | None = None) -> Rule:
    """The rule for `precision` (fp64 fp32 tf32x3 tf32 fp16 bf16).

    rounded_reference: the reference product takes the operands as the kernel rounds them (no input-rounding
    term); False where it takes the unrounded data (tf32 against an fp32 reference of the fp32 data: tf32 is
    then also bounded by its input rounding). narrow_output: C is stored in the 16-bit input type (default:
    fp16 / bf16 do, the others do not).
    """
    if precision not in _DELIVERED:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
    narrow = precision in ("fp16", "bf16") if narrow_output is None else narrow_output
    return Rule(
        precision=precision,
        u=_DELIVERED[precision],
        u_in=0.0 if rounded_reference else _INPUT[precision],
        u_out=_OUTPUT[precision] if narrow else 0.0,
    )


def tolerance(precision: str, k: int, **kw) -> float:
    """tol(precision, k) of the rule (see the module docstring); keyword arguments as :func:`rule`."""
    return rule(precision, **kw).tolerance(k)


def context(precision: str, **kw) -> dict:
    """The rule's constants for a bench template: tol(k) = tol_u * (tol_c1 * sqrt(k) + tol_c0) + tol_io."""
    r = rule(precision, **kw)
    return {
        "tol_u": repr(r.u),
        "tol_c1": repr(C_SQRT),
        "tol_c0": repr(C_CONST),
        "tol_io": repr(2.0 * r.u_in + r.u_in * r.u_in + r.u_out),
    }


def depth_of(row: dict) -> int | None:
    """The accumulation depth of a result row where the rule applies (gemm: the shape's k), else None."""
    shape = row.get("shape") or {}
    k = shape.get("k")
    return int(k) if isinstance(k, (int, float)) and k >= 1 else None


def for_row(row: dict) -> tuple[str, float] | None:
    """(rule description, tolerance) of the delivered precision for a result row of a precision and depth the rule
    covers, else None: the campaigns' significance (tf32: against the unrounded data, its input rounding counted)."""
    prec, k = row.get("precision"), depth_of(row)
    if prec not in _DELIVERED or k is None:
        return None
    r = rule(prec, rounded_reference=prec != "tf32")
    return r.describe(), r.tolerance(k)
