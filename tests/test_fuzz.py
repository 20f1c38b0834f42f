"""Fuzz: a thousand mutated specs per run (seeded), from a GEMM, an FFT, a k-means and an attention spec, and a
thousand from specs of the other backends and levels. Every one is accepted (exit 0) or refused with a message (exit
2): no traceback, no internal error, nothing written when refused. A sample of accepted specs is compiled (marked
`compile`)."""

from __future__ import annotations

import copy
import os
import random
import shutil
from pathlib import Path

import pytest
import yaml

from ftgen.cli import main

SEED = int(os.environ.get("FTGEN_FUZZ_SEED", "20260"))
CASES = int(os.environ.get("FTGEN_FUZZ_CASES", "1000"))

BASES = [
    {
        "name": "fz_gemm",
        "family": "gemm",
        "arch": ["sm_90"],
        "precision": "fp32",
        "protection": {"scheme": "abft", "level": "threadblock", "interval": 1, "threshold": "auto", "inject": False},
        "params": {"m_tb": 32, "n_tb": 32, "k_tb": 8, "m_w": 16, "n_w": 32, "m_t": 4, "n_t": 4, "stages": 2},
        "shapes": [{"m": 64, "n": 64, "k": 64}],
    },
    {
        "name": "fz_fft",
        "family": "fft",
        "arch": ["sm_90"],
        "precision": ["fp32"],
        "protection": {"scheme": "none"},
        "params": {"direction": "forward", "logn": 0},
        "shapes": [{"n": 256, "batch": 64}],
    },
    {
        "name": "fz_kmeans",
        "family": "kmeans",
        "arch": ["sm_90a"],
        "precision": "tf32",
        "protection": {"scheme": "abft", "level": "threadblock", "correct": "online", "inject": True},
        "variants": [{"params": {"backend": "cutlass90", "tile_m": 128, "tile_n": 160, "tile_k": 32, "schedule": "ws-coop"}},
                     {"params": {"backend": "fused", "strip": 64, "warps": 8}, "protection": {"correct": "detect"}}],
        "shapes": [{"samples": 1000, "dims": 10, "clusters": 7}],
    },
    {
        "name": "fz_attention",
        "family": "attention",
        "arch": ["sm_90a"],
        "precision": "fp16",
        "protection": {"scheme": "abft", "level": "efta", "threshold": "auto", "inject": True},
        "params": {"backend": "wgmma", "head_dim": 64, "causal": False, "block_n": 128, "schedule": "pingpong"},
        "shapes": [{"batch": 1, "heads": 2, "seq": 128, "seq_k": 128, "kv_heads": 1}],
    },
]

