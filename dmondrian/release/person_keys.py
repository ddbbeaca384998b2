"""Columns that look like a person key: a warning pointing to ``entity=``.

A ``user_id`` of an event table does not single out rows (each value covers several), so
:mod:`dmondrian.release.identifiers` does not flag it; released as is it still links every event of
a person, and without ``entity=`` the classes count rows, not people. A column released as is
(integers or text) is flagged as a person key when, on a table of at least
:data:`~dmondrian.release.identifiers.MIN_ROWS` rows:

1. it has many values: at least :data:`MIN_VALUES` distinct ones, of which
   at least :data:`MIN_REPEATED` cover two rows or more;
2. the quasi-identifiers are mostly constant within a value, far more than chance makes them: of the
   rows beyond the first of each value, the share that bring a combination of QI values the value
   has not shown yet is below :data:`NEW_TUPLE_RATIO` times the same share with the column's values
   shuffled across the rows (same value sizes, QIs independent of the value). A person keeps their
   age and region from one event to the next; an ordinary category (a product, a zip code released
   as is, a store) gathers rows of many people, whose QIs differ about as much as any rows' do, and
   a large value (a capital gain of 0) repeats QI combinations by chance alone, shuffled or not.

The rule is measured on whole values: rows are kept by a hash of their value, about
:data:`SAMPLE_ROWS` of them, so a value is either in the sample with all its rows or not at all; a
column of few distinct values is ruled out first on a plain sample of rows. The Dask engine applies
the rule to the first partition, read by its domain pass anyway (a person's rows usually sit
together). Its false and true alarms on Adult, the census generator and the event generator are in
benchmarks/README.md ("Person keys").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import IdentifyingColumnWarning
from .identifiers import (
    _SAMPLE,
    MIN_ROWS,
    REFUSED,
    IdentifyingColumn,
    _caller_level,
    _run_lengths,
    candidates,
    decide,
    few_in_sample,
    fewer_values,
    int_span,
    sample_positions,
    small_int_codes,
    value_runs,
)

__all__ = ["MIN_REPEATED", "MIN_VALUES", "NEW_TUPLE_RATIO", "SAMPLE_ROWS", "new_tuple_share",
           "person_key_columns", "warn_person_keys", "release_guard"]

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


def _qi_hash(df: pd.DataFrame, qis, qi_keys=None) -> np.ndarray:
    """One code per row for its QI combination, from ``qi_keys`` (the engine's encoded QI arrays,
    one per QI, when it has them) or else from the QI columns: the combination's number when integer
    keys' ranges allow one, else a 64-bit hash (uint64). Two combinations share a hash with a
    probability of about 2**-64, which moves a share by a row or so in a table's worth of trials."""
    if qi_keys is None:
        return pd.util.hash_pandas_object(df[list(qis)], index=False).to_numpy(np.uint64)
    keys = [np.asarray(k) for k in qi_keys]
    if all(k.dtype.kind in "iu" for k in keys) and len(df):
        # Integer keys whose ranges multiply under 2**31: each combination its own number,
        # sum((key_j - low_j) * step_j), built in place and shifted by the lows once. Large
        # keys (dates) may wrap int64 on the way; the result, under 2**31, is exact modulo
        # 2**64, hence exact.
        lows = [int(k.min()) for k in keys]
        spans = [int(k.max()) - low + 1 for k, low in zip(keys, lows)]
        if np.prod(np.asarray(spans, dtype=np.float64)) < 2**31:
            code = keys[0].astype(np.int64)
            shift = lows[0]
            for k, low, span in zip(keys[1:], lows[1:], spans[1:]):
                code *= span
                code += k.astype(np.int64, copy=False)
                shift = shift * span + low
            code -= np.int64((shift + 2**63) % 2**64 - 2**63)
            return code
    h = np.zeros(len(df), dtype=np.uint64)
    for k in keys:
        h = h * np.uint64(_MIX) ^ pd.util.hash_array(k)
    return h


# An odd 64-bit multiplier (the golden ratio's): multiplying by it is one-to-one.
_MIX = 0x9E3779B97F4A7C15


def _distinct(a: np.ndarray, presorted: bool = False) -> int:
    """Distinct values of the 1-d array ``a`` (a sort, unless ``presorted``: numpy's
    hash-based unique is slower on tens of thousands of 64-bit words)."""
    if len(a) == 0:
        return 0
    a = a if presorted else np.sort(a)
    return 1 + int(np.count_nonzero(a[1:] != a[:-1]))


