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
import pytest
from distributed_helpers import JOB_HIERARCHY
from hypothesis import given, settings
from hypothesis import strategies as st

from dmondrian import _kernel as K
from dmondrian._dask.domain_pass import build_domain, domain_sketch, merge_domain
from dmondrian._dask.global_domain import encode_keys
from dmondrian._dask.planner import find_cut, goes_left, region_spans
from dmondrian._kernel.split import column_stats_py, find_cut_py, node_span_py, workspace
from dmondrian.encoding.qi import encode_qi
from dmondrian.kinds.hierarchy import Hierarchy
from dmondrian.local import encode_table, kernel_rules
from dmondrian.partition.routing import route, row_positions
from dmondrian.partition.sketch import merge_sketches, summarize

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


def _kernel_cut(keys, j, n, lo, hi, miss, rules, ws):
    """The kernel's ``find_cut`` on rows ``[0, n)``: ``(n_left, t, eq, need, rank)``."""
    n_left, t, eq, need, ranked = find_cut_py(keys, j, 0, n, (lo, hi, miss), rules, ws,
                                              np.empty(n, dtype=np.int64))
    return n_left, t, eq, need, ws[K.WS_RANK, :rules.cards[j] if ranked else 0].copy()


@settings(max_examples=60, deadline=None)
@given(tables(), st.integers(1, 6), st.booleans())
def test_summary_decisions_equal_kernel_decisions(df, min_size, relaxed):
    domain, root = _domain(df)
    encoded = encode_table(df, QIS, {"job": domain.hierarchies[4]}, dict(zip(QIS, KINDS,
                                                                               strict=True)))
    keys = np.ascontiguousarray(np.stack([e.keys for e in encoded]))
    np.testing.assert_array_equal(encode_keys(df, domain), keys)
    np.testing.assert_allclose(domain.scales, [e.scale for e in encoded])
    rules = kernel_rules(encoded, min_size, mode="relaxed" if relaxed else "strict")
    n = len(df)
    spans = region_spans(root, domain)
    ws = workspace(rules.cards, (rules.ip, rules.fp, rules.q))
    for j, e in enumerate(encoded):
        lo, hi, miss = column_stats_py(keys, j, 0, n, e.kernel_kind, e.card)
        expected = node_span_py(keys, j, 0, n, (lo, hi, miss), rules, ws)
        assert spans[j] == expected, (j, spans[j], expected)
        if expected <= 0:
            continue
        n_left, t, eq, need, rank = _kernel_cut(keys, j, n, lo, hi, miss, rules, ws)
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
    ``need`` rows equal to ``eq`` in row order (the kernel's ``goes_left``)."""
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
    from dmondrian.partition.cut_tree import CutTree

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
    from dmondrian.partition.cut_tree import CutTree

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
    from dmondrian.partition.routing import leaf_order

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


# -- sample sizing: one region pass plans the whole tree ---------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=1, max_size=6), st.floats(0.0, 1.0),
       st.integers(1, 300))
def test_domain_sample_is_the_smallest_priorities_below_the_rate(sizes, rate, size):
    # Whatever the partitioning, the merged sample is the `size` rows of smallest
    # priority among those below `rate`: a uniform sample of known size.
    from dmondrian.partition.routing import row_priority

    frames = [pd.DataFrame({"num": np.arange(n, dtype=np.int64)}) for n in sizes]
    parts = [domain_sketch(f, i, ["num"], ["numeric"], size, rate=rate)
             for i, f in enumerate(frames)]
    merged = merge_domain(*parts)
    prio = np.concatenate([row_priority(i, n, seed=1) for i, n in enumerate(sizes)])
    pos = np.concatenate([row_positions(i, n) for i, n in enumerate(sizes)])
    below = np.flatnonzero(prio < rate)
    expected = below[np.argsort(prio[below], kind="stable")[:size]]
    assert sorted(merged.positions.tolist()) == sorted(pos[expected].tolist())
    assert merged.n == sum(sizes) and len(merged.sample) == len(expected)


