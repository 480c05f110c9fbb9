"""Keras metrics are selected as Keras spells them (issue 26, item 7): Keras reports the validation loss as
``val_loss``; it is recorded as stage ``val``, name ``loss`` and shown as ``val/loss`` beside ``train/loss``, and
``--metric val_loss`` / ``--direction val_accuracy=max`` name it as the user knows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deviate_cb.cli.main import main as deviate
from deviate_cb.keras import DeviateCallback
from keras_cb.models import data, model


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("keras-names") / "runs"
    x, y = data()
    for seed in (1, 2):
        cb = DeviateCallback(root, experiment="k", seed=seed)
        model().fit(x, y, batch_size=32, epochs=2, validation_split=0.2, callbacks=[cb], verbose=0)
    return root


def test_val_loss_selects_the_validation_loss(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert deviate(["report", str(study), "--metric", "val_loss", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert [(r["metric"], r["n"]) for r in rows] == [("val/loss", 2)], (rows, err)


def test_a_direction_spelled_as_keras_names_it(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", str(study), "--metric", "val_accuracy", "--aggregate", "best", "--direction", "val_accuracy=max"]
    assert deviate([*args, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert [r["metric"] for r in json.loads(out)] == ["val/accuracy"]
    assert "names no metric" not in err and "direction" not in err, err
