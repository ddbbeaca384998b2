"""``entity=`` on Dask: k distinct entities in every leaf, decided on exact ids.

Every leaf's people are counted by keeping, per leaf, up to ``k`` distinct entity ids (64-bit hashes
of the values): in a pass of their own after the top phase (:func:`leaf_entities`), or in the
shuffle pass of an uncounted plan (:mod:`.counting_write`). Each routed input partition keeps, per
leaf, ``k`` distinct ids if it has that many, else all of them (:func:`some_per_leaf`); partial
results merge by union, cut again to ``k`` ids.

That is exact for what is asked, "does this region hold at least k entities": a set of ``k``
distinct ids of a region's rows proves it holds ``k`` entities, whichever ids they are, and a set of
fewer is the region's complete set (a union of sets has fewer than ``k`` ids only if every part had,
so every part was complete). So a region is found to hold ``min(k, its entities)`` entities, never
more, and a region's set is the union of its leaves' sets. A partition therefore reads its rows from
the start only until each leaf has ``k`` distinct ids, and the rest only for the leaves short of
them. No estimate ever decides that a region passes: the planner's row samples only guide where the
cuts go. Two entities whose values share a hash (of 64 bits, less the few that pack the leaf) count
as one, which can only make a count smaller (a cut undone, never one allowed too many).

A top-phase cut whose children do not both hold k entities is undone, from
the root down, as the sensitive passes undo theirs; each leaf's local run
then enforces k entities below it (:mod:`dmondrian.privacy.entities`).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..errors import InfeasibleError, InvalidValueError
from ..partition.cut_tree import flatten, leaf_nodes, undo_failing_cuts
from ..partition.routing import route, row_positions
from .cluster import run
from .global_domain import encode_keys
from .graph import column_partitions, constant, tree_reduce

__all__ = ["entity_hashes", "smallest_per_leaf", "some_per_leaf", "merge_smallest",
           "leaf_entities", "keep_entity_cuts", "FIRST_ROWS"]


def entity_hashes(values: pd.Series) -> np.ndarray:
    """64-bit hashes of the entity values; missing values are refused.

    Examples
    --------
    >>> h = entity_hashes(pd.Series(["a", "b", "a"]))
    >>> bool(h[0] == h[2] and h[0] != h[1])
    True
    """
    if values.isna().any():
        raise InvalidValueError(values.name, f"entity column {values.name!r} has missing values: "
                                             "whose rows they are is unknown; fill or drop them")
    return pd.util.hash_pandas_object(values, index=False).to_numpy(dtype=np.uint64)


def smallest_per_leaf(leaf: np.ndarray, ids: np.ndarray, k: int, n_leaves: int | None = None):
    """``(leaf, ids)`` pairs, distinct, at most the ``k`` smallest ids per leaf.

    With ``n_leaves``, the leaf and the id are packed in one 64-bit key and sorted once: the ids
    lose their low ``bits`` (``n_leaves <= 2**bits``), set to 0, the same in every partition of a
    pass. Two ids equal but for those bits count as one, which can only lower a count.

    Examples
    --------
    >>> leaf, ids = smallest_per_leaf(np.array([0, 0, 0, 1, 0]),
    ...                               np.array([9, 3, 3, 5, 7], dtype=np.uint64), 2)
    >>> leaf.tolist(), ids.tolist()
    ([0, 0, 1], [3, 7, 5])
    >>> leaf, ids = smallest_per_leaf(np.array([0, 1, 0]), np.array([9, 3, 3], dtype=np.uint64),
    ...                               5, n_leaves=2)
    >>> leaf.tolist(), ids.tolist()
    ([0, 0, 1], [2, 8, 2])
    """
    if n_leaves is not None and k <= 4096:
        bits = np.uint64(max(1, int(n_leaves - 1).bit_length()))
        key = np.sort((np.asarray(leaf).astype(np.uint64) << (np.uint64(64) - bits))
                      | (np.asarray(ids, dtype=np.uint64) >> bits))
        if len(key):
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        leaf = (key >> (np.uint64(64) - bits)).astype(np.int64)
        if len(leaf) == 0:
            return leaf, key
        # Each leaf's first k keys: the rank is never computed for the others.
        starts = np.flatnonzero(np.concatenate([[True], leaf[1:] != leaf[:-1]]))
        ends = np.append(starts[1:], len(leaf))
        take = starts[:, None] + np.arange(k)
        take = take[take < ends[:, None]]
        return leaf[take], key[take] << bits
    else:
        order = np.lexsort((ids, leaf))
        leaf, ids = leaf[order], ids[order]
        keep = np.ones(len(leaf), dtype=bool)
        keep[1:] = (leaf[1:] != leaf[:-1]) | (ids[1:] != ids[:-1])
        leaf, ids = leaf[keep], ids[keep]
    if len(leaf) == 0:
        return leaf, ids
    starts = np.flatnonzero(np.concatenate([[True], leaf[1:] != leaf[:-1]]))
    rank = np.arange(len(leaf)) - np.repeat(starts, np.diff(np.append(starts, len(leaf))))
    return leaf[rank < k], ids[rank < k]


#: Rows a partition reads first for every leaf's ``k`` ids; only the leaves short
#: of them read further.
FIRST_ROWS = 65_536


def some_per_leaf(leaf: np.ndarray, people: pd.Series, k: int, n_leaves: int):
    """Per leaf, ``k`` distinct ids of its entities, or all of them if it holds fewer.

    The first :data:`FIRST_ROWS` rows are hashed for every leaf; the rest
    only for the leaves with fewer than ``k`` distinct ids among them.

    Examples
    --------
    >>> leaf, ids = some_per_leaf(np.array([0, 0, 1, 0]), pd.Series(["a", "b", "a", "a"]),
    ...                           2, n_leaves=2)
    >>> leaf.tolist(), len(ids), bool(ids[0] != ids[1])
    ([0, 0, 1], 3, True)
    """
    first = min(len(leaf), FIRST_ROWS)
    found = smallest_per_leaf(leaf[:first], entity_hashes(people.iloc[:first]), k, n_leaves)
    if first == len(leaf):
        return found
    short = np.bincount(found[0], minlength=n_leaves) < k
    rest = first + np.flatnonzero(short[leaf[first:]])
    if len(rest) == 0:
        return found
    more = smallest_per_leaf(leaf[rest], entity_hashes(people.iloc[rest]), k, n_leaves)
    return merge_smallest(found, more, k=k)


def _partition_entities(df, partition_number, tree, domain, column, k):
    keys = encode_keys(df, domain)
    leaf = route(keys, tree, row_positions(partition_number, len(df))).astype(np.int64)
    return some_per_leaf(leaf, df[column], k, int(tree.leaf.max()) + 1)


def merge_smallest(*parts, k):
    """Unite ``(leaf, ids)`` partials of :func:`smallest_per_leaf`, ``k`` smallest kept."""
    return smallest_per_leaf(np.concatenate([p[0] for p in parts]),
                             np.concatenate([p[1] for p in parts]), k)


def leaf_entities(client, ddf, opts, domain, nodes, progress) -> dict:
    """``{leaf node id: ids}``: up to ``k`` distinct entity ids of every current leaf."""
    from dask import delayed

    leaves = leaf_nodes(nodes)
    tree = constant(flatten(nodes, leaves), "tree")
    parts = column_partitions(ddf, [*opts.qis, opts.entity])
    one = delayed(_partition_entities, pure=True)
    partials = [one(p, i, tree, domain, opts.entity, opts.k) for i, p in enumerate(parts)]
    leaf, ids = run(client, tree_reduce(partials, functools.partial(merge_smallest, k=opts.k)),
                    progress, "pass: entities per leaf")
    return {j: ids[leaf == slot] for slot, j in enumerate(leaves)}


def keep_entity_cuts(nodes, leaf_ids: dict, k: int) -> None:
    """Undo, from the root down, every cut whose children do not both hold ``k`` entities.

    Raises :class:`~dmondrian.errors.InfeasibleError` when the whole table holds fewer than ``k``.
    """
    def union(a, b):
        return np.union1d(a, b)[:k]

    whole = leaf_ids[0] if nodes[0].cut is None else None
    if whole is None:
        whole = functools.reduce(union, (leaf_ids[j] for j in leaf_nodes(nodes)))
    if len(whole) < k:
        raise InfeasibleError(f"the table holds {len(whole)} distinct entities, fewer than "
                              f"k={k}: no release of it can hold k people per class")
    undo_failing_cuts(nodes, leaf_ids, union, lambda ids: len(ids) >= k)
