"""A new batch against a fitted plan: where its rows land, and a summary per node.

Keys are the fitted encoding's (:mod:`dmondrian.kinds`): numbers and dates are their own line, so
values beyond the fitted range still compare; a category the fit never saw has no key and is flagged
instead. Every row is routed down the fitted cut tree to a leaf, then lifted to the deepest node on
its path whose fitted region holds its values:

* a numeric or datetime value inside a node's fitted bounds, or beyond them
  on a side where the node reaches the edge of the fitted domain (edge regions
  are open-ended, and a missing value lies past the high edge);
* a nominal value among the node's fitted codes;
* an ordinal or hierarchy value inside the node's fitted code range.

A value held by no node (a new category, or a missing one where the fit had none of a kind without
an edge) lands at the root. The rows are encoded, routed and lifted a chunk at a time in one
compiled pass (:func:`place_batch`, :mod:`dmondrian._kernel.lift`), and only the keys of the rows
outside their node's fitted bounds are kept. The batch's summary per node (rows, sensitive values,
and how far its rows reach past the node's fitted bounds) is what :mod:`.release` decides the
published classes from; summaries of parts of a table add up (:meth:`BatchSummary.merge`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._kernel import max_threads
from .._kernel.constants import INT_MIN, KIND_FLOAT, KIND_INT, KIND_NOMINAL, MISSING_KEY
from .._kernel.keys import float_keys as _float_keys
from .._kernel.lift import place_rows as place_compiled
from .._kernel.routing import _int_keys_into, _remap_into
from .._kernel.strings import MAX_VALUES, lookup_strings, value_table
from ..errors import UnsupportedDtypeError
from ..kinds.hierarchy import MISSING_LEAF
from ..kinds.keys import arrow_string_chunks, decode_float_keys
from ..partition import routing
from ..partition.routing import route
from .people import People, people_of

__all__ = ["BatchKeys", "BatchSummary", "Placed", "Placing", "fold_edges", "place_batch",
           "summarize_batch", "summed_qis"]

@dataclass
class BatchKeys:
    """A batch's keys in the fitted encoding.

    ``keys`` route (an unseen category holds a stand-in key); ``unseen[j]`` flags the rows whose
    value of QI ``j`` the fit never saw, ``unseen_values[j]`` their values.
    """

    keys: np.ndarray
    unseen: dict = field(default_factory=dict)
    unseen_values: dict = field(default_factory=dict)


@dataclass
class Placed:
    """Where a batch's rows landed in a plan (:func:`place_batch`).

    Attributes
    ----------
    node : int64 array (rows,)
        The node every row landed in.
    rows : int64 array
        The rows outside their node's fitted bounds (held through an open edge, or at the root
        without being held; every row holding a value the fit never saw), ascending.
    outside : BatchKeys
        Their keys, and which of them hold a value the fit never saw.
    full : dict
        ``{j: int64 array (rows,)}``: every row's keys of the QIs asked for.
    """

    node: np.ndarray
    rows: np.ndarray
    outside: BatchKeys
    full: dict = field(default_factory=dict)


def _as_fitted_dtype(series: pd.Series, qi) -> pd.Series:
    """A numeric or datetime column in the type the plan was fitted on."""
    name = series.name
    try:
        return qi.spec.as_fitted(series, qi)
    except (TypeError, ValueError) as exc:
        raise UnsupportedDtypeError(name, f"column {name!r} has dtype {series.dtype}, which "
                                          f"the plan (fitted on {qi.dtype}) cannot read: "
                                          f"{exc}") from None


def _factorized(series: pd.Series):
    """``(codes, uniques)`` of a column, -1 for missing."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy().astype(np.int64), list(series.cat.categories)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return codes.astype(np.int64), list(uniques)


