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

import argparse
import math
from abc import ABC, abstractmethod

import numpy as np
from scipy import special

from .errors import DPValueError, check_choice, check_positive, check_probability

DIRECTIONS = ("remove", "add")


def _log_ndtr(x):
    return special.log_ndtr(x)


def _log_diff_exp(a, b):
    """log(exp(a) - exp(b)) for a >= b, elementwise; -inf where a == b (or both -inf)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = b - a
        out = a + np.log(-np.expm1(np.minimum(d, 0.0)))
    out = np.where(np.isneginf(a) | (d >= 0), -np.inf, out)
    return out


class PrivacyLossPair(ABC):
    """One ordered pair (P, Q) of output distributions and its privacy loss L = log p/q.

    Subclasses implement the log-densities, the loss, the tails of L under P and Q and sampling.
    All methods are vectorized over their first argument and return numpy arrays (or floats for
    scalar input).
    """

    direction: str = "remove"

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
            # expand until fn(x) <= log_tail, then bisect
            a = start
            step = 1.0
            for _ in range(200):
                b = a + step_sign * step
                if fn(b) <= log_tail:
                    lo_, hi_ = (a, b) if step_sign > 0 else (b, a)
                    for _ in range(100):
                        m = 0.5 * (lo_ + hi_)
                        if (fn(m) <= log_tail) == (step_sign > 0):
                            hi_ = m
                        else:
                            lo_ = m
                    return hi_ if step_sign > 0 else lo_
                a = b
                step *= 2.0
            raise ArithmeticError("could not bracket the privacy-loss quantile")

        centre = float(np.clip(0.0, lo_s, hi_s)) if math.isfinite(lo_s) or math.isfinite(hi_s) else 0.0
        hi = hi_s if math.isfinite(hi_s) else find(lambda e: float(self.log_sf_p(e)), centre, +1)
        lo = lo_s if math.isfinite(lo_s) else find(lambda e: float(self.log_cdf_p(e)), centre, -1)
        return lo, hi


def _as_array(x):
    return np.asarray(x, dtype=float)


def _maybe_scalar(x, like):
    return float(x) if np.ndim(like) == 0 else x


class GaussianMixturePair(PrivacyLossPair):
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
        return f"GaussianMixturePair(sigma={self.sigma}, q={self.q}, sensitivity={self.sensitivity}, direction={self.direction!r})"

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
                lr = _log_diff_exp(e, np.full_like(e, self.log1m_q)) - self.log_q_
        u = lr / self.mu + self.mu / 2.0
        return eps, u

    def log_sf_p(self, eps):
        eps, u = self._u(eps)
        if self.direction == "remove":
            # P[x > x*] under the mixture
            out = np.logaddexp(self.log1m_q + _log_ndtr(-u), self.log_q_ + _log_ndtr(self.mu - u)) if self.q < 1 else _log_ndtr(self.mu - u)
        else:
            out = _log_ndtr(u)  # P = N(0, sigma^2): P[x < x*]
        return _maybe_scalar(out, eps)

    def log_sf_q(self, eps):
        eps, u = self._u(eps)
        if self.direction == "remove":
            out = _log_ndtr(-u)
        else:
            out = np.logaddexp(self.log1m_q + _log_ndtr(u), self.log_q_ + _log_ndtr(u - self.mu)) if self.q < 1 else _log_ndtr(u - self.mu)
        return _maybe_scalar(out, eps)

    def log_cdf_p(self, eps):
        eps, u = self._u(eps)
        if self.direction == "remove":
            out = np.logaddexp(self.log1m_q + _log_ndtr(u), self.log_q_ + _log_ndtr(u - self.mu)) if self.q < 1 else _log_ndtr(u - self.mu)
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
                out = _log_diff_exp(a, np.minimum(b, a))
                # trivial region e^eps <= 1-q: {L > eps} is everything, delta = 1 - e^eps
                triv = np.isneginf(u)
                if np.any(triv):
                    out = np.where(triv, np.log(-np.expm1(np.minimum(eps, 0.0))), out)
            else:
                a = eps + self.log_q_ + log_r + _log_ndtr(u)
                b = eps + self.log_q_ + _log_ndtr(u - mu)
                out = _log_diff_exp(a, np.minimum(b, a))
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


class GaussianMechanism(Mechanism):
    """Gaussian noise N(0, sigma^2) added to a query of L2 sensitivity ``sensitivity``."""

    name = "gaussian"
    symmetric = True

    def __init__(self, sigma: float, sensitivity: float = 1.0):
        self.sigma = check_positive("sigma", sigma)
        self.sensitivity = check_positive("sensitivity", sensitivity)

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "sensitivity": self.sensitivity}

    @property
    def mu(self) -> float:
        """The GDP parameter Delta / sigma."""
        return self.sensitivity / self.sigma

    def pair(self, direction: str) -> PrivacyLossPair:
        return GaussianMixturePair(self.sigma, 1.0, self.sensitivity, check_choice("direction", direction, DIRECTIONS))

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
        self.symmetric = self.q == 1.0

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "q": self.q, "sensitivity": self.sensitivity}

    def pair(self, direction: str) -> PrivacyLossPair:
        return GaussianMixturePair(self.sigma, self.q, self.sensitivity, check_choice("direction", direction, DIRECTIONS))

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


MECHANISM_NAMES = ("gaussian", "subsampled-gaussian", "laplace")


def make_mechanism(name: str, *, sigma: float | None = None, q: float | None = None, scale: float | None = None,
                   sensitivity: float = 1.0) -> Mechanism:
    """Build a mechanism by its command-line name, checking that its parameters are given."""
    check_choice("mechanism", name, MECHANISM_NAMES)
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


def mechanism_from_args(args: argparse.Namespace) -> Mechanism:
    """The mechanism described by the command-line options ``--mechanism --sigma --q --scale``."""
    return make_mechanism(args.mechanism, sigma=args.sigma, q=args.q, scale=args.scale,
                          sensitivity=getattr(args, "sensitivity", 1.0) or 1.0)