def test_sizing_samples_for_every_expected_leaf():
    from dmondrian._dask import options as O
    from dmondrian._dask.planner import PlanConfig

    at_least = O.SAMPLE_ROWS * 2 ** PlanConfig.max_levels
    small = O.sizing(None, 3_000, 5, 250, None, 64.0, 3, 4, O.SAMPLE_ROWS)
    assert (small.sample_size, small.rate, small.leaf_rows) == (at_least, 1.0, 250)
    # 100M rows in leaves of 393,667: 282 leaves of 0.9 * leaf_rows -> 2**9.
    big = O.sizing(None, 100_000_000, 100, 393_667, None, 64.0, 5, 10, O.SAMPLE_ROWS)
    assert big.sample_size == O.SAMPLE_ROWS * 2**9
    assert big.rate == pytest.approx(2 * big.sample_size / 1e8)
    # Capped at 2**MAX_SAMPLE_LEVELS leaves, and leaves of at least 2k rows.
    huge = O.sizing(None, 10**12, 100, 1_000, None, 64.0, 5, 10, O.SAMPLE_ROWS)
    assert huge.sample_size == O.SAMPLE_ROWS * 2 ** O.MAX_SAMPLE_LEVELS
    assert O.sizing(None, 10, 1, 3, None, 64.0, 1, 5, 64).leaf_rows == 10
    # Unknown size: the first partition's rows times the partitions; its bytes
    # per row set the default leaf size.
    probed = O.sizing((1_000_000, 100.0), None, 100, None, 2e9, 64.0, 5, 10, O.SAMPLE_ROWS)
    assert probed.n_estimate == 100_000_000
    assert probed.leaf_rows == O.leaf_rows_for(2e9, 100.0, 5)


def test_known_lengths_need_no_pass(tmp_path):
    import dask.dataframe as dd
    from dask import delayed

    from dmondrian._compat import known_partition_lengths

    df = pd.DataFrame({"a": np.arange(30), "b": ["x"] * 30})
    df.iloc[:12].to_parquet(tmp_path / "p0.parquet")
    df.iloc[12:].to_parquet(tmp_path / "p1.parquet")
    assert known_partition_lengths(dd.read_parquet(tmp_path)) == (12, 18)
    assert known_partition_lengths(dd.from_pandas(df, npartitions=3)) == (10, 10, 10)
    unknown = dd.from_delayed([delayed(lambda: df)()], meta=df.iloc[:0], verify_meta=False)
    assert known_partition_lengths(unknown) is None


