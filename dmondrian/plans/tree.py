"""The fitted tree: the cuts of one Mondrian run, read back from its classes.

The kernel returns classes, not cuts: a class is a contiguous run of the class-ordered key matrix,
and its runs are laid out in the order of a depth-first, left-first walk of the cut tree (a split
writes its left child first). Any contiguous run of such classes can be cut in two by one of the
tree's cuts, so the tree is rebuilt top-down: a run of classes is cut at the class boundary nearest
its middle row (the kernel cuts at medians) where one QI separates the two sides: every key on the
left at most every key on the right (equal only for a relaxed cut's median ties, split by input
position as the kernel splits them), or, for a nominal QI, disjoint code sets. Every fitted row then
routes to its own class, and every node is a region holding the classes below it. Each node keeps
the bounds, missing flags, sums and code sets of its fitted rows, from which its label is published.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernel.constants import KIND_FLOAT, KIND_INT, KIND_NOMINAL, KIND_ORDINAL, MISSING_KEY
from ..partition.cut_tree import NO_TIES, CutTree

__all__ = ["PlanTree", "abut_cut_sides", "build_tree", "node_arrays"]


@dataclass
class PlanTree:
    """A fitted cut tree, nodes numbered in depth-first, left-first order (root = 0).

    Attributes
    ----------
    cuts : CutTree
        The routing arrays (:mod:`dmondrian.partition.cut_tree`); ``cuts.leaf[i]``
        is ``i`` for every leaf, so a routed row's leaf is its node id.
    parent : int64 array (nodes,)
        Parent of every node (-1 for the root).
    count : int64 array (nodes,)
        Fitted rows in every node.
    lo, hi : int64 arrays (nodes, QIs)
        Smallest and largest present key of the node's fitted rows
        (``MISSING_KEY`` / ``INT64_MIN`` when all are missing).
    missing : bool array (nodes, QIs)
        Whether the node's fitted rows hold a missing value.
    total : float64 array (nodes, QIs)
        Sum of the present values (numeric kinds), for mean generalization.
    present : int64 array (nodes, QIs)
        Present values.
    codes : dict of int to (int64 array, int64 array)
        For every nominal QI: the sorted ``node * card + code`` of every code
        the node's fitted rows hold, and the QI's code count ``card``.
    """

    cuts: CutTree
    parent: np.ndarray
    count: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray
    total: np.ndarray
    present: np.ndarray
    codes: dict

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def is_leaf(self) -> np.ndarray:
        return self.cuts.qi < 0

    def node_codes(self, j: int, node: int) -> np.ndarray:
        """Codes of nominal QI ``j`` held by ``node``'s fitted rows."""
        packed, card = self.codes[j]
        a, b = np.searchsorted(packed, [node * card, (node + 1) * card])
        return packed[a:b] - node * card


def node_arrays(n: int, d: int) -> tuple:
    """Zeroed ``count, lo, hi, missing, total, present`` of :class:`PlanTree` for ``n``
    nodes and ``d`` QIs."""
    return (np.zeros(n, dtype=np.int64), np.zeros((n, d), dtype=np.int64),
            np.zeros((n, d), dtype=np.int64), np.zeros((n, d), dtype=bool),
            np.zeros((n, d), dtype=np.float64), np.zeros((n, d), dtype=np.int64))


