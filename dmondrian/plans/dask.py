"""A fitted plan applied to a dask DataFrame: two passes, no shuffle.

1. Every input partition routes its rows through the plan and summarizes them
   per node (:meth:`FittedPlan.summarize`); the summaries are merged in a tree reduction
   (:func:`dmondrian._dask.graph.tree_reduce`), so the client receives one array per node, never
   rows. With ``entity=`` a partition's summary also holds its distinct (node, entity[, sensitive
   value]) triples (:class:`.people.People`), merged exactly in the same reduction (the entities
   matched by value): the client receives the table's distinct triples, as many as its distinct
   (region, person) pairs, and decides on them exactly as in memory.
2. The client decides the classes (:func:`.release.decide`), exactly as the
   local engine does on the merged summary; ``map_partitions`` then writes each row's class label.
   Rows never move: the output has the input's partitions, index and order.

The counting pass also sketches the distinct values of the columns released as is
(:func:`dmondrian.release.identifiers.distinct_sketch`), on the partitions it reads anyway: a column
that singles out rows is refused (:class:`~dmondrian.errors.IdentifyingColumnError`) before the lazy
release is returned, without a pass of its own. :func:`transform_to_parquet`, which writes the
release itself, leaves the check to the tasks that write (they read every column anyway;
:mod:`dmondrian._dask.written_check`), so its counting pass reads the QIs alone: a wide table costs
its QIs' read and a copy.

Each row is placed once: the first pass leaves every partition's nodes on its worker
(:func:`node_dtype`, 2 or 4 bytes a row), and the second reads only the columns it passes through
and gathers the labels by node. The nodes are kept on a cluster that outlives the call, while they
take at most :data:`KEEP_SHARE` of the workers' memory; otherwise the second pass reads the QIs and
places the rows again. Both passes read the input's partitions as they are
(:func:`~dmondrian._dask.graph.partitions`): Dask fuses a projected read under a blockwise step (a
filter, say) into fewer partitions, and a partition's kept nodes, or its first row's position that
relaxed ties are split by, must pair with the same rows in either pass.

The labels are Categoricals with the same, known categories in every partition, and the release
equals the local engine's release of the computed table (the summaries add up to the whole table's).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from .._compat import from_delayed_named, scheduler_workers
from .._dask.cluster import cores_per_worker, lasting_client, on_client, resolve_client, run
from .._dask.cluster import release as release_client
from .._dask.graph import column_partitions, constant, partitions, tree_reduce
from .._dask.written_check import DISTINCT
from .._kernel import thread_limit
from ..errors import ParameterError
from ..partition import routing
from ..privacy.constraints import refuse_empty
from ..release.identifiers import (
    distinct_sketch,
    estimate_identifying,
    merge_distinct,
    refuse_identifying,
)
from ..release.unique_count import unique_rows
from .batch import Placing, summarize_batch
from .release import decide, publish_rows, published_columns

__all__ = ["transform_dask", "transform_to_parquet"]


class _Placer(Placing):
    """What a task reads to place, count and publish rows: the plan's encodings and
    options and the compiled pass's tables (:func:`.batch.lift_tables`), without the
    fitted statistics the client decides from, so less than half the plan travels
    in the graph. A plan too large for the compiled tables travels whole."""

    def __init__(self, plan):
        self.encodings, self.kernel_kinds = plan.encodings, plan.kernel_kinds
        self.options, self.sensitive, self.k = plan.options, plan.sensitive, plan.k
        self.lift_tables = plan.lift_tables
        self.tree = plan.tree if self.lift_tables is None else _Shape(
            plan.tree.n_nodes, SimpleNamespace(has_ties=plan.tree.cuts.has_ties))


@dataclass
class _Shape:
    """A tree's size and whether its cuts split ties: all placing asks of it."""

    n_nodes: int
    cuts: SimpleNamespace


def _merge(*parts):
    out = parts[0]
    for p in parts[1:]:
        out = out.merge(p)
    return out


