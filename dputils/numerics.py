"""Small log-space helpers shared by the mechanisms, the curves and the accountants.

Privacy-loss tails and deltas span hundreds of decades; these keep differences of tiny
probabilities at full relative accuracy instead of cancelling to zero.
"""

from __future__ import annotations

import numpy as np

__all__ = ["log_diff_exp"]


def log_diff_exp(a, b):
    r"""Elementwise :math:`\log(e^a - e^b)` for :math:`a \ge b`, computed as :math:`a + \log(-\mathrm{expm1}(b - a))`.

    Returns ``-inf`` where ``a == b``, where ``a`` is ``-inf``, and where ``b > a`` (the difference of
    two probabilities that rounding made equal or inverted is treated as zero, never as NaN).
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = b - a
        out = a + np.log(-np.expm1(np.minimum(d, 0.0)))
    return np.where(np.isneginf(a) | (d >= 0), -np.inf, out)
