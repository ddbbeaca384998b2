"""MondrianAnonymizer follows scikit-learn's conventions and works in a Pipeline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dmondrian import MondrianAnonymizer, errors

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402


def _table(n=400, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    hours = rng.integers(10, 60, n)
    return pd.DataFrame({"age": age, "hours": hours,
                         "label": (age + hours + rng.normal(0, 5, n) > 85).astype(int)})


def test_params_are_stored_verbatim_and_clone_works():
    est = MondrianAnonymizer(k=7, quasi_id=["age"], mode="relaxed")
    assert est.get_params()["k"] == 7 and est.get_params()["quasi_id"] == ["age"]
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    est.set_params(k=3)
    assert est.k == 3
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(colour="red")
    assert "k=3" in repr(est)


def test_validation_happens_in_fit_not_init():
    est = MondrianAnonymizer(k=0, quasi_id=["age"])  # no error yet, as scikit-learn does
    with pytest.raises(errors.ParameterError, match="k"):
        est.fit(_table())
    with pytest.raises(errors.MissingColumnError):
        MondrianAnonymizer(k=2, quasi_id=["nope"]).fit(_table())


def test_transform_before_fit():
    with pytest.raises(errors.NotFittedError):
        MondrianAnonymizer().transform(_table())


def test_quasi_id_defaults_to_every_column():
    df = _table()[["age", "hours"]]
    out = MondrianAnonymizer(k=5).fit_transform(df)
    assert out.groupby(["age", "hours"], observed=True).size().min() >= 5
    assert list(MondrianAnonymizer(k=5).fit(df).get_feature_names_out()) == ["age", "hours"]


def test_pipeline_with_midpoints_feeds_a_classifier():
    df = _table()
    anonymize = MondrianAnonymizer(k=10, quasi_id=["age", "hours"], generalization="midpoint")
    features = ColumnTransformer([("keep", "passthrough", ["age", "hours"])])
    pipe = Pipeline([("anon", anonymize), ("features", features),
                     ("model", LogisticRegression(max_iter=500))])
    pipe.fit(df, df["label"])
    released = anonymize.fit_transform(df)
    assert released.groupby(["age", "hours"]).size().min() >= 10
    assert pipe.score(df, df["label"]) > 0.7
