"""The distributed engine ships QI keys through the shuffle, not values."""

from __future__ import annotations

import math

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian import _kernel as K
from dmondrian import distributed as D
from dmondrian import local
from dmondrian._dask.global_domain import encode_keys
from dmondrian._dask.shipped_keys import gather_keys, key_dtypes, narrow_keys
from dmondrian._dask.shuffle import attach_leaf


def wide_codes_table(n: int, seed: int) -> pd.DataFrame:
    """QIs whose shipped form differs most from their values."""
    rng = np.random.default_rng(seed)
    city = rng.choice([f"city{i:03d}" for i in range(150)], n).astype(object)
    city[rng.random(n) < 0.05] = None
    level = pd.Categorical(rng.choice(list("abcdefg"), n), categories=list("abcdefg"),
                           ordered=True)
    level[rng.random(n) < 0.05] = np.nan
    shop = pd.Categorical(rng.choice([f"s{i}" for i in range(70)], n))
    seen = pd.Timestamp("2021-03-01", tz="Europe/Paris") + pd.to_timedelta(
        rng.integers(0, 500, n), unit="h")
    count = pd.array(rng.integers(0, 40, n), dtype="Int64")
    count[rng.random(n) < 0.05] = pd.NA
    return pd.DataFrame({"city": city, "level": level, "shop": shop, "seen": seen,
                         "count": count, "flag": rng.random(n) < 0.3,
                         "other": np.arange(n)})


QIS = ["city", "level", "shop", "seen", "count", "flag"]


def test_codes_narrow_to_the_smallest_type_and_widen_back(client):
    df = wide_codes_table(3000, seed=1)
    top = D.plan(dd.from_pandas(df, npartitions=3), QIS, 5, leaf_rows=len(df), client=client,
                 allow_unique=["other"])
    dtypes = key_dtypes(top.domain)
    # 151 cities with missing need int16; 7 levels, 70 shops, a boolean (nominal)
    # and counts 0..39 (an offset above the smallest): int8; 500 whole hours in
    # the column's unit travel as hours above the first: int16.
    assert [str(t) for t in dtypes] == ["int16", "int8", "int8", "int16", "int8", "int8"]
    offsets, steps = top.key_offsets, top.key_steps
    keys = encode_keys(df, top.domain)
    seen = keys[3]
    assert offsets == [0, 0, 0, int(seen.min()), int(df["count"].min()), 0]
    hour = pd.Timedelta(hours=1) // pd.Timedelta(1, unit=df["seen"].dt.unit)
    assert steps == [1, 1, 1, hour, 1, 1]
    assert (keys[1] == K.MISSING_KEY).any() and (keys[4] == K.MISSING_KEY).any()
    shipped = narrow_keys(keys, dtypes, offsets, QIS, steps)
    assert shipped[3].max() == (seen.max() - seen.min()) // steps[3]
    order = np.random.default_rng(0).permutation(len(df))
    for j, col in enumerate(shipped):
        out = np.empty(len(df), dtype=np.int64)
        gather_keys(col, order, out, offsets[j], steps[j])
        assert np.array_equal(out, keys[j][order]), QIS[j]


def test_a_value_outside_the_measured_range_is_refused(client):
    df = wide_codes_table(2000, seed=4)
    top = D.plan(dd.from_pandas(df, npartitions=2), QIS, 5, leaf_rows=len(df), client=client,
                 allow_unique=["other"])
    changed = df.assign(count=df["count"] + 1000)  # as if the input changed after the pass
    with pytest.raises(RuntimeError, match="'count' holds a value outside the range"):
        attach_leaf(changed, top, {"number": 1})


@given(st.integers(-2**62, 2**62), st.integers(0, 70_000),
       st.lists(st.integers(0, 70_000), min_size=1, max_size=200), st.booleans())