def node_dtype(n_nodes: int) -> np.dtype:
    """The smallest unsigned type that numbers ``n_nodes`` nodes (what a kept placement
    costs a row).

    Examples
    --------
    >>> node_dtype(40_000), node_dtype(149_000)
    (dtype('uint16'), dtype('uint32'))
    """
    for dtype in (np.uint16, np.uint32):
        if n_nodes <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _count(df: pd.DataFrame, plan, offset, threads=None, keep=False):
    """A partition's summary, and (``keep``) the node of each of its rows as a Series of
    :func:`node_dtype` (None otherwise)."""
    positions = None if offset is None else routing.row_positions(0, len(df), first=offset)
    # A worker's share of its host's cores: its tasks run side by side with others'.
    with thread_limit(threads):
        placed = plan.place(df, positions)
        summary = summarize_batch(plan, placed, plan.sensitive_codes(df), plan.entity_values(df))
    if not keep:
        return summary, None
    return summary, pd.Series(placed.node.astype(node_dtype(plan.tree.n_nodes)),
                              name="node", copy=False)


def _publish(df: pd.DataFrame, plan, release, offset=None, threads=None) -> pd.DataFrame:
    positions = None if offset is None else routing.row_positions(0, len(df), first=offset)
    with thread_limit(threads):
        placed = plan.place(df, positions)
        entity = plan.options.get("entity")
        if entity is not None:
            df = df.drop(columns=[entity])  # a direct identifier, never released
        return publish_rows(df, release, placed.node, plan.options["class_column"])


def _publish_kept(rest: pd.DataFrame, node: pd.Series, release, columns, class_column):
    """A partition's release from its columns other than the QIs and its rows' kept
    nodes: the same frame as :func:`_publish`'s, columns in the input's order."""
    if len(node) != len(rest):
        raise RuntimeError("a kept placement does not match its partition's rows")
    published = published_columns(release, node.to_numpy(), class_column)
    data = {c: (rest[c] if c not in published
                else pd.Series(published[c], index=rest.index, copy=False)) for c in columns}
    return pd.DataFrame(data, index=rest.index, copy=False)


#: Kept placements (:func:`node_dtype` a row) may take this share of the cluster's memory;
#: past it, the publishing pass places the rows again.
KEEP_SHARE = 0.125


def _keep_budget(client) -> float:
    """Bytes the kept placements may take on the cluster (infinite: no memory limit)."""
    limits = [w.get("memory_limit") or 0 for w in scheduler_workers(client).values()]
    return float("inf") if not limits or not all(limits) else KEEP_SHARE * sum(limits)


def transform_dask(plan, ddf, *, client=None, progress=None):
    """Release a dask DataFrame through a fitted plan (see the module docstring).

    Parameters
    ----------
    plan : FittedPlan
    ddf : dask.dataframe.DataFrame
        A table with the plan's QI columns.
    client : distributed.Client, optional
        Cluster for the counting pass (default: as :func:`dmondrian.distributed.anonymize`).
    progress : bool, optional
        Progress bar for the counting pass.

    Returns
    -------
    dmondrian._dask.lazy_frame.AnonymizedFrame
        The release, lazy (a dask DataFrame): QI columns published (labels as
        Categoricals with known categories), every other column untouched, the
        input's partitions. Its ``to_parquet`` writes each partition where it
        is published, as :func:`dmondrian.distributed.anonymize_to_parquet`
        writes: no index, each file's rows shuffled (:mod:`dmondrian.release.row_order`),
        labels without min/max statistics (:func:`_as_release`).

    Raises
    ------
    InfeasibleError
        When the table as a whole cannot be one class (fewer than k rows).
    IdentifyingColumnError
        When a column released as is singles out rows (estimated by the
        counting pass; see :mod:`dmondrian.release.identifiers`).
    """
    ddf, checked = _prepared(plan, ddf)
    placer = _Placer(plan)
    # The rows' nodes stay on the workers for the publishing pass only on a cluster
    # that outlives this call (one it starts is closed before the release is computed).
    keep = lasting_client(client)
    cluster_client, owned = resolve_client(client)
    try:
        _check_partitions(ddf, cluster_client)
        threads = cores_per_worker(cluster_client)
        counted = _count_pass(plan, placer, ddf, cluster_client, threads, keep, progress, checked)
    finally:
        release_client(owned)
    refuse_empty(counted.summary.count.sum())
    frame = _publishing_pass(plan, placer, ddf, decide(plan, counted.summary), counted,
                             cluster_client, threads)
    return _as_release(frame, plan, ddf)


