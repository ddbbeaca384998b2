"""The Adult loader: literature setup, raw mode, folder resolution, verified download."""

from __future__ import annotations

import csv
import hashlib

import pandas as pd
import pytest

from dmondrian import datasets
from dmondrian.datasets import (
    ADULT_COLUMNS,
    ADULT_ENV_VAR,
    ADULT_NUMERIC,
    ADULT_QUASI_IDENTIFIERS,
    ADULT_SENSITIVE,
    adult_cache_dir,
    load_adult,
    load_adult_hierarchies,
)
from dmondrian.errors import DatasetError, DMondrianError

# Distinct values per categorical column once '?' rows are dropped, as the
# data set's README documents them.
DOCUMENTED_CARDINALITY = {
    "workclass": 7,
    "education": 16,
    "marital-status": 7,
    "occupation": 14,
    "relationship": 6,
    "race": 5,
    "sex": 2,
    "native-country": 41,
}

FAKE_ROWS = (
    "30, Private, 1000, Bachelors, 13, Never-married, Sales, Own-child, White, Male, 0, 0, 40, "
    "United-States, <=50K\n"
    "41, ?, 2000, HS-grad, 9, Divorced, ?, Unmarried, Black, Female, 0, 0, 20, Canada, >50K\n"
)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """An empty user cache under tmp_path, and no $DMONDRIAN_ADULT_DIR."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(ADULT_ENV_VAR, raising=False)
    return tmp_path / "cache" / "dmondrian" / "adult"


def _mirror(tmp_path, files: dict[str, bytes]):
    """A local folder standing in for the UCI server; returns its file:// URL."""
    server = tmp_path / "server"
    server.mkdir()
    for name, content in files.items():
        (server / name).write_bytes(content)
    return server.as_uri() + "/"


