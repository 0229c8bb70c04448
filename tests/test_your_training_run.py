"""dputils.practitioner and the "Your training run" chapter's helper.

Independent truths: at B = N every sampler puts each example in every step, so the run is E compositions of the
Gaussian mechanism, exactly mu-GDP with mu = sqrt(E)/sigma; its epsilon(delta) is solved here from the closed
form delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) with scipy (not through dputils.curves).
dp_accounting's PLD (another implementation) checks the Poisson bracket at a subsampled setting.
"""

from __future__ import annotations

import math
import warnings

import pytest
from scipy import optimize, stats

from dputils import practitioner as pr
from dputils.accountants import registry
from dputils.accountants.base import Accountant
from dputils.book.chapters import your_training_run as ch
from dputils.errors import DPValueError


def exact_gdp_epsilon(mu: float, delta: float) -> float:
    def f(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta

    return optimize.brentq(f, 0.0, 100.0, xtol=1e-14, rtol=1e-14)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(dataset_size=0), "dataset_size"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=2000), "batch_size"),
        (dict(epochs=0), "epochs"),
        (dict(sigma=-1.0), "sigma"),
        (dict(sigma=float("nan")), "sigma"),
        (dict(sampler="cyclic"), "sampler"),
    ],
)
def test_bad_runs_are_refused_by_name(kw, word):
    args = dict(dataset_size=1000, batch_size=100, epochs=2, sigma=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=word):
        pr.TrainingRun(**args)


def test_steps_and_rate():
    r = pr.TrainingRun(60000, 256, 15, 1.1)
    assert r.steps_per_epoch == 234 and r.steps == 3516  # ceil(15 * 60000 / 256)
    assert r.with_sampler("shuffling").steps == 15 * 234
    assert r.q == pytest.approx(256 / 60000, rel=1e-15)


@pytest.mark.parametrize("sampler", pr.SAMPLERS)
def test_full_batch_is_the_gaussian_mechanism(sampler):
    """B = N: every sampler gives E Gaussian steps; certified ends hold the closed form, exact ones equal it."""
    sigma, E, delta = 2.0, 4, 1e-5
    truth = exact_gdp_epsilon(math.sqrt(E) / sigma, delta)
    answers = pr.account(pr.TrainingRun(1000, 1000, E, sigma, sampler), delta)
    assert answers and all(not a.error for a in answers)
    for a in answers:
        if a.certified_upper is not None:
            assert a.certified_upper >= truth * (1 - 1e-9), (a.name, a.certified_upper, truth)
        if a.lower is not None and a.answer != "approximation":
            assert a.lower <= truth * (1 + 1e-9), (a.name, a.lower, truth)
        if a.answer == "bracket":  # PLD, the exact shuffling mixture: tight here
            assert a.epsilon == pytest.approx(truth, rel=1e-4), a.name
        assert a.seconds >= 0


def test_poisson_lists_the_registered_accountants_and_their_guarantees():
    answers = pr.account(pr.TrainingRun(60000, 256, 15, 1.1), 1e-5)
    names = [a.name for a in answers]
    assert {"pld", "rdp", "gdp", "spa", "edgeworth"} <= set(names)
    kinds = {a.name: a.answer for a in answers}
    assert kinds["pld"] == "bracket" and kinds["rdp"] == "upper-bound" and kinds["gdp"] == "approximation"
    gdp = next(a for a in answers if a.name == "gdp")
    assert gdp.lower is None and gdp.upper is None and gdp.certified_upper is None


def test_poisson_pld_bracket_against_dp_accounting():
    pytest.importorskip("dp_accounting")
    from dputils import baselines
    from dputils.mechanisms import SubsampledGaussianMechanism

    run = pr.TrainingRun(60000, 256, 15, 1.1)
    (pld,) = pr.account(run, 1e-5, names=["pld"])
    other = baselines.dp_accounting_pld_epsilon(SubsampledGaussianMechanism(1.1, run.q), run.steps, 1e-5)
    assert pld.lower <= other
    assert other == pytest.approx(pld.upper, rel=1e-3)


def test_shuffling_is_sqrt_e_over_sigma_gdp_whatever_the_batch():
    """The strong-adversary analysis gives no amplification: mu = sqrt(E)/sigma for any N, B."""
    (a,) = pr.account(pr.TrainingRun(60000, 256, 15, 1.1, "shuffling"), 1e-5)
    assert a.epsilon == pytest.approx(exact_gdp_epsilon(math.sqrt(15) / 1.1, 1e-5), rel=1e-8)


def test_random_allocation_composes_epochs():
    """E independent epochs: the Renyi bound of E epochs is between one epoch's and E times it."""
    one = pr.account(pr.TrainingRun(2000, 200, 1, 1.0, "random-allocation"), 1e-5)[0].epsilon
    four = pr.account(pr.TrainingRun(2000, 200, 4, 1.0, "random-allocation"), 1e-5)[0].epsilon
    assert one < four < 4 * one


