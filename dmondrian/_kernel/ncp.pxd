from ._common cimport i64
from ._rules cimport Buffers, Rules, WorkRows

cdef struct Choice:
    # The "ncp" objective's cut: QI j, rows <= t (frequency ranks when
    # ranked) go left. n_left == 0: no cut found.
    i64 j
    i64 n_left
    i64 t
    bint ranked

cdef Py_ssize_t ncp_words(Py_ssize_t d) noexcept nogil
cdef Choice ncp_cut(const Buffers* bufs, Py_ssize_t buf, Py_ssize_t s, Py_ssize_t e,
                    const i64* lo, const i64* hi, const i64* miss, const double* spans,
                    const Rules* rules, const WorkRows* ws, i64* spare) noexcept nogil
