"""The Dask engine's checked options and its sizes: leaf, output partition, sample.

The options are checked once, on the client, before any pass: the shared checks of
:func:`dmondrian.encoding.validation.check_options`, then what only this engine needs (each QI's
kind, ``leaf_rows``). The sizes follow from the workers' memory and the table's size. See
docs/design.md, section "Sizes and limits".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from ..encoding.sensitive import check_known_order, is_ordered
from ..encoding.validation import Options, check_options
from ..errors import ParameterError, UnsupportedDtypeError
from ..kinds.types import object_values
from ..local import encode_table
from ..options import DASK_PLAN
from ..privacy.noise import check_noise_dtypes, noise_seed
from .memory import (
    LEAF_ROWS_MAX,
    LEAF_ROWS_MIN,
    leaf_rows_for,
    measure_workers,
    output_partition_cap,
)
from .planner import PlanConfig

__all__ = ["SAMPLE_ROWS", "MAX_SAMPLE_LEVELS", "DaskOptions", "check_dask_options",
           "check_object_qis", "guess_row_bytes", "default_leaf_rows", "leaf_rows_for",
           "output_partition_rows", "Sizing", "sizing", "expected_levels", "least_row_bytes",
           "LEAF_ROWS_MIN", "LEAF_ROWS_MAX"]

#: Rows sampled per leaf the client expects to make; a region expected to
#: split into 2**L leaves is sampled with 2**L times this many rows.
SAMPLE_ROWS = 2048
#: The domain pass samples ``SAMPLE_ROWS`` rows for each of up to 2**10 leaves
#: the table is expected to make, so the first region pass can plan that many
#: leaves.
MAX_SAMPLE_LEVELS = 10


@dataclass(frozen=True)
class DaskOptions(Options):
    """The checked options, with ``hierarchies`` coerced to trees, plus what only
    the Dask engine needs: each QI's kind and ``leaf_rows``."""

    kinds: list
    leaf_rows: int | None


def check_dask_options(ddf, quasi_identifiers, k, leaf_rows, options) -> DaskOptions:
    """Check the options of a Dask run; raise the local engine's typed errors."""
    import dask.dataframe as dd

    if not isinstance(ddf, dd.DataFrame):
        raise ParameterError("ddf", f"expected a dask DataFrame, got {type(ddf).__name__}")
    checked = check_options(ddf.columns, quasi_identifiers, k, index_name=ddf._meta.index.name,
                            **options)
    check_noise_dtypes(checked.noise, ddf._meta.dtypes)
    leaf_rows = DASK_PLAN["leaf_rows"].check(leaf_rows)
    # Encoding the empty meta frame raises the local engine's typed errors for
    # unsupported dtypes and kinds, and coerces hierarchy files to trees.
    probe = encode_table(ddf._meta, checked.qis, checked.hierarchies, checked.qi_kinds)
    check_object_qis(ddf, [q for q in checked.qis
                           if q not in checked.qi_kinds and q not in checked.hierarchies])
    if checked.sensitive is not None:
        column = ddf[checked.sensitive]
        check_known_order(column, is_ordered(column._meta.dtype))
    trees = {qi.name: qi.hierarchy for qi in probe if qi.hierarchy is not None}
    shared = {f.name: getattr(checked, f.name) for f in fields(Options)}
    # Each leaf seeds its noise from one int and its id: a Generator gives that int.
    shared["random_state"] = noise_seed(checked.random_state)
    return DaskOptions(**{**shared, "hierarchies": trees}, kinds=[qi.kind for qi in probe],
                       leaf_rows=None if leaf_rows is None else int(leaf_rows))


#: Rows of the first partition whose values say what an object QI column holds.
_PEEK_ROWS = 1000


def check_object_qis(ddf, qis) -> None:
    """Refuse a QI column of ``datetime.date`` or ``Decimal`` objects in a Dask table.

    Its schema says only ``object``, so the kind detected from it would be nominal (every exact date
    listed, the order lost) where the local engine reads the same values as dates or numbers. The
    first partition's first rows tell what the column holds; only object columns are read.

    Raises
    ------
    UnsupportedDtypeError
        Naming the column and the Arrow type to give it.
    """
    meta = ddf._meta
    objects = [q for q in qis if isinstance(meta[q].dtype, np.dtype) and meta[q].dtype.kind == "O"]
    if not objects or ddf.npartitions == 0:
        return
    head = ddf[objects].partitions[0].compute().head(_PEEK_ROWS)
    for q in objects:
        values = object_values(head[q])
        if values is None:
            continue
        arrow = "pa.date32()" if values == "date" else "pa.decimal128(18, scale)"
        raise UnsupportedDtypeError(q, f"column {q!r} holds {values} objects, which a Dask table's "
                                       "schema types only as 'object': give it an Arrow type, e.g. "
                                       f"ddf[{q!r}] = ddf[{q!r}].astype(pd.ArrowDtype({arrow}))")


