"""Steps 3-5 moving only keys: the other columns never leave their input partition.

Routing reads the QIs and the columns the leaves read (the sensitive and noised ones); the shuffle
carries those as keys, each row indexed by the number of the piece of input it came from (the
shuffle keeps a shard's rows in order). Each output partition runs the local engine on its leaves,
as on the whole-row path, and publishes its rows' values as compact codes (:mod:`.back_codes`: class
bounds and code sets, not text). A second shuffle sends them back to their input partitions, by leaf
and input order; each input partition is read again, once, with all its columns, routed again to
find which of its rows each code belongs to, and gets its published values in place: output
partition ``i`` holds input partition ``i``'s rows, and no column but the keys and those codes
crosses the network.

Which path a plan takes is chosen by a cost model fitted to measured CPU
seconds of both paths on tables of several shapes (:func:`choose_exchange`,
:data:`COST_MODEL`). See docs/design.md, section "Moving only keys".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._compat import shuffle_to_partitions
from ..errors import ParameterError
from ..kinds import kind_spec
from ..options import DASK_PLAN
from ..partition.routing import leaf_order, route, row_positions
from .back_codes import back_columns, back_layout, decode_back
from .columns import PARTITION, leaf_inputs
from .counting_write import counted_shuffle
from .global_domain import encode_keys
from .graph import constant, partitions
from .leaves import conform, label_columns, output_partition_frame
from .memory import leaf_rows_for
from .plan import TopPlan, Verdict
from .shuffle import route_and_shuffle, target_dtype
from .written_check import write_released

__all__ = ["EXCHANGES", "COST_MODEL", "choose_exchange", "exchange_features", "keys_saving",
           "exchanged_bytes", "shipped_sizes", "published_meta", "publish_output_partition",
           "merge_input_partition", "anonymize_keys", "write_keys"]

#: The values of the ``exchange`` option: None and "auto" choose by cost.
EXCHANGES = (None, *DASK_PLAN["exchange"].choices)
#: The extra CPU microseconds a row costs on the keys path over the whole-row path,
#: a linear function of :func:`exchange_features` (feature name: coefficient). The
#: keys path reads every input partition twice, routes every row twice and runs a
#: second shuffle (a cost per QI and per partition); the whole-row path ships the
#: payload (a cost per payload byte). The keys' bytes, measured too, follow the
#: QIs' number on the swept shapes and are left out. Fitted by least squares on
#: both paths' measured CPU seconds (workers and client, medians of alternating
#: rounds) over the shapes of ``benchmarks/exchange_sweep.py``: rerun
#: ``python benchmarks/exchange_sweep.py --fit RESULTS.json`` and paste what it
#: prints here. The keys path is chosen when the estimate is below zero.
COST_MODEL = {"one": 0.648, "qis": 0.1846, "payload_bytes": -0.0155, "partitions_per_mrow": 0.1118}
#: Bytes a row's position, leaf and target partition add to the whole-row shuffle.
ROUTING_BYTES = 8 + 4 + 8
#: Bytes a row's piece number, leaf and target add to the keys path's way out, and
#: its leaf, target and flags word to its way back (:mod:`.back_codes`).
KEYS_ROUTING_BYTES = 2 + 2 + 2
BACK_ROUTING_BYTES = 2 + 2 + 1


def check_exchange(value) -> str | None:
    """The ``exchange`` option checked (None: by cost)."""
    if value not in EXCHANGES:
        raise ParameterError("exchange", f"exchange must be one of 'auto', 'keys', 'rows' "
                                         f"or None, got {value!r}")
    return None if value == "auto" else value


def exchanged_bytes(meta: pd.DataFrame, row_bytes: float, options, key_bytes):
    """Bytes a row moves through the network on each path: ``(rows, keys)``.

    ``row_bytes`` is the row's in-memory size (measured), ``key_bytes`` the bytes of each QI's
    shipped key (a sequence, from :func:`~.shipped_keys.key_dtypes`), or their total, spread evenly
    over the QIs when the types are not known yet. The whole-row path ships every column but the
    QIs, which travel as keys; the keys path ships the keys and the leaves' inputs out, and the
    published values back as codes (:mod:`.back_codes`): a label its class's two key bounds in its
    key's type (a set, one mask about a key's size), a number, a noised value or a class id 8 bytes.
    """
    qis = list(options.qis)
    if np.ndim(key_bytes) == 0:
        per_qi = [float(key_bytes) / max(len(qis), 1)] * len(qis)
    else:
        per_qi = [float(b) for b in key_bytes]
    key_total = sum(per_qi)
    qi_bytes = _columns_bytes(meta, qis)
    extras = _columns_bytes(meta, leaf_inputs(options))
    rows = max(float(row_bytes) - qi_bytes, 0.0) + key_total + ROUTING_BYTES
    back = 0.0
    for kind, per_key in zip(options.kinds, per_qi, strict=True):
        spec = kind_spec(kind)
        if not spec.publishes_labels(options.generalization):
            back += 8
        else:
            back += per_key if spec.label_shape == "set" else 2 * per_key
    back += 8 * len(options.noise) + (8 if options.class_column is not None else 0)
    keys = key_total + extras + KEYS_ROUTING_BYTES + back + BACK_ROUTING_BYTES
    return rows, keys


def exchange_features(meta: pd.DataFrame, row_bytes: float, options, key_bytes,
                      n_rows: int, n_partitions: int) -> dict:
    """What the cost model (:data:`COST_MODEL`) reads, all known before the choice.

    Parameters
    ----------
    meta : pandas.DataFrame
        The input's empty frame (its dtypes).
    row_bytes : float
        A row's in-memory size (measured on the first partition, else guessed).
    options
        The plan's options (its ``qis``).
    key_bytes : float or sequence of float
        The bytes of each QI's shipped key, or their total.
    n_rows, n_partitions : int
        Rows and input partitions of the table.

    Returns
    -------
    dict
        ``one`` (1), ``qis`` (their number), ``key_bytes`` (the keys' total),
        ``payload_bytes`` (a row's in-memory bytes but its QIs': what only the
        whole-row path ships) and ``partitions_per_mrow`` (input partitions a
        million rows: the keys path's fixed costs per partition, spread on the rows).
    """
    qis = list(options.qis)
    keys = float(key_bytes) if np.ndim(key_bytes) == 0 else float(sum(key_bytes))
    payload = max(float(row_bytes) - _columns_bytes(meta, qis), 0.0)
    return {"one": 1.0, "qis": float(len(qis)), "key_bytes": keys, "payload_bytes": payload,
            "partitions_per_mrow": 1e6 * max(int(n_partitions), 1) / max(int(n_rows), 1)}


def keys_saving(features: dict, model: dict | None = None) -> float:
    """CPU microseconds a row the keys path is estimated to save over the whole-row
    path (negative: it costs more), from :func:`exchange_features`."""
    model = COST_MODEL if model is None else model
    return -sum(coef * features[name] for name, coef in model.items())


def choose_exchange(requested, meta: pd.DataFrame, row_bytes: float, options,
                    key_bytes, n_rows: int = 1, n_partitions: int = 1) -> str:
    """"keys" or "rows": as ``requested``, else the path the cost model
    (:data:`COST_MODEL`, :func:`keys_saving`) estimates cheaper in CPU seconds.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> opts = SimpleNamespace(qis=["age"], kinds=["numeric"], generalization="range",
    ...                        sensitive=None, entity=None, noise=[], class_column=None)
    >>> meta = pd.DataFrame({"age": pd.Series([], dtype="int64")})
    >>> choose_exchange(None, meta, 870.0, opts, 1.0, 10**6, 4)
    'keys'
    >>> choose_exchange(None, meta, 16.0, opts, 1.0, 10**6, 4)
    'rows'
    >>> choose_exchange("keys", meta, 8.0, opts, 1.0)
    'keys'
    """
    if requested is not None:
        return requested
    features = exchange_features(meta, row_bytes, options, key_bytes, n_rows, n_partitions)
    return "keys" if keys_saving(features) > 0 else "rows"


def shipped_sizes(exchange: str, meta: pd.DataFrame, sizing, options, key_bytes
                  ) -> tuple[float | None, int]:
    """What a row ships on the keys path (None on the whole-row path) and the leaf size.

    A leaf of the keys path holds what its rows ship, not the rows: a default
    leaf size (``options.leaf_rows`` None) is then sized on that, never below
    the domain pass's (whose sample, sized for the smaller leaf, suffices).
    ``sizing`` is the domain pass's :class:`~dmondrian._dask.options.Sizing`.
    """
    if exchange != "keys":
        return None, sizing.leaf_rows
    shipped = exchanged_bytes(meta, sizing.row_bytes, options, key_bytes)[1]
    if options.leaf_rows is not None:
        return shipped, sizing.leaf_rows
    return shipped, max(sizing.leaf_rows,
                        leaf_rows_for(sizing.per_thread, shipped, len(options.qis)))


def _columns_bytes(meta: pd.DataFrame, columns) -> float:
    """In-memory bytes of ``columns`` a row, from their dtypes (text at 16)."""
    total = 0.0
    for c in columns:
        dtype = meta[c].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            total += 4
        elif getattr(dtype, "itemsize", None) and dtype.kind in "biufcmM":
            total += dtype.itemsize
        else:
            total += 16
    return total


def published_meta(release_meta: pd.DataFrame, top: TopPlan, n_partitions: int) -> pd.DataFrame:
    """The empty frame of :func:`publish_output_partition`: each row's codes
    (:mod:`.back_codes`) and input partition (of ``n_partitions``), indexed by leaf.

    ``release_meta`` is :func:`~.leaves.output_meta`'s frame.
    """
    columns = back_columns(back_layout(top), top, release_meta)
    out = pd.DataFrame(columns, index=pd.Index(np.zeros(0, dtype=top.leaf_dtype)))
    out[PARTITION] = np.zeros(0, dtype=target_dtype(n_partitions))
    return out


def publish_output_partition(df: pd.DataFrame, top: TopPlan, meta: pd.DataFrame,
                             partition_info=None, verdict: Verdict | None = None) -> pd.DataFrame:
    """Anonymize one output partition's leaves; its rows' published values as codes.

    Rows go back by input partition (``PARTITION``), then leaf (the index),
    then input order: no position travels (:mod:`.back_codes`).
    """
    published = output_partition_frame(df, top, partition_info, verdict)
    if published is None:
        return meta
    return conform(published, meta)


def merge_input_partition(df: pd.DataFrame, back: pd.DataFrame, top: TopPlan,
                          meta: pd.DataFrame, number: int) -> pd.DataFrame:
    """Input partition ``number`` with its rows' published values in place, rows in input order.

    The partition's rows are routed again, as the shuffle pass routed them: ``back`` holds, for each
    leaf, the published codes of this partition's rows of that leaf in their input order (suppressed
    rows flagged). ``meta`` is :func:`~.leaves.output_meta`'s frame; labels become Categoricals of
    text (their categories' order reveals no row).

    Raises
    ------
    RuntimeError
        When ``back`` is not exactly this partition's rows, leaf by leaf (an
        input that changed between passes): nothing is published.
    """
    n = len(df)
    positions = row_positions(number, n)
    leaf = route(encode_keys(df, top.domain), top.tree, positions)
    order, _, _, _ = leaf_order(leaf, positions, top.n_leaves)
    came = back.index.to_numpy(dtype=np.int64)
    if came.size > 1 and (came[1:] < came[:-1]).any():
        # A leaf's rows come in one shard, in order: a stable sort keeps that order.
        by_leaf = np.argsort(came, kind="stable")
        back, came = back.iloc[by_leaf], came[by_leaf]
    ok = came.size == n and (n == 0 or (0 <= came[0] and came[-1] < top.n_leaves))
    if ok and not np.array_equal(np.bincount(came, minlength=top.n_leaves),
                                 np.bincount(leaf, minlength=top.n_leaves)):
        ok = False
    if not ok:
        raise RuntimeError(f"dmondrian: input partition {number} has {n} rows but received "
                           f"published values for {came.size} rows, or for other leaves than its "
                           "rows are in; the input must be deterministic. Refusing to publish.")
    opts = top.options
    columns, kept = decode_back(back_layout(top), top, back,
                                masked=not (opts.suppression > 0 and opts.suppressed == "drop"))
    # Row r of the partition is row at[r] of ``back``.
    at = np.empty(n, dtype=np.int64)
    at[order] = np.arange(n, dtype=np.int64)
    if kept.all():
        frame = df.copy(deep=False)
    else:
        rows = np.flatnonzero(kept[at])
        frame, at = df.take(rows), at[rows]
    for col, values in columns.items():
        taken = values[at] if isinstance(values, np.ndarray) else values.take(at)
        frame[col] = pd.Series(taken, index=frame.index, copy=False)
    return conform(frame[list(meta.columns)], meta, keep=label_columns(top))


def _published(ddf, top: TopPlan, release_meta, shuffle_method, oversized_ok: bool):
    """The published values of every row, back in their input partitions (a dask DataFrame of
    ``ddf.npartitions`` partitions), the verdict (None for a counted plan) and the plan constant."""
    if top.counted:
        shuffled, plan_d = route_and_shuffle(ddf, top, shuffle_method)
        verdict = None
    else:
        shuffled, verdict, plan_d = counted_shuffle(ddf, top, shuffle_method, oversized_ok)
    meta = published_meta(release_meta, top, ddf.npartitions)
    extra = {} if verdict is None else {"verdict": verdict}
    published = shuffled.map_partitions(publish_output_partition, plan_d, meta, meta=meta,
                                        clear_divisions=True, **extra)
    return shuffle_to_partitions(published, PARTITION, ddf.npartitions, shuffle_method,
                                 ordered=True), verdict, plan_d


def _by_input_partition(fn, ddf, back, *args) -> list:
    """``fn(input partition i, its published values, *args, i)`` for every ``i``, as
    delayed objects: each task is told its partition's number (dask numbers a
    partition selected alone 0)."""
    from dask import delayed

    task = delayed(fn, pure=True)
    parts, backs = partitions(ddf), partitions(back)
    return [task(part, came, *args, i) for i, (part, came) in enumerate(zip(parts, backs,
                                                                             strict=True))]


def anonymize_keys(ddf, top: TopPlan, shuffle_method, release_meta, lazy_meta):
    """The lazy release of a plan on the keys path: input partition ``i`` anonymized is
    output partition ``i`` (a dask DataFrame).

    ``release_meta`` and ``lazy_meta`` are :func:`~.leaves.output_meta`'s and
    :func:`~.leaves.lazy_meta`'s frames.
    """
    import dask.dataframe as dd

    back, _, plan_d = _published(ddf, top, release_meta, shuffle_method, oversized_ok=True)
    # Partition i of all three is input partition i (no alignment on divisions); the
    # numbers are a collection of their own so that a partition selected alone
    # (``.partitions[i]``, ``get_partition``) still knows its number.
    numbers = dd.from_map(_number_frame, range(ddf.npartitions), meta=_number_frame(0).iloc[:0],
                          enforce_metadata=False)
    return dd.map_partitions(_merge_numbered, ddf, back, numbers, plan_d, release_meta,
                             meta=lazy_meta, align_dataframes=False, clear_divisions=True)


def _number_frame(number: int) -> pd.DataFrame:
    return pd.DataFrame({"number": np.array([number], dtype=np.int64)})


def _merge_numbered(df, back, number: pd.DataFrame, top, meta):
    return merge_input_partition(df, back, top, meta, int(number["number"].iloc[0]))


def write_keys(ddf, top: TopPlan, sink, shuffle_method, release_meta, oversized_ok: bool = False):
    """Write a plan's release on the keys path: input partition ``i`` anonymized, as
    ``part.<i>``, by the task that read it.

    Returns
    -------
    list of dask.delayed.Delayed
        The row counts of every input partition, one delayed frame each
        (:func:`~.written_check.written`); for an uncounted plan, then the verdict of its counts.
    """
    back, verdict, plan_d = _published(ddf, top, release_meta, shuffle_method, oversized_ok)
    written_parts = _by_input_partition(_write_input_partition, ddf, back, plan_d,
                                        constant(sink, "sink"), release_meta)
    return written_parts if verdict is None else [*written_parts, verdict]


def _write_input_partition(df, back, top: TopPlan, sink, meta, number: int):
    frame = merge_input_partition(df, back, top, meta, number)
    # As the whole-row path's writers: the sketch of what is written (the rows a
    # suppression drops are counted as unseen), the text the write encodes taken
    # from its dictionaries rather than hashed again row by row.
    return write_released(sink, frame, number, top.written_check, top.measure)
