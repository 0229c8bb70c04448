"""The book tooling: running the notebooks (:mod:`~dputils.book.run`, :mod:`~dputils.book.sweep`,
:mod:`~dputils.book.changed`), their results and targets (:mod:`~dputils.book.results`,
:mod:`~dputils.book.scorecard`), tables and figures (:mod:`~dputils.book.tables`, :mod:`~dputils.book.plotting`,
:mod:`~dputils.book.chapters`), the benchmarks and the atlas (:mod:`~dputils.book.benchmarks`,
:mod:`~dputils.book.atlas`), the shipped sources (:mod:`~dputils.book.booksources`) and the browser check
(:mod:`~dputils.book.bookcheck`).

It sits on top of the library (:mod:`dputils.accountants`, :mod:`dputils.audit`, :mod:`dputils.matrix`, ...), which
never imports it (an import-linter contract in CI). Importing this package imports none of its modules.
"""
