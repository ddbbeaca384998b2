"""One node of the Mondrian tree: measure its spans, find a cut, move its rows.

The data of a node is a contiguous segment ``[s, e)`` of the key matrix. A
split writes the two children, left then right, into the *other* of two
buffers (a kd-tree build), so every pass is sequential and a subtree that
fits in cache is finished in cache. While moving rows it measures both
children's per-QI statistics (bounds, missing count, nominal code masks), so
the children's spans cost no pass of their own.

The cut is the median one (the "balanced" objective), one that packs
classes close to k rows ("dm", see packing.pyx) or the cheapest by the
children's spans ("ncp", see ncp.pyx); each goes through the one privacy
check, _cut_ok. A strict "dm" or an "ncp" cut that fails it falls back to
the median cut; a relaxed "dm" cut, like a relaxed median one, then tries
the next QI.

A split allocates nothing: it works in the caller's work space
(``WorkRows``, one per thread), which the many small nodes near the leaves
would otherwise pay for in allocations.
"""

import numpy as np

from ._common cimport (i64, u64, MISSING_KEY, INT_MIN, FLOAT_MAX, popcount, key_value,
                       KIND_NOMINAL, KIND_HIERARCHY, KIND_ORDINAL)
from ._rules cimport (Buffers, Node, Cut, Rules, QIRules, Privacy, WorkRows, buf_row, ws_row,
                      is_class, goes_left, cut_rank, WS_SCRATCH, WS_COUNTS, WS_ORDER, WS_RANK,
                      WS_CUM, WS_SEEN, WS_ROWS, BUCKETS, SMALL, MASK_CARD, P_K, P_SENS_ROW,
                      P_N_SENS, P_ENT_ROW, P_PAIR_ROW, P_N_SEEN, N_IP, N_FP, OBJ_BALANCED,
                      OBJ_DM, OBJ_NCP, bind_entities)
from .select cimport Selected, select_kth, heapsort
from .privacy cimport sensitive_cut_ok, entity_cut_ok
from .node cimport is_constant, hier_lca, node_span, nominal_ranks, rank_at
from .ncp cimport Choice, ncp_cut
from .packing cimport packed_left, packs_better, best_sorted_boundary, best_ranked_boundary

# Rows a split moves before folding them into the children's statistics: at
# 5 QIs a block reads and writes 96 KiB each, which L2 still holds when the
# fold reads the written half back.
cdef enum:
    MOVE_BLOCK = 2048


cdef extern from *:
    """
    /* The bounds fold is most of a split's arithmetic once a node fits in
       cache: built twice where the toolchain can pick one at load time (GCC
       or clang on x86-64 glibc), for AVX2, whose 64-bit compares take four
       keys at a time, and for the baseline ISA a portable build targets. */
    #if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
    #if __has_attribute(target_clones)
    #define DM_CLONES __attribute__((target_clones("avx2", "default")))
    #endif
    #endif
    #ifndef DM_CLONES
    #define DM_CLONES
    #endif
    /* Fold row[s:e] into the smallest and largest key. */
    static DM_CLONES void dm_fold_bounds(const int64_t* row, Py_ssize_t s, Py_ssize_t e,
                                         int64_t* lo, int64_t* hi) {
        int64_t l = *lo, h = *hi, v;
        Py_ssize_t i;
        for (i = s; i < e; i++) {
            v = row[i];
            l = v < l ? v : l;
            h = v > h ? v : h;
        }
        *lo = l;
        *hi = h;
    }
    /* The same with missing keys (INT64_MAX) counted in *miss and kept out
       of the largest present key; the missing key, the largest of all,
       never lowers the smallest. */
    static DM_CLONES void dm_fold_bounds_missing(const int64_t* row, Py_ssize_t s,
                                                 Py_ssize_t e, int64_t* lo, int64_t* hi,
                                                 int64_t* miss) {
        int64_t l = *lo, h = *hi, a = *miss, v, m;
        Py_ssize_t i;
        for (i = s; i < e; i++) {
            v = row[i];
            m = v == INT64_MAX;
            a += m;
            l = v < l ? v : l;
            v = m ? INT64_MIN : v;
            h = v > h ? v : h;
        }
        *lo = l;
        *hi = h;
        *miss = a;
    }
    """
    void fold_bounds "dm_fold_bounds"(const i64* row, Py_ssize_t s, Py_ssize_t e, i64* lo,
                                      i64* hi) noexcept nogil
    void fold_bounds_missing "dm_fold_bounds_missing"(const i64* row, Py_ssize_t s,
                                                      Py_ssize_t e, i64* lo, i64* hi,
                                                      i64* miss) noexcept nogil


