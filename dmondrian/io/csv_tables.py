"""Reading CSV tables, in memory or on Dask, with one dialect and one type rule.

The command line reads CSV in memory (pandas) for the local engine and lazily (dask) for the Dask
engine; both go through this module, so a file reads the same way whichever engine runs:

* :class:`CsvDialect` is how the file is written: the separator (sniffed
  from the first lines when not given; a tab for ``.tsv``), the decimal mark
  (``","`` in many European exports) and the encoding.
* The column types are pandas' inference over the *whole* file. dask infers them from the first
  block only: a column empty in the first rows and holding text later (a common shape of real
  exports) would be typed as a number there and fail further on. :func:`read_csv_dask` finds the
  types of the columns dask would have typed as numbers or booleans in one pass over the file, each
  block typing itself in parallel, then reads the file with them; a column that turns out to hold
  text is read as text, and the reader says so.
* Two types pandas does not give are taken from pyarrow's CSV inference, on both engines and for
  ``report``/``verify`` alike: a text column whose every value pyarrow reads as an ISO date or
  timestamp (``1983-03-19``, ``2017-07-03T18:23:30Z``) is read as datetime64, and a column pandas
  reads as floats because of gaps but whose values are all integers is read as nullable ``Int64``
  (published ``[46, 51]``, not ``[46.0, 51.0]``). A column mixing dates with other text stays text;
  ``--dtype COL=str`` keeps a column of dates as text.
* :func:`convert_dtypes` applies the ``--dtype COLUMN=TYPE`` conversions to a
  pandas or a dask DataFrame, the one converter of both paths.
"""

from __future__ import annotations

import csv
import io
import warnings
from dataclasses import dataclass

import fsspec
import numpy as np
import pandas as pd

from .._compat import unknown_categories
from ..errors import ColumnError, MissingColumnError

__all__ = ["CsvDialect", "CsvTypeWarning", "sniff_separator", "pandas_options", "read_csv",
           "read_csv_dask", "convert_dtypes", "column_types", "uncompressed_name", "TEXT_TYPES",
           "COMPRESSIONS"]

#: What ``--dtype`` accepts for text.
TEXT_TYPES = ("str", "string")
#: The separators sniffing may find (pandas' default when none is found).
SEPARATORS = ",;\t|"
#: Compression suffixes the readers see through (fsspec's ``compression="infer"``).
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".zip")
_SNIFF_BYTES = 64 * 1024
#: Bytes of the file's start in which the Dask reader looks for columns of dates.
_SAMPLE_BYTES = 256 * 1024
#: The arrow kinds read as datetime64, and which of them carry a time zone.
_DATE_KINDS = frozenset({"date", "timestamp", "timestamp_tz"})
_BOOL_WORDS = {"true": True, "false": False}


class CsvTypeWarning(UserWarning):
    """A CSV column the first rows showed as numbers holds text further on: read as text."""


@dataclass(frozen=True)
class CsvDialect:
    """How a CSV file is written.

    Parameters
    ----------
    sep : str, optional
        Field separator; None sniffs it from the first lines (``","`` when
        nothing else is found), and a ``.tsv`` file's default is a tab.
    decimal : str, default "."
        Decimal mark of the numbers.
    encoding : str, default "utf-8"
        Text encoding of the file.

    Examples
    --------
    >>> CsvDialect(sep=";", decimal=",").resolved("x.csv")
    CsvDialect(sep=';', decimal=',', encoding='utf-8')
    """

    sep: str | None = None
    decimal: str = "."
    encoding: str = "utf-8"

    def resolved(self, url: str) -> CsvDialect:
        """This dialect with its separator known: given, a tab for ``.tsv``, or sniffed."""
        if self.sep is not None:
            return self
        if uncompressed_name(url).endswith(".tsv"):
            return CsvDialect("\t", self.decimal, self.encoding)
        return CsvDialect(sniff_separator(url, self.encoding), self.decimal, self.encoding)


