"""refine="local": rows moved and swapped between neighbouring classes, every guarantee kept."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS
from dmondrian.errors import ParameterError
from dmondrian.metrics import ncp
from dmondrian.plans import fit_plan
from dmondrian.synthetic import make_census

# The invariants of every objective refined or not (every class >= k, each label holds its
# rows' values, rows in = rows out, determinism) are tested in test_objectives.py.


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 300), st.integers(2, 6), st.integers(0, 2**16),
       st.sampled_from([None, "entropy", "t"]),
       st.one_of(st.none(), st.just("all"), st.integers(2, 60)))
def test_refined_classes_hold_k_people_and_the_sensitive_constraint(n, k, seed, sensitive,
                                                                     classes):
    # Blocks of any size, from two classes (refine_rows=2k) to the whole table.
    refine_rows = classes * k if isinstance(classes, int) else classes
    rng = np.random.default_rng(seed)
    users = rng.integers(0, max(k, n // 3), n)
    df = pd.DataFrame({"user": users, "age": rng.integers(18, 90, n),
                       "zip": rng.integers(0, 50, n), "s": rng.integers(0, 4, n)})
    if len(np.unique(users)) < k:
        return
    options = {}
    if sensitive == "entropy":
        options = dict(sensitive="s", l=1.5, l_kind="entropy")
    elif sensitive == "t":
        options = dict(sensitive="s", t=0.6)
    options.update(refine="local", refine_rows=refine_rows, mode="relaxed", objective="ncp")
    try:
        out = dmondrian.anonymize(df, ["age", "zip"], k, entity="user", class_column="cls",
                                  **options)
    except dmondrian.errors.InfeasibleError:
        return  # the whole table fails the sensitive constraint
    assert_valid_release(df.drop(columns="user"), out, ["age", "zip"], k, class_column="cls")
    people = df["user"].groupby(out["cls"]).nunique()
    assert people.min() >= k
    if sensitive == "entropy":
        for _, s in df["s"].groupby(out["cls"]):
            # entropy over people: each (person, value) pair once
            pairs = df.loc[s.index, ["user", "s"]].drop_duplicates()["s"]
            p = pairs.value_counts(normalize=True).to_numpy()
            assert -(p * np.log(p)).sum() >= np.log(1.5) - 1e-9
    again = dmondrian.anonymize(df, ["age", "zip"], k, entity="user", class_column="cls",
                                **options)
    pd.testing.assert_frame_equal(out, again)


def _kernel_ncp(df: pd.DataFrame, qis: list[str], classes: np.ndarray) -> float:
    """The refinement's measure: per class and QI, a number's range over the column's,
    1 when missing and present values mix; a nominal's (distinct - 1) / (domain - 1)."""
    total = 0.0
    for q in qis:
        col = df[q].reset_index(drop=True)
        groups = col.groupby(classes)
        if pd.api.types.is_numeric_dtype(col):
            width = col.max() - col.min()
            if not width > 0:
                continue
            spans = (groups.transform("max") - groups.transform("min")) / width
            mixed = groups.transform(lambda v: v.isna().any() and v.notna().any())
            spans = spans.fillna(0.0).where(~mixed.astype(bool), 1.0)
        else:
            if col.nunique() < 2:
                continue
            spans = (groups.transform("nunique") - 1) / (col.nunique() - 1)
        total += float(spans.sum())
    return total / (len(df) * len(qis))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(100, 400), st.integers(2, 8), st.integers(0, 2**16),
       st.sampled_from([2, 9, 70]), st.sampled_from([0.0, 0.2]),
       st.sampled_from(["strict", "relaxed"]))
def test_refinement_never_raises_the_ncp(n, k, seed, codes, p_missing, mode):
    # Every block keeps the cheaper of its classes and what the moves, swaps and
    # k-member found, and the swaps skipped by the submodular bound could not pay:
    # the refined partition costs at most the unrefined one, missing values, ties and
    # nominal QIs of a bit set (<= 64 codes) or counted (more) included.
    rng = np.random.default_rng(seed)
    f = np.round(rng.normal(0, 3, n), 1)
    df = pd.DataFrame({"i": rng.integers(0, 12, n), "f": np.where(rng.random(n) < p_missing,
                                                                  np.nan, f),
                       "c": pd.Categorical([f"c{v}" for v in rng.integers(0, codes, n)])})
    qis = ["i", "f", "c"]
    cost = {}
    for refine in ("none", "local"):
        out = dmondrian.anonymize(df, qis, k, mode=mode, objective="ncp", refine=refine,
                                  class_column="cls")
        assert out.groupby("cls").size().min() >= min(k, n)
        cost[refine] = _kernel_ncp(df, qis, out["cls"].to_numpy())
    assert cost["local"] <= cost["none"] + 1e-9


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(200, 1500), st.integers(2, 6), st.integers(0, 2**16),
       st.sampled_from([16, 48, 128]), st.booleans())
