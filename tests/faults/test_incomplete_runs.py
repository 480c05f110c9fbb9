"""An early exit with status 0 is not a completed run (issue 25, item 2).

``sys.exit(0)`` or ``os._exit(0)`` in the middle of training (what a preemption handler or a stray ``sys.exit()``
does) exits with status 0 as a finished run does. Completed means that training ended as the framework ends it:
Lightning reached ``on_fit_end``, Keras ``on_train_end`` (early stopping included), and a ``--trainer`` function
returned or called ``sys.exit(0)`` after its fits ended (click and Hydra apps end that way). Anything else that
exits 0 is ``incomplete``: listed apart with why, left out of the statistics, the launcher exits 1, and a rerun
runs it again. Real training through the real launcher: tiny Lightning and Keras (torch backend) models on CPU.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest

from deviate_cb.launch.backends.base import Outcome
from deviate_cb.launch.records import end_fields, status_of
from deviate_cb.launch.replication import ReplicaResult, ReplicationResult
from deviate_cb.store.completion import INCOMPLETE_PREFIX, incomplete_reason, why_incomplete
from deviate_cb.store.manifest import RunManifest
from tests.helpers.replicate_helpers import Completed, child_env, manifest, start_cli

HAS_KERAS = importlib.util.find_spec("keras") is not None

# A click app (click ends it with sys.exit(0)) whose replicas end in different ways: 0 trains to the end, 1 calls
# sys.exit(0) and 2 os._exit(0) at training step 7 (of 20: 4 batches x 5 epochs), 3 is stopped early by
# EarlyStopping after 2 epochs.
LIGHTNING_APP = """
import os
import sys

import click
import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.context import RunContext

EXIT_STEP = 7


class Tiny(L.LightningModule):
    def __init__(self, how):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.how = how

    def training_step(self, batch, batch_idx):
        if self.global_step == EXIT_STEP and self.how == "sys.exit":
            sys.exit(0)
        if self.global_step == EXIT_STEP and self.how == "os._exit":
            os._exit(0)
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(shuffle):
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16, shuffle=shuffle)


def fit(how):
    torch.set_num_threads(1)
    stop = [EarlyStopping(monitor="val_loss", patience=0, min_delta=10.0)] if how == "early stop" else []
    trainer = L.Trainer(
        max_epochs=5, callbacks=stop, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu",
    )
    trainer.fit(Tiny(how), loader(True), loader(False))


@click.command()
def main():
    fit({0: "to the end", 1: "sys.exit", 2: "os._exit", 3: "early stop"}[RunContext.current().replica])


if __name__ == "__main__":  # command mode: replica 0 runs no training at all, replica 1 exits at step 7
    if RunContext.current().replica == 1:
        fit("sys.exit")
"""

# Keras (torch backend): 0 trains to the end and returns, 1 calls sys.exit(0) before its 6th batch (of 12: 4 batches
# x 3 epochs), 2 is a plain function (no framework) that calls os._exit(0).
KERAS_TRAINER = """
import os
import sys


def main(ctx):
    if ctx.replica == 2:
        os._exit(0)
    import keras
    import numpy as np

    class ExitMidFit(keras.callbacks.Callback):
        batches = 0

        def on_train_batch_begin(self, batch, logs=None):
            if ctx.replica == 1 and ExitMidFit.batches == 5:
                sys.exit(0)
            ExitMidFit.batches += 1

    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("float32")
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[ExitMidFit()])
    return {"trained": 1.0}
