"""The Gaussian one-run auditor (Algorithm 1 of {cite}`gauss_audit`).

Given real-valued canary scores of absent (OUT) and present (IN) canaries, the auditor models them as
``OUT ~ N(mu_out, s_out^2)`` and ``IN ~ N(mu_in, s_in^2)``, builds a (1 - alpha) confidence region
``C_alpha`` for ``theta = (mu_in, s_in, mu_out, s_out)`` and returns

    eps_lb = inf_{theta in C_alpha} eps_theta(delta)                                 (Algorithm 1, step 2)

with ``eps_theta`` the symmetrised Gaussian-pair epsilon of Eq. (2) (:mod:`.gaussian_pair`).
Proposition 2: ``Pr[eps_lb <= eps_theta*] >= 1 - alpha`` whenever ``C_alpha`` covers ``theta*`` with
probability ``>= 1 - alpha``. The guarantee is about the Gaussian model of the scores; it transfers to
the mechanism under Model 1 and the Gaussian approximation of Theorem 1.

Two regions (Section 4.2):

* ``"bonferroni"``: a box of two-sided Student-t intervals for the means and chi-squared intervals for
  the standard deviations, each at level 1 - alpha/4 (finite-sample exact for Gaussian scores);
* ``"ellipsoid"``: ``{theta : (theta - theta_hat)^T Sigma^{-1} (theta - theta_hat) <= chi2_{4,1-alpha}}``
  with ``Sigma`` the covariance of B bootstrap replicates of ``theta_hat`` (asymptotic; it
  under-covers at small m, which the notebook measures).

The infimum. ``eps_theta`` depends on theta only through ``phi = (mu_in - mu_out, s_out, s_in)`` (shift
invariance), a linear image of theta. The image of the 4-D box is a 3-D box and the image of the 4-D
ellipsoid is the 3-D ellipsoid with covariance ``M Sigma M^T`` and the same radius, so the search is
over a 3-D set: a dense vectorised scan (the box on a grid including its corners; the ellipsoid on
thousands of quasi-uniform directions at several radii including the centre) followed by rounds of
local zoomed scans around the best points. Whether the region touches the zero set
``{mu_in = mu_out, s_in = s_out}`` (where eps_theta = 0) is decided in closed form. The returned
minimiser is a point of the region, so ``eps_lb <= eps_theta_hat`` always holds; the search is not a
certificate that no lower value exists, but a dense scan cannot silently return the point estimate
the way a failed local optimiser does (note, pitfall 4).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from ..errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
)
from ..resources import check_memory, check_work
from .gaussian_pair import DIRECTIONS, _epsilon_pair_raw

__all__ = [
    "AuditResult",
    "check_scores",
    "fit_theta",
    "bonferroni_box",
    "bootstrap_ellipsoid",
    "gauss_audit",
    "epsilon_of_theta",
]

REGIONS = ("ellipsoid", "bonferroni")


@dataclass
class AuditResult:
    """One audit. ``epsilon_lower`` is the (1 - alpha) empirical lower bound on epsilon."""

    epsilon_lower: float
    method: str
    delta: float
    alpha: float | None
    n_in: int
    n_out: int
    details: dict[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.epsilon_lower)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("details"))
        return d


def check_scores(in_scores, out_scores, min_size: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Validate and return the IN and OUT score arrays as 1-D float arrays."""
    res = []
    for name, s in (("in_scores", in_scores), ("out_scores", out_scores)):
        raw = np.asarray(s)
        if raw.dtype.kind == "c":
            raise DPValueError(f"{name} must be real numbers, got complex values")
        if raw.dtype.kind not in "biuf":
            try:
                raw = raw.astype(float)
            except (TypeError, ValueError):
                raise DPValueError(f"{name} must be real numbers, got values of type {raw.dtype}") from None
        if sum(n > 1 for n in raw.shape) > 1:
            raise DPValueError(f"{name} must be a 1-D array of scores, got shape {raw.shape}")
        a = raw.astype(float).ravel()
        if a.size < min_size:
            raise DPValueError(f"{name} must hold at least {min_size} scores, got {a.size}")
        if not np.all(np.isfinite(a)):
            raise DPValueError(f"{name} must be finite (found NaN or inf)")
        res.append(a)
    return res[0], res[1]


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """A seed for ``numpy.random.default_rng``: None or an integer >= 0."""
    return None if seed is None else check_nonnegative_int(name, seed)


