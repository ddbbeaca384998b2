"""Stage messages and a write progress bar on stderr, shown only on a terminal."""

from __future__ import annotations

import contextlib
import sys
import time

#: Characters of the bar.
BAR_WIDTH = 30


class Progress:
    """Stage messages and a write bar on stderr, only when it is a terminal.

    Parameters
    ----------
    enabled : bool
        False (``--no-progress``) keeps stderr quiet even on a terminal.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()

    @contextlib.contextmanager
    def stage(self, text: str):
        """Show ``text ...`` while the block runs, then how long it took.

        Parameters
        ----------
        text : str
            What the block does.
        """
        start = time.perf_counter()
        if self.enabled:
            sys.stderr.write(f"{text} ...")
            sys.stderr.flush()
        yield
        if self.enabled:
            sys.stderr.write(f"\r{text} done ({time.perf_counter() - start:.1f}s)\033[K\n")

    def bar(self, label: str):
        """A ``progress(done, total)`` callback drawing a bar after ``label``.

        Parameters
        ----------
        label : str
            What is being written.

        Returns
        -------
        callable
            For :func:`dmondrian.io.files.write_table`'s ``progress``.
        """
        def update(done: int, total: int):
            if not self.enabled:
                return
            frac = 1.0 if total == 0 else done / total
            filled = int(BAR_WIDTH * frac)
            sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                             f"{frac:4.0%} {done:,}/{total:,} rows\033[K")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return update
