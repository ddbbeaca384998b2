"""Pictures of a release: class sizes, the cost of k, and the Mondrian painting.

Every function builds and returns a :class:`matplotlib.figure.Figure` directly: pyplot is never
imported, so no global figure state is created or leaked, and the figures render with the Agg
backend (``fig.savefig("x.png")``, or shown inline by Jupyter).
"""

from __future__ import annotations

import colorsys

import numpy as np
import pandas as pd
from matplotlib.dates import AutoDateFormatter, AutoDateLocator, date2num
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullLocator, StrMethodFormatter

from .errors import ParameterError, UnsupportedDtypeError
from .kinds import detect_kind
from .metrics import check_column, check_table, compute_domains, is_dask, ncp, size_distribution
from .metrics._frames import shared_parameters
from .metrics.sizes import size_summary
from .privacy.constraints import check_k
from .privacy.suppression import MASK_LABEL
from .release.identifiers import INDEX

__all__ = ["class_size_histogram", "k_sweep", "k_sweep_table", "partition_painting"]

# Piet Mondrian's own palette, for palette="mondrian".
MONDRIAN = ("#d40920", "#1356a2", "#f7d842", "#f2f2f2", "#f2f2f2", "#f2f2f2")
_INK = "#1b1b1b"
_EXACT_BARS = 40  # up to this many distinct sizes, one bar per size


def _new_figure(figsize) -> Figure:
    return Figure(figsize=figsize, layout="constrained")


@shared_parameters
def class_size_histogram(table, quasi_identifiers, *, k=None, class_column=None, bins=None,
                         figsize=(7.0, 4.0)) -> Figure:
    """Bar chart of how many classes have each size.

    Parameters
    ----------
    {table}
    k : int, optional
        Draw the k threshold; the smallest class size is marked otherwise.
    {class_column}
    bins : sequence of int or "exact", optional
        Size bucket edges (see :func:`dmondrian.metrics.class_size_distribution`).
        Default: one bar per size when there are at most 40 distinct sizes,
        else about 30 buckets (log-spaced when sizes span a decade).
    figsize : (float, float)

    Returns
    -------
    matplotlib.figure.Figure
        One bar per size (or bucket) holding classes, in ``fig.axes[0].patches``.

    Examples
    --------
    >>> t = pd.DataFrame({"age": ["[20, 29]"] * 3 + ["[30, 39]"] * 2 + ["40"] * 2})
    >>> fig = class_size_histogram(t, ["age"], k=2)
    >>> len(fig.axes[0].patches)
    2
    """
    summary = size_summary(table, quasi_identifiers, class_column)
    counts = summary.counts
    sizes = counts.index.to_numpy()
    wide = len(sizes) > 0 and sizes.max() >= 10 * sizes.min()
    if bins is None:
        bins = "exact" if len(counts) <= _EXACT_BARS else _plot_edges(sizes, wide)
    dist = size_distribution(counts, bins)
    dist = dist[dist["classes"] > 0]
    fig = _new_figure(figsize)
    ax = fig.add_subplot()
    if isinstance(bins, str):  # one bar per size, centred on it
        ax.bar(dist["size_min"], dist["classes"], width=0.8, color="#1356a2", edgecolor=_INK,
               linewidth=0.6)
        marker = 0.5
    else:  # one bar per bucket, spanning its sizes
        left = dist["size_min"].to_numpy(dtype=float)
        right = dist["size_max"].to_numpy(dtype=float) + 1
        ax.bar(left, dist["classes"], width=right - left, align="edge", color="#1356a2",
               edgecolor=_INK, linewidth=0.6)
        marker = 0.0
        if wide:
            ax.set_xscale("log")
    limit = k if k is not None else summary.min_size
    if limit:
        ax.axvline(limit - marker, color="#d40920", linestyle="--", linewidth=1.2,
                   label=f"k = {limit}" if k is not None else f"smallest class = {limit}")
        ax.legend(frameon=False)
    ax.set_xlabel("class size (rows)")
    ax.set_ylabel("classes")
    ax.set_title(f"{summary.n_classes:,} classes over {summary.n_records:,} rows")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def _plot_edges(sizes: np.ndarray, wide: bool, n: int = 30) -> list[int]:
    """About ``n`` bucket edges over the sizes, log-spaced when they span a decade."""
    lo, hi = int(sizes.min()), int(sizes.max()) + 1
    edges = np.geomspace(lo, hi, n + 1) if wide else np.linspace(lo, hi, n + 1)
    return sorted({int(e) for e in np.round(edges)} | {lo, hi})


