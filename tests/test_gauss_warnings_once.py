"""The audit chapter's data warning (Fashion-MNIST missing) reaches the page once, as a note, never as raw stderr:
the second (noise / 4) run on the same data used to print a raw `UserWarning` line into the page."""

import warnings

import pytest

pytest.importorskip("IPython")

from dputils.book.chapters import gauss_audit as ch  # noqa: E402


def _warns(x):
    warnings.warn("Fashion-MNIST not found in /nowhere: training on digits", stacklevel=1)
    return x


def test_a_warning_is_shown_once_and_returned_each_time(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(ch, "display", lambda obj: shown.append(obj.data))
    monkeypatch.setattr(ch, "_SHOWN_WARNINGS", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning escaping with_warnings would raise here
        assert ch.with_warnings(_warns, 1) == (1, "Fashion-MNIST not found in /nowhere: training on digits")
        assert ch.with_warnings(_warns, 2) == (2, "Fashion-MNIST not found in /nowhere: training on digits")
    assert shown == ["**Warning:** Fashion-MNIST not found in /nowhere: training on digits."]
    assert capsys.readouterr().err == ""
    assert ch.with_warnings(lambda: 3) == (3, None)
