"""Build hook (everything else is in pyproject.toml): ship the book's sources inside the wheel.

A non-editable install (``pip install .``) has no checkout beside it, so the notebooks, profiles, book pages and the
committed data the chapters read are copied into the wheel as ``dputils/_book/``. ``dputils run`` and ``dputils book``
then copy them into a book folder of the user's (see :mod:`dputils.book.booksources`). An editable install reads the
checkout itself and copies nothing.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: What a book folder needs, relative to the repository root (files, or folders copied whole).
BOOK_SOURCES = ("notebooks", "params", "book", "_static", "_config.yml", "_toc.yml", "benchmarks/results", "data/atlas")
#: Generated files under those folders that never ship.
SKIP = ("methods", "scorecard.md", "__pycache__", ".ipynb_checkpoints")


class BuildWithBookSources(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the checkout is the book folder
        here = Path(__file__).resolve().parent
        dest = Path(self.build_lib) / "dputils" / "_book"
        if dest.exists():
            shutil.rmtree(dest)
        for rel in BOOK_SOURCES:
            src = here / rel
            if src.is_dir():
                shutil.copytree(src, dest / rel, ignore=shutil.ignore_patterns(*SKIP))
            elif src.is_file():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
            else:
                raise FileNotFoundError(f"book source {rel} is missing from {here}")


setup(cmdclass={"build_py": BuildWithBookSources})
