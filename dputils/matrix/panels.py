"""The remaining panels of {cite}`schuchardt_kalinin` (Figures 3d-f, 4c-d, 6): one function per panel.

Each function computes what one panel of the paper plots, from the package's accountants, so that the
chapter only calls it and checks the claim:

* :func:`hybrid_best_fraction` (Figure 4): the share of the steps at which the hybrid allocation of
  :func:`~.posterior_paths.allocation_paths` gives the lowest bound.
* :func:`family_bounds` (Figure 6): ``lambda_bar_b`` at the last step of every epoch for the variational
  families of Appendix F: Option 1 (uniform psi), Options 1+3 (the temperature family, the book's default)
  and Options 1+2+3 (Option 2's psi per reference component added, :func:`~.condcomp.option2_hazard_bound`).
* :func:`condcomp_at_sigmas` (Figures 3a-f): the epsilon that conditional composition certifies at given
  noise levels (the Renyi-calibrated sigmas), with the seconds each evaluation took; epsilon below the
  target at the Renyi sigma means conditional composition needs less noise there (the figures' ordering).
* :func:`mc_delta` (the Monte Carlo curve of Figures 3d-e): a Monte Carlo estimate of ``delta(eps)`` with its
  empirical-Bernstein bracket (an estimate, not a bound).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import numpy as np

from ..errors import DPValueError, check_delta, check_positive, check_positive_int, check_probability
from .allocation import MatrixMonteCarloAccountant
from .condcomp import TEMPERATURES, ConditionalCompositionAccountant, option2_hazard_bound
from .factorizations import Strategy
from .mechanism import BallsInBinsMatrixMechanism

__all__ = ["ALLOCATION_CURVES", "FAMILIES", "condcomp_at_sigmas", "family_bounds", "hybrid_best_fraction", "mc_delta"]

#: The allocations of Figure 4, in the paper's legend order.
ALLOCATION_CURVES = ("union", "global max", "per-epoch max (e ≥ 1)", "hybrid (e ≥ 2)")
#: The variational families of Figure 6 (names as in the paper's legend, Option 2 added).
FAMILIES = ("Option 1", "Options 1+3", "Options 1+2+3")


def _check_epochs(means: np.ndarray, epochs: int) -> tuple[int, int]:
    N = means.shape[1]
    k = check_positive_int("epochs", epochs)
    if N % k:
        raise DPValueError(f"epochs must divide the number of steps {N}, got {k}")
    return k, N // k


def hybrid_best_fraction(curves: Mapping[str, np.ndarray], rtol: float = 1e-9) -> float:
    """Fraction of the steps at which the hybrid curve is the lowest of the four (ties within ``rtol`` count)."""
    others = np.min([v for key, v in curves.items() if key != "hybrid (e ≥ 2)"], axis=0)
    return float(np.mean(curves["hybrid (e ≥ 2)"] <= others * (1 + rtol)))


def family_bounds(
    means: np.ndarray, sigma: float, delta_e: float, epochs: int, temperatures=TEMPERATURES
) -> dict[str, np.ndarray]:
    """Figure 6: ``lambda_bar_b`` (remove, union bound ``delta_E / N`` per step) at the last step of each epoch.

    Families (Appendix F): ``"Option 1"`` the uniform psi; ``"Options 1+3"`` the uniform psi and the
    temperature family ``softmax(-|mu_i - mu_j|^2 / t)`` (``temperatures``, inf = uniform); ``"Options
    1+2+3"`` adds Option 2, ``softmax(-|mu_k - mu_j|^2 / t)`` per reference component k at the same finite
    temperatures. Each family's bound is the best (max over psi) of its members, so a larger family never
    gives a larger ``lambda_bar``. Returns one array of k values per family.
    """
    M = np.asarray(means, dtype=float)
    k, b = _check_epochs(M, epochs)
    de = check_probability("delta_e", delta_e, allow_one=False)
    s = check_positive("sigma", sigma)
    N = M.shape[1]
    finite = tuple(t for t in temperatures if not math.isinf(t))
    fams = {
        "Option 1": ((math.inf,), ()),
        "Options 1+3": (tuple(temperatures), ()),
        "Options 1+2+3": (tuple(temperatures), finite),
    }
    ends = [e * b for e in range(1, k + 1)]
    return {
        name: np.array([option2_hazard_bound(M, s, n, de / N, None, sh, o2) for n in ends])
        for name, (sh, o2) in fams.items()
    }


def condcomp_at_sigmas(
    strategy: Strategy,
    sigmas: Mapping[float, float],
    delta: float,
    discretization: float = 2e-3,
    delta_e_fraction: float = 0.5,
) -> dict[float, dict[str, float]]:
    """Figures 3a-f: the epsilon conditional composition certifies at ``delta`` for each ``{eps: sigma}``.

    ``delta_E = delta_e_fraction * delta`` (the paper's delta / 2), union-bound allocation, both directions
    (:class:`~dputils.matrix.condcomp.ConditionalCompositionAccountant`, an upper bound). Returns, per
    target eps, ``{"sigma", "condcomp_epsilon", "seconds"}``. A certified epsilon below the target at the
    Renyi-calibrated sigma means conditional composition needs less noise than Renyi at that target.
    """
    dl = check_delta(delta)
    f = check_probability("delta_e_fraction", delta_e_fraction, allow_one=False)
    out = {}
    for e, sig in sigmas.items():
        t0 = time.perf_counter()
        acc = ConditionalCompositionAccountant(delta_e=f * dl, progress=False, discretization=discretization)
        acc.compose(BallsInBinsMatrixMechanism(strategy, check_positive("sigma", sig)))
        eps = float(acc.get_epsilon(dl))
        out[float(e)] = {"sigma": float(sig), "condcomp_epsilon": eps, "seconds": time.perf_counter() - t0}
    return out


def mc_delta(
    strategy: Strategy, sigma: float, epsilon: float, samples: int = 200_000, seed: int = 0
) -> dict[str, float]:
    """Monte Carlo ``delta(eps)`` of the balls-in-bins pair at ``sigma``: estimate and 99% bracket.

    :class:`~dputils.matrix.allocation.MatrixMonteCarloAccountant` (both directions, the larger reported):
    an estimate with an empirical-Bernstein interval, **not** a certified bound.
    """
    acc = MatrixMonteCarloAccountant(samples=samples, seed=seed)
    acc.compose(BallsInBinsMatrixMechanism(strategy, check_positive("sigma", sigma)))
    r = acc.get_delta(epsilon)
    return {"estimate": float(r.value), "lower": float(r.lower), "upper": float(r.upper)}
