"""The memory a worker thread's tasks may use, and the sizes that fit in it.

A worker's budget is its memory limit, at the fraction where dask pauses it, less what its process
already holds when the plan is made (the baseline: interpreter, libraries, data it keeps; the
largest over the workers) and what dask's p2p shuffle may buffer; each thread gets its share. The
leaf, output partition and input piece sizes are parts of that share, divided by what one row costs
in each kind of task. The smallest limit that works follows from the same rules. See docs/design.md,
section "Sizes and limits".
"""

from __future__ import annotations

from dataclasses import dataclass

from .._compat import scheduler_workers
from ..errors import MemoryLimitError

__all__ = ["WorkerMemory", "measure_workers", "output_row_cost", "input_row_cost",
           "leaf_rows_for", "output_partition_cap", "input_piece_rows", "smallest_limit",
           "check_fits", "check_partitions_fit", "release_freed_memory", "LEAF_ROWS_MIN",
           "LEAF_ROWS_MAX", "UNKNOWN_BUDGET"]

#: ``leaf_rows`` is clipped to [LEAF_ROWS_MIN, LEAF_ROWS_MAX] (then raised to 2 k).
LEAF_ROWS_MIN, LEAF_ROWS_MAX = 1_000, 4_000_000
#: A thread's budget when the workers' memory is unknown (no limit).
UNKNOWN_BUDGET = 2e9
#: Where dask pauses a worker when its configuration does not say.
PAUSE_DEFAULT = 0.8
#: dask's p2p buffers fill only when the receivers fall behind: they are set
#: aside as configured, but never more than this share of the limit.
P2P_SHARE_MAX = 0.25
#: Shares of a thread's budget: the default leaf, an output partition, and the
#: piece of an input partition one routing task handles. The rest is left to
#: what the worker holds besides the running task (shuffle shards, results
#: waiting for their consumer), which dask can spill.
LEAF_SHARE, OUTPUT_SHARE, PIECE_SHARE = 0.2, 0.5, 0.5
#: Reading an input partition peaks at about 2.6 times its in-memory size
#: (Parquet's buffers, Arrow's table, then pandas' frame).
READ_COPIES = 3
#: An input partition is not cut into pieces smaller than this.
PIECE_ROWS_MIN = 10_000


def output_row_cost(row_bytes: float, n_qis: int) -> float:
    """Bytes one row costs in an output partition's task.

    The rows as received and reordered and the frame written (three copies
    of a row), the kernel's double buffer kept in the work space (1.25 x 2 x
    (QIs + 2) int64) and the QIs' published labels (8 bytes each).

    Examples
    --------
    >>> output_row_cost(54.0, 5)
    342.0
    """
    return 3 * float(row_bytes) + 20 * (n_qis + 2) + 8 * n_qis


def input_row_cost(row_bytes: float, n_qis: int) -> float:
    """Bytes one row costs while an input piece is routed and cut into shards.

    The routed frame and the shuffle's copy of it (two copies of a row) and the QIs' int64 keys.

    Examples
    --------
    >>> input_row_cost(54.0, 5)
    148.0
    """
    return 2 * float(row_bytes) + 8 * n_qis


@dataclass(frozen=True)
class WorkerMemory:
    """What the workers have, as measured when the plan is made.

    Attributes
    ----------
    limit : float
        The smallest memory limit over the workers (bytes).
    threads : int
        The most threads of a worker.
    baseline : float
        The largest process memory over the workers (bytes).
    pause : float
        The fraction of the limit where dask pauses a worker.
    p2p_buffers : float
        What a worker's p2p shuffle may buffer (send and storage buffers, bytes).
    """

    limit: float
    threads: int = 1
    baseline: float = 0.0
    pause: float = PAUSE_DEFAULT
    p2p_buffers: float = 0.0

    @property
    def p2p_reserve(self) -> float:
        """The part of the limit set aside for the p2p shuffle's buffers."""
        return min(self.p2p_buffers, P2P_SHARE_MAX * self.limit)

    @property
    def per_thread(self) -> float:
        """Bytes one thread's task may use (may be negative: nothing fits).

        Examples
        --------
        >>> WorkerMemory(700e6, 1, 230e6, 0.8, 131e6).per_thread / 1e6
        199.0
        """
        usable = self.pause * self.limit - self.baseline - self.p2p_reserve
        return usable / max(1, self.threads)


