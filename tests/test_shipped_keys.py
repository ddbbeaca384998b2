"""The distributed engine ships QI keys through the shuffle, not values."""

from __future__ import annotations

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
    top = D.plan(dd.from_pandas(df, npartitions=3), QIS, 5, leaf_rows=len(df), client=client)
    dtypes = key_dtypes(top.domain)
    # 151 cities with missing need int16; 7 levels, 70 shops, a boolean (nominal)
    # and counts 0..39 (an offset above the smallest): int8; 500 hours in
    # nanoseconds need int64, shipped as the keys themselves.
    assert [str(t) for t in dtypes] == ["int16", "int8", "int8", "int64", "int8", "int8"]
    offsets = top.key_offsets
    assert offsets == [0, 0, 0, 0, int(df["count"].min()), 0]
    keys = encode_keys(df, top.domain)
    assert (keys[1] == K.MISSING_KEY).any() and (keys[4] == K.MISSING_KEY).any()
    shipped = narrow_keys(keys, dtypes, offsets, QIS)
    order = np.random.default_rng(0).permutation(len(df))
    for j, col in enumerate(shipped):
        out = np.empty(len(df), dtype=np.int64)
        gather_keys(col, order, out, offsets[j])
        assert np.array_equal(out, keys[j][order]), QIS[j]


def test_a_value_outside_the_measured_range_is_refused(client):
    df = wide_codes_table(2000, seed=4)
    top = D.plan(dd.from_pandas(df, npartitions=2), QIS, 5, leaf_rows=len(df), client=client)
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
    expected = local.anonymize(df, QIS, 6, mode=mode, class_column="cls")
    got = D.anonymize(dd.from_pandas(df, npartitions=4), QIS, 6, mode=mode,
                      leaf_rows=len(df), client=client, class_column="cls").compute()
    got = got.sort_index()
    assert list(got.columns) == list(expected.columns)
    for col in QIS + ["other"]:
        assert got[col].astype(str).tolist() == expected[col].astype(str).tolist(), col


def test_small_leaves_give_a_valid_release(client, tmp_path):
    df = wide_codes_table(6000, seed=3)
    top = D.anonymize_to_parquet(dd.from_pandas(df, npartitions=4), tmp_path / "out", QIS, 6,
                                 leaf_rows=800, client=client, class_column="cls",
                                 write_options={"write_index": True})  # compared by index
    assert top.n_leaves > 4
    out = pd.read_parquet(tmp_path / "out").sort_index()
    released = out.astype({q: str for q in QIS})
    assert_valid_release(df.astype({"other": out["other"].dtype}), released, QIS, 6,
                         class_column="cls")
