"""NumPy models of gemm's ABFT: the SIMT kernels' rules (which the cutlass backend's tensor-core
threadblock ABFT shares) and the cutlass backend's reference pre-pass. The CUDA kernels implement
exactly these rules; the tests prove them here on injected faults, and the GPU campaigns check the
kernels against the same expectations.

  encode   per k row and checksum strip of `cols` columns: B e, B w (w = 1..cols), B^2 e
  carry    r_i += a_ik (B e)_k, r'_i += a_ik (B w)_k, r2_i += a_ik^2 (B^2 e)_k with the GEMM
  verify   d = sum_j C_ij - r_i, dw = sum_j w_j C_ij - r'_i against thresholds
           tau = LAMBDA u (sqrt(k) + sqrt(cols) + 1) max(sqrt(r2_i), |r_i|, ||C_i||_2 w/o its max)
           tau_w = max(tau * rms(w), LAMBDA u (...) |r'_i|)
  locate   only with certainty: |d| > 2 tau_w, j = rint(dw / d) in 1..cols, |dw - j d| <= tau_w
  correct  C_ij = r_i - sum_{l != j} C_il; any other detection: recompute the tile (ref_checksums:
           prepass verifying once, no split-K: the detected rows, by a kernel after the GEMM)

ref_checksums: prepass (threadblock level) computes r, r', r2 in pre-pass kernels instead of carrying
them with the GEMM: per split-K slice, verification segment (INTERVAL k-tiles) and sub-slice of at most
REF_SUB_K elements of k a product in the variant's precision, then cumulative sums over the slice's
segments in double (abft_prepass_reference); the verification compares against those.

ref_checksums: concurrent (CUTLASS tf32x3, one verification per tile) checks every row per strip of whole warp
columns (32, 64 or 128), each with its own r, r' and threshold, at its own lambda (abft_concurrent_check); a fault is located
within its strip and a row that cannot be located is recomputed over that strip (recompute='row').
"""

from __future__ import annotations

import math

import numpy as _np

from ...tolerance import tolerance as _tolerance
from ..base import UNIT_ROUNDOFF

# Detection threshold = lambda * u * (sqrt(k) + sqrt(cols) + 1) * scale (README, "Detection threshold").
# lambda sets the false-alarm margin over the rounding noise measured in clean GPU fault campaigns (3000
# clean trials per kernel, normal / uniform / log-uniform inputs, 512x512x1024). Largest clean score
# (residual / threshold) at lambda 4: 0.32 / 0.30 (fp32, strips of 128 columns) and 0.39 (fp64, 64
# columns), so lambda 2 leaves a margin of 1.3-1.7x while catching the significant log-uniform faults
# that lambda 4 let through. The thread level's scale (a tile norm over 8 columns) is noisier: 0.50 at
# lambda 8, so lambda 6 (margin 1.5x). The warp level (strips of 32-64 columns) raised false alarms at
# lambda 2 for k >= 2048 and none at 4, so it keeps 4.
ABFT_LAMBDA = 2.0
ABFT_LAMBDA_WARP = 4.0
ABFT_LAMBDA_THREAD = 6.0

# ref_checksums: concurrent (the CUTLASS backend's tf32x3 threadblock ABFT with one verification per tile): each row is
# checked per strip of `cols` columns (whole warp columns) with its own encodings B e, B w (w = 1..cols) and reference
# rows, at lambda abft_strip_lambda(cols) on the unit roundoff of fp32 sums (2^-24, ABFT_STRIP_UNIT_PRECISION). In the
# model's terms: abft_gemm_model(..., **abft_concurrent_check(cols)). docs/gemm-abft.md ("Detection at the fp32-level rule")
# derives the strip and lambda: on 32-column strips the largest clean score of the fp32 emulation is 0.61-0.64 at
# lambda 1.5 (margin 1.6x; the GPU's residuals are about 0.7x the emulation's) and 99.95% of the faults that are
# significant under ftgen.tolerance's fp32-level rule are detected, against 96% for 128-column strips at the other
# checks' threshold.
ABFT_STRIP_LAMBDA = 1.5
ABFT_STRIP_UNIT_PRECISION = "fp32"
# Strips of 64 columns (the cutlass90 check's abft_cols: 64, or sm80 warp tiles 64 columns wide) take lambda 1.0: the
# host-compiled rules (experiments/scripts/abft_strip_width.py) detect 99.58% of the significant faults at 1.5 and
# 99.97% at 1.0, where the emulation's largest clean pass-1 score is 0.92 (about 0.64 on a GPU, whose residuals are about
# 0.7x the emulation's). Strips of 128 columns (abft_cols: 128 on the sm80 backend: one strip per 128-column tile, 2
# reference columns per 128 instead of 8) take lambda 0.6: over 16626 significant single bit flips of the three
# distributions the host-compiled rules detect 99.98% (0.75: 99.92%, 1.0: 99.78%), the full rule's largest clean score is
# 0.81, and pass 1 leaves 0.8% of the clean units to the rare path in the emulation (its largest clean score 1.86;
# experiments/scripts/abft_strip_width.py 20 0.6 128). Other widths keep ABFT_STRIP_LAMBDA.
ABFT_STRIP_LAMBDAS = {32: ABFT_STRIP_LAMBDA, 64: 1.0, 128: 0.6}


