"""The Trainer's own MLflow run (``report_to="mlflow"``) learns the replica's tags, and run.json links to it, so
``deviate export`` attaches to it as to a Lightning ``MLFlowLogger``'s run (a real MLflow store, SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deviate_cb.transformers import DeviateCallback
from tests.transformers_cb.models import trainer

pytestmark = pytest.mark.slow


def test_the_trainers_mlflow_run_is_tagged_and_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    callback = DeviateCallback(tmp_path / "runs", seed=4, deterministic=False)
    trainer(tmp_path, [callback], report_to="mlflow", num_train_epochs=1).train()
    (found,) = mlflow.MlflowClient(uri).search_runs(
        [e.experiment_id for e in mlflow.MlflowClient(uri).search_experiments()]
    )
    assert found.data.tags["deviate.seed"] == "4" and found.data.tags["deviate.determinism"] == "false"
    assert "eval_loss" in found.data.metrics  # the Trainer's own logging went on as before
    links = json.loads((Path(callback.run_dir) / "run.json").read_text())["tracker_runs"]
    assert [(link["tracker"], link["run_id"]) for link in links] == [("mlflow", found.info.run_id)]


def test_the_trainers_wandb_run_is_tagged_and_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``report_to="wandb"`` offline: the run W&B itself writes holds the tags (read back by ``deviate import
    wandb``'s reader) and run.json links to it."""
    wandb = pytest.importorskip("wandb")
    from deviate_cb.trackers.importing.wandb_source import read_wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    callback = DeviateCallback(tmp_path / "runs", seed=4)
    trainer(tmp_path, [callback], report_to="wandb", num_train_epochs=1).train()
    wandb.finish()  # as the end of the script does: the Trainer leaves its W&B run open
    links = json.loads((Path(callback.run_dir) / "run.json").read_text())["tracker_runs"]
    assert [link["tracker"] for link in links] == ["wandb"]
    notes: list[str] = []
    found_runs = read_wandb(tmp_path / "wandb", notes)
    assert len(found_runs) == 1, notes
    found = found_runs[0]
    assert found.run_id == links[0]["run_id"]
    assert found.keys["tags.deviate.seed"] == "4"
