"""``entity=`` with entropy l, recursive (c, l) or t on Dask: exact (entity, value) pairs.

With an entity, l and t read a class's histogram of distinct ``(entity, sensitive value)`` pairs
(:mod:`dmondrian.privacy.entities`). Pair histograms do not add up: a person holding a value on both
sides of a cut counts once in the parent and once in each child. So one pass counts them exactly for
every node of the top phase's tree, not only its leaves:

* each input partition routes its rows to their leaves and keeps its
  distinct ``(leaf, code, entity)`` triples, split into buckets by a hash of
  the entity (every row of a person lands in one bucket);
* one task per bucket gathers its triples from every partition and counts,
  for every node on each leaf's path from the root, its distinct pairs per value and its distinct
  entities, on the entity values themselves (no hash decides that two people are one);
* buckets hold disjoint sets of people, so their counts add up exactly.

The root's histogram is the whole table's, against which t-closeness is measured and infeasible
requests are refused. A cut is kept, from the root down, only if both children hold ``k`` entities
and pass l and t on their exact pair histograms; each leaf's local run enforces them below. Only the
counts, one row of ``n_values + 1`` integers per node, reach the client.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import _kernel as K
from ..partition.cut_tree import flatten, leaf_nodes, preorder, undo_failing_cuts
from ..partition.routing import route, row_positions
from ..privacy.constraints import kernel_privacy
from ..privacy.entities import check_entity_count
from .cluster import run
from .entity_pass import entity_hashes
from .global_domain import encode_keys
from .graph import column_partitions, constant, tree_reduce
from .plan import SensitiveDomain

__all__ = ["tree_paths", "node_pair_counts", "keep_pair_cuts", "MAX_BUCKETS"]

#: Most buckets of people the pairs are counted in (one task each).
MAX_BUCKETS = 16


def tree_paths(nodes) -> tuple[list, np.ndarray]:
    """The nodes reachable from the root, and every leaf's path from the root.

    Returns ``order`` (node ids; row ``i`` of the counts is node ``order[i]``)
    and ``paths``, one row per leaf in :func:`leaf_nodes` order: the counts'
    row of its ancestor at each depth, itself last, then ``-1``.
    """
    leaves = leaf_nodes(nodes)
    order = preorder(nodes)
    index = {j: i for i, j in enumerate(order)}
    parent = {0: -1}
    for j in order:
        if nodes[j].cut is not None:
            parent[nodes[j].left] = parent[nodes[j].right] = j
    chains = []
    for j in leaves:
        chain = []
        while j >= 0:
            chain.append(index[j])
            j = parent[j]
        chains.append(chain[::-1])
    depth = max(len(c) for c in chains)
    paths = np.full((len(leaves), depth), -1, dtype=np.int64)
    for i, chain in enumerate(chains):
        paths[i, :len(chain)] = chain
    return order, paths


def _partition_triples(df, partition_number, tree, domain, sens: SensitiveDomain,
                       sensitive, entity, n_buckets):
    """One partition's distinct ``(leaf, code, entity)`` triples, by bucket of people."""
    keys = encode_keys(df, domain)
    leaf = route(keys, tree, row_positions(partition_number, len(df)))
    people = df[entity].reset_index(drop=True)
    bucket = entity_hashes(people) % np.uint64(n_buckets)
    triples = pd.DataFrame({"leaf": leaf.astype(np.int64),
                            "code": sens.codes(df[sensitive]).astype(np.int64),
                            "entity": people, "bucket": bucket.astype(np.int64)})
    triples = triples.drop_duplicates(["leaf", "code", "entity"])
    groups = triples.groupby("bucket", sort=False).indices
    empty = triples.iloc[:0, :3]
    return tuple(triples.iloc[groups[b], :3] if b in groups else empty for b in range(n_buckets))


