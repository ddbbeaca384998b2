from ._common cimport i64
from ._rules cimport Buffers, Node, Rules, WorkRows

cdef void column_stats(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 kind, i64 card,
                       i64* lo, i64* hi, i64* aux) noexcept nogil
cdef i64 split_node(const Buffers* bufs, const Node* node, i64* child, const Rules* rules,
                    unsigned char* class_start, double* spans, const WorkRows* ws) noexcept nogil
cdef void make_class(const Buffers* bufs, const Node* node, unsigned char* class_start,
                     const Rules* rules) noexcept nogil
cdef Py_ssize_t workspace_width(const i64* cards, Py_ssize_t d, i64 n_sens,
                                Py_ssize_t rows) noexcept nogil


cdef class RuleArrays:
    # The Rules of a kernel call over arrays this object keeps alive.
    cdef Rules rules
    cdef list _arrays
