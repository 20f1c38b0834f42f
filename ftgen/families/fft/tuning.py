"""The ``fft`` family's measured choices: where a variant sets no plan key, the plan, encoding, prefetch and hook
placement that plan searches on the GPU measured faster than the rules of :mod:`.plan`, read from the GPU's tuning file
(:mod:`ftgen.tuning`, ``ftgen/tuning/<gpu>.json``), and the entries a search's winners give that file.

An entry's key is ``{"precision", "level", "logn"}`` (any architecture) or the same with ``"arch": "sm_90"`` (builds
whose every architecture has thread-block clusters, sm_90 or later: cluster plans and the hook placement of injection
builds, both measured there). Its params are plan keys (:data:`PLAN_KEYS`, ``tcols``) and the settings
:data:`SETTINGS`. A variant's name is derived from its resolved parameters only, whichever entry supplied them.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from ... import tuning as tuning_data
from .plan import (
    PLAN_KEYS,
    _split_log,
    auto_bs,
    auto_launches,
    auto_n,
    auto_tcols,
    ilog2,
    plan_level,
)

FAMILY = "fft"
CLUSTER_ARCH = "sm_90"
# measured values that are not plan keys: a variant's own non-zero value wins over them
SETTINGS = ("hooksplit", "tbenc", "prefetch")
# the settings' values that are the rules' (not written to a tuning file)
SETTING_DEFAULTS = {"hooksplit": 0, "tbenc": 1, "prefetch": 1}


# the parameters an entry may set
ENTRY_PARAMS = (*PLAN_KEYS, "tcols", *SETTINGS)


def _split(params: Mapping[str, Any], where: str = "") -> tuple[dict, dict]:
    """(plan keys and tcols, settings) of an entry's params; TuningError for a parameter an entry may not set."""
    for k, v in params.items():
        if k not in ENTRY_PARAMS or not isinstance(v, int) or isinstance(v, bool):
            raise tuning_data.TuningError(f"tuning file {where}: fft entry params.{k}: {v!r}; an entry sets integers of "
                                          f"{', '.join(ENTRY_PARAMS)}")
    plan = {k: v for k, v in params.items() if k not in SETTINGS}
    return plan, {k: v for k, v in params.items() if k in SETTINGS}


def measured_params(precision: str, level: str, logn: int, inject: bool = False, clusters: bool = True) -> dict:
    """The measured choices for a size: the plan of the size's entry (sm_90 builds: the cluster-arch entry's plan first),
    else, for the simultaneous two-sided-tb, the unprotected plan of that size (never a cluster plan: those are keyed to
    the unprotected level); the settings tbenc and prefetch of the size's entry, and for injection builds with clusters
    the cluster-arch entry's hooksplit. `clusters` False: a build for an architecture before sm_90 (no cluster-arch
    entries). {} where nothing was measured."""
    t = tuning_data.load()
    fam, where = t.for_family(FAMILY), str(t.path)
    key = {"precision": precision, "level": level, "logn": logn}
    plan, settings = _split(fam.lookup(**key), where)
    cl_plan, cl_settings = _split(fam.lookup(**key, arch=CLUSTER_ARCH), where) if clusters else ({}, {})
    if cl_plan:
        plan = cl_plan
    elif not plan and plan_level(level, logn) != level:
        plan = _split(fam.lookup(**{**key, "level": plan_level(level, logn)}), where)[0]
    out = {**plan, **{k: v for k, v in settings.items() if k != "hooksplit"}}
    if inject and cl_settings.get("hooksplit"):
        out["hooksplit"] = cl_settings["hooksplit"]
    return out


