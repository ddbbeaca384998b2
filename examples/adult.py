"""Anonymize the UCI Adult table at several k and print the report of each release.

Run: DMONDRIAN_ADULT_DIR=/path/to/adult python examples/adult.py [k ...]

The 30,162 complete records, the usual quasi-identifiers of the k-anonymity
literature (LeFevre et al. 2006) with the generalization hierarchies of the
categorical ones, and income as the sensitive attribute.
"""

import sys
import time

import dmondrian
from dmondrian.datasets import (
    ADULT_QUASI_IDENTIFIERS,
    ADULT_SENSITIVE,
    load_adult,
    load_adult_hierarchies,
)

ks = [int(a) for a in sys.argv[1:]] or [5, 10, 50, 100]

df = load_adult()
qis = list(ADULT_QUASI_IDENTIFIERS)
hierarchies = {col: h for col, h in load_adult_hierarchies().items() if col in qis}
print(f"Adult: {len(df):,} records; quasi-identifiers: {', '.join(qis)}")
print(f"hierarchies for: {', '.join(hierarchies)}\n")

for k in ks:
    started = time.perf_counter()
    released = dmondrian.anonymize(df, qis, k, hierarchies=hierarchies)
    seconds = time.perf_counter() - started
    sizes = released.groupby(qis, observed=True).size()
    assert sizes.min() >= k, f"a class of {sizes.min()} rows at k={k}"
    assert released[ADULT_SENSITIVE].equals(df[ADULT_SENSITIVE])
    print(f"=== k = {k}: {len(sizes):,} classes, smallest {sizes.min()}, {seconds:.2f}s")
    print(dmondrian.report(released, qis, original=df, sensitive=ADULT_SENSITIVE, k=k,
                           hierarchies=hierarchies))
    print()
