"""Direct identifiers: columns removed from a release, and columns that single out rows.

A release that keeps a column unique to each row (a record id, a name, an
email) is linkable whatever k says, so no engine releases one unless told:

* ``identifiers=[...]``: columns removed from the release (the command
  line's ``--drop``). They take no part in the anonymization.
* any other column released as is that singles out rows is refused: the
  engine raises :class:`~dmondrian.errors.IdentifyingColumnError` naming each such column, the share
  of the rows it singles out, and both ways out; ``allow_unique=[...]`` (``--allow-unique``) lets
  through a column the user has judged safe (a visit number, a row hash kept on purpose).

Which columns single out rows
-----------------------------
Only columns released unchanged are looked at: not the QIs (generalized), not the sensitive column
(its values are what l and t protect), not the noised columns (replaced by noisy class means), not
the identifiers (removed). Of those, a column singles out rows when, on a table of at least
:data:`MIN_ROWS` rows, at least :data:`UNIQUE_SHARE` of the rows carry a value no other row has. The
column must also be of a kind an identifier takes:

* integers, and text (strings, categoricals): record ids, names, emails;
* not floats: a float column is a continuous measurement (a weight, an
  income, a blood level), unique per row by the nature of measuring, and published as one. The dtype
  decides, not the values: an income rounded to whole dollars is no less a measurement, and is
  mostly unique on a large table. An integer id read as float (a CSV column with gaps) is therefore
  not recognized: cast it to ``Int64``, or name it in ``identifiers``;
* nor datetimes, durations and booleans. A measurement that does link (an
  exact timestamp) belongs among the QIs.

The index
---------
An input's index is never a release column. The in-memory results (a pandas frame, a lazy Dask
frame, the estimator's output) are the caller's own frame: its index is how pandas and scikit-learn
align ``X`` with ``y`` (a shuffled split, a filtered frame, a dask-written folder read by pandas),
and it is not published. Only a writer publishes, and a writer writes no index unless asked
(``write_options={"write_index": True}``); when asked, it judges the index like a column, under its
name (``"index"`` if it has none), before it writes
(:func:`dmondrian._dask.written_check.refuse_written_index`), and refuses one that singles out rows
unless ``allow_unique`` names it. An index that numbers the rows (a default RangeIndex, the row
numbers of each file dask reads, or each partition's rows numbered in order) is refused too,
whatever the table's size: each file's rows are shuffled (:mod:`dmondrian.release.row_order`), and
their numbers beside them would give the input's order back. ``allow_unique=["index"]`` writes it
all the same.

On the Dask engine the verdict is the local engine's, reached in two steps. A pass the engine makes
anyway also reads the candidate columns and keeps a HyperLogLog sketch of each
(``dask.dataframe.hyperloglog``), which estimates the count ``d`` of distinct values over the ``n``
rows; the estimate is taken as right within :data:`HLL_MARGIN` either way. Of the ``u`` rows holding
a value of their own, each holds a distinct value and each of the other ``d - u`` values takes at
least two rows, so ``u + 2 (d - u) <= n`` (a missing value is no value), that is ``2d - n <= u <=
d``. Hence:

* ``d >= 3/4 n`` (:data:`DISTINCT_REFUSED`, at the estimate's low end):
  ``u >= 2d - n >= n / 2``, the column is refused without more reading;
* ``d < n / 2`` (at the estimate's high end): ``u <= d < n / 2``, it is not;
* in between (1,000 draws of 1,000 values are 63 % distinct, and 37 % of the rows unique), the rows
  whose value occurs once are counted exactly, in an extra pass over those columns only
  (:func:`dmondrian.release.unique_count.unique_rows`: value counts hash-partitioned across the
  workers, of which the client receives one number per column), and the local rule applies.

Which pass:

* ``anonymize_to_parquet`` (and the command line's ``--distributed`` Parquet output): the pass that
  writes the release (:mod:`dmondrian._dask.written_check`), which reads every column anyway; the
  domain pass then reads only the QIs, so a wide table costs a copy. The verdict comes once every
  file is written: the files are then removed (and the folder, if the run created it) before the
  error is raised, so nothing at the destination looks like a complete release.
* the lazy ``anonymize(ddf, ...)`` and ``anonymize_to_csv``: the domain
  pass (:mod:`dmondrian._dask.domain_pass`), which then reads the candidate columns beside the QIs;
  the error is raised by ``anonymize`` itself, before any lazy frame exists (a frame computed later
  would have to fail half-way, after the caller may have written part of it).
* a fitted plan's transform of a dask DataFrame: its counting pass
  (:func:`dmondrian.plans.dask.transform_dask`), before the lazy release is returned; its
  ``transform_to_parquet`` (and the command line's ``--plan`` on Dask), the pass that writes, whose
  files are removed as ``anonymize_to_parquet``'s are. Fitting a plan releases nothing and checks
  nothing.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._compat import hll_estimate_count
from .._kernel.strings import number_strings
from ..errors import ColumnError, IdentifyingColumnError, MissingColumnError, ParameterError
from ..kinds.keys import arrow_string_chunks, number_text

__all__ = ["MIN_ROWS", "UNIQUE_SHARE", "IdentifyingColumn", "check_identifiers", "released_as_is",
           "check_allow_unique", "identifying_columns", "refuse_identifying", "candidates",
           "DistinctSketch", "distinct_sketch", "merge_distinct", "estimate_identifying",
           "SketchVerdict", "DISTINCT_REFUSED", "HLL_MARGIN", "INDEX", "without_identifiers",
           "decide", "value_runs", "identifier_kind", "few_in_sample", "sample_positions",
           "fewer_values", "small_int_codes", "int_span", "REFUSED", "ALLOWED", "UNSURE"]

#: Tables with fewer rows are not checked (a small table has unique values by chance).
MIN_ROWS = 1_000
#: A column singles out rows when at least this share of the rows hold a value of their own.
UNIQUE_SHARE = 0.5
#: The name the index is known by when it has none.
INDEX = "index"
#: On Dask, a column with at least this many distinct values per row singles out rows
#: (at least ``2 * DISTINCT_REFUSED - 1 = UNIQUE_SHARE`` of the rows hold a value of their own).
DISTINCT_REFUSED = (1 + UNIQUE_SHARE) / 2
#: The relative error the Dask engine allows its distinct-count estimate either way. The
#: sketch's standard error is 1.04 / 64 (2**12 registers), about 1.6 %, and the estimator
#: is biased by up to about 2 % where it switches from linear counting to HyperLogLog's
#: (near 10,000 values): 15 % is over six standard errors beyond that bias.
HLL_MARGIN = 0.15
# HyperLogLog registers: 2**12 of them.
_HLL_BITS = 12


@dataclass(frozen=True)
class IdentifyingColumn:
    """A column released as is that singles out rows.

    Attributes
    ----------
    column : object
        Its name (for the index, its name or ``"index"``).
    share : float
        Share of the rows whose value no other row has (exact), or, when
        ``exact`` is False, the estimated count of distinct values over the
        rows (at least :data:`DISTINCT_REFUSED`, beyond the estimate's error).
    rows : int
        Rows of the table.
    exact : bool
        Whether ``share`` was counted exactly, or estimated (Dask, a column
        whose distinct values alone show it singles out rows).
    is_index : bool
        Whether it is the table's index.
    numbered : bool
        Whether it is an index that numbers the rows
        (:func:`dmondrian._dask.written_check.numbers_rows`): written, it would
        give the input's order back.
    """

    column: object
    share: float
    rows: int
    exact: bool = True
    is_index: bool = False
    numbered: bool = False

    def message(self) -> str:
        """The warning's text: what singles out rows and what to do about it."""
        what = f"the index ({self.column!r})" if self.is_index else f"column {self.column!r}"
        measured = _why(self)
        fix = ("write no index (write_index=False)" if self.is_index
               else f"remove it (identifiers=[{self.column!r}], --drop {self.column})")
        return (f"{what} singles out rows: {measured}, and it is released unchanged; {fix}, "
                f"or, if it is safe, allow it (allow_unique=[{self.column!r}], "
                f"--allow-unique {self.column})")

    def to_dict(self) -> dict:
        """Plain-Python fields, for reports and manifests."""
        return {"column": str(self.column), "share": float(self.share), "rows": int(self.rows),
                "exact": self.exact, "index": self.is_index, "numbered": self.numbered}


#: Why an index that numbers the rows is refused.
_NUMBERED = ("it numbers the rows in the input's order, which the shuffled rows of each file "
             "would give back")


def _why(f: IdentifyingColumn) -> str:
    """What makes ``f`` single out rows, in words."""
    if f.numbered:
        return _NUMBERED
    if f.exact:
        return f"{f.share:.0%} of the {f.rows:,} rows carry a value no other row has"
    return (f"about {f.share:.0%} of its {f.rows:,} values are distinct (estimated), so at "
            "least half the rows carry a value no other row has")


def _names(value, name: str) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        value = [value]
    names = list(value)
    if len(set(map(repr, names))) != len(names):
        raise ParameterError(name, f"{name} names a column twice: {names!r}")
    return names


def check_identifiers(identifiers, columns, qis, sensitive=None, noised=()) -> list:
    """The ``identifiers`` option: columns of the table, none a QI, sensitive or noised.

    Examples
    --------
    >>> check_identifiers("email", ["age", "email"], ["age"])
    ['email']
    >>> check_identifiers(["age"], ["age", "email"], ["age"])
    Traceback (most recent call last):
    ...
    dmondrian.errors.ColumnError: identifier column 'age' is a quasi-identifier; it cannot be \
both removed and generalized
    """
    names = _names(identifiers, "identifiers")
    cols = list(columns)
    for c in names:
        if c not in cols:
            raise MissingColumnError(c, f"identifier column {c!r} is not a column of the table")
        for role, members in (("a quasi-identifier", qis), ("noised", noised),
                              ("the sensitive column", [] if sensitive is None else [sensitive])):
            if c in members:
                raise ColumnError(c, f"identifier column {c!r} is {role}; it cannot be both "
                                     f"removed and {'generalized' if members is qis else 'kept'}")
    return names


def check_allow_unique(allow_unique, columns, index_name=None) -> list:
    """The ``allow_unique`` option: columns of the table (or the index's name, or ``"index"``).

    Examples
    --------
    >>> check_allow_unique(["visit"], ["visit", "age"])
    ['visit']
    >>> check_allow_unique(["visitt"], ["visit", "age"])
    Traceback (most recent call last):
    ...
    dmondrian.errors.MissingColumnError: allow_unique names 'visitt', which is not a column of \
the table
    """
    names = _names(allow_unique, "allow_unique")
    known = [*columns, INDEX] + ([] if index_name is None else [index_name])
    for c in names:
        if c not in known:
            raise MissingColumnError(c, f"allow_unique names {c!r}, which is not a column of "
                                        "the table")
    return names


def released_as_is(columns, opts) -> list:
    """The columns an anonymization with checked options ``opts`` releases unchanged.

    Not the QIs, the sensitive column, the noised columns, the identifiers
    and the entity column (removed) nor the class column (added).
    """
    changed = {*opts.qis, *(s.column for s in opts.noise), *opts.identifiers}
    if getattr(opts, "entity", None) is not None:
        changed.add(opts.entity)
    if opts.sensitive is not None:
        changed.add(opts.sensitive)
    return [c for c in columns if c not in changed and c != opts.class_column]


def identifier_kind(dtype) -> str | None:
    """``"integer"``, ``"text"``, or None for a column no identifier is made of."""
    if isinstance(dtype, np.dtype):  # numpy's own: its kind says it, without pandas' tests
        return "integer" if dtype.kind in "iu" else "text" if dtype.kind in "OSU" else None
    if isinstance(dtype, pd.StringDtype):
        return "text"
    types = pd.api.types
    if isinstance(dtype, pd.CategoricalDtype):
        return "text"
    if types.is_bool_dtype(dtype) or types.is_float_dtype(dtype):
        return None
    if types.is_integer_dtype(dtype):
        return "integer"
    return "text" if types.is_string_dtype(dtype) or types.is_object_dtype(dtype) else None


def candidates(dtypes, released_as_is) -> list:
    """The columns to check: released as is, and of an identifier's kind.

    ``dtypes`` maps columns to dtypes; ``released_as_is`` lists the columns released unchanged. The
    index is never one (see the module's docstring: only a writer asked to write it judges it,
    :func:`dmondrian._dask.written_check.index_candidate`).
    """
    dtypes = dict(dtypes.items())  # a Series' lookups cost more than the test
    return [c for c in released_as_is if identifier_kind(dtypes[c]) is not None]


def _series(df: pd.DataFrame, column) -> tuple[pd.Series, bool]:
    if column in df.columns:
        return df[column], False
    return pd.Series(df.index, index=None, copy=False), True


# Rows of the sample that rules out a column of few distinct values at once.
_SAMPLE = 20_000

#: :func:`decide`'s verdicts.
REFUSED, ALLOWED, UNSURE = "refused", "allowed", "unsure"


def decide(rows: int, *, unique: int | None = None, distinct: float | None = None,
           margin: float = 0.0, unseen: int = 0) -> str:
    """The one decision on a column released as is, from the counts an engine has.

    ``unique`` is the exact count of rows whose value no other row has (the local engine's count, or
    :mod:`dmondrian.release.unique_count`'s on the Dask engine's cluster); without it, ``distinct``
    is an estimate of the distinct values, right within ``margin`` either way, of which ``unseen``
    rows left out of it may each add one (see the module's docstring). Returns :data:`REFUSED`,
    :data:`ALLOWED`, or :data:`UNSURE` (the estimate settles nothing: count ``unique``).

    Examples
    --------
    >>> decide(2000, unique=1000), decide(2000, unique=999), decide(999, unique=999)
    ('refused', 'allowed', 'allowed')
    >>> decide(2000, distinct=1900, margin=0.15), decide(2000, distinct=1200, margin=0.15)
    ('refused', 'unsure')
    """
    if rows < MIN_ROWS:
        return ALLOWED
    if unique is not None:
        return REFUSED if unique >= UNIQUE_SHARE * rows else ALLOWED
    if distinct / (1 + margin) >= DISTINCT_REFUSED * rows:
        return REFUSED
    if distinct / (1 - margin) + unseen >= UNIQUE_SHARE * rows:
        return UNSURE
    return ALLOWED


def int_span(values: pd.Series) -> tuple[int, int] | None:
    """``(smallest, largest)`` of a non-empty numpy integer column, else None."""
    if not (isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu") or not len(values):
        return None
    a = values.to_numpy()
    return int(a.min()), int(a.max())


def small_int_codes(values: pd.Series, span: tuple[int, int] | None = None,
                    per_row: int = 4) -> np.ndarray | None:
    """Each row's value less the column's smallest, for a numpy integer column whose
    values span fewer than ``per_row`` times its rows (a count, an amount, a small code);
    else None. Such codes count the values by a ``bincount``, cheaper than a sort or a
    hash. ``span`` is the column's :func:`int_span`, when the caller has it.

    Examples
    --------
    >>> small_int_codes(pd.Series([7, 5, 9])).tolist(), small_int_codes(pd.Series([0, 10**9]))
    ([2, 0, 4], None)
    """
    span = int_span(values) if span is None else span
    if span is None or span[1] - span[0] >= per_row * len(values):
        return None
    a = values.to_numpy()
    return (a - a.dtype.type(span[0])).astype(np.intp, copy=False)


def value_runs(values: pd.Series, codes: np.ndarray | None = None) -> np.ndarray:
    """The rows each distinct value of ``values`` covers (missing values are no value).

    Integers are counted by a sort (by a ``bincount`` of ``codes``, their :func:`small_int_codes`,
    when given), other values by a hash table; raises TypeError on unhashable objects.

    Examples
    --------
    >>> sorted(value_runs(pd.Series([3, 1, 3, None, 7], dtype="Int64")).tolist())
    [1, 1, 2]
    """
    if codes is not None:
        runs = np.bincount(codes)
        return runs[runs > 0]
    if pd.api.types.is_integer_dtype(values.dtype) and not isinstance(values.dtype,
                                                                      pd.CategoricalDtype):
        return _run_lengths(np.sort(values.dropna().to_numpy(dtype=np.int64)))
    counts = values.value_counts(dropna=True, sort=False).to_numpy()
    return counts[counts > 0]


def _run_lengths(a: np.ndarray) -> np.ndarray:
    """The lengths of the runs of equal values of the sorted array ``a``."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], a[1:] != a[:-1]]))
    return np.diff(np.append(starts, len(a)))


_NO_CODES = np.zeros(0, dtype=np.int64)


def fewer_values(values: pd.Series, limit: int, span: tuple[int, int] | None = None) -> bool | None:
    """Whether ``values`` hold fewer than ``limit`` distinct values (missing left out), when
    that costs less than counting each value's rows: from a numpy integer column's range
    (``span``, its :func:`int_span`; only True, or None), a categorical's codes, or Arrow
    text numbered in compiled code while its values are fewer
    (:func:`dmondrian.kinds.keys.number_text`, which stops at the limit); else None.

    Examples
    --------
    >>> fewer_values(pd.Series(["a", "b", "a", None], dtype="category"), 3)
    True
    >>> fewer_values(pd.Series(["a", "b", "c"], dtype="string[pyarrow]"), 3)
    False
    >>> fewer_values(pd.Series([1, 2]), 3, (1, 2)), fewer_values(pd.Series([1, 9]), 3, (1, 9))
    (True, None)
    """
    if span is not None:
        return True if span[1] - span[0] + 1 < limit else None
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()
        return int(np.count_nonzero(np.bincount(codes[codes >= 0],
                                                minlength=len(values.cat.categories)))) < limit
    data = getattr(values.array, "_pa_array", None)
    if data is None:
        return None
    if pa.types.is_string(data.type) or pa.types.is_large_string(data.type):
        chunks = list(arrow_string_chunks(data))
        if len(chunks) > 1:  # chunks may share values: number_text merges them
            return number_text(values, limit - 1, codes=False) is not None
        # One chunk: its count says it, with no values to read back.
        return not chunks or number_strings(*chunks[0][:4], np.zeros(limit - 1, dtype=np.int64),
                                             _NO_CODES) >= 0
    return int(pc.count_distinct(data, mode="only_valid").as_py()) < limit


def sample_positions(n: int, sample_rows: int = _SAMPLE) -> np.ndarray | None:
    """The row positions :func:`few_in_sample` reads (a fixed seed), or None when ``n``
    rows are too few to sample (at most twice ``sample_rows``). Drawing them costs
    more than reading them: a caller judging several columns draws them once."""
    if n <= 2 * sample_rows:
        return None
    return np.random.default_rng(0).choice(n, sample_rows, replace=False)


def few_in_sample(values: pd.Series, sample_rows: int = _SAMPLE,
                  rows: np.ndarray | None = None) -> int | None:
    """Distinct values among ``sample_rows`` rows drawn from ``values`` (``rows``:
    :func:`sample_positions`'s), or None when the column is too short to sample (at
    most twice ``sample_rows``)."""
    if len(values) <= 2 * sample_rows:
        return None
    if rows is None:
        rows = sample_positions(len(values), sample_rows)
    return int(values.iloc[rows].nunique(dropna=True))


def _unique_rows(values: pd.Series, sampled: int | None = None,
                 sample_rows: int = _SAMPLE) -> int | None:
    """Rows whose value no other row has; None when a sample rules the column out.

    If half the rows hold values of their own, each row sampled is one of them with probability at
    least 1/2, and those are distinct in the sample: a sample of ``sample_rows`` rows then shows
    ``sample_rows / 4`` distinct values or more but with a probability below 1e-200. Fewer
    (``sampled``: :func:`few_in_sample`'s count, when the caller has it), and the column is not
    counted (a ward, a diagnosis: the common case costs a sample).
    """
    if sampled is None:
        sampled = few_in_sample(values, sample_rows)
    if sampled is not None and sampled < sample_rows / 4:
        return None
    runs = value_runs(values)
    return int(np.count_nonzero(runs == 1))


def identifying_columns(df: pd.DataFrame, released_as_is, allow=()) -> list[IdentifyingColumn]:
    """The columns of ``df`` released as is that single out rows (exact counts).

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    released_as_is : list
        Its columns released unchanged.
    allow : list
        Columns judged safe (``allow_unique``), not reported.

    Returns
    -------
    list of IdentifyingColumn

    Examples
    --------
    >>> df = pd.DataFrame({"id": range(2000), "ward": [1, 2] * 1000,
    ...                    "weight": np.linspace(50, 90, 2000), "code": range(2000)})
    >>> [f.column for f in identifying_columns(df, ["id", "ward", "weight"], allow=["code"])]
    ['id']
    """
    n = len(df)
    if n < MIN_ROWS:
        return []
    found = []
    for column in candidates(df.dtypes, released_as_is):
        if column in allow:
            continue
        try:
            unique = _unique_rows(df[column])
        except TypeError:  # unhashable objects (lists, dicts): not an identifier's values
            continue
        if unique is not None and decide(n, unique=unique) == REFUSED:
            found.append(IdentifyingColumn(column, unique / n, n, True))
    return found


def without_identifiers(df, identifiers):
    """``df`` (pandas or Dask) without the ``identifiers`` columns it has."""
    drop = [c for c in identifiers if c in df.columns]
    return df.drop(columns=drop) if drop else df


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside dmondrian, seen from the caller."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def refusal_message(found: list[IdentifyingColumn]) -> str:
    """One line naming every column of ``found``, what it singles out, and the ways out.

    Examples
    --------
    >>> print(refusal_message([IdentifyingColumn("person_id", 1.0, 5000)]))
    ... # doctest: +ELLIPSIS
    refusing to release column 'person_id' unchanged: it singles out rows (100% of the ...
    """
    columns = [f for f in found if not f.is_index]
    index = [f for f in found if f.is_index]
    parts = []
    if len(columns) == 1:
        parts.append(f"column {columns[0].column!r} unchanged: it singles out rows "
                     f"({_why(columns[0])})")
    elif columns:
        parts.append(f"columns {', '.join(repr(f.column) for f in columns)} unchanged: they "
                     "single out rows (" + "; ".join(f"{f.column!r}: {_why(f)}" for f in columns)
                     + ")")
    if index:
        parts.append(f"the index ({index[0].column!r}): " + (
            _NUMBERED if index[0].numbered else f"it singles out rows ({_why(index[0])})"))
    names = [f.column for f in found]
    ways = []
    if columns:
        it = "it" if len(columns) == 1 else "them"
        ways.append(f"remove {it} (identifiers={[f.column for f in columns]!r}, --drop "
                    f"{','.join(str(f.column) for f in columns)})")
    if index:
        ways.append("write no index (write_index=False)")
    it = "it" if len(names) == 1 else "they"
    return (f"refusing to release {' and '.join(parts)}; {' or '.join(ways)} or, if {it} "
            f"{'is' if len(names) == 1 else 'are'} safe to publish, allow "
            f"{'it' if len(names) == 1 else 'them'} (allow_unique={names!r}, --allow-unique "
            f"{','.join(map(str, names))})")


def refuse_identifying(found: list[IdentifyingColumn]) -> None:
    """Raise :class:`~dmondrian.errors.IdentifyingColumnError` when ``found`` names any
    column (see :func:`refusal_message`); a release must never carry a person key."""
    if found:
        raise IdentifyingColumnError(found, refusal_message(found))


# -- the Dask engine's sketch ---------------------------------------------------------------------


@dataclass
class DistinctSketch:
    """Mergeable distinct-value sketches of some rows: a HyperLogLog per column.

    ``registers`` maps each column to its uint8 registers (none for a
    column of unhashable objects); ``rows`` counts the rows.
    """

    registers: dict
    rows: int = 0


def _registers(values: pd.Series, distinct: bool = False) -> np.ndarray:
    """The HyperLogLog registers of ``values`` (missing values left out; with
    ``distinct``, values known distinct and present: a writer's dictionary).

    The registers are those of dask's ``compute_hll_array`` (read by its ``estimate_count``): the
    top bits of a value's 32-bit pandas hash pick the register, which keeps the largest "trailing
    zeros + 1" of the hash. They are computed here without dask's 32-column bit matrix per row,
    which made this check, run in the domain pass over every row of the columns released as is, one
    of the Dask engine's largest fixed costs; numbers and dates are hashed and folded by one
    compiled pass (:mod:`dmondrian._kernel.distinct`).
    """
    registers = np.zeros(1 << _HLL_BITS, dtype=np.uint8)
    numeric = isinstance(values.dtype, np.dtype) and values.dtype.kind in "biumM"
    words = _hash_words(values.dropna()) if numeric else None
    if words is not None:
        from .._kernel.distinct import add_words

        if len(words):
            add_words(words, registers, _HLL_BITS)
        return registers
    if not distinct and _repeats(values):
        # A register keeps its values' largest rank, so the distinct values alone give
        # the rows' registers: each hashed once, and pyarrow text is never made Python
        # objects for all its rows (as hashing them, or categorizing them first, does).
        # The missing value is dropped from the distinct ones: dropping it from every
        # row first copied a text column's million strings.
        values = pd.Series(values.unique(), copy=False).dropna()
    elif not distinct:
        values = values.dropna()
    if len(values) == 0:
        return registers
    if isinstance(values.dtype, pd.StringDtype):
        # The same hash as pandas' own, which takes a slower way through Arrow's text.
        h = pd.util.hash_array(values.to_numpy(dtype=object), categorize=False)
    else:
        h = pd.util.hash_pandas_object(values, index=False, categorize=False).to_numpy()
    h = h.astype(np.uint32)
    rank = _trailing_zeros_plus_one(h)
    rank[h == 0] = 33
    np.maximum.at(registers, h >> np.uint32(32 - _HLL_BITS), rank)
    return registers


#: Rows whose distinct values tell :func:`_repeats` whether hashing pays to categorize first.
_REPEAT_PROBE = 2048


def _repeats(values: pd.Series) -> bool:
    """Whether the values of a column pandas hashes as objects repeat enough that hashing
    each distinct value once (the column's unique values first) pays.

    Both ways give the same registers. Finding the unique values costs a hash table over every row:
    it pays on a few distinct values, and costs more than it saves on unique ones (ids, long texts),
    which the identifying check is looking for.

    Examples
    --------
    >>> _repeats(pd.Series(["a", "b"] * 2000)), _repeats(pd.Series([f"id{i}" for i in range(4000)]))
    (True, False)
    """
    head = values.iloc[:_REPEAT_PROBE]
    return head.nunique(dropna=True) * 2 <= len(head)


def _hash_words(values: pd.Series) -> np.ndarray | None:
    """The 64-bit words pandas' ``hash_array`` hashes for a numpy bool, int or date
    column (contiguous uint64), or None for any other (floats: pandas first
    makes -0.0 and every NaN one value; text, extension types)."""
    a = values.to_numpy() if isinstance(values.dtype, np.dtype) else None
    if a is None or a.dtype.kind not in "biumM" or a.dtype.itemsize > 8:
        return None
    if a.dtype.kind == "b":
        return np.ascontiguousarray(a, dtype=np.uint64)
    if a.dtype.kind in "mM":
        a = a.view(np.int64)
    # pandas widens the unsigned view: an int32's -1 is 0xFFFFFFFF, not 2**64 - 1.
    return np.ascontiguousarray(a.view(f"u{a.dtype.itemsize}"), dtype=np.uint64)


def _trailing_zeros_plus_one(h: np.ndarray) -> np.ndarray:
    """Trailing zero bits + 1 of every nonzero uint32 (as uint8; 32 for zero).

    ``h ^ (h - 1)`` sets the lowest set bit and every bit below it, so its population count is the
    rank; numpy < 2 lacks ``bitwise_count``: there frexp gives log2 + 1 of the lowest set bit,
    exactly (at most 2**31), but in more passes.
    """
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(h ^ (h - np.uint32(1))).astype(np.uint8)
    lowest = h & (~h + np.uint32(1))
    rank = np.frexp(lowest.astype(np.float64))[1].astype(np.uint8)
    rank[h == 0] = 32
    return rank


def distinct_sketch(df: pd.DataFrame, columns, distinct_values=None) -> DistinctSketch:
    """The sketch of one partition's ``columns`` (the index's name for a non-default index).

    ``distinct_values`` maps columns whose distinct values are known (a writer's dictionary, missing
    value left out) to them: a register keeps its values' largest rank, so they give the rows'
    registers without a pass over the rows.

    Examples
    --------
    >>> sk = distinct_sketch(pd.DataFrame({"id": range(3000)}), ["id"])
    >>> round(estimate_identifying(sk, 3000).found[0].share, 1)
    1.0
    """
    registers = {}
    known = distinct_values or {}
    for column in columns:
        if column in known and column in df.columns:
            registers[column] = _registers(pd.Series(known[column], copy=False), True)
            continue
        values, _ = _series(df, column)
        try:
            registers[column] = _registers(values)
        except TypeError:  # unhashable objects (lists, dicts): not an identifier's values
            continue
    return DistinctSketch(registers, len(df))


def merge_distinct(*sketches: DistinctSketch) -> DistinctSketch:
    """Combine the sketches of disjoint rows (register-wise maximum)."""
    registers = {}
    for sk in sketches:
        for column, regs in sk.registers.items():
            registers[column] = regs if column not in registers \
                else np.maximum(registers[column], regs)
    return DistinctSketch(registers, sum(sk.rows for sk in sketches))


@dataclass(frozen=True)
class SketchVerdict:
    """What the distinct-value sketches settle, and which columns they leave to count.

    Attributes
    ----------
    found : list of IdentifyingColumn
        Columns with so many distinct values that at least half the rows are
        unique (estimated, ``exact`` False).
    unsure : list
        Columns the estimate does not settle: their unique rows are to be
        counted exactly (:meth:`resolve`).
    rows : int
        Rows of the table.
    index_name : object
        The index's name when the index is a candidate, else None.
    order : list
        Every column the sketches judged, in their order.
    """

    found: list
    unsure: list
    rows: int
    index_name: object = None
    order: list = ()

    def resolve(self, count_unique) -> list[IdentifyingColumn]:
        """The columns singling out rows, by the local rule: ``count_unique(columns)``
        (called only when some are unsure) maps each unsure column to the count of
        rows whose value no other row has.

        Examples
        --------
        >>> v = SketchVerdict([], ["pay"], 1000, None, ["pay"])
        >>> [f.share for f in v.resolve(lambda cols: {"pay": 600})]
        [0.6]
        >>> v.resolve(lambda cols: {"pay": 370})
        []
        """
        counted = {}
        if self.unsure:
            counts = count_unique(list(self.unsure))
            for column in self.unsure:
                share = counts[column] / self.rows
                if decide(self.rows, unique=counts[column]) == REFUSED:
                    counted[column] = IdentifyingColumn(
                        column, share, self.rows, True,
                        self.index_name is not None and column == self.index_name)
        found = {f.column: f for f in self.found} | counted
        return [found[c] for c in self.order if c in found]


def estimate_identifying(sketch: DistinctSketch, n_rows: int | None = None, index_name=None,
                         unseen: int = 0) -> SketchVerdict:
    """What the sketch settles about each column over ``n_rows`` rows (by default the
    sketch's), see the module's docstring: refused when its distinct values are at least
    :data:`DISTINCT_REFUSED` of the rows, let through when under :data:`UNIQUE_SHARE`,
    both beyond :data:`HLL_MARGIN`, else left to count exactly. ``unseen`` rows of the
    table are not in the sketch (suppressed before it was made): each may add a value.
    """
    n_rows = sketch.rows if n_rows is None else n_rows
    order = list(sketch.registers)
    if n_rows < MIN_ROWS:
        return SketchVerdict([], [], n_rows, index_name, order)
    found, unsure = [], []
    for column, regs in sketch.registers.items():
        estimate = hll_estimate_count(regs, _HLL_BITS)
        verdict = decide(n_rows, distinct=estimate, margin=HLL_MARGIN, unseen=unseen)
        if verdict == REFUSED:
            found.append(IdentifyingColumn(column, min(1.0, estimate / n_rows), n_rows, False,
                                           index_name is not None and column == index_name))
        elif verdict == UNSURE:
            unsure.append(column)
    return SketchVerdict(found, unsure, n_rows, index_name, order)
