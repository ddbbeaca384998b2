"""The identifying-column check done by the pass that writes the release.

The writers' last pass reads every column of every row to write it; the tasks that write also keep a
distinct-value sketch of the columns released as is
(:func:`dmondrian.release.identifiers.distinct_sketch`), returned beside their row counts; the
domain pass then reads only the QIs. The client merges them once every file is written (and counts
exactly, in a pass over the input's columns the sketches leave unsure,
:mod:`dmondrian.release.unique_count`); a column that singles out rows then raises
:class:`~dmondrian.errors.IdentifyingColumnError`, after the files written are removed
(:func:`finish_written`'s ``undo``), and before the command line publishes its staged output
(:mod:`dmondrian.io.staging`). See docs/design.md, section "Step 1: the domain pass".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..release.identifiers import (
    INDEX,
    IdentifyingColumn,
    candidates,
    distinct_sketch,
    estimate_identifying,
    identifier_kind,
    merge_distinct,
    refuse_identifying,
    released_as_is,
)
from ..release.person_keys import warn_person_keys

__all__ = ["WrittenCheck", "DISTINCT", "COUNTS", "counted", "identifying_check",
           "checked_now_or_later", "written", "write_released", "refuse_written_index",
           "index_candidate", "numbers_rows", "row_numbers",
           "written_meta", "finish_written", "merge_counts"]

#: The column of a write task's result holding its sketch.
DISTINCT = "distinct"
#: The column of a write task's result holding the counts of what it wrote
#: (:class:`~dmondrian.metrics.accumulator.ReleaseCounts`), for the release's report.
COUNTS = "counts"


def identifying_check(meta: pd.DataFrame, opts) -> list:
    """The candidate columns released as is that the identifying-column check sketches
    (:func:`dmondrian.release.identifiers.candidates`; the index is not one)."""
    return [c for c in candidates(meta.dtypes, released_as_is(meta.columns, opts))
            if c not in opts.allow_unique]


def row_numbers(name=INDEX) -> IdentifyingColumn:
    """The finding of an index, called ``name``, that numbers the rows (:func:`numbers_rows`)
    and was asked to be written: refused whatever the table's size, as its numbers give
    the input's order back beside the rows each writer shuffles.

    Examples
    --------
    >>> from dmondrian.release.identifiers import refusal_message
    >>> print(refusal_message([row_numbers()]))  # doctest: +ELLIPSIS
    refusing to release the index ('index'): it numbers the rows in the input's order, ...
    """
    return IdentifyingColumn(name, 1.0, 0, True, is_index=True, numbered=True)


def numbers_rows(index: pd.Index) -> bool:
    """Whether ``index`` numbers rows consecutively (a RangeIndex, or an integer index
    counting up by one): row numbers, which give the rows' order.

    Examples
    --------
    >>> numbers_rows(pd.RangeIndex(5)), numbers_rows(pd.Index([3, 4, 5]))
    (True, True)
    >>> numbers_rows(pd.Index([3, 5]))
    False
    """
    if isinstance(index, pd.RangeIndex):
        return index.step == 1
    if not pd.api.types.is_integer_dtype(index.dtype) or len(index) == 0:
        return False
    return bool(index.is_monotonic_increasing and index[-1] - index[0] == len(index) - 1
                and index.is_unique)


def index_candidate(index: pd.Index, allow=()):
    """The name a written ``index`` is judged under (its name, or ``"index"``), or None
    when it is of no identifier's kind or ``allow`` names it.

    An index that numbers the rows is a candidate: the writer refuses it (:func:`row_numbers`).

    Examples
    --------
    >>> index_candidate(pd.Index(["a", "b"], name="who")), index_candidate(pd.RangeIndex(3))
    ('who', 'index')
    >>> index_candidate(pd.Index([5, 3]), allow=["index"]) is None
    True
    """
    name = INDEX if index.name is None else index.name
    if identifier_kind(index.dtype) is None or name in allow or INDEX in allow:
        return None
    return name


def refuse_written_index(ddf, allow, asked, client=None, progress: bool | None = False) -> None:
    """Raise :class:`~dmondrian.errors.IdentifyingColumnError` when a writer ``asked`` to
    write ``ddf``'s index would publish one that numbers the rows or singles them out,
    before anything is written.

    The index is not a release column (:mod:`dmondrian.release.identifiers`): only a writer asked
    for it (``write_index=True``) publishes it. A RangeIndex (``from_pandas``'s default, the row
    numbers dask reads beside each file) is refused at once: beside rows each file shuffles, row
    numbers give the input's order back. Any other index costs a pass over the index alone, which
    refuses it when every partition of two rows or more numbers its rows in order, or when it
    singles out rows. ``allow`` (the ``allow_unique`` option) may name it. Computed on ``client``
    (None: the default scheduler, a distributed client when one is current).
    """
    if not asked:
        return
    import dask
    from dask import delayed

    from ..release.unique_count import unique_rows
    from .cluster import on_client, run

    name = index_candidate(ddf._meta.index, allow)
    if name is None:
        return
    if numbers_rows(ddf._meta.index):  # a RangeIndex: the meta is empty
        refuse_identifying([row_numbers(name)])
    bare = ddf[[]]  # the index alone: no column is read
    judged = delayed(_merge_index, pure=True)(
        *[delayed(_index_part, pure=True)(p, name)
          for p in bare.to_delayed(optimize_graph=True)])
    if client is None:
        ((numbered, merged),) = dask.compute(judged)
    else:
        ((numbered, merged),) = run(client, [judged], progress,
                                    "pass: the index asked to be written")
    if numbered:
        refuse_identifying([row_numbers(name)])
    refuse_identifying(estimate_identifying(merged, None, name).resolve(
        lambda unsure: unique_rows(bare, unsure, on_client(client, progress))))


def _index_part(df: pd.DataFrame, name) -> tuple:
    """One partition's part of :func:`refuse_written_index`: whether its index numbers
    its rows (None under two rows: one row says nothing), and its sketch."""
    return (numbers_rows(df.index) if len(df) > 1 else None), distinct_sketch(df, [name])


def _merge_index(*parts) -> tuple:
    """Whether every partition of two rows or more numbers its rows (and one does), and
    the merged sketch."""
    numbered = [n for n, _ in parts if n is not None]
    return bool(numbered) and all(numbered), merge_distinct(*(s for _, s in parts))


@dataclass(frozen=True)
class WrittenCheck:
    """What the write tasks sketch, and what the client refuses once they are done.

    Attributes
    ----------
    columns : list
        The candidate columns (:func:`dmondrian.release.identifiers.candidates`).
    person_keys : list
        Person keys found on the first partition by the domain pass
        (:func:`dmondrian.release.person_keys.person_key_columns`), warned about
        once the release is known to hold no identifying column.
    """

    columns: list
    person_keys: list = field(default_factory=list)

    @classmethod
    def of(cls, meta: pd.DataFrame, opts, person_keys) -> WrittenCheck:
        """The check of a table shaped like ``meta`` under checked options ``opts``."""
        return cls(identifying_check(meta, opts), person_keys)

    def finish(self, sketches, n_rows: int, count_unique=None, written_rows=None) -> list:
        """Merge the write tasks' sketches; raise :class:`~dmondrian.errors.IdentifyingColumnError`
        on any column singling out rows, else warn on the person keys and return an empty list.

        ``n_rows`` is the input's rows, ``written_rows`` the release's (fewer when rows were
        suppressed: each left out may hold one more value); ``count_unique(columns)`` counts the
        input's rows of their own in the columns the sketches leave unsure
        (:meth:`dmondrian.release.identifiers.SketchVerdict.resolve`).
        """
        sketches = [s for s in sketches if s is not None]
        unseen = 0 if written_rows is None else n_rows - written_rows
        found = (estimate_identifying(merge_distinct(*sketches), n_rows, None,
                                      unseen).resolve(count_unique) if sketches else [])
        refuse_identifying(found)
        warn_person_keys(self.person_keys)
        return found


def checked_now_or_later(later: bool, meta: pd.DataFrame, opts, identifying: list,
                         person_keys: list) -> WrittenCheck | None:
    """The check the write tasks are to do when ``later``; else refuse now what the
    domain pass found (:class:`~dmondrian.errors.IdentifyingColumnError`), warn on the
    person keys and return None."""
    if later:
        return WrittenCheck.of(meta, opts, person_keys)
    refuse_identifying(identifying)
    warn_person_keys(person_keys)
    return None


def counted(measure, frame: pd.DataFrame):
    """The counts of ``frame``, a partition of the release, for its report; None
    without a ``measure`` (an empty
    :class:`~dmondrian.metrics.accumulator.ReleaseCounts` naming the columns)."""
    if measure is None:
        return None
    return measure.merge().add(frame)


def written(rows: int, df: pd.DataFrame, check: WrittenCheck | None,
            distinct_values=None, counts=None) -> pd.DataFrame:
    """A write task's result: its row count and, with a ``check``, the sketch of ``df``
    (``distinct_values``: :func:`~dmondrian.release.identifiers.distinct_sketch`'s); with
    ``counts`` (:func:`counted`), those."""
    out = pd.DataFrame({"rows": [int(rows)]})
    if check is not None:
        out[DISTINCT] = pd.Series([distinct_sketch(df, check.columns, distinct_values)],
                                  dtype=object)
    if counts is not None:
        out[COUNTS] = pd.Series([counts], dtype=object)
    return out


def write_released(sink, frame: pd.DataFrame, number: int,
                   check: WrittenCheck | None, measure=None) -> pd.DataFrame:
    """Write ``frame``, a partition of the release, as file ``number`` of ``sink``; its
    :func:`written` result, the sketch (with a ``check``) of ``frame`` itself, taking
    the distinct values of the text the write encodes from the write, and (with a
    ``measure``) the counts of ``frame``."""
    counts = counted(measure, frame)
    if check is None:
        return written(sink.write(frame, number), frame, None, counts=counts)
    distinct = {}
    return written(sink.write(frame, number, distinct), frame, check, distinct, counts)


def written_meta(check: WrittenCheck | None, measure=None) -> pd.DataFrame:
    """The empty frame of :func:`written`'s results."""
    out = pd.DataFrame({"rows": pd.Series([], dtype="int64")})
    if check is not None:
        out[DISTINCT] = pd.Series([], dtype=object)
    if measure is not None:
        out[COUNTS] = pd.Series([], dtype=object)
    return out


def finish_written(result: pd.DataFrame, top, undo=None, count_unique=None) -> None:
    """Check the write tasks' sketches in ``result`` (one row per file written), and keep what was
    found in ``top.identifying``; ``undo(files)`` removes the files written when the release is
    refused (or a warning is raised as an error); ``count_unique``: :meth:`WrittenCheck.finish`. The
    write tasks' counts, when they took them, are merged into ``top.measured``."""
    if COUNTS in result.columns:
        top.measured = merge_counts(list(result[COUNTS]))
    if DISTINCT not in result.columns:
        return
    try:
        top.identifying = top.written_check.finish(
            result[DISTINCT], top.domain.n_rows, count_unique, int(result["rows"].sum()))
    except BaseException:
        if undo is not None:
            undo(len(result))
        raise


def merge_counts(parts: list):
    """The write tasks' counts merged into one
    (:meth:`~dmondrian.metrics.accumulator.ReleaseCounts.merge`)."""
    return parts[0].merge(*parts[1:])
