"""Step 3, the shuffle: route every row to its leaf, move it to its leaf's output partition.

Each input partition is routed once: the QIs are encoded into global keys, the keys walk the cut
tree, and the row gets its leaf and output partition. dask's shuffle is then told each row's target
partition instead of searching or sorting for it. The QIs travel as their keys, not their values.
See docs/design.md, section "Step 3: the shuffle".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._compat import shuffle_to_partitions
from ..errors import ParameterError
from ..partition.routing import route_to_partitions, row_positions
from .columns import INDEX, LEAF, PARTITION, carried, key_names, read_columns
from .global_domain import encode_keys
from .graph import constant, partitions
from .plan import TopPlan
from .shipped_keys import narrow_keys
from .shuffle_sizes import piece_bounds

__all__ = ["attach_leaf", "attach_piece", "piece_dtype", "piece_partitions", "target_dtype",
           "routed_partitions", "routed_meta", "routing_input", "to_output_partitions",
           "route_and_shuffle", "check_counted", "distributed_shuffle_method"]


def attach_leaf(df: pd.DataFrame, top: TopPlan, partition_info=None,
                start: int = 0, piece: tuple | None = None) -> pd.DataFrame:
    """Route a partition's rows: index them by input position, add leaf and output partition.

    The QI columns are replaced by their keys (:mod:`.shipped_keys`). The input index, unless it is
    the positions 0..n-1, rides along as a column. ``df`` may be a piece of its input partition,
    starting at row ``start``. On the keys path the rows are indexed by their piece's number instead
    (``piece``: the number and its type, :func:`piece_dtype`): a row's place in its piece is where
    it is in its shard, which the shuffle keeps.
    """
    number = partition_info["number"] if partition_info else 0
    keys = encode_keys(df, top.domain)
    # The positions that split relaxed ties also order each leaf's rows for
    # the local engine. They travel as the index: the p2p shuffle ships the
    # index whatever it is, so a position column would cost 8 bytes a row more.
    positions = row_positions(number, len(df))
    if start:
        positions += start
    leaf, partition = route_to_partitions(keys, top.tree, positions, top.partition_of_leaf,
                                          top.leaf_dtype)
    if top.positional_index:
        if not (isinstance(df.index, pd.RangeIndex) and df.index.start == start
                and df.index.step == 1):
            raise RuntimeError(f"dmondrian: input partition {number} no longer has the index "
                               "0..n-1 it had in the domain pass; the input must be deterministic")
    # The new columns join as Series on the output's own index: pandas then
    # takes them as they are instead of copying arrays handed to it bare.
    if top.exchange == "keys":
        number_of_piece, dtype = piece if piece is not None else (number, piece_dtype(top, 1))
        index = pd.Index(np.full(len(df), number_of_piece, dtype=dtype), copy=False)
    else:
        index = pd.Index(positions, copy=False)
    at, internal, names = carried(top.options.qis, top.columns, top.travelling)
    if top.travelling is not None:  # the columns read for routing only (routing_input)
        at = [df.columns.get_loc(c) for c in names]
    out = df.iloc[:, at].set_axis(internal, axis=1).set_axis(index, axis=0)
    try:
        shipped = narrow_keys(keys, top.key_dtypes, top.key_offsets, top.domain.names,
                              top.key_steps)
    except ValueError as e:
        raise RuntimeError(f"dmondrian: input partition {number}: {e}; the input must be "
                           "deterministic") from None
    for name, column in zip(key_names(top.domain.d), shipped, strict=True):
        out[name] = pd.Series(column, index=index, copy=False)
    if top.ships_index:
        out[INDEX] = df.index  # as it is (a MultiIndex makes no Series)
    out[LEAF] = pd.Series(leaf, index=index, copy=False)
    if top.exchange == "keys":
        partition = partition.astype(target_dtype(len(top.output_partitions)))
    out[PARTITION] = pd.Series(partition, index=index, copy=False)
    return out


def attach_piece(df: pd.DataFrame, top: TopPlan, number: int, start: int,
                 stop: int | None, piece: tuple | None = None) -> pd.DataFrame:
    """Route rows ``start:stop`` of input partition ``number`` (:func:`attach_leaf`).

    Their positions are those of the whole partition: a plan routes the
    same rows the same way whatever the pieces.
    """
    return attach_leaf(df.iloc[start:stop], top, {"number": number}, start, piece)


def piece_dtype(top: TopPlan, n_partitions: int) -> np.dtype:
    """The type of the keys path's piece numbers (the routed inputs of the shuffle)."""
    count = (len(piece_bounds(top.input_piece_rows, top.input_rows)) if top.input_piece_rows
             else n_partitions)
    return np.min_scalar_type(-max(1, count))


