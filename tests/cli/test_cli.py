"""The ``dmondrian`` command line, driven as a subprocess (``python -m dmondrian``).

Each subprocess pays Python + pandas start-up (about a second), so the
bad-invocation cases are started two at a time by one module fixture and the
tests only read their results. Every sub-command runs at least once as a real
subprocess; its further runs call ``main()`` in this process (:func:`in_process`),
the code path the console script and ``python -m dmondrian`` both take.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import in_process

from dmondrian.cli import main
from dmondrian.io import files as io

ROOT = Path(__file__).resolve().parents[2]
QIS = ["age", "zip", "sex"]
N_ROWS = 2000
BIG_ROWS = 150_000  # more than one 100,000-row write chunk: the kill lands mid-file


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MPLBACKEND"] = "Agg"
    env.update(extra)
    return env


def run(*args, cwd, env=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dmondrian", *map(str, args)], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout)


def run_failing_write(action, *args, cwd) -> subprocess.CompletedProcess:
    """The command line with its table writer failing half-way (tests/failing_write.py)."""
    script = Path(__file__).parents[1] / "failing_write.py"
    return subprocess.run([sys.executable, str(script), action, *map(str, args)], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=180)


def _people(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "zip": rng.choice(["02134", "02139", "10001", "10002", "94110", "94117"], n),
        "sex": rng.choice(["F", "M"], n),
        # In whole hundreds: an integer column nearly unique per row would be taken
        # for a record id, and refused (dmondrian.release.identifiers).
        "income": rng.integers(10, 1_000, n) * 100,
    })


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    df = _people(N_ROWS)
    df.to_csv(d / "people.csv", index=False)
    df.to_parquet(d / "people.parquet", index=False)
    (d / "ds").mkdir()  # a Parquet dataset directory of two files
    df.iloc[:1000].to_parquet(d / "ds" / "part.0.parquet", index=False)
    df.iloc[1000:].to_parquet(d / "ds" / "part.1.parquet", index=False)
    (d / "zip_hierarchy.txt").write_text(
        "02134;021**;0****;*\n02139;021**;0****;*\n10001;1000*;1****;*\n10002;1000*;1****;*\n"
        "94110;941**;9****;*\n94117;941**;9****;*\n")
    (d / "bad.csv").write_bytes(b'age,zip\n1,2,3,4\n"open quote\n')
    (d / "bad.parquet").write_bytes(b"not parquet")
    (d / "a_file").write_text("not a directory")
    _people(BIG_ROWS, seed=1).to_csv(d / "big.csv", index=False)
    return d


def _read_released(path: Path) -> pd.DataFrame:
    return io.read_table(str(path), dtypes={"zip": "str"})


def _assert_k_anonymous(released: pd.DataFrame, qis, k):
    sizes = released.astype({q: str for q in qis}).groupby(qis).size()
    assert sizes.min() >= k, sizes.sort_values().head()


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("dmondrian: error: "), stderr
    return lines[0]


# -- anonymize -----------------------------------------------------------------------------------


@pytest.mark.parametrize("src, dst, k, launch", [
    ("people.csv", "out.csv", 10, run),
    ("people.parquet", "out.parquet", 5, in_process),
    ("ds", "out_ds/", 25, in_process),  # a dataset directory in, a dataset directory out
    ("people.csv", "out.pq", 7, in_process),
], ids=["csv-subprocess", "parquet", "dataset", "pq"])
def test_anonymize_csv_and_parquet(work, src, dst, k, launch):
    proc = launch("anonymize", src, dst, "--k", k, "--qi", ",".join(QIS), "--dtype", "zip=str",
                  "--sensitive", "income", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal
    out = work / dst.rstrip("/")
    assert f"wrote {dst}" in proc.stdout and f"k={k}" in proc.stdout
    released = _read_released(out)
    original = _people(N_ROWS)
    assert len(released) == N_ROWS and list(released.columns) == list(original.columns)
    _assert_k_anonymous(released, QIS, k)
    # The sensitive column is untouched; the file's rows are shuffled (dmondrian.release.row_order).
    assert sorted(released["income"]) == sorted(original["income"])
    manifest = json.loads((work / f"{dst.rstrip('/')}.manifest.json").read_text())
    assert manifest["parameters"]["k"] == k
    assert manifest["parameters"]["quasi_identifiers"] == QIS
    assert manifest["parameters"]["sensitive"] == "income"
    assert manifest["rows"] == {"input": N_ROWS, "output": N_ROWS}
    assert manifest["extra"]["min_class_size"] >= k and manifest["achieved"]["k"] >= k
    assert manifest["extra"]["engine"] == "local" and manifest["metrics"]["rows"] == N_ROWS
    files = manifest["output"]["files"]  # every output file, hashed
    on_disk = [out] if out.is_file() else sorted(p for p in out.rglob("*") if p.is_file())
    assert [f["sha256"] for f in files] == \
        [hashlib.sha256(p.read_bytes()).hexdigest() for p in on_disk]
    assert not [p for p in os.listdir(work) if ".tmp-" in p or ".dmondrian-staging-" in p]


def test_seed_flags_and_options(work):
    # The seed's command line had no sub-command.
    proc = in_process("--input", "people.csv", "--output", "seed.csv", "--qi-names", "age,sex",
                      "--k", "5", "--max-depth", "2", cwd=work)
    assert proc.returncode == 0, proc.stderr
    released = pd.read_csv(work / "seed.csv", dtype=str)
    assert released.groupby(["age", "sex"]).ngroups <= 4  # two levels of cuts: <= 4 classes
    manifest = json.loads((work / "seed.csv.manifest.json").read_text())
    assert manifest["parameters"]["max_depth"] == 2
    assert manifest["extra"]["classes"] == released.groupby(["age", "sex"]).ngroups

    # The same flags on the sub-command, mixed with the new ones.
    proc = in_process("anonymize", "--input", "people.csv", "--output", "mid.parquet",
                      "--qi-names", "age", "--qi", "zip", "--k", "20", "--mode", "relaxed",
                      "--generalization", "midpoint", "--hierarchy", "zip=zip_hierarchy.txt",
                      "--dtype", "zip=str", cwd=work)
    assert proc.returncode == 0, proc.stderr
    released = pd.read_parquet(work / "mid.parquet")
    assert released["age"].dtype == np.float64  # midpoints are numbers
    hierarchy_labels = {"02134", "02139", "10001", "10002", "94110", "94117", "021**", "1000*",
                        "941**", "0****", "1****", "9****", "*"}
    assert set(released["zip"].astype(str)) <= hierarchy_labels
    _assert_k_anonymous(released, ["age", "zip"], 20)
    manifest = json.loads((work / "mid.parquet.manifest.json").read_text())
    assert manifest["parameters"]["hierarchies"] == {"zip": "zip_hierarchy.txt"}
    assert manifest["parameters"]["mode"] == "relaxed"


def test_overwrite_and_console_script(work):
    target = work / "again.csv"
    target.write_text("old\n")
    proc = in_process("anonymize", "people.csv", "again.csv", "--k", "3", "--qi", "age",
                      "--overwrite", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert len(pd.read_csv(target)) == N_ROWS
    script = shutil.which("dmondrian", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the dmondrian console script is not installed in this environment")
    proc = subprocess.run([script, "--version"], env=_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("dmondrian ")


# -- atomic output ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_killed_mid_write_leaves_no_output(work, fmt):
    out = work / f"killed.{fmt}"
    proc = run_failing_write("kill", "anonymize", "big.csv", out.name, "--k", "50", "--qi",
                             "age,sex", cwd=work)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
    assert not out.exists() and not Path(f"{out}.manifest.json").exists()
    # The process really died half-way through the file: its hidden staging
    # holds the first chunk only (the next run removes it: tests/io/test_staging.py).
    leftovers = [p for p in work.iterdir() if p.name.startswith(f".{out.name}.dmondrian-staging-")]
    assert len(leftovers) == 1
    # The writer writes the staged data itself (one staging: dmondrian.io.staging).
    written = [p for p in leftovers[0].rglob("*") if p.is_file() and p.name != "lock"]
    assert len(written) == 1 and written[0].name == out.name
    if fmt == "csv":
        with open(written[0]) as fh:
            assert 1 < sum(1 for _ in fh) < BIG_ROWS + 1
    shutil.rmtree(leftovers[0])


def test_failed_write_keeps_the_previous_output(work):
    out = work / "kept.csv"
    out.write_text("previous release\n")
    proc = run_failing_write("raise", "anonymize", "big.csv", out.name, "--k", "50", "--qi",
                             "age,sex", "--overwrite", cwd=work)
    assert proc.returncode == 2
    assert "injected write failure" in _one_error_line(proc.stderr)
    assert out.read_text() == "previous release\n"
    assert not Path(f"{out}.manifest.json").exists()
    assert not [p for p in work.iterdir() if p.name.startswith(".kept.csv.")]


# -- errors ----------------------------------------------------------------------------------

BAD = {
    "missing input": (["anonymize", "nope.csv", "o.csv", "--k", "5", "--qi", "age"],
                      "input 'nope.csv' does not exist"),
    "unknown column": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age,height"],
                       "'height' is not in people.csv"),
    "k zero": (["anonymize", "people.csv", "o.csv", "--k", "0", "--qi", "age"],
               "k must be an integer >= 1"),
    "k not a number": (["anonymize", "people.csv", "o.csv", "--k", "ten", "--qi", "age"],
                       "k must be an integer"),
    "k above rows": (["anonymize", "people.csv", "o.csv", "--k", "5000", "--qi", "age"],
                     "larger than the table's 2000 rows"),
    "unreadable csv": (["anonymize", "bad.csv", "o.csv", "--k", "1", "--qi", "age"],
                       "cannot read 'bad.csv' as CSV"),
    "corrupt parquet": (["anonymize", "bad.parquet", "o.csv", "--k", "1", "--qi", "age"],
                        "cannot read 'bad.parquet' as PARQUET"),
    "output under a file": (["anonymize", "people.csv", "a_file/o.csv", "--k", "5", "--qi",
                             "age"], "is not a directory"),
    "unknown format": (["anonymize", "people.csv", "o.xlsx", "--k", "5", "--qi", "age"],
                       "cannot tell the format of 'o.xlsx'"),
    "input twice": (["anonymize", "people.csv", "--input", "people.csv", "o.csv", "--k", "5",
                     "--qi", "age"], "either INPUT or --input"),
    "scheduler and workers": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age",
                               "--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"],
                              "excludes --workers"),
    "local and distributed": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age",
                               "--local", "--distributed"], "exclude each other"),
    "stall timeout zero": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age",
                            "--stall-timeout", "0"], "--stall-timeout must be a number of"),
    "unknown command": (["anonymise", "people.csv"], "invalid choice: 'anonymise'"),
    "hierarchy without file": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "zip",
                                "--hierarchy", "zip"], "bad --hierarchy 'zip'"),
    "hierarchy file missing": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "zip",
                                "--hierarchy", "zip=none.txt"], "file 'none.txt' does not exist"),
    "hierarchy for a non-QI": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age",
                                "--hierarchy", "zip=zip_hierarchy.txt"],
                               "not one of the quasi-identifiers"),
    "no qi": (["anonymize", "people.csv", "o.csv", "--k", "5"], "required: --qi"),
    "bad mode": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age", "--mode",
                  "loose"], "invalid choice: 'loose'"),
    "output exists": (["anonymize", "people.csv", "a_file", "--format", "csv", "--k", "5",
                       "--qi", "age"], "already exists"),
    "output is input": (["anonymize", "people.csv", "people.csv", "--k", "5", "--qi", "age"],
                        "same as INPUT"),
    "negative depth": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age",
                        "--max-depth", "-1"], "--max-depth must be an integer >= 0"),
    "duplicate qi": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age,age"],
                     "listed twice"),
    "unknown flag": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age", "--fast"],
                     "unrecognized arguments: --fast"),
    "no output": (["anonymize", "people.csv", "--k", "5", "--qi", "age"], "missing OUTPUT"),
    "bad dtype": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age", "--dtype",
                   "sex=datetime"], "cannot convert column 'sex' to datetime"),
    "bad memory limit": (["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age",
                          "--memory-limit", "lots"], "not a size: 'lots'"),
    "l without sensitive": (["verify", "people.csv", "--qi", "age", "--k", "2", "--l", "2"],
                            "--l needs --sensitive"),
    "t out of range": (["verify", "people.csv", "--qi", "age", "--k", "2", "--t", "1.5",
                        "--sensitive", "income"], "--t must be a number in [0, 1]"),
    "painting without original": (["plot", "painting", "people.csv", "--qi", "age,zip", "-o",
                                   "p.png"], "give --original"),
    "painting of 3 QIs": (["plot", "painting", "people.csv", "--qi", "age,zip,sex", "-o",
                           "p.png"], "--qi must name 2 columns"),
    "bad sweep k": (["sweep", "people.csv", "--qi", "age", "--k", "2,x"],
                    "--k must be an integer >= 1, got 'x'"),
}


# The list runs as real subprocesses; the rest go through main() in
# this process (same code path, without paying a Python start-up each).
SUBPROCESS_CASES = [
    "missing input", "unknown column", "k not a number", "k above rows", "unreadable csv",
    "input twice", "unknown command", "hierarchy without file",
    "hierarchy file missing",
]


def _own_output(name: str) -> str:
    # The cases run two at a time: each writes its own OUTPUT, since two live runs for
    # one OUTPUT are refused (dmondrian.io.staging's lock), as they should be.
    return f"o-{SUBPROCESS_CASES.index(name)}.csv"


@pytest.fixture(scope="module")
def bad_results(work):
    def case(name):
        return run(*[_own_output(name) if a == "o.csv" else a for a in BAD[name][0]], cwd=work)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(case, name) for name in SUBPROCESS_CASES}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_bad_invocation_is_one_line(bad_results, name, work):
    proc = bad_results[name]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    line = _one_error_line(proc.stderr)
    assert BAD[name][1] in line, line
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (work / _own_output(name)).exists()


@pytest.mark.parametrize("name", [n for n in BAD if n not in SUBPROCESS_CASES])
def test_bad_invocation_in_process(work, name, capsys, monkeypatch):
    monkeypatch.chdir(work)
    assert main(BAD[name][0]) == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert BAD[name][1] in line, line
    assert captured.out == ""
    assert not (work / "o.csv").exists()


def test_debug_shows_the_traceback(work):
    proc = run("anonymize", "nope.csv", "o.csv", "--k", "5", "--qi", "age", "--debug", cwd=work)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Traceback")
    assert proc.stderr.strip().splitlines()[-1] == \
        "dmondrian: error: input 'nope.csv' does not exist"


def test_help_has_an_example_for_every_command(capsys):
    for command in ([], ["anonymize"], ["report"], ["verify"], ["sweep"], ["plot"], ["demo"]):
        assert main([*command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "example" in text and "dmondrian" in text, command
    assert main(["--version"]) == 0
    assert re.match(r"dmondrian \S+", capsys.readouterr().out)


def test_progress_bar_on_a_terminal(work):
    """With stderr on a terminal, stages and a write bar appear; without, nothing."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dmondrian", "anonymize", "people.csv", "tty.csv", "--k", "5",
             "--qi", "age"], cwd=work, env=_env(), stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(master)
    text = b"".join(chunks).decode()
    assert "reading people.csv" in text and "anonymizing 2,000 rows" in text
    assert "writing tty.csv [" in text and "100%" in text