def uncompressed_name(url: str) -> str:
    """The file name of ``url``, lower case, without a compression suffix.

    Examples
    --------
    >>> uncompressed_name("s3://bucket/Day.TSV.gz")
    'day.tsv'
    """
    name = url.rstrip("/").rsplit("/", 1)[-1].lower()
    for suffix in COMPRESSIONS:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def sniff_separator(url: str, encoding: str = "utf-8") -> str:
    """The field separator of a CSV file, from its first lines (``","`` if unsure).

    Examples
    --------
    >>> with fsspec.open("memory://doc/semi.csv", "w") as fh:
    ...     _ = fh.write("age;income\\n31;1,5\\n45;2,0\\n")
    >>> sniff_separator("memory://doc/semi.csv")
    ';'
    """
    try:
        with fsspec.open(url, "rb", compression="infer") as fh:
            raw = fh.read(_SNIFF_BYTES)
    except (OSError, ValueError):
        return ","  # the reader will say what is wrong with the file
    text = raw.decode(encoding, errors="replace")
    if len(raw) == _SNIFF_BYTES:  # drop a line cut in the middle
        text = text[: text.rfind("\n") + 1] or text
    lines = [line for line in text.splitlines() if line.strip()][:50]
    if not lines:
        return ","
    try:
        return csv.Sniffer().sniff("\n".join(lines), delimiters=SEPARATORS).delimiter
    except csv.Error:
        # One column, or a sample the sniffer cannot decide: the separator
        # that splits the header and every line into the same number of fields.
        for sep in SEPARATORS:
            counts = {line.count(sep) for line in lines}
            if len(counts) == 1 and counts != {0}:
                return sep
        return ","


def pandas_options(dialect: CsvDialect, text_columns=()) -> dict:
    """Keywords of :func:`pandas.read_csv` (and dask's) for a resolved ``dialect``.

    Examples
    --------
    >>> pandas_options(CsvDialect(",", ".", "utf-8"), ["zip"])
    {'sep': ',', 'decimal': '.', 'encoding': 'utf-8', 'dtype': {'zip': 'str'}}
    """
    return {"sep": dialect.sep, "decimal": dialect.decimal, "encoding": dialect.encoding,
            "dtype": dict.fromkeys(text_columns, "str")}


def read_csv(url: str, dialect: CsvDialect | None = None, text_columns=()) -> pd.DataFrame:
    """Read a CSV file into pandas: the dialect resolved, types inferred from every row.

    Parameters
    ----------
    url : str
        Path or fsspec URL (compression inferred from the extension).
    dialect : CsvDialect, optional
        Default: sniffed separator, ``"."`` decimals, UTF-8.
    text_columns : sequence of str
        Columns read as text whatever they hold (e.g. ZIP codes).

    Returns
    -------
    pandas.DataFrame
    """
    dialect = (dialect or CsvDialect()).resolved(url)
    with fsspec.open(url, "rb", compression="infer") as fh:
        df = pd.read_csv(fh, **pandas_options(dialect, text_columns))
    fixed = set(text_columns)
    kinds = {c: (_date_kind(df[c]), False) for c in df.columns
             if c not in fixed and _is_text(df[c].dtype)}
    gaps = [c for c in df.columns if c not in fixed and _whole_with_gaps(df[c])]
    if gaps:
        # Only pyarrow's reading of the text tells "46" from "46.0": the file's
        # first bytes first, then the whole file for the columns they leave open.
        sampled = _arrow_kinds(io.BytesIO(_first_lines(url)), dialect, list(df.columns), gaps,
                               header=True)
        gaps = [c for c in gaps if sampled.get(c, ("empty",))[0] in ("int", "empty")]
    if gaps:
        with fsspec.open(url, "rb", compression="infer") as fh:
            kinds.update(_arrow_kinds(fh, dialect, list(df.columns), gaps, header=True))
    types = {c: _arrow_type(df[c].dtype, found) for c, found in kinds.items()}
    return _refined(df, {c: t for c, t in types.items() if t is not None})


