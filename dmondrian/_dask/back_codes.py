"""The keys path's way back: every row's published values as compact codes, not text.

An output partition publishes the rows of its leaves; on the keys path those values travel back to
the rows' input partitions. A label does not travel as text: a range or hierarchy QI sends its
class's key bounds (in the narrow type the QI's keys came in), a nominal QI of at most 64 codes its
class's set of codes as a bitmask, and one flags word a row marks the range QIs' missing values and
the suppressed rows. The input partition then labels the distinct bounds and sets among its rows
with the local engine's own labelers (:func:`dmondrian.release.publish.bound_labels`,
:func:`dmondrian.release.publish.mask_labels`): the same text, formatted once per distinct label of
the file, written as a dictionary. Numbers published as numbers, noised values and class ids travel
as they are; a nominal QI of more codes travels as text. See docs/design.md, section "Moving only
keys".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import _kernel as K
from .._compat import categorical_dtype
from .._kernel.constants import INT_MIN
from ..encoding.distinct_rows import distinct_rows
from ..kinds import kind_spec
from ..privacy.suppression import MASK_LABEL
from ..release.publish import bound_labels, class_values, mask_labels, missing_as_null
from .shipped_keys import gather_keys, narrow_keys
from .text import TEXT, text_labels

__all__ = ["BackLayout", "back_layout", "encode_back", "decode_back"]

#: Codes a nominal QI may have for its sets to travel as one bitmask word.
SET_CODES = 64
#: Bit 0 of the flags word: the row is suppressed (masked, or dropped).
HIDDEN = 1


@dataclass(frozen=True)
class BackLayout:
    """What travels back for each published column (from the plan alone).

    ``bounds``: QI positions whose classes' key bounds travel (range and hierarchy labels),
    ``ranged`` those of them with a missing bit (range labels); ``sets``: nominal QIs whose code
    sets travel as masks, with the mask's type; ``text``: label QIs that travel as text; ``values``:
    the columns that travel as they are (numbers, noise, class ids).
    """

    bounds: tuple
    ranged: tuple
    sets: tuple
    set_dtypes: tuple
    text: tuple
    values: tuple
    flags_dtype: np.dtype


def _uint_for(bits: int) -> np.dtype:
    """The narrowest unsigned type of at least ``bits`` bits."""
    for t in (np.uint8, np.uint16, np.uint32, np.uint64):
        if np.dtype(t).itemsize * 8 >= bits:
            return np.dtype(t)
    raise ValueError(f"{bits} bits do not fit a word")


def back_layout(top) -> BackLayout:
    """The :class:`BackLayout` of plan ``top``."""
    opts = top.options
    bounds, ranged, sets, set_dtypes, text = [], [], [], [], []
    for j, (kind, enc) in enumerate(zip(opts.kinds, top.encodings, strict=True)):
        spec = kind_spec(kind)
        if not spec.publishes_labels(opts.generalization):
            continue
        if spec.label_shape in ("range", "node"):
            bounds.append(j)
            if spec.label_shape == "range":
                ranged.append(j)
        elif spec.label_shape == "set" and enc.card <= SET_CODES:
            sets.append(j)
            set_dtypes.append(_uint_for(enc.card))
        else:
            text.append(j)
    labelled = set(bounds) | set(sets) | set(text)
    values = [q for j, q in enumerate(opts.qis) if j not in labelled]
    values += [nc.column for nc in opts.noise if nc.column not in opts.qis]
    if opts.class_column is not None:
        values.append(opts.class_column)
    return BackLayout(tuple(bounds), tuple(ranged), tuple(sets), tuple(set_dtypes),
                      tuple(text), tuple(values), _uint_for(1 + len(ranged)))


# The back frame's columns of QI ``j``: its bounds, its set masks, its text labels.
_lo, _hi, _set, _text = (f"__dm_{part}{{}}".format for part in ("lo", "hi", "set", "text"))


FLAGS = "__dm_flags"


def back_columns(layout: BackLayout, top, release_meta: pd.DataFrame) -> dict:
    """The empty columns of what travels back, by name (values take ``release_meta``'s dtypes)."""
    out = {}
    for j in layout.bounds:
        for name in (_lo(j), _hi(j)):
            out[name] = np.zeros(0, dtype=top.key_dtypes[j])
    for j, dtype in zip(layout.sets, layout.set_dtypes, strict=True):
        out[_set(j)] = np.zeros(0, dtype=dtype)
    for j in layout.text:
        out[_text(j)] = pd.Series([], dtype=TEXT).array
    for col in layout.values:
        out[col] = release_meta[col].iloc[:0].to_numpy()
    out[FLAGS] = np.zeros(0, dtype=layout.flags_dtype)
    return out


def encode_back(layout: BackLayout, top, encoded, part, rows_hidden, values: dict, n: int) -> dict:
    """Every row's published values as they travel back (rows in the leaves' order).

    ``part`` is the partition of the output partition's rows (the suppressed
    one's, with suppression), ``rows_hidden`` whether each row is suppressed
    (None: none), ``values`` the columns that travel as they are, ``n`` rows.
    """
    opts = top.options
    stats, cls = part.stats, part.class_of_row
    out = {}
    # Everything is made per class, in its narrow type, then gathered to rows once.
    class_flags = np.zeros(part.n_classes, dtype=layout.flags_dtype)
    if layout.bounds:
        _, lo, hi, missing = stats[:4]
        at = list(layout.bounds)
        # A class without a present key has the bounds (MISSING_KEY, INT64_MIN):
        # its largest travels as missing too (no narrow type holds INT64_MIN).
        hi = np.where(lo == K.MISSING_KEY, K.MISSING_KEY, hi)
        for per_class, name in ((lo, _lo), (hi, _hi)):
            shipped = narrow_keys(np.ascontiguousarray(per_class[:, at].T),
                                  [top.key_dtypes[j] for j in at], [top.key_offsets[j] for j in at],
                                  [opts.qis[j] for j in at], [top.key_steps[j] for j in at])
            for j, column in zip(at, shipped, strict=True):
                out[name(j)] = column[cls]
        for b, j in enumerate(layout.ranged):
            class_flags[missing[:, j]] |= layout.flags_dtype.type(1 << (b + 1))
    flags = class_flags[cls]
    if rows_hidden is not None:
        flags[rows_hidden] |= layout.flags_dtype.type(HIDDEN)
    for j, dtype in zip(layout.sets, layout.set_dtypes, strict=True):
        masks = K.class_code_masks(part.sorted_keys[j], stats[0], part.n_classes, 1)[:, 0]
        out[_set(j)] = masks.astype(dtype)[cls]
    for j in layout.text:
        labels, inverse = class_values(encoded[j], j, opts.generalization, stats,
                                       part.sorted_keys[j])
        labels = text_labels(pd.Series(pd.Categorical.from_codes(
            np.arange(len(labels)), categories=labels))).cat.categories
        text = pd.array(np.asarray(labels, dtype=object)[np.asarray(inverse)[cls]], dtype=TEXT)
        if rows_hidden is not None:
            text[rows_hidden] = MASK_LABEL
        out[_text(j)] = text
    out.update(values)
    out[FLAGS] = flags
    return out


def decode_back(layout: BackLayout, top, back: pd.DataFrame, masked: bool
                ) -> tuple[dict, np.ndarray]:
    """The published columns of the rows of ``back`` (in its order), and which are kept.

    Labels come as Categoricals of text whose categories are the labels of
    the rows shown (a suppressed class's labels never linger as categories):
    suppressed rows read ``"*"`` (``masked``) or are not kept.
    """
    opts = top.options
    m = len(back)
    flags = back[FLAGS].to_numpy()
    hidden = (flags & layout.flags_dtype.type(HIDDEN)) != 0
    shown = ~hidden
    keep = np.ones(m, dtype=bool) if masked else shown
    out = {}
    rows = np.flatnonzero(shown) if not shown.all() else None
    for j in (*layout.bounds, *layout.sets):
        enc = top.encodings[j]
        if j in layout.sets:
            masks = _shown(back[_set(j)].to_numpy(), rows)
            (distinct,), inverse = distinct_rows(masks)
            labels, of_distinct = mask_labels(enc, distinct.astype(np.uint64).reshape(-1, 1))
        else:
            lo, hi = (_shown(back[name(j)].to_numpy(), rows) for name in (_lo, _hi))
            missing = np.zeros(len(lo), dtype=bool)
            if j in layout.ranged:
                bit = layout.flags_dtype.type(1 << (layout.ranged.index(j) + 1))
                missing = (_shown(flags, rows) & bit) != 0
            (u_lo, u_hi, u_missing), inverse = distinct_rows(lo, hi, missing)
            bounds = [np.empty(len(u_lo), dtype=np.int64) for _ in range(2)]
            for shipped, out_bound in zip((u_lo, u_hi), bounds, strict=True):
                gather_keys(shipped, np.arange(len(shipped), dtype=np.int64),
                            out_bound, top.key_offsets[j], top.key_steps[j])
            bounds[1][bounds[0] == K.MISSING_KEY] = INT_MIN
            labels, of_distinct = bound_labels(enc, *bounds, u_missing)
        out[opts.qis[j]] = _row_labels(labels, np.asarray(of_distinct)[inverse], shown, masked)
    for j in layout.text:
        column = back[_text(j)]
        labels = text_labels(column.astype("category")).array
        out[opts.qis[j]] = pd.Categorical.from_codes(
            *missing_as_null(labels.categories, labels.codes)[::-1])
    for col in layout.values:
        out[col] = back[col].to_numpy()
    return out, keep


def _shown(values: np.ndarray, rows) -> np.ndarray:
    return values if rows is None else values[rows]


def _row_labels(labels, inverse, shown: np.ndarray, masked: bool) -> pd.Categorical:
    """Each row's label (``inverse`` over the rows ``shown``); the others ``"*"``; a null
    for the all-missing classes (:func:`dmondrian.release.publish.missing_as_null`)."""
    categories, inverse = missing_as_null(pd.Index(labels), inverse)
    codes = np.full(len(shown), -1, dtype=np.int64)
    codes[shown] = inverse
    if masked and not shown.all():
        at = categories.get_indexer([MASK_LABEL])[0]
        if at < 0:
            at = len(categories)
            categories = categories.append(pd.Index([MASK_LABEL], dtype=categories.dtype))
        codes[~shown] = at
    # The labels are distinct by construction: no check that hashes every one again.
    column = pd.Series(pd.Categorical.from_codes(codes, dtype=categorical_dtype(categories),
                                                 validate=False))
    return text_labels(column).array