def _bucket_counts(*parts, paths, n_nodes, n_values):
    """Distinct pairs per value and distinct entities of every node, in one bucket."""
    triples = pd.concat(parts, ignore_index=True).drop_duplicates()
    hist = np.zeros(n_nodes * n_values, dtype=np.int64)
    people = np.zeros(n_nodes, dtype=np.int64)
    if len(triples) == 0:
        return hist.reshape(n_nodes, n_values), people
    leaf = triples["leaf"].to_numpy()
    code = triples["code"].to_numpy()
    person = pd.factorize(triples["entity"])[0].astype(np.int64)
    for level in range(paths.shape[1]):
        # Nodes at one depth hold disjoint leaves: each triple counts at one of them.
        node = paths[leaf, level]
        on = node >= 0
        node, c, p = node[on], code[on], person[on]
        pairs = pd.DataFrame({"value": node * n_values + c, "p": p}).drop_duplicates()
        hist += np.bincount(pairs["value"].to_numpy(), minlength=n_nodes * n_values)
        held = pd.DataFrame({"node": node, "p": p}).drop_duplicates()
        people += np.bincount(held["node"].to_numpy(), minlength=n_nodes)
    return hist.reshape(n_nodes, n_values), people


def _add(*parts):
    return (np.sum([p[0] for p in parts], axis=0), np.sum([p[1] for p in parts], axis=0))


def node_pair_counts(client, ddf, opts, domain, nodes, sens: SensitiveDomain, progress):
    """Exact pair histograms and entities of every node reachable from the root.

    Returns ``{node id: (histogram, entities)}``: the distinct entities holding each sensitive code
    in the node's region, and its distinct entities.
    """
    from dask import delayed

    order, paths = tree_paths(nodes)
    leaves = leaf_nodes(nodes)
    tree = constant(flatten(nodes, leaves), "tree")
    parts = column_partitions(ddf, [*opts.qis, opts.sensitive, opts.entity])
    n_buckets = max(1, min(MAX_BUCKETS, len(parts)))
    split = delayed(_partition_triples, pure=True)
    partials = [split(p, i, tree, domain, sens, opts.sensitive, opts.entity, n_buckets)
                for i, p in enumerate(parts)]
    count = delayed(_bucket_counts, pure=True)
    paths_d = constant(paths, "paths")
    buckets = [count(*(p[b] for p in partials), paths=paths_d, n_nodes=len(order),
                     n_values=sens.n_codes) for b in range(n_buckets)]
    hist, people = run(client, tree_reduce(buckets, _add), progress,
                       "pass: (entity, value) pairs per node")
    return {j: (hist[i], int(people[i])) for i, j in enumerate(order)}


def keep_pair_cuts(nodes, counts: dict, sens: SensitiveDomain, opts) -> SensitiveDomain:
    """Undo, from the root down, every cut whose children fall short on exact pair counts.

    A child passes when it holds ``k`` distinct entities and its pair histogram passes the sensitive
    constraints, t-closeness against the whole table's pairs. Returns ``sens`` with the constraints
    in kernel form on that distribution (what each leaf's local run enforces below), its values'
    counts those of the pairs (as a plan fitted in memory keeps them,
    :func:`dmondrian.plans.fit_plan`).

    Raises
    ------
    dmondrian.errors.InfeasibleError
        The whole table holds fewer than ``k`` entities, or its pairs fail a constraint.
    """
    whole, people = counts[0]
    check_entity_count(people, opts.k, opts.entity)
    for cst in opts.constraints:
        cst.check_distribution(whole)
    privacy = kernel_privacy(opts.constraints, np.zeros(1, dtype=np.int64), sens.n_codes,
                             sens.values.ordered, distribution=whole / whole.sum())
    ip, fp, q = privacy.ip, privacy.fp, privacy.q

    def passes(value):
        hist, held = value
        return held >= opts.k and K.hist_ok(hist, int(hist.sum()), ip, fp, q)

    # Every node was counted: a node's pairs are its own, never its children's sum.
    undo_failing_cuts(nodes, counts, None, passes)
    return SensitiveDomain(replace(sens.values, counts=whole.astype(sens.values.counts.dtype)),
                           privacy)
