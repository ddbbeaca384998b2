# The cut rule of a fitted or planned tree, one step of a row's walk: cimported
# (and inlined) by the Dask engine's routing (routing.pyx) and the plans' lift
# (lift.pyx), so both send a row the same way.
from ._common cimport i64


cdef inline bint goes_left(i64 v, i64 t, i64 eq, i64 pos, i64 tie_before) noexcept nogil:
    """Whether a row whose key (or nominal rank) is ``v`` goes left at a cut ``(t, eq,
    tie_before)``: ``v <= t``, or a tie of a relaxed cut (``v == eq``) at an input
    position ``pos`` before ``tie_before``, the first tied rows in input order
    (the local kernel's relaxed median). Branch-free: the walks step blocks of
    rows a level at a time."""
    return (v <= t) | ((v == eq) & (pos < tie_before))
