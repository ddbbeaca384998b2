"""The "ncp" objective: cut where the two children cost the least NCP.

Median Mondrian cuts the QI of widest normalized span at its median, without
looking at what the cut costs. Here the two widest QIs of a node are
scored: along each, the node's rows are grouped into ordered buckets
(equal-width key ranges, frequency ranks for nominal QIs; as many buckets
as rows, at most 2047, so small key ranges get one bucket per key), every
QI's statistics are gathered per bucket in one pass, and a prefix and a
suffix sweep give, at every bucket boundary, the cost of the two children:

    n_left * sum_q span_q(left) + n_right * sum_q span_q(right),

the NCP the children would publish if they were classes. The cheapest
boundary wins among those that leave between a quarter and three quarters
of the rows on the left (so the tree stays shallow), and the balanced
boundary (nearest the middle) is always a candidate. The caller checks the
privacy constraint on the chosen cut (and falls back to the median cut).

A nominal QI with more than ``MASK_CARD`` codes cannot count the children's
codes cheaply: it is scored at the node's own span on both sides.
"""

from libc.math cimport INFINITY

from ._common cimport (i64, u64, MISSING_KEY, INT_MIN, FLOAT_MAX, popcount, key_value,
                       KIND_NOMINAL, KIND_ORDINAL, KIND_HIERARCHY)
from ._rules cimport (Buffers, Node, Rules, QIRules, WorkRows, buf_row, ws_row, WS_COUNTS,
                      WS_RANK, WS_CUM, BUCKETS, MASK_CARD, P_K)
from .node cimport is_constant, nominal_ranks, ordered_span, rank_at


cdef Py_ssize_t ncp_words(Py_ssize_t d) noexcept nogil:
    """int64 words of a thread's scoring memory: per-bucket statistics of
    every QI, the left costs, the running statistics and the scored QIs."""
    return (3 * d + 1) * BUCKETS + 4 * d + 1


cdef inline double _side_cost(const i64* act, Py_ssize_t n_act, const i64* alo,
                              const i64* ahi, const i64* ams, double fixed,
                              const QIRules* qi, const WorkRows* ws) noexcept nogil:
    """Summed normalized spans of one side from its running statistics.

    ``act`` lists the QIs with statistics; ``fixed`` is the spans of the
    nominal QIs scored at the node's span.
    """
    cdef Py_ssize_t a, q
    cdef double total = fixed
    for a in range(n_act):
        q = act[a]
        if qi.kind[q] == KIND_NOMINAL:
            if qi.scale[q] > 0.0:
                total += <double>(popcount(<u64>alo[q]) - 1) / qi.scale[q]
        else:
            total += ordered_span(alo[q], ahi[q], ams[q], qi.kind[q], qi.scale[q], qi.hoff[q],
                                  qi.loff[q], qi)
    return total


cdef struct Scoring:
    # One node's buckets along the scored QI, in the thread's scoring memory
    # (see ncp_words): rows per bucket, every row's bucket, every QI's
    # statistics per bucket (nominal: the code mask in blo), the left costs,
    # the running statistics and the QIs that have statistics.
    i64 nb
    int shift
    i64* cnt
    i64* bid
    i64* blo
    i64* bhi
    i64* bms
    double* lcost
    i64* alo
    i64* ahi
    i64* ams
    i64* act
    Py_ssize_t n_act
    double fixed       # spans of the nominal QIs scored at the node's span


cdef inline void _reset(Scoring* sc, const QIRules* qi) noexcept nogil:
    cdef Py_ssize_t a, q
    cdef i64* alo = sc.alo
    cdef i64* ahi = sc.ahi
    cdef i64* ams = sc.ams
    cdef const i64* act = sc.act
    for a in range(sc.n_act):
        q = act[a]
        alo[q] = 0 if qi.kind[q] == KIND_NOMINAL else MISSING_KEY
        ahi[q] = INT_MIN
        ams[q] = 0


cdef inline void _fold(Scoring* sc, Py_ssize_t b, const QIRules* qi) noexcept nogil:
    """Fold bucket ``b``'s statistics into the running ones."""
    cdef Py_ssize_t a, q, x
    # Locals: the folds' writes could otherwise alias the Scoring's fields.
    cdef i64* alo = sc.alo
    cdef i64* ahi = sc.ahi
    cdef i64* ams = sc.ams
    cdef const i64* blo = sc.blo
    cdef const i64* bhi = sc.bhi
    cdef const i64* bms = sc.bms
    cdef const i64* act = sc.act
    for a in range(sc.n_act):
        q = act[a]
        x = q * BUCKETS + b
        if qi.kind[q] == KIND_NOMINAL:
            alo[q] = <i64>(<u64>alo[q] | <u64>blo[x])
        else:
            alo[q] = blo[x] if blo[x] < alo[q] else alo[q]
            ahi[q] = bhi[x] if bhi[x] > ahi[q] else ahi[q]
            ams[q] += bms[x]