def _row_bytes(meta: pd.DataFrame, category: int, other: int) -> float:
    """A row's size from its dtypes: fixed-width columns at their item size,
    categoricals at ``category`` bytes and anything else (text) at ``other``."""
    row = 0.0
    for dtype in meta.dtypes:
        if isinstance(dtype, pd.CategoricalDtype):
            row += category
        elif getattr(dtype, "itemsize", None) and dtype.kind in "biufcmM":
            row += dtype.itemsize
        else:
            row += other
    return row


def guess_row_bytes(meta: pd.DataFrame) -> float:
    """A row's in-memory size guessed from the dtypes alone (before any data is read)."""
    return _row_bytes(meta, 4, 64)


def least_row_bytes(meta: pd.DataFrame) -> float:
    """The least a row can take in memory, from the dtypes alone (text at 8 bytes).

    A lower bound, for refusing a cluster before any data is read: a guess
    above the truth would refuse one that works.
    """
    return _row_bytes(meta, 1, 8)


def default_leaf_rows(client, meta: pd.DataFrame, n_qis: int, row_bytes=None) -> int:
    """Leaf size from worker memory: a leaf's local run must fit a share of one thread's.

    A thread's budget is what remains of a worker's limit, at the fraction
    where dask pauses it, after its baseline and the p2p shuffle's buffers
    (:class:`~dmondrian._dask.memory.WorkerMemory`); a leaf's rows at their
    output-partition cost take a fifth of it.

    Parameters
    ----------
    client : distributed.Client or None
        Its workers are measured (2 GB a thread when unknown).
    meta : pandas.DataFrame
        The table's empty frame: the row size is guessed from its dtypes.
    n_qis : int
        Number of QIs.
    row_bytes : float, optional
        A measured row size, instead of the guess.

    Returns
    -------
    int
        Between 1,000 and 4,000,000 rows.
    """
    mem = measure_workers(client) if client is not None else None
    return leaf_rows_for(None if mem is None else mem.per_thread,
                         row_bytes or guess_row_bytes(meta), n_qis)


def output_partition_rows(leaf_rows: int, n_rows: int, n_partitions: int,
                          per_thread: float | None, row_bytes: float, n_qis: int) -> int:
    """Rows an output partition may pack: an input partition's mean, within memory.

    Output partitions as large as the input's keep the shuffle's shards as
    few as a plain shuffle's; half a thread's budget at the output-partition
    cost of a row (:func:`~dmondrian._dask.memory.output_partition_cap`)
    bounds what one task holds, and one leaf always fits.
    """
    mean = -(-max(int(n_rows), 1) // max(int(n_partitions), 1))
    cap = output_partition_cap(per_thread, row_bytes, n_qis)
    return max(int(leaf_rows), min(mean, cap))


@dataclass(frozen=True)
class Sizing:
    """The leaf size and the domain pass's sample, fixed before the pass samples.

    The sample is the ``sample_size`` rows of smallest priority (``SAMPLE_ROWS`` per leaf the table
    is expected to make, for at least ``2**PlanConfig.max_levels`` leaves). A partition offers only
    its rows below ``rate``, twice the share the estimated size asks for, so the sample is exact
    unless the table is more than twice its estimate; a wrong estimate costs sample rows (then a
    pass), never client memory.
    """

    leaf_rows: int
    n_estimate: int
    sample_size: int
    rate: float
    #: A worker thread's memory budget (None if unknown) and the row size used.
    per_thread: float | None = None
    row_bytes: float = 0.0
    #: Whether ``row_bytes`` was measured on data (else guessed from the dtypes).
    measured: bool = False
    #: Rows of the largest input partition (0 until the domain pass counted them).
    largest_partition: int = 0


def expected_levels(n: float, leaf_rows: int, fill: float) -> int:
    """Levels of a balanced tree cutting ``n`` rows into leaves of ``fill * leaf_rows``."""
    return int(max(0.0, np.ceil(np.log2(max(n, 1.0) / (fill * leaf_rows)))))


def sizing(probe, n_known, n_partitions, leaf_rows, per_thread, meta_row_bytes, n_qis, k,
           sample_rows) -> Sizing:
    """Size the domain pass's sample from the table's (estimated) size and the leaf size.

    ``n_known`` is the exact row count when dask knows it, else the first partition's rows times the
    number of partitions estimate it. A ``leaf_rows`` of None becomes :func:`leaf_rows_for` the
    measured row size; any ``leaf_rows`` is then raised to ``2 * k``.
    """
    first_rows, measured = probe if probe is not None else (0, None)
    n_est = int(n_known) if n_known is not None else int(first_rows) * int(n_partitions)
    if leaf_rows is None:
        leaf_rows = leaf_rows_for(per_thread, measured or meta_row_bytes, n_qis)
    leaf_rows = max(int(leaf_rows), 2 * k)
    levels = expected_levels(n_est, leaf_rows, PlanConfig.fill)
    levels = min(MAX_SAMPLE_LEVELS, max(PlanConfig.max_levels, levels))
    size = int(sample_rows) * 2 ** levels
    return Sizing(leaf_rows, n_est, size, min(1.0, 2.0 * size / max(n_est, 1)), per_thread,
                  float(measured or meta_row_bytes), measured is not None)
