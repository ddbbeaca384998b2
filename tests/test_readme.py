"""README stays honest: its Python snippets and its command lines run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.S)
# Set-up lines are what CI itself runs; benchmarks are too slow for a test.
_NOT_HERE = ("pip install", "python -m pytest", "python benchmarks/")


def _blocks(language):
    return [body for lang, body in _BLOCK.findall(README.read_text()) if lang == language]


def _commands():
    commands = []
    for body in _blocks("bash"):
        text = body.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith(_NOT_HERE):
                commands.append(line)
    return commands


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_python_snippet_runs(index, tmp_path):
    code = _blocks("python")[index]
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=300,
                   env={**os.environ, "MPLBACKEND": "Agg"})


def test_command_lines_run_in_order(tmp_path):
    commands = _commands()
    assert any(c.startswith("dmondrian anonymize") for c in commands)
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "MPLBACKEND": "Agg"}
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=tmp_path, env=env, timeout=300,
                                capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
