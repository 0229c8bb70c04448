r"""Certified PLD accountant for DP-SGD under random allocation (balls in bins), after Feldman and Shenfeld.

**The mechanism** (:class:`RandomAllocation`). In each of ``epochs`` epochs of ``steps`` steps, every example takes
part in ``selected`` of the epoch's steps, chosen uniformly at random without replacement and independently across
epochs (Feldman and Shenfeld's *k-out-of-t random allocation*, ``t = steps``, ``k = selected``); each step releases
the sum of its clipped gradients (clip norm 1) plus :math:`N(0, \sigma^2 I)`. The issue's DP-SGD with one epoch of
100 batches is ``RandomAllocation(sigma, steps=100)``.

**The pair of one 1-out-of-t allocation** (remove relation; the add relation is the reversed pair). Rotating each
step's output onto the direction of the differing gradient, the run with the example is
:math:`P = \frac1t\sum_{i=1}^t N(e_i, \sigma^2 I_t)` and the one without it :math:`Q = N(0, \sigma^2 I_t)` (Lemma 2.8
of Schuchardt and Kalinin with :math:`C = I`, and Feldman-Shenfeld's reduction of random allocation to this pair).
The likelihood ratio is the mean of t independent lognormals:

.. math::  \frac{dP}{dQ}(x) = W := \frac1t \sum_{i=1}^t Y_i,\qquad Y_i = e^{x_i/\sigma^2 - 1/(2\sigma^2)},
           \quad \log Y_i \sim N(-\tfrac{1}{2\sigma^2}, \tfrac1{\sigma^2}) \text{ under } Q,

so both privacy profiles are expectations of convex functions of W under Q:
:math:`\delta_{\rm remove}(\varepsilon) = \mathbb{E}_Q[(W - e^\varepsilon)_+]` and
:math:`\delta_{\rm add}(\varepsilon) = \mathbb{E}_Q[(1 - e^\varepsilon W)_+]`. The Q-law of
:math:`S = tW` is the t-fold convolution of the law of Y; it is computed on a linear grid of width ``h``.

**Dominating (upper) pair, by convex order.** Cap Y at M, :math:`Y_c = \min(Y, M)`, and split the Q-mass of each grid
cell :math:`[jh, (j+1)h)` between its two end points so that the cell's mass and mean are kept (the mean is the cell's
mass under the size-biased lognormal :math:`\log Y^* \sim N(+\tfrac{1}{2\sigma^2}, \tfrac1{\sigma^2})`, in closed
form). The split law :math:`\tilde Y` dominates :math:`Y_c` in the convex order, sums of independent terms keep the
order, so :math:`\tilde W = \frac1t\sum \tilde Y_i` has :math:`\mathbb{E}f(\tilde W) \ge \mathbb{E} f(W_c)` for every
convex f. With :math:`\eta = \mathbb{E}[W - W_c] = \mathbb{E}[(Y - M)_+]`:
:math:`(W - \gamma)_+ \le (W_c - \gamma)_+ + (W - W_c)` and :math:`(1 - \gamma W)_+ \le (1 - \gamma W_c)_+`, so the
pair :math:`\tilde Q = \mathrm{law}(\tilde W)`, :math:`d\tilde P = \tilde W\, d\tilde Q + \eta\,\delta_{+\infty}`
(a P-only atom) is a probability pair that dominates both directions for every :math:`\gamma = e^\varepsilon > 0`,
hence under composition. Partial sums are capped during the convolutions (:math:`\min(S_m, C_m)` with
:math:`C_m = m + M + 20\sqrt m\,\mathrm{sd}(Y)`) to bound the array length; the expected deficit of each cap, computed
from the array, is added to :math:`\eta` (the same Lipschitz argument).

**Dominated (lower) pair, by post-processing.** Rounding every :math:`Y_i` down to the grid (and capping it at M),
summing, and capping the partial sums as above is a deterministic function of the released x, so the output's law
under P and under Q is a pair that the true pair dominates (post-processing). Under Q it is the convolution of the
rounded cell masses; under P one uniformly chosen coordinate has the size-biased law, so its law is the mixture over
which block holds that coordinate (kept exactly through the convolution tree).

**k > 1 and epochs.** Following Feldman and Shenfeld (the reduction pld-accounting 2.0 uses, its README "Internal
composition"), one k-out-of-t epoch is dominated by the composition of :math:`k - r` allocations 1-out-of-
:math:`\lfloor t/k \rfloor` and r allocations 1-out-of-:math:`(\lfloor t/k \rfloor + 1)`, :math:`r = t - k\lfloor
t/k\rfloor`; epochs compose. So the **upper** end is certified for every k; the **lower** end is a certified lower
bound only for ``selected == 1`` (independent 1-out-of-t epochs compose exactly); for ``selected > 1`` the reduction is
one-sided and the lower end reported is 0 (``details["lower_bound"]`` says which).

A :class:`~dputils.matrix.BallsInBinsMatrixMechanism` whose Gram matrix is :math:`g I_b` (the identity strategy, k
epochs at the same slot) is the 1-out-of-b pair with :math:`\sigma/\sqrt g` exactly (Lemma 2.8), and is accepted too.

**Composition and certification.** Each discrete pair becomes a :class:`~dputils.accountants.pld.PLDAccountant`
mechanism (:class:`DiscretePair`); the PLD accountant's certified connect-the-dots / rounded-down composition gives
the upper end from the dominating pairs and the lower end from the dominated ones; one or two allocations (k 2, two
epochs) are summed exactly from their pairs instead (:func:`_delta2`: no PLD width, and several times faster).
Floating-point error of the
cell masses (``log_ndtr`` differences) and of every FFT convolution is tracked as l1 distances
:math:`\tau_P, \tau_Q` between the computed and the exact pairs. A convolution's rounding bound is
:math:`3\rho(\|u\|_2\|v\|_1 + \|u\|_1\|v\|_2)` on the 2-norm, :math:`\rho = 10\,u\log_2 L` (after Higham's FFT
error analysis, :func:`_bilinear_l2`), turned into l1 by the square root of the kept length; each vector is split
into a short bulk and a light tail first (:func:`_combine`), so that the long transforms only multiply terms holding a
tail factor: the bound is relative to the tails' small mass, not to the bulk (with one transform of the whole arrays
the slack was the bracket's width at sigma 0.8, t 50: [2.4546, 2.5264], now [2.48652, 2.48706]). The bounds are
propagated through the tree; the hockey-stick divergence of a composition
of c pairs moves by at most :math:`c(\tau_P + e^\varepsilon \tau_Q)`, which widens both ends.

Neither PLD_accounting's code nor its text is used; only the facts above (the pair, the k-out-of-t reduction).

**Peers.** dp_accounting (0.4.x) has no DpEvent for random allocation (its ``MixtureOfGaussiansDpEvent`` is a
one-dimensional mixture), so :mod:`dputils.interop` offers no adapter for this accountant; pld-accounting 2.0 is the
peer it is measured against (``benchmarks/bench_allocation.py``).

**Where the grid does not fit.** For small sigma the lognormal terms are heavy-tailed and the default grid would need
more than ``DEFAULT_POINTS`` points (at T = 100: below sigma of about 0.65); such a component is then bounded by the
Gaussian mechanism with the same sigma (one participation of sensitivity 1 dominates the mixture, by joint convexity
of the hockey-stick divergence), composed by the PLD accountant, with no lower end (``details["fallback"]`` says
why). A ``grid`` given by the caller is used as is (refused above ``MAX_POINTS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft
from scipy import special

from ..errors import DPValueError, NumericalError, check_positive, check_positive_int
from ..mechanisms import GaussianMechanism, Mechanism, PrivacyLossPair
from ..numerics import bisect_monotone
from .base import Accountant, AccountingResult
from .pld import GridLimitError, PLDAccountant
from .registry import register

__all__ = ["RandomAllocation", "RandomAllocationPLDAccountant", "DiscretePair", "allocation_pairs"]

_U = 2.0**-53
#: below this sigma the terms' law is not computed (the cap M = exp(1/(2 sigma^2) + 7.7/sigma) leaves the grid's
#: range); such components are bounded by the Gaussian mechanism (see RandomAllocationPLDAccountant)
MIN_SIGMA = 0.2


class _OutOfRange(DPValueError):
    """A 1-out-of-t allocation whose lognormal law does not fit the grid (the accountant falls back)."""


#: largest array (grid points of the capped sum S) one allocation may use
MAX_POINTS = 2**24
#: with the default grid, an allocation needing more points is bounded by the Gaussian mechanism instead
DEFAULT_POINTS = 2**21


# ---------------------------------------------------------------------------------------------- mechanism
class RandomAllocation(Mechanism):
    """DP-SGD with the Gaussian mechanism under k-out-of-t random allocation (module docstring).

    Args:
        sigma: noise standard deviation (clip norm 1), > 0.
        steps: steps per epoch t, an integer >= 1.
        selected: steps each example takes part in per epoch k, an integer in [1, steps].
        epochs: independent epochs, an integer >= 1.
    """

    name = "random-allocation"

    def __init__(self, sigma: float, steps: int, selected: int = 1, epochs: int = 1) -> None:
        self.sigma = check_positive("sigma", sigma)
        self.steps = check_positive_int("steps", steps)
        self.selected = check_positive_int("selected", selected)
        self.epochs = check_positive_int("epochs", epochs)
        if self.selected > self.steps:
            raise DPValueError(f"selected must be at most steps ({self.steps}), got {self.selected}")

    @property
    def params(self) -> dict[str, float]:
        return {"sigma": self.sigma, "steps": self.steps, "selected": self.selected, "epochs": self.epochs}

    def pair(self, direction: str) -> PrivacyLossPair:
        raise DPValueError(
            "random-allocation: the run is no composition of scalar pairs; use the allocation-pld accountant"
        )

    def components(self) -> list[tuple[int, float, int]]:
        """(t, sigma, count): the 1-out-of-t allocations whose composition dominates the run (exact if k = 1)."""
        fl = self.steps // self.selected
        r = self.steps - self.selected * fl
        out = [(fl, self.sigma, (self.selected - r) * self.epochs)]
        if r:
            out.append((fl + 1, self.sigma, r * self.epochs))
        return out


# ---------------------------------------------------------------------------------------------- discrete pair
class DiscretePair(PrivacyLossPair):
    """A pair of discrete measures on common atoms: P-masses ``p``, Q-masses ``q`` (non-negative), privacy loss
    ``log p/q`` (or the given ``losses``); atoms with ``q = 0 < p`` have infinite loss (``infinity_mass``), atoms
    with ``p = 0`` never count. The tails are sums over the sorted atoms, accumulated from the small end."""

    def __init__(self, p, q, losses=None, inf_mass: float = 0.0, direction: str = "remove") -> None:
        p = np.asarray(p, dtype=float)
        q = np.asarray(q, dtype=float)
        if p.shape != q.shape or np.any(p < 0) or np.any(q < 0):
            raise DPValueError("DiscretePair: p and q must be non-negative arrays of one shape")
        fin = (p > 0) & (q > 0)
        self._inf = float(inf_mass) + float(p[(p > 0) & (q == 0)].sum())
        if losses is None:
            lv = np.log(p[fin]) - np.log(q[fin])
        else:
            lv = np.asarray(losses, dtype=float)[fin]
        order = np.argsort(lv, kind="stable")
        self.l = lv[order]
        self.pm = p[fin][order]
        self.qm = q[fin][order]
        self.direction = direction
        self._csum_p = np.cumsum(self.pm)  # P-mass with loss <= l_j
        self._rsum_p = np.cumsum(self.pm[::-1])[::-1]  # P-mass with loss >= l_j
        self._rsum_q = np.cumsum(self.qm[::-1])[::-1]

    @property
    def infinity_mass(self) -> float:
        return self._inf

    @property
    def loss_support(self) -> tuple[float, float]:
        return (float(self.l[0]), float(self.l[-1]))

    def loss_quantile_range(self, tail: float) -> tuple[float, float]:
        """(lo, hi): the smallest atom loss with P-cdf above ``tail`` and the largest with P-tail above it."""
        i = int(np.searchsorted(self._csum_p, tail, side="right"))  # first atom with cdf > tail
        lo = float(self.l[min(i, self.l.size - 1)])
        above = np.nonzero(self._rsum_p > tail)[0]  # atoms whose tail sum (from them upwards) exceeds tail
        hi = float(self.l[above[-1]]) if above.size else float(self.l[-1])
        return min(lo, hi), max(lo, hi)

    def _tail(self, rsum, eps):
        e = np.asarray(eps, dtype=float)
        k = np.searchsorted(self.l, e, side="right")  # first atom with loss > eps
        vals = np.concatenate([rsum, [0.0]])[k]
        with np.errstate(divide="ignore"):
            out = np.log(vals)
        return out if out.ndim else float(out)

    def log_sf_p(self, eps):
        return self._tail(self._rsum_p, eps)

    def log_sf_q(self, eps):
        return self._tail(self._rsum_q, eps)

    def log_cdf_p(self, eps):
        e = np.asarray(eps, dtype=float)
        k = np.searchsorted(self.l, e, side="right")  # atoms < k have loss <= eps
        vals = np.concatenate([[0.0], self._csum_p])[k]
        with np.errstate(divide="ignore"):
            out = np.log(vals)
        return out if out.ndim else float(out)

    def log_delta(self, eps):
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        out = np.empty(e.size)
        for n, x in enumerate(e):
            k = int(np.searchsorted(self.l, x, side="right"))
            v = float(np.sum(self.pm[k:] * -np.expm1(x - self.l[k:])))
            out[n] = math.log(v) if v > 0 else -math.inf
        return out if np.ndim(eps) else float(out[0])

    def delta_bounds(self, eps: float) -> tuple[float, float]:
        """(lower, upper) on this pair's delta(eps) = inf_mass + sum_{l_j > eps} p_j (1 - e^{eps - l_j}): every
        term is non-negative and computed to a few ulps, so the float sum is within (n + 8) u relative of the exact
        one (each bound widened by 4 (n + 8) u)."""
        k = int(np.searchsorted(self.l, eps, side="right"))
        v = float(np.sum(self.pm[k:] * -np.expm1(eps - self.l[k:]))) + self._inf
        r = 4 * (self.l.size - k + 8) * _U
        return max(v * (1 - r), 0.0), v * (1 + r)

    def log_p(self, x):
        return np.log(self.pm[np.asarray(x, dtype=int)])

    def log_q(self, x):
        return np.log(self.qm[np.asarray(x, dtype=int)])

    def sample(self, n: int, rng: np.random.Generator, under: str = "p"):
        w = self.pm if under == "p" else self.qm
        return rng.choice(w.size, size=n, p=w / w.sum())


def _delta2(A: DiscretePair, B: DiscretePair, eps: float) -> tuple[float, float]:
    r"""(lower, upper) on the hockey-stick divergence :math:`\delta(\varepsilon)` of the product pair A x B (the
    composition of two discrete pairs: losses add), exactly up to floating point, in O(n log n).

    :math:`\delta = \sum_{l_i + l_j > \varepsilon} (p_i p_j - e^\varepsilon q_i q_j) + a_\infty (P_B + b_\infty)
    + P_A b_\infty`, and for each atom i of A the sum over j is :math:`p_i S^P_B(x) - e^\varepsilon q_i S^Q_B(x)`
    with the suffix sums :math:`S_B(x)` over B's atoms of loss above :math:`x = \varepsilon - l_i` (a search in B's
    sorted losses). Every pair counted has :math:`p_ip_j > e^\varepsilon q_iq_j`, so each inner sum is >= 0 (clipped
    there). Floating point: the suffix sums (non-negative, summed from the small end) within :math:`(n_B + 1)u`,
    the products and the difference within 4u of :math:`p_i S^P + e^\varepsilon q_i S^Q`, the outer sum within
    :math:`(n_A + 2)u` of its value; pairs with :math:`l_i + l_j` within rounding of epsilon (the computed losses
    carry a few ulps of :math:`|l| + 1`) may be misclassified, each moving delta by at most
    :math:`p_ip_j (e^{8u(2L + |\varepsilon| + 3)} - 1)` (L the largest |loss|)."""
    g = math.exp(min(eps, 700.0))
    k = np.searchsorted(B.l, eps - A.l, side="right")
    rp = np.concatenate([B._rsum_p, [0.0]])[k]
    rq = np.concatenate([B._rsum_q, [0.0]])[k]
    a = A.pm * rp
    b = g * (A.qm * rq)
    val = float(np.maximum(a - b, 0.0).sum())
    pa = float(A._csum_p[-1]) if A.pm.size else 0.0
    pb = float(B._csum_p[-1]) if B.pm.size else 0.0
    inf = A._inf * (pb + B._inf) + pa * B._inf
    big = max(float(np.abs(A.l).max(initial=0.0)), float(np.abs(B.l).max(initial=0.0)))
    err = (
        (B.l.size + 5) * _U * float(a.sum() + b.sum())
        + (A.l.size + 2) * _U * val
        + math.expm1(8 * _U * (2 * big + abs(eps) + 3)) * pa * pb
        + 4 * _U * inf
    )
    return max(val + inf - err, 0.0), val + inf + err


class _PairMechanism(Mechanism):
    """A mechanism given by its two discrete pairs (for the PLD accountant)."""

    name = "discrete-pair"

    def __init__(self, remove: DiscretePair, add: DiscretePair, key: tuple) -> None:
        self._pairs = {"remove": remove, "add": add}
        self._key = key

    @property
    def params(self) -> dict[str, float]:
        return {
            "kind": float(self._key[0] == "upper"),
            "t": float(self._key[1]),
            "sigma": self._key[2],
            "h": self._key[3],
        }

    def pair(self, direction: str) -> PrivacyLossPair:
        return self._pairs[direction]


# ---------------------------------------------------------------------------------------------- the law of S
def _cells(z_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal masses of (-inf, z_1], (z_1, z_2], ..., (z_J, inf) and an absolute error bound of each."""
    lo = special.log_ndtr(z_edges)  # log Phi(z)
    hi = special.log_ndtr(-z_edges)  # log Phi(-z)
    cdf = np.exp(lo)
    sf = np.exp(hi)
    n = z_edges.size
    m = np.empty(n + 1)
    m[0] = cdf[0]
    m[-1] = sf[-1]
    left = z_edges[1:] <= 0  # cell (z_j, z_{j+1}] in the lower half: difference of CDFs, else of survivals
    m[1:-1] = np.where(left, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    m = np.maximum(m, 0.0)
    big = np.empty(n + 1)
    big[0] = cdf[0]
    big[-1] = sf[-1]
    big[1:-1] = np.where(left, cdf[1:] + cdf[:-1], sf[:-1] + sf[1:])
    return m, 16 * _U * big  # log_ndtr to a few ulps, exp and the difference: 16 u of the operands


@dataclass
class _Term:
    """One Y's discretised laws on the grid j h, j = 0..J (J h = M)."""

    h: float
    J: int
    upper: np.ndarray  # convex split of min(Y, M): Q-masses
    upper_err: float  # l1 error bound of upper
    upper_werr: float  # bound on sum_j j |error_j| of upper (grid units): h times it bounds the P-vector's error
    down_q: np.ndarray  # min(Y, M) rounded down: Q-masses
    down_p: np.ndarray  # the same under the size-biased law (P of the shifted coordinate)
    down_err: float
    eta: float  # E[(Y - M)_+] (upper bound)
    sd: float  # standard deviation of Y


def _term(sigma: float, h: float, tail: float) -> _Term:
    s = 1.0 / sigma
    mu_q, mu_p = -0.5 * s * s, 0.5 * s * s
    zt = -special.ndtri(tail)  # Phi(-zt) = tail
    M_raw = math.exp(mu_p + s * zt)
    J = max(2, math.ceil(M_raw / h))
    M = J * h
    edges = h * np.arange(1, J + 1)  # h, 2h, ..., Jh = M
    le = np.log(edges)
    q, eq = _cells((le - mu_q) / s)  # cells [0,h), [h,2h), ..., [(J-1)h, M), [M, inf): Q-masses
    mP, ep = _cells((le - mu_p) / s)  # the same under the size-biased law = E_Q[Y; cell]
    j = np.arange(J)
    # convex split of cell j (< J): to (j+1) h the mass (m_j - j h q_j)/h, to j h the rest
    right = (mP[:J] - j * h * q[:J]) / h
    right = np.clip(right, 0.0, q[:J])
    upper = np.zeros(J + 1)
    upper[:J] += q[:J] - right
    upper[1:] += right
    upper[J] += q[J]  # min(Y, M) = M on the cap cell
    # errors: the masses (eq, ep) enter right with weight j+1 and 1/h; rounding of the split ~ 4u of the operands
    cell_err = eq[:J] * (j + 2) + ep[:J] / h + 4 * _U * (mP[:J] / h + (j + 1) * q[:J] + q[:J])
    upper_err = float(np.sum(cell_err) + eq[J])
    upper_werr = float(np.sum(cell_err * (j + 1)) + eq[J] * J)
    eta_val = mP[J] - M * q[J]
    eta = max(eta_val, 0.0) + ep[J] + M * eq[J] + 4 * _U * (mP[J] + M * q[J])
    down_err = float(eq.sum() + 4 * _U)
    down_p_err = float(ep.sum() + 4 * _U)
    sd = math.sqrt(math.expm1(s * s))
    return _Term(h, J, upper, upper_err, upper_werr, q.copy(), mP.copy(), max(down_err, down_p_err), eta, sd)


def _norms(a: np.ndarray) -> tuple[float, float]:
    """(l1, l2) of a non-negative vector, each rounded up (the float sums carry at most n u relative error)."""
    f = 1.0 + 2.0 * (a.size + 2) * _U
    return f * float(a.sum()), f * math.sqrt(float(np.einsum("i,i->", a, a)))


def _conv_error(a_norms, b_norms, ea: float, eb: float) -> float:
    """l1 error that the inputs' own l1 errors ``ea``, ``eb`` carry into their convolution:
    :math:`\\|\\hat a * \\hat b - a * b\\|_1 \\le e_a (\\|\\hat b\\|_1 + e_b) + e_b \\|\\hat a\\|_1`."""
    return ea * (b_norms[0] + eb) + eb * a_norms[0]


def _fft_rho(L: int) -> float:
    """The relative 2-norm error of one floating-point FFT of length L assumed throughout: 10 u log2 L (Higham,
    *Accuracy and Stability*, Thm 24.2, gives log2(L) (u' + 4 sqrt2 u) / (1 - ...) for radix 2; the factor 10
    leaves room for mixed radices and real-input packing; ``tests/test_frontier3_allocation_fft.py`` measures
    it 100x above the observed error)."""
    return 10.0 * _U * math.log2(max(L, 2))


def _bilinear_l2(terms, L: int) -> float:
    r"""Bound on the 2-norm rounding error of :math:`c = F^{-1}(\sum_k \alpha_k \hat F u_k \cdot \hat F v_k)` computed in
    floating point, each :math:`F v_k` possibly a sum of computed transforms. ``terms``: (alpha, (|u|_1, |u|_2),
    (V_1, V_2)) with :math:`V_1 \ge \|v\|_1`, :math:`V_2` at least the sum of the 2-norms of the vectors
    transformed to form :math:`F v`.

    With :math:`\|\hat F u - F u\|_2 \le \rho \sqrt L \|u\|_2` and :math:`|F v|_\infty \le \|v\|_1`, the product's
    error is at most :math:`\sqrt L (\rho \|u\|_2 V_1 + (\rho + 2u) \|u\|_1 V_2 + 2\sqrt2 u \|u\|_2 V_1)` (1 + tiny),
    the inverse transform (a 1/sqrt(L) isometry) adds :math:`\rho \|\hat C\|_2 / \sqrt L \le \rho \sum \alpha
    \|u\|_2 V_1`, and the sum over k adds u per term: in all at most
    :math:`3\rho \sum_k |\alpha_k| (\|u_k\|_2 V_{1,k} + \|u_k\|_1 V_{2,k})` (as rho >= 10 u)."""
    rho = _fft_rho(L)
    return 3.0 * rho * sum(abs(al) * (u[1] * v[0] + u[0] * v[1]) for al, u, v in terms)


#: the bulk of a block: its shortest prefix beyond which at most this much Q- and P-mass lies
_BULK_TAIL = 1e-2


def _bulk_index(blk: _Block) -> int:
    """The length K of the bulk prefix of a block (see :func:`_combine`); any K gives a valid bound (the norms of
    both parts enter it), so the prefix sums' rounding only moves K."""
    K = 0
    for v in (blk.a, blk.b):
        c = np.cumsum(v)
        K = max(K, int(np.searchsorted(c, c[-1] - _BULK_TAIL)) + 1)  # mass beyond index K - 1 at most _BULK_TAIL
    return min(K, blk.a.size)


def _cap_index(m: int, term: _Term) -> int:
    """Grid index of the cap C_m of a partial sum of m terms (module docstring), at most m J."""
    c = m + term.J * term.h + 20.0 * math.sqrt(m) * term.sd
    return min(m * term.J, math.ceil(c / term.h))


@dataclass
class _Block:
    """A partial sum of n terms on the grid, on the event that no block of the tree went over its cap: its Q-masses
    ``a`` and its P-masses ``b`` (the shifted coordinate uniform in the block, i.e. E[(1/n) sum_block Y; S = s]), with
    l1 error bounds."""

    n: int
    a: np.ndarray
    ea: float
    b: np.ndarray
    eb: float


def _tail_fft(v: np.ndarray, K: int, L: int) -> np.ndarray:
    """rfft of length L of v with its first K entries zeroed (the tail part)."""
    buf = np.zeros(L)
    buf[K : v.size] = v[K:]
    return sfft.rfft(buf)


def _combine(x: _Block, y: _Block, term: _Term, split: bool = True) -> _Block:
    r"""The block of x's and y's terms: Q = a_x * a_y, P = (n_x b_x * a_y + n_y a_x * b_y) / n, capped.

    **Bulk and tail.** An FFT convolution's rounding error is relative to the inputs' 2-norms and lands on *every*
    output entry, and its l1 bound is :math:`\sqrt{\text{length}}` times the 2-norm bound: with the heavy lognormal
    tail the arrays are long (M / h, 2e5 points at sigma 0.8) while nearly all mass sits in a short prefix, so one
    transform of the whole arrays made the floating-point slack the bracket's width (1.4e-7 at delta 1e-6). Each
    vector is split at its bulk index K (:func:`_bulk_index`: at most 1e-2 of the Q- and P-mass beyond) into
    :math:`x = x_0 + x_T`, and :math:`x * y = x_0 * y_0 + (x_T * y + x_0 * y_T)`: the first product by short
    transforms (length about :math:`K_x + K_y`), the second (every term holding a tail factor, so its error bound is
    relative to the tail's small mass) by transforms of the full length, :math:`\hat F y = \hat F y_0 + \hat F y_T`.
    Squaring needs two full transforms per vector, as before the split the general case four. The error bounds
    (:func:`_bilinear_l2`) are turned into l1 over the kept entries by the square root of their number. With
    ``split=False`` the whole vectors are the bulk (one transform of the full length: faster, a looser bound)."""
    n = x.n + y.n
    cap = _cap_index(n, term)
    m = x.a.size + y.a.size - 1
    keep = min(m, cap + 1)
    sq = y is x
    Kx = _bulk_index(x) if split else x.a.size
    Ky = Kx if sq else (_bulk_index(y) if split else y.a.size)
    ax, bx, ay, by = x.a, x.b, y.a, y.b
    N = {k: _norms(v) for k, v in (("ax0", ax[:Kx]), ("axT", ax[Kx:]), ("bx0", bx[:Kx]), ("bxT", bx[Kx:]))}
    if not sq:
        N.update({k: _norms(v) for k, v in (("ay0", ay[:Ky]), ("ayT", ay[Ky:]), ("by0", by[:Ky]), ("byT", by[Ky:]))})
    else:
        N.update(ay0=N["ax0"], ayT=N["axT"], by0=N["bx0"], byT=N["bxT"])
    wx, wy = x.n / n, y.n / n

    def tot(*ks):  # (l1, sum of 2-norms) of a vector formed as the sum of the named parts' transforms
        return (sum(N[k][0] for k in ks), sum(N[k][1] for k in ks))

    # the bulk product, short transforms
    Ls = sfft.next_fast_len(Kx + Ky - 1, real=True)
    fa0x, fb0x = sfft.rfft(ax[:Kx], Ls), sfft.rfft(bx[:Kx], Ls)
    fa0y, fb0y = (fa0x, fb0x) if sq else (sfft.rfft(ay[:Ky], Ls), sfft.rfft(by[:Ky], Ls))
    k0 = min(Kx + Ky - 1, keep)
    a = np.zeros(keep)
    b = np.zeros(keep)
    a[:k0] = sfft.irfft(fa0x * fa0y, Ls)[:k0]
    b[:k0] = sfft.irfft(wx * fb0x * fa0y + wy * fa0x * fb0y, Ls)[:k0]
    e_a = _bilinear_l2([(1.0, N["ax0"], N["ay0"])], Ls) * math.sqrt(k0)
    e_b = _bilinear_l2([(wx, N["bx0"], N["ay0"]), (wy, N["ax0"], N["by0"])], Ls) * math.sqrt(k0)
    # the tail products x_T * y + x_0 * y_T, full transforms (skipped when both tails are empty)
    if Kx < ax.size or Ky < ay.size:
        L = sfft.next_fast_len(m, real=True)
        f = {}
        for key, v, K in (("ax", ax, Kx), ("bx", bx, Kx)) + (() if sq else (("ay", ay, Ky), ("by", by, Ky))):
            f[key + "0"], f[key + "T"] = sfft.rfft(v[:K], L), _tail_fft(v, K, L)
        if sq:
            for k in ("a", "b"):
                f[k + "y0"], f[k + "yT"] = f[k + "x0"], f[k + "xT"]
        fay = f["ay0"] + f["ayT"]
        fby = f["by0"] + f["byT"]
        ca = f["axT"] * fay + f["ax0"] * f["ayT"]
        cb = wx * (f["bxT"] * fay + f["bx0"] * f["ayT"]) + wy * (f["axT"] * fby + f["ax0"] * f["byT"])
        a += sfft.irfft(ca, L)[:keep]
        b += sfft.irfft(cb, L)[:keep]
        rk = math.sqrt(keep)
        e_a += rk * _bilinear_l2([(1.0, N["axT"], tot("ay0", "ayT")), (1.0, N["ax0"], N["ayT"])], L)
        e_b += rk * _bilinear_l2(
            [
                (wx, N["bxT"], tot("ay0", "ayT")),
                (wx, N["bx0"], N["ayT"]),
                (wy, N["axT"], tot("by0", "byT")),
                (wy, N["ax0"], N["byT"]),
            ],
            L,
        )
    np.maximum(a, 0.0, out=a)  # the exact masses are non-negative: clipping only moves towards them
    np.maximum(b, 0.0, out=b)
    # the sum of the two parts: one rounding per entry
    e_a += 2 * _U * float(a.sum())
    e_b += 2 * _U * float(b.sum())
    nxa, nxb, nya, nyb = _norms(ax), _norms(bx), _norms(ay), _norms(by)
    ea = e_a + _conv_error(nxa, nya, x.ea, y.ea)
    eb = e_b + wx * _conv_error(nxb, nya, x.eb, y.ea) + wy * _conv_error(nxa, nyb, x.ea, y.eb)
    # sums over the cap are set aside (the event "some block over its cap", see allocation_pairs)
    return _Block(n, a, ea, b, eb + 4 * _U * float(b.sum()))


def _power(t: int, base: _Block, term: _Term, split: bool = True) -> _Block:
    """The block of t terms by binary powering (each node a capped convolution, :func:`_combine`)."""
    result = None
    sq = base
    k = t
    while True:
        if k & 1:
            result = sq if result is None else _combine(result, sq, term, split)
        k >>= 1
        if not k:
            break
        sq = _combine(sq, sq, term, split)
    return result


@dataclass
class AllocationPairs:
    """The dominating (``upper``) and dominated (``lower``) discrete pairs of one 1-out-of-t allocation and the l1
    error bounds (``tau_up``, ``tau_low``: (P, Q)) of each against the exact pair it stands for."""

    t: int
    sigma: float
    h: float
    upper: _PairMechanism
    lower: _PairMechanism
    tau_up: tuple[float, float]
    tau_low: tuple[float, float]
    eta: float
    over: tuple[float, float]
    points: int


def _with_rest(blk: _Block, p_total: float, q_total: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The block's masses and the masses of the set-aside event (totals minus sums, at least 0)."""
    p = blk.b
    q = blk.a
    return p, q, max(p_total - float(p.sum()), 0.0), max(q_total - float(q.sum()), 0.0)


def allocation_pairs(
    t: int,
    sigma: float,
    h: float | None = None,
    tail: float = 1e-14,
    split: bool = True,
    auto: bool | None = None,
    lower: bool = True,
) -> AllocationPairs:
    """The discrete pairs of the 1-out-of-t Gaussian allocation (module docstring).

    The event that some partial sum of the convolution tree exceeds its cap is set aside: in the dominating pair its
    P-mass becomes a P-only atom (infinite loss) and its Q-mass a Q-only atom (the part of a pair on an event is
    dominated by a perfectly distinguishable one, in both directions); in the dominated pair (a post-processing) it is
    one more outcome. Their masses are 1 minus the kept sums, so their error is at most the kept masses' l1 error,
    which is counted twice in ``tau``.

    Args:
        t: steps.
        sigma: noise standard deviation.
        h: grid width of Y (default: :func:`default_grid`).
        tail: the cap M of Y is the (1 - tail) quantile of the size-biased law, so that E[(Y - M)_+] <= tail.
        split: the convolutions' bulk and tail split (:func:`_combine`; False: one transform, faster, a looser
            rounding bound).
        auto: whether h is an automatic choice (refused above ``DEFAULT_POINTS`` with the reason, for the
            fallback; default: h is None).
        lower: whether to compute the dominated pair (else ``lower`` is None: for k > 1, whose reduction has no
            lower end).
    """
    t = check_positive_int("steps", t)
    sigma = check_positive("sigma", sigma)
    if not 0 < tail <= 1e-6:
        raise DPValueError(f"tail must be in (0, 1e-6], got {tail!r}")
    if sigma < MIN_SIGMA:
        raise _OutOfRange(f"sigma: {sigma:g} is below {MIN_SIGMA} (the lognormal terms leave the floating-point range)")
    auto = h is None if auto is None else auto
    h = default_grid(t, sigma, tail) if h is None else check_positive("grid", h)
    # sizes first (as _term and _cap_index will make them), so that a refusal costs nothing
    s_ = 1.0 / sigma
    J = max(2, math.ceil(math.exp(0.5 * s_ * s_ - s_ * special.ndtri(tail)) / h))
    sd = math.sqrt(math.expm1(s_ * s_))
    est = max(J, min(t * J, math.ceil((t + J * h + 20.0 * math.sqrt(t) * sd) / h))) + 1
    if auto and est > DEFAULT_POINTS:
        raise _OutOfRange(
            f"grid: at sigma={sigma:g} the capped sum of {t} lognormals (cap M = {J * h:.4g}) needs "
            f"{est:,} points at the default grid {h:.3g}, over {DEFAULT_POINTS:,}; pass a grid to force it"
        )
    if est > MAX_POINTS:
        raise DPValueError(
            f"grid: the sum of {t} capped lognormals (cap M = {J * h:.4g}) needs {est:,} points "
            f"at grid {h:g}, over the limit of {MAX_POINTS:,}; use a coarser grid or a larger sigma"
        )
    term = _term(sigma, h, tail)
    J = term.J
    # upper: the convex split of min(Y, M) (Q) and its size-biased version j h v_j (P; total 1 - eta)
    ub = np.arange(J + 1) * h * term.upper
    base_up = _Block(1, term.upper, term.upper_err, ub, h * term.upper_werr + 4 * _U * float(ub.sum()))
    up = _power(t, base_up, term, split)
    p_up, q_up, p_over, q_over = _with_rest(up, float(ub.sum()), float(term.upper.sum()))
    eta = term.eta
    # remove pair: P-only atom (set-aside P-mass + eta), Q-only atom (set-aside Q-mass) at loss -infinity
    p_r = np.concatenate([p_up, [0.0]])
    q_r = np.concatenate([q_up, [q_over]])
    rem = DiscretePair(p_r, q_r, inf_mass=p_over + eta)
    add = DiscretePair(q_r, np.concatenate([p_up, [0.0]]), inf_mass=0.0)
    # add pair: the Q-only atom is its infinite loss (DiscretePair counts p > 0 = q atoms as infinite); the P-only
    # atom (eta + p_over) never counts for the add direction and is left out
    upper = _PairMechanism(rem, add, ("upper", t, sigma, h))
    tau_up = (2 * up.eb + eta * 1e-6, 2 * up.ea)  # kept masses and the set-aside masses (1 - sums)
    if not lower:
        return AllocationPairs(t, sigma, h, upper, None, tau_up, (0.0, 0.0), eta, (p_over, q_over), int(up.a.size))
    # lower: post-processing (rounded down, capped at M, over-cap sums as one more outcome)
    lo = _power(t, _Block(1, term.down_q, term.down_err, term.down_p, term.down_err), term, split)
    p_lo, q_lo, p_lo_over, q_lo_over = _with_rest(lo, 1.0, 1.0)
    pl = np.concatenate([p_lo, [p_lo_over]])
    ql = np.concatenate([q_lo, [q_lo_over]])
    lower = _PairMechanism(DiscretePair(pl, ql), DiscretePair(ql, pl), ("lower", t, sigma, h))
    tau_low = (2 * lo.eb + 4 * _U, 2 * lo.ea + 4 * _U)
    return AllocationPairs(
        t, sigma, h, upper, lower, tau_up, tau_low, eta, (p_over, q_over), int(max(up.a.size, lo.a.size))
    )


def default_grid(t: int, sigma: float, tail: float = 1e-14, factor: float = 1.0) -> float:
    """Default grid width of Y: ``factor`` times 0.08 sd(Y) (the convex split adds h^2/4 to Var Y: under 2e-3 of it at
    factor 1), refined so that the mass at W = 0 (infinite loss of the add direction) is at most 1e-12. ``tail`` is
    unused (kept for the signature). A factor below 1 scales the capped width too."""
    s = 1.0 / sigma
    sd = math.sqrt(math.expm1(s * s))
    h = factor * 0.08 * sd
    # the split of the first cell [0, h) puts Q-mass at Y = 0, and W = 0 (all t terms there) is an infinite loss
    # of the add direction: keep Q(Y < h)^t <= 1e-12
    h0 = math.exp(-0.5 * s * s + s * special.ndtri(1e-12 ** (1.0 / t)))
    return min(h, h0 * min(factor, 1.0))


# ---------------------------------------------------------------------------------------------- the accountant
class _LazyPLD:
    """A :class:`~dputils.accountants.pld.PLDAccountant` of the discrete pairs, built on first query.

    Without a user-given loss grid it is the PLD accountant's automatic grid, under the PLD's ``rtol`` contract
    (refined until the certified bracket's relative width is at most ``rtol``, or the reason it stops is in
    ``details``), started at ``default`` (2e-4) rather than the PLD's 1e-4: on the benchmark settings the first pass
    at 2e-4 already meets rtol 1e-3, at half the time of 1e-4. A grid the PLD refuses for its size falls back to
    the PLD's own start (1e-4, coarsened by it where needed). A user-given grid is used as is (no refinement). Short compositions (at most ``FFT_COUNT`` pairs) use the PLD
    accountant's FFT power rather than its spectral path (its documented ``_spectral`` switch): the same certified
    bracket, several times faster for a handful of epochs."""

    FFT_COUNT = 256

    def __init__(self, ledger, direction: str, given: float | None, default: float | None) -> None:
        self.ledger = ledger
        self.direction = direction
        self.given = given
        self.default = default
        self._pld = None

    @property
    def _acc(self) -> PLDAccountant:
        """The PLD accountant, built on first use (a direct sum of one or two pairs never needs it)."""
        if self._pld is None:
            self._pld = self._make(self.given) if self.given is not None else self._make(None, self.default)
        return self._pld

    def _make(self, h: float | None, start: float | None = None) -> PLDAccountant:
        acc = PLDAccountant(self.direction, discretization=h)
        if h is None and start is not None:
            acc.h = start  # the automatic grid's first width (PLDAccountant.h, where its refinement starts)
        for m, n in self.ledger:
            acc.compose(m, n)
        if sum(n for _, n in self.ledger) <= self.FFT_COUNT:
            acc._spectral = False
        return acc

    def _call(self, fn):
        try:
            return fn(self._acc)
        except GridLimitError:
            # the fixed grid is over the PLD's point or memory limits (an exception type, never message text)
            if self.given is not None:
                raise
            self._pld = self._make(None)
            self.given = -1.0  # retried once
            return fn(self._acc)

    def get_epsilon(self, delta: float) -> AccountingResult:
        return self._call(lambda a: a.get_epsilon(delta))

    def get_delta(self, eps: float) -> AccountingResult:
        return self._call(lambda a: a.get_delta(eps))


@register(
    "allocation-pld",
    label="Allocation PLD",
    answer="bracket",
    events={"random-allocation", "balls-in-bins"},
    cost="moderate",
    rank=60,
    color="#637939",
    help="DP-SGD under random allocation (balls in bins), Feldman-Shenfeld pair: certified PLD bracket",
)
class RandomAllocationPLDAccountant(Accountant):
    r"""Certified bracket on epsilon(delta) / delta(epsilon) of DP-SGD under random allocation (module docstring).

    Composes :class:`RandomAllocation` runs, and :class:`~dputils.matrix.BallsInBinsMatrixMechanism` runs whose
    Gram matrix is a multiple of the identity (DP-SGD, any number of epochs at a fixed slot).

    **Grid choice** (issue 35: refine until the certified bracket is narrow). Without a given ``grid`` each query
    starts at :func:`default_grid` times ``GRID_START`` (4 for one or two allocations summed directly, whose
    discretisation error is second order in the grid; 1.5 when the PLD composes more, its own brackets taking part
    of the width) and, while the relative width ``(upper - lower) / upper`` exceeds ``rtol``,
    refines the factor by :math:`\min(0.8, \max(1/4, 0.9\sqrt{\mathrm{rtol}/w}))` (the grid's part of the width falls
    like the square of the grid width). It stops when a pass is not narrower than the one before (the floating-point
    slack, which grows as the grid is refined, then dominates), at ``GRID_MIN`` or the points limit, or where there is
    no certified lower end (k > 1, the Gaussian fallback); every pass is certified and the narrowest is returned,
    with ``details["rtol_met"]`` and, when False, ``details["rtol_reason"]``. The pairs of each grid are cached.

    Args:
        direction: ``"both"`` (default, the worse), ``"add"`` or ``"remove"``.
        grid: width h of the grid of one lognormal term, used as is (default: the grid choice above); every grid
            gives a certified bracket, a coarser one a wider bracket.
        discretization: loss grid of the PLD composition (default: the PLD accountant's automatic one).
        tail: E[(Y - M)_+] <= tail fixes the cap M of a term (added to the upper end). Default ``None``: 1e-14 for
            delta queries; for epsilon queries :math:`0.1\,\mathrm{rtol}\,\delta / c` (c the allocations
            composed), clipped to [1e-14, 1e-8], so that the tails move delta by at most 0.1 rtol of it while the
            arrays (whose length is M / h) shrink 2-3 fold.
        rtol: relative width ``(upper - lower) / upper`` the automatic grid refines to, in (0, 1); default 1e-3.
    """

    name = "allocation-pld"
    #: loss grid of the PLD composition when none is given (the automatic one takes over where it does not fit)
    DEFAULT_DISCRETIZATION = 2e-4
    #: its start for a k > 1 composition of three or more allocations (no lower end: only the upper end is used)
    NO_LOWER_DISCRETIZATION = 4e-4

    def __init__(
        self,
        direction: str = "both",
        grid: float | None = None,
        discretization: float | None = None,
        tail: float | None = None,
        rtol: float = 1e-3,
    ) -> None:
        super().__init__(direction)
        self.grid = None if grid is None else check_positive("grid", grid)
        self.discretization = None if discretization is None else check_positive("discretization", discretization)
        if tail is not None:
            tail = check_positive("tail", tail)
            if tail > 1e-6:
                raise DPValueError(f"tail must be in (0, 1e-6], got {tail!r}")
        self.tail = tail
        if not 0 < check_positive("rtol", rtol) < 1:
            raise DPValueError(f"rtol must be in (0, 1), got {float(rtol)!r}")
        self.rtol = float(rtol)
        self._states: dict[tuple, dict] = {}

    def _components(self, mechanism) -> list[tuple[int, float, int]]:
        if isinstance(mechanism, RandomAllocation):
            return mechanism.components()
        if getattr(mechanism, "name", None) == "balls-in-bins" and hasattr(mechanism, "strategy"):
            G = np.asarray(mechanism.strategy.gram, dtype=float)
            C = np.asarray(mechanism.strategy.C, dtype=float)
            g = float(G[0, 0])
            if np.any(C < 0) or not np.array_equal(G, g * np.eye(G.shape[0])) or g <= 0:
                raise DPValueError(
                    "allocation-pld: only balls-in-bins runs whose Gram matrix is a multiple of the identity "
                    f"(DP-SGD, matrix identity) are accepted; strategy {mechanism.strategy.name!r} is not"
                )
            return [(int(mechanism.batches), float(mechanism.sigma) / math.sqrt(g), 1)]
        raise DPValueError(
            f"allocation-pld composes RandomAllocation or identity BallsInBinsMatrixMechanism runs, got "
            f"{type(mechanism).__name__}"
        )

    def _check_supported(self, mechanism) -> None:
        self._components(mechanism)

    def _invalidate(self) -> None:
        self._states.clear()
        self._last = None

    def _build(self, factor: float | None | type(Ellipsis) = ..., split: bool = True, tail: float = 1e-14):
        """The pairs and their PLD compositions at grid ``factor`` (times :func:`default_grid`; None: the given grid,
        or the default one) with the convolutions' ``split`` (see :func:`_combine`), cached. Without arguments: the
        state that answered the last query (else the default grid's)."""
        if factor is ...:
            if getattr(self, "_last", None) is not None:
                return self._last
            factor = None
        tail = self.tail if self.tail is not None else tail
        key = (factor, split, tail)
        if key in self._states:
            self._last = self._states[key]
            return self._last
        self._require_ledger()
        exact_lower = all(getattr(m, "selected", 1) == 1 for m, _ in self.ledger)  # balls-in-bins: exact
        counts: dict[tuple[int, float], int] = {}
        for mech, c in self.ledger:
            for t, sig, n in self._components(mech):
                counts[(t, sig)] = counts.get((t, sig), 0) + n * c
        up_ledger, lo_ledger = [], []
        slack_p = slack_q = slack_lp = slack_lq = 0.0
        pairs = []
        fallback = []
        # dominated pairs: for the lower end (k = 1), or, for k > 1 summed directly (two allocations), to measure
        # the grid by the reduction's own width; a k > 1 PLD composition skips them (they would double its cost)
        want_lower = exact_lower or sum(counts.values()) <= 2
        for (t, sig), n in counts.items():
            if t == 1:
                # 1-out-of-1: the example takes part in the one step, so the pair *is* the Gaussian mechanism's
                # (exact in both directions): both ledgers, and the lower end stays certified
                up_ledger.append((GaussianMechanism(sig), n))
                lo_ledger.append((GaussianMechanism(sig), n))
                continue
            try:
                if self.grid is None and factor is not None:
                    h = default_grid(t, sig, tail, factor)
                    ap = allocation_pairs(t, sig, h, tail, split=split, auto=True, lower=want_lower)
                else:
                    ap = allocation_pairs(t, sig, self.grid, tail, split=split, lower=want_lower)
            except _OutOfRange as exc:
                # one participation with sensitivity 1: the allocation pair is dominated by the Gaussian mechanism's
                # (joint convexity of the hockey-stick divergence over the mixture), in both directions
                up_ledger.append((GaussianMechanism(sig), n))
                fallback.append(str(exc))
                continue
            pairs.append(ap)
            up_ledger.append((ap.upper, n))
            if ap.lower is not None:
                lo_ledger.append((ap.lower, n))
            slack_p += n * ap.tau_up[0]
            slack_q += n * ap.tau_up[1]
            slack_lp += n * ap.tau_low[0]
            slack_lq += n * ap.tau_low[1]
        f = 1 + 1e-9  # products of measures of mass 1 + O(tau)
        # one or two allocations (k 2, or 2 epochs): their pairs summed directly (no PLD re-discretisation)
        n_alloc = sum(counts.values())
        direct = not fallback and len(pairs) == len(counts) and n_alloc <= 2
        direct_pairs = [p for p in pairs for _ in range(counts[(p.t, p.sigma)])] if direct else []
        # only Gaussian steps (t = 1 or the fallback): the PLD accountant's own grid refinement (its rtol), not the
        # fixed grid chosen for the lognormal pairs
        self._gaussian_only = not pairs
        if fallback:
            exact_lower = False
        st = self._states[key] = dict(
            factor=factor,
            split=split,
            tail=tail,
            direct=direct,
            direct_pairs=direct_pairs,
            fallback=fallback,
            # without a lower end only the upper end is used, which the loss grid barely moves (k 3 of 20, sigma 2:
            # 1.1680164 at 2e-4, 1.1680166 at 4e-4): a coarser start, half the time
            up=self._pld(up_ledger, start=None if want_lower else self.NO_LOWER_DISCRETIZATION),
            lo={d: self._pld(lo_ledger, d) for d in self.directions},
            slack_up=(f * slack_p, f * slack_q),
            slack_lo=(f * slack_lp, f * slack_lq),
            exact_lower=exact_lower,
            # the dominated pairs of the reduction (k > 1: a lower end of the reduced composition, not of the run;
            # used only to measure the grid's width)
            red_lower=want_lower and not fallback,
            pairs=pairs,
        )
        self._last = st
        return st

    def _pld(self, ledger, direction: str | None = None, start: float | None = None) -> _LazyPLD:
        default = None if getattr(self, "_gaussian_only", False) else (start or self.DEFAULT_DISCRETIZATION)
        return _LazyPLD(ledger, direction or self.direction, self.discretization, default)

    @staticmethod
    def _lower_pld(st, worst: str | None) -> _LazyPLD:
        """The dominated pairs' PLD of one direction: the worse one of the upper end (the lower end of one
        direction's delta is a lower end of the maximum over both; half the work of composing both)."""
        lo = st["lo"]
        return lo[worst] if worst in lo else next(iter(lo.values()))

    def _details(self, st, extra) -> dict:
        return {
            "grid": [p.h for p in st["pairs"]],
            "grid_factor": st["factor"],
            "tail": st["tail"],
            "split": st["split"],
            "points": [p.points for p in st["pairs"]],
            "eta": [p.eta for p in st["pairs"]],
            "over_cap": [list(p.over) for p in st["pairs"]],
            "slack_upper": list(st["slack_up"]),
            "slack_lower": list(st["slack_lo"]),
            "lower_bound": "certified"
            if st["exact_lower"]
            else ("none (Gaussian fallback)" if st["fallback"] else "none (k > 1: the reduction is one-sided)"),
            "fallback": st["fallback"],
            **extra,
        }

    def _direct_delta(self, st, eps: float, which: str = "both") -> tuple[float, float, str]:
        """(lower, upper, worse direction) of delta(eps) for one or two allocations, summed exactly over the discrete
        pairs (one pair: :meth:`DiscretePair.delta_bounds`; two: their product, :func:`_delta2`; no PLD
        re-discretisation), with the floating-point slack. ``which="upper"`` / ``"lower"`` computes one end (the
        other is returned as 1 / 0)."""
        dp = st["direct_pairs"]
        g = math.exp(min(eps, 700.0))

        def hs(kind, d):  # (lower, upper) of the (composed) pair's delta
            if len(dp) == 1:
                return getattr(dp[0], kind).pair(d).delta_bounds(eps)
            return _delta2(getattr(dp[0], kind).pair(d), getattr(dp[1], kind).pair(d), eps)

        ups, los = {}, {}
        for d in self.directions:
            if which != "lower":
                ups[d] = hs("upper", d)[1] + st["slack_up"][0] + g * st["slack_up"][1]
            if which != "upper" and st["red_lower"]:
                los[d] = hs("lower", d)[0] - st["slack_lo"][0] - g * st["slack_lo"][1]
        worst = max(ups, key=ups.get) if ups else ""
        up = min(1.0, ups[worst]) if ups else 1.0
        lo = min(max(0.0, max(los.values())), up) if los else 0.0
        return lo, up, worst

    def _delta_at(self, st, eps: float) -> AccountingResult:
        """The certified bracket on delta(eps) from one state (one grid)."""
        if st["direct"]:
            lo, up, worst = self._direct_delta(st, eps)
            det = self._details(st, {"direction": worst, "composition": "direct"})
            return self._result(st, up, lo, "delta", det)
        g = math.exp(min(eps, 700.0))
        ru = st["up"].get_delta(eps)
        up = min(1.0, ru.upper + st["slack_up"][0] + g * st["slack_up"][1])
        lo = 0.0
        if st["red_lower"]:
            rl = self._lower_pld(st, ru.details.get("direction")).get_delta(eps)
            lo = max(0.0, rl.lower - st["slack_lo"][0] - g * st["slack_lo"][1])
        lo = min(lo, up)
        det = self._details(st, {"direction": ru.details.get("direction"), "composition": "pld"})
        return self._result(st, up, lo, "delta", det)

    def _epsilon_at(self, st, delta: float) -> AccountingResult:
        """The certified bracket on epsilon(delta) from one state (one grid).

        Upper end: the composed upper pairs' epsilon at :math:`\\delta' < \\delta`, accepted when the slack at that
        epsilon, :math:`s = s_P + e^{\varepsilon} s_Q`, is at most :math:`\\delta - \\delta'` (then the true delta
        there is at most :math:`\\delta' + s \\le \\delta`); :math:`\\delta'` starts at :math:`\\delta(1 - rtol/10)`
        and is lowered to :math:`\\delta - 2s` where that does not hold (one PLD query in the common case)."""
        if st["direct"]:
            return self._direct_epsilon(st, delta)
        sp, sq = st["slack_up"]
        d1 = delta * (1 - 0.1 * self.rtol)
        for _ in range(4):
            ru = st["up"].get_epsilon(d1)
            up = float(ru.upper)
            slack = sp + math.exp(min(up, 700.0)) * sq
            if slack <= delta - d1:
                break
            if 2 * slack >= delta / 2:
                raise NumericalError(
                    f"allocation-pld: the floating-point error bound ({slack:.2g}) exceeds a quarter of "
                    f"delta={delta:g}; use a larger delta or a coarser grid"
                )
            d1 = delta - 2 * slack
        else:
            raise NumericalError(f"allocation-pld: the floating-point slack at delta={delta:g} did not settle")
        lo = 0.0
        if st["red_lower"]:
            lp, lq = st["slack_lo"]
            d_lo = delta + lp + math.exp(min(up, 700.0)) * lq
            if d_lo < 1:
                rl = self._lower_pld(st, ru.details.get("direction")).get_epsilon(d_lo)
                lo = float(rl.lower)
        lo = min(lo, up)
        det = self._details(st, {"direction": ru.details.get("direction"), "composition": "pld"})
        return self._result(st, up, lo, "epsilon", det)

    def _result(self, st, up: float, lo: float, quantity: str, det: dict) -> AccountingResult:
        """The answer; where the lower end is that of the k > 1 reduction only, it goes to
        ``details["reduction_lower"]`` (the grid loop's width measure) and the reported lower end is 0."""
        if not st["exact_lower"]:
            if st["red_lower"]:
                det["reduction_lower"] = lo
            lo = 0.0
        return AccountingResult(up, lo, up, "upper-bound", self.name, quantity, det)

    #: the automatic grid's first factor (times :func:`default_grid`) and its finest
    GRID_START = 4.0
    GRID_START_COMPOSED = 1.5
    GRID_MIN = 0.125

    def _build_is_direct(self) -> bool:
        """Whether the ledger is one or two 1-out-of-t allocations (t > 1; summed directly, no PLD composition)."""
        comps = [(t, k * n) for m, n in self.ledger for t, _, k in self._components(m)]
        return sum(c for _, c in comps) <= 2 and all(t > 1 for t, _ in comps)

    def _refined(self, answer, quantity: str, x: float) -> AccountingResult:
        """The grid loop of the automatic grid (class docstring): each pass is a certified bracket; refine until
        the relative width is at most ``rtol``, return the narrowest."""
        self._require_ledger()
        tail = 1e-14
        if quantity == "epsilon":
            c = sum(k * n for m, n in self.ledger for _, _, k in self._components(m))
            tail = min(1e-8, max(1e-14, 0.1 * self.rtol * x / c))
        if self.grid is not None:
            r = answer(self._build(None, True, tail))
            r.details.update(rtol=self.rtol, rtol_met=self._rel(r) <= self.rtol)
            if not r.details["rtol_met"]:
                r.details["rtol_reason"] = f"the given grid ({self.grid:g}) is used as is"
            return r
        # a single allocation is summed directly; a composition's PLD brackets take about half of rtol: finer start
        composed = not self._build_is_direct()
        f = self.GRID_START_COMPOSED if composed else self.GRID_START
        best, best_st, reason = None, None, None
        for _ in range(6):
            try:
                st = self._build(f, True, tail)
                r = answer(st)
            except NumericalError as exc:  # a finer grid's rounding slack over delta: keep the last answer
                if best is None:
                    raise
                reason = f"at grid factor {f:.3g}: {exc}"
                break
            w = self._rel(r)
            if best is not None and w >= self._rel(best):
                # the floating-point slack (which grows as the grid is refined) outweighs the grid's width
                reason = f"refining the grid (factor {f:.3g}) no longer narrows the bracket (floating-point slack)"
                break
            best, best_st = r, st
            if not st["red_lower"]:
                reason = "no lower end to measure the width by (" + best.details["lower_bound"] + ")"
                break
            if w <= self.rtol or not st["pairs"]:
                break
            if f <= self.GRID_MIN or any(p.points * 2 > DEFAULT_POINTS for p in st["pairs"]):
                reason = f"the grid factor {f:g} is at the refinement limits (factor >= {self.GRID_MIN}, points)"
                break
            # the grid's part of the width falls like the square of the grid width; where every grid is at the
            # add direction's cap (default_grid's h0) a factor above 1 does not change it
            capped = all(p.h >= default_grid(p.t, p.sigma, tail, math.inf) * (1 - 1e-12) for p in st["pairs"])
            f = (min(f, 1.0) if capped else f) * min(0.8, max(0.25, 0.9 * math.sqrt(self.rtol / w)))
        else:
            reason = "6 grid passes"
        self._last = best_st
        best.details["rtol"] = self.rtol
        best.details["rtol_met"] = self._rel(best, False) <= self.rtol
        if not best.details["rtol_met"]:
            if reason is None and "reduction_lower" in best.details:
                reason = (
                    "no certified lower end (k > 1: the reduction is one-sided); the grid was refined until the "
                    "reduction's own bracket met rtol"
                )
            best.details["rtol_reason"] = reason
        return best

    @staticmethod
    def _rel(r: AccountingResult, reduction: bool = True) -> float:
        """Relative width; with ``reduction``, measured by the k > 1 reduction's own lower end where there is one."""
        lo = r.details.get("reduction_lower", r.lower) if reduction else r.lower
        return (r.upper - lo) / r.upper if r.upper > 0 else 0.0

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        return self._refined(lambda st: self._delta_at(st, eps), "delta", eps)

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        return self._refined(lambda st: self._epsilon_at(st, delta), "epsilon", delta)

    @staticmethod
    def _direct_tol(st) -> float:
        """The bisection's tolerance: 1e-9 for one pair (cheap sums), 1e-7 for two (each step a search of one pair's
        atoms in the other's; far below any rtol)."""
        return 1e-9 if len(st["direct_pairs"]) == 1 else 1e-7

    def _direct_epsilon(self, st, delta: float) -> AccountingResult:
        """Bisection of the direct bounds: the upper end is an eps where the certified delta upper bound is at most
        delta, the lower end one where the certified lower bound is at least delta (or 0)."""
        hi = 1.0
        while self._direct_delta(st, hi, "upper")[1] > delta:
            hi *= 2.0
            if hi > 600:
                # the grid's infinite-loss masses (W = 0, set-aside sums) exceed delta: bound by the Gaussian mechanism
                ap = st["pairs"][0]
                gacc = PLDAccountant(self.direction)
                for p in st["direct_pairs"]:
                    gacc.compose(GaussianMechanism(p.sigma))
                g = gacc.get_epsilon(delta)
                reason = f"the grid's infinite-loss mass exceeds delta={delta:g} (grid {ap.h:.3g} too coarse)"
                det = self._details(st, {"direction": g.details.get("direction"), "composition": "gaussian-fallback"})
                det["fallback"] = [reason]
                return AccountingResult(g.upper, 0.0, g.upper, "upper-bound", self.name, "epsilon", det)
        if self._direct_delta(st, 0.0, "upper")[1] <= delta:
            up = 0.0
        else:
            up = float(
                bisect_monotone(
                    lambda e: self._direct_delta(st, e, "upper")[1] <= delta,
                    0.0,
                    hi,
                    keep="hi",
                    tol=self._direct_tol(st),
                    ends_checked=True,
                )
            )
        lo = 0.0
        if st["red_lower"] and self._direct_delta(st, 0.0, "lower")[0] >= delta:
            lo = (
                float(
                    bisect_monotone(
                        lambda e: self._direct_delta(st, e, "lower")[0] >= delta,
                        0.0,
                        max(up, 1e-300),
                        keep="lo",
                        tol=self._direct_tol(st),
                        ends_checked=True,
                    )
                )
                if self._direct_delta(st, up, "lower")[0] < delta
                else up
            )
        _, _, worst = self._direct_delta(st, up, "upper")
        det = self._details(st, {"direction": worst, "composition": "direct"})
        return self._result(st, up, min(lo, up), "epsilon", det)


# ---------------------------------------------------------------------------------------------- command line
def _add_cli_arguments(parser) -> None:
    """Options of ``allocation-pld`` beyond the common ``--sigma --direction``."""
    parser.add_argument("--batches", type=int, default=100, help="steps (batches) per epoch t, an integer >= 1")
    parser.add_argument("--selected", type=int, default=1, help="steps per epoch each example takes part in, k >= 1")
    parser.add_argument(
        "--epochs", type=int, default=1, help="epochs, each a fresh allocation (not the matrix accountants' fixed slot)"
    )
    parser.add_argument("--grid", type=float, default=None, help="grid width of one lognormal term (default: auto)")


def _build_cli(args) -> RandomAllocationPLDAccountant:
    """The accountant of the command line: ``--sigma``, ``--batches`` (t), ``--selected`` (k), ``--epochs``, ``--grid``
    and ``--direction``; ``--mechanism`` may only name ``random-allocation``."""
    mech = getattr(args, "mechanism", None)
    if mech not in (None, "random-allocation"):
        raise DPValueError(f"mechanism must be 'random-allocation' for allocation-pld, got {mech!r}")
    if getattr(args, "sigma", None) is None:
        raise DPValueError("sigma is required (noise standard deviation, > 0)")
    acc = RandomAllocationPLDAccountant(direction=getattr(args, "direction", None) or "both", grid=args.grid)
    return acc.compose(RandomAllocation(args.sigma, args.batches, args.selected, args.epochs))


register(
    "allocation-pld",
    help="DP-SGD under random allocation (balls in bins), Feldman-Shenfeld pair: certified PLD bracket",
    build=_build_cli,
    add_arguments=_add_cli_arguments,
    uses_mechanism=False,
    noise_parameter="sigma",
    # --batches (steps per epoch) is its own option: more of them is more private, unlike the common --steps
    common_flags=frozenset({"mechanism", "sigma", "direction"}),
)