@st.composite
def mixed_frames(draw):
    n = draw(st.integers(1, 40))
    ints = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    words = draw(st.lists(st.one_of(st.none(), st.text(max_size=9)), min_size=n, max_size=n))
    return pd.DataFrame({
        "i": np.asarray(ints, dtype=np.int64), "f": np.asarray(ints, dtype=np.float32),
        "b": np.asarray(ints) > 0, "d": pd.to_datetime(np.asarray(ints) * 86_400, unit="s"),
        "w": pd.array(words, dtype="str"),
        "c": pd.Categorical(["x", "y"] * (n // 2) + ["z"] * (n % 2)),
        "m": pd.array([None if v < 0 else v for v in ints], dtype="Int64")})


@given(mixed_frames(), st.sets(st.sampled_from(list("ifbdwcm"))))
@settings(max_examples=40, deadline=None)
def test_probe_reads_only_columns_whose_bytes_vary(df, read):
    # The probe measures the whole partition's bytes a row from the columns it must read
    # (text, categoricals, extension arrays, and ``read``) and the others' item sizes.
    from dmondrian._dask.domain_pass import fixed_width_bytes, probe_first_partition

    columns, fixed = fixed_width_bytes(df.iloc[:0], read)
    assert set(columns) >= read | {"w", "c", "m"}
    assert not set(columns) & ({"i", "f", "b", "d"} - read)
    rows, narrow = probe_first_partition(df[columns], fixed)
    assert (rows, narrow) == probe_first_partition(df)


def test_domain_pass_probe_measures_the_whole_row(client, tmp_path, monkeypatch):
    # On Parquet input, the pass measures the same row size as a read of every column.
    import dask.dataframe as dd
    from distributed_helpers import CENSUS_QIS, make_census

    from dmondrian import distributed as D

    df = make_census(4_000, seed=3)
    for i in range(2):
        df.iloc[i * 2_000:(i + 1) * 2_000].to_parquet(tmp_path / f"p{i}.parquet")
    ddf = dd.read_parquet(tmp_path)
    first = ddf.partitions[0].compute()
    seen = []
    real = D.run_domain_pass
    monkeypatch.setattr(D, "run_domain_pass",
                        lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1])
    D.plan(ddf, CENSUS_QIS, 10, client=client, allow_unique=["person_id"])
    sizing = seen[0][3]
    assert sizing.measured
    assert sizing.row_bytes == pytest.approx(first.memory_usage(deep=True).sum() / len(first))


@pytest.mark.parametrize("known", [True, False])
def test_one_region_pass_plans_a_deep_tree(client, known):
    # 100,000 rows in leaves of at most 500: about 2**8 leaves, two levels more
    # than the old fixed sample (256 * 2**6 rows here) supported, so it took
    # three passes. Sampled for 2**8 leaves, one region pass plans them all and
    # its exact counts confirm them, whether the table's size is known or
    # estimated from its first partition. (256 sample rows per leaf estimate
    # a leaf's size within a few %; far fewer would leave some above 500.)
    import dask.dataframe as dd
    from dask import delayed
    from distributed_helpers import CENSUS_QIS, make_census, row_ids

    from dmondrian import distributed as D

    df = make_census(100_000, seed=8)
    if known:
        ddf = dd.from_pandas(df, npartitions=4)
    else:
        pieces = [delayed(lambda f: f, pure=True)(df.iloc[i:i + 25_000])
                  for i in range(0, len(df), 25_000)]
        ddf = dd.from_delayed(pieces, meta=df.iloc[:0], verify_meta=False)
    top = D.plan(ddf, CENSUS_QIS, 10, leaf_rows=500, client=client, sample_rows=256,
                 allow_unique=row_ids(ddf))
    assert top.passes == 2
    assert top.n_leaves >= 2**7 and top.leaf_counts.sum() == len(df)
    assert top.leaf_counts.max() <= 500 and top.leaf_counts.min() >= 10


# -- cheaper passes: same results --------------------------------------------------------------


def test_row_priority_is_splitmix_of_the_position():
    from dmondrian.partition.routing import row_priority

    def reference(partition, n, seed):
        with np.errstate(over="ignore"):
            x = np.arange(n, dtype=np.uint64) ^ (np.uint64(partition << 32) ^ np.uint64(seed))
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            x = (x ^ (x >> np.uint64(31))) + np.uint64(0x9E3779B97F4A7C15)
        return (x >> np.uint64(11)).astype(np.float64) / 2.0**53

    for partition, n, seed in [(0, 1000, 0), (7, 513, 1), (2**20, 64, 0), (3, 0, 1)]:
        np.testing.assert_array_equal(row_priority(partition, n, seed), reference(partition, n,
                                                                                   seed))


@pytest.mark.parametrize("dtype", ["str", "object", "string[python]", "large_string[pyarrow]"])
def test_nominal_keys_whatever_the_string_storage(dtype):
    import pyarrow as pa

    from dmondrian._dask.global_domain import GlobalDomain
    from dmondrian.errors import UnsupportedDtypeError

    if dtype == "large_string[pyarrow]":
        dtype = pd.ArrowDtype(pa.large_string())
    dom = GlobalDomain(["c"], ["nominal"], np.array([K.KIND_NOMINAL]), np.array([2.0]),
                       np.array([4]), [["", "a", "b"]], [None], 6)
    col = pd.Series(["b", None, "", "a", "b", None], dtype=dtype, name="c")
    assert encode_keys(col.to_frame(), dom).tolist() == [[2, 3, 0, 1, 2, 3]]
    with pytest.raises(UnsupportedDtypeError, match="'zz'"):
        encode_keys(pd.Series(["a", None, "zz"], dtype=dtype, name="c").to_frame(), dom)


# -- per-row costs: the fused and in-place paths give the plain results ------------------------


@st.composite
def key_tables(draw):
    """Partitions as workers see them: numpy ints (int64 extremes included), datetimes
    with NaT, ordinal and nominal columns with missing values, string storage of
    every kind, Arrow columns in several chunks and sliced."""
    n = draw(st.integers(0, 80))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ints = rng.choice(np.array([np.iinfo(np.int64).min, -3, 0, 5, 2**62], dtype=np.int64), n)
    dates = pd.Series(pd.to_datetime(rng.integers(0, 10**6, n), unit="s")).astype("M8[ns]")
    dates[rng.random(n) < 0.2] = pd.NaT
    dates[rng.random(n) < 0.05] = pd.Timestamp.max  # its value is the missing key
    ords = pd.Categorical(rng.choice(list("abc") + [None], n),
                          categories=draw(st.sampled_from([list("abc"), list("cb") + ["a"],
                                                           list("ab") + ["c"]])),
                          ordered=True)
    noms = pd.Series(rng.choice(["x", "y", "", "zz", None], n), dtype=object)
    storage = draw(st.sampled_from(["object", "str", "category", "chunked", "sliced"]))
    if storage == "category":
        noms = noms.astype("category")
    elif storage in ("chunked", "sliced"):
        import pyarrow as pa

        cut = n // 2
        chunks = [pa.array(noms[:cut].tolist(), type=pa.large_string()),
                  pa.array([None, *noms[cut:].tolist()], type=pa.large_string()).slice(1)]
        arr = pa.chunked_array(chunks, type=pa.large_string())
        if storage == "sliced":
            arr = pa.chunked_array([pa.array(["x", *noms.tolist(), "y"],
                                             type=pa.large_string()).slice(1, n)])
        noms = pd.Series(pd.arrays.ArrowExtensionArray(arr))
    elif storage == "str":
        noms = noms.astype("str")
    return pd.DataFrame({"i": ints, "d": dates.to_numpy(), "o": ords, "n": noms.to_numpy()
                         if storage == "object" else noms})


def _plain_keys(df, dom):
    """Keys by the plain route: encode_qi per column, global codes looked up one by one."""
    out = []
    for j, (name, kind) in enumerate(zip(dom.names, dom.kinds, strict=True)):
        s = df[name]
        if kind in ("numeric", "datetime"):
            out.append(encode_qi(s, kind=kind).keys)
        elif kind == "ordinal":
            cats = dom.categories[j]
            out.append([K.MISSING_KEY if pd.isna(v) else cats.index(v) for v in s])
        else:
            cats = dom.categories[j]
            out.append([dom.slots[j] - 1 if pd.isna(v) else cats.index(v) for v in s])
    return np.asarray(out, dtype=np.int64).reshape(len(out), len(df))


@given(key_tables())
@settings(max_examples=80, deadline=None)
def test_encode_keys_in_place_equals_the_plain_encoding(df):
    from dmondrian._dask.global_domain import GlobalDomain

    dom = GlobalDomain(["i", "d", "o", "n"], ["numeric", "datetime", "ordinal", "nominal"],
                       np.array([K.KIND_INT, K.KIND_INT, K.KIND_ORDINAL, K.KIND_NOMINAL]),
                       np.ones(4), np.array([0, 0, 4, 5]),
                       [None, None, list("abc"), ["", "x", "y", "zz"]], [None] * 4, len(df))
    np.testing.assert_array_equal(encode_keys(df, dom), _plain_keys(df, dom))


def test_encode_keys_still_refuses_the_reserved_key_and_unseen_values():
    from dmondrian._dask.global_domain import GlobalDomain
    from dmondrian.errors import InvalidValueError, UnsupportedDtypeError

    dom = GlobalDomain(["i", "o"], ["numeric", "ordinal"], np.array([K.KIND_INT, K.KIND_ORDINAL]),
                       np.ones(2), np.array([0, 3]), [None, ["a", "b"]], [None, None], 3)
    ok = pd.DataFrame({"i": [1, 2, 3], "o": pd.Categorical(["b", None, "a"], ordered=True)})
    assert encode_keys(ok, dom).tolist() == [[1, 2, 3], [1, K.MISSING_KEY, 0]]
    with pytest.raises(InvalidValueError, match="'i'"):
        encode_keys(ok.assign(i=[1, K.MISSING_KEY, 3]), dom)
    with pytest.raises(UnsupportedDtypeError, match="'c'"):
        encode_keys(ok.assign(o=pd.Categorical(["a", "c", "b"], ordered=True)), dom)


@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.booleans(), st.integers(1, 8))
@settings(max_examples=40, deadline=None)
def test_route_to_partitions_is_route_then_the_partition_lookup(seed, n_cuts, ties, n_parts):
    from dmondrian.partition.cut_tree import CutTree
    from dmondrian.partition.routing import route_to_partitions

    rng = np.random.default_rng(seed)
    d, n = 2, 700  # more rows than one routing block
    pos = row_positions(int(rng.integers(0, 50)), n)
    keys = rng.integers(0, 5, (d, n))
    qi, t, eq, before, left, right = [-1], [0], [0], [0], [-1], [-1]
    for _ in range(n_cuts):
        node = int(rng.choice([i for i in range(len(qi)) if qi[i] < 0]))
        qi[node], t[node] = int(rng.integers(0, d)), int(rng.integers(0, 5))
        eq[node] = t[node] + 1
        before[node] = int(pos[0] + rng.integers(0, n + 1)) if ties else 0
        left[node], right[node] = len(qi), len(qi) + 1
        for _side in range(2):
            qi.append(-1), t.append(0), eq.append(0), before.append(0)
            left.append(-1), right.append(-1)
    leaf = np.full(len(qi), -1)
    leaf_nodes = [i for i in range(len(qi)) if qi[i] < 0]
    leaf[leaf_nodes] = np.arange(len(leaf_nodes))
    tree = CutTree(np.asarray(qi), np.asarray(t), np.asarray(eq), np.asarray(before),
                   np.full(len(qi), -1), np.zeros(1, dtype=np.int64), np.asarray(left),
                   np.asarray(right), leaf)
    partition_of_leaf = np.sort(rng.integers(0, n_parts, len(leaf_nodes)))
    dtype = np.min_scalar_type(-len(leaf_nodes))
    got_leaf, got_part = route_to_partitions(keys, tree, pos, partition_of_leaf, dtype)
    expected = route(keys, tree, pos)
    assert got_leaf.dtype == dtype and got_part.dtype == np.int64
    np.testing.assert_array_equal(got_leaf, expected)
    np.testing.assert_array_equal(got_part, partition_of_leaf[expected])


