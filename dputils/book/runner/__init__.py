"""The papermill runner, one module per job; :mod:`dputils.book.run` re-exports their names and docs/runner.md
is the manual."""
