"""The kernel's double buffer, and memory kept for it from one call to the next."""

from __future__ import annotations

import mmap
import threading
import time
from contextlib import contextmanager

import numpy as np

from .buffers import copy_parallel, ids_and_touch
from .constants import PARALLEL_MIN_ROWS
from .threads import max_threads


def double_buffer(keys, rows: int, n: int, space: np.ndarray | None = None) -> np.ndarray:
    """The kernel's double buffer, its first half filled: ``keys``, then row ids.

    Parameters
    ----------
    keys : sequence of int64 arrays (n,)
        The QIs' keys, then any rows that ride along (sensitive codes). A
        key that already is its row of the buffer (filled in place through
        :meth:`WorkSpace.buffer`) is not copied.
    rows : int
        Rows of each half: ``len(keys) + 1`` (the row ids come last).
    n : int
        Number of table rows.
    space : int64 array, optional
        Memory to build the buffer in (see :class:`WorkSpace`), at least
        ``2 * rows * n`` elements; default: fresh memory.

    Returns
    -------
    int64 array (2, rows, n)
        As :func:`dmondrian._kernel.mondrian_partition` takes it.

    Examples
    --------
    >>> double_buffer([np.array([5, 3, 4])], 2, 3)[0].tolist()
    [[5, 3, 4], [0, 1, 2]]
    """
    size = 2 * rows * n
    small = n < PARALLEL_MIN_ROWS
    fresh = space is None and not small
    threads = max_threads()
    if space is not None:
        bufs = space[:size].reshape(2, rows, n)
    elif small:
        bufs = np.empty((2, rows, n), dtype=np.int64)
    else:
        bufs = _fresh_pages(size).reshape(2, rows, n)
    for r, row in enumerate(keys):
        if _same_memory(row, bufs[0, r]):
            continue
        if small:
            bufs[0, r] = row
        else:
            copy_parallel(bufs[0, r], np.ascontiguousarray(row, dtype=np.int64), threads)
    if fresh:
        ids_and_touch(bufs, threads)  # the row ids, and fresh pages faulted in by all threads
    else:
        bufs[0, -1] = np.arange(n)
    return bufs


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` is exactly the array ``b`` (same start, type, shape and strides)."""
    return (isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
            and a.strides == b.strides and a.ctypes.data == b.ctypes.data)


def _fresh_pages(size: int) -> np.ndarray:
    """``size`` int64 in plain 4 KiB pages from an anonymous map.

    numpy would ask for transparent huge pages, and where the system
    compacts memory on demand to serve them (THP "madvise" with defrag
    "madvise", a common default) faulting in a large buffer can cost more
    than partitioning it. The buffer is streamed through, so small pages
    cost no speed.
    """
    # Private, as numpy's own memory is: a forked child's writes stay its own.
    private = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}
    return np.frombuffer(mmap.mmap(-1, 8 * max(size, 1), **private), dtype=np.int64,
                         count=size)


class WorkSpace:
    """Memory for the kernel's double buffer, kept from one call to the next.

    A fresh buffer is faulted in page by page on every call, a cost of the
    order of the partitioning itself on a distributed engine's leaf. A caller
    that partitions many tables in turn (the distributed engine, one output
    partition after another) keeps one work space per thread. What a
    partitioning returns (``sorted_keys``) is a view of this memory, valid
    until the next call that uses the same work space.

    A work space kept between calls is memory its owner holds while idle:
    :meth:`release_if_idle` returns it once no call has used it (inside
    :meth:`in_use`) for a while; arrays a call returned keep their own part
    alive.

    Examples
    --------
    >>> ws = WorkSpace()
    >>> ws.take(10).shape, ws.take(4).base is ws.take(10).base
    ((10,), True)
    >>> with ws.in_use():
    ...     ws.release_if_idle(0.0)
    False
    >>> ws.release_if_idle(0.0), ws.nbytes
    (True, 0)
    """

    def __init__(self):
        self._space = np.empty(0, dtype=np.int64)
        self._lock = threading.Lock()
        self._users = 0
        self._last_used = time.monotonic()

    @property
    def nbytes(self) -> int:
        """Bytes this work space holds."""
        return int(self._space.nbytes)

    @contextmanager
    def in_use(self):
        """Mark the work space busy for a block: it is not released meanwhile."""
        with self._lock:
            self._users += 1
        try:
            yield self
        finally:
            with self._lock:
                self._users -= 1
                self._last_used = time.monotonic()

    def release_if_idle(self, idle_seconds: float) -> bool:
        """Return the memory if nothing has used it for ``idle_seconds``; whether it did."""
        with self._lock:
            if self._users or time.monotonic() - self._last_used < idle_seconds:
                return False
            self._space = np.empty(0, dtype=np.int64)
            return True

    def take(self, size: int) -> np.ndarray:
        """At least ``size`` int64 of this work space (grown, never shrunk)."""
        if self._space.shape[0] < size:
            # Grown by a quarter more than asked, so slowly growing tables
            # don't reallocate every time.
            grown = _fresh_pages(size + size // 4)
            grown[:] = 0  # fault the pages in now, on this thread, once
            self._space = grown
        return self._space[:size]

    def buffer(self, rows: int, n: int) -> np.ndarray:
        """The ``(2, rows, n)`` double buffer that :func:`double_buffer` builds here.

        A caller that can write a table's keys straight into their rows of
        ``buffer(rows, n)[0]`` spares the kernel a copy of every key (and
        itself the arrays it would copy from).
        """
        return self.take(2 * rows * n).reshape(2, rows, n)