#: Elementary operations per resampled score (index draw, gather, mean and variance), for work estimates.
_BOOTSTRAP_OPS_PER_SCORE = 10


def check_bootstrap_size(n_bootstrap: int, n_scores: int) -> None:
    """Refuse up front (``DPValueError`` naming n_bootstrap) a bootstrap this machine cannot do."""
    check_memory(
        "n_bootstrap", 8.0 * 4 * n_bootstrap, "the bootstrap replicates", hint="2000 resamples (the paper's) are enough"
    )
    check_work(
        "n_bootstrap",
        float(n_bootstrap) * n_scores * _BOOTSTRAP_OPS_PER_SCORE,
        f"operations ({n_bootstrap} resamples of {n_scores} scores)",
        hint="2000 resamples (the paper's) are enough",
    )


def check_not_constant(i: np.ndarray, o: np.ndarray) -> None:
    """The Gaussian auditor fits a standard deviation per group: refuse a group whose scores are all equal."""
    for name, a in (("in_scores", i), ("out_scores", o)):
        if float(np.ptp(a)) == 0.0:
            raise DPValueError(
                f"{name} are constant (all {float(a[0])!r}): the Gaussian auditor needs scores that vary "
                "in both groups; use method steinke or fdp"
            )


def fit_theta(in_scores, out_scores) -> np.ndarray:
    """theta_hat = (mean_in, sd_in, mean_out, sd_out) with unbiased (ddof = 1) variances."""
    i, o = check_scores(in_scores, out_scores)
    return np.array([i.mean(), i.std(ddof=1), o.mean(), o.std(ddof=1)])


def epsilon_of_theta(delta: float, theta, *, pool_variance: bool = False, direction: str = "both") -> np.ndarray:
    """eps_theta(delta) for theta = (mu_in, s_in, mu_out, s_out) (last axis), vectorised; inf if > 4096."""
    th = np.asarray(theta, dtype=float)
    mu_in, s_in, mu_out, s_out = th[..., 0], th[..., 1], th[..., 2], th[..., 3]
    return _eps_phi(delta, mu_in - mu_out, s_out, s_in, pool_variance, direction)


def _eps_phi(delta, d, s_out, s_in, pool_variance, direction):
    d, s_out, s_in = np.broadcast_arrays(np.asarray(d, float), np.asarray(s_out, float), np.asarray(s_in, float))
    out = np.full(d.shape, np.inf)
    ok = (s_out > 1e-9) & (s_in > 1e-9)
    if pool_variance:
        sp = np.sqrt(0.5 * (s_out**2 + s_in**2))
        so, si = sp, sp
    else:
        so, si = s_out, s_in
    if np.any(ok):
        out[ok] = _epsilon_pair_raw(delta, 0.0, so[ok], d[ok], si[ok], direction)
    return out


def bonferroni_box(in_scores, out_scores, alpha: float = 0.05) -> dict[str, np.ndarray]:
    """The Bonferroni confidence box of Section 4.2: per group, Student-t interval for the mean and
    chi-squared interval for the standard deviation, each two-sided at level 1 - alpha/4.

    Returns ``{"lower": (mu_in, s_in, mu_out, s_out) lower ends, "upper": upper ends}``.
    """
    alpha = check_probability("alpha", alpha, allow_one=False)
    i, o = check_scores(in_scores, out_scores)
    a4 = alpha / 4.0
    lo, hi = [], []
    for x in (i, o):
        n = x.size
        xbar, s = x.mean(), x.std(ddof=1)
        t = stats.t.ppf(1 - a4 / 2, n - 1)
        c_lo, c_hi = stats.chi2.ppf(a4 / 2, n - 1), stats.chi2.ppf(1 - a4 / 2, n - 1)
        lo += [xbar - t * s / math.sqrt(n), math.sqrt((n - 1) * s * s / c_hi)]
        hi += [xbar + t * s / math.sqrt(n), math.sqrt((n - 1) * s * s / c_lo)]
    return {"lower": np.array(lo), "upper": np.array(hi)}


