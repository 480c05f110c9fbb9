"""Tiny Keras 3 trainings for ``deviate audit``: a deterministic one, and one whose ``jitter`` layer adds noise from
fresh operating-system entropy while training (so ``control`` replicas differ at its output from step 0)."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


class Jitter(keras.layers.Layer):
    """Adds unseeded noise to its input while training."""

    def call(self, x: Any, training: Any = None) -> Any:
        if training:
            noise = np.random.default_rng().normal(0.0, 1e-3, size=tuple(x.shape)).astype("float32")
            return x + keras.ops.convert_to_tensor(noise)
        return x


def _fit(middle: keras.layers.Layer) -> dict[str, float]:
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu", name="dense_in"),
            middle,
            keras.layers.Dense(2, name="dense_out"),
        ],
        name="net",
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = np.random.default_rng(1234).standard_normal((96, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    history = model.fit(x, y, epochs=1, batch_size=16, shuffle=True, verbose=0)
    return {"loss": float(history.history["loss"][-1])}


def deterministic() -> dict[str, float]:
    return _fit(keras.layers.Dense(16, activation="relu", name="dense_mid"))


def noisy_layer() -> dict[str, float]:
    return _fit(Jitter(name="jitter"))
