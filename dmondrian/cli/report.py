"""``dmondrian report``: information loss and re-identification risk of a release."""

from __future__ import annotations

import argparse

from ..options import ANONYMIZE, K
from ._common import EXIT_OK, add_common, add_option, option_type, print_result
from ._inputs import check_columns, load_hierarchies, metrics_api, read_original, read_release
from ._types import split_names

NAME = "report"
HELP = "information loss and re-identification risk of a released table"
DESCRIPTION = "Print the metrics and risk of a released table."
EXAMPLES = """\
examples:
  dmondrian report released.csv --qi age,zip,sex --sensitive income
  dmondrian report released.parquet --qi age,zip --original people.parquet --json"""


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags of ``dmondrian report`` to its parser ``p``."""
    p.add_argument("table", metavar="TABLE")
    add_common(p)
    add_option(p, ANONYMIZE["sensitive"], metavar="COL",
               also="the report measures its l-diversity and t-closeness")
    p.add_argument("--original", metavar="ORIGINAL",
                   help="the table before anonymization (for information loss)")
    p.add_argument("-k", "--k", type=option_type(K), help="the k the release was made for")
    p.add_argument("--hierarchy", action="append", metavar="COL=FILE",
                   help="hierarchy of a nominal QI, for its information loss (repeatable)")
    add_option(p, ANONYMIZE["allow_unique"], action="append", metavar="COLS",
               also="comma-separated (repeatable); others are listed as a risk")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    """Print the metrics and risk of the released table (exit status 0)."""
    qis = split_names(args.qi)
    sensitive = [args.sensitive] if args.sensitive else []
    report, _ = metrics_api()
    hierarchies, _ = load_hierarchies(args.hierarchy)
    table = read_release(args.table, args, qis, sensitive)
    original = None
    if args.original is not None:
        original = read_original(args.original, args, args.table, [*qis, *sensitive])
        check_columns(original, qis, "--qi", args.original)
    print_result(report(table, qis, original=original, sensitive=args.sensitive, k=args.k,
                        hierarchies=hierarchies or None,
                        allow_unique=split_names(args.allow_unique)), args.json)
    return EXIT_OK
