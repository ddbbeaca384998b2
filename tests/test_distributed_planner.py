"""The top phase decides exactly like the local kernel, and its pieces compose.

Property tests on random small tables: the planner's spans and cuts computed
from a region's *summary* equal the kernel's computed from its *rows*; sketches
merge to the sketch of the union; routing agrees with the planner's own rule.
Relaxed cuts send the very rows the kernel sends left (its first tied rows in
input order), not just as many.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from distributed_helpers import JOB_HIERARCHY
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian import _kernel as K
from dmondrian.constraints import KAnonymity, kernel_privacy
from dmondrian.domain import build_domain, domain_sketch, merge_domain
from dmondrian.hierarchy import Hierarchy
from dmondrian.local import _hierarchy_arrays, encode_table
from dmondrian.planner import find_cut, goes_left, region_spans
from dmondrian.routing import encode_keys, route, row_positions
from dmondrian.sketch import merge_sketches, summarize

QIS = ["num", "flt", "ord", "nom", "job"]
KINDS = ["numeric", "numeric", "ordinal", "nominal", "hierarchy"]


@st.composite
def tables(draw):
    n = draw(st.integers(2, 60))
    ints = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    floats = draw(st.lists(st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 2.25, 7.0])),
                           min_size=n, max_size=n))
    ords = draw(st.lists(st.one_of(st.none(), st.sampled_from("abcd")), min_size=n, max_size=n))
    noms = draw(st.lists(st.one_of(st.none(), st.sampled_from(["x", "y", "z", "w"])),
                         min_size=n, max_size=n))
    jobs = draw(st.lists(st.sampled_from(sorted(JOB_HIERARCHY)), min_size=n, max_size=n))
    return pd.DataFrame({
        "num": np.asarray(ints, dtype=np.int64),
        "flt": np.asarray([np.nan if v is None else v for v in floats]),
        "ord": pd.Categorical(ords, categories=list("abcd"), ordered=True),
        "nom": pd.Series(noms, dtype=object),
        "job": jobs,
    })


def _domain(df):
    trees = {"job": Hierarchy.coerce(JOB_HIERARCHY, name="job")}
    sk = domain_sketch(df, 0, QIS, KINDS, sample_size=10_000)
    return build_domain(sk, QIS, KINDS, trees, df.iloc[:0])


def _kernel_cut(keys, j, n, lo, hi, miss, kind, card, relaxed, priv, *trees, ws):
    """``_kernel._find_cut`` on rows ``[0, n)``: ``(n_left, t, eq, need, rank)``."""
    n_left, t, eq, need, ranked = K._find_cut(keys, j, 0, n, lo, hi, miss, kind, card, relaxed,
                                              priv, *trees, ws, np.empty(n, dtype=np.int64))
    return n_left, t, eq, need, ws[K.WS_RANK, :card if ranked else 0].copy()


@settings(max_examples=60, deadline=None)
@given(tables(), st.integers(1, 6), st.booleans())
def test_summary_decisions_equal_kernel_decisions(df, min_size, relaxed):
    domain, root = _domain(df)
    encoded = encode_table(df, QIS, {"job": domain.hierarchies[4]}, dict(zip(QIS, KINDS,
                                                                               strict=True)))
    keys = np.ascontiguousarray(np.stack([e.keys for e in encoded]))
    np.testing.assert_array_equal(encode_keys(df, domain), keys)
    np.testing.assert_allclose(domain.scales, [e.scale for e in encoded])
    h_parent, h_lo, h_hi, h_leaf, hoffs, loffs = _hierarchy_arrays(encoded)
    n = len(df)
    spans = region_spans(root, domain)
    privacy = kernel_privacy([KAnonymity(min_size)])
    priv = (privacy.ip, privacy.fp, privacy.q)
    ws = K._workspace(np.asarray([e.card for e in encoded]), priv)
    for j, e in enumerate(encoded):
        lo, hi, miss = K._column_stats(keys, j, 0, n, e.kernel_kind, e.card)
        expected = K._node_span(keys, j, 0, n, lo, hi, miss, e.kernel_kind, e.scale, e.card,
                                h_parent, h_lo, h_hi, h_leaf, hoffs[j], loffs[j], ws)
        assert spans[j] == expected, (j, spans[j], expected)
        if expected <= 0:
            continue
        n_left, t, eq, need, rank = _kernel_cut(keys, j, n, lo, hi, miss, e.kernel_kind,
                                                e.card, relaxed, priv, h_parent, h_lo, h_hi,
                                                h_leaf, hoffs[j], loffs[j], ws=ws)
        cut = find_cut(root, j, domain, relaxed, min_size)
        if n_left == 0:
            assert cut is None
            continue
        assert cut is not None and (cut.n_left, cut.t) == (n_left, t), (j, cut, n_left, t)
        if rank.shape[0]:
            np.testing.assert_array_equal(cut.ranks, rank)
        if relaxed:
            assert cut.eq == eq
        np.testing.assert_array_equal(goes_left(cut, keys, row_positions(0, n)),
                                      _kernel_left(keys[j], t, eq, need, rank))


def _kernel_left(row, t, eq, need, rank):
    """The rows the kernel's cut moves left: key (or rank) <= t, then the first
    ``need`` rows equal to ``eq`` in row order (``_kernel._goes_left``)."""
    v = rank[row] if rank.shape[0] else row
    tied = v == eq
    return (v <= t) | (tied & (np.cumsum(tied) <= need))


@settings(max_examples=25, deadline=None)
@given(tables(), st.integers(1, 4), st.integers(0, 2**31))
def test_sketches_merge_like_the_union(df, n_parts, seed):
    domain, _ = _domain(df)
    keys = encode_keys(df, domain)
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 3, len(df))
    owner = rng.integers(0, n_parts, len(df))
    rates = np.array([1.0, 0.5, 0.0])
    prio = rng.random(len(df))
    pos = row_positions(0, len(df))
    exact = {j: keys[j] for j in (3, 4)}

    def sketch(mask):
        return summarize(keys[:, mask], region[mask], 3, exact={j: v[mask] for j, v in
                                                                   exact.items()},
                         slots=domain.slots, rates=rates, priority=prio[mask],
                         positions=pos[mask])

    whole = sketch(np.ones(len(df), dtype=bool))
    merged = merge_sketches(*[sketch(owner == p) for p in range(n_parts)])
    for field in ("count", "lo", "hi", "missing"):
        np.testing.assert_array_equal(getattr(whole, field), getattr(merged, field))
    for j in exact:
        for a, b in zip(whole.hist[j], merged.hist[j], strict=True):
            np.testing.assert_array_equal(a, b)
    # Sampled rows keep their positions: the same (position, keys) rows either way.
    rows = [sorted(map(tuple, np.vstack([s.sample_pos, s.sample_keys]).T))
            for s in (whole, merged)]
    assert rows[0] == rows[1]
    np.testing.assert_array_equal(np.sort(whole.sample_pos), pos[prio < rates[region]])
    assert (whole.region(1).n, whole.region(2).sample_keys.shape[1]) == (
        (region == 1).sum(), 0)


def test_domain_sketches_merge_across_partitions():
    df = pd.DataFrame({
        "num": [1, 5, 3, 3], "flt": [0.5, np.nan, 2.0, 2.0],
        "ord": pd.Categorical(["b", None, "d", "b"], categories=list("abcd"), ordered=True),
        "nom": ["y", "x", None, "y"], "job": ["Private", "Local-gov", "Private", "Self-emp"]})
    trees = {"job": Hierarchy.coerce(JOB_HIERARCHY, name="job")}
    parts = [domain_sketch(df.iloc[a:b], i, QIS, KINDS, 3)
             for i, (a, b) in enumerate([(0, 1), (1, 1), (1, 4)])]
    merged = merge_domain(*parts)
    domain, root = build_domain(merged, QIS, KINDS, trees, df.iloc[:0])
    whole, _ = build_domain(domain_sketch(df, 0, QIS, KINDS, 3), QIS, KINDS, trees, df.iloc[:0])
    assert merged.n == 4 and len(merged.sample) == 3
    np.testing.assert_array_equal(domain.scales, whole.scales)
    assert domain.categories[3] == ["x", "y"] and root.hist[3].tolist() == [1, 2, 1]


def test_route_follows_the_cut_rule():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 10, (2, 500))
    from dmondrian.routing import CutTree

    tree = CutTree(qi=np.array([0, 1, -1, -1, -1]), t=np.array([4, 2, 0, 0, 0]),
                   eq=np.array([5, 2, 0, 0, 0]), tie_before=np.array([250, 0, 0, 0, 0]),
                   rank_off=np.full(5, -1), ranks=np.zeros(1, dtype=np.int64),
                   left=np.array([1, 2, -1, -1, -1]), right=np.array([4, 3, -1, -1, -1]),
                   leaf=np.array([-1, -1, 0, 1, 2]))
    pos = row_positions(0, 500)
    leaf = route(keys, tree, pos)
    first = (keys[0] <= 4) | ((keys[0] == 5) & (pos < 250))
    np.testing.assert_array_equal(leaf == 2, ~first)
    np.testing.assert_array_equal(leaf == 0, first & (keys[1] <= 2))


@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.booleans())
@settings(max_examples=40, deadline=None)
def test_route_equals_walking_each_row_down_the_tree(seed, n_cuts, ties):
    """Random trees with nominal rank cuts and relaxed tie splits (on the positions of
    a random partition): each row's leaf is the one reached by applying the cut rule
    node by node."""
    from dmondrian.routing import CutTree

    rng = np.random.default_rng(seed)
    d, n, card = 3, 300, 6
    pos = row_positions(int(rng.integers(0, 1000)), n)
    keys = rng.integers(0, card, (d, n))
    keys[0, rng.random(n) < 0.1] = K.MISSING_KEY  # missing numeric keys go right
    # Grow a random tree: split a random leaf n_cuts times.
    qi, t, eq, before, rank_off, left, right = [-1], [0], [0], [0], [-1], [-1], [-1]
    ranks = [np.zeros(1, dtype=np.int64)]
    offset = 1
    for _ in range(n_cuts):
        node = int(rng.choice([i for i in range(len(qi)) if qi[i] < 0]))
        j = int(rng.integers(0, d))
        qi[node], t[node] = j, int(rng.integers(0, card))
        eq[node] = t[node] + 1
        before[node] = int(pos[0] + rng.integers(0, n + 1)) if ties else 0
        if j == 2:  # a nominal cut compares frequency ranks, not keys
            rank_off[node] = offset
            ranks.append(rng.permutation(card).astype(np.int64))
            offset += card
        left[node], right[node] = len(qi), len(qi) + 1
        for _side in range(2):
            qi.append(-1), t.append(0), eq.append(0), before.append(0)
            rank_off.append(-1), left.append(-1), right.append(-1)
    leaf_nodes = [i for i in range(len(qi)) if qi[i] < 0]
    leaf = np.full(len(qi), -1)
    leaf[leaf_nodes] = np.arange(len(leaf_nodes))
    arr = {name: np.asarray(v) for name, v in
           dict(qi=qi, t=t, eq=eq, rank_off=rank_off, left=left, right=right).items()}
    tree = CutTree(tie_before=np.asarray(before), ranks=np.concatenate(ranks), leaf=leaf,
                   **arr)
    expected = []
    for i in range(n):
        node = 0
        while qi[node] >= 0:
            v = int(keys[qi[node], i])
            if rank_off[node] >= 0:
                v = int(tree.ranks[rank_off[node] + v])
            go_left = v <= t[node] or (v == eq[node] and pos[i] < before[node])
            node = left[node] if go_left else right[node]
        expected.append(leaf[node])
    got = route(keys, tree, pos)
    assert got.tolist() == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3000), st.integers(1, 40), st.integers(1, 8))
def test_leaf_order_is_a_lexsort_by_leaf_then_position(seed, n, n_leaves, runs):
    # Rows reach an output partition as runs in position order (one per input
    # partition, in any order); the leaf order must be the plain lexsort.
    from dmondrian.routing import leaf_order

    rng = np.random.default_rng(seed)
    positions = rng.permutation(10 * n + 1)[:n].astype(np.int64)
    cuts = np.sort(rng.integers(0, n + 1, runs - 1))
    positions = np.concatenate([np.sort(p) for p in np.split(positions, cuts)])
    leaf = rng.integers(0, n_leaves, n)
    order, ids, starts, counts = leaf_order(leaf, positions, n_leaves)
    expected = np.lexsort((positions, leaf))
    np.testing.assert_array_equal(order, expected)
    e_ids, e_starts, e_counts = np.unique(leaf[expected], return_index=True, return_counts=True)
    np.testing.assert_array_equal(ids, e_ids)
    np.testing.assert_array_equal(starts, e_starts)
    np.testing.assert_array_equal(counts, e_counts)