cdef inline void fold_stats(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 kind, i64 card,
                            i64* lo, i64* hi, i64* aux, bint may_miss) noexcept nogil:
    """Fold rows ``[s, e)`` into running statistics (nominal: ``aux`` is a bitmask).

    ``may_miss`` False promises that no key of an ordered kind is missing
    (its node has none), which spares the count.
    """
    cdef Py_ssize_t i
    cdef u64 mask
    if kind == KIND_NOMINAL:
        if card <= MASK_CARD:
            mask = <u64>aux[0]
            for i in range(s, e):
                mask |= (<u64>1) << (<u64>row[i])
            aux[0] = <i64>mask
        return
    if may_miss:
        fold_bounds_missing(row, s, e, lo, hi, aux)
    else:
        fold_bounds(row, s, e, lo, hi)


cdef inline void finish_stats(i64 kind, i64 card, i64* lo, i64* hi, i64* aux) noexcept nogil:
    cdef u64 mask
    cdef i64 distinct, code
    if kind != KIND_NOMINAL:
        return
    if card > MASK_CARD:
        lo[0] = 0
        hi[0] = 0
        aux[0] = -1
        return
    mask = <u64>aux[0]
    distinct = popcount(mask)
    # A single code is also the node's value (see is_constant): the index of
    # the mask's only bit.
    code = popcount(mask - 1) if distinct == 1 else 0
    lo[0] = code
    hi[0] = code
    aux[0] = distinct


cdef void column_stats(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 kind, i64 card,
                       i64* lo, i64* hi, i64* aux) noexcept nogil:
    """Per-QI statistics of rows ``[s, e)``: ``(lo, hi, aux)``.

    For ordered kinds, the lowest and highest present key and ``aux`` the
    number of missing values. For nominal kinds ``aux`` is the number of
    distinct codes (missing is a code of its own), or -1 when the QI has too
    many codes for a bitmask and the span must count them itself; a single
    code is kept in ``lo`` and ``hi``.
    """
    lo[0] = MISSING_KEY
    hi[0] = INT_MIN
    aux[0] = 0
    fold_stats(row, s, e, kind, card, lo, hi, aux, True)
    finish_stats(kind, card, lo, hi, aux)


cdef inline i64 _count_le(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 t) noexcept nogil:
    cdef i64 c = 0
    cdef Py_ssize_t i
    for i in range(s, e):
        c += row[i] <= t
    return c


cdef inline bint _cut_ok(const i64* row, const i64* sens, Py_ssize_t s, Py_ssize_t e,
                         const Cut* cut, const Privacy* priv, const WorkRows* ws) noexcept nogil:
    """The one place that decides whether a cut may happen.

    Both children must hold at least k rows (k entities, when an entity
    row is on) and, when a sensitive constraint is on, satisfy it; their
    histograms are counted with the very rule the move uses (goes_left), so
    what is checked is what is made.
    """
    cdef i64 n = e - s, k = priv.ip[P_K], n_left = cut.n_left
    if n_left <= 0 or n_left >= n or n_left < k or n - n_left < k:
        return False
    if ws.ent != NULL and not entity_cut_ok(row, s, e, cut, priv, ws):
        return False
    if priv.ip[P_SENS_ROW] < 0:
        return True
    return sensitive_cut_ok(row, sens, s, e, cut, priv, ws)


cdef inline Cut _cut(i64 n_left, i64 t, i64 eq_value, i64 need_eq, bint ranked) noexcept nogil:
    cdef Cut c
    c.n_left = n_left
    c.t = t
    c.eq_value = eq_value
    c.need_eq = need_eq
    c.ranked = ranked
    return c


