"""The shuffle pass's sizes, fixed when the plan is made, on the workers' memory then.

The top phase has run: the workers hold what a working worker holds (the engine's libraries, Arrow's
and Python's memory after real tasks), so they are measured again, checked against the smallest plan
with the row size measured on data, and the output partitions and input pieces sized from what
remains. See docs/design.md, section "Sizes and limits".
"""

from __future__ import annotations

from dataclasses import dataclass

from .._compat import known_partition_lengths
from .memory import WorkerMemory, check_fits, input_piece_rows, measure_workers
from .options import Sizing, output_partition_rows

__all__ = ["ShuffleSizes", "shuffle_sizes", "piece_bounds"]


@dataclass(frozen=True)
class ShuffleSizes:
    """Rows of an output partition and of an input piece (0: whole partitions)."""

    output_partition_rows: int
    input_piece_rows: int
    #: Rows of every input partition: exact when dask knows them, else the largest's.
    input_rows: tuple
    worker_memory: WorkerMemory | None

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
                        tuple(lengths) if lengths else (largest,) * ddf.npartitions, mem)


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