#: Leading values of a text column looked at before the whole column is.
_PROBE_VALUES = 1000


def _date_kind(col: pd.Series) -> str:
    """``"timestamp"`` when every present value of text ``col`` is an ISO 8601 date or
    timestamp without a zone, ``"timestamp_tz"`` when every one has a zone, ``"empty"``
    when none is present, else ``"text"``.

    pyarrow's cast reads them, with the parser its CSV reader infers timestamps with; the first
    values are tried first, so a column of words costs a cast of a few values.

    Examples
    --------
    >>> _date_kind(pd.Series(["2017-07-03", None, "2017-07-03T18:23:30"]))
    'timestamp'
    >>> _date_kind(pd.Series(["2017-07-03T18:23:30Z"])), _date_kind(pd.Series(["2017-07"]))
    ('timestamp_tz', 'text')
    """
    import pyarrow as pa

    if isinstance(col.dtype, pd.CategoricalDtype):
        return "text"
    try:
        values = pa.array(col, from_pandas=True, type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return "text"  # not all strings
    if values.null_count == len(values):
        return "empty"
    for kind, tz in (("timestamp", None), ("timestamp_tz", "UTC")):
        target = pa.timestamp("ns", tz)
        try:
            values[:_PROBE_VALUES].cast(target)
            values.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        return kind
    return "text"


def _whole_with_gaps(col: pd.Series) -> bool:
    """Floats with gaps whose every present value is whole: maybe integers with gaps."""
    if not (pd.api.types.is_float_dtype(col.dtype) and col.isna().any()):
        return False
    values = col.to_numpy(dtype=np.float64, na_value=np.nan)
    present = values[~np.isnan(values)]
    return bool(np.all(present == np.round(present)))


def _first_lines(url: str) -> bytes:
    """The file's first bytes (:data:`_SAMPLE_BYTES`), cut at the end of a line."""
    with fsspec.open(url, "rb", compression="infer") as fh:
        raw = fh.read(_SAMPLE_BYTES)
    if len(raw) == _SAMPLE_BYTES:  # drop a line cut in the middle
        raw = raw[: raw.rfind(b"\n") + 1] or raw
    return raw


def _is_text(dtype) -> bool:
    return pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)


def _arrow_kinds(source, dialect: CsvDialect, columns: list, include: list, *,
                 header: bool) -> dict:
    """``{column: (kind, has_missing)}`` of the ``include`` columns as pyarrow's CSV reader
    types them; ``{}`` when pyarrow cannot parse ``source`` (pandas' types then stand).

    Kinds: ``"empty"``, ``"int"``, ``"float"``, ``"bool"``, ``"date"``,
    ``"timestamp"``, ``"timestamp_tz"``, ``"text"``.
    """
    import pyarrow as pa
    import pyarrow.csv as pc

    read = pc.ReadOptions(encoding=dialect.encoding,
                          column_names=None if header else [str(c) for c in columns], skip_rows=0)
    convert = pc.ConvertOptions(decimal_point=dialect.decimal,
                                include_columns=[str(c) for c in include])
    try:
        table = pc.read_csv(source, read_options=read,
                            parse_options=pc.ParseOptions(delimiter=dialect.sep),
                            convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, KeyError):
        return {}
    kinds = (("int", pa.types.is_integer), ("float", pa.types.is_floating),
             ("bool", pa.types.is_boolean), ("date", pa.types.is_date))
    out = {}
    for field, column in zip(table.schema, table.columns, strict=True):
        t = field.type
        if pa.types.is_null(t) or column.null_count == len(column):
            kind = "empty"
        elif pa.types.is_timestamp(t):
            kind = "timestamp_tz" if t.tz else "timestamp"
        else:
            kind = next((name for name, test in kinds if test(t)), "text")
        out[field.name] = (kind, column.null_count > 0)
    return out


