"""Behavioural CPU tests of the SIMT ABFT levels' fault accounting (specs/gemm/abft_levels.yaml).

Thread level: the verification code of each thread-level variant is cut from its generated source (verify_thread,
the functions it calls, its constants, and the kernel's own call of it at a verification), compiled for the host with
the system C++ compiler against ftgen_rules.h, and driven over one thread's k loop with several verifications
(every INTERVAL k-tiles) and planted faults. Rule of the bench (ftgen_bench_driver.cu): a detection is an applied
fault or a false alarm, so a fault that a verification cannot correct in place (the tile is recomputed after the k
loop) is counted once, not again at every later verification. Planted bugs in the cut code must fail these checks.

Non-fused level: the NumPy model (abft_gemm_model) on the H200 bench's own data (ftgen_harness.cuh's random_value,
regenerated here) reproduces the fault that fp64 1000x1234x777 with 16 faults left beyond tolerance: checked over
whole rows of W (n columns) its residual is below the threshold; over strips of the block tile's width (what
nf_verify checks) it is detected and corrected.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from conftest import REPO, build_shim
from ftgen import tolerance
from ftgen.codegen.emit import render_spec
from ftgen.families.gemm import abft_model as g
from ftgen.spec.loader import load_spec

SPEC = REPO / "specs" / "gemm" / "abft_levels.yaml"
RULES_DIR = REPO / "templates" / "common"


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """Generated kernel sources of the levels spec: variant name -> its .cu text."""
    files, _ = render_spec(load_spec(SPEC))
    out = {}
    for path, text in files.items():
        name = path.split("/")[-1]
        if name.endswith(".cu") and not name.endswith("_bench.cu"):
            out[name[: -len(".cu")]] = text
    return out


def thread_variants(sources) -> list[str]:
    names = sorted(n for n in sources if "abft-thread" in n)
    assert len(names) == 3, names
    return names


# ---- thread level: the generated verification, compiled for the host -------------------------------------------

PRELUDE = r"""
#include <math.h>
#include <string.h>
#include <algorithm>
#define __device__
#define __host__
#define __forceinline__ inline
namespace ftgen {
struct FtCounters {
  unsigned long long injected, detected, corrected, uncorrectable, recomputed, max_score_bits, family_counter;
};
inline void record_score(FtCounters* c, double score) {
  if (c == nullptr || !(score >= 0.0)) return;
  unsigned long long bits;
  memcpy(&bits, &score, sizeof bits);
  if (bits > c->max_score_bits) c->max_score_bits = bits;
}
}  // namespace ftgen
// one thread of one warp: atomics are plain adds, a shuffle returns the lane's own value
static inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  const unsigned long long o = *a;
  *a += v;
  return o;
}
template <class X>
static inline X __shfl_xor_sync(unsigned, X v, int) { return v; }
static struct { unsigned x; } threadIdx = {0};
#include "ftgen_rules.h"
"""

DRIVER = r"""
extern "C" {
// One thread's k loop as the kernel runs it: per k, the row checksums of the thread's rows (rc, rcw from the
// sums of its B fragment) and the accumulators; after k-tile `fstep[f]`, fault f adds `foff[f]` to element
// (frow[f], fcol[f]); after every INTERVAL k-tiles and after the last, the kernel's verification statement.
// Returns the rows left to recompute (nonzero: the kernel recomputes the tile); counters: detected, corrected,
// uncorrectable; acc: the accumulators at the end.
unsigned run_thread(const T* A, const T* B, int k, int nf, const int* fstep, const int* frow, const int* fcol,
                    const double* foff, unsigned long long* counters, T* acc_out) {
  ftgen::FtCounters c{};
  Params p{&c, 0.0, 0, TMT, TNT, A, k, B, TNT};  // (a located element's dot product reads A's row and B's column)
  const int kbase = 0, m0 = 0, n0 = 0, wm0 = 0, wn0 = 0, tm = 0, tn = 0;
  T acc[TMT][TNT] = {};
  T rc[TMT] = {}, rcw[TMT] = {};
  unsigned redo_thread = 0;
  const int fidx = -1;
  (void)fidx;
  const int ktiles = (k + KT - 1) / KT;
  for (int kt0 = 0; kt0 < ktiles; kt0 += INTERVAL) {
    const int kend = std::min(kt0 + INTERVAL, ktiles);
    for (int kt = kt0; kt < kend; ++kt) {
      for (int kk = 0; kk < KT; ++kk) {
        const int kg = kt * KT + kk;
        T fa[TMT], fb[TNT];
        for (int i = 0; i < TMT; ++i) fa[i] = kg < k ? A[i * k + kg] : T(0);
        for (int j = 0; j < TNT; ++j) fb[j] = kg < k ? B[kg * TNT + j] : T(0);
        T s = T(0), sw = T(0);
        for (int j = 0; j < TNT; ++j) {
          s += fb[j];
          sw = fma(static_cast<T>(j + 1), fb[j], sw);
        }
        for (int i = 0; i < TMT; ++i) {
          rc[i] = fma(fa[i], s, rc[i]);
          rcw[i] = fma(fa[i], sw, rcw[i]);
        }
        for (int i = 0; i < TMT; ++i)
          for (int j = 0; j < TNT; ++j) acc[i][j] = fma(fa[i], fb[j], acc[i][j]);
      }
      for (int f = 0; f < nf; ++f)
        if (fstep[f] == kt) acc[frow[f]][fcol[f]] = static_cast<T>(acc[frow[f]][fcol[f]] + foff[f]);
    }
    const int k_done = std::min(kend * KT, k);
    VERIFY_STATEMENT
  }
  counters[0] = c.detected, counters[1] = c.corrected, counters[2] = c.uncorrectable;
  for (int i = 0; i < TMT; ++i)
    for (int j = 0; j < TNT; ++j) acc_out[i * TNT + j] = acc[i][j];
  return redo_thread;
}
}
"""


def _one(pattern: str, text: str, what: str, flags=0) -> str:
    found = re.findall(pattern, text, flags)
    assert len(found) == 1, f"{what}: {len(found)} matches in the generated source (the test no longer fits the template)"
    return found[0]


def thread_shim(src: str) -> str:
    """The host translation unit of a thread-level variant's verification, cut from its generated source."""
    t = _one(r"^using T = \w+;", src, "T", re.M)
    dims = _one(r"^constexpr int MT = \d+, NT = \d+, KT = \d+;", src, "MT, NT, KT", re.M)
    tile = _one(r"^constexpr int TMT = \d+, TNT = \d+;", src, "TMT, TNT", re.M)
    names = ("UNIT_ROUNDOFF", "LAMBDA", "FIXED_THRESHOLD", "INTERVAL", "ONLINE")
    consts = [_one(rf"^constexpr \w+ {c} = [^;]*;", src, c, re.M) for c in names]
    rowstats = _one(r"^struct RowStats \{.*?\n\};", src, "RowStats", re.M | re.S)
    start = src.index("__device__ __forceinline__ T abs_(T x)")
    vt = src.index("verify_thread(const Params& p", start)
    end = src.index("\n}\n", vt) + 3
    call = _one(r"^\s*(redo_thread = verify_thread\(.*?\);)", src, "the kernel's verify_thread call", re.M | re.S)
    params = ("struct Params {\n  ftgen::FtCounters* counters;\n  double threshold;\n  int no_correct;\n  int m, n;\n"
              "  const T* A;\n  int lda;\n  const T* B;\n  int ldb;\n};\n"
              "inline int tile_row(int, int, int i) { return i; }\ninline int tile_col(int, int, int j) { return j; }\n")
    body = "\n".join([t, dims, tile, *consts, params, rowstats, src[start:end]])
    return PRELUDE + "namespace {\n" + body + "\n}  // namespace\n" + DRIVER.replace("VERIFY_STATEMENT", call)


