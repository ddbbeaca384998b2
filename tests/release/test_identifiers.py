"""Direct identifiers: ``identifiers=`` removes columns; columns that single out rows are
refused on every engine (the Dask paths: tests/release/test_identifiers_dask.py)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.cli import main
from dmondrian.errors import (
    ColumnError,
    DMondrianError,
    IdentifyingColumnError,
    IdentifyingColumnWarning,
    MissingColumnError,
)
from dmondrian.plans import fit_plan

QIS = ["age", "zip"]


def _table(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n), "zip": rng.integers(1000, 1100, n),
        "subject_id": rng.permutation(n) * 7 + 100,  # an id no other row shares
        "email": [f"p{i}@example.org" for i in rng.permutation(n)],
        "ward": rng.integers(0, 8, n),  # low cardinality
        "weight": rng.normal(70, 12, n),  # a continuous measurement, unique per row
        "disease": rng.choice(["flu", "cold", "acne"], n),
    })


def _warned(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [w for w in caught if issubclass(w.category, IdentifyingColumnWarning)]


def test_refuses_every_id_column_and_nothing_else():
    with pytest.raises(IdentifyingColumnError) as info:
        dmondrian.anonymize(_table(), QIS, 5, sensitive="disease", l=1)
    err = info.value
    assert isinstance(err, ColumnError) and isinstance(err, DMondrianError)
    assert isinstance(err, ValueError)
    assert err.columns == ["subject_id", "email"] and err.column == "subject_id"
    assert [f.share for f in err.found] == [1.0, 1.0]
    text = str(err)
    assert "\n" not in text and "singles out rows" not in text  # one sentence for both
    assert "'subject_id': 100% of the 2,000 rows carry a value no other row has" in text
    assert "identifiers=['subject_id', 'email'], --drop subject_id,email" in text
    assert "allow_unique=['subject_id', 'email'], --allow-unique subject_id,email" in text


def test_identifiers_and_allow_unique_each_let_it_through():
    df = _table()
    out, caught = _warned(dmondrian.anonymize, df, QIS, 5, identifiers=["email"],
                          allow_unique=["subject_id"])
    assert not caught
    assert "email" not in out.columns and out["subject_id"].equals(df["subject_id"])
    out = dmondrian.anonymize(df, QIS, 5, identifiers=["email", "subject_id"])
    assert "subject_id" not in out.columns
    out = dmondrian.anonymize(df, QIS, 5, allow_unique=["email", "subject_id"])
    assert out["email"].equals(df["email"])
    # One column left out of both: refused, named alone.
    with pytest.raises(IdentifyingColumnError, match="column 'email' unchanged") as info:
        dmondrian.anonymize(df, QIS, 5, identifiers=["subject_id"])
    assert info.value.columns == ["email"]


def test_silent_on_qis_small_tables_and_floats_nullable_ids_refused():
    df = _table()
    # As QIs, ids are generalized: released.
    dmondrian.anonymize(df[["age", "subject_id"]], ["age", "subject_id"], 5)
    dmondrian.anonymize(df.head(999), QIS, 5)
    # Floats are measurements, whole dollars included; a nullable integer id is an id.
    ids = df[["age", "zip", "subject_id"]].assign(pay=df["weight"].round() * 1000)
    ids["subject_id"] = ids["subject_id"].astype("Int64")
    ids.loc[5, "subject_id"] = pd.NA
    with pytest.raises(IdentifyingColumnError) as info:
        dmondrian.anonymize(ids, QIS, 5)
    assert info.value.columns == ["subject_id"]


def test_the_index_is_the_callers_not_a_release_column():
    # An index unique per row is how the caller aligns the result: never judged in memory.
    df = _table().set_index("subject_id")
    out = dmondrian.anonymize(df, QIS, 5, allow_unique=["email"])
    assert out.index.equals(df.index)
    assert fit_plan(df, QIS, 5, allow_unique=["email"]).transform(df).index.equals(df.index)
    # allow_unique=["index"] keeps working, though there is nothing left to allow.
    dmondrian.anonymize(df, QIS, 5, allow_unique=["email", "index"])


def test_fitted_plans_and_the_estimator_refuse_too():
    df = _table().drop(columns=["weight"])
    plan = fit_plan(df, QIS, 5)  # a fit releases nothing
    with pytest.raises(IdentifyingColumnError, match="'subject_id'"):
        plan.transform(df)
    kept = fit_plan(df, QIS, 5, identifiers=["email"],
                                    allow_unique=["subject_id"])
    out = kept.transform(df)
    assert "email" not in out.columns and out["subject_id"].equals(df["subject_id"])
    with pytest.raises(IdentifyingColumnError, match="'email'"):
        dmondrian.MondrianAnonymizer(k=5, quasi_id=QIS).fit_transform(df)
    est = dmondrian.MondrianAnonymizer(k=5, quasi_id=QIS, identifiers=["email"],
                                       allow_unique=["subject_id"]).fit(df)
    with pytest.raises(IdentifyingColumnError, match="'ward'"):
        # A plan applied through the estimator judges every table it releases.
        est.transform(df.assign(ward=np.arange(len(df))))
    assert est.transform(df)["subject_id"].equals(df["subject_id"])
    # A model plans cannot take: the estimator anonymizes each table on its own.
    with pytest.raises(IdentifyingColumnError, match="'email'"):
        dmondrian.MondrianAnonymizer(k=5, quasi_id=QIS, suppression=0.01,
                                     allow_unique=["subject_id"]).fit_transform(df)


def test_bad_identifiers_are_refused_by_name():
    df = _table(50)
    with pytest.raises(MissingColumnError, match="'name'"):
        dmondrian.anonymize(df, QIS, 5, identifiers=["name"])
    with pytest.raises(ColumnError, match="'age' is a quasi-identifier"):
        dmondrian.anonymize(df, QIS, 5, identifiers="age")
    with pytest.raises(ColumnError, match="sensitive"):
        dmondrian.anonymize(df, QIS, 5, identifiers="disease", sensitive="disease", l=1)
    with pytest.raises(MissingColumnError, match="allow_unique names 'emial'"):
        dmondrian.anonymize(df, QIS, 5, allow_unique=["emial"])


def test_report_and_verify_flag_a_release_that_carries_one():
    df = _table()
    out = dmondrian.anonymize(df, QIS, 5, allow_unique=["subject_id", "email"])
    rep = dmondrian.report(out, QIS, k=5, sensitive="disease")
    assert [f.column for f in rep.identifying_columns] == ["subject_id", "email"]
    assert rep.to_dict()["risk"]["identifying_columns"][0]["share"] == 1.0
    assert "singles out rows" in repr(rep)
    assert dmondrian.report(out, QIS, k=5, allow_unique=["subject_id", "email"]
                            ).identifying_columns == []
    res = dmondrian.verify(out, QIS, k=5)
    assert not res.ok and res.n_violations == 0
    assert [f.column for f in res.identifying_columns] == ["subject_id", "email"]
    assert "FAILED: 2 column(s) single out rows" in repr(res)
    assert "risk: column 'email'" in repr(res)
    assert res.to_dict()["risks"]["identifying_columns"][1]["column"] == "email"
    assert dmondrian.verify(out, QIS, k=5, allow_unique=["subject_id", "email"]).ok
    est = dmondrian.MondrianAnonymizer(k=5, identifiers=["email", "subject_id"])
    released = est.fit_transform(df.drop(columns=["weight"]))
    assert "email" not in released.columns and "email" not in est.get_feature_names_out()
    assert "email" not in est.quasi_id_


def test_cli_refuses_in_one_line_and_drop_or_allow_unique_let_it_through(tmp_path, capsys):
    src = tmp_path / "in.csv"
    _table().to_csv(src, index=False)
    dst = tmp_path / "out.csv"
    assert main(["anonymize", str(src), str(dst), "--k", "5", "--qi", "age,zip",
                 "--drop", "email", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "dmondrian: error: refusing to release column 'subject_id' unchanged")
    assert "--drop subject_id" in err[0] and "--allow-unique subject_id" in err[0]
    assert list(tmp_path.iterdir()) == [src]  # nothing written, no manifest
    assert main(["anonymize", str(src), str(dst), "--k", "5", "--qi", "age,zip",
                 "--drop", "email", "--allow-unique", "subject_id", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    assert "email" not in pd.read_csv(dst).columns
    manifest = json.loads((tmp_path / "out.csv.manifest.json").read_text())
    assert manifest["risks"] == {"identifying_columns": []}
    assert manifest["parameters"]["identifiers"] == ["email"]
    assert manifest["parameters"]["allow_unique"] == ["subject_id"]
    assert main(["anonymize", str(src), str(tmp_path / "o2.csv"), "--k", "5", "--qi",
                 "age,zip", "--drop", "email,subject_id", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["verify", str(dst), "--qi", "age,zip", "--k", "5"]) == 1
    assert "risk: column 'subject_id' singles out rows" in capsys.readouterr().out
    assert main(["verify", str(dst), "--qi", "age,zip", "--k", "5",
                 "--allow-unique", "subject_id"]) == 0
    capsys.readouterr()
    assert main(["report", str(dst), "--qi", "age,zip", "--allow-unique", "subject_id"]) == 0
    assert "singles out rows" not in capsys.readouterr().out


@pytest.mark.parametrize("values", [
    pd.Series(np.random.default_rng(0).integers(0, 10**12, 50_000)),
    pd.Series(["a", None, "b", "c"] * 500),
    pd.Series([f"id-{i}" for i in range(3000)], dtype="str"),  # hashed without a factorize
    pd.Series(pd.date_range("2000", periods=3000, freq="h")),
    pd.Series([0] * 10),
    pd.Series(np.arange(-1500, 1500, dtype=np.int32)),
    pd.Series(np.arange(40_000, dtype=np.uint16)),
    pd.Series(pd.array([1, None, 3, -4] * 700, dtype="Int64")),
    pd.Series(pd.to_timedelta(np.arange(2000), unit="s")),
    pd.Series([True, False, None] * 5, dtype=object),
    pd.Series([True, False] * 100),
    # Few distinct values: each hashed once, the registers the rows' own.
    pd.Series(["nurse", "clerk", None, "cook"] * 800, dtype="string[pyarrow]"),
    pd.Series(["nurse", "clerk", None, "cook"] * 800, dtype="str"),
    pd.Series([None] * 3000, dtype="string[pyarrow]"),
    pd.Series([np.nan, "x"] + [np.nan] * 3000, dtype=object),
    pd.Series(pd.Categorical(["b", None, "a", "b"] * 700, categories=["a", "b", "c"])),
    pd.Series(["a", 1, "b", 2.5, None] * 600, dtype=object),
    # Text of every storage, hashed as Python objects.
    pd.Series([f"é{i}日" for i in range(2500)] + ["", None], dtype="string[python]"),
    pd.Series([f"é{i}日" for i in range(2500)] + ["", None], dtype="str"),
])
@pytest.mark.parametrize("numpy_has_bitwise_count", [True, False])
def test_dask_sketch_registers_are_dasks_own(values, numpy_has_bitwise_count, monkeypatch):
    """The Dask engine's identifier sketch computes dask's HyperLogLog registers itself
    (faster); dask's estimate_count reads them, so they must be the same registers,
    with numpy's population count and without it (numpy < 2)."""
    from dask.dataframe.hyperloglog import compute_hll_array

    from dmondrian.release.identifiers import _HLL_BITS, _registers

    expected = compute_hll_array(values.dropna(), _HLL_BITS)
    if not numpy_has_bitwise_count:
        monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert np.array_equal(_registers(values), expected)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=300))