def test_names_that_do_not_apply_are_refused():
    with pytest.raises(DPValueError, match="do not apply"):
        pr.account(pr.TrainingRun(1000, 100, 1, 1.0, "shuffling"), 1e-5, names=["pld"])
    with pytest.raises(DPValueError, match="does not apply"):
        pr.make_accountant("pld", pr.TrainingRun(1000, 100, 1, 1.0, "random-allocation"))
    with pytest.raises(ValueError, match="delta"):
        pr.account(pr.TrainingRun(1000, 100, 1, 1.0), 0.0)


class _Refuser(Accountant):
    name = "_t-alloc"

    def _check_supported(self, mechanism):
        raise DPValueError("_t-alloc: a test accountant that refuses everything")

    def get_epsilon(self, delta):  # pragma: no cover - never reached
        raise NotImplementedError

    def get_delta(self, epsilon):  # pragma: no cover
        raise NotImplementedError


def test_a_registered_random_allocation_accountant_appears_and_a_refusal_is_reported():
    registry.register("_t-alloc", label="T", answer="bracket", events={"random-allocation"}, cost="cheap", help="test")(
        _Refuser
    )
    try:
        names = [n for n, *_ in pr.accountants_for("random-allocation")]
        assert "_t-alloc" in names and "matrix-renyi-tight" in names
        answers = pr.account(pr.TrainingRun(1000, 100, 1, 1.0, "random-allocation"), 1e-5)
        refused = next(a for a in answers if a.name == "_t-alloc")
        assert refused.epsilon is None and "refuses everything" in refused.error
    finally:
        registry._REGISTRY.pop("_t-alloc", None)


def test_calibrated_sigma_meets_the_closed_form():
    """At B = N the exact sigma for (eps, delta) is sqrt(E)/mu* with mu* from the closed form."""
    E, eps, delta = 4, 2.0, 1e-5
    mu_star = optimize.brentq(lambda m: exact_gdp_epsilon(m, delta) - eps, 0.05, 5.0, xtol=1e-14)
    sigma_star = math.sqrt(E) / mu_star
    c = pr.calibrate_sigma(pr.TrainingRun(1000, 1000, E, 1.0), eps, delta, "pld")
    assert c.achieved <= eps
    assert sigma_star * (1 - 1e-4) <= c.value <= sigma_star * (1 + 2e-3)


def test_simulated_audit_stays_below_the_ceiling_and_the_certificate():
    run = pr.TrainingRun(60000, 256, 15, 1.1)
    a = pr.simulated_audit(run, 2000, 1e-5, n_bootstrap=300, seed=1)
    assert a["n_in"] + a["n_out"] == 2000
    (pld,) = pr.account(run, 1e-5, names=["pld"])
    assert a["ceiling"] <= pld.upper
    assert all(0 <= v <= a["ceiling"] for v in a["lower"].values()), a
    with pytest.raises(DPValueError, match="sampler"):
        pr.simulated_audit(run.with_sampler("shuffling"), 100, 1e-5)


def test_position_words():
    assert ch.position(1.0, 0.9, 1.1) == ("inside", 0.0)
    assert ch.position(1.21, 1.0, 1.1)[0] == "above"
    assert ch.position(1.21, 1.0, 1.1)[1] == pytest.approx(0.1)
    assert ch.position(0.9, 1.0, 1.1)[1] == pytest.approx(-0.1)
    assert ch.position_words(0.9, 1.0, 1.1).startswith("10% below")
    assert ch.position_words(1.21, 1.0, 1.1).startswith("10% above")


def test_estimate_accountants_report_their_own_answer_not_the_pld_assisted_default():
    """SPA's default answer at a small-T run consults the PLD (its Theorem-5 bracket is wide there); the
    comparison must show SPA's own estimate and bracket, computed here with ``fallback="none"``."""
    from dputils.accountants.spa import SaddlePointAccountant
    from dputils.mechanisms import SubsampledGaussianMechanism

    run = pr.TrainingRun(10000, 100, 1, 1.0)  # q 0.01, T 100
    (a,) = pr.account(run, 1e-5, names=["spa"])
    own = SaddlePointAccountant(fallback="none").compose(SubsampledGaussianMechanism(1.0, 0.01), 100)
    r = own.get_epsilon(1e-5)
    assert a.note.startswith("own answer")
    assert a.epsilon == pytest.approx(float(r.value), rel=1e-12)
    assert a.lower == pytest.approx(float(r.lower), rel=1e-12) and a.upper == pytest.approx(float(r.upper), rel=1e-12)
