from ._common cimport i64

cdef struct Selected:
    i64 value   # the kth smallest present key
    i64 less    # present keys below it
    i64 equal   # keys equal to it

cdef i64 quickselect(i64* a, Py_ssize_t n, Py_ssize_t kth, i64 rounds) noexcept nogil
cdef void heapsort(i64* a, Py_ssize_t lo, Py_ssize_t hi, const i64* counts,
                   bint by_count) noexcept nogil
cdef Selected select_kth(const i64* row, Py_ssize_t s, Py_ssize_t e, i64 lo, i64 hi,
                         i64 kth, i64* scratch, i64* counts, i64* spare) noexcept nogil
