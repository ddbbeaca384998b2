"""The global domain: every QI's encoding, measured once, and the keys it gives a row.

The local engine encodes a table in memory, with codes that depend on the
values present in it. The Dask engine must give a row the same key in every
partition and every pass, so it encodes against a :class:`GlobalDomain`,
which the domain pass (:mod:`.domain_pass`) measures over the whole table.
See docs/design.md, section "Global domain and keys".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._kernel.constants import MISSING_KEY
from .._kernel.routing import _arrow_codes_into, _int_keys_into, _remap_into
from ..errors import UnsupportedDtypeError
from ..qi import QIKind, encode_qi

__all__ = ["EXACT_KINDS", "GlobalDomain", "encode_keys", "slot_keys", "plain_int_values",
           "arrow_int32_chunks"]

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
    # a temporary array per column would be written, then copied, once more.
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
    Arrow (no factorization, no remap); False for any other column."""
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

