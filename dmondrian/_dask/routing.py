"""Global keys and routing: how the distributed engine sees a row on any worker.

The local engine encodes a table in memory, with codes that depend on the
values present in it. The distributed engine must give a row the same key in
every partition and every pass, so it encodes against a :class:`GlobalDomain`
measured once over the whole dataset:

* numeric, datetime: the value-based keys of :mod:`dmondrian.qi` (already global);
* ordinal: codes in the global category order;
* nominal: position in the global category list (missing: the last code);
* hierarchy: DFS leaf code in the global tree.

A :class:`CutTree` holds the cuts the client decided, as flat arrays. Routing
sends every row of a partition down the tree in one compiled walk per row. A
cut sends a row left when its key (or, for a nominal cut, the key's frequency
rank) is ``<= t``. A relaxed cut also sends left the rows equal to ``eq`` whose
input position (:func:`row_positions`: partition number and offset in it) is
before ``tie_before``: the first tied rows in input order, which is the local
kernel's rule (it sends the first ``need_eq`` tied rows of a node left, and a
node's rows are in input order). The split depends on the values and on each
row's position only, both fixed by the input and its partitioning: every pass,
every retry and every worker route a row identically.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._kernel.constants import MISSING_KEY
from .._kernel.routing import (
    _arrow_codes_into,
    _int_keys_into,
    _priorities,
    _priorities_below,
    _remap_into,
    _route_rows,
    _stable_by_leaf,
)
from ..errors import UnsupportedDtypeError
from ..qi import QIKind, encode_qi

__all__ = ["GlobalDomain", "CutTree", "encode_keys", "slot_keys", "route", "route_bins",
           "row_positions", "row_priority", "sample_below", "leaf_order", "NO_TIES", "ALL_TIES"]

# Kinds whose per-region value counts are kept exactly: small code spaces.
EXACT_KINDS = (QIKind.NOMINAL, QIKind.ORDINAL, QIKind.HIERARCHY)


@dataclass
class GlobalDomain:
    """Every QI's global encoding, measured over the whole dataset.

    Attributes
    ----------
    names : list
        QI column names, in key-matrix order.
    kinds : list of str
        :class:`~dmondrian.qi.QIKind` of each QI.
    kernel_kinds : ndarray of int64
        Kernel kind codes (``dmondrian._kernel.KIND_*``).
    scales : ndarray of float64
        Global domain scale of each QI (see :attr:`dmondrian.qi.EncodedQI.scale`).
    slots : ndarray of int64
        Size of the exact value-count space (nominal: categories + missing;
        ordinal: categories + missing; hierarchy: leaves; 0 otherwise).
    categories : list
        Global category lists (nominal, ordinal) or None.
    hierarchies : list
        Global :class:`~dmondrian.hierarchy.Hierarchy` (with the missing leaf
        when any value is missing) or None.
    n_rows : int
        Rows in the dataset.
    key_lo, key_hi : ndarray of int64, optional
        Smallest and largest present key of every numeric and datetime QI
        (``MISSING_KEY`` and ``INT64_MIN`` when all are missing); None when
        not measured.
    """

    names: list
    kinds: list
    kernel_kinds: np.ndarray
    scales: np.ndarray
    slots: np.ndarray
    categories: list
    hierarchies: list
    n_rows: int
    key_lo: np.ndarray | None = None
    key_hi: np.ndarray | None = None
    _indexes: dict = field(default_factory=dict, repr=False)

    @property
    def d(self) -> int:
        return len(self.names)

    def category_index(self, j: int) -> pd.Index:
        idx = self._indexes.get(j)
        if idx is None:
            idx = self._indexes[j] = pd.Index(self.categories[j], dtype=object)
        return idx

    def ordinal_dtype(self, j: int) -> pd.CategoricalDtype:
        return pd.CategoricalDtype(self.categories[j], ordered=True)

    def kernel_cards(self) -> np.ndarray:
        """Code cardinality the kernel wants (nominal only)."""
        return np.asarray([self.slots[j] if self.kinds[j] == QIKind.NOMINAL else 0
                           for j in range(self.d)], dtype=np.int64)


def _map_codes(name, local_categories, index: pd.Index, missing_code):
    """Global code of each local category (local NA label last -> missing_code)."""
    codes = index.get_indexer(pd.Index(local_categories, dtype=object))
    if (codes < 0).any():
        bad = [c for c, g in zip(local_categories, codes, strict=True) if g < 0][0]
        raise UnsupportedDtypeError(
            name, f"column {name!r} holds {bad!r}, which the global domain pass did not see; "
            "the input changed between passes (it must be deterministic)")
    return np.append(codes, missing_code).astype(np.int64)


def encode_keys(df: pd.DataFrame, domain: GlobalDomain) -> np.ndarray:
    """The ``(d, n)`` matrix of global kernel keys of a partition's QI columns.

    Examples
    --------
    >>> dom = GlobalDomain(["c"], [QIKind.NOMINAL], np.array([3]), np.array([2.0]),
    ...                    np.array([4]), [["a", "b", "z"]], [None], 3)
    >>> encode_keys(pd.DataFrame({"c": ["z", None, "a"]}), dom).tolist()
    [[2, 3, 0]]
    """
    n = len(df)
    keys = np.empty((domain.d, n), dtype=np.int64)
    # Every column is encoded straight into its row of ``keys`` where it can be:
    # a temporary array per column and its copy cost as much as the encoding.
    for j, (name, kind) in enumerate(zip(domain.names, domain.kinds, strict=True)):
        s = df[name]
        if kind in (QIKind.NUMERIC, QIKind.DATETIME):
            if not _plain_keys_into(s, kind, keys[j]):
                keys[j] = encode_qi(s, kind=kind).keys
        elif kind == QIKind.HIERARCHY:
            keys[j] = encode_qi(s, hierarchy=domain.hierarchies[j]).keys
        elif kind == QIKind.ORDINAL:
            if not isinstance(s.dtype, pd.CategoricalDtype):
                s = s.astype(domain.ordinal_dtype(j))
            n_cats = len(s.cat.categories)
            if list(s.cat.categories) != list(domain.categories[j]):
                remap = _map_codes(name, list(s.cat.categories), domain.category_index(j), -1)
            else:
                remap = np.arange(n_cats + 1, dtype=np.int64)
            _remap_into(s.cat.codes.to_numpy(), remap, MISSING_KEY, keys[j])
        else:
            _nominal_keys_into(s, domain.category_index(j), domain.slots[j] - 1, keys[j])
    return keys


def plain_int_values(s: pd.Series, kind: str):
    """``(values, nat_missing)`` of a numpy int (numeric QI) or datetime64 column, whose
    keys are its values (datetimes as int64, NaT missing); None for any other column."""
    dtype = s.dtype
    if not isinstance(dtype, np.dtype):
        return None
    if kind == QIKind.NUMERIC and dtype.kind == "i":
        return s.to_numpy(), False
    if kind == QIKind.DATETIME and dtype.kind == "M":
        return s.to_numpy().view(np.int64), True
    return None


def _plain_keys_into(s: pd.Series, kind: str, out: np.ndarray) -> bool:
    """Keys of a numpy int or datetime64 column into ``out``, as :func:`encode_qi` gives them;
    False for any other column, or one holding the reserved missing key (which
    :func:`encode_qi` then refuses with its typed error)."""
    plain = plain_int_values(s, kind)
    return plain is not None and not _int_keys_into(plain[0], plain[1], out)


def arrow_int32_chunks(codes):
    """``(values, validity bits, bit offset)`` of every non-empty chunk of an Arrow int32
    (chunked) array, read in place: ``fill_null``, ``to_numpy`` and a cast would each
    write the whole column once more. The bits are empty when no value is null."""
    import pyarrow as pa

    for chunk in (codes.chunks if isinstance(codes, pa.ChunkedArray) else [codes]):
        m = len(chunk)
        if m:
            validity, data = chunk.buffers()[:2]
            raw = np.frombuffer(data, dtype=np.int32)[chunk.offset:chunk.offset + m]
            bits = (np.zeros(0, np.uint8) if validity is None or chunk.null_count == 0
                    else np.frombuffer(validity, dtype=np.uint8))
            yield raw, bits, chunk.offset


def _nominal_keys_into(s: pd.Series, index: pd.Index, missing_code, out: np.ndarray) -> None:
    """Global codes of a nominal column into ``out``: local factorize, then one lookup per
    distinct value.

    Same codes as encoding the column locally and remapping its sorted
    categories, without sorting them or counting distinct keys.
    """
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes, uniques = s.cat.codes.to_numpy(), list(s.cat.categories)
    else:
        if _arrow_nominal_keys_into(s, index, missing_code, out):
            return
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        uniques = list(uniques)
    remap = _map_codes(s.name, uniques, index, missing_code)
    # Missing (-1) takes the last entry of remap: the missing code.
    _remap_into(codes, remap, remap[-1], out)


def _arrow_nominal_keys_into(s: pd.Series, index: pd.Index, missing_code, out) -> bool:
    """Global codes of an Arrow-backed string column by one hash lookup per row in
    Arrow (a third cheaper than factorizing it); False for any other column."""
    dtype = s.dtype
    arrow = (isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow") or (
        isinstance(dtype, pd.ArrowDtype) and dtype.kind in "OU")
    if not arrow:
        return False
    import pyarrow as pa
    import pyarrow.compute as pc

    values = s.array.__arrow_array__()
    try:
        value_set = pa.array(list(index), type=values.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # categories that are not strings
        return False
    codes = pc.index_in(values, value_set=value_set)
    if codes.null_count != values.null_count:
        unseen = pc.and_(codes.is_null(), values.is_valid())
        bad = pc.filter(values, unseen)[0].as_py()
        _map_codes(s.name, [bad], index, missing_code)  # raises the typed error
    at = 0
    for raw, bits, offset in arrow_int32_chunks(codes):
        _arrow_codes_into(raw, bits, offset, np.int64(missing_code), out[at:at + len(raw)])
        at += len(raw)
    return True


def slot_keys(keys_row: np.ndarray, j: int, domain: GlobalDomain) -> np.ndarray:
    """Keys of an exact-count QI as slots ``0..slots-1`` (ordinal missing: the last slot)."""
    if domain.kinds[j] == QIKind.ORDINAL:
        return np.where(keys_row == MISSING_KEY, domain.slots[j] - 1, keys_row)
    return keys_row


# -- row positions and priorities ------------------------------------------------------------

#: ``tie_before`` of a cut that sends no tied row left (strict cuts).
NO_TIES = 0
#: ``tie_before`` of a cut that sends every tied row left.
ALL_TIES = np.iinfo(np.int64).max
_OFFSET_BITS = np.int64(32)


def row_positions(partition: int, n: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Input positions of rows ``0..n-1`` of a partition: ``partition * 2**32 + offset``
    (only of row numbers ``rows``, when given).

    Increasing in input order over the whole table (partitions hold fewer than
    ``2**32`` rows), the order in which each leaf's rows reach the local
    engine; relaxed cuts split median ties by it.

    Examples
    --------
    >>> row_positions(0, 3).tolist(), row_positions(2, 2).tolist()
    ([0, 1, 2], [8589934592, 8589934593])
    >>> row_positions(2, 9, np.array([1, 5])).tolist()
    [8589934593, 8589934597]
    """
    start = int(np.int64(partition) << _OFFSET_BITS)
    if rows is not None:
        return start + np.asarray(rows, dtype=np.int64)
    return np.arange(start, start + n, dtype=np.int64)  # one pass, no temporary


