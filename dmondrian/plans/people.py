"""A batch's people per node of a plan, and the regions that hold k of them.

With ``entity=`` a plan counts people, not rows (:mod:`dmondrian.privacy.entities`): a region is
published only if the batch's rows in it, less the regions published below it, hold at least k
*distinct* entities (and, with l or t, its histogram of distinct ``(entity, sensitive value)`` pairs
passes). The rule of :mod:`.release` is otherwise the same: children are decided before their
parent, and a region that fails hands its rows to its parent. What a failing region hands up is its
set of people, not its count: the parent's group is the union of its own people and those of every
failing child, so a person with rows in two short siblings counts once in the parent.

The summary of a batch (:class:`People`) is the set of distinct ``(node, entity[, sensitive code])``
triples its rows make: as large as the distinct pairs, not the rows, and the summaries of parts of a
table merge exactly (:meth:`People.merge`, the entities' values matched, not hashed), so a Dask
table's counts are exact. Without l or t a node keeps at most k of its people (``cap``): a node
holding k people passes whatever else it holds, and a node that fails holds fewer than k, all of
them kept, so the decisions are those of the whole sets, from a summary of at most k people per
node. :func:`people_targets` then works level by level on integer keys: one hash-based deduplication
per level of the pairs that climb into it, no Python set per node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..encoding.distinct_rows import distinct_rows
from ..errors import InfeasibleError, InvalidValueError

__all__ = ["People", "people_of", "people_targets"]


@dataclass
class People:
    """The distinct ``(node, entity[, sensitive code])`` triples of a batch.

    Attributes
    ----------
    node : int64 array (triples,)
    code : int64 array (triples,)
        The entity, as a code into ``uniques``.
    uniques : pandas.Index
        The entities' values.
    value : int64 array (triples,) or None
        The sensitive code (with l or t), else None.
    n_values : int
        Codes of the sensitive column (1 without one).
    cap : int or None
        At most this many people kept per node (the plan's k, without l or t).
    """

    node: np.ndarray
    code: np.ndarray
    uniques: pd.Index
    value: np.ndarray | None
    n_values: int = 1
    cap: int | None = None

    @property
    def n_entities(self) -> int:
        return len(self.uniques)

    def merge(self, other: People) -> People:
        """The triples of both parts of a table (entities matched by value)."""
        both, uniques = pd.factorize(self.uniques.append(other.uniques))
        a = len(self.uniques)
        code = np.concatenate([both[:a][self.code], both[a:][other.code]])
        value = None if self.value is None else np.concatenate([self.value, other.value])
        return _distinct(np.concatenate([self.node, other.node]), code, pd.Index(uniques),
                         value, self.n_values, self.cap)


def people_of(node: np.ndarray, entity: pd.Series, sensitive_codes=None,
              n_values: int = 1, cap: int | None = None) -> People:
    """The :class:`People` of rows landed at ``node`` with entity values ``entity``
    (at most ``cap`` per node, without sensitive codes).

    Raises
    ------
    InvalidValueError
        For a missing entity value (whose rows they are is unknown).

    Examples
    --------
    >>> p = people_of(np.array([3, 3, 4, 3]), pd.Series(["a", "a", "a", "b"]))
    >>> sorted(zip(p.node.tolist(), p.uniques[p.code].tolist()))
    [(3, 'a'), (3, 'b'), (4, 'a')]
    """
    codes, uniques = pd.factorize(entity, use_na_sentinel=True)
    if len(codes) and codes.min() < 0:
        missing = int(np.count_nonzero(codes < 0))
        raise InvalidValueError(entity.name, f"entity column {entity.name!r} has {missing} "
                                             "missing value(s): whose rows they are is "
                                             "unknown; fill or drop them")
    value = None if sensitive_codes is None else np.asarray(sensitive_codes, dtype=np.int64)
    return _distinct(np.asarray(node, dtype=np.int64), codes.astype(np.int64, copy=False),
                     pd.Index(uniques), value, n_values if value is not None else 1,
                     None if value is not None else cap)


def _distinct(node, code, uniques, value, n_values, cap=None) -> People:
    """The distinct triples (pairs without ``value``), in order of first appearance."""
    columns = (node, code) if value is None else (node, code, value)
    distinct, _ = distinct_rows(*columns, first_seen=True, inverse=False)
    if value is None:
        return _capped(*distinct, uniques, cap) if cap is not None else People(
            *distinct, uniques, None, 1)
    return People(distinct[0], distinct[1], uniques, distinct[2], max(int(n_values), 1))


def _capped(node, code, uniques, cap) -> People:
    """The first ``cap`` people of every node, and only the entities they name."""
    order = np.argsort(node, kind="stable")
    sorted_node = node[order]
    first = np.r_[True, sorted_node[1:] != sorted_node[:-1]] if node.size else np.zeros(0, bool)
    starts = np.flatnonzero(first)
    rank = np.arange(node.size) - np.repeat(starts, np.diff(np.r_[starts, node.size]))
    keep = order[rank < cap]
    code, named = pd.factorize(code[keep])
    return People(node[keep], code.astype(np.int64, copy=False), uniques[named], None, 1, cap)


def _stats(node, pair, people: People):
    """Per distinct node of a level: its entities, its pairs' histogram (or None)."""
    ids, nodes = pd.factorize(node)
    n = len(nodes)
    s = people.n_values
    if people.value is None:
        return nodes, ids, np.bincount(ids, minlength=n), None
    e = max(people.n_entities, 1)
    ents = pd.unique(ids * e + pair // s)
    count = np.bincount(ents // e, minlength=n)
    hist = np.bincount(ids * s + pair % s, minlength=n * s).reshape(n, s)
    return nodes, ids, count, hist


def _dedupe(node, pair):
    """The distinct ``(node, pair)`` rows, in order of first appearance."""
    return distinct_rows(node, pair, first_seen=True, inverse=False)[0]


def people_targets(parent: np.ndarray, people: People, passes, depth: np.ndarray,
                   count: np.ndarray | None = None) -> np.ndarray:
    """The node each node's rows are published at, counting distinct people.

    Parameters
    ----------
    parent : int64 array (nodes,)
        Every node's parent, nodes in depth-first order (parents first).
    people : People
        The batch's triples.
    passes : callable
        ``passes(entities, hists)``: whether each group may be published
        (arrays of the groups' distinct entities and pair histograms, or None).
    depth : int64 array (nodes,)
        Every node's depth.
    count : int64 array (nodes,), optional
        Rows landed in each node: a root that fails folds in the published groups with the fewest
        rows first, as the row rule does (default: one row per triple).

    Returns
    -------
    int64 array (nodes,)

    Examples
    --------
    Person ``a`` has rows in both leaves; each leaf alone holds 2 people,
    their union 3, not 4:

    >>> parent = np.array([-1, 0, 0])
    >>> p = people_of(np.array([1, 1, 2, 2]), pd.Series(["a", "b", "a", "c"]))
    >>> people_targets(parent, p, lambda n, h: n >= 3, np.array([0, 1, 1])).tolist()
    [0, 0, 0]
    >>> people_targets(parent, p, lambda n, h: n >= 2, np.array([0, 1, 1])).tolist()
    [0, 1, 2]
    """
    m = parent.shape[0]
    if count is None:
        count = np.bincount(people.node, minlength=m)
    group = count.astype(np.int64).copy()  # rows of every node's group
    pair = people.code if people.value is None else people.code * people.n_values + people.value
    at_depth = depth[people.node]
    order = np.argsort(at_depth, kind="stable")
    top = int(depth.max())
    bounds = np.searchsorted(at_depth[order], np.arange(top + 2))
    dest = np.arange(m, dtype=np.int64)
    kept = np.zeros(m, dtype=bool)
    up_node = up_pair = np.zeros(0, dtype=np.int64)
    settled_node, settled_pair = [], []
    for d in range(top, 0, -1):  # children before parents
        rows = order[bounds[d]:bounds[d + 1]]
        node, pr = people.node[rows], pair[rows]
        if up_node.size:
            node, pr = _dedupe(np.concatenate([node, up_node]), np.concatenate([pr, up_pair]))
        if node.size == 0:
            up_node = up_pair = node
            continue
        nodes, ids, count, hist = _stats(node, pr, people)
        ok = np.asarray(passes(count, hist), dtype=bool)
        kept[nodes[ok]] = True
        dest[nodes[~ok]] = parent[nodes[~ok]]
        np.add.at(group, parent[nodes[~ok]], group[nodes[~ok]])
        climbs = ~ok[ids]
        up_node, up_pair = parent[node[climbs]], pr[climbs]
        settled_node.append(node[~climbs])
        settled_pair.append(pr[~climbs])
    rows = order[bounds[0]:bounds[1]]
    root = np.concatenate([pair[rows], up_pair])
    if root.size:
        kept[0] = True
        _fold_root(root, kept, dest, group, settled_node, settled_pair, people, passes)
    target = np.arange(m, dtype=np.int64)
    for d in range(1, top + 1):  # parents (and the root) are resolved first
        at = np.flatnonzero(depth == d)
        moved = at[dest[at] != at]
        target[moved] = target[dest[moved]]
    return target


def _fold_root(root, kept, dest, group, settled_node, settled_pair, people, passes):
    """Fold the published groups with the fewest rows into the root until it passes."""
    def root_ok(pairs):
        _, _, count, hist = _stats(np.zeros(len(pairs), dtype=np.int64), pairs, people)
        return bool(np.asarray(passes(count, hist))[0]), int(count[0])

    root = pd.unique(root)
    ok, n = root_ok(root)
    if ok:
        return
    node = np.concatenate(settled_node) if settled_node else np.zeros(0, dtype=np.int64)
    pair = np.concatenate(settled_pair) if settled_pair else np.zeros(0, dtype=np.int64)
    order = np.argsort(node, kind="stable")
    node, pair = node[order], pair[order]
    groups, starts = np.unique(node, return_index=True)
    ends = np.r_[starts[1:], len(node)].astype(np.int64) if node.size else starts
    # Smallest first, ties by node: ordered in numpy (a batch publishes tens of
    # thousands of groups, and the root usually needs only a few of them).
    for i in np.lexsort((groups, group[groups])).tolist():
        g, a, b = int(groups[i]), int(starts[i]), int(ends[i])
        kept[g], dest[g] = False, 0
        root = pd.unique(np.concatenate([root, pair[a:b]]))
        ok, n = root_ok(root)
        if ok:
            return
    raise InfeasibleError(f"the batch's {n} distinct entities cannot form one class that meets the "
                          "plan's constraints (fewer than k entities, or too few sensitive values)")
