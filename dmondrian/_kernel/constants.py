"""The kernel's constants, as Python sees them (``_common.pxd`` declares them in C)."""

import numpy as np

# Kinds of quasi-identifier the kernel distinguishes.
KIND_INT = 0  # int64 keys whose value is the number itself (ints, datetimes)
KIND_FLOAT = 1  # int64 keys holding order-preserving float64 bits
KIND_ORDINAL = 2  # category codes in category order
KIND_NOMINAL = 3  # category codes without order; cut by frequency order per node
KIND_HIERARCHY = 4  # DFS leaf codes of a generalization tree

# The missing value's key: larger than every present key.
MISSING_KEY = np.iinfo(np.int64).max
FLIP = np.int64(0x7FFFFFFFFFFFFFFF)
FLOAT_MAX = np.finfo(np.float64).max
INT_MIN = np.iinfo(np.int64).min
INT_MAX = np.iinfo(np.int64).max

# The privacy constraint reaches the kernel as ``priv = (ip, fp, q)``:
#   ip (int64):   [0] k (min class size), [1] key-matrix row of the sensitive
#                 codes (-1: no sensitive constraint), [2] number of sensitive
#                 codes, [3] distinct l (0: off), [4] recursive (c, l)'s l
#                 (0: off), [5] 1 if t-closeness uses the ordered distance,
#                 [6] key-matrix row of the entity codes (-1: rows are
#                 counted, not entities), [7] entity (or pair) codes the
#                 marks must cover, [8] key-matrix row of the codes of the
#                 (entity, sensitive value) pairs (-1: the sensitive
#                 histograms count rows)
#   fp (float64): [0] log(l) for entropy l-diversity (-1: off), [1] recursive
#                 c, [2] t for t-closeness (-1: off)
#   q (float64):  the whole table's sensitive distribution (t-closeness)
P_K, P_SENS_ROW, P_N_SENS, P_L_DISTINCT, P_RC_L, P_T_ORDERED = 0, 1, 2, 3, 4, 5
P_ENT_ROW, P_N_SEEN, P_PAIR_ROW = 6, 7, 8
N_IP = 9
P_LOG_L, P_RC_C, P_T = 0, 1, 2

# What a split optimizes: the objectives' names, in the kernel's order (OBJ_*
# in _rules.pxd).
OBJECTIVES = ("balanced", "dm", "ncp")

# Below this many rows a kernel call runs on one thread: starting threads and
# handing work over cost more than small tables take.
PARALLEL_MIN_ROWS = 200_000

# Rows of a split's work space (see _rules.pxd).
WS_SCRATCH, WS_COUNTS, WS_ORDER, WS_RANK, WS_CUM, WS_SEEN = 0, 1, 2, 3, 4, 5
# Nominal QIs up to this many codes keep a node's codes in a one-word bitmask.
MASK_CARD = 64