"""


def _replicate(tmp: Path, *args: str, timeout: float = 300, env: Optional[dict[str, str]] = None) -> Completed:
    out = tmp / "runs"
    cut = args.index("--") if "--" in args else len(args)
    proc = start_cli([*args[:cut], "--out", str(out), *args[cut:]], cwd=tmp, env=env)
    stdout, stderr = proc.communicate(timeout=timeout)
    return Completed(proc.returncode, stdout, stderr, out)


def _report(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "report", str(out), *args],
        env=child_env({"COLUMNS": "250"}),
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- Lightning, --trainer (a click app) ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lightning_study(tmp_path_factory: pytest.TempPathFactory) -> Completed:
    tmp = tmp_path_factory.mktemp("incomplete_lightning")
    (tmp / "app.py").write_text(textwrap.dedent(LIGHTNING_APP))
    # Every epoch end writes (by default epochs this short share one write every FLUSH_INTERVAL_S): replica 2's
    # os._exit(0) then leaves epoch 0 on disk, from which the launcher reads the last step recorded.
    return _replicate(tmp, "--trainer", "app.py:main", "-n", "4", "--parallel", "2", "--variant", "algo",
                      env={"DEVIATE_FLUSH_INTERVAL_S": "0"})  # fmt: skip


def _lightning(study: Completed, replica: int) -> dict[str, Any]:
    return manifest(study.run_dir("app", "algo", replica))


@pytest.mark.slow
def test_early_exits_make_the_launcher_exit_1_and_say_incomplete(lightning_study: Completed) -> None:
    assert lightning_study.returncode == 1, lightning_study.stderr
    assert "2 completed, 0 failed, 0 skipped, 2 incomplete in " in lightning_study.stdout
    lines = lightning_study.stdout.splitlines()
    assert any(
        line.startswith("replica 1 (seed 1): incomplete after ")
        and line.endswith("(exit 0, the fit stopped at step 7 of 20 and never reached on_fit_end; SystemExit: 0)")
        for line in lines
    ), lightning_study.stdout


@pytest.mark.slow
def test_sys_exit_0_in_the_middle_of_a_fit_is_incomplete(lightning_study: Completed) -> None:
    record = _lightning(lightning_study, 1)
    assert (record["status"], record["exit_code"], record["fit"]) == ("incomplete", 0, "started")
    assert record["fit_steps"] == {"done": 7, "planned": 20}
    assert record["exception"] == "SystemExit: 0"  # the Lightning callback's on_exception
    assert record["trainer_end"] == "sys.exit(0)"  # the function raised it: the fit says the training did not end
    reason = (
        "exited with code 0 before its training ended: the fit stopped at step 7 of 20 and never reached "
        "on_fit_end; SystemExit: 0"
    )
    assert record["reason"] == reason
    assert record["error"].startswith(reason)


@pytest.mark.slow
def test_os_exit_0_in_the_middle_of_a_fit_is_incomplete(lightning_study: Completed) -> None:
    record = _lightning(lightning_study, 2)
    assert (record["status"], record["exit_code"], record["fit"]) == ("incomplete", 0, "started")
    assert "trainer_end" not in record and "exception" not in record  # the process vanished inside the function
    # epoch 0 (steps 1-4) was flushed before the exit at step 7: the launcher reads the last step recorded
    assert record["reason"] == (
        "exited with code 0 before its training ended: the fit started (step 4 recorded) but never reached on_fit_end"
    )


@pytest.mark.slow
def test_a_click_app_that_trains_to_the_end_then_calls_sys_exit_0_is_completed(lightning_study: Completed) -> None:
    record = _lightning(lightning_study, 0)
    assert (record["status"], record["exit_code"], record["fit"]) == ("completed", 0, "ended")
    assert record["fit_steps"] == {"done": 20, "planned": 20}
    assert record["trainer_end"] == "sys.exit(0)"
    assert "reason" not in record and "error" not in record


@pytest.mark.slow
def test_early_stopping_ends_the_fit_as_lightning_ends_it(lightning_study: Completed) -> None:
    record = _lightning(lightning_study, 3)
    assert (record["status"], record["fit"]) == ("completed", "ended")
    assert record["fit_steps"] == {"done": 8, "planned": 20}  # stopped after 2 of 5 epochs


@pytest.mark.slow
def test_the_report_leaves_incomplete_runs_out_and_lists_them_with_why(lightning_study: Completed) -> None:
    import json

    done = _report(lightning_study.out, "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and {row["n"] for row in rows} == {2}  # replicas 0 and 3 only
    warned = [line for line in done.stderr.splitlines() if "left out of the statistics" in line]
    assert len(warned) == 2, done.stderr
    assert warned[0].endswith(
        "replica=1 left out of the statistics: incomplete (exit code 0): exited with code 0 before its training "
        "ended: the fit stopped at step 7 of 20 and never reached on_fit_end; SystemExit: 0"
    ), warned[0]
    assert warned[1].endswith(
        "replica=2 left out of the statistics: incomplete (exit code 0): exited with code 0 before its training "
        "ended: the fit started (step 4 recorded) but never reached on_fit_end"
    )
    table = _report(lightning_study.out)
    assert table.returncode == 0, table.stderr
    assert "(2 completed runs" in table.stdout
    listed = [line.split() for line in table.stdout.splitlines() if "incomplete" in line.split()]
    expected = [["app", "algo", "1", "incomplete", "0"], ["app", "algo", "2", "incomplete", "0"]]
    assert [words[:5] for words in listed] == expected


# -- Keras and a plain function, --trainer; the rerun ----------------------------------------------------------------
@pytest.fixture(scope="module")
def keras_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Completed, Completed, list[dict[str, Any]]]:
    """The first launch, the same launch again (it reruns what did not complete), the first launch's manifests."""
    tmp = tmp_path_factory.mktemp("incomplete_keras")
    (tmp / "kfit.py").write_text(textwrap.dedent(KERAS_TRAINER))
    args = ("--trainer", "kfit.py:main", "-n", "3", "--parallel", "2", "--keras-backend", "torch")
    first = _replicate(tmp, *args)
    records = [manifest(first.run_dir("kfit", "algo+impl", k)) for k in range(3)]
    return first, _replicate(tmp, *args), records


