"""deviate-replicate with real Lightning training on CPU (one replicate call, ~20 s, shared by the tests).

See trainers/lightning_tiny.py: replica 0 builds its Trainer without a callback, 1 with ``[DeviateCallback()]``,
2 with a single ``DeviateCallback()``, 3 without one and SIGKILLs itself at the start of epoch 2.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import Completed, final_metrics, manifest, metrics, start_cli, trainer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Completed:
    tmp = tmp_path_factory.mktemp("lightning")
    out = tmp / "runs"
    args = ["--trainer", trainer("lightning_tiny.py:main"), "-n", "4", "--variant", "control", "--parallel", "2"]
    # Every epoch end writes (by default epochs this short share one write every 10 s): the replica killed with
    # SIGKILL keeps its finished epochs.
    proc = start_cli([*args, "--out", str(out)], cwd=tmp, env={"DEVIATE_FLUSH_INTERVAL_S": "0"})
    stdout, stderr = proc.communicate(timeout=300)
    return Completed(proc.returncode, stdout, stderr, out)


def _run_dir(done: Completed, replica: int) -> Path:
    return done.run_dir("lightning_tiny", "control", replica)


def _logged(done: Completed, replica: int) -> list[tuple]:
    rows = metrics(_run_dir(done, replica))
    return [(r["stage"], r["scope"], r["name"], r["step"], r["epoch"], r["value"]) for r in rows]


def test_exit_status_reflects_the_killed_replica(control: Completed) -> None:
    assert control.returncode == 1, control.stderr
    assert "3 completed, 1 failed, 0 skipped" in control.stdout


def test_callback_is_injected_when_missing(control: Completed) -> None:
    assert final_metrics(_run_dir(control, 0))["deviate_callbacks"] == 1
    stages = {(stage, scope) for stage, scope, *_ in _logged(control, 0)}
    assert {("train", "step"), ("train", "epoch"), ("val", "epoch")} <= stages
    record = manifest(_run_dir(control, 0))
    assert record["framework"] == "lightning" and record["determinism"]["verified"] is True
    assert (_run_dir(control, 0) / "fingerprint.json").exists()


@pytest.mark.parametrize("replica", [1, 2])
def test_a_users_own_callback_is_not_doubled(control: Completed, replica: int) -> None:
    assert final_metrics(_run_dir(control, replica))["deviate_callbacks"] == 1
    train_steps = [row for row in _logged(control, replica) if row[:2] == ("train", "step")]
    assert len(train_steps) == 12  # 3 epochs x 4 batches, each recorded once


def test_control_replicas_are_bit_identical(control: Completed) -> None:
    first = _logged(control, 0)
    assert len(first) > 20
    assert _logged(control, 1) == first and _logged(control, 2) == first


def test_sigkill_keeps_the_finished_epochs(control: Completed) -> None:
    record = manifest(_run_dir(control, 3))
    assert (record["status"], record["signal"], record["exit_code"]) == ("failed", "SIGKILL", -signal.SIGKILL)
    rows = _logged(control, 3)
    assert {epoch for *_, epoch, _ in rows} == {0, 1}
    assert rows == [row for row in _logged(control, 0) if row[4] in (0, 1)]  # what it saw, it kept
