"""The local engine on UCI Adult, set up as in the literature (30,162 rows, 8 QIs)."""

from __future__ import annotations

import pytest
from checks import assert_valid_release

import dmondrian
from dmondrian.datasets import ADULT_QUASI_IDENTIFIERS, load_adult_hierarchies


@pytest.mark.parametrize("k", [2, 5, 10, 50, 100])
def test_adult_is_k_anonymous(adult, k):
    out = dmondrian.anonymize(adult, ADULT_QUASI_IDENTIFIERS, k, class_column="cls")
    sizes = assert_valid_release(adult, out, ADULT_QUASI_IDENTIFIERS, k, class_column="cls")
    # Mondrian cuts down to near k: with all 8 QIs most classes stay below 2k+1 rows
    # unless ties hold them together, so there are many classes, not a handful.
    assert len(sizes) > len(adult) / (4 * k)


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_adult_with_hierarchies(adult, adult_dir, mode):
    hierarchies = load_adult_hierarchies(adult_dir)
    used = {q: h for q, h in hierarchies.items() if q in ADULT_QUASI_IDENTIFIERS}
    out = dmondrian.anonymize(adult, ADULT_QUASI_IDENTIFIERS, 10, mode=mode,
                              hierarchies=used, class_column="cls")
    assert_valid_release(adult, out, ADULT_QUASI_IDENTIFIERS, 10, hierarchies=used,
                         class_column="cls")
    assert set(out["sex"].astype(str)) <= {"Male", "Female", "*"}


def test_adult_relaxed_cuts_every_class_below_2k_unless_identical(adult):
    """Relaxed Mondrian splits any class of >= 2k rows unless its QIs are all constant."""
    k = 10
    relaxed = dmondrian.anonymize(adult, ADULT_QUASI_IDENTIFIERS, k, mode="relaxed",
                                  class_column="c")
    sizes = relaxed.groupby("c").size()
    assert sizes.min() >= k
    big = sizes[sizes >= 2 * k].index
    originals = adult.assign(c=relaxed["c"])
    distinct = originals[originals["c"].isin(big)].groupby("c")[ADULT_QUASI_IDENTIFIERS].nunique()
    assert (distinct == 1).all().all()
