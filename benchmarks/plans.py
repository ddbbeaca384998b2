"""Fitted plans: class stability across batches, information loss, and speed.

Run: python benchmarks/plans.py [--quick] [--steps S,...] [--local-rows N] [--dask-rows N]
     [--dask-wide-columns N] [--rounds N] [--drift-rows N] [--drift-k K]
     [--adult-seeds S ...] [--out PATH]

Tables (figures in benchmarks/README.md, "Fitted plans"):

1. Adult (``$DMONDRIAN_ADULT_DIR`` or the user cache, never downloaded; the
   8 literature QIs, k=10): a plan fitted on ``adult.data`` releases
   ``adult.test``: smallest class by a group-by of the published QIs and by
   :func:`dmondrian.verify`, and whether every label contains its row's
   value. Then the test file's two random halves (seed 0), each released
   through the plan (fitted for the whole file's rows, and for a half's
   with ``batch_rows``, by today's label rule and the rule before it) and
   each anonymized on its own; ``adult-labels``: the label rules side by side
   on the same tree (fitted bounds trimmed everywhere, untrimmed, the cuts'
   domain for integers and/or nominal QIs, inner nodes untrimmed, integer
   bounds meeting at cuts), each with the share of rows lifted and their
   share of the loss (``--sweep``: also
   plans at fit_k 40-79 x fixed trim 1-8, and the halves on their own at k=15,
   20, 30): ``shared`` is the
   share of the second half's rows whose published QI combination appears
   in the first half's release; ``gcp_ratio`` the NCP (GCP) of the plan's
   release over the independent one's, averaged over the halves.
1b. ``adult-frontier``: the same halves (split by each of ``--adult-seeds``)
   through a plan fitted with ``batch_rows`` a half by each rule of
   :data:`RULES` (fit options, ``short_labels``: how a class published
   above a leaf is labelled, and whether the plan is refitted on each half
   before releasing it, :meth:`FittedPlan.refit`): shared, GCP ratio,
   smallest class, labels containing values.
2. A dated table: the census generator (``dmondrian.synthetic``, QIs age,
   zip, sex, education) with an event date per row, uniform over 2025 (a
   generated, stationary table: no real dated table is on this machine),
   k=100. A plan fitted on January-June (``batch_rows`` = a month's rows)
   releases each of July-December (by today's label rule and the one before
   it): smallest class, share of a month's rows
   whose class also appears in the previous month's release, GCP over
   anonymizing the month on its own.
   ``fnlwgt`` is dropped (``identifiers``) from every release: it singles
   out the halves' rows, which dmondrian refuses to release as is.
3. Speed, local engine: census rows (QIs age, zip, birth_date, sex,
   education, k=10), a plan fitted on the first million rows, then the
   whole table released through it against ``dmondrian.anonymize`` of it,
   side by side in one run (``--rounds``: that many times, alternately, each
   round a row with the load average), in wall and in CPU seconds of the
   process (the first round includes what the plan makes once).
4. Speed, Dask: the census table as Parquet (1M-row partitions), 2 worker
   processes x 1 thread: the plan's release written to Parquet against a
   plain ``read_parquet -> to_parquet`` copy (``--rounds`` as above), in wall
   seconds and in CPU seconds of the workers and the client (the scheduler
   runs in its process): the machine is shared, and CPU time varies less.
   ``plan_written``: :func:`dmondrian.plans.dask.transform_to_parquet`, the
   command line's writer, whose counting pass reads only the QIs (its write
   tasks check the columns released as is; ``plan_written_inorder`` the same
   keeping the input's row order); ``plan``: the lazy release's own
   ``to_parquet`` as it writes by default (each file's rows shuffled, no
   statistics for the labels); ``plan_inorder``: the
   same keeping the input's row order (``shuffle_rows=False``);
   ``plan_daskwriter``: dask's writer with pyarrow's defaults, as a plain
   ``to_parquet`` wrote the release before it had its own. Since a plan's
   transform refuses a column singling out rows, the lazy release's counting
   pass also reads and sketches the census columns released as is of an
   identifier's kind (figures measured before that change did not). Each round measures the
   census table (``input`` census, 9 columns, 5 QIs: the counting pass reads
   almost all of it) and, unless ``--dask-wide-columns 0``, a wide one
   (``input`` wide): the same rows and files with ``--dask-wide-columns``
   (default 40) payload columns of :mod:`wide_table` (continuous floats,
   int64 counts, low- and high-cardinality text with a long tail, some
   missing values), as a warehouse table has tens to hundreds of columns and
   a few QIs; its ints and text are released as is, so the identifying check
   reads and sketches them (in the counting pass, or in ``plan_written``'s
   write tasks). ``plan_daskwriter`` is measured on the census
   table only.
5. Fitting on Dask (``dask-fit``): census rows as Parquet, a plan fitted on
   2 worker processes (the Dask engine's leaves an eighth of the table) against
   one fitted in memory on the same rows (at k, and with ``batch_rows``):
   seconds, and whether the trees and a new table's releases are the same.
6. Fitting on Dask with ``entity=`` (``dask-fit-events``): synthetic events
   (``dmondrian.synthetic_events``, about 6.6 rows a person, ``--fit-rows``
   of them) as Parquet, fitted with ``entity="user_id"`` at k=10 on 2 worker
   processes (leaves an eighth of the table) against in memory: at k, with
   ``batch_rows`` a thirtieth of the table (a day of a month), and with
   entropy l=2 too; seconds, the same tree or not, and a new day's fewest
   people per class.

7. A drifting dated table (``drift``, :func:`make_drifting`): month sizes
   +-30 %, ages and a zip hotspot shifting with the season, occupations
   gaining and losing categories; QIs age, zip, sex, education, occupation,
   ``--drift-k`` (20). A plan fitted on January-June by each rule of
   :data:`RULES` (``batch_rows`` a month's rows; the refitting rules refit
   on each month, then release it) releases July-December:
   smallest class, share of a month's rows whose class appears in the
   previous month's release, GCP over anonymizing the month on its own.

The JSON (``--out``) holds every row of every table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import dmondrian as dm
from dmondrian.datasets import (
    ADULT_COLUMNS,
    ADULT_NUMERIC,
    ADULT_QUASI_IDENTIFIERS,
    adult_dir,
    load_adult,
)
from dmondrian.kinds.labels import parse_range, parse_set
from dmondrian.metrics import ncp
from dmondrian.plans import fit_plan
from dmondrian.synthetic import make_census


def _load_adult_test(folder) -> pd.DataFrame:
    """``adult.test`` as :func:`load_adult` reads ``adult.data`` (rows with ``?`` dropped)."""
    dtypes = {c: ("int64" if c in ADULT_NUMERIC else str) for c in ADULT_COLUMNS}
    df = pd.read_csv(Path(folder) / "adult.test", header=None, names=ADULT_COLUMNS,
                     dtype=dtypes, skiprows=1, skipinitialspace=True, na_values=["?"],
                     keep_default_na=False)
    for c in ADULT_COLUMNS:
        if c not in ADULT_NUMERIC:
            df[c] = df[c].str.strip().str.rstrip(".")
    return df.dropna().reset_index(drop=True)


def _tuples(released, qis) -> pd.Series:
    """Every row's published QI combination, as one string."""
    return released[qis].astype(str).agg("\x1f".join, axis=1)


