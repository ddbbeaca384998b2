"""Private APIs of dask and pandas, each behind a function with a public fallback.

A private API saves work the public ones would repeat, and may change in any
release. Each function here tries it and, when it is missing or refuses the
call, takes a public path to the same result.

See docs/design.md, section "Third-party private APIs".
"""

from __future__ import annotations

import pandas as pd

__all__ = ["shuffle_to_partitions", "known_partition_lengths", "categorical_dtype"]

# The fallback shuffle's working columns (set_index itself uses "_partitions").
_TARGET, _INDEX = "__dmondrian_compat_target", "__dmondrian_compat_index"


def shuffle_to_partitions(frame, column: str, npartitions: int, method=None):
    """Move every row of a dask DataFrame to the output partition its ``column`` names.

    The private path builds dask's ``Shuffle`` expression on ``column`` as the
    target partition numbers themselves, which is what ``set_index`` lowers to
    once it has searched its divisions. The public fallback is that
    ``set_index`` (on integer divisions ``0..npartitions``), the index kept
    as a column and restored.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        Rows to move; ``column`` holds integers in ``0..npartitions-1``, and the
        index has one level.
    column : str
        The target partition of every row (kept in the output).
    npartitions : int
        Output partitions.
    method : str, optional
        dask's shuffle method ("p2p", "tasks", "disk"); None lets dask choose.

    Returns
    -------
    dask.dataframe.DataFrame
        ``npartitions`` partitions, partition ``i`` holding the rows whose
        ``column`` is ``i``, with their index and columns; the order of rows
        within a partition is unspecified.
    """
    try:
        return _private_shuffle(frame, column, npartitions, method)
    except Exception:  # noqa: BLE001 - a private API of dask: the public path is the fallback
        return _shuffle_by_set_index(frame, column, npartitions, method)


def _private_shuffle(frame, column: str, npartitions: int, method):
    from dask.dataframe.dask_expr._collection import new_collection
    from dask.dataframe.dask_expr._shuffle import Shuffle

    # new_collection computes the expression's meta: a changed signature fails here.
    return new_collection(Shuffle(frame.expr, column, npartitions, False, method))


def _shuffle_by_set_index(frame, column: str, npartitions: int, method):
    meta = frame._meta
    staged = frame.map_partitions(_stage, column, meta=_stage(meta, column))
    moved = staged.set_index(_TARGET, divisions=list(range(npartitions + 1)),
                             shuffle_method=method)
    return moved.map_partitions(_restore, meta, column, meta=meta)


def _stage(df: pd.DataFrame, column: str) -> pd.DataFrame:
    out = df.rename(columns={column: _TARGET})
    out[_INDEX] = df.index
    return out


def _restore(df: pd.DataFrame, meta: pd.DataFrame, column: str) -> pd.DataFrame:
    out = df.drop(columns=[_INDEX])
    out[column] = df.index.to_numpy().astype(meta[column].dtype, copy=False)
    out.index = pd.Index(df[_INDEX].to_numpy(), name=meta.index.name,
                         dtype=meta.index.dtype)
    return out[list(meta.columns)]


def known_partition_lengths(ddf) -> tuple | None:
    """Rows of every partition when dask knows them without reading the data, else None.

    Parquet footers and in-memory frames give them through dask's private
    ``Lengths`` expression (what dask itself uses for ``len``). dask has no
    public way to ask without computing: the fallback is None, on which the
    caller reads the first partition (``to_delayed``) and estimates.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame

    Returns
    -------
    tuple of int or None
    """
    try:
        from dask.dataframe.dask_expr._expr import Lengths, Literal

        expr = Lengths(ddf.expr).optimize(fuse=False)
    except Exception:  # noqa: BLE001 - a private API of dask: None is the fallback
        return None
    if isinstance(expr, Literal):
        lengths = tuple(int(v) for v in expr.value)
        if len(lengths) == ddf.npartitions:
            return lengths
    return None


def categorical_dtype(labels: pd.Index) -> pd.CategoricalDtype:
    """A CategoricalDtype of ``labels``, which the caller knows distinct and never missing.

    pandas' private ``CategoricalDtype._from_fastpath`` skips the check the
    public constructor makes by hashing every label again; the fallback is
    the public constructor, which gives an equal dtype.

    Examples
    --------
    >>> categorical_dtype(pd.Index(["[1, 2]", "3"])) == pd.CategoricalDtype(["[1, 2]", "3"])
    True
    """
    fastpath = getattr(pd.CategoricalDtype, "_from_fastpath", None)
    if fastpath is not None:
        try:
            return fastpath(labels, False)
        except TypeError:  # a changed signature: the public constructor below
            pass
    return pd.CategoricalDtype(labels)
