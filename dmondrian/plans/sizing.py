"""How coarse a plan is fitted for a batch size, which options it keeps, and its overflow.

:func:`fit_k` and :func:`fit_trim` turn ``batch_rows`` into the fitted class size and the trim of
every region's values; :mod:`.fitted` and :mod:`.dask_fit` both fit by them. :func:`refit_overflow`
gives the rows a plan holds nowhere (a table that drifts) a plan of their own, and
:func:`transform_overflow` releases a table through both.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from ..errors import InfeasibleError, ParameterError
from ..options import PLAN_KEEPS as PLAN_OPTIONS

__all__ = ["LIFT_COST", "PLAN_OPTIONS", "fit_k", "fit_trim", "refit_overflow", "transform_overflow"]

#: What a plan fitted with ``batch_rows`` counts a left-out fitted row as when it
#: trims a leaf (:func:`dmondrian.plans.tree.nominal_trim`): the loss of one
#: batch row lifted to an ancestor, in whole QI domains (a row's NCP summed over
#: the QIs). Chosen on Adult as the least loss at the same share of stable
#: classes among the costs tried (benchmarks/README.md, "Fitted plans").
LIFT_COST = 1.5


def fit_k(k: int, n_fit: int, batch_rows: int | None, n_entities: int | None = None) -> int:
    """The class size a plan is fitted at so a batch of ``batch_rows`` keeps its classes.

    A fitted class of ``c`` rows expects ``c * batch_rows / n_fit`` rows of a batch drawn like the
    fitted table; the fit asks for ``k + 2 * sqrt(k)`` expected rows (two standard deviations of a
    Poisson count above k), so that a class rarely falls short of k in one batch and not the next
    (never more than ``n_fit``). Fewer classes fall short with a wider margin, but every class is
    larger: the margin buys shared classes with information loss (benchmarks/README.md, "Fitted
    plans"). Without ``batch_rows`` the plan is fitted at ``k``: the fitted table's own classes.

    With ``entity=`` (``n_entities`` the fitted table's distinct entities) the result counts
    *entities*: a region of ``c`` fitted people is fitted to expect ``k + 2 * sqrt(k)`` distinct
    people of a batch, by the same formula with ``f = batch_rows / n_fit``. A batch that is one of
    ``1 / f`` slices of the fitted rows (a day of a month, say) holds, on average over the slices,
    at least ``c * f`` of the region's people, since every person has rows in at least one slice; so
    the rule is on the safe side, and coarser than needed when people have rows in many batches.
    Never more than ``n_entities``.

    Examples
    --------
    >>> fit_k(10, 30_000, None), fit_k(10, 30_000, 7_500), fit_k(10, 30_000, 60_000)
    (10, 66, 10)
    >>> fit_k(10, 30_000, 7_500, n_entities=3_000), fit_k(10, 30_000, 30, n_entities=3_000)
    (66, 3000)
    """
    if batch_rows is None:
        return k
    # Never above the fitted table itself: a plan is at worst its root.
    cap = n_fit if n_entities is None else n_entities
    return max(k, min(cap, math.ceil((k + 2 * math.sqrt(k)) * n_fit / batch_rows)))


def fit_trim(n_fit: int, batch_rows: int | None) -> int:
    """How many fitted rows must hold a value for a leaf's region to keep it in its label.

    A value ``c`` of the fitted rows of a leaf is expected ``c * batch_rows / n_fit`` times in a
    batch; below once (``c < n_fit / batch_rows``) the leaf leaves it out, and a batch's rare row
    holding it is published at the nearest ancestor that holds it (inner nodes keep every fitted
    value, :func:`dmondrian.plans.tree.build_tree`). Labels then describe the values a batch's rows
    actually take, not the fitted table's outliers. Without ``batch_rows``, 1: every fitted value.

    Examples
    --------
    >>> fit_trim(30_000, None), fit_trim(30_000, 7_500), fit_trim(30_000, 60_000)
    (1, 4, 1)
    """
    if batch_rows is None:
        return 1
    return max(1, round(n_fit / batch_rows))


def _held_nowhere(plan, df) -> np.ndarray:
    """Whether each row of ``df`` lands at the plan's root: no region below it holds the row's
    values (a category the fit never saw, or a combination no fitted region spans)."""
    plan._check_table(df)
    return plan.place(df).node == 0


def _alone(plan):
    """``plan`` without its overflow (the compiled lift's tables shared)."""
    out = copy.copy(plan)
    out.overflow = None
    return out


def refit_overflow(plan, df, fit_plan):
    """A copy of ``plan`` whose rows held nowhere go to a plan of their own (its overflow).

    See :meth:`dmondrian.plans.FittedPlan.refit`. The rows of ``df`` that land at the plan's root
    are the overflow's batch: with at least ``2 * k`` of them, a plan without an overflow gets one
    fitted on them by ``fit_plan`` (:func:`dmondrian.plans.fit_plan`, given by the caller: it
    imports this module), with the plan's options and ``batch_rows`` their number, and a plan
    with one has it refitted the same way, in turn (the overflow's own regions, and their labels,
    stay). Every region of ``plan`` itself stays as it was.
    """
    if plan.sensitive is not None or plan.options.get("entity") is not None:
        raise ParameterError("df", "a plan with l, t or entity= cannot be refitted: refit() "
                                   "counts rows only")
    rows = df[_held_nowhere(plan, df)].reset_index(drop=True)
    if len(rows) < 2 * plan.k:
        return plan
    out = copy.copy(plan)
    if plan.overflow is None:
        options = {name: value for name, value in plan.options.items() if value is not None}
        out.overflow = fit_plan(rows, plan.qis, plan.k, batch_rows=len(rows), **options)
    else:
        out.overflow = refit_overflow(plan.overflow, rows, fit_plan)
    return out


def transform_overflow(plan, df, **release) -> pd.DataFrame:
    """Release ``df`` through ``plan`` and its overflow (:meth:`~dmondrian.plans.FittedPlan.refit`).

    The rows that land at the plan's root are released through the overflow, the others through
    the plan alone, each part by :meth:`~dmondrian.plans.FittedPlan.transform` with ``release``'s
    options; every class of each holds at least k rows, and ``class_column``'s ids of the
    overflow's classes follow the plan's. When either part cannot be released (fewer than k rows),
    the whole table is released through the plan alone, as without an overflow.
    """
    main = _alone(plan)
    over = _held_nowhere(plan, df)
    try:
        if over.all():
            return plan.overflow.transform(df, **release)
        if not over.any():
            return main.transform(df, **release)
        held = main.transform(df[~over], **release)
        rest = plan.overflow.transform(df[over], **release)
    except InfeasibleError:
        return main.transform(df, **release)
    name = plan.options["class_column"]
    if name is not None:
        rest[name] += int(held[name].max()) + 1
    out = pd.concat([held, rest])
    for name in plan.qis:  # published labels stay Categoricals, as one release has them
        if all(isinstance(part[name].dtype, pd.CategoricalDtype) for part in (held, rest)):
            out[name] = union_categoricals([held[name], rest[name]])
    return out.iloc[np.argsort(np.concatenate([np.flatnonzero(~over), np.flatnonzero(over)]))]