def transform_to_parquet(plan, ddf, path, *, client=None, progress=None, write_options=None,
                         storage_options=None, random_state=None, manifest=False,
                         _measure=None) -> int:
    """Release a dask DataFrame through a fitted plan and write it as a Parquet dataset.

    The release is :func:`transform_dask`'s, written as its ``to_parquet`` writes it
    (``path/part.<i>.parquet``, one file per input partition, each file's rows shuffled, labels as
    dictionaries without statistics), on one cluster. The identifying-column check runs in the tasks
    that write, which read every column anyway, so the counting pass reads only the QIs (and the
    sensitive and entity columns): on a wide table the release costs about a copy and a read of its
    QIs.

    Parameters
    ----------
    plan : FittedPlan
    ddf : dask.dataframe.DataFrame
        A table with the plan's QI columns.
    path : str or os.PathLike
        The dataset folder (local path or fsspec URL).
    client : distributed.Client, optional
        Cluster for both passes (default: as :func:`dmondrian.distributed.anonymize`).
    progress : bool, optional
        Progress bars for the passes.
    write_options : dict, optional
        ``write_index`` (default False), ``shuffle_rows`` (default True) and
        keywords for :func:`pyarrow.parquet.write_table`, as
        :func:`dmondrian.distributed.anonymize_to_parquet` takes them.
    storage_options : dict, optional
        Keywords for the fsspec filesystem of ``path``.
    random_state : None, int or numpy.random.Generator
        Seed of each file's row order (:mod:`dmondrian.release.row_order`; None: fresh).
    manifest : bool, default False
        Publish ``path.manifest.json`` with the files, as the command line does (``path`` must not
        exist). False by default, as :func:`dmondrian.distributed.anonymize_to_parquet`'s: this
        writer writes into a folder the caller may own already, and a release's metrics need a pass
        of their own, which it does not make (:func:`dmondrian.evaluation.manifest.writer_fields`).

    _measure : tuple, optional
        ``(ReleaseCounts, InputDomains)``, empty (:mod:`dmondrian.metrics.accumulator`): the write
        tasks count what they write, the counting pass the input's QI domains, for the command
        line's manifest; the call then returns them, merged, after the rows.

    Returns
    -------
    int
        The rows written (every row of ``ddf``).

    Raises
    ------
    InfeasibleError
        When the table as a whole cannot be one class (fewer than k rows).
    IdentifyingColumnError
        When a column released as is singles out rows. The write tasks judge it, so the verdict
        comes once every file is written; nothing has appeared at ``path``: the files are written
        into a hidden staging folder beside it and moved there (into it, when the folder exists)
        once every check has passed (:mod:`dmondrian.io.staging`).
    """
    from dask import delayed

    from .._dask.written_check import (
        COUNTS,
        WrittenCheck,
        merge_counts,
        refuse_written_index,
        write_released,
    )
    from ..io.parquet_sink import ParquetSink
    from ..io.staging import staged_folder

    ddf, checked = _prepared(plan, ddf)
    placer = _Placer(plan)
    # The files are written into a hidden staging folder beside ``path`` and moved
    # there once every check has passed (dmondrian.io.staging).
    with staged_folder(path, storage_options, manifest) as staged:
        cluster_client, owned = resolve_client(client)
        try:
            _check_partitions(ddf, cluster_client)
            threads = cores_per_worker(cluster_client)
            # Both passes run on this cluster: the counted nodes wait on the workers.
            refuse_written_index(ddf, plan.options["allow_unique"] or (),
                                 (write_options or {}).get("write_index", False),
                                 cluster_client, progress)
            counts, domains = _measure or (None, None)
            counted = _count_pass(plan, placer, ddf, cluster_client, threads, True,
                                  progress, [], domains)
            refuse_empty(counted.summary.count.sum())
            release = decide(plan, counted.summary)
            frame = _publishing_pass(plan, placer, ddf, release, counted, cluster_client, threads)
            # The classes' rows are counted already: the write tasks count only what
            # the classes do not tell (a sensitive column's values).
            measured = None if counts is None else _class_counts(release, counts)
            if measured is not None:
                counts = None
            labels, dictionary = _written_columns(frame._meta, plan)
            sink = ParquetSink.create(staged.url, frame._meta, labels, write_options,
                                      storage_options, dictionary_columns=dictionary,
                                      random_state=random_state)
            check = WrittenCheck(checked) if checked else None
            sink_d = constant(sink, "sink")
            task = delayed(write_released, pure=True)
            parts = partitions(frame)
            results = run(cluster_client,
                          [task(sink_d, p, i, check, counts) for i, p in enumerate(parts)],
                          progress, f"pass: publish, write {path}")
            result = pd.concat(results, ignore_index=True)
            n_rows, written = int(counted.summary.count.sum()), int(result["rows"].sum())
            if written != n_rows:
                raise RuntimeError(f"dmondrian: wrote {written} rows of {n_rows}")
            if check is not None:
                try:
                    check.finish(result[DISTINCT], n_rows,
                                 lambda unsure: unique_rows(
                                     ddf, unsure, on_client(cluster_client, progress)),
                                 written)
                except BaseException:
                    sink.remove(len(parts))
                    raise
            staged.describe(**_manifest_fields(plan, n_rows, written, random_state,
                                               (write_options or {}).get("write_index")))
        finally:
            release_client(owned)
    if _measure is not None:
        if measured is None:
            measured = merge_counts(list(result[COUNTS]))
        return written, measured, counted.domains
    return written


