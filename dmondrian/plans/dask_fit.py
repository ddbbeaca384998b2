"""Fit a plan on a dask DataFrame: the Dask engine's top cuts, the local engine's leaves.

1. The Dask engine's top phase (:func:`dmondrian.distributed.plan`) cuts the
   table, at the fitted class size, into leaves that fit in memory. A cut is kept only if exact
   counts show both children pass: k rows, or k distinct entities with ``entity=``, and l and t
   (over (entity, value) pairs with an entity).
2. Its shuffle moves every leaf's rows to one task (only the columns a fit reads: the QIs, the
   sensitive and the entity column; no pass reads any other, whatever the table's width), which runs
   the local engine on the leaf (as the Dask engine's release does: global encodings and scales, the
   same constraints, t against the whole table's distribution) and rebuilds the leaf's cut tree
   (:func:`.tree.build_tree`). A task returns that small tree and the leaf's totals, never rows.
3. The client stitches the top cuts and the leaves' trees into one
   :class:`~.tree.PlanTree`: a top node's bounds, counts and codes are its
   leaves' together (an inner node is never trimmed, :func:`.tree.build_tree`).

The plan holds the global encodings, so it releases a pandas or a dask table, and the same table
gets the same release on either engine (:meth:`.fitted.FittedPlan.transform`). A top cut the kernel
would not make (its children short of people, or of l or t) is undone, and the local engine cuts
that leaf from the same node as an in-memory fit: where the top phase's sampled cuts are the
kernel's, the plan is the in-memory one, constraints and all. Strict cuts only: a relaxed cut splits
ties by input position, which the shuffle does not keep.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._kernel.constants import KIND_NOMINAL
from ..errors import ParameterError
from ..options import plan_fit_options
from ..partition.cut_tree import CutTree
from ..privacy.constraints import refuse_empty
from .sizing import PLAN_OPTIONS, fit_k, fit_trim
from .tree import PlanTree, abut_cut_sides, build_tree, node_arrays

__all__ = ["fit_plan_dask"]


@dataclasses.dataclass
class LeafFit:
    """What a task returns of one top leaf: its tree, and its root's totals untrimmed."""

    tree: PlanTree
    root: tuple


def _leaf_columns(df, top, order):
    """The sensitive and entity columns of a shuffled partition, rows in ``order``
    (None when the leaves count rows alone)."""
    from .._dask.columns import carried

    wanted = [c for c in (top.options.sensitive, top.options.entity) if c is not None]
    if not wanted:
        return None
    _, internal, names = carried(top.options.qis, top.columns, top.travelling)
    shipped = dict(zip(names, internal, strict=True))
    frame = df[[shipped[c] for c in wanted]].take(order)
    frame.columns = wanted
    return frame


def _fit_leaves(df, top, k_fit, trim, edges, whole, lift_cost=None) -> list:
    """The local engine and :func:`.tree.build_tree` on every leaf of one output partition.

    Each leaf is cut under the constraints of the Dask engine's local runs
    (:func:`dmondrian._dask.leaves.leaf_privacy`: people with ``entity``,
    l and t against the whole table's distribution).
    """
    from .._dask.columns import LEAF, key_names
    from .._dask.leaves import leaf_privacy
    from .._dask.shipped_keys import gather_keys
    from ..local import kernel_rules, partition
    from ..partition.routing import leaf_order

    positions = df.index.to_numpy(dtype=np.int64)
    order, ids, starts, _ = leaf_order(df[LEAF].to_numpy(dtype=np.int64), positions, top.n_leaves)
    d = top.domain.d
    keys = np.empty((d, len(order)), dtype=np.int64)
    for j, (name, offset, step) in enumerate(zip(key_names(d), top.key_offsets,
                                                 top.key_steps, strict=True)):
        gather_keys(df[name].to_numpy(), order, keys[j], offset, step)
    columns = _leaf_columns(df, top, order)
    bounds = np.append(starts, len(order))
    out = []
    for i, leaf in enumerate(ids.tolist()):
        rows = keys[:, bounds[i]:bounds[i + 1]]
        encoded = [dataclasses.replace(enc, keys=np.ascontiguousarray(rows[j]))
                   for j, enc in enumerate(top.encodings)]
        privacy = (None if columns is None
                   else leaf_privacy(columns.iloc[bounds[i]:bounds[i + 1]], top))
        rules = kernel_rules(encoded, k_fit, mode="strict", objective=top.options.objective,
                             max_depth=top.options.max_depth, scales=top.domain.scales,
                             privacy=privacy)
        part = partition(encoded, rules,
                         leaves=np.asarray([[0, int(top.leaf_depths[leaf])]], dtype=np.int64))
        untrimmed = build_tree(part.stats, part.sorted_keys, part.class_of_row, rules.kinds,
                               rules.cards, False)
        # One leaf is the whole table: its root keeps every value, as in memory.
        tree = untrimmed if trim == 1 else build_tree(
            part.stats, part.sorted_keys, part.class_of_row, rules.kinds, rules.cards, False,
            trim, edges=None if whole else edges, lift_cost=lift_cost)
        t = untrimmed
        root = (t.count[0], t.lo[0], t.hi[0], t.missing[0], t.total[0], t.present[0],
                {j: t.node_codes(j, 0) for j in t.codes})
        out.append((leaf, LeafFit(tree, root)))
    return out


