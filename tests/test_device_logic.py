"""Behavioural CPU tests of the gemm kernels' device-side decisions: templates/common/ftgen_rules.h (the check,
locate, correct, count and vote functions the SIMT, CUTLASS ABFT and TMR kernels call) compiled for the host with
the system C++ compiler, loaded with ctypes and driven with the NumPy models' data (gemm.abft_* for ABFT,
ftgen.families.gemm.tmr_model.classify for the vote) on clean and faulty tiles. A planted bug in any of those functions fails these
tests through behaviour (test_planted_bugs_fail_the_behavioural_tests plants them one at a time)."""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, build_shim, planted_bug_caught
from ftgen import tolerance
from ftgen.families.gemm import abft_model as g
from ftgen.families.gemm import tmr_model as gc

RULES = REPO / "templates" / "common" / "ftgen_rules.h"

SHIM = r"""
#include "ftgen_rules.h"
#include <stdint.h>
using namespace ftgen_rules;
extern "C" {
int simt_classify(double d, double dw, double tau, double tau_w, int cols, int* col, double* score) {
  *col = -1;
  return classify_row(d, dw, tau, tau_w, cols, col, score);
}
double replacement_f64(double chk, double rest) { return replacement<double>(chk, rest); }
float replacement_f32(double chk, double rest) { return replacement<float>(chk, rest); }
int fix_agrees(double repl, double dot, double tau) { return located_fix_agrees(repl, dot, tau) ? 1 : 0; }
unsigned correct_f32(float* x, double chk, double rest) { return correct_element(*x, chk, rest); }
unsigned correct_scaled_f32(float* x, double alpha, double chk, double rest) { return correct_element_scaled(*x, alpha, chk, rest); }
// pass 1 of abft_pass1_rows (cutlass_abft.cuh), composed of the same calls
int abft_pass1(int decided, float S1, float SW, float R, float RW, float scale, float unit, float fixed, float rms_w, float* score) {
  const float tau = abft_tau(fixed, unit, scale);
  const float tau_w = abft_tau_w(fixed, tau, unit, rms_w, RW);
  const float d = S1 - R, dw = SW - RW;
  const float sc1 = abft_score(d, tau);
  const float sc2 = abft_score(dw, tau_w);
  *score = fmaxf(sc1, sc2);
  return (decided && abft_within(sc1, sc2) && isfinite(d) && isfinite(dw)) ? 1 : 0;
}
int abft_verdict(float SQ, float MX, int NB, int BC, double S1, double SW, float R, float RW, float R2, float unit, float fixed,
                 float rms_w, int cols, float* score) {
  return abft_row_verdict(SQ, MX, NB, BC, S1, SW, R, RW, R2, unit, fixed, rms_w, cols, score);
}
int abft_verdict64(double SQ, double MX, int NB, int BC, double S1, double SW, double R, double RW, double R2, double unit,
                   double fixed, double rms_w, int cols, double* score) {
  return abft_row_verdict_t<double>(SQ, MX, NB, BC, S1, SW, R, RW, R2, unit, fixed, rms_w, cols, score);
}
int abft16_verdict(double P1, double PW, double PA, double ar, double arw, double unit, double fixed, double rms_w, int cols,
                   double* score) {
  return abft16_unit_verdict(P1, PW, PA, ar, arw, unit, fixed, rms_w, cols, score);
}
void abft_count(int verdict, int online, unsigned* detected, unsigned* uncorrectable) {
  abft_count_row(verdict, online, *detected, *uncorrectable);
}
int tmr_vote(uint32_t u0, uint32_t u1, uint32_t u2, uint32_t* maj) { return vote_element(u0, u1, u2, *maj); }
int tmr_counted(uint32_t u0, uint32_t u1, uint32_t u2, uint32_t* maj, unsigned* counts, int* unc) {
  bool b = *unc != 0;
  const int st = counted_vote(u0, u1, u2, *maj, counts[0], counts[1], counts[2], b);
  *unc = b;
  return st;
}
void tmr_repair(int st, float m, float* x) { repair_minority(st, m, x[0], x[1], x[2]); }
void split_tf32(double x, double scale, float* hi, float* lo) { tf32_split(x, scale, hi, lo); }
double rms_w(int cols) { return rms_weights(cols); }
double unit16(int k, int kw, int cols, double lambda) { return abft16_unit(k, kw, cols, lambda); }
int prefilter(float P1, float r, float scale, float unit, float* score) { return norm_prefilter_clean(P1, r, scale, unit, score) ? 1 : 0; }
}
"""


