"""Local refinement of a partition: rows moved and swapped between neighbouring classes.

Mondrian's cuts are axis-parallel and made one at a time, so a row often
sits in a class whose box it widens although a neighbouring class would hold
it for less. After the tree is built, the classes are taken in position
order (the tree's depth-first order, so consecutive classes are neighbours
in the tree) and grouped into *blocks* of at most ``block_rows`` rows. Inside
a block, rows are moved from one class to another, or swapped between two
classes, while that lowers the block's cost: the sum over its classes of
size times the classes' normalized spans, i.e. the rows' NCP (the same spans
the kernel cuts by, :func:`dmondrian._kernel.node.node_span`). This is the
move/swap refinement of the clustering literature (k-member clustering,
Byun et al. 2007; OKA; Goldberger and Tassa's refinement), run on Mondrian's
classes within small blocks, so its cost grows with ``n * block_rows``, not
``n^2``.

Every change keeps the privacy constraint: a move needs the class it leaves
to keep passing (at least k rows, or k entities, and the sensitive
constraint), and with an entity or a sensitive constraint both classes a
change touches are checked on their new rows. A change is made only when it
lowers the cost by more than a relative tolerance, so the passes end, and
the blocks are independent, so the result does not depend on the thread
count. Classes of a block may overlap once refined; each class's label is
still computed from its own rows, so it contains them.

Per class and QI the refinement keeps the smallest and largest present keys,
their multiplicities and the next keys inward (so the span without any one
row is known in constant time), the missing count and, for nominal QIs of
up to ``DENSE_CODES`` codes, a count per code (larger ones are counted by a
scan of the class's rows).
"""

import numpy as np

from cython.parallel cimport prange, parallel
from libc.stdlib cimport malloc, calloc, free

from ._common cimport (i64, MISSING_KEY, INT_MIN, FLOAT_MAX, key_value, KIND_NOMINAL,
                       KIND_HIERARCHY, KIND_ORDINAL)
from ._rules cimport QIRules, Privacy, P_K, P_SENS_ROW, P_N_SENS, P_ENT_ROW, P_PAIR_ROW, P_N_SEEN
from .split cimport RuleArrays
from .node cimport hier_lca
from .privacy cimport hist_ok

cdef enum:
    # Nominal QIs with more codes are counted by scanning a class's rows.
    DENSE_CODES = 4096

cdef extern from *:
    """
    /* A change must lower the block's cost by this share of it. */
    #define DM_REFINE_TOL 1e-9
    #define DM_TINY_SPAN 5e-324
    """
    const double TOL "DM_REFINE_TOL"
    const double TINY "DM_TINY_SPAN"


cdef struct Block:
    Py_ssize_t m          # rows of the block
    Py_ssize_t d          # QIs
    Py_ssize_t ncl        # classes of the block
    Py_ssize_t cap        # most classes a block may hold
    i64* x                # (d, m) keys, block-local
    i64* sens             # (m,) sensitive codes or NULL
    i64* ent              # (m,) entity codes or NULL
    i64* pair             # (m,) pair codes or NULL
    i64* cl               # class of each row
    i64* slot             # index of each row in its class's member list
    i64* mem              # (cap, m) member lists
    i64* size             # (cap,)
    i64* lo               # (cap, d) smallest present key
    i64* lo_n             # its multiplicity
    i64* lo2              # the next present key up (MISSING_KEY if none)
    i64* hi
    i64* hi_n
    i64* hi2              # the next present key down (INT_MIN if none)
    i64* nmiss            # (cap, d) missing keys (ordered kinds)
    i64* ndist            # (cap, d) distinct codes (nominal kinds)
    i64* cnt              # (cap, nom) per-code counts of the dense nominal QIs
    double* cost          # (cap,)
    double* red           # (m,) each row's _reduction
    i64* order            # (m,) rows by reduction, largest first
    i64* keep             # (m,) the refined Mondrian classes, while k-member is tried
    i64* free             # (m,) rows no k-member class holds yet
    # checks with an entity or a sensitive constraint
    i64* ent_l           # (m,) block-local entity and pair codes
    i64* pair_l
    i64* seen_ent         # (m,) marks of the checks
    i64* seen_pair
    i64 stamp
    i64* hist


