"""The ``fft`` family class: parameters, constraints and their reasons, kernel names, shapes and the template context.

Kernel names
------------
::

    fft_<c2c|z2z>_<f32|f64>_<protection>_<fwd|inv>_logn<L>_N<N1>[x<N2>[x<N3>]]_n<n1>[x..]_bs<b1>[x..]_t<tcols>[_mb<minb>][_sm|_sq][_cl|_cls][_te|_tl][_pf][_hs|_hc|_hk][_inj]
    fft_<c2c|z2z>_<f32|f64>_<protection>_<fwd|inv>_auto[_t<tcols>][_te<tbenc>][_pf<prefetch>][_hs|_hc|_hk][_inj]        (logn: 0, every size)

``<protection>`` is :meth:`Protection.token` (``none``, ``abft-1sided``, ``abft-2sided-thread``,
``abft-2sided-tb``, with ``-detect``, ``-th<x>`` suffixes); automatic parameters are resolved
before naming (the rules' values or the tuning file's measured ones), so the name always shows the
plan that is built and depends on nothing else.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from ...errors import SpecError
from ..base import (
    CLUSTER_ARCHS,
    PRECISION_TAG,
    UNIT_ROUNDOFF,
    Backend,
    EmittedVariant,
    Family,
    LauncherSignature,
    LibraryEntry,
    Param,
    Protection,
    Variant,
    positive_int,
    suggest,
)
from .model import _sign
from .plan import (
    ABFT_LEVELS,
    AUTO_MAX_LOGN,
    CODELET_RADICES,
    CTYPE,
    DIRECTIONS,
    ESIZE,
    K_1S,
    K_TB,
    K_TH,
    LEVEL_CODE,
    LOCATE_K,
    LOCATE_TOL,
    MAX_LOGN,
    PLAN_KEYS,
    PRECISIONS,
    REREADS_INPUT,
    TB_PRE,
    TB_SEQ_MAX_LOGN,
    TBENC3_MIN_T,
    TOL_C,
    TOL_ELEM_C,
    TOTAL_LOG,
    Plan,
    ilog2,
    is_pow2,
    make_plan,
    plan_reasons,
)
from .tuning import resolve_params, tuning_entries

def _pow2_or_zero(v: int) -> str | None:
    if v == 0 or is_pow2(v):
        return None
    return f"{v} is not a power of two (or 0 for automatic)"


def _range(lo: int, hi: int):
    def check(v: int) -> str | None:
        return None if lo <= v <= hi else f"{v} is outside {lo}..{hi}"

    return check


PARAMS = (
    Param("direction", str, ("forward",), "transform direction (inverse is unnormalised, like cuFFT)", choices=DIRECTIONS),
    Param("logn", int, (0,), "log2 of the size the variant is built for; 0: every size 2^1..2^max with automatic plans", check=_range(0, 26)),
    Param("launches", int, (0,), "kernels per transform, 1..3 (0: automatic)", check=_range(0, 3)),
    Param("N1", int, (0,), "size of launch 1 (0: automatic)", check=_pow2_or_zero),
    Param("N2", int, (0,), "size of launch 2 (0: automatic / none)", check=_pow2_or_zero),
    Param("N3", int, (0,), "size of launch 3 (0: automatic / none)", check=_pow2_or_zero),
    Param("n1", int, (0,), "elements per thread (sub-pass radix) in launch 1 (0: automatic)", choices=(0,) + CODELET_RADICES),
    Param("n2", int, (0,), "elements per thread in launch 2 (0: automatic)", choices=(0,) + CODELET_RADICES),
    Param("n3", int, (0,), "elements per thread in launch 3 (0: automatic)", choices=(0,) + CODELET_RADICES),
    Param("bs1", int, (0,), "columns (signals) per threadblock in launch 1 (0: automatic)", check=_pow2_or_zero),
    Param("bs2", int, (0,), "columns per threadblock in launch 2 (0: automatic)", check=_pow2_or_zero),
    Param("bs3", int, (0,), "columns per threadblock in launch 3 (0: automatic)", check=_pow2_or_zero),
    Param("tcols", int, (0,), "columns each thread holds in registers, the two-sided batch (0: automatic)", check=_pow2_or_zero),
    Param("minb", int, (0,), "resident threadblocks per SM every launch is compiled for (__launch_bounds__ minimum: registers <= 65536 / (minb * threads); 0: automatic)", check=_range(0, 32)),
    Param("cluster", int, (0,), "the last launch (2, 4 or 8 points) inside the one before, whose blocks of the same columns form a thread-block cluster exchanging through distributed shared memory (sm_90; unprotected or two-sided-tb): 1 strided loads, 2 (unprotected two-launch plans) each block loads a contiguous part and scatters it to the blocks' tiles; 0: separate launches", choices=(0, 1, 2)),
    Param("tbenc", int, (0,), "two-sided-tb with the simultaneous design (multi-launch plans): 2 the input-side encodings in the staged load (a thread sums the adjacent columns it loads before the table read and the products) and, in launches without launch twiddles, the output side in the staged store, the prefilter deciding on the block's sums; 1 each thread encodes its own columns, the prefilter per column group; 0 automatic (the tuning file's value for the size with the measured plans, else 1); 3 as 2 in the launches of at least TBENC3_MIN_T threads per column only", choices=(0, 1, 2, 3)),
    Param("tbseq", int, (0,), "two-sided-tb's design: 2 sequential (a thread's columns one after the other, the checksum column transformed in the common path; one-launch plans), 1 simultaneous (the unprotected kernel's data path with the checks in registers), 0 by size (sequential up to 2^TB_SEQ_MAX_LOGN)", choices=(0, 1, 2)),
    Param("prefetch", int, (0,), "the sequential levels' one-launch plans (one-sided; two-sided-tb up to 2^12) with more than one column step: 2 each step prefetches the next step's columns into L2 (one prefetch per 128-byte line), so their loads wait for L2 instead of DRAM; 1 none; 0 automatic (the tuning file's value for the size with the measured plans, else 1)", choices=(0, 1, 2)),
    Param("hooksplit", int, (0,), "injection builds of a protected level: 1 only the threadblocks the fault plan gives a fault carry the fault hooks, the others run the code of the build without injection code (a caller that names the faulted block, ftgen_fft_problem::fault_block_hint, spares them the fault table's read); 2 the same with that block's hooked body a function call of its own (its registers apart from the code the other blocks run); 3 the faulted block (its cluster in cluster plans) in a kernel of its own on a second stream of the greatest priority beside the launch's kernel of the other blocks, which holds no hooked code (faults the caller does not name: the split kernel over every block); 0 (automatic: the measured plans of sm_90 builds set 1, 2 or 3 where the tuning file says each measured fastest) every block carries them", choices=(0, 1, 2, 3)),
)

# name tokens of hooksplit 0, 1, 2, 3
HOOKSPLIT_TAG = {0: "", 1: "_hs", 2: "_hc", 3: "_hk"}


def c_symbol(name: str) -> str:
    """The C identifier of a kernel name (names may contain '-' from the protection token)."""
    return name.replace("-", "_")


# sizes the bench executables of every-size variants measure by default (total 2^26 / 2^25 elements)
AUTO_BENCH_LOGNS = (4, 10, 12, 16, 20, 24)


class FftFamily(Family):
    name = "fft"
    description = "batched C2C/Z2Z FFTs (cuFFT layout), 1-3 launches of Stockham passes, with TurboFFT's one-/two-sided ABFT"
    shape_keys = ("n", "batch")
    precisions = PRECISIONS
    schemes = {"none": (), "abft": ABFT_LEVELS}
    backends = (Backend(name="stockham", precisions=PRECISIONS, params=PARAMS, requires=("cufft",),
                        levels={"abft": {"two-sided-tb": "2sided-tb", "two-sided-thread": "2sided-thread", "one-sided": "1sided"}}),)
    default_shapes = ({"n": 4096, "batch": 16384}, {"n": 1048576, "batch": 64})
    campaign_shape = {"n": 4096, "batch": 64}  # small: many trials; batch a multiple of every tile
    template_dir = "fft"
    fault_sites = ("stage",)  # faults land in a stage's values (the executables' one site)

    # ---- parameters -----------------------------------------------------------------------
    def param_defs(self, precision: str, protection: Protection) -> tuple[Param, ...]:
        return PARAMS

    def protection_ok(self, precision: str, protection: Protection, params=None) -> str | None:
        reason = super().protection_ok(precision, protection, params)
        if reason:
            return reason
        if protection.enabled:
            if protection.interval != 1:
                return f"fft checks once per launch and column: protection.interval must be 1, not {protection.interval}"
            if protection.correct == "detect" and protection.level != "one-sided":
                return f"level {protection.level} corrects online; for detect-and-recompute use level one-sided"
        return None

    # ---- plans ------------------------------------------------------------------------------
    @staticmethod
    def clusters_ok(v: Variant) -> bool:
        """Thread-block clusters (cluster plans) need sm_90 or later in every architecture the variant is built for."""
        return all(a in CLUSTER_ARCHS for a in v.arch)

    @staticmethod
    def level_of(v: Variant) -> str:
        return v.protection.level if v.protection.enabled else "none"

    def resolved(self, v: Variant) -> dict:
        """Parameters with the automatic ones filled (fixed-size variants); raises ValueError."""
        p = v.param_dict
        if p["logn"] == 0:
            return dict(p)
        return resolve_params(v.precision, self.level_of(v), p, v.protection.injects, self.clusters_ok(v))

    def plans(self, v: Variant) -> list[Plan]:
        level = self.level_of(v)
        p = v.param_dict
        if p["logn"]:
            return [make_plan(v.precision, level, self.resolved(v))]
        out = []
        for logn in range(1, AUTO_MAX_LOGN + 1):
            q = resolve_params(v.precision, level, {**{k: 0 for k in PLAN_KEYS}, "logn": logn, "tcols": p.get("tcols", 0), "hooksplit": p.get("hooksplit", 0),
                                                    "tbenc": p.get("tbenc", 0), "prefetch": p.get("prefetch", 0)},
                               v.protection.injects,
                               self.clusters_ok(v))
            out.append(make_plan(v.precision, level, q))
        return out

    # ---- constraints ------------------------------------------------------------------------
    def constraints(self, v: Variant) -> list[str]:
        p = v.param_dict
        level = self.level_of(v)
        r: list[str] = []
        if p["logn"] > MAX_LOGN[v.precision]:
            return [f"logn={p['logn']} exceeds the largest {v.precision} size this family supports (2^{MAX_LOGN[v.precision]})"]
        if p["logn"] == 0:
            fixed = [k for k in PLAN_KEYS if p.get(k)]
            if fixed:
                return [f"logn: 0 builds every size with automatic plans; give logn to set {', '.join(fixed)}"]
        try:
            plans = self.plans(v)
        except ValueError as e:
            return [str(e)]
        if not self.clusters_ok(v) and any(pl.cluster for pl in plans):
            r.append(f"cluster: {p.get('cluster')} needs thread-block clusters (sm_90 or later); arch lists {', '.join(v.arch)}")
        for plan in plans:
            reasons = plan_reasons(plan, level)
            if p["logn"] == 0 and reasons:
                reasons = [f"n=2^{plan.logn}: {x}" for x in reasons]
            r.extend(reasons)
        if p.get("tbenc") in (2, 3) and p["logn"] and not any(lp.tb_stage for pl in plans for lp in pl.launches):
            r.append(f"tbenc: {p['tbenc']} moves the simultaneous two-sided-tb's encodings into the staged loads of multi-launch plans; "
                     f"this variant has none (level {level}, log n {p['logn']})")
        if p.get("tbseq") and level != "two-sided-tb":
            r.append(f"tbseq: {p['tbseq']} chooses two-sided-tb's design; this variant's level is {level}")
        elif p.get("tbseq") == 2 and any(lp.N != lp.R for pl in plans for lp in pl.launches):
            r.append("tbseq: 2 (the sequential design) needs a one-launch plan (launches: 1, N1 = n)")
        if p.get("prefetch") == 2 and p["logn"] and not any(lp.pf for pl in plans for lp in pl.launches):
            r.append(f"prefetch: 2 prefetches the next column step of the sequential levels' one-launch plans (one-sided, two-sided-tb "
                     f"up to 2^{TB_SEQ_MAX_LOGN}, more than one step); this variant has none (level {level}, log n {p['logn']})")
        if p.get("hooksplit") and not v.protection.injects:
            r.append(f"hooksplit: {p['hooksplit']} places the fault hooks of injection builds; this variant has none (protection inject: false)")
        elif p.get("hooksplit") and level == "none":
            r.append(f"hooksplit: {p['hooksplit']} places the fault hooks of protected levels; this variant is unprotected")
        return r

    def constraint_docs(self) -> list[str]:
        return [
            "n = 2^logn, logn 1..26 (fp32) / 1..25 (fp64); N1*N2*N3 = n; 1..3 launches",
            "n1..n3 in 2, 4, 8, 16, 32 (sub-pass radix = elements per thread); the last sub-pass may be smaller",
            "multi-launch: bs1 <= n/N1, bs_l <= N1*...*N_(l-1) (a block's columns share one signal)",
            "bs a multiple of tcols; two-sided levels need tcols >= 2",
            "threads per block = (bs/tcols) * (N_l/n_l) <= 1024",
            "shared memory <= 227 KB (exchanges in rounds when the tile would exceed ~100 KB); estimated registers <= 232",
            "minb (0: automatic) resident blocks per SM: minb * threads <= 2048, minb * shared memory <= 228 KB",
            "cluster 1 / 2: unprotected (tcols = 1) or the simultaneous two-sided-tb (log n > 12, every thread the same number of fused DFTs), two or three launches, the last N_L in 2, 4, 8 and N_(L-1) >= 2 N_L; two launches: bs1 <= N2 / 2; 2 (scattered loads): unprotected two-launch plans, bs1 = 1; every arch sm_90 or later",
            "hooksplit 1: injection builds of a protected level",
            "tbseq 1 / 2: two-sided-tb; 2 (sequential) one-launch plans",
            f"prefetch 2: one-sided or two-sided-tb (log n <= {TB_SEQ_MAX_LOGN}) one-launch plans of more than one step (tcols > 1 columns per thread)",
            f"tbenc 2 / 3: two-sided-tb plans with a simultaneous launch whose input is staged (multi-launch; 3: of at least {TBENC3_MIN_T} threads per column)",
            "no plan key given: the measured plan of the tuning file (ftgen/tuning/<gpu>.json) for that precision, level and size, else the rules' plan",
            f"logn: 0 (every size 2^1..2^{AUTO_MAX_LOGN}) takes the automatic plans (tcols may be set)",
            "protection: abft levels one-sided, two-sided-thread, two-sided-tb; interval 1; correct: detect only with one-sided",
        ]

    # ---- names ------------------------------------------------------------------------------
    def kernel_name(self, v: Variant) -> str:
        p = v.param_dict
        head = f"fft_{'c2c' if v.precision == 'fp32' else 'z2z'}_{PRECISION_TAG[v.precision]}_{self.protection_token(v.protection)}_{'fwd' if p['direction'] == 'forward' else 'inv'}"
        if p["logn"] == 0:
            name = (head + "_auto" + (f"_t{p['tcols']}" if p.get("tcols") else "") + (f"_te{p['tbenc']}" if p.get("tbenc") else "")
                    + (f"_pf{p['prefetch']}" if p.get("prefetch") else "") + HOOKSPLIT_TAG[p.get("hooksplit", 0)])
        else:
            q = self.resolved(v)
            nl = q["launches"]
            lps = make_plan(v.precision, self.level_of(v), q).launches
            parts = [
                f"logn{q['logn']}",
                "N" + "x".join(str(q[f"N{i + 1}"]) for i in range(nl)),
                "n" + "x".join(str(min(q[f"n{i + 1}"], q[f"N{i + 1}"])) for i in range(nl)),
                "bs" + "x".join(str(q[f"bs{i + 1}"]) for i in range(nl)),
                f"t{q['tcols']}",
            ] + ([f"mb{q['minb']}"] if q.get("minb") else []) + ([{1: "sm", 2: "sq"}[q["tbseq"]]] if q.get("tbseq") else []) + ([{1: "cl", 2: "cls"}[q["cluster"]]] if q.get("cluster") else []) + (
                [{2: "te", 3: "tl"}[q["tbenc"]]] if any(lp.tb_stage for lp in lps) else []) + (
                ["pf"] if any(lp.pf for lp in lps) else []) + ([HOOKSPLIT_TAG[q["hooksplit"]][1:]] if q.get("hooksplit") else [])
            name = head + "_" + "_".join(parts)
        return name + ("_inj" if v.protection.inject else "")

    # ---- shapes -----------------------------------------------------------------------------
    def normalize_shape(self, raw: Any, where: str, source: str | None = None) -> dict[str, int]:
        if not isinstance(raw, dict):
            raise SpecError(f"{raw!r} is not a mapping; an fft shape has keys n (or logn) and batch", source=source, path=where)
        for key in raw:
            if key not in ("n", "logn", "batch"):
                raise SpecError(f"unknown shape key {key!r}{suggest(key, ('n', 'logn', 'batch'))}; an fft shape has keys n (or logn) and batch", source=source, path=f"{where}.{key}")
        if "n" in raw and "logn" in raw:
            raise SpecError("give n or logn, not both", source=source, path=where)
        if "n" in raw:
            n = positive_int(raw["n"], f"{where}.n", source)
            if not is_pow2(n) or n < 2:
                raise SpecError(f"{n} is not a power of two >= 2; family fft supports n = 2^1 .. 2^{max(MAX_LOGN.values())}", source=source, path=f"{where}.n")
        elif "logn" in raw:
            lg = positive_int(raw["logn"], f"{where}.logn", source)
            if lg > max(MAX_LOGN.values()):
                raise SpecError(f"{lg} is outside 1..{max(MAX_LOGN.values())}", source=source, path=f"{where}.logn")
            n = 1 << lg
        else:
            raise SpecError("missing shape key 'n' (or 'logn')", source=source, path=where)
        if ilog2(n) > max(MAX_LOGN.values()):
            raise SpecError(f"{n} exceeds the largest supported size 2^{max(MAX_LOGN.values())}", source=source, path=f"{where}.n")
        if "batch" not in raw:
            raise SpecError("missing shape key 'batch'", source=source, path=where)
        batch = positive_int(raw["batch"], f"{where}.batch", source)
        if n * batch > (1 << 31):
            raise SpecError(f"n * batch = {n * batch} elements exceeds 2^31", source=source, path=where)
        return {"n": n, "batch": batch}

    def format_shape(self, shape: Mapping[str, int]) -> str:
        n = shape["n"] if "n" in shape else 1 << shape["logn"]
        return f"{n}x{shape['batch']}"

    def variant_default_shapes(self, v: Variant) -> list[dict]:
        total = TOTAL_LOG[v.precision]
        lgs = [v.param_dict["logn"]] if v.param_dict["logn"] else list(AUTO_BENCH_LOGNS)
        return [{"n": 1 << lg, "batch": 1 << max(0, total - lg)} for lg in lgs]

    # ---- emission ---------------------------------------------------------------------------
    def namespace(self, v: Variant) -> str:
        return "ftgen_" + "".join(c if c.isalnum() else "_" for c in v.name)

    def resolved_meta(self, v: Variant) -> str:
        """JSON members every result row starts with: kernel, family, precision, protection and the resolved params."""
        p = v.param_dict if v.param_dict["logn"] == 0 else self.resolved(v)
        d = {
            "kernel": v.name,
            "family": self.name,
            "precision": v.precision,
            "protection": v.protection.to_dict(),
            "params": {k: p[k] for k in (x.name for x in PARAMS)},
        }
        return json.dumps(d, separators=(",", ":"))[1:-1]

    def plan_context(self, v: Variant, plan: Plan) -> dict:
        lps = []
        cltb = any(lp.cluster_tb for lp in plan.launches)
        for lp in plan.launches:
            cps = lp.cols_per_signal
            Mp = lp.Mp
            RMp = lp.R * Mp
            lps.append(
                {
                    "index": lp.index,
                    "R": lp.R,
                    "LOGR": ilog2(lp.R),
                    "n": lp.n,
                    "RL": lp.radices[-1],
                    "P": lp.P,
                    "T": lp.T,
                    "G": lp.G,
                    "L": lp.L,
                    "bs": lp.bs,
                    "NT": lp.threads,
                    "minb": lp.min_blocks,
                    "cps": cps,
                    "S": lp.S,
                    "MP": Mp,
                    "staged_in": lp.staged_in,
                    "staged_out": lp.staged_out,
                    "pitch": lp.pitch,
                    "swz_k": ilog2(lp.n),
                    "swz_w": lp.swz_mask + 1,
                    "xw": lp.xcols,
                    "out_h": (ilog2(RMp) + 1) // 2 if Mp > 1 else 0,
                    "tile_elems": lp.tile_elems,
                    "tbseq": lp.tbseq,
                    "pf": lp.pf,
                    "smem_bytes": lp.smem_bytes,
                    "cluster": lp.cluster,
                    # the kernel's parameters (a protected cluster kernel also carries the fused launch's output) and its
                    # output: workspace buffer out_ws (the last kernel: the caller's output, -1; a protected cluster kernel's
                    # rare path keeps a buffer of its own)
                    "params": "ClusterParams" if lp.cluster_tb else "LaunchParams",
                    "out_ws": lp.index if lp.index < len(plan.launches) - 1 - (1 if plan.cluster else 0) or lp.cluster_tb else -1,
                    "fault_steps": lp.fault_steps,
                    "fault_elems": lp.fault_elems,
                    "fused": lp.fused,
                    "cl_scatter": lp.cl_scatter,
                    "p2_bound": repr(lp.p2_bound),
                    "tb_stage": lp.tb_stage,
                    "tb_stage_out": lp.tb_stage_out,
                    "desc": lp.describe() + f" S={lp.S} M'={Mp} cols/signal={cps} staged={'in' if lp.staged_in else ''}{'/out' if lp.staged_out else ''} rounds={lp.rounds} smem={lp.smem_bytes}B",
                }
            )
        return {
            "logn": plan.logn,
            "N": plan.N,
            "sizes": list(plan.sizes),
            "launches": lps,
            "kernels": [x for x in lps if not x["fused"]],
            "cluster": plan.cluster,
            "hooksplit": plan.hooksplit,
            # protected cluster plans: the fused kernel's phase 1 keeps a workspace buffer (its rare path's scratch)
            "cltb": cltb,
            "ws_bufs": len(plan.launches) - 1 if cltb else len([x for x in lps if not x["fused"]]) - 1,
            "desc": " x ".join(str(s) for s in plan.sizes) + f" ({len(plan.sizes)} launch{'es' if len(plan.sizes) > 1 else ''})",
        }

    def template_context(self, v: Variant) -> dict:
        level = self.level_of(v)
        prot = v.protection
        kdef = {"none": 0.0, "one-sided": K_1S, "two-sided-thread": K_TH, "two-sided-tb": K_TB}[level]
        if prot.enabled and prot.threshold != "auto":
            kdef = float(prot.threshold)
        plans = [self.plan_context(v, pl) for pl in self.plans(v)]
        p = v.param_dict
        return {
            "name": v.name,
            "cname": c_symbol(v.name),
            "ns": self.namespace(v),
            "T": CTYPE[v.precision],
            "precision": v.precision,
            "direction": p["direction"],
            "sign": _sign(p["direction"]),
            "level": LEVEL_CODE[level],
            "level_name": level,
            "rereads_input": level in REREADS_INPUT,
            "inject": prot.injects,
            "prot_token": self.protection_token(prot),
            "kdef": repr(float(kdef)),
            "k1s": repr(float(K_1S)),
            "tb_pre": repr(float(TB_PRE)),
            "locate_tol": repr(float(LOCATE_TOL)),
            "locate_k": repr(float(LOCATE_K)),
            "plans": plans,
            "max_logn": MAX_LOGN[v.precision],
            "meta_json": self.resolved_meta(v),
            "unit_roundoff": repr(UNIT_ROUNDOFF[v.precision]),
            "tol_c": repr(TOL_C),
            "tol_elem_c": repr(TOL_ELEM_C),
            "esize": ESIZE[v.precision],
            "sizes_desc": (f"this variant is built for n = 2^{p['logn']} only" if p["logn"] else f"this variant covers n = 2^1 .. 2^{AUTO_MAX_LOGN}"),
            "summary": f"{'C2C' if v.precision == 'fp32' else 'Z2Z'} {v.precision} {p['direction']}, protection {self.protection_token(prot)}, "
            + (f"n = 2^{p['logn']}" if p["logn"] else f"n = 2^1 .. 2^{AUTO_MAX_LOGN}"),
        }

    def bench_shapes(self, v: Variant, shapes: list[dict] | None) -> list[dict]:
        """The spec's shapes this variant implements (a fixed-size variant: n = 2^logn; an
        every-size one: n up to 2^AUTO_MAX_LOGN); its own defaults when none of them fits."""
        lg = v.param_dict["logn"]
        fit = [dict(s) for s in (shapes or []) if (s["n"] == 1 << lg if lg else ilog2(s["n"]) <= AUTO_MAX_LOGN)]
        return fit or self.variant_default_shapes(v)

    def emit(self, v: Variant, env, shapes: list[dict] | None = None) -> EmittedVariant:
        ctx = self.template_context(v)
        ctx["default_shapes"] = self.default_shapes_arg(v, shapes)
        d = v.name
        files = {
            f"{d}/{d}.h": env.render("fft/variant.h.j2", ctx),
            f"{d}/{d}_internal.h": env.render("fft/internal.h.j2", ctx),
            f"{d}/{d}.cu": env.render("fft/variant.cu.j2", ctx),
            f"{d}/{d}_bench.cu": env.render("fft/bench.cu.j2", ctx),
        }
        libs = [f"{d}/{d}.cu"]
        for plan in ctx["plans"]:
            path = f"{d}/{d}_k{plan['logn']}.cu"
            files[path] = env.render("fft/kernels.cu.j2", {**ctx, "plan": plan})
            libs.append(path)
        return EmittedVariant(
            name=d,
            files=files,
            library_sources=libs,
            bench_sources=[f"{d}/{d}_bench.cu"],
            header=f"{d}/{d}.h",
            requires=["cufft"],
        )
    def launcher_signature(self, v: Variant) -> LauncherSignature:
        return LauncherSignature(
            params="const ftgen_fft_problem* p, cudaStream_t stream",
            args="p, stream",
            selector_args=("p->n", "p->batch"),
        )

    # ---- the shared library -----------------------------------------------------------------
    def library_group(self, v: Variant) -> str:
        return f"fft_{'c2c' if v.precision == 'fp32' else 'z2z'}_{'fwd' if v['direction'] == 'forward' else 'inv'}"

    def library_entry(self, v: Variant) -> LibraryEntry:
        cplx = "float2 (C2C)" if v.precision == "fp32" else "double2 (Z2Z)"
        return LibraryEntry(
            params="long long n, long long batch, const void* in, void* out",
            shape=("n", "batch"),
            legal="n >= 2 && (n & (n - 1)) == 0 && batch >= 1 && n <= (1LL << 31) / batch && in && out && "
                  "((size_t)in & 15) == 0 && ((size_t)out & 15) == 0",
            problem_type="ftgen_fft_problem",
            fill="P.n = n, P.batch = batch, P.in = in, P.out = out;",
            workspace_params="long long n, long long batch",
            workspace="{sym}_workspace(n, batch)",
            scores="P.flags |= FTGEN_FFT_RECORD_SCORES;",
            doc=(
                f"{v['direction']} FFT (unnormalised, like cuFFT) of `batch` signals of n points (a power of two), "
                f"interleaved complex {cplx}, signal b at in + b * n, n * batch <= 2^31; out == in allowed; "
                "device pointers aligned to 16 bytes. A variant's first call on a device builds its tables "
                "(synchronous copies: make it before a stream capture)"
            ),
        )

    def library_range(self, v: Variant) -> dict[str, tuple[int, int]]:
        logn = v["logn"]
        return {"n": (1 << logn, 1 << logn)} if logn else {"n": (2, 1 << AUTO_MAX_LOGN)}

    def library_legal(self, v: Variant) -> dict[str, tuple[int, int]]:
        return {"n": (2, 1 << AUTO_MAX_LOGN)}  # what an every-size (logn: 0) variant runs

    def library_fallback(self, v: Variant) -> Variant | None:
        """The every-size variant of v's precision, protection (without injection) and direction, automatic plans."""
        prot = Protection(**{**v.protection.to_dict(), "inject": False})
        params = tuple((p.name, v["direction"] if p.name == "direction" else p.default[0]) for p in self.param_defs(v.precision, prot))
        fb = Variant(self.name, v.precision, prot, params, v.arch, self.backend(v.precision, prot, dict(params)))
        if self.constraints(fb):
            return None
        return Variant(fb.family, fb.precision, fb.protection, fb.params, fb.arch, fb.backend, self.kernel_name(fb))

    # ---- tuning -----------------------------------------------------------------------------
    def tuning_entries(self, rows: Iterable[Mapping[str, Any]]) -> list[dict]:
        """Entries of the tuning file (``ftgen.tuning.write(path, "fft", entries, provenance)``) from search winners: rows
        of ``{"kernel", "precision", "protection", "params", "shape", "ms", "ref", ...}``; see tuning.tuning_entries."""
        return tuning_entries(rows)
