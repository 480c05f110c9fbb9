"""Nothing the tool writes goes through a link it did not make (issue 45, item 2).

A run store is untrusted input. Each test plants a real symbolic link in a real store, pointing at a file or
folder outside it, runs the real ``deviate-replicate`` console script on a tiny command-mode script (plain
Python, well under a second a replica) from the project's folder, and checks that what lies outside is unchanged:

- a link at a ledger file ``OUT/.deviate/writes/<sha1 of a path>.jsonl``: the replica trains, warns once, and
  appends nothing outside;
- links at the study's own folders ``OUT/.deviate`` and ``OUT/.sequential``: the launcher refuses at start (exit 2,
  one line naming the folder), before any replica runs;
- a replica that replaces its own run folder by a link: ``run.json``, ``fingerprint.json`` and the metrics are
  not written through it;
- a link at ``DIR/.wandb-export``: ``deviate export wandb`` refuses (exit 2) and writes nothing there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deviate_cb.store.run_directory import run_path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE_TEXT = "the user's own file: not the store's\n"

WRITER = """
import json
with open("history.json", "w") as f:
    json.dump({"loss": 1.0}, f)
print("acc=0.5")
"""

# Moves its run folder away and puts a link to the moved folder in its place, then records what the moved folder
# holds; a launcher or bootstrap writing through the link afterwards changes those files.
SWAPPER = """
import hashlib, json, os
run_dir = os.environ["DEVIATE_RUN_DIR"]
moved = os.path.join(os.path.dirname(os.getcwd()), "moved")
os.rename(run_dir, moved)
os.symlink(moved, run_dir)
def digest(name):
    try:
        with open(os.path.join(moved, name), "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()
    except FileNotFoundError:
        return None
with open(os.path.join(os.path.dirname(os.getcwd()), "snapshot.json"), "w") as f:
    json.dump({n: digest(n) for n in ("run.json", "fingerprint.json", "metrics.parquet")}, f)
print("acc=0.5")
"""


def _console(name: str) -> list[str]:
    script = Path(sys.executable).parent / name
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "deviate_cb.cli.replicate" if name == "deviate-replicate" else "deviate_cb.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    (tmp_path / "scratch").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "scratch")
    env["WANDB_MODE"] = "offline"
    env["WANDB_SILENT"] = "true"
    return env


def _project(tmp_path: Path, source: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(source)
    return project


def _replicate(project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    argv = [*_console("deviate-replicate"), "-n", "1", "--out", str(tmp_path / "runs"), "--experiment", "train"]
    argv += ["--metric-regex", "acc=(?P<acc>[0-9.]+)", "--", sys.executable, "train.py"]
    return subprocess.run(argv, cwd=project, env=_env(tmp_path), capture_output=True, text=True, timeout=180)


def _outside_file(tmp_path: Path) -> Path:
    target = tmp_path / "outside.txt"
    target.write_text(OUTSIDE_TEXT)
    return target


def _run_text(tmp_path: Path) -> str:
    """Everything the launcher and the replica's logs say."""
    texts = [p.read_text(errors="replace") for p in (tmp_path / "runs").rglob("*.log") if p.is_file()]
    return "\n".join(texts)


def test_a_link_planted_at_a_ledger_file_is_not_appended_to(tmp_path: Path) -> None:
    project = _project(tmp_path, WRITER)
    outside = _outside_file(tmp_path)
    history = str(project / "history.json")
    ledger = tmp_path / "runs" / ".deviate" / "writes" / (hashlib.sha1(history.encode()).hexdigest() + ".jsonl")
    ledger.parent.mkdir(parents=True)
    ledger.symlink_to(outside)
    done = _replicate(project, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr  # the training goes on
    assert outside.read_text() == OUTSIDE_TEXT
    assert ledger.is_symlink()
    said = done.stdout + done.stderr + _run_text(tmp_path)
    assert f"{ledger} is a symbolic link deviate-cb did not make" in said, said
    manifest = json.loads((run_path(tmp_path / "runs", "train", "algo+impl", 0) / "run.json").read_text())
    assert manifest["status"] == "completed"


@pytest.mark.parametrize("folder", [".deviate", ".sequential"])
def test_the_launcher_refuses_links_at_the_studys_own_folders(tmp_path: Path, folder: str) -> None:
    project = _project(tmp_path, WRITER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / folder).symlink_to(elsewhere)
    done = _replicate(project, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert f"{tmp_path / 'runs' / folder}" in line and "symbolic link" in line, line
    assert list(elsewhere.iterdir()) == []
    assert not (project / "history.json").exists()  # refused before any replica ran


def test_a_run_folder_replaced_by_a_link_is_not_written_through(tmp_path: Path) -> None:
    project = _project(tmp_path, SWAPPER)
    done = _replicate(project, tmp_path)
    snapshot = json.loads((tmp_path / "snapshot.json").read_text())
    moved = tmp_path / "moved"

    def digest(name: str) -> str | None:
        path = moved / name
        return hashlib.sha1(path.read_bytes()).hexdigest() if path.exists() else None

    assert {name: digest(name) for name in snapshot} == snapshot, done.stdout + done.stderr
    assert not [p for p in moved.iterdir() if p.name.endswith(".tmp")]
    said = done.stdout + done.stderr
    assert "symbolic link deviate-cb did not make" in said, said


@pytest.mark.slow
def test_export_refuses_a_link_at_the_wandb_folder(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    project = _project(tmp_path, WRITER)
    assert _replicate(project, tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs" / ".wandb-export").symlink_to(elsewhere)
    argv = [*_console("deviate"), "export", "wandb", str(tmp_path / "runs"), "--mode", "offline"]
    done = subprocess.run(argv, cwd=project, env=_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stdout + done.stderr
    assert ".wandb-export" in done.stderr and "symbolic link" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []
    shutil.rmtree(tmp_path / "scratch", ignore_errors=True)


STANDALONE = """
import lightning as L
from deviate_cb.lightning import DeviateCallback
from lightning_cb.models import TinyModule, loader
cb = DeviateCallback("runs")
trainer = L.Trainer(max_epochs=1, callbacks=[cb], logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(TinyModule(), loader(32), loader(32, shuffle=False))
"""


@pytest.mark.slow
def test_a_standalone_run_never_claims_a_replica_through_a_planted_experiment_link(tmp_path: Path) -> None:
    """A ``DeviateCallback("runs")`` without the launcher, in a store whose ``experiment=`` folder is a link."""
    pytest.importorskip("lightning")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "experiment=train").symlink_to(elsewhere)
    (tmp_path / "train.py").write_text(STANDALONE)
    env = _env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests")])
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert list(elsewhere.iterdir()) == [], done.stderr[-2000:]
    assert f"{tmp_path / 'runs' / 'experiment=train'} is a symbolic link deviate-cb did not make" in done.stderr