cdef struct Config:
    const QIRules* qi
    const Privacy* priv
    const i64* noff       # offset of each dense nominal QI into a class's counts, -1 otherwise
    Py_ssize_t nom        # counts per class
    i64 k
    bint general          # an entity or a sensitive constraint: check rows, not sizes
    Py_ssize_t passes


cdef double _span(const Config* cf, Py_ssize_t q, i64 size, i64 lo, i64 hi, i64 nmiss,
                  i64 ndist) noexcept nogil:
    """Normalized span of QI ``q`` of a class with these statistics (as node_span)."""
    cdef const QIRules* qr = cf.qi
    cdef i64 kind = qr.kind[q], node
    cdef double scale = qr.scale[q], diff, span
    if scale <= 0.0 or size <= 0:
        return 0.0
    if kind == KIND_NOMINAL:
        return <double>(ndist - 1) / scale
    if nmiss >= size:
        return 0.0
    if nmiss > 0:
        return 1.0
    if lo == hi:
        return 0.0
    if kind == KIND_HIERARCHY:
        node = hier_lca(lo, hi, qr.hoff[q], qr.loff[q], qr)
        return <double>(qr.h_hi[qr.hoff[q] + node] - qr.h_lo[qr.hoff[q] + node]) / scale
    if kind == KIND_ORDINAL:
        return <double>(hi - lo) / scale
    diff = key_value(hi, kind) - key_value(lo, kind)
    if diff > FLOAT_MAX:
        diff = FLOAT_MAX
    span = diff / scale
    return span if span > 0.0 else TINY


cdef i64 _count(const Block* b, const Config* cf, Py_ssize_t c, Py_ssize_t q,
                i64 code) noexcept nogil:
    """Rows of class ``c`` whose nominal QI ``q`` holds ``code``."""
    cdef Py_ssize_t j
    cdef i64 n = 0
    cdef const i64* row
    if cf.noff[q] >= 0:
        return b.cnt[c * cf.nom + cf.noff[q] + code]
    row = b.x + q * b.m
    for j in range(b.size[c]):
        n += row[b.mem[c * b.m + j]] == code
    return n


cdef double _cost_changed(const Block* b, const Config* cf, Py_ssize_t c, i64 out,
                          i64 inn) noexcept nogil:
    """Cost of class ``c`` without row ``out`` and with row ``inn`` (-1: none)."""
    cdef Py_ssize_t q, d = b.d, at
    cdef i64 size = b.size[c] + (inn >= 0) - (out >= 0)
    cdef i64 lo, hi, nmiss, ndist, vo, vi, n
    cdef double total = 0.0
    if size <= 0:
        return 0.0
    for q in range(d):
        at = c * d + q
        vo = b.x[q * b.m + out] if out >= 0 else INT_MIN
        vi = b.x[q * b.m + inn] if inn >= 0 else INT_MIN
        if cf.qi.kind[q] == KIND_NOMINAL:
            ndist = b.ndist[at]
            if out >= 0 and _count(b, cf, c, q, vo) == 1:
                ndist -= 1
            if inn >= 0:
                n = _count(b, cf, c, q, vi) - (out >= 0 and vo == vi)
                if n == 0:
                    ndist += 1
            total += _span(cf, q, size, 0, 0, 0, ndist)
            continue
        lo = b.lo[at]
        hi = b.hi[at]
        nmiss = b.nmiss[at]
        if out >= 0:
            if vo == MISSING_KEY:
                nmiss -= 1
            else:
                if vo == lo and b.lo_n[at] == 1:
                    lo = b.lo2[at]
                if vo == hi and b.hi_n[at] == 1:
                    hi = b.hi2[at]
        if inn >= 0:
            if vi == MISSING_KEY:
                nmiss += 1
            else:
                if vi < lo:
                    lo = vi
                if vi > hi:
                    hi = vi
        total += _span(cf, q, size, lo, hi, nmiss, 0)
    return total * <double>size


