"""Property-based tests of the local engine's invariants over random tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from checks import assert_valid_release
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmondrian
from dmondrian import Hierarchy

EDUCATION = ["Preschool", "HS-grad", "Bachelors", "Masters", "Doctorate"]
JOBS = ["Sales", "Tech", "Farming", "Clerical", "Armed-Forces"]
JOB_TREE = Hierarchy.from_lines([
    "Sales;White-collar;*", "Clerical;White-collar;*", "Tech;Skilled;*",
    "Farming;Manual;*", "Armed-Forces;Other;*",
])


@st.composite
def tables(draw, min_rows=1, max_rows=120):
    """Mixed-kind tables with heavy ties, negatives, floats and missing values."""
    n = draw(st.integers(min_rows, max_rows))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    distinct = draw(st.sampled_from([1, 2, 3, 10, 1000]))
    p_missing = draw(st.sampled_from([0.0, 0.0, 0.1, 0.6]))

    def maybe_missing(values):
        mask = rng.random(n) < p_missing
        return values, mask

    ints = rng.integers(-distinct, distinct + 1, n)
    floats, fmask = maybe_missing(np.round(rng.normal(0, 3, n), int(rng.integers(0, 4))))
    floats = np.where(fmask, np.nan, floats)
    days = rng.integers(0, max(distinct, 1), n)
    dates = pd.to_datetime("2020-01-01") + pd.to_timedelta(days, unit="D")
    dates = dates.where(~(rng.random(n) < p_missing))
    edu = pd.Categorical(rng.choice(EDUCATION, n), categories=EDUCATION, ordered=True)
    edu[rng.random(n) < p_missing] = np.nan
    jobs = rng.choice(JOBS[: max(1, min(distinct, 5))], n).astype(object)
    jobs[rng.random(n) < p_missing] = None
    tree_jobs = rng.choice(JOBS, n).astype(object)
    tree_jobs[rng.random(n) < p_missing] = None
    df = pd.DataFrame({
        "i": ints, "f": floats, "d": dates, "e": edu, "j": jobs, "h": tree_jobs,
        "payload": np.arange(n) * 7, "text": [f"r{i}" for i in range(n)],
    }, index=pd.Index(rng.permutation(n) * 3 + 1, name="rid"))
    qis = draw(st.lists(st.sampled_from(["i", "f", "d", "e", "j", "h"]), min_size=1,
                        max_size=6, unique=True))
    k = draw(st.integers(1, n))
    mode = draw(st.sampled_from(["strict", "relaxed"]))
    return df, qis, k, mode


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_every_release_holds_the_invariants(case):
    df, qis, k, mode = case
    hierarchies = {"h": JOB_TREE} if "h" in qis else None
    before = df.copy()
    out = dmondrian.anonymize(df, qis, k, mode=mode, hierarchies=hierarchies,
                              class_column="cls")
    pd.testing.assert_frame_equal(df, before)  # the input is not modified
    assert_valid_release(df, out, qis, k, hierarchies=hierarchies, class_column="cls")
    again = dmondrian.anonymize(df, qis, k, mode=mode, hierarchies=hierarchies,
                                class_column="cls")
    pd.testing.assert_frame_equal(out, again)  # deterministic


@settings(max_examples=60, deadline=None)
@given(tables(min_rows=2), st.sampled_from(["midpoint", "mean"]))
def test_numeric_summaries_are_class_constant_and_inside_the_class(case, how):
    df, qis, k, mode = case
    hierarchies = {"h": JOB_TREE} if "h" in qis else None
    out = dmondrian.anonymize(df, qis, k, mode=mode, generalization=how,
                              hierarchies=hierarchies, class_column="cls")
    assert_valid_release(df, out, qis, k, hierarchies=hierarchies, class_column="cls",
                         generalization=how)


@settings(max_examples=60, deadline=None)
@given(tables(min_rows=1))
def test_row_order_does_not_change_the_classes(case):
    """Classes depend on the data, not on where rows sit in the table."""
    df, qis, k, mode = case
    if mode == "relaxed":  # relaxed splits median ties by position, by design
        return
    hierarchies = {"h": JOB_TREE} if "h" in qis else None
    out = dmondrian.anonymize(df, qis, k, hierarchies=hierarchies)
    shuffled = df.sample(frac=1.0, random_state=1)
    out2 = dmondrian.anonymize(shuffled, qis, k, hierarchies=hierarchies)
    for q in qis:
        assert out2[q].astype(str).loc[df.index].tolist() == out[q].astype(str).tolist()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(min_rows=2), st.data())
def test_independent_leaves_cut_like_separate_tables(case, data):
    """Runs of rows given as leaves are cut exactly as each run alone would be.

    The distributed engine cuts all the leaves of an output partition in one
    call, each ``depth`` cuts below the table's root: the result must be the
    one a separate call per leaf (with ``max_depth`` reduced by that depth)
    gives, class ids following on in row order.
    """
    from dmondrian import local

    df, qis, k, mode = case
    n = len(df)
    trees = {"h": JOB_TREE.with_missing_leaf()} if "h" in qis else None
    cuts = sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=4), label="cuts"))
    starts = np.array([0, *cuts], dtype=np.int64)
    depths = np.array(data.draw(st.lists(st.integers(0, 4), min_size=len(starts),
                                         max_size=len(starts)), label="depths"))
    max_depth = data.draw(st.sampled_from([-1, 2, 6]), label="max_depth")
    whole = local.encode_table(df, qis, trees)
    scales = [qi.scale for qi in whole]
    together = local.partition(whole, local.kernel_rules(whole, k, mode=mode,
                                                          max_depth=max_depth, scales=scales),
                               leaves=np.column_stack([starts, depths]))
    ends = [*cuts, n]
    offset = 0
    for s, e, depth in zip(starts, ends, depths, strict=True):
        part_enc = local.encode_table(df.iloc[s:e], qis, trees)
        alone = local.partition(part_enc, local.kernel_rules(
            part_enc, k, mode=mode, scales=scales,
            max_depth=-1 if max_depth < 0 else max(0, max_depth - depth)))
        np.testing.assert_array_equal(together.class_of_row[s:e] - offset, alone.class_of_row)
        offset += alone.n_classes
    assert together.n_classes == offset


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tables(min_rows=2), min_size=2, max_size=4))
def test_a_reused_work_space_partitions_like_fresh_memory(cases):
    """Tables partitioned in turn in one kernel work space (as a Dask worker does) get
    the classes, statistics and sorted keys that fresh buffers give, whatever the
    previous table left in it; a smaller table reuses the memory."""
    from dmondrian import _kernel as K
    from dmondrian import local

    space = K.WorkSpace()
    for df, qis, k, mode in cases:
        trees = {"h": JOB_TREE.with_missing_leaf()} if "h" in qis else None
        encoded = local.encode_table(df, qis, trees)
        rules = local.kernel_rules(encoded, k, mode=mode)
        fresh = local.partition(encoded, rules)
        size = space._space.shape[0]
        reused = local.partition(encoded, rules, workspace=space)
        need = 2 * (len(qis) + 1) * len(df)
        assert space._space.shape[0] == (size if size >= need else need + need // 4)
        np.testing.assert_array_equal(reused.class_of_row, fresh.class_of_row)
        np.testing.assert_array_equal(reused.sorted_keys, fresh.sorted_keys)
        for a, b in zip(reused.stats, fresh.stats, strict=True):
            np.testing.assert_array_equal(a, b)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(20, 600), st.integers(1, 12), st.integers(1, 8), st.integers(0, 2**32 - 1),
       st.booleans())
def test_sorted_keys_hold_every_class_rows_keys(n, k, blocks, seed, many_rows):
    """The kernel's sorted keys are, class by class, the keys of the class's rows.

    QIs that become constant at some depth (block-wise columns, a constant, an
    all-missing one, a two-code nominal aligned with the blocks) are no longer
    moved below that depth and are written back when a class is made: what
    the classes' statistics and labels are read from must still be exact.
    """
    from dmondrian import local

    rng = np.random.default_rng(seed)
    if many_rows:
        n *= 400  # the kernel's parallel top levels start at 200,000 rows
    block = rng.integers(0, blocks, n)
    df = pd.DataFrame({
        "x": rng.integers(0, 1000, n),
        "blk": block * 10,
        "half": np.where(block % 2 == 0, "even", "odd"),
        "same": np.full(n, 7),
        "none": np.full(n, np.nan),
        "day": pd.to_datetime("2021-01-01") + pd.to_timedelta(block, unit="D"),
    })
    qis = ["x", "blk", "half", "same", "none", "day"]
    encoded = local.encode_table(df, qis)
    part = local.partition(encoded, local.kernel_rules(encoded, k))
    sizes = np.bincount(part.class_of_row)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    by_class = np.argsort(part.class_of_row, kind="stable")
    for j, qi in enumerate(encoded):
        for c in rng.choice(part.n_classes, min(part.n_classes, 200), replace=False):
            got = np.sort(part.sorted_keys[j, starts[c]:starts[c] + sizes[c]])
            want = np.sort(qi.keys[by_class[starts[c]:starts[c] + sizes[c]]])
            np.testing.assert_array_equal(got, want, err_msg=f"{qi.name}, class {c}")


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 400), st.integers(1, 50), st.sampled_from(["strict", "relaxed"]))
def test_distinct_values_split_down_to_k(n, k, mode):
    """With all-distinct values Mondrian keeps cutting: every class is < 2k rows."""
    k = min(k, n)
    df = pd.DataFrame({"x": np.arange(n, dtype=float) * 1.5 - 100})
    out = dmondrian.anonymize(df, ["x"], k, mode=mode, class_column="c")
    sizes = out.groupby("c").size()
    assert sizes.min() >= k
    assert sizes.max() < 2 * k or n < 2 * k


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), min_size=1,
                max_size=300), st.integers(-1, 2), st.data())
def test_kernel_select_finds_the_kth_smallest(values, rounds, data):
    # The kernel's median select is branch-free and three-way, and falls back
    # to a heapsort of what is left after a budget of rounds (forced here with
    # 0-2 rounds); any slip shows as a wrong order statistic.
    from dmondrian._kernel.select import quickselect_py

    a = np.asarray(values, dtype=np.int64)
    kth = data.draw(st.integers(0, len(a) - 1))
    work = a.copy()
    assert quickselect_py(work, kth, rounds) == np.sort(a)[kth]
    np.testing.assert_array_equal(np.sort(work), np.sort(a))


@pytest.mark.parametrize("shape", ["sorted", "reversed", "organ-pipe", "sawtooth"])
def test_kernel_select_on_runs(shape):
    # Runs are what real columns look like (sorted inputs, missing keys at
    # one end); every order statistic must come out right on them.
    from dmondrian._kernel.select import quickselect_py

    n = 3001
    base = np.arange(n, dtype=np.int64)
    a = {"sorted": base, "reversed": base[::-1].copy(),
         "organ-pipe": np.concatenate([base[: n // 2], base[n // 2:][::-1]]),
         "sawtooth": base % 97}[shape]
    for kth in (0, 1, n // 3, n // 2, n - 2, n - 1):
        assert quickselect_py(a.copy(), kth) == np.sort(a)[kth]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1025, 5000), st.sampled_from([3, 1000, 2**40, 2**62]),
       st.sampled_from([0.0, 0.3]), st.data())
def test_kernel_histogram_select_matches_numpy(seed, n, spread, p_missing, data):
    # Segments over 1,024 rows take the histogram path, which copies the
    # median's bucket into the other buffer's free segment: it must give
    # numpy's order statistic and counts, and write nowhere outside [s, e).
    from dmondrian import _kernel as K
    from dmondrian._kernel.select import select_py

    rng = np.random.default_rng(seed)
    s = int(rng.integers(0, 50))
    e = s + n
    row = rng.integers(-spread, spread, e + 20, dtype=np.int64)
    row[rng.random(row.shape[0]) < p_missing] = K.MISSING_KEY
    seg = row[s:e]
    present = np.sort(seg[seg != K.MISSING_KEY])
    if len(present) == 0:
        return
    kth = data.draw(st.integers(0, len(present) - 1))
    spare = np.full(row.shape[0], -7, dtype=np.int64)
    ws = rng.integers(-99, 99, (6, 4096)).astype(np.int64)
    value, less, equal = select_py(row, s, e, present[0], present[-1], kth, ws, spare)
    assert value == present[kth]
    assert (less, equal) == ((present < value).sum(), (present == value).sum())
    assert (spare[:s] == -7).all() and (spare[e:] == -7).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=300), st.integers(41, 60))
def test_kernel_frequency_ranks_match_a_stable_sort(codes, card):
    # Nominal cuts order a node's codes by frequency (ties by code) with an
    # in-place heapsort; a stable argsort of the negated counts is the reference.
    from dmondrian import _kernel as K
    from dmondrian._kernel.split import nominal_ranks_py

    row = np.asarray(codes, dtype=np.int64)
    # The kernel's work space is reused from node to node: start from garbage
    # and rank twice in the same one.
    ws = np.random.default_rng(card).integers(-9, 9, (6, max(card, 2048))).astype(np.int64)
    nominal_ranks_py(row[::-1].copy(), 0, len(row), card, ws)
    nominal_ranks_py(row, 0, len(row), card, ws)
    rank, cum = ws[K.WS_RANK, :card], ws[K.WS_CUM, :card]
    counts = np.bincount(row, minlength=card)
    order = np.argsort(-counts, kind="mergesort")
    expected = np.empty(card, dtype=np.int64)
    expected[order] = np.arange(card)
    np.testing.assert_array_equal(rank, expected)
    np.testing.assert_array_equal(cum, np.cumsum(counts[order]))

