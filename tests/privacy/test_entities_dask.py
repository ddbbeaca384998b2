"""entity= on the Dask engine, on a real multi-process LocalCluster."""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.distributed import anonymize_to_parquet, apply_plan, plan
from dmondrian.errors import IdentifyingColumnWarning, InfeasibleError
from dmondrian.privacy.entities import distinct_per_class
from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events


@pytest.fixture(scope="module")
def cluster_client(process_client):
    return process_client


@st.composite
def event_tables(draw):
    n_users = draw(st.integers(20, 150))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = rng.integers(1, draw(st.sampled_from([3, 12])), n_users)
    user = np.repeat(rng.permutation(n_users), rows)
    n = len(user)
    df = pd.DataFrame({"user": user.astype(str),
                       "age": np.repeat(rng.integers(18, 80, n_users), rows),
                       "dev": rng.integers(0, draw(st.sampled_from([2, 6, 40])), n),
                       "pay": rng.random(n)})
    df = df.sample(frac=1.0, random_state=int(rng.integers(1 << 30))).reset_index(drop=True)
    k = draw(st.integers(2, max(2, n_users // 3)))
    return df, k, draw(st.integers(1, 4)), draw(st.sampled_from([2 * k, 60, 10_000]))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(event_tables())
def test_every_class_holds_k_entities_on_dask(cluster_client, case):
    df, k, parts, leaf_rows = case
    out = dmondrian.anonymize(dd.from_pandas(df, npartitions=parts), ["age", "dev"], k=k,
                              entity="user", class_column="cls", client=cluster_client,
                              leaf_rows=leaf_rows, progress=False).compute()
    assert "user" not in out.columns
    out = out.sort_index()
    assert len(out) == len(df) and out["pay"].equals(df["pay"])
    assert distinct_per_class(pd.factorize(out["cls"])[0], df["user"].to_numpy()).min() >= k


def test_parquet_writer_and_plan_count_people(cluster_client, tmp_path):
    ev = make_events(1_500, seed=11)
    ddf = dd.from_pandas(ev, npartitions=3)
    anonymize_to_parquet(ddf, tmp_path / "out", EVENT_QUASI_IDENTIFIERS, 10, entity="user_id",
                         class_column="cls", client=cluster_client, leaf_rows=2_000,
                         progress=False, write_options={"write_index": True},
                         allow_unique=["index"])
    # The input's row numbers, written on request only, tie each row to its user.
    out = pd.read_parquet(tmp_path / "out").sort_index()
    assert out.index.equals(ev.index)
    assert "user_id" not in out.columns and len(out) == len(ev)
    users = ev["user_id"].to_numpy()[out.index.to_numpy()]
    assert distinct_per_class(pd.factorize(out["cls"])[0], users).min() >= 10


def test_the_writer_counts_people_in_the_shuffle_pass(cluster_client, tmp_path):
    # Two people with 60 rows each at ages 20-29, twenty with one row at 60:
    # the sample's rows allow cuts the people do not; the shuffle pass's
    # verdict undoes them, or counts again when a cut spans output partitions.
    heavy = pd.DataFrame({"user": np.repeat([0, 1], 60), "age": np.tile(np.arange(20, 30), 12),
                          "dev": np.arange(120) % 3})
    light = pd.DataFrame({"user": np.arange(2, 22), "age": 60, "dev": np.arange(20) % 3})
    df = pd.concat([heavy, light], ignore_index=True)
    for leaf_rows, name in ((10, "small"), (1_000, "one")):
        top = anonymize_to_parquet(dd.from_pandas(df, npartitions=2), tmp_path / name,
                                   ["age", "dev"], 5, entity="user", class_column="cls",
                                   client=cluster_client, leaf_rows=leaf_rows, progress=False,
                                   write_options={"write_index": True},
                                   allow_unique=["index"])
        out = pd.read_parquet(tmp_path / name).sort_index()
        users = df["user"].to_numpy()[out.index.to_numpy()]
        assert len(out) == len(df)
        assert distinct_per_class(pd.factorize(out["cls"])[0], users).min() >= 5
    # A larger table: its sample plans the whole tree, read once before the shuffle.
    ev = make_events(1_500, seed=11)
    top = anonymize_to_parquet(dd.from_pandas(ev, npartitions=3), tmp_path / "ev",
                               EVENT_QUASI_IDENTIFIERS, 10, entity="user_id",
                               client=cluster_client, leaf_rows=2_000, progress=False)
    assert top.passes == 1 and top.n_leaves > 1


def test_a_top_cut_short_of_people_is_undone(cluster_client):
    # Two people with 60 rows each at ages 20-29, twenty with one row at 60:
    # the top phase's row counts allow the age cut, the entity pass undoes it.
    heavy = pd.DataFrame({"user": np.repeat([0, 1], 60), "age": np.tile(np.arange(20, 30), 12),
                          "dev": np.arange(120) % 3})
    light = pd.DataFrame({"user": np.arange(2, 22), "age": 60, "dev": np.arange(20) % 3})
    df = pd.concat([heavy, light], ignore_index=True)
    ddf = dd.from_pandas(df, npartitions=2)
    rows = plan(ddf, ["age", "dev"], 5, client=cluster_client, leaf_rows=10, progress=False)
    people = plan(ddf, ["age", "dev"], 5, entity="user", client=cluster_client, leaf_rows=10,
                  progress=False)
    assert rows.n_leaves > 1 and people.n_leaves < rows.n_leaves
    assert "entity pass" in people.timings


def _pairs_hold(ev, cls, k, ell=None, t=None):
    """Every class holds k people, entropy l and t over its (person, value) pairs."""
    users = ev["user_id"].to_numpy()
    assert distinct_per_class(cls, users).min() >= k
    assert dmondrian.verify(pd.DataFrame({"cls": cls}), ["cls"], k=k, entity=users).ok
    pairs = ev[["user_id", "event_type"]].assign(cls=cls).drop_duplicates()
    whole = ev[["user_id", "event_type"]].drop_duplicates()["event_type"]
    q = whole.value_counts(normalize=True)
    p = pd.crosstab(pairs["cls"], pairs["event_type"], normalize="index")[q.index].to_numpy()
    if ell is not None:
        logs = np.log(np.where(p > 0, p, 1.0))
        assert np.exp(-(p * logs).sum(axis=1)).min() >= ell - 1e-9
    if t is not None:
        assert 0.5 * np.abs(p - q.to_numpy()).sum(axis=1).max() <= t + 1e-9


@pytest.mark.parametrize("constraint", [{"l": 2.0, "l_kind": "entropy"}, {"t": 0.3},
                                        {"l": 2, "l_kind": "recursive", "c": 3}])
def test_l_and_t_count_pairs_on_dask(cluster_client, constraint):
    ev = make_events(800, seed=3)
    ddf = dd.from_pandas(ev, npartitions=3)
    # Many leaves: the top phase's cuts are kept on exact pair counts.
    top = plan(ddf, EVENT_QUASI_IDENTIFIERS, 5, entity="user_id", sensitive="event_type",
               class_column="cls", client=cluster_client, leaf_rows=600, progress=False,
               **constraint)
    assert top.n_leaves > 1 and "sensitive passes" in top.timings
    out = apply_plan(ddf, top).compute().sort_index()
    assert "user_id" not in out.columns and len(out) == len(ev)
    entropy = constraint.get("l_kind") == "entropy"
    _pairs_hold(ev, pd.factorize(out["cls"])[0], 5, constraint["l"] if entropy else None,
                constraint.get("t"))


def test_one_leaf_of_pairs_is_the_local_release(cluster_client):
    ev = make_events(400, seed=4)
    kw = dict(entity="user_id", sensitive="event_type", t=0.3, l=2.0, l_kind="entropy")
    one = dmondrian.anonymize(dd.from_pandas(ev, npartitions=2), EVENT_QUASI_IDENTIFIERS, k=5,
                              leaf_rows=len(ev), client=cluster_client, progress=False,
                              **kw).compute().sort_index()
    local = dmondrian.anonymize(ev, EVENT_QUASI_IDENTIFIERS, k=5, **kw)
    for q in EVENT_QUASI_IDENTIFIERS:
        assert one[q].astype(str).tolist() == local[q].astype(str).tolist()


def test_pairs_are_refused_as_the_local_engine_refuses_them(cluster_client):
    # By rows the table is diverse enough; by (person, value) pairs it is not.
    df = pd.DataFrame({"u": [0] * 40 + [1, 2, 3], "a": np.arange(43),
                       "s": ["a", "b", "c", "d"] * 10 + ["a", "a", "a"]})
    with pytest.raises(InfeasibleError, match="entropy"):
        dmondrian.anonymize(df, ["a"], k=2, entity="u", l=3.5, l_kind="entropy",
                            sensitive="s")
    with pytest.raises(InfeasibleError, match="entropy"):
        plan(dd.from_pandas(df, npartitions=2), ["a"], 2, entity="u", l=3.5,
             l_kind="entropy", sensitive="s", client=cluster_client, progress=False)
    plan(dd.from_pandas(df, npartitions=2), ["a"], 2, entity="u", l=3, l_kind="entropy",
         sensitive="s", client=cluster_client, progress=False)


@pytest.mark.parametrize("max_contributions", [1, 3])
def test_noise_error_matches_the_per_person_scale_on_dask(cluster_client, max_contributions):
    # As the local engine's test: one class and one value per person, so a
    # class's mean over its kept rows is known; several leaves.
    rng = np.random.default_rng(0)
    people = 1_500
    df = pd.DataFrame({"u": np.repeat(np.arange(people), 3),
                       "age": np.repeat(rng.permutation(people), 3),
                       "pay": np.repeat(rng.uniform(40, 60, people), 3)})
    ddf = dd.from_pandas(df, npartitions=3)
    z = []
    for seed in range(2):
        out = dmondrian.anonymize(ddf, ["age"], k=5, entity="u", class_column="cls",
                                  noise={"pay": {"epsilon": 5.0, "bounds": (0, 100)}},
                                  max_contributions=max_contributions, random_state=seed,
                                  leaf_rows=1_000, client=cluster_client,
                                  progress=False).compute().sort_index()
        g = df.assign(cls=out["cls"], out=out["pay"]).groupby("cls")
        assert g["out"].nunique().max() == 1
        kept = g["u"].nunique() * min(max_contributions, 3)
        scale = max_contributions * 100 / (kept * 5.0)
        z.extend(((g["out"].first() - g["pay"].mean()) / scale).abs())
    assert len(z) > 300 and 0.85 < np.mean(z) < 1.15, np.mean(z)


def test_each_person_shares_max_classes_among_their_leaves(cluster_client):
    from dmondrian._dask.entity_pass import entity_hashes

    ev = make_events(600, seed=13)
    top = plan(dd.from_pandas(ev, npartitions=3), EVENT_QUASI_IDENTIFIERS, 5, entity="user_id",
               noise={"amount": {"epsilon": 1.0, "bounds": (0, 100)}}, max_classes=2,
               random_state=1, leaf_rows=300, client=cluster_client, progress=False)
    assert top.n_leaves > 2
    shares = top.class_shares
    leaf = np.repeat(np.arange(top.n_leaves), np.diff(shares.starts))
    dealt = pd.DataFrame({"id": shares.ids, "leaf": leaf, "share": shares.shares})
    ids = pd.Series(entity_hashes(ev["user_id"]))
    # Every person's two slots are dealt, to leaves holding them, one each
    # when they span two leaves or more.
    assert set(dealt["id"]) == set(ids)
    assert (dealt.groupby("id")["share"].sum() == 2).all()
    assert dealt["share"].between(1, 2).all()
    assert (dealt.groupby("id")["leaf"].nunique() <= 2).all()


def test_dask_flags_a_person_key(cluster_client):
    ddf = dd.from_pandas(make_events(1_500, seed=14), npartitions=2)
    with pytest.warns(IdentifyingColumnWarning, match="entity='user_id'"):
        plan(ddf, EVENT_QUASI_IDENTIFIERS, 10, client=cluster_client, progress=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 12)), min_size=1, max_size=60),
       st.integers(1, 5), st.integers(1, 20))
def test_people_per_leaf_are_exact_up_to_k(rows, k, first):
    # However the ids are gathered (the first rows, then the leaves short of
    # k) and merged, a leaf and any union of leaves show min(k, people).
    from dmondrian._dask import entity_pass

    leaf = np.array([r[0] for r in rows])
    people = pd.Series([f"u{r[1]}" for r in rows])
    old, entity_pass.FIRST_ROWS = entity_pass.FIRST_ROWS, first
    try:
        half = len(rows) // 2
        found = entity_pass.merge_smallest(
            entity_pass.some_per_leaf(leaf[:half], people[:half], k, 4),
            entity_pass.some_per_leaf(leaf[half:], people[half:].reset_index(drop=True), k, 4),
            k=k)
    finally:
        entity_pass.FIRST_ROWS = old
    for group in ([0], [1], [2, 3], [0, 1, 2, 3]):
        ids = np.unique(found[1][np.isin(found[0], group)])[:k]
        assert len(ids) == min(k, people[np.isin(leaf, group)].nunique())
