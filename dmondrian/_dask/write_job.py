"""The writers' job: plan, then run the graph that anonymizes and writes, on one cluster.

:func:`dmondrian.distributed.anonymize_to_parquet` and ``anonymize_to_csv`` run it;
it checks the rows written and finishes the identifying-column check the write
tasks made (:mod:`dmondrian._dask.written_check`).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings

import pandas as pd

from ..errors import IdentifyingColumnWarning
from ..privacy import suppression
from ..release.unique_count import unique_rows
from .cluster import on_client, release, resolve_client, run
from .plan import Recount, TopPlan
from .watchdog import check_stall_timeout, stall_timeout
from .written_check import finish_written

__all__ = ["anonymize_and_write", "csv_release", "release_counts", "written_report"]


def anonymize_and_write(plan, ddf, quasi_identifiers, k, build, *, label, defer_counts=False,
                        check_in_write=False, undo=None, **options) -> TopPlan:
    """Plan (``plan``: :func:`dmondrian.distributed.plan`), then run ``build(top)``'s
    graph, on one cluster; recount if the verdict asks. ``check_in_write``, ``undo``:
    :func:`~dmondrian._dask.written_check.finish_written`."""
    timeout = check_stall_timeout(options["stall_timeout"])
    c, owned = resolve_client(options.pop("client"))
    progress = options["progress"]
    try:
        top = plan(ddf, quasi_identifiers, k, client=c, _defer_counts=defer_counts,
                   _check_in_write=check_in_write, **options)
        start = time.perf_counter()
        try:
            with stall_timeout(timeout):
                result = run(c, build(top), progress, label)
        except Recount:
            # Rare: the sample misjudged a cut the output partitions cannot
            # undo alone. Nothing was written; count in a pass of its own.
            undone = time.perf_counter() - start
            with warnings.catch_warnings():  # the first plan has warned already
                warnings.simplefilter("ignore", IdentifyingColumnWarning)
                top = plan(ddf, quasi_identifiers, k, client=c, _check_in_write=check_in_write,
                           **options)
            top.timings["first attempt (undone: a count disallowed a cut)"] = undone
            start = time.perf_counter()
            with stall_timeout(timeout):
                result = run(c, build(top), progress, label)
        top.timings["route, shuffle, anonymize, write"] = time.perf_counter() - start
        if not top.counted:
            verdict = result.pop()
            top.leaf_counts, top.leaf_depths = verdict.counts, verdict.depth
            top.counted, top.undone_cuts = True, verdict.undone
            result = pd.concat(result)
        elif isinstance(result, list) and result and all(
                isinstance(r, pd.DataFrame) for r in result):
            result = pd.concat(result)  # the keys path's writes, one per input partition
        if isinstance(result, pd.DataFrame):
            written, n = int(result["rows"].sum()), top.domain.n_rows
            # Only suppressed="drop" may leave rows out, at most its budget.
            fewest = n - suppression.most_dropped(n, top.options)
            if not fewest <= written <= n:
                raise RuntimeError(f"dmondrian: wrote {written} rows of {n}")
            count = on_client(c, progress)
            finish_written(result, top, undo, lambda cols: unique_rows(ddf, cols, count))
        return top
    finally:
        release(owned)


def release_counts(top: TopPlan, manifest: bool, measure=None):
    """What the write tasks of a Parquet writer count for a report: ``measure`` (the
    command line's) when given; with a ``manifest`` asked, an empty
    :class:`~dmondrian.metrics.accumulator.ReleaseCounts` when every QI is published
    as labels (QIs published as numbers need the originals of every class); else None."""
    if measure is not None or not manifest or top.options.generalization != "range":
        return measure
    from ..metrics.accumulator import ReleaseCounts

    return ReleaseCounts(list(top.options.qis), top.options.sensitive)


def written_report(top: TopPlan, ddf, noise=None):
    """The report of the release ``top`` wrote, from the counts its write tasks took
    (``top.measured``), as the command line's manifest on Dask builds it; None when
    none were taken, or when a QI's domain needs the table read again
    (:func:`~dmondrian._dask.global_domain.ncp_domains`). ``ddf``: the input, for the
    sensitive column's type; ``noise``: the run's option."""
    from ..evaluation.reporting import counted_report
    from .global_domain import ncp_domains

    counts = top.measured
    domains = None if counts is None else ncp_domains(top.domain, top.encodings)
    if domains is None:
        return None
    meta = None if counts.sensitive is None else ddf._meta[counts.sensitive]
    return counted_report(counts, counts.quasi_identifiers, domains, top.domain.n_rows,
                          k=top.options.k, sensitive_meta=meta,
                          identifying_columns=top.identifying, noise=noise)


@contextlib.contextmanager
def csv_release(path, single_file: bool, storage_options=None):
    """Stage the CSV release dask's ``to_csv`` writes at ``path``: yields the
    :class:`~dmondrian.io.staging.Stage` and the target to write to.

    The release is the file ``path`` with ``single_file``; the folder of a ``path`` whose name holds
    ``*`` (its files); else the folder ``path`` (dask names the files in it). The caller commits
    (:func:`dmondrian.io.staging.commit_with_manifest`); an OUTPUT that exists is an
    :class:`~dmondrian.errors.OutputError`, raised before anything is written.
    """
    from ..io.staging import staged_release

    text = os.fspath(path)
    folder, name = text.rsplit("/", 1) if "/" in text else (".", text)
    if single_file:
        release, rest = text, ""
    elif "*" in name:
        release, rest = folder, name
    else:
        release, rest = text, ""
    with staged_release(release, directory=not single_file,
                        storage_options=storage_options) as stage:
        yield stage, stage.data_url + rest
