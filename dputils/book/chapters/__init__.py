"""Book tooling for single chapters: the figures and tables one chapter draws more than once.

One module per chapter (``dputils.book.chapters.<chapter>``). These sit on the tooling side (they may use
:mod:`dputils.book.plotting`, :mod:`dputils.book.tables` and :mod:`dputils.book.scorecard`); the computations they show live in
the library (:mod:`dputils.accountants`, :mod:`dputils.audit`, :mod:`dputils.matrix`, ...), and the library never
imports this package.
"""

from ..results import glue


def glue_figure(name: str, fig) -> None:
    """Glue ``fig`` under ``name`` for a ``{glue:figure}`` directive of the page (which holds the caption, the
    label and the alt text in markdown) and close it, so that the cell itself shows nothing."""
    import matplotlib.pyplot as plt

    glue(name, fig, display=False)
    plt.close(fig)
