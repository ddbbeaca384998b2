"""``dmondrian report``: information loss and re-identification risk of a release."""

from __future__ import annotations

import argparse
import json

from ..options import ANONYMIZE, K
from ._common import EXIT_OK, FORMATTER, add_common, add_option, option_type
from ._inputs import check_columns, load_hierarchies, metrics_api, read_original, read_release
from ._types import split_names

EXAMPLES = """\
examples:
  dmondrian report released.csv --qi age,zip,sex --sensitive income
  dmondrian report released.parquet --qi age,zip --original people.parquet --json"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``report`` sub-command.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The ``dmondrian`` parser's sub-commands.

    Returns
    -------
    argparse.ArgumentParser
    """
    p = subparsers.add_parser(
        "report", help="information loss and re-identification risk of a released table",
        formatter_class=FORMATTER, description="Print the metrics and risk of a released table.",
        epilog=EXAMPLES)
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
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``dmondrian report``: print the metrics and risk of a released table.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit status, 0.
    """
    qis = split_names(args.qi)
    report, _ = metrics_api()
    hierarchies, _ = load_hierarchies(args.hierarchy)
    table = read_release(args.table, args, qis)
    check_columns(table, qis, "--qi", args.table)
    check_columns(table, [args.sensitive] if args.sensitive else [], "--sensitive", args.table)
    original = None
    if args.original is not None:
        original = read_original(args.original, args, args.table,
                                 [*qis, *([args.sensitive] if args.sensitive else [])])
        check_columns(original, qis, "--qi", args.original)
    rep = report(table, qis, original=original, sensitive=args.sensitive, k=args.k,
                 hierarchies=hierarchies or None, allow_unique=split_names(args.allow_unique))
    print(json.dumps(rep.to_dict(), indent=2, default=str) if args.json else repr(rep))
    return EXIT_OK
