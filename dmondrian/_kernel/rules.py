"""What a kernel call is asked to do, besides the keys: one object, read once."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .constants import N_FP, N_IP, OBJECTIVES, P_ENT_ROW, P_PAIR_ROW, P_SENS_ROW

__all__ = ["KernelRules", "RIDING_SLOTS"]

#: The privacy slots naming the buffer rows of the codes that ride along with
#: the keys, in the order they follow the keys.
RIDING_SLOTS = (P_SENS_ROW, P_ENT_ROW, P_PAIR_ROW)


@dataclass(frozen=True, eq=False)
class KernelRules:
    """The rules of one kernel call: the QIs, the privacy constraint, the mode.

    The kernel's split reads it once, into its ``Rules`` struct
    (``split.RuleArrays``); the arrays are stored as the kernel takes them.

    Parameters
    ----------
    kinds, scales, cards : arrays (d,)
        Per QI: kernel kind, global scale normalizing its spans, and code
        count (nominal and ordinal kinds).
    ip, fp, q : arrays
        The privacy constraint in kernel form (see
        :func:`dmondrian.privacy.constraints.kernel_privacy`): ``N_IP`` integer and
        ``N_FP`` float slots and the whole table's sensitive distribution.
        The row slots (``P_SENS_ROW``, ``P_ENT_ROW``, ``P_PAIR_ROW``) name
        the buffer rows of ``riding``, -1 when absent.
    riding : tuple of int64 arrays (n,), default ()
        The code rows carried along after the keys and never cut: the
        sensitive, entity and (entity, sensitive value) pair codes, those
        present, in that order.
    h_parent, h_lo, h_hi, h_leafnode, hoffs, loffs : int64 arrays, optional
        The hierarchy QIs' trees, concatenated, and each QI's offsets into
        their nodes and leaves. Default: no hierarchy.
    relaxed : bool, default False
        Relaxed partitioning (median ties may go to both sides).
    max_depth : int, default -1
        Most cuts from a root to a class; -1 for no limit.
    objective : int, default 0
        What the cuts optimize: an index into
        :data:`dmondrian._kernel.constants.OBJECTIVES`.

    Examples
    --------
    >>> from dmondrian._kernel import constants as C
    >>> ip = np.zeros(C.N_IP, dtype=np.int64)
    >>> ip[C.P_K] = 2
    >>> ip[list(RIDING_SLOTS)] = -1
    >>> rules = KernelRules([C.KIND_INT], [1.0], [0], ip, np.full(C.N_FP, -1.0), [])
    >>> rules.d, rules.buffer_rows
    (1, 2)
    """

    kinds: np.ndarray
    scales: np.ndarray
    cards: np.ndarray
    ip: np.ndarray
    fp: np.ndarray
    q: np.ndarray
    riding: tuple = ()
    h_parent: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    h_lo: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    h_hi: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    h_leafnode: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    hoffs: np.ndarray | None = None
    loffs: np.ndarray | None = None
    relaxed: bool = False
    max_depth: int = -1
    objective: int = 0

    def __post_init__(self):
        put = object.__setattr__
        put(self, "kinds", np.asarray(self.kinds, dtype=np.int64))
        d = self.kinds.shape[0]
        put(self, "scales", np.asarray(self.scales, dtype=np.float64))
        put(self, "cards", np.asarray(self.cards, dtype=np.int64))
        for name in ("hoffs", "loffs"):
            value = getattr(self, name)
            put(self, name, np.zeros(d, dtype=np.int64) if value is None
                else np.asarray(value, dtype=np.int64))
        if any(getattr(self, a).shape != (d,) for a in ("scales", "cards", "hoffs", "loffs")):
            raise ValueError("kinds, scales, cards, hoffs and loffs must have one entry per QI")
        put(self, "ip", np.ascontiguousarray(self.ip, dtype=np.int64))
        put(self, "fp", np.ascontiguousarray(self.fp, dtype=np.float64))
        put(self, "q", np.asarray(self.q, dtype=np.float64))
        if self.ip.shape != (N_IP,) or self.fp.shape != (N_FP,):
            raise ValueError("ip and fp must be the privacy constraint's kernel arrays "
                             f"({N_IP} and {N_FP} slots)")
        put(self, "riding", tuple(self.riding))
        expected = [d + i for i in range(len(self.riding))]
        if sorted(int(self.ip[s]) for s in RIDING_SLOTS if self.ip[s] >= 0) != expected:
            raise ValueError("ip's row slots must name the riding rows, right after the keys")
        if not 0 <= self.objective < len(OBJECTIVES):
            raise ValueError("objective must index constants.OBJECTIVES")
        put(self, "relaxed", bool(self.relaxed))
        put(self, "max_depth", int(self.max_depth))
        put(self, "objective", int(self.objective))

    @property
    def d(self) -> int:
        """Number of QIs."""
        return int(self.kinds.shape[0])

    @property
    def buffer_rows(self) -> int:
        """Rows of each half of the double buffer: keys, riding codes, row ids."""
        return self.d + len(self.riding) + 1
