"""Reading the commands' inputs: tables, their columns, hierarchy files."""

from __future__ import annotations

from ._common import UsageError
from ._types import pairs


def dtypes_of(args) -> dict[str, str]:
    """The ``--dtype`` conversions, ``{column: type}``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    dict
    """
    return pairs(args.dtype, "--dtype", "TYPE")


def dialect_of(args):
    """The :class:`~dmondrian.io.csv_tables.CsvDialect` of the parsed --sep, --decimal and
    --encoding."""
    from ..io.csv_tables import CsvDialect

    sep = args.sep
    if sep is not None:
        # A shell makes typing a tab awkward: "\t" stands for one.
        sep = {"\\t": "\t", "tab": "\t"}.get(sep, sep)
        if len(sep) != 1:
            raise UsageError(f"--sep must be one character, got {args.sep!r}")
    if len(args.decimal) != 1:
        raise UsageError(f"--decimal must be one character, got {args.decimal!r}")
    import codecs

    try:
        codecs.lookup(args.encoding)
    except LookupError:
        raise UsageError(f"--encoding {args.encoding!r} is not a known encoding") from None
    return CsvDialect(sep, args.decimal, args.encoding)


def read(url: str | None, args, *, role: str = "input", dtypes: dict | None = None):
    """Read the table at ``url`` with the command's --format, --dtype and CSV dialect.

    Parameters
    ----------
    url : str or None
        Path or fsspec URL; None is a usage error naming ``role``.
    args : argparse.Namespace
        The parsed command line (``format``, ``dtype``).
    role : str
        What the table is, for the error when it is missing.
    dtypes : dict, optional
        The conversions to apply, ``{column: type}``; default: ``--dtype``'s.

    Returns
    -------
    pandas.DataFrame
    """
    from ..io import files as io

    if url is None:
        raise UsageError(f"missing {role}")
    return io.read_table(url, args.format, dtypes=dtypes_of(args) if dtypes is None else dtypes,
                         dialect=dialect_of(args))


def read_release(url: str, args, qis: list[str], sensitive: list[str]):
    """Read a release for ``report`` and ``verify``, refusing one without the QIs or the
    sensitive column: ``--dtype`` converts its other columns, never its QIs, which hold
    published values (``[2017-01-02, 2017-03-05]``), not the original's.

    Parameters
    ----------
    url : str
        The release, a path or fsspec URL.
    args : argparse.Namespace
        The parsed command line.
    qis, sensitive : list of str
        The release's quasi-identifiers, and its sensitive column (or none).

    Returns
    -------
    pandas.DataFrame
    """
    dtypes = {c: t for c, t in dtypes_of(args).items() if c not in set(qis)}
    table = read(url, args, dtypes=dtypes)
    check_columns(table, qis, "--qi", url)
    check_columns(table, sensitive, "--sensitive", url)
    return table


def read_original(url: str, args, release: str, columns: list[str]):
    """Read the original of a release with the types its manifest records
    (``column_types``, :mod:`dmondrian.evaluation.manifest`), overridden by ``--dtype``.

    The loss ``report`` computes then compares the release with the table it was made from, as the
    manifest's report did: a date read as a date, not as text.

    Parameters
    ----------
    url : str
        The original table.
    args : argparse.Namespace
        The parsed command line.
    release : str
        The release, whose manifest (``RELEASE.manifest.json``) is looked for.
    columns : list of str
        The columns the report reads (QIs, sensitive): the recorded types used.

    Returns
    -------
    pandas.DataFrame
    """
    import json

    import fsspec

    from ..io import files as io

    recorded = {}
    path = io.manifest_path(release)
    if exists(path):
        with fsspec.open(path, "rt", encoding="utf-8") as fh:
            try:
                recorded = json.load(fh).get("column_types") or {}
            except (json.JSONDecodeError, AttributeError):
                recorded = {}
    dtypes = {**{c: t for c, t in recorded.items() if c in set(columns)}, **dtypes_of(args)}
    return read(url, args, role="original", dtypes=dtypes)