def _shared(a, b, qis) -> float:
    """Share of ``b``'s rows whose published combination appears in ``a``."""
    return float(_tuples(b, qis).isin(set(_tuples(a, qis))).mean())


def _min_class(released, qis) -> int:
    return int(released.groupby([released[q].astype(str) for q in qis]).size().min())


def _labels_contain(released, original, qis) -> bool:
    """Whether every published label contains its row's original value."""
    for q in qis:
        pairs = pd.DataFrame({"l": released[q].astype(str).to_numpy(),
                              "v": original[q].astype(object).to_numpy()}).drop_duplicates()
        dtype = original[q].dtype
        rank = ({c: i for i, c in enumerate(dtype.categories)}
                if isinstance(dtype, pd.CategoricalDtype) and dtype.ordered else None)
        for label, value in pairs.itertuples(index=False):
            if rank is not None:  # an ordinal QI: a category, or [first, last] of them
                ends = label[1:-1].split(", ") if label.startswith("[") else [label, label]
                ok = len(ends) == 2 and all(e in rank for e in ends) and (
                    rank[ends[0]] <= rank[value] <= rank[ends[1]])
            elif isinstance(value, (int, float, np.integer, np.floating)):
                ok = parse_range(label).contains(value)
            else:
                ok = str(value) in parse_set(label)
            if not ok:
                return False
    return True


def _gcp(released, original, qis) -> float:
    return float(ncp(released, qis, original).overall)


def _batch_bound_labels(released, original, qis, class_column) -> pd.DataFrame:
    """A diagnostic only, never a release: each class labelled by its own rows' bounds
    (sets), as an independent run labels its classes."""
    cls = released[class_column].to_numpy()
    out = released.copy()
    for q in qis:
        groups = original[q].groupby(cls)
        if pd.api.types.is_numeric_dtype(original[q]):
            lo, hi = groups.min(), groups.max()
            label = {c: str(lo[c]) if lo[c] == hi[c] else f"[{lo[c]}, {hi[c]}]"
                     for c in lo.index}
        else:
            sets = groups.agg(lambda x: sorted(set(x)))
            label = {c: v[0] if len(v) == 1 else "{" + ", ".join(v) + "}"
                     for c, v in sets.items()}
        out[q] = pd.Series(cls, index=released.index).map(label)
    return out


def _where_loss_goes(plan, halves, gcp_alone, qis) -> dict:
    """Where a plan's information loss comes from, over both halves: rows published
    at the region they route to, rows lifted because the region's fitted values do
    not hold theirs (``lifted_values``), rows lifted because their region fell short of
    k that day (``lifted_count``), each one's share of the loss; and the GCP ratio the
    same classes would have with labels fitted to each half's rows (a diagnostic:
    such labels are neither stable nor safe to publish, see docs/guide/plans.md)."""
    from dmondrian.metrics.certainty_penalty import compute_domains, label_costs
    from dmondrian.partition.routing import route
    from dmondrian.plans.batch import place_batch
    from dmondrian.plans.release import decide

    n = {"leaf": 0, "lifted_values": 0, "lifted_count": 0}
    loss = dict.fromkeys(n, 0.0)
    tight = []
    for h in halves:
        placed = place_batch(plan, h, full=range(len(plan.encodings)))
        leaf = route(np.stack([placed.full[j] for j in range(len(plan.encodings))]),
                     plan.tree.cuts, None)
        node = placed.node
        release = decide(plan, plan.summarize(h))
        published = release.nodes[release.class_of_node[node]]
        what = np.where(node != leaf, "lifted_values",
                        np.where(published != node, "lifted_count", "leaf"))
        out = plan.transform(h.assign(_class=0)).drop(columns="_class")
        domains = compute_domains(h, qis)
        cost = np.zeros(len(h))
        for q in qis:
            labels, inverse = np.unique(out[q].astype(str).to_numpy(), return_inverse=True)
            cost += label_costs(list(labels), domains[q], q)[inverse] / len(qis)
        for key in n:
            n[key] += int((what == key).sum())
            loss[key] += float(cost[what == key].sum())
        classes = pd.Series(release.class_of_node[node], index=h.index, name="_class")
        tight.append(_gcp(_batch_bound_labels(out.assign(_class=classes), h, qis, "_class"),
                          h, qis))
    rows, total = sum(n.values()), sum(loss.values())
    out = {f"rows_{key}": n[key] / rows for key in n}
    out.update({f"loss_{key}": loss[key] / total for key in n})
    out["gcp_ratio_batch_labels"] = float(np.mean(np.divide(tight, gcp_alone)))
    return out


