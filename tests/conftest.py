"""Settings for the whole suite: bench rows are timed for a short budget each (the
tests check rows, columns and ratios' presence, not their precision), so the many
``schedlang bench`` runs of the CLI tests stay quick. Child processes inherit it."""
import os
import subprocess
import sys

import pytest

os.environ.setdefault("SCHEDLANG_BENCH_BUDGET_S", "0.05")


@pytest.fixture
def cli_run(capsys):
    """``schedlang ARGS`` run by ``schedlang.cli.main`` in this process (no interpreter to
    start and no package to import again; ``bench`` still measures in its child processes),
    as a ``subprocess.CompletedProcess``: the exit status, stdout and stderr, with the
    message of a ``SystemExit`` on stderr and status 1, as the interpreter does. Any other
    exception propagates and fails the test (where a subprocess would print a traceback).
    The ``python -m schedlang`` entry points keep their own subprocess tests."""
    from schedlang.cli import main

    def run(*args):
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code or 0, out, err)
    return run
