from ._common cimport i64
from ._rules cimport Buffers, Rules, WorkRows

cdef void column_stats(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 kind, i64 card,
                       i64* lo, i64* hi, i64* aux) noexcept nogil
cdef i64 split_node(const Buffers* bufs, Py_ssize_t s, Py_ssize_t e, i64 depth, i64 buf,
                    const i64* lo, const i64* hi, const i64* miss,
                    i64* child_lo, i64* child_hi, i64* child_miss, const Rules* rules,
                    unsigned char* class_start, double* spans, const WorkRows* ws) noexcept nogil
cdef void make_class(const Buffers* bufs, Py_ssize_t s, Py_ssize_t e, i64 buf,
                     unsigned char* class_start, const Rules* rules, const i64* lo,
                     const i64* hi, const i64* miss) noexcept nogil
cdef Py_ssize_t workspace_width(const i64* cards, Py_ssize_t d, i64 n_sens,
                                Py_ssize_t rows) noexcept nogil


cdef class RuleArrays:
    # The Rules of a kernel call over arrays this object keeps alive.
    cdef Rules rules
    cdef list _arrays
