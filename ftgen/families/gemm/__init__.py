"""``gemm``: C = alpha * A @ B + beta * C, with A (M x K), B (K x N), C (M x N).

Three backends; the family picks the first that offers a point's precision and scheme (cutlass90: by param):

* ``simt`` (:mod:`.simt`) — hand-written SIMT kernels, fp32 and fp64, unprotected or with ABFT at
  threadblock, warp or thread level fused into the kernel, or the non-fused baseline.
* ``cutlass`` (:mod:`.cutlass`) — CUTLASS 2.x tensor-op kernels emitted through ``cutlass_library``
  (tf32, tf32x3, fp16, bf16, fp64), unprotected, with TMR at four levels, or (tf32x3) threadblock ABFT.
* ``cutlass90`` (:mod:`.cutlass90`) — CUTLASS 3.x sm90 kernels (TMA, wgmma, warp-specialized schedules,
  clusters; arch sm_90a), unprotected, chosen by ``params: {backend: cutlass90}``. ``params: {backend: cutlass}``
  chooses the CUTLASS 2.x kernels where the SIMT ones would be the default (fp64 on the tensor cores).

Every variant exports the launcher ``<symbol>(const ftgen_gemm_problem* p, cudaStream_t stream)``
(``templates/gemm/ftgen_gemm.h``); the bench executables compare against cuBLAS.
"""

from __future__ import annotations

from ..base import PRECISION_TAG, Family, LauncherSignature, LibraryEntry, Variant
from .cutlass import COPIES, CutlassBackend, Geometry
from .cutlass90 import Cutlass90Backend, abft_descriptor
from .cutlass90 import Geometry as Geometry90
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

    # ---- the shared library ---------------------------------------------------------------
    # Rows per launch of the library's entry point: taller problems run as row blocks (C[r0:r1] =
    # alpha A[r0:r1] B + beta C[r0:r1]), so no variant meets a grid limit (65535 blocks in y) at any legal M;
    # a multiple of 64, so every block starts as aligned as the caller's pointers.
    LIB_ROWS = 65472

    @staticmethod
    def _layouts(v: Variant) -> tuple[bool, bool]:
        return v.get("layout_a", "row") == "row", v.get("layout_b", "row") == "row"

    def library_group(self, v: Variant) -> str:
        row_a, row_b = self._layouts(v)
        tag = PRECISION_TAG[v.precision]
        return f"gemm_{tag}" if row_a and row_b else f"gemm_{tag}_{'r' if row_a else 'c'}{'r' if row_b else 'c'}"

    def library_fault_plan(self, v: Variant) -> str:
        # faults as the benches plan them (one per threadblock, a random accumulator element, k-tile and bit), for the
        # first row block of a call (ftgen::plan_faults); later row blocks of a taller call take the same plan
        if not v.protection.inject:
            return ""
        rows = f"(int)(m < {self.LIB_ROWS} ? m : {self.LIB_ROWS})"
        if v.backend == "simt":
            return (f"ftgen_gemm_geometry geo;\n{{sym}}_geometry({rows}, n, k, &geo);\nblocks = geo.blocks;\n"
                    "plan = ftgen::plan_faults(handle->inject_n, fseed, geo.blocks, geo.threads, geo.elems_per_thread, geo.steps, "
                    "geo.value_bits, ftgen::kBitflip, -1, 0.0);")
        if v.backend == "cutlass90" and (v.protection.scheme == "tmr" or Geometry90(v).abft16):
            # (tile, copy) units over the sm90 kernel's tiles, the threads that hold a tile's accumulators, as the bench
            # (16-bit ABFT: one unit per tile)
            g90 = Geometry90(v)
            tile, threads, elems, units = g90.tile, g90.threads, g90.acc_elems, COPIES if g90.tmr else 1
        else:
            if v.backend == "cutlass90":  # ABFT: the check's sm80 descriptor's tiles, as the bench plans them
                if v.protection.scheme != "abft":
                    return ""
                v = abft_descriptor(v)
            elif v.backend != "cutlass":
                return ""
            g = Geometry(v)
            # fault units per tile: ABFT's tile, or each TMR copy
            tile, threads, elems, units = g.tb, g.threads, g.acc_elems, 1 if g.level == "abft" else COPIES
        tm, tn, tk = tile
        return (f"blocks = (long long)(({rows} + {tm - 1}) / {tm}) * ((n + {tn - 1}) / {tn}) * {units};\n"
                f"plan = ftgen::plan_faults(handle->inject_n, fseed, blocks, {threads}, {elems}, (k + {tk - 1}) / {tk}, "
                f"{64 if v.precision == 'fp64' else 32}, ftgen::kBitflip, -1, 0.0);")

    def library_entry(self, v: Variant) -> LibraryEntry:
        row_a, row_b = self._layouts(v)
        t = {"fp32": "float", "tf32": "float", "tf32x3": "float", "fp64": "double"}.get(v.precision, "void")
        esize = {"fp64": 8, "fp16": 2, "bf16": 2}.get(v.precision, 4)
        a_off = "r0 * (size_t)lda" if row_a else "r0"  # first element of row r0
        return LibraryEntry(
            params=f"int m, int n, int k, double alpha, const {t}* A, int lda, const {t}* B, int ldb, double beta, {t}* C, int ldc",
            shape=("m", "n", "k"),
            legal=f"m >= 1 && n >= 1 && k >= 1 && lda >= {'k' if row_a else 'm'} && ldb >= {'n' if row_b else 'k'} && ldc >= n && A && B && C",
            problem_type="ftgen_gemm_problem",
            fill="P.n = n, P.k = k, P.alpha = alpha, P.beta = beta, P.B = B, P.lda = lda, P.ldb = ldb, P.ldc = ldc;",
            workspace_params="int m, int n, int k",
            workspace=f"{{sym}}_workspace(m < {self.LIB_ROWS} ? m : {self.LIB_ROWS}, n, k)",
            call=(
                f"for (long long r0 = 0; r0 < m; r0 += {self.LIB_ROWS}) {{\n"
                f"  P.m = (int)(m - r0 < {self.LIB_ROWS} ? m - r0 : {self.LIB_ROWS});\n"
                f"  P.A = static_cast<const char*>(static_cast<const void*>(A)) + ({a_off}) * {esize};\n"
                f"  P.C = static_cast<char*>(static_cast<void*>(C)) + r0 * (size_t)ldc * {esize};\n"
                "  const cudaError_t e = {launch}(&P, stream);\n"
                "  if (e != cudaSuccess) return e;\n"
                "}\n"
                "return cudaSuccess;"
            ),
            doc=(
                f"C = alpha * A @ B + beta * C ({v.precision}); A (m x k) {'row' if row_a else 'column'}-major, "
                f"B (k x n) {'row' if row_b else 'column'}-major, C (m x n) row-major; device pointers"
                + ("" if t != "void" else f" to {v.precision} ({esize}-byte) elements")
            ),
        )

