"""Applying an uncounted plan: the shuffle pass counts the leaves on the way.

When the domain pass's sample planned the whole tree, the pass that would only count its leaves is
saved: each input partition is routed once, its leaf counts are summed into a
:class:`~.plan.Verdict` that every output partition waits for, and the cuts the exact counts
disallow are undone there. A disallowed cut no output partition can undo alone raises
:class:`~.plan.Recount` before anything is written; the lazy result, which cannot start again, is
only built on a plan where that cannot happen (:func:`cuts_certain`). See docs/design.md, section
"Counting in the shuffle pass".
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ..io.parquet_sink import ParquetSink
from ..partition.cut_tree import CutTree
from ..partition.routing import route
from ..partition.sketch import Summary
from .columns import LEAF, carried
from .entity_pass import merge_smallest, some_per_leaf
from .graph import constant, partitions, sum_arrays, tree_reduce
from .leaves import anonymize_output_partition, lazy_meta, output_meta, write_output_partition
from .plan import Recount, TopPlan, Verdict
from .planner import sizes_allowed
from .shuffle import routed_meta, routed_partitions, routing_input, to_output_partitions

__all__ = ["leaf_counts", "settle", "cuts_certain", "write_parquet_counting",
           "anonymize_counting", "counted_shuffle"]


def leaf_counts(routed: pd.DataFrame, n_leaves: int, entity=None, k: int = 1):
    """Rows of every leaf in one routed input partition; with an ``entity`` column, also up to ``k``
    distinct entity ids of every leaf (:func:`~.entity_pass.some_per_leaf`)."""
    leaf = routed[LEAF].to_numpy(dtype=np.int64)
    counts = np.bincount(leaf, minlength=n_leaves)
    if entity is None:
        return counts
    return counts, some_per_leaf(leaf, routed[entity], k, n_leaves)


def _merge_counts(*parts, k: int):
    """Sum the row counts; unite the entity ids, ``k`` kept per leaf."""
    if not isinstance(parts[0], tuple):
        return sum_arrays(*parts)
    return (sum_arrays(*(p[0] for p in parts)), merge_smallest(*(p[1] for p in parts), k=k))


def _subtrees(tree: CutTree, counts: np.ndarray):
    """Rows below every node of ``tree`` (``counts`` per leaf), and its first and last leaf."""
    m = tree.qi.shape[0]
    sub = np.zeros(m, dtype=np.int64)
    first = np.zeros(m, dtype=np.int64)
    last = np.zeros(m, dtype=np.int64)
    # Children have larger node numbers than their parent (preorder).
    for i in range(m - 1, -1, -1):
        if tree.qi[i] < 0:
            sub[i] = counts[tree.leaf[i]]
            first[i] = last[i] = tree.leaf[i]
        else:
            lt, rt = tree.left[i], tree.right[i]
            sub[i] = sub[lt] + sub[rt]
            first[i], last[i] = first[lt], last[rt]
    return sub, first, last


def settle(counts: np.ndarray, top: TopPlan, oversized_ok: bool = False) -> Verdict:
    """Check every cut of the candidate tree on exact counts.

    A disallowed cut is undone, from the root down; its leaves become one. That is done by the
    output partition holding them, so a disallowed cut whose leaves lie in several partitions, or
    (unless ``oversized_ok``) a partition holding far more rows than planned, raises
    :class:`~.plan.Recount` before anything is written.
    """
    tree, k = top.tree, top.options.k
    people = None
    if isinstance(counts, tuple):
        counts, people = counts[0], _subtree_people(tree, *counts[1], k)
        if len(people[0]) < k:
            # Too few people in the whole table: the counted plan says so.
            raise Recount(f"the table holds fewer than k={k} entities")
    sub, first, last = _subtrees(tree, counts)
    root = np.arange(top.n_leaves, dtype=np.int64)
    depth = top.leaf_depths.copy()
    partition_of = top.partition_of_leaf
    undone, stack = 0, [(0, 0)]
    while stack:
        i, level = stack.pop()
        if tree.qi[i] < 0:
            continue
        lt, rt = tree.left[i], tree.right[i]
        if sizes_allowed(sub[lt], sub[rt], k) and (
                people is None or min(len(people[lt]), len(people[rt])) >= k):
            stack.extend(((lt, level + 1), (rt, level + 1)))
            continue
        if partition_of[first[i]] != partition_of[last[i]]:
            raise Recount(f"a cut with {sub[lt]} | {sub[rt]} rows (or fewer than k={k} "
                          "entities on a side) spans output partitions")
        undone += 1
        root[first[i]:last[i] + 1] = first[i]
        depth[first[i]:last[i] + 1] = level
    per_partition = np.bincount(partition_of, weights=counts, minlength=len(top.output_partitions))
    planned = max(top.output_partition_rows, top.leaf_rows)
    if per_partition.max() > 2 * planned and not oversized_ok:
        raise Recount(f"an output partition holds {int(per_partition.max())} rows, "
                      f"over twice the {planned} planned")
    return Verdict(np.asarray(counts, dtype=np.int64), root, depth, undone)


def _subtree_people(tree: CutTree, leaf: np.ndarray, ids: np.ndarray, k: int) -> list:
    """Up to ``k`` distinct entity ids below every node of ``tree`` (from each leaf's)."""
    m = tree.qi.shape[0]
    out = [None] * m
    for i in range(m - 1, -1, -1):
        if tree.qi[i] < 0:
            out[i] = ids[leaf == tree.leaf[i]]
        else:
            out[i] = np.union1d(out[tree.left[i]], out[tree.right[i]])[:k]
    return out


def cuts_certain(tree: CutTree, partition_of_leaf: np.ndarray, root: Summary, k: int) -> bool:
    """Whether no exact count can undo a cut whose leaves lie in several output partitions.

    The root's sample (the domain pass's) is rows of the table, routed here as the shuffle pass
    routes them: the sample rows below a node are a lower bound of its exact rows. A cut with ``k``
    sample rows on each side is allowed whatever the exact counts, so :func:`settle` can only undo
    cuts inside one output partition, and never raises for a spanning one.

    Parameters
    ----------
    tree : CutTree
        The candidate tree (leaf ``i`` is leaf id ``i``).
    partition_of_leaf : ndarray
        Output partition of every leaf.
    root : Summary
        The whole table's summary, with the domain pass's sample.
    k : int

    Returns
    -------
    bool
    """
    n_leaves = partition_of_leaf.shape[0]
    slot = route(root.sample_keys, tree, root.sample_pos)
    sampled = np.bincount(slot, minlength=n_leaves)
    sub, first, last = _subtrees(tree, sampled)
    for i in np.flatnonzero(tree.qi >= 0):
        spans = partition_of_leaf[first[i]] != partition_of_leaf[last[i]]
        if spans and not sizes_allowed(sub[tree.left[i]], sub[tree.right[i]], k):
            return False
    return True


def counted_shuffle(ddf, top: TopPlan, shuffle_method, oversized_ok: bool = False):
    """Route every input partition once: its leaf counts make the verdict, its rows the shuffle.

    Returns the shuffled output partitions (a dask DataFrame), the verdict
    (delayed) and the plan as a graph constant.
    """
    import dask.dataframe as dd
    from dask import delayed

    plan_d = constant(top, "plan")
    ddf = routing_input(ddf, top)
    # Delayed routed partitions, so that the counts and the shuffle share them.
    routed = routed_partitions(ddf, top, plan_d)
    count = delayed(leaf_counts, pure=True)
    entity, k = top.options.entity, top.options.k
    if entity is not None:
        # The entity column travels under its shipped name.
        _, internal, names = carried(top.options.qis, top.columns, top.travelling)
        entity = internal[names.index(entity)]
    counts = [count(r, top.n_leaves, entity, k) for r in routed]
    totals = tree_reduce(counts, functools.partial(_merge_counts, k=k))
    verdict = delayed(settle, pure=True)(totals, plan_d, oversized_ok)
    # Each routed partition enters the shuffle once its leaves are counted:
    # dask's ordering would otherwise count them all after the last transfer,
    # every routed partition (whole rows) held in the workers' memory until then.
    gate = delayed(_once_counted, pure=True)
    routed = [gate(r, c) for r, c in zip(routed, counts, strict=True)]
    routed_ddf = dd.from_delayed(routed, meta=routed_meta(ddf, top), verify_meta=False)
    shuffled = to_output_partitions(routed_ddf, len(top.output_partitions), shuffle_method,
                                    top.exchange == "keys")
    return shuffled, verdict, plan_d


def _once_counted(routed: pd.DataFrame, counts) -> pd.DataFrame:
    """``routed`` as it is, once ``counts`` (its leaf counts) exist."""
    return routed


def write_parquet_counting(ddf, top: TopPlan, sink: ParquetSink, shuffle_method,
                           oversized_ok: bool = False):
    """Write an uncounted plan: the shuffle pass counts its leaves exactly on the way.

    Each input partition is routed once; its leaf counts are summed (tree reduction) into a verdict
    (:func:`settle`) that every output partition waits for. The counts are complete when the
    shuffle's inputs are, so no output partition waits longer or holds more memory; it then checks
    what it received against the exact counts, as after a counting pass. ``oversized_ok`` (the lazy
    release's writer, which cannot start again) writes a partition holding more rows than planned
    all the same.

    Returns
    -------
    list of dask.delayed.Delayed
        One row-count frame per output partition, then the verdict.
    """
    from dask import delayed

    shuffled, verdict, plan_d = counted_shuffle(ddf, top, shuffle_method, oversized_ok)
    parts = partitions(shuffled)
    sink_d = constant(sink, "sink")
    write = delayed(write_output_partition, pure=True)
    meta = output_meta(ddf._meta, top)
    return [*(write(part, plan_d, sink_d, meta, {"number": p}, verdict)
              for p, part in enumerate(parts)), verdict]


def anonymize_counting(ddf, top: TopPlan, shuffle_method):
    """The lazy result of an uncounted plan whose cuts are certain (:func:`cuts_certain`).

    As :func:`write_parquet_counting`, each output partition anonymized on the verdict of the counts
    taken in the shuffle pass, as a dask DataFrame (:func:`~.leaves.anonymize_output_partition`). A
    partition holding more rows than planned is anonymized all the same: the lazy result has no pass
    to start again.

    Returns
    -------
    dask.dataframe.DataFrame
    """
    shuffled, verdict, plan_d = counted_shuffle(ddf, top, shuffle_method, oversized_ok=True)
    # map_partitions, not delayed tasks: dask fuses each output partition's
    # anonymization with what the caller does next (to_parquet's write).
    return shuffled.map_partitions(anonymize_output_partition, plan_d, output_meta(ddf._meta, top),
                                   verdict=verdict, meta=lazy_meta(ddf._meta, top),
                                   clear_divisions=True)
