"""Quickstart: k-anonymize a small table in memory.

Run: python examples/quickstart.py
"""

import pandas as pd

from dmondrian import MondrianAnonymizer

df = pd.DataFrame(
    {
        "age": [23, 23, 24, 25, 50, 51, 52, 54],
        "zip": [11000, 11000, 11001, 11002, 12000, 12000, 12001, 12002],
        "salary": [10, 20, 30, 40, 50, 60, 70, 80],
    }
)

released = MondrianAnonymizer(k=2, quasi_id=["age", "zip"]).fit_transform(df)
print(released.to_string())

# Every combination of published quasi-identifiers is shared by at least k=2 rows.
sizes = released.groupby(["age", "zip"], observed=True).size()
assert sizes.min() >= 2, sizes
assert released["salary"].equals(df["salary"])
print(f"\n{len(sizes)} equivalence classes, smallest has {sizes.min()} rows (k=2)")
