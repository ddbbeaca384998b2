"""README and the user guide stay honest: their snippets and command lines run as written.

The pages checked are README.md, the getting-started page and every page of
docs/guide/ (a page added there is checked with no edit here). Each Python
block runs in a fresh interpreter; each page's command lines run in order in
one folder, as a reader would type them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "docs" / "getting-started.md",
         *sorted((ROOT / "docs" / "guide").glob("*.md"))]
_BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.S)
# Set-up lines and the docs build are what CI itself runs (README's set-up line
# runs `dmondrian demo`, which tests/cli/test_cli.py's test_demo checks as well);
# benchmarks are too slow for a test.
_NOT_HERE = ("pip install", "python -m pytest", "python -m sphinx", "python benchmarks/",
             "dmondrian demo")


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(page.read_text()) if lang == language]


def _lines(page: Path) -> list[str]:
    """Every command line of a page's bash blocks, continuations joined, comments cut."""
    lines = []
    for body in _blocks(page, "bash"):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line:
                lines.append(line)
    return lines


def _commands(page: Path) -> list[str]:
    return [line for line in _lines(page) if not line.startswith(_NOT_HERE)]


def _env() -> dict:
    bindir = Path(sys.executable).parent
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "MPLBACKEND": "Agg"}


SNIPPETS = [pytest.param(page, i, id=f"{_name(page)}-{i}")
            for page in PAGES for i in range(len(_blocks(page, "python")))]


def test_the_pages_are_there():
    assert len(PAGES) > 3 and all(page.is_file() for page in PAGES)
    assert any(c.startswith("dmondrian anonymize") for c in _commands(README))


@pytest.mark.parametrize("page, index", SNIPPETS)
def test_python_snippet_runs(page, index, tmp_path):
    code = _blocks(page, "python")[index]
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=300,
                   env=_env())


@pytest.mark.parametrize("page", [p for p in PAGES if _commands(p)], ids=_name)
def test_command_lines_run_in_order(page, tmp_path):
    for command in _commands(page):
        result = subprocess.run(command, shell=True, cwd=tmp_path, env=_env(), timeout=300,
                                capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\n{result.stderr}"


def test_ci_runs_the_set_up_as_readme_says():
    """The two set-up commands come first, and .ci/run runs README's set-up lines verbatim."""
    lines = _lines(README)
    assert lines[:2] == ['pip install -e ".[test]" && dmondrian demo', "python -m pytest"]
    ci = [shlex.join(shlex.split(line)) for line in (ROOT / ".ci" / "run").read_text()
          .splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for line in lines:
        if line.startswith(_NOT_HERE[:3]):
            assert shlex.join(shlex.split(line)) in ci, f"README's {line!r} is not in .ci/run"