@shared_parameters
def k_sweep_table(table, quasi_identifiers, ks, **options) -> pd.DataFrame:
    """Anonymize ``table`` at each k and measure the release.

    Parameters
    ----------
    {k_sweep}
    **options
        Passed to :func:`dmondrian.anonymize` (``mode``, ``hierarchies``, ...),
        except ``weights``, the QI weights of NCP. Every column is allowed to
        single out rows (``allow_unique``): nothing is released.

    Returns
    -------
    pandas.DataFrame
        One row per k: ``k``, ``classes``, ``ncp`` (overall, against the
        table's own domains), ``discernibility`` and ``c_avg``.

    Examples
    --------
    >>> df = pd.DataFrame({"age": range(20, 60), "hours": [40, 20, 60, 35] * 10})
    >>> k_sweep_table(df, ["age", "hours"], [2, 10])[["k", "classes"]].values.tolist()
    [[2, 16], [10, 4]]
    """
    from . import anonymize

    if is_dask(table):
        raise ParameterError("table", "k_sweep anonymizes the table once per k; pass a pandas "
                                      "DataFrame (a sample of a large table)")
    check_table(table)
    ks = [check_k(k) for k in ks]
    if not ks:
        raise ParameterError("ks", "ks must name at least one k")
    options = dict(options)
    options.pop("class_column", None)
    weights = options.pop("weights", None)
    # The sweep measures and releases nothing: a column that singles out rows is not
    # refused here (the run that releases the table judges it).
    options["allow_unique"] = list(dict.fromkeys(
        [*(options.get("allow_unique") or []),
         *(c for c in table.columns if c not in (options.get("identifiers") or [])),
         table.index.name if table.index.name is not None else INDEX]))
    domains = compute_domains(table, quasi_identifiers, options.get("hierarchies"),
                              options.get("qi_kinds"))
    rows = []
    for k in sorted(set(ks)):
        released = anonymize(table, quasi_identifiers, k, **options)
        summary = size_summary(released, quasi_identifiers)
        loss = ncp(released, quasi_identifiers, table, domains=domains, weights=weights)
        rows.append((k, summary.n_classes, loss.overall, summary.discernibility, summary.c_avg(k)))
    return pd.DataFrame(rows, columns=["k", "classes", "ncp", "discernibility", "c_avg"])


@shared_parameters
def k_sweep(table, quasi_identifiers, ks, *, figsize=(7.0, 6.0), **options) -> Figure:
    """Information loss against k: NCP and discernibility of a release at each k.

    Anonymizes ``table`` once per k with :func:`dmondrian.anonymize` (see
    :func:`k_sweep_table`) and plots both measures against k.

    Parameters
    ----------
    {k_sweep}
    figsize : (float, float)
    **options
        Passed to :func:`dmondrian.anonymize`.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes sharing k: NCP (top) and discernibility (bottom); each has
        one line with one point per k.

    Examples
    --------
    >>> df = pd.DataFrame({"age": range(20, 60), "hours": [40, 20, 60, 35] * 10})
    >>> fig = k_sweep(df, ["age", "hours"], [2, 5, 10])
    >>> [len(ax.lines[0].get_xdata()) for ax in fig.axes]
    [3, 3]
    """
    data = k_sweep_table(table, quasi_identifiers, ks, **options)
    fig = _new_figure(figsize)
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.plot(data["k"], data["ncp"], marker="o", color="#1356a2", linewidth=1.8)
    top.set_ylabel("NCP (GCP)")
    top.set_ylim(0, max(1e-9, float(data["ncp"].max())) * 1.1)
    bottom.plot(data["k"], data["discernibility"], marker="s", color="#d40920", linewidth=1.8)
    bottom.set_ylabel("discernibility")
    bottom.set_xlabel("k")
    if len(data) > 1 and data["k"].max() / data["k"].min() >= 20:
        bottom.set_xscale("log")
    if len(data) <= 12:  # label the ks actually run, not powers of ten
        bottom.set_xticks(data["k"], [str(k) for k in data["k"]])
        bottom.xaxis.set_minor_locator(NullLocator())
    if data["discernibility"].max() / max(data["discernibility"].min(), 1) >= 100:
        bottom.set_yscale("log")
    else:
        bottom.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    top.set_title(f"Cost of k on {len(table):,} rows ({len(data)} releases)")
    return fig


# -- the painting -------------------------------------------------------------------------------


