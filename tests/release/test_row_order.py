"""Written releases do not keep the input's row order (issue 25, bug 5).

The input is sorted by birth date and carries its row number, released as is
(``allow_unique``). Inside each published class, the rank correlation between
the row number and the position in the written file must be near 0 for every
writer, where it was exactly 1; the in-memory API keeps the order.
"""

from __future__ import annotations

import json

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed_helpers import make_census

import dmondrian
from dmondrian import distributed as D
from dmondrian.cli import main
from dmondrian.release import row_order

QIS = ["age", "zip", "sex"]
K = 40


@pytest.fixture(scope="module")
def sorted_people(tmp_path_factory):
    df = make_census(6000, seed=4)[["birth_date", "age", "zip", "sex", "income"]]
    df = df.sort_values("birth_date", kind="stable", ignore_index=True)
    df["row"] = np.arange(len(df))
    folder = tmp_path_factory.mktemp("order")
    df.to_csv(folder / "people.csv", index=False)
    df.to_parquet(folder / "people.parquet", index=False)
    return df, folder


def _spearman(a, b) -> float:
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def within_class_order(released: pd.DataFrame) -> tuple[float, float]:
    """Mean rank correlation, and mean |correlation|, of the row numbers and the file
    positions inside each class of at least 10 rows."""
    released = released.reset_index(drop=True)
    keys = [released[q].astype(str) for q in QIS]
    rhos = [_spearman(group["row"].to_numpy(), group.index.to_numpy())
            for _, group in released.groupby(keys) if len(group) >= 10]
    assert len(rhos) >= 20
    return float(np.mean(rhos)), float(np.mean(np.abs(rhos)))


def assert_shuffled(released: pd.DataFrame) -> None:
    mean, mean_abs = within_class_order(released)
    # Unshuffled, both are 1.00; a random order gives a mean near 0 (sd 0.02
    # here) and a mean |rho| near 0.14 for classes of 40-80 rows.
    assert abs(mean) < 0.1 and mean_abs < 0.3, (mean, mean_abs)


def _read_dataset(path) -> pd.DataFrame:
    files = sorted(path.glob("part.*.parquet"), key=lambda p: int(p.name.split(".")[1]))
    for f in files:
        schema = pq.read_schema(f)
        assert "__index_level_0__" not in schema.names and "row" in schema.names
        meta = json.loads(schema.metadata[b"pandas"])
        assert not meta["index_columns"] or meta["index_columns"][0].get("kind") == "range"
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def test_in_memory_api_keeps_the_input_order(sorted_people):
    df, _ = sorted_people
    rel = dmondrian.anonymize(df, QIS, K, allow_unique=["row", "birth_date", "income"])
    assert rel["row"].tolist() == df["row"].tolist()
    assert within_class_order(rel)[0] == pytest.approx(1.0)


@pytest.mark.parametrize("out", ["rel.csv", "rel.parquet"])
def test_cli_local_writers_shuffle_seeded(sorted_people, out, capsys):
    df, folder = sorted_people
    args = ["anonymize", str(folder / "people.csv"), "", "--k", str(K), "--qi", ",".join(QIS),
            "--allow-unique", "row,birth_date,income", "--no-progress", "--overwrite"]
    written = []
    for name, seed in ((out, "7"), ("again_" + out, "7"), ("other_" + out, "8")):
        args[2] = str(folder / name)
        assert main([*args, "--seed", seed]) == 0, capsys.readouterr().err
        written.append(io_read(folder / name))
    assert_shuffled(written[0])
    assert written[0].equals(written[1])  # the same seed writes the same file
    assert not written[0]["row"].equals(written[2]["row"])
    manifest = json.loads((folder / f"{out}.manifest.json").read_text())
    assert manifest["extra"]["row_order"] == {"order": "shuffled within each file",
                                              "seeded": True, "index_written": False}


def io_read(path) -> pd.DataFrame:
    from dmondrian.io import files as io

    return io.read_table(str(path))


