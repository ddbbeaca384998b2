"""l-diversity and t-closeness on Dask: exact sensitive-value counts of every leaf.

After the top phase, one pass measures the sensitive column's values (an infeasible request fails
here, before the shuffle) and one counts them per leaf; a top-phase cut whose children break a
constraint is undone, from the root down. Each leaf's local run enforces the constraints below,
against the whole table's distribution. See docs/design.md, section "Sensitive constraints".
"""

from __future__ import annotations

import numpy as np

from .. import _kernel as K
from ..encoding.sensitive import sensitive_values
from ..partition.cut_tree import flatten, leaf_nodes, undo_failing_cuts
from ..partition.routing import route, row_positions
from ..privacy.constraints import kernel_privacy
from .cluster import run
from .global_domain import encode_keys
from .graph import column_partitions, constant, sum_arrays, tree_reduce
from .options import DaskOptions
from .plan import SensitiveDomain

__all__ = ["sensitive_domain", "leaf_histograms", "keep_diverse_cuts"]


def sensitive_domain(client, ddf, opts: DaskOptions, progress) -> SensitiveDomain:
    """One pass: the sensitive values and counts; infeasible requests fail here.

    The domain is the local engine's (:func:`dmondrian.encoding.sensitive.sensitive_values`), built
    from a distributed value count instead of the column. With an entity, the constraints read
    (entity, value) pairs, not rows: they are checked on the pairs' counts (:mod:`.entity_pairs`),
    which also replace the distribution here.
    """
    column = ddf[opts.sensitive]
    counts = run(client, column.value_counts(dropna=False), progress, "pass: sensitive values")
    values = sensitive_values(counts, column._meta.dtype, name=opts.sensitive)
    for cst in opts.constraints if opts.entity is None else ():
        cst.check_distribution(values.counts)
    privacy = kernel_privacy(opts.constraints, np.zeros(1, dtype=np.int64), values.n_codes,
                             values.ordered, distribution=values.distribution())
    return SensitiveDomain(values, privacy)


def partition_leaf_histogram(df, partition_number, tree, domain, sens: SensitiveDomain,
                             column, n_leaves):
    """One partition's sensitive-value counts per leaf, flat (leaf-major)."""
    keys = encode_keys(df, domain)
    leaf = route(keys, tree, row_positions(partition_number, len(df)))
    S = sens.n_codes
    return np.bincount(leaf * S + sens.codes(df[column]), minlength=n_leaves * S)


def leaf_histograms(client, ddf, opts, domain, nodes, sens: SensitiveDomain, progress):
    """Exact sensitive-value counts of every current leaf: ``{node id: counts}``."""
    from dask import delayed

    leaves = leaf_nodes(nodes)
    tree = constant(flatten(nodes, leaves), "tree")
    parts = column_partitions(ddf, [*opts.qis, opts.sensitive])
    hist_d = delayed(partition_leaf_histogram, pure=True)
    partials = [hist_d(p, i, tree, domain, sens, opts.sensitive, len(leaves))
                for i, p in enumerate(parts)]
    total = run(client, tree_reduce(partials, sum_arrays), progress,
                "pass: sensitive values per leaf")
    flat = np.asarray(total).reshape(len(leaves), sens.n_codes)
    return {j: flat[slot] for slot, j in enumerate(leaves)}


def keep_diverse_cuts(nodes, leaf_hist: dict, sens: SensitiveDomain) -> None:
    """Undo, from the root down, every cut whose children break a sensitive constraint.

    The root satisfies the constraints (checked on the whole table), and a cut
    is kept only if both children's exact histograms pass, so every remaining
    leaf passes: the local engine then starts each leaf from a valid node.
    """
    ip, fp, q = sens.privacy.ip, sens.privacy.fp, sens.privacy.q
    undo_failing_cuts(nodes, leaf_hist, np.add, lambda h: K.hist_ok(h, int(h.sum()), ip, fp, q))