def build_tree(stats, sorted_keys: np.ndarray, class_of_row: np.ndarray, kinds, cards,
               relaxed: bool, trim: int = 1, *, edges=None, trim_inner: bool = False,
               lift_cost: float | None = None) -> PlanTree:
    """Rebuild the cut tree of a partition (see the module docstring).

    Parameters
    ----------
    stats : tuple
        :func:`dmondrian._kernel.class_statistics` of the partition.
    sorted_keys : int64 array (QIs, rows)
        The keys in class order.
    class_of_row : int64 array (rows,)
        Every row's class, in input order.
    kinds, cards : int arrays (QIs,)
        Kernel kind and code count of every QI.
    relaxed : bool
        Whether the partition was relaxed (median ties split by input position).
    trim : int, default 1
        Values a leaf's region keeps: a nominal code, the missing value, and the bounds of an
        ordered QI only as far as values held by at least ``trim`` of its fitted rows (the
        ``trim``-th smallest and largest key). 1 keeps every fitted value (the fitted classes' own
        labels); the root and the inner nodes, which publish only the rows their leaves could not,
        always keep them all. See :func:`dmondrian.plans.sizing.fit_trim`.
    edges : (int64 array, int64 array), optional
        The smallest and largest present key of every QI over the whole fitted
        table, for a tree of one region of it (:mod:`.dask_fit`): a bound is an
        open edge where it meets these. Default: this tree's root's.
    trim_inner : bool, default False
        Trim the inner nodes too (all but the fitted table's root), as plans
        did before leaves alone were trimmed: for measuring the two rules.
    lift_cost : float, optional
        Trim every leaf by cost instead of by ``trim`` alone (:func:`leaf_trims`): each nominal
        QI's, integer QI's and ordinal QI's threshold between 1 and ``2 * trim``, the one that costs
        least when a left-out fitted row costs ``lift_cost``. None: every leaf and QI at ``trim``.

    Returns
    -------
    PlanTree
    """
    class_of_pos, lo_c, hi_c, miss_c, total_c, present_c = stats
    n_classes, d = lo_c.shape
    kinds = np.asarray(kinds, dtype=np.int64)
    sizes = np.bincount(class_of_row, minlength=n_classes).astype(np.int64)
    starts = np.zeros(n_classes + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    nominal = [j for j in range(d) if kinds[j] == KIND_NOMINAL]
    ordered = [j for j in range(d) if kinds[j] != KIND_NOMINAL]
    # A class's largest key (the missing key when it holds one) and smallest.
    top = np.where(miss_c, MISSING_KEY, hi_c)[:, ordered]
    bottom = lo_c[:, ordered]
    held = {}
    for j in nominal:
        m = np.zeros((n_classes, int(cards[j])), dtype=bool)
        m[class_of_pos, sorted_keys[j]] = True
        held[j] = m
    order = np.argsort(class_of_row, kind="stable") if relaxed else None
    builder = _Builder(n_classes, d)
    # Explicit stack of (first class, end class, parent, side); left pushed last.
    stack = [(0, n_classes, -1, 0)]
    while stack:
        a, b, par, side = stack.pop()
        node = builder.add(par, side)
        builder.span[node] = (starts[a], starts[b])
        if b - a == 1:
            builder.leaf(node, a)
            continue
        cut = _find_cut(a, b, starts, top, bottom, ordered, held, sorted_keys, order, relaxed)
        builder.cut(node, cut)
        m = cut[0]
        stack.append((m, b, node, 1))
        stack.append((a, m, node, 0))
    tree = builder.finish(sizes, lo_c, hi_c, miss_c, total_c, present_c, held, cards)
    if trim > 1:
        _trim(tree, builder.span, sorted_keys, kinds, trim, edges, trim_inner, lift_cost)
    return tree


def _trim(tree: PlanTree, span, sorted_keys, kinds, trim: int, edges=None,
          inner: bool = False, lift_cost: float | None = None) -> None:
    """Narrow every leaf to the values ``trim`` of its fitted rows hold.

    Inner nodes keep every value of their fitted rows: a batch row reaches one only when its leaf
    does not hold a value of it (or its leaf fell short of k), and then stops at the nearest
    ancestor that held the value at all instead of climbing to one that held it ``trim`` times
    (measured in benchmarks/README.md, "Fitted plans"). Regions stay nested: a leaf's kept values
    are among its parent's. ``inner``: trim every node but the fitted table's root (the rule
    before). ``lift_cost``: each leaf's nominal, integer and ordinal QIs trimmed at the cheapest
    threshold (:func:`leaf_trims`) instead of ``trim``.
    """
    d = tree.lo.shape[1]
    lo_edge, hi_edge = (tree.lo[0].copy(), tree.hi[0].copy()) if edges is None else edges
    kept = {j: [] for j in tree.codes}
    for node in range(tree.n_nodes):
        s, e = span[node]
        # The fitted table's root keeps every value, even as the only leaf.
        whole = (not (inner or tree.is_leaf[node])) or (node == 0 and edges is None)
        for j in range(d):
            row = sorted_keys[j, s:e]
            by_cost = lift_cost is not None and not whole
            if j in tree.codes:
                card = tree.codes[j][1]
                counts = np.bincount(row, minlength=card)
                at = (1 if whole else nominal_trim(counts, card, trim, lift_cost) if by_cost
                      else trim)
                kept[j].append(node * card + np.flatnonzero(counts >= at))
                continue
            if whole:
                continue
            present = row[row != MISSING_KEY]
            if by_cost and kinds[j] in (KIND_INT, KIND_ORDINAL) and present.size:
                _cost_bounds(tree, node, j, np.sort(present), e - s, trim, lift_cost,
                             lo_edge[j], hi_edge[j], kinds[j] == KIND_INT)
                tree.missing[node, j] = (e - s - present.size) >= trim
                continue
            tree.missing[node, j] = (e - s - present.size) >= trim
            if present.size < trim:
                tree.lo[node, j], tree.hi[node, j] = MISSING_KEY, np.iinfo(np.int64).min
                continue
            # An edge of the fitted domain stays where it is: regions there are open-ended
            # (dmondrian.plans.batch), and a row past a trimmed edge would widen the label.
            edge = kinds[j] in (KIND_INT, KIND_FLOAT)
            if not (edge and tree.lo[node, j] == lo_edge[j]):
                tree.lo[node, j] = np.partition(present, trim - 1)[trim - 1]
            if not (edge and tree.hi[node, j] == hi_edge[j]):
                tree.hi[node, j] = np.partition(present, present.size - trim)[present.size - trim]
    for j, parts in kept.items():
        tree.codes[j] = (np.concatenate(parts).astype(np.int64), tree.codes[j][1])


def nominal_trim(counts: np.ndarray, card: int, trim: int, lift_cost: float) -> int:
    """The threshold a leaf keeps a nominal QI's codes at: the cheapest of 1 to ``2 * trim``.

    A code held by at least the threshold of the leaf's fitted rows stays in its label. Keeping
    ``m`` codes costs each of the leaf's ``n`` fitted rows the set's NCP, ``(m - 1) / (card - 1)``;
    every fitted row whose code is left out costs ``lift_cost`` (the loss of a batch row lifted to
    an ancestor, in QI domains), as batch rows drawn like them will be lifted. Ties go to the lowest
    threshold.

    Examples
    --------
    >>> counts = np.array([70, 3, 2, 1, 1, 1])
    >>> nominal_trim(counts, 6, 4, 1.5), nominal_trim(counts, 40, 4, 1.5)
    (4, 2)
    """
    n = int(counts.sum())
    held = counts[counts > 0]
    at = np.arange(1, 2 * trim + 1)
    keep = held[None, :] >= at[:, None]
    cost = (n * np.maximum(keep.sum(axis=1) - 1, 0) / max(card - 1, 1)
            + lift_cost * np.where(keep, 0, held[None, :]).sum(axis=1))
    return int(at[np.argmin(cost)])


def _cost_bounds(tree, node, j, present, n, trim, lift_cost, lo_edge, hi_edge, edge) -> None:
    """A leaf's bounds of an integer or ordinal QI, each side at its cheapest trim.

    Raising the low bound to the ``t``-th smallest key saves each of the leaf's ``n`` fitted rows
    ``(key - lowest) / range`` of NCP and costs ``lift_cost`` per fitted row below it; the same for
    the high bound, ``t`` from 1 to ``2 * trim`` (at most half the rows). A bound at an open edge of
    the fitted domain (numbers) stays there, as in :func:`_trim`.
    """
    span = max(int(hi_edge) - int(lo_edge), 1)
    t = np.arange(1, min(2 * trim, (present.size + 1) // 2) + 1)
    low = present[t - 1]
    below = np.searchsorted(present, low, side="left")
    if not (edge and tree.lo[node, j] == lo_edge):
        cost = -n * (low - present[0]) / span + lift_cost * below
        tree.lo[node, j] = low[np.argmin(cost)]
    high = present[present.size - t]
    above = present.size - np.searchsorted(present, high, side="right")
    if not (edge and tree.hi[node, j] == hi_edge):
        cost = -n * (present[-1] - high) / span + lift_cost * above
        tree.hi[node, j] = high[np.argmin(cost)]


def _find_cut(a, b, starts, top, bottom, ordered, held, sorted_keys, order, relaxed):
    """The cut of classes ``[a, b)``: ``(boundary class, qi, t, eq, tie_before, ranks)``."""
    rows_left = starts[a + 1:b] - starts[a]
    n = starts[b] - starts[a]
    balance = np.abs(2 * rows_left - n)
    candidates = []  # (balance, boundary offset, qi, tie)
    if ordered:
        left_max = np.maximum.accumulate(top[a:b - 1], axis=0)
        right_min = np.minimum.accumulate(bottom[b - 1:a:-1], axis=0)[::-1]
        ok = left_max < right_min
        if relaxed:
            ok |= left_max == right_min
        for i, q in zip(*np.nonzero(ok), strict=True):
            candidates.append((balance[i], i, ordered[q], bool(left_max[i, q] == right_min[i, q])))
    for j, m in held.items():
        left = np.logical_or.accumulate(m[a:b - 1], axis=0)
        right = np.logical_or.accumulate(m[b - 1:a:-1], axis=0)[::-1]
        shared = (left & right).sum(axis=1)
        for i in np.flatnonzero(shared <= (1 if relaxed else 0)):
            candidates.append((balance[i], i, j, bool(shared[i])))
    candidates.sort(key=lambda c: (c[0], c[1], c[3], c[2]))
    for _, i, q, tie in candidates:
        cut = _make_cut(a, b, a + 1 + i, q, tie, starts, held, sorted_keys, order)
        if cut is not None:
            return cut
    raise RuntimeError("dmondrian: no cut separates these classes; the partition is not a "
                       "Mondrian tree")  # the kernel's classes always have one


def _make_cut(a, b, m, q, tie, starts, held, sorted_keys, order):
    s, mid, e = starts[a], starts[m], starts[b]
    row = sorted_keys[q]
    if q in held:
        left = held[q][a:m].any(axis=0)
        right = held[q][m:b].any(axis=0)
        # Left-only codes rank 0, the shared (tied) code 1, every other code 2.
        ranks = np.full(left.shape[0], 2, dtype=np.int64)
        ranks[left] = 0
        tie_before = NO_TIES
        if tie:
            value = int(np.flatnonzero(left & right)[0])
            ranks[value] = 1
            tie_before = _tie_before(row, order, s, mid, e, value)
            if tie_before is None:
                return None
        return m, q, 0, 1, tie_before, ranks
    left_max = int(np.max(row[s:mid]))
    if not tie:
        return m, q, left_max, 0, NO_TIES, None
    tie_before = _tie_before(row, order, s, mid, e, left_max)
    if tie_before is None:
        return None
    return m, q, left_max - 1, left_max, tie_before, None


def _tie_before(row, order, s, mid, e, value):
    """Smallest input position of a tied right row, if every tied left row comes before it
    (the kernel sends the first tied rows in input order left); else None."""
    left = order[s:mid][row[s:mid] == value]
    right = order[mid:e][row[mid:e] == value]
    if right.size == 0 or (left.size and left.max() >= right.min()):
        return None
    return int(right.min())


class _Builder:
    """Grows the node arrays in depth-first order."""

    def __init__(self, n_classes, d):
        cap = 2 * n_classes - 1
        self.parent = np.full(cap, -1, dtype=np.int64)
        self.qi = np.full(cap, -1, dtype=np.int64)
        self.t = np.zeros(cap, dtype=np.int64)
        self.eq = np.zeros(cap, dtype=np.int64)
        self.tie_before = np.zeros(cap, dtype=np.int64)
        self.rank_off = np.full(cap, -1, dtype=np.int64)
        self.left = np.full(cap, -1, dtype=np.int64)
        self.right = np.full(cap, -1, dtype=np.int64)
        self.cls = np.full(cap, -1, dtype=np.int64)
        self.span = {}  # node -> its positions in class order
        self.ranks = [np.zeros(1, dtype=np.int64)]
        self.rank_len = 1
        self.n = 0

    def add(self, parent, side):
        node = self.n
        self.n += 1
        self.parent[node] = parent
        if parent >= 0:
            (self.left if side == 0 else self.right)[parent] = node
        return node

    def leaf(self, node, cls):
        self.cls[node] = cls

    def cut(self, node, cut):
        _, q, t, eq, tie_before, ranks = cut
        self.qi[node], self.t[node], self.eq[node], self.tie_before[node] = q, t, eq, tie_before
        if ranks is not None:
            self.rank_off[node] = self.rank_len
            self.ranks.append(ranks)
            self.rank_len += ranks.shape[0]

    def finish(self, sizes, lo_c, hi_c, miss_c, total_c, present_c, held, cards) -> PlanTree:
        n = self.n
        leaf = np.where(self.qi[:n] < 0, np.arange(n), -1)
        cuts = CutTree(self.qi[:n].copy(), self.t[:n].copy(), self.eq[:n].copy(),
                       self.tie_before[:n].copy(), self.rank_off[:n].copy(),
                       np.concatenate(self.ranks), self.left[:n].copy(),
                       self.right[:n].copy(), leaf)
        count, lo, hi, missing, total, present = node_arrays(n, lo_c.shape[1])
        member = {j: np.zeros((n, m.shape[1]), dtype=bool) for j, m in held.items()}
        # Children come after their parent: fold them in reverse order.
        for node in range(n - 1, -1, -1):
            c = self.cls[node]
            if c >= 0:
                count[node], lo[node], hi[node] = sizes[c], lo_c[c], hi_c[c]
                missing[node], total[node], present[node] = miss_c[c], total_c[c], present_c[c]
                for j, m in held.items():
                    member[j][node] = m[c]
                continue
            x, y = self.left[node], self.right[node]
            count[node] = count[x] + count[y]
            lo[node] = np.minimum(lo[x], lo[y])
            hi[node] = np.maximum(hi[x], hi[y])
            missing[node] = missing[x] | missing[y]
            # Sums in class order, as the kernel sums a class spanning both.
            total[node] = total[x] + total[y]
            present[node] = present[x] + present[y]
            for m in member.values():
                m[node] = m[x] | m[y]
        codes = {}
        for j, m in member.items():
            card = int(cards[j])
            nodes, code = np.nonzero(m)
            codes[j] = (nodes.astype(np.int64) * card + code, card)
        return PlanTree(cuts, self.parent[:n].copy(), count, lo, hi, missing, total, present, codes)


def abut_cut_sides(tree: PlanTree, encodings) -> None:
    """Stretch every node's bounds of an integer QI to the cuts that enclose it.

    A cut ``v <= t`` of integer QI ``j`` gives the left side's region the bound ``t`` (``eq`` when
    it splits ties) and the right side's ``t + 1``; every node below takes the nearest such cut on
    either side, where it has one (the sides no cut closes keep their fitted bounds, and the edges
    of the fitted domain stay open). Sibling regions' labels then meet, ``[30, 34]`` beside ``[35,
    40]``: a batch's row between two fitted ranges is published at its own region, never at an
    ancestor. Floats and dates have no next value to publish and keep their fitted bounds; so do
    nodes whose fitted rows hold no value of the QI.

    Examples
    --------
    >>> import pandas as pd
    >>> from dmondrian.plans import fit_plan
    >>> df = pd.DataFrame({"age": [20, 21, 22, 23, 30, 31, 32, 33]})
    >>> plan = fit_plan(df, ["age"], k=4)
    >>> plan.tree.lo[1:, 0].tolist(), plan.tree.hi[1:, 0].tolist()
    ([20, 30], [23, 33])
    >>> abut_cut_sides(plan.tree, plan.encodings)
    >>> plan.tree.lo[1:, 0].tolist(), plan.tree.hi[1:, 0].tolist()
    ([20, 24], [23, 33])
    """
    cuts = tree.cuts
    ints = [j for j, qi in enumerate(encodings)
            if qi.spec.whole_steps and qi.kernel_kind == KIND_INT]
    if not ints or tree.n_nodes == 1:
        return
    none_lo, none_hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    low = np.full((tree.n_nodes, tree.lo.shape[1]), none_lo, dtype=np.int64)
    high = np.full((tree.n_nodes, tree.lo.shape[1]), none_hi, dtype=np.int64)
    # Depth-first numbering: a parent's bounds are final before its children's.
    for node in np.flatnonzero(cuts.qi >= 0).tolist():
        j = int(cuts.qi[node])
        a, b = int(cuts.left[node]), int(cuts.right[node])
        low[a], high[a], low[b], high[b] = low[node], high[node], low[node], high[node]
        if j in ints:
            t = int(cuts.t[node])
            high[a, j] = min(high[node, j], t if cuts.tie_before[node] == NO_TIES
                             else int(cuts.eq[node]))
            low[b, j] = max(low[node, j], t + 1)
    for j in ints:
        present = tree.lo[:, j] != MISSING_KEY
        closed = present & (low[:, j] != none_lo)
        tree.lo[closed, j] = np.minimum(tree.lo[closed, j], low[closed, j])
        closed = present & (high[:, j] != none_hi)
        tree.hi[closed, j] = np.maximum(tree.hi[closed, j], high[closed, j])
