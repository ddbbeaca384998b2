"""The exact count of rows whose value no other row has, for the columns a sketch leaves unsure.

The Dask engine judges a column released as is by a distinct-value sketch
(:func:`dmondrian.release.identifiers.estimate_identifying`); a column whose distinct values lie
between half and three quarters of the rows is settled here, by the local engine's own count, in a
pass of its own over those columns only. Each partition counts its values; the counts are
hash-partitioned by value across the workers (``value_counts`` with ``split_out``), so no task holds
more than its share of a column's distinct values, and the client receives one number per column.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["unique_counts", "unique_rows"]


def _countable(values: pd.Series) -> pd.Series:
    """The values counted: missing ones left out (as the local engine does), a
    categorical's as its categories' values (partitions may differ in categories)."""
    values = values.dropna()
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(values.dtype.categories.dtype)
    return values.reset_index(drop=True)


def _index_values(index: pd.Index) -> pd.Series:
    """A partition's index as values."""
    return _countable(pd.Series(index, index=None, copy=False))


def _partition_counts(ddf) -> int:
    """How many hash partitions the value counts are spread over: one per eight input
    partitions, as the engine's tree reductions merge eight at a time."""
    return max(1, -(-ddf.npartitions // 8))


def unique_counts(ddf, columns) -> list:
    """For each of ``columns`` of the dask DataFrame ``ddf`` (or the index's name, for
    its index), the lazy count of rows whose value no other row has (missing values
    count as no value): dask scalars, computed by :func:`unique_rows`.
    """
    split = _partition_counts(ddf)
    counts = []
    for column in columns:
        if column in ddf.columns:
            values = ddf[column].map_partitions(_countable, meta=_countable(ddf._meta[column]))
        else:
            values = ddf.index.map_partitions(_index_values,
                                              meta=_index_values(ddf._meta.index[:0]))
        per_value = values.value_counts(split_out=split)
        counts.append((per_value == 1).sum())
    return counts


def unique_rows(ddf, columns, compute=None) -> dict:
    """:func:`unique_counts`, computed: ``{column: count}``.

    ``compute(counts, label)`` returns the values of the lazy counts, the pass named ``label``: the
    Dask engine's runs them on its cluster, watched and with progress
    (:func:`dmondrian._dask.cluster.on_client`). Without it (:func:`dmondrian.verify`,
    :func:`dmondrian.report`), the default scheduler computes them.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> ddf = dd.from_pandas(pd.DataFrame({"pay": [1, 1, 2, 3, None]}), npartitions=2)
    >>> unique_rows(ddf, ["pay"])
    {'pay': 2}
    """
    counts = unique_counts(ddf, columns)
    if compute is None:
        import dask

        result = dask.compute(*counts)
    else:
        result = compute(counts, "pass: rows of their own in columns a sketch cannot judge")
    return {c: int(n) for c, n in zip(columns, result, strict=True)}