#: The label rule before inner nodes were left untrimmed, integer bounds met at cuts
#: and leaves were trimmed by cost.
BEFORE = {"trim_inner": True, "abut": False, "lift_cost": None}
#: The rule before leaves were trimmed by cost (every leaf at the fixed trim).
FIXED_TRIM = {"lift_cost": None}


def _halves_through(plan, halves, qis, k, gcp_alone, gcp_same) -> dict:
    """Both halves released through a plan: shared, GCP ratios, checks, where loss goes."""
    rel = [plan.transform(h) for h in halves]
    gcp = [_gcp(r, h, qis) for r, h in zip(rel, halves, strict=True)]
    return {"shared": _shared(*rel, qis),
            "gcp_ratio": float(np.mean(np.divide(gcp, gcp_alone))),
            "gcp_ratio_same_objective": float(np.mean(np.divide(gcp, gcp_same))),
            "min_class_groupby": min(_min_class(r, qis) for r in rel),
            "verify_ok": all(dm.verify(r, qis, k=k).ok for r in rel),
            "labels_contain_values": all(_labels_contain(r, h, qis)
                                         for r, h in zip(rel, halves, strict=True)),
            **_where_loss_goes(plan, halves, gcp_alone, qis)}


def _with_domain(plan, numeric=False, nominal=False):
    """A copy of ``plan`` whose every node but the root is labelled by the part of the
    domain its cuts carve out: integer bounds between the enclosing cuts (the fitted
    range at the edges, which stay open), and/or the nominal codes the cuts send there
    (among the fitted table's). A measured variant, not a rule of the library."""
    import copy

    from dmondrian._kernel.constants import KIND_INT, KIND_NOMINAL

    p = copy.deepcopy(plan)
    p.__dict__.pop("lift_tables", None)
    tree, cuts = p.tree, p.tree.cuts
    m, d = tree.lo.shape
    lo = np.tile(tree.lo[0], (m, 1))
    hi = np.tile(tree.hi[0], (m, 1))
    allowed = {j: np.zeros((m, card), dtype=bool) for j, (_, card) in tree.codes.items()}
    for j, (packed, card) in tree.codes.items():
        allowed[j][0, packed[packed < card]] = True  # the fitted table's codes
    for node in np.flatnonzero(cuts.qi >= 0):  # depth-first: parents first
        a, b, j = cuts.left[node], cuts.right[node], cuts.qi[node]
        lo[[a, b]], hi[[a, b]] = lo[node], hi[node]
        for q in allowed:
            allowed[q][[a, b]] = allowed[q][node]
        if j in allowed:
            card = tree.codes[j][1]
            ranks = cuts.ranks[cuts.rank_off[node]:cuts.rank_off[node] + card]
            allowed[j][a] &= ranks <= 1
            allowed[j][b] &= ranks >= 1
        else:
            hi[a, j] = min(hi[a, j], cuts.t[node] if cuts.tie_before[node] == 0
                           else cuts.eq[node])
            lo[b, j] = max(lo[b, j], cuts.t[node] + 1)
    for j in range(d):
        if numeric and p.kernel_kinds[j] == KIND_INT and p.encodings[j].kind == "numeric":
            tree.lo[1:, j], tree.hi[1:, j] = lo[1:, j], hi[1:, j]
        if nominal and p.kernel_kinds[j] == KIND_NOMINAL:
            nodes, codes = np.nonzero(allowed[j])
            tree.codes[j] = (nodes.astype(np.int64) * tree.codes[j][1] + codes,
                             tree.codes[j][1])
    return p


#: Adult's fnlwgt (a census weight, nearly one per row on the test file's halves, and
#: public with the original rows): dropped, as dmondrian refuses to release it as is
#: (it only warned before; the figures are on the QIs, which this leaves unchanged).
ADULT = {"identifiers": ["fnlwgt"]}


