r"""High-accuracy "truth" for delta(eps) and eps(delta) of composed privacy losses (the book's one truth evaluator).

The privacy profile of :math:`L = \sum_j L_j` (independent, CGF :math:`K = \sum_j c_j K_j`) is
:math:`\delta(\varepsilon) = \mathbb{E}_P[(1 - e^{\varepsilon - L})_+]`. The two-sided Laplace transform of
:math:`g_\varepsilon(\ell) = (1 - e^{\varepsilon - \ell})_+` is :math:`e^{-z\varepsilon}/(z(1+z))` for
:math:`\operatorname{Re} z > 0`, so by Bromwich inversion (Alghamdi et al. {cite}`alghamdi_spa`, eq. 35-37
and 48-49)

.. math:: \delta(\varepsilon) = \frac{1}{2\pi}\int_{-\infty}^{\infty} e^{F_\varepsilon(t + iy)}\, dy,
          \qquad F_\varepsilon(z) = K(z) - \varepsilon z - \log z - \log(1+z),

for any real :math:`t > 0`. Composition adds the CGFs, so the cost does not depend on the counts. We
place the contour at the saddle point :math:`\hat t` (:func:`dputils.accountants.spa.saddle_point`), where the
integrand is non-oscillatory near :math:`y = 0` and decays like a Gaussian, and its size is comparable with
:math:`\delta` (no :math:`e^\varepsilon` amplification of errors, unlike Gil-Pelaez inversion of the two
distribution functions of Eq. (3.1) of {cite}`wang_edgeworth`), so double precision suffices (no mpmath).
:math:`K(\hat t + iy) - K(\hat t) = \sum_j c_j \log \varphi_j(y)` with :math:`\varphi_j` the characteristic
function of the tilted loss :math:`L_{j,\hat t}`, computed from the weighted-point laws of
:mod:`dputils.cumulants` with panels fine enough to resolve :math:`e^{iyL}` up to the truncation point
(closed form for the Gaussian). :math:`\varphi^{c}` is formed as :math:`\exp(c \log\varphi)` with the principal
logarithm, exact for integer counts.

The y-integral is a composite Gauss-Legendre rule on :math:`[0, Y]` (the integrand is Hermitian, so
:math:`\delta = \frac{1}{\pi}\int_0^\infty \mathrm{Re}\,e^{F}\,dy`), with :math:`Y` grown until the
integrand is below 1e-18 of its peak on :math:`[Y, 2Y]` and the number of panels doubled until two
successive values agree to ``rtol``; otherwise :class:`NumericalError`. This is an exact representation
evaluated numerically, not an approximation: its accuracy is checked against closed forms (Gaussian), the
authors' 20-digit mpmath values, and dp_accounting's PLD in tests/test_truth.py.

Losses with atoms (Laplace, subsampled Laplace) are supported: :math:`g_\varepsilon` is continuous, so the
inversion is exact for them too, but their characteristic function does not decay (it keeps the atoms'
mass :math:`A` in modulus, and the composition :math:`A^{c}`). With few compositions the integrand then does not
fall below 1e-18 at any :math:`Y` and :class:`NumericalError` is raised; use the PLD accountant there.

Entry points: :func:`truth_delta`, :func:`truth_log_delta`, :func:`truth_epsilon` for one direction given as a
ledger of ``(pair, count)``; :func:`composition_delta`, :func:`composition_epsilon` for a ledger of
``(mechanism, count)``, the larger of the two directions (Lemma 3.3 of {cite}`wang_edgeworth`), each with an
error estimate. :func:`hockey_stick_mpmath` is a slower reference of another kind: direct mpmath quadrature of
one pair's densities.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import integrate, optimize, stats
from scipy.special import logsumexp

from .accountants.spa import METHODS as SPA_METHODS
from .accountants.spa import ess_sup, saddle_point, spa_epsilon, spa_epsilon_methods
from .cumulants import composed_cgf_derivatives, pair_key, tilted_points
from .errors import DPValueError, NumericalError, check_choice, check_delta, check_epsilon, check_positive_int
from .mechanisms import SubsampledGaussianMechanism

__all__ = [
    "subsampled_gaussian_loss_moments_mpmath",
    "monte_carlo_tail",
    "truth_delta",
    "truth_log_delta",
    "truth_epsilon",
    "composition_delta",
    "composition_epsilon",
    "spa_accuracy_scan",
    "hockey_stick_mpmath",
    "subsampled_gaussian_logs_mpmath",
    "gaussian_pair_hockey_stick_mpmath",
    "subsampled_gaussian_profile_check",
    "subsampled_gaussian_erratum_means",
]


def _char_logs(ledger, t: float, y: np.ndarray, y_max: float) -> np.ndarray:
    """sum_j c_j log E[exp(i y (L_{j,t} - K_j'(t)))] for an array of y (principal logs)."""
    total = np.zeros(y.shape, dtype=complex)
    for pair, count in ledger:
        key = pair_key(pair)
        if key[0] == "gm" and key[2] == 1.0:
            _, sigma, _q, d, _ = key
            v = d * d / (sigma * sigma)  # tilted variance 2 eta
            total += count * (-0.5 * v * y * y)
            continue
        pts = tilted_points(pair, t, freq=y_max)  # panels resolve exp(i y L) for |y| <= y_max
        lw = pts.log_weights + t * pts.values
        lw = lw - lw.max()
        w = np.exp(lw)
        w = w / w.sum()
        keep = w > 1e-30  # the rest changes phi by less than 1e-26 (the decay threshold is 1e-18)
        w, L = w[keep], pts.values[keep]
        m = float(np.dot(w, L))
        c = L - m
        out = np.empty(y.shape, dtype=complex)
        for s in range(0, y.size, 256):
            yy = y[s : s + 256]
            out[s : s + 256] = np.exp(1j * np.outer(yy, c)) @ w
        with np.errstate(divide="ignore"):
            total += count * np.log(out)
    return total


def _gl_rule(a: float, b: float, panels: int, nodes: int = 24) -> tuple[np.ndarray, np.ndarray]:
    u, w = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(a, b, panels + 1)
    mids = 0.5 * (edges[1:] + edges[:-1])
    half = 0.5 * (edges[1:] - edges[:-1])
    return (mids[:, None] + half[:, None] * u[None, :]).ravel(), (half[:, None] * w[None, :]).ravel()


class _Contour:
    r"""The contour :math:`\operatorname{Re} z = t` with its quadrature in y, for one ledger.

    Precomputes :math:`G(y) = \exp\big(K(t+iy) - K(t) - \log(1 + iy/t) - \log(1 + iy/(1+t))\big)` on a composite
    Gauss-Legendre rule in y, so that :math:`\delta(\varepsilon) = e^{F_\varepsilon(t)}\pi^{-1}
    \int_0^Y \operatorname{Re}[G(y) e^{-iy\varepsilon}]\,dy` costs one dot product per epsilon. The
    truncation Y and the number of panels are set so that the value at ``eps0`` (for which ``t`` is the saddle
    point) has converged to ``rtol``; epsilons near ``eps0`` are then as accurate (used for root finding).
    """

    def __init__(self, ledger, t: float, eps0: float, rtol: float):
        d, _ = composed_cgf_derivatives(ledger, t, 2)
        self.t = t
        self.K, K1, K2 = (float(v) for v in d)
        F2 = K2 + t**-2 + (1 + t) ** -2
        # atoms keep |phi| from decaying: the mean of |phi_j(y)|^2 over large y is the sum A_j of the squared
        # tilted atom masses (Wiener), so by Jensen max |phi_j^c| >= A_j^(c/2) on long y-intervals. When every
        # summand has atoms and the product of these floors is above the threshold, fail fast.
        log_floor = 0.0
        for pair, count in ledger:
            pts = None if pair_key(pair)[0] == "gm" else tilted_points(pair, t)
            if pts is None or pts.n_atoms == 0:
                log_floor = -math.inf
                break
            lw = pts.log_weights + t * pts.values
            lw = lw - logsumexp(lw)
            log_floor += 0.5 * count * float(logsumexp(2.0 * lw[: pts.n_atoms]))
        if log_floor > math.log(1e-18):
            raise NumericalError(
                f"truth: the contour integrand does not decay: the atoms of the losses keep |phi|^count near "
                f"{math.exp(log_floor):.2g} (too few compositions of a Laplace-type mechanism; use the PLD accountant)"
            )
        # grow Y until the integrand magnitude is negligible on [Y, 2Y] (sampled: with atoms it oscillates)
        Y = 12.0 / math.sqrt(F2)
        for _ in range(30):
            ys = Y * np.linspace(1.0, 2.0, 9)
            mag = float(np.max(np.abs(self._G(ledger, ys, ys[-1], 0.0))))
            if mag < 1e-18:
                break
            Y *= 1.5
        else:
            raise NumericalError(
                "truth: the contour integrand does not decay (too few compositions, or a loss with "
                "heavy atoms such as the Laplace mechanism; use the PLD accountant)"
            )
        panels, prev = 16, None
        for _ in range(9):
            y, w = _gl_rule(0.0, Y, panels)
            G = self._G(ledger, y, Y, K1)
            cur = float(np.dot(w, (G * np.exp(-1j * y * eps0)).real))
            if prev is not None:
                rel = abs(cur - prev) / abs(cur) if cur != 0 else math.inf
                if rel < rtol:
                    if cur <= 0:
                        raise NumericalError("truth: non-positive contour integral")
                    self.y, self.w, self.G, self.rel = y, w, G, rel
                    return
            prev = cur
            panels *= 2
        raise NumericalError(f"truth: contour quadrature did not converge (last relative change {rel:.2e})")

    def _G(self, ledger, y, y_max, K1):
        t = self.t
        z = _char_logs(ledger, t, y, y_max) + 1j * y * K1 - np.log1p(1j * y / t) - np.log1p(1j * y / (1.0 + t))
        return np.exp(z)

    def log_delta(self, eps: float) -> float:
        """log delta(eps) on this contour (-inf where the quadrature gives a non-positive value)."""
        cur = float(np.dot(self.w, (self.G * np.exp(-1j * self.y * eps)).real))
        if not cur > 0:
            return -math.inf
        return self.K - eps * self.t - math.log(self.t) - math.log1p(self.t) + math.log(cur / math.pi)


def _checked_ledger(ledger) -> list[tuple[Any, int]]:
    ledger = [(p, int(c)) for p, c in ledger]
    if not ledger:
        raise DPValueError("ledger must contain at least one (pair, count) entry")
    return ledger


def truth_log_delta(ledger: Sequence[tuple[Any, int]], epsilon: float, rtol: float = 1e-10) -> tuple[float, float]:
    """(log delta(epsilon), relative error estimate) by the contour integral through the saddle point of epsilon."""

    ledger = _checked_ledger(ledger)
    eps = check_epsilon(epsilon)
    if eps >= ess_sup(ledger) * (1 - 1e-12):
        return -math.inf, 0.0
    c = _Contour(ledger, saddle_point(ledger, eps), eps, rtol)
    return c.log_delta(eps), c.rel


def truth_delta(ledger: Sequence[tuple[Any, int]], epsilon: float, rtol: float = 1e-10) -> float:
    """delta(epsilon) of the composition by the saddle-point contour integral (see module docstring)."""
    return math.exp(truth_log_delta(ledger, epsilon, rtol)[0])


def _bracket_root(g, lo: float, hi: float) -> tuple[float, float] | None:
    """Widen [lo, hi] until g(lo) >= 0 >= g(hi) (g decreasing); None when g(0) < 0 (the root is eps = 0)."""
    lo, hi = max(0.0, lo), max(hi, lo + 1e-9)
    for _ in range(60):
        if g(lo) >= 0:
            break
        if lo == 0.0:
            return None
        hi, lo = lo, max(0.0, lo - max(0.05, 0.2 * lo))
    for _ in range(60):
        if g(hi) <= 0:
            return lo, hi
        lo, hi = hi, 1.3 * hi + 0.05
    raise NumericalError("truth: could not bracket epsilon")


def _epsilon_with_error(ledger, delta: float, guess: float, xtol: float, rtol: float) -> tuple[float, float]:

    ld = math.log(delta)
    sup = ess_sup(ledger)
    root = max(guess, 1e-3)
    for _ in range(2):  # contour at the saddle of the guess, then at the saddle of the first root
        # a guess at or above the largest loss (a bounded direction, e.g. add for subsampled Gaussians, with a
        # guess taken from the other direction) has no saddle point: centre the contour below the supremum,
        # backing off until the tilt is finite; the bracket search below then finds the root from there
        for backoff in (1e-6, 1e-3, 1e-2, 0.05, 0.2, 0.5):
            e0 = min(root, sup * (1 - backoff))
            try:
                c = _Contour(ledger, saddle_point(ledger, e0), e0, rtol)
                break
            except NumericalError:
                if e0 < sup * (1 - backoff) or backoff == 0.5:
                    raise
        g = lambda e: max(c.log_delta(e), -1e4) - ld  # noqa: E731
        br = _bracket_root(g, 0.97 * root - 1e-3, 1.03 * root + 1e-3)
        if br is None:
            if truth_log_delta(ledger, 0.0, rtol)[0] <= ld:
                return 0.0, 0.0
            br = (0.0, max(root, 1e-3))  # the contour far from its centre misjudged eps = 0
        root = float(optimize.brentq(g, br[0], br[1], xtol=xtol, rtol=1e-13))
    # error: Brent's tolerance plus the quadrature's relative accuracy over |d log delta / d eps| = t
    return root, xtol + max(c.rel, 1e-13) / c.t


def truth_epsilon(
    ledger: Sequence[tuple[Any, int]], delta: float, bracket: tuple[float, float] | None = None, xtol: float = 1e-11
) -> float:
    """epsilon(delta): root of log delta(eps) = log delta (0 when delta(0) <= delta).

    The starting point is the middle of ``bracket`` or, by default, the SP-CLT estimate. Two passes: a
    contour through the saddle point of the starting point (on which Brent's method runs, one dot product
    per step), then one through the saddle point of that root.
    """

    delta = check_delta(delta)
    ledger = _checked_ledger(ledger)
    guess = spa_epsilon(ledger, delta, "clt")[0] if bracket is None else 0.5 * (bracket[0] + bracket[1])
    return _epsilon_with_error(ledger, delta, guess, xtol, 1e-10)[0]


# ------------------------------------------------------------------------------------------------
# ledgers of mechanisms: the larger profile of the two directions
# ------------------------------------------------------------------------------------------------
def _mechanism_ledger(mechanisms) -> list[tuple[Any, int]]:
    if hasattr(mechanisms, "pair"):
        return [(mechanisms, 1)]
    out = [(m, int(k)) for m, k in mechanisms]
    if not out:
        raise DPValueError("ledger must contain at least one (mechanism, count) entry")
    return out


def _directions(direction: str) -> tuple[str, ...]:
    if direction == "both":
        return ("remove", "add")
    return (check_choice("direction", direction, ("remove", "add")),)


def composition_delta(mechanisms, epsilon: float, direction: str = "both", rtol: float = 1e-10) -> tuple[float, float]:
    """(delta(epsilon), absolute error estimate) of a composition of mechanisms, the larger over the directions.

    ``mechanisms``: a mechanism or a list of ``(mechanism, count)``. The error estimate is delta times the
    relative change of the contour quadrature under the last doubling of its panels.
    """
    led = _mechanism_ledger(mechanisms)
    best, err = 0.0, 0.0
    for d in _directions(direction):
        ld, rel = truth_log_delta([(m.pair(d), k) for m, k in led], epsilon, rtol)
        v = math.exp(ld)
        if v > best:
            best, err = v, v * rel
    return best, err


def composition_epsilon(
    mechanisms,
    delta: float,
    direction: str = "both",
    eps_guess: float | None = None,
    xtol: float = 1e-11,
    rtol: float = 1e-10,
) -> tuple[float, float]:
    r"""(epsilon(delta), error estimate) of a composition of mechanisms, the larger over the directions.

    Per direction the root of the contour integral (see :func:`truth_epsilon`), started from ``eps_guess``
    (default: the SP-CLT estimate). Error estimate: ``xtol`` plus the quadrature's relative accuracy of
    delta divided by :math:`|d\log\delta/d\varepsilon| \approx \hat t` (the contour's tilt).
    """

    delta = check_delta(delta)
    led = _mechanism_ledger(mechanisms)
    best, err = 0.0, 0.0
    for d in _directions(direction):
        ledger = [(m.pair(d), k) for m, k in led]
        g = float(eps_guess) if eps_guess is not None else math.inf
        if not g < ess_sup(ledger):  # no guess, or one (from the other direction) beyond this direction's losses
            g = spa_epsilon(ledger, delta, "clt")[0]
        e, er = _epsilon_with_error(ledger, delta, g, xtol, rtol)
        if e >= best:
            best, err = e, er
    return best, err


def spa_accuracy_scan(pair: Any, counts: Sequence[int], delta: float) -> list[dict[str, Any]]:
    """Relative error in epsilon of each SPA variant against the contour-integral truth, for n in ``counts``.

    For each n: :func:`spa_epsilon_methods` of ``[(pair, n)]`` and the exact epsilon(delta) of
    :func:`truth_epsilon` (Bromwich inversion, eq. 48-49, started inside the certified
    bracket), plus ``rel_<method> = |eps_method / eps_truth - 1|`` (NaN for an undefined SP-MSD1). The
    truth must lie in the certified bracket; a truth outside it raises :class:`NumericalError`.
    """
    rows = []
    for n in counts:
        n = int(n)
        if n < 1:
            raise DPValueError(f"counts must be positive integers, got {n!r}")
        led = [(pair, n)]
        r = spa_epsilon_methods(led, delta)
        truth = truth_epsilon(led, delta, bracket=(r["lower"], r["upper"]))
        if not r["lower"] - 1e-9 <= truth <= r["upper"] + 1e-9:
            raise NumericalError(
                f"truth epsilon {truth!r} outside the certified bracket [{r['lower']!r}, {r['upper']!r}] at n={n}"
            )
        row = {"n": n, "truth": truth, **r}
        for k in SPA_METHODS:
            row["rel_" + k] = abs(r[k] / truth - 1) if math.isfinite(r[k]) else math.nan
        rows.append(row)
    return rows


def monte_carlo_tail(pair: Any, m: int, epsilon, n_samples: int, rng: np.random.Generator, under: str = "q"):
    r"""Monte Carlo estimate of :math:`\Pr[\sum_{i=1}^m L_i \ge \varepsilon]` for m i.i.d. one-step losses.

    Draws ``n_samples * m`` outputs from Q (``under="q"``) or P with ``rng``, sums the losses
    :math:`L = \log p/q` in groups of m and returns, for each ``epsilon``, the fraction of sums at or above it
    (an unbiased estimate, standard error :math:`\sqrt{f(1-f)/n}`). Used to check rigorous tail bounds such as
    Prop. 4.5 of Wang et al. at a small m, where the tails can be measured.
    """

    m = check_positive_int("m", m)
    n = check_positive_int("n_samples", n_samples)
    check_choice("under", under, ("p", "q"))
    sums = pair.loss(pair.sample(n * m, rng, under=under)).reshape(-1, m).sum(axis=1)
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    return (sums[:, None] >= eps[None, :]).mean(axis=0)


def subsampled_gaussian_loss_moments_mpmath(sigma: float, q: float, dps: int = 30) -> dict[str, float]:
    r"""Mean, variance and :math:`\mathbb{E}|L - \mathbb{E}L|^3` of one subsampled-Gaussian step's loss, by mpmath.

    The remove pair with the mixture first (Alghamdi et al., eq. 98):
    :math:`L = \log(1 - q + q\,e^{(2Y-1)/(2\sigma^2)})`, :math:`Y \sim (1-q)N(0,\sigma^2) + qN(1,\sigma^2)`,
    integrated at ``dps`` digits over panels split at :math:`\pm 10\sigma`, 0, 1/2, 1 and, for the absolute
    third moment, where :math:`L` crosses its mean (the kink of :math:`|x|^3`). An independent reference for
    :mod:`dputils.cumulants` (a different quadrature in a different precision).
    """
    import mpmath as mp

    with mp.workdps(int(dps)):
        s_, q_ = mp.mpf(sigma), mp.mpf(q)

        def loss(y):
            return mp.log(1 - q_ + q_ * mp.exp((2 * y - 1) / (2 * s_**2)))

        def dens(y):
            return (1 - q_) * mp.npdf(y, 0, s_) + q_ * mp.npdf(y, 1, s_)

        cuts = [-mp.inf, -10 * s_, 0, mp.mpf(0.5), 1, 10 * s_ + 1, mp.inf]
        m1 = mp.quad(lambda y: loss(y) * dens(y), cuts)
        m2 = mp.quad(lambda y: (loss(y) - m1) ** 2 * dens(y), cuts)
        y_mid = mp.findroot(lambda y: loss(y) - m1, 0.5)
        m3 = mp.quad(lambda y: abs(loss(y) - m1) ** 3 * dens(y), [-mp.inf, *sorted(cuts[1:-1] + [y_mid]), mp.inf])
        return {"mean": float(m1), "var": float(m2), "abs3": float(m3)}


def hockey_stick_mpmath(log_p, log_q, epsilon, window: tuple[float, float], grid: int = 2001, dps: int = 40):
    r"""The hockey-stick divergence :math:`\int (p - e^\varepsilon q)_+` of two densities by mpmath quadrature,
    an independent reference for the closed-form privacy profiles of :mod:`dputils.mechanisms`.

    ``log_p`` and ``log_q`` map an mpmath number to the log-density. The integrand's sign changes are
    located on ``grid`` points spanning ``window`` (``mp.findroot``, Anderson's method); the real line is
    split there (a crossing that falls on a grid point included) and the positive pieces are integrated by ``mp.quad`` at ``dps`` digits. Sign changes
    outside ``window`` are missed, so the window must hold every crossing. Returns an mpmath number."""
    import mpmath as mp

    with mp.workdps(dps):
        eps = mp.mpf(float(epsilon))

        def f(x):
            return mp.e ** log_p(x) - mp.e ** (eps + log_q(x))

        xs = np.linspace(window[0], window[-1], grid)
        vals = [float(f(mp.mpf(x))) for x in xs]
        brk = [
            mp.findroot(f, (xs[i], xs[i + 1]), solver="anderson")
            for i in range(len(xs) - 1)
            if vals[i] * vals[i + 1] < 0 or (vals[i + 1] == 0 and vals[i] != 0)  # a crossing on the grid too
        ]
        edges = [-mp.inf, *brk, mp.inf]
        total = mp.mpf(0)
        for a, b in zip(edges[:-1], edges[1:]):
            if mp.isfinite(a) and mp.isfinite(b):
                mid = (a + b) / 2
            else:
                mid = b - 1 if mp.isfinite(b) else (a + 1 if mp.isfinite(a) else 0)
            if f(mid) > 0:
                total += mp.quad(f, [a, mid, b])
        return total


def subsampled_gaussian_logs_mpmath(sigma: float, q: float):
    """The log-densities (mpmath) of one step of the Poisson-subsampled Gaussian with sensitivity 1:
    ``(log p, log q)`` of the mixture ``(1 - q) N(0, sigma^2) + q N(1, sigma^2)`` and of ``N(0, sigma^2)``
    (the remove direction; swap them for add), for :func:`hockey_stick_mpmath`."""
    import mpmath as mp

    s, qq = mp.mpf(sigma), mp.mpf(q)

    def base(x):
        return mp.log(mp.npdf(x, 0, s))

    def mix(x):
        return mp.log((1 - qq) * mp.npdf(x, 0, s) + qq * mp.npdf(x, 1, s))

    return mix, base


def subsampled_gaussian_profile_mpmath(sigma: float, q: float, direction: str, epsilon: float, dps: int = 40) -> float:
    r"""The privacy profile :math:`\delta(\varepsilon) = \int (p - e^\varepsilon q)_+` of one step of the
    Poisson-subsampled Gaussian (sensitivity 1) by mpmath quadrature at ``dps`` digits, from the densities alone.

    ``direction="remove"``: :math:`p = (1-q)N(0,\sigma^2) + qN(1,\sigma^2)`, :math:`q = N(0,\sigma^2)`; ``"add"``:
    the pair reversed (:func:`subsampled_gaussian_logs_mpmath`). The crossings of the integrand are searched in
    the window :math:`[-12\sigma, 12\sigma + 1]` (:func:`hockey_stick_mpmath`). An independent reference for the
    closed-form profiles of :mod:`dputils.mechanisms` (which go through :math:`\log\Phi`)."""
    check_choice("direction", direction, ("remove", "add"))
    mix, base = subsampled_gaussian_logs_mpmath(sigma, q)
    lp, lq = (mix, base) if direction == "remove" else (base, mix)
    return float(hockey_stick_mpmath(lp, lq, epsilon, (-12 * sigma, 12 * sigma + 1), dps=dps))


def monte_carlo_profile(pair: Any, steps: int, epsilons, n_samples: int, rng: np.random.Generator):
    r"""Monte Carlo estimate of the profile of ``steps`` compositions of ``pair``,
    :math:`\delta(\varepsilon) = \mathbb{E}_P[(1 - e^{\varepsilon - L})_+]` with :math:`L` the sum of ``steps``
    independent one-step losses drawn under P (``pair.sample_loss``, ``n_samples`` sums, drawn step by step from
    ``rng``). Returns ``(estimates, standard_errors)``, arrays over ``epsilons``: the sample mean of the weights
    :math:`(1 - e^{\varepsilon - L})_+ \in [0, 1]` and its standard error (sample standard deviation over
    :math:`\sqrt n`)."""

    n = check_positive_int("n_samples", n_samples)
    total = np.zeros(n)
    for _ in range(check_positive_int("steps", steps)):
        total += pair.sample_loss(n, rng)
    est, se = [], []
    for e in np.atleast_1d(np.asarray(epsilons, dtype=float)):
        w = -np.expm1(np.minimum(e - total, 0.0))
        est.append(w.mean())
        se.append(w.std(ddof=1) / math.sqrt(n))
    return np.array(est), np.array(se)


def gaussian_pair_hockey_stick_mpmath(
    epsilon: float, mu_p: float, sigma_p: float, mu_q: float, sigma_q: float, dps: int = 30
) -> float:
    r"""The hockey-stick divergence :math:`H_{e^\varepsilon}(P\|Q) = \int (p - e^\varepsilon q)_+` of two
    Gaussians :math:`P = N(\mu_p, \sigma_p^2)`, :math:`Q = N(\mu_q, \sigma_q^2)` by mpmath quadrature at
    ``dps`` digits: the independent reference of the Gaussian-pair delta (Lemma 1 and Eq. (1) of
    {cite}`gauss_audit`, :func:`dputils.audit.log_delta_directed`).

    The log-ratio :math:`\log p(x) - \log q(x) - \varepsilon = A x^2 + B x + c` is quadratic with
    :math:`A = (1/\sigma_q^2 - 1/\sigma_p^2)/2`, :math:`B = \mu_p/\sigma_p^2 - \mu_q/\sigma_q^2`,
    :math:`c = (\mu_q^2/\sigma_q^2 - \mu_p^2/\sigma_p^2)/2 + \log(\sigma_q/\sigma_p) - \varepsilon`, so the
    integrand changes sign only at its real roots; the real line is split there and
    :math:`\max(p - e^\varepsilon q, 0)` is integrated piecewise by ``mp.quad``. Returns a float."""
    import mpmath as mp

    for name, s in (("sigma_p", sigma_p), ("sigma_q", sigma_q)):
        if not (math.isfinite(s) and s > 0):
            raise DPValueError(f"{name} must be a finite positive number, got {s!r}")
    eps = float(epsilon)
    A = (1 / sigma_q**2 - 1 / sigma_p**2) / 2
    B = mu_p / sigma_p**2 - mu_q / sigma_q**2
    c = (mu_q**2 / sigma_q**2 - mu_p**2 / sigma_p**2) / 2 + math.log(sigma_q / sigma_p) - eps
    roots = sorted(np.roots([A, B, c]).real) if B * B - 4 * A * c > 0 else []
    with mp.workdps(dps):

        def f(x):
            return max(mp.npdf(x, mu_p, sigma_p) - mp.e**eps * mp.npdf(x, mu_q, sigma_q), 0)

        return float(mp.quad(f, [-mp.inf, *roots, mp.inf]))


def subsampled_gaussian_profile_check(mechanism: Any, sigma: float, q: float, n_points: int):
    r"""One step of the Poisson-subsampled Gaussian ``mechanism`` (noise ``sigma``, rate ``q``): its closed-form
    privacy profile (``mechanism.pair(direction).delta``) against mpmath quadrature of the densities
    (:func:`subsampled_gaussian_profile_mpmath`, 40 digits) at ``n_points`` values of epsilon per direction:
    from -0.2 to 2 for remove, and to :math:`-0.9\log(1 - q)` for add, whose loss never exceeds
    :math:`-\log(1 - q)` (beyond it :math:`\delta = 0`).

    Returns the rows ``(direction, epsilon, closed form, mpmath)`` and the largest relative difference
    :math:`|\delta - \delta_{mp}|/\delta_{mp}` over the points where the mpmath delta exceeds 1e-300."""
    n_points = check_positive_int("n_points", n_points)
    eps_check = {"remove": np.linspace(-0.2, 2.0, n_points), "add": np.linspace(-0.2, -0.9 * math.log1p(-q), n_points)}
    worst_rel, rows = 0.0, []
    for direction in ("remove", "add"):
        for e in eps_check[direction]:
            ref = subsampled_gaussian_profile_mpmath(sigma, q, direction, e, dps=40)
            ours = float(mechanism.pair(direction).delta(e))
            rel = abs(ours - ref) / ref if ref > 0 else abs(ours)
            worst_rel = max(worst_rel, rel if ref > 1e-300 else 0.0)
            rows.append((direction, e, ours, ref))
    return rows, worst_rel


def subsampled_gaussian_erratum_means(sigma: float = 0.8, q: float = 0.01) -> tuple[float, float]:
    r""":math:`\mathbb{E}[e^{-Y}]`, with :math:`Y = \log(dQ/dP)(\zeta)` and :math:`P = N(0, s^2)`, for
    :math:`\zeta` drawn from the law the book uses, :math:`Q = (1-p)N(0, s^2) + pN(1, s^2)` (the add pair of
    the Poisson-subsampled Gaussian, Wang et al.'s pair (1)), and from the law Wang et al. print,
    :math:`pN(0, s^2) + (1-p)N(1, s^2)`; ``s = sigma``, ``p = q``, by adaptive quadrature on [-40, 40].

    Under Q the identity :math:`\mathbb{E}_Q[e^{-Y}] = \int dP = 1` holds, so the first mean is 1 up to the
    quadrature error and the second is not: the check that the printed law is a typo."""
    pair1 = SubsampledGaussianMechanism(sigma, q).pair("add")
    s_, p_ = pair1.sigma, pair1.q
    laws = (
        lambda x: math.exp(pair1.log_q(x)),
        lambda x: p_ * stats.norm.pdf(x, 0, s_) + (1 - p_) * stats.norm.pdf(x, 1, s_),
    )
    m_ok, m_typo = (
        integrate.quad(lambda x: law(x) * math.exp(pair1.log_p(x) - pair1.log_q(x)), -40, 40, points=[0, 1], limit=200)[
            0
        ]
        for law in laws
    )
    return m_ok, m_typo
