"""Per-class statistics of a table: size, distinct and entropy l, and t (EMD).

The building block of :func:`dmondrian.verify`, :func:`dmondrian.metrics.privacy` and
:func:`dmondrian.report`. Definitions are those of :mod:`dmondrian.metrics`. Computed with group-by
aggregations; on a Dask table they stay distributed (one row per class, shuffled by class).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..encoding.sensitive import check_known_order, is_ordered, sensitive_values
from ..errors import ParameterError
from ..privacy.constraints import recursive_ratio
from ._frames import N_COLUMN, class_sizes, compute, groupby, is_dask, meta_of

__all__ = ["T_DISTANCES", "SIZE", "L_DISTINCT", "L_ENTROPY", "L_RECURSIVE", "T", "t_distance_of",
           "SensitivePlan", "global_distribution", "distribution", "ordered_emd", "equal_emd",
           "recursive_ratio", "sensitive_class_stats", "class_statistics", "stat_column"]

T_DISTANCES = ("auto", "ordered", "equal")
# Per-class statistic columns, named so they cannot clash with a QI called "size" or "t".
def stat_column(name: str) -> str:
    """The per-class statistic column of a statistic's public name (an l variant's
    ``column``, its ``LVariant`` in ``dmondrian.privacy.constraints``)."""
    return f"__dmondrian_{name}__"


SIZE, L_DISTINCT, L_ENTROPY, L_RECURSIVE, T = (
    stat_column(c) for c in ("size", "l_distinct", "l_entropy", "recursive_ratio", "t"))


def t_distance_of(meta: pd.Series, t_distance: str = "auto") -> str:
    """``"ordered"`` for numeric, datetime or ordered categorical values, else ``"equal"``.

    The engines' rule (:func:`dmondrian.encoding.sensitive.is_ordered`).
    """
    if t_distance not in T_DISTANCES:
        raise ParameterError("t_distance", f"t_distance must be one of {T_DISTANCES}, "
                                           f"got {t_distance!r}")
    return t_distance if t_distance != "auto" else (
        "ordered" if is_ordered(meta.dtype) else "equal")


@dataclass
class SensitivePlan:
    """Per-class sensitive statistics, lazy for Dask (see :func:`class_statistics`)."""

    per_class: object
    sensitive: object
    distance: str
    n_values: int


def global_distribution(table, sensitive, distance: str) -> pd.Series:
    """Share of every sensitive value in the table, in order for the ordered distance.

    The domain is the engines' (:mod:`dmondrian.encoding.sensitive`): every kind of missing value is
    one value, last; for an ordered categorical the domain is all its categories, used or not (the
    ordered distance between two categories is their distance in category order over ``categories -
    1``). The equal distance ignores values without rows.
    """
    column = table[sensitive]
    check_known_order(column, distance == "ordered")
    (counts,) = compute(column.value_counts(dropna=False))
    return distribution(counts, meta_of(column).dtype, distance, sensitive)


def distribution(counts: pd.Series, dtype, distance: str, sensitive=None) -> pd.Series:
    """:func:`global_distribution` from the sensitive column's computed
    ``value_counts(dropna=False)`` and its dtype."""
    try:
        domain = sensitive_values(counts, dtype, distance == "ordered", name=sensitive)
    except TypeError:
        raise ParameterError("t_distance", f"sensitive column {sensitive!r} mixes values that "
                                           "cannot be ordered; use t_distance='equal'") from None
    index = domain.values
    if isinstance(index, pd.CategoricalIndex) or isinstance(index.dtype, pd.CategoricalDtype):
        index = pd.Index(np.asarray(index, dtype=object), dtype=object)
    if domain.has_missing:
        index = index.insert(len(index), np.nan)
    q = pd.Series(domain.distribution(), index=index)
    return q if distance == "ordered" else q[q > 0]


def _ranks(index: pd.Index, values) -> np.ndarray:
    """Position of each value in ``index`` (missing values at the index's missing slot)."""
    values = pd.Series(values)
    ranks = np.asarray(index.get_indexer(values), dtype=np.int64)
    missing = values.isna().to_numpy()
    if missing.any():
        na = np.flatnonzero(pd.isna(index))
        ranks[missing] = na[0] if len(na) else -1
    if (ranks < 0).any():
        raise ParameterError("sensitive", "a sensitive value was not found in the table's "
                                          "distribution (mixed missing-value types?)")
    return ranks


def ordered_emd(gid, rank, p, q: np.ndarray, n_classes: int) -> np.ndarray:
    """Ordered-distance EMD of every class, in O(rows * log m) without a dense matrix.

    Rows are (class, sensitive value) pairs. A class's cumulative share ``P`` is a step function of
    the value rank; on each step the sum of ``|P - Q(i)|`` over the ranks is closed-form from prefix
    sums of the (monotone) global cumulative share ``Q``.
    """
    m = len(q)
    if m <= 1:
        return np.zeros(n_classes)
    big_q = np.cumsum(q)
    big_q[-1] = 1.0
    cq = np.concatenate([[0.0], np.cumsum(big_q)])
    order = np.lexsort((rank, gid))
    gid, rank, p = gid[order], rank[order], p[order]
    cum_p = np.empty_like(p)
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    cp = np.cumsum(p)
    offset = np.repeat(np.r_[0.0, cp[starts[1:] - 1]], np.diff(np.r_[starts, len(p)]))
    cum_p = cp - offset
    last = np.r_[gid[1:] != gid[:-1], True]
    cum_p[last] = 1.0  # exact 1 on the last step, not a rounding 0.9999...
    seg_end = np.where(last, m, np.r_[rank[1:], m])

    def steps(s, e, level):
        x = np.clip(np.searchsorted(big_q, level, side="right"), s, e)
        return level * (x - s) - (cq[x] - cq[s]) + (cq[e] - cq[x]) - level * (e - x)

    total = np.bincount(gid, weights=steps(rank, seg_end, cum_p), minlength=n_classes)
    first = rank[starts]
    total[gid[starts]] += cq[first]  # ranks before the class's first value: |0 - Q|
    return total / (m - 1)


def equal_emd(gid, rank, p, q: np.ndarray, n_classes: int) -> np.ndarray:
    diff = np.bincount(gid, weights=np.abs(p - q[rank]), minlength=n_classes)
    covered = np.bincount(gid, weights=q[rank], minlength=n_classes)
    return (diff + (1.0 - covered)) / 2.0


def sensitive_class_stats(counts: pd.DataFrame, keys, sensitive, q: pd.Series,
                          distance: str, extra=None) -> pd.DataFrame:
    """Per-class size, distinct and entropy l, and EMD from (class, value, count) rows.

    ``counts`` has the ``keys`` columns, the sensitive column and the count column; every class's
    rows must be in this frame (pandas, or one Dask partition after a shuffle on ``keys``).
    ``extra``, ``(column, statistic, l)``, adds ``column``: ``statistic(gid, n, size, n_classes,
    l)`` of every class (an l variant's, :class:`~dmondrian.privacy.constraints.LVariant`).
    """
    if len(counts) == 0:
        empty = {SIZE: np.int64(0), L_DISTINCT: np.int64(0), L_ENTROPY: 0.0, T: 0.0}
        if extra is not None:
            empty[extra[0]] = 0.0
        return counts[keys].iloc[:0].assign(**empty)
    gid = groupby(counts, keys).ngroup().to_numpy()
    n_classes = int(gid.max()) + 1
    n = counts[N_COLUMN].to_numpy(dtype=np.float64)
    size = np.bincount(gid, weights=n, minlength=n_classes)
    distinct = np.bincount(gid, minlength=n_classes)
    entropy = np.log(size) - np.bincount(gid, weights=n * np.log(n), minlength=n_classes) / size
    rank = _ranks(q.index, counts[sensitive])
    p = n / size[gid]
    qv = q.to_numpy(dtype=np.float64)
    emd = (ordered_emd if distance == "ordered" else equal_emd)(gid, rank, p, qv, n_classes)
    first = np.unique(gid, return_index=True)[1]
    out = counts.iloc[first][keys].reset_index(drop=True)
    out[SIZE] = size.astype(np.int64)
    out[L_DISTINCT] = distinct.astype(np.int64)
    out[L_ENTROPY] = np.exp(np.maximum(entropy, 0.0))
    out[T] = np.clip(emd, 0.0, 1.0)
    if extra is not None:
        column, statistic, ell = extra
        out[column] = statistic(gid, n, size, n_classes, ell)
    return out


def class_statistics(table, keys, sensitive=None, t_distance: str = "auto", extra=None):
    """Per-class statistics of a table.

    For Dask it stays lazy (one row per class, partitioned by class); the
    global sensitive distribution is computed first (one small reduction).

    Parameters
    ----------
    table : pandas or Dask DataFrame
    keys : list of column names
        The columns whose distinct values define the classes.
    sensitive : column name, optional
    t_distance : {"auto", "ordered", "equal"}
    extra : tuple, optional
        ``(column, statistic, l)``: one more per-class column (:func:`sensitive_class_stats`).

    Returns
    -------
    frame : pandas or Dask DataFrame
        One row per class: ``keys``, :data:`SIZE` and, with a sensitive
        column, :data:`L_DISTINCT`, :data:`L_ENTROPY` and :data:`T`.
    plan : SensitivePlan or None

    Examples
    --------
    >>> t = pd.DataFrame({"q": ["a", "a", "b", "b"], "s": ["x", "y", "x", "x"]})
    >>> frame, plan = class_statistics(t, ["q"], "s")
    >>> frame[L_DISTINCT].tolist(), plan.distance
    ([2, 1], 'equal')
    """
    if sensitive is None:
        sizes = class_sizes(table, keys).rename(SIZE)
        return sizes.reset_index(), None
    if sensitive in keys:
        raise ParameterError("sensitive", f"sensitive column {sensitive!r} is also a "
                                          "quasi-identifier")
    distance = t_distance_of(meta_of(table[sensitive]), t_distance)
    q = global_distribution(table, sensitive, distance)
    g = groupby(table[[*keys, sensitive]], [*keys, sensitive])
    if is_dask(table):
        counts = g.size(split_out=True).rename(N_COLUMN).reset_index()
        meta = sensitive_class_stats(counts._meta, keys, sensitive, q, distance, extra)
        frame = counts.shuffle(on=keys).map_partitions(
            sensitive_class_stats, keys, sensitive, q, distance, extra, meta=meta)
    else:
        counts = g.size().rename(N_COLUMN).reset_index()
        frame = sensitive_class_stats(counts, keys, sensitive, q, distance, extra)
    return frame, SensitivePlan(frame, sensitive, distance, len(q))
