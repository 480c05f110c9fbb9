"""``deviate audit --resume-at K --steps N`` for real: three replicas through the launcher (uninterrupted, checkpointed
at step K by Lightning's own ``save_checkpoint``, resumed in a new process with ``fit(ckpt_path=...)``), their audit
records compared from step K on, and what the checkpoint did not restore named from the state digests.

The trainings (``trainers/resume_cases.py``) have 4 batches an epoch: K=4 is an epoch boundary, K=2 mid-epoch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "trainers" / "resume_cases.py"
sys.path.insert(0, str(REPO / "tests" / "launch"))

from replicate_helpers import child_env  # noqa: E402


def resume_audit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def resume_json(case: str, tmp_path: Path, at: int, steps: int = 8) -> tuple[int, dict[str, Any], str]:
    done = resume_audit(["--trainer", f"{CASES}:{case}", "--resume-at", str(at), "--steps", str(steps), "--out",
                         str(tmp_path / "runs"), "--format", "json"], tmp_path)  # fmt: skip
    assert done.returncode in (0, 1, 3), (done.returncode, done.stdout, done.stderr)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def manifest(tmp_path: Path, role: str) -> dict[str, Any]:
    path = tmp_path / "runs" / role / "experiment=resume_cases" / "variant=control" / "replica=0" / "run.json"
    return json.loads(path.read_text())


def test_a_resume_at_an_epoch_boundary_that_restores_everything_continues_bit_for_bit(tmp_path: Path) -> None:
    done = resume_audit(["--trainer", f"{CASES}:exact", "--resume-at", "4", "--steps", "8", "--out",
                         str(tmp_path / "runs")], tmp_path)  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "the run resumed from the checkpoint of step 4 continues bit for bit: steps 4..7 agree" in done.stdout
    checkpointed, resumed, uninterrupted = (manifest(tmp_path, r) for r in ("checkpointed", "resumed", "uninterrupted"))
    checkpoint = Path(checkpointed["resume"]["checkpoint"])
    assert checkpoint.name == "checkpoint-step=4.ckpt" and checkpoint.is_file()
    assert checkpointed["resume"]["global_step"] == 4 and checkpointed["audit"]["recorded_steps"] == 4
    assert resumed["resume"]["resumed_from"] == str(checkpoint) and resumed["audit"]["recorded_steps"] == 4
    assert uninterrupted["audit"]["recorded_steps"] == 8  # stopped at N although the training has 12 steps
    for name in ("optimizers", "lr_schedulers", "numpy_rng", "python_rng"):  # restored (or untouched) states
        assert resumed["resume"]["states"]["start"][name] == uninterrupted["resume"]["states"]["start"][name]
    # Each epoch's iterator draws its base seed from torch's global RNG, which the checkpoint does not hold: told,
    # without effect on the steps compared.
    assert "not restored by the checkpoint, without effect on the steps compared: torch's global RNG" in done.stdout


def test_a_resumable_dataloader_resumes_mid_epoch_bit_for_bit(tmp_path: Path) -> None:
    code, found, _ = resume_json("exact_mid_epoch", tmp_path, at=2)
    assert code == 0 and found["verdict"] == "agree" and found["diverged"] is False, found
    assert found["steps_compared"] == 6 and found["resume_at"] == 2 and found["not_restored"] == []
    assert manifest(tmp_path, "resumed")["resume"]["data_restarted"] is False


def test_a_plain_dataloader_resumed_mid_epoch_starts_its_epoch_again(tmp_path: Path) -> None:
    code, found, _ = resume_json("exact", tmp_path, at=2)
    assert code == 1 and found["verdict"] == "diverged"
    assert (found["step"], found["kind"], found["name"]) == (2, "input", "batch[0]")
    assert found["not_restored"] == ["data_position"] and found["diverged_before_checkpoint"] is False
    assert found["steps_compared_before"] == 2 and found["steps_compared"] == 6
    assert "Lightning restarts a DataLoader without state_dict" in found["not_restored_text"]


def test_shuffling_and_dropout_the_checkpoint_does_not_restore_diverge_right_after_the_resume(tmp_path: Path) -> None:
    done = resume_audit(["--trainer", f"{CASES}:shuffles_and_drops", "--resume-at", "4", "--steps", "8", "--out",
                         str(tmp_path / "runs")], tmp_path)  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "deviate audit --resume-at 4: the resumed run diverges from the uninterrupted one at training step 4 "
        "(0-based), first in the input batch `batch[0]`."
    )
    assert (
        "not restored by the checkpoint: torch's global RNG (dropout draws from it), the sampler's generator" in lines
    )
    # Up to the checkpoint the checkpointed run was the uninterrupted one, state for state.
    states = manifest(tmp_path, "uninterrupted")["resume"]["states"]
    assert manifest(tmp_path, "checkpointed")["resume"]["states"]["end"] == states["end"]
    resumed = manifest(tmp_path, "resumed")["resume"]["states"]["start"]
    assert {name for name in states["start"] if resumed.get(name) != states["start"][name]} == {
        "torch_rng", "sampler_generator"}  # fmt: skip


def test_a_training_that_is_not_reproducible_says_so_before_the_checkpoint(tmp_path: Path) -> None:
    code, found, _ = resume_json("not_reproducible", tmp_path, at=4)
    assert code == 1 and found["verdict"] == "diverged" and found["diverged_before_checkpoint"] is True, found
    assert (found["step"], found["kind"]) == (1, "parameter")  # gradient noise added after the gradient hooks
    done = resume_audit(["--trainer", f"{CASES}:not_reproducible", "--resume-at", "4", "--steps", "8", "--out",
                         str(tmp_path / "text")], tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert "the uninterrupted and the checkpointed runs already differ at training step 1 (0-based), before the " \
        "checkpoint" in done.stdout.replace("\n", " ")  # fmt: skip


def test_a_resumed_run_that_crashes_is_not_agreement_exit_3(tmp_path: Path) -> None:
    code, found, err = resume_json("crashes_after_resume", tmp_path, at=4)
    assert code == 3 and found["verdict"] == "incomplete" and found["diverged"] is False
    assert found["stopped"] == "the resumed run failed with RuntimeError: boom after the resume"
    assert "error: the resumed run failed with RuntimeError: boom after the resume" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume-at", "8", "--steps", "8"], "`--resume-at` must be an integer >= 1 and below --steps (8). "
         "Received: --resume-at=8."),
        (["--resume-at", "0"], "must be an integer >= 1 and below --steps (20). Received: --resume-at=0."),
        (["--resume-at", "two"], "Received: --resume-at=two."),
        (["--resume-at", "2", "-n", "3"], "`-n` does not apply with `--resume-at`"),
        (["--resume-at", "2", "--against", "."], "`--against` does not apply with `--resume-at`"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, extra: list[str], message: str) -> None:
    done = resume_audit(["--trainer", f"{CASES}:exact", "--out", str(tmp_path / "runs"), *extra], tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_plain_pytorch_has_no_checkpoint_to_resume_exit_3(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(
        "import torch\n\ndef main():\n    model = torch.nn.Linear(2, 1)\n    torch.optim.SGD(model.parameters(), 0.1)\n"
    )
    done = resume_audit(["--trainer", "loop.py:main", "--resume-at", "2", "--steps", "4", "--out", "runs"], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    expected = "plain PyTorch has no standard checkpoint: --resume-at needs Lightning or Keras"
    assert f"error: {expected} (the checkpointed run trained without a Lightning Trainer.fit" in done.stderr
    assert not (tmp_path / "runs" / "resumed").exists()  # nothing more was run


def test_keras_is_not_supported_yet_exit_3_after_one_step(tmp_path: Path) -> None:
    keras_case = CASES.parent / "resume_keras.py"
    done = resume_audit(["--trainer", f"{keras_case}:backup_and_restore", "--keras-backend", "torch", "--resume-at",
                         "4", "--steps", "8", "--out", str(tmp_path / "runs")], tmp_path)  # fmt: skip
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "error: --resume-at does not support Keras yet" in done.stderr and done.stdout == ""
    run = tmp_path / "runs" / "checkpointed" / "experiment=resume_keras" / "variant=control" / "replica=0"
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["resume"]["refused"] == "keras" and manifest["framework"] == "keras"
    assert manifest["audit"]["recorded_steps"] == 1  # stopped after its first step, not after 50 epochs
    assert not (tmp_path / "runs" / "resumed").exists()
