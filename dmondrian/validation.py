"""Validation of the parameters shared by every entry point.

Each check raises a typed error from :mod:`dmondrian.errors` that names the
parameter or column, so a user never sees a traceback from inside numpy.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

from .errors import DuplicateColumnError, MissingColumnError, ParameterError

MODES = ("strict", "relaxed")
GENERALIZATIONS = ("range", "midpoint", "mean")


def check_quasi_identifiers(quasi_identifiers, columns) -> list:
    """Return the QI names as a list; every one must be a column of the table."""
    if quasi_identifiers is None:
        raise ParameterError("quasi_identifiers", "quasi_identifiers must name at least one column")
    if isinstance(quasi_identifiers, (str, bytes)) or not hasattr(quasi_identifiers, "__iter__"):
        quasi_identifiers = [quasi_identifiers]
    qis = list(quasi_identifiers)
    if not qis:
        raise ParameterError("quasi_identifiers", "quasi_identifiers is empty: name at least "
                             "one column to generalize")
    seen = set()
    for q in qis:
        if q in seen:
            raise DuplicateColumnError(q, f"quasi-identifier {q!r} is listed twice")
        seen.add(q)
    cols = list(columns)
    for q in qis:
        if q not in cols:
            shown = ", ".join(map(repr, cols[:10])) + (", ..." if len(cols) > 10 else "")
            raise MissingColumnError(q, f"quasi-identifier {q!r} is not a column of the "
                                        f"table (columns: {shown})")
    return qis


def check_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise ParameterError(name, f"{name} must be one of {', '.join(map(repr, choices))}, "
                                   f"got {value!r}")
    return value


def check_max_depth(max_depth) -> int:
    """None means unlimited (returned as -1, the kernel's convention)."""
    if max_depth is None:
        return -1
    if isinstance(max_depth, bool) or not isinstance(max_depth, numbers.Integral) or max_depth < 0:
        raise ParameterError("max_depth", f"max_depth must be None or an integer >= 0, "
                                          f"got {max_depth!r}")
    return int(max_depth)


def check_mapping(name: str, mapping, qis) -> dict:
    """A per-QI option mapping (hierarchies, qi_kinds): keys must be QIs."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ParameterError(name, f"{name} must be a mapping column -> value, "
                                   f"got {type(mapping).__name__}")
    for key in mapping:
        if key not in qis:
            raise MissingColumnError(key, f"{name} names column {key!r}, which is not one of "
                                          f"the quasi-identifiers {qis}")
    return dict(mapping)


def check_class_column(class_column, columns):
    if class_column is None:
        return None
    if class_column in list(columns):
        raise ParameterError("class_column", f"class_column {class_column!r} already exists in "
                                             "the table; choose another name")
    return class_column


def check_sensitive(sensitive, columns, qis):
    """The sensitive column must exist and must not be generalized."""
    if sensitive is None:
        return None
    if sensitive not in list(columns):
        raise MissingColumnError(sensitive, f"sensitive column {sensitive!r} is not a column "
                                            "of the table")
    if sensitive in qis:
        raise ParameterError("sensitive", f"sensitive column {sensitive!r} is also a "
                                          "quasi-identifier; it must not be generalized")
    return sensitive
