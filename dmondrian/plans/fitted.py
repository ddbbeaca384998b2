"""Fit a Mondrian partition once, then release any number of new tables through it.

:func:`fit_plan` runs the local engine on a table and keeps its cut tree (:mod:`.tree`);
:meth:`FittedPlan.transform` routes a new table's rows through it (:mod:`.batch`) and publishes
every region with at least k of them (:mod:`.release`). The steps per batch are one routing walk,
one count per node and one label per class: no partitioning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pandas as pd

from .._kernel.constants import KIND_FLOAT, KIND_NOMINAL, MISSING_KEY
from ..encoding.qi import warn_unique_text_qis
from ..encoding.sensitive import encode_sensitive
from ..encoding.validation import check_options
from ..errors import ParameterError
from ..kinds.keys import decode_float_keys
from ..local import encode_table, kernel_rules, partition
from ..options import plan_fit_options
from ..privacy.constraints import KAnonymity, kernel_privacy, refuse_empty
from ..privacy.entities import encode_entities, pair_counts
from ..privacy.noise import check_noise_dtypes, noisy_columns
from ..release.identifiers import refuse_identifying, released_as_is
from ..release.person_keys import release_guard, warn_person_keys
from .batch import Placing, place_batch, summarize_batch
from .packed import lift_tables
from .release import decide, node_depths, publish_rows
from .sizing import LIFT_COST, PLAN_OPTIONS, fit_k, fit_trim, refit_overflow, transform_overflow
from .tree import abut_cut_sides, build_tree

__all__ = ["FittedPlan", "OwnBounds", "fit_plan", "fit_k", "fit_trim"]

#: How :meth:`FittedPlan.transform` labels a class published above a leaf: by name,
#: or the least NCP a row its own rows' labels must save (a number in [0, 1]).
SHORT_LABELS = ("fitted", "rows")


class FittedPlan(Placing):
    """A fitted Mondrian partition: its options, its QIs' encodings and its cut tree.

    Made by :func:`fit_plan` (or :meth:`dmondrian.MondrianAnonymizer.fit`) and
    read back by :func:`dmondrian.plans.load_plan`; :meth:`transform` releases
    a table through it, :func:`dmondrian.plans.save_plan` writes it as JSON.

    Attributes
    ----------
    qis : list
        The quasi-identifiers.
    k : int
        Every published class of every batch holds at least ``k`` rows
        (distinct entities, for a plan fitted with ``entity=``).
    fit_k : int
        The class size the tree was fitted at (:func:`fit_k`; in entities with ``entity=``).
    batch_rows : int or None
        The batch size the plan was fitted for.
    trim : int
        Fitted rows a value needs for a region to keep it (:func:`fit_trim`).
    lift_cost : float or None
        The cost the leaves were trimmed by (:func:`.tree.nominal_trim`;
        None: every leaf at ``trim``).
    n_fit : int
        Rows of the fitted table.
    options : dict
        The anonymization options (:data:`dmondrian.plans.sizing.PLAN_OPTIONS`).
    encodings : list of EncodedQI
        Every QI's fitted encoding, without keys.
    tree : PlanTree
        The cut tree and every node's fitted bounds.
    sensitive : SensitiveValues or None
        The sensitive column's fitted domain (l-diversity, t-closeness).
    overflow : FittedPlan or None
        The plan the rows held by no region below the root are released through (:meth:`refit`).
    """

    #: A class default: plans pickled before refit() existed have no overflow of their own.
    overflow = None

    def __init__(self, qis, k, fit_k_, batch_rows, n_fit, options, encodings, tree,
                 sensitive=None, constraints=(), trim=1, lift_cost=None):
        self.qis = list(qis)
        self.k = int(k)
        self.fit_k = int(fit_k_)
        self.batch_rows = batch_rows
        self.n_fit = int(n_fit)
        self.options = dict(options)
        self.encodings = list(encodings)
        self.tree = tree
        self.sensitive = sensitive
        self.constraints = list(constraints)
        self.trim = int(trim)
        self.lift_cost = None if lift_cost is None else float(lift_cost)
        self.kernel_kinds = np.asarray([qi.kernel_kind for qi in self.encodings], dtype=np.int64)

    @property
    def privacy(self):
        """The l/t constraints in kernel form, against the fitted distribution (None: k only)."""
        if self.sensitive is None:
            return None
        return kernel_privacy(self.constraints, np.zeros(1, dtype=np.int64), self.sensitive.n_codes,
                              self.sensitive.ordered, distribution=self.sensitive.distribution())

    @cached_property
    def lift_tables(self):
        """The compiled lift's arrays (:func:`.packed.lift_tables`), made once."""
        return lift_tables(self)

    @cached_property
    def node_labels(self) -> dict:
        """``{j: (labels, rank)}``: QI ``j``'s range label of every node, filled as
        :func:`.release.decide` needs them, from the plan's second batch on (None after the
        first; :func:`.release._fitted_labels`)."""
        return {}

    def __getstate__(self):
        # The lift's arrays and the labels are made again where the plan is used.
        return {k: v for k, v in self.__dict__.items()
                if k not in ("lift_tables", "depth", "node_labels")}

    @cached_property
    def depth(self) -> np.ndarray:
        """Every node's depth, computed once."""
        return node_depths(self.tree.parent)

    @property
    def n_leaves(self) -> int:
        return int(self.tree.is_leaf.sum())

    def __repr__(self) -> str:
        return (f"FittedPlan(qis={self.qis!r}, k={self.k}, fit_k={self.fit_k}, "
                f"leaves={self.n_leaves}, n_fit={self.n_fit})")

    # -- releasing ----------------------------------------------------------------------
    def _check_table(self, df) -> None:
        missing = [q for q in self.qis if q not in df.columns]
        for role in ("sensitive", "entity"):
            name = self.options.get(role)
            if name is not None and name not in df.columns:
                missing.append(name)
        if missing:
            from ..errors import MissingColumnError

            raise MissingColumnError(missing[0], f"column {missing[0]!r} of the plan is not a "
                                                 "column of the table")

    def transform(self, df, *, noise=None, random_state=None, max_contributions=1,
                  max_classes=1, short_labels="fitted"):
        """Release a table through the plan.

        With a plan fitted with ``entity=``, every published class holds at least ``k`` distinct
        entities of the table (a region short of them is published at the nearest ancestor whose
        group, the union of the people it holds and those its short children hand up, has them), l
        and t count distinct (entity, value) pairs, the entity column is dropped, and noise is
        bounded per entity as in :func:`dmondrian.anonymize`.

        Parameters
        ----------
        df : pandas.DataFrame or dask.dataframe.DataFrame
            A table with the plan's QI columns (and sensitive and entity columns).
        noise, random_state : optional
            As in :func:`dmondrian.anonymize`, per release.
        max_contributions, max_classes : int, default 1
            With ``entity=`` and ``noise``, as in :func:`dmondrian.anonymize`.
        short_labels : {"fitted", "rows"} or float, default "fitted"
            How a class published at an inner node (a region short of k that day, and the rows their
            leaf did not hold) is labelled: its node's fitted label, the same every day, or the
            bounds and values of its own rows, as :func:`dmondrian.anonymize` labels a class
            (narrower, and they change with the day, so fewer rows share a class with another day's;
            nominal sets and ranges only: a hierarchy QI keeps its node's label). A number ``g`` in
            [0, 1] labels by its own rows only a class whose own labels save more than ``g`` of NCP
            a row (averaged over the QIs, against the node's fitted label): the classes far wider
            than their rows, where a stable label costs most. Leaves always publish their fitted
            labels. In memory only.

        Returns
        -------
        DataFrame
            The table with its QI columns generalized, as :func:`dmondrian.anonymize` returns it; a
            lazy dask DataFrame for a dask input (:func:`dmondrian.plans.dask.transform_dask`).

        Raises
        ------
        InfeasibleError
            When the table as a whole cannot be one class (fewer than k rows).
        IdentifyingColumnError
            When a column released as is singles out rows and the plan's ``identifiers`` and
            ``allow_unique`` name it not (:mod:`dmondrian.release.identifiers`).

        Warns
        -----
        dmondrian.errors.IdentifyingColumnWarning
            Without ``entity``, for a column that looks like a person key, as
            :func:`dmondrian.anonymize` warns (:mod:`dmondrian.release.person_keys`).
        """
        from ..kinds.base import is_dask

        gain = _short_gain(short_labels)
        if self.overflow is not None and not is_dask(df):
            return transform_overflow(self, df, noise=noise, random_state=random_state,
                                      max_contributions=max_contributions,
                                      max_classes=max_classes, short_labels=short_labels)
        if is_dask(df):
            from .dask import transform_dask

            if short_labels != "fitted":
                raise ParameterError("short_labels", "labels from a class's own rows are made in "
                                                     "memory: release a pandas DataFrame")
            if noise:
                raise ParameterError("noise", "noise through a plan is drawn in memory: "
                                              "release a pandas DataFrame")
            return transform_dask(self, df)
        if not isinstance(df, pd.DataFrame):
            raise ParameterError("df", f"a plan releases a pandas or dask DataFrame, got "
                                       f"{type(df).__name__}")
        self._check_table(df)
        refuse_empty(len(df))
        identifiers = [c for c in self.options["identifiers"] or [] if c in df.columns]
        if identifiers:
            df = df.drop(columns=identifiers)
        opts = self._release_options(df, noise, max_contributions, max_classes)
        entity = None
        if opts.entity is not None:
            # Refuses missing values and a table of fewer than k people up front.
            entity = encode_entities(df[opts.entity], opts.k, opts.entity)
        # The guards of anonymize, the same decision: identifying columns, person keys.
        found, keys = release_guard(df, released_as_is(df.columns, opts), self.qis,
                                    opts.allow_unique, person_keys=opts.entity is None)
        refuse_identifying(found)
        warn_person_keys(keys)
        placed = self.place(df)
        release = decide(self, summarize_batch(self, placed, self.sensitive_codes(df),
                                               self.entity_values(df)),
                         None if gain is None else
                         lambda class_of_node, nodes: own_bounds(self, df, placed.node,
                                                                 class_of_node, nodes, gain))
        if entity is not None:
            df = df.drop(columns=[opts.entity])
        out = publish_rows(df, release, placed.node, self.options["class_column"])
        if opts.noise:
            class_of_row = release.class_of_node[placed.node]
            noisy = noisy_columns(df, class_of_row, len(release.nodes), opts.noise, random_state,
                                  entity_codes=None if entity is None else entity.codes,
                                  max_contributions=opts.max_contributions,
                                  max_classes=opts.max_classes)
            for column, values in noisy.items():
                out[column] = pd.Series(values, index=out.index, copy=False)
        return out

    def refit(self, df: pd.DataFrame) -> FittedPlan:
        """A copy of the plan that also releases well the rows it holds nowhere.

        A table that drifts brings rows no fitted region holds (a category the fit never saw, or
        a combination of values no fitted region spans); they land at the root, and are published
        there, with the whole fitted domain as label. The copy sends the rows of ``df`` that land
        at the root to a plan of their own, fitted on them with the plan's options (``batch_rows``
        their number), or refits the overflow it has the same way; every region of this plan, and
        every label it publishes, stays. :meth:`transform` then releases the rows landing at the
        root through the overflow (every class holding at least ``k`` of them), and the others
        through this plan, as before; with fewer than ``k`` of either, the whole table through
        this plan. Refit on each batch as it comes, then release it, to follow a table's drift.

        Parameters
        ----------
        df : pandas.DataFrame
            A batch with the plan's QI columns.

        Returns
        -------
        FittedPlan
            This plan when fewer than ``2 * k`` rows land at its root, else a copy.

        Raises
        ------
        ParameterError
            For a plan with l, t or ``entity=``: the overflow counts rows only.

        Notes
        -----
        A plan with an overflow releases pandas DataFrames only (a dask one is refused);
        :func:`dmondrian.plans.save_plan` writes the overflow into the plan's file.

        Examples
        --------
        >>> import pandas as pd
        >>> df = pd.DataFrame({"age": [20, 21, 22, 23, 60, 61, 62, 63],
        ...                    "job": ["a", "a", "a", "a", "b", "b", "b", "b"]})
        >>> plan = fit_plan(df, ["age", "job"], k=2)
        >>> new = pd.DataFrame({"age": [*range(30, 36), *range(50, 56)], "job": ["c"] * 12})
        >>> plan.transform(new)["age"].unique().tolist()
        ['[20, 63]']
        >>> plan.refit(new).transform(new)["age"].unique().tolist()
        ['[30, 35]', '[36, 55]']
        """
        return refit_overflow(self, df, fit_plan)

    def transform_to_parquet(self, ddf, path, *, client=None, progress=None, write_options=None,
                             storage_options=None, random_state=None, manifest=False) -> int:
        """Release a dask DataFrame through the plan and write it as a Parquet dataset.

        The files ``transform(ddf).to_parquet(path)`` writes (one a partition, each file's rows
        shuffled, labels as dictionaries), on one cluster; the columns released as is are checked in
        the tasks that write, so the counting pass reads only the QIs (and the sensitive and entity
        columns). See :func:`dmondrian.plans.dask.transform_to_parquet`.

        Parameters
        ----------
        ddf, path, client, progress, write_options, storage_options, random_state, manifest
            As :func:`dmondrian.plans.dask.transform_to_parquet` takes them: a dask DataFrame with
            the plan's QI columns, the dataset folder (any fsspec URL), the cluster, the progress
            bars, the writer's options, the seed of each file's row order and whether to publish
            ``path.manifest.json`` with the files (default False).

        Returns
        -------
        int
            The rows written.

        Raises
        ------
        InfeasibleError
            When the table as a whole cannot be one class (fewer than k rows).
        IdentifyingColumnError
            When a column released as is singles out rows; the files written
            are removed first (and the folder, when this call made it).
        """
        from .dask import transform_to_parquet

        return transform_to_parquet(self, ddf, path, client=client, progress=progress,
                                    write_options=write_options, storage_options=storage_options,
                                    random_state=random_state, manifest=manifest)

    def _release_options(self, df, noise, max_contributions=1, max_classes=1):
        o = {name: self.options.get(name) for name in PLAN_OPTIONS if name != "identifiers"}
        opts = check_options(df.columns, self.qis, self.k, index_name=df.index.name, noise=noise,
                             max_contributions=max_contributions, max_classes=max_classes, **o)
        check_noise_dtypes(opts.noise, df.dtypes)
        return opts


