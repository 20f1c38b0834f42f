"""``gemm``: C = alpha * A @ B + beta * C.

Two backends, chosen by precision and scheme:

* ``simt`` — the step-wise hand-written kernels of seed 000 (fp32, fp64): threadblock tiles in
  shared memory (double buffered, A stored transposed with a padded row), warp tiles, thread tiles
  in registers (double-buffered fragments), 128-bit loads, any M, N, K. Protection: ABFT at
  thread, warp and threadblock level fused into the kernel, and the non-fused baseline.
* ``cutlass`` — CUTLASS tensor-op kernels (tf32, fp16, bf16, fp64) emitted through
  ``cutlass_library``, carrying TMR (seed 004). Implemented in :mod:`ftgen.families.gemm_cutlass`.

Kernel names (the identity of a variant)::

    gemm_<prec>_<protection>_<m_tb>x<n_tb>x<k_tb>_w<m_w>x<n_w>_t<m_t>x<n_t>_s<stages>[_sk<split_k>][_mb<min_blocks>][_prepass][_inj]   (simt)

``<protection>`` is ``none`` or ``<scheme>-<level>[-detect][-i<interval>][-th<threshold>]``
(see :meth:`Protection.token`); ``_inj`` marks a build with fault injection compiled in.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Mapping

from .base import (
    PRECISION_CTYPE,
    PRECISION_TAG,
    SMEM_PER_BLOCK,
    UNIT_ROUNDOFF,
    EmittedVariant,
    Family,
    LauncherSignature,
    Param,
    Protection,
    Variant,
    power_of_two,
)

SIMT_PRECISIONS = ("fp32", "fp64")
CUTLASS_PRECISIONS = ("tf32", "tf32x3", "fp16", "bf16", "fp64")

SIMT_PARAMS = (
    Param("m_tb", int, (128,), "threadblock tile rows", check=power_of_two),
    Param("n_tb", int, (128,), "threadblock tile columns", check=power_of_two),
    Param("k_tb", int, (8,), "threadblock tile depth (k-tile)", check=power_of_two),
    Param("m_w", int, (32,), "warp tile rows", check=power_of_two),
    Param("n_w", int, (64,), "warp tile columns", check=power_of_two),
    Param("m_t", int, (8,), "thread tile rows (registers)", check=power_of_two),
    Param("n_t", int, (8,), "thread tile columns (registers)", check=power_of_two),
    Param("split_k", int, (1,), "k-slices per output tile, reduced in order in one launch (serial split-K)", choices=(1, 2, 4, 8, 16, 32)),
    Param("stages", int, (3,), "shared-memory stages of the cp.async global->shared pipeline", choices=(2, 3, 4, 5, 6)),
    Param("min_blocks", int, (0,), "resident blocks per SM the registers are sized for (__launch_bounds__); 0: auto "
          "(2 when the register estimate allows, else 1)", choices=(0, 1, 2)),
    Param("ref_checksums", str, ("fused",), "threadblock ABFT: where the reference row checksums A (B e), A (B w) come "
          "from: fused (carried with the GEMM in the main loop, the seed's design) or prepass (a pre-pass kernel; the "
          "main loop is the unprotected one; workspace: 16 bytes per row, block column and verification segment)",
          choices=("fused", "prepass")),
)

ABFT_LEVELS = ("threadblock", "warp", "thread", "nonfused")
TMR_LEVELS = ("kernel", "threadblock", "multikernel", "cooperative")

MAX_SMEM = SMEM_PER_BLOCK["sm_90"]  # dynamic shared memory per block (sm_80: less; checked at launch)
# Detection threshold = lambda * u * (sqrt(k) + sqrt(cols) + 1) * scale (README, "Detection threshold").
# lambda sets the false-alarm margin over the rounding noise measured in clean GPU campaigns
# (results/h100/gemm/abft_campaign_trials_*_lambda4.jsonl.gz: 3000 clean trials per kernel, normal / uniform /
# log-uniform inputs, 512x512x1024). Largest clean score (residual / threshold) at lambda 4: 0.32 / 0.30
# (fp32, strips of 128 columns) and 0.39 (fp64, 64 columns), so lambda 2 leaves a margin of 1.3-1.7x
# while catching the significant log-uniform faults that lambda 4 let through. The thread level's scale
# (a tile norm over 8 columns) is noisier: 0.50 at lambda 8, so lambda 6 (margin 1.5x). The warp level
# (strips of 32-64 columns) raised false alarms at lambda 2 for k >= 2048 (results/h100/gemm,
# abft_levels_*_lambda2.jsonl) and none at 4, so it keeps 4.
ABFT_LAMBDA = 2.0
ABFT_LAMBDA_WARP = 4.0
ABFT_LAMBDA_THREAD = 6.0
TOL_C1 = 8.0  # verification tolerance: TOL_C1 * u * sqrt(k) + TOL_C0 * u (see GemmFamily.tolerance)
TOL_C0 = 16.0
MAX_REGS = 255


def _cutlass_backend():
    """The CUTLASS backend module, or None when it is not part of this build of ftgen."""
    try:
        return importlib.import_module(".gemm_cutlass", __package__)
    except ModuleNotFoundError as e:  # pragma: no cover - only while the backend is absent
        if e.name and e.name.endswith("gemm_cutlass"):
            return None
        raise


def _either(a: Param, b: Param) -> Param:
    """A parameter two backends share: valid when valid for either (each backend re-checks)."""
    choices = tuple(dict.fromkeys((a.choices or ()) + (b.choices or ()))) if a.choices and b.choices else None

    def check(v, a=a, b=b):
        ra, rb = a.validate(v), b.validate(v)
        return None if ra is None or rb is None else ra

    return Param(a.name, a.type, a.default, f"{a.doc} (SIMT) / {b.doc} (CUTLASS)", None, check if not choices else None) if not choices else Param(
        a.name, a.type, a.default, f"{a.doc} (SIMT) / {b.doc} (CUTLASS)", choices, None)


def ref_prepass(v: Variant) -> bool:
    """Threadblock ABFT whose reference checksums come from the pre-pass kernels (ref_checksums: prepass)."""
    return (v.protection.scheme == "abft" and v.protection.level == "threadblock"
            and v.get("ref_checksums", "fused") == "prepass")


class SimtGeometry:
    """Derived quantities of a SIMT variant, shared by constraints and templates."""

    def __init__(self, v: Variant):
        self.elem_bytes = 8 if v.precision == "fp64" else 4
        self.vec = 16 // self.elem_bytes  # elements per 128-bit access
        p = v.param_dict
        self.MT, self.NT, self.KT = p["m_tb"], p["n_tb"], p["k_tb"]
        self.MW, self.NW, self.mt, self.nt = p["m_w"], p["n_w"], p["m_t"], p["n_t"]
        self.split_k = p.get("split_k", 1)
        self.warps_m = self.MT // self.MW if self.MW else 0
        self.warps_n = self.NT // self.NW if self.NW else 0
        self.threads = self.warps_m * self.warps_n * 32
        self.TM = self.MW // self.mt if self.mt else 0  # threads of a warp along m
        self.TN = self.NW // self.nt if self.nt else 0  # threads of a warp along n
        self.VM = min(self.vec, self.mt)  # fragment vector widths
        self.VN = min(self.vec, self.nt)
        self.VA = min(self.vec, self.KT)  # global load vector widths (A along k, B along n)
        self.VB = min(self.vec, self.NT)
        self.pad_a = self.vec  # one 16-byte vector of padding per As row
        self.stages = p.get("stages", 3)
        level = v.protection.level if v.protection.scheme == "abft" else None
        self.ref_prepass = ref_prepass(v)
        self.smem_bytes = self.stages * self.KT * (self.MT + self.pad_a + self.NT) * self.elem_bytes + self._abft_smem(level)
        words = self.elem_bytes // 4
        # accumulators + two fragment buffers + checksums (+ staging registers), in 32-bit registers, plus
        # addressing overhead
        extra = {"threadblock": 0 if self.ref_prepass else 3, "warp": 3 * max(1, self.MW // 32), "thread": 2 * self.mt}.get(level, 0)
        staging = (self.MT * self.KT + self.KT * self.NT) // max(self.threads, 1) if self.stages == 2 else 0
        self.regs_estimate = words * (self.mt * self.nt + 2 * (self.mt + self.nt) + extra + staging) + 40
        # aim for two resident blocks of up to 256 threads when the accumulators leave room
        auto = 2 if self.threads and self.threads <= 256 and self.regs_estimate <= 150 else 1
        self.min_blocks = p.get("min_blocks", 0) or auto

    def _abft_smem(self, level) -> int:
        """An upper bound of what sizeof(Smem) adds to the stages for ABFT."""
        e, warps = self.elem_bytes, max(self.threads // 32, 1)
        if level == "threadblock" and self.ref_prepass:
            # per warp column and row: T s, sw, q, mx; int bad. Per row: fix column, r_i, rest, slot in the
            # list of deferred rows
            return self.warps_n * self.MT * (4 * e + 8) + self.MT * (4 + 16 + 4) + 64
        if level == "threadblock":
            row_lanes = max(1, min(self.KT, self.threads // self.MT)) if self.threads >= self.MT else 1
            return (self.stages * self.KT * 4 * e + 32 + self.MT * (self.NT + 1) * e
                    + row_lanes * self.MT * 3 * e + 64)
        if level == "warp":
            return (self.stages * self.KT * self.warps_n * 4 * e + 32 + warps * self.MW * (4 * e + 4) + warps * 8 + 64)
        return 0

    def as_dict(self) -> dict:
        return {k: v for k, v in vars(self).items()}


class GemmFamily(Family):
    name = "gemm"
    description = "C = alpha*A@B + beta*C; SIMT kernels (seed 000) with fused ABFT, CUTLASS tensor-op kernels with TMR (seed 004)"
    shape_keys = ("m", "n", "k")
    precisions = ("fp32", "fp64", "tf32", "tf32x3", "fp16", "bf16")
    schemes = {"none": (), "abft": ABFT_LEVELS, "tmr": TMR_LEVELS}
    default_shapes = ({"m": 4096, "n": 4096, "k": 4096}, {"m": 1000, "n": 1234, "k": 777})
    campaign_shape = {"m": 512, "n": 512, "k": 1024}  # many trials: small enough, K deep enough
    reference_lib = "cublas"
    template_dir = "gemm"

    # ---- backends -------------------------------------------------------------------------
    def backend(self, precision: str, protection: Protection, params: Mapping[str, Any]) -> str:
        if precision in SIMT_PRECISIONS and protection.scheme != "tmr" and params.get("backend", "simt") == "simt":
            return "simt"
        return "cutlass"

    def _cutlass(self):
        mod = _cutlass_backend()
        return mod

    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        if self.backend(precision, protection, {}) == "simt":
            return SIMT_PARAMS
        mod = self._cutlass()
        if mod is None:
            return SIMT_PARAMS
        return mod.param_defs(precision, protection) if hasattr(mod, "param_defs") else mod.PARAMS

    def all_param_defs(self) -> dict[str, Param]:
        """Every parameter of both backends. A name both use (stages) is accepted when either backend
        accepts the value; the backend's own constraints then judge it for its variants."""
        out = {p.name: p for p in SIMT_PARAMS}
        mod = self._cutlass()
        if mod:
            for p in mod.PARAMS:
                if p.name in out and out[p.name] is not p:
                    out[p.name] = _either(out[p.name], p)
                else:
                    out.setdefault(p.name, p)
        return out

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        reason = super().protection_ok(precision, protection)
        if reason:
            return reason
        if precision not in SIMT_PRECISIONS or protection.scheme == "tmr":
            mod = self._cutlass()
            if mod is None:
                return f"the CUTLASS backend ({precision}, tmr) is not available in this build"
            return mod.protection_ok(precision, protection)
        return None

    # ---- constraints ----------------------------------------------------------------------
    def constraints(self, v: Variant) -> list[str]:
        if v.backend == "cutlass":
            return self._cutlass().constraints(v)
        g = SimtGeometry(v)
        r: list[str] = []
        if g.MT % g.MW:
            r.append(f"m_tb={g.MT} is not a multiple of m_w={g.MW}")
        if g.NT % g.NW:
            r.append(f"n_tb={g.NT} is not a multiple of n_w={g.NW}")
        if g.MW % g.mt:
            r.append(f"m_w={g.MW} is not a multiple of m_t={g.mt}")
        if g.NW % g.nt:
            r.append(f"n_w={g.NW} is not a multiple of n_t={g.nt}")
        if r:
            return r
        if g.TM * g.TN != 32:
            r.append(
                f"a warp tile of {g.MW}x{g.NW} with thread tiles {g.mt}x{g.nt} has {g.TM * g.TN} threads, not 32 "
                f"((m_w/m_t)*(n_w/n_t) must be 32)"
            )
        if g.stages not in (2, 3, 4, 5, 6):
            r.append(f"stages={g.stages}: the SIMT kernels take 2 (register staging) to 6 (cp.async)")
        if v.get("ref_checksums", "fused") == "concurrent":
            r.append("ref_checksums: concurrent is a CUTLASS-backend design (backend: cutlass); the SIMT kernels take fused or prepass")
        if g.threads > 1024:
            r.append(f"{g.threads} threads per block (more than 1024)")
        if g.smem_bytes > MAX_SMEM:
            r.append(f"needs {g.smem_bytes} bytes of shared memory (more than {MAX_SMEM})")
        if g.regs_estimate > MAX_REGS:
            r.append(f"needs about {g.regs_estimate} registers per thread (more than {MAX_REGS}); use a smaller thread tile")
        if g.mt * g.nt > 128 // (g.elem_bytes // 4):
            r.append(f"thread tile {g.mt}x{g.nt} holds too many accumulators for {v.precision}")
        if g.threads and g.KT * g.NT // g.VB < 1:
            r.append("the B tile is smaller than one vector")
        if v.protection.scheme == "abft":
            r.extend(self._abft_constraints(v, g))
        return r

    def _abft_constraints(self, v: Variant, g: SimtGeometry) -> list[str]:
        r = []
        lv = v.protection.level
        if lv == "warp" and g.MW < 32 and (32 // g.MW) > g.KT:
            r.append(f"warp ABFT: m_w={g.MW} leaves {32 // g.MW} k-lanes per row, more than k_tb={g.KT}")
        if lv == "nonfused" and v.protection.correct != "online":
            r.append("nonfused ABFT corrects online only (detect-and-recompute would need a checkpoint of C per step)")
        if g.KT > 32:
            r.append(f"k_tb={g.KT} is more than 32")
        return r

    def constraint_docs(self) -> list[str]:
        return [
            "simt: m_tb % m_w == 0, n_tb % n_w == 0, m_w % m_t == 0, n_w % n_t == 0",
            "simt: (m_w/m_t) * (n_w/n_t) == 32 (one warp per warp tile)",
            "simt: threads per block = (m_tb/m_w)*(n_tb/n_w)*32 <= 1024",
            "simt: shared memory stages*k_tb*(m_tb+pad+n_tb)*sizeof(T) (+ ABFT scratch) <= 227 KiB",
            "simt: stages 2 (register-staged) to 6 (cp.async); k_tb <= 32",
            "simt: estimated registers per thread <= 255; A and B tiles split evenly over the threads",
            "simt layouts: A, B, C row-major",
        ] + list(getattr(self._cutlass(), "CONSTRAINT_DOCS", []))

    # ---- names ----------------------------------------------------------------------------
    def kernel_name(self, v: Variant) -> str:
        if v.backend == "cutlass":
            return self._cutlass().kernel_name(v)
        p = v.param_dict
        name = (
            f"gemm_{PRECISION_TAG[v.precision]}_{v.protection.token()}_"
            f"{p['m_tb']}x{p['n_tb']}x{p['k_tb']}_w{p['m_w']}x{p['n_w']}_t{p['m_t']}x{p['n_t']}"
        )
        name += f"_s{p.get('stages', 3)}"
        if p.get("split_k", 1) > 1:
            name += f"_sk{p['split_k']}"
        if p.get("min_blocks", 0):
            name += f"_mb{p['min_blocks']}"
        if ref_prepass(v):
            name += "_prepass"  # irrelevant to every other level: not part of their names
        return name + ("_inj" if v.protection.inject else "")

    # ---- emission -------------------------------------------------------------------------
    def work(self, shape: Mapping[str, int]) -> float:
        return 2.0 * shape["m"] * shape["n"] * shape["k"]

    def template_context(self, v: Variant) -> dict:
        prot = v.protection
        return {
            "v": v,
            "name": v.name,
            "sym": v.symbol,
            "T": PRECISION_CTYPE[v.precision],
            "precision": v.precision,
            "unit_roundoff": repr(UNIT_ROUNDOFF[v.precision]),
            "prot": prot,
            "inject": prot.inject,
            "threshold": 0.0 if prot.threshold == "auto" else float(prot.threshold),
            "meta_json": v.meta_json(),
            "tol_c1": TOL_C1,
            "tol_c0": TOL_C0,
            "abft": prot.scheme == "abft" and prot.level != "nonfused",
            "abft_tb": prot.scheme == "abft" and prot.level == "threadblock",
            "tb_pre": ref_prepass(v),
            "tb_fused": prot.scheme == "abft" and prot.level == "threadblock" and not ref_prepass(v),
            "abft_warp": prot.scheme == "abft" and prot.level == "warp",
            "abft_thread": prot.scheme == "abft" and prot.level == "thread",
            "nonfused": prot.scheme == "abft" and prot.level == "nonfused",
            "abft_lambda": repr(abft_lambda(prot.level)),
            "no_correct_expr": "(fidx >= 0 && p.no_correct != 0)" if prot.inject else "false",
        }

    def emit(self, v: Variant, env, shapes: list[dict] | None = None) -> EmittedVariant:
        if v.backend == "cutlass":
            return self._cutlass().emit(self, v, env, shapes)
        g = SimtGeometry(v)
        ctx = self.template_context(v)
        ctx["g"] = g
        ctx["default_shapes"] = self.default_shapes_arg(v, shapes)
        d = v.name
        files = {
            f"{d}/{d}.h": env.render("gemm/variant.h.j2", ctx),
            f"{d}/{d}.cu": env.render("gemm/simt_variant.cu.j2", ctx),
            f"{d}/{d}_bench.cu": env.render("gemm/bench.cu.j2", ctx),
        }
        return EmittedVariant(
            name=d,
            files=files,
            library_sources=[f"{d}/{d}.cu"],
            bench_sources=[f"{d}/{d}_bench.cu"],
            header=f"{d}/{d}.h",
            link_libraries=["CUDA::cublas"],
            compile_options=["-Xptxas=-warn-spills"] if False else [],
        )

    def launcher_signature(self, v: Variant) -> LauncherSignature:
        return LauncherSignature(
            params="const ftgen_gemm_problem* p, cudaStream_t stream",
            args="p, stream",
            selector_args=("p->m", "p->n", "p->k"),
        )

    def tolerance(self, precision: str, k: int) -> float:
        """Max allowed |C - C_ref|_ij / (|alpha||A||B| + |beta||C|)_ij (the bench executables use the
        same rule): the probabilistic rounding-error bound lambda*sqrt(k)*u of Higham & Mary for
        both this kernel and cuBLAS, with lambda = TOL_C1, plus a few roundoffs for the epilogue."""
        u = UNIT_ROUNDOFF[precision]
        return TOL_C1 * u * math.sqrt(max(k, 1)) + TOL_C0 * u


# ================================================================================================
# CPU model of the ABFT scheme (NumPy). The CUDA kernels implement exactly these rules; the tests
# prove them here on injected faults, and the GPU campaigns check the kernels against the same
# expectations.
#
#   encode   per k row and checksum strip of `cols` columns: B e, B w (w = 1..cols), B^2 e
#   carry    r_i += a_ik (B e)_k, r'_i += a_ik (B w)_k, r2_i += a_ik^2 (B^2 e)_k with the GEMM
#   verify   d = sum_j C_ij - r_i, dw = sum_j w_j C_ij - r'_i against thresholds
#            tau = LAMBDA u (sqrt(k) + sqrt(cols) + 1) max(sqrt(r2_i), |r_i|, ||C_i||_2 w/o its max)
#            tau_w = max(tau * rms(w), LAMBDA u (...) |r'_i|)
#   locate   only with certainty: |d| > 2 tau_w, j = rint(dw / d) in 1..cols, |dw - j d| <= tau_w
#   correct  C_ij = r_i - sum_{l != j} C_il; any other detection: recompute the tile (ref_checksums:
#            prepass verifying once, no split-K: the detected rows, by a kernel after the GEMM)
#
# ref_checksums: prepass (threadblock level) computes r, r', r2 in pre-pass kernels instead of carrying
# them with the GEMM: per split-K slice, verification segment (INTERVAL k-tiles) and sub-slice of at most
# REF_SUB_K elements of k a product in the variant's precision, then cumulative sums over the slice's
# segments in double (abft_prepass_reference); the verification compares against those.
# ================================================================================================

import numpy as _np  # noqa: E402


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
    rms_w = math.sqrt((cols + 1.0) * (2.0 * cols + 1.0) / 6.0)
    return max(tau * rms_w, unit * abs(float(rw)))


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


def abft_verify_rows(C, r, rw, r2, k_done: int, precision: str, lam: float = ABFT_LAMBDA):
    """Verify the rows of one checksum strip C (rows x cols). Returns [(row, kind, col), ...] for
    every row that is not clean, and the largest score (residual / threshold)."""
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
        best = max(best, abs(d) / tau if tau > 0 else 0.0, abs(dw) / tau_w if tau_w > 0 else 0.0)
        kind, col = abft_classify(d, dw, tau, tau_w, cols)
        if kind:
            out.append((i, kind, col))
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
                    recompute: str = "tile", fault_at: str = "step"):
    """Simulate the protected GEMM C = A @ B tile by tile in the variant's precision.

    cols: columns of one checksum strip (threadblock: n_tb, warp: n_w, thread: n_t);
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
    Returns (C, counters) with counters detected / corrected / recomputed / uncorrectable / max_score.
    """
    if recompute not in ("tile", "row"):
        raise ValueError(f"recompute must be 'tile' or 'row', not {recompute!r}")
    if fault_at not in ("step", "start"):
        raise ValueError(f"fault_at must be 'step' or 'start', not {fault_at!r}")
    dt = _np.float64 if precision == "fp64" else _np.float32
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
    counters = {"detected": 0, "corrected": 0, "recomputed": 0, "uncorrectable": 0, "max_score": 0.0}

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
                    found, score = abft_verify_rows(blk, rr[:, t], rrw[:, t], rr2[:, t], k_done, precision, lam)
                    counters["max_score"] = max(counters["max_score"], score)
                    for (i, kind, col) in found:
                        counters["detected"] += 1
                        if no_correct:
                            continue
                        if kind == 3 and online:
                            counters["uncorrectable"] += 1
                        if online and kind == 1:
                            rest = _np.delete(blk[i].astype(_np.float64), col)
                            others = float(rest.sum())
                            blk[i, col] = dt(float(rr[i, t]) - others)
                            counters["corrected"] += 1
                        elif recompute == "row":
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
