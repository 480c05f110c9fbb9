"""Helpers for the real-project suite: ``deviate-replicate -- COMMAND`` run for real on a project folder.

The projects under ``projects/`` never import deviate-cb (but ``standalone_seeded``, which uses its callback
itself); each is replicated through command mode with the
``deviate-replicate`` console script installed next to the running interpreter, as a real subprocess whose
working directory is the project folder (as a user would run it), writing its run store under a temporary
directory.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.keras_helpers import Replicated as KerasSuiteRun

__all__ = [
    "PROJECTS",
    "Replicated",
    "child_env",
    "deviate_replicate",
    "file_tree",
    "replicate",
    "require",
    "seed_call",
    "values_of",
]

PROJECTS = Path(__file__).resolve().parent / "projects"


def deviate_replicate() -> Path:
    """The ``deviate-replicate`` console script of the interpreter running the tests (e.g. ``.venv/bin``)."""
    script = Path(sys.executable).parent / ("deviate-replicate.exe" if os.name == "nt" else "deviate-replicate")
    if not script.exists():
        pytest.fail(f"deviate-replicate is not installed next to {sys.executable} (pip install -e .)")
    return script


def require(module: str, package: str) -> None:
    """Skip the calling test when ``module`` cannot be imported, naming the package to install."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not importable: pip install '{package}' (or the dev extra: pip install -e '.[dev]')")


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without a run context, a Keras backend or a GPU of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVIATE_", "HYDRA_"))}
    for name in ("CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "KERAS_BACKEND", "XLA_FLAGS", "PL_GLOBAL_SEED"):
        env.pop(name, None)
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU only, as on CI
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the project folders must stay exactly as they are
    env.update(extra or {})
    return env


def file_tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` (relative path, sorted) with its size and modification time."""
    return {
        path.relative_to(folder).as_posix(): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@dataclass
class Replicated(KerasSuiteRun):
    """A finished ``deviate-replicate ... -- COMMAND`` call, and the project folder before and after it.

    Reading the replicas (``run_dir``, ``manifest``, ``rows``, ``logged``, ``final``) is the Keras suite's.
    """

    argv: list[str]
    project: Path
    project_before: dict[str, tuple[int, int]] = field(repr=False)
    project_after: dict[str, tuple[int, int]] = field(repr=False)

    @property
    def output(self) -> str:
        return f"$ {shlex.join(self.argv)}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    def seeding(self, replica: int) -> dict[str, Any]:
        record = self.manifest(replica)
        assert "seeding" in record, f"run.json of replica {replica} has no 'seeding': {sorted(record)}"
        return record["seeding"]

    def log(self, replica: int, name: str = "stdout.log") -> str:
        return (self.run_dir(replica) / name).read_text(errors="replace")


def replicate(
    project: str,
    tmp: Path,
    command: Sequence[str],
    *,
    variant: str,
    n: int = 2,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 420,
    copy: bool = False,
) -> Replicated:
    """``deviate-replicate -n N --variant V --out <tmp>/runs --experiment PROJECT ARGS -- COMMAND`` in the project.

    With ``copy`` the project runs from a copy of its folder, ``<tmp>/project`` (for a project that writes into its
    own folder: the repository's copy stays as it is); ``project``, ``project_before`` and ``project_after`` are
    then the copy's. The replicas' temporary directory is then ``<tmp>/tmpdir`` (``TMPDIR``), outside the copy:
    writes under the temporary directory are not counted as the project's outside writes, and ``<tmp>`` is in it.
    """
    folder = PROJECTS / project
    if copy:
        folder = Path(shutil.copytree(folder, tmp / "project"))
        (tmp / "tmpdir").mkdir()
        env = {"TMPDIR": str(tmp / "tmpdir"), **(env or {})}
    out = tmp / "runs"
    argv = [
        str(deviate_replicate()),
        *("-n", str(n), "--variant", variant, "--out", str(out), "--experiment", project),
        *args,
        "--",
        *command,
    ]
    before = file_tree(folder)
    proc = subprocess.run(
        argv, cwd=folder, env=child_env(env), capture_output=True, text=True, timeout=timeout, check=False
    )
    after = file_tree(folder)
    return Replicated(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        out,
        project,
        variant,
        argv=argv,
        project=folder,
        project_before=before,
        project_after=after,
    )


def seed_call(seeding: Mapping[str, Any], call: str | tuple[str, ...], asked: int) -> dict[str, Any]:
    """The one recorded seeding call named ``call`` (or one of the names) that asked for ``asked``."""
    names = (call,) if isinstance(call, str) else call
    found = [c for c in seeding.get("calls", []) if c.get("call") in names and c.get("asked") == asked]
    assert len(found) == 1, f"expected one {' or '.join(names)} call asking {asked} in run.json seeding {seeding}"
    return found[0]


def values_of(rows: Sequence[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], list[float]]:
    """``logged`` rows split into where each value was recorded (stage .. epoch) and the values."""
    return [row[:-1] for row in rows], [row[-1] for row in rows]
