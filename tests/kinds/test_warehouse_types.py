"""Warehouse types as quasi-identifiers: dates, decimals, durations, periods, float32 and
Arrow-backed columns, numpy-backed and Arrow-backed, on the local engine, the Dask engine
(a multi-process cluster) and the command line, with missing values."""

from __future__ import annotations

import datetime as dt
import decimal
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import distributed as D
from dmondrian import metrics, parse_range
from dmondrian.cli import main
from dmondrian.errors import UnsupportedDtypeError
from dmondrian.kinds import detect_kind, resolve_kind

K = 5
QIS = ["birth", "amount", "zip", "stay", "seen", "weight"]
DATE_RANGE = re.compile(r"\[\d{4}-\d\d-\d\d, \d{4}-\d\d-\d\d\]")
DECIMAL_RANGE = re.compile(r"\[-?\d+\.\d\d, -?\d+\.\d\d\]")


def _gaps(values: list, every: int) -> list:
    return [None if i % every == 0 else v for i, v in enumerate(values)]


def numpy_table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """What pandas makes of a warehouse export: date and Decimal objects, nullable ints,
    timedeltas, periods, tz-aware stamps and float32, each with missing values."""
    rng = np.random.default_rng(seed)
    days = rng.integers(0, 20_000, n)
    cents = rng.integers(-50_000, 500_000, n)
    stay = pd.to_timedelta(rng.integers(0, 400, n) * 1800, unit="s").astype("timedelta64[s]")
    seen = pd.to_datetime(rng.integers(1.5e9, 1.7e9, n), unit="s").tz_localize("UTC")
    weight = rng.normal(70, 15, n).astype(np.float32)
    weight[::13] = np.nan
    return pd.DataFrame({
        "birth": pd.Series(_gaps([dt.date(1940, 1, 1) + dt.timedelta(days=int(d))
                                  for d in days], 17), dtype=object),
        "amount": pd.Series(_gaps([decimal.Decimal(int(c)).scaleb(-2) for c in cents], 19),
                            dtype=object),
        "zip": pd.array(_gaps(rng.integers(10_000, 10_100, n).tolist(), 23), dtype="Int32"),
        "stay": stay.where(np.arange(n) % 29 != 0),
        "seen": seen.tz_convert("Europe/Paris").where(np.arange(n) % 31 != 0),
        "weight": weight,
        "month": pd.Series(pd.PeriodIndex.from_ordinals(rng.integers(300, 700, n), freq="M"))
                   .where(np.arange(n) % 37 != 0),
        "v": np.arange(n),
    })


def arrow_table(df: pd.DataFrame) -> pd.DataFrame:
    """The same table Arrow-backed, as ``pd.read_parquet(..., dtype_backend="pyarrow")``
    reads it (periods have no Arrow type)."""
    table = pa.Table.from_pandas(df.drop(columns=["month"], errors="ignore"),
                                 preserve_index=False)
    return table.to_pandas(types_mapper=pd.ArrowDtype)


def _covers(label, value, kind, float32: bool = False) -> bool:
    if pd.isna(value):
        value = None
    elif float32:  # float32 bounds are float32 values: compared as float32
        value = np.float32(value)
    return parse_range(label, kind).contains(value)


def assert_release(original: pd.DataFrame, released: pd.DataFrame, qis, k: int = K):
    """k holds and every published label contains its row's original value."""
    assert len(released) == len(original)
    sizes = released.groupby([released[q].astype(str) for q in qis], dropna=False).size()
    assert sizes.min() >= k
    for q in qis:
        kind = resolve_kind(original[q])
        float32 = str(original[q].dtype) in ("float32", "float[pyarrow]")
        for label, value in zip(released[q].astype(str), original[q].astype(object),
                                strict=True):
            assert _covers(label, value, kind, float32), (q, label, value)


# -- one detection ------------------------------------------------------------------------------


def _arrow(values, type_):
    return pd.Series(pd.array(values, dtype=pd.ArrowDtype(type_)), name="c")


