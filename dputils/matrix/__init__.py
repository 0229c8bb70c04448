"""Matrix mechanisms under random allocation (balls-in-bins): strategies and accountants."""

from .factorizations import MATRICES, Strategy, build_strategy, gram, slot_means, truncate_gram
from .renyi import (
    delta_from_rdp,
    epsilon_from_rdp,
    feldman_shenfeld_rdp,
    log_partition_bruteforce,
    log_partition_dp,
    rho_add_lemma34,
    rho_remove,
)

__all__ = [
    "MATRICES", "Strategy", "build_strategy", "gram", "slot_means", "truncate_gram",
    "delta_from_rdp", "epsilon_from_rdp", "feldman_shenfeld_rdp", "log_partition_bruteforce",
    "log_partition_dp", "rho_add_lemma34", "rho_remove",
]