def check_columns(df, names: list[str], flag: str, url: str) -> None:
    """Refuse a column the table lacks, naming the flag and listing the table's columns.

    Parameters
    ----------
    df : pandas or dask DataFrame
        The table read.
    names : list of str
        The columns the flag named.
    flag : str
        The flag, for the message.
    url : str
        Where the table was read, for the message.
    """
    from ..errors import MissingColumnError

    for name in names:
        if name not in df.columns:
            cols = ", ".join(map(str, list(df.columns)[:10]))
            raise MissingColumnError(name, f"{flag} column {name!r} is not in {url} "
                                           f"(columns: {cols})")


#: Leading values of a text QI looked at for dates it was not read as.
DATE_PROBE_ROWS = 1000


def refuse_unread_dates(df, qis: list[str], dtypes: dict, url: str) -> None:
    """Refuse a text QI whose first values are all dates: some value further on is not
    one (or is written in a layout the reader does not infer), so it was read as text
    and each class would publish the set of its exact dates.

    ``--dtype COL=datetime`` reads it as dates (naming a value that is not one), ``--dtype COL=str``
    keeps it as text on purpose; a column either names is not looked at.

    Parameters
    ----------
    df : pandas or dask DataFrame
        The input, read.
    qis : list of str
        The quasi-identifiers.
    dtypes : dict
        ``--dtype``'s conversions.
    url : str
        Where the table was read, for the message.

    Raises
    ------
    ColumnError
        Naming the column, a value that is not a date, and both fixes.
    """
    import pandas as pd

    from ..errors import ColumnError

    for q in qis:
        dtype = df[q].dtype
        if q in dtypes or isinstance(dtype, pd.CategoricalDtype) or not (
                pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype)):
            continue
        head = df[q].head(DATE_PROBE_ROWS)
        head = head[head.notna()]
        if not len(head) or not all(isinstance(v, str) for v in head):
            continue
        parsed = pd.to_datetime(head, format="ISO8601", errors="coerce")
        if not parsed.notna().all():
            continue
        example = ""
        if isinstance(df, pd.DataFrame):  # (on Dask, finding one would read the table)
            whole = pd.to_datetime(df[q], format="ISO8601", errors="coerce")
            bad = df[q][whole.isna() & df[q].notna()].head(1)
            example = f" (e.g. {bad.iloc[0]!r})" if len(bad) else ""
        raise ColumnError(q, f"quasi-identifier {q!r} in {url} holds dates in its first rows "
                             f"but was read as text, so each class would publish the set of "
                             f"its exact dates: some of its values are not ISO dates{example}, "
                             f"or are written in a layout the reader does not infer. Pass "
                             f"--dtype {q}=datetime to read it as dates (a value that is not "
                             f"one is named), or --dtype {q}=str to publish it as text")


def exists(url: str) -> bool:
    """Whether the path or fsspec URL exists.

    Parameters
    ----------
    url : str

    Returns
    -------
    bool
    """
    from ..io import files as io

    fs, path = io._fs(url)
    return fs.exists(path)


def load_hierarchies(args) -> tuple[dict, dict]:
    """Read ``--hierarchy COL=FILE`` flags.

    Parameters
    ----------
    args : list of str or None
        The flags' values.

    Returns
    -------
    hierarchies : dict
        ``{column: Hierarchy}``.
    files : dict
        ``{column: FILE}``, as given (for the manifest).
    """
    from ..io import files as io
    from ..kinds.hierarchy import Hierarchy

    files = pairs(args, "--hierarchy", "FILE")
    loaded = {}
    for col, path in files.items():
        if not exists(path):
            raise io.InputNotFoundError(path, f"--hierarchy {col}={path}: file {path!r} does "
                                              "not exist")
        loaded[col] = Hierarchy.from_lines(io.read_lines(path, "hierarchy file"), name=col)
    return loaded, files


def metrics_api():
    """``(report, verify)``, the functions the commands measure a release with.

    Returns
    -------
    tuple of callable
    """
    from dmondrian import report, verify

    return report, verify
