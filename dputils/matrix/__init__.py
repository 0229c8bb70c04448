"""Matrix mechanisms under random allocation (balls-in-bins): strategies and accountants."""

from .factorizations import MATRICES, Strategy, build_strategy, gram, slot_means, truncate_gram
from .condcomp import ConditionalCompositionAccountant, reverse_hazard_bounds, sample_ternary_loss, step_pairs
from .renyi import (
    delta_from_rdp,
    epsilon_from_rdp,
    feldman_shenfeld_rdp,
    log_partition_bruteforce,
    log_partition_dp,
    rho_add_exact_independent,
    rho_add_lemma34,
    rho_add_tight,
    rho_remove,
)
from .allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant, MatrixRenyiTightAccountant, calibrate_sigma

__all__ = [
    "MATRICES", "Strategy", "build_strategy", "gram", "slot_means", "truncate_gram",
    "delta_from_rdp", "epsilon_from_rdp", "feldman_shenfeld_rdp", "log_partition_bruteforce",
    "log_partition_dp", "rho_add_lemma34", "rho_add_exact_independent", "rho_add_tight", "rho_remove",
    "MatrixRenyiAccountant", "MatrixRenyiTightAccountant", "MatrixMonteCarloAccountant", "calibrate_sigma",
    "ConditionalCompositionAccountant", "reverse_hazard_bounds", "sample_ternary_loss", "step_pairs",
]
