"""``dmondrian sweep``: information loss as k grows (a table, and optionally a plot)."""

from __future__ import annotations

import argparse

from ..options import ANONYMIZE
from ._common import EXIT_OK, UsageError, add_common, add_option, table_options
from ._inputs import check_columns, load_hierarchies, read
from ._types import k_list, split_names
from .plot import figure_of, plot_module, save_png

DEFAULT_KS = [2, 5, 10, 50, 100]

NAME = "sweep"
HELP = "information loss as k grows"
DESCRIPTION = "Anonymize INPUT at several k and print k, classes, NCP and discernibility."
EXAMPLES = """\
example:
  dmondrian sweep people.csv --qi age,zip,sex --k 2,5,10,50,100 --plot sweep.png"""

#: How the table's columns are printed.
FORMATTERS = {"ncp": "{:.4f}".format, "c_avg": "{:.3f}".format,
              "discernibility": "{:,}".format, "classes": "{:,}".format}


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags of ``dmondrian sweep`` to its parser ``p``."""
    p.add_argument("input", metavar="INPUT")
    p.add_argument("-k", "--k", type=k_list, default=DEFAULT_KS, metavar="K,K,...")
    add_common(p)
    add_option(p, ANONYMIZE["mode"])
    add_option(p, ANONYMIZE["objective"])
    p.add_argument("--hierarchy", action="append", metavar="COL=FILE")
    p.add_argument("--plot", metavar="PNG", help="also draw the curve to this PNG")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    """Print the information-loss curve over k, and draw it with ``--plot`` (exit status 0)."""
    qis = split_names(args.qi)
    if args.plot and not args.plot.lower().endswith(".png"):
        raise UsageError(f"--plot {args.plot!r} must end in .png")
    plot = plot_module()
    df = read(args.input, args)
    check_columns(df, qis, "--qi", args.input)
    hierarchies, _ = load_hierarchies(args.hierarchy)
    ks = sorted(set(args.k))  # each at most the table's rows
    if ks[-1] > len(df):
        from ..errors import InfeasibleError

        raise InfeasibleError(f"--k {ks[-1]} is larger than the table's {len(df):,} rows")
    options = {**table_options(args, ANONYMIZE), "hierarchies": hierarchies or None}
    table = plot.k_sweep_table(df, qis, ks, **options)
    if args.json:
        print(table.to_json(orient="records", indent=2))
    else:
        print(table.to_string(index=False, formatters=FORMATTERS))
    if args.plot:
        save_png(figure_of(plot.k_sweep(df, qis, ks, **options)), args.plot, overwrite=True)
        print(f"plot {args.plot}")
    return EXIT_OK
