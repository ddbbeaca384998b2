"""entity=: k distinct people per class on event tables (local engine, estimator)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.errors import (
    IdentifyingColumnError,
    IdentifyingColumnWarning,
    InfeasibleError,
    InvalidValueError,
    MissingColumnError,
    ParameterError,
)
from dmondrian.privacy.entities import distinct_per_class, encode_entities, pair_codes
from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events


@st.composite
def event_tables(draw, max_users=60):
    """Users with several rows each; QIs fixed per user, varying per row, or mixed."""
    n_users = draw(st.integers(1, max_users))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = rng.integers(1, draw(st.sampled_from([2, 5, 20])), n_users)
    user = np.repeat(rng.permutation(n_users) * 7 + 3, rows)
    n = len(user)
    per_user = np.repeat(rng.integers(18, 80, n_users), rows)
    per_row = rng.integers(0, draw(st.sampled_from([1, 3, 50])), n)
    mixed = np.where(rng.random(n) < 0.3, per_row, per_user % 5)
    df = pd.DataFrame({"user": user, "age": per_user, "x": per_row.astype(float),
                       "m": np.asarray(["a", "b", "c", "d"], dtype=object)[mixed % 4],
                       "s": rng.integers(0, 4, n), "pay": rng.random(n)})
    df = df.sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
    qis = draw(st.lists(st.sampled_from(["age", "x", "m"]), min_size=1, max_size=3,
                        unique=True))
    k = draw(st.integers(1, n_users))
    mode = draw(st.sampled_from(["strict", "relaxed"]))
    objective = draw(st.sampled_from(["balanced", "dm", "ncp"]))
    return df, qis, k, mode, objective


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_tables())
def test_every_class_holds_k_entities(case):
    df, qis, k, mode, objective = case
    out = dmondrian.anonymize(df, qis, k=k, entity="user", mode=mode, objective=objective,
                              class_column="cls")
    assert "user" not in out.columns
    assert out.index.equals(df.index)
    assert out["pay"].equals(df["pay"])
    people = distinct_per_class(out["cls"].to_numpy(), df["user"].to_numpy())
    assert people.min() >= k
    # The published classes are the classes: one label tuple per class id.
    labels = out[qis].astype(str).agg("|".join, axis=1)
    assert (labels.groupby(out["cls"]).nunique() == 1).all()


def test_issue_event_table_counts_people():
    ev = make_events(3_000, seed=3)
    plain = dmondrian.anonymize(ev.drop(columns="user_id"), EVENT_QUASI_IDENTIFIERS, k=10,
                                class_column="cls")
    people = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=10, entity="user_id",
                                 class_column="cls")
    users = ev["user_id"].to_numpy()
    assert distinct_per_class(plain["cls"].to_numpy(), users).min() < 10  # the issue's flaw
    assert distinct_per_class(people["cls"].to_numpy(), users).min() >= 10
    assert "user_id" not in people.columns


def test_entity_errors():
    df = pd.DataFrame({"u": [1, 1, 2, 2, 3, 3], "a": [1, 2, 3, 4, 5, 6], "s": list("abcabc")})
    with pytest.raises(MissingColumnError, match="'uid'"):
        dmondrian.anonymize(df, ["a"], k=2, entity="uid")
    with pytest.raises(ParameterError, match="quasi-identifier"):
        dmondrian.anonymize(df, ["a", "u"], k=2, entity="u")
    with pytest.raises(ParameterError, match="sensitive"):
        dmondrian.anonymize(df, ["a"], k=2, entity="s", l=2, sensitive="s")
    with pytest.raises(InfeasibleError, match="3 distinct entities"):
        dmondrian.anonymize(df, ["a"], k=4, entity="u")
    with pytest.raises(InvalidValueError, match="missing"):
        dmondrian.anonymize(df.assign(u=[1, None, 2, 2, 3, 3]), ["a"], k=2, entity="u")
    with pytest.raises(ParameterError, match="max_contributions"):
        dmondrian.anonymize(df, ["a"], k=2, entity="u", max_contributions=0)


def test_entity_is_not_refused_and_is_dropped():
    n = 2_000
    df = pd.DataFrame({"u": np.arange(n), "a": np.arange(n) % 50})
    with pytest.raises(IdentifyingColumnError, match="'u'"):
        dmondrian.anonymize(df, ["a"], k=5)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = dmondrian.anonymize(df, ["a"], k=5, entity="u")
    assert list(out.columns) == ["a"]


def test_entropy_l_counts_each_person_once_per_value():
    # One person holds 4 values on many rows, three others one value each:
    # counted in rows the class looks diverse; in (person, value) pairs it
    # is the pairs' histogram that decides.
    u = np.array([0] * 40 + [1, 2, 3])
    s = np.array(["a", "b", "c", "d"] * 10 + ["a", "a", "a"])
    pairs, n = pair_codes(u, pd.factorize(s)[0], 4)
    assert n == 4 + 3 - 0  # (0,a) (0,b) (0,c) (0,d) (1,a) (2,a) (3,a)
    hist = np.bincount(pd.factorize(s)[0][np.unique(pairs, return_index=True)[1]], minlength=4)
    assert hist.tolist() == [4, 1, 1, 1]
    df = pd.DataFrame({"u": u, "a": np.arange(len(u)), "s": s})
    # exp(H) of the pairs' histogram [4, 1, 1, 1] is about 3.4: l=3.5 fails
    # on the whole table, l=3 holds; by rows ([13, 10, 10, 10]) both would hold.
    entropy = math.exp(-sum(p * math.log(p) for p in np.array([4, 1, 1, 1]) / 7))
    assert 3 < entropy < 3.5
    dmondrian.anonymize(df, ["a"], k=2, entity="u", l=3, l_kind="entropy", sensitive="s")
    dmondrian.anonymize(df, ["a"], k=2, l=3.5, l_kind="entropy", sensitive="s")
    with pytest.raises(InfeasibleError, match="entropy"):
        dmondrian.anonymize(df, ["a"], k=2, entity="u", l=3.5, l_kind="entropy",
                            sensitive="s")


def _pair_entropy(cls_rows, u, s):
    pairs = pd.DataFrame({"u": u[cls_rows], "s": s[cls_rows]}).drop_duplicates()
    p = pairs["s"].value_counts(normalize=True).to_numpy()
    return math.exp(-(p * np.log(p)).sum())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_tables(max_users=40), st.sampled_from([1.5, 2.0]))
def test_entropy_l_over_people_holds_per_class(case, ell):
    df, qis, k, mode, _ = case
    try:
        out = dmondrian.anonymize(df, qis, k=k, entity="user", l=ell, l_kind="entropy",
                                  sensitive="s", mode=mode, class_column="cls")
    except InfeasibleError:
        return
    u, s = df["user"].to_numpy(), df["s"].to_numpy()
    for rows in out.groupby("cls").indices.values():
        assert _pair_entropy(rows, u, s) >= ell - 1e-9


def test_t_closeness_over_people():
    ev = make_events(600, seed=5)
    out = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=5, entity="user_id", t=0.3,
                              sensitive="event_type", class_column="cls")
    pairs = ev[["user_id", "event_type"]].assign(cls=out["cls"]).drop_duplicates()
    whole = ev[["user_id", "event_type"]].drop_duplicates()["event_type"]
    q = whole.value_counts(normalize=True)
    for _, g in pairs.groupby("cls"):
        p = g["event_type"].value_counts(normalize=True).reindex(q.index, fill_value=0)
        assert 0.5 * (p - q).abs().sum() <= 0.3 + 1e-9


def test_suppression_masks_whole_classes_of_k_people():
    ev = make_events(800, seed=6)
    out = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=8, entity="user_id",
                              suppression=0.1, class_column="cls")
    users = ev["user_id"].to_numpy()
    cls = out["cls"].to_numpy()
    masked = cls == -1
    assert masked.any()
    assert len(np.unique(users[masked])) >= 8
    assert distinct_per_class(cls, users).min() >= 8


def test_encode_entities_refuses_missing_and_counts():
    with pytest.raises(InvalidValueError, match="'who'"):
        encode_entities(pd.Series(["a", None], name="who"))
    assert encode_entities(pd.Series([3, 3, 9]), k=2).n_entities == 2


def test_estimator_takes_entity():
    ev = make_events(500, seed=8)
    est = dmondrian.MondrianAnonymizer(k=6, quasi_id=EVENT_QUASI_IDENTIFIERS,
                                       entity="user_id", class_column="cls")
    out = est.fit_transform(ev)
    assert "user_id" not in out.columns
    assert distinct_per_class(out["cls"].to_numpy(), ev["user_id"].to_numpy()).min() >= 6


def test_cli_entity(tmp_path, monkeypatch):
    from dmondrian.cli import main

    monkeypatch.chdir(tmp_path)
    ev = make_events(400, seed=9)
    ev.to_csv("events.csv", index=False)
    assert main(["anonymize", "events.csv", "out.csv", "--k", "5", "--qi",
                 "age,region,device", "--entity", "user_id", "--no-progress"]) == 0
    out = pd.read_csv("out.csv")
    assert "user_id" not in out.columns and len(out) == len(ev)
    import json

    manifest = json.loads(open("out.csv.manifest.json").read())
    assert manifest["parameters"]["entity"] == "user_id"
    # The bound the run guarantees, not the exact fewest people of a class.
    assert manifest["achieved"]["k_entities"] == {"at_least": 5}
    assert manifest["metrics"]["achieved"]["k_entities"] == {"at_least": 5}


@pytest.mark.parametrize("max_contributions", [1, 3])
def test_noise_error_matches_the_per_person_scale(max_contributions):
    # 200 people, 3 rows each, one class each (the QI is constant per person)
    # and one value each, so a class's mean over the kept rows is known
    # whichever rows are kept. The error over the scale the docstring states
    # is Laplace(1): its mean absolute value is 1.
    rng = np.random.default_rng(0)
    people = 200
    value = np.repeat(rng.uniform(40, 60, people), 3)
    df = pd.DataFrame({"u": np.repeat(np.arange(people), 3),
                       "age": np.repeat(rng.permutation(people), 3), "pay": value})
    z = []
    for seed in range(15):
        out = dmondrian.anonymize(df, ["age"], k=10, entity="u", class_column="cls",
                                  noise={"pay": {"epsilon": 5.0, "bounds": (0, 100)}},
                                  max_contributions=max_contributions, random_state=seed)
        g = df.assign(cls=out["cls"], out=out["pay"]).groupby("cls")
        users = g["u"].nunique()
        kept = users * min(max_contributions, 3)
        scale = max_contributions * 100 / (kept * 5.0)
        z.extend(((g["out"].first() - g["pay"].mean()) / scale).abs())
    assert 0.85 < np.mean(z) < 1.15, np.mean(z)


def test_bounded_contributions_per_entity():
    from dmondrian.privacy.noise import bound_contributions

    rng = np.random.default_rng(1)
    cls = rng.integers(0, 6, 500)
    ent = rng.integers(0, 40, 500)
    kept = bound_contributions(cls, ent, 2, 3, rng)
    per = pd.DataFrame({"c": cls, "e": ent})[kept]
    assert per.groupby("e")["c"].nunique().max() <= 2
    assert per.groupby(["e", "c"]).size().max() <= 3
    # Every entity keeps something, and as much as the bounds allow.
    assert per["e"].nunique() == len(np.unique(ent))
    held = pd.DataFrame({"c": cls, "e": ent}).groupby("e")["c"].nunique()
    assert (per.groupby("e")["c"].nunique() == held.clip(upper=2)).all()


def test_a_person_key_is_flagged_and_categories_are_not():
    import warnings

    ev = make_events(2_000, seed=10)
    ev["shop"] = np.random.default_rng(0).integers(0, 400, len(ev))
    with pytest.warns(IdentifyingColumnWarning, match="entity='user_id'") as record:
        dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=10)
    assert [str(w.message) for w in record if "shop" in str(w.message)] == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=10, entity="user_id")
        dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=10, allow_unique=["user_id"])


def test_verify_counts_entities_given_their_values():
    ev = make_events(500, seed=13)
    out = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=5, entity="user_id")
    r = dmondrian.verify(out, EVENT_QUASI_IDENTIFIERS, k=5, entity=ev["user_id"])
    assert r.ok and r.achieved["k_entities"] >= 5 and r.achieved["k"] >= r.achieved["k_entities"]
    rep = dmondrian.report(out, EVENT_QUASI_IDENTIFIERS, entity=ev["user_id"])
    assert rep.k_entities == r.achieved["k_entities"]
    assert rep.to_dict()["achieved"]["k_entities"] == rep.k_entities
    rows = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=5, allow_unique=["user_id"])
    r = dmondrian.verify(rows.drop(columns="user_id"), EVENT_QUASI_IDENTIFIERS, k=5,
                         entity=ev["user_id"])
    assert not r.ok and r.achieved["k_entities"] < 5 <= r.achieved["k"]
    with pytest.raises(ParameterError, match="one value per row"):
        dmondrian.verify(out, EVENT_QUASI_IDENTIFIERS, k=5, entity=ev["user_id"][:10])


def test_verify_checks_l_and_t_over_people():
    # One class: a's three rows of x look as diverse as b, c and d's three of y;
    # over people it is one person holding x and three holding y.
    t = pd.DataFrame({"q": ["[1, 9]"] * 6, "s": ["x", "x", "x", "y", "y", "y"]})
    who = ["a", "a", "a", "b", "c", "d"]
    assert dmondrian.verify(t, ["q"], k=2, sensitive="s", l=2, l_kind="entropy").ok
    r = dmondrian.verify(t, ["q"], k=2, sensitive="s", l=2, l_kind="entropy", entity=who)
    assert not r.ok and r.violations["failed"].tolist() == ["l"]
    assert r.achieved["l_entropy"] == pytest.approx(math.exp(-(.25 * math.log(.25)
                                                               + .75 * math.log(.75))))
    r = dmondrian.verify(t, ["q"], sensitive="s", l=2, l_kind="recursive", c=2, entity=who)
    assert r.achieved["recursive_ratio"] == 3.0
    # A release made over people verifies over people; t against the table's pairs.
    ev = make_events(600, seed=1)
    for options in ({"l": 2, "l_kind": "entropy"}, {"t": 0.3}):
        out = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, 6, entity="user_id",
                                  sensitive="event_type", **options)
        assert dmondrian.verify(out, EVENT_QUASI_IDENTIFIERS, k=6, sensitive="event_type",
                                entity=ev["user_id"], **options).ok
