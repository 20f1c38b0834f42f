"""The ``mma`` backend of ``attention``: flash attention forward on ``mma.sync.aligned.m16n8k16`` (fp16 / bf16 in,
fp32 accumulate), the layout of FT-Transformer's EFTA kernel.

A thread block of ``block_m / 16`` warps takes ``block_m`` query rows of one (batch, head); each warp holds 16 rows
(its Q fragments in registers) and loops over key/value tiles of ``block_n`` keys staged in shared memory. In the
m16n8k16 accumulator layout lane ``t`` holds rows ``t / 4`` and ``t / 4 + 8`` and columns ``2 (t % 4)`` and
``2 (t % 4) + 1`` of every n8 block: the four lanes of a quad share a row, and a lane owns the column groups
``g = c % 8`` in ``{2 (t % 4), 2 (t % 4) + 1}`` of every product. The strided checksums (stride 8) therefore land
in the lanes that hold the elements they check: three more n8 blocks per product (the unit checksum split into a
high and a low 16-bit half, and the weighted one), and in the second product a fourth, the group magnitudes
``sum_l |V[c, g + 8l]|`` whose P-weighted sum scales the O check's threshold (:func:`.model.o_threshold`); no data
crosses lanes for any check but the row max's vote.

Protection (``protection: {scheme: abft, level: ...}``), exactly the rules of :mod:`.model`:

* ``strided`` -- K and V checksums encoded per tile in shared memory; S checked per tile before the softmax
  (located faults corrected in the register, anything else recomputes the warp's tile product), O checked
  after every tile.
* ``snvr`` -- the softmax: the quad's row-max copies vote, exp outputs after conversion checked per group in
  the log domain against their arguments, the rescale factor likewise, the row sum against its range and
  against a duplicate of each lane's accumulation on negated operands (exactly -l), 1/l against l.
* ``efta`` -- both, and the unified verification: the V checksum carries +1, so the O checksum carries the row
  sum through every rescale and the normalization; one check after the loop covers the second product, the
  rescales, the row sum and 1/l.
* ``decoupled`` -- the baseline: three kernels over an L x L workspace (S with classic row checksums, the
  softmax twice, O = P V with classic row checksums); a shape whose workspace does not fit is skipped.

Anything a check cannot locate recomputes the thread block's query rows (at most once more).

Kernel names::

    attn_<prec>_<protection>_mma_d<head_dim>_<c|nc>_<block_m>x<block_n>[_inj]

Fault injection (``inject: true``): ``FaultSpec.block`` is the linear block index (``blockIdx.x`` fastest, then
head, then batch), ``thread`` the thread in the block, ``step`` the key tile, and ``elem`` is
``site * 1024 + element`` with the site of :data:`SITE_CODES` and the element of the thread's fragment:
``4 n + e`` for qk, exp and p16 (n8 block ``n`` of the S tile, accumulator element ``e``) and for o (n8 block of O),
the row half ``h`` (0, 1) for rowmax, rowsum, rescale and inv_l (``templates/attention/ftgen_attention.h``). The
decoupled baseline's steps are its kernels (0: S, 1: the softmax, 2: O).
"""

from __future__ import annotations

import math

from ..base import PRECISION_CTYPE, PRECISION_TAG, Backend, Param, Protection, Source, Variant
from . import model as M
from .rules import S_LO_MARGIN

PRECISIONS = ("fp16", "bf16")
LEVEL_TOKENS = {"abft": {"strided": "strided", "snvr": "snvr", "efta": "efta", "decoupled": "dec"}}
HEAD_DIMS = (64, 128)
STRIDED_LEVELS = ("strided", "efta")  # the levels that carry the strided K / V checksums
SITE_CODES = {site: i for i, site in enumerate(M.SITES)}
ELEM_PER_SITE = 1024
# the fault sites each level detects (model: the rest pass through it by design); fault plans draw from them
COVERS = {
    "none": M.SITES,
    "strided": ("qk", "o"),
    "snvr": ("rowmax", "exp", "p16", "rowsum", "rescale", "inv_l"),
    "efta": M.SITES,
    "decoupled": tuple(s for s in M.SITES if s != "rescale"),
}

PARAMS = (
    Param("head_dim", int, (64,), "head dimension d", choices=HEAD_DIMS),
    Param("causal", bool, (False,), "causal mask (query i sees keys c <= i; needs seq_k = seq)"),
    Param("block_m", int, (64,), "query rows per thread block (16 per warp)", choices=(64, 128)),
    Param("block_n", int, (64,), "keys per tile", choices=(32, 64, 128)),
)