def test_dask_writers_shuffle(sorted_people, client, tmp_path):
    df, folder = sorted_people
    ddf = dd.from_pandas(df, npartitions=3)
    # The whole-row path: its files hold whole classes, whose order is measured here.
    # (On the keys path file i holds input partition i's rows: which file a row is in
    # follows the input, as the design says; each file's rows are shuffled the same way.)
    options = {"allow_unique": ["row", "birth_date", "income"], "client": client,
               "leaf_rows": 1500, "random_state": 3, "exchange": "rows"}
    D.anonymize_to_parquet(ddf, str(tmp_path / "pq"), QIS, K, **options)
    assert_shuffled(_read_dataset(tmp_path / "pq"))
    D.anonymize(ddf, QIS, K, **options).to_parquet(str(tmp_path / "lazy"))
    assert_shuffled(_read_dataset(tmp_path / "lazy"))
    D.anonymize_to_csv(ddf, str(tmp_path / "csv" / "part-*.csv"), QIS, K, **options)
    parts = sorted((tmp_path / "csv").glob("part-*.csv"))
    assert_shuffled(pd.concat([pd.read_csv(p) for p in parts], ignore_index=True))
    assert "Unnamed: 0" not in pd.read_csv(parts[0]).columns  # no index column


def test_cli_distributed_writer_shuffles(sorted_people, client, tmp_path, capsys):
    _, folder = sorted_people
    out = tmp_path / "dist"
    code = main(["anonymize", str(folder / "people.parquet"), f"{out}/", "--k", str(K),
                 "--qi", ",".join(QIS), "--allow-unique", "row,birth_date,income",
                 "--output-format", "parquet", "--distributed", "--leaf-rows", "1500",
                 "--scheduler", client.scheduler.address, "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert_shuffled(_read_dataset(out))
    manifest = json.loads((tmp_path / "dist.manifest.json").read_text())
    assert manifest["extra"]["row_order"]["order"] == "shuffled within each file"


def _frames():
    """Two frames of one length, their values different; the first sorted by ``day``."""
    rng = np.random.default_rng(5)
    day = pd.Series(pd.date_range("2024-01-01", periods=300, freq="h", tz="UTC"))
    first = pd.DataFrame({"day": day, "zip": pd.Categorical(rng.choice(["[1, 5]", "[6, 9]"], 300)),
                          "income": pd.array(rng.integers(0, 99, 300), dtype="Int64"),
                          "note": pd.array(rng.choice(["a", "b", None], 300), dtype="string"),
                          "score": np.where(rng.random(300) < 0.1, np.nan, rng.random(300)),
                          "misc": pd.Series(rng.choice(["x", 1, None], 300), dtype=object)})
    second = first.assign(income=first["income"] + 1)
    return first, second


def test_the_permutation_is_keyed_by_the_files_rows():
    first, second = _frames()
    perm = row_order.row_permutation
    assert (perm(3, 0, first) == perm(3, 0, first.copy())).all()  # the same frame and seed
    assert shuffle_rows_equal(first, 3)
    assert not (perm(3, 0, first) == perm(3, 0, second)).all()   # same length, other values
    assert not (perm(3, 0, first) == perm(3, 0, first.iloc[::-1])).all()  # other order


def shuffle_rows_equal(frame, seed) -> bool:
    return row_order.shuffle_rows(frame, seed).equals(row_order.shuffle_rows(frame.copy(), seed))


def test_guessing_the_seed_does_not_restore_the_order():
    # The old rule, default_rng([_STREAM, seed, number]).permutation(n), depended on the
    # seed, the file number and the row count only: for a file shuffled with a seed in
    # 0..50, trying seeds 0..50 and undoing each permutation found one under which
    # ``day`` came back sorted, the input's order. The new rule also keys it by the rows
    # in that order, which the attacker does not have.
    first, _ = _frames()
    for seed in (0, 50):
        released = row_order.shuffle_rows(first, seed).reset_index(drop=True)
        for guess in range(201):
            # The attacker's best: the new rule applied to the file as released.
            undone = released.iloc[np.argsort(row_order.row_permutation(guess, 0, released))]
            assert not undone["day"].is_monotonic_increasing, (seed, guess)


def _categorical_frame() -> pd.DataFrame:
    """3,000 rows of Categoricals with more categories than the 1,024 rows hashed (text
    with missing values, numbers, days, object text) and a float."""
    n = 3000
    rng = np.random.default_rng(3)
    labels = pd.Index([f"[{i}, {i + 4}]" for i in range(5000)], dtype="str")
    return pd.DataFrame({
        "label": pd.Categorical.from_codes(rng.integers(-1, 5000, n), labels),
        "number": pd.Categorical.from_codes(rng.integers(0, 4000, n),
                                            pd.Index(np.arange(4000) * 3)),
        "day": pd.Categorical.from_codes(rng.integers(0, 2000, n),
                                         pd.date_range("2001-01-01", periods=2000)),
        "text": pd.Categorical.from_codes(rng.integers(0, 1500, n),
                                          pd.Index([f"t{i}" for i in range(1500)], dtype=object)),
        "pay": rng.normal(size=n),
    })


def test_the_digest_hashes_only_the_sampled_categories_and_stays_the_same():
    # rows_digest hashes the sampled rows' categories only (a label column has tens of
    # thousands): the digest, and so every seeded file's order, must stay what hashing
    # every category gave (the values below were computed that way, before the change).
    frame = _categorical_frame()
    assert row_order.rows_digest(frame) == 11583915022685407314
    assert row_order.row_permutation(7, 2, frame)[:8].tolist() == [
        602, 2055, 1309, 1955, 789, 425, 2091, 1060]
    # The same values as plain columns: a Categorical hashes as its values.
    plain = frame.assign(**{c: frame[c].astype(frame[c].cat.categories.dtype)
                            for c in ["label", "number", "day"]})
    assert row_order.rows_digest(plain) == row_order.rows_digest(frame)
    # Categories no row uses do not count; a value the sample holds does.
    wider = frame.assign(label=frame["label"].cat.add_categories(["[9000, 9001]"]))
    assert row_order.rows_digest(wider) == row_order.rows_digest(frame)
    changed = frame.copy()
    changed.loc[0, "label"] = "[7, 11]"
    assert row_order.rows_digest(changed) != row_order.rows_digest(frame)


def _typed_frame(n=3000) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame({
        "age": pd.Categorical(rng.choice(["[20, 29]", "[30, 39]", "[40, 49]"], n)),
        "job": pd.Series(rng.choice(["nurse", "clerk", None, "pilot"], n), dtype="str"),
        "name": pd.Series([f"person {i}" for i in rng.permutation(n)], dtype="str"),
        "when": pd.date_range("2020-01-01", periods=n, freq="h", tz="Europe/Paris"),
        "stamp": pd.date_range("2020-01-01", periods=n, freq="ns"),
        "wait": pd.to_timedelta(rng.integers(0, 10**9, n)),
        "flag": rng.random(n) < 0.5,
        "count": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 9, n)),
                          dtype="Int64"),
        "pay": rng.normal(size=n),
        "level": pd.Categorical(rng.choice(["low", "high"], n), ordered=True),
    }, index=pd.RangeIndex(n, name="rid") + 7)


