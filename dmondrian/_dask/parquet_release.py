"""Step 5 for the Parquet writers: the graph that anonymizes a plan's release and
writes it, one file per output partition (or per input partition on the keys path).

:func:`dmondrian.distributed.anonymize_to_parquet` and the lazy release's
``to_parquet`` both run it. See docs/design.md, section "Parquet output".
"""

from __future__ import annotations

from ..io.parquet_sink import ParquetSink
from ..release.identifiers import without_identifiers
from .counting_write import write_parquet_counting
from .exchange import write_keys
from .graph import constant
from .leaves import class_columns, label_columns, output_meta, write_output_partition
from .plan import TopPlan
from .shuffle import route_and_shuffle
from .written_check import written_meta

__all__ = ["release_sink", "write_parquet"]


def release_sink(ddf, top: TopPlan, path, write_options, storage_options) -> ParquetSink:
    """The Parquet sink of plan ``top``'s release: its labels, and its class ids as a
    dictionary. The caller has judged an index asked to be written
    (:func:`~dmondrian._dask.written_check.refuse_written_index`)."""
    return ParquetSink.create(path, output_meta(ddf._meta, top), label_columns(top), write_options,
                              storage_options, dictionary_columns=class_columns(top),
                              random_state=top.options.random_state)


def write_parquet(ddf, top: TopPlan, sink: ParquetSink, shuffle_method, oversized_ok: bool = False):
    """The lazy graph that anonymizes every output partition and writes it with ``sink``.

    ``oversized_ok`` (the lazy release's writer, which cannot start again)
    writes an output partition holding more rows than planned all the same.
    """
    ddf = without_identifiers(ddf, top.options.identifiers)
    if top.exchange == "keys":
        return write_keys(ddf, top, sink, shuffle_method, output_meta(ddf._meta, top), oversized_ok)
    if not top.counted:
        return write_parquet_counting(ddf, top, sink, shuffle_method, oversized_ok)
    shuffled, plan_d = route_and_shuffle(ddf, top, shuffle_method)
    return shuffled.map_partitions(write_output_partition, plan_d, constant(sink, "sink"),
                                   output_meta(ddf._meta, top),
                                   meta=written_meta(top.written_check, top.measure),
                                   clear_divisions=True)
