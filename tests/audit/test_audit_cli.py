"""``deviate audit`` for real: replicas trained through the launcher, their records compared.

Each case trains a tiny Lightning model whose only nondeterminism (fresh operating-system entropy, which no seed
reaches) sits in one known place; the audit must name that step, that place and that kind. Exit status 0 when the
replicas agree, 1 when they diverge, 2 for usage errors, 3 when nothing could be audited. Keras, on each backend, is
audited in ``integrations/keras/test_keras_audit.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TRAINERS = Path(__file__).resolve().parent / "trainers"
LIGHTNING = TRAINERS / "lightning_cases.py"


def audit(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def audit_json(trainer: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    done = audit(["--trainer", trainer, "--parallel", "2", "--out", str(tmp_path / "runs"), "--format", "json",
                  *extra], tmp_path)  # fmt: skip
    assert done.returncode in (0, 1), (done.returncode, done.stdout, done.stderr)
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_deterministic_training_agrees_exit_0(tmp_path: Path) -> None:
    done = audit(["--trainer", f"{LIGHTNING}:deterministic", "--parallel", "2", "--out", str(tmp_path / "r")], tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "replicas 0, 1 agree bit for bit over 6 audited training step(s)" in done.stdout
    assert "6 of the 20 step(s) asked were recorded" in done.stdout  # one epoch of 6 batches
    manifest = json.loads((tmp_path / "r/experiment=lightning_cases/variant=control/replica=1/run.json").read_text())
    assert manifest["audit"]["recorded_steps"] == 6 and manifest["variant"] == "control"


def test_a_layer_that_turns_nondeterministic_is_found_at_its_step_forward(tmp_path: Path) -> None:
    code, found, _ = audit_json(f"{LIGHTNING}:noisy_layer", tmp_path)
    assert code == 1 and found["diverged"] is True
    assert (found["step"], found["kind"], found["module"], found["name"]) == (3, "forward", "net.2", "net.2")
    assert found["replicas"] == [0, 1] and 0 < found["max_abs_diff"] < 0.1 and found["exact"] is True
    assert [(d["step"], d["kind"], d["name"]) for d in found["next"][:2]] == [(3, "forward", "net.3"),
                                                                              (3, "forward", "net.4")]  # fmt: skip


def test_unseeded_augmentation_is_found_in_the_input_of_step_0(tmp_path: Path) -> None:
    code, found, _ = audit_json(f"{LIGHTNING}:unseeded_augmentation", tmp_path, "--steps", "2")
    assert code == 1
    assert (found["step"], found["kind"], found["module"], found["name"]) == (0, "input", None, "batch[0]")
    assert found["differing"] == 16 * 8  # every jittered feature of the batch


def test_a_nondeterministic_backward_is_found_as_the_gradient_of_its_module(tmp_path: Path) -> None:
    code, found, _ = audit_json(f"{LIGHTNING}:noisy_backward", tmp_path, "--steps", "2")
    assert code == 1
    assert (found["step"], found["kind"], found["module"]) == (0, "gradient", "net.2"), found
    assert found["name"] in ("net.2.weight", "net.2.bias")


def test_an_optimizer_that_perturbs_parameters_is_found_as_a_parameter(tmp_path: Path) -> None:
    code, found, _ = audit_json(f"{LIGHTNING}:perturbing_optimizer", tmp_path, "--steps", "2")
    assert code == 1
    assert (found["step"], found["kind"], found["module"], found["name"]) == (0, "parameter", "net.0", "net.0.weight")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-n", "1"], "`-n` must be an integer >= 2"),
        (["--steps", "0"], "`--steps` must be an integer >= 1"),
        (["--variant", "algo"], "`--variant` must be control or impl"),
        (["--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: list[str], expected: str, tmp_path: Path) -> None:
    done = audit(["--trainer", f"{LIGHTNING}:deterministic", "--out", str(tmp_path / "r"), *args], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()


def test_a_bad_trainer_is_a_usage_error(tmp_path: Path) -> None:
    done = audit(["--trainer", f"{LIGHTNING}:no_such_function", "--out", str(tmp_path / "r")], tmp_path)
    assert done.returncode == 2 and "no_such_function" in done.stderr and "Traceback" not in done.stderr


def test_training_without_a_framework_callback_cannot_be_audited_exit_3(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("def main():\n    return {'loss': 0.5}\n")
    done = audit(["--trainer", f"{script}:main", "--out", str(tmp_path / "r")], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stdout == "", done.stderr  # refused before anything runs
    assert "it imports neither Lightning nor Keras" in done.stderr and not (tmp_path / "r").exists()
