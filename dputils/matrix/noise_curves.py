"""Calibrated-noise curves of balls-in-bins matrix mechanisms: the smallest noise multiplier sigma at which an
accountant meets ``delta(eps) <= delta``, for a list of target epsilons (Figures 2-3 of Schuchardt and Kalinin,
"Matrix mechanisms under random allocation"), and the reference accountants these curves are compared with.

* :func:`secant_calibrate`: the search for sigma, :func:`dputils.calibration.calibrate` with its secant method.
  It keeps a bracket ``[lo, hi]`` on ``log sigma`` whose upper end meets the target and whose lower end fails,
  and narrows it to the relative width ``rel_tol`` with secant steps on ``log delta(eps)`` against
  ``log sigma`` (smooth, so about half the evaluations of a bisection). The answer is the upper end: for an
  upper-bound accountant a certified sigma, rounded up.
* :func:`renyi_sigma`: the calibrated sigma of Algorithm 3 (Rényi DP with the DP of Lemma 3.3 for "remove" and
  Lemma 3.4, or the tight add bound, for "add"), with the high orders added only when they can matter.
* :class:`ImportanceMonteCarlo`: an importance-sampling estimate of the remove-direction delta of one-epoch
  DP-SGD under balls-in-bins (the pair of Lemma 2.8 with ``G = I``), the paper's Monte Carlo baseline.
* :func:`mc_grid_deltas` and :func:`mc_sigma`: plain Monte Carlo delta on a grid of sigma and the sigma where
  the log-linear interpolation crosses the target.
* :class:`PlainGaussianRDP`, :class:`RemoveOnlyRDP`, :class:`PriorWeightsPLD`, :class:`PoissonSubsampledPLD`:
  the reference curves (unamplified Gaussian, the remove direction alone, per-step mixtures at prior weights,
  Poisson subsampling), each an object with ``get_delta(eps)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..accountants.pld import PLDAccountant
from ..accountants.rdp import rdp_to_delta
from ..calibration import MAX_EVALUATIONS, calibrate
from ..errors import DPValueError
from ..mechanisms import GaussianMixtureMechanism
from ..optional import require
from .allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant, MatrixRenyiTightAccountant
from .factorizations import Strategy
from .mechanism import BallsInBinsMatrixMechanism
from .renyi import rho_add_lemma34, rho_add_tight, rho_remove, truncate_gram

#: :func:`secant_calibrate` searches sigma within a factor ``e^8`` of its guess.
_SECANT_RANGE = 8.0

__all__ = [
    "sigma_family",
    "secant_calibrate",
    "renyi_sigma",
    "ImportanceMonteCarlo",
    "mc_grid_deltas",
    "mc_sigma",
    "PlainGaussianRDP",
    "RemoveOnlyRDP",
    "PriorWeightsPLD",
    "PoissonSubsampledPLD",
]


def sigma_family(cls: type, strategy: Strategy, **kwargs: Any) -> Callable[[float], Any]:
    """``sigma -> cls(**kwargs).compose(BallsInBinsMatrixMechanism(strategy, sigma))``: the accountants of one
    strategy at every noise multiplier, the argument :func:`secant_calibrate` searches over."""

    def make(sigma: float) -> Any:
        return cls(**kwargs).compose(BallsInBinsMatrixMechanism(strategy, sigma))

    return make


def secant_calibrate(
    make_accountant: Callable[[float], Any],
    eps: float,
    delta: float,
    guess: float,
    rel_tol: float,
    *,
    cache: dict[float, Any] | None = None,
    bracket: bool = False,
    step: float = 0.03,
) -> float | tuple[float, float]:
    """Smallest sigma, rounded up to relative precision ``rel_tol``, with ``delta(eps) <= delta``: a thin wrapper
    over :func:`dputils.calibration.calibrate` with ``method="secant"``.

    ``delta(eps)`` is ``make_accountant(sigma).get_delta(eps)``, assumed non-increasing in sigma. The secant
    (its description is in :mod:`dputils.calibration`) works on ``log delta(eps)`` (floored at 1e-300) against
    ``log sigma`` from ``sigma = guess``, first step ``step``, searching within a factor ``e^8`` of ``guess``,
    and stops at a bracket ``[lo, hi]`` with ``hi / lo <= 1 + rel_tol`` whose upper end meets the target and
    whose lower end fails. Returns ``hi`` (for an upper-bound accountant a certified sigma, rounded up), or
    ``(hi, lo)`` when ``bracket``. ``cache`` (optional) keeps the accountant built at each sigma. Errors of the
    accountant propagate; a NaN delta counts as missing the target. Raises :class:`NumericalError` when no
    bracket exists within a factor ``e^8`` of ``guess``, :class:`DPValueError` for ``guess <= 0``, ``delta``
    outside (0, 1) or ``rel_tol`` outside :data:`dputils.calibration.REL_TOL_RANGE`.
    """
    if not (guess > 0 and rel_tol > 0 and 0 < delta < 1):
        raise DPValueError(
            f"secant_calibrate needs guess > 0, rel_tol > 0, 0 < delta < 1, got {guess}, {rel_tol}, {delta}"
        )
    if not (math.isfinite(step) and step > 0):
        raise DPValueError(f"secant_calibrate needs a finite step > 0, got {step!r}")

    def value(s: float) -> float:
        acc = cache.get(s) if cache is not None else None
        if acc is None:
            acc = make_accountant(s)
            if cache is not None:
                cache[s] = acc
        return float(acc.get_delta(eps))

    c = calibrate(
        value,
        delta,
        monotone="decreasing",
        start=guess,
        limits=(guess * math.exp(-_SECANT_RANGE), guess * math.exp(_SECANT_RANGE)),
        rel_tol=rel_tol,
        # where delta(eps) is flat the bracket search moves by `step` at a time: room for crossing the range
        max_evaluations=math.ceil(2 * _SECANT_RANGE / step) + MAX_EVALUATIONS,
        name="sigma",
        failures="raise",
        method="secant",
        secant_step=step,
    )
    return (c.bracket[1], c.bracket[0]) if bracket else c.value


def renyi_sigma(
    strategy: Strategy,
    orders: Sequence[int],
    epsilons: Sequence[float],
    delta: float,
    *,
    rel_tol: float,
    tier_budget: float,
    add_classes: Sequence[int] = (),
    cache: dict[float, Any] | None = None,
    shape: Sequence[float] | None = None,
    tight: bool = False,
    **extra: Any,
) -> list[float]:
    """Calibrated sigma of Algorithm 3 (Rényi DP over the integer ``orders``, Theorem 3.1's conversion) at each
    of ``epsilons``, each by :func:`secant_calibrate` (rounded up to ``rel_tol``).

    ``tight`` uses :class:`MatrixRenyiTightAccountant` (add bound over ``add_classes``) instead of
    :class:`MatrixRenyiAccountant`; ``extra`` goes to the accountant. The high orders are the expensive part of
    the DP, so each search first runs with the orders ``2..A``, ``A`` twice the largest order whose conversion
    floor ``(a-1)(-eps) - log(a-1) + a log(1-1/a)`` (Theorem 3.1 at ``rho = 0``) exceeds ``log(delta/100)``, at least
    32. That is the answer for all ``orders`` when no order above ``A`` meets the target at the failing end
    ``lo`` of the bracket, which a lower bound on rho certifies: the add bound itself, and for remove the exact
    divergence of ``G`` truncated to one band (elementwise below ``G``; ``S_alpha`` of Eq. 5 grows with every
    entry of ``G``); else one evaluation with every order at ``lo``. Otherwise the search is repeated with every
    order. Each search starts from the previous answer scaled like ``shape`` (0.75 times it without ``shape``;
    the first from ``shape[0]`` or 1). ``cache[eps]`` receives the accountant at the answer.
    """
    G, top = strategy.gram, max(orders)
    G1, _ = truncate_gram(G, 1)
    cls = MatrixRenyiTightAccountant if tight else MatrixRenyiAccountant
    kw = dict(extra, add_classes=list(add_classes)) if tight else extra

    def rho_lower(s: float, a: np.ndarray) -> np.ndarray:  # a lower bound on Algorithm 3's rho at the orders a
        add = rho_add_tight(G, s, a, list(add_classes)) if tight else rho_add_lemma34(G, s, a)
        return np.maximum(add, rho_remove(G1, s, a, 1)[0])

    out: list[float] = []
    for j, e in enumerate(epsilons):
        if not out:
            guess = shape[0] if shape is not None else 1.0
        else:
            guess = out[-1] * (shape[j] / shape[j - 1] if shape is not None else 0.75)
        # start with the orders that can reach delta / 100 at all (rho -> 0 as sigma grows), at least 16
        floor = [(a - 1) * -e - math.log(a - 1) + a * math.log1p(-1 / a) for a in range(2, top + 1)]
        A = min(2 * max([16] + [a for a, lf in zip(range(2, top + 1), floor) if lf > math.log(delta / 100)]), top)
        while True:

            def make(s: float, A: int = A) -> Any:
                acc = cls(orders=range(2, A + 1), tier_budget=tier_budget, **kw)
                return acc.compose(BallsInBinsMatrixMechanism(strategy, s))

            window: dict[float, Any] = {}
            hi, lo = secant_calibrate(make, e, delta, guess, rel_tol, cache=window, bracket=True)
            above = np.arange(A + 1, top + 1)
            if A >= top or rdp_to_delta(above, rho_lower(lo, above), e)[0] > delta:
                break  # every order above A fails at lo as well: hi is the answer for all orders
            full = cls(orders=orders, tier_budget=tier_budget, **kw).compose(BallsInBinsMatrixMechanism(strategy, lo))
            if float(full.get_delta(e)) > delta:
                break  # the same, shown by one evaluation with every order
            A, guess = top, hi
        if cache is not None:
            cache[e] = window[hi]  # the accountant at the answer
        out.append(hi)
    return out


class ImportanceMonteCarlo:
    """``delta(eps)`` of the remove direction for one-epoch DP-SGD with ``b`` slots (the pair of Lemma 2.8 with
    ``G = I``: ``P = (1/b) sum_i N(e_i, sigma^2 I)``, ``Q = N(0, sigma^2 I)``), estimated by importance sampling.

    ``delta(eps) = E_P[(1 - e^{eps - L})_+]`` with the privacy loss ``L = log mean_i exp((y_i - 1/2)/sigma^2)``
    (slot 0 participating). Each sample shifts one coordinate of the standard normal ``xi`` by ``theta_j``
    towards the region ``L > eps`` (the participating slot with probability ``weights[1]``, one of the others
    with ``weights[2]``, none with ``weights[0]``: a defensive mixture) and is weighted by the likelihood ratio
    of the standard normal to this mixture, so the estimate is unbiased. The same seed gives the same random
    numbers at every sigma (a smooth function of sigma for :func:`secant_calibrate`).
    """

    def __init__(
        self, b: int, sig: float, samples: int, seed: int = 0, weights: tuple[float, float, float] = (0.1, 0.45, 0.45)
    ):
        if b < 2 or sig <= 0 or samples < 2 or abs(sum(weights) - 1) > 1e-12 or min(weights) <= 0:
            raise DPValueError(
                f"ImportanceMonteCarlo needs b >= 2, sig > 0, samples >= 2 and positive weights summing to 1, "
                f"got b={b}, sig={sig}, samples={samples}, weights={weights}"
            )
        self.b, self.sig, self.n, self.seed, self.pi = b, sig, samples, seed, weights

    def terms(self, eps: float) -> np.ndarray:
        """The weighted samples ``(1 - e^{eps - L})_+ dN/dmixture``, whose mean is the estimate."""
        f, w = self.parts(eps)
        return f * w

    def parts(self, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """The two factors of :meth:`terms`: ``f = (1 - e^{eps - L})_+`` at each shifted sample and its weight
        ``w = dN/dmixture``. ``mean(f**2 * w)`` estimates ``E_P[f^2]``, so the plain mean's variance per sample,
        ``E_P[f^2] - delta^2``, is estimated from the same draws (the chapter's sample-efficiency figure)."""
        b, s, n = self.b, self.sig, self.n
        p_none, p_part, p_other = self.pi
        rng = np.random.default_rng(self.seed)
        xi, u = rng.standard_normal((n, b)), rng.random(n)
        other = 1 + rng.integers(0, b - 1, size=n)
        c = b * math.exp(eps)  # the loss exceeds eps when the sum of the b terms exceeds c
        theta = np.full(b, max(s * math.log(max(c - (b - 1) - math.exp(0.5 / s**2), 1.0)) + 0.5 / s, 0.0))
        theta[0] = max(s * math.log(max(c - (b - 1), 1.0)) - 0.5 / s, 0.0)  # the participating slot (0)
        comp = np.where(u < p_none, -1, np.where(u < p_none + p_part, 0, other))
        rows = np.nonzero(comp >= 0)[0]
        xi[rows, comp[rows]] += theta[comp[rows]]
        lj = xi * theta - 0.5 * theta**2  # log density ratio of each shifted component
        logq = logsumexp(
            np.column_stack(
                [np.full(n, math.log(p_none)), math.log(p_part) + lj[:, :1], math.log(p_other / (b - 1)) + lj[:, 1:]]
            ),
            axis=1,
        )
        y = s * xi
        y[:, 0] += 1.0
        L = logsumexp(y / s**2 - 0.5 / s**2, axis=1) - math.log(b)
        return -np.expm1(np.minimum(eps - L, 0.0)), np.exp(-logq)  # (1 - e^{eps - L})_+ and the weight

    def get_delta(self, eps: float) -> float:
        return float(self.terms(eps).mean())


def mc_grid_deltas(
    strategy: Strategy, grid: Sequence[float], epsilons: Sequence[float], samples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Plain Monte Carlo ``delta(eps) = E[(1 - e^{eps - L})_+]`` and its standard error for each ``(sigma,
    eps)`` of ``grid x epsilons`` (shape ``(len(grid), len(epsilons))``), in the worse of the two directions
    (the losses of :class:`MatrixMonteCarloAccountant`, ``samples`` draws with ``seed`` at each sigma)."""
    est = np.zeros((len(grid), len(epsilons)))
    se = np.zeros_like(est)
    for i, s in enumerate(grid):
        acc = MatrixMonteCarloAccountant(samples=samples, seed=seed)
        losses = acc.compose(BallsInBinsMatrixMechanism(strategy, s)).losses()
        for j, e in enumerate(epsilons):
            for L in losses.values():
                v = -np.expm1(np.minimum(e - L, 0.0))  # (1 - e^{eps - L})_+
                if v.mean() >= est[i, j]:
                    est[i, j], se[i, j] = v.mean(), v.std(ddof=1) / math.sqrt(v.size)
    return est, se


def mc_sigma(grid: Sequence[float], est: np.ndarray, se: np.ndarray, j: int, delta: float) -> tuple[float, float]:
    """``(sigma, standard error)`` where ``log delta``, linear in sigma between the points of ``grid``, first
    crosses ``delta`` (column ``j`` of :func:`mc_grid_deltas`' estimates); the error is the larger relative
    standard error of the two points divided by the slope of ``log delta``. ``(nan, nan)`` when the grid does
    not bracket the crossing."""
    logd = np.log(np.maximum(est[:, j], 1e-300))
    ok = np.nonzero(logd <= math.log(delta))[0]
    if ok.size == 0 or ok[0] == 0:
        return float("nan"), float("nan")
    i = ok[0]
    t = (math.log(delta) - logd[i - 1]) / (logd[i] - logd[i - 1])
    slope = (logd[i] - logd[i - 1]) / (grid[i] - grid[i - 1])
    rel = max(se[k, j] / est[k, j] for k in (i - 1, i) if est[k, j] > 0)  # relative error of delta
    return float(grid[i - 1] + t * (grid[i] - grid[i - 1])), float(rel / abs(slope))


class PlainGaussianRDP:
    """The unamplified Gaussian mechanism with squared sensitivity ``sens2``: ``rho(alpha) = alpha sens2 /
    (2 sigma^2)`` at the integer orders ``2..max_order``, converted with Theorem 3.1. No balls-in-bins
    mechanism needs more noise than this one with ``sens2 = max_i ||m_i||^2`` (quasi-convexity)."""

    def __init__(self, sig: float, sens2: float, max_order: int):
        self.orders = np.arange(2, max_order + 1)
        self.rho = self.orders * sens2 / (2 * sig * sig)

    def get_delta(self, eps: float) -> float:
        return rdp_to_delta(self.orders, self.rho, eps)[0]


class RemoveOnlyRDP:
    """The remove direction alone: ``rho_remove`` of the DP (Lemma 3.3) with one band at ``orders``, converted
    with Theorem 3.1. Exact for a diagonal Gram matrix (DP-SGD, any number of epochs), where it is a lower limit
    for every Rényi accountant of the pair (``rho >= rho_remove``); for a banded ``G`` the one-band truncation
    adds its penalty ``alpha tau / (2 sigma^2)`` and the limit no longer holds. Not an add/remove guarantee."""

    def __init__(self, strategy: Strategy, sig: float, orders: Sequence[int]):
        self.orders = np.asarray(list(orders))
        self.rho = rho_remove(strategy.gram, sig, self.orders, 1)[0]

    def get_delta(self, eps: float) -> float:
        return rdp_to_delta(self.orders, self.rho, eps)[0]


class PriorWeightsPLD:
    """A reference, not a bound: the per-step pair of conditional composition (Corollary 4.4) with every
    non-zero step mean of step ``step`` (0-based column of ``strategy.means``) at its prior weight ``1/b``, the
    rest of the mass on the zero mean, composed over the ``N`` steps with the book's PLD in both directions;
    ``delta(eps) = max(remove, add) + delta_e``."""

    def __init__(self, strategy: Strategy, sig: float, step: int, delta_e: float, discretization: float):
        nz = np.unique(strategy.means[:, step])
        w = np.where(nz > 0, 1 / strategy.batches, 0.0)
        w[0] = 1 - w.sum()
        mech = GaussianMixtureMechanism(sig, nz, w)
        self.delta_e = delta_e
        self.accs = [
            PLDAccountant(direction=d, discretization=discretization).compose(mech, strategy.n)
            for d in ("remove", "add")
        ]

    def get_delta(self, eps: float) -> float:
        return max(float(a.get_delta(eps)) for a in self.accs) + self.delta_e


class PoissonSubsampledPLD:
    """Poisson subsampling at rate ``q`` of the Gaussian mechanism (noise ``sig``) over ``steps`` steps, by
    dp_accounting's PLD (grid 1e-3): a different sampling scheme, for orientation only."""

    def __init__(self, sig: float, q: float, steps: int):
        self.sig, self.q, self.steps = sig, q, steps

    def get_delta(self, eps: float) -> float:
        pldlib = require("dp_accounting.pld.privacy_loss_distribution", "the Poisson reference curve")
        pld = pldlib.from_gaussian_mechanism(self.sig, sampling_prob=self.q, value_discretization_interval=1e-3)
        return pld.self_compose(self.steps).get_delta_for_epsilon(eps)
