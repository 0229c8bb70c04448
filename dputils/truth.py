r"""High-accuracy "truth" for delta(eps) and eps(delta) of composed privacy losses.

The privacy profile of :math:`L = \sum_j L_j` (independent, CGF :math:`K = \sum_j c_j K_j`) is the
inverse-Laplace (Bromwich) integral (Alghamdi et al. {cite}`alghamdi_spa`, eq. 35-37 and 48-49)

.. math:: \delta(\varepsilon) = \frac{1}{2\pi}\int_{-\infty}^{\infty} e^{F_\varepsilon(t + iy)}\, dy,
          \qquad F_\varepsilon(z) = K(z) - \varepsilon z - \log z - \log(1+z),

for any real :math:`t > 0`. We place the contour at the saddle point :math:`\hat t`, where the
integrand is non-oscillatory near :math:`y = 0` and decays like a Gaussian, so double precision
suffices (no mpmath). :math:`K(\hat t + iy) - K(\hat t) = \sum_j c_j \log \varphi_j(y)` with
:math:`\varphi_j` the characteristic function of the tilted loss :math:`L_{j,\hat t}`, computed from the
weighted-point laws of :mod:`dputils.cumulants` on a grid refined so that the oscillation
:math:`e^{iyL}` is resolved (closed form for the Gaussian). :math:`\varphi^{c}` is formed as
:math:`\exp(c \log\varphi)` with the principal logarithm, exact for integer counts.

The y-integral is a composite Gauss-Legendre rule on :math:`[0, Y]` (the integrand is Hermitian, so
:math:`\delta = \frac{1}{\pi}\int_0^\infty \mathrm{Re}\,e^{F}\,dy`), with :math:`Y` grown until the
integrand is below 1e-18 of its peak and the number of panels doubled until two successive values
agree to ``rtol``; otherwise :class:`NumericalError`. This is an exact representation evaluated
numerically, not an approximation: its accuracy is checked against closed forms (Gaussian), the
authors' 20-digit mpmath values, and dp_accounting's PLD in tests/test_truth.py.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy import optimize

from .cumulants import composed_cgf_derivatives, pair_key, tilted_points
from .errors import DPValueError, NumericalError, check_delta, check_epsilon

__all__ = ["truth_delta", "truth_log_delta", "truth_epsilon"]


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
        refine = 1.0
        if key[0] == "gm":
            _, sigma, _q, d, _ = key
            # resolve exp(i y L(x)): L'(x) <= d / sigma^2, grid step min(sigma, sigma^2/d)/(12 refine)
            refine = max(1.0, y_max * d / (sigma * sigma) * min(sigma, sigma * sigma / d) / (12.0 * 0.5))
        pts = tilted_points(pair, t, refine=refine)
        lw = pts.log_weights + t * pts.values
        lw = lw - lw.max()
        w = np.exp(lw)
        w = w / w.sum()
        keep = w > 1e-300
        w, L = w[keep], pts.values[keep]
        m = float(np.dot(w, L))
        c = L - m
        out = np.empty(y.shape, dtype=complex)
        for s in range(0, y.size, 256):
            yy = y[s:s + 256]
            out[s:s + 256] = np.exp(1j * np.outer(yy, c)) @ w
        with np.errstate(divide="ignore"):
            total += count * np.log(out)
    return total


def _integrand(ledger, t, eps, K1, y, y_max):
    # F(t+iy) - F(t) = sum c log phi(y) + i y (K'(t) - eps) - log(1 + iy/t) - log(1 + iy/(1+t))
    z = _char_logs(ledger, t, y, y_max) + 1j * y * (K1 - eps) - np.log1p(1j * y / t) - np.log1p(1j * y / (1.0 + t))
    return np.exp(z).real


def _gl_integral(f, a, b, panels: int, nodes: int = 24) -> float:
    u, w = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(a, b, panels + 1)
    mids = 0.5 * (edges[1:] + edges[:-1])
    half = 0.5 * (edges[1:] - edges[:-1])
    y = (mids[:, None] + half[:, None] * u[None, :]).ravel()
    ww = (half[:, None] * w[None, :]).ravel()
    return float(np.dot(ww, f(y)))


def truth_log_delta(ledger: Sequence[tuple[Any, int]], epsilon: float, rtol: float = 1e-10) -> tuple[float, float]:
    """(log delta(epsilon), relative error estimate) by the saddle-point contour integral."""
    from .accountants.spa import _ess_sup, saddle_point

    ledger = [(p, int(c)) for p, c in ledger]
    if not ledger:
        raise DPValueError("ledger must contain at least one (pair, count) entry")
    if any(pair_key(p)[0] == "laplace" for p, _ in ledger):
        # atoms make the characteristic function non-decaying: the contour integral is only
        # conditionally convergent and this quadrature does not apply
        raise DPValueError("truth: Laplace pairs (losses with atoms) are not supported; use the PLD accountant")
    eps = check_epsilon(epsilon)
    if eps >= _ess_sup(ledger) * (1 - 1e-12):
        return -math.inf, 0.0
    t = saddle_point(ledger, eps)
    d, _ = composed_cgf_derivatives(ledger, t, 2)
    K, K1, K2 = (float(v) for v in d)
    F0 = K - eps * t - math.log(t) - math.log1p(t)
    F2 = K2 + t**-2 + (1 + t) ** -2
    # grow Y until the integrand magnitude is negligible
    Y = 12.0 / math.sqrt(F2)
    for _ in range(30):
        mag = abs(_integrand(ledger, t, eps, K1, np.array([Y]), Y)[0])
        if mag < 1e-18:
            break
        Y *= 1.5
    else:
        raise NumericalError("truth: the contour integrand does not decay (too few compositions?)")
    f = lambda y: _integrand(ledger, t, eps, K1, y, Y)  # noqa: E731
    panels = 16
    prev = _gl_integral(f, 0.0, Y, panels)
    for _ in range(8):
        panels *= 2
        cur = _gl_integral(f, 0.0, Y, panels)
        rel = abs(cur - prev) / abs(cur) if cur != 0 else math.inf
        if rel < rtol:
            if cur <= 0:
                raise NumericalError("truth: non-positive contour integral")
            return F0 + math.log(cur / math.pi), rel
        prev = cur
    raise NumericalError(f"truth: contour quadrature did not converge (last relative change {rel:.2e})")


def truth_delta(ledger: Sequence[tuple[Any, int]], epsilon: float, rtol: float = 1e-10) -> float:
    """delta(epsilon) of the composition by the saddle-point contour integral (see module docstring)."""
    return math.exp(truth_log_delta(ledger, epsilon, rtol)[0])


def truth_epsilon(ledger: Sequence[tuple[Any, int]], delta: float, bracket: tuple[float, float] | None = None,
                  xtol: float = 1e-11) -> float:
    """epsilon(delta): root of log truth_delta(eps) = log delta (Brent), bracketed by the SPA bounds."""
    from .accountants.spa import spa_epsilon

    delta = check_delta(delta)
    ld = math.log(delta)
    if bracket is None:
        lo = spa_epsilon(ledger, delta, "lower")[0]
        hi = spa_epsilon(ledger, delta, "upper")[0]
    else:
        lo, hi = bracket
    g = lambda e: truth_log_delta(ledger, e)[0] - ld  # noqa: E731
    glo, ghi = g(lo), g(hi)
    for _ in range(20):
        if glo >= 0 >= ghi:
            break
        if glo < 0:
            lo = max(0.0, lo - max(0.05, lo * 0.1))
            glo = g(lo)
        if ghi > 0:
            hi = hi * 1.2 + 0.05
            ghi = g(hi)
    else:
        raise NumericalError(f"truth: could not bracket epsilon for delta={delta!r}")
    if glo == 0:
        return lo
    return float(optimize.brentq(g, lo, hi, xtol=xtol, rtol=1e-13))
