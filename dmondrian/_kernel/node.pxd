from ._common cimport i64, MISSING_KEY, KIND_NOMINAL
from ._rules cimport QIRules, WorkRows


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


cdef i64 hier_lca(i64 lo, i64 hi, i64 hoff, i64 loff, const QIRules* qi) noexcept nogil
cdef double node_span(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 lo, i64 hi, i64 miss,
                      i64 kind, double scale, i64 hoff, i64 loff, const QIRules* qi,
                      const WorkRows* ws) noexcept nogil
cdef void nominal_ranks(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 card,
                        const WorkRows* ws) noexcept nogil