@pytest.mark.slow
@pytest.mark.skipif(not HAS_KERAS, reason="needs Keras 3 (torch backend)")
def test_keras_sys_exit_0_in_the_middle_of_fit_is_incomplete(keras_study: Any) -> None:
    first, _, records = keras_study
    assert first.returncode == 1, first.stderr
    assert "1 completed, 0 failed, 0 skipped, 2 incomplete in " in first.stdout
    done, stopped = records[0], records[1]
    assert (done["status"], done["fit"], done["fit_steps"], done["trainer_end"]) == (
        "completed",
        "ended",
        {"done": 12, "planned": 12},
        "returned",
    )
    assert (stopped["status"], stopped["exit_code"], stopped["fit"]) == ("incomplete", 0, "started")
    assert stopped["fit_steps"] == {"done": 5, "planned": 12}  # recorded at exit by the callback's atexit hook
    assert stopped["reason"].startswith(
        "exited with code 0 before its training ended: the fit stopped at step 5 of 12 and never reached on_train_end"
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_KERAS, reason="needs Keras 3 (torch backend)")
def test_a_plain_trainer_that_calls_os_exit_0_is_incomplete(keras_study: Any) -> None:
    _, _, records = keras_study
    record = records[2]
    assert (record["status"], record["exit_code"]) == ("incomplete", 0)
    assert "fit" not in record and "trainer_end" not in record
    assert record["reason"] == (
        "exited with code 0 before its training ended: the --trainer function never returned (the process ended "
        "inside it, as os._exit(0) does)"
    )


@pytest.mark.slow
@pytest.mark.skipif(not HAS_KERAS, reason="needs Keras 3 (torch backend)")
def test_a_rerun_runs_incomplete_replicas_again(keras_study: Any) -> None:
    first, again, _ = keras_study
    assert again.returncode == 1, again.stderr
    assert "0 completed, 0 failed, 1 skipped, 2 incomplete in " in again.stdout
    attempts = [manifest(first.run_dir("kfit", "algo+impl", k)).get("attempt") for k in range(3)]
    assert attempts == [1, 2, 2]
    assert (first.run_dir("kfit", "algo+impl", 1) / ".attempts" / "1" / "run.json").is_file()


# -- command mode --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_command_mode_uses_the_injected_callbacks_record_and_trusts_exit_0_without_one(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(textwrap.dedent(LIGHTNING_APP))
    done = _replicate(tmp_path, "-n", "2", "--parallel", "2", "--experiment", "cmd", "--", "python", "app.py")
    assert done.returncode == 1, done.stderr
    plain, stopped = (manifest(done.run_dir("cmd", "algo+impl", k)) for k in range(2))
    # replica 0 trained nothing: no callback evidence either way, exit 0 stays completed
    assert (plain["status"], plain["mode"]) == ("completed", "command") and "fit" not in plain
    assert (stopped["status"], stopped["fit"]) == ("incomplete", "started")
    assert stopped["reason"] == (
        "exited with code 0 before its training ended: the fit stopped at step 7 of 20 and never reached "
        "on_fit_end; SystemExit: 0"
    )