def build_thread(src: str, out):
    P = ctypes.POINTER
    i, ull, vp = ctypes.c_int, ctypes.c_ulonglong, ctypes.c_void_p
    sig = {"run_thread": (ctypes.c_uint, [vp, vp, i, i, P(i), P(i), P(i), P(ctypes.c_double), P(ull), vp])}
    return build_shim(thread_shim(src), RULES_DIR, out, sig)


def geometry(src: str) -> dict:
    def val(name):
        return int(_one(rf"\b{name} = (\d+)", src, name))

    prec = np.float64 if "using T = double;" in src else np.float32
    return {"TMT": val("TMT"), "TNT": val("TNT"), "KT": val("KT"), "INTERVAL": val("INTERVAL"), "dt": prec}


def run_thread(lib, geo, A, B, faults):
    """faults: [(k-tile, row, col, offset)]. Returns (rows to recompute, detected, corrected, uncorrectable, acc)."""
    dt = geo["dt"]
    A = np.ascontiguousarray(A, dtype=dt)
    B = np.ascontiguousarray(B, dtype=dt)
    n = len(faults)
    cols = list(zip(*faults)) if faults else [(), (), (), ()]
    ia = lambda x: (ctypes.c_int * max(n, 1))(*x)  # noqa: E731
    counters = (ctypes.c_ulonglong * 3)()
    acc = np.zeros(geo["TMT"] * geo["TNT"], dtype=dt)
    redo = lib.run_thread(A.ctypes.data, B.ctypes.data, A.shape[1], n, ia(cols[0]), ia(cols[1]), ia(cols[2]),
                          (ctypes.c_double * max(n, 1))(*cols[3]), counters, acc.ctypes.data)
    return redo, counters[0], counters[1], counters[2], acc.reshape(geo["TMT"], geo["TNT"])


