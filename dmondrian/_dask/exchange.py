"""Steps 3-5 moving only keys: the other columns never leave their input partition.

Routing reads the QIs and the columns the leaves read (the sensitive and
noised ones); the shuffle carries those as keys, with each row's input
position. Each output partition runs the local engine on its leaves, as on
the whole-row path, and publishes its rows' values (labels as text, numbers,
class ids, noised values) indexed by input position. A second shuffle sends
them back to their input partitions, and each input partition is read again,
once, with all its columns and gets its published values in place: output
partition ``i`` holds input partition ``i``'s rows, and no column but the
keys and those values crosses the network.

Which path a plan takes is chosen by the bytes each would move
(:func:`choose_exchange`). See docs/design.md, section "Moving only keys".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._compat import shuffle_to_partitions
from ..errors import ParameterError
from ..kinds import kind_spec
from .columns import PARTITION, leaf_inputs
from .counting_write import counted_shuffle
from .graph import constant
from .leaves import TEXT, class_columns, conform, label_columns, output_partition_frame
from .memory import leaf_rows_for
from .plan import TopPlan, Verdict
from .routing import row_offsets
from .shuffle import route_and_shuffle
from .written_check import written, written_meta

__all__ = ["EXCHANGES", "choose_exchange", "exchanged_bytes", "shipped_sizes", "published_meta",
           "publish_output_partition", "merge_input_partition", "anonymize_keys",
           "write_keys"]

#: The values of the ``exchange`` option: None and "auto" choose by cost.
EXCHANGES = (None, "auto", "keys", "rows")
#: The keys path moves its bytes twice (out and back) and reads the QIs twice; it is
#: chosen when the whole-row path would move this many times more bytes a row.
KEYS_ADVANTAGE = 2.0
#: Bytes a published label costs a row on its way back (text and its offset).
LABEL_BYTES = 16
#: Bytes a row's position, leaf and target partition add to a shuffle.
ROUTING_BYTES = 8 + 4 + 8


def check_exchange(value) -> str | None:
    """The ``exchange`` option checked (None: by cost)."""
    if value not in EXCHANGES:
        raise ParameterError("exchange", f"exchange must be one of 'auto', 'keys', 'rows' "
                                         f"or None, got {value!r}")
    return None if value == "auto" else value


def exchanged_bytes(meta: pd.DataFrame, row_bytes: float, options, key_bytes: float):
    """Bytes a row moves through the network on each path: ``(rows, keys)``.

    ``row_bytes`` is the row's in-memory size (measured), ``key_bytes`` the
    QIs' shipped keys. The whole-row path ships every column but the QIs,
    which travel as keys; the keys path ships the keys and the leaves'
    inputs out, and the published values back.
    """
    qis = list(options.qis)
    qi_bytes = _columns_bytes(meta, qis)
    extras = _columns_bytes(meta, leaf_inputs(options))
    rows = max(float(row_bytes) - qi_bytes, 0.0) + key_bytes + ROUTING_BYTES
    back = sum(LABEL_BYTES if kind_spec(kind).publishes_labels(options.generalization) else 8
               for kind in options.kinds)
    back += 8 * len(options.noise) + (8 if options.class_column is not None else 0)
    keys = key_bytes + extras + ROUTING_BYTES + back + 16
    return rows, keys


def choose_exchange(requested, meta: pd.DataFrame, row_bytes: float, options,
                    key_bytes: float) -> str:
    """"keys" or "rows": as ``requested``, else the path whose shuffles move fewer bytes,
    the keys path only when it saves :data:`KEYS_ADVANTAGE` times its bytes.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> opts = SimpleNamespace(qis=["age"], kinds=["numeric"], generalization="range",
    ...                        sensitive=None, entity=None, noise=[], class_column=None)
    >>> meta = pd.DataFrame({"age": pd.Series([], dtype="int64")})
    >>> choose_exchange(None, meta, 870.0, opts, 1.0), choose_exchange(None, meta, 60.0, opts, 1.0)
    ('keys', 'rows')
    >>> choose_exchange("keys", meta, 60.0, opts, 1.0)
    'keys'
    """
    if requested is not None:
        return requested
    rows, keys = exchanged_bytes(meta, row_bytes, options, key_bytes)
    return "keys" if rows >= KEYS_ADVANTAGE * keys else "rows"


def shipped_sizes(exchange: str, meta: pd.DataFrame, sizing, options, key_bytes: float
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


def _published_columns(top: TopPlan) -> list:
    """What an output partition publishes: every QI, the noised columns, the class column."""
    opts = top.options
    noised = [nc.column for nc in opts.noise]
    return [*opts.qis, *(c for c in noised if c not in opts.qis), *class_columns(top)]


def published_meta(release_meta: pd.DataFrame, top: TopPlan) -> pd.DataFrame:
    """The empty frame of :func:`publish_output_partition`: labels as text, the input
    partition of every row, indexed by input position.

    ``release_meta`` is :func:`~.leaves.output_meta`'s frame.
    """
    labels = set(label_columns(top))
    out = pd.DataFrame(index=pd.Index(np.zeros(0, dtype=np.int64)))
    for col in _published_columns(top):
        # Labels stay Arrow text through the shuffle (an object column would be
        # converted to Arrow and back, and hashed as Python objects on arrival).
        out[col] = (pd.Series([], dtype=TEXT).array if col in labels
                    else release_meta[col].iloc[:0].to_numpy())
    out[PARTITION] = np.zeros(0, dtype=np.int64)
    return out


def publish_output_partition(df: pd.DataFrame, top: TopPlan, meta: pd.DataFrame,
                             partition_info=None, verdict: Verdict | None = None
                             ) -> pd.DataFrame:
    """Anonymize one output partition's leaves; its rows' published values, by position.

    Labels travel as text (a Categorical's dictionary would travel whole in
    every shard); ``PARTITION`` names each row's input partition.
    """
    published = output_partition_frame(df, top, partition_info, verdict)
    if published is None:
        return meta
    out = pd.DataFrame(index=published.index)
    for col in meta.columns[:-1]:
        column = published[col]
        if meta[col].dtype == TEXT:
            column = _as_text(column)
        out[col] = column.array
    out[PARTITION] = published.index.to_numpy() >> np.int64(32)
    return conform(out, meta)


def _as_text(column: pd.Series):
    """A Categorical column as text, each category converted once."""
    values = column.array
    categories = pd.array([str(c) for c in values.categories], dtype=TEXT)
    return pd.Series(categories.take(values.codes, allow_fill=True), index=column.index)


def merge_input_partition(df: pd.DataFrame, back: pd.DataFrame, top: TopPlan,
                          meta: pd.DataFrame, partition_info=None) -> pd.DataFrame:
    """Input partition ``df`` with its rows' published values in place, rows in input order.

    ``back`` holds the published values of exactly this partition's rows
    (some fewer with ``suppressed="drop"``), indexed by input position.
    ``meta`` is :func:`~.leaves.output_meta`'s frame; labels become
    Categoricals of text with sorted categories (their order reveals no row).

    Raises
    ------
    RuntimeError
        When ``back`` is not exactly this partition's rows (an input that
        changed between passes): nothing is published.
    """
    positions = back.index.to_numpy(dtype=np.int64)
    order = np.argsort(positions, kind="stable")
    kept = row_offsets(positions[order])
    # The partition's number from its rows' positions: dask numbers a partition
    # selected alone (get_partition, head) 0 in partition_info.
    number = int(positions[order[0]] >> np.int64(32)) if positions.size else (
        partition_info["number"] if partition_info else 0)
    n = len(df)
    dropped = top.options.suppression > 0 and top.options.suppressed == "drop"
    ok = ((positions >> np.int64(32)) == number).all() and (kept.size == n or dropped)
    if ok and kept.size:
        ok = kept[-1] < n and (kept.size < 2 or bool((kept[1:] > kept[:-1]).all()))
    if not ok:
        raise RuntimeError(
            f"dmondrian: input partition {number} has {n} rows but received published "
            f"values for {kept.size} rows of its own; the input must be deterministic. "
            "Refusing to publish.")
    frame = df.copy(deep=False) if kept.size == n else df.take(kept)
    labels = label_columns(top)
    for col in back.columns:
        if col == PARTITION:
            continue
        frame[col] = (_as_labels(back[col], order) if col in labels
                      else back[col].to_numpy()[order])
    return conform(frame[list(meta.columns)], meta, keep=labels)


def _as_labels(text: pd.Series, order: np.ndarray) -> pd.Categorical:
    """Text labels, taken in ``order``, as a Categorical of text, categories sorted.

    Arrow's hash encodes the text (pandas' factorize would hash Python
    objects); only the codes are reordered.

    Examples
    --------
    >>> text = pd.Series(pd.array(["b", "a", None, "b"], dtype=TEXT))
    >>> out = _as_labels(text, np.array([3, 2, 1, 0]))
    >>> list(out.categories), out.codes.tolist()
    (['a', 'b'], [1, -1, 0, 1])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values = (text.array.__arrow_array__() if hasattr(text.array, "__arrow_array__")
              else pa.array(text.to_numpy(dtype=object), type=pa.string(), from_pandas=True))
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    encoded = pc.dictionary_encode(values)
    sorted_codes = pc.array_sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(sorted_codes.size + 1, dtype=np.int32)
    rank[sorted_codes] = np.arange(sorted_codes.size, dtype=np.int32)
    rank[-1] = -1  # a missing label: code -1 (index -1 picks it)
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)[order]
    categories = pd.Index(encoded.dictionary.take(sorted_codes).to_pylist(), dtype=TEXT)
    return pd.Categorical.from_codes(rank[codes], dtype=pd.CategoricalDtype(categories))