def leaf_rows_for(per_thread: float | None, row_bytes: float, n_qis: int,
                  share: float = LEAF_SHARE) -> int:
    """Rows whose output-partition cost fits ``share`` of a thread's budget.

    Clipped to [LEAF_ROWS_MIN, LEAF_ROWS_MAX]; ``per_thread`` None (unknown)
    is :data:`UNKNOWN_BUDGET`.

    Examples
    --------
    >>> leaf_rows_for(199e6, 54.0, 5)
    116374
    >>> leaf_rows_for(None, 54.0, 5) == leaf_rows_for(2e9, 54.0, 5)
    True
    """
    if per_thread is None:
        per_thread = UNKNOWN_BUDGET
    rows = share * per_thread / output_row_cost(row_bytes, n_qis)
    return int(min(LEAF_ROWS_MAX, max(LEAF_ROWS_MIN, rows)))


def output_partition_cap(per_thread: float | None, row_bytes: float, n_qis: int) -> int:
    """Most rows an output partition packs: :data:`OUTPUT_SHARE` of a thread's budget.

    Examples
    --------
    >>> output_partition_cap(199e6, 54.0, 5)
    290935
    """
    return leaf_rows_for(per_thread, row_bytes, n_qis, share=OUTPUT_SHARE)


def input_piece_rows(per_thread: float | None, partition_rows: int, row_bytes: float,
                     n_qis: int) -> int:
    """Rows of the pieces an input partition is routed and shuffled in.

    The partition, once read, is held while its pieces are routed one task at a time; a piece costs
    :func:`input_row_cost` a row, within :data:`PIECE_SHARE` of what the partition leaves of the
    budget. A partition that fits is one piece (returns ``partition_rows``).

    Examples
    --------
    >>> input_piece_rows(199e6, 250_000, 54.0, 5)
    250000
    >>> input_piece_rows(199e6, 1_000_000, 54.0, 5)
    489864
    """
    partition_rows = max(int(partition_rows), 1)
    if per_thread is None:
        return partition_rows
    left = per_thread - partition_rows * float(row_bytes)
    rows = int(PIECE_SHARE * max(left, 0.0) / input_row_cost(row_bytes, n_qis))
    return min(partition_rows, max(PIECE_ROWS_MIN, rows))


def _thread_need(row_bytes: float, n_qis: int, partition_rows: int, leaf_rows: int,
                 shuffled_bytes: float | None = None) -> float:
    """Bytes the smallest plan needs per thread: the largest of its tasks' needs.

    ``shuffled_bytes`` is what a row carries through the shuffles when only keys travel (None: the
    whole row travels); routing and the leaves then hold that much a row, and reading an input
    partition to write it also holds its published values and routes it again (its keys, positions,
    leaves, order and the place of each row's codes: int64 each).
    """
    moved = float(row_bytes if shuffled_bytes is None else shuffled_bytes)
    read = READ_COPIES * partition_rows * float(row_bytes)
    if shuffled_bytes is not None:
        read += partition_rows * (moved + 8 * (n_qis + 4))
    piece = min(partition_rows, PIECE_ROWS_MIN)
    route = partition_rows * moved + piece * input_row_cost(moved, n_qis) / PIECE_SHARE
    output = leaf_rows * output_row_cost(moved, n_qis) / OUTPUT_SHARE
    return max(read, route, output)


def smallest_limit(mem: WorkerMemory, row_bytes: float, n_qis: int, partition_rows: int,
                   leaf_rows: int, shuffled_bytes: float | None = None) -> float:
    """The smallest memory limit per worker (bytes) on which a plan fits.

    The same rules as the sizes: the baseline, the p2p reserve, and per thread the largest of
    reading the largest input partition, routing its smallest piece while holding it, and an output
    partition of one leaf of ``leaf_rows`` (the smallest the plan may use), at the pause fraction.
    ``shuffled_bytes``: a row's bytes through the shuffles when only keys travel (see
    :func:`_thread_need`).

    Examples
    --------
    >>> mem = WorkerMemory(300e6, 1, 230e6, 0.8, 56e6)
    >>> round(smallest_limit(mem, 54.0, 5, 1_000_000, 2_000) / 1e6)
    560
    """
    need = mem.baseline + max(1, mem.threads) * _thread_need(row_bytes, n_qis, partition_rows,
                                                             leaf_rows, shuffled_bytes)
    with_all = (need + mem.p2p_buffers) / mem.pause
    if mem.p2p_buffers <= P2P_SHARE_MAX * with_all:
        return with_all
    return need / (mem.pause - P2P_SHARE_MAX)


