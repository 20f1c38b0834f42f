"""The ``simt`` backend of ``gemm`` (fp32, fp64): hand-written step-wise SIMT kernels.

Threadblock tiles in shared memory (a cp.async pipeline of ``stages``, A stored transposed with a
padded row), warp tiles, thread tiles in registers (double-buffered fragments), 128-bit loads, any
M, N, K. Protection: ABFT at thread, warp and threadblock level fused into the kernel, and the
non-fused baseline (the rules are modelled in :mod:`.abft_model`).

Kernel names::

    gemm_<prec>_<protection>_<m_tb>x<n_tb>x<k_tb>_w<m_w>x<n_w>_t<m_t>x<n_t>_s<stages>[_sk<split_k>][_mb<min_blocks>][_prepass][_inj]

``<protection>`` is ``none`` or ``abft-<tb|warp|thread|nonfused>[-detect][-i<interval>][-th<threshold>]``;
``_inj`` marks a build with fault injection compiled in.
"""

from __future__ import annotations


from ..base import (
    PRECISION_CTYPE,
    PRECISION_TAG,
    SMEM_PER_BLOCK,
    UNIT_ROUNDOFF,
    Backend,
    Param,
    Protection,
    Source,
    Variant,
    power_of_two,
    tile_multiples,
)
from ...tolerance import context as tolerance_context, tolerance as rule_tolerance
from .abft_model import abft_lambda

PRECISIONS = ("fp32", "fp64")
ABFT_LEVELS = {"threadblock": "tb", "warp": "warp", "thread": "thread", "nonfused": "nonfused"}

PARAMS = (
    Param("m_tb", int, (128,), "threadblock tile rows", check=power_of_two),
    Param("n_tb", int, (128,), "threadblock tile columns", check=power_of_two),
    Param("k_tb", int, (8,), "threadblock tile depth (k-tile)", check=power_of_two),
    Param("m_w", int, (32,), "warp tile rows", check=power_of_two),
    Param("n_w", int, (64,), "warp tile columns", check=power_of_two),
    Param("m_t", int, (8,), "thread tile rows (registers)", check=power_of_two),
    Param("n_t", int, (8,), "thread tile columns (registers)", check=power_of_two),
    Param("split_k", int, (1,), "k-slices per output tile, reduced in order in one launch (serial split-K)", choices=(1, 2, 4, 8, 16, 32)),
    Param("stages", int, (3,), "shared-memory stages of the global->shared pipeline: 2 register-staged, 3..6 cp.async",
          lo=2, hi=6),
    Param("min_blocks", int, (0,), "resident blocks per SM the registers are sized for (__launch_bounds__); 0: auto "
          "(2 when the register estimate allows, else 1)", choices=(0, 1, 2)),
    Param("ref_checksums", str, ("prepass",), "threadblock ABFT: where the reference row checksums A (B e), A (B w) "
          "come from: prepass (a pre-pass kernel; the main loop is the unprotected one; workspace: 16 bytes per row, block "
          "column and verification segment) or fused (carried with the GEMM in the main loop; the other levels' way)",
          choices=("fused", "prepass")),
)

MAX_SMEM = SMEM_PER_BLOCK["sm_90"]  # dynamic shared memory per block (sm_80: less; checked at launch)
MAX_REGS = 255


