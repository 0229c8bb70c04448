"""The truths of gauss_audit's target T11e (information ceiling and Gaussian-surrogate epsilon at two fixed settings,
from our notes' integration) checked by a third computation: the hockey-stick divergences integrated directly on a
dense grid, ``H(P||Q) = int (p - e^eps q)_+`` for both orientations, with P the Model-1 IN law (a Binomial mixture
of Gaussians, or its Gaussian surrogate with Proposition 1's moments written out here) and Q = N(0, sigma^2).
No dputils code is used. The recorded epsilon must bracket the delta of 1e-5: delta(eps - 1e-3) > 1e-5 >
delta(eps + 1e-3), the target's tolerance."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from dputils.book.chapters.gauss_audit import CEILING_SETTINGS

SPEC = yaml.safe_load((Path(__file__).parents[1] / "params/targets/gauss_audit.yml").read_text("utf-8"))["T11e"]


def _densities(T, q, sigma, exact):
    x = np.linspace(-14 * sigma, math.sqrt(T) * q + 14 * sigma + 14 * math.sqrt(q), 1_000_001)
    q_out = stats.norm.pdf(x, 0.0, sigma)
    if exact:  # S_T(1) = (K + N(0, T sigma^2)) / sqrt(T), K ~ Bin(T, q)
        k = np.arange(T + 1)
        w = stats.binom.pmf(k, T, q)
        keep = w > 1e-30
        p_in = np.zeros_like(x)
        for kk, ww in zip(k[keep], w[keep]):
            p_in += ww * stats.norm.pdf(x, kk / math.sqrt(T), sigma)
    else:  # Proposition 1: mean sqrt(T) q, variance sigma^2 + q (1 - q)
        p_in = stats.norm.pdf(x, math.sqrt(T) * q, math.sqrt(sigma**2 + q * (1 - q)))
    return x, p_in, q_out


def _delta(eps, x, p, q):
    f = np.exp(eps)
    return max(np.trapezoid(np.maximum(p - f * q, 0), x), np.trapezoid(np.maximum(q - f * p, 0), x))


@pytest.mark.parametrize("j", range(4))
def test_t11e_truth_brackets_delta(j):
    T, q, sigma = CEILING_SETTINGS[j // 2]
    x, p, qq = _densities(T, q, sigma, exact=(j % 2 == 0))
    eps = SPEC["paper"][j]
    tol = SPEC["tol"]
    assert _delta(eps - tol, x, p, qq) > 1e-5 > _delta(eps + tol, x, p, qq)


def test_t11f_truth_point_estimate():
    """T11f: eps of the Gaussian pair fitted (sample means, ddof-1 standard deviations) to the fixed quantile
    scores, in mpmath with the quadratic-root hockey stick of tests/test_gauss37_truths.py (no dputils code)."""
    import mpmath as mp
    import yaml as _yaml

    t37 = pytest.importorskip("test_gauss37_truths")
    want = _yaml.safe_load((Path(__file__).parents[1] / "params/targets/gauss_audit.yml").read_text("utf-8"))["T11f"]
    with mp.workdps(30):
        ins = t37.quantile_scores(500, mp.mpf(3), mp.mpf("1.1"))
        outs = t37.quantile_scores(500, mp.mpf(0), mp.mpf(1))

        def mean(x):
            return mp.fsum(x) / len(x)

        def sd(x):
            return mp.sqrt(mp.fsum((xi - mean(x)) ** 2 for xi in x) / (len(x) - 1))

        got = t37.eps_pair(mp.mpf("1e-5"), mean(ins) - mean(outs), sd(outs), sd(ins), n=80)
    assert abs(float(got) - want["paper"]) < 1e-9
