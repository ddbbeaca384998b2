# The kernel's codes and limits, defined once. The compiled modules cimport
# them (through _common.pxd and _rules.pxd); codes.pyx exposes them to
# Python, where constants.py reads them.
from libc.stdint cimport int64_t

cdef extern from *:
    """
    #include <stdint.h>
    /* The missing value's key: larger than every present key, so missing
       values sort last in every QI. */
    #define DM_MISSING_KEY INT64_MAX
    #define DM_INT_MIN INT64_MIN
    /* Flips the bits of a negative float's key but the sign (keys.float_keys). */
    #define DM_FLIP ((int64_t)0x7FFFFFFFFFFFFFFF)
    #define DM_FLOAT_MAX 1.7976931348623157e308
    """
    const int64_t MISSING_KEY "DM_MISSING_KEY"
    const int64_t INT_MIN "DM_INT_MIN"
    const int64_t FLIP "DM_FLIP"
    const double FLOAT_MAX "DM_FLOAT_MAX"

# Kinds of quasi-identifier the kernel distinguishes.
cpdef enum:
    KIND_INT = 0        # keys are the number itself (ints, datetimes)
    KIND_FLOAT = 1      # keys hold order-preserving float64 bits
    KIND_ORDINAL = 2    # category codes in category order
    KIND_NOMINAL = 3    # category codes without order; cut by frequency order per node
    KIND_HIERARCHY = 4  # DFS leaf codes of a generalization tree

# The privacy constraint reaches the kernel as ``priv = (ip, fp, q)``:
#   ip (int64, N_IP slots): [P_K] k (min class size), [P_SENS_ROW] key-matrix
#       row of the sensitive codes (-1: no sensitive constraint), [P_N_SENS]
#       number of sensitive codes, [P_L_DISTINCT] distinct l (0: off),
#       [P_RC_L] recursive (c, l)'s l (0: off), [P_T_ORDERED] 1 if
#       t-closeness uses the ordered distance, [P_ENT_ROW] key-matrix row of
#       the entity codes (-1: rows are counted, not entities), [P_N_SEEN]
#       entity (or pair) codes the marks must cover, [P_PAIR_ROW] key-matrix
#       row of the codes of the (entity, sensitive value) pairs (-1: the
#       sensitive histograms count rows)
#   fp (float64, N_FP slots): [P_LOG_L] log(l) for entropy l-diversity (-1:
#       off), [P_RC_C] recursive c, [P_T] t for t-closeness (-1: off)
#   q (float64): the whole table's sensitive distribution (t-closeness)
cpdef enum:
    P_K = 0
    P_SENS_ROW = 1
    P_N_SENS = 2
    P_L_DISTINCT = 3
    P_RC_L = 4
    P_T_ORDERED = 5
    P_ENT_ROW = 6
    P_N_SEEN = 7
    P_PAIR_ROW = 8
    N_IP = 9
cpdef enum:
    P_LOG_L = 0
    P_RC_C = 1
    P_T = 2
    N_FP = 3

# What a split optimizes (constants.OBJECTIVES names them in this order):
# balanced median cuts, classes packed close to k rows (discernibility), or
# the children's summed spans (NCP).
cpdef enum:
    OBJ_BALANCED = 0
    OBJ_DM = 1
    OBJ_NCP = 2

# Rows of a split's work space (see split.workspace_width): a small
# segment's copy (then a split's row positions), counts (select histogram,
# code counts, left sensitive histogram), code order (and the right
# sensitive histogram), nominal ranks, their cumulative counts (then a
# split's list of moved key rows), and the codes seen in a node (kept all
# zeros between uses).
cpdef enum:
    WS_SCRATCH = 0
    WS_COUNTS = 1
    WS_ORDER = 2
    WS_RANK = 3
    WS_CUM = 4
    WS_SEEN = 5
    WS_ROWS = 6

# Nominal QIs with at most this many codes count a node's distinct codes
# with a one-word bitmask while its rows are moved.
cpdef enum:
    MASK_CARD = 64
