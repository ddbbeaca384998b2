"""MondrianAnonymizer inside a scikit-learn Pipeline: what does k-anonymity cost a classifier?

Run: python examples/pipeline.py

The numeric quasi-identifiers are anonymized with ``generalization="midpoint"``
(so they stay numbers a model can use), and a gradient-boosting classifier
(with native categorical splits) predicts income. The test rows are
anonymized too, as a model in production would only see released data. Uses
UCI Adult when it is available (``$DMONDRIAN_ADULT_DIR``), else the generated
census-like table with "income above the median" as the target.
"""

import sys

import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder

from dmondrian import MondrianAnonymizer
from dmondrian.errors import DMondrianError


def adult():
    from dmondrian.datasets import load_adult

    df = load_adult(download=False)
    y = (df["income"].astype(str).str.strip() == ">50K").astype(int)
    X = df.drop(columns=["income", "fnlwgt"])
    return "UCI Adult", X, y, ["age", "education-num"]


def census(n_rows=30_000):
    from dmondrian.synthetic import make_census

    df = make_census(n_rows, seed=0)
    y = (df["income"] > df["income"].median()).astype(int)
    X = df.drop(columns=["income", "person_id", "birth_date", "diagnosis"])
    X["education"] = X["education"].astype(str)
    return "generated census", X, y, ["age"]


try:
    name, X, y, numeric_qis = adult()
except (DMondrianError, OSError, ImportError) as exc:
    print(f"(Adult not available: {exc}; using the generated census table)")
    name, X, y, numeric_qis = census()

categorical = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
numeric = [c for c in X.columns if c not in categorical]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0,
                                                    stratify=y)
# The split keeps the table's row labels, shuffled: the release keeps them too, as the
# caller's index that aligns X with y (only a writer publishes, and writes no index).


def model(k=None):
    steps = []
    if k is not None:
        steps.append(("anonymize", MondrianAnonymizer(k=k, quasi_id=numeric_qis,
                                                      generalization="midpoint")))
    # Categorical columns become codes first (the ColumnTransformer puts them
    # first), which the gradient-boosting model splits on natively.
    steps.append(("encode", ColumnTransformer(
        [("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
          categorical)], remainder="passthrough")))
    steps.append(("classify", HistGradientBoostingClassifier(
        max_iter=100, categorical_features=list(range(len(categorical))), random_state=0)))
    return Pipeline(steps)


print(f"{name}: {len(X_train):,} training rows, {len(X_test):,} test rows; "
      f"anonymized QIs: {', '.join(numeric_qis)}")
print(f"{'release':>10} {'accuracy':>9} {'vs original':>12}")
baseline = model().fit(X_train, y_train).score(X_test, y_test)
print(f"{'original':>10} {baseline:9.4f} {'':>12}")
for k in (5, 10, 50):
    pipe = model(k).fit(X_train, y_train)
    released = pipe.named_steps["anonymize"].transform(X_train)
    assert released.groupby(numeric_qis).size().min() >= k
    accuracy = pipe.score(X_test, y_test)
    print(f"{'k=' + str(k):>10} {accuracy:9.4f} {accuracy - baseline:+12.4f}")
    assert 0.5 < accuracy <= 1.0

sys.exit(0)
