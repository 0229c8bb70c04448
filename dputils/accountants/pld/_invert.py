"""Inversion: the epsilon at which a composed PLD's certified delta bound crosses a target.

* the FFT power (:class:`~dputils.accountants.pld.ComposedPLD`): a search of the grid profile, then an exact
  solve on one piece, where delta and its error term are affine in :math:`e^{\varepsilon - l_k}`
  (:func:`_invert`, :func:`_invert_lower`);
* the spectral composition (:class:`~dputils.accountants.pld.SpectralPLD`): certified bisection
  (:func:`dputils.numerics.bisect_monotone`) of its bounds (:func:`_bisect_upper`, :func:`_bisect_lower`).

Every answer is a point where the inequality it promises was evaluated to hold.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import NumericalError
from ...numerics import bisect_monotone


def _bisect_upper(c, target: float) -> float:
    """An eps >= 0 with ``c.cert_upper(eps) <= target`` (c a SpectralPLD), as small as bisection to 1e-12
    relative gives.

    At the window's top only infinity and the tails remain, which the caller checked to be below target;
    the returned point is always one where the inequality was evaluated to hold.
    """
    if c.cert_upper(0.0) <= target:
        return 0.0
    lo, hi = 0.0, c.top()
    if c.cert_upper(hi) > target:
        raise NumericalError("delta target not reached inside the PLD window")
    return bisect_monotone(lambda e: c.cert_upper(e) <= target, lo, hi, keep="hi", tol=1e-12, ends_checked=True)


def _bisect_lower(c, target: float, guess: float | None = None) -> float | None:
    """An eps with ``c.cert_lower(eps) >= target`` (c a SpectralPLD), as large as bisection gives, or None.

    With a ``guess`` the bracket is first found by steps of h, 2h, 4h, ... around it (fewer evaluations);
    the answer is always a point where the inequality was evaluated to hold.
    """
    lo, hi = (c.j0 - 1) * c.h, c.top()
    if c.cert_lower(hi) >= target:
        return hi
    # the window's start need not hold: a tilted composition's bound on the mass outside its window is large
    # there (issue 35: q 0.00038, sigma 4, T 1000 at delta 1.13e-18 had no lower end); a point found below the
    # guess does
    lo_ok = c.cert_lower(lo) >= target
    if guess is not None and lo < guess < hi:
        step = c.h
        if c.cert_lower(guess) >= target:
            lo, lo_ok = guess, True
            while lo + step < hi and c.cert_lower(lo + step) >= target:
                lo, step = lo + step, 2 * step
            hi = min(hi, lo + step)
        else:
            hi = guess
            while hi - step > lo and c.cert_lower(hi - step) < target:
                hi, step = hi - step, 2 * step
            if hi - step > lo:  # the loop stopped where the inequality holds
                lo, lo_ok = hi - step, True
    if not lo_ok:
        return None
    return bisect_monotone(lambda e: c.cert_lower(e) >= target, lo, hi, keep="lo", tol=1e-12, ends_checked=True)


def _invert_lower(c, target: float) -> float | None:
    """An eps with ``c.delta(eps) - c.noise(eps) >= target`` (c a ComposedPLD), as large as a few refinements
    give, or None.

    Start from the inversion with the whole window's noise; each refinement inverts with the noise
    beyond the previous answer, which can only move right while keeping the inequality (the noise term is
    non-increasing in eps). The answer is checked by direct evaluation.
    """
    noise = c.noise_pp * c.masses.size
    best = None
    for _ in range(4):
        t = target + noise
        if t >= 1.0:
            break
        try:
            e = _invert(c, t, clamp_zero=False)
        except NumericalError:
            break
        step = 4.0 * math.ulp(max(abs(e), c.h))
        for _ in range(30):  # rounding of the piece solve: move left by growing steps until it holds
            if c.delta(e) - c.noise(e) >= target:
                best = e if best is None else max(best, e)
                break
            e -= step
            step *= 2.0
        new_noise = c.noise(e)
        if new_noise >= noise * (1 - 1e-9):
            break
        noise = new_noise
    return best


def _invert(c, target: float, clamp_zero: bool = True, noise: bool = False) -> float:
    """Smallest eps with c.delta(eps) [+ c.noise(eps) when ``noise``] <= target (c a ComposedPLD).

    Search the grid, then solve exactly on one piece: on (l_{k-1}, l_k] with a = e^{eps - l_k} both
    delta and the noise term are affine in a. The answer is checked by direct evaluation (falling back
    to the grid point l_k, where the inequality holds by the search).
    """
    if c.inf_mass > target:
        raise NumericalError(f"infinite-loss mass {c.inf_mass:g} exceeds delta={target:g}: no finite epsilon")
    c._prepare()
    n = c.masses.size
    p = c.noise_pp if noise else 0.0

    def total(e: float) -> float:
        return c.delta(e) + (p * c.beyond(e) if noise else 0.0)

    D = c._grid_profile(noise)  # delta (+ noise) at the grid points, non-increasing
    lo_eps = 0.0 if clamp_zero else c.loss(-1)
    if total(lo_eps) <= target:
        return lo_eps
    # first k with D[k] <= target
    k = int(np.searchsorted(-D, -target, side="left"))
    if k >= n:
        raise NumericalError("delta target not reached inside the PLD window")
    if k == 0:
        return max(c.loss(0), 0.0) if clamp_zero else c.loss(0)
    # on (l_{k-1}, l_k]: delta + noise = A + p (n - k) - a (m_k + G[k] + p S),  S = sum_{i<n-k} e^{-i h}
    A = c._A[k - 1] + c.inf_mass + p * (n - k)
    S = (-math.expm1(-c.h * (n - k))) / (-math.expm1(-c.h))
    denom = c.masses[k] + c._G[k] + p * S  # = A[k-1] - D[k] - inf (+ noise), without cancellation
    a = (A - target) / denom if denom > 0 else 1.0
    a = min(max(a, math.exp(-c.h)), 1.0)
    l_k = c.loss(k)
    eps = l_k + math.log(a)
    step = 4.0 * math.ulp(max(abs(l_k), c.h))
    for _ in range(30):  # rounding of the piece solve: move right by growing steps, at most to l_k
        if eps >= l_k or total(eps) <= target:
            break
        eps += step
        step *= 2.0
    eps = min(eps, l_k)
    return max(eps, 0.0) if clamp_zero else eps
