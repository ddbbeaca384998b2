"""The lazy release: a dask DataFrame whose ``to_parquet`` writes as the Parquet sink does.

What a notebook user writes is ``dmondrian.anonymize(ddf, ...).to_parquet(path)``.
dask's writer then takes pyarrow's defaults, which suit the input but not a
release: min/max statistics for every label column (Arrow gathers the labels
each 1,024-row batch refers to, and compares them), and a dictionary for every
number (ids and amounts are mostly distinct: each value is hashed, the
dictionary page overflows and the writer falls back to plain encoding). On
census rows that write took about three times the sink's.

:class:`AnonymizedFrame` is that frame, with the same ``to_parquet`` given the
release's defaults (:func:`~.parquet_sink.release_write_options`: no statistics
for labels, dictionaries for labels, text and the class column only) where the
caller does not set ``write_statistics`` or ``use_dictionary``. Any other
method returns dask's own DataFrame, as does pickling it.
"""

from __future__ import annotations

import dask.dataframe as dd

from .parquet_sink import release_schema, release_write_options

__all__ = ["AnonymizedFrame", "NONE_LABEL", "as_release"]

#: The name dask's ``to_parquet`` gives an unnamed index it writes as a column.
NONE_LABEL = "__null_dask_index__"


class AnonymizedFrame(dd.DataFrame):
    """A lazy release (a :class:`dask.dataframe.DataFrame`): its Parquet files are written
    with the release's writer defaults.

    Parameters
    ----------
    expr : dask expression
        The release's expression (``frame.expr``).
    label_columns : sequence
        Columns published as labels (Categoricals of text).
    dictionary_columns : sequence, optional
        Numeric columns worth a dictionary all the same (the class ids).
    """

    def __init__(self, expr, label_columns=(), dictionary_columns=()):
        super().__init__(expr)
        # dask's __setattr__ assigns columns: these are plain attributes.
        object.__setattr__(self, "_label_columns", tuple(label_columns))
        object.__setattr__(self, "_dictionary_columns", tuple(dictionary_columns))

    def to_parquet(self, path, **kwargs):
        """:meth:`dask.dataframe.DataFrame.to_parquet`, labels written without statistics.

        Parameters
        ----------
        path : str or os.PathLike
            As dask's.
        **kwargs
            As dask's. ``write_statistics`` and ``use_dictionary`` default to
            :func:`~dmondrian._dask.parquet_sink.release_write_options`'s
            choice for this release; give either to have pyarrow's.

        Returns
        -------
        As dask's (None, or a delayed write with ``compute=False``).
        """
        meta = self._meta
        write_index = kwargs.get("write_index", True)
        if write_index and meta.index.name is None:
            meta = meta.rename_axis(NONE_LABEL)  # as dask names it in the files
        schema = release_schema(meta, self._label_columns, write_index)
        for key, value in release_write_options(schema, self._label_columns,
                                                self._dictionary_columns).items():
            kwargs.setdefault(key, value)
        return super().to_parquet(path, **kwargs)


def as_release(frame, top) -> AnonymizedFrame:
    """``frame``, the lazy release of plan ``top``, as an :class:`AnonymizedFrame`."""
    from .leaves import label_columns

    classes = [] if top.options.class_column is None else [top.options.class_column]
    return AnonymizedFrame(frame.expr, label_columns(top), classes)
