from ._common cimport i64
from ._rules cimport Buffers, Node, Rules, WorkRows

cdef struct Choice:
    # The "ncp" objective's cut: QI j, rows <= t (frequency ranks when
    # ranked) go left. n_left == 0: no cut found.
    i64 j
    i64 n_left
    i64 t
    bint ranked

cdef Py_ssize_t ncp_words(Py_ssize_t d) noexcept nogil
cdef Choice ncp_cut(const Buffers* bufs, const Node* node, const double* spans,
                    const Rules* rules, const WorkRows* ws, i64* spare) noexcept nogil
