"""Projects that do things their own way (issue 26), replicated through command mode as users would (CPU only).

- ``configurator``: nanoGPT's shape: module-level defaults overridden by a configurator that splits ``key=value``
  and ``--key=value`` on ``=`` (``literal_eval``), a plain PyTorch loop seeded with ``torch.manual_seed(1337)``,
  a checkpoint at ``os.path.join(out_dir, 'ckpt.pt')`` (``out_dir = 'out-tiny'``; ``init_from=resume`` resumes
  from it) and ``history.json`` in the working directory. It runs from a copy of its folder, since it writes
  there. ``--out_dir={run_dir}/out`` (unquoted: ``{run_dir}`` after ``=`` is the ``.run-dirs`` link) puts each
  replica's checkpoint in its own run directory (``control`` replicas identical, ``algo`` replicas different)
  and leaves ``history.json`` shared, which the launcher names. Left fixed, both paths are named as written by
  several replicas (``shared_outputs``, run.json ``outside_writes``), and a replica that resumes from the
  checkpoint another replica wrote is named too (``read_other_replica``, run.json ``outside_reads``); with
  ``--isolate`` each replica runs in its own working directory: nothing is shared, nothing named, and the
  project folder is left as it was.
- ``self_deterministic``: a PyTorch script that switches determinism on itself
  (``torch.use_deterministic_algorithms(True)``, ``torch.backends.cudnn.deterministic = True``), and
  ``train_keras.py``, a keras-io recipe doing the same on TensorFlow (``keras.utils.set_random_seed(42)``,
  ``tf.config.experimental.enable_op_determinism()``). Under ``algo+impl`` the variant's setting is in effect
  (determinism off) and the project's calls are recorded in run.json ``determinism_calls``; with
  ``--keep-project-determinism`` the project's switches stay on, the launcher warns before and after, and
  ``deviate report`` lists the problem.
- ``standalone_seeded``: a Lightning script that uses ``DeviateCallback(metrics=["val_*"])`` itself after
  ``L.seed_everything(42)``: run alone (``python train.py``), its run.json records seed 42 and where it was read,
  under an experiment named after the script; replicated, the script's own callback records every replica (no
  second one is injected) and the seeding takeover gives each ``algo`` replica its own seed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_projects_helpers import PROJECTS, Replicated, child_env, replicate, require, seed_call
from test_real_projects import (
    METRIC_REGEXES,
    argv_of,
    assert_all_differ,
    assert_bit_identical,
    assert_completed,
    assert_project_untouched,
    assert_taken_over,
)

pytestmark = pytest.mark.slow


def _ckpt(path: Path) -> dict[str, Any]:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def _same_weights(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


# ------------------------------------------------------------------------------------------ nanoGPT configurator

CONFIGURATOR_COMMAND = ["python", "train.py", "--out_dir={run_dir}/out", "max_iters=20"]


@pytest.fixture(scope="module")
def configurator_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    return {
        variant: replicate(
            "configurator",
            tmp_path_factory.mktemp(f"configurator-{variant}"),
            CONFIGURATOR_COMMAND,
            variant=variant,
            args=["--parallel", "2", *METRIC_REGEXES],
            copy=True,
        )
        for variant in ("control", "algo")
    }


def test_configurator_run_dir_after_equals_reaches_the_script(configurator_runs: dict[str, Replicated]) -> None:
    for variant, done in configurator_runs.items():
        assert_completed(done, 2)
        for replica in range(2):
            record = done.manifest(replica)
            assert argv_of(record["command"]) == CONFIGURATOR_COMMAND
            link = done.out / ".run-dirs" / "configurator" / variant / str(replica)
            ran = argv_of(record["command_run"])
            assert ran[1:] == ["train.py", f"--out_dir={link}/out", "max_iters=20"], ran
            assert "=" not in str(link)  # the configurator's key, val = arg.split("=") takes it
            assert link.resolve() == done.run_dir(replica).resolve()
            assert f"Overriding: out_dir = {link}/out\n" in done.log(replica)


def test_configurator_checkpoints_land_in_their_run_dirs(configurator_runs: dict[str, Replicated]) -> None:
    for variant, done in configurator_runs.items():
        assert "out-tiny/ckpt.pt" not in done.project_after  # the default out_dir was overridden
        for replica in range(2):
            ckpt = _ckpt(done.run_dir(replica) / "out" / "ckpt.pt")
            assert ckpt["iter_num"] == 20
            assert ckpt["config"]["max_iters"] == 20 and ckpt["config"]["seed"] == 1337
            assert ckpt["config"]["out_dir"] == f"{done.out}/.run-dirs/configurator/{variant}/{replica}/out"
            last = ckpt["history"][-1]
            assert done.final(replica)["loss"] == pytest.approx(last["val_loss"], abs=1e-6)


def test_configurator_control_identical_and_algo_differs(configurator_runs: dict[str, Replicated]) -> None:
    control, algo = configurator_runs["control"], configurator_runs["algo"]
    weights = {
        variant: [_ckpt(done.run_dir(k) / "out" / "ckpt.pt")["model"] for k in range(2)]
        for variant, done in configurator_runs.items()
    }
    assert _same_weights(*weights["control"]), "control replicas saved different weights"
    assert control.final(0) == control.final(1) and "loss" in control.final(0)
    assert not _same_weights(*weights["algo"]), "algo replicas saved the same weights: no seed variance"
    assert algo.final(0)["loss"] != algo.final(1)["loss"]


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_configurator_manual_seed_is_taken_over(configurator_runs: dict[str, Replicated], variant: str) -> None:
    assert_taken_over(configurator_runs[variant], 2, "torch.manual_seed", 1337)


FIXED_COMMAND = ["python", "train.py", "max_iters=20"]
RESUME_COMMAND = ["python", "train.py", "max_iters=20", "init_from=resume"]


@pytest.fixture(scope="module")
def fixed_path_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    """The configurator run as it is, its paths left fixed: with and without ``--isolate``."""
    runs = {}
    for key, command, extra in (
        ("fixed", FIXED_COMMAND, ["--parallel", "2"]),  # both replicas write out-tiny/ckpt.pt and history.json
        ("resumed", RESUME_COMMAND, []),  # one at a time: replica 1 resumes from replica 0's checkpoint
        ("isolated", RESUME_COMMAND, ["--parallel", "2", "--isolate"]),
    ):
        runs[key] = replicate(
            "configurator",
            tmp_path_factory.mktemp(f"configurator-{key}"),
            command,
            variant="algo",
            args=[*extra, *METRIC_REGEXES],
            copy=True,
        )
    return runs


def _outside_writes(done: Replicated, replica: int) -> list[str]:
    record = done.manifest(replica)
    assert "outside_writes" in record, f"run.json of replica {replica} has no 'outside_writes': {sorted(record)}"
    return record["outside_writes"]["paths"]


def _problem_lines(done: Replicated, words: str) -> list[str]:
    """The launcher's warnings (one line each) that hold ``words``."""
    return [line for line in _launcher_warnings(done) if words in line]