@pytest.mark.parametrize("series, kind", [
    (pd.Series([dt.date(2020, 1, 2), None], dtype=object), "datetime"),
    (pd.Series([decimal.Decimal("1.50"), None], dtype=object), "numeric"),
    (pd.Series(pd.to_timedelta([1, None], unit="D")), "numeric"),
    (pd.Series(pd.period_range("2020-01", periods=2, freq="M")), "datetime"),
    (_arrow([dt.date(2020, 1, 2), None], pa.date32()), "datetime"),
    (_arrow([dt.date(2020, 1, 2), None], pa.date64()), "datetime"),
    (_arrow([1, None], pa.timestamp("ms", tz="UTC")), "datetime"),
    (_arrow([decimal.Decimal("1.5"), None], pa.decimal128(12, 2)), "numeric"),
    (_arrow([decimal.Decimal("1.5"), None], pa.decimal256(50, 2)), "numeric"),
    (_arrow([1, None], pa.duration("s")), "numeric"),
    *[(_arrow([1, None], t), "numeric") for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(),
                                                 pa.uint8(), pa.uint32(), pa.uint64())],
    (_arrow([1.5, None], pa.float32()), "numeric"),
    (_arrow([1.5, None], pa.float64()), "numeric"),
    (_arrow([True, None], pa.bool_()), "nominal"),
    (_arrow(["a", None], pa.string()), "nominal"),
    (_arrow(["a", None], pa.large_string()), "nominal"),
    (pd.Series(pd.arrays.ArrowExtensionArray(pa.array(["a", None, "b"]).dictionary_encode())),
     "nominal"),
    (pd.Series(pd.arrays.ArrowExtensionArray(pa.DictionaryArray.from_arrays(
        pa.array([1, 0, None], pa.int8()), pa.array(["low", "high"]), ordered=True))), "ordinal"),
])
def test_each_warehouse_type_is_detected_as_the_kind_it_means(series, kind):
    assert detect_kind(series).name == kind
    assert resolve_kind(series).name == kind


@pytest.mark.parametrize("series, hint", [
    (_arrow([dt.time(8, 30), None], pa.time64("us")), "pd.to_timedelta"),
    (_arrow([[1, 2], None], pa.list_(pa.int64())), "nested"),
    (pd.Series([1 + 2j, 3j]), "convert"),
    (pd.Series(pd.arrays.IntervalArray.from_breaks([0, 1, 2])), "bound"),
])
def test_a_type_no_kind_takes_gets_a_typed_error_naming_the_column(series, hint):
    df = pd.DataFrame({"slot": series})
    with pytest.raises(UnsupportedDtypeError, match=r"'slot'.*" + re.escape(hint)):
        dmondrian.anonymize(df, ["slot"], k=1)


# -- local engine -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def numpy_backed():
    return numpy_table()


@pytest.mark.parametrize("backend", ["numpy", "arrow"])
def test_local_release_holds_k_and_each_label_contains_its_value(numpy_backed, backend):
    df = numpy_backed if backend == "numpy" else arrow_table(numpy_backed)
    qis = [*QIS, "month"] if backend == "numpy" else QIS
    out = dmondrian.anonymize(df, qis, k=K, allow_unique=["v"])
    assert_release(df, out, qis)
    assert out["birth"].astype(str).str.fullmatch(DATE_RANGE).any()
    assert out["amount"].astype(str).str.fullmatch(DECIMAL_RANGE).any()
    # float32 bounds are float32's shortest digits, not float64's.
    bounds = out["weight"].astype(str).str.findall(r"-?\d+\.\d+").explode().dropna()
    assert (bounds.map(lambda b: repr(float(str(np.float32(b))))) == bounds).all()
    assert bounds.str.len().max() <= 11
    assert dmondrian.verify(out, qis, K)


def test_numpy_and_arrow_backed_columns_publish_the_same_release(numpy_backed):
    a = dmondrian.anonymize(numpy_backed, QIS, k=K, allow_unique=["v"])
    b = dmondrian.anonymize(arrow_table(numpy_backed), QIS, k=K, allow_unique=["v"])
    for q in QIS:
        assert a[q].astype(str).tolist() == b[q].astype(str).tolist(), q
    original = numpy_backed[QIS]
    assert metrics.ncp(a, QIS, original).overall == pytest.approx(
        metrics.ncp(b, QIS, arrow_table(numpy_backed)[QIS]).overall)