def _class_counts(release, counts):
    """``counts`` (an empty :class:`~dmondrian.metrics.accumulator.ReleaseCounts`) of a
    release, from its classes: each publishes one label per QI, for its counted rows.
    None when the counts need the rows: a sensitive column, or QIs published as numbers."""
    if counts.sensitive is not None or not all(isinstance(v, pd.Index) for v, _ in release.values):
        return None
    # Each class's own node gathers its labels, as the write tasks' rows do theirs.
    return counts.merge().add(pd.DataFrame(published_columns(release, release.nodes)),
                              release.counts)


def _manifest_fields(plan, input_rows, output_rows, random_state, index_written) -> dict:
    """What the manifest of a plan's release says
    (:func:`dmondrian.evaluation.manifest.writer_fields`): the plan's k, QIs and
    options, the release's seed."""
    from ..evaluation.manifest import writer_fields

    parameters = {"k": plan.k, "quasi_identifiers": list(plan.qis), **plan.options,
                  "random_state": random_state, "plan": "applied"}
    return writer_fields("plans.transform_to_parquet", parameters, input_rows=input_rows,
                         output_rows=output_rows, random_state=random_state,
                         index_written=bool(index_written))


def _prepared(plan, ddf):
    """``ddf`` checked against the plan, its identifiers dropped; the columns the
    identifying check sketches."""
    from .._dask.written_check import identifying_check

    plan._check_table(ddf)
    if plan.overflow is not None:
        raise ParameterError("plan", "a plan with an overflow (FittedPlan.refit) releases in "
                                     "memory: release a pandas DataFrame")
    identifiers = [c for c in plan.options["identifiers"] or [] if c in ddf.columns]
    if identifiers:
        ddf = ddf.drop(columns=identifiers)
    return ddf, identifying_check(ddf._meta, plan._release_options(ddf._meta, None))


def _check_partitions(ddf, client) -> None:
    """Refuse, before any pass, an input partition too large for a worker: the publishing
    pass holds each one whole (:func:`~dmondrian._dask.memory.check_partitions_fit`)."""
    from .._compat import known_partition_lengths
    from .._dask.memory import check_partitions_fit, measure_workers
    from .._dask.options import least_row_bytes

    lengths = known_partition_lengths(ddf)
    if lengths:
        check_partitions_fit(measure_workers(client), lengths, least_row_bytes(ddf._meta))


@dataclass
class _Counted:
    """What the counting pass leaves the publishing pass.

    ``summary``: the whole table's (:class:`.batch.BatchSummary`); ``kept``: futures of every
    counted partition's nodes, on the workers (None: not kept); ``offsets``: every counted
    partition's first row's position (None: the cuts split no ties); ``placer``: the future of the
    placing tables scattered to every worker, on a cluster that outlives the call (None otherwise);
    ``domains``: the input's :class:`~dmondrian.metrics.accumulator.InputDomains`, when asked.
    """

    summary: object
    kept: list | None
    offsets: list | None
    placer: object = None
    domains: object = None


