"""Plans fitted on a dask DataFrame with entity=, l and t: the plans fitted in memory.

On the session's shared two-process cluster (tests/conftest.py).
"""

from __future__ import annotations

import json

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmondrian.errors import (
    InfeasibleError,
    InvalidValueError,
    MissingColumnError,
    ParameterError,
)
from dmondrian.plans import fit_plan, load_plan, save_plan
from dmondrian.synthetic_events import make_events

EVENT_QIS = ["age", "region", "device"]
TEXT = {"event_type": object}  # Dask reads text as its own string dtype


def _same_tree(a, b) -> bool:
    return all(np.array_equal(getattr(a.tree, n), getattr(b.tree, n))
               for n in ("parent", "count", "lo", "hi", "missing", "present")) and all(
        np.array_equal(a.tree.codes[j][0], b.tree.codes[j][0]) for j in a.tree.codes) and (
        a.tree.codes.keys() == b.tree.codes.keys())


def _people(out, qis, users) -> pd.Series:
    """Distinct users of every published class (its QI labels), by a plain group-by."""
    labels = out[qis].astype(str).assign(_u=np.asarray(users))
    return labels.groupby(qis, observed=True)["_u"].nunique()


@pytest.fixture(scope="module")
def events():
    # About 10,000 events of 1,500 people, each person's rows spread over partitions.
    return make_events(1_500, seed=31).sample(frac=1.0, random_state=3).reset_index(drop=True)


@pytest.fixture(scope="module")
def day():
    return make_events(700, seed=32, start_user=1_000)


@pytest.mark.parametrize("batch_rows", [None, 2_500])
def test_entity_plan_fitted_on_dask_is_the_local_plan(process_client, events, day, tmp_path,
                                                      batch_rows):
    # Leaves of 2,000 rows: the Dask engine cuts the top (undoing cuts short of
    # people), the local engine each leaf, counting people.
    on_dask = fit_plan(dd.from_pandas(events, npartitions=4), EVENT_QIS, 6, entity="user_id",
                       batch_rows=batch_rows, leaf_rows=2_000)
    local = fit_plan(events, EVENT_QIS, 6, entity="user_id", batch_rows=batch_rows)
    assert (on_dask.fit_k, on_dask.trim, on_dask.n_fit) == (local.fit_k, local.trim,
                                                            len(events))
    assert on_dask.n_leaves > 1 and _same_tree(on_dask, local)
    assert on_dask.options == local.options and on_dask.options["entity"] == "user_id"
    released = on_dask.transform(day)
    assert "user_id" not in released.columns
    assert _people(released, EVENT_QIS, day["user_id"]).min() >= 6
    pd.testing.assert_frame_equal(released, local.transform(day))
    pd.testing.assert_frame_equal(
        on_dask.transform(dd.from_pandas(day, npartitions=3)).compute().astype(TEXT),
        released.astype(TEXT))
    # The plan file keeps the entity: read back, it releases the day alike.
    path = tmp_path / "plan.json"
    save_plan(on_dask, path)
    assert json.loads(path.read_text())["options"]["entity"] == "user_id"
    pd.testing.assert_frame_equal(load_plan(path).transform(day), released)


@pytest.mark.parametrize("options", [
    {"sensitive": "event_type", "l": 2},
    {"sensitive": "event_type", "t": 0.3},
    {"entity": "user_id", "sensitive": "event_type", "l": 2, "l_kind": "entropy"},
    {"entity": "user_id", "sensitive": "event_type", "t": 0.3, "batch_rows": 4_000},
])
def test_l_and_t_plans_fitted_on_dask_are_the_local_plans(process_client, events, day, tmp_path,
                                                          options):
    if "entity" not in options:  # rows, not people: no person key in the table
        events, day = events.drop(columns="user_id"), day.drop(columns="user_id")
    on_dask = fit_plan(dd.from_pandas(events, npartitions=4), EVENT_QIS, 6, leaf_rows=2_000,
                       **options)
    local = fit_plan(events, EVENT_QIS, 6, **options)
    assert on_dask.n_leaves > 1 and _same_tree(on_dask, local)
    assert on_dask.options == local.options
    # t's distribution: the fitted rows' values, or with an entity their (entity, value) pairs.
    assert list(on_dask.sensitive.values) == list(local.sensitive.values)
    np.testing.assert_array_equal(on_dask.sensitive.counts, local.sensitive.counts)
    assert repr(on_dask.constraints) == repr(local.constraints)
    released = on_dask.transform(day)
    pd.testing.assert_frame_equal(released, local.transform(day))
    save_plan(on_dask, tmp_path / "plan.json")
    pd.testing.assert_frame_equal(load_plan(tmp_path / "plan.json").transform(day), released)
    if options.get("l") and "entity" not in options:
        # Distinct l: every class holds 2 event types.
        held = released.groupby(EVENT_QIS, observed=True)["event_type"].nunique()
        assert held.min() >= 2


