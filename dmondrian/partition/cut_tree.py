"""The cut tree: the cuts the client decided, as nodes while it plans, as flat arrays to route.

The top phase grows a list of :class:`Node` (each a region of the table, cut or not) pass by pass;
:func:`flatten` turns the part reachable from the root into a :class:`CutTree`, the arrays every
worker walks to send a row to its leaf (:func:`.routing.route`). See docs/design.md, section
"Routing and the cut tree".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .sketch import Summary

__all__ = ["NO_TIES", "ALL_TIES", "Cut", "CutTree", "Node", "leaf_nodes", "preorder", "flatten",
           "subtree_count", "undo_failing_cuts"]

#: ``tie_before`` of a cut that sends no tied row left (strict cuts).
NO_TIES = 0
#: ``tie_before`` of a cut that sends every tied row left.
ALL_TIES = np.iinfo(np.int64).max


@dataclass
class Cut:
    """One cut: a row goes left when ``v <= t`` or (``v == eq`` and position < ``tie_before``).

    A row's position is its input position (:func:`dmondrian.partition.routing.row_positions`);
    ``tie_before`` is :data:`NO_TIES` for strict cuts.

    ``v`` is the row's key of QI ``qi``, or ``ranks[key]`` for a nominal cut.
    ``n_left`` is the (estimated, or exact) number of rows going left.
    """

    qi: int
    t: int
    eq: int
    tie_before: int
    ranks: np.ndarray | None
    n_left: float


@dataclass
class CutTree:
    """Cuts decided by the client, as flat arrays indexed by node (root = 0).

    ``qi[i] < 0`` marks a leaf; ``leaf[i]`` is then its slot in the pass's region numbering. For an
    internal node a row goes left when ``v <= t[i]`` or (``v == eq[i]`` and its input position ``<
    tie_before[i]``), where ``v`` is the key of QI ``qi[i]``, or ``ranks[rank_off[i] + key]`` when
    ``rank_off[i] >= 0`` (nominal cuts in frequency order). ``tie_before`` is :data:`NO_TIES` for
    strict cuts.
    """

    qi: np.ndarray
    t: np.ndarray
    eq: np.ndarray
    tie_before: np.ndarray
    rank_off: np.ndarray
    ranks: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf: np.ndarray

    @property
    def has_ties(self) -> bool:
        """Whether some cut splits its ties (routing then needs the rows' positions)."""
        return bool((self.tie_before > NO_TIES).any())


@dataclass
class Node:
    """A region of the client's tree: its size, what a pass told about it, its cut.

    ``fresh`` marks a candidate the next pass must count; ``banned`` lists the QIs whose cut the
    exact counts undid here; ``done`` a region no allowed cut divides.
    """

    depth: int
    n: float
    summary: Summary | None = None
    cut: Cut | None = None
    left: int = -1
    right: int = -1
    banned: set = field(default_factory=set)
    fresh: bool = False
    done: bool = False


def leaf_nodes(nodes, i=0, out=None) -> list:
    """Leaf node ids below node ``i`` in depth-first, left-first order (the leaf order)."""
    out = [] if out is None else out
    stack = [i]
    while stack:
        j = stack.pop()
        if nodes[j].cut is None:
            out.append(j)
        else:
            stack.append(nodes[j].right)
            stack.append(nodes[j].left)
    return out


def preorder(nodes) -> list:
    """Node ids reachable from the root, each before its children, left first."""
    order, stack = [], [0]
    while stack:
        j = stack.pop()
        order.append(j)
        if nodes[j].cut is not None:
            stack.append(nodes[j].right)
            stack.append(nodes[j].left)
    return order


def flatten(nodes, leaves) -> CutTree:
    """Flat arrays of the tree reachable from the root; leaves numbered as ``leaves``."""
    order = preorder(nodes)
    index = {j: pos for pos, j in enumerate(order)}
    m = len(order)
    qi = np.full(m, -1, dtype=np.int64)
    t = np.zeros(m, dtype=np.int64)
    eq = np.zeros(m, dtype=np.int64)
    tie_before = np.zeros(m, dtype=np.int64)
    rank_off = np.full(m, -1, dtype=np.int64)
    left = np.full(m, -1, dtype=np.int64)
    right = np.full(m, -1, dtype=np.int64)
    leaf = np.full(m, -1, dtype=np.int64)
    ranks, offset = [np.zeros(1, dtype=np.int64)], 1
    slot = {j: s for s, j in enumerate(leaves)}
    for pos, j in enumerate(order):
        c = nodes[j].cut
        if c is None:
            leaf[pos] = slot[j]
            continue
        qi[pos], t[pos], eq[pos], tie_before[pos] = c.qi, c.t, c.eq, c.tie_before
        if c.ranks is not None:
            rank_off[pos] = offset
            ranks.append(c.ranks)
            offset += c.ranks.shape[0]
        left[pos], right[pos] = index[nodes[j].left], index[nodes[j].right]
    return CutTree(qi, t, eq, tie_before, rank_off, np.concatenate(ranks), left, right, leaf)


def subtree_count(nodes, i) -> float:
    """Rows of the leaves below node ``i``."""
    nd = nodes[i]
    if nd.cut is None:
        return nd.n
    return subtree_count(nodes, nd.left) + subtree_count(nodes, nd.right)


def undo_failing_cuts(nodes, leaf_values: dict, combine, passes) -> None:
    """Undo, from the root down, every cut whose children do not both pass.

    ``leaf_values`` holds a value per current leaf (exact counts of some kind); a node's value is
    ``combine`` of its children's, and a cut stays only if ``passes`` holds for both children's
    values. A node whose cut is undone becomes a leaf with its combined value. The root passes
    (checked on the whole table first), so every remaining leaf passes. With ``combine=None``,
    ``leaf_values`` holds every node's own value (values that do not combine, such as distinct
    pairs).
    """
    def value(j):
        if nodes[j].cut is None or combine is None:
            return leaf_values[j]
        return combine(value(nodes[j].left), value(nodes[j].right))

    stack = [0]
    while stack:
        j = stack.pop()
        nd = nodes[j]
        if nd.cut is None:
            continue
        left, right = value(nd.left), value(nd.right)
        if passes(left) and passes(right):
            stack.extend((nd.left, nd.right))
            continue
        if combine is not None:
            leaf_values[j] = combine(left, right)
        nd.n = subtree_count(nodes, j)
        nd.cut, nd.left, nd.right = None, -1, -1
