"""Filling the kernel's double buffer on every thread (see workspace.py)."""

from cython.parallel cimport prange

from ._common cimport i64

cdef extern from *:
    """
    #define DM_CHUNKS 64
    """
    const Py_ssize_t CHUNKS "DM_CHUNKS"


def copy_parallel(i64[::1] dst, const i64[::1] src, int n_threads=1):
    """``dst[:] = src``, in chunks over ``n_threads`` threads."""
    cdef Py_ssize_t n = dst.shape[0], b, i
    if src.shape[0] != n:
        raise ValueError("dst and src must have the same length")
    with nogil:
        for b in prange(CHUNKS, num_threads=n_threads if n_threads > 0 else 1,
                        schedule="static"):
            for i in range(b * n // CHUNKS, (b + 1) * n // CHUNKS):
                dst[i] = src[i]


def ids_and_touch(i64[:, :, ::1] bufs, int n_threads=1):
    """Write the row ids (the last row of the first half) and zero the second half.

    The first write to fresh memory faults its pages in: done here, every
    thread takes its share of the faults instead of the (serial) root split.
    """
    cdef Py_ssize_t n = bufs.shape[2], rows = bufs.shape[1], b, i, r, a, z
    with nogil:
        for b in prange(CHUNKS, num_threads=n_threads if n_threads > 0 else 1,
                        schedule="static"):
            a = b * n // CHUNKS
            z = (b + 1) * n // CHUNKS
            for i in range(a, z):
                bufs[0, rows - 1, i] = i
            for r in range(rows):
                for i in range(a, z):
                    bufs[1, r, i] = 0