def _encode_column(series: pd.Series, qi, keys: np.ndarray):
    """Write a whole column's keys into ``keys`` (the general path); ``(mask, values)``
    of the rows whose value the fit never saw, or None.

    Raises
    ------
    UnsupportedDtypeError
        For a numeric or datetime column the fitted type cannot hold
        (non-integer values where the fit saw integers).
    """
    if qi.spec.open_edges:
        if series.dtype == qi.dtype:
            qi.spec.global_keys_into(series, keys)
            return None
        enc = qi.spec.encode(_as_fitted_dtype(series, qi))
        if enc.kernel_kind != qi.kernel_kind:
            raise UnsupportedDtypeError(qi.name, f"column {qi.name!r} has dtype {series.dtype}; "
                                                 f"the plan was fitted on {qi.dtype}")
        keys[:] = enc.keys
        return None
    codes, uniques = _factorized(series)
    missing_key, table = _code_table(qi, uniques)
    lookup = np.append(table, missing_key)  # code -1 (missing) reads the last entry
    keys[:] = lookup[codes]
    bad = keys == _UNSEEN
    if not bad.any():
        return None
    values = np.asarray([uniques[c] if c >= 0 else None for c in codes[bad]], dtype=object)
    return bad, values


def _chunk_encoder(series: pd.Series, qi):
    """A function ``(a, b, out)`` writing the keys of rows ``a:b`` of a column into ``out`` (and
    returning ``(mask, values)`` of its rows the fit never saw, or None), for the columns read in
    pieces without a pass over the whole column; None for the others (:func:`_encode_column`).

    A numeric or datetime column of the fitted dtype is copied as its keys (as
    :meth:`~dmondrian.kinds.QIKindSpec.global_keys_into` reads it), Arrow text is looked up among
    the plan's few categories in compiled code (:func:`dmondrian._kernel.strings.lookup_strings`),
    and a Categorical's codes are remapped through one table made for the whole column.
    """
    if qi.spec.open_edges:
        if series.dtype != qi.dtype:
            return None
        plain = qi.spec.plain_int_values(series)
        if plain is None:
            if not (isinstance(series.dtype, np.dtype) and series.dtype == np.float64):
                return None
            floats = series.to_numpy()

            def float_copy(a, b, out):
                keys, _, _, first_inf = _float_keys(floats[a:b])
                if first_inf >= 0:
                    qi.spec.encode(series.iloc[a:b])  # an infinity: its typed error
                out[:] = keys
                return None
            return float_copy
        values, nat_missing = plain

        def copy(a, b, out):
            if _int_keys_into(values[a:b], nat_missing, out):
                qi.spec.encode(series.iloc[a:b])  # the reserved key: its typed error
            return None
        return copy
    if qi.kind == "nominal" and _few_texts(series, qi):
        text = series.array.__arrow_array__()
        vdata, voff = value_table(qi.categories[:-1])  # the last is the missing label
        missing = np.int64(qi.card - 1)

        def lookup(a, b, out):
            at = 0
            for offsets, data, bits, bit_offset, chunk in arrow_string_chunks(text.slice(a, b - a)):
                lookup_strings(offsets, data, bits, bit_offset, vdata, voff, missing,
                               out[at:at + len(chunk)], _NO_COUNTS)
                at += len(chunk)
            return _unseen_rows(series, a, b, out, _UNSEEN_TEXT, 0)
        return lookup
    if isinstance(series.dtype, pd.CategoricalDtype) and qi.kind in ("nominal", "ordinal"):
        codes = series.cat.codes.to_numpy()
        missing_key, table = _code_table(qi, list(series.cat.categories))
        some_unseen = bool((table == _UNSEEN).any())
        stand_in = 0 if qi.kind == "nominal" else MISSING_KEY

        def remap(a, b, out):
            _remap_into(codes[a:b], table, missing_key, out)
            return _unseen_rows(series, a, b, out, _UNSEEN, stand_in) if some_unseen else None
        return remap
    return None


def _unseen_rows(series, a, b, out, flag, stand_in):
    """``(mask, values)`` of the rows of ``a:b`` whose key is ``flag`` (a value the fit
    never saw), their key replaced by ``stand_in``; None when there are none."""
    bad = out == flag
    if not bad.any():
        return None
    # A stand-in the routing walk can read; the row lands at the root.
    out[bad] = stand_in
    return bad, series.iloc[a:b][bad].to_numpy(dtype=object)


#: What the compiled text lookup writes for a value among none of the known ones.
_UNSEEN_TEXT = -1
_NO_COUNTS = np.zeros(0, dtype=np.int64)