@st.composite
def _event_days(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def events(n_users):
        rows = rng.integers(1, draw(st.sampled_from([3, 12])), n_users)
        user = np.repeat(rng.permutation(n_users) * 7 + 3, rows)
        n = len(user)
        return pd.DataFrame({"user": user.astype(str),
                             "age": np.repeat(rng.integers(18, 80, n_users), rows),
                             "dev": rng.integers(0, draw(st.sampled_from([2, 6, 40])), n),
                             "s": rng.integers(0, 3, n)}).sample(frac=1.0, random_state=1)

    k = draw(st.integers(2, 6))
    fit, new = events(draw(st.integers(30, 150))), events(draw(st.integers(k, 80)))
    return (fit.reset_index(drop=True), new.reset_index(drop=True), k, draw(st.integers(1, 4)),
            draw(st.sampled_from([None, 100, 1_000])), draw(st.sampled_from([60, 10_000])),
            draw(st.booleans()))


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_event_days())
def test_every_class_of_a_new_day_holds_k_people(process_client, case):
    fit, new, k, parts, batch_rows, leaf_rows, diverse = case
    options = {"sensitive": "s", "l": 2} if diverse else {}
    plan = fit_plan(dd.from_pandas(fit, npartitions=parts), ["age", "dev"], k, entity="user",
                    batch_rows=batch_rows, leaf_rows=leaf_rows, **options)
    try:
        out = plan.transform(new)
    except InfeasibleError:
        # Only a day that cannot be one class: too few people, or of values.
        assert new["user"].nunique() < k or (diverse and new["s"].nunique() < 2)
        return
    assert "user" not in out.columns
    assert _people(out, ["age", "dev"], new["user"]).min() >= k
    if diverse:
        assert out.groupby(["age", "dev"], observed=True)["s"].nunique().min() >= 2


def test_dask_fit_refusals_name_the_problem(process_client, events):
    ddf = dd.from_pandas(events, npartitions=2)
    with pytest.raises(ParameterError, match="strictly"):
        fit_plan(ddf, EVENT_QIS, 6, entity="user_id", mode="relaxed")
    with pytest.raises(ParameterError, match="suppression"):
        fit_plan(ddf, EVENT_QIS, 6, entity="user_id", suppression=0.01)
    with pytest.raises(InfeasibleError, match="k=2000"):
        fit_plan(ddf, EVENT_QIS, 2_000, entity="user_id", leaf_rows=2_000)
    holes = events.assign(user_id=events["user_id"].astype("float64"))
    holes.loc[5, "user_id"] = np.nan
    with pytest.raises(InvalidValueError, match="user_id"):
        fit_plan(dd.from_pandas(holes, npartitions=2), EVENT_QIS, 6, entity="user_id")


def test_cli_fits_an_entity_plan_on_dask(tmp_path, process_client, events, day):
    from dmondrian.cli import main

    src, day_path = tmp_path / "events.parquet", tmp_path / "day.csv"
    dd.from_pandas(events, npartitions=3).to_parquet(src)
    day.to_csv(day_path, index=False)
    plan = tmp_path / "plan.json"
    assert main(["anonymize", str(src), str(tmp_path / "out.parquet"), "--k", "6",
                 "--qi", ",".join(EVENT_QIS), "--entity", "user_id", "--save-plan", str(plan),
                 "--batch-rows", "2500", "--distributed", "--leaf-rows", "2000",
                 "--scheduler", process_client.scheduler.address, "--no-progress"]) == 0
    fitted = load_plan(plan)
    assert fitted.options["entity"] == "user_id"
    assert _same_tree(fitted, fit_plan(events, EVENT_QIS, 6, entity="user_id",
                                       batch_rows=2_500))
    # The fitted table's own release through the plan, and a day's through its file.
    assert "user_id" not in pd.read_parquet(tmp_path / "out.parquet").columns
    assert main(["anonymize", str(day_path), str(tmp_path / "day_out.csv"), "--plan", str(plan),
                 "--local", "--no-progress"]) == 0
    out = pd.read_csv(tmp_path / "day_out.csv")
    assert "user_id" not in out.columns and len(out) == len(day)
    manifest = json.loads((tmp_path / "day_out.csv.manifest.json").read_text())
    assert manifest["achieved"]["k_entities"] == {"at_least": 6}