@settings(max_examples=80, deadline=None)
def test_gathered_keys_are_the_keys(lo, span, offsets, missing):
    # Keys in [lo, lo + span], some missing: shipped as offsets above lo in the
    # narrowest type holding span, -1 for missing, and gathered back exactly.
    keys = lo + np.minimum(np.asarray(offsets, dtype=np.int64), span)
    if missing:
        keys[np.asarray(offsets) % 7 == 0] = K.MISSING_KEY
    dtype = np.min_scalar_type(-(span + 1))
    (shipped,) = narrow_keys(keys[None, :], [dtype], [lo], ["q"])
    assert shipped.dtype == dtype
    out = np.empty(len(keys), dtype=np.int64)
    order = np.arange(len(keys))[::-1].copy()
    gather_keys(shipped, order, out, lo)
    assert out.tolist() == keys[::-1].tolist()


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_one_leaf_publishes_what_the_local_engine_publishes(client, mode):
    # 151 city codes are more than the kernel's bitmask holds: each output
    # partition renumbers them to the codes present, in the same order.
    df = wide_codes_table(4000, seed=2)
    expected = local.anonymize(df, QIS, 6, mode=mode, class_column="cls",
                               allow_unique=["other"])
    got = D.anonymize(dd.from_pandas(df, npartitions=4), QIS, 6, mode=mode,
                      leaf_rows=len(df), client=client, class_column="cls",
                      allow_unique=["other"]).compute()
    got = got.sort_index()
    assert list(got.columns) == list(expected.columns)
    for col in QIS + ["other"]:
        assert got[col].astype(str).tolist() == expected[col].astype(str).tolist(), col


def test_small_leaves_give_a_valid_release(client, tmp_path):
    df = wide_codes_table(6000, seed=3)
    top = D.anonymize_to_parquet(dd.from_pandas(df, npartitions=4), tmp_path / "out", QIS, 6,
                                 leaf_rows=800, client=client, class_column="cls",
                                 allow_unique=["other", "index"],  # the row numbers,
                                 write_options={"write_index": True})  # compared by index
    assert top.n_leaves > 4
    out = pd.read_parquet(tmp_path / "out").sort_index()
    released = out.astype({q: str for q in QIS})
    assert_valid_release(df.astype({"other": out["other"].dtype}), released, QIS, 6,
                         class_column="cls")


# -- keys in their step ------------------------------------------------------------------------


def dated_table(n: int, seed: int) -> pd.DataFrame:
    """Date QIs whose keys are far coarser than their unit, with NaT, a time part, one
    value, and an integer in steps of 5."""
    rng = np.random.default_rng(seed)
    birth = (pd.Timestamp("1930-01-01") + pd.to_timedelta(rng.integers(0, 30_000, n), unit="D")
             ).astype("datetime64[ns]")
    birth = birth.where(rng.random(n) >= 0.04)  # NaT
    seen = (pd.Timestamp("2024-06-01 08:00") + pd.to_timedelta(rng.integers(0, 90, n),
                                                               unit="D")
            + pd.to_timedelta(rng.integers(0, 12, n) * 1800, unit="s")).astype("datetime64[ns]")
    return pd.DataFrame({"birth": birth, "seen": seen,
                         "batch": pd.Series(pd.Timestamp("2024-01-01"), index=range(n)),
                         "score": rng.integers(0, 100, n) * 5 + 1000,
                         "sex": rng.choice(["F", "M"], n), "other": rng.normal(size=n)})


DATED = ["birth", "seen", "batch", "score", "sex"]
DAY = 86_400 * 10**9


def test_dates_travel_in_days_and_come_back_exactly(client):
    df = dated_table(3000, seed=5)
    top = D.plan(dd.from_pandas(df, npartitions=3), DATED, 5, leaf_rows=len(df), client=client,
                 allow_unique=["other"])
    # Days over 82 years: int16, not int64 nanoseconds; half hours over 90 days: int16;
    # a single date: int8 (its step unknown, 1); scores in steps of 5 over 500: int8.
    assert [str(t) for t in top.key_dtypes] == ["int16", "int16", "int8", "int8", "int8"]
    assert top.key_steps == [DAY, 1800 * 10**9, 1, 5, 1]
    keys = encode_keys(df, top.domain)
    assert (keys[0] == K.MISSING_KEY).any()
    shipped = narrow_keys(keys, top.key_dtypes, top.key_offsets, DATED, top.key_steps)
    assert shipped[0].min() == -1 and shipped[0].max() == (
        df["birth"].max() - df["birth"].min()) // pd.Timedelta(days=1)
    order = np.random.default_rng(1).permutation(len(df))
    for j, col in enumerate(shipped):
        out = np.empty(len(df), dtype=np.int64)
        gather_keys(col, order, out, top.key_offsets[j], top.key_steps[j])
        assert np.array_equal(out, keys[j][order]), DATED[j]


