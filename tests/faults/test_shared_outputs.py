"""Replicas that write to the project's own fixed paths are named, never silent (issue 26, item 2).

Each test runs ``deviate-replicate`` for real on a tiny command-mode script (CPU, torch where the issue's case
uses it) and reads what the launcher, ``deviate status``, ``deviate report`` and its HTML page say:

- two replicas writing ``./out/ckpt.pt`` (``torch.save``, which writes through C++ without an audit event) and
  ``./history.json`` (``open``) are a ``shared_outputs`` problem naming both absolute paths;
- a replica that loads the checkpoint another replica saved is a ``read_other_replica`` problem naming the
  path and the writer;
- replicas of two experiments writing the same file are one problem naming both groups (issue 43, item 8);
- writes inside the run directory or the temporary directory are no problem;
- a project inside the temporary directory is watched, but not what the ``tempfile`` module makes there (issue
  43, item 3).

The end-to-end tests run the replicas with ``TMPDIR`` pointing to a folder beside the project (a temporary
directory of their own, where ``mkstemp`` puts its files); the project inside the temporary directory is
``integrations/real_projects/test_watch_projects.py``'s.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pytest

from deviate_cb.capture.outside_writes import OutsideWrites
from deviate_cb.capture.temp_files import watch_tempfile
from deviate_cb.report.answers.problems import study_problems
from deviate_cb.store.ledger import writes_of
from deviate_cb.store.run_directory import RunDirectory, run_path

REPO = Path(__file__).resolve().parents[2]

SAVER = """
import json, os, torch
os.makedirs("out", exist_ok=True)
torch.save({"w": 1}, "out/ckpt.pt")
with open("history.json", "w") as f:
    json.dump({"loss": 1.0}, f)
print("acc=0.5")
"""

RESUMER = """
import os, torch
if os.path.exists("ckpt.pt"):
    torch.load("ckpt.pt")
else:
    torch.save({"w": 1}, "ckpt.pt")
print("acc=0.5")
"""

INSIDE = """
import os, tempfile
with open(os.path.join(os.environ["DEVIATE_RUN_DIR"], "mine.txt"), "w") as f:
    f.write("x")
fd, name = tempfile.mkstemp()
os.close(fd)
with open(name, "w") as f:
    f.write("y")
with open("train.py") as f:
    f.read()
