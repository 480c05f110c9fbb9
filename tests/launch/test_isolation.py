"""``--isolate``: each replica runs in ``<run_dir>/.workdir/<launch dir name>``, which links the project's entries.

The layout (``..`` sees the launch directory's parent, the store is never linked) and the copy-on-write
(:mod:`deviate_cb.launch.replica.copy_on_write`, its real audit hook in this process while a test activates it): a write
into a linked file or folder makes it the replica's own (rewritten, appended, renamed onto, nested folders,
``torch.save``), the project's file is left as it was, and a link the workdir did not make is never replaced.
Then real ``deviate-replicate`` runs of tiny scripts (CPU): files the project writes to relative paths, and into
folders that already exist in the project, land in each replica's own workdir and the project folder is left as
it was (no ``shared_outputs`` problem); the choice is part of the configuration (a rerun with the other choice
is refused); ``--trainer`` and warm start chdir too; a replica that fails says it ran in the isolated working
directory and what ``..`` reaches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from deviate_cb.launch.replica import copy_on_write
from deviate_cb.launch.replica.copy_on_write import CopyOnWrite
from deviate_cb.launch.replica.isolation import WORKDIR, isolation_note, launch_dir_of, make_workdir, workdir_of
from deviate_cb.report.answers.problems import study_problems
from deviate_cb.store.run_directory import run_path

REPO = Path(__file__).resolve().parents[2]

SAVER = """
import json, os, torch
os.makedirs("out", exist_ok=True)
torch.save({"w": 1}, "out/ckpt.pt")
with open("history.json", "w") as f:
    json.dump({"cwd": os.getcwd()}, f)
print("acc=0.5")
"""

TRAINER = """
import os

def main():
    with open("history.json", "w") as f:
        f.write(os.getcwd())
    with open(os.path.join("data", "written.txt"), "a") as f:
        f.write("x")  # data/ exists in the project: made the replica's own, the project's file is kept
    return {"acc": 0.5}
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path / "scratch")  # the project is under pytest's temporary folder
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _replicate(project: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "scratch").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "-n", "2", "--out", str(tmp_path / "runs"), *args],
        cwd=project,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


FAILING = """
import os
print(open(os.path.join("..", "data", "train.csv")).read())
"""


@pytest.mark.slow
def test_isolated_replicas_write_into_their_own_workdir_and_leave_the_project_alone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SAVER)
    (project / "out").mkdir()
    (project / "out" / "ckpt.pt").write_bytes(b"left by an earlier run")  # linked: rewritten as the replica's own
    before = _listing(project)
    done = _replicate(
        project, tmp_path, "--isolate", "--metric-regex", "acc=(?P<acc>[0-9.]+)", "--", "python", "train.py"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote the same paths" not in done.stdout + done.stderr
    assert _listing(project) == before and (project / "out" / "ckpt.pt").read_bytes() == b"left by an earlier run"
    for replica in (0, 1):
        run_dir = run_path(tmp_path / "runs", "train", "algo+impl", replica)
        workdir = run_dir / WORKDIR / "project"
        assert not (workdir / "out").is_symlink() and not (workdir / "out" / "ckpt.pt").is_symlink()
        assert (workdir / "out" / "ckpt.pt").read_bytes() != b"left by an earlier run"
        assert json.loads((workdir / "history.json").read_text()) == {"cwd": str(workdir)}
        assert (workdir / "train.py").is_symlink() and (workdir / "train.py").resolve() == project / "train.py"
        manifest = json.loads((run_dir / "run.json").read_text())
        assert manifest["isolate"] is True and manifest["workdir"] == str(workdir)
        assert manifest["configuration"]["isolate"] is True and "outside_writes" not in manifest
        assert manifest["start_mode"] == "warm"  # one template, in the launch directory, for every workdir
    assert not {p.kind for p in study_problems(tmp_path / "runs")} & {"shared_outputs", "read_other_replica"}
    # the other choice is another configuration: refused like any other change
    rerun = _replicate(project, tmp_path, "--metric-regex", "acc=(?P<acc>[0-9.]+)", "--", "python", "train.py")
    assert rerun.returncode == 2 and "--isolate" in rerun.stderr, rerun.stderr


def test_trainer_mode_isolates_and_an_existing_project_folder_becomes_the_replicas_own(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "written.txt").write_text("kept:")
    (project / "fn.py").write_text(TRAINER)
    done = _replicate(project, tmp_path, "--isolate", "--cold", "--trainer", "fn.py:main")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / "history.json").exists()
    for replica in (0, 1):
        workdir = workdir_of(run_path(tmp_path / "runs", "fn", "algo+impl", replica), project)
        assert (workdir / "history.json").read_text() == str(workdir)
        assert (workdir / "data" / "written.txt").read_text() == "kept:x"  # copied, then appended to
    assert (project / "data" / "written.txt").read_text() == "kept:"
    assert "wrote the same paths" not in done.stdout + done.stderr