def bootstrap_ellipsoid(
    in_scores, out_scores, alpha: float = 0.05, n_bootstrap: int = 2000, rng: np.random.Generator | int | None = 0
) -> dict[str, Any]:
    """The bootstrap confidence ellipsoid of Section 4.2.

    Each group is resampled with replacement separately, ``n_bootstrap`` times; ``Sigma`` is the sample
    covariance of the replicated ``theta`` (plus ``1e-12 tr(Sigma)/4`` on the diagonal) and the radius
    is ``chi2_{4, 1-alpha}``. Returns ``{"center", "cov", "radius2"}``.
    """
    alpha = check_probability("alpha", alpha, allow_one=False)
    n_bootstrap = check_positive_int("n_bootstrap", n_bootstrap)
    if n_bootstrap < 10:
        raise DPValueError(f"n_bootstrap must be >= 10, got {n_bootstrap}")
    i, o = check_scores(in_scores, out_scores)
    check_bootstrap_size(n_bootstrap, i.size + o.size)
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(check_seed(rng))
    reps = np.empty((n_bootstrap, 4))
    chunk = max(1, int(4e6 // max(i.size, o.size)))
    for start in range(0, n_bootstrap, chunk):
        b = min(chunk, n_bootstrap - start)
        for k, x in enumerate((i, o)):
            xs = x[rng.integers(0, x.size, size=(b, x.size))]
            reps[start : start + b, 2 * k] = xs.mean(axis=1)
            reps[start : start + b, 2 * k + 1] = xs.std(axis=1, ddof=1)
    cov = np.cov(reps, rowvar=False)
    if not (np.all(np.isfinite(cov)) and np.trace(cov) > 0):
        raise NumericalError(
            "the bootstrap covariance of the scores is degenerate (no spread across resamples); "
            "the Gaussian auditor cannot build its ellipsoid"
        )
    cov = cov + 1e-12 * np.trace(cov) / 4 * np.eye(4)
    return {"center": fit_theta(i, o), "cov": cov, "radius2": float(stats.chi2.ppf(1 - alpha, 4))}


# --- infimum over the regions ------------------------------------------------------------------

_M = np.array([[1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])  # theta -> (d, s_out, s_in)


def _fibonacci_sphere(n: int) -> np.ndarray:
    k = np.arange(n) + 0.5
    z = 1 - 2 * k / n
    r = np.sqrt(1 - z * z)
    phi = k * math.pi * (3 - math.sqrt(5))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def _inf_box(delta, lo3, hi3, pool, direction, n_grid, rng):
    """min of eps over the 3-D box [lo3, hi3] in phi = (d, s_out, s_in): grid with corners + zoom."""
    axes = []
    for k in range(3):
        ax = np.linspace(lo3[k], hi3[k], n_grid)
        if k == 0 and lo3[0] < 0 < hi3[0]:
            ax = np.sort(np.append(ax, 0.0))
        axes.append(ax)
    G = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    vals = _eps_phi(delta, G[:, 0], G[:, 1], G[:, 2], pool, direction)
    n_eval = G.shape[0]
    best_pts = G[np.argsort(vals)[:2]]
    best_val, best = float(np.min(vals)), G[int(np.argmin(vals))]
    width = (hi3 - lo3) / (n_grid - 1)
    for p in best_pts:
        w = width.copy()
        for _ in range(7):
            loc = [np.clip(np.linspace(p[k] - w[k], p[k] + w[k], 7), lo3[k], hi3[k]) for k in range(3)]
            L = np.stack(np.meshgrid(*loc, indexing="ij"), axis=-1).reshape(-1, 3)
            v = _eps_phi(delta, L[:, 0], L[:, 1], L[:, 2], pool, direction)
            n_eval += L.shape[0]
            j = int(np.argmin(v))
            p = L[j]
            if v[j] < best_val:
                best_val, best = float(v[j]), p
            w = w / 3
    return best_val, best, n_eval


def _inf_ellipsoid(delta, c3, S3, r2, pool, direction, n_dir, rng):
    """min of eps over {phi : (phi - c3)^T S3^{-1} (phi - c3) <= r2}: shells of directions + zoom."""
    L = np.linalg.cholesky(S3)
    r = math.sqrt(r2)
    U = _fibonacci_sphere(n_dir)
    radii = np.array([1.0, 0.8, 0.5])
    pts = (c3[None, None, :] + r * radii[:, None, None] * (U @ L.T)[None, :, :]).reshape(-1, 3)
    pts = np.vstack([c3[None, :], pts])
    rho = np.concatenate([[0.0], np.repeat(radii, n_dir)])
    dirs = np.vstack([U[:1], np.tile(U, (radii.size, 1))])
    vals = _eps_phi(delta, pts[:, 0], pts[:, 1], pts[:, 2], pool, direction)
    n_eval = pts.shape[0]
    best_val, best = float(np.min(vals)), pts[int(np.argmin(vals))]
    order = np.argsort(vals)[:3]
    spacing = math.sqrt(4 * math.pi / n_dir)
    for j0 in order:
        u, rr = dirs[j0], rho[j0]
        scale = 2 * spacing
        for _ in range(6):
            cand_u = u[None, :] + scale * rng.standard_normal((200, 3))
            cand_u /= np.linalg.norm(cand_u, axis=1, keepdims=True)
            cand_r = np.clip(rr + scale * rng.standard_normal(200) * 0.5, 0.0, 1.0)
            cand_r[:100] = 1.0 if rr > 0.95 else rr
            cand_u = np.vstack([u[None, :], cand_u])
            cand_r = np.concatenate([[rr], cand_r])
            P = c3[None, :] + r * cand_r[:, None] * (cand_u @ L.T)
            v = _eps_phi(delta, P[:, 0], P[:, 1], P[:, 2], pool, direction)
            n_eval += P.shape[0]
            j = int(np.argmin(v))
            u, rr = cand_u[j], cand_r[j]
            if v[j] < best_val:
                best_val, best = float(v[j]), P[j]
            scale /= 3
    return best_val, best, n_eval


def gauss_audit(
    in_scores,
    out_scores,
    delta: float = 1e-5,
    alpha: float = 0.05,
    *,
    region: str = "ellipsoid",
    n_bootstrap: int = 2000,
    seed: int | None = 0,
    pool_variance: bool = False,
    direction: str = "both",
    n_grid: int = 11,
    n_directions: int = 600,
) -> AuditResult:
    """Algorithm 1 of {cite}`gauss_audit`: the (1 - alpha) lower bound ``inf_{theta in C_alpha} eps_theta(delta)``.

    Args:
        in_scores, out_scores: scores of present (IN) and absent (OUT) canaries (Definition 2).
        delta: the delta at which epsilon is audited, in (0, 1).
        alpha: one minus the confidence level, in (0, 1).
        region: ``"ellipsoid"`` (bootstrap, asymptotic; the paper's headline) or ``"bonferroni"`` (box).
        n_bootstrap: bootstrap resamples for the ellipsoid (paper: 2000).
        seed: seed of the bootstrap.
        pool_variance: evaluate eps with both standard deviations replaced by sqrt((s_in^2+s_out^2)/2)
            (a mu-GDP pair) as the authors' code did at paper time; off by default (not in the paper).
        direction: ``"both"`` (max of the two orientations; valid for add/remove DP), ``"in_out"``, ``"out_in"``.
        n_grid: grid points per axis of the box scan; n_directions: directions per shell of the ellipsoid scan.

    Returns an :class:`AuditResult`; ``details`` holds theta_hat, the point estimate eps_theta_hat (not a
    bound: biased upwards at small m), the minimiser (theta-space coordinates d, s_out, s_in) and the region.
    """
    delta = check_delta(delta)
    alpha = check_probability("alpha", alpha, allow_one=False)
    check_choice("region", region, REGIONS)
    check_choice("direction", direction, DIRECTIONS)
    n_grid = check_positive_int("n_grid", n_grid)
    n_directions = check_positive_int("n_directions", n_directions)
    i, o = check_scores(in_scores, out_scores)
    check_not_constant(i, o)
    rng = np.random.default_rng(check_seed(seed))
    if region == "ellipsoid":
        check_bootstrap_size(check_positive_int("n_bootstrap", n_bootstrap), i.size + o.size)
    theta_hat = fit_theta(i, o)
    phi_hat = _M @ theta_hat
    eps_hat = float(_eps_phi(delta, *phi_hat, pool_variance, direction))
    details: dict[str, Any] = {
        "region": region,
        "pool_variance": bool(pool_variance),
        "direction": direction,
        "mu_in": theta_hat[0],
        "sigma_in": theta_hat[1],
        "mu_out": theta_hat[2],
        "sigma_out": theta_hat[3],
        "epsilon_point_estimate": eps_hat,
    }
    if region == "bonferroni":
        box = bonferroni_box(i, o, alpha)
        lo4, hi4 = box["lower"], box["upper"]
        lo3 = np.array([lo4[0] - hi4[2], lo4[3], lo4[1]])
        hi3 = np.array([hi4[0] - lo4[2], hi4[3], hi4[1]])
        details.update(box_lower=lo4, box_upper=hi4)
        if lo3[0] <= 0 <= hi3[0] and max(lo3[1], lo3[2]) <= min(hi3[1], hi3[2]):
            val, arg, n_eval = 0.0, np.array([0.0, max(lo3[1], lo3[2]), max(lo3[1], lo3[2])]), 0
        else:
            val, arg, n_eval = _inf_box(delta, lo3, hi3, pool_variance, direction, max(n_grid, 3), rng)
        method = "gauss-bonferroni"
    else:
        n_bootstrap = check_positive_int("n_bootstrap", n_bootstrap)
        ell = bootstrap_ellipsoid(i, o, alpha, n_bootstrap, rng)
        S3 = _M @ ell["cov"] @ _M.T
        c3 = _M @ ell["center"]
        r2 = ell["radius2"]
        details.update(n_bootstrap=n_bootstrap, cov=ell["cov"], radius2=r2)
        # zero set {d = 0, s_out = s_in}: the minimal Mahalanobis distance over that line, in closed form
        try:
            Sinv = np.linalg.inv(S3)
            np.linalg.cholesky(S3)
        except np.linalg.LinAlgError:
            raise NumericalError(
                "the bootstrap covariance of the scores is singular (scores nearly constant or "
                "degenerate); the Gaussian auditor cannot build its ellipsoid"
            ) from None
        a = np.array([0.0, 1.0, 1.0])
        b = np.array([0.0, 0.0, 0.0])
        # phi(s) = b + s a ; minimise (phi - c)^T Sinv (phi - c) over s > 0
        s_star = float(a @ Sinv @ (c3 - b) / (a @ Sinv @ a))
        dist0 = float((b + s_star * a - c3) @ Sinv @ (b + s_star * a - c3))
        if s_star > 1e-9 and dist0 <= r2:
            val, arg, n_eval = 0.0, b + s_star * a, 0
        else:
            val, arg, n_eval = _inf_ellipsoid(delta, c3, S3, r2, pool_variance, direction, n_directions, rng)
        method = "gauss"
    if not math.isfinite(val):
        raise NumericalError("the Gaussian auditor found no finite eps_theta in the confidence region")
    val = min(val, eps_hat)
    details.update(argmin_d=arg[0], argmin_sigma_out=arg[1], argmin_sigma_in=arg[2], n_evaluations=n_eval)
    return AuditResult(
        epsilon_lower=max(0.0, float(val)),
        method=method,
        delta=delta,
        alpha=alpha,
        n_in=int(i.size),
        n_out=int(o.size),
        details=details,
    )
