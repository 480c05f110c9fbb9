"""``deviate status`` says what a replica's ``run.json`` records that its row cannot (issue 45, items 6 and 7).

A real study (the ``deviate-replicate`` console script, from the project's folder, on a tiny command-mode script)
whose manifests are then edited as a shared store may hold them: a replica that left processes running that could
not be stopped (``survivors``, written by the launcher: :mod:`deviate_cb.launch.backends.survivors`), one whose
``configuration`` cannot be read, and hostile ``survivors`` fields (not a list, a huge list of huge strings, control
characters). ``deviate status`` (the console script) names each in one warning line naming the file, shows the
replica of an unknown configuration ``unknown configuration`` as ``deviate report`` does, and still lists the rest.
"""

from __future__ import annotations

import json
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
print(f"acc={0.8 + 0.01 * random.Random(seed).gauss(0.0, 1.0)}")
"""
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("project")
    (project / "train.py").write_text(SCRIPT)
    done = subprocess.run(
        [str(BIN / "deviate-replicate"), "--out", "runs", "-n", "3", "--experiment", "e", "--variant", "algo",
         "--metric-regex", r"acc=(?P<acc>\S+)", "--", "python", "train.py", "--seed", "{seed}"],
        cwd=project, env=child_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return project / "runs"


def _edit(run_json: Path, **fields: object) -> None:
    manifest = json.loads(run_json.read_text())
    run_json.write_text(json.dumps({**manifest, **fields}))


def _status(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "deviate"), "status", str(out), "--no-cluster"],
        env=child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _rows(stdout: str) -> dict[str, str]:
    """Replica number -> status, from the table."""
    return {line.split()[2]: line.split()[4] for line in stdout.splitlines()[1:-1]}


def _said(stderr: str, path: Path) -> list[str]:
    return [line for line in stderr.splitlines() if str(path) in line]


def test_status_names_survivors_and_an_unknown_configuration(study: Path) -> None:
    group = study / "experiment=e" / "variant=algo"
    survivor, unknown = group / "replica=0" / "run.json", group / "replica=1" / "run.json"
    _edit(survivor, leftovers_stopped=1, survivors=["pid 4242: python loop.py \x1b[2J"])
    _edit(unknown, configuration=None)
    done = _status(study)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(done.stdout)
    assert rows["0"] == "completed" and rows["2"] == "completed", done.stdout  # the others are still listed
    assert "unknown configuration" in done.stdout.splitlines()[2], done.stdout
    said = _said(done.stderr, survivor)
    assert len(said) == 1 and "pid 4242: python loop.py" in said[0] and "could not be stopped" in said[0], done.stderr
    assert "\x1b" not in done.stderr and "\\x1b" in said[0], said  # control characters escaped
    said = _said(done.stderr, unknown)
    assert len(said) == 1 and "`configuration` is null" in said[0] and "unknown configuration" in said[0], done.stderr

    report = subprocess.run(
        [str(BIN / "deviate"), "report", str(study), "--format", "json"],
        env=child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    said = _said(report.stderr, survivor)  # the report names the survivors too, where its readers look
    assert len(said) == 1 and "pid 4242: python loop.py" in said[0] and "could not be stopped" in said[0], report.stderr


@pytest.mark.parametrize(
    "survivors",
    [{"pid": 1}, 7, ["pid 1: ok", None], ["pid 9: " + "x" * 10_000] * 1_000],
    ids=["object", "number", "null-entry", "huge"],
)
def test_a_hostile_survivors_field_is_one_bounded_line(study: Path, survivors: object) -> None:
    run_json = study / "experiment=e" / "variant=algo" / "replica=2" / "run.json"
    before = run_json.read_text()
    try:
        _edit(run_json, survivors=survivors)
        done = _status(study)
    finally:
        run_json.write_text(before)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _rows(done.stdout)["2"] == "completed", done.stdout
    said = _said(done.stderr, run_json)
    assert len(said) == 1 and ("survivors" in said[0] or "could not be stopped" in said[0]), done.stderr[-2000:]
    assert len(said[0]) < 1500, said[0][:300]