def _few_texts(series: pd.Series, qi) -> bool:
    """Whether a nominal column is Arrow text and the plan knows few categories, all text."""
    import pyarrow as pa

    dtype = series.dtype
    if not ((isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow")
            or (isinstance(dtype, pd.ArrowDtype) and dtype.kind in "OU")):
        return False
    known = qi.categories[:-1]
    if len(known) > MAX_VALUES or not all(isinstance(v, str) for v in known):
        return False
    t = series.array.__arrow_array__().type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


_UNSEEN = np.int64(-2)


def _code_table(qi, uniques) -> tuple[int, np.ndarray]:
    """The key of a missing value and of each of a batch's distinct values (``_UNSEEN``
    for a value the plan does not hold)."""
    if qi.kind == "nominal":
        index = pd.Index(qi.categories[:-1], dtype=object)  # the last is the missing label
        table = index.get_indexer(pd.Index(uniques, dtype=object)) if uniques else []
        return qi.card - 1, np.where(np.asarray(table) < 0, _UNSEEN, table).astype(np.int64)
    if qi.kind == "ordinal":
        index = pd.Index(qi.categories, dtype=object)
        table = index.get_indexer(pd.Index(uniques, dtype=object)) if uniques else []
        return MISSING_KEY, np.where(np.asarray(table) < 0, _UNSEEN, table).astype(np.int64)
    codes = qi.hierarchy._leaf_code
    missing = codes.get(MISSING_LEAF, _UNSEEN)
    return missing, np.asarray([codes.get(str(u), _UNSEEN) for u in uniques], dtype=np.int64)


def _inside(plan, j, v, nd):
    """``(held, inside)``: whether node ``nd`` holds value ``v`` of QI ``j`` with its open
    edges, and within its fitted bounds."""
    tree = plan.tree
    if plan.kernel_kinds[j] == KIND_NOMINAL:
        packed, card = tree.codes[j]
        want = nd * card + v
        pos = np.minimum(np.searchsorted(packed, want), max(len(packed) - 1, 0))
        held = packed[pos] == want if len(packed) else np.zeros(len(v), dtype=bool)
        return held, held
    lo, hi, miss = tree.lo[nd, j], tree.hi[nd, j], tree.missing[nd, j]
    is_m = v == MISSING_KEY
    inside = np.where(is_m, miss, (v >= lo) & (v <= hi))
    if not plan.encodings[j].spec.open_edges:
        return inside, inside
    open_lo = lo == tree.lo[0, j]
    open_hi = hi == tree.hi[0, j]
    held = np.where(is_m, miss | open_hi, ((v >= lo) | open_lo) & ((v <= hi) | open_hi))
    return held, inside


#: Rows encoded and placed together: their keys are still in cache when the walk reads them.
CHUNK_ROWS = 1 << 15


def place_batch(plan, df: pd.DataFrame, positions=None, full=()) -> Placed:
    """Where every row of a table lands in the plan (see the module docstring).

    Rows are encoded and placed in chunks of :data:`CHUNK_ROWS`, a chunk per thread at a time
    (:func:`dmondrian._kernel.max_threads`): each chunk's keys are written into the thread's buffer
    (:func:`_chunk_encoder`; columns without a piecewise encoding are encoded whole first), then
    routed and lifted at once by the compiled pass, while they are in cache
    (:func:`dmondrian._kernel.lift.place_rows`). Only the keys of the rows outside their node's
    fitted bounds are kept.

    Parameters
    ----------
    plan : FittedPlan
    df : pandas.DataFrame
        The table (its QI columns are read).
    positions : int64 array, optional
        The rows' input positions (relaxed plans split median ties by them).
    full : sequence of int
        QIs whose keys are kept for every row (:attr:`Placed.full`).

    Returns
    -------
    Placed

    Raises
    ------
    UnsupportedDtypeError
        For a numeric or datetime column the fitted type cannot hold
        (non-integer values where the fit saw integers).
    """
    n, d = len(df), len(plan.encodings)
    tables = plan.lift_tables
    if tables is None:  # the numpy walk reads every key
        full = range(d)
    kept = {j: np.empty(n, dtype=np.int64) for j in full}
    pieces, whole, whole_unseen = [], {}, {}
    for j, qi in enumerate(plan.encodings):
        encoder = _chunk_encoder(df[qi.name], qi)
        if encoder is not None:
            pieces.append((j, encoder))
            continue
        whole[j] = kept.get(j, np.empty(n, dtype=np.int64))
        found = _encode_column(df[qi.name], qi, whole[j])
        if found is not None:
            whole_unseen[j] = found
    use_tie = positions is not None and plan.tree.cuts.has_ties
    pos = np.ascontiguousarray(positions, dtype=np.int64) if use_tie else _NO_COUNTS
    node = np.empty(n, dtype=np.int64)
    def run(a):
        b = min(n, a + CHUNK_ROWS)
        keys = np.empty((d, b - a), dtype=np.int64)
        unseen = {}
        for j, encoder in pieces:
            got = encoder(a, b, keys[j])
            if got is not None:
                unseen[j] = got
        for j, column in whole.items():
            keys[j] = column[a:b]
            if j in whole_unseen and whole_unseen[j][0][a:b].any():
                mask = whole_unseen[j][0][a:b]
                unseen[j] = mask, None  # the values are taken from the whole column
        for j, column in kept.items():
            if j not in whole:
                column[a:b] = keys[j]
        if tables is None:
            return unseen
        flags = _any_unseen([m for m, _ in unseen.values()])
        outside = np.zeros(b - a, dtype=np.uint8)
        place_compiled(keys, tables, pos[a:b] if use_tie else pos, use_tie,
                       _NO_UNSEEN if flags is None else flags.view(np.uint8), node[a:b], outside)
        rows = np.flatnonzero(outside)
        return a + rows, keys[:, rows], {j: m[rows] for j, (m, _) in unseen.items()}, unseen

    starts = range(0, n, CHUNK_ROWS)
    threads = min(max_threads(), len(starts))
    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(run, starts))
    else:
        parts = [run(a) for a in starts]
    if tables is None:
        return _place_numpy(plan, kept, whole_unseen, pieces, parts, positions)
    return Placed(node, *_gather_outside(parts, d, whole_unseen), kept)


