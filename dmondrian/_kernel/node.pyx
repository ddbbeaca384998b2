"""What a node's rows look like along one QI: its normalized span, its codes by frequency.

A node's span of a QI is the NCP its range would cost (the widest decides
which QI is cut first); a nominal QI is cut in the order of its codes'
frequencies within the node. The ``ncp`` objective also measures the spans
of candidate children with :func:`node_span`.
"""

from ._common cimport i64, KIND_NOMINAL
from ._rules cimport (Buffers, Node, QIRules, WorkRows, buf_row, ws_row, WS_SEEN, WS_COUNTS,
                      WS_ORDER, WS_RANK, WS_CUM)
from .select cimport heapsort


cdef i64 _distinct_codes(const i64* row, Py_ssize_t s, Py_ssize_t e, i64* seen) noexcept nogil:
    """Number of distinct codes in ``row[s:e]``."""
    # ``seen`` holds zeros between calls: only the codes seen here are set,
    # then reset, so a node costs its rows, not the QI's codes.
    cdef i64 distinct = 0, c
    cdef Py_ssize_t i
    for i in range(s, e):
        c = row[i]
        distinct += seen[c] == 0
        seen[c] = 1
    for i in range(s, e):
        seen[row[i]] = 0
    return distinct


cdef double node_span(const Buffers* bufs, const Node* node, Py_ssize_t j, const QIRules* qi,
                      const WorkRows* ws) noexcept nogil:
    """Normalized span of QI ``j`` over the node's rows: the NCP its range would cost.

    The node's statistics of the QI (see column_stats) were measured by the
    parent's split, so no pass over the rows is needed (except for nominal
    QIs with many codes). Ordered QIs: :func:`ordered_span`.
    """
    cdef i64 distinct, kind = qi.kind[j], miss = node.miss[j]
    cdef double scale = qi.scale[j]
    if kind != KIND_NOMINAL:
        return ordered_span(node.lo[j], node.hi[j], miss, kind, scale, qi.hoff[j], qi.loff[j],
                            qi)
    if scale <= 0.0:
        return 0.0
    distinct = miss if miss >= 0 else _distinct_codes(buf_row(bufs, node.buf, j), node.s,
                                                      node.e, ws_row(ws, WS_SEEN))
    return <double>(distinct - 1) / scale


cdef void nominal_ranks(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 card,
                         const WorkRows* ws) noexcept nogil:
    """Rank of every code when the node's values are ordered by frequency.

    Fills ``rank[code]`` and ``cum``, the cumulative row count by rank, in
    rows WS_RANK and WS_CUM of the work space. Most frequent first, ties by
    code (absent codes last), so the order is deterministic.
    """
    cdef i64* counts = ws_row(ws, WS_COUNTS)
    cdef i64* order = ws_row(ws, WS_ORDER)
    cdef i64* rank = ws_row(ws, WS_RANK)
    cdef i64* cum = ws_row(ws, WS_CUM)
    cdef Py_ssize_t i, c, m = 0, r
    cdef i64 acc = 0
    for c in range(card):
        counts[c] = 0
    for i in range(s, e):
        counts[row[i]] += 1
    for c in range(card):
        if counts[c] > 0:
            order[m] = c
            m += 1
    # Only the codes present need sorting; the absent follow in code order.
    heapsort(order, 0, m, counts, True)
    r = m
    for c in range(card):
        if counts[c] == 0:
            order[r] = c
            r += 1
    for r in range(card):
        rank[order[r]] = r
        acc += counts[order[r]]
        cum[r] = acc