cdef inline Cut _choose(const i64* row, const i64* sens, Py_ssize_t s, Py_ssize_t e,
                        const Cut* c1, const Cut* c2, const Privacy* priv,
                        const WorkRows* ws) noexcept nogil:
    """The allowed cut nearest the middle among ``c1`` and ``c2`` (``n_left`` 0: neither)."""
    cdef i64 n = e - s, d1, d2
    cdef bint ok2 = _cut_ok(row, sens, s, e, c2, priv, ws)
    cdef bint ok1 = c1.n_left != c2.n_left and _cut_ok(row, sens, s, e, c1, priv, ws)
    if ok1 and ok2:
        # Classic Mondrian cuts at "<= median" (c2); "< median" wins only when
        # ties make it strictly more balanced.
        d1 = 2 * c1.n_left - n
        d2 = 2 * c2.n_left - n
        if (d1 if d1 >= 0 else -d1) < (d2 if d2 >= 0 else -d2):
            return c1[0]
        return c2[0]
    if ok2:
        return c2[0]
    if ok1:
        return c1[0]
    return _cut(0, 0, 0, 0, c2.ranked)


cdef Cut _packed_cut(const i64* row, const i64* sens, const Node* node, Py_ssize_t j,
                     i64 present, const Rules* rules, const WorkRows* ws,
                     i64* spare) noexcept nogil:
    """The strict cut of ordered QI ``j`` (``row``) that packs classes closest to k rows,
    or none.

    Small nodes (under 4k rows, where the classes are decided) score every
    boundary between distinct keys; larger ones the two around the key at
    the packed position (see packing.packed_left).
    """
    cdef Py_ssize_t s = node.s, e = node.e
    cdef i64 n = e - s, k = rules.priv.ip[P_K], best = 0, bt = 0, p, i
    cdef i64* a
    cdef Selected sel
    cdef Cut c
    if n < 4 * k and n <= SMALL:
        a = ws_row(ws, WS_SCRATCH)
        for i in range(n):
            a[i] = row[s + i]
        best = best_sorted_boundary(a, n, k, &bt)
    else:
        p = packed_left(n, k)
        if p - 1 >= present:
            best, bt = present, MISSING_KEY - 1
        else:
            sel = select_kth(row, s, e, node.lo[j], node.hi[j], p - 1, ws_row(ws, WS_SCRATCH),
                             ws_row(ws, WS_COUNTS), spare)
            if k <= sel.less <= n - k:
                best, bt = sel.less, sel.value - 1
            p = sel.less + sel.equal
            if k <= p <= n - k and packs_better(p, best, n, k):
                best, bt = p, sel.value
    if best < k or best > n - k:
        return _cut(0, 0, 0, 0, False)
    c = _cut(best, bt, -1, 0, False)
    if not _cut_ok(row, sens, s, e, &c, &rules.priv, ws):
        return _cut(0, 0, 0, 0, False)
    return c


