"""The guards on the columns released as is, on UCI Adult, against the partition.

Times, in one process, ``dmondrian.anonymize(adult, qis, 10)`` on all 15
columns and on the 8 QI columns only (wall and CPU milliseconds, median of
``--repeat`` warm calls), the whole call split into its steps (CPU
milliseconds of each, medians over the same calls: the prologue, i.e. the
options, the sensitive and entity columns and the kernel's rules; the
encoding of the QIs; the guards; the partition; the publishing), the kernel's
partition alone, and the guards alone (the identifying-column and person-key
checks of the columns released as is: ``person_keys.release_guard``, or on
an older build the two checks it replaced), plus the first call after the
import. The steps are timed by wrapping the functions ``dmondrian.local``
calls (``encode_table``, ``release_guard``, ``partition``, ``publish``); the
prologue is the rest of the call; ``guards_over_partition`` is the ratio of
those two steps (issue 40's target: at most 0.2). Run it under each build side by side
(``PYTHONPATH=<worktree>``), alternating, on the same machine.

``--qis literature`` (the default) takes
:data:`dmondrian.datasets.ADULT_QUASI_IDENTIFIERS` (``education-num`` a QI,
``education`` released as is); ``--qis education`` the set with ``education``
as a QI and ``education-num`` released as is, on which the person-key rule
needs the shuffled baseline for ``capital-gain``.

    python benchmarks/guards.py [--repeat 5] [--qis literature|education] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

EDUCATION_QIS = ["age", "sex", "race", "education", "marital-status", "occupation", "workclass",
                 "native-country"]
#: The functions of dmondrian.local whose CPU time is each a step of the split.
STEPS = {"encode": "encode_table", "guards": "release_guard", "partition": "partition",
         "publish": "publish"}


def _median_ms(fn, repeat: int) -> dict:
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return {"wall_ms": round(statistics.median(wall) * 1e3, 2),
            "cpu_ms": round(statistics.median(cpu) * 1e3, 2)}


def _split_ms(call, local, repeat: int) -> dict:
    """CPU milliseconds of each step of ``call()``, medians of ``repeat`` calls."""
    spent = {}

    def timed(step, fn):
        def wrapper(*args, **kwargs):
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[step] = spent.get(step, 0.0) + time.process_time() - t
        return wrapper

    originals = {name: getattr(local, name) for name in STEPS.values() if hasattr(local, name)}
    for step, name in STEPS.items():
        if name in originals:
            setattr(local, name, timed(step, originals[name]))
    rounds = []
    try:
        for _ in range(repeat):
            spent.clear()
            t = time.process_time()
            call()
            whole = time.process_time() - t
            rounds.append({"prologue": whole - sum(spent.values()), **spent, "whole": whole})
    finally:
        for name, fn in originals.items():
            setattr(local, name, fn)
    return {step: round(statistics.median(r.get(step, 0.0) for r in rounds) * 1e3, 2)
            for step in ["prologue", *STEPS, "whole"]}


def _guards(df, as_is, encoded, qis):
    """The guards alone, as this build runs them."""
    try:
        from dmondrian.release.person_keys import release_guard
    except ImportError:  # builds before release_guard: the two checks it replaced
        from dmondrian.release.identifiers import candidates, identifying_columns
        from dmondrian.release.person_keys import person_key_columns

        def both():
            identifying_columns(df, as_is)
            person_key_columns(df, candidates(df.dtypes, df.index, as_is), qis)
        return both
    keys = [q.keys for q in encoded]
    return lambda: release_guard(df, as_is, qis, (), keys)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--qis", choices=["literature", "education"], default="literature")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    import dmondrian
    from dmondrian import local
    from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS, load_adult
    from dmondrian.encoding.validation import check_options
    from dmondrian.release.identifiers import released_as_is

    qis = ADULT_QUASI_IDENTIFIERS if args.qis == "literature" else EDUCATION_QIS
    warnings.simplefilter("ignore")
    df = load_adult(download=False)
    t = time.perf_counter()
    dmondrian.anonymize(df, qis, 10)
    first = time.perf_counter() - t
    opts = check_options(df.columns, qis, 10)
    encoded = local.encode_table(df, qis)
    rules = local.kernel_rules(encoded, mode=opts.mode, objective=opts.objective,
                               max_depth=opts.max_depth,
                               privacy=local.kernel_privacy(opts.constraints))
    qi_only = df[qis]
    out = {"qis": args.qis,
           "first_call_s": round(first, 3),
           "import_and_first_call_s": round(time.perf_counter() - started, 3),
           "whole_call": _median_ms(lambda: dmondrian.anonymize(df, qis, 10), args.repeat),
           "qi_columns_only": _median_ms(lambda: dmondrian.anonymize(qi_only, qis, 10),
                                         args.repeat),
           "whole_call_steps_cpu_ms": _split_ms(lambda: dmondrian.anonymize(df, qis, 10),
                                                local, 2 * args.repeat),
           "partition": _median_ms(lambda: local.partition(encoded, rules), 2 * args.repeat),
           "guards": _median_ms(_guards(df, released_as_is(df.columns, opts), encoded, qis),
                                2 * args.repeat)}
    steps = out["whole_call_steps_cpu_ms"]
    out["guards_over_partition"] = round(steps["guards"] / steps["partition"], 3)
    print(json.dumps(out))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
