"""The kernel's codes have one definition, which C and Python share.

``codes.pxd`` defines the kinds, the privacy slots, the objectives and the
work space rows once; the compiled modules cimport them and
:mod:`dmondrian._kernel.constants` reads them from the compiled
:mod:`dmondrian._kernel.codes`. These tests tie the two sides and check that
no other source writes a code's value again.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dmondrian import _kernel as K
from dmondrian._kernel import codes, constants
from dmondrian.privacy.constraints import DistinctLDiversity, KAnonymity, kernel_privacy

KERNEL = Path(constants.__file__).resolve().parent
PACKAGE = KERNEL.parent

# Every name codes.pxd defines: its cpdef enum members and its C limits.
CODE_NAMES = sorted(set(re.findall(r"^\s+([A-Z][A-Z0-9_]+) = ", (KERNEL / "codes.pxd").read_text(),
                                   re.M)))


def test_python_reads_the_compiled_codes():
    assert len(CODE_NAMES) > 20
    for name in CODE_NAMES:
        assert getattr(constants, name) == getattr(codes, name), name
        assert getattr(K, name) == getattr(codes, name), name
    for name, value in codes.LIMITS.items():
        assert getattr(constants, name) == value
    assert constants.MISSING_KEY == np.iinfo(np.int64).max
    assert constants.INT_MIN == np.iinfo(np.int64).min
    assert constants.FLOAT_MAX == np.finfo(np.float64).max


def test_objectives_are_named_in_code_order():
    assert [constants.OBJECTIVES.index(n) for n in ("balanced", "dm", "ncp")] == [
        codes.OBJ_BALANCED, codes.OBJ_DM, codes.OBJ_NCP]


def test_no_source_writes_a_code_again():
    sources = [p for p in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx"),
                           *PACKAGE.rglob("*.pxd")] if p.name != "codes.pxd"]
    for name in CODE_NAMES:
        pattern = re.compile(rf"^\s*{name}\s*=", re.M)
        again = [str(p.relative_to(PACKAGE)) for p in sources if pattern.search(p.read_text())]
        assert not again, f"{name} is defined again in {again}"


def test_privacy_arrays_have_the_kernel_slots():
    privacy = kernel_privacy([KAnonymity(3), DistinctLDiversity(2, "s")],
                             np.array([0, 1, 0, 1], dtype=np.int64), 2, False)
    assert privacy.ip.shape == (codes.N_IP,) and privacy.fp.shape == (codes.N_FP,)
    assert privacy.ip[codes.P_K] == 3 and privacy.ip[codes.P_L_DISTINCT] == 2
    # The kernel's rules refuse arrays with fewer slots than the kernel reads.
    short = privacy.ip[:codes.P_ENT_ROW]
    with pytest.raises(ValueError, match="ip and fp"):
        K.KernelRules([codes.KIND_INT], [3.0], [0], short, privacy.fp, privacy.q)


def test_kinds_reach_the_kernel_by_their_codes():
    # A nominal QI is cut by frequency order, an integer by value: the codes
    # the kinds hand over are the ones the kernel branches on.
    from dmondrian.encoding.qi import encode_qi

    assert encode_qi(pd.Series([1, 2], name="a")).kernel_kind == codes.KIND_INT
    assert encode_qi(pd.Series([1.5, 2.0], name="a")).kernel_kind == codes.KIND_FLOAT
    assert encode_qi(pd.Series(["x", "y"], name="a")).kernel_kind == codes.KIND_NOMINAL
