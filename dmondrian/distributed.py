"""The distributed engine: Mondrian on a dask DataFrame larger than memory.

Algorithm
---------
The local engine (:mod:`dmondrian.local`) cuts a table in memory. Here the
table is a dask DataFrame, maybe far larger than a worker's memory, so the
cuts near the root are decided by the client from summaries, and only regions
that fit in memory ("leaves") are handed to the local engine.

1. **Domain pass.** One pass over every partition (QI columns only) measures
   each QI's global domain: row count, key bounds, category sets (values
   counts), missing counts, plus a uniform row sample
   (:mod:`dmondrian.domain`). The global domain fixes the codes and the
   scales that normalize spans everywhere, inside each leaf too, so a span
   means the same in every region and NCP is measured on one scale. The
   sample is sized before the pass, from the table's size (Parquet footers
   or in-memory frames give it; else the first partition's rows times the
   number of partitions) and the leaf size: ``SAMPLE_ROWS`` rows per leaf
   the table should make, so the next pass can plan the whole tree.
2. **Top phase.** While some region holds more than ``leaf_rows`` rows, the
   client decides cuts (:mod:`dmondrian.planner`) the way the local kernel
   would: the QI with the widest normalized span (``_kernel._node_span``),
   cut at the median. Nominal, ordinal and hierarchy QIs are cut with exact
   per-region value counts (frequency order / child boundary); numeric and
   datetime QIs at the median of the region's weighted row sample. One pass
   may decide several levels: below the first cut the client keeps cutting
   the region's sample (Mondrian on a per-region sample) until the pieces are
   estimated to fit, as deep as the sample supports (about ``SAMPLE_ROWS``
   sample rows per expected leaf).
   The cut values are embedded as constants in the graph of the next pass,
   which routes every row through the candidate tree and returns, per
   candidate region, an exact count, exact bounds and value counts, and a new
   sample (:mod:`dmondrian.sketch`; sketches are tree-reduced across
   partitions). A candidate cut leaving a side with fewer than ``k`` rows is
   undone (its regions merged back, that QI not tried again there).
   Approximation may cost information, never privacy: every kept cut is
   checked on exact counts. When the domain pass's sample planned the whole
   tree, :func:`anonymize_to_parquet` skips that counting pass: the shuffle
   pass counts every input partition's leaves as it routes them, and a
   verdict on the summed counts (:func:`_settle`), which every output
   partition waits for, undoes the disallowed cuts the same way (the leaves
   of an undone cut, all in one output partition, are cut again as one).
   Should an undone cut span output partitions, nothing is written and the
   counting pass runs after all.
3. **Shuffle.** Every row is routed to its leaf (a compiled walk down the
   cut tree, :mod:`dmondrian.routing`), leaves are packed into output
   partitions (runs of consecutive leaf ids) of up to ``TopPlan.bin_rows``
   rows: about as many as an input partition holds, within memory (see
   below),
   and each row is sent to its leaf's output partition by one of dask's
   shuffles (p2p on a distributed cluster), told the target partition of
   every row, not asked to search or sort for it. The QI columns travel as
   the global keys routing computed (codes in the narrowest integer type,
   :mod:`dmondrian.shipped_keys`), the other columns as they are; besides
   them only the leaf id (the narrowest integer type), the input position
   (as the index) and, unless every partition is indexed ``0..n-1`` as
   ``read_parquet`` gives it, the input index go through the shuffle.
4. **Leaves.** Each output partition first checks that it received exactly
   the rows the top phase counted for each of its leaves, gathers the keys
   into the kernel's buffer by leaf then input position (no second
   encoding), and runs the local
   engine's kernel on all its leaves in one call, each leaf an independent
   root at its depth below the table's root, with the global scales (on the
   host's cores per worker, so workers sharing a host do not oversubscribe
   it). Each leaf is cut exactly as the local engine would cut it alone.
5. **Output.** A lazy dask DataFrame with the input's columns, QIs published
   as the local engine publishes them (labels as strings), the input's index
   values (divisions unknown), rows grouped by leaf. ``class_column`` ids are
   ``leaf_id * 2**32 + local class id``: unique over the whole table.
   :func:`anonymize_to_parquet` instead writes each output partition from
   the task that anonymized it, labels as Parquet dictionaries
   (:mod:`dmondrian.parquet_sink`): about a third of the cost of writing
   them as strings.

Guarantees
----------
* Every class has at least ``k`` rows: leaves have at least ``k`` rows (a cut
  is kept only if exact counts allow it, and the root has ``n >= k``), the
  local engine keeps every class of a leaf at least ``k``, and each output
  partition refuses to publish a leaf whose row count differs from the
  counted one.
* Determinism: routing depends only on values and each row's input position
  (partition number and offset in it: median ties of relaxed cuts go left
  by input order, the local kernel's rule), samples on a hash of each row's
  position, and leaves are processed in input order, so retries, lost workers
  and repeated runs on the same input and partitioning give identical output.
* Relaxed mode splits median ties as the local engine does: the first tied
  rows in input order go left. So when the client plans from complete
  samples (the domain pass samples at least ``SAMPLE_ROWS * 64`` = 131,072
  rows, so smaller tables usually are), the top phase makes exactly the local
  engine's cuts and the release equals the local engine's, whatever
  ``leaf_rows``, in both modes. On a larger table the medians and tie splits
  are estimated from samples, so leaves differ somewhat from the local
  engine's nodes (their counts are still exact).
* With ``leaf_rows >= len(ddf)`` the single leaf is the whole table and the
  result equals :func:`dmondrian.local.anonymize`'s.
* The largest leaf has at most ``leaf_rows`` rows unless no allowed cut
  exists (e.g. more than ``leaf_rows`` rows with the same QI values).

Sizes and limits
----------------
* ``leaf_rows`` defaults to a tenth of one worker thread's memory divided by
  the measured in-memory size of a row (first partition), clipped to
  [1,000, 4,000,000]: a leaf is held about twice by the task that anonymizes it.
* An output partition packs leaves up to the input's mean partition size,
  at most what a quarter of a thread's memory holds (by the same measure)
  and never fewer than ``leaf_rows`` rows (``TopPlan.bin_rows``). The p2p
  shuffle splits every input partition into a shard per output partition,
  and its cost grows with their product: at 20M rows in 1M-row partitions,
  20 output partitions of ~1M rows instead of 80 of one ~250k-row leaf each
  took 13 % less CPU for the whole run.
* A top-phase pass reads only the QI columns. The domain pass's sample
  (``SAMPLE_ROWS`` rows per expected leaf, at most ``2**10`` leaves: 2M rows
  at the default) lets the first
  region pass plan the whole tree (plus one level for branches that uneven
  cuts leave too big); that pass's exact counts confirm it. So up to about
  ``1,000 * leaf_rows`` rows take 2 passes plus the shuffle; a region a pass
  leaves too big is sampled for six more levels the next pass. The first
  partition's row size (for the default ``leaf_rows``, and its row count
  when the table's size is not known) is measured alongside the domain
  pass. ``TopPlan.timings`` holds the wall time of every pass.
* p2p buffers up to ``distributed.p2p.comm.buffer`` (1 GiB by default) per
  worker: with workers of a few GB or less, lower it (e.g. to an eighth of
  the worker memory) or the shuffle, not the engine, runs out of memory.
* l-diversity and t-closeness: after the top phase, one more pass counts the
  sensitive values of every leaf exactly and undoes any top-phase cut whose
  children would break the constraint (the root passes it, or the request is
  refused before any work); each leaf's local run enforces it below, against
  the whole dataset's sensitive distribution.

Cluster
-------
:func:`anonymize` returns a lazy result, but the top phase needs a cluster
right away: the given ``client``, else the default client, else
``$DASK_SCHEDULER_ADDRESS``, else an embedded ``LocalCluster``
(:mod:`dmondrian.cluster`). An embedded cluster is closed before
:func:`anonymize` returns; the result is then computed by whatever scheduler
is active when you compute it. To run the whole job, writing included, on
one cluster, use :func:`anonymize_to_parquet` / :func:`anonymize_to_csv` or
:func:`dmondrian.cluster.session`.
"""

