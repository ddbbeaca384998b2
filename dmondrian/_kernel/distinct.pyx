"""Compiled pass of :mod:`dmondrian.release.identifiers`: HyperLogLog registers of 64-bit words.

Each word is hashed as pandas' ``hash_array`` hashes a 64-bit value (the
splitmix64 finalizer), the hash kept to its low 32 bits as dask's
``compute_hll_array`` keeps it, so the registers are dask's own, read by its
``estimate_count``; numpy would take a pass over the rows for each step.
"""

from libc.stdint cimport uint8_t, uint32_t

from dmondrian._kernel._common cimport popcount, splitmix64_mix, u64

__all__ = ["add_words"]


def add_words(const u64[::1] words, uint8_t[::1] registers, int bits):
    """Fold ``words`` into ``registers`` (``2**bits`` of them), in place.

    A register keeps the largest rank of the hashes whose top ``bits`` bits
    pick it; the rank is the hash's trailing zero bits + 1 (33 for a zero hash).

    Parameters
    ----------
    words : ndarray of uint64
        The values as pandas turns them into 64-bit words before hashing.
    registers : ndarray of uint8
    bits : int
        Register index bits (1 to 31).
    """
    if not 1 <= bits <= 31 or registers.shape[0] != (1 << bits):
        raise ValueError(f"dmondrian: {registers.shape[0]} registers for {bits} bits")
    cdef Py_ssize_t i, n = words.shape[0]
    cdef u64 v
    cdef uint32_t h, slot
    cdef uint8_t rank
    cdef int shift = 32 - bits
    with nogil:
        for i in range(n):
            v = splitmix64_mix(words[i])
            h = <uint32_t>v
            # h ^ (h - 1): the lowest set bit and every bit below it.
            rank = 33 if h == 0 else <uint8_t>popcount(<u64>(h ^ (h - 1)))
            slot = h >> shift
            if rank > registers[slot]:
                registers[slot] = rank
