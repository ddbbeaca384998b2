"""The person-key rule (dmondrian.release.person_keys) on real and generated tables.

For every column of each table that the rule may look at (released as is,
integers or text), prints its measured share of further rows bringing a new
QI combination, its distinct values, and whether the rule fires; writes the
table as JSON (by default benchmarks/results/person_keys.json). Tables: UCI Adult (QIs age, sex,
race, education, marital-status; $DMONDRIAN_ADULT_DIR), the census
generator (QIs age, zip, sex, education) and the event generator (QIs age,
region, device), which should fire on user_id and on nothing else.

    python benchmarks/person_keys.py [--census-rows N] [--event-users N] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dmondrian.datasets import load_adult
from dmondrian.release.identifiers import candidates
from dmondrian.release.person_keys import (
    MIN_REPEATED,
    MIN_VALUES,
    NEW_TUPLE_RATIO,
    new_tuple_share,
    person_key_columns,
)
from dmondrian.synthetic import make_census
from dmondrian.synthetic_events import EVENT_QUASI_IDENTIFIERS, make_events

RESULTS = Path(__file__).parent / "results"


def measure(name, df, qis):
    rows = []
    cols = candidates(df.dtypes, [c for c in df.columns if c not in qis])
    t = time.perf_counter()
    fired = {f[0] for f in person_key_columns(df, cols, qis)}
    seconds = time.perf_counter() - t
    for c in cols:
        share, shuffled, distinct, repeated = new_tuple_share(df, c, qis)
        rows.append({"table": name, "rows": len(df), "column": str(c),
                     "new_tuple_share": None if share != share else round(share, 3),
                     "shuffled_share": None if shuffled != shuffled else round(shuffled, 3),
                     "distinct": distinct, "repeated": repeated, "fires": c in fired})
    return rows, seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--census-rows", type=int, default=1_000_000)
    ap.add_argument("--event-users", type=int, default=50_000)
    ap.add_argument("--out", type=Path, default=RESULTS / "person_keys.json")
    args = ap.parse_args(argv)
    tables = [
        ("adult", load_adult(download=False), ["age", "sex", "race", "education",
                                               "marital-status"]),
        ("census", make_census(args.census_rows, seed=0), ["age", "zip", "sex", "education"]),
        ("census-few-qis", make_census(args.census_rows, seed=0), ["sex", "education"]),
        ("events", make_events(args.event_users, seed=0), EVENT_QUASI_IDENTIFIERS),
    ]
    out, timings = [], {}
    for name, df, qis in tables:
        rows, seconds = measure(name, df, qis)
        out.extend(rows)
        timings[name] = round(seconds, 3)
    print(f"rule: distinct >= {MIN_VALUES}, repeated >= {MIN_REPEATED}, "
          f"new-tuple share < {NEW_TUPLE_RATIO} x the shuffled one")
    print(f"{'table':<15} {'column':<16} {'distinct':>10} {'repeated':>9} {'new share':>10} "
          f"{'shuffled':>9} fires")
    for r in out:
        share = "-" if r["new_tuple_share"] is None else f"{r['new_tuple_share']:.3f}"
        shuffled = "-" if r["shuffled_share"] is None else f"{r['shuffled_share']:.3f}"
        print(f"{r['table']:<15} {r['column']:<16} {r['distinct']:>10,} {r['repeated']:>9,} "
              f"{share:>10} {shuffled:>9} {'YES' if r['fires'] else 'no'}")
    print("seconds of the rule per table:", timings)
    path = args.out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"columns": out, "seconds": timings}, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