def check_fits(mem: WorkerMemory | None, row_bytes: float, n_qis: int, partition_rows: int,
               leaf_rows: int, shuffled_bytes: float | None | tuple = None) -> None:
    """Raise :class:`~dmondrian.errors.MemoryLimitError` when no plan fits the workers.

    ``shuffled_bytes``: a row's bytes through the shuffles when only keys
    travel (None: the whole row, :func:`smallest_limit`); a tuple of such
    values (before the path is chosen) refuses only when none fits.

    Examples
    --------
    >>> check_fits(WorkerMemory(2e9, 1, 230e6, 0.8, 131e6), 54.0, 5, 1_000_000, 2_000)
    >>> check_fits(WorkerMemory(300e6, 1, 230e6, 0.8, 56e6), 54.0, 5, 1_000_000, 2_000)
    Traceback (most recent call last):
    ...
    dmondrian.errors.MemoryLimitError: the Dask workers' memory limit is 300 MB per worker, ...
    """
    if mem is None:
        return
    paths = shuffled_bytes if isinstance(shuffled_bytes, tuple) else (shuffled_bytes,)
    smallest = min(smallest_limit(mem, row_bytes, n_qis, partition_rows, leaf_rows, s)
                   for s in paths)
    if mem.limit >= smallest:
        return
    raise MemoryLimitError(
        mem.limit, smallest,
        f"the Dask workers' memory limit is {_mb(mem.limit)} per worker, too small for this "
        f"table: the smallest limit that works is {_mb(smallest)} per worker "
        f"({mem.threads} thread(s) each). A worker already holds {_mb(mem.baseline)}, dask "
        f"pauses it at {mem.pause:.0%} of its limit, its p2p shuffle may buffer "
        f"{_mb(mem.p2p_buffers)}, and one thread must read an input partition of "
        f"{partition_rows:,} rows (at least {row_bytes:.0f} bytes a row in memory) and anonymize "
        f"leaves of {leaf_rows:,} rows. Give the workers more memory or fewer threads, "
        f"or use smaller input partitions or p2p buffers "
        f"(distributed.p2p.comm.buffer, distributed.p2p.storage.buffer).")


