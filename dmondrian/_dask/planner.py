"""Client-side decisions of the top phase: which QI to cut a region on, and where.

These functions mirror the local kernel's choices one for one, computed from a region's
:class:`~.sketch.Summary` instead of its rows, so that on a complete sample they make exactly the
kernel's cut; :func:`plan_subtree` keeps cutting a region's sample for a few levels, so one pass
decides several. See docs/design.md, section "Planning cuts".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernel.constants import KIND_HIERARCHY, MISSING_KEY
from .._kernel.packing import packed_left, packs_better
from ..partition.cut_tree import ALL_TIES, NO_TIES, Cut
from ..partition.sketch import Summary
from .global_domain import GlobalDomain

__all__ = ["PlanNode", "PlanConfig", "region_spans", "find_cut", "choose_cut",
           "goes_left", "plan_subtree", "planned_levels", "sizes_allowed"]


@dataclass
class PlanConfig:
    """Parameters of the top phase."""

    min_size: int
    relaxed: bool
    leaf_rows: int
    max_depth: int = -1
    #: What the cuts optimize (:data:`dmondrian.options.OBJECTIVES`), as in the kernel.
    objective: str = "balanced"
    #: Plan a child further only while its estimated size exceeds this fraction
    #: of leaf_rows, so sampling noise rarely leaves a leaf just above it.
    fill: float = 0.9
    #: Levels of a balanced tree a region pass samples a region for (the
    #: domain pass samples for at least this many, more on a larger table).
    max_levels: int = 6
    #: Levels a pass may plan beyond what the sample supports, only for the
    #: branches that uneven cuts (ties, few distinct values) leave too big:
    #: without them such a branch costs one more pass over the data.
    extra_levels: int = 1
    #: Fewest sample rows a region needs before the sample may decide its cut.
    min_sample: int = 64
    #: Sample rows per expected leaf: a sample of ``m`` rows supports about
    #: ``log2(m / sample_rows)`` levels of cuts.
    sample_rows: int = 2048


@dataclass
class PlanNode:
    """A region and, when it is cut, its cut and two children."""

    n: float
    summary: Summary | None
    cut: Cut | None = None
    left: PlanNode | None = None
    right: PlanNode | None = None


def region_spans(summary: Summary, domain: GlobalDomain) -> np.ndarray:
    """Normalized span of every QI in a region, as ``_kernel._node_span`` computes it."""
    spans = np.zeros(domain.d)
    for j, spec in enumerate(domain.specs):
        spans[j] = spec.region_span(int(summary.lo[j]), int(summary.hi[j]), summary.missing[j],
                                    summary.hist.get(j), float(domain.scales[j]),
                                    int(domain.kernel_kinds[j]), domain.hierarchies[j])
    return spans


def sizes_allowed(n_left: float, n_right: float, min_size: int) -> bool:
    """The k-anonymity rule of the kernel's split check: both sides keep ``min_size`` rows."""
    return n_left >= min_size and n_right >= min_size


def _choose_sizes(n: int, l1: int, l2: int, min_size: int) -> int:
    """``_kernel._choose`` on sizes: the allowed cut (1: ``< median``, 2: ``<= median``)
    nearest the middle, 2 on a tie, 0 if neither is allowed."""
    ok2 = sizes_allowed(l2, n - l2, min_size)
    ok1 = l1 != l2 and sizes_allowed(l1, n - l1, min_size)
    if ok1 and ok2:
        return 1 if abs(2 * l1 - n) < abs(2 * l2 - n) else 2
    return 2 if ok2 else (1 if ok1 else 0)


