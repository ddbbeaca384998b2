"""Columns that look like a person key: a warning pointing to ``entity=``.

A ``user_id`` of an event table does not single out rows (each value
covers several), so :mod:`dmondrian.identifiers` does not flag it; released
as is it still links every event of a person, and without ``entity=`` the
classes count rows, not people. A column released as is (integers or text)
is flagged as a person key when, on a table of at least
:data:`~dmondrian.identifiers.MIN_ROWS` rows:

1. it has many values: at least :data:`MIN_VALUES` distinct ones, of which
   at least :data:`MIN_REPEATED` cover two rows or more;
2. the quasi-identifiers are mostly constant within a value, far more
   than chance makes them: of the rows beyond the first of each value, the
   share that bring a combination of QI values the value has not shown yet
   is below :data:`NEW_TUPLE_RATIO` times the same share with the column's
   values shuffled across the rows (same value sizes, QIs independent of
   the value). A person keeps their age and region from one event to the
   next; an ordinary category (a product, a zip code released as is, a
   store) gathers rows of many people, whose QIs differ about as much as
   any rows' do, and a large value (a capital gain of 0) repeats QI
   combinations by chance alone, shuffled or not.

The rule is measured on whole values: rows are kept by a hash of their
value, about :data:`SAMPLE_ROWS` of them, so a value is either in the sample
with all its rows or not at all; a column of few distinct values is ruled
out first on a plain sample of rows. The Dask engine applies the rule to
the first partition, read by its domain pass anyway (a person's rows
usually sit together). Its false and true alarms on Adult, the
census generator and the event generator are in benchmarks/README.md
("Person keys").
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .errors import IdentifyingColumnWarning
from .identifiers import MIN_ROWS, _caller_level

__all__ = ["MIN_REPEATED", "MIN_VALUES", "NEW_TUPLE_RATIO", "SAMPLE_ROWS", "new_tuple_share",
           "person_key_columns", "warn_person_keys"]

#: Distinct values a person key has at least.
MIN_VALUES = 100
#: Values (in the sample) covering two rows or more.
MIN_REPEATED = 30
#: The share of further rows bringing a new QI combination, over the same share
#: with the values shuffled, below which the QIs are "mostly constant" within a value.
NEW_TUPLE_RATIO = 0.5
#: Rows the rule looks at.
SAMPLE_ROWS = 50_000


def _qi_codes(df: pd.DataFrame, qis) -> np.ndarray:
    """One code per row for its QI combination (missing values are a value)."""
    return df.groupby(list(qis), dropna=False, sort=False, observed=True).ngroup().to_numpy()


def _share(values: np.ndarray, combos: np.ndarray, n_values: int) -> float:
    """Share of the rows beyond each value's first that bring a new QI combination."""
    pairs = values.astype(np.int64) * (int(combos.max()) + 1) + combos
    return (len(np.unique(pairs)) - n_values) / (len(values) - n_values)


class _Sample:
    """The sampled rows of one column's values covering two rows or more.

    ``codes`` are their value codes, ``distinct`` estimates the column's
    distinct values and ``repeated`` counts the values covering two rows or
    more; :meth:`combos` groups their QI combinations, the costly part, only
    when the counts leave the rule undecided.
    """

    def __init__(self, df: pd.DataFrame, column):
        values = df[column]
        p = min(1.0, SAMPLE_ROWS / max(len(values), 1))
        self.keep = None
        if p < 1.0:
            # Whole values: a row is kept by a hash of its value, not by chance.
            h = pd.util.hash_pandas_object(values, index=False).to_numpy()
            self.keep = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53 < p
            values = values[self.keep]
        self.present = values.notna().to_numpy()
        codes, uniques = pd.factorize(values[self.present])
        self.distinct = int(round(len(uniques) / p))
        repeats = np.bincount(codes, minlength=len(uniques)) >= 2
        self.repeated = int(repeats.sum())
        self.rows = repeats[codes]
        self.codes = codes[self.rows]

    def combos(self, df: pd.DataFrame, qis, qi_codes=None) -> np.ndarray:
        """The QI combination code of each row of :attr:`codes`."""
        if qi_codes is not None:
            combos = qi_codes if self.keep is None else qi_codes[self.keep]
        else:
            # Each column keeps other rows: group only the sampled ones.
            combos = _qi_codes(df if self.keep is None else df.loc[self.keep, list(qis)], qis)
        return combos[self.present][self.rows]


