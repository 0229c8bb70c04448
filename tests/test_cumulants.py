"""Tests of dputils.cumulants against independent references.

References: mpmath quadrature at 30 digits of the tilted moments (subsampled Gaussian), mpmath
differentiation of the closed-form Laplace MGF, the exact binomial sum at integer orders, closed forms
for the Gaussian, and the per-step numbers of the SPA note (sigma = 2, q = 0.01).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dputils import cumulants as C
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism


def _cumulants_from_central(mean, mu):
    """kappa_1..kappa_6 from the mean and central moments mu[2..6] (explicit textbook formulas)."""
    return [
        mean,
        mu[2],
        mu[3],
        mu[4] - 3 * mu[2] ** 2,
        mu[5] - 10 * mu[3] * mu[2],
        mu[6] - 15 * mu[4] * mu[2] - 10 * mu[3] ** 2 + 30 * mu[2] ** 3,
    ]


def _mp_gm(sigma, q, direction, t, d=1.0, dps=30):
    """K(t) and its derivatives 1..6 for the subsampled Gaussian pair by mpmath quadrature."""
    with mp.workdps(dps):
        sigma, q, d, t = mp.mpf(sigma), mp.mpf(q), mp.mpf(d), mp.mpf(t)

        def ell(x):
            return mp.log(1 - q + q * mp.exp((2 * x * d - d * d) / (2 * sigma**2)))

        a = (t + 1) if direction == "remove" else -t
        sgn = 1 if direction == "remove" else -1

        def phi(x):
            return mp.exp(-x * x / (2 * sigma**2)) / (sigma * mp.sqrt(2 * mp.pi))

        peak = max(mp.mpf(0), a * d)
        pts = sorted({-mp.inf, -40 * sigma, mp.mpf(0), d, peak, peak + 40 * sigma, mp.inf})
        I = [mp.quad(lambda x, k=k: phi(x) * mp.exp(a * ell(x)) * (sgn * ell(x)) ** k, pts) for k in range(7)]
        Z0 = mp.quad(lambda x: phi(x) * (mp.exp(ell(x)) if direction == "remove" else 1), pts)
        K = mp.log(I[0] / Z0)
        m = [I[k] / I[0] for k in range(7)]
        mean = m[1]
        mu = {k: sum(mp.binomial(k, j) * m[j] * (-mean) ** (k - j) for j in range(k + 1)) for k in range(2, 7)}
        kap = _cumulants_from_central(mean, mu)
        return [float(K)] + [float(v) for v in kap]


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("t", [0.0, 0.7, 5.0, 30.0, -0.4])
def test_subsampled_gaussian_derivatives_vs_mpmath(direction, t):
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair(direction)
    got = C.cgf_derivatives(pair, t, order=6)
    ref = _mp_gm(2.0, 0.01, direction, t)
    # K and K' to 1e-10 relative, higher cumulants to 1e-8 relative (they are central-moment
    # combinations that cancel); absolute floor 1e-16 for K(0) = 0.
    for k, (g, r) in enumerate(zip(got, ref)):
        tol = 1e-10 if k <= 2 else 1e-8
        assert abs(g - r) <= tol * abs(r) + 1e-17, (k, g, r)


def test_subsampled_gaussian_other_parameters_vs_mpmath():
    pair = SubsampledGaussianMechanism(0.8, 0.2, sensitivity=1.5).pair("remove")
    for t in (0.0, 2.0):
        got = C.cgf_derivatives(pair, t, order=6)
        ref = _mp_gm(0.8, 0.2, "remove", t, d=1.5)
        for k, (g, r) in enumerate(zip(got, ref)):
            assert abs(g - r) <= (1e-10 if k <= 2 else 1e-8) * abs(r) + 1e-17, (t, k, g, r)


def test_note_per_step_anchors():
    # SPA note section 7 target 2: E[L], Var L, E|L - mu|^3, K(1) for sigma = 2, q = 0.01 (1e-6 rel)
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    k1, k2 = C.cumulants(pair, 2)
    assert k1 == pytest.approx(1.41577e-5, rel=1e-5)  # anchor given to 6 digits
    assert k2 == pytest.approx(2.84018e-5, rel=1e-5)
    assert C.tilted_abs_third_moment(pair, 0.0) == pytest.approx(3.4947e-7, rel=1e-4)
    # K(1) = log(1 + q^2 (e^{1/sigma^2} - 1)) exactly
    assert C.cgf(pair, 1.0) == pytest.approx(math.log1p(0.01**2 * math.expm1(0.25)), rel=1e-12)


def test_abs_third_moment_vs_mpmath():
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    t = 12.0
    with mp.workdps(25):
        s, q = mp.mpf(2), mp.mpf("0.01")

        def ell(x):
            return mp.log(1 - q + q * mp.exp((2 * x - 1) / (2 * s**2)))

        def w(x):
            return mp.exp(-x * x / (2 * s * s) + (t + 1) * ell(x))

        pts = [-mp.inf, -80, 0, 1, t + 1, 100, mp.inf]
        Z = mp.quad(w, pts)
        m = mp.quad(lambda x: w(x) * ell(x), pts) / Z
        # split at the point where ell(x) = m (ell is increasing) so that quad sees smooth pieces
        x_m = mp.findroot(lambda x: ell(x) - m, 10)
        pts2 = sorted(pts + [x_m])
        ref = mp.quad(lambda x: w(x) * abs(ell(x) - m) ** 3, pts2) / Z
    assert C.tilted_abs_third_moment(pair, t) == pytest.approx(float(ref), rel=1e-11)  # panel split at the mean


@pytest.mark.parametrize("alpha", [2, 3, 8, 20, 36, 64])
def test_integer_orders_vs_binomial(alpha):
    sg = SubsampledGaussianMechanism(2.0, 0.01)
    ref = C.subsampled_gaussian_cgf_binomial(2.0, 0.01, alpha)
    assert C.cgf(sg.pair("remove"), alpha - 1) == pytest.approx(ref, rel=1e-10)
    assert C.cgf(sg.pair("add"), -alpha) == pytest.approx(ref, rel=1e-10)


def test_plrv_identities():
    # K(0) = K(-1) = 0, K convex, K'(0) = KL(P||Q) >= 0, for every pair
    pairs = [SubsampledGaussianMechanism(1.0, 0.1).pair(d) for d in ("remove", "add")]
    pairs += [LaplaceMechanism(1.0, 0.5).pair("remove"), GaussianMechanism(1.5).pair("add")]
    for p in pairs:
        assert abs(C.cgf(p, 0.0)) < 1e-16
        assert abs(C.cgf(p, -1.0)) < 1e-13
        d = C.cgf_derivatives(p, 0.0, 2)
        assert d[1] > 0 and d[2] > 0
        ts = np.linspace(-3, 3, 13)
        K = C.cgf(p, ts)
        assert np.all(np.diff(K, 2) > 0)


def test_gaussian_closed_form():
    pair = GaussianMechanism(2.0, sensitivity=1.0).pair("remove")
    eta = 1.0 / 8.0
    for t in (-2.0, 0.0, 1.5, 40.0):
        got = C.cgf_derivatives(pair, t, 6)
        ref = [eta * t * (1 + t), eta * (1 + 2 * t), 2 * eta, 0, 0, 0, 0]
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-300)
    # E|Z|^3 of N(0, 2 eta) by mpmath
    with mp.workdps(20):
        v = mp.mpf(2 * eta)
        ref3 = mp.quad(lambda z: abs(z) ** 3 * mp.npdf(z, 0, mp.sqrt(v)), [-mp.inf, 0, mp.inf])
    assert C.tilted_abs_third_moment(pair, 3.0) == pytest.approx(float(ref3), rel=1e-12)


@pytest.mark.parametrize("t", [-3.0, -0.499, 0.0, 0.25, 4.0, 60.0])
def test_laplace_vs_mpmath_closed_form(t):
    b, d = 1.0, 0.5
    pair = LaplaceMechanism(b, d).pair("remove")
    s = mp.mpf(d) / b
    with mp.workdps(40):

        def K(z):
            return mp.log(((1 + z) * mp.exp(z * s) + z * mp.exp(-(1 + z) * s)) / (1 + 2 * z))

        # (t = -1/2 is a removable singularity of this formula; -0.499 tests next to it)
        ref = [float(mp.diff(K, mp.mpf(t), k)) for k in range(7)]
    got = C.cgf_derivatives(pair, t, 6)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert abs(g - r) <= 1e-9 * abs(r) + 1e-14, (k, g, r)


def test_laplace_tilted_abs_third_moment_vs_mpmath():
    pair = LaplaceMechanism(1.0, 0.5).pair("add")
    t = 1.3
    s = mp.mpf("0.5")
    with mp.workdps(30):
        dens = lambda l: mp.exp((l - s) / 2 + t * l) / 4  # noqa: E731
        atoms = [(s, mp.exp(t * s) / 2), (-s, mp.exp(-s - t * s) / 2)]
        Z = mp.quad(dens, [-s, s]) + sum(w for _, w in atoms)
        m = (mp.quad(lambda l: l * dens(l), [-s, s]) + sum(v * w for v, w in atoms)) / Z
        ref = (
            mp.quad(lambda l: abs(l - m) ** 3 * dens(l), [-s, m, s]) + sum(abs(v - m) ** 3 * w for v, w in atoms)
        ) / Z
    assert C.tilted_abs_third_moment(pair, t) == pytest.approx(float(ref), rel=1e-11)  # panel split at the mean: exact


def test_vectorized_and_composed():
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    lap = LaplaceMechanism(2.0).pair("remove")
    ts = np.array([[0.5, 1.0], [2.0, 3.0]])
    K = C.cgf(pair, ts)
    assert K.shape == (2, 2)
    assert K[0, 1] == C.cgf(pair, 1.0)
    tot = C.composed_cgf([(pair, 10), (lap, 3)], ts)
    np.testing.assert_allclose(tot, 10 * K + 3 * C.cgf(lap, ts), rtol=1e-15)
    d, p3 = C.composed_cgf_derivatives([(pair, 10), (lap, 3)], 1.0, 4)
    np.testing.assert_allclose(d, 10 * C.cgf_derivatives(pair, 1.0) + 3 * C.cgf_derivatives(lap, 1.0), rtol=1e-15)
    assert p3 == pytest.approx(10 * C.tilted_abs_third_moment(pair, 1.0) + 3 * C.tilted_abs_third_moment(lap, 1.0))


def test_cache_cost_independent_of_count():
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    C.cgf(pair, 2.345)
    before = C.evaluation_count()
    a = C.composed_cgf([(pair, 10)], 2.345)
    b = C.composed_cgf([(pair, 10**7)], 2.345)
    after = C.evaluation_count()
    assert after == before  # no new evaluation for either count
    assert b == pytest.approx(a * 10**6, rel=1e-15)


def test_bad_input():
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    for bad in (float("nan"), float("inf"), 1e7):
        with pytest.raises(DPValueError, match="t"):
            C.cgf(pair, bad)
    with pytest.raises(DPValueError, match="order"):
        C.cgf_derivatives(pair, 1.0, order=9)
    with pytest.raises(DPValueError, match="pair"):
        C.cgf(object(), 1.0)
    with pytest.raises(DPValueError, match="count"):
        C.composed_cgf([(pair, 0)], 1.0)
    with pytest.raises(DPValueError):
        C.composed_cgf([], 1.0)


# ------------------------------------------------------------------------------------------------
# moments of the tilted loss (shared with the Edgeworth accountant) against mpmath
# ------------------------------------------------------------------------------------------------
def _mp_tilted(logp, loss, pts, bracket, t, dps=25):
    """[K(t), kappa_1..kappa_6], E|L_t - mean|, E|L_t - mean|^3 of the loss tilted by t under the density exp(logp),
    by mpmath quadrature over the output x (breakpoints ``pts``; the mean crossing is found in ``bracket``)."""
    with mp.workdps(dps):
        t = mp.mpf(t)

        def E(g, where):
            return mp.quad(lambda x: mp.exp(logp(x) + t * loss(x)) * g(loss(x)), where)

        Z = E(lambda l: 1, pts)
        mean = E(lambda l: l, pts) / Z
        mu = {k: E(lambda l, k=k: (l - mean) ** k, pts) / Z for k in range(2, 7)}
        xs = mp.findroot(lambda x: loss(x) - mean, bracket, solver="bisect")
        pts2 = sorted(set(pts) | {xs})
        abs1 = E(lambda l: abs(l - mean), pts2) / Z
        abs3 = E(lambda l: abs(l - mean) ** 3, pts2) / Z
        return [float(mp.log(Z))] + [float(v) for v in _cumulants_from_central(mean, mu)], float(abs1), float(abs3)


def _mp_gm_law(sigma, q, direction, under, d=1.0):
    sigma, q, d = mp.mpf(sigma), mp.mpf(q), mp.mpf(d)
    lphi = lambda x: -x * x / (2 * sigma**2) - mp.log(sigma * mp.sqrt(2 * mp.pi))  # noqa: E731
    lmix = lambda x: mp.log((1 - q) * mp.exp(lphi(x)) + q * mp.exp(lphi(x - d)))  # noqa: E731
    ell = lambda x: mp.log(1 - q + q * mp.exp((2 * x * d - d * d) / (2 * sigma**2)))  # noqa: E731
    p_is_mix = direction == "remove"
    logp = lmix if (under == "p") == p_is_mix else lphi
    loss = ell if direction == "remove" else (lambda x: -ell(x))
    return logp, loss, [-mp.inf, -40 * sigma, mp.mpf(0), d, d + 40 * sigma, mp.inf], (-30 * sigma, 30 * sigma)


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("under", ["p", "q"])
def test_loss_moments_subsampled_gaussian_vs_mpmath(direction, under):
    # the moments the Edgeworth accountant needs (Lemma 4.3: E|L-mu|, E|L-mu|^3, E(L-mu)^4; cumulants 1..6),
    # under P and under Q, computed by mpmath from the densities (independent of the tilt t = -1 identity)
    pair = SubsampledGaussianMechanism(0.8, 0.01).pair(direction)
    mo = C.loss_moments(pair, under)
    kap, abs1, abs3 = _mp_tilted(*_mp_gm_law(0.8, 0.01, direction, under), t=0)
    np.testing.assert_allclose(mo.cumulants[:6], kap[1:], rtol=1e-9)
    assert mo.abs1 == pytest.approx(abs1, rel=1e-11)  # the panel split at the mean makes the kink exact
    assert mo.abs3 == pytest.approx(abs3, rel=1e-11)
    assert mo.central[2] == pytest.approx(kap[4] + 3 * kap[2] ** 2, rel=1e-10)  # E(L-mu)^4
    assert mo.var == mo.cumulants[1] and mo.mean == mo.cumulants[0]


def test_tilted_abs_moments_at_large_tilt_vs_mpmath():
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("add")
    mo = C.tilted_moments(pair, -7.5)
    kap, abs1, abs3 = _mp_tilted(*_mp_gm_law(2.0, 0.01, "add", "p"), t=-7.5)
    assert mo.abs1 == pytest.approx(abs1, rel=1e-11) and mo.abs3 == pytest.approx(abs3, rel=1e-11)
    assert C.cgf(pair, -7.5) == pytest.approx(kap[0], rel=1e-11)


def _slap_pair(scale, q, d, direction):
    from dputils.mechanisms import SubsampledLaplaceMechanism

    return SubsampledLaplaceMechanism(scale, q, d).pair(direction)


def _mp_slap_law(b, q, direction, d=1.0):
    b, q, d = mp.mpf(b), mp.mpf(q), mp.mpf(d)
    lap = lambda x, m: mp.exp(-abs(x - m) / b) / (2 * b)  # noqa: E731
    ell = lambda x: mp.log(1 - q + q * mp.exp((abs(x) - abs(x - d)) / b))  # noqa: E731
    if direction == "remove":
        return (lambda x: mp.log((1 - q) * lap(x, 0) + q * lap(x, d))), ell
    return (lambda x: mp.log(lap(x, 0))), (lambda x: -ell(x))


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("t", [-1.0, 0.0, 2.5])
def test_subsampled_laplace_vs_mpmath(direction, t):
    # the Edgeworth paper's Sec. 4.4 pair: loss with two atoms (x <= 0, x >= d) and a density on (0, d);
    # mpmath integrates the output density over the real line (no atom decomposition)
    b, q, d = 1.0, 0.05, 1.0
    pair = _slap_pair(b, q, d, direction)
    logp, loss = _mp_slap_law(b, q, direction, d)
    kap, abs1, abs3 = _mp_tilted(logp, loss, [-mp.inf, 0, 1, mp.inf], (mp.mpf("1e-9"), 1 - mp.mpf("1e-9")), t)
    got = C.cgf_derivatives(pair, t, 6)
    for k, (g, r) in enumerate(zip(got, kap)):
        assert abs(g - r) <= 1e-10 * abs(r) + 1e-16, (k, g, r)
    mo = C.tilted_moments(pair, t)
    assert mo.abs1 == pytest.approx(abs1, rel=1e-11) and mo.abs3 == pytest.approx(abs3, rel=1e-11)


def test_subsampled_laplace_support_and_q1():
    b, q, d = 0.7, 0.1, 1.3
    s = d / b
    assert C.loss_sup(_slap_pair(b, q, d, "remove")) == pytest.approx(math.log(1 - q + q * math.exp(s)), rel=1e-15)
    assert C.loss_sup(_slap_pair(b, q, d, "add")) == pytest.approx(-math.log(1 - q + q * math.exp(-s)), rel=1e-15)
    # q = 1 is the Laplace pair (either direction): same key, same numbers
    for direction in ("remove", "add"):
        assert C.pair_key(_slap_pair(b, 1.0, d, direction)) == C.pair_key(LaplaceMechanism(b, d).pair("remove"))
    with pytest.raises(DPValueError, match="under"):
        C.loss_moments(_slap_pair(b, q, d, "add"), "x")


def test_standardized_cumulants_of_the_gaussian_loss():
    # sigma 2, sensitivity 1: L ~ N(mu^2/2, mu^2) under P and N(-mu^2/2, mu^2) under Q, mu = 1/2; no skew
    pair = GaussianMechanism(2.0).pair("remove")
    for under, sign in (("p", 1), ("q", -1)):
        k1, k2, lam3, lam4 = C.standardized_cumulants(pair, under)
        assert k1 == pytest.approx(sign * 0.125, rel=1e-10) and k2 == pytest.approx(0.25, rel=1e-10)
        assert abs(lam3) < 1e-8 and abs(lam4) < 1e-8
    # the subsampled Gaussian: lambda_r = kappa_r / kappa_2^(r/2) of the cumulants
    sub = SubsampledGaussianMechanism(0.8, 0.01).pair("remove")
    k = C.loss_moments(sub, "q").cumulants
    assert C.standardized_cumulants(sub, "q")[2] == pytest.approx(k[2] / k[1] ** 1.5, rel=1e-14)
