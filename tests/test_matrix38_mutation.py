"""Two more 1% errors planted in shared functions the matrix chapter runs at every profile (issue 37 item 1), beyond
tests/test_matrix37_mutation.py and tests/test_matrix_allocation_mutation.py: each fails one of the chapter's smoke
targets through the chapter helper the notebook calls.

* ``mechanisms.GaussianMixtureMechanism`` (shared with the rest of the book: the scalar mixture pair that
  conditional composition composes per step) with its sensitivities 1% too large: T12i (conditional composition's
  epsilon against dp_accounting's PLD composing the same per-step subsampled-Gaussian pairs) fails.
* ``matrix.factorizations.sqrt_series`` (the BSR coefficients, shared with the practitioner's guide and the command
  line through ``build_strategy``) with its first non-trivial coefficient 1% off: T10c (seven Gram entries of each
  p = 4 strategy against our independent values to 6e-4) fails.

The Figure 4 paths (posterior_paths) are covered by tests/test_matrix38_fig4.py (T8c)."""

from __future__ import annotations

import pytest

from dputils import mechanisms
from dputils.book.scorecard import Targets
from dputils.matrix import factorizations

ch = pytest.importorskip("dputils.book.chapters.matrix_allocation")


def test_gram_entries_pass_unmutated():
    tg = Targets("matrix_allocation")
    assert ch.record_gram_entries(tg) <= 6e-4
    assert {r["id"]: r["status"] for r in tg.to_dict()} == {"T10c": "pass"}


def test_mixture_sensitivities_one_percent_fail_t12i(monkeypatch):
    def pair(self, direction):
        return mechanisms.MixtureVsGaussianPair(self.sigma, self.sensitivities * 1.01, self.weights, direction)

    monkeypatch.setattr(mechanisms.GaussianMixtureMechanism, "pair", pair)
    with pytest.raises(AssertionError, match="T12i"):
        ch.record_pins(Targets("matrix_allocation"))


def test_bsr_coefficient_one_percent_fails_t10c(monkeypatch):
    real = factorizations.sqrt_series

    def mutant(n):
        c = real(n).copy()
        if c.size > 1:
            c[1] *= 1.01
        return c

    monkeypatch.setattr(factorizations, "sqrt_series", mutant)
    with pytest.raises(AssertionError, match="T10c"):
        ch.record_gram_entries(Targets("matrix_allocation"))
