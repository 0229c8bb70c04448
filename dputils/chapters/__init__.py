"""Book tooling for single chapters: the figures and tables one chapter draws more than once.

One module per chapter (``dputils.chapters.<chapter>``). These sit on the tooling side (they may use
:mod:`dputils.plotting`, :mod:`dputils.tables` and :mod:`dputils.scorecard`); the computations they show live in
the library (:mod:`dputils.accountants`, :mod:`dputils.audit`, :mod:`dputils.matrix`, ...), and the library never
imports this package.
"""