def target_dtype(n_partitions: int) -> np.dtype:
    """The narrowest type of a shuffle's target numbers ``0..n_partitions-1`` (the keys
    path's shuffles send 2 bytes a row instead of 8 below 32,768 partitions)."""
    return np.min_scalar_type(-max(1, n_partitions))


def piece_partitions(top: TopPlan) -> np.ndarray | None:
    """The input partition of every piece (None: each partition is one piece)."""
    if not top.input_piece_rows:
        return None
    return np.array([p for p, _, _ in piece_bounds(top.input_piece_rows, top.input_rows)],
                    dtype=np.int64)


def routed_partitions(ddf, top: TopPlan, plan_d) -> list:
    """The routed input, one delayed frame per input partition or piece of one.

    An input partition larger than the plan's ``input_piece_rows`` is read by one task and routed in
    pieces, each its own task and its own input of the shuffle: what a task routes and cuts into
    shards stays within the workers' memory whatever the input's partitions
    (:func:`~dmondrian._dask.memory.input_piece_rows`).
    """
    from dask import delayed

    parts = partitions(ddf)
    keys = top.exchange == "keys"
    dtype = piece_dtype(top, len(parts))
    if not top.input_piece_rows:
        attach = delayed(attach_leaf, pure=True)
        return [attach(part, plan_d, {"number": i}, 0, (i, dtype) if keys else None)
                for i, part in enumerate(parts)]
    piece = delayed(attach_piece, pure=True)
    return [piece(parts[p], plan_d, p, start, stop, (i, dtype) if keys else None) for i,
            (p, start, stop) in enumerate(piece_bounds(top.input_piece_rows, top.input_rows))]


def routed_meta(ddf, top: TopPlan) -> pd.DataFrame:
    """The empty frame of :func:`attach_leaf`'s output."""
    _, internal, names = carried(top.options.qis, top.columns, top.travelling)
    meta = ddf._meta[names].set_axis(internal, axis=1)
    for name, dtype in zip(key_names(top.domain.d), top.key_dtypes, strict=True):
        meta[name] = np.zeros(0, dtype=dtype)
    if top.ships_index:
        meta[INDEX] = ddf._meta.index
    meta[LEAF] = np.zeros(0, dtype=top.leaf_dtype)
    keys = top.exchange == "keys"
    meta[PARTITION] = np.zeros(0, dtype=target_dtype(len(top.output_partitions)) if keys
                               else np.int64)
    meta.index = pd.Index(np.zeros(0, dtype=piece_dtype(top, ddf.npartitions) if keys
                                   else np.int64))
    return meta


def routing_input(ddf, top: TopPlan):
    """What the shuffle pass reads: every column ("rows"), or only the QIs and the columns the
    leaves read ("keys": the rest stays in the input until it is written)."""
    if top.travelling is None:
        return ddf
    return ddf[read_columns(top.columns, top.options)]


def to_output_partitions(routed, n_partitions: int, shuffle_method, ordered: bool = False):
    """Move every routed row to the output partition its :data:`.columns.PARTITION` names.

    The target is computed while routing, so the shuffle is built on it directly
    (:func:`dmondrian._compat.shuffle_to_partitions`): no search, and no ``set_index`` that would
    sort every output partition only for the engine to reorder it again.
    """
    return shuffle_to_partitions(routed, PARTITION, n_partitions, shuffle_method, ordered)


def route_and_shuffle(ddf, top: TopPlan, shuffle_method):
    """The routed rows moved to their output partitions, and the plan as a graph constant."""
    check_counted(top)
    plan_d = constant(top, "plan")
    ddf = routing_input(ddf, top)
    # Delayed partitions when only some columns are read: dask's optimizer
    # would fuse the reads of a narrow projection into fewer partitions, and
    # a row's input position must name the partition it is written back to.
    if top.input_piece_rows or top.travelling is not None:
        import dask.dataframe as dd

        routed = dd.from_delayed(routed_partitions(ddf, top, plan_d), meta=routed_meta(ddf, top),
                                 verify_meta=False)
    else:
        routed = ddf.map_partitions(attach_leaf, plan_d, meta=routed_meta(ddf, top))
    return to_output_partitions(routed, len(top.output_partitions), shuffle_method,
                                top.exchange == "keys"), plan_d


def check_counted(top: TopPlan) -> None:
    """Refuse a plan whose leaf counts are left to the writers' shuffle pass."""
    if not top.counted:
        raise ParameterError("top", "this plan's leaf counts are not exact yet; only "
                                    "anonymize_to_parquet can apply it")


def distributed_shuffle_method() -> str:
    """p2p when the workers can run it (it needs pyarrow), else the task shuffle."""
    try:
        import distributed.shuffle  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:  # pragma: no cover - both are dependencies
        return "tasks"
    return "p2p"
