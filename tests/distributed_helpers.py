"""Shared helpers of the distributed-engine tests: test tables and an independent NCP."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                 "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                 "hours-per-week", "native-country", "income"]
ADULT_QIS = ["age", "workclass", "education-num", "marital-status", "occupation", "race", "sex",
             "native-country"]
CENSUS_QIS = ["age", "zip", "birth_date", "sex", "education"]
#: Each worker process's memory limit on the session's shared cluster (conftest).
SHARED_WORKER_MEMORY = 2 * 2**30
_EDUCATION = ["none", "primary", "secondary", "bachelor", "master", "doctorate"]


def make_census(n: int, seed: int = 0) -> pd.DataFrame:
    """A census-like table; dmondrian.synthetic's when it is there, else a local one."""
    try:
        from dmondrian.synthetic import make_census as synthetic_census
    except ImportError:
        pass
    else:
        return synthetic_census(n, seed)
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(42, 15, n), 17, 95).astype(np.int64)
    birth = pd.Timestamp("2024-01-01") - pd.to_timedelta(age * 365 + rng.integers(0, 365, n),
                                                         unit="D")
    return pd.DataFrame({
        "person_id": np.arange(n, dtype=np.int64),
        "age": age,
        "zip": rng.choice(np.arange(10000, 10400), n, p=_zipf(400, rng)),
        "birth_date": birth.to_numpy().astype("datetime64[ns]"),
        "sex": rng.choice(["F", "M"], n),
        "education": pd.Categorical(rng.choice(_EDUCATION, n, p=[.05, .2, .4, .2, .1, .05]),
                                    categories=_EDUCATION, ordered=True),
        "occupation": rng.choice(["clerk", "driver", "nurse", "engineer", "teacher"], n),
        "income": np.round(rng.lognormal(10, 0.6, n), 2),
        "diagnosis": rng.choice(["flu", "asthma", "diabetes", "none"], n),
    })


def _zipf(m, rng):
    p = 1.0 / np.arange(1, m + 1) ** 0.8
    return rng.permutation(p / p.sum())


def mixed_table(n: int, seed: int = 0) -> pd.DataFrame:
    """Every QI kind, with missing values, for equivalence tests."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n).astype("float64")
    age[rng.random(n) < 0.03] = np.nan
    when = pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D")
    job = rng.choice(["Private", "Federal-gov", "Local-gov", "Self-emp"], n).astype(object)
    job[rng.random(n) < 0.02] = None
    return pd.DataFrame({
        "age": age,
        "zip": rng.integers(1000, 1060, n),
        "income": rng.normal(0, 3, n).round(3),
        "when": when,
        "grade": pd.Categorical(rng.choice(list("ABCDE"), n), categories=list("ABCDE"),
                                ordered=True),
        "color": rng.choice(["red", "green", "blue", "cyan", "black"], n),
        "job": job,
        "payload": np.arange(n),
    })


#: Columns of the test tables that single out rows: mixed_table's payload and the
#: census's person_id (row ids), Adult's fnlwgt (a weight, about one per row).
ROW_IDS = ("payload", "person_id", "fnlwgt")


def row_ids(df) -> list:
    """The :data:`ROW_IDS` ``df`` (pandas or dask) has: the tests release them as is,
    to check that every row arrives untouched and in place, so they allow them
    (``allow_unique``); dmondrian refuses a column singling out rows otherwise."""
    return [c for c in ROW_IDS if c in df.columns]


JOB_HIERARCHY = {"Private": ["*"], "Federal-gov": ["gov", "*"], "Local-gov": ["gov", "*"],
                 "Self-emp": ["*"]}
MIXED_QIS = ["age", "zip", "income", "when", "grade", "color", "job"]


def load_adult():
    """The Adult training data without '?' rows, or None when it is not available."""
    where = os.environ.get("DMONDRIAN_ADULT_DIR")
    if not where or not (Path(where) / "adult.data").exists():
        return None
    df = pd.read_csv(Path(where) / "adult.data", header=None, names=ADULT_COLUMNS,
                     skipinitialspace=True)
    df = df[~(df == "?").any(axis=1)].reset_index(drop=True)
    for c in df.columns:
        if df[c].dtype != np.int64:
            df[c] = df[c].astype(object)
    return df


def average_ncp(original: pd.DataFrame, class_of_row, qis) -> float:
    """Mean over rows and QIs of the class's normalized span, from original values.

    Ordered QIs (numbers, datetimes, ordered categoricals): class range over the
    global range. Nominal QIs: (distinct values in the class - 1) over (global
    distinct - 1). Computed from the original rows only, never from labels.
    """
    classes = pd.Series(np.asarray(class_of_row), index=original.index)
    total = np.zeros(len(original))
    for q in qis:
        s = original[q]
        if isinstance(s.dtype, pd.CategoricalDtype) and s.dtype.ordered:
            v = pd.Series(s.cat.codes.astype(float).replace(-1, np.nan), index=s.index)
        elif pd.api.types.is_datetime64_any_dtype(s.dtype):
            v = pd.Series(s.astype("int64").astype(float), index=s.index)
        elif pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
            v = s.astype(float)
        else:
            distinct = s.astype(str).groupby(classes).transform("nunique")
            glob = s.astype(str).nunique()
            total += ((distinct - 1) / max(glob - 1, 1)).to_numpy()
            continue
        g = v.groupby(classes)
        span = (g.transform("max") - g.transform("min")).fillna(0).to_numpy()
        rng = v.max() - v.min()
        total += span / rng if rng > 0 else 0.0
    return float(total.mean() / len(qis))