# The suspect band of the cutlass90 tf32x3 check (32-column strips at lambda 1.5): a unit whose full-rule score lies in
# (ABFT_SUSPECT_BAND, 1] is recomputed from A and B in double beside the magnitudes sum |a| |b| of its elements, and is a
# detection only where an element differs from its recomputation by more than ABFT_ELEMENT_FRACTION of the delivered
# precision's tolerance (ftgen.tolerance) at those magnitudes (then corrected by it). What it is for: a checksum's threshold
# follows the strip's largest elements, while a fault's significance follows its own element's magnitude, so with
# log-uniform data a significant fault in a small element can score under the threshold (the misses of the GPU campaigns
# at 1000x1234x777 scored 0.59-0.93). False alarms cannot come from the band: a clean unit's elements stay within their
# own tolerance (its largest clean error is about a sixth of it at 4096^3), and a fraction of 1/2 keeps twice that
# margin while flagging every fault at or over the tolerance. The band's floor is a cost: pass 1 sends units over it to
# the rare path (the emulation's clean units over 0.5: 0.44% at k = 1024 on log-uniform data, about none on normal
# and uniform data).
ABFT_SUSPECT_BAND = 0.5
ABFT_ELEMENT_FRACTION = 0.5
# With the band, lambda no longer trades coverage for margin alone: the checksum needs to see only what scores over the
# band's floor. The banded check's lambda per strip width (the host-compiled rules, tests/test_abft_strips.py's
# emulation, 12 blocks of 128 x 1024 x 128 and 450 single flips each per distribution): 32 columns 1.5 (as without the
# band); 64 columns 1.5 (every significant flip detected, 22 of 3558 log-uniform ones by the band; the full rule's largest
# clean score 0.16-0.23 where lambda 1.0 without the band had pass 1 at 0.92); 128 columns 1.0 (every one detected, 24
# by the band; largest clean score 0.32-0.40; at 1.25 one log-uniform flip of 3558 escapes, at 1.5 eight). Pass 1's
# clean units over a floor of 0.5: 0.2-0.3% (64 at 1.5), 1.3-1.8% (128 at 1.0) at k = 1024, none at 4096; the wider strips
# take a lower floor (abft_band_floor, below). On a second sample (tests/test_abft_strips.py, 24 blocks, 7095 significant
# log-uniform flips) with those floors 32 and 128 columns detect all, 64 all but one.
ABFT_BAND_STRIP_LAMBDAS = {32: 1.5, 64: 1.5, 128: 1.0}


def abft_element_tol(precision: str, k: int) -> float:
    """The suspect band's element tolerance: ABFT_ELEMENT_FRACTION of ftgen.tolerance's rule at depth k."""
    return ABFT_ELEMENT_FRACTION * _tolerance(precision, k)


def abft_band_verdict(verdict: int, score: float, band: float = ABFT_SUSPECT_BAND) -> int:
    """The rare path's verdict with the band: -4 (suspect) for a clean unit (-1) scoring over the band."""
    return -4 if verdict == -1 and band > 0 and score > band else verdict


def abft_suspect_recheck(c_row, a_row, b_strip, elem_tol: float):
    """A suspect unit recomputed: (whether an element differs from its recomputation beyond elem_tol |a| |b|, the
    recomputed row). c_row: the unit's computed elements; a_row: A's row; b_strip: B's columns of the strip."""
    a = _np.asarray(a_row, _np.longdouble)  # (beyond double: fp64 rows are rechecked by compensated dot products)
    b = _np.asarray(b_strip, _np.longdouble)
    exact, mag = a @ b, _np.abs(a) @ _np.abs(b)
    c = _np.asarray(c_row, _np.longdouble)
    differs = ~(_np.abs(c - exact) <= elem_tol * mag)
    return bool(differs.any()), exact


# The band's floor per strip width: ABFT_SUSPECT_BAND on 32 columns; wider strips scaled so that the floor stands for the
# same residual as the 32-column check's for a strip of equal elements at k = ABFT_BAND_REF_K (the threshold grows with
# lambda, sqrt(k) + sqrt(cols) + 1, and the strip's norm, sqrt(cols)): 64 columns 0.333, 128 columns 0.327. A wider
# strip's checksum is noisier beside one small element, so the same fault scores lower there: at a floor of 0.5 the
# 64- and 128-column checks missed log-uniform faults scoring 0.48-0.50 on an H100 (docs/gemm-hopper.md, "Strip width").
ABFT_BAND_REF_K = 1024


def abft_band_floor(cols: int) -> float:
    """The suspect band's floor (a fraction of the threshold) of the banded check on strips of ``cols`` columns."""
    def thr(c: int) -> float:
        return abft_band_strip_lambda(c) * (math.sqrt(ABFT_BAND_REF_K) + math.sqrt(c) + 1.0) * math.sqrt(c)

    return ABFT_SUSPECT_BAND * thr(32) / thr(int(cols))


def abft_band_strip_lambda(cols: int) -> float:
    """lambda (on 2^-24) of the banded check (the cutlass90 tf32x3 threadblock ABFT) on strips of ``cols`` columns."""
    return ABFT_BAND_STRIP_LAMBDAS[int(cols)]


def abft_strip_lambda(cols: int) -> float:
    """lambda (on 2^-24) of ref_checksums: concurrent's check on strips of ``cols`` columns."""
    return ABFT_STRIP_LAMBDAS.get(int(cols), ABFT_STRIP_LAMBDA)


