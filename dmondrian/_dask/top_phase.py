"""Step 2, the top phase: cut the table from summaries until every region fits a leaf.

The client plans cuts on a region's summary (:mod:`.planner`), several levels a pass; the next pass
routes every row through the candidate tree and returns exact counts and a fresh sample per
candidate region; a cut the exact counts disallow is undone. Only summaries reach the client, never
rows. See docs/design.md, section "Step 2: the top phase".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..partition.cut_tree import CutTree, Node, flatten, leaf_nodes, subtree_count
from ..partition.routing import route, row_positions, row_priority
from ..partition.sketch import Summary, merge_sketches, summarize
from .cluster import run
from .global_domain import GlobalDomain, encode_keys
from .graph import column_partitions, constant, tree_reduce
from .options import DaskOptions, expected_levels
from .planner import PlanConfig, PlanNode, plan_subtree, sizes_allowed

__all__ = ["MAX_ROUNDS", "cut_regions", "region_pass", "region_sketch", "graft",
           "keep_allowed_cuts"]

#: Most region passes: a safety bound (a pass cuts every open region at least once).
MAX_ROUNDS = 64


def cut_regions(client, ddf, opts: DaskOptions, domain: GlobalDomain, root: Summary,
                cfg: PlanConfig, progress, defer_counts: bool, lap):
    """Cut the table until every region fits ``cfg.leaf_rows`` or no allowed cut divides it.

    ``lap(label)`` records the wall time of each pass. With ``defer_counts`` (True, or a function of
    the candidate nodes that says whether), a tree the domain pass's sample planned whole is
    returned uncounted: the shuffle pass counts it (:mod:`.counting_write`).

    Returns
    -------
    nodes : list of Node
    passes : int
        Passes made, the domain pass included.
    counted : bool
        Whether the leaves' counts are exact.
    """
    nodes = [Node(0, root.n, root)]

    def needs_cut(j):
        nd = nodes[j]
        return (nd.n > cfg.leaf_rows and nd.n >= 2 * opts.k and not nd.done
                and (opts.max_depth < 0 or nd.depth < opts.max_depth))

    passes, open_ = 1, [j for j in [0] if needs_cut(j)]
    counted = True
    while open_ and passes <= MAX_ROUNDS:
        grafted = []
        for j in open_:
            sub = plan_subtree(nodes[j].summary, domain, cfg, nodes[j].depth, nodes[j].banned)
            if sub.cut is None:
                nodes[j].done = True
            else:
                graft(nodes, j, sub)
                grafted.append(j)
        if not grafted:
            break
        # With an entity, only a writer defers (it can count again on a
        # Recount; the lazy result's test of certainty reads rows, not
        # people), and not with noise, whose shares are dealt per leaf.
        if (defer_counts and passes == 1 and opts.sensitive is None
                and (opts.entity is None or (defer_counts is True and not opts.noise))
                and not any(needs_cut(j) for j in leaf_nodes(nodes))
                and (defer_counts is True or defer_counts(nodes))):
            # The domain sample planned the whole tree: its exact counts can
            # come from the shuffle pass itself (the plan is then uncounted).
            counted = False
            break
        leaves = leaf_nodes(nodes)
        passes += 1
        label = f"pass {passes}: cut {len(grafted)} region(s)"
        sketch = region_pass(client, ddf, opts, domain, nodes, leaves, cfg, progress, label)
        lap(label)
        for slot, j in enumerate(leaves):
            if nodes[j].fresh:
                nodes[j].summary = sketch.region(slot)
                nodes[j].n = nodes[j].summary.n
                nodes[j].fresh = False
        for j in grafted:
            keep_allowed_cuts(nodes, j, opts.k)
        open_ = [j for j in leaf_nodes(nodes) if needs_cut(j)]
    return nodes, passes, counted


def graft(nodes, i, p: PlanNode) -> None:
    """Attach a planned subtree below node ``i``; new nodes are fresh candidates."""
    stack = [(i, p)]
    while stack:
        j, pn = stack.pop()
        nodes[j].cut = pn.cut
        for side, child in (("left", pn.left), ("right", pn.right)):
            nodes.append(Node(nodes[j].depth + 1, child.n, child.summary, fresh=True))
            setattr(nodes[j], side, len(nodes) - 1)
            if child.cut is not None:
                stack.append((len(nodes) - 1, child))


@dataclass
class PassInputs:
    """What every partition of a region pass reads: the domain, the candidate tree, the rates."""

    domain: GlobalDomain
    tree: CutTree
    rates: np.ndarray


def region_sketch(df: pd.DataFrame, partition_number: int, inputs: PassInputs):
    """One partition's contribution to a region pass."""
    keys = encode_keys(df, inputs.domain)
    positions = row_positions(partition_number, len(df))
    region = route(keys, inputs.tree, positions)
    dom = inputs.domain
    return summarize(keys, region, inputs.rates.shape[0], dom.slot_rows(keys), dom.slots,
                     inputs.rates, row_priority(partition_number, len(df)), positions)


def sample_rate(n: float, cfg: PlanConfig) -> float:
    """The rate sampling a region of ``n`` rows for the levels the next pass may plan."""
    levels = min(expected_levels(n, cfg.leaf_rows, cfg.fill), cfg.max_levels)
    return float(min(1.0, cfg.sample_rows * 2.0 ** levels / max(n, 1.0)))


def region_pass(client, ddf, opts, domain, nodes, leaves, cfg, progress, label):
    """One pass: every current leaf's exact summary, and a sample of the fresh ones."""
    from dask import delayed

    rates = np.asarray([sample_rate(nodes[j].n, cfg) if nodes[j].fresh else 0.0 for j in leaves])
    inputs = constant(PassInputs(domain, flatten(nodes, leaves), rates), "cuts")
    sketch_d = delayed(region_sketch, pure=True)
    parts = column_partitions(ddf, opts.qis)
    partials = [sketch_d(p, i, inputs) for i, p in enumerate(parts)]
    return run(client, tree_reduce(partials, merge_sketches), progress, label)


def keep_allowed_cuts(nodes, i, k) -> None:
    """Undo every cut below ``i`` whose exact child counts break the constraint."""
    stack = [i]
    while stack:
        j = stack.pop()
        nd = nodes[j]
        if nd.cut is None:
            continue
        nl, nr = subtree_count(nodes, nd.left), subtree_count(nodes, nd.right)
        if sizes_allowed(nl, nr, k):
            stack.extend((nd.left, nd.right))
            continue
        nd.summary = Summary.merge([nodes[x].summary for x in leaf_nodes(nodes, j)])
        nd.n = nl + nr
        nd.banned.add(nd.cut.qi)
        nd.cut, nd.left, nd.right = None, -1, -1