def build(rules_dir: Path, out: Path):
    """Compile the shim against the rules header in `rules_dir`; the loaded library with its signatures."""
    d, f, i, u = ctypes.c_double, ctypes.c_float, ctypes.c_int, ctypes.c_uint
    P = ctypes.POINTER
    sig = {
        "simt_classify": (i, [d, d, d, d, i, P(i), P(d)]),
        "replacement_f64": (d, [d, d]),
        "replacement_f32": (f, [d, d]),
        "fix_agrees": (i, [d, d, d]),
        "correct_f32": (u, [P(f), d, d]),
        "correct_scaled_f32": (u, [P(f), d, d, d]),
        "abft_pass1": (i, [i, f, f, f, f, f, f, f, f, P(f)]),
        "abft_verdict": (i, [f, f, i, i, d, d, f, f, f, f, f, f, i, P(f)]),
        "abft_verdict64": (i, [d, d, i, i, d, d, d, d, d, d, d, d, i, P(d)]),
        "abft16_verdict": (i, [d, d, d, d, d, d, d, d, i, P(d)]),
        "abft_count": (None, [i, i, P(u), P(u)]),
        "tmr_vote": (i, [ctypes.c_uint32] * 3 + [P(ctypes.c_uint32)]),
        "tmr_counted": (i, [ctypes.c_uint32] * 3 + [P(ctypes.c_uint32), P(u), P(i)]),
        "tmr_repair": (None, [i, f, P(f)]),
        "split_tf32": (None, [d, d, P(f), P(f)]),
        "rms_w": (d, [i]),
        "unit16": (d, [i, i, i, d]),
        "prefilter": (i, [f, f, f, f, P(f)]),
    }
    return build_shim(SHIM, rules_dir, out, sig)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build(RULES.parent, tmp_path_factory.mktemp("rules"))


# ---- data: one checksum strip of a GEMM, as the NumPy model sees it -----------------------------------------


class Strip:
    """A (rows x cols) strip of C = A B in fp32 with its reference checksums r, r', r2 (in double, from the model's
    encodings of B), the clean C kept beside the faulty one."""

    def __init__(self, seed: int, rows: int = 32, k: int = 256, cols: int = 128, dist: str = "normal"):
        rng = np.random.default_rng(seed)
        if dist == "uniform":
            A, B = rng.uniform(-1, 1, (rows, k)), rng.uniform(-1, 1, (k, cols))
        else:
            A, B = rng.standard_normal((rows, k)), rng.standard_normal((k, cols))
        self.A, self.B = A.astype(np.float32), B.astype(np.float32)
        self.k, self.cols = k, cols
        self.C = (self.A @ self.B).astype(np.float32)
        self.clean = self.C.copy()
        be, bw, b2 = g.abft_encode(self.B.astype(np.float64), cols)
        A64 = self.A.astype(np.float64)
        self.r, self.rw, self.r2 = (A64 @ be)[:, 0], (A64 @ bw)[:, 0], ((A64 * A64) @ b2)[:, 0]
        self.unit = g.abft_threshold_unit("fp32", k, cols)
        self.rms_w = math.sqrt((cols + 1.0) * (2.0 * cols + 1.0) / 6.0)
        self.w = np.arange(1, cols + 1, dtype=np.float64)

    def model_row(self, i: int):
        """The NumPy model's (kind, col, d, dw, tau, tau_w, score) for row i of the (possibly faulty) strip."""
        c = self.C[i].astype(np.float64)
        tau = g.abft_row_threshold(c, self.r[i], self.rw[i], self.r2[i], self.k, "fp32")
        tau_w = g.abft_weighted_threshold(tau, self.rw[i], self.unit, self.cols)
        d, dw = float(c.sum()) - self.r[i], float((self.w * c).sum()) - self.rw[i]
        kind, col = g.abft_classify(d, dw, tau, tau_w, self.cols)
        score = max(abs(d) / tau if tau > 0 else 0.0, abs(dw) / tau_w if tau_w > 0 else 0.0)
        return kind, col, d, dw, tau, tau_w, score

    def row_inputs(self, i: int):
        """The CUTLASS rare path's inputs for row i: capped float squares, non-finite elements, double sums."""
        c = self.C[i]
        fin = np.isfinite(c)
        cc = np.minimum(np.abs(c[fin]), np.float32(1e17))
        sq = (cc * cc).astype(np.float32)
        bad = np.flatnonzero(~fin)
        return dict(SQ=float(np.sum(sq, dtype=np.float32)), MX=float(sq.max(initial=0)), NB=int(bad.size),
                    BC=int(bad[-1]) if bad.size else -1, S1=float(c[fin].astype(np.float64).sum()) if bad.size == 0 else 0.0,
                    SW=float((self.w[fin] * c[fin].astype(np.float64)).sum()) if bad.size == 0 else 0.0)

    def rest(self, i: int, j: int) -> float:
        """The rest of row i without column j, summed anew in double (as the kernels do)."""
        return float(np.delete(self.C[i].astype(np.float64), j).sum())

    def tol(self, i: int, j: int) -> float:
        """The tolerance rule's bound on |C_ij - exact| for this element (fp32, depth k)."""
        s = float(np.abs(self.A[i].astype(np.float64)) @ np.abs(self.B[:, j].astype(np.float64)))
        return tolerance.tolerance("fp32", self.k) * s


