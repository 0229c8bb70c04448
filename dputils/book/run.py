"""The papermill runner: notebooks/NAME.md -> METHODS/NAME.ipynb (+ RESULTS/NAME.json).

Its manual (profiles, where the outputs go, atomic publishing, ``--changed``, the JSON report, Ctrl-C and killed runs) is
``docs/runner.md``. The code lives in :mod:`dputils.book.runner`, one module per job:

* :mod:`~dputils.book.runner.params`: the book folder, the profiles, the notebooks' parameters;
* :mod:`~dputils.book.runner.execute`: executing one notebook and publishing it (:func:`run_staged`);
* :mod:`~dputils.book.runner.locate`: where a notebook failed (cell, source line, exception);
* :mod:`~dputils.book.runner.supervise`: pool workers, Ctrl-C, killed runs;
* :mod:`~dputils.book.runner.schedule`: deciding what runs, then running it (:func:`execute_all`);
* :mod:`~dputils.book.runner.report`: the JSON report and the timing table;
* :mod:`~dputils.book.runner.build`: the book's HTML and the targets ledger;
* :mod:`~dputils.book.runner.cli`: ``python -m dputils run|book`` and its table of exit codes.

Every name this module defined before the split is importable from here, as before.
"""

from __future__ import annotations

from .publish import pid_alive  # noqa: F401  (public here too, as before)
from .runner.build import (  # noqa: F401  (re-exported)
    _BOOK_BANNER,
    book_log_line,
    build_book,
    check_ledger,
    profile_site,
)
from .runner.cli import (  # noqa: F401  (re-exported)
    EXIT_CODES,
    LOCK_BUSY_EXIT,
    LockUnavailable,
    LockWaitInterrupted,
    _cli_locked,
    _parser,
    cli_main,
    exit_status,
)
from .runner.common import (  # noqa: F401  (re-exported)
    _plural,
    _rel,
    _say,
)
from .runner.execute import (  # noqa: F401  (re-exported)
    _QUIET_KM,
    KERNEL_ARGS,
    _finish_executed_copy,
    _NoTimeoutEcho,
    add_download_cell,
    execute_one,
    kernel_start_race,
    quiet_shutdown_kernel_manager,
    run_staged,
)
from .runner.locate import (  # noqa: F401  (re-exported)
    _ANSI,
    _ARROW,
    _FRAME,
    _first_line,
    _is_timeout,
    _md_cell_line,
    describe_failure,
    failure_location,
    failure_where,
    timeout_location,
)
from .runner.params import (  # noqa: F401  (re-exported)
    _IDENT,
    PROFILES,
    RootError,
    _is_root,
    _materialize,
    _simple_assignments,
    _type_ok,
    check_devices,
    check_output_folder,
    check_parameters,
    check_profile,
    declared_parameters,
    find_root,
    load_profile,
    merge_parameter_cells,
    notebook_paths,
    output_dirs,
)
from .runner.report import (  # noqa: F401  (re-exported)
    REPORT_FORMAT,
    REPORT_VERSION,
    _finite,
    chapter_entry,
    report_path,
    run_report,
    timing_table,
    write_report,
)
from .runner.schedule import (  # noqa: F401  (re-exported)
    RunPlan,
    _record,
    execute_all,
    plan_runs,
    run_notebooks,
    run_plan,
)
from .runner.supervise import (  # noqa: F401  (re-exported)
    _OWNER,
    _RUN_ID,
    FINISHED_MARK,
    HEARTBEAT_S,
    _kill_descendants,
    _stop_pool,
    _watch_owner,
    _worker_init,
    clean_stale_staging,
    owner_gone,
)
