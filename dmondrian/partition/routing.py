"""Routing: which leaf a row goes to, and the input positions that decide ties.

Every worker sends each row of its partition down the :class:`~.cut_tree.CutTree` in one compiled
walk. A cut sends a row left when its key (or, for a nominal cut, the key's frequency rank) is ``<=
t``; a relaxed cut also sends left the rows equal to ``eq`` whose input position is before
``tie_before``: the first tied rows in input order, the local kernel's rule. Positions also fix each
row's sampling priority and the order in which a leaf's rows reach the local engine. See
docs/design.md, section "Routing and the cut tree".

Examples
--------
A tree of one cut on QI 0: keys ``<= 4`` go left (leaf 0), and so do the
rows whose key is 5 at input positions before 2, the first two tied rows.

>>> tree = CutTree(qi=np.array([0, -1, -1]), t=np.array([4, 0, 0]), eq=np.array([5, 0, 0]),
...                tie_before=np.array([2, 0, 0]), rank_off=np.array([-1, -1, -1]),
...                ranks=np.zeros(1, dtype=np.int64), left=np.array([1, -1, -1]),
...                right=np.array([2, -1, -1]), leaf=np.array([-1, 0, 1]))
>>> route(np.array([[3, 9, 5, 5]]), tree, row_positions(0, 4)).tolist()
[0, 1, 1, 1]
>>> route(np.array([[5, 5, 3, 9]]), tree, row_positions(0, 4)).tolist()
[0, 0, 0, 1]

Without positions no tied row goes left; each leaf's output partition
comes from the same walk:

>>> leaf, partition = route_to_partitions(np.array([[3, 9, 5]]), tree, None,
...                                       np.array([7, 8]), np.int8)
>>> leaf.tolist(), leaf.dtype.name, partition.tolist()
([0, 1, 1], 'int8', [7, 8, 8])
"""

from __future__ import annotations

import numpy as np

from .._kernel.routing import _priorities, _priorities_below, _route_rows, _stable_by_leaf
from .cut_tree import CutTree

__all__ = ["row_positions", "row_offsets", "row_priority", "sample_below", "leaf_order",
           "route", "route_to_partitions"]

_OFFSET_BITS = np.int64(32)
_OFFSET_MASK = np.int64(0xFFFFFFFF)


def row_positions(partition: int, n: int, rows: np.ndarray | None = None, *,
                  first: int | None = None) -> np.ndarray:
    """A row's input position: of rows ``0..n-1`` of a partition (only of row numbers
    ``rows``, when given). The one definition, for the Dask engine and the plans.

    Without ``first`` (the Dask engine), ``partition * 2**32 + offset``: known without counting the
    rows of the partitions before (each holds fewer than ``2**32`` rows). With ``first``, the row
    number of the partition's first row in the table (a fitted plan: its ties were fitted on row
    numbers, and a counting pass gives ``first``), ``first + offset``. Either increases in input
    order over the whole table: the order in which each leaf's rows reach the local engine, by which
    relaxed cuts split median ties.

    Examples
    --------
    >>> row_positions(0, 3).tolist(), row_positions(2, 2).tolist()
    ([0, 1, 2], [8589934592, 8589934593])
    >>> row_positions(2, 9, np.array([1, 5])).tolist()
    [8589934593, 8589934597]
    >>> row_positions(2, 2, first=7).tolist()
    [7, 8]
    """
    start = int(np.int64(partition) << _OFFSET_BITS) if first is None else int(first)
    if rows is not None:
        return start + np.asarray(rows, dtype=np.int64)
    return np.arange(start, start + n, dtype=np.int64)  # one pass, no temporary


def row_offsets(positions: np.ndarray) -> np.ndarray:
    """Each position's offset in its partition (the row's place in the input partition).

    Examples
    --------
    >>> row_offsets(row_positions(2, 3)).tolist()
    [0, 1, 2]
    """
    return positions & _OFFSET_MASK