def test_a_writers_dictionary_gives_the_rows_registers(words):
    """A write task sketches an encoded text column from its dictionary (its distinct
    values, missing left out, ``distinct=True``): the registers of its every row."""
    from dmondrian.release.identifiers import _registers

    rows = pd.Series(words, dtype="str")
    dictionary = pd.Series(rows.dropna().unique(), dtype="str")
    assert np.array_equal(_registers(dictionary, distinct=True), _registers(rows))


def test_a_filtered_frame_is_anonymized_and_keeps_its_index():
    df = _table(4000)
    kept = df[df["age"] > 30]  # an index with gaps, unique per row
    out = dmondrian.anonymize(kept, QIS, 5, identifiers=["subject_id", "email"],
                              class_column="cls")
    assert out.index.equals(kept.index)
    assert out.groupby("cls").size().min() >= 5
    # A unique column is still refused, unless dropped or allowed.
    with pytest.raises(IdentifyingColumnError) as info:
        dmondrian.anonymize(kept, QIS, 5, identifiers=["email"])
    assert info.value.columns == ["subject_id"]


# -- one decision on every path -------------------------------------------------------------


def _verdicts(fn, *args, **kwargs) -> tuple:
    """(refused columns, warned person keys) of one release path."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(*args, **kwargs)
            refused = []
        except IdentifyingColumnError as e:
            refused = list(e.columns)
    warned = sorted(str(w.message.column) for w in caught
                    if issubclass(w.category, IdentifyingColumnWarning))
    return refused, warned


def test_every_in_memory_path_decides_as_anonymize_does():
    from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events

    ev = make_events(1_500, seed=10)
    ev["visit"] = np.arange(len(ev)) * 3  # unique per row
    qis = EVENT_QUASI_IDENTIFIERS
    expected = _verdicts(dmondrian.anonymize, ev, qis, 10)
    assert expected == (["visit"], [])  # refused first: nothing is warned
    allowed = dict(allow_unique=["visit"])
    expected = _verdicts(dmondrian.anonymize, ev, qis, 10, **allowed)
    assert expected == ([], ["user_id"])
    plan = fit_plan(ev, qis, 10, **allowed)
    est = dmondrian.MondrianAnonymizer(k=10, quasi_id=qis, **allowed)
    assert [_verdicts(plan.transform, ev), _verdicts(est.fit_transform, ev),
            _verdicts(dmondrian.anonymize, ev.sample(frac=1.0, random_state=0), qis, 10,
                      **allowed)] == [expected] * 3
    refused = _verdicts(fit_plan(ev, qis, 10).transform, ev)
    assert refused == (["visit"], [])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(900, 3000), distinct=st.integers(1, 4000), repeat=st.integers(1, 6),
       seed=st.integers(0, 2**16), missing=st.floats(0, 0.3), text=st.booleans())
def test_the_guard_counts_once_and_decides_as_the_rules_do(n, distinct, repeat, seed, missing,
                                                           text):
    # release_guard's shortcuts (one count per column, bincounts, text's compiled count,
    # the early exit, QI keys for combinations) change no verdict of either rule.
    from dmondrian.release.identifiers import candidates, identifying_columns
    from dmondrian.release.person_keys import person_key_columns, release_guard

    rng = np.random.default_rng(seed)
    people = rng.integers(0, distinct, n // repeat + 1)
    key = np.repeat(people, repeat)[:n]
    df = pd.DataFrame({"age": (key * 7919) % 70, "zip": rng.integers(0, 30, n),
                       "key": key, "id": rng.permutation(n) * 3,
                       "spread": rng.integers(0, max(2, distinct // 3), n)})
    df["mixed"] = np.where(rng.random(n) < 0.5, df["id"], df["key"])
    if text:
        df["key"] = df["key"].map("u{}".format).astype("string[pyarrow]")
    if missing:
        df["spread"] = df["spread"].astype("Int64").mask(rng.random(n) < missing)
    as_is = ["key", "id", "spread", "mixed"]
    qis = ["age", "zip"]
    found, keys = release_guard(df, as_is, qis, (), [df["age"].to_numpy(), df["zip"].to_numpy()])
    assert [f.column for f in found] == [f.column for f in identifying_columns(df, as_is)]
    flagged = {f.column for f in found}
    rest = [c for c in candidates(df.dtypes, as_is) if c not in flagged]
    # The same keys with the same figures: shares, shuffled shares, distinct values.
    assert keys == person_key_columns(df, rest, qis)
    if n >= 1000:
        assert "id" in flagged  # unique per row: still refused


@settings(max_examples=40, deadline=None)
@given(n=st.integers(200, 3000), distinct=st.integers(1, 1500), repeat=st.integers(1, 6),
       seed=st.integers(0, 2**16), spread=st.integers(0, 40), kind=st.sampled_from(
           ["small", "wide", "text", "nullable", "category"]))
def test_the_counted_shares_are_the_samples(n, distinct, repeat, seed, spread, kind):
    # release_guard takes the share over every row, from the labels it counted with (no
    # pass to find the repeated values' rows), and shuffles only when the share does not
    # rule the column out: the figures are new_tuple_share's.
    from dmondrian.release.identifiers import small_int_codes
    from dmondrian.release.person_keys import NEW_TUPLE_RATIO, _Counted, _qi_hash, new_tuple_share

    rng = np.random.default_rng(seed)
    key = np.repeat(rng.integers(0, distinct, n // repeat + 1), repeat)[:n]
    # QIs that follow the key, up to ``spread`` rows in a hundred drawn at random.
    noise = rng.random(n) < spread / 100
    df = pd.DataFrame({"age": np.where(noise, rng.integers(0, 70, n), (key * 7919) % 70),
                       "zip": np.where(noise, rng.integers(0, 30, n), key % 30)})
    values = {"small": pd.Series(key), "wide": pd.Series(key * 10**12 - 5),
              "text": pd.Series(key).map("u{}".format).astype("string[pyarrow]"),
              "nullable": pd.Series(key, dtype="Int64").mask(rng.random(n) < 0.1),
              "category": pd.Series(key).map("u{}".format).astype("category")}[kind]
    df["key"] = values
    counted = _Counted.of(df["key"], small_int_codes(df["key"]))
    expected, expected_shuffled, distinct_values, repeated = new_tuple_share(df, "key",
                                                                             ["age", "zip"])
    assert (counted.distinct, counted.repeated) == (distinct_values, repeated)
    if repeated == 0:
        return
    share, shuffled = counted.shares(_qi_hash(df, ["age", "zip"], [df["age"], df["zip"]]))
    assert share == expected
    if share < NEW_TUPLE_RATIO:
        assert shuffled == expected_shuffled
    else:
        assert np.isnan(shuffled)


def test_a_warning_points_at_the_callers_line_from_any_subpackage():
    """The warning's stacklevel skips every frame of the package, its subpackages
    included (the text QI warning is raised in dmondrian/encoding/)."""
    from dmondrian.errors import TextQuasiIdentifierWarning

    df = pd.DataFrame({"j": [f"x{i}" for i in range(300)], "a": range(300)})
    with pytest.warns(TextQuasiIdentifierWarning) as record:
        dmondrian.anonymize(df, ["j", "a"], 5)
    assert record[0].filename == __file__


def _text_column(values: np.ndarray, prefix: str, chunks: int, large: bool):
    """``values`` as Arrow text after ``prefix``, in ``chunks`` chunks: pandas' string dtype
    (``large_string``) or an ``ArrowDtype`` of ``string`` (32-bit offsets)."""
    import pyarrow as pa

    text = [None if v < 0 else f"{prefix}{v}" for v in values.tolist()]
    kind = pa.large_string() if large else pa.string()
    bounds = np.linspace(0, len(text), chunks + 1).astype(int)
    array = pa.chunked_array([pa.array(text[a:b], type=kind) for a, b in zip(bounds, bounds[1:])],
                             type=kind)
    return pd.Series(pd.arrays.ArrowStringArray(array) if large
                     else pd.arrays.ArrowExtensionArray(array))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1000, 2500), distinct=st.integers(85, 115), seed=st.integers(0, 2**16),
       missing=st.floats(0, 0.2), chunks=st.integers(1, 3), large=st.booleans(),
       prefix=st.sampled_from(["", "u", "a value longer than sixteen bytes "]))
def test_the_fast_counts_decide_as_the_exact_ones_around_the_threshold(
        n, distinct, seed, missing, chunks, large, prefix):
    # Columns of about MIN_VALUES values: Arrow text numbered in compiled code (nulls, chunks,
    # values sharing their first 16 bytes), integers ruled out by their range, categoricals.
    from dmondrian._kernel.strings import number_strings
    from dmondrian.kinds.keys import arrow_string_chunks, factorize
    from dmondrian.release.identifiers import (
        candidates,
        fewer_values,
        identifying_columns,
        int_span,
    )
    from dmondrian.release.person_keys import MIN_VALUES, person_key_columns, release_guard

    rng = np.random.default_rng(seed)
    values = rng.integers(0, distinct, n)
    values[rng.random(n) < missing] = -1
    text = _text_column(values, prefix, chunks, large)
    present = values[values >= 0]
    exact = len(np.unique(present))
    assert fewer_values(text, MIN_VALUES) == (exact < MIN_VALUES)
    assert fewer_values(text.astype("category"), MIN_VALUES) == (exact < MIN_VALUES)
    ints = pd.Series(values + 7)
    assert fewer_values(ints, MIN_VALUES, int_span(ints)) in (
        (True,) if values.max() - values.min() + 1 < MIN_VALUES else (None,))
    # The numbering is pandas' first-seen codes, as long as the values are few enough.
    for offsets, data, bits, bit_offset, chunk in arrow_string_chunks(text.array._pa_array):
        firsts, out = np.zeros(MIN_VALUES, np.int64), np.zeros(len(chunk), np.int64)
        count = number_strings(offsets, data, bits, bit_offset, firsts, out)
        codes, uniques = pd.factorize(pd.Series(chunk.to_pylist(), dtype=object))
        if len(uniques) > MIN_VALUES:
            assert count == -1
        else:
            assert count == len(uniques)
            assert out.tolist() == codes.tolist()
            assert [chunk[int(i)].as_py() for i in firsts[:count]] == list(uniques)
    # The nominal encoding numbers the text the same way (codes across chunks included).
    codes, categories = factorize(text)
    expected, expected_categories = factorize(pd.Series(text.tolist(), dtype=object))
    assert (codes.tolist(), categories) == (expected.tolist(), expected_categories)
    # Both rules, fast and exact, on a table holding these columns.
    key = rng.integers(0, n // 3, n)
    df = pd.DataFrame({"age": (key * 7919) % 70, "zip": key % 30, "text": text,
                       "ints": ints, "key": key * 1000})
    as_is = ["text", "ints", "key"]
    found, keys = release_guard(df, as_is, ["age", "zip"], (),
                                [df["age"].to_numpy(), df["zip"].to_numpy()])
    assert [f.column for f in found] == [f.column for f in identifying_columns(df, as_is)]
    rest = [c for c in candidates(df.dtypes, as_is) if c not in {f.column for f in found}]
    assert keys == person_key_columns(df, rest, ["age", "zip"])
