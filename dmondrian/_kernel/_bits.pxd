# Branch-free tests the compiled passes of keys, routing, scan and shipped share
# (inlined where used). A comparison of int64 values would stop the compiler
# from vectorizing a loop on x86-64's baseline instruction set, which has no
# 64-bit compare; these use adds, ands and shifts only, which it has.
from libc.stdint cimport uint8_t

from dmondrian._kernel._common cimport i64, u64


cdef inline i64 is_int_min(i64 v) noexcept nogil:
    """1 when ``v`` is INT64_MIN (NaT), else 0: the one value whose predecessor wraps."""
    return <i64>((<u64>(v & ~(v - 1))) >> 63)


cdef inline i64 is_int_max(i64 v) noexcept nogil:
    """1 when ``v`` is INT64_MAX (the missing key), else 0: the one value whose successor
    wraps."""
    return <i64>((<u64>((v + 1) & ~v)) >> 63)


cdef inline bint valid_bit(const uint8_t* bits, i64 k) noexcept nogil:
    """Whether bit ``k`` of an Arrow validity bitmap is on (NULL, no bitmap: every value is)."""
    return bits == NULL or (bits[k >> 3] >> (k & 7)) & 1
