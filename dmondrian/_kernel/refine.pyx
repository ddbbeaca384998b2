"""Local refinement of a partition: clustering inside small blocks of neighbouring classes.

After the cuts, the classes are grouped into blocks: the largest subtrees of the cuts of at most
``block_rows`` rows (tree.subtree_blocks), whole neighbouring regions. A block's cost is the sum
over its classes of size times normalized spans (the rows' NCP, spans as
:func:`dmondrian._kernel.node.node_span` measures them; the struct and the cost helpers are in
refine.pxd). Each block is clustered afresh by greedy k-member (Byun et al. 2007), its rows then
moved or swapped between a class and its ``NEIGHBOURS`` nearest classes while that lowers the cost
(the move/swap refinement of OKA, Goldberger and Tassa), unless the clustering costs KMEMBER_REACH
times Mondrian's classes. Where the result does not beat Mondrian's classes by KMEMBER_MARGIN, those
are refined the same way and the cheaper kept. What cannot pay is skipped unevaluated: Mondrian's
classes' refinement where k-member's is well ahead, a swap by a bound from the spans' submodularity,
a row whose classes did not change since it last found nothing. A block costs about its rows
squared, a table ``n * block_rows``. Why and how: docs/design.md, "Refinement after the cuts".

Every change keeps the constraint: a move needs the class it leaves to keep passing; with an entity
or a sensitive constraint both classes a change touches are checked on their new rows; a k-member
clustering with a failing class is discarded. A change must lower the cost by a relative tolerance,
so the passes end; blocks are independent, so the result does not depend on the thread count. Labels
are computed from each class's own rows later, so they contain them (refined classes may overlap).

Per class and QI the refinement keeps the smallest and largest present keys, their multiplicities
and the next keys inward (the span without any one row in constant time), the missing count and, for
nominal QIs of up to ``DENSE_CODES`` codes, a count per code (larger ones: a scan of the class).
"""

import numpy as np

from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.stdlib cimport calloc, free


cdef void _finish(Block* b, const Config* cf, Py_ssize_t c) noexcept nogil:
    """The cost and spans of class ``c`` from its statistics; its distances are stale."""
    cdef Py_ssize_t q, at, d = b.d
    cdef double share = 0.0
    b.cost[c] = _cost_changed(b, cf, c, -1, -1)
    for q in range(d):
        at = c * d + q
        if cf.qi.kind[q] == KIND_NOMINAL:
            share += _span(cf, q, 1, 0, 0, 0, b.ndist[at])
        else:
            share += _span(cf, q, b.size[c], b.lo[at], b.hi[at], b.nmiss[at], 0)
    b.spans[c] = share
    b.dirty[c] = 1


cdef void _refresh(Block* b, const Config* cf, Py_ssize_t c) noexcept nogil:
    """Recompute the ordered QIs' statistics and the cost of class ``c``."""
    cdef Py_ssize_t q, j, at, d = b.d
    cdef double share
    cdef const i64* row
    cdef const i64* mem = b.mem + c * b.m
    for q in range(d):
        at = c * d + q
        row = b.x + q * b.m
        if cf.qi.kind[q] == KIND_NOMINAL:
            if cf.small[q]:
                b.codes[at] = 0
                for j in range(b.size[c]):
                    b.codes[at] |= (<unsigned long long>1) << row[mem[j]]
            if cf.noff[q] < 0:
                # Each code once, as 1 / its rows per row: the rare large-domain case.
                share = 0.0
                for j in range(b.size[c]):
                    share += 1.0 / <double>_count(b, cf, c, q, row[mem[j]])
                b.ndist[at] = <i64>(share + 0.5)
            continue
        b.lo[at], b.lo_n[at], b.lo2[at], b.nmiss[at] = MISSING_KEY, 0, MISSING_KEY, 0
        b.hi[at], b.hi_n[at], b.hi2[at] = INT_MIN, 0, INT_MIN
        for j in range(b.size[c]):
            _extend(b, at, row[mem[j]])
    _finish(b, cf, c)


