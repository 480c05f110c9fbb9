"""Live tagging: the user's own MLflow, TensorBoard and W&B runs learn the replica they belong to.

Real replicas of deviate-replicate train a tiny Lightning model with an ``MLFlowLogger`` (pointing at the suite's
loopback MLflow server), a ``TensorBoardLogger`` and an offline ``WandbLogger``; afterwards the MLflow runs carry
``deviate.variant``, ``deviate.replica``, ``deviate.seed``, ``deviate.determinism`` and ``deviate.experiment`` as
tags, Lightning's ``hparams.yaml`` holds them and the W&B run's config too. A plain run (no deviate-replicate)
gets only the seed and determinism the callback was given. A Keras replica fitting inside ``mlflow.start_run()``
gets the tags on that run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from test_export_wandb import read_run

REPO = Path(__file__).resolve().parents[2]

#: The training step both Lightning scripts share.
STEP = """    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss
"""

LIGHTNING = """
import os

import lightning as L
import torch
from lightning.pytorch.loggers import MLFlowLogger, TensorBoardLogger, WandbLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

{step}
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(root, callbacks=None):
    torch.set_num_threads(1)
    L.seed_everything(42)  # the project seeds itself, as projects do
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(16, 4, generator=gen)
    data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
    loggers = [TensorBoardLogger(save_dir=str(root), name="tb")]
    if os.environ.get("LIVE_MLFLOW_URI"):
        loggers.append(MLFlowLogger(experiment_name="live-tags", tracking_uri=os.environ["LIVE_MLFLOW_URI"]))
    if os.environ.get("LIVE_WANDB"):
        loggers.append(WandbLogger(project="live-tags", save_dir=str(root), offline=True))
    trainer = L.Trainer(max_epochs=1, logger=loggers, callbacks=callbacks, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        default_root_dir=str(root))
    trainer.fit(Tiny(), data)


def main(ctx):
    fit(ctx.run_dir)


if __name__ == "__main__":  # a plain run: the callback is given a seed, no deviate-replicate
    fit(os.environ["PLAIN_ROOT"], callbacks=[DeviateCallback(seed=5, out_dir=os.environ["PLAIN_ROOT"])])
""".replace("{step}", STEP)

KERAS = """
import os

import mlflow
import numpy as np
import keras


def main(ctx):
    mlflow.set_tracking_uri(os.environ["LIVE_MLFLOW_URI"])
    mlflow.set_experiment("live-tags-keras")
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with mlflow.start_run(run_name=f"keras-{ctx.replica}"):
        model.fit(x, y, epochs=1, batch_size=8, verbose=0)
