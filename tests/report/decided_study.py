"""A real study replicated until decided, for the tests that ``deviate report`` and ``deviate_cb.report.load``
give the same answers: ``trainers/decided_study.py`` replicated by the ``deviate-replicate`` console script, as a
user runs it from the project's folder (``good``: 3 runs; ``poor``: ``--until-decided --against`` the good group,
decided at its second look), and the ``deviate`` console script run on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

import pytest

TRAINER = Path(__file__).resolve().parent / "trainers" / "decided_study.py"
REPO = Path(__file__).resolve().parents[2]


def script(name: str) -> str:
    """A console script installed next to the running interpreter (``.venv/bin/deviate``)."""
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{name} is not installed next to {sys.executable} (pip install -e .)"
    return str(path)


def child_env(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The test's environment without a run context, a terminal width or a GPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_") and k not in ("COLUMNS", "LINES")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", **(extra or {}))
    return env


_BUILT: dict[str, Path] = {}


def decided_study(factory: pytest.TempPathFactory) -> Path:
    """The study, made once per test session (each test module that needs it asks here)."""
    if "study" not in _BUILT:
        _BUILT["study"] = make_decided_study(factory.mktemp("decided"))
    return _BUILT["study"]


def make_decided_study(tmp: Path) -> Path:
    """Replicate ``good`` 3 times, then ``poor`` until decided against it; return the run store."""
    project = tmp / "project"
    project.mkdir()
    shutil.copy(TRAINER, project / "train.py")
    out = tmp / "runs"
    common = ("--variant", "algo+impl", "--out", str(out), "--parallel", "2")
    for args in (
        ("--trainer", "train.py:good", "-n", "3", "--experiment", "good", *common),
        ("--trainer", "train.py:poor", "-n", "3", "--experiment", "poor", *common, "--until-decided",
         "--against", "experiment=good", "--metric", "val_acc", "--max-runs", "5"),
    ):  # fmt: skip
        done = subprocess.run(
            [script("deviate-replicate"), *args], cwd=project, env=child_env(), capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    return out


def deviate(*args: str, env: Optional[Mapping[str, str]] = None) -> subprocess.CompletedProcess[str]:
    """``deviate ARGS`` as a subprocess, its output captured (a pipe: no terminal)."""
    return subprocess.run(
        [script("deviate"), *args], env=child_env(env), capture_output=True, text=True, timeout=300, cwd=REPO
    )
