"""The numba kernel of the local Mondrian engine.

The table arrives as a ``(d, n)`` matrix of order-preserving int64 *keys* (one
row per quasi-identifier, see :mod:`dmondrian.qi`) and the kernel returns, for
every row, the id of its equivalence class. It never looks at labels or
dtypes: everything kind-specific it needs is a small integer code per QI and a
few flat arrays (global scales, hierarchy trees).

How it stays fast
-----------------
* The data of a node is a contiguous segment ``[s, e)`` of the key matrix. A
  split writes the two children, left then right, into the *other* of two
  buffers (a kd-tree build), so every pass is sequential and a subtree that
  fits in cache is finished in cache.
* The median comes from ``np.partition`` (introselect, O(n)), never a sort.
* A node's position range never changes once it exists, so independent
  subtrees are processed in parallel (``prange``) and the result does not
  depend on thread scheduling: class ids come from a prefix sum over
  "a class starts here" flags in position order.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

# Kinds of quasi-identifier the kernel distinguishes.
KIND_INT = 0  # int64 keys whose value is the number itself (ints, datetimes)
KIND_FLOAT = 1  # int64 keys holding order-preserving float64 bits
KIND_ORDINAL = 2  # category codes in category order
KIND_NOMINAL = 3  # category codes without order; cut by frequency order per node
KIND_HIERARCHY = 4  # DFS leaf codes of a generalization tree

MISSING_KEY = np.iinfo(np.int64).max
_FLIP = np.int64(0x7FFFFFFFFFFFFFFF)

# How many nodes the breadth-first top phase makes before handing whole
# subtrees to threads: enough that two cores stay busy when subtrees differ in
# size, few enough that the top phase's per-level overhead stays negligible.
_PARALLEL_FRONTIER = 64


@intrinsic
def _bitcast_float(typingctx, x):
    if x != types.int64:
        return None
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@njit(cache=True, inline="always")
def decode_float_key(key):
    """Inverse of :func:`dmondrian.qi.float_keys` for one key."""
    if key < 0:
        key = key ^ _FLIP
    return _bitcast_float(key)


@njit(cache=True, inline="always")
def _key_value(key, kind):
    if kind == KIND_FLOAT:
        return decode_float_key(key)
    return np.float64(key)


@njit(cache=True)
def _hier_lca(lo, hi, off, h_parent, h_lo, h_hi, h_leafnode, loff):
    node = h_leafnode[loff + lo]
    while not (h_lo[off + node] <= lo and hi <= h_hi[off + node]):
        node = h_parent[off + node]
    return node


@njit(cache=True)
def _allowed(n_left, n_right, min_size):
    # The one place that decides whether a cut may happen. Constraints beyond
    # k plug in here (they receive the children's sizes and, later, their
    # sensitive-value histograms).
    return n_left >= min_size and n_right >= min_size


@njit(cache=True)
def _node_span(keys, j, s, e, kind, scale, card, h_parent, h_lo, h_hi, h_leafnode, hoff, loff):
    """Normalized span of QI ``j`` over rows ``[s, e)``: the NCP its range would cost."""
    if scale <= 0.0:
        return 0.0
    row = keys[j]
    if kind == KIND_NOMINAL:
        seen = np.zeros(card, dtype=np.bool_)
        distinct = 0
        for i in range(s, e):
            c = row[i]
            if not seen[c]:
                seen[c] = True
                distinct += 1
        return (distinct - 1) / scale
    lo = MISSING_KEY
    hi = np.int64(-1) if kind != KIND_INT and kind != KIND_FLOAT else np.iinfo(np.int64).min
    missing = False
    for i in range(s, e):
        v = row[i]
        if v == MISSING_KEY:
            missing = True
            continue
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    if lo == MISSING_KEY:  # only missing values: nothing to cut
        return 0.0
    if missing:
        # A class mixing missing and present values publishes "range or
        # missing", which tells an analyst nothing: it costs the full penalty.
        return 1.0
    if kind == KIND_HIERARCHY:
        node = _hier_lca(lo, hi, hoff, h_parent, h_lo, h_hi, h_leafnode, loff)
        return (h_hi[hoff + node] - h_lo[hoff + node]) / scale
    if kind == KIND_ORDINAL:
        return (hi - lo) / scale
    return (_key_value(hi, kind) - _key_value(lo, kind)) / scale


@njit(cache=True)
def _count_le(row, s, e, t):
    c = 0
    for i in range(s, e):
        if row[i] <= t:
            c += 1
    return c


@njit(cache=True)
def _nominal_ranks(row, s, e, card):
    """Rank of every code when the node's values are ordered by frequency.

    Returns ``(rank, cum)``: ``rank[code]`` and the cumulative row count by rank.
    Most frequent first, ties by code, so the order is deterministic.
    """
    counts = np.zeros(card, dtype=np.int64)
    for i in range(s, e):
        counts[row[i]] += 1
    order = np.argsort(-counts, kind="mergesort")
    rank = np.empty(card, dtype=np.int64)
    cum = np.empty(card, dtype=np.int64)
    acc = 0
    for r in range(card):
        rank[order[r]] = r
        acc += counts[order[r]]
        cum[r] = acc
    return rank, cum


@njit(cache=True)
def _rank_at(cum, pos):
    """Smallest rank whose cumulative count exceeds row position ``pos``."""
    r = 0
    while cum[r] <= pos:
        r += 1
    return r


@njit(cache=True)
def _choose(n, l1, l2, min_size):
    """Pick the allowed cut (left sizes l1 < l2) nearest the middle; -1 if none."""
    ok1 = l1 > 0 and _allowed(l1, n - l1, min_size)
    ok2 = l2 < n and _allowed(l2, n - l2, min_size)
    if ok1 and ok2:
        # Classic Mondrian cuts at "<= median" (l2); "< median" wins only when
        # ties make it strictly more balanced.
        if abs(2 * l1 - n) < abs(2 * l2 - n):
            return 1
        return 2
    if ok2:
        return 2
    if ok1:
        return 1
    return 0


@njit(cache=True)
def _find_cut(keys, j, s, e, kind, card, relaxed, min_size,
              h_parent, h_lo, h_hi, h_leafnode, hoff, loff):
    """Find an allowed cut of QI ``j``.

    Returns ``(n_left, t, eq_value, need_eq, rank)``: a row goes left when its
    (ranked) key is ``<= t``, or equals ``eq_value`` while fewer than
    ``need_eq`` such rows went left. ``n_left == 0`` means no allowed cut.
    """
    n = e - s
    row = keys[j]
    no_rank = np.empty(0, dtype=np.int64)
    if kind == KIND_NOMINAL:
        rank, cum = _nominal_ranks(row, s, e, card)
        if relaxed:
            nl = n // 2
            if not _allowed(nl, n - nl, min_size):
                return 0, 0, 0, 0, rank
            r = _rank_at(cum, nl - 1)
            below = cum[r - 1] if r > 0 else 0
            return nl, r - 1, r, nl - below, rank
        r = _rank_at(cum, (n - 1) // 2)
        l1 = cum[r - 1] if r > 0 else 0
        l2 = cum[r]
        which = _choose(n, l1, l2, min_size)
        if which == 1:
            return l1, r - 1, -1, 0, rank
        if which == 2:
            return l2, r, -1, 0, rank
        return 0, 0, 0, 0, rank

    if relaxed:
        nl = n // 2
        if not _allowed(nl, n - nl, min_size):
            return 0, 0, 0, 0, no_rank
        med = np.partition(row[s:e], nl - 1)[nl - 1]
        below = _count_le(row, s, e, med - 1)
        return nl, med - 1, med, nl - below, no_rank

    m = (n - 1) // 2
    med = np.partition(row[s:e], m)[m]
    if kind == KIND_HIERARCHY:
        lo = MISSING_KEY
        hi = np.int64(-1)
        for i in range(s, e):
            v = row[i]
            if v < lo:
                lo = v
            if v > hi:
                hi = v
        lca = _hier_lca(lo, hi, hoff, h_parent, h_lo, h_hi, h_leafnode, loff)
        child = h_leafnode[loff + med]
        while h_parent[hoff + child] != lca:
            child = h_parent[hoff + child]
        t1 = h_lo[hoff + child] - 1
        t2 = h_hi[hoff + child]
    elif med == MISSING_KEY:
        # The median row is missing: the only cut is present | missing.
        t1 = MISSING_KEY - 1
        t2 = MISSING_KEY - 1
    else:
        t1 = med - 1 if med > np.iinfo(np.int64).min else med
        t2 = med
    l1 = _count_le(row, s, e, t1)
    l2 = _count_le(row, s, e, t2)
    which = _choose(n, l1, l2, min_size)
    if which == 1:
        return l1, t1, -1, 0, no_rank
    if which == 2:
        return l2, t2, -1, 0, no_rank
    return 0, 0, 0, 0, no_rank


@njit(cache=True)
def _partition(src_keys, src_rows, dst_keys, dst_rows, go_left, j, s, e, n_left,
               t, eq_value, need_eq, rank):
    row = src_keys[j]
    use_rank = rank.shape[0] > 0
    taken = 0
    for i in range(s, e):
        v = row[i]
        if use_rank:
            v = rank[v]
        if v <= t:
            go_left[i] = True
        elif v == eq_value and taken < need_eq:
            go_left[i] = True
            taken += 1
        else:
            go_left[i] = False
    d = src_keys.shape[0]
    for q in range(d + 1):
        src = src_rows if q == d else src_keys[q]
        dst = dst_rows if q == d else dst_keys[q]
        li = s
        ri = s + n_left
        for i in range(s, e):
            if go_left[i]:
                dst[li] = src[i]
                li += 1
            else:
                dst[ri] = src[i]
                ri += 1


@njit(cache=True)
def _split_node(bufs_keys, bufs_rows, go_left, s, e, depth, buf, kinds, scales, cards,
                relaxed, min_size, max_depth, h_parent, h_lo, h_hi, h_leafnode,
                hoffs, loffs, leaf_start):
    """Split node ``[s, e)`` living in buffer ``buf``; return the left size or 0.

    A node that is not split becomes a class: its data is brought to buffer 0
    (where the class statistics are read) and its first position is flagged.
    """
    n = e - s
    src_keys = bufs_keys[buf]
    if n >= 2 * min_size and (max_depth < 0 or depth < max_depth):
        d = src_keys.shape[0]
        spans = np.empty(d, dtype=np.float64)
        for j in range(d):
            spans[j] = _node_span(src_keys, j, s, e, kinds[j], scales[j], cards[j],
                                  h_parent, h_lo, h_hi, h_leafnode, hoffs[j], loffs[j])
        # Widest normalized span first; ties by QI order, for determinism.
        order = np.argsort(-spans, kind="mergesort")
        for oi in range(d):
            j = order[oi]
            if spans[j] <= 0.0:
                break
            n_left, t, eq_value, need_eq, rank = _find_cut(
                src_keys, j, s, e, kinds[j], cards[j], relaxed, min_size,
                h_parent, h_lo, h_hi, h_leafnode, hoffs[j], loffs[j])
            if n_left > 0:
                _partition(src_keys, bufs_rows[buf], bufs_keys[1 - buf], bufs_rows[1 - buf],
                           go_left, j, s, e, n_left, t, eq_value, need_eq, rank)
                return n_left
    if buf == 1:
        bufs_keys[0][:, s:e] = src_keys[:, s:e]
        bufs_rows[0][s:e] = bufs_rows[1][s:e]
    leaf_start[s] = True
    return 0


@njit(cache=True)
def _run_subtree(bufs_keys, bufs_rows, go_left, s0, e0, depth0, buf0, kinds, scales,
                 cards, relaxed, min_size, max_depth, h_parent, h_lo, h_hi, h_leafnode,
                 hoffs, loffs, leaf_start):
    # Explicit stack: numba recursion is limited, and depth can reach n / k on
    # skewed data.
    cap = 64
    st_s = np.empty(cap, dtype=np.int64)
    st_e = np.empty(cap, dtype=np.int64)
    st_d = np.empty(cap, dtype=np.int64)
    st_b = np.empty(cap, dtype=np.int64)
    top = 0
    st_s[0], st_e[0], st_d[0], st_b[0] = s0, e0, depth0, buf0
    top = 1
    while top > 0:
        top -= 1
        s, e, depth, buf = st_s[top], st_e[top], st_d[top], st_b[top]
        n_left = _split_node(bufs_keys, bufs_rows, go_left, s, e, depth, buf, kinds, scales,
                             cards, relaxed, min_size, max_depth, h_parent, h_lo, h_hi,
                             h_leafnode, hoffs, loffs, leaf_start)
        if n_left == 0:
            continue
        if top + 2 > st_s.shape[0]:
            cap = 2 * st_s.shape[0]
            st_s = _grow(st_s, cap)
            st_e = _grow(st_e, cap)
            st_d = _grow(st_d, cap)
            st_b = _grow(st_b, cap)
        mid = s + n_left
        st_s[top], st_e[top], st_d[top], st_b[top] = mid, e, depth + 1, 1 - buf
        top += 1
        st_s[top], st_e[top], st_d[top], st_b[top] = s, mid, depth + 1, 1 - buf
        top += 1


@njit(cache=True)
def _grow(a, cap):
    out = np.empty(cap, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, parallel=True)
def _split_level(bufs_keys, bufs_rows, go_left, fr_s, fr_e, depth, buf, kinds, scales, cards,
                 relaxed, min_size, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs,
                 leaf_start):
    """Split every node of one breadth-first level, in parallel; left sizes (0 = class)."""
    m = fr_s.shape[0]
    lefts = np.zeros(m, dtype=np.int64)
    for i in prange(m):
        lefts[i] = _split_node(bufs_keys, bufs_rows, go_left, fr_s[i], fr_e[i], depth, buf,
                               kinds, scales, cards, relaxed, min_size, max_depth,
                               h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs, leaf_start)
    return lefts


@njit(cache=True, parallel=True)
def _run_subtrees(bufs_keys, bufs_rows, go_left, fr_s, fr_e, depth, buf, kinds, scales, cards,
                  relaxed, min_size, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs,
                  leaf_start):
    """Finish independent subtrees depth-first, one per thread at a time."""
    for i in prange(fr_s.shape[0]):
        _run_subtree(bufs_keys, bufs_rows, go_left, fr_s[i], fr_e[i], depth, buf, kinds,
                     scales, cards, relaxed, min_size, max_depth, h_parent, h_lo, h_hi,
                     h_leafnode, hoffs, loffs, leaf_start)


@njit(cache=True)
def _next_level(fr_s, fr_e, lefts):
    n_split = 0
    for i in range(lefts.shape[0]):
        if lefts[i] > 0:
            n_split += 1
    nxt_s = np.empty(2 * n_split, dtype=np.int64)
    nxt_e = np.empty(2 * n_split, dtype=np.int64)
    q = 0
    for i in range(lefts.shape[0]):
        if lefts[i] > 0:
            mid = fr_s[i] + lefts[i]
            nxt_s[q], nxt_e[q] = fr_s[i], mid
            nxt_s[q + 1], nxt_e[q + 1] = mid, fr_e[i]
            q += 2
    return nxt_s, nxt_e


@njit(cache=True)
def mondrian_partition(keys, kinds, scales, cards, relaxed, min_size, max_depth,
                       h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs):
    """Run Mondrian over a ``(d, n)`` key matrix.

    Parameters
    ----------
    keys : int64 array (d, n)
        Order-preserving keys, one row per QI (see :mod:`dmondrian.qi`).
    kinds, scales, cards : arrays (d,)
        Per QI: kernel kind, global scale normalizing spans, and code
        cardinality (nominal kinds).
    relaxed : bool
        Relaxed partitioning (median ties may go to both sides).
    min_size : int
        Smallest allowed class size (k).
    max_depth : int
        Maximum number of cuts from the root to a class; -1 for no limit.
    h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs : int64 arrays
        Concatenated hierarchy trees and each QI's offsets into them.

    Returns
    -------
    order : int64 array (n,)
        Row numbers in class order.
    class_start : bool array (n,)
        True at the first position of each class in ``order``.
    sorted_keys : int64 array (d, n)
        ``keys[:, order]``.
    """
    d, n = keys.shape
    bufs_keys = np.empty((2, d, n), dtype=np.int64)
    bufs_keys[0] = keys
    bufs_rows = np.empty((2, n), dtype=np.int64)
    for i in range(n):
        bufs_rows[0, i] = i
    go_left = np.empty(n, dtype=np.bool_)
    leaf_start = np.zeros(n, dtype=np.bool_)

    # Breadth-first top levels, each level's nodes split in parallel, until
    # there are enough independent subtrees to keep every thread busy.
    fr_s = np.zeros(1, dtype=np.int64)
    fr_e = np.full(1, n, dtype=np.int64)
    depth = 0
    buf = 0
    while 0 < fr_s.shape[0] < _PARALLEL_FRONTIER:
        lefts = _split_level(bufs_keys, bufs_rows, go_left, fr_s, fr_e, depth, buf, kinds,
                             scales, cards, relaxed, min_size, max_depth, h_parent, h_lo, h_hi,
                             h_leafnode, hoffs, loffs, leaf_start)
        fr_s, fr_e = _next_level(fr_s, fr_e, lefts)
        depth += 1
        buf = 1 - buf
    _run_subtrees(bufs_keys, bufs_rows, go_left, fr_s, fr_e, depth, buf, kinds, scales, cards,
                  relaxed, min_size, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs,
                  leaf_start)
    return bufs_rows[0].copy(), leaf_start, bufs_keys[0].copy()


@njit(cache=True)
def class_statistics(sorted_keys, class_start, kinds, cards):
    """Per-class bounds of every QI, read from the class-ordered key matrix.

    Returns
    -------
    class_of_pos : int64 array (n,)
        Class id of each position.
    lo, hi : int64 arrays (n_classes, d)
        Smallest and largest present key (``MISSING_KEY`` when all missing).
    missing : bool array (n_classes, d)
        Whether the class holds a missing value.
    total : float64 array (n_classes, d)
        Sum of decoded present values (numeric kinds), for mean generalization.
    present : int64 array (n_classes, d)
        Number of present (non-missing) values.
    """
    d, n = sorted_keys.shape
    class_of_pos = np.empty(n, dtype=np.int64)
    c = -1
    for i in range(n):
        if class_start[i]:
            c += 1
        class_of_pos[i] = c
    n_classes = c + 1
    lo = np.full((n_classes, d), MISSING_KEY, dtype=np.int64)
    hi = np.full((n_classes, d), np.iinfo(np.int64).min, dtype=np.int64)
    missing = np.zeros((n_classes, d), dtype=np.bool_)
    total = np.zeros((n_classes, d), dtype=np.float64)
    present = np.zeros((n_classes, d), dtype=np.int64)
    for j in range(d):
        row = sorted_keys[j]
        kind = kinds[j]
        numeric = kind == KIND_INT or kind == KIND_FLOAT
        for i in range(n):
            c = class_of_pos[i]
            v = row[i]
            if v == MISSING_KEY:
                missing[c, j] = True
                continue
            present[c, j] += 1
            if v < lo[c, j]:
                lo[c, j] = v
            if v > hi[c, j]:
                hi[c, j] = v
            if numeric:
                total[c, j] += _key_value(v, kind)
    return class_of_pos, lo, hi, missing, total, present


@njit(cache=True)
def class_code_sets(sorted_row, class_of_pos, n_classes):
    """Distinct codes of one nominal QI per class, as CSR ``(offsets, codes)``.

    Codes within a class are sorted, so equal sets give equal slices.
    """
    n = sorted_row.shape[0]
    offsets = np.zeros(n_classes + 1, dtype=np.int64)
    codes = np.empty(n, dtype=np.int64)
    out = 0
    i = 0
    while i < n:
        c = class_of_pos[i]
        j = i
        while j < n and class_of_pos[j] == c:
            j += 1
        vals = np.unique(sorted_row[i:j])
        codes[out: out + vals.shape[0]] = vals
        out += vals.shape[0]
        offsets[c + 1] = out
        i = j
    return offsets, codes[:out]
