"""``dmondrian anonymize`` on the Dask engine: read lazily, write from the workers."""

from __future__ import annotations

from ..options import ANONYMIZE, DASK_PLAN
from . import _engines
from ._inputs import check_columns

#: The writers' options per output format: no index column, and a CSV
#: release as one file rather than one per partition.
WRITE_OPTIONS = {"parquet": {"write_index": False}, "csv": {"single_file": True, "index": False}}


def anonymize_on_dask(job) -> tuple[int, int, int, int, int]:
    """Anonymize a job's input on a Dask cluster and write its release.

    Parameters
    ----------
    job : dmondrian.cli.anonymize.Job
        The resolved command line.

    Returns
    -------
    rows : int
        Rows written.
    classes : int
        Equivalence classes written.
    min_class_size : int
        Rows of the smallest class.
    input_rows : int
        Rows read.
    masked : int
        Rows written with every QI masked (``--suppression``).
    """
    from .. import io

    io._check_exists(job.src)
    with _client(job.args) as client:
        ddf = _read(job)
        top = _write(job, ddf, client)
        return (*_class_counts(job), int(top.domain.n_rows))


def _client(args):
    if args.scheduler:
        return _engines.scheduler_client(args.scheduler)
    return _engines.local_client(args.workers or 2, args.memory_limit)


def _read(job):
    import dask.dataframe as dd

    if job.in_fmt == "parquet":
        ddf = dd.read_parquet(job.src)
    else:
        str_cols = [c for c, t in job.dtypes.items() if t in ("str", "string")]
        ddf = dd.read_csv(job.src, dtype=dict.fromkeys(str_cols, "str"))
    check_columns(ddf, [*job.qis, *job.sensitive, *job.dtypes], "--qi/--sensitive/--dtype",
                  job.src)
    return _convert(ddf, job.dtypes)


def _convert(ddf, dtypes: dict):
    """``--dtype`` conversions on a dask DataFrame (strings were set when reading)."""
    import dask.dataframe as dd

    for col, typ in dtypes.items():
        name = str(typ).lower()
        if name == "datetime":
            ddf[col] = dd.to_datetime(ddf[col], format="ISO8601")
        elif name in ("int", "float"):
            ddf[col] = ddf[col].astype({"int": "Int64", "float": "float64"}[name])
        elif name not in ("str", "string"):
            ddf[col] = ddf[col].astype(name)
    return ddf


def _write(job, ddf, client):
    from .. import io

    engine = _engines.dask_engine()
    write = engine.anonymize_to_parquet if job.out_fmt == "parquet" else engine.anonymize_to_csv
    # On Dask a Parquet output is a dataset directory (a file per partition),
    # a CSV output one file; either is written under a hidden temporary name
    # and renamed only when every task has finished.
    with io.atomic_output(job.dst, directory=job.out_fmt == "parquet",
                          overwrite=job.args.overwrite) as (fs, tmp):
        return write(ddf, fs.unstrip_protocol(tmp), job.qis, job.args.k, client=client,
                     write_options=WRITE_OPTIONS[job.out_fmt], progress=job.progress.enabled,
                     **job.options(ANONYMIZE, DASK_PLAN))


def _class_counts(job) -> tuple[int, int, int, int]:
    """Rows, classes, smallest class and masked rows of the release, read back from the
    output."""
    import dask.dataframe as dd

    from ..suppression import MASK_LABEL

    written = dd.read_parquet(job.dst) if job.out_fmt == "parquet" else dd.read_csv(job.dst)
    counts = written[job.qis].astype(str).groupby(job.qis, observed=True).size().compute()
    masked_key = MASK_LABEL if len(job.qis) == 1 else (MASK_LABEL,) * len(job.qis)
    masked = int(counts.get(masked_key, 0))
    return int(counts.sum()), len(counts), int(counts.min()), masked