def _checksums(files: dict[str, bytes]) -> dict:
    return {
        name: {"md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in files.items()
    }


# -- the literature setup ------------------------------------------------------


def test_literature_setup(adult):
    assert len(adult) == 30_162
    assert list(adult.columns) == ADULT_COLUMNS
    assert adult.index.equals(pd.RangeIndex(30_162))
    assert not adult.isna().any().any()
    assert len(ADULT_QUASI_IDENTIFIERS) == 8
    assert set(ADULT_QUASI_IDENTIFIERS) <= set(adult.columns)
    assert ADULT_SENSITIVE not in ADULT_QUASI_IDENTIFIERS
    for column in ADULT_COLUMNS:
        if column in ADULT_NUMERIC:
            assert adult[column].dtype == "int64", column
        else:
            assert pd.api.types.is_string_dtype(adult[column]), column
            assert all(isinstance(v, str) for v in adult[column].unique()), column
            assert (adult[column] == adult[column].str.strip()).all(), column
    assert set(adult[ADULT_SENSITIVE]) == {"<=50K", ">50K"}
    cardinality = {c: adult[c].nunique() for c in DOCUMENTED_CARDINALITY}
    assert cardinality == DOCUMENTED_CARDINALITY
    assert adult["age"].between(17, 90).all()
    assert adult["education-num"].between(1, 16).all()


def test_raw_keeps_every_record_with_missing_values(adult_dir, adult):
    raw = load_adult(adult_dir, raw=True, download=False)
    assert len(raw) == 32_561
    # Count the '?' fields independently of pandas.
    expected = dict.fromkeys(ADULT_COLUMNS, 0)
    with open(adult_dir / "adult.data", newline="") as fh:
        for record in csv.reader(fh, skipinitialspace=True):
            if not record:  # the file ends with a blank line
                continue
            for column, value in zip(ADULT_COLUMNS, record, strict=True):
                expected[column] += value.strip() == "?"
    assert raw.isna().sum().to_dict() == expected
    assert sum(expected.values()) > 0
    assert raw.isna().any(axis=1).sum() == 32_561 - 30_162
    # The literature table is exactly the raw one without its incomplete rows.
    pd.testing.assert_frame_equal(raw.dropna().reset_index(drop=True), adult)
    for column in ADULT_NUMERIC:
        assert raw[column].dtype == "int64"


def test_environment_variable_and_explicit_path(adult_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(ADULT_ENV_VAR, str(adult_dir))
    assert datasets.adult_dir() == adult_dir
    assert len(load_adult(download=False)) == 30_162
    # An explicit path wins over the environment.
    (tmp_path / "adult.data").write_text(FAKE_ROWS)
    assert len(load_adult(tmp_path, raw=True)) == 2


# -- folder resolution and errors ------------------------------------------------


def test_cache_dir_honours_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert adult_cache_dir() == tmp_path / "dmondrian" / "adult"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert adult_cache_dir() == tmp_path / "home" / ".cache" / "dmondrian" / "adult"


def test_missing_folder_or_file_is_a_typed_error(tmp_path, isolated_cache):
    with pytest.raises(DatasetError, match="does not exist") as info:
        datasets.adult_dir(tmp_path / "nowhere")
    assert isinstance(info.value, DMondrianError)
    assert info.value.path == str(tmp_path / "nowhere")
    with pytest.raises(DatasetError, match="holds no adult.data"):
        load_adult(tmp_path)
    with pytest.raises(DatasetError, match="download=False"):
        load_adult(download=False)
    assert not isolated_cache.exists()


def test_environment_folder_missing_is_a_typed_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ADULT_ENV_VAR, str(tmp_path / "gone"))
    with pytest.raises(DatasetError, match=ADULT_ENV_VAR):
        load_adult()


def test_malformed_file_is_a_typed_error(tmp_path):
    (tmp_path / "adult.data").write_text("not, an, adult, record\n")
    with pytest.raises(DatasetError, match="not in the Adult format"):
        load_adult(tmp_path)
    (tmp_path / "adult.data").write_text(FAKE_ROWS.replace("30,", "thirty,"))
    with pytest.raises(DatasetError, match="not in the Adult format"):
        load_adult(tmp_path)


def test_only_question_mark_is_missing(tmp_path):
    (tmp_path / "adult.data").write_text(FAKE_ROWS.replace("Canada", "NA"))
    raw = load_adult(tmp_path, raw=True)
    assert raw.loc[1, "native-country"] == "NA"
    assert pd.isna(raw.loc[1, "workclass"])
    assert raw.isna().sum().sum() == 2


# -- download ------------------------------------------------------------------


def test_download_into_cache_once(tmp_path, isolated_cache, monkeypatch):
    files = {"adult.data": FAKE_ROWS.encode(), "adult.names": b"description\n"}
    monkeypatch.setattr(datasets, "_CHECKSUMS", _checksums(files))
    url = _mirror(tmp_path, files)
    folder = datasets.adult_dir(url=url)
    assert folder == isolated_cache
    for name, content in files.items():
        assert (folder / name).read_bytes() == content
    assert sorted(p.name for p in folder.iterdir()) == ["adult.data", "adult.names"]
    # Once cached, the server is no longer needed.
    for p in (tmp_path / "server").iterdir():
        p.unlink()
    assert len(load_adult(url=url, raw=True)) == 2
    assert len(load_adult(download=False)) == 1


def test_download_of_the_real_files(adult_dir, tmp_path, isolated_cache):
    # The real checksums, served from a local mirror of the UCI folder.
    df = load_adult(url=adult_dir.as_uri())
    assert len(df) == 30_162
    data = (isolated_cache / "adult.data").read_bytes()
    assert hashlib.md5(data).hexdigest() == "5d7c39d7b8804f071cdd1f2a7c460872"


def test_checksum_mismatch_leaves_nothing(tmp_path, isolated_cache):
    url = _mirror(tmp_path, {"adult.data": FAKE_ROWS.encode(), "adult.names": b"x"})
    with pytest.raises(DatasetError, match="checksum") as info:
        load_adult(url=url)
    assert info.value.path.endswith("adult.data")
    assert isolated_cache.is_dir()
    assert list(isolated_cache.iterdir()) == []


def test_unreachable_server_leaves_nothing(tmp_path, isolated_cache):
    url = (tmp_path / "no-server").as_uri()
    with pytest.raises(DatasetError, match="cannot download"):
        datasets.adult_dir(url=url)
    assert list(isolated_cache.iterdir()) == []
    with pytest.raises(DatasetError, match="cannot download"):
        datasets.adult_dir(url="no-scheme-at-all")


def test_partial_download_is_removed(tmp_path, isolated_cache, monkeypatch):
    files = {"adult.data": FAKE_ROWS.encode(), "adult.names": b"description\n"}
    monkeypatch.setattr(datasets, "_CHECKSUMS", _checksums(files))

    class Broken:
        def __init__(self):
            self.calls = 0

        def read(self, size):
            self.calls += 1
            if self.calls > 1:
                raise ConnectionResetError("connection reset mid-transfer")
            return b"30, Private"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(datasets.urllib.request, "urlopen", lambda url, timeout: Broken())
    with pytest.raises(DatasetError, match="connection reset"):
        datasets.adult_dir(url="https://example.invalid/adult/")
    assert list(isolated_cache.iterdir()) == []


# -- hierarchies -----------------------------------------------------------------


def test_hierarchies_cover_every_value(adult_dir, adult):
    hierarchies = load_adult_hierarchies(adult_dir)
    assert set(hierarchies) == {
        "workclass",
        "marital-status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native-country",
    }
    assert set(hierarchies) <= set(ADULT_COLUMNS)
    uncovered = {
        column: sorted(set(adult[column]) - set(h.leaves)) for column, h in hierarchies.items()
    }
    assert uncovered == dict.fromkeys(hierarchies, []), f"values without a leaf: {uncovered}"
    for column, h in hierarchies.items():
        assert h.name == column
        assert len(h.leaf_codes(adult[column].unique())) == adult[column].nunique()
    # Grouping levels the files define, checked on two columns.
    assert hierarchies["workclass"].lca(["Federal-gov", "State-gov"]) == "gov"
    assert hierarchies["marital-status"].lca(["Divorced", "Separated"]) == "leave"


def test_hierarchy_files_map_to_columns(tmp_path, monkeypatch):
    monkeypatch.delenv(ADULT_ENV_VAR, raising=False)
    with pytest.raises(DatasetError, match="not part of the UCI download"):
        load_adult_hierarchies(tmp_path)
    hdir = tmp_path / "hierarchies"
    hdir.mkdir()
    (hdir / "adult_native_country.txt").write_text("Canada;*\nCuba;*\n")
    (hdir / "adult_sex.txt").write_text("Female;*\nMale;*\n")
    found = load_adult_hierarchies(tmp_path)
    assert list(found) == ["sex", "native-country"]
    (hdir / "adult_shoe_size.txt").write_text("42;*\n")
    with pytest.raises(DatasetError, match="shoe-size"):
        load_adult_hierarchies(tmp_path)
