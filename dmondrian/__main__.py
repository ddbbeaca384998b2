"""``python -m dmondrian``: the same command line as ``dmondrian``."""

from __future__ import annotations

if __name__ == "__main__":  # pytest --doctest-modules imports this file: do nothing then
    from .cli import main

    raise SystemExit(main())