cdef Cut find_cut(const Buffers* bufs, const Node* node, Py_ssize_t j, const Rules* rules,
                  const WorkRows* ws, i64* spare) noexcept nogil:
    """Find an allowed cut of QI ``j`` of a node.

    ``spare[node.s:node.e]`` is free room for the select.
    """
    cdef Py_ssize_t s = node.s, e = node.e
    cdef const Privacy* priv = &rules.priv
    cdef const QIRules* qi = &rules.qi
    cdef const i64* row = buf_row(bufs, node.buf, j)
    cdef i64 srow = priv.ip[P_SENS_ROW]
    cdef const i64* sens = buf_row(bufs, node.buf, srow) if srow >= 0 else NULL
    cdef i64 lo = node.lo[j], hi = node.hi[j], miss = node.miss[j]
    cdef i64 kind = qi.kind[j], card = qi.card[j], hoff = qi.hoff[j], loff = qi.loff[j]
    cdef i64 n = e - s, nl, r, below, present, m, lca, child
    cdef i64 t, eq_value, need_eq
    cdef const i64* cum
    cdef Selected sel
    cdef Cut c, c1, c2
    if kind == KIND_NOMINAL:
        nominal_ranks(row, s, e, card, ws)
        cum = ws_row(ws, WS_CUM)
        if rules.relaxed:
            nl = packed_left(n, priv.ip[P_K]) if rules.objective == OBJ_DM else n // 2
            r = rank_at(cum, nl - 1)
            below = cum[r - 1] if r > 0 else 0
            c = _cut(nl, r - 1, r, nl - below, True)
            if not _cut_ok(row, sens, s, e, &c, priv, ws):
                return _cut(0, 0, 0, 0, True)
            return c
        if rules.objective == OBJ_DM:
            nl = best_ranked_boundary(cum, card, n, priv.ip[P_K], &r)
            c = _cut(nl, r, -1, 0, True)
            if nl > 0 and _cut_ok(row, sens, s, e, &c, priv, ws):
                return c
        r = rank_at(cum, (n - 1) // 2)
        c1 = _cut(cum[r - 1] if r > 0 else 0, r - 1, -1, 0, True)
        c2 = _cut(cum[r], r, -1, 0, True)
        return _choose(row, sens, s, e, &c1, &c2, priv, ws)

    present = n - miss
    if rules.relaxed:
        nl = packed_left(n, priv.ip[P_K]) if rules.objective == OBJ_DM else n // 2
        if nl < priv.ip[P_K] or n - nl < priv.ip[P_K]:
            return _cut(0, 0, 0, 0, False)
        if nl - 1 >= present:  # the left half reaches into the missing rows
            t, eq_value, need_eq = MISSING_KEY - 1, MISSING_KEY, nl - present
        else:
            sel = select_kth(row, s, e, lo, hi, nl - 1, ws_row(ws, WS_SCRATCH),
                             ws_row(ws, WS_COUNTS), spare)
            t, eq_value, need_eq = sel.value - 1, sel.value, nl - sel.less
        c = _cut(nl, t, eq_value, need_eq, False)
        if not _cut_ok(row, sens, s, e, &c, priv, ws):
            return _cut(0, 0, 0, 0, False)
        return c

    if rules.objective == OBJ_DM and kind != KIND_HIERARCHY:
        c = _packed_cut(row, sens, node, j, present, rules, ws, spare)
        if c.n_left > 0:
            return c
    m = (n - 1) // 2
    if m >= present:
        # The median row is missing: the only cut is present | missing.
        c = _cut(present, MISSING_KEY - 1, -1, 0, False)
        if _cut_ok(row, sens, s, e, &c, priv, ws):
            return c
        return _cut(0, 0, 0, 0, False)
    sel = select_kth(row, s, e, lo, hi, m, ws_row(ws, WS_SCRATCH), ws_row(ws, WS_COUNTS), spare)
    if kind == KIND_HIERARCHY:
        lca = hier_lca(lo, hi, hoff, loff, qi)
        child = qi.h_leafnode[loff + sel.value]
        while qi.h_parent[hoff + child] != lca:
            child = qi.h_parent[hoff + child]
        t = qi.h_lo[hoff + child] - 1
        c1 = _cut(_count_le(row, s, e, t), t, -1, 0, False)
        t = qi.h_hi[hoff + child]
        c2 = _cut(_count_le(row, s, e, t), t, -1, 0, False)
    else:
        c1 = _cut(sel.less, sel.value - 1, -1, 0, False)
        c2 = _cut(sel.less + sel.equal, sel.value, -1, 0, False)
    return _choose(row, sens, s, e, &c1, &c2, priv, ws)


cdef inline void _scatter(const Buffers* bufs, Py_ssize_t src, const i64* pos, Py_ssize_t b0,
                          Py_ssize_t b1, const i64* active, Py_ssize_t n_active) noexcept nogil:
    """Move rows ``b0..b1`` of key rows ``active[:n_active]`` to positions ``pos``.

    Four key rows per sweep, unrolled: a loop over a runtime number of rows
    per moved row costs more than the moves. The one to three rows left over
    are moved by a sweep of their own size.
    """
    cdef Py_ssize_t q0 = 0, i, dst = 1 - src, rest
    cdef const i64* s0
    cdef const i64* s1
    cdef const i64* s2
    cdef const i64* s3
    cdef i64* d0
    cdef i64* d1
    cdef i64* d2
    cdef i64* d3
    cdef i64 p
    while q0 + 4 <= n_active:
        s0 = buf_row(bufs, src, active[q0])
        s1 = buf_row(bufs, src, active[q0 + 1])
        s2 = buf_row(bufs, src, active[q0 + 2])
        s3 = buf_row(bufs, src, active[q0 + 3])
        d0 = buf_row(bufs, dst, active[q0])
        d1 = buf_row(bufs, dst, active[q0 + 1])
        d2 = buf_row(bufs, dst, active[q0 + 2])
        d3 = buf_row(bufs, dst, active[q0 + 3])
        for i in range(b0, b1):
            p = pos[i - b0]
            d0[p] = s0[i]
            d1[p] = s1[i]
            d2[p] = s2[i]
            d3[p] = s3[i]
        q0 += 4
    rest = n_active - q0
    if rest == 0:
        return
    s0 = buf_row(bufs, src, active[q0])
    d0 = buf_row(bufs, dst, active[q0])
    if rest == 1:
        for i in range(b0, b1):
            d0[pos[i - b0]] = s0[i]
        return
    s1 = buf_row(bufs, src, active[q0 + 1])
    d1 = buf_row(bufs, dst, active[q0 + 1])
    if rest == 2:
        for i in range(b0, b1):
            p = pos[i - b0]
            d0[p] = s0[i]
            d1[p] = s1[i]
        return
    s2 = buf_row(bufs, src, active[q0 + 2])
    d2 = buf_row(bufs, dst, active[q0 + 2])
    for i in range(b0, b1):
        p = pos[i - b0]
        d0[p] = s0[i]
        d1[p] = s1[i]
        d2[p] = s2[i]


cdef void _move(const Buffers* bufs, const Node* node, Py_ssize_t j, const Cut* cut,
                i64* child, const Rules* rules, const WorkRows* ws) noexcept nogil:
    """Move the node's rows to the other buffer, left child first, by ``cut`` of QI ``j``.

    Every row of the matrix moves (keys, the sensitive codes, the row ids)
    but the QIs constant in the node: those keep their value in every
    descendant, which make_class writes when a class is made (a typical
    distributed leaf, whose top cuts made some QIs constant, moves far fewer
    rows). Each child's statistics are measured for the QIs on the way
    (``child``: lo, hi, miss, each ``[side * d + q]``), so the children never
    rescan for their spans.
    """
    cdef Py_ssize_t d = rules.qi.d, q, side, a, b0, b1, i, n_active = 0
    cdef Py_ssize_t s = node.s, e = node.e, src = node.buf, dst = 1 - node.buf
    cdef const i64* lo = node.lo
    cdef const i64* hi = node.hi
    cdef const i64* miss = node.miss
    cdef i64* child_lo = child
    cdef i64* child_hi = child + 2 * d
    cdef i64* child_miss = child + 4 * d
    cdef const i64* row = buf_row(bufs, src, j)
    cdef const i64* rank = cut_rank(cut, ws)
    cdef i64* pos = ws_row(ws, WS_SCRATCH)
    cdef i64* active = ws_row(ws, WS_CUM)
    # Locals: the moves' writes could otherwise alias the cut's fields.
    cdef i64 n_left = cut.n_left, t = cut.t, eq_value = cut.eq_value, need_eq = cut.need_eq
    cdef i64 li = s, ri = s + n_left, li0, ri0, g, taken = 0
    cdef const i64* kinds = rules.qi.kind
    cdef const i64* cards = rules.qi.card
    cdef bint common = need_eq == 0 and rank == NULL
    cdef i64* dq
    for q in range(bufs.rows):
        if q >= d or not is_constant(kinds[q], lo[q], hi[q], miss[q]):
            active[n_active] = q
            n_active += 1
    for q in range(d):
        for side in range(2):
            child_lo[side * d + q] = MISSING_KEY
            child_hi[side * d + q] = INT_MIN
            child_miss[side * d + q] = 0
    # Rows move in blocks: each row's destination first (the side rule is
    # applied once, branch-free in the common numeric strict cut), then every
    # key row is moved by those positions, then the block's two runs of moved
    # rows are folded into the children's statistics while still in cache:
    # large nodes are bound by memory traffic, and a separate pass would read
    # every moved key back from memory.
    b0 = s
    while b0 < e:
        b1 = b0 + MOVE_BLOCK if b0 + MOVE_BLOCK < e else e
        li0 = li
        ri0 = ri
        if common:
            for i in range(b0, b1):
                g = row[i] <= t
                pos[i - b0] = ri + g * (li - ri)
                li += g
                ri += 1 - g
        else:
            for i in range(b0, b1):
                g = goes_left(row[i], rank, t, eq_value, need_eq, &taken)
                pos[i - b0] = ri + g * (li - ri)
                li += g
                ri += 1 - g
        _scatter(bufs, src, pos, b0, b1, active, n_active)
        # Contiguous runs vectorize; tracking both sides inside the move
        # would branch on the side again.
        for a in range(n_active):
            q = active[a]
            if q >= d:
                break
            dq = buf_row(bufs, dst, q)
            fold_stats(dq, li0, li, kinds[q], cards[q], &child_lo[q], &child_hi[q],
                       &child_miss[q], miss[q] != 0)
            fold_stats(dq, ri0, ri, kinds[q], cards[q], &child_lo[d + q], &child_hi[d + q],
                       &child_miss[d + q], miss[q] != 0)
        b0 = b1
    for q in range(d):
        if is_constant(kinds[q], lo[q], hi[q], miss[q]):
            # Not moved: the children have the node's value (all missing:
            # each child's rows are its missing count).
            for side in range(2):
                child_lo[side * d + q] = lo[q]
                child_hi[side * d + q] = hi[q]
                child_miss[side * d + q] = miss[q]
            if kinds[q] != KIND_NOMINAL and lo[q] == MISSING_KEY:
                child_miss[q] = n_left
                child_miss[d + q] = e - s - n_left
            continue
        for side in range(2):
            finish_stats(kinds[q], cards[q], &child_lo[side * d + q], &child_hi[side * d + q],
                         &child_miss[side * d + q])


cdef void make_class(const Buffers* bufs, const Node* node, unsigned char* class_start,
                     const Rules* rules) noexcept nogil:
    """Make a node a class: bring its rows to buffer 0 and flag its start.

    The QIs constant in the node are written from their value: an ancestor
    may have stopped moving them.
    """
    cdef Py_ssize_t d = rules.qi.d, q, i, s = node.s, e = node.e
    cdef i64 buf = node.buf
    cdef const i64* lo = node.lo
    cdef const i64* hi = node.hi
    cdef const i64* miss = node.miss
    cdef i64* out
    cdef const i64* src
    cdef i64 v
    for q in range(bufs.rows):
        out = buf_row(bufs, 0, q)
        if q < d and is_constant(rules.qi.kind[q], lo[q], hi[q], miss[q]):
            v = lo[q]
            for i in range(s, e):
                out[i] = v
        elif buf == 1:
            src = buf_row(bufs, 1, q)
            for i in range(s, e):
                out[i] = src[i]
    class_start[s] = 1


cdef i64 split_node(const Buffers* bufs, const Node* node, i64* child, const Rules* rules,
                    unsigned char* class_start, double* spans, const WorkRows* ws) noexcept nogil:
    """Split a node; return the left size, or 0.

    On a split the children's statistics are written to ``child``: lo, hi,
    then miss, ``2 * d`` values each (left at ``[0, d)``, right at
    ``[d, 2d)``). A node that is not split becomes a class. ``spans`` is
    room for d doubles.
    """
    cdef Py_ssize_t d = rules.qi.d, j, q, _, s = node.s, e = node.e
    cdef i64 buf = node.buf
    cdef const QIRules* qi = &rules.qi
    cdef i64 srow = rules.priv.ip[P_SENS_ROW]
    cdef const i64* sens = buf_row(bufs, buf, srow) if srow >= 0 else NULL
    cdef Cut cut
    cdef Choice ch
    cdef const i64* row
    if not is_class(e - s, node.depth, rules):
        bind_entities(ws, bufs, buf, &rules.priv)
        for j in range(d):
            spans[j] = node_span(bufs, node, j, qi, ws)
        if rules.objective == OBJ_NCP:
            ch = ncp_cut(bufs, node, spans, rules, ws, buf_row(bufs, 1 - buf, 0))
            if ch.n_left > 0:
                row = buf_row(bufs, buf, ch.j)
                if ch.ranked:  # the ranks of the last QI scored are in the work space
                    nominal_ranks(row, s, e, qi.card[ch.j], ws)
                cut = _cut(ch.n_left, ch.t, -1, 0, ch.ranked)
                if _cut_ok(row, sens, s, e, &cut, &rules.priv, ws):
                    _move(bufs, node, ch.j, &cut, child, rules, ws)
                    return ch.n_left
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
            cut = find_cut(bufs, node, j, rules, ws, buf_row(bufs, 1 - buf, 0))
            if cut.n_left > 0:
                _move(bufs, node, j, &cut, child, rules, ws)
                return cut.n_left
    make_class(bufs, node, class_start, rules)
    return 0


cdef Py_ssize_t workspace_width(const i64* cards, Py_ssize_t d, i64 n_sens,
                                Py_ssize_t rows) noexcept nogil:
    """Columns of a work space: a small segment's copy, the select histogram,
    a nominal QI's codes, the sensitive codes and the key rows."""
    cdef Py_ssize_t w = SMALL if SMALL > BUCKETS else BUCKETS, j
    w = w if w > n_sens else n_sens
    w = w if w > rows else rows
    for j in range(d):
        w = w if w > cards[j] else cards[j]
    return w


cdef class RuleArrays:
    """The kernel's :c:type:`Rules`, read from a :class:`~dmondrian._kernel.rules.KernelRules`.

    The one place a kernel call's configuration is read from Python: the
    tree's entry point and the test entry points below build it the same
    way, and it keeps the arrays alive while the kernel runs. Every pointer is
    valid, also when no QI has a hierarchy or no constraint has a
    distribution (the arrays get one padding entry).
    """

    def __init__(self, rules):
        kv, cv = _int64(rules.kinds), _int64(rules.cards)
        sv = np.append(rules.scales, 0.0)
        ip, fp = rules.ip, rules.fp
        q = np.append(rules.q, 0.0)
        hp, hl = _int64(rules.h_parent), _int64(rules.h_lo)
        hh, hf = _int64(rules.h_hi), _int64(rules.h_leafnode)
        ho, lf = _int64(rules.hoffs), _int64(rules.loffs)
        if ip.shape[0] != N_IP or fp.shape[0] != N_FP:
            raise ValueError("rules.ip and rules.fp must be the kernel's privacy arrays")
        if not OBJ_BALANCED <= rules.objective <= OBJ_NCP:
            raise ValueError("objective must index constants.OBJECTIVES")
        self._arrays = [kv, sv, cv, ip, fp, q, hp, hl, hh, hf, ho, lf]
        self.rules.qi.d = kv.shape[0] - 1
        self.rules.qi.kind = _i64_ptr(kv)
        self.rules.qi.scale = _f64_ptr(sv)
        self.rules.qi.card = _i64_ptr(cv)
        self.rules.qi.h_parent = _i64_ptr(hp)
        self.rules.qi.h_lo = _i64_ptr(hl)
        self.rules.qi.h_hi = _i64_ptr(hh)
        self.rules.qi.h_leafnode = _i64_ptr(hf)
        self.rules.qi.hoff = _i64_ptr(ho)
        self.rules.qi.loff = _i64_ptr(lf)
        self.rules.priv.ip = _i64_ptr(ip)
        self.rules.priv.fp = _f64_ptr(fp)
        self.rules.priv.q = _f64_ptr(q)
        self.rules.priv.n_q = q.shape[0] - 1
        self.rules.relaxed = rules.relaxed
        self.rules.max_depth = rules.max_depth
        self.rules.objective = rules.objective


def _int64(values):
    """``values`` as int64 with one padding entry, so its first address always exists."""
    return np.append(np.asarray(values, dtype=np.int64), 0)


cdef const i64* _i64_ptr(const i64[::1] a):
    return &a[0]


cdef const double* _f64_ptr(const double[::1] a):
    return &a[0]


# Python entry points, for the tests: each runs one step on rows [s, e) of a
# (d, n) key matrix.

cdef WorkRows _work_rows(i64[:, ::1] ws):
    cdef WorkRows w
    if ws.shape[0] != WS_ROWS:
        raise ValueError("a work space has one row per use")
    w.data = &ws[0, 0]
    w.width = ws.shape[1]
    w.ncp = NULL
    w.seen = NULL
    w.ent = NULL
    w.pair = NULL
    return w


def workspace(cards, priv, rows=0):
    """A zeroed split work space for QIs of these code counts, as the kernel makes one."""
    cdef const i64[::1] c = np.ascontiguousarray(cards, dtype=np.int64)
    cdef i64 n_sens = priv[0][P_N_SENS]
    return np.zeros((WS_ROWS, workspace_width(&c[0] if c.shape[0] else NULL, c.shape[0],
                                              n_sens, rows)), dtype=np.int64)


def column_stats_py(const i64[:, ::1] keys, Py_ssize_t j, Py_ssize_t s, Py_ssize_t e, i64 kind,
                    i64 card):
    """``(lo, hi, aux)`` of QI ``j`` over rows ``[s, e)`` (see column_stats)."""
    cdef i64 lo, hi, aux
    column_stats(&keys[j, 0], s, e, kind, card, &lo, &hi, &aux)
    return lo, hi, aux


cdef Buffers _key_buffers(const i64[:, ::1] keys):
    """The key matrix as buffer 0 of a double buffer (read only by the entry points)."""
    cdef Buffers b
    b.data = <i64*>&keys[0, 0]
    b.rows = keys.shape[0]
    b.n = keys.shape[1]
    return b


cdef Node _node(Py_ssize_t s, Py_ssize_t e, i64[:, ::1] stats):
    """Node ``[s, e)`` of buffer 0 whose statistics are ``stats``' rows lo, hi, miss."""
    cdef Node nd
    nd.s = s
    nd.e = e
    nd.depth = 0
    nd.buf = 0
    nd.lo = &stats[0, 0]
    nd.hi = &stats[1, 0]
    nd.miss = &stats[2, 0]
    return nd


def _stats_of(keys, Py_ssize_t j, stats):
    """The (3, rows) statistics of a node whose QI ``j`` has ``stats = (lo, hi, miss)``."""
    out = np.zeros((3, keys.shape[0]), dtype=np.int64)
    out[:, j] = stats
    return out


def node_span_py(const i64[:, ::1] keys, Py_ssize_t j, Py_ssize_t s, Py_ssize_t e, stats, rules,
                 i64[:, ::1] ws):
    """Normalized span of QI ``j`` (of ``rules``, a KernelRules) over rows ``[s, e)``, whose
    statistics (see column_stats_py) are ``stats = (lo, hi, miss)``."""
    cdef RuleArrays r = RuleArrays(rules)
    cdef WorkRows w = _work_rows(ws)
    cdef Buffers b = _key_buffers(keys)
    cdef i64[:, ::1] st = _stats_of(keys, j, stats)
    cdef Node nd = _node(s, e, st)
    return node_span(&b, &nd, j, &r.rules.qi, &w)


def nominal_ranks_py(const i64[::1] row, Py_ssize_t s, Py_ssize_t e, i64 card, i64[:, ::1] ws):
    """Fill the frequency ranks and cumulative counts of codes ``< card`` in ``ws``."""
    cdef WorkRows w = _work_rows(ws)
    nominal_ranks(&row[0], s, e, card, &w)


def find_cut_py(const i64[:, ::1] keys, Py_ssize_t j, Py_ssize_t s, Py_ssize_t e, stats, rules,
                i64[:, ::1] ws, i64[::1] spare):
    """``(n_left, t, eq_value, need_eq, ranked)`` of the kernel's cut of QI ``j`` over rows
    ``[s, e)``, whose statistics (see column_stats_py) are ``stats = (lo, hi, miss)``.

    ``rules`` is a :class:`~dmondrian._kernel.rules.KernelRules` of the QIs
    of ``keys``; the sensitive codes, when the constraint has them, are key
    row ``rules.ip[P_SENS_ROW]``. The frequency ranks of a ranked cut are
    left in ``ws[WS_RANK]``.
    """
    cdef RuleArrays r = RuleArrays(rules)
    cdef WorkRows w = _work_rows(ws)
    cdef Buffers b = _key_buffers(keys)
    cdef i64[:, ::1] st = _stats_of(keys, j, stats)
    cdef Node nd = _node(s, e, st)
    cdef Cut cut = find_cut(&b, &nd, j, &r.rules, &w, &spare[0])
    return cut.n_left, cut.t, cut.eq_value, cut.need_eq, bool(cut.ranked)
