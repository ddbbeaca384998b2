"""``dmondrian anonymize``: read, anonymize, write atomically with a manifest.

Small inputs run on the in-memory engine here; large ones, or ``--distributed``, on the Dask engine
(:mod:`._anonymize_dask`). Either way the release and its manifest are staged in a hidden folder
beside OUTPUT and published only once every check has passed, the manifest last
(:mod:`dmondrian.io.staging`): a killed run leaves nothing at OUTPUT that passes for a release, and
the same command runs again without ``--overwrite``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass, field

from ..errors import IdentifyingColumnWarning
from ..options import ANONYMIZE, DASK_PLAN, FORMATS, PLAN_KEEPS, K
from ..release.row_order import row_order_record, row_order_seed, shuffle_rows
from . import _engines
from ._anonymize_dask import anonymize_on_dask, release_plan_on_dask
from ._common import (
    EXIT_OK,
    UsageError,
    add_common,
    add_option,
    option_type,
    require_sensitive,
    table_options,
    warning_line,
)
from ._inputs import (
    check_columns,
    dialect_of,
    dtypes_of,
    exists,
    load_hierarchies,
    metrics_api,
    refuse_unread_dates,
)
from ._progress import Progress
from ._types import byte_size, noise_column, positive_int, split_names

#: Inputs up to this size run on the in-memory engine unless told otherwise.
DEFAULT_LOCAL_LIMIT = "1GB"

NAME = "anonymize"
HELP = "k-anonymize a CSV or Parquet table"
DESCRIPTION = """\
k-anonymize a table and write it with its release manifest
(OUTPUT.manifest.json). Small inputs run in memory; large ones, or
--distributed, on Dask. The output appears only once complete."""

EXAMPLES = """\
examples:
  dmondrian anonymize people.csv released.csv --k 10 --qi age,zip,sex
  dmondrian anonymize people.csv released.csv --k 10 --qi age,zip,sex \\
      --suppression 0.02 --suppressed drop
  dmondrian anonymize s3://bucket/people/ s3://bucket/released/ --k 50 \\
      --qi age,zip --scheduler tcp://10.0.0.5:8786
  dmondrian anonymize --input people.csv --output out.csv --qi-names age,zip --k 5 \
--max-depth 8"""


# -- the command line ------------------------------------------------------------------


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags of ``dmondrian anonymize`` to its parser ``p``."""
    _add_input_output(p)
    p.add_argument("-k", "--k", type=option_type(K),
                   help="minimum equivalence-class size (required unless --plan)")
    add_common(p, qi_required=False)
    _add_anonymization(p)
    _add_plan(p.add_argument_group("fitted plans (fit once, release every day)"))
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    p.add_argument("--output-format", choices=FORMATS,
                   help="output format, if it differs from --format")
    _add_engine(p.add_argument_group("engine"))
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_input_output(p) -> None:
    p.add_argument("input", nargs="?", metavar="INPUT", help="CSV/Parquet file, Parquet "
                   "directory or fsspec URL")
    p.add_argument("output", nargs="?", metavar="OUTPUT", help="output file or directory (URL)")
    # The seed's command line named them with flags: still accepted.
    p.add_argument("--input", dest="input_flag", metavar="INPUT", help="same as INPUT")
    p.add_argument("--output", dest="output_flag", metavar="OUTPUT", help="same as OUTPUT")