def plant(s: Strip, rng, n: int = 1, bits=range(23, 31), limit: float = 1e30):
    """Flip an exponent bit of n elements in distinct rows; returns [(row, col)] of the faults that change their
    element by more than 1e3 times the row's threshold (unambiguous for the rule: located with certainty) and leave
    it below `limit` (beyond ~1e36 the CUTLASS rule's float residual dw overflows: detected, not located)."""
    out = []
    rows = rng.choice(s.C.shape[0], size=n, replace=False)
    for i in rows:
        j = int(rng.integers(s.cols))
        s.C[i, j] = g.flip32(s.C[i, j], int(rng.choice(list(bits))))
        if abs(float(s.C[i, j])) < limit and abs(float(s.C[i, j]) - float(s.clean[i, j])) > 1e3 * s.model_row(i)[4]:
            out.append((int(i), j))
        else:
            s.C[i, j] = s.clean[i, j]  # not clearly significant: put back
    return out


# ---- the behavioural checks (each also run against planted bugs) -------------------------------------------


def check_simt_rows(lib):
    """SIMT classify_row against the model on clean and faulty strips; a located fault's correction restores the
    element, and the check of a located element's dot product (located_fix_agrees, here with the clean element as the
    dot product) takes it at the fault's column and refuses it at a neighbour's (a fault apart)."""
    rng = np.random.default_rng(7)
    located = 0
    for seed in range(6):
        s = Strip(seed, dist="uniform" if seed % 2 else "normal")
        faults = dict(plant(s, rng, n=4))
        for i in range(s.C.shape[0]):
            kind, col, d, dw, tau, tau_w, score = s.model_row(i)
            c_col, c_score = ctypes.c_int(), ctypes.c_double()
            got = lib.simt_classify(d, dw, tau, tau_w, s.cols, ctypes.byref(c_col), ctypes.byref(c_score))
            assert got == kind, (seed, i, got, kind)
            assert c_score.value == pytest.approx(score, rel=1e-12)
            if i not in faults:
                assert got == 0 and score < 0.6, (seed, i, score)  # a clean row raises nothing
                continue
            assert got == 1 and c_col.value == faults[i] == col  # located where the fault is (corrected in place)
            j = c_col.value
            fixed = lib.replacement_f32(s.r[i], s.rest(i, j))
            assert abs(fixed - float(s.clean[i, j])) <= s.tol(i, j), (fixed, s.clean[i, j])
            fixed64 = lib.replacement_f64(s.r[i], s.rest(i, j))
            assert abs(fixed64 - float(s.clean[i, j])) <= s.tol(i, j)
            assert lib.fix_agrees(fixed64, float(s.clean[i, j]), tau) == 1
            jn = (j + 1) % s.cols
            assert lib.fix_agrees(lib.replacement_f64(s.r[i], s.rest(i, jn)), float(s.clean[i, jn]), tau) == 0
            assert lib.fix_agrees(fixed64, float("nan"), tau) == 0
            located += 1
    assert located >= 12


def cutlass_verdict(lib, s: Strip, i: int, fixed: float = 0.0):
    x = s.row_inputs(i)
    sc = ctypes.c_float()
    v = lib.abft_verdict(x["SQ"], x["MX"], x["NB"], x["BC"], x["S1"], x["SW"], np.float32(s.r[i]), np.float32(s.rw[i]),
                         np.float32(s.r2[i]), np.float32(s.unit), fixed, np.float32(s.rms_w), s.cols, ctypes.byref(sc))
    return v, sc.value


def cutlass_pass1(lib, s: Strip, i: int, decided: bool = True) -> bool:
    c = s.C[i]
    S1 = np.float32(np.sum(c, dtype=np.float32))
    with np.errstate(over="ignore", invalid="ignore"):  # (float sums of a faulty row may overflow, as on the GPU)
        SW = np.float32(np.sum(s.w.astype(np.float32) * c, dtype=np.float32))
    R = np.float32(s.r[i])
    scale = max(math.sqrt(max(float(np.float32(s.r2[i])), 0.0)), abs(float(R)))
    sc = ctypes.c_float()
    return bool(lib.abft_pass1(int(decided), S1, SW, R, np.float32(s.rw[i]), scale, np.float32(s.unit), 0.0, np.float32(s.rms_w), ctypes.byref(sc)))