cdef void _grown(Block* b, const Config* cf, Py_ssize_t c, i64 r) noexcept nogil:
    """_refresh of class ``c`` after _add put row ``r`` in it, in O(d): the same
    statistics, ``r`` being the last of the class's members."""
    cdef Py_ssize_t q, at, d = b.d
    cdef i64 v
    for q in range(d):
        at = c * d + q
        v = b.x[q * b.m + r]
        if cf.qi.kind[q] != KIND_NOMINAL:
            _extend(b, at, v)
        elif cf.small[q]:
            b.codes[at] |= (<unsigned long long>1) << v
        elif cf.noff[q] < 0 and _count(b, cf, c, q, v) == 1:
            b.ndist[at] += 1
    _finish(b, cf, c)


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
    """Size times the spans row ``r`` alone stretches its class by: adding a row never
    lowers a cost, so a swap of ``r`` and ``s`` gains at most the sum of theirs."""
    cdef Py_ssize_t c = b.cl[r]
    cdef i64 size = b.size[c]
    if size <= 1:
        return b.cost[c]
    return b.cost[c] - _cost_changed(b, cf, c, r, -1) * <double>size / <double>(size - 1)


cdef void _update_reductions(Block* b, const Config* cf, Py_ssize_t c) noexcept nogil:
    cdef Py_ssize_t j
    cdef i64 r
    cdef double top = 0.0
    for j in range(b.size[c]):
        r = b.mem[c * b.m + j]
        b.red[r] = _reduction(b, cf, r)
        if b.red[r] > top:
            top = b.red[r]
    b.maxred[c] = top


cdef double _distance(const Block* b, const Config* cf, Py_ssize_t a, Py_ssize_t c) noexcept nogil:
    """How much wider the union of classes ``a`` and ``c`` is than they are, in spans."""
    cdef Py_ssize_t q, d = b.d, x, y, j
    cdef i64 lo, hi, v
    cdef double total = 0.0, dist
    for q in range(d):
        x = a * d + q
        y = c * d + q
        if cf.small[q]:
            total += _span(cf, q, 2, 0, 0, 0, popcount(b.codes[x] | b.codes[y]))
            continue
        if cf.qi.kind[q] == KIND_NOMINAL:
            # c's codes and a's absent from c: each absent code is counted once,
            # as 1 / (its rows in a) per row of a holding it.
            dist = <double>b.ndist[y]
            for j in range(b.size[a]):
                v = b.x[q * b.m + b.mem[a * b.m + j]]
                if _count(b, cf, c, q, v) == 0:
                    dist += 1.0 / <double>_count(b, cf, a, q, v)
            total += _span(cf, q, 2, 0, 0, 0, <i64>(dist + 0.5))
            continue
        lo = b.lo[x] if b.lo[x] < b.lo[y] else b.lo[y]
        hi = b.hi[x] if b.hi[x] > b.hi[y] else b.hi[y]
        total += _span(cf, q, b.size[a] + b.size[c], lo, hi, b.nmiss[x] + b.nmiss[y], 0)
    # The classes' own spans are kept by _refresh: one span per QI here, not three.
    return total - 0.5 * (b.spans[a] + b.spans[c])


cdef void _offer(Block* b, Py_ssize_t x, Py_ssize_t y, double g) noexcept nogil:
    """Class ``y`` at distance ``g`` as a candidate of ``x``; one left out lowers the threshold."""
    cdef i64* cand = b.cand + x * CANDIDATES
    cdef double* cd = b.cand_d + x * CANDIDATES
    cdef Py_ssize_t t = b.ncand[x]
    if t == CANDIDATES:
        if g > cd[t - 1] or (g == cd[t - 1] and y > cand[t - 1]):
            if g < b.thr[x]:
                b.thr[x] = g
            return
        t -= 1
        if cd[t] < b.thr[x]:
            b.thr[x] = cd[t]
    else:
        b.ncand[x] += 1
    while t > 0 and (cd[t - 1] > g or (cd[t - 1] == g and cand[t - 1] > y)):
        cand[t] = cand[t - 1]
        cd[t] = cd[t - 1]
        t -= 1
    cand[t] = y
    cd[t] = g


