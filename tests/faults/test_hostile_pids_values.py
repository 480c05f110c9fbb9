"""Process ids in a ``run.json`` that are not process ids (issue 45, item 5: ``launcher_pid: 2**70``).

A real study's manifest edited as a hostile or careless user would: ``launcher_pid`` (of a replica that says
``running``) set to ``2**70``, a negative number, 0, a string, a float or a bool. ``deviate status`` and
``deviate report`` never pass it to ``os.kill`` (``2**70`` raised ``OverflowError`` in ``status``; ``-5`` and 0
settled the replica ``killed`` as if a launcher had been checked): one warning line names the file and the
field, the replica is shown as its manifest says, and the other replica is still reported. A rerun of
``deviate-replicate`` on a manifest whose ``pid`` and ``bootstrap`` pids are such values names each and goes on
(``2**70`` as ``pid`` crashed it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.replicate_helpers import child_env, manifest_or_empty

HERE = Path(__file__).resolve().parent
VARIANT = ("experiment=e", "variant=algo+impl")
TRAINER = ["--trainer", f"{HERE / 'sleeper_fn.py'}:main"]

pytestmark = [pytest.mark.slow]


def _script(name: str) -> str:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable} (pip install -e .)")
    return str(script)


def _run(argv: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        argv, cwd=cwd, env=child_env({"SLEEPER_SECONDS": "0"}), capture_output=True, text=True, timeout=180
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real study of two completed replicas, to copy and edit."""
    out = tmp_path_factory.mktemp("hostile-pids") / "runs"
    out.parent.mkdir(exist_ok=True)
    code, stdout, stderr = _run(
        [_script("deviate-replicate"), "-n", "2", *TRAINER, "--out", str(out), "--experiment", "e"], out.parent
    )
    assert code == 0, stdout + stderr
    return out


def _edited(study: Path, tmp_path: Path, **fields: Any) -> tuple[Path, Path]:
    """A copy of ``study`` whose replica 0 manifest has ``fields``; (the copy, that manifest)."""
    out = tmp_path / "runs"
    shutil.copytree(study, out)
    path = out.joinpath(*VARIANT, "replica=0", "run.json")
    manifest = json.loads(path.read_text())
    manifest.update(fields)
    path.write_text(json.dumps(manifest))
    return out, path


@pytest.mark.parametrize("value", [2**70, -5, 0, "12", 3.5, True], ids=repr)
def test_a_launcher_pid_that_is_not_a_process_id_is_one_warning(study: Path, tmp_path: Path, value: Any) -> None:
    out, path = _edited(study, tmp_path, status="running", launcher_pid=value)
    for command in ("status", "report"):
        code, stdout, stderr = _run([_script("deviate"), command, str(out)], tmp_path)
        assert code == 0 and "Traceback" not in stdout + stderr, stdout + stderr
        named = [line for line in stderr.splitlines() if "`launcher_pid` is not a process id" in line]
        assert len(named) == 1 and str(path) in named[0] and f"received {value!r}" in named[0], stderr
        rows = [line.split() for line in stdout.splitlines() if line.startswith("e ")]
        if command == "status":
            assert [row[4] for row in rows] == ["running", "completed"], stdout
        else:  # the completed replica in the statistics, the other one left out of them as it says
            assert [row[3] for row in rows] == ["running"] and "(1 completed run," in stdout, stdout
    assert json.loads(path.read_text())["status"] == "running"  # nothing recorded from a value that says nothing


def test_a_rerun_names_pids_that_are_not_process_ids_and_goes_on(study: Path, tmp_path: Path) -> None:
    recorded = manifest_or_empty(study.joinpath(*VARIANT, "replica=0"))
    bootstrap = [{**recorded["bootstrap"][0], "pid": -1}]
    out, path = _edited(study, tmp_path, status="killed", pid=2**70, bootstrap=bootstrap)
    argv = [_script("deviate-replicate"), "-n", "2", *TRAINER, "--out", str(out), "--experiment", "e"]
    code, stdout, stderr = _run(argv, tmp_path)
    assert code == 0 and "Traceback" not in stdout + stderr, stdout + stderr
    named = [line for line in (stdout + stderr).splitlines() if "is not a process id" in line]
    assert len(named) == 2 and all(str(path) in line for line in named), stdout + stderr
    assert "`pid` is not a process id (received 1180591620717411303424" in named[0], stderr
    assert "`bootstrap[0].pid` is not a process id (received -1" in named[1], stderr
    assert json.loads(path.read_text())["status"] == "completed"


def test_pid_1_in_a_run_json_does_not_keep_a_lost_replica_running(study: Path, tmp_path: Path) -> None:
    """``pid: 1`` (init, alive forever, never a replica's process) made a replica whose launcher is gone look alive."""
    out, path = _edited(study, tmp_path, status="running", pid=1, pid_start=None, bootstrap=[])
    code, stdout, stderr = _run([_script("deviate"), "status", str(out)], tmp_path)
    assert code == 0 and "2 replicas: 1 completed, 1 killed" in stdout, stdout + stderr
    assert json.loads(path.read_text())["status"] == "killed"  # its launcher (the first one) is gone