# The other backends and levels, fuzzed apart so that the base specs' own stream (and the compile sample below) stays
# as it was: the kmeans mma backend's warp level, the gemm cutlass90 backend (16-bit and tf32x3 ABFT, TMR), the
# attention mma backend (strided, decoupled) and a fixed fp64 FFT plan.
BACKEND_BASES = [
    {"name": "fz_km_mma", "family": "kmeans", "arch": ["sm_90"], "precision": ["tf32", "fp64"],
     "protection": {"scheme": "abft", "level": "warp", "inject": True},
     "params": {"backend": "mma"}, "shapes": [{"samples": 1000, "dims": 10, "clusters": 7}]},
    {"name": "fz_gemm90", "family": "gemm", "arch": ["sm_90a"], "precision": "bf16",
     "protection": {"scheme": "abft", "level": "threadblock", "inject": True},
     "params": {"backend": "cutlass90"}, "shapes": [{"m": 64, "n": 64, "k": 64}]},
    {"name": "fz_gemm90_x3", "family": "gemm", "arch": ["sm_90a"], "precision": "tf32x3",
     "protection": {"scheme": "abft", "level": "threadblock", "inject": True},
     "params": {"backend": "cutlass90"}, "shapes": [{"m": 64, "n": 64, "k": 64}]},
    {"name": "fz_gemm90_tmr", "family": "gemm", "arch": ["sm_90a"], "precision": "fp16",
     "protection": {"scheme": "tmr", "level": "multikernel", "interval": 1024},
     "params": {"backend": "cutlass90"}, "shapes": [{"m": 64, "n": 64, "k": 64}]},
    {"name": "fz_attn_mma", "family": "attention", "arch": ["sm_90a"], "precision": "bf16",
     "protection": {"scheme": "abft", "level": "strided", "inject": True},
     "params": {"head_dim": 128, "causal": True}, "shapes": [{"batch": 1, "heads": 2, "seq": 1000}]},
    {"name": "fz_attn_dec", "family": "attention", "arch": ["sm_90a"], "precision": "fp16",
     "protection": {"scheme": "abft", "level": "decoupled"},
     "params": {"head_dim": 64}, "shapes": [{"batch": 1, "heads": 2, "seq": 128}]},
    {"name": "fz_fft64", "family": "fft", "arch": ["sm_80"], "precision": "fp64",
     "protection": {"scheme": "abft", "level": "two-sided-tb", "inject": True},
     "params": {"logn": 10}, "shapes": [{"n": 1024, "batch": 8}]},
]

ODD_VALUES = [
    None, True, False, 0, -1, 1, 3, 7, 96, 2**31 - 1, 2**31, 2**32 + 128, 2**63, -(2**63), 1e308, float("inf"),
    float("-inf"), float("nan"), 0.5, -0.0, 1e-300, "", " ", "auto", "abc\n", "../../etc", "a" * 300, "é🙂",
    "\x00", "sm_90", "fp64", "abft", "none", "threadblock", [], [1, 2], [[1]], {}, {"a": 1}, "*", "-1", "0x10",
]
ODD_KEYS = ["", "nme", "Name", "params2", "é", "a" * 300, "1", "<<", "protection ", "shapes"]


