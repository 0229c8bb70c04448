"""Conversions of mu-GDP (Section 2 of ``vandijk_shuffling``) and the standard-model comparisons.

* mu-GDP implies RDP, zCDP and tCDP; the generic group transform of (eps, delta)-DP;
* the Dong-Roth-Su CLT for uniform sampling, the Bu-Dong-Long-Su CLT for Poisson sampling
  (approximations, not bounds) and the RDP of the Poisson-subsampled Gaussian with the classic and
  improved conversions, from the foundation's :mod:`dputils.accountants.rdp`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np
from scipy import integrate, special, stats

from ..accountants import PLDAccountant, RDPAccountant
from ..accountants import rdp as _rdp
from ..errors import (
    DPValueError,
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_probability,
)
from ..mechanisms import SubsampledGaussianMechanism
from .laws import subsample_ic_g1_law
from .tradeoff import gdp_epsilon, mixture_epsilon, shuffle_g1_mu


def gdp_to_rdp(mu: float, order: float) -> float:
    """mu-GDP implies (order, order mu^2/2)-RDP for every order > 1; for ``mu = sqrt(gE)/sigma`` this is the
    paper's ``(omega, gE omega/(2 sigma^2))``."""
    mu = check_nonnegative("mu", mu)
    order = check_positive("order", order)
    if order <= 1:
        raise DPValueError(f"order must be > 1, got {order!r}")
    return order * mu * mu / 2


def gdp_to_zcdp(mu: float) -> float:
    """mu-GDP implies ``rho = mu^2/2``-zCDP (= gE/(2 sigma^2) for the headline)."""
    mu = check_nonnegative("mu", mu)
    return mu * mu / 2


def gdp_to_tcdp(mu: float, omega: float) -> tuple[float, float]:
    """(rho, omega)-tCDP with ``rho = mu^2/2`` for any omega > 1 (the paper prints the pair garbled as
    ``(gE omega/(2 sigma^2), omega)``; the correct reading is ``rho = gE/(2 sigma^2)``)."""
    omega = check_positive("omega", omega)
    if omega <= 1:
        raise DPValueError(f"omega must be > 1, got {omega!r}")
    return gdp_to_zcdp(mu), omega


def tcdp_as_printed(sigma: float, epochs: int, group_size: int, omega: float) -> tuple[float, float]:
    """The tCDP pair Thm F.1 prints for ``G_{sqrt(gE)/sigma}``: ``(gE omega / (2 sigma^2), omega)``.

    What holds is ``(rho, omega)`` with ``rho = gE/(2 sigma^2)`` (:func:`gdp_to_tcdp`, Section 2): the printed
    parameter is omega times larger, so it bounds the Rényi divergence of order alpha only by
    ``alpha omega rho``."""
    sigma = check_positive("sigma", sigma)
    E = check_positive_int("epochs", epochs)
    g = check_positive_int("group_size", group_size)
    omega = check_positive("omega", omega)
    if omega <= 1:
        raise DPValueError(f"omega must be > 1, got {omega!r}")
    return g * E / (2 * sigma**2) * omega, omega


def generic_group_eps_delta(epsilon: float, delta: float, group_size: int) -> tuple[float, float]:
    """Generic group privacy of (eps, delta)-DP: ``(g eps, g e^{(g-1) eps} delta)`` (Dwork-Roth; the paper writes
    ``g e^{g-1} delta`` for its normalisation)."""
    eps = check_epsilon(epsilon)
    delta = check_probability("delta", delta, allow_zero=True)
    g = check_positive_int("group_size", group_size)
    return g * eps, min(1.0, g * math.exp((g - 1) * eps) * delta)


# ---------------------------------------------------------------------------------------------
# Standard-model accountants for the comparison (section 2.9 of the note)
# ---------------------------------------------------------------------------------------------


def clt_mu_uniform(p: float, steps: int, sigma: float) -> float:
    """Dong-Roth-Su CLT for ``C_p(G_{1/sigma})^{(x)T}`` (uniform sampling): ``mu = p sqrt(T (e^{1/sigma^2} - 1))``.
    An approximation (a limit theorem), not a bound."""
    p = check_probability("p", p)
    T = check_positive_int("steps", steps)
    sigma = check_positive("sigma", sigma)
    return p * math.sqrt(T * math.expm1(1 / sigma**2))


def clt_mu_poisson(p: float, steps: int, sigma: float) -> float:
    """Bu-Dong-Long-Su CLT for Poisson sampling:
    ``mu = p sqrt(T (e^{1/sigma^2} Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2))``.  An approximation."""
    p = check_probability("p", p)
    T = check_positive_int("steps", steps)
    sigma = check_positive("sigma", sigma)
    v = math.exp(1 / sigma**2) * special.ndtr(1.5 / sigma) + 3 * special.ndtr(-0.5 / sigma) - 2
    return p * math.sqrt(T * v)


def rdp_poisson_gaussian(q: float, sigma: float, orders: Iterable[int]) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step at integer orders a >= 2 (Mironov-Talwar-Zhang 2019),
    from the foundation's :func:`dputils.accountants.rdp.subsampled_gaussian_rdp`."""
    q = check_probability("q", q)
    sigma = check_positive("sigma", sigma)
    out = []
    for a in orders:
        if int(a) != a or a < 2:
            raise DPValueError(f"orders must be integers >= 2, got {a}")
        out.append(_rdp.subsampled_gaussian_rdp(q, sigma, float(a)))
    return np.asarray(out)


