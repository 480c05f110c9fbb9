"""A run store's values are input: a hostile ``configuration`` costs one replica, CSV cells never become formulas.

Issue 45, item 9. A real study: ``deviate-replicate`` (the console script, from the project's folder) trains a
tiny logistic regression (NumPy) 3 times in each of two experiments, ``e`` and ``f``.

- One ``run.json`` of ``e`` whose ``configuration`` is not an object (a list, a string, a number, null) or an object
  of absurd values (nested lists, a string of 300,000 characters, a list for ``mode``): ``report`` (json, csv,
  table, md, html), ``compare``, ``power`` and ``deviate_cb.report.load`` name that file in one warning line, leave
  that replica out and report the other two of ``e`` (the whole group was dropped as "2 configurations", with
  empty words); ``status`` lists it with no traceback; a resume of ``e`` is refused in one line that says its
  configuration cannot be read (it said ``--metric-regex none vs [...]``, which the replica never ran).
- CSV cells a spreadsheet would run: experiments named ``@SUM(A1)`` and ``-2+3`` (``deviate-replicate`` takes
  them) and a metric renamed ``=HYPERLINK("http://x","click")`` in the metrics files; every ``--format csv`` table
  of ``report`` (rows, ``--headline``), ``compare`` (``--a/--b``, ``--by``) and ``power``, written by the real
  ``deviate`` and read back with Python's csv module, holds those names with a leading ``'``, every negative
  number unchanged, and stderr says how many cells were escaped in one note line.
- Other fields of the wrong type (``status``, ``seed``, ``experiment``, ``variant``, ``replica``): no traceback;
  a ``status`` that is not a string is named in one warning with its file (the run was "unknown", unexplained).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import deviate_cb
from tests.helpers.report_study import run_cli

pytestmark = pytest.mark.slow

SCRIPT = """\
import sys

import numpy as np

seed = int(sys.argv[sys.argv.index("--seed") + 1])
rng = np.random.default_rng(seed)
x = rng.normal(size=(64, 3))
y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=64) > 0).astype(float)
w = rng.normal(scale=0.1, size=3)
for _ in range(50):  # a tiny logistic regression, full-batch gradient descent
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    w -= 0.5 * x.T @ (p - y) / len(y)
print(f"acc={float(((x @ w > 0) == y).mean())}")
"""
REGEX = ("--metric-regex", r"acc=(?P<acc>\S+)")
PACKAGE_ROOT = str(Path(deviate_cb.__file__).resolve().parents[1])  # the code under test, also in subprocesses


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    return env


def _replicate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "deviate-replicate"
    if not script.exists():
        pytest.fail(f"deviate-replicate is not installed next to {sys.executable} (pip install -e .)")
    return subprocess.run(
        [str(script), "--out", "runs", "--variant", "algo", *REGEX, *args, "--", "python", "train.py", "--seed",
         "{seed}"],
        cwd=project, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("study") / "project"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT)
    for experiment in ("e", "f"):
        done = _replicate(project, "-n", "3", "--experiment", experiment)
        assert done.returncode == 0, done.stdout + done.stderr
    return project


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Path:
    """A copy of the study for one test to damage."""
    return Path(shutil.copytree(built, tmp_path / "project", symlinks=True))


def _manifest(project: Path, experiment: str = "e", replica: int = 1) -> Path:
    return project / "runs" / f"experiment={experiment}" / "variant=algo" / f"replica={replica}" / "run.json"


def _set(path: Path, key: str, value: object) -> None:
    manifest = json.loads(path.read_text())
    manifest[key] = value
    path.write_text(json.dumps(manifest))


def _naming(err: str, path: Path) -> str:
    """The one warning line that names ``path``; no traceback anywhere."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if str(path) in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("deviate: warning: "), lines[0]
    return lines[0]


def _ns(out: str) -> dict[str, int]:
    return {row["experiment"]: row["n"] for row in json.loads(out) if row["metric"] == "acc"}


