"""deviate-replicate's command mode on small projects in the shapes real users have (projects/, CPU only).

None of the projects imports deviate-cb and each seeds itself (``L.seed_everything(cfg.seed)``, LightningCLI's
``seed_everything: 42``, ``keras.utils.set_random_seed(42)``, ``torch.manual_seed(args.seed)``,
``random.seed(0)``); each is replicated as a user would, ``deviate-replicate ... -- python train.py ...`` from
its own folder. ``control`` replicas must be bit-identical; ``algo`` replicas must differ although the project
seeds itself (the seeding takeover remaps the project's seed per replica, and run.json records it); with
``--keep-project-seeds`` the project's seed wins, so ``algo`` replicas come out identical and the launcher warns.
Every replica's outputs (Hydra's run directory, Lightning's logs and checkpoints) land in its own run directory,
never in the project folder.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from real_projects_helpers import Replicated, child_env, replicate, require, seed_call, values_of

pytestmark = pytest.mark.slow

TRAIN_NAMES = {"train_loss", "val_loss", "val_acc"}  # what the Lightning projects log
METRIC_REGEXES = ["--metric-regex", r"acc=(?P<acc>[0-9.]+)", "--metric-regex", r"loss=(?P<loss>[0-9.]+)"]
FINAL_LINE = re.compile(r"^final: acc=([0-9.]+) loss=([0-9.]+)$", re.MULTILINE)


# ---------------------------------------------------------------------------------------------- shared checks


def assert_completed(done: Replicated, n: int) -> None:
    assert done.returncode == 0, done.output
    for replica in range(n):
        record = done.manifest(replica)
        assert record["status"] == "completed", (replica, record.get("status"), done.log(replica, "stderr.log"))
        assert record["mode"] == "command"


def assert_bit_identical(done: Replicated, n: int, *, min_rows: int) -> None:
    """Every replica recorded the same rows, values compared exactly (floats, not approximately)."""
    first = done.logged(0)
    assert len(first) >= min_rows, first
    for replica in range(1, n):
        assert done.logged(replica) == first, f"replica {replica} differs from replica 0"


def assert_all_differ(done: Replicated, n: int, *, min_rows: int) -> None:
    """Same rows recorded (stage, scope, name, step, epoch) by every replica, with different values."""
    recorded = [values_of(done.logged(replica)) for replica in range(n)]
    where, _ = recorded[0]
    assert len(where) >= min_rows, where
    for a, b in combinations(range(n), 2):
        assert recorded[a][0] == recorded[b][0], f"replicas {a} and {b} recorded different rows"
        assert recorded[a][1] != recorded[b][1], f"replicas {a} and {b} trained identically: no seed variance"


def assert_taken_over(done: Replicated, n: int, call: str, asked: int, *, base_seed: int = 0) -> list[int]:
    """The project's seeding call was remapped in every replica; returns the applied seeds.

    A replica whose own seed is the one the project asks for is the passthrough case: it gets that seed as is.
    """
    applied = []
    for replica in range(n):
        seeding = done.seeding(replica)
        assert seeding["take_over"] is True, seeding
        replica_seed = base_seed + replica if done.variant.startswith("algo") else base_seed
        assert seeding["replica_seed"] == replica_seed, seeding
        entry = seed_call(seeding, call, asked)
        assert entry["count"] >= 1 and isinstance(entry["applied"], int), entry
        if replica_seed == asked:
            assert entry["applied"] == asked, f"replica {replica} (seed {asked}): {call}({asked}) not passed through"
        else:
            assert entry["applied"] != asked, f"replica {replica}: {call}({asked}) was not remapped: {entry}"
        applied.append(entry["applied"])
    if done.variant.startswith("algo"):
        assert len(set(applied)) == n, f"{call}({asked}) got the same seed in different replicas: {applied}"
    else:
        assert len(set(applied)) == 1, f"control replicas applied different seeds to {call}({asked}): {applied}"
    return applied


def assert_project_untouched(done: Replicated) -> None:
    assert done.project_after == done.project_before, (
        f"the run wrote into {done.project}: "
        f"{sorted(set(done.project_after.items()) ^ set(done.project_before.items()))}"
    )


def argv_of(recorded: str | Sequence[str]) -> list[str]:
    return shlex.split(recorded) if isinstance(recorded, str) else list(recorded)


# --------------------------------------------------------------------------------------------------- Hydra app

HYDRA_COMMAND = ["python", "src/train.py", "model=small", "trainer.max_epochs=2"]
HYDRA_N = 3
HYDRA_STEPS = 2 * 6  # 2 epochs of 192 training samples in batches of 32


@pytest.fixture(scope="module")
def hydra_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    require("hydra", "hydra-core>=1.3")
    return {
        variant: replicate(
            "hydra_app",
            tmp_path_factory.mktemp(f"hydra-{variant}"),
            HYDRA_COMMAND,
            variant=variant,
            n=HYDRA_N,
            args=["--parallel", "2"],
        )
        for variant in ("control", "algo")
    }


def test_hydra_app_replicas_complete_in_command_mode(hydra_runs: dict[str, Replicated]) -> None:
    for done in hydra_runs.values():
        assert_completed(done, HYDRA_N)
        record = done.manifest(0)
        assert argv_of(record["command"]) == HYDRA_COMMAND
        names = {name for _, _, name, *_ in done.logged(0)}
        assert names >= TRAIN_NAMES, names  # the injected DeviateCallback saw what the project logs


def test_hydra_app_control_is_bit_identical(hydra_runs: dict[str, Replicated]) -> None:
    assert_bit_identical(hydra_runs["control"], HYDRA_N, min_rows=HYDRA_STEPS)


def test_hydra_app_algo_replicas_differ_although_it_seeds_itself(hydra_runs: dict[str, Replicated]) -> None:
    assert_all_differ(hydra_runs["algo"], HYDRA_N, min_rows=HYDRA_STEPS)


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_hydra_app_seed_everything_is_taken_over(hydra_runs: dict[str, Replicated], variant: str) -> None:
    assert_taken_over(hydra_runs[variant], HYDRA_N, "lightning.seed_everything", 12345)


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_hydra_app_outputs_are_isolated_per_replica(hydra_runs: dict[str, Replicated], variant: str) -> None:
    done = hydra_runs[variant]
    assert_project_untouched(done)  # nothing in the project's outputs/, multirun/ or lightning_logs/
    for replica in range(HYDRA_N):
        outputs = done.run_dir(replica) / "outputs"
        assert f"output_dir={outputs}" in done.log(replica), done.log(replica)  # HydraConfig's runtime.output_dir
        assert "hidden: 8" in (outputs / ".hydra" / "config.yaml").read_text()  # the command-line override
        assert len(sorted((outputs / "checkpoints").glob("*.ckpt"))) == 1  # ModelCheckpoint keeps the best one
        versions = sorted(p.name for p in (outputs / "lightning_logs").iterdir())
        assert versions == ["version_0"], versions  # one CSVLogger per directory: no replica shared it
        assert (outputs / "lightning_logs" / "version_0" / "metrics.csv").is_file()
        assert not (done.run_dir(replica) / "multirun").exists()


def test_hydra_app_csv_logs_belong_to_their_replica(hydra_runs: dict[str, Replicated]) -> None:
    import csv

    done = hydra_runs["algo"]
    for replica in range(HYDRA_N):
        path = done.run_dir(replica) / "outputs" / "lightning_logs" / "version_0" / "metrics.csv"
        with path.open(newline="") as handle:
            csv_acc = [float(row["val_acc"]) for row in csv.DictReader(handle) if row.get("val_acc")]
        recorded = [value for *_, name, _, _, value in done.logged(replica) if name == "val_acc"]
        assert csv_acc == pytest.approx(recorded, rel=1e-6, abs=1e-7) and len(csv_acc) == 2


# --------------------------------------------------------------------------------------------- LightningCLI app

CLI_COMMAND = ["python", "main.py", "fit", "--config", "config.yaml"]
CLI_STEPS = 2 * 6


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    require("jsonargparse", "jsonargparse[signatures]>=4.27")
    runs = {}
    for key, variant, extra in (
        ("control", "control", []),
        ("algo", "algo", []),
        ("kept", "algo", ["--keep-project-seeds"]),
    ):
        tmp = tmp_path_factory.mktemp(f"lightningcli-{key}")
        runs[key] = replicate("lightningcli_app", tmp, CLI_COMMAND, variant=variant, args=["--parallel", "2", *extra])
    return runs


def test_lightningcli_replicas_complete_in_command_mode(cli_runs: dict[str, Replicated]) -> None:
    for done in cli_runs.values():
        assert_completed(done, 2)
        assert argv_of(done.manifest(1)["command"]) == CLI_COMMAND
        assert {name for _, _, name, *_ in done.logged(0)} >= TRAIN_NAMES


def test_lightningcli_control_is_bit_identical(cli_runs: dict[str, Replicated]) -> None:
    assert_bit_identical(cli_runs["control"], 2, min_rows=CLI_STEPS)


def test_lightningcli_algo_replicas_differ_although_it_seeds_itself(cli_runs: dict[str, Replicated]) -> None:
    assert_all_differ(cli_runs["algo"], 2, min_rows=CLI_STEPS)


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_lightningcli_seed_everything_is_taken_over(cli_runs: dict[str, Replicated], variant: str) -> None:
    assert_taken_over(cli_runs[variant], 2, "lightning.seed_everything", 42)


@pytest.mark.parametrize("key", ["control", "algo", "kept"])
def test_lightningcli_logs_go_to_the_run_directories(cli_runs: dict[str, Replicated], key: str) -> None:
    done = cli_runs[key]
    assert_project_untouched(done)
    for replica in range(2):
        logs = done.run_dir(replica) / "lightning_logs"
        assert sorted(p.name for p in logs.iterdir()) == ["version_0"]
        version = logs / "version_0"
        assert (version / "config.yaml").is_file()  # LightningCLI's SaveConfigCallback
        # LightningCLI saves the seed seed_everything returned: the one applied (the project's 42 when kept)
        applied = seed_call(done.seeding(replica), "lightning.seed_everything", 42)["applied"]
        assert f"\nseed_everything: {applied}\n" in (version / "config.yaml").read_text()
        assert len(sorted((version / "checkpoints").glob("*.ckpt"))) == 1


def test_keep_project_seeds_makes_algo_replicas_identical_and_warns(cli_runs: dict[str, Replicated]) -> None:
    done = cli_runs["kept"]
    assert_bit_identical(done, 2, min_rows=CLI_STEPS)  # the project's seed_everything(42) wins in both
    for replica in range(2):
        record = done.manifest(replica)
        assert record["seed"] == replica  # the replicas had different seeds; the project's own seeding won
        seeding = done.seeding(replica)
        assert seeding["take_over"] is False, seeding
        assert seed_call(seeding, "lightning.seed_everything", 42)["applied"] == 42  # recorded, not remapped
    launcher = done.stdout + done.stderr
    warnings = [line for line in launcher.splitlines() if "warning" in line and "seed variance is suppressed" in line]
    assert warnings, f"no warning about suppressed seed variance:\n{done.output}"


# ------------------------------------------------------------------------------------------- keras-io script

KERAS_COMMAND = ["python", "train.py", "--epochs", "2"]
KERAS_STEPS = 2 * 7  # 2 epochs of 204 training samples (validation_split=0.2 of 256) in batches of 32


def _keras_skip(backend: str) -> str | None:
    module = {"tensorflow": "tensorflow", "torch": "torch"}[backend]
    if importlib.util.find_spec("keras") is None:
        return "Keras 3 is not installed (pip install 'deviate-cb[keras]')"
    if importlib.util.find_spec(module) is None:
        return f"the Keras {backend} backend needs {module}, not installed"
    return None


@pytest.fixture(scope="module", params=["tensorflow", "torch"])
def keras_backend(request: pytest.FixtureRequest) -> str:
    reason = _keras_skip(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


@pytest.fixture(scope="module")
def keras_runs(keras_backend: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    backend = keras_backend
    # TensorFlow through the launcher's --keras-backend option, torch through the KERAS_BACKEND environment variable
    args, env = (["--keras-backend", backend], None) if backend == "tensorflow" else ([], {"KERAS_BACKEND": backend})
    return {
        variant: replicate(
            "keras_script",
            tmp_path_factory.mktemp(f"keras-{backend}-{variant}"),
            KERAS_COMMAND,
            variant=variant,
            args=["--parallel", "2", *args],
            env=env,
        )
        for variant in ("control", "algo+impl")
    }


def test_keras_script_replicas_complete_on_the_asked_backend(
    keras_backend: str, keras_runs: dict[str, Replicated]
) -> None:
    for done in keras_runs.values():
        assert_completed(done, 2)
        for replica in range(2):
            assert f"Keras backend: {keras_backend}\n" in done.log(replica)
        stages = {(stage, scope) for stage, scope, *_ in done.logged(0)}
        assert {("train", "step"), ("train", "epoch"), ("val", "epoch"), ("test", "epoch")} <= stages  # fit + evaluate


def test_keras_script_control_is_bit_identical(keras_runs: dict[str, Replicated]) -> None:
    assert_bit_identical(keras_runs["control"], 2, min_rows=KERAS_STEPS)


def test_keras_script_algo_replicas_differ_although_it_seeds_itself(keras_runs: dict[str, Replicated]) -> None:
    assert_all_differ(keras_runs["algo+impl"], 2, min_rows=KERAS_STEPS)


@pytest.mark.parametrize("variant", ["control", "algo+impl"])
def test_keras_set_random_seed_is_taken_over(keras_runs: dict[str, Replicated], variant: str) -> None:
    assert_taken_over(keras_runs[variant], 2, "keras.utils.set_random_seed", 42)


# ----------------------------------------------------------------------------------------- argparse --seed loop

ARGPARSE_COMMAND = ["python", "train.py", "--seed", "{seed}", "--epochs", "3"]
ARGPARSE_BASE_SEED = 100


@pytest.fixture(scope="module")
def argparse_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    args = ["--seed", str(ARGPARSE_BASE_SEED), "--parallel", "2", *METRIC_REGEXES]
    return {
        variant: replicate(
            "argparse_seed",
            tmp_path_factory.mktemp(f"argparse-{variant}"),
            ARGPARSE_COMMAND,
            variant=variant,
            args=args,
        )
        for variant in ("control", "algo")
    }


def _printed_final(done: Replicated, replica: int) -> dict[str, float]:
    printed = FINAL_LINE.findall(done.log(replica))
    assert printed, done.log(replica)
    acc, loss = printed[-1]
    return {"acc": float(acc), "loss": float(loss)}


def test_argparse_seed_placeholder_reaches_the_script(argparse_runs: dict[str, Replicated]) -> None:
    for variant, done in argparse_runs.items():
        assert_completed(done, 2)
        for replica in range(2):
            seed = ARGPARSE_BASE_SEED + (replica if variant == "algo" else 0)
            record = done.manifest(replica)
            assert argv_of(record["command"]) == ARGPARSE_COMMAND  # as given, placeholder kept
            ran = argv_of(record["command_run"])  # placeholders filled; a bare `python` may be made absolute
            assert ran[1:] == ["train.py", "--seed", str(seed), "--epochs", "3"], ran
            assert Path(ran[0]).name.startswith("python"), ran
            assert f"seed: {seed}\n" in done.log(replica)  # what argparse handed the script
            seeding = done.seeding(replica)
            assert seeding["replica_seed"] == seed
            # the project's own calls ask for the replica seed itself: passed through unchanged
            for call in ("torch.manual_seed", "numpy.random.seed"):
                assert seed_call(seeding, call, seed)["applied"] == seed


def test_argparse_seed_final_metrics_from_stdout(argparse_runs: dict[str, Replicated]) -> None:
    for done in argparse_runs.values():
        for replica in range(2):
            final = done.final(replica)
            assert {k: final.get(k) for k in ("acc", "loss")} == _printed_final(done, replica)


def test_argparse_seed_control_identical_and_algo_differs(argparse_runs: dict[str, Replicated]) -> None:
    control, algo = argparse_runs["control"], argparse_runs["algo"]
    assert control.final(0) == control.final(1) and "loss" in control.final(0)
    assert control.log(0) == control.log(1)  # every epoch's printed metrics, to 6 decimals
    assert algo.final(0)["loss"] != algo.final(1)["loss"]
    assert algo.log(0).split("\n", 1)[1] != algo.log(1).split("\n", 1)[1]  # beyond the "seed: N" line


# ------------------------------------------------------------------------------------------- print-only script

PRINT_COMMAND = ["python", "train.py"]


@pytest.fixture(scope="module")
def print_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replicated]:
    return {
        variant: replicate(
            "print_only",
            tmp_path_factory.mktemp(f"print-{variant}"),
            PRINT_COMMAND,
            variant=variant,
            args=["--parallel", "2", *METRIC_REGEXES],
        )
        for variant in ("control", "algo")
    }


def _final_rows(done: Replicated, replica: int) -> list[dict[str, Any]]:
    return [row for row in done.rows(replica) if row["stage"] == "final"]


def test_print_only_metrics_are_read_from_stdout(print_runs: dict[str, Replicated]) -> None:
    for done in print_runs.values():
        assert_completed(done, 2)
        for replica in range(2):
            rows = _final_rows(done, replica)
            assert sorted(row["name"] for row in rows) == ["acc", "loss"]
            assert all(row["finite"] and row["scope"] == "final" for row in rows)
            assert done.final(replica) == _printed_final(done, replica)
            assert 0.0 <= done.final(replica)["acc"] <= 1.0


def test_print_only_control_identical_and_algo_differs(print_runs: dict[str, Replicated]) -> None:
    control, algo = print_runs["control"], print_runs["algo"]
    assert control.final(0) == control.final(1)
    assert control.log(0) == control.log(1)
    assert algo.final(0) != algo.final(1), "algo replicas of a script seeding itself with 0 trained identically"


@pytest.mark.parametrize("variant", ["control", "algo"])
@pytest.mark.parametrize("call", ["random.seed", "torch.manual_seed"])
def test_print_only_seeds_are_taken_over(print_runs: dict[str, Replicated], variant: str, call: str) -> None:
    assert_taken_over(print_runs[variant], 2, call, 0)


def test_print_only_replica_with_the_projects_seed_trains_as_the_project_alone(
    print_runs: dict[str, Replicated],
) -> None:
    """Algo replica 0 has seed 0, the seed the script asks for: passed through, it prints what a plain run prints."""
    alone = subprocess.run(
        [sys.executable, *PRINT_COMMAND[1:]],
        cwd=print_runs["algo"].project,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert FINAL_LINE.findall(alone.stdout)[-1] == FINAL_LINE.findall(print_runs["algo"].log(0))[-1]
    assert FINAL_LINE.findall(alone.stdout)[-1] != FINAL_LINE.findall(print_runs["algo"].log(1))[-1]
