"""What a newcomer meets in the first hour says what to do (issue 44, items 4 and 5).

Every check runs the installed console scripts (``deviate-replicate``, ``deviate``) as a user would, from a project
folder holding a plain script that prints its results (no callback, no framework: each replica takes a fraction of a
second), and reads what they print. The checks that launch replicas are marked ``slow`` (``make test-fast`` leaves
them out).
"""

from __future__ import annotations

import html
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from deviate_cb import __version__

BIN = Path(sys.executable).parent
SCRIPT = """\
import random
import sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
for epoch in range(3):
    print(f"epoch {epoch}: loss {1.0 / (epoch + 1) + rng.random() * 0.01:.4f}")
print(f"Test accuracy: {0.8 + rng.random() * 0.05:.4f}")
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_") and k != "COLUMNS"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _run(program: str, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / program), *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )


def _piped(command: Sequence[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``COMMAND | head -1`` under ``bash -o pipefail``: the pipeline's status is the command's."""
    line = f"set -o pipefail; {shlex.join(command)} | head -1"
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    (folder / "fit.py").write_text(
        "def make_data():\n    return [1, 2]\n\n\ndef train(seed):\n    return {'acc': 0.9 + seed * 1e-3}\n\n\n"
        "def _private():\n    pass\n\n\nif __name__ == '__main__':\n    print(train(0))\n"
    )
    return folder


def test_a_command_without_the_separator_is_shown_with_it(project: Path) -> None:
    done = _run("deviate-replicate", "-n", "2", "python", "train.py", "--lr", "0.1", cwd=project)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("deviate-replicate: error: the command to replicate goes after `--`")
    assert "Received: python train.py --lr 0.1 before any `--`" in line
    assert line.endswith("Expected: deviate-replicate -n 2 -- python train.py --lr 0.1")
    assert not (project / "deviate_runs").exists()
    trainer = _run("deviate-replicate", "--trainer", "fit.py:train", "-n", "2", "lr=0.1", cwd=project)
    assert trainer.returncode == 2
    assert trainer.stderr.strip().endswith("Expected: deviate-replicate --trainer fit.py:train -n 2 -- lr=0.1")
    audit = _run("deviate", "audit", "-n", "3", "python", "train.py", cwd=project)
    assert audit.returncode == 2 and audit.stderr.strip().endswith("Expected: deviate audit -n 3 -- python train.py")


def test_a_trainer_file_without_function_gets_the_function_to_add(project: Path) -> None:
    done = _run("deviate-replicate", "-n", "2", "--trainer", "fit.py", cwd=project)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert (
        "Received: --trainer=fit.py. Expected: --trainer fit.py:train (functions defined there: make_data, train)"
        in line
    )
    script = _run("deviate-replicate", "-n", "2", "--trainer", "train.py", cwd=project)
    assert "defines no function at top level, so replicate it as a command: " in script.stderr
    assert "-- python train.py" in script.stderr and not (project / "deviate_runs").exists()


def test_deviate_has_a_version_as_deviate_replicate_has() -> None:
    deviate = subprocess.run([str(BIN / "deviate"), "--version"], capture_output=True, text=True, env=_env())
    replicate = subprocess.run([str(BIN / "deviate-replicate"), "--version"], capture_output=True, text=True)
    assert (deviate.returncode, deviate.stdout, deviate.stderr) == (0, f"deviate {__version__}\n", "")
    assert replicate.stdout == f"deviate-replicate {__version__}\n"