def _published(ddf, top: TopPlan, release_meta, shuffle_method, oversized_ok: bool):
    """The published values of every row, back in their input partitions (a dask
    DataFrame of ``ddf.npartitions`` partitions), the verdict (None for a counted plan)
    and the plan constant."""
    if top.counted:
        shuffled, plan_d = route_and_shuffle(ddf, top, shuffle_method)
        verdict = None
    else:
        shuffled, verdict, plan_d = counted_shuffle(ddf, top, shuffle_method, oversized_ok)
    meta = published_meta(release_meta, top)
    extra = {} if verdict is None else {"verdict": verdict}
    published = shuffled.map_partitions(publish_output_partition, plan_d, meta, meta=meta,
                                        clear_divisions=True, **extra)
    return shuffle_to_partitions(published, PARTITION, ddf.npartitions, shuffle_method), \
        verdict, plan_d


def anonymize_keys(ddf, top: TopPlan, shuffle_method, release_meta, lazy_meta):
    """The lazy release of a plan on the keys path: input partition ``i`` anonymized is
    output partition ``i`` (a dask DataFrame).

    ``release_meta`` and ``lazy_meta`` are :func:`~.leaves.output_meta`'s and
    :func:`~.leaves.lazy_meta`'s frames.
    """
    import dask.dataframe as dd

    back, _, plan_d = _published(ddf, top, release_meta, shuffle_method, oversized_ok=True)
    # Partition i of both is input partition i: no alignment on divisions.
    return dd.map_partitions(merge_input_partition, ddf, back, plan_d, release_meta,
                             meta=lazy_meta, align_dataframes=False, clear_divisions=True)


def write_keys(ddf, top: TopPlan, sink, shuffle_method, release_meta,
               oversized_ok: bool = False):
    """Write a plan's release on the keys path: input partition ``i`` anonymized, as
    ``part.<i>``, by the task that read it.

    Returns
    -------
    dask.dataframe.DataFrame, or a list of dask.delayed.Delayed
        The row counts of every input partition; for an uncounted plan, one
        delayed frame per input partition, then the verdict of its counts.
    """
    import dask.dataframe as dd

    back, verdict, plan_d = _published(ddf, top, release_meta, shuffle_method, oversized_ok)
    written = dd.map_partitions(_write_input_partition, ddf, back, plan_d, constant(sink, "sink"),
                                release_meta, meta=written_meta(top.written_check),
                                align_dataframes=False, clear_divisions=True)
    return written if verdict is None else [*written.to_delayed(optimize_graph=True), verdict]


def _write_input_partition(df, back, top: TopPlan, sink, meta, partition_info=None):
    frame = merge_input_partition(df, back, top, meta, partition_info)
    number = partition_info["number"] if partition_info else 0
    # The input partition as read, index included: what the domain pass would sketch.
    return written(sink.write(frame, number), df, top.written_check)