from __future__ import annotations

import numbers
import threading
import time
import uuid
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from . import _kernel as K
from ._dask.cluster import cores_per_worker, release, resolve_client, run, worker_memory_per_thread
from ._dask.domain_pass import build_domain, domain_sketch, merge_domain
from ._dask.parquet_sink import ParquetSink, check_column_names, empty_like
from ._dask.planner import Cut, PlanConfig, PlanNode, plan_subtree, sizes_allowed
from ._dask.routing import (
    EXACT_KINDS,
    CutTree,
    GlobalDomain,
    encode_keys,
    leaf_order,
    route,
    route_bins,
    row_positions,
    row_priority,
    slot_keys,
)
from ._dask.shipped_keys import (
    bin_encodings,
    gather_keys,
    key_dtypes,
    key_offsets,
    narrow_keys,
    qi_encodings,
)
from ._dask.sketch import Summary, merge_sketches, summarize
from .constraints import (
    KAnonymity,
    KernelPrivacy,
    encode_sensitive,
    kernel_privacy,
)
from .errors import InfeasibleError, InvalidValueError, ParameterError
from .local import encode_table, partition, publish
from .options import ANONYMIZE, DASK, DASK_PLAN, WRITE, takes_options
from .qi import QIKind
from .validation import Options, check_options

__all__ = ["anonymize", "anonymize_to_parquet", "anonymize_to_csv", "plan", "apply_plan",
           "TopPlan", "default_leaf_rows"]

#: Rows sampled per leaf the client expects to make; a region expected to
#: split into 2**L leaves is sampled with 2**L times this many rows.
SAMPLE_ROWS = 2048
#: The domain pass samples ``SAMPLE_ROWS`` rows for each of up to 2**10 leaves
#: the table is expected to make (2M rows, 80 MB of keys at the default), so
#: the first region pass can plan that many leaves.
_MAX_SAMPLE_LEVELS = 10
_MAX_ROUNDS = 64
_SPLIT_EVERY = 8
# What the shuffle carries: the QIs' global keys (not their values, see
# dmondrian.shipped_keys), every other column as it is, the input position (as
# the index), the leaf id, the output partition (dropped by the shuffle) and,
# unless every partition's index is its row positions, the input index.
_INDEX, _LEAF = "__dm_index", "__dm_leaf"
# The name dask's shuffles read target partition numbers from (hashing any other).
_BIN = "_partitions"
_ROW_MASK = np.int64(0xFFFFFFFF)
# The kernel is parallel inside; concurrent calls from several threads of
# one worker would oversubscribe its cores.
_KERNEL_LOCK = threading.Lock()
# One work space for the kernel's buffers per worker thread: output
# partitions come one after another, and fresh memory would be faulted in
# page by page each time. It stays with the thread (at most 1.25 x 2 x the
# largest output partition's rows x (QIs + 2) x 8 bytes, ~120 MB for 1M rows
# and 5 QIs), which the bins' memory share leaves room for.
_WORKSPACES = threading.local()


def _workspace() -> K.WorkSpace:
    ws = getattr(_WORKSPACES, "space", None)
    if ws is None:
        ws = _WORKSPACES.space = K.WorkSpace()
    return ws


def _string_dtype():
    try:
        return pd.StringDtype("pyarrow")
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return object


# -- step 0: options ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Options(Options):
    """The checked options, with ``hierarchies`` coerced to trees, plus what only
    the distributed engine needs: each QI's kind and ``leaf_rows``."""

    kinds: list
    leaf_rows: int | None


def _check_options(ddf, quasi_identifiers, k, leaf_rows, options) -> _Options:
    import dask.dataframe as dd

    if not isinstance(ddf, dd.DataFrame):
        raise ParameterError("ddf", f"expected a dask DataFrame, got {type(ddf).__name__}")
    checked = check_options(ddf.columns, quasi_identifiers, k, **options)
    if leaf_rows is not None and (isinstance(leaf_rows, bool)
                                  or not isinstance(leaf_rows, numbers.Integral)
                                  or leaf_rows < 1):
        raise ParameterError("leaf_rows", f"leaf_rows must be None or an integer >= 1, "
                                          f"got {leaf_rows!r}")
    # Encoding the empty meta frame raises the local engine's typed errors for
    # unsupported dtypes and kinds, and coerces hierarchy files to trees.
    probe = encode_table(ddf._meta, checked.qis, checked.hierarchies, checked.qi_kinds)
    trees = {qi.name: qi.hierarchy for qi in probe if qi.kind == QIKind.HIERARCHY}
    shared = {f.name: getattr(checked, f.name) for f in fields(Options)}
    return _Options(**{**shared, "hierarchies": trees}, kinds=[qi.kind for qi in probe],
                    leaf_rows=None if leaf_rows is None else int(leaf_rows))


def _row_bytes(meta: pd.DataFrame) -> float:
    row = 0.0
    for dtype in meta.dtypes:
        if isinstance(dtype, pd.CategoricalDtype):
            row += 4
        elif getattr(dtype, "itemsize", None) and dtype.kind in "biufcmM":
            row += dtype.itemsize
        else:
            row += 64
    return row


def default_leaf_rows(client, meta: pd.DataFrame, n_qis: int, row_bytes=None) -> int:
    """Leaf size from worker memory: a leaf's local run must fit one thread's share.

    An output partition holds its leaves' rows about twice (as received, and
    reordered) plus the engine's key buffers and labels for the QIs; a tenth
    of the per-thread memory leaves room for the shuffle's buffers and the
    Parquet writer. Clipped to [1,000, 4,000,000] rows.
    """
    per_thread = worker_memory_per_thread(client) if client is not None else None
    return _leaf_rows_for(per_thread, row_bytes or _row_bytes(meta), n_qis)


def _leaf_rows_for(per_thread: float | None, row_bytes: float, n_qis: int,
                   share: float = 0.1) -> int:
    if per_thread is None:
        per_thread = 2e9
    cost = 2 * row_bytes + 80 * n_qis
    return int(min(4_000_000, max(1_000, share * per_thread / cost)))


