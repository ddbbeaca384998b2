"""The census-like generator: determinism, chunk independence, realism, Dask and Parquet."""

from __future__ import annotations

import hashlib
import uuid

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian.errors import DuplicateColumnError, MissingColumnError, ParameterError
from dmondrian.synthetic import (
    BLOCK_ROWS,
    CENSUS_COLUMNS,
    CENSUS_QUASI_IDENTIFIERS,
    CENSUS_SENSITIVE,
    DIAGNOSES,
    EDUCATION_LEVELS,
    OCCUPATIONS,
    REFERENCE_DATE,
    census_dask,
    make_census,
    write_census_parquet,
)

STRING_COLUMNS = ["sex", "occupation", "diagnosis"]

# dask's Parquet writer still calls reset_index(inplace=True), which pandas 3.1 deprecates.
dask_parquet_warning = pytest.mark.filterwarnings(
    "ignore:The inplace keyword in DataFrame.reset_index"
)


@pytest.fixture(scope="module")
def census():
    """A sample large enough for stable statistics (correlations, shares)."""
    return make_census(60_000, seed=11)


def _plain_strings(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with its string columns as object, to compare across string dtypes."""
    return df.astype({c: object for c in STRING_COLUMNS if c in df.columns})


# -- determinism and chunk independence --------------------------------------------


def test_same_seed_same_table_other_seed_other_table():
    a = make_census(3_000, seed=5)
    pd.testing.assert_frame_equal(a, make_census(3_000, seed=5))
    b = make_census(3_000, seed=6)
    assert not a.drop(columns="person_id").equals(b.drop(columns="person_id"))
    assert (a["age"] != b["age"]).mean() > 0.5


def test_consecutive_chunks_concatenate_exactly():
    whole = make_census(200, 3)
    parts = pd.concat([make_census(100, 3, start=0), make_census(100, 3, start=100)])
    pd.testing.assert_frame_equal(parts, whole)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    block=st.integers(0, 3),
    offset=st.integers(-300, 300),
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=4),
)
def test_any_split_of_any_range_is_the_same_rows(seed, block, offset, sizes):
    # Start near a block boundary so that splits often straddle one.
    start = max(block * BLOCK_ROWS + offset, 0)
    whole = make_census(sum(sizes), seed, start=start)
    chunks, at = [], start
    for size in sizes:
        chunks.append(make_census(size, seed, start=at))
        at += size
    pd.testing.assert_frame_equal(pd.concat(chunks), whole)
    assert whole.index.equals(pd.RangeIndex(start, start + sum(sizes)))
    assert (whole["person_id"].to_numpy() == np.arange(start, start + sum(sizes))).all()


# (n_rows, seed, start) and a checksum of the table, computed with the generator
# that drew every block whole (main at 3a47766): how a request draws its rows must
# never change a value. The requests start at odd and even rows, in a block, at its
# last row and across one or two boundaries.
STREAM_CHECKSUMS = [
    ((1_000, 0, 0), "643c1e664e5d0ac6"),
    ((1, 3, BLOCK_ROWS - 1), "5e628a396cbf2cfb"),
    ((2, 3, BLOCK_ROWS - 1), "4fcce24b7d59a602"),
    ((3, 3, BLOCK_ROWS - 2), "5104c0468faf5acf"),
    ((1_000, 7, 12_345), "f8a0995738551b07"),
    ((777, 2, 2 * BLOCK_ROWS - 300), "1610e52887b66cd5"),
    ((5_000, 1, BLOCK_ROWS - 2_500), "b8dd8b906263b641"),
    ((10, 4, 3 * BLOCK_ROWS + 7), "06e9b277e943037e"),
    ((BLOCK_ROWS, 5, 0), "df5988185ab2483b"),
    ((BLOCK_ROWS + 3, 6, BLOCK_ROWS - 1), "9956b8b1f822d4f7"),
    ((4_321, 9, 40_001), "d237a39910e6cf97"),
]


def _checksum(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for c in df.columns:
        col = df[c]
        h.update(c.encode())
        if isinstance(col.dtype, pd.CategoricalDtype):
            h.update(col.cat.codes.to_numpy().tobytes())
            h.update("|".join(col.cat.categories).encode())
        elif col.dtype.kind in "iufM":
            h.update(np.ascontiguousarray(col.to_numpy()).tobytes())
        else:
            h.update("\x00".join(col.tolist()).encode())
    h.update(np.asarray(df.index).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("request_", "checksum"), STREAM_CHECKSUMS)
def test_every_request_gives_the_values_of_the_whole_block_draws(request_, checksum):
    n_rows, seed, start = request_
    assert _checksum(make_census(n_rows, seed, start=start)) == checksum


def test_a_column_subset_has_the_same_values():
    full = make_census(1_000, seed=2, start=BLOCK_ROWS - 500)
    part = make_census(1_000, seed=2, start=BLOCK_ROWS - 500, columns=["income", "age"])
    pd.testing.assert_frame_equal(part, full[["income", "age"]])
    with pytest.raises(MissingColumnError, match="salary") as info:
        make_census(10, columns=["age", "salary"])
    assert info.value.column == "salary"
    with pytest.raises(DuplicateColumnError, match="age"):
        make_census(10, columns=["age", "zip", "age"])
    ids = make_census(5, seed=2, start=3, columns=["person_id"])
    assert ids["person_id"].tolist() == [3, 4, 5, 6, 7]


@pytest.mark.parametrize(
    "kwargs, parameter",
    [
        ({"n_rows": -1}, "n_rows"),
        ({"n_rows": 2.5}, "n_rows"),
        ({"n_rows": True}, "n_rows"),
        ({"n_rows": 10, "seed": -3}, "seed"),
        ({"n_rows": 10, "seed": "a"}, "seed"),
        ({"n_rows": 10, "start": -1}, "start"),
    ],
)
def test_bad_parameters_are_typed_errors(kwargs, parameter):
    with pytest.raises(ParameterError, match=parameter) as info:
        make_census(**kwargs)
    assert info.value.parameter == parameter


def test_numpy_integers_are_accepted():
    pd.testing.assert_frame_equal(
        make_census(np.int64(50), np.uint32(4), start=np.int16(7)), make_census(50, 4, start=7)
    )


# -- schema and value ranges ---------------------------------------------------------


def test_schema(census):
    assert list(census.columns) == CENSUS_COLUMNS
    assert set(CENSUS_QUASI_IDENTIFIERS) <= set(census.columns)
    assert CENSUS_SENSITIVE in census.columns and CENSUS_SENSITIVE not in CENSUS_QUASI_IDENTIFIERS
    assert "person_id" not in CENSUS_QUASI_IDENTIFIERS
    for column in ("person_id", "age", "zip"):
        assert census[column].dtype == np.int64, column
    assert census["birth_date"].dtype == "datetime64[ns]"
    assert census["income"].dtype == np.float64
    for column in STRING_COLUMNS:
        assert pd.api.types.is_string_dtype(census[column]), column
    education = census["education"].dtype
    assert isinstance(education, pd.CategoricalDtype) and education.ordered
    assert list(education.categories) == EDUCATION_LEVELS
    assert not census.isna().any().any()
    empty = make_census(0, seed=11)
    assert empty.shape == (0, len(CENSUS_COLUMNS))
    assert empty.dtypes.equals(census.dtypes)


def test_value_ranges(census):
    assert census["age"].between(18, 95).all()
    assert census["age"].min() == 18 and census["age"].max() >= 90
    assert census["zip"].between(10_000, 99_999).all()
    assert set(census["sex"]) == {"Female", "Male"}
    assert set(census["occupation"]) == set(OCCUPATIONS) and len(OCCUPATIONS) == 15
    assert set(census["diagnosis"]) == set(DIAGNOSES) and len(DIAGNOSES) == 10
    assert set(census["education"]) == set(EDUCATION_LEVELS)
    assert (census["income"] > 0).all()
    assert (census["income"] == census["income"].round()).all()


def test_birth_date_gives_the_age(census):
    born = census["birth_date"].dt
    birthday_later = (born.month > REFERENCE_DATE.month) | (
        (born.month == REFERENCE_DATE.month) & (born.day > REFERENCE_DATE.day)
    )
    age = REFERENCE_DATE.year - born.year - birthday_later
    assert (age == census["age"]).all()
    assert born.month.nunique() == 12 and born.day.nunique() == 31


# -- realism: skew and correlations ----------------------------------------------------


def test_skewed_marginals(census):
    age = census["age"]
    assert age.mean() > age.median()  # right-skewed
    assert (age < 45).mean() > (age >= 65).mean() * 2
    shares = census["diagnosis"].value_counts(normalize=True)
    assert shares.iloc[0] > 0.3 and shares.iloc[-1] < 0.05
    income = census["income"]
    assert income.mean() > income.median()  # lognormal: long right tail
    assert np.log(income).skew() < 1  # ... and roughly normal once logged


def test_correlations(census):
    education = census["education"].cat.codes
    assert census["age"].corr(census["income"]) > 0.1
    assert education.corr(census["income"], method="spearman") > 0.3
    # Occupation follows education.
    white_collar = census["occupation"].isin(["Management", "Professional"])
    high = census["education"] >= "Bachelors"
    assert white_collar[high].mean() > 3 * white_collar[~high].mean()
    # Diagnoses follow age.
    chronic = census["diagnosis"].isin(["Hypertension", "Arthritis", "Heart disease"])
    assert chronic[census["age"] >= 65].mean() > 3 * chronic[census["age"] < 35].mean()
    # Students are young, retirees old; degrees take years.
    assert census.loc[census["occupation"] == "Student", "age"].max() < 30
    assert census.loc[census["occupation"] == "Retired", "age"].min() > 58
    assert census.loc[census["education"] == "Doctorate", "age"].min() >= 27


def test_zip_codes_cluster_by_region(census):
    prefix = census["zip"] // 100
    top = prefix.value_counts(normalize=True)
    assert top.iloc[:30].sum() > 0.6  # a few areas hold most people
    assert census["zip"].nunique() < len(census) / 5


# -- Dask ----------------------------------------------------------------------------


def test_census_dask_matches_make_census():
    ddf = census_dask(2_500, seed=4, rows_per_partition=1_000)
    assert ddf.npartitions == 3
    assert ddf.divisions == (0, 1_000, 2_000, 2_499)
    expected = make_census(2_500, seed=4)
    got = ddf.compute(scheduler="sync")
    pd.testing.assert_frame_equal(_plain_strings(got), _plain_strings(expected))
    for column in STRING_COLUMNS:
        assert pd.api.types.is_string_dtype(got[column])
    # Without Dask's string conversion even the dtypes are those of make_census.
    with dask.config.set({"dataframe.convert-string": False}):
        exact = census_dask(2_500, seed=4, rows_per_partition=1_000).compute(scheduler="sync")
    pd.testing.assert_frame_equal(exact, expected)
    pd.testing.assert_frame_equal(
        ddf.partitions[1].compute(scheduler="sync")[["age", "zip"]], expected.iloc[1000:2000][
            ["age", "zip"]
        ]
    )


def test_census_dask_column_projection():
    ddf = census_dask(1_500, seed=9, rows_per_partition=500)
    got = ddf[["zip", "age"]].compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, make_census(1_500, seed=9)[["zip", "age"]])


def test_census_dask_edge_sizes():
    assert len(census_dask(0).compute(scheduler="sync")) == 0
    one = census_dask(7, seed=1, rows_per_partition=100)
    assert one.npartitions == 1 and one.divisions == (0, 6)
    with pytest.raises(ParameterError, match="rows_per_partition"):
        census_dask(10, rows_per_partition=0)


def _read_back(path, **kwargs) -> pd.DataFrame:
    back = dd.read_parquet(path, **kwargs).compute()
    return back.sort_values("person_id").set_index(pd.RangeIndex(len(back)))


@dask_parquet_warning
def test_write_parquet_round_trip(tmp_path):
    path = tmp_path / "census"
    with dask.config.set(scheduler="sync"):
        assert write_census_parquet(path, 2_300, seed=8, rows_per_partition=1_000) == path
        back = _read_back(path)
    assert sorted(p.name for p in path.iterdir() if p.suffix == ".parquet") == [
        "part.0.parquet",
        "part.1.parquet",
        "part.2.parquet",
    ]
    expected = make_census(2_300, seed=8)
    pd.testing.assert_frame_equal(_plain_strings(back), _plain_strings(expected))
    assert back["education"].cat.ordered


@dask_parquet_warning
def test_write_parquet_to_an_fsspec_url():
    url = f"memory://dmondrian-test-{uuid.uuid4().hex}/census"
    try:
        with dask.config.set(scheduler="sync"):
            write_census_parquet(url, 1_200, seed=2, rows_per_partition=500)
            back = _read_back(url)
        pd.testing.assert_frame_equal(
            _plain_strings(back), _plain_strings(make_census(1_200, seed=2))
        )
    finally:
        import fsspec

        fsspec.filesystem("memory").rm(url.split("://", 1)[1].split("/")[0], recursive=True)


@dask_parquet_warning
def test_write_parquet_with_the_distributed_scheduler(tmp_path):
    distributed = pytest.importorskip("distributed")
    path = str(tmp_path / "census")
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster),
    ):
        write_census_parquet(path, 3_000, seed=6, rows_per_partition=1_000)
        back = _read_back(path)
    pd.testing.assert_frame_equal(_plain_strings(back), _plain_strings(make_census(3_000, seed=6)))
