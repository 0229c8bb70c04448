"""Issue 37 item 1: the truths of the gauss_audit chapter's fixed-input targets (T11a-c in
params/targets/gauss_audit.yml), recomputed here in mpmath by code that shares nothing with dputils: the
Steinke et al. p-value with exact binomial sums, the f-DP "rh with cap" recursion with mu from the mu-GDP
delta equation solved by bisection, and the Bonferroni box (t and chi-squared quantiles from mpmath's incomplete
beta and gamma functions) with eps_theta from the roots of the quadratic log-likelihood ratio. The formulas are
those of the dputils.audit.onerun module docstring and of the paper's Lemma 1 / Sec. 4.2.
"""

from __future__ import annotations

import mpmath as mp
import pytest

from dputils.book.scorecard import read_target_spec, target_spec_path


def steinke_p(m, r, v, eps, delta):
    p = mp.e**eps / (1 + mp.e**eps)
    pmf = [mp.binomial(r, k) * p**k * (1 - p) ** (r - k) for k in range(r + 1)]
    beta = mp.fsum(pmf[v:])
    best = max(mp.fsum(pmf[v - i : v]) / i for i in range(1, v + 1))
    return min(mp.mpf(1), beta + 2 * m * delta * best)


def sup_eps(ok, hi=mp.mpf(1), n=80):
    lo = mp.mpf(0)
    assert ok(lo)
    while ok(hi):
        lo, hi = hi, 2 * hi
    for _ in range(n):
        mid = (lo + hi) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def steinke_eps(m, r, v, delta, alpha):
    return sup_eps(lambda e: steinke_p(m, r, v, e, delta) <= alpha)


def gdp_delta(eps, mu):
    return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)


def mu_for(eps, delta):
    lo, hi = mp.mpf("1e-6"), mp.mpf(1)
    while gdp_delta(eps, hi) < delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if gdp_delta(eps, mid) < delta:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def ninv(x):
    return -mp.sqrt(2) * mp.erfinv(1 - 2 * x) if x < 1 else mp.inf


def fdp_falsified(m, r, v, eps, delta, alpha):
    mu = mu_for(eps, delta)
    rr = alpha * mp.mpf(v) / m
    h = alpha * mp.mpf(r - v) / m
    for i in range(v - 1, -1, -1):
        g = mp.ncdf(ninv(rr) - mu) if rr < 1 else mp.mpf(1)
        hn = max(h, g)
        if hn == h:
            break
        rr = min(rr + mp.mpf(i) / (r - i) * (hn - h), mp.mpf(1))
        h = hn
    return rr + h > mp.mpf(r) / m


def fdp_eps(m, r, v, delta, alpha):
    return sup_eps(lambda e: fdp_falsified(m, r, v, e, delta, alpha), n=60)


def hs_directed(eps, mp_, sp, mq, sq):
    """H_{e^eps}(N(mp, sp^2) || N(mq, sq^2)) by the roots of the quadratic log-likelihood ratio."""
    A = (1 / sq**2 - 1 / sp**2) / 2
    B = mp_ / sp**2 - mq / sq**2
    c = (mq**2 / sq**2 - mp_**2 / sp**2) / 2 + mp.log(sq / sp) - eps
    P = lambda a, b, m_, s_: mp.ncdf((b - m_) / s_) - mp.ncdf((a - m_) / s_)
    if abs(A) < mp.mpf("1e-30"):
        if B > 0:
            a, b = -c / B, mp.inf
        else:
            a, b = -mp.inf, -c / B
        return max(mp.mpf(0), P(a, b, mp_, sp) - mp.e**eps * P(a, b, mq, sq))
    disc = B**2 - 4 * A * c
    if disc <= 0:
        return mp.mpf(1) - mp.e**eps if A > 0 else mp.mpf(0)
    x1, x2 = sorted([(-B - mp.sqrt(disc)) / (2 * A), (-B + mp.sqrt(disc)) / (2 * A)])
    inside = P(x1, x2, mp_, sp) - mp.e**eps * P(x1, x2, mq, sq)
    if A < 0:
        return max(mp.mpf(0), inside)
    return max(mp.mpf(0), (1 - mp.e**eps) - inside)


