"""The PLD accountant's certified bracket against independent truths, including very large epsilon.

References (none computed by the code under test):
* plain Gaussian compositions: exact mu-GDP (mu = sqrt(T)/sigma), solved in mpmath at 50 digits;
* subsampled Gaussian compositions: the saddle-contour truth of :mod:`dputils.truth` (a different
  algorithm: numerical inversion of the moment generating function, no discretization, no FFT).

The bracket must contain the truth, or the accountant must refuse with NumericalError. Refusal is allowed
but counted: most settings must be answered, so refusing everything cannot pass.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dputils import truth
from dputils.accountants import pld
from dputils.accountants.gdp import GDPAccountant
from dputils.accountants.pld import PLDAccountant, _pairs
from dputils.errors import NumericalError
from dputils.mechanisms import GaussianMechanism, SubsampledGaussianMechanism


def gdp_epsilon_mpmath(mu: float, delta: float) -> float:
    """eps with Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2) = delta, at 50 digits (Dong et al., Cor. 2.13)."""
    with mp.workdps(50):
        m, d = mp.mpf(mu), mp.mpf(delta)

        def f(e):
            return mp.log(mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)) - mp.log(d)

        lo, hi = mp.mpf(0), m * m / 2 + m * mp.sqrt(2 * mp.log(1 / d)) + 1
        if f(lo) <= 0:
            return 0.0
        return float(mp.findroot(f, (lo, hi), solver="anderson"))


def _bracket(mech, steps, delta, h):
    r = PLDAccountant(discretization=h).compose(mech, steps).get_epsilon(delta)
    return r.lower, r.value, r.upper


# The two settings reported in issue 11, where the bracket used to exclude the exact value: the FFT's
# floating-point error, amplified by raising the spectrum to the power T, was not in the certificate.
@pytest.mark.slow
@pytest.mark.parametrize(
    "sigma,steps,delta,h",
    [
        (0.6197115545032963, 21685, 1.762552894796354e-09, 1e-4),
        (0.7385238603557547, 42653, 1.8253055259590336e-09, 2e-4),
    ],
)
def test_reported_large_epsilon_settings(sigma, steps, delta, h):
    exact = gdp_epsilon_mpmath(math.sqrt(steps) / sigma, delta)
    lo, val, hi = _bracket(GaussianMechanism(sigma), steps, delta, h)
    assert lo <= exact <= hi, (lo, exact, hi)
    assert val == hi
    assert (hi - lo) / exact < 1e-3  # a bracket, not a shrug


def test_randomized_gaussian_sweep_against_exact_gdp():
    rng = np.random.default_rng(20261124)
    answered, refused, rows = 0, 0, []
    for i in range(14):
        sigma = float(np.exp(rng.uniform(np.log(0.3), np.log(5.0))))
        # half the settings aim at large epsilon (mu of 50..300), half at ordinary ones
        if i % 2:
            mu_target = float(np.exp(rng.uniform(np.log(50.0), np.log(300.0))))
            steps = max(1, int(round((mu_target * sigma) ** 2)))
        else:
            steps = int(np.exp(rng.uniform(0.0, np.log(3e3))))
        delta = float(np.exp(rng.uniform(np.log(1e-12), np.log(1e-3))))
        mu = math.sqrt(steps) / sigma
        h = max(1e-3, 20.0 * mu / 3e6)  # keep the FFT window near 3e6 points
        exact = gdp_epsilon_mpmath(mu, delta)
        try:
            lo, _, hi = _bracket(GaussianMechanism(sigma), steps, delta, h)
        except NumericalError:
            refused += 1
            continue
        answered += 1
        rows.append((sigma, steps, delta, h, lo, exact, hi))
        assert lo <= exact <= hi, rows[-1]
    assert answered >= 11, (answered, refused)


@pytest.mark.parametrize(
    "sigma,q,steps,delta",
    [(1.0, 0.01, 1000, 1e-5), (0.7, 0.05, 300, 1e-8), (2.0, 0.2, 2000, 1e-10), (0.5, 0.1, 50, 1e-6)],
)
def test_subsampled_gaussian_bracket_contains_contour_truth(sigma, q, steps, delta):
    mech = SubsampledGaussianMechanism(sigma, q)
    ref, err = truth.composition_epsilon([(mech, steps)], delta)
    lo, _, hi = _bracket(mech, steps, delta, 1e-3)
    assert lo - err <= ref <= hi + err, (lo, ref, err, hi)
    assert err < 1e-3 * (hi - lo) + 1e-9  # the truth's own error is negligible next to the bracket


@pytest.mark.parametrize("mu", [0.01, 0.5, 1.0, 10.0, 100.0, 300.0, 1000.0])
@pytest.mark.parametrize("delta", [0.05, 1e-5, 1e-10, 1e-100])
def test_gdp_accountant_is_exact_against_mpmath(mu, delta):
    sigma = 1.0 / mu
    r = GDPAccountant().compose(GaussianMechanism(sigma), 1).get_epsilon(delta)
    exact = gdp_epsilon_mpmath(mu, delta)
    assert r.kind == "exact"
    assert r.lower <= exact <= r.upper
    assert abs(r.value - exact) <= 1e-12 * max(exact, 1.0)


@pytest.mark.parametrize("sigma,steps,h", [(100.0, 1_000_000, 1e-3), (300.0, 1_000_000, 1e-4), (30.0, 100_000, 1e-4)])
def test_long_gaussian_composition_bracket_contains_exact_gdp(sigma, steps, h):
    # T compositions of the Gaussian mechanism are exactly mu-GDP with mu = sqrt(T)/sigma (mpmath reference);
    # large T exercises the FFT power's floating-point bound (it grows like T) and the window choice.
    # At delta = 1e-5 the accountant must answer; at 1e-9 it may refuse (NumericalError), never be wrong.
    mu = math.sqrt(steps) / sigma
    for delta in (1e-5, 1e-9):
        exact = gdp_epsilon_mpmath(mu, delta)
        try:
            lo, val, hi = _bracket(GaussianMechanism(sigma), steps, delta, h)
        except NumericalError:
            assert delta < 1e-5
            continue
        assert lo <= exact <= hi, (lo, exact, hi)
        assert val == hi
        assert (hi - lo) / exact < 1.5e-2  # at T = 1e6 the floating-point term dominates the width


@pytest.mark.parametrize("steps", [10_000, 100_000, 1_000_000, 10_000_000])
def test_long_subsampled_gaussian_bracket_contains_contour_truth(steps):
    # The benchmark's setting (q = 0.01, sigma = 1, delta = 1e-5, default grid 1e-4) at large T, where the
    # spectral composition is used; the reference is the saddle-contour truth (no discretization, no FFT).
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    ref, err = truth.composition_epsilon([(mech, steps)], 1e-5)
    acc = PLDAccountant().compose(mech, steps)
    r = acc.get_epsilon(1e-5)
    assert r.lower - err <= ref <= r.upper + err, (r.lower, ref, err, r.upper)
    assert (r.upper - r.lower) / ref < 1e-4
    assert all(type(acc._cache[d].up).__name__ == "SpectralPLD" for d in acc._cache)


@pytest.mark.parametrize(
    "sigma,q,steps,delta", [(1.0, 0.01, 3000, 1e-5), (0.8, 0.05, 20_000, 1e-8), (2.0, 0.2, 5000, 1e-10)]
)
def test_spectral_and_fft_compositions_bracket_the_same_truth(sigma, q, steps, delta, monkeypatch):
    # Both composition paths must certify the same independent truth; the spectral one (no T u growth of
    # the rounding bound) is never looser than the FFT power by more than a hair. The spectral accountant
    # runs alone here (no FFT power as a second certificate).
    monkeypatch.setattr(_pairs, "_BOTH_WINDOW", 0)
    mech = SubsampledGaussianMechanism(sigma, q)
    ref, err = truth.composition_epsilon([(mech, steps)], delta)
    spec = PLDAccountant(discretization=1e-3).compose(mech, steps)
    fft = PLDAccountant(discretization=1e-3).compose(mech, steps)
    fft._spectral = False
    rs, rf = spec.get_epsilon(delta), fft.get_epsilon(delta)
    assert type(spec._cache["remove"].up).__name__ == "SpectralPLD"
    assert type(fft._cache["remove"].up).__name__ == "ComposedPLD"
    for r in (rs, rf):
        assert r.lower - err <= ref <= r.upper + err, (r.lower, ref, err, r.upper)
    assert rs.upper <= rf.upper + 1e-9 * rf.upper
    for eps in (0.5 * ref, ref, 1.5 * ref):
        ds, df = spec.get_delta(eps), fft.get_delta(eps)
        assert max(ds.lower, df.lower) <= min(ds.upper, df.upper)


def test_composed_infinity_mass_keeps_tiny_masses():
    # 1 - prod (1 - x_p)^{c_p} against mpmath at 50 digits. The direct product rounds (1 - 1e-20)^(1e7) to 1
    # and loses the whole mass (1e-13), which the upper PMF must carry to +infinity.
    from dputils.accountants.pld._compose import _composed_inf_mass

    cases = [
        [(1e-20, 10_000_000)],
        [(1e-20, 10_000_000), (3e-17, 1000)],
        [(0.25, 3), (1e-9, 10**6)],
        [(0.0, 5)],
        [(1e-300, 10**9)],
    ]
    for parts in cases:
        with mp.workdps(50):
            exact = -mp.expm1(mp.fsum(c * mp.log1p(-mp.mpf(x)) for x, c in parts))
        up = _composed_inf_mass(parts, round_up=True)
        lo = _composed_inf_mass(parts, round_up=False)
        assert lo <= exact <= up, (parts, lo, exact, up)
        if exact > 0:
            assert (up - lo) / exact < 1e-12
    assert _composed_inf_mass([(1.0, 1), (1e-3, 2)], round_up=False) == 1.0


def test_long_composition_carries_the_infinite_mass_of_every_step():
    # The upper PMF of a Gaussian step puts its discretization tail delta(top) at +infinity; after T steps
    # at least 1 - (1 - x)^T of the composed P-mass is there. Both composition paths must keep it.
    from dputils.accountants.pld import discretize
    from dputils.accountants.pld._compose import _compose

    d = discretize(GaussianMechanism(20.0).pair("remove"), 1e-3, tail=1e-16)
    assert 0 < d.upper_inf < 1e-12
    steps = 5_000_000
    with mp.workdps(40):
        exact = float(-mp.expm1(steps * mp.log1p(-mp.mpf(d.upper_inf))))
    for spectral in (True, False):
        c = _compose([(d, steps)], "upper", 1e-20, spectral=spectral)
        assert c.inf_mass >= exact, (spectral, c.inf_mass, exact)
        assert c.inf_mass <= exact * (1 + 1e-9)


@pytest.mark.parametrize("n,i0,N,K", [(300, -17, 1000, 20), (4000, -2000, 9001, 60), (7, -3, 64, 20)])
def test_spectral_zeta_and_its_error_bound_against_mpmath(n, i0, N, K):
    # zeta(k) = 1 - f(k)/s of one PMF (the spectral path's building block) against a 40-digit sum; the
    # computed error bound must cover the actual error, and must not be vacuous (a few hundred ulps).
    from dputils.accountants.pld._spectral import _Part

    rng = np.random.default_rng(n)
    m = rng.random(n) ** 4
    m /= m.sum()
    p = _Part(m, i0, 5)
    z, err = p.zeta(N, K)
    with mp.workdps(40):
        for k in sorted({1, 2, K // 2, K}):
            exact = mp.fsum(
                mp.mpf(float(mi)) * (1 - mp.expjpi(-2 * mp.mpf(k) * (i - p.ctr) / N)) for i, mi in enumerate(m)
            ) / mp.mpf(p.s)
            diff = abs(complex(exact) - z[k - 1])
            assert diff <= err[k - 1], (k, diff, err[k - 1])
            assert err[k - 1] < 1e-12 * max(abs(complex(exact)), 1e-3)


def test_spectral_phi_bound_dominates_the_transform():
    # The cell bounds that decide which frequencies are dropped: for each cell of width 2 pi / Ms the
    # bound (FFT sample + Lipschitz, or Taylor) must be >= |phi| at every frequency inside it (dense check).
    from dputils.accountants.pld import discretize
    from dputils.accountants.pld._spectral import _Part

    d = discretize(SubsampledGaussianMechanism(0.8, 0.05).pair("remove"), 1e-2)
    p = _Part(d.upper, d.i0, 1000)
    Ms = 4096
    samp = p.samples(Ms)
    w = np.linspace(0.0, math.pi, 20_001)
    idx = np.arange(d.upper.size)
    phi = np.abs(np.exp(-1j * np.outer(w, idx)) @ d.upper) / d.upper.sum()
    cell = np.rint(w / (2 * math.pi / Ms)).astype(int)
    assert np.all(phi <= samp[cell] * (1 + 1e-12)), float(np.max(phi - samp[cell]))
    tay = p.taylor(w, w)
    ok = np.isfinite(tay)
    assert ok.sum() > 10
    assert np.all(phi[ok] <= tay[ok] * (1 + 1e-12))


def test_fft_power_is_not_built_where_the_spectral_certificate_suffices():
    # The benchmark's setting at T = 1000: the spectral bracket is ~1e-10 wide relative to delta, so no array
    # of the window's size may be held (this is what keeps the peak memory at dp_accounting's or below).
    acc = PLDAccountant().compose(SubsampledGaussianMechanism(1.0, 0.01), 1000)
    r = acc.get_epsilon(1e-5)
    acc.get_delta(r.upper)
    for dp in acc._cache.values():
        assert type(dp.up).__name__ == "SpectralPLD" and dp.up.window_points <= _pairs._BOTH_WINDOW
        assert dp._fft == {}


@pytest.mark.parametrize("loosen", [1.0, 1.5])
@pytest.mark.parametrize("delta", [1e-10, 1e-12])
def test_second_certificate_gives_the_better_of_both(delta, loosen, monkeypatch):
    # With the pairing forced at every query (ratio 0), each bound must be the better of the spectral-only and
    # the FFT-only accountants' bounds (each certified on its own), and the bracket must hold the truth. As
    # computed, the spectral bounds are the better ones here; loosened (upper bound x 1.5, lower bound / 1.5:
    # still bounds) the FFT power's must be taken instead.
    mech, steps, h = SubsampledGaussianMechanism(0.5, 0.1), 100, 1e-2
    upper, lower = pld.SpectralPLD._upper, pld.SpectralPLD._lower  # behind cert_upper/cert_lower/cert_bracket
    monkeypatch.setattr(pld.SpectralPLD, "_upper", lambda self, D, E: min(1.0, loosen * upper(self, D, E)))
    monkeypatch.setattr(pld.SpectralPLD, "_lower", lambda self, D, E: lower(self, D, E) / loosen)
    with monkeypatch.context() as m:
        m.setattr(_pairs, "_BOTH_WINDOW", 0)
        spec = PLDAccountant(discretization=h).compose(mech, steps)
        rs = spec.get_epsilon(delta)
        ds = [spec.get_delta(e) for e in (0.8 * rs.upper, rs.upper)]
    fft = PLDAccountant(discretization=h).compose(mech, steps)
    fft._spectral = False
    both = PLDAccountant(discretization=h).compose(mech, steps)
    monkeypatch.setattr(_pairs, "_PAIR_RATIO", 0.0)
    rf, rb = fft.get_epsilon(delta), both.get_epsilon(delta)
    assert rb.upper == min(rs.upper, rf.upper)
    assert rb.lower == max(rs.lower, rf.lower)
    assert (rb.upper == rf.upper) == (loosen > 1)
    assert set(both._cache["remove"]._fft) == {"upper", "lower"}
    ref, err = truth.composition_epsilon([(mech, steps)], delta)
    assert rb.lower - err <= ref <= rb.upper + err, (rb.lower, ref, err, rb.upper)
    for e, d_s in zip((0.8 * rs.upper, rs.upper), ds):
        d_f, d_b = fft.get_delta(e), both.get_delta(e)
        assert d_b.upper == min(d_s.upper, d_f.upper)
        assert d_b.lower == max(d_s.lower, d_f.lower)
        assert (d_b.upper == d_f.upper) == (loosen > 1)


def test_spectral_refusal_falls_back_to_the_fft_power(monkeypatch):
    # A spectral certificate that is too wide to answer (made so here by tripling its upper bound, which keeps
    # it an upper bound: its error term is then 2/3 of delta at the answer) must hand the query to the FFT
    # power of the same PMFs: the answer is then the FFT-only accountant's. With the fallback switched off
    # (window limit 0) the accountant must refuse.
    mech, steps, h, delta = SubsampledGaussianMechanism(1.0, 0.1), 100, 1e-2, 1e-6
    fft = PLDAccountant(discretization=h).compose(mech, steps)
    fft._spectral = False
    expected = fft.get_epsilon(delta).upper
    original = pld.SpectralPLD._upper
    monkeypatch.setattr(pld.SpectralPLD, "_upper", lambda self, D, E: min(1.0, 3.0 * original(self, D, E)))
    acc = PLDAccountant(discretization=h).compose(mech, steps)
    assert acc.get_epsilon(delta).upper == expected
    monkeypatch.setattr(_pairs, "_BOTH_WINDOW", 0)
    acc = PLDAccountant(discretization=h).compose(mech, steps)
    with pytest.raises(NumericalError, match="spectral"):
        acc._pass("epsilon", delta, h, delta, False)
    # (issue 35) the accountant then answers with the tilted composition, a bracket meeting the FFT power's
    res, ref = acc.get_epsilon(delta), fft.get_epsilon(delta)
    assert "tilt" in res.details and res.lower <= ref.upper and ref.lower <= res.upper


def test_bracket_holds_near_delta_one_with_the_summation_error_counted():
    # issue 24: 38 Gaussians of sigma 0.16026585133152987 at delta 1 - 1e-12 gave epsilon [0, 0], exact
    # 468.05 (the running sums over ~3 million masses lose ~1.7e-12); 22 Gaussians of sigma 0.3 at epsilon
    # 0 gave upper 0.9999999999987165 below the exact 1 - 5.5e-15. Truth: mpmath (a Gaussian composition is
    # mu-GDP with mu = sqrt(T)/sigma).
    import mpmath as mp

    from dputils.accountants import PLDAccountant
    from dputils.mechanisms import GaussianMechanism

    sigma, steps, delta = 0.16026585133152987, 38, 0.999999999999
    mu = math.sqrt(steps) / sigma
    with mp.workdps(60):

        def d(e, mu=mp.mpf(mu)):
            return mp.ncdf(mu / 2 - e / mu) - mp.exp(e) * mp.ncdf(-mu / 2 - e / mu)

        lo, hi = mp.mpf(0), mp.mpf(2000)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
        truth = float(lo)
        exact0 = float(1 - 2 * mp.ncdf(-mp.sqrt(22) / 0.3 / 2))  # delta(0) of 22 Gaussians of sigma 0.3
    res = PLDAccountant().compose(GaussianMechanism(sigma), steps).get_epsilon(delta)
    assert abs(truth - 468.05) < 0.01 and res.lower <= truth <= res.upper
    dres = PLDAccountant().compose(GaussianMechanism(0.3), 22).get_delta(0.0)
    assert dres.lower <= exact0 <= dres.upper


@pytest.mark.parametrize("sigma, steps, eps, delta", [(2.0, 400, 3.0, 1e-6), (5.0, 20, 0.5, 1e-3)])
def test_both_composition_kinds_answer_through_one_interface(sigma, steps, eps, delta):
    # The FFT power and the spectral composition of the same upper (connect-the-dots) PMF are used through
    # CertifiedComposition alone. Truth: Gaussian composition is mu-GDP with mu = sqrt(T)/sigma (Dong et al.,
    # Cor. 3.3), delta(eps) in closed form at 50 digits; the upper PMF dominates it, so every upper bound of
    # either kind is above the truth, and the two certified brackets (of one and the same PMF) overlap.
    from dputils.accountants.pld import CertifiedComposition, ComposedPLD, SpectralPLD, discretize
    from dputils.accountants.pld._compose import _compose

    d = discretize(GaussianMechanism(sigma).pair("remove"), 1e-3)
    kinds = [_compose([(d, steps)], "upper", 1e-20, spectral=s) for s in (True, False)]
    assert [type(c) for c in kinds] == [SpectralPLD, ComposedPLD]
    mu = math.sqrt(steps) / sigma
    with mp.workdps(50):
        truth = float(mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2))
    eps_truth = gdp_epsilon_mpmath(mu, delta)
    brackets = []
    for c in kinds:
        assert isinstance(c, CertifiedComposition)
        lo, up = c.cert_bracket(eps)
        assert (lo, up) == (c.cert_lower(eps), c.cert_upper(eps))
        assert lo <= up and up >= truth and up <= truth * (1 + 1e-2)  # the grid's pessimism, not more
        brackets.append((lo, up))
        e_up = c.epsilon_upper(delta)
        assert e_up >= eps_truth and c.cert_upper(e_up) <= delta
        e_lo = c.epsilon_lower(delta)
        assert e_lo is not None and e_lo <= e_up and c.cert_lower(e_lo) >= delta
    assert max(b[0] for b in brackets) <= min(b[1] for b in brackets)
