"""DeviateCallback(predictions=..., weights=...) on real Lightning training (CPU, tiny models)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from deviate_cb.errors import UsageError
from deviate_cb.lightning import DeviateCallback, Predictions, Weights
from deviate_cb.store.predictions import read_predictions
from deviate_cb.store.weights import read_full_weights, read_weight_sketch
from lightning_cb.models import TinyModule, data, loader, trainer


class PredictingModule(TinyModule):
    """TinyModule whose test/predict steps return predictions; checks that training runs in train mode."""

    def __init__(self, output: str = "tensor") -> None:
        super().__init__()
        self.output = output

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        assert self.training and self.net[2].training, "a prediction snapshot left the module in eval mode"
        x, y = batch[0], batch[1]
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def test_step(self, batch: Any, batch_idx: int) -> Any:
        x = batch["x"] if isinstance(batch, dict) else batch[0]
        logits = self(x)
        return {"loss": torch.tensor(0.0), "preds": logits.softmax(-1)} if self.output == "dict" else logits

    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        return self(batch[0])


class DictData(Dataset):
    """Samples as dicts with a group field."""

    def __init__(self, n: int = 40) -> None:
        self.base = data(n)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> dict[str, Any]:
        x, y = self.base[i]
        return {"x": x, "label": y, "sex": "F" if i % 3 else "M"}


def table(run_dir: Path) -> dict[str, list]:
    return read_predictions(run_dir).to_pydict()


def snapshot_rows(run_dir: Path, name: str) -> dict[str, list]:
    t = table(run_dir)
    keep = [i for i, s in enumerate(t["snapshot"]) if s == name]
    return {k: [v[i] for i in keep] for k, v in t.items()}


def callback(tmp_path: Path, **kwargs: Any) -> DeviateCallback:
    return DeviateCallback(tmp_path / "runs", experiment="p", **kwargs)


def test_rows_match_what_trainer_predict_returns(tmp_path: Path) -> None:
    cb = callback(tmp_path, predictions=True)
    module = PredictingModule()
    t = trainer([cb], max_epochs=1)
    t.fit(module, loader())
    returned = t.predict(module, loader(shuffle=False))
    logits = torch.cat(returned).numpy()
    rows = table(cb.run_dir)
    assert set(rows["snapshot"]) == {"final"}
    assert rows["sample"] == list(range(96))
    assert rows["predicted"] == logits.argmax(1).tolist()
    assert rows["label"] == data().tensors[1].tolist()
    top2 = np.sort(logits, axis=1)[:, ::-1]
    np.testing.assert_allclose(rows["score"], top2[:, 0] - top2[:, 1], rtol=1e-6)  # logit margin
    manifest = json.loads((Path(cb.run_dir) / "run.json").read_text())
    assert manifest["predictions"]["task"] == "classification" and manifest["predictions"]["num_classes"] == 2
    assert manifest["status"] == "completed"


def test_test_stage_dict_outputs_dict_batches_and_group_field(tmp_path: Path) -> None:
    cb = callback(tmp_path, predictions=Predictions(groups="sex"))
    module = PredictingModule(output="dict")
    t = trainer([cb], max_epochs=1)
    t.fit(module, loader())
    t.test(module, DataLoader(DictData(), batch_size=16))
    rows = table(cb.run_dir)
    assert rows["sample"] == list(range(40))
    assert rows["group_sex"] == ["F" if i % 3 else "M" for i in range(40)]
    assert rows["label"] == data(40).tensors[1].tolist()
    assert all(0.5 <= s <= 1.0 for s in rows["score"])  # probabilities: the top one
    module.eval()
    with torch.no_grad():
        expected = module(data(40).tensors[0]).argmax(1).tolist()
    assert rows["predicted"] == expected


def test_data_every_n_epochs_snapshots_groups_and_train_mode(tmp_path: Path) -> None:
    sex = np.array(["F", "M"] * 20)
    eval_loader = loader(40, shuffle=False)
    cb = callback(tmp_path, predictions=Predictions(data=eval_loader, every_n_epochs=2, groups={"sex": sex}))
    module = PredictingModule()
    trainer([cb], max_epochs=4).fit(module, loader())
    rows = table(cb.run_dir)
    assert list(dict.fromkeys(rows["snapshot"])) == ["epoch=1", "epoch=3", "final"]
    assert len(rows["snapshot"]) == 3 * 40
    e1, e3, final = (snapshot_rows(cb.run_dir, s) for s in ("epoch=1", "epoch=3", "final"))
    assert (e1["epoch"][0], e3["epoch"][0]) == (1, 3) and e1["step"][0] == 2 * 6 and e3["step"][0] == 4 * 6
    assert final["predicted"] == e3["predicted"] and final["score"] == e3["score"]  # no training in between
    assert final["group_sex"] == sex.tolist()
    assert module.training and module.net[2].training  # modes restored after the final snapshot
    module.eval()
    with torch.no_grad():
        expected = module(data(40).tensors[0])
    top2 = np.sort(expected.numpy(), axis=1)[:, ::-1]
    assert final["predicted"] == expected.argmax(1).tolist()
    np.testing.assert_allclose(final["score"], top2[:, 0] - top2[:, 1], rtol=1e-5)


def test_named_loop_gives_the_final_snapshot_and_data_the_epoch_ones(tmp_path: Path) -> None:
    config = Predictions(data=loader(24, shuffle=False), every_n_epochs=1, from_stage="test")
    cb = callback(tmp_path, predictions=config)
    module = PredictingModule()
    t = trainer([cb], max_epochs=2)
    t.fit(module, loader())
    assert list(dict.fromkeys(table(cb.run_dir)["snapshot"])) == ["epoch=0", "epoch=1"]  # no extra pass at fit end
    t.predict(module, loader(shuffle=False))  # not the named loop: not recorded
    assert len(table(cb.run_dir)["snapshot"]) == 2 * 24
    t.test(module, loader(40, shuffle=False))
    final = snapshot_rows(cb.run_dir, "final")
    assert final["sample"] == list(range(40)) and final["epoch"][0] == 2


def test_data_uses_forward_without_predict_step(tmp_path: Path) -> None:
    cb = callback(tmp_path, predictions=Predictions(data=loader(32, shuffle=False)))
    module = TinyModule()
    trainer([cb], max_epochs=1).fit(module, loader())
    module.eval()
    with torch.no_grad():
        expected = module(data(32).tensors[0]).argmax(1).tolist()
    assert table(cb.run_dir)["predicted"] == expected


def test_resumed_run_does_not_duplicate_snapshots(tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "ckpt"
    predictions = Predictions(data=loader(24, shuffle=False), every_n_epochs=1)
    cb = callback(tmp_path, predictions=predictions)
    checkpoint = ModelCheckpoint(dirpath=ckpt_dir, save_last=True)
    trainer([cb, checkpoint], max_epochs=2, enable_checkpointing=True).fit(PredictingModule(), loader())
    first_dir = Path(cb.run_dir)
    assert list(dict.fromkeys(table(first_dir)["snapshot"])) == ["epoch=0", "epoch=1", "final"]

    resumed = callback(tmp_path, predictions=predictions)
    t = trainer([resumed, ModelCheckpoint(dirpath=ckpt_dir)], max_epochs=4, enable_checkpointing=True)
    t.fit(PredictingModule(), loader(), ckpt_path=str(ckpt_dir / "last.ckpt"))
    assert Path(resumed.run_dir) == first_dir
    rows = table(first_dir)
    counts = {s: rows["snapshot"].count(s) for s in dict.fromkeys(rows["snapshot"])}
    assert counts == {"epoch=0": 24, "epoch=1": 24, "epoch=2": 24, "epoch=3": 24, "final": 24}
    assert snapshot_rows(first_dir, "final")["epoch"][0] == 4
    assert resumed.state_dict()["prediction_snapshots"] == ["epoch=0", "epoch=1", "epoch=2", "epoch=3", "final"]


def test_weights_sketch_and_full(tmp_path: Path) -> None:
    module = TinyModule()
    module.register_buffer("steps_seen", torch.tensor(3))  # an integer buffer is not a weight
    cb = callback(tmp_path, weights=Weights(sketch_dim=32, sketch_seed=7, full=True))
    trainer([cb], max_epochs=1).fit(module, loader())
    full = read_full_weights(cb.run_dir)
    expected = {k: v for k, v in module.state_dict().items() if v.is_floating_point()}
    assert list(full) == list(expected) == ["net.0.weight", "net.0.bias", "net.3.weight", "net.3.bias"]
    for name, tensor in expected.items():
        assert full[name].dtype == np.float64
        np.testing.assert_array_equal(full[name], tensor.double().numpy().reshape(-1))
    sketch = read_weight_sketch(cb.run_dir)
    assert sketch.sketch.shape == (32,) and sketch.sketch_seed == 7
    assert sketch.num_params == sum(t.numel() for t in expected.values())
    manifest = json.loads((Path(cb.run_dir) / "run.json").read_text())
    assert manifest["weights"]["full"] is True and "predictions" not in manifest


def test_options_off_write_nothing(tmp_path: Path) -> None:
    cb = callback(tmp_path)
    t = trainer([cb], max_epochs=1)
    module = PredictingModule()  # returns predictions from test_step, but recording them is off
    t.fit(module, loader())
    t.test(module, loader(shuffle=False))
    written = sorted(p.name for p in Path(cb.run_dir).iterdir())
    assert written == ["fingerprint.json", "metrics.parquet", "run.json", "timings.parquet"], written


def test_test_step_returning_nothing_warns(tmp_path: Path) -> None:
    cb = callback(tmp_path, predictions=True)
    t = trainer([cb], max_epochs=1)
    module = TinyModule()  # its test_step only logs
    t.fit(module, loader())
    with pytest.warns(UserWarning, match="test_step returned nothing"):
        t.test(module, loader(shuffle=False))
    assert not (Path(cb.run_dir) / "predictions.parquet").exists()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"predictions": 3}, TypeError, r"`predictions` must be True, False, None or .*Received: predictions=3\."),
        ({"weights": "yes"}, TypeError, r"`weights` must be .*Received: weights='yes'\."),
        ({"predictions": Predictions(data=torch.zeros(3))}, TypeError, r"must be a DataLoader"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        DeviateCallback(**kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Predictions(every_n_epochs=0, data=[]), r"`every_n_epochs` must be a positive integer"),
        (lambda: Predictions(every_n_epochs=2), r"`every_n_epochs` needs `data`"),
        (lambda: Predictions(from_stage="val"), r"`from_stage` must be one of"),
        (lambda: Predictions(groups=3), r"`groups` must be a mapping"),
        (lambda: Predictions(groups={"sex": "F"}), r"`groups\['sex'\]` must be an array"),
        (lambda: Predictions(labels=1.5), r"`labels` must be a batch index"),
        (lambda: Predictions(data=iter([])), r"re-iterable"),
        (lambda: Weights(sketch_dim=-1), r"`sketch_dim` must be a positive integer"),
        (lambda: Weights(full="yes"), r"`full` must be True or False"),
    ],
)
def test_bad_config_is_one_line(make: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_shuffled_data_is_refused_at_setup(tmp_path: Path) -> None:
    cb = callback(tmp_path, predictions=Predictions(data=loader(16, shuffle=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UsageError, match="shuffles"):
            trainer([cb], max_epochs=1).fit(TinyModule(), loader())


DDP_SCRIPT = """
import sys