def _share(values: np.ndarray, combos: np.ndarray, n_values: int,
           distinct_pairs: int | None = None) -> float:
    """Share of the rows beyond each value's first that bring a new QI combination.

    ``values`` label each row's value (any integers, one label a value), ``n_values``
    counts them, ``distinct_pairs`` their (value, combination) pairs when the caller
    counted them. A value of one row adds one pair and one value: rows of values seen
    once leave the share as it is over the other rows.
    """
    if distinct_pairs is None:
        distinct_pairs = _distinct(_pairs(values, combos)[0])
    return (distinct_pairs - n_values) / (len(values) - n_values)


def _pairs(values: np.ndarray, combos: np.ndarray) -> tuple[np.ndarray, int | None]:
    """One integer per row for its (value, QI combination) pair, and the bits the value (less
    the smallest) is shifted by, None when the pairs are hashed."""
    if combos.dtype != np.uint64 and len(values):
        low, bits = int(values.min()), int(combos.max()).bit_length()
        if bits <= 31 and (int(values.max()) - low + 1) << bits <= 2**63:
            # Each pair its own number, in the values' order.
            pairs = values.astype(np.int64)
            pairs -= low
            pairs <<= bits
            pairs |= combos
            return pairs, bits
    # Hashed combinations: mixed with each value one-to-one.
    return combos.astype(np.uint64, copy=False) ^ (values.astype(np.uint64) * np.uint64(_MIX)), None


@dataclass
class _Counted:
    """One column's values counted over every row, as :func:`release_guard` counts them.

    ``runs`` are the rows each value covers; ``labels`` one integer per row
    holding a value (``present`` marks them; None: every row), one label a value,
    ``dense`` when they are codes from 0 (a bincount counts them); ``pairs`` the
    distinct (value, QI combination) pairs, when the count sorted them.
    """

    runs: np.ndarray
    labels: np.ndarray
    present: np.ndarray | None
    dense: bool
    pairs: int | None = None

    @classmethod
    def of(cls, values: pd.Series, codes: np.ndarray | None,
           combos: np.ndarray | None = None) -> _Counted:
        """Count ``values``: a bincount of ``codes``, their
        :func:`~dmondrian.release.identifiers.small_int_codes` (or None), a sort of other numpy
        integers (labelled by themselves; with ``combos``, one per row, the sort of their pairs with
        the QI combinations, which counts both), a hash table of anything else."""
        if codes is not None:
            runs = np.bincount(codes)
            return cls(runs[runs > 0], codes, None, True)
        if isinstance(values.dtype, np.dtype) and values.dtype.kind == "i":
            labels = values.to_numpy()
            pairs, bits = (None, None) if combos is None else _pairs(labels, combos)
            if bits is None:
                return cls(_run_lengths(np.sort(labels)), labels, None, False)
            pairs.sort()
            # Sorted by value first: a value's run is the run of its pairs' high bits.
            return cls(_run_lengths(pairs >> bits), labels, None, False,
                       _distinct(pairs, presorted=True))
        labels, _ = pd.factorize(values, use_na_sentinel=True)
        present = labels >= 0
        if present.all():
            present = None
        else:
            labels = labels[present]
        runs = np.bincount(labels)
        return cls(runs[runs > 0], labels, present, True)

    @property
    def distinct(self) -> int:
        return len(self.runs)

    @property
    def repeated(self) -> int:
        return int(np.count_nonzero(self.runs >= 2))

    def shares(self, combos: np.ndarray) -> tuple[float, float]:
        """:func:`new_tuple_share`'s ``(share, shuffled)``, ``combos`` one per row of the
        table, ``shuffled`` nan when ``share`` rules the column out (:func:`_shares`).

        The share is taken over every row holding a value, with no pass to find
        the repeated values' rows: those of a value seen once add one pair and one
        value each, which leaves it as it is. The shuffled share does shuffle the
        repeated values' rows only, as a :class:`_Sample` of every row would.
        """
        if self.present is not None:
            combos = combos[self.present]
        share = _share(self.labels, combos, self.distinct, self.pairs)
        if share >= NEW_TUPLE_RATIO:
            return share, float("nan")
        labels = self.labels if self.dense else pd.factorize(self.labels)[0]
        rows = np.bincount(labels)[labels] >= 2
        return _shares(labels[rows], combos[rows], self.repeated, share=share)


