from ._common cimport (i64, MISSING_KEY, FLOAT_MAX, key_value, KIND_NOMINAL, KIND_HIERARCHY,
                       KIND_ORDINAL)
from ._rules cimport Buffers, Node, QIRules, WorkRows

cdef extern from *:
    """
    /* The smallest positive double: a node with two distinct values stays
       cuttable even when its share of a huge global range underflows. */
    #define DM_TINY 5e-324
    """
    const double TINY "DM_TINY"


cdef inline bint is_constant(i64 kind, i64 lo, i64 hi, i64 miss) noexcept nogil:
    """Whether a node's statistics say every row has the same key (then ``lo``).

    Ordered kinds: one present value and no missing one, or only missing
    values. Nominal kinds: one code (unknown, so never constant, above
    MASK_CARD codes). A constant QI stays constant in every descendant.
    """
    if kind == KIND_NOMINAL:
        return miss == 1
    return lo == MISSING_KEY or (lo == hi and miss == 0)


cdef inline i64 rank_at(const i64* cum, i64 pos) noexcept nogil:
    """Smallest rank whose cumulative count exceeds row position ``pos``."""
    cdef i64 r = 0
    while cum[r] <= pos:
        r += 1
    return r


cdef inline i64 hier_lca(i64 lo, i64 hi, i64 hoff, i64 loff, const QIRules* qi) noexcept nogil:
    """The hierarchy node under which leaves ``lo .. hi`` meet (their lowest common ancestor)."""
    cdef i64 node = qi.h_leafnode[loff + lo]
    while not (qi.h_lo[hoff + node] <= lo and hi <= qi.h_hi[hoff + node]):
        node = qi.h_parent[hoff + node]
    return node


cdef inline double ordered_span(i64 lo, i64 hi, i64 miss, i64 kind, double scale, i64 hoff,
                                i64 loff, const QIRules* qi) noexcept nogil:
    """Normalized span of an ordered QI (numeric, datetime, ordinal, hierarchy) over a node
    whose present keys span ``lo .. hi``, ``miss`` of its rows missing: the NCP its
    range would cost. The one rule of the kernel; kinds.base.QIKindSpec.region_span
    states it for the Dask planner.

    * A domain of no width (``scale <= 0``: one value, or none), a node of missing
      values only (NaN, NaT: ``lo`` is MISSING_KEY) or of one value: 0.
    * Missing and present values mixed: 1, the full penalty (it publishes "range
      or missing", which tells an analyst nothing).
    * Else the width over the scale: a hierarchy's common ancestor's leaves, an
      ordinal's codes, a number's or a date's distance (capped at the largest
      double, as from -inf to inf), and never below the smallest positive
      double, so a node of two values stays cuttable.
    """
    cdef double diff, span
    if scale <= 0.0 or lo == MISSING_KEY:
        return 0.0
    if miss > 0:
        return 1.0
    if lo == hi:
        return 0.0
    if kind == KIND_HIERARCHY:
        lo = hier_lca(lo, hi, hoff, loff, qi)
        diff = <double>(qi.h_hi[hoff + lo] - qi.h_lo[hoff + lo])
    elif kind == KIND_ORDINAL:
        diff = <double>(hi - lo)
    else:
        diff = key_value(hi, kind) - key_value(lo, kind)
        if diff > FLOAT_MAX:  # the range of two huge floats overflows
            diff = FLOAT_MAX
    span = diff / scale
    return span if span > 0.0 else TINY
cdef double node_span(const Buffers* bufs, const Node* node, Py_ssize_t j, const QIRules* qi,
                      const WorkRows* ws) noexcept nogil
cdef void nominal_ranks(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 card,
                        const WorkRows* ws) noexcept nogil