"""


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def replicate(folder: Path, script: str, *args: str, env: dict[str, str]) -> Path:
    out = folder / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "--trainer", f"{script}:main", *args, "--out", str(out)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_replicas_tag_their_mlflow_and_tensorboard_runs(mlflow_server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    (tmp_path / "train.py").write_text(textwrap.dedent(LIGHTNING))
    env = child_env(LIVE_MLFLOW_URI=mlflow_server, LIVE_WANDB="1")
    out = replicate(tmp_path, "train.py", "-n", "2", "--variant", "algo+impl", "--experiment", "live", env=env)

    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("live-tags")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    tags = sorted(({k: v for k, v in r.data.tags.items() if k.startswith("deviate.")} for r in runs),
                  key=lambda t: t.get("deviate.replica", ""))  # fmt: skip
    seeds = []
    for k, found in enumerate(tags):
        run_dir = out / "experiment=live" / "variant=algo+impl" / f"replica={k}"
        manifest = json.loads((run_dir / "run.json").read_text())
        seeds.append(manifest["seed"])
        # Lightning printed the seed its seed_everything applied: the project's 42, mapped from the replica's seed
        (printed,) = re.findall(r"Seed set to (\d+)", (run_dir / "stderr.log").read_text())
        assert found == {
            "deviate.experiment": "live",
            "deviate.variant": "algo+impl",
            "deviate.replica": str(k),
            "deviate.seed": str(manifest["seed"]),
            "deviate.seed_everything": printed,
            "deviate.determinism": "false",
        }
    assert len(tags) == 2 and seeds[0] != seeds[1]

    # Each replica recorded the run it logged to; an export to that server attaches the study to those runs (no
    # copies), and the study run goes beside them, in their experiment
    by_replica = {r.data.tags["deviate.replica"]: r for r in runs}
    for k in range(2):
        manifest = json.loads((out / "experiment=live" / "variant=algo+impl" / f"replica={k}" / "run.json").read_text())
        (link,) = [t for t in manifest["tracker_runs"] if t["tracker"] == "mlflow"]
        assert link == {"tracker": "mlflow", "uri": mlflow_server, "run_id": by_replica[str(k)].info.run_id,
                        "experiment_id": experiment.experiment_id}  # fmt: skip
        assert {t["tracker"] for t in manifest["tracker_runs"]} == {"mlflow", "wandb"}
    sent = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "export", "mlflow", str(out), "--tracking-uri", mlflow_server,
         "--no-page"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert "0 exported, 0 replaced, 0 unchanged, 2 linked" in sent.stdout, sent.stdout
    after = client.search_runs([experiment.experiment_id])
    (study_run,) = [r for r in after if r.data.tags.get("deviate.role") == "study"]
    assert len(after) == 3 and client.get_experiment_by_name("live") is None  # no experiment of copies
    for r in after:
        if r.info.run_id != study_run.info.run_id:
            assert r.data.tags["deviate.study_run"] == study_run.info.run_id

    # Imported into the store whose replicas logged them: they are those replicas already, never counted twice; a
    # run of the experiment that no replica logged is imported
    other = client.create_run(experiment.experiment_id, run_name="by-hand")
    client.log_metric(other.info.run_id, "train_loss", 0.5, step=1)
    client.set_terminated(other.info.run_id)
    imported = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "import", "mlflow", "--tracking-uri", mlflow_server,
         "--experiment", "live-tags", "--out", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert "2 run(s) left out: replicas of" in imported.stderr and "1 parent run left out" in imported.stderr
    assert "experiment=live-tags variant=imported: 1 new" in imported.stdout, imported.stdout
    assert len(list(out.glob("experiment=live/variant=*/replica=*"))) == 2

    for k in range(2):  # Lightning's TensorBoardLogger wrote them with the hyperparameters
        run_dir = out / "experiment=live" / "variant=algo+impl" / f"replica={k}"
        hparams = yaml.safe_load((run_dir / "tb" / "version_0" / "hparams.yaml").read_text())
        assert hparams["deviate.variant"] == "algo+impl" and hparams["deviate.replica"] == str(k)
        assert hparams["deviate.seed"] == str(seeds[k])
        assert list((run_dir / "tb" / "version_0").glob("events.out.tfevents.*"))
        (wandb_run,) = (run_dir / "wandb").glob("offline-run-*")  # W&B offline: the run's own .wandb file
        wandb_record = read_run(wandb_run)
        assert (wandb_record["group"], wandb_record["job_type"]) == ("live", "algo+impl")  # W&B's own grouping
        config = wandb_record["config"]
        assert config["deviate.variant"] == "algo+impl" and config["deviate.replica"] == str(k)
        assert config["deviate.seed"] == str(seeds[k]) and config["deviate.determinism"] == "false"


@pytest.mark.slow
def test_a_plain_run_gets_only_the_seed_it_was_given(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(LIGHTNING))
    root = tmp_path / "plain"
    proc = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, env=child_env(PLAIN_ROOT=str(root)), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    hparams = yaml.safe_load((root / "tb" / "version_0" / "hparams.yaml").read_text())
    # the callback was given 5, then the script's own seed_everything(42) set the seed its training ran from
    assert {k: v for k, v in hparams.items() if k.startswith("deviate.")} == {
        "deviate.seed": "5",
        "deviate.seed_everything": "42",
    }


@pytest.mark.slow
def test_a_keras_replica_tags_the_active_mlflow_run(mlflow_server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    (tmp_path / "train.py").write_text(textwrap.dedent(KERAS))
    env = child_env(LIVE_MLFLOW_URI=mlflow_server, KERAS_BACKEND="torch")
    replicate(tmp_path, "train.py", "-n", "1", "--variant", "control", "--experiment", "k", env=env)
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("live-tags-keras")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.tags["deviate.variant"] == "control" and run.data.tags["deviate.replica"] == "0"
    assert run.data.tags["deviate.determinism"] == "true" and run.data.tags["deviate.experiment"] == "k"


HPARAMS = """
import sys

import lightning as L
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback


class Tiny(L.LightningModule):
    def __init__(self, lr=0.1, width=4):
        super().__init__()
        self.save_hyperparameters(logger=sys.argv[2] == "logged")
        self.net = nn.Linear(self.hparams.width, 2)

{step}
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


x = torch.randn(16, 4, generator=torch.Generator().manual_seed(0))
trainer = L.Trainer(max_epochs=1, logger=TensorBoardLogger(sys.argv[1], name="tb"), accelerator="cpu",
                    callbacks=[DeviateCallback(seed=5, out_dir=sys.argv[1])], enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Tiny(), DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8))
""".replace("{step}", STEP)


def hparams_sessions(logdir: Path) -> tuple[list[list[str]], int]:
    """The hyperparameter names of every HParams session start in ``logdir``'s event files, and how many
    ``hp_metric`` values were written (what TensorBoard's HParams tab reads: it keeps the first session)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    sessions, hp_metric = [], 0
    for path in sorted(logdir.glob("**/events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                hp_metric += value.tag == "hp_metric"
                if value.metadata.plugin_data.plugin_name != "hparams":
                    continue
                data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
                if data.HasField("session_start_info"):
                    sessions.append(sorted(data.session_start_info.hparams))  # a protobuf map: no order
    return sessions, hp_metric


@pytest.mark.slow
@pytest.mark.parametrize("logged", ["logged", "not-logged"])
def test_tensorboard_hparams_tab_keeps_the_users_hyperparameters(logged: str, tmp_path: Path) -> None:
    """TensorBoard keeps the first hyperparameters of a run: ours go in with the model's, after them, once; where
    the model logs none (``save_hyperparameters(logger=False)``), ours are logged alone at the start of training."""
    (tmp_path / "train.py").write_text(textwrap.dedent(HPARAMS))
    root = tmp_path / "plain"
    proc = subprocess.run(
        [sys.executable, "train.py", str(root), logged], cwd=tmp_path, env=child_env(), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    sessions, hp_metric = hparams_sessions(root / "tb")
    expected = ["lr", "width", "deviate.seed"] if logged == "logged" else ["deviate.seed"]
    assert sessions == [sorted(expected)] and hp_metric == 1
    hparams = yaml.safe_load((root / "tb" / "version_0" / "hparams.yaml").read_text())
    assert list(hparams) == expected and hparams["deviate.seed"] == "5"  # the user's first
