"""Which node publishes which rows of a batch, and the labels it publishes.

The rule (bottom-up, once per batch, on per-node counts only):

* the rows that landed in a node (:mod:`.batch`) form its group; children are
  decided before their parent;
* a group that satisfies the constraints (at least k rows; l and t when
  asked) is published with its node's label; a group that does not is added to its parent's group:
  its rows are published at the nearest ancestor that passes;
* when even the root's group fails (rows that only the root holds, say, or rows lifted all the way
  up), the smallest published groups are folded into it, smallest first, until it passes; a batch
  that fails as a whole (fewer than k rows) raises :class:`~dmondrian.errors.InfeasibleError`.

A published group is then exactly the batch's rows in its node's region less
the regions published below it, so every published class, and every region an
observer who knows the plan can tell apart, holds at least k rows.

A class's label is its node's fitted label (the fitted rows' bounds, as the local engine publishes a
class), widened only by the rows that reach past it through an open edge or at the root; labels are
made by :func:`dmondrian.release.publish.class_values`, so a fitted table routed through its own
plan publishes exactly what :func:`dmondrian.anonymize` published.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .. import _kernel as K
from .._kernel.labels import FMT_TABLE
from ..errors import InfeasibleError
from ..privacy.suppression import MASK_LABEL
from ..release.publish import class_values, expand_label_columns
from .batch import BatchSummary
from .people import people_targets

__all__ = ["Release", "published_targets", "decide", "publish_rows", "published_columns"]


@dataclass
class Release:
    """The classes of one batch.

    Attributes
    ----------
    class_of_node : int64 array (nodes,)
        The class the rows landed in each node are published in (-1: none).
    nodes : int64 array (classes,)
        The node each class publishes.
    counts : int64 array (classes,)
        Rows of every class.
    values : list of (values, inverse)
        Per QI, as :func:`dmondrian.release.publish.class_values` returns them.
    encodings : list of EncodedQI
        The encodings the values are expanded with (nominal QIs extended by the
        batch's new categories).
    """

    class_of_node: np.ndarray
    nodes: np.ndarray
    counts: np.ndarray
    values: list
    encodings: list


def published_targets(parent: np.ndarray, count: np.ndarray, passes, hist=None,
                      depth: np.ndarray | None = None) -> np.ndarray:
    """The node each node's rows are published at (see the module docstring).

    Parameters
    ----------
    parent : int64 array (nodes,)
        Every node's parent, nodes in depth-first order (parents first).
    count : int64 array (nodes,)
        Rows landed in each node.
    passes : callable
        ``passes(rows, hists)``: whether each group may be published (arrays
        of the groups' rows and sensitive histograms, or None).
    hist : int64 array (nodes, codes), optional
        Sensitive values landed in each node.
    depth : int64 array (nodes,), optional
        Every node's depth (computed when not given).

    Returns
    -------
    int64 array (nodes,)

    Examples
    --------
    >>> parent = np.array([-1, 0, 0, 2, 2])
    >>> published_targets(parent, np.array([0, 5, 2, 3, 1]), lambda n, h: n >= 3).tolist()
    [0, 1, 2, 3, 2]
    """
    m = parent.shape[0]
    depth = node_depths(parent) if depth is None else depth
    group = count.astype(np.int64).copy()
    ghist = None if hist is None else hist.astype(np.int64).copy()
    dest = np.arange(m, dtype=np.int64)
    kept = np.zeros(m, dtype=bool)
    # Every level's nodes, ascending, from one stable sort (a radix sort of 16-bit depths).
    levels = np.split(np.argsort(depth.astype(np.int16), kind="stable"),
                      np.cumsum(np.bincount(depth))[:-1])
    for at in reversed(levels[1:]):  # children before parents
        at = at[group[at] > 0]
        ok = np.asarray(passes(group[at], None if ghist is None else ghist[at]), dtype=bool)
        kept[at[ok]] = True
        fail = at[~ok]
        dest[fail] = parent[fail]
        np.add.at(group, parent[fail], group[fail])
        if ghist is not None:
            np.add.at(ghist, parent[fail], ghist[fail])

    def root_ok():
        h = None if ghist is None else ghist[:1]
        return bool(np.asarray(passes(group[:1], h))[0])

    if group[0] > 0:
        kept[0] = True
        # Fold the smallest published groups into the root until it passes
        # (ties: the lower node first). Ordered in numpy: a plan publishes tens of
        # thousands of groups, and the root usually needs only a few of them.
        others = np.flatnonzero(kept[1:]) + 1
        others = others[np.lexsort((others, group[others]))]
        taken = 0
        while not root_ok():
            if taken == others.shape[0]:
                raise InfeasibleError(f"the batch's {int(group[0])} rows cannot form one "
                                      "class that meets the plan's constraints (fewer than k "
                                      "rows, or too few sensitive values)")
            i = int(others[taken])
            taken += 1
            kept[i], dest[i] = False, 0
            group[0] += group[i]
            if ghist is not None:
                ghist[0] += ghist[i]
    target = np.arange(m, dtype=np.int64)
    for at in levels[1:]:  # parents (and the root) are resolved first
        moved = at[dest[at] != at]
        target[moved] = target[dest[moved]]
    return target


def node_depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node (the root's parent is -1).

    Examples
    --------
    >>> node_depths(np.array([-1, 0, 1, 0])).tolist()
    [0, 1, 2, 1]
    """
    depth = np.zeros(parent.shape[0], dtype=np.int64)
    up = parent.copy()
    # One step up per level for every node still below the root: height passes.
    while (up >= 0).any():
        below = up >= 0
        depth += below
        up[below] = parent[up[below]]
    return depth


def _passes(plan, people: bool = False):
    """``passes(n, hist)``: n rows (distinct entities with ``people``) of at least k, and
    the histogram (of rows, or of distinct (entity, value) pairs) passing l and t."""
    k = plan.k
    privacy = plan.privacy
    if privacy is None:
        return lambda n, h: n >= k
    ip, fp, q = privacy.ip, privacy.fp, privacy.q

    def size(c, row):
        # Over people, a histogram's shares are of its pairs, not of its entities.
        return int(row.sum()) if people else int(c)
    return lambda n, h: np.asarray([int(c) >= k
                                    and bool(K.hist_ok(row, size(c, row), ip, fp, q))
                                    for c, row in zip(n, h, strict=True)], dtype=bool)


def decide(plan, summary: BatchSummary, own=None) -> Release:
    """The classes of a batch from its summary, with their published values.

    With ``summary.people`` (a plan with ``entity=``) a group passes on its distinct entities
    (:func:`.people.people_targets`), else on its rows (:func:`published_targets`). ``own``, a
    callable given the classes (``class_of_node``, ``nodes``), may return some classes' own rows'
    bounds and codes (:class:`.fitted.OwnBounds`), published instead of their node's fitted label.
    """
    if summary.people is not None:
        target = people_targets(plan.tree.parent, summary.people, _passes(plan, True),
                                plan.depth, summary.count)
    else:
        target = published_targets(plan.tree.parent, summary.count, _passes(plan),
                                   summary.hist, plan.depth)
    landed = summary.count > 0
    # The published nodes, ascending: a count per node, not a sort of them.
    nodes = np.flatnonzero(np.bincount(target[landed], minlength=plan.tree.n_nodes))
    class_of_node = np.full(plan.tree.n_nodes, -1, dtype=np.int64)
    class_of_node[nodes] = np.arange(len(nodes))
    class_of_node[landed] = class_of_node[target[landed]]
    counts = np.bincount(class_of_node[landed], weights=summary.count[landed],
                         minlength=len(nodes)).astype(np.int64)
    own = None if own is None else own(class_of_node, nodes)
    return Release(class_of_node, nodes, counts, *_values(plan, summary, class_of_node, nodes, own))


def _values(plan, summary: BatchSummary, class_of_node, nodes, own=None):
    tree = plan.tree
    m, d = len(nodes), len(plan.encodings)
    lo, hi, missing = tree.lo[nodes], tree.hi[nodes], tree.missing[nodes]  # copies
    touched = [np.zeros(0, dtype=np.int64)]  # classes whose bounds may differ from their node's
    if own is not None:
        ranges = [j for j, qi in enumerate(plan.encodings) if qi.spec.label_shape == "range"]
        at = np.ix_(own.classes, ranges)
        lo[at], hi[at], missing[at] = own.lo[:, ranges], own.hi[:, ranges], own.missing[:, ranges]
        touched.append(own.classes)
    if summary.edges is not None:
        # The rows that reach past their node's fitted bounds widen its class's label.
        at, e_lo, e_hi, e_missing = summary.edges
        cls = class_of_node[at]
        np.minimum.at(lo, cls, e_lo)
        np.maximum.at(hi, cls, e_hi)
        np.logical_or.at(missing, cls, e_missing)
        touched.append(cls)
    touched = np.unique(np.concatenate(touched))
    if plan.options["generalization"] == "range":
        total = present = None  # labels read only the bounds
    elif summary.total is not None:
        landed = np.flatnonzero(summary.count > 0)
        cls = class_of_node[landed]
        total = np.zeros((m, d), dtype=np.float64)
        present = np.zeros((m, d), dtype=np.int64)
        np.add.at(total, cls, summary.total[landed])
        np.add.at(present, cls, summary.present[landed])
    else:
        total, present = tree.total[nodes], tree.present[nodes]
    root = class_of_node[0] if summary.count[0] > 0 or (nodes == 0).any() else -1
    values, encodings = [], []
    for j, qi in enumerate(plan.encodings):
        class_of_pos, sorted_row = np.arange(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
        star = False
        if qi.spec.label_shape == "set":
            qi, class_of_pos, sorted_row = _set_rows(qi, tree, j, nodes, root, summary,
                                                     None if own is None else
                                                     (own.classes, *own.codes[j]))
        elif j in summary.new_names and root >= 0:
            star = True  # an ordinal or hierarchy value the fit never saw: the root publishes *
        stats = (class_of_pos, lo, hi, missing, total, present)
        fitted = _fitted_labels(plan, j, nodes, *(a[touched, j] != b[nodes[touched], j]
                                                  for a, b in ((lo, tree.lo), (hi, tree.hi),
                                                               (missing, tree.missing))))
        v, inverse = fitted or class_values(qi, j, plan.options["generalization"], stats,
                                            sorted_row)
        if star:
            v, inverse = _with_star(v, inverse, root)
        values.append((v, inverse))
        encodings.append(qi)
    return values, encodings


def _fitted_labels(plan, j, nodes, *differ):
    """QI ``j``'s ``(values, inverse)`` of the classes publishing ``nodes``, when they all
    publish their node's fitted bounds (none of ``differ``, flags of the classes whose lo,
    hi or missing flag may differ, is set), from every node's range label, made once per
    plan, at its second batch (:attr:`.fitted.FittedPlan.node_labels`): the labels of
    :func:`class_values`, in its order (of the distinct bounds, which the nodes' ranks keep).
    None otherwise, for labels other than ranges, and for ranges written from names (two
    may read alike, and which of them names the merged value depends on the others)."""
    qi, tree = plan.encodings[j], plan.tree
    if (qi.spec.label_shape != "range" or not qi.spec.publishes_labels(
            plan.options["generalization"]) or qi.spec.label_format(qi) == FMT_TABLE
            or not hasattr(plan, "node_labels") or any(d.any() for d in differ)):
        return None
    if j not in plan.node_labels:
        # Made at the plan's second batch: labelling every node costs about twice a batch's
        # classes, which a plan used once (a Dask job's client, a command) would not repay.
        plan.node_labels[j] = None
        return None
    if plan.node_labels[j] is None:
        m = tree.n_nodes
        plan.node_labels[j] = class_values(
            qi, j, "range", (np.arange(m), tree.lo, tree.hi, tree.missing, None, None),
            np.zeros(m, dtype=np.int64))
    labels, rank = plan.node_labels[j]
    rank = np.asarray(rank)[nodes]
    used = np.zeros(len(labels), dtype=bool)
    used[rank] = True
    return labels[used], (np.cumsum(used) - 1)[rank]


def _set_rows(qi, tree, j, nodes, root, summary, own=None):
    """A nominal QI's codes of every class (``class_of_pos``, ``sorted_row``), with the
    batch's new categories appended to its encoding; ``own`` (classes, and their
    (class, code) pairs) replaces those classes' fitted codes."""
    new = sorted(summary.new_names.get(j, set()), key=str) if root >= 0 else []
    packed, card = tree.codes[j]
    if new:
        # New categories take codes after the fitted ones (the missing code included).
        qi = replace(qi, categories=[*qi.categories, *new], card=qi.card + len(new))
    class_of = np.full(tree.n_nodes, -1, dtype=np.int64)
    class_of[nodes] = np.arange(len(nodes))
    owner = class_of[packed // card]
    keep = owner >= 0
    owner, code = owner[keep], packed[keep] % card
    if own is not None:
        classes, own_class, own_code = own
        fitted = ~np.isin(owner, classes)
        owner = np.concatenate([owner[fitted], own_class])
        code = np.concatenate([code[fitted], own_code])
    if root >= 0:
        extra = np.asarray([*summary.root_codes.get(j, ()), *range(card, card + len(new))],
                           dtype=np.int64)
        owner = np.concatenate([owner, np.full(len(extra), root, dtype=np.int64)])
        code = np.concatenate([code, extra])
    pairs = np.sort(owner * (card + len(new)) + code)
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if pairs.size else pairs
    return qi, pairs // (card + len(new)), pairs % (card + len(new))


def _with_star(values, inverse, c):
    values = pd.Index(values)
    at = values.get_indexer([MASK_LABEL])[0]
    if at < 0:
        values = values.append(pd.Index([MASK_LABEL], dtype=values.dtype))
        at = len(values) - 1
    inverse = np.asarray(inverse).copy()
    inverse[c] = at
    return values, inverse


def publish_rows(df: pd.DataFrame, release: Release, node: np.ndarray,
                 class_column=None) -> pd.DataFrame:
    """``df`` with its QI columns replaced by their classes' published values.

    ``node`` is the node each row landed in (:func:`.batch.place_batch`). Every column's label code
    is looked up once per node, and the rows gather them by node id, all labelled columns in one
    pass (:func:`dmondrian.release.publish.expand_label_columns`): no per-row class id is made
    unless ``class_column`` asks for it.
    """
    out = df.copy(deep=False)
    for name, column in published_columns(release, node, class_column).items():
        out[name] = pd.Series(column, index=out.index, copy=False)
    return out


def published_columns(release: Release, node: np.ndarray, class_column=None) -> dict:
    """Every published QI column (and ``class_column``'s class ids) of rows landed in
    ``node``, by name, in the QIs' order (see :func:`publish_rows`)."""
    node = np.ascontiguousarray(node, dtype=np.int64)
    # Nodes no row landed in have no class; their entries are never read.
    cls = np.maximum(release.class_of_node, 0)
    labelled = [j for j, (values, _) in enumerate(release.values) if isinstance(values, pd.Index)]
    # One thread: the gather reads a line of a small table a row, bound by memory; more
    # threads save it little time and cost CPU in OpenMP's wait between its passes.
    with K.thread_limit(1):
        columns = dict(zip(labelled, expand_label_columns(
            [(release.values[j][0], np.asarray(release.values[j][1])[cls]) for j in labelled],
            node), strict=True))
    out = {}
    for j, (qi, (values, inverse)) in enumerate(zip(release.encodings, release.values,
                                                    strict=True)):
        column = columns.get(j)
        out[qi.name] = (qi.spec.summary_column(qi, values[inverse][cls][node])
                        if column is None else column)
    if class_column is not None:
        out[class_column] = release.class_of_node[node]
    return out