cdef inline void _scoring(Scoring* sc, Py_ssize_t d, const WorkRows* ws,
                          i64* bid) noexcept nogil:
    """Lay the scoring memory out (see ncp_words)."""
    cdef Py_ssize_t B = BUCKETS
    sc.cnt = ws_row(ws, WS_COUNTS)
    sc.bid = bid
    sc.blo = ws.ncp
    sc.bhi = sc.blo + d * B
    sc.bms = sc.bhi + d * B
    sc.lcost = <double*>(sc.bms + d * B)
    sc.alo = <i64*>(sc.lcost + B)
    sc.ahi = sc.alo + d
    sc.ams = sc.ahi + d
    sc.act = sc.ams + d
    sc.n_act = 0
    sc.fixed = 0.0


cdef void _bucket_rows(const i64* row, const Node* node, Py_ssize_t j, bint ranked,
                       const QIRules* qi, const WorkRows* ws, Scoring* sc) noexcept nogil:
    """Every row's bucket along QI ``j`` (``row``) and the rows of each bucket.

    No more buckets than rows (a small node's sweeps stay small); missing
    keys get the last one.
    """
    cdef Py_ssize_t s = node.s, e = node.e
    cdef const i64* lo = node.lo
    cdef const i64* hi = node.hi
    cdef const i64* miss = node.miss
    cdef i64 n = e - s, limit = BUCKETS - 1 if n >= BUCKETS - 1 else n, m, v, nb
    cdef const i64* rank = ws_row(ws, WS_RANK)
    cdef int shift = 0
    cdef u64 span
    cdef Py_ssize_t i, b
    if ranked:
        nominal_ranks(row, s, e, qi.card[j], ws)
        m = rank_at(ws_row(ws, WS_CUM), n - 1) + 1  # codes present
        while ((m - 1) >> shift) >= limit:
            shift += 1
        nb = ((m - 1) >> shift) + 1
        for i in range(s, e):
            sc.bid[i - s] = rank[row[i]] >> shift
    else:
        span = <u64>hi[j] - <u64>lo[j]
        while (span >> shift) >= <u64>limit:
            shift += 1
        nb = <i64>(span >> shift) + 1
        for i in range(s, e):
            v = row[i]
            sc.bid[i - s] = nb if v == MISSING_KEY else <i64>((<u64>v - <u64>lo[j]) >> shift)
        nb += miss[j] > 0
    sc.nb = nb
    sc.shift = shift
    if nb < 2:
        return
    for b in range(nb):
        sc.cnt[b] = 0
    for i in range(n):
        sc.cnt[sc.bid[i]] += 1


cdef bint _window(const Scoring* sc, i64 n, i64 k, i64* first_in, i64* last_in) noexcept nogil:
    """The boundaries worth a cost, ``first_in..last_in``; False when none is allowed.

    Those leaving a quarter to three quarters of the rows on the left, and
    the nearest allowed one on either side (one of which is the balanced
    cut when none is inside).
    """
    cdef i64 left = 0, below = -1, above = -1, lo_in = -1, hi_in = -1, b
    for b in range(sc.nb - 1):
        left += sc.cnt[b]
        if sc.cnt[b] == 0 or left < k or n - left < k:
            continue
        if 4 * left < n:
            below = b
        elif 4 * left <= 3 * n:
            lo_in = b if lo_in < 0 else lo_in
            hi_in = b
        elif above < 0:
            above = b
    if lo_in < 0 and below < 0 and above < 0:
        return False
    first_in[0] = below if below >= 0 else (lo_in if lo_in >= 0 else above)
    last_in[0] = above if above >= 0 else (hi_in if hi_in >= 0 else below)
    return True


cdef void _bucket_stats(const Buffers* bufs, const Node* node, const double* spans,
                        const QIRules* qi, Scoring* sc) noexcept nogil:
    """Per bucket, the statistics of every QI not constant in the node."""
    cdef Py_ssize_t q, i, b, x, B = BUCKETS, s = node.s, e = node.e
    cdef const i64* lo = node.lo
    cdef const i64* hi = node.hi
    cdef const i64* miss = node.miss
    cdef const i64* kr
    cdef i64 v
    for q in range(qi.d):
        if is_constant(qi.kind[q], lo[q], hi[q], miss[q]):
            continue
        if qi.kind[q] == KIND_NOMINAL and qi.card[q] > MASK_CARD:
            sc.fixed += spans[q]
            continue
        sc.act[sc.n_act] = q
        sc.n_act += 1
        kr = buf_row(bufs, node.buf, q)
        if qi.kind[q] == KIND_NOMINAL:
            for b in range(sc.nb):
                sc.blo[q * B + b] = 0
            for i in range(s, e):
                x = q * B + sc.bid[i - s]
                sc.blo[x] = <i64>(<u64>sc.blo[x] | ((<u64>1) << (<u64>kr[i])))
            continue
        for b in range(sc.nb):
            sc.blo[q * B + b] = MISSING_KEY
            sc.bhi[q * B + b] = INT_MIN
            sc.bms[q * B + b] = 0
        for i in range(s, e):
            v = kr[i]
            x = q * B + sc.bid[i - s]
            if v == MISSING_KEY:
                sc.bms[x] += 1
            else:
                sc.blo[x] = v if v < sc.blo[x] else sc.blo[x]
                sc.bhi[x] = v if v > sc.bhi[x] else sc.bhi[x]