def test_every_block_keeps_the_cheaper_of_k_member_and_mondrian(n, k, seed, block, entity):
    # k-member goes first and Mondrian's classes are refined only where it is not well
    # ahead: over many small blocks, each decided on its own, the refined partition
    # still costs at most the unrefined one and every class holds k people.
    import dmondrian.local as local

    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"user": rng.integers(0, n // 2, n), "i": rng.integers(0, 40, n),
                       "f": np.round(rng.normal(0, 3, n), 1),
                       "c": pd.Categorical([f"c{v}" for v in rng.integers(0, 9, n)])})
    qis = ["i", "f", "c"]
    options = {"entity": "user"} if entity else {}
    saved = local.REFINE_BLOCK_ROWS, local.REFINE_SMALL_BLOCK_ROWS
    local.REFINE_BLOCK_ROWS = local.REFINE_SMALL_BLOCK_ROWS = block
    try:
        cost = {}
        for refine in ("none", "local"):
            out = dmondrian.anonymize(df, qis, k, mode="relaxed", objective="ncp",
                                      refine=refine, class_column="cls", **options)
            groups = out.assign(user=df["user"]).groupby("cls")["user"]
            assert (groups.nunique() if entity else groups.size()).min() >= k
            cost[refine] = _kernel_ncp(df, qis, out["cls"].to_numpy())
    finally:
        local.REFINE_BLOCK_ROWS, local.REFINE_SMALL_BLOCK_ROWS = saved
    assert cost["local"] <= cost["none"] + 1e-9


def test_small_tables_get_the_larger_blocks(adult):
    # Adult (30,162 rows) is below REFINE_SMALL_TABLE_ROWS: its blocks of
    # REFINE_SMALL_BLOCK_ROWS lose less than the large tables' REFINE_BLOCK_ROWS.
    import dmondrian.local as local

    qis = list(ADULT_QUASI_IDENTIFIERS)
    assert len(adult) <= local.REFINE_SMALL_TABLE_ROWS
    assert local.REFINE_SMALL_BLOCK_ROWS > local.REFINE_BLOCK_ROWS
    gcp = {}
    saved = local.REFINE_SMALL_BLOCK_ROWS
    for block in (saved, local.REFINE_BLOCK_ROWS):
        local.REFINE_SMALL_BLOCK_ROWS = block
        try:
            out = dmondrian.anonymize(adult, qis, 5, mode="relaxed", objective="ncp",
                                      refine="local", class_column="cls")
        finally:
            local.REFINE_SMALL_BLOCK_ROWS = saved
        assert out.groupby("cls").size().min() >= 5
        gcp[block] = ncp(out, qis, adult).overall
    assert gcp[saved] < gcp[local.REFINE_BLOCK_ROWS]


def test_refinement_lowers_the_ncp_of_a_census_table():
    df = make_census(20_000, seed=3)
    qis = ["age", "zip", "sex", "education", "occupation"]
    gcp = {}
    for refine in ("none", "local"):
        out = dmondrian.anonymize(df, qis, 5, mode="relaxed", objective="ncp", refine=refine,
                                  class_column="cls", identifiers=["person_id"])
        assert out.groupby("cls").size().min() >= 5
        gcp[refine] = ncp(out, qis, df).overall
    assert gcp["local"] < gcp["none"]


def test_refinement_keeps_suppression_and_noise():
    df = make_census(3_000, seed=4).drop(columns=["person_id"])
    qis = ["age", "zip", "sex"]
    out = dmondrian.anonymize(df, qis, 5, refine="local", suppression=0.05, class_column="cls",
                              noise={"income": {"epsilon": 1.0, "bounds": (0, 500_000)}},
                              random_state=0)
    kept = out[out["cls"] >= 0]
    assert kept.groupby("cls").size().min() >= 5
    assert (out["cls"] == -1).sum() <= 150
    assert kept.groupby("cls")["income"].nunique().max() == 1