# fp64 (the CUTLASS backend's DMMA kernels, checked after the GEMM in double): strips of ABFT64_STRIP_COLS columns of C
# at lambda ABFT64_LAMBDA on fp64's unit roundoff; a located element recomputed from A and B (fix='dot'). The GPU's
# rounding noise is about 4x this model's (the kernels sum each element serially along k; NumPy's matmul blocks): at
# lambda 1.0 the largest clean score on an H200 was 1.26 at 512x512x1024 and 1.69 at 8192^3 (94 false alarms in 3000
# clean trials), so lambda 2.5 (a 1.5x margin at 8192^3). docs/gemm-hopper.md has the measurements and the model's
# coverage per strip width and lambda (experiments/scripts/abft_fp64_strips.py). 2 reference columns per 128 columns of
# C keep the reference GEMM at 1/64 of the GEMM's products.
ABFT64_STRIP_COLS = 128
ABFT64_LAMBDA = 2.5
# The fp64 check's suspect band (abft_gemm_model's band): a unit the checksum passes with a score over the floor is
# recomputed by compensated dot products and compared element by element at ABFT_ELEMENT_FRACTION of the rule. Without it
# the misses are small elements beside large ones on log-uniform data (the GPU campaigns: 99.22% / 99.75% / 99.84% of the
# significant faults for 128 / 64 / 32 columns, every miss 1.0-6x its tolerance, scoring 0.355-0.997). The floors sit
# under the lowest score of a miss on the model (experiments/scripts/abft_fp64_strips.py 3000 2.5 with BANDS=0, 7282
# significant faults per width: 0.303 / 0.24 / 0.439 for 128 / 64 / 32 columns) and on the GPU (0.355 / 0.41 / 0.50);
# with them the model detects and corrects every significant fault. A clean unit over the floor costs its row's
# recomputation, no alarm. On the GPU the check's clean scores sit far higher than the model's (its sums are serial
# along k): at a floor of 0.2 an H100 rechecked 13% of the units at 4096^3 and 22% at 8192^3, 0.19x / 0.10x cuBLAS DGEMM
# against 0.90x / 0.92x without the band, while every significant fault of the campaigns was corrected
# (docs/gemm-hopper.md). With row-major A the kernels recheck a suspect bit for bit first (abft64_recheck_kernel: the
# variant's own DMMA mainloop on A's gathered rows, the same products in the same order, so a clean unit comes back
# identical and only a unit that differs is recomputed as above): a clean suspect then costs a share of a small GEMM.
# There the 128-column check is built with a floor of 0.3 (ABFT64_BAND_BUILT; on an H100 its campaigns corrected
# 2432/2432 and 2441/2443 significant faults, 0 false alarms, at 0.84-0.89x DGEMM with 16 faults a launch against
# 0.89-0.93x without the band); other widths and column-major A are built without it. FTGEN_ABFT_BAND sets a floor.
ABFT64_BAND_FLOORS = {32: 0.3, 64: 0.2, 128: 0.2}
ABFT64_BAND_BUILT = {128: 0.3}


# bf16 / fp16 (the cutlass90 backend's sm90 kernels, 16-bit output, fp32 accumulation): the check reads the fp32
# accumulators before the epilogue rounds them (sums per row and CTA tile of columns in the epilogue), against
# references R = A E of B's encodings split into 16-bit high and low parts. The wgmma's fp32 accumulation is not round
# to nearest (its error grows with the number of wgmma steps, k / kw, not sqrt(k)), so the unit is
# lambda 2^-24 (k / kw + cols + 1) on the scale max(sum_j |c_j|, |alpha r|) (abft16_unit, abft16_verdict). lambda leaves
# a 4x margin over the rounding noise measured on an H200: the largest clean score of every verified row (4096^3, 8192^3
# and the odd shapes, bf16 and fp16, strips of 128 and 256) was 0.060 at lambda 2, so 0.24 at 0.5.
# docs/gemm-hopper.md ("bf16 / fp16 ABFT") has the derivation and the measurements.
ABFT16_LAMBDA = 0.5
ABFT16_U = 2.0**-24  # the unit roundoff of the fp32 accumulators and sums
ABFT16_LO_SHIFT = {"bf16": 8, "fp16": 11, "tf32": 11}  # the low part's scale: the operand type's significand bits


def abft_rms_w(cols: int) -> float:
    """The root mean square of the weights 1..cols (the weighted checksum's threshold factor)."""
    return math.sqrt((cols + 1.0) * (2.0 * cols + 1.0) / 6.0)


def abft16_scales(cols: int) -> tuple[int, int]:
    """log2 of the power-of-two scales of B e and B w before their 16-bit split: a strip's sums stay within the largest
    |b| (fp16's range), 2^-ceil(log2 cols) and 2^-ceil(log2 (cols (cols + 1) / 2))."""
    return -math.ceil(math.log2(cols)), -math.ceil(math.log2(cols * (cols + 1) / 2))


def abft16_unit(k: int, kw: int, cols: int, lam: float = ABFT16_LAMBDA) -> float:
    """The 16-bit check's threshold unit: lambda u (wgmma steps + cols + 1)."""
    return lam * ABFT16_U * (math.ceil(k / kw) + cols + 1.0)


def abft16_verdict(P1: float, PW: float, PA: float, ar: float, arw: float, unit: float, cols: int,
                   fixed: float = 0.0) -> tuple[int, float]:
    """(verdict, score) of one (row, strip) unit (ftgen_rules::abft16_unit_verdict): -1 clean, the located column
    (0-based) or -2 detected and not located; the score is the largest residual / threshold."""
    tau = fixed if fixed > 0 else unit * max(PA, abs(ar))
    tau_w = fixed * abft_rms_w(cols) if fixed > 0 else abft_weighted_threshold(tau, arw, unit, cols)
    d, dw = P1 - ar, PW - arw
    if not (_np.isfinite(d) and _np.isfinite(dw)):
        return -2, float("inf")
    score = max(abs(d) / tau if tau > 0 else (_np.inf if d != 0 else 0.0),
                abs(dw) / tau_w if tau_w > 0 else (_np.inf if dw != 0 else 0.0))
    kind, col = abft_classify(d, dw, tau, tau_w, cols)
    return {0: -1, 1: col}.get(kind, -2), float(score)


