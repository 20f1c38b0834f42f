"""``gemm``: C = alpha * A @ B + beta * C, with A (M x K), B (K x N), C (M x N).

Three backends; the family picks the first that offers a point's precision and scheme (cutlass90: by param):

* ``simt`` (:mod:`.simt`) — hand-written SIMT kernels, fp32 and fp64, unprotected or with ABFT at
  threadblock, warp or thread level fused into the kernel, or the non-fused baseline.
* ``cutlass`` (:mod:`.cutlass`) — CUTLASS 2.x tensor-op kernels emitted through ``cutlass_library``
  (tf32, tf32x3, fp16, bf16, fp64), unprotected, with TMR at four levels, or (tf32x3) threadblock ABFT.
* ``cutlass90`` (:mod:`.cutlass90`) — CUTLASS 3.x sm90 kernels (TMA, wgmma, warp-specialized schedules,
  clusters; arch sm_90a), unprotected, chosen by ``params: {backend: cutlass90}``.

Every variant exports the launcher ``<symbol>(const ftgen_gemm_problem* p, cudaStream_t stream)``
(``templates/gemm/ftgen_gemm.h``); the bench executables compare against cuBLAS.
"""

from __future__ import annotations

from ..base import Family, LauncherSignature
from .cutlass import CutlassBackend
from .cutlass90 import Cutlass90Backend
from .simt import SimtBackend


class GemmFamily(Family):
    name = "gemm"
    description = "C = alpha*A@B + beta*C; SIMT kernels with fused ABFT, CUTLASS tensor-op kernels with TMR and ABFT"
    shape_keys = ("m", "n", "k")
    backends = (SimtBackend(), CutlassBackend(), Cutlass90Backend())
    default_shapes = ({"m": 4096, "n": 4096, "k": 4096}, {"m": 1000, "n": 1234, "k": 777})
    campaign_shape = {"m": 512, "n": 512, "k": 1024}  # many trials: small enough, K deep enough
    template_dir = "gemm"
    launcher = LauncherSignature(
        params="const ftgen_gemm_problem* p, cudaStream_t stream",
        args="p, stream",
        selector_args=("p->m", "p->n", "p->k"),
    )

    def backend(self, precision, protection, params) -> str:
        """``params: {backend: cutlass90}`` selects the Hopper backend; otherwise precision and scheme decide."""
        if params.get("backend") == "cutlass90":
            return "cutlass90"
        return super().backend(precision, protection, params)
