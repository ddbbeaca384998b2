"""A release's class counts, accumulated partition by partition and merged.

Every figure of a report that reads the release alone (class sizes, l and t, the published labels
NCP prices, masked rows) follows from one table: the rows of every (class, sensitive value) pair. A
write task that holds a partition of the release adds it here (:meth:`ReleaseCounts.add`); the
partials merge by class key (:meth:`ReleaseCounts.merge`), since a class's rows may sit in several
partitions; :func:`dmondrian.evaluation.reporting.counted_report` then builds the
:class:`~dmondrian.evaluation.reporting.Report` with the same functions
:func:`dmondrian.evaluation.reporting.report` finishes with. The release is never read back.

Classes are the groups of rows publishing the same QI values, as
:func:`~dmondrian.metrics._frames.groupby` groups them (missing values form
groups of their own). QIs published as numbers (``generalization`` midpoint
or mean) need the originals per class and are not covered.

What NCP normalizes by, the input's domain of every QI, is accumulated the
same way (:class:`InputDomains`), by the tasks that read the input anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from ._frames import N_COLUMN, groupby
from .per_class import L_DISTINCT, L_ENTROPY, T, distribution, sensitive_class_stats, t_distance_of
from .sizes import SizeSummary, finish_size_counts, size_counts_of
from .suppressed import masked_count

__all__ = ["InputDomains", "ReleaseCounts"]


@dataclass
class ReleaseCounts:
    """Rows of every (class, sensitive value) pair of a release, and its masked rows.

    Attributes
    ----------
    quasi_identifiers : list
        The published QI columns (the class keys).
    sensitive : column name, optional
        The sensitive column, counted per class.
    counts : pandas.DataFrame or None
        One row per (class, sensitive value): the QIs, the sensitive column
        and :data:`~dmondrian.metrics._frames.N_COLUMN`; values as plain
        objects, so partitions with other categories merge by value.
    masked : int
        Rows publishing every QI hidden (:func:`~dmondrian.metrics.suppressed.masked_count`).
    rows : int
        Rows added.

    Examples
    --------
    >>> a = ReleaseCounts(["age"]).add(pd.DataFrame({"age": ["[20, 29]"] * 2 + ["*"]}))
    >>> b = ReleaseCounts(["age"]).add(pd.DataFrame({"age": ["[20, 29]"]}))
    >>> m = a.merge(b)
    >>> m.rows, m.masked, m.size_summary().counts.to_dict()
    (4, 1, {1: 1, 3: 1})
    """

    quasi_identifiers: list
    sensitive: object = None
    counts: pd.DataFrame | None = None
    masked: int = 0
    rows: int = 0
    _keys: list = field(init=False, repr=False)

    def __post_init__(self):
        self.quasi_identifiers = list(self.quasi_identifiers)
        self._keys = [*self.quasi_identifiers,
                      *([] if self.sensitive is None else [self.sensitive])]

    def add(self, released: pd.DataFrame, n=None) -> ReleaseCounts:
        """Count one partition of the release (a pandas DataFrame); returns ``self``.
        ``n``: the rows each row of ``released`` stands for (default one each)."""
        keys = self._keys
        n = np.ones(len(released), dtype=np.int64) if n is None else np.asarray(n, np.int64)
        columns = {c: _categorical(released[c]) for c in keys}
        part = _summed(columns, n)
        self.counts = part if self.counts is None else _merged([self.counts, part], keys)
        self.masked += int(masked_count(released, self.quasi_identifiers, n))
        self.rows += int(n.sum())
        return self

    def merge(self, *others: ReleaseCounts) -> ReleaseCounts:
        """A new ReleaseCounts of ``self`` and ``others`` (the same columns): pair rows
        summed by class key, wherever each partition held them."""
        out = ReleaseCounts(self.quasi_identifiers, self.sensitive)
        parts = [p for p in (self, *others) if p.counts is not None]
        if parts:
            out.counts = _merged([p.counts for p in parts], self._keys)
        out.masked = sum(p.masked for p in (self, *others))
        out.rows = sum(p.rows for p in (self, *others))
        return out

    # -- what a report takes ---------------------------------------------------------------------
    def _frame(self) -> pd.DataFrame:
        if self.counts is not None:
            return self.counts
        return pd.DataFrame({**{c: pd.Categorical([]) for c in self._keys},
                             N_COLUMN: pd.Series([], dtype=np.int64)})

    def class_sizes(self) -> np.ndarray:
        """Rows of every class (in no particular order)."""
        frame = self._frame()
        columns = {c: frame[c].array for c in self.quasi_identifiers}
        return _summed(columns, frame[N_COLUMN].to_numpy())[N_COLUMN].to_numpy()

    def size_summary(self) -> SizeSummary:
        """The :class:`~dmondrian.metrics.sizes.SizeSummary` of the classes."""
        sizes = pd.Series(self.class_sizes(), dtype=np.int64)
        return SizeSummary(finish_size_counts(size_counts_of(sizes)))

    def label_counts(self, column) -> pd.Series:
        """Rows publishing each value of QI ``column``: its ``value_counts(dropna=False)``."""
        return groupby(self._frame(), [column])[N_COLUMN].sum()

    def sensitive_stats(self, meta: pd.Series, t_distance: str = "auto") -> tuple[list, str]:
        """``[fewest distinct values, least entropy l, largest t]`` over the classes, and
        the t distance; ``meta`` is the sensitive column's (empty) pandas form."""
        distance = t_distance_of(meta, t_distance)
        frame = self._frame()
        # The values as the column holds them, in its order (not the partitions' categories).
        frame = frame.assign(**{self.sensitive: _plain(frame[self.sensitive], meta)})
        values = groupby(frame, [self.sensitive])[N_COLUMN].sum()
        q = distribution(values, meta.dtype, distance, self.sensitive)
        stats = sensitive_class_stats(frame, self.quasi_identifiers, self.sensitive, q, distance)
        return [stats[L_DISTINCT].min(), stats[L_ENTROPY].min(), stats[T].max()], distance


