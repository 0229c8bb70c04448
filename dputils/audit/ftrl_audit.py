"""One-run audit of DP-FTRL (tree aggregation) with Dirac gradient canaries ({cite}`gauss_audit`, Sec. 5.2).

Mechanism: :mod:`dputils.training.ftrl` (single pass, T leaves, per-node noise ``N(0, sigma_node^2 I)``; the
release is ``mu``-GDP with ``mu = sqrt(L) C / sigma_node``, ``L = ceil(log2 T) + 1``, eq. (T4) there).

Canaries. Canary j is the gradient ``C e_{c_j}`` on its own coordinate ``c_j`` (distinct coordinates: exactly
orthogonal), IN with probability 1/2; every IN canary is one extra example of leaf ``canary_leaf``
(deterministic single-leaf injection; leaf 1 by default, the leaf whose released ancestors are the L nodes
``[1, 2^j]``, so the canaries meet the worst case of the privacy analysis when T is a power of two).

Scores (white box: the auditor sees every released node ``nu_u``, equivalently every prefix sum ``s_t``,
since ``nu_t = s_t - s_{t - lowbit(t)}``). With ``A`` = the released ancestors of the canary leaf
(:func:`dputils.training.ftrl.released_ancestors`, ``|A| = L`` for leaf 1 and T a power of two):

* ``ours`` (the paper's per-canary ancestor sum, Sec. 5.2): ``S_j = |A|^{-1/2} sum_{u in A} (nu_u[c_j] - b_u[c_j])``
  where ``b_u`` is the clean sum of the *background* clipped gradients in node u. A strong adversary (the DP
  threat model: every other record is known) computes ``b_u`` from the data and the released iterates, so
  ``S_j`` is a post-processing of the release and, exactly,

      OUT: S ~ N(0, sigma_node^2),      IN: S ~ N(sqrt(|A|) C, sigma_node^2),

  a Gaussian pair with the same mu as the mechanism: the information ceiling ``eps_theta*(delta)`` equals
  the calibrated epsilon *exactly* (note, target 9; no Berry-Esseen error). For the idealised release
  (:func:`simulate_ftrl_audit`) there is no background and ``b_u = 0``.
* ``raw``: the same sum without removing ``b_u`` (an auditor that does not know the data): the background
  adds a coordinate-dependent drift common to both worlds, which widens both groups and weakens the bound.
* ``andrew``: the statistic of Andrew et al. {cite}`andrew_audit` as the paper uses it,
  ``s_j = max_t <e_{c_j}, G_t> / ||G_t||_2`` with ``G_t = s_t`` the released cumulative (prefix) sum,
  which is ``(B / eta) (theta_0 - theta_t)`` in DP-FTRL (:func:`dputils.audit.andrew.andrew_statistic`), fitted by a
  Gaussian pair and reported as the point estimate ``eps_theta_hat`` (not a bound).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from .. import data
from ..curves import gdp_epsilon
from ..errors import DPValueError, check_choice, check_positive_int
from .andrew import andrew_epsilon
from .canary import (
    Canaries,
    CanaryConfig,
    CanaryRun,
    CanaryStrategy,
    TrainingData,
    draw_canaries,
    ftrl_sigma_node,
    run_canary_audit,
)
from .methods import run_method

__all__ = ["FTRLAuditRun", "simulate_ftrl_audit", "run_ftrl_audit", "audit_ftrl", "ideal_ftrl_bounds", "ftrl_score_law"]


@dataclass
class FTRLAuditRun:
    """Canary scores of one DP-FTRL run (idealised or trained). Scores are already normalised by sqrt(|A|)."""

    in_scores: np.ndarray  # ours, IN canaries
    out_scores: np.ndarray
    in_andrew: np.ndarray  # Andrew et al. max-cosine statistic
    out_andrew: np.ndarray
    T: int
    n_ancestors: int  # |A|, released nodes containing the canary leaf
    sigma_node: float  # claimed per-node noise std (what the accountant is told)
    clip: float
    delta: float
    epsilon_theory: float  # tree_epsilon(sigma_node, T, delta, clip): the claimed (calibrated) epsilon
    kind: str  # "ideal" or "train"
    noise_scale: float = 1.0  # actual node noise std / sigma_node; 1 for a correct implementation
    in_raw: np.ndarray | None = None  # trained runs: ancestor sums without removing the background
    out_raw: np.ndarray | None = None
    dim: int = 0
    in_coords: np.ndarray | None = None  # Dirac coordinates of the IN / OUT canaries
    out_coords: np.ndarray | None = None
    release: np.ndarray | None = None  # idealised runs with keep_release=True: the prefix sums s_1..s_T, (T, dim)
    seconds: float = 0.0
    device: str = "cpu"
    history: list[dict[str, float]] = field(default_factory=list)
    grad_mode: str = ""  # trained runs: how the leaves' clipped gradient sums were computed ("ghost" or "vmap")

    @property
    def expected_shift(self) -> float:
        """Mean of IN minus OUT ``ours`` scores: ``sqrt(|A|) C``."""
        return math.sqrt(self.n_ancestors) * self.clip

    @property
    def mu_actual(self) -> float:
        """GDP parameter of the score pair at the *actual* noise: ``sqrt(|A|) C / (noise_scale sigma_node)``."""
        return self.expected_shift / (self.noise_scale * self.sigma_node)

    @property
    def ceiling(self) -> float:
        """eps_theta*(delta) of the exact score pair (the most any auditor of these scores can certify).
        For a correct run with |A| = L this equals :attr:`epsilon_theory` (target 9 of the note)."""

        return gdp_epsilon(self.delta, self.mu_actual)


class _Recorder:
    """Accumulates the ancestor sums (ours / raw) and the running max cosine (Andrew) from the stream."""

    def __init__(self, coords, T: int, canary_leaf: int, dim: int, torch_device):
        import torch

        from ..training.ftrl import TreeAggregator, released_ancestors

        self.torch = torch
        self.coords = torch.as_tensor(coords, device=torch_device)
        self.anc = set(released_ancestors(canary_leaf, T))
        m = len(coords)
        self.ours = torch.zeros(m, dtype=torch.float64, device=torch_device)
        self.raw = torch.zeros(m, dtype=torch.float64, device=torch_device)
        self.andrew = torch.full((m,), -math.inf, dtype=torch.float64, device=torch_device)
        # noiseless tree over the background sums at the canary coordinates: gives b_u for each released node
        self.background = TreeAggregator(m, 0.0, device=torch_device, dtype=torch.float64)

    def __call__(self, t: int, node, prefix, data_sum=None) -> None:
        torch = self.torch
        if data_sum is not None:
            self.background.add(data_sum[self.coords].double())
        if t in self.anc:
            nu = node[self.coords].double()
            self.raw += nu
            self.ours += nu - (self.background.last_node_clean if data_sum is not None else 0.0)
        norm = float(torch.linalg.vector_norm(prefix.double()))
        if norm > 0:
            self.andrew = torch.maximum(self.andrew, prefix[self.coords].double() / norm)

    def results(self):
        k = math.sqrt(len(self.anc))
        if not bool(self.torch.isfinite(self.andrew).all()):
            raise DPValueError("every released prefix sum was zero: the Andrew statistic is undefined")
        return ((self.ours / k).cpu().numpy(), (self.raw / k).cpu().numpy(), self.andrew.cpu().numpy())


def _ftrl_record(
    cfg: CanaryConfig, sigma_node: float, epsilon: float, can: Canaries, dim: int, scores, **fields
) -> FTRLAuditRun:
    """The run record of a DP-FTRL audit (idealised or trained): ``scores = (ours, raw, andrew)`` per canary
    (``raw`` None for the idealised release) cut into IN and OUT, with the claimed ``sigma_node``, its
    tree-aggregation ``epsilon`` (:func:`dputils.training.ftrl.tree_epsilon`, eq. T4) and ``|A|``; ``fields``
    are the remaining ones."""
    from ..training.ftrl import released_ancestors

    ours, raw, andrew = scores
    is_in = can.is_in
    if raw is not None:
        fields.update(in_raw=raw[is_in], out_raw=raw[~is_in])
    return FTRLAuditRun(
        in_scores=ours[is_in],
        out_scores=ours[~is_in],
        in_andrew=andrew[is_in],
        out_andrew=andrew[~is_in],
        T=cfg.T,
        n_ancestors=len(released_ancestors(cfg.canary_leaf, cfg.T)),
        sigma_node=sigma_node,
        clip=cfg.clip,
        delta=cfg.delta,
        epsilon_theory=epsilon,
        noise_scale=cfg.noise_scale,
        dim=dim,
        in_coords=can.coords[is_in],
        out_coords=can.coords[~is_in],
        **fields,
    )


def simulate_ftrl_audit(
    m: int = 5000,
    *,
    epsilon: float | None = None,
    sigma_node: float | None = None,
    T: int = 128,
    clip: float = 1.0,
    delta: float = 1e-5,
    dim: int | None = None,
    canary_leaf: int = 1,
    p_in: float = 0.5,
    noise_scale: float = 1.0,
    seed: int = 0,
    keep_release: bool = False,
    progress: bool = False,
) -> FTRLAuditRun:
    """Idealised DP-FTRL release (no model, no background data): the stream of T leaves is zero except leaf
    ``canary_leaf``, which holds ``C e_{c_j}`` for every IN canary; it goes through the same streaming
    :class:`dputils.training.ftrl.TreeAggregator` as training, with node noise ``noise_scale * sigma_node``, in
    ``dim`` coordinates (default ``4 m``; canaries on ``m`` distinct random ones). Give ``epsilon`` (then
    sigma_node is calibrated, :func:`dputils.training.ftrl.calibrate_sigma_node`) or ``sigma_node``.
    ``keep_release`` stores the released prefix sums (T x dim floats) in ``run.release``."""
    cfg = CanaryConfig.of_call("ftrl-ideal", locals(), ignore=("keep_release",))  # the arguments above, validated
    # not run_canary_audit: no data, no model, no device, no trainer (module docstring of dputils.audit.canary)

    import torch

    from ..training.ftrl import TreeAggregator, tree_epsilon

    sigma_node = ftrl_sigma_node(cfg)
    d = 4 * cfg.m if cfg.dim is None else cfg.dim
    can = draw_canaries(cfg, stream=11, n_coords=d, coord_stream=5)
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(int(seed) + 3)
    tree = TreeAggregator(d, cfg.noise_scale * sigma_node, generator=gen, dtype=torch.float64)
    rec = _Recorder(can.coords, cfg.T, cfg.canary_leaf, d, torch.device("cpu"))
    canary_leaf_vec = torch.zeros(d, dtype=torch.float64)
    canary_leaf_vec[torch.as_tensor(can.coords[can.is_in])] = cfg.clip
    zero = torch.zeros(d, dtype=torch.float64)
    kept = []
    it = range(1, cfg.T + 1)
    if progress:
        from tqdm.std import tqdm  # plain bar: honours TQDM_DISABLE, no widget warning in the book

        it = tqdm(it, desc="idealised DP-FTRL", unit="leaf")
    for t in it:
        s = tree.add(canary_leaf_vec if t == cfg.canary_leaf else zero)
        rec(t, tree.last_node, s)
        if keep_release:
            kept.append(s.numpy().copy())
    ours, _, andrew = rec.results()
    return _ftrl_record(
        cfg,
        sigma_node,
        tree_epsilon(sigma_node, cfg.T, cfg.delta, cfg.clip),
        can,
        d,
        (ours, None, andrew),
        kind="ideal",
        release=np.stack(kept) if keep_release else None,
        seconds=time.perf_counter() - t0,
    )


def run_ftrl_audit(
    m: int = 1000,
    *,
    epsilon: float | None = None,
    sigma_node: float | None = None,
    T: int = 128,
    batch_size: int = 32,
    clip: float = 1.0,
    delta: float = 1e-5,
    dim: int = 50,
    n_classes: int = 10,
    hidden: int = 64,
    lr: float = 0.5,
    canary_leaf: int = 1,
    p_in: float = 0.5,
    noise_scale: float = 1.0,
    device: str = "auto",
    seed: int = 0,
    progress: bool = True,
) -> FTRLAuditRun:
    """Train an MLP (:func:`dputils.training.make_mlp`) by single-pass DP-FTRL (:func:`dputils.training.train_ftrl`,
    ``grad_mode="auto"``: the ghost path, no per-example gradients of the data) on ``T * batch_size`` Gaussian blobs (:func:`dputils.data.gaussian_blobs`) with ``m`` Dirac gradient canaries
    injected in leaf ``canary_leaf`` through the ``extra_gradients`` hook, and return the canary scores
    (``ours`` after removing the background, ``raw``, ``andrew``; see the module docstring).

    ``noise_scale < 1`` makes the *actual* node noise smaller than the claimed ``sigma_node`` (a broken
    implementation whose accountant still reports :func:`dputils.training.ftrl.tree_epsilon` of the claim)."""
    cfg = CanaryConfig.of_call("ftrl", locals())  # the arguments above, validated
    return run_canary_audit(cfg, _DiracFTRL())


class _DiracFTRL(CanaryStrategy):
    """Dirac gradient canaries in trained DP-FTRL (module docstring): every IN canary ``C e_{c_j}`` is one extra
    example of leaf ``canary_leaf``; the recorder reads the released nodes and prefix sums."""

    mechanism = "ftrl"

    def data(self, run: CanaryRun) -> TrainingData:
        cfg = run.cfg
        X, y = data.gaussian_blobs(cfg.T * cfg.batch_size, dim=cfg.dim, n_classes=cfg.n_classes, seed=cfg.seed)
        return TrainingData(X, y, cfg.dim, cfg.n_classes)

    def canaries(self, run: CanaryRun) -> Canaries:
        return draw_canaries(run.cfg, stream=11, n_coords=run.n_params, coord_stream=5)

    def start(self, run: CanaryRun) -> None:
        import torch

        can = run.canaries
        self.rec = _Recorder(can.coords, run.T, run.cfg.canary_leaf, run.n_params, run.device)
        self.in_coords = torch.as_tensor(can.coords[can.is_in], device=run.device)

    def extra_gradients(self, run: CanaryRun, step):
        import torch

        if step.t != run.cfg.canary_leaf:
            return None
        k, dev = len(self.in_coords), run.device
        rows = torch.zeros(k, run.n_params, device=dev)
        rows[torch.arange(k, device=dev), self.in_coords] = run.cfg.clip  # norm exactly C: clipping leaves it
        return rows

    def observe(self, run: CanaryRun, step) -> None:
        self.rec(step.t, step.node, step.prefix, step.data_sum)

    def record(self, run: CanaryRun) -> FTRLAuditRun:
        res = run.result
        return _ftrl_record(
            run.cfg,
            run.sigma_node,
            run.epsilon,
            run.canaries,
            run.n_params,
            self.rec.results(),
            kind="train",
            seconds=res.seconds,
            device=run.device_name,
            history=res.history,
            grad_mode=res.grad_mode,
        )


def audit_ftrl(
    run: FTRLAuditRun,
    alpha: float = 0.05,
    *,
    score: str = "ours",
    n_bootstrap: int = 2000,
    seed: int = 0,
    baselines: bool = False,
    selection: str = "split",
) -> dict[str, float]:
    """Lower bounds on the run's epsilon at ``run.delta`` from its canary scores.

    ``gauss`` (bootstrap ellipsoid) and ``gauss-bonferroni`` (box): the Gaussian auditor (Algorithm 1) on the
    ``score`` scores (``"ours"`` or, for trained runs, ``"raw"``); ``andrew``: the Andrew et al. point estimate on
    the max-cosine statistic (an estimate, not a bound); with ``baselines=True`` also the Steinke et al. and
    f-DP threshold audits (``selection`` as in :func:`dputils.audit.threshold_audit`)."""

    if not isinstance(run, FTRLAuditRun):
        raise DPValueError(f"run must be an FTRLAuditRun, got {type(run).__name__}")
    check_choice("score", score, ("ours", "raw"))
    if score == "raw":
        if run.in_raw is None:
            raise DPValueError("score='raw' needs a trained run (run_ftrl_audit); idealised runs have no background")
        i, o = run.in_raw, run.out_raw
    else:
        i, o = run.in_scores, run.out_scores

    out = {
        m: run_method(m, i, o, run.delta, alpha, n_bootstrap=n_bootstrap, seed=seed).epsilon_lower
        for m in ("gauss", "gauss-bonferroni")
    }
    out["andrew"] = andrew_epsilon(run.in_andrew, run.out_andrew, run.delta).epsilon_lower
    if baselines:
        for method in ("steinke", "fdp"):
            out[method] = run_method(method, i, o, run.delta, alpha, selection=selection, seed=seed).epsilon_lower
    return out


IDEAL_FTRL_METHODS = ("gauss", "gauss-bonferroni", "andrew", "steinke", "fdp")


def ideal_ftrl_bounds(
    m: int,
    epsilons: Sequence[float],
    reps: int,
    *,
    T: int = 128,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 2000,
    seed: int = 0,
    methods: Sequence[str] = IDEAL_FTRL_METHODS,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Lower bounds of ``reps`` idealised DP-FTRL audits at each target epsilon (the simulated curves of Fig. 2
    of {cite}`gauss_audit`, Sec. 5.2).

    Run ``r`` at ``epsilons[i]`` is :func:`simulate_ftrl_audit` with ``m`` canaries, ``T`` leaves and seed
    ``seed + 100 r + i``, audited by :func:`audit_ftrl` (baselines on) with seed ``seed + r``. Its scores are
    exactly the Gaussian pair ``N(0, sigma_node^2)`` / ``N(sqrt(L) C, sigma_node^2)``, so the information ceiling
    equals the target epsilon. Returns ``(bounds, ceilings, n_ancestors)``: ``bounds[method]`` of shape
    ``(len(epsilons), reps)``, and each run's ceiling and number of released ancestors in the same shape (for
    the caller's check that the ceiling is the target and the ancestors are ``L``)."""
    check_positive_int("reps", reps)
    eps = [float(e) for e in epsilons]
    shape = (len(eps), reps)
    bounds = {k: np.zeros(shape) for k in methods}
    ceilings, n_anc = np.zeros(shape), np.zeros(shape, dtype=int)
    for i, e in enumerate(eps):
        for r in range(reps):
            run = simulate_ftrl_audit(m, epsilon=e, T=T, delta=delta, seed=seed + 100 * r + i)
            ceilings[i, r], n_anc[i, r] = run.ceiling, run.n_ancestors
            b = audit_ftrl(run, alpha, n_bootstrap=n_bootstrap, seed=seed + r, baselines=True)
            for k in methods:
                bounds[k][i, r] = b[k]
    return bounds, ceilings, n_anc


