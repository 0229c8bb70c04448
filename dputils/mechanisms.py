r"""Privacy-loss random variables of the basic mechanisms.

A mechanism :math:`M` run on neighbouring data sets gives two output distributions. For one ordered
pair :math:`(P, Q)` the **privacy loss** is :math:`L(x) = \log p(x)/q(x)` and the privacy-loss random
variable (PLRV) is :math:`L(X)` with :math:`X \sim P`. Everything an accountant needs follows from it:
the hockey-stick divergence (privacy profile)

.. math::  \delta(\varepsilon) = \sup_S P(S) - e^\varepsilon Q(S)
           = P[L > \varepsilon] - e^\varepsilon\, Q[L > \varepsilon]
           = \mathbb{E}_P\big[(1 - e^{\varepsilon - L})_+\big],

valid for every real :math:`\varepsilon` (negative ones describe the trade-off curve below the diagonal).

Neighbouring relation: add-or-remove one record. With sensitivity :math:`\Delta`:

* ``"remove"``: :math:`P` is the output law on the data set **with** the record, :math:`Q` without it.
  For the Poisson-subsampled Gaussian, :math:`P = (1-q)\,N(0,\sigma^2) + q\,N(\Delta,\sigma^2)`,
  :math:`Q = N(0, \sigma^2)`.
* ``"add"``: the pair reversed, :math:`P = N(0,\sigma^2)`, :math:`Q = (1-q)N(0,\sigma^2) + qN(\Delta,\sigma^2)`.

The Gaussian (:math:`q = 1`) and Laplace mechanisms are symmetric: both directions have the same PLRV.
Accountants report the worse of the two directions unless asked for one.

All formulas are in closed form through the standard normal CDF, evaluated in log space
(``scipy.special.log_ndtr``) so that tails down to 1e-300 keep their relative accuracy.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from scipy import special

from ._records import record_init
from .errors import DPValueError, NumericalError, check_choice, check_positive, check_probability
from .numerics import bisect_monotone, log_diff_exp

DIRECTIONS = ("remove", "add")


def _log_ndtr(x):
    return special.log_ndtr(x)


class PrivacyLossPair(ABC):
    """One ordered pair (P, Q) of output distributions and its privacy loss L = log p/q.

    Subclasses implement the log-densities, the loss, the tails of L under P and Q and sampling.
    All methods are vectorized over their first argument and return numpy arrays (or floats for
    scalar input).
    """

    direction: str = "remove"
    #: whether log_sf_p/log_sf_q/log_cdf_p/log_delta are implemented (the PLD accountant needs them)
    has_tails: bool = True

    @abstractmethod
    def log_p(self, x):
        """log-density of P at x."""

    @abstractmethod
    def log_q(self, x):
        """log-density of Q at x."""

    def loss(self, x):
        """The privacy loss L(x) = log p(x) - log q(x)."""
        return self.log_p(x) - self.log_q(x)

    @abstractmethod
    def log_sf_p(self, eps):
        """log P[L > eps]."""

    @abstractmethod
    def log_sf_q(self, eps):
        """log Q[L > eps]."""

    @abstractmethod
    def log_cdf_p(self, eps):
        """log P[L <= eps] (computed directly, not as 1 - sf, so lower tails keep their accuracy)."""

    @abstractmethod
    def log_delta(self, eps):
        """log of the hockey-stick divergence delta(eps) (``-inf`` where it is 0)."""

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator, under: str = "p"):
        """n draws of the output x from P (``under="p"``) or Q (``under="q"``)."""

    @property
    def infinity_mass(self) -> float:
        """P[q(X) = 0]: the probability of an infinite privacy loss (0 for the mechanisms here)."""
        return 0.0

    @property
    def loss_support(self) -> tuple[float, float]:
        """The closed range of L(X) under P (may be infinite at either end)."""
        return (-math.inf, math.inf)

    # derived quantities ----------------------------------------------------------------------
    def sf_p(self, eps):
        """P[L > eps]."""
        return np.exp(self.log_sf_p(eps))

    def sf_q(self, eps):
        """Q[L > eps]."""
        return np.exp(self.log_sf_q(eps))

    def cdf_p(self, eps):
        """P[L <= eps]."""
        return np.exp(self.log_cdf_p(eps))

    def delta(self, eps):
        """Hockey-stick divergence delta(eps) = P[L > eps] - e^eps Q[L > eps], for any real eps."""
        return np.exp(self.log_delta(eps))

    def sample_loss(self, n: int, rng: np.random.Generator, under: str = "p"):
        """n draws of the privacy loss L(X), X ~ P (or ~ Q with ``under="q"``)."""
        return self.loss(self.sample(n, rng, under))

    def loss_quantile_range(self, tail: float) -> tuple[float, float]:
        """(lo, hi) with P[L < lo] <= tail and P[L > hi] <= tail, found by bracketing in log space."""
        lo_s, hi_s = self.loss_support
        log_tail = math.log(tail)

        def find(fn, start, step_sign):
            # expand until fn(x) <= log_tail, then 100 halvings keeping the end where fn(x) <= log_tail
            a = start
            step = 1.0
            for _ in range(200):
                b = a + step_sign * step
                if fn(b) <= log_tail:
                    lo_, hi_ = (a, b) if step_sign > 0 else (b, a)
                    return bisect_monotone(
                        lambda x: fn(x) <= log_tail,
                        lo_,
                        hi_,
                        keep="hi" if step_sign > 0 else "lo",
                        tol=0.0,
                        max_iter=100,
                        ends_checked=True,
                    )
                a = b
                step *= 2.0
            raise NumericalError(
                "could not bracket the privacy-loss quantile (the loss leaves the floating-point "
                "range: noise too small?)"
            )

        centre = float(np.clip(0.0, lo_s, hi_s)) if math.isfinite(lo_s) or math.isfinite(hi_s) else 0.0
        hi = hi_s if math.isfinite(hi_s) else find(lambda e: float(self.log_sf_p(e)), centre, +1)
        lo = lo_s if math.isfinite(lo_s) else find(lambda e: float(self.log_cdf_p(e)), centre, -1)
        return lo, hi


def _as_array(x):
    return np.asarray(x, dtype=float)


def _maybe_scalar(x, like):
    return float(x) if np.ndim(like) == 0 else x


class SubsampledGaussianPair(PrivacyLossPair):
    r"""The pair of the Poisson-subsampled Gaussian mechanism (``q = 1``: the plain Gaussian).

    With :math:`\mu = \Delta/\sigma`, write outputs in units of :math:`\sigma`. For ``"remove"`` the loss
    is :math:`L(x) = \log\big(1 - q + q\,e^{(2x\Delta - \Delta^2)/(2\sigma^2)}\big)`, increasing in x, so
    :math:`\{L > \varepsilon\} = \{x > x^*(\varepsilon)\}` with
    :math:`x^* = \frac{\sigma^2}{\Delta}\log\frac{e^\varepsilon - (1-q)}{q} + \frac{\Delta}{2}` for
    :math:`e^\varepsilon > 1-q` (else the whole line). With :math:`u = x^*/\sigma`,
    :math:`r = e^{u\mu - \mu^2/2}` one has :math:`e^\varepsilon - (1-q) = q r` and

    .. math:: \delta_{\rm remove}(\varepsilon) = q\,[\bar\Phi(u-\mu) - r\,\bar\Phi(u)],

    i.e. q times the Gaussian hockey-stick at :math:`\log(1 + (e^\varepsilon - 1)/q)`. For ``"add"`` the
    loss is decreasing, :math:`\{L>\varepsilon\} = \{x < x^*\}` with
    :math:`x^* = \frac{\sigma^2}{\Delta}\log\frac{e^{-\varepsilon} - (1-q)}{q} + \frac{\Delta}{2}` and

    .. math:: \delta_{\rm add}(\varepsilon) = e^{\varepsilon} q\,[r\,\Phi(u) - \Phi(u - \mu)],

    zero for :math:`\varepsilon \ge -\log(1-q)`. Both are evaluated as
    :math:`e^{A}(1 - e^{B-A})` with ``log_ndtr`` so that small deltas keep full relative accuracy.
    """

    def __init__(self, sigma: float, q: float = 1.0, sensitivity: float = 1.0, direction: str = "remove"):
        self.sigma = check_positive("sigma", sigma)
        self.q = check_probability("q", q)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.direction = check_choice("direction", direction, DIRECTIONS)
        self.mu = self.sensitivity / self.sigma
        self.log_q_ = math.log(self.q)
        self.log1m_q = math.log1p(-self.q) if self.q < 1 else -math.inf

    def __repr__(self) -> str:
        return f"SubsampledGaussianPair(sigma={self.sigma}, q={self.q}, sensitivity={self.sensitivity}, direction={self.direction!r})"

    # densities ---------------------------------------------------------------------------------
    def _log_mix(self, x):
        s, d = self.sigma, self.sensitivity
        a = -0.5 * (x / s) ** 2
        b = -0.5 * ((x - d) / s) ** 2
        c = -0.5 * math.log(2 * math.pi) - math.log(s)
        if self.q == 1.0:
            return b + c
        return np.logaddexp(self.log1m_q + a, self.log_q_ + b) + c

    def _log_base(self, x):
        s = self.sigma
        return -0.5 * (x / s) ** 2 - 0.5 * math.log(2 * math.pi) - math.log(s)

    def log_p(self, x):
        x = _as_array(x)
        out = self._log_mix(x) if self.direction == "remove" else self._log_base(x)
        return _maybe_scalar(out, x)

    def log_q(self, x):
        x = _as_array(x)
        out = self._log_base(x) if self.direction == "remove" else self._log_mix(x)
        return _maybe_scalar(out, x)

    def loss(self, x):
        x = _as_array(x)
        s, d = self.sigma, self.sensitivity
        t = (2 * x * d - d * d) / (2 * s * s)
        if self.q == 1.0:
            lm = t
        else:
            # log(1 - q + q e^t): log1p(q expm1(t)) is exact near t = 0 (where the loss is tiny), the
            # log-sum-exp form avoids overflow for large t
            with np.errstate(over="ignore"):
                small = np.log1p(self.q * np.expm1(np.minimum(t, 30.0)))
            lm = np.where(t < 30.0, small, np.logaddexp(self.log1m_q, self.log_q_ + t))
        out = lm if self.direction == "remove" else -lm
        return _maybe_scalar(out, x)

    @property
    def loss_support(self) -> tuple[float, float]:
        if self.q == 1.0:
            return (-math.inf, math.inf)
        if self.direction == "remove":
            return (self.log1m_q, math.inf)
        return (-math.inf, -self.log1m_q)

    # threshold ---------------------------------------------------------------------------------
    def _u(self, eps):
        """u = x*/sigma for the event {L > eps}; +-inf marks the trivial regions."""
        eps = _as_array(eps)
        e = eps if self.direction == "remove" else -eps
        # log(e^e - (1-q)) - log q
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.q == 1.0:
                lr = e
            else:
                lr = log_diff_exp(e, np.full_like(e, self.log1m_q)) - self.log_q_
        u = lr / self.mu + self.mu / 2.0
        return eps, u

    def log_sf_p(self, eps):
        eps, u = self._u(eps)
        if self.direction == "remove":
            # P[x > x*] under the mixture
            out = (
                np.logaddexp(self.log1m_q + _log_ndtr(-u), self.log_q_ + _log_ndtr(self.mu - u))
                if self.q < 1
                else _log_ndtr(self.mu - u)
            )
        else:
            out = _log_ndtr(u)  # P = N(0, sigma^2): P[x < x*]
        return _maybe_scalar(out, eps)

    def log_sf_q(self, eps):
        eps, u = self._u(eps)
        if self.direction == "remove":
            out = _log_ndtr(-u)
        else:
            out = (
                np.logaddexp(self.log1m_q + _log_ndtr(u), self.log_q_ + _log_ndtr(u - self.mu))
                if self.q < 1
                else _log_ndtr(u - self.mu)
            )
        return _maybe_scalar(out, eps)

    def log_cdf_p(self, eps):
        eps, u = self._u(eps)
        if self.direction == "remove":
            out = (
                np.logaddexp(self.log1m_q + _log_ndtr(u), self.log_q_ + _log_ndtr(u - self.mu))
                if self.q < 1
                else _log_ndtr(u - self.mu)
            )
        else:
            out = _log_ndtr(-u)
        return _maybe_scalar(out, eps)

    def log_delta(self, eps):
        eps, u = self._u(eps)
        mu = self.mu
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            log_r = u * mu - mu * mu / 2.0
            if self.direction == "remove":
                a = self.log_q_ + _log_ndtr(mu - u)
                b = self.log_q_ + log_r + _log_ndtr(-u)
                out = log_diff_exp(a, np.minimum(b, a))
                # trivial region e^eps <= 1-q: {L > eps} is everything, delta = 1 - e^eps
                triv = np.isneginf(u)
                if np.any(triv):
                    out = np.where(triv, np.log(-np.expm1(np.minimum(eps, 0.0))), out)
            else:
                a = eps + self.log_q_ + log_r + _log_ndtr(u)
                b = eps + self.log_q_ + _log_ndtr(u - mu)
                out = log_diff_exp(a, np.minimum(b, a))
                # e^-eps <= 1-q: loss never exceeds eps, delta = 0
                out = np.where(np.isneginf(u), -np.inf, out)
        return _maybe_scalar(out, eps)

    def sample(self, n: int, rng: np.random.Generator, under: str = "p"):
        check_choice("under", under, ("p", "q"))
        mixture = (under == "p") == (self.direction == "remove")
        z = rng.standard_normal(n) * self.sigma
        if mixture:
            z = z + self.sensitivity * (rng.random(n) < self.q)
        return z


class LaplacePair(PrivacyLossPair):
    r"""P = Lap(Delta, b), Q = Lap(0, b) (the add direction is its reflection and has the same PLRV).

    The loss :math:`L(x) = (|x| - |x - \Delta|)/b` is clipped to :math:`[-\Delta/b, \Delta/b]`, with atoms
    :math:`P[L = \Delta/b] = 1/2`, :math:`P[L = -\Delta/b] = e^{-\Delta/b}/2`. The privacy profile is
    :math:`\delta(\varepsilon) = 1 - e^{(\varepsilon - \Delta/b)/2}` on :math:`[-\Delta/b, \Delta/b)`,
    :math:`1 - e^{\varepsilon}` below and 0 above.
    """

    def __init__(self, scale: float, sensitivity: float = 1.0, direction: str = "remove"):
        self.scale = check_positive("scale", scale)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.direction = check_choice("direction", direction, DIRECTIONS)
        self.eps0 = self.sensitivity / self.scale

    def __repr__(self) -> str:
        return f"LaplacePair(scale={self.scale}, sensitivity={self.sensitivity}, direction={self.direction!r})"

    def _centres(self):
        d = self.sensitivity
        return (d, 0.0) if self.direction == "remove" else (0.0, d)

    def _logpdf(self, x, m):
        return -np.abs(x - m) / self.scale - math.log(2 * self.scale)

    def log_p(self, x):
        x = _as_array(x)
        return _maybe_scalar(self._logpdf(x, self._centres()[0]), x)

    def log_q(self, x):
        x = _as_array(x)
        return _maybe_scalar(self._logpdf(x, self._centres()[1]), x)

    @property
    def loss_support(self) -> tuple[float, float]:
        return (-self.eps0, self.eps0)

    def log_sf_p(self, eps):
        eps = _as_array(eps)
        e0 = self.eps0
        with np.errstate(divide="ignore"):
            # L > eps  <=>  x > x* = (b eps + Delta)/2 (remove orientation), X ~ Lap(Delta, b)
            mid = np.log(-np.expm1(np.minimum((eps - e0) / 2.0 - math.log(2.0), 0.0)))
            out = np.where(eps < -e0, 0.0, np.where(eps >= e0, -np.inf, mid))
        return _maybe_scalar(out, eps)

    def log_sf_q(self, eps):
        eps = _as_array(eps)
        e0 = self.eps0
        # Q = Lap(0, b): Q[x > x*] = exp(-x*/b)/2 with x*/b = (eps + e0)/2
        out = np.where(eps < -e0, 0.0, np.where(eps >= e0, -np.inf, -(eps + e0) / 2.0 - math.log(2.0)))
        return _maybe_scalar(out, eps)

    def log_cdf_p(self, eps):
        eps = _as_array(eps)
        e0 = self.eps0
        with np.errstate(divide="ignore"):
            mid = (eps - e0) / 2.0 - math.log(2.0)
            out = np.where(eps < -e0, -np.inf, np.where(eps >= e0, 0.0, mid))
        return _maybe_scalar(out, eps)

    def log_delta(self, eps):
        eps = _as_array(eps)
        e0 = self.eps0
        with np.errstate(divide="ignore"):
            mid = np.log(-np.expm1(np.minimum((eps - e0) / 2.0, 0.0)))
            low = np.log(-np.expm1(np.minimum(eps, 0.0)))
            out = np.where(eps < -e0, low, np.where(eps >= e0, -np.inf, mid))
        return _maybe_scalar(out, eps)

    def sample(self, n: int, rng: np.random.Generator, under: str = "p"):
        check_choice("under", under, ("p", "q"))
        m = self._centres()[0 if under == "p" else 1]
        return m + rng.laplace(0.0, self.scale, n)


# mechanisms ------------------------------------------------------------------------------------
class Mechanism(ABC):
    """A mechanism with its two neighbouring pairs. ``pair("remove")`` and ``pair("add")``."""

    name: str = "mechanism"
    symmetric: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record_init(cls)  # the constructor's arguments, for saving an accountant's ledger

    @abstractmethod
    def pair(self, direction: str) -> PrivacyLossPair:
        """The (P, Q) pair of the given direction."""

    @property
    @abstractmethod
    def params(self) -> dict[str, float]:
        """The parameters, for reports."""

    def to_dp_event(self):
        """The equivalent ``dp_accounting`` DpEvent (for cross-checks)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params == other.params  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.params.items()))))


