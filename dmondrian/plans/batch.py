"""A new batch against a fitted plan: its keys, the node each row lands in, and a summary.

Keys are the fitted encoding's (:mod:`dmondrian.kinds`): numbers and dates
are their own line, so values beyond the fitted range still compare; a
category the fit never saw has no key and is flagged instead. Every row is
routed down the fitted cut tree to a leaf (:func:`dmondrian._dask.routing.route`,
the Dask engine's compiled walk), then lifted to the deepest node on its path
whose fitted region holds its values:

* a numeric or datetime value inside a node's fitted bounds, or beyond them
  on a side where the node reaches the edge of the fitted domain (edge regions
  are open-ended, and a missing value lies past the high edge);
* a nominal value among the node's fitted codes;
* an ordinal or hierarchy value inside the node's fitted code range.

A value held by no node (a new category, or a missing one where the fit had
none of a kind without an edge) lands at the root. The batch's summary per
node (rows, sensitive values, and how far its rows reach past the node's
fitted bounds) is what :mod:`.release` decides the published classes from;
summaries of parts of a table add up (:meth:`BatchSummary.merge`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._dask.routing import route
from .._kernel.constants import INT_MIN, KIND_FLOAT, KIND_INT, KIND_NOMINAL, MISSING_KEY
from .._kernel.lift import lift_rows
from ..errors import UnsupportedDtypeError
from ..hierarchy import MISSING_LEAF
from ..kinds.keys import decode_float_keys

__all__ = ["BatchKeys", "BatchSummary", "encode_batch", "place_rows", "summarize_batch"]

#: Kinds whose regions are open at the edges of the fitted domain.
EDGE_KINDS = ("numeric", "datetime")


@dataclass
class BatchKeys:
    """A batch's keys in the fitted encoding.

    ``keys`` route (an unseen category holds a stand-in key); ``unseen[j]`` flags
    the rows whose value of QI ``j`` the fit never saw, ``unseen_values[j]``
    their values.
    """

    keys: np.ndarray
    unseen: dict = field(default_factory=dict)
    unseen_values: dict = field(default_factory=dict)


def _as_fitted_dtype(series: pd.Series, qi) -> pd.Series:
    """A numeric or datetime column in the type the plan was fitted on."""
    name = series.name
    try:
        if qi.kind == "numeric" and qi.value_type == "int":
            if not pd.api.types.is_integer_dtype(series.dtype):
                return series.astype("Int64")  # NaN stays missing; 1.5 raises
        elif qi.kind == "numeric" and qi.value_type == "float":
            if not pd.api.types.is_float_dtype(series.dtype):
                return series.astype("float64")
        elif qi.kind == "datetime" and series.dtype != qi.dtype:
            return series.astype(qi.dtype)
    except (TypeError, ValueError) as exc:
        raise UnsupportedDtypeError(name, f"column {name!r} has dtype {series.dtype}, which "
                                          f"the plan (fitted on {qi.dtype}) cannot read: "
                                          f"{exc}") from None
    return series


def _factorized(series: pd.Series):
    """``(codes, uniques)`` of a column, -1 for missing."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy().astype(np.int64), list(series.cat.categories)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return codes.astype(np.int64), list(uniques)


def encode_batch(df: pd.DataFrame, encodings: list) -> BatchKeys:
    """Keys of a batch's QI columns in the fitted encoding (see the module docstring).

    Raises
    ------
    UnsupportedDtypeError
        For a numeric or datetime column the fitted type cannot hold
        (non-integer values where the fit saw integers).
    """
    n = len(df)
    out = BatchKeys(np.empty((len(encodings), n), dtype=np.int64))
    for j, qi in enumerate(encodings):
        series = df[qi.name]
        if qi.kind in EDGE_KINDS:
            enc = qi.spec.encode(_as_fitted_dtype(series, qi))
            if enc.kernel_kind != qi.kernel_kind:
                raise UnsupportedDtypeError(qi.name, f"column {qi.name!r} has dtype "
                                                     f"{series.dtype}; the plan was fitted on "
                                                     f"{qi.dtype}")
            out.keys[j] = enc.keys
            continue
        codes, uniques = _factorized(series)
        missing_key, table = _code_table(qi, uniques)
        lookup = np.append(table, missing_key)  # code -1 (missing) reads the last entry
        keys = lookup[codes]
        bad = keys == _UNSEEN
        if bad.any():
            out.unseen[j] = bad
            out.unseen_values[j] = np.asarray(
                [uniques[c] if c >= 0 else None for c in codes[bad]], dtype=object)
            # A stand-in the routing walk can read; the row lands at the root.
            keys[bad] = 0 if qi.kind != "ordinal" else MISSING_KEY
        out.keys[j] = keys
    return out


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
    if plan.encodings[j].kind not in EDGE_KINDS:
        return inside, inside
    open_lo = lo == tree.lo[0, j]
    open_hi = hi == tree.hi[0, j]
    held = np.where(is_m, miss | open_hi, ((v >= lo) | open_lo) & ((v <= hi) | open_hi))
    return held, inside


#: Largest nodes x nominal codes table the compiled lift looks codes up in (bytes).
MEMBER_BYTES = 256 << 20