def leaf_order(leaf: np.ndarray, positions: np.ndarray, n_leaves: int):
    """Order rows by leaf, then input position; and the leaves present.

    The rows of an output partition reach it in whatever order the shuffle
    delivers; each leaf must reach the local engine in input order so the
    release does not depend on it.

    Parameters
    ----------
    leaf : int array (n,)
        Leaf id of every row, ``0..n_leaves-1``.
    positions : int64 array (n,)
        Distinct input positions (:func:`row_positions`).
    n_leaves : int
        Number of leaves of the plan.

    Returns
    -------
    order : int64 array (n,)
        Row numbers sorted by (leaf, position).
    ids, starts, counts : int64 arrays
        The leaves present, ascending; where each starts in ``order`` and how
        many rows it has.

    Examples
    --------
    >>> order, ids, starts, counts = leaf_order(np.array([2, 0, 2, 0]),
    ...                                         np.array([7, 9, 3, 1]), 4)
    >>> order.tolist(), ids.tolist(), starts.tolist(), counts.tolist()
    ([3, 1, 2, 0], [0, 2], [0, 2], [2, 2])
    """
    # The shuffle delivers runs already in position order, which numpy's
    # stable sort (timsort) merges in about linear time; a counting sort by
    # leaf keeps that order. (A lexsort of the two keys sorted from scratch
    # cost a third of a worker's time per row.)
    leaf = np.asarray(leaf, dtype=np.int64)
    if len(leaf) and not (0 <= leaf.min() and leaf.max() < n_leaves):
        raise ValueError(f"leaf ids must lie in 0..{n_leaves - 1}, got {leaf.min()}..{leaf.max()}")
    by_position = np.argsort(np.asarray(positions, dtype=np.int64), kind="stable")
    order, per_leaf = _stable_by_leaf(leaf, by_position, int(n_leaves))
    ids = np.flatnonzero(per_leaf)
    ends = np.cumsum(per_leaf)
    counts = per_leaf[ids]
    return order, ids.astype(np.int64), (ends[ids] - counts).astype(np.int64), counts


