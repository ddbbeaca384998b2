"""The QIs as the shuffle ships them: global kernel keys, not values.

Routing already encodes every QI against the global domain; the shuffle carries those keys, each QI
in the narrowest integer type its global range fits (-1 for missing), counted in its step (dates at
midnight: days, not nanoseconds), and each output partition gathers them straight into the kernel's
buffer: nothing is encoded twice, fewer bytes cross the network, and the release is the same. See
docs/design.md, section "Shipped keys".
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._kernel.constants import MASK_CARD, MISSING_KEY
from .._kernel.shipped import _gather_into, _narrow_into
from ..encoding.qi import EncodedQI
from .global_domain import GlobalDomain

__all__ = ["key_dtypes", "key_offsets", "key_steps", "narrow_keys", "gather_keys",
           "qi_encodings", "partition_encodings"]

_INT64_MAX = int(np.iinfo(np.int64).max)


def _step(domain: GlobalDomain, j: int) -> int:
    """The step of a number or date QI's keys measured by the domain pass (1: unknown)."""
    if domain.key_step is None or domain.specs[j].exact_counts:
        return 1
    return max(int(domain.key_step[j]), 1)


def _key_span(domain: GlobalDomain, j: int) -> int | None:
    """Largest value a QI ships: its key range in steps (numbers, dates) or top code;
    None when unknown (numbers of a domain that did not measure their keys)."""
    if domain.specs[j].exact_counts:
        return max(0, int(domain.slots[j]) - 1)
    if domain.key_lo is None:
        return None
    lo, hi = int(domain.key_lo[j]), int(domain.key_hi[j])
    return 0 if lo == MISSING_KEY else (hi - lo) // _step(domain, j)


def key_dtypes(domain: GlobalDomain) -> list[np.dtype]:
    """The type each QI's keys travel in: the narrowest signed integer holding its
    shipped values and -1, or int64 (the keys themselves).

    Examples
    --------
    >>> dom = GlobalDomain(["a", "c"], ["numeric", "nominal"], np.array([0, 3]),
    ...                    np.array([9.0, 1.0]), np.array([0, 3]), [None, ["x", "y"]],
    ...                    [None, None], 10, key_lo=np.array([18, 0]),
    ...                    key_hi=np.array([90, 0]))
    >>> [str(t) for t in key_dtypes(dom)]
    ['int8', 'int8']
    """
    out = []
    for j in range(domain.d):
        span = _key_span(domain, j)
        out.append(np.dtype(np.int64) if span is None or span >= _INT64_MAX
                   else np.min_scalar_type(-(span + 1)))
    return out


def _shipped_narrow(domain: GlobalDomain, j: int, dtype: np.dtype) -> bool:
    """Whether QI ``j``'s keys travel shifted to its smallest key (a narrow number or date)."""
    return (dtype.itemsize < 8 and not domain.specs[j].exact_counts
            and domain.key_lo[j] != MISSING_KEY)


def key_offsets(domain: GlobalDomain) -> list[int]:
    """What is subtracted from each QI's keys before they travel (0 for int64 and codes)."""
    return [int(domain.key_lo[j]) if _shipped_narrow(domain, j, dtype) else 0
            for j, dtype in enumerate(key_dtypes(domain))]


def key_steps(domain: GlobalDomain) -> list[int]:
    """What each QI's shifted keys are divided by before they travel (1 for int64 and codes).

    Keys of dates at midnight are nanoseconds a whole number of days apart:
    they travel as days above the smallest, in 2 bytes instead of 8.

    Examples
    --------
    >>> day = 86_400 * 10**9
    >>> dom = GlobalDomain(["d"], ["datetime"], np.array([0]), np.array([1.0]), np.array([0]),
    ...                    [None], [None], 3, key_lo=np.array([0]),
    ...                    key_hi=np.array([20_000 * day]), key_step=np.array([day]))
    >>> key_steps(dom), [str(t) for t in key_dtypes(dom)]
    ([86400000000000], ['int16'])
    """
    return [_step(domain, j) if _shipped_narrow(domain, j, dtype) else 1
            for j, dtype in enumerate(key_dtypes(domain))]


def narrow_keys(keys: np.ndarray, dtypes: list, offsets: list, names: list,
                steps: list | None = None) -> list[np.ndarray]:
    """Each row of a ``(d, n)`` key matrix as it travels (views where it is int64):
    ``(key - offset) // step`` in its narrow type, -1 for the missing key.

    Raises
    ------
    ValueError
        For a row holding a key outside its type's range, or not a whole number of steps above its
        offset (the input changed between the domain pass and this one); the message names its QI.
    """
    steps = [1] * len(dtypes) if steps is None else steps
    out = []
    for row, dtype, offset, step, name in zip(keys, dtypes, offsets, steps, names, strict=True):
        if dtype.itemsize == 8:
            out.append(row)
            continue
        narrow = np.empty(row.shape[0], dtype=dtype)
        if not _narrow_into(row, np.int64(offset), np.int64(step),
                            np.int64(np.iinfo(dtype).max), narrow):
            raise ValueError(f"QI {name!r} holds a value outside the range the domain pass "
                             "measured")
        out.append(narrow)
    return out


def gather_keys(shipped: np.ndarray, order: np.ndarray, out: np.ndarray, offset: int = 0,
                step: int = 1) -> None:
    """``out[i]`` = the int64 key of row ``order[i]`` of a shipped key column
    (``shipped * step + offset`` for a narrow one, the missing key for -1)."""
    _gather_into(shipped, order, out, shipped.dtype.itemsize < 8, np.int64(offset), np.int64(step))


def qi_encodings(domain: GlobalDomain, meta: pd.DataFrame) -> list[EncodedQI]:
    """Every QI's :class:`EncodedQI` without keys: what publishing needs besides them.

    Numbers and dates take their value type (and time zone) from the input's schema ``meta``, codes
    their names from the global domain; scales are the global ones.
    """
    return [spec.global_encoding(meta[name], float(domain.scales[j]),
                                 categories=domain.categories[j], slots=int(domain.slots[j]),
                                 hierarchy=domain.hierarchies[j])
            for j, (name, spec) in enumerate(zip(domain.names, domain.specs, strict=True))]


def partition_encodings(encodings: list[EncodedQI], key_rows: np.ndarray) -> list[EncodedQI]:
    """The encodings of one output partition whose keys fill ``key_rows`` (d, n).

    A nominal QI with more codes than the kernel keeps as a bitmask has its codes renumbered, in
    place and in the same order, to the ones present (the local engine's own encoding of the rows
    has as many, plus one reserved for missing), so the kernel keeps its bitmask path where it can
    (and knows when the QI is constant). The release is the same either way.
    """
    out = []
    for enc, row in zip(encodings, key_rows, strict=True):
        enc = dataclasses.replace(enc, keys=row)
        if enc.spec.kernel_card(enc.card) > MASK_CARD:
            present = np.flatnonzero(np.bincount(row, minlength=enc.card))
            remap = np.zeros(enc.card, dtype=np.int64)
            remap[present] = np.arange(present.size)
            row[:] = remap[row]
            enc = dataclasses.replace(enc, card=int(present.size),
                                      categories=[enc.categories[c] for c in present])
        out.append(enc)
    return out
