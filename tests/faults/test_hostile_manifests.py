"""A manifest is not a command: ``--until-decided`` relaunches group B only as its replicas agree (issue 45, item 3).

A real study: ``deviate-replicate`` (the console script, from the project's folder) makes group B (2 runs, so
that the first round tops it up: a relaunch of B) of a tiny command-mode script; then ``--until-decided
--against experiment=b`` runs group A against it.

- every B ``run.json``'s ``configuration.command`` edited to ``touch <marker>``: refused in one line naming the
  files and what differs from their own ``command`` and ``argv``, exit 2, the marker never created;
- the edit made consistent (``configuration``, ``command`` and ``argv`` of every file): B runs another program
  than A, so without ``--yes`` and without a terminal it is refused (shown, exit 2), the marker never created;
- a legitimate B (the same script, other arguments) still runs in rounds without ``--yes``; a legitimate B of
  another script runs with ``--yes``, or on a terminal when the user answers ``y`` (not ``n``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

SCRIPT = """\
import random
import sys

seed = int(sys.argv[sys.argv.index("--seed") + 1])
mean = float(sys.argv[sys.argv.index("--mean") + 1])
print(f"acc={mean + 0.01 * random.Random(seed).gauss(0.0, 1.0)}")
"""
REGEX = ("--metric-regex", r"acc=(?P<acc>\S+)")


def _replicate(project: Path, *args: str, stdin: int = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "deviate-replicate"
    if not script.exists():
        pytest.fail(f"deviate-replicate is not installed next to {sys.executable} (pip install -e .)")
    return subprocess.run(
        [str(script), "--out", str(project / "runs"), "--variant", "algo", *args],
        cwd=project,
        env=child_env(),
        stdin=stdin,  # by default no terminal to ask on
        capture_output=True,
        text=True,
        timeout=600,
    )


def _study(tmp_path: Path, script: str = "train.py", runs: int = 2) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT)
    (project / "base.py").write_text(SCRIPT)
    done = _replicate(project, "-n", str(runs), "--experiment", "b", *REGEX, "--", "python", script, "--seed", "{seed}",
                      "--mean", "0.8")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return project


def _until(project: Path, *extra: str, stdin: int = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return _replicate(project, "-n", "3", "--experiment", "a", "--until-decided", "--against", "experiment=b",
                      "--metric", "acc", "--max-runs", "6", "--parallel", "3", *REGEX, *extra, "--", "python",
                      "train.py", "--seed", "{seed}", "--mean", "0.9", stdin=stdin)  # fmt: skip


def _manifests(project: Path, experiment: str = "b") -> list[Path]:
    return sorted((project / "runs" / f"experiment={experiment}" / "variant=algo").glob("replica=*/run.json"))


def _edit(project: Path, command: list[str], *, everywhere: bool) -> None:
    for path in _manifests(project):
        manifest = json.loads(path.read_text())
        manifest["configuration"]["command"] = command
        if everywhere:  # the edit made consistent: the file's own command and the launcher's argv too
            manifest["command"] = command
            manifest["argv"] = [*manifest["argv"][: manifest["argv"].index("--") + 1], *command]
        path.write_text(json.dumps(manifest))


def test_an_edited_configuration_command_is_refused_and_never_runs(tmp_path: Path) -> None:
    project = _study(tmp_path)
    marker = tmp_path / "pwned"
    _edit(project, ["touch", str(marker)], everywhere=False)
    done = _until(project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert not marker.exists()
    (line,) = [text for text in done.stderr.splitlines() if "error" in text]
    assert "`--against` must name a group whose run.json files agree" in line, line
    assert "replica=0/run.json" in line and "replica=1/run.json" in line, line
    assert f"its configuration's command ['touch', '{marker}'] vs its argv's ['python', 'train.py'" in line, line
    assert not _manifests(project, "a")  # nothing launched


def test_a_consistent_edit_runs_another_program_only_with_yes(tmp_path: Path) -> None:
    project = _study(tmp_path)
    marker = tmp_path / "pwned"
    _edit(project, ["touch", str(marker)], everywhere=True)
    done = _until(project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert not marker.exists()
    assert f"it would run deviate-replicate -- touch {marker}" in done.stderr, done.stderr
    (line,) = [text for text in done.stderr.splitlines() if "error" in text]
    assert "`--yes` is required to relaunch experiment=b variant=algo with another program" in line, line
    assert "check the command and add --yes" in line and "no terminal to ask" in line, line
    assert not _manifests(project, "a")


def test_a_legitimate_b_still_runs(tmp_path: Path) -> None:
    project = _study(tmp_path)
    done = _until(project)  # the same script with another --mean: the same program, no --yes needed
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A better" in done.stdout, done.stdout
    assert "another program" not in done.stderr
    topped_up = json.loads(_manifests(project)[2].read_text())  # B's replica of the first round
    assert topped_up["status"] == "completed" and "--until-decided" not in topped_up["argv"]  # B's line, not A's
    assert topped_up["argv"][-1] == "0.8"


def test_a_b_of_another_script_needs_yes(tmp_path: Path) -> None:
    project = _study(tmp_path, script="base.py")
    refused = _until(project)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "it would run deviate-replicate -- python base.py --seed '{seed}' --mean 0.8" in refused.stderr
    assert not _manifests(project, "a")
    done = _until(project, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A better" in done.stdout, done.stdout


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="a terminal is opened with a pseudo-terminal")
def test_on_a_terminal_another_program_is_asked_for(tmp_path: Path) -> None:
    project = _study(tmp_path, script="base.py")
    for answer, status in (b"n\n", 2), (b"y\n", 0):
        leader, follower = os.openpty()
        try:
            os.write(leader, answer)  # typed ahead: the terminal holds the line until the launcher reads it
            done = _until(project, stdin=follower)
        finally:
            os.close(leader)
            os.close(follower)
        assert done.returncode == status, done.stdout + done.stderr
        assert "run it? [y/N]" in done.stderr, done.stderr
        assert ("was not confirmed" in done.stderr) == (status == 2), done.stderr
        assert bool(_manifests(project, "a")) == (status == 0)
