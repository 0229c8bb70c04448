"""The command-line hooks of the accountants of their own kind of run: the matrix accountants
(:mod:`dputils.matrix`) and the shuffling accountants (:mod:`dputils.shuffling`).

``python -m dputils epsilon --accountant NAME`` builds every accountant of the common mechanisms from its
class; these build their run from options of their own. :func:`register` records, for each name, the
options it adds to the parser and how it builds the composed accountant from the parsed options
(:func:`dputils.accountants.registry.register` with ``build=``); importing :mod:`dputils.cli` calls it.

Matrix accountants (Schuchardt and Kalinin's balls-in-bins matrix mechanism, :mod:`dputils.matrix`):

* ``matrix-renyi``, ``matrix-renyi-tight``: :class:`~dputils.matrix.MatrixRenyiAccountant` (Algorithm 3)
  and :class:`~dputils.matrix.MatrixRenyiTightAccountant` over the integer orders ``2..--max-order``;
* ``matrix-mc``: :class:`~dputils.matrix.MatrixMonteCarloAccountant` (``--samples --seed``);
* ``matrix-condcomp``: :class:`~dputils.matrix.ConditionalCompositionAccountant` (section 4);

each of one :class:`~dputils.matrix.BallsInBinsMatrixMechanism` with the strategy of
:func:`add_strategy_arguments` (``--matrix --bands --epochs --batches``, N = epochs x batches steps) and
``--sigma``.

Shuffling accountants (van Dijk et al.'s training runs, :mod:`dputils.shuffling`), each composing one run:

* ``shuffle-batch-clip``: :class:`~dputils.shuffling.GDPBoundAccountant` of a
  :class:`~dputils.shuffling.ShuffledBatchClipping` run (``--sigma --epochs [--group-size]``);
* ``shuffle-batch-clip-exact``, ``shuffle-batch-clip-as-printed``, ``shuffle-individual-clip-exact``,
  ``subsample-batch-clip-exact``: :class:`~dputils.shuffling.MixtureAccountant` (exact law, or Thm F.1's
  printed one) of a :class:`~dputils.shuffling.ShuffledBatchClipping`,
  :class:`~dputils.shuffling.ShuffledIndividualClipping` or :class:`~dputils.shuffling.SubsampledBatchClipping`
  run (``--sigma --epochs [--group-size] --dataset-size --batch-size``).

Each accountant gets only the options it reads, so argparse refuses the others by name.
"""

from __future__ import annotations

import argparse
from functools import lru_cache

from ..accountants import registry
from ..errors import DPValueError, check_choice, check_nonnegative_int, check_positive, check_positive_int
from ..matrix.allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant, MatrixRenyiTightAccountant
from ..matrix.condcomp import ALLOCATIONS, ConditionalCompositionAccountant
from ..matrix.factorizations import MATRICES, Strategy, build_strategy
from ..matrix.mechanism import BallsInBinsMatrixMechanism
from ..matrix.renyi import DEFAULT_ADD_CLASSES
from ..shuffling.accountants import GDPBoundAccountant, MixtureAccountant
from ..shuffling.mechanisms import ShuffledBatchClipping, ShuffledIndividualClipping, SubsampledBatchClipping

__all__ = ["add_strategy_arguments", "balls_in_bins_from_args", "batches_from_args", "register", "strategy_from_args"]


# ---------------------------------------------------------------------------------------------- matrix
# Each accountant gets only the options it reads, so argparse refuses the others by name.
def add_strategy_arguments(p: argparse.ArgumentParser) -> None:
    """The options that describe the strategy of a balls-in-bins matrix mechanism (shared by every
    matrix accountant's command line, see :func:`balls_in_bins_from_args`)."""
    p.add_argument("--matrix", default="identity", choices=list(MATRICES), help="strategy matrix C")
    p.add_argument(
        "--bands",
        type=int,
        default=None,
        help="bands of C (bsr, bandmf) or of C^-1 (bisr), an integer >= 1 (default 1); not used by identity and blt",
    )
    p.add_argument("--epochs", type=int, default=1, help="epochs k, an integer >= 1 (default 1)")
    p.add_argument(
        "--batches",
        type=int,
        default=None,
        help="batches per epoch b, an integer >= 1 (N = k b steps); required, or give --batch-size and --dataset-size",
    )
    p.add_argument("--batch-size", type=int, default=None, help="batch size B (with --dataset-size: b = N / B)")
    p.add_argument("--dataset-size", type=int, default=None, help="data-set size N, a multiple of --batch-size")