def _add_anonymization(p) -> None:
    add_option(p, ANONYMIZE["sensitive"], metavar="COL", also="the manifest's report too")
    add_option(p, ANONYMIZE["l"], metavar="L", also="needs --sensitive")
    add_option(p, ANONYMIZE["l_kind"])
    add_option(p, ANONYMIZE["c"], metavar="C", also="with --l-kind recursive")
    add_option(p, ANONYMIZE["t"], metavar="T", also="needs --sensitive")
    add_option(p, ANONYMIZE["mode"])
    add_option(p, ANONYMIZE["objective"])
    add_option(p, ANONYMIZE["refine"])
    add_option(p, ANONYMIZE["refine_rows"], metavar="N|all")
    add_option(p, ANONYMIZE["generalization"])
    p.add_argument("--hierarchy", action="append", metavar="COL=FILE",
                   help="generalization hierarchy for a nominal QI, lines 'leaf;parent;...;*' "
                        "(repeatable)")
    add_option(p, ANONYMIZE["max_depth"], metavar="N")
    add_option(p, ANONYMIZE["suppression"], metavar="F", also="e.g. 0.02")
    add_option(p, ANONYMIZE["suppressed"])
    add_option(p, ANONYMIZE["noise"], type=noise_column, action="append",
               metavar="COL:EPS:LO:HI", also="repeatable, e.g. income:1.0:0:200000")
    add_option(p, ANONYMIZE["random_state"], flag="--seed", metavar="N")
    add_option(p, ANONYMIZE["identifiers"], flag="--drop", action="append", metavar="COLS",
               also="comma-separated (repeatable)")
    add_option(p, ANONYMIZE["allow_unique"], action="append", metavar="COLS",
               also="comma-separated (repeatable)")
    add_option(p, ANONYMIZE["entity"], metavar="COL")
    add_option(p, ANONYMIZE["max_contributions"], metavar="N", also="needs --entity and --noise")
    add_option(p, ANONYMIZE["max_classes"], metavar="N", also="needs --entity and --noise")


def _add_plan(group) -> None:
    group.add_argument("--save-plan", metavar="FILE", help="also write the fitted partition as a "
                                                           "JSON plan (on Dask: strict cuts only)")
    group.add_argument("--plan", metavar="FILE",
                       help="release INPUT through a saved plan: QIs, k and options come from "
                            "it (a flag that contradicts it is an error)")
    group.add_argument("--batch-rows", type=positive_int("--batch-rows"), metavar="N",
                       help="with --save-plan: rows of the tables the plan will release "
                            "(fits coarser classes that keep k in each)")


def _apply_plan_file(args) -> object:
    """The plan of ``--plan``, its QIs, k and options put into ``args``; a flag that
    contradicts it is a usage error."""
    from ..plans import load_plan

    if args.save_plan:
        raise UsageError("--plan and --save-plan exclude each other")
    plan = load_plan(args.plan)
    given = split_names(args.qi)
    if given and given != plan.qis:
        raise UsageError(f"--qi {','.join(given)} contradicts the plan's quasi-identifiers "
                         f"{','.join(map(str, plan.qis))}")
    if args.k is not None and args.k != plan.k:
        raise UsageError(f"--k {args.k} contradicts the plan's k={plan.k}")
    for name in _PLAN_FLAGS:
        value, default = getattr(args, name), ANONYMIZE[name].default
        if value != default and value != plan.options.get(name):
            raise UsageError(f"--{name.replace('_', '-')} {value} contradicts the plan's "
                             f"{name}={plan.options.get(name)}")
    for name in ("suppression", "batch_rows", "hierarchy"):
        if getattr(args, name):
            raise UsageError(f"--{name.replace('_', '-')} cannot be used with --plan: the plan "
                             "fixes the partition")
    args.k, args.qi = plan.k, [",".join(map(str, plan.qis))]
    for name in _PLAN_FLAGS:
        setattr(args, name, plan.options.get(name))
    return plan


#: Options a plan fixes: a flag that names another value contradicts it. The columns
#: dropped, allowed or added are a release's own (checked again on every table).
_PLAN_FLAGS = tuple(name for name in PLAN_KEEPS
                    if name not in ("identifiers", "allow_unique", "class_column"))


def _add_engine(group) -> None:
    group.add_argument("--distributed", action="store_true",
                       help="use the Dask engine whatever the input size")
    group.add_argument("--local", action="store_true",
                       help="use the in-memory engine whatever the input size")
    group.add_argument("--local-limit", type=byte_size, default=DEFAULT_LOCAL_LIMIT, metavar="SIZE",
                       help=f"inputs larger than this use Dask (default {DEFAULT_LOCAL_LIMIT})")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler to connect to, e.g. tcp://host:8786")
    group.add_argument("--workers", type=positive_int("--workers"), metavar="N",
                       help="start a local Dask cluster with N workers")
    group.add_argument("--memory-limit", type=byte_size, metavar="SIZE",
                       help="memory limit per local worker, e.g. 2GB")
    add_option(group, DASK_PLAN["leaf_rows"], metavar="N", also="Dask engine only")
    add_option(group, DASK_PLAN["stall_timeout"], metavar="SECONDS", also="Dask engine only")
    add_option(group, DASK_PLAN["exchange"], also="Dask engine only")


