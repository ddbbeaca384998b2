"""``dmondrian anonymize`` on the Dask engine: read lazily, write from the workers."""

from __future__ import annotations

from ..options import ANONYMIZE, DASK_PLAN
from . import _engines
from ._inputs import check_columns, refuse_unread_dates

#: The writers' options per output format: no index column, and a CSV
#: release as one file rather than one per partition (each partition's
#: rows shuffled, as every writer does: dmondrian.release.row_order).
WRITE_OPTIONS = {"parquet": {"write_index": False}, "csv": {"single_file": True, "index": False}}


def anonymize_on_dask(job, release_report, ddf) -> tuple[object, int]:
    """Anonymize a job's input on a Dask cluster, write its release, and measure it.

    Parameters
    ----------
    job : dmondrian.cli.anonymize.Job
        The resolved command line.
    release_report : callable
        ``(job, released, original, measured=None) -> Report``: given the counts the write tasks
        took (``measured``), without reading anything again; else run on the cluster with the
        release read back from the output and the input (both lazy). Either way the manifest of a
        Dask release holds what a local one does.
    ddf : dask.dataframe.DataFrame
        The input, opened and checked already (the command line does so before staging OUTPUT).

    Returns
    -------
    report : dmondrian.evaluation.reporting.Report
        The written release's report.
    input_rows : int
        Rows read.
    """
    with _client(job.args) as client:
        top = _write(job, ddf, client, _measure(job))
        with job.progress.stage("measuring the release for its manifest"):
            from .._dask.global_domain import ncp_domains

            domains = None if top.measured is None else ncp_domains(top.domain, top.encodings)
            if domains is None:
                rep = release_report(job, _read_back(job), ddf)
            else:
                rep = release_report(job, None, ddf, measured=(
                    top.measured, domains, top.domain.n_rows, top.identifying))
        return rep, int(top.domain.n_rows)


def _measure(job, generalization=None):
    """What the write tasks count for the manifest's report (an empty
    :class:`~dmondrian.metrics.accumulator.ReleaseCounts`), or None when the release
    is read back instead: a CSV release (dask's writer writes it), or QIs published
    as numbers (``generalization``, default the command line's), whose information
    loss needs the originals of every class."""
    from ..metrics.accumulator import ReleaseCounts

    if job.out_fmt != "parquet" or (generalization or job.args.generalization) != "range":
        return None
    return ReleaseCounts(job.qis, job.sensitive[0] if job.sensitive else None)


def release_plan_on_dask(job, release_report, ddf):
    """Release a job's input through its ``--plan`` on a Dask cluster, write it, measure it.

    The plan's Dask path (:meth:`dmondrian.plans.FittedPlan.transform_to_parquet`, or
    :func:`~dmondrian.plans.dask.transform_dask` for CSV): one pass counts the rows of every region,
    then every partition is published in place, its rows shuffled
    (:mod:`dmondrian.release.row_order`) and written. No shuffle between partitions. With
    ``--save-plan`` the plan is first fitted on the input (:func:`dmondrian.plans.fit_plan`) and
    written once the release is. A Parquet release's manifest is built from what the passes counted
    (the write tasks' classes, the counting pass's QI domains:
    :mod:`dmondrian.metrics.accumulator`), as :func:`anonymize_on_dask`'s is; a CSV release (dask's
    writer writes it) is read back.

    Parameters
    ----------
    job : dmondrian.cli.anonymize.Job
        The resolved command line, ``job.plan`` the loaded plan (None with ``--save-plan``).
    release_report, ddf : callable, dask.dataframe.DataFrame
        As in :func:`anonymize_on_dask`.

    Returns
    -------
    dmondrian.evaluation.reporting.Report
        The written release's report.
    """
    from .._dask.cluster import run
    from ..metrics.accumulator import InputDomains
    from ..metrics.domains import column_kinds
    from ..plans import fit_plan, plan_sha256, save_plan
    from ..plans.dask import transform_dask, transform_to_parquet
    from ..release.row_order import row_order_seed, shuffle_partition

    with _client(job.args) as client:
        plan = job.plan
        if plan is None:
            # As in memory: the seed orders the rows, and a suppression asked for is
            # refused by the fit (dmondrian.options.plan_fit_options), not dropped.
            options = {n: v for n, v in job.options(ANONYMIZE).items()
                       if ANONYMIZE[n].plan != "release"}
            plan = fit_plan(ddf, job.qis, job.args.k, batch_rows=job.args.batch_rows, client=client,
                            progress=job.progress.enabled, leaf_rows=job.args.leaf_rows, **options)
        counts, measured = _measure(job, plan.options["generalization"]), None
        # The report reads the input's ordinal QIs in the plan's order: their values
        # are found by the counting pass when it counts, else now, before any write.
        original = None if counts is not None else with_plan_categories(ddf, plan)
        if job.out_fmt == "parquet":
            # The release's own writer: the identifying check in its write tasks, the
            # manifest's counts too (the input's domains in its counting pass).
            written = transform_to_parquet(
                plan, ddf, job.target, client=client, progress=job.progress.enabled,
                write_options=WRITE_OPTIONS["parquet"], random_state=job.args.random_state,
                _measure=None if counts is None else (counts, InputDomains(column_kinds(
                    ddf._meta, job.qis, job.hierarchies or {}, {}))))
            if counts is not None:
                written, counts, domains = written
                original = with_plan_categories(ddf, plan, domains.parts)
                measured = (counts, domains.domains(original._meta, job.hierarchies), written, [])
        else:
            released = transform_dask(plan, ddf, client=client, progress=job.progress.enabled)
            released = released.map_partitions(shuffle_partition,
                                               row_order_seed(job.args.random_state),
                                               meta=released._meta)
            run(client, released.to_csv(job.target, compute=False, **WRITE_OPTIONS["csv"]),
                job.progress.enabled, f"pass: publish, write {job.dst}")
        job.plan_sha256 = (plan_sha256(job.args.plan) if job.plan is not None
                           else save_plan(plan, job.args.save_plan))
        with job.progress.stage("measuring the release for its manifest"):
            if measured is not None:
                return release_report(job, None, original, measured=measured)
            return release_report(job, _read_back(job), original)