def to16(x, precision: str):
    """float values rounded to bf16 / fp16 (to nearest even) or TF32 (to nearest, ties away: cvt.rna.tf32.f32, as the
    TF32 wgmma reads fp32 words), returned as float32."""
    x = _np.asarray(x, dtype=_np.float32)
    if precision == "tf32":
        u = x.view(_np.uint32).astype(_np.uint64)
        return ((u + 0x1000) & 0xFFFFE000).astype(_np.uint32).view(_np.float32)
    if precision == "fp16":
        with _np.errstate(over="ignore"):
            return x.astype(_np.float16).astype(_np.float32)
    b = x.view(_np.uint32).astype(_np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(_np.uint32).view(_np.float32)


def out_type(x, precision: str):
    """float values as the check's GEMM writes its output: rounded to bf16 / fp16, unchanged for tf32 (fp32 C)."""
    return _np.asarray(x, dtype=_np.float32) if precision == "tf32" else to16(x, precision)


def abft16_encode(B, cols: int, precision: str, sums=_np.float32):
    """E (rows 4 per strip, k columns: hi and lo of se B e, hi and lo of sw B w) as the encode kernel writes it, the
    sums in `sums` (fp32: the gemm kernel's; fp64: the kmeans cutlass90 kernel's), each rounded to fp32 once."""
    k = B.shape[0]
    be, bw, _ = abft_encode(_np.asarray(B, dtype=sums), cols)
    strips = be.shape[1]
    se, sw = (2.0**x for x in abft16_scales(cols))
    lo = 2.0 ** ABFT16_LO_SHIFT[precision]
    E = _np.zeros((4 * strips, k), dtype=_np.float32)
    for x, scale, row in ((be, se, 0), (bw, sw, 2)):
        xs = (x * scale).astype(_np.float32)
        hi = to16(xs, precision)
        E[row::4] = hi.T
        E[row + 1::4] = to16((xs - hi) * _np.float32(lo), precision).T
    return E


def abft16_refs(A, E, cols: int, precision: str):
    """(r, r') per row and strip from R = A E (fp32 products of the 16-bit values, summed in double here)."""
    R = A.astype(_np.float64) @ E.T.astype(_np.float64)
    se, sw = (2.0**x for x in abft16_scales(cols))
    lo = 2.0 ** -ABFT16_LO_SHIFT[precision]
    return (R[:, 0::4] + R[:, 1::4] * lo) / se, (R[:, 2::4] + R[:, 3::4] * lo) / sw


def wgmma_acc(A64, B64, kw: int):
    """The wgmma's fp32 accumulators of A B (operands as it reads them, exactly in double): exact products summed in fp32,
    kw k-columns (one wgmma) at a time."""
    acc = _np.zeros((A64.shape[0], B64.shape[1]), dtype=_np.float32)
    for k0 in range(0, A64.shape[1], kw):
        acc = (acc + (A64[:, k0:k0 + kw] @ B64[k0:k0 + kw]).astype(_np.float32)).astype(_np.float32)
    return acc


def abft16_problem(A, B, cols: int, precision: str, kw: int):
    """The accumulator check's ingredients for operands A, B as the wgmma reads them: (A B and |A||B| in double, the
    wgmma's fp32 accumulators, the references r and r' per row and strip, the threshold unit)."""
    A64, B64 = A.astype(_np.float64), B.astype(_np.float64)
    r, rw = abft16_refs(A, abft16_encode(B, cols, precision), cols, precision)
    return A64 @ B64, _np.abs(A64) @ _np.abs(B64), wgmma_acc(A64, B64, kw), r, rw, abft16_unit(A.shape[1], kw, cols)


def flip32(x, bit: int):
    """The fp32 value x with bit `bit` of its 32-bit word flipped (the accumulator faults of the models)."""
    return _np.array([x], _np.float32).view(_np.uint32).__xor__(_np.uint32(1 << int(bit))).view(_np.float32)[0]


def strip_sums(c, j0: int, j1: int):
    """The epilogue's fp32 partials of columns j0..j1 per row: sum c, sum (j + 1) c (j: the column in the strip), sum |c|."""
    w = _np.arange(1, j1 - j0 + 1, dtype=_np.float32)
    with _np.errstate(over="ignore", invalid="ignore"):
        return (c[:, j0:j1].sum(axis=1, dtype=_np.float32), (w * c[:, j0:j1]).sum(axis=1, dtype=_np.float32),
                _np.abs(c[:, j0:j1]).sum(axis=1, dtype=_np.float32))


def abft16_check(A, B, *, cols: int, precision: str, alpha: float = 1.0, kw: int = 16, lam: float = ABFT16_LAMBDA,
                 faults=(), online: bool = True, correct: bool = True, locate: bool = True):
    """The 16-bit check end to end on 16-bit operands A (m x k), B (k x n) (precision tf32: fp32 values rounded to TF32,
    kw 8, an fp32 output): the GEMM's fp32 accumulators (exact products summed in fp32, kw at a time), faults applied to them as the epilogue's leaf applies them (each a (row, col, kind,
    value): 'bit' flips that bit of the fp32 value, 'offset' adds it), the epilogue's sums per strip in fp32, the
    references, the verdicts and the corrections. Returns (D as float32 after the output's rounding and the corrections,
    verdicts {(row, strip): verdict}, largest clean-unit score, counters). online False: a detection recomputes the unit's
    row (correct: detect); correct False: nothing is corrected (the campaigns' uncorrected run); locate False
    (abft_locate: recompute): no weighted sums, the verdict on the unweighted residual alone (its weighted residual and
    reference zero), every detection recomputes the unit's row."""
    m, k = A.shape
    n = B.shape[1]
    A64, B64 = A.astype(_np.float64), B.astype(_np.float64)
    acc = wgmma_acc(A64, B64, kw)
    for row, col, kind, value in faults:
        if kind == "bit":
            acc[row, col] = flip32(acc[row, col], value)
        else:
            acc[row, col] = _np.float32(acc[row, col] + _np.float32(value))
    with _np.errstate(over="ignore", invalid="ignore"):
        c = (_np.float32(alpha) * acc).astype(_np.float32)
        D = out_type(c, precision)
    r, rw = abft16_refs(A, abft16_encode(B, cols, precision), cols, precision)
    unit = abft16_unit(k, kw, cols, lam)
    strips = -(-n // cols)
    verdicts, clean, counters = {}, 0.0, {"detected": 0, "corrected": 0, "recomputed": 0, "uncorrectable": 0}
    exact = A64 @ B64
    for s in range(strips):
        j0, j1 = s * cols, min(n, (s + 1) * cols)
        P1, PW, PA = strip_sums(c, j0, j1)
        for i in range(m):
            pw, arw = (float(PW[i]), alpha * rw[i, s]) if locate else (0.0, 0.0)
            v, score = abft16_verdict(float(P1[i]), pw, float(PA[i]), alpha * r[i, s], arw, unit, j1 - j0)
            if v == -1:
                clean = max(clean, score)
                continue
            verdicts[(i, s)] = v
            counters["detected"] += 1
            if not correct:
                continue
            if v >= 0 and online:
                D[i, j0 + v] = out_type(_np.float32(alpha * exact[i, j0 + v]), precision)
                counters["corrected"] += 1
            else:
                counters["uncorrectable"] += 1
                D[i, j0:j1] = out_type((alpha * exact[i, j0:j1]).astype(_np.float32), precision)
                counters["recomputed"] += 1
                counters["corrected"] += 1
    return D, verdicts, clean, counters


def abft_fp64_check() -> dict:
    """The model arguments (abft_gemm_model, abft_verify_rows) of the fp64 check: its strips, lambda and unit roundoff."""
    return {"cols": ABFT64_STRIP_COLS, "lam": ABFT64_LAMBDA, "unit": "fp64", "fix": "dot"}


def abft64_band_floor(cols: int) -> float:
    """The fp64 check's suspect band floor (a fraction of the threshold) on strips of ``cols`` columns."""
    return ABFT64_BAND_FLOORS[int(cols)]


def abft64_band_built(cols: int, row_a: bool) -> float:
    """The floor the fp64 check is built with on strips of ``cols`` columns (0: no band): ABFT64_BAND_BUILT's where A
    is row-major (the suspects rechecked bit for bit), none otherwise."""
    return ABFT64_BAND_BUILT.get(int(cols), 0.0) if row_a else 0.0


def abft_fp64_band(cols: int, k: int) -> dict:
    """abft_gemm_model's band arguments of the fp64 check on strips of ``cols`` columns at depth k."""
    return {"band": abft64_band_floor(cols), "elem_tol": abft_element_tol("fp64", k)}


def abft_concurrent_check(warp_n: int) -> dict:
    """The model arguments (abft_gemm_model, abft_verify_rows) of ref_checksums: concurrent's check: strips of warp_n
    columns, its lambda, the precision whose unit roundoff its threshold takes."""
    return {"cols": int(warp_n), "lam": abft_strip_lambda(warp_n), "unit": ABFT_STRIP_UNIT_PRECISION}


def abft_threshold_unit(precision: str, k_done: int, cols: int, lam: float = ABFT_LAMBDA) -> float:
    return lam * UNIT_ROUNDOFF[precision] * (math.sqrt(k_done) + math.sqrt(cols) + 1.0)


def abft_encode(B, cols: int):
    """B (k x n) -> (be, bw, b2), each (k, strips): the encodings of every checksum strip."""
    k, n = B.shape
    strips = -(-n // cols)
    pad = _np.zeros((k, strips * cols), dtype=B.dtype)
    pad[:, :n] = B
    blocks = pad.reshape(k, strips, cols)
    w = _np.arange(1, cols + 1, dtype=B.dtype)
    return blocks.sum(axis=2), (blocks * w).sum(axis=2), (blocks * blocks).sum(axis=2)


def abft_row_threshold(C_row, r, rw, r2, k_done: int, precision: str, lam: float = ABFT_LAMBDA) -> float:
    """tau of one row of a checksum strip (see abft_verify_rows)."""
    c = _np.asarray(C_row, dtype=_np.float64)
    sq = _np.minimum(_np.abs(c), 1e17 if precision != "fp64" else 1e150) ** 2
    robust = math.sqrt(max(sq.sum() - sq.max(), 0.0))
    scale = max(math.sqrt(max(float(r2), 0.0)), abs(float(r)), robust)
    return abft_threshold_unit(precision, k_done, c.size, lam) * scale


def abft_weighted_threshold(tau: float, rw, unit: float, cols: int) -> float:
    """tau_w of a row: the weighted checksum's threshold from tau, the row's r' and the threshold unit."""
    return max(tau * abft_rms_w(cols), unit * abs(float(rw)))


def abft_classify(d: float, dw: float, tau: float, tau_w: float, cols: int) -> tuple[int, int]:
    """(kind, col): 0 clean, 1 fault in C at col (located with certainty), 3 detected, not locatable."""
    s1 = abs(d) / tau if tau > 0 else (_np.inf if d != 0 else 0.0)
    s2 = abs(dw) / tau_w if tau_w > 0 else (_np.inf if dw != 0 else 0.0)
    if not (s1 > 1.0) and not (s2 > 1.0) and _np.isfinite(d) and _np.isfinite(dw):
        return 0, -1
    if _np.isfinite(d) and _np.isfinite(dw) and abs(d) > 2.0 * tau_w:
        jq = float(_np.rint(dw / d))
        if 1.0 <= jq <= cols and abs(dw - jq * d) <= tau_w:
            return 1, int(jq) - 1
    return 3, -1


def located_fix_agrees(replacement: float, dot: float, tau: float) -> bool:
    """ftgen_rules.h located_fix_agrees: a located element's dot product is taken where it agrees with the checksum's
    replacement r_i - rest within twice the row's threshold (a fault located at the wrong column leaves them a fault
    apart)."""
    return bool(abs(replacement - dot) <= 2.0 * tau)


def _located_row_tau(C_row, r, r2, k_done: int, precision: str, lam: float) -> float:
    """The threshold of a row with a located fault, over its finite elements (the kernels leave a non-finite one out)."""
    c = _np.asarray(C_row, dtype=_np.float64)
    return abft_row_threshold(_np.where(_np.isfinite(c), c, 0.0), r, 0.0, r2, k_done, precision, lam)


SUSPECT_KIND = 4  # abft_verify_rows with a band: a clean row scoring over the band's floor (a suspect, to recheck)


def abft_verify_rows(C, r, rw, r2, k_done: int, precision: str, lam: float = ABFT_LAMBDA, band: float = 0.0):
    """Verify the rows of one checksum strip C (rows x cols). Returns [(row, kind, col), ...] for
    every row that is not clean (with band > 0 also the clean rows scoring over it: kind SUSPECT_KIND, col -1), and
    the largest score (residual / threshold)."""
    rows, cols = C.shape
    unit = abft_threshold_unit(precision, k_done, cols, lam)
    w = _np.arange(1, cols + 1, dtype=_np.float64)
    out, best = [], 0.0
    for i in range(rows):
        c = C[i].astype(_np.float64)
        finite = _np.isfinite(c)
        if finite.sum() < cols:
            bad = int(_np.flatnonzero(~finite)[0])
            out.append((i, 1 if (~finite).sum() == 1 else 3, bad if (~finite).sum() == 1 else -1))
            best = _np.inf
            continue
        tau = abft_row_threshold(c, r[i], rw[i], r2[i], k_done, precision, lam)
        tau_w = abft_weighted_threshold(tau, rw[i], unit, cols)
        d = float(c.sum()) - float(r[i])
        dw = float((w * c).sum()) - float(rw[i])
        score = max(abs(d) / tau if tau > 0 else 0.0, abs(dw) / tau_w if tau_w > 0 else 0.0)
        best = max(best, score)
        kind, col = abft_classify(d, dw, tau, tau_w, cols)
        if kind:
            out.append((i, kind, col))
        elif abft_band_verdict(-1, score, band) != -1:
            out.append((i, SUSPECT_KIND, -1))
    return out, best


REF_SUB_K = 512  # templates/gemm/simt_variant.cu.j2: longest k run of one pre-pass product


def abft_prepass_layout(k: int, kt: int, interval: int, split_k: int = 1, sub_k: int = REF_SUB_K):
    """The pre-pass's decomposition of k, as the kernels compute it: per split-K slice z and verification
    segment c, the sub-slices [ka, kb) of k. Returns {(z, c): [(ka, kb), ...]} (nsub pairs per segment;
    the last segments of a slice may be shorter or empty)."""
    ktiles_all = -(-k // kt)
    per_slice = -(-ktiles_all // split_k)
    cps = -(-per_slice // interval)
    nsub = -(-min(interval, per_slice) * kt // sub_k)
    out = {}
    for z in range(split_k):
        t_end = min(ktiles_all, (z + 1) * per_slice)
        for c in range(cps):
            t0 = min(t_end, z * per_slice + c * interval)
            t1 = min(t_end, t0 + interval)
            k0 = min(k, t0 * kt)
            ln = min(k, t1 * kt) - k0
            out[(z, c)] = [(k0 + ln * j // nsub, k0 + ln * (j + 1) // nsub) for j in range(nsub)]
    return out


def abft_prepass_reference(A, be, bw, b2, *, kt: int, interval: int, split_k: int = 1, precision: str = "fp32",
                           sub_k: int = REF_SUB_K):
    """Reference checksums of the pre-pass (ref_kernel + ref_scan): {(z, c): (r, rw, r2)}, each (m, strips),
    the sums over the slice's segments 0..c of the sub-slice products (each in the variant's precision),
    accumulated in double and rounded to it."""
    dt = _np.float64 if precision == "fp64" else _np.float32
    A = _np.asarray(A, dtype=dt)
    layout = abft_prepass_layout(A.shape[1], kt, interval, split_k, sub_k)
    out, run = {}, {}
    for (z, c), subs in sorted(layout.items()):
        acc = run.get(z, [_np.zeros((A.shape[0], be.shape[1]), dtype=_np.float64) for _ in range(3)])
        for ka, kb in subs:
            a = A[:, ka:kb]
            for q, (lhs, enc) in enumerate(((a, be), (a, bw), ((a * a).astype(dt), b2))):
                acc[q] = acc[q] + (lhs @ enc[ka:kb].astype(dt)).astype(dt).astype(_np.float64)
        run[z] = acc
        out[(z, c)] = tuple(x.astype(dt) for x in acc)
    return out


def abft_lambda(level: str) -> float:
    return {"thread": ABFT_LAMBDA_THREAD, "warp": ABFT_LAMBDA_WARP}.get(level, ABFT_LAMBDA)


def abft_gemm_model(A, B, *, cols: int, kt: int, interval: int, precision: str = "fp32", faults=(),
                    online: bool = True, lam: float = ABFT_LAMBDA, no_correct: bool = False, ref: str = "fused",
                    recompute: str = "tile", fault_at: str = "step", unit: str | None = None, fix: str = "checked",
                    band: float = 0.0, elem_tol: float = 0.0):
    """Simulate the protected GEMM C = A @ B tile by tile in the variant's precision.

    cols: columns of one checksum strip (threadblock: n_tb, warp: n_w, thread: n_t; ref_checksums: concurrent: warp_n,
    see abft_concurrent_check); every strip is checked row by row against its own r, r' (weights 1..cols);
    lam, unit: the threshold's lambda and the precision whose unit roundoff it takes (default: precision);
    kt: k per step; interval: steps between verifications (and at the end);
    faults: (step, row, col, kind, value) applied to the accumulator after `step`: kind 'bitflip'
    flips bit `value`, 'offset' adds `value`.
    no_correct: detect but leave faults in place (what a fault would do unprotected).
    ref: 'fused' (checksums carried step by step) or 'prepass' (abft_prepass_reference, one slice).
    recompute: 'tile' (a detection that is not located, or any detection with online=False, recomputes the
    computation without the transient fault: one count) or 'row' (ref_checksums: concurrent, one verification
    at the end: each such row of a strip is recomputed from A and B in double, one count per row, and the
    located rows are corrected in place).
    fault_at: 'step' (the fault applied to the partial sum after its step) or 'start' (ref_checksums:
    concurrent's inject builds: the fault's error, worked out from the partial sum at its step in double,
    is the faulty accumulator's start, and the steps add the products to it).
    fix: how a located element is corrected: 'checksum' (C_ij = r_i - the rest of the row, summed anew), 'dot' (the
    fp64 check: C_ij recomputed from A's row and B's column in double; r_i - rest carries the rounding of the whole row,
    beyond the rule's tolerance for a small element beside large ones) or 'checked' (the SIMT and tf32x3 kernels:
    the dot product where it agrees with r_i - rest within twice the row's threshold, located_fix_agrees; else the
    detection is handled as one that is not located: recompute).
    band, elem_tol (recompute='row'; the fp64 check): a row of a strip that passes its checksum with a score over
    `band` is a suspect, recomputed from A and B (abft_suspect_recheck, the dot products beside their magnitudes
    sum |a| |b|, as exact as the kernel's compensated ones): a detection (and corrected) where an element differs from
    its recomputation by more than elem_tol of its magnitude, else a recheck (counter `rechecked`); its elements take
    the recomputed values either way.
    Returns (C, counters) with counters detected / corrected / recomputed / uncorrectable / rechecked / max_score.
    """
    if fix not in ("checksum", "dot", "checked"):
        raise ValueError(f"fix must be 'checksum', 'dot' or 'checked', not {fix!r}")
    if recompute not in ("tile", "row"):
        raise ValueError(f"recompute must be 'tile' or 'row', not {recompute!r}")
    if fault_at not in ("step", "start"):
        raise ValueError(f"fault_at must be 'step' or 'start', not {fault_at!r}")
    dt = _np.float64 if precision == "fp64" else _np.float32
    uprec = precision if unit is None else unit
    A = _np.asarray(A, dtype=dt)
    B = _np.asarray(B, dtype=dt)
    m, k = A.shape
    n = B.shape[1]
    steps = -(-k // kt)
    if recompute == "row" and interval < steps:
        raise ValueError("recompute='row' needs one verification at the end (interval >= the k steps)")
    be, bw, b2 = abft_encode(B, cols)
    strips = be.shape[1]
    pre = abft_prepass_reference(A, be, bw, b2, kt=kt, interval=interval, precision=precision) if ref == "prepass" else None
    if band > 0 and recompute != "row":
        raise ValueError("a suspect band needs recompute='row' (one verification at the end)")
    counters = {"detected": 0, "corrected": 0, "recomputed": 0, "uncorrectable": 0, "rechecked": 0, "max_score": 0.0}

    def run(inject: bool, final: bool = False):
        # final: the recomputation; a detection there is not a transient fault and the run finishes
        C = _np.zeros((m, strips * cols), dtype=dt)
        r = _np.zeros((m, strips), dtype=dt)
        rw = _np.zeros((m, strips), dtype=dt)
        r2 = _np.zeros((m, strips), dtype=dt)
        Bp = _np.zeros((k, strips * cols), dtype=dt)
        Bp[:, :n] = B
        if inject and fault_at == "start":
            for (fs, fi, fj, kind, value) in faults:
                kend = min(k, (fs + 1) * kt)
                part = dt(0) if kind == "offset" else dt(float(A[fi, :kend].astype(_np.float64) @ Bp[:kend, fj].astype(_np.float64)))
                C[fi, fj] = dt(_fault(part, kind, value, dt) - part)
        for s in range(steps):
            ks = slice(s * kt, min(k, (s + 1) * kt))
            C += (A[:, ks] @ Bp[ks]).astype(dt)
            r += (A[:, ks] @ be[ks]).astype(dt)
            rw += (A[:, ks] @ bw[ks]).astype(dt)
            r2 += ((A[:, ks] * A[:, ks]) @ b2[ks]).astype(dt)
            if inject and fault_at == "step":
                for (fs, fi, fj, kind, value) in faults:
                    if fs == s:
                        C[fi, fj] = _fault(C[fi, fj], kind, value, dt)
            if (s + 1) % interval == 0 or s + 1 == steps:
                k_done = min(k, (s + 1) * kt)
                redo = False
                rows = []  # recompute == 'row': (row, strip) to recompute
                rr, rrw, rr2 = (r, rw, r2) if pre is None else pre[(0, s // interval)]
                for t in range(strips):
                    blk = C[:, t * cols:(t + 1) * cols]
                    found, score = abft_verify_rows(blk, rr[:, t], rrw[:, t], rr2[:, t], k_done, uprec, lam, band)
                    counters["max_score"] = max(counters["max_score"], score)
                    for (i, kind, col) in found:
                        if kind == SUSPECT_KIND:
                            if not no_correct:
                                cs = slice(t * cols, (t + 1) * cols)
                                differs, exact = abft_suspect_recheck(blk[i], A[i, :k_done], Bp[:k_done, cs], elem_tol)
                                blk[i] = exact.astype(dt)
                                counters["detected" if differs else "rechecked"] += 1
                                counters["corrected"] += int(differs)
                            continue
                        counters["detected"] += 1
                        if no_correct:
                            continue
                        if kind == 3 and online:
                            counters["uncorrectable"] += 1
                        if online and kind == 1:
                            j = t * cols + col
                            kend = min(k, (s + 1) * kt)
                            dot = float(A[i, :kend].astype(_np.float64) @ Bp[:kend, j].astype(_np.float64))
                            repl = float(rr[i, t]) - float(_np.delete(blk[i].astype(_np.float64), col).sum())
                            if fix == "checked" and not located_fix_agrees(
                                    repl, dot, _located_row_tau(blk[i], rr[i, t], rr2[i, t], k_done, uprec, lam)):
                                kind = 3  # recomputed below, as a detection that is not located
                            else:
                                blk[i, col] = dt(repl if fix == "checksum" else dot)
                                counters["corrected"] += 1
                                continue
                        if recompute == "row":
                            rows.append((i, t))
                        else:
                            redo = True
                for (i, t) in rows:  # the row of A against the strip of B, in double
                    cs = slice(t * cols, (t + 1) * cols)
                    C[i, cs] = (A[i].astype(_np.float64) @ Bp[:, cs].astype(_np.float64)).astype(dt)
                    counters["recomputed"] += 1
                    counters["corrected"] += 1
                if redo and not final:
                    return None
        return C[:, :n]

    C = run(True)
    if C is None:  # recompute the tile (here: everything) without the transient fault
        counters["recomputed"] += 1
        counters["corrected"] += 1
        C = run(False, final=True)
    return C, counters


def _fault(x, kind: str, value, dt):
    if kind == "offset":
        return dt(x + value)
    bits = _np.array([x], dtype=dt).view(_np.uint64 if dt == _np.float64 else _np.uint32)
    bits ^= (_np.uint64(1) << _np.uint64(value)) if dt == _np.float64 else (_np.uint32(1) << _np.uint32(value))
    return bits.view(dt)[0]


# --------------------------------------------------------------------------------------------
# The cutlass backend's threadblock ABFT, ref_checksums: prepass (templates/gemm/cutlass_abft.cuh: abft_ref_kernel, abft_ref_scan_kernel, abft_kernel kPre)
# --------------------------------------------------------------------------------------------


def abft_k_bounds(k: int, kt: int) -> list[int]:
    """Where the main kernel's k-iterations start and end: the residue r0 = k - (total - 1) kt first, then kt each;
    bounds[it + 1] is the k extent done after k-iteration it."""
    total = -(-k // kt)
    r0 = k - (total - 1) * kt
    return [0] + [r0 + i * kt for i in range(total)]


def abft_checkpoints(k: int, kt: int, interval: int) -> list[int]:
    """k extent done at each checkpoint of the main kernel (after k-iteration min((c + 1) interval, total) - 1)."""
    bounds = abft_k_bounds(k, kt)
    total = len(bounds) - 1
    return [bounds[min((c + 1) * interval, total)] for c in range((total - 1) // interval + 1)]


def abft_ref_subchunks(k: int, kt: int, interval: int) -> tuple[int, int, int] | None:
    """The tensor-core reference pre-pass's plan (Layout in cutlass_tmr.cuh): None where k has a residue iteration (the
    SIMT pre-pass runs); else (sub, per, subs): sub-chunks of sub = g kt of k, g the largest divisor of the interval
    (at most the k-iterations) up to 16, per of them per checkpoint interval, subs in all (the last one shorter where
    sub does not divide k). abft_ref_scan_tc_kernel ends checkpoint min(u // per, chunks - 1) at sub-chunk u where
    u + 1 is a multiple of per or u is the last."""
    if k % kt:
        return None
    iv = min(max(interval, 1), k // kt)
    g = max(d for d in range(1, min(iv, 16) + 1) if iv % d == 0)
    sub = g * kt
    return sub, iv // g, -(-k // sub)


def abft_checkpoint_refs(A, be, bw, *, kt: int, interval: int):
    """CPU model of the reference pre-pass: (chunks, m, strips, 2) float32, r and r' of every row and strip at every
    checkpoint, as the kernels form them: fp32 sums per k-iteration of the interval (in k order), then the intervals
    added up in fp32 (the scan). be, bw: (k, strips) encodings (abft_encode)."""
    A = _np.asarray(A, dtype=_np.float32)
    bounds = abft_k_bounds(A.shape[1], kt)
    total = len(bounds) - 1
    E = _np.stack([_np.asarray(be, _np.float32), _np.asarray(bw, _np.float32)], axis=-1)  # (k, strips, 2)
    chunks = (total - 1) // interval + 1
    out = _np.zeros((chunks, A.shape[0], E.shape[1], 2), dtype=_np.float32)
    run = _np.zeros((A.shape[0], E.shape[1], 2), dtype=_np.float32)
    for c in range(chunks):
        part = _np.zeros_like(run)
        for it in range(c * interval, min((c + 1) * interval, total)):
            ka, kb = bounds[it], bounds[it + 1]
            part = (part + _np.einsum("ik,ksj->isj", A[:, ka:kb].astype(_np.float64), E[ka:kb].astype(_np.float64))).astype(_np.float32)
        run = (run + part).astype(_np.float32)
        out[c] = run
    return out


PASS1_CAP = 1e17  # fp32 accumulators: the cap of |c| in the rule's sum of squares (abft_row_threshold)


def abft_prepass_filter(C_row, r: float, rw: float, k_done: int, lam: float | None = None, unit: str = "tf32x3") -> bool:
    """Pass 1 of the prepass kernel for one row of a strip: True when the row is clean by the full rule
    (abft_verify_rows) without its variance floor sqrt(r2), which only the rare path computes: the threshold
    max(|r|, robust ||C_i||) is never above the full rule's, so a row it passes the full rule passes too; the other
    rows go to the full rule. The kernel sums the squares uncapped (in fp32); a row with a term above the cap or a
    sum of squares that overflows is left to the full rule (False), so a row it passes had the capped sums. lam, unit:
    the threshold's lambda and unit roundoff (ref_checksums: concurrent: abft_concurrent_check)."""
    c = _np.asarray(C_row, dtype=_np.float64)
    with _np.errstate(over="ignore", invalid="ignore"):
        sq32 = _np.sum(_np.square(c.astype(_np.float32)), dtype=_np.float32)
    if not (_np.nanmax(_np.abs(c), initial=0.0) <= PASS1_CAP and sq32 <= _np.finfo(_np.float32).max):
        return False
    flagged, _ = abft_verify_rows(c[None, :], _np.array([r]), _np.array([rw]),
                                     _np.array([0.0]), k_done, unit, ABFT_LAMBDA if lam is None else lam)
    return not flagged
