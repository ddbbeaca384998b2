from ._common cimport i64
from ._rules cimport Cut, Privacy, WorkRows

cdef bint hist_ok(const i64* h, Py_ssize_t n_codes, i64 m, const Privacy* priv) noexcept nogil
cdef bint sensitive_cut_ok(const i64* row, const i64* sens, Py_ssize_t s, Py_ssize_t e,
                           const Cut* cut, const Privacy* priv, const WorkRows* ws) noexcept nogil
cdef bint entity_cut_ok(const i64* row, Py_ssize_t s, Py_ssize_t e, const Cut* cut,
                        const Privacy* priv, const WorkRows* ws) noexcept nogil
