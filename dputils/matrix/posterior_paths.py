"""The bound on the posterior of the participating slot along a training run (Figure 4 of Schuchardt and Kalinin,
"Matrix mechanisms under random allocation"), under the allocations of the failure probability ``delta_E`` that
the paper compares.

At step ``n`` conditional composition needs an upper bound ``lambda_bar_b^(n)`` on the reverse hazard of the
participating (largest-mean) slot given the earlier outputs (Lemma 4.5): :func:`dputils.matrix.condcomp.
reverse_hazard_bounds` at significance ``beta``. How ``delta_E`` is spent over the ``N = k b`` steps decides
``beta``:

* **union** (Theorem 4.6, proved): ``beta = delta_E / N`` at every step;
* **global max**: the bound at ``beta = delta_E``, maximised over all steps;
* **per-epoch max** (``e >= 1``): ``beta = delta_E / k``, maximised within each epoch;
* **hybrid** (``e >= 2``, the paper's, unproven): union in the first epoch, per-epoch max afterwards.
"""

from __future__ import annotations

import numpy as np

from ..errors import DPValueError
from .condcomp import reverse_hazard_bounds

__all__ = ["participant_posterior_path", "epoch_max", "allocation_paths"]


def participant_posterior_path(means: np.ndarray, sigma: float, beta: float, **kwargs) -> np.ndarray:
    """``lambda_bar_b`` of the participating slot at every step ``n = 1..N`` (``means``: the ``(b, N)`` slot
    means), remove relation, significance ``beta`` per step; ``kwargs`` go to :func:`reverse_hazard_bounds`
    (e.g. ``temperatures``)."""
    b, n_steps = means.shape
    return np.array(
        [
            reverse_hazard_bounds(means, sigma, n, beta, "remove", components=[b - 1], **kwargs)[0][-1]
            for n in range(1, n_steps + 1)
        ]
    )


def epoch_max(lam: np.ndarray, epochs: int) -> np.ndarray:
    """Each epoch's maximum of ``lam`` (length ``epochs * b``), repeated over the epoch's ``b`` steps."""
    lam = np.asarray(lam)
    if epochs < 1 or lam.size % epochs:
        raise DPValueError(f"epoch_max: {lam.size} steps do not split into {epochs} epochs")
    b = lam.size // epochs
    return np.repeat(lam.reshape(epochs, b).max(axis=1), b)


def allocation_paths(means: np.ndarray, sigma: float, delta_e: float, epochs: int) -> dict[str, np.ndarray]:
    """``lambda_bar_b`` at every step under the four allocations of ``delta_e`` (module docstring), keyed
    ``"union"``, ``"global max"``, ``"per-epoch max (e ≥ 1)"``, ``"hybrid (e ≥ 2)"``."""
    b, n_steps = means.shape
    if n_steps != epochs * b:
        raise DPValueError(f"allocation_paths: {n_steps} steps are not {epochs} epochs of {b} slots")
    union = participant_posterior_path(means, sigma, delta_e / n_steps)
    per_epoch = epoch_max(participant_posterior_path(means, sigma, delta_e / epochs), epochs)
    return {
        "union": union,
        "global max": np.full(n_steps, participant_posterior_path(means, sigma, delta_e).max()),
        "per-epoch max (e ≥ 1)": per_epoch,
        "hybrid (e ≥ 2)": np.where(np.arange(1, n_steps + 1) <= b, union, per_epoch),
    }