def tolerance(precision: str, k: int) -> float:
    """Max allowed |C - C_ref|_ij / (|alpha||A||B| + |beta||C|)_ij, as the bench executables compute it: the one
    rule of ``ftgen.tolerance`` for the delivered precision (fp32 or fp64; cuBLAS's result is the reference)."""
    return rule_tolerance(precision, k)


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
        fix = self.MT * (4 + 4 * 8)  # per row: a located fault's column, r_i, rest, threshold, dot product
        if level == "threadblock" and self.ref_prepass:
            # per warp column and row: T s, sw, q, mx; int bad. Per row: the fix, slot in the list of deferred rows
            return self.warps_n * self.MT * (4 * e + 8) + fix + self.MT * 4 + 64
        if level == "threadblock":
            row_lanes = max(1, min(self.KT, self.threads // self.MT)) if self.threads >= self.MT else 1
            return (self.stages * self.KT * 4 * e + 32 + self.MT * (self.NT + 1) * e
                    + row_lanes * self.MT * 3 * e + fix + 64)
        if level == "warp":
            return (self.stages * self.KT * self.warps_n * 4 * e + 32 + warps * self.MW * (4 * e + 4) + warps * 16 + 64)
        return 0


class SimtBackend(Backend):
    name = "simt"
    precisions = PRECISIONS
    levels = {"abft": ABFT_LEVELS}
    params = PARAMS
    requires = ("cublas",)  # the bench executable's reference
    constraint_docs = (
        "simt: m_tb % m_w == 0, n_tb % n_w == 0, m_w % m_t == 0, n_w % n_t == 0",
        "simt: (m_w/m_t) * (n_w/n_t) == 32 (one warp per warp tile)",
        "simt: threads per block = (m_tb/m_w)*(n_tb/n_w)*32 <= 1024",
        "simt: shared memory stages*k_tb*(m_tb+pad+n_tb)*sizeof(T) (+ ABFT scratch) <= 227 KiB",
        "simt: stages 2 (register-staged) to 6 (cp.async); k_tb <= 32",
        "simt: estimated registers per thread <= 255; A and B tiles split evenly over the threads",
        "simt layouts: A, B, C row-major",
    )

    def param_defs(self, precision: str, protection: Protection) -> tuple:
        # threadblock ABFT takes its references from the pre-pass unless a spec says fused: the main loop is then the
        # unprotected one (measured on an H200 at 4096³: fused 1.41x its unprotected tiling, prepass 1.13-1.19x); the
        # other levels carry theirs in the main loop
        if protection.scheme == "abft" and protection.level == "threadblock":
            return self.params
        return tuple(p.with_default("fused") if p.name == "ref_checksums" else p for p in self.params)

    def auto_interval(self, prot: Protection, params) -> int:
        """k-tiles between verifications when a spec names none: the threadblock level verifies once per tile up to
        k = 512 k-tiles (measured on an H100 at 4096³ and 8192³: 0.71-0.80x cuBLAS against 0.13x for a check after
        every k-tile); the other levels every 64 k-tiles (as in the levels' measured comparison)."""
        return 512 if prot.level == "threadblock" else 64

    def constraints(self, v: Variant) -> list[str]:
        g = SimtGeometry(v)
        r = tile_multiples(("m_tb", g.MT, "m_w", g.MW), ("n_tb", g.NT, "n_w", g.NW), ("m_w", g.MW, "m_t", g.mt),
                           ("n_w", g.NW, "n_t", g.nt))
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

    def name_tokens(self, v: Variant) -> list[str]:
        p = v.param_dict
        tokens = [
            "gemm",
            PRECISION_TAG[v.precision],
            self.protection_token(v.protection),
            f"{p['m_tb']}x{p['n_tb']}x{p['k_tb']}",
            f"w{p['m_w']}x{p['n_w']}",
            f"t{p['m_t']}x{p['n_t']}",
            f"s{p.get('stages', 3)}",
        ]
        if p.get("split_k", 1) > 1:
            tokens.append(f"sk{p['split_k']}")
        if p.get("min_blocks", 0):
            tokens.append(f"mb{p['min_blocks']}")
        if ref_prepass(v):
            tokens.append("prepass")  # irrelevant to every other level: not part of their names
        if v.protection.inject:
            tokens.append("inj")
        return tokens

    def context(self, v: Variant) -> dict:
        prot = v.protection
        return {
            **v.common_context(),
            "T": PRECISION_CTYPE[v.precision],
            "unit_roundoff": repr(UNIT_ROUNDOFF[v.precision]),  # the kernel's detection thresholds
            "inject": prot.inject,
            "threshold": 0.0 if prot.threshold == "auto" else float(prot.threshold),
            **tolerance_context(v.precision),
            "abft": prot.scheme == "abft" and prot.level != "nonfused",
            "abft_tb": prot.scheme == "abft" and prot.level == "threadblock",
            "tb_pre": ref_prepass(v),
            "tb_fused": prot.scheme == "abft" and prot.level == "threadblock" and not ref_prepass(v),
            "abft_warp": prot.scheme == "abft" and prot.level == "warp",
            "abft_thread": prot.scheme == "abft" and prot.level == "thread",
            "nonfused": prot.scheme == "abft" and prot.level == "nonfused",
            "abft_lambda": repr(abft_lambda(prot.level)),
            "no_correct_expr": "(fidx >= 0 && p.no_correct != 0)" if prot.inject else "false",
            "g": SimtGeometry(v),
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return (
            Source("variant.h.j2", ".h", "header"),
            Source("simt_variant.cu.j2", ".cu", "library"),
            Source("bench.cu.j2", "_bench.cu", "bench"),
        )