def _add_renyi_arguments(p: argparse.ArgumentParser) -> None:
    add_strategy_arguments(p)
    p.add_argument(
        "--effective-bands",
        type=int,
        default=None,
        help="largest effective bandwidth of the DP, an integer >= 1 (default: the strategy's bands, 4 if dense)",
    )
    p.add_argument("--max-order", type=int, default=128, help="largest integer Renyi order (from 2), >= 2")


def _add_renyi_tight_arguments(p: argparse.ArgumentParser) -> None:
    _add_renyi_arguments(p)
    p.add_argument(
        "--add-classes", default=None, help="comma-separated slot-class counts (integers >= 1) of the tight add bound"
    )


def _add_mc_arguments(p: argparse.ArgumentParser) -> None:
    add_strategy_arguments(p)
    p.add_argument("--samples", type=int, default=1_000_000, help="Monte Carlo samples, an integer >= 2")
    p.add_argument("--seed", type=int, default=0, help="Monte Carlo seed, an integer >= 0")


@lru_cache(maxsize=4)
def _cached_strategy(matrix: str, epochs: int, batches: int, bands: int) -> Strategy:
    # calibrate builds the accountant once per evaluated sigma: build (and optimise) the strategy once
    return build_strategy(matrix, epochs, batches, bands)


def batches_from_args(args: argparse.Namespace) -> int:
    """Batches per epoch b: ``--batches``, or ``--dataset-size N / --batch-size B`` (random allocation puts
    each example in one of b batches per epoch, so N must be a multiple of B: b = N / B). One-line
    DPValueError when neither is given, when only one size is given, when N / B is not whole, or when
    ``--batches`` disagrees with N / B."""
    batches = getattr(args, "batches", None)
    B, N = getattr(args, "batch_size", None), getattr(args, "dataset_size", None)
    if B is None and N is None:
        if batches is None:
            raise DPValueError(
                "batches: missing; give --batches b (batches per epoch, N = epochs x b steps), or "
                "--batch-size B with --dataset-size N (b = N / B)"
            )
        return check_positive_int("batches", batches)
    if B is None or N is None:
        missing = "batch-size" if B is None else "dataset-size"
        raise DPValueError(f"{missing}: missing; --batch-size and --dataset-size go together (b = N / B)")
    B = check_positive_int("batch-size", B)
    N = check_positive_int("dataset-size", N)
    if B > N:
        raise DPValueError(f"batch-size must be at most dataset-size ({N}), got {B}")
    if N % B:
        lo = N // B
        raise DPValueError(
            f"dataset-size: {N} is not a multiple of batch-size {B} (N / B = {N / B:g} batches per epoch); "
            f"random allocation needs a whole number of batches per epoch: give --batches {lo} or {lo + 1}"
        )
    b = N // B
    if batches is not None and batches != b:
        raise DPValueError(
            f"batches: --batches {batches} disagrees with --dataset-size {N} / --batch-size {B} = {b}; give one of them"
        )
    return b