class MmaBackend(Backend):
    name = "mma"
    precisions = PRECISIONS
    levels = LEVEL_TOKENS
    params = PARAMS
    requires = ()
    compile_options = ("-Xptxas=-warn-spills",)
    constraint_docs = (
        "mma: head_dim 64 or 128; block_m 64 or 128 (16 rows per warp); block_n 32, 64 or 128",
        "mma: causal needs seq_k = seq (top-left and bottom-right causal alignments differ otherwise)",
        "mma abft: levels strided, snvr, efta, decoupled; correct online or detect; threshold auto; interval 1",
        "mma: registers: head_dim 128 with block_n 128 holds too many accumulators per thread (use block_n <= 64)",
    )

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        reason = super().protection_ok(precision, protection)
        if reason or not protection.enabled:
            return reason
        if protection.threshold != "auto":
            return ("the attention thresholds are derived per row from the precision and the operands' magnitudes "
                    "(threshold: auto); a fixed number does not apply")
        if protection.interval != 1:
            return "the checks of the attention kernels are placed by the level (per tile, once after the loop): interval: 1"
        return None

    def constraints(self, v: Variant) -> list[str]:
        r: list[str] = []
        if v.protection.enabled and v.protection.level == "decoupled" and (v["block_m"], v["block_n"]) != (64, 64):
            r.append("block_m / block_n do not apply to the decoupled baseline (fixed SIMT tiles; its timing twin is the "
                     "fused kernel with 64 x 64 tiles); leave them at 64")
        if v["head_dim"] == 128 and v["block_n"] == 128:
            r.append("head_dim 128 with block_n 128: the S and O accumulators exceed the registers of a thread; use block_n <= 64")
        return r

    def shape_reason(self, v: Variant, shape: dict) -> str | None:
        """Reason why a shape cannot run on this variant (spec shapes are checked at generation, --shapes by the
        executable)."""
        if v["causal"] and shape.get("seq_k", shape["seq"]) != shape["seq"]:
            return (f"causal attention needs seq_k = seq (got seq {shape['seq']}, seq_k {shape['seq_k']}): the top-left "
                    f"(PyTorch) and bottom-right (FlashAttention) causal alignments differ otherwise")
        return None

    def block_m(self, v: Variant) -> int:
        """Query rows of a thread block."""
        return v["block_m"]

    def tile_tokens(self, v: Variant) -> list[str]:
        """The name's tokens after the mask: the tile (and whatever else a backend's kernel is tuned by)."""
        return [f"{self.block_m(v)}x{v['block_n']}"]

    def name_tokens(self, v: Variant) -> list[str]:
        return [
            "attn",
            PRECISION_TAG[v.precision],
            self.protection_token(v.protection),
            self.name,
            f"d{v['head_dim']}",
            "c" if v["causal"] else "nc",
            *self.tile_tokens(v),
        ] + (["inj"] if v.protection.inject else [])

    def context(self, v: Variant) -> dict:
        level = v.protection.level if v.protection.enabled else "none"
        prec = v.precision
        d, bn = v["head_dim"], v["block_n"]
        return {
            **v.common_context(),
            "backend": "mma",
            "T": PRECISION_CTYPE[prec],
            "is_bf16": prec == "bf16",
            "head_dim": d,
            "causal": v["causal"],
            "block_m": self.block_m(v),
            "block_n": bn,
            "level": level,
            "protected": v.protection.enabled,
            "strided": level in STRIDED_LEVELS,
            "snvr": level in ("snvr", "efta"),
            "unified": level == "efta",
            "decoupled": level == "decoupled",
            "correct": v.protection.correct == "online",
            "inject": v.protection.injects,
            "site_codes": SITE_CODES,
            "site_mask": sum(1 << SITE_CODES[x] for x in COVERS[level]),
            "elem_per_site": ELEM_PER_SITE,
            # the model's threshold constants (model.s_threshold, o_threshold, exp_threshold, alpha_threshold) and
            # the bench's verification bound (model.output_tolerance, output_floor)
            "t": {
                "u_acc": repr(M.U_ACC),
                "u32": repr(M.U32),
                "u_mufu": repr(M.U_MUFU),
                "u_in": repr(M.U_IN[prec]),
                "eta": repr(M.ETA[prec]),
                "c_sqrt": repr(M.C_SQRT),
                "c_const": repr(M.C_CONST),
                "p_floor": repr(M.P_FLOOR[prec]),
                "log2e": repr(M.LOG2E),
                "exp_tau": repr(M.exp_threshold(bn // M.STRIDE, prec, M.P_FLOOR[prec])),
                "exp_tau_fast": repr(M.exp_fast_threshold(bn // M.STRIDE, prec)),
                "exp_fast_msl": repr(M.EXP_FAST_MSL),
                "exp_band": repr(M.exp_band_relief(prec)),
                "s_lo_margin": repr(S_LO_MARGIN),
                "sqrt_d": repr(math.sqrt(d)),
            },
        }

    def sources(self, v: Variant) -> tuple[Source, ...]:
        return (
            Source("variant.h.j2", ".h", "header"),
            Source("variant.cu.j2", ".cu", "library"),
            Source("bench.cu.j2", "_bench.cu", "bench"),
        )