def adult(rows: list, sweep: bool = False) -> None:
    qis, k = ADULT_QUASI_IDENTIFIERS, 10
    folder = adult_dir(download=False)
    train, test = load_adult(folder, download=False), _load_adult_test(folder)
    warnings.simplefilter("ignore", dm.errors.IdentifyingColumnWarning)  # person keys
    plan = fit_plan(train, qis, k, **ADULT)
    out = plan.transform(test)
    check = dm.verify(out, qis, k=k)
    rows.append({"table": "adult", "what": "fit adult.data, release adult.test",
                 "rows": len(test), "min_class_groupby": _min_class(out, qis),
                 "verify_ok": bool(check.ok), "verify_k": check.achieved["k"],
                 "labels_contain_values": _labels_contain(out, test, qis),
                 "classes": int(check.n_classes)})
    order = np.random.default_rng(0).permutation(len(test))
    half = len(test) // 2
    # Each half's own row numbers: the test file's index would single out its rows,
    # which a release refuses (dmondrian.release.identifiers).
    halves = [test.iloc[np.sort(part)].reset_index(drop=True)
              for part in (order[:half], order[half:])]
    alone = [dm.anonymize(h, qis, k, **ADULT) for h in halves]
    gcp_alone = [_gcp(r, h, qis) for r, h in zip(alone, halves, strict=True)]
    rows.append({"table": "adult", "what": "halves anonymized on their own",
                 "shared": _shared(*alone, qis), "gcp_ratio": 1.0,
                 "min_class_groupby": min(_min_class(r, qis) for r in alone)})
    alone_ncp = [dm.anonymize(h, qis, k, **ADULT, objective="ncp") for h in halves]
    gcp_alone_ncp = [_gcp(r, h, qis) for r, h in zip(alone_ncp, halves, strict=True)]
    rows.append({"table": "adult", "what": "halves on their own, objective=ncp",
                 "shared": _shared(*alone_ncp, qis),
                 "gcp_ratio": float(np.mean(np.divide(gcp_alone_ncp, gcp_alone))),
                 "min_class_groupby": min(_min_class(r, qis) for r in alone_ncp)})
    half_rows = len(halves[0])
    for label, batch_rows, objective, rule in (
            ("plan fitted at k", None, "balanced", {}),
            ("plan, batch_rows=half, before", half_rows, "balanced", BEFORE),
            ("plan, batch_rows=half, fixed trim", half_rows, "balanced", FIXED_TRIM),
            ("plan, batch_rows=half", half_rows, "balanced", {}),
            ("plan, batch_rows=half, objective=ncp, before", half_rows, "ncp", BEFORE),
            ("plan, batch_rows=half, objective=ncp, fixed trim", half_rows, "ncp", FIXED_TRIM),
            ("plan, batch_rows=half, objective=ncp", half_rows, "ncp", {})):
        p = fit_plan(train, qis, k, **ADULT, batch_rows=batch_rows, objective=objective, **rule)
        same = gcp_alone if objective == "balanced" else gcp_alone_ncp
        rows.append({"table": "adult", "what": label, "fit_k": p.fit_k, "trim": p.trim,
                     **_halves_through(p, halves, qis, k, gcp_alone, same)})
    # The label rules measured side by side (balanced objective, the same tree).
    base = fit_plan(train, qis, k, **ADULT, batch_rows=half_rows, **BEFORE)
    untrimmed = fit_plan(train, qis, k, **ADULT, batch_rows=half_rows, trim=1, abut=False)
    for label, p in (
            ("before: every node trimmed, fitted bounds", base),
            ("every value the fit saw (trim 1)", untrimmed),
            ("integers: the cuts' domain", _with_domain(base, numeric=True)),
            ("nominal: the codes the cuts route there", _with_domain(base, nominal=True)),
            ("both domains", _with_domain(base, numeric=True, nominal=True)),
            ("integers' domain, nominal untrimmed",
             _with_domain(fit_plan(train, qis, k, **ADULT, batch_rows=half_rows, trim=1,
                                   trim_inner=True, abut=False), numeric=True)),
            ("inner nodes untrimmed",
             fit_plan(train, qis, k, **ADULT, batch_rows=half_rows, abut=False, lift_cost=None)),
            ("integer bounds meet at cuts",
             fit_plan(train, qis, k, **ADULT, batch_rows=half_rows, trim_inner=True,
                      lift_cost=None)),
            ("both of the last two", fit_plan(train, qis, k, **ADULT, batch_rows=half_rows,
                                              lift_cost=None)),
            ("kept: both, leaves trimmed by cost", fit_plan(train, qis, k, **ADULT,
                                                            batch_rows=half_rows))):
        rows.append({"table": "adult-labels", "what": label,
                     **_halves_through(p, halves, qis, k, gcp_alone, gcp_alone)})
    if not sweep:
        return
    for k_alone in (15, 20, 30):
        g = [_gcp(dm.anonymize(h, qis, k_alone, **ADULT), h, qis) for h in halves]
        rows.append({"table": "adult-sweep", "what": f"halves on their own at k={k_alone}",
                     "gcp_ratio": float(np.mean(np.divide(g, gcp_alone)))})
    for fk in (40, 50, 60, 79):
        for trim in (1, 2, 4, 8):
            p = fit_plan(train, qis, k, **ADULT, fit_k_=fk, trim=trim, lift_cost=None)
            rel = [p.transform(h) for h in halves]
            gcp = [_gcp(r, h, qis) for r, h in zip(rel, halves, strict=True)]
            rows.append({"table": "adult-sweep", "what": "plan", "fit_k": fk, "trim": trim,
                         "shared": _shared(*rel, qis),
                         "gcp_ratio": float(np.mean(np.divide(gcp, gcp_alone))),
                         "min_class_groupby": min(_min_class(r, qis) for r in rel)})


