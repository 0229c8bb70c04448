"""The matrix mechanism under balls-in-bins (random allocation) participation, as one object.

A run of DP-FTRL / DP-SGD with a correlated-noise strategy releases ``C x + sigma z`` over ``N = k b``
steps: each record lands in exactly one of the ``b`` batches of every epoch (balls in bins), the clipped
contribution has norm at most 1, ``C`` is the strategy matrix (the identity for DP-SGD) and ``z`` is standard
Gaussian noise. Lemma 2.8 of {cite}`schuchardt_kalinin` reduces any pair of neighbouring runs to the
pair of distributions over ``R^N``

    P = (1/b) sum_i N(m_i, sigma^2 I),    Q = N(0, sigma^2 I),

with the slot means ``m_i`` of :meth:`~dputils.matrix.factorizations.Strategy.means`; the remove relation
is dominated by ``(P, Q)`` and the add relation by ``(Q, P)``.

:class:`BallsInBinsMatrixMechanism` bundles the strategy (which carries ``C``, the epochs ``k``, the
batches per epoch ``b`` and the bands) with the noise standard deviation ``sigma``. It is what the matrix
accountants compose (``MatrixRenyiAccountant().compose(mechanism)``), as ``dp_accounting`` composes DpEvents.
It is not a :class:`dputils.mechanisms.Mechanism`: its pair is not a product of scalar pairs, so the PLD,
RDP, SPA, Edgeworth and GDP accountants refuse it by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DPValueError, check_positive, check_positive_int
from .factorizations import Strategy


@dataclass(frozen=True, eq=False)
class BallsInBinsMatrixMechanism:
    """One run of a matrix mechanism ``C x + sigma z`` under balls-in-bins participation.

    Args:
        strategy: a :class:`~dputils.matrix.factorizations.Strategy` (``C``, epochs ``k``, batches ``b``,
            bands); the run has ``N = k b`` steps.
        sigma: noise standard deviation (clip norm 1, ``C`` as built), a finite number > 0.

    Equality is identity of the strategy object and equality of sigma (the strategy holds arrays).
    """

    strategy: Strategy
    sigma: float

    name = "balls-in-bins"

    def __post_init__(self) -> None:
        if not isinstance(self.strategy, Strategy):
            raise DPValueError(
                f"strategy must be a dputils.matrix.Strategy (see build_strategy), got {type(self.strategy).__name__}"
            )
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        C = np.asarray(self.strategy.C)
        n = self.strategy.epochs * self.strategy.batches
        if C.shape != (n, n):
            raise DPValueError(f"strategy: C must be N x N with N = epochs x batches = {n}, got shape {C.shape}")

    # what the accountants read -----------------------------------------------------------------
    @property
    def epochs(self) -> int:
        return int(self.strategy.epochs)

    @property
    def batches(self) -> int:
        return int(self.strategy.batches)

    @property
    def steps(self) -> int:
        """N = epochs x batches."""
        return self.epochs * self.batches

    @property
    def matrix(self) -> str:
        """The strategy's name (``identity``, ``bsr``, ``bisr``, ``bandmf``, ``blt``, ...)."""
        return self.strategy.name

    @property
    def bands(self) -> int | None:
        return self.strategy.bands

    @property
    def gram(self) -> np.ndarray:
        """The b x b Gram matrix of the slot means (cached by the strategy)."""
        return self.strategy.gram

    @property
    def params(self) -> dict[str, Any]:
        """The parameters, for reports."""
        return {
            "matrix": self.matrix,
            "epochs": self.epochs,
            "batches": self.batches,
            "bands": self.bands,
            "sigma": self.sigma,
        }

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.strategy is self.strategy  # type: ignore[attr-defined]
            and other.sigma == self.sigma
        )  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, id(self.strategy), self.sigma))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({inner})"


def check_matrix_mechanism(accountant: str, mechanism: Any) -> BallsInBinsMatrixMechanism:
    """``mechanism`` if it is a :class:`BallsInBinsMatrixMechanism`, else a ``DPValueError`` naming both."""
    if not isinstance(mechanism, BallsInBinsMatrixMechanism):
        raise DPValueError(
            f"{accountant}: unsupported mechanism {type(mechanism).__name__}; this accountant "
            "composes a BallsInBinsMatrixMechanism(strategy, sigma)"
        )
    return mechanism


def check_one_run(accountant: str, ledger: list, count: Any) -> None:
    """Refuse a second entry, or a ``count`` other than 1, for an accountant that accounts one run.

    The conditional-composition and Monte Carlo accountants analyse the whole N-step pair of one run at
    once; repeating the run is not a composition they can do (their answers are not additive in any
    divergence). Several epochs belong in the strategy (``build_strategy(name, epochs, batches, ...)``).
    """

    count = check_positive_int("count", count)
    if count != 1:
        raise DPValueError(
            f"{accountant}: count must be 1 (it accounts for one run of a matrix mechanism), got "
            f"{count}; put repeated epochs in the strategy (build_strategy(..., epochs=k, ...)) "
            "or use matrix-renyi, which composes repeats"
        )
    if ledger:
        raise DPValueError(
            f"{accountant}: accounts for exactly one matrix-mechanism run and one is already "
            "composed; put all epochs in one strategy (build_strategy(..., epochs=k, ...)), or use "
            "matrix-renyi / matrix-renyi-tight, which compose several runs"
        )
