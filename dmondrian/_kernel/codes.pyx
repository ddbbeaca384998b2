"""The kernel's codes and limits (declared in ``codes.pxd``), as Python reads them.

The ``cpdef enum`` members of ``codes.pxd`` are this module's attributes;
the C limits are copied into :data:`LIMITS`. :mod:`dmondrian._kernel.constants`
reads both from here, so Python and C share one definition.
"""

#: The C limits by name: the missing key, the smallest key, the float key's
#: bit flip and the largest float.
LIMITS = {"MISSING_KEY": MISSING_KEY, "INT_MIN": INT_MIN, "FLIP": FLIP,
          "FLOAT_MAX": FLOAT_MAX}
