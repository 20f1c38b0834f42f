"""snvr's row sum: each lane's partial row sum l is accumulated twice, the second time on negated operands
(``l' = alpha l' - part``, exactly ``-l`` under round-to-nearest), and a difference recomputes the block. The range
check ``[sum_j 2^{(m_j - m) s}, n_keys]`` alone passes a wrong sum inside the range (a mantissa flip, a low exponent
flip, a sign flip of one lane's part); the duplicate catches every fault that reaches the output. Emulated
campaigns of single bit flips at the rowsum site on the NumPy model, the duplicate's exactness in float32, and the
kernel's accumulation compiled for the host against the model."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from conftest import attention_host_program

from ftgen.families.attention import model as M


def _rowsum_campaign(kind: str, causal: bool, precision: str, trials: int, seed: int):
    """Single bit flips (bit 0..31, random row, tile, lane) of a partial row sum: (significant, corrected, clean
    alarms). Significant: snvr's output with correction off is beyond the tolerance; corrected: with correction on
    it is within."""
    lq, lk, d = (128, 128, 64) if causal else (32, 256, 64)
    q, k, v = M.inputs(kind, lq, lk, d, seed=seed)
    _, clean = M.flash_forward(q, k, v, precision=precision, level="snvr", causal=causal)
    rng = np.random.default_rng(seed)
    significant = corrected = 0
    for _ in range(trials):
        row = int(rng.integers(lq))
        tile = int(rng.integers(row // 64 + 1 if causal else lk // 64))
        f = M.Fault("rowsum", row, tile, int(rng.integers(M.LANES)), "bitflip", int(rng.integers(32)))
        o1, c1 = M.flash_forward(q, k, v, precision=precision, level="snvr", causal=causal, faults=[f], correct=False)
        assert c1.injected == 1
        if M.max_error(o1, q, k, v, precision, causal) <= 1.0:
            continue
        significant += 1
        o2, c2 = M.flash_forward(q, k, v, precision=precision, level="snvr", causal=causal, faults=[f])
        ok = M.max_error(o2, q, k, v, precision, causal) <= 1.0
        corrected += ok
        assert ok, (kind, causal, f, c2)
    return significant, corrected, clean.detected


@pytest.mark.parametrize("kind,causal,precision", [("normal", False, "fp16"), ("uniform", True, "fp16"),
                                                   ("outlier", False, "bf16")])
def test_snvr_corrects_single_bit_flips_of_the_row_sum(kind, causal, precision):
    significant, corrected, alarms = _rowsum_campaign(kind, causal, precision, trials=40, seed=2)
    assert alarms == 0
    assert significant >= 5  # the campaign hits the output: the check above is not vacuous
    assert corrected == significant


def test_a_mantissa_flip_inside_the_range_is_caught():
    """Bit 22 of a lane's partial sum (x 1.5 or x 0.75): the row sum stays inside its range."""
    q, k, v = M.inputs("normal", 64, 256, 64, seed=6)
    f = M.Fault("rowsum", row=17, tile=2, col=1, kind="bitflip", bit=22)
    o1, c1 = M.flash_forward(q, k, v, level="snvr", faults=[f], correct=False)
    assert M.max_error(o1, q, k, v, "fp16", False) > 1.0 and c1.detected == 1 and c1.by_check == {"rowsum": 1}
    o, c = M.flash_forward(q, k, v, level="snvr", faults=[f])
    assert (c.detected, c.recomputed) == (1, 1) and M.max_error(o, q, k, v, "fp16", False) <= 1.0


@pytest.mark.parametrize("kind", ["normal", "uniform", "outlier"])
@pytest.mark.parametrize("causal", [False, True])
def test_clean_inputs_raise_no_row_sum_alarm(kind, causal):
    for seed in range(3):
        for precision in ("fp16", "bf16"):
            q, k, v = M.inputs(kind, 96, 96 if causal else 320, 64, seed=seed)
            o, c = M.flash_forward(q, k, v, precision=precision, level="snvr", causal=causal)
            assert c.detected == 0 and c.by_check == {}, (seed, precision, c)
            assert M.max_error(o, q, k, v, precision, causal) <= 1.0


