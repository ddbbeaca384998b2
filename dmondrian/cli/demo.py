"""``dmondrian demo``: generate a census-like table, anonymize, verify and report it."""

from __future__ import annotations

import argparse
import time

from ..options import K
from . import _engines
from ._common import EXIT_FAILED, EXIT_OK, add_debug, option_type
from ._inputs import metrics_api
from ._types import nonnegative_int, positive_int

NAME = "demo"
HELP = "anonymize a generated census table end to end"
DESCRIPTION = """\
Generate a census-like table, anonymize it (on an embedded Dask
LocalCluster when the Dask engine is installed), verify it and print
the report."""
EXAMPLES = """\
examples:
  dmondrian demo
  dmondrian demo --rows 100000 --k 25 --output released.parquet"""

#: The embedded cluster's workers, and the partitions the table is cut into
#: (more than the workers, so the distributed cuts really run).
DEMO_WORKERS, DEMO_PARTITIONS = 2, 4


def arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags of ``dmondrian demo`` to its parser ``p``."""
    p.add_argument("--rows", type=positive_int("--rows"), default=20_000)
    p.add_argument("-k", "--k", type=option_type(K), default=10)
    p.add_argument("--seed", type=nonnegative_int("--seed"), default=0)
    p.add_argument("--output", metavar="OUTPUT", help="also write the released table here")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--local", action="store_true",
                   help="use the in-memory engine even when the Dask engine is installed")
    add_debug(p)


def run(args: argparse.Namespace) -> int:
    """Generate, anonymize, verify and report a census-like table: exit status 0 when the
    release verifies, 1 otherwise."""
    from .. import synthetic

    report, verify = metrics_api()
    qis = list(synthetic.CENSUS_QUASI_IDENTIFIERS)
    df = _generate(args)
    print(f"anonymizing with k={args.k} over {', '.join(qis)}")
    started = time.perf_counter()
    released, engine = _anonymize(df, qis, args.k, args.local)
    print(f"  {engine} engine, {time.perf_counter() - started:.2f}s")
    result = verify(released, qis, k=args.k)
    print(repr(result))
    if not result.ok:
        return EXIT_FAILED
    print(f"verified: every class has at least {args.k} rows\n")
    print(repr(report(released, qis, original=df, sensitive=synthetic.CENSUS_SENSITIVE, k=args.k)))
    if args.output:
        _write(released, args)
    return EXIT_OK


def _generate(args):
    from .. import synthetic

    print(f"generating a census-like table of {args.rows:,} rows (seed {args.seed})")
    df = synthetic.make_census(args.rows, seed=args.seed)
    if args.k > len(df):
        from ..errors import InfeasibleError

        raise InfeasibleError(f"--k {args.k} is larger than the {len(df):,} generated rows")
    return df


def _anonymize(df, qis, k, local: bool):
    """The one place the demo chooses its engine.

    The Dask engine on an embedded LocalCluster, with regions of at most a quarter of the table,
    when it is installed and not refused with ``--local``; the in-memory engine otherwise.
    """
    # The generated table's record id is a direct identifier: it is not released.
    if local or not _engines.has_dask_engine():
        return (_engines.local_anonymize()(df, qis, k, identifiers=["person_id"]),
                "local (in memory)")
    import dask.dataframe as dd

    with _engines.local_client(DEMO_WORKERS) as client:
        ddf = dd.from_pandas(df, npartitions=DEMO_PARTITIONS)
        released = _engines.dask_engine().anonymize(
            ddf, qis, k, client=client, leaf_rows=max(k, len(df) // DEMO_PARTITIONS),
            progress=False, identifiers=["person_id"]).compute()
    # Rows come back grouped by region with their input index: restore the order.
    return released.sort_index(), f"Dask (embedded LocalCluster, {DEMO_WORKERS} workers)"


def _write(released, args) -> None:
    from ..io import files as io

    io.write_table(released, args.output, overwrite=args.overwrite)
    print(f"wrote {args.output}")