print("acc=0.5")
"""


def _project(tmp_path: Path, source: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(source)
    (tmp_path / "scratch").mkdir()
    return project


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path / "scratch")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _run(
    args: list[str], cwd: Path, tmp_path: Path, module: str = "deviate_cb.cli.replicate"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )


def _replicate(
    project: Path, tmp_path: Path, *options: str, experiment: str = "train"
) -> subprocess.CompletedProcess[str]:
    args = ["-n", "2", "--out", str(tmp_path / "runs"), "--experiment", experiment, *options]
    args += ["--metric-regex", "acc=(?P<acc>[0-9.]+)", "--", "python", "train.py"]
    done = _run(args, project, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _manifest(tmp_path: Path, replica: int, experiment: str = "train") -> dict:
    return json.loads((run_path(tmp_path / "runs", experiment, "algo+impl", replica) / "run.json").read_text())


def _warnings(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


@pytest.mark.slow
def test_shared_paths_are_named_by_the_launcher_status_report_and_html(tmp_path: Path) -> None:
    project = _project(tmp_path, SAVER)
    done = _replicate(project, tmp_path)
    ckpt, history = str(project / "out" / "ckpt.pt"), str(project / "history.json")
    for replica in (0, 1):
        assert _manifest(tmp_path, replica)["outside_writes"] == {"paths": sorted([ckpt, history]), "more": 0}
    (line,) = _warnings(done.stdout + done.stderr, "wrote the same paths outside their run directories")
    assert line.startswith("deviate-replicate: warning: experiment=train variant=algo+impl: replicas 0, 1 wrote")
    assert f"({history}, {ckpt})" in line and "rerun with --isolate" in line
    status = _run(["status", str(tmp_path / "runs")], project, tmp_path, "deviate_cb.cli.main")
    assert _warnings(status.stderr, f"({history}, {ckpt})"), status.stderr
    report = _run(["report", str(tmp_path / "runs")], project, tmp_path, "deviate_cb.cli.main")
    assert report.returncode == 0, report.stderr
    assert _warnings(report.stderr, f"({history}, {ckpt})"), report.stderr
    assert "wrote the same paths outside" in report.stdout
    html = _run(["report", str(tmp_path / "runs"), "--format", "html"], project, tmp_path, "deviate_cb.cli.main")
    assert html.returncode == 0, html.stderr
    assert f"({history}, {ckpt}): they overwrote each other" in html.stdout
    (problem,) = [p for p in study_problems(tmp_path / "runs") if p.kind == "shared_outputs"]
    assert problem.replicas == (0, 1)


@pytest.mark.slow
def test_a_replica_that_loads_another_replicas_checkpoint_is_a_problem(tmp_path: Path) -> None:
    project = _project(tmp_path, RESUMER)
    done = _replicate(project, tmp_path)
    ckpt = str(project / "ckpt.pt")
    assert _manifest(tmp_path, 1)["outside_reads"] == [
        {"path": ckpt, "written_by": "experiment=train variant=algo+impl replica=0"}
    ]
    assert "outside_reads" not in _manifest(tmp_path, 0)
    (line,) = _warnings(done.stdout, "read files that another replica wrote")
    assert f"replica 1 read files that another replica wrote outside the run directories ({ckpt} written by " in line
    assert "experiment=train variant=algo+impl replica=0" in line
    kinds = {p.kind for p in study_problems(tmp_path / "runs")}
    assert "read_other_replica" in kinds and "shared_outputs" not in kinds  # only replica 0 wrote it


@pytest.mark.slow
def test_replicas_of_two_experiments_writing_one_file_are_one_problem_naming_both(tmp_path: Path) -> None:
    project = _project(tmp_path, SAVER)
    _replicate(project, tmp_path, "-n", "1", experiment="first")
    done = _replicate(project, tmp_path, "-n", "1", experiment="second")
    (line,) = _warnings(done.stdout + done.stderr, "wrote the same paths")
    assert "experiment=first variant=algo+impl (replica 0) and experiment=second variant=algo+impl (replica 0)" in line
    (problem,) = [p for p in study_problems(tmp_path / "runs") if p.kind == "shared_outputs"]
    assert [(g.experiment, g.replicas) for g in problem.groups] == [("first", (0,)), ("second", (0,))]
    assert problem.line() == line.removeprefix("deviate-replicate: warning: ")


def test_writes_inside_the_run_directory_or_the_temporary_directory_are_no_problem(tmp_path: Path) -> None:
    project = _project(tmp_path, INSIDE)
    done = _replicate(project, tmp_path)
    assert "outside" not in done.stdout + done.stderr
    assert "outside_writes" not in _manifest(tmp_path, 0)
    assert not {p.kind for p in study_problems(tmp_path / "runs")} & {"shared_outputs", "read_other_replica"}


# -- the watch itself, without a replica ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "outside"),
    [
        ("history.json", True),
        ("out/ckpt.pt", True),
        ("RUN/metrics.json", False),
        ("OUT/.deviate/writes/x.jsonl", False),
        ("/dev/null", False),
        ("mod/__pycache__/x.cpython-311.pyc", False),
    ],
)
def test_what_counts_as_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, outside: bool) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))  # tmp_path itself is in the temp dir
    run_dir = run_path(tmp_path / "runs", "e", "algo", 0)
    watch = OutsideWrites(run_dir, "e", "algo", 0)
    target = target.replace("RUN", str(run_dir)).replace("OUT", str(tmp_path / "runs"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        found: Optional[str] = watch.outside_path(target)
    finally:
        os.chdir(cwd)
    assert (found is not None) == outside
    if outside:
        assert found == str(tmp_path / target)


def test_a_read_is_checked_against_the_ledger_after_this_replicas_own_last_write(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    path = str(tmp_path / "ckpt.pt")
    one, two = (OutsideWrites(run_path(root, "e", "algo", k), "e", "algo", k) for k in (0, 1))
    one.wrote(path)
    two.read(path)
    assert two.reads == {path: "experiment=e variant=algo replica=0"}
    mine = OutsideWrites(run_path(root, "e", "algo", 0), "e", "algo", 0)
    mine.read(path)  # its own write
    assert mine.reads == {}
    assert two.section().outside_reads == [{"path": path, "written_by": "experiment=e variant=algo replica=0"}]


def test_the_last_writer_of_a_path_rewritten_within_a_second_is_known(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    path = str(tmp_path / "ckpt.pt")
    one, two = (OutsideWrites(run_path(root, "e", "algo", k), "e", "algo", k) for k in (0, 1))
    one.wrote(path)
    two.wrote(path)
    one.wrote(path)  # within a second of its last append, but replica 1 wrote meanwhile: appended again
    two.read(path)
    one.read(path)
    assert two.reads == {path: "experiment=e variant=algo replica=0"} and one.reads == {}
    assert [(e["op"], e["replica"]) for e in writes_of(root, path)] == [
        ("write", 0),
        ("write", 1),
        ("write", 0),
        ("read", 1),
    ]
    one.wrote(path)  # the ledger changed (replica 1's read): appended
    one.wrote(path)  # nothing since: not appended again
    assert [e["replica"] for e in writes_of(root, path) if e["op"] == "write"] == [0, 1, 0, 0]


# -- a project inside the temporary directory (issue 43, item 3) -----------------------------------------------


def _watch_in_temp(tmp_path: Path, replica: int, monkeypatch: pytest.MonkeyPatch) -> tuple[OutsideWrites, Path]:
    """Replica ``replica``'s watch, launched from ``<temp>/project`` (``<temp>``: the temporary directory), with
    ``tempfile`` watched as the bootstrap does (undone after the test)."""
    temp = tmp_path / "temp"
    project = temp / "project"
    (project / "out").mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    for name in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile"):
        # unwrapped (one watch a process: each replica's own here), and put back as they were after the test
        monkeypatch.setattr(tempfile, name, inspect.unwrap(getattr(tempfile, name)))
    run_dir = run_path(tmp_path / "runs", "e", "algo", replica)
    RunDirectory(run_dir).update_manifest(status="completed", experiment="e", variant="algo", replica=replica)
    watch = OutsideWrites(run_dir, "e", "algo", replica, launch_dir=str(project), script="")
    watch_tempfile(watch.made)
    return watch, project


def test_a_project_inside_the_temporary_directory_is_watched_but_not_what_tempfile_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for replica in (0, 1):
        watch, project = _watch_in_temp(tmp_path, replica, monkeypatch)
        ckpt = str(project / "out" / "ckpt.pt")
        assert watch.outside_path(ckpt) == ckpt
        watch._seen(ckpt, True)
        fd, scratch = tempfile.mkstemp()  # in the temporary directory, outside the project
        os.close(fd)
        fd, beside = tempfile.mkstemp(dir=project / "out", suffix=".pt")  # made by tempfile inside the project
        os.close(fd)
        with tempfile.TemporaryDirectory(dir=project) as folder, tempfile.NamedTemporaryFile(dir=project) as named:
            for path in (scratch, beside, os.path.join(folder, "ckpt.pt"), named.name):
                assert watch.outside_path(path) is None, path
                watch._seen(path, True)
        cache = str(tmp_path / "temp" / "torchinductor_me" / "x.py")  # a library's cache in the temp dir
        assert watch.outside_path(cache) is None
        assert watch.written.keys() == {ckpt}
    (problem,) = [p for p in study_problems(tmp_path / "runs") if p.kind == "shared_outputs"]
    assert problem.replicas == (0, 1) and f"({ckpt})" in problem.message


def test_a_launch_directory_that_holds_the_temporary_directory_leaves_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "project" / "tmp"))  # TMPDIR=$PWD/tmp
    watch = OutsideWrites(run_path(tmp_path / "runs", "e", "algo", 0), "e", "algo", 0, launch_dir=str(tmp_path))
    assert watch.outside_path(str(tmp_path / "project" / "tmp" / "x.bin")) is None
    assert watch.outside_path(str(tmp_path / "project" / "out.bin")) == str(tmp_path / "project" / "out.bin")
