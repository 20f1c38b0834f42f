"""The decoupled baseline beside a protected attention variant: the reference timed alternately with the kernel, in
one process, on the benchmark executable's own data.

The decoupled baseline (the ``decoupled`` level of the mma backend) computes attention as three protected kernels
over an L x L score matrix in global memory: S = Q K^T with classic row checksums, the softmax with its modular
redundancy, O = P V with checksums. It is the design fused protection is measured against, so `ftgen bench` times it
beside every protected variant that is not itself the baseline (:mod:`ftgen.bench.refs`), as the reference
``decoupled``::

    python -m ftgen.families.attention.decoupled_ref PROJECT KERNEL --shapes 4x32x4096,... \\
        [--reps N] [--warmup N] [--seed S] [--dist normal|uniform|loguniform|outliers]

The baseline of a variant is the one of its precision, head dimension and causal mask, checks online and no fault
injection built in (its fastest form, so that the ratio does not flatter the variant), generated as a project of
its own under ``PROJECT/build/refs/decoupled/`` and compiled, as the variant is, into a shared object with the
attention shim (:mod:`.sdpa_ref`'s ``SHIM``: the bench adapter behind a C interface). Per shape, both adapters are
set up with the executable's seed and distribution, so they hold the same inputs; a shape whose L x L workspace does
not fit in device memory is ``unavailable`` with the adapter's reason (the baseline cannot run there). Untimed first,
each launched once on input set 0 and the baseline's output compared with the kernel's as SDPA's is
(:func:`.sdpa_ref.agreement`); then the two launched alternately between CUDA events (torch's), medians.

One JSON line per shape, as every reference driver prints (:mod:`ftgen.bench.refs`); exit code 0 when it printed
them, 2 on bad input, 1 on anything else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ...bench import ctypes_driver as drv
from ...errors import SpecError
from . import sdpa_ref

NAME = "decoupled"
DRIVER = "ftgen.families.attention.decoupled_ref"  # this module, run with python -m
OUT = Path("build") / "refs" / "decoupled"  # under the variant's project: the baselines' own projects


class DecoupledRef(drv.DriverReference):
    """The decoupled baseline as a reference of `ftgen bench`, beside protected variants other than itself."""

    name = NAME
    driver = DRIVER
    precisions = sdpa_ref.PRECISIONS
    modules = {"torch": "torch is not installed (the decoupled baseline is timed with torch's CUDA events)"}

    def has_module(self, module: str) -> bool:
        return sdpa_ref._importable(module)  # the SDPA driver's lookup (one place to stand in for in tests)

    def unavailable(self, variant: dict) -> str | None:
        prot = variant.get("protection") or {}
        if not prot.get("scheme") or prot.get("scheme") == "none":
            return f"{variant.get('kernel')} is unprotected: the decoupled baseline is timed beside protected variants"
        if prot.get("level") == "decoupled":
            return f"{variant.get('kernel')} is the decoupled baseline itself"
        return super().unavailable(variant)

    def prepare(self, project: Path, manifest: dict, variant: dict) -> None:
        build_shared_objects(project, manifest, variant)


def baseline_spec(manifest: dict, entry: dict) -> dict:
    """The spec (a mapping) of the decoupled baseline of ``entry``: its precision, head dimension, causal mask and
    architectures, level ``decoupled`` on the mma backend, checks online, no injection."""
    params = entry.get("params", {})
    hd, causal = int(params["head_dim"]), bool(params.get("causal"))
    name = f"decoupled_{entry['precision']}_d{hd}_{'c' if causal else 'nc'}"
    return {"name": name, "family": "attention", "arch": list(entry.get("archs") or manifest["spec"]["arch"]),
            "variants": [{"precision": entry["precision"],
                          "protection": {"scheme": "abft", "level": "decoupled", "correct": "online"},
                          "params": {"head_dim": hd, "causal": causal}}]}


def baseline_project(project: Path, manifest: dict, entry: dict) -> tuple[Path, dict, dict]:
    """(the baseline's project, its manifest, its one entry), generated under ``PROJECT/build/refs/decoupled/`` (one
    project per precision, head dimension and mask, shared by the variants that have it; a file lock serializes the
    variants' builds of it)."""
    from filelock import FileLock

    from ...build import load_manifest
    from ...codegen.emit import generate
    from ...spec import load_spec_text

    spec_map = baseline_spec(manifest, entry)
    root = Path(project).resolve() / OUT
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{spec_map['name']}.lock")):
        spec = load_spec_text(yaml.safe_dump(spec_map, sort_keys=False), f"<the decoupled baseline {spec_map['name']}>")
        out = generate(spec, root).out_dir
    dec_manifest = load_manifest(out)
    return out, dec_manifest, dec_manifest["variants"][0]


def build_shared_objects(project: Path, manifest: dict, entry: dict) -> tuple[Path, Path]:
    """(the variant's shared object, its baseline's): both built with the attention shim."""
    kernel_so = sdpa_ref.build_shared_object(project, manifest, entry)
    dproj, dman, dentry = baseline_project(project, manifest, entry)
    return kernel_so, sdpa_ref.build_shared_object(dproj, dman, dentry)


def time_shape(torch, kernel: sdpa_ref.Shim, hk: int, base: sdpa_ref.Shim, hb: int, shape: dict, *, reps: int,
               warmup: int, seed: int, dist: int, dtype, head_dim: int, tolerance: float) -> dict:
    """One shape: both adapters set up on the same inputs, the baseline's output checked against the kernel's, the two
    launched alternately. The line's fields (``ms`` ... or ``unavailable``)."""
    b, heads, seq, seq_k = shape["batch"], shape["heads"], shape["seq"], shape["seq_k"]
    kv_heads = shape.get("kv_heads", heads)
    sets = kernel.setup(hk, b, heads, seq, seq_k, kv_heads, seed, dist)
    if sets <= 0:
        return {"unavailable": f"the attention bench adapter skips this shape: {kernel.skip_reason(hk)}"}
    base_sets = base.setup(hb, b, heads, seq, seq_k, kv_heads, seed, dist)
    if base_sets <= 0:
        return {"unavailable": f"the decoupled baseline cannot run this shape: {base.skip_reason(hb)}"}

    def view(shim, h: int, what: int, hs: int, rows: int):
        arr = drv.DeviceArray(shim.buffer(h, 0, what), (b, hs, rows, head_dim), "<i2")
        return torch.as_tensor(arr, device="cuda").view(dtype)

    kernel.launch(hk, 0)
    base.launch(hb, 0)
    torch.cuda.synchronize()
    S = sdpa_ref.Shim
    inputs = ((S.Q, heads, seq), (S.K, kv_heads, seq_k), (S.V, kv_heads, seq_k))
    if not all(bool(torch.equal(view(kernel, hk, *x), view(base, hb, *x))) for x in inputs):
        return {"unavailable": "the two adapters' inputs differ (the same seed and distribution should give the same "
                               "values): no valid pairing"}
    check = sdpa_ref.agreement(torch, view(base, hb, S.O, heads, seq), view(kernel, hk, S.O, heads, seq),
                               view(kernel, hk, S.V, kv_heads, seq_k), tolerance)
    if not check["agreement"] >= sdpa_ref.AGREEMENT_FLOOR:
        return {**check, "unavailable": (
            f"the decoupled baseline's output agrees with the kernel's on {check['agreement']:.4f} of "
            f"{check['checked_elements']} elements (at least {sdpa_ref.AGREEMENT_FLOOR} within {tolerance:g} max|V| "
            f"expected; largest difference {check['max_abs_diff']:.4g}): no valid reference")}
    pad, cycles = drv.pad_kernel(torch)
    tk, tb = drv.alternate(torch, [lambda i: kernel.launch(hk, i % sets), lambda i: base.launch(hb, i % base_sets)],
                           warmup, reps, pad)
    return {"ms": tb["median"], "min": tb["min"], "max": tb["max"], "reps": tb["reps"], "kernel_ms": tk["median"],
            "kernel_min": tk["min"], "kernel_max": tk["max"], "alternated": True, "alternated_with": ["kernel", NAME],
            "sets": sets, "baseline_sets": base_sets, "pad_cycles": cycles, **check}


def _emit(line: dict) -> None:
    sdpa_ref._emit(NAME, line)


def _parser():
    return drv.driver_parser(DRIVER, "Time the decoupled baseline (three protected kernels over an L x L score matrix) "
                                     "alternately with an attention variant on its benchmark's data (one JSON line per "
                                     "shape).", "attention",
                             "comma-separated batch x heads x seq (x seq_k), e.g. 4x32x4096 or 2x16x1000x2000")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # bad flags: usage and exit 2
    return drv.driver_main(args, "attention", "decoupled", lambda *a: _run(*a, args),
                           lambda why: _emit({"unavailable": why}))


def _run(project: Path, manifest: dict, entry: dict, shapes: list[dict], args) -> int:
    torch, versions, reason = sdpa_ref.torch_or_reason(DecoupledRef().unavailable(entry))
    if reason is not None:
        _emit({"unavailable": reason})
        return 0
    kernel_so, base_so = build_shared_objects(project, manifest, entry)
    kernel, base = sdpa_ref.Shim(kernel_so), sdpa_ref.Shim(base_so)
    bf16 = bool(kernel.is_bf16())
    head_dim = kernel.head_dim()
    if (bool(base.is_bf16()), base.head_dim(), bool(base.causal())) != (bf16, head_dim, bool(kernel.causal())):
        raise SpecError(f"{entry['kernel']}: the decoupled baseline's shared object is not of the variant's precision, "
                        f"head dimension and mask; remove {Path(project) / OUT} and run again")
    precision = "bf16" if bf16 else "fp16"
    run = drv.run_settings(args, kernel)
    seed, reps, warmup, dist = run["seed"], run["reps"], run["warmup"], run["dist_code"]
    dtype = torch.bfloat16 if bf16 else torch.float16
    detail = {"seed": seed, "dist": run["dist"], "dtype": precision, "versions": versions,
              "baseline": baseline_spec(manifest, entry)["variants"][0],
              "archs": drv.built_archs(project, manifest, entry), "gpu": torch.cuda.get_device_name()}
    hk, hb = kernel.open(), base.open()
    try:
        for shape in shapes:
            line = time_shape(torch, kernel, hk, base, hb, shape, reps=reps, warmup=warmup, seed=seed, dist=dist,
                              dtype=dtype, head_dim=head_dim, tolerance=sdpa_ref.TOLERANCE[precision])
            _emit({"shape": shape, **line, **({} if "ms" not in line else detail)})
            torch.cuda.empty_cache()
    finally:
        base.close(hb)
        kernel.close(hk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