# -- report, verify, sweep, plot, demo (need the metrics/plot/synthetic modules) ------------------


@pytest.fixture(scope="module")
def released_csv(work) -> Path:
    proc = in_process("anonymize", "people.csv", "rel.csv", "--k", "10", "--qi", ",".join(QIS),
                      "--dtype", "zip=str", cwd=work)
    assert proc.returncode == 0, proc.stderr
    return work / "rel.csv"


def test_report_table_and_json(work, released_csv):
    proc = run("report", released_csv.name, "--qi", ",".join(QIS), "--sensitive", "income",
               "--original", "people.csv", "--dtype", "zip=str", "--k", "10", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "2,000" in proc.stdout and "NCP" in proc.stdout
    proc = in_process("report", "rel.csv", "--qi", ",".join(QIS), "--json", "--dtype",
                      "zip=str", cwd=work)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["rows"] == N_ROWS and report["achieved"]["k"] >= 10
    manifest = json.loads((work / "rel.csv.manifest.json").read_text())
    assert manifest["metrics"]["rows"] == N_ROWS  # the manifest carries the report too


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_verify_exit_codes(work, released_csv, fmt):
    name = released_csv.name
    if fmt == "parquet":
        name = "rel_verify.parquet"
        io.write_table(_read_released(released_csv), str(work / name), overwrite=True)
    # verify's one real subprocess: the csv case's OK (exit status 0 from the process).
    launch = run if fmt == "csv" else in_process
    ok = launch("verify", name, "--qi", ",".join(QIS), "--k", "10", "--dtype", "zip=str",
                cwd=work)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[0].endswith(": OK"), ok.stdout
    # The original table is not 10-anonymous: exit 1 and the violations listed.
    bad = in_process("verify", f"people.{fmt}", "--qi", ",".join(QIS), "--k", "10", "--json",
                     cwd=work)
    assert bad.returncode == 1, bad.stderr
    result = json.loads(bad.stdout)
    assert result["ok"] is False and result["n_violations"] > 0
    assert all(v["size"] < 10 for v in result["violations"])
    text = in_process("verify", f"people.{fmt}", "--qi", "age,sex", "--k", "10", cwd=work)
    assert text.returncode == 1 and "FAILED" in text.stdout.splitlines()[0]
    assert len(text.stdout.splitlines()) > 2  # the violating classes are listed


def test_sweep_and_plots(work, released_csv):
    proc = run("sweep", "people.csv", "--qi", ",".join(QIS), "--k", "50,2", "--dtype",
               "zip=str", "--json", "--plot", "sweep.png", cwd=work)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout.split("\nplot ")[0])
    assert [r["k"] for r in rows] == [2, 50]  # sorted
    for r in rows:  # every class holds >= k rows, so:
        assert r["classes"] <= N_ROWS // r["k"]
        assert r["discernibility"] >= N_ROWS * r["k"]
        assert 0.0 <= r["ncp"] <= 1.0
    assert (work / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The painting needs two ordered QIs: release age x income for it.
    proc = in_process("anonymize", "people.csv", "paint.csv", "--qi", "age,income", "--k", "20",
                      "--overwrite", cwd=work)
    assert proc.returncode == 0, proc.stderr
    for kind, table, qis, launch in (("histogram", "rel.csv", ",".join(QIS), run),
                                     ("painting", "paint.csv", "age,income", in_process)):
        proc = launch("plot", kind, table, "--qi", qis, "--dtype", "zip=str", "-o",
                      f"{kind}.png", "--overwrite", "--original", "people.csv", cwd=work)
        assert proc.returncode == 0, proc.stderr
        assert (work / f"{kind}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo(work):
    proc = run("demo", "--rows", "5000", "--k", "10", "--output", "demo.parquet", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "verified" in proc.stdout
    released = pd.read_parquet(work / "demo.parquet")
    assert len(released) == 5000


def test_anonymize_on_the_dask_engine(work):
    proc = run("anonymize", "ds", "dask_out/", "--k", "10", "--qi", ",".join(QIS), "--workers",
               "1", "--memory-limit", "2GB", cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "distributed engine" in proc.stdout
    released = pd.read_parquet(work / "dask_out")
    assert len(released) == N_ROWS
    _assert_k_anonymous(released, QIS, 10)
    manifest = json.loads((work / "dask_out.manifest.json").read_text())
    assert manifest["extra"]["engine"] == "distributed"
    assert manifest["extra"]["min_class_size"] >= 10 and manifest["rows"]["output"] == N_ROWS
    assert not [p for p in work.iterdir() if p.name.startswith(".dask_out.")]


def test_fsspec_urls_in_process(capsys):
    """Any fsspec URL works for INPUT, OUTPUT and the manifest (memory:// here)."""
    import fsspec

    root = "memory://cli-urls"
    _people(300).to_csv(f"{root}/people.csv", index=False)
    assert main(["anonymize", f"{root}/people.csv", f"{root}/out/", "--k", "5", "--qi",
                 "age,zip", "--dtype", "zip=str"]) == 0
    assert f"wrote {root}/out/" in capsys.readouterr().out
    released = io.read_table(f"{root}/out/")
    _assert_k_anonymous(released, ["age", "zip"], 5)
    with fsspec.open(f"{root}/out.manifest.json", "r") as fh:
        assert json.load(fh)["rows"] == {"input": 300, "output": 300}
    fsspec.filesystem("memory").rm("/cli-urls", recursive=True)


@pytest.mark.parametrize("flags, size, expected", [
    ([], 10, "local"),
    (["--local-limit", "1KB"], 10_000, "distributed-if-installed"),
    (["--distributed"], 10, "distributed"),
    (["--workers", "2"], 10, "distributed"),
    (["--local", "--local-limit", "1KB"], 10_000, "local"),
])
def test_engine_choice(tmp_path, flags, size, expected):
    from dmondrian.cli import build_parser
    from dmondrian.cli.anonymize import choose_engine

    src = tmp_path / "in.csv"
    src.write_bytes(b"x" * size)
    args = build_parser().parse_args(["anonymize", str(src), "o.csv", "--k", "2", "--qi", "a",
                                      *flags])
    chosen = choose_engine(args, str(src))
    if expected == "distributed-if-installed":
        has_dask_engine = importlib.util.find_spec("dmondrian.distributed") is not None
        expected = "distributed" if has_dask_engine else "local"
    assert chosen == expected


def test_l_diversity_and_t_closeness_flags(work, monkeypatch, capsys):
    monkeypatch.chdir(work)
    assert main(["anonymize", "people.csv", "ldiv.csv", "--k", "5", "--qi", "age,zip",
                 "--dtype", "zip=str", "--sensitive", "sex", "--l", "2", "--overwrite"]) == 0
    released = pd.read_csv(work / "ldiv.csv", dtype=str)
    assert released.groupby(["age", "zip"])["sex"].nunique().min() == 2
    manifest = json.loads((work / "ldiv.csv.manifest.json").read_text())
    assert manifest["parameters"]["l"] == 2 and manifest["parameters"]["sensitive"] == "sex"
    capsys.readouterr()
    assert main(["anonymize", "people.csv", "o.csv", "--k", "5", "--qi", "age", "--t",
                 "0.2"]) == 2
    assert "--t needs --sensitive" in _one_error_line(capsys.readouterr().err)