#: The largest signal-to-noise ratio sensitivity/sigma a Gaussian mechanism may have: above it mu^2 / 2, the
#: scale of every privacy loss and epsilon, leaves double precision (1e300), so no accountant can answer.
MAX_MU = 1e150


def _check_mu(sigma: float, sensitivity: float) -> None:
    if sensitivity / sigma > MAX_MU:
        raise DPValueError(
            f"sigma must be at least sensitivity / {MAX_MU:g} (got sigma {sigma!r}, sensitivity "
            f"{sensitivity!r}): the privacy loss would exceed the floating-point range; the "
            "mechanism is effectively non-private"
        )


class GaussianMechanism(Mechanism):
    """Gaussian noise N(0, sigma^2) added to a query of L2 sensitivity ``sensitivity``."""

    name = "gaussian"
    symmetric = True

    def __init__(self, sigma: float, sensitivity: float = 1.0):
        self.sigma = check_positive("sigma", sigma)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        _check_mu(self.sigma, self.sensitivity)

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "sensitivity": self.sensitivity}

    @property
    def mu(self) -> float:
        """The GDP parameter Delta / sigma."""
        return self.sensitivity / self.sigma

    def pair(self, direction: str) -> PrivacyLossPair:
        return SubsampledGaussianPair(
            self.sigma, 1.0, self.sensitivity, check_choice("direction", direction, DIRECTIONS)
        )

    def to_dp_event(self):
        import dp_accounting

        return dp_accounting.GaussianDpEvent(self.sigma / self.sensitivity)