cdef void _refresh(Block* b, const Config* cf, Py_ssize_t c) noexcept nogil:
    """Recompute the ordered QIs' statistics and the cost of class ``c``."""
    cdef Py_ssize_t q, j, at, d = b.d
    cdef i64 v, lo, lo_n, lo2, hi, hi_n, hi2, nmiss, dist
    cdef const i64* row
    cdef const i64* mem = b.mem + c * b.m
    for q in range(d):
        at = c * d + q
        row = b.x + q * b.m
        if cf.qi.kind[q] == KIND_NOMINAL:
            if cf.noff[q] < 0:
                # Distinct codes by pairwise comparison: the rare large-domain case.
                dist = 0
                for j in range(b.size[c]):
                    v = row[mem[j]]
                    lo = 0
                    for hi in range(j):
                        if row[mem[hi]] == v:
                            lo = 1
                            break
                    dist += lo == 0
                b.ndist[at] = dist
            continue
        lo = MISSING_KEY
        lo_n = 0
        lo2 = MISSING_KEY
        hi = INT_MIN
        hi_n = 0
        hi2 = INT_MIN
        nmiss = 0
        for j in range(b.size[c]):
            v = row[mem[j]]
            if v == MISSING_KEY:
                nmiss += 1
                continue
            if v < lo:
                lo2 = lo
                lo = v
                lo_n = 1
            elif v == lo:
                lo_n += 1
            elif v < lo2:
                lo2 = v
            if v > hi:
                hi2 = hi
                hi = v
                hi_n = 1
            elif v == hi:
                hi_n += 1
            elif v > hi2:
                hi2 = v
        b.lo[at] = lo
        b.lo_n[at] = lo_n
        b.lo2[at] = lo2
        b.hi[at] = hi
        b.hi_n[at] = hi_n
        b.hi2[at] = hi2
        b.nmiss[at] = nmiss
    b.cost[c] = _cost_changed(b, cf, c, -1, -1)


cdef void _add(Block* b, const Config* cf, Py_ssize_t c, i64 r) noexcept nogil:
    """Put row ``r`` in class ``c`` (statistics refreshed by the caller)."""
    cdef Py_ssize_t q
    cdef i64 v
    b.mem[c * b.m + b.size[c]] = r
    b.slot[r] = b.size[c]
    b.size[c] += 1
    b.cl[r] = c
    for q in range(b.d):
        if cf.qi.kind[q] == KIND_NOMINAL and cf.noff[q] >= 0:
            v = b.x[q * b.m + r]
            if b.cnt[c * cf.nom + cf.noff[q] + v] == 0:
                b.ndist[c * b.d + q] += 1
            b.cnt[c * cf.nom + cf.noff[q] + v] += 1


cdef void _remove(Block* b, const Config* cf, i64 r) noexcept nogil:
    """Take row ``r`` out of its class (statistics refreshed by the caller)."""
    cdef Py_ssize_t c = b.cl[r], q
    cdef i64 last, v
    b.size[c] -= 1
    last = b.mem[c * b.m + b.size[c]]
    b.mem[c * b.m + b.slot[r]] = last
    b.slot[last] = b.slot[r]
    for q in range(b.d):
        if cf.qi.kind[q] == KIND_NOMINAL and cf.noff[q] >= 0:
            v = b.x[q * b.m + r]
            b.cnt[c * cf.nom + cf.noff[q] + v] -= 1
            if b.cnt[c * cf.nom + cf.noff[q] + v] == 0:
                b.ndist[c * b.d + q] -= 1


