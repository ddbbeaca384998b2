"""The lazy release: a dask DataFrame whose ``to_parquet`` writes as ``anonymize_to_parquet``.

What a notebook user writes is ``dmondrian.anonymize(ddf, ...).to_parquet(path)``. Through dask's
writer that costs more than :func:`~dmondrian.distributed.anonymize_to_parquet` in two ways.
pyarrow's defaults suit the input, not a release: min/max statistics for every label column (Arrow
gathers the labels each 1,024-row batch refers to, and compares them) and a dictionary for every
number (ids and amounts are mostly distinct: each value is hashed, the dictionary page overflows and
the writer falls back to plain encoding), work the sink never does. And dask writes each anonymized
partition in tasks of its own (``reset_index``, an ``operation``, ``toparquetdata``), reading it
back from memory after it left the caches.

:class:`AnonymizedFrame` is that frame, whose ``to_parquet`` runs the writers' own graph on the same
plan (each output partition anonymized and written by one task, :class:`~.parquet_sink.ParquetSink`)
unless the caller asks for something only dask's writer does (``partition_on``, ``append``, a
``schema``, ...): then dask's, with the release's defaults
(:func:`~.parquet_sink.release_write_options`: no statistics for labels, dictionaries for labels,
text and the class column only) where the caller does not set ``write_statistics`` or
``use_dictionary``. Any other method returns dask's own DataFrame, as does pickling it.
"""

from __future__ import annotations

import dask.dataframe as dd

from ..errors import ParameterError
from ..io.parquet_sink import release_schema, release_write_options

__all__ = ["AnonymizedFrame", "NONE_LABEL", "as_release"]

#: The name dask's ``to_parquet`` gives an unnamed index it writes as a column.
NONE_LABEL = "__null_dask_index__"