class SubsampledGaussianMechanism(Mechanism):
    """The Gaussian mechanism on a Poisson subsample: each record is included with probability ``q``."""

    name = "subsampled-gaussian"

    def __init__(self, sigma: float, q: float, sensitivity: float = 1.0):
        self.sigma = check_positive("sigma", sigma)
        self.q = check_probability("q", q)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        _check_mu(self.sigma, self.sensitivity)
        self.symmetric = self.q == 1.0

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "q": self.q, "sensitivity": self.sensitivity}

    def pair(self, direction: str) -> PrivacyLossPair:
        return SubsampledGaussianPair(
            self.sigma, self.q, self.sensitivity, check_choice("direction", direction, DIRECTIONS)
        )

    def to_dp_event(self):
        import dp_accounting

        return dp_accounting.PoissonSampledDpEvent(self.q, dp_accounting.GaussianDpEvent(self.sigma / self.sensitivity))


class LaplaceMechanism(Mechanism):
    """Laplace noise of scale ``scale`` added to a query of L1 sensitivity ``sensitivity``."""

    name = "laplace"
    symmetric = True

    def __init__(self, scale: float, sensitivity: float = 1.0):
        self.scale = check_positive("scale", scale)
        self.sensitivity = check_positive("sensitivity", sensitivity)

    @property
    def params(self) -> dict[str, float]:
        return {"scale": self.scale, "sensitivity": self.sensitivity}

    def pair(self, direction: str) -> PrivacyLossPair:
        return LaplacePair(self.scale, self.sensitivity, check_choice("direction", direction, DIRECTIONS))

    def to_dp_event(self):
        import dp_accounting

        return dp_accounting.LaplaceDpEvent(self.scale / self.sensitivity)