HOSTILE = {
    "a list": ([1, 2], "`configuration` is a JSON list, not an object"),
    "a string": ("algo", "`configuration` is a JSON string, not an object"),
    "a number": (3.5, "`configuration` is a JSON number, not an object"),
    "null": (None, "`configuration` is null, not an object"),
    "nested lists": ({"mode": "command", "command": [["python"]]}, "`configuration.command` holds a JSON list"),
    "a huge string": ({"mode": "command", "trainer": "x" * 300_000}, "300,000 characters, more than 100,000"),
    "a list for mode": ({"mode": ["command"], "variant": "algo"}, "`configuration.mode` is a JSON list"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_configuration_costs_its_replica_only(capsys, project: Path, case: str) -> None:
    value, why = HOSTILE[case]
    path = _manifest(project)
    _set(path, "configuration", value)
    runs = str(project / "runs")
    code, out, err = run_cli(capsys, "report", runs, "--format", "json")
    assert code == 0, err
    line = _naming(err, path)
    assert why in line and "left out of the statistics" in line and len(line) < 400, line
    assert _ns(out) == {"e": 2, "f": 3}  # the group is reported, without that replica
    for fmt in ("csv", "table", "md", "html"):
        code, out, err = run_cli(capsys, "report", runs, "--format", fmt)
        assert code == 0 and why in _naming(err, path), (fmt, err)
        assert "is not reported" not in err and "is not reported" not in out, (fmt, err)
    code, out, err = run_cli(capsys, "compare", runs, "--a", "experiment=e", "--b", "experiment=f", "--format", "json")
    assert code == 0 and why in _naming(err, path), err
    (row,) = json.loads(out)
    assert (row["n_a"], row["n_b"]) == (2, 3), row
    code, out, err = run_cli(capsys, "power", runs, "--metric", "acc", "--effect", "0.05", "--format", "json")
    assert code == 0 and why in _naming(err, path), err
    code, out, err = run_cli(capsys, "status", runs, "--no-cluster")
    assert code == 0 and "Traceback" not in err and "6 replicas" in out, out + err
    from deviate_cb.report import load

    study = load(runs)
    (warning,) = [w for w in study.warnings if str(path) in w]
    assert why in warning
    # the launcher reading its own store: a resume of e is refused in one line that says why, nothing runs
    done = _replicate(project, "-n", "4", "--experiment", "e")
    assert done.returncode == 2, done.stdout + done.stderr
    (error,) = [text for text in done.stderr.splitlines() if "error" in text]
    assert "replica 1" in error and "a recorded configuration that cannot be read" in error and why in error, error
    assert not (path.parent.parent / "replica=3").exists()


@pytest.mark.parametrize("field", ["status", "seed", "experiment", "variant", "replica"])
@pytest.mark.parametrize("value", [["completed"], 7])
def test_manifest_fields_of_the_wrong_type_never_raise(capsys, project: Path, field: str, value: object) -> None:
    path = _manifest(project)
    _set(path, field, value)
    runs = str(project / "runs")
    for command in (["report", runs, "--format", "json"], ["report", runs, "--format", "csv"], ["report", runs],
                    ["compare", runs, "--a", "experiment=e", "--b", "experiment=f"], ["status", runs, "--no-cluster"],
                    ["power", runs, "--metric", "acc", "--effect", "0.05"]):  # fmt: skip
        code, _, err = run_cli(capsys, *command)
        assert code == 0 and "Traceback" not in err, (command, err)
        assert all(line.startswith("deviate: warning: ") for line in err.splitlines()), (command, err)
        if field == "status" and command[0] != "status":  # what the report cannot use is named, with its file
            assert "`status` is a JSON" in _naming(err, path), (command, err)


# -- CSV cells a spreadsheet would run ------------------------------------------------------------------------

FORMULA = '=HYPERLINK("http://x","click")'
STARTS = ("=", "+", "-", "@", "\t", "\r")
NEGATIVE = ("--metric-regex", r"margin=(?P<margin>\S+)")


def _rename_metric(run: Path, old: str, new: str) -> None:
    """The metrics file of ``run`` with series ``old`` named ``new`` (footer summary rewritten to match), as
    anyone who can write the store can do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deviate_cb.store.footer_summary import with_summary

    path = run / "metrics.parquet"
    table = pq.read_table(path)
    names = [new if name == old else name for name in table.column("name").to_pylist()]
    table = table.set_column(table.schema.get_field_index("name"), "name", pa.array(names, pa.string()))
    pq.write_table(with_summary(table), path)
    _set(run / "run.json", "metrics_summary", None)  # the manifest's copy is stale now: the file is read


@pytest.fixture(scope="module")
def hostile_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("names") / "project"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT + 'print(f"margin={-0.5 - float(w[0]) / 100}")\n')
    for experiment in ("@SUM(A1)", "-2+3"):
        done = _replicate(project, "-n", "3", f"--experiment={experiment}", *NEGATIVE)
        assert done.returncode == 0, done.stdout + done.stderr
    for run in (project / "runs" / "experiment=-2+3" / "variant=algo").glob("replica=*"):
        _rename_metric(run, "acc", FORMULA)
    return project


def _deviate(project: Path, *args: str) -> tuple[list[list[str]], str]:
    """``deviate ARGS --format csv`` run as a user would, its output read back with the csv module."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "deviate"), *args, "--format", "csv"],
        cwd=project, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return list(csv.reader(io.StringIO(done.stdout))), done.stderr


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    "args",
    [
        ("report", "runs"),
        ("report", "runs", "--headline"),
        ("compare", "runs", "--a", "experiment=@SUM(A1)", "--b", "experiment=-2+3"),
        ("compare", "runs", "--by", "experiment"),
        ("power", "runs", "--effect", "0.05"),
    ],
    ids=["report", "headline", "compare", "compare-by", "power"],
)
def test_csv_cells_never_become_formulas(hostile_names: Path, args: tuple[str, ...]) -> None:
    rows, err = _deviate(hostile_names, *args)
    cells = [cell for row in rows for cell in row]
    formulas = [c for c in cells if c.startswith(STARTS) and not (_is_number(c) and c.strip() == c)]
    assert formulas == [], formulas  # a spreadsheet would run these
    escaped = [c for c in cells if c.startswith("'") and c[1:].startswith(STARTS)]
    assert any(name in c for name in ("@SUM(A1)", "-2+3", "HYPERLINK") for c in escaped), rows
    if args[0] == "report" and len(args) == 2:  # the rows: the names, and the negative metric stays a number
        by_name = {(row[0], row[2]): row for row in rows[1:]}
        assert ("'@SUM(A1)", "margin") in by_name and ("'-2+3", "'" + FORMULA) in by_name, by_name
        mean = by_name[("'@SUM(A1)", "margin")][rows[0].index("mean")]
        assert _is_number(mean) and float(mean) < 0, mean  # -0.5 is data, not a formula: never escaped
    (note,) = [line for line in err.splitlines() if "CSV cell" in line]
    assert note.startswith(f"deviate: note: {len(escaped)} CSV cell"), note
    assert "leading '" in note and "--format json" in note, note