@pytest.mark.parametrize("backend", ["numpy", "arrow"])
@pytest.mark.parametrize("how", ["midpoint", "mean"])
def test_midpoint_and_mean_keep_the_source_type(numpy_backed, backend, how):
    df = numpy_backed if backend == "numpy" else arrow_table(numpy_backed)
    qis = ["birth", "amount", "stay", "seen", *(["month"] if backend == "numpy" else [])]
    out = dmondrian.anonymize(df, qis, k=K, generalization=how, class_column="cls",
                              allow_unique=["v"])
    for q in qis:
        assert out[q].dtype == df[q].dtype, q
        published = out[q].dropna()
        assert len(published) > 0
        # Every class's published value lies between its smallest and largest original.
        frame = pd.DataFrame({"cls": out["cls"], "o": df[q].astype(object),
                              "p": out[q].astype(object)}).dropna()
        groups = frame.groupby("cls")
        lo, hi, pub = groups["o"].min(), groups["o"].max(), groups["p"].first()
        assert ((lo <= pub) & (pub <= hi)).all(), q
    # The same classes cost the same whether they publish ranges or values.
    ranges = dmondrian.anonymize(df, qis, k=K, class_column="cls", allow_unique=["v"])
    assert metrics.ncp(out, qis, df).overall == pytest.approx(
        metrics.ncp(ranges, qis, df).overall)
    dates = out["birth"].dropna().astype(object)
    assert all(type(d) is dt.date for d in dates)  # a DATE midpoint is a DATE
    amounts = out["amount"].dropna().astype(object)
    assert all(a.as_tuple().exponent == -2 for a in amounts)  # a DECIMAL keeps its scale


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(st.none(), st.decimals(min_value=-10**6, max_value=10**6, places=3,
                                                  allow_nan=False)), min_size=2, max_size=60),
       st.lists(st.one_of(st.none(), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
                min_size=60, max_size=60),
       st.integers(1, 6))
@example([None, None], [None] * 60, 1)  # a class of missing values only publishes a null
def test_decimals_and_dates_cover_their_values(amounts, dates, k):
    n = len(amounts)
    df = pd.DataFrame({"amount": pd.Series(amounts, dtype=object),
                       "day": pd.Series(dates[:n], dtype=object)})
    k = min(k, n)
    for table in (df, arrow_table(df)):
        out = dmondrian.anonymize(table, ["amount", "day"], k=k)
        assert_release(table, out, ["amount", "day"], k)


# -- Dask engine and command line -------------------------------------------------------------