# mixtures of Gaussians -------------------------------------------------------------------------
# ------------------------------------------------------------------------------------------------
# Poisson-subsampled Laplace (Sec. 4.4 of the Edgeworth paper)
# ------------------------------------------------------------------------------------------------
_LN2 = math.log(2.0)


def _round_up(a: float, ulps: int = 4) -> float:
    """``a`` plus ``ulps`` units in the last place (an upper bound of a value computed to a few ulps)."""
    return a + ulps * math.ulp(a)


class SubsampledLaplacePair(PrivacyLossPair):
    r"""Poisson-subsampled Laplace: ``"remove"``: :math:`P = (1-q)\mathrm{Lap}(0,b) + q\,\mathrm{Lap}(\Delta,b)`,
    :math:`Q = \mathrm{Lap}(0,b)`; ``"add"``: the pair reversed (Sec. 4.4 of the Edgeworth paper).

    **Loss.** Write :math:`A = \mathrm{Lap}(0,b)`, :math:`B = \mathrm{Lap}(\Delta,b)`, :math:`s = \Delta/b` and
    :math:`t(x) = (|x| - |x-\Delta|)/b`, which is :math:`-s` for :math:`x \le 0`, :math:`(2x-\Delta)/b` on
    :math:`(0,\Delta)` and :math:`s` for :math:`x \ge \Delta` (nondecreasing). Since :math:`b(x)/a(x) = e^{t(x)}`,

    .. math:: L_{\rm remove}(x) = g(t(x)), \qquad L_{\rm add}(x) = -g(t(x)), \qquad g(t) = \log(1 - q + q e^t),

    with :math:`g` increasing. The loss is bounded:
    :math:`L_{\rm remove} \in [\log(1 + q(e^{-s}-1)), \log(1 + q(e^{s}-1))]` and
    :math:`L_{\rm add} \in [-\log(1 + q(e^{s}-1)), -\log(1 - q(1 - e^{-s}))]`, with two atoms at the ends
    (:math:`x \le 0` and :math:`x \ge \Delta`). :math:`g^{-1}(y) = \log(1 + (e^y - 1)/q)`.

    **Tails (remove).** For :math:`\varepsilon` strictly inside the range, :math:`\{L > \varepsilon\} = \{x > x^*\}`
    with :math:`x^* = (b\tau + \Delta)/2 \in [0, \Delta]`, :math:`\tau = g^{-1}(\varepsilon) \in [-s, s]`, and
    :math:`A[x > x^*] = \tfrac12 e^{-(\tau+s)/2}`, :math:`B[x \le x^*] = \tfrac12 e^{(\tau-s)/2}`, so

    .. math:: P[L>\varepsilon] = (1-q)\tfrac12 e^{-(\tau+s)/2} + q\,(1 - \tfrac12 e^{(\tau-s)/2}), \qquad
              Q[L>\varepsilon] = \tfrac12 e^{-(\tau+s)/2},

    and, using :math:`e^\varepsilon = 1 - q + q e^\tau` (the :math:`1-q` parts cancel),

    .. math:: \delta_{\rm remove}(\varepsilon) = q\,\big(1 - e^{(\tau - s)/2}\big),

    q times the Laplace profile (see :class:`LaplacePair`) at :math:`\tau = \log(1 + (e^\varepsilon - 1)/q)`,
    the amplification-by-subsampling identity.

    **Tails (add).** :math:`\{L > \varepsilon\} = \{g(t) < -\varepsilon\} = \{x < x^*\}` with
    :math:`\tau = g^{-1}(-\varepsilon)`; :math:`P[L>\varepsilon] = A[x<x^*] = 1 - \tfrac12 e^{-(\tau+s)/2}`,
    :math:`Q[L>\varepsilon] = (1-q)(1 - \tfrac12 e^{-(\tau+s)/2}) + q\tfrac12 e^{(\tau-s)/2}` and, with
    :math:`e^{-\varepsilon} = 1 - q + q e^{\tau}`,

    .. math:: \delta_{\rm add}(\varepsilon) = e^{\varepsilon} q\, e^{\tau}\big(1 - e^{-(\tau+s)/2}\big).

    Below the range (every outcome has a larger loss) :math:`\delta = 1 - e^\varepsilon`; at and above its
    top :math:`\delta = 0`. With :math:`q = 1` both reduce to :class:`LaplacePair`.

    **Rounding.** The atoms' losses are the computed :math:`\pm g(\pm s)` rounded up by 4 ulps (an upper
    bound of the exact value, whose computation through ``log1p``/``expm1`` is accurate to about 2 ulps), and
    the tails are those of that pair: moving an atom's loss up can only increase every
    :math:`\delta(\varepsilon) = \mathbb{E}_P[(1 - e^{\varepsilon - L})_+]` of every composition, so the PLD's
    upper bound stays certified; :math:`\tau` is clipped to :math:`[-s, s]`. Every quantity is evaluated in log
    space (``log1p``, ``expm1``), so small tails and small deltas keep their relative accuracy.
    """

    def __init__(self, scale: float, q: float, sensitivity: float = 1.0, direction: str = "remove"):
        self.scale = check_positive("scale", scale)
        self.q = check_probability("q", q)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.direction = check_choice("direction", direction, ("remove", "add"))
        self.s = self.sensitivity / self.scale
        self.log_q_ = math.log(self.q)
        self.log1m_q = math.log1p(-self.q) if self.q < 1 else -math.inf
        g_lo, g_hi = float(self._g(-self.s)), float(self._g(self.s))
        # the two atoms of L (bottom, top), rounded up; their exact values are <= these
        lo, hi = (g_lo, g_hi) if self.direction == "remove" else (-g_hi, -g_lo)
        self._atom_lo, self._atom_hi = _round_up(lo), _round_up(hi)

    def __repr__(self) -> str:
        return f"SubsampledLaplacePair(scale={self.scale}, q={self.q}, sensitivity={self.sensitivity}, direction={self.direction!r})"

    # g and its inverse ------------------------------------------------------------------------
    def _g(self, t):
        """g(t) = log(1 - q + q e^t): log1p(q expm1(t)) (exact near t = 0), log-sum-exp for large t."""
        t = np.asarray(t, dtype=float)
        if self.q == 1.0:
            return t
        with np.errstate(over="ignore"):
            small = np.log1p(self.q * np.expm1(np.minimum(t, 30.0)))
        return np.where(t < 30.0, small, np.logaddexp(self.log1m_q, self.log_q_ + t))

    def _g_inv(self, y):
        """g^{-1}(y) = log(1 + (e^y - 1)/q); -inf where e^y <= 1 - q (no t reaches y)."""
        y = np.asarray(y, dtype=float)
        if self.q == 1.0:
            return y
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            small = np.log1p(np.expm1(np.minimum(y, 30.0)) / self.q)
            big = y + np.log1p(-(1.0 - self.q) * np.exp(-np.maximum(y, 30.0))) - self.log_q_
        out = np.where(y < 30.0, small, big)
        return np.where(np.isnan(out), -np.inf, out)

    def _regions(self, eps):
        """(eps, tau clipped to [-s, s], every: {L > eps} is everything, none: {L > eps} is empty)."""
        eps = _as_array(eps)
        y = eps if self.direction == "remove" else -eps
        tau = np.clip(self._g_inv(y), -self.s, self.s)
        return eps, tau, eps < self._atom_lo, eps >= self._atom_hi

    def _halves(self, tau):
        """(log A[x > x*] = log A[x >= x*], log B[x <= x*]) at x* = (b tau + Delta)/2 in [0, Delta]."""
        return -_LN2 - 0.5 * (tau + self.s), -_LN2 + 0.5 * (tau - self.s)

    # densities ---------------------------------------------------------------------------------
    def _lap(self, x, m):
        return -np.abs(x - m) / self.scale - math.log(2 * self.scale)

    def _mix(self, x):
        if self.q == 1.0:
            return self._lap(x, self.sensitivity)
        return np.logaddexp(math.log1p(-self.q) + self._lap(x, 0.0), math.log(self.q) + self._lap(x, self.sensitivity))

    def log_p(self, x):
        x = np.asarray(x, dtype=float)
        return self._mix(x) if self.direction == "remove" else self._lap(x, 0.0)

    def log_q(self, x):
        x = np.asarray(x, dtype=float)
        return self._lap(x, 0.0) if self.direction == "remove" else self._mix(x)

    def loss(self, x):
        x = np.asarray(x, dtype=float)
        t = (np.abs(x) - np.abs(x - self.sensitivity)) / self.scale
        lm = self._g(t)
        return lm if self.direction == "remove" else -lm

    @property
    def loss_support(self) -> tuple[float, float]:
        r"""The loss is :math:`\pm\log(1 + q(e^t - 1))` with :math:`t \in [-\Delta/b, \Delta/b]`, increasing in t."""
        e0 = self.sensitivity / self.scale
        lo, hi = math.log1p(self.q * math.expm1(-e0)), float(self._g(e0))
        return (lo, hi) if self.direction == "remove" else (-hi, -lo)

    def loss_quantile_range(self, tail: float) -> tuple[float, float]:
        """The whole (bounded) range of the loss, atoms included (``tail`` is not needed)."""
        return (min(self.loss_support[0], self._atom_lo), self._atom_hi)

    # tails -------------------------------------------------------------------------------------
    def _select(self, every, none, mid, v_every, v_none, eps):
        with np.errstate(invalid="ignore"):
            out = np.where(every, v_every, np.where(none, v_none, mid))
        return _maybe_scalar(out, eps)

    def log_sf_p(self, eps):
        eps, tau, every, none = self._regions(eps)
        la, lb = self._halves(tau)
        with np.errstate(divide="ignore"):
            if self.direction == "remove":
                mid = np.logaddexp(self.log1m_q + la, self.log_q_ + np.log1p(-np.exp(lb)))
            else:
                mid = np.log1p(-np.exp(la))
        return self._select(every, none, mid, 0.0, -np.inf, eps)

    def log_sf_q(self, eps):
        eps, tau, every, none = self._regions(eps)
        la, lb = self._halves(tau)
        with np.errstate(divide="ignore"):
            if self.direction == "remove":
                mid = la
            else:
                mid = np.logaddexp(self.log1m_q + np.log1p(-np.exp(la)), self.log_q_ + lb)
        return self._select(every, none, mid, 0.0, -np.inf, eps)

    def log_cdf_p(self, eps):
        eps, tau, every, none = self._regions(eps)
        la, lb = self._halves(tau)
        with np.errstate(divide="ignore"):
            if self.direction == "remove":
                mid = np.logaddexp(self.log1m_q + np.log1p(-np.exp(la)), self.log_q_ + lb)
            else:
                mid = la
        return self._select(every, none, mid, -np.inf, 0.0, eps)

    def log_delta(self, eps):
        eps, tau, every, none = self._regions(eps)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.direction == "remove":
                mid = self.log_q_ + np.log(-np.expm1(0.5 * (tau - self.s)))
            else:
                mid = eps + self.log_q_ + tau + np.log(-np.expm1(-0.5 * (tau + self.s)))
            low = np.log(-np.expm1(np.minimum(eps, 0.0)))
        return self._select(every, none, mid, low, -np.inf, eps)

    def sample(self, n: int, rng: np.random.Generator, under: str = "p"):
        check_choice("under", under, ("p", "q"))
        mixture = (under == "p") == (self.direction == "remove")
        z = rng.laplace(0.0, self.scale, n)
        if mixture:
            z = z + self.sensitivity * (rng.random(n) < self.q)
        return z