def lift_tables(plan):
    """The arrays :func:`dmondrian._kernel.lift.lift_rows` reads (None: the table of
    nominal codes would exceed :data:`MEMBER_BYTES`; the rows are lifted in numpy)."""
    tree = plan.tree
    m, d = tree.lo.shape
    offsets = np.zeros(d, dtype=np.int64)
    total = 0
    for j, (_, card) in sorted(tree.codes.items()):
        offsets[j] = total
        total += card
    if m * max(total, 1) > MEMBER_BYTES:
        return None
    member = np.zeros((m, max(total, 1)), dtype=np.uint8)
    for j, (packed, card) in tree.codes.items():
        member[packed // card, offsets[j] + packed % card] = 1
    edge = np.asarray([qi.kind in EDGE_KINDS for qi in plan.encodings], dtype=bool)
    open_lo = ((tree.lo == tree.lo[0]) & edge).astype(np.uint8)
    open_hi = ((tree.hi == tree.hi[0]) & edge).astype(np.uint8)
    nominal = (plan.kernel_kinds == KIND_NOMINAL).astype(np.uint8)
    return (tree.parent, tree.lo, tree.hi, tree.missing.astype(np.uint8), open_lo, open_hi,
            nominal, member, offsets)


def place_rows(plan, batch: BatchKeys, positions=None) -> tuple[np.ndarray, np.ndarray]:
    """The node every row lands in, and which rows lie outside its fitted bounds.

    Parameters
    ----------
    plan : FittedPlan
    batch : BatchKeys
    positions : int64 array, optional
        The rows' input positions (relaxed plans split median ties by them).

    Returns
    -------
    node : int64 array (rows,)
    outside : bool array (rows,)
        Rows held by their node only through an open edge, or at the root
        without being held: their values widen the published label.
    """
    keys = batch.keys
    n = keys.shape[1]
    node = route(keys, plan.tree.cuts, positions) if n else np.zeros(0, dtype=np.int64)
    unseen = np.zeros(n, dtype=bool)
    for mask in batch.unseen.values():
        unseen |= mask
    tables = plan.lift_tables
    if tables is not None:
        outside = np.zeros(n, dtype=np.uint8)
        lift_rows(keys, node, outside, unseen.view(np.uint8), *tables)
        return node, outside.view(bool)
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
    return node, outside


@dataclass
class BatchSummary:
    """What the release needs of a batch, per fitted node.

    ``count`` rows landed in each node; ``hist`` their sensitive values
    (l-diversity, t-closeness); ``lo``/``hi``/``missing`` how far the rows
    held through an open edge (or at the root) reach; ``root_codes[j]`` the
    fitted codes of nominal QI ``j`` at the root that its fitted rows lack,
    ``new_names[j]`` the values no fitted category matches; ``total`` and
    ``present`` the sums for mean generalization.
    """

    count: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray
    hist: np.ndarray | None = None
    root_codes: dict = field(default_factory=dict)
    new_names: dict = field(default_factory=dict)
    total: np.ndarray | None = None
    present: np.ndarray | None = None

    def merge(self, other: BatchSummary) -> BatchSummary:
        """The summary of both parts of a table."""
        def add(a, b):
            return None if a is None else a + b

        names = {j: self.new_names.get(j, set()) | other.new_names.get(j, set())
                 for j in {*self.new_names, *other.new_names}}
        codes = {j: self.root_codes.get(j, set()) | other.root_codes.get(j, set())
                 for j in {*self.root_codes, *other.root_codes}}
        return BatchSummary(self.count + other.count, np.minimum(self.lo, other.lo),
                            np.maximum(self.hi, other.hi), self.missing | other.missing,
                            add(self.hist, other.hist), codes, names,
                            add(self.total, other.total), add(self.present, other.present))


def summarize_batch(plan, batch: BatchKeys, node: np.ndarray, outside: np.ndarray,
                    sensitive_codes: np.ndarray | None = None) -> BatchSummary:
    """Per-node summary of a placed batch (see :class:`BatchSummary`)."""
    m = plan.tree.n_nodes
    d = batch.keys.shape[0]
    count = np.bincount(node, minlength=m).astype(np.int64)
    lo = np.full((m, d), MISSING_KEY, dtype=np.int64)
    hi = np.full((m, d), INT_MIN, dtype=np.int64)
    missing = np.zeros((m, d), dtype=bool)
    out = BatchSummary(count, lo, hi, missing)
    rows = np.flatnonzero(outside)
    nd = node[rows]
    for j in range(d):
        v = batch.keys[j, rows]
        unseen = batch.unseen.get(j)
        seen = np.ones(rows.size, dtype=bool) if unseen is None else ~unseen[rows]
        if unseen is not None and unseen.any():
            out.new_names[j] = {str(x) if plan.encodings[j].kind != "nominal" else x
                                for x in batch.unseen_values[j]}
        if plan.kernel_kinds[j] == KIND_NOMINAL:
            codes = set(np.unique(v[seen]).tolist())
            if codes:
                out.root_codes[j] = codes
            continue
        is_m = (v == MISSING_KEY) & seen
        np.logical_or.at(missing[:, j], nd[is_m], True)
        ok = seen & ~is_m
        np.minimum.at(lo[:, j], nd[ok], v[ok])
        np.maximum.at(hi[:, j], nd[ok], v[ok])
    if sensitive_codes is not None:
        s = plan.sensitive.n_codes
        out.hist = np.bincount(node * s + sensitive_codes, minlength=m * s).reshape(m, s)
    if plan.options["generalization"] == "mean":
        out.total = np.zeros((m, d), dtype=np.float64)
        out.present = np.zeros((m, d), dtype=np.int64)
        for j in range(d):
            kk = plan.kernel_kinds[j]
            if kk not in (KIND_INT, KIND_FLOAT):
                continue
            keys = batch.keys[j]
            ok = keys != MISSING_KEY
            values = np.zeros(len(keys), dtype=np.float64)
            values[ok] = (keys[ok].astype(np.float64) if kk == KIND_INT
                          else decode_float_keys(keys[ok]))
            out.total[:, j] = np.bincount(node, weights=values, minlength=m)
            out.present[:, j] = np.bincount(node[ok], minlength=m)
    return out
