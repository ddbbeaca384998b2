"""The ``dmondrian`` command line: anonymize, report, verify, sweep, plot, demo.

Every failure is one line on stderr, ``dmondrian: error: ...``, and a non-zero
exit status: 2 for a usage or input error (bad flag, missing file, unknown
column, k larger than the table, ...), 1 for a table that fails ``verify`` or
an unexpected internal error. ``--debug`` (anywhere on the line) adds the
traceback.

The heavy imports (pandas, the engines, matplotlib, dask) happen inside the
commands so that ``dmondrian --help`` answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback

__all__ = ["main", "build_parser", "UsageError"]

PROG = "dmondrian"

#: Inputs up to this size run on the in-memory engine unless told otherwise.
DEFAULT_LOCAL_LIMIT = "1GB"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A command line that cannot be run as given (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, raised instead of printed."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


_FORMATTER = argparse.RawDescriptionHelpFormatter


# -- argument types --------------------------------------------------------------------


def _int_at_least(name, minimum):
    """An argparse type: an integer >= ``minimum``, with a message naming the option."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {value}")
        return value

    parse.__name__ = name
    return parse


def _positive_int(name):
    return _int_at_least(name, 1)


def _nonnegative_int(name):
    return _int_at_least(name, 0)


def _fraction(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(f"{name} must be between 0 and 1, got {value}")
        return value

    parse.__name__ = name
    return parse


def _k_list(text):
    ks = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        ks.append(_positive_int("k")(part))
    if not ks:
        raise argparse.ArgumentTypeError("--k needs at least one value, e.g. --k 2,5,10")
    return ks


def _byte_size(text):
    from dask.utils import parse_bytes

    try:
        return int(parse_bytes(text))
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (use e.g. 512MB or 2GB)") from None


def _split_names(values) -> list[str]:
    """Flatten repeated, comma-separated column lists (``--qi a,b --qi c``)."""
    names = []
    for value in values or []:
        names.extend(n.strip() for n in value.split(",") if n.strip())
    return names


def _pairs(values, flag: str, what: str) -> dict[str, str]:
    """Parse repeated ``col=VALUE`` flags into a dict."""
    out: dict[str, str] = {}
    for value in values or []:
        for item in value.split(",") if flag == "--dtype" else [value]:
            col, sep, rhs = item.partition("=")
            col, rhs = col.strip(), rhs.strip()
            if not sep or not col or not rhs:
                raise UsageError(f"bad {flag} {item!r}: expected COLUMN={what}")
            if col in out:
                raise UsageError(f"{flag} names column {col!r} twice")
            out[col] = rhs
    return out


# -- parser ----------------------------------------------------------------------------


def _add_common(p, *, qi_required=True):
    p.add_argument("--qi", "--qi-names", dest="qi", action="append", metavar="COLS",
                   required=qi_required,
                   help="quasi-identifier columns, comma-separated (repeatable)")
    p.add_argument("--format", choices=("csv", "parquet"),
                   help="table format when the extension does not tell (input and output)")
    p.add_argument("--dtype", action="append", metavar="COL=TYPE",
                   help="convert a column after reading: str, int, float, category or "
                        "datetime (e.g. --dtype zip=str,birth_date=datetime)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the traceback of an error")


def build_parser() -> argparse.ArgumentParser:
    """The ``dmondrian`` argument parser (all sub-commands)."""
    from .. import __version__

    parser = _Parser(
        prog=PROG, formatter_class=_FORMATTER,
        description="k-anonymize tables with the Mondrian multidimensional algorithm.",
        epilog="examples:\n"
               "  dmondrian demo\n"
               "  dmondrian anonymize people.csv released.parquet --k 10 --qi age,zip,sex\n"
               "  dmondrian verify released.parquet --qi age,zip,sex --k 10\n\n"
               "Run 'dmondrian COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    # anonymize ---------------------------------------------------------------------------
    p = sub.add_parser(
        "anonymize", help="k-anonymize a CSV or Parquet table", formatter_class=_FORMATTER,
        description="k-anonymize a table and write it with its release manifest\n"
                    "(OUTPUT.manifest.json). Small inputs run in memory; large ones, or\n"
                    "--distributed, on Dask. The output appears only once complete.",
        epilog="examples:\n"
               "  dmondrian anonymize people.csv released.csv --k 10 --qi age,zip,sex\n"
               "  dmondrian anonymize s3://bucket/people/ s3://bucket/released/ --k 50 \\\n"
               "      --qi age,zip --scheduler tcp://10.0.0.5:8786\n"
               "  dmondrian anonymize --input people.csv --output out.csv --qi-names age,zip "
               "--k 5 --max-depth 8")
    p.add_argument("input", nargs="?", metavar="INPUT", help="CSV/Parquet file, Parquet "
                   "directory or fsspec URL")
    p.add_argument("output", nargs="?", metavar="OUTPUT", help="output file or directory (URL)")
    p.add_argument("--input", dest="input_flag", metavar="INPUT", help="same as INPUT")
    p.add_argument("--output", dest="output_flag", metavar="OUTPUT", help="same as OUTPUT")
    p.add_argument("-k", "--k", type=_positive_int("k"), required=True,
                   help="minimum equivalence-class size")
    _add_common(p)
    p.add_argument("--sensitive", metavar="COL",
                   help="sensitive column, for --l / --t and the manifest's report")
    p.add_argument("--l", type=_positive_int("l"), metavar="N",
                   help="l-diversity: every class holds N distinct --sensitive values")
    p.add_argument("--t", type=_fraction("t"), metavar="T",
                   help="t-closeness: every class's --sensitive distribution within T of the "
                        "table's")
    p.add_argument("--mode", choices=("strict", "relaxed"), default="strict",
                   help="strict keeps equal values together; relaxed splits median ties")
    p.add_argument("--generalization", choices=("range", "midpoint", "mean"), default="range",
                   help="how numeric QIs are published (default: range labels)")
    p.add_argument("--hierarchy", action="append", metavar="COL=FILE",
                   help="generalization hierarchy for a nominal QI, lines 'leaf;parent;...;*' "
                        "(repeatable)")
    p.add_argument("--max-depth", type=_nonnegative_int("--max-depth"), metavar="N",
                   help="stop cutting after N levels")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    p.add_argument("--output-format", choices=("csv", "parquet"),
                   help="output format, if it differs from --format")
    engine = p.add_argument_group("engine")
    engine.add_argument("--distributed", action="store_true",
                        help="use the Dask engine whatever the input size")
    engine.add_argument("--local", action="store_true",
                        help="use the in-memory engine whatever the input size")
    engine.add_argument("--local-limit", type=_byte_size, default=DEFAULT_LOCAL_LIMIT,
                        metavar="SIZE", help=f"inputs larger than this use Dask "
                                             f"(default {DEFAULT_LOCAL_LIMIT})")
    engine.add_argument("--scheduler", metavar="ADDRESS",
                        help="Dask scheduler to connect to, e.g. tcp://host:8786")
    engine.add_argument("--workers", type=_positive_int("--workers"), metavar="N",
                        help="start a local Dask cluster with N workers")
    engine.add_argument("--memory-limit", type=_byte_size, metavar="SIZE",
                        help="memory limit per local worker, e.g. 2GB")
    engine.add_argument("--leaf-rows", type=_positive_int("--leaf-rows"), metavar="N",
                        help="Dask engine: regions up to N rows are finished in memory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_anonymize)

    # report ------------------------------------------------------------------------------
    p = sub.add_parser(
        "report", help="information loss and re-identification risk of a released table",
        formatter_class=_FORMATTER,
        description="Print the metrics and risk of a released table.",
        epilog="examples:\n"
               "  dmondrian report released.csv --qi age,zip,sex --sensitive income\n"
               "  dmondrian report released.parquet --qi age,zip --original people.parquet "
               "--json")
    p.add_argument("table", metavar="TABLE")
    _add_common(p)
    p.add_argument("--sensitive", metavar="COL", help="sensitive column (l-diversity, t-closeness)")
    p.add_argument("--original", metavar="ORIGINAL",
                   help="the table before anonymization (for information loss)")
    p.add_argument("-k", "--k", type=_positive_int("k"), help="the k the release was made for")
    p.add_argument("--hierarchy", action="append", metavar="COL=FILE",
                   help="hierarchy of a nominal QI, for its information loss (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")
    p.set_defaults(handler=cmd_report)

    # verify ------------------------------------------------------------------------------
    p = sub.add_parser(
        "verify", help="check that a table is k-anonymous (and l-diverse)",
        formatter_class=_FORMATTER,
        description="Exit 0 when the table is k-anonymous (and l-diverse), 1 listing the "
                    "violations when it is not.",
        epilog="examples:\n"
               "  dmondrian verify released.csv --qi age,zip,sex --k 10\n"
               "  dmondrian verify released.parquet --qi age,zip --k 5 --l 2 "
               "--sensitive diagnosis")
    p.add_argument("table", metavar="TABLE")
    p.add_argument("-k", "--k", type=_positive_int("k"), required=True)
    _add_common(p)
    p.add_argument("--l", type=_positive_int("l"), help="distinct sensitive values per class")
    p.add_argument("--t", type=_fraction("t"), help="t-closeness: largest distance allowed "
                                                    "between a class's and the table's sensitive "
                                                    "distribution")
    p.add_argument("--sensitive", metavar="COL", help="sensitive column for --l / --t")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")
    p.set_defaults(handler=cmd_verify)

    # sweep -------------------------------------------------------------------------------
    p = sub.add_parser(
        "sweep", help="information loss as k grows", formatter_class=_FORMATTER,
        description="Anonymize INPUT at several k and print k, classes, NCP and "
                    "discernibility.",
        epilog="example:\n"
               "  dmondrian sweep people.csv --qi age,zip,sex --k 2,5,10,50,100 "
               "--plot sweep.png")
    p.add_argument("input", metavar="INPUT")
    p.add_argument("-k", "--k", type=_k_list, default=[2, 5, 10, 50, 100], metavar="K,K,...")
    _add_common(p)
    p.add_argument("--mode", choices=("strict", "relaxed"), default="strict")
    p.add_argument("--hierarchy", action="append", metavar="COL=FILE")
    p.add_argument("--plot", metavar="PNG", help="also draw the curve to this PNG")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")
    p.set_defaults(handler=cmd_sweep)

    # plot --------------------------------------------------------------------------------
    p = sub.add_parser(
        "plot", help="class-size histogram or 2-QI partition painting to PNG",
        formatter_class=_FORMATTER,
        description="Draw a released table: the histogram of equivalence-class sizes, or "
                    "the painting of its classes over two quasi-identifiers.",
        epilog="examples:\n"
               "  dmondrian plot histogram released.csv --qi age,zip,sex -o sizes.png\n"
               "  dmondrian plot painting released.csv --qi age,zip --original people.csv "
               "-o painting.png")
    p.add_argument("kind", choices=("histogram", "painting"), metavar="KIND",
                   help="histogram or painting")
    p.add_argument("table", metavar="TABLE")
    _add_common(p)
    p.add_argument("-o", "--output", required=True, metavar="PNG")
    p.add_argument("--k", type=_positive_int("k"), help="mark k on the histogram")
    p.add_argument("--original", metavar="ORIGINAL",
                   help="painting: the original table (row-aligned), drawn under the classes")
    p.add_argument("--overwrite", action="store_true", help="replace an existing PNG")
    p.set_defaults(handler=cmd_plot)

    # demo --------------------------------------------------------------------------------
    p = sub.add_parser(
        "demo", help="anonymize a generated census table end to end",
        formatter_class=_FORMATTER,
        description="Generate a census-like table, anonymize it (on an embedded Dask\n"
                    "LocalCluster when the Dask engine is installed), verify it and print\n"
                    "the report.",
        epilog="examples:\n  dmondrian demo\n  dmondrian demo --rows 100000 --k 25 "
               "--output released.parquet")
    p.add_argument("--rows", type=_positive_int("--rows"), default=20_000)
    p.add_argument("-k", "--k", type=_positive_int("k"), default=10)
    p.add_argument("--seed", type=_nonnegative_int("--seed"), default=0)
    p.add_argument("--output", metavar="OUTPUT", help="also write the released table here")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--local", action="store_true",
                   help="use the in-memory engine even when the Dask engine is installed")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_demo)
    return parser


# -- small helpers -----------------------------------------------------------------------


class _Progress:
    """Stage messages and a write bar on stderr, only when it is a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self._t0 = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, text: str):
        start = time.perf_counter()
        if self.enabled:
            sys.stderr.write(f"{text} ...")
            sys.stderr.flush()
        yield
        if self.enabled:
            sys.stderr.write(f"\r{text} done ({time.perf_counter() - start:.1f}s)\033[K\n")

    def bar(self, label: str):
        def update(done: int, total: int):
            if not self.enabled:
                return
            frac = 1.0 if total == 0 else done / total
            filled = int(30 * frac)
            sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] "
                             f"{frac:4.0%} {done:,}/{total:,} rows\033[K")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return update


def _read(url: str, args, *, role: str = "input"):
    from .. import io

    if url is None:
        raise UsageError(f"missing {role}")
    dtypes = _pairs(args.dtype, "--dtype", "TYPE")
    return io.read_table(url, args.format, dtypes=dtypes)


def _check_columns(df, names: list[str], flag: str, url: str):
    from ..errors import MissingColumnError

    for name in names:
        if name not in df.columns:
            cols = ", ".join(map(str, list(df.columns)[:10]))
            raise MissingColumnError(name, f"{flag} column {name!r} is not in {url} "
                                           f"(columns: {cols})")


def _load_hierarchies(specs) -> tuple[dict, dict]:
    """``--hierarchy col=FILE`` flags -> ({col: Hierarchy}, {col: FILE})."""
    from .. import io
    from ..hierarchy import Hierarchy

    files = _pairs(specs, "--hierarchy", "FILE")
    loaded = {}
    for col, path in files.items():
        if not _exists(path):
            raise io.InputNotFoundError(path, f"--hierarchy {col}={path}: file {path!r} does "
                                              "not exist")
        loaded[col] = Hierarchy.from_lines(io.read_lines(path, "hierarchy file"), name=col)
    return loaded, files


def _class_sizes(class_ids):
    import numpy as np

    return np.bincount(np.asarray(class_ids, dtype=np.int64))


def _free_column(df, base: str = "__dmondrian_class") -> str:
    name = base
    while name in df.columns:
        name += "_"
    return name


# -- anonymize ---------------------------------------------------------------------------


def _resolve_io(args) -> tuple[str, str]:
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


def _choose_engine(args, src: str) -> str:
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
    from .. import io

    size = io.input_size(src) if _exists(src) else 0
    if size <= args.local_limit:
        return "local"
    try:
        import dmondrian.distributed  # noqa: F401
    except ModuleNotFoundError:
        return "local"  # no Dask engine yet: in memory is the only way
    return "distributed"


def _exists(url: str) -> bool:
    from .. import io

    fs, path = io._fs(url)
    return fs.exists(path)


def _parameters(args, qis, sensitive, hierarchy_files) -> dict:
    return {
        "k": args.k, "quasi_identifiers": qis, "sensitive": sensitive[0] if sensitive else None,
        "l": args.l, "t": args.t, "mode": args.mode,
        "generalization": args.generalization, "max_depth": args.max_depth,
        "hierarchies": hierarchy_files, "dtypes": _pairs(args.dtype, "--dtype", "TYPE"),
    }


def cmd_anonymize(args) -> int:
    """``dmondrian anonymize``: read, anonymize, write atomically with a manifest."""
    src, dst = _resolve_io(args)
    qis = _split_names(args.qi)
    sensitive = _split_names([args.sensitive] if args.sensitive else [])
    if (args.l is not None or args.t is not None) and not sensitive:
        flag = "--l" if args.l is not None else "--t"
        raise UsageError(f"{flag} needs --sensitive COLUMN (the attribute it protects)")
    from .. import io

    in_fmt = io.detect_format(src, args.format)
    out_fmt = io.detect_format(dst, args.output_format or args.format)
    hierarchies, hierarchy_files = _load_hierarchies(args.hierarchy)
    engine = _choose_engine(args, src)
    progress = _Progress(not args.no_progress)
    started = time.perf_counter()
    if engine == "local":
        summary = _anonymize_local(args, src, dst, in_fmt, out_fmt, qis, sensitive,
                                   hierarchies, progress)
    else:
        summary = _anonymize_distributed(args, src, dst, in_fmt, out_fmt, qis, sensitive,
                                         hierarchies, progress)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    report_args = summary.pop("_report", None)
    extra = {"command": "dmondrian anonymize", "input": src, "input_format": in_fmt,
             "output_format": out_fmt, "engine": engine, "classes": summary["classes"],
             "min_class_size": summary["min_class_size"], "seconds": summary["seconds"]}
    _write_manifest(dst, _parameters(args, qis, sensitive, hierarchy_files), summary, extra,
                    report_args)
    print(f"wrote {dst} ({summary['rows']:,} rows, {summary['classes']:,} classes, smallest "
          f"{summary['min_class_size']:,}, k={args.k}, {engine} engine, "
          f"{summary['seconds']:.1f}s)")
    print(f"manifest {io.manifest_path(dst)}")
    return EXIT_OK


def _anonymize_local(args, src, dst, in_fmt, out_fmt, qis, sensitive, hierarchies,
                     progress) -> dict:
    from .. import io
    from ..local import anonymize

    with progress.stage(f"reading {src}"):
        df = io.read_table(src, in_fmt, dtypes=_pairs(args.dtype, "--dtype", "TYPE"))
    _check_columns(df, qis, "--qi", src)
    _check_columns(df, sensitive, "--sensitive", src)
    class_col = _free_column(df)
    with progress.stage(f"anonymizing {len(df):,} rows (k={args.k})"):
        released = anonymize(df, qis, args.k, mode=args.mode,
                             generalization=args.generalization, max_depth=args.max_depth,
                             hierarchies=hierarchies or None, class_column=class_col,
                             **_diversity(args))
    sizes = _class_sizes(released.pop(class_col))
    io.write_table(released, dst, out_fmt, overwrite=args.overwrite,
                   progress=progress.bar(f"writing {dst}"))
    summary = {"rows": len(released), "input_rows": len(df),
               "classes": len(sizes), "min_class_size": int(sizes.min())}
    summary["_report"] = (released, qis, df, sensitive, args.k, hierarchies)
    return summary


@contextlib.contextmanager
def _dask_client(args):
    """A client on ``--scheduler``, or on a LocalCluster sized by --workers/--memory-limit."""
    from distributed import Client, LocalCluster

    if args.scheduler:
        try:
            client = Client(args.scheduler, timeout="10s")
        except OSError as exc:
            raise UsageError(f"cannot connect to the Dask scheduler at {args.scheduler}: "
                             f"{' '.join(str(exc).split())}") from exc
        with client:
            yield client
        return
    import logging

    kwargs = {"n_workers": args.workers or 2, "threads_per_worker": 1, "processes": True,
              "dashboard_address": None, "silence_logs": logging.ERROR}
    if args.memory_limit:
        kwargs["memory_limit"] = args.memory_limit
    with LocalCluster(**kwargs) as cluster, Client(cluster) as client:
        yield client


def _diversity(args) -> dict:
    """The engine keywords for --l / --t (none when neither is given)."""
    if args.l is None and args.t is None:
        return {}
    return {"l": args.l, "t": args.t, "sensitive": args.sensitive}


def _dask_dtypes(ddf, dtypes: dict):
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


def _anonymize_distributed(args, src, dst, in_fmt, out_fmt, qis, sensitive, hierarchies,
                           progress) -> dict:
    import dask.dataframe as dd

    from .. import distributed as dist
    from .. import io

    io._check_exists(src)
    dtypes = _pairs(args.dtype, "--dtype", "TYPE")
    str_cols = [c for c, t in dtypes.items() if t in ("str", "string")]
    options = {"leaf_rows": args.leaf_rows, "mode": args.mode,
               "generalization": args.generalization, "max_depth": args.max_depth,
               "hierarchies": hierarchies or None, "progress": progress.enabled,
               **_diversity(args)}
    import inspect

    if _diversity(args) and "l" not in inspect.signature(dist.anonymize).parameters:
        raise UsageError("--l / --t are not supported by the Dask engine yet: use --local")
    with _dask_client(args) as client:
        ddf = (dd.read_parquet(src) if in_fmt == "parquet"
               else dd.read_csv(src, dtype=dict.fromkeys(str_cols, "str")))
        _check_columns(ddf, [*qis, *sensitive, *dtypes], "--qi/--sensitive/--dtype", src)
        ddf = _dask_dtypes(ddf, dtypes)
        # On Dask a Parquet output is a dataset directory (a file per partition),
        # a CSV output one file; either is written under a hidden temporary name
        # and renamed only when every task has finished.
        directory = out_fmt == "parquet"
        with io.atomic_output(dst, directory=directory, overwrite=args.overwrite) as (fs, tmp):
            target = fs.unstrip_protocol(tmp)
            if out_fmt == "parquet":
                dist.anonymize_to_parquet(ddf, target, qis, args.k, client=client,
                                          write_options={"write_index": False}, **options)
            else:
                dist.anonymize_to_csv(ddf, target, qis, args.k, client=client,
                                      write_options={"single_file": True, "index": False},
                                      **options)
        written = dd.read_parquet(dst) if out_fmt == "parquet" else dd.read_csv(dst)
        counts = written[qis].astype(str).groupby(qis, observed=True).size().compute()
    return {"rows": int(counts.sum()), "classes": len(counts),
            "min_class_size": int(counts.min())}


def _write_manifest(dst: str, parameters: dict, summary: dict, extra: dict,
                    report_args) -> None:
    """Write ``OUTPUT.manifest.json`` (parameters, report, file hashes) beside the output."""
    import tempfile

    from .. import io
    from ..manifest import write_manifest

    rep = None
    if report_args is not None:
        report, _ = _metrics_api()
        released, qis, original, sensitive, k, hierarchies = report_args
        rep = report(released, qis, original=original,
                     sensitive=sensitive[0] if sensitive else None, k=k,
                     hierarchies=hierarchies or None)
    kwargs = {"output": dst, "parameters": parameters, "input_rows": summary.get("input_rows"),
              "output_rows": summary["rows"], "report": rep, "extra": extra}
    fs, _ = io._fs(dst)
    if io._is_local(fs):
        write_manifest(**kwargs)
        return
    # write_manifest writes local files: build it in a temporary folder, then
    # store it beside the remote output (atomically, as every output here).
    with tempfile.TemporaryDirectory() as folder:
        manifest = write_manifest(path=os.path.join(folder, "manifest.json"), **kwargs)
    io.write_json(manifest, io.manifest_path(dst))


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _metrics_api():
    """``(report, verify)`` from the metrics modules, with a one-line error if absent."""
    from dmondrian import report, verify

    return report, verify


# -- report / verify ---------------------------------------------------------------------


def cmd_report(args) -> int:
    """``dmondrian report``: metrics and risk of a released table."""
    qis = _split_names(args.qi)
    sensitive = [args.sensitive] if args.sensitive else []
    report, _ = _metrics_api()
    hierarchies, _ = _load_hierarchies(args.hierarchy)
    table = _read(args.table, args)
    _check_columns(table, qis, "--qi", args.table)
    _check_columns(table, sensitive, "--sensitive", args.table)
    original = None
    if args.original is not None:
        original = _read(args.original, args, role="original")
        _check_columns(original, qis, "--qi", args.original)
    rep = report(table, qis, original=original, sensitive=args.sensitive, k=args.k,
                 hierarchies=hierarchies or None)
    if args.json:
        print(json.dumps(rep.to_dict(), indent=2, default=str))
    else:
        print(repr(rep))
    return EXIT_OK


def cmd_verify(args) -> int:
    """``dmondrian verify``: exit 0 if the table holds, 1 listing the violations."""
    qis = _split_names(args.qi)
    sensitive = [args.sensitive] if args.sensitive else []
    if (args.l is not None or args.t is not None) and not sensitive:
        flag = "--l" if args.l is not None else "--t"
        raise UsageError(f"{flag} needs --sensitive COLUMN (the attribute it protects)")
    _, verify = _metrics_api()
    table = _read(args.table, args)
    _check_columns(table, qis, "--qi", args.table)
    _check_columns(table, sensitive, "--sensitive", args.table)
    result = verify(table, qis, k=args.k, sensitive=args.sensitive, l=args.l, t=args.t)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(repr(result))
    return EXIT_OK if result.ok else EXIT_FAILED


# -- sweep / plot --------------------------------------------------------------------------


def cmd_sweep(args) -> int:
    """``dmondrian sweep``: the information-loss curve over k."""
    qis = _split_names(args.qi)
    if args.plot and not args.plot.lower().endswith(".png"):
        raise UsageError(f"--plot {args.plot!r} must end in .png")
    os.environ.setdefault("MPLBACKEND", "Agg")
    from .. import plot
    df = _read(args.input, args)
    _check_columns(df, qis, "--qi", args.input)
    hierarchies, _ = _load_hierarchies(args.hierarchy)
    ks = sorted(set(args.k))
    if ks[-1] > len(df):
        from ..errors import InfeasibleError

        raise InfeasibleError(f"--k {ks[-1]} is larger than the table's {len(df):,} rows")
    options = {"mode": args.mode, "hierarchies": hierarchies or None}
    table = plot.k_sweep_table(df, qis, ks, **options)
    if args.json:
        print(table.to_json(orient="records", indent=2))
    else:
        print(table.to_string(index=False, formatters={
            "ncp": "{:.4f}".format, "c_avg": "{:.3f}".format,
            "discernibility": "{:,}".format, "classes": "{:,}".format}))
    if args.plot:
        fig = _figure_of(plot.k_sweep(df, qis, ks, **options))
        _save_png(fig, args.plot, overwrite=True)
        print(f"plot {args.plot}")
    return EXIT_OK


def _figure_of(obj):
    """Plot helpers may return a Figure, an Axes or a (Figure, Axes) pair."""
    if isinstance(obj, tuple):
        obj = obj[0]
    if hasattr(obj, "savefig"):
        return obj
    return obj.get_figure()


def _save_png(fig, url: str, *, overwrite: bool) -> None:
    from .. import io

    if not url.lower().endswith(".png"):
        raise UsageError(f"plot output {url!r} must end in .png")
    with io.atomic_output(url, overwrite=overwrite) as (fs, tmp), fs.open(tmp, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120, bbox_inches="tight")


def cmd_plot(args) -> int:
    """``dmondrian plot``: class-size histogram or partition painting to PNG."""
    qis = _split_names(args.qi)
    if args.kind == "painting" and len(qis) != 2:
        raise UsageError(f"the painting shows two quasi-identifiers: --qi must name 2 "
                         f"columns, got {len(qis)}")
    if args.kind == "painting" and args.original is None:
        raise UsageError("the painting draws the original points under the classes: give "
                         "--original ORIGINAL (row-aligned with TABLE)")
    if not args.output.lower().endswith(".png"):
        raise UsageError(f"plot output {args.output!r} must end in .png")
    os.environ.setdefault("MPLBACKEND", "Agg")
    from .. import plot
    table = _read(args.table, args)
    _check_columns(table, qis, "--qi", args.table)
    if args.kind == "histogram":
        fig = _figure_of(plot.class_size_histogram(table, qis, k=args.k))
    else:
        original = _read(args.original, args, role="original")
        _check_columns(original, qis, "--qi", args.original)
        if len(original) != len(table):
            raise UsageError(f"--original has {len(original):,} rows and TABLE {len(table):,}: "
                             "the painting needs the release row-aligned with its original")
        fig = _figure_of(plot.partition_painting(original, table, qis))
    _save_png(fig, args.output, overwrite=args.overwrite)
    print(f"plot {args.output}")
    return EXIT_OK


# -- demo ------------------------------------------------------------------------------------


def _demo_engine(df, qis, k, local: bool):
    """The one place the demo chooses its engine.

    The Dask engine on an embedded LocalCluster (2 workers, the table in 4
    partitions and regions of at most a quarter of it, so the distributed cuts
    really run) when it is installed and not refused with ``--local``; the
    in-memory engine otherwise.
    """
    if local or not _has_module("dmondrian.distributed"):
        from ..local import anonymize

        return anonymize(df, qis, k), "local (in memory)"
    import logging

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from ..distributed import anonymize as dask_anonymize

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        ddf = dd.from_pandas(df, npartitions=4)
        released = dask_anonymize(ddf, qis, k, client=client, leaf_rows=max(k, len(df) // 4),
                                  progress=False).compute()
    # Rows come back grouped by region with their input index: restore the order.
    return released.sort_index(), "Dask (embedded LocalCluster, 2 workers)"


def cmd_demo(args) -> int:
    """``dmondrian demo``: generate, anonymize, verify and report a census-like table."""
    from .. import synthetic
    report, verify = _metrics_api()

    qis = list(synthetic.CENSUS_QUASI_IDENTIFIERS)
    print(f"generating a census-like table of {args.rows:,} rows (seed {args.seed})")
    df = synthetic.make_census(args.rows, seed=args.seed)
    if args.k > len(df):
        from ..errors import InfeasibleError

        raise InfeasibleError(f"--k {args.k} is larger than the {len(df):,} generated rows")
    print(f"anonymizing with k={args.k} over {', '.join(qis)}")
    started = time.perf_counter()
    released, engine = _demo_engine(df, qis, args.k, args.local)
    print(f"  {engine} engine, {time.perf_counter() - started:.2f}s")
    result = verify(released, qis, k=args.k)
    print(repr(result))
    if not result.ok:
        return EXIT_FAILED
    print(f"verified: every class has at least {args.k} rows\n")
    print(repr(report(released, qis, original=df, sensitive=synthetic.CENSUS_SENSITIVE,
                      k=args.k)))
    if args.output:
        from .. import io

        io.write_table(released, args.output, overwrite=args.overwrite)
        print(f"wrote {args.output}")
    return EXIT_OK


# -- entry point -----------------------------------------------------------------------------

_SEED_FLAGS = ("--input", "--output", "--qi-names", "--max-depth", "--k", "-k")


def _normalize_argv(argv: list[str]) -> list[str]:
    """Accept the seed's command line, which had no sub-command: ``--input X --output Y ...``."""
    first = next((a for a in argv if a != "--debug"), "")
    if first.split("=", 1)[0] in _SEED_FLAGS:
        return ["anonymize", *argv]
    return argv


def _take_extras(args, extras: list[str]) -> None:
    """Give positionals that argparse left over to anonymize's INPUT/OUTPUT.

    argparse fills optional positionals from the first run of positionals
    only, so ``anonymize IN --input X OUT`` would otherwise leave OUT
    unrecognized instead of reporting the real mistake (INPUT given twice).
    """
    rest = list(extras)
    if args.command == "anonymize":
        while rest and not rest[0].startswith("-"):
            if args.input is None:
                args.input = rest.pop(0)
            elif args.output is None:
                args.output = rest.pop(0)
            else:
                break
    if rest:
        raise UsageError(f"unrecognized arguments: {' '.join(rest)} "
                         f"(see '{PROG} {args.command} --help')")


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {' '.join(str(message).split())}\n")


def main(argv: list[str] | None = None) -> int:
    """Run the ``dmondrian`` command line and return its exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; ``sys.argv[1:]`` by default.

    Returns
    -------
    int
        0 on success, 1 when ``verify`` finds violations (or on an internal
        error), 2 on a usage or input error.

    Examples
    --------
    >>> main(["verify", "--k", "0", "t.csv", "--qi", "age"])
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    from ..errors import DMondrianError

    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(_normalize_argv(argv))
        _take_extras(args, extras)
        return args.handler(args)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `dmondrian report ... | head`
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    except (UsageError, DMondrianError) as exc:
        if debug:
            traceback.print_exc()
        _error(exc)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
               "traceback)")
        return EXIT_FAILED
