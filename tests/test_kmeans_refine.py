"""tf32 with near ties refined (the kmeans cutlass90 backend's ``refine`` param; ftgen/families/kmeans/model.py
refine_assign, templates/kmeans/kmeans90.cuh): on the CPU, the rows flagged are those whose two nearest tf32 distances are
closer than their error bounds (refine_band, a bound of the gap's error), a flagged row takes the nearer of the two by exact distances, the refined Lloyd loop on
Gaussian blobs follows the fp64 loop within 1e-4 where plain tf32 does not, and a fault in the exact distances is caught
by their DMR; the spec rules and what a build's source holds."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from ftgen.codegen.emit import render_spec
from ftgen.errors import SpecError
from ftgen.families.kmeans import model as m
from ftgen.spec import load_spec_text


def blobs(n=4096, dims=16, k=32, seed=0):
    X, _ = m.blobs(n, dims, k, seed=seed)
    return X, X[:: n // k][:k].copy()


def test_flagged_rows_are_the_near_ties_and_take_the_exactly_nearer_of_their_two():
    X, C = blobs()
    labels, dist, flagged = m.refine_assign(X, C)
    xx = (X * X).sum(1, dtype=np.float32)
    cc = (C * C).sum(1, dtype=np.float32)
    d = (cc[None, :] - np.float32(2) * m.gemm_nt(X, C, "tf32")).astype(np.float32)
    l1, l2 = m.top2(d)
    rows = np.arange(len(X))
    near = m.refine_flags(d[rows, l1], d[rows, l2], xx.astype(np.float64), cc[l1].astype(np.float64), cc[l2].astype(np.float64), X.shape[1])
    assert set(flagged) == set(np.flatnonzero(near & (l1 != l2))) and 0 < len(flagged) < len(X)
    exact = m.reference_distances(X, C)
    for i in flagged:
        pair = sorted((int(l1[i]), int(l2[i])))
        want = pair[int(np.argmin(exact[i, pair]))]
        assert labels[i] == want
        assert dist[i] == pytest.approx(exact[i, want], rel=1e-9, abs=1e-9)
    # outside the flagged rows the tf32 label stays; labels now agree with fp64 more often than tf32's own
    keep = np.setdiff1d(rows, flagged)
    assert (labels[keep] == l1[keep]).all()
    ref = np.argmin(exact, axis=1)
    assert (labels == ref).mean() > (l1 == ref).mean()
    assert m.check_labels(X, C, labels, "tf32")[1] == 0


@pytest.mark.parametrize("backend", ["cutlass90", "fused"])
@pytest.mark.parametrize("dist", ["normal", "loguniform", "blobs"])
def test_the_refine_bound_holds_the_error_of_the_gap_and_every_fixable_wrong_label(dist, backend):
    rng = np.random.default_rng(5)
    n, dims, k = 8192, 32, 128
    if dist == "blobs":
        X = blobs(n, dims, k, seed=2)[0]
    elif dist == "normal":
        X = rng.standard_normal((n, dims)).astype(np.float32)
    else:
        X = (np.exp(rng.uniform(np.log(1e-3), np.log(1e3), (n, dims))) * rng.choice([-1, 1], (n, dims))).astype(np.float32)
    C = X[rng.choice(n, k, replace=False)].copy()
    xx = (X * X).sum(1, dtype=np.float32).astype(np.float64)
    cc = (C * C).sum(1, dtype=np.float32)
    exact = m.reference_distances(X, C)
    if backend == "fused":  # (d: the whole distance, its norms folded into the MMA)
        d = m.fused_distances(X, C)[0]
    else:  # (d' = d - ||x||^2)
        d = (cc[None, :] - np.float32(2) * m.gemm_nt(X, C, "tf32")).astype(np.float32).astype(np.float64)
        exact = exact - (X.astype(np.float64) ** 2).sum(1)[:, None]
    l1, l2 = m.top2(d)
    rows = np.arange(n)
    cc = cc.astype(np.float64)
    band = m.REFINE_BANDS[backend]
    bound = band(xx, cc[l1], dims) + band(xx, cc[l2], dims)
    err = np.abs((d[rows, l2] - d[rows, l1]) - (exact[rows, l2] - exact[rows, l1]))
    assert (err <= bound / 2).all(), float(np.max(err / bound))
    flagged = m.refine_flags(d[rows, l1], d[rows, l2], xx, cc[l1], cc[l2], dims, backend)
    wrong = (np.argmin(exact, 1) == l2) & (l1 != l2) & (exact[rows, l2] < exact[rows, l1])
    assert wrong.any() and (flagged[wrong]).all()
    # far fewer rows than the label check's band would flag
    wide = (d[rows, l2] - d[rows, l1]) <= m.distance_band(xx, cc[l1], dims, "tf32") + m.distance_band(xx, cc[l2], dims, "tf32")
    assert flagged.mean() < wide.mean() / 2, (flagged.mean(), wide.mean())


def test_the_refined_lloyd_loop_follows_the_fp64_loop_on_blobs_where_tf32_does_not():
    X, C0 = blobs(16384, 32, 64)
    ref = [h["inertia"] for h in m.lloyd(X, C0, "fp64", iters=10, scheme="none")[2]]
    plain = [h["inertia"] for h in m.lloyd(X, C0, "tf32", iters=10, scheme="none")[2]]
    worst = lambda got: max(abs(a - b) / b for a, b in zip(got, ref))  # noqa: E731
    assert worst(plain) > 1e-4, worst(plain)
    for backend in ("cutlass90", "fused"):
        refined = [h["inertia"] for h in m.lloyd(X, C0, "tf32", iters=10, scheme="none", refine=True, backend=backend)[2]]
        assert worst(refined) < 1e-5, (backend, worst(refined))


def test_the_inertia_from_the_sums_is_the_exact_inertia():
    X, C = blobs()
    labels = m.refine_assign(X, C)[0]
    exact = float(m.reference_distances(X, C)[np.arange(len(X)), labels].sum())
    assert m.refine_inertia(X, C, labels) == pytest.approx(exact, rel=1e-8)


@pytest.mark.parametrize("bit", [40, 52, 62])
def test_a_flipped_exact_distance_is_caught_by_its_dmr_and_computed_again(bit):
    X, C = blobs()
    clean, _, flagged = m.refine_assign(X, C)
    row = int(flagged[len(flagged) // 2])
    counters = m.Counters()
    labels, dist, _ = m.refine_assign(X, C, faults=[(row, bit)], counters=counters)
    assert counters.injected == 1 and counters.detected == 1 and counters.recomputed == 1 and counters.uncorrectable == 0
    assert (labels == clean).all()


def test_the_two_copies_agree_clean_and_nan_never_agrees():
    rng = np.random.default_rng(3)
    for dims in (1, 7, 128):
        x, c = rng.standard_normal(dims).astype(np.float32), rng.standard_normal(dims).astype(np.float32)
        assert m.refine_agree(m.exact_distance(x, c), m.exact_distance(x, c, backward=True), dims)
    assert not m.refine_agree(float("nan"), 1.0, 8) and not m.refine_agree(1.0, 1.0 + 1e-9, 8)


C90 = """\
arch: [sm_90a]
precision: tf32
params: {backend: cutlass90, tile_n: 160%s}
shapes:
  - {samples: 1000, dims: 10, clusters: 7}