def rdp_epsilon(rdp: np.ndarray, orders: Iterable[int], delta: float, conversion: str = "classic") -> float:
    """eps from an RDP curve: ``"classic"`` ``min_a [rdp(a) + log(1/delta)/(a-1)]`` (Mironov) or ``"modern"``
    (Balle et al. 2020), the names of the foundation's :func:`dputils.accountants.rdp.rdp_to_epsilon`, which
    this calls. ``"improved"`` (this module's former name for "modern") still works and warns."""
    delta = check_delta(delta)
    if conversion == "improved":
        warnings.warn(
            'conversion="improved" is now called "modern" (as in dputils.accountants.rdp); '
            '"improved" will be removed in a later release',
            DeprecationWarning,
            stacklevel=2,
        )
        conversion = "modern"
    check_choice("conversion", conversion, ("classic", "modern"))
    return _rdp.rdp_to_epsilon(list(orders), rdp, delta, conversion)[0]


def strong_vs_standard_epsilons(
    dataset_size: int,
    batch_size: int,
    sigma: float,
    epochs: int,
    delta: float,
    pld_discretization: float = 1e-3,
    orders: Iterable[int] = range(2, 257),
) -> tuple[dict[str, float], tuple[float, float]]:
    """ε at ``delta`` of one training setting (N, batch, σ, E) under the strong adversary and in the standard
    model, and the PLD accountant's bracket.

    Strong adversary (``vandijk_shuffling``): ``G_{sqrt(E)/sigma}`` for shuffling (Lemma F.2) and the exact
    Binomial mixture for subsampling (Lemma E.2's law). Standard model, for ``T = E N / batch`` rounds of the
    Poisson-subsampled Gaussian with rate ``p = batch / N`` and the same σ: the Dong-Roth-Su CLT
    (:func:`clt_mu_uniform`, :func:`clt_mu_poisson`), the foundation's PLD (upper end of its bracket) and RDP
    accountants, and the integer-order RDP of :func:`rdp_poisson_gaussian` with the classic and modern
    conversions. Returns the ε by name and the PLD bracket ``(lower, upper)``."""

    p_rate = batch_size / dataset_size
    T = epochs * dataset_size // batch_size
    cmp = {
        "paper SH, g = 1: G with μ = √E/σ": gdp_epsilon(delta, shuffle_g1_mu(sigma, epochs)),
        "paper SS, g=1: exact mixture": mixture_epsilon(
            delta, subsample_ic_g1_law(dataset_size, batch_size, epochs), sigma
        )[1],
        "DRS CLT (uniform)": gdp_epsilon(delta, clt_mu_uniform(p_rate, T, sigma)),
        "CLT (Poisson)": gdp_epsilon(delta, clt_mu_poisson(p_rate, T, sigma)),
    }
    mech = SubsampledGaussianMechanism(sigma, p_rate)
    r_pld = PLDAccountant(discretization=pld_discretization).compose(mech, T).get_epsilon(delta)
    cmp["PLD (Poisson), upper"] = r_pld.upper
    cmp["RDP (Poisson)"] = float(RDPAccountant().compose(mech, T).get_epsilon(delta))
    orders = list(orders)
    rdp = T * rdp_poisson_gaussian(p_rate, sigma, orders)
    cmp["RDP classic (orders 2–256)"] = rdp_epsilon(rdp, orders, delta)
    cmp["RDP modern (orders 2–256)"] = rdp_epsilon(rdp, orders, delta, "modern")
    return cmp, (r_pld.lower, r_pld.upper)


def gaussian_renyi_by_quadrature(mu: float, order: float) -> float:
    """``D_alpha(N(mu, 1) || N(0, 1)) = log(int p^alpha q^{1 - alpha}) / (alpha - 1)`` at ``alpha = order > 1``, by
    adaptive quadrature (relative tolerance 1e-12) on ``[alpha mu - 12, alpha mu + 12]``, where the tilted mass
    sits: the numerical check of the closed form ``alpha mu^2 / 2`` behind :func:`gdp_to_rdp` and
    :func:`gdp_to_tcdp` (Section 2: ``G_mu`` is ``mu^2/2``-zCDP)."""
    mu = check_nonnegative("mu", mu)
    alpha = check_positive("order", order)
    if alpha <= 1:
        raise DPValueError(f"order must be > 1, got {order!r}")

    def integrand(x):
        return math.exp(alpha * stats.norm.logpdf(x, mu) + (1 - alpha) * stats.norm.logpdf(x))

    lo_, hi_ = alpha * mu - 12, alpha * mu + 12
    return math.log(integrate.quad(integrand, lo_, hi_, epsabs=0, epsrel=1e-12)[0]) / (alpha - 1)


def epsilon_against_batch_size(
    dataset_size: int, batch_sizes: Iterable[int], sigma: float, epochs: int, delta: float
) -> tuple[list[float], list[float]]:
    """ε at ``delta`` of E epochs against the batch size, under the strong adversary and in the standard model.

    For each batch size b: the strong adversary's exact mixture (Def 5.2) of subsampling with g = 1
    (``c^2 ~ Binomial(EN/b, b/N)``, Lemma E.2's law), and the standard model's Bu-Dong-Long-Su CLT for Poisson
    sampling, ``mu = p sqrt(T (e^{1/sigma^2} Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2))`` with ``p = b/N`` and
    ``T = EN/b`` rounds (:func:`clt_mu_poisson`, an approximation, not a bound), both through eq. (7). Returns
    the two lists (strong, standard)."""
    batches = list(batch_sizes)
    strong = [mixture_epsilon(delta, subsample_ic_g1_law(dataset_size, b, epochs), sigma)[1] for b in batches]
    standard = [
        gdp_epsilon(delta, clt_mu_poisson(b / dataset_size, epochs * dataset_size // b, sigma)) for b in batches
    ]
    return strong, standard
