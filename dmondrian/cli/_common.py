"""What every command shares: the parser, exit statuses, the error line, shared flags.

The flags of the options the command line shares with the library are made
from the option table (:mod:`dmondrian.options`) by :func:`add_option`, and
read back under the table's names by :func:`table_options`, so a name, a
choice or a default is written once.
"""

from __future__ import annotations

import argparse
import sys

from ..options import Option

PROG = "dmondrian"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

#: Keeps the line breaks of descriptions and examples as written.
FORMATTER = argparse.RawDescriptionHelpFormatter


class UsageError(Exception):
    """A command line that cannot be run as given (exit status 2)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, raised instead of printed."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def error_line(message) -> None:
    """Write ``message`` to stderr as the one line ``dmondrian: error: MESSAGE``.

    Parameters
    ----------
    message : object
        The error; its text is joined onto one line.
    """
    sys.stderr.write(f"{PROG}: error: {' '.join(str(message).split())}\n")


def add_common(parser, *, qi_required: bool = True) -> None:
    """Add the flags every table-reading command takes: --qi, --format, --dtype, --debug.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A sub-command's parser.
    qi_required : bool
        Whether --qi must be given.
    """
    parser.add_argument("--qi", "--qi-names", dest="qi", action="append", metavar="COLS",
                        required=qi_required,
                        help="quasi-identifier columns, comma-separated (repeatable)")
    parser.add_argument("--format", choices=("csv", "parquet"),
                        help="table format when the extension does not tell (input and "
                             "output)")
    parser.add_argument("--dtype", action="append", metavar="COL=TYPE",
                        help="convert a column after reading: str, int, float, category or "
                             "datetime (e.g. --dtype zip=str,birth_date=datetime)")
    add_debug(parser)


def add_debug(parser) -> None:
    """Add ``--debug`` to a sub-command (also accepted before the command's name).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A sub-command's parser.
    """
    # SUPPRESS: a sub-command's default must not override a --debug given
    # before the command's name.
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")


def add_option(parser, option: Option, *, also: str = "", flag: str | None = None,
               **kwargs) -> argparse.Action:
    """Add the flag of a library option, its name, default, choices and help from the table.

    The flag is the option's name with dashes (``max_depth`` -> ``--max-depth``)
    and its value lands under the option's name, so :func:`table_options`
    finds it.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
        Where to add the flag.
    option : dmondrian.options.Option
        The option, e.g. ``ANONYMIZE["mode"]``.
    also : str
        What the flag means on the command line beyond the option's help.
    flag : str, optional
        The flag, when the command line's usual name differs from the
        option's (``--seed`` for ``random_state``).
    **kwargs
        More ``add_argument`` keywords (``type``, ``metavar``).

    Returns
    -------
    argparse.Action
    """
    text = option.help.replace("%", "%%")  # argparse formats help with %
    if also:
        text += f"; {also}"
    if option.default is not None:
        text += " (default: %(default)s)"
    flag = flag or f"--{option.name.replace('_', '-')}"
    return parser.add_argument(flag, dest=option.name,
                               default=option.default, choices=option.choices, help=text,
                               **kwargs)


def table_options(args: argparse.Namespace, *groups: dict[str, Option]) -> dict:
    """The options of ``groups`` given on the command line, by the table's names.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.
    *groups : dict of Option
        Option groups of :mod:`dmondrian.options`.

    Returns
    -------
    dict
        ``{name: value}`` for each option of ``groups`` the command has a flag for.

    Examples
    --------
    >>> from dmondrian.options import ANONYMIZE
    >>> table_options(argparse.Namespace(mode="relaxed", k=5), ANONYMIZE)
    {'mode': 'relaxed'}
    """
    given = vars(args)
    return {name: given[name] for group in groups for name in group if name in given}


def require_sensitive(args: argparse.Namespace, sensitive: list[str]) -> None:
    """Refuse --l or --t without the --sensitive column they protect.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (``l`` and ``t``).
    sensitive : list of str
        The sensitive columns given.
    """
    if (args.l is not None or args.t is not None) and not sensitive:
        flag = "--l" if args.l is not None else "--t"
        raise UsageError(f"{flag} needs --sensitive COLUMN (the attribute it protects)")