def _plain_domain_sketch(df, partition, qis, kinds, sample_size, rate):
    """The domain sketch by plain pandas and numpy passes (the definition)."""
    from dmondrian.partition.routing import row_priority

    d = len(qis)
    lo = np.full(d, K.MISSING_KEY, dtype=np.int64)
    hi = np.full(d, np.iinfo(np.int64).min, dtype=np.int64)
    missing = np.zeros(d, dtype=np.int64)
    values = {}
    for j, (q, kind) in enumerate(zip(qis, kinds, strict=True)):
        s = df[q]
        if kind in ("nominal", "ordinal"):
            missing[j] = int(s.isna().sum())
            vc = s.value_counts(dropna=True, sort=False)
            if isinstance(s.dtype, pd.CategoricalDtype):
                vc = vc[vc > 0]
            vc.index = pd.Index(list(vc.index), dtype=object)
            values[j] = vc.astype(np.int64)
        else:
            keys = encode_qi(s, kind=kind).keys
            present = keys[keys != K.MISSING_KEY]
            missing[j] = len(keys) - len(present)
            if present.size:
                lo[j], hi[j] = present.min(), present.max()
    prio = row_priority(partition, len(df), seed=1)
    take = np.flatnonzero(prio < rate)
    if take.shape[0] > sample_size:
        take = take[np.argpartition(prio[take], sample_size)[:sample_size]]
    return lo, hi, missing, values, take, prio[take], row_positions(partition, len(df))[take]