# -- the run ---------------------------------------------------------------------------


@dataclass
class Job:
    """One ``dmondrian anonymize`` run, its command line resolved and checked."""

    args: argparse.Namespace
    src: str
    dst: str
    in_fmt: str
    out_fmt: str
    qis: list[str]
    sensitive: list[str]
    #: ``{column: Hierarchy}`` for the engine, ``{column: FILE}`` for the manifest.
    hierarchies: dict
    hierarchy_files: dict
    dtypes: dict
    #: How CSV input is written (separator, decimal mark, encoding).
    dialect: object
    progress: Progress
    #: The columns the run warned single out rows.
    identifying: list = field(default_factory=list)
    #: The plan of ``--plan`` (None without one), and the SHA-256 of the plan file.
    plan: object = None
    plan_sha256: str | None = None
    #: The types the QIs and the sensitive column were read with, for the manifest.
    column_types: dict | None = None
    #: Where the writers write: the release's staging (:mod:`dmondrian.io.staging`).
    target: str | None = None

    def options(self, *groups) -> dict:
        """The engine's keyword options of ``groups``, by the option table's names.

        Parameters
        ----------
        *groups : dict of Option
            Option groups of :mod:`dmondrian.options`.

        Returns
        -------
        dict
        """
        options = table_options(self.args, *groups)
        options["hierarchies"] = self.hierarchies or None
        options["noise"] = dict(self.args.noise) if self.args.noise else None
        for name in ("identifiers", "allow_unique"):
            options[name] = split_names(getattr(self.args, name)) or None
        if self.args.l is None and self.args.t is None:
            # Without l or t, --sensitive only names the column the manifest's
            # report is about; the engine would check it as a constraint's.
            # It is still the sensitive attribute, not a column that links.
            del options["sensitive"]
            if self.sensitive:
                options["allow_unique"] = [*(options["allow_unique"] or []), *self.sensitive]
        return options


@dataclass
class Outcome:
    """What a run wrote: its rows and classes, its report, and how long it took."""

    rows: int
    classes: int
    min_class_size: int
    input_rows: int | None = None
    #: The release's report (dmondrian.evaluation.reporting.Report), for the manifest.
    report: object = None
    seconds: float = 0.0

    @classmethod
    def of(cls, rep, input_rows: int) -> Outcome:
        """The outcome of a release measured by its report ``rep``."""
        return cls(rows=rep.n_records, classes=rep.n_classes, min_class_size=rep.privacy.k,
                   input_rows=input_rows, report=rep)


def run(args: argparse.Namespace) -> int:
    """Read, anonymize, write atomically with a manifest (exit status 0)."""
    from ..io import files as io
    from ..io.staging import staged_release

    plan = _apply_plan_file(args) if args.plan else None
    job = _job(args)
    job.plan = plan
    io._check_exists(job.src)
    engine = choose_engine(args, job.src)
    started = time.perf_counter()
    # Whatever can refuse the run (INPUT, its columns, the options) is said before
    # OUTPUT is staged or locked: a run writing OUTPUT, or OUTPUT there, hides no error.
    table = _checked_input(job, engine)
    # Nothing appears at OUTPUT before every check has passed: the release and
    # its manifest are staged beside it, and the manifest is published last.
    with staged_release(job.dst, overwrite=args.overwrite,
                        directory=_writes_folder(job, engine)) as stage:
        job.target = stage.data_url
        with _identifying_warnings(job):
            outcome = (_anonymize_local(job, table) if engine == "local"
                       else _anonymize_on_dask(job, table))
        outcome.seconds = round(time.perf_counter() - started, 3)
        stage.seal()
        _stage_manifest(job, engine, outcome, stage)
        stage.commit()
    _print_done(job, engine, outcome)
    return EXIT_OK