def _arrow_type(dtype, found) -> str | None:
    """The type a column pandas read as ``dtype`` takes from pyarrow's ``(kind, missing)``:
    ``"datetime"``/``"datetime_tz"`` for text that is all dates, ``"Int64"`` for floats
    that are integers with gaps, else None (pandas' type stands)."""
    if found is None:
        return None
    kind, missing = found
    if _is_text(dtype) and kind in _DATE_KINDS:
        return "datetime_tz" if kind == "timestamp_tz" else "datetime"
    if pd.api.types.is_float_dtype(dtype) and kind == "int" and missing:
        return "Int64"
    return None


def read_csv_dask(url: str, dialect: CsvDialect | None = None, text_columns=(), **dask_options):
    """Read a CSV file lazily with dask, its column types those :func:`read_csv` gives.

    dask guesses each column's type from the file's first block. The type of every column it guesses
    as a number or a boolean is found again over the whole file, block by block, before the real
    read: each block is parsed by pandas (those columns only) and says what it found, a small merge
    decides one type per column, and the file is then read with those types, as dask reads any file:
    integers (``int64``, ``float64`` with missing values), floats, booleans, or text. A column read
    as text although its first rows held numbers is named in a :class:`CsvTypeWarning`. The pass
    runs now, on the current dask scheduler.

    Parameters
    ----------
    url, dialect, text_columns
        As in :func:`read_csv`.
    **dask_options
        More keywords for :func:`dask.dataframe.read_csv` (``blocksize``, ...).

    Returns
    -------
    dask.dataframe.DataFrame
    """
    import dask.dataframe as dd
    from fsspec.utils import infer_compression

    dialect = (dialect or CsvDialect()).resolved(url)
    # A compressed file is read as one block (dask would say so in a warning).
    blocks = {"blocksize": None} if infer_compression(url) else {}
    options = {**pandas_options(dialect, text_columns), **blocks, **dask_options}
    guessed = dd.read_csv(url, **options)
    checked = [c for c, t in guessed.dtypes.items()
               if c not in options["dtype"] and (pd.api.types.is_numeric_dtype(t)
                                                  or pd.api.types.is_bool_dtype(t))]
    dates = _sampled_dates(url, dialect, guessed, options["dtype"])
    if not checked and not dates:
        return guessed
    types = _whole_file_types(url, dialect, list(guessed.columns), checked, dates,
                              options.get("blocksize", "default"))
    refined = {c: t for c in dates if (t := types.pop(c)) is not None}
    options["dtype"].update(dict.fromkeys(dates, "str"))
    text = [c for c in checked if types[c] is None]
    if text:
        warnings.warn(CsvTypeWarning(
            f"{url}: column(s) {', '.join(map(repr, text))} look numeric in the first rows "
            "but hold text further on: read as text"), stacklevel=2)
    # Booleans with missing values are Python objects in pandas: read as
    # text, then mapped (read_csv parses them only without a dtype).
    words = {c: t for c, t in types.items() if t == "object_bool"}
    options["dtype"].update({c: "str" if t in (None, "object_bool") else t
                             for c, t in types.items()})
    ddf = dd.read_csv(url, **options)
    if words:
        ddf = ddf.map_partitions(_as_types, words, meta=_as_types(ddf._meta, words))
    if refined:
        ddf = ddf.map_partitions(_refined, refined, meta=_refined(ddf._meta, refined))
    return ddf


def _sampled_dates(url: str, dialect: CsvDialect, guessed, fixed: dict) -> list:
    """The columns dask reads as text whose values in the file's first bytes are all
    ISO dates or timestamps (as pyarrow reads them): the candidates of a datetime type."""
    text = [c for c, t in guessed.dtypes.items() if c not in fixed and _is_text(t)]
    if not text:
        return []
    kinds = _arrow_kinds(io.BytesIO(_first_lines(url)), dialect, list(guessed.columns), text,
                         header=True)
    return [c for c in text if kinds.get(c, ("text",))[0] in _DATE_KINDS]


