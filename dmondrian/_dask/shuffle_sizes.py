"""The shuffle pass's sizes, fixed when the plan is made, on the workers' memory then.

The top phase has run: the workers hold what a working worker holds (the engine's libraries, Arrow's
and Python's memory after real tasks), so they are measured again, checked against the smallest plan
with the row size measured on data, and the output partitions and input pieces sized from what
remains. See docs/design.md, section "Sizes and limits".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._compat import known_partition_lengths
from .memory import WorkerMemory, check_fits, input_piece_rows, measure_workers
from .options import Sizing, output_partition_rows
from .plan import pack_output_partitions

__all__ = ["ShuffleSizes", "shuffle_sizes", "piece_bounds", "balanced_partitions"]


@dataclass(frozen=True)
class ShuffleSizes:
    """Rows of an output partition and of an input piece (0: whole partitions)."""

    output_partition_rows: int
    input_piece_rows: int
    #: Rows of every input partition: exact when dask knows them, else the largest's.
    input_rows: tuple
    worker_memory: WorkerMemory | None
    #: Worker threads of the cluster (the write tasks that run at once).
    threads: int = 1

    def pack(self, counts: np.ndarray) -> list:
        """The output partitions of leaves of ``counts`` rows (:func:`balanced_partitions`)."""
        return balanced_partitions(counts, self.output_partition_rows, self.threads)

    def as_plan_fields(self) -> dict:
        """The :class:`~dmondrian._dask.plan.TopPlan` fields these sizes fill."""
        return {"output_partition_rows": self.output_partition_rows,
                "input_piece_rows": self.input_piece_rows, "input_rows": self.input_rows,
                "worker_memory": self.worker_memory}


def shuffle_sizes(client, ddf, sizing: Sizing, leaf_rows: int, n_rows: int,
                  n_qis: int, shuffled_bytes: float | None = None) -> ShuffleSizes:
    """Measure the workers and size the shuffle pass's tasks; refuse what cannot fit.

    ``shuffled_bytes`` is a row's bytes through the shuffles when only keys travel (None: the whole
    row travels, ``sizing.row_bytes``): the output partitions and routed pieces hold that much a
    row; reading an input partition holds all of it.

    Raises
    ------
    dmondrian.errors.MemoryLimitError
        When the workers cannot hold an input partition or a leaf.
    """
    lengths = known_partition_lengths(ddf)
    largest = max(lengths) if lengths else max(sizing.largest_partition, 1)
    mem = measure_workers(client)
    if sizing.measured:
        # A leaf holds at most the whole table, whatever leaf_rows allows.
        check_fits(mem, sizing.row_bytes, n_qis, largest, min(leaf_rows, max(n_rows, 1)),
                   shuffled_bytes)
    per_thread = None if mem is None else mem.per_thread
    moved = sizing.row_bytes if shuffled_bytes is None else shuffled_bytes
    rows = output_partition_rows(leaf_rows, n_rows, ddf.npartitions, per_thread, moved, n_qis)
    piece = input_piece_rows(per_thread, largest, moved, n_qis)
    return ShuffleSizes(rows, 0 if piece >= largest else piece,
                        tuple(lengths) if lengths else (largest,) * ddf.npartitions, mem,
                        max(1, sum(client.nthreads().values())))


def balanced_partitions(counts: np.ndarray, rows: int, threads: int = 1) -> list:
    """Consecutive leaves per output partition, as many partitions as the threads can run in
    whole rounds.

    :func:`~dmondrian._dask.plan.pack_output_partitions` packs up to ``rows`` rows a
    partition; when that leaves a last round of write tasks with idle threads (3 partitions
    on 2 threads, or 1), the same leaves are cut instead into the next multiple of
    ``threads`` partitions (or one a leaf) of about equal rows, where the running total
    passes each share, unless one would then hold more than ``rows`` rows in several leaves.

    Examples
    --------
    >>> balanced_partitions(np.array([5, 4, 3, 2]), 8, threads=1)
    [[0], [1, 2], [3]]
    >>> balanced_partitions(np.array([5, 4, 3, 2]), 8, threads=2)
    [[0], [1], [2], [3]]
    >>> balanced_partitions(np.array([4, 4, 4]), 12, threads=2)
    [[0], [1, 2]]
    >>> balanced_partitions(np.array([9]), 10, threads=2)
    [[0]]
    """
    packed = pack_output_partitions(counts, rows)
    n_leaves, threads = len(counts), max(1, int(threads))
    target = min(n_leaves, -(-len(packed) // threads) * threads)
    if target <= len(packed):
        return packed
    if target == n_leaves:
        return [[i] for i in range(n_leaves)]
    total = np.cumsum(np.asarray(counts, dtype=np.float64))
    shares = total[-1] * np.arange(1, target) / target
    # Cut after the leaf whose running total is nearest each share, each cut past the last.
    after = np.searchsorted(total, shares)
    nearer = (after > 0) & (np.abs(total[np.maximum(after - 1, 0)] - shares)
                           <= np.abs(total[after] - shares))
    cuts = (after + 1 - nearer).tolist()
    if any(b <= a for a, b in zip([0, *cuts], [*cuts, n_leaves], strict=True)):
        return packed
    out = [list(range(a, b)) for a, b in zip([0, *cuts], [*cuts, n_leaves], strict=True)]
    held = [int(np.sum(np.asarray(counts)[p])) for p in out]
    if any(h > rows and len(p) > 1 for h, p in zip(held, out, strict=True)):
        return packed
    return out


def piece_bounds(piece_rows: int, rows: tuple) -> list:
    """``(partition, start, stop)`` of every piece: input partition ``p`` of about
    ``rows[p]`` rows cut in even runs of at most about ``piece_rows`` rows.

    The last piece of a partition runs to its end (``stop`` None), so rows
    counted short (an estimate) are never lost.

    Examples
    --------
    >>> piece_bounds(4, (10, 3))
    [(0, 0, 4), (0, 4, 8), (0, 8, None), (1, 0, None)]
    """
    out = []
    for p, n in enumerate(rows):
        count = max(1, -(-int(n) // int(piece_rows)))
        step = -(-int(n) // count)
        starts = [i * step for i in range(count)]
        out.extend((p, a, b) for a, b in zip(starts, [*starts[1:], None], strict=True))
    return out