def _count_pass(plan, placer, ddf, client, threads, keep, progress, checked,
                domains=None) -> _Counted:
    """Place and count every partition's rows, sketch the ``checked`` columns' distinct values and
    (given ``domains``, an empty InputDomains) take the QIs' domains; merge them in tree reductions.
    Raises :class:`~dmondrian.errors.IdentifyingColumnError` (cancelling the kept nodes) when a
    checked column singles out rows."""
    from dask import delayed

    columns = [*plan.qis] + [plan.options[name] for name in ("sensitive", "entity")
                             if plan.options.get(name) is not None]
    # The identifying check's columns are read with the counted ones (one read).
    read = [*columns, *(c for c in checked if c in ddf.columns and c not in columns)]
    parts = column_partitions(ddf, read)
    offsets = None
    if plan.tree.cuts.has_ties:
        # Relaxed cuts split median ties by input position: each partition's first
        # row's, counted on the very partitions the counting pass reads.
        lengths = run(client, [delayed(len, pure=True)(p) for p in parts], False,
                      "rows per partition")
        offsets = np.concatenate([[0], np.cumsum(np.asarray(lengths))[:-1]]).tolist()
    # On every worker before the pass starts: a graph's constant is computed on one
    # worker and fetched by the others when their first task needs it, and the tasks
    # meanwhile run where the plan is, fetching the partitions read elsewhere.
    plan_d = client.scatter(placer, broadcast=True, hash=False)
    count = delayed(_count, pure=True, nout=2)
    counted = [count(p, plan_d, None if offsets is None else offsets[i], threads, keep)
               for i, p in enumerate(parts)]
    reduced = delayed(_together, pure=True)(
        tree_reduce([c[0] for c in counted], _merge),
        tree_reduce([delayed(distinct_sketch, pure=True)(p, checked) for p in parts],
                    merge_distinct) if checked else None,
        tree_reduce([delayed(_domains_of, pure=True)(domains, p) for p in parts], _merge)
        if domains is not None else None)
    label = "pass: rows per region of the plan"
    if not keep:
        summary, distinct, domains = run(client, reduced, progress, label)
        refuse_identifying(_identifying(distinct, ddf, client, progress))
        # The cluster is closed: nothing scattered.
        return _Counted(summary, None, offsets, domains=domains)
    # The nodes are computed with the summary and left on their workers.
    (summary, distinct, domains), kept = run(client, reduced, progress, label,
                                             keep=[c[1] for c in counted])
    found = _identifying(distinct, ddf, client, progress)
    if found or (int(summary.count.sum()) * node_dtype(plan.tree.n_nodes).itemsize
                 > _keep_budget(client)):
        client.cancel(kept)  # refused (nothing to publish), or too large to keep
        kept = None
    refuse_identifying(found)
    return _Counted(summary, kept, offsets, plan_d, domains)


def _identifying(distinct, ddf, client, progress) -> list:
    """The columns singling out rows (none unchecked): by the counting pass's sketch, and
    for the columns it leaves unsure, by an exact count in a pass of their own."""
    if distinct is None:
        return []
    return estimate_identifying(distinct).resolve(
        lambda unsure: unique_rows(ddf, unsure, on_client(client, progress)))


def _domains_of(template, df: pd.DataFrame):
    """A partition's QI domains (``template``: an empty InputDomains)."""
    return template.merge().add(df)


def _together(*results) -> tuple:
    return results


