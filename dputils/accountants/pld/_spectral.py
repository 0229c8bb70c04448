"""Spectral composition (long compositions): the composed PMF's Fourier coefficients at the few frequencies
that matter, with every rounding error bounded relative to zeta (see :mod:`dputils.accountants.pld`)."""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sp_fft

from ...numerics import bisect_monotone
from ._interface import CertifiedComposition
from ._invert import _bisect_lower, _bisect_upper

_U = np.finfo(float).eps / 2  # unit round-off
_LOG_DROP = math.log(1e-30)  # |Phi(k)| bound on every dropped frequency


def _pairwise_sum(x: np.ndarray) -> np.ndarray:
    """Sum over axis 0 by halving (zero-padded to a power of two): error <= ceil(log2 n) u sum |x_i|."""
    n = x.shape[0]
    p = 1 << max(0, (n - 1).bit_length())
    if p != n:
        x = np.concatenate([x, np.zeros((p - n,) + x.shape[1:])])
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        x = x[:half] + x[half:]
    return x[0]


def _sym_angle(p: np.ndarray, N: int) -> np.ndarray:
    """2 pi p / N for integers p, reduced exactly to p in (-N/2, N/2] first (|angle| <= pi, rel. error <= 3u)."""
    p = np.mod(p, N)
    p = np.where(2 * p > N, p - N, p)
    return p * (2.0 * math.pi / N)


_HALF_B = 32  # block length of :func:`_half_zeta`


