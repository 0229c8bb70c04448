"""The one version source of dputils (read by pyproject.toml and ``dputils --version``)."""

__version__ = "0.1.0"
