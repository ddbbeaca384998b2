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


NOTEBOOK = EXAMPLES / "notebook.ipynb"
# The committed notebook shows its tables and plots on any notebook viewer, and
# stays small: static PNG plots, no widget state, no interactive blobs.
NOTEBOOK_MAX_BYTES = 300_000
_INTERACTIVE = ("application/vnd.jupyter.widget", "application/javascript",
                "application/vnd.bokehjs", "application/vnd.plotly")


def execute_notebook(nb, folder: Path) -> None:
    """Run ``nb`` top to bottom in ``folder`` on this very interpreter, outputs in place."""
    import nbclient

    # A kernelspec naming this interpreter, so the notebook runs on the
    # environment under test whatever kernels the machine has registered.
    spec = folder / "jupyter" / "kernels" / "dmondrian-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "dmondrian test", "language": "python",
        "env": {"PYTHONPATH": _env()["PYTHONPATH"]},
    }))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(folder / "jupyter")
    try:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="dmondrian-test",
                                record_timing=False,
                                resources={"metadata": {"path": str(folder)}}).execute()
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    # The kernelspec is this machine's, not the notebook's.
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3",
                              "language": "python"}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = _merge_streams(cell.outputs)


def _merge_streams(outputs):
    """One output per run of a stream, as a terminal shows it (a progress bar's last state)."""
    import nbformat

    merged = []
    for out in outputs:
        if (out.output_type == "stream" and merged and merged[-1].output_type == "stream"
                and merged[-1].name == out.name):
            merged[-1].text += out.text
        else:
            merged.append(out)
    for out in merged:
        if out.output_type == "stream":
            # Each line's last state: the text after its last carriage return
            # (a progress bar's final line, not the clearing that follows it).
            lines = out.text.replace("\x1b[2K", "").split("\n")
            out.text = "\n".join(([part for part in line.split("\r") if part] or [""])[-1]
                                 for line in lines)
    return [nbformat.from_dict(dict(out)) for out in merged]


def _text(cell) -> str:
    parts = []
    for out in cell.outputs:
        parts.append(out.get("text", ""))
        parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def check_notebook_outputs(nb) -> None:
    """What a reader must see: the dashboard, the release verified, the report, two plots."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), \
        "run the notebook top to bottom once"
    assert "dashboard: http" in _text(cells[0])
    assert "k-anonymous: True" in _text(cells[3])
    assert any("text/html" in out.get("data", {}) for out in cells[3].outputs)  # the report
    for plot_cell in cells[4:6]:
        assert any("image/png" in out.get("data", {}) for out in plot_cell.outputs), plot_cell
    outputs = [o for c in cells for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [mime for o in outputs for mime in o.get("data", {})
                if mime.startswith(_INTERACTIVE)]


def test_notebook_is_committed_with_its_outputs():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for needed in ("Client(", "dashboard_link", "write_census_parquet", "progress(",
                   "dmondrian.report(", "class_size_histogram", "partition_painting"):
        assert needed in code
    check_notebook_outputs(nb)
    size = NOTEBOOK.stat().st_size
    assert size < NOTEBOOK_MAX_BYTES, f"the notebook is {size:,} bytes: keep its outputs small"


def test_notebook_runs(tmp_path):
    _need("nbclient", "ipykernel")
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    execute_notebook(nb, tmp_path)
    check_notebook_outputs(nb)


if __name__ == "__main__":
    # python tests/test_examples.py: re-run the notebook and commit it with its outputs.
    import tempfile

    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        execute_notebook(nb, Path(folder))
    check_notebook_outputs(nb)
    nbformat.write(nb, NOTEBOOK)
    print(f"{NOTEBOOK}: {NOTEBOOK.stat().st_size:,} bytes")