def strategy_from_args(args: argparse.Namespace) -> Strategy:
    """The strategy named by the options of :func:`add_strategy_arguments` (cached: a calibration builds
    it once). Records the schedule (``q = 1/b``, ``steps = k b``, ``epochs``, ``batches``) in
    ``args.schedule`` for the output. Bands wider than the b batches of an epoch are refused."""
    check_choice("matrix", args.matrix, MATRICES)
    k = check_positive_int("epochs", args.epochs)
    b = batches_from_args(args)
    bands = getattr(args, "bands", None)
    if bands is None:
        bands = 1
    else:
        bands = check_positive_int("bands", bands)
        if args.matrix in ("identity", "blt"):
            raise DPValueError(
                f"bands is not used by matrix {args.matrix!r} (it has "
                f"{'one band' if args.matrix == 'identity' else 'a dense C'}); leave --bands out"
            )
        if bands > b:
            raise DPValueError(
                f"bands: {bands} bands is more than the {b} batches of an epoch; give --bands at most {b}"
            )
    schedule = {"q": 1.0 / b, "steps": k * b, "epochs": k, "batches": b}
    for dest in ("batch_size", "dataset_size"):
        if getattr(args, dest, None) is not None:
            schedule[dest] = int(getattr(args, dest))
    args.schedule = schedule
    return _cached_strategy(args.matrix, k, b, bands)


def balls_in_bins_from_args(args: argparse.Namespace) -> BallsInBinsMatrixMechanism:
    """The :class:`BallsInBinsMatrixMechanism` of the command line: ``--mechanism`` (only
    ``balls-in-bins``), ``--sigma`` and the strategy options of :func:`add_strategy_arguments`."""
    mech = getattr(args, "mechanism", None)
    if mech not in (None, "balls-in-bins"):
        raise DPValueError(f"mechanism must be 'balls-in-bins' for matrix accountants, got {mech!r}")
    if args.sigma is None:
        raise DPValueError("sigma is required (noise standard deviation, > 0)")
    sigma = check_positive("sigma", args.sigma)
    return BallsInBinsMatrixMechanism(strategy_from_args(args), sigma)


def _max_order(args: argparse.Namespace) -> range:
    mo = check_positive_int("max-order", args.max_order)
    if mo < 2:
        raise DPValueError(f"max-order must be an integer >= 2, got {mo}")
    return range(2, mo + 1)


def _effective_bands(args: argparse.Namespace) -> int | None:
    eb = getattr(args, "effective_bands", None)
    return None if eb is None else check_positive_int("effective-bands", eb)


def _build_renyi(args: argparse.Namespace) -> MatrixRenyiAccountant:
    acc = MatrixRenyiAccountant(_max_order(args), effective_bands=_effective_bands(args))
    return acc.compose(balls_in_bins_from_args(args))


def _build_renyi_tight(args: argparse.Namespace) -> MatrixRenyiTightAccountant:
    orders = _max_order(args)
    classes = DEFAULT_ADD_CLASSES
    raw = getattr(args, "add_classes", None)
    if raw is not None:
        try:
            classes = tuple(int(x) for x in str(raw).split(",") if x.strip())
        except ValueError:
            raise DPValueError(f"add-classes must be comma-separated integers >= 1, got {raw!r}") from None
        if not classes or any(c < 1 for c in classes):
            raise DPValueError(f"add-classes must be comma-separated integers >= 1, got {raw!r}")
    acc = MatrixRenyiTightAccountant(orders, effective_bands=_effective_bands(args), add_classes=classes)
    return acc.compose(balls_in_bins_from_args(args))


def _build_mc(args: argparse.Namespace) -> MatrixMonteCarloAccountant:
    samples = check_positive_int("samples", args.samples)
    seed = check_nonnegative_int("seed", args.seed)
    acc = MatrixMonteCarloAccountant(samples=samples, seed=seed, direction=getattr(args, "direction", None) or "both")
    return acc.compose(balls_in_bins_from_args(args))