def dated(rows: list, n_rows: int) -> None:
    qis, k = ["age", "zip", "sex", "education"], 100
    df = make_census(n_rows, seed=3, columns=["age", "zip", "sex", "education", "income"])
    rng = np.random.default_rng(3)
    df["day"] = pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, n_rows), "D")
    month = df["day"].dt.month
    first = df[month <= 6].reset_index(drop=True)
    per_month = int(round(len(first) / 6))
    plans = {rule: fit_plan(first.drop(columns="day"), qis, k, batch_rows=per_month,
                            allow_unique=["income"], **kw)
             for rule, kw in (("before", BEFORE), ("kept", {}))}
    previous, prev_alone = dict.fromkeys(plans), None
    for m in range(7, 13):
        batch = df[month == m].drop(columns="day").reset_index(drop=True)
        alone = dm.anonymize(batch, qis, k, allow_unique=["income"])
        gcp_alone = _gcp(alone, batch, qis)
        for rule, plan in plans.items():
            rel = plan.transform(batch)
            rows.append({"table": "dated", "month": m, "rule": rule, "rows": len(batch),
                         "fit_k": plan.fit_k, "min_class_groupby": _min_class(rel, qis),
                         "shared_with_previous": None if previous[rule] is None
                         else _shared(previous[rule], rel, qis),
                         "shared_independent": None if m == 7
                         else _shared(prev_alone, alone, qis),
                         "gcp_ratio": _gcp(rel, batch, qis) / gcp_alone})
            previous[rule] = rel
        prev_alone = alone


#: The rules of the frontier tables (``adult-frontier``, ``drift``): fit_plan's options,
#: transform's (``short_labels``: how a class above a leaf is labelled), and whether the plan
#: is refitted on each batch before releasing it (:meth:`FittedPlan.refit`: the rows it holds
#: nowhere get a plan of their own).
RULES = {"balanced (default)": ({}, {}, False), "ncp": ({"objective": "ncp"}, {}, False),
         "ncp, relaxed": ({"objective": "ncp", "mode": "relaxed"}, {}, False),
         "ncp, short labels from rows": ({"objective": "ncp"}, {"short_labels": "rows"}, False),
         "ncp, short labels gain 0.13": ({"objective": "ncp"}, {"short_labels": 0.13}, False),
         "ncp, short labels gain 0.2": ({"objective": "ncp"}, {"short_labels": 0.2}, False),
         "ncp, refit": ({"objective": "ncp"}, {}, True),
         "ncp, refit, short labels gain 0.13": ({"objective": "ncp"}, {"short_labels": 0.13},
                                                True)}


def _through(plan, batches, release: dict, refit: bool) -> list:
    """Each batch released through the plan in turn, refitted on it first with ``refit``."""
    out = []
    for batch in batches:
        if refit:
            plan = plan.refit(batch)
        out.append(plan.transform(batch, **release))
    return out


def _adult_halves(seed: int = 0):
    """Adult's training table, the test file's two halves (split by ``seed``), each
    half's GCP anonymized on its own (default options)."""
    folder = adult_dir(download=False)
    train, test = load_adult(folder, download=False), _load_adult_test(folder)
    order = np.random.default_rng(seed).permutation(len(test))
    half = len(test) // 2
    # Each half's own row numbers: the test file's index would single out its rows,
    # which a release refuses (dmondrian.release.identifiers).
    halves = [test.iloc[np.sort(part)].reset_index(drop=True)
              for part in (order[:half], order[half:])]
    qis = ADULT_QUASI_IDENTIFIERS
    alone = [_gcp(dm.anonymize(h, qis, 10, **ADULT), h, qis) for h in halves]
    return train, halves, alone


def adult_frontier(rows: list, seeds=(0,)) -> None:
    """Table 1b (``adult-frontier``): Adult's halves (split by each of ``seeds``) through
    a plan fitted by each rule of :data:`RULES` with ``batch_rows`` a half."""
    qis, k = ADULT_QUASI_IDENTIFIERS, 10
    warnings.simplefilter("ignore", dm.errors.IdentifyingColumnWarning)  # person keys
    for seed in seeds:
        train, halves, alone = _adult_halves(seed)
        for rule, (options, release, refit) in RULES.items():
            plan = fit_plan(train, qis, k, batch_rows=len(halves[0]), **ADULT, **options)
            rel = _through(plan, halves, release, refit)
            rows.append({"table": "adult-frontier", "seed": seed, "rule": rule,
                         **_frontier_row(plan, rel, halves, alone, qis)})


def _frontier_row(plan, rel, halves, alone, qis) -> dict:
    gcp = [_gcp(r, h, qis) for r, h in zip(rel, halves, strict=True)]
    return {"fit_k": plan.fit_k,
            "leaves": plan.n_leaves, "shared": _shared(*rel, qis),
            "gcp_ratio": float(np.mean(np.divide(gcp, alone))),
            "min_class_groupby": min(_min_class(r, qis) for r in rel),
            "labels_contain_values": all(_labels_contain(r, h, qis)
                                         for r, h in zip(rel, halves, strict=True))}


#: The drifting table's seasonal categories of ``occupation``: (name, first month, last
#: month, share of that month's rows). One vanishes within the fitted half-year, one
#: spans the boundary, one appears only after it; and two of the census's own
#: categories vanish for a season.
DRIFT_SEASONAL = (("Ski instructor", 1, 3, 0.04), ("Harvest", 5, 9, 0.05),
                  ("Holiday retail", 10, 12, 0.06))
DRIFT_VANISH = {"Student": (7, 8), "Farming": (11, 12)}


