"""Shared pytest set-up: a headless matplotlib backend for in-process tests, hypothesis profiles."""

import os

import matplotlib

matplotlib.use("Agg")  # in-process only; notebook kernels never inherit this (the runner drops MPLBACKEND)

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _hide_sklearn(monkeypatch):
    """Make ``import sklearn`` (and its submodules) fail from now on in this test, as on a machine without
    scikit-learn."""
    import builtins
    import sys

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "sklearn" or name.startswith("sklearn."):
            raise ImportError(f"No module named {name!r} (hidden by the test)")
        return real_import(name, *args, **kwargs)

    for mod in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", fake_import)


@pytest.fixture
def hide_sklearn(monkeypatch):
    """A function that hides scikit-learn for the rest of the test when called."""
    return lambda: _hide_sklearn(monkeypatch)


@pytest.fixture
def no_sklearn(monkeypatch):
    """scikit-learn hidden for the whole test."""
    _hide_sklearn(monkeypatch)


def pytest_collection_modifyitems(config, items):
    """The long tests first: the test modules that hold a test marked ``notebook`` (whole notebooks at the smoke
    profile or without Fashion-MNIST, a chapter run from the wheel, the light install in its own venv), whole and in
    their collected order, then every other module as collected. Under pytest-xdist (``-n 2``) these minute-long
    tests then start early and the short tests fill in around them, instead of one worker finishing a notebook alone
    at the end. A module stays contiguous, so its module-scoped fixtures (the built wheel) are made once per worker;
    every worker sorts the same collection the same way, as xdist requires."""

    def module(item):
        return item.nodeid.split("::", 1)[0]

    long_modules = {module(item) for item in items if item.get_closest_marker("notebook")}
    items.sort(key=lambda item: module(item) not in long_modules)  # stable sort