cdef bint _passes(Block* b, const Config* cf, Py_ssize_t c, i64 out, i64 inn) noexcept nogil:
    """Whether class ``c`` without ``out`` and with ``inn`` keeps the constraint."""
    cdef const Privacy* priv = cf.priv
    cdef i64 size = b.size[c] + (inn >= 0) - (out >= 0), r, n_ent = 0, m_sens = 0
    cdef Py_ssize_t j, n_codes = priv.ip[P_N_SENS], stop
    if not cf.general:
        return size >= cf.k
    if size < cf.k or size <= 0:
        return False
    b.stamp += 1
    if b.sens != NULL:
        for j in range(n_codes):
            b.hist[j] = 0
    stop = b.size[c]
    for j in range(stop + 1):
        if j < stop:
            r = b.mem[c * b.m + j]
            if r == out:
                continue
        else:
            if inn < 0:
                break
            r = inn
        if b.ent != NULL and b.seen_ent[b.ent[r]] != b.stamp:
            b.seen_ent[b.ent[r]] = b.stamp
            n_ent += 1
        if b.sens != NULL:
            if b.pair != NULL:
                if b.seen_pair[b.pair[r]] != b.stamp:
                    b.seen_pair[b.pair[r]] = b.stamp
                    b.hist[b.sens[r]] += 1
                    m_sens += 1
            else:
                b.hist[b.sens[r]] += 1
                m_sens += 1
    if b.ent != NULL and n_ent < cf.k:
        return False
    if b.sens != NULL and not hist_ok(b.hist, n_codes, m_sens, priv):
        return False
    return True


cdef double _reduction(const Block* b, const Config* cf, i64 r) noexcept nogil:
    """What row ``r`` widens its class by: size times the spans it alone stretches.

    Adding a row never lowers a class's cost, so a swap of ``r`` and ``s``
    gains at most ``_reduction(r) + _reduction(s)``; rows inside their class's
    box (zero) are only ever taken by a swap with a row that is not.
    """
    cdef Py_ssize_t c = b.cl[r]
    cdef i64 size = b.size[c]
    if size <= 1:
        return b.cost[c]
    return b.cost[c] - _cost_changed(b, cf, c, r, -1) * <double>size / <double>(size - 1)


cdef void _sort_desc(i64* order, const double* v, Py_ssize_t m) noexcept nogil:
    """Sort ``order`` by ``v`` descending, ties by row (Shell sort; m is small)."""
    cdef Py_ssize_t gap = 1, i, j
    cdef i64 t
    while gap < m // 3:
        gap = 3 * gap + 1
    while gap > 0:
        for i in range(gap, m):
            t = order[i]
            j = i
            while j >= gap and (v[order[j - gap]] < v[t]
                                or (v[order[j - gap]] == v[t] and order[j - gap] > t)):
                order[j] = order[j - gap]
                j -= gap
            order[j] = t
        gap = gap // 3


