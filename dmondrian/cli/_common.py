"""What every command shares: the parser, exit statuses, the error line, shared flags.

The flags of the options the command line shares with the library are made from the option table
(:mod:`dmondrian.options`) by :func:`add_option`, and read back under the table's names by
:func:`table_options`, so a name, a choice or a default is written once.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings

from ..errors import ParameterError
from ..options import FORMATS, Option

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
    _line("error", message)


def warning_line(message) -> None:
    """Write ``message`` to stderr as the one line ``dmondrian: warning: MESSAGE``."""
    _line("warning", message)


def _line(kind: str, message) -> None:
    sys.stderr.write(f"{PROG}: {kind}: {' '.join(str(message).split())}\n")


@contextlib.contextmanager
def warnings_as_lines():
    """Print every warning shown inside the block as :func:`warning_line` does.

    Python would print the warning's category, the file and line that raised it and that line's
    source: noise to a user of the command line, who gets the same one-line form from every command.
    """
    def show(message, category, filename, lineno, file=None, line=None):
        warning_line(message)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def add_command(subparsers, command) -> argparse.ArgumentParser:
    """Add the sub-command that the module ``command`` describes.

    A command's module (:mod:`.report`, :mod:`.verify`, ...) holds its ``NAME``, the one-line
    ``HELP`` that ``dmondrian --help`` lists, its ``DESCRIPTION`` and ``EXAMPLES``,
    ``arguments(parser)``, which adds its flags to the parser made here, and ``run(args)``, which
    runs it on the parsed command line (an :class:`argparse.Namespace`) and returns its exit status.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The ``dmondrian`` parser's sub-commands.
    command : module
        The command's module.

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = subparsers.add_parser(command.NAME, help=command.HELP, formatter_class=FORMATTER,
                                   description=command.DESCRIPTION, epilog=command.EXAMPLES)
    command.arguments(parser)
    parser.set_defaults(handler=command.run)
    return parser


def print_result(result, as_json: bool) -> None:
    """Print a report or a verdict: its ``repr``, or its ``to_dict()`` as JSON (``--json``).

    Parameters
    ----------
    result : Report or Verification
        What the command measured.
    as_json : bool
        Whether ``--json`` was given.
    """
    import json

    print(json.dumps(result.to_dict(), indent=2, default=str) if as_json else repr(result))


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
    parser.add_argument("--format", choices=FORMATS, help="table format when the extension does "
                                                          "not tell (input and output)")
    parser.add_argument("--dtype", action="append", metavar="COL=TYPE",
                        help="convert a column after reading: str, int, float, category or "
                             "datetime (e.g. --dtype zip=str,birth_date=datetime)")
    add_csv_dialect(parser)
    parser.add_argument("--storage-options", type=json_object, metavar="JSON",
                        help="fsspec options for the URLs' filesystems, e.g. '{\"endpoint_url\": "
                             "\"http://localhost:9000\"}' or '{\"profile\": \"etl\"}'")
    add_debug(parser)


def json_object(text: str) -> dict:
    """An argparse type: a JSON object.

    Examples
    --------
    >>> json_object('{"anon": true}')
    {'anon': True}
    """
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object ({{...}}), got {text!r}")
    return value


def add_csv_dialect(parser) -> None:
    """Add how CSV input is written: --sep, --decimal, --encoding.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A sub-command's parser.
    """
    group = parser.add_argument_group("CSV input")
    group.add_argument("--sep", metavar="CHAR",
                       help="field separator of CSV input, e.g. ';' or '\\t' (default: "
                            "sniffed from the first lines; a tab for .tsv)")
    group.add_argument("--decimal", default=".", metavar="CHAR",
                       help="decimal mark of CSV numbers, e.g. ',' (default: .)")
    group.add_argument("--encoding", default="utf-8", metavar="NAME",
                       help="text encoding of CSV input, e.g. latin-1 (default: utf-8)")


def add_debug(parser) -> None:
    """Add ``--debug`` to a sub-command (also accepted before the command's name).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A sub-command's parser.
    """
    # SUPPRESS: a sub-command's default must not override a --debug given before the command's name.
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")


def option_type(option: Option, flag: str | None = None):
    """An argparse type: a value of a library option, checked by the option itself.

    The text is read as the option's :class:`~dmondrian.options.Range` says (an int when it spells
    one, else a float for a real option) and checked by :meth:`~dmondrian.options.Option.check`, the
    check every entry point runs, so the command line takes exactly what the library takes.

    Parameters
    ----------
    option : dmondrian.options.Option
        An option with a range, e.g. ``ANONYMIZE["t"]``.
    flag : str, optional
        The flag, as the message names it (default: the option's name with dashes).

    Returns
    -------
    callable
        ``str -> number`` (None for ``none`` when the option takes None
        besides its default), raising ``argparse.ArgumentTypeError``.

    Examples
    --------
    >>> from dmondrian.options import ANONYMIZE
    >>> option_type(ANONYMIZE["l"])("1.5"), option_type(ANONYMIZE["l"])("2")
    (1.5, 2)
    >>> option_type(ANONYMIZE["c"])("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: --c must be a number > 0, got '0'
    """
    flag = flag or f"--{option.name.replace('_', '-')}"
    expected = (f"{option.range}" + (" or 'none'" if option.none_ok else "")
                + "".join(f" or {c!r}" for c in option.choices or ()))

    def parse(text):
        if option.none_ok and text.strip().lower() == "none":
            return None
        if text in (option.choices or ()):
            return text
        try:
            return option.check(option.range.parse(text))
        except (ValueError, ParameterError):
            raise argparse.ArgumentTypeError(f"{flag} must be {expected}, got {text!r}") from None

    parse.__name__ = flag  # argparse names the type in some messages
    return parse


def add_option(parser, option: Option, *, also: str = "", flag: str | None = None,
               **kwargs) -> argparse.Action:
    """Add the flag of a library option, its name, default, choices and help from the table.

    The flag is the option's name with dashes (``max_depth`` -> ``--max-depth``) and its value lands
    under the option's name, so :func:`table_options` finds it.

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
        More ``add_argument`` keywords (``metavar``, ``action``); the type is
        :func:`option_type` when the option has a range.

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
    if option.range is not None:
        kwargs.setdefault("type", option_type(option, flag))
    choices = None if option.range is not None else option.choices
    return parser.add_argument(flag, dest=option.name, default=option.default,
                               choices=choices, help=text, **kwargs)


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
