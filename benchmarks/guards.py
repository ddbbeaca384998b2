"""The guards on the columns released as is, on UCI Adult, against the partition.

Times, in one process, ``dmondrian.anonymize(adult, qis, 10)`` on all 15
columns and on the 8 QI columns only (wall and CPU milliseconds, median of
``--repeat`` warm calls), the kernel's partition alone, and the guards alone
(the identifying-column and person-key checks of the columns released as
is: ``person_keys.release_guard``, or on an older build the two checks it
replaced), plus the first call after the import. Run it under each build
side by side (``PYTHONPATH=<worktree>``), alternating, on the same machine.

    python benchmarks/guards.py [--repeat 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

QIS = ["age", "sex", "race", "education", "marital-status", "occupation", "workclass",
       "native-country"]


def _median_ms(fn, repeat: int) -> dict:
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return {"wall_ms": round(statistics.median(wall) * 1e3, 2),
            "cpu_ms": round(statistics.median(cpu) * 1e3, 2)}


def _guards(df, as_is, encoded):
    """The guards alone, as this build runs them."""
    try:
        from dmondrian.release.person_keys import release_guard
    except ImportError:  # builds before release_guard: the two checks it replaced
        from dmondrian.release.identifiers import candidates, identifying_columns
        from dmondrian.release.person_keys import person_key_columns

        def both():
            identifying_columns(df, as_is)
            person_key_columns(df, candidates(df.dtypes, df.index, as_is), QIS)
        return both
    keys = [q.keys for q in encoded]
    return lambda: release_guard(df, as_is, QIS, (), keys)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    import dmondrian
    from dmondrian import local
    from dmondrian.datasets import load_adult
    from dmondrian.encoding.validation import check_options
    from dmondrian.release.identifiers import released_as_is

    warnings.simplefilter("ignore")
    df = load_adult(download=False)
    t = time.perf_counter()
    dmondrian.anonymize(df, QIS, 10)
    first = time.perf_counter() - t
    opts = check_options(df.columns, QIS, 10)
    encoded = local.encode_table(df, QIS)
    rules = local.kernel_rules(encoded, mode=opts.mode, objective=opts.objective,
                               max_depth=opts.max_depth,
                               privacy=local.kernel_privacy(opts.constraints))
    out = {"first_call_s": round(first, 3),
           "import_and_first_call_s": round(time.perf_counter() - started, 3),
           "whole_call": _median_ms(lambda: dmondrian.anonymize(df, QIS, 10), args.repeat),
           "qi_columns_only": _median_ms(lambda: dmondrian.anonymize(df[QIS], QIS, 10),
                                         args.repeat),
           "partition": _median_ms(lambda: local.partition(encoded, rules), 2 * args.repeat),
           "guards": _median_ms(_guards(df, released_as_is(df.columns, opts), encoded),
                                2 * args.repeat)}
    print(json.dumps(out))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
