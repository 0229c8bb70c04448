"""One-run privacy auditing: the Gaussian auditor of {cite}`gauss_audit`, the thresholding baselines of
Steinke et al. and Mahloujifar et al., the Andrew et al. statistic, and Model-1 simulations; white-box audits
of real training: DP-SGD with Dirac gradient canaries (:mod:`.whitebox`) or input-space canaries
(:mod:`.input_canary`), and DP-FTRL with tree aggregation (:mod:`.ftrl_audit`).

Every auditor takes arrays of IN and OUT canary scores, a delta and alpha (1 - confidence) and returns an
:class:`AuditResult` whose ``epsilon_lower`` is the empirical lower bound.
"""

from .andrew import andrew_epsilon, andrew_statistic
from .ftrl_audit import FTRLAuditRun, audit_ftrl, run_ftrl_audit, simulate_ftrl_audit
from .gauss import AuditResult, bonferroni_box, bootstrap_ellipsoid, epsilon_of_theta, fit_theta, gauss_audit
from .gaussian_pair import delta_pair, epsilon_pair, log_delta_directed, log_delta_pair
from .input_canary import InputCanaryRun, audit_input_canaries, make_input_canaries, run_input_canary_audit
from .methods import DEFAULT_METHODS, METHODS, AuditMethod, CanaryScoreAuditor, audit_all, run_method
from .onerun import fdp_epsilon, steinke_epsilon, steinke_p_value, threshold_audit
from .repeated import repeated_audit

__all__ = [
    "AuditMethod",
    "AuditResult",
    "CanaryScoreAuditor",
    "DEFAULT_METHODS",
    "METHODS",
    "run_method",
    "FTRLAuditRun",
    "InputCanaryRun",
    "andrew_epsilon",
    "andrew_statistic",
    "audit_all",
    "audit_ftrl",
    "audit_input_canaries",
    "bonferroni_box",
    "bootstrap_ellipsoid",
    "delta_pair",
    "epsilon_of_theta",
    "epsilon_pair",
    "fdp_epsilon",
    "fit_theta",
    "gauss_audit",
    "log_delta_directed",
    "log_delta_pair",
    "make_input_canaries",
    "repeated_audit",
    "run_ftrl_audit",
    "run_input_canary_audit",
    "simulate_ftrl_audit",
    "steinke_epsilon",
    "steinke_p_value",
    "threshold_audit",
]
