r"""Privacy profiles of compositions by Fourier inversion of the moment generating function.

An independent "truth" for the Edgeworth chapter. For one direction with loss :math:`L = \log p/q` and
:math:`X \sim P`, the profile is :math:`\delta(\varepsilon) = \mathbb{E}_P[g_\varepsilon(L)]` with
:math:`g_\varepsilon(\ell) = (1 - e^{\varepsilon - \ell})_+`. Its two-sided Laplace transform is, for
:math:`\operatorname{Re}s > 0`,

.. math:: \int g_\varepsilon(\ell)\,e^{-s\ell}\,d\ell = \frac{e^{-s\varepsilon}}{s(s+1)},

so by the Bromwich inversion formula on the vertical line :math:`s = c + it`, :math:`c > 0`, and with
:math:`M(s) = \mathbb{E}_P e^{sL}` (the characteristic function continued to the complex plane),

.. math:: \delta(\varepsilon) = \frac1\pi\int_0^\infty \operatorname{Re}\Big[\frac{\prod_j M_j(c+it)^{m_j}\,
          e^{-(c+it)\varepsilon}}{(c+it)(c+1+it)}\Big]\,dt.

Composition multiplies the :math:`M_j`, so the cost does not depend on the number of compositions. We
put the contour through the saddle point, :math:`c` minimizing
:math:`\sum_j m_j\log M_j(c) - c\varepsilon - \log c(c+1)`, where the integrand does not oscillate and its
size is comparable with :math:`\delta` (no :math:`e^\varepsilon` amplification of errors, unlike plain
Gil-Pelaez inversion of the two CDFs). :math:`M_j(c+it)/M_j(c)` is the characteristic function of the
tilted loss; it is evaluated by composite Gauss-Legendre quadrature over the output :math:`x`, with panels
refined until each carries at most a few radians of phase :math:`tL(x)`, and :math:`\log` of it through
:math:`\log(1 + \mathbb{E}[e^{itL}-1])` with :math:`e^{itL}-1 = -2\sin^2(tL/2) + i\sin tL` (no cancellation).
The t-integral is truncated where the integrand is below 1e-16 of its peak, and a second evaluation at
doubled resolution gives the error estimate that is returned with every value.

Limits: the method needs the characteristic function of the summed loss to decay. Losses with a
lattice part do not (the plain Laplace mechanism with its atoms at +-Delta/b, or a subsampled Gaussian
with p*m of order 1, where the sum is nearly compound Poisson): the truncation point then grows and
the evaluation becomes slow or raises :class:`~dputils.errors.NumericalError`. Use the PLD accountant there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from .errors import DPValueError, NumericalError, check_choice, check_delta, check_finite
from .mechanisms import Mechanism, PrivacyLossPair

__all__ = ["FourierProfile", "fourier_delta", "fourier_epsilon"]

_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)


def _gl(edges: np.ndarray, sub: np.ndarray | None = None):
    """Gauss-Legendre nodes on panels given by ``edges``; panel i split into ``sub[i]`` equal parts."""
    a, b = edges[:-1], edges[1:]
    if sub is not None:
        reps = np.maximum(sub.astype(int), 1)
        aa, bb = [], []
        for lo, hi, k in zip(a, b, reps):
            c = np.linspace(lo, hi, k + 1)
            aa.append(c[:-1])
            bb.append(c[1:])
        a, b = np.concatenate(aa), np.concatenate(bb)
    half = 0.5 * (b - a)
    x = (0.5 * (a + b))[:, None] + half[:, None] * _GL_X[None, :]
    w = half[:, None] * _GL_W[None, :]
    return x.ravel(), w.ravel()


def _loss(pair: PrivacyLossPair, x: np.ndarray) -> np.ndarray:
    """The privacy loss (the pair's own, cancellation-free formula)."""
    return np.asarray(pair.loss(x), dtype=float)


def _base_edges(pair: PrivacyLossPair, c: float) -> np.ndarray:
    if hasattr(pair, "sigma"):
        s, d = pair.sigma, pair.sensitivity
        lo, hi = -40 * s - 2 * (1 + c) * d, d + 40 * s + 2 * (1 + c) * d
        width = s / 2
        brk = [0.0, d]
    elif hasattr(pair, "scale"):
        b, d = pair.scale, pair.sensitivity
        lo, hi = -70 * b, d + 70 * b
        width = min(b / 2, d / 8)
        brk = [0.0, d]
    else:
        raise DPValueError(f"charfn: unsupported pair {pair!r}")
    pts = [lo, hi] + brk
    pts = np.unique(np.asarray(pts, dtype=float))
    out = []
    for a, b in zip(pts[:-1], pts[1:]):
        n = max(1, int(math.ceil((b - a) / width)))
        out.append(np.linspace(a, b, n + 1)[:-1])
    out.append([pts[-1]])
    return np.concatenate(out)


@dataclass
class _Tilted:
    """Law of L under P tilted by e^{cL}: nodes L_j, normalized weights w_j, and log M(c)."""

    L: np.ndarray
    w: np.ndarray
    log_mc: float
    var: float


def _tilted(pair: PrivacyLossPair, c: float, T: float, refine: int) -> _Tilted:
    edges = _base_edges(pair, c)
    # first pass: coarse nodes to find where the tilted mass lives and how fast the phase turns
    x, w = _gl(edges)
    lw = np.log(w) + pair.log_p(x) + c * _loss(pair, x)
    lw_panel = lw.reshape(-1, _GL_X.size).max(axis=1)
    Lp = _loss(pair, edges)
    dL = np.abs(np.diff(Lp))
    live = lw_panel > lw.max() - 60.0
    sub = np.where(live, np.ceil(T * dL / 4.0), 1.0) * refine
    if sub.sum() * _GL_X.size > 3_000_000:
        raise NumericalError(f"charfn: quadrature grid too large for t up to {T:g}")
    x, w = _gl(edges, sub)
    L = _loss(pair, x)
    lw = np.log(w) + pair.log_p(x)
    log_norm = logsumexp(lw)  # quadrature of the density itself (= 0 up to rounding)
    lt = lw + c * L
    log_mc = float(logsumexp(lt) - log_norm)
    wt = np.exp(lt - logsumexp(lt))
    keep = wt > 1e-32
    L, wt = L[keep], wt[keep]
    wt = wt / wt.sum()
    mean = float(np.dot(wt, L))
    var = float(np.dot(wt, (L - mean) ** 2))
    return _Tilted(L=L, w=wt, log_mc=log_mc, var=var)


def _log_ratio(tl: _Tilted, t: np.ndarray, chunk: int = 2_000_000) -> np.ndarray:
    """log E_tilted[e^{itL}] for an array of t, with log(1 + z) evaluated without cancellation."""
    out = np.empty(t.size, dtype=complex)
    step = max(1, chunk // max(tl.L.size, 1))
    for i in range(0, t.size, step):
        tt = t[i : i + step, None]
        ph = tt * tl.L[None, :]
        re = -2.0 * np.sin(0.5 * ph) ** 2 @ tl.w
        im = np.sin(ph) @ tl.w
        # log(1 + re + i im)
        mod2 = np.log1p(2 * re + re * re + im * im) * 0.5
        ang = np.arctan2(im, 1.0 + re)
        out[i : i + step] = mod2 + 1j * ang
    return out


class FourierProfile:
    r"""The privacy profile of one direction of a composition, by MGF inversion on a fixed contour.

    ``ledger`` is a list of ``(mechanism, count)``; ``c`` the abscissa of the contour (> 0). The
    integrand is precomputed on the t-grid, after which :meth:`delta` costs one matrix-vector product
    per epsilon. Accurate for epsilons near the saddle point of ``c`` (see :func:`fourier_delta`).
    """

    def __init__(self, ledger: list[tuple[Mechanism, int]], direction: str, c: float, refine: int = 1):
        self.direction = check_choice("direction", direction, ("remove", "add"))
        self.c = float(c)
        if not self.c > 0:
            raise DPValueError(f"c must be > 0, got {c!r}")
        pairs = [(m.pair(direction), int(k)) for m, k in ledger]
        # t range from the tilted variance (Gaussian decay exp(-t^2 v / 2) of |M(c+it)/M(c)|^m)
        pre = [(_tilted(p, self.c, 1.0, 1), k) for p, k in pairs]
        v = sum(k * tl.var for tl, k in pre)
        if not v > 0:
            raise NumericalError("charfn: zero variance of the tilted loss")
        T = 12.0 / math.sqrt(v)
        for _ in range(8):
            tls = [(_tilted(p, self.c, T, refine), k) for p, k in pairs]
            tail = sum(k * float(_log_ratio(tl, np.array([T]))[0].real) for tl, k in tls)
            if tail - math.log(max(T * self.c, 1.0)) < -37.0:  # tail of |integrand| below 1e-16 of its peak
                break
            T *= 1.6
        else:
            raise NumericalError("charfn: the characteristic function does not decay; cannot truncate")
        self.T = T
        n_pan = 40 * refine
        edges = np.unique(np.concatenate([np.linspace(0.0, T, n_pan + 1),
                                          [x for x in self.c * np.array([0.1, 0.3, 1.0, 3.0]) if x < T]]))
        self.t, self.wt = _gl(edges)
        self.log_m_c = sum(k * tl.log_mc for tl, k in tls)
        lr = sum(k * _log_ratio(tl, self.t) for tl, k in tls)
        s = self.c + 1j * self.t
        self._A = np.exp(lr) / (s * (s + 1.0))  # times exp(log_m_c - c eps - i t eps)

    def delta(self, eps) -> np.ndarray:
        """delta(eps) (array in, array out)."""
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        ph = np.exp(-1j * np.outer(e, self.t))
        vals = (ph * self._A[None, :]).real @ self.wt
        return vals * np.exp(self.log_m_c - self.c * e) / math.pi


def _log_m(ledger, direction: str, c: float) -> float:
    return sum(k * _tilted(m.pair(direction), c, 1.0, 1).log_mc for m, k in ledger)


def saddle_c(ledger, direction: str, eps: float) -> float:
    """The contour abscissa c minimizing sum m_j log M_j(c) - c eps - log(c (c + 1)) over (0, 60]."""
    f = lambda c: _log_m(ledger, direction, c) - c * eps - math.log(c * (c + 1.0))  # noqa: E731
    res = optimize.minimize_scalar(lambda u: f(math.exp(u)), bounds=(math.log(1e-4), math.log(60.0)), method="bounded",
                                   options={"xatol": 1e-3})
    return float(math.exp(res.x))


def _ledger(mechanisms) -> list[tuple[Mechanism, int]]:
    if isinstance(mechanisms, Mechanism):
        return [(mechanisms, 1)]
    return [(m, int(k)) for m, k in mechanisms]


def fourier_delta(ledger, eps: float, direction: str = "both", check: bool = True) -> tuple[float, float]:
    """(delta(eps), error estimate) by MGF inversion through the saddle point (max over directions)."""
    eps = check_finite("eps", eps)
    led = _ledger(ledger)
    dirs = ("remove", "add") if direction == "both" else (check_choice("direction", direction, ("remove", "add")),)
    best, err = -math.inf, 0.0
    for d in dirs:
        c = saddle_c(led, d, eps)
        v = float(FourierProfile(led, d, c).delta(eps)[0])
        e = abs(float(FourierProfile(led, d, c, refine=2).delta(eps)[0]) - v) if check else 0.0
        if v > best:
            best, err = v, e
    return best, err


def fourier_epsilon(ledger, delta: float, direction: str = "both", eps_guess: float = 1.0,
                    tol: float = 1e-9, check: bool = True) -> tuple[float, float]:
    """(epsilon(delta), error estimate): the root of the inverted profile, max over directions.

    Two passes per direction: a contour through the saddle of ``eps_guess``, then through the saddle of
    the first root. The error estimate is the change of the root under doubled resolution.
    """
    delta = check_delta(delta)
    led = _ledger(ledger)
    dirs = ("remove", "add") if direction == "both" else (check_choice("direction", direction, ("remove", "add")),)
    out, err = 0.0, 0.0
    for d in dirs:
        e0 = max(float(eps_guess), 0.05)
        root = None
        for _ in range(2):
            c = saddle_c(led, d, e0)
            prof = FourierProfile(led, d, c)
            root = _root(prof, delta, e0, tol)
            if root is None:
                break
            e0 = max(root, 0.05)
        if root is None:
            root, e = 0.0, 0.0
        elif check:
            prof2 = FourierProfile(led, d, saddle_c(led, d, e0), refine=2)
            r2 = _root(prof2, delta, e0, tol)
            e = max(abs((r2 or 0.0) - root), tol)  # never below the root-finding tolerance
        else:
            e = 0.0
        if root > out:
            out, err = root, e
    return out, err


def _root(prof: FourierProfile, delta: float, guess: float, tol: float) -> float | None:
    """Smallest eps >= 0 with delta(eps) <= delta, or None when delta(0) <= delta."""
    f = lambda e: float(prof.delta(e)[0]) - delta  # noqa: E731
    if f(0.0) <= 0:
        return None
    lo, hi = 0.0, max(guess, 0.1)
    while f(hi) > 0:
        lo, hi = hi, hi * 1.5
        if hi > 1e4:
            raise NumericalError("charfn: cannot bracket epsilon")
    return float(optimize.brentq(f, lo, hi, xtol=tol, rtol=1e-14))
