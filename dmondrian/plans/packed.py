"""The fitted cut tree and nodes as the compiled pass reads them
(:func:`dmondrian._kernel.lift.place_rows`): records renumbered a cache line at a
time, packed into cache lines, made once per plan (:func:`lift_tables`).
"""

from __future__ import annotations

import numpy as np

from .._kernel.constants import INT_MIN, MISSING_KEY
from .._kernel.lift import line_order

__all__ = ["MEMBER_BYTES", "lift_tables", "narrow_tree", "packed_tree"]

_NO_COUNTS = np.zeros(0, dtype=np.int64)

#: Largest table of nodes' records (bounds, flags and nominal codes) the compiled lift
#: reads (bytes).
MEMBER_BYTES = 256 << 20

#: Bytes of a node's record before its flags: its number in the plan, its parent's record.
REC_HEAD = 8


def packed_tree(cuts):
    """The cut tree as the compiled walk reads it (:func:`dmondrian._kernel.lift.place_rows`).

    Nodes are renumbered a cache line at a time, siblings side by side (a node's right child is the
    one after its left): the root, then each line four sibling pairs from the top of one subtree, a
    pair, its nodes' children and a grandchild's (:func:`dmondrian._kernel.lift.line_order`), so
    that a row reads a line every two levels or so where breadth-first order put every level on
    another line; the lines are filled top-down, so the top levels, which every row visits, still
    sit together. Each node is a 16-byte record: ``t``, then the left child and ``qi | (rank_off +
    1) << 8`` as int32 halves; a leaf is its own left child and sends every row left.

    Returns
    -------
    tuple or None
        ``(steps, eq, tie_before, ranks, height, order)``: the records as int64 pairs, the ties'
        arrays and the ranks, the levels below the root, and the plan's node number of each record.
        None when a record cannot hold the tree (more than 256 QIs, or nominal ranks past 2**23).
    """
    qi, left, right = cuts.qi, cuts.left, cuts.right
    m = qi.shape[0]
    if qi.max(initial=0) > 255 or cuts.ranks.shape[0] >= (1 << 23) or m >= (1 << 31) - 1:
        return None
    order, height = line_order(qi, left, right, LINE_PAIRS)
    if order.size != m:
        raise ValueError("the cut tree has nodes its root does not reach")
    new_id = np.empty(m, dtype=np.int64)
    new_id[order] = np.arange(m, dtype=np.int64)
    steps = _after_line_start(m, 16).view(np.int64)
    words = steps.view(np.int32)  # columns 2 and 3: the records' int32 fields
    is_leaf = qi[order] < 0
    steps[:, 0] = np.where(is_leaf, MISSING_KEY, cuts.t[order])
    words[:, 2] = np.where(is_leaf, np.arange(m), new_id[np.maximum(left[order], 0)])
    words[:, 3] = np.where(is_leaf, 0, qi[order] | ((cuts.rank_off[order] + 1) << 8))
    # Strict cuts never split ties: their arrays are not read (nor shipped to workers).
    ties = cuts.has_ties
    return (steps, np.ascontiguousarray(cuts.eq[order] if ties else _NO_COUNTS, dtype=np.int64),
            np.ascontiguousarray(cuts.tie_before[order] if ties else _NO_COUNTS, dtype=np.int64),
            np.ascontiguousarray(cuts.ranks, dtype=np.int64), height, order)


#: Sibling pairs of 8-byte records in a cache line (:func:`packed_tree`).
LINE_PAIRS = 4


#: Nodes the narrow walk's records can number (a left child in 24 bits of an int32).
_NARROW_NODES = 1 << 23

_NO_NARROW = (np.zeros((0, 2), dtype=np.int32), np.zeros(0, dtype=np.uint8),
              np.zeros(0, dtype=np.int64))


