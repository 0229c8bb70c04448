"""Shared pytest set-up: a headless matplotlib backend for in-process tests, hypothesis profiles."""

import os

import matplotlib

matplotlib.use("Agg")  # in-process only; notebook kernels never inherit this (the runner drops MPLBACKEND)

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