def check_cutlass_tiles(lib):
    """The CUTLASS threadblock level's decisions for each row of a strip (pass 1, the rare path's full rule, the
    counters, the correction in place) against the model: a clean tile raises nothing; each single fault is located,
    counted detected and corrected (not uncorrectable, no recomputation) and the corrected element is right."""
    rng = np.random.default_rng(11)
    total = 0
    for seed in range(6):
        s = Strip(100 + seed, dist="uniform" if seed % 2 else "normal")
        faults = dict(plant(s, rng, n=3))
        det, unc, cor = ctypes.c_uint(0), ctypes.c_uint(0), 0
        for i in range(s.C.shape[0]):
            kind, col, *_ = s.model_row(i)
            clean1 = cutlass_pass1(lib, s, i)
            verdict, score = cutlass_verdict(lib, s, i)
            lib.abft_count(verdict, 1, ctypes.byref(det), ctypes.byref(unc))
            if i not in faults:
                assert kind == 0 and clean1 and verdict == -1 and score < 0.6, (seed, i, verdict, score)
                continue
            assert not clean1  # pass 1 sends the row to the rare path
            assert kind == 1 and verdict == col == faults[i], (seed, i, verdict, col, faults[i])
            j = verdict
            x = ctypes.c_float(float(s.C[i, j]))
            cor += lib.correct_f32(ctypes.byref(x), float(np.float32(s.r[i])), s.rest(i, j))
            assert abs(x.value - float(s.clean[i, j])) <= s.tol(i, j), (x.value, s.clean[i, j])
            y = ctypes.c_float(float(s.C[i, j]) * 2.0)  # the deferred check: D = alpha acc, alpha = 2
            assert lib.correct_scaled_f32(ctypes.byref(y), 2.0, float(np.float32(s.r[i])), s.rest(i, j)) == 1
            assert abs(y.value - 2.0 * float(s.clean[i, j])) <= 2.0 * s.tol(i, j)
            total += 1
        n = len(faults)
        assert (det.value, cor, unc.value) == (n, n, 0), (seed, det.value, cor, unc.value, n)
    assert total >= 10


def check_cutlass_special_rows(lib):
    """Non-finite elements, a fault that cannot be located, a fixed threshold, and detect-only counting."""
    s = Strip(5)
    i = 3
    assert cutlass_pass1(lib, s, i) and not cutlass_pass1(lib, s, i, decided=False)  # undecided rows: the rare path
    s.C[i, 17] = np.float32(np.nan)
    assert not cutlass_pass1(lib, s, i)  # a NaN in the row goes to the rare path (its scores compare false)
    s.C[i, 17] = np.float32(np.inf)
    assert not cutlass_pass1(lib, s, i)
    v, score = cutlass_verdict(lib, s, i)
    assert v == 17 and math.isinf(score)  # one non-finite element: its column
    s.C[i, 40] = np.float32(np.nan)
    assert cutlass_verdict(lib, s, i)[0] == -2  # two: not located
    s.C[i] = s.clean[i]
    assert cutlass_verdict(lib, s, i)[0] == -1
    # two faults in one row: detected, not located (the quotient is no column)
    s.C[i, 10] += np.float32(1e4 * s.model_row(i)[4])
    s.C[i, 90] += np.float32(2e4 * s.model_row(i)[4])
    v, _ = cutlass_verdict(lib, s, i)
    assert v == -2 and s.model_row(i)[0] == 3
    s.C[i] = s.clean[i]
    # a fault in the weighted reference checksum r' (not in C): detected by dw alone, not located
    tau_w = s.model_row(i)[5]
    s.rw[i] += 1e3 * tau_w
    assert not cutlass_pass1(lib, s, i) and cutlass_verdict(lib, s, i)[0] == -2 and s.model_row(i)[0] == 3
    s.rw[i] -= 1e3 * tau_w
    assert cutlass_pass1(lib, s, i) and cutlass_verdict(lib, s, i)[0] == -1
    # a fault so large that the weighted residual overflows float: detected, not located (the tile is recomputed)
    s.C[i, 100] = np.float32(3e37)
    assert cutlass_verdict(lib, s, i)[0] == -2 and s.model_row(i)[0] == 1
    s.C[i] = s.clean[i]
    # a fixed threshold (protection.threshold) replaces the derived one
    assert cutlass_verdict(lib, s, i, fixed=1e-30)[0] != -1
    assert cutlass_verdict(lib, s, i, fixed=1e30)[0] == -1
    det, unc = ctypes.c_uint(0), ctypes.c_uint(0)
    for verdict, online in ((-1, 1), (-1, 0), (5, 1), (-2, 1), (5, 0)):
        lib.abft_count(verdict, online, ctypes.byref(det), ctypes.byref(unc))
    assert (det.value, unc.value) == (3, 2)  # -2 online and 5 with correct: detect are not corrected in place


