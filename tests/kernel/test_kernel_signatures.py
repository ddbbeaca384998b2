"""No kernel function takes more than 9 arguments.

Arguments that travel together go in a struct (``_rules.pxd``'s ``Rules``,
``Buffers``, ``WorkRows``; ``node.pxd``'s ``Stats``; ...) and the ``def``
entry points take the rules object the Python side builds
(``dmondrian._kernel.rules``). A long positional list is where two callers
start passing arguments in different orders; this test reads every
``def``/``cdef``/``cpdef`` signature of ``dmondrian/_kernel/`` from the
source (over several lines included) and lists any that grows past the limit.
"""

from __future__ import annotations

import re
from pathlib import Path

KERNEL = Path(__file__).resolve().parents[2] / "dmondrian" / "_kernel"
MAX_ARGS = 9

# Known offenders: none today. An entry names a function left long on purpose
# (a test below fails on a stale entry).
KNOWN_LONG: set = set()

# A function's header: the keyword at the start of a line, then anything up to
# the name directly followed by its opening parenthesis. Cython's declarations
# that are not functions (cdef int x, cdef struct S:, cdef class C:) have no
# parenthesis right after a name on that line and are skipped.
_HEADER = re.compile(r"^[ \t]*(?:cpdef|cdef|def)\b[^\n(=:]*?\b(\w+)[ \t]*\(", re.M)


def _arguments(text: str, open_at: int) -> list[str]:
    """The top-level comma-separated arguments from the parenthesis at ``open_at``."""
    depth, start, args = 0, open_at + 1, []
    for i in range(open_at, len(text)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                break
        elif ch == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
    return [a.strip() for a in args if a.strip() and a.strip() not in ("*", "/")]


def _strip_comments(text: str) -> str:
    # A '#' inside a string of a .pyx never sits in a signature; dropping the
    # rest of such a line cannot change a header's argument count.
    return re.sub(r"#[^\n]*", "", text)


def signatures(path: Path) -> list[tuple[str, int, int]]:
    """``(name, line, number of arguments)`` of every function declared in ``path``."""
    text = _strip_comments(path.read_text())
    out = []
    for m in _HEADER.finditer(text):
        args = _arguments(text, m.end() - 1)
        if args and args[0] in ("self", "cls"):
            args = args[1:]
        out.append((m.group(1), text.count("\n", 0, m.start()) + 1, len(args)))
    return out


def test_parser_reads_multiline_signatures(tmp_path):
    src = tmp_path / "m.pyx"
    src.write_text(
        "cdef struct S:\n    i64 a\n"
        "cdef inline double f(const i64* a, Py_ssize_t s,  # note (x, y)\n"
        "                     i64 e, double[:, ::1] m) noexcept nogil:\n    pass\n"
        "def g(self, a, b=(1, 2), *, c=None):\n    pass\n"
        "    cpdef object h(x):\n        pass\n")
    assert signatures(src) == [("f", 3, 4), ("g", 6, 3), ("h", 8, 1)]


def test_no_kernel_function_takes_more_than_nine_arguments():
    files = sorted([*KERNEL.glob("*.pyx"), *KERNEL.glob("*.pxd")])
    found = [sig for path in files for sig in signatures(path)]
    assert len(found) > 100, "the parser found too few functions: is the pattern broken?"
    long = [f"{path.name}:{line} {name} takes {n}"
            for path in files for name, line, n in signatures(path)
            if n > MAX_ARGS and (path.name, name) not in KNOWN_LONG]
    assert not long, "kernel functions over 9 arguments (pass a struct or the rules "\
        "object):\n" + "\n".join(long)


def test_known_long_signatures_are_still_long():
    still = {(path.name, name) for path in KERNEL.glob("*.py[xd]")
             for name, _, n in signatures(path) if n > MAX_ARGS}
    assert KNOWN_LONG <= still, f"fixed, remove from KNOWN_LONG: {sorted(KNOWN_LONG - still)}"
