"""Every script in benchmarks/ still imports and builds its options.

CI runs no benchmark (they take minutes even at their smallest sizes), so a
script broken by a renamed function or a moved module would go unnoticed
until someone next measures, and so would a command line the READMEs show
with an option since renamed. Importing each script, asking it for
``--help`` and parsing each command shown catches those in seconds; whether
a script still runs end to end is checked by hand at its smallest sizes
(benchmarks/README.md, "Smoke runs").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def _load(script: Path, monkeypatch):
    # The scripts import each other by their bare names, as when run from the folder.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"_benchmark_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_scripts_are_there():
    assert {"bench_local", "bench_distributed", "plans"} <= {s.stem for s in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.stem)
def test_script_imports_and_parses_its_options(script, monkeypatch, capsys):
    module = _load(script, monkeypatch)
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    assert stopped.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage:") and "--help" in usage


class _Parsed(Exception):
    """Raised in place of running a benchmark once its command line is parsed."""


def _documented_commands() -> list[str]:
    """Every ``python benchmarks/...`` command of the READMEs, in code blocks or inline."""
    commands = []
    for page in (BENCHMARKS / "README.md", BENCHMARKS.parent / "README.md"):
        text = page.read_text()
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                commands.append(line.split("  #")[0])
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        commands += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    found = []
    for command in commands:
        match = re.search(r"python (benchmarks/\S+\.py.*)", command)
        if match:
            # Placeholders (<main at ebeaf9a>) stand for one argument.
            found.append(re.sub(r"<[^>]*>", "PLACEHOLDER", match.group(1)).strip())
    return sorted(set(found))


COMMANDS = _documented_commands()


def test_the_readmes_show_commands():
    assert any(c.startswith("benchmarks/bench_local.py") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_documented_command_parses(command, monkeypatch):
    """Each command line the READMEs show is one its script still accepts."""
    script, *args = shlex.split(command)
    module = _load(BENCHMARKS.parent / script, monkeypatch)
    monkeypatch.setattr(sys, "argv", [script, *args])
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, *a, **kw):
        parse(self, *a, **kw)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    with pytest.raises(_Parsed):
        module.main()


def _compare(tmp_path, monkeypatch, old: dict, new: dict) -> int:
    """``reference_releases.py --compare old.json new.json`` on these digests."""
    module = _load(BENCHMARKS / "reference_releases.py", monkeypatch)
    monkeypatch.chdir(tmp_path)
    for name, digests in (("old.json", old), ("new.json", new)):
        Path(name).write_text(json.dumps(digests))
    return module.compare("old.json", "new.json")


REFUSED = "error: DMondrianError: column 'person_id' is unique"


@pytest.mark.parametrize(("old", "new", "status", "said"), [
    ("ab12", "ab12", 0, "identical"),
    ("ab12", "cd34", 1, "DIFFERENT"),
    (REFUSED, REFUSED, 1, "refused in both (DMondrianError: column 'person_id' is unique)"),
    (REFUSED, REFUSED.replace("Error", "Warning"), 1, "DIFFERENT refusals"),
    (REFUSED, REFUSED + "!", 1, "DIFFERENT refusals"),
    (REFUSED, "ab12", 1, "DIFFERENT: refused in old.json only"),
    ("ab12", REFUSED, 1, "DIFFERENT: refused in new.json only"),
])
def test_compare_tells_refusals_from_releases(old, new, status, said, tmp_path, monkeypatch,
                                              capsys):
    got = _compare(tmp_path, monkeypatch, {"case": old, "other": "ee"},
                      {"case": new, "other": "ee"})
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("case "))
    assert line.split(maxsplit=1)[1].startswith(said)
    assert got == status
    summary = out.splitlines()[-1]
    # A refusal is never counted as an identical release.
    assert summary.startswith(f"{2 if said == 'identical' else 1} identical of 2")
    assert ("refused in both" in summary) == said.startswith("refused")