@pytest.mark.parametrize("exchange", ["rows", "keys"])
@pytest.mark.parametrize("table", ["dated", "codes"])
def test_one_leaf_is_the_local_engines_release_on_either_path(client, exchange, table):
    # One leaf: the Dask engine must publish what the local engine publishes from
    # the unshipped keys, on either path. Dated: keys in their step (days, hours).
    # Codes: a class whose rows all miss an ordinal or a count sends its bounds
    # as missing.
    df, qis, k = ((dated_table(2500, seed=6), DATED, 7) if table == "dated"
                  else (wide_codes_table(4000, seed=2), QIS, 6))
    expected = local.anonymize(df, qis, k, class_column="cls", allow_unique=["other"])
    got = D.anonymize(dd.from_pandas(df, npartitions=3), qis, k, leaf_rows=len(df),
                      client=client, class_column="cls", exchange=exchange,
                      allow_unique=["other"]).compute().sort_index()
    for col in qis + ["other"]:
        assert got[col].astype(str).tolist() == expected[col].astype(str).tolist(), col
    assert got.groupby("cls").size().min() >= k


def test_keys_in_their_step_agree_on_both_paths_with_many_leaves(client):
    df = dated_table(5000, seed=7)
    ddf = dd.from_pandas(df, npartitions=4)
    out = {}
    for exchange in ("rows", "keys"):
        top = D.plan(ddf, DATED, 6, leaf_rows=600, client=client, exchange=exchange,
                     allow_unique=["other"])
        assert top.n_leaves > 4 and top.key_steps[0] == DAY
        out[exchange] = D.anonymize(ddf, DATED, 6, leaf_rows=600, client=client,
                                    exchange=exchange, class_column="cls",
                                    allow_unique=["other"]).compute().sort_index()
    rows, keys = out["rows"], out["keys"]
    for col in DATED + ["cls"]:
        assert rows[col].astype(str).tolist() == keys[col].astype(str).tolist(), col
    assert keys.groupby("cls").size().min() >= 6


def test_a_date_off_its_step_is_refused(client):
    df = dated_table(2000, seed=8)
    top = D.plan(dd.from_pandas(df, npartitions=2), DATED, 5, leaf_rows=len(df), client=client,
                 allow_unique=["other"])
    changed = df.assign(birth=df["birth"] + pd.Timedelta(hours=1))  # as if the input changed
    with pytest.raises(RuntimeError, match="'birth' holds a value outside the range"):
        attach_leaf(changed, top, {"number": 1})


@given(st.lists(st.one_of(st.none(), st.integers(-2**62, 2**62)), min_size=1, max_size=60),
       st.integers(1, 5), st.integers(1, 10**6))
@settings(max_examples=50, deadline=None)
def test_merged_sketches_measure_the_gcd_of_every_key_above_the_smallest(values, parts, scale):
    from dmondrian._dask.domain_pass import domain_sketch, merge_domain

    col = pd.array([None if v is None else v // scale * scale for v in values], dtype="Int64")
    df = pd.DataFrame({"x": col})
    cuts = np.linspace(0, len(df), parts + 1).astype(int)
    sketches = [domain_sketch(df.iloc[a:b], i, ["x"], ["numeric"], 4)
                for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True))]
    present = [int(v) for v in col.dropna()]
    expected = 0
    for v in present:
        expected = math.gcd(expected, v - min(present))
    assert int(merge_domain(*sketches).step[0]) == expected
