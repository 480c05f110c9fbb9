"""deviate_cb.keras.DeviateCallback(predictions=..., weights=...) on real Keras 3 training (torch backend, CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest

from deviate_cb.errors import UsageError
from deviate_cb.keras import DeviateCallback, Predictions, Weights
from deviate_cb.store.predictions import read_predictions
from deviate_cb.store.weights import read_full_weights, read_weight_sketch
from keras_cb.models import data, model


def table(run_dir: Path, snapshot: str | None = None) -> dict[str, list]:
    rows = read_predictions(run_dir).to_pydict()
    if snapshot is None:
        return rows
    keep = [i for i, s in enumerate(rows["snapshot"]) if s == snapshot]
    return {k: [v[i] for i in keep] for k, v in rows.items()}


def test_arrays_every_n_epochs_groups_and_final_match_model_predict(tmp_path: Path) -> None:
    x, y = data(160)
    x_eval, y_eval = data(50, seed=1)
    sex = np.array(["F", "M"] * 25)
    config = Predictions(data=(x_eval, y_eval), every_n_epochs=2, groups={"sex": sex})
    cb = DeviateCallback(tmp_path / "runs", predictions=config)
    m = model()
    m.fit(x, y, batch_size=32, epochs=4, callbacks=[cb], verbose=0)
    rows = table(cb.run_dir)
    assert list(dict.fromkeys(rows["snapshot"])) == ["epoch=1", "epoch=3", "final"]
    e1, e3, final = (table(cb.run_dir, s) for s in ("epoch=1", "epoch=3", "final"))
    assert (e1["epoch"][0], e1["step"][0], e3["step"][0]) == (1, 10, 20)  # 5 batches per epoch
    assert final["predicted"] == e3["predicted"]  # taken once: nothing trained in between
    logits = m.predict(x_eval, verbose=0)
    assert final["sample"] == list(range(50))
    assert final["predicted"] == logits.argmax(1).tolist()
    assert final["label"] == y_eval.tolist()
    assert final["group_sex"] == sex.tolist()
    top2 = np.sort(logits, axis=1)[:, ::-1]
    np.testing.assert_allclose(final["score"], top2[:, 0] - top2[:, 1], rtol=1e-5)
    manifest = json.loads((Path(cb.run_dir) / "run.json").read_text())
    assert manifest["predictions"]["snapshots"] == ["epoch=1", "epoch=3", "final"]
    assert manifest["status"] == "completed"


def test_tf_data_batches_one_hot_labels_and_softmax(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    x, y = data(96)
    one_hot = np.eye(2, dtype="float32")[y]
    dataset = tf.data.Dataset.from_tensor_slices((x, one_hot)).batch(32)
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer="sgd", loss="categorical_crossentropy")
    cb = DeviateCallback(tmp_path / "runs", predictions=Predictions(data=dataset))
    m.fit(dataset, epochs=1, callbacks=[cb], verbose=0)
    final = table(cb.run_dir, "final")
    probs = m.predict(x, verbose=0)
    assert final["label"] == y.tolist()  # one-hot labels become classes
    assert final["predicted"] == probs.argmax(1).tolist()
    np.testing.assert_allclose(final["score"], probs.max(1), rtol=1e-5)  # probabilities: the top one


def test_py_dataset_with_group_function(tmp_path: Path) -> None:
    x, y = data(64)

    class Batches(keras.utils.PyDataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            return x[16 * i : 16 * (i + 1)], y[16 * i : 16 * (i + 1)]

    def band(batch: Any) -> dict[str, np.ndarray]:
        return {"band": np.where(batch[0][:, 2] > 0, "high", "low")}

    cb = DeviateCallback(tmp_path / "runs", predictions=Predictions(data=Batches(), groups=band))
    m = model()
    m.fit(x, y, epochs=1, callbacks=[cb], verbose=0)
    final = table(cb.run_dir, "final")
    assert final["label"] == y.tolist()
    assert final["group_band"] == np.where(x[:, 2] > 0, "high", "low").tolist()
    assert final["predicted"] == m.predict(x, verbose=0).argmax(1).tolist()


def test_second_fit_replaces_final_and_weights(tmp_path: Path) -> None:
    x, y = data(64)
    cb = DeviateCallback(
        tmp_path / "runs", predictions=Predictions(data=(x, y)), weights=Weights(sketch_dim=16, full=True)
    )
    m = model()
    m.fit(x, y, epochs=1, callbacks=[cb], verbose=0)
    m.fit(x, y, epochs=1, callbacks=[cb], verbose=0)
    rows = table(cb.run_dir)
    assert rows["snapshot"] == ["final"] * 64
    assert rows["predicted"] == m.predict(x, verbose=0).argmax(1).tolist()
    full = read_full_weights(cb.run_dir)
    assert list(full) == [v.path for v in m.weights]
    for variable in m.weights:
        np.testing.assert_array_equal(full[variable.path], np.asarray(variable.numpy(), np.float64).reshape(-1))
    sketch = read_weight_sketch(cb.run_dir)
    assert sketch.sketch.shape == (16,) and sketch.num_params == sum(int(np.prod(v.shape)) for v in m.weights)


def test_options_off_write_nothing_new(tmp_path: Path) -> None:
    x, y = data(64)
    cb = DeviateCallback(tmp_path / "runs")
    model().fit(x, y, epochs=1, callbacks=[cb], verbose=0)
    assert sorted(p.name for p in Path(cb.run_dir).iterdir()) == [
        "fingerprint.json",
        "metrics.parquet",
        "run.json",
        "timings.parquet",
    ]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"predictions": True}, UsageError, r"needs the evaluation set"),
        ({"predictions": "yes"}, TypeError, r"`predictions` must be .*Received: predictions='yes'"),
        ({"weights": 1}, TypeError, r"`weights` must be .*Received: weights=1\."),
    ],
)
def test_bad_arguments(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as info:
        DeviateCallback(**kwargs)
    assert "\n" not in str(info.value)