def test_estimator_fits_an_entity_plan_on_dask(process_client, events, day, tmp_path):
    from dmondrian import MondrianAnonymizer

    est = MondrianAnonymizer(k=6, quasi_id=EVENT_QIS, entity="user_id", batch_rows=2_500,
                             sensitive="event_type", l=2)
    est.fit(dd.from_pandas(events, npartitions=3))
    assert est.plan_ is not None and est.plan_.options["entity"] == "user_id"
    assert _same_tree(est.plan_, fit_plan(events, EVENT_QIS, 6, entity="user_id",
                                          batch_rows=2_500, sensitive="event_type", l=2))
    out = est.transform(day)
    assert _people(out, EVENT_QIS, day["user_id"]).min() >= 6
    est.save_plan(tmp_path / "plan.json")
    pd.testing.assert_frame_equal(load_plan(tmp_path / "plan.json").transform(day), out)
    # Relaxed cuts are still fitted in memory only: the estimator keeps no plan.
    relaxed = MondrianAnonymizer(k=6, quasi_id=EVENT_QIS, entity="user_id", mode="relaxed")
    assert relaxed.fit(dd.from_pandas(events, npartitions=3)).plan_ is None


@pytest.mark.parametrize("options", [
    {"batch_rows": 2_500},
    {"entity": "user_id", "sensitive": "event_type", "l": 2, "batch_rows": 2_500},
])
def test_a_dask_fit_reads_only_the_columns_it_needs(process_client, events, options):
    # A wide table (60 columns besides the events') whose reader fails on any
    # column but the QIs, the entity and the sensitive one: a fit needs no other.
    rng = np.random.default_rng(5)
    wide = events.assign(**{f"extra{i}": rng.integers(0, 1_000, len(events))
                            for i in range(60)})
    if "entity" not in options:
        wide = wide.drop(columns="user_id")
    needed = {*EVENT_QIS, options.get("entity"), options.get("sensitive")}

    def read(i, columns=None):
        """Partition ``i`` of ``wide``, its columns as dask projects them."""
        columns = list(wide.columns) if columns is None else list(columns)
        unneeded = sorted(set(columns) - needed)
        if unneeded:
            raise RuntimeError(f"the fit read {len(unneeded)} unneeded columns: "
                               f"{unneeded[:3]}")
        return wide[columns].iloc[i::4]

    ddf = dd.from_map(read, range(4), meta=wide.iloc[:0], enforce_metadata=False)
    plan = fit_plan(ddf, EVENT_QIS, 6, leaf_rows=2_000, **options)
    narrow = wide[[c for c in wide.columns if c in needed]]
    local = fit_plan(narrow.iloc[np.argsort(np.arange(len(wide)) % 4, kind="stable")],
                     EVENT_QIS, 6, **options)
    assert plan.n_leaves > 1 and _same_tree(plan, local)


def test_a_bad_option_is_refused_before_the_rows_are_counted(process_client, events):
    # batch_rows first counts the rows: the options are checked before that pass, as the
    # passes after it check them, so no table is read for a fit that cannot run.
    def read(i):
        raise RuntimeError("the fit read the table")

    ddf = dd.from_map(read, range(2), meta=events.iloc[:0], enforce_metadata=False)
    with pytest.raises(MissingColumnError, match="salary"):
        fit_plan(ddf, [*EVENT_QIS, "salary"], 6, batch_rows=2_500)
    with pytest.raises(ParameterError, match="l_kind"):
        fit_plan(ddf, EVENT_QIS, 6, batch_rows=2_500, sensitive="event_type", l=2,
                 l_kind="most")