def _shares(codes: np.ndarray, combos: np.ndarray, repeated: int) -> tuple[float, float]:
    """``(share, shuffled)`` of :func:`new_tuple_share` on a :class:`_Sample`'s rows."""
    if repeated == 0:
        return float("nan"), float("nan")
    shuffled = np.random.default_rng(0).permutation(codes)
    return _share(codes, combos, repeated), _share(shuffled, combos, repeated)


def new_tuple_share(df: pd.DataFrame, column, qis,
                    qi_codes=None) -> tuple[float, float, int, int]:
    """``(share, shuffled, distinct, repeated)`` of ``column`` on a sample of whole values.

    ``share`` is, over the sampled values covering two rows or more, the
    share of their rows beyond the first that bring a QI combination new to
    the value (``nan`` when none repeats), and ``shuffled`` the same with
    the values shuffled across those rows; ``distinct`` estimates the
    column's distinct values, ``repeated`` counts the sampled values covering
    two rows or more. ``qi_codes``, one code per row of ``df`` for its QI
    combination, spares the caller of several columns grouping the QIs again.

    Examples
    --------
    >>> df = pd.DataFrame({"u": np.repeat(np.arange(500), 4),
    ...                    "age": np.repeat(np.arange(500) % 70, 4)})
    >>> share, shuffled, distinct, repeated = new_tuple_share(df, "u", ["age"])
    >>> share, shuffled > 0.5, distinct, repeated
    (0.0, True, 500, 500)
    """
    sample = _Sample(df, column)
    combos = sample.combos(df, qis, qi_codes)
    return (*_shares(sample.codes, combos, sample.repeated), sample.distinct, sample.repeated)


def person_key_columns(df: pd.DataFrame, candidates, qis, allow=()) -> list:
    """``[(column, share, shuffled, distinct)]`` of the ``candidates`` that look like a
    person key.

    ``candidates`` are columns released as is of an identifier's kind (see
    :func:`dmondrian.identifiers.candidates`), less those already flagged.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> users = np.repeat(np.arange(2_000), 5)
    >>> df = pd.DataFrame({"user": users, "age": users % 60,
    ...                    "device": rng.integers(0, 3, len(users)),
    ...                    "shop": rng.integers(0, 300, len(users))})
    >>> [f[0] for f in person_key_columns(df, ["user", "shop"], ["age", "device"])]
    ['user']
    """
    if len(df) < MIN_ROWS or not qis:
        return []
    found = []
    qi_codes = None
    for column in candidates:
        if column in allow or column not in df.columns:
            continue
        values = df[column]
        if len(values) > 2 * SAMPLE_ROWS:
            # Few distinct values show as few in any sample of rows: skip them cheaply.
            rows = np.random.default_rng(0).choice(len(values), SAMPLE_ROWS, replace=False)
            if values.iloc[rows].nunique(dropna=True) < MIN_VALUES:
                continue
        try:
            sample = _Sample(df, column)
        except TypeError:  # unhashable objects: not a key's values
            continue
        if sample.distinct < MIN_VALUES or sample.repeated < MIN_REPEATED:
            continue  # decided by the counts alone: spare grouping the QIs and the pairs
        if qi_codes is None and len(values) <= SAMPLE_ROWS:
            qi_codes = _qi_codes(df, qis)  # every column reads all the rows: group once
        share, shuffled = _shares(sample.codes, sample.combos(df, qis, qi_codes),
                                  sample.repeated)
        if share < NEW_TUPLE_RATIO * shuffled:
            found.append((column, float(share), float(shuffled), sample.distinct))
    return found


def warn_person_keys(found: list) -> None:
    """One :class:`~dmondrian.errors.IdentifyingColumnWarning` per person key found."""
    for column, share, shuffled, distinct in found:
        message = (f"column {column!r} looks like a person key: about {distinct:,} values "
                   f"in the rows looked at, "
                   f"each covering several rows whose quasi-identifiers mostly repeat "
                   f"({share:.0%} of the further rows bring a new combination, "
                   f"{shuffled:.0%} if the values were shuffled); classes count "
                   f"rows, not people: pass entity={column!r} (--entity {column}) so every "
                   f"class holds k people and the column is not released, or "
                   f"allow_unique=[{column!r}] if it is not a person")
        warnings.warn(IdentifyingColumnWarning(column, message), stacklevel=_caller_level())