class _Sample:
    """The sampled rows of one column's values covering two rows or more.

    ``codes`` are their value codes, ``distinct`` estimates the column's distinct values and
    ``repeated`` counts the values covering two rows or more; :meth:`combos` groups their QI
    combinations, the costly part, only when the counts leave the rule undecided.
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
        self._count(codes, np.bincount(codes, minlength=len(uniques)), p)

    def _count(self, codes: np.ndarray, counts: np.ndarray, p: float = 1.0) -> None:
        self.distinct = int(round(np.count_nonzero(counts) / p))
        repeats = counts >= 2
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


def _shares(codes: np.ndarray, combos: np.ndarray, repeated: int,
            decide_early: bool = False, share: float | None = None) -> tuple[float, float]:
    """``(share, shuffled)`` of :func:`new_tuple_share` on a :class:`_Sample`'s rows
    (``share`` when the caller has it).

    ``decide_early``: ``shuffled`` (nan) is not measured when ``share`` alone rules
    the column out: a share is at most 1, so ``share >= NEW_TUPLE_RATIO`` is never
    below ``NEW_TUPLE_RATIO`` times any shuffled share.
    """
    if repeated == 0:
        return float("nan"), float("nan")
    if share is None:
        share = _share(codes, combos, repeated)
    if decide_early and share >= NEW_TUPLE_RATIO:
        return share, float("nan")
    shuffled = np.random.default_rng(0).permutation(codes)
    return share, _share(shuffled, combos, repeated)


def new_tuple_share(df: pd.DataFrame, column, qis, qi_codes=None) -> tuple[float, float, int, int]:
    """``(share, shuffled, distinct, repeated)`` of ``column`` on a sample of whole values.

    ``share`` is, over the sampled values covering two rows or more, the share of their rows beyond
    the first that bring a QI combination new to the value (``nan`` when none repeats), and
    ``shuffled`` the same with the values shuffled across those rows; ``distinct`` estimates the
    column's distinct values, ``repeated`` counts the sampled values covering two rows or more.
    ``qi_codes``, one code per row of ``df`` for its QI combination, spares the caller of several
    columns grouping the QIs again.

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


