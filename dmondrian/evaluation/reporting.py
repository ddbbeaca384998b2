"""One call that measures a release: :func:`report` and its :class:`Report`.

The report gathers the metrics of :mod:`dmondrian.metrics` (see there for every definition) and
reads a Dask table in as few passes as it can: class sizes, label counts, the original's domains and
the sensitive statistics are computed together in one ``dask.compute``.

(The module is not called ``report.py``: ``dmondrian.report`` is the function,
and a submodule of the same name would shadow it.)
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

import pandas as pd

from ..metrics import (
    DEFAULT_RISK_THRESHOLD,
    NCP,
    Deferred,
    Privacy,
    Risk,
    SizeSummary,
    check_column,
    class_keys,
    class_sizes,
    domains_deferred,
    journalist,
    population_counts,
    resolve_domains,
    run,
    size_distribution,
)
from ..metrics.accumulator import ReleaseCounts
from ..metrics.certainty_penalty import check_weights, ncp_finish, ncp_plan, released_domains
from ..metrics.per_class import L_DISTINCT, L_ENTROPY, SIZE, T, class_statistics
from ..metrics.risk import check_threshold, prosecutor
from ..metrics.sizes import finish_size_counts, size_counts_of
from ..metrics.suppressed import Suppressed, suppressed_deferred
from ..privacy.constraints import check_k
from ..privacy.noise import check_noise, noise_summary
from ..release.identifying_check import identifying_parts
from .verification import fewest_entities, jsonable

__all__ = ["Report", "report", "counted_report"]


@dataclass
class Report:
    """What a release costs and risks; build it with :func:`report`.

    Attributes
    ----------
    n_records, n_classes : int
    quasi_identifiers : list
    k : int or None
        The k asked for (None if not given).
    privacy : Privacy
        k (and l, t) the table achieves.
    c_avg : float
        ``C_avg`` for the requested k (the achieved k when none was given).
    discernibility : int
    size_counts : pandas.Series
        Number of classes of each size.
    class_sizes : pandas.DataFrame
        Classes and records per size bucket.
    ncp : NCP or None
        Information loss (None without ``original`` or ``domains``); rows
        suppressed count as full loss on every QI.
    ncp_released : NCP or None
        Information loss over the released rows alone, normalized by the domains they span
        (:func:`dmondrian.metrics.certainty_penalty.released_domains`), when rows were left out
        (``suppressed="drop"``; None otherwise): what a manifest records, since ``ncp``, counting
        the rows left out and normalized by the original's ranges, gives their number and the
        extremes they held away (:func:`dmondrian.evaluation.manifest.withhold_exact`).
    risk : Risk
    suppressed : Suppressed
        Rows masked (every QI ``"*"``) and, given ``original``, rows left
        out, with their share of the original's rows.
    noise : dict
        ``{column: {"epsilon": eps, "bounds": [lo, hi]}}`` of the noised
        columns, as given to :func:`report` (see :mod:`dmondrian.privacy.noise`).
    identifying_columns : list of dmondrian.release.identifiers.IdentifyingColumn
        Columns released as is that single out rows (a risk k does not cover).
    k_entities : int or None
        The fewest distinct entities of a class, given ``entity`` values.
    """

    n_records: int
    n_classes: int
    quasi_identifiers: list
    k: int | None
    privacy: Privacy
    c_avg: float
    discernibility: int
    size_counts: pd.Series
    class_sizes: pd.DataFrame
    ncp: NCP | None
    risk: Risk
    suppressed: Suppressed | None = None
    noise: dict = field(default_factory=dict)
    identifying_columns: list = field(default_factory=list)
    k_entities: int | None = None
    ncp_released: NCP | None = None

    # -- export ----------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain-Python nested dict (JSON-serializable; numbers as int/float)."""
        p = self.privacy
        achieved = {"k": p.k, "sensitive": None if p.sensitive is None else str(p.sensitive),
                    "l_distinct": p.l_distinct, "l_entropy": p.l_entropy, "t": p.t,
                    "t_distance": p.t_distance, "k_entities": self.k_entities}
        risk = {**vars(self.risk),
                "identifying_columns": [f.to_dict() for f in self.identifying_columns]}
        out = {"rows": self.n_records, "classes": self.n_classes,
               "quasi_identifiers": [str(q) for q in self.quasi_identifiers], "k": self.k,
               "achieved": achieved, "c_avg": self.c_avg, "discernibility": self.discernibility,
               "class_sizes": self.class_sizes.to_dict(orient="records"),
               "ncp": _ncp_dict(self.ncp), "risk": risk,
               "suppressed": None if self.suppressed is None else self.suppressed.to_dict(),
               "noise": self.noise}
        if self.ncp_released is not None:
            out["ncp_released"] = _ncp_dict(self.ncp_released)
        return jsonable(out)

    def to_json(self, **kwargs) -> str:
        """:meth:`to_dict` as JSON text (``kwargs`` go to :func:`json.dumps`)."""
        return json.dumps(self.to_dict(), **kwargs)

    # -- display ---------------------------------------------------------------------------------
    def _lines(self) -> list[tuple[str, str]]:
        p, r = self.privacy, self.risk
        rows = [("rows / classes", f"{self.n_records:,} / {self.n_classes:,}"),
                ("quasi-identifiers", ", ".join(map(str, self.quasi_identifiers)))]
        asked = "" if self.k is None else f" (asked {self.k})"
        rows.append(("k achieved", f"{p.k}{asked}"))
        if self.k_entities is not None:
            rows.append(("k achieved in entities", f"{self.k_entities}"))
        if p.sensitive is not None:
            rows.append((f"l-diversity ({p.sensitive})",
                         f"distinct {p.l_distinct}, entropy {p.l_entropy:.3f}"))
            rows.append((f"t-closeness ({p.t_distance})", f"{p.t:.4f}"))
        s = self.suppressed
        if s is not None and s.rows:
            dropped = "" if s.dropped is None else f", {s.dropped:,} dropped"
            rows.append(("suppressed", f"{s.rows:,} rows ({s.share:.2%}): {s.masked:,} masked"
                                       f"{dropped}"))
        rows.append(("C_avg", f"{self.c_avg:.3f}"))
        rows.append(("discernibility", f"{self.discernibility:,}"))
        if self.ncp is not None:
            per = ", ".join(f"{q} {v:.3f}" for q, v in self.ncp.per_attribute.items())
            rows.append(("NCP (GCP)", f"{self.ncp.overall:.4f}"))
            rows.append(("NCP per QI", per))
        rows.append(("prosecutor risk", f"max {r.prosecutor_max:.4f}, avg {r.prosecutor_avg:.4f}, "
                                        f"{r.prosecutor_at_risk:.2%} of rows > {r.threshold:g}"))
        if r.journalist_max is not None:
            rows.append(("journalist risk", f"max {r.journalist_max:.4f}, "
                                            f"{r.journalist_at_risk:.2%} of rows > "
                                            f"{r.threshold:g} (population {r.population_rows:,})"))
        rows.append(("marketer risk", f"{r.marketer:.4f}"))
        for f in self.identifying_columns:
            share = f"{f.share:.0%} unique" if f.exact else f"~{f.share:.0%} distinct"
            rows.append(("singles out rows", f"{f.column} ({share}; released as is)"))
        for column, n in self.noise.items():
            lo, hi = n["bounds"]
            rows.append((f"noise ({column})", f"epsilon {n['epsilon']:g}, bounds [{lo:g}, {hi:g}]"))
        return rows

    def _size_lines(self) -> list[str]:
        out = []
        for row in self.class_sizes.itertuples(index=False):
            if row.classes == 0:
                continue
            size = str(row.size_min) if row.size_min == row.size_max else \
                f"{row.size_min}-{row.size_max}"
            out.append(f"{size:>11}  {row.classes:>9,} classes  {row.records:>11,} rows")
        return out

    def __repr__(self) -> str:
        lines = ["dmondrian report"]
        width = max(len(k) for k, _ in self._lines())
        lines += [f"  {k:<{width}}  {v}" for k, v in self._lines()]
        lines.append("  class sizes:")
        lines += ["  " + line for line in self._size_lines()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cell = 'style="text-align:left;padding:2px 10px"'
        rows = "".join(f"<tr><th {cell}>{html.escape(k)}</th><td {cell}>{html.escape(v)}</td></tr>"
                       for k, v in self._lines())
        sizes = self.class_sizes[self.class_sizes["classes"] > 0]
        return (f"<div><h4 style=\"margin:4px 0\">dmondrian report</h4><table>{rows}</table><p "
                f"style=\"margin:4px 0\">class sizes</p>{sizes.to_html(index=False)}</div>")


def _ncp_dict(ncp: NCP | None) -> dict | None:
    if ncp is None:
        return None
    return {"overall": ncp.overall,
            "per_attribute": {str(q): v for q, v in ncp.per_attribute.items()},
            "weights": {str(q): v for q, v in ncp.weights.items()}}


def report(released, quasi_identifiers, original=None, sensitive=None, k=None, *,
           population=None, domains=None, hierarchies=None, qi_kinds=None, weights=None,
           class_column=None, risk_threshold=DEFAULT_RISK_THRESHOLD, t_distance="auto",
           bins=None, noise=None, allow_unique=None, entity=None) -> Report:
    """Measure a release: sizes, information loss, re-identification risk, privacy.

    Parameters
    ----------
    released : pandas or Dask DataFrame
        The released table (or any table, e.g. the original, to see its risk).
    quasi_identifiers : list of column names
        Its QI columns.
    original : pandas or Dask DataFrame, optional
        The original table: its global domains normalize NCP. Without it (or
        ``domains``) the report has no NCP.
    sensitive : column name, optional
        Sensitive column for l-diversity and t-closeness.
    k : int, optional
        The k asked for; ``C_avg`` uses it (the achieved k otherwise).
    population : pandas or Dask DataFrame, optional
        Population with original QI values, for journalist and marketer risk.
    domains : dict, optional
        Precomputed :func:`dmondrian.metrics.compute_domains`.
    hierarchies, qi_kinds : dict, optional
        As given to :func:`dmondrian.anonymize`.
    weights : dict or sequence, optional
        QI weights of the overall NCP (equal by default).
    class_column : str, optional
        Define classes by this column instead of the published QI values.
    risk_threshold : float, default 0.2
        A record is at risk when its re-identification risk exceeds this.
    t_distance : {"auto", "ordered", "equal"}
        EMD ground distance for t-closeness.
    bins : sequence of int or "exact", optional
        Class-size buckets (see :func:`dmondrian.metrics.class_size_distribution`).
    noise : dict, optional
        The ``noise`` given to :func:`dmondrian.anonymize`: the report lists
        each noised column's epsilon and bounds.
    allow_unique : list, optional
        Columns judged safe although they single out rows. Every other
        column but the QIs, the sensitive, the noised and the class column
        is checked (:mod:`dmondrian.release.identifiers`).
    entity : array-like, optional
        The person key of each released row, in its row order (a release of
        ``entity=`` no longer holds it): the report then gives the fewest
        distinct entities of a class (``k_entities``). Pandas tables only.

    Returns
    -------
    Report
        With a readable ``repr``, ``_repr_html_`` for notebooks, ``to_dict()`` and ``to_json()``.

    Examples
    --------
    >>> import dmondrian
    >>> df = pd.DataFrame({"age": [23, 25, 31, 33, 35, 47],
    ...                    "disease": ["flu", "cold", "flu", "acne", "cold", "flu"]})
    >>> rel = dmondrian.anonymize(df, ["age"], k=3)
    >>> r = report(rel, ["age"], original=df, sensitive="disease", k=3)
    >>> r.privacy.k, r.n_classes, r.c_avg, round(r.ncp.overall, 3)
    (3, 2, 1.0, 0.458)
    >>> r.to_dict()["achieved"]["l_distinct"]
    2
    """
    qis, keys = class_keys(released, quasi_identifiers, class_column)
    if k is not None:
        k = check_k(k)
    threshold = check_threshold(risk_threshold)
    w = check_weights(weights, qis)
    parts = []
    if sensitive is not None:
        check_column(released, sensitive, "sensitive")
        frame, plan = class_statistics(released, keys, sensitive, t_distance)
        sizes = frame[SIZE]
        parts.append(Deferred([frame[L_DISTINCT].min(), frame[L_ENTROPY].min(), frame[T].max()],
                              list))
    else:
        plan, sizes = None, class_sizes(released, keys)
        parts.append(Deferred([], list))
    parts.append(Deferred([size_counts_of(sizes)], lambda d: SizeSummary(finish_size_counts(d[0]))))
    noised = check_noise(noise, released.columns, qis, sensitive)
    as_is = [c for c in released.columns
             if c not in qis and c not in keys and c != sensitive
             and c not in {s.column for s in noised}]
    unique_parts, unique_finish = identifying_parts(released, as_is, allow_unique or ())
    measure_ncp = original is not None or domains is not None
    if measure_ncp:
        if domains is None:
            parts.append(domains_deferred(original, qis, hierarchies, qi_kinds))
        else:
            parts.append(Deferred([], lambda _: resolve_domains(qis, domains=domains)))
        plans = ncp_plan(released, qis, keys, original)
        parts.append(Deferred([p[1] for p in plans.values()], list))
    parts.append(suppressed_deferred(released, qis, released.shape[0], original))
    parts.append(Deferred(unique_parts, unique_finish))
    results = run(*parts)
    l_stats, summary, suppressed = results[0], results[1], results[-2]
    ncp = ncp_finish(plans, results[3], qis, results[2], w, summary.n_records,
                     suppressed.dropped or 0) if measure_ncp else None
    # Over the released rows alone and the domains they span, the figure a
    # manifest may carry (see Report).
    ncp_released = ncp_finish(plans, results[3], qis,
                              released_domains(plans, results[3], qis, results[2]), w,
                              summary.n_records) if measure_ncp and suppressed.dropped else None
    risk_fields = prosecutor(summary, threshold)
    if population is not None:
        f, big_f, n_pop = population_counts(released, qis, population, hierarchies, qi_kinds)
        risk_fields = journalist(f, big_f, n_pop, threshold, risk_fields)
    privacy = _privacy(summary, sensitive, l_stats, None if plan is None else plan.distance)
    return _finished(summary, qis, k, privacy, bins, ncp, ncp_released,
                     Risk(threshold, **risk_fields), suppressed, noise_summary(noised), results[-1],
                     None if entity is None else fewest_entities(released, keys, entity))


def counted_report(counts: ReleaseCounts, quasi_identifiers, domains, input_rows: int, *, k=None,
                   sensitive_meta=None, identifying_columns=(), noise=None, weights=None,
                   risk_threshold=DEFAULT_RISK_THRESHOLD, t_distance="auto", bins=None) -> Report:
    """The :func:`report` of a release from its merged class counts, without reading it.

    What :func:`report` gives for ``report(release, quasi_identifiers, original=...,
    sensitive=counts.sensitive, ...)`` (within float rounding), from the counts the tasks that wrote
    the release accumulated partition by partition
    (:class:`~dmondrian.metrics.accumulator.ReleaseCounts`). Every QI must be published as labels.

    Parameters
    ----------
    counts : ReleaseCounts
        The release's merged counts.
    quasi_identifiers : list
        Its QI columns (``counts.quasi_identifiers``).
    domains : dict
        ``{qi: Domain}`` of the original table (:func:`dmondrian.metrics.compute_domains`).
    input_rows : int
        Rows of the original table: those beyond the release's were left out.
    k : int, optional
        The k asked for.
    sensitive_meta : pandas.Series, optional
        The sensitive column's (empty) pandas form, given ``counts.sensitive``.
    identifying_columns : list
        Columns released as is that single out rows, as the writer judged them.
    noise, weights, risk_threshold, t_distance, bins
        As :func:`report` takes them.

    Returns
    -------
    Report
    """
    qis = list(quasi_identifiers)
    if k is not None:
        k = check_k(k)
    threshold = check_threshold(risk_threshold)
    w = check_weights(weights, qis)
    summary = counts.size_summary()
    sensitive = counts.sensitive
    l_stats, distance = (counts.sensitive_stats(sensitive_meta, t_distance)
                         if sensitive is not None else ([], None))
    plans = {q: ("labels", None) for q in qis}
    labels = [counts.label_counts(q) for q in qis]
    dropped = max(0, int(input_rows) - counts.rows)
    suppressed = Suppressed(counts.masked, dropped, int(input_rows))
    ncp = ncp_finish(plans, labels, qis, domains, w, summary.n_records, dropped)
    ncp_released = ncp_finish(plans, labels, qis, released_domains(plans, labels, qis, domains),
                              w, summary.n_records) if dropped else None
    return _finished(summary, qis, k, _privacy(summary, sensitive, l_stats, distance), bins, ncp,
                     ncp_released, Risk(threshold, **prosecutor(summary, threshold)), suppressed,
                     noise_summary(noise or {}), list(identifying_columns), None)


def _privacy(summary: SizeSummary, sensitive, l_stats: list, distance) -> Privacy:
    if distance is None:
        return Privacy(summary.min_size)
    return Privacy(summary.min_size, sensitive, int(l_stats[0]), float(l_stats[1]),
                   float(l_stats[2]), distance)


def _finished(summary: SizeSummary, qis, k, privacy, bins, ncp, ncp_released, risk, suppressed,
              noise, identifying, k_entities) -> Report:
    """The :class:`Report` of measured parts: what both :func:`report` and
    :func:`counted_report` end with."""
    counts = summary.counts
    return Report(n_records=summary.n_records, n_classes=summary.n_classes, quasi_identifiers=qis,
                  k=k, privacy=privacy,
                  c_avg=summary.c_avg(k if k is not None else max(summary.min_size, 1)),
                  discernibility=summary.discernibility, size_counts=counts,
                  class_sizes=size_distribution(counts, bins), ncp=ncp, risk=risk,
                  suppressed=suppressed, noise=noise, identifying_columns=identifying,
                  k_entities=k_entities, ncp_released=ncp_released)
