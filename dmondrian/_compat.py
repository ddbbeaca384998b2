"""Private APIs of dask and pandas, each behind a function with a public fallback.

A private API saves work the public ones would repeat, and may change in any release. Each function
here tries it and, when it is missing or refuses the call, takes a public path to the same result.

See docs/design.md, section "Third-party private APIs".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["shuffle_to_partitions", "known_partition_lengths", "categorical_dtype",
           "scheduler_workers", "job_progress_probe", "hll_estimate_count", "nonempty_meta",
           "unknown_categories", "has_unknown_categories"]

# The fallback shuffle's working columns (set_index itself uses "_partitions").
_TARGET, _INDEX = "__dmondrian_compat_target", "__dmondrian_compat_index"
_ORDER = "__dmondrian_compat_order"


def shuffle_to_partitions(frame, column: str, npartitions: int, method=None, ordered: bool = False):
    """Move every row of a dask DataFrame to the output partition its ``column`` names.

    The private path builds dask's ``Shuffle`` expression on ``column`` as the target partition
    numbers themselves, which is what ``set_index`` lowers to once it has searched its divisions.
    The public fallback is that ``set_index`` (on integer divisions ``0..npartitions``), the index
    kept as a column and restored.

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

    ordered : bool, default False
        Whether the rows of each input partition must keep their order in every output partition
        (dask's shuffles do; the fallback's sort would not, and restores it).

    Returns
    -------
    dask.dataframe.DataFrame
        ``npartitions`` partitions, partition ``i`` holding the rows whose ``column`` is ``i``, with
        their index and columns; rows within a partition are in an unspecified order, but with
        ``ordered`` sorted stably by their index, the rows of an input partition in their order for
        each index value.
    """
    try:
        return _private_shuffle(frame, column, npartitions, method)
    except Exception:  # noqa: BLE001 - a private API of dask: the public path is the fallback
        return _shuffle_by_set_index(frame, column, npartitions, method, ordered)


def _private_shuffle(frame, column: str, npartitions: int, method):
    from dask.dataframe.dask_expr._collection import new_collection
    from dask.dataframe.dask_expr._shuffle import Shuffle

    # new_collection computes the expression's meta: a changed signature fails here.
    return new_collection(Shuffle(frame.expr, column, npartitions, False, method))


def _shuffle_by_set_index(frame, column: str, npartitions: int, method, ordered=False):
    meta = frame._meta
    staged = frame.map_partitions(_stage, column, ordered, meta=_stage(meta, column, ordered))
    moved = staged.set_index(_TARGET, divisions=list(range(npartitions + 1)), shuffle_method=method)
    return moved.map_partitions(_restore, meta, column, ordered, meta=meta)


def _stage(df: pd.DataFrame, column: str, ordered: bool = False) -> pd.DataFrame:
    out = df.rename(columns={column: _TARGET})
    out[_INDEX] = df.index
    if ordered:
        out[_ORDER] = np.arange(len(df), dtype=np.int64)
    return out


def _restore(df: pd.DataFrame, meta: pd.DataFrame, column: str,
             ordered: bool = False) -> pd.DataFrame:
    if ordered:
        # set_index sorts each output partition, not stably: order the rows by
        # their index, then their place in their input partition.
        df = df.iloc[np.lexsort((df.pop(_ORDER).to_numpy(), df[_INDEX].to_numpy()))]
    out = df.drop(columns=[_INDEX])
    out[column] = df.index.to_numpy().astype(meta[column].dtype, copy=False)
    out.index = pd.Index(df[_INDEX].to_numpy(), name=meta.index.name, dtype=meta.index.dtype)
    return out[list(meta.columns)]


def known_partition_lengths(ddf) -> tuple | None:
    """Rows of every partition when dask knows them without reading the data, else None.

    Parquet footers and in-memory frames give them through dask's private ``Lengths`` expression
    (what dask itself uses for ``len``). dask has no public way to ask without computing: the
    fallback is None, on which the caller reads the first partition (``to_delayed``) and estimates.

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


def from_delayed_named(parts, meta: pd.DataFrame, divisions=None):
    """``dask.dataframe.from_delayed(parts, meta, divisions, verify_meta=False)``, named
    by the partitions' task keys instead of a token of its meta.

    ``from_delayed`` names the frame by a token of every operand, and dask tokenizes a Categorical
    dtype by its categories: a release's label columns hold every label of the release (tens of
    thousands, Arrow text that dask's tokenizer walks value by value). The private path builds
    dask's ``FromDelayed`` expression with its token given: a token of the task keys, which fix what
    the frame computes when the tasks are pure or read uuid-named constants and futures. The public
    fallback is ``from_delayed`` itself.

    Parameters
    ----------
    parts : list of dask.delayed.Delayed
        One partition each.
    meta : pandas.DataFrame
        The partitions' empty frame.
    divisions : tuple, optional
        As ``from_delayed``'s.

    Returns
    -------
    dask.dataframe.DataFrame
    """
    try:
        return _private_from_delayed(parts, meta, divisions)
    except Exception:  # noqa: BLE001 - a private API of dask: the public path is the fallback
        import dask.dataframe as dd

        return dd.from_delayed(parts, meta=meta, divisions=divisions, verify_meta=False)