def make_drifting(n_rows: int, seed: int = 11) -> pd.DataFrame:
    """A dated census table whose months drift: a ``month`` column (1-12) and the census's
    age, zip, sex, education, occupation and income.

    Month sizes vary by up to +-30 % (uniform, seeded); ages shift with the season
    (+-4 years, a sine over the year); a quarter of each month's rows live around a
    seasonal zip that circles the range (a sine, +-30,000); occupations gain and lose
    categories (:data:`DRIFT_SEASONAL`, :data:`DRIFT_VANISH`: rows of a vanished
    category take the census's most common one).
    """
    rng = np.random.default_rng(seed)
    weight = 1 + rng.uniform(-0.3, 0.3, 12)
    sizes = np.floor(n_rows * weight / weight.sum()).astype(np.int64)
    sizes[-1] += n_rows - sizes.sum()
    df = make_census(n_rows, seed=seed,
                     columns=["age", "zip", "sex", "education", "occupation", "income"])
    month = np.repeat(np.arange(1, 13), sizes)
    phase = np.sin(2 * np.pi * (month - 1) / 12)
    df["age"] = np.clip(df["age"] + np.rint(4 * phase).astype(np.int64), 18, 95)
    hot = rng.random(n_rows) < 0.25
    centre = 55_000 + 30_000 * phase[hot]
    df.loc[hot, "zip"] = np.clip(np.rint(rng.normal(centre, 2_500)), 10_000, 99_999
                                 ).astype(np.int64)
    occupation = df["occupation"].to_numpy(dtype=object)
    for name, (first, last) in DRIFT_VANISH.items():
        occupation[(occupation == name) & (month >= first) & (month <= last)] = "Retired"
    for name, first, last, share in DRIFT_SEASONAL:  # their seasons do not overlap
        occupation[(month >= first) & (month <= last) & (rng.random(n_rows) < share)] = name
    df["occupation"] = pd.array(occupation, dtype="str")
    df.insert(0, "month", month)
    return df.reset_index(drop=True)

DRIFT_QIS = ["age", "zip", "sex", "education", "occupation"]
DRIFT_OPTIONS = {"allow_unique": ["income"]}


def _drift_months(n_rows: int, k: int):
    """The drifting table's fitted half-year, a month's rows for ``batch_rows``, the
    released months (July-December) and each one's GCP anonymized on its own."""
    df = make_drifting(n_rows)
    first = df[df["month"] <= 6].drop(columns="month").reset_index(drop=True)
    months = [df[df["month"] == m].drop(columns="month").reset_index(drop=True)
              for m in range(7, 13)]
    alone = [_gcp(dm.anonymize(b, DRIFT_QIS, k, **DRIFT_OPTIONS), b, DRIFT_QIS)
             for b in months]
    return first, round(len(first) / 6), months, alone


def drifting(rows: list, n_rows: int, k: int = 20) -> None:
    """Table 7 (``drift``): plans fitted on the drifting table's first half-year by
    each rule of :data:`RULES`, releasing July-December month by month."""
    first, per_month, months, alone = _drift_months(n_rows, k)
    for rule, (options, release, refit) in RULES.items():
        plan = fit_plan(first, DRIFT_QIS, k, batch_rows=per_month, **DRIFT_OPTIONS, **options)
        previous = None
        for m, batch, gcp_alone, rel in zip(range(7, 13), months, alone,
                                            _through(plan, months, release, refit), strict=True):
            rows.append({"table": "drift", "rule": rule, "month": m, "rows": len(batch),
                         "fit_k": plan.fit_k, "leaves": plan.n_leaves,
                         "min_class_groupby": _min_class(rel, DRIFT_QIS),
                         "labels_contain_values": _labels_contain(rel, batch, DRIFT_QIS),
                         "shared_with_previous": None if previous is None
                         else _shared(previous, rel, DRIFT_QIS),
                         "gcp_ratio": _gcp(rel, batch, DRIFT_QIS) / gcp_alone})
            previous = rel


CENSUS_QIS = ["age", "zip", "birth_date", "sex", "education"]
CENSUS_OPTIONS = {"identifiers": ["person_id"], "allow_unique": ["income"]}


def local_speed(rows: list, n_rows: int, rounds: int = 1) -> None:
    df = make_census(n_rows, seed=5)
    fit_rows = min(n_rows, 1_000_000)
    t0 = time.perf_counter()
    plan = fit_plan(df.iloc[:fit_rows], CENSUS_QIS, 10, **CENSUS_OPTIONS)
    t_fit = time.perf_counter() - t0
    for r in range(rounds):  # side by side, round after round: the machine is shared
        # Round 0 includes what a plan makes once (the lift's tables, the nodes' labels).
        t0, c0 = time.perf_counter(), time.process_time()
        out = plan.transform(df)
        t_plan, c_plan = time.perf_counter() - t0, time.process_time() - c0
        del out
        t0, c0 = time.perf_counter(), time.process_time()
        out = dm.anonymize(df, CENSUS_QIS, 10, **CENSUS_OPTIONS)
        t_scratch, c_scratch = time.perf_counter() - t0, time.process_time() - c0
        del out
        rows.append({"table": "speed-local", "round": r, "rows": n_rows, "fit_rows": fit_rows,
                     "fit_s": t_fit, "transform_s": t_plan, "anonymize_s": t_scratch,
                     "ratio": t_plan / t_scratch, "transform_cpu_s": c_plan,
                     "anonymize_cpu_s": c_scratch, "cpu_ratio": c_plan / c_scratch,
                     "leaves": plan.n_leaves, "load": os.getloadavg()[0]})


@contextlib.contextmanager
def _cluster():
    """A LocalCluster of 2 worker processes x 1 thread, and its client.

    On a loaded host the workers may take longer to stop than the cluster's
    close waits for: a TimeoutError raised then, once every figure of the
    step is measured, lost the whole run's report (plans.py --quick at load
    15). It is let pass.
    """
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    try:
        with Client(cluster) as client:
            yield client
    finally:
        with contextlib.suppress(TimeoutError):
            cluster.close(timeout=60)


