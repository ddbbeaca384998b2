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


# -- the index is the caller's: shuffled splits, folds, filtered frames -----------------------

from sklearn.model_selection import (  # noqa: E402
    GridSearchCV,
    KFold,
    cross_val_score,
    train_test_split,
)


def _big(n=3000, seed=1):
    # Over dmondrian.release.identifiers.MIN_ROWS rows: an index unique per row would be judged.
    return _table(n, seed)


def _pipe(**options):
    return Pipeline([("anon", MondrianAnonymizer(k=10, quasi_id=["age", "hours"],
                                                 generalization="midpoint", **options)),
                     ("model", LogisticRegression(max_iter=500))])


def test_a_pipeline_fits_on_a_shuffled_split():
    df = _big()
    X, y = df[["age", "hours"]], df["label"]
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    assert not Xtr.index.is_monotonic_increasing  # a shuffled, unique index
    pipe = _pipe().fit(Xtr, ytr)
    assert pipe.score(Xte, yte) > 0.7
    released = pipe.named_steps["anon"].transform(Xtr)
    assert released.index.equals(Xtr.index)  # aligned with ytr
    assert released.groupby(["age", "hours"]).size().min() >= 10


def test_cross_validation_and_grid_search_on_shuffled_folds():
    df = _big()
    X, y = df[["age", "hours"]], df["label"]
    scores = cross_val_score(_pipe(), X, y, cv=KFold(5, shuffle=True, random_state=0))
    assert len(scores) == 5 and scores.min() > 0.7
    grid = GridSearchCV(_pipe().set_output(transform="pandas"), {"anon__k": [5, 20]},
                        cv=KFold(3, shuffle=True, random_state=1)).fit(X, y)
    assert grid.best_params_["anon__k"] in (5, 20) and grid.best_score_ > 0.7


@pytest.mark.parametrize("frame", ["shuffled", "filtered"])
def test_set_output_pandas_on_shuffled_and_filtered_frames(frame):
    df = _big()
    X = (df.sample(frac=1.0, random_state=2) if frame == "shuffled"
         else df[df["age"] > 30])[["age", "hours"]]
    est = MondrianAnonymizer(k=10, quasi_id=["age", "hours"], class_column="cls")
    assert est.set_output(transform="pandas") is est
    out = est.fit_transform(X)
    assert isinstance(out, pd.DataFrame) and out.index.equals(X.index)
    assert list(out.columns) == list(est.get_feature_names_out())
    assert out.groupby("cls").size().min() >= 10
    assert clone(est)._sklearn_output_config == {"transform": "pandas"}
    pd.testing.assert_frame_equal(est.set_output(transform="default").transform(X), out)
    assert est.set_output(transform=None).transform(X).equals(out)
    with pytest.raises(errors.ParameterError, match="transform"):
        est.set_output(transform="numpy")


def test_set_output_in_a_column_transformer_and_the_global_config():
    df = _big()
    X = df.sample(frac=1.0, random_state=3)
    anonymize = MondrianAnonymizer(k=10, quasi_id=["age", "hours"], generalization="midpoint")
    ct = ColumnTransformer([("anon", anonymize, ["age", "hours"]),
                            ("keep", "passthrough", ["label"])],
                           verbose_feature_names_out=False).set_output(transform="pandas")
    out = ct.fit_transform(X)
    assert list(out.columns) == ["age", "hours", "label"] and out.index.equals(X.index)
    assert out.groupby(["age", "hours"]).size().min() >= 10
    with sklearn.config_context(transform_output="pandas"):
        plain = MondrianAnonymizer(k=10, quasi_id=["age", "hours"]).fit_transform(X)
    assert isinstance(plain, pd.DataFrame)


def test_set_output_polars_needs_polars():
    est = MondrianAnonymizer(k=10, quasi_id=["age", "hours"])
    try:
        import polars
    except ImportError:
        with pytest.raises(errors.ParameterError, match="polars"):
            est.set_output(transform="polars")
        return
    out = est.set_output(transform="polars").fit_transform(_big())
    assert isinstance(out, polars.DataFrame) and out.height == 3000
