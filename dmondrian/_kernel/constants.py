"""The kernel's constants, as Python sees them.

The codes (kinds, privacy slots, objectives, work space rows) and the key
limits are defined once, in ``codes.pxd``, and read here from the compiled
:mod:`dmondrian._kernel.codes`; the rest are Python's own.
"""

import numpy as np

from .. import options
from .codes import (
    KIND_FLOAT,
    KIND_HIERARCHY,
    KIND_INT,
    KIND_NOMINAL,
    KIND_ORDINAL,
    LIMITS,
    MASK_CARD,
    N_FP,
    N_IP,
    OBJ_BALANCED,
    OBJ_DM,
    OBJ_NCP,
    P_ENT_ROW,
    P_K,
    P_L_DISTINCT,
    P_LOG_L,
    P_N_SEEN,
    P_N_SENS,
    P_PAIR_ROW,
    P_RC_C,
    P_RC_L,
    P_SENS_ROW,
    P_T,
    P_T_ORDERED,
    WS_COUNTS,
    WS_CUM,
    WS_ORDER,
    WS_RANK,
    WS_ROWS,
    WS_SCRATCH,
    WS_SEEN,
)

__all__ = [
    "KIND_INT", "KIND_FLOAT", "KIND_ORDINAL", "KIND_NOMINAL", "KIND_HIERARCHY",
    "MISSING_KEY", "FLIP", "FLOAT_MAX", "INT_MIN", "INT_MAX",
    "P_K", "P_SENS_ROW", "P_N_SENS", "P_L_DISTINCT", "P_RC_L", "P_T_ORDERED", "P_ENT_ROW",
    "P_N_SEEN", "P_PAIR_ROW", "N_IP",
    "P_LOG_L", "P_RC_C", "P_T", "N_FP",
    "OBJ_BALANCED", "OBJ_DM", "OBJ_NCP", "OBJECTIVES", "PARALLEL_MIN_ROWS",
    "WS_SCRATCH", "WS_COUNTS", "WS_ORDER", "WS_RANK", "WS_CUM", "WS_SEEN", "WS_ROWS",
    "MASK_CARD",
]

# The missing value's key: larger than every present key.
MISSING_KEY = LIMITS["MISSING_KEY"]
FLIP = np.int64(LIMITS["FLIP"])
FLOAT_MAX = np.float64(LIMITS["FLOAT_MAX"])
INT_MIN = LIMITS["INT_MIN"]
INT_MAX = np.iinfo(np.int64).max

# What a split optimizes: the option's choices, which the OBJ_* codes index
# (tests/kernel/test_kernel_codes.py holds them to it).
OBJECTIVES = options.OBJECTIVES

# Below this many rows a kernel call runs on one thread: starting threads and
# handing work over cost more than small tables take.
PARALLEL_MIN_ROWS = 200_000