def _stitch(cuts: CutTree, leaves: dict, d: int, kinds, cards) -> PlanTree:
    """One PlanTree from the top cuts and every top leaf's fit (see the module docstring)."""
    qi, t, eq, tie, rank_off, left, right = ([] for _ in range(7))
    parent, count, lo, hi, missing, total, present = ([] for _ in range(7))
    packed = {j: [] for j in range(d) if kinds[j] == KIND_NOMINAL}
    ranks, rank_len = [np.zeros(1, dtype=np.int64)], 1
    top_nodes = []  # every top internal node, in depth-first order
    fits = {}
    # Where each top cut's ranks end in the top tree's rank array.
    starts = np.unique(cuts.rank_off[cuts.rank_off >= 0])
    rank_end = dict(zip(starts.tolist(), np.append(starts[1:], cuts.ranks.shape[0]).tolist(),
                        strict=False))

    def add_top(i, par):
        nonlocal rank_len
        node = len(qi)
        parent.append(par)
        if cuts.qi[i] < 0:
            return add_leaf(leaves[int(cuts.leaf[i])], par)
        qi.append(int(cuts.qi[i]))
        t.append(int(cuts.t[i]))
        eq.append(int(cuts.eq[i]))
        tie.append(int(cuts.tie_before[i]))
        if cuts.rank_off[i] >= 0:
            start = int(cuts.rank_off[i])
            rank_off.append(rank_len)
            ranks.append(cuts.ranks[start:rank_end[start]])
            rank_len += rank_end[start] - start
        else:
            rank_off.append(-1)
        left.append(-1)
        right.append(-1)
        for a in (count, lo, hi, missing, total, present):
            a.append(None)
        top_nodes.append(node)
        left[node] = len(qi)
        add_top(int(cuts.left[i]), node)
        right[node] = len(qi)
        add_top(int(cuts.right[i]), node)
        return node

    def add_leaf(fit: LeafFit, par):
        nonlocal rank_len
        sub = fit.tree
        base = len(qi)
        c = sub.cuts
        inner = c.qi >= 0
        qi.extend(c.qi.tolist())
        t.extend(c.t.tolist())
        eq.extend(c.eq.tolist())
        tie.extend(c.tie_before.tolist())
        rank_off.extend(np.where(c.rank_off >= 0, c.rank_off - 1 + rank_len, -1).tolist())
        ranks.append(c.ranks[1:])
        rank_len += c.ranks.shape[0] - 1
        left.extend(np.where(inner, c.left + base, -1).tolist())
        right.extend(np.where(inner, c.right + base, -1).tolist())
        parent.extend((sub.parent[1:] + base).tolist())
        for a, v in ((count, sub.count), (lo, sub.lo), (hi, sub.hi), (missing, sub.missing),
                     (total, sub.total), (present, sub.present)):
            a.extend(list(v))
        for j in packed:
            codes, card = sub.codes[j]
            packed[j].append(codes + base * card)
        fits[base] = fit
        return base

    add_top(0, -1)
    n = len(qi)
    count_a, lo_a, hi_a, miss_a, total_a, present_a = node_arrays(n, d)
    for i in range(n):
        if count[i] is not None:
            count_a[i], lo_a[i], hi_a[i] = count[i], lo[i], hi[i]
            miss_a[i], total_a[i], present_a[i] = missing[i], total[i], present[i]
    left_a, right_a = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
    # Top nodes: their leaves' totals together, children first (reverse depth-first
    # order); inner nodes are not trimmed.
    agg = {base: fit.root for base, fit in fits.items()}
    for node in reversed(top_nodes):
        (ca, la, ha, ma, ta, pa, sa) = agg[int(left_a[node])]
        (cb, lb, hb, mb, tb, pb, sb) = agg[int(right_a[node])]
        agg[node] = (ca + cb, np.minimum(la, lb), np.maximum(ha, hb), ma | mb, ta + tb,
                     pa + pb, {j: np.union1d(sa[j], sb[j]) for j in sa})
    for node in top_nodes:
        c, lo_n, hi_n, m, tt, p, codes = agg[node]
        count_a[node], lo_a[node], hi_a[node] = c, lo_n, hi_n
        miss_a[node], total_a[node], present_a[node] = m, tt, p
        for j in packed:
            packed[j].append(node * int(cards[j]) + np.asarray(codes[j], dtype=np.int64))
    leaf = np.where(np.asarray(qi) < 0, np.arange(n), -1)
    cut_tree = CutTree(np.asarray(qi, dtype=np.int64), np.asarray(t, dtype=np.int64),
                       np.asarray(eq, dtype=np.int64), np.asarray(tie, dtype=np.int64),
                       np.asarray(rank_off, dtype=np.int64), np.concatenate(ranks),
                       left_a, right_a, leaf)
    codes = {j: (np.sort(np.concatenate(parts)).astype(np.int64), int(cards[j]))
             for j, parts in packed.items()}
    return PlanTree(cut_tree, np.asarray(parent, dtype=np.int64), count_a, lo_a, hi_a, miss_a,
                    total_a, present_a, codes)


