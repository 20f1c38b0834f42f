"""The ``wgmma`` backend of ``attention``: flash attention forward on Hopper's warpgroup MMA (sm_90a only), chosen by
``params: {backend: wgmma}``.

A thread block takes ``block_m`` query rows of one (batch, head): one producer warp loads Q, then K and V tile by
tile by TMA into a pipeline of ``stages`` shared-memory stages; ``block_m / 64`` consumer warpgroups of 64 rows each
(two, or three with 160 registers each instead of 240) compute ``S = Q K^T`` on wgmma from shared memory, the online
softmax in registers, and ``O += P V`` on wgmma with P from registers (CUTLASS's Hopper FMHA example supplies the TMA
tile loader and the register-sourced MMA; the kernel is ``templates/attention/attention_wgmma.cuh``).
``schedule: pingpong`` (the default) has the consumers take turns issuing their products (named barriers, round the
consumers), so that one's softmax and checks run while another's products do; ``lockstep`` runs them without turns.
Build: ``-DNDEBUG`` (CUTLASS's device assertions make ptxas serialize wgmma) and arch ``sm_90a``.

The wgmma accumulator repeats the m16n8 layout per warp, so the protection levels are those of the mma backend
(:mod:`.mma`, :mod:`.model`), step for step the same device functions: S's strided checksum columns ``Q Kc^T`` come
from the same wgmma as S (Kc's 16 rows, the unit and weighted checksums of each group rounded once into the 16-bit type,
are loaded from the workspace into the stage after their tile's keys, so the product has N = block_n + 16), O's ``P Vc`` (32 columns; efta 48 up to head_dim 128, its last 16 the row sums, from
rows of ones) is one more wgmma; both encoded once per launch and loaded by TMA with their K and V tiles. Rows where a check could not
correct (S, O, the exps or the row sums) are flagged in the workspace and recomputed after the kernel by the same
kernel unprotected (a launch whose blocks return at once where nothing was flagged); every vote is a warp's (the
consumers' only barriers are the ping-pong turns).

Kernel names::

    attn_<prec>_<protection>_wgmma_d<head_dim>_<c|nc>_<block_m>x<block_n>_s<stages>_<pp|ls>[_inj]

(``pp``: the consumers take turns at the tensor cores, ``schedule: pingpong``; ``ls``: ``schedule: lockstep``).

Fault injection as on the mma backend, with ``thread`` the consumer thread (0 to 2 block_m - 1: warpgroup ``thread /
128``, rows ``64 (thread / 128) + 16 warp + lane / 4`` and ``+ 8`` of the block's block_m) and ``block`` the linear
block index of block_m-row blocks.
"""

from __future__ import annotations

from ..base import SMEM_PER_BLOCK, Param, Protection, Variant
from .mma import HEAD_DIMS, LEVEL_TOKENS, STRIDED_LEVELS, MmaBackend

ARCH = "sm_90a"
SMEM_LIMIT = SMEM_PER_BLOCK[ARCH]
MAX_STAGES = 5
SCHEDULES = ("pingpong", "lockstep")
SCHEDULE_TOKENS = {"pingpong": "pp", "lockstep": "ls"}
BLOCK_MS = (128, 192)
HEAD_DIMS_WGMMA = HEAD_DIMS + (256,)  # 256 with block_n 64: O's 64 x 256 tile is 128 accumulators a thread


def smem_bytes(head_dim: int, block_n: int, stages: int, strided: bool, block_m: int = 128, row_sums: bool = False) -> int:
    """Shared memory of the kernel: a Q tile of 64 rows per consumer, `stages` K / V stages and, for the strided
    levels, Kc's 16 rows with each K tile and a Vc stage (32 x block_n, or 48 x block_n where `row_sums`: efta's row sums
    from the tensor cores) each, the pipelines' barriers and the base's alignment."""
    q = block_m * head_dim * 2
    vc_rows = 48 if row_sums else 32
    stage = block_n * head_dim * 2 + ((16 * head_dim + vc_rows * block_n) * 2 if strided else 0)
    return q + stages * stage + 1024 + 256


def auto_stages(head_dim: int, block_n: int, strided: bool, block_m: int = 128, row_sums: bool = False) -> int:
    """The most stages (at most five, CUTLASS's FMHA default) whose shared memory fits a block."""
    n = MAX_STAGES
    while n > 2 and smem_bytes(head_dim, block_n, n, strided, block_m, row_sums) > SMEM_LIMIT:
        n -= 1
    return n


def _strided(v: Variant) -> bool:
    """The level carries the strided checksums (and their shared-memory stages)."""
    return v.protection.enabled and v.protection.level in STRIDED_LEVELS


def _row_sums(v: Variant) -> bool:
    """The level takes its row sums from the tensor cores (efta up to head_dim 128: Vc's stages hold 16 rows of ones
    more; at 256 the softmax sums them, which leaves efta the stages strided has)."""
    return v.protection.enabled and v.protection.level == "efta" and v["head_dim"] <= 128