def _axis(original: pd.Series, labels: list):
    """Where an axis puts things: the original values, and the ``lo``, ``hi`` and ``missing`` of
    each of its published ``labels`` (NaN bounds: nothing to draw), plus the half-width of one value
    (0.5 for integers and categories, whose published range ``[20, 29]`` covers the cells 19.5 to
    29.5, so neighbouring classes touch)."""
    kind = detect_kind(original)
    if not kind.ordered:
        raise UnsupportedDtypeError(original.name, "partition_painting draws numeric, datetime or "
                                                   f"ordinal QIs; {original.name!r} is {kind.name}")
    # Suppressed rows ("*", every value hidden) have no box to draw.
    masked = [i for i, label in enumerate(labels) if label == MASK_LABEL]
    cover = kind.coverage([label for label in labels if label != MASK_LABEL], original,
                          column=original.name)
    coords, lo, hi, missing = cover.keys(original), cover.lo, cover.hi, cover.missing
    if masked:
        at = [i - j for j, i in enumerate(masked)]
        lo, hi = np.insert(lo, at, np.nan), np.insert(hi, at, np.nan)
        missing = np.insert(missing, at, False)
    if kind.temporal:  # matplotlib draws time in its own unit, days
        coords, lo, hi = _date_units(coords), _date_units(lo), _date_units(hi)
    return coords, lo, hi, missing, kind.cell_width(original.dtype) / 2


def _date_units(ns: np.ndarray) -> np.ndarray:
    """Nanoseconds since the epoch (NaN: missing) as matplotlib dates."""
    out = np.full(ns.shape, np.nan)
    present = ~np.isnan(ns)
    out[present] = date2num(ns[present].astype(np.int64).view("datetime64[ns]"))
    return out