def _whole_file_types(url: str, dialect: CsvDialect, columns: list, checked: list,
                      dates: list, blocksize) -> dict:
    """``{column: pandas type}`` of the ``checked`` and ``dates`` columns over the whole
    file (None: text).

    The file's blocks are those dask reads it in; each is parsed on the
    current dask scheduler and reports a small summary (:func:`_block_kinds`).
    """
    import dask
    from dask.bytes import read_bytes
    from dask.dataframe.io.csv import AUTO_BLOCKSIZE
    from fsspec.utils import infer_compression

    compression = infer_compression(url)
    # A compressed file is one block, as dask reads it.
    blocksize = None if compression else AUTO_BLOCKSIZE if blocksize == "default" else blocksize
    # The line end in the file's encoding, without the mark a BOM encoding
    # puts first (as dask splits the file).
    newline = "\n".encode(dialect.encoding)[len("".encode(dialect.encoding)):]
    _, files = read_bytes(url, delimiter=newline, blocksize=blocksize, sample=False,
                          compression=compression)
    if files and not isinstance(files[0], (list, tuple)):
        files = [files]
    summarize = dask.delayed(_block_kinds, pure=True)
    usecols = [columns.index(c) for c in checked]
    parts = [summarize(block, i == 0, dialect, columns, usecols, dates)
             for blocks in files for i, block in enumerate(blocks)]
    found = dask.compute(*parts)
    return {c: _merged_type([part[c] for part in found]) for c in [*checked, *dates]}


def _block_kinds(block: bytes, first: bool, dialect: CsvDialect, columns: list,
                 usecols: list, dates: list = ()) -> dict:
    """``{column: (kind, has_missing)}`` of one block, as pandas types it alone, the floats with
    gaps as pyarrow reads them, and the ``dates`` columns as :func:`_date_kind` reads their text.

    Kinds: ``"empty"`` (no value), ``"int"``, ``"uint"``, ``"float"``,
    ``"bool"``, ``"text"``, ``"timestamp"`` and ``"timestamp_tz"``.
    """
    if not block.strip():
        return {c: ("empty", False) for c in [*(columns[j] for j in usecols), *dates]}
    out = _pandas_block_kinds(block, first, dialect, columns, usecols) if usecols else {}
    gaps = [c for c, (kind, missing) in out.items() if kind == "float" and missing]
    if gaps:  # only pyarrow's reading of the text tells "46" from "46.0"
        arrow = _arrow_kinds(io.BytesIO(block), dialect, columns, gaps, header=first)
        for c in gaps:
            if arrow.get(c, ("float",))[0] == "int":
                out[c] = ("int", True)
    if dates:
        text = pd.read_csv(io.BytesIO(block), sep=dialect.sep, encoding=dialect.encoding,
                           header=0 if first else None, names=columns,
                           usecols=[columns.index(c) for c in dates],
                           dtype=dict.fromkeys(dates, "str"))
        for c in dates:
            out[c] = (_date_kind(text[c]), bool(text[c].isna().any()))
    return out


def _pandas_block_kinds(block: bytes, first: bool, dialect: CsvDialect, columns: list,
                        usecols: list) -> dict:
    part = pd.read_csv(io.BytesIO(block), sep=dialect.sep, decimal=dialect.decimal,
                       encoding=dialect.encoding, header=0 if first else None,
                       names=columns, usecols=usecols)  # (skiprows= is slower)
    out = {}
    for col in part.columns:
        values = part[col]
        dtype = values.dtype
        if values.notna().sum() == 0:
            kind = "empty"
        elif pd.api.types.is_bool_dtype(dtype):
            kind = "bool"
        elif dtype == np.int64:
            kind = "int"
        elif dtype == np.uint64:
            kind = "uint"
        elif pd.api.types.is_float_dtype(dtype):
            kind = "float"
        elif all(isinstance(v, (bool, np.bool_)) for v in values.dropna()):
            kind = "bool"  # booleans with missing values: object dtype
        else:
            kind = "text"
        out[col] = (kind, bool(values.isna().any()))
    return out