@pytest.mark.parametrize("write_index", [False, True])
def test_a_shuffled_write_takes_text_as_indices_and_reads_back_the_same(
        tmp_path, monkeypatch, write_index):
    # The sink dictionary-encodes a shuffled file's text columns of few values before
    # the take (the writer encodes them anyway): the file must read back exactly as the
    # plain take's, in shuffle_rows' order, text as text (not as a Categorical).
    from dmondrian.io import parquet_sink
    from dmondrian.io.parquet_sink import ParquetSink

    frame = _typed_frame()

    def write(name):
        sink = ParquetSink.create(tmp_path / name, frame.iloc[:0], ["age"],
                                  {"write_index": write_index}, random_state=5)
        assert sink.write(frame, 3) == len(frame)
        return pq.ParquetFile(tmp_path / name / "part.3.parquet")

    table = pa.Table.from_pandas(frame, preserve_index=write_index)
    sink = ParquetSink.create(tmp_path / "probe", frame.iloc[:0], ["age"],
                              {"write_index": write_index})
    assert sink._text_to_encode(table) == ["job"]  # "name": every value distinct
    encoded = write("encoded")
    monkeypatch.setattr(parquet_sink, "ENCODE_SHARE", -1)
    plain = write("plain")
    assert encoded.metadata.metadata == plain.metadata.metadata  # ARROW:schema, pandas
    assert encoded.schema.to_arrow_schema().equals(plain.schema.to_arrow_schema())
    back = encoded.read()
    assert back.equals(plain.read())
    assert back.schema.equals(plain.read().schema, check_metadata=True)
    assert pa.types.is_large_string(back.schema.field("job").type)
    job = encoded.schema.names.index("job")
    chunk, plain_chunk = (f.metadata.row_group(0).column(job) for f in (encoded, plain))
    assert "RLE_DICTIONARY" in chunk.encodings
    assert (chunk.statistics.min, chunk.statistics.max, chunk.statistics.null_count) == (
        plain_chunk.statistics.min, plain_chunk.statistics.max, plain_chunk.statistics.null_count)
    got = pd.read_parquet(tmp_path / "encoded" / "part.3.parquet")
    expected = row_order.shuffle_rows(frame, row_order.row_order_seed(5), 3)
    if not write_index:
        expected = expected.reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected)
    pd.testing.assert_series_equal(got.dtypes, pd.read_parquet(
        tmp_path / "plain" / "part.3.parquet").dtypes)