def _mutate_value(rng: random.Random, v):
    r = rng.random()
    if r < 0.45:
        return rng.choice(ODD_VALUES)
    if r < 0.6 and isinstance(v, int) and not isinstance(v, bool):
        return rng.choice([v * 2, v // 2, v + 1, -v, [v, v * 2], [v] * rng.randint(0, 40)])
    if r < 0.7:
        return [v] * rng.randint(0, 70)
    if r < 0.8 and isinstance(v, str):
        return v + rng.choice(["", "x", "\n", " ", "-", "🙂", v])
    return {"nested": v}


def _walk(d, rng, depth=0):
    """Pick a mapping inside d (d itself or one of its nested mappings)."""
    maps = [d]
    for v in d.values():
        if isinstance(v, dict):
            maps.append(v)
        elif isinstance(v, list):
            maps.extend(x for x in v if isinstance(x, dict))
    return rng.choice(maps)


def mutate(rng: random.Random, bases: list[dict] = BASES) -> str:
    spec = copy.deepcopy(rng.choice(bases))
    for _ in range(rng.randint(1, 3)):
        m = _walk(spec, rng)
        op = rng.random()
        if op < 0.15 and m:
            m.pop(rng.choice(list(m)))
        elif op < 0.3:
            m[rng.choice(ODD_KEYS)] = rng.choice(ODD_VALUES)
        elif op < 0.45 and m:  # swap types: a scalar for a mapping and the other way round
            k = rng.choice(list(m))
            m[k] = rng.choice([[m[k]], {"x": m[k]}, str(m[k]), 1])
        elif m:
            k = rng.choice(list(m))
            m[k] = _mutate_value(rng, m[k])
    try:
        text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        text = str(spec)
    r = rng.random()
    if r < 0.08:  # break the YAML structure
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["{", "[", "]", ":", "\t", "&a ", "*a", "- ", "'", '"', "!!python/object:os.system ", "%YAML 9\n"]) + text[i:]
    elif r < 0.12:  # duplicate a line: a duplicate key, mostly
        lines = text.splitlines()
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        text = "\n".join(lines) + "\n"
    elif r < 0.15:  # an alias that repeats content
        text = text.replace("shapes:", "extra: &x [1, 2, 3]\nmore: [*x, *x, *x]\nshapes:", 1)
    elif r < 0.17:  # truncated
        text = text[: rng.randrange(len(text) + 1)]
    return text


def _fuzz(tmp_path, capsys, bases: list[dict], seed: int, cases: int) -> None:
    rng = random.Random(seed)
    accepted, refused = [], 0
    for i in range(cases):
        text = mutate(rng, bases)
        spec = tmp_path / f"s{i}.yaml"
        spec.write_text(text, encoding="utf-8")
        out = tmp_path / f"o{i}"
        rc = main(["generate", str(spec), "-o", str(out)])
        cap = capsys.readouterr()
        both = cap.out + cap.err
        assert rc in (0, 2), f"case {i} (seed {seed}): exit {rc}\n{text}\n{both[-2000:]}"
        assert "Traceback" not in both and "internal error" not in both, f"case {i}:\n{text}\n{both[-2000:]}"
        assert len(cap.err) < 20000, f"case {i}: {len(cap.err)} bytes of messages"
        if rc == 2:
            refused += 1
            assert cap.err.strip(), f"case {i}: refused without a message"
            assert not out.exists(), f"case {i}: a refused spec wrote {out}"
        else:
            accepted.append((text, cap.out.split()))
            shutil.rmtree(out)
    # the mutations exercise both outcomes
    assert refused > cases // 3 and len(accepted) > 5, (refused, len(accepted))


def test_fuzz_specs_exit_0_or_2_and_leave_nothing_when_refused(tmp_path, capsys):
    _fuzz(tmp_path, capsys, BASES, SEED, CASES)


def test_fuzz_backend_specs_exit_0_or_2_and_leave_nothing_when_refused(tmp_path, capsys):
    for base in BACKEND_BASES:  # each base itself is accepted
        (tmp_path / "base.yaml").write_text(yaml.safe_dump(base, sort_keys=False), encoding="utf-8")
        assert main(["generate", str(tmp_path / "base.yaml"), "-o", str(tmp_path / "base")]) == 0, capsys.readouterr().err
        capsys.readouterr()
    _fuzz(tmp_path, capsys, BACKEND_BASES, SEED + 1, CASES)


@pytest.mark.compile
def test_fuzz_accepted_sample_compiles(tmp_path, capsys):
    """The first accepted single-variant mutant of the small GEMM base spec generates and compiles
    (the FFT base's default plan compiles every size, too slow for a sample)."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake and ninja")
    rng = random.Random(SEED)
    picked: dict[str, tuple[Path, str]] = {}
    for i in range(CASES):
        text = mutate(rng)
        try:
            fam = (yaml.safe_load(text) or {}).get("family")
        except (yaml.YAMLError, AttributeError):
            continue
        if fam != "gemm" or fam in picked:
            continue
        spec = tmp_path / f"s{i}.yaml"
        spec.write_text(text, encoding="utf-8")
        out = tmp_path / f"o{i}"
        if main(["generate", str(spec), "-o", str(out)]) != 0:
            capsys.readouterr()
            continue
        kernels = capsys.readouterr().out.split()
        if len(kernels) == 1:
            picked[fam] = (next(out.iterdir()), kernels[0])
        if picked:
            break
    assert picked, "no accepted single-variant mutant"
    for fam, (project, kernel) in picked.items():
        rc = main(["build", str(project), "--kernels", kernel, "--arch", "sm_90"])
        err = capsys.readouterr().err
        assert rc == 0, f"{fam}: {kernel} did not build\n{err[-3000:]}"
        assert (project / "bin" / kernel).is_file()
