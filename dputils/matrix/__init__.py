"""Matrix mechanisms under random allocation (balls-in-bins): strategies, the mechanism and its accountants.

``MatrixRenyiAccountant().compose(BallsInBinsMatrixMechanism(build_strategy("bsr", 1, 100, 4), 1.0))``
gives an accountant of the same family as :class:`dputils.accountants.PLDAccountant`.
"""

from .allocation import (
    MatrixMonteCarloAccountant,
    MatrixRenyiAccountant,
    MatrixRenyiTightAccountant,
    add_strategy_arguments,
    calibrate_sigma,
    mechanism_from_args,
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
    "mechanism_from_args",
    "strategy_from_args",
    "ConditionalCompositionAccountant",
    "reverse_hazard_bounds",
    "sample_ternary_loss",
    "step_pairs",
]
