"""Argument types and flag parsers: each error names the flag it is about."""

from __future__ import annotations

import argparse
import numbers

from ..options import K, Option, Range
from ._common import UsageError, option_type


def int_at_least(name: str, minimum: int):
    """An argparse type: an integer ``>= minimum``, with a message naming the flag.

    Examples
    --------
    >>> int_at_least("--rows", 1)("5")
    5
    """
    return option_type(Option(name.lstrip("-"), None, "", range=Range(numbers.Integral, minimum)),
                       name)


def positive_int(name: str):
    """An argparse type: an integer ``>= 1`` (see :func:`int_at_least`)."""
    return int_at_least(name, 1)


def nonnegative_int(name: str):
    """An argparse type: an integer ``>= 0`` (see :func:`int_at_least`)."""
    return int_at_least(name, 0)


def k_list(text: str) -> list[int]:
    """An argparse type: comma-separated positive k's (``2,5,10``).

    Examples
    --------
    >>> k_list("2, 5,10")
    [2, 5, 10]
    """
    ks = [option_type(K, "--k")(part.strip()) for part in text.split(",") if part.strip()]
    if not ks:
        raise argparse.ArgumentTypeError("--k needs at least one value, e.g. --k 2,5,10")
    return ks


def byte_size(text: str) -> int:
    """An argparse type: a size such as ``512MB`` or ``2GB``, in bytes.

    Examples
    --------
    >>> byte_size("2kB")
    2000
    """
    from dask.utils import parse_bytes

    try:
        return int(parse_bytes(text))
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 512MB or 2GB)") from None


def split_names(values) -> list[str]:
    """Flatten repeated, comma-separated column lists (``--qi a,b --qi c``).

    Examples
    --------
    >>> split_names(["age, zip", "sex"])
    ['age', 'zip', 'sex']
    """
    return [n.strip() for value in values or [] for n in value.split(",") if n.strip()]


def pairs(values, flag: str, what: str) -> dict[str, str]:
    """Parse repeated ``COLUMN=VALUE`` flags into a dict.

    ``--dtype`` also takes several pairs in one flag, comma-separated.

    Parameters
    ----------
    values : list of str or None
        The flag's values, as argparse appended them.
    flag : str
        The flag, for the error messages.
    what : str
        What the value is (``TYPE``, ``FILE``), for the error messages.

    Returns
    -------
    dict
        ``{column: value}``, in the order given.

    Examples
    --------
    >>> pairs(["zip=str,age=int"], "--dtype", "TYPE")
    {'zip': 'str', 'age': 'int'}
    """
    out: dict[str, str] = {}
    for value in values or []:
        for item in value.split(",") if flag == "--dtype" else [value]:
            col, sep, rhs = item.partition("=")
            col, rhs = col.strip(), rhs.strip()
            if not sep or not col or not rhs:
                raise UsageError(f"bad {flag} {item!r}: expected COLUMN={what}")
            if col in out:
                raise UsageError(f"{flag} names column {col!r} twice")
            out[col] = rhs
    return out


def noise_column(text: str) -> tuple[str, dict]:
    """An argparse type: ``COLUMN:EPSILON:LO:HI``, one noised column (``--noise``).

    The column name may itself hold colons (the last three fields are numbers).

    Examples
    --------
    >>> noise_column("income:1.0:0:200000")
    ('income', {'epsilon': 1.0, 'bounds': (0.0, 200000.0)})
    """
    parts = text.rsplit(":", 3)
    try:
        if len(parts) != 4 or not parts[0]:
            raise ValueError
        epsilon, lo, hi = (float(p) for p in parts[1:])
    except ValueError:
        raise argparse.ArgumentTypeError("--noise needs COLUMN:EPSILON:LO:HI, e.g. "
                                         f"income:1.0:0:200000, got {text!r}") from None
    return parts[0], {"epsilon": epsilon, "bounds": (lo, hi)}
