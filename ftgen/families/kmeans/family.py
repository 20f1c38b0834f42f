"""The ``kmeans`` family: Lloyd iterations with the distance GEMM on the tensor cores.

Three backends share the template (``templates/kmeans/kmeans_variant.cu.j2``) and the norms, checks and convergence:

* ``mma`` (the default): hand-written ``mma.sync`` kernels, every precision and protection (below);
* ``cutlass90`` (``params: {backend: cutlass90}``, arch ``sm_90a``, tf32 or tf32x3, protection none or abft
  threadblock): the assign step is a CUTLASS 3.x sm90 GEMM (TMA loads, TF32 wgmma, warp-specialized cooperative or
  ping-pong kernel, persistent tile scheduler) whose epilogue takes the arg-min on the accumulator registers; protected,
  the same GEMM computes the reference checksums in 8 extra columns per tile and the epilogue checks every row before the
  arg-min (``templates/kmeans/kmeans90.cuh``, the model ``model.assign90``); tf32x3 splits both operands over a tripled K
  (x_lo c_hi + x_hi c_lo + x_hi c_hi; X split in registers as the mainloop loads it, the centroids packed per iteration)
  and promotes the accumulators every four k-tiles; tf32 with ``refine: true`` relabels near ties by exact distances
  (``model.refine_assign``);
* ``fused`` (``params: {backend: fused}``, tf32, dims <= 32, protection none or abft threadblock with ``correct:
  detect``): one pass over X per iteration -- norms, ``mma.sync`` distances against the centroids held as fragments
  in shared memory, the arg-min and the cluster sums as exact fixed-point integers (:class:`FusedBackend`; the model
  ``model.fx_update`` and ``model.argmin_checks``); tf32 with ``refine: true`` as cutlass90's, a relabelled sample
  moved between the cluster sums (the model ``model.refine_assign(backend="fused")``).

One Lloyd iteration is a chain of launches on one stream (``templates/kmeans/kmeans_variant.cu.j2``):
centroid norms and tile encodings, **assign** (the distance GEMM on the tensor cores, ``mma.sync``
m16n8k8 TF32 for ``tf32``/``tf32x3`` and m8n8k4 FP64 for ``fp64``, with the arg-min fused into its
epilogue, looping over centroid tiles; the distance matrix is never written), **update** (the samples
sorted by label, cluster sums in fp64 by work items in a fixed order, integer counts, then the new centroids;
empty clusters keep theirs) and the
convergence test (the largest centroid shift, decided on the device: once converged every later launch
of the loop returns at once).

Kernel names::

    kmeans_<prec>_<protection>_<m_tb>x<n_tb>x<k_tb>_w<m_w>x<n_w>[_mb<min_blocks>][_inj]       (mma)
    kmeans_<prec>_<protection>_cutlass90_<tile_m>x<tile_n>x<tile_k>_c<cluster_m>x1_<schedule>[_refine][_inj] (cutlass90)
    kmeans_<prec>_<protection>_fused_s<strip>_w<warps>[_refine][_inj]                             (fused)

``<protection>`` is ``none`` or ``abft-<tb|warp>[-detect][-th<threshold>]`` (``warp``: the mma backend's per-thread
fragment checksums, the paper's warp level, ``warp_model.verify_warp``); ``_inj`` marks a build with fault
injection compiled in. The rules of the protection are modelled in :mod:`.model`.
"""

from __future__ import annotations

import dataclasses

from ...errors import SpecError
from ..gemm import abft_model
from ..base import (
    SMEM_PER_SM,
    PRECISION_CTYPE,
    PRECISION_TAG,
    SMEM_PER_BLOCK,
    UNIT_ROUNDOFF,
    Backend,
    Family,
    LauncherSignature,
    LibraryEntry,
    Param,
    Protection,
    Source,
    Variant,
    power_of_two,
    tile_multiples,
)
from . import model, warp_model

PRECISIONS = ("tf32", "tf32x3", "fp64")
ABFT_LEVELS = {"threadblock": "tb"}
# the mma backend also offers the per-thread fragment checksums of the paper's warp level (warp_model.verify_warp)
MMA_ABFT_LEVELS = {"threadblock": "tb", "warp": "warp"}
# the tensor-core instruction of each precision: (M, N, K)
MMA_SHAPE = {"tf32": (16, 8, 8), "tf32x3": (16, 8, 8), "fp64": (8, 8, 4)}

