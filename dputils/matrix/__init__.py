"""Matrix mechanisms under random allocation (balls-in-bins): strategies, the mechanism and its accountants.

``MatrixRenyiAccountant().compose(BallsInBinsMatrixMechanism(build_strategy("bsr", 1, 100, 4), 1.0))``
gives an accountant of the same family as :class:`dputils.accountants.PLDAccountant`.
"""

from .allocation import (
    MatrixMonteCarloAccountant,
    MatrixRenyiAccountant,
    MatrixRenyiTightAccountant,
    add_strategy_arguments,
    balls_in_bins_from_args,
    calibrate_sigma,
    strategy_from_args,
)
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
    "add_strategy_arguments",
    "balls_in_bins_from_args",
    "strategy_from_args",
    "ConditionalCompositionAccountant",
    "reverse_hazard_bounds",
    "sample_ternary_loss",
    "step_pairs",
]


def __getattr__(name: str):
    if name == "mechanism_from_args":  # the former name; it clashed with dputils.cli.mechanism_from_args
        import warnings

        warnings.warn(
            "dputils.matrix.mechanism_from_args is deprecated; use balls_in_bins_from_args",
            DeprecationWarning,
            stacklevel=2,
        )
        return balls_in_bins_from_args
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
