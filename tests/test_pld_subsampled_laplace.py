"""The Poisson-subsampled Laplace mechanism in the PLD accountant (issue 24), against independent truths.

* one step: the hockey-stick divergence of the two mixtures by mpmath quadrature at 30 digits, split at the
  point where p - e^eps q changes sign (found by mpmath's root finder), with densities written here from
  the definition (not from :mod:`dputils.mechanisms`), both directions;
* compositions: dp_accounting's own PLD (``from_laplace_mechanism(..., sampling_prob=q)``), its pessimistic
  and optimistic estimates at the same grid;
* limits: q = 1 is the plain Laplace mechanism, q -> 0 is no privacy loss.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dputils.accountants.pld import PLDAccountant
from dputils.mechanisms import LaplaceMechanism, LaplacePair, SubsampledLaplaceMechanism, SubsampledLaplacePair


def _exact_delta(b: float, q: float, eps: float, direction: str, d: float = 1.0) -> float:
    """sup_S P(S) - e^eps Q(S) = int (p - e^eps q)_+ for the mixture pair, by mpmath at 30 digits."""
    with mp.workdps(30):
        b, q, d, e = mp.mpf(b), mp.mpf(q), mp.mpf(d), mp.exp(mp.mpf(eps))

        def lap(x, m):
            return mp.exp(-abs(x - m) / b) / (2 * b)

        def mix(x):
            return (1 - q) * lap(x, 0) + q * lap(x, d)

        p, qq = (mix, lambda x: lap(x, 0)) if direction == "remove" else ((lambda x: lap(x, 0)), mix)

        def h(x):
            return p(x) - e * qq(x)

        pts = [-mp.inf, mp.mpf(0)]
        a, c = d * mp.mpf(10) ** -25, d - d * mp.mpf(10) ** -25
        if h(a) * h(c) < 0:  # the likelihood ratio is monotone on (0, d) and constant outside
            pts.append(mp.findroot(h, (a, c), solver="anderson"))
        pts += [d, mp.inf]
        return float(mp.quad(lambda x: max(h(x), 0), pts))


CASES = [(0.5, 0.2), (1.0, 0.01), (2.0, 0.5), (0.1, 0.05)]


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("b,q", CASES)
def test_single_step_profile_matches_mpmath(b, q, direction):
    pair = SubsampledLaplacePair(b, q, 1.0, direction)
    lo, hi = pair.loss_support
    for frac in (-0.2, 0.01, 0.3, 0.5, 0.8, 0.99):
        eps = lo + frac * (hi - lo)
        exact = _exact_delta(b, q, eps, direction)
        assert exact > 0
        assert float(pair.delta(eps)) == pytest.approx(exact, rel=1e-9), (eps, exact)
    # at and above the largest loss the divergence is 0 (the loss is bounded)
    assert float(pair.delta(hi * (1 + 1e-9))) == 0.0 and _exact_delta(b, q, hi * (1 + 1e-9), direction) == 0.0
    # the tails are consistent: P[L > e] - e^e Q[L > e] = delta, P[L > e] + P[L <= e] = 1
    e = np.linspace(lo - 0.1, hi + 0.1, 41)
    np.testing.assert_allclose(pair.sf_p(e) - np.exp(e) * pair.sf_q(e), pair.delta(e), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pair.sf_p(e) + pair.cdf_p(e), 1.0, rtol=0, atol=1e-15)


def test_loss_range_closed_form():
    # remove: L in [log(1 + q(e^{-s} - 1)), log(1 + q(e^{s} - 1))]; add: the negatives, reversed
    b, q = 0.5, 0.2
    s = 1.0 / b
    lo, hi = math.log(1 + q * (math.exp(-s) - 1)), math.log(1 + q * (math.exp(s) - 1))
    assert SubsampledLaplacePair(b, q).loss_support == pytest.approx((lo, hi), rel=1e-14)
    assert SubsampledLaplacePair(b, q, direction="add").loss_support == pytest.approx((-hi, -lo), rel=1e-14)
    # the loss attains both ends on the atoms x <= 0 and x >= Delta
    rng = np.random.default_rng(3)
    for direction in ("remove", "add"):
        pair = SubsampledLaplacePair(b, q, direction=direction)
        losses = pair.sample_loss(20000, rng)
        assert losses.min() >= pair.loss_support[0] - 1e-12 and losses.max() <= pair.loss_support[1] + 1e-12


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_one_step_bracket_contains_the_exact_value(direction):
    b, q = 0.5, 0.2
    acc = PLDAccountant(direction=direction).compose(SubsampledLaplaceMechanism(b, q), 1)
    hi = SubsampledLaplacePair(b, q, 1.0, direction).loss_support[1]
    for eps in (0.0, 0.5 * hi, 0.9 * hi):
        exact = _exact_delta(b, q, eps, direction)
        r = acc.get_delta(eps)
        assert r.lower <= exact <= r.upper, (eps, exact, r)
        assert r.upper <= exact * (1 + 1e-5)  # the reported (upper) end is close; the lower end is looser:
        assert r.upper - r.lower <= 1e-2 * exact  # its rounding correction (s_eta) costs up to 2e-3 here
    for delta in (1e-2, 1e-4):
        r = acc.get_epsilon(delta)
        # delta(eps) decreases: the exact epsilon lies in [lower, upper] iff these hold
        assert _exact_delta(b, q, r.upper, direction) <= delta <= _exact_delta(b, q, r.lower, direction), r
        assert r.upper - r.lower <= 1e-3


def _dpa(b: float, q: float, steps: int, pessimistic: bool):
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_laplace_mechanism(
        b, sensitivity=1.0, value_discretization_interval=1e-4, sampling_prob=q, pessimistic_estimate=pessimistic
    ).self_compose(steps)


@pytest.mark.parametrize(
    "b,q,steps,eps,delta", [(1.0, 0.01, 1000, 0.5, 1e-5), (2.0, 0.1, 100, 1.0, 1e-6), (0.5, 0.2, 10, 2.0, 1e-8)]
)
def test_compositions_against_dp_accounting(b, q, steps, eps, delta):
    pytest.importorskip("dp_accounting")
    ours = PLDAccountant(discretization=1e-4).compose(SubsampledLaplaceMechanism(b, q), steps)
    pess, opt = _dpa(b, q, steps, True), _dpa(b, q, steps, False)
    rd, re = ours.get_delta(eps), ours.get_epsilon(delta)
    # both methods bracket the same exact value: the brackets intersect ...
    assert rd.lower <= pess.get_delta_for_epsilon(eps) * (1 + 1e-9)
    assert opt.get_delta_for_epsilon(eps) <= rd.upper * (1 + 1e-9)
    assert re.lower <= pess.get_epsilon_for_delta(delta) + 1e-9
    assert opt.get_epsilon_for_delta(delta) <= re.upper + 1e-9
    # ... and at the same grid width our certified upper end is dp_accounting's pessimistic estimate to 1e-6
    assert rd.upper == pytest.approx(pess.get_delta_for_epsilon(eps), rel=1e-6)
    assert re.upper == pytest.approx(pess.get_epsilon_for_delta(delta), rel=1e-6)


def test_q_one_is_the_laplace_mechanism():
    e = np.linspace(-4.0, 4.0, 161)
    for direction in ("remove", "add"):
        a, c = SubsampledLaplacePair(0.3, 1.0, direction=direction), LaplacePair(0.3, direction=direction)
        for f in ("sf_p", "sf_q", "cdf_p", "delta"):
            np.testing.assert_allclose(getattr(a, f)(e), getattr(c, f)(e), rtol=1e-12, atol=1e-15, err_msg=f)
    sub = PLDAccountant().compose(SubsampledLaplaceMechanism(0.7, 1.0), 20)
    lap = PLDAccountant().compose(LaplaceMechanism(0.7), 20)
    assert sub.get_epsilon(1e-6).upper == pytest.approx(lap.get_epsilon(1e-6).upper, rel=1e-9)
    assert sub.get_delta(5.0).upper == pytest.approx(lap.get_delta(5.0).upper, rel=1e-9)


def test_q_to_zero_is_no_privacy_loss():
    for q in (1e-3, 1e-6, 1e-9):
        acc = PLDAccountant().compose(SubsampledLaplaceMechanism(1.0, q), 100)
        r = acc.get_epsilon(1e-5)
        assert 0.0 <= r.lower <= r.upper
        # the largest possible loss is 100 log(1 + q(e - 1)), so epsilon is below it (plus grid widths)
        assert r.upper <= 100 * math.log1p(q * math.expm1(1.0)) + 3e-4
    assert PLDAccountant().compose(SubsampledLaplaceMechanism(1.0, 1e-9), 100).get_delta(1e-3).upper <= 1e-12


def test_adapters_certify_poisson_sampled_laplace():
    dpa = pytest.importorskip("dp_accounting")
    from dputils.interop.dp_accounting import make_accountant

    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.2, dpa.LaplaceDpEvent(0.5)), 3)
    top = 3 * math.log1p(0.2 * math.expm1(2.0))  # the pure-DP epsilon: the largest composed loss
    for name in ("pld", "spa", "edgeworth"):
        acc = make_accountant(name)
        assert acc.supports(ev)
        eps = acc.compose(ev).get_epsilon(1e-14)
        assert top * (1 - 1e-9) - 1e-6 <= eps <= top + 1e-3, name
    assert make_accountant("pld").compose(ev).get_delta(top * (1 + 1e-6)) <= 1e-6


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_atoms_are_counted_above_any_epsilon_below_their_exact_loss(direction):
    # the top atom (remove: x >= Delta; add: x <= 0) has the largest loss; for every float epsilon below
    # its exact value (mpmath) the tail P[L > eps] must contain the atom's whole mass (pessimistic rounding)
    b, q = 0.5, 0.2
    with mp.workdps(40):
        s = 1 / mp.mpf(b)
        g_hi, g_lo = mp.log(1 + q * (mp.exp(s) - 1)), mp.log(1 + q * (mp.exp(-s) - 1))
        top = g_hi if direction == "remove" else -g_lo
        mass = (1 - q) * mp.exp(-s) / 2 + q / 2 if direction == "remove" else mp.mpf(1) / 2
    pair = SubsampledLaplacePair(b, q, 1.0, direction)
    eps = float(top)
    while mp.mpf(eps) >= top:
        eps = math.nextafter(eps, -math.inf)
    for _ in range(8):  # the float just below the exact top loss and a few more below it
        assert float(pair.sf_p(eps)) >= float(mass) * (1 - 1e-12), eps
        eps = math.nextafter(eps, -math.inf)


# ------------------------------------------------------------------------------------------------ RDP
def _exact_renyi(b: float, q: float, alpha: int, direction: str) -> float:
    """D_alpha of the two mixtures by mpmath quadrature at 30 digits (densities written here)."""
    with mp.workdps(30):
        b, q = mp.mpf(b), mp.mpf(q)

        def lap(x, m):
            return mp.exp(-abs(x - m) / b) / (2 * b)

        def mix(x):
            return (1 - q) * lap(x, 0) + q * lap(x, 1)

        p, qq = (mix, lambda x: lap(x, 0)) if direction == "remove" else ((lambda x: lap(x, 0)), mix)
        integral = mp.quad(lambda x: p(x) ** alpha * qq(x) ** (1 - alpha), [-mp.inf, 0, 0.25, 0.5, 0.75, 1, mp.inf])
        return float(mp.log(integral) / (alpha - 1))


@pytest.mark.parametrize(
    "b,q,alpha",
    [(0.5, 0.2, 2), (1.0, 1e-4, 2), (1.0, 0.01, 16), (3.0, 0.3, 5), (0.05, 0.9, 64), (0.5, 0.5, 1024), (0.5, 1.0, 4)],
)
def test_rdp_moments_bound_mpmath_in_each_direction(b, q, alpha):
    from dputils.accountants.rdp import _slap_log_moment_add, _slap_log_moment_remove, subsampled_laplace_rdp

    ours = {
        "remove": _slap_log_moment_remove(q, 1 / b, alpha) / (alpha - 1),
        "add": _slap_log_moment_add(q, 1 / b, alpha) / (alpha - 1),
    }
    for direction, bound in ours.items():
        exact = _exact_renyi(b, q, alpha, direction)
        assert exact <= bound <= exact * (1 + 1e-4) + 1e-12, (direction, bound, exact)
    assert subsampled_laplace_rdp(q, b, float(alpha)) == max(ours.values())


def test_rdp_q_one_and_fractional_orders():
    from dputils.accountants.rdp import mechanism_rdp, subsampled_laplace_rdp

    for alpha in (2.0, 7.0, 40.0):  # q = 1: Mironov's closed form of the Laplace mechanism (Prop. 6)
        lap = mechanism_rdp(LaplaceMechanism(0.7), alpha)
        assert lap <= subsampled_laplace_rdp(1.0, 0.7, alpha) <= lap * (1 + 1e-4)
    # a fractional order takes the next integer's value: an upper bound, the divergence growing with the order
    assert subsampled_laplace_rdp(0.1, 1.0, 2.5) == subsampled_laplace_rdp(0.1, 1.0, 3.0)
    assert _exact_renyi(1.0, 0.1, 3, "remove") >= subsampled_laplace_rdp(0.1, 1.0, 2.0)


def test_rdp_epsilon_is_above_the_pld_bracket():
    from dputils.accountants.rdp import RDPAccountant

    for b, q, steps, delta in [(1.0, 0.01, 1000, 1e-5), (0.5, 0.2, 10, 1e-8)]:
        mech = SubsampledLaplaceMechanism(b, q)
        rdp = RDPAccountant().compose(mech, steps).get_epsilon(delta)
        pld = PLDAccountant().compose(mech, steps).get_epsilon(delta)
        # both are upper bounds of the same exact epsilon; RDP's conversion is the looser (within 10% here)
        assert pld.lower <= rdp.value <= 1.1 * pld.upper
