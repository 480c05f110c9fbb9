"""``deviate audit`` never passes over replicas that did not finish (issue 25, item 3), with real replicas.

Each case trains the deterministic tiny Lightning model of ``tests/audit/trainers/lightning_cases.py`` through the
launcher, stopping at training step 2 in some replicas: the steps recorded before agree bit for bit, but the audit
must not exit 0 (a CI gate built on it would pass), and must say in one line which replica stopped and with what:

- every replica raises: exit 3, ``no replica completed: replica 0 failed with RuntimeError: ...; replica 1 ...``;
- one replica raises: exit 3, ``nothing to compare after step 1: replica 1 failed with RuntimeError: ...``;
- one replica calls ``sys.exit(0)`` (exit status 0, the launcher says completed, but its ``fit`` never ended);
- one replica hangs until ``--timeout`` stops it.

And Keras (``keras_audit_stops.py``, on the torch and TensorFlow backends): replica 1 raises at step 2; Keras has no
exception hook, so the callback writes the steps it audited when the process exits, and the line names the
exception the trainer raised (also in a replica forked from the warm template).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "audit" / "trainers" / "lightning_cases.py"


def audit(case: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--trainer", f"{CASES}:{case}", "--parallel",
               "2", "--out", str(tmp_path / "runs"), *extra]  # fmt: skip
    return subprocess.run(
        command,
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("deviate: error:")]


def test_every_replica_crashing_is_not_audited_exit_3(tmp_path: Path) -> None:
    done = audit("crashes", tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert error_lines(done.stderr) == [
        "deviate: error: no replica completed: replica 0 failed with RuntimeError: boom in replica 0 at step 2; "
        "replica 1 failed with RuntimeError: boom in replica 1 at step 2"
    ], done.stderr
    verdict = done.stdout.splitlines()[0]  # the steps before the crash agree, and the verdict says what stopped
    assert verdict.startswith("deviate audit: incomplete: replicas 0, 1 agree bit for bit over the 2 training step(s)")
    assert "no replica completed" in verdict and "training was shorter" not in done.stdout


def test_one_replica_crashing_is_not_audited_exit_3(tmp_path: Path) -> None:
    done = audit("replica_1_crashes", tmp_path, "--format", "json")
    assert done.returncode == 3, (done.stdout, done.stderr)
    line = "nothing to compare after step 1: replica 1 failed with RuntimeError: boom in replica 1 at step 2"
    assert error_lines(done.stderr) == [f"deviate: error: {line}"], done.stderr
    found = json.loads(done.stdout)
    assert (found["verdict"], found["diverged"], found["steps_compared"], found["stopped"]) == (
        "incomplete", False, 2, line)  # fmt: skip
    assert found["not_completed"] == [{"replica": 1, "status": "failed", "recorded_steps": 2,
                                       "how": "failed with RuntimeError: boom in replica 1 at step 2"}]  # fmt: skip


def test_a_replica_that_exits_0_inside_fit_is_not_audited(tmp_path: Path) -> None:
    done = audit("replica_1_exits", tmp_path)
    assert done.returncode != 0 and done.returncode == 3, (done.stdout, done.stderr)
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("deviate: error: nothing to compare after step 1: replica 1 ")
    assert "before its training ended" in lines[0] and "SystemExit: 0" in lines[0]  # status completed or incomplete
    assert done.stdout.startswith("deviate audit: incomplete: replicas 0, 1 agree bit for bit over the 2 training")


def test_a_replica_stopped_by_timeout_is_not_audited(tmp_path: Path) -> None:
    done = audit("replica_1_hangs", tmp_path, "--timeout", "25")
    assert done.returncode == 3, (done.stdout, done.stderr)
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "nothing to compare after step 1: replica 1 timed out after" in lines[0], lines


@pytest.mark.parametrize("backend", ["torch", "tensorflow"])
def test_a_keras_replica_crashing_is_not_audited_exit_3(backend: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"the {backend} backend is not installed")
    trainer = f"{REPO / 'tests' / 'faults' / 'keras_audit_stops.py'}:replica_1_crashes"
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--trainer", trainer, "--keras-backend", backend,
         "--parallel", "2", "--steps", "5", "--out", str(tmp_path / "runs"), "--format", "json"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 3, (done.stdout, done.stderr)
    line = "nothing to compare after step 1: replica 1 failed with RuntimeError: boom in replica 1 at step 2"
    assert error_lines(done.stderr) == [f"deviate: error: {line}"], done.stderr
    found = json.loads(done.stdout)
    assert (found["verdict"], found["diverged"], found["steps_compared"], found["stopped"]) == (
        "incomplete", False, 2, line)  # fmt: skip
