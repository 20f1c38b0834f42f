"""The threshold of efta's unified O check (and of strided's per-tile O check) on inputs with outliers in V.

The residual of a group's O checksum holds the roundings of P-weighted sums of the group's V elements, so its scale is
the row's own weighted group magnitude ``sum_c w_c (1 + sum_l |V[c, g + 8l]|)`` (model.o_threshold; the kernel
accumulates it as a fourth checksum block of the second product, model.group_magnitudes). A bound by the largest
magnitude over the keys instead lets one large |V| (an outlier of N(0, 100^2)) raise the threshold of every row, also
of rows that give its key a weight of 1/n: a wrong O element or a wrong 1/l of such a row then stays under the
threshold while its output is several times the verification tolerance."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from conftest import attention_host_program

from ftgen.families.attention import model as M

LQ, LK, D, BC = 64, 256, 64, 64
OUTLIER = 300.0  # three standard deviations of the outlier distribution's N(0, 100^2)


def _planted():
    """Normal Q, K, V (Q scaled by 3: peaked rows, whose |O| is close to s) with two outliers in V, in groups 5 and
    4 of the output columns (both of lane 2) at keys 100 and 150."""
    q, k, v = M.inputs("normal", LQ, LK, D, seed=21)
    v[100, 8 * 3 + 5] = OUTLIER
    v[150, 8 * 7 + 4] = OUTLIER
    return q * 3.0, k, v


def _handled(q, k, v, faults):
    """(significant, handled): faults whose uncorrected output is beyond the bound, and of those the ones detected
    with the corrected output within it."""
    sig = ok = 0
    for f in faults:
        o0, c0 = M.flash_forward(q, k, v, level="efta", bc=BC, faults=[f], correct=False)
        assert c0.injected == 1
        if M.max_error(M.round_to(o0, "fp16"), q, k, v, "fp16", False) <= 1.0:
            continue
        sig += 1
        o1, c1 = M.flash_forward(q, k, v, level="efta", bc=BC, faults=[f])
        ok += c1.detected >= 1 and M.max_error(M.round_to(o1, "fp16"), q, k, v, "fp16", False) <= 1.0
    return sig, ok


def test_a_v_outlier_does_not_hide_wrong_o_elements_of_rows_that_barely_see_it():
    """Sign and mantissa flips of O accumulators of the outlier's group (last tile, several rows): a threshold scaled
    by the group's largest magnitude (about 300) misses those that are a few times the tolerance; the row's weighted
    magnitude (about 14) catches every one."""
    q, k, v = _planted()
    faults = [M.Fault("o", r, 3, 8 * l + 5, "bitflip", b) for r in (3, 17, 40, 58) for l in (0, 6) for b in (31, 21, 20, 19)]
    sig, ok = _handled(q, k, v, faults)
    assert sig >= 20
    assert ok == sig


def test_a_v_outlier_does_not_hide_a_wrong_inverse_row_sum():
    """A wrong 1/l of a lane shows as the same residual in the lane's two groups: with outliers in both groups a
    max-magnitude threshold passes flips of 1/l that move the output beyond the tolerance."""
    q, k, v = _planted()
    faults = [M.Fault("inv_l", r, 0, 2, "bitflip", b) for r in (3, 17, 40, 58) for b in (19, 18, 17, 16, 15, 14, 13)]
    sig, ok = _handled(q, k, v, faults)
    assert sig >= 12
    assert ok == sig


def test_a_row_that_attends_to_the_outlier_key_raises_no_alarm():
    """The threshold grows where the row's weights do: rows dominated by the outlier's key (their O holds about
    300 in that column) stay clean, at every level that checks O."""
    q, k, v = _planted()
    q[:8] = k[100] * 2.0  # logit of key 100 about 2 |k|^2 / 8 = 16, the others about N(0, 4): nearly all the weight
    q[8:16] = k[150] * 2.0
    for level in ("strided", "efta"):
        for bc in (32, 64):
            o, c = M.flash_forward(q, k, v, level=level, bc=bc)
            assert c.detected == 0 and c.max_score < 1.0, (level, bc, c)
            assert M.max_error(M.round_to(o, "fp16"), q, k, v, "fp16", False) <= 1.0
    assert np.all(np.abs(o[:8, 29]) > 250.0)


@pytest.mark.parametrize("kind", ["normal", "uniform", "outlier"])
def test_clean_outlier_campaign_keeps_its_margin(kind):
    """No false alarm with the row-weighted threshold, fp16 and bf16, causal or not (seq 256, d 128)."""
    worst = 0.0
    for seed in range(4):
        q, k, v = M.inputs(kind, 64, 256, 128, seed=100 + seed)
        for precision in ("fp16", "bf16"):
            for level in ("strided", "efta"):
                o, c = M.flash_forward(q, k, v, precision=precision, level=level, causal=seed % 2 == 1, bc=64)
                assert c.detected == 0, (kind, seed, precision, level, c)
                worst = max(worst, c.max_score)
    assert worst < 0.9


def test_group_magnitudes_round_up_and_bound_the_group():
    rng = np.random.default_rng(3)
    v = M.round_to(rng.standard_normal((40, 64)) * np.where(rng.random((40, 64)) < 0.05, 100.0, 1.0), "fp16")
    exact = np.abs(v.astype(np.float64)).reshape(40, 8, 8).sum(axis=1)
    for precision, u in (("fp16", 2.0**-10), ("bf16", 2.0**-7)):
        for ones in (0.0, 1.0):
            a = M.group_magnitudes(v, ones, precision)
            assert np.all(M.round_to(a, precision) == a)  # representable: the B operand of the magnitude block
            assert np.all(a >= (exact + ones) * (1.0 - 1e-6))  # fp32 sum, rounded up
            assert np.all(a <= (exact + ones) * (1.0 + u + 1e-6))  # one step of the type at most
    x = np.array([1.0 + 2.0**-12, 3.0, 0.0], dtype=np.float32)
    assert M.round_up_to(x, "fp16").tolist() == [1.0 + 2.0**-10, 3.0, 0.0]
    assert M.round_up_to(x, "bf16").tolist() == [1.0 + 2.0**-7, 3.0, 0.0]


ENC_MAIN = r"""
#include <cstdio>
#include <vector>
#include "attention_mma.cuh"
// reads: bf16 unified keys, then keys x 64 floats (V rows, exactly representable in the type); prints per key and
// group the four encodings as floats
template <class T, bool U>
void run(int keys) {
  std::vector<T> row(64);
  for (int c = 0; c < keys; ++c) {
    for (int t = 0; t < 64; ++t) {
      float x;
      if (std::scanf("%f", &x) != 1) return;
      row[t] = ftattn::Half<T>::from(x);
    }
    for (int g = 0; g < 8; ++g) {
      T out[4];
      const float w = ftattn::encode_v_group<T, 8, U>(row.data(), g, out);
      std::printf("%.9g %.9g %.9g %.9g %.9g\n", ftattn::Half<T>::to(out[0]), ftattn::Half<T>::to(out[1]),
                  ftattn::Half<T>::to(out[2]), ftattn::Half<T>::to(out[3]), w);
    }
  }
}
int main() {
  int bf16, unified, keys;
  if (std::scanf("%d %d %d", &bf16, &unified, &keys) != 3) return 1;
  if (bf16) { if (unified) run<__nv_bfloat16, true>(keys); else run<__nv_bfloat16, false>(keys); }
  else { if (unified) run<__half, true>(keys); else run<__half, false>(keys); }
}
"""


@pytest.mark.compile
def test_the_kernels_v_encodings_are_the_models(tmp_path):
    """encode_v_group (the kernel's V checksum and magnitude columns), compiled for the host: the magnitude column is
    model.group_magnitudes exactly, the checksums are the model's to the fp32 summation order."""
    exe = attention_host_program(tmp_path, "enc_main", ENC_MAIN)
    keys = 24
    for precision in ("fp16", "bf16"):
        v = M.round_to(M.inputs("outlier", keys, keys, 64, seed=9)[2] * 3.0, precision)
        v[3, 13] = M.round_to(np.array([-517.3], dtype=np.float32), precision)[0]
        for unified in (False, True):
            data = f"{int(precision == 'bf16')} {int(unified)} {keys}\n" + " ".join(f"{x:.9g}" for x in v.ravel())
            run = subprocess.run([str(exe)], input=data, capture_output=True, text=True, timeout=60)
            assert run.returncode == 0, run.stderr
            got = np.array([[float(x) for x in line.split()] for line in run.stdout.splitlines()]).reshape(keys, 8, 5)
            ones = 1.0 if unified else 0.0
            assert np.array_equal(got[:, :, 3], M.group_magnitudes(v, ones, precision))
            c1, c2 = M.strided_checksums(v.T, M.STRIDE, ones)
            hi, lo = M.split16(c1.T, precision)
            u = 2.0 ** -10 if precision == "fp16" else 2.0 ** -7
            scale = np.abs(v.astype(np.float64)).reshape(keys, 8, 8).sum(axis=1) + ones
            assert np.all(np.abs(got[:, :, 0] + got[:, :, 1] - (hi + lo)) <= 1e-5 * scale)
            assert np.all(np.abs(got[:, :, 2] - M.round_to(c2.T, precision)) <= u * np.abs(c2.T) + 1e-4 * scale)
            assert np.allclose(got[:, :, 4], np.abs(c2.T), rtol=1e-5, atol=1e-4 * scale.max())
