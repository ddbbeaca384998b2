"""The columns that single out rows, for a report or a verification of any table.

:mod:`dmondrian.release.identifiers` holds the rule and its pieces (the exact count of a pandas
table, the distinct-value sketch of a Dask table's partitions); this module puts them together for
:func:`dmondrian.report` and :func:`dmondrian.verify`, which take either kind of table. It sits
apart from :mod:`dmondrian.release.identifiers` because a Dask table's unsure columns are counted by
:mod:`dmondrian.release.unique_count`, which imports the rule.
"""

from __future__ import annotations

import pandas as pd

from .identifiers import (
    candidates,
    distinct_sketch,
    estimate_identifying,
    identifying_columns,
    merge_distinct,
)

__all__ = ["identifying_parts"]


def identifying_parts(table, released_as_is, allow=()) -> tuple[list, callable]:
    """What a report or a verification computes to find the columns singling out rows.

    Returns ``(parts, finish)``: ``parts`` to compute along with the caller's other aggregations and
    ``finish(computed_parts)`` giving the list of
    :class:`~dmondrian.release.identifiers.IdentifyingColumn`. The parts are empty: a Dask table's
    candidate columns are sketched here, in a pass of their own (a delayed graph computed with the
    caller's expressions would not share their reads), and the columns the sketch leaves unsure
    counted in another (:func:`dmondrian.release.unique_count.unique_rows`), on the default
    scheduler.
    """
    if isinstance(table, pd.DataFrame):
        found = identifying_columns(table, released_as_is, allow)
        return [], lambda _: found
    import dask
    from dask import delayed

    from .unique_count import unique_rows

    meta = table._meta
    checked = [c for c in candidates(meta.dtypes, released_as_is) if c not in allow]
    if not checked:
        return [], lambda _: []
    sketches = [delayed(distinct_sketch, pure=True)(p, checked)
                for p in table[checked].to_delayed(optimize_graph=True)]
    (merged,) = dask.compute(delayed(merge_distinct, pure=True)(*sketches))
    found = estimate_identifying(merged).resolve(lambda unsure: unique_rows(table, unsure))
    return [], lambda _: found