def with_plan_categories(ddf, plan, found=None):
    """``ddf`` with each ordinal QI that Dask read as a Categorical of unknown categories
    (a Parquet dictionary column) given the plan's order: its fitted categories, then
    those the fit never saw, in sorted order.

    The order is the plan's, not the data's: without it the report could not
    tell what "between" means and would refuse the column. The categories the
    fit never saw are found in one pass over those columns, unless ``found`` has them.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The input released through ``plan``.
    plan : dmondrian.plans.FittedPlan
    found : dict, optional
        ``{column: (values, _)}``: every ordinal QI's distinct values, as the
        counting pass took them (:attr:`dmondrian.metrics.accumulator.InputDomains.parts`).

    Returns
    -------
    dask.dataframe.DataFrame
    """
    import dask
    import pandas as pd

    from .._compat import has_unknown_categories

    fitted = {qi.name: list(qi.categories) for qi in plan.encodings if qi.kind == "ordinal"}
    unknown = [name for name in fitted if name in ddf.columns
               and isinstance(ddf._meta[name].dtype, pd.CategoricalDtype)
               and has_unknown_categories(ddf._meta[name].dtype)]
    if not unknown:
        return ddf
    found = ([found[name][0] for name in unknown] if found is not None
             else dask.compute(*(ddf[name].dropna().unique() for name in unknown)))
    dtypes = {}
    for name, values in zip(unknown, found, strict=True):
        known = set(fitted[name])
        unseen = sorted((v for v in pd.unique(values) if v not in known), key=str)
        dtypes[name] = pd.CategoricalDtype([*fitted[name], *unseen], ordered=True)
    return ddf.astype(dtypes)


def _client(args):
    if args.scheduler:
        return _engines.scheduler_client(args.scheduler)
    return _engines.local_client(args.workers or 2, args.memory_limit)


def _read(job):
    import dask.dataframe as dd

    from ..io.csv_tables import TEXT_TYPES, convert_dtypes, read_csv_dask

    if job.in_fmt == "parquet":
        ddf = dd.read_parquet(job.src)
    else:
        text = [c for c, t in job.dtypes.items() if str(t).lower() in TEXT_TYPES]
        ddf = read_csv_dask(job.src, job.dialect, text)
    check_columns(ddf, [*job.qis, *job.sensitive, *job.dtypes], "--qi/--sensitive/--dtype", job.src)
    refuse_unread_dates(ddf, job.qis, job.dtypes, job.src)
    return convert_dtypes(ddf, job.dtypes, job.src)


def _write(job, ddf, client, measure=None):

    engine = _engines.dask_engine()
    write = engine.anonymize_to_parquet if job.out_fmt == "parquet" else engine.anonymize_to_csv
    extra = {} if measure is None else {"_measure": measure}
    # On Dask a Parquet output is a dataset directory (a file per partition),
    # a CSV output one file; either is written into the release's staging
    # (dmondrian.io.staging), published once every check has passed.
    return write(ddf, job.target, job.qis, job.args.k, client=client,
                 write_options=WRITE_OPTIONS[job.out_fmt], progress=job.progress.enabled,
                 **job.options(ANONYMIZE, DASK_PLAN), **extra)


def _read_back(job):
    """The written release, lazily, read as the readers of the command line read it."""
    import dask.dataframe as dd

    from ..io.csv_tables import CsvDialect, read_csv_dask

    if job.out_fmt == "parquet":
        return dd.read_parquet(job.target)
    return read_csv_dask(job.target, CsvDialect(","))