def fit_plan_dask(ddf, quasi_identifiers, k: int, *, batch_rows: int | None = None, client=None,
                  progress=None, lift_cost: float | None = None, **options) -> dict:
    """Fit a plan on a dask DataFrame (see the module docstring): what
    :func:`dmondrian.plans.fit_plan` does with a dask DataFrame.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The table to learn the partition from.
    quasi_identifiers, k, batch_rows, lift_cost
        As in :func:`dmondrian.plans.fit_plan` (``lift_cost``: None here
        trims every leaf at the fixed threshold).
    client : distributed.Client, optional
        The cluster (default: as :func:`dmondrian.distributed.anonymize` finds one).
    progress : bool, optional
        Progress bars for the passes.
    **options
        ``mode`` ("strict" only), ``objective``, ``max_depth``, ``generalization``, ``hierarchies``,
        ``qi_kinds``, ``class_column``, ``identifiers``, ``allow_unique``, ``entity``, ``l``,
        ``l_kind``, ``c``, ``t``, ``sensitive``, and the Dask engine's ``leaf_rows``. The top phase
        keeps a cut only if its children pass k (in people, with ``entity``) and l and t on exact
        counts, as the Dask engine's does; each leaf is cut under the same constraints. The options
        :func:`~dmondrian.plans.fit_plan` refuses are refused.

    Returns
    -------
    dict
        The keywords of :class:`dmondrian.plans.FittedPlan` (which
        :func:`dmondrian.plans.fit_plan` makes of them).
    """
    from .. import distributed
    from .._dask.cluster import release, resolve_client, run
    from .._dask.graph import constant, partitions
    from .._dask.shuffle import distributed_shuffle_method, route_and_shuffle
    from ..privacy.constraints import KAnonymity

    options = plan_fit_options(options)
    if options.get("mode", "strict") != "strict":
        raise ParameterError("mode", "a plan fitted on a dask DataFrame cuts strictly (a "
                                     "relaxed cut splits ties by input position, which the "
                                     "shuffle does not keep): use mode='strict'")
    if batch_rows is not None and (not isinstance(batch_rows, (int, np.integer)) or batch_rows < 1):
        raise ParameterError("batch_rows", f"batch_rows must be a positive integer, got "
                                           f"{batch_rows!r}")
    cluster_client, owned = resolve_client(client)
    try:
        k_fit, trim = k, 1
        if batch_rows is not None:
            k_fit, trim = _fit_sizes(cluster_client, ddf, quasi_identifiers, k, batch_rows,
                                     options, progress)
        # A fit releases nothing: the tables transformed through it are checked.
        top = distributed.plan(ddf, quasi_identifiers, k_fit, client=cluster_client,
                               progress=progress, _check_identifying=False,
                               _read_needed=True, **options)
        opts = top.options
        d = top.domain.d
        edges = (np.asarray(top.domain.key_lo, dtype=np.int64),
                 np.asarray(top.domain.key_hi, dtype=np.int64))

        # The columns the top phase read (the QIs, sensitive and entity): whole rows
        # of a wide table would cross the network for nothing.
        shuffled, _ = route_and_shuffle(ddf[top.columns], top, distributed_shuffle_method())
        whole = top.n_leaves == 1
        from dask import delayed

        fit = delayed(_fit_leaves, pure=True)
        spec = constant(top, "plan")
        cost = lift_cost if trim > 1 else None
        parts = [fit(p, spec, k_fit, trim, edges, whole, cost) for p in partitions(shuffled)]
        pieces = run(cluster_client, parts, progress, "pass: fit every leaf")
    finally:
        release(owned)
    leaves = {leaf: piece for part in pieces for leaf, piece in part}
    kinds = np.asarray(top.domain.kernel_kinds, dtype=np.int64)
    some = next(iter(leaves.values())).tree
    cards = np.asarray([some.codes[j][1] if j in some.codes else 0 for j in range(d)],
                       dtype=np.int64)
    tree = _stitch(top.tree, leaves, d, kinds, cards)
    if batch_rows is not None:
        abut_cut_sides(tree, top.encodings)
    kept = {name: options.get(name) for name in PLAN_OPTIONS}
    kept.update(mode="strict", objective=opts.objective, generalization=opts.generalization,
                max_depth=None if opts.max_depth < 0 else opts.max_depth, sensitive=opts.sensitive,
                identifiers=list(opts.identifiers), allow_unique=list(opts.allow_unique),
                class_column=opts.class_column, l_kind=options.get("l_kind") or "distinct",
                entity=opts.entity)
    # The sensitive values as the fitted table holds them: with an entity, the counts
    # of its (entity, value) pairs (t's distribution), as a fit in memory keeps them.
    sensitive = None if top.sensitive is None else top.sensitive.values
    return {"qis": opts.qis, "k": k, "fit_k_": k_fit, "batch_rows": batch_rows,
            "n_fit": top.domain.n_rows, "options": kept, "encodings": list(top.encodings),
            "tree": tree, "sensitive": sensitive,
            "constraints": [c for c in opts.constraints if not isinstance(c, KAnonymity)],
            "trim": trim, "lift_cost": lift_cost if trim > 1 else None}


