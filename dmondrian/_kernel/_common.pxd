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
    #define DM_POPCOUNT(x) ((int64_t)__builtin_popcountll(x))
    """
    i64 popcount "DM_POPCOUNT"(u64 x) noexcept nogil

# Defined in codes.pxd, shared with Python; cimported from here by most modules.
from .codes cimport (MISSING_KEY, INT_MIN, FLIP, FLOAT_MAX, KIND_INT, KIND_FLOAT, KIND_ORDINAL,
                     KIND_NOMINAL, KIND_HIERARCHY)


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


cdef inline u64 splitmix64_mix(u64 x) noexcept nogil:
    """splitmix64's finalizer: every bit of ``x`` spread over every bit of the result.

    The hash pandas' ``hash_array`` gives a 64-bit word, and the mix of the
    Dask engine's row priorities.
    """
    x = (x ^ (x >> 30)) * <u64>0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * <u64>0x94D049BB133111EBULL
    return x ^ (x >> 31)
