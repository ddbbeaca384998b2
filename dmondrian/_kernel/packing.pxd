from ._common cimport i64

cpdef i64 packed_left(i64 n, i64 k) noexcept nogil
cpdef bint packs_better(i64 a, i64 b, i64 n, i64 k) noexcept nogil
cdef i64 best_sorted_boundary(i64* a, i64 n, i64 k, i64* t) noexcept nogil
cdef i64 best_ranked_boundary(const i64* cum, i64 card, i64 n, i64 k, i64* r) noexcept nogil
