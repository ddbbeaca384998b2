"""Every example in examples/ runs (as a subprocess, with a timeout) and says what it should."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _need(*modules: str) -> None:
    for module in modules:
        if not _has(module):
            pytest.skip(f"{module} is not installed")


def _adult_dir() -> Path | None:
    folder = os.environ.get("DMONDRIAN_ADULT_DIR")
    if folder and (Path(folder) / "adult.data").is_file():
        return Path(folder)
    return None


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MPLBACKEND"] = "Agg"
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_example(name: str, *args, timeout: int = 300, **env) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT,
                          env=_env(**env), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_quickstart():
    out = run_example("quickstart.py")
    assert "equivalence classes, smallest has 2 rows (k=2)" in out


def test_adult():
    if _adult_dir() is None:
        pytest.skip("UCI Adult is absent: set DMONDRIAN_ADULT_DIR to the folder of adult.data")
    out = run_example("adult.py", "5", "50")
    assert "Adult: 30,162 records" in out
    for k in (5, 50):
        line = next(x for x in out.splitlines() if x.startswith(f"=== k = {k}:"))
        smallest = int(line.split("smallest ")[1].split(",")[0])
        assert smallest >= k


def test_pipeline():
    _need("sklearn")
    out = run_example("pipeline.py")
    rows = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()
            if line.strip().startswith(("original", "k="))}
    assert set(rows) == {"original", "k=5", "k=10", "k=50"}
    assert all(0.5 < acc <= 1.0 for acc in rows.values())
    if _adult_dir():
        assert out.startswith("UCI Adult: 21,113 training rows")


def test_cluster():
    out = run_example("cluster.py", DMONDRIAN_EXAMPLE_ROWS="20000", DASK_SCHEDULER_ADDRESS=None)
    assert "started a LocalCluster" in out and "dashboard: http" in out
    assert "20,000 rows in" in out


def test_notebook_is_valid():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    nbformat.validate(nb)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for needed in ("Client(", "dashboard_link", "write_census_parquet", "progress(",
                   "dmondrian.report(", "class_size_histogram", "partition_painting"):
        assert needed in code
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook without outputs"


def test_notebook_runs(tmp_path, monkeypatch):
    _need("nbclient", "ipykernel")
    import nbclient
    import nbformat

    # A kernelspec naming this very interpreter, so the notebook runs on the
    # environment under test whatever kernels the machine has registered.
    spec = tmp_path / "jupyter" / "kernels" / "dmondrian-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "dmondrian test", "language": "python",
        "env": {"PYTHONPATH": _env()["PYTHONPATH"]},
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="dmondrian-test",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()

    def text(cell):
        parts = []
        for out in cell.outputs:
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/plain", ""))
        return "\n".join(parts)

    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert "dashboard: http" in text(cells[0])
    assert "k-anonymous: True" in text(cells[3])
    assert text(cells[3]).strip()  # the report is shown
    for plot_cell in cells[4:6]:
        assert any("image/png" in out.get("data", {}) for out in plot_cell.outputs), plot_cell
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors
