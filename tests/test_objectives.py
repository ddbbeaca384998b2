"""The cut objectives ("balanced", "dm", "ncp"): each keeps the engine's guarantees."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_local_properties import JOB_TREE, tables

import dmondrian
from dmondrian.cli import main
from dmondrian.errors import ParameterError
from dmondrian.metrics import discernibility, ncp
from dmondrian.synthetic import make_census

OBJECTIVES = ["dm", "ncp"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from(["balanced", *OBJECTIVES]), st.sampled_from([None, 2]),
       st.sampled_from(["none", "local"]))
def test_every_objective_keeps_the_invariants(case, objective, l_div, refine):
    """Each objective, refined by moves and swaps (refine="local") or not."""
    df, qis, k, mode = case
    hierarchies = {"h": JOB_TREE} if "h" in qis else None
    options = dict(mode=mode, objective=objective, hierarchies=hierarchies, class_column="cls",
                   refine=refine)
    if l_div is not None and len(df) < l_div:
        l_div = None  # a table of one row cannot be 2-diverse
    if l_div is not None:
        df = df.assign(s=np.arange(len(df)) % 3)
        options.update(sensitive="s", l=l_div)
    out = dmondrian.anonymize(df, qis, k, **options)
    assert_valid_release(df, out, qis, k, hierarchies=hierarchies, class_column="cls")
    if l_div is not None:
        assert out.groupby("cls")["s"].nunique().min() >= l_div
    again = dmondrian.anonymize(df, qis, k, **options)
    pd.testing.assert_frame_equal(out, again)  # deterministic


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 400), st.integers(1, 30), st.sampled_from(["i", "j"]))
def test_dm_relaxed_packs_every_class_to_k_rows_but_one(n, k, column):
    # Distinct values (or codes, for a nominal QI): relaxed cuts at a multiple
    # of k leave the remainder n mod k to one class.
    k = min(k, n)
    codes = np.random.default_rng(n).permutation(n)
    df = pd.DataFrame({"i": codes, "j": [f"c{c}" for c in codes]})
    out = dmondrian.anonymize(df, [column], k, mode="relaxed", objective="dm",
                              class_column="cls")
    sizes = sorted(out.groupby("cls").size())
    m = n // k
    assert sizes == [k] * (m - 1) + [k + n % k]


def test_each_objective_lowers_its_metric_on_a_census_table():
    df = make_census(20_000, seed=3)
    qis = ["age", "zip", "sex", "education", "occupation"]
    out = {o: dmondrian.anonymize(df, qis, 10, mode="relaxed", objective=o, class_column="cls",
                                  identifiers=["person_id"])
           for o in ("balanced", "dm", "ncp")}
    dm = {o: discernibility(r, qis, class_column="cls") for o, r in out.items()}
    gcp = {o: ncp(r, qis, df).overall for o, r in out.items()}
    assert dm["dm"] < dm["balanced"]
    assert dm["dm"] <= 1.05 * len(df) * 10
    assert gcp["ncp"] < gcp["balanced"]


def test_an_unknown_objective_is_refused_by_name():
    df = pd.DataFrame({"a": range(10)})
    with pytest.raises(ParameterError, match="objective"):
        dmondrian.anonymize(df, ["a"], 2, objective="best")
    with pytest.raises(ParameterError, match="objective"):
        dmondrian.MondrianAnonymizer(k=2, objective="best").fit(df)


def test_the_estimator_and_the_command_line_take_the_objective(tmp_path):
    df = pd.DataFrame({"age": np.arange(40) % 17, "zip": np.arange(40) * 7 % 23})
    est = dmondrian.MondrianAnonymizer(k=4, quasi_id=["age", "zip"], objective="dm",
                                       class_column="cls")
    expected = dmondrian.anonymize(df, ["age", "zip"], 4, objective="dm", class_column="cls")
    pd.testing.assert_frame_equal(est.fit_transform(df), expected)
    df.to_csv(tmp_path / "in.csv", index=False)
    assert main(["anonymize", str(tmp_path / "in.csv"), str(tmp_path / "out.csv"), "--k", "4",
                 "--qi", "age,zip", "--objective", "dm"]) == 0
    out = pd.read_csv(tmp_path / "out.csv")
    # The same release, its rows shuffled in the file (dmondrian.release.row_order).
    assert sorted(out["age"].astype(str)) == sorted(expected["age"].astype(str))


def test_the_dask_top_phase_plans_with_the_objective(shared_thread_cluster):
    import dask.dataframe as dd
    from distributed import Client

    df = make_census(12_000, seed=4)
    ddf = dd.from_pandas(df, npartitions=3)
    qis = ["age", "zip", "sex", "education", "occupation"]
    with Client(shared_thread_cluster) as client:
        for mode, objective in (("strict", "dm"), ("relaxed", "dm"), ("strict", "ncp")):
            local = dmondrian.anonymize(df, qis, 10, mode=mode, objective=objective,
                                        class_column="cls", identifiers=["person_id"])
            # Small leaves: the top phase makes several levels of cuts itself.
            dist = dmondrian.anonymize(ddf, qis, 10, mode=mode, objective=objective,
                                       class_column="cls", leaf_rows=1500, client=client,
                                       identifiers=["person_id"]).compute().loc[df.index]
            assert dist.groupby("cls").size().min() >= 10
            for measure in (lambda r: discernibility(r, qis, class_column="cls"),
                            lambda r: ncp(r, qis, df).overall):
                assert abs(measure(dist) / measure(local) - 1) <= 0.02, (mode, objective)