class SubsampledLaplaceMechanism(Mechanism):
    """Laplace noise of scale ``scale`` on a Poisson subsample (rate ``q``), L1 sensitivity ``sensitivity``."""

    name = "subsampled-laplace"

    def __init__(self, scale: float, q: float, sensitivity: float = 1.0):
        self.scale = check_positive("scale", scale)
        self.q = check_probability("q", q)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.symmetric = self.q == 1.0  # q = 1: the Laplace mechanism, the same PLRV in both directions

    @property
    def params(self) -> dict[str, float]:
        return {"scale": self.scale, "q": self.q, "sensitivity": self.sensitivity}

    def pair(self, direction: str) -> PrivacyLossPair:
        return SubsampledLaplacePair(
            self.scale, self.q, self.sensitivity, check_choice("direction", direction, ("remove", "add"))
        )

    def to_dp_event(self):
        import dp_accounting

        return dp_accounting.PoissonSampledDpEvent(self.q, dp_accounting.LaplaceDpEvent(self.scale / self.sensitivity))


class MixtureVsGaussianPair(PrivacyLossPair):
    r"""The pair of a 1-D Gaussian mixture against the zero-mean Gaussian.

    :math:`P = \sum_j w_j N(s_j, \sigma^2)` with :math:`0 \le s_1 < \dots < s_K`, :math:`\sum_j w_j = 1`,
    :math:`Q = N(0, \sigma^2)`; ``"remove"`` is (P, Q) and ``"add"`` is (Q, P). This is the per-step pair of
    conditional composition (Algorithm 4 of {cite}`schuchardt_kalinin`; Choquette-Choo et al. 2024,
    Cor. 4.7 reduce vector mixtures to it). With :math:`a_j(x) = (x s_j - s_j^2/2)/\sigma^2`

    .. math:: L(x) = \log \frac{p(x)}{q(x)} = \log \sum_j w_j e^{a_j(x)},

    a log-sum-exp of affine functions with non-negative slopes: **convex and increasing** in x (strictly,
    as some :math:`s_j > 0`). Hence :math:`\{L > e\} = \{x > x^*(e)\}` and, with :math:`W_0` the weight of
    a zero mean (0 if there is none) and :math:`T = \log(e^{e} - W_0)`, the threshold solves
    :math:`E(x) := \log\sum_{s_j>0} w_j e^{a_j(x)} = T` (no root, :math:`x^* = -\infty`, when
    :math:`e \le \log W_0`). :math:`E` is convex with slope in :math:`[s_{\min}^+, s_{\max}]/\sigma^2`, so Newton's
    method started to the right of the root decreases monotonically to it; it is bracketed by
    :math:`x_{hi} = (\sigma^2 (T - \log w_K) + s_K^2/2)/s_K` and
    :math:`x_{lo} = \min_{s_j>0} (\sigma^2 (T - \log(1 - W_0)) + s_j^2/2)/s_j` and safeguarded by bisection.
    The tails are then closed forms (log space, ``log_ndtr``):

    * remove: :math:`P[L>\varepsilon] = \sum_j w_j \bar\Phi((x^*-s_j)/\sigma)`, :math:`Q[L>\varepsilon] = \bar\Phi(x^*/\sigma)`,
      :math:`\delta = \sum_{s_j>0} w_j\bar\Phi((x^*-s_j)/\sigma) - e^{T}\bar\Phi(x^*/\sigma)` with :math:`x^* = x^*(\varepsilon)`
      (the zero-mean part cancels exactly, as in :class:`SubsampledGaussianPair`);
    * add: the loss is :math:`-L`, :math:`\{-L > \varepsilon\} = \{x < x^*(-\varepsilon)\}` and
      :math:`\delta = e^{\varepsilon}[e^{T}\Phi(x^*/\sigma) - \sum_{s_j>0} w_j \Phi((x^*-s_j)/\sigma)]`, :math:`T = \log(e^{-\varepsilon} - W_0)`.

    With the two means {0, s} this is :class:`SubsampledGaussianPair` with ``q = w_2``.
    """

    def __init__(self, sigma: float, sensitivities, weights, direction: str = "remove"):
        self.sigma = check_positive("sigma", sigma)
        self.sens = np.asarray(sensitivities, dtype=float)
        self.weights = np.asarray(weights, dtype=float)
        self.direction = check_choice("direction", direction, DIRECTIONS)
        if self.sens.ndim != 1 or self.sens.shape != self.weights.shape or self.sens.size == 0:
            raise DPValueError("sensitivities and weights must be non-empty 1-D arrays of the same length")
        if np.any(np.diff(self.sens) <= 0) or self.sens[0] < 0 or self.sens[-1] <= 0 or np.any(self.weights <= 0):
            raise DPValueError(
                "sensitivities must be sorted, distinct, >= 0 with a positive one; weights > 0 "
                "(use GaussianMixtureMechanism, which normalises its input)"
            )
        self.log_w = np.log(self.weights)
        zero = self.sens[0] == 0.0
        self.W0 = float(self.weights[0]) if zero else 0.0
        self.log_W0 = math.log(self.W0) if zero else -math.inf
        self.pos = slice(1, None) if zero else slice(None)
        self.s_pos = self.sens[self.pos]
        self.lw_pos = self.log_w[self.pos]
        self.log_1m_W0 = math.log1p(-self.W0)
        self._cache_key = None
        self._cache_val = None

    def __repr__(self) -> str:
        return (
            f"MixtureVsGaussianPair(sigma={self.sigma}, sensitivities={self.sens.tolist()}, "
            f"weights={self.weights.tolist()}, direction={self.direction!r})"
        )

    # densities ---------------------------------------------------------------------------------
    def _log_norm(self, x, m):
        s = self.sigma
        return -0.5 * ((x - m) / s) ** 2 - 0.5 * math.log(2 * math.pi) - math.log(s)

    def _log_mix(self, x):
        return special.logsumexp(self.log_w + self._log_norm(x[..., None], self.sens), axis=-1)

    def _L(self, x):
        """L(x) = log p_mix(x)/q_0(x) (the remove-direction loss)."""
        a = (x[..., None] * self.sens - 0.5 * self.sens**2) / self.sigma**2
        return special.logsumexp(self.log_w + a, axis=-1)

    def log_p(self, x):
        x = _as_array(x)
        out = self._log_mix(x) if self.direction == "remove" else self._log_norm(x, 0.0)
        return _maybe_scalar(out, x)

    def log_q(self, x):
        x = _as_array(x)
        out = self._log_norm(x, 0.0) if self.direction == "remove" else self._log_mix(x)
        return _maybe_scalar(out, x)

    def loss(self, x):
        x = _as_array(x)
        out = self._L(x) if self.direction == "remove" else -self._L(x)
        return _maybe_scalar(out, x)

    @property
    def loss_support(self) -> tuple[float, float]:
        if self.direction == "remove":
            return (self.log_W0, math.inf)
        return (-math.inf, -self.log_W0)

    def loss_quantile_range(self, tail: float) -> tuple[float, float]:
        """(lo, hi) with P[L < lo] <= tail and P[L > hi] <= tail, in closed form (slightly wide).

        L is increasing in x (remove; -L for add), and every mixture tail is at most the tail of its
        extreme component: ``sum_j w_j Phibar((x - s_j)/sigma) <= Phibar((x - s_K)/sigma)`` and
        ``sum_j w_j Phi((x - s_j)/sigma) <= Phi((x - s_1)/sigma)``. So with ``z = Phi^{-1}(1 - tail)`` the
        outputs ``s_K + sigma z`` and ``s_1 - sigma z`` (remove) or ``+-sigma z`` (add, X ~ N(0, sigma^2)) bound
        the loss quantiles.
        """
        z = -float(special.ndtri(tail))
        s = self.sigma
        if self.direction == "remove":
            xs = np.array([self.sens[0] - s * z, self.sens[-1] + s * z])
            lo, hi = (float(v) for v in self._L(xs))
            return max(lo, self.log_W0), hi
        xs = np.array([s * z, -s * z])
        lo, hi = (float(-v) for v in self._L(xs))
        return lo, min(hi, -self.log_W0)

    # threshold ---------------------------------------------------------------------------------
    def _threshold(self, e):
        """(x*, T) with L(x*) = e, T = log(e^e - W0); x* = -inf (and T = -inf) where e <= log W0.

        Vectorized Newton iteration on the convex increasing E(x) = logsumexp_{s_j>0}(log w_j + a_j(x))
        from the right end of the bracket, with a bisection safeguard (see the class docstring).
        """
        e = np.asarray(e, dtype=float)
        key = (e.shape, e.tobytes())
        if key == self._cache_key:
            return self._cache_val
        flat = e.ravel()
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.W0 > 0:
                T = log_diff_exp(flat, np.full_like(flat, self.log_W0))
                T = np.where(flat > self.log_W0, T, -np.inf)
            else:
                T = flat.copy()
        ok = np.isfinite(T)
        if np.any(np.isnan(flat)):
            raise DPValueError("epsilon must not be NaN")
        x = np.full(flat.shape, -np.inf)
        if np.any(ok):
            # tiny positive means (far below sigma) overflow the bracket; the bisection safeguard copes
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                xc = self._newton(T[ok])
            x[ok] = xc
        out = (x.reshape(e.shape), T.reshape(e.shape))
        self._cache_key, self._cache_val = key, out
        return out

    def _newton(self, t):
        """Solve E(x) = t (vectorized Newton from the right end of the bracket, bisection safeguard)."""
        s2 = self.sigma**2
        sK, lwK = self.s_pos[-1], self.lw_pos[-1]
        hi = (s2 * (t - lwK) + 0.5 * sK * sK) / sK
        lo = np.min((s2 * (t[:, None] - self.log_1m_W0) + 0.5 * self.s_pos**2) / self.s_pos, axis=1)
        lo = np.minimum(lo, hi)
        xc = hi.copy()
        active = np.ones(t.shape, dtype=bool)
        for _ in range(200):
            xa = xc[active]
            z = self.lw_pos + (xa[:, None] * self.s_pos - 0.5 * self.s_pos**2) / s2
            E = special.logsumexp(z, axis=1)
            pi = np.exp(z - E[:, None])
            dE = (pi @ self.s_pos) / s2
            F = E - t[active]
            # maintain the bracket: F >= 0 -> new hi, F < 0 -> new lo
            h_a, l_a = hi[active], lo[active]
            h_a = np.where(F >= 0, np.minimum(h_a, xa), h_a)
            l_a = np.where(F < 0, np.maximum(l_a, xa), l_a)
            step = F / dE
            xn = xa - step
            bad = ~((xn >= l_a) & (xn <= h_a)) | ~np.isfinite(xn)
            xn = np.where(bad, 0.5 * (l_a + h_a), xn)
            # stop when the step is at the rounding level of x or of F / E' (E carries ~ulp(|t|) noise)
            tol = 8 * np.finfo(float).eps * (np.maximum(1.0, np.abs(xa)) + (1.0 + np.abs(t[active])) / dE)
            done = (np.abs(xn - xa) <= tol) | (h_a - l_a <= tol) | (F == 0)
            hi[active], lo[active] = h_a, l_a
            xc[active] = xn
            idx = np.flatnonzero(active)
            active[idx[done]] = False
            if not active.any():
                break
        else:
            raise NumericalError("MixtureVsGaussianPair: the loss threshold did not converge")
        if np.any(np.isnan(xc)):
            raise NumericalError("MixtureVsGaussianPair: the loss threshold is not a number (degenerate means)")
        return xc

    def _x_eps(self, eps):
        eps = _as_array(eps)
        x, T = self._threshold(eps if self.direction == "remove" else -eps)
        return eps, x, T

    def _lse_ndtr(self, x, sign, which=slice(None)):
        """log sum_j w_j Phi(sign (x - s_j)/sigma) over the components ``which``."""
        z = sign * (x[..., None] - self.sens[which]) / self.sigma
        return special.logsumexp(self.log_w[which] + _log_ndtr(z), axis=-1)

    def log_sf_p(self, eps):
        eps, x, _ = self._x_eps(eps)
        if self.direction == "remove":
            out = self._lse_ndtr(x, -1.0)
        else:
            out = _log_ndtr(x / self.sigma)
        return _maybe_scalar(out, eps)

    def log_sf_q(self, eps):
        eps, x, _ = self._x_eps(eps)
        if self.direction == "remove":
            out = _log_ndtr(-x / self.sigma)
        else:
            out = self._lse_ndtr(x, 1.0)
        return _maybe_scalar(out, eps)

    def log_cdf_p(self, eps):
        eps, x, _ = self._x_eps(eps)
        if self.direction == "remove":
            out = self._lse_ndtr(x, 1.0)
        else:
            out = _log_ndtr(-x / self.sigma)
        return _maybe_scalar(out, eps)

    def log_delta(self, eps):
        eps, x, T = self._x_eps(eps)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if self.direction == "remove":
                a = self._lse_ndtr(x, -1.0, self.pos)
                b = T + _log_ndtr(-x / self.sigma)
                out = log_diff_exp(a, np.minimum(b, a))
                triv = np.isneginf(x)  # e^eps <= W0: {L > eps} is the whole line, delta = 1 - e^eps
                if np.any(triv):
                    out = np.where(triv, np.log(-np.expm1(np.minimum(eps, 0.0))), out)
            else:
                a = eps + T + _log_ndtr(x / self.sigma)
                b = eps + self._lse_ndtr(x, 1.0, self.pos)
                out = log_diff_exp(a, np.minimum(b, a))
                out = np.where(np.isneginf(x), -np.inf, out)  # eps >= -log W0: the loss never exceeds eps
        return _maybe_scalar(out, eps)

    def sample(self, n: int, rng: np.random.Generator, under: str = "p"):
        check_choice("under", under, ("p", "q"))
        mixture = (under == "p") == (self.direction == "remove")
        z = rng.standard_normal(n) * self.sigma
        if mixture:
            z = z + self.sens[rng.choice(self.sens.size, size=n, p=self.weights)]
        return z


