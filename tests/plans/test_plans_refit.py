"""A plan refitted on a batch (FittedPlan.refit): the rows it holds nowhere get a plan
of their own, and every guarantee still holds."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian as dm
from dmondrian.errors import InfeasibleError, ParameterError
from dmondrian.plans import fit_plan, load_plan, save_plan
from tests.checks import assert_valid_release
from tests.plans.test_plans import QIS, _table


def _drifted(n, seed, share=0.3):
    """A batch a share of whose rows hold a job and ages the fit never saw together."""
    rng = np.random.default_rng(seed)
    new = _table(n, seed)
    moved = rng.random(n) < share
    new.loc[moved, "job"] = rng.choice(["new-x", "new-y"], int(moved.sum()))
    new.loc[moved, "age"] = rng.integers(100, 120, int(moved.sum()))
    return new


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(20, 300), st.integers(1, 200), st.integers(1, 200),
       st.integers(1, 12), st.sampled_from(["strict", "relaxed"]), st.floats(0, 1))
def test_refitted_plan_keeps_k_and_labels_cover_values(seed, n_fit, n1, n2, k, mode, share):
    """Refitted on one batch, then releasing it and a later one: every class holds at least
    k rows (by its published values and by its class id), every label covers its row's value,
    the plan's own regions stay, and a batch of fewer than k rows is refused as before."""
    fit = _table(n_fit, seed)
    k = min(k, n_fit)
    plan = fit_plan(fit, QIS, k, mode=mode, batch_rows=max(n1, 1), class_column="cls")
    first, later = _drifted(n1, seed + 1, share), _drifted(n2, seed + 2, share)
    refit = plan.refit(first)
    assert refit.tree is plan.tree
    again = refit.refit(later)
    assert again.tree is plan.tree
    for p in (refit, again):
        for batch in (first, later):
            if len(batch) < k:
                with pytest.raises(InfeasibleError):
                    p.transform(batch)
                continue
            assert_valid_release(batch, p.transform(batch), QIS, k, class_column="cls")


def test_rows_held_nowhere_get_narrow_labels_that_stay():
    """New jobs at ages the fit never saw land at the root, the whole domain as label; after a
    refit they get classes of their own, and the next batch drawn alike publishes the same
    labels for them (the point of refitting: stable, and narrower). Every other row is
    published as before."""
    plan = fit_plan(_table(3000, 1), QIS, 5, batch_rows=600)
    first, second = _drifted(600, 2), _drifted(600, 3)
    refit = plan.refit(first)
    assert refit is not plan and refit.overflow is not None and plan.overflow is None
    moved = first["job"].str.startswith("new").fillna(False).to_numpy()
    before, after = plan.transform(first), refit.transform(first)
    assert before.loc[moved, "age"].nunique() == 1  # the root's label
    assert after.loc[moved, "age"].nunique() > 1
    for label in after.loc[moved, "age"].astype(str).unique():
        assert dm.kinds.labels.parse_range(label).lo >= 100
    # The rows the plan holds keep their labels (the root's class aside: it had both).
    kept = ~moved & (before["age"].astype(str) != before.loc[moved, "age"].astype(str).iloc[0])
    pd.testing.assert_frame_equal(after[kept].astype(str), before[kept].astype(str))
    # The next batch drawn alike: its moved rows publish labels the first batch published.
    nxt = refit.transform(second)
    moved2 = second["job"].str.startswith("new").fillna(False).to_numpy()
    seen = set(after.loc[moved, QIS].astype(str).agg("|".join, axis=1))
    shared = nxt.loc[moved2, QIS].astype(str).agg("|".join, axis=1).isin(seen).mean()
    assert shared > 0.5
    # Published labels stay Categoricals, as a release without an overflow has them.
    assert all(isinstance(after[q].dtype, pd.CategoricalDtype) for q in QIS)


def test_refit_without_enough_rows_held_nowhere_is_the_plan():
    plan = fit_plan(_table(2000, 4), QIS, 10, batch_rows=500)
    assert plan.refit(_table(500, 5)) is plan


def test_refit_falls_back_when_a_part_is_short_of_k():
    """Fewer than k rows held nowhere: the whole batch is released by the plan alone."""
    plan = fit_plan(_table(2000, 6), QIS, 10, batch_rows=500)
    refit = plan.refit(_drifted(500, 7))
    few = pd.concat([_table(300, 8), _drifted(30, 9, 0.2)], ignore_index=True)
    moved = few["job"].str.startswith("new").fillna(False)
    assert 0 < moved.sum() < 10
    pd.testing.assert_frame_equal(refit.transform(few), plan.transform(few))


def test_refitted_plan_file_holds_the_overflow(tmp_path):
    plan = fit_plan(_table(2000, 10), QIS, 5, batch_rows=500)
    save_plan(plan, tmp_path / "plain.json")
    assert '"overflow"' not in (tmp_path / "plain.json").read_text()
    refit = plan.refit(_drifted(500, 11))
    save_plan(refit, tmp_path / "refit.json")
    back = load_plan(tmp_path / "refit.json")
    assert back.overflow is not None
    new = _drifted(500, 12)
    pd.testing.assert_frame_equal(back.transform(new), refit.transform(new))


def test_refit_refusals():
    fit = _table(2000, 13).assign(user=lambda d: np.arange(len(d)) % 400)
    for options in ({"sensitive": "pay", "l": 2}, {"entity": "user"}):
        plan = fit_plan(fit, QIS, 5, batch_rows=500, **options)
        with pytest.raises(ParameterError, match="refit"):
            plan.refit(_drifted(500, 14).assign(user=1))
    refit = fit_plan(_table(2000, 13), QIS, 5, batch_rows=500).refit(_drifted(500, 14))
    with pytest.raises(ParameterError, match="overflow"):
        refit.transform(dd.from_pandas(_drifted(500, 15), npartitions=2))


def test_a_plan_pickled_before_refit_existed_still_releases():
    import pickle

    plan = fit_plan(_table(1000, 16), QIS, 5, batch_rows=500)
    state = plan.__getstate__()
    state.pop("overflow", None)  # as pickled by a version without it
    old = pickle.loads(pickle.dumps(plan))
    old.__dict__.clear()
    old.__dict__.update(state)
    new = _table(300, 17)
    pd.testing.assert_frame_equal(old.transform(new), plan.transform(new))
    assert old.refit(_drifted(500, 18)).overflow is not None