def _gather_outside(parts, d, whole_unseen):
    """The chunks' outside rows as one ``(rows, BatchKeys)``."""
    rows = np.concatenate([p[0] for p in parts] + [_NO_COUNTS])
    keys = np.concatenate([p[1] for p in parts] + [np.zeros((d, 0), dtype=np.int64)], axis=1)
    out = BatchKeys(keys)
    for j in sorted({j for p in parts for j in p[2]}):
        out.unseen[j] = np.concatenate([p[2].get(j, np.zeros(len(p[0]), dtype=bool))
                                        for p in parts])
        if j in whole_unseen:
            out.unseen_values[j] = whole_unseen[j][1]
        else:
            out.unseen_values[j] = np.concatenate([p[3][j][1] for p in parts if j in p[3]])
    return rows, out


_NO_UNSEEN = np.zeros(0, dtype=np.uint8)


def _any_unseen(masks):
    """The union of boolean masks, or None when there are none."""
    out = None
    for m in masks:
        out = m.copy() if out is None else out | m
    return out


def _place_numpy(plan, kept, whole_unseen, pieces, parts, positions) -> Placed:
    """:func:`place_batch`'s routing and lift in numpy, from every row's keys (a plan
    too large for the compiled pass's tables)."""
    keys = np.stack([kept[j] for j in range(len(plan.encodings))])
    n = keys.shape[1]
    batch = BatchKeys(keys)
    for j, (mask, values) in whole_unseen.items():
        batch.unseen[j], batch.unseen_values[j] = mask, values
    for j, _ in pieces:
        found = [(a, part[j]) for a, part in zip(range(0, n, CHUNK_ROWS), parts, strict=True)
                 if j in part]
        if found:
            mask = np.zeros(n, dtype=bool)
            for a, (m, _) in found:
                mask[a:a + len(m)] = m
            batch.unseen[j] = mask
            batch.unseen_values[j] = np.concatenate([v for _, (_, v) in found])
    unseen = np.zeros(n, dtype=bool)
    for mask in batch.unseen.values():
        unseen |= mask
    node = route(keys, plan.tree.cuts, positions) if n else np.zeros(0, dtype=np.int64)
    outside = unseen.copy()
    node[unseen] = 0
    pending = np.flatnonzero(~unseen)
    parent = plan.tree.parent
    while pending.size:
        nd = node[pending]
        held = np.ones(pending.size, dtype=bool)
        inside = np.ones(pending.size, dtype=bool)
        for j in range(keys.shape[0]):
            h, i = _inside(plan, j, keys[j, pending], nd)
            held &= h
            inside &= i
        at_root = nd == 0
        stop = held | at_root
        outside[pending[stop]] = ~inside[stop]
        pending = pending[~stop]
        node[pending] = parent[node[pending]]
    rows = np.flatnonzero(outside)
    out = BatchKeys(keys[:, rows])
    for j, mask in batch.unseen.items():
        out.unseen[j], out.unseen_values[j] = mask[rows], batch.unseen_values[j]
    return Placed(node, rows, out, kept)


