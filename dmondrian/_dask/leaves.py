"""Step 4: each output partition runs the local engine on all its leaves, in one call.

A partition first checks that it received exactly the rows counted for each of its leaves, gathers
the shipped keys into the kernel's buffer by leaf then input position, and cuts every leaf as its
own root with the global scales, exactly as the local engine would cut that leaf alone. Step 5 is
here too: the output frame, labels as Categoricals of text (dask's ``to_parquet`` and the Parquet
sink both write them as Parquet dictionaries). See docs/design.md, section "Step 4: leaves".
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import lru_cache

import numpy as np
import pandas as pd

from .. import _kernel as K
from .._compat import has_unknown_categories, unknown_categories
from ..io.parquet_sink import ParquetSink, empty_like
from ..kinds import kind_spec
from ..local import kernel_rules, partition, publish, riding_codes
from ..partition.routing import leaf_order, row_offsets
from ..privacy import suppression
from ..privacy.constraints import KAnonymity, KernelPrivacy, kernel_privacy, with_entity
from ..privacy.entities import encode_entities
from ..privacy.noise import noise_groups, noisy_columns
from ..release.identifiers import without_identifiers
from ..release.publish import class_values
from .columns import INDEX, LEAF, carried, key_names
from .entity_pass import entity_hashes
from .memory import release_freed_memory
from .plan import TopPlan, Verdict
from .shipped_keys import gather_keys, partition_encodings
from .text import TEXT, text_labels
from .written_check import write_released

__all__ = ["output_partition_frame", "anonymize_output_partition", "write_output_partition",
           "publish_leaves", "leaf_privacy", "output_meta", "lazy_meta", "label_columns",
           "class_columns", "text_labels", "conform"]

# The kernel is parallel inside; concurrent calls from several threads of
# one worker would oversubscribe its cores.
_KERNEL_LOCK = threading.Lock()
# One work space for the kernel's buffers per worker thread: output partitions come one after
# another, and fresh memory would be faulted in page by page each time. It stays with the thread
# while output partitions keep coming (at most 1.25 x 2 x the largest output partition's rows x (QIs
# + 2) x 8 bytes, counted in an output partition's memory cost), and is returned, with Arrow's freed
# memory, once the thread has used it for none for IDLE_SECONDS: dask cannot spill it, and a worker
# kept over its pause fraction by memory nothing uses would stay paused.
_WORKSPACES = threading.local()
IDLE_SECONDS = 2.0


@contextmanager
def _workspace():
    ws = getattr(_WORKSPACES, "space", None)
    if ws is None:
        ws = _WORKSPACES.space = K.WorkSpace()
    try:
        with ws.in_use():
            yield ws
    finally:
        timer = threading.Timer(IDLE_SECONDS, _release_if_idle, (ws,))
        timer.daemon = True
        timer.start()


def _release_if_idle(ws: K.WorkSpace) -> None:
    if ws.release_if_idle(IDLE_SECONDS):
        release_freed_memory()


def label_columns(top: TopPlan) -> list:
    """The QIs published as labels (every QI but numbers published as numbers)."""
    opts = top.options
    return [q for q, kind in zip(opts.qis, opts.kinds, strict=True)
            if kind_spec(kind).publishes_labels(opts.generalization)]


def class_columns(top: TopPlan) -> list:
    """The class column, when the release has one (as a list: written with a dictionary)."""
    return [] if top.options.class_column is None else [top.options.class_column]


def output_partition_frame(df: pd.DataFrame, top: TopPlan, partition_info,
                           verdict: Verdict | None = None) -> pd.DataFrame | None:
    """One output partition's rows, anonymized, in leaf then input order.

    Every column keeps its input dtype but the published ones (labels as Categoricals,
    ``generalization`` numbers, the class column). None when the partition is empty. Only the QI
    columns go through the engine; the other columns (maybe wide) are reordered once and never
    copied again. A plan whose shuffle carries only keys (``top.exchange == "keys"``) gets the
    published columns alone, indexed by the rows' input positions. An uncounted plan comes with the
    ``verdict`` of its exact counts.
    """
    if verdict is None and not top.counted:
        raise RuntimeError("dmondrian: an uncounted plan needs its verdict")
    exact = top.leaf_counts if verdict is None else verdict.counts
    p = partition_info["number"] if partition_info else None
    # A candidate leaf of an uncounted plan may hold no row: it cannot arrive.
    expected = [i for i in top.output_partitions[p] if exact[i] > 0] if p is not None else []
    positions = df.index.to_numpy(dtype=np.int64)
    order, ids, starts, counts = leaf_order(df[LEAF].to_numpy(dtype=np.int64), positions,
                                            top.n_leaves)
    if ids.tolist() != list(expected) or not np.array_equal(counts, exact[ids]):
        # A leaf cut short would publish classes that were never counted.
        raise RuntimeError(f"dmondrian: output partition {p} received leaves {ids.tolist()} with "
                           f"{counts.tolist()} rows; expected leaves {list(expected)} with "
                           f"{exact[expected].tolist()} rows. Refusing to publish.")
    if len(df) == 0:
        return None
    _, internal, names = carried(top.options.qis, top.columns, top.travelling)
    frame = df[[*internal, INDEX] if top.ships_index else internal].take(order)
    if top.ships_index:
        index = frame.pop(INDEX).to_numpy()
    elif top.exchange == "keys":
        index = pd.RangeIndex(len(order))  # rows go back by leaf and order, not position
    else:
        index = row_offsets(positions[order])
    frame.columns = names
    frame.index = pd.Index(index, name=top.index_name)
    depths = top.leaf_depths[ids]
    if verdict is not None:
        # Leaves whose cut the exact counts undid are cut again as one root.
        keep = np.flatnonzero(np.diff(verdict.root[ids], prepend=-1) != 0)
        ids, starts, depths = verdict.root[ids][keep], starts[keep], verdict.depth[ids][keep]
    published, rows = publish_leaves(df, order, frame, ids, starts, depths, top)
    if top.exchange == "keys":
        return _back_frame(published, df, order, top)  # the other columns are at home
    if rows is not None:
        frame = frame.iloc[rows]  # suppressed rows dropped
    for col in published.columns:
        frame[col] = published[col].array
    # The input's column order (the QIs were added last), then the class column;
    # never the entity column.
    columns = [c for c in top.columns if c != top.options.entity]
    return frame[[*columns, *(c for c in published.columns if c not in top.columns)]]


def publish_leaves(routed: pd.DataFrame, order, frame: pd.DataFrame, ids, starts, depths,
                   top: TopPlan) -> pd.DataFrame:
    """The local engine on every leaf of one output partition, in one call.

    ``routed`` is the partition as the shuffle delivered it; ``order`` lists its rows grouped by
    leaf in input order, and ``frame`` holds its other columns in that order (for the sensitive
    one). Leaf ``ids[i]``, ``depths[i]`` cuts below the root, starts at row ``starts[i]``. The
    shipped keys are gathered straight into the kernel's buffer and the kernel cuts each leaf as its
    own root (:func:`dmondrian.local.partition`'s ``leaves``), ``depth`` cuts below the table's
    root: leaves never mix, and each is cut exactly as a run of the local engine on it alone would
    cut it (codes keep the global order; spans use the global scales). Returns the published QI
    columns (labels as Categoricals) and the class column if asked, and the positions of the rows
    published (None for all of them: only ``suppressed="drop"`` leaves rows out).
    """
    opts = top.options
    privacy = leaf_privacy(frame, top)
    leaves = np.column_stack([starts, depths]).astype(np.int64)
    d, n = top.domain.d, len(order)
    with _workspace() as workspace:
        # The layout local.partition builds in this work space: keys, the
        # codes riding along, then the row ids.
        key_rows = workspace.buffer(d + len(riding_codes(privacy)) + 1, n)[0, :d]
        for j, (name, offset, step) in enumerate(zip(key_names(d), top.key_offsets,
                                                     top.key_steps, strict=True)):
            gather_keys(routed[name].to_numpy(), order, key_rows[j], offset, step)
        encoded = partition_encodings(top.encodings, key_rows)
        rules = kernel_rules(encoded, opts.k, mode=opts.mode, objective=opts.objective,
                             max_depth=opts.max_depth, scales=top.domain.scales, privacy=privacy)
        # The thread budget (this thread's) sizes the kernel and the local
        # engine's per-column thread pools alike: one worker core, one thread.
        with K.thread_limit(top.kernel_threads):
            with _KERNEL_LOCK:
                part = partition(encoded, rules, leaves=leaves, workspace=workspace,
                                 refine=opts.refine, refine_rows=opts.refine_rows)
            if top.exchange == "keys":
                return _publish_codes(frame, encoded, part, privacy, ids, starts, top), None
            if opts.suppression > 0:
                return _publish_suppressed(frame, encoded, part, privacy, ids, starts, top)
            out = publish(pd.DataFrame(index=frame.index), encoded, part, opts.generalization)
    _add_noise(out, frame, part, ids, starts, top)
    if opts.class_column is not None:
        out[opts.class_column] = _class_ids(part.class_of_row, part, ids, starts, n)
    return out, None


def leaf_privacy(frame: pd.DataFrame, top: TopPlan) -> KernelPrivacy | None:
    """The constraints the local runs enforce inside leaves, for the rows of ``frame``
    (its sensitive and entity columns): None for k alone, counting rows.

    Leaves never mix, so the rows may be one leaf's or several leaves'.
    """
    opts = top.options
    privacy = None
    if top.sensitive is not None:
        base = top.sensitive.privacy
        # Each leaf is checked against the whole dataset's distribution (t-closeness), not its own.
        privacy = KernelPrivacy(base.ip, base.fp, base.q, top.sensitive.codes(
            frame[opts.sensitive]))
    if opts.entity is not None:
        # Codes of these rows' entities: a node counts the entities of its own
        # rows whatever the other leaves hold.
        entity = encode_entities(frame[opts.entity], name=opts.entity)
        privacy = with_entity(privacy or kernel_privacy([KAnonymity(opts.k)]), entity)
    return privacy


def _publish_codes(frame, encoded, part, privacy, ids, starts, top) -> dict:
    """:func:`publish_leaves` on the keys path: every row's published values as they
    travel back to its input partition (:mod:`.back_codes`), in the leaves' order.

    Suppressed rows travel too, flagged: their input partition masks or drops them.
    """
    from .back_codes import back_layout, encode_back

    opts = top.options
    n = len(frame)
    layout = back_layout(top)
    result = hidden = None
    published = part
    if opts.suppression > 0:
        if privacy is None:
            privacy = kernel_privacy([KAnonymity(opts.k)])
        result = suppression.suppress(encoded, part, opts.suppression, opts.suppressed,
                                      starts=starts, privacy=privacy, scales=top.domain.scales)
        hidden, published = result.hidden, result.part
    values = {}
    for j, qi in enumerate(encoded):
        if opts.qis[j] not in layout.values:
            continue
        v, inverse = class_values(qi, j, opts.generalization, published.stats,
                                  published.sorted_keys[j])
        at = np.asarray(inverse)[published.class_of_row]
        if hidden is not None:
            at = np.where(hidden, -1, at)  # -1 takes the type's missing value
        values[opts.qis[j]] = qi.spec.summary_column(
            qi, pd.api.extensions.take(v, at, allow_fill=True))
    if opts.noise:
        shown = np.arange(n) if hidden is None or result.masked else np.flatnonzero(~hidden)
        noised = pd.DataFrame(index=pd.RangeIndex(len(shown)))
        _add_noise(noised, frame, part, ids, starts, top, result)
        for column in noised.columns:
            full = np.full(n, np.nan)
            full[shown] = noised[column].to_numpy(dtype=np.float64)
            values[column] = full
    if opts.class_column is not None:
        ids_of_row = _class_ids(part.class_of_row, part, ids, starts, n)
        if hidden is not None:
            ids_of_row[hidden] = suppression.MASKED_CLASS
        values[opts.class_column] = ids_of_row
    return encode_back(layout, top, encoded, published, hidden, values, n)


def _back_frame(codes: dict, routed: pd.DataFrame, order: np.ndarray, top: TopPlan) -> pd.DataFrame:
    """What an output partition sends back: its rows' codes, by input partition, then
    leaf, then input order, indexed by leaf; each row's input partition in ``PARTITION``.

    The input partition routes its rows again and finds them in this order.
    """
    from .columns import PARTITION
    from .shuffle import piece_partitions

    leaf = routed[LEAF].to_numpy()[order]
    piece = routed.index.to_numpy()[order].astype(np.int64)
    of_piece = piece_partitions(top)
    target = piece if of_piece is None else of_piece[piece]
    # A stable sort of 16-bit numbers is numpy's radix sort.
    narrow = np.min_scalar_type(-max(1, int(target.max(initial=0)) + 1))
    back = np.argsort(target.astype(narrow), kind="stable")
    out = pd.DataFrame({name: _take(column, back) for name, column in codes.items()},
                       index=pd.Index(leaf[back], copy=False))
    out[PARTITION] = target[back]
    return out


def _take(column, at: np.ndarray):
    """``column[at]`` for a numpy or pandas array."""
    if isinstance(column, np.ndarray):
        return column[at]
    return pd.array(column).take(at)


def _add_noise(out, frame, part, ids, starts, top, result=None) -> None:
    """The noised columns of ``out`` (:mod:`dmondrian.privacy.noise`), drawn per class.

    With a seed, each leaf draws from a generator of its own (seed, leaf id), whichever task and
    output partition it lands in. Masked rows (suppression) are noised as one group per leaf: the
    masked class spans leaves, which are finished apart.
    """
    opts = top.options
    if not opts.noise:
        return
    rows, groups, n_groups, leaf_groups = noise_groups(part.class_of_row, part.n_classes, starts,
                                                result)
    source = frame if len(rows) == len(frame) else frame.iloc[rows]
    per_person = {} if opts.entity is None else _per_person(source, rows, ids, starts,
                                                            len(frame), top)
    noisy = noisy_columns(source, groups, n_groups, opts.noise, opts.random_state,
                          leaf_classes=leaf_groups, leaf_ids=ids, **per_person)
    for column, values in noisy.items():
        out[column] = values


def _per_person(source, rows, ids, starts, n, top) -> dict:
    """The contribution bounds of the published rows ``source`` (positions ``rows``):
    an entity in two leaves here is two entities, each with its share of
    ``max_classes`` in its leaf (:mod:`dmondrian._dask.entity_noise`)."""
    opts = top.options
    run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))[rows]
    people = source[opts.entity]
    codes = encode_entities(people, name=opts.entity)
    pair, _ = pd.factorize(run * max(codes.n_entities, 1) + codes.codes)
    shares = np.zeros(int(pair.max()) + 1 if len(pair) else 0, dtype=np.int64)
    shares[pair] = top.class_shares.of_rows(np.asarray(ids, dtype=np.int64)[run],
                                            entity_hashes(people))
    return {"entity_codes": pair, "max_contributions": opts.max_contributions,
            "max_classes": opts.max_classes, "class_shares": shares}


def _class_ids(class_of_row, part, ids, starts, n) -> np.ndarray:
    """Class ids unique over the table: the leaf id, then the class's rank in its leaf."""
    first = part.stats[0][starts]
    run = np.repeat(np.arange(len(ids)), np.diff(np.append(starts, n)))
    return (np.asarray(ids, dtype=np.int64)[run] << np.int64(32)) + class_of_row - first[run]


def _publish_suppressed(frame, encoded, part, privacy, ids, starts, top):
    """:func:`publish_leaves` with suppression: each leaf within its own share of the
    budget (:mod:`dmondrian.privacy.suppression`). Dropped rows are absent from the result."""
    opts = top.options
    if privacy is None:
        privacy = kernel_privacy([KAnonymity(opts.k)])
    result = suppression.suppress(encoded, part, opts.suppression, opts.suppressed,
                                  starts=starts, privacy=privacy, scales=top.domain.scales)
    columns, rows, _ = suppression.publish_suppressed(frame.index, encoded, result,
                                                      opts.generalization)
    out = pd.DataFrame(columns, index=frame.index[rows])
    _add_noise(out, frame, part, ids, starts, top, result)
    if opts.class_column is not None:
        ids_of_row = _class_ids(part.class_of_row, part, ids, starts, len(frame))[rows]
        ids_of_row[result.hidden[rows]] = suppression.MASKED_CLASS
        out[opts.class_column] = ids_of_row
    return out, None if len(rows) == len(frame) else rows


def anonymize_output_partition(df: pd.DataFrame, top: TopPlan, meta: pd.DataFrame,
                               partition_info=None, verdict: Verdict | None = None) -> pd.DataFrame:
    """Run the local engine on every leaf of one output partition; labels as Categoricals.

    The categories are this partition's labels, as text (:func:`text_labels`); ``meta`` is
    :func:`output_meta`'s frame. An uncounted plan comes with the ``verdict`` of its exact counts.
    """
    labels = label_columns(top)
    frame = output_partition_frame(df, top, partition_info, verdict)
    if frame is None:
        frame = empty_like(meta, labels)
    for q in labels:
        frame[q] = text_labels(frame[q])
    return conform(frame, meta, keep=labels)


def write_output_partition(df: pd.DataFrame, top: TopPlan, sink: ParquetSink, meta: pd.DataFrame,
                           partition_info=None, verdict: Verdict | None = None) -> pd.DataFrame:
    """Anonymize one output partition and write it; return its row count."""
    labels = label_columns(top)
    frame = output_partition_frame(df, top, partition_info, verdict)
    if frame is None:
        frame = empty_like(meta, labels)
    # Labels stay Categoricals: the sink writes them as Parquet dictionaries.
    frame = conform(frame, meta, keep=labels)
    number = partition_info["number"] if partition_info else 0
    return write_released(sink, frame, number, top.written_check, top.measure)


def conform(frame: pd.DataFrame, meta: pd.DataFrame, keep=()) -> pd.DataFrame:
    """``frame``'s columns in ``meta``'s order and dtypes, but the columns in ``keep``.

    A Categorical whose categories dask does not know (a Parquet dictionary column, say) keeps the
    partition's own: cast to the meta's placeholder category, every value would become missing.
    """
    frame = frame[list(meta.columns)]
    mismatched = {}
    for c, t in meta.dtypes.items():
        if c in keep or frame[c].dtype == t:
            continue
        if isinstance(t, pd.CategoricalDtype) and has_unknown_categories(t):
            if isinstance(frame[c].dtype, pd.CategoricalDtype):
                continue
            t = pd.CategoricalDtype(ordered=t.ordered)
        mismatched[c] = t
    return frame.astype(mismatched) if mismatched else frame


def output_meta(meta: pd.DataFrame, top: TopPlan) -> pd.DataFrame:
    """The empty frame of the release: the input's columns, published dtypes, class column.

    Labels are Categoricals of unknown categories (dask's marker): every output
    partition has its own.
    """
    opts = top.options
    out = without_identifiers(meta, [*opts.identifiers,
                                     *([opts.entity] if opts.entity is not None else [])]).copy()
    for nc in opts.noise:
        out[nc.column] = out[nc.column].astype(np.float64)
    for q, kind in zip(opts.qis, opts.kinds, strict=True):
        spec = kind_spec(kind)
        if not spec.publishes_labels(opts.generalization):
            # Numbers published as numbers (midpoint, mean) take the kind's summary dtype.
            dtype = spec.summary_dtype(out[q].dtype)
            if dtype != out[q].dtype:
                out[q] = out[q].astype(dtype)
    for q in label_columns(top):
        out[q] = pd.Categorical([], categories=pd.Index([unknown_categories()], dtype=TEXT))
    if opts.class_column is not None:
        out[opts.class_column] = np.zeros(0, dtype=np.int64)
    return out


def lazy_meta(meta: pd.DataFrame, top: TopPlan) -> pd.DataFrame:
    """:func:`output_meta` for the lazy dask DataFrame: label codes declared 32-bit.

    dask's ``to_parquet`` takes every file's schema from the meta, codes included: with the one
    unknown-category marker the codes are 8-bit, and a partition of more than 127 labels fails to
    convert (dask issue 11830). The marker, padded to 2**15 categories, declares 32-bit codes (as
    the Parquet sink writes); the categories stay unknown to dask.
    """
    out = output_meta(meta, top)
    dtype = pd.CategoricalDtype(_padded_unknown_categories())
    for q in label_columns(top):
        out[q] = pd.Categorical([], dtype=dtype)
    return out


@lru_cache(maxsize=1)
def _padded_unknown_categories() -> pd.Index:
    """dask's unknown-category marker, then fillers: 2**15 categories (32-bit codes).

    An object index: dask tokenizes the meta often, and an object array of short strings hashes far
    faster than a "str" one (pyarrow-backed text is converted value by value).
    """
    values = np.array([unknown_categories(), *map(str, range(1, 2**15))], dtype=object)
    return pd.Index(values, dtype=object)