def _writes_folder(job: Job, engine: str) -> bool:
    """Whether the release is a folder: Parquet on Dask, or where the in-memory writer
    makes one (:func:`dmondrian.io.files.write_table`)."""
    from ..io import files as io

    if job.out_fmt != "parquet":
        return False
    if engine != "local" or job.dst.endswith("/"):
        return True
    fs, path = io._fs(job.dst)
    return fs.isdir(path.rstrip("/"))


class _identifying_warnings:
    """Print each column that looks like a person key as one line on stderr (when the
    run succeeds), and keep it for the manifest; other warnings go on as usual. (A
    column that singles out rows is refused: IdentifyingColumnError, the error line.)"""

    def __init__(self, job: Job):
        self.job = job
        self.catcher = warnings.catch_warnings(record=True)

    def __enter__(self):
        self.caught = self.catcher.__enter__()
        warnings.simplefilter("always", IdentifyingColumnWarning)
        return self

    def __exit__(self, *exc):
        self.catcher.__exit__(*exc)
        for w in self.caught:
            if issubclass(w.category, IdentifyingColumnWarning):
                if exc[0] is not None:  # nothing was released: the error line says why
                    continue
                warning_line(w.message)
                self.job.identifying.append(str(w.message.column))
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return False


def _job(args) -> Job:
    from ..io import files as io

    src, dst = _resolve_io(args)
    if args.k is None:
        raise UsageError("the following arguments are required: -k/--k (or --plan)")
    qis = split_names(args.qi)
    if not qis:
        raise UsageError("the following arguments are required: --qi (or --plan)")
    sensitive = split_names([args.sensitive] if args.sensitive else [])
    require_sensitive(args, sensitive)
    in_fmt = io.detect_format(src, args.format)
    out_fmt = io.detect_format(dst, args.output_format or args.format)
    hierarchies, hierarchy_files = load_hierarchies(args.hierarchy)
    return Job(args, src, dst, in_fmt, out_fmt, qis, sensitive, hierarchies, hierarchy_files,
               dtypes_of(args), dialect_of(args), Progress(not args.no_progress))


def _resolve_io(args) -> tuple[str, str]:
    """INPUT and OUTPUT, each given once, as a positional or as a flag."""
    if args.input is not None and args.input_flag is not None:
        raise UsageError("give the input once: either INPUT or --input, not both")
    if args.output is not None and args.output_flag is not None:
        raise UsageError("give the output once: either OUTPUT or --output, not both")
    src = args.input if args.input is not None else args.input_flag
    dst = args.output if args.output is not None else args.output_flag
    if src is None:
        raise UsageError("missing INPUT (a CSV/Parquet path or URL)")
    if dst is None:
        raise UsageError("missing OUTPUT (where to write the released table)")
    if src.rstrip("/") == dst.rstrip("/"):
        raise UsageError("OUTPUT is the same as INPUT: refusing to overwrite the original")
    return src, dst


def choose_engine(args: argparse.Namespace, src: str) -> str:
    """The engine a run uses: ``"local"`` or ``"distributed"``.

    --local and --distributed decide; the cluster flags mean Dask; otherwise an
    input up to --local-limit runs in memory.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.
    src : str
        The input's path or URL.

    Returns
    -------
    str
    """
    if args.local and args.distributed:
        raise UsageError("--local and --distributed exclude each other")
    if args.scheduler and (args.workers or args.memory_limit):
        raise UsageError("--scheduler connects to an existing cluster: it excludes --workers "
                         "and --memory-limit, which start a local one")
    cluster_flags = args.scheduler or args.workers or args.memory_limit
    if args.local:
        if cluster_flags:
            raise UsageError("--local runs in memory: it excludes --scheduler, --workers and "
                             "--memory-limit")
        return "local"
    if args.distributed or cluster_flags:
        return "distributed"
    from ..io import files as io

    size = io.input_size(src) if exists(src) else 0
    if size <= args.local_limit or not _engines.has_dask_engine():
        return "local"
    return "distributed"