def distinct_colours(n: int, seed: int = 0) -> list:
    """``n`` clearly different, harmonious colours (golden-angle hues, varied lightness).

    Examples
    --------
    >>> len(set(distinct_colours(50)))
    50
    """
    rng = np.random.default_rng(seed)
    out = []
    hue = rng.random()
    for i in range(n):
        hue = (hue + 0.618033988749895) % 1.0
        light = (0.62, 0.72, 0.52)[i % 3]
        sat = (0.70, 0.55, 0.80)[(i // 3) % 3]
        out.append(colorsys.hls_to_rgb(hue, light, sat))
    return out


def partition_painting(original, anonymized, quasi_identifiers, *, palette="distinct",
                       max_points=30_000, seed=0, title=None, figsize=(8.0, 7.0)) -> Figure:
    """The Mondrian "painting": every class's box in a plane of two QIs.

    Each distinct pair of published values of ``qi_x`` and ``qi_y`` is drawn as the rectangle it
    covers, filled with its own colour, over a scatter of the original points. With more than two
    QIs, classes differing only in other QIs share a rectangle; with ``mode="relaxed"`` rectangles
    may overlap. Classes mixing missing and present values are hatched; classes with only missing
    values have no box.

    Parameters
    ----------
    original : pandas.DataFrame
        The table before anonymization.
    anonymized : pandas.DataFrame
        Its release (``generalization="range"``), row-aligned with ``original``.
    quasi_identifiers : [qi_x, qi_y]
        Two numeric, datetime or ordinal QIs.
    palette : {"distinct", "mondrian"}
        One distinct colour per box, or Piet Mondrian's red, blue, yellow and white.
    max_points : int
        Scatter at most this many original points (a seeded sample).
    seed : int
        Seed of the colours and of the point sample.
    title : str, optional
    figsize : (float, float)

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.axes[0].patches`` holds one Rectangle per drawn box.

    Examples
    --------
    >>> import dmondrian
    >>> df = pd.DataFrame({"x": [1, 2, 3, 4, 5, 6, 7, 8], "y": [8, 1, 7, 2, 6, 3, 5, 4]})
    >>> fig = partition_painting(df, dmondrian.anonymize(df, ["x", "y"], k=2), ["x", "y"])
    >>> len(fig.axes[0].patches)
    4
    """
    for name, frame in (("original", original), ("anonymized", anonymized)):
        if not isinstance(frame, pd.DataFrame):
            raise ParameterError(name, f"{name} must be a pandas DataFrame, got "
                                       f"{type(frame).__name__}")
    pair = list(quasi_identifiers) if not isinstance(quasi_identifiers, str) else []
    if len(pair) != 2:
        raise ParameterError("quasi_identifiers", "partition_painting needs exactly two QIs "
                                                  f"[qi_x, qi_y], got {quasi_identifiers!r}")
    for q in pair:
        check_column(original, q, "quasi-identifier")
        check_column(anonymized, q, "quasi-identifier")
    if not original.index.equals(anonymized.index):
        raise ParameterError("anonymized", "anonymized must be row-aligned with original "
                                           "(the same index)")
    if palette not in ("distinct", "mondrian"):
        raise ParameterError("palette", f"palette must be 'distinct' or 'mondrian', "
                                        f"got {palette!r}")
    qx, qy = pair
    pairs = anonymized[[qx, qy]].astype(str).drop_duplicates()
    labels_x, labels_y = list(pd.unique(pairs[qx])), list(pd.unique(pairs[qy]))
    xs, *bounds_x, cell_x = _axis(original[qx], labels_x)
    ys, *bounds_y, cell_y = _axis(original[qy], labels_y)
    boxes = _boxes(pairs, qx, qy, labels_x, bounds_x, labels_y, bounds_y)
    boxes["x0"] -= cell_x
    boxes["x1"] += cell_x
    boxes["y0"] -= cell_y
    boxes["y1"] += cell_y

    fig = _new_figure(figsize)
    ax = fig.add_subplot()
    x_lo, x_hi, span_x = _extent(xs, boxes, "x")
    y_lo, y_hi, span_y = _extent(ys, boxes, "y")
    rng = np.random.default_rng(seed)
    if palette == "mondrian":
        colours = [MONDRIAN[i] for i in rng.integers(0, len(MONDRIAN), len(boxes))]
        edge, width, alpha = _INK, 2.2, 0.95
    else:
        colours = distinct_colours(len(boxes), seed)
        edge, width, alpha = _INK, 0.9, 0.78
    # Draw large boxes first, so the small ones stay visible where they overlap.
    order = np.argsort(-(boxes["x1"] - boxes["x0"]) * (boxes["y1"] - boxes["y0"]), kind="stable")
    bx0, bx1, by0, by1, missing = (boxes[c].to_numpy() for c in ("x0", "x1", "y0", "y1", "missing"))
    for i in order:
        x0, x1 = _pad(bx0[i], bx1[i], span_x)
        y0, y1 = _pad(by0[i], by1[i], span_y)
        # add_artist, not add_patch: the limits are set below from the boxes, and
        # add_patch's update of the data limits took most of the time of a painting
        # of 1,500 boxes. The boxes are the axes' patches all the same.
        ax.add_artist(Rectangle((x0, y0), x1 - x0, y1 - y0, facecolor=colours[i],
                                alpha=alpha, edgecolor=edge, linewidth=width,
                                hatch="//" if missing[i] else None, zorder=1))
    present = ~(np.isnan(xs) | np.isnan(ys))
    idx = np.flatnonzero(present)
    if len(idx) > max_points:
        idx = np.sort(rng.choice(idx, max_points, replace=False))
    size = float(np.clip(4000 / max(len(idx), 1), 1.5, 18))
    ax.scatter(xs[idx], ys[idx], s=size, c=_INK, alpha=0.55 if len(idx) > 2000 else 0.8,
               linewidths=0, zorder=2)
    ax.set_xlim(x_lo - 0.02 * span_x, x_hi + 0.02 * span_x)
    ax.set_ylim(y_lo - 0.02 * span_y, y_hi + 0.02 * span_y)
    _ticks(ax, original[qx], original[qy])
    ax.set_xlabel(str(qx))
    ax.set_ylabel(str(qy))
    ax.set_title(title or f"Mondrian partition of {qx} \u00d7 {qy}: {len(boxes):,} boxes over "
                          f"{int(present.sum()):,} points")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def _boxes(pairs, qx, qy, labels_x, bounds_x, labels_y, bounds_y) -> pd.DataFrame:
    """One box per distinct pair of published values; none where an axis has only missing values."""
    ix = pd.Index(labels_x, dtype=object).get_indexer(pairs[qx])
    iy = pd.Index(labels_y, dtype=object).get_indexer(pairs[qy])
    (x0, x1, mx), (y0, y1, my) = bounds_x, bounds_y
    boxes = pd.DataFrame({"x0": x0[ix], "x1": x1[ix], "y0": y0[iy], "y1": y1[iy],
                          "missing": mx[ix] | my[iy]})
    return boxes[boxes["x0"].notna() & boxes["y0"].notna()].reset_index(drop=True)


def _extent(values, boxes, axis: str) -> tuple:
    """The smallest and largest of ``values`` and of the boxes' edges on ``axis`` ("x" or "y"),
    and the span between them (1 when they meet)."""
    lo = np.nanmin(values) if np.isfinite(values).any() else 0.0
    hi = np.nanmax(values) if np.isfinite(values).any() else 1.0
    if len(boxes):
        lo, hi = min(lo, boxes[axis + "0"].min()), max(hi, boxes[axis + "1"].max())
    return lo, hi, float(hi - lo) if hi > lo else 1.0


def _pad(lo, hi, span):
    """Give single-value classes a visible width (0.6% of the axis)."""
    half = 0.003 * span
    return (lo - half, hi + half) if hi - lo < 2 * half else (lo, hi)


def _ticks(ax, col_x: pd.Series, col_y: pd.Series):
    for col, axis in ((col_x, ax.xaxis), (col_y, ax.yaxis)):
        kind = detect_kind(col)
        if kind.temporal:
            locator = AutoDateLocator()
            axis.set_major_locator(locator)
            axis.set_major_formatter(AutoDateFormatter(locator))
        names = kind.tick_labels(col)
        if names is not None:
            axis.set_ticks(range(len(names)), names)