def _bin_rows(leaf_rows: int, n_rows: int, n_partitions: int, per_thread: float | None,
              row_bytes: float, n_qis: int) -> int:
    """Rows an output partition may pack: an input partition's mean, within memory.

    Output partitions as large as the input's keep the shuffle's shards as
    few as a plain shuffle's; a quarter of a thread's memory (by the leaf
    size's measure) bounds what one task holds, and one leaf always fits.
    """
    mean = -(-max(int(n_rows), 1) // max(int(n_partitions), 1))
    cap = _leaf_rows_for(per_thread, row_bytes, n_qis, share=0.25)
    return max(int(leaf_rows), min(mean, cap))


# -- step 1: the domain pass -------------------------------------------------------------------


def _tree_reduce(items, merge):
    """Merge delayed partials in a tree of fan-in ``_SPLIT_EVERY``."""
    from dask import delayed

    merge_d = delayed(merge, pure=True)
    while len(items) > 1:
        items = [merge_d(*items[i:i + _SPLIT_EVERY])
                 for i in range(0, len(items), _SPLIT_EVERY)]
    return items[0]


def _qi_partitions(ddf, qis):
    return ddf[qis].to_delayed(optimize_graph=True)


def _known_lengths(ddf) -> tuple | None:
    """Rows of every partition when dask knows them without reading the data, else None.

    Parquet footers and in-memory frames give them (the expression dask
    itself uses for ``len``); anything else would need a pass over the data.
    """
    try:
        from dask.dataframe.dask_expr._expr import Lengths, Literal

        expr = Lengths(ddf.expr).optimize(fuse=False)
    except Exception:  # noqa: BLE001 - a private API of dask: the probe is the fallback
        return None
    if isinstance(expr, Literal):
        lengths = tuple(int(v) for v in expr.value)
        if len(lengths) == ddf.npartitions:
            return lengths
    return None


def _probe(part: pd.DataFrame):
    """Rows of the first partition, and its in-memory bytes per row (None when empty)."""
    rows = len(part)
    return rows, float(part.memory_usage(deep=True).sum()) / rows if rows else None


@dataclass(frozen=True)
class _Sizing:
    """The leaf size and the domain pass's sample, fixed before the pass samples.

    The sample is the ``sample_size`` rows of smallest priority
    (``SAMPLE_ROWS`` per leaf the table is expected to make, for at least
    ``2**PlanConfig.max_levels`` leaves). A partition offers only its rows
    below ``rate``, twice the share the estimated size asks for, so the
    sample is exact unless the table is more than twice its estimate; a
    wrong estimate costs sample rows (then a pass), never client memory.
    """

    leaf_rows: int
    n_estimate: int
    sample_size: int
    rate: float
    #: Smallest memory of a worker thread (None if unknown) and the row size used.
    per_thread: float | None = None
    row_bytes: float = 0.0


def _expected_levels(n: float, leaf_rows: int, fill: float) -> int:
    """Levels of a balanced tree cutting ``n`` rows into leaves of ``fill * leaf_rows``."""
    return int(max(0.0, np.ceil(np.log2(max(n, 1.0) / (fill * leaf_rows)))))


def _sizing(probe, n_known, n_partitions, leaf_rows, per_thread, meta_row_bytes, n_qis, k,
            sample_rows) -> _Sizing:
    """Size the domain pass's sample from the table's (estimated) size and the leaf size.

    ``n_known`` is the exact row count when dask knows it, else the first
    partition's rows times the number of partitions estimate it.
    """
    first_rows, row_bytes = probe if probe is not None else (0, None)
    n_est = int(n_known) if n_known is not None else int(first_rows) * int(n_partitions)
    if leaf_rows is None:
        leaf_rows = _leaf_rows_for(per_thread, row_bytes or meta_row_bytes, n_qis)
    leaf_rows = max(int(leaf_rows), 2 * k)
    levels = _expected_levels(n_est, leaf_rows, PlanConfig.fill)
    levels = min(_MAX_SAMPLE_LEVELS, max(PlanConfig.max_levels, levels))
    size = int(sample_rows) * 2 ** levels
    return _Sizing(leaf_rows, n_est, size, min(1.0, 2.0 * size / max(n_est, 1)), per_thread,
                   float(row_bytes or meta_row_bytes))


def _domain_pass(client, ddf, opts: _Options, progress, sample_rows: int):
    """Pass 1: the global domain, the root's summary, and the leaf size."""
    from dask import delayed

    lengths = _known_lengths(ddf)
    probe = None
    if lengths is None or opts.leaf_rows is None:
        # The first partition, read alongside the pass, gives the row size of
        # the default leaf_rows and, without known lengths, the table's size.
        probe = delayed(_probe, pure=True)(ddf.to_delayed()[0])
    per_thread = worker_memory_per_thread(client)
    sizing = delayed(_sizing, pure=True)(
        probe, None if lengths is None else sum(lengths), ddf.npartitions, opts.leaf_rows,
        per_thread, _row_bytes(ddf._meta), len(opts.qis), opts.k, sample_rows)
    parts = _qi_partitions(ddf, opts.qis)
    sketch_d = delayed(domain_sketch, pure=True)
    partials = [sketch_d(p, i, opts.qis, opts.kinds, sizing.sample_size, rate=sizing.rate)
                for i, p in enumerate(parts)]
    merged, sizing = run(client, [_tree_reduce(partials, merge_domain), sizing], progress,
                         "pass 1: global domain")
    domain, root = build_domain(merged, opts.qis, opts.kinds, opts.hierarchies, ddf._meta)
    return domain, root, merged.positional_index, sizing


# -- step 2: the top phase ---------------------------------------------------------------------


@dataclass
class _Node:
    depth: int
    n: float
    summary: Summary | None = None
    cut: Cut | None = None
    left: int = -1
    right: int = -1
    banned: set = field(default_factory=set)
    fresh: bool = False
    done: bool = False


def _leaves(nodes, i=0, out=None):
    """Leaf node ids in depth-first, left-first order."""
    out = [] if out is None else out
    stack = [i]
    while stack:
        j = stack.pop()
        if nodes[j].cut is None:
            out.append(j)
        else:
            stack.append(nodes[j].right)
            stack.append(nodes[j].left)
    return out


def _graft(nodes, i, p: PlanNode) -> None:
    """Attach a planned subtree below node ``i``; new nodes are fresh candidates."""
    stack = [(i, p)]
    while stack:
        j, pn = stack.pop()
        nodes[j].cut = pn.cut
        for side, child in (("left", pn.left), ("right", pn.right)):
            nodes.append(_Node(nodes[j].depth + 1, child.n, child.summary, fresh=True))
            setattr(nodes[j], side, len(nodes) - 1)
            if child.cut is not None:
                stack.append((len(nodes) - 1, child))


def _cut_tree(nodes, leaves) -> CutTree:
    """Flat arrays of the tree reachable from the root; leaves numbered as ``leaves``."""
    order, index = [], {}
    stack = [0]
    while stack:
        j = stack.pop()
        index[j] = len(order)
        order.append(j)
        if nodes[j].cut is not None:
            stack.append(nodes[j].right)
            stack.append(nodes[j].left)
    m = len(order)
    qi = np.full(m, -1, dtype=np.int64)
    t = np.zeros(m, dtype=np.int64)
    eq = np.zeros(m, dtype=np.int64)
    tie_before = np.zeros(m, dtype=np.int64)
    rank_off = np.full(m, -1, dtype=np.int64)
    left = np.full(m, -1, dtype=np.int64)
    right = np.full(m, -1, dtype=np.int64)
    leaf = np.full(m, -1, dtype=np.int64)
    ranks, offset = [np.zeros(1, dtype=np.int64)], 1
    slot = {j: s for s, j in enumerate(leaves)}
    for pos, j in enumerate(order):
        c = nodes[j].cut
        if c is None:
            leaf[pos] = slot[j]
            continue
        qi[pos], t[pos], eq[pos], tie_before[pos] = c.qi, c.t, c.eq, c.tie_before
        if c.ranks is not None:
            rank_off[pos] = offset
            ranks.append(c.ranks)
            offset += c.ranks.shape[0]
        left[pos], right[pos] = index[nodes[j].left], index[nodes[j].right]
    return CutTree(qi, t, eq, tie_before, rank_off, np.concatenate(ranks), left, right, leaf)


@dataclass
class _PassSpec:
    domain: GlobalDomain
    tree: CutTree
    rates: np.ndarray


def _region_sketch(df: pd.DataFrame, partition_number: int, spec: _PassSpec):
    """One partition's contribution to a top-phase pass."""
    keys = encode_keys(df, spec.domain)
    positions = row_positions(partition_number, len(df))
    region = route(keys, spec.tree, positions)
    dom = spec.domain
    exact = {j: slot_keys(keys[j], j, dom) for j in range(dom.d) if dom.kinds[j] in EXACT_KINDS}
    return summarize(keys, region, spec.rates.shape[0], exact, dom.slots, spec.rates,
                     row_priority(partition_number, len(df)), positions)


def _sample_rate(n: float, cfg: PlanConfig, sample_rows: int) -> float:
    levels = min(_expected_levels(n, cfg.leaf_rows, cfg.fill), cfg.max_levels)
    return float(min(1.0, sample_rows * 2.0 ** levels / max(n, 1.0)))


def _region_pass(client, ddf, opts, domain, nodes, leaves, cfg, sample_rows, progress, label):
    from dask import delayed

    rates = np.asarray([_sample_rate(nodes[j].n, cfg, sample_rows) if nodes[j].fresh else 0.0
                        for j in leaves])
    spec = delayed(_PassSpec(domain, _cut_tree(nodes, leaves), rates), traverse=False,
                   name=f"dmondrian-cuts-{uuid.uuid4().hex}")
    sketch_d = delayed(_region_sketch, pure=True)
    parts = _qi_partitions(ddf, opts.qis)
    partials = [sketch_d(p, i, spec) for i, p in enumerate(parts)]
    return run(client, _tree_reduce(partials, merge_sketches), progress, label)


def _subtree_count(nodes, i) -> float:
    nd = nodes[i]
    if nd.cut is None:
        return nd.n
    return _subtree_count(nodes, nd.left) + _subtree_count(nodes, nd.right)


def _keep_allowed_cuts(nodes, i, k) -> None:
    """Undo every cut below ``i`` whose exact child counts break the constraint."""
    stack = [i]
    while stack:
        j = stack.pop()
        nd = nodes[j]
        if nd.cut is None:
            continue
        nl, nr = _subtree_count(nodes, nd.left), _subtree_count(nodes, nd.right)
        if sizes_allowed(nl, nr, k):
            stack.extend((nd.left, nd.right))
            continue
        nd.summary = Summary.merge([nodes[x].summary for x in _leaves(nodes, j)])
        nd.n = nl + nr
        nd.banned.add(nd.cut.qi)
        nd.cut, nd.left, nd.right = None, -1, -1


@dataclass
class TopPlan:
    """Everything the shuffle phase needs, and what the top phase measured.

    Attributes
    ----------
    domain : GlobalDomain
        Global encoding and scales.
    tree : CutTree
        The kept cuts; leaf ``i`` of the tree is leaf id ``i``.
    leaf_counts, leaf_depths : ndarray
        Exact rows and depth of every leaf.
    bins : list of list of int
        Leaf ids of every output partition.
    passes : int
        Passes over the data made by the top phase (domain pass included); the
        shuffle pass of :func:`anonymize_to_parquet` may do the last one's counting.
    leaf_rows : int
        The leaf size used.
    timings : dict
        Wall seconds of each pass run so far, by label.
    kernel_threads : int or None
        Threads one task's kernel may use (the host's cores per worker).
    positional_index : bool
        Whether every input partition's index was its row positions.
    """

    domain: GlobalDomain
    tree: CutTree
    leaf_counts: np.ndarray
    leaf_depths: np.ndarray
    bins: list
    passes: int
    leaf_rows: int
    options: _Options
    columns: list
    index_name: object
    sensitive: _Sensitive | None = None
    #: Wall seconds of each step run so far, in order (``{label: seconds}``).
    timings: dict = field(default_factory=dict)
    #: Threads the kernel may use in one task (None: OpenMP's default).
    kernel_threads: int | None = None
    #: Every input partition's index is 0..n-1: the shuffle ships no index column
    #: (the position restores it).
    positional_index: bool = False
    #: Whether ``leaf_counts`` are exact. False only for a plan whose counts are
    #: left to the shuffle pass (:func:`_write_parquet_counting`); such a plan
    #: cannot be applied lazily.
    counted: bool = True
    #: Cuts of the candidate tree that the exact counts undid in the shuffle pass.
    undone_cuts: int = 0
    #: Rows an output partition may pack (:func:`_bin_rows`); 0 means ``leaf_rows``.
    bin_rows: int = 0
    #: Every QI's encoding without keys (:func:`dmondrian.shipped_keys.qi_encodings`).
    encodings: list = field(default_factory=list)

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_counts.shape[0])

    @property
    def leaf_dtype(self) -> np.dtype:
        """Narrowest integer type holding every leaf id (fewer bytes through the shuffle)."""
        return np.min_scalar_type(-max(1, self.n_leaves))

    @property
    def key_dtypes(self) -> list:
        """The type each QI's keys travel in through the shuffle."""
        return key_dtypes(self.domain)

    @property
    def key_offsets(self) -> list:
        """What each QI's keys travel as an offset above (see :mod:`dmondrian.shipped_keys`)."""
        return key_offsets(self.domain)

    @property
    def bin_of_leaf(self) -> np.ndarray:
        """Output partition of every leaf (read-only; computed once per ``bins``)."""
        cached = self.__dict__.get("_bin_of_leaf")
        if cached is None or cached[0] is not self.bins:
            out = np.empty(self.n_leaves, dtype=np.int64)
            for b, ids in enumerate(self.bins):
                out[ids] = b
            out.flags.writeable = False
            cached = self.__dict__["_bin_of_leaf"] = (self.bins, out)
        return cached[1]