class GaussianMixtureMechanism(Mechanism):
    r"""A scalar Gaussian mixture against N(0, sigma^2): ``P = sum_j w_j N(s_j, sigma^2)``, ``Q = N(0, sigma^2)``.

    ``pair("remove")`` is (P, Q), ``pair("add")`` is (Q, P) (:class:`MixtureVsGaussianPair`). The input is
    normalised: zero weights are dropped, equal sensitivities merged, weights renormalised (their sum
    must be 1 up to 1e-6). Requires ``s_j >= 0`` and at least one ``s_j > 0`` with positive weight.
    Equal mixtures compare and hash equal, so accountant ledgers merge repeated steps.
    """

    name = "gaussian-mixture"

    def __init__(self, sigma: float, sensitivities, weights):
        self.sigma = check_positive("sigma", sigma)
        s = np.atleast_1d(np.asarray(sensitivities, dtype=float))
        w = np.atleast_1d(np.asarray(weights, dtype=float))
        if s.ndim != 1 or s.size == 0:
            raise DPValueError(f"sensitivities must be a non-empty 1-D sequence, got shape {s.shape}")
        if w.shape != s.shape:
            raise DPValueError(f"weights must have the same length as sensitivities ({s.size}), got shape {w.shape}")
        if not np.all(np.isfinite(s)) or np.any(s < 0):
            raise DPValueError(f"sensitivities must be finite and >= 0, got {s.tolist()}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise DPValueError(f"weights must be finite and >= 0, got {w.tolist()}")
        tot = float(w.sum())
        if not abs(tot - 1.0) <= 1e-6:
            raise DPValueError(f"weights must sum to 1 (up to 1e-6), got sum {tot!r}")
        keep = w > 0
        uniq, inv = np.unique(s[keep], return_inverse=True)
        ww = np.bincount(inv, weights=w[keep], minlength=uniq.size)
        if uniq[-1] <= 0:
            raise DPValueError("sensitivities: at least one must be > 0 with a positive weight")
        self.sensitivities = uniq
        self.weights = ww / ww.sum()
        self.symmetric = uniq.size == 1  # a single Gaussian

    @property
    def params(self) -> dict:
        return {
            "sigma": self.sigma,
            "sensitivities": tuple(self.sensitivities.tolist()),
            "weights": tuple(self.weights.tolist()),
        }

    def pair(self, direction: str) -> PrivacyLossPair:
        return MixtureVsGaussianPair(
            self.sigma, self.sensitivities, self.weights, check_choice("direction", direction, DIRECTIONS)
        )


MECHANISM_NAMES = ("gaussian", "subsampled-gaussian", "laplace")
#: The parameters each named mechanism takes (besides ``sensitivity``).
_MECHANISM_PARAMETERS = {"gaussian": ("sigma",), "subsampled-gaussian": ("sigma", "q"), "laplace": ("scale",)}


def make_mechanism(
    name: str,
    *,
    sigma: float | None = None,
    q: float | None = None,
    scale: float | None = None,
    sensitivity: float = 1.0,
) -> Mechanism:
    """Build a mechanism by its command-line name, checking that its parameters are given.

    A parameter the named mechanism does not use (``q`` or ``scale`` for ``gaussian``, ``sigma`` or ``q``
    for ``laplace``, ``scale`` for ``subsampled-gaussian``) is refused, not ignored.
    """
    check_choice("mechanism", name, MECHANISM_NAMES)
    uses = _MECHANISM_PARAMETERS[name]
    for pname, value in (("sigma", sigma), ("q", q), ("scale", scale)):
        if value is not None and pname not in uses:
            hint = {
                "q": "; use mechanism subsampled-gaussian for Poisson subsampling",
                "scale": "; scale is the Laplace mechanism's parameter",
                "sigma": "; sigma is the Gaussian mechanisms' parameter",
            }[pname]
            raise DPValueError(f"{pname} is not a parameter of mechanism {name} (it takes {', '.join(uses)}){hint}")
    if name == "gaussian":
        if sigma is None:
            raise DPValueError("sigma is required for mechanism gaussian (sigma > 0)")
        return GaussianMechanism(sigma, sensitivity)
    if name == "subsampled-gaussian":
        if sigma is None or q is None:
            raise DPValueError("sigma and q are required for mechanism subsampled-gaussian (sigma > 0, q in (0, 1])")
        return SubsampledGaussianMechanism(sigma, q, sensitivity)
    if scale is None:
        raise DPValueError("scale is required for mechanism laplace (scale > 0)")
    return LaplaceMechanism(scale, sensitivity)
