"""Strategy matrices for prefix sums and their geometry under balls-in-bins participation.

Training with correlated noise releases the noisy prefix sums ``A (G + C^{-1} Z)`` where ``A`` is the
N x N lower-triangular all-ones matrix (the prefix-sum workload), ``A = B C`` a factorisation and ``Z``
i.i.d. N(0, sigma^2). Only ``|C|`` enters the privacy analysis {cite}`schuchardt_kalinin`.

All strategies here are lower-triangular **Toeplitz** matrices, described by the coefficients
``c_0, c_1, ...`` of their first column (``c_0 = 1`` throughout: this is the normalisation of ``C``;
sigma is the noise standard deviation relative to clip norm 1 with ``C`` used as is):

* ``identity``: ``C = I`` (DP-SGD), one band.
* ``bsr``: banded square root (Kalinin & Lampert 2024): the first ``p`` coefficients of the power
  series of ``(1 - x)^{-1/2}``, ``c_j = binom(2j, j) / 4^j``, then zero.
* ``bisr``: banded inverse square root (Kalinin et al. 2025): ``C^{-1}`` is banded with the first ``p``
  coefficients of ``(1 - x)^{1/2}``; ``C`` is its (dense, positive) inverse series.
* ``bandmf``: a banded Toeplitz ``C`` whose ``p`` coefficients minimise our stand-in for the mean error
  objective, ``(1/N) ||A C^{-1}||_F^2 * max_i ||m_i||^2`` (Frobenius error of the prefix sums times the
  squared balls-in-bins sensitivity), subject to ``c >= 0`` and ``c_0 = 1``; L-BFGS-B from the BSR start.
  The paper uses jax_privacy's optimiser without stating its settings; this choice is ours.
* ``bandinvmf``: a Toeplitz ``C`` whose inverse ``C^{-1}`` is lower-triangular banded with ``p`` bands
  (Kalinin et al. 2025), ``C^{-1} = toeplitz(a_0 = 1, a_1, ..., a_{p-1})``, the ``a_j`` minimising the same
  objective as ``bandmf`` subject to ``a_j <= 0`` (j >= 1), which makes ``C`` (the inverse series
  ``sum_m (-sum_j a_j x^j)^m``) non-negative as Lemma 2.8 needs; L-BFGS-B from the BISR start. The paper uses
  jax_privacy's optimiser without stating its settings (objective, steps): this choice is **our reading**.
* ``blt``: buffered linear Toeplitz, ``c_t = sum_j w_j theta_j^{t-1}`` (t >= 1), with ``n_buffers``
  buffers optimised for the same objective (``w >= 0``, ``0 <= theta < 1``). Our choice of settings.

Under balls-in-bins (Definition 2.7) with ``k`` epochs and ``b`` batches (``N = k b``) an example in slot
``i`` (0-based) participates in steps ``i, i + b, ..., i + (k-1) b``. Its contribution to ``C G`` is the
mixture mean ``m_i = sum_{j<k} |C|[:, i + j b]`` (Lemma 2.8); the Gram matrix ``G_ij = <m_i, m_j>`` is all
the Renyi accountant needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from ..errors import DPValueError, check_choice, check_positive_int
from ..resources import available_memory_bytes, check_memory, check_work

MATRICES = ("identity", "bsr", "bisr", "bandmf", "blt", "bandinvmf")


# --------------------------------------------------------------------------------------- series helpers
def sqrt_series(n: int) -> np.ndarray:
    """First ``n`` coefficients of ``(1 - x)^{-1/2}``: ``binom(2j, j) / 4^j`` (all positive)."""
    n = check_positive_int("n", n)
    c = np.ones(n)
    for j in range(1, n):
        c[j] = c[j - 1] * (2 * j - 1) / (2 * j)
    return c


def inv_sqrt_series(n: int) -> np.ndarray:
    """First ``n`` coefficients of ``(1 - x)^{1/2}``: 1, -1/2, -1/8, -1/16, -5/128, ..."""
    n = check_positive_int("n", n)
    c = np.ones(n)
    for j in range(1, n):
        c[j] = c[j - 1] * (j - 1.5) / j
    return c


def series_inverse(a: np.ndarray, n: int) -> np.ndarray:
    """First ``n`` coefficients of ``1 / a(x)`` for a power series with ``a_0 != 0``.

    The inverse of a lower-triangular Toeplitz matrix is the lower-triangular Toeplitz matrix of the
    inverse series; the recursion is ``d_0 = 1/a_0``, ``d_t = -(1/a_0) sum_{s=1}^{t} a_s d_{t-s}``.
    """
    a = np.asarray(a, dtype=float)
    if a.size == 0 or a[0] == 0:
        raise DPValueError("a[0] must be non-zero to invert a power series")
    d = np.zeros(n)
    d[0] = 1.0 / a[0]
    for t in range(1, n):
        s = min(t, a.size - 1)
        d[t] = -np.dot(a[1 : s + 1], d[t - 1 :: -1][:s]) / a[0]
    return d


def toeplitz_lower(coefs: np.ndarray, n: int) -> np.ndarray:
    """The n x n lower-triangular Toeplitz matrix with first column ``coefs`` (zero-padded/truncated)."""
    c = np.zeros(n)
    m = min(n, len(coefs))
    c[:m] = np.asarray(coefs, dtype=float)[:m]
    idx = np.arange(n)
    diff = idx[:, None] - idx[None, :]
    out = np.where(diff >= 0, c[np.clip(diff, 0, n - 1)], 0.0)
    return out


def prefix_workload(n: int) -> np.ndarray:
    """The prefix-sum workload ``A``: n x n lower-triangular all-ones."""
    return np.tri(check_positive_int("n", n))


# --------------------------------------------------------------------------------------- participation
def slot_means(C: np.ndarray, epochs: int, batches: int) -> np.ndarray:
    """Mixture means ``m_i = sum_{j<k} |C|[:, i + j b]`` of Lemma 2.8, as a (b, N) array (rows = slots)."""
    C = np.asarray(C, dtype=float)
    k = check_positive_int("epochs", epochs)
    b = check_positive_int("batches", batches)
    n = k * b
    if C.shape != (n, n):
        raise DPValueError(f"C must be ({n}, {n}) for epochs={k}, batches={b}; got {C.shape}")
    absC = np.abs(C)
    return absC.reshape(n, k, b).sum(axis=1).T.copy()


def gram(C: np.ndarray, epochs: int, batches: int) -> np.ndarray:
    """Gram matrix ``G_ij = <m_i, m_j>`` (b x b) of the slot means."""
    m = slot_means(C, epochs, batches)
    return m @ m.T


def cyclic_distance(b: int) -> np.ndarray:
    """``d(i, j) = min(|i - j|, b - |i - j|)`` for slots 0..b-1."""
    i = np.arange(b)
    d = np.abs(i[:, None] - i[None, :])
    return np.minimum(d, b - d)


def truncate_gram(G: np.ndarray, bands: int) -> tuple[np.ndarray, float]:
    """Effective-bandwidth truncation of Algorithm 1, lines 3-4.

    ``tau = max_{d(i,j) >= p} G_ij`` (0 when no pair is that far apart) and
    ``G^(p)_ij = max(G_ij - tau, 0)`` inside the cyclic band ``d(i, j) < p``, 0 outside. Elementwise
    ``G <= G^(p) + tau * ones`` (using ``G >= 0``), which is what makes the truncated Renyi value a bound.
    """
    G = np.asarray(G, dtype=float)
    p = check_positive_int("bands", bands)
    b = G.shape[0]
    d = cyclic_distance(b)
    outside = d >= p
    tau = float(G[outside].max()) if outside.any() else 0.0
    tau = max(tau, 0.0)
    Gp = np.where(outside, 0.0, np.maximum(G - tau, 0.0))
    return Gp, tau


# --------------------------------------------------------------------------------------- optimised strategies
def _objective_terms(coefs_c: np.ndarray, n: int, epochs: int, batches: int):
    """(mean squared prefix-sum error factor, squared balls-in-bins sensitivity) for Toeplitz C."""
    inv = series_inverse(coefs_c, n)  # C^{-1}
    bcoef = np.cumsum(inv)  # A C^{-1} is Toeplitz with the partial sums of the inverse series
    err = float(np.sum((n - np.arange(n)) * bcoef**2) / n)
    C = toeplitz_lower(coefs_c, n)
    sens2 = float(np.max(np.sum(slot_means(C, epochs, batches) ** 2, axis=1)))
    return err, sens2


def _optimise(fun, x0, bounds) -> np.ndarray:
    res = optimize.minimize(fun, x0, method="L-BFGS-B", bounds=bounds, options={"maxiter": 300})
    return np.asarray(res.x, dtype=float)


def bandmf_coefs(n: int, bands: int, epochs: int, batches: int) -> np.ndarray:
    """Optimised banded Toeplitz coefficients (``c_0 = 1``, ``c >= 0``); see the module docstring."""
    p = min(check_positive_int("bands", bands), n)
    if p == 1:
        return np.ones(1)

    def fun(x):
        c = np.concatenate([[1.0], x])
        e, s = _objective_terms(c, n, epochs, batches)
        return np.log(e) + np.log(s)

    x = _optimise(fun, sqrt_series(p)[1:], [(0.0, None)] * (p - 1))
    return np.concatenate([[1.0], x])


def bandinvmf_coefs(n: int, bands: int, epochs: int, batches: int) -> tuple[np.ndarray, np.ndarray]:
    """BandInvMF: ``(c, a)`` with ``a`` the ``p`` optimised coefficients of the banded ``C^{-1}`` and ``c`` the
    first ``n`` coefficients of ``C = 1 / a(x)``.

    ``a_0 = 1`` and ``a_j in [-1, 0]`` for ``1 <= j < p``; the objective is that of ``bandmf``
    (``log`` of the mean squared prefix-sum error factor ``(1/N)||A C^{-1}||_F^2`` plus ``log`` of the squared
    balls-in-bins sensitivity ``max_i ||m_i||^2``), minimised by L-BFGS-B (at most 300 iterations,
    finite-difference gradients) from BISR's ``a`` (the first ``p`` coefficients of ``(1 - x)^{1/2}``).
    With every ``a_j <= 0`` (j >= 1), ``1/a(x) = sum_m (sum_j |a_j| x^j)^m`` has non-negative coefficients, so
    ``C >= 0``. Settings: ours (the paper does not state them).
    """
    p = min(check_positive_int("bands", bands), n)
    a0 = inv_sqrt_series(p)
    if p == 1:
        return np.ones(1), np.ones(1)

    def fun(x):
        a = np.concatenate([[1.0], x])
        e, s = _objective_terms(series_inverse(a, n), n, epochs, batches)
        return np.log(e) + np.log(s)

    x = _optimise(fun, a0[1:], [(-1.0, 0.0)] * (p - 1))
    a = np.concatenate([[1.0], x])
    return series_inverse(a, n), a


def blt_coefs(n: int, epochs: int, batches: int, n_buffers: int = 3) -> tuple[np.ndarray, dict[str, Any]]:
    """Optimised BLT coefficients ``c_0 = 1, c_t = sum_j w_j theta_j^{t-1}``; returns (c, params)."""
    nb = check_positive_int("n_buffers", n_buffers)
    t = np.arange(1, n)

    def coefs(x):
        w, th = x[:nb], x[nb:]
        return np.concatenate([[1.0], (w[None, :] * th[None, :] ** (t[:, None] - 1)).sum(axis=1)])

    def fun(x):
        e, s = _objective_terms(coefs(x), n, epochs, batches)
        return np.log(e) + np.log(s)

    # start: a few geometric buffers roughly matching the square-root series' slow decay
    w0 = np.full(nb, 0.5 / nb)
    th0 = np.linspace(0.5, 0.98, nb)
    x = _optimise(fun, np.concatenate([w0, th0]), [(0.0, None)] * nb + [(0.0, 0.999)] * nb)
    return coefs(x), {"weights": x[:nb].tolist(), "thetas": x[nb:].tolist()}


# --------------------------------------------------------------------------------------- the strategy object
@dataclass
class Strategy:
    """A strategy matrix under balls-in-bins participation.

    Attributes: ``name``, ``C`` (N x N), ``epochs`` k, ``batches`` b, ``bands`` (number of non-zero
    diagonals of ``C`` for banded strategies, None for dense ones), ``coefs`` (first column), ``info``.
    """

    name: str
    C: np.ndarray
    epochs: int
    batches: int
    bands: int | None
    coefs: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.epochs * self.batches

    @property
    def means(self) -> np.ndarray:
        return slot_means(self.C, self.epochs, self.batches)

    @property
    def gram(self) -> np.ndarray:
        if "_gram" not in self.info:
            self.info["_gram"] = gram(self.C, self.epochs, self.batches)
        return self.info["_gram"]

    def error(self) -> float:
        """Mean squared error factor ``(1/N)||A C^{-1}||_F^2`` times the squared sensitivity."""
        e, s = _objective_terms(self.coefs, self.n, self.epochs, self.batches)
        return e * s

    def __repr__(self) -> str:
        return f"Strategy({self.name!r}, N={self.n}, epochs={self.epochs}, batches={self.batches}, bands={self.bands})"


#: Peak number of N x N float64 arrays alive while a strategy is built (Toeplitz construction, |C|, C).
_NN_ARRAYS = 5
#: Objective evaluations of one L-BFGS-B run per free parameter (300 iterations, finite differences).
_EVALS_PER_PARAMETER = 300


def check_strategy_cost(name: str, epochs: int, batches: int, bands: int = 1, n_buffers: int = 3) -> None:
    """Refuse (``DPValueError`` naming the parameter) a strategy this machine cannot build.

    The strategy holds the dense N x N matrix C (N = epochs x batches), built through a few N x N
    temporaries; ``bandmf``/``blt`` also run an L-BFGS-B optimisation whose objective costs ``O(N^2)``.
    """
    n = int(epochs) * int(batches)
    per = 8.0 * _NN_ARRAYS
    need = per * float(n) * n
    if not need <= available_memory_bytes():
        largest = int(math.isqrt(int(available_memory_bytes() / per)))
        check_memory(
            "batches",
            need,
            f"the {n} x {n} strategy matrix (N = epochs x batches = {epochs} x {batches})",
            hint=f"the largest feasible N is about {largest}",
        )
    if name in ("bandmf", "blt", "bandinvmf"):
        params = (min(int(bands), n) - 1) if name != "blt" else 2 * int(n_buffers)
        evals = _EVALS_PER_PARAMETER * (params + 2)
        what = "bands" if name == "bandmf" else "n_buffers"
        check_work(
            "batches",
            evals * (20.0 * n * n + 300.0 * n),
            "operations",
            hint=f"optimising {name} ({what}={bands if name == 'bandmf' else n_buffers}) over N={n} steps; "
            "use fewer epochs x batches or bands",
        )


def build_strategy(name: str, epochs: int, batches: int, bands: int = 1, n_buffers: int = 3) -> Strategy:
    """Build one of :data:`MATRICES` for ``N = epochs * batches`` steps.

    ``bands`` is the number of non-zero diagonals (``bsr``, ``bandmf``) or of ``C^{-1}`` (``bisr``,
    ``bandinvmf``);
    ignored for ``identity`` (1 band) and ``blt`` (dense).
    """
    check_choice("matrix", name, MATRICES)
    k = check_positive_int("epochs", epochs)
    b = check_positive_int("batches", batches)
    p = check_positive_int("bands", bands)
    n = k * b
    check_strategy_cost(name, k, b, p, n_buffers)
    info: dict[str, Any] = {"normalisation": "c_0 = 1"}
    if name == "identity":
        coefs, nb = np.ones(1), 1
    elif name == "bsr":
        coefs, nb = sqrt_series(min(p, n)), min(p, n)
    elif name == "bisr":
        coefs, nb = series_inverse(inv_sqrt_series(min(p, n)), n), None
        info["inverse_bands"] = min(p, n)
    elif name == "bandmf":
        coefs, nb = bandmf_coefs(n, p, k, b), min(p, n)
        info["objective"] = "(1/N)||A C^-1||_F^2 * max_i ||m_i||^2, c >= 0, L-BFGS-B from BSR"
    elif name == "bandinvmf":
        coefs, inv = bandinvmf_coefs(n, p, k, b)
        nb = None
        info["inverse_bands"] = min(p, n)
        info["inverse_coefs"] = inv.tolist()
        info["objective"] = "(1/N)||A C^-1||_F^2 * max_i ||m_i||^2, C^-1 banded, a_j <= 0, L-BFGS-B from BISR (ours)"
    else:  # blt
        coefs, params = blt_coefs(n, k, b, n_buffers)
        nb = None
        info.update(params)
        info["objective"] = "(1/N)||A C^-1||_F^2 * max_i ||m_i||^2, L-BFGS-B"
    C = toeplitz_lower(coefs, n)
    if (C < -1e-12).any():
        raise DPValueError(f"matrix {name!r} has negative entries; Lemma 2.8 needs C >= 0")
    return Strategy(name, C, k, b, nb, np.asarray(coefs, dtype=float)[:n], info)