def dask_speed(rows: list, n_rows: int, rounds: int = 1, wide_columns: int = 40) -> None:

    from dmondrian.synthetic import write_census_parquet

    work = Path(tempfile.mkdtemp(prefix="dm-plans-"))
    try:
        src = work / "census"
        write_census_parquet(str(src), n_rows, seed=6, rows_per_partition=1_000_000)
        tables = [("census", src, 9)]
        if wide_columns:
            from wide_table import write_wide_census

            write_wide_census(str(src), str(work / "wide"), wide_columns, seed=6)
            tables.append(("wide", work / "wide", 9 + wide_columns))
        plan = fit_plan(make_census(min(n_rows, 1_000_000), seed=6), CENSUS_QIS, 10,
                        **CENSUS_OPTIONS)
        with _cluster() as client:
            for r in range(rounds):
                for table, path, width in tables:
                    rows.append(_dask_round(plan, client, str(path), work, r, table, width,
                                            n_rows))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _dask_round(plan, client, src: str, work: Path, r: int, table: str, width: int,
                n_rows: int) -> dict:
    """One round of the speed-dask table on one input: the copy, then the release's
    writers (dask's own on the census table only: it shows the writer, not the width)."""
    import dask.dataframe as dd

    t0, c0 = time.perf_counter(), _cluster_cpu(client)
    dd.read_parquet(src).to_parquet(str(work / f"copy{r}"), write_index=True)
    t_copy, c_copy = time.perf_counter() - t0, _cluster_cpu(client) - c0
    shutil.rmtree(work / f"copy{r}", ignore_errors=True)
    row = {"table": "speed-dask", "input": table, "columns": width, "round": r,
           "rows": n_rows, "copy_s": t_copy, "copy_cpu_s": c_copy}
    # The plan's Parquet writer (the command line's: the identifying check in its
    # write tasks), the lazy release's writer as it writes by default (each file's rows
    # shuffled, labels without statistics), then keeping the input's order, then
    # dask's own writer with pyarrow's defaults (label statistics).
    from dmondrian.plans.dask import transform_to_parquet

    def lazy(write):
        return lambda ddf, path: write(plan_transform_dask(plan, ddf, client), path)

    writers = [("plan_written", lambda ddf, path: transform_to_parquet(
                   plan, ddf, path, client=client, write_options={"write_index": True})),
               ("plan_written_inorder", lambda ddf, path: transform_to_parquet(
                   plan, ddf, path, client=client,
                   write_options={"write_index": True, "shuffle_rows": False})),
               ("plan", lazy(lambda out, path: out.to_parquet(path, write_index=True))),
               ("plan_inorder", lazy(lambda out, path: out.to_parquet(
                   path, write_index=True, shuffle_rows=False)))]
    if table == "census":
        writers.append(("plan_daskwriter", lazy(lambda out, path: dd.DataFrame.to_parquet(
            out, path, write_index=True))))
    for name, write in writers:
        t0, c0 = time.perf_counter(), _cluster_cpu(client)
        write(dd.read_parquet(src), str(work / f"{name}{r}"))
        t_plan, c_plan = time.perf_counter() - t0, _cluster_cpu(client) - c0
        shutil.rmtree(work / f"{name}{r}", ignore_errors=True)
        row.update({f"{name}_s": t_plan, f"{name}_ratio": t_plan / t_copy,
                    f"{name}_cpu_s": c_plan, f"{name}_cpu_ratio": c_plan / c_copy})
    row["load"] = os.getloadavg()[0]
    return row


def _cluster_cpu(client) -> float:
    """CPU seconds used so far by the workers and this process (client and scheduler):
    on a shared machine a job's CPU time varies less than its wall time."""
    import psutil

    def used():
        t = psutil.Process().cpu_times()
        return t.user + t.system

    return sum(client.run(used).values()) + used()