class Placing:
    """Placing a pandas table's rows in a plan, for anything with a plan's
    ``encodings``, ``kernel_kinds``, ``options``, ``sensitive``, ``k``, ``tree`` (its
    ``n_nodes`` and ``cuts.has_ties`` at least) and ``lift_tables``: a
    :class:`~dmondrian.plans.FittedPlan`, or the part of one a Dask task reads."""

    def place(self, df: pd.DataFrame, positions=None) -> Placed:
        """Where every row of a pandas table lands (:func:`place_batch`)."""
        if positions is None and self.tree.cuts.has_ties:
            positions = routing.row_positions(0, len(df), first=0)
        return place_batch(self, df, positions, full=summed_qis(self))

    def sensitive_codes(self, df: pd.DataFrame):
        if self.sensitive is None:
            return None
        return self.sensitive.codes(df[self.options["sensitive"]])

    def entity_values(self, df: pd.DataFrame):
        """The entity column of a table (None for a plan without ``entity=``)."""
        name = self.options.get("entity")
        return None if name is None else df[name]

    def summarize(self, df: pd.DataFrame, positions=None) -> BatchSummary:
        """The per-node summary of a pandas table (one part of a table, for Dask)."""
        return summarize_batch(self, self.place(df, positions), self.sensitive_codes(df),
                               self.entity_values(df))


@dataclass
class BatchSummary:
    """What the release needs of a batch, per fitted node.

    ``count`` rows landed in each node; ``hist`` their sensitive values (l-diversity, t-closeness);
    ``edges`` how far the rows held through an open edge (or at the root) reach, for the nodes they
    landed in only (:func:`fold_edges`): a summary is as small as the count, whatever the tree's
    width; ``root_codes[j]`` the fitted codes of nominal QI ``j`` at the root that its fitted rows
    lack, ``new_names[j]`` the values no fitted category matches; ``total`` and ``present`` the sums
    for mean generalization; ``people`` the distinct (node, entity[, sensitive value]) triples of a
    plan with ``entity=`` (:class:`.people.People`).
    """

    count: np.ndarray
    edges: tuple | None = None
    hist: np.ndarray | None = None
    root_codes: dict = field(default_factory=dict)
    new_names: dict = field(default_factory=dict)
    total: np.ndarray | None = None
    present: np.ndarray | None = None
    people: People | None = None

    def merge(self, other: BatchSummary) -> BatchSummary:
        """The summary of both parts of a table."""
        def add(a, b):
            return None if a is None else a + b

        names = {j: self.new_names.get(j, set()) | other.new_names.get(j, set())
                 for j in {*self.new_names, *other.new_names}}
        codes = {j: self.root_codes.get(j, set()) | other.root_codes.get(j, set())
                 for j in {*self.root_codes, *other.root_codes}}
        edges = [e for e in (self.edges, other.edges) if e is not None]
        edges = (None if not edges else edges[0] if len(edges) == 1
                 else fold_edges(*(np.concatenate(part) for part in zip(*edges, strict=True))))
        return BatchSummary(self.count + other.count, edges, add(self.hist, other.hist), codes,
                            names, add(self.total, other.total), add(self.present, other.present),
                            None if self.people is None else self.people.merge(other.people))


