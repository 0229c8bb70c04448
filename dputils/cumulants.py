r"""Cumulant generating functions of privacy-loss random variables.

For a privacy-loss pair :math:`(P, Q)` with loss :math:`L = \log p(X)/q(X)`, :math:`X \sim P`, the
cumulant generating function (CGF) is

.. math:: K(t) = \log \mathbb{E}_P\big[e^{tL}\big] = \log \mathbb{E}_Q\big[(p/q)^{1+t}\big],

so :math:`K(0) = K(-1) = 0` and :math:`K(t) = t\,D_{1+t}(P\|Q)` (Renyi divergence of order
:math:`1+t`). Its derivatives at :math:`t` are the cumulants of the **exponentially tilted** loss
:math:`L_t` with law :math:`P(L_t \in A) = \mathbb{E}[e^{tL - K(t)} 1\{L \in A\}]` (Alghamdi et al.,
eq. 29-31 {cite}`alghamdi_spa`): :math:`K'(t) = \mathbb{E} L_t`, :math:`K''(t) = \mathrm{Var}\,L_t`,
:math:`K'''(t)` is the third central moment, and so on.

How they are computed (no finite differences anywhere):

* **Gaussian** (``SubsampledGaussianPair`` with ``q == 1``): :math:`L \sim N(\eta, 2\eta)`,
  :math:`\eta = \Delta^2/(2\sigma^2)`, so :math:`K(t) = \eta t(1+t)` and every moment in closed form.
* Every other pair is represented by **weighted points**: atoms of the loss with their masses in closed
  form, plus a density in an integration variable :math:`x` integrated by composite 20-point
  Gauss-Legendre panels. All sums are log-sum-exp, and :math:`K` near 0 is formed as
  :math:`\log(1 + \sum_i \pi_i\,\mathrm{expm1}(tL_i))` to keep its relative accuracy.

  - **Poisson-subsampled Gaussian** (``q < 1``): with :math:`r(x) = 1 - q + q e^{(2x\Delta-\Delta^2)/(2\sigma^2)}`
    the loss is :math:`\log r` ("remove", :math:`X` from the mixture) or :math:`-\log r` ("add",
    :math:`X \sim N(0,\sigma^2)`). The range in :math:`x` is chosen from the log-weights so that it covers
    both the untilted and the tilted mass down to :math:`e^{-745}` of the peak; panels are
    :math:`\min(\sigma, \sigma^2/\Delta)` wide (the integrand is analytic in a strip of half-width
    :math:`\pi\sigma^2/\Delta`, the zeros of :math:`r`). The exact binomial sum at integer orders
    (:func:`subsampled_gaussian_cgf_binomial`) is the cross-check.
  - **Laplace** (``LaplacePair``): with :math:`s = \Delta/b`, :math:`L` has atoms :math:`+s` (mass 1/2),
    :math:`-s` (mass :math:`e^{-s}/2`) and density :math:`\tfrac14 e^{(l-s)/2}` on :math:`(-s, s)`, so
    :math:`M(t) = [(1+t)e^{ts} + t e^{-(1+t)s}]/(1+2t)`.
  - **Poisson-subsampled Laplace** (``SubsampledLaplacePair`` of :mod:`dputils.mechanisms`, the
    Edgeworth paper's Sec. 4.4): loss :math:`\pm\log(1 - q + q e^{u})` with :math:`u = (|x| - |x - \Delta|)/b`,
    two atoms (:math:`x \le 0` and :math:`x \ge \Delta`) and a smooth density on :math:`(0, \Delta)`.

Moments are computed as central moments of the tilted weights and converted to cumulants, which avoids
the cancellation of the MGF-derivative route. The **absolute** central moments :math:`E|L_t - K'(t)|` and
:math:`E|L_t - K'(t)|^3` (the Berry-Esseen quantity of the SPA, eq. 73 of {cite}`alghamdi_spa`, and the
:math:`K_3, \tilde K_3` of Lemma 4.3 of the Edgeworth accountant {cite}`wang_edgeworth`) have a kink at the
mean; the panel containing the point where the (monotone) loss crosses its mean is split there, so they are
as accurate as the rest. The moments of L under Q are those of the tilt :math:`t = -1`
(:math:`dQ/dP = e^{-L}`). Results are cached per pair parameters and tilt, so the cost of a query does not
depend on how many times the pair is composed.

Public API: :func:`cgf`, :func:`cgf_derivatives`, :func:`cumulants`, :func:`composed_cgf`,
:func:`composed_cgf_derivatives`, :func:`tilted_moments`, :func:`loss_moments`,
:func:`tilted_abs_third_moment`, :func:`tilted_points`, :func:`loss_sup`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import comb, logsumexp

from .errors import DPValueError, NumericalError, check_finite, check_positive_int
from .mechanisms import LaplacePair, SubsampledGaussianPair, SubsampledLaplacePair

__all__ = [
    "standardized_cumulants",
    "cgf",
    "cgf_derivatives",
    "cumulants",
    "composed_cgf",
    "composed_cgf_derivatives",
    "tilted_abs_third_moment",
    "tilted_moments",
    "loss_moments",
    "LossMoments",
    "Points",
    "tilted_points",
    "loss_sup",
    "pair_key",
    "clear_cache",
    "subsampled_gaussian_cgf_binomial",
]

#: Largest order of derivative supported by :func:`cgf_derivatives`.
MAX_ORDER = 8
_LOG_TINY = -745.0  # log of the smallest positive double (relative cut-off of the grids)


# ------------------------------------------------------------------------------------------------
# pair identification
# ------------------------------------------------------------------------------------------------
def pair_key(pair: Any) -> tuple:
    """A hashable key of a privacy-loss pair from its parameters (used for caching).

    Supported: ``SubsampledGaussianPair(sigma, q, sensitivity, direction)``,
    ``LaplacePair(scale, sensitivity, direction)`` and ``SubsampledLaplacePair(scale, q, sensitivity,
    direction)`` from :mod:`dputils.mechanisms` (with ``q == 1`` the last is the Laplace pair).
    """

    if isinstance(pair, SubsampledGaussianPair):
        return ("gm", float(pair.sigma), float(pair.q), float(pair.sensitivity), str(pair.direction))
    if isinstance(pair, LaplacePair):
        # the Laplace PLRV is the same in both directions
        return ("laplace", float(pair.scale), float(pair.sensitivity))
    if isinstance(pair, SubsampledLaplacePair):
        if float(pair.q) == 1.0:
            return ("laplace", float(pair.scale), float(pair.sensitivity))
        return ("slap", float(pair.scale), float(pair.q), float(pair.sensitivity), str(pair.direction))
    raise DPValueError(
        "pair must be a SubsampledGaussianPair, LaplacePair or SubsampledLaplacePair from dputils.mechanisms, "
        f"got {type(pair).__name__}"
    )


def loss_sup(pair: Any) -> float:
    """The essential supremum of the privacy loss L under P (``inf`` if unbounded)."""
    key = pair_key(pair)
    if key[0] == "gm":
        _, sigma, q, d, direction = key
        if q == 1.0 or direction == "remove":
            return math.inf
        return -math.log1p(-q)
    if key[0] == "slap":
        _, b, q, d, direction = key
        s = d / b
        return float(_log_r(s, q)) if direction == "remove" else -float(_log_r(-s, q))
    _, b, d = key
    return d / b


def _check_t(t: Any) -> float:
    x = check_finite("t", t)
    if abs(x) > 1e6:
        raise DPValueError(f"t must satisfy |t| <= 1e6 (the range where the CGF is evaluated), got {x!r}")
    return x


# ------------------------------------------------------------------------------------------------
# the law of L under P: atoms plus a density on Gauss-Legendre panels
# ------------------------------------------------------------------------------------------------
_GL_U, _GL_W = np.polynomial.legendre.leggauss(20)
_MAX_NODES = 2_000_000


@dataclass(frozen=True)
class Points:
    """Law of L under P as weighted points: ``values`` L_i and normalised ``log_weights`` (sum exp = 1).

    The first ``n_atoms`` points are atoms of the law (exact masses), the rest quadrature nodes of its density.
    """

    values: np.ndarray
    log_weights: np.ndarray
    n_atoms: int = 0


def _lse(a: np.ndarray) -> float:
    """log(sum(exp(a))) of a 1-D array (scipy's logsumexp without its per-call overhead)."""
    m = float(np.max(a))
    return m + math.log(float(np.sum(np.exp(a - m))))


def _gl_nodes(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and log-weights of the 20-point Gauss-Legendre rule on each panel [edges[i], edges[i+1]]."""
    a, b = edges[:-1], edges[1:]
    half = 0.5 * (b - a)
    x = (0.5 * (a + b))[:, None] + half[:, None] * _GL_U[None, :]
    return x.ravel(), np.log(half[:, None] * _GL_W[None, :]).ravel()


def _panel_edges(breaks: Sequence[float], width: float) -> np.ndarray:
    """Panel edges: the sorted breakpoints, each gap cut into equal panels no wider than ``width``."""
    e = np.unique(np.asarray(breaks, dtype=float))
    n = np.maximum(1, np.ceil(np.diff(e) / width)).astype(int)
    if int(n.sum()) * _GL_U.size > _MAX_NODES:
        raise NumericalError(
            f"quadrature grid too large ({int(n.sum()) * _GL_U.size} nodes); the tilt or frequency is out of range"
        )
    return np.concatenate([np.linspace(a, b, k + 1)[:-1] for a, b, k in zip(e[:-1], e[1:], n)] + [e[-1:]])


class _Law:
    r"""The law of L under P as a quadrature rule: atoms plus a density in a variable x.

    ``fn(x)`` returns ``(L(x), log density(x))`` (the density may be unnormalised when there are no atoms),
    ``edges`` are the panel edges (kinks of the density and the range), each panel carrying a 20-point
    Gauss-Legendre rule, and ``inv(l)`` is the x where the (monotone) loss equals ``l`` (None if none).
    :meth:`split_panel` gives the rule of the panel containing ``inv(l)`` cut in two there, so that integrands
    with a kink at :math:`L = l` (the absolute moments :math:`|L - l|^k`) are integrated exactly up to rounding.
    """

    def __init__(self, edges, fn, inv, atom_values=(), atom_log_mass=()):
        self.edges = np.asarray(edges, dtype=float)
        self.fn, self.inv = fn, inv
        self.atom_values = np.asarray(atom_values, dtype=float)
        self.atom_log_mass = np.asarray(atom_log_mass, dtype=float)
        x, lw = _gl_nodes(self.edges)
        L, ld = fn(x)
        self._L = np.asarray(L, dtype=float).reshape(-1, _GL_U.size)
        self._lw = (lw + ld).reshape(-1, _GL_U.size)

    def points(self) -> Points:
        values = np.concatenate([self.atom_values, self._L.ravel()])
        logw = np.concatenate([self.atom_log_mass, self._lw.ravel()])
        self.log_norm = _lse(logw)  # the quadrature of the total mass (1 up to rounding with atoms)
        return Points(values, logw - self.log_norm, self.atom_values.size)

    def split_panel(self, loss: float) -> tuple[int, np.ndarray, np.ndarray] | None:
        """(index of the panel containing inv(loss), L and log-weights of its rule split in two there), or None."""
        xs = self.inv(loss)
        if xs is None:
            return None
        i = int(np.searchsorted(self.edges, xs)) - 1
        if not (0 <= i < self.edges.size - 1 and self.edges[i] < xs < self.edges[i + 1]):
            return None
        x2, lw2 = _gl_nodes(np.array([self.edges[i], xs, self.edges[i + 1]]))
        L2, ld2 = self.fn(x2)
        return i, np.asarray(L2, dtype=float), lw2 + ld2


def _log_r(u, q: float):
    """log(1 - q + q e^u) with full relative accuracy (the loss of a subsampled pair, u the base log-ratio)."""
    u = np.asarray(u, dtype=float)
    with np.errstate(over="ignore"):
        small = np.log1p(q * np.expm1(np.minimum(u, 30.0)))
    return np.where(u < 30.0, small, np.logaddexp(math.log1p(-q), math.log(q) + u))


def _log_r_inv(ell: float, q: float) -> float | None:
    """The u with log(1 - q + q e^u) = ell (None when ell <= log(1 - q), outside the range)."""
    if ell > 30.0:
        return ell - math.log(q) + math.log1p((q - 1.0) * math.exp(-ell))
    arg = math.expm1(ell) + q
    return math.log(arg / q) if arg > 0 else None


def _gm_loss(x: np.ndarray, sigma: float, q: float, d: float) -> np.ndarray:
    """log r(x), r = 1 - q + q exp((2 x d - d^2)/(2 sigma^2)), with full relative accuracy."""
    return _log_r((2.0 * x * d - d * d) / (2.0 * sigma * sigma), q)


def _gm_law(sigma: float, q: float, d: float, direction: str, t: float, freq: float) -> _Law:
    """Subsampled Gaussian: the output x on panels covering the untilted and the t-tilted mass."""
    sign = 1.0 if direction == "remove" else -1.0
    # log-weights under P of a point x: log phi(x) + (remove: log r(x); add: 0)
    a_eff = (t + 1.0) if direction == "remove" else -t  # tilted weight ~ phi(x) r(x)^a_eff
    lo = min(0.0, a_eff * d) - 60.0 * sigma - 10.0 * d
    hi = max(0.0, a_eff * d) + d + 60.0 * sigma + 10.0 * d
    xc = np.linspace(lo, hi, 801)
    lphi_c = -0.5 * (xc / sigma) ** 2
    ell_c = _gm_loss(xc, sigma, q, d)
    keep = np.zeros(xc.shape, dtype=bool)
    for a in ((1.0 if direction == "remove" else 0.0), a_eff):
        lw = lphi_c + a * ell_c
        keep |= lw > lw.max() + _LOG_TINY
    idx = np.nonzero(keep)[0]
    step_c = xc[1] - xc[0]
    # panels as wide as the smaller of the two scales (sigma, and sigma^2/d: the loss's complex zeros are at
    # distance pi sigma^2/d, so 20 nodes per panel reach ~1e-16; checked against mpmath in the tests);
    # with freq > 0 at most 12 radians of phase y L(x) per panel (|L'| <= d/sigma^2), which the 20-point
    # rule integrates to ~1e-20
    width = min(sigma, sigma * sigma / d)
    if freq > 0:
        width = min(width, 12.0 * sigma * sigma / (d * freq))
    edges = _panel_edges([xc[idx[0]] - 3 * step_c, xc[idx[-1]] + 3 * step_c], width)

    def fn(x):
        ell = _gm_loss(x, sigma, q, d)
        return sign * ell, -0.5 * (x / sigma) ** 2 + (ell if direction == "remove" else 0.0)

    def inv(loss: float):
        u = _log_r_inv(sign * loss, q)
        return None if u is None else sigma * sigma * u / d + 0.5 * d

    return _Law(edges, fn, inv)


def _laplace_law(b: float, d: float, t: float, freq: float) -> _Law:
    """Laplace: atoms at +s (mass 1/2) and -s (mass e^{-s}/2), density (1/4) e^{(l-s)/2} on (-s, s), s = d/b."""
    s = d / b
    width = 2.0 * s
    if t != -0.5:
        width = min(width, 8.0 / abs(t + 0.5))  # at most e^8 of variation of the tilted density per panel
    if freq > 0:
        width = min(width, 12.0 / freq)  # at most 12 radians of phase y L per panel
    edges = _panel_edges([-s, s], width)
    return _Law(
        edges,
        lambda l: (l, math.log(0.25) + 0.5 * (l - s)),
        lambda l: l if -s < l < s else None,
        atom_values=[s, -s],
        atom_log_mass=[-math.log(2.0), -s - math.log(2.0)],
    )


def _slap_law(b: float, q: float, d: float, direction: str, t: float, freq: float) -> _Law:
    r"""Poisson-subsampled Laplace (q < 1): loss :math:`\pm\log(1 - q + q e^{u})`, :math:`u = (|x| - |x-d|)/b`.

    :math:`u = -s` for :math:`x \le 0` and :math:`u = s` for :math:`x \ge d` (two atoms of the loss, masses in
    closed form); on :math:`(0, d)`, :math:`u = (2x - d)/b` and the density is a sum of exponentials.
    """
    s = d / b
    sign = 1.0 if direction == "remove" else -1.0
    lg2b = math.log(2.0 * b)
    if direction == "remove":  # P = (1-q) Lap(0, b) + q Lap(d, b)
        m_lo = math.log((1.0 - q) / 2.0 + q * math.exp(-s) / 2.0)
        m_hi = math.log((1.0 - q) * math.exp(-s) / 2.0 + q / 2.0)

        def logp(x):
            return np.logaddexp(math.log1p(-q) - x / b, math.log(q) - (d - x) / b) - lg2b
    else:  # P = Lap(0, b)
        m_lo, m_hi = -math.log(2.0), -s - math.log(2.0)

        def logp(x):
            return -x / b - lg2b

    width = min(d, 0.5 * b)  # the loss is analytic in the strip |Im x| < pi b / 2
    if t != 0:
        width = min(width, 2.0 * b / abs(t))  # |L'(x)| <= 2/b
    if freq > 0:
        width = min(width, 6.0 * b / freq)  # at most 12 radians of phase y L per panel
    edges = _panel_edges([0.0, d], width)

    def fn(x):
        return sign * _log_r((2.0 * x - d) / b, q), logp(x)

    def inv(loss: float):
        u = _log_r_inv(sign * loss, q)
        if u is None:
            return None
        x = 0.5 * (u * b + d)
        return x if 0.0 < x < d else None

    lo_val, hi_val = (sign * float(_log_r(v, q)) for v in (-s, s))
    return _Law(edges, fn, inv, atom_values=[lo_val, hi_val], atom_log_mass=[m_lo, m_hi])


def _law(key: tuple, t: float, freq: float = 0.0) -> _Law:
    if key[0] == "gm":
        _, sigma, q, d, direction = key
        if q == 1.0:
            raise DPValueError("tilted_points: the Gaussian pair (q = 1) is handled in closed form")
        return _gm_law(sigma, q, d, direction, t, freq)
    if key[0] == "slap":
        _, b, q, d, direction = key
        return _slap_law(b, q, d, direction, t, freq)
    _, b, d = key
    return _laplace_law(b, d, t, freq)


def tilted_points(pair: Any, t: float, freq: float = 0.0) -> Points:
    """The law of L under P as weighted points, accurate both untilted and tilted by ``t``.

    ``freq`` > 0 also resolves the oscillation :math:`e^{iyL}` for :math:`|y| \\le` ``freq`` (used by the
    truth evaluator). Not available for the plain Gaussian (closed form everywhere).
    """
    return _law(pair_key(pair), float(t), float(freq)).points()


# ------------------------------------------------------------------------------------------------
# core evaluation (cached)
# ------------------------------------------------------------------------------------------------
def _moments_to_cumulants(mean: float, central: Sequence[float], order: int) -> list[float]:
    """Cumulants kappa_1..kappa_order from the mean and central moments mu_2..mu_order.

    Uses the recursion kappa_n = mu_n - sum_{m=2}^{n-2} C(n-1, m-1) kappa_m mu_{n-m} on central
    moments (mu_1 = 0, so terms with mu_1 vanish).
    """
    mu = {0: 1.0, 1: 0.0}
    for k in range(2, order + 1):
        mu[k] = central[k - 2]
    kap = {1: 0.0}
    for k in range(2, order + 1):
        s = mu[k]
        for m in range(2, k - 1):
            s -= comb(k - 1, m - 1, exact=True) * kap[m] * mu[k - m]
        kap[k] = s
    kap[1] = mean
    return [kap[k] for k in range(1, order + 1)]


def _tilt(pts: Points, t: float) -> tuple[float, np.ndarray, float]:
    """(K(t), normalised tilted weights, log of their normaliser) of weighted points."""
    L, lw = pts.values, pts.log_weights
    z = lw + t * L
    lse = _lse(z)
    K = float(lse)
    if abs(K) < 0.5:
        # K = log1p(sum_i pi_i expm1(t L_i)), exact in relative terms for small K
        tl = t * L
        with np.errstate(over="ignore"):
            terms = np.where(tl > 700.0, np.exp(np.minimum(z, 700.0)), np.exp(lw) * np.expm1(np.minimum(tl, 700.0)))
        K = float(np.log1p(np.sum(terms)))
    pi = np.exp(z - lse)
    s = pi.sum()
    return K, pi / s, float(lse + math.log(s))


def _centre(pi: np.ndarray, L: np.ndarray) -> tuple[float, np.ndarray]:
    """(mean, L - mean) under the weights ``pi``, the mean refined once (removes the first pass's rounding)."""
    mean = float(np.dot(pi, L))
    c = L - mean
    corr = float(np.dot(pi, c))
    return mean + corr, c - corr


def _gaussian_eval(sigma: float, d: float, t: float) -> tuple:
    """L_t ~ N(eta (1 + 2t), 2 eta), eta = d^2/(2 sigma^2): every quantity in closed form."""
    eta = d * d / (2.0 * sigma * sigma)
    v = 2.0 * eta
    derivs = (eta * t * (1.0 + t), eta * (1.0 + 2.0 * t), v) + (0.0,) * (MAX_ORDER - 2)
    # central moments of N(0, v): (k-1)!! v^{k/2} for even k, 0 for odd k
    central = tuple(
        float(math.prod(range(k - 1, 0, -2)) * v ** (k // 2)) if k % 2 == 0 else 0.0 for k in range(2, MAX_ORDER + 1)
    )
    abs1 = math.sqrt(2.0 * v / math.pi)
    abs3 = 2.0 * math.sqrt(2.0 / math.pi) * v**1.5
    return derivs, central, abs1, abs3


@lru_cache(maxsize=65536)
def _eval_cached(key: tuple, t: float) -> tuple:
    """(K and its derivatives 0..MAX_ORDER, central moments 2..MAX_ORDER, E|L_t - K'|, E|L_t - K'|^3)."""
    if key[0] == "gm" and key[2] == 1.0:
        return _gaussian_eval(key[1], key[3], t)
    law = _law(key, t)
    pts = law.points()
    K, pi, lse = _tilt(pts, t)
    mean, c = _centre(pi, pts.values)
    central, ck = [], c * c
    for _ in range(2, MAX_ORDER + 1):
        central.append(float(np.dot(pi, ck)))
        ck = ck * c
    derivs = [K] + _moments_to_cumulants(mean, central, MAX_ORDER)
    # absolute moments: |L - mean|^k has a kink at L = mean; the rule of the panel where the loss crosses
    # its mean is replaced by the same rule on the two halves (exact quadrature, only 40 new nodes)
    a = np.abs(c)
    sp = law.split_panel(mean)
    if sp is not None:
        i, L2, lw2 = sp
        na = law.atom_values.size
        drop = slice(na + i * _GL_U.size, na + (i + 1) * _GL_U.size)
        pi2 = np.exp(lw2 - law.log_norm + t * L2 - lse)
        a2 = np.abs(L2 - mean)
        pi_k = pi.copy()
        pi_k[drop] = 0.0
        abs1 = float(np.dot(pi_k, a) + np.dot(pi2, a2))
        abs3 = float(np.dot(pi_k, a**3) + np.dot(pi2, a2**3))
    else:
        abs1, abs3 = float(np.dot(pi, a)), float(np.dot(pi, a**3))
    out = (tuple(float(v) for v in derivs), tuple(central), abs1, abs3)
    if not (
        np.all(np.isfinite(out[0])) and np.all(np.isfinite(out[1])) and math.isfinite(abs1) and math.isfinite(abs3)
    ):
        raise NumericalError(f"CGF derivatives are not finite at t={t!r}")
    return out


def clear_cache() -> None:
    """Forget every cached evaluation (for cold-start timings)."""
    _eval_cached.cache_clear()


def evaluation_count() -> int:
    """How many one-step CGF evaluations were computed (not served from the cache) since :func:`clear_cache`.

    The unit of cost the chapters report: each is one tilted quadrature of a single mechanism's loss.
    """
    return int(_eval_cached.cache_info().misses)


def _eval(pair: Any, t: float, order: int) -> tuple[np.ndarray, float]:
    derivs, _, _, abs3 = _eval_cached(pair_key(pair), float(t))
    return np.array(derivs[: order + 1]), abs3


@dataclass(frozen=True)
class LossMoments:
    r"""Moments of the tilted loss :math:`L_t` of one pair (:math:`t = 0`: L under P; :math:`t = -1`: L under Q).

    ``mean`` = :math:`K'(t)`; ``central`` = :math:`(\mu_2, \dots, \mu_8)`, :math:`\mu_k = E(L_t - K'(t))^k`;
    ``cumulants`` = :math:`(\kappa_1, \dots, \kappa_8) = (K'(t), \dots, K^{(8)}(t))`; ``abs1``, ``abs3`` =
    :math:`E|L_t - K'(t)|`, :math:`E|L_t - K'(t)|^3` (Lemma 4.3 of {cite}`wang_edgeworth`, eq. 73 of
    {cite}`alghamdi_spa`).
    """

    t: float
    mean: float
    central: tuple[float, ...]
    cumulants: tuple[float, ...]
    abs1: float
    abs3: float

    @property
    def var(self) -> float:
        return self.central[0]


# ------------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------------
def cgf(pair: Any, t: Any):
    """K(t) = log E_P[exp(t L)] of the privacy loss of ``pair``, vectorized over real ``t``.

    Finite for every real t for the supported pairs (the loss of the subsampled Gaussian is bounded
    on one side and Gaussian-tailed on the other; the Laplace loss is bounded). ``t`` must be finite
    with |t| <= 1e6, otherwise :class:`~dputils.errors.DPValueError`.
    """
    pair_key(pair)
    arr = np.asarray(t, dtype=float)
    flat = [float(_eval(pair, _check_t(v), 0)[0][0]) for v in arr.ravel()]
    out = np.array(flat, dtype=float).reshape(arr.shape)
    return float(out) if arr.ndim == 0 else out


def cgf_derivatives(pair: Any, t: float, order: int = 4) -> np.ndarray:
    """``[K(t), K'(t), ..., K^(order)(t)]`` at one real ``t`` (``order`` from 0 to 8).

    The derivatives are the cumulants of the tilted loss L_t (eq. 31 of {cite}`alghamdi_spa`),
    computed from tilted central moments; accuracy about 1e-10 relative where the value is not tiny.
    """
    t = _check_t(t)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 0 <= order <= MAX_ORDER:
        raise DPValueError(f"order must be an integer in [0, {MAX_ORDER}], got {order!r}")
    return _eval(pair, t, int(order))[0]


def cumulants(pair: Any, order: int = 6) -> np.ndarray:
    """``[kappa_1, ..., kappa_order]`` of L under P (the derivatives of K at t = 0)."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= MAX_ORDER:
        raise DPValueError(f"order must be an integer in [1, {MAX_ORDER}], got {order!r}")
    return cgf_derivatives(pair, 0.0, int(order))[1:]


def tilted_moments(pair: Any, t: float) -> LossMoments:
    r"""Mean, central moments, cumulants and absolute central moments (orders 1, 3) of the tilted loss :math:`L_t`.

    The law of :math:`L_t` is :math:`P(L_t \in A) = E_P[e^{tL - K(t)} 1\{L \in A\}]`; ``t = 0`` gives the loss
    under P and ``t = -1`` the loss under Q (:math:`dQ/dP = e^{-L}`). The absolute moments are integrated with
    a quadrature panel split at the point where :math:`L = K'(t)` (the kink of :math:`|L - K'(t)|^k`), so they
    are as accurate as the cumulants (about 1e-12 relative); closed forms for the plain Gaussian.
    """
    t = _check_t(t)
    derivs, central, abs1, abs3 = _eval_cached(pair_key(pair), t)
    return LossMoments(t=t, mean=derivs[1], central=central, cumulants=derivs[1:], abs1=abs1, abs3=abs3)


def loss_moments(pair: Any, under: str = "p") -> LossMoments:
    """:func:`tilted_moments` of the loss L = log p/q of one step under P (``under="p"``, t = 0) or Q (t = -1)."""
    if under not in ("p", "q"):
        raise DPValueError(f"under must be 'p' or 'q', got {under!r}")
    return tilted_moments(pair, 0.0 if under == "p" else -1.0)


def tilted_abs_third_moment(pair: Any, t: float) -> float:
    """E|L_t - K'(t)|^3: the absolute third central moment of the tilted loss (eq. 73 of the paper)."""
    return tilted_moments(pair, t).abs3


def _ledger_items(ledger: Iterable) -> list[tuple[Any, int]]:
    items = []
    for entry in ledger:
        try:
            pair, count = entry
        except (TypeError, ValueError):
            raise DPValueError("ledger must be a sequence of (pair, count) tuples") from None
        items.append((pair, check_positive_int("count", count)))
    if not items:
        raise DPValueError("ledger must contain at least one (pair, count) entry")
    return items


def composed_cgf(ledger: Iterable, t: Any):
    """CGF of the sum of independent losses: sum over ``(pair, count)`` of ``count * K_pair(t)``."""
    items = _ledger_items(ledger)
    total = None
    for pair, count in items:
        v = count * np.asarray(cgf(pair, t), dtype=float)
        total = v if total is None else total + v
    return float(total) if np.ndim(total) == 0 else total


def composed_cgf_derivatives(ledger: Iterable, t: float, order: int = 4) -> tuple[np.ndarray, float]:
    """``([K, K', ..., K^(order)], P_t)`` of the composition: counts times per-pair values.

    ``P_t`` is the sum of the tilted absolute third central moments of the summands (the quantity of
    eq. 73, used by the Berry-Esseen bound of Theorem 5).
    """
    items = _ledger_items(ledger)
    t = _check_t(t)
    total = np.zeros(order + 1)
    p3 = 0.0
    for pair, count in items:
        vals, a3 = _eval(pair, t, order)
        total = total + count * vals
        p3 += count * a3
    return total, p3


def subsampled_gaussian_cgf_binomial(sigma: float, q: float, alpha: int, sensitivity: float = 1.0) -> float:
    r"""Exact CGF value at an integer order for the subsampled Gaussian (independent cross-check).

    .. math:: \log \sum_{i=0}^{\alpha} \binom{\alpha}{i} q^i (1-q)^{\alpha-i} e^{(i^2 - i)\Delta^2/(2\sigma^2)}
              = \log E_{N(0,\sigma^2)}[r(X)^\alpha]

    for integer :math:`\alpha \ge 1` (binomial expansion of :math:`r^\alpha`, Mironov et al. 2019). This is
    :math:`K(\alpha - 1)` for the "remove" pair and :math:`K(-\alpha)` for the "add" pair.
    """
    alpha = check_positive_int("alpha", alpha)
    if not 0 < q < 1:
        raise DPValueError(f"q must be in (0, 1) for the binomial CGF, got {q!r}")
    eta = sensitivity * sensitivity / (2.0 * sigma * sigma)
    i = np.arange(alpha + 1, dtype=float)
    logc = np.array(
        [math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1) for k in range(alpha + 1)]
    )
    terms = logc + i * math.log(q) + (alpha - i) * math.log1p(-q) + (i * i - i) * eta
    return float(logsumexp(terms))


def standardized_cumulants(pair: Any, under: str = "p") -> list[float]:
    r"""``[κ1, κ2, λ3, λ4]`` of the one-step loss under P (or Q), with :math:`\lambda_r = \kappa_r/\kappa_2^{r/2}`.

    The mean, variance and the standardized third and fourth cumulants (skewness and excess kurtosis) of
    :func:`loss_moments`; Wang et al.'s Edgeworth expansion uses them (Def. 3.1 and Sec. 4.1, where the
    loss under our Q is their PLLR X and under our P their Y).
    """
    k = loss_moments(pair, under).cumulants
    return [float(k[0]), float(k[1]), float(k[2] / k[1] ** 1.5), float(k[3] / k[1] ** 2)]
