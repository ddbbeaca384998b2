"""Step 1, the domain pass: one pass over all partitions for every QI's global domain.

Each partition yields a mergeable :class:`DomainSketch` (row count, key bounds and steps, value
counts, missing counts, a uniform row sample); the client turns the merged sketch into the
:class:`~.global_domain.GlobalDomain` (codes, scales) and the root region's exact
:class:`~.sketch.Summary`, so the first cut needs no second pass. The pass also fixes the leaf size.
See docs/design.md, section "Step 1: the domain pass".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .._compat import known_partition_lengths
from .._kernel.constants import INT_MIN, MISSING_KEY
from .._kernel.scan import _code_counts, _count_codes, _int_bounds, _key_bounds, _key_step
from .._kernel.strings import MAX_VALUES, lookup_strings, value_table
from ..encoding.qi import warn_unique_text
from ..kinds import kind_spec
from ..kinds.keys import arrow_int32_chunks, arrow_string_chunks
from ..partition.routing import row_positions, sample_below
from ..partition.sketch import Summary
from ..release.identifiers import (
    DistinctSketch,
    distinct_sketch,
    estimate_identifying,
    merge_distinct,
)
from ..release.person_keys import SAMPLE_ROWS, person_key_columns
from ..release.unique_count import unique_rows
from .cluster import on_client, run
from .exchange import exchanged_bytes
from .global_domain import GlobalDomain, encode_keys
from .graph import column_partitions, tree_reduce
from .memory import check_fits, measure_workers
from .options import LEAF_ROWS_MIN, DaskOptions, guess_row_bytes, least_row_bytes, sizing
from .written_check import identifying_check

__all__ = ["run_domain_pass", "DomainSketch", "domain_sketch",
           "merge_domain", "build_domain", "probe_first_partition", "fixed_width_bytes"]


@dataclass
class DomainSketch:
    """Mergeable domain summary of some rows.

    Row count; key bounds and key steps of numeric and datetime QIs; value
    counts (and category sets) of nominal, ordinal and hierarchy QIs; missing
    counts; the sample rows kept so far, their priorities and input positions.
    """

    n: int
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray
    values: dict
    categories: dict
    sample: pd.DataFrame
    priority: np.ndarray
    #: Input positions of the sample's rows (:func:`~dmondrian.partition.routing.row_positions`).
    positions: np.ndarray
    sample_size: int
    #: Every partition seen has the default index 0..n-1 (row positions).
    positional_index: bool = False
    #: Rows of the largest partition seen.
    largest: int = 0
    #: The gcd of ``key - lo`` over the present keys of each numeric and datetime
    #: QI (0: at most one distinct key; None: not measured).
    step: np.ndarray | None = None


def _positional(index: pd.Index) -> bool:
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def domain_sketch(df: pd.DataFrame, partition: int, qis: list, kinds: list,
                  sample_size: int, rate: float = 1.0, kernel_kinds=None) -> DomainSketch:
    """Domain sketch of one partition (``df`` holds at least the QI columns).

    The sample holds the rows whose priority (:func:`~dmondrian.partition.routing.row_priority`,
    seed 1) is below ``rate``; past ``sample_size`` rows, the ``sample_size`` smallest priorities.
    Merged sketches keep the same rule, so the merged sample is uniform: the rows below ``rate`` if
    at most ``sample_size`` are, else the ``sample_size`` smallest priorities over the whole table.

    Parameters
    ----------
    df : pandas.DataFrame
        One partition.
    partition : int
        Its partition number (fixes the rows' positions and priorities).
    qis, kinds : list
        QI column names and their kind names (the keys of :data:`dmondrian.kinds.KINDS`).
    sample_size : int
        Most sample rows kept.
    rate : float, default 1.0
        Sampling rate: the expected fraction of rows sampled.
    kernel_kinds : list of int, optional
        The kernel kind the schema gives each QI (see
        :meth:`~dmondrian.kinds.QIKindSpec.conform_partition`).

    Returns
    -------
    DomainSketch

    Examples
    --------
    >>> df = pd.DataFrame({"age": [30, 20, None], "sex": ["F", "M", "F"]})
    >>> sk = domain_sketch(df, 0, ["age", "sex"], ["numeric", "nominal"], 2)
    >>> sk.n, int(sk.missing[0]), sk.values[1].to_dict(), len(sk.sample)
    (3, 1, {'F': 2, 'M': 1}, 2)
    >>> len(domain_sketch(df, 0, ["age", "sex"], ["numeric", "nominal"], 2, rate=0.0).sample)
    0
    """
    d = len(qis)
    lo = np.full(d, MISSING_KEY, dtype=np.int64)
    hi = np.full(d, INT_MIN, dtype=np.int64)
    missing = np.zeros(d, dtype=np.int64)
    step = np.zeros(d, dtype=np.int64)
    values, categories = {}, {}
    for j, (q, kind) in enumerate(zip(qis, kinds, strict=True)):
        s = df[q]
        spec = kind_spec(kind)
        if spec.exact_counts:
            if isinstance(s.dtype, pd.CategoricalDtype):
                categories[j] = {tuple(s.cat.categories)}
            missing[j], values[j] = _value_counts(s)
            continue
        if kernel_kinds is not None:
            s = spec.conform_partition(s, kernel_kinds[j])
        plain = spec.plain_int_values(s)
        if plain is None or not _plain_bounds(plain, j, lo, hi, missing):
            # One pass for the bounds and the missing count (numpy's mask, copy,
            # min and max would make five).
            plain = spec.encode(s).keys, False
            missing[j] = _key_bounds(plain[0][None, :], MISSING_KEY, lo[j:j + 1], hi[j:j + 1])[0]
        if lo[j] != MISSING_KEY:
            step[j] = _int64_step(_key_step(plain[0], lo[j], plain[1]))
    take, prio = sample_below(partition, len(df), rate, seed=1)
    if take.shape[0] > sample_size:
        keep = np.argpartition(prio, sample_size)[:sample_size]
        take, prio = take[keep], prio[keep]
    sample = df[qis].iloc[take].reset_index(drop=True)
    positions = row_positions(partition, len(df), take)
    return DomainSketch(len(df), lo, hi, missing, values, categories, sample, prio,
                        positions, sample_size, _positional(df.index), len(df), step)


def _int64_step(step: int) -> int:
    """A step as an int64: one past its range (two keys 2**63 apart) counts as 1."""
    return step if step <= _INT64_MAX else 1


_INT64_MAX = int(np.iinfo(np.int64).max)


def _plain_bounds(plain: tuple, j: int, lo, hi, missing) -> bool:
    """Key bounds and missing count of a column whose keys are its own int64 values (``plain``, from
    :meth:`~dmondrian.kinds.QIKindSpec.plain_int_values`: numpy ints, datetime64), read from them
    without a key array; False when they hold the reserved missing key (encoding refuses it)."""
    a, b, n_missing, reserved = _int_bounds(*plain)
    if reserved:
        return False
    lo[j], hi[j], missing[j] = a, b, n_missing
    return True


def _value_counts(s: pd.Series) -> tuple[int, pd.Series]:
    """Missing count and the count of every present value, in order of first
    appearance (category order for a categorical), values as an object index."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        # A bincount of the codes: pandas' categorical value_counts does far more work.
        cats = s.cat.categories
        counts, n_missing = _code_counts(s.cat.codes.to_numpy(), len(cats))
        present = np.flatnonzero(counts)
        index = pd.Index(list(cats.take(present)), dtype=object)
        return int(n_missing), pd.Series(counts[present], index=index, name="count")
    missing = int(s.isna().sum())
    fast = _arrow_string_counts(s)
    if fast is not None:
        return missing, fast
    vc = s.value_counts(dropna=True, sort=False)
    vc.index = pd.Index(list(vc.index), dtype=object)
    return missing, vc.astype(np.int64)


#: Rows whose distinct values :func:`_arrow_string_counts` looks up in the whole column.
_PREFIX_ROWS = 4096


def _arrow_string_counts(s: pd.Series) -> pd.Series | None:
    """Value counts of an Arrow string column of few distinct values, or None.

    The values of the first rows are looked up in every row (Arrow's ``index_in``, cheaper than its
    ``value_counts``); only the rows holding other values are counted by ``value_counts``. Values
    first seen in the prefix come first, in order of first appearance, so the result is
    ``value_counts(sort=False)``'s.
    """
    dtype = s.dtype
    if not ((isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow")
            or isinstance(dtype, pd.ArrowDtype)):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    values = s.array.__arrow_array__()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return None
    known = pc.unique(values.slice(0, _PREFIX_ROWS)).drop_null()
    if len(known) > _PREFIX_ROWS // 8:  # many distinct values: one value_counts is cheaper
        return None
    if len(known) <= MAX_VALUES:
        fast = _few_string_counts(values, known.to_pylist())
        if fast is not None:
            return fast
    codes = pc.index_in(values, value_set=known)
    counts = np.zeros(len(known), dtype=np.int64)
    for raw, bits, offset in arrow_int32_chunks(codes):
        _count_codes(raw, bits, offset, counts)
    labels = known.to_pylist()
    if codes.null_count > values.null_count:  # values first seen after the prefix
        rest = pc.value_counts(pc.filter(values, pc.and_(codes.is_null(), values.is_valid())))
        labels += rest.field(0).to_pylist()
        counts = np.concatenate([counts, rest.field(1).to_numpy().astype(np.int64)])
    return pd.Series(counts, index=pd.Index(labels, dtype=object), name="count")


_NO_CODES = np.zeros(0, dtype=np.int64)


def _few_string_counts(values, labels: list) -> pd.Series | None:
    """:func:`_arrow_string_counts` when the prefix's few values are all the column holds: each row
    compared to each (:mod:`dmondrian._kernel.strings`); None when another value turns up."""
    vdata, voff = value_table(labels)
    counts = np.zeros(len(labels), dtype=np.int64)
    for offsets, data, bits, bit_offset, _ in arrow_string_chunks(values):
        if lookup_strings(offsets, data, bits, bit_offset, vdata, voff, -1, _NO_CODES, counts) >= 0:
            return None
    return pd.Series(counts, index=pd.Index(labels, dtype=object), name="count")


def merge_domain(*sketches: DomainSketch) -> DomainSketch:
    """Combine the domain sketches of disjoint rows."""
    first = sketches[0]
    if len(sketches) == 1:
        return first
    values = {}
    for j in first.values:
        parts = [s.values[j] for s in sketches if len(s.values[j])]
        values[j] = (pd.concat(parts).groupby(level=0, sort=False).sum()
                     if parts else first.values[j])
    categories = {j: set().union(*(s.categories.get(j, set()) for s in sketches))
                  for j in first.categories}
    sample = pd.concat([s.sample for s in sketches], ignore_index=True)
    prio = np.concatenate([s.priority for s in sketches])
    pos = np.concatenate([s.positions for s in sketches])
    if len(prio) > first.sample_size:
        take = np.argpartition(prio, first.sample_size)[:first.sample_size]
        sample, prio, pos = sample.iloc[take].reset_index(drop=True), prio[take], pos[take]
    return DomainSketch(sum(s.n for s in sketches), np.minimum.reduce([s.lo for s in sketches]),
                        np.maximum.reduce([s.hi for s in sketches]),
                        np.sum([s.missing for s in sketches], axis=0), values, categories, sample,
                        prio, pos, first.sample_size, all(s.positional_index for s in sketches),
                        max(s.largest for s in sketches), _merged_steps(sketches))


def _merged_steps(sketches) -> np.ndarray | None:
    """The key steps of the union of disjoint rows: the gcd of every part's step and of
    the distances between the parts' smallest keys (None when a part has none)."""
    if any(s.step is None for s in sketches):
        return None
    out = np.zeros(len(sketches[0].step), dtype=np.int64)
    for j in range(len(out)):
        step, ref = 0, None
        for s in sketches:
            lo = int(s.lo[j])
            if lo == MISSING_KEY:  # no present key
                continue
            step = math.gcd(step, int(s.step[j]), 0 if ref is None else lo - ref)
            ref = lo if ref is None else ref
        out[j] = _int64_step(step)
    return out


def build_domain(sketch: DomainSketch, qis: list, kinds: list, hierarchies: dict,
                 meta: pd.DataFrame) -> tuple[GlobalDomain, Summary]:
    """The global domain and the root's exact summary from the merged sketch."""
    d = len(qis)
    specs = [kind_spec(kind) for kind in kinds]
    kernel_kinds = np.zeros(d, dtype=np.int64)
    scales = np.zeros(d)
    slots = np.zeros(d, dtype=np.int64)
    categories, trees = [None] * d, [None] * d
    lo, hi = sketch.lo.copy(), sketch.hi.copy()
    key_lo, key_hi = sketch.lo.copy(), sketch.hi.copy()
    hist = {}
    for j, (q, spec) in enumerate(zip(qis, specs, strict=True)):
        if not spec.exact_counts:
            kernel_kinds[j] = spec.kernel_kind_of(meta[q].dtype)
            scales[j] = spec.key_scale(int(lo[j]), int(hi[j]), int(kernel_kinds[j]))
            continue
        vc = sketch.values[j]
        categories[j] = spec.global_categories(q, vc.index, sketch.categories.get(j, set()),
                                               meta[q].dtype)
        counts, trees[j] = spec.global_slots(vc, int(sketch.missing[j]), categories=categories[j],
                                             hierarchy=hierarchies.get(q))
        slots[j] = len(counts)
        if spec.label_shape == "set":
            warn_unique_text(q, len(categories[j]), int(sketch.n))
        kernel_kinds[j] = spec.kernel_kind_of(meta[q].dtype)
        scales[j] = spec.slot_scale(counts)
        hist[j] = counts.astype(np.float64)
        lo[j], hi[j] = spec.slot_bounds(counts)
    domain = GlobalDomain(list(qis), list(kinds), kernel_kinds, scales, slots, categories,
                          trees, int(sketch.n), key_lo=key_lo, key_hi=key_hi,
                          key_step=None if sketch.step is None else sketch.step.copy())
    keys = encode_keys(sketch.sample, domain)
    m = keys.shape[1]
    weights = np.full(m, sketch.n / m if m else 1.0)
    missing = sketch.missing.astype(np.float64)
    for j, spec in enumerate(specs):
        if spec.missing_is_value:
            # Missing is a value of the kind (a code, a leaf), not the missing
            # key: region summaries count no missing row for it either.
            missing[j] = 0.0
    root = Summary(float(sketch.n), lo, hi, missing, hist, keys, weights, sketch.positions,
                   exact=True, d=d)
    return domain, root


# -- the pass ------------------------------------------------------------------------------------


def probe_first_partition(part: pd.DataFrame, fixed_bytes: int = 0):
    """Rows of the first partition, and its in-memory bytes per row (None when empty).

    ``part`` may hold only some columns: ``fixed_bytes`` is a row's bytes in the others, all
    of fixed width (:func:`fixed_width_bytes`), which need not be read to be measured.
    """
    rows = len(part)
    return rows, (float(part.memory_usage(deep=True).sum() + fixed_bytes * rows) / rows
                  if rows else None)


def fixed_width_bytes(meta: pd.DataFrame, read) -> tuple[list, int]:
    """The columns of ``meta`` the probe must read (``read``, and every column whose bytes
    a row vary: text, categoricals, extension arrays), and a row's bytes in the others
    (numpy numbers, booleans and datetimes: their item size)."""
    read = set(read)
    fixed = {c: t.itemsize for c, t in meta.dtypes.items()
             if c not in read and isinstance(t, np.dtype) and t.kind in "biufcmM"}
    return [c for c in meta.columns if c not in fixed], int(sum(fixed.values()))


def head_partitions(lengths) -> int:
    """How many first partitions hold the person-key rule's sample
    (:data:`~dmondrian.release.person_keys.SAMPLE_ROWS` rows), by their known ``lengths``;
    the first alone when they are unknown."""
    if not lengths:
        return 1
    reached = np.flatnonzero(np.cumsum(lengths) >= SAMPLE_ROWS)
    return int(reached[0]) + 1 if len(reached) else len(lengths)


def _person_keys(present, qis, *head) -> list:
    """The person keys among ``present`` in the first partitions ``head``."""
    return person_key_columns(pd.concat(head) if len(head) > 1 else head[0], present, qis)


def run_domain_pass(client, ddf, opts: DaskOptions, progress, sample_rows: int,
                    check_identifying: bool = True):
    """Pass 1: the global domain, the root's summary, and the leaf size.

    With ``check_identifying`` False the pass reads only the QIs: the identifying-column check is
    left to the pass that writes the release, which reads every column anyway
    (:func:`dmondrian._dask.leaves.written`); the person-key check still reads the first partitions'
    candidates (:func:`head_partitions`).

    Returns
    -------
    domain : GlobalDomain
    root : Summary
        The whole table's exact summary, with the sample the first cuts are planned on.
    positional_index : bool
        Whether every input partition is indexed ``0..n-1``.
    sizing : dmondrian._dask.options.Sizing
        With the largest partition's rows.
    identifying : list of dmondrian.release.identifiers.IdentifyingColumn
        Columns released as is that single out rows (judged by sketches of distinct values kept in
        this same pass, and an exact count in a pass of its own for the columns the sketches leave
        unsure: :mod:`dmondrian.release.identifiers`; empty when not ``check_identifying``).
    person_keys : list
        The candidates that look like a person key on the first partitions
        (:func:`dmondrian.release.person_keys.person_key_columns`), less those in
        ``identifying``; the caller warns.

    Raises
    ------
    dmondrian.errors.MemoryLimitError
        Before the pass, when the workers' memory cannot hold the smallest
        plan (by the least a row can take).
    """
    from dask import delayed

    lengths = known_partition_lengths(ddf)
    meta = ddf._meta
    checked = identifying_check(meta, opts)
    present = [c for c in checked if c in meta.columns]
    read = [*opts.qis, *(present if check_identifying else ())]
    parts = column_partitions(ddf, read)
    probe = first = None
    if lengths is None or opts.leaf_rows is None:
        # The first partition, read alongside the pass, gives the row size of
        # the default leaf_rows and, without known lengths, the table's size.
        # Read once for the pass too, and only the columns whose bytes vary and
        # those the pass and the person-key check read: a 1M-row partition's
        # every column would be a fifth of a 5M-row table read again.
        columns, fixed = fixed_width_bytes(meta, [*opts.qis, *present])
        first = column_partitions(ddf, columns)[0]
        parts[0] = first
        probe = delayed(probe_first_partition, pure=True)(first, fixed)
    mem = measure_workers(client)
    # A lower bound of the row size, on the path needing less (the keys path's
    # keys at a byte each): only a cluster that cannot work is refused before
    # the data is read (the plan checks again on measured rows).
    least = least_row_bytes(ddf._meta)
    check_fits(mem, least, len(opts.qis), max(lengths) if lengths else 0,
               smallest_leaf(opts, sum(lengths) if lengths else None),
               (None, exchanged_bytes(ddf._meta, least, opts, float(len(opts.qis)))[1]))
    per_thread = None if mem is None else mem.per_thread
    sized = delayed(sizing, pure=True)(
        probe, None if lengths is None else sum(lengths), ddf.npartitions, opts.leaf_rows,
        per_thread, guess_row_bytes(ddf._meta), len(opts.qis), opts.k, sample_rows)
    sketch_d = delayed(domain_sketch, pure=True)
    kernel_kinds = [kind_spec(kind).kernel_kind_of(meta[q].dtype)
                    for q, kind in zip(opts.qis, opts.kinds, strict=True)]
    partials = [sketch_d(p, i, opts.qis, opts.kinds, sized.sample_size, rate=sized.rate,
                         kernel_kinds=kernel_kinds) for i, p in enumerate(parts)]
    # Without the identifying check, an empty sketch stands in (no task).
    distinct = tree_reduce([delayed(distinct_sketch, pure=True)(p, checked) for p in parts],
                           merge_distinct) if check_identifying else delayed(DistinctSketch({}))
    # Person keys are looked for on the first partitions, whose read the pass shares (their QIs' or
    # the probe's): a person's rows usually sit together, and the rule samples whole values anyway
    # (dmondrian.release.person_keys). With known lengths, as many as make the rule's sample: a
    # first partition under MIN_ROWS rows alone would say nothing where the local engine warns.
    jobs = [tree_reduce(partials, merge_domain), sized, distinct]
    if opts.entity is None and parts:
        m = head_partitions(lengths)
        head = parts[:m]
        if present and not check_identifying:
            head = column_partitions(ddf, [*opts.qis, *present])[:m]
            head[0] = head[0] if first is None else first
        jobs.append(delayed(_person_keys, pure=True)(present, opts.qis, *head))
    merged, sized, distinct, *keyish = run(client, jobs, progress, "pass 1: global domain")
    keyish = keyish[0] if keyish else []
    domain, root = build_domain(merged, opts.qis, opts.kinds, opts.hierarchies, ddf._meta)
    # The columns the sketch leaves unsure are counted exactly, in a pass of their own.
    count = on_client(client, progress)
    identifying = (estimate_identifying(distinct, merged.n).resolve(
        lambda unsure: unique_rows(ddf, unsure, count)) if check_identifying else [])
    flagged = {f.column for f in identifying}
    return (domain, root, merged.positional_index, replace(sized, largest_partition=merged.largest),
            identifying, [f for f in keyish if f[0] not in flagged])


def smallest_leaf(opts: DaskOptions, n_rows: int | None = None) -> int:
    """The smallest leaf a plan of these options may use: the given ``leaf_rows``, else
    the least default, raised to ``2 * k``; never more rows than the table holds.

    ``n_rows`` is the table's rows when dask knows them; otherwise a given
    ``leaf_rows`` counts at most as the least default (a leaf of the whole
    table may be small: the plan checks again on the counted rows).
    """
    leaf = opts.leaf_rows or LEAF_ROWS_MIN
    leaf = min(leaf, max(int(n_rows), 1)) if n_rows is not None else min(leaf, LEAF_ROWS_MIN)
    return max(leaf, 2 * opts.k)