@given(key_tables(), st.integers(0, 9), st.floats(0.0, 1.0), st.integers(1, 60))
@settings(max_examples=80, deadline=None)
def test_domain_sketch_equals_the_plain_passes(df, partition, rate, size):
    qis, kinds = ["i", "d", "o", "n"], ["numeric", "datetime", "ordinal", "nominal"]
    sk = domain_sketch(df, partition, qis, kinds, size, rate=rate)
    lo, hi, missing, values, take, prio, pos = _plain_domain_sketch(df, partition, qis, kinds,
                                                                    size, rate)
    for got, want in [(sk.lo, lo), (sk.hi, hi), (sk.missing, missing), (sk.priority, prio),
                      (sk.positions, pos)]:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    for j in values:
        pd.testing.assert_series_equal(sk.values[j], values[j])
        assert list(map(type, sk.values[j].index)) == list(map(type, values[j].index))
    pd.testing.assert_frame_equal(sk.sample, df[qis].iloc[take].reset_index(drop=True))


@given(st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "", "ccc", "é"])), max_size=60),
       st.integers(0, 40), st.integers(1, 3), st.booleans())
@settings(max_examples=80, deadline=None)
def test_arrow_string_counts_are_value_counts(values, prefix, n_chunks, large):
    # Whatever the prefix whose values are looked up first (values first seen later
    # are counted apart; a prefix of many values falls back): pandas' counts, in
    # order of first appearance.
    from unittest import mock

    import pyarrow as pa

    from dmondrian._dask import domain_pass as domain

    kind = pa.large_string() if large else pa.string()
    cuts = np.linspace(0, len(values), n_chunks + 1).astype(int)
    arr = pa.chunked_array([pa.array(values[a:b], type=kind) for a, b in zip(cuts, cuts[1:])],
                           type=kind)
    s = pd.Series(pd.arrays.ArrowExtensionArray(arr))
    with mock.patch.object(domain, "_PREFIX_ROWS", prefix):
        n_missing, got = domain._value_counts(s)
    want = s.value_counts(dropna=True, sort=False)
    want.index = pd.Index(list(want.index), dtype=object)
    assert n_missing == sum(v is None for v in values)
    pd.testing.assert_series_equal(got, want.astype(np.int64))