PARAMS = (
    Param("backend", str, ("wgmma",), "selects this backend (Hopper wgmma and TMA, arch sm_90a)", choices=("wgmma",)),
    Param("head_dim", int, (64,), "head dimension d (256: block_n 64)", choices=HEAD_DIMS_WGMMA),
    Param("causal", bool, (False,), "causal mask (query i sees keys c <= i; needs seq_k = seq)"),
    Param("block_m", int, (128,), "query rows per block: 64 per consumer warpgroup (128: two with 240 registers each; "
          "192: three with 160 each, head_dim 64)", choices=BLOCK_MS),
    Param("block_n", int, (128,), "keys per tile", choices=(64, 128)),
    Param("stages", int, (0,), "K / V pipeline stages in shared memory (0: the most that fit, at most 5)", choices=(0, 2, 3, 4, 5)),
    Param("schedule", str, ("pingpong",), "how the consumer warpgroups share the tensor cores: pingpong (they take turns "
          "issuing their products, so one's softmax and checks run during another's products) or lockstep (no turns)",
          choices=SCHEDULES),
)


class WgmmaBackend(MmaBackend):
    name = "wgmma"
    levels = {"abft": {k: v for k, v in LEVEL_TOKENS["abft"].items() if k != "decoupled"}}
    params = PARAMS
    requires = ("cutlass",)
    # CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED: wgmma tiles of N = block_n + 16 (S with its checksum columns)
    compile_options = ("-DNDEBUG", "-Xptxas=-warn-spills", "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED")
    constraint_docs = (
        "wgmma: chosen by params backend: wgmma; arch sm_90a only; head_dim 64, 128 or 256 (block_n 64); block_n 64 or 128; "
        "block_m 128 (two consumer warpgroups) or 192 (three, head_dim 64 only: 160 registers each)",
        "wgmma: causal needs seq_k = seq",
        "wgmma abft: levels snvr, strided and efta (the decoupled baseline is the mma backend's); correct online or "
        "detect; threshold auto; interval 1",
        "wgmma: stages whose shared memory (Q, K / V stages and their checksum stages) fits 227 KB",
    )

    def protection_ok(self, precision: str, protection: Protection) -> str | None:
        if protection.enabled and protection.level == "decoupled":
            return ("the decoupled baseline runs on the mma backend only (omit params backend); the wgmma backend's levels "
                    "are snvr, strided and efta")
        return super().protection_ok(precision, protection)

    @staticmethod
    def stages_of(v: Variant, strided: bool | None = None) -> int:
        """The variant's stages (`strided`: as if the level had the checksum stages or not; default: its level's)."""
        s = _strided(v) if strided is None else strided
        return v["stages"] or auto_stages(v["head_dim"], v["block_n"], s, v["block_m"], s and _row_sums(v))

    def constraints(self, v: Variant) -> list[str]:
        r: list[str] = []
        if tuple(v.arch) != (ARCH,):
            r.append(f"arch {', '.join(v.arch)}: the wgmma backend builds for sm_90a only (wgmma, TMA and setmaxnreg exist "
                     f"only there); write arch: [sm_90a], or omit params backend for the mma kernels")
        if v["block_m"] == 192 and v["head_dim"] != 64:
            r.append(f"block_m 192 with head_dim {v['head_dim']}: three consumer warpgroups have 160 registers each, too few "
                     f"for head_dim {v['head_dim']}'s output tile; use block_m 128, or head_dim 64")
        if v["head_dim"] == 256 and v["block_n"] != 64:
            r.append(f"head_dim 256 with block_n {v['block_n']}: a consumer warpgroup's O tile (64 x 256) is 128 accumulators "
                     f"a thread, and S of block_n {v['block_n']} keys does not fit beside it; use block_n 64")
        need = smem_bytes(v["head_dim"], v["block_n"], self.stages_of(v), _strided(v), v["block_m"], _row_sums(v))
        if need > SMEM_LIMIT:
            r.append(f"stages {v['stages']} with head_dim {v['head_dim']} and block_n {v['block_n']} need {need} bytes of shared "
                     f"memory, more than the {SMEM_LIMIT} of a block on sm_90a: use fewer stages or stages: 0")
        return r

    def tile_tokens(self, v: Variant) -> list[str]:
        return [f"{v['block_m']}x{v['block_n']}", f"s{self.stages_of(v)}", SCHEDULE_TOKENS[v["schedule"]]]

    def block_m(self, v: Variant) -> int:
        return v["block_m"]

    def context(self, v: Variant) -> dict:
        return {**super().context(v), "backend": "wgmma", "stages": self.stages_of(v), "twin_stages": self.stages_of(v, strided=False),
                "pingpong": v["schedule"] == "pingpong"}
