"""Compiled pass of :mod:`dmondrian.plans.batch`: lift routed rows to the node holding them.

A row routed to a leaf of a fitted plan climbs to the deepest node on its path
whose fitted region holds its values (see :func:`dmondrian.plans.batch.place_rows`,
whose rule this is). The pass releases the GIL.
"""

import numpy as np

from libc.stdint cimport uint8_t

from dmondrian._kernel._common cimport MISSING_KEY, i64


def lift_rows(const i64[:, :] keys, i64[::1] node, uint8_t[::1] outside,
              const uint8_t[::1] unseen, const i64[::1] parent, const i64[:, ::1] lo,
              const i64[:, ::1] hi, const uint8_t[:, ::1] miss, const uint8_t[:, ::1] open_lo,
              const uint8_t[:, ::1] open_hi, const uint8_t[::1] nominal,
              const uint8_t[:, ::1] member, const i64[::1] member_off):
    """Lift every row's ``node`` (its leaf on entry) to the deepest ancestor holding it.

    Parameters
    ----------
    keys : int64 array (QIs, rows)
        The rows' keys in the plan's encoding.
    node : int64 array (rows,)
        In: the leaf each row was routed to. Out: the node holding it (the root
        when none does, and for ``unseen`` rows).
    outside : uint8 array (rows,)
        Out: 1 where the row lies outside its node's fitted bounds (held through
        an open edge, or at the root without being held).
    unseen : uint8 array (rows,)
        1 for rows holding a value the plan never saw (they go to the root).
    parent : int64 array (nodes,)
    lo, hi : int64 arrays (nodes, QIs)
        Fitted bounds of the ordered QIs.
    miss, open_lo, open_hi : uint8 arrays (nodes, QIs)
        Whether a node holds missing values, and is open below / above.
    nominal : uint8 array (QIs,)
        1 for nominal QIs, whose values are looked up in ``member``.
    member : uint8 array (nodes, codes)
        Whether a node holds code ``member_off[j] + code`` of nominal QI ``j``.
    member_off : int64 array (QIs,)
    """
    cdef Py_ssize_t n = keys.shape[1], d = keys.shape[0], i, j
    cdef i64 nd, v
    cdef bint held, inside, h, ins
    if node.shape[0] < n or outside.shape[0] < n or unseen.shape[0] < n:
        raise ValueError("node, outside and unseen must hold a value per row")
    with nogil:
        for i in range(n):
            if unseen[i]:
                node[i] = 0
                outside[i] = 1
                continue
            nd = node[i]
            while True:
                held = True
                inside = True
                for j in range(d):
                    v = keys[j, i]
                    if nominal[j]:
                        ins = member[nd, member_off[j] + v] != 0
                        h = ins
                    elif v == MISSING_KEY:
                        ins = miss[nd, j] != 0
                        h = ins or open_hi[nd, j] != 0
                    else:
                        ins = lo[nd, j] <= v <= hi[nd, j]
                        h = ((v >= lo[nd, j] or open_lo[nd, j] != 0)
                             and (v <= hi[nd, j] or open_hi[nd, j] != 0))
                    held = held and h
                    inside = inside and ins
                    if not held:
                        break
                if held or nd == 0:
                    outside[i] = not (held and inside)
                    break
                nd = parent[nd]
            node[i] = nd
