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

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "trainers" / "resume_cases.py"


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


def test_plain_pytorch_is_refused_from_its_source_before_anything_runs_exit_3(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(
        "import torch\n\ndef main():\n    model = torch.nn.Linear(2, 1)\n    torch.optim.SGD(model.parameters(), 0.1)\n"
    )
    done = resume_audit(["--trainer", "loop.py:main", "--resume-at", "2", "--steps", "4", "--out", "runs"], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stderr.strip() == (
        "deviate: error: plain PyTorch has no standard checkpoint: --resume-at needs Lightning, Keras or the Hugging "
        "Face Trainer (the project's source imports neither: nothing was run)"
    )
    assert not (tmp_path / "runs").exists()  # not even the checkpointed run was launched


def test_plain_pytorch_the_scan_cannot_read_is_refused_after_its_checkpointed_run_exit_3(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(  # imported by name: the source does not tell what it reaches
        "import importlib\n\ndef main():\n    torch = importlib.import_module('torch')\n"
        "    model = torch.nn.Linear(2, 1)\n    torch.optim.SGD(model.parameters(), 0.1)\n"
    )
    done = resume_audit(["--trainer", "loop.py:main", "--resume-at", "2", "--steps", "4", "--out", "runs"], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    expected = (
        "plain PyTorch has no standard checkpoint: --resume-at needs Lightning, Keras or the Hugging Face Trainer"
    )
    assert f"error: {expected} (the checkpointed run trained without a Lightning Trainer.fit" in done.stderr
    assert (tmp_path / "runs" / "checkpointed").is_dir() and not (tmp_path / "runs" / "resumed").exists()


KERAS = CASES.parent / "resume_keras.py"


def keras_resume(case: str, tmp_path: Path, at: int, *extra: str) -> subprocess.CompletedProcess[str]:
    # The backend is named, never left to the machine's keras.json: what the audit sees depends on it (TensorFlow:
    # the loss and the variables only; torch: every layer).
    backend = [] if "--keras-backend" in extra else ["--keras-backend", "tensorflow"]
    return resume_audit(["--trainer", f"{KERAS}:{case}", "--resume-at", str(at), "--steps", "8", "--out",
                         str(tmp_path / "runs"), *backend, *extra], tmp_path)  # fmt: skip


def keras_manifest(tmp_path: Path, role: str) -> dict[str, Any]:
    path = tmp_path / "runs" / role / "experiment=resume_keras" / "variant=control" / "replica=0" / "run.json"
    return json.loads(path.read_text())


def test_keras_backup_and_restore_at_an_epoch_end_continues_bit_for_bit(tmp_path: Path) -> None:
    done = keras_resume("backup_and_restore", tmp_path, 4)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "the run resumed from the checkpoint of step 4 continues bit for bit: steps 4..7 agree" in done.stdout
    checkpointed, resumed, uninterrupted = (keras_manifest(tmp_path, r) for r in ("checkpointed", "resumed",
                                                                                   "uninterrupted"))  # fmt: skip
    backup = tmp_path / "runs" / "backups" / "checkpointed"
    assert checkpointed["resume"]["checkpoint"] == str(backup) and (backup / "latest.weights.h5").is_file()
    assert checkpointed["resume"]["backup_metadata"] == {"epoch": 1, "batch": 0}
    assert checkpointed["audit"]["recorded_steps"] == 4 and uninterrupted["audit"]["recorded_steps"] == 8
    assert resumed["resume"]["resumed_from"] == str(backup) and resumed["resume"]["restarted_at"] == 4
    assert resumed["resume"]["data_restarted"] is False and resumed["audit"]["recorded_steps"] == 4
    # Adam's variables (its step count included) are in the backup
    assert (
        resumed["resume"]["states"]["start"]["optimizers"] == uninterrupted["resume"]["states"]["start"]["optimizers"]
    )
    assert not (tmp_path / "backup").exists()  # the project's own backup_dir was never read nor written


def test_keras_seeded_dropout_the_backup_does_not_restore_diverges_at_the_resume(tmp_path: Path) -> None:
    done = keras_resume("seeded_dropout", tmp_path, 4, "--format", "json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = json.loads(done.stdout)
    assert (found["step"], found["kind"]) == (4, "loss") and found["diverged_before_checkpoint"] is False
    assert found["not_restored"] == ["keras_seed_generators"], found
    assert "BackupAndRestore does not save them" in found["not_restored_text"]


def test_keras_backup_by_batch_count_restarts_its_epoch_on_the_torch_backend(tmp_path: Path) -> None:
    done = keras_resume("every_two_batches", tmp_path, 6, "--format", "json", "--keras-backend", "torch")
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = json.loads(done.stdout)
    # the epoch trained again; and torch's global RNG, which a Keras backup does not hold, is a fresh process's
    assert found["not_restored"] == ["data_position", "torch_rng"] and found["step"] == 6
    assert found["steps_compared"] == 2
    resumed = keras_manifest(tmp_path, "resumed")
    assert resumed["resume"]["restarted_at"] == 4 and resumed["resume"]["data_restarted"] is True
    assert resumed["framework"] == "keras" and "forward_input" in resumed["audit"]["covered"]
    assert keras_manifest(tmp_path, "checkpointed")["resume"]["backup_metadata"]["epoch"] == 1  # taken in epoch 1


def test_keras_resume_at_a_step_without_backup_is_one_line_exit_2(tmp_path: Path) -> None:
    done = keras_resume("backup_and_restore", tmp_path, 3)
    assert done.returncode == 2, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("deviate: error")]
    assert errors == [
        "deviate: error: `--resume-at` must be a step at the end of which the fit's keras.callbacks.BackupAndRestore "
        'writes its backup: multiples of 4 (the epoch boundaries: BackupAndRestore(save_freq="epoch") writes its '
        "backup at epoch ends). Received: --resume-at=3."
    ]
    assert "Traceback" not in done.stderr
    assert keras_manifest(tmp_path, "checkpointed")["audit"]["recorded_steps"] == 1  # stopped after one step
    assert not (tmp_path / "runs" / "resumed").exists()


def test_keras_without_backup_and_restore_has_no_resume_path_exit_3(tmp_path: Path) -> None:
    done = keras_resume("no_backup", tmp_path, 4)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "error: the fit has no resume path: add keras.callbacks.BackupAndRestore(backup_dir)" in done.stderr
    manifest = keras_manifest(tmp_path, "checkpointed")
    assert manifest["resume"]["refused"] == "no_backup" and manifest["audit"]["recorded_steps"] == 1
    assert not (tmp_path / "runs" / "resumed").exists() and done.stdout == ""