@dataclass
class InputDomains:
    """What the input's QI domains are made from, partition by partition, merged.

    Each kind's :meth:`~dmondrian.kinds.QIKindSpec.partition_parts` of a partition (smallest and
    largest value, a missing value seen; distinct values for kinds with categories, whose partitions
    may hold other categories), merged by its :meth:`~dmondrian.kinds.QIKindSpec.merge_parts`.
    :meth:`domains` then gives what :func:`dmondrian.metrics.compute_domains` measures on the whole
    table.

    Attributes
    ----------
    kinds : dict
        ``{column: QIKindSpec}`` (:func:`dmondrian.metrics.domains.column_kinds`).
    parts : dict
        ``{column: tuple}`` of the partitions added.

    Examples
    --------
    >>> from dmondrian.kinds import kind_spec
    >>> kinds = {"age": kind_spec("numeric"), "job": kind_spec("nominal")}
    >>> a = InputDomains(kinds).add(pd.DataFrame({"age": [20, 30], "job": ["a", None]}))
    >>> b = InputDomains(kinds).add(pd.DataFrame({"age": [25, 60], "job": ["b", "a"]}))
    >>> d = a.merge(b).domains(pd.DataFrame({"age": [0], "job": ["a"]}))
    >>> d["age"].scale, d["job"].scale
    (40.0, 2.0)
    """

    kinds: dict
    parts: dict = field(default_factory=dict)

    def add(self, df: pd.DataFrame) -> InputDomains:
        """Take one partition of the input (a pandas DataFrame); returns ``self``."""
        part = {n: s.partition_parts(df[n]) for n, s in self.kinds.items()}
        self.parts = self.merge(InputDomains(self.kinds, part)).parts
        return self

    def merge(self, *others: InputDomains) -> InputDomains:
        """A new InputDomains of ``self`` and ``others`` (the same columns)."""
        taken = [p.parts for p in (self, *others) if p.parts]
        return InputDomains(self.kinds, {n: s.merge_parts([t[n] for t in taken])
                                         for n, s in self.kinds.items()} if taken else {})

    def domains(self, meta: pd.DataFrame, hierarchies=None) -> dict:
        """``{column: Domain}``, as :func:`dmondrian.metrics.compute_domains` measures
        them on the whole input; ``meta``: the input's (empty) pandas form, whose
        ordinal QIs' categories give the order."""
        hierarchies = hierarchies or {}
        return {n: s.domain(n, s.merge_parts([self.parts[n]], meta[n]), meta[n], hierarchies.get(n))
                for n, s in self.kinds.items()}


