"""Pieces of the task graphs every pass shares: reductions, constants, column partitions.

See docs/design.md, section "Passes".
"""

from __future__ import annotations

import uuid

import numpy as np

__all__ = ["SPLIT_EVERY", "tree_reduce", "constant", "partitions", "column_partitions",
           "sum_arrays"]

#: Fan-in of a tree reduction: the client receives one merged result, never a
#: partial per input partition.
SPLIT_EVERY = 8


def tree_reduce(items, merge):
    """Merge delayed partials in a tree of fan-in :data:`SPLIT_EVERY`."""
    from dask import delayed

    merge_d = delayed(merge, pure=True)
    while len(items) > 1:
        items = [merge_d(*items[i:i + SPLIT_EVERY]) for i in range(0, len(items), SPLIT_EVERY)]
    return items[0]


def constant(value, what: str):
    """``value`` as one node of the graph, under a fresh name (``dmondrian-<what>-<uuid>``).

    Every task reads the one copy instead of dask traversing, hashing or
    copying the object (a plan, a cut tree, a sink) into each task.
    """
    from dask import delayed

    return delayed(value, traverse=False, name=f"dmondrian-{what}-{uuid.uuid4().hex}")


def partitions(frame) -> list:
    """One delayed frame per partition of ``frame``, the input's partitions as they are.

    The one fusion policy of every pass, of the engine and of the plans alike: Dask's tuning is off,
    so a projected read (under a filter, say) is never fused into fewer partitions. Every pass then
    sees the same partitions, numbered alike, whatever columns it reads: a row's input position
    (:func:`~dmondrian.partition.routing.row_positions`), the keys exchange's way back to its input
    partition and a plan's kept nodes all pair up.
    """
    import dask

    with dask.config.set({"optimization.tune.active": False}):
        return frame.to_delayed(optimize_graph=True)


def column_partitions(ddf, columns) -> list:
    """One delayed frame of ``columns`` per partition (:func:`partitions`): a pass reads only those.

    All the columns, in whatever order, are the partitions as they are: a projection that only
    reorders is not pushed into the read, and costs a copy of every partition.
    """
    columns = list(dict.fromkeys(columns))
    if len(columns) == len(ddf.columns) and set(columns) == set(ddf.columns):
        return partitions(ddf)
    return partitions(ddf[columns])


def sum_arrays(*parts) -> np.ndarray:
    """The element-wise sum of arrays of one shape (a reduction's merge)."""
    return np.sum(parts, axis=0)
