"""What OpenMP offers this process (1 thread when built without it)."""

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int dm_omp_max_threads(void) { return omp_get_max_threads(); }
    static int dm_omp_built(void) { return 1; }
    #else
    static int dm_omp_max_threads(void) { return 1; }
    static int dm_omp_built(void) { return 0; }
    #endif
    """
    int dm_omp_max_threads() nogil
    int dm_omp_built() nogil


def max_threads():
    """OpenMP's thread count for this thread (``OMP_NUM_THREADS``, or the cores)."""
    return dm_omp_max_threads()


def built_with_openmp():
    """Whether the kernel was compiled with OpenMP (else every call runs on one thread)."""
    return bool(dm_omp_built())