def _publishing_pass(plan, placer, ddf, release, counted: _Counted, client, threads):
    """The lazy release: from the kept nodes when they pair with the partitions, else
    placing the rows again (at the counted offsets when the cuts split ties)."""
    meta = _publish(ddf._meta, placer, release)
    if counted.placer is None:  # computed elsewhere: the tables travel in the graph
        classes, plan_d = constant(release, "classes"), constant(placer, "plan")
    else:
        # The release is computed on the cluster the counting pass ran on: its label
        # tables go to every worker now, as the placing tables did, not in the graph.
        classes = client.scatter(release, broadcast=True, hash=False)
        plan_d = counted.placer
    if counted.kept is not None:
        out = _publish_from_kept(plan, ddf, counted.kept, classes, meta)
        if out is not None:
            return out
        client.cancel(counted.kept)  # (never seen) parts that do not pair: place again
    if counted.offsets is not None:
        return _publish_at_offsets(ddf, plan_d, classes, counted.offsets, threads, meta)
    # Each partition placed again: without ties a row's node does not depend on its position, so any
    # partitioning pairs; one copy of the plan and the classes in the graph, not one per task.
    return ddf.map_partitions(_publish, plan_d, classes, None, threads, meta=meta)


def _publish_from_kept(plan, ddf, kept, classes, meta):
    """Each partition's columns other than the QIs, labelled by its kept nodes; None when
    the partitions do not pair with the counted ones.

    Each task pairs a partition with its kept nodes explicitly: the partitions are the
    counting pass's, taken here, for a later optimization of a map_partitions could
    fuse a projected read (under a blockwise step) into fewer.
    """
    from dask import delayed

    # The publishing pass reads only the columns it passes through.
    rest = ddf[[c for c in ddf.columns if c in meta.columns and c not in plan.qis]]
    parts = partitions(rest)
    if len(parts) != len(kept):
        return None
    task = delayed(_publish_kept, pure=True)
    columns, class_column = list(meta.columns), plan.options["class_column"]
    return from_delayed_named([task(p, kept[i], classes, columns, class_column)
                               for i, p in enumerate(parts)], meta, ddf.divisions)


def _publish_at_offsets(ddf, plan_d, classes, offsets, threads, meta):
    """Each partition placed again, its ties split by its first row's counted position
    (paired explicitly, as :func:`_publish_from_kept` pairs kept nodes)."""
    from dask import delayed

    parts = partitions(ddf)
    if len(parts) != len(offsets):
        raise RuntimeError("the publishing pass does not read the counting pass's partitions")
    task = delayed(_publish, pure=True)
    return from_delayed_named([task(p, plan_d, classes, offsets[i], threads)
                               for i, p in enumerate(parts)], meta, ddf.divisions)


def _as_release(frame, plan, source):
    """``frame``, the plan's lazy release, as an
    :class:`~dmondrian._dask.lazy_frame.AnonymizedFrame` whose ``to_parquet`` writes every partition
    with a :class:`~dmondrian.io.parquet_sink.ParquetSink`, on the worker that publishes it.

    The sink writes as every release writer does: the label columns without min/max statistics
    (Arrow's statistics of a dictionary column cost more than the rest of its write, and a label's
    bounds as text prune no range query), dictionaries for the labels and the class ids only, each
    file's rows shuffled (an Arrow take), no index unless asked, and then judged on ``source``, the
    input (:func:`~dmondrian._dask.written_check.refuse_written_index`).
    """
    from functools import partial

    from dask import delayed

    from .._dask.lazy_frame import AnonymizedFrame
    from .._dask.written_check import refuse_written_index
    from ..io.parquet_sink import ParquetSink

    meta = frame._meta
    labels, dictionary = _written_columns(meta, plan)

    def write(path, write_options, storage_options):
        sink = constant(ParquetSink.create(path, meta, labels, write_options, storage_options,
                                           dictionary_columns=dictionary), "sink")
        parts = partitions(frame)
        task = delayed(ParquetSink.write, pure=True)
        return [task(sink, p, i) for i, p in enumerate(parts)]

    return AnonymizedFrame(frame.expr, labels, dictionary, write, index_check=partial(
        refuse_written_index, source, plan.options["allow_unique"] or ()),
        manifest_fields=lambda index_written: _manifest_fields(plan, None, None, None,
                                                               index_written))


def _written_columns(meta: pd.DataFrame, plan) -> tuple[list, list]:
    """A release's label columns (Categoricals of text) and the numeric columns written
    as dictionaries all the same (the class ids)."""
    labels = [q for q in plan.qis if isinstance(meta[q].dtype, pd.CategoricalDtype)]
    class_column = plan.options["class_column"]
    return labels, [] if class_column is None else [class_column]