def dask_fit(rows: list, n_rows: int) -> None:
    """Fitting on Dask against fitting in memory, the same census rows: seconds, and
    whether the two plans are the same tree and release a new table alike."""
    import dask.dataframe as dd

    from dmondrian.synthetic import write_census_parquet

    work = Path(tempfile.mkdtemp(prefix="dm-plans-fit-"))
    try:
        src = work / "census"
        write_census_parquet(str(src), n_rows, seed=7, rows_per_partition=250_000)
        df = pd.read_parquet(src)
        new = make_census(100_000, seed=8)
        for batch_rows in (None, 100_000):
            t0 = time.perf_counter()
            local = fit_plan(df, CENSUS_QIS, 10, batch_rows=batch_rows, **CENSUS_OPTIONS)
            t_local = time.perf_counter() - t0
            with _cluster():
                t0 = time.perf_counter()
                # Leaves of an eighth of the table: the top phase cuts at least 3 levels.
                on_dask = fit_plan(dd.read_parquet(str(src)), CENSUS_QIS, 10,
                                   batch_rows=batch_rows, leaf_rows=n_rows // 8,
                                   **CENSUS_OPTIONS)
                t_dask = time.perf_counter() - t0
            same = all(np.array_equal(getattr(local.tree, a), getattr(on_dask.tree, a))
                       for a in ("parent", "count", "lo", "hi", "missing"))
            rows.append({"table": "fit-dask", "rows": n_rows, "batch_rows": batch_rows,
                         "leaf_rows": n_rows // 8,
                         "fit_k": on_dask.fit_k, "leaves": on_dask.n_leaves,
                         "leaves_local": local.n_leaves, "local_s": t_local,
                         "dask_s": t_dask, "same_tree": same,
                         "min_class_new": _min_class(on_dask.transform(new), CENSUS_QIS),
                         "same_release": on_dask.transform(new).equals(local.transform(new))})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def dask_fit_events(rows: list, n_events: int) -> None:
    """Fitting on Dask with ``entity=`` against fitting in memory, the same events:
    seconds, whether the two plans are the same tree, and a new day's fewest people
    per class (a group-by of its published QIs). One cluster for every fit, warmed
    up first by a fit of a small table (the workers' imports are not timed)."""
    import dask.dataframe as dd

    from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS as qis
    from dmondrian.synthetic_events import make_events

    work = Path(tempfile.mkdtemp(prefix="dm-plans-fit-events-"))
    try:
        src = work / "events"
        n_users = max(1_000, round(n_events / 6.62))
        events = make_events(n_users, seed=21)
        dd.from_pandas(events, chunksize=250_000).to_parquet(str(src))
        day = make_events(max(100, n_users // 30), seed=22, start_user=n_users // 2)
        with _cluster():
            fit_plan(dd.from_pandas(day, npartitions=2), qis, 10, entity="user_id")
            for batch_rows, options in ((None, {}), (len(events) // 30, {}),
                                        (len(events) // 30, {"sensitive": "event_type",
                                                             "l": 2, "l_kind": "entropy"})):
                t0 = time.perf_counter()
                local = fit_plan(events, qis, 10, entity="user_id", batch_rows=batch_rows,
                                 **options)
                t_local = time.perf_counter() - t0
                t0 = time.perf_counter()
                on_dask = fit_plan(dd.read_parquet(str(src)), qis, 10, entity="user_id",
                                   batch_rows=batch_rows, leaf_rows=len(events) // 8,
                                   **options)
                t_dask = time.perf_counter() - t0
                same = all(np.array_equal(getattr(local.tree, a), getattr(on_dask.tree, a))
                           for a in ("parent", "count", "lo", "hi", "missing"))
                out = on_dask.transform(day)
                people = (out[qis].astype(str).assign(_u=day["user_id"].to_numpy())
                          .groupby(qis, observed=True)["_u"].nunique())
                rows.append({"table": "fit-dask-events", "rows": len(events),
                             "people": n_users, "batch_rows": batch_rows, "l": options.get("l"),
                             "leaf_rows": len(events) // 8, "fit_k": on_dask.fit_k,
                             "leaves": on_dask.n_leaves, "leaves_local": local.n_leaves,
                             "local_s": t_local, "dask_s": t_dask,
                             "same_tree": same, "day_rows": len(day),
                             "min_people_day": int(people.min()),
                             "same_release": out.equals(local.transform(day))})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plan_transform_dask(plan, ddf, client):
    from dmondrian.plans.dask import transform_dask

    return transform_dask(plan, ddf, client=client, progress=False)


def _print(rows) -> None:
    frame = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 30,
                           "display.float_format", "{:.3f}".format):
        for table, part in frame.groupby("table", sort=False):
            print(f"\n== {table}")
            print(part.dropna(axis=1, how="all").drop(columns="table").to_string(index=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--sweep", action="store_true",
                    help="Adult: also the fit_k x trim trade-off, and halves alone at k=15-30")
    ap.add_argument("--dated-rows", type=int, default=1_200_000)
    ap.add_argument("--drift-rows", type=int, default=240_000)
    ap.add_argument("--drift-k", type=int, default=20)
    ap.add_argument("--adult-seeds", type=int, nargs="+", default=[0],
                    help="adult-frontier: the seeds splitting adult.test in halves")
    ap.add_argument("--local-rows", type=int, default=10_000_000)
    ap.add_argument("--dask-rows", type=int, default=10_000_000)
    ap.add_argument("--dask-wide-columns", type=int, default=40,
                    help="speed-dask: payload columns of the wide table (0: census only)")
    ap.add_argument("--fit-rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1,
                    help="speed tables: measure both sides this many times, alternately")
    ap.add_argument("--steps", default=None,
                    help="comma-separated steps to run, e.g. drift,adult-frontier (default: "
                         "every step not skipped)")
    ap.add_argument("--skip", action="append", default=[],
                    help="adult, adult-frontier, dated, drift, local, dask, dask-fit or "
                         "dask-fit-events "
                         "(repeatable)")
    ap.add_argument("--out", default="benchmarks/results/plans.json")
    args = ap.parse_args()
    if args.quick:
        args.dated_rows, args.local_rows, args.dask_rows = 240_000, 1_000_000, 2_000_000
        args.drift_rows = 120_000
        args.fit_rows = 200_000
    rows: list = []
    steps = {"adult": lambda: adult(rows, args.sweep),
             "adult-frontier": lambda: adult_frontier(rows, args.adult_seeds),
             "dated": lambda: dated(rows, args.dated_rows),
             "drift": lambda: drifting(rows, args.drift_rows, args.drift_k),
             "local": lambda: local_speed(rows, args.local_rows, args.rounds),
             "dask": lambda: dask_speed(rows, args.dask_rows, args.rounds,
                                       args.dask_wide_columns),
             "dask-fit": lambda: dask_fit(rows, args.fit_rows),
             "dask-fit-events": lambda: dask_fit_events(rows, args.fit_rows)}
    chosen = list(steps) if args.steps is None else args.steps.split(",")
    unknown = sorted(set(chosen) - set(steps))
    if unknown:
        ap.error(f"unknown steps {unknown}; the steps: {', '.join(steps)}")
    for name, step in steps.items():
        if name in chosen and name not in args.skip:
            step()
    _print(rows)
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
           "args": vars(args), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