def person_key_columns(df: pd.DataFrame, candidates, qis, allow=(), qi_keys=None,
                       counts=None, combos=None) -> list:
    """``[(column, share, shuffled, distinct)]`` of the ``candidates`` that look like a person key.

    ``candidates`` are columns released as is of an identifier's kind (see
    :func:`dmondrian.release.identifiers.candidates`), less those already flagged. ``qi_keys`` are
    the engine's encoded QI arrays, when it has them (:func:`_qi_hash`); ``counts`` maps a column to
    its values counted over every row (a :class:`_Counted`), when :func:`release_guard` counted
    them, or to None when its sample already showed enough values. A counted column is sampled and
    shuffled only when its share, taken over every row, does not rule it out. ``combos`` are the QI
    combinations of :func:`_qi_hash`, when the caller has them.

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
    counts = counts or {}
    found = []
    for column in candidates:
        if column in allow or column not in df.columns:
            continue
        known = counts.get(column)
        if known is not None:
            if known.distinct < MIN_VALUES or known.repeated < MIN_REPEATED:
                continue  # decided by the counts alone: no sample, no QI combinations
            if combos is None:
                combos = _qi_hash(df, qis, qi_keys)
            share, shuffled = known.shares(combos)
            if share < NEW_TUPLE_RATIO * shuffled:
                found.append((column, float(share), float(shuffled), known.distinct))
            continue
        values = df[column]
        if column not in counts and len(values) > 2 * SAMPLE_ROWS:
            # Few distinct values show as few in any sample of rows: skip them cheaply.
            if few_in_sample(values, SAMPLE_ROWS) < MIN_VALUES:
                continue
        try:
            sample = _Sample(df, column)
        except TypeError:  # unhashable objects: not a key's values
            continue
        if sample.distinct < MIN_VALUES or sample.repeated < MIN_REPEATED:
            continue  # decided by the counts alone: spare grouping the QIs and the pairs
        if combos is None:
            combos = _qi_hash(df, qis, qi_keys)  # one pass over the QIs, for every column
        share, shuffled = _shares(sample.codes, sample.combos(df, qis, combos),
                                  sample.repeated, decide_early=True)
        if share < NEW_TUPLE_RATIO * shuffled:
            found.append((column, float(share), float(shuffled), sample.distinct))
    return found


def release_guard(df: pd.DataFrame, released_as_is, qis, allow=(), qi_keys=None,
                  person_keys: bool = True) -> tuple[list, list]:
    """The columns released as is that single out rows, and those that look like a
    person key: both rules decided from one count of each column's values.

    Each candidate column (:func:`dmondrian.release.identifiers.candidates`) is counted once
    (:func:`dmondrian.release.identifiers.value_runs`; on a long table a sample first rules out a
    column of few values, see :func:`dmondrian.release.identifiers.few_in_sample`). Its rows of
    their own decide :func:`dmondrian.release.identifiers.decide`; a column not refused has its
    distinct and repeated values from the same count, which settle the person-key rule for most
    columns before any QI combination is formed.

    Parameters
    ----------
    df : pandas.DataFrame
        The table, its identifiers and entity column dropped.
    released_as_is : list
        Its columns released unchanged.
    qis : list
        The quasi-identifiers.
    allow : list
        ``allow_unique``: columns judged safe.
    qi_keys : list of numpy.ndarray, optional
        The engine's encoded QI arrays (:func:`_qi_hash`).
    person_keys : bool
        Whether to look for person keys (not with ``entity``).

    Returns
    -------
    (list of IdentifyingColumn, list)
        The columns to refuse, and :func:`person_key_columns`'s findings.
    """
    n = len(df)
    if n < MIN_ROWS:
        return [], []
    found, counts, rest, combos = [], {}, [], None
    sample_rows = SAMPLE_ROWS if n > 2 * SAMPLE_ROWS else _SAMPLE
    positions = sample_positions(n, sample_rows)  # drawn once for every column
    for column in candidates(df.dtypes, released_as_is):
        if column in allow:
            continue
        values = df[column]
        try:
            sampled = few_in_sample(values, sample_rows, positions)
            if sampled is not None and n > 2 * SAMPLE_ROWS and sampled < MIN_VALUES:
                continue  # neither rule: few values in the sample
            if sampled is not None and sampled < sample_rows / 4:
                rest.append(column)  # not identifying; the person-key rule samples it
                continue
            span = int_span(values)
            if fewer_values(values, MIN_VALUES, span):
                continue  # neither rule: under MIN_VALUES values, of which fewer are unique
            counted = None
            if n > SAMPLE_ROWS:
                codes = small_int_codes(values, span)
            else:
                # Integers spanning more than the rows are sorted with the QI combinations:
                # one sort counts the values and their pairs, both of which the share of a
                # column of many values needs; a bincount counts the others.
                fuse = person_keys and qis and span is not None and span[1] - span[0] >= n
                codes = None if fuse else small_int_codes(values, span)
                if fuse and combos is None:
                    combos = _qi_hash(df, qis, qi_keys)
                counted = _Counted.of(values, codes, combos if fuse else None)
            runs = value_runs(values, codes) if counted is None else counted.runs
        except TypeError:  # unhashable objects (lists, dicts): not an identifier's values
            continue
        unique = int(np.count_nonzero(runs == 1))
        if decide(n, unique=unique) == REFUSED:
            found.append(IdentifyingColumn(column, unique / n, n, True))
            continue
        rest.append(column)
        # Over every row, these are the person-key sample's own counts.
        counts[column] = counted
    if not person_keys:
        return found, []
    return found, person_key_columns(df, rest, qis, qi_keys=qi_keys, counts=counts, combos=combos)


def warn_person_keys(found: list) -> None:
    """One :class:`~dmondrian.errors.IdentifyingColumnWarning` per person key found."""
    for column, share, shuffled, distinct in found:
        message = (f"column {column!r} looks like a person key: about {distinct:,} values in the "
                   "rows looked at, each covering several rows whose quasi-identifiers mostly "
                   f"repeat ({share:.0%} of the further rows bring a new combination, "
                   f"{shuffled:.0%} if the values were shuffled); classes count rows, not people: "
                   f"pass entity={column!r} (--entity {column}) so every class holds k people and "
                   f"the column is not released, or allow_unique=[{column!r}] if it is not a "
                   "person")
        warnings.warn(IdentifyingColumnWarning(column, message), stacklevel=_caller_level())