def test_configurator_history_json_is_still_shared(configurator_runs: dict[str, Replicated]) -> None:
    """``--out_dir={run_dir}/out`` moves the checkpoint; ``history.json`` in the working directory stays shared."""
    for done in configurator_runs.values():
        history = str(done.project / "history.json")
        for replica in range(2):
            assert _outside_writes(done, replica) == [history]
        shared = _problem_lines(done, "wrote the same paths outside their run directories")
        assert len(shared) == 1 and "replicas 0, 1" in shared[0] and "history.json" in shared[0], done.output
        assert "ckpt.pt" not in shared[0]


def test_fixed_paths_are_named_as_shared_outputs(fixed_path_runs: dict[str, Replicated]) -> None:
    done = fixed_path_runs["fixed"]
    assert_completed(done, 2)
    ckpt, history = done.project / "out-tiny" / "ckpt.pt", done.project / "history.json"
    assert {"out-tiny/ckpt.pt", "history.json"} <= set(done.project_after) - set(done.project_before)
    for replica in range(2):
        assert _outside_writes(done, replica) == sorted([str(ckpt), str(history)])
        assert not (done.run_dir(replica) / "out-tiny").exists()
    shared = _problem_lines(done, "wrote the same paths outside their run directories")
    assert len(shared) == 1, done.output
    assert "replicas 0, 1" in shared[0] and "out-tiny/ckpt.pt" in shared[0] and "history.json" in shared[0]
    assert "--isolate" in shared[0]  # the way out is named
    assert not _problem_lines(done, "read files that another replica wrote"), done.output