def _checked_input(job: Job, engine: str):
    """The input, read (in memory) or opened lazily (Dask), with its columns and the
    run's options checked against it: before OUTPUT is staged."""
    from ..encoding.validation import check_options
    from ..io import files as io

    if engine != "local":
        from ._anonymize_dask import _read

        if job.args.noise and (job.plan is not None or job.args.save_plan):
            raise UsageError("--noise through a plan is drawn in memory: add --local")
        table = _read(job)
        index_name = table._meta.index.name
    else:
        with job.progress.stage(f"reading {job.src}"):
            table = io.read_table(job.src, job.in_fmt, dtypes=job.dtypes, dialect=job.dialect)
        check_columns(table, job.qis, "--qi", job.src)
        check_columns(table, job.sensitive, "--sensitive", job.src)
        refuse_unread_dates(table, job.qis, job.dtypes, job.src)
        index_name = table.index.name
    if job.plan is None and not job.args.save_plan:
        check_options(table.columns, job.qis, job.args.k, index_name=index_name,
                      **job.options(ANONYMIZE))
    return table


def _anonymize_local(job: Job, df) -> Outcome:
    from ..io import files as io

    # A column name the table does not use, for the engine's class ids.
    class_col = "__dmondrian_class"
    while class_col in df.columns:
        class_col += "_"
    with job.progress.stage(f"anonymizing {len(df):,} rows (k={job.args.k})"):
        if job.plan is not None or job.args.save_plan:
            released = _release_with_plan(job, df, class_col)
        else:
            released = _engines.local_anonymize()(df, job.qis, job.args.k, class_column=class_col,
                                                  **job.options(ANONYMIZE))
    released = released.drop(columns=[class_col])
    # The file's rows in a random order (dmondrian.release.row_order); the frame kept
    # for the report stays aligned with the input.
    written = shuffle_rows(released, row_order_seed(job.args.random_state))
    io.write_table(written, job.target, job.out_fmt,
                   progress=job.progress.bar(f"writing {job.dst}"))
    return Outcome.of(release_report(job, released, df), len(df))


def _release_with_plan(job: Job, df, class_col):
    """The release through ``--plan``, or through the plan fitted on ``df`` (``--save-plan``,
    written once the release is made; its release is the plain one)."""
    from ..plans import fit_plan, plan_sha256, save_plan

    options = job.options(ANONYMIZE)
    noise, seed = options.pop("noise"), options.pop("random_state")
    bounds = {name: options.pop(name) for name in ("max_contributions", "max_classes")}
    if job.plan is not None:
        plan = job.plan
        job.plan_sha256 = plan_sha256(job.args.plan)
    else:
        plan = fit_plan(df, job.qis, job.args.k, batch_rows=job.args.batch_rows, **options)
    plan.options["class_column"] = class_col
    try:
        released = plan.transform(df, noise=noise, random_state=seed, **bounds)
    finally:
        plan.options["class_column"] = None
    if job.plan is None:
        job.plan_sha256 = save_plan(plan, job.args.save_plan)
    return released


def _anonymize_on_dask(job: Job, ddf) -> Outcome:
    if job.plan is not None or job.args.save_plan:
        rep = release_plan_on_dask(job, release_report, ddf)
        return Outcome.of(rep, rep.n_records)  # a plan releases every row it reads
    rep, input_rows = anonymize_on_dask(job, release_report, ddf)
    return Outcome.of(rep, input_rows)


# -- the manifest and the last words -----------------------------------------------------


def _parameters(job: Job) -> dict:
    """The manifest's parameters: what was asked, as the option table names it."""
    args = job.args
    return {"k": args.k, "quasi_identifiers": job.qis,
            "sensitive": job.sensitive[0] if job.sensitive else None, "l": args.l,
            "l_kind": args.l_kind, "c": args.c, "t": args.t, "mode": args.mode,
            "objective": args.objective, "refine": args.refine, "refine_rows": args.refine_rows,
            "generalization": args.generalization, "max_depth": args.max_depth,
            "hierarchies": job.hierarchy_files, "dtypes": job.dtypes,
            "suppression": args.suppression, "suppressed": args.suppressed,
            "noise": dict(args.noise) if args.noise else None, "seed": args.random_state,
            "identifiers": split_names(args.identifiers),
            "allow_unique": split_names(args.allow_unique), "entity": args.entity,
            "max_contributions": args.max_contributions, "max_classes": args.max_classes}