cdef void _update_reductions(Block* b, const Config* cf, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t j
    cdef i64 r
    for j in range(b.size[c]):
        r = b.mem[c * b.m + j]
        b.red[r] = _reduction(b, cf, r)


cdef i64 _improve(Block* b, const Config* cf) noexcept nogil:
    """Moves and swaps that lower the block's cost, until none does; how many were made."""
    cdef Py_ssize_t p, i, j, jj, c, best_j, best_c
    cdef i64 a, bc, made = 0, pass_made
    cdef double base, tol, wo, g, best
    cdef bint can_leave
    for p in range(cf.passes):
        pass_made = 0
        base = 0.0
        for c in range(b.ncl):
            base += b.cost[c]
        tol = TOL * base + 1e-300
        for i in range(b.m):
            b.red[i] = _reduction(b, cf, i)
            b.order[i] = i
        _sort_desc(b.order, b.red, b.m)
        for i in range(b.m):
            a = b.cl[i]
            best = tol
            best_j = -1
            best_c = -1
            wo = _cost_changed(b, cf, a, i, -1)
            can_leave = b.size[a] > 1 and (b.size[a] > cf.k or cf.general)
            if can_leave and cf.general:
                can_leave = _passes(b, cf, a, i, -1)
            if can_leave:
                for c in range(b.ncl):
                    if c == a:
                        continue
                    g = b.cost[a] - wo + b.cost[c] - _cost_changed(b, cf, c, -1, i)
                    if g > best and (not cf.general or _passes(b, cf, c, -1, i)):
                        best = g
                        best_c = c
            for jj in range(b.m):
                j = b.order[jj]
                if b.red[i] + b.red[j] <= best:
                    break
                bc = b.cl[j]
                if bc == a:
                    continue
                # The new class of j's gains at most red[j]: skip the second cost.
                g = b.cost[a] - _cost_changed(b, cf, a, i, j)
                if g + b.red[j] <= best:
                    continue
                g += b.cost[bc] - _cost_changed(b, cf, bc, j, i)
                if g > best and (not cf.general or (_passes(b, cf, a, i, j)
                                                     and _passes(b, cf, bc, j, i))):
                    best = g
                    best_j = j
                    best_c = -1
            if best_j >= 0:
                bc = b.cl[best_j]
                _remove(b, cf, i)
                _remove(b, cf, best_j)
                _add(b, cf, bc, i)
                _add(b, cf, a, best_j)
            elif best_c >= 0:
                bc = best_c
                _remove(b, cf, i)
                _add(b, cf, bc, i)
            else:
                continue
            _refresh(b, cf, a)
            _refresh(b, cf, bc)
            _update_reductions(b, cf, a)
            _update_reductions(b, cf, bc)
            pass_made += 1
        made += pass_made
        if pass_made == 0:
            break
    return made


cdef void _new_class(Block* b, const Config* cf) noexcept nogil:
    """Open an empty class."""
    cdef Py_ssize_t c = b.ncl, q, j
    b.ncl += 1
    b.size[c] = 0
    for q in range(b.d):
        b.ndist[c * b.d + q] = 0
    for j in range(cf.nom):
        b.cnt[c * cf.nom + j] = 0


cdef void _assign(Block* b, const Config* cf, const i64* cls) noexcept nogil:
    """Rebuild the classes from each row's class id (``0..ncl-1``, all used)."""
    cdef Py_ssize_t i, c, nc = 0
    for i in range(b.m):
        if cls[i] + 1 > nc:
            nc = cls[i] + 1
    b.ncl = 0
    for c in range(nc):
        _new_class(b, cf)
    for i in range(b.m):
        _add(b, cf, cls[i], i)
    for c in range(nc):
        _refresh(b, cf, c)


cdef double _total(const Block* b) noexcept nogil:
    cdef double total = 0.0
    cdef Py_ssize_t c
    for c in range(b.ncl):
        total += b.cost[c]
    return total


cdef bint _kmember(Block* b, const Config* cf) noexcept nogil:
    """Greedy k-member clustering of the block's rows; False if a class fails the constraint.

    A class starts from the free row furthest from the previous class's first
    row and takes the free row that widens it least until it passes; rows
    left over join the class they widen least.
    """
    cdef Py_ssize_t i, x, c, best_x, far
    cdef i64 n_free = b.m, seed = 0
    cdef double g, best_g, far_g
    for i in range(b.m):
        b.free[i] = 1
    b.ncl = 0
    while n_free >= cf.k and b.ncl < b.cap:
        c = b.ncl
        _new_class(b, cf)
        _add(b, cf, c, seed)
        b.free[seed] = 0
        n_free -= 1
        _refresh(b, cf, c)
        far = -1
        far_g = -1.0
        for x in range(b.m):
            if b.free[x]:
                g = _cost_changed(b, cf, c, -1, x)
                if g > far_g:
                    far_g = g
                    far = x
        while n_free > 0 and not _passes(b, cf, c, -1, -1):
            best_x = -1
            best_g = 0.0
            for x in range(b.m):
                if b.free[x]:
                    g = _cost_changed(b, cf, c, -1, x)
                    if best_x < 0 or g < best_g:
                        best_g = g
                        best_x = x
            _add(b, cf, c, best_x)
            b.free[best_x] = 0
            n_free -= 1
            _refresh(b, cf, c)
        if n_free == 0:
            break
        if far >= 0 and b.free[far]:
            seed = far
        else:
            seed = 0
            while not b.free[seed]:
                seed += 1
    for x in range(b.m):
        if not b.free[x]:
            continue
        best_x = -1
        best_g = 0.0
        for c in range(b.ncl):
            g = _cost_changed(b, cf, c, -1, x) - b.cost[c]
            if best_x < 0 or g < best_g:
                best_g = g
                best_x = c
        if best_x < 0:
            return False
        _add(b, cf, best_x, x)
        b.free[x] = 0
        _refresh(b, cf, best_x)
    for c in range(b.ncl):
        if not _passes(b, cf, c, -1, -1):
            return False
    return True


cdef void _local_codes(const i64* codes, Py_ssize_t m, i64* out) noexcept nogil:
    """``out[i]``: the position of the first row holding ``codes[i]``."""
    cdef Py_ssize_t i, j
    for i in range(m):
        out[i] = i
        for j in range(i):
            if codes[j] == codes[i]:
                out[i] = j
                break


cdef int _refine_block(i64* data, i64* scratch, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t s,
                       Py_ssize_t e, unsigned char* class_start, Block* b,
                       const Config* cf) noexcept nogil:
    """Refine the classes of positions ``[s, e)``; rewrite them there in class order."""
    cdef Py_ssize_t m = e - s, d = cf.qi.d, q, i, j, c, r, w
    cdef bint changed
    cdef double mondrian_cost
    cdef const Privacy* priv = cf.priv
    cdef i64 v
    b.m = m
    b.d = d
    for q in range(d):
        for i in range(m):
            v = data[q * n + s + i]
            b.x[q * m + i] = v
    b.sens = NULL
    b.ent = NULL
    b.pair = NULL
    if priv.ip[P_SENS_ROW] >= 0:
        b.sens = data + priv.ip[P_SENS_ROW] * n + s
    # Entity and pair codes renumbered within the block, so the marks that
    # count them cost the block's rows, not the table's entities.
    if priv.ip[P_ENT_ROW] >= 0:
        _local_codes(data + priv.ip[P_ENT_ROW] * n + s, m, b.ent_l)
        b.ent = b.ent_l
    if priv.ip[P_PAIR_ROW] >= 0:
        _local_codes(data + priv.ip[P_PAIR_ROW] * n + s, m, b.pair_l)
        b.pair = b.pair_l
    c = -1
    for i in range(m):
        if class_start[s + i] or i == 0:
            c += 1
        b.keep[i] = c
    if c + 1 > b.cap or c < 1:
        return 0  # one class, or more than the work space holds: left as it is
    _assign(b, cf, b.keep)
    changed = _improve(b, cf) > 0
    # Mondrian's classes hold up to 2k - 1 rows, which no move or swap can split:
    # the block is also clustered afresh into classes of k rows (greedy k-member,
    # Byun et al. 2007), refined the same way, and the cheaper is kept.
    mondrian_cost = _total(b)
    for i in range(m):
        b.keep[i] = b.cl[i]
    if _kmember(b, cf):
        _improve(b, cf)
        if _total(b) < mondrian_cost * (1.0 - TOL):
            changed = True
        else:
            _assign(b, cf, b.keep)
    else:
        _assign(b, cf, b.keep)
    if not changed:
        return 0
    # Rewrite the block's columns (keys, riding codes, row ids) class by class.
    w = 0
    for c in range(b.ncl):
        for j in range(b.size[c]):
            i = b.mem[c * m + j]
            for r in range(rows):
                scratch[r * n + s + w] = data[r * n + s + i]
            class_start[s + w] = j == 0
            w += 1
    for r in range(rows):
        for i in range(s, e):
            data[r * n + i] = scratch[r * n + i]
    return 1


cdef bint _alloc(Block* b, Py_ssize_t m, Py_ssize_t cap, Py_ssize_t d, Py_ssize_t nom,
                 Py_ssize_t n_seen, Py_ssize_t n_sens) noexcept nogil:
    b.cap = cap
    b.stamp = 0
    b.x = <i64*>malloc(d * m * sizeof(i64) + 8)
    b.cl = <i64*>malloc(m * sizeof(i64) + 8)
    b.slot = <i64*>malloc(m * sizeof(i64) + 8)
    b.mem = <i64*>malloc(cap * m * sizeof(i64) + 8)
    b.size = <i64*>malloc(cap * sizeof(i64) + 8)
    b.lo = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.lo_n = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.lo2 = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.hi = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.hi_n = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.hi2 = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.nmiss = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.ndist = <i64*>malloc(cap * d * sizeof(i64) + 8)
    b.cnt = <i64*>malloc(cap * nom * sizeof(i64) + 8)
    b.cost = <double*>malloc(cap * sizeof(double) + 8)
    b.red = <double*>malloc(m * sizeof(double) + 8)
    b.order = <i64*>malloc(m * sizeof(i64) + 8)
    b.keep = <i64*>malloc(m * sizeof(i64) + 8)
    b.free = <i64*>malloc(m * sizeof(i64) + 8)
    b.ent_l = <i64*>malloc(m * sizeof(i64) + 8)
    b.pair_l = <i64*>malloc(m * sizeof(i64) + 8)
    b.seen_ent = <i64*>calloc(m + 1, sizeof(i64))
    b.seen_pair = <i64*>calloc(m + 1, sizeof(i64))
    b.hist = <i64*>malloc(n_sens * sizeof(i64) + 8)
    return not (b.x == NULL or b.cl == NULL or b.slot == NULL or b.mem == NULL
                or b.size == NULL or b.lo == NULL or b.lo_n == NULL or b.lo2 == NULL
                or b.hi == NULL or b.hi_n == NULL or b.hi2 == NULL or b.nmiss == NULL
                or b.ndist == NULL or b.cnt == NULL or b.cost == NULL or b.red == NULL or b.order == NULL
                or b.keep == NULL or b.free == NULL or b.seen_ent == NULL or b.ent_l == NULL or b.pair_l == NULL
                or b.seen_pair == NULL or b.hist == NULL)


cdef int _refine_one(i64* data, i64* scratch, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t s,
                     Py_ssize_t e, unsigned char* class_start, const Config* cf,
                     Py_ssize_t block_rows, Py_ssize_t cap, Py_ssize_t n_seen,
                     Py_ssize_t n_sens) noexcept nogil:
    """One block with its own work space: -1 out of memory, 1 changed, 0 left as it was."""
    cdef Block b
    cdef int status = -1
    if _alloc(&b, e - s, cap, cf.qi.d, cf.nom, n_seen, n_sens):
        status = _refine_block(data, scratch, rows, n, s, e, class_start, &b, cf)
    _free(&b)
    return status


cdef void _free(Block* b) noexcept nogil:
    free(b.x)
    free(b.cl)
    free(b.slot)
    free(b.mem)
    free(b.size)
    free(b.lo)
    free(b.lo_n)
    free(b.lo2)
    free(b.hi)
    free(b.hi_n)
    free(b.hi2)
    free(b.nmiss)
    free(b.ndist)
    free(b.cnt)
    free(b.cost)
    free(b.red)
    free(b.order)
    free(b.keep)
    free(b.free)
    free(b.ent_l)
    free(b.pair_l)
    free(b.seen_ent)
    free(b.seen_pair)
    free(b.hist)


def refine_partition(bufs_keys, class_start, rules, Py_ssize_t block_rows, Py_ssize_t passes,
                     bint shifted=False, roots=None, int n_threads=1):
    """Move and swap rows between neighbouring classes while the NCP drops.

    Parameters
    ----------
    bufs_keys : int64 array (2, r, n), C-contiguous
        The kernel's double buffer after :func:`~dmondrian._kernel.tree.mondrian_partition`:
        ``bufs_keys[0]`` in class order (keys, riding codes, row ids). Its
        columns are reordered in place so each refined class is again a
        contiguous run; ``bufs_keys[1]`` is scratch.
    class_start : bool array (n,)
        True at the first position of each class; updated in place.
    rules : dmondrian._kernel.rules.KernelRules
        The rules the partition was made with (QIs, privacy constraint).
    block_rows : int
        Most rows of a block of consecutive classes refined together.
    passes : int
        Most passes over a block's rows.
    shifted : bool, default False
        Close the first block at half ``block_rows``, so that a second call
        moves rows across the boundaries of the first call's blocks.
    roots : int64 array, optional
        Positions where an independent root starts (the distributed
        engine's leaves): no block spans one, so rows never leave their root.
    n_threads : int, default 1
        Threads refining blocks; the result does not depend on it.

    Returns
    -------
    int
        The number of blocks changed.
    """
    cdef i64[:, :, ::1] bv = bufs_keys
    cdef unsigned char[::1] cs = class_start.view(np.uint8)
    cdef RuleArrays config = RuleArrays(rules)
    cdef Py_ssize_t d = config.rules.qi.d, n = bv.shape[2], rows = bv.shape[1], q, i, c
    cdef Py_ssize_t nb = 0, s, size, nom = 0, cap, n_seen, n_sens, limit
    cdef i64 k = config.rules.priv.ip[P_K]
    cdef Config cf
    cdef int changed = 0, failed = 0
    if bv.shape[0] != 2 or cs.shape[0] != n:
        raise ValueError("bufs_keys must be the (2, rows, n) double buffer of class_start")
    if n == 0 or block_rows < 2 or passes < 1:
        return 0
    noff = np.full(d + 1, -1, dtype=np.int64)
    for q in range(d):
        if rules.kinds[q] == KIND_NOMINAL and 0 < rules.cards[q] <= DENSE_CODES:
            noff[q] = nom
            nom += rules.cards[q]
    cdef const i64[::1] nv = noff
    # Blocks: runs of consecutive classes of at most block_rows rows in all.
    starts = np.flatnonzero(class_start)
    sizes = np.diff(np.append(starts, n))
    bounds = []
    s = 0
    size = 0
    limit = block_rows // 2 if shifted else block_rows
    is_root = np.zeros(n + 1, dtype=np.bool_)
    if roots is not None:
        is_root[np.asarray(roots, dtype=np.int64)] = True
    for c in range(starts.shape[0]):
        if size > 0 and (size + sizes[c] > limit or is_root[starts[c]]):
            limit = block_rows
            bounds.append((s, starts[c]))
            s = starts[c]
            size = 0
        size += sizes[c]
    bounds.append((s, n))
    block_arr = np.array([b for b in bounds if b[1] - b[0] <= block_rows], dtype=np.int64)
    block_arr = block_arr.reshape(-1, 2)
    cdef const i64[:, ::1] bl = block_arr
    nb = bl.shape[0]
    if nb == 0:
        return 0
    cap = block_rows // max(k, 1) + 1
    n_seen = max(int(config.rules.priv.ip[P_N_SEEN]), 0)
    n_sens = max(int(config.rules.priv.ip[P_N_SENS]), 0)
    cf.qi = &config.rules.qi
    cf.priv = &config.rules.priv
    cf.noff = &nv[0]
    cf.nom = nom
    cf.k = k
    cf.general = (config.rules.priv.ip[P_ENT_ROW] >= 0 or config.rules.priv.ip[P_SENS_ROW] >= 0)
    cf.passes = passes
    cdef i64* data = &bv[0, 0, 0]
    cdef i64* scratch = &bv[1, 0, 0]
    cdef int status
    for i in prange(nb, nogil=True, num_threads=n_threads if n_threads > 0 else 1,
                    schedule="dynamic", chunksize=1):
        status = _refine_one(data, scratch, rows, n, bl[i, 0], bl[i, 1], &cs[0], &cf,
                             block_rows, cap, n_seen, n_sens)
        # Sums, which prange reduces (a plain assignment would be lastprivate).
        failed += status < 0
        changed += status > 0
    if failed:
        raise MemoryError("not enough memory for the refinement's work space")
    return changed