cdef void _neighbours(Block* b, const Config* cf) noexcept nogil:
    """Each class's NEIGHBOURS nearest classes (ties by class id).

    The distance is symmetric and changes only with the two classes: only the
    pairs with a class changed since the last call are computed again, each
    offered to both classes' candidates (which the changed classes left first);
    a class without NEIGHBOURS candidates below its threshold scans all again.
    """
    cdef Py_ssize_t a, c, t, w, n, u, n_dirty = 0
    cdef i64 *cand, *nb
    cdef double *cd, g
    cdef bint same
    for a in range(b.ncl):
        cand = b.cand + a * CANDIDATES
        cd = b.cand_d + a * CANDIDATES
        if b.dirty[a]:
            b.dlist[n_dirty] = a
            n_dirty += 1
            b.ncand[a] = 0
            b.thr[a] = INFINITY
            continue
        w = 0
        for t in range(b.ncand[a]):
            if not b.dirty[cand[t]]:
                cand[w] = cand[t]
                cd[w] = cd[t]
                w += 1
        b.ncand[a] = w
    for u in range(n_dirty):
        a = b.dlist[u]
        for c in range(b.ncl):
            if c != a and not (b.dirty[c] and c < a):
                g = _distance(b, cf, a, c)
                _offer(b, a, c, g)
                _offer(b, c, a, g)
    for a in range(b.ncl):
        n = b.ncand[a]
        if (b.thr[a] < INFINITY if n < NEIGHBOURS
                else b.cand_d[a * CANDIDATES + NEIGHBOURS - 1] >= b.thr[a]):
            # A class left out may be nearer: scan them all (the distance is symmetric).
            b.ncand[a] = 0
            b.thr[a] = INFINITY
            for c in range(b.ncl):
                if c != a:
                    _offer(b, a, c, _distance(b, cf, a, c))
            n = b.ncand[a]
        if n > NEIGHBOURS:
            n = NEIGHBOURS
        nb = b.nb + a * NEIGHBOURS
        same = n == b.nbn[a]
        for t in range(n):
            c = b.cand[a * CANDIDATES + t]
            if same and nb[t] != c:
                same = False
            nb[t] = c
        b.nbn[a] = n
        if not same:
            b.nb_changed_at[a] = b.clock
    for u in range(n_dirty):
        b.dirty[b.dlist[u]] = 0