def check_thread_counting(lib, geo):
    """One thread's tile over 6 verifications: clean; a fault the verification cannot locate (recomputed, counted
    once although it stays in the accumulators through 5 more verifications); a located fault (corrected once);
    both, with a second unlocatable fault in the row already queued for recomputation."""
    rng = np.random.default_rng(3)
    tmt, tnt, per = geo["TMT"], geo["TNT"], geo["INTERVAL"]
    checks = 6
    k = geo["KT"] * per * checks
    A = rng.standard_normal((tmt, k))
    B = rng.standard_normal((k, tnt))
    huge = 1e10 if geo["dt"] == np.float32 else 1e30  # rounds the row sums by far more than the threshold: not locatable
    # clean: nothing detected
    redo, det, cor, unc, clean = run_thread(lib, geo, A, B, [])
    assert (redo, det, cor, unc) == (0, 0, 0, 0)
    # unlocatable fault after k-tile 5: detected at the first verification, the row queued, later ones skip it
    redo, det, cor, unc, _ = run_thread(lib, geo, A, B, [(5, 1, 2, huge)])
    assert redo == 1 << 1, redo
    assert (det, cor, unc) == (1, 0, 1), (det, cor, unc)
    # located fault after k-tile per + 3 (second interval): corrected in place, once
    redo, det, cor, unc, acc = run_thread(lib, geo, A, B, [(per + 3, tmt - 1, 0, 1.0)])
    assert (redo, det, cor, unc) == (0, 1, 1, 0), (redo, det, cor, unc)
    assert abs(float(acc[tmt - 1, 0]) - float(clean[tmt - 1, 0])) < 1e-3 * (1.0 if geo["dt"] == np.float32 else 1e-6)
    # both, and a second unlocatable fault in row 1 (already queued: recomputed with the tile, not counted)
    faults = [(5, 1, 2, huge), (per + 3, tmt - 1, 0, 1.0), (3 * per + 1, 1, tnt - 1, huge)]
    redo, det, cor, unc, _ = run_thread(lib, geo, A, B, faults)
    assert redo == 1 << 1, redo
    assert (det, cor, unc) == (2, 1, 1), (det, cor, unc)
    assert det <= len(faults) and cor + unc == det


@pytest.fixture(scope="module")
def thread_libs(sources, tmp_path_factory):
    return {name: build_thread(sources[name], tmp_path_factory.mktemp(name.replace("-", "_")))
            for name in thread_variants(sources)}


def test_thread_level_counts_each_fault_once(sources, thread_libs):
    for name, lib in thread_libs.items():
        check_thread_counting(lib, geometry(sources[name]))


