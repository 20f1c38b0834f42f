"""The ``kmeans`` family and its ``mma`` backend: hand-written tensor-core Lloyd iterations.

One Lloyd iteration is a chain of launches on one stream (``templates/kmeans/kmeans_variant.cu.j2``):
centroid norms and tile encodings, **assign** (the distance GEMM on the tensor cores, ``mma.sync``
m16n8k8 TF32 for ``tf32``/``tf32x3`` and m8n8k4 FP64 for ``fp64``, with the arg-min fused into its
epilogue, looping over centroid tiles; the distance matrix is never written), **update** (the samples
sorted by label, cluster sums in fp64 by work items in a fixed order, integer counts, then the new centroids;
empty clusters keep theirs) and the
convergence test (the largest centroid shift, decided on the device: once converged every later launch
of the loop returns at once).

Kernel names::

    kmeans_<prec>_<protection>_<m_tb>x<n_tb>x<k_tb>_w<m_w>x<n_w>[_mb<min_blocks>][_inj]

``<protection>`` is ``none`` or ``abft-tb[-detect][-th<threshold>]``; ``_inj`` marks a build with fault
injection compiled in. The rules of the protection are modelled in :mod:`.model`.
"""

from __future__ import annotations

import dataclasses

from ...errors import SpecError
from ..base import (
    SMEM_PER_SM,
    PRECISION_CTYPE,
    PRECISION_TAG,
    SMEM_PER_BLOCK,
    UNIT_ROUNDOFF,
    Backend,
    Family,
    LauncherSignature,
    Param,
    Protection,
    Source,
    Variant,
    power_of_two,
    tile_multiples,
)
from . import model

PRECISIONS = ("tf32", "tf32x3", "fp64")
ABFT_LEVELS = {"threadblock": "tb"}
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
        abft = v.protection.scheme == "abft"
        self.smem_bytes = (
            STAGES * (self.MT + self.NT) * self.ld * self.elem_bytes  # tiles
            + (STAGES * 2 * self.mma_n * self.ld * self.elem_bytes if abft else 0)  # the group's encodings' k-tiles
            + (2 * self.warps_n * self.MT * self.elem_bytes + self.MT * self.elem_bytes + self.MT * 4
               + 4 * self.MT * self.elem_bytes if abft else 0)  # verification
            + self.warps_n * self.MT * (self.elem_bytes + 4) + self.MT * (self.elem_bytes + 4)  # arg-min
            + 16
        )


class MmaBackend(Backend):
    name = "mma"
    precisions = PRECISIONS
    levels = {"abft": ABFT_LEVELS}
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
        prot = v.protection
        abft = prot.scheme == "abft"
        return {
            "v": v,
            "name": v.name,
            "sym": v.symbol,
            "T": PRECISION_CTYPE[v.precision],
            "precision": v.precision,
            "unit_roundoff": repr(UNIT_ROUNDOFF[v.precision]),
            "prot": prot,
            "abft": abft,
            "detect": abft and prot.correct == "detect",
            "inject": prot.injects,
            "threshold": 0.0 if prot.threshold == "auto" else float(prot.threshold),
            "lam": repr(model.LAMBDA),
            "meta_json": v.meta_json(),
            "g": Geometry(v),
            "tf32": v.precision in ("tf32", "tf32x3"),
            "tf32x3": v.precision == "tf32x3",
            # the unprotected twin's geometry (the benchmark's alternate timing: kmeans_twin.cu.j2)
            "twin_g": Geometry(dataclasses.replace(v, protection=Protection())),
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        # a protected variant's benchmark also compiles its unprotected twin (the same template with protection
        # none, in a translation unit of its own: the template specializes the kernels on protection at file level)
        twin = (Source("kmeans_twin.cu.j2", "_twin.cu", "bench"),) if v.protection.enabled else ()
        return (
            Source("variant.h.j2", ".h", "header"),
            Source("kmeans_variant.cu.j2", ".cu", "library"),
            Source("bench.cu.j2", "_bench.cu", "bench"),
        ) + twin


class KmeansFamily(Family):
    name = "kmeans"
    description = "Lloyd iterations: tensor-core distance GEMM with the arg-min fused, ABFT-protected; DMR-protected update"
    shape_keys = ("samples", "dims", "clusters")
    backends = (MmaBackend(),)
    default_shapes = ({"samples": 131072, "dims": 128, "clusters": 128}, {"samples": 100003, "dims": 100, "clusters": 1000})
    campaign_shape = {"samples": 16384, "dims": 64, "clusters": 256}
    template_dir = "kmeans"
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

    def normalize_shape(self, raw, where: str, source: str | None = None) -> dict[str, int]:
        out = super().normalize_shape(raw, where, source)
        if out["clusters"] > out["samples"]:
            raise SpecError(
                f"clusters={out['clusters']} is more than samples={out['samples']}; a kmeans shape needs clusters <= samples",
                source=source,
                path=f"{where}.clusters",
            )
        return out