def _fit_sizes(client, ddf, qis, k, batch_rows, options, progress) -> tuple:
    """``(fit_k, trim)`` for ``batch_rows``, from one pass counting the rows (and, with
    an entity, its distinct values: :func:`.sizing.fit_k` then counts people)."""
    from .._dask.cluster import run
    from .._dask.columns import read_columns
    from ..encoding.validation import check_options
    from ..options import ANONYMIZE

    # The options checked now, before a pass over the table, and the columns read as
    # every pass of the fit reads them: a partition's length reads all it is given.
    opts = check_options(ddf.columns, qis, k, index_name=ddf._meta.index.name,
                         **{name: v for name, v in options.items() if name in ANONYMIZE})
    entity = opts.entity
    jobs = [ddf[read_columns(ddf.columns, opts)].map_partitions(len).sum()]
    if entity is not None:
        # Exact: the values are matched (hash-partitioned), not estimated.
        jobs.append(ddf[entity].nunique())
    counts = run(client, jobs, progress, "pass: rows" + (" and people" if entity else ""))
    n_rows = int(counts[0])
    refuse_empty(n_rows, "fit")
    n_entities = int(counts[1]) if len(counts) > 1 else None
    return fit_k(k, n_rows, batch_rows, n_entities), fit_trim(n_rows, batch_rows)