cdef double _sweep(Scoring* sc, i64 n, i64 k, i64 first_in, i64 last_in, const QIRules* qi,
                   const WorkRows* ws, i64* best_b, i64* best_left) noexcept nogil:
    """The cheapest boundary of the window (``best_b``, ``best_left``) and its cost.

    A prefix sweep gives the left child's cost at each boundary, a suffix
    sweep adds the right child's; the balanced boundary wins when it is
    cheaper than every one inside the window, or none is. INFINITY if none.
    """
    cdef i64 left = 0, right = 0, b, bal_b = -1, bal_left = 0
    cdef double cost, best = INFINITY, bal = INFINITY
    best_b[0] = -1
    _reset(sc, qi)
    for b in range(last_in + 1):
        _fold(sc, b, qi)
        left += sc.cnt[b]
        sc.lcost[b] = -1.0
        if b >= first_in and sc.cnt[b] > 0 and left >= k and n - left >= k:
            sc.lcost[b] = <double>left * _side_cost(sc.act, sc.n_act, sc.alo, sc.ahi, sc.ams,
                                                    sc.fixed, qi, ws)
    _reset(sc, qi)
    for b in range(sc.nb - 1, first_in, -1):
        _fold(sc, b, qi)
        right += sc.cnt[b]
        if b - 1 > last_in or sc.lcost[b - 1] < 0.0:
            continue
        left = n - right
        cost = sc.lcost[b - 1] + <double>right * _side_cost(sc.act, sc.n_act, sc.alo, sc.ahi,
                                                            sc.ams, sc.fixed, qi, ws)
        if bal_b < 0 or (2 * left - n if 2 * left >= n else n - 2 * left) <= (
                2 * bal_left - n if 2 * bal_left >= n else n - 2 * bal_left):
            bal_b, bal_left, bal = b - 1, left, cost
        if 4 * left >= n and 4 * left <= 3 * n and cost <= best:
            best_b[0], best_left[0], best = b - 1, left, cost
    if bal_b >= 0 and (best_b[0] < 0 or bal < best):
        best_b[0], best_left[0], best = bal_b, bal_left, bal
    return best if best_b[0] >= 0 else INFINITY


cdef double _score(const Buffers* bufs, const Node* node, Py_ssize_t j, const double* spans,
                   const Rules* rules, const WorkRows* ws, i64* spare, Choice* out) noexcept nogil:
    """The cheapest allowed cut of QI ``j`` (``out``) and its cost; INFINITY if none."""
    cdef const QIRules* qi = &rules.qi
    cdef i64 n = node.e - node.s, k = rules.priv.ip[P_K], first_in, last_in, best_b
    cdef i64 best_left = 0
    cdef bint ranked = qi.kind[j] == KIND_NOMINAL
    cdef double best
    cdef Scoring sc
    out.n_left = 0
    _scoring(&sc, qi.d, ws, spare + node.s)
    _bucket_rows(buf_row(bufs, node.buf, j), node, j, ranked, qi, ws, &sc)
    if sc.nb < 2 or not _window(&sc, n, k, &first_in, &last_in):
        return INFINITY
    _bucket_stats(bufs, node, spans, qi, &sc)
    best = _sweep(&sc, n, k, first_in, last_in, qi, ws, &best_b, &best_left)
    if best_b < 0:
        return INFINITY
    out.j = j
    out.n_left = best_left
    out.ranked = ranked
    if ranked:
        out.t = ((best_b + 1) << sc.shift) - 1
    else:
        # The last key of bucket best_b; never past the node's largest key,
        # so missing keys stay right.
        out.t = <i64>(<u64>node.lo[j] + ((<u64>(best_b + 1)) << sc.shift) - 1)
        if out.t > node.hi[j]:
            out.t = node.hi[j]
    return best


cdef Choice ncp_cut(const Buffers* bufs, const Node* node, const double* spans,
                    const Rules* rules, const WorkRows* ws, i64* spare) noexcept nogil:
    """The cheapest cut of a node along its two widest QIs (``n_left`` 0: none).

    ``spans`` are the node's normalized spans; ``spare[node.s:node.e]`` is free room.
    """
    cdef Py_ssize_t d = rules.qi.d, q, j1 = -1, j2 = -1, t
    cdef Choice best, c
    cdef double best_cost = INFINITY, cost
    best.n_left = 0
    for q in range(d):
        if spans[q] <= 0.0:
            continue
        if j1 < 0 or spans[q] > spans[j1]:
            j2 = j1
            j1 = q
        elif j2 < 0 or spans[q] > spans[j2]:
            j2 = q
    for t in range(2):
        q = j1 if t == 0 else j2
        if q < 0:
            break
        cost = _score(bufs, node, q, spans, rules, ws, spare, &c)
        if c.n_left > 0 and cost < best_cost:
            best = c
            best_cost = cost
    return best