"""


def spec_of(body: str):
    return load_spec_text("name: t\nfamily: kmeans\n" + textwrap.dedent(body), "t.yaml")


def test_refine_is_named_and_is_an_option_of_tf32_only():
    s = spec_of(C90 % ", refine: [false, true]" + "protection: {scheme: abft, level: threadblock, inject: true}\n")
    assert sorted(v.name for v in s.variants) == ["kmeans_tf32_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_inj",
                                                  "kmeans_tf32_abft-tb_cutlass90_128x160x32_c1x1_ws-coop_refine_inj"]
    with pytest.raises(SpecError) as e:
        spec_of(C90.replace("precision: tf32", "precision: tf32x3") % ", refine: true")
    assert "refine is an option of precision tf32" in str(e.value)
    with pytest.raises(SpecError) as e:  # the other backends have no such param
        spec_of(C90.replace("params: {backend: cutlass90, tile_n: 160%s}", "params: {refine: true}"))
    assert "refine" in str(e.value)


@pytest.mark.parametrize("protect", [False, True])
def test_a_refine_build_keeps_two_keys_and_relabels_in_the_finishing_kernel(protect):
    body = C90 % ", refine: true" + ("protection: {scheme: abft, level: threadblock}\n" if protect else "")
    s = spec_of(body)
    (v,) = s.variants
    files, _ = render_spec(s)
    src = files[f"{v.name}/{v.name}.cu"]
    assert f"ftgen_km90::DirectEpilogue<{8 if protect else 0}, false, true>" in src
    for piece in ("REFINE = true", "w.keys2", "sum_norms_kernel", "refine_kernel<4><<<", "refine_inertia_kernel", "refine.dmr = PROTECTED"):
        assert piece in src, piece
    assert f"PROTECTED = {'true' if protect else 'false'}" in src
    # the refine site: a variant without refine refuses it
    assert "inj.site == FTGEN_KMEANS_SITE_REFINE && !REFINE) return cudaErrorNotSupported" in src
    plain = spec_of(C90 % "")
    files, _ = render_spec(plain)
    (p,) = plain.variants
    assert "REFINE = false" in files[f"{p.name}/{p.name}.cu"]


FUSED = """\
arch: [sm_90a]
precision: %s
protection: {scheme: abft, level: threadblock, correct: detect}
params: {backend: fused, strip: 64, warps: 4, refine: %s}
shapes:
  - {samples: 1000, dims: 10, clusters: 7}
"""


def test_the_fused_backend_takes_refine_in_tf32_and_moves_a_relabelled_sample_between_the_sums():
    (v,) = spec_of(FUSED % ("tf32", "true")).variants
    assert v.name == "kmeans_tf32_abft-tb-detect_fused_s64_w4_refine"
    files, _ = render_spec(spec_of(FUSED % ("tf32", "true")))
    src = files[f"{v.name}/{v.name}.cu"]
    for piece in ("REFINE = true", "key2 = min(max(key, o1), min(key2, o2))", "= make_int2(row, second)", "FusedMove move",
                  "refine_kernel<4><<<refine_grid, 256, 0, stream>>>(n, refine_g, &w.state->converged, refine, p->labels, move)",
                  "REFINE ? w.xx_sum : nullptr", "refine_inertia_kernel", "p->inertia && !REFINE ? p->inertia + it : nullptr"):
        assert piece in src, piece
    assert "ftgen_kmeans_refine.cuh" in "".join(files)
    (plain,) = spec_of(FUSED % ("tf32", "false")).variants
    files, _ = render_spec(spec_of(FUSED % ("tf32", "false")))
    src = files[f"{plain.name}/{plain.name}.cu"]
    assert "REFINE = false" in src and "struct FusedMove" not in src and "key2 = min(max" not in src
    with pytest.raises(SpecError) as e:
        spec_of(FUSED % ("tf32x3", "true"))
    assert "refine is an option of precision tf32" in str(e.value)