def eps_pair(delta, d, so, si, n=60):
    f = lambda e: max(hs_directed(e, d, si, 0, so), hs_directed(e, 0, so, d, si))
    if f(mp.mpf(0)) <= delta:
        return mp.mpf(0)
    lo, hi = mp.mpf(0), mp.mpf(1)
    while f(hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(n):
        mid = (lo + hi) / 2
        if f(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def quantile_scores(n, mu, s):
    return [mu + s * ninv(mp.mpf(2 * j - 1) / (2 * n)) for j in range(1, n + 1)]


def t_ppf(p, k):
    # inverse of the Student-t CDF through the regularised incomplete beta function
    cdf = lambda x: 1 - mp.betainc(k / 2, mp.mpf(1) / 2, 0, k / (k + x**2), regularized=True) / 2
    return mp.findroot(lambda x: cdf(x) - p, mp.mpf(2.5))


def chi2_ppf(p, k):
    return mp.findroot(lambda x: mp.gammainc(mp.mpf(k) / 2, 0, x / 2, regularized=True) - p, mp.mpf(k))


def box(x, alpha):
    n = len(x)
    xb = mp.fsum(x) / n
    s = mp.sqrt(mp.fsum((xi - xb) ** 2 for xi in x) / (n - 1))
    a4 = alpha / 4
    t = t_ppf(1 - a4 / 2, n - 1)
    clo, chi = chi2_ppf(a4 / 2, n - 1), chi2_ppf(1 - a4 / 2, n - 1)
    return (xb - t * s / mp.sqrt(n), xb + t * s / mp.sqrt(n)), (
        mp.sqrt((n - 1) * s * s / chi),
        mp.sqrt((n - 1) * s * s / clo),
    )


def golden_min(f, a, b, n=40):
    g = (mp.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(n):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return min(fc, fd), (c if fc < fd else d)


def box_audit_truth(n=500, mu_in=3, s_in=mp.mpf("1.1"), delta=mp.mpf("1e-5"), alpha=mp.mpf("0.05")):
    """inf of eps_theta over the Bonferroni box of the quantile scores: the separation at its lower end, s_out at its
    upper end (both checked on a grid by the caller), and a golden-section search over s_in."""
    I = quantile_scores(n, mp.mpf(mu_in), s_in)
    O = quantile_scores(n, mp.mpf(0), mp.mpf(1))
    (mil, mih), (sil, sih) = box(I, alpha)
    (mol, moh), (sol, soh) = box(O, alpha)
    d = mil - moh
    val, arg = golden_min(lambda si: eps_pair(delta, d, soh, si), sil, sih)
    return val, dict(d=d, s_out=soh, s_in=arg, box=((mil, mih), (sil, sih), (mol, moh), (sol, soh)))


@pytest.fixture(scope="module")
def spec():
    return read_target_spec(target_spec_path("gauss_audit"))


def test_steinke_truth(spec):
    with mp.workdps(40):
        got = steinke_eps(1000, 100, 90, mp.mpf("1e-5"), mp.mpf("0.05"))
    assert abs(float(got) - spec["T11b"]["paper"]) < 1e-9


def test_fdp_truth(spec):
    with mp.workdps(30):
        got = fdp_eps(1000, 100, 90, mp.mpf("1e-5"), mp.mpf("0.05"))
    assert abs(float(got) - spec["T11c"]["paper"]) < 1e-9


def test_box_truth(spec):
    with mp.workdps(30):
        val, info = box_audit_truth()
        # the minimiser's corner: a larger separation or a smaller s_out only raises the infimum over s_in
        (mil, mih), (sil, sih), (mol, moh), (sol, soh) = info["box"]
        grid = [sil + (sih - sil) * k / 6 for k in range(7)]
        for d, so in ((info["d"] + (mih - mil) / 4, soh), (info["d"], soh - (soh - sol) / 4)):
            assert min(eps_pair(mp.mpf("1e-5"), d, so, si, n=40) for si in grid) > val
    assert abs(float(val) - spec["T11a"]["paper"]) < 5e-6