def _add_condcomp_arguments(p: argparse.ArgumentParser) -> None:
    add_strategy_arguments(p)  # --matrix --bands --epochs --batches (no Renyi or Monte Carlo options)
    p.add_argument(
        "--delta-e",
        type=float,
        default=None,
        help="failure probability of the posterior bounds (default: fraction x delta)",
    )
    p.add_argument(
        "--delta-e-fraction",
        type=float,
        default=None,
        help="delta_E as a fraction of delta, in (0, 1) (default 0.5); not with --delta-e",
    )
    p.add_argument(
        "--allocation",
        default="union",
        choices=list(ALLOCATIONS),
        help="failure allocation: union (proved) or hybrid (paper, unproven)",
    )
    p.add_argument("--discretization", type=float, default=2e-3, help="PLD grid width (default 2e-3)")


def _build_condcomp(args: argparse.Namespace) -> ConditionalCompositionAccountant:
    if args.delta_e is not None and args.delta_e_fraction is not None:
        raise DPValueError("delta-e-fraction is not used when --delta-e is given; give one of them")
    fraction = 0.5 if args.delta_e_fraction is None else args.delta_e_fraction
    acc = ConditionalCompositionAccountant(
        delta_e=args.delta_e,
        delta_e_fraction=fraction,
        allocation=args.allocation,
        discretization=args.discretization,
        progress=False,
    )
    return acc.compose(balls_in_bins_from_args(args))


# ---------------------------------------------------------------------------------------------- shuffling
def _add_option(parser: argparse.ArgumentParser, flag: str, **kw) -> None:
    if flag not in getattr(parser, "_option_string_actions", {}):
        parser.add_argument(flag, **kw)


def _add_shuffle_bound_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shuffle-batch-clip`` (the headline bound needs no data-set or batch size)."""
    _add_option(parser, "--epochs", type=int, default=None, help="number of epochs E, an integer >= 1")
    _add_option(parser, "--group-size", type=int, default=None, help="group size g, an integer >= 1 (default 1)")


def _add_shuffle_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the refined (exact-law) accountants."""
    _add_shuffle_bound_arguments(parser)
    _add_option(parser, "--dataset-size", type=int, default=None, help="data-set size N (refined accountants)")
    _add_option(
        parser,
        "--batch-size",
        type=int,
        default=None,
        help="samples per round: s for batch clipping, m for individual clipping (refined accountants)",
    )


def _arg(args: argparse.Namespace, name: str, required: bool = True):
    v = getattr(args, name, None)
    if v is None and required:
        raise DPValueError(f"--{name.replace('_', '-')} is required for this accountant")
    return v


def _group_size(args: argparse.Namespace) -> int:
    """``--group-size``: an integer >= 1 (default 1 when the option is absent; 0 is refused, not read as 1)."""
    g = getattr(args, "group_size", None)
    return 1 if g is None else check_positive_int("group-size", g)


def _build_shuffle_bound(args: argparse.Namespace) -> GDPBoundAccountant:
    """``shuffle-batch-clip``: one run of batch clipping with shuffling, the G_(sqrt(gE)/sigma) bound."""
    sigma = check_positive("sigma", _arg(args, "sigma"))
    E = check_positive_int("epochs", _arg(args, "epochs"))
    g = _group_size(args)
    return GDPBoundAccountant().compose(ShuffledBatchClipping(sigma, E, g))


