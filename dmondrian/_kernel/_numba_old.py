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
* The median comes from a histogram select over the node's known key range
  (:func:`_select`), never a sort; a split also measures both children's
  bounds while moving their rows, so spans cost no extra pass.
* The split of one node (:func:`_split_node` and everything it calls)
  allocates nothing: it works in a per-thread work space
  (:func:`_workspace`) and is compiled without reference counting, which
  would otherwise cost atomic operations on every array argument of every
  call on the million small nodes near the leaves. numba compiles the
  callees with the same setting, so none of them may allocate or hand an
  array back to reference-counted code.
* A node's position range never changes once it exists, so independent
  subtrees are processed in parallel (``prange``) and the result does not
  depend on thread scheduling: class ids come from a prefix sum over
  "a class starts here" flags in position order.
* The entry points release the GIL: in a Dask worker the event loop (which
  receives shuffle data and answers heartbeats) keeps running while a leaf
  is partitioned, instead of stalling for the whole call.
"""

from __future__ import annotations

import mmap

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
_FLOAT_MAX = np.finfo(np.float64).max
_TINY = 5e-324
_INT_MIN = np.iinfo(np.int64).min
_INT_MAX = np.iinfo(np.int64).max
# Buckets of the histogram median select: 16 KiB of counters stay in L1.
_BUCKETS = 2048
# Segments up to this size are selected by copying into a scratch buffer.
_SMALL = 1024
# Rows a split moves before folding them into the children's statistics:
# at 5 QIs a block reads and writes 96 KiB each, which L2 still holds when
# the fold reads the written half back.
_MOVE_BLOCK = 2048
# Rows of the split's work space (see _workspace): a small segment's copy,
# counts (select histogram, code counts, left histogram), code order (and the
# right histogram), nominal ranks and their cumulative counts, and the codes
# seen in a node (kept all zeros between calls).
WS_SCRATCH, WS_COUNTS, WS_ORDER, WS_RANK, WS_CUM, WS_SEEN = 0, 1, 2, 3, 4, 5

# How many nodes the breadth-first top phase makes before handing whole
# subtrees to threads: enough that two cores stay busy when subtrees differ in
# size, few enough that the top phase's per-level overhead stays negligible.
_PARALLEL_FRONTIER = 64
# Below this many rows the whole tree is built on one thread.
_PARALLEL_MIN_ROWS = 200_000


@intrinsic
def _bitcast_float(typingctx, x):
    if x != types.int64:
        return None
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@njit(cache=True, inline="always")
def _decode_float_key(key):
    """Inverse of :func:`dmondrian.qi.float_keys` for one key."""
    if key < 0:
        key = key ^ _FLIP
    return _bitcast_float(key)


@njit(cache=True, inline="always")
def _key_value(key, kind):
    if kind == KIND_FLOAT:
        return _decode_float_key(key)
    return np.float64(key)


@njit(cache=True, _nrt=False)
def _hier_lca(lo, hi, off, h_parent, h_lo, h_hi, h_leafnode, loff):
    node = h_leafnode[loff + lo]
    while not (h_lo[off + node] <= lo and hi <= h_hi[off + node]):
        node = h_parent[off + node]
    return node


# The privacy constraint reaches the kernel as ``priv = (ip, fp, q)``:
#   ip (int64):   [0] k (min class size), [1] key-matrix row of the sensitive
#                 codes (-1: no sensitive constraint), [2] number of sensitive
#                 codes, [3] distinct l (0: off), [4] recursive (c, l)'s l
#                 (0: off), [5] 1 if t-closeness uses the ordered distance
#   fp (float64): [0] log(l) for entropy l-diversity (-1: off), [1] recursive
#                 c, [2] t for t-closeness (-1: off)
#   q (float64):  the whole table's sensitive distribution (t-closeness)
P_K, P_SENS_ROW, P_N_SENS, P_L_DISTINCT, P_RC_L, P_T_ORDERED = 0, 1, 2, 3, 4, 5
P_LOG_L, P_RC_C, P_T = 0, 1, 2


@njit(cache=True, _nrt=False)
def _hist_ok(h, m, ip, fp, q):
    """Whether a class of ``m`` rows with sensitive histogram ``h`` passes."""
    if ip[P_L_DISTINCT] > 0:
        distinct = 0
        for c in range(h.shape[0]):
            distinct += h[c] > 0
        if distinct < ip[P_L_DISTINCT]:
            return False
    if fp[P_LOG_L] >= 0.0:
        entropy = 0.0
        for c in range(h.shape[0]):
            if h[c] > 0:
                p = h[c] / m
                entropy -= p * np.log(p)
        if entropy < fp[P_LOG_L] - 1e-12:
            return False
    if ip[P_RC_L] > 0:
        # r1 < c * (r_l + ... + r_m) over the counts sorted descending; the
        # tail is the total minus the l-1 largest, so nothing is sorted (the
        # kernel's hot path allocates nothing).
        ell = ip[P_RC_L]
        nonzero = 0
        total = 0
        for c in range(h.shape[0]):
            nonzero += h[c] > 0
            total += h[c]
        if nonzero < ell:
            return False
        tail = total - _largest_sum(h, ell - 1)
        if not _largest_sum(h, 1) < fp[P_RC_C] * tail:
            return False
    if fp[P_T] >= 0.0:
        # Earth Mover's Distance to the whole table (Li, Li & Venkatasubramanian
        # 2007): ordered distance for ordered values, equal distance otherwise.
        emd = 0.0
        S = h.shape[0]
        if ip[P_T_ORDERED] == 1:
            acc = 0.0
            for c in range(S):
                acc += h[c] / m - q[c]
                emd += abs(acc)
            emd = emd / (S - 1) if S > 1 else 0.0
        else:
            for c in range(S):
                emd += abs(h[c] / m - q[c])
            emd *= 0.5
        if emd > fp[P_T] + 1e-12:
            return False
    return True


@njit(cache=True, _nrt=False)
def _largest_sum(h, count):
    """Sum of the ``count`` largest entries of ``h``, without reordering it."""
    total = 0
    taken = 0
    bound = _INT_MAX
    while taken < count:
        v = -1
        mult = 0
        for c in range(h.shape[0]):
            x = h[c]
            if x < bound:
                if x > v:
                    v = x
                    mult = 1
                elif x == v:
                    mult += 1
        if v < 0:
            break
        use = min(mult, count - taken)
        total += use * v
        taken += use
        bound = v
    return total


@njit(cache=True, inline="always")
def _goes_left(key, use_rank, rank, t, eq_value, need_eq, taken):
    """The side rule of a cut, shared by the check and the move so they agree.

    A row goes left when its (ranked) key is ``<= t``, or equals ``eq_value``
    while fewer than ``need_eq`` such rows went left. Returns ``(left, taken)``.
    """
    v = rank[key] if use_rank else key
    if v <= t:
        return True, taken
    if v == eq_value and taken < need_eq:
        return True, taken + 1
    return False, taken


@njit(cache=True, inline="always")
def _cut_ok(keys, j, s, e, n_left, t, eq_value, need_eq, rank, priv, ws):
    """The one place that decides whether a cut may happen.

    Both children must hold at least k rows and, when a sensitive constraint
    is on, satisfy it; their histograms are counted with the very rule
    :func:`_partition` uses to move rows, so what is checked is what is made.
    """
    ip, fp, q = priv
    n = e - s
    if n_left <= 0 or n_left >= n or n_left < ip[P_K] or n - n_left < ip[P_K]:
        return False
    if ip[P_SENS_ROW] < 0:
        return True
    return _sensitive_cut_ok(keys, j, s, e, n_left, t, eq_value, need_eq, rank, priv, ws)


@njit(cache=True, _nrt=False)
def _sensitive_cut_ok(keys, j, s, e, n_left, t, eq_value, need_eq, rank, priv, ws):
    """The sensitive-attribute half of :func:`_cut_ok`: both children's histograms."""
    ip, fp, q = priv
    n = e - s
    srow = ip[P_SENS_ROW]
    S = ip[P_N_SENS]
    # Rows that _find_cut no longer needs once it asks (rank and cum stay).
    left = ws[WS_COUNTS, :S]
    right = ws[WS_ORDER, :S]
    left[:] = 0
    right[:] = 0
    row = keys[j]
    sens = keys[srow]
    use_rank = rank.shape[0] > 0
    taken = 0
    for i in range(s, e):
        go, taken = _goes_left(row[i], use_rank, rank, t, eq_value, need_eq, taken)
        if go:
            left[sens[i]] += 1
        else:
            right[sens[i]] += 1
    return _hist_ok(left, n_left, ip, fp, q) and _hist_ok(right, n - n_left, ip, fp, q)


