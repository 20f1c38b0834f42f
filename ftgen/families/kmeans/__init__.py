"""``kmeans``: fault-tolerant Lloyd iterations over X (samples x dims) into C (clusters x dims).

The package by concern:

* :mod:`.family`: :class:`KmeansFamily` and its ``mma`` backend (parameters, constraints, names, template context).
* :mod:`.model`: the NumPy model of the protected iteration (the distance GEMM's threadblock ABFT with its derived
  threshold, the DMR arg-min and norms, the DMR update with its invariants) that the kernels implement, and of the
  initial centroids a launch can choose (random sampling, kmeans++).
* :mod:`.flash_ref`: the driver that times flash-kmeans alternately with a variant on the bench executable's own
  data (the rows' ``refs["flash-kmeans"]``).

Every variant exports ``<symbol>(const ftgen_kmeans_problem* p, cudaStream_t stream)`` (``templates/kmeans/
ftgen_kmeans.h``): a whole Lloyd loop (``max_iters`` iterations, or fewer when the largest centroid shift falls under
``tol``, decided on the device) from the initial centroids in C, or from samples it chooses by ``init`` and ``seed``.
"""

from .family import MMA_SHAPE, PARAMS, Geometry, KmeansFamily, MmaBackend

__all__ = ["KmeansFamily", "MmaBackend", "Geometry", "PARAMS", "MMA_SHAPE"]