def _axis(summary: Summary, j: int, domain: GlobalDomain):
    """Values along QI ``j``'s cut order with their (weighted) row counts.

    Returns ``(values, counts, ranks)``; ``ranks`` maps nominal codes to their
    frequency rank (values are then ranks), None otherwise.
    """
    spec = domain.specs[j]
    if spec.exact_counts:
        counts = summary.hist[j]
        if spec.frequency_order:
            # Most frequent first, ties by code: the kernel's _nominal_ranks.
            order = np.argsort(-counts, kind="mergesort")
            ranks = np.empty(counts.shape[0], dtype=np.int64)
            ranks[order] = np.arange(counts.shape[0])
            return np.arange(counts.shape[0], dtype=np.int64), counts[order], ranks
        values = spec.slot_values(counts.shape[0])
        nz = counts > 0
        return values[nz], counts[nz], None
    row = summary.sample_keys[j]
    w = summary.sample_w.astype(np.float64)
    if row.size == 0:
        return None
    is_missing = row == MISSING_KEY
    # The sample estimates where the median lies among present values; how many
    # values are missing is known exactly.
    n_present = summary.n - summary.missing[j]
    wp = w[~is_missing].sum()
    w = np.where(is_missing, 0.0, w * (n_present / wp if wp > 0 else 0.0))
    if w.shape[0] and w[0] == w.max() == w.min() and not is_missing.any():
        # One weight for every row (a region's sample): counts by a plain
        # sort, without the inverse permutation.
        values, counts = np.unique(row, return_counts=True)
        counts = counts * w[0]
    else:
        values, inv = np.unique(row, return_inverse=True)
        counts = np.bincount(inv.ravel(), weights=w, minlength=values.shape[0])
    if summary.missing[j] > 0:
        if values[-1] != MISSING_KEY:
            values = np.append(values, MISSING_KEY)
            counts = np.append(counts, 0.0)
        counts[-1] = summary.missing[j]
    nz = counts > 0
    return values[nz], counts[nz], None


def _tie_threshold(summary: Summary, j: int, v: int, ranks, share: float) -> int:
    """Input position before which a row tied at ``v`` goes left, so ``share`` of them do.

    The kernel sends the first tied rows of a node left, in input order: the threshold is the
    position of the first tied sample row past ``share`` of the tied rows' weight. On a complete
    sample that is exactly the kernel's split. A quantile of the positions present rather than a
    fixed one: after earlier cuts, a region's tied rows may lie anywhere in the input.
    """
    keys, pos = summary.sample_keys, summary.sample_pos
    vals = keys[j] if ranks is None else ranks[keys[j]]
    tied = vals == v
    if not tied.any():
        # No tied row sampled: the region's rows stand in for where its tied
        # rows lie (the next pass counts what the cut really does).
        tied = np.ones(vals.shape[0], dtype=bool)
        if not tied.any():
            return ALL_TIES if share >= 0.5 else NO_TIES
    p = pos[tied]
    order = np.argsort(p, kind="stable")
    cw = np.cumsum(summary.sample_w[tied][order])
    m = int(np.searchsorted(cw, share * cw[-1] * (1 - 1e-12), side="left")) + 1
    return int(p[order[m]]) if m < order.shape[0] else ALL_TIES


def _packed_cut(cum, values, n: int, nominal: bool, min_size: int):
    """The kernel's "dm" strict cut on an axis: ``(left rows, threshold)`` or None.

    A nominal axis scores every boundary between ranks; an ordered one the
    two around the value at the packed position (see :mod:`dmondrian._kernel.packing`).
    """
    def le(r):
        return int(round(cum[r - 1])) if r > 0 else 0

    if nominal:
        candidates = [(int(round(cum[r])), r) for r in range(len(cum))]
    else:
        r = int(np.searchsorted(cum, packed_left(n, min_size) - 1, side="right"))
        v = int(values[r])
        candidates = [(le(r), v - 1), (int(round(cum[r])), v)]
    best = None
    for a, t in candidates:
        if sizes_allowed(a, n - a, min_size) and packs_better(a, 0 if best is None
                                                              else best[0], n, min_size):
            best = (a, t)
    return best


