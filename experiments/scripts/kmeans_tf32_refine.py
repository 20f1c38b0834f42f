"""Sizing, on the NumPy model, of a tf32 assign with near ties refined: why tf32's Lloyd loop on Gaussian blobs ends
1e-3 from the fp64 loop's, and what relabelling the near ties in fp32 would buy and cost.

    python experiments/scripts/kmeans_tf32_refine.py [SAMPLES DIMS CLUSTERS ITERS SEED]   (default 65536 32 128 10 0)

Four loops from the same C0 (strided samples of blobs(spread 0.1)): fp64 (exact distances), tf32 (the model's TF32
distance GEMM, `xx + cc - 2 x.c` in fp32, the arg-min on it), refine: a sample whose tf32 distances to two or more
centroids lie within the rounding band of the nearest (`distance_band`, the bound the label check uses, for both) is
relabelled by fp64 distances to those candidates only, and top2: the two nearest only, flagged by the tighter
`model.refine_band` (the cutlass90 backend's ``refine`` option, `model.refine_assign`). The update is the model's in
all four (fp64 sums, fp32 centroids). Printed per iteration: each loop's inertia computed exactly (fp64) from its own labels and centroids,
relative to the fp64 loop's, and the refined loop's flagged samples and candidates per flagged sample -- what a
kernel would recompute beside the GEMM.
"""

from __future__ import annotations

import sys

import numpy as np

from ftgen.families.kmeans import model as km


def tf32_distances(X, C):
    xx = (X.astype(np.float32) ** 2).sum(1, dtype=np.float32)
    cc = (C.astype(np.float32) ** 2).sum(1, dtype=np.float32)
    acc = km.gemm_nt(X, C, "tf32")
    return (xx[:, None] + cc[None, :] - np.float32(2) * acc).astype(np.float32), xx, cc


def assign(X, C, mode):
    if mode == "fp64":
        return np.argmin(km.reference_distances(X, C), axis=1), 0, 0.0
    d, xx, cc = tf32_distances(X, C)
    labels = np.argmin(d, axis=1)
    if mode == "tf32":
        return labels, 0, 0.0
    rows = np.arange(X.shape[0])
    best = d[rows, labels].astype(np.float64)
    band = km.distance_band(xx.astype(np.float64)[:, None], cc.astype(np.float64)[None, :], X.shape[1], "tf32")
    band_best = band[rows, labels]
    cand = d.astype(np.float64) - best[:, None] <= band + band_best[:, None]  # the nearest is always a candidate
    if mode == "top2":  # only the two nearest: what the kernel's refine option does (model.refine_assign)
        labels, _, flagged = km.refine_assign(X, C)
        return labels, flagged.size, 2.0 if flagged.size else 0.0
    flagged = np.flatnonzero(cand.sum(1) > 1)
    if flagged.size:
        D = km.reference_distances(X[flagged], C)
        D[~cand[flagged]] = np.inf
        labels[flagged] = np.argmin(D, axis=1)
    return labels, flagged.size, float(cand[flagged].sum(1).mean()) if flagged.size else 0.0


def inertia(X, C, labels):
    return float(km.reference_distances(X, C)[np.arange(X.shape[0]), labels].sum())


def main(argv: list[str]) -> int:
    n, d, k, iters, seed = (int(a) for a in (argv + ["65536", "32", "128", "10", "0"][len(argv):]))
    X, _ = km.blobs(n, d, k, seed=seed)
    C0 = X[:: n // k][:k].copy()
    loops = {m: C0.copy() for m in ("fp64", "tf32", "refine", "top2")}
    print(f"{n} x {d} x {k}, blobs, C0 strided; inertia relative to the fp64 loop's, per iteration")
    print(f"{'iter':>4} {'tf32':>10} {'refine':>10} {'flagged':>8} {'cand':>5} {'top2':>10} {'flagged':>8}")
    for it in range(iters):
        res = {}
        for m, C in loops.items():
            labels, nflag, ncand = assign(X, C, m)
            res[m] = (inertia(X, C, labels), nflag, ncand)
            loops[m] = km.update(X, labels, C, scheme="none")[0]
        ref = res["fp64"][0]
        rel = {m: abs(res[m][0] - ref) / ref for m in ("tf32", "refine", "top2")}
        print(f"{it:>4} {rel['tf32']:>10.2e} {rel['refine']:>10.2e} {res['refine'][1] / n:>8.2%} {res['refine'][2]:>5.2f}"
              f" {rel['top2']:>10.2e} {res['top2'][1] / n:>8.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