def _half_zeta(w: np.ndarray, N: int, K: int) -> tuple[np.ndarray, int]:
    """H(k) = sum_{j >= 0} w_j d(x j), x = 2 pi k / N, k = 1..K, and the levels of its block sum.

    Blocked: j = aB + b (a >= 0, 0 <= b < B): d(x(aB + b)) = d(x aB) + e^{-ix aB} d(x b), so with
    W_a = sum_b w_ab and I_a = sum_b w_ab d(x b) (a small matrix product),
    H = sum_a [d(x aB) W_a + e^{-ix aB} I_a]. Each d comes from an exactly reduced angle with relative error
    <= 12u and |d(y)| <= |y|, and aB + b = j: every term's rounding is a small multiple of u x w_j j.
    (A (K, A + B) set of sines instead of (K, n); the products are O(K n) multiply-adds.)
    """
    B = _HALF_B
    n = w.size
    A = -(-n // B)
    mp = np.zeros(A * B)
    mp[:n] = w
    mp = mp.reshape(A, B)
    ks = np.arange(1, K + 1, dtype=np.int64)
    Wa = mp.sum(axis=1)
    aB = np.arange(A, dtype=np.int64) * B
    z = np.empty(K, complex)
    kc = max(1, 16_384 // A)  # frequencies per block: (A, kc) temporaries of at most 256 KiB
    for k0 in range(0, K, kc):
        kb = ks[k0 : k0 + kc]
        xb = _sym_angle(np.multiply.outer(np.arange(B, dtype=np.int64), kb), N)  # (B, kc)
        xa = _sym_angle(np.multiply.outer(aB, kb), N)  # (A, kc)
        sb = np.sin(0.5 * xb)
        sa = np.sin(0.5 * xa)
        # matrix products by einsum's own loop, not BLAS: tiny products, and a threaded BLAS only
        # contends with other work (measured 2x slower on a loaded 2-core machine)
        inner = np.einsum("ab,bk->ak", mp, 2.0 * sb * sb) + 1j * np.einsum("ab,bk->ak", mp, np.sin(xb))
        terms = ((2.0 * sa * sa) + 1j * np.sin(xa)) * Wa[:, None] + (np.cos(xa) - 1j * np.sin(xa)) * inner
        z[k0 : k0 + kc] = _pairwise_sum(terms.real) + 1j * _pairwise_sum(terms.imag)
    return z, max(1, (A - 1).bit_length())


class _Part:
    """One discretized PMF, its count, and what the spectral composition needs from it.

    Indices are relative to ``ctr`` (the rounded mean index). ``M1, M2, M3, A1`` are the normalised moments
    E(X-ctr), E(X-ctr)^2, E|X-ctr|^3, E|X-ctr| of the index X (sums of non-negative terms except M1, with
    relative error far below the 1e-9 slack applied: M2 shrunk, M3 and A1 grown, |M1| grown by 1e-9 A1).
    """

    def __init__(self, m: np.ndarray, i0: int, count: int):
        self.m, self.c, self.n = m, count, m.size
        self.L = max(1, (m.size - 1).bit_length())  # levels of the pairwise sums
        self.s = float(_pairwise_sum(m))
        idx = np.arange(m.size, dtype=float)
        self.ctr = int(round(float(_pairwise_sum(m * idx)) / self.s))
        self.i0 = i0
        x = idx - self.ctr
        ax = np.abs(x)
        s = self.s
        self.M1 = float(_pairwise_sum(m * x)) / s
        self.A1 = float(_pairwise_sum(m * ax)) / s * (1 + 1e-9)
        self.M1 = abs(self.M1) + 1e-9 * self.A1
        self.M2 = float(_pairwise_sum(m * x * x)) / s * (1 - 1e-9)
        self.M3 = float(_pairwise_sum(m * ax * ax * ax)) / s * (1 + 1e-9)
        self.x = x.astype(np.int64)

    def taylor(self, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """Bound on sup |phi| over [alpha, beta] (phi = f/s, 0 <= alpha <= beta), +inf where not valid.

        From |e^{iy} - 1 - iy + y^2/2| <= |y|^3/6 with y = w (X - ctr):
        |phi(w)| <= |1 - w^2 M2/2| + |w| |M1| + |w|^3 M3/6, and 1 - w^2 M2/2 is decreasing while w^2 M2 <= 2.
        """
        b = 1.0 - alpha * alpha * self.M2 / 2 + beta * self.M1 + beta**3 * self.M3 / 6
        return np.where(beta * beta * self.M2 <= 2.0, b * (1 + 4 * _U), np.inf)

    def samples(self, Ms: int) -> np.ndarray:
        """Bound on |phi| on each cell [(r - 1/2) 2pi/Ms, (r + 1/2) 2pi/Ms], r = 0..Ms/2.

        phi at the cell centre from an FFT of the PMF folded modulo Ms (exact sampling of the transform),
        plus the FFT's error (a generous 10 log2(Ms) u sqrt(Ms) ||g||_2 / s, from the l2 error bound of
        the FFT), plus the Lipschitz term A1 pi / Ms (|d/dw (phi(w) e^{i w ctr})| <= E|X - ctr| = A1).
        """
        g = np.bincount(np.arange(self.n) % Ms, weights=self.m, minlength=Ms)
        y = np.abs(sp_fft.rfft(g)) / self.s
        err = 10 * math.log2(Ms) * _U * math.sqrt(Ms) * math.sqrt(float(np.sum(g * g))) / self.s
        # the fold: each bin is a running sum of at most ceil(n / Ms) masses, error <= ceil(n / Ms) u times
        # their total, so the folded sequence is off by at most that times s in l1 and its transform too;
        # dividing by the computed s (L levels of pairwise sums) adds (L + 2) u relative
        err += (-(-self.n // Ms) + self.L + 2) * _U * 1.01
        return y * (1 + 4 * _U) + err + self.A1 * math.pi / Ms * (1 + 4 * _U)

    def zeta(self, N: int, K: int) -> tuple[np.ndarray, np.ndarray]:
        """zeta(k) = 1 - f(k)/s for k = 1..K (f(k) = sum_i m_i e^{-2 pi i k (i - ctr)/N}) and an error bound.

        With x = 2 pi k/N and d(y) = 1 - e^{-iy} = 2 sin^2(y/2) + i sin y, s zeta = sum_i m_i d(x (i - ctr)).
        The two sides of ctr are summed separately, as H(right) + conj(H(left)) (d(-y) = conj d(y)), where
        H(w) = sum_{j >= 0} w_j d(x j) for the masses at distance j = |i - ctr|; see :func:`_half_zeta`.
        Every rounding error of H is at most a multiple of u x sum_j w_j j (exactly, no blocking overhead),
        so |computed - exact| <= (B + L_a + 32) u x s A1 in total, and the division by the computed s adds
        (L + 3) u |zeta| (L: levels of the pairwise sum giving s).
        """
        x = self.x  # i - ctr, increasing by 1; ctr (the rounded mean) lies inside [x[0], x[-1]]
        c0 = int(-x[0])
        right = self.m[c0:]  # distances 0, 1, ...
        left = np.concatenate([[0.0], self.m[:c0][::-1]])  # distances 0 (empty), 1, 2, ...
        hr, La_r = _half_zeta(right, N, K)
        hl, La_l = _half_zeta(left, N, K)
        z = (hr + np.conj(hl)) / self.s
        ks = np.arange(1, K + 1, dtype=np.int64)
        theta = ks * (2.0 * math.pi / N)
        La = max(La_r, La_l) + 1
        err = ((_HALF_B + La + 32) * _U * theta * self.A1 + (self.L + 3) * _U * np.abs(z)) * 1.01
        return z, err


class SpectralPLD(CertifiedComposition):
    """A composed PMF on the window [j0, j0 + N) represented by its Fourier coefficients at |k| <= K.

    With period N equal to the window length, the circular (aliased) composition of the parts is
    circ[r] = (1/N) sum_k F(k) e^{2 pi i k r / N}, F(k) = prod_p f_p(k)^{c_p} = S Phi(k) with
    S = prod_p s_p^{c_p} (the total finite mass) and Phi(k) = prod_p (1 - zeta_p(k))^{c_p}. The window
    masses are circ at the window points, as in the FFT path. For delta(eps) only the hockey-stick sum is
    needed: sum_{j > eps} (1 - e^{eps - l_j}) circ_j = (S/N) sum_k Phi(k) V(k), where V(k) is a pair of
    geometric sums in closed form. Frequencies with |k| > K are dropped: a bound on |phi_p| (Taylor near
    zero, FFT samples plus a Lipschitz term elsewhere; see :class:`_Part`) shows |Phi(k)| <= 1e-30 there,
    and |V(k)| <= V(0), so they change delta by at most 1e-30 V(0). Every rounding error is bounded (see
    :meth:`_bounds`); the bounds are relative to zeta, not to 1, so they do not grow like T u as the FFT
    power's do.
    """

    def __init__(self, h, j_lo, N, offset, parts, K, inf_mass, outside):
        self.h, self.j0, self.N, self.offset, self.K = h, j_lo, N, offset, K
        self.inf_mass, self.outside = inf_mass, outside
        logS = sum(p.c * math.log(p.s) for p in parts)
        slack = sum(p.c * (p.L + 3) * _U for p in parts) + 4 * _U * abs(logS) + 4 * _U
        self.S, self.S_hi, self.S_lo = math.exp(logS), math.exp(logS + slack), math.exp(logS - slack)
        if K == 0:
            self.phi = np.zeros(0, complex)
            self.phi_err = np.zeros(0)
            return
        logphi = np.zeros(K, complex)
        lam = np.zeros(K)
        absl = np.zeros(K)
        bad = np.zeros(K, bool)
        upper_mod = np.zeros(K)
        for p in parts:
            z, dz = p.zeta(N, K)
            om = 1.0 - z
            am = np.abs(om)
            with np.errstate(divide="ignore", invalid="ignore"):
                lr = 0.5 * np.log1p(-2.0 * z.real + z.real**2 + z.imag**2)
                li = np.arctan2(-z.imag, 1.0 - z.real)
                az = np.abs(z)
                # rounding of log1p(-2 Re + |z|^2) / 2 and atan2(-Im, 1 - Re): relative to the result, plus
                # the argument's rounding propagated (<= 3u (|z| + |z|^2) / |1 - z|^2 and u |z| / |1 - z|)
                ev = 8 * _U * (az + az * az) / (am * am) + 3 * _U * np.hypot(lr, li)
                prop = dz / (am - dz)
            bad |= ~(am > dz) | ~np.isfinite(lr)
            logphi += p.c * np.where(bad, 0.0, lr + 1j * li)
            lam += p.c * (np.where(bad, 0.0, prop) + ev)
            absl += p.c * np.where(bad, 0.0, np.hypot(lr, li))
            upper_mod += p.c * np.log(am + dz)
        lam += (len(parts) + 3) * _U * absl + 4 * _U
        bad |= ~np.isfinite(lam) | (lam > 1.0)
        phi = np.exp(logphi)
        err = np.expm1(np.where(bad, 0.0, lam)) * np.abs(phi) * (1 + 1e-6)
        # unresolved coefficients: value 0, error the bound on the modulus
        self.phi = np.where(bad, 0.0, phi)
        self.phi_err = np.where(bad, np.exp(np.minimum(upper_mod, 0.0)), err)
        self._theta = np.arange(1, K + 1) * (2.0 * math.pi / N)
        self._ks = np.arange(1, K + 1, dtype=np.int64)

    def _bounds(self, eps: float) -> tuple[float, float]:
        """(D, E): sum_{window j, l_j > eps} (1 - e^{eps - l_j}) circ_j / S lies in [D - E, D + E]."""
        h, N = self.h, self.N
        j_hi = self.j0 + N - 1
        if not eps / h < j_hi:  # eps at or above the last window point (eps / h may be infinite)
            return 0.0, 0.0
        ja = max(self.j0, math.floor(eps / h) + 1)
        while ja * h <= eps:
            ja += 1
        R = j_hi - ja + 1
        if R <= 0:
            return 0.0, 0.0
        a = math.exp(eps - ja * h)
        e_a = 4 * _U * (abs(eps) + abs(ja * h) + 1)  # relative error of a (the exponent's rounding)
        SR = (-math.expm1(-h * R)) / (-math.expm1(-h))
        V0 = R - a * SR
        eV0 = 8 * _U * (R + a * SR) + e_a * a * SR
        D = V0
        # the N - 2K - 1 dropped frequencies: each |Phi(k)| <= 1e-30 and |V(k)| <= V(0) (V is a sum of
        # non-negative weights times unit phases), so together at most (N - 2K - 1) 1e-30 V(0) before the 1/N
        E = eV0 + max(N - 2 * self.K - 1, 0) * math.exp(_LOG_DROP) * (abs(V0) + eV0)
        if self.K:
            th = self._theta
            phiR = _sym_angle(self._ks * R, N)
            psi = _sym_angle(self._ks * ((ja - self.offset) % N), N)
            st = np.sin(0.5 * th)
            sp = np.sin(0.5 * phiR)
            one_z = 2 * st * st - 1j * np.sin(th)
            one_zR = 2 * sp * sp - 1j * np.sin(phiR)
            eh, ehR = math.exp(-h), math.exp(-h * R)
            one_w = (-math.expm1(-h) + eh * 2 * st * st) - 1j * eh * np.sin(th)
            one_wR = (-math.expm1(-h * R) + ehR * 2 * sp * sp) - 1j * ehR * np.sin(phiR)
            Gz = one_zR / one_z
            Gw = one_wR / one_w
            V = np.exp(1j * psi) * (Gz - a * Gw)
            aV = np.abs(V)
            eV = 64 * _U * (np.abs(Gz) + a * np.abs(Gw) + aV) + e_a * a * np.abs(Gw)
            aphi = np.abs(self.phi)
            D += 2.0 * float(np.sum((self.phi * V).real))
            E += 2.0 * float(np.sum(self.phi_err * (aV + eV) + aphi * eV))
            E += (self.K + 4) * _U * 1.01 * (abs(V0) + 2.0 * float(np.sum(aphi * aV)))
        return D / N, E / N * (1 + 4 * _U)

    def cert_upper(self, eps: float) -> float:
        """Certified upper bound on delta(eps) of the composed PMF (window tails and infinity included)."""
        return self._upper(*self._bounds(eps))

    def cert_lower(self, eps: float, eta: float = 0.0) -> float:
        """Certified lower bound on delta(eps) of the composed PMF, less ``eta``."""
        return self._lower(*self._bounds(eps)) - eta

    def cert_bracket(self, eps: float) -> tuple[float, float]:
        """(cert_lower, cert_upper) at eps from one evaluation of the spectral sums."""
        D, E = self._bounds(eps)
        return self._lower(D, E), self._upper(D, E)

    def _upper(self, D: float, E: float) -> float:
        return min(1.0, self.S_hi * max(D + E, 0.0) * (1 + 2 * _U) + self.inf_mass + self.outside)

    def _lower(self, D: float, E: float) -> float:
        return self.S_lo * max(D - E, 0.0) * (1 - 2 * _U) + self.inf_mass - self.outside

    def plain(self, eps: float) -> float:
        """The estimate without error terms (for the resolution check)."""
        return self.S * max(self._bounds(eps)[0], 0.0) + self.inf_mass

    def top(self) -> float:
        return (self.j0 + self.N) * self.h

    @property
    def window_points(self) -> int:
        """Grid points in the composed window (the period N; only 2K + 1 coefficients are stored)."""
        return int(self.N)

    # the CertifiedComposition interface

    path = "spectral"

    def second_certificate(self, max_window: int) -> bool:
        return self.window_points <= max_window

    def _epsilon_upper_and_error(self, delta: float) -> tuple[float, float]:
        eps = _bisect_upper(self, delta)
        return eps, self.cert_upper(eps) - self.plain(eps)

    def epsilon_lower(self, target: float, guess: float | None = None) -> float | None:
        return _bisect_lower(self, target, guess)


def _spectral(
    parts: list[tuple[np.ndarray, int, int]],
    h: float,
    j_lo: int,
    j_hi: int,
    offset0: int,
    inf_mass: float,
    outside: float,
    fft_ratio: float | None = None,
) -> SpectralPLD | None:
    """The spectral composition when few frequencies suffice, else None (the caller uses the FFT path).

    parts: (masses, absolute grid index of masses[0], count). The kept set |k| <= K is the smallest for
    which every cell of frequencies beyond 2 pi K / N has prod_p bound_p^{c_p} <= 1e-30. With ``fft_ratio``,
    also None when the O(K n) cost of the coefficients exceeds ``fft_ratio`` times the FFT power's
    n_fft log2 n_fft (short compositions, whose sharp composed PMF needs many coefficients).
    """
    N = j_hi - j_lo + 1
    ps = [_Part(m, i0, c) for m, i0, c in parts]
    if any(p.s <= 0 for p in ps):
        return None
    A1 = max(p.A1 for p in ps)
    Ms = 1 << int(min(20, max(12, math.ceil(math.log2(500 * math.pi * A1 + 1)))))
    d = 2 * math.pi / Ms
    r = np.arange(Ms // 2 + 1)
    lo = np.maximum(r - 0.5, 0.0) * d
    hi = (r + 0.5) * d
    samp = [p.samples(Ms) for p in ps]

    def cell_log(alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        tot = np.zeros(idx.size)
        for p, sm in zip(ps, samp):
            b = np.minimum(np.minimum(sm[idx], p.taylor(alpha, hi[idx])), 1.0)
            with np.errstate(divide="ignore"):
                tot += p.c * np.log(b)
        return tot

    lam = cell_log(lo, r)
    suf = np.maximum.accumulate(lam[::-1])[::-1]  # max over cells >= r
    ok = np.concatenate([suf[1:], [-np.inf]]) <= _LOG_DROP  # every cell after r is fine
    if not ok.any():
        return None
    r0 = int(np.argmax(ok))
    if lam[r0] <= _LOG_DROP:
        om_K = lo[r0]
    elif cell_log(np.array([hi[r0]]), np.array([r0]))[0] > _LOG_DROP:
        om_K = hi[r0]
    else:
        # 50 halvings of the cell (its ends evaluated just above), keeping the end where the bound holds
        om_K = bisect_monotone(
            lambda w: cell_log(np.array([w]), np.array([r0]))[0] <= _LOG_DROP,
            lo[r0],
            hi[r0],
            keep="hi",
            tol=0.0,
            max_iter=50,
            ends_checked=True,
        )
    K = int(math.floor(om_K * N / (2 * math.pi) * (1 + 1e-12))) + 1
    if 2 * K + 1 > N // 4 or K * sum(p.n for p in ps) > 4e7:
        return None
    if fft_ratio is not None:  # the caller prefers the FFT power where it is cheaper by this factor
        n_fft = sp_fft.next_fast_len(max(N, max(p.n for p in ps)), real=True)
        if K * sum(p.n for p in ps) > fft_ratio * n_fft * math.log2(n_fft):
            return None
    offset = offset0 + sum(p.c * p.ctr for p in ps)
    return SpectralPLD(h, j_lo, N, offset, ps, K, inf_mass, outside)