def ftrl_score_law(run: FTRLAuditRun, level: float = 1e-4, n_se: float = 4.0) -> dict[str, float | bool]:
    """Check a DP-FTRL run's background-removed scores against their exact law (module docstring):
    OUT ``N(0, sigma_node^2)``, IN ``N(sqrt(L) C, sigma_node^2)``.

    ``shift_ok``: the IN-minus-OUT mean is within ``n_se`` standard errors
    ``sigma_node sqrt(1/n_IN + 1/n_OUT)`` of ``run.expected_shift``; ``sd_ok``: the OUT sample sd over
    ``sigma_node`` lies in the two-sided chi-square interval at ``level``,
    ``sqrt(chi2_{n-1}(p) / (n - 1))`` for ``p = level/2, 1 - level/2``. Returns these with the shift, the sd
    ratio and the interval's ends."""
    if not isinstance(run, FTRLAuditRun):
        raise DPValueError(f"run must be an FTRLAuditRun, got {type(run).__name__}")
    if not 0 < level < 1:
        raise DPValueError(f"level must be in (0, 1), got {level!r}")
    n_i, n_o = len(run.in_scores), len(run.out_scores)
    shift = float(run.in_scores.mean() - run.out_scores.mean())
    se = run.sigma_node * math.sqrt(1 / n_i + 1 / n_o)
    sd_lo, sd_hi = (math.sqrt(stats.chi2.ppf(p, n_o - 1) / (n_o - 1)) for p in (level / 2, 1 - level / 2))
    ratio = float(run.out_scores.std(ddof=1) / run.sigma_node)
    return {
        "shift": shift,
        "shift_ok": bool(abs(shift - run.expected_shift) < n_se * se),
        "sd_ratio": ratio,
        "sd_lo": sd_lo,
        "sd_hi": sd_hi,
        "sd_ok": bool(sd_lo < ratio < sd_hi),
    }