def _pack_bins(counts: np.ndarray, bin_rows: int) -> list:
    """Consecutive leaves per output partition, at most ``bin_rows`` rows each (or one leaf)."""
    bins, current, rows = [], [], 0
    for i, c in enumerate(counts.tolist()):
        if current and rows + c > bin_rows:
            bins.append(current)
            current, rows = [], 0
        current.append(i)
        rows += c
    bins.append(current)
    return bins


@takes_options(ANONYMIZE, DASK_PLAN)
def plan(ddf, quasi_identifiers, k, *, sample_rows=SAMPLE_ROWS, _defer_counts=False,
         **options) -> TopPlan:
    """Run the domain pass and the top phase; return the cut tree (steps 1-2).

    Parameters are those of :func:`anonymize`; ``sample_rows`` sets the
    sample size per expected leaf (larger: more accurate medians, bigger
    sketches). The passes run now, on the resolved cluster. (``_defer_counts``
    is :func:`anonymize_to_parquet`'s: see :func:`_write_parquet_counting`.)

    Returns
    -------
    TopPlan
    """
    anonymize_options = {name: options[name] for name in ANONYMIZE}
    opts = _check_options(ddf, quasi_identifiers, k, options["leaf_rows"], anonymize_options)
    cluster_client, owned = resolve_client(options["client"])
    try:
        return _plan(cluster_client, ddf, opts, options["progress"], int(sample_rows),
                     defer_counts=_defer_counts)
    finally:
        release(owned)


def _plan(client, ddf, opts: _Options, progress, sample_rows: int,
          defer_counts: bool = False) -> TopPlan:
    timings, clock = {}, time.perf_counter()

    def lap(label):
        nonlocal clock
        now = time.perf_counter()
        timings[label] = now - clock
        clock = now

    domain, root, positional, sizing = _domain_pass(client, ddf, opts, progress, sample_rows)
    leaf_rows = sizing.leaf_rows
    cfg = PlanConfig(opts.k, opts.mode == "relaxed", leaf_rows, opts.max_depth,
                     sample_rows=sample_rows)
    lap("pass 1: domain (and leaf size)")
    if domain.n_rows == 0:
        raise InfeasibleError("the table is empty: there is nothing to anonymize")
    KAnonymity(opts.k).check_table(domain.n_rows)
    nodes = [_Node(0, root.n, root)]

    def needs_cut(j):
        nd = nodes[j]
        return (nd.n > leaf_rows and nd.n >= 2 * opts.k and not nd.done
                and (opts.max_depth < 0 or nd.depth < opts.max_depth))

    passes, open_ = 1, [j for j in [0] if needs_cut(j)]
    counted = True
    while open_ and passes <= _MAX_ROUNDS:
        roots = []
        for j in open_:
            sub = plan_subtree(nodes[j].summary, domain, cfg, nodes[j].depth, nodes[j].banned)
            if sub.cut is None:
                nodes[j].done = True
            else:
                _graft(nodes, j, sub)
                roots.append(j)
        if not roots:
            break
        if (defer_counts and passes == 1 and opts.sensitive is None
                and not any(needs_cut(j) for j in _leaves(nodes))):
            # The domain sample planned the whole tree: its exact counts can
            # come from the shuffle pass itself (the plan is then uncounted).
            counted = False
            break
        leaves = _leaves(nodes)
        passes += 1
        sketch = _region_pass(client, ddf, opts, domain, nodes, leaves, cfg, sample_rows,
                              progress, f"pass {passes}: cut {len(roots)} region(s)")
        lap(f"pass {passes}: cut {len(roots)} region(s)")
        for slot, j in enumerate(leaves):
            if nodes[j].fresh:
                nodes[j].summary = sketch.region(slot)
                nodes[j].n = nodes[j].summary.n
                nodes[j].fresh = False
        for j in roots:
            _keep_allowed_cuts(nodes, j, opts.k)
        open_ = [j for j in _leaves(nodes) if needs_cut(j)]
    sens = None
    if opts.sensitive is not None:
        sens = _sensitive_domain(client, ddf, opts, progress)
        passes += 2
        _keep_diverse_cuts(nodes, _leaf_histograms(client, ddf, opts, domain, nodes, sens,
                                                   progress), sens)
        lap("sensitive passes")
    leaves = _leaves(nodes)
    counts = np.asarray([int(round(nodes[j].n)) for j in leaves], dtype=np.int64)
    depths = np.asarray([nodes[j].depth for j in leaves], dtype=np.int64)
    bin_rows = _bin_rows(leaf_rows, domain.n_rows, ddf.npartitions, sizing.per_thread,
                         sizing.row_bytes, len(opts.qis))
    return TopPlan(domain, _cut_tree(nodes, leaves), counts, depths,
                   _pack_bins(counts, bin_rows), passes, leaf_rows, opts,
                   list(ddf.columns), ddf._meta.index.name, sens, timings,
                   cores_per_worker(client), positional, counted, bin_rows=bin_rows,
                   encodings=qi_encodings(domain, ddf._meta))


