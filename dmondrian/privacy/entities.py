"""People, not rows: the entity (person key) of an event table.

An event table holds many rows per person (visits, transactions, clicks), each keyed by a column
such as ``user_id``. k-anonymity protects people, so with ``entity="user_id"`` every engine counts
*distinct entities* where it would count rows:

* **k.** Every published class holds at least ``k`` distinct entities. A cut
  is made only if both children do (the kernel counts them exactly, see
  :mod:`dmondrian._kernel.privacy`), and the whole table must hold ``k``.
* **l and t over people.** Entropy and recursive l-diversity and t-closeness read a class's
  sensitive histogram counting each entity once per sensitive value it holds in the class: the
  histogram of the class's distinct ``(entity, value)`` pairs. One person's hundred rows of one
  value weigh as one person holding it, and one person's rows of ten different values add ten pairs,
  one per value (so a class of one person cannot look diverse to entropy l beyond the values that
  person really holds). Distinct l-diversity (the number of distinct values) is the same either way.
  t-closeness compares with the whole table's histogram of pairs.
* **Suppression** stays in rows and suppresses whole classes. Every class
  holds at least k entities, so the masked class (a union of whole classes)
  holds at least k entities too; it is still checked for l and t over pairs.
* **Noise** bounds each entity's contribution to a class's mean (see
  :mod:`dmondrian.privacy.noise`).
* The entity column is a **direct identifier**: it is never released.

Missing entity values are refused (:class:`~dmondrian.errors.InvalidValueError`): rows of an unknown
person could be anyone's, and no count of them is safe both ways (one person each overstates the
people, one person for all may merge strangers). Fill or drop them first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InfeasibleError, InvalidValueError, MissingColumnError, ParameterError

__all__ = ["EntityCodes", "check_entity", "encode_entities", "pair_codes", "pair_counts",
           "distinct_per_class"]


@dataclass(frozen=True)
class EntityCodes:
    """The entity column as dense codes.

    Attributes
    ----------
    codes : ndarray of int64
        Each row's entity, ``0..n_entities-1``.
    n_entities : int
    """

    codes: np.ndarray
    n_entities: int


def check_entity(entity, columns, qis, sensitive=None, noised=(), class_column=None):
    """The entity column's name, checked against the table, or None.

    Raises
    ------
    MissingColumnError
        It is not a column.
    ParameterError
        It is also a QI, the sensitive column, a noised column or the class column.

    Examples
    --------
    >>> check_entity("user", ["user", "age"], ["age"])
    'user'
    >>> check_entity("age", ["user", "age"], ["age"])
    Traceback (most recent call last):
    ...
    dmondrian.errors.ParameterError: entity column 'age' is also a quasi-identifier: ...
    """
    if entity is None:
        return None
    if entity not in list(columns):
        raise MissingColumnError(entity, f"entity column {entity!r} is not a column of the table")
    for role, names in (("a quasi-identifier", qis), ("the sensitive column", [sensitive]),
                        ("a noised column", noised), ("the class column", [class_column])):
        if entity in names:
            raise ParameterError("entity", f"entity column {entity!r} is also {role}: the "
                                           "person key is a direct identifier, never released")
    return entity


def encode_entities(values, k: int | None = None, name=None) -> EntityCodes:
    """Dense codes of an entity column; refuses missing values and fewer than ``k`` entities.

    Examples
    --------
    >>> e = encode_entities(pd.Series(["u2", "u1", "u2"]))
    >>> e.codes.tolist(), e.n_entities
    ([0, 1, 0], 2)
    """
    values = pd.Series(values) if not isinstance(values, pd.Series) else values
    name = values.name if name is None else name
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    missing = int(np.count_nonzero(codes < 0))
    if missing:
        raise InvalidValueError(name, f"entity column {name!r} has {missing} missing value(s): "
                                      "whose rows they are is unknown; fill or drop them")
    if k is not None:
        check_entity_count(len(uniques), k, name)
    return EntityCodes(codes.astype(np.int64, copy=False), len(uniques))


def check_entity_count(n_entities: int, k: int, name=None) -> None:
    """Refuse a table of fewer than ``k`` distinct entities (no class could hold k people).

    The one statement of the rule, for both engines (``name``: the entity
    column, when known).

    Examples
    --------
    >>> check_entity_count(3, 5, "user_id")
    Traceback (most recent call last):
    ...
    dmondrian.errors.InfeasibleError: the table holds 3 distinct entities in 'user_id', \
fewer than k=5: no release of it can hold k people per class
    """
    if n_entities < k:
        where = "" if name is None else f" in {name!r}"
        raise InfeasibleError(f"the table holds {n_entities} distinct entities{where}, fewer "
                              f"than k={k}: no release of it can hold k people per class")


def pair_codes(entity_codes: np.ndarray, sensitive_codes: np.ndarray,
               n_values: int) -> tuple[np.ndarray, int]:
    """Dense codes of the ``(entity, sensitive value)`` pairs, and their number.

    Examples
    --------
    >>> codes, n = pair_codes(np.array([0, 0, 1, 0]), np.array([2, 2, 2, 1]), 3)
    >>> codes.tolist(), n
    ([0, 0, 1, 2], 3)
    """
    key = entity_codes.astype(np.int64) * max(int(n_values), 1) + sensitive_codes
    codes, uniques = pd.factorize(key)
    return codes.astype(np.int64, copy=False), len(uniques)


def pair_counts(entity_codes: np.ndarray, sensitive_codes: np.ndarray, n_values: int) -> np.ndarray:
    """Number of distinct entities holding each sensitive value (the pairs' histogram).

    Examples
    --------
    >>> pair_counts(np.array([0, 0, 1, 0]), np.array([2, 2, 2, 1]), 3).tolist()
    [0, 1, 2]
    """
    key = entity_codes.astype(np.int64) * max(int(n_values), 1) + sensitive_codes
    return np.bincount(pd.unique(key) % max(int(n_values), 1), minlength=n_values).astype(np.int64)


def distinct_per_class(class_of_row: np.ndarray, entity_codes: np.ndarray,
                       n_classes: int | None = None) -> np.ndarray:
    """Distinct entities of each class ``0..n_classes-1`` (rows of class -1 are left out).

    Examples
    --------
    >>> distinct_per_class(np.array([0, 0, 1, 1, -1]), np.array([5, 5, 5, 6, 7])).tolist()
    [1, 2]
    """
    class_of_row = np.asarray(class_of_row, dtype=np.int64)
    keep = class_of_row >= 0
    cls, ent = class_of_row[keep], np.asarray(entity_codes)[keep]
    if n_classes is None:
        n_classes = int(cls.max()) + 1 if cls.size else 0
    if cls.size == 0:
        return np.zeros(n_classes, dtype=np.int64)
    ent, uniques = pd.factorize(ent)
    width = max(len(uniques), 1)
    unique = pd.unique(cls * width + ent)
    return np.bincount(unique // width, minlength=n_classes).astype(np.int64)