def check_fp64_rows(lib):
    """The fp64 check's full rule (double thresholds and references, abft_row_verdict_t<double>) against the model at
    the fp64 check's lambda: clean rows of an fp64 strip raise nothing; a fault of 1e-9 of its element -- far above the
    fp64 threshold, far below what float references resolve (2^-24) -- is located at its column by the double rule,
    while the float rule on the same row cannot tell it from its own rounding."""
    rng = np.random.default_rng(5)
    rows, k, cols = 16, 512, g.ABFT64_STRIP_COLS
    A, B = rng.standard_normal((rows, k)), rng.standard_normal((k, cols))
    C = A @ B
    be, bw, b2 = g.abft_encode(B, cols)
    r, rw, r2 = (A @ be)[:, 0], (A @ bw)[:, 0], ((A * A) @ b2)[:, 0]
    lam = g.abft_fp64_check()["lam"]
    unit = g.abft_threshold_unit("fp64", k, cols, lam)
    rms_w = math.sqrt((cols + 1.0) * (2.0 * cols + 1.0) / 6.0)
    w = np.arange(1, cols + 1, dtype=np.float64)

    def verdict(c, i, f32=False):
        a = np.minimum(np.abs(c), 1e150) ** 2
        args = (float(a.sum()), float(a.max()), 0, -1, float(c.sum()), float((w * c).sum()), r[i], rw[i], r2[i], unit, 0.0, rms_w, cols)
        if f32:
            sc = ctypes.c_float()
            return lib.abft_verdict(*[np.float32(x) if isinstance(x, float) and n not in (4, 5) else x for n, x in enumerate(args)],
                                    ctypes.byref(sc)), sc.value
        sc = ctypes.c_double()
        return lib.abft_verdict64(*args, ctypes.byref(sc)), sc.value

    located = 0
    for i in range(rows):
        c = C[i].copy()
        v, score = verdict(c, i)
        kind, _ = g.abft_classify(float(c.sum()) - r[i], float((w * c).sum()) - rw[i],
                                  g.abft_row_threshold(c, r[i], rw[i], r2[i], k, "fp64", lam),
                                  g.abft_weighted_threshold(g.abft_row_threshold(c, r[i], rw[i], r2[i], k, "fp64", lam), rw[i], unit, cols),
                                  cols)
        assert v == -1 and kind == 0 and score < 0.6, (i, v, score)
        j = int(rng.integers(cols))
        c[j] += 1e-9 * max(abs(c[j]), 1.0)
        v, score = verdict(c, i)
        assert v == j and score > 1.0, (i, v, j, score)
        assert verdict(c, i, f32=True)[0] != j  # float references cannot locate it
        located += 1
    assert located == rows


def check_abft16_units(lib):
    """The 16-bit check (cutlass90_abft16.cuh: abft16_unit_verdict) against abft_model.abft16_verdict on the sums the
    epilogue forms from a bf16 / fp16 GEMM's fp32 accumulators (abft16_check's data): clean units clean with scores
    below 0.5, an exponent flip located at its column, a mantissa flip too small to locate detected (-2), a non-finite
    sum detected, a fixed threshold obeyed; the device rule and the model agree on every verdict."""
    rng = np.random.default_rng(11)
    for prec, cols in (("bf16", 128), ("fp16", 64)):
        k, rows = 512, 24
        A = g.to16(rng.standard_normal((rows, k)), prec)
        B = g.to16(rng.standard_normal((k, cols)), prec)
        acc = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        r, rw = g.abft16_refs(A, g.abft16_encode(B, cols, prec), cols, prec)
        unit = g.abft16_unit(k, 16, cols)
        rms_w = g.abft_rms_w(cols)
        w = np.arange(1, cols + 1, dtype=np.float32)

        def both(c, i, fixed=0.0):
            sums = (float(c.sum(dtype=np.float32)), float((w * c).sum(dtype=np.float32)), float(np.abs(c).sum(dtype=np.float32)))
            sc = ctypes.c_double()
            v = lib.abft16_verdict(*sums, r[i, 0], rw[i, 0], unit, fixed, rms_w, cols, ctypes.byref(sc))
            mv, ms = g.abft16_verdict(*sums, r[i, 0], rw[i, 0], unit, cols, fixed)
            assert v == mv and (sc.value == ms or (math.isinf(ms) and math.isinf(sc.value))), (v, mv, sc.value, ms)
            return v, sc.value

        for i in range(rows):
            c = acc[i].copy()
            v, score = both(c, i)
            assert v == -1 and score < 0.5, (prec, i, v, score)
            assert both(c, i, fixed=1e-30)[0] != -1  # a fixed threshold replaces the derived one
            j = int(rng.integers(cols))
            big = c.copy()
            big[j] = np.float32(big[j] + 1e3 * max(1.0, abs(float(big[j]))))
            assert both(big, i)[0] == j, (prec, i, j)
            small = c.copy()
            small[j] = np.float32(small[j] + 0.01 * float(np.abs(c).mean()))  # over tau, under the certainty of a location
            assert both(small, i)[0] == -2, (prec, i, j)
            inf = c.copy()
            inf[j] = np.float32(np.inf)
            assert both(inf, i)[0] == -2


