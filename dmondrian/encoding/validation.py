"""Validation of the parameters shared by every entry point.

Each check raises a typed error from :mod:`dmondrian.errors` that names the
parameter or column, so a user never sees a traceback from inside numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import DuplicateColumnError, MissingColumnError, ParameterError
from ..options import ANONYMIZE, GENERALIZATIONS, MODES, defaults
from ..privacy.constraints import resolve_constraints
from ..privacy.entities import check_entity
from ..privacy.noise import check_noise
from ..privacy.suppression import check_suppression
from ..release.identifiers import check_allow_unique, check_identifiers

__all__ = ["GENERALIZATIONS", "MODES", "Options", "check_class_column", "check_mapping",
           "check_max_depth", "check_options", "check_quasi_identifiers", "check_sensitive"]


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


def check_max_depth(max_depth) -> int:
    """None means unlimited (returned as -1, the kernel's convention)."""
    max_depth = ANONYMIZE["max_depth"].check(max_depth)
    return -1 if max_depth is None else max_depth


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


def check_max_contributions(value, name: str = "max_contributions") -> int:
    """A contribution bound of the noise (``max_contributions``, ``max_classes``): an int >= 1."""
    return ANONYMIZE[name].check(value)


def check_refine_rows(value, refine, k: int):
    """``refine_rows`` checked: None, "all", or an int of at least two classes (2k)."""
    value = ANONYMIZE["refine_rows"].check(value)
    if value is not None and refine == "none":
        raise ParameterError("refine_rows", "refine_rows sizes refine='local'; refine is 'none'")
    if isinstance(value, int) and value < 2 * k:
        raise ParameterError("refine_rows", f"refine_rows must be at least 2k = {2 * k} "
                                            f"(two classes), got {value}")
    return value


@dataclass(frozen=True)
class Options:
    """The checked options of one anonymization, as both engines use them.

    ``max_depth`` is -1 for unlimited (the kernel's convention);
    ``constraints`` always starts with the k-anonymity constraint.
    """

    qis: list
    constraints: list
    sensitive: object
    mode: str
    objective: str
    #: The refinement after the cuts ("none", "local"; :mod:`dmondrian._kernel.refine`).
    refine: str
    #: The refinement's block rows: None (the default rule), an int >= 2k or "all".
    refine_rows: object
    generalization: str
    max_depth: int
    hierarchies: dict
    qi_kinds: dict
    class_column: object
    #: Share of rows that may be suppressed, and what becomes of them (mask, drop).
    suppression: float
    suppressed: str
    #: :class:`dmondrian.privacy.noise.NoisedColumn` of each noised column, and the noise's seed.
    noise: list
    random_state: object
    #: Columns removed from the release, and columns allowed to single out rows.
    identifiers: list
    allow_unique: list
    #: The person key (:mod:`dmondrian.privacy.entities`): classes count distinct entities.
    entity: object
    #: With ``entity`` and noise: rows of one entity kept in a class's noised mean,
    #: and classes an entity's rows count in.
    max_contributions: int
    max_classes: int

    @property
    def k(self) -> int:
        return self.constraints[0].min_size()


#: The options whose checked value is the value given (their choices, their range).
_AS_GIVEN = ("mode", "objective", "refine", "generalization", "suppressed", "random_state",
             "max_contributions", "max_classes")


def check_options(columns, quasi_identifiers, k, *, index_name=None, **options) -> Options:
    """Check every option of an anonymization against the table's columns.

    The local and the distributed engine take the same options (:data:`dmondrian.options.ANONYMIZE`)
    and call this one function, so a bad option gets the same typed error from both.

    Parameters
    ----------
    columns : sequence
        The table's column names.
    quasi_identifiers, k
        As in :func:`dmondrian.anonymize`.
    index_name : object, optional
        The table's index name (``allow_unique`` may name the index).
    **options
        The options of :data:`dmondrian.options.ANONYMIZE`; those not given take their defaults.

    Returns
    -------
    Options

    Examples
    --------
    >>> opts = check_options(["age", "zip", "disease"], ["age", "zip"], 5, l=2,
    ...                      sensitive="disease")
    >>> opts.k, opts.max_depth, [type(c).__name__ for c in opts.constraints]
    (5, -1, ['KAnonymity', 'DistinctLDiversity'])
    >>> check_options(["age"], ["agee"], 5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dmondrian.errors.MissingColumnError: quasi-identifier 'agee' is not a column of the ...
    """
    unknown = set(options) - set(ANONYMIZE)
    if unknown:
        raise ParameterError(sorted(unknown)[0], f"unknown option {sorted(unknown)[0]!r}; the "
                             f"options are {', '.join(ANONYMIZE)}")
    o = {**defaults(ANONYMIZE), **options}
    qis = check_quasi_identifiers(quasi_identifiers, columns)
    constraint_list, sensitive = resolve_constraints(
        k, l=o["l"], l_kind=o["l_kind"], c=o["c"], t=o["t"],
        sensitive=o["sensitive"], constraints=o["constraints"])
    sensitive = check_sensitive(sensitive, columns, qis)
    refine_rows = check_refine_rows(o["refine_rows"], o["refine"], constraint_list[0].min_size())
    noise = check_noise(o["noise"], columns, qis, sensitive)
    return Options(
        qis=qis,
        constraints=constraint_list,
        sensitive=sensitive,
        refine_rows=refine_rows,
        **{name: ANONYMIZE[name].check(o[name]) for name in _AS_GIVEN},
        max_depth=check_max_depth(o["max_depth"]),
        hierarchies=check_mapping("hierarchies", o["hierarchies"], qis),
        qi_kinds=check_mapping("qi_kinds", o["qi_kinds"], qis),
        class_column=check_class_column(o["class_column"], columns),
        suppression=check_suppression(o["suppression"]),
        noise=noise,
        identifiers=check_identifiers(o["identifiers"], columns, qis, sensitive,
                                      [s.column for s in noise]),
        allow_unique=check_allow_unique(o["allow_unique"], columns, index_name),
        entity=check_entity(o["entity"], columns, qis, sensitive, [s.column for s in noise],
                            o["class_column"]),
    )