def find_cut(summary: Summary, j: int, domain: GlobalDomain, relaxed: bool,
             min_size: int, objective: str = "balanced") -> Cut | None:
    """The kernel's cut of QI ``j`` in a region, or None when no cut is allowed."""
    axis = _axis(summary, j, domain)
    if axis is None:
        return None
    values, counts, ranks = axis
    n = int(round(summary.n))
    cum = np.cumsum(counts)
    cum *= n / cum[-1] if cum[-1] > 0 else 0.0
    nominal = ranks is not None

    def le(r):  # rows at positions < index r
        return float(cum[r - 1]) if r > 0 else 0.0

    def at_most(t):  # rows whose value is <= t (t below int64 when the median is its least)
        if t < int(values[0]):
            return 0.0
        return le(int(np.searchsorted(values, t, side="right")))

    dm = objective == "dm"
    if relaxed:
        nl = packed_left(n, min_size) if dm and n >= 2 * min_size else n // 2
        if not sizes_allowed(nl, n - nl, min_size):
            return None
        r = int(np.searchsorted(cum, nl - 1, side="right"))
        need = nl - le(r)
        v = r if nominal else int(values[r])
        threshold = _tie_threshold(summary, j, v, ranks, need / (cum[r] - le(r)))
        return Cut(j, v - 1, v, threshold, ranks, float(nl))

    if dm and (nominal or int(domain.kernel_kinds[j]) != KIND_HIERARCHY):
        packed = _packed_cut(cum, values, n, nominal, min_size)
        if packed is not None:
            return Cut(j, packed[1], packed[1], NO_TIES, ranks, float(packed[0]))
    r = int(np.searchsorted(cum, (n - 1) // 2, side="right"))
    med = int(values[r])
    if nominal:
        t1, t2, l1, l2 = r - 1, r, le(r), float(cum[r])
    else:
        # The kind's thresholds (a hierarchy cuts between subtrees); the rows at or
        # below each are counted along the axis.
        t1, t2 = domain.specs[j].median_thresholds(med, int(values[0]), int(values[-1]),
                                                   domain.hierarchies[j])
        l1, l2 = at_most(t1), at_most(t2)
    l1i, l2i = int(round(l1)), int(round(l2))
    which = _choose_sizes(n, l1i, l2i, min_size)
    if which == 1:
        return Cut(j, t1, t1, NO_TIES, ranks, float(l1i))
    if which == 2:
        return Cut(j, t2, t2, NO_TIES, ranks, float(l2i))
    return None


def _cheapest_cut(summary: Summary, domain: GlobalDomain, min_size: int, banned,
                  spans: np.ndarray) -> Cut | None:
    """The "ncp" objective's cut (``_kernel/ncp.pyx``) on a region's sample.

    Along each of the two widest QIs, boundaries between axis values that leave a quarter to three
    quarters of the rows on the left (at most 16, evenly spread) and the balanced one are scored by
    the children's summed spans weighted by their sizes, the children measured on their part of the
    sample; the cheapest wins. None when no boundary is allowed.
    """
    order = [int(j) for j in np.argsort(-spans, kind="mergesort")
             if spans[j] > 0.0 and int(j) not in banned][:2]
    keys = np.ascontiguousarray(summary.sample_keys)
    w, pos = summary.sample_w, summary.sample_pos
    complete = summary.exact and keys.shape[1] == summary.n
    n = int(round(summary.n))
    best = None
    for j in order:
        axis = _axis(summary, j, domain)
        if axis is None or len(axis[0]) < 2:
            continue
        values, counts, ranks = axis
        cum = np.cumsum(counts)
        lefts = np.round(cum[:-1] * (n / cum[-1])).astype(np.int64)
        allowed = np.flatnonzero((lefts >= min_size) & (n - lefts >= min_size))
        if allowed.size == 0:
            continue
        inside = allowed[(4 * lefts[allowed] >= n) & (4 * lefts[allowed] <= 3 * n)]
        if inside.size > 16:
            inside = inside[np.linspace(0, inside.size - 1, 16).round().astype(np.int64)]
        balanced = allowed[np.argmin(np.abs(2 * lefts[allowed] - n))]
        along = keys[j] if ranks is None else ranks[keys[j]]
        for r in np.union1d(inside, [balanced]):
            t = int(values[r])
            left = along <= t
            cost = 0.0
            for mask, n_side in ((left, lefts[r]), (~left, n - lefts[r])):
                rows = np.flatnonzero(mask)
                sk = keys.take(rows, axis=1)
                child = Summary.from_sample(sk, w[rows], pos[rows], float(n_side),
                                            _exact_slots(sk, domain), exact=complete)
                cost += n_side * float(region_spans(child, domain).sum())
            if best is None or cost < best[0]:
                best = (cost, Cut(j, t, t, NO_TIES, ranks, float(lefts[r])))
    return None if best is None else best[1]


def choose_cut(summary: Summary, domain: GlobalDomain, relaxed: bool, min_size: int,
               banned=(), objective: str = "balanced") -> Cut | None:
    """First allowed cut, trying QIs from the widest normalized span down
    (objective "ncp": the cheapest of the two widest QIs' cuts first)."""
    spans = region_spans(summary, domain)
    if objective == "ncp":
        cut = _cheapest_cut(summary, domain, min_size, banned, spans)
        if cut is not None:
            return cut
    for j in np.argsort(-spans, kind="mergesort"):
        if spans[j] <= 0.0:
            break
        if int(j) in banned:
            continue
        cut = find_cut(summary, int(j), domain, relaxed, min_size, objective)
        if cut is not None:
            return cut
    return None


def goes_left(cut: Cut, keys: np.ndarray, positions: np.ndarray | None) -> np.ndarray:
    """Which rows (columns of ``keys``, at input ``positions``) a cut sends left.

    The rule of :func:`dmondrian.partition.routing.route`.

    Examples
    --------
    >>> cut = Cut(qi=0, t=4, eq=5, tie_before=11, ranks=None, n_left=3.0)
    >>> goes_left(cut, np.array([[5, 3, 5, 9]]), np.array([10, 11, 12, 13])).tolist()
    [True, True, False, False]
    """
    v = keys[cut.qi]
    if cut.ranks is not None:
        v = cut.ranks[v]
    left = v <= cut.t
    if cut.tie_before > NO_TIES and positions is not None:
        left |= (v == cut.eq) & (positions < cut.tie_before)
    return left


def _exact_slots(keys: np.ndarray, domain: GlobalDomain) -> dict:
    return {j: (row, int(domain.slots[j])) for j, row in domain.slot_rows(keys).items()}


def planned_levels(summary: Summary, cfg: PlanConfig, complete: bool = False) -> int:
    """Levels a pass plans below a region: those a balanced tree needs, at least one,
    and no more than its sample supports (``cfg.sample_rows`` rows per expected
    leaf) unless the sample is the whole region.

    Examples
    --------
    >>> cfg = PlanConfig(min_size=5, relaxed=False, leaf_rows=1000, sample_rows=100)
    >>> big = Summary.from_sample(np.zeros((1, 3200)), np.ones(3200), np.arange(3200),
    ...                           1e6, {})
    >>> planned_levels(big, cfg), planned_levels(big, cfg, complete=True)
    (5, 11)
    """
    need = max(1.0, summary.n / (cfg.fill * cfg.leaf_rows))
    levels = max(1, int(np.ceil(np.log2(need))))
    if not complete:
        m = max(1, summary.sample_keys.shape[1])
        levels = min(levels, max(1, int(round(np.log2(m / cfg.sample_rows)))))
    return levels


def plan_subtree(summary: Summary, domain: GlobalDomain, cfg: PlanConfig, depth: int,
                 banned=(), levels: int | None = None) -> PlanNode:
    """Cut a region for up to ``levels`` levels, deeper levels decided on its sample.

    The root of the subtree uses ``summary`` (exact after a pass); its descendants use summaries
    estimated from the part of the sample they receive. Planning goes :func:`planned_levels` deep
    plus ``cfg.extra_levels``, and below a node stops when it is estimated to fit in ``cfg.fill *
    cfg.leaf_rows`` rows, when its sample gets too thin to be trusted, or at ``cfg.max_depth``.
    Every count used here is checked exactly by the next pass before a cut is kept.
    """
    complete = summary.exact and summary.sample_keys.shape[1] == summary.n
    if levels is None:
        levels = planned_levels(summary, cfg, complete) + cfg.extra_levels
    node = PlanNode(summary.n, summary)
    if (levels <= 0 or summary.n < 2 * cfg.min_size
            or (cfg.max_depth >= 0 and depth >= cfg.max_depth)
            or (not complete and summary.sample_keys.shape[1] < cfg.min_sample)):
        return node
    cut = choose_cut(summary, domain, cfg.relaxed, cfg.min_size, banned, cfg.objective)
    if cut is None:
        return node
    node.cut = cut
    # C order once, so each child's rows are gathered without copying the rest.
    keys = np.ascontiguousarray(summary.sample_keys)
    w, pos = summary.sample_w, summary.sample_pos
    left = goes_left(cut, keys, pos)
    exact_cut = (summary.exact and domain.specs[cut.qi].exact_counts
                 and cut.tie_before == NO_TIES and not complete)
    total_w = w.sum()
    sides = []
    for mask, n_exact in ((left, cut.n_left), (~left, summary.n - cut.n_left)):
        # Exact counts where the summary has them; otherwise the sample's share.
        n_side = n_exact if exact_cut or total_w == 0 else summary.n * w[mask].sum() / total_w
        rows = np.flatnonzero(mask)  # gathers by index: cheaper than a boolean mask on 2-D
        sk = keys.take(rows, axis=1)
        child = Summary.from_sample(sk, w[rows], pos[rows], n_side,
                                    _exact_slots(sk, domain), exact=complete)
        if n_side > cfg.fill * cfg.leaf_rows:
            sides.append(plan_subtree(child, domain, cfg, depth + 1, (), levels - 1))
        else:
            sides.append(PlanNode(n_side, child))
    node.left, node.right = sides
    return node
