"""Matrix mechanisms under random allocation (balls-in-bins): strategies, the mechanism and its accountants.

``MatrixRenyiAccountant().compose(BallsInBinsMatrixMechanism(build_strategy("bsr", 1, 100, 4), 1.0))``
gives an accountant of the same family as :class:`dputils.accountants.PLDAccountant`.
"""

from .allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant, MatrixRenyiTightAccountant, calibrate_sigma
from .condcomp import ConditionalCompositionAccountant, reverse_hazard_bounds, sample_ternary_loss, step_pairs
from .factorizations import MATRICES, Strategy, build_strategy, gram, slot_means, truncate_gram
from .mechanism import BallsInBinsMatrixMechanism
from .renyi import (
    feldman_shenfeld_rdp,
    log_partition_bruteforce,
    log_partition_dp,
    rho_add_exact_independent,
    rho_add_lemma34,
    rho_add_tight,
    rho_remove,
)

__all__ = [
    "MATRICES",
    "Strategy",
    "build_strategy",
    "gram",
    "slot_means",
    "truncate_gram",
    "BallsInBinsMatrixMechanism",
    "feldman_shenfeld_rdp",
    "log_partition_bruteforce",
    "log_partition_dp",
    "rho_add_lemma34",
    "rho_add_exact_independent",
    "rho_add_tight",
    "rho_remove",
    "MatrixRenyiAccountant",
    "MatrixRenyiTightAccountant",
    "MatrixMonteCarloAccountant",
    "calibrate_sigma",
    "ConditionalCompositionAccountant",
    "reverse_hazard_bounds",
    "sample_ternary_loss",
    "step_pairs",
]


#: Names that moved to the command line (:mod:`dputils.cli.runs`): still readable here, with a warning.
_MOVED_TO_CLI = {
    "add_strategy_arguments": "add_strategy_arguments",
    "balls_in_bins_from_args": "balls_in_bins_from_args",
    "strategy_from_args": "strategy_from_args",
    "mechanism_from_args": "balls_in_bins_from_args",  # the older name: it clashed with cli.mechanism_from_args
}


def __getattr__(name: str):
    if name in _MOVED_TO_CLI:
        # deprecated access only: the library itself never uses the command line (the module is imported by
        # name here, on demand, so that importing dputils.matrix never imports dputils.cli)
        import importlib
        import warnings

        new = _MOVED_TO_CLI[name]
        warnings.warn(
            f"dputils.matrix.{name} is deprecated; argument parsing lives in the command line: "
            f"use dputils.cli.runs.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("dputils.cli.runs"), new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