@pytest.mark.slow  # launches replicas
def test_a_reader_that_closes_the_pipe_early_ends_quietly_and_costs_no_replica(project: Path) -> None:
    (project / "slow.py").write_text("import time\ntime.sleep(0.5)\nprint('acc=0.9')\n")
    launch = [str(BIN / "deviate-replicate"), "-n", "3", "--metric-regex", "acc=(?P<acc>[0-9.]+)", "--"]
    done = _piped([*launch, "python", "slow.py"], project)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("deviate-replicate: 3 replicas of `python slow.py`")
    runs = project / "deviate_runs" / "experiment=slow" / "variant=algo+impl"
    statuses = [json.loads((runs / f"replica={k}" / "run.json").read_text())["status"] for k in range(3)]
    assert statuses == ["completed"] * 3  # the launcher ran on after its reader left
    for command in (["report", "deviate_runs"], ["status", "deviate_runs"], ["power", "deviate_runs", "--effect", "1"]):
        piped = _piped([str(BIN / "deviate"), *command], project)
        assert piped.returncode == 0 and "Traceback" not in piped.stderr and "Exception ignored" not in piped.stderr
        assert len(piped.stdout.splitlines()) == 1, piped.stdout


REGEX = "Test accuracy: *(?P<test_accuracy>[-+.0-9eE]+)"


def _study(project: Path, experiment: str, n: int = 3, *more: str) -> subprocess.CompletedProcess[str]:
    args = ["-n", str(n), "--experiment", experiment, "--metric-regex", REGEX, *more, "--", "python", "train.py"]
    done = _run("deviate-replicate", *args, "{seed}", cwd=project)
    assert done.returncode in (0, 2), done.stderr
    return done


@pytest.mark.slow  # launches replicas
def test_an_unknown_metric_is_quoted_as_typed_with_the_known_ones(project: Path) -> None:
    _study(project, "base")
    (project / "t.csv").write_text("g,acc\na,1\na,2\nb,1\nb,3\n")
    typed = "Received: --metric test_acc --metric 'val loss'. Expected one of: test_accuracy."
    for command in (
        ["report", "deviate_runs"],
        ["report", "deviate_runs", "--headline", "--format", "json"],
        ["compare", "deviate_runs", "--a", "experiment=base", "--b", "experiment=base"],
        ["compare", "deviate_runs", "--by", "variant"],
        ["power", "deviate_runs", "--effect", "0.01"],
        ["export", "wandb", "deviate_runs"],
    ):
        done = _run("deviate", *command, "--metric", "test_acc", "--metric", "val loss", cwd=project)
        assert done.returncode == 2 and typed in done.stderr, (command, done.stderr)
    table = _run("deviate", "report", "--table", "t.csv", "--group-by", "g", "--metric", "val", cwd=project)
    assert "Received: --metric val. Expected one of: acc." in table.stderr
    precision = _study(project, "base", 3, "--until-precision", "0.5", "--max-runs", "4", "--metric", "test_acc")
    assert precision.returncode == 2 and "Received: --metric test_acc. Its metrics: test_accuracy." in precision.stdout
    assert "retry the failed replicas" not in precision.stdout  # none failed: the metric's name is wrong
    decided = _study(project, "new", 3, "--until-decided", "--against", "experiment=base", "--max-runs", "5",
                     "--metric", "test_acc")  # fmt: skip
    assert decided.returncode == 2 and "Received: --metric test_acc. Its metrics: test_accuracy." in decided.stderr


@pytest.mark.slow  # launches replicas
def test_each_round_counts_the_replicas_it_skips_in_one_line(project: Path) -> None:
    _study(project, "base")
    done = _study(project, "new", 3, "--until-decided", "--against", "experiment=base", "--max-runs", "5",
                  "--metric", "test_accuracy")  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and "look 3 of 3" in done.stdout, done.stdout + done.stderr
    assert not [line for line in lines if line.startswith("replica ") and "skipped" in line]
    assert lines.count("3 replicas (0-2): skipped (already completed)") == 3  # B's first round, then A's and B's
    assert lines.count("4 replicas (0-3): skipped (already completed)") == 2
    plain = _run("deviate-replicate", "-n", "2", "--experiment", "base", "--metric-regex", REGEX, "--", "python",
                 "train.py", "{seed}", cwd=project)  # fmt: skip
    assert "replica 1 (seed 1): skipped (already completed)" in plain.stdout  # a plain launch says each, as before


