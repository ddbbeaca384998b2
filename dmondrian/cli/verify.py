"""``dmondrian verify``: exit 0 when a table is k-anonymous (and l-diverse) and no column
released as is singles out rows (unless ``--allow-unique`` names it), 1 if not."""

from __future__ import annotations

import argparse

from ..options import ANONYMIZE, K
from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_common,
    add_option,
    option_type,
    print_result,
    require_sensitive,
)
from ._inputs import metrics_api, read_release
from ._types import split_names

NAME = "verify"
HELP = "check that a table is k-anonymous (and l-diverse)"
DESCRIPTION = ("Exit 0 when the table is k-anonymous (and l-diverse), 1 listing the "
               "violations when it is not.")
EXAMPLES = """\
examples:
  dmondrian verify released.csv --qi age,zip,sex --k 10
  dmondrian verify released.parquet --qi age,zip --k 5 --l 2 --sensitive diagnosis
  dmondrian verify released.parquet --qi age,zip --k 5 --l 2 --l-kind recursive --c 3 \
      --sensitive diagnosis"""


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags of ``dmondrian verify`` to its parser ``p``."""
    p.add_argument("table", metavar="TABLE")
    p.add_argument("-k", "--k", type=option_type(K), required=True)
    add_common(p)
    add_option(p, ANONYMIZE["l"], also="needs --sensitive")
    add_option(p, ANONYMIZE["l_kind"])
    add_option(p, ANONYMIZE["c"], metavar="C", also="with --l-kind recursive")
    add_option(p, ANONYMIZE["t"], also="needs --sensitive")
    add_option(p, ANONYMIZE["sensitive"], metavar="COL")
    add_option(p, ANONYMIZE["allow_unique"], action="append", metavar="COLS",
               also="comma-separated (repeatable); any other fails the verification")
    p.add_argument("--json", action="store_true", help="machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    """Print the verdict and the violations: exit status 0 when the table holds, 1 when it
    has violations or a column singling out rows."""
    qis = split_names(args.qi)
    sensitive = [args.sensitive] if args.sensitive else []
    require_sensitive(args, sensitive)
    _, verify = metrics_api()
    table = read_release(args.table, args, qis, sensitive)
    result = verify(table, qis, k=args.k, sensitive=args.sensitive, l=args.l, t=args.t,
                    l_kind=args.l_kind, c=args.c, allow_unique=split_names(args.allow_unique))
    print_result(result, args.json)
    return EXIT_OK if result.ok else EXIT_FAILED
