"""The kmeans family's rounding constants and the arithmetic of the delivered precision that its models share
(:mod:`.model`, :mod:`.warp_model`)."""

from __future__ import annotations

import math

import numpy as np

from ..gemm import abft_model as _g

P_FALSE_ALARM = 1e-9
LAMBDA = math.sqrt(2.0 * math.log(2.0 / P_FALSE_ALARM))  # 6.55
U64 = 2.0**-53


def round_tf32(a) -> np.ndarray:
    """Round fp32 values to TF32 (10 explicit mantissa bits), to nearest, ties away (cvt.rna.tf32.f32)."""
    return _g.to16(a, "tf32")


def rms_weight(n: int) -> float:
    """The root mean square of the weights 1..n."""
    return math.sqrt((n + 1.0) * (2.0 * n + 1.0) / 6.0)
