"""The local engine: greedy top-down Mondrian on an in-memory pandas DataFrame.

Algorithm (LeFevre, DeWitt & Ramakrishnan, ICDE 2006)
-----------------------------------------------------
1. Encode every quasi-identifier (QI) as order-preserving int64 keys and
   measure its *global* domain over the whole table (:mod:`dmondrian.encoding.qi`).
2. Starting with the whole table as one node: compute each QI's normalized span in the node, i.e.
   the NCP its generalization would cost (value range / global range; distinct values for nominal
   QIs; leaves under the lowest common ancestor for hierarchies). Spans are normalized by the global
   domain, never the node's own, so QIs stay comparable all the way down.
3. Try the QIs from the widest span down. For a QI, cut at the median: ``mode="strict"`` puts every
   row with the median value on one side (the cut may also fall just below the median when ties make
   that more balanced); ``mode="relaxed"`` splits the median ties so the halves are balanced.
   Nominal QIs are ordered by frequency within the node; hierarchy QIs are cut at a child boundary
   of the node's common ancestor.
4. The cut is made only if both children satisfy the privacy constraint
   (:mod:`dmondrian.privacy.constraints`); otherwise the next QI is tried. A node
   no QI can cut becomes an equivalence class.
5. Each class is published once per QI (:mod:`dmondrian.release.publish`) and the
   labels are expanded to rows by class id.

Guarantee: every class has at least ``k`` rows, for any input with ``k <= len(df)``, because a node
is only ever replaced by two children that both pass the constraint, and the root passes it.

Threads: on large tables, steps 1 and 5 run one QI column per thread and the kernel splits
independent subtrees in parallel, with as many threads as :func:`dmondrian._kernel.max_threads`
gives (OpenMP's count, ``OMP_NUM_THREADS``, or a caller's :func:`dmondrian._kernel.thread_limit`).
The result does not depend on the thread count.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import _kernel as K
from .encoding.qi import EncodedQI, encode_qi, warn_unique_text_qis
from .encoding.sensitive import encode_sensitive
from .encoding.validation import check_options
from .errors import ParameterError
from .options import ANONYMIZE, takes_options
from .privacy import suppression
from .privacy.constraints import KAnonymity, KernelPrivacy, kernel_privacy, refuse_empty
from .privacy.entities import encode_entities, pair_counts
from .privacy.noise import check_noise_dtypes, noise_groups, noisy_columns
from .release.identifiers import refuse_identifying, released_as_is
from .release.person_keys import release_guard, warn_person_keys
from .release.publish import class_values, expand_label_columns

__all__ = ["anonymize", "encode_table", "kernel_rules", "partition", "publish", "Partitioning",
           "riding_codes"]

# From this many rows, encoding and publishing run one QI column per thread;
# below it, thread hand-off costs more than it saves.
_PARALLEL_COLUMN_ROWS = 500_000
# refine="local": the most rows of the blocks (subtrees of the cuts) refined together,
# and the most passes over a block's rows. Larger blocks lose less and cost about
# block_rows times the rows (benchmarks/README.md, "Least loss" under "Cut objectives");
# a second round of blocks straddling the first's boundaries was measured and gained
# less than larger blocks at the same cost.
# Tables of up to REFINE_SMALL_TABLE_ROWS rows, where the whole refinement takes a
# fraction of a second, get blocks of REFINE_SMALL_BLOCK_ROWS.
REFINE_BLOCK_ROWS = 256
REFINE_SMALL_BLOCK_ROWS = 512
REFINE_SMALL_TABLE_ROWS = 100_000
REFINE_BLOCK_CLASSES = 8
REFINE_PASSES = 4


@dataclass
class Partitioning:
    """Result of the partition step: which class every row is in.

    Attributes
    ----------
    class_of_row : ndarray of int64
        Class id of every row, in input order. Ids are ``0..n_classes-1``.
    n_classes : int
        Number of equivalence classes.
    stats : tuple
        Per-class bounds from :func:`dmondrian._kernel.class_statistics`.
    sorted_keys : ndarray
        The key matrix in class order (class ``c`` occupies a contiguous run).
    """

    class_of_row: np.ndarray
    n_classes: int
    stats: tuple
    sorted_keys: np.ndarray


def encode_table(df: pd.DataFrame, quasi_identifiers, hierarchies=None, qi_kinds=None):
    """Encode the QI columns of ``df`` (see :func:`dmondrian.encoding.qi.encode_qi`)."""
    hierarchies = hierarchies or {}
    qi_kinds = qi_kinds or {}
    qis = list(quasi_identifiers)
    # Columns are taken from the frame here, not in the threads: pandas does
    # not promise that concurrent lookups on one frame are safe.
    columns = [df[q] for q in qis]
    return _per_column(lambda j: encode_qi(columns[j], kind=qi_kinds.get(qis[j]),
                                           hierarchy=hierarchies.get(qis[j])), len(qis), len(df))


def _per_column(fn, count: int, n_rows: int) -> list:
    """``[fn(j) for j in range(count)]``, one QI column per thread on large tables.

    Columns are independent and most of their work (compiled passes, numpy sorts and gathers)
    releases the GIL; nominal and hierarchy columns spend part of theirs in Python, which threads do
    not speed up. Results, and the first error in column order, are the same either way. The pool
    has the kernel's thread budget (:func:`dmondrian._kernel.max_threads`), so a caller that limits
    the kernel's threads limits these too.
    """
    threads = min(K.max_threads(), count)
    if threads > 1 and n_rows >= _PARALLEL_COLUMN_ROWS:
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(fn, range(count)))
    return [fn(j) for j in range(count)]


def _hierarchy_arrays(encoded: list[EncodedQI]) -> dict:
    """The hierarchy QIs' trees, concatenated, and each QI's offsets into them."""
    parts = {"h_parent": [], "h_lo": [], "h_hi": [], "h_leafnode": []}
    hoffs = np.zeros(len(encoded), dtype=np.int64)
    loffs = np.zeros(len(encoded), dtype=np.int64)
    n_nodes = n_leaves = 0
    for j, qi in enumerate(encoded):
        h = qi.hierarchy
        if h is None:  # only hierarchy QIs have a tree
            continue
        hoffs[j], loffs[j] = n_nodes, n_leaves
        parts["h_parent"].append(h.parent)
        parts["h_lo"].append(h.node_lo)
        parts["h_hi"].append(h.node_hi)
        parts["h_leafnode"].append(h.leaf_node)
        n_nodes += len(h.labels)
        n_leaves += len(h.leaves)
    # Non-empty arrays even when no QI has a hierarchy: the kernel takes their address.
    trees = {name: np.concatenate(v) if v else np.zeros(1, dtype=np.int64)
             for name, v in parts.items()}
    return {**trees, "hoffs": hoffs, "loffs": loffs}


def riding_codes(privacy: KernelPrivacy | None) -> list[tuple[int, np.ndarray]]:
    """The code rows that ride along with the keys in the kernel's buffer.

    ``(privacy slot, codes)`` of the sensitive, entity and pair codes that
    ``privacy`` carries, in the order they follow the keys.
    """
    if privacy is None:
        return []
    return [(slot, codes) for slot, codes in zip(
        K.RIDING_SLOTS, (privacy.sensitive_codes, privacy.entity_codes, privacy.pair_codes),
        strict=True) if codes is not None]


def kernel_rules(encoded: list[EncodedQI], min_size: int | None = None, *,
                 mode: str = "strict", objective: str = "balanced", max_depth: int = -1,
                 scales=None, privacy: KernelPrivacy | None = None) -> K.KernelRules:
    """The rules of a kernel call on these encoded QIs.

    Parameters
    ----------
    encoded : list of EncodedQI
        The QIs, all of the same length.
    min_size : int, optional
        Smallest class size allowed (k), when ``privacy`` is not given.
    mode : {"strict", "relaxed"}
        Partitioning mode.
    objective : {"balanced", "dm", "ncp"}
        What the cuts optimize (see :func:`anonymize`).
    max_depth : int
        Maximum cuts from the root to a class, -1 for unlimited.
    scales : sequence of float, optional
        Global domain scales overriding the encoded ones; the distributed
        engine passes the whole dataset's so every region normalizes alike.
    privacy : KernelPrivacy, optional
        The constraints in kernel form (see :func:`dmondrian.privacy.constraints.kernel_privacy`),
        with the sensitive, entity and pair codes the constraints count; they ride along in the
        kernel's buffer, at the rows the rules' privacy slots name.

    Returns
    -------
    dmondrian._kernel.KernelRules
    """
    if privacy is None:
        privacy = kernel_privacy([KAnonymity(min_size)])
    ip = privacy.ip.copy()
    riding = riding_codes(privacy)
    for r, (slot, _) in enumerate(riding):
        ip[slot] = len(encoded) + r
    return K.KernelRules(kinds=[qi.kernel_kind for qi in encoded],
                         scales=[qi.scale for qi in encoded] if scales is None else list(scales),
                         cards=[qi.card for qi in encoded], ip=ip, fp=privacy.fp, q=privacy.q,
                         riding=tuple(codes for _, codes in riding), **_hierarchy_arrays(encoded),
                         relaxed=mode == "relaxed", max_depth=int(max_depth),
                         objective=K.OBJECTIVES.index(objective))


def partition(encoded: list[EncodedQI], rules: K.KernelRules, *, leaves=None,
              workspace: K.WorkSpace | None = None, refine: str = "none",
              refine_rows=None) -> Partitioning:
    """Run Mondrian on encoded QIs and return each row's equivalence class.

    Parameters
    ----------
    encoded : list of EncodedQI
        The QIs, all of the same length.
    rules : dmondrian._kernel.KernelRules
        What the kernel is asked (see :func:`kernel_rules`).
    leaves : int64 array (m, 2), optional
        Rows ``(start, depth)``: cut the rows from one ``start`` to the next as a table of its own,
        already ``depth`` cuts below the root (see :func:`dmondrian._kernel.mondrian_partition`).
        Default: the whole table, depth 0. Classes are numbered in row order, so one root's classes
        come after the previous root's.
    workspace : dmondrian._kernel.WorkSpace, optional
        Memory kept for the kernel's buffers from one call to the next (for
        a caller partitioning many tables in turn). The result's
        ``sorted_keys`` then lives in it, valid until its next use.
    refine : {"none", "local"}, default "none"
        "local": after the cuts, move and swap rows between neighbouring classes (within one root)
        while the NCP drops, under the same constraints (:mod:`dmondrian._kernel.refine`).
    refine_rows : int or "all", optional
        The most rows of a refined block (a subtree of the cuts within one root); "all": each root
        as one block. Default: from the table's size and k.

    Returns
    -------
    Partitioning

    Examples
    --------
    >>> qi = encode_qi(pd.Series([1, 2, 3, 4]))
    >>> partition([qi], kernel_rules([qi], 2)).class_of_row.tolist()
    [0, 0, 1, 1]
    """
    n = len(encoded[0].keys)
    # Both halves of the kernel's double buffer, the first filled with the
    # keys, the codes riding along (never cut) and the row numbers.
    # WorkSpace.buffer is the one definition of the layout, so that keys a
    # caller wrote into it in place are recognized and not copied.
    rows = rules.buffer_rows
    bufs = K.double_buffer([qi.keys for qi in encoded] + list(rules.riding), rows, n,
                           None if workspace is None else workspace.buffer(rows, n).reshape(-1))
    leaves = np.zeros((1, 2), dtype=np.int64) if leaves is None else np.asarray(leaves, np.int64)
    starts = leaves[:, 0]
    if (leaves.ndim != 2 or leaves.shape[1] != 2 or starts.size == 0 or starts[0] != 0
            or starts[-1] >= max(n, 1) or np.any(np.diff(starts) <= 0)):
        # An empty root would flag a class start past the end of the table.
        raise ValueError("leaves must be (start, depth) rows, starts increasing from 0 "
                         "and below the row count")
    # The classes' depths in the cuts: refine's blocks are whole subtrees.
    depths = None if refine == "none" else np.empty(n, dtype=np.int64)
    order, class_start, sorted_keys = K.mondrian_partition(bufs, rules, leaves, depths=depths)
    if refine != "none":
        # At least a few classes of k rows per block, whatever k.
        block_rows = (max(n, 1) if refine_rows == "all" else refine_rows or max(
            REFINE_SMALL_BLOCK_ROWS if n <= REFINE_SMALL_TABLE_ROWS else REFINE_BLOCK_ROWS,
            REFINE_BLOCK_CLASSES * int(rules.ip[K.P_K])))
        K.refine_partition(bufs, class_start, rules,
                           K.subtree_blocks(depths, class_start, starts, block_rows), REFINE_PASSES)
    stats = K.class_statistics(sorted_keys, class_start, rules.kinds, rules.cards)
    class_of_row = K.rows_to_classes(order, stats[0])
    return Partitioning(class_of_row, int(stats[1].shape[0]), stats, sorted_keys)


def publish(df: pd.DataFrame, encoded: list[EncodedQI], part: Partitioning,
            generalization: str = "range", class_column=None) -> pd.DataFrame:
    """Replace the QI columns of ``df`` by their published generalization."""
    out = df.copy(deep=False)
    values = _per_column(lambda j: class_values(encoded[j], j, generalization, part.stats,
                                                part.sorted_keys[j]), len(encoded), len(df))
    labelled = [j for j, (v, _) in enumerate(values) if isinstance(v, pd.Index)]
    published = dict(zip(labelled, expand_label_columns([values[j] for j in labelled],
                                                        part.class_of_row), strict=True))
    for j, qi in enumerate(encoded):
        if j not in published:
            v, inverse = values[j]
            published[j] = qi.spec.summary_column(qi, v[inverse][part.class_of_row])
        # A Series on the frame's own index is stored as is; a bare array
        # would be copied (1M codes a column).
        out[qi.name] = pd.Series(published[j], index=out.index, copy=False)
    if class_column is not None:
        out[class_column] = part.class_of_row
    return out


@takes_options(ANONYMIZE)
def anonymize(df: pd.DataFrame, quasi_identifiers, k: int, **options) -> pd.DataFrame:
    """k-anonymize a pandas DataFrame with Mondrian.

    Parameters
    ----------
    df : pandas.DataFrame
        The table. It is not modified.
    quasi_identifiers : list of column names
        Columns an attacker could link on; they are generalized.
    k : int
        Every published equivalence class will hold at least ``k`` rows.
    mode : {"strict", "relaxed"}, default "strict"
        Strict partitioning keeps equal values together (classes never
        overlap); relaxed splits ties at the median for balanced halves.
    objective : {"balanced", "dm", "ncp"}, default "balanced"
        What the cuts optimize, each a Mondrian partition with the same guarantees: "balanced" cuts
        at the median; "dm" cuts where the left child's size is a multiple of k near the median
        (strict mode: the boundary between distinct values that packs best), so classes hold close
        to k rows (lower discernibility); "ncp" scores the cuts of the two widest QIs by the
        children's size-weighted normalized spans and makes the cheapest (lower NCP).
    refine : {"none", "local"}, default "none"
        "local": after the cuts, rows are moved and swapped between neighbouring classes
        (consecutive leaves of the cut tree) while that lowers the NCP, each change keeping every
        class within the constraints (k rows or k entities, l, t); slower. Refined classes may
        overlap (as in relaxed mode), each still labelled by its own rows' values. Fitted plans
        refuse it: they route rows through the cuts, which refined classes no longer follow.
    refine_rows : int or "all", optional
        With ``refine="local"``: the most rows refined together, each block a subtree of the cuts;
        at least ``2 * k``. Larger blocks lose less and take longer (about the block's rows times
        the table's rows); "all" refines the whole table as one block. On the Dask engine a block
        never spans a leaf ("all" is each leaf). Default: a rule from the table's size and k
        (benchmarks/README.md, "Least loss"). Fitted plans refuse it, as they refuse ``refine``.
    generalization : {"range", "midpoint", "mean"}, default "range"
        How numeric and datetime QIs are published: a range label
        (see :mod:`dmondrian.release.publish`), or the class's midpoint or mean as
        numbers. Categorical QIs always publish labels.
    max_depth : int, optional
        Stop cutting after this many levels (coarser classes).
    hierarchies : dict, optional
        ``{column: hierarchy}`` where a hierarchy is a
        :class:`~dmondrian.kinds.hierarchy.Hierarchy`, a file path
        (``leaf;parent;...;*`` lines) or a mapping leaf -> ancestors.
    class_column : str, optional
        Add a column with each row's equivalence-class id.
    qi_kinds : dict, optional
        ``{column: kind}`` overriding the detected kind: a name of
        :attr:`dmondrian.kinds.QIKind.ALL` ("numeric", "datetime", "ordinal",
        "nominal", "hierarchy" or a registered kind).
    l : int or float, optional
        l-diversity of the ``sensitive`` column in every class.
    l_kind : str, default "distinct"
        Which l-diversity: a name of :data:`dmondrian.options.L_KINDS`
        ("distinct", "entropy", "recursive", which needs ``c``, or a registered
        :class:`~dmondrian.privacy.constraints.LVariant`).
    c : float, optional
        The c of recursive (c, l)-diversity.
    t : float, optional
        t-closeness of the ``sensitive`` column (Earth Mover's Distance).
    sensitive : column name, optional
        The sensitive attribute l and t are about; it is not generalized.
    constraints : list of Constraint, optional
        More constraints (:mod:`dmondrian.privacy.constraints`), all enforced.
    suppression : float, default 0.0
        Share of the rows (``0 <= f < 1``) that may be suppressed, at most ``floor(f * len(df))``:
        after partitioning at k, whole classes are suppressed from the widest (highest mean
        normalized span) down while they fit the budget, never one costing no more than the mean row
        (:mod:`dmondrian.privacy.suppression`).
    suppressed : {"mask", "drop"}, default "mask"
        ``"mask"`` keeps the suppressed rows with every QI published as ``"*"`` (NaN/NaT for
        midpoint and mean columns; class id -1 in ``class_column``); they form one class, itself at
        least k rows (and meeting l and t), else they are dropped too. ``"drop"`` leaves them out.
        Either way the release never holds a class below k.
    noise : dict, optional
        ``{column: {"epsilon": eps, "bounds": (lo, hi)}}``: each numeric column named (not a QI, not
        the sensitive column) publishes, on every row, its class's mean of the values clipped to the
        bounds plus Laplace noise of scale ``(hi - lo) / (class size * eps)``, clamped to the bounds
        (float64). Given the partition, the published means of a column are ``eps``-differentially
        private; the partition itself is not (it depends on the QIs). See
        :mod:`dmondrian.privacy.noise`.
    random_state : int or numpy.random.Generator, optional
        Makes the noise repeatable (numpy's generator instead of OpenDP's
        exact, unseeded sampler; see :mod:`dmondrian.privacy.noise`).
    entity : column name, optional
        The person key of an event table (``"user_id"``): every class then holds at least ``k``
        distinct entities, not rows; entropy and recursive l and t count each entity once per
        sensitive value it holds in a class; the noised means bound each entity's contribution
        (``max_contributions``). The column is never released. Missing values in it are refused. See
        :mod:`dmondrian.privacy.entities`.
    max_contributions : int, default 1
        With ``entity`` and ``noise``: rows of one entity a class's noised
        mean keeps (chosen at random; the rest are left out of the mean).
    max_classes : int, default 1
        With ``entity`` and ``noise``: classes whose noised means one entity's rows count in (chosen
        at random). The noise scale is ``max_classes * max_contributions * (hi - lo) / (n'_c *
        eps)``, ``n'_c`` the class's kept rows, so that ``eps`` holds per entity (see
        :mod:`dmondrian.privacy.noise`).
    identifiers : list of column names, optional
        Direct identifiers (record ids, names, emails): removed from the release.
    allow_unique : list of column names, optional
        Columns released as is that may single out rows: judged safe, they
        are released (any other is refused, see Raises).

    Returns
    -------
    pandas.DataFrame
        Same index, columns and order (less the ``identifiers`` and the ``entity``); QI columns
        generalized (range labels as a Categorical of strings), noised columns replaced, every other
        column untouched (without the dropped rows, if ``suppressed="drop"``). The rows keep the
        input's order, so that a scikit-learn ``y`` stays aligned with them; a release written to
        files has its rows shuffled instead (:mod:`dmondrian.release.row_order`).

    Warns
    -----
    dmondrian.errors.IdentifyingColumnWarning
        Without ``entity``, for each column released as is that looks like a
        person key (many values, each covering a few rows whose QIs mostly
        repeat; see :mod:`dmondrian.release.person_keys`).

    Raises
    ------
    dmondrian.errors.IdentifyingColumnError
        When a column released as is singles out rows (the index is the
        caller's, not released): on 1,000 rows or more, half the rows or more hold a value no
        other row has (see :mod:`dmondrian.release.identifiers`), and it is named
        neither in ``identifiers`` nor in ``allow_unique``.
    dmondrian.errors.DMondrianError
        On bad input, with a message naming the column or parameter.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
    ...                    "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002],
    ...                    "salary": [10, 20, 30, 40, 50, 60, 70, 80]})
    >>> out = anonymize(df, ["age", "zip"], k=2)
    >>> out["age"].tolist()
    ['23', '23', '[24, 25]', '[24, 25]', '[50, 51]', '[50, 51]', '[52, 54]', '[52, 54]']
    >>> out["salary"].equals(df["salary"])
    True
    >>> anonymize(df, ["age", "zip"], k=2, suppression=0.25)["age"].tolist()
    ['23', '23', '[24, 25]', '[24, 25]', '[50, 51]', '[50, 51]', '*', '*']
    """
    if not isinstance(df, pd.DataFrame):
        raise ParameterError("df", f"anonymize expects a pandas DataFrame, got {type(df).__name__}")
    opts = check_options(df.columns, quasi_identifiers, k, index_name=df.index.name, **options)
    check_noise_dtypes(opts.noise, df.dtypes)
    refuse_empty(len(df))
    for cst in opts.constraints:
        cst.check_table(len(df))
    entity = None
    if opts.entity is not None:
        entity = encode_entities(df[opts.entity], opts.k)
    dropped = [*opts.identifiers, *([opts.entity] if opts.entity is not None else [])]
    if dropped:
        df = df.drop(columns=list(dict.fromkeys(dropped)))
    if opts.sensitive is not None:
        codes, domain = encode_sensitive(df[opts.sensitive])
        counts = (domain.counts if entity is None
                  else pair_counts(entity.codes, codes, domain.n_codes))
        for cst in opts.constraints:
            cst.check_distribution(counts)
        privacy = kernel_privacy(opts.constraints, codes, domain.n_codes, domain.ordered,
                                 distribution=None if entity is not None
                                 else domain.distribution(), entity=entity)
    else:
        privacy = kernel_privacy(opts.constraints, entity=entity)
    encoded = encode_table(df, opts.qis, opts.hierarchies, opts.qi_kinds)
    warn_unique_text_qis(encoded, len(df))
    # The guards come after the encoding, whose QI keys give the person-key rule its
    # QI combinations at the cost of a hash.
    found, keys = release_guard(df, released_as_is(df.columns, opts), opts.qis, opts.allow_unique,
                                [qi.keys for qi in encoded], person_keys=entity is None)
    refuse_identifying(found)
    warn_person_keys(keys)
    part = partition(encoded, kernel_rules(encoded, mode=opts.mode, objective=opts.objective,
                                           max_depth=opts.max_depth, privacy=privacy),
                     refine=opts.refine, refine_rows=opts.refine_rows)
    result = None
    if opts.suppression > 0:
        result = suppression.suppress(encoded, part, opts.suppression, opts.suppressed,
                                      privacy=privacy)
        out = suppression.release(df, encoded, result, opts.generalization, opts.class_column)
    else:
        out = publish(df, encoded, part, opts.generalization, opts.class_column)
    if opts.noise:
        rows, groups, n_groups, _ = noise_groups(part.class_of_row, part.n_classes, result=result)
        noisy = noisy_columns(df.iloc[rows], groups, n_groups, opts.noise, opts.random_state,
                              entity_codes=None if entity is None else entity.codes[rows],
                              max_contributions=opts.max_contributions,
                              max_classes=opts.max_classes)
        for column, values in noisy.items():
            out[column] = pd.Series(values, index=out.index, copy=False)
    return out
