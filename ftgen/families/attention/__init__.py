"""``attention``: fused multi-head attention forward, ``O = softmax(scale Q K^T [causal]) V`` per (batch, head),
with the end-to-end fault tolerance of FT-Transformer (EFTA).

Q and O are ``[batch, heads, seq, head_dim]``, K and V ``[batch, kv_heads, seq_k, head_dim]``, in fp16 or bf16,
accumulated in fp32; the scale is ``1 / sqrt(head_dim)``. Shapes are ``{batch, heads, seq}`` with optional ``seq_k``
(keys; default ``seq``) and ``kv_heads`` (grouped-query attention: a divisor of ``heads``, query head h reading K / V
head h / (heads / kv_heads); default ``heads``): ``--shapes 4x32x4096``, ``4x32x4096x8192`` or ``4x32x4096x4096x8``.

Backends:

* ``mma`` (:mod:`.mma`) -- flash attention on ``mma.sync`` m16n8k16 (the paper's layout), unprotected or with the
  protection levels ``strided``, ``snvr``, ``efta`` fused into the kernel, and the three-kernel ``decoupled``
  baseline (:mod:`.model` is the NumPy model of every level, and says what each checks).
* ``wgmma`` (:mod:`.wgmma`, ``params: {backend: wgmma}``, arch ``sm_90a``) -- the same levels (but decoupled) on
  Hopper's warpgroup MMA with TMA loads and warp specialization.

Every variant exports ``<symbol>(const ftgen_attention_problem* p, cudaStream_t stream)``
(``templates/attention/ftgen_attention.h``).

References of `ftgen bench` beside the executables (:mod:`ftgen.bench.refs`): :mod:`.sdpa_ref` times torch's
``scaled_dot_product_attention`` with the FLASH backend forced (``sdpa-flash``) and with the cuDNN one
(``sdpa-cudnn``) alternately with a variant, on the executable's own data.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...errors import SpecError
from ..base import Family, LauncherSignature, LibraryEntry, Variant, positive_int, suggest
from .mma import MmaBackend
from .model import SITES
from .wgmma import WgmmaBackend

SHAPE_KEYS = ("batch", "heads", "seq", "seq_k", "kv_heads")


class AttentionFamily(Family):
    name = "attention"
    description = "fused attention forward (flash, online softmax) with strided ABFT, SNVR and EFTA unified verification"
    shape_keys = SHAPE_KEYS
    backends = (MmaBackend(), WgmmaBackend())
    default_shapes = ({"batch": 4, "heads": 32, "seq": 4096, "seq_k": 4096}, {"batch": 2, "heads": 16, "seq": 1000, "seq_k": 1000})
    campaign_shape = {"batch": 1, "heads": 4, "seq": 1024, "seq_k": 1024}
    template_dir = "attention"
    fault_sites = SITES  # --site puts every fault at one of them, covered by the level or not
    launcher = LauncherSignature(
        params="const ftgen_attention_problem* p, cudaStream_t stream",
        args="p, stream",
        selector_args=("p->batch", "p->heads", "p->seq_q", "p->seq_k", "ftgen_attention_kv_heads(p)"),
    )

    @property
    def bench_refs(self) -> tuple:
        """References `ftgen bench` times outside the executables, beside each variant (:mod:`ftgen.bench.refs`):
        SDPA with the FLASH backend and with the cuDNN backend, each its own driver run, and beside protected variants
        the decoupled baseline (:mod:`.decoupled_ref`). Imported here, not at the top: ``python -m
        ftgen.families.attention.sdpa_ref`` runs that module as the driver."""
        from .decoupled_ref import DecoupledRef
        from .sdpa_ref import NAMES, SdpaRef

        return (*(SdpaRef(n) for n in NAMES), DecoupledRef())

    # ---- shapes: seq_k (default: seq) and kv_heads (default: heads) are optional ----------------
    def normalize_shape(self, raw: Any, where: str, source: str | None = None) -> dict[str, int]:
        keys = "batch, heads, seq (and optionally seq_k, kv_heads)"
        if not isinstance(raw, dict):
            raise SpecError(f"{raw!r} is not a mapping; an attention shape has keys {keys}", source=source, path=where)
        for key in raw:
            if key not in SHAPE_KEYS:
                raise SpecError(f"unknown shape key {key!r}{suggest(key, SHAPE_KEYS)}; an attention shape has keys {keys}",
                                source=source, path=f"{where}.{key}")
        out: dict[str, int] = {}
        for key in SHAPE_KEYS[:3]:
            if key not in raw:
                raise SpecError(f"missing shape key {key!r}", source=source, path=where)
            out[key] = positive_int(raw[key], f"{where}.{key}", source)
        out["seq_k"] = positive_int(raw["seq_k"], f"{where}.seq_k", source) if "seq_k" in raw else out["seq"]
        kvh = positive_int(raw["kv_heads"], f"{where}.kv_heads", source) if "kv_heads" in raw else out["heads"]
        if out["heads"] % kvh:
            raise SpecError(f"kv_heads {kvh} does not divide heads {out['heads']}: grouped-query attention shares each K / V "
                            f"head among heads / kv_heads query heads", source=source, path=f"{where}.kv_heads")
        out["kv_heads"] = kvh
        return out

    def parse_shape_token(self, token: str) -> dict[str, int]:
        token = token.strip()
        parts = token.split("x")
        if not all(p.isascii() and p.isdigit() for p in parts) or len(parts) not in (3, 4, 5):
            raise SpecError(f"--shapes: {token!r} is not an attention shape; write batch x heads x seq (x seq_k (x kv_heads)) "
                            f"as integers joined by 'x', e.g. 4x32x4096 or 4x32x4096x4096x8")
        return self.normalize_shape(dict(zip(SHAPE_KEYS, (int(p) for p in parts))), f"--shapes {token}")

    def format_shape(self, shape: Mapping[str, int]) -> str:
        """batch x heads x seq x seq_k, and x kv_heads where it is not heads (the form the executables and rows take)."""
        dims = [shape["batch"], shape["heads"], shape["seq"], shape.get("seq_k", shape["seq"])]
        if shape.get("kv_heads", shape["heads"]) != shape["heads"]:
            dims.append(shape["kv_heads"])
        return "x".join(str(d) for d in dims)

    # ---- a causal variant runs seq_k = seq only: other shapes are out of its range ----------------
    def runs_shape(self, v: Variant, shape: Mapping[str, int]) -> bool:
        return super().runs_shape(v, shape) and self.backend_of(v).shape_reason(v, shape) is None

    def range_broken(self, v: Variant, shape: Mapping[str, int]) -> str:
        if self.backend_of(v).shape_reason(v, shape):
            return "shapes with seq_k = seq (a causal mask)"
        return super().range_broken(v, shape)

    def check_spec_shapes(self, variants: list[Variant], shapes: list[dict], source: str) -> None:
        """A spec shape that no variant can run (seq_k != seq with causal variants only) is an error."""
        for i, s in enumerate(shapes):
            reasons = [self.backend_of(v).shape_reason(v, s) for v in variants]
            if all(reasons):
                raise SpecError(f"{self.format_shape(s)}: {reasons[0]}; every variant of the spec is causal, so none "
                                f"runs it (give seq_k = seq, or add causal: false)", source=source, path=f"shapes[{i}]")

    def bench_shapes(self, v: Variant, shapes: list[dict] | None) -> list[dict]:
        """The spec's shapes this variant runs (the rest are recorded as out of range); the family's defaults
        when it runs none of them."""
        def full(given):
            return [dict(s, seq_k=s.get("seq_k", s["seq"]), kv_heads=s.get("kv_heads", s["heads"])) for s in given]

        return [s for s in full(super().bench_shapes(v, shapes)) if self.runs_shape(v, s)] or full(self.default_shapes)

    # ---- the shared library (ftgen build --lib) -------------------------------------------------
    def library_group(self, v: Variant) -> str:
        """One entry point per element type, head dim and mask: the dispatcher selects by shape only."""
        return f"attention_{'f16' if v.precision == 'fp16' else 'bf16'}_d{v['head_dim']}{'_causal' if v['causal'] else ''}"

    def library_fault_plan(self, v: Variant) -> str:
        # faults as the bench plans them (ftgen_attention_faults.h): the launch's blocks, consumer threads and key
        # tiles, one bit flip each at a site the level covers
        if not v.protection.injects:
            return ""
        c = self.backend_of(v).context(v)
        layout = ", ".join(str(x) for x in (c["head_dim"], c["block_m"], c["block_n"], c["site_mask"])) + \
            f", {'true' if c['causal'] else 'false'}, {'true' if c['decoupled'] else 'false'}"
        return ("int threads = 0, steps = 0;\n"
                "{sym}_geometry(&P, &blocks, &threads, &steps);\n"
                "plan = ftgen::plan_faults(handle->inject_n, fseed, blocks, threads, 1, steps, 32, ftgen::kBitflip, -1, 0.0);\n"
                f"ftattn_faults::assign_sites(plan, fseed, ftattn_faults::Layout{{{layout}}}, -1, false, seq_q, seq_k, "
                "(long long)batch * heads);")

    def library_entry(self, v: Variant) -> LibraryEntry:
        d, causal = v["head_dim"], v["causal"]
        # the tensors' names are capitals: the library's entry point has a local `v` (the chosen variant)
        aligned = " && ".join(f"((size_t){x} & 15) == 0" for x in ("Q", "K", "V", "O"))
        return LibraryEntry(
            params="int batch, int heads, int seq_q, int seq_k, int kv_heads, float scale, const void* Q, const void* K, "
                   "const void* V, void* O",
            shape=("batch", "heads", "seq_q", "seq_k", "kv_heads"),
            legal=f"batch >= 1 && heads >= 1 && seq_q >= 1 && seq_k >= 1{' && seq_k == seq_q' if causal else ''} && "
                  f"kv_heads >= 1 && kv_heads <= heads && heads % kv_heads == 0 && Q && K && V && O && {aligned}",
            problem_type="ftgen_attention_problem",
            fill=f"P.batch = batch, P.heads = heads, P.seq_q = seq_q, P.seq_k = seq_k, P.kv_heads = kv_heads, P.head_dim = {d}, "
                 "P.scale = scale, P.q = Q, P.k = K, P.v = V, P.o = O;",
            workspace_params="int batch, int heads, int seq_q, int seq_k, int kv_heads",
            # the problem's sizes (the other fields zero), alive for the call
            workspace=f"{{sym}}_workspace(&static_cast<const ftgen_attention_problem&>(ftgen_attention_shape(batch, heads, "
                      f"seq_q, seq_k, kv_heads, {d})))",
            doc=(f"O = softmax(scale Q K^T{' + causal mask (query i sees keys <= i; seq_k == seq_q)' if causal else ''}) V "
                 f"for every (batch, head): Q and O [batch][heads][seq_q][{d}], K and V [batch][kv_heads][seq_k][{d}] "
                 "(grouped-query attention: query head h reads K / V head h / (heads / kv_heads); kv_heads = heads "
                 f"without grouping), contiguous {'__half' if v.precision == 'fp16' else '__nv_bfloat16'}, 16-byte aligned "
                 "device pointers; scale 0 means 1 / sqrt(head_dim)"),
        )