def test_a_shuffled_write_takes_a_long_tail_as_indices_and_reads_back_the_same(tmp_path,
                                                                              monkeypatch):
    # Text whose sample repeats values (here 450 values over 3,000 rows: about 400 of
    # the 1,024 sampled rows distinct) is encoded before the take, and reads back as
    # the plain take's, in shuffle_rows' order; distinct values are taken as text.
    from dmondrian.io import parquet_sink
    from dmondrian.io.parquet_sink import ParquetSink

    rng = np.random.default_rng(4)
    n = 3000
    frame = pd.DataFrame({
        "tail": pd.Series([f"item {i}" if i % 7 else None for i in rng.integers(0, 450, n)],
                          dtype="str"),
        "name": pd.Series([f"person {i}" for i in rng.permutation(n)], dtype="str"),
        "pay": rng.normal(size=n)})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = ParquetSink.create(tmp_path / "probe", frame.iloc[:0], [])
    assert sink._text_to_encode(table) == ["tail"]

    def write(name):
        sink = ParquetSink.create(tmp_path / name, frame.iloc[:0], [], random_state=9)
        assert sink.write(frame, 1) == n
        return pd.read_parquet(tmp_path / name / "part.1.parquet")

    encoded = write("encoded")
    monkeypatch.setattr(parquet_sink, "ENCODE_SHARE", -1)
    plain = write("plain")
    pd.testing.assert_frame_equal(encoded, plain)
    expected = row_order.shuffle_rows(frame, row_order.row_order_seed(9), 1)
    pd.testing.assert_frame_equal(encoded, expected.reset_index(drop=True))


def test_the_sketch_of_a_writes_dictionaries_is_the_rows_own(tmp_path):
    # The write tasks' identifying check takes the distinct values of the text the sink
    # encodes instead of finding them again: the same registers, missing values left out,
    # and only for the columns it encoded.
    from dmondrian.io.parquet_sink import ParquetSink
    from dmondrian.release.identifiers import distinct_sketch

    rng = np.random.default_rng(8)
    n = 3000
    frame = pd.DataFrame({
        "tail": pd.Series([f"item {i}" if i % 7 else None for i in rng.integers(0, 450, n)],
                          dtype="str"),
        "few": pd.Series(rng.choice(["a", "b", None], n), dtype="str"),
        "name": pd.Series([f"person {i}" for i in rng.permutation(n)], dtype="str"),
        "count": rng.integers(0, 50, n)})
    # Text in two chunks, as a frame read from two row groups holds it.
    halves = [pa.array([f"v{i}" if i % 5 else None for i in rng.integers(0, 300, n // 2)],
                       type=pa.large_string()) for _ in range(2)]
    frame["chunked"] = pd.array(pa.chunked_array(halves),
                                dtype=pd.StringDtype("pyarrow", na_value=np.nan))
    assert pa.Table.from_pandas(frame).column("chunked").num_chunks == 2
    columns = list(frame.columns)
    distinct = {}
    sink = ParquetSink.create(tmp_path / "rel", frame.iloc[:0], [], random_state=2)
    assert sink.write(frame, 0, distinct) == n
    assert sorted(distinct) == ["chunked", "few", "tail"]  # "name": taken as text
    assert sorted(distinct["few"]) == ["a", "b"]
    assert set(distinct["tail"]) == set(frame["tail"].dropna())
    assert sorted(distinct["chunked"]) == sorted(frame["chunked"].dropna().unique())
    by_rows = distinct_sketch(frame, columns)
    by_dictionaries = distinct_sketch(frame, columns, distinct)
    assert by_rows.rows == by_dictionaries.rows == n
    for c in columns:
        assert np.array_equal(by_rows.registers[c], by_dictionaries.registers[c]), c
    # In the input's order, nothing is encoded and nothing reported.
    kept = {}
    ParquetSink.create(tmp_path / "kept", frame.iloc[:0], [],
                       {"shuffle_rows": False}).write(frame, 0, kept)
    assert kept == {}