# planted bugs in the generated thread-level verification: each must fail check_thread_counting
THREAD_MUTANTS = {
    # a row queued for recomputation verified (and counted) again at every later verification
    "recounts_queued_rows": ("    if (flagged & (1u << i)) continue;", "    if (false) continue;"),
    # an unlocatable detection counted but the row not queued: no recomputation
    "queue_dropped": ("      redo |= 1u << i;", "      redo |= 0u;"),
    # the kernel's call drops the rows queued so far
    "queue_forgotten": ("(fidx >= 0 && p.no_correct != 0), redo_thread);", "(fidx >= 0 && p.no_correct != 0), 0u);"),
}


@pytest.mark.parametrize("mutant", sorted(THREAD_MUTANTS))
def test_planted_thread_counting_bugs_fail(mutant, sources, tmp_path):
    name = thread_variants(sources)[0]
    old, new = THREAD_MUTANTS[mutant]
    src = sources[name]
    assert src.count(old) == 1, f"the planted bug {mutant} no longer applies to the generated source"
    lib = build_thread(src.replace(old, new), tmp_path)
    with pytest.raises(AssertionError):
        check_thread_counting(lib, geometry(src))


# ---- non-fused level: the strips it verifies ------------------------------------------------------------------


def _splitmix(x):
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def bench_normal(seed: int, first: int, count: int) -> np.ndarray:
    """ftgen_harness.cuh random_value(seed, i, normal) for i in [first, first + count)."""
    i = np.arange(first, first + count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h1 = _splitmix(np.uint64(seed) * np.uint64(0x632BE59BD9B4E019) + np.uint64(2) * i)
    h2 = _splitmix(h1 ^ (np.uint64(2) * i + np.uint64(1)))
    u = ((h1 >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53
    v = ((h2 >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53
    return np.sqrt(-2.0 * np.log(u)) * np.cos(6.283185307179586 * v)


def test_nonfused_strips_catch_the_fault_whole_rows_missed(sources):
    """H200, gemm_f64_abft-nonfused-i64_64x64x8_w32x32_t4x8_s2_inj at 1000x1234x777 with --inject 16 (seed 20231):
    the fault bit 12 of W[259, 965] after k-tile 59 left 1.508e-14 (1.26x the tolerance) after correction. Its row
    of A and all of B from the bench's generator; the model at the variant's k-tile and interval."""
    name = "gemm_f64_abft-nonfused-i64_64x64x8_w32x32_t4x8_s2_inj"
    src = sources[name]
    assert "constexpr int NF_STRIP = NT;" in src and "constexpr int MT = 64, NT = 64, KT = 8;" in src
    assert "sqrt(static_cast<double>(NF_STRIP))" in src and "classify_row(d, dw, tau, tau_w, NF_STRIP, &col, &score)" in src
    m, n, k, seed, row, col, step, bit = 1000, 1234, 777, 20231, 259, 965, 59, 12
    a = bench_normal(seed * 3 + 1, row * k, k).reshape(1, k)
    B = bench_normal(seed * 3 + 2, 0, k * n).reshape(k, n)
    tol = tolerance.tolerance("fp64", k)
    scale = float(np.abs(a[0]) @ np.abs(B[:, col]))
    exact = float(a[0] @ B[:, col])
    fault = [(step, 0, col, "bitflip", bit)]
    lam = g.abft_lambda("nonfused")

    def err(cols):
        C, cnt = g.abft_gemm_model(a, B, cols=cols, kt=8, interval=64, precision="fp64", faults=fault, lam=lam)
        return abs(float(C[0, col]) - exact) / scale, cnt

    # the C the model builds is the kernel's up to rounding: the uncorrected error is the H200's
    whole, cnt = err(n)
    assert cnt["detected"] == 0
    assert whole == pytest.approx(1.508e-14, rel=2e-3) and whole > tol
    strip, cnt = err(64)
    # detected; too small to locate in a strip of 64 (|d| < 2 tau_w): recomputed (nf_recompute: that row's strip)
    assert (cnt["detected"], cnt["corrected"], cnt["recomputed"]) == (1, 1, 1)
    assert strip <= tol
    # no false alarm on the clean row at either width
    for cols in (64, n):
        _, cnt = g.abft_gemm_model(a, B, cols=cols, kt=8, interval=64, precision="fp64", lam=lam)
        assert cnt["detected"] == 0 and cnt["max_score"] < 0.5