def test_resuming_from_a_fixed_path_reads_another_replica(fixed_path_runs: dict[str, Replicated]) -> None:
    done = fixed_path_runs["resumed"]
    assert_completed(done, 2)
    assert "no checkpoint in out-tiny: starting from scratch\n" in done.log(0)
    assert "Resuming training from out-tiny\n" in done.log(1)  # replica 0's checkpoint, already at max_iters
    assert done.final(1) == done.final(0), "replica 1 should have resumed replica 0's finished run"
    ckpt = str(done.project / "out-tiny" / "ckpt.pt")
    reads = done.manifest(1).get("outside_reads")
    assert reads and [entry["path"] for entry in reads] == [ckpt], reads
    assert "replica=0" in reads[0]["written_by"] or "replica 0" in reads[0]["written_by"], reads
    assert not done.manifest(0).get("outside_reads")
    read = _problem_lines(done, "read files that another replica wrote")
    assert len(read) == 1 and "replica 1" in read[0] and "ckpt.pt" in read[0], done.output


def test_isolate_gives_each_replica_its_own_working_directory(fixed_path_runs: dict[str, Replicated]) -> None:
    done = fixed_path_runs["isolated"]
    assert_completed(done, 2)
    assert_project_untouched(done)  # no out-tiny/, no history.json in the project folder
    assert not _problem_lines(done, "outside their run directories") and not _problem_lines(done, "another replica")
    finals = []
    for replica in range(2):
        run_dir, record = done.run_dir(replica), done.manifest(replica)
        assert record["isolate"] is True, sorted(record)
        workdir = Path(record["workdir"])
        assert workdir.parent == run_dir / ".workdir" and (workdir / "train.py").resolve() == done.project / "train.py"
        assert "no checkpoint in out-tiny: starting from scratch\n" in done.log(replica)  # nobody else's
        (ckpt,) = [path for path in run_dir.rglob("ckpt.pt")]  # rglob does not follow the links into the project
        assert ckpt == workdir / "out-tiny" / "ckpt.pt"
        assert not ckpt.is_symlink() and not ckpt.parent.is_symlink()
        assert _ckpt(ckpt)["iter_num"] == 20
        assert (workdir / "history.json").is_file() and not (workdir / "history.json").is_symlink()
        assert not done.manifest(replica).get("outside_writes", {}).get("paths")
        assert not done.manifest(replica).get("outside_reads")
        finals.append(done.final(replica))
    assert finals[0]["loss"] != finals[1]["loss"]


# ------------------------------------------------------------------------------ a script that is deterministic itself

SELF_DETERMINISTIC_COMMAND = ["python", "train.py", "--epochs", "3"]
KEPT = "--keep-project-determinism kept it"


@pytest.fixture(scope="module")
def self_deterministic_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    runs = {}
    for key, variant, extra in (
        ("control", "control", []),
        ("algo+impl", "algo+impl", []),
        ("kept", "algo+impl", ["--keep-project-determinism"]),
    ):
        runs[key] = replicate(
            "self_deterministic",
            tmp_path_factory.mktemp(f"self-deterministic-{key}"),
            SELF_DETERMINISTIC_COMMAND,
            variant=variant,
            args=["--parallel", "2", *METRIC_REGEXES, *extra],
        )
    return runs


def _determinism_call(done: Replicated, replica: int, call: str) -> dict[str, Any]:
    record = done.manifest(replica)
    assert "determinism_calls" in record, f"run.json of replica {replica} has no 'determinism_calls': {sorted(record)}"
    found = [c for c in record["determinism_calls"]["calls"] if c["call"] == call]
    assert len(found) == 1, f"expected one {call} in {record['determinism_calls']}"
    return found[0]


def _launcher_warnings(done: Replicated) -> list[str]:
    return [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("deviate-replicate: warning")]


def test_self_deterministic_control_identical_and_algo_impl_differs(
    self_deterministic_runs: dict[str, Replicated],
) -> None:
    control, noisy = self_deterministic_runs["control"], self_deterministic_runs["algo+impl"]
    for done in self_deterministic_runs.values():
        assert_completed(done, 2)
        assert_project_untouched(done)
    assert control.log(0) == control.log(1)  # every epoch's printed metrics, to 6 decimals
    assert control.final(0) == control.final(1)
    assert noisy.final(0)["loss"] != noisy.final(1)["loss"]


def test_self_deterministic_switches_agree_with_control(self_deterministic_runs: dict[str, Replicated]) -> None:
    """``control`` asks for determinism too: the project's switches are recorded and applied as asked."""
    done = self_deterministic_runs["control"]
    for replica in range(2):
        assert "determinism: algorithms=True cudnn=True benchmark=False\n" in done.log(replica)
        determinism = done.manifest(replica)["determinism"]
        assert determinism["in_effect"]["torch"]["deterministic_algorithms"] is True
        assert determinism["verified"] is True, determinism
        entry = _determinism_call(done, replica, "torch.use_deterministic_algorithms")
        assert (entry["asked"], entry["applied"]) == (True, True)
    assert not _launcher_warnings(done), done.output


