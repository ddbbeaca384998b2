"""Noise per person on Dask: each entity's ``max_classes`` shared out among its leaves.

With ``entity=`` and ``noise=``, each entity's rows count in the noised means of at most
``max_classes`` classes (:mod:`dmondrian.privacy.noise`). The local engine picks them among all the
entity's classes; on Dask the classes are made by leaves finished apart, in different tasks. So
after the plan, one pass finds the leaves every entity has rows in, exactly, and shares its
``max_classes`` among them: its leaves in a random order, the slots dealt round-robin, so a leaf
gets ``max_classes // m`` or one more (``m`` the entity's leaves; a leaf dealt none keeps none of
its rows). Each leaf then bounds its entities' contributions as the local engine does, with its
share as their ``max_classes``: summed over the leaves, an entity counts in at most ``max_classes``
classes, each with at most ``max_contributions`` rows, and the noise scale is the local engine's. An
entity with rows in one leaf (the usual case: leaves are large) gets all of ``max_classes`` there,
as the local engine would give it.

The pass: each input partition routes its rows and keeps its distinct ``(leaf, entity)`` pairs, by
bucket of people (a 64-bit hash of the value); one task per bucket deals the slots; the shares (only
those above 0) reach the client and travel with the plan. Entities are identified by that hash here:
two that share one share their slots too, so each still counts in at most ``max_classes`` classes.
The order is drawn from ``random_state`` when given (its own stream), else from fresh OS entropy,
and never looks at the noised values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..partition.cut_tree import flatten, leaf_nodes
from ..partition.routing import route, row_positions
from .cluster import run
from .entity_pass import entity_hashes
from .global_domain import encode_keys
from .graph import column_partitions, constant

__all__ = ["ClassShares", "deal_shares", "class_shares", "MAX_BUCKETS"]

#: Most buckets of people the slots are dealt in (one task each).
MAX_BUCKETS = 16


@dataclass
class ClassShares:
    """Each entity's share of ``max_classes`` in each leaf it has rows in.

    ``starts[i]:starts[i + 1]`` index leaf ``i``'s entries; ``ids`` are the
    entities' hashes, sorted within a leaf, ``shares`` their slots there.
    """

    starts: np.ndarray
    ids: np.ndarray
    shares: np.ndarray

    def of_rows(self, leaf: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The share of each row's entity in the row's leaf (0 when it was dealt none).

        Examples
        --------
        >>> s = ClassShares(np.array([0, 2, 3]), np.array([5, 9, 5], dtype=np.uint64),
        ...                 np.array([1, 2, 1]))
        >>> s.of_rows(np.array([0, 0, 1, 1]), np.array([9, 7, 5, 9], dtype=np.uint64)).tolist()
        [2, 0, 1, 0]
        """
        out = np.zeros(len(leaf), dtype=np.int64)
        for one in np.unique(leaf):
            rows = np.flatnonzero(leaf == one)
            lo, hi = self.starts[one], self.starts[one + 1]
            if hi == lo:
                continue
            known = self.ids[lo:hi]
            at = np.minimum(np.searchsorted(known, ids[rows]), hi - lo - 1)
            found = known[at] == ids[rows]
            out[rows[found]] = self.shares[lo:hi][at[found]]
        return out


def deal_shares(leaf: np.ndarray, ids: np.ndarray, max_classes: int, rng):
    """Every entity's slots dealt round-robin to its leaves in a random order.

    ``(leaf, ids)`` are distinct pairs; returns the pairs dealt at least one slot, and their shares.

    Examples
    --------
    >>> leaf, ids, share = deal_shares(np.array([0, 1, 2, 0]),
    ...                                np.array([7, 7, 7, 8], dtype=np.uint64), 2,
    ...                                np.random.default_rng(0))
    >>> int(share[ids == 7].sum()), len(share[ids == 7]), share[ids == 8].tolist()
    (2, 2, [2])
    """
    order = np.lexsort((rng.random(len(ids)), ids))
    leaf, ids = leaf[order], ids[order]
    n = len(ids)
    if n == 0:
        return leaf, ids, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1]]))
    held = np.diff(np.append(starts, n))
    rank = np.arange(n) - np.repeat(starts, held)
    m = np.repeat(held, held)
    share = max_classes // m + (rank < max_classes % m)
    keep = share > 0
    return leaf[keep], ids[keep], share[keep].astype(np.int64)


def _partition_pairs(df, partition_number, tree, domain, entity, n_buckets):
    keys = encode_keys(df, domain)
    leaf = route(keys, tree, row_positions(partition_number, len(df))).astype(np.uint64)
    ids = entity_hashes(df[entity])
    pairs = np.unique(np.stack([ids, leaf], axis=1), axis=0)
    bucket = pairs[:, 0] % np.uint64(n_buckets)
    return tuple(pairs[bucket == b] for b in range(n_buckets))


def _deal_bucket(*parts, max_classes, seed, bucket):
    pairs = np.unique(np.concatenate(parts), axis=0)
    rng = (np.random.default_rng() if seed is None
           else np.random.default_rng([int(seed), 0xC1A55E5, int(bucket)]))
    leaf, ids, share = deal_shares(pairs[:, 1].astype(np.int64), pairs[:, 0], max_classes, rng)
    return leaf, ids, share


def _gather(*parts, n_leaves):
    leaf = np.concatenate([p[0] for p in parts])
    ids = np.concatenate([p[1] for p in parts])
    share = np.concatenate([p[2] for p in parts])
    order = np.lexsort((ids, leaf))
    starts = np.searchsorted(leaf[order], np.arange(n_leaves + 1))
    return ClassShares(starts.astype(np.int64), ids[order], share[order])


def class_shares(client, ddf, opts, domain, nodes, progress) -> ClassShares:
    """One pass: every entity's share of ``max_classes`` in each of its leaves."""
    from dask import delayed

    leaves = leaf_nodes(nodes)
    tree = constant(flatten(nodes, leaves), "tree")
    parts = column_partitions(ddf, [*opts.qis, opts.entity])
    n_buckets = max(1, min(MAX_BUCKETS, len(parts)))
    split = delayed(_partition_pairs, pure=True)
    partials = [split(p, i, tree, domain, opts.entity, n_buckets) for i, p in enumerate(parts)]
    deal = delayed(_deal_bucket, pure=True)
    dealt = [deal(*(p[b] for p in partials), max_classes=opts.max_classes,
                  seed=opts.random_state, bucket=b) for b in range(n_buckets)]
    return run(client, delayed(_gather, pure=True)(*dealt, n_leaves=len(leaves)), progress,
               "pass: each entity's classes per leaf")