def test_refinement_lowers_the_gcp_on_adult(adult):
    qis = list(ADULT_QUASI_IDENTIFIERS)
    gcp = {}
    for refine in ("none", "local"):
        out = dmondrian.anonymize(adult, qis, 10, mode="relaxed", objective="ncp",
                                  refine=refine, class_column="cls")
        assert out.groupby("cls").size().min() >= 10
        gcp[refine] = ncp(out, qis, adult).overall
    assert gcp["local"] <= gcp["none"]


def test_refine_is_checked_and_refused_by_fitted_plans():
    df = pd.DataFrame({"a": np.arange(40) % 17, "b": np.arange(40) * 7 % 23})
    with pytest.raises(ParameterError, match="refine"):
        dmondrian.anonymize(df, ["a"], 2, refine="global")
    with pytest.raises(ParameterError, match="refine"):
        fit_plan(df, ["a", "b"], 4, refine="local")
    # the estimator takes it like any option
    est = dmondrian.MondrianAnonymizer(k=4, quasi_id=["a", "b"], refine="local",
                                       class_column="cls")
    assert est.fit_transform(df).groupby("cls").size().min() >= 4


def test_the_dask_leaves_refine_as_the_local_engine_does(adult, process_client):
    # Blocks never span a leaf, so each leaf is refined as a local run on it alone;
    # the release stays close to the local one's GCP.
    import dask.dataframe as dd

    qis = list(ADULT_QUASI_IDENTIFIERS)
    ddf = dd.from_pandas(adult, npartitions=6)
    gcp = {}
    # refine_rows="all" is each leaf as one block: capped at the leaf, whatever the table.
    for refine, rows in (("none", None), ("local", None), ("local", "all")):
        out = dmondrian.anonymize(ddf, qis, 10, mode="relaxed", objective="ncp", refine=refine,
                                  refine_rows=rows, class_column="cls", leaf_rows=2000,
                                  client=process_client).compute().loc[adult.index]
        assert out.groupby("cls").size().min() >= 10
        gcp[refine, rows] = ncp(out, qis, adult).overall
    local = dmondrian.anonymize(adult, qis, 10, mode="relaxed", objective="ncp",
                                refine="local", class_column="cls")
    assert gcp["local", None] < gcp["none", None]
    assert gcp["local", None] <= 1.02 * ncp(local, qis, adult).overall
    assert gcp["local", "all"] < gcp["local", None]


def test_the_refined_release_does_not_depend_on_the_thread_count():
    from dmondrian._kernel import thread_limit

    df = make_census(6_000, seed=5).drop(columns=["person_id"])
    qis = ["age", "zip", "sex", "education"]
    with thread_limit(1):
        one = dmondrian.anonymize(df, qis, 4, refine="local", class_column="cls")
    with thread_limit(2):
        two = dmondrian.anonymize(df, qis, 4, refine="local", class_column="cls")
    pd.testing.assert_frame_equal(one, two)


def test_the_command_line_takes_refine(tmp_path):
    from dmondrian.cli import main

    df = pd.DataFrame({"age": np.arange(60) % 17, "zip": np.arange(60) * 7 % 23})
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    df.to_csv(src, index=False)
    assert main(["anonymize", str(src), str(dst), "--k", "4", "--qi", "age,zip",
                 "--refine", "local"]) == 0
    expected = dmondrian.anonymize(df, ["age", "zip"], 4, refine="local")
    out = pd.read_csv(dst)
    # The same release, its rows shuffled in the file (dmondrian.release.row_order).
    assert sorted(out["age"].astype(str)) == sorted(expected["age"].astype(str))


def _blocks_top_down(depths: np.ndarray, starts: np.ndarray, n: int, block_rows: int) -> list:
    """The largest subtrees of at most block_rows rows, by recursion over the tree rebuilt
    from the classes' depths (the reference for subtree_blocks)."""
    ends = np.append(starts[1:], n)
    # Rebuild (start, end, children) nodes bottom-up with the sibling rule.
    stack = []
    for s, e in zip(starts, ends):
        stack.append((int(depths[s]), int(s), int(e), []))
        while len(stack) >= 2 and stack[-1][0] == stack[-2][0]:
            right, left = stack.pop(), stack.pop()
            stack.append((left[0] - 1, left[1], right[2], [left, right]))
    assert len(stack) == 1  # a whole tree, down to the root's depth
    out = []

    def walk(t):
        if t[2] - t[1] <= block_rows or not t[3]:
            out.append(t[1])
        else:
            walk(t[3][0])
            walk(t[3][1])

    walk(stack[0])
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 600), st.integers(1, 6), st.integers(0, 2**16),
       st.sampled_from(["strict", "relaxed"]), st.integers(8, 200), st.integers(0, 3),
       st.booleans())
