"""``--isolate``: each replica runs in ``<run_dir>/workdir``, which links the project's top-level entries.

Real ``deviate-replicate`` runs of tiny scripts (CPU): files the project writes to relative paths land in each
replica's own workdir and the project folder is left as it was (no ``shared_outputs`` problem); a folder that
already exists in the project is a link, so writes into it are still shared and still named; the choice is
part of the configuration (a rerun with the other choice is refused); ``--trainer`` and warm start chdir too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deviate_cb.launch.isolation import WORKDIR, launch_dir_of, make_workdir
from deviate_cb.report.problems import study_problems
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
        f.write("x")  # data/ exists in the project: a link, shared even with --isolate
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


def test_isolated_replicas_write_into_their_own_workdir_and_leave_the_project_alone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SAVER)
    before = _listing(project)
    done = _replicate(
        project, tmp_path, "--isolate", "--metric-regex", "acc=(?P<acc>[0-9.]+)", "--", "python", "train.py"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote the same paths" not in done.stdout + done.stderr
    assert _listing(project) == before
    for replica in (0, 1):
        run_dir = run_path(tmp_path / "runs", "train", "algo+impl", replica)
        workdir = run_dir / WORKDIR
        assert (workdir / "out" / "ckpt.pt").is_file() and not (workdir / "out").is_symlink()
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


def test_trainer_mode_isolates_and_an_existing_project_folder_stays_shared_and_named(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "fn.py").write_text(TRAINER)
    done = _replicate(project, tmp_path, "--isolate", "--cold", "--trainer", "fn.py:main")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (project / "history.json").exists()
    for replica in (0, 1):
        workdir = run_path(tmp_path / "runs", "fn", "algo+impl", replica) / WORKDIR
        assert (workdir / "history.json").read_text() == str(workdir)
    assert (project / "data" / "written.txt").read_text() == "xx"
    shared = [line for line in done.stdout.splitlines() if "wrote the same paths" in line]
    assert len(shared) == 1 and f"({project / 'data' / 'written.txt'})" in shared[0], done.stdout


def test_the_workdir_links_every_top_level_entry_but_the_store(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "train.py").write_text("")
    (project / ".env").write_text("")
    run_dir = run_path(project / "runs", "e", "algo", 0)
    run_dir.mkdir(parents=True)
    workdir = make_workdir(run_dir, project, project / "runs")
    assert sorted(p.name for p in workdir.iterdir()) == [".env", "src", "train.py"]
    assert all(p.is_symlink() for p in workdir.iterdir())
    assert make_workdir(run_dir, project, project / "runs") == workdir  # again: kept as it is
    assert launch_dir_of(str(workdir)) == str(project) and launch_dir_of(str(project)) == str(project)