def _chains(alpha, part, fault_step=-1, bit=0):
    """The model's two float32 chains (l = alpha l + part, l' = alpha l' - part), a flip of bit ``bit`` of l after
    step ``fault_step``."""
    l = np.zeros(1, dtype=np.float32)
    ln = np.zeros(1, dtype=np.float32)
    for t, (a, p) in enumerate(zip(alpha, part)):
        l = (a * l + p).astype(np.float32)
        ln = (a * ln - p).astype(np.float32)
        if t == fault_step:
            l = np.array([M.flip(float(l[0]), bit)], dtype=np.float32)
    return l, ln


def test_the_duplicate_is_exactly_the_negated_sum_and_any_flip_shows():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        alpha = np.exp2(-rng.exponential(2.0, n)).astype(np.float32)
        part = (rng.random(n) * rng.integers(1, 64)).astype(np.float32)
        l, ln = _chains(alpha, part)
        assert l[0] == -ln[0] and not M._row_sum_differs(l[None, :], ln[None, :])[0]
        t, bit = int(rng.integers(n)), int(rng.integers(32))
        l, ln = _chains(alpha, part, t, bit)
        exact = _chains(alpha, part)[0]
        # a flip that the later rescales do not wash out shows
        assert M._row_sum_differs(l[None, :], ln[None, :])[0] == (l[0] != exact[0] or np.isnan(l[0]))


ROWSUM_MAIN = r"""
#include <cstdio>
#include <cstring>
#include <cstdint>
#include "attention_mma.cuh"
// stdin: n, then n pairs (alpha, part), then the step and bit of a flip of l (-1: none); stdout: l, l', differs
int main() {
  int n;
  if (std::scanf("%d", &n) != 1) return 1;
  float l = 0.f, ln = 0.f;
  float a[64], p[64];
  for (int i = 0; i < n; ++i) if (std::scanf("%f %f", &a[i], &p[i]) != 2) return 1;
  int step, bit;
  if (std::scanf("%d %d", &step, &bit) != 2) return 1;
  for (int i = 0; i < n; ++i) {
    l = ftattn::row_sum_step(a[i], l, p[i]);
    ln = ftattn::row_sum_step(a[i], ln, -p[i]);
    if (i == step) {
      uint32_t u;
      std::memcpy(&u, &l, 4);
      u ^= 1u << bit;
      std::memcpy(&l, &u, 4);
    }
  }
  std::printf("%.9g %.9g %d\n", l, ln, ftattn::row_sum_differs(l, ln) ? 1 : 0);
}
"""


@pytest.mark.compile
def test_the_kernels_duplicated_row_sum_is_the_models(tmp_path):
    """The kernel's row_sum_step / row_sum_differs compiled for the host: the duplicate is exactly -l on clean
    sequences (the model's rule), and a flip of l that survives the later rescales shows."""
    exe = attention_host_program(tmp_path, "rowsum_main", ROWSUM_MAIN)
    rng = np.random.default_rng(1)
    for _ in range(15):
        n = int(rng.integers(1, 20))
        alpha = np.exp2(-rng.exponential(2.0, n)).astype(np.float32)
        part = (rng.random(n) * rng.integers(1, 64)).astype(np.float32)
        seq = f"{n} " + " ".join(f"{float(a)!r} {float(p)!r}" for a, p in zip(alpha, part))

        def run(step, bit):
            out = subprocess.run([str(exe)], input=f"{seq} {step} {bit}", capture_output=True, text=True, timeout=30).stdout.split()
            return float(out[0]), float(out[1]), int(out[2])

        l0, ln0, differs0 = run(-1, 0)
        model = _chains(alpha, part)[0][0]
        assert differs0 == 0 and l0 == -ln0
        assert abs(l0 - model) <= 2.0 * n * M.U32 * abs(model)  # fma vs the model's mul + add: the last bits
        l, ln, differs = run(int(rng.integers(n)), int(rng.integers(32)))
        assert ln == ln0 and differs == int(not l == l0)