def _private_from_delayed(parts, meta: pd.DataFrame, divisions):
    from dask.base import tokenize
    from dask.dataframe.dask_expr._collection import new_collection
    from dask.dataframe.dask_expr._expr import ArrowStringConversion, DelayedsExpr
    from dask.dataframe.dask_expr.io._delayed import FromDelayed
    from dask.dataframe.utils import pyarrow_strings_enabled

    if divisions is not None and len(divisions) != len(parts) + 1:
        raise ValueError("divisions should be a tuple of len(parts) + 1")
    token = tokenize("dmondrian-from-delayed", [p.key for p in parts], divisions)
    expr = FromDelayed(DelayedsExpr(*parts), meta, None if divisions is None else list(divisions),
                       False, None, None, _determ_token=token)
    if pyarrow_strings_enabled() and any(pd.api.types.is_object_dtype(dtype)
                                         for dtype in meta.dtypes.values):
        expr = ArrowStringConversion(expr)  # as from_delayed converts object columns
    return new_collection(expr)


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


def scheduler_workers(client) -> dict:
    """Every worker the scheduler knows, ``{address: info}``, however many there are.

    ``Client.scheduler_info()`` lists only the first few workers unless asked ``n_workers=-1``;
    distributed releases before that argument list them all and refuse it.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    dict
    """
    try:
        return client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # older distributed: no n_workers argument, every worker listed
        return client.scheduler_info()["workers"]


def job_progress_probe():
    """The function a scheduler runs to tell how far a job is, and whether it can move.

    ``probe(keys, dask_scheduler=...)`` returns the number of the job's tasks (those of ``keys`` and
    everything they wait for) not finished yet, and whether one of them is assigned to a worker that
    is not paused (which will run it: the job is not stalled, however long the task). It reads the
    scheduler's ``TaskState`` and ``WorkerState`` internals (no public API tells which unfinished
    task waits on a paused worker): a caller whose probe fails must treat the job as unprobed. Built
    in a closure so that it travels by value: the scheduler needs no dmondrian installed.

    Returns
    -------
    callable
    """
    def probe(keys, dask_scheduler=None):
        tasks = dask_scheduler.tasks
        stack = [tasks[k] for k in keys if k in tasks]
        seen, remaining, movable = set(), 0, False
        while stack:
            ts = stack.pop()
            if ts.key in seen:
                continue
            seen.add(ts.key)
            if ts.state in ("memory", "erred", "released", "forgotten"):
                continue
            remaining += 1
            worker = ts.processing_on
            if worker is not None and getattr(worker.status, "name", "") != "paused":
                movable = True
            stack.extend(ts.dependencies)
        return remaining, movable

    return probe


def hll_estimate_count(registers, bits: int) -> float:
    """The distinct count a HyperLogLog's ``registers`` estimate (``2**bits`` of them).

    dask's private ``hyperloglog.estimate_count`` is the estimator its
    ``nunique_approx`` uses; the fallback is the same estimator written out
    (Flajolet et al. 2007, with its small- and large-range corrections).

    Examples
    --------
    >>> import numpy as np
    >>> round(hll_estimate_count(np.zeros(2**10, dtype=np.uint8), 10))
    0
    """
    try:
        from dask.dataframe.hyperloglog import estimate_count

        return float(estimate_count(registers, bits))
    except (ImportError, TypeError):  # a moved or changed private function
        pass
    m = 1 << bits
    regs = np.asarray(registers, dtype=np.float64).reshape(-1, m).max(axis=0)
    estimate = 0.7213 / (1.0 + 1.079 / m) * m * m / np.sum(2.0 ** -regs)
    zeros = int((regs == 0).sum())
    if estimate < 2.5 * m and zeros:
        return float(m * np.log(m / zeros))
    if estimate > 2**32 / 30.0:
        return float(-(2**32) * np.log1p(-estimate / 2**32))
    return float(estimate)


def nonempty_meta(meta: pd.DataFrame) -> pd.DataFrame:
    """A small non-empty frame with ``meta``'s columns, dtypes and index (fake values).

    dask's ``meta_nonempty`` (in ``dask.dataframe.utils``, which dask does
    not document) picks a plausible value per dtype; the fallback reindexes
    to two rows and fills what reindexing would leave missing or retype.
    """
    try:
        from dask.dataframe.utils import meta_nonempty

        return meta_nonempty(meta)
    except ImportError:
        pass
    out = meta.reindex(pd.Index([0, 1], dtype=meta.index.dtype, name=meta.index.name))
    for col in meta.columns:
        dtype = meta[col].dtype
        if dtype == np.dtype(object):
            out[col] = pd.Series(["x"] * len(out), index=out.index, dtype=object)
        elif out[col].dtype != dtype and isinstance(dtype, np.dtype):
            out[col] = np.zeros(2, dtype=dtype)
    return out


def unknown_categories() -> str:
    """dask's placeholder category of a Categorical whose categories dask does not know."""
    try:
        from dask.dataframe.utils import UNKNOWN_CATEGORIES

        return UNKNOWN_CATEGORIES
    except ImportError:
        return "__UNKNOWN_CATEGORIES__"


def has_unknown_categories(dtype: pd.CategoricalDtype) -> bool:
    """Whether a dask meta's Categorical ``dtype`` holds only dask's placeholder category.

    Examples
    --------
    >>> has_unknown_categories(pd.CategoricalDtype([unknown_categories()]))
    True
    >>> has_unknown_categories(pd.CategoricalDtype(["a"]))
    False
    """
    return len(dtype.categories) == 1 and dtype.categories[0] == unknown_categories()
