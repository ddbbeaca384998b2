"""The ``dmondrian`` command line: anonymize, report, verify, sweep, plot, demo.

Every failure is one line on stderr, ``dmondrian: error: ...``, and a non-zero exit status: 2 for a
usage or input error (bad flag, missing file, unknown column, k larger than the table, ...), 1 for a
table that fails ``verify`` or an unexpected internal error. ``--debug`` (anywhere on the line) adds
the traceback.

Layout: a module per command (:mod:`.anonymize`, :mod:`.report`, :mod:`.verify`, :mod:`.sweep`,
:mod:`.plot`, :mod:`.demo`), each with its name, help, ``arguments(parser)`` and ``run(args)``, made
a sub-command by :func:`._common.add_command`; :mod:`._common` holds what they share (the parser
class, exit statuses, the error line, the flags made from the option table
:mod:`dmondrian.options`), :mod:`._types` the argument types, :mod:`._inputs` the reading of tables
and hierarchy files, :mod:`._progress` the progress bar and :mod:`._engines` every import of the
engines and of Dask clusters.

The heavy imports (pandas, the engines, matplotlib, dask) happen inside the
commands so that ``dmondrian --help`` answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback

from . import anonymize, demo, plot, report, sweep, verify
from ._common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    FORMATTER,
    PROG,
    Parser,
    UsageError,
    add_command,
    error_line,
    warnings_as_lines,
)

__all__ = ["main", "build_parser", "UsageError"]

#: The sub-commands, in the order ``dmondrian --help`` lists them.
COMMANDS = (anonymize, report, verify, sweep, plot, demo)

EXAMPLES = """\
examples:
  dmondrian demo
  dmondrian anonymize people.csv released.parquet --k 10 --qi age,zip,sex
  dmondrian verify released.parquet --qi age,zip,sex --k 10

Run 'dmondrian COMMAND --help' for a command's options."""

#: The arguments naming tables: --storage-options is for their filesystems.
URL_ARGUMENTS = ("input", "output", "input_flag", "output_flag", "table", "original")

#: The seed's command line had no sub-command: a line starting with one of
#: these flags is an ``anonymize``.
SEED_FLAGS = ("--input", "--output", "--qi-names", "--max-depth", "--k", "-k")


def build_parser() -> argparse.ArgumentParser:
    """The ``dmondrian`` argument parser, every sub-command added by its module.

    Returns
    -------
    argparse.ArgumentParser
        Its errors raise :class:`UsageError` instead of exiting.
    """
    from .. import __version__

    parser = Parser(prog=PROG, formatter_class=FORMATTER, epilog=EXAMPLES,
                    description="k-anonymize tables with the Mondrian multidimensional algorithm.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    subparsers.required = True
    for command in COMMANDS:
        add_command(subparsers, command)
    return parser


def _take_extras(args, extras: list[str]) -> None:
    """Give positionals that argparse left over to anonymize's INPUT/OUTPUT.

    argparse fills optional positionals from the first run of positionals
    only, so ``anonymize IN --input X OUT`` would otherwise leave OUT
    unrecognized instead of reporting the real mistake (INPUT given twice).
    """
    rest = list(extras)
    if args.command == "anonymize":
        while rest and not rest[0].startswith("-"):
            if args.input is None:
                args.input = rest.pop(0)
            elif args.output is None:
                args.output = rest.pop(0)
            else:
                break
    if rest:
        raise UsageError(f"unrecognized arguments: {' '.join(rest)} "
                         f"(see '{PROG} {args.command} --help')")


def _run(argv: list[str]) -> int:
    # Accept the seed's command line, which had no sub-command: --input X --output Y ...
    if next((a for a in argv if a != "--debug"), "").split("=", 1)[0] in SEED_FLAGS:
        argv = ["anonymize", *argv]
    args, extras = build_parser().parse_known_args(argv)
    _take_extras(args, extras)
    from ..io.files import storage_options

    urls = [getattr(args, name, None) for name in URL_ARGUMENTS]
    with warnings_as_lines(), storage_options(urls, getattr(args, "storage_options", None)):
        return args.handler(args)


def _failed(message, *, debug: bool, status: int) -> int:
    if debug:
        traceback.print_exc()
    error_line(message)
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the ``dmondrian`` command line and return its exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; ``sys.argv[1:]`` by default.

    Returns
    -------
    int
        0 on success, 1 when ``verify`` finds violations (or on an internal
        error), 2 on a usage or input error.

    Examples
    --------
    >>> main(["verify", "--k", "0", "t.csv", "--qi", "age"])
    2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    from ..errors import DMondrianError

    try:
        return _run(argv)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except KeyboardInterrupt:
        error_line("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `dmondrian report ... | head`
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK
    except (UsageError, DMondrianError) as exc:
        return _failed(exc, debug=debug, status=EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        return _failed(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for "
                       "the traceback)", debug=debug, status=EXIT_FAILED)
