"""How many threads a kernel call may use: OpenMP's count, or the caller's limit.

The default is OpenMP's (``OMP_NUM_THREADS``, else the cores). A caller that
knows better, such as a Dask worker sharing its host's cores with other
workers, sets its own count for the calls made from its thread with
:func:`thread_limit`. The result of every call is the same whatever the count.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from ._openmp import max_threads as _openmp_threads

_local = threading.local()


def max_threads() -> int:
    """Threads the kernel calls made from this thread may use.

    Examples
    --------
    >>> with thread_limit(1):
    ...     max_threads()
    1
    """
    limit = getattr(_local, "limit", None)
    return limit if limit is not None else max(1, _openmp_threads())


@contextmanager
def thread_limit(n: int | None):
    """Run the kernel calls made from this thread on ``n`` threads (None: the default).

    Parameters
    ----------
    n : int or None
        Thread count; at least 1.
    """
    if n is None:
        yield
        return
    before = getattr(_local, "limit", None)
    _local.limit = max(1, int(n))
    try:
        yield
    finally:
        _local.limit = before