def test_refine_blocks_are_the_largest_subtrees_of_the_cuts(n, k, seed, mode, block, depth0,
                                                             two_roots):
    # mondrian_partition writes each class's depth; the tree rebuilt from them is whole
    # (one node at each root's depth), and the blocks are its largest subtrees of at most
    # block rows, as a top-down walk finds them, never across a root.
    from dmondrian import local
    from dmondrian._kernel import mondrian_partition, subtree_blocks
    from dmondrian.encoding.qi import encode_qi

    rng = np.random.default_rng(seed)
    cols = [pd.Series(rng.integers(0, 30, n)), pd.Series(np.round(rng.normal(0, 2, n), 1))]
    encoded = [encode_qi(c) for c in cols]
    rules = local.kernel_rules(encoded, min(k, n), mode=mode, objective="ncp")
    bufs = dmondrian._kernel.double_buffer([qi.keys for qi in encoded], rules.buffer_rows, n)
    depths = np.full(n, -99, dtype=np.int64)
    roots = [0, n // 2] if two_roots and n >= 2 * k else [0]
    leaves = np.array([[r, depth0 + i] for i, r in enumerate(roots)])
    _, class_start, _ = mondrian_partition(bufs, rules, leaves, depths=depths)
    expected = []
    for i, (r, end) in enumerate(zip(roots, roots[1:] + [n])):
        starts = r + np.flatnonzero(class_start[r:end])
        assert (depths[starts] >= depth0 + i).all()
        expected += [r + s for s in _blocks_top_down(depths[r:end], starts - r, end - r, block)]
    blocks = subtree_blocks(depths, class_start, roots, block)
    bounds = list(zip(expected, expected[1:] + [n]))
    assert blocks.tolist() == [[s, e] for s, e in bounds if e - s <= block]
    for s, e in bounds:
        if e - s > block:  # left out: a single class of more rows
            assert not class_start[s + 1:e].any()


def test_refine_rows_is_checked_and_refused_by_fitted_plans(tmp_path):
    from dmondrian.cli import main

    df = pd.DataFrame({"a": np.arange(60) % 17, "b": np.arange(60) * 7 % 23})
    with pytest.raises(ParameterError, match="at least 2k = 8") as info:
        dmondrian.anonymize(df, ["a", "b"], 4, refine="local", refine_rows=7)
    assert info.value.parameter == "refine_rows"
    with pytest.raises(ParameterError, match="refine is 'none'"):
        dmondrian.anonymize(df, ["a", "b"], 4, refine_rows="all")
    with pytest.raises(ParameterError, match="refine_rows must be None, an integer >= 2 or 'all'"):
        dmondrian.anonymize(df, ["a", "b"], 4, refine="local", refine_rows="whole")
    with pytest.raises(ParameterError, match="a fitted plan does not take 'refine_rows'"):
        fit_plan(df, ["a", "b"], 4, refine_rows=8)
    # Two classes per block, and the whole table: each a valid release; the command line
    # reads the same values.
    for rows in (8, "all"):
        out = dmondrian.anonymize(df, ["a", "b"], 4, refine="local", refine_rows=rows,
                                  class_column="cls")
        assert_valid_release(df, out, ["a", "b"], 4, class_column="cls")
        dst = tmp_path / f"out{rows}.csv"
        df.to_csv(tmp_path / "in.csv", index=False)
        assert main(["anonymize", str(tmp_path / "in.csv"), str(dst), "--k", "4", "--qi", "a,b",
                     "--refine", "local", "--refine-rows", str(rows)]) == 0
        assert sorted(pd.read_csv(dst)["a"].astype(str)) == sorted(out["a"].astype(str))


def test_the_whole_table_as_one_block_loses_least_on_adult(adult):
    qis = list(ADULT_QUASI_IDENTIFIERS)
    gcp = {}
    for rows in (None, "all"):
        out = dmondrian.anonymize(adult, qis, 10, mode="relaxed", objective="ncp",
                                  refine="local", refine_rows=rows, class_column="cls")
        assert out.groupby("cls").size().min() >= 10
        gcp[rows] = ncp(out, qis, adult).overall
    assert gcp["all"] < gcp[None]