def resolve_params(precision: str, level: str, params: Mapping[str, Any], inject: bool = False, clusters: bool = True) -> dict:
    """Fill the automatic (0) parameters of a fixed-size variant (`inject`: built with fault injection, whose measured
    choices include the hook placement; `clusters`: every architecture of the build has thread-block clusters). A variant
    that gives none of the plan keys takes the measured choices of its size (measured_params), then the rules fill the
    rest. Returns a new dict; raises ValueError with a reason when the given parameters cannot form a plan."""
    p = dict(params)
    logn = p["logn"]
    N = 1 << logn
    if not any(p.get(k) for k in PLAN_KEYS):
        for k, v in measured_params(precision, level, logn, inject, clusters).items():
            if k not in SETTINGS or not p.get(k):
                p[k] = v
    if not inject:
        p["hooksplit"] = 0  # (the hook placement is for injection builds)
    p["tbenc"] = p.get("tbenc") or SETTING_DEFAULTS["tbenc"]
    p["prefetch"] = p.get("prefetch") or SETTING_DEFAULTS["prefetch"]
    # the simultaneous two-sided-tb runs the unprotected kernel's data path (its checks ride along in registers): the
    # unprotected plans' rules
    level = plan_level(level, logn, p.get("tbseq", 0))
    Ns = [p.get("N1", 0), p.get("N2", 0), p.get("N3", 0)]
    launches = p.get("launches", 0)
    given = [x for x in Ns if x]
    if p.get("cluster") and not given and not launches:
        # cluster plans: N2 = 2 (the smallest cluster) unless given
        launches = 2
        given = [N // 2] if N >= 4 else []
        Ns = given + [0, 0]
    if given:
        if Ns[len(given):] != [0] * (3 - len(given)):
            raise ValueError("N1, N2, N3 must be given in order (N2 needs N1, N3 needs N2)")
        names = "*".join(f"N{i + 1}" for i in range(len(given)))
        prod = math.prod(given)
        if N % prod:
            raise ValueError(f"{names} = {prod} does not divide n = {N}")
        rest = N // prod
        if rest == 1:
            if launches and launches != len(given):
                raise ValueError(f"launches={launches} but {names} = n already ({len(given)} launch(es))")
        else:
            more = (launches - len(given)) if launches else 1
            if len(given) == 3 or more <= 0:
                raise ValueError(f"{names} = {prod} is not n = {N}")
            if rest < 2**more:
                raise ValueError(f"{names} = {prod} leaves n/{prod} = {rest}, too small for {more} more launch(es)")
            given = given + [1 << x for x in _split_log(ilog2(rest), more)]
    else:
        if not launches:
            launches = auto_launches(precision, logn, level)
        if launches > logn:
            raise ValueError(f"{launches} launches need n >= {2 ** launches}")
        given = [1 << x for x in _split_log(logn, launches)]
    sizes = given
    L = p.get("tcols", 0) or (1 if p.get("cluster") else auto_tcols(precision, level, launches=len(sizes), rmax=max(sizes)))
    out = dict(p)
    out["launches"] = len(sizes)
    for i in range(3):
        out[f"N{i + 1}"] = sizes[i] if i < len(sizes) else 0
        if i >= len(sizes):
            out[f"n{i + 1}"] = 0
            out[f"bs{i + 1}"] = 0
            continue
        R = sizes[i]
        n = p.get(f"n{i + 1}", 0) or auto_n(R, precision, level, single=len(sizes) == 1, tcols=L)
        out[f"n{i + 1}"] = n
        bs = p.get(f"bs{i + 1}", 0) or auto_bs(precision, R, min(n, R), strided=len(sizes) > 1, L=L, single=len(sizes) == 1, level=level)
        if len(sizes) > 1 and not p.get(f"bs{i + 1}", 0):
            # consecutive columns of one block must share (b, m): bs <= S (later launches) or M' (first)
            S = math.prod(sizes[:i])
            limit = S if i > 0 else N // R
            bs = min(bs, limit)
            bs = max(bs, min(L, limit))
        out[f"bs{i + 1}"] = bs
    out["tcols"] = L
    if p.get("cluster"):
        # the fused last launch has no kernel: its DFT is one codelet of its radix per position; in two-launch plans
        # launch 1 takes one column per block
        nl = out["launches"]
        if nl in (2, 3):
            out[f"n{nl}"] = out[f"N{nl}"]
            out[f"bs{nl}"] = 1
            if nl == 2 and not p.get("bs1", 0):
                out["bs1"] = 1
    return out


def _speed(row: Mapping[str, Any]) -> float:
    """A row's speed for choosing among winners of one key: x its reference where timed, else 1 / ms."""
    ms = row["ms"]["median"] if isinstance(row.get("ms"), Mapping) else float(row["ms"])
    ref = row.get("ref") or {}
    return float(ref["ms"]) / ms if ref.get("ms") else 1.0 / ms


def tuning_entries(rows: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Tuning entries from search winners (result rows: ``kernel``, ``precision``, ``protection``, ``params`` as resolved,
    ``shape``, ``ms``, ``ref``): per precision, level and size the fastest verified row of a fixed-size variant (where
    several shapes share a size: the best ratio to the reference) becomes a plan entry, its cluster plan and hook
    placement keyed to the cluster architectures. Rows that did not verify (or ran unverified: ``--no-ref``), were
    skipped, or come from every-size variants (logn 0: the rules' plans) give none."""
    best: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for r in rows:
        p = r.get("params") or {}
        if (not r.get("kernel") or "skipped" in r or r.get("ok") is False or r.get("verified") is False
                or not r.get("ms") or not p.get("logn")):
            continue
        prot = r.get("protection") or {}
        level = prot.get("level", "none") if prot.get("scheme", "none") != "none" else "none"
        key = (r["precision"], level, int(p["logn"]))
        if key not in best or _speed(r) > _speed(best[key]):
            best[key] = r
    out = []
    for (precision, level, logn), r in sorted(best.items()):
        p = r["params"]
        plan = {k: p[k] for k in (*PLAN_KEYS, "tcols") if p.get(k)}
        settings = {k: p[k] for k in SETTINGS if p.get(k) and p[k] != SETTING_DEFAULTS[k]}
        inject = bool((r.get("protection") or {}).get("inject")) and level != "none"
        key = {"precision": precision, "level": level, "logn": logn}
        evidence = f"{r['kernel']} at n={r['shape'].get('n')} batch={r['shape'].get('batch')}: {_speed(r):.4g}" + (" x " + r["ref"]["lib"] if (r.get("ref") or {}).get("lib") else "")
        general = {k: v for k, v in settings.items() if k != "hooksplit"}
        cl = {"hooksplit": settings["hooksplit"]} if inject and settings.get("hooksplit") else {}
        if plan.get("cluster"):
            cl = {**plan, **cl}
        else:
            general = {**plan, **general}
        if general:
            out.append({"key": key, "params": general, "evidence": evidence})
        if cl:
            out.append({"key": {**key, "arch": CLUSTER_ARCH}, "params": cl, "evidence": evidence})
    return out