def fit_plan(df: pd.DataFrame, quasi_identifiers, k: int, *, batch_rows: int | None = None,
             fit_k_: int | None = None, trim: int | None = None, trim_inner: bool = False,
             abut: bool | None = None, lift_cost: float | None = LIFT_COST,
             **options) -> FittedPlan:
    """Fit a Mondrian partition to ``df`` to release later tables through.

    Parameters
    ----------
    df : pandas.DataFrame or dask.dataframe.DataFrame
        The table to learn the partition from. A dask DataFrame is fitted on
        its cluster (:func:`dmondrian.plans.dask_fit.fit_plan_dask`: the Dask
        engine's top cuts, the local engine's leaves; strict mode only).
    quasi_identifiers, k
        As in :func:`dmondrian.anonymize`.
    batch_rows : int, optional
        Rows of the tables the plan will release: the tree is fitted at :func:`fit_k` so that their
        classes rarely fall short of k. Default: the fitted table's own classes (the release of
        ``df`` through the plan is then exactly ``dmondrian.anonymize(df, ...)``).
    fit_k_, trim : int, optional
        Override :func:`fit_k` and :func:`fit_trim` (for measuring them).
    trim_inner, abut : bool, optional
        For measuring the label rule: trim the inner nodes too (the rule before leaves alone were
        trimmed, :func:`.tree.build_tree`), and whether integer bounds stretch to their cuts
        (:func:`.tree.abut_cut_sides`; default: with ``batch_rows``).
    lift_cost : float or None, default :data:`.sizing.LIFT_COST`
        With a trim above 1 (``batch_rows``), each leaf's nominal, integer and ordinal QIs are
        trimmed at the threshold from 1 to ``2 * trim`` that costs least, a left-out fitted row
        costing ``lift_cost`` QI domains (:func:`.tree.nominal_trim`); None trims every leaf at
        ``trim`` (the rule before, for measuring).
    **options
        ``mode``, ``objective``, ``generalization``, ``max_depth``, ``hierarchies``, ``qi_kinds``,
        ``class_column``, ``l``, ``l_kind``, ``c``, ``t``, ``sensitive``, ``identifiers``,
        ``allow_unique``, ``entity`` as in :func:`dmondrian.anonymize`. ``suppression`` is refused:
        a plan publishes a short region at its ancestor instead. ``noise`` (and
        ``max_contributions``, ``max_classes``) is given per release (:meth:`FittedPlan.transform`).
        With ``entity``, the plan counts people: the tree is fitted to at least ``fit_k`` distinct
        entities per class (``batch_rows`` still counts a batch's rows; see :func:`fit_k`), and
        every batch's published classes hold at least ``k`` distinct entities, on either engine.

    Returns
    -------
    FittedPlan

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [23, 23, 24, 25, 50, 51, 52, 54],
    ...                    "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002]})
    >>> plan = fit_plan(df, ["age", "zip"], k=2)
    >>> new = pd.DataFrame({"age": [25, 24, 52, 99], "zip": [11002, 11001, 12001, 12002]})
    >>> plan.transform(new)["age"].tolist()
    ['[24, 25]', '[24, 25]', '[52, 99]', '[52, 99]']
    """
    from ..kinds.base import is_dask

    if is_dask(df):
        from .dask_fit import fit_plan_dask

        if fit_k_ is not None or trim is not None or trim_inner or abut is not None:
            raise ParameterError("fit_k_", "fit_k_, trim, trim_inner and abut are for "
                                           "measuring in memory")
        return FittedPlan(**fit_plan_dask(df, quasi_identifiers, k, batch_rows=batch_rows,
                                          lift_cost=lift_cost, **options))
    if not isinstance(df, pd.DataFrame):
        raise ParameterError("df", f"fit_plan expects a pandas or dask DataFrame, got "
                                   f"{type(df).__name__}")
    options = plan_fit_options(options)
    opts = check_options(df.columns, quasi_identifiers, k, index_name=df.index.name, **options)
    refuse_empty(len(df), "fit")
    if batch_rows is not None and (not isinstance(batch_rows, (int, np.integer)) or batch_rows < 1):
        raise ParameterError("batch_rows", f"batch_rows must be a positive integer, got "
                                           f"{batch_rows!r}")
    table = df.drop(columns=opts.identifiers) if opts.identifiers else df
    entity = None if opts.entity is None else encode_entities(table[opts.entity], opts.k,
                                                              opts.entity)
    k_fit = (fit_k(opts.k, len(table), batch_rows, None if entity is None
                   else entity.n_entities) if fit_k_ is None else max(opts.k, fit_k_))
    trim = fit_trim(len(table), batch_rows) if trim is None else trim
    constraints = [KAnonymity(k_fit) if isinstance(c, KAnonymity) else c for c in opts.constraints]
    for cst in constraints:
        cst.check_table(len(table))
    sens = None
    if opts.sensitive is not None:
        codes, sens = encode_sensitive(table[opts.sensitive])
        if entity is not None:
            # l and t over people: the plan's t compares with the fitted pairs' shares.
            sens = replace(sens, counts=pair_counts(entity.codes, codes, sens.n_codes)
                           .astype(sens.counts.dtype))
        for cst in constraints:
            cst.check_distribution(sens.counts)
        privacy = kernel_privacy(constraints, codes, sens.n_codes, sens.ordered,
                                 distribution=sens.distribution(), entity=entity)
    else:
        privacy = kernel_privacy(constraints, entity=entity)
    encoded = encode_table(table, opts.qis, opts.hierarchies, opts.qi_kinds)
    warn_unique_text_qis(encoded, len(table))
    rules = kernel_rules(encoded, mode=opts.mode, objective=opts.objective,
                         max_depth=opts.max_depth, privacy=privacy)
    part = partition(encoded, rules)
    tree = build_tree(part.stats, part.sorted_keys, part.class_of_row, rules.kinds, rules.cards,
                      rules.relaxed, trim, trim_inner=trim_inner,
                      lift_cost=lift_cost if trim > 1 else None)
    if batch_rows is not None if abut is None else abut:
        abut_cut_sides(tree, encoded)
    kept = {name: options.get(name) for name in PLAN_OPTIONS}
    kept.update(mode=opts.mode, objective=opts.objective, generalization=opts.generalization,
                max_depth=None if opts.max_depth < 0 else opts.max_depth, sensitive=opts.sensitive,
                identifiers=list(opts.identifiers), allow_unique=list(opts.allow_unique),
                class_column=opts.class_column, l_kind=options.get("l_kind") or "distinct",
                entity=opts.entity)
    encodings = [replace(qi, keys=np.zeros(0, dtype=np.int64)) for qi in encoded]
    return FittedPlan(opts.qis, opts.k, k_fit, batch_rows, len(table), kept, encodings, tree,
                      sens, [c for c in opts.constraints if not isinstance(c, KAnonymity)],
                      trim, lift_cost if trim > 1 else None)


