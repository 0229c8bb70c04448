r"""The Edgeworth accountant: approximate (AEA) and certified (EEAI) composition of privacy losses.

Wang, Gao, Zhang, Shen and Su {cite}`wang_edgeworth` write the privacy profile of an m-fold
composition through the two distribution functions of the summed privacy loss (their Prop. 3.2,
Eq. (3.1)). In this package's convention (``dputils.mechanisms``) a pair :math:`(P, Q)` has privacy loss
:math:`L = \log p/q`, and for the composition :math:`P^m` vs :math:`Q^m`

.. math::  \delta(\varepsilon) = \Pr_{P}\Big[\sum_i L_i > \varepsilon\Big]
           - e^{\varepsilon}\,\Pr_{Q}\Big[\sum_i L_i > \varepsilon\Big].

(The paper's :math:`Y` is our loss under :math:`P`, its :math:`X` our loss under :math:`Q`; its pair (1)
of the subsampled Gaussian is our ``"remove"`` direction and pair (2) our ``"add"`` direction.)

Both tails are those of sums of independent variables. Their cumulants add, so the cost of knowing
the first few cumulants of the sum does not grow with the number m of compositions; the Edgeworth
expansion turns those cumulants into tail probabilities:

* **AEA of order k** (Def. 4.1): replace each tail by the survival function of the k-th order Edgeworth
  expansion of the standardized sum :math:`S = (\sum L_i - M)/B`,

  .. math:: \Pr[S > z] \approx \bar\Phi(z) + \varphi(z)\Big[\tfrac{\ell_3}{6}He_2(z)
            + \tfrac{\ell_4}{24}He_3(z) + \tfrac{\ell_3^2}{72}He_5(z)
            + \tfrac{\ell_5}{120}He_4(z) + \tfrac{\ell_3\ell_4}{144}He_6(z)
            + \tfrac{\ell_3^3}{1296}He_8(z)\Big],

  where :math:`\ell_r = \sum_i\kappa_{r,i}/B^r` is the r-th standardized cumulant of the sum (equal to the
  paper's :math:`\lambda_{r,m}\,m^{1-r/2}`); order 1 keeps the first term, order 2 the first three, order 3
  all six (order 0 is the CLT). This is an **approximation**: it has no finite-m guarantee and the
  resulting :math:`\delta(\varepsilon)` may be slightly non-monotone (we take the largest root).
* **EEAI** (Def. 4.2, Lemma 4.3): with a computable uniform bound
  :math:`|F_m - G_{m,1}| \le \Delta_m` on the error of the first-order expansion, the interval

  .. math:: \delta^{\pm}(\varepsilon) = [\bar G_{P} \pm \Delta_P]_{[0,1]} - e^\varepsilon[\bar G_{Q} \mp \Delta_Q]_{[0,1]}

  certainly contains :math:`\delta(\varepsilon)`. :math:`\Delta` is the explicit non-i.i.d. bound of
  Derumigny, Girard and Guyonvarch (Theorem A.2 of their arXiv version, no continuity, with skewness,
  free parameter 0.1): :math:`0.1995\tilde K_3/\sqrt m + (0.031\tilde K_3^2 + 0.195 K_4 + 0.054|\lambda_3|\tilde K_3
  + 0.038\lambda_3^2)/m + r_{1,m}` (the paper's Lemma 4.3 prints the rounded constants; we evaluate them and
  the remainder :math:`r_{1,m}` exactly, :func:`dgg_bound_inid_skew`). Because the true profile is
  non-increasing in epsilon, we further tighten to the monotone envelopes
  :math:`\min_{\varepsilon'\le\varepsilon}\delta^+(\varepsilon')` and :math:`\max_{\varepsilon'\ge\varepsilon}\delta^-(\varepsilon')`,
  which stay valid. :math:`\delta^+\to\Delta_P` as :math:`\varepsilon\to\infty`, so the upper bound on epsilon is
  infinite (vacuous) whenever :math:`\Delta_P \ge \delta`; this is reported as ``math.inf``.

For mechanisms with two neighbouring directions the profile is the larger of the two (the paper's
Lemma 3.3), and so is each bound.

The moments of the one-step privacy loss (cumulants up to order 6, the fourth central moment and the
absolute central moments :math:`E|L - \kappa_1|`, :math:`E|L - \kappa_1|^3` of Lemma 4.3, under P and under Q)
come from :func:`dputils.cumulants.loss_moments`, the CGF machinery shared with the saddle-point accountant
(under Q is the tilt :math:`t = -1`). They are computed once per (mechanism, direction) and cached, in double
precision with relative accuracy ~1e-12 (closed form for the plain Gaussian); the certified bracket is
certified up to that floating-point accuracy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special

from ..cumulants import LossMoments, clear_cache, evaluation_count, loss_moments, pair_key
from ..errors import DPValueError, NumericalError, check_choice, check_delta, check_finite, check_positive_int
from ..mechanisms import GaussianMechanism, Mechanism, SubsampledGaussianMechanism, SubsampledLaplaceMechanism
from ..numerics import bisect_monotone
from .base import Accountant, AccountingResult
from .certified import FALLBACKS, PLDFallbackMixin
from .registry import COMMON_EVENTS, register

__all__ = [
    "LossMoments",
    "SumSummary",
    "loss_moments",
    "summarize",
    "edgeworth_correction",
    "edgeworth_sf",
    "dgg_bound_inid_skew",
    "dgg_bound_iid_skew",
    "EdgeworthAccountant",
    "prop45_tail_bound",
    "theorem1_tail_bound",
    "theorem1_constants",
    "edgeworth_work",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------------------------
# Sums: standardized cumulants and the moment ratios of Lemma 4.3
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SumSummary:
    r"""What the Edgeworth expansion and Lemma 4.3 need about :math:`\sum_i L_i` (one direction, one law).

    ``mean`` = :math:`M_m`, ``sd`` = :math:`B_m`, ``ell`` = standardized cumulants :math:`\ell_3..\ell_6` of the
    sum, ``n`` = number of summands, and the per-step averages of Lemma 4.3: ``lam3`` =
    :math:`\lambda_{3,m}`, ``K3``, ``K3tilde``, ``K4``.
    """

    mean: float
    sd: float
    ell: tuple[float, float, float, float]
    n: int
    lam3: float
    K3: float
    K3tilde: float
    K4: float
    extra: dict[str, Any] = field(default_factory=dict)


def summarize(items: list[tuple[LossMoments, int]]) -> SumSummary:
    r"""Aggregate per-step moments over a ledger of (moments, count): cumulants add (O(#distinct steps)).

    :math:`M = \sum_i \kappa_{1,i}`, :math:`B^2 = \sum_i \kappa_{2,i}`, :math:`\ell_r = \sum_i\kappa_{r,i}/B^r`;
    with :math:`\bar B = B/\sqrt n` the quantities of Lemma 4.3 are :math:`\lambda_3 = n^{-1}\sum\kappa_{3,i}/\bar B^3`,
    :math:`K_3 = n^{-1}\sum E|L_i-\mu_i|^3/\bar B^3`, :math:`K_4 = n^{-1}\sum E(L_i-\mu_i)^4/\bar B^4` and
    :math:`\tilde K_3 = K_3 + n^{-1}\sum E|L_i-\mu_i|\,\gamma_{2,i}/\bar B^3` (:math:`\gamma_{2,i}` the variance).
    """
    n = sum(c for _, c in items)
    M = sum(c * mo.mean for mo, c in items)
    V = sum(c * mo.var for mo, c in items)
    if not V > 0:
        raise NumericalError("edgeworth: the privacy loss has zero variance")
    B = math.sqrt(V)
    kap = [sum(c * mo.cumulants[r] for mo, c in items) for r in range(6)]
    ell = tuple(kap[r - 1] / B**r for r in (3, 4, 5, 6))
    Bbar = B / math.sqrt(n)
    lam3 = kap[2] / n / Bbar**3
    K3 = sum(c * mo.abs3 for mo, c in items) / n / Bbar**3
    K4 = sum(c * mo.central[2] for mo, c in items) / n / Bbar**4
    K3t = K3 + sum(c * mo.abs1 * mo.var for mo, c in items) / n / Bbar**3
    return SumSummary(mean=M, sd=B, ell=ell, n=n, lam3=lam3, K3=K3, K3tilde=K3t, K4=K4)


# ------------------------------------------------------------------------------------------------
# The Edgeworth expansion
# ------------------------------------------------------------------------------------------------
def _hermite(z):
    z2 = z * z
    He2 = z2 - 1
    He3 = z * (z2 - 3)
    He4 = z2 * (z2 - 6) + 3
    He5 = z * (z2 * (z2 - 10) + 15)
    He6 = z2 * (z2 * (z2 - 15) + 45) - 15
    He8 = z2 * (z2 * (z2 * (z2 - 28) + 210) - 420) + 105
    return He2, He3, He4, He5, He6, He8


def edgeworth_correction(z, ell: tuple[float, ...], order: int):
    r"""c(z) with :math:`\Pr[S > z] \approx \bar\Phi(z) + \varphi(z)\,c(z)` for the order-k expansion (k = 0..3)."""
    if order not in (0, 1, 2, 3):
        raise DPValueError(f"order must be 0, 1, 2 or 3, got {order!r}")
    z = np.asarray(z, dtype=float)
    if order == 0:
        return np.zeros_like(z)
    l3, l4, l5 = ell[0], ell[1], ell[2]
    He2, He3, He4, He5, He6, He8 = _hermite(z)
    c = l3 / 6.0 * He2
    if order >= 2:
        c = c + l4 / 24.0 * He3 + l3 * l3 / 72.0 * He5
    if order >= 3:
        c = c + l5 / 120.0 * He4 + l3 * l4 / 144.0 * He6 + l3**3 / 1296.0 * He8
    return c


def _scaled_sf(eps, s: SumSummary, order: int, log_scale=0.0):
    r""":math:`e^{\text{log\_scale}}\Pr[\sum L > \varepsilon]` under the order-k expansion, without overflow."""
    eps = np.asarray(eps, dtype=float)
    z = (eps - s.mean) / s.sd
    base = np.exp(log_scale + special.log_ndtr(-z))
    with np.errstate(over="ignore", invalid="ignore"):
        dens = np.exp(log_scale - 0.5 * z * z - _LOG_SQRT_2PI)
        corr = np.where(dens > 0, dens * edgeworth_correction(z, s.ell, order), 0.0)
    return base + corr


def edgeworth_sf(eps, s: SumSummary, order: int):
    r"""The order-k Edgeworth approximation of :math:`\Pr[\sum_i L_i > \varepsilon]` (not clipped to [0, 1])."""
    return _scaled_sf(eps, s, order)


# ------------------------------------------------------------------------------------------------
# Lemma 4.3: the explicit bound of Derumigny, Girard and Guyonvarch
# ------------------------------------------------------------------------------------------------
_CHI1 = 0.09916191
_C_PSI = 1.0253  # |Psi(t)| <= 1.0253 / (2 pi |t|)


def _upper_gamma(a: float, x: float) -> float:
    """Gamma(a, x) = int_x^inf u^(a-1) e^-u du (x >= 0)."""
    return float(special.gamma(a) * special.gammaincc(a, max(x, 0.0)))


def _lower_gamma_ext(a: float, x: float) -> float:
    """gamma(a, x) = int_0^x |v|^(a-1) e^(-|v|) sign dv: gamma(a,x) for x >= 0 and -gamma(a,|x|) for x < 0."""
    if x >= 0:
        return float(special.gamma(a) * special.gammainc(a, x))
    return -float(special.gamma(a) * special.gammainc(a, -x))


def _P1n(e: float) -> float:
    return (144 + 48 * e + 4 * e * e + 96 * math.sqrt(2 * e) + 32 * e + 16 * math.sqrt(2) * e**1.5) / 576


def _e1n(e: float) -> float:
    return math.exp(e * e * (1 / 6 + 2 * _P1n(e) / (1 - 3 * e) ** 2))


def _main_term(n, K3t, K4, e):
    return 0.1995 * K3t / math.sqrt(n) + (0.031 * K3t**2 + 0.327 * K4 * (1 / 12 + 1 / (4 * (1 - 3 * e) ** 2))) / n


def dgg_bound_inid_skew(n: int, K3: float, K3tilde: float, K4: float, lam3: float, e: float = 0.1) -> float:
    r"""Uniform bound on :math:`|F_{S_n}(x) - \Phi(x) + \frac{\lambda_3}{6\sqrt n}(x^2-1)\varphi(x)|` (Lemma 4.3).

    Derumigny, Girard and Guyonvarch (2021), Theorem A.2 (independent, not identically distributed,
    finite fourth moments, no continuity assumption, skewed case), with free parameter ``e`` in
    (0, 1/3) (0.1 in the paper; unrelated to the privacy epsilon):

    .. math:: 0.1995\frac{\tilde K_3}{\sqrt n}
              + \frac{1}{n}\Big(0.031\tilde K_3^2 + 0.327K_4\big(\tfrac1{12} + \tfrac1{4(1-3e)^2}\big)
              + 0.054|\lambda_3|\tilde K_3 + 0.037e_{1,n}(e)\lambda_3^2\Big) + r_{1,n}(e).

    At e = 0.1 the coefficients are the rounded 0.195 and 0.038 printed in the paper's Lemma 4.3.
    The remainder :math:`r_{1,n}` (the paper's Eq. (H.1), missing from our copy) follows the authors'
    reference implementation (R package BoundEdgeworth, which we re-derived from its formulas).
    """
    if not 0 < e < 1 / 3:
        raise DPValueError(f"e must be in (0, 1/3), got {e!r}")
    main = _main_term(n, K3tilde, K4, e)
    skew = (0.054 * abs(lam3) * K3tilde + 0.037 * _e1n(e) * lam3**2) / n
    return main + skew + _r1n_inid_skew(n, K3, K3tilde, K4, lam3, e)


def _Rn_inid(n, K4, lam3, e):
    c, d, rho = _C_PSI, (1 - 3 * e) ** 2 * math.pi, K4 / n
    g = special.gamma
    w = 1 / 24 + _P1n(e) / (2 * (1 - 3 * e) ** 2)
    e1 = _e1n(e)
    A1 = c / (48 * d) * rho**1.5 * 2**3 * g(4)
    A2 = c / (1152 * d) * rho**2 * 2**4 * g(5)
    A3 = c / (12 * d) * rho**1.25 * 2**2.5 * g(3.5)
    A4 = c / (72 * d) * rho**1.5 * 2**3 * g(4)
    A5 = c / (144 * d) * rho**1.75 * 2**3.5 * g(4.5)
    A6 = c * e1 / (2 * math.pi) * rho**2 * w * w * 2**4 * g(5)
    A7 = c * e1 / (6 * math.pi) * abs(lam3) * K4 / n**1.5 * w * 2**4 * g(5)
    return A1 + A2 + A3 + A4 + A5 + A6 + A7


def _curly_delta(n, K4, K3t, e, p=3):
    D = (1 - 4 * _CHI1 - math.sqrt(K4 / n)) / 2
    if D == 0:  # pragma: no cover - measure zero
        up, lo = 2 * math.sqrt(n) / K3t, math.sqrt(2 * e) * (n / K4) ** 0.25
        return 0.0 if up <= lo else (up**p - lo**p) / p
    a = 2 * D * min(e * math.sqrt(n / K4), 2 * n / K3t**2)
    b = 4 * D * n / K3t**2
    return 0.5 * abs(D) ** (-p / 2) * abs(_lower_gamma_ext(p / 2, b) - _lower_gamma_ext(p / 2, a))


def _r1n_inid_skew(n, K3, K3t, K4, lam3, e):
    ell = min(math.sqrt(2 * e) * (n / K4) ** 0.25, 2 * math.sqrt(n) / K3t)
    return (
        (14.1961 + 67.0415) * K3t**4 / (16 * math.pi**4 * n**2)
        + 4.3394 * abs(lam3) * K3t**3 / (8 * math.pi**3 * n**2)
        + _Rn_inid(n, K4, lam3, e)
        + abs(lam3) * (_upper_gamma(1.5, ell) - _upper_gamma(1.5, 2 * math.sqrt(n) / K3t)) / math.sqrt(n)
        + _C_PSI * K3 * _curly_delta(n, K4, K3t, e) / (6 * math.pi * math.sqrt(n))
    )


def dgg_bound_iid_skew(n: int, K3: float, K3tilde: float, K4: float, lam3: float, e: float = 0.1) -> float:
    """The i.i.d. version (Theorem A.3, no continuity, skewed): used only to check our port of the
    constants against the published value 0.1626857 (n = 1000, K4 = 9) of the authors' package README."""
    main = _main_term(n, K3tilde, K4, e)
    e3 = math.exp(e * e / 6 + e * e / (2 * (1 - 3 * e)) ** 2)
    skew = (0.054 * abs(lam3) * K3tilde + 0.037 * e3 * lam3**2) / n
    P2 = (
        48 * e * math.sqrt(K4 / n)
        + 4 * e * e * K4 / n
        + 96 * math.sqrt(2 * e) * abs(lam3) / (K4**0.25 * n**0.25)
        + 32 * e * lam3**2 / math.sqrt(K4 * n)
        + 16 * math.sqrt(2) * K4**0.25 * abs(lam3) * e**1.5 / n**0.75
    )
    one = (1 - 3 * e) ** 2
    e2 = math.exp(e * e * (1 / 6 + 1 / (2 * one) + 2 * P2 / (576 * one)))
    c, g = _C_PSI, special.gamma
    den = 2 * one * math.pi
    bracket = K4 / 12 + 1 / (4 * one) + P2 / (576 * one)
    Rn = (
        c / den * abs(lam3) / (6 * n**1.5) * 2**0.5 * g(1.5)
        + c / den * K4 / (24 * n**2) * 2**3 * g(4)
        + c / den * lam3**2 / (36 * n**2) * 2**3 * g(4)
        + c / den * K4 * abs(lam3) / (72 * n**2.5) * 2**3.5 * g(4.5)
        + c / den * K4**2 / (576 * n**3) * 2**4 * g(5)
        + c / math.pi * e2 / (8 * n**2) * bracket * 2**4 * g(5)
        + c / math.pi * e2 * abs(lam3) / (12 * n**1.5) * bracket * 2**3.5 * g(4.5)
    )
    ell = min(math.sqrt(2 * e) * (n / K4) ** 0.25, 2 * math.sqrt(n) / K3tilde)
    r1 = (
        (14.1961 + 67.0415) * K3tilde**4 / (16 * math.pi**4 * n**2)
        + 4.3394 * abs(lam3) * K3tilde**3 / (8 * math.pi**3 * n**2)
        + Rn
        + 1.306 * (e2 - e3) * lam3**2 / (36 * n)
        + abs(lam3) * (_upper_gamma(1.5, ell) - _upper_gamma(1.5, 2 * math.sqrt(n) / K3tilde)) / math.sqrt(n)
        + c
        * 2**2.5
        * K3
        / (3 * math.pi * math.sqrt(n))
        * (_upper_gamma(1.5, ell**2 / 8) - _upper_gamma(1.5, 4 * n / (8 * K3tilde**2)))
    )
    return main + skew + r1


def lemma43_bound(s: SumSummary, e: float = 0.1) -> float:
    """Delta_{m,1} of Lemma 4.3 for one summed loss (uniform bound on the CDF error of the order-1 expansion)."""
    return dgg_bound_inid_skew(s.n, s.K3, s.K3tilde, s.K4, s.lam3, e)


# ------------------------------------------------------------------------------------------------
# Proposition 4.5: Hoeffding tail of the summed losses of the subsampled Laplace mechanism
# ------------------------------------------------------------------------------------------------
def prop45_tail_bound(mechanism: SubsampledLaplaceMechanism, m: int, eps) -> np.ndarray | float:
    r"""Prop. 4.5 of {cite}`wang_edgeworth`: a tail bound for the summed losses of the subsampled Laplace mechanism.

    The paper's :math:`X^{(1)}_i` and :math:`X^{(2)}_i` are our losses under Q of the ``"remove"`` and ``"add"``
    pairs. Both take values in an interval of length :math:`\tau = \log(1-p+pe^{\mu}) - \log(1-p+pe^{-\mu})`,
    :math:`\mu = \Delta/b`, so Hoeffding's inequality gives, with :math:`\eta = -\max\{E X^{(1)}, E X^{(2)}\} > 0`
    (the smaller of the two KL divergences),

    .. math:: \max\Big\{\Pr\Big[\sum_{i=1}^m X^{(1)}_i \ge \varepsilon\Big],
              \Pr\Big[\sum_{i=1}^m X^{(2)}_i \ge \varepsilon\Big]\Big\} \le
              \exp\Big(-\frac{2(\varepsilon + m\eta)^2}{m\tau^2}\Big),

    valid for :math:`\varepsilon + m\eta \ge 0` (we return 1 below that). This is a rigorous upper bound,
    not an approximation; it decays like :math:`e^{-\Theta(\varepsilon^2/m)}`, which is what makes the tail
    of Eq. (3.1) controllable at large epsilon (Sec. 4.3-4.4). The means come from
    :func:`dputils.cumulants.loss_moments`. The Gaussian counterpart, Theorem 1, cannot
    be evaluated as printed (its constant :math:`\eta(a)` is undefined, one term is negative); a version of it with
    explicit constants is :func:`theorem1_tail_bound`.
    """
    if not isinstance(mechanism, SubsampledLaplaceMechanism):
        raise DPValueError(f"prop45_tail_bound: mechanism must be a SubsampledLaplaceMechanism, got {mechanism!r}")
    m = check_positive_int("m", m)
    eps_arr = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(eps_arr)):
        raise DPValueError("eps must be finite")
    mu = mechanism.sensitivity / mechanism.scale
    p = mechanism.q
    tau = math.log1p(p * math.expm1(mu)) - math.log1p(p * math.expm1(-mu))
    eta = -max(loss_moments(mechanism.pair("remove"), "q").mean, loss_moments(mechanism.pair("add"), "q").mean)
    if not eta > 0:  # pragma: no cover - a KL divergence of distinct laws
        raise NumericalError(f"prop45_tail_bound: eta = {eta!r} is not positive")
    s = eps_arr + m * eta
    out = np.where(s >= 0, np.exp(-2.0 * np.maximum(s, 0.0) ** 2 / (m * tau * tau)), 1.0)
    return float(out) if out.ndim == 0 else out


# ------------------------------------------------------------------------------------------------
# Theorem 1: a sub-Gaussian tail of the summed losses of the subsampled Gaussian mechanism
# ------------------------------------------------------------------------------------------------
#: relative safety margins of the rounded quadrature inputs (accurate to ~1e-12): eta is shaded down, the
#: variance proxy up, so the bound stays an upper bound
_ETA_SHADE = 1e-9


def theorem1_constants(mechanism: Mechanism, direction: str = "remove") -> dict[str, float]:
    r"""The constants of :func:`theorem1_tail_bound`: ``mu`` = :math:`\Delta/\sigma`, ``p``, ``eta`` = the
    mean drift :math:`-E X_i > 0` (a KL divergence), ``v`` = the sub-Gaussian variance proxy of :math:`X_i`, and
    for the add direction ``c0 - c1`` (the spread of the two conditional means, see there)."""
    if isinstance(mechanism, GaussianMechanism):
        p = 1.0
    elif isinstance(mechanism, SubsampledGaussianMechanism):
        p = float(mechanism.q)
    else:
        raise DPValueError(
            f"theorem1_tail_bound: mechanism must be a GaussianMechanism or SubsampledGaussianMechanism, got {mechanism!r}"
        )
    direction = check_choice("direction", direction, ("remove", "add"))
    mu = mechanism.sensitivity / mechanism.sigma
    mean_q = loss_moments(mechanism.pair(direction), "q").mean  # E X_i: the loss under Q
    eta = -mean_q * (1.0 - _ETA_SHADE)
    if not eta > 0:  # pragma: no cover - a KL divergence of distinct laws
        raise NumericalError(f"theorem1_tail_bound: eta = {eta!r} is not positive")
    out = dict(mu=mu, p=p, eta=eta, v=mu * mu)
    if direction == "add" and p < 1.0:
        # c0 = E[-g(xi)], c1 = E[-g(xi + mu)]; E X = (1 - p) c0 + p c1 and c0 = -E_{N(0,1)} g = -(remove loss under Q)
        c0 = -loss_moments(mechanism.pair("remove"), "q").mean
        c1 = (mean_q - (1.0 - p) * c0) / p
        spread = min(abs(c0 - c1) * (1.0 + 1e-8) + 1e-15, mu * mu)  # 0 <= c0 - c1 <= mu^2 (g mu-Lipschitz)
        out.update(c0_minus_c1=spread, v=mu * mu + spread * spread / 4.0)
    return out


def theorem1_tail_bound(mechanism: Mechanism, m: int, eps, direction: str = "remove") -> np.ndarray | float:
    r"""Theorem 1 of {cite}`wang_edgeworth` (Sec. 4.3) with explicit constants: a sub-Gaussian bound on the tail of
    the summed losses of the (Poisson-subsampled) Gaussian mechanism.

    **What the paper states.** For the PLLRs :math:`X_i = \log(1 - p + p e^{\mu\xi_i - \mu^2/2})`,
    :math:`\xi_i \sim N(0,1)`, :math:`\mu = \Delta/\sigma` (our loss under Q of the ``"remove"`` pair), "there exist
    some positive constant a, and some associated constant :math:`\eta(a) > 0`" with
    :math:`\Pr[\sum_{i\le m} X_i \ge \varepsilon] \le 2\exp(-(\varepsilon + m\eta)^2/(8m\tau^2))`, :math:`\tau^2` a
    maximum of three terms in :math:`a`, :math:`a_+ = \varphi(a)/(1-\Phi(a))` and :math:`\mu`, one of them
    :math:`\mu^2`; the other sequence (pair (2), our ``"add"`` pair) "has the same rate, and can be proved
    similarly". The main text does not define :math:`\eta(a)` (its proof, App. G, is missing from our copy), and the
    third term of :math:`\tau^2`, :math:`(a_+-a)^2\mu^2/(2\log(\Phi(a_+)-\Phi(a)))`, is negative as printed: the
    statement cannot be evaluated as it stands.

    **What is implemented (our statement and proof, same form).** Let :math:`g(x) = \log(1-p+pe^{\mu x-\mu^2/2})`.
    Its derivative :math:`\mu\,pe^{\mu x-\mu^2/2}/(1-p+pe^{\mu x-\mu^2/2})` lies in :math:`(0, \mu)`, so g is
    :math:`\mu`-Lipschitz, and by the Gaussian concentration of Lipschitz functions (the Tsirelson-Ibragimov-Sudakov
    inequality, e.g. Boucheron, Lugosi and Massart 2013, Ch. 5) :math:`\log E e^{\lambda(X-EX)} \le \lambda^2 v/2` for every
    real :math:`\lambda` with

    * ``"remove"`` (paper's pair (1), :math:`X = g(\xi)`): :math:`v = \mu^2`;
    * ``"add"`` (pair (2), :math:`X = -g(\zeta)`, :math:`\zeta = \xi + \mu B`, :math:`B \sim` Bernoulli(p)): given B,
      X is :math:`\mu`-Lipschitz in :math:`\xi` around :math:`c_B = E[-g(\xi + \mu B)]`, and :math:`c_B` takes two
      values, so Hoeffding's lemma adds :math:`(c_0 - c_1)^2/4`: :math:`v = \mu^2 + (c_0-c_1)^2/4`
      (:math:`0 \le c_0 - c_1 \le \mu^2`).

    With :math:`\eta = -E X_i > 0` (a KL divergence: :math:`KL(Q\|P)` of the pair), Chernoff's bound on the
    i.i.d. sum gives, for :math:`\varepsilon + m\eta \ge 0`,

    .. math:: \Pr\Big[\sum_{i=1}^m X_i \ge \varepsilon\Big] \le \exp\Big(-\frac{(\varepsilon + m\eta)^2}{2mv}\Big)

    (1 below that). This implies the paper's form for any :math:`\eta(a) \le \eta` (it has :math:`\tau^2 \ge \mu^2`,
    the factor 8 and the prefactor 2), and has its rate :math:`e^{-\Theta(\varepsilon^2/m + m)}`. A rigorous bound,
    not an approximation; it is loose when p is small (the true variance of :math:`X_i` is about
    :math:`p^2(e^{\mu^2}-1)`, far below :math:`\mu^2`), so it only beats the uniform bound of Lemma 4.3 at very large
    :math:`\varepsilon`. ``eta`` comes from :func:`dputils.cumulants.loss_moments` (relative accuracy ~1e-12),
    shaded down by 1e-9 relative so that rounding cannot make the bound too small. For p = 1 (a plain
    ``GaussianMechanism``) X is Gaussian, :math:`\eta = \mu^2/2`, and the bound is Chernoff's bound on the
    Gaussian tail.
    """
    m = check_positive_int("m", m)
    eps_arr = np.asarray(eps, dtype=float)
    if not np.all(np.isfinite(eps_arr)):
        raise DPValueError("eps must be finite")
    c = theorem1_constants(mechanism, direction)
    s = eps_arr + m * c["eta"]
    out = np.where(s >= 0, np.exp(-(np.maximum(s, 0.0) ** 2) / (2.0 * m * c["v"])), 1.0)
    return float(out) if out.ndim == 0 else out


# ------------------------------------------------------------------------------------------------
# One direction of a composition
# ------------------------------------------------------------------------------------------------
class _Direction:
    """The summed losses of one direction: under P and under Q, their expansions and bounds."""

    def __init__(self, ledger: list[tuple[Mechanism, int]], direction: str, dgg_e: float):
        self.direction = direction
        pairs = [(m.pair(direction), c) for m, c in ledger]
        self.sp = summarize([(loss_moments(p, "p"), c) for p, c in pairs])
        self.sq = summarize([(loss_moments(p, "q"), c) for p, c in pairs])
        self.dgg_e = dgg_e
        self._bounds: tuple[float, float] | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        """(Delta_P, Delta_Q): Lemma 4.3 for the sum under P (paper's Y) and under Q (paper's X)."""
        if self._bounds is None:
            self._bounds = (lemma43_bound(self.sp, self.dgg_e), lemma43_bound(self.sq, self.dgg_e))
        return self._bounds

    def delta_aea(self, eps, order: int):
        """S_P(eps) - e^eps S_Q(eps) with order-k Edgeworth tails (unclipped)."""
        eps = np.asarray(eps, dtype=float)
        return _scaled_sf(eps, self.sp, order) - _scaled_sf(eps, self.sq, order, log_scale=eps)

    def delta_pm(self, eps):
        """(delta^-, delta^+) of Def. 4.2 with order-1 tails and Lemma 4.3, clipped to [0, 1] (pointwise)."""
        eps = np.asarray(eps, dtype=float)
        dP, dQ = self.bounds
        sP = _scaled_sf(eps, self.sp, 1)
        sQ = _scaled_sf(eps, self.sq, 1)
        e = np.exp(np.minimum(eps, 700.0))
        with np.errstate(over="ignore", invalid="ignore"):
            up = np.minimum(sP + dP, 1.0) - np.where(sQ - dQ > 0, e * np.maximum(sQ - dQ, 0.0), 0.0)
            lo = np.maximum(sP - dP, 0.0) - e * np.minimum(sQ + dQ, 1.0)
        up = np.clip(up, 0.0, 1.0)
        lo = np.clip(lo, 0.0, 1.0)
        return lo, up


# ------------------------------------------------------------------------------------------------
# The accountant
# ------------------------------------------------------------------------------------------------
def _grid_hi(f, delta: float, start: float) -> float:
    """An eps_hi with f(eps) < delta on [eps_hi, 4 eps_hi] (checked on a coarse grid), found by doubling."""
    hi = max(start, 1.0)
    for _ in range(40):
        chk = np.linspace(hi, 4 * hi, 64)
        if np.all(f(chk) < delta):
            return hi
        hi *= 2.0
        if hi > 1e5:
            break
    raise NumericalError(f"edgeworth: delta(eps) stays above {delta:g} up to eps = {hi:g}")


@register(
    "edgeworth",
    label="Edgeworth",
    answer="estimate",
    events=COMMON_EVENTS,
    cost="cheap",
    rank=50,
    color="#8c564b",
    help="Edgeworth accountant (Wang et al.): AEA estimate (order 2) with the EEAI certified bracket",
)
class EdgeworthAccountant(PLDFallbackMixin, Accountant):
    r"""Edgeworth accountant {cite}`wang_edgeworth`: AEA estimate with the EEAI certified bracket.

    ``get_delta(eps)`` / ``get_epsilon(delta)`` return ``value`` = the order-``order`` AEA (Def. 4.1; the
    paper's EW_EST is order 2) and ``lower``/``upper`` = the EEAI (Def. 4.2 with Lemma 4.3, order 1),
    ``math.inf`` where vacuous. ``kind`` is ``"estimate"`` when the bracket says something
    (upper finite or lower > 0), else ``"approximation"``. The AEA value is an approximation and is
    clipped into the certified bracket when it falls outside (``details["clipped"]``).

    ``fallback="pld"`` (default): where the EEAI is vacuous (upper epsilon infinite, e.g. at the MNIST DP-SGD
    setting sigma 1.1, q 256/60000, 3516 steps, delta 1e-5, where Delta_P ~ 0.09 exceeds delta) or wider than 10%
    of its upper end, the PLD accountant's certified bracket is intersected with it and the AEA clipped into
    the intersection, so the answer always carries a finite certified upper end; ``details["fallback"] ==
    "pld"`` flags it and ``details["own_value"]`` keeps the AEA (:mod:`dputils.accountants.certified`).
    ``fallback="none"``: the method's own answer alone (``kind="approximation"`` where the EEAI is vacuous).

    Cost: the moments of each distinct (mechanism, direction) are computed once; the rest is closed
    form, so the time does not depend on the number of compositions.
    """

    name = "edgeworth"

    def __init__(
        self, direction: str = "both", order: int = 2, dgg_e: float = 0.1, n_grid: int = 4000, fallback: str = "pld"
    ):
        super().__init__(direction)
        self.fallback = check_choice("fallback", fallback, FALLBACKS)
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order not in (0, 1, 2, 3):
            raise DPValueError(f"order must be 0, 1, 2 or 3, got {order!r}")
        order = int(order)
        dgg_e = check_finite("dgg_e", dgg_e)
        if not 0 < dgg_e < 1 / 3:
            raise DPValueError(f"dgg_e must be in (0, 1/3), got {dgg_e!r}")
        self.order = order
        self.dgg_e = dgg_e
        self.n_grid = check_positive_int("n_grid", n_grid)
        self._dirs: dict[str, _Direction] | None = None

    def _check_supported(self, mechanism: Any) -> None:
        if not isinstance(mechanism, Mechanism):
            raise DPValueError(f"edgeworth: mechanism must be a dputils Mechanism, got {mechanism!r}")
        for d in self.directions:
            pair_key(mechanism.pair(d))  # raises DPValueError for pairs without CGF machinery

    def _invalidate(self) -> None:
        self._dirs = None

    def _directions(self) -> dict[str, _Direction]:
        self._require_ledger()
        if self._dirs is None:
            self._dirs = {d: _Direction(self.ledger, d, self.dgg_e) for d in self.directions}
        return self._dirs

    def summaries(self) -> dict[str, dict[str, SumSummary]]:
        """Per direction, the summaries of the summed loss under P and under Q."""
        return {d: {"p": o.sp, "q": o.sq} for d, o in self._directions().items()}

    def error_bounds(self) -> dict[str, tuple[float, float]]:
        """Per direction, (Delta_P, Delta_Q) of Lemma 4.3."""
        return {d: o.bounds for d, o in self._directions().items()}

    # delta ---------------------------------------------------------------------------------------
    def delta_curve(self, eps, order: int | None = None, direction: str | None = None):
        """AEA delta(eps) on an array (max over directions unless one is named), clipped to [0, 1]."""
        order = self.order if order is None else order
        dirs = self._directions()
        names = [direction] if direction else list(dirs)
        vals = np.max([dirs[d].delta_aea(eps, order) for d in names], axis=0)
        return np.clip(vals, 0.0, 1.0)

    def delta_bounds_curve(self, eps):
        """(lower, upper) EEAI envelopes of delta on a sorted array of eps >= 0 (monotone in eps)."""
        eps = np.asarray(eps, dtype=float)
        lo_all, up_all = [], []
        for o in self._directions().values():
            lo, up = o.delta_pm(eps)
            lo_all.append(lo)
            up_all.append(up)
        lo = np.max(lo_all, axis=0)
        up = np.max(up_all, axis=0)
        # monotone envelopes (delta is non-increasing in eps)
        up = np.minimum.accumulate(up)
        lo = np.maximum.accumulate(lo[::-1])[::-1]
        return lo, up

    def _own_delta(self, eps: float) -> AccountingResult:
        """Order-``order`` AEA delta(eps) with the EEAI bracket (no fallback)."""
        est = float(self.delta_curve(np.array([eps]))[0])
        grid = np.append(np.linspace(0.0, eps, self.n_grid), eps)
        lo_env = []
        up_env = []
        for o in self._directions().values():
            l, u = o.delta_pm(grid)
            up_env.append(np.min(u))
            tail = np.linspace(eps, eps + 50.0 * max(o.sp.sd, o.sq.sd) + 1.0, self.n_grid)
            l2, _ = o.delta_pm(tail)
            lo_env.append(np.max(l2))
        lower, upper = float(max(lo_env)), float(max(up_env))
        clipped = not (lower <= est <= upper)
        value = min(max(est, lower), upper)
        return AccountingResult(
            value=value,
            lower=lower,
            upper=upper,
            kind=self._kind(lower > 0 or upper < 1),
            accountant=self.name,
            quantity="delta",
            details=self._details(clipped=clipped, aea=est),
        )

    # epsilon -------------------------------------------------------------------------------------
    def epsilon_direction(self, delta: float, direction: str, order: int | None = None) -> float:
        """AEA epsilon of one direction: the largest root of delta_AEA(eps) = delta (0 if delta(0) <= delta)."""
        delta = check_delta(delta)
        order = self.order if order is None else order
        o = self._directions()[direction]
        f = lambda e: o.delta_aea(e, order)  # noqa: E731
        start = max(o.sp.mean + 10 * o.sp.sd, 1.0)
        hi = _grid_hi(f, delta, start)
        grid = np.linspace(0.0, hi, self.n_grid)
        vals = f(grid)
        if np.any(~np.isfinite(vals)):
            raise NumericalError("edgeworth: non-finite AEA delta on the epsilon grid")
        above = np.nonzero(vals > delta)[0]
        if above.size == 0:
            return 0.0
        i = above[-1]
        if i == grid.size - 1:  # pragma: no cover - excluded by _grid_hi
            raise NumericalError("edgeworth: could not bracket the epsilon root")
        return float(
            optimize.brentq(lambda e: float(f(np.array([e]))[0]) - delta, grid[i], grid[i + 1], xtol=1e-13, rtol=1e-13)
        )

    def epsilon_bounds_direction(self, delta: float, direction: str) -> tuple[float, float]:
        """Certified (eps_lower, eps_upper) of one direction from the EEAI (upper = inf when vacuous)."""
        delta = check_delta(delta)
        o = self._directions()[direction]
        dP, dQ = o.bounds
        lo_f = lambda e: o.delta_pm(e)[0]  # noqa: E731
        up_f = lambda e: o.delta_pm(e)[1]  # noqa: E731
        # upper: the first eps where delta^+ <= delta (true delta is then <= delta for all larger eps)
        if dP >= delta:
            e_up = math.inf
        else:
            hi = _grid_hi(up_f, delta, max(o.sp.mean + 10 * o.sp.sd, 1.0))
            grid = np.linspace(0.0, hi, self.n_grid)
            v = up_f(grid)
            ok = np.nonzero(v <= delta)[0]
            j = ok[0]
            if j == 0:
                e_up = 0.0
            else:
                # up(grid[j - 1]) > delta >= up(grid[j]): 80 halvings, keeping the end where up <= delta
                e_up = float(
                    bisect_monotone(
                        lambda e: float(up_f(np.array([e]))[0]) <= delta,
                        grid[j - 1],
                        grid[j],
                        keep="hi",
                        tol=0.0,
                        max_iter=80,
                        ends_checked=True,
                    )
                )
        # lower: the last eps where delta^- > delta (true delta exceeds delta there, so eps_true > it)
        if float(lo_f(np.array([0.0]))[0]) <= delta:
            e_lo = 0.0
        else:
            hi = _grid_hi(lo_f, delta, max(o.sp.mean + 10 * o.sp.sd, 1.0))
            grid = np.linspace(0.0, hi, self.n_grid)
            v = lo_f(grid)
            bad = np.nonzero(v > delta)[0]
            k = bad[-1]
            # lo(grid[k]) > delta >= lo(grid[k + 1]): 80 halvings, keeping the end where lo > delta
            e_lo = float(
                bisect_monotone(
                    lambda e: float(lo_f(np.array([e]))[0]) > delta,
                    grid[k],
                    grid[k + 1],
                    keep="lo",
                    tol=0.0,
                    max_iter=80,
                    ends_checked=True,
                )
            )
        return e_lo, e_up

    def _own_epsilon(self, delta: float) -> AccountingResult:
        """Order-``order`` AEA epsilon(delta) with the EEAI bracket (no fallback)."""
        per = {d: self.epsilon_direction(delta, d) for d in self._directions()}
        est = max(per.values())
        bounds = {d: self.epsilon_bounds_direction(delta, d) for d in self._directions()}
        lower = max(b[0] for b in bounds.values())
        upper = max(b[1] for b in bounds.values())
        clipped = not (lower <= est <= upper)
        value = min(max(est, lower), upper)
        return AccountingResult(
            value=value,
            lower=lower,
            upper=upper,
            kind=self._kind(lower > 0 or math.isfinite(upper)),
            accountant=self.name,
            quantity="epsilon",
            details=self._details(
                clipped=clipped,
                aea=est,
                per_direction=per,
                bounds_per_direction={d: list(b) for d, b in bounds.items()},
            ),
        )

    def _kind(self, informative: bool) -> str:
        return "estimate" if informative else "approximation"

    def _details(self, **kw) -> dict[str, Any]:
        eb = self.error_bounds()
        out = {
            "order": self.order,
            "direction": self.direction,
            "Delta_P": {d: float(b[0]) for d, b in eb.items()},
            "Delta_Q": {d: float(b[1]) for d, b in eb.items()},
        }
        out.update(kw)
        return out


# ------------------------------------------------------------------------------------------------
# The work of one evaluation
# ------------------------------------------------------------------------------------------------
def edgeworth_work(mechanism: Mechanism, m: int, delta: float, *, eeai: bool = False) -> tuple[float, int]:
    """Cost of one Edgeworth epsilon(delta) from a cold cache: ``(seconds, one-step moment evaluations)``.

    The AEA (Wang et al., Def. 4.1) needs the one-step cumulants once per distinct mechanism, so the count of
    moment evaluations (:func:`dputils.cumulants.evaluation_count`) does not depend on m; ``eeai=True`` also
    computes the certified interval (Def. 4.2), whose bracket search adds a few evaluations. The seconds are
    wall-clock time (machine-dependent); the count is deterministic.
    """

    clear_cache()
    t0 = time.perf_counter()
    acc = EdgeworthAccountant(fallback="none").compose(mechanism, check_positive_int("m", m))
    if eeai:
        acc.get_epsilon(delta)
    else:
        max(acc.epsilon_direction(delta, d) for d in acc.directions)
    return time.perf_counter() - t0, evaluation_count()
