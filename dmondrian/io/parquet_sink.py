"""Write a release to a Parquet dataset, one file per output partition.

Each QI is published as a pandas Categorical, which Parquet stores as it is (a dictionary page, then
the codes): the labels are never turned into one string per row. Every file has the same schema;
label columns have no statistics; the input's numbers and dates are not dictionary-encoded. See
docs/design.md, section "Parquet output".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._compat import nonempty_meta
from ..errors import ColumnError
from ..release.row_order import row_order_seed, row_permutation, takes_shuffle

__all__ = ["ParquetSink", "check_column_names", "release_schema", "release_write_options"]

LABEL_TYPE = pa.dictionary(pa.int32(), pa.string())

#: Rows sampled, and the largest share of them holding distinct values, for a shuffled
#: write to take a text column as dictionary indices (:meth:`ParquetSink._text_to_encode`).
ENCODE_SAMPLE, ENCODE_SHARE = 1024, 0.5


@dataclass
class ParquetSink:
    """Where and how the output partitions are written (picklable, sent to workers).

    Attributes
    ----------
    fs : fsspec.AbstractFileSystem
        The destination's filesystem.
    root : str
        The dataset folder, as ``fs`` names it.
    schema : pyarrow.Schema
        The schema of every file.
    write_index : bool
        Whether the index is stored as a column (read back as the index).
    options : dict
        Keywords for :func:`pyarrow.parquet.write_table`.
    row_seed : int or None
        Seed of each file's row shuffle (:mod:`dmondrian.release.row_order`); None
        keeps the rows in the order given.
    created : bool
        Whether :meth:`create` made the folder (:meth:`remove` then removes it).
    """

    fs: object
    root: str
    schema: pa.Schema
    write_index: bool
    options: dict
    row_seed: int | None = None
    created: bool = False

    @classmethod
    def create(cls, path, meta: pd.DataFrame, label_columns, write_options=None,
               storage_options=None, dictionary_columns=(), random_state=None) -> ParquetSink:
        """Prepare the folder ``path`` (any fsspec URL) for a release shaped like ``meta``.

        Parameters
        ----------
        path : str or os.PathLike
            Dataset folder; created if needed.
        meta : pandas.DataFrame
            Empty frame with the output's columns, dtypes and index name.
        label_columns : list
            Columns published as labels (Categoricals of strings).
        write_options : dict, optional
            ``write_index`` (default False: the input's row numbers would link rows back to it),
            ``shuffle_rows`` (default True: each file's rows in a random order,
            :mod:`dmondrian.release.row_order`) and keywords for :func:`pyarrow.parquet.write_table`
            (``compression``, ``row_group_size``, ``write_statistics``, ...).
        storage_options : dict, optional
            Keywords for the fsspec filesystem.
        dictionary_columns : sequence, optional
            Numeric columns to dictionary-encode all the same (few distinct
            values, such as class ids).
        random_state : None, int or numpy.random.Generator
            Seed of the row shuffles (None: fresh entropy).

        Returns
        -------
        ParquetSink

        Examples
        --------
        >>> import pandas as pd
        >>> meta = pd.DataFrame({"age": pd.Categorical([]), "pay": pd.Series([], dtype="int64")})
        >>> sink = ParquetSink.create("memory://doc/release", meta, ["age"])
        >>> sink.write(pd.DataFrame({"age": pd.Categorical(["[20, 29]", "[20, 29]"]),
        ...                          "pay": [10, 20]}), 0)
        2
        >>> import fsspec
        >>> with fsspec.open("memory://doc/release/part.0.parquet", "rb") as fh:
        ...     back = pd.read_parquet(fh)
        >>> back["age"].tolist(), str(back["age"].dtype)
        (['[20, 29]', '[20, 29]'], 'category')
        """
        import fsspec

        options = dict(write_options or {})
        write_index = bool(options.pop("write_index", False))
        shuffle = takes_shuffle(options)
        check_column_names(meta.columns, meta.index.name if write_index else None)
        fs, root = fsspec.core.url_to_fs(str(path), **(storage_options or {}))
        created = not fs.exists(root)
        fs.makedirs(root, exist_ok=True)
        schema = release_schema(meta, label_columns, write_index)
        for key, value in release_write_options(schema, label_columns, dictionary_columns).items():
            options.setdefault(key, value)
        return cls(fs, root, schema, write_index, options,
                   row_order_seed(random_state) if shuffle else None, created)

    def write(self, frame: pd.DataFrame, number: int, distinct: dict | None = None) -> int:
        """Write one output partition as ``part.<number>.parquet``; return its row count.

        ``distinct``, a dict, receives the distinct values (missing value left out, as a pandas
        Series) of each text column the write encodes (:meth:`_text_to_encode`): the identifying
        check's sketch takes them instead of finding them again.
        """
        # One thread: a task has its worker thread's core, and pyarrow would start a
        # pool of threads per call (dask's own writer asks for one too).
        table = pa.Table.from_pandas(frame, schema=self.schema, preserve_index=self.write_index,
                                     nthreads=1)
        stored = None
        if self.row_seed is not None and table.num_rows > 1:
            # shuffle_rows' order, taken by Arrow on the converted table: cheaper
            # than pandas' reorder of the frame (benchmarks/README.md).
            order = row_permutation(self.row_seed, number, frame)
            text = self._text_to_encode(table)
            if text:
                stored, table = table.schema, _dictionary_encoded(table, text)
                if distinct is not None:
                    distinct.update(_dictionaries(table, text))
            table = table.take(order)
        with self.fs.open(f"{self.root}/part.{int(number)}.parquet", "wb") as fh:
            if stored is None:
                pq.write_table(table, fh, **self.options)
            else:
                _write_as(table, stored, fh, self.options)
        return int(table.num_rows)

    def _text_to_encode(self, table: pa.Table) -> list:
        """The text columns a shuffled write takes as dictionary indices: those the writer
        dictionary-encodes anyway whose :data:`ENCODE_SAMPLE` sampled rows hold
        distinct values in at most :data:`ENCODE_SHARE` of them.

        Arrow's take of a text column copies every string, and the writer then hashes every one of
        them into its dictionary; encoded first, the take moves 32-bit indices and the writer writes
        the dictionary as it is. That pays while the sample repeats values, a few hundred values a
        million rows or a long tail of a hundred thousand whose head repeats; a column of a thousand
        values spread evenly (600 of them in the sample) costs the same either way, and one of
        distinct values costs more encoded (a dictionary as large as the column), so it is taken as
        text.
        """
        wanted = self.options.get("use_dictionary", True)
        if wanted is False or "store_schema" in self.options:
            return []
        names = [f.name for f in table.schema
                 if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
                 and (wanted is True or f.name in wanted)]
        if not names:
            return []
        sample = np.linspace(0, table.num_rows - 1, min(ENCODE_SAMPLE, table.num_rows),
                             dtype=np.int64)
        return [name for name in names if pc.count_distinct(
            table.column(name).take(sample)).as_py() <= ENCODE_SHARE * len(sample)]

    def remove(self, files: int) -> None:
        """Remove ``part.0`` to ``part.<files - 1>`` (a release refused once written), and
        the folder when :meth:`create` made it and nothing else is in it: nothing is
        left that could pass for a release.

        Examples
        --------
        >>> import fsspec
        >>> meta = pd.DataFrame({"pay": pd.Series([], dtype="int64")})
        >>> sink = ParquetSink.create("memory://doc/refused", meta, [])
        >>> sink.write(pd.DataFrame({"pay": [10, 20]}), 0)
        2
        >>> sink.remove(1)
        >>> fsspec.filesystem("memory").exists("/doc/refused")
        False
        """
        for number in range(int(files)):
            path = f"{self.root}/part.{number}.parquet"
            if self.fs.exists(path):
                self.fs.rm(path)
        if self.created and self.fs.exists(self.root) and not self.fs.ls(self.root, detail=False):
            self.fs.rmdir(self.root)


def release_schema(meta: pd.DataFrame, label_columns, write_index: bool = True) -> pa.Schema:
    """The Arrow schema of a release shaped like ``meta``: labels ``dictionary<int32, string>``.

    Other Categorical columns get 32-bit codes too: pandas picks 8, 16 or 32 bits by the number of
    categories, which would give the files of one dataset different types.
    """
    labels = {str(c) for c in label_columns}
    # A non-empty stand-in: an empty object column has no Arrow type. The labels are
    # replaced first: dask's stand-in of a Categorical walks its every category.
    stand_in = meta.copy(deep=False)
    for col in labels:
        stand_in[col] = pd.Categorical([], categories=["label"])
    probe = nonempty_meta(stand_in)
    for col in labels:
        probe[col] = pd.Categorical(["label"] * len(probe))
    schema = pa.Schema.from_pandas(probe, preserve_index=write_index)
    for i, f in enumerate(schema):
        if f.name in labels:
            schema = schema.set(i, pa.field(f.name, LABEL_TYPE))
        elif pa.types.is_dictionary(f.type):
            schema = schema.set(i, pa.field(f.name, pa.dictionary(
                pa.int32(), f.type.value_type, f.type.ordered)))
    return schema


def release_write_options(schema: pa.Schema, label_columns, dictionary_columns=()) -> dict:
    """:func:`pyarrow.parquet.write_table`'s options for a release of ``schema``.

    No min/max statistics for labels: Arrow computes them on a dictionary column by gathering the
    labels each batch refers to, which costs as much as the rest of the write, and the lexicographic
    bounds of labels such as ``[25, 30]`` cannot prune a range query. Dictionary encoding for
    labels, text, Categoricals and ``dictionary_columns``, not for the input's numbers and dates
    (:func:`_dictionary_pays`).

    Examples
    --------
    >>> schema = pa.schema([("age", LABEL_TYPE), ("pay", pa.int64())])
    >>> release_write_options(schema, ["age"])
    {'write_statistics': ['pay'], 'use_dictionary': ['age']}
    """
    labels = {str(c) for c in label_columns}
    wanted = labels | {str(c) for c in dictionary_columns}
    return {"write_statistics": [f.name for f in schema if f.name not in labels],
            "use_dictionary": [f.name for f in schema if _dictionary_pays(f, wanted)]}


def check_column_names(columns, index_name=None) -> None:
    """Refuse, naming it, a column Parquet cannot store: its name must be a string.

    ``index_name`` is that of an index written as a column (None: unnamed,
    which pyarrow names itself).

    Raises
    ------
    dmondrian.errors.ColumnError
        For the first column (or the index) named by anything else (an int, a tuple, ...).

    Examples
    --------
    >>> check_column_names(["age", 5])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dmondrian.errors.ColumnError: column 5 is named by an int; Parquet stores only text names...
    """
    for col in [*columns, *([] if index_name is None else [index_name])]:
        if not isinstance(col, str):
            kind = type(col).__name__
            article = "an" if kind[:1] in "aeiou" else "a"
            raise ColumnError(col, f"column {col!r} is named by {article} {kind}; Parquet "
                                   "stores only text names: rename it "
                                   "(e.g. df.columns = df.columns.astype(str))")


def _dictionary_pays(f: pa.Field, wanted) -> bool:
    """Whether a column is worth dictionary-encoding: labels, text, and ``wanted``.

    Numbers and dates of the input (ids, amounts, timestamps) are mostly distinct: the writer would
    hash every value, overflow the dictionary page and fall back to plain encoding anyway.
    """
    return f.name in wanted or pa.types.is_dictionary(f.type) or not (
        pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_temporal(f.type))


def _dictionary_encoded(table: pa.Table, columns) -> pa.Table:
    """``table`` with ``columns`` (text) dictionary-encoded."""
    for name in columns:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.dictionary_encode(table.column(i)))
    return table


def _dictionaries(table: pa.Table, columns) -> dict:
    """The distinct values of each of ``columns`` (dictionary-encoded), as pandas Series."""
    out = {}
    for name in columns:
        column = table.column(name)
        dictionaries = [c.dictionary for c in column.chunks]
        if len(dictionaries) == 1:
            values = dictionaries[0]
        else:  # a column of several chunks (a frame read from several row groups)
            values = pc.unique(pa.chunked_array(dictionaries, type=column.type.value_type))
        out[name] = values.to_pandas()
    return out


def _write_as(table: pa.Table, schema: pa.Schema, fh, options: dict) -> None:
    """Write ``table``, whose text columns may be dictionary-encoded, as a file of
    ``schema`` (the same columns as text): it reads back as ``schema``.

    The writer stores the Arrow schema it is given (``ARROW:schema``, which readers restore the
    column types from) and the pandas metadata; both are written here from ``schema`` instead, so
    that an encoded column is read back as the text it was, not as a Categorical.
    """
    import base64

    options = dict(options)
    row_group_size = options.pop("row_group_size", None)
    with pq.ParquetWriter(fh, table.schema, store_schema=False, **options) as writer:
        writer.write_table(table, row_group_size=row_group_size)
        metadata = {b"ARROW:schema": base64.b64encode(schema.serialize().to_pybytes())}
        metadata.update(schema.metadata or {})
        writer.add_key_value_metadata(metadata)


def empty_like(meta: pd.DataFrame, label_columns) -> pd.DataFrame:
    """An empty frame of ``meta``'s columns, labels as Categoricals (for empty partitions)."""
    out = meta.copy()
    for col in label_columns:
        out[col] = pd.Categorical(np.array([], dtype=object))
    return out