def test_a_failed_isolated_replica_says_where_it_ran_and_what_dotdot_reaches(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(FAILING)  # ../data/train.csv is not there: FileNotFoundError
    done = _replicate(project, tmp_path, "-n", "1", "--isolate", "--cold", "--", "python", "train.py")
    assert done.returncode != 0
    workdir = workdir_of(run_path(tmp_path / "runs", "train", "algo+impl", 0), project)
    assert f"it ran with --isolate in {workdir}" in done.stdout + done.stderr, done.stdout + done.stderr
    assert f"`..` holds links to the entries of {tmp_path}" in done.stdout + done.stderr


# ------------------------------------------------------------------------------------------------ the layout


def test_dotdot_sees_the_launch_directorys_parent_but_never_the_store(tmp_path: Path) -> None:
    parent = tmp_path / "examples"
    project = parent / "mnist"
    (project / "src").mkdir(parents=True)
    (project / "main.py").write_text("")
    (project / ".env").write_text("")
    (parent / "data").mkdir()
    (parent / "data" / "train.csv").write_text("x,y")
    (parent / "notes.txt").write_text("")
    run_dir = run_path(parent / "runs", "e", "algo", 0)  # --out ../runs: in the parent, never linked
    run_dir.mkdir(parents=True)
    workdir = make_workdir(run_dir, project, parent / "runs")
    assert workdir == run_dir / WORKDIR / "mnist" == workdir_of(run_dir, project)
    assert sorted(p.name for p in workdir.iterdir()) == [".env", "main.py", "src"]
    assert all(p.is_symlink() for p in workdir.iterdir())
    assert sorted(p.name for p in workdir.parent.iterdir()) == ["data", "mnist", "notes.txt"]
    assert not workdir.is_symlink() and (workdir / ".." / "data" / "train.csv").read_text() == "x,y"
    assert (workdir / ".." / "data").resolve() == (parent / "data").resolve()
    assert make_workdir(run_dir, project, parent / "runs") == workdir  # again: kept as it is
    assert launch_dir_of(str(workdir)) == str(project) and launch_dir_of(str(project)) == str(project)
    # --out inside the launch directory: that entry is left out there
    inner = run_path(project / "runs", "e", "algo", 0)
    inner.mkdir(parents=True)
    assert "runs" not in {p.name for p in make_workdir(inner, project, project / "runs").iterdir()}
    note = isolation_note(workdir)
    assert f"with --isolate in {workdir}" in note and f"entries of {parent}" in note
    assert isolation_note(project) == "" and isolation_note(None) == ""


# ------------------------------------------------------------------------------------------- copy-on-write

_active: list[Optional[CopyOnWrite]] = [None]
_hooked: list[bool] = []


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    cow = _active[0]
    if cow is not None:
        cow.audit(event, args)


@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[tuple[Path, Path, CopyOnWrite]]:
    """A project with a checkpoint and a folder left by an earlier run, a replica's workdir linking them, and
    the copy-on-write hook of that replica active in this process (audit hooks cannot be removed: one
    dispatcher, installed once, calls the active one)."""
    project = tmp_path / "parent" / "app"
    (project / "ckpt" / "a" / "b").mkdir(parents=True)
    (project / "best.pt").write_bytes(b"old")
    (project / "ckpt" / "last.pt").write_bytes(b"old last")
    (project / "ckpt" / "a" / "b" / "deep.txt").write_text("deep")
    (project / "ckpt" / "a" / "keep.txt").write_text("keep")
    (tmp_path / "parent" / "data").mkdir()
    run_dir = tmp_path / "runs" / "experiment=e" / "variant=algo" / "replica=0"
    run_dir.mkdir(parents=True)
    workdir = make_workdir(run_dir, project, tmp_path / "runs")
    if not _hooked:
        sys.addaudithook(_dispatch)
        _hooked.append(True)
    cow = CopyOnWrite(run_dir, project)
    _active[0] = cow
    try:
        yield project, workdir, cow
    finally:
        _active[0] = None


def test_a_rewritten_linked_file_becomes_the_replicas_own(isolated: tuple[Path, Path, CopyOnWrite]) -> None:
    project, workdir, cow = isolated
    with open(workdir / "best.pt", "wb") as f:
        f.write(b"mine")
    assert (project / "best.pt").read_bytes() == b"old"
    assert not (workdir / "best.pt").is_symlink() and (workdir / "best.pt").read_bytes() == b"mine"
    fd = os.open(workdir / "ckpt" / "last.pt", os.O_WRONLY | os.O_TRUNC)  # os.open's flags, in a linked folder
    os.write(fd, b"new")
    os.close(fd)
    assert (project / "ckpt" / "last.pt").read_bytes() == b"old last"
    assert (workdir / "ckpt" / "last.pt").read_bytes() == b"new" and not (workdir / "ckpt").is_symlink()
    assert (workdir / "ckpt" / "a").is_symlink()  # what was not written stays a link (no copy)
    # `a/..` through a's link would reach the launch directory's ckpt/last.pt: the walk makes `a` real first
    with open(os.path.join(workdir, "ckpt", "a", "..", "last.pt"), "wb") as f:
        f.write(b"again")
    assert (project / "ckpt" / "last.pt").read_bytes() == b"old last" and not (workdir / "ckpt" / "a").is_symlink()
    made = ["best.pt", "ckpt", "ckpt/last.pt", "ckpt/a"]
    assert cow.made == [str(workdir / name) for name in made]


def test_an_append_or_an_update_in_place_keeps_the_content(isolated: tuple[Path, Path, CopyOnWrite]) -> None:
    project, workdir, _ = isolated
    with open(workdir / "best.pt", "ab") as f:
        f.write(b"+a")
    with open(workdir / "ckpt" / "last.pt", "r+b") as f:
        f.write(b"NEW")
    assert (workdir / "best.pt").read_bytes() == b"old+a" and (workdir / "ckpt" / "last.pt").read_bytes() == b"NEW last"
    assert (project / "best.pt").read_bytes() == b"old" and (project / "ckpt" / "last.pt").read_bytes() == b"old last"
    with open(workdir / "best.pt", "rb") as f:  # reads change nothing
        assert f.read() == b"old+a"
    os.truncate(workdir / ".." / "data" / ".." / "app" / "best.pt", 1)  # any spelling of the path
    assert (workdir / "best.pt").read_bytes() == b"o" and (project / "best.pt").read_bytes() == b"old"


def test_a_rename_target_and_a_nested_path_under_linked_folders(isolated: tuple[Path, Path, CopyOnWrite]) -> None:
    project, workdir, _ = isolated
    (workdir / "tmp.pt").write_bytes(b"renamed")
    os.replace(workdir / "tmp.pt", workdir / "ckpt" / "a" / "b" / "deep.txt")
    assert (project / "ckpt" / "a" / "b" / "deep.txt").read_text() == "deep"
    assert (workdir / "ckpt" / "a" / "b" / "deep.txt").read_bytes() == b"renamed"
    for folder in ("ckpt", "ckpt/a", "ckpt/a/b"):
        assert (workdir / folder).is_dir() and not (workdir / folder).is_symlink(), folder
    assert (workdir / "ckpt" / "a" / "keep.txt").is_symlink() and (
        workdir / "ckpt" / "a" / "keep.txt"
    ).read_text() == "keep"
    os.makedirs(workdir / ".." / "data" / "cache" / "v1")  # a folder made in a linked folder of `..`
    (workdir / ".." / "data" / "cache" / "v1" / "x.txt").write_text("x")
    assert not (project.parent / "data" / "cache").exists()
    assert (workdir.parent / "data" / "cache" / "v1" / "x.txt").read_text() == "x"
    os.replace(workdir / "best.pt", workdir / "prev.pt")  # a rotation: the earlier file moves as the replica's own
    with open(workdir / "prev.pt", "ab") as f:
        f.write(b"+rotated")
    assert (workdir / "prev.pt").read_bytes() == b"old+rotated" and (project / "best.pt").read_bytes() == b"old"
    assert sorted(os.listdir(project)) == ["best.pt", "ckpt"] and sorted(os.listdir(workdir / "ckpt")) == [
        "a",
        "last.pt",
    ]


def test_a_link_the_workdir_did_not_make_is_never_replaced(isolated: tuple[Path, Path, CopyOnWrite]) -> None:
    project, workdir, cow = isolated
    victim = project.parent / "victim.txt"
    victim.write_text("theirs")
    os.unlink(workdir / "best.pt")
    os.symlink(victim, workdir / "best.pt")  # not where make_workdir pointed it: the project's (or anyone's)
    os.symlink(project / "ckpt", workdir / "own_link")  # a link the project made in its workdir
    with open(workdir / "best.pt", "a") as f:
        f.write("+")
    with open(workdir / "own_link" / "new.txt", "w") as f:
        f.write("n")
    assert (workdir / "best.pt").is_symlink() and (workdir / "own_link").is_symlink() and cow.made == []
    assert victim.read_text() == "theirs+"  # the project's own open went where its link points; we wrote nothing
    (project / "ckpt" / "new.txt").unlink()
    outside = project / "best.pt"  # a path outside the workdir: never touched
    with open(outside, "ab") as f:
        f.write(b"!")
    assert outside.read_bytes() == b"old!" and cow.made == []


def test_a_path_that_cannot_be_made_the_replicas_own_warns_and_never_fails_the_write(
    isolated: tuple[Path, Path, CopyOnWrite], capsys: pytest.CaptureFixture[str]
) -> None:
    project, workdir, cow = isolated
    blocker = Path(f"{workdir / 'ckpt'}.deviate-{os.getpid()}-{threading.get_ident()}")
    blocker.write_text("")  # where the real folder would be staged: its mkdir fails
    with open(workdir / "ckpt" / "last.pt", "wb") as f:
        f.write(b"through")
    assert (project / "ckpt" / "last.pt").read_bytes() == b"through" and cow.made == []
    warned = capsys.readouterr().err
    assert f"--isolate could not make {workdir / 'ckpt' / 'last.pt'} this replica's own" in warned, warned
    assert (workdir / "ckpt").is_symlink()  # left as it was


def test_a_run_directory_reached_through_a_link_is_still_isolated(tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "best.pt").write_bytes(b"old")
    (tmp_path / "store").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "store")  # --out given through a link
    run_dir = tmp_path / "out" / "experiment=e" / "variant=algo" / "replica=0"
    run_dir.mkdir(parents=True)
    workdir = make_workdir(run_dir, project, tmp_path / "out")
    cow = CopyOnWrite(run_dir, project)
    real = Path(os.path.realpath(workdir))  # os.getcwd() in the replica spells it so
    cow.before_write(str(real / "best.pt"), "truncate")
    assert not (real / "best.pt").is_symlink() and (project / "best.pt").read_bytes() == b"old"


def test_x_mode_creates_only_and_torch_save_rewrites(
    isolated: tuple[Path, Path, CopyOnWrite], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, workdir, cow = isolated
    with pytest.raises(FileExistsError), open(workdir / "ckpt" / "last.pt", "x"):  # as in the project: it exists
        pass
    assert (workdir / "ckpt" / "last.pt").is_symlink() and not (workdir / "ckpt").is_symlink()
    torch = pytest.importorskip("torch")
    monkeypatch.setitem(copy_on_write._state, "cow", cow)
    save = copy_on_write._private(torch.save)  # what patch_torch_save puts in torch.save's place
    save({"w": torch.ones(2)}, str(workdir / "best.pt"))
    assert (project / "best.pt").read_bytes() == b"old"
    assert not (workdir / "best.pt").is_symlink() and torch.load(workdir / "best.pt")["w"].tolist() == [1.0, 1.0]