def check_tmr(lib):
    """The vote against ftgen.families.gemm.tmr_model.classify on every pattern of agreement, with random bit patterns; one bad copy
    is outvoted and repaired, three different copies are uncorrectable."""
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    other = base ^ (np.uint32(1) << rng.integers(0, 32, size=64).astype(np.uint32))
    third = other ^ np.uint32(1 << 31)
    cases = [(base, base, base), (other, base, base), (base, other, base), (base, base, other), (base, other, third)]
    for u0, u1, u2 in cases:
        status, majority = gc.classify(u0, u1, u2)
        for e in range(len(u0)):
            maj = ctypes.c_uint32()
            st = lib.tmr_vote(int(u0[e]), int(u1[e]), int(u2[e]), ctypes.byref(maj))
            assert st == int(status[e]), (st, int(status[e]))
            if st != gc.UNCORRECTABLE:
                assert maj.value == int(majority[e]) == int(base[e])  # the two agreeing copies win
    counts, unc, maj = (ctypes.c_uint * 3)(0, 0, 0), ctypes.c_int(0), ctypes.c_uint32()
    for u0, u1, u2 in cases:
        lib.tmr_counted(int(u0[0]), int(u1[0]), int(u2[0]), ctypes.byref(maj), counts, ctypes.byref(unc))
    assert list(counts) == [4, 3, 1] and unc.value == 1  # detected, corrected, uncorrectable
    for st, bad in ((gc.MINORITY_0, 0), (gc.MINORITY_1, 1), (gc.MINORITY_2, 2)):
        x = (ctypes.c_float * 3)(1.5, 1.5, 1.5)
        x[bad] = -7.0
        lib.tmr_repair(st, 1.5, x)
        assert list(x) == [1.5, 1.5, 1.5]
    x = (ctypes.c_float * 3)(1.0, 2.0, 3.0)
    for st in (gc.AGREE, gc.UNCORRECTABLE):
        lib.tmr_repair(st, 9.0, x)
    assert list(x) == [1.0, 2.0, 3.0]


