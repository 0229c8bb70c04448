"""The one table of one-run auditing methods, and an auditor object for a user's own canary scores.

Every method takes the scores of IN and OUT canaries, a delta and alpha (one minus the confidence) and returns
an :class:`~dputils.audit.gauss.AuditResult` whose ``epsilon_lower`` is the (1 - alpha) lower bound on epsilon:

=========================  ==============================================================================
``gauss``                  the Gaussian auditor (Algorithm 1 of the paper), bootstrap ellipsoid (asymptotic)
``gauss-pooled``           the same with the two standard deviations pooled (the authors' code at paper time)
``gauss-bonferroni``       the Gaussian auditor with a Bonferroni box (valid at every m)
``steinke``                Steinke, Nasr and Jagielski's one-run bound, threshold chosen on a held-out split
``fdp``                    the f-DP one-run audit (Mahloujifar et al.), threshold chosen on a held-out split
``steinke-uncorrected``    Steinke et al. with the threshold swept on the same scores (not valid at level alpha)
``fdp-uncorrected``        the f-DP audit with the threshold swept on the same scores (not valid at level alpha)
=========================  ==============================================================================

Use::

    from dputils.audit import CanaryScoreAuditor
    auditor = CanaryScoreAuditor(in_scores, out_scores)
    auditor.epsilon_lower_bound(method="gauss", alpha=0.05, delta=1e-5)

The simulation studies, the DP-FTRL and input-canary audits and ``python -m dputils audit`` all dispatch
through :func:`run_method`, so a method is added in one place: here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import DPValueError, check_choice
from .gauss import AuditResult, check_scores, gauss_audit
from .onerun import threshold_audit

__all__ = ["AuditMethod", "METHODS", "DEFAULT_METHODS", "run_method", "CanaryScoreAuditor", "audit_all"]


@dataclass(frozen=True)
class AuditMethod:
    """One auditing method: its name, what it is, whether its bound is valid at level alpha for every number
    of canaries, and the function that runs it."""

    name: str
    help: str
    valid: bool
    run: Callable[..., AuditResult]


def _gauss(region: str, pooled: bool) -> Callable[..., AuditResult]:
    def run(i, o, delta, alpha, *, n_bootstrap=2000, seed=0, pool_variance=False, selection=None):
        return gauss_audit(
            i, o, delta, alpha, region=region, n_bootstrap=n_bootstrap, seed=seed, pool_variance=pooled or pool_variance
        )

    return run


def _threshold(method: str, uncorrected: bool) -> Callable[..., AuditResult]:
    def run(i, o, delta, alpha, *, n_bootstrap=None, seed=0, pool_variance=False, selection="split"):
        return threshold_audit(
            i, o, delta, alpha, method=method, selection="none" if uncorrected else selection, seed=seed
        )

    return run


#: name -> :class:`AuditMethod`, in the order tables show them.
METHODS: dict[str, AuditMethod] = {
    m.name: m
    for m in (
        AuditMethod("gauss", "Gaussian auditor, bootstrap ellipsoid (asymptotic)", False, _gauss("ellipsoid", False)),
        AuditMethod("gauss-pooled", "Gaussian auditor, pooled standard deviation", False, _gauss("ellipsoid", True)),
        AuditMethod("gauss-bonferroni", "Gaussian auditor, Bonferroni box", True, _gauss("bonferroni", False)),
        AuditMethod(
            "steinke", "Steinke-Nasr-Jagielski, threshold on a held-out split", True, _threshold("steinke", False)
        ),
        AuditMethod("fdp", "f-DP one-run audit, threshold on a held-out split", True, _threshold("fdp", False)),
        AuditMethod(
            "steinke-uncorrected",
            "Steinke et al., threshold swept on the same scores",
            False,
            _threshold("steinke", True),
        ),
        AuditMethod(
            "fdp-uncorrected", "f-DP audit, threshold swept on the same scores", False, _threshold("fdp", True)
        ),
    )
}

#: The four methods of the paper's comparisons.
DEFAULT_METHODS = ("gauss", "gauss-bonferroni", "steinke", "fdp")


def run_method(
    method: str,
    in_scores,
    out_scores,
    delta: float = 1e-5,
    alpha: float = 0.05,
    *,
    n_bootstrap: int = 2000,
    seed: int = 0,
    selection: str = "split",
    pool_variance: bool = False,
) -> AuditResult:
    """Run the auditing method ``method`` (a key of :data:`METHODS`) on IN/OUT scores.

    ``selection`` applies to the threshold methods (``"split"``, ``"bonferroni-grid"``; the ``-uncorrected``
    names use ``"none"``), ``n_bootstrap`` to ``gauss``/``gauss-pooled``, ``pool_variance`` to the Gaussian
    methods."""
    check_choice("method", method, tuple(METHODS))
    return METHODS[method].run(
        in_scores,
        out_scores,
        delta,
        alpha,
        n_bootstrap=n_bootstrap,
        seed=seed,
        pool_variance=pool_variance,
        selection=selection,
    )


class CanaryScoreAuditor:
    """Audit a run from the scores of its IN (inserted) and OUT (held-out) canaries.

    The scores are validated once (finite, 1-D, at least two of each). Every query names a method of
    :data:`METHODS`, the confidence ``1 - alpha`` and the ``delta`` at which epsilon is bounded. Constant
    scores are refused by the Gaussian methods only (they fit a standard deviation per group); the threshold
    methods (``steinke``, ``fdp``) take them.
    """

    def __init__(self, in_scores, out_scores) -> None:
        self.in_scores, self.out_scores = check_scores(in_scores, out_scores)

    def audit(self, method: str = "gauss", alpha: float = 0.05, delta: float = 1e-5, **options: Any) -> AuditResult:
        """The whole :class:`AuditResult` of ``method`` (``options``: see :func:`run_method`)."""
        unknown = set(options) - {"n_bootstrap", "seed", "selection", "pool_variance"}
        if unknown:
            raise DPValueError(
                f"unknown option(s) {sorted(unknown)}; expected n_bootstrap, seed, selection, pool_variance"
            )
        return run_method(method, self.in_scores, self.out_scores, delta, alpha, **options)

    def epsilon_lower_bound(
        self, method: str = "gauss", alpha: float = 0.05, delta: float = 1e-5, **options: Any
    ) -> float:
        """The (1 - alpha) lower bound on epsilon at ``delta`` from ``method``."""
        return float(self.audit(method, alpha, delta, **options).epsilon_lower)

    def all(
        self, methods=DEFAULT_METHODS, alpha: float = 0.05, delta: float = 1e-5, **options: Any
    ) -> dict[str, float]:
        """``{method: lower bound}`` for several methods on these scores."""
        return {m: self.epsilon_lower_bound(m, alpha, delta, **options) for m in methods}


def audit_all(
    in_scores,
    out_scores,
    delta: float = 1e-5,
    alpha: float = 0.05,
    *,
    selection: str = "split",
    n_bootstrap: int = 2000,
    seed: int = 0,
    pool_variance: bool = False,
) -> dict[str, float]:
    """The four auditors on one set of scores: ``{"gauss", "gauss-bonferroni", "steinke", "fdp"}`` -> lower bound."""
    return {
        m: float(
            run_method(
                m,
                in_scores,
                out_scores,
                delta,
                alpha,
                n_bootstrap=n_bootstrap,
                seed=seed,
                selection=selection,
                pool_variance=pool_variance,
            ).epsilon_lower
        )
        for m in DEFAULT_METHODS
    }
