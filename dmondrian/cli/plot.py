"""``dmondrian plot``: class-size histogram or two-QI partition painting, to PNG."""

from __future__ import annotations

import argparse
import os

from ..options import K
from ._common import EXIT_OK, UsageError, add_common, option_type
from ._inputs import check_columns, read
from ._types import split_names

NAME = "plot"
HELP = "class-size histogram or 2-QI partition painting to PNG"
DESCRIPTION = ("Draw a released table: the histogram of equivalence-class sizes, or the "
               "painting of its classes over two quasi-identifiers.")
EXAMPLES = """\
examples:
  dmondrian plot histogram released.csv --qi age,zip,sex -o sizes.png
  dmondrian plot painting released.csv --qi age,zip --original people.csv -o painting.png"""


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags of ``dmondrian plot`` to its parser ``p``."""
    p.add_argument("kind", choices=("histogram", "painting"), metavar="KIND",
                   help="histogram or painting")
    p.add_argument("table", metavar="TABLE")
    add_common(p)
    p.add_argument("-o", "--output", required=True, metavar="PNG")
    p.add_argument("--k", type=option_type(K), help="mark k on the histogram")
    p.add_argument("--original", metavar="ORIGINAL",
                   help="painting: the original table (row-aligned), drawn under the classes")
    p.add_argument("--overwrite", action="store_true", help="replace an existing PNG")


def run(args: argparse.Namespace) -> int:
    """Draw the histogram or the painting to a PNG (exit status 0)."""
    qis = split_names(args.qi)
    # Refuse a painting it cannot draw and a non-PNG output, before reading anything.
    if args.kind == "painting" and len(qis) != 2:
        raise UsageError(f"the painting shows two quasi-identifiers: --qi must name 2 "
                         f"columns, got {len(qis)}")
    if args.kind == "painting" and args.original is None:
        raise UsageError("the painting draws the original points under the classes: give "
                         "--original ORIGINAL (row-aligned with TABLE)")
    if not args.output.lower().endswith(".png"):
        raise UsageError(f"plot output {args.output!r} must end in .png")
    drawing = plot_module()
    table = read(args.table, args)
    check_columns(table, qis, "--qi", args.table)
    if args.kind == "histogram":
        fig = figure_of(drawing.class_size_histogram(table, qis, k=args.k))
    else:
        original = read(args.original, args, role="original")
        check_columns(original, qis, "--qi", args.original)
        if len(original) != len(table):
            raise UsageError(f"--original has {len(original):,} rows and TABLE {len(table):,}: "
                             "the painting needs the release row-aligned with its original")
        fig = figure_of(drawing.partition_painting(original, table, qis))
    save_png(fig, args.output, overwrite=args.overwrite)
    print(f"plot {args.output}")
    return EXIT_OK


def plot_module():
    """:mod:`dmondrian.plot`, with matplotlib drawing off-screen unless told otherwise.

    Returns
    -------
    module
    """
    # A command line has no window to draw in: without this, matplotlib may
    # pick an interactive backend and fail on a headless machine.
    os.environ.setdefault("MPLBACKEND", "Agg")
    from .. import plot

    return plot


def figure_of(obj):
    """The Figure of what a plot helper returned: a Figure, an Axes or a (Figure, Axes) pair.

    Parameters
    ----------
    obj : Figure, Axes or tuple

    Returns
    -------
    matplotlib.figure.Figure
    """
    obj = obj[0] if isinstance(obj, tuple) else obj
    return obj if hasattr(obj, "savefig") else obj.get_figure()


def save_png(fig, url: str, *, overwrite: bool) -> None:
    """Save ``fig`` as a PNG at ``url``, atomically.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    url : str
        Path or fsspec URL ending in ``.png``.
    overwrite : bool
        Replace an existing file.
    """
    from ..io.staging import atomic_output

    with atomic_output(url, overwrite=overwrite) as (fs, tmp), fs.open(tmp, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120, bbox_inches="tight")