# -- step 2b: sensitive constraints on exact leaf histograms ------------------------------------


@dataclass
class _Sensitive:
    """The sensitive column's global domain and the constraints in kernel form."""

    values: list
    ordered: bool
    privacy: KernelPrivacy

    def codes(self, column: pd.Series) -> np.ndarray:
        return pd.Categorical(column, categories=self.values).codes.astype(np.int64)


def _sensitive_domain(client, ddf, opts: _Options, progress) -> _Sensitive:
    """One pass: the sensitive values and counts; infeasible requests fail here."""
    counts = run(client, ddf[opts.sensitive].value_counts(dropna=False), progress,
                 "pass: sensitive values")
    if counts.index.isna().any():
        raise InvalidValueError(
            opts.sensitive, f"sensitive column {opts.sensitive!r} has missing values; "
            "l-diversity and t-closeness need every row's sensitive value")
    dtype = ddf._meta[opts.sensitive].dtype
    if isinstance(dtype, pd.CategoricalDtype) and dtype.ordered:
        values = [v for v in dtype.categories if v in counts.index]
    else:
        values = sorted(counts.index.tolist())
    sample = pd.Series(values, dtype=dtype if isinstance(dtype, pd.CategoricalDtype) else None,
                       name=opts.sensitive)
    ordered = encode_sensitive(sample)[2]
    n = counts.reindex(values).to_numpy(dtype=float)
    for cst in opts.constraints:
        cst.check_distribution(n)
    privacy = kernel_privacy(opts.constraints, np.zeros(1, dtype=np.int64), len(values),
                             ordered, distribution=n / n.sum())
    return _Sensitive(values, ordered, privacy)


def _partition_leaf_histogram(df, partition_number, tree, domain, sens: _Sensitive, column,
                              n_leaves):
    keys = encode_keys(df, domain)
    leaf = route(keys, tree, row_positions(partition_number, len(df)))
    S = len(sens.values)
    return np.bincount(leaf * S + sens.codes(df[column]), minlength=n_leaves * S)


def _leaf_histograms(client, ddf, opts, domain, nodes, sens: _Sensitive, progress):
    """Exact sensitive-value counts of every current leaf: ``{node id: counts}``."""
    from dask import delayed

    leaves = _leaves(nodes)
    tree = delayed(_cut_tree(nodes, leaves), traverse=False,
                   name=f"dmondrian-tree-{uuid.uuid4().hex}")
    parts = ddf[[*opts.qis, opts.sensitive]].to_delayed(optimize_graph=True)
    hist_d = delayed(_partition_leaf_histogram, pure=True)
    partials = [hist_d(p, i, tree, domain, sens, opts.sensitive, len(leaves))
                for i, p in enumerate(parts)]
    total = run(client, _tree_reduce(partials, lambda *a: np.sum(a, axis=0)), progress,
                "pass: sensitive values per leaf")
    flat = np.asarray(total).reshape(len(leaves), len(sens.values))
    return {j: flat[slot] for slot, j in enumerate(leaves)}


def _keep_diverse_cuts(nodes, leaf_hist: dict, sens: _Sensitive) -> None:
    """Undo, from the root down, every cut whose children break a sensitive constraint.

    The root satisfies the constraints (checked on the whole table), and a cut
    is kept only if both children's exact histograms pass, so every remaining
    leaf passes: the local engine then starts each leaf from a valid node.
    """
    ip, fp, q = sens.privacy.ip, sens.privacy.fp, sens.privacy.q

    def hist(j):
        if nodes[j].cut is None:
            return leaf_hist[j]
        return hist(nodes[j].left) + hist(nodes[j].right)

    stack = [0]
    while stack:
        j = stack.pop()
        nd = nodes[j]
        if nd.cut is None:
            continue
        hl, hr = hist(nd.left), hist(nd.right)
        if (K.hist_ok(hl, int(hl.sum()), ip, fp, q)
                and K.hist_ok(hr, int(hr.sum()), ip, fp, q)):
            stack.extend((nd.left, nd.right))
            continue
        leaf_hist[j] = hl + hr
        nd.n = _subtree_count(nodes, j)
        nd.cut, nd.left, nd.right = None, -1, -1


# -- step 3: route, shuffle, run the local engine per leaf -------------------------------------


def _carried(top: TopPlan) -> tuple[list, list, list]:
    """Positions, internal and own names of the columns that travel as they are
    (all but the QIs)."""
    qis = set(top.options.qis)
    at = [i for i, c in enumerate(top.columns) if c not in qis]
    return at, [f"__dm_c{i}" for i in at], [top.columns[i] for i in at]


def _key_names(top: TopPlan) -> list:
    return [f"__dm_k{j}" for j in range(top.domain.d)]


def _attach_leaf(df: pd.DataFrame, top: TopPlan, partition_info=None) -> pd.DataFrame:
    """Route a partition's rows: index them by input position, add leaf and output partition.

    The QI columns are replaced by their keys (:mod:`dmondrian.shipped_keys`).
    The input index, unless it is the positions 0..n-1, rides along as a column.
    """
    number = partition_info["number"] if partition_info else 0
    keys = encode_keys(df, top.domain)
    # The positions that split relaxed ties also order each leaf's rows for
    # the local engine. They travel as the index: the p2p shuffle ships the
    # index whatever it is, so a position column would cost 8 bytes a row more.
    positions = row_positions(number, len(df))
    leaf, bins = route_bins(keys, top.tree, positions, top.bin_of_leaf, top.leaf_dtype)
    if top.positional_index:
        if not (isinstance(df.index, pd.RangeIndex) and df.index.start == 0
                and df.index.step == 1):
            raise RuntimeError(
                f"dmondrian: input partition {number} no longer has the index 0..n-1 it had "
                "in the domain pass; the input must be deterministic")
    # The new columns join as Series on the output's own index: pandas then takes
    # them as they are (copying arrays handed to it bare costs 5 ms a million rows).
    index = pd.Index(positions, copy=False)
    at, internal, _ = _carried(top)
    out = df.iloc[:, at].set_axis(internal, axis=1).set_axis(index, axis=0)
    try:
        shipped = narrow_keys(keys, top.key_dtypes, top.key_offsets, top.domain.names)
    except ValueError as e:
        raise RuntimeError(f"dmondrian: input partition {number}: {e}; the input must be "
                           "deterministic") from None
    for name, column in zip(_key_names(top), shipped, strict=True):
        out[name] = pd.Series(column, index=index, copy=False)
    if not top.positional_index:
        out[_INDEX] = df.index  # as it is (a MultiIndex makes no Series)
    out[_LEAF] = pd.Series(leaf, index=index, copy=False)
    out[_BIN] = pd.Series(bins, index=index, copy=False)
    return out