def row_priority(partition: int, n: int, seed: int = 0) -> np.ndarray:
    """Deterministic uniform numbers in [0, 1) for rows ``0..n-1`` of a partition.

    A row is in a region's sample when its priority is below the region's
    sampling rate (or among the smallest ones for a fixed-size sample).
    """
    return _priorities(_priority_base(partition, seed), int(n))


def _priority_base(partition: int, seed: int) -> np.uint64:
    return np.uint64((int(partition) << 32) & 0xFFFFFFFFFFFFFFFF) ^ np.uint64(seed)


def sample_below(partition: int, n: int, rate: float, seed: int = 0):
    """The rows of a partition whose :func:`row_priority` is below ``rate``, and their priorities.

    Same as ``np.flatnonzero(row_priority(partition, n, seed) < rate)`` and
    those priorities, without the array of every row's priority.

    Examples
    --------
    >>> take, prio = sample_below(3, 1000, 0.1, seed=1)
    >>> all_prio = row_priority(3, 1000, seed=1)
    >>> bool((take == np.flatnonzero(all_prio < 0.1)).all() and (prio == all_prio[take]).all())
    True
    """
    return _priorities_below(_priority_base(partition, seed), int(n), float(rate))


# -- the cut tree ----------------------------------------------------------------------------


@dataclass
class CutTree:
    """Cuts decided by the client, as flat arrays indexed by node (root = 0).

    ``qi[i] < 0`` marks a leaf; ``leaf[i]`` is then its slot in the pass's
    region numbering. For an internal node a row goes left when
    ``v <= t[i]`` or (``v == eq[i]`` and its input position ``< tie_before[i]``),
    where ``v`` is the key of QI ``qi[i]``, or ``ranks[rank_off[i] + key]`` when
    ``rank_off[i] >= 0`` (nominal cuts in frequency order). ``tie_before`` is
    :data:`NO_TIES` for strict cuts.
    """

    qi: np.ndarray
    t: np.ndarray
    eq: np.ndarray
    tie_before: np.ndarray
    rank_off: np.ndarray
    ranks: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf: np.ndarray

    @classmethod
    def single_leaf(cls) -> CutTree:
        z = np.zeros(1, dtype=np.int64)
        m = np.full(1, -1, dtype=np.int64)
        return cls(m, z, z, z.copy(), m, np.zeros(1, dtype=np.int64), m, m, z)

    @property
    def has_ties(self) -> bool:
        """Whether some cut splits its ties (routing then needs the rows' positions)."""
        return bool((self.tie_before > NO_TIES).any())