def check_partitions_fit(mem: WorkerMemory | None, lengths, row_bytes: float,
                         terminate: float | None = None) -> None:
    """Raise :class:`~dmondrian.errors.MemoryLimitError` when a task that holds one whole
    input partition (a fitted plan's release: no shuffle cuts it) would be killed.

    The task reads the partition (:data:`READ_COPIES` copies of its rows at ``row_bytes``, a lower
    bound of their size) in a worker thread's share of what the worker may hold before dask's nanny
    kills it (``terminate``, ``distributed.worker.memory.terminate``, of its limit) less its
    baseline. A partition that would only pause the worker is left to the stall watch
    (:mod:`dmondrian._dask.watchdog`). The error names the largest partition and the fix.

    Parameters
    ----------
    mem : WorkerMemory or None
        The workers (None: no limit, nothing to check).
    lengths : sequence of int or None
        Rows of every input partition (None: unknown, nothing to check).
    row_bytes : float
        The least a row takes in memory.
    terminate : float, optional
        The fraction of the limit where a worker is killed (default: dask's configuration).

    Examples
    --------
    >>> mem = WorkerMemory(400e6, 1, 130e6, 0.8, 0.0)
    >>> check_partitions_fit(mem, [10_000, 20_000], 400.0, 0.95)
    >>> check_partitions_fit(mem, [10_000, 400_000], 400.0, 0.95)
    Traceback (most recent call last):
    ...
    dmondrian.errors.MemoryLimitError: input partition 1 holds 400,000 rows, ...
    """
    if mem is None or not lengths:
        return
    if terminate is None:
        import dask

        terminate = dask.config.get("distributed.worker.memory.terminate", 0.95) or 1.0
    largest = max(range(len(lengths)), key=lambda i: lengths[i])
    rows = int(lengths[largest])
    need = READ_COPIES * rows * float(row_bytes)
    threads = max(1, mem.threads)
    room = (terminate * mem.limit - mem.baseline) / threads
    if need <= room:
        return
    smallest = (mem.baseline + threads * need) / terminate
    raise MemoryLimitError(
        mem.limit, smallest,
        f"input partition {largest} holds {rows:,} rows, at least {_mb(need)} in memory while "
        f"one task reads and releases it whole, and a worker thread has {_mb(room)} before "
        f"dask kills its worker (limit {_mb(mem.limit)} per worker, {threads} thread(s), "
        f"{_mb(mem.baseline)} held already, killed at {terminate:.0%}). Write the input in "
        f"smaller row groups or files (a partition holds at least one row group), or give "
        f"the workers more memory: at least {_mb(smallest)} per worker.")


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def measure_workers(client) -> WorkerMemory | None:
    """The workers' memory now: limits, threads, and each process's memory.

    Each worker first loads what the engine's tasks import (so a fresh worker's baseline counts the
    libraries it is about to load) and returns what it can to the system (young garbage, and Arrow's
    pool of freed memory, which dask would count as the worker's own), so the baseline is what it
    really holds. None when no worker has a memory limit.

    Examples
    --------
    >>> from distributed import Client
    >>> with Client(processes=False, n_workers=1, threads_per_worker=1, memory_limit="4GB",
    ...             dashboard_address=":0") as c:
    ...     mem = measure_workers(c)
    >>> mem.limit, mem.threads, mem.baseline > 0
    (4000000000.0, 1, True)
    """
    workers = scheduler_workers(client)
    limits = [w["memory_limit"] for w in workers.values() if w.get("memory_limit")]
    if not limits:
        return None
    try:
        facts = client.run(_memory_facts)
    except Exception:  # noqa: BLE001 - a worker that cannot answer: the heartbeats' figures
        facts = {a: {"rss": w.get("metrics", {}).get("memory", 0)} for a, w in workers.items()}
    baseline = max((f["rss"] for f in facts.values()), default=0)
    pause = min((f.get("pause", PAUSE_DEFAULT) for f in facts.values()), default=PAUSE_DEFAULT)
    p2p = max((f.get("p2p", 0.0) for f in facts.values()), default=0.0)
    threads = max(int(w.get("nthreads") or 1) for w in workers.values())
    return WorkerMemory(float(min(limits)), threads, float(baseline), float(pause), float(p2p))


def _memory_facts() -> dict:
    """On a worker: its process memory once freed memory is returned, and its dask settings."""
    import dask

    # What every engine task loads: a fresh worker's baseline counts them.
    import dask.dataframe  # noqa: F401
    import psutil
    import pyarrow.parquet  # noqa: F401
    from dask.utils import parse_bytes

    from .. import local  # noqa: F401

    release_freed_memory()
    pause = dask.config.get("distributed.worker.memory.pause", PAUSE_DEFAULT)
    if not pause:  # pausing disabled: dask terminates the worker instead
        pause = dask.config.get("distributed.worker.memory.terminate", 0.95) or 1.0
    p2p = sum(parse_bytes(dask.config.get(key, 0) or 0) for key in
              ("distributed.p2p.comm.buffer", "distributed.p2p.storage.buffer"))
    return {"rss": psutil.Process().memory_info().rss, "pause": float(pause), "p2p": float(p2p)}


def release_freed_memory() -> None:
    """Return the memory Python and Arrow hold but no longer use to the system.

    Arrow's allocator keeps freed memory for reuse; dask counts it as the worker's unmanaged memory,
    and a worker over its pause fraction stays paused while it is kept. Python's garbage is
    collected in its young generations only: a full collection walks every object the libraries hold
    (a worker's, or the client's process for an in-process cluster) and returns next to nothing, as
    dask's own collections run anyway.
    """
    import gc
    import sys

    gc.collect(1)
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