def check_tf32_encodings(lib):
    """The kmeans cutlass90 check's encodings (pack_kernel: ftgen_rules::tf32_split of the tiles' fp64 sums) against the
    model's (kmeans model.encode90: abft_model.abft16_encode in fp64), bit for bit, and the references they give back
    within 2^-21 of the sums; the weights' rms against abft_model.abft_rms_w."""
    from ftgen.families.kmeans import model as km

    rng = np.random.default_rng(5)
    for scale_exp in (0.0, 30.0, -30.0):
        Ct = km.round_tf32((rng.standard_normal((300, 17)) * 2.0**scale_exp).astype(np.float32))
        n_tb = 128
        E = km.encode90(Ct, n_tb)
        se, sw = (2.0**x for x in g.abft16_scales(n_tb))
        for t in range(E.shape[0] // 4):
            block = Ct[t * n_tb:(t + 1) * n_tb].astype(np.float64)
            s, w = block.sum(axis=0), (np.arange(1, block.shape[0] + 1)[:, None] * block).sum(axis=0)
            for d in range(Ct.shape[1]):
                for q, (x, scale) in enumerate(((s[d], se), (w[d], sw))):
                    hi, lo = ctypes.c_float(), ctypes.c_float()
                    lib.split_tf32(float(x), scale, ctypes.byref(hi), ctypes.byref(lo))
                    assert (hi.value, lo.value) == (float(E[4 * t + 2 * q, d]), float(E[4 * t + 2 * q + 1, d]))
                    back = (hi.value + lo.value * 2.0**-11) / scale
                    assert abs(back - x) <= 2.0**-21 * abs(x) + 1e-300, (back, x)
    for cols in (1, 7, 128, 248):
        assert lib.rms_w(cols) == pytest.approx(g.abft_rms_w(cols), rel=1e-15)
    for k, kw, cols in ((1, 8, 152), (64, 8, 152), (129, 8, 24), (4096, 16, 128), (777, 16, 64)):
        assert lib.unit16(k, kw, cols, g.ABFT16_LAMBDA) == pytest.approx(g.abft16_unit(k, kw, cols), rel=1e-15)


def check_norm_prefilter(lib):
    """The kmeans cutlass90 check's first stage (norm_prefilter_clean) against the model's: the same decision on residuals
    swept across the threshold (|r| and the norm scale each the larger), every unit the full rule's unweighted residual
    finds clean passed too (the scale bounds sum |a|: no extra alarm), a non-finite sum never passes; its score is the
    residual over its threshold."""
    from ftgen.families.kmeans import model as km
    rng = np.random.default_rng(19)
    cols, unit = 152, g.abft16_unit(64, 8, 152)
    rms_w = g.abft_rms_w(cols)
    passed = 0
    for _ in range(3000):
        PA = float(10.0 ** rng.uniform(-3, 3))
        scale = PA * float(rng.uniform(1.0, 4.0))  # (Cauchy-Schwarz: ||x|| sum ||c_j|| >= sum |a|)
        ar = float(rng.uniform(-1, 1) * PA * (3.0 if rng.integers(2) else 0.2))
        tau = unit * max(scale, abs(ar))
        P1 = ar + float(rng.uniform(-2, 2)) * tau
        sums = [float(np.float32(v)) for v in (P1, ar, scale)]
        sc = ctypes.c_float()
        ok = lib.prefilter(*sums, unit, ctypes.byref(sc))
        near = abs(abs(sums[0] - sums[1]) / tau - 1.0) < 1e-5  # (fp32 rounding at the threshold itself)
        if not near:
            assert bool(ok) == km.norm_prefilter_clean(sums[0], sums[1], sums[2], 1.0, unit), sums
        if ok:
            passed += 1
            assert sc.value == pytest.approx(abs(sums[0] - sums[1]) / tau, rel=1e-5, abs=1e-7)
        full = ctypes.c_double()
        arw = float(np.float32(ar * cols / 2))  # (no weighted residual: the unweighted one decides)
        v = lib.abft16_verdict(sums[0], arw, PA, sums[1], arw, unit, 0.0, rms_w, cols, ctypes.byref(full))
        if v == -1 and sums[2] >= PA:  # the full rule passes it: so does the stage
            assert ok, (sums, v)
    assert 300 < passed < 2700, passed  # (the sweep crosses the threshold)
    for bad in (np.inf, np.nan):
        assert not lib.prefilter(bad, 0.0, 1.0, unit, ctypes.byref(ctypes.c_float()))


CHECKS = (check_simt_rows, check_cutlass_tiles, check_cutlass_special_rows, check_fp64_rows, check_abft16_units, check_tmr,
          check_tf32_encodings, check_norm_prefilter)


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_device_logic(lib, check):
    check(lib)


def test_the_kernels_decide_through_the_rules():
    """The kernels call these functions rather than keeping copies of the decisions (so the tests above test them)."""
    abft = (REPO / "templates" / "gemm" / "cutlass_abft.cuh").read_text()
    tmr = (REPO / "templates" / "gemm" / "cutlass_tmr.cuh").read_text()
    simt = (REPO / "templates" / "gemm" / "simt_variant.cu.j2").read_text()
    for name in ("abft_row_verdict", "abft_tau(", "abft_tau_w(", "abft_score(", "abft_within_at(", "abft_count_row",
                 "abft_band_verdict(", "abft_element_differs(",
                 "correct_element(", "correct_element_scaled(", "located_fix_agrees("):
        assert f"ftgen_rules::{name}" in abft, name
    assert "(sc1 > 1.f)" not in abft and "rint(ddw" not in abft  # no second copy of the comparison or the location
    assert '#include "ftgen_rules.h"' in tmr and "using ftgen_rules::vote_element;" in tmr
    assert "ftgen_rules::counted_vote(" in tmr and "ftgen_rules::repair_minority(" in tmr
    assert "int vote_element(" not in tmr
    assert "using ftgen_rules::classify_row;" in simt and "using ftgen_rules::located_fix_agrees;" in simt
    assert simt.count("located_fix_agrees(") == 4 and "replacement<T>(" not in simt
    assert "rint(dw" not in simt and "(s1 > 1.0)" not in simt
    abft64 = (REPO / "templates" / "gemm" / "cutlass_abft64.cuh").read_text()
    for name in ("abft_row_verdict_t<double>", "abft_score_t(", "abft_within_t(", "abft_within_at_t(", "abft_count_row(",
                 "abft_band_verdict(", "abft_element_differs("):
        assert f"ftgen_rules::{name}" in abft64, name
    assert "rint(ddw" not in abft64 and "> 1.0)" not in abft64  # no second copy of the location or the comparison
    abft16 = (REPO / "templates" / "gemm" / "cutlass90_abft16.cuh").read_text()
    assert "ftgen_rules::abft16_unit_verdict(" in abft16 and "ftgen_rules::abft_count_row(" in abft16
    code16 = "\n".join(ln for ln in abft16.splitlines() if not ln.lstrip().startswith("//"))
    assert "rint(" not in code16 and "> 1.0" not in code16  # no second copy of the location or the comparison
    km90 = (REPO / "templates" / "kmeans" / "kmeans90.cuh").read_text()
    for name in ("abft16_unit_verdict(", "norm_prefilter_clean(", "rms_weights(", "tf32_split(", "tf32_round("):
        assert f"ftgen_rules::{name}" in km90, name
    code90 = "\n".join(ln for ln in km90.splitlines() if not ln.lstrip().startswith("//"))
    assert "rint(" not in code90 and "0xffffe000" not in code90  # no second copy of the location or the TF32 rounding


# ---- planted bugs: each must make a behavioural check fail -----------------------------------------------------

MUTANTS = {
    # the score-vs-threshold comparison flipped (CUTLASS ABFT, both passes)
    "abft_comparison_flipped": ("return !(sc1 > T(1)) & !(sc2 > T(1));", "return !(sc1 < T(1)) & !(sc2 < T(1));"),
    # the in-place fix skipped but still counted (CUTLASS ABFT)
    "abft_fix_skipped_but_counted": ("  x = replacement<T>(chk, rest);\n  return 1u;", "  return 1u;"),
    "abft_scaled_fix_skipped": ("  x = static_cast<T>(alpha * (chk - rest));\n", ""),
    # the location off by one column
    "abft_locate_off_by_one": ("return int(jq) - 1;", "return int(jq);"),
    # the weighted residual's score ignored (a fault in the weighted checksum passes)
    "abft_within_ignores_weighted": ("return !(sc1 > T(1)) & !(sc2 > T(1));", "return !(sc1 > T(1));"),
    # the fp64 rule's references rounded to float (the tf32x3 check's precision)
    "abft_fp64_references_in_float": ("const double dd = S1 - static_cast<double>(R), ddw = SW - static_cast<double>(RW);",
                                      "const double dd = S1 - static_cast<float>(R), ddw = SW - static_cast<float>(RW);"),
    # the 16-bit check's threshold on |r| alone (the sums' magnitude dropped)
    "abft16_scale_without_magnitude": ("const double tau = fixed > 0.0 ? fixed : unit * fmax(PA, fabs(ar));",
                                       "const double tau = fixed > 0.0 ? fixed : unit * fabs(ar);"),
    # the 16-bit check's non-finite residual taken as clean
    "abft16_nonfinite_clean": ("  if (!(isfinite(d) && isfinite(dw))) return -2;\n", ""),
    # an unlocated detection counted as correctable
    "abft_count_unlocated_as_correctable": ("if (verdict == -2 || !online) ++uncorrectable;", "if (!online) ++uncorrectable;"),
    # the TMR vote always taking copy 0
    "tmr_vote_takes_copy_0": ("    maj = u1;\n", ""),
    # the repair writes the wrong copy
    "tmr_repair_wrong_copy": ("if (st == kMinority1) x1 = m;", "if (st == kMinority1) x2 = m;"),
    # an uncorrectable vote counted as corrected
    "tmr_uncorrectable_counted_corrected": ("    ++uncorrectable;\n    unc = true;", "    ++corrected;\n    unc = true;"),
    # the SIMT correction's sign flipped (r_i - rest -> rest - r_i)
    "simt_correction_sign_flipped": ("return static_cast<T>(chk - rest);", "return static_cast<T>(rest - chk);"),
    # the SIMT check of a located element's dot product accepting anything
    "simt_fix_check_accepts_all": ("return fabs(replacement_value - dot) <= 2.0 * tau;", "return true;"),
    # the SIMT comparison flipped
    "simt_comparison_flipped": ("if (!(s1 > 1.0) && !(s2 > 1.0)) return 0;", "if (!(s1 < 1.0) && !(s2 < 1.0)) return 0;"),
    # the TF32 split's low part not scaled up (the references lose the low part's bits)
    "tf32_split_lo_unscaled": ("*lo = tf32_round((xs - *hi) * 2048.f);", "*lo = tf32_round(xs - *hi);"),
    # the first stage's threshold on the norm scale alone (|r| dropped)
    "prefilter_without_reference": ("{ return unit * fmaxf(scale, fabsf(r)); }", "{ return unit * scale; }"),
    # the first stage with twice its threshold (units up to twice the unweighted threshold pass)
    "prefilter_doubled": ("if (!(d <= tau)) return false;", "if (!(d <= 2.f * tau)) return false;"),
    # the 16-bit check's unit without the wgmma steps
    "abft16_unit_without_steps": ("(static_cast<double>((k + kw - 1) / kw) + cols + 1.0)", "(cols + 1.0)"),
    # TF32 rounding by truncation (not the wgmma's rounding)
    "tf32_round_truncates": ("u = (u + 0x1000u) & 0xffffe000u;", "u = u & 0xffffe000u;"),
}


@pytest.mark.compile
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_bugs_fail_the_behavioural_tests(name, tmp_path):
    caught = planted_bug_caught(RULES, *MUTANTS[name], build, CHECKS, tmp_path)
    assert caught, f"planted bug {name} passed every behavioural check"