def _refined_builder(run: type, law: str = "exact"):
    """A build function: one ``run`` with the command line's sizes, composed by ``MixtureAccountant(law)``."""

    def build(args: argparse.Namespace) -> MixtureAccountant:
        sigma = check_positive("sigma", _arg(args, "sigma"))
        E = check_positive_int("epochs", _arg(args, "epochs"))
        g = _group_size(args)
        N = check_positive_int("dataset-size", _arg(args, "dataset_size"))
        b = check_positive_int("batch-size", _arg(args, "batch_size"))
        mech = run(sigma, E, g, N, b)
        # the run's T: shuffled runs have E N / b rounds (N a multiple of b, checked by the run), a subsampled
        # run round(N E / b) (dputils.shuffling.laws.subsample_bc_law); q = b / N is each sample's rate per round
        T = E * (N // b) if run is not SubsampledBatchClipping else max(1, int(round(N * E / b)))
        args.schedule = {"q": b / N, "steps": T}
        return MixtureAccountant(law).compose(mech)

    return build


# ---------------------------------------------------------------------------------------------- registration
_registered = False


def register() -> None:
    """Record the command-line hooks of the matrix and shuffling accountants in
    :mod:`dputils.accountants.registry` (once: a second call does nothing)."""
    global _registered
    if _registered:
        return
    _registered = True
    # common options read: --mechanism (only 'balls-in-bins' is accepted), --sigma; the Renyi accountants
    # always report the worse of the two directions (no --direction), matrix-mc honours --direction;
    # none composes a number of steps (N = epochs x batches comes from the strategy: no --steps)
    renyi_flags = frozenset({"mechanism", "sigma"})
    registry.register(
        "matrix-renyi",
        help="Schuchardt-Kalinin Algorithm 3 (Renyi DP + Lemma 3.4), upper bound",
        build=_build_renyi,
        add_arguments=_add_renyi_arguments,
        uses_mechanism=False,
        noise_parameter="sigma",
        common_flags=renyi_flags,
    )
    registry.register(
        "matrix-renyi-tight",
        help="Renyi accountant with a tighter add direction (lognormal moments), upper bound",
        build=_build_renyi_tight,
        add_arguments=_add_renyi_tight_arguments,
        uses_mechanism=False,
        noise_parameter="sigma",
        common_flags=renyi_flags,
    )
    registry.register(
        "matrix-mc",
        help="Monte Carlo estimate for balls-in-bins matrix mechanisms (with CI)",
        build=_build_mc,
        add_arguments=_add_mc_arguments,
        uses_mechanism=False,
        noise_parameter="sigma",
        common_flags=frozenset({"mechanism", "sigma", "direction"}),
    )
    registry.register(
        "matrix-condcomp",
        help="Schuchardt-Kalinin conditional composition (per-step mixtures + PLD), upper bound",
        build=_build_condcomp,
        add_arguments=_add_condcomp_arguments,
        uses_mechanism=False,
        noise_parameter="sigma",
        # --mechanism (only 'balls-in-bins') and --sigma; both directions are always composed
        # and the worse is reported (no --direction); N comes from the strategy (no --steps)
        common_flags=frozenset({"mechanism", "sigma"}),
    )
    # only --sigma of the common options: the mechanism is fixed by the accountant, the number of rounds by
    # --epochs (and --dataset-size/--batch-size), and the strong-adversary bounds are symmetric (no --direction)
    common = dict(
        add_arguments=_add_shuffle_arguments,
        uses_mechanism=False,
        noise_parameter="sigma",
        common_flags=frozenset({"sigma"}),
    )
    registry.register(
        "shuffle-batch-clip",
        help="van Dijk et al.: batch clipping + shuffling is G_{sqrt(gE)/sigma}-DP (strong adversary; upper bound on eps)",
        build=_build_shuffle_bound,
        **dict(common, add_arguments=_add_shuffle_bound_arguments),
    )
    registry.register(
        "shuffle-batch-clip-exact",
        help="batch clipping + shuffling, exact strong-adversary mixture (Def 5.2) with the exact occupancy law",
        build=_refined_builder(ShuffledBatchClipping),
        **common,
    )
    registry.register(
        "shuffle-batch-clip-as-printed",
        help="batch clipping + shuffling with Thm F.1's printed (stars-and-bars) q_j: slightly optimistic, erratum",
        build=_refined_builder(ShuffledBatchClipping, "as-printed"),
        **common,
    )
    registry.register(
        "shuffle-individual-clip-exact",
        help="individual clipping + shuffling, exact strong-adversary mixture with the partition law (--batch-size = m)",
        build=_refined_builder(ShuffledIndividualClipping),
        **common,
    )
    registry.register(
        "subsample-batch-clip-exact",
        help="batch clipping + subsampling (any g; = any clipping for g=1), exact strong-adversary Binomial mixture",
        build=_refined_builder(SubsampledBatchClipping),
        **common,
    )
