"""A training schedule in a practitioner's terms: epochs, batch size and data-set size.

DP-SGD with Poisson sampling of expected batch size B from N examples, run for E epochs, samples each
example with probability ``q = B / N`` at each of ``T = ceil(E N / B)`` steps (E epochs of N / B steps
each, the last partial step counted as a whole one, which can only add privacy loss). The common accountants
of the command line (``--mechanism subsampled-gaussian``) take ``--epochs E --batch-size B --dataset-size N``
instead of ``--q`` and ``--steps``, and their output states the q and T used.

Fractions are exact: ``E`` is read as a decimal fraction (``0.5``, ``15``), so that ``T`` is the exact ceiling
(``ceil(0.1 * 60000 / 100) = 60``, where floating point gives 61).
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

from ..errors import DPValueError
from ..practitioner import poisson_schedule

__all__ = ["add_schedule_arguments", "epochs_schedule", "parse_epochs", "resolve_steps"]

#: The options of the practitioner's schedule, as argparse ``dest`` names.
SCHEDULE_DESTS = ("epochs", "batch_size", "dataset_size")


def parse_epochs(s: str) -> Fraction:
    """``--epochs`` as an exact fraction (``15``, ``0.5``, ``1e2``); a non-number is an argparse error."""
    try:
        e = Fraction(s.strip().replace("_", ""))
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    return e


def _size(s: str) -> int | float:
    try:
        t = s.strip().replace("_", "")
        return int(t) if t.lstrip("+-").isdigit() else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None


def add_schedule_arguments(p: argparse.ArgumentParser) -> None:
    """``--epochs --batch-size --dataset-size`` of the common accountants (instead of ``--q --steps``)."""
    p.add_argument(
        "--epochs",
        type=parse_epochs,
        default=None,
        help="epochs E > 0 (with --batch-size and --dataset-size: q = B/N, T = ceil(E N / B))",
    )
    p.add_argument("--batch-size", type=_size, default=None, help="expected batch size B, an integer >= 1")
    p.add_argument("--dataset-size", type=_size, default=None, help="data-set size N, an integer >= B")


#: ``(q, T) = (B / N, ceil(E N / B))``: the library's one rule (:func:`dputils.practitioner.poisson_schedule`).
epochs_schedule = poisson_schedule


def _fmt(e: Fraction) -> str:
    return str(e.numerator) if e.denominator == 1 else f"{float(e):g}"


def resolve_steps(args: argparse.Namespace, reads_steps: bool) -> dict[str, Any]:
    """Fill ``args.steps`` (and ``args.q``) of a common accountant from ``--epochs --batch-size
    --dataset-size``; returns the schedule fields the output states (``q``, ``steps`` and, when given,
    ``epochs``, ``batch_size``, ``dataset_size``).

    One-line DPValueError on: no ``--steps`` and no epochs (an accountant that composes steps needs a
    number of them), only part of the three options, ``--q`` together with ``--batch-size`` (q is B/N), a
    mechanism other than subsampled-gaussian with the batch options (they define a sampling rate), and
    ``--steps`` that differs from ``ceil(E N / B)``.
    """
    given = {d: getattr(args, d, None) for d in SCHEDULE_DESTS}
    if not reads_steps:
        return {}
    if all(v is None for v in given.values()):
        if args.steps is None:
            raise DPValueError(
                "steps: missing; give --steps T (the number of compositions), or --epochs E with "
                "--batch-size B and --dataset-size N (q = B/N, T = ceil(E N / B))"
            )
        out: dict[str, Any] = {"steps": args.steps}
        if args.q is not None:
            out["q"] = args.q
        return out
    missing = [d for d, v in given.items() if v is None]
    if missing:
        names = " and ".join("--" + d.replace("_", "-") for d in missing)
        raise DPValueError(
            f"{missing[0].replace('_', '-')}: missing; --epochs, --batch-size and --dataset-size go together "
            f"(q = B/N, T = ceil(E N / B)), give {names} too"
        )
    if args.q is not None:
        raise DPValueError(
            "q: --q (--sampling-rate) and --batch-size both given; q = batch-size / dataset-size, leave --q out"
        )
    if args.mechanism is not None and args.mechanism != "subsampled-gaussian":
        raise DPValueError(
            f"batch-size: --batch-size and --dataset-size define the sampling rate of --mechanism "
            f"subsampled-gaussian, not of {args.mechanism!r}; for it give --steps"
        )
    q, T = epochs_schedule(given["epochs"], given["batch_size"], given["dataset_size"])
    E = Fraction(given["epochs"])
    if args.steps is not None and args.steps != T:
        raise DPValueError(
            f"steps: --steps {args.steps} disagrees with --epochs {_fmt(E)} --batch-size {given['batch_size']} "
            f"--dataset-size {given['dataset_size']} (T = ceil(E N / B) = {T}); give one of them"
        )
    args.q, args.steps = q, T
    return {
        "q": q,
        "steps": T,
        "epochs": E.numerator if E.denominator == 1 else float(E),
        "batch_size": int(given["batch_size"]),
        "dataset_size": int(given["dataset_size"]),
    }
