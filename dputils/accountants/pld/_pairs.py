"""The pairing of one direction's compositions: the upper and lower composed PMFs, the Chernoff quantile of
the rounding errors that corrects the lower one, and the FFT power as a second certificate of a spectral
composition. Both composition kinds are used through :class:`CertifiedComposition` alone."""

from __future__ import annotations

import math

import numpy as np

from ...errors import NumericalError
from ._compose import _compose
from ._discretise import DiscretePLD
from ._interface import CertifiedComposition

_ETA_FACTORS = np.array([0.3, 0.1, 1e-2, 1e-3, 1e-5])  # eta relative to the target delta
_ETAS_ABS = np.logspace(-24, -2, 12)  # eta grid for get_delta

#: Spectral compositions with windows up to this many points get the FFT power of the same PMFs as a second
#: certificate where they need one (see :class:`_DirectionPLD`); the FFT power is built on first need.
_BOTH_WINDOW = 1 << 17
#: A query needs the second certificate when the spectral composition refuses it or when its own rounding width
#: at the query exceeds this fraction of the answer. The spectral path is almost always the tighter one; the
#: FFT power was tighter (by ~1e-6 relative in epsilon) where the spectral width was 3e-4 of delta (atlas point
#: sigma 4, q 0.01, T 100, delta 1e-10), and the benchmark's widths are 1e-8..5e-8 of delta.
_PAIR_RATIO = 1e-5

#: sub-grid of the rounding errors in [0, h] for their moment-generating function (see _log_mgf_errors)
_ERR_BINS = 8192


def _log_mgf_errors(m: np.ndarray, e: np.ndarray, h: float, lam: np.ndarray) -> np.ndarray:
    r"""An upper bound on :math:`\log \sum_i m_i e^{-\lambda e_i}` for each lam, for rounding errors e_i in [0, h].

    Each e_i lies in a cell [a_k, a_k + 3 delta] of a grid a_k = k delta, delta = h / ``_ERR_BINS``, with
    k = floor(e_i / delta) - 1 (clipped at 0; the -1 and the width 3 delta absorb the rounding of e_i / delta). On a
    cell the convex :math:`e^{-\lambda x}` lies below its chord, :math:`e^{-\lambda (a + x)} \le e^{-\lambda a}
    (1 - c x / (3\delta))` with :math:`c = 1 - e^{-3\lambda\delta}` for x in [0, 3 delta], so
    :math:`\sum_i m_i e^{-\lambda e_i} \le \sum_k e^{-\lambda a_k} (W_k - c X_k / (3\delta))`, W_k and X_k the
    cell's mass and mass-weighted offset (X_k shrunk by 1e-9 against its rounding: only ever a larger bound). A
    larger MGF gives a smaller s_eta, so the quantile stays a lower one; the chord is exact at both cell ends,
    so it is within a hair of the exact sum, at ``_ERR_BINS`` + 1 exponentials per lam instead of one per
    grid point (the largest single cost of a small-T query before).
    """
    delta = h / _ERR_BINS
    k = np.clip(np.floor(e / delta) - 1.0, 0.0, _ERR_BINS).astype(np.int64)
    W = np.bincount(k, weights=m, minlength=_ERR_BINS + 1)
    X = np.bincount(k, weights=m * np.maximum(e - k * delta, 0.0), minlength=_ERR_BINS + 1) * (1.0 - 1e-9)
    a = np.arange(_ERR_BINS + 1) * delta
    keep = W > 0
    W, X, a = W[keep], X[keep], a[keep]
    out = np.empty(lam.size)
    for r, lm in enumerate(lam):
        c = -math.expm1(-3.0 * lm * delta)
        terms = np.maximum(W - c * X / (3.0 * delta), 0.0)
        with np.errstate(divide="ignore"):
            lt = np.log(terms) - lm * a
        mx = float(lt.max())
        out[r] = mx + math.log(float(np.exp(lt - mx).sum())) if np.isfinite(mx) else -math.inf
    return out