def fold_edges(nodes, lo, hi, missing) -> tuple:
    """Rows' (or nodes') bounds folded per node: ``(nodes, lo, hi, missing)``, each node
    once, ascending; ``lo``/``hi`` the smallest and largest present key
    (``MISSING_KEY``/``INT64_MIN`` when none), ``missing`` whether one is missing.

    Examples
    --------
    >>> n, lo, hi, m = fold_edges(np.array([4, 2, 4]), np.array([[5], [1], [3]]),
    ...                           np.array([[5], [1], [3]]), np.zeros((3, 1), bool))
    >>> n.tolist(), lo.ravel().tolist(), hi.ravel().tolist()
    ([2, 4], [1, 3], [1, 5])
    """
    order = np.argsort(nodes, kind="stable")
    nodes = nodes[order]
    starts = np.flatnonzero(np.r_[True, nodes[1:] != nodes[:-1]]) if nodes.size else nodes
    if nodes.size == 0:
        return nodes, lo, hi, missing
    return (nodes[starts], np.minimum.reduceat(lo[order], starts, axis=0),
            np.maximum.reduceat(hi[order], starts, axis=0),
            np.logical_or.reduceat(missing[order], starts, axis=0))


def summarize_batch(plan, placed: Placed, sensitive_codes: np.ndarray | None = None,
                    entity: pd.Series | None = None) -> BatchSummary:
    """Per-node summary of a placed batch (see :class:`BatchSummary`).

    ``entity`` (the rows' entity values, for a plan with ``entity=``) adds the
    batch's :class:`.people.People`.

    ``placed`` keeps every row's keys of the numeric QIs when the plan publishes
    means (:func:`place_batch`'s ``full``, :func:`summed_qis`).
    """
    m = plan.tree.n_nodes
    d = len(plan.encodings)
    node = placed.node
    out = BatchSummary(np.bincount(node, minlength=m).astype(np.int64))
    batch = placed.outside
    r = batch.keys.shape[1]
    lo = np.full((r, d), MISSING_KEY, dtype=np.int64)
    hi = np.full((r, d), INT_MIN, dtype=np.int64)
    missing = np.zeros((r, d), dtype=bool)
    for j in range(d):
        v = batch.keys[j]
        unseen = batch.unseen.get(j)
        seen = np.ones(v.size, dtype=bool) if unseen is None else ~unseen
        if unseen is not None and unseen.any():
            out.new_names[j] = {str(x) if plan.encodings[j].kind != "nominal" else x
                                for x in batch.unseen_values[j]}
        if plan.kernel_kinds[j] == KIND_NOMINAL:
            codes = set(np.unique(v[seen]).tolist())
            if codes:
                out.root_codes[j] = codes
            continue
        is_m = (v == MISSING_KEY) & seen
        missing[is_m, j] = True
        ok = seen & ~is_m
        lo[ok, j] = hi[ok, j] = v[ok]
    if r:
        out.edges = fold_edges(node[placed.rows], lo, hi, missing)
    if sensitive_codes is not None:
        s = plan.sensitive.n_codes
        out.hist = np.bincount(node * s + sensitive_codes, minlength=m * s).reshape(m, s)
    if entity is not None:
        # Without l or t, k people prove a node: no more of them are kept.
        out.people = people_of(node, entity, sensitive_codes,
                               1 if sensitive_codes is None else plan.sensitive.n_codes, cap=plan.k)
    if plan.options["generalization"] == "mean":
        out.total = np.zeros((m, d), dtype=np.float64)
        out.present = np.zeros((m, d), dtype=np.int64)
        for j in summed_qis(plan):
            keys = placed.full[j]
            ok = keys != MISSING_KEY
            values = np.zeros(len(keys), dtype=np.float64)
            values[ok] = (keys[ok].astype(np.float64) if plan.kernel_kinds[j] == KIND_INT
                          else decode_float_keys(keys[ok]))
            out.total[:, j] = np.bincount(node, weights=values, minlength=m)
            out.present[:, j] = np.bincount(node[ok], minlength=m)
    return out


def summed_qis(plan) -> list:
    """The QIs whose per-node sums the summary needs (numeric ones, for means)."""
    if plan.options["generalization"] != "mean":
        return []
    return [j for j in range(len(plan.encodings)) if plan.kernel_kinds[j] in (KIND_INT, KIND_FLOAT)]
