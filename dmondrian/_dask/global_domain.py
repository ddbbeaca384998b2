"""The global domain: every QI's encoding, measured once, and the keys it gives a row.

The local engine encodes a table in memory, with codes that depend on the values present in it. The
Dask engine must give a row the same key in every partition and every pass, so it encodes against a
:class:`GlobalDomain`, which the domain pass (:mod:`.domain_pass`) measures over the whole table.
See docs/design.md, section "Global domain and keys".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..kinds import Domain, QIKindSpec, kind_spec
from ..kinds.keys import arrow_int32_chunks

__all__ = ["GlobalDomain", "encode_keys", "arrow_int32_chunks", "ncp_domains"]


@dataclass
class GlobalDomain:
    """Every QI's global encoding, measured over the whole dataset.

    Attributes
    ----------
    names : list
        QI column names, in key-matrix order.
    kinds : list of str
        The kind name of each QI (a key of :data:`dmondrian.kinds.KINDS`).
    specs : list of QIKindSpec
        The kind object of each QI (from ``kinds``): every kind-specific
        decision of the Dask engine is one of its methods.
    kernel_kinds : ndarray of int64
        Kernel kind codes (``dmondrian._kernel.KIND_*``).
    scales : ndarray of float64
        Global domain scale of each QI (see :attr:`dmondrian.encoding.qi.EncodedQI.scale`).
    slots : ndarray of int64
        Size of the exact value-count space of kinds with ``exact_counts``
        (:meth:`~dmondrian.kinds.QIKindSpec.global_slots`; nominal and ordinal:
        categories + missing; hierarchy: leaves); 0 otherwise.
    categories : list
        Global category lists (nominal, ordinal) or None.
    hierarchies : list
        Global :class:`~dmondrian.kinds.hierarchy.Hierarchy` (with the missing leaf
        when any value is missing) or None.
    n_rows : int
        Rows in the dataset.
    key_lo, key_hi : ndarray of int64, optional
        Smallest and largest present key of every numeric and datetime QI (``MISSING_KEY`` and
        ``INT64_MIN`` when all are missing); None when not measured.
    key_step : ndarray of int64, optional
        The gcd of ``key - key_lo`` over the present keys of every numeric and datetime QI (0 when
        it holds at most one distinct value); None when not measured, which counts as 1.
    """

    names: list
    kinds: list
    kernel_kinds: np.ndarray
    scales: np.ndarray
    slots: np.ndarray
    categories: list
    hierarchies: list
    n_rows: int
    key_lo: np.ndarray | None = None
    key_hi: np.ndarray | None = None
    key_step: np.ndarray | None = None
    _indexes: dict = field(default_factory=dict, repr=False)
    specs: list[QIKindSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self.specs = [kind_spec(k) for k in self.kinds]

    @property
    def d(self) -> int:
        return len(self.names)

    def category_index(self, j: int) -> pd.Index:
        idx = self._indexes.get(j)
        if idx is None:
            idx = self._indexes[j] = pd.Index(self.categories[j], dtype=object)
        return idx

    def keys_into(self, j: int, series: pd.Series, out: np.ndarray) -> None:
        """Global keys of QI ``j``'s column (one partition's) into ``out``."""
        cats = self.categories[j]
        spec = self.specs[j]
        series = spec.conform_partition(series, int(self.kernel_kinds[j]))
        spec.global_keys_into(
            series, out, categories=cats, index=None if cats is None else self.category_index(j),
            hierarchy=self.hierarchies[j])

    def slot_rows(self, keys: np.ndarray) -> dict:
        """Rows of a ``(d, n)`` key matrix as slots, for every QI whose values are counted
        exactly (:attr:`~dmondrian.kinds.QIKindSpec.exact_counts`)."""
        return {j: spec.slot_keys(keys[j], int(self.slots[j]))
                for j, spec in enumerate(self.specs) if spec.exact_counts}


def encode_keys(df: pd.DataFrame, domain: GlobalDomain) -> np.ndarray:
    """The ``(d, n)`` matrix of global kernel keys of a partition's QI columns.

    Examples
    --------
    >>> dom = GlobalDomain(["c"], ["nominal"], np.array([3]), np.array([2.0]),
    ...                    np.array([4]), [["a", "b", "z"]], [None], 3)
    >>> encode_keys(pd.DataFrame({"c": ["z", None, "a"]}), dom).tolist()
    [[2, 3, 0]]
    """
    keys = np.empty((domain.d, len(df)), dtype=np.int64)
    # Every column is encoded straight into its row of ``keys``: a temporary
    # array per column would be written, then copied, once more.
    for j, name in enumerate(domain.names):
        domain.keys_into(j, df[name], keys[j])
    return keys


def ncp_domains(domain: GlobalDomain, encodings: list) -> dict | None:
    """Every QI's :class:`~dmondrian.kinds.Domain` for NCP, from the engine's global domain:
    what :func:`dmondrian.metrics.compute_domains` measures on the original table, without
    reading it again; None when a QI's keys are no plain numbers or stamps (decimals,
    durations), whose domain is then measured on the table.

    A numeric or datetime QI's scale is the span of the points (:meth:`~dmondrian.kinds.
    QIKindSpec.point`: nanoseconds for stamps, whatever the column's unit) of its smallest
    and largest present values, decoded from the keys (``encodings``: the plan's
    :class:`~dmondrian.kinds.EncodedQI` of every QI); the other kinds' scales are the
    engine's own (codes, values, leaves). Ordinal QIs keep their global categories,
    hierarchies their tree (with the missing leaf when a value is missing). The
    smallest and largest values are left out: pricing a label does not read them.

    Examples
    --------
    >>> dom = GlobalDomain(["c"], ["nominal"], np.array([3]), np.array([2.0]),
    ...                    np.array([4]), [["a", "b", "z"]], [None], 3)
    >>> ncp_domains(dom, [None])["c"]
    Domain(kind='nominal', scale=2.0, lo=None, hi=None, categories=(), hierarchy=None)
    """
    out = {}
    for j, name in enumerate(domain.names):
        kind, spec, cats = domain.kinds[j], domain.specs[j], domain.categories[j]
        scale = float(domain.scales[j])
        if not spec.exact_counts and scale > 0:
            enc = encodings[j]
            if enc is None or enc.value_type in ("decimal", "duration") \
                    or domain.key_lo is None:
                return None
            bounds = spec.decode_keys(enc, np.array([domain.key_lo[j], domain.key_hi[j]],
                                                    dtype=np.int64))
            scale = float(spec.span(spec.point(bounds[0]), spec.point(bounds[1])))
        out[name] = Domain(kind, scale,
                           categories=tuple(str(c) for c in cats)
                           if kind == "ordinal" and cats is not None else (),
                           hierarchy=domain.hierarchies[j] if kind == "hierarchy" else None)
    return out