def test_self_deterministic_switches_are_taken_over_under_algo_impl(
    self_deterministic_runs: dict[str, Replicated],
) -> None:
    """``algo+impl`` asks for determinism off: the project's own switches are recorded, not applied."""
    done = self_deterministic_runs["algo+impl"]
    for replica in range(2):
        assert "determinism: algorithms=False cudnn=False benchmark=False\n" in done.log(replica)
        determinism = done.manifest(replica)["determinism"]
        assert determinism["requested"]["deterministic"] is False
        torch_state = determinism["in_effect"]["torch"]
        assert torch_state["deterministic_algorithms"] is False and torch_state["cudnn_deterministic"] is False
        assert determinism["verified"] is True and determinism["problems"] == [], determinism
        calls = done.manifest(replica)["determinism_calls"]
        assert calls["take_over"] is True and calls["requested"] is False, calls
        for call in ("torch.use_deterministic_algorithms", "torch.backends.cudnn.deterministic = True"):
            entry = _determinism_call(done, replica, call)
            assert (entry["asked"], entry["applied"], entry["count"]) == (True, False, 1), entry
    assert not _launcher_warnings(done), done.output


def test_keep_project_determinism_keeps_the_switches_and_warns(self_deterministic_runs: dict[str, Replicated]) -> None:
    done = self_deterministic_runs["kept"]
    assert done.final(0)["loss"] != done.final(1)["loss"]  # still seed noise: only implementation noise is lost
    for replica in range(2):
        assert "determinism: algorithms=True cudnn=True benchmark=False\n" in done.log(replica)
        determinism = done.manifest(replica)["determinism"]
        assert determinism["in_effect"]["torch"]["deterministic_algorithms"] is True
        assert determinism["verified"] is False
        assert any("torch.use_deterministic_algorithms(True)" in p and KEPT in p for p in determinism["problems"])
        calls = done.manifest(replica)["determinism_calls"]
        assert calls["take_over"] is False, calls
        entry = _determinism_call(done, replica, "torch.use_deterministic_algorithms")
        assert (entry["asked"], entry["applied"]) == (True, True)
    warnings = _launcher_warnings(done)
    assert any("--keep-project-determinism:" in line for line in warnings), done.output  # said before it runs
    assert any("replicas 0, 1" in line and KEPT in line for line in warnings), done.output  # and which replicas
    report = subprocess.run(
        [str(Path(sys.executable).parent / "deviate"), "report", str(done.out)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    problems = " ".join(line.strip() for line in report.stdout.splitlines() if not line.startswith("|"))
    assert "problem: experiment=self_deterministic variant=algo+impl: replicas 0, 1" in problems, report.stdout
    assert "torch.use_deterministic_algorithms(True)) and --keep-project-determinism kept it" in problems


KERAS_DETERMINISTIC_COMMAND = ["python", "train_keras.py", "--epochs", "2"]
TF_SWITCH = "tf.config.experimental.enable_op_determinism()"


@pytest.fixture(scope="module")
def keras_deterministic_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    require("keras", "deviate-cb[keras]")
    require("tensorflow", "tensorflow-cpu")
    return {
        key: replicate(
            "self_deterministic",
            tmp_path_factory.mktemp(f"keras-deterministic-{key}"),
            KERAS_DETERMINISTIC_COMMAND,
            variant="algo+impl",
            args=["--parallel", "2", "--keras-backend", "tensorflow", *METRIC_REGEXES, *extra],
        )
        for key, extra in (("taken", []), ("kept", ["--keep-project-determinism"]))
    }


def test_keras_recipe_op_determinism_is_taken_over(keras_deterministic_runs: dict[str, Replicated]) -> None:
    done = keras_deterministic_runs["taken"]
    assert_completed(done, 2)
    assert_project_untouched(done)
    assert done.final(0)["loss"] != done.final(1)["loss"]
    assert_taken_over(done, 2, "keras.utils.set_random_seed", 42)
    for replica in range(2):
        determinism = done.manifest(replica)["determinism"]
        assert determinism["in_effect"]["tensorflow"]["op_determinism"] is False
        assert determinism["verified"] is True, determinism
        entry = _determinism_call(done, replica, TF_SWITCH)
        assert (entry["asked"], entry["applied"]) == (True, False), entry
    assert not _launcher_warnings(done), done.output


def test_keras_recipe_op_determinism_kept_is_a_problem(keras_deterministic_runs: dict[str, Replicated]) -> None:
    done = keras_deterministic_runs["kept"]
    assert_completed(done, 2)
    for replica in range(2):
        determinism = done.manifest(replica)["determinism"]
        assert determinism["in_effect"]["tensorflow"]["op_determinism"] is True
        assert any(TF_SWITCH in p and KEPT in p for p in determinism["problems"]), determinism
        entry = _determinism_call(done, replica, TF_SWITCH)
        assert (entry["asked"], entry["applied"]) == (True, True), entry
    assert any(TF_SWITCH in line and KEPT in line for line in _launcher_warnings(done)), done.output


# ------------------------------------------------------------------------------- standalone DeviateCallback script

STANDALONE_SCRIPT = PROJECTS / "standalone_seeded" / "train.py"
VAL_NAMES = {"val_loss", "val_acc"}


def test_standalone_script_run_alone_records_its_seed_under_its_name(tmp_path: Path) -> None:
    """``python train.py`` without deviate-replicate: the callback files the run under ``experiment=train``."""
    env = child_env()
    env.pop("PYTHONPATH", None)  # deviate-cb as the user has it installed, nothing of the test's
    done = subprocess.run(
        [sys.executable, str(STANDALONE_SCRIPT), "--epochs", "2"],
        cwd=tmp_path,  # DeviateCallback() writes deviate_runs/ in the working directory
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "deviate callbacks: 1\n" in done.stdout
    manifests = sorted((tmp_path / "deviate_runs").glob("experiment=*/variant=*/replica=*/run.json"))
    assert [m.relative_to(tmp_path).as_posix() for m in manifests] == [
        "deviate_runs/experiment=train/variant=standalone/replica=0/run.json"
    ]
    record = json.loads(manifests[0].read_text())
    assert record["status"] == "completed" and record["experiment"] == "train"
    assert (record["seed"], record["seed_source"], record["seed_note"]) == (42, "PL_GLOBAL_SEED", None)
    run = Replicated(
        0, done.stdout, done.stderr, tmp_path / "deviate_runs", "train", "standalone", [], tmp_path, {}, {}
    )
    assert {name for _, _, name, *_ in run.logged(0)} == VAL_NAMES  # the script's metrics=["val_*"]
    assert not (PROJECTS / "standalone_seeded" / "deviate_runs").exists()


@pytest.fixture(scope="module")
def standalone_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    return {
        variant: replicate(
            "standalone_seeded",
            tmp_path_factory.mktemp(f"standalone-{variant}"),
            ["python", "train.py", "--epochs", "2"],
            variant=variant,
            args=["--parallel", "2"],
        )
        for variant in ("control", "algo")
    }


def test_standalone_script_replicated_keeps_its_own_callback(standalone_runs: dict[str, Replicated]) -> None:
    for done in standalone_runs.values():
        assert_completed(done, 2)
        assert_project_untouched(done)  # no deviate_runs/ (nor lightning_logs/) in the project folder
        for replica in range(2):
            assert "deviate callbacks: 1\n" in done.log(replica)  # the script's, no second one injected
            assert {name for _, _, name, *_ in done.logged(replica)} == VAL_NAMES  # recorded by the script's own
            record = done.manifest(replica)
            assert record["experiment"] == "standalone_seeded" and record["variant"] == done.variant
            assert record["seed"] == (replica if done.variant == "algo" else 0)
            assert "is ignored" not in done.log(replica, "stderr.log")  # DeviateCallback() overrode nothing


def test_standalone_script_replicated_control_identical_and_algo_differs(
    standalone_runs: dict[str, Replicated],
) -> None:
    assert_bit_identical(standalone_runs["control"], 2, min_rows=4)  # 2 epochs of val_loss and val_acc
    assert_all_differ(standalone_runs["algo"], 2, min_rows=4)


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_standalone_script_seed_everything_is_taken_over(standalone_runs: dict[str, Replicated], variant: str) -> None:
    applied = assert_taken_over(standalone_runs[variant], 2, "lightning.seed_everything", 42)
    for replica, seed in enumerate(applied):
        assert seed_call(standalone_runs[variant].seeding(replica), "lightning.seed_everything", 42)["applied"] == seed
