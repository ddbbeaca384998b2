"""``entity=`` on Dask: k distinct entities in every leaf, decided on exact ids.

After the top phase (and the sensitive passes), one pass reads the QIs and
the entity column, routes every row to its leaf, and keeps, per leaf, up to
``k`` distinct entity ids (64-bit hashes of the values, the smallest ones).
Partial results merge by union, again truncated to the ``k`` smallest.

The truncation is exact for what is asked, "does this region hold at least
k entities": a union of sets each cut to its k smallest ids has k ids as
soon as the whole union has, and is the whole union otherwise; so a region
is found to hold ``min(k, its entities)`` entities, never more, and a
region's set is the union of its leaves' sets. No estimate ever decides
that a region passes: the planner's row samples only guide where the cuts
go. Two entities whose values share a 64-bit hash count as one, which can
only make a count smaller (a cut undone, never one allowed too many).

A top-phase cut whose children do not both hold k entities is undone, from
the root down, as the sensitive passes undo theirs; each leaf's local run
then enforces k entities below it (:mod:`dmondrian.entities`).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..errors import InfeasibleError, InvalidValueError
from .cluster import run
from .cut_tree import flatten, leaf_nodes, undo_failing_cuts
from .global_domain import encode_keys
from .graph import column_partitions, constant, tree_reduce
from .routing import route, row_positions

__all__ = ["entity_hashes", "smallest_per_leaf", "merge_smallest", "leaf_entities",
           "keep_entity_cuts"]


def entity_hashes(values: pd.Series) -> np.ndarray:
    """64-bit hashes of the entity values; missing values are refused.

    Examples
    --------
    >>> h = entity_hashes(pd.Series(["a", "b", "a"]))
    >>> bool(h[0] == h[2] and h[0] != h[1])
    True
    """
    if values.isna().any():
        raise InvalidValueError(values.name, f"entity column {values.name!r} has missing "
                                             "values: whose rows they are is unknown; fill or "
                                             "drop them")
    return pd.util.hash_pandas_object(values, index=False).to_numpy(dtype=np.uint64)


def smallest_per_leaf(leaf: np.ndarray, ids: np.ndarray, k: int):
    """``(leaf, ids)`` pairs, distinct, at most the ``k`` smallest ids per leaf.

    Examples
    --------
    >>> leaf, ids = smallest_per_leaf(np.array([0, 0, 0, 1, 0]),
    ...                               np.array([9, 3, 3, 5, 7], dtype=np.uint64), 2)
    >>> leaf.tolist(), ids.tolist()
    ([0, 0, 1], [3, 7, 5])
    """
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


def _partition_entities(df, partition_number, tree, domain, column, k):
    keys = encode_keys(df, domain)
    leaf = route(keys, tree, row_positions(partition_number, len(df))).astype(np.int64)
    return smallest_per_leaf(leaf, entity_hashes(df[column]), k)


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

    Raises :class:`~dmondrian.errors.InfeasibleError` when the whole table
    holds fewer than ``k``.
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
