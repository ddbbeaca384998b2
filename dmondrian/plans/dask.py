"""A fitted plan applied to a dask DataFrame: two passes, no shuffle.

1. Every input partition routes its rows through the plan and summarizes them
   per node (:meth:`FittedPlan.summarize`); the summaries are merged in a tree
   reduction (:func:`dmondrian._dask.graph.tree_reduce`), so the client
   receives one array per node, never rows. With ``entity=`` a partition's
   summary also holds its distinct (node, entity[, sensitive value]) triples
   (:class:`.people.People`), merged exactly in the same reduction (the
   entities matched by value): the client receives the table's distinct
   triples, as many as its distinct (region, person) pairs, and decides on
   them exactly as in memory.
2. The client decides the classes (:func:`.release.decide`), exactly as the
   local engine does on the merged summary; ``map_partitions`` then routes
   every partition again and writes each row's class label. Rows never move:
   the output has the input's partitions, index and order.

The labels are Categoricals with the same, known categories in every
partition, and the release equals the local engine's release of the
computed table (the summaries add up to the whole table's).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from .._dask.cluster import cores_per_worker, resolve_client, run
from .._dask.cluster import release as release_client
from .._dask.graph import constant, tree_reduce
from .._kernel import thread_limit
from ..errors import InfeasibleError
from .batch import Placing
from .release import decide, publish_rows

__all__ = ["transform_dask"]


class _Placer(Placing):
    """What a task reads to place, count and publish rows: the plan's encodings and
    options and the compiled pass's tables (:func:`.batch.lift_tables`), without the
    fitted statistics the client decides from, so less than half the plan travels
    in the graph. A plan too large for the compiled tables travels whole."""

    def __init__(self, plan):
        self.encodings, self.kernel_kinds = plan.encodings, plan.kernel_kinds
        self.options, self.sensitive = plan.options, plan.sensitive
        self._lift = plan.lift_tables
        self.tree = plan.tree if self._lift is None else _Shape(
            plan.tree.n_nodes, SimpleNamespace(has_ties=plan.tree.cuts.has_ties))

    @property
    def lift_tables(self):
        return self._lift


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


def _summarize(df: pd.DataFrame, plan, offset, threads=None):
    positions = None if offset is None else offset + np.arange(len(df), dtype=np.int64)
    # A worker's share of its host's cores: its tasks run side by side with others'.
    with thread_limit(threads):
        return plan.summarize(df, positions)


def _publish(df: pd.DataFrame, plan, release, offsets=None, threads=None,
             partition_info=None) -> pd.DataFrame:
    positions = None
    if offsets is not None and partition_info is not None:
        positions = offsets[partition_info["number"]] + np.arange(len(df), dtype=np.int64)
    with thread_limit(threads):
        placed = plan.place(df, positions)
        entity = plan.options.get("entity")
        if entity is not None:
            df = df.drop(columns=[entity])  # a direct identifier, never released
        return publish_rows(df, release, placed.node, plan.options["class_column"])


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
    dask.dataframe.DataFrame
        The release, lazy: QI columns published (labels as Categoricals with
        known categories), every other column untouched, the input's partitions.

    Raises
    ------
    InfeasibleError
        When the table as a whole cannot be one class (fewer than k rows).
    """
    from dask import delayed

    plan._check_table(ddf)
    identifiers = [c for c in plan.options["identifiers"] or [] if c in ddf.columns]
    if identifiers:
        ddf = ddf.drop(columns=identifiers)
    cluster_client, owned = resolve_client(client)
    try:
        threads = cores_per_worker(cluster_client)
        offsets = None
        if plan.tree.cuts.has_ties:
            # Relaxed cuts split median ties by input position: each partition's first row's.
            lengths = run(cluster_client, ddf.map_partitions(len), False, "rows per partition")
            offsets = np.concatenate([[0], np.cumsum(np.asarray(lengths))[:-1]]).tolist()
        columns = [*plan.qis] + [plan.options[name] for name in ("sensitive", "entity")
                                 if plan.options.get(name) is not None]
        parts = ddf[columns].to_delayed(optimize_graph=True)
        placer = _Placer(plan)
        plan_d = constant(placer, "plan")
        summarize = delayed(_summarize, pure=True)
        partials = [summarize(p, plan_d, None if offsets is None else offsets[i], threads)
                    for i, p in enumerate(parts)]
        summary = run(cluster_client, tree_reduce(partials, _merge), progress,
                      "pass: rows per region of the plan")
    finally:
        release_client(owned)
    if int(summary.count.sum()) == 0:
        raise InfeasibleError("the table is empty: there is nothing to anonymize")
    release = decide(plan, summary)
    meta = _publish(ddf._meta, placer, release)
    # One copy of the plan and the classes in the graph, not one per task.
    return ddf.map_partitions(_publish, constant(placer, "plan"), constant(release, "classes"),
                              offsets, threads, meta=meta)
