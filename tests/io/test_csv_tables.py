"""One CSV reader for the local and the Dask paths: dialects, whole-file types, --dtype.

Issue 25, bugs 3, 6 and 7: the Dask reader typed a column from its first
block and failed later ("Mismatched dtypes"), a semicolon file with decimal
commas read as one column, a ``.tsv`` had no format, and ``--dtype`` had two
converters that disagreed on Parquet input.
"""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dmondrian.errors import ColumnError, MissingColumnError
from dmondrian.io import files as io
from dmondrian.io.csv_tables import (
    CsvDialect,
    CsvTypeWarning,
    convert_dtypes,
    read_csv,
    read_csv_dask,
    sniff_separator,
)


def _late_text(n: int = 30_000) -> pd.DataFrame:
    """A table whose ``cited`` column is empty for the first rows, text further on."""
    rng = np.random.default_rng(0)
    cited = np.full(n, None, dtype=object)
    cited[n - 500:] = rng.choice(["yes", "no"], 500)
    ints = rng.integers(0, 100, n)
    gaps = rng.integers(0, 100, n).astype(float)
    gaps[n - 3] = np.nan  # missing only at the end: pandas reads float64
    return pd.DataFrame({"age": ints, "cited": cited, "late_gap": gaps,
                         "score": rng.normal(size=n).round(3),
                         "flag": rng.choice(["True", "False"], n)})


def _kinds(df: pd.DataFrame) -> dict:
    """Column dtypes, every string dtype as "text" (dask's are Arrow-backed)."""
    return {c: "text" if pd.api.types.is_string_dtype(t) and not isinstance(
        t, pd.CategoricalDtype) else str(t) for c, t in df.dtypes.items()}


@pytest.fixture(scope="module")
def late_text_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("csv") / "stops.csv"
    _late_text().to_csv(path, index=False)
    return str(path)


def test_dask_reader_types_columns_from_the_whole_file(late_text_csv):
    local = read_csv(late_text_csv)
    # dask alone types "cited" from the first block and fails further on.
    with pytest.raises(ValueError, match="Mismatched dtypes"):
        dd.read_csv(late_text_csv, blocksize=100_000).compute(scheduler="sync")
    with dask.config.set(scheduler="sync"), pytest.warns(CsvTypeWarning, match="'cited'"):
        lazy = read_csv_dask(late_text_csv, CsvDialect(","), blocksize=100_000)
    assert lazy.npartitions > 1
    back = lazy.compute(scheduler="sync").reset_index(drop=True)
    assert _kinds(back) == _kinds(local)
    assert back["age"].dtype == np.int64 and back["late_gap"].dtype == np.float64
    assert back["flag"].dtype == bool
    assert back["cited"].isna().equals(local["cited"].isna())
    assert back["cited"].dropna().tolist() == local["cited"].dropna().tolist()
    others = [c for c in local.columns if c != "cited"]
    pd.testing.assert_frame_equal(back[others], local[others])


def test_dask_reader_types_every_block(tmp_path):
    """Booleans missing in a later block, integers missing only there, a
    compressed file (one block): the types pandas gives the whole file."""
    n = 6_000
    df = pd.DataFrame({"ok": np.where(np.arange(n) % 2 == 0, "True", "False"),
                       "count": np.arange(n), "x": np.arange(n) / 4})
    df.loc[n - 2, ["ok", "count"]] = None
    for name in ("late.csv", "late.csv.gz"):
        path = str(tmp_path / name)
        df.to_csv(path, index=False)
        with dask.config.set(scheduler="sync"):
            lazy = read_csv_dask(path, CsvDialect(","),
                                 **({} if name.endswith(".gz") else {"blocksize": 20_000}))
            back = lazy.compute().reset_index(drop=True)
        pd.testing.assert_frame_equal(back, read_csv(path))
        assert back["ok"].dtype == object and back["count"].dtype == np.float64


def test_semicolon_file_with_decimal_commas(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("age;sex;income\n31;F;1234,5\n45;M;99,25\n52;F;7\n", encoding="latin-1")
    assert sniff_separator(str(path)) == ";"
    df = io.read_table(str(path), dialect=CsvDialect(decimal=","))
    assert list(df.columns) == ["age", "sex", "income"]
    assert df["income"].tolist() == [1234.5, 99.25, 7.0]
    with dask.config.set(scheduler="sync"):
        lazy = read_csv_dask(str(path), CsvDialect(decimal=","))
        assert lazy["income"].compute().tolist() == [1234.5, 99.25, 7.0]


def test_tsv_and_encoding(tmp_path):
    path = tmp_path / "people.tsv"
    path.write_bytes("name\tage\nJosé\t31\nZoë\t45\n".encode("latin-1"))
    assert io.detect_format(str(path)) == "csv"
    df = io.read_table(str(path), dialect=CsvDialect(encoding="latin-1"))
    assert df["name"].tolist() == ["José", "Zoë"] and df["age"].tolist() == [31, 45]
    with pytest.raises(io.ReadError):
        io.read_table(str(path), dialect=CsvDialect(encoding="no-such-codec"))


@pytest.mark.parametrize("engine", ["pandas", "dask"])
def test_one_dtype_converter_for_both_paths(engine):
    df = pd.DataFrame({"zip": [2134, 10001, 94110], "n": ["1", "2", None],
                       "day": ["2024-06-01", "2024-06-02", "2024-06-03"]})
    table = df if engine == "pandas" else dd.from_pandas(df, npartitions=2)
    out = convert_dtypes(table, {"zip": "str", "n": "int", "day": "datetime"}, "t.parquet")
    if engine == "dask":
        out = out.compute(scheduler="sync")
    assert out["zip"].tolist() == ["2134", "10001", "94110"]
    assert out["n"].tolist()[:2] == [1, 2] and pd.isna(out["n"].iloc[2])
    assert pd.api.types.is_datetime64_any_dtype(out["day"])
    with pytest.raises(MissingColumnError):
        convert_dtypes(table, {"nope": "str"}, "t.parquet")
    with pytest.raises(ColumnError, match="'zip'"):
        convert_dtypes(df.copy(), {"zip": "datetime64[ns, nowhere]"}, "t.parquet")


def test_a_category_conversion_on_dask_keeps_every_value():
    # Each partition has its own categories: cast to one dtype made from the empty
    # meta (no categories), every value became missing.
    df = pd.DataFrame({"job": ["nurse", "clerk", "cook", "nurse", None, "baker"],
                       "n": range(6)})
    out = convert_dtypes(dd.from_pandas(df, npartitions=3), {"job": "category"}, "t.csv")
    assert out["job"].cat.known is False  # dask's marker: the partitions' own categories
    got = out.compute(scheduler="sync")
    assert isinstance(got["job"].dtype, pd.CategoricalDtype)
    def values(col):
        return [None if pd.isna(v) else v for v in col]
    assert values(got["job"]) == values(df["job"])