#: dask's ``to_parquet`` options the writers' graph does not take, with their
#: defaults: any other value goes to dask's writer.
DASK_ONLY = {"append": False, "overwrite": False, "ignore_divisions": False, "partition_on": None,
             "custom_metadata": None, "write_metadata_file": None, "schema": "infer",
             "name_function": None, "filesystem": None, "engine": None}


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
    writer : callable, optional
        ``writer(path, write_options, storage_options)``: the writers' graph
        of this release (a dask collection or a list of delayed writes).
    row_seed : int, optional
        The seed of each file's row order (:mod:`dmondrian.release.row_order`).
    index_check : callable, optional
        ``index_check(asked)``, called by ``to_parquet`` before anything is written: refuses an
        index asked to be written (:func:`~dmondrian._dask.written_check.refuse_written_index` on
        the input the release comes from, whose index the release keeps).
    manifest_fields : callable, optional
        ``manifest_fields(index_written)``: what the manifest says of this release
        (:func:`dmondrian.evaluation.manifest.writer_fields`), for ``to_parquet(manifest=True)``.
    """

    def __init__(self, expr, label_columns=(), dictionary_columns=(), writer=None,
                 row_seed=None, index_check=None, manifest_fields=None):
        super().__init__(expr)
        # dask's __setattr__ assigns columns: these are plain attributes.
        object.__setattr__(self, "_label_columns", tuple(label_columns))
        object.__setattr__(self, "_dictionary_columns", tuple(dictionary_columns))
        object.__setattr__(self, "_writer", writer)
        object.__setattr__(self, "_row_seed", row_seed)
        object.__setattr__(self, "_index_check", index_check)
        object.__setattr__(self, "_manifest_fields", manifest_fields)

    def to_parquet(self, path, **kwargs):
        """Write the release as a Parquet dataset, as ``anonymize_to_parquet`` writes it.

        Parameters
        ----------
        path : str or os.PathLike
            The dataset folder (local path or fsspec URL).
        **kwargs
            As :meth:`dask.dataframe.DataFrame.to_parquet`'s. ``compression``, ``write_index``,
            ``storage_options``, ``compute``, ``compute_kwargs``, ``shuffle_rows`` (default True:
            each file's rows in a random order, :mod:`dmondrian.release.row_order`) and pyarrow's
            ``write_table`` keywords are the writers'; ``write_index`` defaults to False. Any of
            :data:`DASK_ONLY` set to another value than its default runs dask's writer instead.
            ``write_statistics`` and ``use_dictionary`` default to
            :func:`~dmondrian.io.parquet_sink.release_write_options`'s choice. ``manifest`` (default
            False, as :func:`~dmondrian.distributed.anonymize_to_parquet`'s, and for the same
            reasons) publishes ``path.manifest.json`` with the files, the manifest last (``path``
            must not exist); it needs the writers' own graph, computed here.

        Returns
        -------
        None, or with ``compute=False`` a :class:`dask.delayed.Delayed`
        whose computation writes the files.

        Notes
        -----
        Computed here (``compute=True``), the files are written into a hidden staging folder beside
        ``path`` and moved there once every write has finished (:mod:`dmondrian.io.staging`); with
        ``compute=False`` they are written to ``path`` directly by the caller's computation.

        Raises
        ------
        dmondrian.errors.IdentifyingColumnError
            When ``write_index`` asks for an index that numbers the rows or
            singles them out, unless ``allow_unique`` named it
            (:mod:`dmondrian.release.identifiers`); before anything is written.
        """
        if self._index_check is not None:
            self._index_check(kwargs.get("write_index", False))
        manifest = bool(kwargs.pop("manifest", False))
        if self._writer is None or any(kwargs.get(key, default) != default
                                       for key, default in DASK_ONLY.items()):
            if manifest:
                raise ParameterError("manifest", "a manifest is written with the writers' "
                                     "own graph: leave out dask's options "
                                     f"({', '.join(DASK_ONLY)}), or write it without one")
            return self._dask_to_parquet(path, **kwargs)
        import dask

        kwargs = {key: value for key, value in kwargs.items() if key not in DASK_ONLY}
        compute = kwargs.pop("compute", True)
        compute_kwargs = kwargs.pop("compute_kwargs", None) or {}
        storage_options = kwargs.pop("storage_options", None)
        if not compute:
            if manifest:
                raise ParameterError("manifest", "a manifest is written over the files "
                                     "written: compute them here (compute=True)")
            # The caller runs the writes: they go straight to ``path``.
            # A counted plan's writes are a dask DataFrame of row counts; an
            # uncounted one's, delayed writes and the verdict of the counts.
            return dask.delayed(_written, pure=True)(self._writer(path, kwargs, storage_options))
        from ..io.staging import staged_folder

        # Written into a hidden staging folder beside ``path``, moved there once
        # every write has finished (dmondrian.io.staging).
        with staged_folder(path, storage_options, manifest) as staged:
            graph = self._writer(staged.url, kwargs, storage_options)
            dask.delayed(_written, pure=True)(graph).compute(**compute_kwargs)
            if manifest and self._manifest_fields is not None:
                staged.describe(**self._manifest_fields(kwargs.get("write_index", False)))
        return None

    def _dask_to_parquet(self, path, **kwargs):
        """dask's ``to_parquet``, labels written without statistics, rows shuffled."""
        from ..release.row_order import row_order_seed, shuffle_partition, takes_shuffle

        meta = self._meta
        kwargs.setdefault("write_index", False)
        write_index = kwargs["write_index"]
        frame = self
        if takes_shuffle(kwargs):
            seed = self._row_seed if self._row_seed is not None else row_order_seed()
            frame = self.map_partitions(shuffle_partition, seed, meta=meta)
        if write_index and meta.index.name is None:
            meta = meta.rename_axis(NONE_LABEL)  # as dask names it in the files
        schema = release_schema(meta, self._label_columns, write_index)
        for key, value in release_write_options(schema, self._label_columns,
                                                self._dictionary_columns).items():
            kwargs.setdefault(key, value)
        return dd.DataFrame.to_parquet(frame, path, **kwargs)


def _written(parts) -> None:
    """Nothing: the task that waits for every write."""


def as_release(frame, top, writer=None, source=None) -> AnonymizedFrame:
    """``frame``, the lazy release of plan ``top``, as an :class:`AnonymizedFrame`
    (``writer``: its writers' graph, see :class:`AnonymizedFrame`; ``source``: the
    input, whose index an asked ``to_parquet(write_index=True)`` judges)."""
    from functools import partial

    from ..evaluation.manifest import option_parameters, writer_fields
    from ..release.row_order import row_order_seed
    from .leaves import class_columns, label_columns
    from .written_check import refuse_written_index

    check = (None if source is None
             else partial(refuse_written_index, source, top.options.allow_unique))

    def manifest_fields(index_written):
        return writer_fields("distributed.anonymize(...).to_parquet",
                             option_parameters(top.options), input_rows=top.domain.n_rows,
                             random_state=top.options.random_state, index_written=index_written)

    return AnonymizedFrame(frame.expr, label_columns(top), class_columns(top), writer,
                           row_order_seed(top.options.random_state), check, manifest_fields)