@given(st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "", "é", "x" * 40,
                                                      "x" * 39 + "y", "Female", "Femal",
                                                      "Females", "x" * 8, "x" * 9])),
                max_size=60),
       st.integers(0, 9), st.booleans(), st.booleans())
@settings(max_examples=80, deadline=None)
def test_string_lookup_kernel_is_a_dictionary_lookup(values, start, large, short):
    # Each row's index among a few known values (the empty string, a multibyte
    # one, one longer than the inlined comparison; or values of at most 8 bytes,
    # compared as words) as a dict gives it, from an
    # Arrow array sliced at any offset: codes, counts, and the first other value.
    import pyarrow as pa

    from dmondrian._kernel.strings import lookup_strings, value_table
    from dmondrian.kinds.keys import arrow_string_chunks

    kind = pa.large_string() if large else pa.string()
    arr = pa.array([None, "pad"] * start + values, type=kind).slice(2 * start)
    known = ["a", "", "é", "Female", "x" * 8] if short else ["a", "", "é", "x" * 40]
    index = {v: j for j, v in enumerate(known)}
    want = [99 if v is None else index.get(v, -1) for v in values]
    first = next((i for i, c in enumerate(want) if c < 0), -1)
    vdata, voff = value_table(known)
    none = np.zeros(0, dtype=np.int64)
    out = np.full(len(values), -7, dtype=np.int64)
    counts = np.zeros(len(known), dtype=np.int64)
    got = []
    for offsets, data, bits, bit_offset, chunk in arrow_string_chunks(arr):
        assert len(chunk) == len(values)
        got.append(lookup_strings(offsets, data, bits, bit_offset, vdata, voff, 99, out, none))
        got.append(lookup_strings(offsets, data, bits, bit_offset, vdata, voff, 99, none,
                                  counts))
    assert got == ([first, first] if values else [])
    assert out.tolist() == want
    assert counts.tolist() == [sum(v == k for v in values) for k in known]