@njit(cache=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


# Nominal QIs with at most this many codes count a node's distinct codes
# with a one-word bitmask while its rows are moved, instead of a pass of
# their own with a table per node.
_MASK_CARD = 64


@njit(cache=True, inline="always")
def _column_stats(mat, q, s, e, kind, card):
    """Per-QI statistics of rows ``[s, e)``: ``(lo, hi, aux)``.

    For ordered kinds, the lowest and highest present key and ``aux`` the
    number of missing values. For nominal kinds ``aux`` is the number of
    distinct codes (missing is a code of its own), or -1 when the QI has too
    many codes for a bitmask and the span must count them itself.
    """
    lo, hi, aux = _fold_stats(mat, q, s, e, kind, card, MISSING_KEY, _INT_MIN, 0)
    return _finish_stats(kind, card, lo, hi, aux)


@njit(cache=True, inline="always")
def _fold_stats(mat, q, s, e, kind, card, lo, hi, aux):
    """Fold rows ``[s, e)`` into running statistics (nominal: ``aux`` is a bitmask)."""
    if kind == KIND_NOMINAL:
        if card <= _MASK_CARD:
            mask = np.uint64(aux)
            one = np.uint64(1)
            for i in range(s, e):
                mask |= one << np.uint64(mat[q, i])
            aux = np.int64(mask)
        return lo, hi, aux
    for i in range(s, e):
        v = mat[q, i]
        is_missing = v == MISSING_KEY
        aux += is_missing
        lo = min(lo, v)  # MISSING_KEY is the largest key: it never lowers lo
        hi = max(hi, _INT_MIN if is_missing else v)
    return lo, hi, aux


@njit(cache=True, inline="always")
def _finish_stats(kind, card, lo, hi, aux):
    if kind == KIND_NOMINAL:
        if card > _MASK_CARD:
            return 0, 0, -1
        mask = np.uint64(aux)
        distinct = _popcount(mask)
        # A single code is also the node's value (see _constant): the index
        # of the mask's only bit.
        code = _popcount(mask - np.uint64(1)) if distinct == 1 else 0
        return code, code, distinct
    return lo, hi, aux


@njit(cache=True, inline="always")
def _constant(kind, lo, hi, miss):
    """Whether a node's statistics say every row has the same key (then ``lo``).

    Ordered kinds: one present value and no missing one, or only missing
    values (``lo`` is then the missing key). Nominal kinds: one code (kept in
    ``lo`` by :func:`_finish_stats`; unknown, so never constant, above
    ``_MASK_CARD`` codes). A constant QI stays constant in every descendant.
    """
    if kind == KIND_NOMINAL:
        return miss == 1
    return lo == MISSING_KEY or (lo == hi and miss == 0)


@njit(cache=True, _nrt=False)
def _distinct_codes(keys, j, s, e, card, ws):
    """Number of distinct codes of nominal QI ``j`` in rows ``[s, e)``."""
    # The work space row holds zeros between calls: only the codes seen here
    # are set, then reset, so a node costs its rows, not the QI's codes.
    seen = ws[WS_SEEN]
    distinct = 0
    for i in range(s, e):
        c = keys[j, i]
        distinct += seen[c] == 0
        seen[c] = 1
    for i in range(s, e):
        seen[keys[j, i]] = 0
    return distinct


@njit(cache=True, inline="always")
def _node_span(keys, j, s, e, lo, hi, miss, kind, scale, card,
               h_parent, h_lo, h_hi, h_leafnode, hoff, loff, ws):
    """Normalized span of QI ``j`` over rows ``[s, e)``: the NCP its range would cost.

    ``lo``, ``hi`` and ``miss`` are the node's statistics of the QI (see
    :func:`_column_stats`), measured by the parent's split so no pass over
    the rows is needed (except for nominal QIs with many codes).
    """
    if scale <= 0.0:
        return 0.0
    if kind == KIND_NOMINAL:
        distinct = miss if miss >= 0 else _distinct_codes(keys, j, s, e, card, ws)
        return (distinct - 1) / scale
    if lo == MISSING_KEY:  # only missing values: nothing to cut
        return 0.0
    if miss > 0:
        # A class mixing missing and present values publishes "range or
        # missing", which tells an analyst nothing: it costs the full penalty.
        return 1.0
    if lo == hi:
        return 0.0
    if kind == KIND_HIERARCHY:
        node = _hier_lca(lo, hi, hoff, h_parent, h_lo, h_hi, h_leafnode, loff)
        return (h_hi[hoff + node] - h_lo[hoff + node]) / scale
    if kind == KIND_ORDINAL:
        return (hi - lo) / scale
    diff = _key_value(hi, kind) - _key_value(lo, kind)
    if diff > _FLOAT_MAX:  # the range of two huge floats overflows
        diff = _FLOAT_MAX
    span = diff / scale
    # A node with two distinct values must stay cuttable even when its share
    # of a huge global range underflows to zero.
    return span if span > 0.0 else _TINY


@njit(cache=True, _nrt=False)
def _quickselect(a, kth):
    """The ``kth`` smallest element of ``a``, reordering ``a`` in place."""
    return _quickselect_rounds(a, kth, -1)


@njit(cache=True, _nrt=False)
def _quickselect_rounds(a, kth, rounds):
    """:func:`_quickselect` with at most ``rounds`` partitions (-1: the usual budget).

    Three-way partitions around a median-of-three pivot, written without
    data-dependent branches: on the small random segments near the leaves a
    mispredicted branch per element costs more than the comparisons.
    """
    lo = 0
    hi = a.shape[0]
    # Introselect's guard: inputs that defeat the pivot choice would make the
    # loop quadratic; past a logarithmic budget, heapsort the rest.
    budget = rounds
    if budget < 0:
        budget = 8
        m = hi
        while m > 0:
            budget += 2
            m >>= 1
    while hi - lo > 1:
        budget -= 1
        if budget < 0:
            _heapsort(a, lo, hi, a[:0], False)
            return a[kth]
        n = hi - lo
        if n < 48:
            pivot = _median3(a[lo], a[lo + n // 2], a[hi - 1])
        else:
            # Tukey's ninther: sorted and reversed runs (a column with its
            # missing keys at one end, say) stay linear.
            step = n // 8
            mid = lo + n // 2
            pivot = _median3(_median3(a[lo], a[lo + step], a[lo + 2 * step]),
                             _median3(a[mid - step], a[mid], a[mid + step]),
                             _median3(a[hi - 1 - 2 * step], a[hi - 1 - step], a[hi - 1]))
        # [lo, lt) < pivot, then [lt, le) == pivot, the rest > pivot.
        lt = lo
        for i in range(lo, hi):
            v = a[i]
            a[i] = a[lt]
            a[lt] = v
            lt += v < pivot
        le = lt
        for i in range(lt, hi):
            v = a[i]
            a[i] = a[le]
            a[le] = v
            le += v == pivot
        if kth < lt:
            hi = lt
        elif kth < le:
            return pivot
        else:
            lo = le
    return a[kth]


@njit(cache=True, inline="always")
def _median3(x, y, z):
    return max(min(x, y), min(max(x, y), z))


@njit(cache=True, _nrt=False)
def _heapsort(a, lo, hi, counts, by_count):
    """Sort ``a[lo:hi]`` in place, in O(n log n) whatever the input.

    Ascending values, or with ``by_count`` codes in frequency order (see
    :func:`_precedes`).
    """
    # Sift-down builds a heap whose root comes *last* in the order, so popping
    # roots to the back leaves the range sorted front to back.
    n = hi - lo
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(a, lo, start, n, counts, by_count)
    for end in range(n - 1, 0, -1):
        a[lo], a[lo + end] = a[lo + end], a[lo]
        _sift_down(a, lo, 0, end, counts, by_count)


@njit(cache=True, inline="always")
def _precedes(x, y, counts, by_count):
    """The heapsort's order: ``x < y``, or more rows first then the smaller code."""
    if by_count:
        return counts[x] > counts[y] or (counts[x] == counts[y] and x < y)
    return x < y


@njit(cache=True, inline="always")
def _sift_down(a, lo, root, end, counts, by_count):
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and _precedes(a[lo + child], a[lo + child + 1], counts, by_count):
            child += 1
        if not _precedes(a[lo + root], a[lo + child], counts, by_count):
            return
        a[lo + root], a[lo + child] = a[lo + child], a[lo + root]
        root = child


@njit(cache=True, _nrt=False)
def _select(row, s, e, lo, hi, kth, ws, spare):
    """The ``kth`` smallest present key of a segment, without reordering it.

    Returns ``(value, n_less, n_equal)``. Present keys lie in ``[lo, hi]``.
    ``spare`` is a row whose ``[s, e)`` is free (the other buffer's, which the
    split overwrites anyway). Small segments are copied into
    the work space and quickselected. Large ones histogram the keys
    into 2048 buckets of the known range (one read-only pass), then select
    inside the one bucket holding rank ``kth``: two streaming passes instead
    of a copy, a select and two counting passes, and the counts come free.
    """
    n = e - s
    if n <= _SMALL:
        buf = ws[WS_SCRATCH, :n]
        for i in range(n):
            buf[i] = row[s + i]
        value = _quickselect(buf, kth)
        less = 0
        equal = 0
        for i in range(n):
            less += buf[i] < value
            equal += buf[i] == value
        return value, less, equal
    span = np.uint64(hi) - np.uint64(lo)  # wraps correctly: the true range is < 2**64
    shift = 0
    while (span >> np.uint64(shift)) >= np.uint64(_BUCKETS):
        shift += 1
    ushift = np.uint64(shift)
    ulo = np.uint64(lo)
    counts = ws[WS_COUNTS, :_BUCKETS]
    counts[:] = 0
    for i in range(s, e):
        v = row[i]
        if v != MISSING_KEY:
            counts[(np.uint64(v) - ulo) >> ushift] += 1
    below = 0
    b = 0
    while below + counts[b] <= kth:
        below += counts[b]
        b += 1
    if shift == 0:  # one key per bucket: the histogram is exact
        return np.int64(ulo + np.uint64(b)), below, counts[b]
    inside = spare[s: s + counts[b]]
    q = 0
    ub = np.uint64(b)
    for i in range(s, e):
        v = row[i]
        if v != MISSING_KEY and ((np.uint64(v) - ulo) >> ushift) == ub:
            inside[q] = v
            q += 1
    value = _quickselect(inside, kth - below)
    less = below
    equal = 0
    for i in range(q):
        less += inside[i] < value
        equal += inside[i] == value
    return value, less, equal


@njit(cache=True, _nrt=False)
def _count_le(row, s, e, t):
    c = 0
    for i in range(s, e):
        c += row[i] <= t
    return c


@njit(cache=True, _nrt=False)
def _nominal_ranks(row, s, e, card, ws):
    """Rank of every code when the node's values are ordered by frequency.

    Fills ``rank[code]`` and ``cum``, the cumulative row count by rank, in
    rows ``WS_RANK`` and ``WS_CUM`` of the work space (see :func:`_workspace`;
    views are not returned: the split runs without reference counting). Most
    frequent first, ties by code (absent codes last), so the order is
    deterministic.
    """
    counts = ws[WS_COUNTS, :card]
    order = ws[WS_ORDER]
    rank = ws[WS_RANK, :card]
    cum = ws[WS_CUM, :card]
    counts[:] = 0
    for i in range(s, e):
        counts[row[i]] += 1
    m = 0
    for c in range(card):
        if counts[c] > 0:
            order[m] = c
            m += 1
    # Only the codes present need sorting; the absent follow in code order.
    _heapsort(order, 0, m, counts, True)
    r = m
    for c in range(card):
        if counts[c] == 0:
            order[r] = c
            r += 1
    acc = 0
    for r in range(card):
        rank[order[r]] = r
        acc += counts[order[r]]
        cum[r] = acc


@njit(cache=True, _nrt=False)
def _rank_at(cum, pos):
    """Smallest rank whose cumulative count exceeds row position ``pos``."""
    r = 0
    while cum[r] <= pos:
        r += 1
    return r


@njit(cache=True, inline="always")
def _choose(keys, j, s, e, l1, t1, l2, t2, rank, priv, ws):
    """Pick the allowed cut nearest the middle among ``<= t1`` and ``<= t2``.

    Returns 1, 2, or 0 when neither is allowed.
    """
    n = e - s
    ok2 = _cut_ok(keys, j, s, e, l2, t2, -1, 0, rank, priv, ws)
    ok1 = l1 != l2 and _cut_ok(keys, j, s, e, l1, t1, -1, 0, rank, priv, ws)
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


@njit(cache=True, _nrt=False)
def _find_cut(keys, j, s, e, lo, hi, miss, kind, card, relaxed, priv,
              h_parent, h_lo, h_hi, h_leafnode, hoff, loff, ws, spare):
    """Find an allowed cut of QI ``j``.

    Returns ``(n_left, t, eq_value, need_eq, ranked)``: a row goes left when
    its key (its frequency rank, ``ws[WS_RANK, key]``, when ``ranked``) is
    ``<= t``, or equals ``eq_value`` while fewer than ``need_eq`` such rows
    went left. ``n_left == 0`` means no allowed cut. (A flag, not the view:
    without reference counting, a returned view is not safe to hand back to
    reference-counted code.) ``spare`` is free room for :func:`_select`.
    """
    n = e - s
    row = keys[j]
    no_rank = ws[WS_RANK, :0]
    if kind == KIND_NOMINAL:
        _nominal_ranks(row, s, e, card, ws)
        rank = ws[WS_RANK, :card]
        cum = ws[WS_CUM, :card]
        if relaxed:
            nl = n // 2
            r = _rank_at(cum, nl - 1)
            below = cum[r - 1] if r > 0 else 0
            if not _cut_ok(keys, j, s, e, nl, r - 1, r, nl - below, rank, priv, ws):
                return 0, 0, 0, 0, True
            return nl, r - 1, r, nl - below, True
        r = _rank_at(cum, (n - 1) // 2)
        l1 = cum[r - 1] if r > 0 else 0
        l2 = cum[r]
        which = _choose(keys, j, s, e, l1, r - 1, l2, r, rank, priv, ws)
        if which == 1:
            return l1, r - 1, -1, 0, True
        if which == 2:
            return l2, r, -1, 0, True
        return 0, 0, 0, 0, True

    present = n - miss
    if relaxed:
        nl = n // 2
        if nl < priv[0][P_K] or n - nl < priv[0][P_K]:
            return 0, 0, 0, 0, False
        if nl - 1 >= present:  # the left half reaches into the missing rows
            t, eq_value, need_eq = MISSING_KEY - 1, MISSING_KEY, nl - present
        else:
            med, less, _ = _select(row, s, e, lo, hi, nl - 1, ws, spare)
            t, eq_value, need_eq = med - 1, med, nl - less
        if not _cut_ok(keys, j, s, e, nl, t, eq_value, need_eq, no_rank, priv, ws):
            return 0, 0, 0, 0, False
        return nl, t, eq_value, need_eq, False

    m = (n - 1) // 2
    if m >= present:
        # The median row is missing: the only cut is present | missing.
        if _cut_ok(keys, j, s, e, present, MISSING_KEY - 1, -1, 0, no_rank, priv, ws):
            return present, MISSING_KEY - 1, -1, 0, False
        return 0, 0, 0, 0, False
    med, less, equal = _select(row, s, e, lo, hi, m, ws, spare)
    if kind == KIND_HIERARCHY:
        lca = _hier_lca(lo, hi, hoff, h_parent, h_lo, h_hi, h_leafnode, loff)
        child = h_leafnode[loff + med]
        while h_parent[hoff + child] != lca:
            child = h_parent[hoff + child]
        t1 = h_lo[hoff + child] - 1
        t2 = h_hi[hoff + child]
        l1 = _count_le(row, s, e, t1)
        l2 = _count_le(row, s, e, t2)
    else:
        t1 = med - 1
        t2 = med
        l1 = less
        l2 = less + equal
    which = _choose(keys, j, s, e, l1, t1, l2, t2, no_rank, priv, ws)
    if which == 1:
        return l1, t1, -1, 0, False
    if which == 2:
        return l2, t2, -1, 0, False
    return 0, 0, 0, 0, False


@njit(cache=True, inline="always", _nrt=False)
def _scatter(src, dst, pos, b0, b1, active, n_active):
    """Move rows ``b0..b1`` of key rows ``active[:n_active]`` to positions ``pos`` of ``dst``.

    Four key rows per sweep, unrolled: a loop over a runtime number of rows
    per moved row costs more than the moves (measured 25-30 % slower at 6
    rows). A last group of fewer rows repeats its last row, which stores
    the same value twice. Unsigned subscripts spare numba's negative-index
    fix-up on every access.
    """
    last = n_active - 1
    for q0 in range(0, n_active, 4):
        r0, r1, r2, r3 = (active[q0], active[min(q0 + 1, last)], active[min(q0 + 2, last)],
                          active[min(q0 + 3, last)])
        s0, s1, s2, s3 = src[r0], src[r1], src[r2], src[r3]
        d0, d1, d2, d3 = dst[r0], dst[r1], dst[r2], dst[r3]
        for i in range(b0, b1):
            p = np.uint64(pos[i - b0])
            u = np.uint64(i)
            d0[p] = s0[u]
            d1[p] = s1[u]
            d2[p] = s2[u]
            d3[p] = s3[u]


@njit(cache=True, _nrt=False)
def _partition(src, dst, d, j, s, e, n_left, t, eq_value, need_eq, rank, lo, hi, miss,
               child_lo, child_hi, child_miss, kinds, cards, pos, active):
    """Move the rows of ``[s, e)`` to the other buffer, left child first.

    Every row of the matrix moves (keys, the sensitive codes, the row ids)
    but the QIs constant in the node (``lo``, ``hi``, ``miss`` are its
    statistics): those keep their value in every descendant, which
    :func:`_make_class` writes when a class is made, and skipping them moves
    4 of 6 rows on a typical leaf of the distributed engine, whose top cuts
    made its sex and education constant. Each child's statistics are
    measured for the ``d`` QIs on the way (``child_*[side, q]``, see
    :func:`_column_stats`), so the children never rescan for their spans.
    ``pos`` is room for ``_MOVE_BLOCK`` positions, ``active`` for a row list.
    """
    row = src[j]
    li = s
    ri = s + n_left
    common = need_eq == 0 and rank.shape[0] == 0
    use_rank = rank.shape[0] > 0
    taken = 0
    n_active = 0
    for q in range(src.shape[0]):
        if q >= d or not _constant(kinds[q], lo[q], hi[q], miss[q]):
            active[n_active] = q
            n_active += 1
    for q in range(d):
        for side in range(2):
            child_lo[side, q], child_hi[side, q], child_miss[side, q] = MISSING_KEY, _INT_MIN, 0
    # Rows move in blocks: each row's destination first (the side rule is
    # applied once, branch-free in the common numeric strict cut), then every
    # key row is moved by those positions, then the block's two runs of moved
    # rows are folded into the children's statistics while still in cache:
    # large nodes are bound by memory traffic, and a separate pass would read
    # every moved key back from memory.
    for b0 in range(s, e, _MOVE_BLOCK):
        b1 = min(b0 + _MOVE_BLOCK, e)
        li0 = li
        ri0 = ri
        if common:
            for i in range(b0, b1):
                g = np.int64(row[i] <= t)
                pos[i - b0] = ri + g * (li - ri)
                li += g
                ri += 1 - g
        else:
            for i in range(b0, b1):
                go, taken = _goes_left(row[i], use_rank, rank, t, eq_value, need_eq, taken)
                g = np.int64(go)
                pos[i - b0] = ri + g * (li - ri)
                li += g
                ri += 1 - g
        _scatter(src, dst, pos, b0, b1, active, n_active)
        # Contiguous runs vectorize; tracking both sides inside the move
        # would branch on the side again.
        for a in range(n_active):
            q = active[a]
            if q >= d:
                break
            child_lo[0, q], child_hi[0, q], child_miss[0, q] = _fold_stats(
                dst, q, li0, li, kinds[q], cards[q], child_lo[0, q], child_hi[0, q],
                child_miss[0, q])
            child_lo[1, q], child_hi[1, q], child_miss[1, q] = _fold_stats(
                dst, q, ri0, ri, kinds[q], cards[q], child_lo[1, q], child_hi[1, q],
                child_miss[1, q])
    for q in range(d):
        if _constant(kinds[q], lo[q], hi[q], miss[q]):
            # Not moved: the children have the node's value (all missing:
            # each child's rows are its missing count).
            for side in range(2):
                child_lo[side, q], child_hi[side, q] = lo[q], hi[q]
                child_miss[side, q] = miss[q]
            if kinds[q] != KIND_NOMINAL and lo[q] == MISSING_KEY:
                child_miss[0, q], child_miss[1, q] = n_left, e - s - n_left
            continue
        for side in range(2):
            child_lo[side, q], child_hi[side, q], child_miss[side, q] = _finish_stats(
                kinds[q], cards[q], child_lo[side, q], child_hi[side, q], child_miss[side, q])


@njit(cache=True, _nrt=False)
def _split_node(bufs_keys, s, e, depth, buf, lo, hi, miss,
                child_lo, child_hi, child_miss, kinds, scales, cards, relaxed, priv,
                max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs, leaf_start,
                spans_buf, ws):
    """Split node ``[s, e)`` living in buffer ``buf``; return the left size or 0.

    ``spans_buf`` (d floats) and ``ws`` (see :func:`_workspace`) are the
    caller's reusable work space: the split allocates nothing, so it is
    compiled without reference counting, which otherwise costs a pair of
    atomic operations per array argument on each of the many small nodes.
    ``lo``, ``hi``, ``miss`` are the node's per-QI bounds; on a split the
    children's are written to ``child_*`` (row 0 left, row 1 right). A node
    that is not split becomes a class: its data is brought to buffer 0 (where
    the class statistics are read) and its first position is flagged.
    """
    src_keys = bufs_keys[buf]
    if not _is_class(e - s, depth, priv, max_depth):
        # Rows of the matrix past the d QIs ride along and are never cut.
        d = kinds.shape[0]
        spans = spans_buf
        for j in range(d):
            spans[j] = _node_span(src_keys, j, s, e, lo[j], hi[j], miss[j], kinds[j],
                                  scales[j], cards[j], h_parent, h_lo, h_hi, h_leafnode,
                                  hoffs[j], loffs[j], ws)
        # Widest normalized span first; ties by QI order, for determinism.
        # (d is small: picking the maximum each time beats sorting.)
        for _ in range(d):
            j = 0
            for q in range(1, d):
                if spans[q] > spans[j]:
                    j = q
            if spans[j] <= 0.0:
                break
            spans[j] = -1.0
            n_left, t, eq_value, need_eq, ranked = _find_cut(
                src_keys, j, s, e, lo[j], hi[j], miss[j], kinds[j], cards[j], relaxed,
                priv, h_parent, h_lo, h_hi, h_leafnode, hoffs[j], loffs[j], ws,
                bufs_keys[1 - buf, 0])
            if n_left > 0:
                rank = ws[WS_RANK, :cards[j] if ranked else 0]
                # The select's scratch row is free again: it takes the positions
                # (and the nominal cumulative counts' row the moved rows' list).
                _partition(src_keys, bufs_keys[1 - buf], d, j, s, e, n_left, t, eq_value,
                           need_eq, rank, lo, hi, miss, child_lo, child_hi, child_miss, kinds,
                           cards, ws[WS_SCRATCH, :_MOVE_BLOCK], ws[WS_CUM])
                return n_left
    _make_class(bufs_keys, s, e, buf, leaf_start, kinds, lo, hi, miss)
    return 0


@njit(cache=True, inline="always", _nrt=False)
def _make_class(bufs_keys, s, e, buf, leaf_start, kinds, lo, hi, miss):
    """Make node ``[s, e)`` a class: bring its rows to buffer 0 and flag its start.

    The QIs constant in the node (``lo``, ``hi``, ``miss`` are its
    statistics) are written from their value: an ancestor may have stopped
    moving them (see :func:`_partition`).
    """
    d = kinds.shape[0]
    # Explicit loops: a 2-D slice assignment goes through numba's generic
    # broadcasting, which costs more than the copy on the many tiny classes.
    for q in range(bufs_keys.shape[1]):
        if q < d and _constant(kinds[q], lo[q], hi[q], miss[q]):
            v = lo[q]
            for i in range(s, e):
                bufs_keys[0, q, i] = v
        elif buf == 1:
            for i in range(s, e):
                bufs_keys[0, q, i] = bufs_keys[1, q, i]
    leaf_start[s] = True


@njit(cache=True, inline="always")
def _is_class(n, depth, priv, max_depth):
    """Whether a node of ``n`` rows at ``depth`` can only be a class (no split tried)."""
    return n < 2 * priv[0][P_K] or (max_depth >= 0 and depth >= max_depth)


@njit(cache=True)
def _run_subtree(bufs_keys, s0, e0, depth0, buf0, lo0, hi0, miss0,
                 kinds, scales, cards, relaxed, priv, max_depth, h_parent, h_lo, h_hi,
                 h_leafnode, hoffs, loffs, leaf_start):
    """Finish one subtree depth-first."""
    d = lo0.shape[0]
    # Explicit stack: numba recursion is limited, and depth can reach n / k on
    # skewed data. Each entry carries its node's per-QI bounds.
    cap = 64
    st = np.empty((cap, 4), dtype=np.int64)
    st_lo = np.empty((cap, d), dtype=np.int64)
    st_hi = np.empty((cap, d), dtype=np.int64)
    st_miss = np.empty((cap, d), dtype=np.int64)
    child_lo = np.empty((2, d), dtype=np.int64)
    child_hi = np.empty((2, d), dtype=np.int64)
    child_miss = np.empty((2, d), dtype=np.int64)
    spans_buf = np.empty(d, dtype=np.float64)
    ws = _workspace(cards, priv)
    st[0, 0], st[0, 1], st[0, 2], st[0, 3] = s0, e0, depth0, buf0
    st_lo[0], st_hi[0], st_miss[0] = lo0, hi0, miss0
    top = 1
    while top > 0:
        top -= 1
        s, e, depth, buf = st[top, 0], st[top, 1], st[top, 2], st[top, 3]
        if _is_class(e - s, depth, priv, max_depth):
            # Most nodes near the leaves: skip the call and its many arguments.
            _make_class(bufs_keys, s, e, buf, leaf_start, kinds, st_lo[top], st_hi[top],
                        st_miss[top])
            continue
        n_left = _split_node(bufs_keys, s, e, depth, buf, st_lo[top],
                             st_hi[top], st_miss[top], child_lo, child_hi, child_miss, kinds,
                             scales, cards, relaxed, priv, max_depth, h_parent, h_lo, h_hi,
                             h_leafnode, hoffs, loffs, leaf_start, spans_buf, ws)
        if n_left == 0:
            continue
        if top + 2 > st.shape[0]:
            st = _grow(st)
            st_lo = _grow(st_lo)
            st_hi = _grow(st_hi)
            st_miss = _grow(st_miss)
        mid = s + n_left
        # Right child below the left one, so the left is finished first.
        st[top, 0], st[top, 1], st[top, 2], st[top, 3] = mid, e, depth + 1, 1 - buf
        st[top + 1, 0], st[top + 1, 1], st[top + 1, 2], st[top + 1, 3] = s, mid, depth + 1, 1 - buf
        # Element loops: numba's row-slice assignment goes through generic
        # broadcasting, which costs more than the copy on these tiny rows.
        for q in range(d):
            st_lo[top, q], st_hi[top, q], st_miss[top, q] = (
                child_lo[1, q], child_hi[1, q], child_miss[1, q])
            st_lo[top + 1, q], st_hi[top + 1, q], st_miss[top + 1, q] = (
                child_lo[0, q], child_hi[0, q], child_miss[0, q])
        top += 2


@njit(cache=True)
def _workspace(cards, priv):
    """The split's work space: ``(6, w)`` int64, one row per use (``WS_*``).

    ``w`` covers the largest of a small segment's copy, the select histogram,
    a nominal QI's codes and the sensitive codes.
    """
    w = max(_SMALL, _BUCKETS, priv[0][P_N_SENS])
    for c in cards:
        w = max(w, c)
    return np.zeros((6, w), dtype=np.int64)


@njit(cache=True)
def _grow(a):
    out = np.empty((2 * a.shape[0], a.shape[1]), dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, parallel=True)
def _split_level(bufs_keys, fr, fr_lo, fr_hi, fr_miss, kinds, scales,
                 cards, relaxed, priv, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs,
                 loffs, leaf_start):
    """Split every node of one breadth-first level, in parallel.

    ``fr`` rows are ``(s, e, depth, buf)``. Returns the left sizes (0 = the
    node became a class) and the children's bounds, ``(m, 2, d)`` each.
    """
    m, d = fr_lo.shape
    lefts = np.zeros(m, dtype=np.int64)
    c_lo = np.empty((m, 2, d), dtype=np.int64)
    c_hi = np.empty((m, 2, d), dtype=np.int64)
    c_miss = np.empty((m, 2, d), dtype=np.int64)
    for i in prange(m):
        lefts[i] = _split_node(bufs_keys, fr[i, 0], fr[i, 1], fr[i, 2],
                               fr[i, 3], fr_lo[i], fr_hi[i], fr_miss[i], c_lo[i], c_hi[i],
                               c_miss[i], kinds, scales, cards, relaxed, priv, max_depth,
                               h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs, leaf_start,
                               np.empty(d, dtype=np.float64), _workspace(cards, priv))
    return lefts, c_lo, c_hi, c_miss


@njit(cache=True, parallel=True)
def _run_subtrees(bufs_keys, fr, fr_lo, fr_hi, fr_miss, kinds, scales,
                  cards, relaxed, priv, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs,
                  loffs, leaf_start):
    """Finish independent subtrees depth-first, one per thread at a time."""
    for i in prange(fr.shape[0]):
        _run_subtree(bufs_keys, fr[i, 0], fr[i, 1], fr[i, 2], fr[i, 3],
                     fr_lo[i], fr_hi[i], fr_miss[i], kinds, scales, cards, relaxed, priv,
                     max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs, leaf_start)


@njit(cache=True)
def _next_level(fr, lefts, c_lo, c_hi, c_miss):
    """The children of the nodes that were split, as the next frontier."""
    n_split = 0
    for i in range(lefts.shape[0]):
        n_split += lefts[i] > 0
    d = c_lo.shape[2]
    nxt = np.empty((2 * n_split, 4), dtype=np.int64)
    n_lo = np.empty((2 * n_split, d), dtype=np.int64)
    n_hi = np.empty((2 * n_split, d), dtype=np.int64)
    n_miss = np.empty((2 * n_split, d), dtype=np.int64)
    q = 0
    for i in range(lefts.shape[0]):
        if lefts[i] > 0:
            mid = fr[i, 0] + lefts[i]
            for side in range(2):
                nxt[q, 0] = fr[i, 0] if side == 0 else mid
                nxt[q, 1] = mid if side == 0 else fr[i, 1]
                nxt[q, 2] = fr[i, 2] + 1
                nxt[q, 3] = 1 - fr[i, 3]
                n_lo[q], n_hi[q], n_miss[q] = c_lo[i, side], c_hi[i, side], c_miss[i, side]
                q += 1
    return nxt, n_lo, n_hi, n_miss


@njit(cache=True, nogil=True)
def mondrian_partition(bufs_keys, kinds, scales, cards, relaxed, priv, max_depth, roots,
                       h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs):
    """Run Mondrian over a key matrix of ``d`` QIs and ``n`` rows.

    Parameters
    ----------
    bufs_keys : int64 array (2, r, n)
        The kernel's double buffer. ``bufs_keys[0]`` holds, one row each, the
        ``d`` QIs' order-preserving keys (see :mod:`dmondrian.qi`), then any
        rows that only ride along (the sensitive codes at row ``d`` when a
        sensitive constraint is on), and last the row numbers ``0..n-1``.
    kinds, scales, cards : arrays (d,)
        Per QI: kernel kind, global scale normalizing spans, and code
        cardinality (nominal kinds).
    relaxed : bool
        Relaxed partitioning (median ties may go to both sides).
    priv : tuple (ip, fp, q)
        The privacy constraint (see the comment above :func:`_hist_ok`).
    max_depth : int
        Maximum number of cuts from the root to a class; -1 for no limit.
    roots : int64 array (m, 2)
        Independent root nodes, as ``(start, depth)`` rows in increasing
        ``start`` order, the first at 0: root ``i`` holds positions
        ``start[i]`` to ``start[i + 1]`` (the last, to ``n``) and counts its
        depth from ``depth[i]`` against ``max_depth``. One root ``(0, 0)`` is
        plain Mondrian; the distributed engine passes an output partition's
        leaves, each already ``depth`` cuts below the table's root, so one
        call does them all and numbers their classes in position order.
    h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs : int64 arrays
        Concatenated hierarchy trees and each QI's offsets into them.

    Returns
    -------
    order : int64 array (n,)
        Row numbers in class order (a view of ``bufs_keys[0, -1]``).
    class_start : bool array (n,)
        True at the first position of each class in ``order``.
    sorted_keys : int64 array (d, n)
        The keys in class order (a view of ``bufs_keys[0, :d]``).
    """
    d, n = kinds.shape[0], bufs_keys.shape[2]
    keys = bufs_keys[0]
    leaf_start = np.zeros(n, dtype=np.bool_)

    m = roots.shape[0]
    fr = np.zeros((m, 4), dtype=np.int64)
    fr_lo = np.empty((m, d), dtype=np.int64)
    fr_hi = np.empty((m, d), dtype=np.int64)
    fr_miss = np.empty((m, d), dtype=np.int64)
    for i in range(m):
        fr[i, 0] = roots[i, 0]
        fr[i, 1] = roots[i + 1, 0] if i + 1 < m else n
        fr[i, 2] = roots[i, 1]
        for j in range(d):
            fr_lo[i, j], fr_hi[i, j], fr_miss[i, j] = _column_stats(
                keys, j, fr[i, 0], fr[i, 1], kinds[j], cards[j])
    if n < _PARALLEL_MIN_ROWS:
        # Thread start-up and hand-over cost more than small tables take.
        for i in range(m):
            _run_subtree(bufs_keys, fr[i, 0], fr[i, 1], fr[i, 2], 0, fr_lo[i], fr_hi[i],
                         fr_miss[i], kinds, scales, cards, relaxed, priv, max_depth, h_parent,
                         h_lo, h_hi, h_leafnode, hoffs, loffs, leaf_start)
        return bufs_keys[0, -1], leaf_start, bufs_keys[0, :d]
    # Breadth-first top levels, each level's nodes split in parallel, until
    # there are enough independent subtrees to keep every thread busy.
    while 0 < fr.shape[0] < _PARALLEL_FRONTIER:
        lefts, c_lo, c_hi, c_miss = _split_level(
            bufs_keys, fr, fr_lo, fr_hi, fr_miss, kinds, scales, cards,
            relaxed, priv, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs,
            leaf_start)
        fr, fr_lo, fr_hi, fr_miss = _next_level(fr, lefts, c_lo, c_hi, c_miss)
    _run_subtrees(bufs_keys, fr, fr_lo, fr_hi, fr_miss, kinds, scales,
                  cards, relaxed, priv, max_depth, h_parent, h_lo, h_hi, h_leafnode, hoffs,
                  loffs, leaf_start)
    return bufs_keys[0, -1], leaf_start, bufs_keys[0, :d]


@njit(cache=True)
def _class_stats_range(sorted_keys, starts, kinds, c0, c1, class_of_pos, lo, hi, missing,
                       total, present):
    """Fill the statistics of classes ``c0..c1-1`` (see :func:`class_statistics`)."""
    d, n = sorted_keys.shape
    n_classes = starts.shape[0]
    for c in range(c0, c1):
        s = starts[c]
        e = starts[c + 1] if c + 1 < n_classes else n
        for i in range(s, e):
            class_of_pos[i] = c
        for j in range(d):
            kind = kinds[j]
            numeric = kind == KIND_INT or kind == KIND_FLOAT
            c_lo = MISSING_KEY
            c_hi = _INT_MIN
            c_total = 0.0
            c_present = 0
            for i in range(s, e):
                v = sorted_keys[j, i]
                if v == MISSING_KEY:
                    continue
                c_present += 1
                c_lo = min(c_lo, v)
                c_hi = max(c_hi, v)
                if numeric:
                    c_total += _key_value(v, kind)
            lo[c, j] = c_lo
            hi[c, j] = c_hi
            missing[c, j] = c_present < e - s
            total[c, j] = c_total
            present[c, j] = c_present


# Work is handed to threads in this many chunks, so uneven chunks even out.
_CHUNKS = 64


@njit(cache=True, parallel=True)
def _class_stats_parallel(sorted_keys, starts, kinds, class_of_pos, lo, hi, missing, total,
                          present):
    m = starts.shape[0]
    for b in prange(_CHUNKS):
        _class_stats_range(sorted_keys, starts, kinds, b * m // _CHUNKS, (b + 1) * m // _CHUNKS,
                           class_of_pos, lo, hi, missing, total, present)


@njit(cache=True, nogil=True)
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
    starts = np.flatnonzero(class_start)
    m = starts.shape[0]
    class_of_pos = np.empty(n, dtype=np.int64)
    lo = np.empty((m, d), dtype=np.int64)
    hi = np.empty((m, d), dtype=np.int64)
    missing = np.empty((m, d), dtype=np.bool_)
    total = np.empty((m, d), dtype=np.float64)
    present = np.empty((m, d), dtype=np.int64)
    # Classes are independent contiguous runs, and each sum runs in position
    # order, so the result does not depend on how threads share them.
    if n < _PARALLEL_MIN_ROWS:
        _class_stats_range(sorted_keys, starts, kinds, 0, m, class_of_pos, lo, hi, missing,
                           total, present)
    else:
        _class_stats_parallel(sorted_keys, starts, kinds, class_of_pos, lo, hi, missing, total,
                              present)
    return class_of_pos, lo, hi, missing, total, present


@njit(cache=True, parallel=True)
def _scatter_parallel(order, values, out):
    for i in prange(order.shape[0]):
        out[order[i]] = values[i]


@njit(cache=True, nogil=True)
def rows_to_classes(order, class_of_pos):
    """Class id of every row in input order (``order`` lists rows by position)."""
    class_of_row = np.empty_like(class_of_pos)
    if order.shape[0] < _PARALLEL_MIN_ROWS:
        for i in range(order.shape[0]):
            class_of_row[order[i]] = class_of_pos[i]
    else:
        _scatter_parallel(order, class_of_pos, class_of_row)
    return class_of_row


@njit(cache=True, parallel=True, nogil=True)
def _copy_parallel(dst, src):
    for b in prange(_CHUNKS):
        for i in range(b * dst.shape[0] // _CHUNKS, (b + 1) * dst.shape[0] // _CHUNKS):
            dst[i] = src[i]


@njit(cache=True, parallel=True, nogil=True)
def _ids_and_touch(bufs):
    n = bufs.shape[2]
    for b in prange(_CHUNKS):
        a = b * n // _CHUNKS
        z = (b + 1) * n // _CHUNKS
        for i in range(a, z):
            bufs[0, -1, i] = i
        # The first write to fresh memory faults its pages in: done here, both
        # threads take the faults instead of the (serial) root split.
        for r in range(bufs.shape[1]):
            for i in range(a, z):
                bufs[1, r, i] = 0


def double_buffer(keys, rows: int, n: int, space: np.ndarray | None = None) -> np.ndarray:
    """The kernel's double buffer, its first half filled: ``keys``, then row ids.

    Parameters
    ----------
    keys : sequence of int64 arrays (n,)
        The QIs' keys, then any rows that ride along (sensitive codes). A
        key that already is its row of the buffer (filled in place through
        :meth:`WorkSpace.buffer`) is not copied.
    rows : int
        Rows of each half: ``len(keys) + 1`` (the row ids come last).
    n : int
        Number of table rows.
    space : int64 array, optional
        Memory to build the buffer in (see :class:`WorkSpace`), at least
        ``2 * rows * n`` elements; default: fresh memory.

    Returns
    -------
    int64 array (2, rows, n)
        As :func:`mondrian_partition` takes it.
    """
    size = 2 * rows * n
    small = n < _PARALLEL_MIN_ROWS
    fresh = space is None and not small
    if space is not None:
        bufs = space[:size].reshape(2, rows, n)
    elif small:
        bufs = np.empty((2, rows, n), dtype=np.int64)
    else:
        bufs = _fresh_pages(size).reshape(2, rows, n)
    for r, row in enumerate(keys):
        if _same_memory(row, bufs[0, r]):
            continue
        if small:
            bufs[0, r] = row
        else:
            _copy_parallel(bufs[0, r], np.ascontiguousarray(row, dtype=np.int64))
    if fresh:
        _ids_and_touch(bufs)  # the row ids, and fresh pages faulted in by both threads
    else:
        bufs[0, -1] = np.arange(n)
    return bufs


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` is exactly the array ``b`` (same start, type, shape and strides)."""
    return (isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
            and a.strides == b.strides and a.ctypes.data == b.ctypes.data)


def _fresh_pages(size: int) -> np.ndarray:
    """``size`` int64 in plain 4 KiB pages from an anonymous map.

    numpy would ask for transparent huge pages, and where the system
    compacts memory on demand to serve them (THP "madvise" with defrag
    "madvise", a common default) faulting in a ~1 GB buffer cost more than
    half of partitioning it. The buffer is streamed through, so small pages
    cost no speed.
    """
    # Private, as numpy's own memory is: a forked child's writes stay its own.
    private = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}
    return np.frombuffer(mmap.mmap(-1, 8 * max(size, 1), **private), dtype=np.int64,
                         count=size)


class WorkSpace:
    """Memory for the kernel's double buffer, kept from one call to the next.

    A fresh buffer is faulted in page by page on every call: on a 280k-row,
    five-QI leaf that is 12 of the 16 ms it takes to fill it (measured),
    about a tenth of the partitioning itself. A caller that partitions many
    tables in turn (the distributed engine, one output partition after
    another) keeps one work space per thread. What a partitioning returns
    (``sorted_keys``) is a view of this memory, valid until the next call
    that uses the same work space.

    Examples
    --------
    >>> ws = WorkSpace()
    >>> ws.take(10).shape, ws.take(4).base is ws.take(10).base
    ((10,), True)
    """

    def __init__(self):
        self._space = np.empty(0, dtype=np.int64)

    def take(self, size: int) -> np.ndarray:
        """At least ``size`` int64 of this work space (grown, never shrunk)."""
        if self._space.shape[0] < size:
            # Grown by a quarter more than asked, so slowly growing tables
            # don't reallocate every time.
            grown = _fresh_pages(size + size // 4)
            grown[:] = 0  # fault the pages in now, on this thread, once
            self._space = grown
        return self._space[:size]

    def buffer(self, rows: int, n: int) -> np.ndarray:
        """The ``(2, rows, n)`` double buffer that :func:`double_buffer` builds here.

        A caller that can write a table's keys straight into their rows of
        ``buffer(rows, n)[0]`` spares the kernel a copy of every key (and
        itself the arrays it would copy from).
        """
        return self.take(2 * rows * n).reshape(2, rows, n)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def class_code_masks(sorted_row, class_of_pos, n_classes, words):
    """Set of codes of one nominal QI per class, as a bitmask of ``words`` words.

    Bit ``c`` of row ``i`` is set when class ``i`` holds code ``c``; equal
    sets give equal rows, so distinct sets are found by comparing integers.
    """
    masks = np.zeros((n_classes, words), dtype=np.uint64)
    one = np.uint64(1)
    for i in range(sorted_row.shape[0]):
        code = sorted_row[i]
        masks[class_of_pos[i], code >> 6] |= one << np.uint64(code & 63)
    return masks
