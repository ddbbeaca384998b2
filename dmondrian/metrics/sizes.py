"""Metrics of the class sizes alone: counts per size, C_avg, discernibility, size buckets."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ParameterError
from ..privacy.constraints import check_k
from ._frames import SIZE_COLUMN, class_keys, class_sizes, compute, shared_parameters

__all__ = ["size_counts", "size_counts_of", "finish_size_counts", "SizeSummary", "size_summary",
           "c_avg", "calculate_avg_equivalence_class_size", "discernibility",
           "size_distribution", "class_size_distribution"]


def size_counts_of(sizes):
    """How many classes have each size, from the class sizes (lazy for Dask):
    :func:`finish_size_counts` tidies the computed result."""
    return sizes.rename(SIZE_COLUMN).to_frame().groupby(SIZE_COLUMN).size()


def finish_size_counts(counts: pd.Series) -> pd.Series:
    """A computed :func:`size_counts_of` as :func:`size_counts` returns it: indexed by
    size (ascending, int64, named ``size``), values named ``classes``."""
    out = counts.sort_index().astype(np.int64)
    out.index = out.index.astype(np.int64)
    return out.rename_axis("size").rename("classes")


@shared_parameters
def size_counts(table, quasi_identifiers, class_column=None) -> pd.Series:
    """How many classes have each size.

    Parameters
    ----------
    {classes}

    Returns
    -------
    pandas.Series
        Indexed by class size (ascending), the number of classes of that size.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> size_counts(t, ["age"]).to_dict()
    {2: 1, 3: 1}
    """
    _, keys = class_keys(table, quasi_identifiers, class_column)
    (counts,) = compute(size_counts_of(class_sizes(table, keys)))
    return finish_size_counts(counts)


@dataclass(frozen=True)
class SizeSummary:
    """Everything that follows from the class sizes alone."""

    counts: pd.Series

    @property
    def n_records(self) -> int:
        return int((self.counts.index.to_numpy() * self.counts.to_numpy()).sum())

    @property
    def n_classes(self) -> int:
        return int(self.counts.sum())

    @property
    def min_size(self) -> int:
        return int(self.counts.index.min()) if len(self.counts) else 0

    @property
    def max_size(self) -> int:
        return int(self.counts.index.max()) if len(self.counts) else 0

    @property
    def discernibility(self) -> int:
        # Python ints: one class of 10**10 rows would overflow int64 when squared.
        return sum(int(s) * int(s) * int(c) for s, c in self.counts.items())

    def c_avg(self, k: int) -> float:
        return self.n_records / (self.n_classes * k) if self.n_classes else math.nan


def size_summary(table, quasi_identifiers, class_column=None) -> SizeSummary:
    """The :class:`SizeSummary` of a table's classes (see :func:`size_counts`)."""
    return SizeSummary(size_counts(table, quasi_identifiers, class_column))


@shared_parameters
def c_avg(table, quasi_identifiers, k, class_column=None) -> float:
    """Average equivalence class size metric ``C_avg = |T| / (n_classes * k)``.

    Parameters
    ----------
    {table}
    k : int
        The k the table was released for.
    {class_column}

    Returns
    -------
    float
        1.0 when every class has exactly ``k`` rows; larger is coarser.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> c_avg(t, ["age"], k=2)
    1.25
    """
    k = check_k(k)
    return size_summary(table, quasi_identifiers, class_column).c_avg(k)


def calculate_avg_equivalence_class_size(df, k, quasi_id) -> float:
    """The average class size ``C_avg``, with the seed project's signature.

    The same as :func:`dmondrian.metrics.c_avg`, arguments in another order.

    Parameters
    ----------
    df : pandas or Dask DataFrame
        A released table.
    k : int
        The k it was released for.
    quasi_id : list of column names
        Its published QI columns.

    Returns
    -------
    float
        ``|T| / (n_classes * k)``.

    Examples
    --------
    >>> t = pd.DataFrame({"zip": ["1100*"] * 4})
    >>> calculate_avg_equivalence_class_size(t, 2, ["zip"])
    2.0
    """
    return c_avg(df, quasi_id, k)


@shared_parameters
def discernibility(table, quasi_identifiers, class_column=None) -> int:
    """Discernibility metric: the sum of squared class sizes.

    Every record is charged the size of its class (Bayardo & Agrawal 2005);
    nothing is suppressed, so there is no suppression term.

    Parameters
    ----------
    {classes}

    Returns
    -------
    int

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> discernibility(t, ["age"])
    13
    """
    return size_summary(table, quasi_identifiers, class_column).discernibility


def _default_edges(max_size: int) -> list[int]:
    edges = [1, 2, 3, 5]
    base = 10
    while edges[-1] <= max_size:
        edges.extend([base, 2 * base, 5 * base])
        base *= 10
    return [e for e in edges if e <= max_size] + [next(e for e in edges if e > max_size)]


def size_distribution(counts: pd.Series, bins=None) -> pd.DataFrame:
    """Bucket a :func:`size_counts` result (see :func:`class_size_distribution`)."""
    sizes = counts.index.to_numpy(dtype=np.int64)
    n = counts.to_numpy(dtype=np.int64)
    if isinstance(bins, str) and bins == "exact":
        edges = None
    elif bins is None:
        edges = _default_edges(int(sizes.max()) if len(sizes) else 1)
    else:
        try:
            edges = sorted({int(b) for b in bins})
        except (TypeError, ValueError):
            raise ParameterError("bins", f"bins must be class sizes or 'exact', "
                                         f"got {bins!r}") from None
        if not edges or edges[0] < 1:
            raise ParameterError("bins", f"bins must be increasing class sizes >= 1, got {bins!r}")
        if len(sizes) and edges[-1] <= sizes.max():
            edges.append(int(sizes.max()) + 1)
    if edges is None:
        return pd.DataFrame({"size_min": sizes, "size_max": sizes, "classes": n,
                             "records": sizes * n})
    rows = []
    if len(sizes) and sizes.min() < edges[0]:
        edges = [int(sizes.min()), *edges]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (sizes >= lo) & (sizes < hi)
        rows.append((lo, hi - 1, int(n[inside].sum()), int((sizes * n)[inside].sum())))
    return pd.DataFrame(rows, columns=["size_min", "size_max", "classes", "records"])


@shared_parameters
def class_size_distribution(table, quasi_identifiers, bins=None, class_column=None):
    """Number of classes and records per class-size bucket.

    Parameters
    ----------
    {table}
    bins : sequence of int or "exact", optional
        Bucket edges (a bucket is ``[edge, next edge)``); ``"exact"`` gives one
        row per distinct size. Default: 1, 2, 3-4, 5-9, 10-19, 20-49, ...
    {class_column}

    Returns
    -------
    pandas.DataFrame
        Columns ``size_min``, ``size_max`` (inclusive), ``classes`` and ``records``.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2})
    >>> class_size_distribution(t, ["age"], bins=[1, 3]).values.tolist()
    [[1, 2, 1, 2], [3, 3, 1, 3]]
    """
    return size_distribution(size_counts(table, quasi_identifiers, class_column), bins)