def release_report(job: Job, released, original, measured=None):
    """The report of a release (pandas, or dask read back from the output) for the
    manifest: achieved k, l and t, class sizes, information loss, risk, suppressed rows.

    Parameters
    ----------
    job : Job
        The run.
    released, original : pandas or dask DataFrame
        The release and the input it was made from.
    measured : tuple, optional
        ``(counts, domains, input_rows, identifying)``: the release's counts, merged
        from the tasks that wrote it (:class:`dmondrian.metrics.accumulator.ReleaseCounts`),
        the input's QI domains, its rows and the identifying columns the writer found.
        The report is then built from them (:func:`dmondrian.evaluation.reporting.counted_report`);
        ``released`` is not read, ``original`` only for its column types.

    Returns
    -------
    dmondrian.evaluation.reporting.Report
    """
    from ..io.csv_tables import column_types

    job.column_types = column_types(original, [*job.qis, *job.sensitive])
    noise = dict(job.args.noise) if job.args.noise else None
    if measured is not None:
        from ..evaluation.reporting import counted_report

        counts, domains, input_rows, identifying = measured
        meta = original._meta[counts.sensitive] if counts.sensitive is not None else None
        return counted_report(counts, job.qis, domains, input_rows, k=job.args.k,
                              sensitive_meta=meta, identifying_columns=identifying, noise=noise)
    report, _ = metrics_api()
    return report(released, job.qis, original=original,
                  sensitive=job.sensitive[0] if job.sensitive else None, k=job.args.k,
                  hierarchies=job.hierarchies or None, noise=noise,
                  allow_unique=split_names(job.args.allow_unique),
                  entity=_released_entities(job, released, original))


def _released_entities(job: Job, released, original):
    """The entity of each released row (the release itself no longer holds it); None on
    Dask, whose release read back from the files is shuffled and has no index to align."""
    from ..metrics import is_dask

    if job.args.entity is None or is_dask(released):
        return None
    values = original[job.args.entity]
    # The local engine keeps the input's rows in order, less suppressed="drop"'s.
    return values.to_numpy() if len(values) == len(released) else \
        values.loc[released.index].to_numpy()


def _stage_manifest(job: Job, engine: str, outcome: Outcome, stage) -> None:
    """Stage ``OUTPUT.manifest.json`` (parameters, report, the staged files' hashes), to
    be published beside the release by ``stage.commit()``."""
    from ..io.staging import stage_written_manifest

    extra = {"command": "dmondrian anonymize", "input": job.src, "input_format": job.in_fmt,
             "output_format": job.out_fmt, "engine": engine, "classes": outcome.classes,
             "min_class_size": outcome.min_class_size, "seconds": outcome.seconds,
             "row_order": row_order_record(job.args.random_state)}
    if job.plan_sha256 is not None:
        extra["plan"] = {"path": job.args.plan or job.args.save_plan, "sha256": job.plan_sha256,
                         "use": "applied" if job.args.plan else "fitted and saved"}
    stage_written_manifest(stage, dict(
        parameters=_parameters(job), input_rows=outcome.input_rows, output_rows=outcome.rows,
        report=outcome.report, extra=extra, risks={"identifying_columns": job.identifying},
        column_types=job.column_types))


def _print_done(job: Job, engine: str, outcome: Outcome) -> None:
    from ..io import files as io

    print(f"wrote {job.dst} ({outcome.rows:,} rows, {outcome.classes:,} classes, smallest "
          f"{outcome.min_class_size:,}, k={job.args.k}, {engine} engine, {outcome.seconds:.1f}s)")
    print(f"manifest {io.manifest_path(job.dst)}")
