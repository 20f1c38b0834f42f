"""The decoupled baseline's NumPy model (``model.flash_forward(level="decoupled")``): ABFT GEMM, DMR softmax, ABFT
GEMM over a materialized L x L score matrix, the three kernels of ``attention_decoupled.cuh``."""

from __future__ import annotations

import math

import numpy as np

from ...tolerance import C_CONST, C_SQRT
from .model import LOG2E, U32, U_ACC, Counters, Fault, _Faults, _locate, causal_mask, round_to


def decoupled_forward(q, k, v, *, precision="fp16", causal=False, faults=(), correct=True, scale=None):
    """Three kernels over a materialized L x L score matrix: S = Q K^T with classic row checksums (K's row
    sum and weighted row sum; locate, correct), the softmax twice (a mismatch: a third time), O = P V with
    classic row checksums of V. Fault sites: qk (S), rowmax, exp, p16, rowsum, inv_l (the first softmax
    copy), o (O); ``tile`` is ignored."""
    q, k, v = (round_to(a, precision) for a in (q, k, v))
    lq, d = q.shape
    lk = k.shape[0]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    sl2 = np.float32(scale * LOG2E)
    cnt = Counters()
    fx = _Faults([Fault(f.site, f.row, 0, f.col, f.kind, f.bit, f.offset) for f in faults], precision, cnt)
    # ---- kernel 1: S with classic checksums
    s = (q @ k.T).astype(np.float32)
    fx.apply(s, "qk", 0, 0, lq, lambda f: (f.row, f.col))
    kc1 = k.astype(np.float64).sum(axis=0)
    kc2 = (k.astype(np.float64) * np.arange(1, lk + 1)[:, None]).sum(axis=0)
    r1 = (q.astype(np.float64) @ kc1) - s.sum(axis=1, dtype=np.float64)
    r2 = (q.astype(np.float64) @ kc2) - (s.astype(np.float64) * np.arange(1, lk + 1)).sum(axis=1)
    bnd = np.abs(q.astype(np.float64)) @ np.abs(k.astype(np.float64)).T
    tau = bnd.sum(axis=1) * (2 * U_ACC * (C_SQRT * math.sqrt(d) + C_CONST) + lk * U32)
    cnt.score(r1, tau)
    for i in np.nonzero(~(np.abs(r1) <= tau))[0]:
        pos = _locate(float(r1[i]), float(r2[i]), float(tau[i]) * (lk + 1), lk)
        if not correct:
            cnt.hit("qk", "none")
        elif pos >= 0:
            s[i, pos] = np.float32(q[i].astype(np.float64) @ kc1 - np.delete(s[i], pos).sum(dtype=np.float64))
            cnt.hit("qk", "corrected")
        else:
            s[i] = (q[i] @ k.T).astype(np.float32)
            cnt.hit("qk", "recomputed")
    # ---- kernel 2: softmax, twice
    def softmax(faulty: bool):
        f = fx if faulty else _Faults((), precision, Counters())
        ss = np.where(causal_mask(lq, lk), s, -np.inf) if causal else s.copy()
        mx = ss.max(axis=1).astype(np.float32)
        f.apply(mx, "rowmax", 0, 0, lq, lambda t: t.row)
        with np.errstate(over="ignore", invalid="ignore"):
            p = np.exp2((ss * sl2 - mx[:, None] * sl2)).astype(np.float32)
        f.apply(p, "exp", 0, 0, lq, lambda t: (t.row, t.col))
        ls = p.sum(axis=1, dtype=np.float32)
        f.apply(ls, "rowsum", 0, 0, lq, lambda t: t.row)
        inv = (np.float32(1.0) / ls).astype(np.float32)
        f.apply(inv, "inv_l", 0, 0, lq, lambda t: t.row)
        pn = round_to(p * inv[:, None], precision)
        f.apply(pn, "p16", 0, 0, lq, lambda t: (t.row, t.col))
        return pn
    p1 = softmax(True)
    p2 = softmax(False)
    bad_rows = np.nonzero(~np.all((p1 == p2) | (np.isnan(p1) & np.isnan(p2)), axis=1))[0]
    for i in bad_rows:
        if correct:
            p1[i] = p2[i]  # the third copy agrees with the second
            cnt.hit("softmax", "recomputed")
        else:
            cnt.hit("softmax", "none")
    # ---- kernel 3: O with classic checksums
    o = (p1 @ v).astype(np.float32)
    fx.apply(o, "o", 0, 0, lq, lambda f: (f.row, f.col))
    vc1 = v.astype(np.float64).sum(axis=1)
    vc2 = (v.astype(np.float64) * np.arange(1, d + 1)[None, :]).sum(axis=1)
    r1 = p1.astype(np.float64) @ vc1 - o.sum(axis=1, dtype=np.float64)
    r2 = p1.astype(np.float64) @ vc2 - (o.astype(np.float64) * np.arange(1, d + 1)).sum(axis=1)
    mag = p1.astype(np.float64) @ np.abs(v.astype(np.float64)).sum(axis=1)
    tau = mag * (2 * U_ACC * (C_SQRT * math.sqrt(lk) + C_CONST) + d * U32)
    cnt.score(r1, tau)
    for i in np.nonzero(~(np.abs(r1) <= tau))[0]:
        pos = _locate(float(r1[i]), float(r2[i]), float(tau[i]) * (d + 1), d)
        if not correct:
            cnt.hit("o", "none")
        elif pos >= 0:
            o[i, pos] = np.float32(p1[i].astype(np.float64) @ vc1 - np.delete(o[i], pos).sum(dtype=np.float64))
            cnt.hit("o", "corrected")
        else:
            o[i] = (p1[i] @ v).astype(np.float32)
            cnt.hit("o", "recomputed")
    return o, cnt


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------
