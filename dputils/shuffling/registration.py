"""Command-line registration of the shuffling accountants (``python -m dputils epsilon --accountant NAME``).

Each name builds one training run from the options and composes it once:

* ``shuffle-batch-clip``: :class:`GDPBoundAccountant` of a :class:`ShuffledBatchClipping` run
  (``--sigma --epochs [--group-size]``);
* ``shuffle-batch-clip-exact``, ``shuffle-batch-clip-as-printed``, ``shuffle-individual-clip-exact``,
  ``subsample-batch-clip-exact``: :class:`MixtureAccountant` (exact law, or Thm F.1's printed one) of a
  :class:`ShuffledBatchClipping`, :class:`ShuffledIndividualClipping` or :class:`SubsampledBatchClipping`
  run (``--sigma --epochs [--group-size] --dataset-size --batch-size``).
"""

from __future__ import annotations

import argparse

from ..accountants import registry
from ..errors import DPValueError, check_positive, check_positive_int
from .accountants import GDPBoundAccountant, MixtureAccountant
from .mechanisms import ShuffledBatchClipping, ShuffledIndividualClipping, SubsampledBatchClipping


def _add_option(parser: argparse.ArgumentParser, flag: str, **kw) -> None:
    if flag not in getattr(parser, "_option_string_actions", {}):
        parser.add_argument(flag, **kw)


def _add_bound_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shuffle-batch-clip`` (the headline bound needs no data-set or batch size)."""
    _add_option(parser, "--epochs", type=int, default=None, help="number of epochs E, an integer >= 1")
    _add_option(parser, "--group-size", type=int, default=None, help="group size g, an integer >= 1 (default 1)")


def _add_shuffle_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the refined (exact-law) accountants."""
    _add_bound_arguments(parser)
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


def _build_bound(args: argparse.Namespace) -> GDPBoundAccountant:
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
        return MixtureAccountant(law).compose(run(sigma, E, g, N, b))

    return build


def _register() -> None:
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
        build=_build_bound,
        **dict(common, add_arguments=_add_bound_arguments),
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


_register()
