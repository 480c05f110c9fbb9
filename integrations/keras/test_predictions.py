"""deviate-replicate with DeviateCallback(predictions=..., weights=...) on real Keras 3 training, per backend.

Per backend (TensorFlow, torch, JAX; CPU), two replicate calls of a tiny trainer (written to the test's
temporary directory): ``control`` (2 replicas) must agree on every prediction and have identical weights,
``algo+impl`` (2 replicas, seeds 0 and 1, noisy labels, a short training) must disagree on some samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deviate_cb.stats.stability.predictions import prediction_churn
from deviate_cb.store.predictions import read_predictions
from deviate_cb.store.weights import read_full_weights, read_weight_sketches
from tests.helpers.keras_helpers import Replicated, replicate

pytestmark = pytest.mark.slow

TRAINER = """
import keras
import numpy as np

from deviate_cb.keras import DeviateCallback, Predictions, Weights


def main(ctx):
    gen = np.random.Generator(np.random.PCG64(1234))  # fixed data; init, order and dropout come from the seed
    x = gen.standard_normal((400, 8)).astype("float32")
    y = ((x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32") + (x[:, 2] > 1)).astype("int32")
    noisy = np.where(gen.random(400) < 0.2, gen.integers(0, 3, 400), y).astype("int32")
    band = np.where(x[300:, 3] > 0, "high", "low")
    callback = DeviateCallback(
        predictions=Predictions(data=(x[300:], y[300:]), every_n_epochs=1, groups={"band": band}),
        weights=Weights(sketch_dim=32, full=True),
    )
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dropout(0.2), keras.layers.Dense(3)]
    )
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x[:300], noisy[:300], batch_size=32, epochs=2, callbacks=[callback], verbose=0)
    return {"n_weights": len(model.weights)}
"""
SNAPSHOTS = ["epoch=0", "epoch=1", "final"]


def _run(backend: str, variant: str, tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    tmp = tmp_path_factory.mktemp(f"stability-{variant.replace('+', '-')}-{backend}")
    spec = tmp / "keras_stability.py"
    spec.write_text(TRAINER)
    args = ["-n", "2", "--parallel", "2", "--keras-backend", backend]
    return replicate(tmp, f"{spec}:main", args, variant=variant)


@pytest.fixture(scope="module")
def control(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    return _run(backend, "control", tmp_path_factory)


@pytest.fixture(scope="module")
def noisy(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    return _run(backend, "algo+impl", tmp_path_factory)


def _final(run_dir: Path) -> dict[str, list]:
    rows = read_predictions(run_dir).to_pydict()
    keep = [i for i, s in enumerate(rows["snapshot"]) if s == "final"]
    return {k: [v[i] for i in keep] for k, v in rows.items()}


def test_control_replicas_record_identical_predictions_and_weights(control: Replicated) -> None:
    assert control.returncode == 0, control.stderr[-3000:]
    dirs = [control.run_dir(k) for k in range(2)]
    for run_dir in dirs:
        rows = read_predictions(run_dir).to_pydict()
        assert list(dict.fromkeys(rows["snapshot"])) == SNAPSHOTS and len(rows["snapshot"]) == 3 * 100
        assert set(_final(run_dir)["group_band"]) == {"high", "low"}
    first, second = (_final(d) for d in dirs)
    assert prediction_churn([first["predicted"], second["predicted"]]).mean == 0.0
    assert first["score"] == second["score"]
    sketches = read_weight_sketches(dirs)
    assert np.array_equal(sketches[0].sketch, sketches[1].sketch)
    full = [read_full_weights(d) for d in dirs]
    assert len(full[0]) == control.final(0)["n_weights"] and list(full[0]) == list(full[1])
    assert all(np.array_equal(full[0][name], full[1][name]) for name in full[0])


def test_algo_impl_replicas_disagree(noisy: Replicated) -> None:
    assert noisy.returncode == 0, noisy.stderr[-3000:]
    predicted = [_final(noisy.run_dir(k))["predicted"] for k in range(2)]
    assert prediction_churn(predicted).mean > 0.0