def _merged_type(found: list) -> str | None:
    """pandas' type of a whole column from its blocks' ``(kind, has_missing)``; None for text.

    Examples
    --------
    >>> _merged_type([("int", False), ("float", False)]), _merged_type([("empty", True)])
    ('float64', 'float64')
    >>> _merged_type([("bool", False), ("empty", True)]), _merged_type([("int", False)] * 2)
    ('object_bool', 'int64')
    >>> _merged_type([("int", False), ("text", False)]) is None
    True
    >>> _merged_type([("int", True), ("int", False)]), _merged_type([("date", False)] * 2)
    ('Int64', 'datetime')
    """
    kinds = {kind for kind, _ in found} - {"empty"}
    missing = any(m for _, m in found)
    if kinds and kinds <= _DATE_KINDS:
        if "timestamp_tz" not in kinds:
            return "datetime"
        return "datetime_tz" if kinds == {"timestamp_tz"} else None
    if kinds == {"int"} and missing:
        return "Int64"
    if not kinds or kinds <= {"int", "float"}:
        return "int64" if kinds == {"int"} and not missing else "float64"
    if kinds == {"bool"}:
        return "object_bool" if missing else "bool"
    if kinds == {"uint"} and not missing:
        return "uint64"
    return None


def _as_types(part: pd.DataFrame, words: dict) -> pd.DataFrame:
    """Boolean words of the columns ``words`` names as Python booleans (missing kept)."""
    out = part.copy()
    for col in words:
        words = out[col].str.strip().str.lower().map(_BOOL_WORDS).astype(object)
        # NaN for missing, as pandas reads them (not the string dtype's NA).
        out[col] = pd.Series(np.where(words.isna(), np.nan, words), index=out.index, dtype=object)
    return out


def _refined(part: pd.DataFrame, types: dict) -> pd.DataFrame:
    """Columns as the types pyarrow found (:func:`_arrow_type`): dates parsed as ISO 8601
    by pyarrow's cast, the parser its CSV reader infers them with (nanoseconds; UTC when
    they carry a zone), integers with gaps as ``Int64``."""
    import pyarrow as pa

    out = part.copy()
    for col, typ in types.items():
        if typ == "Int64":
            out[col] = out[col].astype("Int64")
            continue
        target = pa.timestamp("ns", "UTC" if typ == "datetime_tz" else None)
        # pandas' and dask's text columns are Arrow strings already: no copy here.
        text = pa.array(out[col], from_pandas=True)
        out[col] = pd.Series(text.cast(target).to_pandas(), index=out.index, name=col)
    return out


def column_types(frame, columns) -> dict:
    """``{column: type}`` of ``columns`` in the words of :func:`convert_dtypes`.

    What a release's manifest records of the types its input was read with, so that ``dmondrian
    report --original`` reads the original the same way: ``"datetime"``, ``"int"``, ``"float"``,
    ``"str"`` or ``"category"``; a column of another type (booleans, objects) is left out, as every
    reader gives it the same type.

    Parameters
    ----------
    frame : pandas or dask DataFrame
    columns : iterable of str

    Returns
    -------
    dict

    Examples
    --------
    >>> df = pd.DataFrame({"age": pd.array([31, None], dtype="Int64"), "zip": ["021", "1"],
    ...                    "day": pd.to_datetime(["2024-06-01", "2024-06-02"]),
    ...                    "ok": [True, False]})
    >>> column_types(df, ["age", "zip", "day", "ok"])
    {'age': 'int', 'zip': 'str', 'day': 'datetime'}
    """
    types = pd.api.types
    words = (("category", lambda t: isinstance(t, pd.CategoricalDtype)),
             ("datetime", types.is_datetime64_any_dtype), ("int", types.is_integer_dtype),
             ("float", types.is_float_dtype),
             ("str", lambda t: types.is_string_dtype(t) and not types.is_object_dtype(t)))
    found = {col: next((w for w, test in words if test(frame[col].dtype)), None)
             for col in columns}  # booleans and objects match none
    return {col: word for col, word in found.items() if word is not None}