def leaf_order(leaf: np.ndarray, positions: np.ndarray, n_leaves: int):
    """Order rows by leaf, then input position; and the leaves present.

    The rows of an output partition reach it in whatever order the shuffle delivers; each leaf must
    reach the local engine in input order so the release does not depend on it.

    Parameters
    ----------
    leaf : int array (n,)
        Leaf id of every row, ``0..n_leaves-1``.
    positions : int64 array (n,)
        Distinct input positions (:func:`row_positions`).
    n_leaves : int
        Number of leaves of the plan.

    Returns
    -------
    order : int64 array (n,)
        Row numbers sorted by (leaf, position).
    ids, starts, counts : int64 arrays
        The leaves present, ascending; where each starts in ``order`` and how many rows it has.

    Examples
    --------
    >>> order, ids, starts, counts = leaf_order(np.array([2, 0, 2, 0]),
    ...                                         np.array([7, 9, 3, 1]), 4)
    >>> order.tolist(), ids.tolist(), starts.tolist(), counts.tolist()
    ([3, 1, 2, 0], [0, 2], [0, 2], [2, 2])
    """
    # The shuffle delivers runs already in position order, which numpy's
    # stable sort (timsort) merges in about linear time; a counting sort by
    # leaf keeps that order. (A lexsort of the two keys would sort from scratch.)
    leaf = np.asarray(leaf, dtype=np.int64)
    if len(leaf) and not (0 <= leaf.min() and leaf.max() < n_leaves):
        raise ValueError(f"leaf ids must lie in 0..{n_leaves - 1}, got {leaf.min()}..{leaf.max()}")
    by_position = np.argsort(np.asarray(positions, dtype=np.int64), kind="stable")
    order, per_leaf = _stable_by_leaf(leaf, by_position, int(n_leaves))
    ids = np.flatnonzero(per_leaf)
    ends = np.cumsum(per_leaf)
    counts = per_leaf[ids]
    return order, ids.astype(np.int64), (ends[ids] - counts).astype(np.int64), counts


def row_priority(partition: int, n: int, seed: int = 0) -> np.ndarray:
    """Deterministic uniform numbers in [0, 1) for rows ``0..n-1`` of a partition.

    A row is in a region's sample when its priority is below the region's
    sampling rate (or among the smallest ones for a fixed-size sample).
    """
    return _priorities(_priority_base(partition, seed), int(n))


def _priority_base(partition: int, seed: int) -> np.uint64:
    return np.uint64((int(partition) << 32) & 0xFFFFFFFFFFFFFFFF) ^ np.uint64(seed)


def sample_below(partition: int, n: int, rate: float, seed: int = 0):
    """The rows of a partition whose :func:`row_priority` is below ``rate``, and their priorities.

    Same as ``np.flatnonzero(row_priority(partition, n, seed) < rate)`` and
    those priorities, without the array of every row's priority.

    Examples
    --------
    >>> take, prio = sample_below(3, 1000, 0.1, seed=1)
    >>> all_prio = row_priority(3, 1000, seed=1)
    >>> bool((take == np.flatnonzero(all_prio < 0.1)).all() and (prio == all_prio[take]).all())
    True
    """
    return _priorities_below(_priority_base(partition, seed), int(n), float(rate))


def route(keys: np.ndarray, tree: CutTree, positions: np.ndarray | None = None) -> np.ndarray:
    """Leaf slot of every row (columns of ``keys``).

    ``positions`` are the rows' :func:`row_positions`; without them no tied
    row goes left (enough for a tree without :attr:`CutTree.has_ties`, whose
    walk skips them anyway). See the module's examples.
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    leaf = np.empty(keys.shape[1], dtype=np.int64)
    _route(keys, tree, positions, leaf, np.zeros(0, np.int64), np.zeros(0, np.int64))
    return leaf


def route_to_partitions(keys: np.ndarray, tree: CutTree, positions: np.ndarray | None,
                        partition_of_leaf: np.ndarray, leaf_dtype) -> tuple[np.ndarray, np.ndarray]:
    """:func:`route`, and each row's output partition, in the same walk (see the module's examples).

    Parameters
    ----------
    keys, tree, positions
        As for :func:`route`.
    partition_of_leaf : int array (n_leaves,)
        Output partition of every leaf.
    leaf_dtype : numpy dtype
        Integer type of the returned leaf ids (narrow: they travel through the shuffle).

    Returns
    -------
    leaf : array of ``leaf_dtype`` (n,)
        ``route(keys, tree, positions)``.
    partition : int64 array (n,)
        ``partition_of_leaf[leaf]``.
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    leaf = np.empty(keys.shape[1], dtype=leaf_dtype)
    partition = np.empty(keys.shape[1], dtype=np.int64)
    _route(keys, tree, positions, leaf, partition,
           np.ascontiguousarray(partition_of_leaf, dtype=np.int64))
    return leaf, partition


def _route(keys, tree: CutTree, positions, out_leaf, out_partition, partition_of_leaf) -> None:
    use_tie = positions is not None and tree.has_ties
    pos = np.ascontiguousarray(positions, dtype=np.int64) if use_tie else np.zeros(1, np.int64)
    _route_rows(keys, tree, pos, use_tie, out_leaf, out_partition, partition_of_leaf)