def warehouse_parquet(path: Path, n: int = 3000, seed: int = 1) -> Path:
    """A Parquet file as a warehouse writes it: date32, decimal128(12, 2), int32, nulls."""
    rng = np.random.default_rng(seed)
    birth = _gaps([dt.date(1940, 1, 1) + dt.timedelta(days=int(d))
                   for d in rng.integers(0, 25_000, n)], 50)
    amount = _gaps([decimal.Decimal(int(c)).scaleb(-2) for c in rng.integers(0, 10**6, n)], 40)
    zips = _gaps(rng.integers(10_000, 10_100, n).tolist(), 30)
    table = pa.table({"birth": pa.array(birth, pa.date32()),
                      "amount": pa.array(amount, pa.decimal128(12, 2)),
                      "zip": pa.array(zips, pa.int32()),
                      "visits": pa.array(rng.integers(0, 9, n))})
    pq.write_table(table, path, row_group_size=n // 3)
    return path


WAREHOUSE_QIS = ["birth", "amount", "zip"]


def test_dask_engine_agrees_with_the_local_engine(process_cluster, tmp_path):
    import dask.dataframe as dd

    src = warehouse_parquet(tmp_path / "w.parquet")
    ddf = dd.read_parquet(src, split_row_groups=True)
    assert str(ddf.dtypes["birth"]) == "date32[day][pyarrow]"
    got = D.anonymize(ddf, WAREHOUSE_QIS, K, client=process_cluster)
    got = process_cluster.compute(got).result()
    for local_input in (pd.read_parquet(src), pd.read_parquet(src, dtype_backend="pyarrow")):
        want = dmondrian.anonymize(local_input, WAREHOUSE_QIS, K)
        assert_release(local_input, want, WAREHOUSE_QIS)
        # Equal bounds: pandas' default reader makes the int32 zip with nulls float64,
        # published [10071.0, 10095.0] where Dask's int32 gives [10071, 10095].
        for q in WAREHOUSE_QIS:
            kind = resolve_kind(local_input[q])
            assert ([parse_range(v, kind) for v in got[q].astype(str)]
                    == [parse_range(v, kind) for v in want[q].astype(str)]), q
    assert got["birth"].astype(str).str.fullmatch(DATE_RANGE).any()
    assert got["amount"].astype(str).str.fullmatch(DECIMAL_RANGE).any()


def test_dask_engine_cuts_every_type_across_leaves(process_cluster):
    import dask.dataframe as dd

    df = numpy_table(2000, seed=3)
    # Dates and decimals Arrow-backed (dask would turn objects into strings), the
    # rest numpy-backed: timedelta64, period, tz-aware datetime64, float32, Int32.
    table = arrow_table(df).assign(**{q: df[q] for q in ("zip", "stay", "seen", "weight",
                                                          "month")})
    qis = [*QIS, "month"]
    ddf = dd.from_pandas(table, npartitions=4)
    for how in ("range", "mean"):
        out = D.anonymize(ddf, qis, K, client=process_cluster, leaf_rows=500,
                          generalization=how, class_column="cls", allow_unique=["v"])
        out = process_cluster.compute(out).result().sort_index()
        if how == "range":
            assert_release(table, out, qis)
        else:
            assert out.groupby("cls").size().min() >= K
            for q in ("birth", "amount", "stay", "seen", "month"):
                assert out[q].dtype == table[q].dtype, q


@pytest.mark.parametrize("column, arrow", [("birth", "date32"), ("amount", "decimal128")])
def test_dask_refuses_object_dates_and_decimals_by_name(column, arrow):
    import dask
    import dask.dataframe as dd

    # Without dask's string conversion the objects stay objects: the schema cannot
    # tell dates from names, so the engine refuses them rather than list every date.
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(numpy_table(50)[[column, "v"]], npartitions=2)
        with pytest.raises(UnsupportedDtypeError, match=rf"'{column}'.*ArrowDtype\(pa\.{arrow}"):
            D.anonymize(ddf, [column], K)


def test_cli_publishes_date_and_decimal_ranges_on_both_engines(process_cluster, tmp_path):
    src = warehouse_parquet(tmp_path / "w.parquet")
    # The writers shuffle each file's rows (dmondrian.release.row_order): a row number,
    # released as is, puts them back in the input's order.
    table = pq.read_table(src)
    pq.write_table(table.append_column("rid", pa.array(np.arange(table.num_rows))), src)
    common = ["--k", str(K), "--qi", ",".join(WAREHOUSE_QIS), "--allow-unique", "rid",
              "--no-progress"]
    assert main(["anonymize", str(src), str(tmp_path / "local.parquet"), *common]) == 0
    assert main(["anonymize", str(src), str(tmp_path / "dask.parquet"), *common,
                 "--distributed", "--scheduler", process_cluster.scheduler.address]) == 0
    original = pd.read_parquet(src).drop(columns="rid")
    a, b = (pd.read_parquet(tmp_path / name).sort_values("rid", ignore_index=True)
            .drop(columns="rid") for name in ("local.parquet", "dask.parquet"))
    assert_release(original, a, WAREHOUSE_QIS)
    for q in WAREHOUSE_QIS:
        assert a[q].astype(str).tolist() == b[q].astype(str).tolist(), q
    assert a["birth"].astype(str).str.fullmatch(DATE_RANGE).any()
    assert a["amount"].astype(str).str.fullmatch(DECIMAL_RANGE).any()
    # The int32 zip with nulls is published as integers, as Dask reads it.
    assert not a["zip"].astype(str).str.contains(r"\.0\b").any()
