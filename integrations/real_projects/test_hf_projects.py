"""Hugging Face fine-tuning scripts replicated as launched (projects/hf_finetune: nothing downloaded, CPU).

``run_classification.py`` is transformers' ``run_glue.py`` in miniature (``HfArgumentParser`` over model, data and
``TrainingArguments``, ``set_seed(training_args.seed)`` before the model, ``--do_train --do_eval``, metrics and state
saved into ``--output_dir``); ``sft.py`` runs TRL's ``SFTTrainer`` from an ``SFTConfig``; ``custom_trainer.py`` a
project's own ``Trainer`` subclass; ``accelerate_loop.py`` a plain Accelerate loop seeding itself with Accelerate's
``set_seed``. None imports deviate-cb: every Trainer gets the callback, and the project's seeds
(``TrainingArguments.seed``, ``data_seed``, ``set_seed``) and ``full_determinism`` are taken over, so that ``control``
replicas are bit-identical and ``algo`` replicas differ although each script seeds itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from real_projects_helpers import PROJECTS, Replicated, child_env, deviate_replicate, replicate, require, seed_call

from deviate_cb.stats.directions import is_timing_metric

pytestmark = pytest.mark.slow

PROJECT = "hf_finetune"
CLASSIFY = [
    "python", "run_classification.py", "--output_dir", "{run_dir}/out", "--do_train", "--do_eval",
    "--num_train_epochs", "2", "--per_device_train_batch_size", "16", "--logging_steps", "2",
    "--eval_strategy", "epoch", "--save_strategy", "no", "--report_to", "none", "--use_cpu",
]  # fmt: skip
STEPS = 2 * 6  # 2 epochs of 96 samples in batches of 16


@pytest.fixture(scope="module")
def classify_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    require("transformers", "deviate-cb[transformers]")
    require("datasets", "datasets")
    runs = {}
    for variant, extra in (
        ("control", ["--data_seed", "11", "--full_determinism"]),
        ("algo+impl", ["--data_seed", "11", "--full_determinism"]),
    ):
        runs[variant] = replicate(
            PROJECT, tmp_path_factory.mktemp(f"hf-{variant}"), [*CLASSIFY, *extra], variant=variant, n=2
        )
    runs["kept"] = replicate(
        PROJECT, tmp_path_factory.mktemp("hf-kept"), CLASSIFY, variant="algo", n=2, args=["--keep-project-seeds"]
    )
    return runs


def learned(done: Replicated, replica: int) -> list[tuple[Any, ...]]:
    """What the replica logged, its timings (``eval_runtime``, ``train_samples_per_second``) left out."""
    return [row for row in done.logged(replica) if not is_timing_metric(row[2])]


def losses(done: Replicated, replica: int, name: str = "loss") -> list[float]:
    return [row[-1] for row in done.logged(replica) if row[2] == name]


def assert_completed(done: Replicated, n: int = 2) -> None:
    assert done.returncode == 0, done.output
    for replica in range(n):
        record = done.manifest(replica)
        assert (record["status"], record["framework"], record["fit"]) == ("completed", "transformers", "ended"), (
            replica,
            done.log(replica, "stderr.log")[-3000:],
        )


def test_a_fine_tuning_script_records_every_logged_value(classify_runs: dict[str, Replicated]) -> None:
    for done in classify_runs.values():
        assert_completed(done)
        logged = done.logged(0)
        assert [row[3] for row in logged if row[2] == "loss"] == list(range(2, STEPS + 1, 2))  # logging_steps 2
        assert [(row[0], row[3], row[4]) for row in logged if row[2] == "eval_accuracy"][:2] == [
            ("val", 6, 0),
            ("val", 12, 1),
        ]
        assert {"grad_norm", "learning_rate", "eval_loss", "train_loss"} <= {row[2] for row in logged}
        assert "nothing was recorded" not in done.output


def test_control_is_bit_identical_and_algo_differs(classify_runs: dict[str, Replicated]) -> None:
    control, algo = classify_runs["control"], classify_runs["algo+impl"]
    assert learned(control, 0) == learned(control, 1)
    assert losses(algo, 0) != losses(algo, 1)
    assert "control replicas differ" not in control.output  # eval_runtime differs, and is no metric of the model


@pytest.mark.parametrize("variant", ["control", "algo+impl"])
def test_training_arguments_seeds_are_taken_over(classify_runs: dict[str, Replicated], variant: str) -> None:
    done = classify_runs[variant]
    applied = []
    for replica in range(2):
        seeding = done.seeding(replica)
        seed = seed_call(seeding, "transformers.TrainingArguments.seed", 42)
        data_seed = seed_call(seeding, "transformers.TrainingArguments.data_seed", 11)
        assert seed["applied"] != 42 and data_seed["applied"] != 11
        applied.append((seed["applied"], data_seed["applied"]))
    assert (applied[0] == applied[1]) is (variant == "control")  # control: one seed; algo: one per replica


@pytest.mark.parametrize(("variant", "applied"), [("control", True), ("algo+impl", False)])
def test_full_determinism_follows_the_variant(classify_runs: dict[str, Replicated], variant: str, applied: Any) -> None:
    calls = classify_runs[variant].manifest(0)["determinism_calls"]["calls"]
    found = [c for c in calls if c["call"] == "transformers.TrainingArguments(full_determinism=True)"]
    assert [(c["asked"], c["applied"]) for c in found] == [(True, applied)], calls


def test_keep_project_seeds_keeps_the_trainers_seed(classify_runs: dict[str, Replicated]) -> None:
    kept = classify_runs["kept"]
    assert_completed(kept)
    call = seed_call(kept.seeding(0), "transformers.TrainingArguments.seed", 42)
    assert call["applied"] == 42 and kept.seeding(0)["take_over"] is False
    assert learned(kept, 0) == learned(kept, 1)  # the project's seed for every replica: no seed noise left


def test_a_default_output_dir_lands_in_the_run_directory(tmp_path: Path) -> None:
    command = [word for word in CLASSIFY if word not in ("--output_dir", "{run_dir}/out")]
    done = replicate(PROJECT, tmp_path, [*command, "--max_steps", "2"], variant="algo", n=1)
    assert_completed(done, 1)
    assert (done.run_dir(0) / "trainer_output" / "train_results.json").is_file()
    assert done.project_after == done.project_before  # nothing written into the project's folder


def test_a_fixed_output_dir_is_named_as_shared(tmp_path: Path) -> None:
    command = [word if word != "{run_dir}/out" else "out" for word in CLASSIFY]
    done = replicate(PROJECT, tmp_path, [*command, "--max_steps", "2"], variant="algo", n=2, copy=True)
    assert_completed(done)
    shared = [line for line in done.output.splitlines() if "wrote the same paths outside their run directories" in line]
    assert len(shared) == 1 and "out/train_results.json" in shared[0], done.output


def test_trl_sft_trainer_is_recorded_and_its_control_identical(tmp_path: Path) -> None:
    require("trl", "trl")
    command = ["python", "sft.py", "--output_dir", "{run_dir}/out", "--max_steps", "6", "--logging_steps", "1",
               "--per_device_train_batch_size", "8", "--max_length", "12", "--report_to", "none",
               "--use_cpu"]  # fmt: skip
    done = replicate(PROJECT, tmp_path, command, variant="control", n=2)
    assert_completed(done)
    assert [row[3] for row in done.logged(0) if row[2] == "loss"] == list(range(1, 7))
    assert learned(done, 0) == learned(done, 1)
    assert seed_call(done.seeding(0), "transformers.SFTConfig.seed", 42)["applied"] != 42  # TRL's own config class


def test_a_trainer_subclass_gets_one_callback_and_algo_differs(tmp_path: Path) -> None:
    command = ["python", "custom_trainer.py", "--output_dir={run_dir}/out", "--num_train_epochs", "2",
               "--seed", "7", "--eval_strategy", "epoch", "--logging_steps", "3", "--report_to", "none",
               "--use_cpu", "--save_strategy", "epoch"]  # fmt: skip
    done = replicate(PROJECT, tmp_path, command, variant="algo", n=2)
    assert_completed(done)
    for replica in range(2):
        checkpoint = done.run_dir(replica) / "out" / "checkpoint-24" / "trainer_state.json"  # {run_dir} filled in
        saved = json.loads(checkpoint.read_text())["stateful_callbacks"]["DeviateCallback"]["attributes"]
        assert saved["deviate_run"]["run_dir"] == str(done.run_dir(replica))  # the run's state in the checkpoint
        rows = done.rows(replica)
        # 96 samples in batches of 8 for 2 epochs, logged every 3 steps: recorded once (one callback)
        assert [r["step"] for r in rows if r["name"] == "loss"] == list(range(3, 25, 3))
        assert [r["seq"] for r in rows] == list(range(len(rows)))
    assert losses(done, 0, "eval_loss") != losses(done, 1, "eval_loss")


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_an_accelerate_loop_seeding_itself_is_taken_over(tmp_path: Path, variant: str) -> None:
    require("accelerate", "accelerate")
    done = replicate(PROJECT, tmp_path, ["python", "accelerate_loop.py"], variant=variant, n=2,
                     args=["--metric-regex", r"loss=(?P<loss>[0-9.]+)"])  # fmt: skip
    assert done.returncode == 0, done.output
    assert [done.manifest(r)["status"] for r in range(2)] == ["completed", "completed"]
    applied = [seed_call(done.seeding(r), "accelerate.utils.set_seed", 42)["applied"] for r in range(2)]
    assert (applied[0] == applied[1]) is (variant == "control")
    assert (done.final(0) == done.final(1)) is (variant == "control"), (done.final(0), done.final(1))


def test_the_audit_finds_where_a_trainer_run_stops_being_identical(tmp_path: Path) -> None:
    argv = [str(deviate_replicate().with_name("deviate")), "audit", "--steps", "4", "--out", str(tmp_path / "audit"),
            "--", "python", "custom_trainer.py", "--output_dir", "{run_dir}/out", "--num_train_epochs", "1",
            "--report_to", "none", "--use_cpu", "--save_strategy", "no",
            "--unseeded_weights_from_step", "2"]  # fmt: skip
    done = subprocess.run(argv, cwd=PROJECTS / PROJECT, env=child_env(), capture_output=True, text=True, timeout=300)
    assert "replicas 0, 1 diverge at training step 2 (0-based), first in the loss." in done.stdout, (
        done.stdout + done.stderr
    )


def test_a_torchrun_launch_is_recorded_once_by_the_world_process_zero(tmp_path: Path) -> None:
    """``torchrun --standalone --nproc_per_node 2`` (DDP over gloo): both ranks train, rank zero alone records."""
    bin_dir = str(deviate_replicate().parent)  # torchrun is installed beside the interpreter
    command = ["torchrun", "--standalone", "--nproc_per_node", "2", *CLASSIFY[1:], "--per_device_train_batch_size", "8"]
    env = {"PATH": f"{bin_dir}:{child_env()['PATH']}"}
    done = replicate(PROJECT, tmp_path, command, variant="control", n=1, env=env, args=["--timeout", "240"])
    assert_completed(done, 1)
    # 96 samples over 2 ranks in batches of 8: 6 optimizer steps an epoch, each logged once
    assert [row[3] for row in done.logged(0) if row[2] == "loss"] == [2, 4, 6, 8, 10, 12]
    assert done.manifest(0)["fit_steps"] == {"done": 12, "planned": 12}
    assert sorted(p.name for p in done.run_dir(0).parent.iterdir()) == ["replica=0"]


RESUME_COMMAND = [
    "python", "run_classification.py", "--output_dir", "{run_dir}/out", "--do_train", "--num_train_epochs", "1",
    "--per_device_train_batch_size", "8", "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none",
    "--use_cpu",
]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "expected", "status"),
    [
        ([], "the run resumed from the checkpoint of step 3 continues bit for bit: steps 3..5 agree", 0),
        (
            ["--ignore_data_skip"],
            "diverges from the uninterrupted one at training step 3 (0-based), first in the input",
            1,
        ),
    ],
)
def test_resume_from_checkpoint_is_checked_bit_for_bit(
    tmp_path: Path, extra: list[str], expected: str, status: int
) -> None:
    """``deviate audit --resume-at 3``: the Trainer saves checkpoint-3, a new process resumes from it; skipping the
    trained batches is what makes it exact (``--ignore_data_skip`` restarts the epoch, named as not restored)."""
    deviate = str(deviate_replicate().with_name("deviate"))
    argv = [deviate, "audit", "--resume-at", "3", "--steps", "6", "--out", str(tmp_path / "audit"), "--",
            *RESUME_COMMAND, *extra]  # fmt: skip
    done = subprocess.run(argv, cwd=PROJECTS / PROJECT, env=child_env(), capture_output=True, text=True, timeout=400)
    assert done.returncode == status and expected in done.stdout, done.stdout + done.stderr[-3000:]
    if extra:
        assert "not restored by the checkpoint: the DataLoader's place in its epoch" in done.stdout
    checkpointed = tmp_path / "audit" / "checkpointed" / "experiment=run_classification" / "variant=control"
    assert (checkpointed / "replica=0" / "out" / "checkpoint-3" / "trainer_state.json").is_file()