# -- standalone ------------------------------------------------------------------------------------------------------
def test_a_standalone_fit_ended_by_sys_exit_0_is_incomplete(tmp_path: Path) -> None:
    import lightning as L
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset

    from deviate_cb.lightning import DeviateCallback

    class Exits(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(4, 2)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if self.global_step == 3:
                sys.exit(0)
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)

    def trainer(callback: DeviateCallback) -> L.Trainer:
        return L.Trainer(
            max_epochs=2,
            callbacks=[callback],
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator="cpu",
        )

    stopped = DeviateCallback(tmp_path / "runs")
    with pytest.raises(SystemExit):
        trainer(stopped).fit(Exits(), data)
    record = manifest(stopped.run_dir)
    assert (record["status"], record["fit"], record["exception"]) == ("incomplete", "started", "SystemExit: 0")
    assert record["fit_steps"] == {"done": 3, "planned": 8}
    assert incomplete_reason(RunManifest.from_json(record)) == (
        "exited with code 0 before its training ended: the fit stopped at step 3 of 8 and never reached on_fit_end; "
        "SystemExit: 0"
    )

    class Trains(Exits):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return F.cross_entropy(self.net(x), y)

    finished = DeviateCallback(tmp_path / "runs")
    trainer(finished).fit(Trains(), data)
    record = manifest(finished.run_dir)
    assert (record["status"], record["fit"], record["fit_steps"]) == ("completed", "ended", {"done": 8, "planned": 8})


# -- the rule and the launcher's records -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("manifest_", "why"),
    [
        ({"mode": "trainer", "fit": "ended", "trainer_end": "returned"}, None),
        ({"mode": "trainer", "fit": "ended", "trainer_end": "sys.exit(0)"}, None),  # click, Hydra
        ({"mode": "command"}, None),  # no evidence: exit 0 is trusted
        ({"framework": "lightning", "mode": "command", "fit": "ended"}, None),
        ({}, None),  # a manifest of an older version
        (
            {"mode": "trainer", "trainer_end": "sys.exit(0)", "framework": "lightning", "fit": "started"},
            "the fit started but never reached on_fit_end",
        ),
        (
            {"framework": "keras", "fit": "started", "fit_steps": {"done": None, "planned": 1}},
            "the fit started (1 step planned) but never reached on_train_end",
        ),
        (
            {"framework": "keras", "fit": "started", "fit_steps": {"done": 3, "planned": None}},
            "the fit stopped at step 3 and never reached on_train_end",
        ),
        (
            {"mode": "trainer", "exception": "ValueError: a\n  b"},
            "the --trainer function never returned (the process ended inside it, as os._exit(0) does); ValueError: a b",
        ),
    ],
)
def test_the_rule(manifest_: dict[str, Any], why: str | None) -> None:
    recorded = RunManifest.from_json(manifest_)
    assert why_incomplete(recorded) == why
    assert incomplete_reason(recorded) == (None if why is None else INCOMPLETE_PREFIX + why)
    ended = status_of(Outcome(returncode=0), recorded)
    assert ended == ("completed" if why is None else "incomplete")
    assert status_of(Outcome(returncode=1), recorded) == "failed"  # a non-zero exit is failed whatever it recorded
    assert status_of(Outcome(returncode=0)) == "completed"  # without a manifest: the exit code alone


def test_end_fields_put_the_reason_before_the_stderr_tail(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_text("GPU available: False\n")
    left = RunManifest.from_json({"mode": "trainer"})
    end = end_fields(Outcome(returncode=0), log, manifest=left, run_dir=tmp_path)
    assert end.status == "incomplete"
    assert end.error == f"{end.reason}; last stderr lines:\nGPU available: False"
    returned = RunManifest.from_json({"mode": "trainer", "trainer_end": "returned"})
    completed = end_fields(Outcome(returncode=0), log, manifest=returned)
    assert completed.status == "completed" and "reason" not in completed.fields()


def test_the_summary_counts_incomplete_replicas_and_the_exit_status_is_1() -> None:
    replicas = [ReplicaResult(0, 0, Path("r0"), "completed"), ReplicaResult(1, 1, Path("r1"), "incomplete")]
    result = ReplicationResult("runs", "mlp", "algo", replicas, 2.0)
    assert result.exit_status == 1
    assert result.summary() == "1 completed, 0 failed, 0 skipped, 1 incomplete in 2.0 s; run `deviate report runs`"