PARAMS = (
    Param("m_tb", int, (128,), "samples per threadblock tile", check=power_of_two, lo=16, hi=256),
    Param("n_tb", int, (64,), "centroids per tile (one tile of the loop over centroids; the checksum strip)",
          check=power_of_two, lo=8, hi=256),
    Param("k_tb", int, (32,), "dimensions per k-tile of the shared-memory pipeline", check=power_of_two, lo=4, hi=64),
    Param("m_w", int, (64,), "warp tile rows (samples)", check=power_of_two, lo=8, hi=128),
    Param("n_w", int, (32,), "warp tile columns (centroids)", check=power_of_two, lo=8, hi=128),
    Param("min_blocks", int, (0,), "resident assign blocks per SM the registers are capped for (0: the compiler's "
          "choice; named _mb<N>)", lo=0, hi=16),
)
FP64_DEFAULTS = {"m_tb": 64, "n_tb": 64, "k_tb": 16, "m_w": 32, "n_w": 32, "min_blocks": 0}
MAX_ACC_REGS = 128  # accumulator registers per thread (32-bit words)
STAGES = 2  # cp.async double buffering


class Geometry:
    """Derived quantities of a variant, shared by the constraints and the templates."""

    def __init__(self, v: Variant):
        p = v.param_dict
        self.MT, self.NT, self.KT, self.MW, self.NW = p["m_tb"], p["n_tb"], p["k_tb"], p["m_w"], p["n_w"]
        self.min_blocks = p.get("min_blocks", 0)
        self.mma_m, self.mma_n, self.mma_k = MMA_SHAPE[v.precision]
        self.elem_bytes = 8 if v.precision == "fp64" else 4
        self.vec = 16 // self.elem_bytes
        self.warps_m = self.MT // self.MW if self.MW else 0
        self.warps_n = self.NT // self.NW if self.NW else 0
        self.warps = self.warps_m * self.warps_n
        self.threads = self.warps * 32
        self.FM = self.MW // self.mma_m
        self.FN = self.NW // self.mma_n
        self.acc_per_frag = self.mma_m * self.mma_n // 32
        self.acc_words = self.FM * self.FN * self.acc_per_frag * (self.elem_bytes // 4)
        self.pad = 4  # elements of padding per shared-memory row (conflict-free fragment loads)
        self.ld = self.KT + self.pad
        self.rows_per_thread = -(-self.MT // max(self.threads, 1))
        # the threadblock level's encodings and row sums live in shared memory; the warp level's checksums in registers
        tb = v.protection.scheme == "abft" and v.protection.level == "threadblock"
        self.smem_bytes = (
            STAGES * (self.MT + self.NT) * self.ld * self.elem_bytes  # tiles
            + (STAGES * 2 * self.mma_n * self.ld * self.elem_bytes if tb else 0)  # the group's encodings' k-tiles
            + (2 * self.warps_n * self.MT * self.elem_bytes + self.MT * self.elem_bytes + self.MT * 4
               + 4 * self.MT * self.elem_bytes if tb else 0)  # verification
            + self.warps_n * self.MT * (self.elem_bytes + 4) + self.MT * (self.elem_bytes + 4)  # arg-min
            + 16
        )


def template_context(v: Variant) -> dict:
    """What both backends' template (kmeans_variant.cu.j2) reads of a variant, besides the backend's own keys."""
    prot = v.protection
    abft = prot.scheme == "abft"
    return {
        **v.common_context(),
        "T": PRECISION_CTYPE[v.precision],
        "unit_roundoff": repr(UNIT_ROUNDOFF[v.precision]),
        "abft": abft,
        "warp": abft and prot.level == "warp",
        "warp_u": repr(warp_model.WARP_U[v.precision]),
        "detect": abft and prot.correct == "detect",
        "inject": prot.injects,
        "threshold": 0.0 if prot.threshold == "auto" else float(prot.threshold),
        "lam": repr(model.LAMBDA),
        "tf32": v.precision in ("tf32", "tf32x3"),
        "tf32x3": v.precision == "tf32x3",
        "refine": False,
    }


def template_sources(v: Variant) -> tuple[Source, ...]:
    """Both backends' sources. A protected variant's benchmark also compiles its unprotected twin (the same template with
    protection none, in a translation unit of its own: the template specializes the kernels on protection at file level)."""
    twin = (Source("kmeans_twin.cu.j2", "_twin.cu", "bench"),) if v.protection.enabled else ()
    return (
        Source("variant.h.j2", ".h", "header"),
        Source("kmeans_variant.cu.j2", ".cu", "library"),
        Source("bench.cu.j2", "_bench.cu", "bench"),
    ) + twin


class MmaBackend(Backend):
    name = "mma"
    precisions = PRECISIONS
    levels = {"abft": MMA_ABFT_LEVELS}
    params = PARAMS
    requires = ("cublas",)  # the bench executable's vendor reference (cuBLAS SGEMM Lloyd iteration)
    constraint_docs = (
        "mma: m_tb % m_w == 0, n_tb % n_w == 0; m_w a multiple of the MMA M (16 tf32, 8 fp64), n_w of 8",
        "mma: k_tb a multiple of the MMA K (8 tf32, 4 fp64)",
        "mma: threads per block = (m_tb/m_w)*(n_tb/n_w)*32 in 32..1024",
        f"mma: accumulators per thread <= {MAX_ACC_REGS} registers",
        "mma: shared memory 2*(m_tb+n_tb)*(k_tb+4)*sizeof(T) (+ checksum and arg-min scratch) <= the arch's limit",
    )

    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        if precision == "fp64":
            return tuple(p.with_default(FP64_DEFAULTS[p.name]) for p in self.params)
        return self.params

    def constraints(self, v: Variant) -> list[str]:
        g = Geometry(v)
        r = tile_multiples(("m_tb", g.MT, "m_w", g.MW), ("n_tb", g.NT, "n_w", g.NW),
                           ("m_w", g.MW, f"the {v.precision} MMA's M", g.mma_m), ("n_w", g.NW, "the MMA's N", g.mma_n),
                           ("k_tb", g.KT, f"the {v.precision} MMA's K", g.mma_k))
        if r:
            return r
        if not 32 <= g.threads <= 1024:
            r.append(f"{g.threads} threads per block ((m_tb/m_w)*(n_tb/n_w)*32 must be 32..1024)")
        if g.acc_words > MAX_ACC_REGS:
            r.append(f"a warp tile of {g.MW}x{g.NW} needs {g.acc_words} accumulator registers per thread (at most {MAX_ACC_REGS})")
        limit = min(SMEM_PER_BLOCK[a] for a in v.arch) if v.arch else SMEM_PER_BLOCK["sm_90"]
        if g.smem_bytes > limit:
            r.append(f"needs {g.smem_bytes} bytes of shared memory (more than {limit} on {', '.join(v.arch)})")
        if g.min_blocks and g.min_blocks * g.threads > 2048:
            r.append(f"min_blocks={g.min_blocks} blocks of {g.threads} threads exceed the 2048 resident threads of an SM")
        if g.min_blocks and g.min_blocks * g.smem_bytes > SMEM_PER_SM["sm_90"]:
            r.append(f"min_blocks={g.min_blocks} blocks of {g.smem_bytes} bytes of shared memory do not fit in one SM")
        if v.protection.interval != 1:
            r.append("interval: the kmeans ABFT verifies once per centroid tile (interval 1)")
        return r

    def name_tokens(self, v: Variant) -> list[str]:
        p = v.param_dict
        tokens = [
            "kmeans",
            PRECISION_TAG[v.precision],
            self.protection_token(v.protection),
            f"{p['m_tb']}x{p['n_tb']}x{p['k_tb']}",
            f"w{p['m_w']}x{p['n_w']}",
        ]
        if p.get("min_blocks"):
            tokens.append(f"mb{p['min_blocks']}")
        if v.protection.inject:
            tokens.append("inj")
        return tokens

    def context(self, v: Variant) -> dict:
        return {
            **template_context(v),
            "g": Geometry(v),
            "c90": False,
            "fused": False,
            # the unprotected twin's geometry (the benchmark's alternate timing: kmeans_twin.cu.j2)
            "twin_g": Geometry(dataclasses.replace(v, protection=Protection())),
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return template_sources(v)


# ---- cutlass90: the assign step as a CUTLASS 3.x sm90 GEMM ------------------------------------------------------------
ARCH90 = "sm_90a"
SCHEDULES90 = ("ws-coop", "ws-pingpong")
PARAMS90 = (
    Param("backend", str, ("cutlass90",), "selects this backend (the assign GEMM on CUTLASS 3.x sm90 kernels, arch sm_90a)",
          choices=("cutlass90",)),
    Param("tile_m", int, (128,), "samples per CTA tile (ws-coop: 128 or 256; ws-pingpong: 64 or 128)", choices=(64, 128, 256)),
    Param("tile_n", int, (128,), "columns per CTA tile (a wgmma N, a multiple of 32: the TMA's B tiles): centroids, or with "
          "abft tile_n - 8 centroids and the check's 8 columns of references", choices=(64, 96, 128, 160, 192, 224, 256)),
    Param("tile_k", int, (32,), "dimensions per pipeline stage (x 4 bytes: 64 or 128 bytes)", choices=(16, 32)),
    Param("cluster_m", int, (1,), "thread-block cluster rows (CTAs sharing the centroid tile by TMA multicast)", choices=(1, 2)),
    Param("schedule", str, ("ws-coop",), "kernel schedule: warp-specialized cooperative or ping-pong", choices=SCHEDULES90),
    Param("refine", bool, (False,), "tf32: near ties refined -- a sample whose two nearest tf32 distances lie within their "
          "rounding band takes the nearer of the two by exact (fp64) distances, and the inertia comes from the update's "
          "sums (named _refine)"),
)
MAX_ACC90 = 128  # fp32 accumulators per consumer thread
# tf32x3 promotes the wgmma's partial sums every four k-tiles into a second set of fp32 registers (the wgmma's accumulation
# truncates: its error grows like the number of k-steps, which the tripled K multiplies by 3): both sets in 192
# registers, as the gemm backend's promoted kernels (gemm/cutlass90.py, MAX_PROMOTED_ACC)
MAX_PROMOTED_ACC90 = 96


ENC90 = 8  # the check's columns per GEMM tile: hi and lo of s_t and w_t, four zero columns (a wgmma N is a multiple of 8)
# (a tile of 128 centroids and 8 such columns would be a wgmma N of 136, but CUTLASS's TMA tiles of B need a multiple of
# 32 columns: the protected tile gives up 8 of its tile_n columns instead)


class Cutlass90Backend(Backend):
    name = "cutlass90"
    precisions = ("tf32", "tf32x3")
    levels = {"abft": ABFT_LEVELS}
    params = PARAMS90
    requires = ("cublas", "cutlass")  # cuBLAS: the bench executable's vendor reference
    # (without NDEBUG ptxas serializes the wgmma pipeline; the extended shapes: the wgmma N of 72 or 136 columns that a
    # checked tile of 64 or 128 centroids and its 8 columns of references need)
    compile_options = ("-DNDEBUG", "-Xptxas=-warn-spills", "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED")
    constraint_docs = (
        "cutlass90: chosen by params backend: cutlass90; arch sm_90a only; precision tf32 or tf32x3 (the operands split "
        "over a tripled K, X split in registers, the accumulators promoted every four k-tiles); protection none or abft "
        "threadblock (interval 1)",
        "cutlass90: ws-coop tile_m 128 or 256, ws-pingpong tile_m 64 or 128; fp32 accumulators per consumer thread "
        f"(tile_m/2 (ws-coop) or tile_m) x tile_n / 128 <= {MAX_ACC90} (tf32x3: <= {MAX_PROMOTED_ACC90}, tile_k 32); abft: "
        f"tile_n - {ENC90} centroids per tile",
    )

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        if precision not in self.precisions:
            return (f"the kmeans cutlass90 backend takes precision tf32 or tf32x3, not {precision} (fp64: the mma backend, "
                    f"without params backend)")
        if protection.enabled and protection.scheme != "abft":
            return (f"the kmeans cutlass90 backend takes protection none or abft, not {protection.scheme} (omit params "
                    f"backend for the mma kernels)")
        return super().protection_ok(precision, protection)

    def constraints(self, v: Variant) -> list[str]:
        reason = self.protection_ok(v.precision, v.protection)
        if reason:
            return [reason]
        if tuple(v.arch) != (ARCH90,):
            return [f"arch {', '.join(v.arch)}: the kmeans cutlass90 backend builds for sm_90a only (wgmma exists only "
                    f"there); write arch: [sm_90a], or omit params backend for the mma kernels"]
        p = v.param_dict
        tm, tn, sched = p["tile_m"], p["tile_n"], p["schedule"]
        r = []
        allowed = (128, 256) if sched == "ws-coop" else (64, 128)
        if tm not in allowed:
            r.append(f"tile_m={tm}: the {sched} schedule takes tile_m {' or '.join(map(str, allowed))}")
        if v.protection.scheme == "abft" and v.protection.interval != 1:
            r.append("interval: the kmeans ABFT verifies once per centroid tile (interval 1)")
        acc = (tm // 2 if sched == "ws-coop" else tm) * tn // 128
        if acc > MAX_ACC90:
            r.append(f"tile {tm}x{tn} with {sched}: {acc} fp32 accumulators per consumer thread (at most {MAX_ACC90}); "
                     f"use a smaller tile")
        elif v.precision == "tf32x3" and acc > MAX_PROMOTED_ACC90:
            r.append(f"tile {tm}x{tn} with {sched} in tf32x3: {acc} fp32 accumulators per consumer thread, and tf32x3 keeps "
                     f"a second, promoted set (at most {MAX_PROMOTED_ACC90} each); use a smaller tile (e.g. 128x160 or "
                     f"128x192 ws-coop)")
        if p.get("refine") and v.precision != "tf32":
            r.append(f"refine: {v.precision}'s distances are fp32-accurate already; refine is an option of precision tf32")
        if v.precision == "tf32x3" and p["tile_k"] != 32:
            r.append(f"tile_k={p['tile_k']} in tf32x3: the mainloop splits X and promotes the accumulators in k-tiles of 32 (four wgmmas); "
                     f"use tile_k 32")
        return r

    def name_tokens(self, v: Variant) -> list[str]:
        p = v.param_dict
        tokens = ["kmeans", PRECISION_TAG[v.precision], self.protection_token(v.protection), "cutlass90",
                  f"{p['tile_m']}x{p['tile_n']}x{p['tile_k']}", f"c{p['cluster_m']}x1", p["schedule"]]
        if p.get("refine"):
            tokens.append("refine")
        if v.protection.inject:
            tokens.append("inj")
        return tokens

    def context(self, v: Variant) -> dict:
        p = v.param_dict
        return {
            **template_context(v),
            "c90": True,
            "fused": False,
            "tile": (p["tile_m"], p["tile_n"], p["tile_k"]),
            "cluster_m": p["cluster_m"],
            "coop": p["schedule"] == "ws-coop",
            "refine": bool(p.get("refine")),
            # the check's encodings' scales and lambda: the gemm backend's 16-bit check (its NumPy model)
            "scales": abft_model.abft16_scales(p["tile_n"] - ENC90),
            "abft16_lambda": repr(abft_model.ABFT16_LAMBDA),
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return template_sources(v)


# ---- fused: one pass over X per iteration (small dims) -----------------------------------------------------------------
FUSED_MAX_DIMS = 32  # the A fragments of four m16n8k8 k-steps stay in registers
FUSED_STATIC_SMEM = 1024  # the fused kernel's static shared memory (the inertia's, the scales', the column sums'), at most


def _fused_smem_limit(v: Variant) -> int:
    """The dynamic shared memory a fused block may take on every arch of ``v``."""
    return min(SMEM_PER_BLOCK.get(a, SMEM_PER_BLOCK["sm_80"]) for a in v.arch) - FUSED_STATIC_SMEM


def fused_smem_bytes(v: Variant, dims, clusters):
    """The fused kernel's dynamic shared memory for a shape, as the template's fused_smem computes it: the column sums'
    per-thread slots (protected, where registers cannot hold them), the fragments (tf32x3: words and remainders), the
    sums (two 32-bit limbs per copy, rows of ``dims | 1`` entries), the centroid norms, the counts and each strip's norm
    sum. ``dims`` and ``clusters`` are numbers (returns bytes) or C names (returns the same as a C expression of long
    longs)."""
    p = v.param_dict
    strip, threads = p["strip"], 32 * p["warps"]
    prot = v.protection.scheme == "abft"
    nbf, copies, parts = strip // 8 + (1 if prot else 0), 2 if prot else 1, 2 if v.precision == "tf32x3" else 1
    slot_ks = (4 if strip == 64 else 3) if prot else 0  # (fused_col_slots)
    if isinstance(dims, int):
        ks, strips = (dims + 7) // 8, (clusters + strip - 1) // strip
        return ((16 * ks * threads if ks == slot_ks else 0) + 8 * parts * strips * nbf * (ks + 1) * 32 + 8 * copies * clusters * (dims | 1)
                + 4 * strips * strip + 4 * copies * clusters + 4 * strips)
    ks, strips = f"(({dims} + 7) / 8)", f"(({clusters} + {strip - 1}) / {strip})"
    return (f"(({ks} == {slot_ks} ? 16LL * {ks} * {threads} : 0LL) + 8LL * {parts} * {strips} * {nbf} * ({ks} + 1) * 32 + "
            f"8LL * {copies} * {clusters} * ({dims} | 1) + 4LL * {strips} * {strip} + 4LL * {copies} * {clusters} + 4LL * {strips})")
FUSED_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
PARAMS_FUSED = (
    Param("backend", str, ("fused",), "selects this backend (one pass over X per iteration: norms, mma.sync distances, "
          "arg-min and the cluster sums; dims <= 32)", choices=("fused",)),
    Param("warps", int, (8,), "warps per block (each takes 16 samples at a time over every centroid); 8 by default: at the "
          "anchors 8 was faster or within 4% of 4, while 4 warps at 32 dims leave one block of four warps per SM "
          "(tf32x3 strips of 64: 3.1x its twin)", choices=(4, 8)),
    Param("strip", int, (64,), "centroids per strip: the accumulators a warp holds at once, and the checksum's strip",
          choices=(64, 128)),
    Param("refine", bool, (False,), "tf32: near ties refined -- the arg-min keeps each row's two nearest; a sample whose two "
          "distances lie within their rounding band takes the nearer of the two by exact (fp64) distances, moved between "
          "the cluster sums, and the inertia comes from the update's sums (named _refine)"),
)


class FusedBackend(Backend):
    """Small dims (<= 32): a persistent kernel whose warps take 16 samples at a time, load them once, compute their norms,
    their distances to every centroid with ``mma.sync`` m16n8k8 TF32 (the centroids as fragments in shared memory), the
    arg-min, and add the samples into per-block cluster sums in shared memory as exact fixed-point integers (two 32-bit
    limbs: shared memory's only native atomic addition is 32-bit integer), flushed once per block. Protected: a row
    checksum per strip of 64 or 128 centroids (an extra n-block of the MMA: the strip's column sums, hi and lo TF32
    parts) checked before the arg-min reads the accumulators, a flagged row's strip recomputed (``correct: detect``: no
    in-place location); the norms duplicated; the arg-min's value duplicated and its label's distance recomputed; the
    sums and counts twice, compared exactly, and their invariants exact."""

    name = "fused"
    precisions = ("tf32", "tf32x3")
    levels = {"abft": ABFT_LEVELS}
    params = PARAMS_FUSED
    requires = ("cublas",)  # the bench executable's vendor reference
    compile_options = ("-Xptxas=-warn-spills",)
    constraint_docs = (
        "fused: chosen by params backend: fused; precision tf32 or tf32x3 (three TF32 products per product); arch sm_80 or "
        "newer; protection none or abft threadblock with correct: detect (a flagged row recomputes its strip); shapes with dims <= 32 (the launcher refuses others "
        "with cudaErrorNotSupported)",
    )

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        if precision not in self.precisions:
            return (f"the kmeans fused backend takes precision tf32 or tf32x3, not {precision} (fp64: the mma backend, "
                    f"without params backend)")
        if protection.enabled and protection.scheme != "abft":
            return f"the kmeans fused backend takes protection none or abft, not {protection.scheme}"
        return super().protection_ok(precision, protection)

    def constraints(self, v: Variant) -> list[str]:
        reason = self.protection_ok(v.precision, v.protection)
        if reason:
            return [reason]
        bad = [a for a in v.arch if a not in FUSED_ARCHS]
        if bad:
            return [f"arch {', '.join(bad)}: the kmeans fused backend needs mma.sync TF32 (allowed: {', '.join(FUSED_ARCHS)})"]
        r = []
        if v.protection.scheme == "abft":
            if v.protection.correct != "detect":
                r.append("correct: the kmeans fused backend recomputes a flagged row's strip (it does not locate in place): "
                         "write correct: detect")
            if v.protection.interval != 1:
                r.append("interval: the kmeans ABFT verifies once per centroid tile (interval 1)")
        if v.param_dict.get("refine") and v.precision != "tf32":
            r.append(f"refine: {v.precision}'s distances are fp32-accurate already; refine is an option of precision tf32")
        return r

    def name_tokens(self, v: Variant) -> list[str]:
        p = v.param_dict
        tokens = ["kmeans", PRECISION_TAG[v.precision], self.protection_token(v.protection), "fused", f"s{p['strip']}", f"w{p['warps']}"]
        if p.get("refine"):
            tokens.append("refine")
        if v.protection.inject:
            tokens.append("inj")
        return tokens

    def context(self, v: Variant) -> dict:
        return {
            **template_context(v),
            "c90": False,
            "fused": True,
            "warps": v.param_dict["warps"],
            "strip": v.param_dict["strip"],
            "refine": bool(v.param_dict.get("refine")),
            "max_dims": FUSED_MAX_DIMS,
            "abft16_lambda": repr(abft_model.ABFT16_LAMBDA),
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return template_sources(v)


class KmeansFamily(Family):
    name = "kmeans"
    description = "Lloyd iterations: tensor-core distance GEMM with the arg-min fused, ABFT-protected; DMR-protected update"
    shape_keys = ("samples", "dims", "clusters")
    backends = (MmaBackend(), Cutlass90Backend(), FusedBackend())
    default_shapes = ({"samples": 131072, "dims": 128, "clusters": 128}, {"samples": 100003, "dims": 100, "clusters": 1000})
    campaign_shape = {"samples": 16384, "dims": 64, "clusters": 256}
    template_dir = "kmeans"
    # --site: the distance GEMM's accumulators, the arg-min's label, a squared norm, a cluster sum or count, the
    # refinement's exact distance (refine builds) -- FTGEN_KMEANS_SITE_* of ftgen_kmeans.h
    fault_sites = ("accumulator", "argmin", "norm", "update", "refine")
    launcher = LauncherSignature(
        params="const ftgen_kmeans_problem* p, cudaStream_t stream",
        args="p, stream",
        selector_args=("p->samples", "p->dims", "p->clusters"),
    )

    @property
    def bench_refs(self) -> tuple:
        """References `ftgen bench` times outside the executables, beside each variant (:mod:`ftgen.bench.refs`).
        Imported here, not at the top: ``python -m ftgen.families.kmeans.flash_ref`` runs that module as the driver."""
        from .flash_ref import FlashKmeansRef

        return (FlashKmeansRef(),)

    def library_entry(self, v: Variant) -> LibraryEntry:
        """One entry point per precision (``kmeans_<precision>``): the Lloyd loop's arguments as C scalars and device
        pointers (ftgen_kmeans.h's problem without its fault fields), the workspace sized by the chosen variant."""
        elem = "double" if v.precision == "fp64" else "float"
        return LibraryEntry(
            params="int samples, int dims, int clusters, const void* X, void* C, int* labels, int* counts, double* inertia, "
                   "int max_iters, double tol, int init, unsigned long long seed, int* iters_done",
            shape=("samples", "dims", "clusters"),
            legal="samples >= 1 && dims >= 1 && clusters >= 1 && clusters <= samples && max_iters >= 0 "
                  "&& init >= FTGEN_KMEANS_INIT_GIVEN && init <= FTGEN_KMEANS_INIT_PLUSPLUS_SAMPLE "
                  "&& X && C && labels",
            problem_type="ftgen_kmeans_problem",
            fill="P.samples = samples, P.dims = dims, P.clusters = clusters, P.X = X, P.C = C, P.labels = labels, P.counts = counts, "
                 "P.inertia = inertia, P.max_iters = max_iters, P.tol = tol, P.init = init, P.seed = seed, P.iters_done = iters_done;",
            workspace_params="int samples, int dims, int clusters",
            workspace="{sym}_workspace(samples, dims, clusters)",
            doc=(f"a Lloyd loop over X [samples][dims] into C [clusters][dims] ({elem}, row-major device arrays): C in the "
                 "initial centroids (init 0), or chosen from X by init 1 (random samples), 2 (kmeans++) or 3 (kmeans++ over a "
                 "sample of 64 samples per cluster) with seed; out "
                 "the centroids after max_iters iterations (fewer when the largest squared centroid shift is at most tol "
                 "times the mean squared centroid norm, tol > 0), or with max_iters 0 the initial ones; labels [samples] "
                 "the last assignment; counts [clusters], inertia [max_iters] (each iteration's) and iters_done (the "
                 "iterations run) may be null"),
        )

    def library_fault_plan(self, v: Variant) -> str:
        # faults as the bench plans them at its default site (the distance GEMM's accumulators, in the first
        # iteration): over the variant's geometry, one bit flip each
        if not v.protection.injects:
            return ""
        return ("ftgen_kmeans_geometry g;\n"
                "{sym}_geometry(samples, dims, clusters, &g);\n"
                "blocks = g.blocks;\n"
                "plan = ftgen::plan_faults(handle->inject_n, fseed, g.blocks, g.threads, g.elems_per_thread, g.steps, "
                "g.value_bits, ftgen::kBitflip, -1, 0.0);")

    def library_range(self, v: Variant) -> dict[str, tuple[int, int]]:
        """The fused backend runs dims <= 32 (its launcher refuses more); the others any shape."""
        return {"dims": (1, FUSED_MAX_DIMS)} if self.backend_of(v).name == "fused" else {}

    def shape_fits(self, v: Variant):
        """The fused backend's block holds the centroids' fragments and the sums in shared memory (fused_smem in the
        template, mirrored by :func:`fused_smem_bytes`): a shape whose clusters x dims do not fit is refused by its
        launcher (cudaErrorNotSupported), so the library and the search send it elsewhere."""
        if self.backend_of(v).name != "fused":
            return None
        limit = _fused_smem_limit(v)
        return (lambda shape: fused_smem_bytes(v, shape["dims"], shape["clusters"]) <= limit,
                f"{fused_smem_bytes(v, 'dims', 'clusters')} <= {limit}LL")

    def shape_fits_text(self, v: Variant) -> str:
        return f"shapes whose centroid fragments and cluster sums fit in its {_fused_smem_limit(v)} bytes of shared memory (clusters x dims)"

    def library_fallback(self, v: Variant) -> Variant | None:
        """For a project of fused variants only: the mma backend's default variant of the same precision and protection
        (without injection), which runs every shape."""
        prot = dataclasses.replace(v.protection, inject=False)
        mma = self.backend_named("mma")
        params = tuple((p.name, p.default[0]) for p in mma.param_defs(v.precision, prot))
        fb = Variant(self.name, v.precision, prot, params, v.arch, "mma")
        if self.constraints(fb):
            return None
        return Variant(fb.family, fb.precision, fb.protection, fb.params, fb.arch, fb.backend, self.kernel_name(fb))

    def normalize_shape(self, raw, where: str, source: str | None = None) -> dict[str, int]:
        out = super().normalize_shape(raw, where, source)
        if out["clusters"] > out["samples"]:
            raise SpecError(
                f"clusters={out['clusters']} is more than samples={out['samples']}; a kmeans shape needs clusters <= samples",
                source=source,
                path=f"{where}.clusters",
            )
        return out
