"""Running the ``dmondrian`` command line in the test process, shared by the CLI tests."""

from __future__ import annotations

import contextlib
import subprocess
from io import StringIO

import pytest

from dmondrian.cli import main


def in_process(*args, cwd) -> subprocess.CompletedProcess:
    """``main(args)`` in this process, in folder ``cwd``, its output captured as a
    subprocess's would be (stderr not a terminal: no progress bar).

    The console script and ``python -m dmondrian`` call the same ``main``; a test
    runs a command this way when a Python start-up a run would add nothing to
    what it proves.
    """
    out, err = StringIO(), StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(map(str, args)))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
