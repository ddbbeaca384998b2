"""Argument types and flag parsers: each error names the flag it is about."""

from __future__ import annotations

import argparse

from ._common import UsageError


def int_at_least(name: str, minimum: int):
    """An argparse type: an integer ``>= minimum``, with a message naming the option.

    Parameters
    ----------
    name : str
        The option, as the message names it (``k``, ``--rows``).
    minimum : int
        The smallest value allowed.

    Returns
    -------
    callable
        ``str -> int``, raising ``argparse.ArgumentTypeError``.

    Examples
    --------
    >>> int_at_least("k", 1)("5")
    5
    """
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {value}")
        return value

    parse.__name__ = name  # argparse names the type in some messages
    return parse


def positive_int(name: str):
    """An argparse type: an integer ``>= 1`` (see :func:`int_at_least`)."""
    return int_at_least(name, 1)


def nonnegative_int(name: str):
    """An argparse type: an integer ``>= 0`` (see :func:`int_at_least`)."""
    return int_at_least(name, 0)


def float_where(name: str, ok, expected: str, none_ok: bool = False):
    """An argparse type: a number for which ``ok(value)`` holds, with a message naming the option.

    Parameters
    ----------
    name : str
        The option, as the message names it.
    ok : callable
        ``float -> bool``; NaN stands for text that is no number.
    expected : str
        What the message says the value must be (``"a number > 0"``).
    none_ok : bool, default False
        Whether ``none`` is accepted too (as None).

    Returns
    -------
    callable
        ``str -> float`` (or None), raising ``argparse.ArgumentTypeError``.

    Examples
    --------
    >>> float_where("--c", lambda v: v > 0, "a number > 0")("2.5")
    2.5
    """
    def parse(text):
        if none_ok and text.strip().lower() == "none":
            return None
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{name} must be {expected}, got {text!r}")
        return value

    parse.__name__ = name  # argparse names the type in some messages
    return parse


def seconds_or_none(name: str):
    """An argparse type: a number of seconds > 0, or ``none`` (see :func:`float_where`).

    Examples
    --------
    >>> seconds_or_none("--stall-timeout")("90"), seconds_or_none("--stall-timeout")("none")
    (90.0, None)
    """
    return float_where(name, lambda v: 0.0 < v < float("inf"),
                       "a number of seconds > 0 or 'none'", none_ok=True)


def fraction(name: str):
    """An argparse type: a number between 0 and 1 (see :func:`float_where`).

    Examples
    --------
    >>> fraction("t")("0.25")
    0.25
    """
    return float_where(name, lambda v: 0.0 <= v <= 1.0, "between 0 and 1")


def positive_float(name: str):
    """An argparse type: a finite number > 0 (see :func:`float_where`).

    Examples
    --------
    >>> positive_float("--c")("2.5")
    2.5
    """
    return float_where(name, lambda v: 0.0 < v < float("inf"), "a number > 0")


def k_list(text: str) -> list[int]:
    """An argparse type: comma-separated positive k's (``2,5,10``).

    Examples
    --------
    >>> k_list("2, 5,10")
    [2, 5, 10]
    """
    ks = [positive_int("k")(part.strip()) for part in text.split(",") if part.strip()]
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
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (use e.g. 512MB or 2GB)") from None


def split_names(values) -> list[str]:
    """Flatten repeated, comma-separated column lists (``--qi a,b --qi c``).

    Examples
    --------
    >>> split_names(["age, zip", "sex"])
    ['age', 'zip', 'sex']
    """
    names = []
    for value in values or []:
        names.extend(n.strip() for n in value.split(",") if n.strip())
    return names


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
        ``{column: value}``.

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
        raise argparse.ArgumentTypeError(
            f"--noise needs COLUMN:EPSILON:LO:HI, e.g. income:1.0:0:200000, got {text!r}"
        ) from None
    return parts[0], {"epsilon": epsilon, "bounds": (lo, hi)}