def route(keys: np.ndarray, tree: CutTree, positions: np.ndarray | None = None) -> np.ndarray:
    """Leaf slot of every row (columns of ``keys``).

    ``positions`` are the rows' :func:`row_positions`; without them no tied
    row goes left (enough for a tree without :attr:`CutTree.has_ties`, whose
    walk skips them anyway).

    Examples
    --------
    >>> tree = CutTree(qi=np.array([0, -1, -1]), t=np.array([4, 0, 0]), eq=np.array([5, 0, 0]),
    ...                tie_before=np.array([2, 0, 0]), rank_off=np.array([-1, -1, -1]),
    ...                ranks=np.zeros(1, dtype=np.int64), left=np.array([1, -1, -1]),
    ...                right=np.array([2, -1, -1]), leaf=np.array([-1, 0, 1]))
    >>> route(np.array([[3, 9, 5, 5]]), tree, row_positions(0, 4)).tolist()
    [0, 1, 1, 1]
    >>> route(np.array([[5, 5, 3, 9]]), tree, row_positions(0, 4)).tolist()
    [0, 0, 0, 1]
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    leaf = np.empty(keys.shape[1], dtype=np.int64)
    _route(keys, tree, positions, leaf, np.zeros(0, np.int64), np.zeros(0, np.int64))
    return leaf


def route_bins(keys: np.ndarray, tree: CutTree, positions: np.ndarray | None,
               bin_of_leaf: np.ndarray, leaf_dtype) -> tuple[np.ndarray, np.ndarray]:
    """:func:`route`, and each row's output partition, in the same walk.

    Parameters
    ----------
    keys, tree, positions
        As for :func:`route`.
    bin_of_leaf : int array (n_leaves,)
        Output partition of every leaf.
    leaf_dtype : numpy dtype
        Integer type of the returned leaf ids (narrow: they travel through the shuffle).

    Returns
    -------
    leaf : array of ``leaf_dtype`` (n,)
        ``route(keys, tree, positions)``.
    bins : int64 array (n,)
        ``bin_of_leaf[leaf]``.

    Examples
    --------
    >>> tree = CutTree(qi=np.array([0, -1, -1]), t=np.array([4, 0, 0]), eq=np.array([5, 0, 0]),
    ...                tie_before=np.array([0, 0, 0]), rank_off=np.array([-1, -1, -1]),
    ...                ranks=np.zeros(1, dtype=np.int64), left=np.array([1, -1, -1]),
    ...                right=np.array([2, -1, -1]), leaf=np.array([-1, 0, 1]))
    >>> leaf, bins = route_bins(np.array([[3, 9, 5]]), tree, None, np.array([7, 8]), np.int8)
    >>> leaf.tolist(), leaf.dtype.name, bins.tolist()
    ([0, 1, 1], 'int8', [7, 8, 8])
    """
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    leaf = np.empty(keys.shape[1], dtype=leaf_dtype)
    bins = np.empty(keys.shape[1], dtype=np.int64)
    _route(keys, tree, positions, leaf, bins,
           np.ascontiguousarray(bin_of_leaf, dtype=np.int64))
    return leaf, bins


def _route(keys, tree: CutTree, positions, out_leaf, out_bin, bin_of_leaf) -> None:
    use_tie = positions is not None and tree.has_ties
    pos = np.ascontiguousarray(positions, dtype=np.int64) if use_tie else np.zeros(1, np.int64)
    _route_rows(keys, *(np.ascontiguousarray(a, dtype=np.int64)
                        for a in (tree.qi, tree.t, tree.eq, tree.tie_before, tree.rank_off,
                                  tree.ranks, tree.left, tree.right, tree.leaf)),
                pos, use_tie, out_leaf, out_bin, bin_of_leaf)