sys.path.insert(0, {tests!r})

import lightning as L
import torch

from deviate_cb.lightning import DeviateCallback, Predictions, Weights
from lightning_cb.models import loader
from lightning_cb.test_predictions import PredictingModule

if __name__ == "__main__":
    torch.set_num_threads(1)
    callback = DeviateCallback(
        {out!r},
        experiment="ddp",
        predictions=Predictions(data=loader(40, shuffle=False), every_n_epochs=1),
        weights=Weights(sketch_dim=8),
    )
    options = dict(accelerator="cpu", devices=2, strategy="ddp", logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False)
    trainer = L.Trainer(max_epochs=2, callbacks=[callback], **options)
    module = PredictingModule()
    trainer.fit(module, loader())
"""


@pytest.mark.slow
def test_ddp_rank_zero_predicts_on_the_whole_set(tmp_path: Path) -> None:
    import subprocess
    import sys

    tests = str(Path(__file__).resolve().parents[1])
    script = tmp_path / "ddp_predictions.py"
    script.write_text(DDP_SCRIPT.format(tests=tests, out=str(tmp_path / "runs")))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    replicas = sorted((tmp_path / "runs" / "experiment=ddp" / "variant=standalone").iterdir())
    assert [p.name for p in replicas] == ["replica=0"]
    rows = table(replicas[0])
    counts = {s: rows["snapshot"].count(s) for s in dict.fromkeys(rows["snapshot"])}
    assert counts == {"epoch=0": 40, "epoch=1": 40, "final": 40}  # the whole set, once, by rank zero
    assert read_weight_sketch(replicas[0]).sketch.shape == (8,)
