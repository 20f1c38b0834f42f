"""A small MLP whose linear layers run on ftgen's protected GEMM (fp32 on the tensor cores, tf32x3, threadblock ABFT),
beside the same model on cuBLAS: outputs compared, forward passes timed alternately, then faults injected into the
protected GEMMs (bit flips in their accumulators) and the fault report printed beside the faulty passes' errors.

    ftgen generate specs/gemm/torch_linear.yaml && ftgen build generated/torch_linear --lib
    python examples/protected_mlp.py generated/torch_linear/install/lib/libftgen_torch_linear.so

Needs torch (`pip install ftgen[torch]`) and a GPU. The unprotected model runs plain fp32 (cuBLAS SGEMM; TF32 off,
torch's default), which is what the protected model's tf32x3 matches in accuracy. With `--precision bf16` or `fp16` (a
library of specs/gemm/torch_linear90.yaml, Hopper) both models run in that type, the unprotected one on cuBLAS; with
`--precision tf32` (the same library) both run fp32 data on TF32 tensor cores, the unprotected one with TF32 allowed.
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch

import ftgen.torch as ftt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib", help="libftgen_<name>.so built from specs/gemm/torch_linear.yaml (or torch_linear90.yaml)")
    ap.add_argument("--precision", choices=("tf32x3", "tf32", "bf16", "fp16"), default="tf32x3")
    ap.add_argument("--batch", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--faults", type=int, default=8, help="bit flips per GEMM launch in the faulty passes")
    ap.add_argument("--faulty-passes", type=int, default=10)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"  # the unprotected model's like-for-like GEMM
    lib = ftt.load(a.lib)
    torch.manual_seed(0)
    h = a.hidden
    dtype = {"tf32x3": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]
    model = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, h)).cuda().eval().to(dtype)
    prot = ftt.protect(copy.deepcopy(model), lib, precision=a.precision)
    x = torch.randn(a.batch, h, device="cuda").to(dtype)
    with torch.no_grad():
        ref = model.double()(x.double())
        model.to(dtype)
        y0, y1 = model(x), prot(x)
        unprot = {"tf32x3": "cuBLAS fp32", "tf32": "cuBLAS TF32"}.get(a.precision, f"cuBLAS {a.precision}")
        for name, y in ((unprot, y0), (f"ftgen {a.precision} + ABFT", y1)):
            print(f"{name:22s} max |y - y_fp64| / max |y_fp64| = {((y.double() - ref).abs().max() / ref.abs().max()).item():.3g}")
        compiled = torch.compile(prot)
        print("torch.compile of the protected model: same output:", torch.equal(compiled(x), y1))
        times = {"cuBLAS": [], "ftgen": []}
        for _ in range(3):
            model(x), prot(x)
        torch.cuda.synchronize()
        for _ in range(a.reps):  # alternated
            for name, m in (("cuBLAS", model), ("ftgen", prot)):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                m(x)
                e.record()
                torch.cuda.synchronize()
                times[name].append(s.elapsed_time(e))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"forward {a.batch} x {h}: cuBLAS {med['cuBLAS']:.3f} ms, protected {med['ftgen']:.3f} ms "
          f"(x{med['ftgen'] / med['cuBLAS']:.3f} the unprotected model)")
    clean = ftt.report(emit=False)
    print("clean passes, faults:", {k: {f: v[f] for f in ("calls", "injected", "detected", "uncorrectable")} for k, v in clean.items()})
    # faulty passes: every GEMM launch gets `--faults` bit flips (random accumulator element, k-tile and bit)
    ftt.reset()
    ftt.inject(lib, a.faults, seed=2026)
    worst = 0.0
    with torch.no_grad():
        for _ in range(a.faulty_passes):
            y = prot(x)
            worst = max(worst, ((y.double() - ref).abs().max() / ref.abs().max()).item())
    ftt.inject(lib, 0)
    rep = ftt.report(emit=False)
    print(f"{a.faulty_passes} faulty passes, {a.faults} bit flips per GEMM launch: worst max |y - y_fp64| / max |y_fp64| = "
          f"{worst:.3g} (clean protected: {((y1.double() - ref).abs().max() / ref.abs().max()).item():.3g})")
    for key, row in rep.items():
        print(f"  {key}: injected {row['injected']}, detected {row['detected']}, corrected {row['corrected']}, "
              f"recomputed {row['recomputed']}, uncorrectable {row['uncorrectable']}, largest score {row['max_score']:.3g}")
    print(ftt.json_line(step=a.faulty_passes))


if __name__ == "__main__":
    main()
