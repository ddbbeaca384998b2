"""Plots: files are valid PNGs and the figures hold the expected bars, lines and boxes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.image import imread
from matplotlib.patches import Rectangle

import dmondrian
from dmondrian import plot
from dmondrian.errors import ParameterError, UnsupportedDtypeError
from dmondrian.metrics import size_counts

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def saved_png(fig: Figure, path) -> np.ndarray:
    fig.savefig(path, dpi=60)
    assert path.read_bytes()[:8] == PNG_MAGIC
    image = imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    return image


def bars(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def grid(n=400, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "hours": rng.integers(1, 99, n),
                         "income": rng.choice(["<=50K", ">50K"], n)})


def test_histogram_one_bar_per_size(tmp_path):
    df = grid()
    rel = dmondrian.anonymize(df, ["age", "hours"], k=7)
    counts = size_counts(rel, ["age", "hours"])
    fig = plot.class_size_histogram(rel, ["age", "hours"], k=7)
    ax = fig.axes[0]
    heights = {round(p.get_x() + p.get_width() / 2): p.get_height() for p in bars(ax)}
    assert heights == counts.to_dict()
    assert [line.get_xdata()[0] for line in ax.lines] == [6.5]  # the k threshold
    saved_png(fig, tmp_path / "hist.png")


def test_histogram_buckets_when_sizes_are_many(tmp_path):
    sizes = np.arange(1, 121)  # 120 distinct class sizes
    t = pd.DataFrame({"q": np.repeat([f"c{i}" for i in sizes], sizes)})
    fig = plot.class_size_histogram(t, ["q"])
    patches = bars(fig.axes[0])
    assert 10 <= len(patches) <= 31
    assert sum(p.get_height() for p in patches) == 120
    # buckets tile the sizes without overlap
    edges = sorted((p.get_x(), p.get_x() + p.get_width()) for p in patches)
    assert all(a[1] <= b[0] + 1e-9 for a, b in zip(edges, edges[1:], strict=False))
    fig = plot.class_size_histogram(t, ["q"], bins=[1, 10, 100])
    assert [p.get_height() for p in bars(fig.axes[0])] == [9, 90, 21]
    saved_png(fig, tmp_path / "buckets.png")


def test_k_sweep_plots_what_it_measured(tmp_path):
    df = grid(300)
    ks = [2, 5, 10, 25]
    fig = plot.k_sweep(df, ["age", "hours"], ks)
    table = plot.k_sweep_table(df, ["age", "hours"], ks)
    top, bottom = fig.axes
    (ncp_line,), (dm_line,) = top.lines, bottom.lines
    assert list(ncp_line.get_xdata()) == ks
    assert np.allclose(ncp_line.get_ydata(), table["ncp"])
    assert list(dm_line.get_ydata()) == list(table["discernibility"])
    # More k, coarser classes: information loss grows with k.
    assert table["ncp"].is_monotonic_increasing
    assert table["discernibility"].is_monotonic_increasing
    assert (table["classes"] <= len(df) // table["k"]).all()
    saved_png(fig, tmp_path / "sweep.png")


def test_painting_draws_one_box_per_class_around_its_points(tmp_path):
    df = grid(500)
    rel = dmondrian.anonymize(df, ["age", "hours"], k=10)
    fig = plot.partition_painting(df, rel, ["age", "hours"])
    boxes = bars(fig.axes[0])
    assert len(boxes) == len(rel[["age", "hours"]].drop_duplicates())
    assert len({to_hex(b.get_facecolor(), keep_alpha=False) for b in boxes}) == len(boxes)
    # Strict Mondrian tiles the plane: each point lies in exactly one box.
    pts = df[["age", "hours"]].to_numpy(dtype=float)
    inside = np.zeros(len(pts), dtype=int)
    for b in boxes:
        x0, y0 = b.get_xy()
        inside += ((pts[:, 0] >= x0) & (pts[:, 0] <= x0 + b.get_width())
                   & (pts[:, 1] >= y0) & (pts[:, 1] <= y0 + b.get_height()))
    assert (inside == 1).all()
    (scatter,) = fig.axes[0].collections
    assert len(scatter.get_offsets()) == len(df)
    saved_png(fig, tmp_path / "painting.png")
    mondrian = plot.partition_painting(df, rel, ["age", "hours"], palette="mondrian")
    colours = {to_hex(b.get_facecolor(), keep_alpha=False) for b in bars(mondrian.axes[0])}
    assert colours <= set(plot.MONDRIAN)
    saved_png(mondrian, tmp_path / "mondrian.png")


def test_painting_datetime_ordinal_and_missing_values(tmp_path):
    rng = np.random.default_rng(2)
    n = 120
    df = pd.DataFrame({
        "when": pd.Timestamp("2022-01-01") + pd.to_timedelta(rng.integers(0, 90, n), "D"),
        "edu": pd.Categorical(rng.choice(["HS", "BSc", "MSc", "PhD"], n),
                              categories=["HS", "BSc", "MSc", "PhD"], ordered=True),
        "w": rng.normal(size=n),
    })
    df.loc[:14, "w"] = np.nan  # 15 missing: some classes publish "... or <NA>" or "<NA>"
    rel = dmondrian.anonymize(df, ["when", "edu", "w"], k=6)
    fig = plot.partition_painting(df, rel, ["when", "edu"])
    ax = fig.axes[0]
    assert len(bars(ax)) == len(rel[["when", "edu"]].drop_duplicates())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["HS", "BSc", "MSc", "PhD"]
    saved_png(fig, tmp_path / "dates.png")
    fig = plot.partition_painting(df, rel, ["w", "edu"])
    labels = rel[["w", "edu"]].astype(str).drop_duplicates()
    drawable = labels[labels["w"] != "<NA>"]
    assert len(bars(fig.axes[0])) == len(drawable)
    hatched = [b for b in bars(fig.axes[0]) if b.get_hatch()]
    assert len(hatched) == drawable["w"].str.endswith("or <NA>").sum()
    saved_png(fig, tmp_path / "missing.png")


def test_painting_rejects_what_it_cannot_draw():
    df = grid(50)
    rel = dmondrian.anonymize(df, ["age", "income"], k=5)
    with pytest.raises(UnsupportedDtypeError) as e:
        plot.partition_painting(df, rel, ["age", "income"])
    assert e.value.column == "income"
    with pytest.raises(ParameterError):
        plot.partition_painting(df, rel, ["age"])
    with pytest.raises(ParameterError):
        plot.partition_painting(df, rel.reset_index(drop=True).iloc[::-1], ["age", "hours"])
    with pytest.raises(ParameterError):
        plot.partition_painting(df, rel, ["age", "hours"], palette="rainbow")
    with pytest.raises(ParameterError):
        plot.k_sweep(df, ["age"], [])


def test_plots_never_touch_pyplot():
    code = (
        "import sys, numpy as np, pandas as pd\n"
        "from dmondrian import plot\n"
        "t = pd.DataFrame({'x': ['[1, 2]'] * 3 + ['3'] * 2, 'y': ['5'] * 5})\n"
        "o = pd.DataFrame({'x': [1, 2, 2, 3, 3], 'y': [5] * 5})\n"
        "plot.class_size_histogram(t, ['x', 'y'])\n"
        "plot.partition_painting(o, t, ['x', 'y'])\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