@pytest.mark.slow  # launches replicas
def test_power_says_each_group_once_and_its_table_words_power_as_the_sentence(project: Path) -> None:
    _study(project, "base")
    _study(project, "base", 3, "--variant", "control")
    done = _run("deviate", "power", "deviate_runs", "--budget", "2h", "--effect", "0.01", cwd=project)
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    for group in ("experiment=base variant=algo+impl test_accuracy:", "experiment=base variant=control test_accuracy:"):
        assert flat.count(group) == 1, done.stdout
    assert "The 3 runs you have give" not in flat  # the power sentence sits in the budget sentence, said once
    plain = _run("deviate", "power", "deviate_runs", "--effect", "0.01", "--format", "json", cwd=project)
    [row] = [r for r in json.loads(plain.stdout) if r["group"].endswith("algo+impl")]
    table = _run("deviate", "power", "deviate_runs", "--effect", "0.01", cwd=project)
    worded = f"{row['achieved_power']:.0%}"
    assert f"The 3 runs you have give {worded} power" in " ".join(table.stdout.split())
    [cells] = [cells for cells in map(str.split, table.stdout.splitlines()) if cells[2:3] == ["test_accuracy"]][:1]
    assert cells[-1] == worded and f"{row['achieved_power']:.4g}" not in cells


NOTHING = "nothing was recorded"


def _rerun(line: str) -> list[str]:
    """The command line a 'nothing was recorded' line says to rerun."""
    return shlex.split(line.partition("rerun: ")[2].partition("; or pass ")[0])


@pytest.mark.slow  # launches replicas
def test_a_script_that_records_nothing_is_given_the_command_that_records_it(project: Path) -> None:
    first = _run("deviate-replicate", "-n", "2", "--", "python", "train.py", "{seed}", cwd=project)
    assert first.returncode == 0 and "2 completed" in first.stdout
    [said] = [line for line in (first.stdout + first.stderr).splitlines() if NOTHING in line]
    command = _rerun(said)
    assert command[:2] == ["deviate-replicate", "-n"] and "--force" in command, said
    assert command[command.index("--") :] == ["--", "python", "train.py", "{seed}"], said
    assert "DeviateCallback()" in said and "--trainer file.py:function that returns a dict of metrics" in said
    for where in (["status", "deviate_runs"], ["report", "deviate_runs"], ["report", "deviate_runs", "--format",
                  "json"], ["power", "deviate_runs", "--effect", "1"]):  # fmt: skip
        shown = _run("deviate", *where, cwd=project)
        assert [_rerun(line) for line in shown.stderr.splitlines() if NOTHING in line] == [command], (where, shown)
    control = _run("deviate-replicate", "-n", "2", "--variant", "control", "--", "python", "train.py", cwd=project)
    compared = _run("deviate", "compare", "deviate_runs", "--a", "variant=algo+impl", "--b", "variant=control",
                    cwd=project)  # fmt: skip
    commands = [_rerun(line) for line in compared.stderr.splitlines() if NOTHING in line]
    assert control.returncode == 0 and command in commands and len(commands) == 2, compared.stderr
    assert next(c for c in commands if c != command)[:5] == ["deviate-replicate", "-n", "2", "--variant", "control"]
    page = _run("deviate", "report", "deviate_runs", "--format", "html", "-o", "report.html", cwd=project)
    assert page.returncode == 0 and shlex.join(command) in html.unescape((project / "report.html").read_text())
    again = _run(*command[:1], *command[1:], cwd=project)  # pasted as it stands, in the same store
    assert again.returncode == 0 and NOTHING not in again.stdout + again.stderr, again.stdout + again.stderr
    report = _run("deviate", "report", "deviate_runs", "--format", "json", cwd=project)
    assert {row["metric"] for row in json.loads(report.stdout)} == {"test_accuracy", "loss"}