def convert_dtypes(frame, dtypes: dict, url: str):
    """Apply ``--dtype`` conversions ``{column: type}`` to a pandas or a dask DataFrame.

    Types: ``"str"``/``"string"`` (text, missing values kept missing),
    ``"int"`` (``int64``, nullable ``Int64`` when values are missing; always
    ``Int64`` on dask, whose partitions cannot agree otherwise), ``"float"``,
    ``"datetime"`` (ISO 8601 text), ``"category"`` or any pandas dtype name.

    Parameters
    ----------
    frame : pandas or dask DataFrame
    dtypes : dict
        ``{column: type}``.
    url : str
        Where the table was read, for the messages.

    Returns
    -------
    pandas or dask DataFrame
        A new frame (pandas: the same object, converted in place).

    Raises
    ------
    MissingColumnError
        A column the table lacks.
    ColumnError
        A column that cannot be converted.

    Examples
    --------
    >>> df = pd.DataFrame({"zip": [2134, 10001], "day": ["2024-06-01", "2024-06-02"]})
    >>> out = convert_dtypes(df, {"zip": "str", "day": "datetime"}, "t.csv")
    >>> out["zip"].tolist(), str(out["day"].dtype).startswith("datetime64")
    (['2134', '10001'], True)
    """
    for col in dtypes:
        if col not in frame.columns:
            raise MissingColumnError(col, f"--dtype names column {col!r}, which is not in {url!r}")
    if not dtypes:
        return frame
    if isinstance(frame, pd.DataFrame):
        return _convert(frame, dtypes, url, nullable_int=False)
    meta = _convert(frame._meta.copy(), dtypes, url, nullable_int=True)
    for col in dtypes:
        if isinstance(meta[col].dtype, pd.CategoricalDtype):
            # The empty meta's categories are none; each partition has its own, which
            # dask's placeholder category declares (as its own astype("category") does).
            meta[col] = pd.Categorical([], categories=[unknown_categories()],
                                       ordered=meta[col].dtype.ordered)
    return frame.map_partitions(_convert_like, dtypes, url, meta, meta=meta)


def _convert_like(part: pd.DataFrame, dtypes: dict, url: str, meta: pd.DataFrame):
    """One dask partition converted, then cast to the collection's declared types.

    A Categorical keeps the partition's own categories: cast to the meta's
    placeholder, every value would become missing.
    """
    out = _convert(part, dtypes, url, nullable_int=True)
    for col in dtypes:
        t = meta[col].dtype
        if out[col].dtype == t or (isinstance(t, pd.CategoricalDtype)
                                   and isinstance(out[col].dtype, pd.CategoricalDtype)):
            continue
        out[col] = out[col].astype(t)
    return out


def _convert(df: pd.DataFrame, dtypes: dict, url: str, *, nullable_int: bool) -> pd.DataFrame:
    for col, typ in dtypes.items():
        name = str(typ).lower()
        try:
            if name == "datetime":
                df[col] = pd.to_datetime(df[col], format="ISO8601")
            elif name in TEXT_TYPES:
                df[col] = df[col].astype("str").where(df[col].notna())
            elif name == "int":
                df[col] = df[col].astype("Int64" if nullable_int or df[col].isna().any()
                                         else "int64")
            else:
                df[col] = df[col].astype({"float": "float64"}.get(name, name))
        except (ValueError, TypeError) as exc:
            text = " ".join(str(exc).split())
            raise ColumnError(col, f"cannot convert column {col!r} to {typ}: {text[:300]} "
                                   f"(in {url})") from exc
    return df