def _categorical(column: pd.Series) -> pd.Categorical:
    """A key column as a Categorical (a missing value coded -1): labels as they are,
    other columns factorized (every kind of missing value one value, as a group-by
    with ``dropna=False`` takes them)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.array
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques))


def _summed(columns: dict, n: np.ndarray) -> pd.DataFrame:
    """``n`` summed over the rows of equal values in every Categorical of ``columns``:
    one row per combination present, its values as Categoricals, and the sums.

    The codes are combined into one int64 key per row (a mixed-radix number, each
    column's digit its code + 1, the missing value 0) and summed with a bincount:
    a group-by over several text columns would hash every label of every row.
    """
    radix = [len(c.categories) + 1 for c in columns.values()]
    if math.prod(radix) >= 2 ** 62:
        frame = pd.DataFrame({**columns, N_COLUMN: n})
        return groupby(frame, list(columns))[N_COLUMN].sum().reset_index()
    key = np.zeros(len(n), dtype=np.int64)
    for c, r in zip(columns.values(), radix, strict=True):
        key = key * r + (np.asarray(c.codes, dtype=np.int64) + 1)
    ids, uniques = pd.factorize(key)
    sums = np.bincount(ids, weights=n, minlength=len(uniques)).astype(np.int64) \
        if len(ids) else np.zeros(0, dtype=np.int64)
    uniques = np.asarray(uniques, dtype=np.int64)
    out = {}
    for (name, c), r in reversed(list(zip(columns.items(), radix, strict=True))):
        out[name] = pd.Categorical.from_codes(uniques % r - 1, dtype=c.dtype)
        uniques = uniques // r
    return pd.DataFrame({**{name: out[name] for name in columns}, N_COLUMN: sums})


def _merged(frames: list, keys: list) -> pd.DataFrame:
    """Pair counts summed by key, each column's categories the union of the frames'."""
    if len(frames) == 1:
        return frames[0]
    columns = {}
    for c in keys:
        try:
            columns[c] = _union([f[c].array for f in frames])
        except TypeError:  # categories of other types (an empty partition's, say)
            columns[c] = _categorical(pd.Series(np.concatenate(
                [np.asarray(f[c], dtype=object) for f in frames])))
    n = np.concatenate([f[N_COLUMN].to_numpy(dtype=np.int64) for f in frames])
    return _summed(columns, n)


def _union(arrays: list) -> pd.Categorical:
    """``union_categoricals(arrays, ignore_order=True)``; Categoricals of the same
    categories (a plan's labels, in every partition) are joined by their codes,
    without hashing every label of every partition to match them up."""
    cats = arrays[0].categories
    if all(a.categories is cats or (len(a.categories) == len(cats) and a.categories.equals(cats))
           for a in arrays[1:]):
        dtype = arrays[0].dtype if not arrays[0].ordered else pd.CategoricalDtype(cats)
        return pd.Categorical.from_codes(np.concatenate([a.codes for a in arrays]),
                                         dtype=dtype, validate=False)
    return union_categoricals(arrays, ignore_order=True)


def _plain(column: pd.Series, meta: pd.Series) -> pd.Series:
    """A Categorical key column back to the values of the sensitive column ``meta``."""
    if isinstance(meta.dtype, pd.CategoricalDtype):
        return column.astype(meta.dtype)
    values = np.asarray(column.array)
    try:
        return pd.Series(values, index=column.index).astype(meta.dtype)
    except (TypeError, ValueError):  # missing values in an int column, say
        return pd.Series(values, index=column.index)