def _label_columns(top: TopPlan) -> list:
    opts = top.options
    numbers = (QIKind.NUMERIC, QIKind.DATETIME)
    return [q for q, kind in zip(opts.qis, opts.kinds, strict=True)
            if opts.generalization == "range" or kind not in numbers]


def _release_bin(routed: pd.DataFrame, order, frame: pd.DataFrame, ids, starts, depths,
                 top: TopPlan) -> pd.DataFrame:
    """The local engine on every leaf of one output partition, in one call.

    ``routed`` is the partition as the shuffle delivered it; ``order`` lists
    its rows grouped by leaf in input order, and ``frame`` holds its other
    columns in that order (for the sensitive one). Leaf ``ids[i]``,
    ``depths[i]`` cuts below the root, starts at row ``starts[i]``. The
    shipped keys are gathered straight into the kernel's buffer and the
    kernel cuts each leaf as its own root (:func:`dmondrian.local.partition`'s
    ``roots``), ``depth`` cuts below the table's root: leaves never mix, and
    each is cut exactly as a run of the local engine on it alone would cut it
    (codes keep the global order; spans use the global scales). Returns the
    published QI columns (labels as Categoricals) and the class column if asked.
    """
    opts = top.options
    privacy, sensitive = None, []
    if top.sensitive is not None:
        base = top.sensitive.privacy
        # Each leaf is checked against the whole dataset's distribution
        # (t-closeness), not its own.
        privacy = KernelPrivacy(base.ip, base.fp, base.q, top.sensitive.codes(
            frame[opts.sensitive]))
        sensitive = [privacy.sensitive_codes]
    roots = np.column_stack([starts, depths]).astype(np.int64)
    d, n = top.domain.d, len(order)
    workspace = _workspace()
    # The layout local.partition builds in this work space: keys, the
    # sensitive codes, then the row ids.
    key_rows = workspace.buffer(d + len(sensitive) + 1, n)[0, :d]
    for j, (name, offset) in enumerate(zip(_key_names(top), top.key_offsets, strict=True)):
        gather_keys(routed[name].to_numpy(), order, key_rows[j], offset)
    encoded = bin_encodings(top.encodings, key_rows)
    # The thread budget (this thread's) sizes the kernel and the local
    # engine's per-column thread pools alike: one worker core, one thread.
    with K.thread_limit(top.kernel_threads):
        with _KERNEL_LOCK:
            part = partition(encoded, opts.k, mode=opts.mode, max_depth=opts.max_depth,
                             scales=top.domain.scales, privacy=privacy, roots=roots,
                             workspace=workspace)
        out = publish(pd.DataFrame(index=frame.index), encoded, part, opts.generalization)
    if opts.class_column is not None:
        # Ids unique over the table: the leaf id, then the class's rank in its leaf.
        first = part.stats[0][starts]
        run = np.repeat(np.arange(len(ids)), np.diff(np.append(starts, n)))
        out[opts.class_column] = ((np.asarray(ids, dtype=np.int64)[run] << np.int64(32))
                                  + part.class_of_row - first[run])
    return out


def _as_strings(column: pd.Series) -> pd.Series:
    """Published labels as pyarrow strings: one ``take`` of the distinct labels.

    (``Categorical.astype(string)`` builds a Python string per row, which costs
    more than the whole Mondrian run of the leaf.)
    """
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return column.astype(_string_dtype())
    import pyarrow as pa

    categories = column.cat.categories
    if pd.api.types.is_string_dtype(categories.dtype) and categories.inferred_type == "string":
        # One C-level conversion, not a Python str() per category.
        labels = pa.array(categories.to_numpy(dtype=object), type=pa.large_string())
    else:
        labels = pa.array([str(c) for c in categories], type=pa.large_string())
    codes = column.cat.codes.to_numpy()
    values = labels.take(pa.array(codes, mask=codes < 0))
    return pd.Series(pd.arrays.ArrowStringArray(values), index=column.index, name=column.name)


def _bin_frame(df: pd.DataFrame, top: TopPlan, partition_info,
               verdict: _Verdict | None = None) -> pd.DataFrame | None:
    """One output partition's rows, anonymized, in leaf then input order.

    Every column keeps its input dtype but the published ones (labels as
    Categoricals, ``generalization`` numbers, the class column). None when
    the partition is empty. Only the QI columns go through the engine; the
    other columns (maybe wide) are reordered once and never copied again.
    An uncounted plan comes with the ``verdict`` of its exact counts.
    """
    if verdict is None and not top.counted:
        raise RuntimeError("dmondrian: an uncounted plan needs its verdict")
    exact = top.leaf_counts if verdict is None else verdict.counts
    b = partition_info["number"] if partition_info else None
    # A candidate leaf of an uncounted plan may hold no row: it cannot arrive.
    expected = [i for i in top.bins[b] if exact[i] > 0] if b is not None else []
    positions = df.index.to_numpy(dtype=np.int64)
    order, ids, starts, counts = leaf_order(df[_LEAF].to_numpy(dtype=np.int64), positions,
                                            top.n_leaves)
    if ids.tolist() != list(expected) or not np.array_equal(counts, exact[ids]):
        # A leaf cut short would publish classes that were never counted.
        raise RuntimeError(
            f"dmondrian: output partition {b} received leaves {ids.tolist()} with "
            f"{counts.tolist()} rows; expected leaves {list(expected)} with "
            f"{exact[expected].tolist()} rows. Refusing to publish.")
    if len(df) == 0:
        return None
    _, internal, names = _carried(top)
    frame = df[internal if top.positional_index else [*internal, _INDEX]].take(order)
    index = (positions[order] & _ROW_MASK if top.positional_index
             else frame.pop(_INDEX).to_numpy())
    frame.columns = names
    frame.index = pd.Index(index, name=top.index_name)
    depths = top.leaf_depths[ids]
    if verdict is not None:
        # Leaves whose cut the exact counts undid are cut again as one root.
        keep = np.flatnonzero(np.diff(verdict.root[ids], prepend=-1) != 0)
        ids, starts, depths = verdict.root[ids][keep], starts[keep], verdict.depth[ids][keep]
    published = _release_bin(df, order, frame, ids, starts, depths, top)
    for col in published.columns:
        frame[col] = published[col].array
    # The input's column order (the QIs were added last), then the class column.
    return frame[[*top.columns, *(c for c in published.columns if c not in top.options.qis)]]


def _anonymize_bin(df: pd.DataFrame, top: TopPlan, meta: pd.DataFrame,
                   partition_info=None) -> pd.DataFrame:
    """Run the local engine on every leaf of one output partition; labels as strings."""
    frame = _bin_frame(df, top, partition_info)
    if frame is None:
        return meta
    for q in _label_columns(top):
        frame[q] = _as_strings(frame[q])
    return _conform(frame, meta)


def _conform(frame: pd.DataFrame, meta: pd.DataFrame, keep=()) -> pd.DataFrame:
    """``frame``'s columns in ``meta``'s order and dtypes, but the columns in ``keep``."""
    frame = frame[list(meta.columns)]
    mismatched = {c: t for c, t in meta.dtypes.items() if c not in keep and frame[c].dtype != t}
    return frame.astype(mismatched) if mismatched else frame


def _output_meta(meta: pd.DataFrame, top: TopPlan) -> pd.DataFrame:
    out = meta.copy()
    opts = top.options
    for q, kind in zip(opts.qis, opts.kinds, strict=True):
        if opts.generalization != "range" and kind == QIKind.NUMERIC:
            out[q] = out[q].astype(np.float64)
    for q in _label_columns(top):
        out[q] = out[q].astype(_string_dtype())
    if opts.class_column is not None:
        out[opts.class_column] = np.zeros(0, dtype=np.int64)
    return out