@dataclass
class OwnBounds:
    """Labels of some classes from a batch's own rows (:func:`own_bounds`).

    Attributes
    ----------
    classes : int64 array
        The classes labelled so, ascending.
    lo, hi, missing : arrays (classes, QIs)
        Their rows' smallest and largest present key and whether one is missing, as
        :class:`.tree.PlanTree` holds a node's (only the QIs published as ranges are read).
    codes : dict of int to (int64 array, int64 array)
        Per nominal QI, the (class, code) pairs their rows hold, values the fit
        never saw left out (the root names those).
    """

    classes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    missing: np.ndarray
    codes: dict


def _short_gain(short_labels) -> float | None:
    """:meth:`FittedPlan.transform`'s ``short_labels`` as the least gain (None: fitted)."""
    if isinstance(short_labels, str) and short_labels in SHORT_LABELS:
        return None if short_labels == "fitted" else -1.0
    if (isinstance(short_labels, (int, float, np.integer, np.floating))
            and not isinstance(short_labels, bool) and 0 <= short_labels <= 1):
        return float(short_labels)
    raise ParameterError("short_labels", f"short_labels must be one of {SHORT_LABELS} or a "
                                         f"number in [0, 1], got {short_labels!r}")


def own_bounds(plan, df, node, class_of_node, nodes, gain: float = -1.0) -> OwnBounds:
    """The bounds and codes of the rows of every class published above a leaf.

    ``node`` is where each row of ``df`` landed; ``class_of_node`` and ``nodes``
    the batch's classes (:func:`.release.decide`). Only those classes' rows are
    encoded again. With ``gain`` at 0 or more, only the classes whose own labels
    save more than ``gain`` of NCP a row (:func:`_saving`) are returned.
    """
    inner = ~plan.tree.is_leaf[nodes]
    classes = np.flatnonzero(inner)
    cls = class_of_node[node]
    rows = np.flatnonzero(inner[cls])
    d = len(plan.encodings)
    placed = place_batch(plan, df.iloc[rows], full=range(d))
    at = np.searchsorted(classes, cls[rows])
    c = len(classes)
    lo = np.full((c, d), MISSING_KEY, dtype=np.int64)
    hi = np.full((c, d), np.iinfo(np.int64).min, dtype=np.int64)
    missing = np.zeros((c, d), dtype=bool)
    codes = {}
    for j in range(d):
        keys = placed.full[j]
        seen = np.ones(len(rows), dtype=bool)
        if j in placed.outside.unseen:  # their values go to the root's label as is
            seen[placed.rows[placed.outside.unseen[j]]] = False
        if plan.kernel_kinds[j] == KIND_NOMINAL:
            pairs = np.unique(at[seen] * plan.encodings[j].card + keys[seen])
            codes[j] = (classes[pairs // plan.encodings[j].card], pairs % plan.encodings[j].card)
            continue
        present = seen & (keys != MISSING_KEY)
        np.minimum.at(lo[:, j], at[present], keys[present])
        np.maximum.at(hi[:, j], at[present], keys[present])
        missing[at[seen & (keys == MISSING_KEY)], j] = True
    own = OwnBounds(classes, lo, hi, missing, codes)
    if gain < 0:
        return own
    keep = _saving(plan, nodes[classes], own) > gain
    kept = {j: (c[np.isin(c, classes[keep])], v[np.isin(c, classes[keep])])
            for j, (c, v) in codes.items()}
    return OwnBounds(classes[keep], lo[keep], hi[keep], missing[keep], kept)


def _saving(plan, nodes, own: OwnBounds) -> np.ndarray:
    """NCP a row that each class's own labels save on its nodes' fitted labels,
    averaged over the QIs (ranges over the fitted root's span, sets as
    (codes - 1) / (card - 1); hierarchy QIs count 0)."""
    tree = plan.tree
    d = len(plan.encodings)
    saving = np.zeros(len(nodes))
    for j, qi in enumerate(plan.encodings):
        if plan.kernel_kinds[j] == KIND_NOMINAL:
            packed, card = tree.codes[j]
            fitted = np.bincount(packed // card, minlength=tree.n_nodes)[nodes]
            held = np.bincount(np.searchsorted(own.classes, own.codes[j][0]), minlength=len(nodes))
            saving += (np.maximum(fitted - 1, 0) - np.maximum(held - 1, 0)) / max(card - 1, 1)
        elif qi.spec.label_shape == "range":
            saving += (_widths(plan, j, tree.lo[nodes, j], tree.hi[nodes, j])
                       - _widths(plan, j, own.lo[:, j], own.hi[:, j]))
    return saving / d


def _widths(plan, j, lo, hi) -> np.ndarray:
    """Ranges of QI ``j``'s keys over the fitted root's span (0 where none is present)."""
    def value(keys):
        keys = np.asarray(keys)
        return (decode_float_keys(keys) if plan.kernel_kinds[j] == KIND_FLOAT
                else keys).astype(np.float64)

    root_lo, root_hi = plan.tree.lo[0, j], plan.tree.hi[0, j]
    w = np.zeros(len(lo))
    ok = lo != MISSING_KEY
    if root_lo == MISSING_KEY or not ok.any():
        return w
    span = value([root_hi])[0] - value([root_lo])[0]
    if span > 0:
        w[ok] = np.clip((value(hi[ok]) - value(lo[ok])) / span, 0, 1)
    return w
