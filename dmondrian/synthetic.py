"""A census-like synthetic table, of any size, generated in independent chunks.

The table is an infinite stream of rows fixed by a seed: row ``i`` is always the same person,
whichever chunk it is generated in. The stream is cut into blocks of :data:`BLOCK_ROWS` rows, and
block ``b`` draws from its own random generator seeded by ``SeedSequence(seed, spawn_key=(b,))``.
Any slice of rows is therefore the concatenation of slices of a few blocks, which is what lets a
Dask partition (or a benchmark chunk) be generated on its own worker and still be exactly the rows a
single call would give.

The people are plausible rather than real; the columns are correlated the way
a census extract is, so anonymization has realistic structure to work with:

============== ================================================================
column         model
============== ================================================================
person_id      the row number (an identifier, not a quasi-identifier)
age            18-95, right-skewed (a discretized beta shape)
zip            5 digits, clustered around the 3-digit prefixes of a dozen
               metropolitan regions plus a sparse rural spread
birth_date     a day of the year ``REFERENCE_DATE.year - age``, so the age on
               :data:`REFERENCE_DATE` is exactly ``age``
sex            "Female" / "Male"
education      ordered Categorical of :data:`EDUCATION_LEVELS`; younger
               cohorts study longer, and the young cannot hold late degrees yet
occupation     one of :data:`OCCUPATIONS`, drawn given education; students
               among the young, retirees among the old
income         yearly, lognormal: education, experience (age), occupation,
               region and a gender gap shift its log
diagnosis      sensitive; one of :data:`DIAGNOSES` with an age-dependent,
               skewed distribution
============== ================================================================
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
import pyarrow as pa

from .errors import DuplicateColumnError, MissingColumnError, ParameterError

__all__ = ["BLOCK_ROWS", "CENSUS_COLUMNS", "CENSUS_QUASI_IDENTIFIERS", "CENSUS_SENSITIVE",
           "DIAGNOSES", "EDUCATION_LEVELS", "OCCUPATIONS", "REFERENCE_DATE", "census_dask",
           "make_census", "write_census_parquet"]

#: Rows per independently seeded block of the stream. Changing it changes
#: every generated table.
BLOCK_ROWS = 65_536

#: Ages are counted on this day.
REFERENCE_DATE = pd.Timestamp("2024-12-31")

CENSUS_COLUMNS = ["person_id", "age", "zip", "birth_date", "sex", "education", "occupation",
                  "income", "diagnosis"]
CENSUS_QUASI_IDENTIFIERS = ["age", "zip", "birth_date", "sex", "education"]
CENSUS_SENSITIVE = "diagnosis"

SEXES = ["Female", "Male"]
_P_FEMALE = 0.51

# Everything that depends on age alone is tabulated once, indexed by age.
_MIN_AGE, _MAX_AGE = 18, 95
_AGE = np.arange(_MAX_AGE + 1)
_ADULT = (_AGE >= _MIN_AGE).astype(float)
# Share of each age: a beta(1.2, 2.2) shape over 18-95, right-skewed like an
# adult population (many more 30-year-olds than 90-year-olds).
_AGE_POSITION = np.clip((_AGE - _MIN_AGE + 0.5) / (_MAX_AGE - _MIN_AGE + 1), 0, 1)
_AGE_SHARE = _ADULT * _AGE_POSITION**0.2 * (1 - _AGE_POSITION) ** 1.2

# Born in year REFERENCE_DATE.year - age, on any day of it: the birthday of
# that year has passed by 31 December, so the age on REFERENCE_DATE is exact.
_BIRTH_YEAR = REFERENCE_DATE.year - _AGE
_YEAR_START = (_BIRTH_YEAR - 1970).astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)
_YEAR_DAYS = 365 + ((_BIRTH_YEAR % 4 == 0) & ((_BIRTH_YEAR % 100 != 0) | (_BIRTH_YEAR % 400 == 0)))

EDUCATION_LEVELS = ["No high school", "High school", "Some college", "Associate", "Bachelors",
                    "Masters", "Professional", "Doctorate"]
_EDUCATION_SHARE = np.array([0.10, 0.27, 0.19, 0.10, 0.21, 0.09, 0.02, 0.02])


def _education_by_age() -> np.ndarray:
    """P(education level | age): a logistic latent score cut into levels.

    Younger cohorts study longer (the score rises by 0.012 per year younger
    than 45), and nobody holds a degree before the years it takes (the levels
    above an age's cap are folded into the cap).
    """
    cum = np.cumsum(_EDUCATION_SHARE)[:-1]
    cuts = np.log(cum / (1 - cum))
    shift = 0.012 * (45 - _AGE)
    below = 1 / (1 + np.exp(-(cuts[None, :] - shift[:, None])))
    cdf = np.hstack([below, np.ones((len(_AGE), 1))])
    share = np.diff(cdf, axis=1, prepend=0.0)
    cap = np.full(len(_AGE), len(EDUCATION_LEVELS) - 1)
    cap[:20], cap[20:22], cap[22:24], cap[24:27] = 2, 3, 4, 5
    for age, top in enumerate(cap):
        share[age, top] += share[age, top + 1 :].sum()
        share[age, top + 1 :] = 0.0
    return share


OCCUPATIONS = ["Management", "Professional", "Healthcare", "Education", "Technician", "Sales",
               "Office support", "Service", "Construction", "Production", "Transport", "Farming",
               "Protective service", "Student", "Retired"]
_STUDENT = OCCUPATIONS.index("Student")
_RETIRED = OCCUPATIONS.index("Retired")
# Relative frequency of each working occupation (columns, OCCUPATIONS[:13])
# for each education level (rows).
_OCCUPATION_BY_EDUCATION = np.array([
    [1.0, 0.0, 2.0, 0.0, 1.0, 6.0, 5.0, 25.0, 18.0, 18.0, 12.0, 8.0, 1.0],
    [4.0, 1.0, 5.0, 1.0, 4.0, 12.0, 14.0, 18.0, 12.0, 13.0, 10.0, 3.0, 3.0],
    [7.0, 4.0, 8.0, 3.0, 9.0, 13.0, 18.0, 14.0, 7.0, 7.0, 5.0, 2.0, 3.0],
    [8.0, 6.0, 16.0, 3.0, 14.0, 10.0, 16.0, 8.0, 6.0, 6.0, 4.0, 1.0, 2.0],
    [20.0, 22.0, 8.0, 12.0, 8.0, 13.0, 9.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    [25.0, 30.0, 10.0, 20.0, 5.0, 5.0, 3.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5],
    [15.0, 55.0, 20.0, 3.0, 2.0, 2.0, 1.0, 1.0, 0.3, 0.3, 0.2, 0.2, 0.3],
    [12.0, 50.0, 12.0, 22.0, 3.0, 1.0, 1.0, 0.5, 0.2, 0.2, 0.1, 0.1, 0.2],
])
# Students among the young, retirees among the old, whatever their education.
_P_STUDENT = np.select([_AGE < 22, _AGE < 25, _AGE < 30], [0.45, 0.2, 0.05], 0.0)
_P_RETIRED = np.clip((_AGE - 58) / 14, 0.0, 0.92)

# Log-income model: base, then additive effects.
_LOG_INCOME_BASE = np.log(22_000.0)
_INCOME_EDUCATION = np.array([-0.45, -0.2, 0.0, 0.1, 0.35, 0.5, 0.8, 0.7])
_INCOME_OCCUPATION = np.array([0.35, 0.25, 0.05, -0.05, 0.1, 0.0, -0.1, -0.35, 0.0, -0.1, -0.1,
                               -0.3, 0.05, -1.3, -0.3])
# Experience raises income quickly early in a career and then levels off.
_INCOME_AGE = 1.2 * (1.0 - np.exp(-np.maximum(_AGE - _MIN_AGE, 0) / 12.0))
_INCOME_FEMALE = -0.15
_INCOME_NOISE = 0.5

# Regions: 3-digit zip prefix (-1 = rural, prefix spread over 400-599),
# share of the population, log-income effect.
_REGION_PREFIX = np.array([100, 112, 606, 770, 900, 941, 331, 303, 981, 752, 191, 850, -1])
_REGION_SHARE = np.array([0.10, 0.07, 0.07, 0.06, 0.09, 0.04, 0.05, 0.05, 0.04, 0.05, 0.05, 0.04])
_REGION_SHARE = np.append(_REGION_SHARE, 1.0 - _REGION_SHARE.sum())
_REGION_INCOME = np.array([0.25, 0.05, 0.1, 0.05, 0.15, 0.35, 0.0, 0.05, 0.2, 0.05, 0.0, 0.0, -0.2])

DIAGNOSES = ["Healthy", "Hypertension", "Hyperlipidemia", "Diabetes", "Asthma", "Depression",
             "Arthritis", "Heart disease", "COPD", "Cancer"]
# Relative frequency of each diagnosis (columns) by age band (rows): 18-34, 35-49, 50-64, 65+.
_DIAGNOSIS_BY_BAND = np.array([[60.0, 4.0, 3.0, 2.0, 10.0, 14.0, 2.0, 1.0, 1.0, 1.0],
                               [45.0, 14.0, 10.0, 6.0, 7.0, 11.0, 3.0, 2.0, 1.0, 1.0],
                               [28.0, 24.0, 16.0, 11.0, 5.0, 7.0, 9.0, 5.0, 3.0, 4.0],
                               [15.0, 30.0, 15.0, 13.0, 4.0, 4.0, 13.0, 10.0, 6.0, 6.0]])
_DIAGNOSIS_BAND = np.searchsorted(np.array([35, 50, 65]), _AGE, side="right")


class _Categorical:
    """Draws categories with Walker's alias method, one distribution per group.

    A row of group ``g`` with uniform ``u`` looks at column ``i = floor(u * K)`` of its group's
    table and keeps ``i`` when the fractional part of ``u * K`` is below ``prob[i]``, else takes
    ``alias[i]``: exact probabilities (up to float32 rounding) for a few vectorized operations,
    where a ``searchsorted`` would binary-search every row.

    Parameters
    ----------
    weights : array of shape (groups, K)
        Relative frequency of each category in each group (rows need not sum
        to 1; zero means never drawn).
    """

    def __init__(self, weights):
        weights = np.atleast_2d(np.asarray(weights, dtype=float))
        self.k = weights.shape[1]
        prob = np.ones_like(weights)
        alias = np.tile(np.arange(self.k), (len(weights), 1))
        for row, w in enumerate(weights):
            scaled = w * self.k / w.sum()
            small = [i for i in range(self.k) if scaled[i] < 1.0]
            large = [i for i in range(self.k) if scaled[i] >= 1.0]
            while small and large:
                s, big = small.pop(), large.pop()
                prob[row, s], alias[row, s] = scaled[s], big
                scaled[big] += scaled[s] - 1.0
                (small if scaled[big] < 1.0 else large).append(big)
            # Whatever is left has probability 1 up to rounding.
        # Comparing u * K with i + prob[i] is comparing its fraction with prob[i].
        self.threshold = (np.arange(self.k) + prob).astype(np.float32).ravel()
        self.alias = alias.astype(np.int64).ravel()

    def draw(self, u: np.ndarray, offset=None) -> np.ndarray:
        """Categories for uniforms ``u`` in [0, 1) (float32); ``offset`` = group * K."""
        x = u * np.float32(self.k)  # < K: u < 1 and float32 rounding keeps it below
        column = x.astype(np.int64)
        index = column if offset is None else column + offset
        return np.where(x < self.threshold[index], column, self.alias[index])


_AGE_DRAW = _Categorical(_AGE_SHARE)
_REGION = _Categorical(_REGION_SHARE)
_EDUCATION = _Categorical(_education_by_age())
_OCCUPATION = _Categorical(_OCCUPATION_BY_EDUCATION)
_DIAGNOSIS = _Categorical(_DIAGNOSIS_BY_BAND)
_DIAGNOSIS_OFFSET = _DIAGNOSIS.k * _DIAGNOSIS_BAND


class _Draws:
    """Rows ``lo:hi`` of each draw of one block, the stream consumed as for all its rows.

    A uniform (float32) takes one 32-bit half of a 64-bit output per row, the bit generator keeping
    the other half for the next: its rows are found by advancing the generator, and only they are
    drawn. The other draws take a varying number of outputs per row (rejection sampling), so they
    are drawn for the whole block and sliced (cheap next to the arithmetic on them).
    """

    def __init__(self, seed: int, block: int, lo: int, hi: int):
        self.bits = np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(block,)))
        self.rng = np.random.Generator(self.bits)
        self.lo, self.hi = lo, hi

    def uniform(self) -> np.ndarray:
        # float32 halves the memory traffic; its 24 bits are plenty for these draws.
        n, lo, hi = BLOCK_ROWS, self.lo, self.hi
        if lo == 0 and hi == n:
            return self.rng.random(n, dtype=np.float32)
        start = self.bits.state
        held = int(start["has_uint32"])  # row 0 takes the half kept from before
        if lo == 0:
            out = self.rng.random(hi, dtype=np.float32)
        else:
            # advance() drops the kept half: row lo is half (lo - held) % 2 of output
            # (lo - held) // 2 from here.
            self.bits.advance((lo - held) // 2)
            skip = (lo - held) % 2
            out = self.rng.random(skip + hi - lo, dtype=np.float32)[skip:]
        # Where the whole draw leaves the stream: (n - held) halves from here.
        self.bits.state = start
        self.bits.advance((n - held) // 2)
        if (n - held) % 2:
            self.rng.random(1, dtype=np.float32)
        return out

    def whole(self, draw, *args, **kwargs) -> np.ndarray:
        """``draw(*args, BLOCK_ROWS, **kwargs)``'s rows ``lo:hi``."""
        return draw(*args, BLOCK_ROWS, **kwargs)[self.lo:self.hi]


def _block(seed: int, block: int, lo: int = 0, hi: int = BLOCK_ROWS) -> dict[str, np.ndarray]:
    """Every column (as numbers and codes) of rows ``lo:hi`` of one block of the stream.

    The draws happen in a fixed order and consume the stream as for the whole
    block, so a block's rows never depend on which of them are asked for; the
    arithmetic runs on the rows asked for only.
    """
    draws = _Draws(seed, block, lo, hi)
    rng = draws.rng
    uniform = draws.uniform

    age = _AGE_DRAW.draw(uniform())
    female = uniform() < _P_FEMALE

    region = _REGION.draw(uniform())
    prefix = _REGION_PREFIX[region]
    prefix = np.where(prefix < 0, 400 + draws.whole(rng.integers, 0, 200), prefix)
    prefix += np.minimum(draws.whole(rng.standard_exponential, dtype=np.float32) * 1.2,
                         9).astype(np.int64)
    last_two = np.minimum(draws.whole(rng.standard_exponential, dtype=np.float32) * 10,
                          99).astype(np.int64)
    zip_code = prefix * 100 + last_two

    birth = _YEAR_START[age] + (uniform() * _YEAR_DAYS[age]).astype(np.int64)

    education = _EDUCATION.draw(uniform(), _EDUCATION.k * age)
    occupation = _OCCUPATION.draw(uniform(), _OCCUPATION.k * education)
    status = uniform()
    occupation[status < _P_STUDENT[age]] = _STUDENT
    occupation[status >= 1.0 - _P_RETIRED[age]] = _RETIRED

    log_income = (_LOG_INCOME_BASE + _INCOME_EDUCATION[education] + _INCOME_AGE[age]
                  + _INCOME_OCCUPATION[occupation] + _REGION_INCOME[region]
                  + _INCOME_FEMALE * female + _INCOME_NOISE * draws.whole(rng.standard_normal))
    income = np.round(np.exp(log_income))

    diagnosis = _DIAGNOSIS.draw(uniform(), _DIAGNOSIS_OFFSET[age])

    return {"age": age, "zip": zip_code, "birth_date": birth, "sex": (~female).astype(np.int8),
            "education": education.astype(np.int8), "occupation": occupation.astype(np.int8),
            "income": income, "diagnosis": diagnosis.astype(np.int8)}


# dtypes of the arrays _block returns, for empty tables.
_CODE_DTYPES = {"age": np.int64, "zip": np.int64, "birth_date": np.int64, "sex": np.int8,
                "education": np.int8, "occupation": np.int8, "income": np.float64,
                "diagnosis": np.int8}

_NS_PER_DAY = 86_400 * 10**9

# pandas' default string dtype ("str", Arrow-backed, in pandas 3; object before).
_STRING_DTYPE = pd.Series(["x"]).dtype


def _strings(codes: np.ndarray, labels: list[str]):
    """The labels of the codes as a string array, without a Python object per row."""
    if isinstance(_STRING_DTYPE, pd.StringDtype) and _STRING_DTYPE.storage == "pyarrow":
        return pd.array(pa.array(labels, pa.string()).take(pa.array(codes)), dtype=_STRING_DTYPE)
    return pd.array(np.asarray(labels, dtype=object)[codes], dtype=_STRING_DTYPE)


# The labels of the columns drawn as codes and published as strings.
_LABELS = {"sex": SEXES, "occupation": OCCUPATIONS, "diagnosis": DIAGNOSES}


def _column(name: str, values: np.ndarray):
    if name in _LABELS:
        return _strings(values, _LABELS[name])
    if name == "birth_date":
        values *= _NS_PER_DAY  # in place: the codes are a fresh array
        return values.view("datetime64[ns]")
    if name == "education":
        return pd.Categorical.from_codes(values, EDUCATION_LEVELS, ordered=True)
    return values  # age, zip, income


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(name, f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_columns(columns) -> list[str]:
    if columns is None:
        return list(CENSUS_COLUMNS)
    if isinstance(columns, str):
        columns = [columns]
    columns = list(columns)
    for i, c in enumerate(columns):
        if c not in CENSUS_COLUMNS:
            raise MissingColumnError(c, f"column {c!r} is not a census column "
                                        f"({', '.join(CENSUS_COLUMNS)})")
        if c in columns[:i]:
            raise DuplicateColumnError(c, f"column {c!r} is asked for twice")
    return columns


def make_census(n_rows: int, seed: int = 0, *, start: int = 0, columns=None) -> pd.DataFrame:
    """Rows ``start`` to ``start + n_rows - 1`` of the seeded census-like stream.

    Parameters
    ----------
    n_rows : int
        Number of rows (0 gives an empty table with the right dtypes).
    seed : int, default 0
        Seed of the stream (a non-negative integer).
    start : int, default 0
        Row number of the first row. Consecutive calls concatenate exactly: ``make_census(a, s)``
        followed by ``make_census(b, s, start=a)`` is ``make_census(a + b, s)``.
    columns : list of str, optional
        Only these of :data:`CENSUS_COLUMNS`, in this order (their values do
        not depend on which columns are asked for).

    Returns
    -------
    pandas.DataFrame
        Indexed by row number (``start`` onwards). Columns: ``person_id``, ``age``, ``zip`` (int64),
        ``birth_date`` (datetime64[ns]), ``sex``, ``occupation``, ``diagnosis`` (strings),
        ``education`` (ordered Categorical) and ``income`` (float64). See the module docstring for
        how they are drawn.

    Raises
    ------
    ParameterError
        ``n_rows``, ``seed`` or ``start`` is not a non-negative integer.
    MissingColumnError, DuplicateColumnError
        ``columns`` names something that is not a census column, or a column twice.

    Examples
    --------
    >>> df = make_census(1_000, seed=7)
    >>> df.shape
    (1000, 9)
    >>> bool(df["age"].between(18, 95).all())
    True
    >>> tail = make_census(400, seed=7, start=600)
    >>> tail.equals(df.iloc[600:])
    True
    >>> df["education"].cat.ordered
    True
    """
    n_rows = _check_int("n_rows", n_rows, 0)
    seed = _check_int("seed", seed, 0)
    start = _check_int("start", start, 0)
    columns = _check_columns(columns)
    stop = start + n_rows
    drawn = [c for c in columns if c != "person_id"]
    codes = {c: np.empty(n_rows, dtype=_CODE_DTYPES[c]) for c in drawn}
    done = 0
    blocks = range(start // BLOCK_ROWS, -(-stop // BLOCK_ROWS)) if drawn else range(0)
    for block in blocks:
        offset = block * BLOCK_ROWS
        lo, hi = max(start, offset) - offset, min(stop, offset + BLOCK_ROWS) - offset
        values = _block(seed, block, lo, hi)
        for c in drawn:
            codes[c][done : done + hi - lo] = values[c]
        done += hi - lo
    data = {c: np.arange(start, stop, dtype=np.int64) if c == "person_id"
            else _column(c, codes.pop(c)) for c in columns}
    # copy=False: the arrays are ours, and consolidating them would copy every one.
    return pd.DataFrame(data, index=pd.RangeIndex(start, stop), columns=columns, copy=False)


def _census_partition(start: int, n_rows: int, seed: int, columns=None) -> pd.DataFrame:
    """One Dask partition (``columns`` lets Dask push a column selection down)."""
    return make_census(n_rows, seed, start=start, columns=columns)


def census_dask(n_rows: int, seed: int = 0, *, rows_per_partition: int = 1_000_000):
    """The census-like table as a lazy Dask DataFrame, one partition per chunk of rows.

    Every partition is generated where it is computed (nothing but its row range travels from the
    client) and holds the same rows as :func:`make_census`. String columns follow Dask's
    ``dataframe.convert-string`` setting (Arrow strings with ``pd.NA`` by default); with it off, the
    dtypes are those of :func:`make_census` too. A column selection is pushed down into the
    generator.

    Parameters
    ----------
    n_rows : int
        Total number of rows.
    seed : int, default 0
        Seed of the stream.
    rows_per_partition : int, default 1,000,000
        Rows in each partition but the last.

    Returns
    -------
    dask.dataframe.DataFrame
        Indexed by row number, with known divisions.

    Raises
    ------
    ParameterError
        A parameter is not an integer in its range.

    Examples
    --------
    >>> ddf = census_dask(2_500, seed=3, rows_per_partition=1_000)
    >>> ddf.npartitions, ddf.divisions
    (3, (0, 1000, 2000, 2499))
    >>> got = ddf.compute(scheduler="sync")
    >>> bool((got == make_census(2_500, seed=3)).all(axis=None))
    True
    """
    import dask.dataframe as dd

    n_rows = _check_int("n_rows", n_rows, 0)
    seed = _check_int("seed", seed, 0)
    rows_per_partition = _check_int("rows_per_partition", rows_per_partition, 1)
    starts = list(range(0, n_rows, rows_per_partition)) or [0]
    lengths = [min(rows_per_partition, n_rows - s) for s in starts]
    divisions = (*starts, n_rows - 1) if n_rows else (None, None)
    return dd.from_map(_census_partition, starts, lengths, args=(seed,), meta=make_census(0, seed),
                       divisions=divisions, label="make-census", enforce_metadata=False)


def write_census_parquet(path, n_rows: int, seed: int = 0, *, rows_per_partition: int = 1_000_000,
                         storage_options=None):
    """Write the census-like table as a partitioned Parquet dataset, chunk by chunk.

    Each partition of :func:`census_dask` is generated and written by the scheduler in use (a
    ``distributed.Client`` if one is active), so the whole table never exists in one place.

    Parameters
    ----------
    path : str or os.PathLike
        Folder of the dataset, a local path or any fsspec URL (``s3://...``,
        ``memory://...``); it gets one ``part.<i>.parquet`` file per partition.
    n_rows, seed, rows_per_partition
        As in :func:`census_dask`.
    storage_options : dict, optional
        Passed to fsspec for remote filesystems.

    Returns
    -------
    str or os.PathLike
        ``path``, as given.

    Examples
    --------
    >>> import tempfile, dask, dask.dataframe as dd
    >>> out = tempfile.mkdtemp() + "/census"
    >>> with dask.config.set(scheduler="sync"):
    ...     _ = write_census_parquet(out, 3_000, seed=1, rows_per_partition=1_000)
    ...     back = dd.read_parquet(out).compute()
    >>> len(back), back["person_id"].is_monotonic_increasing
    (3000, True)
    """
    ddf = census_dask(n_rows, seed, rows_per_partition=rows_per_partition)
    # The row number is already the person_id column.
    ddf.to_parquet(path, write_index=False, storage_options=storage_options)
    return path