def _shuffled(ddf, top: TopPlan, shuffle_method):
    """The routed rows moved to their output partitions, and the plan as a graph constant."""
    from dask import delayed

    if not top.counted:
        raise ParameterError("top", "this plan's leaf counts are not exact yet; only "
                                    "anonymize_to_parquet can apply it")
    spec = delayed(top, traverse=False, name=f"dmondrian-plan-{uuid.uuid4().hex}")
    routed = ddf.map_partitions(_attach_leaf, spec, meta=_routed_meta(ddf, top))
    return _shuffle_to_bins(routed, len(top.bins), shuffle_method), spec


def _routed_meta(ddf, top: TopPlan) -> pd.DataFrame:
    _, internal, names = _carried(top)
    routed_meta = ddf._meta[names].set_axis(internal, axis=1)
    for name, dtype in zip(_key_names(top), top.key_dtypes, strict=True):
        routed_meta[name] = np.zeros(0, dtype=dtype)
    if not top.positional_index:
        routed_meta[_INDEX] = ddf._meta.index
    routed_meta[_LEAF] = np.zeros(0, dtype=top.leaf_dtype)
    routed_meta[_BIN] = np.zeros(0, dtype=np.int64)
    routed_meta.index = pd.Index(np.zeros(0, dtype=np.int64))
    return routed_meta


def _shuffle_to_bins(routed, n_bins: int, shuffle_method):
    """Move every row to the output partition its ``_partitions`` column names.

    dask's own shuffles (p2p, tasks, disk) take a column of this name as the
    target partitions themselves, which is what ``set_index`` lowers to after
    computing it with a binary search. Here it is computed while routing, so
    the shuffle is built directly: no search, and no ``set_index`` that
    would copy and sort every output partition only for the engine to
    reorder it again. (dask's ``Shuffle`` expression is internal; it has
    taken these arguments since dask-expr moved into dask, 2025.1.)
    """
    from dask.dataframe.dask_expr._collection import new_collection
    from dask.dataframe.dask_expr._shuffle import Shuffle

    return new_collection(Shuffle(routed.expr, _BIN, n_bins, False, shuffle_method))


def apply_plan(ddf, top: TopPlan, shuffle_method=None):
    """Build the lazy shuffle-and-anonymize graph for a plan (steps 3-4).

    ``shuffle_method`` goes to ``set_index``; None lets dask choose when the
    graph is computed (p2p with a default distributed client, else on disk).

    Returns
    -------
    dask.dataframe.DataFrame
    """
    shuffled, spec = _shuffled(ddf, top, shuffle_method)
    meta = _output_meta(ddf._meta, top)
    return shuffled.map_partitions(_anonymize_bin, spec, meta, meta=meta,
                                   clear_divisions=True)


def _write_bin(df: pd.DataFrame, top: TopPlan, sink: ParquetSink, meta: pd.DataFrame,
               partition_info=None, verdict=None) -> pd.DataFrame:
    """Anonymize one output partition and write it; return its row count."""
    labels = _label_columns(top)
    frame = _bin_frame(df, top, partition_info, verdict)
    if frame is None:
        frame = empty_like(meta, labels)
    # Labels stay Categoricals: the sink writes them as Parquet dictionaries.
    frame = _conform(frame, meta, keep=labels)
    number = partition_info["number"] if partition_info else 0
    return pd.DataFrame({"rows": [sink.write(frame, number)]})


def _write_parquet(ddf, top: TopPlan, sink: ParquetSink, shuffle_method):
    """The lazy graph that anonymizes every output partition and writes it with ``sink``."""
    from dask import delayed

    if not top.counted:
        return _write_parquet_counting(ddf, top, sink, shuffle_method)
    shuffled, spec = _shuffled(ddf, top, shuffle_method)
    sink_d = delayed(sink, traverse=False, name=f"dmondrian-sink-{uuid.uuid4().hex}")
    return shuffled.map_partitions(_write_bin, spec, sink_d, _output_meta(ddf._meta, top),
                                   meta=pd.DataFrame({"rows": np.zeros(0, dtype=np.int64)}),
                                   clear_divisions=True)


# -- step 3b: exact counts from the shuffle pass itself -----------------------------------------


class _Recount(Exception):
    """The exact counts undid a cut the output partitions cannot undo alone."""


@dataclass
class _Verdict:
    """The exact counts of an uncounted plan, and the cuts they keep.

    ``counts[i]`` is candidate leaf ``i``'s exact row count; ``root[i]`` the
    first candidate leaf of the leaf it ends in (itself, unless a cut above it
    was undone) and ``depth[i]`` that leaf's depth.
    """

    counts: np.ndarray
    root: np.ndarray
    depth: np.ndarray
    undone: int


def _leaf_counts(routed: pd.DataFrame, n_leaves: int) -> np.ndarray:
    return np.bincount(routed[_LEAF].to_numpy(dtype=np.int64), minlength=n_leaves)


def _sum_counts(*parts) -> np.ndarray:
    return np.sum(parts, axis=0)


def _settle(counts: np.ndarray, top: TopPlan) -> _Verdict:
    """Check every cut of the candidate tree on exact counts (``_keep_allowed_cuts``).

    A disallowed cut is undone, from the root down; its leaves become one.
    That is done by the output partition holding them, so a disallowed cut
    whose leaves lie in several partitions, or a partition holding far more
    rows than planned, raises :class:`_Recount` before anything is written.
    """
    tree, k = top.tree, top.options.k
    m = tree.qi.shape[0]
    sub = np.zeros(m, dtype=np.int64)
    first = np.zeros(m, dtype=np.int64)
    last = np.zeros(m, dtype=np.int64)
    # Children have larger node numbers than their parent (preorder).
    for i in range(m - 1, -1, -1):
        if tree.qi[i] < 0:
            sub[i] = counts[tree.leaf[i]]
            first[i] = last[i] = tree.leaf[i]
        else:
            lt, rt = tree.left[i], tree.right[i]
            sub[i] = sub[lt] + sub[rt]
            first[i], last[i] = first[lt], last[rt]
    root = np.arange(top.n_leaves, dtype=np.int64)
    depth = top.leaf_depths.copy()
    bin_of = top.bin_of_leaf
    undone, stack = 0, [(0, 0)]
    while stack:
        i, level = stack.pop()
        if tree.qi[i] < 0:
            continue
        lt, rt = tree.left[i], tree.right[i]
        if sizes_allowed(sub[lt], sub[rt], k):
            stack.extend(((lt, level + 1), (rt, level + 1)))
            continue
        if bin_of[first[i]] != bin_of[last[i]]:
            raise _Recount(f"a cut with {sub[lt]} | {sub[rt]} rows spans output partitions")
        undone += 1
        root[first[i]:last[i] + 1] = first[i]
        depth[first[i]:last[i] + 1] = level
    per_bin = np.bincount(bin_of, weights=counts, minlength=len(top.bins))
    bin_rows = max(top.bin_rows, top.leaf_rows)
    if per_bin.max() > 2 * bin_rows:
        raise _Recount(f"an output partition holds {int(per_bin.max())} rows, "
                       f"over twice the {bin_rows} planned")
    return _Verdict(np.asarray(counts, dtype=np.int64), root, depth, undone)