class _DirectionPLD:
    """The upper and lower composed PMFs of one direction, plus the rounding-error MGF.

    ``up``/``down`` are the compositions of the upper and lower PMFs (spectral or FFT power, see
    :func:`_compose`), used through the :class:`CertifiedComposition` interface. A spectral one on a window of at most ``_BOTH_WINDOW`` points gets the FFT power of
    the same PMFs as a second certificate for a query where it refuses or where its own rounding width
    exceeds ``_PAIR_RATIO`` of the answer; the bound is then the better of the two (a minimum of upper bounds,
    a maximum of lower bounds). Whether the FFT power is used depends on the query alone, never on earlier
    queries (it is only built once): the same question always gets the same answer. Built on first need, the
    FFT power costs no memory in the common case.
    """

    def __init__(
        self,
        parts: list[tuple[DiscretePLD, int]],
        window_tail: float,
        spectral: bool = True,
        tilt: float = 0.0,
        prefer_fft: bool = False,
    ):
        self._window_tail = window_tail
        self.tilt = tilt
        self.up = _compose(parts, "upper", window_tail, spectral, tilt, prefer_fft)
        self.down = _compose(parts, "lower", window_tail, spectral, tilt, prefer_fft)
        self._fft: dict[str, CertifiedComposition] = {}
        # the single-step PMFs are kept only where an FFT power may still be built from them
        self._parts = parts if self._pairable("upper") or self._pairable("lower") else None
        # s_eta: a lower quantile of the summed rounding errors. Chernoff:
        # P[sum e <= s] <= exp(log M(-lam) + lam s), log M(-lam) = sum_c c log E[exp(-lam e)].
        # Mass outside the lower atoms (dropped bottom bin, infinity) is given error 0, the smallest
        # possible value, which keeps the bound valid.
        lam = np.logspace(-1, 7, 40) / parts[0][0].h
        logM = np.zeros_like(lam)
        for d, c in parts:
            m = d.lower
            pos = m > 0
            rest = max(0.0, 1.0 - float(m[pos].sum()))
            lse = _log_mgf_errors(m[pos], d.lower_err[pos], d.h, lam)
            logM += c * np.minimum(np.logaddexp(lse, math.log(rest)) if rest > 0 else lse, 0.0)
        self._lam = lam
        self._logM = logM
        self._hint: dict[float, float] = {}
        self._last_hint: float | None = None

    def s_eta(self, eta: float) -> float:
        """The largest s with exp(log M + lam s) <= eta, best over the lam grid (>= 0)."""
        return max(0.0, float(np.max((math.log(eta) - self._logM) / self._lam)))

    def _pairable(self, which: str) -> bool:
        return (self.up if which == "upper" else self.down).second_certificate(_BOTH_WINDOW)

    def _fft_power(self, which: str) -> CertifiedComposition:
        if which not in self._fft:
            self._fft[which] = _compose(self._parts, which, self._window_tail, False)
        return self._fft[which]

    def _delta_lower_one(self, d: CertifiedComposition, eps: float, scale: float | None) -> float:
        best = 0.0
        etas = _ETAS_ABS if not scale else np.concatenate([_ETAS_ABS, scale * _ETA_FACTORS])
        for eta in etas:
            best = max(best, d.cert_lower(eps - self.s_eta(eta), eta))
        return best

    def delta_upper(self, eps: float) -> float:
        if not self._pairable("upper"):
            return self.up.cert_upper(eps)
        lo, v = self.up.cert_bracket(eps)
        if v - lo - 2.0 * self.up.outside > _PAIR_RATIO * v:
            v = min(v, self._fft_power("upper").cert_upper(eps))
        return v

    def delta_lower(self, eps: float, scale: float | None = None) -> float:
        """Certified lower bound on delta(eps), best over the Chernoff slacks eta (a fixed grid, plus
        fractions of ``scale``, the upper bound, when given: tiny deltas need tiny etas)."""
        v = self._delta_lower_one(self.down, eps, scale)
        if self._pairable("lower"):
            lo, up = self.down.cert_bracket(eps)
            if up - lo - 2.0 * self.down.outside > _PAIR_RATIO * max(v, up):
                v = max(v, self._delta_lower_one(self._fft_power("lower"), eps, scale))
        return v

    def epsilon_upper(self, delta: float) -> float:
        if delta <= self.up.outside + self.up.inf_mass:  # below both paths' floor: the refusal, no FFT power
            return self.up.epsilon_upper(delta)
        try:
            eps = self.up.epsilon_upper(delta)
            pair = self._pairable("upper") and self.up.rounding_width(eps) > _PAIR_RATIO * delta
        except NumericalError as exc:
            if not self._pairable("upper"):
                raise
            eps, refusal, pair = None, exc, True
        if pair:
            try:
                e2 = self._fft_power("upper").epsilon_upper(delta)
                eps = e2 if eps is None else min(eps, e2)
            except NumericalError:
                if eps is None:
                    raise refusal from None
        self._hint[delta] = eps
        self._last_hint = eps
        return eps

    def _epsilon_lower_one(self, d: CertifiedComposition, delta: float) -> float:
        best = 0.0
        # the upper bound's answer (at this delta, else the last one: the lower query's delta differs from the
        # upper's by the summation rounding): the lower one is close
        guess = self._hint.get(delta, self._last_hint)
        for eta in delta * _ETA_FACTORS:
            e = d.epsilon_lower(delta + eta, guess)
            if e is not None:
                guess = e
                best = max(best, e + self.s_eta(eta))
        return best

    def epsilon_lower(self, delta: float) -> float:
        best = self._epsilon_lower_one(self.down, delta)
        if self._pairable("lower") and self.down.rounding_width(best) > _PAIR_RATIO * delta:
            best = max(best, self._epsilon_lower_one(self._fft_power("lower"), delta))
        return best
