"""A table writer that fails half-way, to prove a dead run leaves no output behind.

In a test, ``monkeypatch.setattr(io, "write_table", failing_write_table("raise"))``.
For a process that must really die mid-write, run this file as the command
line instead of ``python -m dmondrian``::

    python tests/failing_write.py kill anonymize big.csv out.csv --k 50 --qi age

It patches :func:`dmondrian.io.files.write_table`, then runs
:func:`dmondrian.cli.main` with the remaining arguments. The action
``kill-dask`` kills a ``--distributed`` run instead: the Dask workers write
the release through :class:`KillingSink`, which, once it has written its
first file, SIGKILLs its whole process group (the command line, its
cluster, every worker). Run it in a new session, with this folder on the
workers' ``PYTHONPATH``.

The action ``kill-at:STEP`` SIGKILLs the process group at a step of the
commit (:func:`dmondrian.io.staging.checkpoint`: ``staged``, every check
passed and nothing published; ``moved``, the data at OUTPUT and its
manifest not yet; ``committed``, both published, the staging not yet
removed).
"""

from __future__ import annotations

import os
import signal
import sys

from dmondrian.io import files as io
from dmondrian.io.parquet_sink import ParquetSink

ACTIONS = ("raise", "kill")
RUN_ACTIONS = (*ACTIONS, "kill-dask")
#: The steps of the commit an action ``kill-at:STEP`` dies at.
COMMIT_STEPS = ("staged", "moved", "committed")

#: The message of the injected failure, for the tests to look for.
MESSAGE = "injected write failure"


def fail(action: str) -> None:
    """Raise an OSError (``"raise"``) or SIGKILL this process (``"kill"``)."""
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise OSError(f"{MESSAGE} ({action})")


def failing_write_table(action: str, write_table=io.write_table):
    """``write_table`` failing with ``action`` once its first chunk is written.

    The writer reports each chunk it has written to its ``progress``
    callback: failing there fails between two chunks, with part of the
    table in the temporary output.

    Parameters
    ----------
    action : {"raise", "kill"}
        How the write fails.
    write_table : callable
        The writer to wrap.

    Returns
    -------
    callable
        A drop-in replacement for :func:`dmondrian.io.files.write_table`.
    """
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")

    def failing(*args, progress=None, **kwargs):
        def after_chunk(done, total):
            if progress is not None:
                progress(done, total)
            fail(action)

        return write_table(*args, progress=after_chunk, **kwargs)

    return failing


class KillingSink(ParquetSink):
    """A Parquet sink whose first written file is the last thing its process group does."""

    def write(self, frame, number, distinct=None):
        rows = super().write(frame, number, distinct)
        os.killpg(os.getpgid(0), signal.SIGKILL)
        return rows


def main(argv: list[str]) -> int:
    """Run ``dmondrian ARGS`` with the writer failing: ``argv`` is ``ACTION ARGS...``."""
    from dmondrian._dask import parquet_release
    from dmondrian.cli import main as dmondrian

    action = argv[0]
    if action.startswith("kill-at:") and action[len("kill-at:"):] in COMMIT_STEPS:
        from dmondrian.io import staging

        at = action[len("kill-at:"):]

        def checkpoint(step):
            if step == at:
                os.killpg(os.getpgid(0), signal.SIGKILL)

        staging.checkpoint = checkpoint
        return dmondrian(argv[1:])
    if argv[0] not in RUN_ACTIONS:
        raise SystemExit(f"action must be one of {RUN_ACTIONS}, got {argv[0]!r}")
    if argv[0] == "kill-dask":
        # By its module's name, not __main__'s: the workers unpickle it.
        from failing_write import KillingSink as sink

        parquet_release.ParquetSink = sink  # the Parquet release graph's sink
    else:
        io.write_table = failing_write_table(argv[0])
    return dmondrian(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
