"""The command line's PLD follows the query's relative tolerance by default (issue 35, item 1).

Until 2026-11-29 ``--discretization`` defaulted to 1e-4 on the command line, which the PLD treats as an explicit
width and never refines: one step of the subsampled Gaussian at q 0.001, sigma 1.3 came back as a bracket 0.9%
wide (``rtol_met: false``) while the Python API, with no width given, narrows it to 1e-3. Truth here: the exact
epsilon of one Poisson-subsampled Gaussian step, from its hockey-stick divergence evaluated with mpmath at 40
digits (the privacy loss is monotone in the output, so the divergence is two normal tails at the crossing point),
both neighbouring directions, solved for epsilon by bisection.
"""

from __future__ import annotations

import json
import subprocess
import sys

import mpmath as mp
import pytest

mp.mp.dps = 40


def _phi_tail(x):  # P(N(0,1) > x)
    return mp.erfc(x / mp.sqrt(2)) / 2


def _delta_one_step(eps, sigma, q):
    """Exact hockey-stick divergence of one step, the worse of remove (P || Q) and add (Q || P)."""
    sigma, q, eps = mp.mpf(sigma), mp.mpf(q), mp.mpf(eps)
    # loss L(x) = log((1-q) + q exp((2x-1)/(2 sigma^2))) for P = (1-q)N(0,s^2) + qN(1,s^2) against Q = N(0,s^2)

    def x_at(level):  # L(x) = level, L increasing in x
        inner = (mp.e**level - (1 - q)) / q
        return None if inner <= 0 else sigma**2 * mp.log(inner) + mp.mpf(1) / 2

    # remove: sup_S P(S) - e^eps Q(S) with S = {L > eps}
    x = x_at(eps)
    rem = (1 - q) * _phi_tail(x / sigma) + q * _phi_tail((x - 1) / sigma) - mp.e**eps * _phi_tail(x / sigma)
    # add: sup_S Q(S) - e^eps P(S), S = {L < -eps}
    x = x_at(-eps)
    if x is None:
        add = mp.mpf(0)
    else:
        lo = lambda t: 1 - _phi_tail(t)  # noqa: E731
        add = lo(x / sigma) - mp.e**eps * ((1 - q) * lo(x / sigma) + q * lo((x - 1) / sigma))
    return max(rem, add, mp.mpf(0))


def _exact_epsilon(delta, sigma, q):
    lo, hi = mp.mpf(0), mp.mpf(20)
    for _ in range(200):
        mid = (lo + hi) / 2
        if _delta_one_step(mid, sigma, q) > delta:
            lo = mid
        else:
            hi = mid
    return float(hi)


def _cli(*args):
    p = subprocess.run([sys.executable, "-m", "dputils", *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("sigma,q,delta", [(1.3, 0.001, 1e-5), (0.5, 0.3, 1e-3)])
def test_default_grid_is_refined_to_rtol(sigma, q, delta):
    out = _cli(
        "epsilon", "--accountant", "pld", "--mechanism", "subsampled-gaussian", "--sigma", str(sigma), "--q", str(q),
        "--steps", "1", "--delta", str(delta),
    )  # fmt: skip
    truth = _exact_epsilon(delta, sigma, q)
    assert out["lower"] <= truth * (1 + 1e-12) and truth <= out["upper"] * (1 + 1e-12), (out, truth)
    assert out["rtol_met"] is True and out["upper"] - out["lower"] <= 1e-3 * out["upper"], out
    assert out["epsilon"] == out["upper"]


def test_explicit_discretization_is_kept():
    out = _cli(
        "epsilon", "--accountant", "pld", "--mechanism", "subsampled-gaussian", "--sigma", "1.3", "--q", "0.001",
        "--steps", "1", "--delta", "1e-5", "--discretization", "1e-4",
    )  # fmt: skip
    assert out["discretization"] == 1e-4 and out["rtol_met"] is False and "explicit" in out["rtol_reason"]
    truth = _exact_epsilon(1e-5, 1.3, 0.001)
    assert out["lower"] <= truth <= out["upper"]