cdef i64 _improve(Block* b, const Config* cf) noexcept nogil:
    """Moves and swaps that lower the block's cost, until none does; how many were made."""
    cdef Py_ssize_t p, i, j, jj, c, t, best_j, best_c
    cdef i64 a, bc, made = 0, pass_made
    cdef double base, tol, wo, g, best, with_i, sw
    cdef double pen[NEIGHBOURS]
    cdef bint skip[NEIGHBOURS]
    cdef bint can_leave, current, full
    # A row is evaluated again only once its class, its class's nearest classes or that list changed
    # since it was last found to have no change that pays (the evaluation depends on nothing else
    # but the tolerance, which only shrinks by a share of the gains made); when only some of those
    # classes changed, against them alone.
    b.clock = 1
    for c in range(b.ncl):
        b.changed_at[c] = 1
        b.nbn[c] = 0
        b.dirty[c] = 1  # candidates of an earlier clustering of the block are stale
    for i in range(b.m):
        b.seen_at[i] = 0
    for p in range(cf.passes):
        b.clock += 1
        pass_made = 0
        base = 0.0
        for c in range(b.ncl):
            base += b.cost[c]
        tol = TOL * base + 1e-300
        if p == 0:
            # Later passes find them current: each change updates its two classes'.
            for c in range(b.ncl):
                _update_reductions(b, cf, c)
        _neighbours(b, cf)
        for i in range(b.m):
            a = b.cl[i]
            full = b.changed_at[a] > b.seen_at[i] or b.nb_changed_at[a] > b.seen_at[i]
            current = not full
            for t in range(b.nbn[a]):
                skip[t] = not full and b.changed_at[b.nb[a * NEIGHBOURS + t]] <= b.seen_at[i]
                if not skip[t]:
                    current = False
            if current:
                continue
            best = tol
            best_j = -1
            best_c = -1
            can_leave = b.size[a] > 1 and (b.size[a] > cf.k or cf.general)
            if can_leave and cf.general:
                can_leave = _passes(b, cf, a, i, -1)
            # Only a move reads it, and a class of k rows (most of k-member's) has none.
            wo = _cost_changed(b, cf, a, i, -1) if can_leave else 0.0
            for t in range(b.nbn[a]):
                if skip[t]:
                    continue
                c = b.nb[a * NEIGHBOURS + t]
                sw = _spans_with(b, cf, c, i)
                with_i = sw * <double>(b.size[c] + 1)
                # What row i alone widens class c by, times its size: its
                # spans without a row j widen at least as much (each span is
                # submodular), so a swap with j gains at most red[j] - pen[t].
                pen[t] = 0.0
                if b.size[c] > 1:
                    pen[t] = (sw * <double>b.size[c] - b.cost[c]) - 1e-12 * (with_i + b.cost[c])
                    if pen[t] < 0.0:
                        pen[t] = 0.0
                g = b.cost[a] - wo + b.cost[c] - with_i
                if can_leave and g > best and (not cf.general or _passes(b, cf, c, -1, i)):
                    best = g
                    best_c = c
            for t in range(b.nbn[a]):
                bc = b.nb[a * NEIGHBOURS + t]
                if skip[t] or b.red[i] + b.maxred[bc] - pen[t] <= best:
                    continue
                for jj in range(b.size[bc]):
                    j = b.mem[bc * b.m + jj]
                    if b.red[i] + b.red[j] - pen[t] <= best:
                        continue
                    # The new class of j's gains at most red[j] - pen[t]: skip the second cost.
                    g = b.cost[a] - _cost_changed(b, cf, a, i, j)
                    if g + b.red[j] - pen[t] <= best:
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
                b.seen_at[i] = b.clock
                continue
            b.clock += 1
            b.changed_at[a] = b.clock
            b.changed_at[bc] = b.clock
            _refresh(b, cf, a)
            _refresh(b, cf, bc)
            _update_reductions(b, cf, a)
            _update_reductions(b, cf, bc)
            pass_made += 1
        made += pass_made
        if pass_made == 0:
            break
    return made


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


cdef void _seed_bounds(Block* b, const Config* cf, Py_ssize_t c) noexcept nogil:
    """``b.lb[x] = _spans_with(b, cf, c, x)`` and ``b.fresh[x] = 0`` for every row
    (those of the taken rows unused).

    QI by QI over the rows (the keys are stored QI-major), every row alike: no
    branch on which rows are free, and the class's statistics read once per QI;
    each row's spans are added in _spans_with's order, so the sums are the same.
    """
    cdef Py_ssize_t q, x, m = b.m, d = b.d, at
    cdef i64 size = b.size[c] + 1, lo, hi, vi, nmiss, ndist
    cdef unsigned long long codes
    cdef const i64* row
    cdef double* lb = b.lb
    cdef const double* tab
    for x in range(m):
        lb[x] = 0.0
        b.fresh[x] = 0
    for q in range(d):
        at = c * d + q
        row = b.x + q * m
        if cf.qi.kind[q] == KIND_NOMINAL:
            ndist = b.ndist[at]
            if cf.small[q] and cf.toff[q] >= 0:
                # _span's table, read at ndist or ndist + 1.
                tab = cf.tab + cf.toff[q] + ndist
                codes = b.codes[at]
                for x in range(m):
                    lb[x] += tab[((codes >> row[x]) & 1) == 0]
            else:
                for x in range(m):
                    lb[x] += _span(cf, q, size, 0, 0, 0,
                                   ndist + (_count(b, cf, c, q, row[x]) == 0))
            continue
        lo = b.lo[at]
        hi = b.hi[at]
        nmiss = b.nmiss[at]
        for x in range(m):
            vi = row[x]
            if vi == MISSING_KEY:
                lb[x] += _span(cf, q, size, lo, hi, nmiss + 1, 0)
            else:
                lb[x] += _span(cf, q, size, lo if lo <= vi else vi, hi if hi >= vi else vi,
                               nmiss, 0)