def narrow_tree(steps: np.ndarray, ranks: np.ndarray, d: int) -> tuple:
    """:func:`packed_tree`'s records as 8-byte ones, when the plan's cut values fit.

    A record is ``a``, then ``left << 8 | nominal << 7 | qi`` (int32 each). An ordered cut's value
    becomes ``a = (t - base) // unit``, ``base`` the smallest cut value of its QI and ``unit`` the
    greatest common divisor of their distances from it (a day, for dates cut at midnight), so that
    the compiled walk compares a row's key narrowed once to ``ceil((key - base) / unit)``; a nominal
    cut's ``a`` is where its bits start in ``rbit``, which says for every code whether the cut sends
    it right. A leaf's ``a`` is the largest int32, above every narrowed key.

    Returns
    -------
    tuple
        ``(narrow, rbit, conv)``: the records as an int32 ``(nodes, 2)`` array, the bits, and
        ``base, unit, top`` of every QI (unit 0 for a nominal one, whose codes are compared as they
        are); empty arrays when a record cannot hold the tree (too many nodes or QIs, a cut value
        past 32 bits of its QI's unit, nominal cuts at different values).
    """
    m = steps.shape[0]
    words = steps.view(np.int32)
    t = steps[:, 0]
    left = words[:, 2].astype(np.int64)
    meta = words[:, 3].astype(np.int64)
    qi, rank_at = meta & 255, (meta >> 8) - 1
    leaf = left == np.arange(m)
    nominal = ~leaf & (rank_at >= 0)
    ordered = ~leaf & ~nominal
    if m >= _NARROW_NODES or d > 127 or ranks.shape[0] >= 1 << 31:
        return _NO_NARROW
    nominal_t = np.unique(t[nominal])
    nominal_qis = np.unique(qi[nominal])
    if nominal_t.size > 1 or np.isin(qi[ordered], nominal_qis).any():
        return _NO_NARROW
    rbit = (ranks > (nominal_t[0] if nominal_t.size else 0)).astype(np.uint8)
    conv = np.zeros((d, 3), dtype=np.int64)
    conv[:, 1] = 1
    conv[nominal_qis, 1] = 0
    a = np.where(nominal, rank_at, np.iinfo(np.int32).max)
    for j in np.unique(qi[ordered]).tolist():
        cut = ordered & (qi == j)
        values = t[cut]
        base, top = int(values.min()), int(values.max())
        if top - base >= 1 << 62:
            return _NO_NARROW
        unit = max(int(np.gcd.reduce(values - base)), 1)
        if (top - base) // unit > _NARROW_MAX - 2:  # top + 1 stays below a leaf's value
            return _NO_NARROW
        conv[j] = base, unit, (top - base) // unit
        a[cut] = (values - base) // unit
    records = _after_line_start(m, 8).view(np.int32)
    records[:, 0] = a
    records[:, 1] = (left << 8) | (nominal.astype(np.int64) << 7) | np.where(leaf, 0, qi)
    return records, rbit, conv.ravel()


def _after_line_start(m: int, width: int) -> np.ndarray:
    """A zeroed uint8 ``(m, width)`` array whose second row starts a 64-byte line, so
    that the sibling pairs after the root (:func:`packed_tree`) fill whole lines."""
    flat = np.zeros(m * width + 64, dtype=np.uint8)
    skip = (64 - width - flat.ctypes.data) % 64
    return flat[skip:skip + m * width].reshape(m, width)


