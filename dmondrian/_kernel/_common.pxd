# The types, constants and one-line helpers every compiled module of the
# kernel shares (cimported, and inlined where used).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t, uint8_t
from libc.string cimport memcpy

ctypedef int64_t i64
ctypedef uint64_t u64

# The signed integer types a column pass reads or writes (narrow codes and
# shipped keys, int64 keys): one compiled copy of the pass per type.
ctypedef fused int_t:
    int8_t
    int16_t
    int32_t
    int64_t

cdef extern from *:
    """
    #include <stdint.h>
    /* The missing value's key: larger than every present key, so missing
       values sort last in every QI. */
    #define DM_MISSING_KEY INT64_MAX
    #define DM_INT_MIN INT64_MIN
    #define DM_FLIP ((int64_t)0x7FFFFFFFFFFFFFFF)
    #define DM_FLOAT_MAX 1.7976931348623157e308
    #define DM_POPCOUNT(x) ((int64_t)__builtin_popcountll(x))
    """
    const i64 MISSING_KEY "DM_MISSING_KEY"
    const i64 INT_MIN "DM_INT_MIN"
    const i64 FLIP "DM_FLIP"
    const double FLOAT_MAX "DM_FLOAT_MAX"
    i64 popcount "DM_POPCOUNT"(u64 x) noexcept nogil

# Kinds of quasi-identifier the kernel distinguishes (see constants.py).
cdef enum:
    KIND_INT = 0        # keys are the number itself (ints, datetimes)
    KIND_FLOAT = 1      # keys hold order-preserving float64 bits
    KIND_ORDINAL = 2    # category codes in category order
    KIND_NOMINAL = 3    # category codes without order
    KIND_HIERARCHY = 4  # DFS leaf codes of a generalization tree


cdef inline double decode_float_key(i64 key) noexcept nogil:
    """The float a KIND_FLOAT key stands for (inverse of keys.float_keys)."""
    cdef double x
    if key < 0:
        key = key ^ FLIP
    memcpy(&x, &key, 8)
    return x


cdef inline double key_value(i64 key, i64 kind) noexcept nogil:
    """The number a key of an ordered numeric kind stands for."""
    if kind == KIND_FLOAT:
        return decode_float_key(key)
    return <double>key