def _write_parquet_counting(ddf, top: TopPlan, sink: ParquetSink, shuffle_method):
    """Write an uncounted plan: the shuffle pass counts its leaves exactly on the way.

    Each input partition is routed once; its leaf counts are summed (tree
    reduction) into a verdict (:func:`_settle`) that every output partition
    waits for. The counts are complete when the shuffle's inputs are, so no
    output partition waits longer or holds more memory; it then checks what
    it received against the exact counts, as after a counting pass. This
    saves the top phase's last pass, which only counted.

    Returns
    -------
    list of dask.delayed.Delayed
        One row-count frame per output partition, then the verdict.
    """
    import dask.dataframe as dd
    from dask import delayed

    spec = delayed(top, traverse=False, name=f"dmondrian-plan-{uuid.uuid4().hex}")
    sink_d = delayed(sink, traverse=False, name=f"dmondrian-sink-{uuid.uuid4().hex}")
    attach = delayed(_attach_leaf, pure=True)
    # Delayed routed partitions, so that the counts and the shuffle share them.
    routed = [attach(p, spec, {"number": i})
              for i, p in enumerate(ddf.to_delayed(optimize_graph=True))]
    count = delayed(_leaf_counts, pure=True)
    totals = _tree_reduce([count(r, top.n_leaves) for r in routed], _sum_counts)
    verdict = delayed(_settle, pure=True)(totals, spec)
    routed_ddf = dd.from_delayed(routed, meta=_routed_meta(ddf, top), verify_meta=False)
    shuffled = _shuffle_to_bins(routed_ddf, len(top.bins), shuffle_method)
    write = delayed(_write_bin, pure=True)
    meta = _output_meta(ddf._meta, top)
    return [*(write(part, spec, sink_d, meta, {"number": b}, verdict)
              for b, part in enumerate(shuffled.to_delayed(optimize_graph=True))), verdict]


# -- entry points ------------------------------------------------------------------------------


@takes_options(ANONYMIZE, DASK)
def anonymize(ddf, quasi_identifiers, k, **options):
    """k-anonymize a dask DataFrame with Mondrian; returns a lazy dask DataFrame.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        The table; it may be far larger than memory (e.g. ``dd.read_parquet``).
    quasi_identifiers, k, mode, generalization, max_depth, hierarchies, class_column, qi_kinds
        As in :func:`dmondrian.local.anonymize`. ``class_column`` ids are
        unique over the whole table (``leaf_id * 2**32 + local id``).
    leaf_rows : int, optional
        Regions up to this many rows are anonymized in memory by one task.
        Default: from the workers' memory limits (between 10,000 and 4 million).
    client : distributed.Client, optional
        Cluster to use; see the module docstring for the fallbacks.
    progress : bool, optional
        Show a progress bar per pass; default: when a terminal or notebook is
        attached.
    shuffle_method : str, optional
        How the rows move to their leaves ("p2p", "tasks", "disk"). Default:
        "p2p" when ``client`` is given (compute the result with that client),
        else dask's choice at compute time.

    l, l_kind, c, t, sensitive, constraints
        l-diversity and t-closeness, as in :func:`dmondrian.local.anonymize`.
        After the top phase, one pass counts the sensitive values of every
        leaf exactly and undoes, from the root down, any cut whose children
        break the constraint; each leaf's local run then enforces it below,
        t-closeness against the whole dataset's distribution.

    Returns
    -------
    dask.dataframe.DataFrame
        Same columns, QIs generalized (labels as strings); the input's index
        values with unknown divisions; rows grouped by leaf.

    Raises
    ------
    dmondrian.errors.DMondrianError
        On bad input, as the local engine.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd
    >>> from distributed import Client
    >>> df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
    ...                    "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002]})
    >>> with Client(processes=False, n_workers=1, dashboard_address=":0") as client:
    ...     out = anonymize(dd.from_pandas(df, npartitions=2), ["age", "zip"], k=2,
    ...                     client=client).compute()
    >>> out.sort_index()["age"].tolist()
    ['23', '23', '[24, 25]', '[24, 25]', '[50, 51]', '[50, 51]', '[52, 54]', '[52, 54]']
    """
    shuffle_method = DASK["shuffle_method"].check_choice(options.pop("shuffle_method"))
    top = plan(ddf, quasi_identifiers, k, **options)
    if shuffle_method is None and options["client"] is not None:
        shuffle_method = _distributed_shuffle()
    return apply_plan(ddf, top, shuffle_method)


def _distributed_shuffle() -> str:
    """p2p when the workers can run it (it needs pyarrow), else the task shuffle."""
    try:
        import distributed.shuffle  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:  # pragma: no cover - both are dependencies
        return "tasks"
    return "p2p"


def _anonymize_and_write(ddf, quasi_identifiers, k, build, *, label, defer_counts=False,
                         **options) -> TopPlan:
    c, owned = resolve_client(options.pop("client"))
    progress = options["progress"]
    try:
        top = plan(ddf, quasi_identifiers, k, client=c, _defer_counts=defer_counts, **options)
        start = time.perf_counter()
        try:
            result = run(c, build(top), progress, label)
        except _Recount:
            # Rare: the sample misjudged a cut the output partitions cannot
            # undo alone. Nothing was written; count in a pass of its own.
            top = plan(ddf, quasi_identifiers, k, client=c, **options)
            result = run(c, build(top), progress, label)
        top.timings["route, shuffle, anonymize, write"] = time.perf_counter() - start
        if not top.counted:
            verdict = result.pop()
            top.leaf_counts, top.leaf_depths = verdict.counts, verdict.depth
            top.counted, top.undone_cuts = True, verdict.undone
            result = pd.concat(result)
        if isinstance(result, pd.DataFrame) and int(result["rows"].sum()) != top.domain.n_rows:
            raise RuntimeError(f"dmondrian: wrote {int(result['rows'].sum())} rows of "
                               f"{top.domain.n_rows}")
        return top
    finally:
        release(owned)


@takes_options(ANONYMIZE, DASK_PLAN, WRITE)
def anonymize_to_parquet(ddf, path, quasi_identifiers, k, **options) -> TopPlan:
    """Anonymize and write a Parquet dataset, the whole job on one cluster.

    Each output partition is written by the task that anonymizes it, as
    ``path/part.<i>.parquet``, labels stored as Parquet dictionaries (read
    back as Categoricals; see :mod:`dmondrian.parquet_sink`). An embedded
    LocalCluster (when no cluster is found) lives until the files are written.

    Parameters
    ----------
    ddf, quasi_identifiers, k
        As in :func:`anonymize`, whose other keywords are accepted too.
    path : str or os.PathLike
        The dataset folder (local path or fsspec URL).
    write_options : dict, optional
        ``write_index`` (default True) and keywords for
        :func:`pyarrow.parquet.write_table` (``compression``, ...).
    storage_options : dict, optional
        Keywords for the fsspec filesystem of ``path``.

    Returns
    -------
    TopPlan
        The plan that was applied (leaf sizes, number of passes, timings).
    """
    write_options = options.pop("write_options")
    storage_options = options.pop("storage_options")
    # Before any pass: a name Parquet cannot store would only fail at the end.
    added = [] if options["class_column"] is None else [options["class_column"]]
    check_column_names([*ddf.columns, *added], ddf._meta.index.name
                       if (write_options or {}).get("write_index", True) else None)

    def build(top):
        classes = [] if top.options.class_column is None else [top.options.class_column]
        sink = ParquetSink.create(path, _output_meta(ddf._meta, top), _label_columns(top),
                                  write_options, storage_options, dictionary_columns=classes)
        return _write_parquet(ddf, top, sink, _distributed_shuffle())

    return _anonymize_and_write(ddf, quasi_identifiers, k, build,
                                label=f"pass: shuffle, anonymize, write {path}",
                                defer_counts=True, **options)


@takes_options(ANONYMIZE, DASK_PLAN, {"write_options": WRITE["write_options"]})
def anonymize_to_csv(ddf, path, quasi_identifiers, k, **options) -> TopPlan:
    """Like :func:`anonymize_to_parquet`, writing CSV files (``path`` may hold ``*``)."""
    kw = dict(options.pop("write_options") or {})
    return _anonymize_and_write(
        ddf, quasi_identifiers, k,
        lambda top: apply_plan(ddf, top, _distributed_shuffle()).to_csv(
            path, compute=False, **kw),
        label=f"pass: shuffle, anonymize, write {path}", **options)