def _aligned_records(m: int, width: int) -> np.ndarray:
    """A zeroed uint8 ``(m, width)`` array whose rows start on 64-byte lines and are
    whole lines apart, so a record of up to 64 bytes is one cache line."""
    stride = -(-width // 64) * 64
    flat = np.zeros(m * stride + 64, dtype=np.uint8)
    skip = -flat.ctypes.data % 64
    return flat[skip:skip + m * stride].reshape(m, stride)[:, :width]


#: Largest offset of a bound from its QI's base, in its unit, kept as an int32.
_NARROW_MAX = np.iinfo(np.int32).max - 1


def _narrow_bounds(lo: np.ndarray, hi: np.ndarray, flags: np.ndarray):
    """Every ordered QI's bounds as int32 offsets: ``(base_and_unit, lo32, hi32)``, or
    None when some bound does not fit.

    A bound is ``base + unit * offset``: ``base`` the QI's smallest bound, ``unit`` the greatest
    common divisor of the bounds' distances from it (a day, for dates fitted at midnight). A node
    holding no value of the QI (bounds ``MISSING_KEY``, ``INT64_MIN``) gets the empty range ``[base
    + unit, base]``: nothing lies inside it, and the open edges decide alone, as they do for the
    int64 bounds, when both or neither are open (a node with one open edge and no value keeps the
    int64 bounds).
    """
    m, q = lo.shape
    out = np.zeros((2, q), dtype=np.int64)
    lo32, hi32 = np.empty((m, q), dtype=np.int32), np.empty((m, q), dtype=np.int32)
    for c in range(q):
        empty = (lo[:, c] == MISSING_KEY) & (hi[:, c] == INT_MIN)
        one_edge = ((flags[:, c] & 2) != 0) != ((flags[:, c] & 4) != 0)
        if (empty & one_edge).any():
            return None
        a, b = lo[~empty, c], hi[~empty, c]
        if ((a == MISSING_KEY) | (b == INT_MIN)).any():
            return None
        base = int(min(a.min(), b.min())) if a.size else 0
        top = int(max(a.max(), b.max())) if a.size else 0
        if top - base >= 1 << 62:
            return None
        dist = np.concatenate([a, b]) - base
        unit = max(int(np.gcd.reduce(dist)) if dist.size else 1, 1)
        if (top - base) // unit > _NARROW_MAX:
            return None
        out[:, c] = base, unit
        lo32[:, c] = np.where(empty, 1, (lo[:, c] - base) // unit)
        hi32[:, c] = np.where(empty, 0, (hi[:, c] - base) // unit)
    return out, lo32, hi32


def lift_tables(plan):
    """The arrays :func:`dmondrian._kernel.lift.place_rows` reads, in :func:`packed_tree`'s
    order (None: the records would exceed :data:`MEMBER_BYTES`, or the tree does not fit
    :func:`packed_tree`'s records; rows are then routed and lifted apart, the lift in numpy).

    Returns
    -------
    tuple or None
        ``(steps, eq, tie_before, ranks, height, narrow, rbit, conv, rec, slot,
        scale)``: see :func:`packed_tree`, :func:`narrow_tree` (for a plan whose
        cuts split no ties) and :func:`~dmondrian._kernel.lift.place_rows`.
    """
    tree = plan.tree
    m, d = tree.lo.shape
    packed = packed_tree(tree.cuts)
    if packed is None:
        return None
    steps, eq, tie_before, ranks, height, order = packed
    slot = np.zeros(d, dtype=np.int32)
    ordered = [j for j in range(d) if j not in tree.codes]
    total = 0
    for j, (_, card) in sorted(tree.codes.items()):
        slot[j] = -1 - total
        total += card
    new_id = np.empty(m, dtype=np.int64)
    new_id[order] = np.arange(m, dtype=np.int64)
    edge = np.asarray([qi.spec.open_edges for qi in plan.encodings], dtype=bool)
    flags = (tree.missing * 1 + ((tree.lo == tree.lo[0]) & edge) * 2
             + ((tree.hi == tree.hi[0]) & edge) * 4)[order].astype(np.uint8)
    lo, hi = tree.lo[order][:, ordered], tree.hi[order][:, ordered]
    # One record per node, everything the lift reads of it side by side: the
    # bounds as int32 offsets when they fit, so most plans' records are one
    # cache line (a row's lift then waits on one line, not two).
    narrow = _narrow_bounds(lo, hi, flags[:, ordered]) if ordered else None
    width = 4 if narrow is not None else 8
    head = REC_HEAD + d + total
    at = -(-head // 8) * 8
    size = at + 2 * width * len(ordered)
    if m * -(-size // 64) * 64 > MEMBER_BYTES:
        return None
    rec = _aligned_records(m, size)
    rec[:, 0:4] = order.astype(np.int32).view(np.uint8).reshape(m, 4)
    parent = np.where(order == 0, -1, new_id[np.maximum(tree.parent[order], 0)])
    rec[:, 4:8] = parent.astype(np.int32).view(np.uint8).reshape(m, 4)
    rec[:, REC_HEAD:REC_HEAD + d] = flags
    for j, (codes, card) in tree.codes.items():
        rec[new_id[codes // card], REC_HEAD + d - 1 - slot[j] + codes % card] = 1
    pairs = np.empty((m, 2 * len(ordered)), dtype=np.int32 if narrow else np.int64)
    scale = np.zeros(2 * d, dtype=np.int64) if narrow else _NO_COUNTS
    if narrow is not None:
        base_unit, lo, hi = narrow
        scale[0::2][ordered], scale[1::2][ordered] = base_unit
    pairs[:, 0::2], pairs[:, 1::2] = lo, hi
    rec[:, at:size] = pairs.view(np.uint8)
    slot[ordered] = at + 2 * width * np.arange(len(ordered), dtype=np.int32)
    narrow = _NO_NARROW if tree.cuts.has_ties else narrow_tree(steps, ranks, d)
    return (steps, eq, tie_before, ranks, height, *narrow, rec, slot, scale)
