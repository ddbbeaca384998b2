"""Reading and writing tables for the command line: CSV or Parquet, any fsspec URL.

Every path here is an fsspec URL (a plain path, ``file://``, ``memory://``, ``s3://``, ...). Outputs
are written *atomically* (:func:`dmondrian.io.staging.atomic_output`, the staging every writer
shares): the data goes to a hidden staging folder beside the destination and is moved to the final
name only once complete, so a run that dies mid-write (killed, out of disk) never leaves a truncated
file under the name a user or a pipeline will read, and the next write to it clears what the dead
run left.

Errors are typed (all derive from :class:`dmondrian.errors.DMondrianError`)
and name the path, so the CLI can print them as one line.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from collections.abc import Callable, Iterator

import fsspec
import pandas as pd

from ..errors import IOFailure, OutputError
from ..options import FORMATS
from .csv_tables import TEXT_TYPES, CsvDialect, convert_dtypes, read_csv, uncompressed_name
from .staging import atomic_output, one_line

__all__ = ["InputNotFoundError", "ReadError", "UnknownFormatError", "detect_format", "input_size",
           "read_table", "read_lines", "write_table", "write_json", "manifest_path",
           "storage_options"]

_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
             ".parq": "parquet"}

class InputNotFoundError(IOFailure, FileNotFoundError):
    """The input path does not exist."""


class ReadError(IOFailure, ValueError):
    """The input exists but cannot be read as a table of its format."""


class UnknownFormatError(IOFailure, ValueError):
    """The format cannot be told from the path and was not given."""


def _fs(url: str):
    return fsspec.core.url_to_fs(url)


@contextlib.contextmanager
def storage_options(urls, options: dict | None) -> Iterator[None]:
    """Within the block, fsspec opens the filesystems of ``urls`` with ``options``.

    The options (an endpoint, credentials, a profile, ...) become fsspec's defaults for the
    protocols of ``urls`` (``fsspec.config.conf``), so every reader and writer here and in dask gets
    them, and the filesystems sent to Dask workers carry them. Local paths take none.

    Parameters
    ----------
    urls : iterable of str
        The URLs the options are for.
    options : dict or None
        fsspec storage options; None or empty changes nothing.
    """
    if not options:
        yield
        return
    from fsspec.config import conf

    protocols = {fsspec.core.split_protocol(str(url))[0] for url in urls if url is not None}
    protocols -= {None, "file", "local"}
    saved = {p: conf.get(p) for p in protocols}
    try:
        for p in protocols:
            conf[p] = {**(conf.get(p) or {}), **options}
        yield
    finally:
        for p, before in saved.items():
            if before is None:
                conf.pop(p, None)
            else:
                conf[p] = before


def detect_format(url: str, format: str | None = None) -> str:
    """The table format of ``url``: ``format`` if given, else from its extension.

    A path without a known extension that is an existing directory is a Parquet
    dataset; a path ending in ``/`` is too.

    Parameters
    ----------
    url : str
        Path or fsspec URL.
    format : {"csv", "parquet"}, optional
        Explicit format; overrides the extension.

    Returns
    -------
    str
        ``"csv"`` or ``"parquet"``.

    Examples
    --------
    >>> detect_format("people.csv.gz"), detect_format("s3://bucket/out.parquet")
    ('csv', 'parquet')
    >>> detect_format("table.dat", format="csv")
    'csv'
    """
    if format is not None:
        fmt = str(format).lower()
        if fmt not in FORMATS:
            raise UnknownFormatError(url, f"unknown format {format!r}: choose csv or parquet")
        return fmt
    ext = posixpath.splitext(uncompressed_name(url))[1]
    if ext in _SUFFIXES:
        return _SUFFIXES[ext]
    if url.endswith("/"):
        return "parquet"
    with contextlib.suppress(Exception):
        fs, path = _fs(url)
        if fs.isdir(path):
            return "parquet"
    raise UnknownFormatError(url, f"cannot tell the format of {url!r} from its name: use a .csv or "
                                  ".parquet extension or pass --format csv|parquet")


def input_size(url: str) -> int:
    """Total size in bytes of a file or of every file under a directory."""
    fs, path = _fs(url)
    return int(sum(fs.du(path, total=False).values())) if fs.isdir(path) else int(fs.size(path))


def _check_exists(url: str, what: str = "input"):
    fs, path = _fs(url)
    if not fs.exists(path):
        raise InputNotFoundError(url, f"{what} {url!r} does not exist")
    return fs, path


def read_table(url: str, format: str | None = None, *, dtypes: dict | None = None,
               dialect: CsvDialect | None = None) -> pd.DataFrame:
    """Read a CSV file, a Parquet file or a directory of Parquet files.

    CSV goes through :func:`dmondrian.io.csv_tables.read_csv`, the reader the Dask path shares
    (pandas' types: text columns become pandas' string dtype, numbers int64/float64, ``""`` is
    missing; the separator sniffed); Parquet through pyarrow, which keeps the stored types
    (categoricals, datetimes, nullable integers).

    Parameters
    ----------
    url : str
        Path or fsspec URL.
    format : {"csv", "parquet"}, optional
        Overrides the extension.
    dtypes : dict, optional
        ``{column: type}`` applied after reading (:func:`dmondrian.io.csv_tables.convert_dtypes`):
        ``"str"``, ``"int"``, ``"float"``, ``"category"``, ``"datetime"`` or any pandas dtype name.
        Use it to keep ZIP codes as strings or to parse dates in a CSV.
    dialect : dmondrian.io.csv_tables.CsvDialect, optional
        A CSV file's separator, decimal mark and encoding (default: the
        separator sniffed, ``"."``, UTF-8).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputNotFoundError, ReadError, UnknownFormatError

    Examples
    --------
    >>> import pandas as pd
    >>> pd.DataFrame({"zip": ["02134", "10001"], "age": [31, 45]}).to_csv(
    ...     "memory://doc/people.csv", index=False)
    >>> df = read_table("memory://doc/people.csv", dtypes={"zip": "str"})
    >>> df["zip"].tolist(), df["age"].tolist()
    (['02134', '10001'], [31, 45])
    """
    fmt = detect_format(url, format)
    fs, path = _check_exists(url)
    str_cols = [c for c, t in (dtypes or {}).items() if str(t).lower() in TEXT_TYPES]
    try:
        if fmt == "csv":
            if fs.isdir(path):
                raise ReadError(url, f"{url!r} is a directory, not a CSV file")
            df = read_csv(url, dialect, str_cols)
        else:
            df = _read_parquet(fs, path, url)
    except IOFailure:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError,
            LookupError, OSError) as exc:
        raise ReadError(url, f"cannot read {url!r} as {fmt.upper()}: {one_line(exc)}") from exc
    return convert_dtypes(df, dtypes or {}, url)


def _read_parquet(fs, path: str, url: str) -> pd.DataFrame:
    import pyarrow.lib
    import pyarrow.parquet as pq

    if fs.isdir(path):
        files = [f for f in fs.find(path)
                 if not any(p.startswith((".", "_")) for p in f[len(path):].split("/") if p)]
        if not any(f.endswith((".parquet", ".pq", ".parq")) or "." not in f.rsplit("/", 1)[-1]
                   for f in files):
            raise ReadError(url, f"directory {url!r} holds no Parquet files")
    try:
        table = pq.read_table(path, filesystem=fs)
        return _nullable_ints(table, table.to_pandas())
    except pyarrow.lib.ArrowException as exc:
        raise ReadError(url, f"cannot read {url!r} as PARQUET: {one_line(exc)}") from exc


def _nullable_ints(table, df: pd.DataFrame) -> pd.DataFrame:
    """Integer columns holding nulls as pandas' nullable ints, not floats: an ``int32``
    zip stays a column of integers (published ``[10002, 10099]``), as Dask and
    ``dtype_backend="pyarrow"`` read it."""
    import pyarrow as pa

    for field in table.schema:
        if (pa.types.is_integer(field.type) and field.name in df.columns
                and df[field.name].dtype.kind == "f"):
            nullable = str(field.type).replace("uint", "UInt").replace("int", "Int")
            df[field.name] = pd.array(table.column(field.name), dtype=nullable)
    return df


def read_lines(url: str, what: str = "file") -> list[str]:
    """The lines of a small text file (e.g. a hierarchy), through fsspec."""
    _check_exists(url, what)
    try:
        with fsspec.open(url, "rt", encoding="utf-8") as fh:
            return fh.read().splitlines()
    except (UnicodeDecodeError, OSError) as exc:
        raise ReadError(url, f"cannot read {what} {url!r}: {one_line(exc)}") from exc


# -- writing ---------------------------------------------------------------------------


def manifest_path(output_url: str) -> str:
    """Where the release manifest of ``output_url`` goes: ``OUTPUT.manifest.json``.

    Examples
    --------
    >>> manifest_path("out/released.csv")
    'out/released.csv.manifest.json'
    >>> manifest_path("s3://bucket/released/")
    's3://bucket/released.manifest.json'
    """
    return output_url.rstrip("/") + ".manifest.json"


def write_table(df: pd.DataFrame, url: str, format: str | None = None, *,
                overwrite: bool = False, chunk_rows: int = 100_000,
                progress: Callable[[int, int], None] | None = None) -> str:
    """Write ``df`` to ``url`` as CSV or Parquet, atomically.

    A URL ending in ``/`` (or an existing directory, with ``overwrite``) gets a Parquet dataset
    directory holding ``part.0.parquet``; otherwise one file. Rows are written in chunks so that
    ``progress(rows_done, rows_total)`` can report.

    Parameters
    ----------
    df : pandas.DataFrame
        The table; its index is not written.
    url : str
        Output path or fsspec URL.
    format : {"csv", "parquet"}, optional
        Overrides the extension.
    overwrite : bool
        Replace an existing output.
    chunk_rows : int
        Rows per CSV chunk / Parquet row group.
    progress : callable, optional
        Called after every chunk with (rows written, total rows).

    Returns
    -------
    str
        The format written.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": ["[20, 29]", "[20, 29]"], "income": [10, 20]})
    >>> write_table(df, "memory://doc/released.parquet")
    'parquet'
    >>> read_table("memory://doc/released.parquet").equals(df)
    True
    """
    fmt = detect_format(url, format)
    fs, path = _fs(url)
    directory = url.endswith("/") or (fmt == "parquet" and fs.isdir(path.rstrip("/")))
    if directory and fmt != "parquet":
        raise OutputError(url, f"cannot write CSV to directory {url!r}: give a file name")
    n = len(df)
    step = max(1, int(chunk_rows))
    try:
        with atomic_output(url, directory=directory, overwrite=overwrite) as (fs, tmp):
            target = f"{tmp}/part.0.parquet" if directory else tmp
            with fs.open(target, "wb") as fh:
                if fmt == "csv":
                    _write_csv(df, fh, step, n, progress)
                else:
                    _write_parquet(df, fh, step, n, progress)
    except IOFailure:
        raise
    except OSError as exc:
        raise OutputError(url, f"cannot write {url!r}: {one_line(exc)}") from exc
    return fmt


def _write_csv(df, fh, step, n, progress):
    import io as _io

    text = _io.TextIOWrapper(fh, encoding="utf-8", newline="")
    for start in range(0, max(n, 1), step):
        df.iloc[start:start + step].to_csv(text, index=False, header=start == 0)
        text.flush()
        if progress:
            progress(min(start + step, n), n)
    text.detach()


def _write_parquet(df, fh, step, n, progress):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    with pq.ParquetWriter(fh, table.schema) as writer:
        for start in range(0, max(n, 1), step):
            writer.write_table(table.slice(start, step))
            if progress:
                progress(min(start + step, n), n)


def write_json(obj, url: str, *, overwrite: bool = True) -> None:
    """Write ``obj`` as indented JSON to ``url``, atomically."""
    try:
        with atomic_output(url, overwrite=overwrite) as (fs, tmp), fs.open(tmp, "w") as fh:
            json.dump(obj, fh, indent=2, default=str)
            fh.write("\n")
    except IOFailure:
        raise
    except OSError as exc:
        raise OutputError(url, f"cannot write {url!r}: {one_line(exc)}") from exc