cdef bint _kmember(Block* b, const Config* cf) noexcept nogil:
    """Greedy k-member clustering of the block's rows; False if a class fails the constraint.

    A class starts from the free row furthest from the block's middle
    (_eccentricity) and takes the free row that widens it least until it
    passes; rows left over join the class they widen least. Peeling the
    block from its edges inward leaves the last, least chosen rows in its
    middle, near every class, where Byun et al.'s seed (the row furthest from
    the previous seed) leaves them scattered.
    """
    cdef Py_ssize_t i, x, c, best_x
    cdef i64 n_free = b.m, seed, step
    cdef Py_ssize_t n_heap
    cdef double g, best_g
    _eccentricity(b, cf)
    for i in range(b.m):
        b.free[i] = 1
    b.ncl = 0
    seed = 0
    for i in range(b.m):
        if b.ecc[i] > b.ecc[seed]:
            seed = i
    while n_free >= cf.k and b.ncl < b.cap:
        c = b.ncl
        _new_class(b, cf)
        _add(b, cf, c, seed)
        b.free[seed] = 0
        n_free -= 1
        _refresh(b, cf, c)
        _seed_bounds(b, cf, c)
        step = 0
        n_heap = 0
        for x in range(b.m):
            # Written for every row, kept for the free (0 or 1): no branch to mispredict.
            b.heap[n_heap].lb = b.lb[x]
            b.heap[n_heap].row = x
            n_heap += b.free[x]
        for i in range(n_heap // 2 - 1, -1, -1):
            _sift_down(b, i, n_heap)
        while n_free > 0 and not _passes(b, cf, c, -1, -1):
            # A class's spans with a row only grow as the class takes rows, so spans computed at an
            # earlier step bound them from below: only the row with the smallest bound is evaluated
            # again, until that bound is current (lazy greedy; the same row as evaluating every one,
            # ties to the first). Spans, not costs: the cost's factor, the class's size, grows at
            # every step for every row alike and would stale every bound.
            while b.fresh[b.heap[0].row] != step:
                best_x = b.heap[0].row
                b.heap[0].lb = _spans_with(b, cf, c, best_x)
                b.fresh[best_x] = step
                _sift_down(b, 0, n_heap)
            best_x = b.heap[0].row
            n_heap -= 1
            b.heap[0] = b.heap[n_heap]
            _sift_down(b, 0, n_heap)
            step += 1
            _add(b, cf, c, best_x)
            b.free[best_x] = 0
            n_free -= 1
            _grown(b, cf, c, best_x)
        if n_free == 0:
            break
        seed = -1
        for x in range(b.m):
            if b.free[x] and (seed < 0 or b.ecc[x] > b.ecc[seed]):
                seed = x
    for x in range(b.m):
        if not b.free[x]:
            continue
        best_x = -1
        best_g = 0.0
        for c in range(b.ncl):
            g = _spans_with(b, cf, c, x) * <double>(b.size[c] + 1) - b.cost[c]
            if best_x < 0 or g < best_g:
                best_g = g
                best_x = c
        if best_x < 0:
            return False
        _add(b, cf, best_x, x)
        b.free[x] = 0
        _grown(b, cf, best_x, x)
    for c in range(b.ncl):
        if not _passes(b, cf, c, -1, -1):
            return False
    return True


cdef int _refine_block(i64* data, i64* scratch, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t s,
                       Py_ssize_t e, unsigned char* class_start, Block* b,
                       const Config* cf) noexcept nogil:
    """Refine the classes of positions ``[s, e)``; rewrite them there in class order."""
    cdef Py_ssize_t m = e - s, d = cf.qi.d, q, i, c
    cdef bint changed
    cdef double mondrian_cost, kmember_cost
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
    if _total(b) <= 0.0:
        return 0  # every class without span already: nothing can cost less
    # Mondrian's classes hold up to 2k - 1 rows, which no move or swap can split:
    # the block is clustered afresh into classes of k rows first (greedy k-member,
    # Byun et al. 2007); Mondrian's classes are refined only where that is not
    # well ahead of them (KMEMBER_MARGIN), and the cheaper is kept.
    mondrian_cost = _total(b)
    kmember_cost = -1.0
    if _kmember(b, cf) and _total(b) < KMEMBER_REACH * mondrian_cost:
        _improve(b, cf)
        kmember_cost = _total(b)
        if kmember_cost < mondrian_cost * (1.0 - KMEMBER_MARGIN):
            return _rewrite(data, scratch, rows, n, s, e, class_start, b)
        for i in range(m):
            b.free[i] = b.cl[i]  # free is k-member's alone: spare until the next block
    _assign(b, cf, b.keep)
    changed = _improve(b, cf) > 0
    if 0.0 <= kmember_cost < _total(b) * (1.0 - TOL):
        _assign(b, cf, b.free)
        changed = True
    if not changed:
        return 0
    return _rewrite(data, scratch, rows, n, s, e, class_start, b)


cdef int _rewrite(i64* data, i64* scratch, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t s,
                  Py_ssize_t e, unsigned char* class_start, const Block* b) noexcept nogil:
    """Rewrite the block's columns (keys, riding codes, row ids) class by class; 1."""
    cdef Py_ssize_t m = e - s, w = 0, c, j, i, r
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


cdef int _refine_one(i64* data, i64* scratch, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t s,
                     Py_ssize_t e, unsigned char* class_start, const Config* cf) noexcept nogil:
    """One block with its own work space: -1 out of memory, 1 changed, 0 left as it was."""
    cdef Block b
    cdef int status
    cdef Py_ssize_t m = e - s, d = cf.qi.d, at = 0, cap = cf.cap, n_sens = cf.n_sens
    # One zeroed arena for every array (the marks must start at zero); doubles
    # are 8 bytes as the int64 words are.
    cdef Py_ssize_t words = (d * m + 15 * m + n_sens + 50 + cap * (
        m + 9 + 9 * d + cf.nom + NEIGHBOURS + 2 * CANDIDATES + 2))
    cdef i64* arena = <i64*>calloc(words, sizeof(i64))
    if arena == NULL:
        return -1
    b.cap = cap
    b.stamp = 0
    b.x = _take(arena, &at, d * m)
    b.cl = _take(arena, &at, m)
    b.slot = _take(arena, &at, m)
    b.mem = _take(arena, &at, cap * m)
    b.size = _take(arena, &at, cap)
    b.lo = _take(arena, &at, cap * d)
    b.lo_n = _take(arena, &at, cap * d)
    b.lo2 = _take(arena, &at, cap * d)
    b.hi = _take(arena, &at, cap * d)
    b.hi_n = _take(arena, &at, cap * d)
    b.hi2 = _take(arena, &at, cap * d)
    b.nmiss = _take(arena, &at, cap * d)
    b.ndist = _take(arena, &at, cap * d)
    b.cnt = _take(arena, &at, cap * cf.nom)
    b.codes = <unsigned long long*>_take(arena, &at, cap * d)
    b.cost = <double*>_take(arena, &at, cap)
    b.spans = <double*>_take(arena, &at, cap)
    b.red = <double*>_take(arena, &at, m)
    b.maxred = <double*>_take(arena, &at, cap)
    b.keep = _take(arena, &at, m)
    b.free = _take(arena, &at, m)
    b.lb = <double*>_take(arena, &at, m)
    b.fresh = _take(arena, &at, m)
    b.heap = <Bound*>_take(arena, &at, 2 * m)
    b.ecc = <double*>_take(arena, &at, m)
    b.cand = _take(arena, &at, cap * CANDIDATES)
    b.cand_d = <double*>_take(arena, &at, cap * CANDIDATES)
    b.ncand = _take(arena, &at, cap)
    b.thr = <double*>_take(arena, &at, cap)
    b.dirty = _take(arena, &at, cap)
    b.dlist = _take(arena, &at, cap)
    b.changed_at = _take(arena, &at, cap)
    b.nb_changed_at = _take(arena, &at, cap)
    b.seen_at = _take(arena, &at, m)
    b.nb = _take(arena, &at, cap * NEIGHBOURS)
    b.nbn = _take(arena, &at, cap)
    b.ent_l = _take(arena, &at, m)
    b.pair_l = _take(arena, &at, m)
    b.seen_ent = _take(arena, &at, m)
    b.seen_pair = _take(arena, &at, m)
    b.hist = _take(arena, &at, n_sens)
    status = _refine_block(data, scratch, rows, n, s, e, class_start, &b, cf)
    free(arena)
    return status


def refine_partition(bufs_keys, class_start, rules, blocks, Py_ssize_t passes, int n_threads=1):
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
    blocks : int64 array (m, 2)
        The ``(start, end)`` positions of the blocks refined each on its own,
        each a run of whole classes (see
        :func:`~dmondrian._kernel.tree.subtree_blocks`).
    passes : int
        Most passes over a block's rows.
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
    cdef Py_ssize_t nom = 0, n_sens, largest
    cdef i64 k = config.rules.priv.ip[P_K]
    cdef Config cf
    cdef int changed = 0, failed = 0
    if bv.shape[0] != 2 or cs.shape[0] != n:
        raise ValueError("bufs_keys must be the (2, rows, n) double buffer of class_start")
    block_arr = np.ascontiguousarray(blocks, dtype=np.int64).reshape(-1, 2)
    if n == 0 or block_arr.shape[0] == 0 or passes < 1:
        return 0
    noff = np.full(d + 1, -1, dtype=np.int64)
    small = np.zeros(d + 1, dtype=np.int64)
    toff = np.full(d + 1, -1, dtype=np.int64)
    tabs = [np.zeros(1)]
    at = 1
    for q in range(d):
        if rules.kinds[q] == KIND_NOMINAL and 0 < rules.cards[q] <= DENSE_CODES:
            noff[q] = nom
            nom += rules.cards[q]
            small[q] = rules.cards[q] <= 64
            if config.rules.qi.scale[q] > 0.0:
                # The IEEE quotient _span would compute, looked up.
                toff[q] = at
                tabs.append((np.arange(rules.cards[q] + 1, dtype=np.float64) - 1.0)
                            / config.rules.qi.scale[q])
                at += rules.cards[q] + 1
    tab = np.concatenate(tabs)
    cdef const i64[::1] nv = noff
    cdef const i64[::1] sv = small
    cdef const i64[::1] tv = toff
    cdef const double[::1] tbv = tab
    # Largest first: the last block a thread takes is a small one, so the threads finish together.
    cdef const i64[:, ::1] bl = np.ascontiguousarray(
        block_arr[np.argsort(block_arr[:, 0] - block_arr[:, 1], kind="stable")])
    n_sens = max(int(config.rules.priv.ip[P_N_SENS]), 0)
    cf.qi = &config.rules.qi
    cf.priv = &config.rules.priv
    cf.noff = &nv[0]
    cf.small = &sv[0]
    cf.toff = &tv[0]
    cf.tab = &tbv[0]
    cf.nom = nom
    cf.k = k
    cf.general = (config.rules.priv.ip[P_ENT_ROW] >= 0 or config.rules.priv.ip[P_SENS_ROW] >= 0)
    cf.passes = passes
    largest = int((block_arr[:, 1] - block_arr[:, 0]).max())
    cf.cap = largest // max(k, 1) + 1
    cf.n_sens = n_sens
    cdef i64* data = &bv[0, 0, 0]
    cdef i64* scratch = &bv[1, 0, 0]
    cdef int status
    for i in prange(bl.shape[0], nogil=True, num_threads=n_threads if n_threads > 0 else 1,
                    schedule="dynamic", chunksize=1):
        status = _refine_one(data, scratch, rows, n, bl[i, 0], bl[i, 1], &cs[0], &cf)
        # Sums, which prange reduces (a plain assignment would be lastprivate).
        failed += status < 0
        changed += status > 0
    if failed:
        raise MemoryError("not enough memory for the refinement's work space (blocks of up "
                          f"to {largest} rows): a smaller refine_rows needs less")
    return changed
